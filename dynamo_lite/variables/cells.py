"""Closure cells (CellVariable): of the frame being compiled, of frames in the trace, and
real cells reached through a function's ``__closure__``.

Closure cells made in the trace are rebuilt as new cells (``types.CellType``)
when a function closing over them escapes, once, so functions sharing a cell
still share it.
Tested by tests/semantics/test_functions.py.
"""
from __future__ import annotations

import types
from typing import Optional

from .. import graph_breaks as gb
from ..exc import GraphBreak
from .base import VariableTracker


class CellVariable(VariableTracker):
    """A closure cell.

    kind "local": a cell of a frame in the trace (MAKE_CELL); contents tracked here.
    kind "root": a cell variable or free variable of the frame being compiled;
        generated code reaches it by name (LOAD_DEREF/STORE_DEREF).
    kind "real": a real cell object reached through a function's __closure__.
    """

    def __init__(self, kind: str, contents: Optional[VariableTracker] = None, name: str = "",
                 real_cell=None, source=None):
        super().__init__(source)
        self.kind = kind
        self.contents = contents
        self.name = name
        self.real_cell = real_cell

    def _repr_body(self):
        return f"{self.kind} {self.name} = {self.contents!r}"

    @property
    def mutable_local(self) -> bool:
        # a cell made in the trace is rebuilt once, so functions sharing it share one cell
        return self.kind == "local"

    def can_reconstruct_as_cell(self) -> bool:
        if self.kind == "root":
            return True
        if self.kind == "local":
            return self.contents is None or self.contents.can_reconstruct()
        return self.source is not None

    def reconstruct_as_cell(self, cg) -> None:
        """Push the cell object itself (for a closure tuple)."""
        if self.kind == "root":
            cg.emit_load_closure(self.name)
        else:
            cg.reconstruct(self)

    def reconstruct(self, cg):
        if self.kind == "root":
            cg.emit_load_closure(self.name)
            return
        if self.kind == "local":
            # a new cell holding the final contents: types.CellType(contents)
            cg.load_callable(types.CellType)
            if self.contents is not None:
                cg.reconstruct(self.contents)
            cg.call(0 if self.contents is None else 1)
            return
        if self.source is not None:
            self.source.reconstruct(cg)  # the real cell object (fn.__closure__[i])
            return
        raise GraphBreak(gb.CANNOT_REBUILD, "a closure cell without a source cannot be rebuilt")


__all__ = ["CellVariable"]
