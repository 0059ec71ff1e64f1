"""Acceptance (part 2): the public API and diagnostics as a torch.compile user drives them.

Covers what tests/test_acceptance_api.py does not: compile() of staticmethods,
classmethods, callable objects, functools.partial, closures, `compile(model.forward)`
and methods decorated in a class body; compiled functions calling compiled functions;
`disable` (decorator, context manager, of a compiled function); `optimize()` nesting
and re-entry; `reset()` inside compiled code; every `explain()` field and its text;
`fullgraph=True` messages naming the user's file and line; `config.patch`
(`recompile_limit` alias, `suppress_errors`, cache-size limit with one warning);
recompiles on dtype / shape / requires_grad / scalars / globals / closures / module
attributes with results compared to eager; DYNAMO_LITE_LOGS and `set_logs`; user
logging records and warnings inside compiled code (must equal eager's); the pytest
plugin run on small files with pytester (`--dl`); `register_backend`; and two
threads compiling at once.

Tests marked xfail(strict=True) document a bug or a doc/behaviour mismatch found
here (the reason names it); they pass once it is fixed.
"""
import contextlib
import functools
import importlib
import io
import logging
import os
import pkgutil
import subprocess
import sys
import threading
import warnings

import pytest
import torch

import dynamo_lite
from dynamo_lite import config
from dynamo_lite.report import events
from dynamo_lite.testing import CompileCounter, assert_same

pytest_plugins = ["pytester"]

X = torch.arange(6, dtype=torch.float32).reshape(2, 3) / 7 - 0.3


def _recording():
    seen = []
    return seen, events.collecting(seen.append)


def _kinds(seen):
    return [type(e).__name__ for e in seen]


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


def test_compile_rejects_mode_and_options_and_non_callables():
    with pytest.raises(TypeError):
        dynamo_lite.compile(lambda x: x, mode="max-autotune")
    with pytest.raises(TypeError):
        dynamo_lite.compile(lambda x: x, options={"a": 1})
    with pytest.raises(TypeError):
        dynamo_lite.compile(3)
    with pytest.raises(ValueError, match="no_such_backend"):
        dynamo_lite.compile(lambda x: x, backend="no_such_backend")


def test_compile_decorator_form_rejects_mode():
    with pytest.raises(TypeError):
        dynamo_lite.compile(backend="eager", mode="max-autotune")


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


# ---------------------------------------------------------------- explain
def _two_breaks(t):
    a = t.sin()
    print("hi")
    b = a.cos()
    if b.sum() > 0:
        b = b + 1
    return b


def _line_of(fn, text):
    import inspect

    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if text in line)


def test_explain_counts_and_ops_per_graph(capsys):
    r = dynamo_lite.explain(_two_breaks)(X)
    assert (r.graph_count, r.graph_break_count) == (3, 2)
    assert r.ops_per_graph == [1, 3, 1]
    assert len(r.graphs) == len(r.guards) == 3
    assert_same(r.out, _two_breaks(X))


def test_explain_break_reasons_name_user_file_and_line(capsys):
    r = dynamo_lite.explain(_two_breaks)(X)
    got = [(b.break_id, b.filename, b.lineno) for b in r.break_reasons]
    assert got == [("DL0014", __file__, _line_of(_two_breaks, 'print("hi")')),
                   ("DL0025", __file__, _line_of(_two_breaks, "if b.sum()"))]
    text = str(r)
    assert f"{__file__}:{_line_of(_two_breaks, 'print(')}" in text
    assert text.startswith("Graph count: 3\nGraph break count: 2\nOp count: 5")


def test_explain_break_in_resumed_code_names_the_user_function(capsys):
    r = dynamo_lite.explain(_two_breaks)(X)
    assert [b.user_stack[-1].name for b in r.break_reasons] == ["_two_breaks", "_two_breaks"]
    assert "__resume_at" not in str(r).split("Graph 0")[0]


def test_explain_guards_describe_inputs():
    def f(x, factor, names):
        for _ in names:
            x = x * factor
        return x

    r = dynamo_lite.explain(f)(X, 0.5, ["a", "b"])
    lines = r.guards[0]
    assert "factor: == 0.5" in lines
    assert "names: len == 2" in lines
    assert any(line.startswith("x: Tensor(dtype=float32") and "shape=[2, 3]" in line for line in lines)


