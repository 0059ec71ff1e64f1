"""Standard-library objects that model code reads, answered at trace time.

The standard library is not traced (skipfiles.py), so a call into it breaks
the graph.  A few read-only queries that real models make on every forward
are answered here instead, from the real value, with a guard on what was read:

- ``os.environ`` (``get``, ``[]``, ``in``): each key read is guarded on its value;
  writes break.
- ``inspect.signature(fn)`` of a function, bound method or module forward
  known at trace time: the real Signature (immutable) as a constant, so
  ``len(sig.parameters)`` and ``"name" in sig.parameters`` fold.
- ``copy.copy`` / ``copy.deepcopy`` (``copy_value``, registered by builtin.py) of what the trace
  models: constants, lists, tuples, dicts (OrderedDict, defaultdict), sets, and instances of plain
  user classes and dataclasses (config objects: ``__dict__`` state, no ``__copy__``/``__deepcopy__``/
  ``__reduce__``/``__setstate__`` of their own), following copy's protocol: a new object made by
  ``cls.__new__`` whose ``__dict__`` is the (deep-copied) state, memo shared so aliasing and cycles
  are kept.  Functions, classes and builtins are atomic (the copy is the object).  Tensors, modules
  and anything else break the graph, and Python copies them.

Tested by tests/torch/test_models.py (test_library_reads_*) and
tests/semantics/test_functools_copy_identity.py (copy).
"""
from __future__ import annotations

import collections
import copy
import inspect
import os
import types

from .. import graph_breaks as gb
from ..exc import GraphBreak
from ..source import TypeSource
from .base import IdentityKey, VariableTracker
from .constant import ConstantVariable, NONE
from .functions import BaseUserFunctionVariable, UserFunctionVariable, UserMethodVariable
from .mappings import DefaultDictVariable, DictVariable
from .methods import ContainerMethodVariable
from .nn_module import NNModuleVariable
from .sequences import ListVariable, SizeVariable, TupleVariable
from .sets import SetVariable
from .user_objects import (
    InstanceDictVariable, mro_lookup, NamedTupleVariable, NewObjectVariable, UserDefinedClassVariable, UserDefinedObjectVariable,
)


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


# ---- copy.copy / copy.deepcopy ----------------------------------------------------------
# what copy's protocol would find on the class (a method of the class's own, not object's, means
# the class copies itself its own way: Python runs it)
_COPY_HOOKS = ("__copy__", "__deepcopy__", "__reduce__", "__reduce_ex__", "__getstate__", "__setstate__",
               "__getnewargs__", "__getnewargs_ex__")
_ATOMIC = (BaseUserFunctionVariable, UserDefinedClassVariable)


def copy_value(tx, obj: VariableTracker, deep: bool, memo: dict) -> VariableTracker:
    """``copy.deepcopy(obj)`` (``deep``) or ``copy.copy(obj)`` as a tracker; ``memo``: id(tracker)
    -> its copy, shared by one deepcopy call (aliasing and cycles are kept, as copy's memo does)."""
    if id(obj) in memo:
        return memo[id(obj)]
    result = _copy_value(tx, obj, deep, memo)
    memo[id(obj)] = result
    return result


