"""Stress runs of the hostile-input checks, at bench size.

    python bench/stress.py [--thread-seconds 10] [--threads 8] [--reset-iterations 1000]
                           [--cached-calls 50000] [--out bench/results/stress.json]

- threads: 8 threads call 4 compiled functions (tools/stress_workloads.py) with
  random dtypes and shapes for 10 s; every result is compared with eager.
- memory: 1,000 compile/call/reset iterations of fresh function objects, then
  many cache-hit calls; RSS is sampled (it must stay flat) and the compiled
  code objects must be freed.
The CI versions are tests/robustness/test_threads.py and tests/robustness/test_hostile.py.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, ROOT)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--thread-seconds", type=float, default=10.0)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--reset-iterations", type=int, default=1000)
    ap.add_argument("--cached-calls", type=int, default=50_000)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "stress.json"))
    args = ap.parse_args(argv)

    import contextlib
    import io
    import logging

    import stress_workloads as sw

    import dynamo_lite

    logging.getLogger("dynamo_lite").setLevel(logging.ERROR)
    result: dict = {}
    t0 = time.time()
    run = sw.run_threads(args.thread_seconds, n_threads=args.threads, min_calls=1)
    result["threads"] = {
        "threads": args.threads, "seconds": round(time.time() - t0, 1), "calls": sum(run.calls),
        "calls_per_thread": run.calls, "errors": len(run.errors), "hung_threads": run.hung,
        "first_error": run.errors[0] if run.errors else None,
    }
    print(f"threads: {sum(run.calls)} calls in {result['threads']['seconds']}s, {len(run.errors)} errors, "
          f"{run.hung} hung")
    dynamo_lite.reset()

    t0 = time.time()
    sw.compile_reset_loop(20)
    with contextlib.redirect_stdout(io.StringIO()):
        samples, alive = sw.compile_reset_loop(args.reset_iterations, sample_every=100)
    result["compile_reset"] = {
        "iterations": args.reset_iterations, "seconds": round(time.time() - t0, 1),
        "rss_mb": [round(s, 1) for s in samples], "growth_mb": round(samples[-1] - samples[0], 1),
        "code_objects_alive": alive,
    }
    print(f"compile/reset: {args.reset_iterations} iterations, RSS {samples[0]:.0f} -> {samples[-1]:.0f} MB, "
          f"{alive} code objects alive")

    t0 = time.time()
    samples = sw.cached_call_loop(args.cached_calls, sample_every=max(1, args.cached_calls // 10))
    result["cached_calls"] = {
        "calls": args.cached_calls, "seconds": round(time.time() - t0, 1),
        "rss_mb": [round(s, 1) for s in samples], "growth_mb": round(samples[-1] - samples[1], 1),
    }
    print(f"cached calls: {args.cached_calls}, RSS {samples[1]:.0f} -> {samples[-1]:.0f} MB")

    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump(result, fh, indent=2)
    print(f"written to {args.out}")
    ok = not run.errors and not run.hung and result["compile_reset"]["code_objects_alive"] <= 1
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
