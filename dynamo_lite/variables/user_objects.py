"""User classes and their instances.

``UserDefinedObjectVariable`` stands for a real object read from the frame's
inputs (it has a source); ``NewObjectVariable`` for an object created during
the trace by calling a user class.  Attribute reads resolve statically
through the class's MRO (instance dict, data descriptors, methods, class
attributes) without running arbitrary ``__getattribute__`` code; writes are
recorded as side effects and replayed after the graph.  Calling a class
creates the object (namedtuples directly, dataclasses through their generated
``__init__``); exceptions, OrderedDict, defaultdict, Counter, deque, SimpleNamespace and
nullcontext get their own trackers; ``@lru_cache`` functions called with constants inline
``__wrapped__`` (or, when it carries the ``_dynamo_marked_constant`` marker of a value fixed for the
process, call the cached function at trace time and use its answer as a constant).  Instances of dict / OrderedDict subclasses keep their items in a dict tracker
(``DictStorageMixin``): inputs whose class overrides no dict method, and instances made in the
trace (Python overrides inlined, the base's methods called explicitly act on the items).  A
metaclass's Python ``__call__`` is inlined; enum classes are called, indexed and iterated as
constants (``__members__``: a read-only mapping of them); ``len(vars(obj))`` counts the attributes as
the trace sees them.
Attributes of a ``threading.local`` input are read from the current thread's ``__dict__`` and
guarded by ``getattr`` in the calling thread.  collections.abc's Mapping views (``KeysView`` ...)
are made in the trace (their ``_mapping`` slot replayed); ``frozendict.frozendict(...)`` is built from
its items (a FrozenDictVariable; generated code calls frozendict with them).
Setting a name that has no slot on an object without ``__dict__`` raises the
AttributeError in the trace; abstract classes are never instantiated in the trace.
Tested by tests/semantics/test_user_classes.py (and tests/semantics/test_exceptions.py, tests/torch/test_grad_mode.py,
tests/semantics/test_builtin_errors.py).
"""
from __future__ import annotations

import abc
import collections
import collections.abc
import contextlib
import dataclasses
import enum
import functools
import threading
import types
from typing import Any, Optional

import torch

from .. import graph_breaks as gb
from .. import bytecode_compat, guards, runtime
from ..exc import GraphBreak
from .base import checked_len, IdentityKey, mro_lookup, type_or_none, VariableTracker
from .constant import ConstantVariable, NONE
from ..source import AttrSource, GenericAttrSource, ItemSource, TupleItemSource, TypeSource, attr_source
from .mappings import (
    ChainMapVariable, CounterVariable, DefaultDictVariable, dict_from_args, DictVariable, FrozenDictVariable,
    MappingProxyVariable,
    hash_key, is_frozendict_class,
)
from .sets import plain_set_subclass, SetVariable
from .sequences import DequeVariable, ListIteratorVariable, TupleVariable
from .iterators import UserIteratorVariable
from .functions import bind_arguments, python_function_handler, UserFunctionVariable, UserMethodVariable
from .methods import BoundMethodOfVariable, ContainerMethodVariable
from .contexts import NullContextVariable, SuppressVariable
from .exceptions import ExceptionVariable
from .python_modules import guard_attr_value


# generic attribute lookup (PyObject_GenericGetAttr) of object and builtin bases
_PLAIN_GETATTRIBUTE = (object.__getattribute__, dict.__getattribute__, list.__getattribute__,
                       tuple.__getattribute__, set.__getattribute__, BaseException.__getattribute__,
                       types.SimpleNamespace.__getattribute__)
# generic attribute writes (PyObject_GenericSetAttr): replayed by STORE_ATTR
_PLAIN_SETATTR = (object.__setattr__, types.SimpleNamespace.__setattr__, None)