def test_explain_accepts_kwargs_and_torch_style_args():
    def f(x, k=2.0):
        return x * k

    r1 = dynamo_lite.explain(f)(X, k=3.0)
    r2 = dynamo_lite.explain(f, X, k=3.0)
    assert_same(r1.out, X * 3.0)
    assert (r1.graph_count, r1.graph_break_count) == (r2.graph_count, r2.graph_break_count) == (1, 0)


def test_explain_of_module_and_of_compiled_module():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU())
    r1 = dynamo_lite.explain(m)(X)
    r2 = dynamo_lite.explain(dynamo_lite.compile(m, backend="eager"))(X)
    assert r1.ops_per_graph == r2.ops_per_graph == [2]
    assert r1.graph_break_count == r2.graph_break_count == 0


def test_explain_propagates_user_exception():
    def bad(x):
        return x + torch.ones(4)

    with pytest.raises(RuntimeError, match="size"):
        dynamo_lite.explain(bad)(X)


def test_explain_to_dict_is_json_and_consistent(capsys):
    import json

    r = dynamo_lite.explain(_two_breaks)(X)
    d = json.loads(json.dumps(r.to_dict()))
    assert d["graph_count"] == 3 and d["graph_break_count"] == 2
    assert [b["break_id"] for b in d["break_reasons"]] == ["DL0014", "DL0025"]
    assert d["op_names"][0] == ["sin"]


def test_explain_counts_fallback_as_break():
    with torch.device("cpu"):  # a torch function mode: the frame runs eagerly
        r = dynamo_lite.explain(lambda x: x.sin() + 1)(X)
    assert (r.graph_count, r.graph_break_count) == (0, 1)
    assert r.break_reasons[0].kind == "fallback"
    assert "frame ran eagerly" in str(r)


# ---------------------------------------------------------------- fullgraph
def test_fullgraph_message_names_user_file_and_line():
    def g(t):
        y = t.sin()
        z = y.item()
        return y * z

    with pytest.raises(dynamo_lite.Unsupported) as info:
        dynamo_lite.compile(g, backend="eager", fullgraph=True)(torch.ones(1))
    line = _line_of(g, "y.item()")
    assert info.value.break_id == "DL0007"
    assert f"{__file__}:{line}" in str(info.value)
    assert info.value.user_stack[-1].lineno == line
    assert "y.item()" in str(info.value)


def test_fullgraph_break_in_inlined_helper_has_whole_user_stack():
    def helper(t):
        print("x")
        return t

    def top(t):
        return helper(t.sin())

    with pytest.raises(dynamo_lite.Unsupported) as info:
        dynamo_lite.compile(top, backend="eager", fullgraph=True)(X)
    stack = info.value.user_stack
    assert [f.name for f in stack] == ["top", "helper"]
    assert [f.lineno for f in stack] == [_line_of(top, "return helper"), _line_of(helper, 'print("x")')]


def test_fullgraph_user_exception_is_raised_as_is():
    def f(x):
        if x.shape[0] == 2:
            raise ValueError("two rows")
        return x

    with pytest.raises(ValueError, match="two rows"):
        dynamo_lite.compile(f, backend="eager", fullgraph=True)(X)


def test_fullgraph_entries_are_separate_from_non_fullgraph():
    def g(x):
        y = x.sin()
        print(end="")
        return y

    dynamo_lite.compile(g, backend="eager")(X)
    with pytest.raises(dynamo_lite.Unsupported):
        dynamo_lite.compile(g, backend="eager", fullgraph=True)(X)


def test_optimize_fullgraph_raises():
    def g(x):
        print(end="")
        return x

    with pytest.raises(dynamo_lite.Unsupported):
        with dynamo_lite.optimize("eager", fullgraph=True):
            g(X)


def test_fullgraph_does_not_silently_fall_back_under_torch_function_mode():
    f = dynamo_lite.compile(lambda x: x.sin() + 1, backend="eager", fullgraph=True)
    with torch.device("cpu"):
        with pytest.raises(dynamo_lite.Unsupported):
            f(X)


# ---------------------------------------------------------------- config
def test_config_patch_decorator_and_nesting():
    @config.patch(cache_size_limit=3)
    def read():
        return config.cache_size_limit

    before = config.cache_size_limit
    assert read() == 3
    p = config.patch(max_inline_depth=5)
    with p:
        with p:
            assert config.max_inline_depth == 5
        assert config.max_inline_depth == 5
    assert config.cache_size_limit == before and config.max_inline_depth == 32
    with pytest.raises(AttributeError):
        config.patch(no_such_setting=1)


