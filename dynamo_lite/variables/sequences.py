"""Sequences: tuple, list, collections.deque, torch.Size, structseq, slices, and the iterator
trackers' bases.

Immutable sequences (tuple, Size) hold a fixed list of item trackers.  Lists
are mutable: their trackers are mutated in place, and when they came from the
frame's inputs (they have a source) the side-effect log records that the real
list must be updated after the graph runs.  An IndexError of a list / tuple / deque (index out
of range, pop of an empty one) is raised in the trace, with eager's message.  A method a sequence tracker does
not model breaks the graph (DL0003); an operation Python would raise on breaks
(DL0010) so Python raises it.  ``x in seq``, ``list.index`` and ``list.remove``
compare items like CPython (identity, then ``==`` through the operator table
installed on VariableTracker by arith.py).
Sorting (``sort_items``: ``sorted``, ``list.sort``): keys known at trace time are sorted as they are;
other keys (objects with their own ``__lt__``, ``functools.cmp_to_key(cmp)``'s, a
``CmpToKeyVariable``) are sorted by Python's own sort on proxies whose ``<`` is traced, so the
comparisons happen in eager's order; one whose result is not a constant breaks.
Iteration (``iter``): lists are iterated live, other values snapshotted.
``ListIteratorVariable`` (an iterator over items known at trace time) and
``LazyIteratorVariable`` (items on demand) sit here, below mappings.py (dict
iterators) and iterators.py (map, zip, ...), which subclass them.  Named
tuples are instances of user classes (user_objects.py).
Tested by tests/semantics/test_containers.py, tests/semantics/test_builtins.py, tests/semantics/test_iterators.py,
tests/semantics/test_mappings_and_collections.py (deque), tests/semantics/test_builtins_breadth.py and
tests/semantics/test_functools_copy_identity.py (sorting by __lt__ and cmp_to_key).
"""
from __future__ import annotations

import collections
import functools
import operator
from typing import Any, Iterator, Optional

import torch

from .. import graph_breaks as gb
from .. import runtime
from ..exc import GraphBreak, SkipFrame
from .base import same_object, search_items, VariableTracker
from .constant import ConstantVariable, FALSE, NONE
from .methods import ContainerMethodVariable


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
        # (a symbolic int item: the tuple stays a tuple of trackers, not a folded constant)
        return all(i.is_python_constant() and not i.symbolic for i in self.items)

    def as_python_constant(self):
        return self.python_type()([i.as_python_constant() for i in self.items])

    def constant_copy(self):
        if self.is_python_constant():
            return self.as_python_constant()
        return self.python_type()([i.constant_copy() for i in self.items])

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
        except IndexError as e:
            if self.python_type() in (list, tuple):  # "tuple index out of range": raised in the trace
                message = f"{self.python_type().__name__} index out of range"  # (the items are a list)
                self.raise_in_trace(tx, IndexError, [ConstantVariable(message)])
            raise GraphBreak(gb.OPERATION_RAISES, f"{self.python_type().__name__} index raised IndexError") from e
        except (TypeError, AttributeError, ValueError) as e:
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
            if name == "count":  # `item is x or item == x` for each item, like CPython
                count = 0
                for item in self.items:
                    if same_object(item, args[0]) is True:
                        count += 1
                    elif item.is_tensor() or args[0].is_tensor():
                        raise GraphBreak(gb.DATA_DEPENDENT, "count() compares a tensor (depends on tensor data)")
                    elif self.apply_operator(tx, operator.eq, [item, args[0]]).bool(tx):
                        count += 1
                return ConstantVariable(count)
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
        if not any(getattr(i, "symbolic", False) for i in self.items):
            cg.load_const(self.as_python_constant())
            return
        # symbolic sizes (a shape returned or kept once shapes are dynamic): torch.Size of the values
        # the graph returns, so the entry is not specialised on them
        cg.load_callable(torch.Size)
        for i in self.items:
            cg.reconstruct(i)
        cg.emit("BUILD_TUPLE", len(self.items))
        cg.call(1)


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

    def constant_copy(self):
        return [i.constant_copy() for i in self.items]

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
            if args[0] is self or isinstance(args[0], (ListVariable, TupleVariable)):
                items.extend(args[0].unpack(tx))  # copied first (PySequence_Fast): x.extend(x)
                se.mutate(self)
                return NONE
            se.mutate(self)
            for item in iterate_lazily(tx, args[0]):  # each item added before the next is made
                items.append(item)
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
                try:  # on a stand-in: the message eager gives ("pop from empty list", ...)
                    ([None] * len(items)).pop(idx)
                except IndexError as e:
                    self.raise_in_trace(tx, IndexError, [ConstantVariable(str(e))])
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
            # CPython empties the list while it sorts: a key or __lt__ reading it sees [], and a
            # change made to it meanwhile is discarded with a ValueError
            saved = list(items)
            se.mutate(self)
            items.clear()
            try:
                new = sort_items(tx, saved, kwargs)
            except BaseException:
                items[:] = saved
                raise
            if items:
                items[:] = saved
                raise GraphBreak(gb.OPERATION_RAISES, "list modified during sort (ValueError)")
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