def _copy_value(tx, obj, deep, memo):
    builtin_types = (type(len), type(object.__init__), type("".join), type(object().__str__))
    if isinstance(obj, _ATOMIC) or (obj.is_python_constant() and isinstance(obj.as_python_constant(), builtin_types)):
        return obj  # copy's atomic types: functions, classes, builtins
    if type(obj) is ConstantVariable:
        value = obj.as_python_constant()
        copied = copy.deepcopy(value) if deep else copy.copy(value)
        return obj if copied is value else ConstantVariable(copied)
    if type(obj) in (TupleVariable, NamedTupleVariable, SizeVariable):
        items = [copy_value(tx, i, deep, memo) for i in obj.items] if deep else list(obj.items)
        if type(obj) is TupleVariable:
            # copy.copy(tuple) is the tuple; so is a deep copy whose items are their own copies
            return obj if all(a is b for a, b in zip(items, obj.items)) else TupleVariable(items)
        # a tuple subclass (namedtuple, torch.Size) is rebuilt by __reduce_ex__: a new object
        if type(obj) is NamedTupleVariable:
            return NamedTupleVariable(obj.tuple_type, items)
        return SizeVariable(items)
    if type(obj) is ListVariable:
        new = ListVariable([])
        memo[id(obj)] = new  # before the items: a list that contains itself
        new.items = [copy_value(tx, i, deep, memo) if deep else i for i in obj.items]
        return new
    if type(obj) in (DictVariable, DefaultDictVariable) and obj.dict_type in (
            dict, collections.OrderedDict, collections.defaultdict):
        if deep and any(isinstance(k, IdentityKey) for k in obj.items):
            raise GraphBreak(gb.UNSUPPORTED_CALL, "copy.deepcopy() of a dict keyed by objects")
        new = DefaultDictVariable({}, obj.default_factory) if type(obj) is DefaultDictVariable else \
            DictVariable({}, dict_type=obj.dict_type)
        memo[id(obj)] = new
        new.items = {k: copy_value(tx, v, deep, memo) if deep else v for k, v in obj.items.items()}
        return new
    if type(obj) is SetVariable and obj.is_python_constant():
        if obj.frozen and not deep:
            return obj  # copy.copy(frozenset) is the frozenset; a deep copy is a new one
        return SetVariable(list(obj.items.values()), frozen=obj.frozen)
    if isinstance(obj, (UserDefinedObjectVariable, NewObjectVariable)):
        return _copy_object(tx, obj, deep, memo)
    if isinstance(obj, InstanceDictVariable):  # copy.deepcopy(self.__dict__): a plain dict
        new = DictVariable({})
        memo[id(obj)] = new
        new.items = {k: copy_value(tx, v, deep, memo) if deep else v for k, v in obj.items(tx).items()}
        return new
    raise GraphBreak(gb.UNSUPPORTED_CALL, f"copy.{'deepcopy' if deep else 'copy'}() of {obj.describe()}")


def _copy_object(tx, obj, deep, memo):
    """A user object copied by copy's default protocol: ``cls.__new__(cls)``, then its ``__dict__``
    updated with the (deep-copied) state, without running ``__init__`` or ``__setattr__``."""
    cls = obj.value_type
    what = f"copy.{'deepcopy' if deep else 'copy'}() of {obj.describe()}"
    for name in _COPY_HOOKS:
        fn, owner = mro_lookup(cls, name)
        if fn is not None and owner is not object:
            raise GraphBreak(gb.UNSUPPORTED_CALL, f"{what}: the class defines {name}")
    if type(cls) not in (type, __import__("abc").ABCMeta) or mro_lookup(cls, "__new__")[1] is not object or \
            not getattr(cls, "__dictoffset__", 0) or any("__slots__" in k.__dict__ for k in cls.__mro__[:-1]) or \
            any(k.__module__ == "builtins" for k in cls.__mro__[:-1]):
        raise GraphBreak(gb.UNSUPPORTED_CALL, f"{what}: not a plain class with a __dict__")
    getattribute = mro_lookup(cls, "__getattribute__")[0]
    if isinstance(getattribute, types.FunctionType):
        # copy looks __deepcopy__ / __copy__ up through the class's own __getattribute__: run it
        try:
            obj.var_getattr(tx, "__deepcopy__" if deep else "__copy__")
        except GraphBreak as e:
            if e.break_id != gb.MISSING_ATTRIBUTE:
                raise
        else:
            raise GraphBreak(gb.UNSUPPORTED_CALL, f"{what}: its __getattribute__ gives a copy hook")
    elif getattribute is not object.__getattribute__:
        raise GraphBreak(gb.UNSUPPORTED_CALL, f"{what}: the class defines __getattribute__")
    state = dict(_object_state(tx, obj))
    # the copy's class is the original's: class attributes read through the copy are guarded
    # through the original's type (e.g. a strict dataclass's validators, read by its __setattr__)
    if isinstance(obj, NewObjectVariable):
        class_source = obj.class_source
    else:
        class_source = TypeSource(obj.source) if obj.source is not None else None
    new = NewObjectVariable(cls, class_source)
    tx.output.side_effects.track_new_object(new)
    memo[id(obj)] = new
    for name, value in state.items():
        tx.output.side_effects.store_attr(new, name, copy_value(tx, value, deep, memo) if deep else value)
    return new


def _object_state(tx, obj):
    """(name, tracker) of the instance ``__dict__`` of a user object as the trace sees it now."""
    if isinstance(obj, UserDefinedObjectVariable) and obj.source is None:
        raise GraphBreak(gb.VALUE_UNKNOWN, f"the state of {obj.describe()} (no source to guard it by)")
    return list(InstanceDictVariable(obj).items(tx).items())


def library_variable(value, source):
    """The tracker for a library object modelled here, or None."""
    if value is os.environ:
        return EnvironVariable(source)
    if value is inspect.signature:
        return SignatureFunctionVariable(source)
    return None


__all__ = ["EnvironVariable", "SignatureFunctionVariable", "library_variable", "copy_value"]
