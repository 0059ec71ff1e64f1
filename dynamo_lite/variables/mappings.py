"""Mappings: dict, OrderedDict, defaultdict, Counter, mappingproxy, dict views and dict iterators.

Dicts are mutable: their trackers are mutated in place, and when they came
from the frame's inputs (they have a source) the side-effect log records that
the real dict must be updated after the graph runs.  A dict from outside keyed by
objects (a memo table) is looked up key by key instead (``ObjectKeyedDictVariable``).  Keys are constants by
value or objects by identity (``hash_key``): value-hashed objects and
unhashable keys break.  ``id(obj)`` of an object whose address is not known is keyed by the
object's identity (``IdKey``) while every object involved is alive, and never next to a number
(``checked_key``).  A ``frozendict.frozendict`` made in the trace is a FrozenDictVariable (reads only).  ``defaultdict`` made in the trace calls its factory
for missing keys; a Counter counts 0 for them; a mappingproxy is a live read-only view.  A
missing key's KeyError (lookup, pop, del, popitem of an empty dict) is raised in the trace, so a
traced handler catches it (``Mapping.get``).  Dict iterators read values live; a dict whose size or keys
changed since the iterator was made runs the frame eagerly (Python raises
RuntimeError at the right point).  A method a dict tracker does not model
breaks the graph (DL0003).
Tested by tests/semantics/test_containers.py, tests/semantics/test_container_values.py, tests/semantics/test_iterators.py,
tests/semantics/test_mappings_and_collections.py and tests/semantics/test_functools_copy_identity.py.
"""
from __future__ import annotations

import collections
import sys
import operator
import types
from typing import Optional

import torch

from .. import graph_breaks as gb
from ..exc import GraphBreak, SkipFrame
from .base import guard_distinct, IdentityKey, search_items, VariableTracker
from ..source import DictItemSource, DictLenSource, KeyedItemSource
from .objects import IdVariable
from .constant import ConstantVariable, NONE, ObservedConstant
from .methods import ContainerMethodVariable
from .sequences import iterate_lazily, LazyIteratorVariable, ListVariable, TupleVariable


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
        return self._key(item, tx) in self.items

    def len(self, tx):
        return len(self.items)

    def iter(self, tx):
        return DictIteratorVariable(self, "keys")

    def _key(self, v: VariableTracker, tx=None):
        if isinstance(v, ObservedConstant):  # an id() taken while a block is recorded: a key use
            return checked_key(tx, self.items, v.key_value(self), "dict key")
        return checked_key(tx, self.items, hash_key(v, "dict key"), "dict key")

    def getitem(self, tx, key):
        if key.is_tensor():
            raise GraphBreak(gb.DATA_DEPENDENT, "indexing a Python container with a tensor")
        return self.lookup(tx, key)

    def lookup(self, tx, key):
        """``self[key]`` (a missing key breaks: Python raises KeyError)."""
        k = self._key(key, tx)
        if k not in self.items:
            self.raise_in_trace(tx, KeyError, [key])
        return self.items[k]

    def var_getattr(self, tx, name):
        if hasattr(self.dict_type, name) and callable(getattr(self.dict_type, name)):
            return ContainerMethodVariable(self, name)
        return super().var_getattr(tx, name)

    def call_method(self, tx, name, args, kwargs):
        se = tx.output.side_effects
        if kwargs and name == "popitem" and self.dict_type is collections.OrderedDict and not args \
                and list(kwargs) == ["last"]:
            args, kwargs = [kwargs["last"]], {}
        if kwargs and name == "move_to_end" and self.dict_type is collections.OrderedDict and len(args) == 1 \
                and list(kwargs) == ["last"]:
            args, kwargs = [args[0], kwargs["last"]], {}
        if kwargs and name != "update":  # dict methods take no other keywords: Python handles them
            raise GraphBreak(gb.UNSUPPORTED_CALL, f"{self.dict_type.__name__}.{name}() with keyword arguments")
        if name == "__getitem__" and len(args) == 1:
            return self.lookup(tx, args[0])
        if name == "__len__":
            return ConstantVariable(len(self.items))
        if name == "__contains__" and len(args) == 1:
            return ConstantVariable(self.contains(tx, args[0]))
        if name == "get" and 1 <= len(args) <= 2:
            k = self._key(args[0], tx)
            return self.items.get(k, args[1] if len(args) == 2 else NONE)
        if name == "keys" and not args:
            return DictViewVariable(self, "keys")
        if name == "values" and not args:
            return DictViewVariable(self, "values")
        if name == "items" and not args:
            return DictViewVariable(self, "items")
        if name == "__setitem__" and len(args) == 2:
            se.mutate(self)
            self.items[self._key(args[0], tx)] = args[1]
            return NONE
        if name == "__delitem__" and len(args) == 1:
            k = self._key(args[0], tx)
            if k not in self.items:
                self.raise_in_trace(tx, KeyError, [args[0]])
            se.mutate(self)
            del self.items[k]
            return NONE
        if name == "pop" and 1 <= len(args) <= 2:
            k = self._key(args[0], tx)
            if k in self.items:
                se.mutate(self)
                return self.items.pop(k)
            if len(args) == 2:
                return args[1]
            self.raise_in_trace(tx, KeyError, [args[0]])
        if name == "setdefault" and 1 <= len(args) <= 2:
            k = self._key(args[0], tx)
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
                as_mapping = mapping_items(tx, other, "dict.update()")
                if as_mapping is not None:
                    self.items.update(as_mapping)
                else:  # pairs, each stored before the next is asked for
                    for pair in iterate_lazily(tx, other):
                        parts = pair.unpack(tx)
                        if len(parts) != 2:  # Python raises ValueError (after the earlier pairs)
                            raise GraphBreak(gb.OPERATION_RAISES, f"dict update sequence element has length {len(parts)}")
                        self.items[self._key(parts[0], tx)] = parts[1]
            for k, v in kwargs.items():
                self.items[k] = v
            return NONE
        if name == "clear" and not args:
            se.mutate(self)
            self.items.clear()
            return NONE
        if name == "copy" and not args:
            return DictVariable(dict(self.items), dict_type=self.dict_type)
        if name == "popitem" and (not args or (len(args) == 1 and self.dict_type is collections.OrderedDict)):
            last = args[0].bool(tx) if args else True
            if not self.items:
                message = "dictionary is empty" if self.dict_type is collections.OrderedDict else \
                    "popitem(): dictionary is empty"
                self.raise_in_trace(tx, KeyError, [ConstantVariable(message)])
            se.mutate(self)
            k = next(iter(reversed(self.items))) if last else next(iter(self.items))
            v = self.items.pop(k)
            return TupleVariable([key_to_var(k), v])
        if name == "__or__" and len(args) == 1 and isinstance(args[0], DictVariable) and \
                args[0].dict_type in (dict, self.dict_type):
            target = self.call_method(tx, "copy", [], {})
            target.items.update(args[0].items)
            return target
        if name == "__ior__" and len(args) == 1:
            self.call_method(tx, "update", args, {})  # any mapping or iterable of pairs, like update()
            return self
        if name == "move_to_end" and self.dict_type is collections.OrderedDict and 1 <= len(args) <= 2:
            k = self._key(args[0], tx)
            last = args[1].bool(tx) if len(args) == 2 else True
            if k not in self.items:
                self.raise_in_trace(tx, KeyError, [args[0]])
            se.mutate(self)
            value = self.items.pop(k)
            if last:
                self.items[k] = value
            else:
                self.items = {k: value, **self.items}
            return NONE
        if name == "__getattribute__":
            return super().call_method(tx, name, args, kwargs)
        raise GraphBreak(gb.UNSUPPORTED_CALL, f"dict.{name}() is not supported here")

    def is_python_constant(self):
        return False

    def constant_copy(self):
        if any(isinstance(k, IdentityKey) for k in self.items):
            raise NotImplementedError
        return self.dict_type((k, i.constant_copy()) for k, i in self.items.items())

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


