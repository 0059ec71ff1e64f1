"""Warm start: the first compiled call of a model in a second process, after a first process
filled the caches (issue #25).

For each model (bench/hf_models.py, eval mode, random weights) and system, one process fills the
caches, then ``--repeat`` fresh processes each build the model and make one call, timed (wall
clock, after imports and model building, which are printed apart):

    eager          model(**kwargs): the first call of eager PyTorch in a process (the baseline)
    dl-eager       dynamo_lite.compile(model, backend="eager") with its persistent cache on
    dl-inductor    dynamo_lite.compile(model, backend="inductor"), as configured by default: the
                   persistent cache on, and AOTInductor libraries of inference graphs built by a
                   background builder after process 1 (the time from the end of process 1 until
                   the builder is done is printed apart: build_wait_s)
    dl-inductor-nolib  the same with DYNAMO_LITE_AOT_LIBRARIES=0: the stored graphs are compiled
                   again through inductor's own FX graph / AOTAutograd caches (shared with
                   torch), which is also what a process started before the builder is done gets
    dl-aot         dl-inductor with DYNAMO_LITE_AOT_LIBRARIES=1: process 1 itself also
                   builds AOTInductor libraries of its inference graphs in the cache directory
    dl-package     dynamo_lite.compile(model, backend="inductor") from a package: process 1 calls it
                   and writes dynamo_lite.save(compiled, path); each later process starts with
                   empty caches (another machine), calls dynamo_lite.load(path) (timed apart:
                   load_s), then the first call
    tc-eager       torch.compile(model, backend="eager") (no capture cache: it traces again)
    tc-inductor    torch.compile(model) with inductor's caches on

Every system has a cache directory of its own per model (dynamo_lite's cache and
TORCHINDUCTOR_CACHE_DIR), made empty before the first process.  Each row says whether the
timed call traced (dynamo_lite: frames traced / loaded from its cache).

    python bench/warm_start.py [--models gpt2,bert,llama] [--systems ...] [--repeat 3] [--json PATH]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

SYSTEMS = ("eager", "dl-eager", "dl-inductor", "dl-inductor-nolib", "dl-aot", "dl-package", "tc-eager",
           "tc-inductor")


def worker(name: str, system: str) -> dict:
    start = time.perf_counter()
    import torch

    import hf_models

    if system.startswith("dl-"):
        import dynamo_lite
    imported = time.perf_counter()
    torch.set_num_threads(1)
    model, _, kwargs = hf_models.build(name, "eval")
    built = time.perf_counter()
    package = os.environ.get("DL_BENCH_PACKAGE", "")
    load_s = None
    if system == "dl-package" and os.path.exists(package):
        t0 = time.perf_counter()
        dynamo_lite.load(package)
        load_s = time.perf_counter() - t0
    with torch.no_grad():
        if system == "eager":
            run = model
        elif system in ("dl-package", "dl-aot", "dl-inductor-nolib"):
            run = dynamo_lite.compile(model, backend="inductor")
        elif system.startswith("dl-"):
            run = dynamo_lite.compile(model, backend=system[3:])
        else:
            run = torch.compile(model, backend=system[3:])
        t0 = time.perf_counter()
        out = run(**kwargs)
        first = time.perf_counter() - t0
        correct = hf_models._same(out, model(**kwargs))
        if system == "dl-package" and load_s is None:
            try:
                row_save = dynamo_lite.save(run, package)
            except ValueError as e:  # (nothing stored: the row says why)
                row_save = {"error": str(e)}
    row = {"model": name, "system": system, "import_s": round(imported - start, 3),
           "build_s": round(built - imported, 3), "first_call_s": round(first, 4), "correct": correct}
    if load_s is not None or system.startswith("dl-inductor") or system == "dl-aot":
        row["inductor_imported"] = "torch._inductor.compile_fx" in sys.modules
    if load_s is not None:
        row["load_s"] = round(load_s, 3)
    elif system == "dl-package":
        row["package"] = {k: v for k, v in row_save.items() if k != "path"}
    if system.startswith("dl-"):
        from dynamo_lite import persistent_cache

        st = persistent_cache.stats()
        row.update(loaded=st["hits"], traced=st["misses"], stored=st["stored"],
                   not_stored=sum(st["not_stored"].values()))
        if st["not_stored"]:
            row["not_stored_reasons"] = st["not_stored"]
    return row


def _run(name: str, system: str, env: dict) -> dict:
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", name, system],
                          capture_output=True, text=True, timeout=1800, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"worker {name} {system} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _wait_for_builder(cache: str) -> float:
    """Seconds until the background builder of cache directory ``cache`` is done."""
    from dynamo_lite import config, persistent_cache

    t0 = time.perf_counter()
    with config.patch(cache_dir=cache):
        if not persistent_cache.wait_for_aot_libraries(timeout=1800):
            raise SystemExit(f"the AOTInductor builder of {cache} did not finish")
    return round(time.perf_counter() - t0, 2)


def render(rows: list[dict]) -> str:
    lines = ["| model | system | first call in process 1 s | first call in process 2 s (median) | "
             "import s | build s | traced / loaded (process 2) | correct |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        traced = f"{r['traced']} / {r['loaded']}" if "traced" in r else "-"
        if "load_s" in r:
            traced += f" (load() {r['load_s']:.3f} s)"
        if "build_wait_s" in r:
            traced += f" (builder done {r['build_wait_s']:.1f} s after process 1)"
        lines.append(f"| {r['model']} | {r['system']} | {r['cold_s']:.3f} | {r['warm_s']:.3f} | {r['import_s']:.2f} "
                     f"| {r['build_s']:.2f} | {traced} | {r['correct']} |")
    by = {(r["model"], r["system"]): r for r in rows}
    for m in dict.fromkeys(r["model"] for r in rows):
        eager = by.get((m, "eager"))
        parts = []
        for dl, tc in (("dl-eager", "tc-eager"), ("dl-inductor", "tc-inductor"), ("dl-inductor-nolib", "tc-inductor"),
                       ("dl-aot", "tc-inductor"), ("dl-package", "tc-inductor")):
            if (m, dl) in by and (m, tc) in by:
                parts.append(f"{dl} / {tc} {by[(m, dl)]['warm_s'] / by[(m, tc)]['warm_s']:.3f}")
        if eager and (m, "dl-eager") in by:
            parts.append(f"dl-eager - eager {1e3 * (by[(m, 'dl-eager')]['warm_s'] - eager['warm_s']):.1f} ms")
        lines.append(f"\n{m}: " + ", ".join(parts))
    return "\n".join(lines)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="gpt2,bert,llama")
    p.add_argument("--systems", default=",".join(SYSTEMS))
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json", default=None)
    p.add_argument("--worker", nargs=2, metavar=("MODEL", "SYSTEM"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(*args.worker)))
        return
    rows = []
    scratch = tempfile.mkdtemp(prefix="dl-warm-start-")
    try:
        for name in args.models.split(","):
            for system in args.systems.split(","):
                folder = os.path.join(scratch, f"{name}-{system}")
                env = dict(os.environ, DYNAMO_LITE_PERSISTENT_CACHE="1", OMP_NUM_THREADS="1",
                           DYNAMO_LITE_CACHE_DIR=os.path.join(folder, "dl"),
                           TORCHINDUCTOR_CACHE_DIR=os.path.join(folder, "inductor"))
                if system == "dl-package":
                    env["DL_BENCH_PACKAGE"] = os.path.join(folder, "model.dlpkg")
                if system == "dl-aot":
                    env["DYNAMO_LITE_AOT_LIBRARIES"] = "1"
                elif system == "dl-inductor-nolib":
                    env["DYNAMO_LITE_AOT_LIBRARIES"] = "0"
                elif system == "dl-inductor":
                    env["DYNAMO_LITE_AOT_LIBRARIES"] = "background"
                cold = _run(name, system, env)
                build_wait = _wait_for_builder(env["DYNAMO_LITE_CACHE_DIR"]) if system == "dl-inductor" else None
                if system == "dl-package":  # (each later process: empty caches, as on another machine)
                    warm = [_run(name, system, dict(env, DYNAMO_LITE_CACHE_DIR=os.path.join(folder, f"dl-{i}"),
                                                    TORCHINDUCTOR_CACHE_DIR=os.path.join(folder, f"inductor-{i}")))
                            for i in range(args.repeat)]
                else:
                    warm = [_run(name, system, env) for _ in range(args.repeat)]
                row = dict(warm[len(warm) // 2])
                row["cold_s"] = cold["first_call_s"]
                row["warm_s"] = statistics.median(w["first_call_s"] for w in warm)
                row["correct"] = cold["correct"] and all(w["correct"] for w in warm)
                if build_wait is not None:
                    row["build_wait_s"] = build_wait
                rows.append(row)
                print(json.dumps(row), file=sys.stderr)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(render(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    # the point of warm start: a later process traces nothing
    traced = [f"{r['model']} {r['system']}: {r['traced']} frame(s) traced in a later process"
              for r in rows if r["system"].startswith("dl-") and r.get("traced")]
    traced += [f"{r['model']} dl-inductor: a later process compiled with inductor (no AOTInductor library)"
               for r in rows if r["system"] == "dl-inductor" and r.get("inductor_imported")]
    if traced:
        raise SystemExit("warm start traced again:\n  " + "\n  ".join(traced))


if __name__ == "__main__":
    main()
