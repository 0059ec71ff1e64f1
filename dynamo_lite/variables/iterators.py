"""Lazy iterators: map, filter, enumerate, zip, reversed(list), user iterators and the iterators
of itertools (chain, zip_longest, starmap, accumulate, count, cycle, islice, ...).

Python's iterators compute nothing when they are created: ``map(f, l)`` calls
``f`` only when an item is asked for, reads ``l`` at that moment (items
appended or replaced after creation are seen), and stops calling ``f`` when
its consumer stops (``any(map(f, xs))``).  The trackers here keep that
contract: each holds the *iterators* of its arguments (made by
the arguments' ``iter`` at creation, as CPython calls ``iter()`` then) and
produces one item per ``next_item`` call (FOR_ITER, ``next()``), reading the
underlying list / dict trackers live and calling the mapped function then.
``unpack`` consumes what is left (``list(m)``, ``sorted(m)``, ``*m``).

Invariants:
- ``next_item`` returns None when exhausted, and never precomputes items.
- An iterator that escapes the trace (a local at a graph break, a return
  value) is rebuilt as the same kind of real iterator over the rebuilt
  argument iterators (``map(f, <list iterator at its position>)``), so Python
  continues it exactly; what cannot be rebuilt makes the frame run eagerly.
All are ``LazyIteratorVariable`` subclasses (sequences.py; FOR_ITER / next() /
len() treat every iterator tracker alike) but hold no precomputed ``items``.
Dict iterators, which read a dict live, are mappings.py's.
Tested by tests/semantics/test_iterators.py and tests/semantics/test_builtin_cases.py.
"""
from __future__ import annotations

import itertools
import operator

from .. import graph_breaks as gb
from ..exc import GraphBreak
from .base import same_object, VariableTracker
from .constant import ConstantVariable
from .sequences import iterate_lazily, LazyIteratorVariable, ListIteratorVariable, TupleVariable


class MapIteratorVariable(LazyIteratorVariable):
    """map(fn, *iterables): calls ``fn`` when an item is asked for."""

    def __init__(self, fn: VariableTracker, iterators: list):
        super().__init__(map)
        self.fn = fn
        self.iterators = iterators

    def next_item(self, tx):
        args = []
        for it in self.iterators:
            item = it.next_item(tx)
            if item is None:
                return None
            args.append(item)
        return self.fn.call_function(tx, args, {})

    def reconstruct(self, cg):
        cg.load_callable(map)
        cg.reconstruct(self.fn)
        for it in self.iterators:
            cg.reconstruct(it)
        cg.call(1 + len(self.iterators))

    def _parts(self):
        return [self.fn, *self.iterators]


class _FunctionOverIterator(LazyIteratorVariable):
    """``kind(fn, iterable)`` (filter, starmap): rebuilt as ``kind(fn, <its iterator>)``."""

    def __init__(self, kind: type, fn: VariableTracker, iterator: VariableTracker):
        super().__init__(kind)
        self.fn = fn
        self.iterator = iterator

    def reconstruct(self, cg):
        cg.load_callable(self.kind)
        cg.reconstruct(self.fn)
        cg.reconstruct(self.iterator)
        cg.call(2)

    def _parts(self):
        return [self.fn, self.iterator]


class FilterIteratorVariable(_FunctionOverIterator):
    """filter(fn_or_None, iterable): tests items when they are asked for."""

    def __init__(self, fn: VariableTracker, iterator: ListIteratorVariable):
        super().__init__(filter, fn, iterator)

    def next_item(self, tx):
        plain = self.fn.is_python_constant() and self.fn.as_python_constant() is None
        while True:
            item = self.iterator.next_item(tx)
            if item is None:
                return None
            if (item if plain else self.fn.call_function(tx, [item], {})).bool(tx):
                return item


