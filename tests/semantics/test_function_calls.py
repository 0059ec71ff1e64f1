"""Function calls and closures (inlined, nonlocal, defaults, decorators) across graph breaks.

Every test compares compiled with eager through dynamo_lite.testing; known bugs are strict
xfails in tests/test_known_bugs.py.
"""
from __future__ import annotations

import contextlib
import functools
import io
import operator

import torch

import dynamo_lite
from dynamo_lite.testing import assert_same, check_calls
from dynamo_lite.testing import print_with_graph_break as print  # noqa: A001 - a graph break at each print


# ----------------------------------------------------------------------------- helpers

def ones(*shape, **kw):
    return torch.ones(*shape, **kw)


# ----------------------------------------------------------------------------- functions and closures

def test_closures_over_loop_variable_late_and_early_binding():
    def f(x):
        fs = []
        for i in range(3):
            fs.append(lambda y: y + i)
        gs = [lambda y, i=i: y * i for i in range(3)]
        return [h(x) for h in fs] + [g(x) for g in gs]

    check_calls(f, [ones(2)], interleave=False, graphs=None)


def test_closures_created_in_loop_with_print():
    def f(x):
        fs = []
        for i in range(3):
            print(i)
            fs.append(lambda: x + i)

            def g(i=i):
                print("g", i)
                return x * i
            fs.append(g)
        return [h() for h in fs]

    check_calls(f, [ones(1)], interleave=False, graphs=None)


def test_nonlocal_counter_with_print_and_item():
    def f(x):
        count = 0
        total = 0.0

        def inc(v):
            nonlocal count, total
            count += 1
            print("count", count)
            total += v.sum().item()
            return v + count

        for _ in range(3):
            x = inc(x)
        return x, count, total

    check_calls(f, [ones(2), ones(2)], interleave=False, graphs=None)


def test_closure_late_binding_across_break():
    def f(x):
        k = 1

        def g():
            return x * k

        r1 = g()
        print("mid")
        k = 10
        r2 = g()
        return r1, r2

    check_calls(f, [ones(2)], interleave=False, graphs=None)


def test_cellvar_written_in_loop_with_print():
    def f(x):
        k = 0

        def get():
            return k

        for i in range(3):
            k = k + i
            print(get())
        return x + k, get()

    check_calls(f, [ones(1)], interleave=False, graphs=None)


def test_cellvar_written_in_loop_then_raise_is_visible():
    def f(x):
        k = 0

        def get():
            return k

        try:
            for i in range(3):
                k = k + 1
                print(i)
                if i == 1:
                    raise ValueError
        except ValueError:
            pass
        return get()

    check_calls(f, [ones(1)], interleave=False, graphs=None)


def test_recursion_plain_and_with_print():
    def fact(x, n):
        if n <= 1:
            return x
        return fact(x * n, n - 1)

    def fib(x, n):
        if n <= 1:
            print("base", n)
            return x
        return fib(x, n - 1) + fib(x, n - 2)

    check_calls(fact, [(ones(2), 5), (ones(2), 3), (ones(2), 5)], interleave=False, graphs=None)
    check_calls(fib, [(ones(2), 4), (ones(2), 2)], interleave=False, graphs=None)


def test_nested_recursive_helper_appending_with_print():
    def f(x):
        acc = []

        def rec(n):
            if n == 0:
                return
            acc.append(n)
            print(n)
            rec(n - 1)

        rec(3)
        return x + len(acc), acc

    check_calls(f, [ones(1)], interleave=False, graphs=None)


def _announce(fn):
    @functools.wraps(fn)
    def wrapper(*a, **k):
        print("calling", fn.__name__)
        return fn(*a, **k) * 2
    return wrapper


@_announce
def _decorated(x, y=1):
    return x + y


def test_functools_wraps_decorator_with_print():
    def f(x):
        return _decorated(x, y=3), _decorated.__name__, _decorated.__wrapped__(x)

    check_calls(f, [ones(2), ones(2)], interleave=False, graphs=None)


@functools.lru_cache(maxsize=None)
def _square(n):
    print("compute", n)
    return n * n


@functools.lru_cache
def _ones_cached(n):
    print("computing", n)
    return torch.ones(n)