def test_recompile_limit_alias_limits_recompiles():
    cnt = CompileCounter()
    f = dynamo_lite.compile(lambda x, s: x + s, backend=cnt)
    with config.patch(recompile_limit=2):
        assert config.cache_size_limit == 2
        for s in range(5):
            assert_same(f(X, s), X + s)
    assert cnt.frame_count == 2


def test_cache_size_limit_results_stay_right_and_warn_once(caplog):
    cnt = CompileCounter()

    def add_step(x, step):
        return x + step

    f = dynamo_lite.compile(add_step, backend=cnt)
    seen, rec = _recording()
    with config.patch(cache_size_limit=2), rec, caplog.at_level(logging.WARNING, logger="dynamo_lite"):
        for step in list(range(6)) + [0, 1, 5]:
            assert_same(f(X, step), X + step)
    assert cnt.frame_count == 2
    warns = [r for r in caplog.records if r.name.startswith("dynamo_lite") and r.levelno == logging.WARNING]
    assert len(warns) == 1
    assert "add_step" in warns[0].getMessage() and "cache_size_limit=2" in warns[0].getMessage()
    assert "step changed from 1 to 2" in warns[0].getMessage()
    assert _kinds(seen).count("CacheLimitEvent") == 1


def test_cache_size_limit_with_graph_breaks_results_right():
    def f(x, s):
        a = x + s
        print(end="")
        return a * s

    cf = dynamo_lite.compile(f, backend="eager")
    with config.patch(cache_size_limit=2):
        for s in range(5):
            assert_same(cf(X, s), (X + s) * s)


def test_cache_limit_is_per_configuration():
    c1, c2 = CompileCounter(), CompileCounter()

    def f(x, s):
        return x * s

    f1 = dynamo_lite.compile(f, backend=c1)
    f2 = dynamo_lite.compile(f, backend=c2)
    with config.patch(cache_size_limit=1):
        for s in (1, 2, 3):
            assert_same(f1(X, s), X * s)
        assert_same(f2(X, 2), X * 2)
    assert (c1.frame_count, c2.frame_count) == (1, 1)


def test_suppress_errors_backend_failure_falls_back_or_raises():
    def bad_backend(gm, example_inputs):
        raise RuntimeError("backend boom")

    def f(x):
        return x * 3

    with config.patch(raise_internal_errors=False, suppress_errors=True):
        seen, rec = _recording()
        with rec:
            assert_same(dynamo_lite.compile(f, backend=bad_backend)(X), X * 3)
        assert "FallbackEvent" in _kinds(seen)
    dynamo_lite.reset()
    with config.patch(raise_internal_errors=False, suppress_errors=False):
        with pytest.raises(Exception, match="backend boom"):
            dynamo_lite.compile(f, backend=bad_backend)(X)


# ---------------------------------------------------------------- recompiles
def _calls(fn, arg_list, backend=None):
    cnt = backend or CompileCounter()
    cf = dynamo_lite.compile(fn, backend=cnt)
    for args in arg_list:
        expected = fn(*args)
        got = cf(*args)
        assert_same(got, expected)
        if isinstance(expected, torch.Tensor):
            assert got.dtype == expected.dtype and got.requires_grad == expected.requires_grad
    return cnt


def test_recompile_reasons_dtype_shape_value():
    def affine(x, bias):
        return x * 2 + bias

    seen, rec = _recording()
    with rec:
        _calls(affine, [(torch.ones(4), 1.0), (torch.ones(4), 1.0), (torch.ones(4, dtype=torch.float64), 1.0),
                        (torch.ones(5), 1.0), (torch.ones(4), 2.0)])
    reasons = [" | ".join(e.reasons) for e in seen if isinstance(e, events.RecompileEvent)]
    assert reasons == ["x.dtype changed from float32 to float64",  # newest entry first (docs/recompiles.md)
                       "x.dtype changed from float64 to float32 | x.shape changed from [4] to [5]",
                       " | ".join(["bias changed from 1.0 to 2.0"] * 3)]


