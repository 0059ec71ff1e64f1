"""fullgraph=True errors and config knobs as a user sets them.

Every test compares compiled with eager through dynamo_lite.testing; known bugs are strict
xfails in tests/test_known_bugs.py.
"""
import logging

import pytest
import torch

import dynamo_lite
from dynamo_lite import config
from dynamo_lite.testing import CompileCounter, assert_same
from dynamo_lite.testing import recording as _recording, event_kinds as _kinds, line_of as _line_of
from dynamo_lite.testing import print_with_graph_break as print  # noqa: A001 - a graph break at each print

pytest_plugins = ["pytester"]

X = torch.arange(6, dtype=torch.float32).reshape(2, 3) / 7 - 0.3


# ---------------------------------------------------------------- fullgraph
def test_fullgraph_message_names_user_file_and_line():
    def g(t):
        y = t.sin()
        z = y.item()
        if z > 0:  # a branch on a value read from tensor data
            return y * z
        return y

    with pytest.raises(dynamo_lite.Unsupported) as info:
        dynamo_lite.compile(g, backend="eager", fullgraph=True)(torch.ones(1))
    line = _line_of(g, "if z > 0")
    assert info.value.break_id == "DL0007"
    assert f"{__file__}:{line}" in str(info.value)
    assert info.value.user_stack[-1].lineno == line
    assert "if z > 0" in str(info.value)


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


def test_plain_assignment_of_recompile_limit_limits_recompiles():
    cnt = CompileCounter()
    f = dynamo_lite.compile(lambda x, s: x + s, backend=cnt)
    before = config.cache_size_limit
    config.recompile_limit = 2
    try:
        assert config.cache_size_limit == 2
        for s in range(5):
            assert_same(f(X, s), X + s)
    finally:
        config.cache_size_limit = before
    assert cnt.frame_count == 2
    assert config.recompile_limit == before


def test_assigning_a_setting_that_does_not_exist_raises():
    with pytest.raises(AttributeError, match="cache_size_limt"):
        config.cache_size_limt = 2


def test_cache_size_limit_results_stay_right_and_warn_once(caplog):
    cnt = CompileCounter()

    def add_step(x, step):
        return x + step

    f = dynamo_lite.compile(add_step, backend=cnt, dynamic=False)  # (one entry per value)
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