class EnumerateIteratorVariable(LazyIteratorVariable):
    """enumerate(iterable, start): (count, item) pairs on demand."""

    def __init__(self, iterator: ListIteratorVariable, start: int):
        super().__init__(enumerate)
        self.iterator = iterator
        self.count = start

    def next_item(self, tx):
        item = self.iterator.next_item(tx)
        if item is None:
            return None
        pair = TupleVariable([ConstantVariable(self.count), item])
        self.count += 1
        return pair

    def reconstruct(self, cg):
        cg.load_callable(enumerate)
        cg.reconstruct(self.iterator)
        cg.load_const(self.count)
        cg.call(2)

    def _parts(self):
        return [self.iterator]


class ZipIteratorVariable(LazyIteratorVariable):
    """zip(*iterables, strict=...): asks each iterator in turn, like CPython (an
    iterator before the first exhausted one has given up an item)."""

    def __init__(self, iterators: list, strict: bool = False):
        super().__init__(zip)
        self.iterators = iterators
        self.strict = strict

    def next_item(self, tx):
        if not self.iterators:
            return None
        items = []
        for i, it in enumerate(self.iterators):
            item = it.next_item(tx)
            if item is None:
                if self.strict:
                    # CPython's check and message: the first shorter one, else the first longer one
                    # (asked in order; the ones after it are not)
                    longer = None if i > 0 else next(
                        (j for j, o in enumerate(self.iterators[1:], 1) if o.next_item(tx) is not None), None)
                    if i > 0 or longer is not None:
                        k = i if i > 0 else longer
                        what = "shorter" if i > 0 else "longer"
                        plural = " " if k == 1 else "s 1-"
                        tx.raise_builtin_exception(ValueError, [ConstantVariable(
                            f"zip() argument {k + 1} is {what} than argument{plural}{k}")])
                return None
            items.append(item)
        return TupleVariable(items)

    def reconstruct(self, cg):
        cg.load_callable(zip)
        for it in self.iterators:
            cg.reconstruct(it)
        if self.strict:
            cg.load_const(True)
            cg.call(len(self.iterators) + 1, ("strict",))
        else:
            cg.call(len(self.iterators))

    def _parts(self):
        return list(self.iterators)


class ListReverseIteratorVariable(LazyIteratorVariable):
    """reversed(list): reads the list live from the end (list_reverseiterator)."""

    def __init__(self, list_var):
        super().__init__(type(reversed([])))
        self.list_var = list_var
        self.index = len(list_var.items) - 1

    def next_item(self, tx):
        items = self.list_var.items
        if 0 <= self.index < len(items):
            item = items[self.index]
            self.index -= 1
            return item
        self.index = -1  # CPython drops the list: exhausted for good
        return None

    def reconstruct(self, cg):
        if self.index >= len(self.list_var.items):
            # the list shrank below the position: a rebuilt iterator would clamp it
            raise GraphBreak(gb.CANNOT_REBUILD, "reversed(list) positioned past the end of its list")
        cg.load_callable(_list_reverse_iterator_at)
        cg.reconstruct(self.list_var)
        cg.load_const(self.index)
        cg.call(2)

    def _parts(self):
        return [self.list_var]


class UserIteratorVariable(LazyIteratorVariable):
    """A user object whose class defines ``__next__`` in Python, used as an iterator (FOR_ITER,
    next(), the argument of zip/map/list...): each item runs its ``__next__`` inlined, and a
    StopIteration raised there (in the trace) ends the iteration.  Everything else about it
    (attributes, identity, type, rebuilding) is the object's."""

    def __init__(self, obj: VariableTracker):
        super().__init__(obj.python_type())
        self.obj = obj

    def describe(self):
        return self.obj.describe()

    def next_item(self, tx):
        # not latched: a user iterator may produce items again after a StopIteration
        return tx.call_until_stop_iteration(lambda: self.obj.call_method(tx, "__next__", [], {}))

    def identity_key(self):
        return self.obj.identity_key()

    def var_getattr(self, tx, name):
        return self.obj.var_getattr(tx, name)

    def call_method(self, tx, name, args, kwargs):
        return self.obj.call_method(tx, name, args, kwargs)

    def setattr(self, tx, name, value):
        return self.obj.setattr(tx, name, value)

    def reconstruct(self, cg):
        cg.reconstruct(self.obj)

    def can_reconstruct(self):
        return self.obj.can_reconstruct()

    def _parts(self):
        return [self.obj]