_ABSENT = object()


class ObjectKeyedDictVariable(VariableTracker):
    """A dict read from outside with keys that are objects hashed by identity (a memo table,
    ``cache[self]``; torchsde's LRU cache of intervals, a dict subclass whose ``storage`` this
    is), never read whole.  Each key the trace looks up is looked up in the real dict then, by
    dict's own lookup, and guarded there: present or not, and its value an input at
    ``dict.__getitem__(d, key)``; ``len()`` is an int input at ``dict.__len__(d)``.  Writes and deletions are recorded
    (``pending``) and replayed after the graph by dict's own ``__setitem__`` / ``__delitem__``, in
    order.  Anything that needs the whole contents (iteration, views, copy, ``==``) breaks: their
    keys could only be guarded one by one, holding every key object."""

    def __init__(self, value: dict, source):
        super().__init__(source)
        self.value = value  # the real dict, read by dict's own methods only
        self.pending: list = []  # ("set", key tracker, value tracker) or ("del", key tracker, None)
        self.local: dict = {}  # hash key -> the value as the trace left it (_ABSENT: not there)
        self.size_delta = 0
        self.read_size: Optional[VariableTracker] = None  # the size when first read (constant or symbolic)

    dict_type = dict  # (the semantics of its methods, as a DictVariable storage's)

    def _repr_body(self):
        return f"{len(self.local)} keys looked up, {len(self.pending)} changes"

    def _whole(self, what: str) -> GraphBreak:
        return GraphBreak(gb.UNSUPPORTED_CALL, f"{what} of a dict keyed by objects reads its whole contents")

    def iter(self, tx):
        raise self._whole("iteration")

    def unpack(self, tx):
        raise self._whole("unpacking")

    def python_type(self):
        return dict

    def describe(self):
        return "dict keyed by objects"

    def has_len(self):
        return True

    def _lookup(self, tx, key_var) -> tuple:
        """(hash key, the value tracker or _ABSENT), looked up and guarded once per key."""
        if key_var.is_tensor():
            raise GraphBreak(gb.DATA_DEPENDENT, "indexing a Python container with a tensor")
        k = hash_key(key_var, "dict key")
        if k in self.local:
            return k, self.local[k]
        if isinstance(k, IdentityKey):
            if k.ident[0] != "obj":  # an object made in the trace: no real dict holds it yet
                self.local[k] = _ABSENT
                return k, _ABSENT
            real = getattr(k.var, "value", _ABSENT)
            if real is _ABSENT or id(real) != k.ident[1] or key_var.source is None:
                raise GraphBreak(gb.VALUE_UNKNOWN, f"dict key {key_var.describe()}: no place to read it again from")
            key_text = key_var.source.name()
        elif type(k) in (str, int, bool, type(None)):
            real, key_text = k, repr(k)
        else:
            raise GraphBreak(gb.VALUE_UNKNOWN, f"dict key {key_var.describe()} in a dict keyed by objects")
        present = dict.__contains__(self.value, real)
        tx.output.add_expr_guard(f"___builtins.dict.__contains__({self.source.name()}, {key_text}) is {present!r}")
        if not present:
            self.local[k] = _ABSENT
            return k, _ABSENT
        item = KeyedItemSource(self.source, key_var.source) if isinstance(k, IdentityKey) else \
            DictItemSource(self.source, real)
        self.local[k] = tx.wrap(dict.__getitem__(self.value, real), item)
        return k, self.local[k]

    def getitem(self, tx, key):
        value = self._lookup(tx, key)[1]
        if value is _ABSENT:
            self.raise_in_trace(tx, KeyError, [key])
        return value

    def contains(self, tx, item):
        return self._lookup(tx, item)[1] is not _ABSENT

    def len_tracker(self, tx):
        if self.read_size is None:
            # an int input like an int argument: guarded by value, symbolic once it changed
            # between compiles (an LRU cache filling up compiles twice, not once per size)
            self.read_size = tx.wrap(dict.__len__(self.value), DictLenSource(self.source))
        if not self.size_delta:
            return self.read_size
        return self.apply_operator(tx, operator.add, [self.read_size, ConstantVariable(self.size_delta)])

    def len(self, tx):
        return self.len_tracker(tx).as_python_constant()

    def truthiness(self, tx):
        return self.apply_operator(tx, operator.gt, [self.len_tracker(tx), ConstantVariable(0)]).truthiness(tx)

    def _write(self, tx, key_var, value) -> None:
        """``self[key] = value`` (value None: ``del self[key]``, the key known present)."""
        if not key_var.can_reconstruct() or (value is not None and not value.can_reconstruct()):
            raise GraphBreak(gb.SIDE_EFFECT, "a dict keyed by objects stores a value Python could not be given again")
        k, before = self._lookup(tx, key_var)
        tx.output.side_effects.mutate(self)
        self.size_delta += (before is _ABSENT) if value is not None else -1
        self.local[k] = _ABSENT if value is None else value
        self.pending.append(("set" if value is not None else "del", key_var, value))

    def var_getattr(self, tx, name):
        if callable(getattr(dict, name, None)):
            return ContainerMethodVariable(self, name)
        return super().var_getattr(tx, name)

    def call_method(self, tx, name, args, kwargs):
        n = len(args)
        if kwargs:
            raise GraphBreak(gb.UNSUPPORTED_CALL, f"dict.{name}() with keyword arguments")
        if name == "__getitem__" and n == 1:
            return self.getitem(tx, args[0])
        if name == "__contains__" and n == 1:
            return ConstantVariable(self.contains(tx, args[0]))
        if name == "__len__" and n == 0:
            return self.len_tracker(tx)
        if name in ("get", "pop", "setdefault") and 1 <= n <= 2:
            value = self._lookup(tx, args[0])[1]
            if value is not _ABSENT:
                if name == "pop":
                    self._write(tx, args[0], None)
                return value
            if name == "pop" and n == 1:
                self.raise_in_trace(tx, KeyError, [args[0]])
            default = args[1] if n == 2 else NONE
            if name == "setdefault":
                self._write(tx, args[0], default)
            return default
        if name == "__setitem__" and n == 2:
            self._write(tx, args[0], args[1])
            return NONE
        if name == "__delitem__" and n == 1:
            if self._lookup(tx, args[0])[1] is _ABSENT:
                self.raise_in_trace(tx, KeyError, [args[0]])
            self._write(tx, args[0], None)
            return NONE
        if name == "__getattribute__":
            return super().call_method(tx, name, args, kwargs)
        raise self._whole(f"dict.{name}()")

    def replay(self, cg) -> None:
        """The recorded writes, in order, by dict's own methods on the real dict."""
        for op, key, value in self.pending:
            cg.load_callable(dict.__setitem__ if op == "set" else dict.__delitem__)
            cg.reconstruct(self)
            cg.reconstruct(key)
            if value is not None:
                cg.reconstruct(value)
            cg.call(3 if value is not None else 2)
            cg.emit("POP_TOP")

    def replayed_values(self) -> list:
        return [v for _, key, value in self.pending for v in (key, value) if v is not None]


