"""User functions: parameters, call sites, closures, nonlocal, lambdas, partial, recursion.

Every test runs the function eagerly and compiled on copies of the same inputs
(``assert_same_as_eager``) and checks how many graph breaks the compiled run
had: the constructs here are captured whole (no break).
"""
import functools

import torch

import dynamo_lite
from dynamo_lite.testing import check_breaks as check
from dynamo_lite.testing import print_with_graph_break as print  # noqa: A001 - a graph break at each print




x3 = torch.randn(3)


# ---- parameters -------------------------------------------------------------------------
def _pos_default(x, a=2, b=3.0):
    return x * a + b


def _kwonly(x, *, scale, shift=1.0):
    return x * scale + shift


def _varargs(x, *rest):
    for r in rest:
        x = x + r
    return x, len(rest)


def _varkw(x, **kw):
    out = x
    for k in sorted(kw):
        out = out + kw[k]
    return out, tuple(sorted(kw))


def _everything(a, b=1, *args, c, d=2, **kw):
    return a + b + sum(args) + c + d + sum(kw.values()), args, kw


def _posonly(a, b, /, c=1):
    return a * b + c


def test_positional_and_defaults():
    check(lambda x: (_pos_default(x), _pos_default(x, 5), _pos_default(x, 1, 0.5)), x3)


def test_keyword_arguments_at_call_site():
    check(lambda x: (_pos_default(x, b=1.0), _pos_default(b=2.0, a=3, x=x)), x3)


def test_keyword_only_parameters():
    check(lambda x: (_kwonly(x, scale=2.0), _kwonly(x, shift=0.0, scale=3.0)), x3)


def test_varargs_parameter():
    check(lambda x: (_varargs(x), _varargs(x, 1, 2.0, x)), x3)


def test_varkw_parameter():
    check(lambda x: (_varkw(x), _varkw(x, b=2.0, a=x)), x3)


def test_all_parameter_kinds():
    check(lambda x: _everything(x, 2, 3, 4, c=x, e=5, f=6), x3)


def test_positional_only_parameters():
    check(lambda x: (_posonly(x, 2), _posonly(x, x, c=3)), x3)


def test_star_unpacking_at_call_site():
    def f(x):
        args = (x, 3)
        return _pos_default(*args), _pos_default(*[x], *(4,))

    check(f, x3)


def test_double_star_unpacking_at_call_site():
    def f(x):
        kw = {"a": 4, "b": 0.5}
        return _pos_default(x, **kw), _everything(x, **{"c": 1}, **{"z": 2})

    check(f, x3)


def test_star_and_double_star_together():
    def f(x, *args, **kwargs):
        return _everything(x, *args, **kwargs)

    check(f, x3, 1, 2, c=3, extra=4)


def test_forwarding_wrapper():
    def wrapper(fn):
        def inner(*args, **kwargs):
            return fn(*args, **kwargs) + 1

        return inner

    def f(x):
        return wrapper(_kwonly)(x, scale=2.0)

    check(f, x3)


def test_functools_wraps_decorator():
    def deco(fn):
        @functools.wraps(fn)
        def inner(*args, **kwargs):
            return fn(*args, **kwargs) * 2

        return inner

    @deco
    def g(x, y=1):
        return x + y

    check(lambda x: g(x, y=3), x3)


def test_default_argument_is_a_tensor():
    w = torch.randn(3)

    def g(x, bias=w):
        return x + bias

    check(lambda x: g(x), x3)


def test_defaults_of_nested_function_made_in_frame():
    def f(x, k):
        def g(y, scale=k, *, shift=k + 1):
            return y * scale + shift

        return g(x), g(x, 2), g(x, shift=0)

    check(f, x3, 3)


# ---- closures and nonlocal ------------------------------------------------------------------
def test_closure_over_constant_and_tensor():
    w = torch.randn(3)
    k = 2.5

    def f(x):
        return x * w + k

    check(f, x3)


def test_nested_def_reads_enclosing_locals():
    def f(x):
        y = x + 1

        def g(z):
            return z * y

        return g(x) + g(y)

    check(f, x3)


def test_nonlocal_counter_in_nested_function():
    def f(x):
        count = 0

        def bump(v):
            nonlocal count
            count += 1
            return v * 2

        y = bump(bump(x))
        return y, count

    check(f, x3)


def test_nonlocal_tensor_accumulator():
    def f(x):
        acc = torch.zeros(3)

        def add(v):
            nonlocal acc
            acc = acc + v

        for i in range(3):
            add(x * i)
        return acc

    check(f, x3)


def test_nonlocal_write_to_frame_free_variable():
    def make():
        total = 0

        def f(x):
            nonlocal total
            total += 1
            return x + total

        def get():
            return total

        return f, get

    eager_f, eager_get = make()
    comp_f, comp_get = make()
    compiled = dynamo_lite.compile(comp_f, backend="eager")
    for _ in range(2):
        check(eager_f, x3, compiled_fn=compiled)
    assert eager_get() == comp_get() == 2


def test_closure_made_in_frame_and_returned_is_callable():
    def f(x):
        k = 3

        def g(y):
            return y + k

        return x * 2, g

    out = check(f, x3)
    assert out.value[1](1) == 4


def test_lambda_in_frame():
    def f(x):
        sq = lambda v: v * v  # noqa: E731
        add = lambda a, b=1: a + b  # noqa: E731
        return add(sq(x)), add(x, b=x)

    check(f, x3)


def test_lambda_closing_over_loop_variable():
    def f(x):
        fns = [lambda v, i=i: v * i for i in range(3)]
        return [fn(x) for fn in fns]

    check(f, x3)