class ObjectLike(VariableTracker):
    """Shared attribute logic for real and new user objects (the base that operators and calls
    recognise user instances by)."""

    value_type: type

    def has_class_attr(self, name: str) -> bool:
        return mro_lookup(self.value_type, name)[0] is not None

    def _instance_attr(self, tx, name) -> Optional[VariableTracker]:
        raise NotImplementedError

    def var_getattr(self, tx, name):
        cls = self.value_type
        getattribute = mro_lookup(cls, "__getattribute__")[0]
        if getattribute is threading.local.__getattribute__ and isinstance(self, UserDefinedObjectVariable) \
                and self.source is not None and mro_lookup(cls, "__getattr__")[0] is None:
            # a threading.local read from outside: generic lookup in the current thread's
            # __dict__; guards read it again (getattr) in the thread that calls
            return self.generic_getattr(tx, name)
        if getattribute not in _PLAIN_GETATTRIBUTE + (None,):
            if not isinstance(getattribute, types.FunctionType) or mro_lookup(cls, "__getattr__")[0] is not None:
                raise GraphBreak(gb.UNSUPPORTED_ATTRIBUTE, f"{cls.__name__} defines __getattribute__")
            # a Python __getattribute__ is inlined; its super().__getattribute__(name)
            # reaches generic_getattr through object.__getattribute__
            # (its source: its closure's cells are read, and changed, through it)
            return UserMethodVariable(getattribute, self, fn_source=self._class_attr_source("__getattribute__")
                                      ).call_function(tx, [ConstantVariable(name)], {})
        return self.generic_getattr(tx, name)

    def generic_getattr(self, tx, name):
        """object.__getattribute__(obj, name): the lookup without a custom __getattribute__."""
        cls = self.value_type
        pending = tx.output.side_effects.load_attr(self, name)
        if pending is not None:
            if pending is _DELETED:
                raise GraphBreak(gb.MISSING_ATTRIBUTE, f"attribute {name!r} was deleted")
            return pending
        if name == "__class__":
            return class_of(tx, self, cls)
        if name == "__dict__":
            if not type.__dict__["__dictoffset__"].__get__(cls) and mro_lookup(cls, "__dict__")[0] is None:
                # __slots__ all the way down: instances have no __dict__ (AttributeError)
                raise GraphBreak(gb.MISSING_ATTRIBUTE, f"{cls.__name__!r} object has no attribute '__dict__'")
            if (isinstance(self, UserDefinedObjectVariable) and self.source is not None) or \
                    isinstance(self, NewObjectVariable):
                return InstanceDictVariable(self)
            raise GraphBreak(gb.UNSUPPORTED_ATTRIBUTE, "reading an object's __dict__")
        stored = tx.output.side_effects.load_class_attr(cls, name)
        if stored is not None:  # the class attribute written earlier in the trace (never a descriptor)
            inst = self._instance_attr(tx, name)
            if inst is not None:
                return inst
            self._guard_not_shadowed(tx, name)
            return stored
        cls_attr, owner = mro_lookup(cls, name)
        cls_src = self._class_attr_source(name) if cls_attr is not None else None
        if isinstance(cls_attr, property):
            if cls_attr.fget is None:
                raise GraphBreak(gb.MISSING_ATTRIBUTE, f"property {name!r} has no getter")
            guard_class_attr(tx, cls_src, cls_attr)
            return UserFunctionVariable(cls_attr.fget, attr_source(cls_src, "fget")).call_function(tx, [self], {})
        if cls_attr is not None and hasattr(type(cls_attr), "__set__") and not isinstance(
                cls_attr, (types.FunctionType,)):
            value = self._descriptor_value(tx, name)
            if value is not None:
                return value
            raise GraphBreak(gb.UNSUPPORTED_ATTRIBUTE, f"descriptor {name!r} of {cls.__name__}")
        inst = self._instance_attr(tx, name)
        if inst is not None:
            return inst
        if cls_attr is not None:
            # the class's attribute, as long as the instance does not shadow it and
            # the class still holds the same value (both guarded when there is a source)
            self._guard_not_shadowed(tx, name)
            if isinstance(cls_attr, (staticmethod, classmethod, types.FunctionType)):
                guard_class_attr(tx, cls_src, cls_attr)
            if isinstance(cls_attr, staticmethod):
                return UserFunctionVariable(cls_attr.__func__, cls_src)
            if isinstance(cls_attr, classmethod) and not isinstance(cls_attr.__func__, types.FunctionType):
                return classmethod_of_descriptor(tx, cls_attr, UserDefinedClassVariable(cls), name)
            if isinstance(cls_attr, classmethod):
                return UserMethodVariable(cls_attr.__func__, UserDefinedClassVariable(cls),
                                          fn_source=attr_source(cls_src, "__func__"))
            if isinstance(cls_attr, types.FunctionType):
                return UserMethodVariable(cls_attr, self, fn_source=cls_src)
            return bind_class_attribute(tx, self, cls, name, cls_attr, cls_src, owner)
        if owner is not None:  # a class attribute that is None (every class's __doc__ may be)
            self._guard_not_shadowed(tx, name)
            guard_class_attr(tx, self._class_attr_source(name), None)
            return ConstantVariable(None)
        getattr_fn, _ = mro_lookup(cls, "__getattr__")
        if isinstance(getattr_fn, types.FunctionType):
            self._guard_not_shadowed(tx, name)
            return UserMethodVariable(getattr_fn, self).call_function(tx, [ConstantVariable(name)], {})
        raise GraphBreak(gb.MISSING_ATTRIBUTE, f"{cls.__name__!r} object has no attribute {name!r}")

    def _descriptor_value(self, tx, name):
        return None

    def _class_attr_source(self, name):
        """Source of the class attribute ``name`` as seen from this object (None: not guardable)."""
        return None

    def _guard_not_shadowed(self, tx, name) -> None:
        """Guard that the instance's __dict__ still lacks ``name`` (a class attribute or __getattr__ was used)."""

    def setattr(self, tx, name, value):
        cls = self.value_type
        if getattr(cls, "__dataclass_params__", None) is not None and cls.__dataclass_params__.frozen:
            raise GraphBreak(gb.OPERATION_RAISES, "cannot assign to a field of a frozen dataclass")
        setattr_fn, _ = mro_lookup(cls, "__setattr__")
        if setattr_fn not in _PLAIN_SETATTR:
            if isinstance(setattr_fn, types.FunctionType):
                return UserMethodVariable(setattr_fn, self).call_function(tx, [ConstantVariable(name), value], {})
            raise GraphBreak(gb.SIDE_EFFECT, f"{cls.__name__} defines __setattr__")
        return self.generic_setattr(tx, name, value)

    def generic_setattr(self, tx, name, value):
        """object.__setattr__(obj, name, value): the store without a custom __setattr__."""
        cls = self.value_type
        cls_attr, _ = mro_lookup(cls, name)
        if isinstance(cls_attr, property):
            if cls_attr.fset is None:
                raise GraphBreak(gb.OPERATION_RAISES, f"property {name!r} has no setter")
            return UserFunctionVariable(cls_attr.fset).call_function(tx, [self, value], {})
        if isinstance(cls_attr, types.MemberDescriptorType) and (isinstance(self, UserDefinedObjectVariable) or
                                                                 cls in _MAPPING_VIEWS) \
                and "__slots__" in getattr(cls_attr.__objclass__, "__dict__", {}):
            tx.output.side_effects.store_attr(self, name, value)  # a __slots__ member: replayed by STORE_ATTR
            return NONE
        if cls_attr is not None and hasattr(type(cls_attr), "__set__"):
            raise GraphBreak(gb.SIDE_EFFECT, f"setting descriptor {name!r} of {cls.__name__}")
        if not getattr(cls, "__dictoffset__", 1):  # no instance __dict__ (__slots__): AttributeError
            raise_setattr_error(tx, cls, name)
        tx.output.side_effects.store_attr(self, name, value)
        return NONE

    def truthiness(self, tx):
        cls = self.value_type
        for dunder in ("__bool__", "__len__"):
            fn, _ = mro_lookup(cls, dunder)
            if fn is not None:
                if isinstance(fn, types.FunctionType):
                    result = UserMethodVariable(fn, self).call_function(tx, [], {})
                    if dunder == "__len__":
                        return checked_len(result) != 0
                    if result.is_python_constant() and type(result.as_python_constant()) is not bool:
                        raise GraphBreak(gb.OPERATION_RAISES, f"__bool__ returned {type(result.as_python_constant()).__name__}"
                                                   " (TypeError)")
                    return result.bool(tx)
                return None
        return True

    def call_method(self, tx, name, args, kwargs):
        if name == "__setattr__" and len(args) == 2 and args[0].is_python_constant():
            return self.setattr(tx, args[0].as_python_constant(), args[1])
        return super().call_method(tx, name, args, kwargs)

    def call_function(self, tx, args, kwargs):
        call, _ = mro_lookup(self.value_type, "__call__")
        if isinstance(call, types.FunctionType):
            # the class's __call__ (and its defaults) guarded as any method read through the class
            cls_src = self._class_attr_source("__call__")
            guard_class_attr(tx, cls_src, call)
            return UserMethodVariable(call, self, fn_source=cls_src).call_function(tx, args, kwargs)
        if self.value_type is functools._lru_cache_wrapper and isinstance(self, UserDefinedObjectVariable) \
                and all(map(_lru_argument_known, [*args, *kwargs.values()])):
            # an @lru_cache function called with constants (a config helper), or with objects
            # made in this trace (einops: the recipe an earlier cached call, traced through, made;
            # eager passes that call's cached object and hits): the wrapped function is traced,
            # and its answer used where it is the one eager's call gives (_cached_answer).  If it
            # breaks the graph, the call site breaks and Python calls the real cached function.
            wrapped = self.value.__wrapped__
            constants = all(a.is_python_constant() for a in [*args, *kwargs.values()])
            if constants and getattr(wrapped, "_dynamo_marked_constant", False) is True and self.source is not None:
                # marked by its library as constant for the process's lifetime (transformers'
                # is_torch_available, torch._dynamo.assume_constant_result's marker): the cached
                # answer, computed now by the real function, is a constant of the trace
                tx.output.add_guard(guards.IdGuard(self.source, self.value))
                try:
                    value = self.value(*[a.as_python_constant() for a in args],
                                       **{k: v.as_python_constant() for k, v in kwargs.items()})
                except Exception as e:  # noqa: BLE001 - Python raises it when it runs the call
                    raise GraphBreak(gb.OPERATION_RAISES, f"{wrapped.__qualname__}() raised {type(e).__name__}") from e
                return VariableTracker.wrap_constant(value)
            src = AttrSource(self.source, "__wrapped__") if self.source is not None else None
            effects = tx.output.side_effects
            events: list = []  # every change the body makes (each mutation, not only an object's first)
            effects.recorders.append(events)
            try:
                result = tx.wrap(wrapped, src).call_function(tx, args, kwargs)
            finally:
                effects.recorders.remove(events)
            if any(_changes_outside_the_call(e) for e in events):
                # eager runs the body only on a miss: what it changed (a list append, a print, a
                # log call) would happen on every call of the compiled code
                name = getattr(self.value, "__qualname__", None) or f"a {type(wrapped).__name__}"
                raise GraphBreak(gb.LRU_CACHE_CALL, f"{name} is wrapped in functools.lru_cache and changes state "
                                 "outside itself when it runs: Python calls it (a hit does not run it again)")
            return _cached_answer(tx, self, result, args, kwargs, constants)
        if self.value_type is functools._lru_cache_wrapper:
            wrapped = getattr(self.value, "__wrapped__", None)  # (a partial has no __qualname__)
            name = getattr(self.value, "__qualname__", None) or f"a {type(wrapped).__name__}"
            not_const = next(a for a in [*args, *kwargs.values()] if not _lru_argument_known(a))
            raise GraphBreak(gb.LRU_CACHE_CALL, f"{name} is wrapped in functools.lru_cache and called with "
                             f"{not_const.describe()}: Python calls it (a hit returns the cached object)")
        return super().call_function(tx, args, kwargs)

    def unpack(self, tx):
        it, _ = mro_lookup(self.value_type, "__iter__")
        if isinstance(it, types.FunctionType):
            return self.iter(tx).unpack(tx)
        return super().unpack(tx)

    def iter(self, tx):
        it, _ = mro_lookup(self.value_type, "__iter__")
        if not isinstance(it, types.FunctionType):
            return super().iter(tx)
        iterator = UserMethodVariable(it, self).call_function(tx, [], {})
        if isinstance(iterator, ObjectLike):  # a user iterator (often self): its __next__ is inlined
            if isinstance(mro_lookup(iterator.value_type, "__next__")[0], types.FunctionType):
                return UserIteratorVariable(iterator)
            raise GraphBreak(gb.UNSUPPORTED_ITERATION, f"iterating over {self.describe()} (its iterator has no "
                             "Python __next__)")
        if isinstance(iterator, ListIteratorVariable):  # a generator, iter(a list)...
            return iterator
        raise GraphBreak(gb.UNSUPPORTED_ITERATION, f"{self.describe()}.__iter__ returned {iterator.describe()} "
                         "(not an iterator: Python raises TypeError)")


_DELETED = object()


def raise_setattr_error(tx, cls: type, name: str) -> None:
    """``obj.name = v`` on an instance of ``cls`` without a ``__dict__`` nor a slot ``name``:
    the AttributeError is raised in the trace (a user except clause catches it and the trace
    goes on), with the message object.__setattr__ gives.  Raised while another traced
    exception is handled (its __context__), or when the message cannot be made on a blank
    instance: the graph breaks and Python runs the STORE_ATTR."""
    try:
        if mro_lookup(cls, "__del__")[0] is not None:
            raise TypeError("freeing a blank instance would run __del__")
        object.__setattr__(object.__new__(cls), name, None)  # a blank instance: no user code runs
        error = None
    except AttributeError as e:
        error = e
    except Exception:  # noqa: BLE001 - e.g. object.__new__ refuses the class
        error = None
    if error is None or type(error) is not AttributeError or tx.handling_step() is not None:
        raise GraphBreak(gb.OPERATION_RAISES, f"{cls.__name__!r} object has no __dict__ to set {name!r} (AttributeError)")
    tx.raise_exception(ExceptionVariable(AttributeError, [ConstantVariable(str(error))]))


