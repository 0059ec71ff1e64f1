"""dynamo_lite/symbolic/opcodes: every opcode of this Python has a handler or a listed reason,
and registration refuses names that are not opcodes or are registered twice."""
import pytest

from dynamo_lite.exc import InternalError
from dynamo_lite.symbolic.opcodes import HANDLERS, missing_handlers, register


def test_every_opcode_has_a_handler_or_a_reason():
    assert missing_handlers() == []
    assert {"LOAD_FAST", "CALL", "BINARY_OP", "FOR_ITER"} <= set(HANDLERS)


def test_register_refuses_unknown_and_duplicate_names():
    with pytest.raises(InternalError, match="not an opcode"):
        register("NOT_AN_OPCODE")(lambda tx, inst: None)
    with pytest.raises(InternalError, match="registered twice"):
        register("LOAD_FAST")(lambda tx, inst: None)
