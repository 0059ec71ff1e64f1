"""The public API is typed, and mypy agrees (CI runs this file).

1. mypy over the public API modules, configured in pyproject.toml ([tool.mypy]);
2. a user's file, checked by mypy as an IDE would: the types it sees for compile(),
   explain(), config and a backend, and the mistakes it reports.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("mypy", reason="mypy is in the test extras: pip install -e '.[test]'")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CACHE = os.path.join(ROOT, ".mypy_cache")


def _mypy(*args, cwd=ROOT, env=None):
    # checked as the running Python (pyproject's python_version is the oldest supported one; the
    # installed stubs of a newer Python's environment may use its syntax, e.g. numpy's `type`)
    version = "%d.%d" % sys.version_info[:2]
    return subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", CACHE, "--python-version", version, *args],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


def test_package_ships_py_typed():
    assert os.path.exists(os.path.join(ROOT, "dynamo_lite", "py.typed"))
    import tomllib

    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        assert "py.typed" in tomllib.load(f)["tool"]["setuptools"]["package-data"]["dynamo_lite"]


def test_mypy_passes_on_the_public_api():
    proc = _mypy()  # files and options from pyproject.toml
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "Success: no issues found" in proc.stdout


USER_FILE = '''
from typing import Any, Callable

import torch
import dynamo_lite
from dynamo_lite import config


def step(x: torch.Tensor, n: int = 2) -> torch.Tensor:
    return x * n


def my_backend(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
    return gm.forward


fast = dynamo_lite.compile(step, backend=my_backend)
reveal_type(fast)
model = dynamo_lite.compile(torch.nn.Linear(2, 2), backend="eager", fullgraph=True)
reveal_type(model)


@dynamo_lite.compile(backend="eager")
def decorated(x: torch.Tensor) -> torch.Tensor:
    return x + 1


reveal_type(decorated)
out = dynamo_lite.explain(step)(torch.ones(2), n=3)
reveal_type(out)
reveal_type(out.graphs)
reveal_type(out.break_reasons[0].user_stack)
reveal_type(dynamo_lite.disable(step))
reveal_type(config.cache_size_limit)
with dynamo_lite.optimize("eager"):
    step(torch.ones(2))
dynamo_lite.reset()

dynamo_lite.compile(step, backend=3)                 # error: not a backend
dynamo_lite.explain(step)("not a tensor")            # error: wrong argument for step
config.cache_size_limit = "eight"                    # error: an int setting
dynamo_lite.compile_everything                       # error: no such name
'''


def test_a_users_code_sees_the_types(tmp_path):
    path = tmp_path / "user_code.py"
    path.write_text(textwrap.dedent(USER_FILE))
    env = dict(os.environ, MYPYPATH=ROOT)
    # the project's options (so the cache of the first run serves), on this file only
    proc = _mypy("--config-file", os.path.join(ROOT, "pyproject.toml"), "--no-error-summary", str(path),
                 cwd=tmp_path, env=env)
    lines = proc.stdout.splitlines()
    # (older mypy versions spell builtins as builtins.int)
    revealed = [re.sub(r"\bbuiltins\.", "", re.sub(r"^.*Revealed type is ", "", line).strip('"'))
                for line in lines if "Revealed type" in line]
    assert revealed == [
        "def (x: torch._tensor.Tensor, n: int =) -> torch._tensor.Tensor",
        "torch.nn.modules.linear.Linear",
        "def (x: torch._tensor.Tensor) -> torch._tensor.Tensor",
        "dynamo_lite.report.explain.ExplainOutput",
        "list[torch.fx.graph_module.GraphModule]",
        "list[dynamo_lite.exc.UserFrame]",
        "def (x: torch._tensor.Tensor, n: int =) -> torch._tensor.Tensor",
        "int",
    ], proc.stdout
    errors = [line for line in lines if ": error:" in line]
    source = path.read_text().splitlines()
    flagged = {int(line.split(":")[1]) for line in errors}
    expected = {i + 1 for i, text in enumerate(source) if "# error:" in text}
    assert flagged == expected, "\n".join(errors)
