"""First-call time and framework overhead per call on the Hugging Face models of bench/hf_models.py.

For each (model, system) a fresh worker process builds the model in eval mode from its tiny config
(random weights, the inputs of bench/hf_models.py), runs it eagerly once (warm-up), then:

    first call     the first compiled call (capture, backend, one run): process CPU time, in
                   seconds (issue #24: dynamo_lite's median at most 1/10 of torch.compile's)
    framework      compiled call minus a direct call of the captured graph with the inputs the
                   backend was given, in us per call: the hook, guards, argument loading and the
                   rebuilt output object (#24: at most 1/4 of torch.compile's on every model);
                   only for models captured as one graph
    hit            compiled call minus the eager call, in us per call

Both systems use a backend that behaves like ``backend="eager"`` (returns ``gm.forward``) and
keeps the graph.  Times per call come from bench/_timing.py (interleaved rounds, thread CPU time,
medians of per-round differences).

    python bench/hf_speed.py [--models gpt2,bert,...] [--rounds 21] [--json PATH]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _timing  # noqa: E402

SYSTEMS = ("dynamo_lite", "torch.compile")


def worker(name: str, system: str, rounds: int) -> dict:
    import torch

    import hf_models

    torch.set_num_threads(1)
    model, _, kwargs = hf_models.build(name, "eval")
    graphs = []

    def backend(gm, example_inputs):
        graphs.append((gm, list(example_inputs)))
        return gm.forward

    with torch.no_grad():
        expected = model(**kwargs)
        if system == "dynamo_lite":
            import dynamo_lite

            compiled = dynamo_lite.compile(model, backend=backend)
        else:
            compiled = torch.compile(model, backend=backend)
        start, cpu = time.perf_counter(), time.process_time()
        out = compiled(**kwargs)
        first_wall, first_cpu = time.perf_counter() - start, time.process_time() - cpu
        correct = hf_models._same(out, expected)
        n_graphs = len(graphs)
        for _ in range(2):
            compiled(**kwargs)
        systems = {"eager": lambda: model(**kwargs), "compiled": lambda: compiled(**kwargs)}
        if n_graphs == 1 and len(graphs) == 1:
            gm, inputs = graphs[0]
            systems["graph"] = lambda: gm.forward(*inputs)
        n = _timing.calibrate(systems["compiled"], 0.005)
        samples = _timing.interleaved(systems, rounds, n)
    row = {"model": name, "system": system, "first_call_s": round(first_cpu, 4), "first_wall_s": round(first_wall, 4),
           "graphs": n_graphs, "recompiles": len(graphs) - n_graphs, "correct": correct,
           "hit_us": round(_timing.paired_overhead(samples, "compiled") / 1e3, 2)}
    if "graph" in samples:
        row["framework_us"] = round(_timing.paired_overhead(samples, "compiled", "graph") / 1e3, 2)
    return row


def _ratio(a, b) -> str:
    return f"{a / b:.2f}" if a is not None and b else "-"


def render(rows: list[dict]) -> str:
    by = {(r["model"], r["system"]): r for r in rows}
    models = list(dict.fromkeys(r["model"] for r in rows))
    lines = ["| model | first call s, dl / tc (ratio) | framework us, dl / tc (ratio) | hit us, dl / tc | graphs dl / tc | correct |",
             "| --- | --- | --- | --- | --- | --- |"]
    firsts = []
    for m in models:
        dl, tc = by.get((m, "dynamo_lite")), by.get((m, "torch.compile"))
        if dl is None or tc is None:
            continue
        firsts.append(dl["first_call_s"] / tc["first_call_s"])
        fw_dl, fw_tc = dl.get("framework_us"), tc.get("framework_us")
        fw = f"{fw_dl} / {fw_tc} ({_ratio(fw_dl, fw_tc)})" if fw_dl is not None and fw_tc is not None else "-"
        lines.append(f"| {m} | {dl['first_call_s']:.3f} / {tc['first_call_s']:.3f} ({_ratio(dl['first_call_s'], tc['first_call_s'])}) "
                     f"| {fw} | {dl['hit_us']} / {tc['hit_us']} | {dl['graphs']} / {tc['graphs']} "
                     f"| {dl['correct'] and tc['correct']} |")
    if firsts:
        lines.append(f"\nmedian first-call ratio dl / tc: {statistics.median(firsts):.3f}")
    return "\n".join(lines)


def main(argv=None) -> None:
    import hf_models

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default=",".join(hf_models.MODELS))
    p.add_argument("--systems", default=",".join(SYSTEMS))
    p.add_argument("--rounds", type=int, default=21)
    p.add_argument("--json", default=None)
    p.add_argument("--worker", nargs=2, metavar=("MODEL", "SYSTEM"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.worker[0], args.worker[1], args.rounds)))
        return
    rows = []
    for name in args.models.split(","):
        for system in args.systems.split(","):
            proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", name, system,
                                   "--rounds", str(args.rounds)], capture_output=True, text=True, timeout=1200,
                                  env=_timing.worker_env())
            if proc.returncode != 0:
                raise SystemExit(f"worker {name} {system} failed:\n{proc.stderr[-3000:]}")
            rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
            print(json.dumps(rows[-1]), file=sys.stderr)
    print(render(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
