"""Every builtin that makes sense in model code, plus isinstance/issubclass with tuples, unions
and typing aliases, eager vs compiled, with the number of graph breaks torch.compile (2.13)
has for the same code (measured with torch._dynamo.explain; 0 unless said otherwise).

Every test compares compiled with eager through dynamo_lite.testing; known bugs are strict
xfails in tests/test_known_bugs.py.
"""
import collections.abc
import typing

import torch

from dynamo_lite.testing import check_breaks


def t(*vals):
    return torch.tensor([float(v) for v in vals])


X = t(1, 2, 3)


class A:
    pass


class B(A):
    pass


def test_isinstance_and_issubclass_with_tuples_unions_and_typing_aliases():
    def f(x, lst, o):
        checks = (isinstance(lst, list | tuple), isinstance(x, (int, torch.Tensor)), issubclass(bool, int),
                  isinstance(3, int | None), isinstance(o, (A, B)), isinstance(o, A | int),
                  issubclass(type(o), (A, int)), issubclass(B, A | None), isinstance(lst, typing.List),
                  isinstance(lst, typing.Sequence), isinstance(None, type(None)), isinstance(o, object),
                  isinstance(lst, collections.abc.Sequence), isinstance(lst, (collections.abc.Mapping, dict)),
                  isinstance({}, typing.Mapping), issubclass(list, typing.Iterable))
        return x * sum(checks), checks

    check_breaks(f, X, [1], B(), breaks=0)


def test_union_and_generic_alias_values():
    def f(x, o):
        kind = list | tuple
        return x * isinstance(o, kind), kind, int | str, list[int], typing.Optional[int]

    check_breaks(f, X, (1,), breaks=0)