def _cached_answer(tx, cached_fn: VariableTracker, result: VariableTracker, args: list, kwargs: dict,
                   constants: bool) -> VariableTracker:
    """What an @lru_cache function's traced body answered, if eager's call answers the same.
    Eager returns the cached object: an immutable constant equal to the one the real cache holds
    (the real function is called now with the constant arguments, as eager calls it here: a hit
    runs nothing, a miss runs the body the trace proved pure), or an object made in the trace
    (einops' recipe: eager's is the one object the cache holds; by convention never changed, so
    a new one made by the traced body is used alike, unless compared by identity).  Anything else is
    the cached object itself (a tensor, a list: identity and mutations persist in eager), or a
    stale one (the body reads state that changed since): Python calls it."""
    if not constants:  # keyed by objects made in the trace: its body made what the key stands for
        return result
    name = getattr(cached_fn.value, "__qualname__", None) or "an lru_cache function"
    if result.is_python_constant() and _immutable_constant(result.as_python_constant()):
        if cached_fn.source is not None:  # (None: read from a place trusted constant, torch.backends)
            tx.output.add_guard(guards.IdGuard(cached_fn.source, cached_fn.value))
        try:
            real = cached_fn.value(*[a.as_python_constant() for a in args],
                                   **{k: v.as_python_constant() for k, v in kwargs.items()})
        except Exception as e:  # noqa: BLE001 - Python raises it when it runs the call
            raise GraphBreak(gb.OPERATION_RAISES, f"{name}() raised {type(e).__name__}") from e
        value = result.as_python_constant()
        if type(real) is not type(value) or not _immutable_constant(real) or real != value:
            raise GraphBreak(gb.LRU_CACHE_CALL, f"{name} is wrapped in functools.lru_cache and its cache holds "
                             "another answer than its body gives now: Python calls it")
        return result
    if isinstance(result, NewObjectVariable):
        return result
    raise GraphBreak(gb.LRU_CACHE_CALL, f"{name} is wrapped in functools.lru_cache and returns "
                     f"{result.describe()}: Python calls it (eager returns the cached object itself)")


def _changes_outside_the_call(event: tuple) -> bool:
    """A side-effect event (graph/side_effects.py recorders) that changes what existed before an
    @lru_cache body ran: a real object, a global or cell, a replayed call (print, logging).  The
    body's own new objects (a list it builds, the recipe it makes) change nothing outside."""
    kind = event[0]
    if kind in ("mutate", "store"):
        return event[1].source is not None
    return kind == "external"


def _immutable_constant(value) -> bool:
    """None, a bool, number, string, dtype or device, or a tuple / frozenset of those."""
    if isinstance(value, (tuple, frozenset)):
        return all(map(_immutable_constant, value))
    return value is None or type(value) in (bool, int, float, complex, str, bytes, torch.dtype, torch.device)


def _lru_argument_known(var: VariableTracker) -> bool:
    """An argument of an @lru_cache function whose part of the cache key the trace knows: a
    constant, an object made in this trace and hashed by identity (a new key for the real
    cache: the wrapped function runs, as traced), or a tuple of those."""
    if var.is_python_constant():
        return True
    if isinstance(var, TupleVariable):
        return all(map(_lru_argument_known, var.items))
    if not var.mutable_local or var.is_tensor():
        return False
    try:
        key = hash_key(var, "argument")
    except GraphBreak:
        return False
    return isinstance(key, IdentityKey) and key.ident[0] == "var"


class UserDefinedObjectVariable(ObjectLike):
    """A real instance of a user class (read from the frame's inputs)."""

    def identity_key(self):
        return IdentityKey(self, ("obj", id(self.value)))

    def __init__(self, value: Any, source=None):
        super().__init__(source)
        self.value = value
        self.value_type = type(value)

    def _repr_body(self):
        return type(self.value).__name__

    def describe(self):
        return f"{type(self.value).__name__} object"

    def python_type(self):
        return self.value_type

    # ---- a tuple subclass from the frame, read through tuple's own methods ----------------
    def _tuple_items(self, tx, dunder: str) -> Optional[TupleVariable]:
        """The items of an instance of a tuple subclass (not a namedtuple) read from the frame,
        when the class leaves ``dunder`` to tuple: each an input at its place (read with
        ``tuple.__getitem__``, never a method of the class), the length guarded.  None otherwise."""
        if self.source is None or not issubclass(self.value_type, tuple) or \
                mro_lookup(self.value_type, dunder)[1] is not tuple:
            return None
        n = tuple.__len__(self.value)
        tx.output.add_guard(guards.ExprGuard(f"___builtins.tuple.__len__({self.source.name()}) == {n}", (),
                                             self.source))
        return TupleVariable([tx.wrap(tuple.__getitem__(self.value, i), TupleItemSource(self.source, i))
                              for i in range(n)])

    def getitem(self, tx, key):
        items = self._tuple_items(tx, "__getitem__")
        return super().getitem(tx, key) if items is None else items.getitem(tx, key)

    def len(self, tx):
        items = self._tuple_items(tx, "__len__")
        return super().len(tx) if items is None else items.len(tx)

    def has_len(self):
        if issubclass(self.value_type, tuple) and mro_lookup(self.value_type, "__len__")[1] is tuple:
            return True
        return super().has_len()

    def contains(self, tx, item):
        items = self._tuple_items(tx, "__contains__")
        return super().contains(tx, item) if items is None else items.contains(tx, item)

    def iter(self, tx):
        items = self._tuple_items(tx, "__iter__")
        return super().iter(tx) if items is None else items.iter(tx)

    def unpack(self, tx):
        items = self._tuple_items(tx, "__iter__")
        return super().unpack(tx) if items is None else items.unpack(tx)

    def _own_getattribute(self) -> bool:
        """Does the class define ``__getattribute__`` in Python?  Then what the trace reads through
        ``object.__getattribute__`` is read so again (GenericAttrSource), never through the user's
        method, which eager runs only where the code reads the attribute."""
        return isinstance(mro_lookup(self.value_type, "__getattribute__")[0], types.FunctionType)

    def _attr_source(self, name):
        if self.source is None:
            return None
        return GenericAttrSource(self.source, name) if self._own_getattribute() else AttrSource(self.source, name)

    def _instance_dict(self):
        """The instance's ``__dict__`` (None: no dict), read past a Python ``__getattribute__``."""
        if not self._own_getattribute():
            d = getattr(self.value, "__dict__", None)
        else:
            try:
                d = object.__getattribute__(self.value, "__dict__")
            except AttributeError:
                return None
        return d if isinstance(d, dict) else None

    def _instance_attr(self, tx, name):
        d = self._instance_dict()
        if d is not None and name in d:
            return tx.wrap(d[name], self._attr_source(name))
        return None

    def _descriptor_value(self, tx, name):
        cls_attr, _ = mro_lookup(self.value_type, name)
        if type(cls_attr).__name__ in ("member_descriptor", "getset_descriptor") and self.source is not None:
            try:
                value = object.__getattribute__(self.value, name)
            except AttributeError as e:
                raise GraphBreak(gb.MISSING_ATTRIBUTE, f"slot {name!r} is empty") from e
            return tx.wrap(value, self._attr_source(name))
        return None

    def _class_attr_source(self, name):
        return AttrSource(TypeSource(self.source), name) if self.source is not None else None

    def _guard_not_shadowed(self, tx, name) -> None:
        if self.source is not None and self._instance_dict() is not None:
            tx.output.add_guard(guards.NotInDictGuard(self.source, name, generic=self._own_getattribute()))

    def reconstruct(self, cg):
        if self.source is None:
            cg.load_const(self.value)
            return
        super().reconstruct(cg)

    def can_reconstruct(self):
        return True


# dict methods a subclass must keep (not override) for its dict contents to be modelled as a dict
_DICT_METHODS = ("__contains__", "__delitem__", "__getitem__", "__iter__", "__len__", "__setitem__", "clear", "get",
                 "items", "keys", "pop", "popitem", "setdefault", "update", "values", "__reversed__", "__or__",
                 "__ior__", "copy", "move_to_end", "__missing__", "__bool__")


# dict methods the trace's guards and replay call on a real instance (keys guarded with
# ``.keys()``, changes replayed with ``.clear()`` / ``.update()``): never overridden in an input
_REPLAY_DICT_METHODS = ("keys", "clear", "update")


