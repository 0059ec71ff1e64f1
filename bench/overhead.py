"""Cache-hit overhead of dynamo_lite vs torch.compile, and the cost of frames the hook passes over.

Cases (all with backend "eager", so the graph itself costs what eager costs):
    a  add1      x + 1 on one small tensor
    b  mlp3      a 3-layer MLP module
    c  fn10      a function of 10 tensor inputs
    d  linear50  a module with 50 Linear layers (ModuleList loop)
    e1 break1    a function with one graph break (print; stdout is a null sink)
    e3 break3    a function with three graph breaks
Overhead = compiled call minus eager call, the median over interleaved rounds
of the per-round difference (bench/_timing.py).  Target: dynamo_lite's
overhead at most 1/4 of torch.compile's.

Skipped frames: a loop of calls to a trivial Python function, timed with no
hook installed (CPython inlines the calls), right after a compiled call
returned (the hook is installed only while a compiled call or capture region
is running, so this should cost nothing), with the hook active where both functions are marked SKIP
(what torch internals and the standard library get), and with the hook active
on a function that is not compiled because it has nothing to capture (no
tensor argument, no global).  Per-frame cost = the difference per call.
Target: <= 0.1 us per frame.

    python bench/overhead.py [--quick] [--rounds N] [--cases a_add1,...] [--no-write]
Covered by tests/robustness/test_bench_smoke.py (quick mode).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
from torch import nn  # noqa: E402

import _timing  # noqa: E402
import dynamo_lite  # noqa: E402
from dynamo_lite import _C  # noqa: E402


# ---- the cases ----------------------------------------------------------------
def add1(x):
    return x + 1


class MLP3(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(32, 64)
        self.fc2 = nn.Linear(64, 64)
        self.fc3 = nn.Linear(64, 10)

    def forward(self, x):
        x = torch.relu(self.fc1(x))
        x = torch.relu(self.fc2(x))
        return self.fc3(x)


def fn10(a, b, c, d, e, f, g, h, i, j):
    return a + b + c + d + e + f + g + h + i + j


class Linear50(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(16, 16) for _ in range(50))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def break1(x):
    y = x + 1
    print("break")
    return y * 2


def break3(x):
    y = x + 1
    print("break 1")
    y = y * 2
    print("break 2")
    y = y - 3
    print("break 3")
    return y / 4


def _cases():
    torch.manual_seed(0)
    with torch.no_grad():
        pass
    mlp = MLP3()
    lin50 = Linear50()
    ten = [torch.randn(8) for _ in range(10)]
    return {
        "a_add1": (add1, (torch.randn(8),)),
        "b_mlp3": (mlp, (torch.randn(4, 32),)),
        "c_fn10": (fn10, tuple(ten)),
        "d_linear50": (lin50, (torch.randn(4, 16),)),
        "e1_break1": (break1, (torch.randn(8),)),
        "e3_break3": (break3, (torch.randn(8),)),
    }


class _Recorder:
    """A backend that behaves like "eager" (returns gm.forward) and keeps (gm, inputs)."""

    def __init__(self):
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.graphs.append((gm, list(example_inputs)))
        return gm.forward


def _captured_graphs(fn, args) -> dict:
    """{"graph <system>": (gm, inputs)}: each system's single graph for ``fn``, then reset.

    Captured before the timed compile (with backend "eager"), so the timed
    entries are the only ones in each system's cache."""
    out = {}
    for label, system, reset in (("graph torch.compile", torch.compile, torch._dynamo.reset),
                                 ("graph dynamo_lite", dynamo_lite.compile, dynamo_lite.reset)):
        rec = _Recorder()
        with torch.no_grad():
            system(fn, backend=rec)(*args)
        reset()
        if len(rec.graphs) == 1:
            out[label] = rec.graphs[0]
    return out


# ---- skipped frames ----------------------------------------------------------
def _leaf(a):
    return a


def _calls(n):
    for i in range(n):
        _leaf(i)


def _add(a, b):  # no tensor and no global: nothing to capture, never compiled
    return a + b


def _calls_add(n):
    for i in range(n):
        _add(i, 1)


def _fib(k):
    return k if k < 2 else _fib(k - 1) + _fib(k - 2)


def _python_after_compile(rounds: int, k: int) -> dict:
    """Call-heavy eager Python (recursive fib(k)) before any compiled call, after a dynamo_lite
    compiled call returned, and after a torch.compile compiled call returned (ratios to before)."""
    x = torch.ones(2)
    dl = dynamo_lite.compile(add1, backend="eager")
    tc = torch.compile(add1, backend="eager")
    before = _timing.interleaved({"before": lambda: _fib(k)}, rounds, 1)["before"]
    dl(x)  # (the state a process is in once anything was compiled and called)
    after_dl = _timing.interleaved({"dl": lambda: _fib(k)}, rounds, 1)["dl"]
    tc(x)
    after_tc = _timing.interleaved({"tc": lambda: _fib(k)}, rounds, 1)["tc"]
    base = _timing.median(before)
    return {"fib": k, "before_ns": base, "after_dynamo_lite_ns": _timing.median(after_dl),
            "after_torch_compile_ns": _timing.median(after_tc),
            "ratio_dynamo_lite": _timing.median(after_dl) / base, "ratio_torch_compile": _timing.median(after_tc) / base}