class _ReadWhenNeeded:
    """Items of a container read from outside, read (and guarded) when the trace first needs
    them: ``_realize()`` gives the entry contents, ``_apply_pending()`` adds what was recorded
    before.  Until then ``realized`` is False and describing the container reads nothing."""

    _items = None
    _realize = None

    def _read_later(self, realize) -> None:
        """Called at the end of __init__ (the base classes set empty items)."""
        self._items = None
        self._realize = realize

    @property
    def items(self):
        if self._items is None and self._realize is not None:
            self._items = self._realize()
            self._apply_pending()
        return self._items

    @items.setter
    def items(self, value):
        self._items = value

    @property
    def realized(self) -> bool:
        return self._items is not None

    def _repr_body(self):
        if not self.realized:
            return "<entry items>, ..."
        return super()._repr_body()


class InputListVariable(_ReadWhenNeeded, ListVariable):
    """A list the frame reads from outside (an argument, a global, an attribute, a loop body's
    local): its length and items are read, and guarded, when the trace first needs them.

    Until then ``append`` only records the new items (``appended``), replayed after the graph as
    ``real.extend(...)``: code that collects results (``outs.append(f(x))``, in a loop whose body
    is a function of its own or a resume function called once per iteration) does not depend on
    how long the list already is, and is not compiled again for each length.  Any other use reads
    ``items`` (the entry contents, then the appends), which guards the length and the items as an
    eagerly wrapped list would.
    """

    def __init__(self, source, realize):
        super().__init__([], source)
        self._read_later(realize)
        self.appended: list = []

    def _apply_pending(self):
        self._items += self.appended
        self.appended = []

    def call_method(self, tx, name, args, kwargs):
        if name == "append" and len(args) == 1 and not kwargs and not self.realized:
            tx.output.side_effects.mutate(self)
            self.appended.append(args[0])
            return NONE
        return super().call_method(tx, name, args, kwargs)


# the exact list trackers (a list made in the trace, a list read from outside); their subclasses
# model other types
LIST_TRACKERS = (ListVariable, InputListVariable)


def _list_index(v: VariableTracker, method: str) -> int:
    """A list method's index argument (a constant) as an int; TypeError breaks (Python raises it)."""
    try:
        return operator.index(v.as_python_constant())
    except TypeError as e:
        raise GraphBreak(gb.OPERATION_RAISES, f"list.{method}() index: {e} (TypeError)") from e


def sort_items(tx, items, kwargs):
    key = kwargs.get("key")
    reverse = kwargs.get("reverse", FALSE).as_python_constant()
    if isinstance(key, CmpToKeyVariable):  # key=functools.cmp_to_key(cmp): Python's sort calls cmp, traced
        order = sorted(range(len(items)), key=lambda i: _TracedCmpKey(tx, key.cmp, items[i]), reverse=reverse)
        return [items[i] for i in order]
    if key is not None and not (key.is_python_constant() and key.as_python_constant() is None):
        keys = [key.call_function(tx, [i], {}) for i in items]
    else:
        keys = items
    if not all(k.is_python_constant() for k in keys):
        # objects ordered by their own __lt__ (or cmp_to_key's keys): Python's sort runs on proxies
        # whose `<` is traced, so the comparisons happen in eager's order; each must be a constant
        order = sorted(range(len(items)), key=lambda i: _TracedSortKey(tx, keys[i]), reverse=reverse)
        return [items[i] for i in order]
    try:
        order = sorted(range(len(items)), key=lambda i: keys[i].as_python_constant(), reverse=reverse)
    except TypeError as e:  # unorderable values: Python raises it at the call
        raise GraphBreak(gb.OPERATION_RAISES, f"sorting raised TypeError: {e}") from e
    return [items[i] for i in order]


