"""functools (lru_cache, wraps, partial, reduce), copy.copy / deepcopy, id(), hash() and the
identity of functions made in compiled code, eager vs compiled, with the number of graph
breaks torch.compile (2.13) has for the same code (0 unless said otherwise).

Every test compares compiled with eager through dynamo_lite.testing; known bugs are strict
xfails in tests/test_known_bugs.py.
"""
import functools

import torch

from dynamo_lite.testing import check_breaks, check_calls


def t(*vals):
    return torch.tensor([float(v) for v in vals])


X = t(1, 2, 3)


def test_a_nested_function_is_one_object_after_a_break():
    # the function is held by a local and a list when the graph breaks: generated code must
    # build one function object, not one per place that holds it
    def f(x):
        def g(v):
            return v * 2
        held = [g]
        y = x + 1
        print("break")
        return y, held[0] is g, g(y)

    check_breaks(f, X, breaks=1)
