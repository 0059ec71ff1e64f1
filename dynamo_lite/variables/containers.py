"""Containers: tuple, list, torch.Size, namedtuple, structseq, dict, set, iterators.

Immutable containers (tuple, Size) hold a fixed list of item trackers.  Lists,
dicts and sets are mutable: their trackers are mutated in place, and when
they came from the frame's inputs (they have a source) the side-effect log
records that the real object must be updated after the graph runs.
A method a container tracker does not model breaks the graph (DL0003).
``constant_value`` turns containers of constants into fresh Python values
for pure operations on copies.  ``defaultdict`` made in the trace calls its
factory for missing keys.  Keys are constants by value or objects by
identity (``hash_key``): value-hashed objects and unhashable keys break.
Sets iterate in the order of a shadow real set put through the same
operations.  An operation Python would raise on breaks (DL0010) so Python
raises it.  Iteration (``iter``): lists live; map/zip/dict iterators are
lazy (iterators.py).
Tested by tests/semantics/test_containers.py, tests/semantics/test_builtins.py and tests/semantics/test_iterators.py.
"""
from __future__ import annotations

import operator
from typing import Any

import torch

from .. import graph_breaks as gb
from .. import runtime
from ..exc import GraphBreak, SkipFrame
from .base import IdentityKey, same_object, search_items, VariableTracker
from .constant import ConstantVariable, is_constant_value, NONE
from .methods import ContainerMethodVariable


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
    if type(value) in (set, frozenset):
        return SetVariable([wrap_constant_result(v) for v in value], frozen=type(value) is frozenset)
    if is_constant_value(value):
        return ConstantVariable(value)
    raise GraphBreak(gb.VALUE_UNKNOWN, f"a {type(value).__name__} computed at trace time cannot be tracked")



VariableTracker.wrap_constant = staticmethod(wrap_constant_result)  # see VariableTracker.wrap_constant

def constant_value(v: VariableTracker) -> Any:
    """A fresh Python value equal to ``v`` when everything in it is known at
    trace time (lists, dicts and sets of constants included; they are copied,
    so only pass the result to functions that do not mutate it).
    Raises NotImplementedError otherwise."""
    if v.is_python_constant():
        return v.as_python_constant()
    if isinstance(v, ListVariable):
        return [constant_value(i) for i in v.items]
    if isinstance(v, DictVariable):
        if any(isinstance(k, IdentityKey) for k in v.items):
            raise NotImplementedError
        return v.dict_type((k, constant_value(i)) for k, i in v.items.items())
    if isinstance(v, SetVariable):
        return v.python_type()(constant_value(i) for i in v.items.values())
    if isinstance(v, DictViewVariable):
        return getattr(constant_value(v.dict_var), v.kind)()
    if type(v) is ListIteratorVariable:  # lazy iterators (iterators.py) compute their items on demand
        return iter([constant_value(i) for i in v.items[v.index:]])
    if isinstance(v, NamedTupleVariable):
        return v.tuple_type(*[constant_value(i) for i in v.items])
    if isinstance(v, BaseListVariable):
        return v.python_type()([constant_value(i) for i in v.items])
    raise NotImplementedError(f"{v.describe()} is not a constant")


