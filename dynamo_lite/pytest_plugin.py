"""The dynamo_lite pytest plugin: graph breaks and recompiles of a test suite, per test.

Loaded through the ``pytest11`` entry point (disable with ``-p no:dynamo_lite``).

Inert unless used: the plugin registers its options, markers and fixtures and
listens for events (report/events.py), and imports neither torch nor the
compiler until ``--dl`` is given, a dl fixture is used, or a test compiles
something itself (tests/api/test_pytest_plugin_inert.py runs pytest in a project
that never uses dynamo_lite and checks that torch is not imported).

Always on (cheap: nothing happens until dynamo_lite compiles something):
- records the structured events of code compiled inside each test (setup,
  call, teardown) into a ``CompileRecord``;
- resets dynamo_lite's caches before each test, once anything compiled, so
  each test's record is its own;
- markers ``@pytest.mark.fullgraph`` (any graph break or eager fallback fails
  the test, with the break message), ``@pytest.mark.max_graph_breaks(n)``,
  ``@pytest.mark.max_recompiles(n)``;
- fixtures ``graph_breaks`` (the live CompileRecord of the test, with
  ``.assert_none()``) and ``compile_counter`` (a ``dynamo_lite.testing.CompileCounter``);
- JUnit XML properties ``dl_graphs``, ``dl_graph_breaks``, ``dl_recompiles``,
  ``dl_break_ids`` for tests that compiled something;
- terminal summary section "dynamo_lite graph breaks" when anything compiled: breaks
  grouped by (id, location in the user's code), the top 20 on one line each,
  with whose they are (report/summary.py); ``-v`` adds a line per test, ``-vv``
  every break of every test, ``-qq`` keeps only the totals.

Options:
    --dl                      run every test body under dynamo_lite.optimize(backend)
    --dl-backend=NAME         backend for --dl (default: eager)
    --dl-as-torch-compile     torch.compile(...) calls of the tested code compile with
                              dynamo_lite for the run (dynamo_lite.use_as_torch_compile)
    --dl-report=FORMAT:PATH   write a report: json (schema-versioned, written as tests
                              finish, so a killed run leaves the results so far), html
                              or md; may be given once per format
    --dl-baseline=PATH        fail the run when a test has more graph breaks or
                              recompiles than PATH records
    --dl-update-baseline      (with --dl-baseline) rewrite PATH from this run

"Graph breaks" in markers, baseline and JUnit counts = graph breaks (the
rest of the frame resumed) + eager fallbacks (the whole frame ran eagerly),
as ``explain().graph_break_count`` counts them.
Per-frame capture times: with ``--dl`` or ``--dl-report``, the time each frame capture took
(process CPU and wall seconds of ``FrameConverter._compile``: tracing, code generation,
guards and the backend) is recorded per test (``"captures"`` in the JSON report, with count,
median and p90 in ``totals``), for bench/suite_ratio.py.

PYTEST_DONT_REWRITE: pytest marks for assertion rewriting every top-level package of a
distribution that registers a ``pytest11`` plugin (``_pytest/config``:
``_mark_plugins_for_rewrite``), so it would parse, rewrite and recompile each of
dynamo_lite's modules (about 1.3 MB of source) on import, with no bytecode cache to spare
it when bytecode is not written (``PYTHONDONTWRITEBYTECODE``, read-only installs) or after
an edit.  Our asserts are internal invariants, not tests: the plugin takes the package off
pytest's list before it imports anything else of dynamo_lite (``_leave_our_modules_alone``),
and this docstring keeps pytest from rewriting this module itself.  Only the package's
``__init__`` and ``config`` (imported before this module) pass through pytest's importer.
Tested by tests/api/test_pytest_plugin.py, tests/api/test_pytest_plugin_report.py and
tests/api/test_pytest_plugin_inert.py (start-up: docs/testing.md).
"""
from __future__ import annotations

import dataclasses
import json
import os
import platform
import sys
import time
from typing import Optional

import _pytest as _pytest_pkg
import pluggy
import pytest


def _leave_our_modules_alone(rewrite_hook) -> None:
    """Take dynamo_lite off the names pytest's assertion-rewriting importer claims.

    pytest has no public call for this: the marks are ``AssertionRewritingHook._must_rewrite``
    (a set of module and package names) and a cache of answers.  Anything else (another
    pytest, ``--assert=plain``'s dummy hook) is left as it is: our modules are then rewritten,
    which is slower and nothing worse."""
    marked = getattr(rewrite_hook, "_must_rewrite", None)
    if not isinstance(marked, set):
        return
    ours = {name for name in marked if name == __package__ or name.startswith(__package__ + ".")}
    if ours:
        marked.difference_update(ours)
        cache = getattr(rewrite_hook, "_marked_for_rewrite_cache", None)
        if isinstance(cache, dict):
            cache.clear()