def test_late_binding_closure_sees_last_value():
    def f(x):
        fns = []
        for i in range(3):
            fns.append(lambda v: v + i)
        return [fn(x) for fn in fns]

    check(f, x3)


def test_three_levels_of_nesting():
    def f(x):
        a = 1

        def g():
            b = 2

            def h(v):
                return v * a + b

            return h(x)

        return g()

    check(f, x3)


def test_closure_cell_shared_by_two_functions():
    def f(x):
        n = 0

        def inc():
            nonlocal n
            n += 1

        def get():
            return n

        inc()
        inc()
        return x * get()

    check(f, x3)


def test_global_function_with_closure():
    check(lambda x: _make_adder(5)(x) + _ADD_TWO(x), x3)


def _make_adder(k):
    def add(v):
        return v + k

    return add


_ADD_TWO = _make_adder(2)


# ---- partial ---------------------------------------------------------------------------------
def test_partial_created_in_frame():
    def f(x):
        p = functools.partial(_pos_default, b=0.0)
        q = functools.partial(_kwonly, scale=2.0)
        return p(x), p(x, 4), q(x, shift=3.0)

    check(f, x3)


def test_partial_from_global():
    check(lambda x: _PARTIAL(x) + _PARTIAL(x, a=1), x3)


_PARTIAL = functools.partial(_pos_default, a=3)


def test_partial_attributes():
    def f(x):
        p = functools.partial(_pos_default, x, b=1.0)
        return p.func(*p.args, **p.keywords), len(p.args)

    check(f, x3)


def test_partial_of_lambda_and_nested_partial():
    def f(x):
        p = functools.partial(lambda a, b, c: a * b + c, x)
        q = functools.partial(p, 2)
        return q(1), q(c=x)

    check(f, x3)


# ---- recursion -------------------------------------------------------------------------------
def _fact(n):
    return 1 if n <= 1 else n * _fact(n - 1)


def _apply_n(x, n):
    if n == 0:
        return x
    return _apply_n(x * 2 + 1, n - 1)


def test_bounded_recursion_on_constants():
    check(lambda x: x * _fact(5), x3)


def test_bounded_recursion_with_tensor():
    check(lambda x: _apply_n(x, 4), x3)


def test_recursive_nested_function():
    def f(x):
        def walk(obj):
            if isinstance(obj, (list, tuple)):
                return sum(walk(o) for o in obj)
            return obj.sum()

        return walk([x, (x * 2, [x + 1])])

    check(f, x3)


def test_recursion_over_nested_dict():
    def to_double(obj):
        if isinstance(obj, dict):
            return {k: to_double(v) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return type(obj)(to_double(v) for v in obj)
        return obj * 2

    check(lambda d: to_double(d), {"a": x3, "b": [x3, (x3,)]})


# ---- methods and function objects -------------------------------------------------------------
def test_function_attributes():
    def f(x):
        return x + len(_pos_default.__name__), _pos_default.__name__

    check(f, x3)


def test_function_passed_as_argument():
    def apply(fn, v):
        return fn(v)

    check(lambda x: apply(torch.relu, x) + apply(_fact, 3) + apply(lambda v: v * 2, x), x3)


def test_function_stored_in_dict_and_dispatched():
    table = {"relu": torch.relu, "double": lambda v: v * 2, "fact": _pos_default}

    def f(x, name):
        return table[name](x)

    check(f, x3, "relu")
    check(f, x3, "double")
    check(f, x3, "fact")


def test_higher_order_returning_function():
    def compose(*fns):
        def run(v):
            for fn in fns:
                v = fn(v)
            return v

        return run

    check(lambda x: compose(torch.sin, lambda v: v + 1, torch.cos)(x), x3)


def test_generator_function_consumed_by_loop():
    def gen(x, n):
        for i in range(n):
            yield x * i

    def f(x):
        total = x
        for v in gen(x, 3):
            total = total + v
        return total, list(gen(x, 2))

    check(f, x3)


def test_inner_function_with_default_mutable_argument_not_mutated():
    def g(x, acc=None):
        acc = [] if acc is None else acc
        acc.append(x)
        return acc

    check(lambda x: (g(x * 2), g(x, [1])), x3)


def test_wrong_call_raises_same_type_error():
    def f(x):
        return _pos_default(x, 1, 2, 3)

    check(f, x3, breaks=1)


def test_missing_keyword_only_raises_type_error():
    def f(x):
        return _kwonly(x)

    check(f, x3, breaks=1)


def test_closure_made_by_inlined_factory_escapes():
    def f(x):
        add3 = _make_adder(3)
        return add3(x), add3

    out = check(f, x3)
    assert out.value[1](1) == 4


def test_two_escaping_closures_share_one_cell():
    def counter():
        n = 0

        def inc():
            nonlocal n
            n += 1
            return n

        def get():
            return n

        return inc, get

    def f(x):
        inc, get = counter()
        inc()
        return x * get(), inc, get

    out = check(f, x3)
    _, inc, get = out.value
    inc()
    assert get() == 2  # the rebuilt functions still share their cell


def test_closure_from_factory_survives_graph_break():
    def f(x):
        act = _make_adder(2)
        print("break")
        return act(x)

    check(f, x3, breaks=1)


def test_deep_chain_of_inlined_calls_and_nested_recursion():
    def f(x):
        def fib(n):
            return n if n < 2 else fib(n - 1) + fib(n - 2)

        def a(v):
            return b(v) + 1

        def b(v):
            return v * fib(6)

        return a(x)

    check(f, x3)


def test_unbound_method_of_builtin_type_called_with_instance():
    def f(x, d):
        return x * dict.get(d, "k", 1) + len(str.upper("ab")), list.__len__([1, 2])

    check(f, x3, {"k": 3})
