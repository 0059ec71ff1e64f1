"""Log artifacts (dynamo_lite/log.py): DYNAMO_LITE_LOGS syntax, set_logs(), what each artifact shows."""
import logging
import os
import re
import subprocess
import sys

import pytest
import torch

import dynamo_lite
from dynamo_lite import log as dl_logging
from dynamo_lite.testing import print_with_graph_break as print  # noqa: A001 - a graph break at each print


@pytest.fixture(autouse=True)
def _default_logs():
    dynamo_lite.set_logs()
    yield
    dynamo_lite.set_logs()


def with_print(x):
    y = x * 2
    print("y is", y.shape)
    return y + 1


def plain(x):
    return x.sin() + 1


def run_twice(fn):
    compiled = dynamo_lite.compile(fn, backend="eager")
    compiled(torch.randn(3))
    compiled(torch.randn(3, dtype=torch.float64))


def test_parse_syntax():
    assert dl_logging.parse("graph_breaks, +recompiles,-guards") == {
        "graph_breaks": logging.INFO, "recompiles": logging.DEBUG, "guards": logging.ERROR}
    assert dl_logging.parse("all") == {"dynamo_lite": logging.INFO}
    assert dl_logging.parse("") == {}
    with pytest.raises(ValueError, match="unknown dynamo_lite log name 'graph_brakes'"):
        dl_logging.parse("graph_brakes")
    with pytest.raises(ValueError, match="graph_code"):  # help lists every artifact
        dl_logging.parse("help")


def test_set_logs_is_exported():
    assert "set_logs" in dynamo_lite.__all__
    assert dynamo_lite.set_logs is dl_logging.set_logs


def test_graph_breaks_artifact(capsys):
    dynamo_lite.set_logs("graph_breaks")
    run_twice(with_print)
    err = capsys.readouterr().err
    assert re.search(r"^I\d{4} [\d:.]+ dynamo_lite\.graph_breaks\] \[\d+/0\] Graph break in with_print: "
                     r"\[DL0030\] print_with_graph_break\(\) called$", err, re.M), err
    assert f'File "{__file__}", line' in err and 'print("y is", y.shape)' in err
    assert "[1] Graph break" not in err
    # nothing else was turned on
    assert "Recompiling" not in err and "GraphModule" not in err and "BYTECODE" not in err


def test_recompiles_artifact_and_debug_level(capsys):
    dynamo_lite.set_logs("recompiles")
    run_twice(plain)
    err = capsys.readouterr().err
    assert re.search(r"\[\d+/1\] Recompiling plain \(.*test_logging.py:\d+\) because: "
                     r"x.dtype changed from float32 to float64", err), err
    assert "Guard failures of all" not in err
    dynamo_lite.reset()
    dynamo_lite.set_logs("+recompiles")
    run_twice(plain)
    err = capsys.readouterr().err
    assert "Guard failures of all 1 cache entries of plain" in err


def test_guards_graph_code_and_bytecode_artifacts(capsys):
    dynamo_lite.set_logs(guards=True, graph_code=True, bytecode=True)
    dynamo_lite.compile(plain, backend="eager")(torch.randn(3))
    err = capsys.readouterr().err
    assert re.search(r"dynamo_lite\.guards\] \[\d+/0\] Guards of plain:\n", err)
    assert "x: Tensor(dtype=float32, device=cpu, shape=[3]" in err
    assert re.search(r"dynamo_lite\.graph_code\] \[\d+/0\] Graph of plain:\nclass GraphModule", err)
    assert "sin = torch.sin(x)" in err or "sin: " in err
    assert "ORIGINAL BYTECODE plain" in err and "MODIFIED BYTECODE plain" in err
    assert "BINARY_OP" in err


def test_everything_and_silencing(capsys):
    dynamo_lite.set_logs("+dynamo_lite,-bytecode")
    run_twice(with_print)
    err = capsys.readouterr().err
    for name in ("graph_breaks", "recompiles", "guards", "graph_code"):
        assert f"dynamo_lite.{name}]" in err, name
    assert "Guard failures of all" in err  # DEBUG level
    assert "BYTECODE" not in err


def test_set_logs_keywords_with_levels(capsys):
    dynamo_lite.set_logs(dynamo_lite=logging.INFO)
    run_twice(plain)
    err = capsys.readouterr().err
    assert "Recompiling plain" in err and "Guard failures of all" not in err
    assert dl_logging.get_settings() == {"dynamo_lite": logging.INFO}


def test_reset_to_default(capsys):
    dynamo_lite.set_logs("+dynamo_lite")
    dynamo_lite.set_logs()
    run_twice(with_print)
    assert "dynamo_lite." not in capsys.readouterr().err
    root = logging.getLogger("dynamo_lite")
    assert root.propagate and root.level == logging.WARNING
    assert not any(isinstance(h, dl_logging._StderrHandler) for h in root.handlers)


def test_records_still_reach_caplog_by_default(caplog):
    with caplog.at_level(logging.INFO, logger="dynamo_lite"):
        dynamo_lite.compile(with_print, backend="eager")(torch.randn(3))
    assert any(r.name == "dynamo_lite.graph_breaks" and "DL0030" in r.getMessage() for r in caplog.records)


def test_disabled_artifacts_render_nothing():
    calls = []

    def render():
        calls.append(1)
        return "text"

    logging.getLogger("dynamo_lite.graph_code").info("%s", dl_logging.lazy(render))
    assert calls == []  # the artifact is off: never rendered
    dynamo_lite.set_logs("graph_code")
    logging.getLogger("dynamo_lite.graph_code").info("%s", dl_logging.lazy(render))
    assert calls == [1]


def test_env_var_at_import(monkeypatch, capsys):
    monkeypatch.setenv("DYNAMO_LITE_LOGS", "graph_breaks")
    dl_logging._init_from_env()
    dynamo_lite.compile(with_print, backend="eager")(torch.randn(3))
    assert "Graph break in with_print" in capsys.readouterr().err
    monkeypatch.setenv("DYNAMO_LITE_LOGS", "nonsense")
    with pytest.warns(UserWarning, match="DYNAMO_LITE_LOGS ignored: unknown dynamo_lite log name 'nonsense'"):
        dl_logging._init_from_env()


def test_env_var_in_a_fresh_process(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(
        "import torch, dynamo_lite\n"
        "def f(x):\n"
        "    y = x + 1\n"
        "    print('hello', int(y.sum().item()))\n"
        "    return y\n"
        "dynamo_lite.compile(f, backend='eager')(torch.ones(2))\n")
    env = dict(os.environ, DYNAMO_LITE_LOGS="graph_breaks", DYNAMO_LITE_LOGS_OUT=str(tmp_path / "log.txt"))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "hello 4\n"
    assert re.search(r"\[\d+/0\] Graph break in f: \[DL0007\]", proc.stderr), proc.stderr
    assert "Graph break in f" in (tmp_path / "log.txt").read_text()


def test_bytecode_artifact_with_depyf(capsys):
    pytest.importorskip("depyf")
    dynamo_lite.set_logs("bytecode")
    dynamo_lite.compile(plain, backend="eager")(torch.randn(3))
    assert "POSSIBLE SOURCE CODE (depyf)" in capsys.readouterr().err