# ---- itertools --------------------------------------------------------------------------------
# Lazy like the real ones (each item computed when asked for, the argument iterators advanced only
# as far as CPython advances them).  count() is rebuilt exactly; the others hold state a rebuilt
# object cannot be given, so one that must outlive the trace makes the trace stop where it was
# created (``restart_step``, as for generators) and Python makes the real one.

class _MadeInTrace(LazyIteratorVariable):
    def __init__(self, kind: type, tx):
        super().__init__(kind)
        self.created_at_step = tx.root().steps
        self.created_where = tx.user_stack()

    def reconstruct(self, cg):
        brk = GraphBreak(gb.CANNOT_REBUILD, f"itertools.{self.kind.__name__} object outlives the traced code; "
                         "Python makes it")
        brk.restart_step = self.created_at_step
        brk.user_stack = list(self.created_where)
        raise brk

    def can_reconstruct(self):
        return False


class CountIteratorVariable(LazyIteratorVariable):
    """itertools.count(start, step) of constants."""

    def __init__(self, start, step):
        super().__init__(itertools.count)
        self.value = start
        self.step = step

    def next_item(self, tx):
        item = ConstantVariable(self.value)
        self.value = self.value + self.step
        return item

    def reconstruct(self, cg):
        cg.load_callable(itertools.count)
        cg.load_const(self.value)
        cg.load_const(self.step)
        cg.call(2)

    def can_reconstruct(self):
        return True


class CycleIteratorVariable(_MadeInTrace):
    """itertools.cycle(iterable): the first pass saves the items, later passes repeat them."""

    def __init__(self, tx, iterator):
        super().__init__(itertools.cycle, tx)
        self.iterator = iterator
        self.saved: list = []
        self.position = None  # index into saved once the first pass ended

    def next_item(self, tx):
        if self.position is None:
            item = self.iterator.next_item(tx)
            if item is not None:
                self.saved.append(item)
                return item
            self.position = 0
        if not self.saved:
            return None
        item = self.saved[self.position % len(self.saved)]
        self.position += 1
        return item


class IsliceIteratorVariable(_MadeInTrace):
    """itertools.islice(iterable, [start,] stop[, step]) of constants: skips and stops as CPython does
    (it reads ``start`` items, then every ``step``-th, and none past ``stop``)."""

    def __init__(self, tx, iterator, start: int, stop, step: int):
        super().__init__(itertools.islice, tx)
        self.iterator = iterator
        self.next_index = start
        self.stop = stop
        self.step = step
        self.count = 0  # items read from the iterator

    def next_item(self, tx):
        # CPython's islice_next, step by step (the items it skips are read even past ``stop``)
        if self.exhausted:
            return None
        stop = self.stop
        while self.count < self.next_index:
            if self.iterator.next_item(tx) is None:
                self.exhausted = True
                return None
            self.count += 1
        if stop is not None and self.count >= stop:
            self.exhausted = True
            return None
        item = self.iterator.next_item(tx)
        if item is None:
            self.exhausted = True
            return None
        self.count += 1
        self.next_index += self.step
        if stop is not None and self.next_index > stop:
            self.next_index = stop
        return item


