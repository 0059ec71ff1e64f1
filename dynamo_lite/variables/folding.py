"""Constant folding across containers: plain values computed at trace time become trackers.

``wrap_constant_result`` turns a value computed from constants (an int, a str,
a tuple / list / dict / set of them, a torch.Size, an ``inspect.Parameter`` whose default and
annotation are immutable) into trackers; it is
installed as ``VariableTracker.wrap_constant`` so that every tracker below the
containers can fold without importing them.  ``materialize`` consumes a lazy
iterator whole for functions computed on constant copies (``"".join(map(str, l))``);
``fold_constant_method`` answers methods of constants (installed as
``ConstantVariable.fold_method``), first through ``CONSTANT_METHOD_HANDLERS`` (per type,
registered by other modules: ``inspect.Signature.bind`` in stdlib.py).  ``raise_folded`` raises
in the trace what a fold on constants raised (``int("z")`` in a ``try``), when that is exact.  Methods of numpy scalars
(``np.int64(6).astype("int32")``, ``.item()``) fold from a list of read-only ones, under
``np.errstate(all="raise")`` with warnings as errors: one numpy would warn about breaks.
Tested by tests/semantics/test_builtins.py and tests/semantics/test_containers.py.
"""
from __future__ import annotations

import collections
import enum
import inspect
import operator
import re
import warnings
from typing import Any

import numpy as np
import torch

from .. import graph_breaks as gb
from ..exc import GraphBreak
from .base import VariableTracker
from .constant import ConstantVariable, is_constant_value, user_defined_attr
from .mappings import CounterVariable, DictVariable
from .sequences import LazyIteratorVariable, ListIteratorVariable, ListVariable, SizeVariable, TupleVariable
from .sets import SetVariable


def wrap_constant_result(value: Any) -> VariableTracker:
    """Wrap a plain Python value computed at trace time from constants."""
    if isinstance(value, torch.Size):
        return SizeVariable([ConstantVariable(int(v)) for v in value])
    if type(value) is tuple:
        return TupleVariable([wrap_constant_result(v) for v in value])
    if type(value) is list:
        return ListVariable([wrap_constant_result(v) for v in value])
    if type(value) is dict:
        return DictVariable({k: wrap_constant_result(v) for k, v in value.items()})
    if type(value) is collections.Counter:  # Counter("ab") + Counter("b")
        return CounterVariable({k: wrap_constant_result(v) for k, v in value.items()})
    if type(value) is frozenset:  # (its own table, so its order: a frozenset literal iterates so)
        return SetVariable.of_frozenset(value, [wrap_constant_result(v) for v in value])
    if type(value) is set:
        return SetVariable([wrap_constant_result(v) for v in value])
    if is_constant_value(value) or isinstance(value, enum.Enum):  # Color(2), Perm.R | Perm.W
        return ConstantVariable(value)
    if type(value) is inspect.Parameter and all(_immutable_annotation(v) for v in (value.default, value.annotation)):
        return ConstantVariable(value)  # signature(f).parameters["b"]: immutable, so are its default and annotation
    raise GraphBreak(gb.VALUE_UNKNOWN, f"a {type(value).__name__} computed at trace time cannot be tracked")


def _immutable_annotation(value) -> bool:
    """A Parameter's default or annotation that a constant may hold: none, a constant, a builtin class."""
    return value is inspect.Parameter.empty or is_constant_value(value) or \
        (type(value) is type and value.__module__ == "builtins")


VariableTracker.wrap_constant = staticmethod(wrap_constant_result)  # see VariableTracker.wrap_constant


# exceptions whose whole state is their args: made again from them, they are what Python raises
_REMADE_EXCEPTIONS = (ValueError, TypeError, KeyError, IndexError, ZeroDivisionError, OverflowError)


def raise_folded(tx, error: Exception, what: str, args: list, kwargs: dict):
    """A fold on constants raised ``error`` (``int("z")``, ``"ab".index("z")``): raised in the trace
    (an ``except`` of the traced code handles it; one that leaves the frame breaks there and Python
    raises it for real) when every argument is a plain constant and the exception is a builtin
    made from its args alone; otherwise the graph breaks so Python runs the call.  A graph break
    raised while reading an argument (a value read from tensor data, needed here) stays itself."""
    if isinstance(error, GraphBreak):
        raise error
    if type(error) in _REMADE_EXCEPTIONS and all(type(a) is ConstantVariable for a in [*args, *kwargs.values()]) \
            and all(is_constant_value(a) for a in error.args):
        tx.raise_builtin_exception(type(error), [ConstantVariable(a) for a in error.args])
    raise GraphBreak(gb.OPERATION_RAISES, f"{what} raised {type(error).__name__} at trace time") from error


def materialize(tx, obj: Any) -> Any:
    """A lazy iterator consumed into a plain ListIteratorVariable of its items (for functions
    that consume their argument whole, computed on constant copies: str.join(map(str, l)))."""
    if isinstance(obj, LazyIteratorVariable):
        return ListIteratorVariable(obj.unpack(tx), kind=obj.kind)
    return obj