class BaseListVariable(VariableTracker):
    """Shared behaviour of tuple-like and list-like containers."""

    def __init__(self, items: list, source=None):
        super().__init__(source)
        self.items = list(items)

    def _repr_body(self):
        return ", ".join(repr(i) for i in self.items[:6]) + (", ..." if len(self.items) > 6 else "")

    def has_len(self):
        return True

    def unpack(self, tx):
        return list(self.items)

    def is_python_constant(self):
        return all(i.is_python_constant() for i in self.items)

    def as_python_constant(self):
        return self.python_type()([i.as_python_constant() for i in self.items])

    def truthiness(self, tx):
        return bool(self.items)

    def contains(self, tx, item):
        return search_items(tx, self.unpack(tx), item)

    def len(self, tx):
        return len(self.items)

    def getitem(self, tx, key):
        if key.is_tensor():
            raise GraphBreak(gb.DATA_DEPENDENT, "indexing a Python container with a tensor")
        return self.lookup(tx, key)

    def lookup(self, tx, index: VariableTracker) -> VariableTracker:
        """``self[index]`` for an index known at trace time."""
        if not index.is_python_constant():
            raise GraphBreak(gb.VALUE_UNKNOWN, f"indexing a {self.python_type().__name__} with {index.describe()}")
        key = index.as_python_constant()
        try:
            if isinstance(key, slice):
                return self.clone_with(self.items[key])
            return self.items[key.__index__() if not isinstance(key, int) else key]
        except (IndexError, TypeError, AttributeError, ValueError) as e:
            raise GraphBreak(gb.OPERATION_RAISES, f"{self.python_type().__name__} index raised {type(e).__name__}") from e

    def clone_with(self, items):
        return type(self)(items)

    def var_getattr(self, tx, name):
        if hasattr(self.python_type(), name):
            return ContainerMethodVariable(self, name)
        return super().var_getattr(tx, name)

    def call_method(self, tx, name, args, kwargs):
        if name == "__getitem__" and len(args) == 1:
            return self.lookup(tx, args[0])
        if name == "__len__":
            return ConstantVariable(len(self.items))
        if name == "__contains__" and len(args) == 1:
            return ConstantVariable(self.contains(tx, args[0]))
        if name in ("index", "count") and not kwargs:
            if all(i.is_python_constant() for i in self.items) and all(a.is_python_constant() for a in args):
                values = [i.as_python_constant() for i in self.items]
                try:
                    return ConstantVariable(getattr(values, name)(*[a.as_python_constant() for a in args]))
                except (ValueError, TypeError) as e:
                    raise GraphBreak(gb.OPERATION_RAISES, f"{name} raised ValueError") from e
            if not args or len(args) > (3 if name == "index" else 1):
                raise GraphBreak(gb.OPERATION_RAISES, f"{name}() with {len(args)} arguments (TypeError)")
            if name == "index" and len(args) == 1:
                for i, item in enumerate(self.items):
                    if same_object(item, args[0]) or self.apply_operator(tx, operator.eq, [item, args[0]]).bool(tx):
                        return ConstantVariable(i)
                raise GraphBreak(gb.OPERATION_RAISES, f"{self.python_type().__name__}.index(x): x not in sequence (ValueError)")
        if name == "__getattribute__":
            return super().call_method(tx, name, args, kwargs)
        raise GraphBreak(gb.UNSUPPORTED_CALL, f"{self.python_type().__name__}.{name}() is not supported here")

    def reconstruct(self, cg):
        if self.source is not None:
            return VariableTracker.reconstruct(self, cg)
        for item in self.items:
            cg.reconstruct(item)
        cg.emit("BUILD_LIST" if self.python_type() is list else "BUILD_TUPLE", len(self.items))

    def can_reconstruct(self):
        return all(i.can_reconstruct() for i in self.items)


class TupleVariable(BaseListVariable):
    def python_type(self):
        return tuple

    def describe(self):
        return "tuple"


class SizeVariable(TupleVariable):
    """torch.Size of static ints."""

    def python_type(self):
        return torch.Size

    def describe(self):
        return "torch.Size"

    def as_python_constant(self):
        return torch.Size([i.as_python_constant() for i in self.items])

    def clone_with(self, items):
        return SizeVariable(items) if not isinstance(items, VariableTracker) else items

    def lookup(self, tx, index):
        result = super().lookup(tx, index)
        if isinstance(result, SizeVariable) or isinstance(result, ConstantVariable):
            return result
        return result

    def call_method(self, tx, name, args, kwargs):
        if name == "numel" and not args:
            n = 1
            for i in self.items:
                n *= i.as_python_constant()
            return ConstantVariable(n)
        return super().call_method(tx, name, args, kwargs)

    def reconstruct(self, cg):
        cg.load_const(self.as_python_constant())


class StructSeqVariable(TupleVariable):
    """torch.return_types.* results (e.g. torch.max(x, dim)): a tuple with field names."""

    def __init__(self, struct_type, items, source=None):
        super().__init__(items, source)
        self.struct_type = struct_type

    def python_type(self):
        return self.struct_type

    def clone_with(self, items):
        return TupleVariable(items)

    def var_getattr(self, tx, name):
        fields = [f for f in dir(self.struct_type) if not f.startswith("_") and
                  isinstance(getattr(self.struct_type, f), type(self.struct_type.__dict__.get(f)))]
        names = _structseq_fields(self.struct_type)
        if name in names:
            return self.items[names.index(name)]
        del fields
        return super().var_getattr(tx, name)

    def reconstruct(self, cg):
        cg.load_callable(self.struct_type)
        for item in self.items:
            cg.reconstruct(item)
        cg.emit("BUILD_TUPLE", len(self.items))
        cg.call(1)


def _structseq_fields(struct_type) -> list[str]:
    n = struct_type.n_fields
    dummy = struct_type(tuple(range(n)))
    names = [f for f in dir(dummy) if not f.startswith("_") and f not in ("count", "index", "n_fields",
                                                                       "n_sequence_fields", "n_unnamed_fields")]
    return sorted(names, key=lambda f: getattr(dummy, f))


