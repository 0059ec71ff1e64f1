"""Capture cost by phase: where the time of dynamo_lite's first calls goes, beside torch.compile's.

Each (workload, system, checkout) runs in fresh worker processes (``--reps`` of them).  A worker
warms the system up on a trivial function (imports, lazy initialisation), builds the workload,
then times its first calls (thread CPU time; ``BENCH_CLOCK=wall`` for wall time).  For dynamo_lite
it also splits the time of every capture (``FrameConverter._compile_inner``) into phases:

    trace      symbolic tracing (``FrameConverter._trace``; a graph break traces twice)
    codegen    the generated code (``frame_code.collect_graph_outputs`` + ``build_code``, which
               makes the resume functions and loop bodies)
    backend    ``OutputGraph.compile`` (the fx GraphModule and the backend: a counting "eager")
    guards     ``GuardSet.compile``
    other      the rest of the capture (finalising the graph, frame state, events)

Workloads:

    gpt2, llama   tiny Hugging Face models built from a config with random weights (bench/hf_models.py),
                  one eval forward (no_grad)
    breaks        40 small functions (in a generated module) with graph breaks: straight-line code,
                  a branch on tensor data, a loop with a break inside; each called with float32 then
                  float64 inputs (a recompile of the function and of its resume functions)

Columns are medians over the worker processes; ``per-capture`` is the median capture time over all
captures of all reps.  Compare checkouts of dynamo_lite in one run (``--checkouts``; each is put
first on the workers' sys.path), e.g. before/after a change:

    python bench/capture_profile.py --checkouts base=/tmp/base,new=. [--workloads gpt2,breaks] [--reps 5]
    python bench/capture_profile.py --profile breaks     # cProfile of one worker: top functions of captures
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
THIS_CHECKOUT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import _timing  # noqa: E402
WORKLOADS = ("gpt2", "llama", "breaks")
PHASES = ("trace", "codegen", "backend", "guards")
_CLOCK = time.perf_counter_ns if os.environ.get("BENCH_CLOCK") == "wall" else time.thread_time_ns

# ---- the "breaks" workload: many small functions with graph breaks -------------------------
_N_FUNCS = 40
_TEMPLATES = (
    # straight line: two breaks, two resume functions
    """
def f{i}(x, y):
    a = x * {i} + y
    graph_break()
    b = a.sin() + x
    c = b * 2
    graph_break()
    return c - a + {i}
""",
    # a branch on tensor data: one resume function per branch
    """
def f{i}(x, y):
    a = (x + y) * {i}
    if a.sum() > 0:
        b = a.cos()
    else:
        b = a.sin()
    return b + y
""",
    # a break inside a loop (a loop-body function) and one after it
    """
def f{i}(x, y):
    acc = x
    for k in range(3):
        acc = acc * 2 + y
        graph_break()
    out = acc + {i}
    graph_break()
    return out.relu()
""",
)


def _breaks_module(graph_break):
    src = "".join(_TEMPLATES[i % len(_TEMPLATES)].format(i=i) for i in range(_N_FUNCS))
    d = tempfile.mkdtemp(prefix="capture_profile_")
    with open(os.path.join(d, "cp_funcs.py"), "w") as f:
        f.write(src)
    sys.path.insert(0, d)
    mod = importlib.import_module("cp_funcs")
    mod.graph_break = graph_break
    return mod


# ---- worker -----------------------------------------------------------------------------
class _Counting:
    """Behaves like backend "eager"; counts graphs."""

    def __init__(self):
        self.graphs = 0

    def __call__(self, gm, example_inputs):
        self.graphs += 1
        return gm.forward


class _PhaseTimer:
    """Wraps functions of the loaded dynamo_lite; times the outermost call of each phase."""

    def __init__(self):
        self.totals = {p: 0 for p in PHASES}
        self.captures: list = []  # ns per capture
        self._active: dict = {}

    def wrap(self, owner, attr, phase):
        original = getattr(owner, attr)
        timer = self

        def timed(*args, **kwargs):
            if timer._active.get(phase):
                return original(*args, **kwargs)
            timer._active[phase] = True
            start = _CLOCK()
            try:
                return original(*args, **kwargs)
            finally:
                elapsed = _CLOCK() - start
                timer._active[phase] = False
                if phase == "capture":
                    timer.captures.append(elapsed)
                else:
                    timer.totals[phase] += elapsed

        setattr(owner, attr, timed)


def _install_timers():
    from dynamo_lite import convert_frame, guards
    from dynamo_lite.codegen import frame_code
    from dynamo_lite.graph import output_graph

    t = _PhaseTimer()
    t.wrap(convert_frame.FrameConverter, "_compile_inner", "capture")
    t.wrap(convert_frame.FrameConverter, "_trace", "trace")
    t.wrap(frame_code, "collect_graph_outputs", "codegen")
    t.wrap(frame_code, "build_code", "codegen")
    t.wrap(output_graph.OutputGraph, "compile", "backend")
    t.wrap(guards.GuardSet, "compile", "guards")
    return t


def _system(system):
    """(compile(fn, backend), graph_break) of a system."""
    if system == "dynamo_lite":
        import dynamo_lite
        return dynamo_lite.compile, dynamo_lite.graph_break
    import torch
    return torch.compile, torch._dynamo.graph_break


def _workload(name, system, compile_fn, graph_break):
    """A callable running the workload's first calls."""
    import torch
    counting = _Counting()
    if name == "breaks":
        mod = _breaks_module(graph_break)
        fns = [compile_fn(getattr(mod, f"f{i}"), backend=counting) for i in range(_N_FUNCS)]
        inputs = [(torch.randn(4, 4), torch.randn(4, 4)), (torch.randn(4, 4, dtype=torch.float64),
                                                           torch.randn(4, 4, dtype=torch.float64))]

        def run():
            for x, y in inputs:
                for fn in fns:
                    fn(x, y)
        return run
    sys.path.insert(0, HERE)
    import hf_models
    model, _twin, kwargs = hf_models.build(name, "eval")
    compiled = compile_fn(model, backend=counting)

    def run():
        with torch.no_grad():
            compiled(**kwargs)
    return run


