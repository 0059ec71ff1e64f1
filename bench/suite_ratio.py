"""What `pytest --dl` costs on a real suite: wall and CPU time against plain pytest, and the time of
each frame capture, beside torch.compile on the same tests.

Runs a pytest selection three times, each in a fresh process, one after the other:

* eager: plain ``pytest`` (our plugin loaded and inert, as users have it);
* ``--dl --dl-report=json:PREFIX.dl.json``: every test body under ``dynamo_lite.optimize("eager")``;
  the report holds each test's outcome, breaks, recompiles, internal errors and the time of each
  frame capture (``captures``: process CPU and wall seconds of ``FrameConverter._compile``);
* ``-p suite_breaks --tc --tc-report=PREFIX.tc.json`` (bench/suite_breaks.py): every test body
  under ``torch._dynamo.optimize("eager")``, the same scope, with dynamo's ``_compile`` timed the
  same way (``--no-tc`` leaves it out).

and prints, per run: wall seconds, CPU seconds (the child process's user + system time: less
sensitive to a shared machine than wall), the ratio of both to eager, pytest's outcome line, then
for the two compilers: frames captured, capture CPU time median / p90 / total (ms), graph breaks
(ours: breaks + whole-frame fallbacks), recompiles, internal errors (ours), and every test whose
outcome differs from eager's.  ``--json PATH`` writes the same numbers.

    python bench/suite_ratio.py --rootdir DIR [--out PREFIX] [--no-tc] [--json PATH] -- PYTEST_ARGS...

Compare rows of one run only; docs/testing.md ("Cost of --dl") quotes this script's output.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

_HERE = os.path.dirname(os.path.abspath(__file__))
_CHECKOUT = os.path.dirname(_HERE)


sys.path.insert(0, _CHECKOUT)
from dynamo_lite.pytest_plugin import _quantile  # noqa: E402 - the quantile the plugin's report totals use


def _capture_stats(captures):
    cpu = [c["cpu_seconds"] * 1e3 for c in captures]
    wall = [c["wall_seconds"] * 1e3 for c in captures]
    return {"frames": len(cpu), "cpu_ms_median": _quantile(cpu, 0.5), "cpu_ms_p90": _quantile(cpu, 0.9),
            "cpu_ms_total": sum(cpu), "wall_ms_median": _quantile(wall, 0.5), "wall_ms_p90": _quantile(wall, 0.9)}


def _run(cmd, cwd, env, log):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    with open(log, "w") as f:
        proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=f, stderr=subprocess.STDOUT, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    with open(log) as f:
        lines = [line.rstrip("\n") for line in f]
    last = next((line.strip("= ") for line in reversed(lines) if line.startswith("=") or " in " in line), "")
    return {"wall": wall, "cpu": cpu, "exit": proc.returncode, "summary": last, "log": log}


def _junit_outcomes(path):
    """{nodeid-ish: outcome} from a JUnit XML file (classname::name, as pytest writes them)."""
    outcomes = {}
    if not os.path.exists(path):
        return outcomes
    for case in ET.parse(path).getroot().iter("testcase"):
        classname, name = case.get("classname", ""), case.get("name", "")
        tags = {child.tag for child in case}
        if "failure" in tags or "error" in tags:
            outcome = "failed"
        elif "skipped" in tags:
            outcome = "skipped"
        else:
            outcome = "passed"
        outcomes[f"{classname}::{name}"] = outcome
    return outcomes


def _differ(eager, here):
    """(test, eager outcome, outcome here) for each test whose JUnit outcome differs (a failed subtest
    fails its test case there, while pytest's own report of the test may say passed)."""
    return [(key, before, here[key]) for key, before in eager.items() if key in here and here[key] != before]


def ours(path, eager, here):
    with open(path) as f:
        report = json.load(f)
    tests = report["tests"]
    captures = [c for t in tests for c in t.get("captures", [])]
    captures += (report.get("outside_tests") or {}).get("captures", [])
    internal = [(t["nodeid"], b.get("message", "")[:160]) for t in tests for b in t["graph_breaks"]
                if b.get("break_id") == "DL0026"]
    differ = _differ(eager, here)
    totals = report.get("totals", {})
    return {"tests": len(tests), **_capture_stats(captures),
            "graphs": sum(len(t["graphs"]) for t in tests),
            "breaks": sum(len(t["graph_breaks"]) for t in tests),
            "fallbacks": sum(t["counts"].get("fallbacks", 0) for t in tests),
            "recompiles": sum(len(t["recompiles"]) for t in tests),
            "internal_errors": totals.get("internal_errors", len(internal)), "internal": internal,
            "is_compiling_tests": sum(bool(t.get("compiling_queries")) for t in tests), "differ": differ}


def theirs(path, eager, here):
    with open(path) as f:
        report = json.load(f)
    tests = report["tests"]
    captures = [c for t in tests.values() for c in t.get("captures", [])]
    differ = _differ(eager, here)
    return {"tests": len(tests), **_capture_stats(captures),
            "breaks": sum(len(t["breaks"]) for t in tests.values()),
            "recompiles": sum(len(t["recompiles"]) for t in tests.values()), "differ": differ}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rootdir", default=os.getcwd(), help="the tested project (pytest runs there)")
    parser.add_argument("--out", default="/tmp/suite_ratio", help="prefix of the reports and logs")
    parser.add_argument("--no-tc", action="store_true", help="leave out the torch.compile run")
    parser.add_argument("--json", help="write the numbers here")
    parser.add_argument("pytest_args", nargs="*")
    args = parser.parse_args(argv)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_CHECKOUT, _HERE, env.get("PYTHONPATH")) if p)
    base = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args.pytest_args]
    junit, dl_json, tc_json = args.out + ".eager.xml", args.out + ".dl.json", args.out + ".tc.json"
    runs = {"eager": _run(base + [f"--junitxml={junit}"], args.rootdir, env, args.out + ".eager.log")}
    runs["dynamo_lite"] = _run(base + ["--dl", f"--dl-report=json:{dl_json}", f"--junitxml={args.out}.dl.xml"],
                               args.rootdir, env, args.out + ".dl.log")
    if not args.no_tc:
        runs["torch.compile"] = _run(base + ["-p", "no:dynamo_lite", "-p", "suite_breaks", "--tc",
                                             f"--tc-report={tc_json}", f"--junitxml={args.out}.tc.xml"],
                                     args.rootdir, env, args.out + ".tc.log")
    eager = _junit_outcomes(junit)
    stats = {"dynamo_lite": ours(dl_json, eager, _junit_outcomes(args.out + ".dl.xml"))
             if os.path.exists(dl_json) else {}}
    if "torch.compile" in runs:
        stats["torch.compile"] = theirs(tc_json, eager, _junit_outcomes(args.out + ".tc.xml")) \
            if os.path.exists(tc_json) else {}
    e = runs["eager"]
    print(f"{'run':14} {'wall s':>8} {'cpu s':>8} {'wall x':>7} {'cpu x':>7}  pytest")
    for name, r in runs.items():
        print(f"{name:14} {r['wall']:8.1f} {r['cpu']:8.1f} {r['wall'] / e['wall']:7.2f} {r['cpu'] / e['cpu']:7.2f}  "
              f"{r['summary']} (exit {r['exit']})")
    print()
    print(f"{'':14} {'frames':>7} {'cpu ms median':>14} {'p90':>8} {'total s':>8} {'breaks':>7} {'recompiles':>10}")
    for name, s in stats.items():
        if s:
            print(f"{name:14} {s['frames']:7d} {s['cpu_ms_median']:14.1f} {s['cpu_ms_p90']:8.1f} "
                  f"{s['cpu_ms_total'] / 1e3:8.1f} {s['breaks']:7d} {s['recompiles']:10d}")
    o = stats["dynamo_lite"]
    if o:
        print(f"\ndynamo_lite: {o['graphs']} graphs, {o['fallbacks']} whole-frame fallbacks (in breaks), "
              f"{o['internal_errors']} internal errors, {o['is_compiling_tests']} tests asked is_compiling()")
        for nodeid, message in o["internal"][:20]:
            print(f"  internal error: {nodeid}: {message}")
    for name, s in stats.items():
        if s and s["differ"]:
            print(f"\n{name}: {len(s['differ'])} tests differ from eager:")
            counts = collections.Counter((before, after) for _, before, after in s["differ"])
            print("  " + ", ".join(f"{n} {b} -> {a}" for (b, a), n in counts.items()))
            for nodeid, before, after in s["differ"][:30]:
                print(f"  {nodeid}: eager {before}, here {after}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": args.pytest_args, "rootdir": args.rootdir, "runs": runs, "stats": stats}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