def test_recompile_on_requires_grad_and_grads_match():
    def f(x):
        return (x * 2).sum()

    cnt = CompileCounter()
    cf = dynamo_lite.compile(f, backend=cnt)
    assert not cf(X).requires_grad
    y = X.clone().requires_grad_()
    out = cf(y)
    out.backward()
    assert out.requires_grad and torch.equal(y.grad, torch.full_like(X, 2.0))
    assert cnt.frame_count == 2


def test_python_scalar_types_int_float_bool_keep_eager_dtype():
    def f(x, s):
        return x * s

    ints = torch.ones(3, dtype=torch.int64)
    cnt = _calls(f, [(X, 2), (X, 2.0), (X, True), (ints, 2), (ints, 2.0), (ints, True)])
    assert cnt.frame_count == 6


def test_python_float_negative_zero_and_nan():
    def f(x, s):
        return torch.ones(1) / s + x

    cnt = _calls(f, [(torch.zeros(1), 0.0), (torch.zeros(1), -0.0), (torch.zeros(1), 0.0)])
    assert cnt.frame_count == 2
    g = dynamo_lite.compile(lambda x, s: x + s, backend="eager")
    for _ in range(3):
        assert torch.isnan(g(X, float("nan"))).all()


def test_string_and_none_arguments():
    def f(x, mode, extra):
        y = x.sum() if mode == "sum" else x.mean()
        return y if extra is None else y + extra

    _calls(f, [(X, "sum", None), (X, "mean", None), (X, "sum", 1.0), (X, "sum", None), (X, "mean", X)])


GLOBAL_SCALE = 2.0
GLOBAL_W = torch.ones(3)


def test_global_scalar_and_tensor_changes_recompile_or_reread():
    global GLOBAL_SCALE, GLOBAL_W

    def f(x):
        return x * GLOBAL_SCALE + GLOBAL_W

    cf = dynamo_lite.compile(f, backend="eager")
    try:
        assert_same(cf(X), f(X))
        GLOBAL_SCALE = 3.0
        assert_same(cf(X), f(X))
        GLOBAL_W = torch.zeros(3)
        assert_same(cf(X), f(X))
        GLOBAL_W = torch.zeros(3, dtype=torch.float64)
        assert_same(cf(X), f(X))
        del GLOBAL_W
        with pytest.raises(NameError):
            cf(X)
    finally:
        GLOBAL_SCALE, GLOBAL_W = 2.0, torch.ones(3)


def test_closure_cell_value_and_type_change():
    def make():
        k = 1.0

        def inner(x):
            return x * k

        def set_k(v):
            nonlocal k
            k = v
        return inner, set_k

    inner, set_k = make()
    f = dynamo_lite.compile(inner, backend="eager")
    assert_same(f(X), X)
    set_k(5.0)
    assert_same(f(X), X * 5.0)
    set_k(torch.full((3,), 2.0))
    assert_same(f(X), X * 2.0)
    set_k(3)
    assert_same(f(X), X * 3)


def test_module_attribute_flag_and_submodule_replacement():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.flag = True
            self.scale = 2.0
            self.lin = torch.nn.Linear(3, 3)

        def forward(self, x):
            return self.lin(x) * self.scale if self.flag else x * self.scale

    torch.manual_seed(0)
    m = M()
    cm = dynamo_lite.compile(m, backend="eager")
    assert_same(cm(X), m(X))
    m.flag = False
    assert_same(cm(X), m(X))
    cm.scale = 4.0  # set through the compiled module: shared state
    assert m.scale == 4.0
    assert_same(cm(X), m(X))
    m.flag = True
    m.lin = torch.nn.Identity()
    assert_same(cm(X), m(X))


def test_function_defaults_and_code_replacement():
    def f(x, k=2):
        return x * k

    cf = dynamo_lite.compile(f, backend="eager")
    assert_same(cf(X), X * 2)
    f.__defaults__ = (5,)
    assert_same(cf(X), X * 5)
    f.__code__ = (lambda x, k=2: x + k * 100).__code__
    assert_same(cf(X), X + 500)


def test_grad_mode_and_inference_mode_entries():
    cf = dynamo_lite.compile(lambda x: x * 2, backend="eager")
    y = X.clone().requires_grad_()
    assert cf(y).requires_grad
    with torch.no_grad():
        assert not cf(y).requires_grad
    with torch.inference_mode():
        assert cf(X).is_inference()
    assert not cf(X).is_inference()


