"""Call parameters: defaults, keyword-only, *args/**kwargs, positional-only, eager vs compiled.

Every test compares compiled with eager through dynamo_lite.testing; known bugs are strict
xfails in tests/test_known_bugs.py.
"""

import torch

import dynamo_lite
from dynamo_lite.testing import assert_same, check_calls


def t(*vals):
    return torch.tensor([float(v) for v in vals])


X1, X2 = (t(1, 2, 3),), (t(-4, 5, 0.5, 2),)


# ---------------------------------------------------------------- parameters

def test_keyword_only_and_positional_only():
    def g(a, b=2, /, c=3, *, d, e=5):
        return a * b + c * d + e

    def f(x):
        return g(x, d=1), g(x, 3, 4, d=2), g(x, c=1, d=x.shape[0], e=0)

    check_calls(f, [X1, X2])


def test_positional_only_name_in_kwargs():
    def g(a, /, **kw):
        return a, kw

    def f(x):
        return g(x, a=5)

    check_calls(f, [X1, X2], graphs=None)


def test_keyword_only_missing_error():
    def g(a, *, b):
        return a + b

    def f(x):
        y = x + 1
        return g(y, 2)

    check_calls(f, [X1], graphs=None)


def test_positional_only_passed_as_keyword_error():
    def g(a, /):
        return a

    def f(x):
        return g(a=x)

    check_calls(f, [X1], graphs=None)


def test_mutable_default_evaluated_once():
    def make():
        def g(v, acc=[]):  # noqa: B006 - this is the point
            acc.append(v)
            return len(acc)

        def f(x):
            return x * g(1), g(2)
        return f, g

    (fe, ge), (fc, gc) = make(), make()
    cfn = dynamo_lite.compile(fc, backend="eager")
    e = [fe(t(1)), fe(t(2))]
    c = [cfn(t(1)), cfn(t(2))]
    assert_same(e, c)
    assert ge.__defaults__ == gc.__defaults__ == ([1, 2, 1, 2],)


def test_default_list_rebuilt_per_call_of_outer():
    def f(x):
        def g(v, acc=[]):  # noqa: B006
            acc.append(v)
            return len(acc)
        return x * g(1), g(2)

    check_calls(f, [X1, X2])


_MODULE_DEFAULT_LIST = []


def _append_default(v, acc=_MODULE_DEFAULT_LIST):
    acc.append(v)
    return len(acc)


def test_module_level_default_mutated_across_calls():
    def f(x):
        n = _append_default(x.shape[0])
        return x * n

    cfn = dynamo_lite.compile(f, backend="eager")
    _MODULE_DEFAULT_LIST.clear()
    e = [f(t(1)), f(t(1, 2))]
    e_state = list(_MODULE_DEFAULT_LIST)
    _MODULE_DEFAULT_LIST.clear()
    c = [cfn(t(1)), cfn(t(1, 2))]
    assert_same(e, c)
    assert _MODULE_DEFAULT_LIST == e_state


def test_default_tensor_evaluated_once():
    def make():
        def g(x, w=torch.ones(2)):
            w.add_(1)
            return x * w
        return g

    g_e, g_c = make(), make()
    cg = dynamo_lite.compile(g_c, backend="eager")
    e = [g_e(t(1, 2)), g_e(t(1, 2))]
    c = [cg(t(1, 2)), cg(t(1, 2))]
    assert_same(e, c)
    assert_same(g_e.__defaults__[0], g_c.__defaults__[0])


def test_kwdefaults_changed_between_calls():
    def g(x, *, s=2):
        return x * s

    f = lambda x: g(x)  # noqa: E731
    cfn = dynamo_lite.compile(f, backend="eager")
    r1 = cfn(t(1, 2))
    g.__kwdefaults__ = {"s": 5}
    r2 = cfn(t(1, 2))
    assert_same([r1, r2], [t(2, 4), t(5, 10)])
