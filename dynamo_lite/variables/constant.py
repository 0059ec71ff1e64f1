"""Python constants: None, bool, int, float, complex, str, bytes, Ellipsis,
slices, ranges, torch.dtype, torch.device, torch.layout, torch.memory_format, numpy numbers and dtypes.

Operations on constants are folded at trace time by calling the real
operation on the real values (they are immutable, so this is exact).  Methods
of constants also accept lists/dicts/sets/iterators of constants, passed as
copies (``"-".join(parts)``); a method that raises breaks the graph so Python
raises it for real (that folding is folding.py's, installed here).  Attribute reads of some
library constants are answered by handlers registered from above (``CONSTANT_ATTR_HANDLERS``:
``inspect.Signature.parameters`` in stdlib.py).  ``x in "str"`` is a substring test.
Tested by tests/semantics/test_builtins.py.
"""
from __future__ import annotations

import enum
import re
import types
import typing
from typing import Any

import numpy as np
import torch

from .. import graph_breaks as gb
from .. import guards
from ..exc import GraphBreak
from .base import VariableTracker
from .methods import ConstantMethodVariable

CONSTANT_TYPES = (
    type(None), bool, int, float, complex, str, bytes, type(Ellipsis), type(NotImplemented),
    torch.dtype, torch.device, torch.layout, torch.memory_format, range, slice,
    types.UnionType,  # int | None: immutable, made by `|` on classes (isinstance(x, list | tuple))
    types.GenericAlias,  # list[int]
    re.Pattern, re.Match,  # compiled patterns and match results are immutable
    # torch.__version__: an immutable str whose comparisons parse versions ("2.13" >= "2.9"), folded
    # by running them on the real value
    torch.torch_version.TorchVersion,
)
# typing's aliases and special forms (typing.List, Optional[int], Union[...]): immutable, and
# isinstance/issubclass with them answer from their origin classes
_TYPING_FORMS = tuple(getattr(typing, n) for n in ("_BaseGenericAlias", "_SpecialForm") if hasattr(typing, n))


def is_constant_value(value: Any) -> bool:
    if isinstance(value, (range, slice)):
        return True
    if isinstance(value, (np.generic, np.dtype)):
        # numpy numbers (np.int64(3), np.float32(0.5), np.True_) and dtypes are immutable: folded by
        # running numpy (numpy_arrays.py traces the ones computed from arrays)
        return isinstance(value, np.dtype) or value.dtype.kind in "biufc"
    if type(value) in CONSTANT_TYPES or isinstance(value, _TYPING_FORMS):
        return True
    if type(value) in (tuple, frozenset) and all(is_constant_value(v) for v in value):
        return False  # containers are tracked as containers, not constants
    return False


def user_defined_attr(cls: type, name: str) -> bool:
    """``name`` of ``cls`` (a constant's class: an Enum, or a subclass of int / float / str / bytes
    such as an IntEnum) is Python code of a class outside builtins and enum: reading or calling it
    would run user code.  (Other constants, e.g. an inspect.Signature, are standard-library objects.)"""
    return _user_defined_attr(cls, name)[0] is not None


def _user_defined_attr(cls: type, name: str) -> tuple:
    """(the attribute, its class) for ``user_defined_attr``; (None, None) when it is not one."""
    if not issubclass(cls, (int, float, complex, str, bytes, enum.Enum)) or \
            cls in (int, float, complex, str, bytes, bool):
        return None, None
    for klass in cls.__mro__:
        if name in klass.__dict__:
            attr = klass.__dict__[name]
            if klass.__module__ not in ("builtins", "enum") and isinstance(
                    attr, (types.FunctionType, staticmethod, classmethod, property)):
                return attr, klass
            return None, None
    return None, None


def _guard_class_attr(tx, cls: type, name: str, attr) -> None:
    """``type(const).name`` still is ``attr`` (a method or property of the constant's class)."""
    tx.output.add_guard(guards.ConstAttrIsGuard(cls, name, attr))


# type -> handler(tx, const, name) answering attribute reads of constants of that type (None: not
# answered, the generic read follows); stdlib.py registers inspect.Signature's and Parameter's
CONSTANT_ATTR_HANDLERS: dict = {}


_NOT_ITERABLE = (int, float, complex, bool, type(None))


