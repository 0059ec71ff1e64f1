"""compile() forms, compiled calling compiled, disable(), optimize() and reset().

Every test compares compiled with eager through dynamo_lite.testing; known bugs are strict
xfails in tests/test_known_bugs.py.
"""
import functools
import sys

import pytest
import torch

import dynamo_lite
from dynamo_lite.testing import CompileCounter, assert_same

pytest_plugins = ["pytester"]

X = torch.arange(6, dtype=torch.float32).reshape(2, 3) / 7 - 0.3


# ---------------------------------------------------------------- compile() forms
class _Holder:
    k = 2.0

    @staticmethod
    def st(x):
        return x * 3

    @classmethod
    def cm(cls, x):
        return x * cls.k


def test_compile_staticmethod():
    cnt = CompileCounter()
    assert_same(dynamo_lite.compile(_Holder.st, backend=cnt)(X), X * 3)
    assert cnt.frame_count == 1


def test_compile_classmethod_sees_class_attribute_change():
    f = dynamo_lite.compile(_Holder.cm, backend="eager")
    assert_same(f(X), X * 2.0)
    _Holder.k = 5.0
    try:
        assert_same(f(X), X * 5.0)
    finally:
        _Holder.k = 2.0


def test_compile_decorator_inside_class_body_method_and_staticmethod():
    class M:
        def __init__(self, b):
            self.b = b

        @dynamo_lite.compile(backend="eager")
        def add(self, x):
            return x + self.b

        @staticmethod
        @dynamo_lite.compile(backend="eager")
        def twice(x):
            return x * 2

    assert_same(M(1.0).add(X), X + 1.0)
    assert_same(M(4.0).add(X), X + 4.0)
    assert_same(M.twice(X), X * 2)


def test_compile_functools_partial_keyword_and_positional():
    def f(a, b, scale=1.0):
        return (a - b) * scale

    p = functools.partial(f, torch.ones(2, 3), scale=3.0)
    assert_same(dynamo_lite.compile(p, backend="eager")(X), p(X))


def test_compile_callable_object_follows_attribute_changes():
    class Affine:
        def __init__(self):
            self.w = torch.ones(3)
            self.b = 0.5

        def __call__(self, x):
            return x * self.w + self.b

    obj = Affine()
    f = dynamo_lite.compile(obj, backend="eager")
    assert_same(f(X), obj(X))
    obj.w = torch.full((3,), 2.0)
    obj.b = -1.0
    assert_same(f(X), obj(X))


def test_compile_lambda_and_nested_closures_each_keep_their_cell():
    def make(k):
        def inner(x):
            return x * k
        return inner

    cnt = CompileCounter()
    fs = [dynamo_lite.compile(make(k), backend=cnt) for k in (1.0, 2.0, 3.0)]
    for f, k in zip(fs, (1.0, 2.0, 3.0)):
        assert_same(f(X), X * k)
    assert_same(dynamo_lite.compile(lambda t: t.relu() - 1, backend="eager")(X), X.relu() - 1)


def test_compile_bound_forward_of_module_follows_weight_replacement():
    torch.manual_seed(0)
    m = torch.nn.Linear(3, 2)
    f = dynamo_lite.compile(m.forward, backend="eager")
    assert_same(f(X), m(X))
    with torch.no_grad():
        m.weight.mul_(2)
    assert_same(f(X), m(X))
    m.weight = torch.nn.Parameter(torch.zeros(2, 3))
    assert_same(f(X), m(X))


def test_compile_bound_forward_of_module_follows_train_eval():
    m = torch.nn.Sequential(torch.nn.Dropout(0.5))
    f = dynamo_lite.compile(m.forward, backend="eager")
    m.eval()
    assert_same(f(X), X)
    m.train()
    torch.manual_seed(3)
    got = f(X)
    torch.manual_seed(3)
    assert_same(got, m(X))


def test_compiled_function_keeps_name_doc_and_wrapped():
    def documented(x):
        """Docs here."""
        return x + 1

    f = dynamo_lite.compile(documented, backend="eager")
    assert f.__name__ == "documented" and f.__doc__ == "Docs here." and f.__wrapped__ is documented
    assert dynamo_lite.compile(f, backend="eager").__wrapped__ is documented


