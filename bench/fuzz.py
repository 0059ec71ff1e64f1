"""Long differential fuzzing run: random programs, eager vs dynamo_lite (backend "eager").

    python bench/fuzz.py [--programs 10000] [--seed 0] [--workers 2] [--timeout 60]
                         [--minimise 20] [--out bench/results/fuzz.json]

Programs come from tools/program_fuzzer.py (hypothesis strategies, generated in
this process).  They run in worker processes, so a crash (segfault, abort) or a
hang is recorded with the program instead of ending the run; workers are
restarted after a crash or a timeout.  Every distinct failure signature is
minimised (statement-level reduction, in workers) and printed.

Summary (printed and written as JSON): programs, ok, mismatches, crashes,
timeouts, internal errors, guard errors, graph breaks hit per break id,
graphs compiled, recompiles, and each distinct failure with its minimised
program.  The short CI version of this run is tests/robustness/test_fuzz.py.
"""
from __future__ import annotations

import argparse
import collections
import json
import multiprocessing as mp
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, ROOT)


# --------------------------------------------------------------------------
# worker side
# --------------------------------------------------------------------------

def _worker(conn, log_path: str, mem_limit_gb: int) -> None:
    import faulthandler
    import resource

    if mem_limit_gb:
        limit = mem_limit_gb << 30
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    log = open(log_path, "a")
    faulthandler.enable(file=log)
    sys.stdout = open(os.devnull, "w")  # programs print inside redirect_stdout; warnings go nowhere
    sys.stderr = log
    import warnings

    warnings.simplefilter("ignore")
    import logging

    logging.getLogger("dynamo_lite").setLevel(logging.ERROR)
    import program_fuzzer as pf

    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg is None:
            return
        index, prog = msg
        log.write(f"--- program {index}\n")
        log.flush()
        try:
            report = pf.run_program(prog)
        except BaseException as e:  # noqa: BLE001 - the harness itself failed on this program
            report = pf.Report("harness_error", f"{type(e).__name__}: {e}")
        conn.send((index, report))


class WorkerPool:
    """Worker processes running programs, restarted after a crash or a timeout."""

    def __init__(self, n: int, timeout: float, log_dir: str, mem_limit_gb: int):
        self.ctx = mp.get_context("spawn")
        self.timeout = timeout
        self.log_dir = log_dir
        self.mem_limit_gb = mem_limit_gb
        self.workers: list = [self._spawn(i) for i in range(n)]

    def _spawn(self, slot: int):
        parent, child = self.ctx.Pipe()
        log_path = os.path.join(self.log_dir, f"worker{slot}.log")
        proc = self.ctx.Process(target=_worker, args=(child, log_path, self.mem_limit_gb), daemon=True)
        proc.start()
        child.close()
        return {"proc": proc, "conn": parent, "job": None, "start": 0.0, "log": log_path}

    def _restart(self, slot: int) -> None:
        w = self.workers[slot]
        if w["proc"].is_alive():
            w["proc"].kill()
        w["proc"].join()
        w["conn"].close()
        self.workers[slot] = self._spawn(slot)

    def _crash_report(self, w, kind: str):
        import program_fuzzer as pf

        tail = ""
        try:
            with open(w["log"]) as fh:
                text = fh.read()
            tail = text[text.rfind("--- program"):][-3000:]
        except OSError:
            pass
        code = w["proc"].exitcode
        msg = f"worker exit code {code}" if kind == "crash" else f"no result after {self.timeout:.0f}s"
        return pf.Report(kind, f"{msg}\n{tail}")

    def run(self, jobs, on_result) -> None:
        """Run (index, program) jobs; on_result(index, program, report) for each."""
        pending = collections.deque(jobs)
        busy = 0
        while pending or busy:
            for slot, w in enumerate(self.workers):
                if w["job"] is None and pending:
                    job = pending.popleft()
                    w["conn"].send(job)
                    w["job"], w["start"] = job, time.time()
                    busy += 1
            progressed = False
            for slot, w in enumerate(self.workers):
                if w["job"] is None:
                    continue
                if w["conn"].poll(0.01):
                    try:
                        index, report = w["conn"].recv()
                    except (EOFError, OSError):
                        report = self._crash_report(w, "crash")
                        index = w["job"][0]
                        self._finish(slot, on_result, report, restart=True)
                        busy -= 1
                        progressed = True
                        continue
                    self._finish(slot, on_result, report, restart=False)
                    busy -= 1
                    progressed = True
                elif not w["proc"].is_alive():
                    w["proc"].join()
                    self._finish(slot, on_result, self._crash_report(w, "crash"), restart=True)
                    busy -= 1
                    progressed = True
                elif time.time() - w["start"] > self.timeout:
                    self._finish(slot, on_result, self._crash_report(w, "timeout"), restart=True)
                    busy -= 1
                    progressed = True
            if not progressed:
                time.sleep(0.005)

    def _finish(self, slot, on_result, report, restart: bool) -> None:
        w = self.workers[slot]
        index, prog = w["job"]
        w["job"] = None
        if restart:
            self._restart(slot)
        on_result(index, prog, report)

    def run_one(self, prog):
        """Run one program and wait for its report (used by minimisation)."""
        out = []
        self.run([(0, prog)], lambda i, p, r: out.append(r))
        return out[0]

    def close(self) -> None:
        for w in self.workers:
            try:
                w["conn"].send(None)
            except (OSError, BrokenPipeError):
                pass
        for w in self.workers:
            w["proc"].join(timeout=5)
            if w["proc"].is_alive():
                w["proc"].kill()