class CmpToKeyVariable(VariableTracker):
    """``functools.cmp_to_key(cmp)`` made in the trace: used as a sort key (``sorted``,
    ``list.sort``); called on its own (a key object compared by hand) it breaks.

    Attributes:
        cmp: the tracker of the comparison function.
    """

    def __init__(self, cmp: VariableTracker):
        super().__init__()
        self.cmp = cmp

    def describe(self):
        return f"functools.cmp_to_key({self.cmp.describe()})"

    def python_type(self):
        return type(functools.cmp_to_key(operator.lt))

    def call_function(self, tx, args, kwargs):
        raise GraphBreak(gb.UNSUPPORTED_CALL, f"a key object of {self.describe()} outside sorted()/list.sort()")

    def reconstruct(self, cg):
        cg.load_callable(functools.cmp_to_key)
        cg.reconstruct(self.cmp)
        cg.call(1)

    def can_reconstruct(self):
        return self.cmp.can_reconstruct()


class _TracedCmpKey:
    """cmp_to_key's key object for the sort: ``a < b`` is ``cmp(a, b) < 0``, both traced."""

    __slots__ = ("tx", "cmp", "var")

    def __init__(self, tx, cmp: VariableTracker, var: VariableTracker):
        self.tx = tx
        self.cmp = cmp
        self.var = var

    def __lt__(self, other: "_TracedCmpKey") -> bool:
        order = self.cmp.call_function(self.tx, [self.var, other.var], {})
        result = VariableTracker.apply_operator(self.tx, operator.lt, [order, ConstantVariable(0)])
        if not result.is_python_constant():
            raise GraphBreak(gb.VALUE_UNKNOWN, f"sorting by {self.cmp.describe()}, whose result is not known at trace time")
        return bool(result.as_python_constant())


class _TracedSortKey:
    """A sort key whose ``<`` (the only comparison list.sort makes) is the traced ``<`` of its tracker."""

    __slots__ = ("tx", "var")

    def __init__(self, tx, var: VariableTracker):
        self.tx = tx
        self.var = var

    def __lt__(self, other: "_TracedSortKey") -> bool:
        result = VariableTracker.apply_operator(self.tx, operator.lt, [self.var, other.var])
        if not result.is_python_constant():
            raise GraphBreak(gb.VALUE_UNKNOWN, f"sorting by `<` of {self.var.describe()} and {other.var.describe()}, "
                             "whose result is not known at trace time")
        return bool(result.as_python_constant())


