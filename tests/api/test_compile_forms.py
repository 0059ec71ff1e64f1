"""Public API forms: decorators, wrapped metadata, compile of methods and modules.

Every test compares compiled with eager through dynamo_lite.testing; known bugs are strict
xfails in tests/test_known_bugs.py.
"""
import contextlib
import io

import pytest
import torch
import torch.nn as nn

import dynamo_lite
from dynamo_lite.testing import CompileCounter, assert_same
from dynamo_lite.testing import print_with_graph_break as print  # noqa: A001 - a graph break at each print


def _compiled(fn, backend="eager"):
    return dynamo_lite.compile(fn, backend=backend)


# ---------------------------------------------------------------------------
# public API
# ---------------------------------------------------------------------------
def test_decorator_forms_and_wrapped_metadata():
    with dynamo_lite.config.patch(default_backend="eager"):  # the default (inductor) is slow to compile
        @dynamo_lite.compile
        def f(x):
            return x + 1

    @dynamo_lite.compile(backend="eager", fullgraph=True)
    def g(x, y=2, *, z=3):
        "doc of g"
        return x * y * z

    assert_same(f(torch.ones(1)), torch.full((1,), 2.))
    assert_same(g(torch.ones(1), z=4), torch.full((1,), 8.))
    assert g.__name__ == "g" and g.__doc__ == "doc of g"
    import inspect
    assert str(inspect.signature(g)) == "(x, y=2, *, z=3)"


def test_disable_inside_compiled_code_runs_eagerly():
    @dynamo_lite.disable
    def helper(x):
        return x.sum().item() * 2, torch.compiler.is_compiling()

    def leaf(x):
        return x * 5

    @dynamo_lite.disable
    def mid(x):
        return leaf(x) + 1

    def f(x):
        a, compiling = helper(x)
        return x + a, compiling, mid(x) - 1

    cnt = CompileCounter()
    r = dynamo_lite.compile(f, backend=cnt)(torch.ones(2))
    assert_same(r, f(torch.ones(2)))
    assert r[1] is False and cnt.frame_count >= 1


def test_reset_forgets_and_plain_function_stays_uncompiled():
    cnt = CompileCounter()

    def f(x):
        return x - 1

    cf = dynamo_lite.compile(f, backend=cnt)
    cf(torch.ones(1))
    f(torch.ones(1))
    assert cnt.frame_count == 1
    dynamo_lite.reset()
    cf(torch.ones(1))
    assert cnt.frame_count == 2


def test_one_function_compiled_with_two_backends_keeps_separate_caches():
    c1, c2 = CompileCounter(), CompileCounter()

    def f(x):
        return x * 2

    a, b = dynamo_lite.compile(f, backend=c1), dynamo_lite.compile(f, backend=c2)
    for _ in range(2):
        assert_same(a(torch.ones(1)), b(torch.ones(1)))
    assert (c1.frame_count, c2.frame_count) == (1, 1)


def test_explain_reports_graphs_breaks_and_does_not_pollute_cache():
    def f(x, k=1):
        y = x * 2
        print("hi")
        if y.sum() > 0:
            return y * k
        return y

    with contextlib.redirect_stdout(io.StringIO()) as out:
        info = dynamo_lite.explain(f)(torch.ones(2), k=3)
    assert out.getvalue() == "hi\n"
    assert info.graph_break_count == 2 and info.graph_count == len(info.graphs) == 3
    assert len(info.break_reasons) == 2 and info.break_reasons[0].lineno == f.__code__.co_firstlineno + 2
    assert len(info.ops_per_graph) == info.graph_count
    cnt = CompileCounter()
    with contextlib.redirect_stdout(io.StringIO()):
        assert_same(dynamo_lite.compile(f, backend=cnt)(torch.ones(2), k=3), torch.full((2,), 6.))
    assert cnt.frame_count >= 1


def test_explain_of_module():
    m = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    info = dynamo_lite.explain(m)(torch.ones(1, 2))
    assert (info.graph_count, info.graph_break_count) == (1, 0)


def test_optimize_context_manager_and_decorator():
    cnt = CompileCounter()

    def f(x):
        return x * 3

    with dynamo_lite.optimize(cnt):
        r = f(torch.ones(1))
    assert_same(r, f(torch.ones(1)))
    assert cnt.frame_count == 1

    @dynamo_lite.optimize(cnt)
    def g(x):
        return x.cos()

    g(torch.ones(1))
    g(torch.ones(1))
    assert cnt.frame_count == 2


def test_fullgraph_raises_unsupported_for_print_and_data_dependent_branch_every_call():
    def f(x):
        print("x")
        return x + 1

    def g(x):
        if x.sum() > 0:
            return x
        return -x

    for fn in (f, g):
        cf = dynamo_lite.compile(fn, backend="eager", fullgraph=True)
        for _ in range(2):
            with contextlib.redirect_stdout(io.StringIO()), pytest.raises(dynamo_lite.Unsupported):
                cf(torch.ones(1))
    assert issubclass(dynamo_lite.Unsupported, Exception)


def test_nested_compiled_functions():
    cnt1, cnt2 = CompileCounter(), CompileCounter()
    inner = dynamo_lite.compile(lambda x: x * 2, backend=cnt1)

    def outer(x):
        return inner(x) + 1

    co = dynamo_lite.compile(outer, backend=cnt2)
    for _ in range(2):
        assert_same(co(torch.ones(1)), torch.full((1,), 3.))
    assert cnt2.frame_count >= 1


@dynamo_lite.compile(backend="eager")
def _module_level_compiled(x):
    return x * 2 + 1


def test_a_compiled_function_copies_and_pickles_as_a_function_does():
    # copy.deepcopy of a module holding a compiled function (an EMA or teacher copy) and pickling
    # a decorated module-level function raised "cannot pickle 'dynamo_lite._C.CallWithCallback'"
    import copy
    import pickle

    class Holder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(2, 2)
            self.act = _module_level_compiled

        def forward(self, x):
            return self.act(self.lin(x))

    held = Holder()
    twin = copy.deepcopy(held)
    x = torch.randn(3, 2)
    assert twin.act is held.act and copy.copy(_module_level_compiled) is _module_level_compiled
    assert torch.equal(twin(x), held(x))
    again = pickle.loads(pickle.dumps(_module_level_compiled))
    assert again is _module_level_compiled
    assert torch.equal(again(x), x * 2 + 1)


def test_compile_with_disable_returns_the_model_itself():
    def f(x):
        return x + 1

    module = torch.nn.Linear(2, 2)
    assert dynamo_lite.compile(f, disable=True) is f
    assert dynamo_lite.compile(module, backend="eager", disable=True) is module
    assert dynamo_lite.compile(disable=True)(f) is f
