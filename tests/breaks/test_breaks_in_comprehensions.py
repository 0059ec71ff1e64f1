"""Graph breaks inside list, set and dict comprehensions: the rest of the function stays compiled.

On 3.11 a comprehension is a function of its own: the frame breaks at its call and resumes
after it.  From 3.12 on comprehensions are inlined into the function (PEP 709): a break inside
one stops the trace before the comprehension, Python runs it, and the frame resumes after it
(symbolic/translator.py, codegen/resume.py): after its END_FOR on 3.12, after the POP_TOP that
follows the END_FOR on 3.13 (an exhausted FOR_ITER skips both there).  The tests state what both must show: eager's
results, and the tensor work after the comprehension in a graph of its own (not run eagerly).
"""
import dis

import torch

from dynamo_lite.testing import check_calls
from dynamo_lite.testing import print_with_graph_break as print  # noqa: A001 - a graph break at each print

CALLS = [torch.ones(3), torch.arange(3.0), torch.ones(4) * -2, torch.ones(3)]


def _ops(gm) -> set:
    return {getattr(n.target, "__name__", str(n.target)) for n in gm.graph.nodes
            if n.op in ("call_function", "call_method")}


def _graph_with(counter, *ops) -> list:
    """The graphs holding all of ``ops``."""
    return [gm for gm in counter.graphs if set(ops) <= _ops(gm)]


def test_break_in_list_comprehension_keeps_the_work_after_it_compiled():
    def f(x):
        y = x.cos()
        out = [print(i) or y * i for i in range(3)]
        return torch.stack(out).sin() + 1

    # the comprehension is really there, with the break inside it
    assert any(i.opname == "LIST_APPEND" for i in dis.get_instructions(f.__code__)) or \
        any(isinstance(c, type(f.__code__)) and c.co_name == "<listcomp>" for c in f.__code__.co_consts)
    counter = check_calls(f, CALLS)
    assert _graph_with(counter, "cos"), [_ops(g) for g in counter.graphs]
    after = _graph_with(counter, "stack", "sin")
    assert after, [_ops(g) for g in counter.graphs]
    assert all("cos" not in _ops(g) for g in after)  # resumed after the comprehension


def test_break_in_set_and_dict_comprehensions():
    def f(x):
        keys = {print(i) or i % 2 for i in range(4)}
        table = {k: print(k) or x * k for k in sorted(keys)}
        return (table[0] + table[1]).tanh(), len(keys)

    counter = check_calls(f, CALLS)
    assert _graph_with(counter, "tanh"), [_ops(g) for g in counter.graphs]


def test_comprehension_variable_shadows_a_local_used_after_it():
    def f(x):
        i = x * 3
        out = [print(i) or x + i for i in range(2)]
        return i.exp() + out[1], out  # the outer i, not the comprehension's

    counter = check_calls(f, CALLS)
    assert _graph_with(counter, "exp"), [_ops(g) for g in counter.graphs]


def test_comprehension_variable_unbound_before_it():
    def f(x):
        out = [print(j) or x * j for j in range(2)]
        try:
            j  # noqa: B018 - unbound here (the comprehension's j is its own)
        except NameError:
            out.append(x.neg())
        return torch.stack(out).relu()

    check_calls(f, CALLS, graphs=None)


def test_nested_comprehension_with_a_break_inside():
    def f(x):
        grid = [[print(i, j) or x * i + j for j in range(2)] for i in range(2)]
        return torch.stack([torch.stack(row) for row in grid]).sum(0).sigmoid()

    counter = check_calls(f, CALLS)
    assert _graph_with(counter, "sigmoid"), [_ops(g) for g in counter.graphs]


def test_walrus_in_comprehension_with_a_break():
    # the comprehension assigns a local of the function, read after it: the rest of the
    # function gets the value it left, and stays compiled
    def f(x):
        out = [(last := print(i) or x * i) for i in range(3)]
        return last.sin() + out[0]

    counter = check_calls(f, CALLS)
    assert _graph_with(counter, "sin"), [_ops(g) for g in counter.graphs]


def test_walrus_in_comprehension_that_may_never_assign_it():
    # the filter decides whether `last` is ever bound: unbound after it, the function raises
    # UnboundLocalError (or takes its except branch) as eager does, and sees no stand-in value
    def f(x, n):
        out = [(last := x * i) for i in range(n) if print(i) is None and i > 0]
        try:
            return last.sin() + len(out), sorted(locals())
        except UnboundLocalError as e:
            return x.cos(), str(e), sorted(locals())

    counter = check_calls(f, [(torch.ones(2), 3), (torch.ones(2), 1), (torch.arange(2.0), 0), (torch.ones(2), 4)])
    assert _graph_with(counter, "sin"), [_ops(g) for g in counter.graphs]

    def g(x, n):
        [(last := x * i) for i in range(n) if print(i) is None and i > 5]
        return last  # noqa: F821 - never bound: eager raises UnboundLocalError

    check_calls(g, [(torch.ones(2), 2)], graphs=None)


def test_walrus_in_comprehension_over_a_bound_local():
    # bound before the comprehension: after it, the value the comprehension left (or the old one)
    def f(x, n):
        last = x.neg()
        out = [(last := print(i) or x * i) for i in range(n)]
        return last.exp(), len(out)

    counter = check_calls(f, [(torch.ones(2), 3), (torch.ones(2), 0), (torch.arange(2.0), 2)])
    assert _graph_with(counter, "exp"), [_ops(g) for g in counter.graphs]


def test_comprehension_with_a_break_inside_a_loop():
    def f(x):
        total = x
        for k in range(2):
            parts = [print(k, i) or x * (i + k) for i in range(2)]
            total = total + parts[0] * parts[1]
        return total.sin()

    check_calls(f, CALLS, graphs=None)


def test_comprehension_with_a_break_in_its_condition_and_its_iterable():
    def f(x, n):
        out = [x * i for i in range(n) if print(i) is None and i % 2 == 0]
        return torch.stack(out).cos() * 2

    counter = check_calls(f, [(torch.ones(2), 4), (torch.arange(2.0), 5), (torch.ones(2), 4)])
    assert _graph_with(counter, "stack", "cos"), [_ops(g) for g in counter.graphs]


def test_break_in_comprehension_with_values_below_it_on_the_stack():
    def f(x):
        y = x.cos()
        # y and the list being built lie on the stack below the comprehension
        return torch.stack([y, *[print(i) or y * i for i in range(2)], y + 1]).sin().sum(0)

    counter = check_calls(f, CALLS)
    assert _graph_with(counter, "cos"), [_ops(g) for g in counter.graphs]
    after = _graph_with(counter, "stack", "sin")
    assert after and all("cos" not in _ops(g) for g in after), [_ops(g) for g in counter.graphs]
