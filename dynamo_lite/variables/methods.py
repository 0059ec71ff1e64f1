"""Bound methods of trackers that answer ``call_method`` themselves.

``obj.name`` on a container, tensor or constant is a ``BoundMethodOfVariable``:
calling it is ``obj.call_method(tx, name, ...)``, and it rebuilds as
``obj.name`` in generated code.  The subclasses only give the real type
(``types.BuiltinMethodType``); ``ConstantMethodVariable`` is itself a constant
(``"a,b".split``).  This sits just above base.py (below constant.py) so that every container,
tensor and constant tracker can make one without importing functions.py.
Tested by tests/semantics/test_containers.py and tests/semantics/test_builtins.py.
"""
from __future__ import annotations

import types

from .base import VariableTracker


class BoundMethodOfVariable(VariableTracker):
    """``obj.name`` for a tracker that answers ``call_method`` itself."""

    def __init__(self, obj: VariableTracker, name: str):
        super().__init__()
        self.obj = obj
        self.name = name

    def _repr_body(self):
        return f"{self.obj!r}.{self.name}"

    def describe(self):
        return f"method {self.name} of {self.obj.describe()}"

    def call_function(self, tx, args, kwargs):
        return self.obj.call_method(tx, self.name, args, kwargs)

    def var_getattr(self, tx, name):
        if name == "__self__":
            return self.obj
        if name == "__name__":
            return self.wrap_constant(self.name)
        return super().var_getattr(tx, name)

    def reconstruct(self, cg):
        cg.reconstruct(self.obj)
        cg.load_attr(self.name)

    def can_reconstruct(self):
        return self.obj.can_reconstruct()


class TensorMethodVariable(BoundMethodOfVariable):
    def python_type(self):
        return types.BuiltinMethodType


class ContainerMethodVariable(BoundMethodOfVariable):
    def python_type(self):
        return types.BuiltinMethodType


class ConstantMethodVariable(BoundMethodOfVariable):
    def python_type(self):
        return types.BuiltinMethodType

    def is_python_constant(self):
        return True

    def as_python_constant(self):
        return getattr(self.obj.as_python_constant(), self.name)


__all__ = ["BoundMethodOfVariable", "TensorMethodVariable", "ContainerMethodVariable", "ConstantMethodVariable"]
