"""Values the interpreter only passes around, with no operations on them (ObjectVariable), and
``id()`` of an object whose address is only known when the code runs (IdVariable).

Tested by tests/semantics/test_container_values.py and tests/semantics/test_functools_copy_identity.py.
"""
from __future__ import annotations

from typing import Any

import torch

from .base import HeldValueVariable, IdentityKey, VariableTracker
from ..source import WeakRefCallSource


class ObjectVariable(HeldValueVariable):
    """A value the interpreter only passes around (no operations on it)."""

    def __init__(self, value: Any, source=None):
        super().__init__(source)
        self.value = value

    def python_type(self):
        return type(self.value)

    def identity_key(self):
        if self.source is not None:  # (a real object, one tracker per object: builder._aliased)
            return IdentityKey(self, ("obj", id(self.value)))
        return super().identity_key()

    def describe(self):
        return f"{type(self.value).__name__} object"


class WeakRefVariable(ObjectVariable):
    """A ``weakref.ref`` read from outside (nn.RNNBase's ``_flat_weight_refs``).  Calling it
    reads the object it refers to now, at ``ref()`` (WeakRefCallSource), when that is None or a
    parameter or module: the guards then hold what the trace saw of it."""

    def call_function(self, tx, args, kwargs):
        if args or kwargs or self.source is None:
            return super().call_function(tx, args, kwargs)
        referent = self.value()
        # a dead one, or a parameter or module (their owner keeps them alive as eager's run
        # would); another object may be alive now only through what the compiler holds while it
        # works (a tensor the frame deleted): Python calls that weakref
        if referent is not None and not isinstance(referent, (torch.nn.Parameter, torch.nn.Module)):
            return super().call_function(tx, args, kwargs)
        return tx.wrap(referent, WeakRefCallSource(self.source))


class IdVariable(VariableTracker):
    """``id(obj)`` of an object made in the trace, a tensor or a container: its value is the
    object's address in the real run, so it is not known at trace time.  Two of them compare
    (``==``, ``!=``) by the identity of their objects when the trace knows it (arith.py); as a
    dict key or set element it is keyed by its object's identity (mappings.IdKey, checked by
    mappings.checked_key); anything else breaks.  Generated code rebuilds it as ``id(obj)``.

    Attributes:
        obj: the tracker of the object whose id this is.
    """

    def __init__(self, obj: VariableTracker):
        super().__init__()
        self.obj = obj

    def _repr_body(self):
        return repr(self.obj)

    def describe(self):
        return f"id() of {self.obj.describe()}"

    def python_type(self):
        return int

    def reconstruct(self, cg):
        cg.load_callable(id)
        cg.reconstruct(self.obj)
        cg.call(1)

    def can_reconstruct(self):
        return self.obj.can_reconstruct()


__all__ = ["ObjectVariable", "IdVariable"]
