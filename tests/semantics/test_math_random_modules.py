"""The math, numpy and random modules called from compiled code, eager vs compiled.

Every test compares compiled with eager through dynamo_lite.testing; known bugs are strict
xfails in tests/test_known_bugs.py.
"""
import math
import random

import numpy as np
import pytest
import torch

import dynamo_lite
from dynamo_lite.testing import assert_same, check, check_calls


def t(*vals):
    return torch.tensor([float(v) for v in vals])


X1, X2 = (t(1, 2, 3),), (t(-4, 5, 0.5, 2),)


# ---------------------------------------------------------------- math / numpy

def test_math_on_shapes():
    def f(x):
        n = x.numel()
        s = math.sqrt(n)
        return (x.reshape(-1) * s, math.prod(x.shape), math.ceil(n / 4), math.floor(s),
                math.log2(x.shape[-1]), math.isclose(s, 2.0), math.gcd(*x.shape), math.inf > n,
                math.factorial(x.dim()), math.isqrt(n))

    check_calls(f, [(torch.zeros(2, 2),), (torch.zeros(3, 4),), (torch.zeros(8),)])


def test_math_on_tensor_item():
    def f(x):
        v = x.sum().item()
        return x * math.exp(v / 10), math.copysign(1.0, v), round(v, 1), math.trunc(v)

    check_calls(f, [X1, X2])


def test_numpy_scalar_mixed_with_tensor():
    def f(x):
        a = np.float32(2.5)
        b = np.int64(3)
        n = np.prod(x.shape)
        return x * float(a), x + int(b), int(n), np.sqrt(16.0) * 2, type(n).__name__

    check_calls(f, [(torch.zeros(2, 3),), (torch.zeros(5),)])


def test_numpy_scalar_times_tensor_directly():
    def f(x):
        return x * np.float64(2.0), np.int64(2) * x

    check_calls(f, [X1, X2], graphs=None)


def test_numpy_array_result_from_tensor():
    def f(x):
        a = x.numpy()
        m = a.mean()
        return x - float(m), a.shape, round(float(a.sum()), 4)

    check_calls(f, [X1, X2], graphs=None)


# ---------------------------------------------------------------- random module

def _run_random(fn, *args):
    random.seed(123)
    r = fn(*args)
    return r, random.random()


def test_random_inside_compiled_same_results_and_state():
    def f(x):
        a = random.random()
        b = random.randint(0, 10)
        return x * a + b, a, b

    cfn = dynamo_lite.compile(f, backend="eager")
    for args in (X1, X2):
        e = _run_random(f, *args)
        c = _run_random(cfn, *args)
        assert_same(e, c)


def test_random_seed_inside_compiled():
    def f(x):
        random.seed(x.shape[0])
        v = [random.random() for _ in range(3)]
        return x * v[0], v

    cfn = dynamo_lite.compile(f, backend="eager")
    for args in (X1, X2, X1):
        e = _run_random(f, *args)
        c = _run_random(cfn, *args)
        assert_same(e, c)


def test_random_choice_shuffle_with_break():
    def f(x, lst):
        random.shuffle(lst)
        print("shuffled")
        c = random.choice(lst)
        return x * c, lst

    cfn = dynamo_lite.compile(f, backend="eager")
    for args in ((X1[0], [1, 2, 3, 4]), (X2[0], [5, 6])):
        e = _run_random(f, args[0], list(args[1]))
        c = _run_random(cfn, args[0], list(args[1]))
        assert_same(e, c)


def test_random_called_twice_not_constant_folded():
    def f(x):
        return x * random.random()

    cfn = dynamo_lite.compile(f, backend="eager")
    random.seed(1)
    e = [f(X1[0]) for _ in range(3)]
    random.seed(1)
    c = [cfn(X1[0]) for _ in range(3)]
    assert_same(e, c)


def test_random_state_getstate_setstate():
    def f(x):
        st = random.getstate()
        a = random.random()
        random.setstate(st)
        b = random.random()
        return x * a, a == b

    cfn = dynamo_lite.compile(f, backend="eager")
    e = _run_random(f, X1[0])
    c = _run_random(cfn, X1[0])
    assert_same(e, c)


@pytest.mark.parametrize("n", [np.int64(0), np.int64(3), np.float32(0.0)])
def test_numpy_scalars_compare_with_python_numbers_as_in_eager(n):
    """np.int64(0) == 0 is True (numpy's own __eq__), never an identity comparison."""
    def f(x, n):
        return x + 1, n == 0, n != 0, 0 in (n, np.int64(2)), [n].count(0)

    check(f, torch.ones(2), n)
