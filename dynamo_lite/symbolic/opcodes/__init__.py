"""The opcode table: one handler per opname, grouped by family in this package.

``register("LOAD_FAST")`` checks the name is a real opcode of this Python and
that it is registered once.  ``missing_handlers()`` lists the opcodes of this
Python with neither a handler nor an entry in ``unsupported.UNSUPPORTED`` (the
self-check, kept empty by tests/unit/test_opcode_table.py).
"""
from __future__ import annotations

import dis
from typing import Callable

from ...exc import InternalError

HANDLERS: dict[str, Callable] = {}


def register(*opnames: str):
    def deco(fn):
        for name in opnames:
            if name not in dis.opmap:
                raise InternalError(f"{name} is not an opcode of this Python")
            if name in HANDLERS:
                raise InternalError(f"{name} registered twice")
            HANDLERS[name] = fn
        return fn
    return deco


def missing_handlers() -> list[str]:
    from .unsupported import UNSUPPORTED  # lazy: unsupported.py registers through this package (cycle)

    return sorted(n for n in dis.opmap if n not in HANDLERS and n not in UNSUPPORTED
                  and not n.startswith("<") and n != "CACHE")


from . import load_store, stack, arith, build, calls, control, unsupported  # noqa: E402,F401
