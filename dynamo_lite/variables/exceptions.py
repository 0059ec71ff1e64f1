"""Exception objects created in the trace (``ValueError("bad")``): ExceptionVariable.

Tested by tests/semantics/test_exceptions.py and tests/semantics/test_exceptions_traced.py.
"""
from __future__ import annotations

import types
from typing import Optional

from .. import graph_breaks as gb
from .. import runtime
from ..exc import GraphBreak
from .base import mro_lookup, VariableTracker
from .constant import ConstantVariable, NONE
from .methods import BoundMethodOfVariable
from .sequences import TupleVariable


class ExceptionVariable(VariableTracker):
    """An exception object created in the trace, e.g. ``ValueError("bad")``.

    Builtin exceptions and user subclasses are modelled; a subclass may define a Python
    ``__init__`` (``self.code = code; super().__init__(msg)``), which is traced on this tracker
    (attribute writes go to ``attrs``; the builtin base's ``__init__`` sets ``args``), but not
    ``__new__``, ``__setattr__`` or ``__getattribute__``.  An exception leaving the frame breaks
    the graph there and Python raises it; generated code rebuilds the object by calling the
    class with the same arguments, or, when its class has a Python ``__init__`` or attributes
    were written, with ``runtime.exception_with`` (no user code runs again).

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
        self.attrs: dict = {}  # instance attributes written in the trace (name -> tracker)
        self.custom_init = False  # built by a Python __init__: rebuilt without calling the class

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
        init = None
        for klass in exc_type.__mro__:
            if klass.__module__ == "builtins":
                if init is not None and klass not in PLAIN_INIT_EXCEPTIONS:
                    raise GraphBreak(gb.EXCEPTION_RAISED, f"creating exception {exc_type.__name__} (a Python "
                                     f"__init__ over {klass.__name__}, whose construction is not modelled)")
                break
            if any(name in klass.__dict__ for name in ("__new__", "__setattr__", "__getattribute__", "__slots__")):
                raise GraphBreak(gb.EXCEPTION_RAISED, f"creating exception {exc_type.__name__} (custom constructor)")
            if init is None and "__init__" in klass.__dict__:
                init = klass.__dict__["__init__"]
                if not isinstance(init, types.FunctionType):
                    raise GraphBreak(gb.EXCEPTION_RAISED, f"creating exception {exc_type.__name__} (custom constructor)")
        if init is None:
            if kwargs:
                raise GraphBreak(gb.EXCEPTION_RAISED, f"creating exception {exc_type.__name__} with keyword arguments")
            return ExceptionVariable(exc_type, args)
        # BaseException.__new__ keeps the positional arguments as .args; then the Python __init__ runs
        exc = ExceptionVariable(exc_type, args)
        exc.custom_init = True
        exc.call_python_function(tx, init, [exc, *args], kwargs)
        return exc

    def setattr(self, tx, name, value):
        if name == "args":
            self.args = list(value.unpack(tx))  # BaseException's args setter stores tuple(value)
            self.custom_init = True
            return
        if name.startswith("__") or mro_lookup(self.exc_type, name)[0] is not None:
            raise GraphBreak(gb.SIDE_EFFECT, f"setting attribute {name!r} of {self.describe()} (a class attribute "
                             "or descriptor)")
        self.attrs[name] = value

    def _repr_body(self):
        return self.exc_type.__name__

    def describe(self):
        return f"{self.exc_type.__name__} exception"

    def python_type(self):
        return self.exc_type

    def var_getattr(self, tx, name):
        if name in self.attrs:
            return self.attrs[name]
        if name == "args":
            return TupleVariable(self.args)
        if name in ("__context__", "__cause__"):
            value = self.context if name == "__context__" else self.cause
            return value if value is not None else NONE
        if name == "__suppress_context__":
            return ConstantVariable(self.suppress_context)
        if name == "__class__":
            return tx.wrap(self.exc_type, None)
        if name == "value" and self.exc_type is StopIteration:  # set from args[0] by its __init__
            return self.args[0] if self.args else NONE
        if not name.startswith("__") and self.exc_type.__module__ != "builtins":
            found = self._class_attribute(name)  # a method of the user's class: the same once raised
            if found is not None:
                return found
        if self.first_raised_at_step is not None:
            # what the trace does not model (__traceback__, with_traceback, an AttributeError's
            # .name/.obj) is only right on the real exception: Python raises it from the first raise on
            brk = GraphBreak(gb.EXCEPTION_RAISED, f"{name} of {self.describe()} raised by traced code (Python raises it)")
            brk.restart_step = self.first_raised_at_step
            raise brk
        if name == "__traceback__":  # never raised: no traceback, as in eager
            return NONE
        return super().var_getattr(tx, name)

    def _class_attribute(self, name):
        """A method or constant defined by the exception's own (Python) classes; None: other."""
        attr, owner = mro_lookup(self.exc_type, name)
        if owner is None or owner.__module__ == "builtins":
            return None
        if isinstance(attr, types.FunctionType):
            return BoundMethodOfVariable(self, name)  # called through call_method below
        if type(attr) in (int, float, str, bool, type(None)):
            return ConstantVariable(attr)
        return None

    def call_method(self, tx, name, args, kwargs):
        attr, owner = mro_lookup(self.exc_type, name)
        if isinstance(attr, types.FunctionType) and owner.__module__ != "builtins":
            return self.call_python_function(tx, attr, [self, *args], kwargs)
        return super().call_method(tx, name, args, kwargs)

    def reconstruct(self, cg):
        chained = self.context is not None or self.cause is not None or self.suppress_context
        if chained:
            cg.load_callable(runtime.chained_exception)
        if self.custom_init or self.attrs:
            cg.load_callable(runtime.exception_with)
            cg.load_const(self.exc_type)
            cg.reconstruct(TupleVariable(self.args))
            cg.load_const(tuple(self.attrs))
            for v in self.attrs.values():
                cg.reconstruct(v)
            cg.call(3 + len(self.attrs))
        else:
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
            v.can_reconstruct() for v in (self.context, self.cause) if v is not None) and all(
            v.can_reconstruct() for v in self.attrs.values())


