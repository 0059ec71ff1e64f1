"""Acceptance: graph breaks in awkward places still give eager's results.

print() is the graph break: inside loops (for/while/else, nested, zip/enumerate),
inside `with no_grad()`, try/finally and user context managers, inside inlined
functions and closures with nonlocal, comprehensions and generator expressions,
between values on the stack, with swapped/deleted locals - each called several
times with changing inputs (cache hits through the resume functions).
Helpers: dynamo_lite/testing.py.
"""
import contextlib

import pytest
import torch

from dynamo_lite.testing import check_calls
from dynamo_lite.testing import print_with_graph_break as print  # noqa: A001 - a graph break at each print

CALLS = [(torch.ones(2), [1, 2]), (torch.ones(2) * -2, [1, 2]), (torch.ones(3), [1, 2, 3]), (torch.ones(2), [1, 2])]
CASES = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


@case
def loop_body_breaks(x, l):
    for i in range(3):
        x = x + i
        print("i", i)
        l.append(i)
    return x, l


@case
def while_else_with_break_statement(x, l):
    i = 0
    while i < 3:
        x = x * 2
        print(i)
        i += 1
        if i == 2:
            break
    else:
        x = x - 100
    return x, i


@case
def nested_loops(x, l):
    for i in range(2):
        for j in range(2):
            print(i, j)
            x = x + i * j
    return x


@case
def continue_and_break_in_loop(x, l):
    out = []
    for i, t in enumerate([x, x * 2, x * 3]):
        if i == 1:
            continue
        print("t", i)
        out.append(t + i)
    return out


@case
def loop_over_argument_list(x, l):
    for v in l:
        print(v)
        x = x + v
    l.append(99)
    return x


@case
def inside_no_grad(x, l):
    with torch.no_grad():
        y = x * 2
        print("in")
        z = y * x
    return z, z.requires_grad, torch.is_grad_enabled()


@case
def inside_try_except_finally(x, l):
    try:
        y = x + 1
        print("try")
        raise ValueError("v")
    except ValueError as e:
        y = y * 2
        print("exc", e)
    finally:
        l.append("fin")
    return y


@case
def inside_inlined_function(x, l):
    def helper(t):
        t = t + 1
        print("helper")
        return t * 2

    return helper(x) + helper(x * 3)


@case
def inside_closure_with_nonlocal(x, l):
    count = 0

    def inc(t):
        nonlocal count
        count += 1
        print("count", count)
        return t + count

    y = inc(x)
    y = inc(y)
    return y, count


@case
def inside_list_comprehension(x, l):
    return [print(i) or x * i for i in range(3)]


@case
def inside_generator_expression(x, l):
    return sum(print(i) or x * i for i in range(3))


@case
def values_on_the_stack(x, l):
    return x + 1, print("mid"), x * 2


@case
def inside_user_contextmanager(x, l):
    @contextlib.contextmanager
    def ctx():
        l.append("enter")
        yield
        l.append("exit")

    with ctx():
        y = x + 1
        print("inside")
        y = y * 2
    return y


@case
def dict_iteration(x, l):
    out = {}
    for k, v in {"a": x, "b": x * 2}.items():
        print(k)
        out[k] = v + 1
    return out


@case
def data_dependent_branch_in_loop(x, l):
    total = 0
    for i in range(4):
        if (x * i).sum() > 3:
            total += 1
        x = x + 0.5
    return x, total


@case
def item_in_loop(x, l):
    vals = [(x * i).sum().item() for i in range(3)]
    return vals, x + sum(vals)


@case
def return_from_loop_after_break(x, l):
    for i in range(5):
        print(i)
        if i == 2:
            return x * i
    return x


@case
def argument_list_mutated_between_breaks(x, l):
    l.append(x.sum())
    print("a")
    l.append(x.mean())
    print("b")
    l[0] = l[0] * 2
    return x


@case
def zip_loop(x, l):
    acc = []
    for a, b in zip([x, x + 1], [1, 2]):
        print(b)
        acc.append(a * b)
    return acc


@case
def while_true_loop(x, l):
    n = 0
    while True:
        n += 1
        x = x + n
        print(n)
        if n >= 3:
            break
    return x


@case
def generator_function_with_print(x, l):
    def gen():
        for i in range(3):
            print("gen", i)
            yield x * i

    return list(gen())


@case
def swapped_locals(x, l):
    a, b = x, x * 2
    print("p")
    a, b = b, a
    print("q")
    return a - b


@case
def deleted_local(x, l):
    y = x + 1
    del x
    print("p")
    return y


@case
def augmented_assign_to_argument_list(x, l):
    l += [1]
    print("x")
    l += [2]
    return x + len(l)


@case
def kwargs_of_inlined_call(x, l):
    def h(a, b=1, **kw):
        print(sorted(kw))
        return a * b + len(kw)

    return h(x, b=2, c=3, d=4)


@case
def deep_inlined_chain(x, l):
    def a(t):
        return b(t) + 1

    def b(t):
        print("deep")
        return t * 2

    return a(x)


@case
def recursion_reaching_break(x, l):
    def r(t, n):
        if n == 0:
            print("base")
            return t
        return r(t + 1, n - 1)

    return r(x, 3)


@case
def list_appended_while_iterated(x, l):
    items = [x, x * 2]
    out = []
    for t in items:
        print("t")
        if len(items) < 4:
            items.append(t + 10)
        out.append(t.sum())
    return out, items


@case
def iterator_partly_consumed_then_list_grows(x, l):
    it = iter(l)
    first = next(it)
    print("b")
    l.append(7)
    return x * first, list(it)


@case
def dict_grows_while_iterated(x, l):
    d = {"a": 1}
    for k in d:
        print(k)
        d["b"] = 2
    return x


@case
def dict_grows_before_break_while_iterated(x, l):
    d = {"a": 1}
    for k in d:
        d["b"] = 2
        print(k)
    return x


@case
def dict_items_values_iterated_with_break(x, l):
    d = {"a": x, "b": x * 2}
    out = []
    for k, v in d.items():
        print(k)
        out.append(v + 1)
    for v in d.values():
        print("v")
        out.append(v * 3)
    return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_graph_break_placement(name):
    check_calls(CASES[name], CALLS, graphs=None)