def test_lru_cache_prints_only_on_miss():
    def f(x, n):
        return x + _square(n) + _square(n)

    def g(x):
        return x + _ones_cached(2), _ones_cached(2) is _ones_cached(2)

    def reset():
        _square.cache_clear()
        _ones_cached.cache_clear()

    check_calls(f, [(ones(2), 3), (ones(2), 4), (ones(2), 3)], reset=reset, interleave=False, graphs=None)
    check_calls(g, [ones(2), ones(2)], reset=reset, interleave=False, graphs=None)


def test_functools_partial_and_reduce():
    def f(x):
        p = functools.partial(torch.add, alpha=2)
        q = functools.partial(lambda a, b, c=0: a * b + c, c=5)
        r = functools.reduce(operator.add, [x, x * 2, x * 3])
        return p(x, x), q(x, 2), q.keywords, r

    check_calls(f, [ones(2)], interleave=False, graphs=None)


def test_partial_of_print_in_loop():
    def f(x):
        p = functools.partial(print, "pre:", sep="|")
        for i in range(2):
            p(i, "z")
            x = x + i
        return x

    check_calls(f, [ones(1)], interleave=False, graphs=None)


def test_args_kwargs_keyword_only():
    def g(x, *args, scale=1, **kw):
        s = sum(args)
        for k, v in sorted(kw.items()):
            x = x + v
        return x * scale + s, args, kw

    def f(x):
        return g(x, 1, 2, scale=3, b=4, a=5), g(x), g(x, scale=0, z=1)

    check_calls(f, [ones(2)], interleave=False, graphs=None)
    check_calls(g, [(ones(1), 1, 2), (ones(1),)], interleave=False, graphs=None)


def test_kwargs_loop_with_print():
    def g(x, **kw):
        for k, v in kw.items():
            print(k)
            x = x * v
        return x, kw

    check_calls(lambda x: g(x, a=2, b=3), [ones(1)], interleave=False, graphs=None)


def test_call_forms_and_type_errors():
    def f(x, mode):
        def g(a, b):
            return a - b

        def h(a, *, b):
            return a - b

        if mode == 0:
            return g(b=x, a=1), g(*[x, 2]), g(**{"a": x, "b": 3})
        if mode == 1:
            return g(x)
        return h(x, 1)

    check_calls(f, [(ones(2), 0), (ones(2), 1), (ones(2), 2)], interleave=False, graphs=None)


def test_varargs_with_mixed_callables_and_tensors():
    def g(x, *args):
        total = x
        for a in args:
            if isinstance(a, torch.Tensor) and a.sum() > 0:
                total = total + a
            elif callable(a):
                total = a(total)
        return total

    check_calls(lambda x: g(x, x, -x, lambda t: t * 3, 4), [ones(1), ones(1)], interleave=False, graphs=None)


def _with_default(x, acc=[]):  # noqa: B006 - the mutable default is the point
    acc.append(len(acc))
    print("len", len(acc))
    return x + len(acc), list(acc)


def test_mutable_default_argument_mutated_across_calls():
    check_calls(_with_default, [ones(1), ones(1), ones(1)], reset=lambda: _with_default.__defaults__[0].clear(), snapshot=lambda: list(_with_default.__defaults__[0]), interleave=False, graphs=None)


def test_function_defaults_changed_between_calls():
    def f(x, a=2):
        return x * a

    c = dynamo_lite.compile(f, backend="eager")
    for d in [(2,), (7,), (1,), (7,)]:
        f.__defaults__ = d
        assert_same(f(ones(2)), c(ones(2)))


def test_functions_returning_functions():
    def make_adder(n):
        def add(x):
            return x + n
        return add

    def f(x):
        a = make_adder(3)
        b = make_adder(x)
        return a(x), b(x), a(b(x))

    def g(x):
        def outer(a):
            def mid(b):
                def inn(c):
                    return a + b + c
                return inn
            return mid
        return outer(x)(2)(3)

    check_calls(f, [ones(2)], interleave=False, graphs=None)
    check_calls(g, [ones(2)], interleave=False, graphs=None)


def test_returned_closure_is_callable_after_compiled_call():
    def f(x):
        k = x * 2
        print("made")
        return lambda y: y + k

    e = f(ones(2))
    c = dynamo_lite.compile(f, backend="eager")
    with contextlib.redirect_stdout(io.StringIO()):
        h = c(ones(2))
    assert_same(e(ones(2)), h(ones(2)))