class NamedTupleVariable(TupleVariable):
    """An instance of a collections.namedtuple / typing.NamedTuple class."""

    def __init__(self, tuple_type, items, source=None):
        super().__init__(items, source)
        self.tuple_type = tuple_type

    def python_type(self):
        return self.tuple_type

    def describe(self):
        return f"namedtuple {self.tuple_type.__name__}"

    def clone_with(self, items):
        return TupleVariable(items)

    def as_python_constant(self):
        return self.tuple_type(*[i.as_python_constant() for i in self.items])

    def var_getattr(self, tx, name):
        fields = list(self.tuple_type._fields)
        if name in fields:
            return self.items[fields.index(name)]
        if name == "_fields":
            return TupleVariable([ConstantVariable(f) for f in fields])
        if name in ("_asdict", "_replace"):
            return ContainerMethodVariable(self, name)
        attr = getattr(self.tuple_type, name, None)
        if attr is not None and callable(attr):
            from .functions import UserMethodVariable, UserFunctionVariable  # lazy: upward (cycle)
            import types

            if isinstance(attr, types.FunctionType):
                return UserMethodVariable(attr, self)
            del UserFunctionVariable
        if isinstance(attr, property):
            from .functions import UserFunctionVariable  # lazy: upward (cycle)

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


class ListVariable(BaseListVariable):
    """A list; mutated in place.  ``mutable_local`` lists were created in the trace."""

    def __init__(self, items, source=None):
        super().__init__(items, source)
        self.mutable_local = source is None

    def python_type(self):
        return list

    def describe(self):
        return "list"

    def clone_with(self, items):
        return ListVariable(items)

    def is_python_constant(self):
        return False

    def iter(self, tx):
        it = ListIteratorVariable(self.items)  # live: appends during the loop are reached
        it.live = self
        return it

    def call_method(self, tx, name, args, kwargs):
        se = tx.output.side_effects
        items = self.items
        if kwargs and (name != "sort" or set(kwargs) - {"key", "reverse"}):
            # list methods take no (other) keywords: Python raises the TypeError
            raise GraphBreak(gb.OPERATION_RAISES, f"list.{name}() with keyword arguments {sorted(kwargs)}")
        if name == "append" and len(args) == 1:
            se.mutate(self)
            items.append(args[0])
            return NONE
        if name == "extend" and len(args) == 1:
            new = args[0].unpack(tx)
            se.mutate(self)
            items.extend(new)
            return NONE
        if name == "insert" and len(args) == 2 and args[0].is_python_constant():
            idx = _list_index(args[0], "insert")
            se.mutate(self)
            items.insert(idx, args[1])
            return NONE
        if name == "pop" and len(args) <= 1:
            if args and not args[0].is_python_constant():
                raise GraphBreak(gb.VALUE_UNKNOWN, "list.pop() index not known at trace time")
            idx = _list_index(args[0], "pop") if args else -1
            if not -len(items) <= idx < len(items):
                raise GraphBreak(gb.OPERATION_RAISES, "pop from an empty list / index out of range (IndexError)")
            se.mutate(self)
            return items.pop(idx)
        if name == "clear" and not args:
            se.mutate(self)
            items.clear()
            return NONE
        if name == "reverse" and not args:
            se.mutate(self)
            items.reverse()
            return NONE
        if name == "copy" and not args:
            return ListVariable(list(items))
        if name == "remove" and len(args) == 1:
            for i, item in enumerate(items):  # `item is x or item == x`, in order, like CPython
                if same_object(item, args[0]) is not True:
                    if item.is_tensor() or args[0].is_tensor():
                        raise GraphBreak(gb.DATA_DEPENDENT, "list.remove compares a tensor (depends on tensor data)")
                    if not self.apply_operator(tx, operator.eq, [item, args[0]]).bool(tx):
                        continue
                se.mutate(self)
                del items[i]
                return NONE
            raise GraphBreak(gb.OPERATION_RAISES, "list.remove(x): x not in list (ValueError)")
        if name == "sort" and not args:
            from .builtin import sort_items  # lazy: upward (cycle)

            new = sort_items(tx, items, kwargs)
            se.mutate(self)
            items[:] = new
            return NONE
        if name == "__setitem__" and len(args) == 2:
            return self.setitem(tx, args[0], args[1])
        if name == "__delitem__" and len(args) == 1 and args[0].is_python_constant():
            k = args[0].as_python_constant()
            try:  # on a stand-in first: Python raises IndexError / TypeError / ValueError for real
                del list(range(len(items)))[k]
            except Exception as e:  # noqa: BLE001
                raise GraphBreak(gb.OPERATION_RAISES, f"del list[{k!r}] raised {type(e).__name__}") from e
            se.mutate(self)
            del items[k]
            return NONE
        return super().call_method(tx, name, args, kwargs)

    def setitem(self, tx, key, value):
        if not key.is_python_constant():
            raise GraphBreak(gb.VALUE_UNKNOWN, "list index is not a constant")
        k = key.as_python_constant()
        new = value.unpack(tx) if isinstance(k, slice) else value
        try:  # on a stand-in first: Python raises IndexError / TypeError / ValueError for real
            list(range(len(self.items)))[k] = new
        except Exception as e:  # noqa: BLE001
            raise GraphBreak(gb.OPERATION_RAISES, f"list[{k!r}] = ... raised {type(e).__name__}") from e
        tx.output.side_effects.mutate(self)
        self.items[k] = new
        return NONE