def plain_dict_subclass(cls, python_overrides: bool = False) -> Optional[type]:
    """For a Python subclass of dict / OrderedDict that overrides none of their methods (it only
    adds methods and attributes): that builtin base, whose methods it runs; else None.
    ``python_overrides``: also when it overrides some of them with Python functions (inlined; the
    base's methods called explicitly act on the items), but not ``_REPLAY_DICT_METHODS``."""
    if not isinstance(cls, type) or not issubclass(cls, dict) or issubclass(cls, (collections.defaultdict,
                                                                                   collections.Counter)):
        return None
    if cls in (dict, collections.OrderedDict):
        return None
    base = collections.OrderedDict if issubclass(cls, collections.OrderedDict) else dict
    for name in _DICT_METHODS:
        fn, owner = mro_lookup(cls, name)
        if owner not in (dict, collections.OrderedDict, object, None):
            if not python_overrides or name in _REPLAY_DICT_METHODS or not isinstance(fn, types.FunctionType):
                return None
    return base


class DictStorageMixin:
    """Dict contents of an instance of a dict subclass, kept in ``storage`` (a DictVariable whose
    ``dict_type`` is the builtin base, dict or OrderedDict, for the semantics of its methods).
    A dict method the class does not override, and the base's own method called explicitly
    (``dict.__setitem__(self, k, v)``, ``super().get(k)``), work on ``storage``; a Python override
    is inlined like any method (and reaches ``storage`` through those explicit calls)."""

    storage: "DictVariable"

    def dict_method(self, name) -> bool:
        _, owner = mro_lookup(self.value_type, name)
        return name in _DICT_METHODS and owner in (dict, collections.OrderedDict)

    def var_getattr(self, tx, name):
        if self.dict_method(name):
            return ContainerMethodVariable(self, name)
        return super().var_getattr(tx, name)

    def call_method(self, tx, name, args, kwargs):
        if self.dict_method(name):
            return self.call_base_method(tx, name, args, kwargs)
        return super().call_method(tx, name, args, kwargs)

    def call_base_method(self, tx, name, args, kwargs):
        """The builtin base's method ``name`` on the contents (its ``__init__`` is an update)."""
        if name == "__init__":
            if len(args) > 1:
                raise GraphBreak(gb.OPERATION_RAISES, f"{self.value_type.__name__}.__init__ expected at most 1 argument")
            self.storage.call_method(tx, "update", args, kwargs)
            return NONE
        if name in ("copy", "__or__") and self.storage.dict_type is not dict:
            # OrderedDict's copy / | make an instance of the subclass (its __init__ runs)
            raise GraphBreak(gb.UNSUPPORTED_CALL, f"{self.value_type.__name__}.{name}() makes a new instance")
        result = self.storage.call_method(tx, name, args, kwargs)
        return self if name == "__ior__" else result

    def getitem(self, tx, key):
        return self.storage.getitem(tx, key) if self.dict_method("__getitem__") else super().getitem(tx, key)

    def setitem(self, tx, key, value):
        if self.dict_method("__setitem__"):
            return self.storage.setitem(tx, key, value)
        return super().setitem(tx, key, value)

    def contains(self, tx, item):
        return self.storage.contains(tx, item) if self.dict_method("__contains__") else super().contains(tx, item)

    def len(self, tx):
        return self.storage.len(tx) if self.dict_method("__len__") else super().len(tx)

    def len_tracker(self, tx):
        return self.storage.len_tracker(tx) if self.dict_method("__len__") else super().len_tracker(tx)

    def has_len(self):
        return True

    def iter(self, tx):
        return self.storage.iter(tx) if self.dict_method("__iter__") else super().iter(tx)

    def unpack(self, tx):
        return self.storage.unpack(tx) if self.dict_method("__iter__") else super().unpack(tx)

    def truthiness(self, tx):
        if self.dict_method("__len__") and mro_lookup(self.value_type, "__bool__")[0] is None:
            return self.storage.truthiness(tx)
        return super().truthiness(tx)


class DictSubclassObjectVariable(DictStorageMixin, UserDefinedObjectVariable):
    """A real instance of a plain dict subclass (``plain_dict_subclass``: it overrides no dict
    method), read from the inputs: ``storage`` has the object's source and its keys are guarded;
    changes are replayed on the real object with its (dict's) clear / update."""

    def __init__(self, value, storage, source=None):
        UserDefinedObjectVariable.__init__(self, value, source)
        self.storage = storage


class InstanceDictVariable(VariableTracker):
    """``obj.__dict__`` of a real object or of one made in the trace, read-only and live: a key is
    looked up in the attributes written during the trace, then (real objects) in the real
    ``__dict__``, each key read there guarded.

    Supports ``get``, ``[]``, ``in`` and ``len``; anything else (iteration, views, writes) breaks.
    """

    def __init__(self, obj: "ObjectLike"):
        # (read as object.__getattribute__ does when the class has a __getattribute__ of its own)
        super().__init__(obj._attr_source("__dict__") if isinstance(obj, UserDefinedObjectVariable)
                         else AttrSource(obj.source, "__dict__") if obj.source is not None else None)
        self.obj = obj

    def reconstruct(self, cg):
        cg.reconstruct(self.obj)
        cg.load_attr("__dict__")

    def can_reconstruct(self):
        return self.obj.can_reconstruct()

    def describe(self):
        return f"__dict__ of {self.obj.describe()}"

    def python_type(self):
        return dict

    def _lookup(self, tx, key_var):
        if not key_var.is_python_constant() or not isinstance(key_var.as_python_constant(), str):
            raise GraphBreak(gb.VALUE_UNKNOWN, "__dict__ key not known at trace time")
        key = key_var.as_python_constant()
        pending = tx.output.side_effects.load_attr(self.obj, key)
        if pending is not None:
            return (None if pending is _DELETED else pending), key
        if isinstance(self.obj, NewObjectVariable):
            return None, key
        d = self.obj.value.__dict__
        present = key in d
        tx.output.add_expr_guard(f"({key!r} in {self.source.name()}) is {present!r}")
        return (tx.wrap(d[key], ItemSource(self.source, key)) if present else None), key

    def items(self, tx) -> dict:
        """name -> tracker of every instance attribute as the trace sees it now (copy's state):
        the real ``__dict__``'s keys are guarded, then the writes of the trace applied."""
        se = tx.output.side_effects
        state = {}
        if isinstance(self.obj, UserDefinedObjectVariable):
            d = vars(self.obj.value)
            tx.output.add_guard(guards.DictKeysGuard(self.source, tuple(d)))
            state = {k: tx.wrap(v, ItemSource(self.source, k)) for k, v in d.items()}
        for name, value in se.new_object_attrs(self.obj).items():
            if value is _DELETED:
                state.pop(name, None)
            else:
                state[name] = value
        return state

    def var_getattr(self, tx, name):
        if name in ("get", "__contains__", "__getitem__"):
            return ContainerMethodVariable(self, name)
        return super().var_getattr(tx, name)

    def call_method(self, tx, name, args, kwargs):
        if name == "get" and 1 <= len(args) <= 2 and not kwargs:
            value, _ = self._lookup(tx, args[0])
            return value if value is not None else (args[1] if len(args) == 2 else NONE)
        if name == "__contains__" and len(args) == 1:
            value, _ = self._lookup(tx, args[0])
            return ConstantVariable(value is not None)
        if name == "__getitem__" and len(args) == 1:
            value, key = self._lookup(tx, args[0])
            if value is None:
                self.raise_in_trace(tx, KeyError, [args[0]])
            return value
        if name == "__len__" and not args and not kwargs:  # len(vars(obj)): the attributes as the trace sees them
            return ConstantVariable(len(self.items(tx)))
        raise GraphBreak(gb.UNSUPPORTED_ATTRIBUTE, f"{name} on an object's __dict__")


class CMethodOfObjectVariable(BoundMethodOfVariable):
    """``obj.__eq__`` (a slot wrapper or method of a builtin base such as ``object``, bound to a
    Python object), read as a value (dir()-driven code reads every name): its type is known
    (method-wrapper / builtin method); calling it this way breaks."""

    def __init__(self, obj, name: str, cls: type):
        super().__init__(obj, name)
        self.cls = cls

    def python_type(self):
        return self.cls

    def call_function(self, tx, args, kwargs):
        # (the object's call_method found no answer of its own and read this attribute)
        raise GraphBreak(gb.UNSUPPORTED_ATTRIBUTE, f"descriptor {self.name!r} of {self.obj.python_type().__name__}")


class NewObjectVariable(ObjectLike):
    """An instance of a user class created during the trace."""

    mutable_local = True

    def identity_key(self):
        return IdentityKey(self, ("var", id(self)))

    def __init__(self, cls: type, class_source=None):
        super().__init__()
        self.value_type = cls
        self.class_source = class_source  # Source of the class (guards on class attributes read), or None

    def describe(self):
        return f"new {self.value_type.__name__} object"

    def _descriptor_value(self, tx, name):
        cls_attr, owner = mro_lookup(self.value_type, name)
        if name == "__weakref__" and type(cls_attr).__name__ == "getset_descriptor" and owner is not None \
                and owner.__module__ != "builtins":
            return ConstantVariable(None)  # (the trace makes no weak reference to an object it made)
        return None

    def _class_attr_source(self, name):
        return AttrSource(self.class_source, name) if self.class_source is not None else None

    def python_type(self):
        return self.value_type

    def _instance_attr(self, tx, name):
        return None  # all attributes of a new object live in the side-effect log

    def reconstruct(self, cg):
        cg.reconstruct_new_object(self)

    def can_reconstruct(self):
        return True


