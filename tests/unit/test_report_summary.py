"""report/summary.py: where a break is in the user's code, whose it is, and which hints apply.

Each kind is shown on a real compile (events recorded through dynamo_lite.testing): a break
inherent to the user's code, the same break inside a library, a limitation of dynamo_lite,
a module built in a constructor and one built in forward, and generated code.
"""
import os
import re
import sys
import textwrap
import zlib

import pytest
import torch

import dynamo_lite
from dynamo_lite import graph_breaks as gb
from dynamo_lite.report import summary
from dynamo_lite.report.summary import BreakSite, classify, group_sites, table_lines
from dynamo_lite.testing import line_of, recording

HERE = os.path.abspath(__file__)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))


def _sites(fn, *args):
    seen, rec = recording()
    with rec:
        dynamo_lite.compile(fn, backend="eager")(*args)
    return [BreakSite.of(e, ROOT) for e in seen if hasattr(e, "break_id")]


@pytest.fixture
def fakelib(tmp_path, monkeypatch):
    """An installed library (in a site-packages folder) whose helper prints."""
    pkg = tmp_path / "site-packages" / "fakelib"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(textwrap.dedent('''
        def noisy_double(x):
            y = x * 2
            try:  # a print inside a try block is not replayed: it breaks
                print("fakelib: doubled")
            finally:
                pass
            return y + 1
    '''))
    monkeypatch.syspath_prepend(str(tmp_path / "site-packages"))
    import fakelib

    yield fakelib
    sys.modules.pop("fakelib", None)


def test_classify_names_whose_code_a_file_is(fakelib):
    assert classify(HERE) == summary.Origin("user")
    assert classify(torch.nn.functional.__file__) == summary.Origin("library", "torch")
    assert classify(fakelib.__file__) == summary.Origin("library", "fakelib")
    assert classify(os.__file__) == summary.Origin("library", "the standard library")
    assert classify(summary.__file__) == summary.Origin("library", "dynamo_lite")
    assert classify("<string>").kind == "generated"
    assert classify("<eval_with_key>.3").kind == "generated"
    assert classify("/tmp/torchinductor_me/ab/cabcdef.py").kind == "generated"
    assert classify(dynamo_lite.demo.__file__ if hasattr(dynamo_lite, "demo") else
                    os.path.join(os.path.dirname(summary.__file__), "..", "demo.py")).is_user


def _print_in_user_code(x):
    y = x + 1
    try:  # a print inside a try block is not replayed: it breaks
        print("user: y")
    finally:
        pass
    return y * 2


def test_inherent_break_in_user_code_has_its_hint():
    [site] = _sites(_print_in_user_code, torch.ones(3))
    assert site.break_id == gb.PRINT and site.cause == gb.CODE
    assert site.where == f"tests/unit/test_report_summary.py:{line_of(_print_in_user_code, 'print(')}"
    assert site.location is site.innermost and site.in_library is None
    assert site.hints == list(gb.lookup(gb.PRINT).hints)
    assert site.message.startswith("print")


def test_break_inside_a_library_is_placed_in_the_users_code(fakelib):
    def user_step(x):
        return fakelib.noisy_double(x).sin()

    # twice: in the trace of user_step (which gives up inlining the library at the call), then
    # in the library's own frame, captured as a frame of its own: the same place for the user
    sites = _sites(user_step, torch.ones(3))
    assert len(sites) == 2 and sites[0].where == sites[1].where
    site = sites[1]
    assert site.break_id == gb.PRINT and site.cause == gb.CODE
    # reported where the user's code calls the library; the innermost frame is kept
    assert site.where == f"tests/unit/test_report_summary.py:{line_of(user_step, 'noisy_double')}"
    assert site.innermost.filename == fakelib.__file__ and site.innermost.name == "noisy_double"
    assert [f.name for f in site.user_stack] == ["test_break_inside_a_library_is_placed_in_the_users_code",
                                                 "_sites", "user_step"]
    assert site.in_library == "fakelib"
    # the hint about the user's prints does not apply; the library is named
    assert site.hints == ["It happens inside fakelib, not in your code: change how your code calls it "
                          "(the location shown), or leave it."]
    assert "fakelib" in "\n".join(site.lines())


