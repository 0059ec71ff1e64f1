"""The demo (python -m dynamo_lite.demo) runs in-process and prints a captured graph,
its guards, no graph breaks, equal outputs and timings.  Covers dynamo_lite/demo.py."""
import pytest

from dynamo_lite import demo

try:
    import transformers  # noqa: F401
except ImportError:  # pragma: no cover - depends on the environment
    transformers = None


def _run(capsys, *argv):
    code = demo.main(["--calls", "2", *argv])
    out = capsys.readouterr().out
    assert code == 0, out
    return out


def _check_common(out):
    assert "== Captured graph 0" in out
    assert "ops" in out
    assert "== Guards of graph 0" in out
    assert "== Graph breaks: 0" in out
    assert "compiled == eager: True" in out
    assert "eager:" in out and "compiled (eager):" in out


def test_demo_nanogpt_prints_graph_guards_and_timings(capsys):
    out = _run(capsys, "--model", "nanogpt")
    _check_common(out)
    assert "nanoGPT-style" in out
    # the model's own forward is the captured frame (not its submodules one by one)
    head = next(line for line in out.splitlines() if line.startswith("== Captured graph 0"))
    assert "of forward (" in head and "demo.py" in head, head
    assert int(head.split(": ")[-1].split()[0]) >= 30, head
    assert "class GraphModule" in out and "def forward" in out  # readable FX code
    assert "torch.nn.functional.linear" in out or "linear" in out


@pytest.mark.skipif(transformers is None, reason="transformers is not installed")
def test_demo_default_model_is_gpt2(capsys):
    out = _run(capsys, "--no-graph")
    _check_common(out)
    assert "GPT2LMHeadModel" in out
    assert "class GraphModule" not in out  # --no-graph
    assert "more (--all-guards prints them all)" in out
