"""The pytest plugin is inert unless used: installing dynamo_lite costs nothing to a project
that never uses it (no torch import), while --dl and code that compiles still work.

pytest runs in a subprocess (the plugin loaded by its entry point, as in any project),
with this worktree first on the path; a conftest records, at the very end of the run,
whether torch was imported.
"""
import json
import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CONFTEST = '''
import json, os, sys

def pytest_unconfigure(config):
    with open(os.environ["DL_PROBE_OUT"], "w") as f:
        json.dump({"torch": "torch" in sys.modules, "plugin": "dynamo_lite.pytest_plugin" in sys.modules,
                   "core": "dynamo_lite.api" in sys.modules}, f)
'''

PLAIN = '''
import pytest

def test_arithmetic():
    assert 1 + 1 == 2

@pytest.mark.fullgraph                 # the plugin's markers are registered and cheap
@pytest.mark.max_graph_breaks(0)
def test_marked_but_compiles_nothing(graph_breaks):
    total = sum(range(4))
    assert total == 6
'''


def _run(tmp_path, *args):
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_plain.py").write_text(textwrap.dedent(PLAIN))
    out = tmp_path / "probe.json"
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_DISABLE_PLUGIN_AUTOLOAD"}
    env.update(PYTHONPATH=ROOT, DL_PROBE_OUT=str(out))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(out.read_text()), proc.stdout


def test_plugin_does_not_import_torch_in_a_project_that_never_uses_it(tmp_path):
    probe, out = _run(tmp_path)
    assert probe["plugin"], "the plugin was not loaded through its entry point"
    assert not probe["torch"], "the dynamo_lite pytest plugin imported torch"
    assert not probe["core"]
    assert "dynamo_lite" not in out  # and it printed nothing


def test_dl_imports_what_it_needs(tmp_path):
    probe, out = _run(tmp_path, "--dl")
    assert probe["plugin"] and probe["torch"] and probe["core"]
    assert "dynamo_lite graph breaks" in out