def _crc_of_constant(x):
    return x + zlib.crc32(b"abc")


def test_limitation_of_dynamo_lite_says_so_without_a_hint_to_move_code():
    [site] = _sites(_crc_of_constant, torch.ones(3))
    assert site.break_id == gb.UNSUPPORTED_CALL and site.cause == gb.DYNAMO_LITE
    assert site.message.startswith("dynamo_lite does not trace this yet: builtin crc32()")
    assert site.hints == []
    assert not any("outside" in h for h in gb.lookup(gb.UNSUPPORTED_CALL).hints)


class _Built(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x):
        return self.lin(x)


class _BuildsInForward(torch.nn.Module):
    def forward(self, x):
        lin = torch.nn.Linear(3, 3)
        return lin(x)


def _build_then_call(x):
    return _Built()(x)


def _build_in_forward(x):
    return _BuildsInForward()(x)


def test_module_created_hint_only_when_created_in_forward():
    in_init = [s for s in _sites(_build_then_call, torch.ones(3)) if s.break_id == gb.MODULE_CREATED]
    assert in_init and all(s.innermost.name == "__init__" for s in in_init)
    assert all(s.hints == [] for s in in_init)  # "create modules in __init__" would be wrong here
    assert all(s.cause == gb.DYNAMO_LITE for s in in_init)
    in_forward = [s for s in _sites(_build_in_forward, torch.ones(3)) if s.break_id == gb.MODULE_CREATED]
    assert in_forward and all(s.innermost.name == "forward" for s in in_forward)
    assert all(s.hints == ["Create modules in __init__, not in forward."] for s in in_forward)


def test_generated_code_is_placed_at_the_users_frame():
    namespace: dict = {}
    exec(compile("def generated(x):\n    try:\n        print('from generated code')\n    finally:\n        pass\n"
                 "    return x + 1\n", "<string>", "exec"),
         namespace)
    generated = namespace["generated"]

    def user(x):
        return generated(x * 2)

    sites = _sites(user, torch.ones(3))  # (twice, as for the library above)
    assert len(sites) == 2 and sites[0].where == sites[1].where
    site = sites[1]
    assert site.innermost.filename == "<string>" and site.in_library == "generated code"
    assert site.where == f"tests/unit/test_report_summary.py:{line_of(user, 'generated(x')}"
    assert site.hints and "generated code" in site.hints[0]


def test_table_fits_its_line_budget_and_counts_the_rest():
    sites = []
    for i in range(60):
        frame = summary.UserFrame(HERE, i + 1, "f", "")
        ev = type("Ev", (), {"break_id": gb.PRINT if i % 2 else gb.UNSUPPORTED_CALL, "kind": "graph_break",
                             "reason": f"reason {i}", "user_stack": [frame], "caller_stack": []})()
        for _ in range(i % 5 + 1):
            sites.append((f"t{i}", BreakSite.of(ev, ROOT)))
    groups = group_sites(sites)
    assert len(groups) == 60 and groups[0].count == 5
    lines = table_lines(groups, width=130, max_rows=20, max_lines=25, more="(see the JSON)")
    assert len(lines) <= 25
    assert sum(1 for line in lines if "tests/unit/test_report_summary.py:" in line) == 20
    rest = groups[20:]
    assert f"... {len(rest)} more places with {sum(g.count for g in rest)} breaks (see the JSON)" in lines
    assert all(len(line) <= 130 for line in lines if not line.startswith("  DL"))
    # on 80 columns a long path keeps its end (the file name and line), and the break keeps room
    narrow = table_lines(groups, width=80, max_rows=20, max_lines=25)
    rows = [line for line in narrow if "DL00" in line and not line.startswith("  DL")]
    assert len(rows) == 20 and all(len(line) <= 80 for line in rows)
    assert all(re.search(r"\.\.\.\S*report_summary\.py:\d+ +DL00\d\d reason", row) for row in rows), rows
    assert summary.attribution_line(groups).startswith(f"{len(sites)} breaks at 60 places: ")