def test_compiled_function_called_from_compiled_function():
    inner = dynamo_lite.compile(lambda x: x * 2 + 1, backend="eager")

    def f(x):
        y = inner(x)
        print("between")
        return inner(y)

    check_calls(f, [ones(2), ones(2)], interleave=False, graphs=None)


def test_compiled_inner_with_break_raises_into_outer():
    def inner_fn(x):
        print("inner")
        if x.sum() < 0:
            raise ValueError("negative")
        return x + 1

    inner = dynamo_lite.compile(inner_fn, backend="eager")

    def f(x):
        try:
            return inner(x) * 2
        except ValueError as e:
            return str(e)

    check_calls(f, [ones(2), -ones(2), ones(2)], interleave=False, graphs=None)


def test_nested_calls_with_breaks_in_callee():
    def f(x):
        def a(t):
            print("a")
            return b(t) + 1

        def b(t):
            y = t.sum().item()
            return t * y

        return a(x)

    check_calls(f, [ones(2), torch.full((2,), 3.0)], interleave=False, graphs=None)


def test_nested_function_raising_after_print_keeps_caller_local():
    def f(x):
        y = x + 1

        def inner(t):
            t = t * 2
            print("in")
            raise ValueError("bad %d" % t.numel())

        try:
            y = inner(y)
        except ValueError as e:
            y = y + 100
            msg = str(e)
        return y, msg

    check_calls(f, [ones(2)], interleave=False, graphs=None)


def test_nested_function_try_finally_with_print():
    def f(x):
        def inner(t):
            try:
                print("in")
                return t + 1
            finally:
                print("fin")
        return inner(x) * 2

    check_calls(f, [ones(2)], interleave=False, graphs=None)


def test_nested_function_with_no_grad_and_print():
    def f(x):
        def inner(v):
            with torch.no_grad():
                print("inner")
                return v * 2
        y = inner(x)
        return y, y.requires_grad, torch.is_grad_enabled()

    check_calls(f, [ones(2, requires_grad=True)], interleave=False, graphs=None)


def test_closure_cell_changed_between_calls():
    def mk():
        k = [1]
        scale = 2

        def f(x):
            return x * scale + k[0]

        def setscale(v):
            nonlocal scale
            scale = v

        return f, setscale, k

    f, setscale, k = mk()
    c = dynamo_lite.compile(f, backend="eager")
    for step in [lambda: None, lambda: setscale(5), lambda: k.__setitem__(0, 9), lambda: setscale(0.5)]:
        step()
        assert_same(f(ones(2)), c(ones(2)))


class _Base:
    def step(self, x, i):
        return x + i


class _Child(_Base):
    def run_break_first(self, x):
        print("a")
        return super().step(x, 1)

    def run_loop(self, x):
        for i in range(3):
            print(i)
            x = super().step(x, i) * 2
        return x


def test_zero_arg_super_after_break():
    check_calls(lambda x: _Child().run_break_first(x), [ones(1)], interleave=False, graphs=None)


def test_zero_arg_super_in_loop_with_print():
    check_calls(lambda x: _Child().run_loop(x), [ones(1)], interleave=False, graphs=None)


def test_locals_inside_loop_with_print():
    def f(x):
        for i in range(2):
            y = i
            print(sorted(locals()))
        return x

    check_calls(f, [ones(1)], interleave=False, graphs=None)


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(2, 2)
        self.calls = 0

    def forward(self, x):
        for i in range(3):
            self.calls += 1
            print("iter", i, self.calls)
            x = self.lin(x)
        return x


def test_module_forward_loop_with_print_counts_attribute():
    torch.manual_seed(0)
    m1 = _Net()
    torch.manual_seed(0)
    m2 = _Net()
    c = dynamo_lite.compile(m2, backend="eager")
    x = ones(1, 2)
    b1, b2 = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(b1):
        r1 = [m1(x), m1(x)]
    with contextlib.redirect_stdout(b2):
        r2 = [c(x), c(x)]
    assert_same(r1, r2)
    assert b1.getvalue() == b2.getvalue()
    assert m1.calls == m2.calls == 6