def _skipped_frames(rounds: int, n: int) -> dict:
    _C.set_cache(_leaf.__code__, _C.SKIP)
    _C.set_cache(_calls.__code__, _C.SKIP)
    _C.set_cache(_calls_add.__code__, _C.SKIP)
    _C.set_cache(_add.__code__, None)
    converter = dynamo_lite.optimize("eager").callback

    def no_hook():
        _C.uninstall()
        _calls(n)

    def no_hook_add():
        _C.uninstall()
        _calls_add(n)

    def hook_active_not_compiled():
        prev = _C.set_callback(converter)
        try:
            _calls_add(n)
        finally:
            _C.set_callback(prev)

    def hook_off():
        prev = _C.set_callback(converter)  # installs the hook (a compiled call or region starts) ...
        _C.set_callback(prev)  # ... and it ends: the last callback dropped uninstalls the hook
        _calls(n)

    def hook_active():
        prev = _C.set_callback(converter)
        try:
            _calls(n)
        finally:
            _C.set_callback(prev)

    hook_active_not_compiled()  # the first call decides "nothing to capture"
    samples = _timing.interleaved({"no_hook": no_hook, "hook_off": hook_off, "hook_active": hook_active,
                                   "no_hook_add": no_hook_add, "not_compiled": hook_active_not_compiled},
                                  rounds, 1)
    for k in samples:
        samples[k] = [v / n for v in samples[k]]  # ns per inner call
    for fn in (_leaf, _calls, _add, _calls_add):
        _C.set_cache(fn.__code__, None)
    return {
        "ns_per_call_no_hook": _timing.median(samples["no_hook"]),
        "ns_per_frame_hook_off": _timing.paired_overhead(samples, "hook_off", "no_hook"),
        "ns_per_frame_skipped": _timing.paired_overhead(samples, "hook_active", "no_hook"),
        "ns_per_frame_not_compiled": _timing.paired_overhead(samples, "not_compiled", "no_hook_add"),
    }


# ---- driver --------------------------------------------------------------------
def _same(a, b) -> bool:
    return torch.allclose(a, b, rtol=1e-5, atol=1e-6)


def run(quick: bool = False, cases=None, rounds: int | None = None) -> dict:
    torch.set_num_threads(1)
    if rounds is None:
        rounds = 3 if quick else 41
    target_s = 0.0002 if quick else 0.01
    results = {}
    sink = open(os.devnull, "w")
    try:
        with contextlib.redirect_stdout(sink):
            for name, (fn, args) in _cases().items():
                if cases is not None and name not in cases:
                    continue
                graphs = _captured_graphs(fn, args) if not name.startswith("e") else {}
                tc = torch.compile(fn, backend="eager")
                dl = dynamo_lite.compile(fn, backend="eager")
                with torch.no_grad():
                    ref = fn(*args)
                    for _ in range(3):  # compile, then settle
                        out_tc = tc(*args)
                        out_dl = dl(*args)
                if not (_same(ref, out_tc) and _same(ref, out_dl)):
                    raise AssertionError(f"{name}: compiled results differ from eager")
                systems = {
                    "eager": lambda fn=fn: fn(*args),
                    "torch.compile": lambda tc=tc: tc(*args),
                    "dynamo_lite": lambda dl=dl: dl(*args),
                }
                for label, (gm, inputs) in graphs.items():
                    systems[label] = lambda gm=gm, inputs=inputs: gm.forward(*inputs)
                with torch.no_grad():
                    n = _timing.calibrate(systems["eager"], target_s)
                    samples = _timing.interleaved(systems, rounds, n)
                ovh_tc = _timing.paired_overhead(samples, "torch.compile")
                ovh_dl = _timing.paired_overhead(samples, "dynamo_lite")
                fw = {}
                for label, key in (("torch.compile", "framework_torch_compile_ns"),
                                   ("dynamo_lite", "framework_dynamo_lite_ns")):
                    if f"graph {label}" in samples:
                        fw[key] = _timing.paired_overhead(samples, label, f"graph {label}")
                        fw[key.replace("framework", "graph")] = _timing.median(samples[f"graph {label}"])
                results[name] = {
                    **fw,
                    "eager_ns": _timing.median(samples["eager"]),
                    "torch_compile_ns": _timing.median(samples["torch.compile"]),
                    "dynamo_lite_ns": _timing.median(samples["dynamo_lite"]),
                    "overhead_torch_compile_ns": ovh_tc,
                    "overhead_dynamo_lite_ns": ovh_dl,
                    "ratio": ovh_dl / ovh_tc if ovh_tc > 0 else float("nan"),
                    "rounds": rounds,
                    "calls_per_round": n,
                }
    finally:
        sink.close()
    results["skipped_frames"] = _skipped_frames(rounds, 200 if quick else 20000)
    results["python_after_compile"] = _python_after_compile(3 if quick else 15, 10 if quick else 22)
    return {"env": _timing.environment(), "cases": results}