class NamespaceVariable(NewObjectVariable):
    """A types.SimpleNamespace made in the trace: rebuilt as ``SimpleNamespace(**attrs)`` (its
    ``__new__`` is not object's)."""

    def reconstruct(self, cg):
        attrs = cg.side_effects.new_object_attrs(self)
        cg.load_callable(types.SimpleNamespace)
        for value in attrs.values():
            cg.reconstruct(value)
        cg.call(len(attrs), tuple(attrs))


class NewDictObjectVariable(DictStorageMixin, NewObjectVariable):
    """An instance of a Python dict / OrderedDict subclass created in the trace (a ModelOutput-
    like container): its items in ``storage``, its attributes in the side-effect log.  Rebuilt
    without running its ``__init__``: the base's ``__new__``, then the base's own ``__setitem__``
    per item and ``object.__setattr__`` per attribute (no override of the class runs)."""

    def __init__(self, cls: type, base: type, class_source=None):
        NewObjectVariable.__init__(self, cls, class_source)
        self.storage = DictVariable({}, dict_type=base)

    def reconstruct(self, cg):
        attrs = cg.side_effects.new_object_attrs(self)
        cg.load_callable(_new_dict_object)
        cg.load_const(self.value_type)
        cg.load_const(self.storage.dict_type)
        cg.reconstruct(self.storage)
        for name, value in attrs.items():
            cg.load_const(name)
            cg.reconstruct(value)
        cg.emit("BUILD_MAP", len(attrs))
        cg.call(4)

    def can_reconstruct(self):
        return self.storage.can_reconstruct()


def _new_dict_object(cls, base, items: dict, attrs: dict):
    """An instance of the dict subclass ``cls`` with ``items`` and ``attrs``, made by its builtin
    ``base``'s own methods (generated code calls it; no method of ``cls`` runs)."""
    obj = base.__new__(cls)
    for k, v in items.items():
        base.__setitem__(obj, k, v)
    for name, value in attrs.items():
        object.__setattr__(obj, name, value)
    return obj


# collections.abc's view classes (what Mapping.keys() / values() / items() return): their only
# slot is MappingView's ``_mapping``, and they have no instance __dict__
_MAPPING_VIEWS = (collections.abc.KeysView, collections.abc.ValuesView, collections.abc.ItemsView,
                  collections.abc.MappingView)


def bind_class_attribute(tx, obj: VariableTracker, cls: type, name: str, cls_attr, cls_src, owner):
    """``obj.name`` where ``name`` is found on ``obj``'s class (not the instance) and is not a
    function, staticmethod, classmethod or property (those are the callers'): what Python's
    attribute lookup gives, or a graph break for a descriptor the trace cannot run."""
    if isinstance(cls_attr, functools._lru_cache_wrapper) and python_function_handler(cls_attr):
        guard_class_attr(tx, cls_src, cls_attr)  # binds like a function; answered by its handler
        return UserMethodVariable(cls_attr, obj)
    get = getattr(type(cls_attr), "__get__", None)
    if isinstance(get, types.FunctionType) and not isinstance(cls_attr, type):
        # a non-data descriptor written in Python (torch.distributions' lazy_property, a decorator
        # object that binds): Python calls type(d).__get__(d, obj, cls), and so does the trace (inlined)
        guard_class_attr(tx, cls_src, cls_attr)
        return UserFunctionVariable(get).call_function(tx, [tx.wrap(cls_attr, cls_src), obj, tx.wrap(cls, None)], {})
    if type(cls_attr) in (types.WrapperDescriptorType, types.MethodDescriptorType,
                          types.ClassMethodDescriptorType) and getattr(owner, "__module__", None) == "builtins":
        # a C method of a builtin base (object.__eq__, object.__reduce_ex__): the bound
        # method (dir()-driven code reads every name); calling it is the object's own call
        return CMethodOfObjectVariable(obj, name, type(getattr(object(), "__eq__"))
                                       if type(cls_attr) is types.WrapperDescriptorType else types.BuiltinMethodType)
    if get is not None and not isinstance(cls_attr, type):
        # a descriptor written in C (functools.partialmethod's, a dynamo_lite.disable'd method)
        raise GraphBreak(gb.UNSUPPORTED_ATTRIBUTE, f"descriptor {name!r} of {cls.__name__}")
    return tx.wrap(cls_attr, cls_src)


def classmethod_of_descriptor(tx, attr: classmethod, cls_var, name: str):
    """``cls.name`` for a classmethod wrapping something other than a function: before 3.13 it
    chains to the wrapped descriptor (``@classmethod @property``: ``fget(cls)``, inlined); on 3.13
    (no chaining: Python raises TypeError) and for other wrapped objects Python reads it."""
    inner = attr.__func__
    if isinstance(inner, property) and bytecode_compat.CLASSMETHOD_CHAINS_DESCRIPTORS and \
            isinstance(inner.fget, types.FunctionType):
        return UserFunctionVariable(inner.fget).call_function(tx, [cls_var], {})
    raise GraphBreak(gb.UNSUPPORTED_ATTRIBUTE, f"classmethod {name!r} wrapping {type(inner).__name__}")


def guard_class_attr(tx, cls_src, cls_attr) -> None:
    """Guard that the class attribute at ``cls_src`` (``type(obj).name``) is still ``cls_attr``:
    the function of a staticmethod/classmethod, else the object itself.  No source: nothing."""
    if cls_src is None:
        return
    if isinstance(cls_attr, staticmethod):
        guard_function(tx, cls_src, cls_attr.__func__)
    elif isinstance(cls_attr, classmethod):
        if cls_attr.__func__ in runtime.MADE_FUNCTIONS:
            guard_function(tx, AttrSource(cls_src, "__func__"), cls_attr.__func__)
        else:
            tx.output.add_guard(guards.IsGuard(cls_src, ("__func__",), cls_attr.__func__))
    else:
        guard_function(tx, cls_src, cls_attr)


def guard_function(tx, src, fn) -> None:
    """Guard that ``src`` is still ``fn``.  A method of a class made by a class statement in
    compiled code (runtime.MADE_FUNCTIONS) is a new function on every call: it is guarded by
    what it runs (a plain function with its code, globals, defaults and no closure: a class
    body's constant defaults tuple is the same object every time) instead of identity; anything
    else by identity."""
    add = tx.output.add_guard
    if type(fn) is types.FunctionType and fn in runtime.MADE_FUNCTIONS and fn.__closure__ is None and \
            fn.__kwdefaults__ is None:
        add(guards.IsGuard(src, ("__class__",), types.FunctionType))
        for attr in ("__code__", "__globals__", "__defaults__", "__closure__", "__kwdefaults__"):
            add(guards.IsGuard(src, (attr,), getattr(fn, attr)))
        return
    add(guards.IdGuard(src, fn))


def class_of(tx, obj: VariableTracker, cls: type) -> VariableTracker:
    """``type(obj)`` / ``obj.__class__`` as a tracker: sourced as ``type(<obj's source>)``
    when obj has one, so class attributes read through it are guarded."""
    source = getattr(obj, "source", None)
    if source is not None:
        return tx.wrap(cls, TypeSource(source))
    if isinstance(obj, NewObjectVariable) and obj.class_source is not None and obj.value_type is cls:
        return tx.wrap(cls, obj.class_source)  # an object made in the trace: the class it was made from
    return tx.wrap(cls, None)



