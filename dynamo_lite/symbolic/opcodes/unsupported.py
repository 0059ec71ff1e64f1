"""Opcodes the interpreter does not trace, each with the reason.

Reaching one breaks the graph at that instruction (Python runs it) with
break id DL0017, instead of failing with a missing-handler error.  Most are
unreachable in normal-flow tracing (exception handlers, module and class
bodies, async code).
"""
from __future__ import annotations

from ... import bytecode_compat
from ... import graph_breaks as gb
from ...exc import GraphBreak
from . import register

UNSUPPORTED = {
    "CHECK_EG_MATCH": "except* runs in Python",
    "BEFORE_ASYNC_WITH": "async code is not traced",
    "GET_AWAITABLE": "async code is not traced",
    "GET_AITER": "async code is not traced",
    "GET_ANEXT": "async code is not traced",
    "END_ASYNC_FOR": "async code is not traced",
    "LOAD_NAME": "module and class bodies are not traced",
    "STORE_NAME": "module and class bodies are not traced",
    "DELETE_NAME": "module and class bodies are not traced",
    "SETUP_ANNOTATIONS": "module and class bodies are not traced",
    "DELETE_GLOBAL": "deleting a global",
    "DELETE_DEREF": "deleting a closure variable",
}
# the 3.11-only ones, named by bytecode_compat (by kind)
_REASON_OF_KIND = {
    "except*": "except* runs in Python",
    "async": "async code is not traced",
    "class body": "class bodies are not traced",
    "import *": "import * is not traced",
    "interactive": "interactive mode is not traced",
    "throw into yield from": "an exception thrown into a `yield from` is handled by Python",
    "internal": "an interpreter-internal opcode (never in user code)",
}
UNSUPPORTED.update({name: _REASON_OF_KIND[kind] for name, kind in bytecode_compat.UNSUPPORTED_OPS.items()})


def _unsupported(tx, inst):
    raise GraphBreak(gb.UNSUPPORTED_BYTECODE, f"{inst.opname}: {UNSUPPORTED[inst.opname]}")


register(*UNSUPPORTED)(_unsupported)
