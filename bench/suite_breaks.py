"""A pytest selection under dynamo_lite and under torch.compile, side by side: graph breaks per place.

Two halves in one file:

* a pytest plugin (``-p suite_breaks`` with this folder on ``sys.path``) that, with ``--tc``,
  runs every test body under ``torch._dynamo.optimize("eager")``, the reference twin of our
  plugin's ``--dl`` (same scope: the test body only; dynamo's caches reset before each test), and
  writes ``--tc-report=PATH``: per test its outcome, its graph breaks (dynamo's break type, first
  line of the reason and the user stack, taken where dynamo logs the break), its recompiles (a frame
  compiled again), its cache-limit hits and the time of each frame capture (dynamo's ``_compile``,
  process CPU and wall seconds: bench/suite_ratio.py);
* a driver that runs the selection both ways in fresh processes (``--dl --dl-report=json:...`` and
  ``--tc``) and prints, per place, how often each system broke there: a place is the innermost frame
  of the user's code (``dynamo_lite.report.summary.classify``: not torch, not the standard library,
  not site-packages), relative to the rootdir, as our plugin's summary places them.

    python bench/suite_breaks.py --rootdir DIR [--out PREFIX] [--rows N] -- PYTEST_ARGS...
    python bench/suite_breaks.py --compare OURS.json TORCH.json [--rootdir DIR]   # reuse two reports

"Breaks" count the same thing on both sides: each graph break found while compiling a frame
(dynamo_lite: breaks + frames that fell back to eager, as ``explain().graph_break_count``, the
fallbacks also shown apart; torch.compile: every call of dynamo's ``log_graph_break``: a frame
dynamo skips whole without a graph break, e.g. one iterating a list_iterator argument, is not
counted, so compare "breaks" less "of which fallbacks" with it where that matters). Both are compile-time events, so a frame
run from its cache adds none; recompiles are compiles of a code object that already had an entry.
The driver prints wall times too; they are one run on a shared machine, not a benchmark.
docs/testing.md (the einx paragraph) quotes this script's output.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import time

import pytest

_HERE = os.path.dirname(os.path.abspath(__file__))
_CHECKOUT = os.path.dirname(_HERE)


# ----------------------------------------------------------------------------- the pytest plugin

def pytest_addoption(parser):
    group = parser.getgroup("suite_breaks", "torch.compile reference run (bench/suite_breaks.py)")
    group.addoption("--tc", action="store_true", default=False,
                    help="run every test body under torch._dynamo.optimize('eager') and record its graph breaks")
    group.addoption("--tc-report", default=None, metavar="PATH", help="write the torch.compile record here (JSON)")


class _TorchRecorder:
    """Graph breaks, recompiles and cache-limit hits of torch.compile, per test (patched into dynamo)."""

    def __init__(self):
        self.tests: dict = {}  # nodeid -> {"outcome", "breaks", "recompiles", "cache_limits"}
        self.current = None  # the entry of the running test

    def install(self):
        import torch._dynamo.cache_size as cache_size
        import torch._dynamo.convert_frame as convert_frame
        from torch._dynamo.symbolic_convert import InstructionTranslatorBase

        rec = self
        log_graph_break = InstructionTranslatorBase.log_graph_break

        def logged(tx, code_options, reason, exc):
            if not getattr(exc, "logged", False) and rec.current is not None:
                stack = getattr(exc, "real_stack", None)
                if stack is None:
                    import torch._guards

                    stack = torch._guards.TracingContext.extract_stack()
                frames = [(f.filename, f.lineno, f.name) for f in stack]
                if not frames:
                    frames = [(tx.f_code.co_filename, tx.lineno, tx.f_code.co_name)]
                rec.current["breaks"].append({
                    "type": str(getattr(exc, "gb_type", type(exc).__name__)),
                    "reason": str(reason).splitlines()[0][:200] if reason else "",
                    "stack": frames})
            return log_graph_break(tx, code_options, reason, exc)

        InstructionTranslatorBase.log_graph_break = logged

        reasons = convert_frame.get_and_maybe_log_recompilation_reasons

        def recompiling(entries, frame, *args, **kwargs):
            if rec.current is not None:
                code = frame.f_code
                rec.current["recompiles"].append(f"{code.co_filename}:{code.co_firstlineno} {code.co_name}")
            return reasons(entries, frame, *args, **kwargs)

        convert_frame.get_and_maybe_log_recompilation_reasons = recompiling

        exceeds = convert_frame.exceeds_recompile_limit

        def limited(*args, **kwargs):
            result = exceeds(*args, **kwargs)
            if result[0] and rec.current is not None:
                rec.current["cache_limits"] += 1
            return result

        convert_frame.exceeds_recompile_limit = limited
        assert cache_size.exceeds_recompile_limit is exceeds  # we patched the name convert_frame calls

        # per-frame capture time (bench/suite_ratio.py): dynamo's _compile, the twin of our
        # FrameConverter._compile (trace, bytecode, guards, backend); nested ones count in the outer
        compile_frame = convert_frame._compile
        depth = [0]

        def timed(code, *args, **kwargs):
            if depth[0] or rec.current is None:
                return compile_frame(code, *args, **kwargs)
            depth[0] += 1
            cpu, wall = time.process_time(), time.perf_counter()
            try:
                return compile_frame(code, *args, **kwargs)
            finally:
                depth[0] -= 1
                if rec.current is not None:
                    rec.current["captures"].append({"frame": code.co_name, "cpu_seconds": time.process_time() - cpu,
                                                    "wall_seconds": time.perf_counter() - wall})

        convert_frame._compile = timed


def pytest_configure(config):
    if not config.getoption("--tc"):
        return
    import torch._dynamo

    torch._dynamo.config.raise_on_ctx_manager_usage = False  # optimize(...) as a context, like --dl
    rec = _TorchRecorder()
    rec.install()
    config.stash_suite_breaks = rec  # one recorder per run


def _recorder(config):
    return getattr(config, "stash_suite_breaks", None)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    rec = _recorder(item.config)
    if rec is None:
        return (yield)
    import torch._dynamo

    torch._dynamo.reset()
    rec.current = rec.tests[item.nodeid] = {"outcome": "", "breaks": [], "recompiles": [], "cache_limits": 0,
                                            "captures": []}
    try:
        return (yield)
    finally:
        rec.current = None
        _write(item.config)  # after every test: a run stopped early leaves the tests so far


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    rec = _recorder(item.config)
    if rec is None:
        return (yield)
    import torch._dynamo

    with torch._dynamo.optimize("eager"):
        return (yield)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rec = _recorder(item.config)
    if rec is None:
        return
    report = outcome.get_result()
    entry = rec.tests.get(item.nodeid)
    if entry is not None and entry["outcome"] != "failed" and (report.when == "call" or report.outcome != "passed"):
        entry["outcome"] = report.outcome


def _write(config):
    rec = _recorder(config)
    path = config.getoption("--tc-report")
    if rec is None or not path:
        return
    import torch

    with open(path + ".tmp", "w") as f:
        json.dump({"schema": "suite_breaks.torch_compile", "torch": torch.__version__,
                   "tests": rec.tests}, f)
    os.replace(path + ".tmp", path)


def pytest_sessionfinish(session):
    _write(session.config)


# ----------------------------------------------------------------------------- comparing the two

def _place(frames, root):
    """The innermost frame of the user's code as ``path:line`` (relative to ``root``), from (file, line, name)s."""
    sys.path.insert(0, _CHECKOUT)
    from dynamo_lite.report.summary import classify

    user = [f for f in frames if classify(f[0]).is_user]
    f = user[-1] if user else (frames[-1] if frames else None)
    if f is None:
        return "<unknown>"
    path = os.path.abspath(f[0])
    if root and path.startswith(os.path.abspath(root) + os.sep):
        path = os.path.relpath(path, root)
    return f"{path}:{f[1]}"


