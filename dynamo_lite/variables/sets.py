"""Sets: set and frozenset of constants or identity-keyed objects.

Elements are keyed like dict keys (mappings.hash_key).  A set iterates in the
order of a shadow real set put through the same operations, so iteration and
rebuilding follow CPython's order; an iterator over a set is watched (a set
that changed size during iteration runs the frame eagerly).  Set algebra on
constants folds on copies; an operation Python would raise on breaks (DL0010).
Tested by tests/semantics/test_containers.py and tests/semantics/test_container_values.py.
"""
from __future__ import annotations

import sys
from typing import Optional

from .. import graph_breaks as gb
from .. import guards
from ..exc import GraphBreak
from .base import IdentityKey, VariableTracker
from .constant import ConstantVariable, NONE
from .mappings import checked_key, hash_key, identity_hash_kind
from .methods import ContainerMethodVariable
from .sequences import iterate_lazily, ListIteratorVariable


def _note_hash_order(tx, keys) -> None:
    """The trace follows a set's iteration order: it depends on hashes, of strings (salted per
    process: PYTHONHASHSEED) or of addresses (this process only).  A stored entry says so."""
    if any(isinstance(k, _AddressKey) for k in keys):
        tx.output.process_dependent = "the order of a set of objects hashed by identity"
    elif any(type(k) not in (int, bool, float, type(None)) for k in keys):
        tx.output.hash_seed_dependent = True