def render(data: dict) -> str:
    rows = []
    rows_fw = []
    for name, r in data["cases"].items():
        if name in ("skipped_frames", "python_after_compile"):
            continue
        ovh_tc, ovh_dl = r["overhead_torch_compile_ns"], r["overhead_dynamo_lite_ns"]
        rows.append([name, _timing.fmt_us(r["eager_ns"]), _timing.fmt_us(r["torch_compile_ns"]),
                     _timing.fmt_us(r["dynamo_lite_ns"]), _timing.fmt_us(ovh_tc), _timing.fmt_us(ovh_dl),
                     f"{ovh_dl / ovh_tc:.3f}" if ovh_tc > 0 else "- (tc <= 0)",
                     _timing.fmt_us(r["dynamo_lite_ns"] - r["torch_compile_ns"])])
        if "framework_dynamo_lite_ns" in r and "framework_torch_compile_ns" in r:
            a, b = r["framework_dynamo_lite_ns"], r["framework_torch_compile_ns"]
            rows_fw.append([name, _timing.fmt_us(r["graph_torch_compile_ns"]), _timing.fmt_us(b),
                            _timing.fmt_us(r["graph_dynamo_lite_ns"]), _timing.fmt_us(a),
                            f"{a / b:.3f}" if b > 0 else "-"])
    out = ["Cache-hit overhead = compiled call - eager call (backend eager, us per call, medians of "
           "per-round differences; ratio = dynamo_lite / torch.compile, target <= 0.25; a negative "
           "overhead means the compiled call is faster than eager, and then the ratio is not defined: "
           "see dl - tc, the difference of the two compiled calls, and the framework overhead below)",
           _timing.table(["case", "eager", "torch.compile", "dynamo_lite", "ovh torch.compile", "ovh dynamo_lite",
                          "ratio", "dl - tc"], rows),
           "",
           "Framework overhead = compiled call - direct call of the captured graph (us; hook, guards, "
           "wrappers, argument loading; ratio = dynamo_lite / torch.compile)",
           _timing.table(["case", "graph (tc)", "fw torch.compile", "graph (dl)", "fw dynamo_lite", "ratio"],
                         rows_fw)]
    s = data["cases"]["skipped_frames"]
    out.append("")
    out.append("Frames the hook passes over (ns per frame, target <= 100; cost added to a plain call)")
    out.append(_timing.table(["plain call (no hook)", "after a compiled call", "hook active, code SKIP",
                              "hook active, not compiled (no tensors)"],
                             [[f"{s['ns_per_call_no_hook']:.1f}", f"+{s['ns_per_frame_hook_off']:.1f}",
                               f"+{s['ns_per_frame_skipped']:.1f}", f"+{s['ns_per_frame_not_compiled']:.1f}"]]))
    p = data["cases"].get("python_after_compile")
    if p:
        out.append("")
        out.append(f"Eager Python after a compiled call returned: recursive fib({p['fib']}), ms; ratio to before "
                   "any compile (1.00 = untouched)")
        out.append(_timing.table(["before any compile", "after dynamo_lite", "ratio", "after torch.compile", "ratio"],
                                 [[f"{p['before_ns'] / 1e6:.2f}", f"{p['after_dynamo_lite_ns'] / 1e6:.2f}",
                                   f"{p['ratio_dynamo_lite']:.2f}", f"{p['after_torch_compile_ns'] / 1e6:.2f}",
                                   f"{p['ratio_torch_compile']:.2f}"]]))
    return "\n".join(out)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="few rounds (for the smoke test)")
    p.add_argument("--no-write", action="store_true", help="do not write bench/results/overhead.json")
    p.add_argument("--cases", default=None, help="comma-separated subset of " + ",".join(_cases()))
    p.add_argument("--json-line", action="store_true", help="print the results as one JSON line (run_all.py)")
    p.add_argument("--rounds", type=int, default=None,
                   help="timed rounds per case (default 41, 3 with --quick); a shorter run for repeated runs")
    a = p.parse_args(argv)
    data = run(quick=a.quick, cases=a.cases.split(",") if a.cases else None, rounds=a.rounds)
    if a.json_line:
        print(json.dumps(data, default=str))
        return data
    print(render(data))
    if not a.no_write:
        _timing.write_json("overhead" + ("_quick" if a.quick else ""), data)
    return data


if __name__ == "__main__":
    main()