class DefaultDictVariable(DictVariable):
    """A collections.defaultdict created in the trace: a missing key calls the factory."""

    def __init__(self, items: dict, default_factory: VariableTracker, source=None):
        import collections

        super().__init__(items, source, dict_type=collections.defaultdict)
        self.default_factory = default_factory

    def lookup(self, tx, key):
        k = self._key(key, tx)
        if k not in self.items:
            factory = self.default_factory
            if factory.is_python_constant() and factory.as_python_constant() is None:
                self.raise_in_trace(tx, KeyError, [key])
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


class CounterVariable(DictVariable):
    """A collections.Counter: a missing key reads as 0 (and is not added); ``update`` /
    ``subtract`` add / subtract counts; ``most_common``, ``elements`` and ``total`` need counts
    known at trace time.  Rebuilt as ``Counter({...})`` (input Counters: ``clear()`` +
    ``update({...})``, which sets the counts of an empty Counter)."""

    def __init__(self, items: dict, source=None):
        super().__init__(items, source, dict_type=collections.Counter)

    def describe(self):
        return "Counter"

    def lookup(self, tx, key):
        k = self._key(key, tx)
        return self.items[k] if k in self.items else ConstantVariable(0)  # Counter.__missing__

    def constant_copy(self):
        if any(isinstance(k, IdentityKey) for k in self.items):
            raise NotImplementedError
        return collections.Counter({k: i.constant_copy() for k, i in self.items.items()})

    def _counts(self, tx) -> list:
        """(key, count) pairs, counts known at trace time (else the graph breaks)."""
        pairs = [(k, v) for k, v in self.items.items()]
        if not all(v.is_python_constant() for _, v in pairs):
            raise GraphBreak(gb.VALUE_UNKNOWN, "Counter counts not known at trace time")
        return [(k, v.as_python_constant()) for k, v in pairs]

    def add_counts(self, tx, other, sign: int) -> None:
        """``update`` (sign 1) / ``subtract`` (sign -1) with a mapping or an iterable of elements."""
        if isinstance(other, DictVariable):
            pairs = [(key_to_var(k), v) for k, v in other.items.items()]
        else:
            pairs = [(item, ConstantVariable(1)) for item in other.unpack(tx)]
        tx.output.side_effects.mutate(self)
        for key, count in pairs:
            k = self._key(key, tx)
            if k in self.items:
                op = operator.add if sign > 0 else operator.sub
                self.items[k] = self.apply_operator(tx, op, [self.items[k], count])
            else:
                self.items[k] = count if sign > 0 else self.apply_operator(tx, operator.neg, [count])

    def call_method(self, tx, name, args, kwargs):
        if name in ("update", "subtract") and len(args) <= 1:
            if args:
                self.add_counts(tx, args[0], 1 if name == "update" else -1)
            if kwargs:
                self.add_counts(tx, DictVariable(dict(kwargs)), 1 if name == "update" else -1)
            return NONE
        if kwargs:
            return super().call_method(tx, name, args, kwargs)
        if name == "copy" and not args:
            return CounterVariable(dict(self.items))
        if name == "most_common" and len(args) <= 1:
            n = args[0].as_python_constant() if args else None
            if n is not None and type(n) is not int:
                raise GraphBreak(gb.VALUE_UNKNOWN, "Counter.most_common(n) with n not known at trace time")
            counts = self._counts(tx)
            try:  # what Counter computes (sorted by count, ties in insertion order)
                order = sorted(range(len(counts)), key=lambda i: counts[i][1], reverse=True)
            except TypeError as e:
                raise GraphBreak(gb.OPERATION_RAISES, f"Counter.most_common() raised TypeError: {e}") from e
            if n is not None:
                order = order[:max(n, 0)]
            return ListVariable([TupleVariable([key_to_var(counts[i][0]), self.items[counts[i][0]]]) for i in order])
        if name == "elements" and not args:
            counts = self._counts(tx)
            if not all(type(c) is int for _, c in counts):
                raise GraphBreak(gb.OPERATION_RAISES, "Counter.elements() of non-int counts")
            return self.snapshot_iterator([key_to_var(k) for k, c in counts for _ in range(c)])
        if name == "total" and not args:
            total = ConstantVariable(0)
            for v in self.items.values():
                total = self.apply_operator(tx, operator.add, [total, v])
            return total
        if name == "__missing__" and len(args) == 1:
            return ConstantVariable(0)
        if name == "__delitem__" and len(args) == 1:  # Counter.__delitem__ ignores a missing key
            if self._key(args[0], tx) not in self.items:
                return NONE
        return super().call_method(tx, name, args, kwargs)