def _list_index(v: VariableTracker, method: str) -> int:
    """A list method's index argument (a constant) as an int; TypeError breaks (Python raises it)."""
    try:
        return operator.index(v.as_python_constant())
    except TypeError as e:
        raise GraphBreak(gb.OPERATION_RAISES, f"list.{method}() index: {e} (TypeError)") from e


class DictVariable(VariableTracker):
    """A dict with keys known at trace time (constants, or objects by identity)."""

    def __init__(self, items: dict, source=None, dict_type=dict):
        super().__init__(source)
        self.items = dict(items)
        self.mutable_local = source is None
        self.dict_type = dict_type

    def _repr_body(self):
        return ", ".join(f"{k!r}: {v!r}" for k, v in list(self.items.items())[:6])

    def python_type(self):
        return self.dict_type

    def describe(self):
        return "dict"

    def has_len(self):
        return True

    def truthiness(self, tx):
        return bool(self.items)

    def unpack(self, tx):
        return [key_to_var(k) for k in self.items]

    def contains(self, tx, item):
        return self._key(item) in self.items

    def len(self, tx):
        return len(self.items)

    def iter(self, tx):
        from .iterators import DictIteratorVariable  # lazy: upward (cycle)

        return DictIteratorVariable(self, "keys")

    def _key(self, v: VariableTracker):
        return hash_key(v, "dict key")

    def getitem(self, tx, key):
        if key.is_tensor():
            raise GraphBreak(gb.DATA_DEPENDENT, "indexing a Python container with a tensor")
        return self.lookup(tx, key)

    def lookup(self, tx, key):
        """``self[key]`` (a missing key breaks: Python raises KeyError)."""
        k = self._key(key)
        if k not in self.items:
            raise GraphBreak(gb.OPERATION_RAISES, f"dict has no key {k!r} (KeyError)")
        return self.items[k]

    def var_getattr(self, tx, name):
        if hasattr(dict, name):
            return ContainerMethodVariable(self, name)
        return super().var_getattr(tx, name)

    def call_method(self, tx, name, args, kwargs):
        se = tx.output.side_effects
        if kwargs and name != "update":  # dict methods take no other keywords: Python handles them
            raise GraphBreak(gb.UNSUPPORTED_CALL, f"{self.dict_type.__name__}.{name}() with keyword arguments")
        if name == "__getitem__" and len(args) == 1:
            return self.lookup(tx, args[0])
        if name == "__len__":
            return ConstantVariable(len(self.items))
        if name == "__contains__" and len(args) == 1:
            return ConstantVariable(self.contains(tx, args[0]))
        if name == "get" and 1 <= len(args) <= 2:
            k = self._key(args[0])
            return self.items.get(k, args[1] if len(args) == 2 else NONE)
        if name == "keys" and not args:
            return DictViewVariable(self, "keys")
        if name == "values" and not args:
            return DictViewVariable(self, "values")
        if name == "items" and not args:
            return DictViewVariable(self, "items")
        if name == "__setitem__" and len(args) == 2:
            se.mutate(self)
            self.items[self._key(args[0])] = args[1]
            return NONE
        if name == "__delitem__" and len(args) == 1:
            k = self._key(args[0])
            if k not in self.items:
                raise GraphBreak(gb.OPERATION_RAISES, "KeyError in del")
            se.mutate(self)
            del self.items[k]
            return NONE
        if name == "pop" and 1 <= len(args) <= 2:
            k = self._key(args[0])
            if k in self.items:
                se.mutate(self)
                return self.items.pop(k)
            if len(args) == 2:
                return args[1]
            raise GraphBreak(gb.OPERATION_RAISES, "KeyError in dict.pop")
        if name == "setdefault" and 1 <= len(args) <= 2:
            k = self._key(args[0])
            if k not in self.items:
                se.mutate(self)
                self.items[k] = args[1] if len(args) == 2 else NONE
            return self.items[k]
        if name == "update":
            if len(args) > 1:
                raise GraphBreak(gb.OPERATION_RAISES, f"update expected at most 1 argument, got {len(args)} (TypeError)")
            se.mutate(self)
            if args:
                other = args[0]
                if isinstance(other, DictVariable):
                    self.items.update(other.items)
                else:
                    for pair in other.unpack(tx):
                        parts = pair.unpack(tx)
                        if len(parts) != 2:  # Python raises ValueError (after the earlier pairs)
                            raise GraphBreak(gb.OPERATION_RAISES, f"dict update sequence element has length {len(parts)}")
                        self.items[self._key(parts[0])] = parts[1]
            for k, v in kwargs.items():
                self.items[k] = v
            return NONE
        if name == "clear" and not args:
            se.mutate(self)
            self.items.clear()
            return NONE
        if name == "copy" and not args:
            return DictVariable(dict(self.items), dict_type=self.dict_type)
        if name == "popitem" and not args:
            if not self.items:
                raise GraphBreak(gb.OPERATION_RAISES, "popitem(): dictionary is empty (KeyError)")
            se.mutate(self)
            k, v = self.items.popitem()
            return TupleVariable([key_to_var(k), v])
        if name in ("__or__", "__ior__") and len(args) == 1 and isinstance(args[0], DictVariable):
            target = self if name == "__ior__" else DictVariable(dict(self.items), dict_type=self.dict_type)
            if name == "__ior__":
                se.mutate(self)
            target.items.update(args[0].items)
            return target
        if name == "__getattribute__":
            return super().call_method(tx, name, args, kwargs)
        raise GraphBreak(gb.UNSUPPORTED_CALL, f"dict.{name}() is not supported here")

    def is_python_constant(self):
        return False

    def reconstruct(self, cg):
        if self.source is not None:
            return super().reconstruct(cg)
        if self.dict_type is not dict:
            cg.load_callable(self.dict_type)
        for k, v in self.items.items():
            cg.reconstruct(key_to_var(k))
            cg.reconstruct(v)
        cg.emit("BUILD_MAP", len(self.items))
        if self.dict_type is not dict:
            cg.call(1)

    def can_reconstruct(self):
        return all(v.can_reconstruct() for v in self.items.values())


