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


def test_handlers_are_installed_by_version():
    """Handlers of another supported Python's opcodes are registered but not installed, and
    every installed one is a real opcode of this Python (not a pseudo or instrumented one)."""
    from dynamo_lite import bytecode_compat

    assert set(HANDLERS) <= bytecode_compat.OPNAMES
    other = bytecode_compat.KNOWN_OPNAMES - bytecode_compat.OPNAMES
    assert other and not other & set(HANDLERS)
