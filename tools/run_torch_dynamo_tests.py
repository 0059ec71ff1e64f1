"""Run PyTorch's own TorchDynamo test files against dynamo_lite and sort the failures.

PyTorch's ``test/dynamo/test_*.py`` files compile small functions with
``torch.compile(backend=cnt)``, ``torch._dynamo.optimize(cnt)``,
``torch._dynamo.optimize_assert(cnt)`` or ``torch._dynamo.testing.standard_test`` and compare
the results with eager, plus Dynamo's own counts.  This runner (outside the package: it may
import ``torch._dynamo``, dynamo_lite may not) redirects those entry points to dynamo_lite
with the same backend callable, runs the file under pytest in this process, and puts every
failing test in one class:

    a  wrong result, or a different exception than eager          a bug of ours
    b  crash / internal error / hang inside dynamo_lite            a bug of ours
    c  only a Dynamo-specific fact differs (frame_count, op_count, counters, golden graphs,
       Dynamo internals or config, Dynamo's exception classes)     not a bug of ours
    d  dynamo_lite refused (fullgraph=True / optimize_assert raised Unsupported): slow, not wrong
    r  the test fails under real torch.compile too (the file is older/newer than torch 2.13)

The sorting is a heuristic (it reads the failing assertion's line and the traceback); the
(a)/(b) lists are meant to be read by a person.  ``--ref`` runs the same file under real
TorchDynamo (no redirection) to find class r.

    python tools/run_torch_dynamo_tests.py /work/scratch/pttests/test_functions.py
    python tools/run_torch_dynamo_tests.py FILE -k dict --show a,b      # details of a and b
    python tools/run_torch_dynamo_tests.py FILE --ref                    # under TorchDynamo
    python tools/run_torch_dynamo_tests.py FILE --json out.json --baseline ref.json

By default ``backend="inductor"`` (and torch.compile's default) is mapped to "eager" on both
sides (``--keep-inductor`` keeps it): the frontend is what is measured, and inductor compiles
are slow on a shared machine.  Docs: docs/testing.md, "PyTorch's own compiler tests".
"""
from __future__ import annotations

import argparse
import json
import linecache
import os
import signal
import sys
import time
import traceback

import pytest

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, _ROOT)  # this checkout's dynamo_lite, not another installed one
_COUNT_WORDS = ("frame_count", "op_count", "counters", "assertExpectedInline", "graphs", "CompileCounter",
                "cnt.", "cnts.", "counter.", "normalize_gm", "print_readable", "recompile", "guard_failures",
                "error_on_recompile", "_dynamo.config", "_dynamo.utils", "expected_ops")
_LITE_DIR = os.path.join(_ROOT, "dynamo_lite")


def _backend(backend, keep_inductor):
    if backend is None or (backend == "inductor" and not keep_inductor):
        return "eager"
    return backend


def add_compat_shims() -> None:
    """Names older (or newer) test files import that torch 2.13's test utilities lack (no-ops)."""
    import torch.testing._internal.common_utils as common_utils

    import torch._dynamo.utils as dynamo_utils

    for name in ("disable_translation_validation_if_dynamic_shapes",):
        if not hasattr(common_utils, name):
            setattr(common_utils, name, lambda fn: fn)
    if not hasattr(common_utils, "HardwareClassification"):  # newer files: a class attribute only
        import enum

        common_utils.HardwareClassification = enum.Enum("HardwareClassification", "GENERIC")
    if not hasattr(dynamo_utils, "ifdyn"):  # ifdyn(dynamic_count, static_count)
        dynamo_utils.ifdyn = lambda dynamic_count, static_count: static_count


