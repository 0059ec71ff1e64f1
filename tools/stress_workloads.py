"""Stress workloads shared by tests/robustness/test_threads.py, tests/robustness/test_hostile.py and bench/stress.py.

    THREAD_FUNCTIONS, thread_call_args   four functions (full graph, unrolled loop, tensor
                                         branch with a resume function, dict iteration with
                                         a graph break) and random inputs (2 dtypes x 2 shapes)
    run_threads(seconds, n_threads)      n threads call the compiled functions with random
                                         inputs; each result is compared with eager in the
                                         same thread -> ThreadRun(calls, errors, hung)
    rss_mb()                             resident set size of this process
    compile_reset_loop(iterations)       compile + call + reset of a fresh function object
                                         (new code object each time) -> RSS samples
    cached_call_loop(calls)              many cache-hit calls of one compiled function -> RSS
"""
from __future__ import annotations

import contextlib
import dataclasses
import gc
import io
import os
import random
import threading
import time
import traceback

import torch

import dynamo_lite


def f_full(x, y):
    return (x * y).relu() + x.sum()


def f_loop(x, n):
    for i in range(n):
        x = x + i
    return x.sin()


def f_branch(x):
    if x.sum() > 0:  # a tensor branch: graph break, resume functions
        return x * 2
    return x - 1


def f_dict(x, d):
    out = []
    for k, v in d.items():
        out.append(x * v)
    return torch.stack(out).mean(0), len(out)


THREAD_FUNCTIONS = (f_full, f_loop, f_branch, f_dict)
SHAPES = ((2, 3), (4, 1))
DTYPES = (torch.float32, torch.float64)


def thread_call_args(i: int, rng: random.Random) -> tuple:
    dtype = rng.choice(DTYPES)
    shape = rng.choice(SHAPES)
    x = torch.randn(shape, dtype=dtype)
    if i == 0:
        return (x, torch.randn(shape, dtype=dtype))
    if i == 1:
        return (x, rng.randint(0, 2))
    if i == 2:
        return (x,)
    return (x, {"a": 1.0, "b": rng.choice([2.0, 3.0])})


@dataclasses.dataclass
class ThreadRun:
    calls: list  # per thread
    errors: list  # formatted tracebacks
    hung: int  # threads still alive after the deadline


def run_threads(seconds: float, n_threads: int = 8, min_calls: int = 20, backend="eager",
                deadline: float = 120.0) -> ThreadRun:
    """n_threads call the 4 compiled functions (shared across threads) with random
    dtypes/shapes for ``seconds`` (and at least ``min_calls`` calls per thread)."""
    compiled = [dynamo_lite.compile(f, backend=backend) for f in THREAD_FUNCTIONS]
    calls = [0] * n_threads
    errors: list = []
    start = threading.Barrier(n_threads)
    stop_at = [0.0]

    def worker(t: int) -> None:
        rng = random.Random(t)
        try:
            start.wait()
            while calls[t] < min_calls or time.time() < stop_at[0]:
                i = rng.randrange(len(THREAD_FUNCTIONS))
                args = thread_call_args(i, rng)
                expected = THREAD_FUNCTIONS[i](*args)
                got = compiled[i](*args)
                torch.testing.assert_close(got, expected, rtol=0, atol=0)
                calls[t] += 1
        except BaseException:  # noqa: BLE001 - reported by the caller
            errors.append(traceback.format_exc())

    stop_at[0] = time.time() + seconds
    threads = [threading.Thread(target=worker, args=(t,), daemon=True) for t in range(n_threads)]
    for th in threads:
        th.start()
    end = time.time() + deadline
    for th in threads:
        th.join(max(0.0, end - time.time()))
    return ThreadRun(calls, errors, sum(th.is_alive() for th in threads))


def rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2 ** 20


_LOOP_SOURCE = '''
def f(x, n):
    y = x * 2 + n
    print("mid", n)
    return y.relu() + 1
'''


def compile_reset_loop(iterations: int, sample_every: int = 50) -> tuple:
    """compile + call + reset of a new function (a new code object) each iteration.

    Returns (RSS samples in MB, number of those code objects still alive)."""
    import weakref

    samples = []
    refs = []
    for i in range(iterations):
        ns: dict = {}
        exec(compile(_LOOP_SOURCE, "<dl_stress_loop>", "exec"), ns)  # noqa: S102
        fn = ns["f"]
        with contextlib.redirect_stdout(io.StringIO()):
            out = dynamo_lite.compile(fn, backend="eager")(torch.ones(4), i % 3)
        assert torch.equal(out, (torch.ones(4) * 2 + i % 3).relu() + 1)
        refs.append(weakref.ref(fn.__code__))
        dynamo_lite.reset()
        del fn, ns
        if i % sample_every == 0 or i == iterations - 1:
            gc.collect()
            samples.append(rss_mb())
    for _ in range(3):  # fake tensors and graph modules free in stages
        gc.collect()
    return samples, sum(r() is not None for r in refs)


def cached_call_loop(calls: int, sample_every: int = 2000) -> list:
    """Many cache-hit calls (a graph, a graph break, a resume function) -> RSS samples."""
    def g(x, k):
        y = x.cos() + k
        if y.sum() > 0:
            y = y * 2
        return y

    cg = dynamo_lite.compile(g, backend="eager")
    x = torch.ones(8)
    samples = []
    for i in range(calls):
        cg(x, 1)
        if i % sample_every == 0 or i == calls - 1:
            if i == 0 or i == calls - 1:
                gc.collect()
            samples.append(rss_mb())
    return samples


__all__ = ["THREAD_FUNCTIONS", "thread_call_args", "run_threads", "ThreadRun", "rss_mb",
           "compile_reset_loop", "cached_call_loop"]
