"""Run the whole bench suite: print the tables, write bench/results/*.json and docs/performance.md.

    python bench/run_all.py                 everything (about 15-30 minutes on 2 cores)
    python bench/run_all.py --skip-inductor without the inductor compiles (the slow part)
    python bench/run_all.py --skip-distributed   without the 2-rank DDP runs
    python bench/run_all.py --quick         a few rounds, MLP only, no inductor, nothing written
    python bench/run_all.py --doc-only      rewrite docs/performance.md from bench/results/*.json

Parts: bench/overhead.py (cache-hit overhead, skipped frames), bench/models.py (whole
models: graphs, breaks, ops, capture time, cache-hit time, memory), bench/inductor.py
(backend "inductor" speed-ups), bench/distributed.py (2-rank DDP training: step time,
graphs, all-reduce time not overlapped with backward).  Each part also runs on its own.
"""
from __future__ import annotations

import argparse
import datetime
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _timing  # noqa: E402
import distributed  # noqa: E402
import dynamic  # noqa: E402
import inductor  # noqa: E402
import models  # noqa: E402
import overhead  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "performance.md")


def _git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except Exception:  # noqa: BLE001 - not a git checkout
        return "unknown"


def _overhead_in_subprocess(quick: bool) -> dict:
    """overhead.run() in a fresh process (its torch.compile state must not meet the model workers')."""
    args = [os.path.join(os.path.dirname(os.path.abspath(__file__)), "overhead.py"), "--json-line"]
    if quick:
        args.append("--quick")
    return _timing.run_subprocess_json(args)


def write_doc(env: dict, parts: list[tuple[str, str]]) -> None:
    lines = [
        "# Performance",
        "",
        "What dynamo_lite costs on a cache hit and on the first call, next to",
        '`torch.compile(backend="eager")` measured in the same run. This page is written by',
        "`python bench/run_all.py` (raw numbers: `bench/results/*.json`); do not edit the tables by hand.",
        "",
        "## How it is measured",
        "",
        "- One intra-op thread (`torch.set_num_threads(1)`), `torch.no_grad()`, CPU.",
        "- Speed: the systems (eager, torch.compile, dynamo_lite) are timed in interleaved rounds, in",
        "  a shuffled order each round, each a loop of calls with the garbage collector off; a round",
        "  gives one time per call per system; tables show medians over the rounds, and overheads are",
        "  medians of the per-round differences. The clock is the thread's CPU time, so other jobs on",
        "  a shared machine do not count (`BENCH_CLOCK=wall` switches to wall-clock time).",
        "- *Cache-hit overhead* is compiled call minus eager call. It can be negative: a captured",
        "  graph skips `nn.Module.__call__` for every submodule. *Framework overhead* is compiled call",
        "  minus a direct call of the captured graph (hook, guards, wrappers, loading the graph's",
        "  inputs): the cost of the system itself.",
        "- *Capture time* is the first call of a model (trace, guards, code generation; the eager",
        "  backend compiles nothing), after each system's one-time start-up was paid on a small",
        "  unrelated module; process CPU time. Models run one process per system.",
        "",
        "## Targets",
        "",
        "| what | target |",
        "|------|--------|",
        "| cache-hit overhead, cases a-e | <= 1/4 of torch.compile's |",
        "| a frame the hook passes over (skipped code) | <= 0.1 us |",
        "| first-call capture time | <= 1/2 of torch.compile's |",
        "| memory | no copies of parameters; no FakeTensor alive after compilation |",
        "",
        "## What makes a cache hit cheap",
        "",
        "- The guard of a cache entry is a `_C.GuardProgram` (csrc/guards.c, built by",
        "  `dynamo_lite/guards/program.py`): a straight list of register loads and checks run by the",
        "  hook without a Python frame. Every distinct source (`self._modules['fc1']`) is loaded once;",
        "  guards on the frame's arguments run first; a guard reading through an object runs after",
        "  the guards that establish what that object is.",
        "- A tensor check reads dtype, device, sizes, strides and requires_grad straight from the",
        "  `c10::TensorImpl` (csrc/tensor_meta.cpp, optional; validated against the Python attributes",
        "  at import): a few nanoseconds instead of about a microsecond for an `nn.Parameter`.",
        "- Attribute loads through an instance `__dict__` and item loads from dicts remember the",
        "  value with the dict's version: an unchanged module answers without a lookup.",
        "- Generated code loads each shared source prefix (`self._modules['layers']`) once.",
        "- `OptimizedModule.__call__` takes `nn.Module._call_impl`'s own no-hook fast path",
        "  directly (any hook, `_compiled_call_impl` or tracing state: the full path).",
        "- A frame with nothing to capture (no tensor or module argument, no global, attribute or",
        "  closure read) whose arguments are plain scalars gets an entry that runs the original code,",
        "  guarded by the argument types; after `config.cache_size_limit` entries a frame gets an",
        "  `ALWAYS` fallback entry kept last. Either way the Python callback is not called again.",
        "",
        "## What makes the first call cheap",
        "",
        "- Guards are compiled by kind (a guard on one source becomes its checks directly); only",
        "  free-form expressions are parsed, and the Python version of the check is built only when",
        "  asked for (tests, logs).",
        "- Decoded instructions are cached per code object (a model inlines the same `forward` once",
        "  per layer).",
        "- The garbage collector is off while a frame is converted: a full collection of a process",
        "  holding torch and transformers costs hundreds of milliseconds.",
        "- After the backend compiled the graph, node metadata keeps a shape/dtype summary instead",
        "  of FakeTensors, so the trace's FakeTensorMode is freed (`fake alive` below).",
        "",
        "## What is checked for a module's parameters, and why that is enough",
        "",
        "Nothing is skipped: on every call the program checks the module's identity, and for every",
        "parameter and buffer the graph reads, the object found at `module._parameters[name]` (or",
        "`_buffers`), read afresh, is a tensor of exactly the recorded type, dtype, device, sizes,",
        "strides and requires_grad. Identity alone would not be sound: `module.half()` or",
        "`p.data = ...` or `p.requires_grad_(False)` change a parameter in place and keep its identity.",
        "The values are not guarded (they are graph inputs read on every call), so optimizer steps",
        "and `load_state_dict` never recompile. What makes this cheap is *how* it is read: the dict",
        "loads are answered from the dicts' version tags while the module's dicts are unchanged (a",
        "changed dict, e.g. a replaced parameter, gets a real lookup), and the metadata comes from",
        "the TensorImpl. tests/unit/test_guards.py changes each of these facts (and globals,",
        "closures, hooks, grad mode, container structure) and checks recompiles and results, with",
        "the C++ reader and with attribute reads, and that the C program answers exactly like the",
        "Python expressions it was built from.",
        "",
        "## Results",
        "",
        f"Run {env.get('date') or datetime.datetime.now().strftime('%Y-%m-%d %H:%M')}, commit `{_git_commit()}`.",
        "",
        "| machine | |",
        "|---|---|",
        f"| CPU | {env.get('cpu')} ({env.get('cores')} cores) |",
        f"| platform | {env.get('platform')} |",
        f"| Python | {env.get('python')} |",
        f"| torch | {env.get('torch')} |",
        f"| transformers | {env.get('transformers')} |",
        f"| clock | {env.get('clock')} |",
        f"| load average at start | {', '.join(f'{x:.1f}' for x in env.get('load_average', ()))} |",
        "",
    ]
    for title, text in parts:
        lines += [f"### {title}", "", text, ""]
    with open(DOC, "w") as f:
        f.write("\n".join(lines))