class SetVariable(VariableTracker):
    """A set of constants (or identity-keyed objects).

    Attributes:
        items: key (``hash_key``) -> element tracker, in insertion order.
        shadow: a real set of the keys that went through the same sequence of
            operations as the real set (None once an element's hash is not known: an
            object made in the trace): iteration and rebuilding follow its order, which
            is CPython's.  A real object hashed by identity stands in it as an
            ``_AddressKey`` with the object's hash, a function of its address: using
            that order guards the object's identity (``_ordered_keys(tx)``).
    """

    def __init__(self, items: list, source=None, frozen=False, tx=None, real=None, set_type=None):
        super().__init__(source)
        self.frozen = frozen
        # the class: set / frozenset, or a plain Python subclass of one (``plain_set_subclass``)
        self.set_type = set_type or (frozenset if frozen else set)
        self.items: dict = {}
        for item in items:
            self.items[self._key(item, tx)] = item
        self.mutable_local = source is None and not frozen
        self.shadow = None
        self._sync_shadow(list(self.items))
        # A set read from the frame (``real``, ``items`` given in its iteration order; the
        # builder guards that order, SET_ORDER) iterates in the order its history gave it
        # (deletions, table growth): a fresh shadow of the same elements may not.  Then that
        # order is pinned while the trace leaves the set as it was; folding uses the real set
        # itself while the trace has not changed it (``str(s)``, ``",".join(s)`` see its order).
        self.pinned: Optional[list] = None
        self.real = real
        self.changed = False
        # the changes the trace made to a set read from the frame, as the calls that replay them
        # on the real set in order (("add" | "discard", element tracker) or ("clear", None)):
        # its table then goes through what eager's went through; None once a change was not
        # logged (the replay then empties and refills it)
        self.replay_log: Optional[list] = [] if source is not None else None
        if real is not None and not self._shadow_matches(real):
            self.pinned = list(self.items)

    @classmethod
    def of_frozenset(cls, value: frozenset, items: list) -> "SetVariable":
        """A frozenset known at trace time (a constant of the code, a folded result), ``items``
        its elements' trackers in its order: the shadow is the frozenset itself, so iterating,
        rebuilding and set algebra follow its own table, not one built anew (whose order may
        differ under another hash seed or table size)."""
        out = cls(items, frozen=True)
        if out.shadow is not None and [_key_of(k) for k in value] == list(out.items) \
                and all(_stand_in(k) is k for k in out.items):
            out.shadow = value
        return out

    def _table(self):
        """A real set / frozenset with this set's table (its shadow when faithful), or None."""
        return self._faithful_shadow()

    def _sync_shadow(self, added=()):
        """Add ``added`` keys to the shadow set (and drop keys no longer in ``items``)."""
        if self.shadow is None and not self.items.keys() - set(added):
            self.shadow = set()
        if self.shadow is None:
            return
        stand_ins = [_stand_in(k) for k in added]
        if any(k is None for k in stand_ins):
            self.shadow = None
            return
        for k in [k for k in self.shadow if _key_of(k) not in self.items]:
            self.shadow.discard(k)
        for k in stand_ins:
            self.shadow.add(k)

    def _log(self, op: str, key, item) -> None:
        """Log a change to replay (an add of a new element, a discard of a present one, a clear;
        the others leave the real set's table as it was)."""
        if op == "clear" or (key in self.items) == (op == "discard"):
            self.changed = True
            if self.replay_log is not None:
                self.replay_log.append((op, self.items[key] if op == "discard" else item))

    def _log_update(self, name: str, others: list, result) -> None:
        """Log ``name`` (difference_update, intersection_update, symmetric_difference_update with
        constant ``others``, whose outcome is the shadow ``result``) as calls that leave the real
        table as CPython's method does."""
        if name == "difference_update":  # discards: their order changes nothing
            for k in [k for k in self.items if k not in result]:
                self._log("discard", k, self.items[k])
        elif name == "intersection_update":  # a new table, filled in the result's order
            self._log("clear", None, None)
            for k in result:
                self._log_raw("add", k)
        else:  # each element of the others, in their order: discarded if present, else added
            present = set(self.items)
            for other in others:
                for k in other:
                    op = "discard" if k in present else "add"
                    (present.discard if op == "discard" else present.add)(k)
                    self._log_raw(op, k)

    def _log_raw(self, op: str, key) -> None:
        if self.replay_log is not None:
            item = self.items.get(key)
            self.replay_log.append((op, ConstantVariable(key) if item is None else item))

    def _shadow_matches(self, real) -> bool:
        """Does the shadow iterate as ``real`` does, from a table of the same size?"""
        if self.shadow is None or sys.getsizeof(self.shadow) != sys.getsizeof(real):
            return False
        return [_key_of(k) for k in self.shadow] == list(self.items)

    def _faithful_shadow(self):
        """The shadow when it holds the constant elements in the real set's order (no stand-ins,
        not a set read from the frame whose own order differs); else None."""
        if self.shadow is None or self.pinned is not None or len(self.shadow) != len(self.items) or \
                any(isinstance(k, _AddressKey) for k in self.shadow):
            return None
        return self.shadow

    def _ordered_keys(self, tx=None) -> list:
        """The keys in the order the real set iterates.  With objects hashed by identity that
        order follows their addresses: known for real objects (guarded by identity, so a later
        call with other objects compiles again), not for objects made in the trace (a break).
        A set read from the frame: its own order (guarded, ``SET_ORDER``), which a set the trace
        changed loses unless the shadow was faithful to it (a break)."""
        if self.pinned is not None:
            if list(self.items) == self.pinned:
                return list(self.pinned)
            if tx is not None:
                raise GraphBreak(gb.VALUE_UNKNOWN, "iterating over a set read from the frame after the trace changed "
                                 "it: its order follows its table's history (deletions, growth), which the trace "
                                 "cannot replay")
        if self.shadow is not None and len(self.shadow) == len(self.items):
            order = list(self.shadow)
            if tx is not None and len(order) > 1:
                _note_hash_order(tx, order)
            by_address = [k.key for k in order if isinstance(k, _AddressKey)]
            if by_address and len(order) > 1:
                if tx is None or not all(_guard_identity(tx, k.var) for k in by_address):
                    raise GraphBreak(gb.VALUE_UNKNOWN, "iterating over a set of objects hashed by identity: "
                                     "its order follows addresses the trace cannot pin")
            return [_key_of(k) for k in order]
        if len(self.items) > 1 and any(isinstance(k, IdentityKey) for k in self.items):
            raise GraphBreak(gb.VALUE_UNKNOWN, "iterating over a set holding objects made in the trace: its order "
                             "follows their addresses, known only when Python makes them")
        return list(self.items)

    def _key(self, v, tx=None):
        return checked_key(tx, self.items, hash_key(v, "set element"), "set element")

    def python_type(self):
        return self.set_type

    def has_len(self):
        return True

    def truthiness(self, tx):
        return bool(self.items)

    def is_python_constant(self):
        return all(v.is_python_constant() for v in self.items.values())

    def as_python_constant(self):
        if self.real is not None and not self.changed:
            return self.real  # (its order guarded: what eager's folding would see)
        # (built anew by Python, which orders the elements itself: insertion order when objects
        # hashed by identity are among them, whose order would need guards)
        keys = list(self.items) if any(isinstance(k, IdentityKey) for k in self.items) else self._ordered_keys()
        return self.python_type()(self.items[k].as_python_constant() for k in keys)

    def unpack(self, tx):
        return [self.items[k] for k in self._ordered_keys(tx)]  # in the order the real set iterates

    def constant_copy(self):
        if self.is_python_constant():
            # (a set read from the frame and not changed: the set itself, as eager's callee gets
            # it; a copy would iterate in a fresh table's order)
            return self.as_python_constant()
        return self.python_type()(i.constant_copy() for i in self.items.values())

    def contains(self, tx, item):
        return self._key(_as_frozen_key(item), tx) in self.items

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
        if name in _COMPARISONS and len(args) == 1 and not kwargs:
            other = args[0]
            if not isinstance(other, SetVariable):
                try:
                    t = other.python_type()
                except GraphBreak:
                    t = None
                if not isinstance(t, type) or issubclass(t, (set, frozenset)):
                    raise GraphBreak(gb.UNSUPPORTED_CALL, f"set.{name}() of {other.describe()}")
                return ConstantVariable(NotImplemented)  # (not a set: Python tries the other side)
            return ConstantVariable(getattr(set(self.items), name)(set(other.items)))
        if name == "__len__":
            return ConstantVariable(len(self.items))
        if name == "add" and len(args) == 1 and not self.frozen:
            se.mutate(self)
            k = self._key(args[0], tx)
            self._log("add", k, args[0])
            self.items.setdefault(k, args[0])
            self._sync_shadow([k])
            return NONE
        if name == "discard" and len(args) == 1 and not self.frozen:
            k = self._key(_as_frozen_key(args[0]), tx)
            se.mutate(self)
            self._log("discard", k, args[0])
            self.items.pop(k, None)
            self._sync_shadow()
            return NONE
        if name in ("union", "intersection", "difference", "issubset", "issuperset", "__or__", "__and__",
                    "__sub__", "symmetric_difference", "__xor__", "isdisjoint", "copy") and \
                self.is_python_constant() and not kwargs:
            try:
                others = [a.constant_copy() for a in args]
            except NotImplementedError:
                others = None
            if others is not None:
                # on the shadows when they are faithful (their tables went through what the real
                # sets' went through): the result's table, so its order, is then eager's
                faithful = self._faithful_shadow()
                if faithful is not None:
                    others = [o if not isinstance(a, SetVariable) or a._faithful_shadow() is None
                              else a._faithful_shadow() for a, o in zip(args, others)]
                value = faithful if faithful is not None else self.as_python_constant()
                try:
                    result = getattr(value, name)(*others)
                except Exception as e:  # noqa: BLE001 - raise it for real
                    raise GraphBreak(gb.OPERATION_RAISES, f"set.{name} raised {type(e).__name__}") from e
                if faithful is not None and type(result) in (set, frozenset):
                    if name == "copy" and self.set_type is frozenset:  # the frozenset itself
                        return self
                    # (the shadow is a set: a frozenset's operations give a frozenset, of the same table)
                    out = SetVariable([ConstantVariable(k) for k in result], frozen=self.frozen)
                    out.shadow = result
                    return out
                return self.wrap_constant(result)
        if name in _ALGEBRA and not kwargs and args and all(type(a) is SetVariable for a in args) \
                and all(map(_plain_key, [k for v in (self, *args) for k in v.items])):
            return self._algebra(name, args)
        if name in ("update", "__ior__") and not self.frozen:
            added = []
            for a in args:
                # each item added before the next is asked for (a generator reading the set sees it)
                for item in (a.unpack(tx) if a is self else iterate_lazily(tx, a)):
                    added.append(self._key(item, tx))
                    self._log("add", added[-1], item)
                    self.items.setdefault(added[-1], item)
            se.mutate(self)
            # a set or frozenset argument whose table is known merges as CPython merges it (its
            # table's order into one sized first: set_merge), not as its elements added in turn
            tables = [a._table() if isinstance(a, SetVariable) else None for a in args]
            if tables and all(t is not None for t in tables) and \
                    (self.shadow is not None or not self.items.keys() - set(added)):
                if self.shadow is None:
                    self.shadow = set()
                for t in tables:
                    self.shadow.update(t)
            else:
                self._sync_shadow(added)
            return self if name == "__ior__" else NONE
        if name == "remove" and len(args) == 1 and not self.frozen:
            k = self._key(_as_frozen_key(args[0]), tx)
            if k not in self.items:
                self.raise_in_trace(tx, KeyError, [args[0]])
            se.mutate(self)
            self._log("discard", k, args[0])
            del self.items[k]
            self._sync_shadow()
            return NONE
        if name == "pop" and not args and not self.frozen:
            if not self.items:
                self.raise_in_trace(tx, KeyError, [ConstantVariable("pop from an empty set")])
            if self.source is not None or self.shadow is None or len(self.shadow) != len(self.items):
                # which element the real set pops depends on its history (its scan position)
                raise GraphBreak(gb.UNSUPPORTED_CALL, "set.pop() of a set whose history the trace does not know")
            self._ordered_keys(tx)  # (guards the addresses the scan order follows)
            se.mutate(self)
            key = _key_of(self.shadow.pop())  # the shadow went through the same operations: the same element
            self.replay_log = None
            self.changed = True
            return self.items.pop(key)
        if name == "clear" and not args and not self.frozen:
            se.mutate(self)
            self._log("clear", None, None)
            self.items.clear()
            self._sync_shadow()
            return NONE
        if name in ("difference_update", "intersection_update", "symmetric_difference_update") and \
                not self.frozen and self.is_python_constant():
            try:
                others = [a.constant_copy() for a in args]
            except NotImplementedError:
                others = None
            if others is not None:
                if self.replay_log is not None and name != "difference_update" and \
                        (self.pinned is not None or self.shadow is None):
                    # (its result's table follows the set's own, which the shadow does not copy)
                    raise GraphBreak(gb.UNSUPPORTED_CALL, f"set.{name}() of a set read from the frame whose order "
                                     "follows its history: the order it leaves the set in cannot be replayed")
                # on the shadow itself: it goes through what the real set goes through
                value = self.shadow if self.shadow is not None else set(self.as_python_constant())
                try:
                    getattr(value, name)(*others)
                except Exception as e:  # noqa: BLE001 - raise it for real (the trace restarts)
                    raise GraphBreak(gb.OPERATION_RAISES, f"set.{name} raised {type(e).__name__}") from e
                se.mutate(self)
                self._log_update(name, others, value)
                self.changed = True
                self.items = {k: v for k, v in self.items.items() if k in value}
                for v in value:
                    self.items.setdefault(v, ConstantVariable(v))
                self.shadow = value
                return NONE
        if name == "__getattribute__":
            return super().call_method(tx, name, args, kwargs)
        raise GraphBreak(gb.UNSUPPORTED_CALL, f"set.{name}() is not supported here")

    def _algebra(self, name: str, others: list) -> VariableTracker:
        """Set algebra over sets of strings and objects hashed by identity (einops' axis sets:
        names and anonymous axes): membership by key, the result's order from the same operation
        on the shadows when both are known (CPython's order), else unknown (iterating breaks)."""
        keys = dict(self.items)
        if name in ("issubset", "issuperset", "isdisjoint"):
            if len(others) != 1:
                raise GraphBreak(gb.UNSUPPORTED_CALL, f"set.{name}() with {len(others)} arguments")
            return ConstantVariable(getattr(set(self.items), name)(set(others[0].items)))
        for other in others:
            if name in ("union", "__or__"):
                for k, v in other.items.items():
                    keys.setdefault(k, v)
            elif name in ("intersection", "__and__"):
                keys = {k: v for k, v in keys.items() if k in other.items}
            elif name in ("difference", "__sub__"):
                keys = {k: v for k, v in keys.items() if k not in other.items}
            else:  # symmetric_difference / __xor__
                both = {k: v for k, v in keys.items() if k not in other.items}
                both.update((k, v) for k, v in other.items.items() if k not in keys)
                keys = both
        result = SetVariable([], frozen=self.frozen)
        result.items = keys
        shadows = [self.shadow, *(o.shadow for o in others)]
        if all(sh is not None and len(sh) == len(v.items) for sh, v in zip(shadows, (self, *others))):
            result.shadow = getattr(shadows[0], _SHADOW_OP.get(name, name))(*shadows[1:])
        else:
            result.shadow = None
        return result

    def var_getattr(self, tx, name):
        if hasattr(set, name):
            return ContainerMethodVariable(self, name)
        return super().var_getattr(tx, name)

    def reconstruct(self, cg):
        if self.source is not None:
            return super().reconstruct(cg)
        keys, presized = list(self.items), False
        if self.shadow is not None and len(self.shadow) == len(self.items):
            # the elements in the shadow's order, added one by one (BUILD_SET; a tuple given to
            # frozenset() or a subclass: added in turn too) or into a table sized for them first
            # (from dict.fromkeys(...), as copy() / union() size theirs), must give the shadow's
            # table: the order eager's set iterates in; else (a table shaped by deletions) break
            order = list(self.shadow)
            inserted = list(self.items)  # (the order the trace added them: often how eager built it)
            if _same_table(_by_adds(inserted), self.shadow):
                order = inserted
            by_adds = _by_adds(order)
            split = None
            if _same_table(by_adds, self.shadow):
                pass
            elif _same_table(set(dict.fromkeys(order)), self.shadow):
                presized = True
            elif self.set_type in (set, frozenset):
                # a union's table: a copy of a first part, grown for a second that may overlap it
                # (set.union(a, b) sizes the table for len(a) + len(b))
                split = next(((i, j) for i in range(1, min(len(order), 32)) for j in range(i + 1) if _same_table(
                    _by_adds(order[:i]).union(_by_adds(order[j:])), self.shadow)), None)
            if split is not None:
                cg.load_callable(self.set_type.union)
                for part in (order[:split[0]], order[split[1]:]):
                    if self.frozen:
                        cg.load_callable(frozenset)
                    for k in part:
                        cg.reconstruct(self.items[_key_of(k)])
                    cg.emit("BUILD_TUPLE" if self.frozen else "BUILD_SET", len(part))
                    if self.frozen:
                        cg.call(1)
                cg.call(2)
                return
            if not presized and not _same_table(by_adds, self.shadow):
                raise GraphBreak(gb.CANNOT_REBUILD, "a set whose order follows its history (deletions, table "
                                 "growth) outlives the traced code: a set built anew would iterate otherwise")
            keys = [_key_of(k) for k in order]
        call = self.set_type is not set or presized
        if call:
            cg.load_callable(self.set_type)
        if presized:
            cg.load_callable(dict.fromkeys)
        for k in keys:  # (BUILD_SET: Python puts the elements where their hashes say)
            cg.reconstruct(self.items[k])
        cg.emit("BUILD_TUPLE" if call else "BUILD_SET", len(keys))
        if presized:
            cg.call(1)
        if call:
            cg.call(1)

    def can_reconstruct(self):
        return all(v.can_reconstruct() for v in self.items.values())