# pytest imports this module with its rewriting importer first on sys.meta_path: unmark our
# package there before the imports below (pytest_addoption does it again for the hook of each
# config, e.g. a pytester run inside this process)
for _finder in list(sys.meta_path):
    _leave_our_modules_alone(_finder)
del _finder

from .graph_breaks import INTERNAL_ERROR  # noqa: E402 (after the unmarking above)
from .report import events  # noqa: E402
from .report.summary import (  # noqa: E402
    BreakSite, attribution_line, group_sites, render_html, render_markdown, table_lines)

REPORT_SCHEMA = "dynamo_lite.pytest_report"
REPORT_SCHEMA_VERSION = 2
BASELINE_SCHEMA = "dynamo_lite.pytest_baseline"
SCHEMA_VERSION = 1  # of the baseline
_MAX_ROWS = 20  # groups shown in the terminal summary
_MAX_LINES = 30  # lines of the terminal summary (without the baseline's)
_MAX_INTERNAL_ERRORS = 10  # internal errors listed under the summary's header
_REPORT_FORMATS = {"json": "json", "html": "html", "md": "md", "markdown": "md"}


class CompileRecord:
    """Everything dynamo_lite reported during one test, in order (a live view: it grows as events arrive).

    ``events`` holds the raw events; the properties filter them by kind.  GraphEvents are kept
    without their GraphModule (``graph`` is None) so recording never keeps user models alive.
    """

    __slots__ = ("nodeid", "events", "outcome", "captures")

    def __init__(self, nodeid: str):
        self.nodeid = nodeid  # pytest node id, or "<outside tests>"
        self.events: list = []  # every event, in emission order
        self.outcome = ""  # pytest's: passed, failed, skipped, xfailed, xpassed, error ("" until known)
        self.captures: list = []  # FrameCapture per frame capture (with --dl or --dl-report), in order

    @property
    def graph_breaks(self) -> list:
        """GraphBreakEvents (the frame resumed after the break)."""
        return [e for e in self.events if isinstance(e, events.GraphBreakEvent)]

    @property
    def fallbacks(self) -> list:
        """FallbackEvents (a whole frame ran eagerly)."""
        return [e for e in self.events if isinstance(e, events.FallbackEvent)]

    @property
    def breaks(self) -> list:
        """Graph breaks and fallbacks, in order: what markers and the baseline count."""
        return [e for e in self.events if isinstance(e, (events.GraphBreakEvent, events.FallbackEvent))]

    @property
    def graphs(self) -> list:
        return [e for e in self.events if isinstance(e, events.GraphEvent)]

    @property
    def compiling_queries(self) -> list:
        """Where this test's captured code asked torch.compiler.is_compiling() (told True)."""
        return list(dict.fromkeys(q for e in self.graphs for q in getattr(e, "compiling_queries", ())))

    @property
    def recompiles(self) -> list:
        return [e for e in self.events if isinstance(e, events.RecompileEvent)]

    @property
    def cache_limits(self) -> list:
        return [e for e in self.events if isinstance(e, events.CacheLimitEvent)]

    @property
    def frames(self) -> int:
        """Frame compilations that reported something (distinct compile ids)."""
        return len({e.compile_id for e in self.events if getattr(e, "compile_id", None)})

    @property
    def break_ids(self) -> list:
        return [e.break_id for e in self.breaks]

    def counts(self) -> dict:
        return {"frames": self.frames, "graphs": len(self.graphs), "graph_breaks": len(self.graph_breaks),
                "fallbacks": len(self.fallbacks), "recompiles": len(self.recompiles),
                "cache_limits": len(self.cache_limits)}

    def __len__(self) -> int:
        return len(self.breaks)

    def __iter__(self):
        return iter(self.breaks)

    def clear(self) -> None:
        self.events.clear()
        self.captures.clear()

    def assert_none(self) -> None:
        """Fail (AssertionError) with every break's message when there was any graph break or fallback."""
        __tracebackhide__ = True
        if self.breaks:
            raise AssertionError(format_breaks(self.breaks, f"expected no graph breaks, got {len(self.breaks)}"))

    def __repr__(self) -> str:
        c = self.counts()
        return (f"<CompileRecord {self.nodeid}: {c['graphs']} graphs, {len(self)} breaks, "
                f"{c['recompiles']} recompiles>")


@dataclasses.dataclass
class FrameCapture:
    """One frame capture: how long dynamo_lite took to turn a frame into compiled code (or to
    decide it runs eagerly), in process CPU seconds and wall seconds."""

    compile_id: str
    frame: str
    cpu_seconds: float
    wall_seconds: float

    def to_dict(self) -> dict:
        return {"compile_id": self.compile_id, "frame": self.frame,
                "cpu_seconds": round(self.cpu_seconds, 6), "wall_seconds": round(self.wall_seconds, 6)}