def test_strided_views_recompile_and_match():
    a = torch.arange(12.0).reshape(3, 4)

    def f(x):
        return x.reshape(-1) * 2

    cnt = _calls(f, [(a,), (a.t(),), (a[:, ::2],), (a,)])
    assert cnt.frame_count == 3


def test_same_inputs_no_recompile_new_values_no_recompile():
    cnt = _calls(lambda x, y: x @ y.T, [(X, X + 1), (X * 2, X - 1), (torch.randn(2, 3), torch.randn(2, 3))])
    assert cnt.frame_count == 1


def test_keyword_order_varargs_and_list_length_changes():
    def f(x, *, a=1.0, b=2.0):
        return x * a - b

    def g(*args, **kw):
        return sum(args) + sum(kw.values())

    def h(ts):
        return sum(t * i for i, t in enumerate(ts))

    _calls(f, [(X,)])
    cf = dynamo_lite.compile(f, backend="eager")
    for kw in (dict(a=2.0, b=1.0), dict(b=1.0, a=2.0), dict(b=5.0), {}):
        assert_same(cf(X, **kw), f(X, **kw))
    cg = dynamo_lite.compile(g, backend="eager")
    for a, kw in (((X,), {}), ((X, X), {}), ((X,), {"q": X}), ((X,), {"q": X, "r": 1.0})):
        assert_same(cg(*a, **kw), g(*a, **kw))
    _calls(h, [([X],), ([X, X],), ([X, X * 2, X],), ([X],)])


def test_module_buffer_replaced_mutated_and_reshaped():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("b", torch.ones(3))

        def forward(self, t):
            return t + self.b

    m = M()
    cm = dynamo_lite.compile(m, backend="eager")
    assert_same(cm(X), m(X))
    m.b = torch.zeros(3)
    assert_same(cm(X), m(X))
    m.b.fill_(4)
    assert_same(cm(X), X + 4)
    m.b = torch.ones(1, 3, dtype=torch.float64)
    assert_same(cm(X), m(X))


def test_cache_limit_two_backends_interleaved_results_right():
    c1, c2 = CompileCounter(), CompileCounter()

    def h(t, s):
        return t * s

    h1 = dynamo_lite.compile(h, backend=c1)
    h2 = dynamo_lite.compile(h, backend=c2)
    with config.patch(cache_size_limit=2):
        for s in range(5):
            assert_same(h1(X, s), X * s)
            assert_same(h2(X, s + 10), X * (s + 10))
        assert_same(h1(X, 1), X)
        assert_same(h2(X, 11), X * 11)
    assert (c1.frame_count, c2.frame_count) == (2, 2)


def test_optimize_and_compile_with_same_backend_share_entries():
    cnt = CompileCounter()

    def k(t):
        return t.exp()

    with dynamo_lite.optimize(cnt):
        k(X)
    assert_same(dynamo_lite.compile(k, backend=cnt)(X), X.exp())
    assert cnt.frame_count == 1


# ---------------------------------------------------------------- logs
def _affine(x, bias):
    return x * 2 + bias


def test_set_logs_recompiles_to_stderr_with_compile_id():
    f = dynamo_lite.compile(_affine, backend="eager")
    buf = io.StringIO()
    seen, rec = _recording()
    try:
        with contextlib.redirect_stderr(buf), rec:
            dynamo_lite.set_logs("recompiles")
            f(X, 1.0)
            f(torch.ones(4, 4), 1.0)
    finally:
        dynamo_lite.set_logs()
    ids = [e.compile_id for e in seen if isinstance(e, events.RecompileEvent)]
    out = buf.getvalue()
    assert len(ids) == 1 and f"[{ids[0]}] Recompiling _affine" in out
    assert "x.shape changed from [2, 3] to [4, 4]" in out
    assert out.count("\n") == 1


def test_set_logs_default_prints_nothing_and_invalid_name_raises():
    buf = io.StringIO()
    f = dynamo_lite.compile(_two_breaks, backend="eager")
    with contextlib.redirect_stderr(buf), contextlib.redirect_stdout(io.StringIO()):
        f(X)
        f(torch.ones(3))
    assert buf.getvalue() == ""
    with pytest.raises(ValueError, match="nope"):
        dynamo_lite.set_logs("graph_breaks,nope")