class DefaultDictVariable(DictVariable):
    """A collections.defaultdict created in the trace: a missing key calls the factory."""

    def __init__(self, items: dict, default_factory: VariableTracker, source=None):
        import collections

        super().__init__(items, source, dict_type=collections.defaultdict)
        self.default_factory = default_factory

    def lookup(self, tx, key):
        k = self._key(key)
        if k not in self.items:
            factory = self.default_factory
            if factory.is_python_constant() and factory.as_python_constant() is None:
                raise GraphBreak(gb.OPERATION_RAISES, f"dict has no key {k!r} (KeyError)")
            value = factory.call_function(tx, [], {})
            tx.output.side_effects.mutate(self)
            self.items[k] = value
        return self.items[k]

    def var_getattr(self, tx, name):
        if name == "default_factory":
            return self.default_factory
        return super().var_getattr(tx, name)

    def call_method(self, tx, name, args, kwargs):
        if name == "copy" and not args:
            return DefaultDictVariable(dict(self.items), self.default_factory)
        return super().call_method(tx, name, args, kwargs)

    def reconstruct(self, cg):
        if self.source is not None:
            return VariableTracker.reconstruct(self, cg)
        cg.load_callable(self.dict_type)
        cg.reconstruct(self.default_factory)
        for k, v in self.items.items():
            cg.reconstruct(key_to_var(k))
            cg.reconstruct(v)
        cg.emit("BUILD_MAP", len(self.items))
        cg.call(2)

    def can_reconstruct(self):
        return self.default_factory.can_reconstruct() and super().can_reconstruct()


