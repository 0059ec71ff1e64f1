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


# A distribution that lists dynamo_lite's package and registers the plugin, as a wheel install
# (or the egg-info a build leaves in a checkout) does: pytest then marks the whole package for
# assertion rewriting (_pytest/config: _mark_plugins_for_rewrite).
DIST = {
    "METADATA": "Metadata-Version: 2.1\nName: dynamo-lite\nVersion: 0.0.0\n",
    "entry_points.txt": "[pytest11]\ndynamo_lite = dynamo_lite.pytest_plugin\n",
    "RECORD": "dynamo_lite/__init__.py,,\ndynamo_lite/api.py,,\ndynamo_lite/pytest_plugin.py,,\n",
}

LOADERS = '''
import json, os, sys

def pytest_unconfigure(config):
    loaders = {name: type(getattr(mod, "__loader__", None)).__name__ for name, mod in list(sys.modules.items())
               if name == "dynamo_lite" or name.startswith("dynamo_lite.")}
    with open(os.environ["DL_PROBE_OUT"], "w") as f:
        json.dump(loaders, f)
'''

FAILING = '''
import torch

def test_compiled_and_failing():
    x = torch.ones(2)
    total = int((x + 1).sum().item())
    assert total == 5
'''


def test_dynamo_lite_modules_are_not_assert_rewritten_but_the_users_tests_are(tmp_path):
    dist = tmp_path / "site" / "dynamo_lite-0.0.0.dist-info"
    dist.mkdir(parents=True)
    for name, text in DIST.items():
        (dist / name).write_text(text)
    (tmp_path / "conftest.py").write_text(LOADERS)
    (tmp_path / "test_failing.py").write_text(textwrap.dedent(FAILING))
    out = tmp_path / "loaders.json"
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_DISABLE_PLUGIN_AUTOLOAD"}
    env.update(PYTHONPATH=os.pathsep.join([ROOT, str(tmp_path / "site")]), DL_PROBE_OUT=str(out))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--dl"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "assert 4 == 5" in proc.stdout  # the user's test module is still rewritten
    loaders = json.loads(out.read_text())
    assert "dynamo_lite.api" in loaders and "dynamo_lite.convert_frame" in loaders  # the compiler ran
    rewritten = {name for name, loader in loaders.items() if loader == "AssertionRewritingHook"}
    # only what pytest imports before the plugin's code runs: the package and its config module
    # (the plugin module itself is read by pytest's importer but not rewritten: PYTEST_DONT_REWRITE)
    assert rewritten <= {"dynamo_lite", "dynamo_lite.config", "dynamo_lite.pytest_plugin"}, sorted(rewritten)
