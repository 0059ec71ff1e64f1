"""Every config knob works by plain assignment, has an environment variable, and docs/api.md
lists both.

Each knob is set by assignment (restored after) and its effect observed on a compile;
environment variables are checked in subprocesses (they are read when config is imported).
"""
import json
import os
import re
import subprocess
import sys
import types

import pytest
import torch

import dynamo_lite
from dynamo_lite import config
from dynamo_lite import graph_breaks as gb
from dynamo_lite.backends import _BACKENDS, register_backend
from dynamo_lite.exc import BackendCompilerFailed
from dynamo_lite.testing import CompileCounter, recording

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

KNOBS = sorted(name for name, value in vars(config).items()
               if not name.startswith("_") and name != "annotations" and not callable(value)
               and not isinstance(value, types.ModuleType))


@pytest.fixture
def assigned():
    """Assign knobs plainly in the test; every knob gets its value back afterwards."""
    saved = {name: getattr(config, name) for name in KNOBS}
    yield config
    for name, value in saved.items():
        setattr(config, name, value)


def _breaks(fn, *args, backend="eager"):
    seen, rec = recording()
    with rec:
        out = dynamo_lite.compile(fn, backend=backend)(*args)
    return out, [e.break_id for e in seen if hasattr(e, "break_id")]


def test_the_knobs_are_the_documented_ones():
    assert KNOBS == sorted(config._ENV_VARS), "a knob without an environment variable (or the reverse)"
    assert KNOBS == sorted(["cache_size_limit", "recompile_limit", "suppress_errors", "raise_internal_errors",
                            "max_traced_instructions", "max_inline_depth", "default_backend", "optimize_ddp",
                            "capture_scalar_outputs", "capture_dynamic_output_shape_ops", "repeated_blocks",
                            "persistent_cache", "cache_dir", "cache_max_mb", "aot_libraries"])


def test_cache_size_limit_and_its_alias_by_assignment(assigned):
    def f(x):
        return x * 2

    for name in ("cache_size_limit", "recompile_limit"):
        dynamo_lite.reset()
        setattr(assigned, name, 1)
        assert config.cache_size_limit == config.recompile_limit == 1
        counter = CompileCounter()
        cf = dynamo_lite.compile(f, backend=counter)
        for dtype in (torch.float32, torch.float64, torch.int64):
            x = torch.ones(2, dtype=dtype)
            assert torch.equal(cf(x), f(x))
        assert counter.frame_count == 1  # the limit held: the other dtypes ran eagerly


def _raising(gm, example_inputs):
    raise RuntimeError("no")


def test_suppress_errors_by_assignment(assigned):
    def f(x):
        return x + 1

    with pytest.raises(BackendCompilerFailed):
        dynamo_lite.compile(f, backend=_raising)(torch.ones(2))
    assigned.suppress_errors = True
    dynamo_lite.reset()
    out, ids = _breaks(f, torch.ones(2), backend=_raising)
    assert torch.equal(out, torch.full((2,), 2.0)) and ids == [gb.BACKEND_FAILED]


def test_raise_internal_errors_by_assignment(assigned, monkeypatch):
    from dynamo_lite.convert_frame import FrameConverter

    def broken(self, *args):
        raise RuntimeError("a dynamo_lite bug")

    monkeypatch.setattr(FrameConverter, "_compile_inner", broken)

    def f(x):
        return x - 1

    assigned.raise_internal_errors = True
    with pytest.raises(RuntimeError, match="a dynamo_lite bug"):
        dynamo_lite.compile(f, backend="eager")(torch.ones(2))
    assigned.raise_internal_errors = False
    dynamo_lite.reset()
    out, ids = _breaks(f, torch.ones(2))
    assert torch.equal(out, torch.zeros(2)) and ids == [gb.INTERNAL_ERROR]


def test_max_traced_instructions_by_assignment(assigned):
    def f(x):
        for _ in range(50):
            x = x + 1
        return x

    assert _breaks(f, torch.ones(2))[1] == []
    assigned.max_traced_instructions = 40
    dynamo_lite.reset()
    out, ids = _breaks(f, torch.ones(2))
    assert torch.equal(out, torch.full((2,), 51.0)) and ids == [gb.TRACE_TOO_LONG]


def _inner(x):
    return x * 3


def _outer(x):
    return _inner(x) + 1


def test_max_inline_depth_by_assignment(assigned):
    assert _breaks(_outer, torch.ones(2))[1] == []
    assigned.max_inline_depth = 0
    dynamo_lite.reset()
    out, ids = _breaks(_outer, torch.ones(2))
    assert torch.equal(out, torch.full((2,), 4.0)) and gb.INLINING_TOO_DEEP in ids


def test_default_backend_by_assignment(assigned):
    counter = CompileCounter()
    register_backend("knob_counter", counter)
    try:
        assigned.default_backend = "knob_counter"
        assert torch.equal(dynamo_lite.compile(lambda x: x.cos())(torch.zeros(2)), torch.ones(2))
        assert counter.frame_count == 1
    finally:
        _BACKENDS.pop("knob_counter", None)


ENV_VALUES = {"cache_size_limit": "3", "recompile_limit": "3", "suppress_errors": "1",
              "raise_internal_errors": "1", "max_traced_instructions": "123", "max_inline_depth": "4",
              "default_backend": "aot_eager", "optimize_ddp": "0", "capture_scalar_outputs": "0",
              "capture_dynamic_output_shape_ops": "0", "repeated_blocks": "marked",
              "persistent_cache": "0", "cache_dir": "/tmp/dl-cache-from-env", "cache_max_mb": "7", "aot_libraries": "1"}


PARSED = {"aot_libraries": True}  # knobs of more than one type: the value ENV_VALUES' text gives


def _config_in_subprocess(env: dict) -> dict:
    code = ("import json, dynamo_lite.config as c; "
            f"print(json.dumps({{k: getattr(c, k) for k in {KNOBS!r}}}))")
    full = {k: v for k, v in os.environ.items() if not k.startswith("DYNAMO_LITE_")}
    full.update(env, PYTHONPATH=ROOT)
    proc = subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def test_every_knob_has_an_environment_variable():
    defaults = _config_in_subprocess({})
    assert defaults["suppress_errors"] is False and defaults["cache_size_limit"] == 8
    env = {config._ENV_VARS[k]: v for k, v in ENV_VALUES.items()}
    values = _config_in_subprocess(env)
    assert defaults["aot_libraries"] == "background"  # (1 and 0 read as booleans: PARSED)
    for name in KNOBS:
        expected = PARSED[name] if name in PARSED else type(defaults[name])(
            int(ENV_VALUES[name]) if isinstance(defaults[name], (bool, int)) else ENV_VALUES[name])
        assert values[name] == expected != defaults[name], name


@pytest.mark.parametrize("var, text, expected", [
    ("DYNAMO_LITE_MAX_INLINE_DEPTH", "deep", "expected an integer"),
    ("DYNAMO_LITE_AOT_LIBRARIES", "later", "expected 1, 0 or background"),
])
def test_an_environment_value_that_does_not_parse_names_the_variable(var, text, expected):
    code = "import dynamo_lite.config"
    env = dict(os.environ, PYTHONPATH=ROOT, **{var: text})
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and f"{var}={text!r}: {expected}" in proc.stderr


def test_docs_list_every_knob_with_its_environment_variable():
    text = open(os.path.join(ROOT, "docs", "api.md")).read()
    rows = dict(re.findall(r"^\| `(\w+)` \| [^|]+ \| `(DYNAMO_LITE_\w+)` \|", text, re.M))
    assert rows == config._ENV_VARS