class _CaptureTimer:
    """Times ``FrameConverter._compile`` (one frame's capture: tracing, code generation, guards,
    the backend) and hands each time to the running test's record.

    Installed once per process, when a run wants the times (``--dl`` or ``--dl-report``) and
    the compiler is imported (it imports torch: never earlier): with ``--dl`` before the first
    test; without, at the start of a test once the compiler is imported, or at the first event
    (so the capture that made it is not timed).  It stays for the process (two clock reads per
    capture).  Nested captures (a frame captured while another is) count in the
    outer one only."""

    installed = False
    depth = 0

    @classmethod
    def install(cls) -> None:
        if cls.installed:
            return
        converter = getattr(sys.modules.get(__package__ + ".convert_frame"), "FrameConverter", None)
        compile_frame = getattr(converter, "_compile", None)
        if compile_frame is None:
            return  # not imported yet, or renamed: no times (the rest of the report is unaffected)
        cls.installed = True

        def timed_compile(self, code, f_locals, func, compile_id):
            if cls.depth or not _ACTIVE:
                return compile_frame(self, code, f_locals, func, compile_id)
            cls.depth += 1
            cpu, wall = time.process_time(), time.perf_counter()
            try:
                return compile_frame(self, code, f_locals, func, compile_id)
            finally:
                cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
                cls.depth -= 1
                if _ACTIVE:
                    _ACTIVE[-1].add_capture(FrameCapture(str(compile_id), getattr(code, "co_qualname", code.co_name),
                                                         cpu, wall))

        timed_compile.__wrapped__ = compile_frame  # type: ignore[attr-defined]
        converter._compile = timed_compile