class ConstantVariable(VariableTracker):
    """An immutable value known exactly at trace time."""

    def __init__(self, value: Any, source=None):
        super().__init__(source)
        self.value = value

    def _repr_body(self):
        return repr(self.value)

    def describe(self):
        return f"constant {self.value!r}"

    def python_type(self):
        return type(self.value)

    def as_python_constant(self):
        return self.value

    def is_python_constant(self):
        return True

    def truthiness(self, tx):
        return bool(self.value)

    def has_len(self):
        return isinstance(self.value, (str, bytes, range))

    def contains(self, tx, item):
        value = self.value
        if isinstance(value, (str, bytes)):  # substring test, not membership of characters
            if not item.is_python_constant():
                raise GraphBreak(gb.OPERATION_RAISES, f"`in <{type(value).__name__}>` requires a {type(value).__name__} operand")
            try:
                return item.as_python_constant() in value
            except TypeError as e:
                raise GraphBreak(gb.OPERATION_RAISES, f"`in` raised TypeError: {e}") from e
        if isinstance(value, range) and item.is_python_constant():
            return item.as_python_constant() in value
        if getattr(type(value), "__contains__", None) is enum.Flag.__contains__ and item.is_python_constant() and \
                isinstance(item.as_python_constant(), type(value)):
            return item.as_python_constant() in value  # a flag of a combination (enum's own test)
        return super().contains(tx, item)

    def unpack(self, tx):
        if isinstance(self.value, (str, bytes, range)):
            return [ConstantVariable(v) for v in self.value]
        if isinstance(self.value, enum.Flag) and type(self.value).__iter__ is enum.Flag.__iter__:
            return [ConstantVariable(v) for v in self.value]  # the members of a combination (enum's own code)
        raise GraphBreak(gb.UNSUPPORTED_ITERATION, f"cannot iterate over {self.describe()}")

    def iter(self, tx):
        if type(self.value) in _NOT_ITERABLE:  # ``try: iter(tol) except TypeError`` (torchdiffeq)
            self.raise_in_trace(tx, TypeError, [ConstantVariable(f"'{type(self.value).__name__}' object is not "
                                                                 "iterable")])
        it = super().iter(tx)
        if isinstance(self.value, range):
            it.kind = type(iter(self.value))  # range_iterator: rebuilt as one (sequences.py)
        return it

    def var_getattr(self, tx, name):
        handler = CONSTANT_ATTR_HANDLERS.get(type(self.value))
        if handler is not None:  # e.g. inspect.Signature.parameters (stdlib.py)
            result = handler(tx, self, name)
            if result is not None:
                return result
        attr, _owner = _user_defined_attr(type(self.value), name)
        if attr is not None:
            # an Enum's / IntEnum's own method or property: Python code, never run at trace time;
            # a method is inlined when called (call_method), a property's getter now
            if isinstance(attr, types.FunctionType):
                return ConstantMethodVariable(self, name)
            if isinstance(attr, property) and isinstance(attr.fget, types.FunctionType):
                _guard_class_attr(tx, type(self.value), name, attr)
                return self.call_python_function(tx, attr.fget, [self], {})
            raise GraphBreak(gb.UNSUPPORTED_ATTRIBUTE, f"{name!r} of {type(self.value).__name__} is defined in Python")
        try:
            value = getattr(self.value, name)
        except AttributeError as e:
            raise GraphBreak(gb.MISSING_ATTRIBUTE, f"{type(self.value).__name__} has no attribute {name!r}") from e
        if callable(value) and not isinstance(value, CONSTANT_TYPES):
            return ConstantMethodVariable(self, name)
        if type(value) in (tuple, frozenset):  # e.g. code.co_varnames: a container of constants
            return self.wrap_constant(value)
        return ConstantVariable(value)

    # A method call folds on copies of its container / iterator arguments; folding.py (above the
    # containers) installs fold_constant_method here at import time.
    fold_method: "staticmethod"

    def call_method(self, tx, name, args, kwargs):
        attr, _owner = _user_defined_attr(type(self.value), name)
        if isinstance(attr, types.FunctionType):  # an Enum's own method: inlined
            _guard_class_attr(tx, type(self.value), name, attr)
            return self.call_python_function(tx, attr, [self, *args], kwargs)
        return self.fold_method(tx, self, name, args, kwargs)

    def reconstruct(self, cg):
        cg.load_const(self.value)

    def can_reconstruct(self):
        return True


class InputConstantVariable(ConstantVariable):
    """A number read from the frame's inputs (a numpy integer: torchsde's noise seeds) whose value
    is guarded only once the trace uses it: any read of ``value`` installs the guard (the type is
    guarded from the start).  A use that only passes it on to a call made before the graph
    (``torch.Generator().manual_seed(int(seed))``, GeneratorVariable) takes ``peek()`` and reads
    the input when the frame runs: a new seed is no recompile.  ``int(x)`` of it is another of these
    (``convert``), sharing the guard."""

    def __init__(self, value, source, install_guard, convert=None):
        VariableTracker.__init__(self, source)
        self._raw = value
        self._pending = install_guard if isinstance(install_guard, list) else [install_guard]
        self.convert = convert  # what makes this value from the input's (None: the input itself)

    @property
    def value(self):
        if self._pending:
            self._pending.pop()()
        return self._raw

    def peek(self):
        """The value at trace time, without guarding it (for a use that reads the input at run time)."""
        return self._raw

    def converted(self, fn):
        """``fn(self)`` (``int``), still unguarded."""
        return InputConstantVariable(fn(self._raw), self.source, self._pending, convert=fn)

    def python_type(self):
        return type(self._raw)

    def _repr_body(self):
        return f"{type(self._raw).__name__} input"

    def describe(self):
        return f"{type(self._raw).__name__} read from {self.source.name()}"

    def reconstruct(self, cg):
        if self.convert is not None:
            cg.load_callable(self.convert)
        self.source.reconstruct(cg)  # the frame's value when it runs (guarded if the trace used it)
        if self.convert is not None:
            cg.call(1)


class ObservedConstant(ConstantVariable):
    """A constant whose uses are reported: ``id()`` of a real object while a repeated block is
    recorded as a template (variables/repeated_blocks.py), which may reuse the trace for another
    block only where the id was a dict key.  ``on_use(container)``: called with the dict tracker
    for a key lookup or store (``key_value``), with None for any other read of the value."""

    def __init__(self, value: Any, on_use):
        VariableTracker.__init__(self, None)
        self._value = value
        self._on_use = on_use

    @property
    def value(self):
        self._on_use(None)
        return self._value

    def key_value(self, container):
        self._on_use(container)
        return self._value


TRUE = ConstantVariable(True)
FALSE = ConstantVariable(False)
NONE = ConstantVariable(None)