def hash_key(v: VariableTracker, what: str):
    """The key of ``v`` in a dict / set tracker: its value for constants, an IdentityKey for
    objects hashed by identity.  Unhashable values break where Python raises TypeError; objects
    whose class defines its own __hash__ / __eq__ (equal objects are one key) break too."""
    if v.is_python_constant():
        value = v.as_python_constant()
        try:
            hash(value)
        except TypeError as e:
            raise GraphBreak(gb.OPERATION_RAISES, f"{what}: {e} (TypeError)") from e
        return value
    try:
        t = v.python_type()
    except GraphBreak:
        t = None
    if isinstance(t, type) and not issubclass(t, torch.Tensor):
        if t.__hash__ is None:
            raise GraphBreak(gb.OPERATION_RAISES, f"{what}: unhashable type {t.__name__!r} (TypeError)")
        if t.__hash__ is not object.__hash__ or t.__eq__ is not object.__eq__:
            raise GraphBreak(gb.VALUE_UNKNOWN, f"{what} {v.describe()} is hashed by value, not identity")
    key = v.identity_key()
    if key is None:
        raise GraphBreak(gb.VALUE_UNKNOWN, f"{what} {v.describe()} is not hashable at trace time")
    return key


def key_to_var(k) -> VariableTracker:
    if isinstance(k, IdentityKey):
        return k.var
    return wrap_constant_result(k) if isinstance(k, tuple) else ConstantVariable(k)


class DictViewVariable(VariableTracker):
    """dict.keys() / .values() / .items() of a tracked dict."""

    def __init__(self, dict_var: DictVariable, kind: str):
        super().__init__()
        self.dict_var = dict_var
        self.kind = kind

    def python_type(self):
        return type(getattr({}, self.kind)())

    def has_len(self):
        return True

    def unpack(self, tx):
        d = self.dict_var
        if self.kind == "keys":
            return [key_to_var(k) for k in d.items]
        if self.kind == "values":
            return list(d.items.values())
        return [TupleVariable([key_to_var(k), v]) for k, v in d.items.items()]

    def contains(self, tx, item):
        return self.call_method(tx, "__contains__", [item], {}).bool(tx)

    def len(self, tx):
        return len(self.dict_var.items)

    def iter(self, tx):
        from .iterators import DictIteratorVariable  # lazy: upward (cycle)

        return DictIteratorVariable(self.dict_var, self.kind)

    def call_method(self, tx, name, args, kwargs):
        if name == "__len__":
            return ConstantVariable(len(self.dict_var.items))
        if name == "__contains__" and len(args) == 1 and self.kind == "keys":
            return self.dict_var.call_method(tx, "__contains__", args, {})
        return super().call_method(tx, name, args, kwargs)

    def reconstruct(self, cg):
        cg.reconstruct(self.dict_var)
        cg.load_method(self.kind)
        cg.call_method(0)

    def can_reconstruct(self):
        return self.dict_var.can_reconstruct()