def test_set_logs_plus_and_minus_levels():
    f = dynamo_lite.compile(_affine, backend="eager")
    buf = io.StringIO()
    try:
        with contextlib.redirect_stderr(buf):
            dynamo_lite.set_logs("+recompiles")
            f(X, 1.0)
            f(X, 2.0)
            dynamo_lite.set_logs("dynamo_lite,-graph_code,-bytecode")
            dynamo_lite.reset()
            f(X, 1.0)
    finally:
        dynamo_lite.set_logs()
    out = buf.getvalue()
    assert "Guard failures of all 1 cache entries" in out
    assert "dynamo_lite.guards]" in out
    assert "dynamo_lite.graph_code]" not in out and "dynamo_lite.bytecode]" not in out


def test_set_logs_keywords_and_logs_out_file(tmp_path, monkeypatch):
    path = tmp_path / "dl.log"
    monkeypatch.setenv("DYNAMO_LITE_LOGS_OUT", str(path))
    f = dynamo_lite.compile(_affine, backend="eager")
    buf = io.StringIO()
    try:
        with contextlib.redirect_stderr(buf):
            dynamo_lite.set_logs(recompiles=True, guards=logging.INFO)
            f(X, 1.0)
            f(X, 3.0)
    finally:
        dynamo_lite.set_logs()
        logging.getLogger("dynamo_lite")  # handlers were removed by set_logs()
    text = path.read_text()
    assert "Recompiling _affine" in text and "Guards of _affine" in text
    assert "Recompiling _affine" in buf.getvalue()


def test_dynamo_lite_logs_environment_variable(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(
        "import torch, dynamo_lite\n"
        "def g(t, s):\n"
        "    return t * s\n"
        "f = dynamo_lite.compile(g, backend='eager')\n"
        "f(torch.ones(2), 1)\n"
        "f(torch.ones(2), 2)\n")
    env = dict(os.environ, DYNAMO_LITE_LOGS="recompiles")
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if "dynamo_lite" in line]
    assert len(lines) == 1
    assert lines[0].startswith("I") and "dynamo_lite.recompiles] [0/1] Recompiling g (" in lines[0]
    assert lines[0].endswith(f"{script}:2) because: s changed from 1 to 2")


# ---------------------------------------------------------------- user logging / warnings
USER_LOG = logging.getLogger("acceptance_api2.user")


def _logs(t, n):
    USER_LOG.info("value %d", n)
    y = t * n
    USER_LOG.warning("done %s", y.shape)
    return y


def _records(caplog, fn, *args):
    caplog.clear()
    out = fn(*args)
    return out, [(r.name, r.levelname, r.getMessage(), r.pathname, r.lineno)
                 for r in caplog.records if r.name == USER_LOG.name]


def test_user_logging_messages_levels_and_lines_match_eager(caplog):
    caplog.set_level(logging.INFO, logger=USER_LOG.name)
    e = _records(caplog, _logs, X, 3)
    c = _records(caplog, dynamo_lite.compile(_logs, backend="eager"), X, 3)
    assert_same(c[0], e[0])
    assert c[1] == e[1] and len(e[1]) == 2


def test_user_logging_below_level_is_silent_and_not_a_break(caplog):
    def f(t):
        USER_LOG.debug("dbg %s", t.shape)
        return t * 2

    caplog.set_level(logging.INFO, logger=USER_LOG.name)
    cnt = CompileCounter()
    assert_same(dynamo_lite.compile(f, backend=cnt)(X), X * 2)
    assert [r for r in caplog.records if r.name == USER_LOG.name] == []


def test_user_logging_funcname_matches_eager(caplog):
    caplog.set_level(logging.INFO, logger=USER_LOG.name)
    caplog.clear()
    _logs(X, 3)
    eager = [r.funcName for r in caplog.records]
    caplog.clear()
    dynamo_lite.compile(_logs, backend="eager")(X, 3)
    assert [r.funcName for r in caplog.records] == eager == ["_logs", "_logs"]


def test_caplog_at_info_sees_only_user_records(caplog):
    caplog.set_level(logging.INFO)
    caplog.clear()
    _logs(X, 3)
    eager = [(r.name, r.getMessage()) for r in caplog.records]
    caplog.clear()
    dynamo_lite.compile(_logs, backend="eager")(X, 3)
    assert [(r.name, r.getMessage()) for r in caplog.records] == eager