def _nodeids(path):
    with open(path) as f:
        report = json.load(f)
    tests = report["tests"]
    return {t["nodeid"] for t in tests} if isinstance(tests, list) else set(tests)


def load_ours(path, root, only=None):
    """{place: Counter(break id)}, totals, from a --dl-report JSON (the tests in ``only``, if given)."""
    with open(path) as f:
        report = json.load(f)
    places = collections.defaultdict(collections.Counter)
    totals = collections.Counter()
    for test in report["tests"]:
        if only is not None and test["nodeid"] not in only:
            continue
        totals["tests"] += 1
        totals[test.get("outcome") or "unknown"] += 1
        totals["recompiles"] += len(test.get("recompiles", []))
        totals["cache_limits"] += len(test.get("cache_limits", []))
        for b in test["graph_breaks"]:
            frames = [(fr["filename"], fr["lineno"], fr.get("name", "")) for fr in b.get("user_code_stack") or []]
            if not frames and b.get("innermost"):
                fr = b["innermost"]
                frames = [(fr["filename"], fr["lineno"], fr.get("name", ""))]
            places[_place(frames, root)][f"{b['break_id']}: {b.get('message', '')[:90]}"] += 1
            totals["breaks"] += 1
            totals["of which fallbacks"] += b.get("kind") == "fallback"
    return places, totals