class ChainIteratorVariable(LazyIteratorVariable):
    """itertools.chain(*iterables) and chain.from_iterable(iterable): ``iter()`` of each iterable
    is called only when the one before it is exhausted, and items are read one at a time (a
    generator in the chain runs as its items are asked for).  Rebuilt as
    ``chain(<current iterator>, *<iterables not started>)`` (from_iterable:
    ``chain(<current iterator>, chain.from_iterable(<outer iterator>))``)."""

    def __init__(self, iterables: list, outer=None):
        super().__init__(itertools.chain)
        self.iterables = list(iterables)  # not started yet (chain(...)), in order
        self.outer = outer  # the iterator of iterables (from_iterable), or None
        self.current = None  # the iterator being read

    def next_item(self, tx):
        while True:
            if self.current is not None:
                item = self.current.next_item(tx)
                if item is not None:
                    return item
                self.current = None
            if self.outer is not None:
                iterable = self.outer.next_item(tx)
                if iterable is None:
                    self.outer = None
                    return None
            elif self.iterables:
                iterable = self.iterables.pop(0)
            else:
                return None
            self.current = iterable.iter(tx)

    def reconstruct(self, cg):
        cg.load_callable(itertools.chain)
        parts = [self.current] if self.current is not None else []
        for p in parts + self.iterables:
            cg.reconstruct(p)
        if self.outer is not None:
            cg.load_callable(itertools.chain.from_iterable)
            cg.reconstruct(self.outer)
            cg.call(1)
        cg.call(len(parts) + len(self.iterables) + (self.outer is not None))

    def _parts(self):
        return [p for p in (self.current, self.outer) if p is not None] + self.iterables


class ZipLongestIteratorVariable(LazyIteratorVariable):
    """itertools.zip_longest(*iterables, fillvalue=...): an exhausted iterator is not asked again
    (it gives ``fillvalue``); the first call with every iterator exhausted ends it for good.
    Rebuilt with an empty iterator in place of each exhausted one (which a real zip_longest
    also finds exhausted at once, with nothing run)."""

    def __init__(self, iterators: list, fillvalue: VariableTracker):
        super().__init__(itertools.zip_longest)
        self.iterators = iterators
        self.fillvalue = fillvalue
        self.done = [False] * len(iterators)

    def next_item(self, tx):
        if self.exhausted or not self.iterators:
            self.exhausted = True
            return None
        items = []
        for i, it in enumerate(self.iterators):
            item = None if self.done[i] else it.next_item(tx)
            if item is None:
                self.done[i] = True
                if all(self.done):
                    self.exhausted = True
                    return None
                item = self.fillvalue
            items.append(item)
        return TupleVariable(items)

    def reconstruct(self, cg):
        cg.load_callable(itertools.zip_longest)
        for it, done in zip(self.iterators, self.done):
            if done or self.exhausted:
                cg.load_callable(iter)
                cg.load_const(())
                cg.call(1)
            else:
                cg.reconstruct(it)
        cg.reconstruct(self.fillvalue)
        cg.call(len(self.iterators) + 1, ("fillvalue",))

    def _parts(self):
        return [self.fillvalue] + [it for it, done in zip(self.iterators, self.done) if not done]


class StarmapIteratorVariable(_FunctionOverIterator):
    """itertools.starmap(fn, iterable): calls ``fn(*item)`` when an item is asked for."""

    def __init__(self, fn: VariableTracker, iterator: VariableTracker):
        super().__init__(itertools.starmap, fn, iterator)

    def next_item(self, tx):
        item = self.iterator.next_item(tx)
        if item is None:
            return None
        return self.fn.call_function(tx, item.unpack(tx), {})


class AccumulateIteratorVariable(_MadeInTrace):
    """itertools.accumulate(iterable, func=None, *, initial=None): running totals on demand
    (``func`` or ``+`` is applied when an item is asked for)."""

    def __init__(self, tx, iterator, combine, initial):
        super().__init__(itertools.accumulate, tx)
        self.iterator = iterator
        self.combine = combine  # (tx, total, item) -> the next total: func, or ``+``
        self.total = None
        self.pending = initial  # the initial value, given first

    def next_item(self, tx):
        if self.pending is not None:
            self.total, self.pending = self.pending, None
            return self.total
        item = self.iterator.next_item(tx)
        if item is None:
            return None
        self.total = item if self.total is None else self.combine(tx, self.total, item)
        return self.total