class NamedTupleVariable(TupleVariable):
    """An instance of a collections.namedtuple / typing.NamedTuple class."""

    def __init__(self, tuple_type, items, source=None):
        if source is None and tuple_type.__dictoffset__:
            # a subclass without __slots__: its instances carry attributes, so identity matters,
            # and a tuple made in the trace is rebuilt (a new object) wherever it is live
            raise GraphBreak(gb.UNSUPPORTED_CALL, f"making a {tuple_type.__name__} (its instances have a __dict__)")
        super().__init__(items, source)
        self.tuple_type = tuple_type

    def python_type(self):
        return self.tuple_type

    def describe(self):
        return f"namedtuple {self.tuple_type.__name__}"

    def clone_with(self, items):
        return TupleVariable(items)

    def as_python_constant(self):
        # tuple.__new__, as reconstruct: a class's own __new__ (Stride(h) doubling h) made the
        # items already and must not run again
        return tuple.__new__(self.tuple_type, [i.as_python_constant() for i in self.items])

    def constant_copy(self):
        if self.is_python_constant():
            return self.as_python_constant()
        return tuple.__new__(self.tuple_type, [i.constant_copy() for i in self.items])

    def _override(self, dunder):
        """The class's own ``dunder`` where it replaces tuple's (None when tuple's is used)."""
        raw, owner = mro_lookup(self.tuple_type, dunder)
        return None if owner in (tuple, object, None) else raw

    def _no_override(self, dunder):
        if self._override(dunder) is not None:
            raise GraphBreak(gb.UNSUPPORTED_CALL, f"{self.tuple_type.__name__} defines its own {dunder}")

    def getitem(self, tx, key):
        raw = self._override("__getitem__")
        if raw is None:
            return super().getitem(tx, key)
        if not isinstance(raw, types.FunctionType):
            raise GraphBreak(gb.UNSUPPORTED_CALL, f"{self.tuple_type.__name__}.__getitem__ is {type(raw).__name__}")
        return UserMethodVariable(raw, self).call_function(tx, [key], {})  # what t[key] runs

    def len(self, tx):
        self._no_override("__len__")
        return super().len(tx)

    def unpack(self, tx):
        self._no_override("__iter__")
        return super().unpack(tx)

    def iter(self, tx):
        self._no_override("__iter__")
        return super().iter(tx)

    def contains(self, tx, item):
        self._no_override("__contains__")
        return super().contains(tx, item)

    def var_getattr(self, tx, name):
        fields = list(self.tuple_type._fields)
        if name in fields:
            return self.items[fields.index(name)]
        if name == "_fields":
            return TupleVariable([ConstantVariable(f) for f in fields])
        if name in ("_asdict", "_replace"):
            return ContainerMethodVariable(self, name)
        raw, _owner = mro_lookup(self.tuple_type, name)
        if isinstance(raw, staticmethod) and isinstance(raw.__func__, types.FunctionType):
            return UserFunctionVariable(raw.__func__)  # no binding: p.static() takes no self
        if isinstance(raw, classmethod) and isinstance(raw.__func__, types.FunctionType):
            return UserMethodVariable(raw.__func__, class_of(tx, self, self.tuple_type))
        attr = getattr(self.tuple_type, name, None)
        if isinstance(raw, types.FunctionType) and isinstance(attr, types.FunctionType):
            return UserMethodVariable(attr, self)
        if isinstance(attr, property):
            return UserFunctionVariable(attr.fget).call_function(tx, [self], {})
        return super().var_getattr(tx, name)

    def call_method(self, tx, name, args, kwargs):
        fields = list(self.tuple_type._fields)
        if name == "_asdict":
            return DictVariable(dict(zip(fields, self.items)))
        if name == "_replace":
            if args or any(k not in fields for k in kwargs):
                raise GraphBreak(gb.OPERATION_RAISES, f"{self.tuple_type.__name__}._replace(): bad arguments (ValueError)")
            items = list(self.items)
            for k, v in kwargs.items():
                items[fields.index(k)] = v
            return NamedTupleVariable(self.tuple_type, items)
        return super().call_method(tx, name, args, kwargs)

    def reconstruct(self, cg):
        if self.source is not None:
            return VariableTracker.reconstruct(self, cg)
        # tuple.__new__(cls, items): what a namedtuple's generated __new__ does,
        # without calling Python code (which the hook would try to capture)
        cg.load_callable(tuple.__new__)
        cg.load_const(self.tuple_type)
        for item in self.items:
            cg.reconstruct(item)
        cg.emit("BUILD_TUPLE", len(self.items))
        cg.call(2)


_IMMUTABLE_TYPE = 1 << 8  # Py_TPFLAGS_IMMUTABLETYPE


def _binds_on_read(value: VariableTracker) -> bool:
    """Would ``value``, stored on a class, be a descriptor there (a function, a property, an
    object whose class defines ``__get__``)?  Unknown kinds count as yes."""
    try:
        kind = value.python_type()
    except Exception:  # noqa: BLE001  (a tracker that cannot name its type)
        return True
    return mro_lookup(kind, "__get__")[0] is not None