def _warns(fn, *args):
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        out = fn(*args)
    return out, [(str(w.message), w.category, w.filename, w.lineno) for w in rec]


def _warn_self(t):
    warnings.warn("careful", UserWarning)
    return t + 1


def _old_api(t):
    warnings.warn("old_api is deprecated", FutureWarning, stacklevel=2)
    return t * 2


def _calls_old_api(t):
    y = t + 1
    z = _old_api(y)
    for _ in range(2):
        z = _old_api(z)
    return z.sin()


def test_user_warning_matches_eager_file_line_category():
    e = _warns(_warn_self, X)
    c = _warns(dynamo_lite.compile(_warn_self, backend="eager"), X)
    assert_same(c[0], e[0])
    assert c[1] == e[1] and len(e[1]) == 1


def test_stacklevel2_warning_from_helper_points_at_compiled_caller():
    e = _warns(_calls_old_api, X)
    c = _warns(dynamo_lite.compile(_calls_old_api, backend="eager"), X)
    assert_same(c[0], e[0])
    assert c[1] == e[1] and len(e[1]) == 3 and e[1][0][2] == __file__


def test_recwarn_inside_compiled_matches_eager(recwarn):
    dynamo_lite.compile(_warn_self, backend="eager")(X)
    assert len(recwarn) == 1
    w = recwarn.pop(UserWarning)
    assert (w.filename, w.lineno) == (__file__, _line_of(_warn_self, "warnings.warn"))


def test_stacklevel2_warning_of_compiled_function_points_at_its_caller():
    e = _warns(_old_api, X)
    c = _warns(dynamo_lite.compile(_old_api, backend="eager"), X)
    assert c[1] == e[1]


def test_warning_once_filter_same_as_eager():
    def f(t):
        warnings.warn("only once per location")
        return t

    cf = dynamo_lite.compile(f, backend="eager")
    counts = []
    for fn in (f, cf):
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("once")
            for _ in range(3):
                fn(X)
        counts.append(len(rec))
    assert counts == [1, 1]


# ---------------------------------------------------------------- register_backend
def test_register_backend_by_name_and_decorator_with_name():
    from dynamo_lite import backends

    cnt = CompileCounter()
    name = "acceptance_api2_counter"
    try:
        dynamo_lite.register_backend(name, cnt)
        assert name in dynamo_lite.list_backends()
        assert_same(dynamo_lite.compile(lambda x: x * 2, backend=name)(X), X * 2)
        assert cnt.frame_count == 1
        with pytest.raises(ValueError):
            dynamo_lite.register_backend(name, cnt)
    finally:
        backends._BACKENDS.pop(name, None)


def test_register_backend_bare_decorator_as_in_torch():
    from dynamo_lite import backends

    def acceptance_api2_bare(gm, example_inputs):
        return gm.forward

    try:
        registered = dynamo_lite.register_backend(acceptance_api2_bare)
        assert registered is acceptance_api2_bare
        assert "acceptance_api2_bare" in dynamo_lite.list_backends()
    finally:
        for k in [k for k, v in backends._BACKENDS.items() if k is acceptance_api2_bare or
                  k == "acceptance_api2_bare"]:
            backends._BACKENDS.pop(k, None)


# ---------------------------------------------------------------- threads
def _loop_sin(t):
    for _ in range(15):
        t = t.sin() + 1
    return t


def _loop_cos(t):
    for _ in range(15):
        t = t.cos() * 2
    return t


def test_two_threads_compile_different_functions_at_once():
    ca, cb = CompileCounter(), CompileCounter()
    fa = dynamo_lite.compile(_loop_sin, backend=ca)
    fb = dynamo_lite.compile(_loop_cos, backend=cb)
    barrier = threading.Barrier(2)
    results, errors = {}, []

    def run(name, f):
        try:
            barrier.wait()
            results[name] = [f(X) for _ in range(4)]
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=("a", fa)), threading.Thread(target=run, args=("b", fb))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    for r in results["a"]:
        assert_same(r, _loop_sin(X))
    for r in results["b"]:
        assert_same(r, _loop_cos(X))
    assert (ca.frame_count, cb.frame_count) == (1, 1)


