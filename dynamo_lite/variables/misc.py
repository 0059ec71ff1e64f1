"""Odds and ends: Python modules, closure cells, context managers the
interpreter enters itself (grad mode, ``contextlib.nullcontext``), exception
objects, and values passed through untouched.

Closure cells made in the trace are rebuilt as new cells (``types.CellType``)
when a function closing over them escapes, once, so functions sharing a cell
still share it.
Tested by tests/test_grad_mode.py, tests/test_functions.py and tests/test_exceptions.py.
"""
from __future__ import annotations

import types
from typing import Any, Optional

import torch

from .. import graph_breaks as gb
from .. import runtime
from ..exc import GraphBreak
from .base import VariableTracker
from .constant import ConstantVariable, NONE
from ..source import AttrSource
from .containers import TupleVariable
from .methods import BoundMethodOfVariable


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
        if trusted and type(value) in (bool, int, str, type(None)):  # (floats: math.pi, torch.nan, ... stay)
            # a flag or setting (torch.backends.cudnn.enabled, ...) may change: its value is guarded
            from .user_objects import guard_attr_value

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


class ContextManagerVariable(VariableTracker):
    """A context manager whose ``with`` the interpreter runs itself (BEFORE_WITH
    calls ``enter``; the ``__exit__`` left on the stack calls ``exit``)."""

    def enter(self, tx) -> VariableTracker:
        raise NotImplementedError

    def exit(self, tx) -> VariableTracker:
        raise NotImplementedError


class NullContextVariable(ContextManagerVariable):
    """contextlib.nullcontext(enter_result)."""

    def __init__(self, enter_result: VariableTracker):
        super().__init__()
        self.enter_result = enter_result

    def python_type(self):
        import contextlib

        return contextlib.nullcontext

    def enter(self, tx):
        return self.enter_result

    def exit(self, tx):
        return NONE

    def call_method(self, tx, name, args, kwargs):
        if name == "__enter__":
            return self.enter(tx)
        if name == "__exit__":
            return self.exit(tx)
        return super().call_method(tx, name, args, kwargs)

    def var_getattr(self, tx, name):
        if name in ("__enter__", "__exit__"):
            return BoundMethodOfVariable(self, name)
        return super().var_getattr(tx, name)

    def reconstruct(self, cg):
        import contextlib

        cg.load_callable(contextlib.nullcontext)
        cg.reconstruct(self.enter_result)
        cg.call(1)

    def can_reconstruct(self):
        return self.enter_result.can_reconstruct()


class GradModeVariable(ContextManagerVariable):
    """torch.no_grad() / enable_grad() / set_grad_enabled(b) used as a context manager."""

    def __init__(self, enabled: bool, ctx_type: type, sets_on_init: bool = False):
        super().__init__()
        self.enabled = enabled
        self.ctx_type = ctx_type
        self.sets_on_init = sets_on_init  # set_grad_enabled changes mode when constructed
        self.prev: Optional[bool] = None

    def python_type(self):
        return self.ctx_type

    def describe(self):
        return f"{self.ctx_type.__name__} context"

    def enter(self, tx) -> VariableTracker:
        if self.prev is None:
            self.prev = tx.output.grad_enabled
        tx.output.set_grad_enabled(self.enabled)
        return NONE

    def exit(self, tx) -> VariableTracker:
        tx.output.set_grad_enabled(self.prev)
        return NONE

    def call_method(self, tx, name, args, kwargs):
        if name == "__enter__":
            return self.enter(tx)
        if name == "__exit__":
            return self.exit(tx)
        if name == "clone":
            return GradModeVariable(self.enabled, self.ctx_type)
        return super().call_method(tx, name, args, kwargs)

    def var_getattr(self, tx, name):
        if name in ("__enter__", "__exit__", "clone"):
            return BoundMethodOfVariable(self, name)
        return super().var_getattr(tx, name)

    def call_function(self, tx, args, kwargs):
        # used as a decorator: @torch.no_grad() def f(...)
        if len(args) == 1 and not kwargs:
            if self.sets_on_init and self.prev is not None:
                tx.output.set_grad_enabled(self.prev)  # as set_grad_enabled.__call__: undo what __init__ set
            return GradModeDecoratedVariable(self, args[0])
        return super().call_function(tx, args, kwargs)

    def reconstruct(self, cg):
        # Rebuild an *entered* context: its __exit__ must restore the mode that
        # was current before the with-block (known from the trace).
        if self.prev is None:
            cg.load_callable(self.ctx_type)
            cg.call(0)
            return
        cg.load_callable(runtime.reenter_grad_mode)
        cg.load_const(self.enabled)
        cg.load_const(self.prev)
        cg.call(2)

    def can_reconstruct(self):
        return self.prev is not None or not self.sets_on_init


class GradModeExitVariable(VariableTracker):
    """The bound ``__exit__`` that BEFORE_WITH leaves on the stack."""

    def __init__(self, ctx: GradModeVariable):
        super().__init__()
        self.ctx = ctx

    def call_function(self, tx, args, kwargs):
        return self.ctx.exit(tx)

    def reconstruct(self, cg):
        self.ctx.reconstruct(cg)
        cg.load_attr("__exit__")

    def can_reconstruct(self):
        return True


