"""math / random / numpy state used by compiled code, with graph breaks.

Every test compares compiled with eager through dynamo_lite.testing; known bugs are strict
xfails in tests/test_known_bugs.py.
"""
from __future__ import annotations

import math
import random

import numpy as np
import torch

from dynamo_lite.testing import assert_same_as_eager, check_calls


# ----------------------------------------------------------------------------- helpers

def ones(*shape, **kw):
    return torch.ones(*shape, **kw)


# ----------------------------------------------------------------------------- math / random / numpy

def test_math_in_loop_with_item():
    def f(x):
        s = 0.0
        for i in range(5):
            s += math.sqrt(i) + math.sin(x[i].item())
            x = x * math.pi
        return s, x

    check_calls(f, [torch.rand(5), torch.rand(5)], interleave=False, graphs=None)


def test_python_random_and_torch_rand_in_loop():
    def f(x):
        vals = []
        for i in range(4):
            vals.append(random.random())
            x = x + torch.rand(2)
        return x, vals

    check_calls(f, [ones(2), ones(2)], interleave=False, graphs=None)


def test_numpy_in_loop_with_item():
    def f(x):
        a = np.arange(4.0)
        for i in range(3):
            a = a * 2 + np.float64(x[i].item())
        return torch.from_numpy(a) + x.sum(), a.tolist()

    check_calls(f, [ones(4), torch.arange(4.0)], interleave=False, graphs=None)


def test_numpy_random_in_loop():
    def f(x):
        rs = []
        for i in range(3):
            rs.append(np.random.rand())
            x = x * 2
        return x, rs

    check_calls(f, [ones(1), ones(1)], interleave=False, graphs=None)


def test_sorted_max_with_item_keys():
    def f(x):
        r = [x[i] if x[i] > 0 else -x[i] for i in range(3)]
        return (max(r, key=lambda t: t.item()), min(x.tolist()),
                sorted([x[1], x[0], x[2]], key=lambda t: t.item()),
                [v for v in x.tolist() if v > 0], any(v > 2 for v in x.tolist()))

    check_calls(f, [torch.tensor([-3., 1., 2.]), torch.tensor([3., -1., 0.5])], interleave=False, graphs=None)


def test_assert_same_as_eager_helper_on_loop_with_break():
    def f(x, lst):
        for v in lst:
            print(v)
            x = x * v
            if x.sum() > 20:
                break
        lst.append(int(x.sum().item()))
        return x

    assert_same_as_eager(f, ones(2), [2, 3, 4, 5])