def worker(workload, system, checkout, profile=False) -> dict:
    if checkout:
        sys.path.insert(0, os.path.abspath(checkout))
    import torch
    torch.set_num_threads(1)
    import warnings
    warnings.simplefilter("ignore")
    compile_fn, graph_break = _system(system)
    warm = compile_fn(lambda t: t + 1, backend=_Counting())
    warm(torch.ones(2))
    timer = _install_timers() if system == "dynamo_lite" else None
    run = _workload(workload, system, compile_fn, graph_break)
    prof = None
    if profile:
        import cProfile
        prof = cProfile.Profile()
        prof.enable()
    start = _CLOCK()
    run()
    first = _CLOCK() - start
    if prof is not None:
        prof.disable()
        import pstats
        pstats.Stats(prof, stream=sys.stderr).sort_stats("cumulative").print_stats(60)
        pstats.Stats(prof, stream=sys.stderr).sort_stats("tottime").print_stats(40)
    row = {"workload": workload, "system": system, "first_ms": first / 1e6}
    if timer is not None:
        captured = sum(timer.captures)
        row.update(captures=len(timer.captures), capture_ms=captured / 1e6,
                   per_capture_ms=[c / 1e6 for c in timer.captures],
                   **{f"{p}_ms": timer.totals[p] / 1e6 for p in PHASES},
                   other_ms=(captured - sum(timer.totals.values())) / 1e6)
        import dynamo_lite
        row["checkout"] = os.path.dirname(os.path.dirname(os.path.abspath(dynamo_lite.__file__)))
    return row


# ---- driver -----------------------------------------------------------------------------
def _run_worker(workload, system, checkout, timeout=900):
    env = _timing.worker_env()
    if checkout:
        env["PYTHONPATH"] = os.path.abspath(checkout) + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", workload, system, checkout or ""]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        raise RuntimeError(f"worker {workload}/{system} failed:\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1])


def _med(rows, key):
    return statistics.median(r[key] for r in rows)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--worker", nargs=3, metavar=("WORKLOAD", "SYSTEM", "CHECKOUT"))
    p.add_argument("--workloads", default=",".join(WORKLOADS))
    p.add_argument("--checkouts", default=f"this={THIS_CHECKOUT}",
                   help="NAME=PATH,... dynamo_lite checkouts to compare (default: this one)")
    p.add_argument("--reps", type=int, default=3, help="worker processes per row")
    p.add_argument("--no-torch-compile", action="store_true")
    p.add_argument("--profile", metavar="WORKLOAD", help="cProfile one dynamo_lite worker of this checkout")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(*args.worker)))
        return
    if args.profile:
        print(json.dumps(worker(args.profile, "dynamo_lite", THIS_CHECKOUT, profile=True)))
        return
    checkouts = [c.split("=", 1) for c in args.checkouts.split(",")]
    systems = [(name, "dynamo_lite", path) for name, path in checkouts]
    if not args.no_torch_compile:
        systems.append(("torch.compile", "torch.compile", ""))
    print(f"capture cost by phase; clock: {'wall' if _CLOCK is time.perf_counter_ns else 'thread CPU'}; "
          f"medians of {args.reps} fresh processes; ms")
    head = f"{'workload':<8} {'system':<14} {'first call':>10} {'captures':>8} {'capture':>8} " + \
        " ".join(f"{p:>8}" for p in (*PHASES, "other")) + f" {'per-capture':>11}"
    print(head)
    all_rows = []
    for workload in args.workloads.split(","):
        for label, system, path in systems:
            rows = []
            for _ in range(args.reps):  # interleaving systems per rep would be fairer; reps are processes
                rows.append(_run_worker(workload, system, path))
            for r in rows:
                r["label"] = label
            all_rows += rows
            line = f"{workload:<8} {label:<14} {_med(rows, 'first_ms'):>10.1f}"
            if system == "dynamo_lite":
                per = statistics.median(x for r in rows for x in r["per_capture_ms"])
                line += f" {_med(rows, 'captures'):>8.0f} {_med(rows, 'capture_ms'):>8.1f} " + \
                    " ".join(f"{_med(rows, p + '_ms'):>8.1f}" for p in (*PHASES, "other")) + f" {per:>11.2f}"
            print(line, flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(all_rows, f, indent=1)


if __name__ == "__main__":
    main()
