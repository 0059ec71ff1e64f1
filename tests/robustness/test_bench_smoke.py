"""The bench scripts keep working: each runs in a tiny mode and prints its table.

No timing is asserted (speed lives in bench/ and docs/performance.md); these
tests only check that the scripts run end to end, that both systems compile
the cases in one process (overhead.py) and in worker processes (models.py),
and that results agree with eager (the scripts check it).
"""
import json
import os
import subprocess
import sys

import pytest
import torch

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "bench")


def _run(*args, timeout=600):
    proc = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def test_overhead_quick_both_systems_in_one_process():
    out = _run(os.path.join(BENCH, "overhead.py"), "--quick", "--no-write", "--cases", "a_add1,e1_break1")
    assert "a_add1" in out and "e1_break1" in out
    assert "hook active, code SKIP" in out


def test_models_quick_worker_reports_everything():
    # one worker (dynamo_lite): the torch.compile worker is the same code
    out = _run(os.path.join(BENCH, "models.py"), "--quick", "--no-write", "--models", "mlp",
               "--systems", "dynamo_lite", "--json-rows")
    row = json.loads(out.strip().splitlines()[-1])[0]
    assert "error" not in row, row["error"]
    assert row["correct"] and not row["recompiled_on_hits"]
    assert (row["graphs"], row["breaks"], row["ops"]) == (1, 0, 7)
    assert row["fake_alive"] == 0  # the trace's FakeTensors are freed
    assert row["extra_tensor_mb"] == 0  # no copies of parameters


@pytest.mark.parametrize("script", ["inductor.py", "run_all.py", "distributed.py"])
def test_other_scripts_parse_their_arguments(script):
    assert "usage" in _run(os.path.join(BENCH, script), "--help")


def test_dynamic_quick_sweep_both_systems():
    out = _run(os.path.join(BENCH, "dynamic.py"), "--quick", "--no-write", "--sweeps", "int_arg")
    line = next(li for li in out.splitlines() if li.startswith("int_arg"))
    assert "dynamo_lite:  2 graphs" in line and line.count("equal True") == 2, line
    assert "cache-hit overhead" in out


def test_hf_models_worker_reports_a_training_step():
    # one worker (dynamo_lite, GPT-2 training step with labels): the torch.compile worker is the same code
    out = _run(os.path.join(BENCH, "hf_models.py"), "--worker", "gpt2", "train", "dynamo_lite")
    row = json.loads(out.strip().splitlines()[-1])
    assert row["correct"] and row["recompiles"] == 0 and row["limit_warns"] == 0
    # (the warning transformers logs before the loss: made before the loss, which may raise in a
    # graph that drew dropout's numbers; torch.compile: 2 graphs, 3 breaks too)
    assert (row["graphs"], row["breaks"]) == (2, 3)


def test_hf_models_wide_set_builds_and_a_worker_reports_a_vision_model():
    # --wide: every entry builds (config class, model class and inputs of its kind) without a worker
    sys.path.insert(0, BENCH)
    try:
        import hf_models
    finally:
        sys.path.remove(BENCH)
    kinds = {hf_models.WIDE[name][0] for name in hf_models.WIDE}
    assert kinds == {"lm", "mlm", "s2s", "image", "ctc"}
    for name in ("resnet", "wav2vec2"):
        model, twin, kwargs = hf_models.build(name, "train")
        results = []
        for m in (model, twin):  # (dropout: the worker seeds each step the same way)
            torch.manual_seed(1)
            results.append(hf_models._step(m, kwargs, "train"))
        assert hf_models._same(*results)
    out = _run(os.path.join(BENCH, "hf_models.py"), "--worker", "vit", "eval", "dynamo_lite")
    row = json.loads(out.strip().splitlines()[-1])
    assert row["correct"] and row["recompiles"] == 0 and (row["graphs"], row["breaks"]) == (1, 0)


def test_numpy_code_quick_both_systems():
    out = _run(os.path.join(BENCH, "numpy_code.py"), "--quick")
    row = next(li for li in out.splitlines() if li.startswith("dynamo_lite"))
    assert row.split()[-1] == "0"  # no result differs from eager


def test_python_breadth_quick_both_systems():
    out = _run(os.path.join(BENCH, "python_breadth.py"), "--quick")
    line = next(li for li in out.splitlines() if li.startswith("differ from eager"))
    assert line.startswith("differ from eager: dynamo_lite 0,"), out[-2000:]


def test_suite_breaks_counts_one_break_per_system_at_the_same_place(tmp_path):
    # a two-test project that breaks where both systems must (.item() decides a branch, and the
    # asserts take bool() of tensors): the same breaks at the same places on both sides
    (tmp_path / "test_tiny.py").write_text(
        "import torch\n\n"
        "def step(x):\n"
        "    if x.sum().item() > 0:\n"
        "        return x + 1\n"
        "    return x - 1\n\n"
        "def test_breaks():\n"
        "    assert (step(torch.ones(2) * 2) == 3).all()\n\n"
        "def test_plain():\n"
        "    assert (torch.ones(2) + 1 == 2).all()\n")
    out = _run(os.path.join(BENCH, "suite_breaks.py"), "--rootdir", str(tmp_path), "--out", str(tmp_path / "r"),
               "--", "test_tiny.py")
    rows = {li.split()[0]: li.split()[1:] for li in out.splitlines() if li[:1].isalpha() and len(li.split()) == 3}
    assert rows["passed"] == ["2", "2"] and rows["breaks"][0] == rows["breaks"][1] != "0", out
    assert "places where dynamo_lite breaks more than torch.compile (top 25):\n  ours  torch" in out
    assert "test_tiny.py:4" not in out.split("breaks more than torch.compile")[1].split("places where torch")[0], out


def test_capture_depth_runs_every_system_and_agrees_with_eager():
    out = _run(os.path.join(BENCH, "capture_depth.py"), "--depths", "2")
    rows = [line.split() for line in out.splitlines() if line.strip().startswith("2 ")]
    assert [r[1] for r in rows] == ["dynamo_lite", "dl-no-repeat", "torch.compile", "tc+nested"]
    assert all(r[-1] == "True" and r[-2] == "1" for r in rows)  # correct, one graph


def test_hf_speed_worker_reports_first_call_and_framework_overhead():
    # one worker (dynamo_lite, llama eval): the torch.compile worker is the same code
    out = _run(os.path.join(BENCH, "hf_speed.py"), "--worker", "llama", "dynamo_lite", "--rounds", "2")
    row = json.loads(out.strip().splitlines()[-1])
    assert row["correct"] and row["graphs"] == 1 and row["recompiles"] == 0
    assert row["first_call_s"] > 0 and "framework_us" in row and "hit_us" in row