# Methods that never mutate and never depend on anything but their arguments.
_PURE_TYPES = (str, int, float, complex, bool, bytes, type(None), range, slice, re.Pattern, re.Match,
               torch.dtype, torch.device)


# Methods of numpy scalars (np.int64(6).astype("int32"), str-like formatting) that only read the
# scalar: folded like _PURE_TYPES' methods, but under np.errstate(all="raise") with warnings as
# errors, so a cast or rounding numpy would warn about (or raise for, under the user's errstate)
# breaks and runs eagerly instead.  Not folded: tofile / dump (write files), setflags / itemset...
_NUMPY_SCALAR_METHODS = frozenset({
    "astype", "item", "tolist", "conjugate", "conj", "round", "is_integer", "as_integer_ratio",
    "bit_count", "__format__", "__round__", "__int__", "__float__", "__index__", "__bool__", "__str__",
    "__repr__", "all", "any", "min", "max", "sum", "prod", "squeeze", "copy", "hex", "fromhex"})


def fold_numpy_quietly(what: str, fn, *args, **kwargs) -> Any:
    """``fn(*args, **kwargs)`` on numpy scalars, computed at trace time, or GraphBreak if numpy
    raises or warns (overflow, an invalid cast): Python then runs it, and the warning is eager's.
    Under ``np.errstate(all="raise")``, so the user's errstate at trace time does not matter."""
    try:
        with np.errstate(all="raise"), warnings.catch_warnings():
            warnings.simplefilter("error")
            return fn(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - the real call raises or warns: let Python do it
        raise GraphBreak(gb.OPERATION_RAISES, f"{what} raised or warned: {type(e).__name__}") from e


# type -> handler(tx, const, name, args, kwargs) answering methods of constants of that type
# (None: not answered); stdlib.py registers inspect.Signature's bind / bind_partial
CONSTANT_METHOD_HANDLERS: dict = {}


def fold_constant_method(tx, const: ConstantVariable, name: str, args: list, kwargs: dict) -> VariableTracker:
    """``const.name(*args, **kwargs)`` (ConstantVariable.call_method): computed on the real value
    with copies of container / iterator arguments of constants; ``==`` / ``!=`` with anything
    else go through the operator table."""
    handler = CONSTANT_METHOD_HANDLERS.get(type(const.value))
    if handler is not None:
        result = handler(tx, const, name, args, kwargs)
        if result is not None:
            return result
    if user_defined_attr(type(const.value), name):  # e.g. a method of an IntEnum subclass: Python code
        raise GraphBreak(gb.UNSUPPORTED_CALL, f"method {name!r} of {type(const.value).__name__} is defined in Python")
    if isinstance(const.value, _PURE_TYPES):  # "".join(map(str, l)) consumes the lazy map
        args = [materialize(tx, a) for a in args]
    try:
        # methods of immutable values never mutate their arguments, so
        # lists/dicts of constants can be passed as copies ("-".join(parts))
        const_args = [a.constant_copy() for a in args]
        const_kwargs = {k: v.constant_copy() for k, v in kwargs.items()}
    except NotImplementedError:
        const_args = const_kwargs = None
    if const_args is not None and isinstance(const.value, (re.Pattern, re.Match)) and \
            any(callable(a) for a in [*const_args, *const_kwargs.values()]):
        const_args = None  # pattern.sub(function, ...) would run the function at trace time
    if const_args is not None and isinstance(const.value, np.generic):  # np.float64 is a float too
        if name not in _NUMPY_SCALAR_METHODS:
            raise GraphBreak(gb.UNSUPPORTED_CALL, f"method {type(const.value).__name__}.{name} is not folded")
        return wrap_constant_result(fold_numpy_quietly(f"{type(const.value).__name__}.{name}",
                                                       getattr(const.value, name), *const_args, **const_kwargs))
    if const_args is not None and isinstance(const.value, _PURE_TYPES):
        fn = getattr(const.value, name, None)
        if fn is None:
            raise GraphBreak(gb.MISSING_ATTRIBUTE, f"{type(const.value).__name__} has no attribute {name!r}")
        try:
            result = fn(*const_args, **const_kwargs)
        except Exception as e:  # noqa: BLE001 - the real call raises: raised in the trace, or by Python
            raise_folded(tx, e, f"{type(const.value).__name__}.{name}", [const, *args], kwargs)
        for a in [*args, *kwargs.values()]:
            if isinstance(a, ListIteratorVariable):
                a.index = len(a.items)  # the method consumed the iterator
        return wrap_constant_result(result)
    if name in ("__eq__", "__ne__") and len(args) == 1:
        return VariableTracker.apply_operator(tx, operator.eq if name == "__eq__" else operator.ne, [const, args[0]])
    if name == "format" and isinstance(const.value, str):
        raise GraphBreak(gb.OPERATION_RAISES, "str.format with non-constant arguments")
    raise GraphBreak(gb.UNSUPPORTED_CALL, f"method {type(const.value).__name__}.{name} with these arguments")


ConstantVariable.fold_method = staticmethod(fold_constant_method)  # see ConstantVariable.call_method