class TakewhileIteratorVariable(_MadeInTrace):
    """itertools.takewhile(predicate, iterable)."""

    def __init__(self, tx, fn, iterator):
        super().__init__(itertools.takewhile, tx)
        self.fn = fn
        self.iterator = iterator

    def next_item(self, tx):
        if self.exhausted:
            return None
        item = self.iterator.next_item(tx)
        if item is None:
            return None
        if self.fn.call_function(tx, [item], {}).bool(tx):
            return item
        self.exhausted = True  # CPython latches it
        return None


class DropwhileIteratorVariable(_MadeInTrace):
    """itertools.dropwhile(predicate, iterable)."""

    def __init__(self, tx, fn, iterator):
        super().__init__(itertools.dropwhile, tx)
        self.fn = fn
        self.iterator = iterator
        self.dropping = True

    def next_item(self, tx):
        while True:
            item = self.iterator.next_item(tx)
            if item is None:
                return None
            if not self.dropping:
                return item
            if not self.fn.call_function(tx, [item], {}).bool(tx):
                self.dropping = False
                return item


class PairwiseIteratorVariable(_MadeInTrace):
    """itertools.pairwise(iterable)."""

    def __init__(self, tx, iterator):
        super().__init__(itertools.pairwise, tx)
        self.iterator = iterator
        self.old = None

    def next_item(self, tx):
        if self.exhausted:
            return None
        if self.old is None:
            self.old = self.iterator.next_item(tx)
            if self.old is None:
                self.exhausted = True
                return None
        new = self.iterator.next_item(tx)
        if new is None:
            self.exhausted = True
            self.old = None
            return None
        pair = TupleVariable([self.old, new])
        self.old = new
        return pair


class TeeIteratorVariable(_MadeInTrace):
    """One of the iterators of itertools.tee(iterable, n): they share the items read so far."""

    def __init__(self, tx, shared: dict):
        super().__init__(type(itertools.tee([])[0]), tx)
        self.shared = shared  # {"iterator": ..., "items": [...]}
        self.index = 0

    def next_item(self, tx):
        items = self.shared["items"]
        if self.index == len(items):
            item = self.shared["iterator"].next_item(tx)
            if item is None:
                return None
            items.append(item)
        item = items[self.index]
        self.index += 1
        return item


class FilterfalseIteratorVariable(_MadeInTrace):
    """itertools.filterfalse(predicate_or_None, iterable)."""

    def __init__(self, tx, fn, iterator):
        super().__init__(itertools.filterfalse, tx)
        self.fn = fn
        self.iterator = iterator

    def next_item(self, tx):
        while True:
            item = self.iterator.next_item(tx)
            if item is None:
                return None
            if not (item if self.fn is None else self.fn.call_function(tx, [item], {})).bool(tx):
                return item


class CompressIteratorVariable(_MadeInTrace):
    """itertools.compress(data, selectors): reads one of each per step, as CPython does."""

    def __init__(self, tx, data, selectors):
        super().__init__(itertools.compress, tx)
        self.data = data
        self.selectors = selectors

    def next_item(self, tx):
        while True:
            item = self.data.next_item(tx)
            if item is None:
                return None
            selector = self.selectors.next_item(tx)
            if selector is None:
                return None
            if selector.bool(tx):
                return item


def _equal(tx, a, b) -> bool:
    """``a == b`` as PyObject_RichCompareBool: identity first; GraphBreak if not known."""
    if same_object(a, b):
        return True
    result = VariableTracker.apply_operator(tx, operator.eq, [a, b]).truthiness(tx)
    if result is None:
        raise GraphBreak(gb.VALUE_UNKNOWN, "itertools.groupby() key comparison not known at trace time")
    return result