def load_torch(path, root, only=None):
    """{place: Counter(break type)}, totals, from a --tc-report JSON (the tests in ``only``, if given)."""
    with open(path) as f:
        report = json.load(f)
    places = collections.defaultdict(collections.Counter)
    totals = collections.Counter()
    for nodeid, test in report["tests"].items():
        if only is not None and nodeid not in only:
            continue
        totals["tests"] += 1
        totals[test.get("outcome") or "unknown"] += 1
        totals["recompiles"] += len(test["recompiles"])
        totals["cache_limits"] += test["cache_limits"]
        for b in test["breaks"]:
            places[_place(b["stack"], root)][f"{b['type']}: {b['reason'][:90]}"] += 1
            totals["breaks"] += 1
    return places, totals


def compare(ours_path, torch_path, root, rows=25):
    common = _nodeids(ours_path) & _nodeids(torch_path)  # a run stopped early: the tests both finished
    ours, ot = load_ours(ours_path, root, common)
    theirs, tt = load_torch(torch_path, root, common)
    lines = [f"(the {len(common)} tests both reports have)", f"{'':14}{'dynamo_lite':>12}{'torch.compile':>15}"]
    for key in ("tests", "passed", "failed", "breaks", "of which fallbacks", "recompiles", "cache_limits"):
        lines.append(f"{key:14}{ot[key]:>12}{tt[key]:>15}")
    lines.append(f"{'break places':14}{len(ours):>12}{len(theirs):>15}")
    rowsd = []
    for place in set(ours) | set(theirs):
        rowsd.append((sum(ours[place].values()), sum(theirs[place].values()), place))
    rowsd.sort(key=lambda r: (-(r[0] - r[1]), r[2]))
    lines.append("")
    lines.append(f"places where dynamo_lite breaks more than torch.compile (top {rows}):")
    lines.append(f"{'ours':>6} {'torch':>6}  place / what (ours | torch)")
    for o, t, place in [r for r in rowsd if r[0] > r[1]][:rows]:
        lines.append(f"{o:>6} {t:>6}  {place}")
        for what, n in ours[place].most_common(2):
            lines.append(f"{'':15}ours  {n:>5} {what}")
        for what, n in theirs[place].most_common(1):
            lines.append(f"{'':15}torch {n:>5} {what}")
    fewer = [r for r in rowsd if r[1] > r[0]]
    lines.append("")
    lines.append(f"places where torch.compile breaks more ({len(fewer)}):")
    for o, t, place in sorted(fewer, key=lambda r: r[0] - r[1])[:rows]:
        lines.append(f"{o:>6} {t:>6}  {place}")
        for what, n in theirs[place].most_common(1):
            lines.append(f"{'':15}torch {n:>5} {what}")
    return "\n".join(lines)


def _run(cmd, cwd, env):
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    tail = "\n".join(proc.stdout.splitlines()[-3:])
    return time.perf_counter() - start, proc.returncode, tail


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rootdir", default=os.getcwd(), help="the tested project (pytest runs there)")
    parser.add_argument("--out", default="/tmp/suite_breaks", help="prefix of the two JSON reports")
    parser.add_argument("--rows", type=int, default=25)
    parser.add_argument("--compare", nargs=2, metavar=("OURS", "TORCH"), help="only compare two existing reports")
    parser.add_argument("--only", choices=("dl", "tc"), help="run one side only")
    parser.add_argument("pytest_args", nargs="*")
    args = parser.parse_args(argv)
    if args.compare:
        print(compare(*args.compare, args.rootdir, args.rows))
        return 0
    ours, theirs = args.out + ".dl.json", args.out + ".tc.json"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_CHECKOUT, _HERE, env.get("PYTHONPATH")) if p)
    base = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args.pytest_args]
    if args.only != "tc":
        secs, rc, tail = _run(base + ["--dl", f"--dl-report=json:{ours}"], args.rootdir, env)
        print(f"dynamo_lite (--dl): {secs:.0f} s, exit {rc}: {tail}")
    if args.only != "dl":
        secs, rc, tail = _run(base + ["-p", "no:dynamo_lite", "-p", "suite_breaks", "--tc",
                                      f"--tc-report={theirs}"], args.rootdir, env)
        print(f"torch.compile (--tc): {secs:.0f} s, exit {rc}: {tail}")
    if args.only is None:
        print(compare(ours, theirs, args.rootdir, args.rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