def test_compile_checks_mode_and_options_as_torch_compile_and_rejects_non_callables():
    f = dynamo_lite.compile(lambda x: x, mode="max-autotune")  # inductor's: checked, accepted
    assert callable(f)
    with pytest.raises(RuntimeError, match="Unexpected optimization option 'a' for inductor"):
        dynamo_lite.compile(lambda x: x, options={"a": 1})
    with pytest.raises(RuntimeError, match="Unrecognized mode=fastest"):
        dynamo_lite.compile(lambda x: x, mode="fastest")
    with pytest.raises(RuntimeError, match="Unexpected type of option 'max-autotune': got int"):
        dynamo_lite.compile(lambda x: x, options={"max-autotune": 1})
    with pytest.raises(RuntimeError, match="both can't be specified"):
        dynamo_lite.compile(lambda x: x, mode="max-autotune", options={"max_autotune": True})
    with pytest.raises(TypeError):
        dynamo_lite.compile(3)
    with pytest.raises(ValueError, match="no_such_backend"):
        dynamo_lite.compile(lambda x: x, backend="no_such_backend")


def test_mode_and_options_are_inductors_only():
    with pytest.raises(RuntimeError, match="backend='eager' takes neither"):
        dynamo_lite.compile(backend="eager", mode="max-autotune")
    with pytest.raises(RuntimeError, match="backend='aot_eager' takes neither"):
        dynamo_lite.compile(lambda x: x, backend="aot_eager", options={"max_autotune": True})


def test_mode_and_options_reach_inductor_as_config_patches(monkeypatch):
    import torch._inductor.compile_fx as compile_fx_module

    seen = []

    def spy(gm, example_inputs, config_patches=None, **kw):
        seen.append(config_patches)
        return gm.forward

    monkeypatch.setattr(compile_fx_module, "compile_fx", spy)
    x = torch.randn(4)
    for kwargs, patches in (({"mode": "max-autotune-no-cudagraphs"}, {"max_autotune": True,
                                                                       "coordinate_descent_tuning": True}),
                            ({"options": {"epilogue-fusion": False}}, {"epilogue_fusion": False})):
        f = dynamo_lite.compile(lambda t: t.sin() + 1, **kwargs)
        assert_same(f(x), x.sin() + 1)
        assert seen.pop() == patches


def test_a_compiled_module_with_options_pickles_with_them():
    import pickle

    model = dynamo_lite.compile(torch.nn.Linear(2, 2), options={"epilogue_fusion": False})
    again = pickle.loads(pickle.dumps(model))
    assert again._dl_converter.inductor_patches == {"epilogue_fusion": False}


def test_inductor_with_options_matches_eager():
    f = dynamo_lite.compile(lambda t: (t * 3).relu().sum(0), options={"epilogue_fusion": False})
    x = torch.randn(5, 3)
    assert_same(f(x), (x * 3).relu().sum(0))


def test_compile_dynamic_is_accepted():
    f = dynamo_lite.compile(lambda x: x * 2, backend="eager", dynamic=True)
    assert_same(f(X), X * 2)
    assert_same(f(torch.ones(5)), torch.ones(5) * 2)


def test_compile_generator_function_behaves_like_eager():
    def gen(x):
        for i in range(3):
            yield x * i

    g = dynamo_lite.compile(gen, backend="eager")
    assert [t.tolist() for t in g(X)] == [t.tolist() for t in gen(X)]


# ---------------------------------------------------------------- compiled calling compiled
def test_compiled_calls_compiled_same_backend():
    cnt = CompileCounter()

    @dynamo_lite.compile(backend=cnt)
    def inner(x):
        return x.sin()

    @dynamo_lite.compile(backend=cnt)
    def outer(x):
        return inner(x) * 2 + 1

    assert_same(outer(X), X.sin() * 2 + 1)
    assert_same(inner(X), X.sin())
    assert cnt.frame_count >= 1