class UserDefinedClassVariable(VariableTracker):
    """A user class (calling it creates a NewObjectVariable and inlines __init__).

    ``metaclass_call_done``: the call comes from type.__call__ (a metaclass's own __call__ already
    ran and called its super().__call__): construct without calling the metaclass again.
    """

    metaclass_call_done = False

    def identity_key(self):
        return IdentityKey(self, ("obj", id(self.value)))

    def __init__(self, value: type, source=None):
        super().__init__(source)
        self.value = value

    def _repr_body(self):
        return self.value.__qualname__

    def describe(self):
        return f"class {self.value.__qualname__}"

    def python_type(self):
        return type(self.value)

    def as_python_constant(self):
        return self.value

    def is_python_constant(self):
        return True

    def var_getattr(self, tx, name):
        if name in ("__name__", "__qualname__", "__module__"):
            return ConstantVariable(getattr(self.value, name))
        if name == "__members__" and type(self.value) is enum.EnumMeta:
            # Color.__members__: a new read-only view of name -> member on every read (members are fixed)
            return MappingProxyVariable(DictVariable({k: ConstantVariable(v) for k, v in self.value.__members__.items()}))
        if name == "_make" and is_namedtuple_class(self.value) and \
                getattr(getattr(self.value._make, "__func__", None), "__code__", None) is _NAMEDTUPLE_MAKE_CODE:
            return BoundMethodOfVariable(self, "_make")
        stored = tx.output.side_effects.load_class_attr(self.value, name)
        if stored is not None:  # written earlier in the trace (setattr below)
            return stored
        attr, owner = mro_lookup(self.value, name)
        if isinstance(attr, (staticmethod, classmethod)) and self.source is not None:
            # cls.name gives the function (static) or a new bound method (class): guard the function
            src = AttrSource(self.source, name)
            tx.output.add_guard(guards.IsGuard(src, ("__func__",) if isinstance(attr, classmethod) else (),
                                               attr.__func__))
        if isinstance(attr, staticmethod):
            return UserFunctionVariable(attr.__func__)
        if isinstance(attr, classmethod) and not isinstance(attr.__func__, types.FunctionType):
            return classmethod_of_descriptor(tx, attr, self, name)
        if isinstance(attr, classmethod):
            return UserMethodVariable(attr.__func__, self)
        if owner is None:  # not in the class's MRO (a class attribute that is None is found: guarded below)
            if hasattr(self.value, name):  # (from the metaclass: __mro__, __bases__, ...)
                value = getattr(self.value, name)
                if self.source is None:
                    guard_attr_value(tx, self.value, name, value)
                    return tx.wrap(value, None)
                return tx.wrap(value, AttrSource(self.source, name))
            raise GraphBreak(gb.MISSING_ATTRIBUTE, f"class {self.value.__name__} has no attribute {name!r}")
        value = getattr(self.value, name)
        if self.source is None:  # a class met without a source: guard the attribute through the class itself
            guard_attr_value(tx, self.value, name, value)
            return tx.wrap(value, None)
        return tx.wrap(value, AttrSource(self.source, name))

    def setattr(self, tx, name, value):
        """``cls.name = value`` (a counter, a singleton's ``cls._inst``, a registry): replayed on
        the real class after the graph; later reads in the trace, through the class, a subclass or
        an instance, see it.  Breaks where the store would do more than set an entry of the class's
        ``__dict__``: a dunder (type slots), a metaclass with its own ``__setattr__`` or a data
        descriptor for the name, a builtin or extension type (TypeError), a method, property or other
        descriptor replaced or stored (it would bind on instance reads), a class without a source."""
        cls = self.value
        why = None
        if self.source is None:
            why = "the trace reached it by no path it can load again"
        elif name.startswith("__") and name.endswith("__"):
            why = "a dunder attribute (it may change the type's slots)"
        elif mro_lookup(type(cls), "__setattr__")[0] is not type.__dict__["__setattr__"] or \
                hasattr(type(mro_lookup(type(cls), name)[0]), "__set__"):
            why = f"its metaclass {type(cls).__name__} answers the store"
        elif type.__dict__["__flags__"].__get__(cls) & _IMMUTABLE_TYPE:
            why = "a builtin or extension type (TypeError)"
        elif hasattr(type(mro_lookup(cls, name)[0]), "__get__") or _binds_on_read(value):
            why = "a method, property or other descriptor (it binds when read through an instance)"
        if why is not None:
            raise GraphBreak(gb.SIDE_EFFECT, f"setting attribute {name!r} on {self.describe()}: {why}")
        tx.output.side_effects.store_class_attr(self, name, value)
        return NONE

    def call_method(self, tx, name, args, kwargs):
        if name == "_make" and len(args) == 1 and not kwargs and is_namedtuple_class(self.value):
            items = args[0].unpack(tx)
            if len(items) != len(self.value._fields):
                raise GraphBreak(gb.OPERATION_RAISES, f"{self.value.__name__}._make(): wrong number of items (TypeError)")
            return NamedTupleVariable(self.value, items)
        return super().call_method(tx, name, args, kwargs)

    def unpack(self, tx):
        if isinstance(self.value, enum.EnumMeta):  # list(Color), `Color.RED in Color`: its members
            return [ConstantVariable(m) for m in self.value]
        return super().unpack(tx)

    def _metaclass_method(self, tx, name):
        """The metaclass's own Python ``name`` (``__contains__`` of a class used as a container),
        guarded through ``type(cls)`` when the class has a source; None otherwise."""
        fn, _ = mro_lookup(type(self.value), name)
        if not isinstance(fn, types.FunctionType) or isinstance(self.value, enum.EnumMeta):
            return None
        if self.source is not None:
            guard_class_attr(tx, AttrSource(TypeSource(self.source), name), fn)
        else:
            guard_attr_value(tx, type(self.value), name, fn)
        return fn

    def contains(self, tx, item):
        # `x in C` where C's metaclass defines __contains__ (a class of constants used as an enum)
        fn = self._metaclass_method(tx, "__contains__")
        if fn is not None:
            return UserFunctionVariable(fn).call_function(tx, [self, item], {}).bool(tx)
        return super().contains(tx, item)

    def call_function(self, tx, args, kwargs):
        cls = self.value
        if isinstance(cls, enum.EnumMeta) and len(args) == 1 and not kwargs and args[0].is_python_constant() and \
                mro_lookup(cls, "_missing_")[1].__module__ == "enum" and type(cls) is enum.EnumMeta:
            # Color(2): the member with that value (a lookup: no code of the class runs)
            try:
                return ConstantVariable(cls(args[0].as_python_constant()))
            except ValueError as e:
                raise GraphBreak(gb.OPERATION_RAISES, f"{cls.__name__}({args[0].as_python_constant()!r}) raised ValueError") from e
        if is_namedtuple_class(cls):
            new = cls.__new__
            defaults = [wrap_default(tx, d) for d in (new.__defaults__ or ())]
            bound = bind_arguments(tx, new.__code__, cls.__name__, defaults, {}, [self, *args], kwargs)
            return NamedTupleVariable(cls, [bound[f] for f in cls._fields])
        if cls is contextlib.suppress and not kwargs and all(
                a.is_python_constant() and isinstance(a.as_python_constant(), type) and
                issubclass(a.as_python_constant(), BaseException) for a in args):
            return SuppressVariable(tuple(a.as_python_constant() for a in args))
        if cls is contextlib.nullcontext:
            bound = bind_arguments(tx, cls.__init__.__code__, "nullcontext", [NONE], {}, [self, *args], kwargs)
            return NullContextVariable(bound["enter_result"])
        if cls is collections.deque:
            bound = bind_arguments(tx, _DEQUE_SIGNATURE, "deque", [NONE, NONE], {}, args, kwargs)
            maxlen = bound["maxlen"]
            if not maxlen.is_python_constant() or type(maxlen.as_python_constant()) not in (int, type(None)) or \
                    (maxlen.as_python_constant() or 0) < 0:
                raise GraphBreak(gb.OPERATION_RAISES, "deque(): maxlen must be a non-negative int or None")
            iterable = bound["iterable"]
            items = [] if iterable.is_python_constant() and iterable.as_python_constant() is None else \
                iterable.unpack(tx)
            return DequeVariable(items, maxlen.as_python_constant())
        if cls is types.SimpleNamespace:
            if args:
                raise GraphBreak(gb.OPERATION_RAISES, "SimpleNamespace() takes no positional arguments (TypeError)")
            obj = NamespaceVariable(cls, self.source)
            tx.output.side_effects.track_new_object(obj)
            for name, value in kwargs.items():
                tx.output.side_effects.store_attr(obj, name, value)
            return obj
        if cls is collections.ChainMap:
            if kwargs or not all(type(a) is DictVariable for a in args):
                raise GraphBreak(gb.UNSUPPORTED_CALL, "ChainMap() of something other than dicts")
            return ChainMapVariable(list(args))
        if cls is collections.Counter:
            if len(args) > 1:
                raise GraphBreak(gb.OPERATION_RAISES, "Counter() takes at most one positional argument (TypeError)")
            counter = CounterVariable({})
            counter.call_method(tx, "update", list(args), kwargs)
            return counter
        if cls is collections.OrderedDict or cls is collections.defaultdict:
            if cls is collections.OrderedDict:
                result = dict_from_args(tx, *args, **kwargs)
                return DictVariable(result.items, dict_type=collections.OrderedDict)
            factory = args[0] if args else NONE
            if factory.is_python_constant() and factory.as_python_constant() is not None and \
                    not callable(factory.as_python_constant()):
                raise GraphBreak(gb.OPERATION_RAISES, "defaultdict(): first argument must be callable or None (TypeError)")
            result = dict_from_args(tx, *args[1:], **kwargs)
            return DefaultDictVariable(result.items, factory)
        if issubclass(cls, BaseException):
            return ExceptionVariable.create(tx, cls, args, kwargs)
        if issubclass(cls, _nn_module_class()):
            # a library's stateless module class built in forward (transformers' ACT2FN[...]):
            # built at trace time when its construction is nn.Module's own (nn_module.py)
            made = VariableTracker.build_module(tx, cls, list(args), dict(kwargs))
            if made is not None:
                if self.source is not None:  # the class's forward, traced, must stay the same
                    forward, _ = mro_lookup(cls, "forward")
                    tx.output.add_guard(guards.IdGuard(AttrSource(self.source, "forward"), forward))
                return made
        if is_frozendict_class(cls):
            if len(args) == 1 and not kwargs and type_or_none(args[0]) is cls:
                return args[0]  # frozendict(fd) is fd
            items = dict_from_args(tx, *args, **kwargs).items
            if not items:
                raise GraphBreak(gb.UNSUPPORTED_CALL, "an empty frozendict (a shared singleton)")
            return FrozenDictVariable(items, dict_type=cls)
        if mro_lookup(cls, "__del__")[0] is not None:
            # a traced object is never made, so its __del__ would never run (or run at another time)
            raise GraphBreak(gb.FINALIZER_OBJECT, f"class {cls.__name__} defines __del__ (an object Python must make)")
        if _dict_base(cls) is not None:
            return self._new_dict_object(tx, cls, args, kwargs)
        if plain_set_subclass(cls):
            if kwargs or len(args) > 1:
                raise GraphBreak(gb.BAD_ARGUMENTS, f"{cls.__name__}() with keyword or several arguments")
            items = args[0].unpack(tx) if args else []
            return SetVariable(items, frozen=issubclass(cls, frozenset), tx=tx, set_type=cls)
        if getattr(cls, "__abstractmethods__", None):  # object.__new__ raises TypeError: let Python do it
            raise GraphBreak(gb.OPERATION_RAISES, f"class {cls.__name__} has abstract methods (TypeError)")
        if type(cls) is not type and not _is_plain_meta(cls) and not self.metaclass_call_done:
            meta_call, owner = mro_lookup(type(cls), "__call__")
            if isinstance(meta_call, types.FunctionType):
                # the metaclass's own __call__, inlined (its super().__call__ comes back through
                # type.__call__ to the plain construction below)
                return UserFunctionVariable(meta_call).call_function(tx, [self, *args], kwargs)
            if meta_call is not type.__call__:
                raise GraphBreak(gb.UNSUPPORTED_CALL, f"class {cls.__name__} has a custom metaclass")
            # a metaclass that only shapes class creation: instances are made as for any class
        new_fn, _ = mro_lookup(cls, "__new__")
        if isinstance(new_fn, staticmethod) and isinstance(new_fn.__func__, types.FunctionType):
            return self._construct_with_own_new(tx, new_fn.__func__, args, kwargs)
        if (new_fn is not None and new_fn is not object.__new__ and not isinstance(new_fn, staticmethod)) or (
                isinstance(new_fn, staticmethod) and new_fn.__func__ is not object.__new__):
            owner = next(k for k in type.__dict__["__mro__"].__get__(cls) if "__new__" in vars(k))
            what = "defines __new__" if owner is cls else \
                f"is made by {owner.__qualname__}.__new__ (an instance of a builtin type's subclass)"
            raise GraphBreak(gb.UNSUPPORTED_CALL, f"class {cls.__name__} {what}")
        obj = self.new_instance(tx)
        init, _ = mro_lookup(cls, "__init__")
        if isinstance(init, types.FunctionType):
            UserFunctionVariable(init).call_function(tx, [obj, *args], kwargs)
        elif (args or kwargs) and init is object.__init__:
            raise GraphBreak(gb.BAD_ARGUMENTS, f"{cls.__name__}() takes no arguments")
        return obj

    def new_instance(self, tx) -> VariableTracker:
        """``object.__new__(cls)``: a new instance, its attributes kept by the trace, for a class
        whose instances are plain objects (no __slots__ storage, no builtin base)."""
        cls = self.value
        for base in cls.__mro__[:-1]:
            # empty __slots__ (collections.abc mixins, ABCs) add no storage: fine; so do the
            # Mapping views' (only ``_mapping``, set by MappingView.__init__)
            if base.__module__ == "builtins" or not hasattr(base, "__dict__") or \
                    (base.__dict__.get("__slots__", ()) not in ((), []) and cls not in _MAPPING_VIEWS):
                why = f"has __slots__ {base.__dict__['__slots__']!r}" if base is cls else f"derives from {base.__name__}"
                raise GraphBreak(gb.UNSUPPORTED_CALL, f"class {cls.__name__} {why}: its instances are made by Python")
        if issubclass(cls, _nn_module_class()):  # its nn.Module state lives in its attributes
            obj = VariableTracker.new_module_object(cls, self.source)
        else:
            obj = NewObjectVariable(cls, self.source)
        tx.output.side_effects.track_new_object(obj)
        return obj

    def _construct_with_own_new(self, tx, new_fn, args, kwargs):
        """``cls(...)`` of a class whose ``__new__`` is Python (a singleton, a cache of instances):
        type.__call__'s steps, its ``__new__`` inlined, then the ``__init__`` of what it returned
        when that is an instance of ``cls`` (an object it made, one it kept from an earlier call)."""
        cls = self.value
        if self.source is not None:  # (``K.__new__ = other`` later: the entry must not run this one)
            tx.output.add_guard(guards.IdGuard(AttrSource(self.source, "__new__"), new_fn))
        obj = UserFunctionVariable(new_fn).call_function(tx, [self, *args], kwargs)
        try:
            made = obj.python_type()
        except GraphBreak:
            raise GraphBreak(gb.UNSUPPORTED_CALL, f"{cls.__name__}.__new__ returned {obj.describe()}") from None
        if not (isinstance(made, type) and issubclass(made, cls)):
            return obj  # (not an instance: its __init__ is not called, as type.__call__ skips it)
        init, _ = mro_lookup(made, "__init__")
        if isinstance(init, types.FunctionType):
            UserFunctionVariable(init).call_function(tx, [obj, *args], kwargs)
        elif init is not object.__init__:
            raise GraphBreak(gb.UNSUPPORTED_CALL, f"{made.__name__}.__init__ is not a Python function")
        return obj

    def _new_dict_object(self, tx, cls, args, kwargs):
        """``cls(...)`` of a dict / OrderedDict subclass: a NewDictObjectVariable, then its
        ``__init__`` (inlined when Python, else the base's: the arguments are its items)."""
        base = _dict_base(cls)
        if type(cls) not in (type, abc.ABCMeta) or mro_lookup(cls, "__new__")[0] not in (
                dict.__new__, collections.OrderedDict.__new__, object.__new__) or \
                any("__slots__" in k.__dict__ for k in cls.__mro__ if k.__module__ != "builtins" and
                    k is not collections.OrderedDict):
            raise GraphBreak(gb.UNSUPPORTED_CALL, f"class {cls.__name__} (a dict subclass) with its own __new__, "
                             "metaclass or __slots__")
        obj = NewDictObjectVariable(cls, base, self.source)
        tx.output.side_effects.track_new_object(obj)
        init, _ = mro_lookup(cls, "__init__")
        if isinstance(init, types.FunctionType):
            UserFunctionVariable(init).call_function(tx, [obj, *args], kwargs)
        else:
            obj.call_base_method(tx, "update", list(args), kwargs)
        return obj

    def reconstruct(self, cg):
        if self.source is None:
            cg.load_const(self.value)
            return
        super().reconstruct(cg)

    def can_reconstruct(self):
        return True