def _quantile(values: list, q: float) -> float:
    """The q-quantile of values (linear between the two nearest ranks); 0.0 for none."""
    if not values:
        return 0.0
    xs = sorted(values)
    pos = (len(xs) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def capture_stats(captures: list) -> dict:
    """count, total, median and p90 of frame captures (FrameCapture), in CPU and wall milliseconds."""
    cpu = [c.cpu_seconds * 1e3 for c in captures]
    wall = [c.wall_seconds * 1e3 for c in captures]
    return {"count": len(captures),
            "cpu_ms_total": round(sum(cpu), 3), "cpu_ms_median": round(_quantile(cpu, 0.5), 3),
            "cpu_ms_p90": round(_quantile(cpu, 0.9), 3),
            "wall_ms_total": round(sum(wall), 3), "wall_ms_median": round(_quantile(wall, 0.5), 3),
            "wall_ms_p90": round(_quantile(wall, 0.9), 3)}


def format_break(ev) -> str:
    """One break as the user should read it: id, title, whose it is, the user's stack, a hint that applies."""
    return "\n".join(BreakSite.of(ev).lines())


def format_breaks(breaks: list, headline: str) -> str:
    return headline + "\n" + "\n".join(format_break(e) for e in breaks)


# ---------------------------------------------------------------------------
# Per-run state.  One _RunState per pytest config; events go to the innermost
# active run (pytester runs pytest inside pytest).
class _RunState:
    def __init__(self, config):
        self.config = config
        self.dl: bool = config.getoption("dl")
        self.backend: str = config.getoption("dl_backend")
        self.records: dict[str, CompileRecord] = {}  # nodeid -> record, for tests that got events
        self.ran: list[str] = []  # nodeids of tests that ran, in order
        self.outcomes: dict[str, str] = {}  # nodeid -> pytest's outcome (_outcome), for every test
        self.current: Optional[str] = None  # nodeid of the running test
        self.outside = CompileRecord("<outside tests>")
        self.regressions: list[str] = []  # baseline failures (text)
        self.reports: dict[str, str] = {}  # format ("json", "html", "md") -> absolute path
        self.json_writer: Optional[_JsonReportWriter] = None
        self.baseline_path: Optional[str] = config.getoption("dl_baseline")
        self.update_baseline: bool = config.getoption("dl_update_baseline")
        self.baseline: dict = {}
        self.root = str(config.rootpath)
        self._sites: dict[int, BreakSite] = {}  # id(event) -> its BreakSite (events live in records)
        self.torch_compile_switch = None  # the use_as_torch_compile of --dl-as-torch-compile, to undo at the end
        # the persistent cache's counts before this run (a process running pytest more than once)
        cached = sys.modules.get("dynamo_lite.persistent_cache")
        self.cache_stats_before: Optional[dict] = cached.stats() if cached is not None else None

    def __call__(self, event) -> None:
        if not _CaptureTimer.installed and self.wants_capture_times():
            _CaptureTimer.install()  # the compiler is imported now (a test compiled something itself)
        if isinstance(event, events.GraphEvent) and event.graph is not None:
            # Keep the facts, not the GraphModule: it holds the user's modules and parameters,
            # which must be freed when the test (or dynamo_lite.reset()) lets go of them.
            event = dataclasses.replace(event, graph=None)
        if self.current is None:
            self.outside.events.append(event)
        else:
            self.record(self.current).events.append(event)

    def add_capture(self, capture: FrameCapture) -> None:
        (self.outside if self.current is None else self.record(self.current)).captures.append(capture)

    def wants_capture_times(self) -> bool:
        return self.dl or bool(self.reports)

    def record(self, nodeid: str) -> CompileRecord:
        rec = self.records.get(nodeid)
        if rec is None:
            rec = self.records[nodeid] = CompileRecord(nodeid)
        return rec

    def all_records(self) -> list:
        recs = list(self.records.values())
        if self.outside.events or self.outside.captures:
            recs.append(self.outside)
        return recs

    def site(self, ev) -> BreakSite:
        """The BreakSite of a break event of this run (computed once)."""
        site = self._sites.get(id(ev))
        if site is None:
            site = self._sites[id(ev)] = BreakSite.of(ev, self.root)
        return site

    def groups(self) -> list:
        return group_sites((rec.nodeid, self.site(ev)) for rec in self.all_records() for ev in rec.breaks)


_ACTIVE: list[_RunState] = []
_STATE_KEY = pytest.StashKey[_RunState]()


def _dispatch(event) -> None:
    if _ACTIVE:
        _ACTIVE[-1](event)


def _state(config) -> Optional[_RunState]:
    return config.stash.get(_STATE_KEY, None)


# ---------------------------------------------------------------------------
# Hooks
def pytest_addoption(parser, pluginmanager):
    _leave_our_modules_alone(getattr(pluginmanager, "rewrite_hook", None))
    group = parser.getgroup("dynamo_lite", "dynamo_lite graph breaks and recompiles")
    group.addoption("--dl", action="store_true", default=False,
                    help="run every test body under dynamo_lite.optimize(backend) and report graph breaks")
    group.addoption("--dl-backend", default="eager", metavar="NAME",
                    help="backend used by --dl (default: eager)")
    group.addoption("--dl-as-torch-compile", action="store_true", default=False,
                    help="torch.compile / torch.compiler.disable calls of the tested code go to dynamo_lite "
                         "(dynamo_lite.use_as_torch_compile) for the whole run")
    group.addoption("--dl-report", action="append", default=[], metavar="FORMAT:PATH",
                    help="write a report of graphs, graph breaks and recompiles per test: json:PATH (written as "
                         "tests finish), html:PATH or md:PATH; once per format")
    group.addoption("--dl-baseline", default=None, metavar="PATH",
                    help="fail when a test has more graph breaks or recompiles than this baseline file records")
    group.addoption("--dl-update-baseline", action="store_true", default=False,
                    help="rewrite the --dl-baseline file from this run")


def pytest_configure(config):
    config.addinivalue_line("markers", "fullgraph: fail the test on any dynamo_lite graph break or fallback")
    config.addinivalue_line("markers", "max_graph_breaks(n): fail the test on more than n dynamo_lite graph breaks")
    config.addinivalue_line("markers", "max_recompiles(n): fail the test on more than n dynamo_lite recompiles")
    state = _RunState(config)
    for report in config.getoption("dl_report") or []:
        fmt, sep, path = report.partition(":")
        if not sep:
            fmt, path = os.path.splitext(report)[1].lstrip("."), report
        fmt = _REPORT_FORMATS.get(fmt.lower(), "")
        if not fmt or not path:
            raise pytest.UsageError(f"--dl-report expects json:PATH, html:PATH or md:PATH, got {report!r}")
        state.reports[fmt] = os.path.abspath(path)
    if state.dl:
        from .backends import lookup_backend  # lazy: the plugin imports torch only once --dl or a dl fixture is used

        try:
            lookup_backend(state.backend)
        except (ValueError, TypeError) as e:
            raise pytest.UsageError(f"--dl-backend: {e}") from None
    if state.update_baseline and not state.baseline_path:
        raise pytest.UsageError("--dl-update-baseline needs --dl-baseline=PATH")
    if state.baseline_path:
        state.baseline_path = os.path.abspath(state.baseline_path)
        if os.path.exists(state.baseline_path):
            state.baseline = _read_baseline(state.baseline_path)
        elif not state.update_baseline:
            raise pytest.UsageError(f"--dl-baseline: {state.baseline_path} does not exist "
                                    "(create it with --dl-update-baseline)")
    if config.getoption("dl_as_torch_compile"):
        from .torch_compile_switch import use_as_torch_compile  # lazy: imports torch

        state.torch_compile_switch = use_as_torch_compile(True)
    config.stash[_STATE_KEY] = state
    if not _ACTIVE:
        events.add_sink(_dispatch)
    _ACTIVE.append(state)


def pytest_unconfigure(config):
    state = _state(config)
    if state is not None and state.torch_compile_switch is not None:
        state.torch_compile_switch.__exit__(None, None, None)  # torch's functions back (as before the run)
        state.torch_compile_switch = None
    if state is not None and state in _ACTIVE:
        _ACTIVE.remove(state)
        if not _ACTIVE:
            events.remove_sink(_dispatch)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    state = _state(item.config)
    if state is None:
        return (yield)
    api = sys.modules.get(__package__ + ".api")
    if api is not None:  # something compiled already (nothing did if the API was never imported)
        api.reset()
        if state.wants_capture_times():
            _CaptureTimer.install()
    state.current = item.nodeid
    state.ran.append(item.nodeid)
    try:
        return (yield)
    finally:
        state.current = None
        if state.json_writer is not None and (state.dl or item.nodeid in state.records):
            state.json_writer.add(_test_entry(state, item.nodeid))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    state = _state(item.config)
    if state is None:
        return (yield)
    try:
        if state.dl:
            from .api import _mark_target, optimize  # lazy: the plugin imports torch only once --dl or a dl fixture is used

            _mark_target(getattr(item, "obj", None))  # the test body is what --dl compiles
            _CaptureTimer.install()
            with optimize(state.backend):
                result = yield
        else:
            result = yield
    finally:
        rec = state.records.get(item.nodeid)
        if rec is not None or state.dl:
            _add_properties(item, rec)
    if rec is not None:  # the test body passed: now the markers may fail it
        _check_markers(item, rec)
    return result


def _add_properties(item, rec: Optional[CompileRecord]) -> None:
    if rec is None:
        rec = CompileRecord(item.nodeid)
    item.user_properties.extend([
        ("dl_graphs", len(rec.graphs)), ("dl_graph_breaks", len(rec)),
        ("dl_recompiles", len(rec.recompiles)), ("dl_break_ids", ",".join(rec.break_ids)),
    ])


def _check_markers(item, rec: CompileRecord) -> None:
    problems = []
    if item.get_closest_marker("fullgraph") is not None and len(rec):
        problems.append(format_breaks(rec.breaks, f"@pytest.mark.fullgraph: {_plural(len(rec), 'graph break')}"))
    marker = item.get_closest_marker("max_graph_breaks")
    if marker is not None:
        limit = _marker_int(marker)
        if len(rec) > limit:
            problems.append(format_breaks(rec.breaks, f"@pytest.mark.max_graph_breaks({limit}): "
                                                      f"{_plural(len(rec), 'graph break')}"))
    marker = item.get_closest_marker("max_recompiles")
    if marker is not None:
        limit = _marker_int(marker)
        if len(rec.recompiles) > limit:
            lines = [f"@pytest.mark.max_recompiles({limit}): {_plural(len(rec.recompiles), 'recompile')}"]
            lines += [f"  [{r.compile_id}] {r.frame} ({r.filename}:{r.lineno}): {r.reasons[0] if r.reasons else '?'}"
                      for r in rec.recompiles]
            problems.append("\n".join(lines))
    if problems:
        pytest.fail("\n\n".join(problems), pytrace=False)


def _marker_int(marker) -> int:
    value = marker.args[0] if marker.args else marker.kwargs.get("n")
    if not isinstance(value, int) or isinstance(value, bool):
        raise pytest.UsageError(f"@pytest.mark.{marker.name} expects an int, got {value!r}")
    return value


def _outcome(report) -> str:
    """pytest's word for a test's report: passed, failed, skipped, xfailed, xpassed, or error
    (a setup or teardown that failed)."""
    if hasattr(report, "wasxfail"):
        return "xpassed" if report.outcome == "passed" else "xfailed"
    if report.when != "call" and report.outcome == "failed":
        return "error"
    return report.outcome


def pytest_runtest_logreport(report):
    for state in _ACTIVE[-1:]:
        known = state.outcomes.get(report.nodeid, "")
        if report.when == "call" or (report.outcome != "passed" and not known) or \
                (report.when == "teardown" and report.outcome == "failed"):
            state.outcomes[report.nodeid] = _outcome(report)
            rec = state.records.get(report.nodeid)
            if rec is not None:
                rec.outcome = state.outcomes[report.nodeid]


# ---------------------------------------------------------------------------
# Fixtures
@pytest.fixture
def graph_breaks(request) -> CompileRecord:
    """The live CompileRecord of this test: ``.breaks``, ``.graphs``, ``.recompiles``, ``.assert_none()``."""
    state = _state(request.config)
    if state is None:
        return CompileRecord(request.node.nodeid)
    return state.record(request.node.nodeid)


@pytest.fixture
def compile_counter():
    """A fresh ``dynamo_lite.testing.CompileCounter`` backend (``.frame_count``, ``.op_count``, ``.graphs``)."""
    from .testing import CompileCounter  # lazy: the plugin imports torch only once --dl or a dl fixture is used

    return CompileCounter()


# ---------------------------------------------------------------------------
# Baseline and JSON report
def _read_baseline(path: str) -> dict:
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise pytest.UsageError(f"--dl-baseline: cannot read {path}: {e}") from None
    if data.get("schema") != BASELINE_SCHEMA or data.get("schema_version") != SCHEMA_VERSION:
        raise pytest.UsageError(f"--dl-baseline: {path} is not a version-{SCHEMA_VERSION} {BASELINE_SCHEMA} file")
    return data.get("tests", {})


def _baseline_counts(rec: Optional[CompileRecord]) -> dict:
    if rec is None:
        return {"graph_breaks": 0, "recompiles": 0}
    return {"graph_breaks": len(rec), "recompiles": len(rec.recompiles)}


def _compare_baseline(state: _RunState) -> list[str]:
    problems = []
    for nodeid in state.ran:
        now = _baseline_counts(state.records.get(nodeid))
        before = state.baseline.get(nodeid, {})
        for key in ("graph_breaks", "recompiles"):
            allowed = before.get(key, 0)
            if now[key] > allowed:
                problems.append(f"{nodeid}: {now[key]} {key.replace('_', ' ')} > baseline {allowed}")
    return problems


def _write_baseline(state: _RunState) -> None:
    tests = dict(state.baseline)
    for nodeid in state.ran:
        counts = _baseline_counts(state.records.get(nodeid))
        if any(counts.values()):
            tests[nodeid] = counts
        else:
            tests.pop(nodeid, None)
    data = {"schema": BASELINE_SCHEMA, "schema_version": SCHEMA_VERSION,
            "tests": {k: tests[k] for k in sorted(tests)}}
    os.makedirs(os.path.dirname(state.baseline_path) or ".", exist_ok=True)
    with open(state.baseline_path, "w") as f:
        json.dump(data, f, indent=1, sort_keys=False)
        f.write("\n")


def _versions() -> dict:
    """Versions of what ran, read from the installed metadata (torch is not imported for this)."""
    from importlib import metadata

    def version(dist):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return None

    torch = sys.modules.get("torch")
    return {"dynamo_lite": version("dynamo-lite"),
            "torch": getattr(torch, "__version__", None) or version("torch"),
            "python": platform.python_version(), "pytest": pytest.__version__, "platform": sys.platform}


def _totals(state: _RunState) -> dict:
    recs = state.all_records()
    total = {"tests": len(state.ran), "tests_compiling": len(state.records)}
    per_record = [rec.counts() for rec in recs]
    for key in ("frames", "graphs", "graph_breaks", "fallbacks", "recompiles", "cache_limits"):
        total[key] = sum(c[key] for c in per_record)
    total["internal_errors"] = sum(len(_internal_errors(rec)) for rec in recs)
    if _CaptureTimer.installed:
        total["captures"] = capture_stats([c for rec in recs for c in rec.captures])
    return total


def _internal_errors(rec: CompileRecord) -> list:
    """The fallbacks of this record caused by a dynamo_lite bug (DL0026): the frame ran eagerly."""
    return [e for e in rec.fallbacks if e.break_id == INTERNAL_ERROR]


# A report stays readable on a big suite (torchmetrics: 27,548 breaks and 8,803 graphs in 376
# tests made 366 MB, mostly pytest's own frames under every break and thousands of guards per
# graph): the runner's frames are left out of each break's caller_stack, and a graph lists its
# first REPORT_MAX_GUARDS guards and how many it left out.
REPORT_MAX_GUARDS = 64
_RUNNER_DIRS = tuple(os.path.dirname(m.__file__) + os.sep for m in (pytest, _pytest_pkg, pluggy))


def _without_runner(frames: list) -> list:
    """``frames`` (outermost first) from the first frame after the last of pytest's or pluggy's:
    the test function and what it called."""
    last = -1
    for i, f in enumerate(frames):
        if f["filename"].startswith(_RUNNER_DIRS):
            last = i
    return frames[last + 1:]


def _break_entry(state: _RunState, ev) -> dict:
    """A break in the JSON report: the event, and where it is in the user's code (report/summary.py)."""
    d = ev.to_dict()
    d.update(state.site(ev).to_dict())
    if d.get("caller_stack"):
        d["caller_stack"] = _without_runner(d["caller_stack"])
    if d.get("user_code_stack"):
        d["user_code_stack"] = _without_runner(d["user_code_stack"])
    return d


def _graph_entry(ev) -> dict:
    d = ev.to_dict()
    guards = d.get("guards") or []
    if len(guards) > REPORT_MAX_GUARDS:
        d["guards"] = guards[:REPORT_MAX_GUARDS]
        d["guards_omitted"] = len(guards) - REPORT_MAX_GUARDS
    return d


def _test_entry(state: _RunState, nodeid: str) -> dict:
    rec = state.records.get(nodeid)
    if rec is None:
        rec = CompileRecord(nodeid)
    return {
        "nodeid": nodeid, "outcome": state.outcomes.get(nodeid, rec.outcome), "counts": rec.counts(),
        "graphs": [_graph_entry(e) for e in rec.graphs],
        "graph_breaks": [_break_entry(state, e) for e in rec.breaks],
        "recompiles": [e.to_dict() for e in rec.recompiles],
        "cache_limits": [e.to_dict() for e in rec.cache_limits],
        "compiling_queries": rec.compiling_queries,
        "captures": [c.to_dict() for c in rec.captures],
    }


def _report_header(state: _RunState) -> dict:
    return {"schema": REPORT_SCHEMA, "schema_version": REPORT_SCHEMA_VERSION, "versions": _versions(),
            "options": {"dl": state.dl, "backend": state.backend if state.dl else None}}


def build_report(state: _RunState) -> dict:
    """The JSON report (schema ``dynamo_lite.pytest_report`` version 2), complete."""
    ran = set(state.ran)
    nodeids = list(state.ran) if state.dl else [n for n in state.ran if n in state.records]
    nodeids += [n for n in state.records if n not in ran]
    groups = state.groups()
    report = _report_header(state)
    report.update(complete=True, totals=_totals(state), attribution=attribution_line(groups) if groups else "",
                  break_types=[g.to_dict() for g in groups])
    if state.outside.events or state.outside.captures:
        rec = state.outside
        report["outside_tests"] = {"counts": rec.counts(), "captures": [c.to_dict() for c in rec.captures],
                                   "graph_breaks": [_break_entry(state, e) for e in rec.breaks],
                                   "recompiles": [e.to_dict() for e in rec.recompiles]}
    if state.baseline_path:
        report["baseline"] = {"path": state.baseline_path, "updated": state.update_baseline,
                              "regressions": state.regressions}
    report["tests"] = [_test_entry(state, n) for n in nodeids]
    return report


class _JsonReportWriter:
    """The JSON report, kept a valid JSON document while the run goes on.

    At the start: the header, ``"complete": false`` and an empty ``tests`` list; after each
    test its entry is written over the closing brackets, which follow it again (one write
    and a flush), so a run killed at any point leaves the tests finished so far.  At the end
    the complete report replaces the file (written aside, then renamed)."""

    _TRAILER = b"\n]}\n"

    def __init__(self, path: str, header: dict):
        self.path = path
        self.count = 0
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        head = json.dumps(dict(header, complete=False), indent=1)
        assert head.endswith("}")
        self.file = open(path, "wb")
        self.file.write(head[:-1].rstrip().encode() + b',\n "tests": [')
        self.offset = self.file.tell()
        self.file.write(self._TRAILER)
        self.file.flush()

    def add(self, entry: dict) -> None:
        data = (b",\n" if self.count else b"\n") + json.dumps(entry).encode()
        self.file.seek(self.offset)
        self.file.write(data + self._TRAILER)
        self.file.flush()
        self.offset += len(data)
        self.count += 1

    def finish(self, report: dict) -> None:
        self.file.close()
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(report, f, indent=1)
            f.write("\n")
        os.replace(tmp, self.path)


def pytest_sessionstart(session):
    state = _state(session.config)
    if state is None or "json" not in state.reports or getattr(session.config, "workerinput", None) is not None:
        return
    state.json_writer = _JsonReportWriter(state.reports["json"], _report_header(state))


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session, exitstatus):
    state = _state(session.config)
    if state is None or getattr(session.config, "workerinput", None) is not None:
        return
    if state.baseline_path:
        if state.update_baseline:
            _write_baseline(state)
        else:
            state.regressions = _compare_baseline(state)
            if state.regressions and session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
    if not state.reports:
        return
    report = build_report(state)
    if state.json_writer is not None:
        state.json_writer.finish(report)
    for fmt, render in (("html", render_html), ("md", render_markdown)):
        path = state.reports.get(fmt)
        if path:
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            with open(path, "w") as f:
                f.write(render(report))