# --------------------------------------------------------------------------
# generation
# --------------------------------------------------------------------------

def generate(n: int, seed: int) -> list:
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hyp_seed

    import program_fuzzer as pf

    out: list = []

    @hyp_seed(seed)
    @settings(max_examples=n, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(pf.programs())
    def collect(prog):
        out.append(prog)

    collect()
    return out


# --------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--programs", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=max(1, min(4, os.cpu_count() or 1)))
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per program")
    ap.add_argument("--mem-limit-gb", type=int, default=8, help="address-space limit of a worker (0: none)")
    ap.add_argument("--minimise", type=int, default=20, help="minimise at most this many distinct failures")
    ap.add_argument("--minimise-budget", type=int, default=150, help="candidate runs per minimisation")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "fuzz.json"))
    args = ap.parse_args(argv)

    import tempfile

    import program_fuzzer as pf

    t0 = time.time()
    programs = generate(args.programs, args.seed)
    gen_seconds = time.time() - t0
    print(f"generated {len(programs)} programs in {gen_seconds:.0f}s", flush=True)

    log_dir = tempfile.mkdtemp(prefix="dl_fuzz_logs_")
    pool = WorkerPool(args.workers, args.timeout, log_dir, args.mem_limit_gb)
    kinds: collections.Counter = collections.Counter()
    breaks: collections.Counter = collections.Counter()
    failures: dict = {}  # signature -> {"count", "first": (index, prog, report)}
    totals = collections.Counter()
    done = [0]

    def on_result(index, prog, report):
        done[0] += 1
        kinds[report.kind] += 1
        breaks.update(report.breaks)
        totals["graphs"] += report.graphs
        totals["recompiles"] += report.recompiles
        totals["input_sets"] += len(prog.inputs)
        totals["programs_where_eager_raised"] += bool(report.eager_raised)
        if report.kind != "ok":
            sig = report.signature
            entry = failures.setdefault(sig, {"count": 0, "first": (index, prog, report)})
            entry["count"] += 1
        if done[0] % 500 == 0:
            print(f"  {done[0]}/{len(programs)} programs, {time.time() - t0:.0f}s, {dict(kinds)}", flush=True)

    t1 = time.time()
    pool.run(list(enumerate(programs)), on_result)
    run_seconds = time.time() - t1

    minimised = []
    ordered = sorted(failures.items(), key=lambda kv: -kv[1]["count"])
    for sig, entry in ordered:
        index, prog, report = entry["first"]
        minimised.append({
            "kind": report.kind, "signature": list(sig), "count": entry["count"], "program_index": index,
            "input_set": report.input_index, "message": report.message[:4000],
            "source": prog.source(), "inputs": repr(prog.inputs),
            "minimised_source": None, "minimised_inputs": None,
        })
    summary = _summary(args, programs, kinds, breaks, totals, minimised, gen_seconds, run_seconds, log_dir)
    _write(args.out, summary)  # before minimising, which can take long
    pool.timeout = min(args.timeout, 20.0)
    for n, ((sig, entry), record) in enumerate(zip(ordered, minimised)):
        index, prog, report = entry["first"]
        if n < args.minimise and report.kind not in ("invalid", "harness_error"):
            small = pf.minimise(prog, report, run=pool.run_one, budget=args.minimise_budget)
            record["minimised_source"], record["minimised_inputs"] = small.source(), repr(small.inputs)
            _write(args.out, summary)
    pool.close()
    _print(summary)
    print(f"\nwritten to {args.out}")
    return 0 if not minimised else 1


def _summary(args, programs, kinds, breaks, totals, minimised, gen_seconds, run_seconds, log_dir) -> dict:
    return {
        "programs": len(programs),
        "seed": args.seed,
        "input_sets": totals["input_sets"],
        "ok": kinds["ok"],
        "mismatches": kinds["mismatch"],
        "crashes": kinds["crash"],
        "timeouts": kinds["timeout"],
        "internal_errors": kinds["internal_error"],
        "guard_errors": kinds["guard_error"],
        "harness_errors": kinds["harness_error"],
        "invalid_programs": kinds["invalid"],
        "programs_where_eager_raised": totals["programs_where_eager_raised"],
        "graphs_compiled": totals["graphs"],
        "recompiles": totals["recompiles"],
        "graph_breaks_by_id": dict(sorted(breaks.items())),
        "distinct_failures": minimised,
        "generate_seconds": round(gen_seconds, 1),
        "run_seconds": round(run_seconds, 1),
        "workers": args.workers,
        "worker_logs": log_dir,
    }


def _write(path: str, summary: dict) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        json.dump(summary, fh, indent=2)


def _print(summary: dict) -> None:
    print(f"\nprograms {summary['programs']} ({summary['input_sets']} input sets) in {summary['run_seconds']:.0f}s")
    for key in ("ok", "mismatches", "crashes", "timeouts", "internal_errors", "guard_errors", "harness_errors",
                "invalid_programs", "programs_where_eager_raised", "graphs_compiled", "recompiles"):
        print(f"  {key:28s} {summary[key]}")
    print("  graph breaks by id:", ", ".join(f"{k}={v}" for k, v in summary["graph_breaks_by_id"].items()))
    for f in summary["distinct_failures"]:
        src = f["minimised_source"] or f["source"]
        inputs = f["minimised_inputs"] or f["inputs"]
        print(f"\n=== {f['kind']} x{f['count']}: {f['signature'][1]}\n{f['message'][:1500]}\n"
              f"--- {'minimised' if f['minimised_source'] else 'program'} ---\n{src}\ninputs: {inputs}")


if __name__ == "__main__":
    sys.exit(main())
