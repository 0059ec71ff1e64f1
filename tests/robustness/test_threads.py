"""Threads: 8 threads share 4 compiled functions, with varying dtypes and shapes.

The hook's callback is per thread; caches (co_extra), guards, resume
functions and recompiles are shared.  Every result must equal eager's
(computed in the same thread, same inputs), no thread may hang, nothing may
crash.  The workload is tools/stress_workloads.py (bench/stress.py runs it
for 10 s).
"""
import os
import sys
import threading

import pytest
import torch

import dynamo_lite
from dynamo_lite import _C, config

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "tools"))
import stress_workloads as sw  # noqa: E402


def test_eight_threads_four_functions_match_eager():
    run = sw.run_threads(seconds=3.0, n_threads=8, min_calls=15)
    assert run.hung == 0, "a thread did not finish (deadlock?)"
    assert not run.errors, run.errors[0]
    assert all(n >= 15 for n in run.calls), run.calls
    # the functions were really compiled (shared caches), and the hook is off again
    assert all(_C.get_cache(f.__code__) not in (None, _C.SKIP) for f in sw.THREAD_FUNCTIONS)
    assert _C.get_callback() is None


def test_threads_with_recompile_limit_and_errors():
    """A tiny cache limit (eager fallback under contention) and calls that raise."""
    def f(x, k):
        if k == 3:
            raise ValueError(f"bad k {k}")
        return x * k + x.shape[0]

    cf = dynamo_lite.compile(f, backend="eager")
    errors = []

    def worker(t):
        try:
            for i in range(40):
                x = torch.randn(i % 5 + 1, dtype=torch.float64 if t % 2 else torch.float32)
                k = (t + i) % 4
                if k == 3:
                    with pytest.raises(ValueError, match="bad k 3"):
                        cf(x, k)
                else:
                    torch.testing.assert_close(cf(x, k), f(x, k), rtol=0, atol=0)
        except BaseException as e:  # noqa: BLE001
            errors.append(repr(e))

    with config.patch(cache_size_limit=3):
        threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(60)
    assert not any(th.is_alive() for th in threads)
    assert not errors, errors[:3]
    from dynamo_lite.convert_frame import entries_for

    assert len(entries_for(f.__code__)) <= 3


def test_capture_is_per_thread():
    """A thread that is not inside a compiled call runs plain Python while another one compiles."""
    seen = []
    barrier = threading.Barrier(2)

    def g(x):
        seen.append(threading.current_thread().name)
        return x + 1

    def slow_backend(gm, example_inputs):
        barrier.wait(10)  # the other thread runs g while this one is compiling
        barrier.wait(10)
        return gm.forward

    cg = dynamo_lite.compile(g, backend=slow_backend)
    results = {}

    def compiled_caller():
        results["compiled"] = cg(torch.ones(2))

    def plain_caller():
        barrier.wait(10)
        results["plain"] = g(torch.ones(2))  # must not be captured: this thread has no callback
        results["plain_cache"] = _C.get_callback()
        barrier.wait(10)

    t1 = threading.Thread(target=compiled_caller, name="compiled")
    t2 = threading.Thread(target=plain_caller, name="plain")
    t1.start(), t2.start()
    t1.join(30), t2.join(30)
    assert torch.equal(results["compiled"], torch.full((2,), 2.0))
    assert torch.equal(results["plain"], torch.full((2,), 2.0))
    assert results["plain_cache"] is None
    assert sorted(seen) == ["compiled", "plain"]  # g's body ran once per thread (tracing never runs it)