class MappingProxyVariable(VariableTracker):
    """types.MappingProxyType(d) made in the trace: a read-only live view of the dict tracker
    ``dict_var`` (reads go to it; writes raise TypeError in Python, so they break)."""

    def __init__(self, dict_var: DictVariable):
        super().__init__()
        self.dict_var = dict_var

    def python_type(self):
        return types.MappingProxyType

    def describe(self):
        return "mappingproxy"

    def has_len(self):
        return True

    def truthiness(self, tx):
        return bool(self.dict_var.items)

    def unpack(self, tx):
        return self.dict_var.unpack(tx)

    def contains(self, tx, item):
        return self.dict_var.contains(tx, item)

    def len(self, tx):
        return self.dict_var.len(tx)

    def iter(self, tx):
        return self.dict_var.iter(tx)

    def getitem(self, tx, key):
        return self.dict_var.getitem(tx, key)

    def var_getattr(self, tx, name):
        if name in _PROXY_READS:
            return ContainerMethodVariable(self, name)
        return super().var_getattr(tx, name)

    def call_method(self, tx, name, args, kwargs):
        if name in _PROXY_READS:
            return self.dict_var.call_method(tx, name, args, kwargs)
        raise GraphBreak(gb.OPERATION_RAISES, f"mappingproxy.{name}() (a read-only mapping)")

    def reconstruct(self, cg):
        cg.load_callable(types.MappingProxyType)
        cg.reconstruct(self.dict_var)
        cg.call(1)

    def can_reconstruct(self):
        return self.dict_var.can_reconstruct()