class DequeVariable(BaseListVariable):
    """A collections.deque, mutated in place (input deques are rebuilt after the graph by
    ``clear()`` + ``extend()``, graph/side_effects.py).

    Attributes:
        maxlen: the deque's maxlen (an int or None); appends past it drop items from the other end.
        mutations: bumped by every change, as CPython's deque counts its state: an iterator made
            before a change sees it and Python raises "deque mutated during iteration".
    """

    def __init__(self, items, maxlen=None, source=None):
        super().__init__(items, source)
        self.maxlen = maxlen
        self.mutable_local = source is None
        self.mutations = 0
        self._trim(right=True)

    def python_type(self):
        return collections.deque

    def describe(self):
        return "deque"

    def is_python_constant(self):
        return False

    def constant_copy(self):
        return collections.deque([i.constant_copy() for i in self.items], self.maxlen)

    def _trim(self, right: bool) -> None:
        """Drop items past maxlen: from the left after right-side adds, else from the right."""
        if self.maxlen is not None and len(self.items) > self.maxlen:
            extra = len(self.items) - self.maxlen
            self.items[:] = self.items[extra:] if right else self.items[:self.maxlen]

    def _changed(self, tx) -> None:
        tx.output.side_effects.mutate(self)
        self.mutations += 1

    def iter(self, tx):
        return DequeIteratorVariable(self)

    def var_getattr(self, tx, name):
        if name == "maxlen":
            return ConstantVariable(self.maxlen)
        return super().var_getattr(tx, name)

    def call_method(self, tx, name, args, kwargs):
        items = self.items
        if kwargs:
            raise GraphBreak(gb.OPERATION_RAISES, f"deque.{name}() with keyword arguments")
        if name in ("append", "appendleft") and len(args) == 1:
            self._changed(tx)
            if name == "append":
                items.append(args[0])
            else:
                items.insert(0, args[0])
            self._trim(right=name == "append")
            return NONE
        if name in ("extend", "extendleft") and len(args) == 1:
            # one at a time, as deque does (maxlen applies to each; a generator reading the deque
            # sees the items added so far); deque.extend(itself) iterates a copy
            new = args[0].unpack(tx) if args[0] is self else iterate_lazily(tx, args[0])
            self._changed(tx)
            for item in new:
                if name == "extend":
                    items.append(item)
                else:
                    items.insert(0, item)
                self._trim(right=name == "extend")
            return NONE
        if name in ("pop", "popleft") and not args:
            if not items:
                self.raise_in_trace(tx, IndexError, [ConstantVariable("pop from an empty deque")])
            self._changed(tx)
            return items.pop() if name == "pop" else items.pop(0)
        if name == "rotate" and len(args) <= 1:
            n = args[0].as_python_constant() if args else 1
            if type(n) is not int:
                raise GraphBreak(gb.VALUE_UNKNOWN, "deque.rotate() by a count not known at trace time")
            self._changed(tx)
            if items:
                n %= len(items)
                items[:] = items[-n:] + items[:-n] if n else items
            return NONE
        if name == "clear" and not args:
            self._changed(tx)
            items.clear()
            return NONE
        if name == "reverse" and not args:
            self._changed(tx)
            items.reverse()
            return NONE
        if name == "copy" and not args:
            return DequeVariable(list(items), self.maxlen)
        if name == "__len__" and not args:
            return ConstantVariable(len(items))
        if name == "__getitem__" and len(args) == 1 and args[0].is_python_constant() and \
                type(args[0].as_python_constant()) is int:
            i = args[0].as_python_constant()
            if not -len(items) <= i < len(items):
                self.raise_in_trace(tx, IndexError, [ConstantVariable("deque index out of range")])
            return items[i]
        if name in ("__contains__", "index", "count"):
            return super().call_method(tx, name, args, kwargs)
        raise GraphBreak(gb.UNSUPPORTED_CALL, f"deque.{name}() is not supported here")

    def lookup(self, tx, index):
        return self.call_method(tx, "__getitem__", [index], {})

    def reconstruct(self, cg):
        if self.source is not None:
            return VariableTracker.reconstruct(self, cg)
        cg.load_callable(collections.deque)
        for item in self.items:
            cg.reconstruct(item)
        cg.emit("BUILD_LIST", len(self.items))
        cg.load_const(self.maxlen)
        cg.call(2)


class InputDequeVariable(_ReadWhenNeeded, DequeVariable):
    """A deque the frame reads from outside, wrapped lazily as InputListVariable is (its maxlen is
    guarded at once): ``append``/``appendleft`` on a deque never read are recorded (``pending``)
    and replayed as ``extend``/``extendleft`` of the same items, in order, on the real deque,
    which drops what its maxlen drops.  A rolling buffer (``self.recent.append(x)``) is not
    compiled again for each length it goes through."""

    def __init__(self, maxlen, source, realize):
        super().__init__([], maxlen, source)
        self._read_later(realize)
        self.pending: list = []  # ("append" | "appendleft", item), in order

    def _apply_pending(self):
        pending, self.pending = self.pending, []
        for name, item in pending:
            self._items.append(item) if name == "append" else self._items.insert(0, item)
            self._trim(right=name == "append")

    def call_method(self, tx, name, args, kwargs):
        if name in ("append", "appendleft") and len(args) == 1 and not kwargs and not self.realized:
            self._changed(tx)
            self.pending.append((name, args[0]))
            return NONE
        return super().call_method(tx, name, args, kwargs)


_RANGE_ITERATOR = type(iter(range(0)))


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

    def constant_copy(self):
        return iter([i.constant_copy() for i in self.items[self.index:]])

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
        if self.kind is _RANGE_ITERATOR and all(i.is_python_constant() and type(i.as_python_constant()) is int
                                                for i in rest):
            # the rest of a range's iterator: iter(range(...)) over the same ints
            values = [i.as_python_constant() for i in rest]
            step = values[1] - values[0] if len(values) > 1 else 1
            if step != 0 and all(b - a == step for a, b in zip(values, values[1:])):
                start = values[0] if values else 0
                cg.load_callable(iter)
                cg.load_const(range(start, start + step * len(values), step))
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


