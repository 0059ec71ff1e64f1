"""Lazy iterators: map, filter, enumerate, zip and reversed(list).

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

from typing import Iterator

from .. import graph_breaks as gb
from ..exc import GraphBreak
from .base import VariableTracker
from .constant import ConstantVariable
from .sequences import LazyIteratorVariable, ListIteratorVariable, TupleVariable


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


class FilterIteratorVariable(LazyIteratorVariable):
    """filter(fn_or_None, iterable): tests items when they are asked for."""

    def __init__(self, fn: VariableTracker, iterator: ListIteratorVariable):
        super().__init__(filter)
        self.fn = fn
        self.iterator = iterator

    def next_item(self, tx):
        plain = self.fn.is_python_constant() and self.fn.as_python_constant() is None
        while True:
            item = self.iterator.next_item(tx)
            if item is None:
                return None
            if (item if plain else self.fn.call_function(tx, [item], {})).bool(tx):
                return item

    def reconstruct(self, cg):
        cg.load_callable(filter)
        cg.reconstruct(self.fn)
        cg.reconstruct(self.iterator)
        cg.call(2)

    def _parts(self):
        return [self.fn, self.iterator]


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
                if self.strict and (i > 0 or any(o.next_item(tx) is not None for o in self.iterators[1:])):
                    # Python raises the ValueError when this zip (rebuilt strict) is asked again
                    raise GraphBreak(gb.OPERATION_RAISES, "zip(strict=True) over iterables of different lengths (ValueError)")
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


def _list_reverse_iterator_at(lst: list, index: int):
    """reversed(lst) positioned at ``index`` (-1: exhausted), rebuilt by generated code."""
    it = reversed(lst)
    it.__setstate__(index)
    if index < 0:
        next(it, None)  # drop the list, as the exhausted real iterator did
    return it


def iterate_lazily(tx, obj: VariableTracker) -> Iterator[VariableTracker]:
    """The items of ``obj`` one at a time, for consumers that may stop early (any/all):
    an iterator tracker is advanced only as far as the consumer goes."""
    if isinstance(obj, ListIteratorVariable):
        while True:
            item = obj.next_item(tx)
            if item is None:
                return
            yield item
    else:
        yield from obj.unpack(tx)


__all__ = ["MapIteratorVariable", "FilterIteratorVariable", "EnumerateIteratorVariable",
           "ZipIteratorVariable", "ListReverseIteratorVariable", "iterate_lazily"]
