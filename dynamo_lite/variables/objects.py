"""Values the interpreter only passes around, with no operations on them (ObjectVariable).

Tested by tests/semantics/test_container_values.py.
"""
from __future__ import annotations

from typing import Any

from .base import VariableTracker


class ObjectVariable(VariableTracker):
    """A value the interpreter only passes around (no operations on it)."""

    def __init__(self, value: Any, source=None):
        super().__init__(source)
        self.value = value

    def python_type(self):
        return type(self.value)

    def describe(self):
        return f"{type(self.value).__name__} object"

    def reconstruct(self, cg):
        if self.source is not None:
            return super().reconstruct(cg)
        cg.load_const(self.value)

    def can_reconstruct(self):
        return True


__all__ = ["ObjectVariable"]