class SetVariable(VariableTracker):
    """A set of constants (or identity-keyed objects).

    Attributes:
        items: key (``hash_key``) -> element tracker, in insertion order.
        shadow: a real set of the keys that went through the same sequence of
            operations as the real set (None once an element is not a constant):
            iteration and rebuilding follow its order, which is CPython's.
    """

    def __init__(self, items: list, source=None, frozen=False):
        super().__init__(source)
        self.frozen = frozen
        self.items: dict = {}
        for item in items:
            self.items[self._key(item)] = item
        self.mutable_local = source is None and not frozen
        self.shadow = None
        self._sync_shadow(list(self.items))

    def _sync_shadow(self, added=()):
        """Add ``added`` keys to the shadow set (and drop keys no longer in ``items``)."""
        if self.shadow is None and not self.items.keys() - set(added):
            self.shadow = set()
        if self.shadow is None:
            return
        if any(isinstance(k, IdentityKey) for k in added):
            self.shadow = None
            return
        for k in [k for k in self.shadow if k not in self.items]:
            self.shadow.discard(k)
        for k in added:
            self.shadow.add(k)

    def _ordered_keys(self) -> list:
        if self.shadow is not None and len(self.shadow) == len(self.items):
            return list(self.shadow)
        return list(self.items)

    @staticmethod
    def _key(v):
        return hash_key(v, "set element")

    def python_type(self):
        return frozenset if self.frozen else set

    def has_len(self):
        return True

    def truthiness(self, tx):
        return bool(self.items)

    def is_python_constant(self):
        return all(v.is_python_constant() for v in self.items.values())

    def as_python_constant(self):
        return self.python_type()(self.items[k].as_python_constant() for k in self._ordered_keys())

    def unpack(self, tx):
        return [self.items[k] for k in self._ordered_keys()]  # in the order the real set iterates

    def contains(self, tx, item):
        return self._key(item) in self.items

    def len(self, tx):
        return len(self.items)

    def iter(self, tx):
        it = ListIteratorVariable(self.unpack(tx))
        it.watched = (self, list(self.items))  # eager raises if the set changes size meanwhile
        return it

    def call_method(self, tx, name, args, kwargs):
        se = tx.output.side_effects
        if name == "__contains__" and len(args) == 1:
            return ConstantVariable(self.contains(tx, args[0]))
        if name == "__len__":
            return ConstantVariable(len(self.items))
        if name == "add" and len(args) == 1 and not self.frozen:
            se.mutate(self)
            k = self._key(args[0])
            self.items.setdefault(k, args[0])
            self._sync_shadow([k])
            return NONE
        if name == "discard" and len(args) == 1 and not self.frozen:
            se.mutate(self)
            self.items.pop(self._key(args[0]), None)
            self._sync_shadow()
            return NONE
        if name in ("union", "intersection", "difference", "issubset", "issuperset", "__or__", "__and__",
                    "__sub__", "symmetric_difference", "__xor__", "isdisjoint", "copy") and \
                self.is_python_constant() and not kwargs:
            try:
                others = [constant_value(a) for a in args]
            except NotImplementedError:
                others = None
            if others is not None:
                try:
                    result = getattr(self.as_python_constant(), name)(*others)
                except Exception as e:  # noqa: BLE001 - raise it for real
                    raise GraphBreak(gb.OPERATION_RAISES, f"set.{name} raised {type(e).__name__}") from e
                return wrap_constant_result(result)
        if name in ("update", "__ior__") and not self.frozen:
            added = []
            for a in args:
                for item in a.unpack(tx):
                    added.append(self._key(item))
                    self.items.setdefault(added[-1], item)
            se.mutate(self)
            self._sync_shadow(added)
            return self if name == "__ior__" else NONE
        if name == "remove" and len(args) == 1 and not self.frozen:
            k = self._key(args[0])
            if k not in self.items:
                raise GraphBreak(gb.OPERATION_RAISES, "set.remove(x): x not in set (KeyError)")
            se.mutate(self)
            del self.items[k]
            self._sync_shadow()
            return NONE
        if name == "clear" and not args and not self.frozen:
            se.mutate(self)
            self.items.clear()
            self._sync_shadow()
            return NONE
        if name in ("difference_update", "intersection_update", "symmetric_difference_update") and \
                not self.frozen and self.is_python_constant():
            try:
                others = [constant_value(a) for a in args]
            except NotImplementedError:
                others = None
            if others is not None:
                # on the shadow itself: it goes through what the real set goes through
                value = self.shadow if self.shadow is not None else set(self.as_python_constant())
                try:
                    getattr(value, name)(*others)
                except Exception as e:  # noqa: BLE001 - raise it for real (the trace restarts)
                    raise GraphBreak(gb.OPERATION_RAISES, f"set.{name} raised {type(e).__name__}") from e
                se.mutate(self)
                self.items = {k: v for k, v in self.items.items() if k in value}
                for v in value:
                    self.items.setdefault(v, ConstantVariable(v))
                self.shadow = value
                return NONE
        if name == "__getattribute__":
            return super().call_method(tx, name, args, kwargs)
        raise GraphBreak(gb.UNSUPPORTED_CALL, f"set.{name}() is not supported here")

    def var_getattr(self, tx, name):
        if hasattr(set, name):
            return ContainerMethodVariable(self, name)
        return super().var_getattr(tx, name)

    def reconstruct(self, cg):
        if self.source is not None:
            return super().reconstruct(cg)
        if self.frozen:
            cg.load_callable(frozenset)
        for k in self._ordered_keys():
            cg.reconstruct(self.items[k])
        cg.emit("BUILD_SET", len(self.items))
        if self.frozen:
            cg.call(1)

    def can_reconstruct(self):
        return all(v.can_reconstruct() for v in self.items.values())