class ChainMapVariable(VariableTracker):
    """A collections.ChainMap made in the trace over dict trackers: reads look the maps up in
    order, writes go to the first one.  ``maps_var`` is its ``.maps`` list (one object, live);
    generated code rebuilds it as ``ChainMap()`` with that list set as ``.maps``."""

    mutable_local = True

    def __init__(self, maps: list):
        super().__init__()
        self.maps_var = ListVariable(maps or [DictVariable({})])  # ChainMap() holds one empty dict

    @property
    def maps(self) -> list:
        if not all(type(m) in (DictVariable, DefaultDictVariable, CounterVariable) for m in self.maps_var.items):
            raise GraphBreak(gb.UNSUPPORTED_CALL, "a ChainMap over something other than dicts")
        return self.maps_var.items

    def python_type(self):
        return collections.ChainMap

    def describe(self):
        return "ChainMap"

    def has_len(self):
        return True

    def _keys(self) -> list:
        """The keys in ChainMap's iteration order (the union, the last map's keys first)."""
        merged: dict = {}
        for m in reversed(self.maps):
            merged.update(dict.fromkeys(m.items))
        return list(merged)

    def _find(self, tx, key):
        k = hash_key(key, "ChainMap key")
        for m in self.maps:
            if k in m.items:
                return m.items[k]
        return None

    def unpack(self, tx):
        return [key_to_var(k) for k in self._keys()]

    def len(self, tx):
        return len(self._keys())

    def truthiness(self, tx):
        return any(m.items for m in self.maps)

    def contains(self, tx, item):
        return self._find(tx, item) is not None

    def iter(self, tx):
        return self.snapshot_iterator(self.unpack(tx))

    def getitem(self, tx, key):
        value = self._find(tx, key)
        if value is None:
            self.raise_in_trace(tx, KeyError, [key])
        return value

    def setitem(self, tx, key, value):
        self.maps[0].call_method(tx, "__setitem__", [key, value], {})

    def var_getattr(self, tx, name):
        if name == "maps":
            return self.maps_var
        if name in ("get", "__getitem__", "__setitem__", "__contains__", "__len__", "__delitem__", "pop",
                    "new_child", "copy"):
            return ContainerMethodVariable(self, name)
        if name == "parents":
            return ChainMapVariable(self.maps[1:])
        return super().var_getattr(tx, name)

    def call_method(self, tx, name, args, kwargs):
        if kwargs:
            raise GraphBreak(gb.UNSUPPORTED_CALL, f"ChainMap.{name}() with keyword arguments")
        if name == "get" and 1 <= len(args) <= 2:
            value = self._find(tx, args[0])
            return value if value is not None else (args[1] if len(args) == 2 else NONE)
        if name == "__getitem__" and len(args) == 1:
            return self.getitem(tx, args[0])
        if name == "__contains__" and len(args) == 1:
            return ConstantVariable(self.contains(tx, args[0]))
        if name == "__len__" and not args:
            return ConstantVariable(self.len(tx))
        if name == "__setitem__" and len(args) == 2:
            return self.maps[0].call_method(tx, name, args, kwargs)
        if name in ("__delitem__", "pop") and args and self.maps[0].contains(tx, args[0]):
            return self.maps[0].call_method(tx, name, args, kwargs)  # (a missing key: ChainMap's own message)
        if name == "new_child" and len(args) <= 1:
            child = args[0] if args else DictVariable({})
            if type(child) is not DictVariable:
                raise GraphBreak(gb.UNSUPPORTED_CALL, f"ChainMap.new_child({child.describe()})")
            return ChainMapVariable([child, *self.maps])
        if name == "copy" and not args:  # a copy of the first map, the others shared
            return ChainMapVariable([self.maps[0].call_method(tx, "copy", [], {}), *self.maps[1:]])
        raise GraphBreak(gb.UNSUPPORTED_CALL, f"ChainMap.{name}() is not supported here")

    def reconstruct(self, cg):
        cg.load_callable(collections.ChainMap)
        cg.call(0)
        cg.emit("COPY", 1)  # cm.maps = [...] (the list the trace's .maps is)
        cg.reconstruct(self.maps_var)
        cg.emit("SWAP", 2)
        cg.emit("STORE_ATTR", "maps")

    def can_reconstruct(self):
        return self.maps_var.can_reconstruct()


