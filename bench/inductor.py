"""End-to-end inference with backend "inductor": speed-up over eager, dynamo_lite vs torch.compile.

Both systems hand their graphs to the same compiler (torch._inductor's compile_fx),
so the speed-ups should match; a gap means a different graph (more breaks, fewer ops)
or more per-call overhead.  Each (model, system) runs in its own process: the
first call (capture + inductor compile) is timed once, then eager and compiled
calls are timed in interleaved rounds (medians, thread CPU time, torch.no_grad(),
one thread).  Inductor's on-disk caches are off, so both compile from scratch.  Models: the MLP and nanoGPT of bench/models.py.

    python bench/inductor.py [--quick] [--models mlp,nanogpt]
Covered by tests/robustness/test_bench_smoke.py (--help only: an inductor compile takes minutes).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

# the checkout this file is in, not whatever dynamo_lite is installed (workers inherit it)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import _timing  # noqa: E402
from models import MLP4, SYSTEMS, _same, build  # noqa: E402

MODELS = ("mlp", "nanogpt")


def worker(name: str, system: str, quick: bool) -> dict:
    torch.set_num_threads(1)
    model, kwargs = build(name)
    if system == "dynamo_lite":
        import dynamo_lite

        compile_fn = dynamo_lite.compile
    else:
        compile_fn = torch.compile
    with torch.no_grad():  # one-time start-up (imports, compile workers) on an unrelated module
        compile_fn(MLP4(8).eval(), backend="inductor")(torch.randn(2, 64))
    compiled = compile_fn(model, backend="inductor")
    with torch.no_grad():
        start = time.perf_counter()
        out = compiled(**kwargs)
        first = time.perf_counter() - start
        expected = model(**kwargs)
        systems = {"eager": lambda: model(**kwargs), "compiled": lambda: compiled(**kwargs)}
        for f in systems.values():
            f()
        n = _timing.calibrate(systems["eager"], 0.001 if quick else 0.01, max_n=500)
        samples = _timing.interleaved(systems, 3 if quick else 25, n)
    eager_us = _timing.median(samples["eager"]) / 1000
    compiled_us = _timing.median(samples["compiled"]) / 1000
    return {
        "model": name, "system": system, "first_call_s": first, "eager_us": eager_us,
        "compiled_us": compiled_us, "speedup": eager_us / compiled_us, "correct": _same(expected, out),
    }


def run(quick: bool = False, models=None) -> dict:
    rows = []
    for name in models or MODELS:
        for system in SYSTEMS:
            args = [os.path.abspath(__file__), "--worker", name, "--system", system] + (["--quick"] if quick else [])
            # no on-disk compiled-graph caches: both systems compile from scratch
            res = _timing.run_subprocess_json(args, timeout=3600, env_extra={
                "TORCHINDUCTOR_FX_GRAPH_CACHE": "0", "TORCHINDUCTOR_AUTOGRAD_CACHE": "0"})
            res.setdefault("model", name)
            res.setdefault("system", system)
            rows.append(res)
    return {"env": _timing.environment(), "rows": rows}


def render(data: dict) -> str:
    by = {(r["model"], r["system"]): r for r in data["rows"]}
    head = ["model", "eager us", "dl us", "tc us", "speed-up dl", "speed-up tc", "first call s dl", "first call s tc"]
    rows, problems = [], []
    for m in dict.fromkeys(r["model"] for r in data["rows"]):
        d, t = by[(m, "dynamo_lite")], by[(m, "torch.compile")]
        if "error" in d or "error" in t:
            rows.append([m] + ["error"] * (len(head) - 1))
            problems += [f"{m} / {r['system']}: {r['error'].strip().splitlines()[-1]}" for r in (d, t) if "error" in r]
            continue
        rows.append([m, f"{d['eager_us']:.1f}", f"{d['compiled_us']:.1f}", f"{t['compiled_us']:.1f}",
                     f"{d['speedup']:.2f}x", f"{t['speedup']:.2f}x", f"{d['first_call_s']:.1f}",
                     f"{t['first_call_s']:.1f}"])
        problems += [f"{m} / {r['system']}: result differs from eager" for r in (d, t) if not r["correct"]]
    out = ["Backend inductor, inference (speed-up = eager time / compiled time; eager us from the dl process)",
           _timing.table(head, rows)]
    if problems:
        out += ["", "Problems:", *problems]
    return "\n".join(out)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--models", default=None, help="comma-separated subset of " + ",".join(MODELS))
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    p.add_argument("--system", default=None, help=argparse.SUPPRESS)
    p.add_argument("--no-write", action="store_true")
    a = p.parse_args(argv)
    if a.worker:
        print(json.dumps(worker(a.worker, a.system, a.quick)))
        return None
    data = run(quick=a.quick, models=a.models.split(",") if a.models else None)
    print(render(data))
    if not a.no_write:
        _timing.write_json("inductor" + ("_quick" if a.quick else ""), data)
    return data


if __name__ == "__main__":
    main()