def _nn_module_class() -> type:
    import torch.nn

    return torch.nn.Module


def _dict_base(cls) -> Optional[type]:
    """dict or OrderedDict for a Python subclass of one of them (not defaultdict / Counter) whose
    instances the trace can make; else None."""
    if not isinstance(cls, type) or not issubclass(cls, dict) or cls in (dict, collections.OrderedDict) or \
            issubclass(cls, (collections.defaultdict, collections.Counter)):
        return None
    if mro_lookup(cls, "__missing__")[0] is not None:
        return None
    return collections.OrderedDict if issubclass(cls, collections.OrderedDict) else dict


_DEQUE_SIGNATURE = (lambda iterable=None, maxlen=None: None).__code__  # deque([iterable[, maxlen]])
_NAMEDTUPLE_MAKE_CODE = collections.namedtuple("_T", "a")._make.__func__.__code__


def namedtuple_of(cls, items):
    """An instance of namedtuple class ``cls`` made from ``items`` (None: not a plain namedtuple class)."""
    if not is_namedtuple_class(cls) or cls.__dictoffset__:
        return None
    return NamedTupleVariable(cls, items)


VariableTracker.namedtuple_of = staticmethod(namedtuple_of)  # see VariableTracker.namedtuple_of


def is_namedtuple_class(cls) -> bool:
    """A class made by collections.namedtuple / typing.NamedTuple whose __new__ is the generated one."""
    if not (isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "_fields")):
        return False
    new = cls.__new__
    return isinstance(new, types.FunctionType) and \
        str(new.__globals__.get("__name__", "")).startswith("namedtuple_")


def _is_plain_meta(cls) -> bool:
    import abc

    return type(cls) in (abc.ABCMeta,)


def wrap_default(tx, value):
    return tx.wrap(value, None)


def is_dataclass_instance(value) -> bool:
    return dataclasses.is_dataclass(value) and not isinstance(value, type)


class SuperVariable(VariableTracker):
    """super(cls, obj): attribute lookup starting after ``cls`` in obj's MRO."""

    def __init__(self, cls: type, obj: VariableTracker):
        super().__init__()
        self.cls = cls
        self.obj = obj

    def var_getattr(self, tx, name):
        from .builtin import BuiltinVariable  # lazy: upward (cycle): a slot wrapper bound through super() is a builtin, and builtin.py sits above user classes

        if isinstance(self.obj, UserDefinedClassVariable) and not isinstance(self.obj.value, self.cls):
            obj_type = self.obj.value  # super() in a classmethod: along the class's own MRO
        else:
            obj_type = self.obj.python_type()  # an instance (a class in its metaclass's methods too)
        mro = obj_type.__mro__
        try:
            start = mro.index(self.cls) + 1
        except ValueError as e:
            raise GraphBreak(gb.UNSUPPORTED_CALL, "super(): obj is not an instance of cls") from e
        # the classes are read through type(obj).__mro__ when obj has a source: the ones passed over
        # must still lack ``name``, and the function found is guarded (its defaults when read)
        mro_src = None
        if self.obj.source is not None and obj_type is self.obj.python_type() and \
                isinstance(self.obj, UserDefinedObjectVariable):
            mro_src = AttrSource(TypeSource(self.obj.source), "__mro__")
        elif isinstance(self.obj, NewObjectVariable) and self.obj.class_source is not None and \
                obj_type is self.obj.python_type():
            mro_src = AttrSource(self.obj.class_source, "__mro__")  # (an object the trace made)
        for i, klass in enumerate(mro[start:], start):
            if name in klass.__dict__:
                attr = klass.__dict__[name]
                fn_src = ItemSource(AttrSource(ItemSource(mro_src, i), "__dict__"), name) if mro_src else None
                if isinstance(attr, staticmethod):
                    return UserFunctionVariable(attr.__func__)
                if isinstance(attr, classmethod) and not isinstance(attr.__func__, types.FunctionType):
                    return classmethod_of_descriptor(tx, attr, UserDefinedClassVariable(obj_type), name)
                if isinstance(attr, classmethod):
                    return UserMethodVariable(attr.__func__, UserDefinedClassVariable(obj_type))
                if isinstance(attr, types.FunctionType):
                    if fn_src is not None:
                        guard_function(tx, fn_src, attr)
                    return UserMethodVariable(attr, self.obj, fn_source=fn_src)
                if isinstance(attr, property):
                    guard_class_attr(tx, fn_src, attr)
                    return UserFunctionVariable(attr.fget).call_function(tx, [self.obj], {})
                if attr is object.__init__ or attr is object.__setattr__ or isinstance(
                        attr, (types.WrapperDescriptorType, types.MethodDescriptorType)):
                    return UserMethodVariable(BuiltinVariable(attr), self.obj)
                # a plain class attribute (super().a): read, and guarded, where the lookup found it
                return tx.wrap(attr, fn_src)
            if mro_src is not None:
                tx.output.add_guard(guards.NotInDictGuard(ItemSource(mro_src, i), name))
        raise GraphBreak(gb.MISSING_ATTRIBUTE, f"super() has no attribute {name!r}")


class DataclassFieldVariable(VariableTracker):
    """A ``dataclasses.Field`` of a class (from ``dataclasses.fields``): read-only attributes."""

    def __init__(self, field):
        super().__init__()
        self.field = field

    def _repr_body(self):
        return self.field.name

    def python_type(self):
        return dataclasses.Field

    def var_getattr(self, tx, name):
        if name not in ("name", "type", "default", "default_factory", "init", "repr", "hash", "compare",
                        "metadata", "kw_only"):
            return super().var_getattr(tx, name)
        return tx.wrap(getattr(self.field, name), None)

    def reconstruct(self, cg):
        cg.load_const(self.field)

    def can_reconstruct(self):
        return True