def test_compiled_calls_compiled_other_backend_each_backend_sees_its_graph():
    c_out, c_in = CompileCounter(), CompileCounter()

    @dynamo_lite.compile(backend=c_in)
    def inner(x):
        return x.cos()

    @dynamo_lite.compile(backend=c_out)
    def outer(x):
        return inner(x + 1) - 1

    assert_same(outer(X), (X + 1).cos() - 1)
    assert c_in.frame_count == 1
    assert c_out.frame_count >= 1
    ops_in = [str(n.target) for g in c_in.graphs for n in g.graph.nodes]
    assert any("cos" in o for o in ops_in)


def test_compiled_mutually_recursive_functions():
    def even(x, n):
        return x if n == 0 else c_odd(x + 1, n - 1)

    def odd(x, n):
        return x * -1 if n == 0 else c_even(x * 2, n - 1)

    c_even = dynamo_lite.compile(even, backend="eager")
    c_odd = dynamo_lite.compile(odd, backend="eager")
    ref = X
    for i, op in enumerate([lambda t: t + 1, lambda t: t * 2, lambda t: t + 1]):
        ref = op(ref)
    assert_same(c_even(X, 3), ref * -1)


# ---------------------------------------------------------------- disable
def test_disable_decorator_inside_compiled_code_runs_eagerly():
    cnt = CompileCounter()
    ran_eagerly = []

    @dynamo_lite.disable
    def helper(t):
        ran_eagerly.append(sys._getframe().f_code.co_name)
        return t * 2

    def f(x):
        return helper(x + 1) - 1

    assert_same(dynamo_lite.compile(f, backend=cnt)(X), f(X))
    assert helper.__name__ == "helper"
    assert cnt.frame_count == 2  # before and after the disabled call
    assert not any("mul" in str(n.target) for g in cnt.graphs for n in g.graph.nodes)


def test_disable_context_manager_inside_compiled_code():
    cnt = CompileCounter()

    def helper(t):
        return t * 3

    def f(x):
        a = x + 1
        with dynamo_lite.disable():
            b = helper(a)
        return b - 1

    assert_same(dynamo_lite.compile(f, backend=cnt)(X), f(X))
    assert not any("mul" in str(n.target) for g in cnt.graphs for n in g.graph.nodes)


def test_disable_context_manager_around_compiled_wrapper_call():
    # an explicit compile() turns capture on again, as in torch
    cnt = CompileCounter()
    f = dynamo_lite.compile(lambda x: x.exp(), backend=cnt)
    with dynamo_lite.disable():
        assert_same(f(X), X.exp())
    assert cnt.frame_count == 1


def test_disable_of_a_compiled_function_runs_it_eagerly():
    cnt = CompileCounter()
    f = dynamo_lite.compile(lambda x: x.cos() + 1, backend=cnt)
    assert_same(dynamo_lite.disable(f)(X), X.cos() + 1)
    assert cnt.frame_count == 0


def test_disable_of_a_module_is_a_module_run_without_capture():
    # model.layer = disable(model.layer) (as with torch.compiler.disable): the result is a module
    # of the layer's class sharing its state; a compiled caller breaks the graph at its call
    class Doubler(torch.nn.Module):
        def forward(self, x):
            return x * 2, type(self).__name__

    model = torch.nn.Sequential(torch.nn.Linear(3, 3), Doubler())
    expected = model(X)
    model[1] = dynamo_lite.disable(model[1])
    assert isinstance(model[1], Doubler) and isinstance(model[1], torch.nn.Module)
    assert list(model.state_dict()) == ["0.weight", "0.bias"]
    cnt = CompileCounter()
    got = dynamo_lite.compile(model, backend=cnt)(X)
    assert_same(expected, got)
    assert cnt.frame_count == 1  # the Linear; Doubler's forward ran without capture
    info = dynamo_lite.explain(model)(X)
    assert [r.break_id for r in info.break_reasons] == ["DL0067"], info.break_reasons
    assert "module Doubler is marked dynamo_lite.disable" in info.break_reasons[0].reason


def test_fullgraph_with_disabled_call_raises_unsupported():
    @dynamo_lite.disable
    def helper(t):
        return t * 2

    def f(x):
        return helper(x) + 1

    with pytest.raises(dynamo_lite.Unsupported):
        dynamo_lite.compile(f, backend="eager", fullgraph=True)(X)


