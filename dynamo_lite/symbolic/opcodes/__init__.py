"""The opcode table: one handler per opname, grouped by family in this package.

``register("LOAD_FAST")`` checks the name is a real opcode of a supported Python
(bytecode_compat.KNOWN_OPNAMES) and that it is registered once; registration is by version:
a handler is installed only for the opcodes of the running Python (``bytecode_compat.has_opcode``),
so handlers for another version's opcodes are inert here.  ``missing_handlers()`` lists the opcodes of this
Python with neither a handler nor an entry in ``unsupported.UNSUPPORTED`` (the
self-check, kept empty by tests/unit/test_opcode_table.py).
"""
from __future__ import annotations

from typing import Callable

from ... import bytecode_compat
from ...exc import InternalError

HANDLERS: dict[str, Callable] = {}
_REGISTERED: set = set()  # every name registered (installed or not), for the duplicate check


def register(*opnames: str):
    def deco(fn):
        for name in opnames:
            if name not in bytecode_compat.KNOWN_OPNAMES:
                raise InternalError(f"{name} is not an opcode of this Python (nor of another supported one)")
            if name in _REGISTERED:
                raise InternalError(f"{name} registered twice")
            _REGISTERED.add(name)
            if bytecode_compat.has_opcode(name):
                HANDLERS[name] = fn
        return fn
    return deco


def missing_handlers() -> list[str]:
    from .unsupported import UNSUPPORTED  # lazy: unsupported.py registers through this package (cycle)

    return sorted(n for n in bytecode_compat.OPNAMES if n not in HANDLERS and n not in UNSUPPORTED
                  and not n.startswith("<") and n != "CACHE")


from . import load_store, stack, arith, build, calls, control, match, unsupported  # noqa: E402,F401
