"""dynamo_lite/exc.py: the three failure kinds take (break_id, reason, *, ...) with registered ids,
and an InternalError (our bug) falls back to eager with a logged DL0026, or is raised in tests."""
import logging

import pytest
import torch

import dynamo_lite
from dynamo_lite import config, graph_breaks as gb
from dynamo_lite.exc import GraphBreak, InternalError, SkipFrame, Unsupported, UserFrame
from dynamo_lite.report import events
from dynamo_lite.symbolic.translator import InstructionTranslator
from dynamo_lite.testing import CompileCounter


def test_failures_take_break_id_then_reason():
    stack = [UserFrame("user.py", 3, "f", "y = x.item()")]
    brk = GraphBreak(gb.DATA_DEPENDENT, "x.item()", user_stack=stack)
    skip = SkipFrame(gb.TRACE_TOO_LONG, "too long", permanent=False)
    err = Unsupported(brk.break_id, brk.reason, user_stack=brk.user_stack)
    assert (brk.break_id, brk.reason, brk.user_stack, brk.user_exception, brk.restart_step) == (
        "DL0007", "x.item()", stack, False, None)
    assert (skip.break_id, skip.permanent, skip.user_stack) == ("DL0018", False, [])
    assert str(err).startswith("[DL0007] x.item() at user.py:3\nUser stack (most recent call last):")


@pytest.mark.parametrize("make", [GraphBreak, SkipFrame, Unsupported])
def test_an_unregistered_break_id_is_our_bug(make):
    with pytest.raises(InternalError, match="DL9999"):
        make("DL9999", "reason")


def _broken_run(self):
    raise InternalError("an invariant of the translator does not hold")


def test_internal_error_falls_back_to_eager_and_is_logged(monkeypatch, caplog):
    monkeypatch.setattr(InstructionTranslator, "run", _broken_run)
    seen = []
    cnt = CompileCounter()
    x = torch.randn(3)
    with config.patch(raise_internal_errors=False), events.collecting(seen.append), \
            caplog.at_level(logging.WARNING, logger="dynamo_lite"):
        out = dynamo_lite.compile(lambda t: t * 2, backend=cnt)(x)
    torch.testing.assert_close(out, x * 2)
    assert cnt.frame_count == 0
    assert [e.break_id for e in seen if type(e).__name__ == "FallbackEvent"] == [gb.INTERNAL_ERROR]
    assert any("internal error InternalError" in r.getMessage() for r in caplog.records)


def test_internal_error_is_raised_when_asked(monkeypatch):
    monkeypatch.setattr(InstructionTranslator, "run", _broken_run)
    with config.patch(raise_internal_errors=True), pytest.raises(InternalError, match="invariant"):
        dynamo_lite.compile(lambda t: t * 2, backend="eager")(torch.randn(3))


def test_the_translator_refuses_a_value_that_is_not_a_tracker():
    with pytest.raises(InternalError, match="not a tracker"):
        InstructionTranslator.push(type("FakeTx", (), {"stack": []})(), 3)