# ---------------------------------------------------------------- optimize / reset
def test_optimize_decorator_compiles_once_and_caches():
    cnt = CompileCounter()

    @dynamo_lite.optimize(cnt)
    def k(x):
        return x.exp() * 2

    assert_same(k(X), X.exp() * 2)
    assert_same(k(X), X.exp() * 2)
    assert cnt.frame_count == 1


def test_optimize_block_does_not_capture_after_exit_or_the_running_frame():
    cnt = CompileCounter()

    def step(x):
        return x.tanh()

    y = X * 5  # this frame started before the block: not captured
    with dynamo_lite.optimize(cnt):
        assert_same(step(y), y.tanh())
    assert cnt.frame_count == 1
    step(torch.randn(4))
    assert cnt.frame_count == 1


def test_optimize_same_instance_nested_restores_no_capture():
    cnt = CompileCounter()
    opt = dynamo_lite.optimize(cnt)

    def a(x):
        return x + 1

    def b(x):
        return x + 2

    with opt:
        with opt:
            a(X)
        a(X)
    b(X)
    assert cnt.frame_count == 1


def test_optimize_inner_block_with_other_backend_then_outer_resumes():
    outer_cnt, inner_cnt = CompileCounter(), CompileCounter()

    def f(x):
        return x * 2

    def g(x):
        return x * 3

    def h(x):
        return x * 4

    with dynamo_lite.optimize(outer_cnt):
        f(X)
        with dynamo_lite.optimize(inner_cnt):
            g(X)
        h(X)
    assert (outer_cnt.frame_count, inner_cnt.frame_count) == (2, 1)


def test_optimize_decorator_recursion_restores_outer_callback():
    outer_cnt, inner_cnt = CompileCounter(), CompileCounter()

    @dynamo_lite.optimize(inner_cnt)
    def rec(t, n):
        return t if n == 0 else rec(t + 1, n - 1)

    def plain(t):
        return t.cos() * 3

    with dynamo_lite.optimize(outer_cnt):
        assert_same(rec(X, 2), X + 2)
        plain(X)
    assert outer_cnt.frame_count == 1


def test_reset_between_calls_recompiles_same_result():
    cnt = CompileCounter()
    f = dynamo_lite.compile(lambda x: x.sigmoid(), backend=cnt)
    r1 = f(X)
    dynamo_lite.reset()
    r2 = f(X)
    assert_same(r1, r2)
    assert cnt.frame_count == 2


def test_reset_called_inside_compiled_function():
    cnt = CompileCounter()

    def f(x):
        a = x + 1
        dynamo_lite.reset()
        return a * 2

    cf = dynamo_lite.compile(f, backend=cnt)
    for _ in range(3):
        assert_same(cf(X), (X + 1) * 2)


def _inner_work(x):
    return x.sin() * 2


@dynamo_lite.disable(recursive=False)
def _frame_not_captured(x):
    y = x + 1  # runs eagerly: this frame is never captured
    return _inner_work(y) - 1  # ... but the function it calls is


def test_disable_non_recursive_skips_the_frame_and_captures_what_it_calls():
    from dynamo_lite.report import events

    def f(x):
        return _frame_not_captured(x * 3) + 5

    x = torch.randn(4)
    seen = []
    with events.collecting(seen.append):
        compiled = dynamo_lite.compile(f, backend="eager")
        assert_same(compiled(x), f(x))
        assert_same(compiled(x), f(x))
    frames = {e.frame for e in seen if isinstance(e, events.GraphEvent)}
    assert "_inner_work" in frames and not any("_frame_not_captured" in name for name in frames), frames
    breaks = [e for e in seen if isinstance(e, events.GraphBreakEvent)]
    assert [b.break_id for b in breaks] == ["DL0067"], breaks
    assert "recursive=False" in breaks[0].reason
    assert _frame_not_captured.__name__ == "_frame_not_captured"  # the function itself, marked


def test_disable_non_recursive_takes_a_python_function():
    with pytest.raises(TypeError, match="takes a Python function"):
        dynamo_lite.disable(len, recursive=False)