_PROXY_READS = ("get", "keys", "values", "items", "copy", "__getitem__", "__contains__", "__len__", "__or__")


def is_frozendict_class(cls) -> bool:
    """``cls`` is the ``frozendict`` package's frozendict (modelled by FrozenDictVariable)."""
    module = sys.modules.get("frozendict")
    return module is not None and cls is getattr(module, "frozendict", None)


class FrozenDictVariable(DictVariable):
    """A ``frozendict.frozendict`` made in the trace, its items known: the dict methods it
    inherits from dict that only read; anything else breaks (its mutators raise)."""

    _READS = ("__getitem__", "get", "keys", "values", "items", "__contains__", "__len__", "__iter__")

    def describe(self):
        return self.dict_type.__name__

    def call_method(self, tx, name, args, kwargs):
        if name in self._READS and getattr(self.dict_type, name, None) is getattr(dict, name):
            return super().call_method(tx, name, args, kwargs)
        raise GraphBreak(gb.UNSUPPORTED_CALL, f"{self.dict_type.__name__}.{name}() is not supported here")


class IdKey(IdentityKey):
    """The key of ``id(obj)`` (an IdVariable) whose address is only known when the code runs:
    equal for the same object, and the ids of two objects alive at the same time differ
    (``checked_key`` makes sure they are); ``var`` is the IdVariable."""

    made = 0  # how many were ever made: none, and no container can hold one (checked_key skips its scan)

    def __init__(self, var, obj_ident):
        super().__init__(var, ("id()", obj_ident))
        IdKey.made += 1


def _alive(tx, objs) -> bool:
    """Every tracker in ``objs`` is reachable now from a local or the stack of a frame being
    traced (through lists, tuples, dicts and sets): its object is alive in the real run too."""
    want = {id(o) for o in objs}
    seen: set = set()
    todo: list = []
    frame = tx
    while frame is not None:
        todo.extend(getattr(frame, "symbolic_locals", {}).values())
        todo.extend(getattr(frame, "stack", ()))
        frame = getattr(frame, "parent", None)
    while todo and want - seen:
        v = todo.pop()
        if id(v) in seen or not isinstance(v, VariableTracker):
            continue
        seen.add(id(v))
        items = v.items if isinstance(v, (ListVariable, TupleVariable, DictVariable)) or \
            type(v).__name__ == "SetVariable" else None
        if isinstance(items, dict):
            todo.extend(k.var for k in items if isinstance(k, IdentityKey))
            todo.extend(items.values())
        elif isinstance(items, (list, tuple)):
            todo.extend(items)
    return not (want - seen)


def checked_key(tx, keys, k, what: str):
    """``k`` (from ``hash_key``), checked against the keys already in a dict / set: an id()
    key not among them is only stored or told apart from other objects' ids when all those
    objects are alive now (a freed object's address may be reused, and the real run rebuilds
    the key from the object), and never next to a number (its value is not known)."""
    if isinstance(k, IdKey):
        if k in keys:
            return k  # the same object: the same id
        others = [x for x in keys if isinstance(x, IdKey)]
        if any(isinstance(x, (int, float, complex)) for x in keys):
            raise GraphBreak(gb.VALUE_UNKNOWN, f"{what} id() next to numbers: its value is not known at trace time")
        # (stored or told apart, the object must be alive: a freed one's address is reused)
        if tx is None or not _alive(tx, [k.var.obj] + [x.var.obj for x in others]):
            raise GraphBreak(gb.VALUE_UNKNOWN, f"{what} id() of an object that may have been freed "
                             "(its address may be reused)")
        for x in others:  # (a key of its own: a later call must not pass one object for two ids)
            guard_distinct(tx, k.var.obj, x.var.obj)
    elif IdKey.made and isinstance(k, (int, float, complex)) and any(isinstance(x, IdKey) for x in keys):
        raise GraphBreak(gb.VALUE_UNKNOWN, f"{what} {k!r} next to id() keys: their values are not known at trace time")
    elif isinstance(k, IdentityKey) and tx is not None and k not in keys:
        for x in keys:  # (a key of its own: a later call must not pass one object for two keys)
            if isinstance(x, IdentityKey) and not isinstance(x, IdKey):
                guard_distinct(tx, k.var, x.var)
    return k


def _id_of_self(self):
    return id(self)


def _self_is_other(self, other):
    return self is other