class GroupbyIteratorVariable(_MadeInTrace):
    """itertools.groupby(iterable, key): CPython's state machine (current key and value, target
    key, the one live grouper), so keys are computed, and items read, exactly when CPython does."""

    def __init__(self, tx, iterator, keyfunc):
        super().__init__(itertools.groupby, tx)
        self.iterator = iterator
        self.keyfunc = keyfunc
        self.currkey = self.currvalue = self.tgtkey = None
        self.currgrouper = None

    def step(self, tx) -> bool:
        value = self.iterator.next_item(tx)
        if value is None:
            return False
        self.currvalue = value
        self.currkey = value if self.keyfunc is None else self.keyfunc.call_function(tx, [value], {})
        return True

    def next_item(self, tx):
        self.currgrouper = None
        while True:
            if self.currkey is None:
                pass
            elif self.tgtkey is None or not _equal(tx, self.tgtkey, self.currkey):
                break
            if not self.step(tx):
                return None
        self.tgtkey = self.currkey
        grouper = GrouperIteratorVariable(tx, self, self.tgtkey)
        self.currgrouper = grouper
        return TupleVariable([self.currkey, grouper])


class GrouperIteratorVariable(_MadeInTrace):
    """A group of itertools.groupby: valid until the groupby advances."""

    def __init__(self, tx, parent: GroupbyIteratorVariable, tgtkey):
        super().__init__(type(next(itertools.groupby([1]))[1]), tx)
        self.parent = parent
        self.tgtkey = tgtkey

    def next_item(self, tx):
        gb_ = self.parent
        if gb_.currgrouper is not self:
            return None
        if gb_.currvalue is None and not gb_.step(tx):
            return None
        if not _equal(tx, self.tgtkey, gb_.currkey):
            return None
        item = gb_.currvalue
        gb_.currvalue = gb_.currkey = None
        return item


def _constants(what: str, *values):
    out = []
    for v in values:
        if v is not None and not v.is_python_constant():
            raise GraphBreak(gb.VALUE_UNKNOWN, f"itertools.{what}() with arguments not known at trace time")
        out.append(None if v is None else v.as_python_constant())
    return out


def _count(tx, start=None, step=None):
    start, step = _constants("count", start, step)
    start, step = 0 if start is None else start, 1 if step is None else step
    if not all(isinstance(v, (int, float, complex)) for v in (start, step)):
        raise GraphBreak(gb.OPERATION_RAISES, "itertools.count() of a non-number (TypeError)")
    return CountIteratorVariable(start, step)


def _cycle(tx, iterable):
    return CycleIteratorVariable(tx, iterable.iter(tx))


def _islice(tx, iterable, *bounds):
    if not 1 <= len(bounds) <= 3:
        raise GraphBreak(gb.BAD_ARGUMENTS, "islice() takes 2 to 4 arguments (TypeError)")
    values = _constants("islice", *bounds)
    try:
        sl = slice(*values) if len(values) > 1 else slice(values[0])
        itertools.islice((), sl.start, sl.stop, sl.step)  # CPython's checks of the bounds
    except (TypeError, ValueError) as e:
        raise GraphBreak(gb.OPERATION_RAISES, f"itertools.islice() raised {type(e).__name__}") from e
    return IsliceIteratorVariable(tx, iterable.iter(tx), sl.start or 0, sl.stop, sl.step or 1)


def _chain(tx, *iterables):
    return ChainIteratorVariable(list(iterables))


def _chain_from_iterable(tx, iterable):
    return ChainIteratorVariable([], outer=iterable.iter(tx))


def _zip_longest(tx, *iterables, fillvalue=None):
    return ZipLongestIteratorVariable([it.iter(tx) for it in iterables],
                                      fillvalue if fillvalue is not None else ConstantVariable(None))


def _starmap(tx, fn, iterable):
    return StarmapIteratorVariable(fn, iterable.iter(tx))


def _takewhile(tx, predicate, iterable):
    return TakewhileIteratorVariable(tx, predicate, iterable.iter(tx))


