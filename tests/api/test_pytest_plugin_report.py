"""The pytest plugin's report on suites as users have them: hundreds of break sites, code in
installed libraries, a run killed halfway, the HTML and Markdown pages.

pytest runs in a subprocess on a generated project (the plugin loaded by its entry point),
with this worktree first on the path.
"""
import json
import os
import re
import signal
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# an installed library (in a site-packages folder) with helpers that break in its own code
LIBRARY = '''
import torch
from dynamo_lite.testing import print_with_graph_break as print  # a break at each print

def noisy_scale(x):
    y = x * 2
    print("libhelpers: scaled")
    return y

def positive(x):
    if x.sum() > 0:
        return x
    return -x
'''

# one generated test module: every test breaks at lines of its own, and calls the library
TEST_MODULE = '''
import zlib
import torch
from dynamo_lite.testing import print_with_graph_break as print  # a break at each print
import libhelpers

def _mix(x, k):
    return x + zlib.crc32(bytes([k]))      # not traced yet: a limitation of dynamo_lite
{tests}
'''

TEST_FUNCTION = '''
def test_case_{i}():
    x = torch.ones(3) * {i}
    print("case {i}")                       # inherent: a print
    if x.sum().item() > {i}:                # inherent: a value read out of a tensor
        x = x + 1
    x = _mix(x, {i})
    x = libhelpers.noisy_scale(x)
    assert libhelpers.positive(x).shape == (3,)
'''


def _project(tmp_path, files: dict) -> str:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return str(tmp_path)


def _pytest(cwd, *args, extra_path=()):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "CI")}
    env.update(PYTHONPATH=os.pathsep.join([ROOT, *extra_path]), COLUMNS="120")
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=900)