def _same_body(fn, ref) -> bool:
    """``fn`` is a plain Python function whose code is ``ref``'s up to names (read statically)."""
    if not isinstance(fn, types.FunctionType) or fn.__closure__:
        return False
    code, want = fn.__code__, ref.__code__
    return (code.co_code == want.co_code and code.co_consts == want.co_consts and code.co_names == want.co_names
            and code.co_argcount == want.co_argcount and not code.co_kwonlyargcount
            and not code.co_flags & 0x0C)  # (no *args / **kwargs)


def _calls_builtin_id(fn) -> bool:
    g, b = fn.__globals__, fn.__builtins__
    return "id" not in g and isinstance(b, dict) and b.get("id") is id


def identity_hash_kind(t: type):
    """How instances of ``t`` hash when they hash by identity: "pointer" (object.__hash__, a
    function of the address), "id" (``__hash__`` is ``return id(self)``, as einx's backends
    and torch.Tensor do: the address itself), None when they may hash by value.  Equality must
    be identity too (object.__eq__ or ``return self is other``); both are read statically."""
    h = t.__hash__
    if h is object.__hash__:
        kind = "pointer"
    elif h is torch.Tensor.__hash__ or (_same_body(h, _id_of_self) and _calls_builtin_id(h)):
        kind = "id"
    else:
        return None
    eq = t.__eq__
    if eq is object.__eq__ or issubclass(t, torch.Tensor) or _same_body(eq, _self_is_other):
        return kind
    return None


def hashes_by_identity(t: type) -> bool:
    return identity_hash_kind(t) is not None


def hash_key(v: VariableTracker, what: str):
    """The key of ``v`` in a dict / set tracker: its value for constants, an IdentityKey for
    objects hashed by identity.  Unhashable values break where Python raises TypeError; objects
    whose class defines its own __hash__ / __eq__ (equal objects are one key) break too."""
    if isinstance(v, IdVariable):
        ident = v.obj.identity_key()
        if ident is None:
            raise GraphBreak(gb.VALUE_UNKNOWN, f"{what} {v.describe()}: the object's identity is not known at trace time")
        return IdKey(v, ident.ident)
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
        if not hashes_by_identity(t):
            raise GraphBreak(gb.VALUE_UNKNOWN, f"{what} {v.describe()} is hashed by value, not identity")
    key = v.identity_key()
    if key is None:
        raise GraphBreak(gb.VALUE_UNKNOWN, f"{what} {v.describe()} is not hashable at trace time")
    return key


def key_to_var(k) -> VariableTracker:
    if isinstance(k, IdentityKey):
        return k.var
    if type(k) is tuple:  # (its items may be classes: ``(torch.Tensor,)``, einx's backend table)
        return TupleVariable([key_to_var(x) for x in k])
    if isinstance(k, tuple):  # a namedtuple key (e3nn's ``_INPUT(0, 2, 5)`` paths): made again by its class
        made = VariableTracker.namedtuple_of(type(k), [key_to_var(x) for x in k])
        if made is not None:
            return made
    return VariableTracker.wrap_constant(k) if isinstance(k, tuple) else ConstantVariable(k)


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
        return DictIteratorVariable(self.dict_var, self.kind)

    def constant_copy(self):
        items = self.dict_var.items
        if self.kind == "keys" and not any(isinstance(k, IdentityKey) for k in items):
            return dict.fromkeys(items).keys()  # the keys are constants even when the values are not
        return getattr(self.dict_var.constant_copy(), self.kind)()

    def var_getattr(self, tx, name):
        if name == "mapping":  # a data attribute: a read-only live view of the viewed dict
            return MappingProxyVariable(self.dict_var)
        if callable(getattr(self.python_type(), name, None)):
            return ContainerMethodVariable(self, name)
        return super().var_getattr(tx, name)

    def _contains(self, tx, item) -> bool:
        if self.kind == "keys":
            return self.dict_var.contains(tx, item)
        if self.kind == "values":
            return search_items(tx, list(self.dict_var.items.values()), item)
        # (k, v) in d.items(): the key is looked up, then its value compared (identity, then ==)
        if not isinstance(item, TupleVariable) or len(item.items) != 2:
            if item.is_python_constant() or isinstance(item, TupleVariable):
                return False  # not a pair: never an item
            raise GraphBreak(gb.VALUE_UNKNOWN, f"{item.describe()} in dict.items()")
        k = self.dict_var._key(item.items[0], tx)
        if k not in self.dict_var.items:
            return False
        return search_items(tx, [self.dict_var.items[k]], item.items[1])

    def call_method(self, tx, name, args, kwargs):
        if name == "__len__" and not args:
            return ConstantVariable(len(self.dict_var.items))
        if name == "__contains__" and len(args) == 1:
            return ConstantVariable(self._contains(tx, args[0]))
        if name == "isdisjoint" and len(args) == 1 and self.kind != "values" and not kwargs:
            return ConstantVariable(not any(self._contains(tx, i) for i in args[0].unpack(tx)))
        return super().call_method(tx, name, args, kwargs)

    def reconstruct(self, cg):
        cg.reconstruct(self.dict_var)
        cg.load_method(self.kind)
        cg.call_method(0)

    def can_reconstruct(self):
        return self.dict_var.can_reconstruct()


