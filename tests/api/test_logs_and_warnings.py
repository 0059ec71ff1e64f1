"""DYNAMO_LITE_LOGS / set_logs output, and user logging and warnings inside compiled code.

Every test compares compiled with eager through dynamo_lite.testing; known bugs are strict
xfails in tests/test_known_bugs.py.
"""
import contextlib
import io
import logging
import os
import subprocess
import sys
import warnings

import pytest
import torch

import dynamo_lite
from dynamo_lite.report import events
from dynamo_lite.testing import CompileCounter, assert_same
from dynamo_lite.testing import recording as _recording, line_of as _line_of

pytest_plugins = ["pytester"]

X = torch.arange(6, dtype=torch.float32).reshape(2, 3) / 7 - 0.3


def _two_breaks(t):
    a = t.sin()
    print("hi")
    b = a.cos()
    if b.sum() > 0:
        b = b + 1
    return b

# ---------------------------------------------------------------- logs
def _affine(x, bias):
    return x * 2 + bias


def test_set_logs_recompiles_to_stderr_with_compile_id():
    f = dynamo_lite.compile(_affine, backend="eager")
    buf = io.StringIO()
    seen, rec = _recording()
    try:
        with contextlib.redirect_stderr(buf), rec:
            dynamo_lite.set_logs("recompiles")
            f(X, 1.0)
            f(torch.ones(4, 4), 1.0)
    finally:
        dynamo_lite.set_logs()
    ids = [e.compile_id for e in seen if isinstance(e, events.RecompileEvent)]
    out = buf.getvalue()
    assert len(ids) == 1 and f"[{ids[0]}] Recompiling _affine" in out
    assert "x.shape changed from [2, 3] to [4, 4]" in out
    assert out.count("\n") == 1


def test_set_logs_default_prints_nothing_and_invalid_name_raises():
    buf = io.StringIO()
    f = dynamo_lite.compile(_two_breaks, backend="eager")
    with contextlib.redirect_stderr(buf), contextlib.redirect_stdout(io.StringIO()):
        f(X)
        f(torch.ones(3))
    assert buf.getvalue() == ""
    with pytest.raises(ValueError, match="nope"):
        dynamo_lite.set_logs("graph_breaks,nope")


def test_set_logs_plus_and_minus_levels():
    f = dynamo_lite.compile(_affine, backend="eager")
    buf = io.StringIO()
    try:
        with contextlib.redirect_stderr(buf):
            dynamo_lite.set_logs("+recompiles")
            f(X, 1.0)
            f(X, 2.0)
            dynamo_lite.set_logs("dynamo_lite,-graph_code,-bytecode")
            dynamo_lite.reset()
            f(X, 1.0)
    finally:
        dynamo_lite.set_logs()
    out = buf.getvalue()
    assert "Guard failures of all 1 cache entries" in out
    assert "dynamo_lite.guards]" in out
    assert "dynamo_lite.graph_code]" not in out and "dynamo_lite.bytecode]" not in out


def test_set_logs_keywords_and_logs_out_file(tmp_path, monkeypatch):
    path = tmp_path / "dl.log"
    monkeypatch.setenv("DYNAMO_LITE_LOGS_OUT", str(path))
    f = dynamo_lite.compile(_affine, backend="eager")
    buf = io.StringIO()
    try:
        with contextlib.redirect_stderr(buf):
            dynamo_lite.set_logs(recompiles=True, guards=logging.INFO)
            f(X, 1.0)
            f(X, 3.0)
    finally:
        dynamo_lite.set_logs()
        logging.getLogger("dynamo_lite")  # handlers were removed by set_logs()
    text = path.read_text()
    assert "Recompiling _affine" in text and "Guards of _affine" in text
    assert "Recompiling _affine" in buf.getvalue()


def test_dynamo_lite_logs_environment_variable(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(
        "import torch, dynamo_lite\n"
        "def g(t, s):\n"
        "    return t * s\n"
        "f = dynamo_lite.compile(g, backend='eager')\n"
        "f(torch.ones(2), 1)\n"
        "f(torch.ones(2), 2)\n")
    env = dict(os.environ, DYNAMO_LITE_LOGS="recompiles")
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if "dynamo_lite" in line]
    assert len(lines) == 1
    assert lines[0].startswith("I") and "dynamo_lite.recompiles] [0/1] Recompiling g (" in lines[0]
    assert lines[0].endswith(f"{script}:2) because: s changed from 1 to 2")