# builtin exception classes whose construction is BaseException's own (``__new__`` keeps the
# positional arguments as ``args``, ``__init__`` replaces them): a Python ``__init__`` over them is
# traced, and their ``__init__`` reached through ``super()`` sets ``args`` (builtin.py)
PLAIN_INIT_EXCEPTIONS = (BaseException, Exception, ArithmeticError, LookupError, ValueError, TypeError,
                         RuntimeError, NotImplementedError, AssertionError, KeyError, IndexError,
                         ZeroDivisionError, OverflowError)


def raise_in_trace(tx, exc_type: type, args: list) -> None:
    """Raise ``exc_type(*args)`` in the trace where an operation raises it in eager (a missing
    key, an empty pop): a handler of the traced code catches it and the trace goes on; left
    uncaught, the graph breaks at the operation and Python raises it.  Raised while another
    traced exception is handled, that one becomes its ``__context__`` (implicit chaining)."""
    exc = ExceptionVariable(exc_type, list(args))
    chain_to_handled(tx, exc)
    tx.raise_exception(exc)


def chain_to_handled(tx, exc: "ExceptionVariable") -> None:
    """Raised while a traced exception is handled (in this frame or one that called it), ``exc``
    gets that one as its ``__context__``, as Python chains it."""
    handler_tx = tx
    while handler_tx is not None and not handler_tx.handling:
        handler_tx = handler_tx.parent
    if handler_tx is not None:
        exc.context = handler_tx.handling[-1]


VariableTracker.raise_in_trace = staticmethod(raise_in_trace)  # see VariableTracker.raise_in_trace

__all__ = ["chain_to_handled", "ExceptionVariable", "raise_in_trace"]
