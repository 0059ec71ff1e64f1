"""Shared measuring tools of the bench suite: interleaved timing, medians, environment.

Every speed number in bench/ comes from ``interleaved``: the systems being
compared (eager, torch.compile, dynamo_lite) are timed in rounds; each round
runs every system once, in a shuffled order, as a loop of ``n`` calls with the
garbage collector off; a round yields one per-call time per system.  Time is
this thread's CPU time (see ``_CLOCK``), so other jobs on a shared machine do
not count.  We report
the median over rounds, and overheads as the median of the per-round
differences (compiled minus eager of the same round), which cancels slow drift
of the machine.  No module here imports dynamo_lite or torch.compile state.
Covered by tests/robustness/test_bench_smoke.py.
"""
from __future__ import annotations

import gc
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from typing import Callable

RESULTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


# The clock: CPU time of this thread.  The bench machine is shared (other jobs,
# 2 cores); wall-clock loops then measure the scheduler, thread CPU time does
# not (BENCH_CLOCK=wall switches to perf_counter).
_CLOCK = time.perf_counter_ns if os.environ.get("BENCH_CLOCK") == "wall" else time.thread_time_ns
CLOCK_NAME = "wall" if _CLOCK is time.perf_counter_ns else "thread CPU time"


def per_call_ns(fn: Callable[[], object], n: int) -> float:
    """Nanoseconds per call of ``fn()`` over a loop of ``n`` calls (GC off)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        start = _CLOCK()
        for _ in range(n):
            fn()
        end = _CLOCK()
    finally:
        if enabled:
            gc.enable()
    return (end - start) / n


def calibrate(fn: Callable[[], object], target_s: float = 0.002, max_n: int = 100_000) -> int:
    """A loop length that makes one timed loop of ``fn`` take about ``target_s``."""
    n = 1
    while n < max_n:
        start = _CLOCK()
        for _ in range(n):
            fn()
        elapsed = (_CLOCK() - start) / 1e9
        if elapsed >= target_s / 4:
            break
        n *= 4
    elapsed = max(elapsed, 1e-9)
    return max(1, min(max_n, int(n * target_s / elapsed)))


def interleaved(systems: dict[str, Callable[[], object]], rounds: int, n: int, seed: int = 0) -> dict[str, list[float]]:
    """{name: [ns per call, one per round]}; systems run in a shuffled order each round."""
    rng = random.Random(seed)
    names = list(systems)
    out: dict[str, list[float]] = {k: [] for k in names}
    for _ in range(rounds):
        rng.shuffle(names)
        for name in names:
            out[name].append(per_call_ns(systems[name], n))
    return out


def median(xs) -> float:
    return statistics.median(xs)


def paired_overhead(samples: dict[str, list[float]], name: str, base: str = "eager") -> float:
    """Median over rounds of (name - base) in the same round."""
    return statistics.median(a - b for a, b in zip(samples[name], samples[base]))


def environment() -> dict:
    """Machine and versions, for the tables in docs/performance.md."""
    import torch

    try:
        from importlib.metadata import version

        tf_version = version("transformers")
    except Exception:  # noqa: BLE001 - optional
        tf_version = None
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "transformers": tf_version,
        "cpu": cpu,
        "cores": os.cpu_count(),
        "platform": platform.platform(),
        "torch_threads": torch.get_num_threads(),
        "clock": CLOCK_NAME,
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "load_average": os.getloadavg(),
    }


def fmt_us(ns: float) -> str:
    return f"{ns / 1000:.2f}"


def fmt_ratio(a: float, b: float) -> str:
    if b == 0 or b != b:
        return "-"
    return f"{a / b:.2f}"


def table(headers: list[str], rows: list[list]) -> str:
    """A GitHub-markdown table."""
    cells = [[str(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    line = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |"  # noqa: E731
    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(headers), sep, *(line(r) for r in cells)])


def write_json(name: str, data: dict) -> str:
    os.makedirs(RESULTS_DIR, exist_ok=True)
    path = os.path.join(RESULTS_DIR, f"{name}.json")
    with open(path, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True, default=str)
    return path


def worker_env(env_extra: dict = None) -> dict:
    """The environment of a bench worker process: one OpenMP thread, and dynamo_lite's persistent
    capture cache off unless asked for (bench/warm_start.py measures it): a capture timed is a
    capture, and a warm-up really warms up (a warm-up loaded from the disk cache would leave
    torch's one-time imports, about 0.5 s, to the first capture timed)."""
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("DYNAMO_LITE_PERSISTENT_CACHE", "0")
    env.update(env_extra or {})
    return env


def run_subprocess_json(args: list[str], timeout: float = 1800, env_extra: dict = None) -> dict:
    """Run ``python args...`` in a fresh interpreter (``worker_env``); its last stdout line is JSON."""
    env = worker_env(env_extra)
    proc = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=timeout, env=env)
    if proc.returncode != 0:
        return {"error": (proc.stderr or proc.stdout)[-2000:]}
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    try:
        return json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        return {"error": proc.stdout[-2000:] + proc.stderr[-2000:]}