def _dropwhile(tx, predicate, iterable):
    return DropwhileIteratorVariable(tx, predicate, iterable.iter(tx))


def _pairwise(tx, iterable):
    return PairwiseIteratorVariable(tx, iterable.iter(tx))


def _tee(tx, iterable, n=None):
    (count,) = _constants("tee", n)
    count = 2 if count is None else count
    if type(count) is not int or count < 0:
        raise GraphBreak(gb.OPERATION_RAISES, "itertools.tee() with a bad count")
    shared = {"iterator": iterable.iter(tx), "items": []}
    return TupleVariable([TeeIteratorVariable(tx, shared) for _ in range(count)])


def _filterfalse(tx, predicate, iterable):
    plain = predicate.is_python_constant() and predicate.as_python_constant() is None
    return FilterfalseIteratorVariable(tx, None if plain else predicate, iterable.iter(tx))


def _compress(tx, data, selectors):
    return CompressIteratorVariable(tx, data.iter(tx), selectors.iter(tx))


def _groupby(tx, iterable, key=None):
    keyfunc = None if key is None or (key.is_python_constant() and key.as_python_constant() is None) else key
    return GroupbyIteratorVariable(tx, iterable.iter(tx), keyfunc)


# itertools function -> handler(tx, *args, **kwargs) (registered by builtin.py)
ITERTOOLS_HANDLERS = {itertools.count: _count, itertools.cycle: _cycle, itertools.islice: _islice,
                      itertools.takewhile: _takewhile, itertools.dropwhile: _dropwhile,
                      itertools.pairwise: _pairwise, itertools.tee: _tee, itertools.groupby: _groupby,
                      itertools.filterfalse: _filterfalse, itertools.compress: _compress,
                      itertools.chain: _chain, itertools.chain.from_iterable: _chain_from_iterable,
                      itertools.zip_longest: _zip_longest, itertools.starmap: _starmap}
ITERTOOLS_KEYWORDS = {itertools.count: ("start", "step"), itertools.groupby: ("iterable", "key"),
                      itertools.cycle: (), itertools.takewhile: (), itertools.dropwhile: (),
                      itertools.pairwise: (), itertools.tee: (), itertools.islice: (), itertools.filterfalse: (),
                      itertools.compress: ("data", "selectors"), itertools.chain: (),
                      itertools.chain.from_iterable: (), itertools.zip_longest: ("fillvalue",),
                      itertools.starmap: ()}


def next_of(tx, it: VariableTracker, default: list) -> VariableTracker:
    """``next(it[, default])`` on an iterator tracker: its next item, else the default, else a
    StopIteration raised in the trace (the traced code may catch it)."""
    item = it.next_item(tx)
    if item is not None:
        return item
    if default:
        return default[0]
    tx.raise_builtin_exception(StopIteration, it.stop_iteration_args())


def _list_reverse_iterator_at(lst: list, index: int):
    """reversed(lst) positioned at ``index`` (-1: exhausted), rebuilt by generated code."""
    it = reversed(lst)
    it.__setstate__(index)
    if index < 0:
        next(it, None)  # drop the list, as the exhausted real iterator did
    return it


__all__ = ["MapIteratorVariable", "FilterIteratorVariable", "EnumerateIteratorVariable",
           "ZipIteratorVariable", "ListReverseIteratorVariable", "UserIteratorVariable", "next_of", "iterate_lazily",
           "CountIteratorVariable", "CycleIteratorVariable", "IsliceIteratorVariable", "TakewhileIteratorVariable",
           "DropwhileIteratorVariable", "PairwiseIteratorVariable", "TeeIteratorVariable", "GroupbyIteratorVariable",
           "FilterfalseIteratorVariable", "CompressIteratorVariable", "ChainIteratorVariable",
           "ZipLongestIteratorVariable", "StarmapIteratorVariable", "AccumulateIteratorVariable", "ITERTOOLS_HANDLERS",
           "ITERTOOLS_KEYWORDS"]