def redirect_to_dynamo_lite(keep_inductor: bool = False, lenient: bool = False) -> None:
    """Point torch.compile / torch._dynamo.optimize* / reset / disable / graph_break at dynamo_lite.

    ``lenient``: fullgraph=True / nopython=True / optimize_assert compile with graph breaks
    allowed (the second pass over class d: are the results equal when we break?)."""
    import torch
    import torch._dynamo
    import torch._dynamo.exc
    import torch._dynamo.test_case
    import torch._dynamo.testing

    import dynamo_lite
    import dynamo_lite.exc

    def compile(model=None, *, fullgraph=False, dynamic=None, backend="inductor", mode=None, options=None,
                disable=False):
        if disable:
            return model if model is not None else (lambda m: m)
        return dynamo_lite.compile(model, backend=_backend(backend, keep_inductor),
                                   fullgraph=fullgraph and not lenient, dynamic=dynamic)

    def optimize(backend="inductor", *, nopython=False, dynamic=None, disable=False, **_ignored):
        if disable:
            return dynamo_lite.disable()
        return dynamo_lite.optimize(_backend(backend, keep_inductor), fullgraph=nopython and not lenient,
                                    dynamic=dynamic)

    def optimize_assert(backend, *, dynamic=None, **_ignored):
        return dynamo_lite.optimize(_backend(backend, keep_inductor), fullgraph=not lenient, dynamic=dynamic)

    def disable(fn=None, recursive=True, *, reason=None, wrapping=True):
        return dynamo_lite.disable(fn, recursive=recursive)

    torch.compile = compile
    for mod in (torch._dynamo, torch._dynamo.testing, torch._dynamo.test_case):
        for name, value in (("optimize", optimize), ("optimize_assert", optimize_assert),
                            ("reset", dynamo_lite.reset)):
            if hasattr(mod, name):
                setattr(mod, name, value)
    torch._dynamo.disable = disable
    torch._dynamo.graph_break = dynamo_lite.graph_break
    torch._dynamo.exc.Unsupported = dynamo_lite.exc.Unsupported
    torch._dynamo.exc.BackendCompilerFailed = dynamo_lite.exc.BackendCompilerFailed


class _Collector:
    """pytest plugin: one record per test (outcome, class, reason), with a per-test alarm."""

    def __init__(self, timeout: int) -> None:
        self.timeout = timeout
        self.records: dict[str, dict] = {}

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item):
        def on_alarm(signum, frame):
            raise TimeoutError(f"test did not finish in {self.timeout}s")
        old = signal.signal(signal.SIGALRM, on_alarm)
        signal.alarm(self.timeout)
        try:
            yield
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, old)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        report = outcome.get_result()
        name = item.nodeid.split("::", 1)[-1]
        if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
            if report.skipped and hasattr(report, "wasxfail") and call.excinfo is not None:
                # a unittest.expectedFailure of TorchDynamo's that fails here too: eager passed its
                # first (uncompiled) run in make_dynamo_test-style tests, so the reason is kept
                cls, reason = classify(call.excinfo, str(item.fspath))
                self.records[name] = {"outcome": "xfailed", "cls": cls, "reason": reason}
            elif report.skipped:
                self.records[name] = {"outcome": "skipped", "cls": "", "reason": ""}
            elif report.passed:
                self.records[name] = {"outcome": "passed", "cls": "", "reason": ""}
            else:
                cls, reason = classify(call.excinfo, str(item.fspath))
                self.records[name] = {"outcome": "failed", "cls": cls, "reason": reason,
                                      "text": str(report.longrepr)[-6000:]}


def _frames(tb):
    return [(f.filename, f.lineno, f.name) for f in traceback.extract_tb(tb)]


def classify(excinfo, test_file: str) -> tuple[str, str]:
    """(class, one-line reason) of one failure; see the module docstring."""
    import dynamo_lite.exc

    exc = excinfo.value
    frames = _frames(excinfo.tb)
    kind = type(exc).__name__
    message = str(exc).splitlines()[0][:200] if str(exc) else ""
    if "Unexpected success" in message:  # a unittest.expectedFailure of TorchDynamo's passes here
        return "c", "passes where TorchDynamo is expected to fail"
    if isinstance(exc, TimeoutError):
        return "b", f"hang: {message}"
    if isinstance(exc, dynamo_lite.exc.InternalError):
        return "b", f"{kind}: {message}"
    if isinstance(exc, dynamo_lite.exc.Unsupported):
        return "d", f"{kind}: {message}"
    # the deepest line of the test file (or of torch._dynamo.testing) that failed
    own = [f for f in frames if f[0] == test_file or f[0].endswith(os.path.join("_dynamo", "testing.py"))]
    line = linecache.getline(own[-1][0], own[-1][1]).strip() if own else ""
    where = f"{os.path.basename(own[-1][0])}:{own[-1][1]}" if own else "?"
    inside_lite = any(f[0].startswith(_LITE_DIR) for f in frames)
    raised_in_dynamo = frames and os.sep + "_dynamo" + os.sep in frames[-1][0]
    if isinstance(exc, AssertionError):
        import torch._dynamo.exc

        expected = message.split(" not raised")[0] if message.endswith(" not raised") else ""
        if expected and isinstance(getattr(torch._dynamo.exc, expected, None), type):
            # TorchDynamo raises its own error where it cannot trace; eager raises nothing
            return "c", f"expects Dynamo's {expected}: {where}: {line}"
        if any(w in line for w in _COUNT_WORDS):
            return "c", f"{where}: {line}"
        return "a", f"{where}: {line} -- {message}"
    if raised_in_dynamo or "torch._dynamo" in message or "_dynamo" in kind:
        return "c", f"Dynamo internals: {kind}: {message} ({where}: {line})"
    if inside_lite:
        return "b", f"{kind} inside dynamo_lite: {message} ({where}: {line})"
    return "a", f"{kind}: {message} ({where}: {line})"