class GradModeDecoratedVariable(VariableTracker):
    """A function wrapped by a grad-mode context used as a decorator."""

    def __init__(self, ctx: GradModeVariable, fn: VariableTracker):
        super().__init__()
        self.ctx = ctx
        self.fn = fn

    def call_function(self, tx, args, kwargs):
        ctx = GradModeVariable(self.ctx.enabled, self.ctx.ctx_type)
        ctx.enter(tx)
        result = self.fn.call_function(tx, args, kwargs)
        ctx.exit(tx)
        return result


class ExceptionVariable(VariableTracker):
    """An exception object created in the trace, e.g. ``ValueError("bad")``.

    Only classes whose construction runs no Python code are modelled (builtin
    exceptions and user subclasses that define neither ``__init__`` nor
    ``__new__``); ``raise`` itself breaks the graph, and generated code
    rebuilds the object by calling the class with the same arguments.

    Attributes:
        exc_type: the exception class.
        args: trackers of the constructor's positional arguments.
        context / cause: the ExceptionVariable (or NONE) set as ``__context__`` / ``__cause__``
            by a traced ``raise`` (None: never set); suppress_context: ``__suppress_context__``.
        raised_at_step: root step of the latest traced ``raise`` of it (set by the translator;
            None: never raised in this trace).  first_raised_at_step: of the first one.

    Its ``__traceback__`` only exists once Python raises it: reading it (or
    ``with_traceback``, or any attribute not modelled here) after a traced raise breaks
    with ``restart_step`` at the first raise, so the graph ends there and Python raises
    (and catches) it for real.
    """

    mutable_local = True  # one object: rebuilt once, shared by every place that holds it

    def __init__(self, exc_type: type, args: list):
        super().__init__()
        self.exc_type = exc_type
        self.args = list(args)
        self.context: Optional[VariableTracker] = None
        self.cause: Optional[VariableTracker] = None
        self.suppress_context = False
        self._raised_at_step: Optional[int] = None
        self.first_raised_at_step: Optional[int] = None

    @property
    def raised_at_step(self) -> Optional[int]:
        return self._raised_at_step

    @raised_at_step.setter
    def raised_at_step(self, step: Optional[int]) -> None:
        self._raised_at_step = step
        if self.first_raised_at_step is None:
            self.first_raised_at_step = step

    @staticmethod
    def create(tx, exc_type: type, args: list, kwargs: dict) -> "ExceptionVariable":
        for klass in exc_type.__mro__:
            if klass.__module__ == "builtins":
                break
            if "__init__" in klass.__dict__ or "__new__" in klass.__dict__:
                raise GraphBreak(gb.EXCEPTION_RAISED, f"creating exception {exc_type.__name__} (custom constructor)")
        if kwargs:
            raise GraphBreak(gb.EXCEPTION_RAISED, f"creating exception {exc_type.__name__} with keyword arguments")
        return ExceptionVariable(exc_type, args)

    def _repr_body(self):
        return self.exc_type.__name__

    def describe(self):
        return f"{self.exc_type.__name__} exception"

    def python_type(self):
        return self.exc_type

    def var_getattr(self, tx, name):
        if name == "args":
            return TupleVariable(self.args)
        if name in ("__context__", "__cause__"):
            value = self.context if name == "__context__" else self.cause
            return value if value is not None else NONE
        if name == "__suppress_context__":
            return ConstantVariable(self.suppress_context)
        if name == "__class__":
            return tx.wrap(self.exc_type, None)
        if self.first_raised_at_step is not None:
            # what the trace does not model (__traceback__, with_traceback, an AttributeError's
            # .name/.obj) is only right on the real exception: Python raises it from the first raise on
            brk = GraphBreak(gb.EXCEPTION_RAISED, f"{name} of {self.describe()} raised by traced code (Python raises it)")
            brk.restart_step = self.first_raised_at_step
            raise brk
        if name == "__traceback__":  # never raised: no traceback, as in eager
            return NONE
        return super().var_getattr(tx, name)

    def reconstruct(self, cg):
        chained = self.context is not None or self.cause is not None or self.suppress_context
        if chained:
            cg.load_callable(runtime.chained_exception)
        cg.load_callable(self.exc_type)
        for a in self.args:
            cg.reconstruct(a)
        cg.call(len(self.args))
        if chained:
            for v in (self.context, self.cause):
                cg.reconstruct(v) if v is not None else cg.load_const(None)
            cg.load_const(self.suppress_context)
            cg.call(4)

    def can_reconstruct(self):
        return all(a.can_reconstruct() for a in self.args) and all(
            v.can_reconstruct() for v in (self.context, self.cause) if v is not None)


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


__all__ = ["PythonModuleVariable", "CellVariable", "ContextManagerVariable", "NullContextVariable",
           "GradModeVariable", "GradModeExitVariable",
           "GradModeDecoratedVariable", "ExceptionVariable", "ObjectVariable"]
