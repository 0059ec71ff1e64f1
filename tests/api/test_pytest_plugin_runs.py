"""The pytest plugin run on inner test files (pytester) as a user runs it.

Every test compares compiled with eager through dynamo_lite.testing; known bugs are strict
xfails in tests/test_known_bugs.py.
"""
import contextlib
import importlib
import io
import pkgutil

import pytest
import torch

import dynamo_lite
from dynamo_lite.report import events

pytest_plugins = ["pytester"]

X = torch.arange(6, dtype=torch.float32).reshape(2, 3) / 7 - 0.3


def _two_breaks(t):
    a = t.sin()
    print("hi")
    b = a.cos()
    if b.sum() > 0:
        b = b + 1
    return b

# ---------------------------------------------------------------- pytest plugin (pytester)
importlib.import_module("torch._inductor.test_operators")  # before any inner run: see below


def _warm_up_for_pytester():
    """pytester drops modules an inner run imported; import what a compile needs first
    (torch._inductor registers an operator library, which fails when imported twice: it is
    imported below, outside any inner run)."""
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
                                 "0 fallbacks, 0 internal errors",
                                 f"*your code*test_inner.py:{BRANCH_LINE}  DL0025 branch on a tensor*"])


def test_plugin_dl_keeps_eager_outcomes(inner_pytest):
    result = inner_pytest(INNER, "--dl")
    result.assert_outcomes(passed=5, failed=1, xfailed=1)
    result.stdout.fnmatch_lines(["*(--dl, backend=eager)*"])
    assert "test_fails_eagerly_too" in result.stdout.str()


def test_plugin_dl_caplog_test_still_passes(inner_pytest):
    assert inner_pytest(INNER_CAPLOG).ret == 0  # passes without --dl
    result = inner_pytest(INNER_CAPLOG, "--dl")
    result.assert_outcomes(passed=1)


INNER_HOLDER = '''import pytest, torch

class Holder:
    def __init__(self, t):
        self.t = t

@pytest.fixture
def holder():
    return Holder(torch.ones(3))

def test_body(holder):
    assert (holder.t * 2).sum().item() == 6.0  # (the body names no torch global: its argument holds the tensor)
'''


def test_plugin_dl_captures_a_test_body_whose_fixture_holds_the_tensors(inner_pytest):
    result = inner_pytest(INNER_HOLDER, "--dl")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["1 of 1 test compiled code: 1 frame, 1 graph,*"])