def _doc_from_results() -> int:
    """Rewrite docs/performance.md from bench/results/*.json (no measuring)."""
    import json

    parts = []
    env = None
    for name, module, title in (("overhead", overhead, "Cache-hit overhead and skipped frames (bench/overhead.py)"),
                                ("models", models, "Whole models (bench/models.py)"),
                                ("inductor", inductor, "Backend inductor (bench/inductor.py)"),
                                ("distributed", distributed, "DDP training on 2 ranks (bench/distributed.py)"),
                                ("dynamic", dynamic, "Dynamic shapes, backend eager (bench/dynamic.py)"),
                                ("dynamic_inductor", dynamic,
                                 "Dynamic shapes, backend inductor (bench/dynamic.py --inductor)")):
        path = os.path.join(_timing.RESULTS_DIR, f"{name}.json")
        if not os.path.exists(path):
            continue
        with open(path) as f:
            data = json.load(f)
        env = env or data.get("env")
        date = (data.get("env") or {}).get("date")
        parts.append((f"{title}, measured {date}" if date else title, module.render(data)))
    if env is None:
        print("no results in bench/results/")
        return 1
    write_doc(env, parts)
    print(f"wrote {os.path.relpath(DOC, ROOT)}")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="tiny run, nothing written")
    p.add_argument("--skip-inductor", action="store_true")
    p.add_argument("--skip-distributed", action="store_true")
    p.add_argument("--no-doc", action="store_true", help="do not rewrite docs/performance.md")
    p.add_argument("--doc-only", action="store_true", help="rewrite docs/performance.md from bench/results/")
    a = p.parse_args(argv)
    if a.doc_only:
        return _doc_from_results()
    env = _timing.environment()
    parts = []

    data = _overhead_in_subprocess(a.quick)
    if "error" in data:
        print("overhead.py failed:\n" + data["error"])
        return 1
    text = overhead.render(data)
    print(text, "\n")
    parts.append(("Cache-hit overhead and skipped frames (bench/overhead.py)", text))
    if not a.quick:
        _timing.write_json("overhead", data)

    data = models.run(quick=a.quick, models=["mlp"] if a.quick else None)
    text = models.render(data)
    print(text, "\n")
    parts.append(("Whole models (bench/models.py)", text))
    if not a.quick:
        _timing.write_json("models", data)

    if not (a.quick or a.skip_inductor):
        data = inductor.run()
        text = inductor.render(data)
        print(text, "\n")
        parts.append(("Backend inductor (bench/inductor.py)", text))
        _timing.write_json("inductor", data)

    if not (a.quick or a.skip_distributed):
        data = distributed.run(backends=("aot_eager",) if a.skip_inductor else ("aot_eager", "inductor"))
        text = distributed.render(data)
        print(text, "\n")
        parts.append(("DDP training on 2 ranks (bench/distributed.py)", text))
        _timing.write_json("distributed", data)

    if not (a.quick or a.no_doc):
        write_doc(env, parts)
        print(f"wrote {os.path.relpath(DOC, ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
