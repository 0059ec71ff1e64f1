"""Python module objects (math, operator, torch.nn.functional, a user module).

An attribute read from a module is wrapped with a source on the module
(``tx.wrap``); a flag or setting of a trusted module (``torch.backends.cudnn.enabled``)
is guarded by value (``guard_attr_value``, also used for class attributes).
Tested by tests/semantics/test_functions.py and tests/unit/test_guards.py.
"""
from __future__ import annotations

import types

from .. import graph_breaks as gb
from .. import guards
from ..exc import GraphBreak
from ..source import AttrSource
from .base import VariableTracker
from .constant import ConstantVariable


class PythonModuleVariable(VariableTracker):
    """A module object (math, operator, torch.nn.functional, a user module)."""

    def __init__(self, module: types.ModuleType, source=None):
        super().__init__(source)
        self.module = module

    def _repr_body(self):
        return self.module.__name__

    def python_type(self):
        return types.ModuleType

    def describe(self):
        return f"module {self.module.__name__}"

    def as_python_constant(self):
        return self.module

    def is_python_constant(self):
        return True

    def var_getattr(self, tx, name):
        try:
            value = getattr(self.module, name)
        except AttributeError as e:
            raise GraphBreak(gb.MISSING_ATTRIBUTE, f"module {self.module.__name__!r} has no attribute {name!r}") from e
        trusted = self.module.__name__.split(".")[0] in ("torch", "math", "operator", "functools",
                                                          "itertools", "collections", "typing", "builtins")
        if trusted and type(value) in (bool, int, float, str, type(None)):
            # a flag or setting (torch.backends.cudnn.enabled, ...) may change, and so may a
            # constant (math.pi = 3.0 runs): its value is guarded
            guard_attr_value(tx, self.module, name, value)
            return ConstantVariable(value)
        source = None if trusted or self.source is None else AttrSource(self.source, name)
        return tx.wrap(value, source)

    def reconstruct(self, cg):
        if self.source is not None:
            return super().reconstruct(cg)
        cg.load_const(self.module)

    def can_reconstruct(self):
        return True



def guard_attr_value(tx, owner, name: str, value) -> None:
    """Guard ``owner.name`` (owner: a class or module reached without a source, held as a
    constant) by value: equal scalars (NaN by identity), else the same object."""
    if type(value) in (bool, int, str, type(None)) or (type(value) is float and value == value):
        for text in (f"type({{o}}.{name}) is {{t}}", f"{{o}}.{name} == {{v}}"):
            tx.output.add_guard(guards.ExprGuard(text, (("o", owner), ("t", type(value)), ("v", value))))
    elif name.isidentifier():
        tx.output.add_guard(guards.ConstAttrIsGuard(owner, name, value))


__all__ = ["PythonModuleVariable", "guard_attr_value"]