def test_optimize_in_one_thread_does_not_capture_in_another():
    cnt = CompileCounter()
    barrier = threading.Barrier(2)
    done = threading.Event()

    def plain(t):
        return t + 1

    def other():
        barrier.wait()
        for _ in range(50):
            plain(X)
        done.set()

    def capturing():
        barrier.wait()
        with dynamo_lite.optimize(cnt):
            while not done.is_set():
                _loop_cos(X)

    threads = [threading.Thread(target=other), threading.Thread(target=capturing)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert cnt.frame_count == 1
    assert all("add" not in str(n.target) for g in cnt.graphs for n in g.graph.nodes)


# ---------------------------------------------------------------- pytest plugin (pytester)
def _warm_up_for_pytester():
    """pytester drops modules an inner run imported; import what a compile needs first."""
    for info in pkgutil.walk_packages(dynamo_lite.__path__, "dynamo_lite."):
        if info.name.rsplit(".", 1)[-1] not in ("__main__", "demo"):
            importlib.import_module(info.name)
    saved = events._SINKS[:]
    events._SINKS.clear()
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            dynamo_lite.explain(_two_breaks)(X)
    finally:
        events._SINKS[:] = saved
    dynamo_lite.reset()


INNER = '''import logging, warnings, pytest, torch, dynamo_lite
log = logging.getLogger("inner")

def forward(x):
    h = torch.tanh(x @ x.T)
    if h.mean() > 0:
        h = h * 2
    return h.sum()

def test_forward():
    assert dynamo_lite.compile(forward, backend="eager")(torch.ones(3, 3)) > 0

def test_recwarn(recwarn):
    x = torch.ones(3)
    warnings.warn("w1")
    y = x + 1
    assert len(recwarn) == 1 and recwarn[0].lineno == WARN_LINE

def test_raises():
    x = torch.ones(3)
    with pytest.raises(RuntimeError, match="size"):
        x + torch.ones(4)

@pytest.mark.parametrize("n", [1, 2])
def test_param(n):
    x = torch.ones(3)
    assert (x * n).sum().item() == 3 * n

def test_fails_eagerly_too():
    x = torch.ones(3)
    assert (x * 2).sum().item() == 7

@pytest.mark.xfail(strict=True)
def test_xf():
    assert torch.ones(1).item() == 2
'''
BRANCH_LINE = INNER.splitlines().index("    if h.mean() > 0:") + 1
INNER = INNER.replace("WARN_LINE", str(INNER.splitlines().index('    warnings.warn("w1")') + 1))

INNER_CAPLOG = '''import logging, torch
log = logging.getLogger("inner")

def test_caplog(caplog):
    caplog.set_level(logging.INFO)
    x = torch.ones(3)
    log.info("a %s", x.shape)
    y = x * 2
    log.warning("b")
    assert [(r.name, r.getMessage()) for r in caplog.records] == [("inner", "a torch.Size([3])"), ("inner", "b")]
'''


@pytest.fixture
def inner_pytest(pytester, monkeypatch):
    _warm_up_for_pytester()
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")

    def run(source, *args):
        pytester.makepyfile(test_inner=source)
        return pytester.runpytest("-p", "dynamo_lite.pytest_plugin", "-p", "no:cacheprovider", *args)
    return run


def test_plugin_summary_counts_without_dl(inner_pytest):
    result = inner_pytest(INNER)
    result.assert_outcomes(passed=5, failed=1, xfailed=1)
    out = result.stdout.str()
    assert "dynamo_lite graph breaks" in out
    result.stdout.fnmatch_lines(["1 of 7 tests compiled code: 2 frames, 2 graphs, 1 graph break, 0 recompiles, "
                                 "0 fallbacks",
                                 f"*DL0025 Branch on a tensor*test_inner.py:{BRANCH_LINE}"])


def test_plugin_dl_keeps_eager_outcomes(inner_pytest):
    result = inner_pytest(INNER, "--dl")
    result.assert_outcomes(passed=5, failed=1, xfailed=1)
    result.stdout.fnmatch_lines(["*(--dl, backend=eager)*"])
    assert "test_fails_eagerly_too" in result.stdout.str()


def test_plugin_dl_caplog_test_still_passes(inner_pytest):
    assert inner_pytest(INNER_CAPLOG).ret == 0  # passes without --dl
    result = inner_pytest(INNER_CAPLOG, "--dl")
    result.assert_outcomes(passed=1)