_COMPARISONS = ("__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__")


def _as_frozen_key(v):
    """What set.__contains__ / remove / discard look up for ``v``: a set (unhashable) is looked up
    as a frozenset of its elements, as CPython does; anything else as itself."""
    if isinstance(v, SetVariable) and not v.frozen:
        return SetVariable(list(v.items.values()), frozen=True)
    return v


def _by_adds(keys) -> set:
    """A set of ``keys`` added one by one, as BUILD_SET does."""
    made = set()
    for k in keys:
        made.add(k)
    return made


def _same_table(a: set, b: set) -> bool:
    """Do the two sets iterate alike from tables of the same size?  (As ``_shadow_matches``:
    the dummies deletions leave are not compared; they decide when a table grows, so a rebuilt
    set that then gets more elements than its table holds may grow at another add than eager's.)"""
    return sys.getsizeof(a) == sys.getsizeof(b) and list(a) == list(b)


def plain_set_subclass(cls) -> bool:
    """A Python subclass of set or frozenset (plain type metaclass) that defines nothing but a
    docstring: its instances behave as the base's (results of its operations are of the base
    type), so a SetVariable of that class stands for one.  An instance's attributes are not
    modelled (setting one breaks)."""
    if not isinstance(cls, type) or type(cls) is not type or not issubclass(cls, (set, frozenset)) or \
            cls in (set, frozenset):
        return False
    for base in cls.__mro__:
        if base in (set, frozenset):
            return True
        if base.__module__ == "builtins" or set(vars(base)) - _PLAIN_CLASS_NAMES:
            return False
    return False