class ListIteratorVariable(VariableTracker):
    """An iterator over items known at trace time (lists, tuples, ranges, dict keys, zip, ...)."""

    mutable_local = True
    # name of the generator function whose yields these are (inliner.inline_call), or None
    generator: Any = None
    # the ListVariable iterated live (``items`` is its own list: appends during the loop are
    # reached, as by a list_iterator), or None
    live: Any = None
    # (set tracker, its keys when iteration began): eager raises if the size changes (and
    # iterates its hash table in an order we do not model if the elements change)
    watched: Any = None
    # a live list iterator that ran off the end: CPython drops the list, later appends are not seen
    exhausted = False

    def __init__(self, items: list, index: int = 0, kind: type = None):
        super().__init__()
        self.items = items
        self.index = index
        self.kind = kind  # zip / enumerate / map / filter: the real iterator's type (None: tuple_iterator)

    def python_type(self):
        if self.live is not None:
            return type(iter([]))
        return self.kind or type(iter(()))

    def var_getattr(self, tx, name):
        if self.generator is not None and (name in ("send", "throw", "close") or name.startswith("gi_")):
            # the generator already ran to completion in the trace (and would be rebuilt as a
            # plain iterator): only running the whole frame in Python gives a real generator
            raise SkipFrame(gb.CALL_NOT_TRACED, f"generator {self.generator}() used through .{name}")
        return super().var_getattr(tx, name)

    def describe(self):
        return f"{self.kind.__name__} object" if self.kind else "iterator"

    def iter(self, tx):
        return self

    def len(self, tx):
        raise GraphBreak(gb.OPERATION_RAISES, f"len() of {self.describe()} (TypeError: iterators have no len())")

    def _watched_changed(self) -> bool:
        return self.watched is not None and list(self.watched[0].items) != self.watched[1]

    def next_item(self, tx):
        if self._watched_changed():
            # "Set changed size during iteration": only Python raises it at the right point
            raise SkipFrame(gb.OPERATION_RAISES, f"{self.watched[0].describe()} changed during iteration",
                            permanent=False)
        if self.exhausted or self.index >= len(self.items):
            if self.live is not None:
                self.exhausted = True
            return None
        item = self.items[self.index]
        self.index += 1
        return item

    def unpack(self, tx):
        rest = self.items[self.index:]
        self.index = len(self.items)
        return list(rest)

    def reconstruct(self, cg):
        if self._watched_changed():  # Python must raise "changed size during iteration"
            raise SkipFrame(gb.CANNOT_REBUILD, f"an iterator over {self.watched[0].describe()}, which changed")
        if self.live is not None:  # the real list's iterator, advanced to the same position
            cg.load_callable(runtime.list_iterator_at)
            cg.reconstruct(self.live)
            cg.load_const(self.index if not self.exhausted else -1)
            cg.call(2)
            return
        rest = self.items[self.index:]
        if self.watched is not None and self.watched[0].can_reconstruct():
            # the real set's iterator (so a later change of its size raises as in eager), at the
            # same position when the real set yields the same items (else a tuple iterator)
            cg.load_callable(runtime.set_iterator_at)
            cg.reconstruct(self.watched[0])
            for part in (self.items[:self.index], rest):
                for item in part:
                    cg.reconstruct(item)
                cg.emit("BUILD_TUPLE", len(part))
            cg.call(3)
            return
        if self.kind is zip and all(isinstance(i, TupleVariable) for i in rest) and \
                len({len(i.items) for i in rest}) <= 1:
            # zip(col0, col1, ...) over what is left: the same items, the same type
            width = len(rest[0].items) if rest else 0
            cg.load_callable(zip)
            for j in range(width):
                for item in rest:
                    cg.reconstruct(item.items[j])
                cg.emit("BUILD_TUPLE", len(rest))
            cg.call(width)
            return
        if self.kind is enumerate and all(isinstance(i, TupleVariable) and len(i.items) == 2 for i in rest):
            cg.load_callable(enumerate)
            for item in rest:
                cg.reconstruct(item.items[1])
            cg.emit("BUILD_TUPLE", len(rest))
            cg.load_const(rest[0].items[0].as_python_constant() if rest else 0)
            cg.call(2)
            return
        if self.kind is reversed:  # reversed(tuple / str / ...): a reversed object over what is left
            cg.load_callable(reversed)
            for item in reversed(rest):
                cg.reconstruct(item)
            cg.emit("BUILD_TUPLE", len(rest))
            cg.call(1)
            return
        if self.kind in (map, filter):
            cg.load_callable(self.kind)
            cg.load_const(runtime.passthrough if self.kind is map else runtime.keep)
        else:
            cg.load_callable(iter)
        for item in rest:
            cg.reconstruct(item)
        cg.emit("BUILD_TUPLE", len(rest))
        cg.call(2 if self.kind in (map, filter) else 1)

    def can_reconstruct(self):
        if self.live is not None:
            return self.live.can_reconstruct()
        return all(i.can_reconstruct() for i in self.items[self.index:])


class SliceVariable(VariableTracker):
    """slice(a, b, c) where some part is not a constant (e.g. a tensor)."""

    def __init__(self, parts):
        super().__init__()
        self.parts = parts

    def python_type(self):
        return slice

    def reconstruct(self, cg):
        for p in self.parts:
            cg.reconstruct(p)
        cg.emit("BUILD_SLICE", len(self.parts))

    def can_reconstruct(self):
        return all(p.can_reconstruct() for p in self.parts)


VariableTracker.snapshot_iterator = staticmethod(ListIteratorVariable)  # see VariableTracker.iter