def mapping_items(tx, src: VariableTracker, what: str) -> dict | None:
    """The items ``dict(src)`` / ``dict.update(src)`` copy when ``src`` is a mapping, or None when
    it is read as an iterable of key/value pairs.  CPython takes anything with a ``keys``
    attribute as a mapping (its ``keys()``, then ``src[key]`` of each): a mappingproxy, a
    ChainMap, a dict subclass that overrides keys/__getitem__; so an object of a type with
    ``keys`` that is not modelled here breaks rather than being iterated as pairs."""
    if isinstance(getattr(src, "storage", None), DictVariable):
        # a dict subclass instance: CPython copies its dict directly when its __iter__ is
        # dict's, else through keys() and __getitem__
        direct = src.storage.dict_type is dict and src.dict_method("__iter__")
        if not (direct or (src.dict_method("keys") and src.dict_method("__getitem__"))):
            raise GraphBreak(gb.UNSUPPORTED_CALL, f"{what} of {src.describe()}, which overrides keys/__getitem__")
        src = src.storage
    if isinstance(src, MappingProxyVariable):  # its keys() and [key] are the viewed dict's
        src = src.dict_var
    if isinstance(src, ChainMapVariable):  # a mapping: its keys(), then [key] of each
        return {k: src._find(tx, key_to_var(k)) for k in src._keys()}
    if isinstance(src, DictVariable):
        return dict(src.items)
    if hasattr(src.python_type(), "keys"):
        raise GraphBreak(gb.UNSUPPORTED_CALL, f"{what} of {src.describe()} (a mapping: its keys() and [key])")
    return None


def dict_from_args(tx, *args, **kwargs) -> DictVariable:
    """``dict(*args, **kwargs)``: a new DictVariable (builtin ``dict``, OrderedDict, defaultdict)."""
    result = DictVariable({})
    if args:
        src = args[0]
        as_mapping = mapping_items(tx, src, "dict()")
        if as_mapping is not None:
            result.items.update(as_mapping)
        else:
            for pair in src.unpack(tx):
                parts = pair.unpack(tx)
                if len(parts) != 2:  # Python raises ValueError
                    raise GraphBreak(gb.OPERATION_RAISES, f"dictionary update sequence element has length {len(parts)}")
                result.items[result._key(parts[0], tx)] = parts[1]
    result.items.update(kwargs)
    return result


_DICT_ITER_TYPES = {
    ("keys", False): type(iter({})), ("values", False): type(iter({}.values())),
    ("items", False): type(iter({}.items())), ("keys", True): type(reversed({})),
    ("values", True): type(reversed({}.values())), ("items", True): type(reversed({}.items())),
}


class DictIteratorVariable(LazyIteratorVariable):
    """iter(d) / iter(d.values()) / iter(d.items()) / reversed(...): reads values live.

    Attributes:
        dict_var: the DictVariable iterated.
        view: "keys", "values" or "items".
        reverse: reversed(d...) instead of iter(d...).
        keys: the dict's keys (in iteration order) when the iterator was made.
        index: how many items were produced.
    """

    def __init__(self, dict_var, view: str, reverse: bool = False):
        super().__init__(_DICT_ITER_TYPES[(view, reverse)])
        self.dict_var = dict_var
        self.view = view
        self.reverse = reverse
        self.keys = list(dict_var.items)
        if reverse:
            self.keys.reverse()

    def _changed(self) -> bool:
        current = list(self.dict_var.items)
        if self.reverse:
            current.reverse()
        return current != self.keys

    def next_item(self, tx):
        if self.exhausted:
            return None
        if self._changed():
            # "dictionary changed size / keys changed during iteration": only Python raises it
            # at the right point (a rebuilt iterator would not know the old size)
            raise SkipFrame(gb.OPERATION_RAISES, f"{self.dict_var.describe()} changed during iteration", permanent=False)
        if self.index >= len(self.keys):
            self.exhausted = True
            return None
        k = self.keys[self.index]
        self.index += 1
        if self.view == "keys":
            return key_to_var(k)
        value = self.dict_var.items[k]
        return value if self.view == "values" else TupleVariable([key_to_var(k), value])

    def reconstruct(self, cg):
        if self._changed():
            raise SkipFrame(gb.CANNOT_REBUILD, f"an iterator over {self.dict_var.describe()}, which changed")
        cg.load_callable(_dict_iterator_at)
        cg.reconstruct(self.dict_var)
        cg.load_const(self.view)
        cg.load_const(self.reverse)
        cg.load_const(self.index + self.exhausted)
        cg.call(4)

    def _parts(self):
        return [self.dict_var]


def _dict_iterator_at(d: dict, view: str, reverse: bool, index: int):
    """iter/reversed of ``d`` or its view advanced by ``index`` items (rebuilt by generated code;
    one more than its length: exhausted for good)."""
    obj = d if view == "keys" else getattr(d, view)()
    it = reversed(obj) if reverse else iter(obj)
    for _ in range(index):
        next(it, None)
    return it
