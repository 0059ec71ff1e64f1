"""Instances of tuple subclasses (not namedtuples) passed into compiled code.

Where the class leaves ``__getitem__`` / ``__len__`` / ``__iter__`` / ``__contains__`` to tuple,
the trace reads the items with ``tuple.__getitem__`` (each an input at its place, the length
guarded: variables/user_objects.py ``_tuple_items``) instead of breaking; the object itself stays
the user's (its class, attributes and identity).  A class that overrides one of them keeps its own
method.  Each case compares everything observable with eager, over calls that change the items,
the length and the class.
"""
from __future__ import annotations

import pytest
import torch

from dynamo_lite.testing import check_breaks, check_calls


class Pair(tuple):
    pass


def tagged(items, tag):
    t = Pair(items)
    t.tag = tag  # (a tuple subclass without __slots__ has an instance dict)
    return t


class Reversed(tuple):
    def __getitem__(self, i):
        return tuple.__getitem__(self, len(self) - 1 - i)


def index_and_len(t, x):
    return x * t[0] + t[-1] + len(t)


def test_index_and_len_do_not_break():
    check_breaks(index_and_len, Pair((2, 3)), torch.ones(2), breaks=0)


def test_items_length_and_class_changing_between_calls():
    check_calls(index_and_len, [(Pair((2, 3)), torch.ones(2)), (Pair((4, 5, 6)), torch.ones(2)),
                                (Pair((2, 3)), torch.ones(2)), ((7, 8), torch.ones(2)),
                                (Reversed((1, 2)), torch.ones(2))], graphs=None)


def tensors_inside(t):
    a, b = t
    return a @ b, sum(v.sum() for v in t), t[1:]


def test_tensor_items_unpacked_iterated_and_sliced():
    check_calls(tensors_inside, [(Pair((torch.ones(2, 2), torch.eye(2))),),
                                 (Pair((torch.zeros(2, 2), torch.ones(2, 2))),)])


def out_of_range(t, x):
    try:
        return t[5]
    except IndexError as e:
        return x + 1, str(e)


def test_index_out_of_range_raises_index_error():
    check_calls(out_of_range, [(Pair((1, 2)), torch.ones(2))], graphs=None)


def attributes_and_membership(t, x):
    return x * (3 in t), t.tag, type(t).__name__, isinstance(t, tuple)


def test_attributes_and_membership():
    check_calls(attributes_and_membership, [(tagged((1, 3), "a"), torch.ones(2)), (tagged((1, 2), "b"), torch.ones(2))],
                graphs=None)


def plain_tuple_out_of_range(t, x):
    try:
        return t[5]
    except IndexError as e:
        return x - 1, str(e)


def test_a_plain_tuple_index_out_of_range_says_tuple():
    # (the trace keeps a tuple's items in a list: its message was "list index out of range")
    check_calls(plain_tuple_out_of_range, [((1, 2), torch.ones(2))], graphs=None)


@pytest.mark.parametrize("t", [Reversed((1, 2, 3)), Pair(())])
def test_an_override_runs_and_an_empty_one_raises(t):
    def f(t, x):
        return x * t[0]

    check_calls(f, [(t, torch.ones(2))], graphs=None)