def run_file(path: str, keyword: str | None, timeout: int) -> dict[str, dict]:
    collector = _Collector(timeout)
    args = [path, "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "--no-header", "-rN",
            "--tb=short", "-W", "ignore::DeprecationWarning"]
    if keyword:
        args += ["-k", keyword]
    pytest.main(args, plugins=[collector])
    return collector.records


def _rerun_lenient(args, refused: list[str], records: dict[str, dict]) -> None:
    """Run the tests dynamo_lite refused under fullgraph again with breaks allowed (a subprocess)."""
    import subprocess
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        keyword = " or ".join(sorted({name.rsplit("::", 1)[-1] for name in refused}))
        cmd = [sys.executable, os.path.abspath(__file__), *args.files, "--lenient", "-k", keyword,
               "--json", out.name, "--show", "", "--timeout", str(args.timeout)]
        if args.keep_inductor:
            cmd.append("--keep-inductor")
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        lenient = json.load(open(out.name)) if os.path.getsize(out.name) else {}
    for name in refused:
        again = lenient.get(name)
        if again is None:
            continue
        if again["outcome"] == "passed":
            records[name]["reason"] += " (equal to eager with breaks allowed)"
        elif again["outcome"] == "failed":
            again["reason"] = f"with breaks allowed: {again['reason']}"
            records[name] = again


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+")
    parser.add_argument("-k", dest="keyword")
    parser.add_argument("--ref", action="store_true", help="run under real TorchDynamo (no redirection)")
    parser.add_argument("--keep-inductor", action="store_true")
    parser.add_argument("--lenient", action="store_true",
                        help="allow graph breaks under fullgraph=True (run by itself for the class-d tests)")
    parser.add_argument("--timeout", type=int, default=120, help="seconds per test")
    parser.add_argument("--json", help="write the records here")
    parser.add_argument("--baseline", help="records of a --ref run: its failures become class r")
    parser.add_argument("--show", default="a,b",
                        help="classes whose reasons are printed (a,b,c,d,r; x: TorchDynamo's expected failures)")
    args = parser.parse_args(argv)

    add_compat_shims()
    if args.ref:
        import torch
        import torch._dynamo
        if not args.keep_inductor:
            real_compile = torch.compile

            def compile(model=None, *, backend="inductor", **kw):
                return real_compile(model, backend=_backend(backend, False), **kw)
            torch.compile = compile
    else:
        redirect_to_dynamo_lite(args.keep_inductor, args.lenient)
    baseline = json.load(open(args.baseline)) if args.baseline else {}
    records: dict[str, dict] = {}
    start = time.time()
    for path in args.files:
        sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
        records.update(run_file(os.path.abspath(path), args.keyword, args.timeout))
    refused = [name for name, rec in records.items() if rec["outcome"] == "failed" and rec["cls"] == "d"]
    if refused and not args.ref and not args.lenient:
        _rerun_lenient(args, refused, records)
    for name, rec in records.items():
        if rec["outcome"] == "failed" and baseline.get(name, {}).get("outcome") == "failed":
            rec["cls"], rec["reason"] = "r", "fails under torch.compile too: " + rec["reason"]
    counts: dict[str, int] = {}
    for rec in records.values():
        key = rec["outcome"] if rec["outcome"] != "failed" else f"failed-{rec['cls']}"
        counts[key] = counts.get(key, 0) + 1
    show = set(args.show.split(","))
    for name, rec in sorted(records.items()):
        if rec["outcome"] == "failed" and rec["cls"] in show:
            print(f"[{rec['cls']}] {name}: {rec['reason']}")
        elif rec["outcome"] == "xfailed" and "x" in show:
            print(f"[xfail {rec['cls']}] {name}: {rec['reason']}")
    print(f"\n{len(records)} tests in {time.time() - start:.0f}s:",
          ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(records, f, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