# ---------------------------------------------------------------- user logging / warnings
USER_LOG = logging.getLogger("acceptance_api2.user")


def _logs(t, n):
    USER_LOG.info("value %d", n)
    y = t * n
    USER_LOG.warning("done %s", y.shape)
    return y


def _records(caplog, fn, *args):
    caplog.clear()
    out = fn(*args)
    return out, [(r.name, r.levelname, r.getMessage(), r.pathname, r.lineno)
                 for r in caplog.records if r.name == USER_LOG.name]


def test_user_logging_messages_levels_and_lines_match_eager(caplog):
    caplog.set_level(logging.INFO, logger=USER_LOG.name)
    e = _records(caplog, _logs, X, 3)
    c = _records(caplog, dynamo_lite.compile(_logs, backend="eager"), X, 3)
    assert_same(c[0], e[0])
    assert c[1] == e[1] and len(e[1]) == 2


def test_user_logging_below_level_is_silent_and_not_a_break(caplog):
    def f(t):
        USER_LOG.debug("dbg %s", t.shape)
        return t * 2

    caplog.set_level(logging.INFO, logger=USER_LOG.name)
    cnt = CompileCounter()
    assert_same(dynamo_lite.compile(f, backend=cnt)(X), X * 2)
    assert [r for r in caplog.records if r.name == USER_LOG.name] == []


def test_user_logging_funcname_matches_eager(caplog):
    caplog.set_level(logging.INFO, logger=USER_LOG.name)
    caplog.clear()
    _logs(X, 3)
    eager = [r.funcName for r in caplog.records]
    caplog.clear()
    dynamo_lite.compile(_logs, backend="eager")(X, 3)
    assert [r.funcName for r in caplog.records] == eager == ["_logs", "_logs"]


def test_caplog_at_info_sees_only_user_records(caplog):
    caplog.set_level(logging.INFO)
    caplog.clear()
    _logs(X, 3)
    eager = [(r.name, r.getMessage()) for r in caplog.records]
    caplog.clear()
    dynamo_lite.compile(_logs, backend="eager")(X, 3)
    assert [(r.name, r.getMessage()) for r in caplog.records] == eager


def _warns(fn, *args):
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        out = fn(*args)
    return out, [(str(w.message), w.category, w.filename, w.lineno) for w in rec]


def _warn_self(t):
    warnings.warn("careful", UserWarning)
    return t + 1


def _old_api(t):
    warnings.warn("old_api is deprecated", FutureWarning, stacklevel=2)
    return t * 2


def _calls_old_api(t):
    y = t + 1
    z = _old_api(y)
    for _ in range(2):
        z = _old_api(z)
    return z.sin()


def test_user_warning_matches_eager_file_line_category():
    e = _warns(_warn_self, X)
    c = _warns(dynamo_lite.compile(_warn_self, backend="eager"), X)
    assert_same(c[0], e[0])
    assert c[1] == e[1] and len(e[1]) == 1


def test_stacklevel2_warning_from_helper_points_at_compiled_caller():
    e = _warns(_calls_old_api, X)
    c = _warns(dynamo_lite.compile(_calls_old_api, backend="eager"), X)
    assert_same(c[0], e[0])
    assert c[1] == e[1] and len(e[1]) == 3 and e[1][0][2] == __file__


def test_recwarn_inside_compiled_matches_eager(recwarn):
    dynamo_lite.compile(_warn_self, backend="eager")(X)
    assert len(recwarn) == 1
    w = recwarn.pop(UserWarning)
    assert (w.filename, w.lineno) == (__file__, _line_of(_warn_self, "warnings.warn"))


def test_stacklevel2_warning_of_compiled_function_points_at_its_caller():
    e = _warns(_old_api, X)
    c = _warns(dynamo_lite.compile(_old_api, backend="eager"), X)
    assert c[1] == e[1]


def test_warning_once_filter_same_as_eager():
    def f(t):
        warnings.warn("only once per location")
        return t

    cf = dynamo_lite.compile(f, backend="eager")
    counts = []
    for fn in (f, cf):
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("once")
            for _ in range(3):
                fn(X)
        counts.append(len(rec))
    assert counts == [1, 1]