class LazyIteratorVariable(ListIteratorVariable):
    """Base of iterators that produce their items on demand.

    Attributes:
        kind: the real iterator type (map, filter, ...) this tracker stands for.
        exhausted: True once ``next_item`` returned None and the real iterator
            would stay exhausted (only where CPython latches it).
    """

    mutable_local = True  # one real iterator: rebuilt once, shared by every holder

    def __init__(self, kind: type):
        VariableTracker.__init__(self)
        self.kind = kind
        self.index = 0
        self.exhausted = False

    @property
    def items(self):  # noqa: D401 - guard against code that reads a precomputed item list
        raise AttributeError(f"{type(self).__name__} has no precomputed items")

    def python_type(self):
        return self.kind

    def describe(self):
        return f"{self.kind.__name__} object"

    def next_item(self, tx) -> Optional[VariableTracker]:
        raise NotImplementedError

    def constant_copy(self):  # its items are computed on demand (folding.materialize first)
        return VariableTracker.constant_copy(self)

    def unpack(self, tx):
        out = []
        while True:
            item = self.next_item(tx)
            if item is None:
                return out
            out.append(item)

    def can_reconstruct(self):
        return all(v.can_reconstruct() for v in self._parts())

    def _parts(self) -> list:
        return []


class SliceVariable(VariableTracker):
    """slice(a, b, c) where some part is not a constant (e.g. a tensor, or a symbolic int: a
    tensor indexed with it keeps it symbolic; anything else specialises it to a constant)."""

    def __init__(self, parts):
        super().__init__()
        self.parts = parts

    def python_type(self):
        return slice

    @property
    def symbolic(self):
        return any(p.symbolic for p in self.parts)

    def is_python_constant(self):
        return all(p.is_python_constant() for p in self.parts)

    def as_python_constant(self):
        return slice(*[p.as_python_constant() for p in self.parts])

    def reconstruct(self, cg):
        for p in self.parts:
            cg.reconstruct(p)
        cg.emit("BUILD_SLICE", len(self.parts))

    def can_reconstruct(self):
        return all(p.can_reconstruct() for p in self.parts)


def iterate_lazily(tx, obj: VariableTracker) -> Iterator[VariableTracker]:
    """The items of ``obj`` one at a time, for consumers that may stop early (any/all) or that
    add each item somewhere before the next is asked for (list.extend, set.update, dict.update
    of a generator that reads what it extends): an iterator tracker is advanced only as far
    as the consumer goes."""
    if isinstance(obj, ListIteratorVariable):
        while True:
            item = obj.next_item(tx)
            if item is None:
                return
            yield item
    else:
        yield from obj.unpack(tx)


VariableTracker.snapshot_iterator = staticmethod(ListIteratorVariable)  # see VariableTracker.iter


class DequeIteratorVariable(ListIteratorVariable):
    """iter(deque): reads the deque live; a change of the deque after it was made runs the frame
    in Python (CPython raises RuntimeError at the next item)."""

    def __init__(self, deque_var: DequeVariable):
        super().__init__(deque_var.items, kind=type(iter(collections.deque())))
        self.deque_var = deque_var
        self.start = deque_var.mutations

    def _mutated(self) -> bool:
        return self.deque_var.mutations != self.start

    def next_item(self, tx):
        if self._mutated():
            raise SkipFrame(gb.OPERATION_RAISES, "deque mutated during iteration", permanent=False)
        return super().next_item(tx)

    def reconstruct(self, cg):
        if self._mutated():
            raise SkipFrame(gb.CANNOT_REBUILD, "an iterator over a deque, which changed")
        cg.load_callable(_deque_iterator_at)
        cg.reconstruct(self.deque_var)
        cg.load_const(self.index)
        cg.call(2)

    def can_reconstruct(self):
        return self.deque_var.can_reconstruct()


def _deque_iterator_at(d, index: int):
    """iter(d) advanced by ``index`` items (rebuilt by generated code)."""
    it = iter(d)
    for _ in range(index):
        next(it, None)
    return it