def _summary(stdout: str) -> list[str]:
    """The lines of the "dynamo_lite graph breaks" section, its separator included."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if "= dynamo_lite graph breaks =" in line)
    end = next((i for i in range(start + 1, len(lines)) if re.match(r"^={5,} ", lines[i])), len(lines))
    return lines[start:end]


def test_summary_of_hundreds_of_break_sites_fits_a_screen_and_names_user_files(tmp_path):
    n_files, n_tests = 5, 10
    files = {"site-packages/libhelpers/__init__.py": LIBRARY}
    for f in range(n_files):
        tests = "".join(TEST_FUNCTION.format(i=f * n_tests + t) for t in range(n_tests))
        files[f"tests/test_gen_{f}.py"] = TEST_MODULE.format(tests=tests)
    cwd = _project(tmp_path, files)
    report = tmp_path / "report.json"
    proc = _pytest(cwd, "-q", "--dl", f"--dl-report=json:{report}", "tests",
                   extra_path=[str(tmp_path / "site-packages")])
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    summary = _summary(proc.stdout)
    assert len(summary) <= 30, "\n".join(summary)
    rows = [line for line in summary if re.match(r"^\s+\d+\s+\d+\s+(your code|dynamo_lite)\s", line)]
    assert len(rows) == 20
    # every location is a file of the user's suite, never the library, torch or dynamo_lite
    assert all(re.search(r"\stests/test_gen_\d+\.py:\d+\s", row) for row in rows), "\n".join(rows)
    assert not any(word in "\n".join(rows) for word in ("libhelpers", "site-packages", "torch/", "dynamo_lite/"))
    assert any(re.match(r"^\.\.\. \d+ more places with \d+ breaks \(all in .*report\.json\)$", line)
               for line in summary), "\n".join(summary)
    assert re.search(r"^\d+ breaks at \d+ places: \d+ inherent to your code \(\d+ places\), \d+ dynamo_lite "
                     r"limitations \(\d+ places\)$", "\n".join(summary), re.M)

    data = json.loads(report.read_text())
    assert data["complete"] and len(data["tests"]) == n_files * n_tests
    groups = data["break_types"]
    # four places a test (its print and .item(), its calls of the two library helpers), and the
    # crc32 of each file's helper
    assert len(groups) == 4 * n_files * n_tests + n_files
    assert all(re.fullmatch(r"tests/test_gen_\d+\.py:\d+", g["location"]) for g in groups)
    by_cause = {g["cause"] for g in groups}
    assert by_cause == {"code", "dynamo_lite"}
    library = [g for g in groups if g["in_library"] == "libhelpers"]
    assert library and all(g["cause"] == "code" and "libhelpers" in g["hints"][0] for g in library)
    crc = [g for g in groups if g["break_id"] == "DL0003"]
    assert crc and all(g["cause"] == "dynamo_lite" and g["hints"] == [] and
                       g["message"].startswith("dynamo_lite does not trace this yet") for g in crc)
    # the JSON keeps the innermost frame of a break inside the library
    brk = next(b for t in data["tests"] for b in t["graph_breaks"] if b["in_library"] == "libhelpers")
    assert brk["innermost"]["filename"].endswith(os.path.join("libhelpers", "__init__.py"))
    assert brk["location"]["filename"].startswith(str(tmp_path / "tests"))


KILLED = '''
import os, signal, torch
from dynamo_lite.testing import print_with_graph_break as print  # a break at each print

def test_first():
    x = torch.ones(2)
    print("first")
    assert (x + 1).sum() == 4

def test_second():
    x = torch.ones(2)
    if x.sum() > 0:
        x = x * 3
    assert x.sum() == 6

def test_killed():
    os.kill(os.getpid(), signal.SIGKILL)

def test_never_runs():
    pass
'''


def test_a_killed_run_leaves_a_readable_json_report(tmp_path):
    cwd = _project(tmp_path, {"test_killed.py": KILLED})
    report = tmp_path / "out" / "report.json"
    proc = _pytest(cwd, "-q", "--dl", f"--dl-report=json:{report}")
    assert proc.returncode == -signal.SIGKILL, proc.stdout[-3000:] + proc.stderr[-2000:]
    data = json.loads(report.read_text())  # a valid document, not a truncated one
    assert data["schema"] == "dynamo_lite.pytest_report" and data["complete"] is False
    tests = {t["nodeid"]: t for t in data["tests"]}
    assert list(tests) == ["test_killed.py::test_first", "test_killed.py::test_second"]
    assert tests["test_killed.py::test_first"]["outcome"] == "passed"
    # the print, then the assert on a tensor
    assert [b["break_id"] for b in tests["test_killed.py::test_first"]["graph_breaks"]] == ["DL0030", "DL0025"]
    assert [b["break_id"] for b in tests["test_killed.py::test_second"]["graph_breaks"]] == ["DL0025", "DL0025"]


PAGES = '''
import torch
from dynamo_lite.testing import print_with_graph_break as print  # a break at each print

def test_breaks():
    x = torch.ones(2)
    print("a <b> & c")
    if x.sum() > 0:
        x = x + 1
'''


def test_html_and_markdown_reports_hold_every_group(tmp_path):
    cwd = _project(tmp_path, {"test_pages.py": PAGES})
    proc = _pytest(cwd, "-q", "--dl", "--dl-report=html:r/report.html", "--dl-report=md:r/report.md",
                   "--dl-report=json:r/report.json")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    for name in ("report.html", "report.md", "report.json"):
        assert f"dynamo_lite report written: {tmp_path / 'r' / name}" in proc.stdout
    data = json.loads((tmp_path / "r" / "report.json").read_text())
    page = (tmp_path / "r" / "report.html").read_text()
    md = (tmp_path / "r" / "report.md").read_text()
    assert page.startswith("<!DOCTYPE html>") and page.count("<tr class=") == len(data["break_types"]) == 2
    for g in data["break_types"]:
        assert f"<code>{g['location']}</code>" in page
        assert f"`{g['location']}`" in md and g["break_id"] in md
    assert "| count | tests | cause | location | break | what happened | hint |" in md
    assert "test_pages.py::test_breaks" in page and "test_pages.py::test_breaks" in md


OUTCOMES = '''
import pytest
import torch
import dynamo_lite
from dynamo_lite.symbolic import translator


@dynamo_lite.disable
def kept_eager(t):
    return t.sum().item()


def test_passes_without_compiling():
    assert 1 + 1 == 2


def test_plain_compute():
    assert (torch.ones(2) + 1).sum() == 4


@pytest.mark.xfail(reason="expected")
def test_expected_failure():
    assert torch.ones(2).sum() == 3


@pytest.mark.xfail(reason="fixed meanwhile")
def test_unexpected_pass():
    assert torch.ones(2).sum() == 2


@pytest.fixture
def broken():
    raise RuntimeError("fixture fails")


def test_setup_error(broken):
    pass


def test_users_own_disable():
    x = torch.ones(2) * 2
    assert kept_eager(x) == 4


def test_internal_error(monkeypatch):
    # a dynamo_lite bug while tracing: the frame runs eagerly and the test still passes
    def boom(self):
        raise RuntimeError("a bug inside dynamo_lite")
    monkeypatch.setattr(translator.InstructionTranslator, "run", boom)
    f = dynamo_lite.compile(lambda t: t + 1, backend="eager")
    assert f(torch.ones(2)).sum() == 4
'''


def test_outcomes_internal_errors_and_the_users_own_disable(tmp_path):
    cwd = _project(tmp_path, {"test_outcomes.py": OUTCOMES})
    report = tmp_path / "report.json"
    proc = _pytest(cwd, "-q", "--dl", f"--dl-report=json:{report}")
    out = proc.stdout
    # the JSON outcome is pytest's, for every test (also those that compiled nothing)
    tests = {t["nodeid"].split("::")[1]: t for t in json.loads(report.read_text())["tests"]}
    assert {name: t["outcome"] for name, t in tests.items()} == {
        "test_passes_without_compiling": "passed", "test_plain_compute": "passed",
        "test_expected_failure": "xfailed", "test_unexpected_pass": "xpassed", "test_setup_error": "error",
        "test_users_own_disable": "passed", "test_internal_error": "passed"}, out
    # internal errors: counted in the header line whether or not the test passed, and listed
    summary = _summary(out)
    # (under --dl the test body's own resumed frame is traced with the broken translator too)
    assert re.search(r"compiled code: .*, [1-9]\d* internal errors? \(--dl, backend=eager\)$", summary[1]), summary
    assert any(line.strip().startswith("internal error in <lambda> (test_outcomes.py::test_internal_error): "
                                       "internal error RuntimeError: a bug inside dynamo_lite")
               for line in summary), summary
    # a function the user disabled is the user's choice, named as such
    own = tests["test_users_own_disable"]["graph_breaks"]
    assert [b["break_id"] for b in own] == ["DL0067"], own
    assert "kept_eager is marked dynamo_lite.disable" in own[0]["reason"], own
    assert own[0]["cause"] == "code", own


COMPILER_PATH = '''
import pytest
import torch


def checked_double(x):
    if not torch.compiler.is_compiling():  # a library skipping its own check when compiled
        if x.dim() != 1:
            raise ValueError("expects a vector")
    return x * 2


def test_rejects_matrices():
    with pytest.raises(ValueError):
        checked_double(torch.ones(2, 2))


def test_vectors():
    assert checked_double(torch.ones(3)).sum() == 6


def test_no_question():
    assert (torch.ones(3) * 2).sum() == 6
'''


def test_tests_whose_code_asks_is_compiling_are_flagged(tmp_path):
    # as under torch.compile, the check is skipped while captured, so the first test fails
    # under --dl: the summary and the JSON say which tests took the compiler path, and where
    cwd = _project(tmp_path, {"test_path.py": COMPILER_PATH})
    report = tmp_path / "report.json"
    proc = _pytest(cwd, "-q", "--dl", f"--dl-report=json:{report}")
    assert "1 failed, 2 passed" in proc.stdout, proc.stdout[-3000:]
    summary = _summary(proc.stdout)
    assert any(line.startswith("2 tests took a compiler path: torch.compiler.is_compiling() answered True at "
                               "1 place (e.g. test_path.py:7)") for line in summary), summary
    tests = {t["nodeid"].split("::")[1]: t for t in json.loads(report.read_text())["tests"]}
    assert [os.path.basename(q) for q in tests["test_rejects_matrices"]["compiling_queries"]] == ["test_path.py:7"]
    assert tests["test_rejects_matrices"]["outcome"] == "failed"
    assert tests["test_no_question"]["compiling_queries"] == []


CAPTURED = '''
import torch
import dynamo_lite
from dynamo_lite.testing import print_with_graph_break as print  # a break at each print

def test_two_frames():
    x = torch.ones(2)
    print("break")                  # the test body, then its resume function: two captures
    assert (x + 1).sum() == 4

def test_nothing_to_capture():
    assert sum(range(3)) == 3

def scale(x, k):
    return x * k

def test_recompiles_a_helper():      # without --dl: the test compiles a helper itself
    f = dynamo_lite.compile(scale, backend="eager", dynamic=False)  # a capture per k
    for k in range(3):
        assert f(torch.ones(2), k).sum() == 2 * k
'''


def _check_captures(test: dict) -> list:
    captures = test["captures"]
    for c in captures:
        assert set(c) == {"compile_id", "frame", "cpu_seconds", "wall_seconds"}
        assert c["cpu_seconds"] >= 0 and c["wall_seconds"] > 0
    ids = [c["compile_id"] for c in captures]
    assert len(ids) == len(set(ids))  # one entry per capture
    # every frame that reported a graph or a break was captured
    reported = {e["compile_id"] for e in test["graphs"] + test["graph_breaks"] if e.get("compile_id")}
    assert reported <= set(ids), (reported, ids)
    return captures


def test_json_report_records_each_frame_capture_time(tmp_path):
    cwd = _project(tmp_path, {"test_captured.py": CAPTURED})
    report = tmp_path / "report.json"
    proc = _pytest(cwd, "-q", "--dl", f"--dl-report=json:{report}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    data = json.loads(report.read_text())
    tests = {t["nodeid"].split("::")[1]: t for t in data["tests"]}
    two = _check_captures(tests["test_two_frames"])
    assert len(two) >= 2 and two[0]["frame"] == "test_two_frames"
    helper = _check_captures(tests["test_recompiles_a_helper"])
    # the helper is captured once per constant k (recompiles), each time a capture of its own
    assert sum(c["frame"] == "scale" for c in helper) == 1 + len(tests["test_recompiles_a_helper"]["recompiles"])
    every = [c for t in data["tests"] for c in t["captures"]]
    totals = data["totals"]["captures"]
    assert totals["count"] == len(every)
    cpu = sorted(c["cpu_seconds"] * 1e3 for c in every)
    assert cpu[0] <= totals["cpu_ms_median"] <= totals["cpu_ms_p90"] <= cpu[-1] + 1e-3
    assert abs(totals["cpu_ms_total"] - sum(cpu)) < 0.01


WARM_UP = '''
import torch
import dynamo_lite

def test_warm_up():  # the first capture of the process imports the compiler: it is not timed
    assert dynamo_lite.compile(lambda x: x + 1, backend="eager")(torch.ones(1)).item() == 2
'''


def test_without_dl_a_report_still_times_captures_of_tests_that_compile(tmp_path):
    cwd = _project(tmp_path, {"test_captured.py": CAPTURED, "test_a_warm_up.py": WARM_UP})
    report = tmp_path / "report.json"
    proc = _pytest(cwd, "-q", f"--dl-report=json:{report}", "test_a_warm_up.py", "test_captured.py")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    tests = {t["nodeid"].split("::")[1]: t for t in json.loads(report.read_text())["tests"]}
    assert list(tests) == ["test_warm_up", "test_recompiles_a_helper"]  # the tests that compiled something
    assert [c["frame"] for c in _check_captures(tests["test_recompiles_a_helper"])] == ["scale"] * 3