# ---------------------------------------------------------------------------
# Terminal summary
def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _cache_stats_of_run(now: dict, before: Optional[dict]) -> dict:
    """The persistent cache's counts of this run: ``now`` less ``before`` (None: all of now)."""
    if before is None:
        return now
    out = {k: now[k] - before[k] for k in ("hits", "stored", "misses")}
    out["not_stored"] = {r: n - before["not_stored"].get(r, 0) for r, n in now["not_stored"].items()
                         if n > before["not_stored"].get(r, 0)}
    return out


def _verbosity(config) -> int:
    """pytest's verbosity: -v adds one, -q takes one away (so ``-q -v`` is the default)."""
    get = getattr(config, "get_verbosity", None)
    return get() if get is not None else config.getoption("verbose")


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    state = _state(config)
    if state is None:
        return
    recs = state.all_records()
    if not (state.dl or state.regressions or any(r.events for r in recs)):
        return
    tr = terminalreporter
    verbosity = _verbosity(config)
    width = max(getattr(tr, "_tw", None) and tr._tw.fullwidth or 80, 40)
    tr.write_sep("=", "dynamo_lite graph breaks")
    t = _totals(state)
    parts = [_plural(t["frames"], "frame"), _plural(t["graphs"], "graph"), _plural(t["graph_breaks"], "graph break"),
             _plural(t["recompiles"], "recompile"), _plural(t["fallbacks"], "fallback")]
    if t["cache_limits"]:
        parts.append(_plural(t["cache_limits"], "cache limit") + " hit")
    parts.append(_plural(t["internal_errors"], "internal error"))
    tr.write_line(f"{t['tests_compiling']} of {_plural(t['tests'], 'test')} compiled code: {', '.join(parts)}"
                  + (f" (--dl, backend={state.backend})" if state.dl else ""))
    cached = sys.modules.get("dynamo_lite.persistent_cache")
    if cached is not None:
        st = _cache_stats_of_run(cached.stats(), state.cache_stats_before)
        if st["hits"] or (verbosity > 0 and st["stored"]):
            tr.write_line(f"persistent capture cache: {_plural(st['hits'], 'frame')} loaded without a trace, "
                          f"{st['misses']} traced (no usable stored entry), {st['stored']} stored, "
                          f"{sum(st['not_stored'].values())} not storable")
        if st["not_stored"] and verbosity > 0:
            reason, count = max(st["not_stored"].items(), key=lambda kv: kv[1])
            tr.write_line(f"  most frequent reason an entry was not stored ({count}x): {reason}")
    # internal errors are dynamo_lite bugs (the frame ran eagerly, so the test may pass): each is listed
    errors = [(rec, ev) for rec in recs for ev in _internal_errors(rec)]
    for rec, ev in errors[:_MAX_INTERNAL_ERRORS]:
        first = ev.reason.splitlines()[0] if ev.reason else "?"
        tr.write_line(f"  internal error in {ev.frame} ({rec.nodeid}): {first}", red=True)
    if len(errors) > _MAX_INTERNAL_ERRORS:
        tr.write_line(f"  ... {len(errors) - _MAX_INTERNAL_ERRORS} more internal errors "
                      f"({'in ' + state.reports['json'] if 'json' in state.reports else 'all: --dl-report=json:PATH'})")
    asked = [rec for rec in recs if rec.compiling_queries]
    if asked and state.dl:
        places = {q for rec in asked for q in rec.compiling_queries}
        first = os.path.relpath(sorted(places)[0], state.root) if sorted(places)[0].startswith(state.root) \
            else sorted(places)[0]
        tr.write_line(f"{_plural(len(asked), 'test')} took a compiler path: torch.compiler.is_compiling() answered "
                      f"True at {_plural(len(places), 'place')} (e.g. {first}); checks such code skips when "
                      "compiled are skipped under --dl too")
    groups = state.groups()
    if groups and verbosity > -2:
        tr.write_line(attribution_line(groups))
        tr.write_line("")
        if "json" in state.reports:
            more = f"(all in {state.reports['json']})"
        else:
            more = "(all: --dl-report=json|html|md:PATH)"
        for line in table_lines(groups, width=width, max_rows=_MAX_ROWS, max_lines=_MAX_LINES - 5, more=more):
            tr.write_line(line)
    if verbosity > 0:
        tr.write_line("")
        tr.write_line("per test:" if verbosity == 1 else "per test, every break:")
        for rec in recs:
            if not rec.events:
                continue
            c = rec.counts()
            head = (f"  {rec.nodeid}: {_plural(c['graphs'], 'graph')}, {_plural(len(rec), 'graph break')}, "
                    f"{_plural(c['recompiles'], 'recompile')}")
            if verbosity == 1:
                seen: dict = {}
                for ev in rec.breaks:
                    key = (ev.break_id, state.site(ev).where)
                    seen[key] = seen.get(key, 0) + 1
                where = ", ".join(f"{b}{f' x{n}' if n > 1 else ''} {w}" for (b, w), n in seen.items())
                tr.write_line(head + (f": {where}" if where else ""))
                continue
            tr.write_line(head)
            for ev in rec.breaks:
                site = state.site(ev)
                tr.write_line(f"      [{ev.break_id}] {site.message} ({site.where})")
            for ev in rec.recompiles:
                tr.write_line(f"      recompile [{ev.compile_id}] {ev.frame}: "
                              f"{ev.reasons[0] if ev.reasons else '?'}")
    if state.baseline_path:
        tr.write_line("")
        if state.update_baseline:
            tr.write_line(f"dynamo_lite baseline written: {state.baseline_path}")
        elif state.regressions:
            tr.write_line(f"dynamo_lite baseline FAILED ({state.baseline_path}): "
                          f"{len(state.regressions)} regression(s)", red=True, bold=True)
            for line in state.regressions:
                tr.write_line(f"  {line}", red=True)
            tr.write_line("  (if this is expected, rerun with --dl-update-baseline)")
        else:
            tr.write_line(f"dynamo_lite baseline OK ({state.baseline_path})")
    for fmt in ("json", "html", "md"):
        if fmt in state.reports:
            tr.write_line(f"dynamo_lite report written: {state.reports[fmt]}")
