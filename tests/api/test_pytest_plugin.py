"""The pytest plugin (dynamo_lite/pytest_plugin.py), run on small test files with pytester.

Inner runs are in-process: the plugin sends events to the innermost active
run, so the outer session's record of these tests stays clean.
"""
import importlib
import json
import pkgutil
import xml.etree.ElementTree as ET
from importlib.metadata import entry_points

import pytest
import torch

import dynamo_lite
import dynamo_lite.backends
from dynamo_lite.report import events

pytest_plugins = ["pytester"]


def _warm_up():
    """pytester drops the modules an inner run imported: a module imported again would hold second
    copies of classes (and torch modules that register operator libraries fail to import twice).
    Import everything a compile needs before any inner run."""
    torch.manual_seed(0)  # imports torch._dynamo lazily
    for info in pkgutil.walk_packages(dynamo_lite.__path__, "dynamo_lite."):
        if info.name.rsplit(".", 1)[-1] not in ("__main__", "demo"):
            importlib.import_module(info.name)

    def f(x):
        y = x * 2
        print(end="")
        return y + 1

    saved = events._SINKS[:]  # keep this warm-up out of the outer session's report
    events._SINKS.clear()
    try:
        dynamo_lite.explain(f)(torch.randn(2))
    finally:
        events._SINKS[:] = saved
    dynamo_lite.reset()


_warm_up()


HEADER = '''import pytest
import torch
import dynamo_lite
from dynamo_lite.testing import CompileCounter
from dynamo_lite.testing import print_with_graph_break as print


def with_print(x):
    y = x * 2
    print("y is", y.shape)
    return y + 1


def plain(x):
    return (x + 1).relu()
'''

PRINT_LINE = HEADER.splitlines().index('    print("y is", y.shape)') + 1
PLAIN_LINE = HEADER.splitlines().index("def plain(x):") + 1