_PLAIN_CLASS_NAMES = {"__module__", "__qualname__", "__doc__", "__dict__", "__weakref__", "__firstlineno__",
                      "__static_attributes__"}


class _AddressKey:
    """A real object hashed by identity, in a set tracker's shadow: hashes as the object does
    (computed from its address, so nothing of the user's runs) and equals only itself."""

    __slots__ = ("key", "hash")

    def __init__(self, key: IdentityKey, hash_value: int):
        self.key = key
        self.hash = hash_value

    def __hash__(self):
        return self.hash

    def __eq__(self, other):
        return isinstance(other, _AddressKey) and other.key == self.key


_HASH_BITS = sys.hash_info.width


def _pointer_hash(address: int) -> int:
    """object.__hash__ of the object at ``address`` (CPython rotates the pointer by 4 bits)."""
    mask = (1 << _HASH_BITS) - 1
    h = ((address >> 4) | (address << (_HASH_BITS - 4))) & mask
    if h >= 1 << (_HASH_BITS - 1):
        h -= 1 << _HASH_BITS
    return -2 if h == -1 else h


def _stand_in(k):
    """What the shadow holds for key ``k``: the key itself for constants, an _AddressKey for a
    real object hashed by identity, None when the hash is not known (an object made in the
    trace, or one whose hash we cannot compute without running it)."""
    if not isinstance(k, IdentityKey):
        return k
    if not (isinstance(k.ident, tuple) and k.ident[0] == "obj" and k.var.source is not None):
        return None
    try:
        t = k.var.python_type()
    except GraphBreak:
        return None
    kind = identity_hash_kind(t) if isinstance(t, type) else None
    address = k.ident[1]
    if kind == "pointer":
        return _AddressKey(k, _pointer_hash(address))
    if kind == "id":
        return _AddressKey(k, hash(address))
    return None


def _key_of(stand_in):
    return stand_in.key if isinstance(stand_in, _AddressKey) else stand_in


def _guard_identity(tx, var) -> bool:
    """Guard that ``var``'s source is the object the trace saw (its address is in the order)."""
    obj = getattr(var, "value", getattr(var, "fn", None))  # (a real object's tracker, or a function's)
    if obj is None or id(obj) != var.identity_key().ident[1]:
        return False
    tx.output.add_guard(guards.IdGuard(var.source, obj))
    return True


_ALGEBRA = ("union", "intersection", "difference", "symmetric_difference", "__or__", "__and__", "__sub__",
            "__xor__", "issubset", "issuperset", "isdisjoint")
_SHADOW_OP = {"__or__": "union", "__and__": "intersection", "__sub__": "difference", "__xor__": "symmetric_difference"}


def _plain_key(k) -> bool:
    """A set key whose equality is exact and type-free: a str, or an object hashed by identity."""
    return type(k) is str or isinstance(k, IdentityKey)
