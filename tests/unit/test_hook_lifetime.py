"""The frame hook is installed only while a compiled call or a capture region runs.

While any PEP 523 eval-frame function is installed, CPython does not inline Python-to-Python
calls, so all Python in the process would run slower after the first compile (about 1.4x on
call-heavy code). The hook is installed when a callback becomes live (a compiled call starts,
an ``optimize`` region is entered) and put back when the last one is dropped, over all threads,
whether the call returns, raises, or is nested in another (csrc/eval_frame.c, dl_hook_acquire /
dl_hook_release). bench/overhead.py measures eager Python after a compiled call.
"""
import sys
import threading

import pytest
import torch

import dynamo_lite
from dynamo_lite import _C


def _state():
    return _C._is_installed(), _C._live_callbacks()


@pytest.fixture(autouse=True)
def _idle():
    assert _state() == (False, 0), "a test before this one left the hook installed"
    yield
    assert _state() == (False, 0)


def test_installed_only_during_a_compiled_call():
    seen = []

    def body(x):
        return x * 2

    def f(x):
        seen.append(_state())  # (runs at trace time and, with a break, in Python)
        return body(x) + 1

    compiled = dynamo_lite.compile(f, backend="eager")
    torch.testing.assert_close(compiled(torch.ones(2)), torch.full((2,), 3.0))
    assert _state() == (False, 0)
    torch.testing.assert_close(compiled(torch.ones(2)), torch.full((2,), 3.0))  # a cache hit
    assert _state() == (False, 0)
    assert seen and all(s == (True, 1) for s in seen), seen


def test_nested_compiled_calls_keep_it_until_the_outermost_returns_and_disabled_calls_pause_it():
    # a disabled call (CallWithHookOff) captures nothing: the default evaluator is back for it
    # (CPython inlines its calls), its callers' callbacks still live; the hook is back after it
    states, around = [], []

    @dynamo_lite.disable
    def probe(x):
        states.append(_state())
        return x

    def outer_fn(x):
        y = inner(x)
        around.append(_state())  # (a break: runs in Python, between the two calls)
        return y + probe(x)

    inner = dynamo_lite.compile(lambda x: probe(x) * 2, backend="eager")
    outer = dynamo_lite.compile(outer_fn, backend="eager")
    outer(torch.ones(2))
    outer(torch.ones(2))
    assert states and all(not installed and live >= 1 for installed, live in states), states
    assert around and all(installed and live == 1 for installed, live in around), around
    assert _state() == (False, 0)


def test_an_exception_puts_it_back():
    def f(x):
        y = x + 1
        raise ValueError(f"boom {y.shape[0]}")

    compiled = dynamo_lite.compile(f, backend="eager")
    for _ in range(2):
        with pytest.raises(ValueError, match="boom"):
            compiled(torch.ones(2))
        assert _state() == (False, 0)


def test_optimize_regions_and_modules():
    with dynamo_lite.optimize("eager"):
        assert _state() == (True, 1)
        with dynamo_lite.disable():
            assert _C.get_callback() is None
        assert _state() == (True, 1)
    assert _state() == (False, 0)
    model = dynamo_lite.compile(torch.nn.Linear(2, 2), backend="eager")
    model(torch.ones(1, 2))
    assert _state() == (False, 0)


def test_threads_share_it_until_the_last_region_ends():
    entered, release = threading.Event(), threading.Event()
    seen = {}

    def worker():
        with dynamo_lite.optimize("eager"):
            entered.set()
            release.wait(30)

    t = threading.Thread(target=worker)
    t.start()
    try:
        assert entered.wait(30)
        seen["other thread in a region"] = _state()
        with dynamo_lite.optimize("eager"):
            seen["both"] = _state()
        seen["this one left"] = _state()
    finally:
        release.set()
        t.join(30)
    assert seen == {"other thread in a region": (True, 1), "both": (True, 2), "this one left": (True, 1)}


def test_reset_leaves_it_off():
    compiled = dynamo_lite.compile(lambda x: x + 1, backend="eager")
    compiled(torch.ones(1))
    dynamo_lite.reset()
    assert _state() == (False, 0)


def test_callbacks_are_not_leaked_by_calls_that_return_or_raise():
    from dynamo_lite._C import RUN_EAGER

    def callback(code, f_locals, func):
        return RUN_EAGER

    def ok(x):
        return x + 1

    def bad(x):
        raise KeyError(x)

    calls = [_C.CallWithCallback(ok, callback), _C.CallWithCallback(bad, callback)]
    base = sys.getrefcount(callback)
    for _ in range(100):
        assert calls[0](1) == 2
        with pytest.raises(KeyError):
            calls[1](1)
        prev = _C.set_callback(callback)
        assert _C.set_callback(prev) is callback
        del prev
    assert sys.getrefcount(callback) == base
    assert _state() == (False, 0)