@pytest.fixture(autouse=True)
def _only_our_plugin(monkeypatch):
    """pytester forgets the modules an inner run imported: other installed plugins would be imported again
    by every run (seconds each)."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")


def run(pytester, *args):
    """Run pytest in-process with only our plugin (see _only_our_plugin)."""
    return pytester.runpytest("-p", "dynamo_lite.pytest_plugin", "-p", "no:cacheprovider", *args)


def make(pytester, body: str, name="test_inner"):
    return pytester.makepyfile(**{name: HEADER + body})


def test_summary_groups_breaks_by_type_and_location(pytester):
    make(pytester, '''
def test_a():
    dynamo_lite.compile(with_print, backend="eager")(torch.randn(3))

def test_b():
    dynamo_lite.compile(with_print, backend="eager")(torch.randn(4))

def test_no_compile():
    assert 1 + 1 == 2
''')
    result = run(pytester)
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines([
        "*= dynamo_lite graph breaks =*",
        "2 of 3 tests compiled code: 4 frames, 4 graphs, 2 graph breaks, 0 recompiles, 0 fallbacks, 0 internal errors",
        "2 breaks at 1 place: 2 inherent to your code (1 place), 0 dynamo_lite limitations (0 places)",
        "",
        "count tests  cause*location*break",
        f"    2     2  your code   test_inner.py:{PRINT_LINE}  DL0030 print_with_graph_break*",
        "hints:",
        "  DL0030  Remove the call when one graph is wanted*",
    ])
    # no per-test listing without -v
    assert "per test" not in result.stdout.str()


def test_verbose_adds_per_test_listing(pytester):
    make(pytester, '''
def test_a():
    dynamo_lite.compile(with_print, backend="eager")(torch.randn(3))
''')
    result = run(pytester, "-v")  # one line per test
    result.stdout.fnmatch_lines([
        "per test:",
        f"  test_inner.py::test_a: 2 graphs, 1 graph break, 0 recompiles: DL0030 test_inner.py:{PRINT_LINE}",
    ])
    result = run(pytester, "-vv")  # every break
    result.stdout.fnmatch_lines([
        "per test, every break:",
        "  test_inner.py::test_a: 2 graphs, 1 graph break, 0 recompiles",
        f"      [[]DL0030[]] print_with_graph_break() called (test_inner.py:{PRINT_LINE})",
    ])
    for args in (["-q", "-v"], ["-q"]):  # pytest's arithmetic: -q -v is the default verbosity
        assert "per test" not in run(pytester, *args).stdout.str()
    result = run(pytester, "-qq")  # only the totals
    out = result.stdout.str()
    assert "1 of 1 test compiled code" in out and "DL0030" not in out


def test_no_section_when_nothing_compiled(pytester):
    pytester.makepyfile(test_inner="def test_x():\n    assert True\n")
    result = run(pytester)
    result.assert_outcomes(passed=1)
    assert "dynamo_lite graph breaks" not in result.stdout.str()


DL_BODY = '''
def test_branch():
    x = torch.ones(3)
    y = x * 2
    if y.sum() > 0:
        y = y + 1
    assert torch.equal(y, torch.full((3,), 3.0))

def test_callback_installed():
    assert (dynamo_lite._C.get_callback() is not None) == CAPTURED
'''


def test_without_dl_test_bodies_are_not_captured(pytester):
    make(pytester, "CAPTURED = False\n" + DL_BODY)
    result = run(pytester)
    result.assert_outcomes(passed=2)
    assert "dynamo_lite graph breaks" not in result.stdout.str()


def test_dl_runs_test_bodies_under_capture(pytester):
    path = make(pytester, "CAPTURED = True\n" + DL_BODY)
    branch_line = path.read_text().splitlines().index("    if y.sum() > 0:") + 1
    result = run(pytester, "--dl")
    result.assert_outcomes(passed=2)  # results unchanged; the branch on tensor data is reported
    result.stdout.fnmatch_lines([
        "*= dynamo_lite graph breaks =*",
        "* (--dl, backend=eager)",
    ])
    result.stdout.fnmatch_lines([f"*your code * test_inner.py:{branch_line}  DL0025 branch on a tensor value*"])


def test_dl_backend_is_validated(pytester):
    make(pytester, "def test_x():\n    pass\n")
    result = run(pytester, "--dl", "--dl-backend=no_such_backend")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--dl-backend*no_such_backend*"])


def test_dl_backend_is_used(pytester):
    pytester.makeconftest('''
import dynamo_lite.backends
from dynamo_lite.testing import CompileCounter

COUNTER = CompileCounter()
dynamo_lite.backends.register_backend("inner_counter", COUNTER)
''')
    make(pytester, '''
from conftest import COUNTER

def test_x():
    x = torch.randn(3)
    y = x.sin() + 1

def test_count():
    assert COUNTER.frame_count >= 1
''')
    try:
        result = run(pytester, "--dl", "--dl-backend=inner_counter")
    finally:
        dynamo_lite.backends._BACKENDS.pop("inner_counter", None)  # the registry outlives the inner run
    result.assert_outcomes(passed=2)


def test_json_report(pytester, tmp_path):
    make(pytester, '''
def test_breaks():
    dynamo_lite.compile(with_print, backend="eager")(torch.randn(3))

def test_recompiles():
    f = dynamo_lite.compile(plain, backend="eager")
    f(torch.randn(3))
    f(torch.randn(3, dtype=torch.float64))

def test_many_guards():
    def total(xs):
        return sum(xs)
    dynamo_lite.compile(total, backend="eager")([torch.randn(1) for _ in range(100)])
''')
    path = tmp_path / "sub" / "report.json"
    result = run(pytester, f"--dl-report=json:{path}")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines([f"dynamo_lite report written: {path}"])
    report = json.loads(path.read_text())
    assert report["schema"] == "dynamo_lite.pytest_report"
    assert report["schema_version"] == 2 and report["complete"] is True
    assert set(report["versions"]) >= {"dynamo_lite", "torch", "python", "pytest"}
    assert report["totals"]["graph_breaks"] == 1
    assert report["totals"]["recompiles"] == 1
    tests = {t["nodeid"]: t for t in report["tests"]}
    brk = tests["test_inner.py::test_breaks"]
    assert brk["outcome"] == "passed"
    assert brk["counts"]["graphs"] == 2
    [event] = brk["graph_breaks"]
    assert event["break_id"] == "DL0030"
    assert event["hints"] and event["explanation"] and event["cause"] == "code"
    here = {"filename": str(pytester.path / "test_inner.py"), "lineno": PRINT_LINE,
            "name": "with_print", "line": 'print("y is", y.shape)'}
    assert event["user_stack"][-1] == event["location"] == event["innermost"] == here
    assert event["where"] == f"test_inner.py:{PRINT_LINE}" and event["in_library"] is None
    # the user's stack of the whole run: the test calls the compiled function, which breaks
    assert [f["name"] for f in event["user_code_stack"]] == ["test_breaks", "with_print"]
    # the callers start at the test function: pytest's own frames are left out of the report
    assert [f["name"] for f in event["caller_stack"]] == ["test_breaks"]
    # a graph lists its first guards and how many more it has (a report of a big suite stays small)
    [graph] = tests["test_inner.py::test_many_guards"]["graphs"]
    assert len(graph["guards"]) == 64 and graph["guards_omitted"] > 36
    rec = tests["test_inner.py::test_recompiles"]
    [recompile] = rec["recompiles"]
    assert recompile["reasons"] == ["x.dtype changed from float32 to float64"]
    assert report["break_types"][0]["tests"] == ["test_inner.py::test_breaks"]


def test_json_report_format_is_checked(pytester):
    make(pytester, "def test_x():\n    pass\n")
    result = run(pytester, "--dl-report=xml:out.xml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR


def test_junit_xml_properties(pytester, tmp_path):
    make(pytester, '''
def test_breaks():
    dynamo_lite.compile(with_print, backend="eager")(torch.randn(3))

def test_nothing():
    pass
''')
    xml = tmp_path / "junit.xml"
    result = run(pytester, f"--junitxml={xml}")
    result.assert_outcomes(passed=2)
    cases = {c.get("name"): c for c in ET.parse(xml).getroot().iter("testcase")}
    props = {p.get("name"): p.get("value") for p in cases["test_breaks"].iter("property")}
    assert props == {"dl_graphs": "2", "dl_graph_breaks": "1", "dl_recompiles": "0", "dl_break_ids": "DL0030"}
    assert list(cases["test_nothing"].iter("property")) == []


BASELINE_BODY = '''
def test_one_break():
    dynamo_lite.compile(with_print, backend="eager")(torch.randn(3))

def test_clean():
    dynamo_lite.compile(plain, backend="eager")(torch.randn(3))
'''


def test_baseline_update_pass_and_fail(pytester, tmp_path):
    baseline = tmp_path / "baseline.json"
    make(pytester, BASELINE_BODY)
    # a missing baseline is a usage error, unless we are creating it
    assert run(pytester, f"--dl-baseline={baseline}").ret == pytest.ExitCode.USAGE_ERROR
    result = run(pytester, f"--dl-baseline={baseline}", "--dl-update-baseline")
    assert result.ret == 0
    data = json.loads(baseline.read_text())
    assert data["schema_version"] == 1
    assert data["tests"] == {"test_inner.py::test_one_break": {"graph_breaks": 1, "recompiles": 0}}
    # same code: passes
    result = run(pytester, f"--dl-baseline={baseline}")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["dynamo_lite baseline OK*"])
    # a new break in a clean test and a recompile: the run fails although every test passed
    make(pytester, BASELINE_BODY.replace('''(plain, backend="eager")(torch.randn(3))''',
                                         '''(with_print, backend="eager")(torch.randn(3))
    f = dynamo_lite.compile(plain, backend="eager")
    f(torch.randn(3))
    f(torch.randn(2))'''))
    result = run(pytester, f"--dl-baseline={baseline}")
    result.assert_outcomes(passed=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        "dynamo_lite baseline FAILED*2 regression(s)",
        "  test_inner.py::test_clean: 1 graph breaks > baseline 0",
        "  test_inner.py::test_clean: 1 recompiles > baseline 0",
    ])
    # accepting the new state
    assert run(pytester, f"--dl-baseline={baseline}", "--dl-update-baseline").ret == 0
    assert run(pytester, f"--dl-baseline={baseline}").ret == 0


def test_fullgraph_marker(pytester):
    make(pytester, '''
@pytest.mark.fullgraph
def test_breaks():
    dynamo_lite.compile(with_print, backend="eager")(torch.randn(3))

@pytest.mark.fullgraph
def test_whole():
    dynamo_lite.compile(plain, backend="eager")(torch.randn(3))
''')
    result = run(pytester)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "*_ test_breaks _*",
        "@pytest.mark.fullgraph: 1 graph break",
        "[[]DL0030[]] graph_break() called (graph break): print_with_graph_break() called",
        f'  File "*test_inner.py", line {PRINT_LINE}, in with_print',
        '    print("y is", y.shape)',
        "  hint: Remove the call when one graph is wanted*",
    ])


def test_max_graph_breaks_marker(pytester):
    make(pytester, '''
def two_breaks(x):
    x = with_print(x)
    print("again")
    return x

@pytest.mark.max_graph_breaks(1)
def test_one_allowed():
    dynamo_lite.compile(with_print, backend="eager")(torch.randn(3))

@pytest.mark.max_graph_breaks(1)
def test_too_many():
    dynamo_lite.compile(two_breaks, backend="eager")(torch.randn(3))
''')
    result = run(pytester)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*@pytest.mark.max_graph_breaks(1): * graph breaks*"])
    assert "test_too_many" in result.stdout.str() and "FAILED test_inner.py::test_one_allowed" not in result.stdout.str()


def test_max_recompiles_marker(pytester):
    make(pytester, '''
def twice():
    f = dynamo_lite.compile(plain, backend="eager")
    f(torch.randn(3))
    f(torch.randn(3, dtype=torch.float64))

@pytest.mark.max_recompiles(0)
def test_none_allowed():
    twice()

@pytest.mark.max_recompiles(1)
def test_one_allowed():
    twice()
''')
    result = run(pytester)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "@pytest.mark.max_recompiles(0): 1 recompile",
        f"  [[]*[]] plain (*test_inner.py:{PLAIN_LINE}): x.dtype changed from float32 to float64",
    ])


def test_marker_does_not_hide_the_test_failure(pytester):
    make(pytester, '''
@pytest.mark.fullgraph
def test_fails_itself():
    dynamo_lite.compile(with_print, backend="eager")(torch.randn(3))
    assert False, "the test's own failure"
''')
    result = run(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*the test's own failure*"])


def test_fixtures(pytester):
    make(pytester, '''
def test_live_record(graph_breaks, compile_counter):
    assert len(graph_breaks) == 0
    dynamo_lite.compile(with_print, backend=compile_counter)(torch.randn(3))
    assert compile_counter.frame_count == 2
    assert [e.break_id for e in graph_breaks.breaks] == ["DL0030"]
    assert len(graph_breaks.graphs) == 2

def test_assert_none_fails(graph_breaks):
    dynamo_lite.compile(with_print, backend="eager")(torch.randn(3))
    graph_breaks.assert_none()

def test_assert_none_passes(graph_breaks):
    dynamo_lite.compile(plain, backend="eager")(torch.randn(3))
    graph_breaks.assert_none()
''')
    result = run(pytester)
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines([
        "E       AssertionError: expected no graph breaks, got 1",
        "E       [[]DL0030[]] graph_break() called (graph break): print_with_graph_break() called",
    ])


def test_caches_are_reset_between_tests(pytester):
    make(pytester, '''
COUNTER = CompileCounter()
F = dynamo_lite.compile(plain, backend=COUNTER)
X = torch.randn(3)

def test_first():
    F(X)
    assert COUNTER.frame_count == 1

def test_second():
    F(X)  # same function, same input: compiled again because the plugin reset the caches
    assert COUNTER.frame_count == 2
''')
    run(pytester).assert_outcomes(passed=2)


def test_events_outside_tests_are_reported(pytester):
    make(pytester, '''
dynamo_lite.compile(with_print, backend="eager")(torch.randn(3))  # at import (collection)

def test_x():
    pass
''')
    result = run(pytester, "-v", "-s")
    result.stdout.fnmatch_lines(["*DL0030 print_with_graph_break*", "  <outside tests>: 2 graphs, 1 graph break, 0 recompiles: DL0030*"])


def test_plugin_can_be_disabled(pytester, monkeypatch):
    monkeypatch.delenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD")
    make(pytester, '''
@pytest.mark.fullgraph
def test_breaks():
    dynamo_lite.compile(with_print, backend="eager")(torch.randn(3))
''')
    # the entry point is what users get: disable it by its name
    assert any(ep.name == "dynamo_lite" and ep.value == "dynamo_lite.pytest_plugin"
               for ep in entry_points(group="pytest11"))
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:dynamo_lite")
    result.assert_outcomes(passed=1)  # the marker means nothing without the plugin
    assert "dynamo_lite graph breaks" not in result.stdout.str()
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:dynamo_lite", "--dl")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
