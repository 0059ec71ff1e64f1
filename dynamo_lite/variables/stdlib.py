"""Standard-library objects that model code reads, answered at trace time.

The standard library is not traced (skipfiles.py), so a call into it breaks
the graph.  A few read-only queries that real models make on every forward
are answered here instead, from the real value, with a guard on what was read:

- ``os.environ`` (``get``, ``[]``, ``in``): each key read is guarded on its value;
  writes break.
- ``inspect.signature(fn)`` of a function, bound method or module forward
  known at trace time: the real Signature (immutable) as a constant, so
  ``len(sig.parameters)`` and ``"name" in sig.parameters`` fold.

Tested by tests/torch/test_models.py (test_library_reads_*).
"""
from __future__ import annotations

import inspect
import os
import types

from .. import graph_breaks as gb
from ..exc import GraphBreak
from .base import VariableTracker
from .constant import ConstantVariable, NONE
from .functions import UserFunctionVariable, UserMethodVariable
from .methods import ContainerMethodVariable
from .nn_module import NNModuleVariable


class EnvironVariable(VariableTracker):
    """``os.environ``: reads of single keys, each guarded."""

    def python_type(self):
        return type(os.environ)

    def describe(self):
        return "os.environ"

    def _read(self, tx, key_var):
        if not key_var.is_python_constant() or not isinstance(key_var.as_python_constant(), str):
            raise GraphBreak(gb.VALUE_UNKNOWN, "os.environ key not known at trace time")
        key = key_var.as_python_constant()
        value = os.environ.get(key)
        tx.output.add_expr_guard(f"___sys.modules['os'].environ.get({key!r}) == {value!r}")
        return key, value

    def var_getattr(self, tx, name):
        if name in ("get", "__getitem__", "__contains__"):
            return ContainerMethodVariable(self, name)
        raise GraphBreak(gb.UNSUPPORTED_ATTRIBUTE, f"os.environ.{name}")

    def call_method(self, tx, name, args, kwargs):
        if kwargs or not args:
            raise GraphBreak(gb.UNSUPPORTED_CALL, f"os.environ.{name}() with these arguments")
        if name == "get" and len(args) <= 2:
            _, value = self._read(tx, args[0])
            return ConstantVariable(value) if value is not None else (args[1] if len(args) == 2 else NONE)
        if name == "__contains__" and len(args) == 1:
            _, value = self._read(tx, args[0])
            return ConstantVariable(value is not None)
        if name == "__getitem__" and len(args) == 1:
            key, value = self._read(tx, args[0])
            if value is None:
                raise GraphBreak(gb.OPERATION_RAISES, f"KeyError: {key!r}")
            return ConstantVariable(value)
        raise GraphBreak(gb.SIDE_EFFECT, f"os.environ.{name}() is not a plain read")

    def reconstruct(self, cg):
        if self.source is not None:
            return super().reconstruct(cg)
        cg.load_const(os)
        cg.load_attr("environ")

    def can_reconstruct(self):
        return True


class SignatureFunctionVariable(VariableTracker):
    """``inspect.signature``: evaluated on callables whose code is known at trace time."""

    def python_type(self):
        return types.FunctionType

    def describe(self):
        return "inspect.signature"

    def as_python_constant(self):
        return inspect.signature

    def is_python_constant(self):
        return True

    def call_function(self, tx, args, kwargs):
        if len(args) != 1 or kwargs:
            raise GraphBreak(gb.UNSUPPORTED_CALL, "inspect.signature() with options")
        fn = args[0]
        if isinstance(fn, UserFunctionVariable):
            return ConstantVariable(inspect.signature(fn.fn))
        if isinstance(fn, UserMethodVariable) and isinstance(fn.fn, types.FunctionType):
            sig = inspect.signature(fn.fn)
            params = list(sig.parameters.values())
            if not params or params[0].kind not in (params[0].POSITIONAL_ONLY, params[0].POSITIONAL_OR_KEYWORD):
                raise GraphBreak(gb.UNSUPPORTED_CALL, "inspect.signature() of a method without a self parameter")
            return ConstantVariable(sig.replace(parameters=params[1:]))
        if isinstance(fn, NNModuleVariable) and fn.source is not None:
            # signature of a callable instance: its __call__ (Module._wrapped_call_impl(*args, **kwargs))
            return ConstantVariable(inspect.signature(fn.value))
        raise GraphBreak(gb.UNSUPPORTED_CALL, f"inspect.signature() of {fn.describe()}")

    def reconstruct(self, cg):
        cg.load_const(inspect.signature)

    def can_reconstruct(self):
        return True


def library_variable(value, source):
    """The tracker for a library object modelled here, or None."""
    if value is os.environ:
        return EnvironVariable(source)
    if value is inspect.signature:
        return SignatureFunctionVariable(source)
    return None


__all__ = ["EnvironVariable", "SignatureFunctionVariable", "library_variable"]
