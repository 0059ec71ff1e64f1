"""Randomness (torch / random / numpy) and math / numpy results, eager vs compiled.

Every test compares compiled with eager through dynamo_lite.testing; known bugs are strict
xfails in tests/test_known_bugs.py.
"""
import logging
import math
import random

import numpy as np
import torch

from dynamo_lite.testing import check

log = logging.getLogger("acceptance.model")


class MyError(Exception):
    pass


class CodeError(ValueError):
    def __init__(self, code):
        super().__init__(f"code {code}")
        self.code = code


# ---------------------------------------------------------------- randomness

def test_python_random_consumption_order():
    def f(x):
        a = random.random()
        y = x * a
        b = random.randint(0, 100)
        random.shuffle(lst := [1, 2, 3, 4])
        return y + b, lst, random.choice("abc")

    check(f, torch.ones(2), graphs=None)


def test_torch_rng_interleaved_with_python_random():
    def f(x):
        a = torch.rand(2)
        r = random.random()
        b = torch.randn(2)
        n = torch.randint(0, 5, ()).item()
        return x + a * r + b, n, torch.rand(1)

    check(f, torch.ones(2), graphs=None)


def test_generator_object_and_rng_state_restore():
    def f(x, g):
        a = torch.rand(3, generator=g)
        state = torch.get_rng_state()
        b = torch.rand(3)
        torch.set_rng_state(state)
        c = torch.rand(3)
        return x + a, torch.equal(b, c)

    g = torch.Generator().manual_seed(3)
    check(f, torch.ones(3), g, graphs=None)


def test_numpy_random_consumption():
    def f(x):
        a = np.random.rand()
        b = np.random.randint(0, 10, size=3)
        return x * a, b.tolist()

    check(f, torch.ones(2), graphs=None)


def test_dropout_and_bernoulli_draws_match():
    def f(x):
        return torch.nn.functional.dropout(x, 0.3), torch.bernoulli(torch.full_like(x, 0.5)), x.uniform_(0, 1) + 0

    check(f, torch.ones(50))


def test_randperm_multinomial_normal():
    def f(x):
        return (torch.randperm(6), torch.multinomial(torch.ones(5), 3), torch.normal(0.0, 1.0, (3,)) + x,
                torch.rand_like(x))

    check(f, torch.ones(3))


# ---------------------------------------------------------------- math / numpy

def test_math_functions_on_shapes_and_python_scalars():
    def f(x, k):
        d = x.shape[-1]
        s = 1 / math.sqrt(d)
        return (x * s, math.floor(d / 3), math.isclose(s, 0.5), math.pi * k, math.exp(k), math.gcd(d, 6),
                math.inf > d, math.isnan(float("nan")), math.log(d, 2), math.fsum([0.1] * 3), math.factorial(4))

    check(f, torch.ones(2, 4), 1.5)


def test_numpy_scalars_passed_in():
    def f(x, a, b, c):
        return x * a + b, x.shape[0] * c, type(a).__name__

    check(f, torch.ones(2), np.float32(1.5), np.float64(2.0), np.int64(3), graphs=None)


def test_numpy_array_passed_in_and_converted():
    def f(x, arr):
        t = torch.from_numpy(arr)
        u = torch.as_tensor(arr * 2)
        return x + t, u, arr.shape, arr.sum()

    check(f, torch.ones(3, dtype=torch.float64), np.arange(3, dtype=np.float64), graphs=None)


def test_numpy_array_mutated_by_compiled_function():
    def f(x, arr):
        arr[0] = 99
        arr += 1
        return x * 2

    check(f, torch.ones(2), np.zeros(3), graphs=None)


def test_tensor_to_numpy_and_back():
    def f(x):
        n = x.numpy()
        m = np.tanh(n) * 2
        return torch.from_numpy(m) + 1, float(np.sum(m))

    check(f, torch.randn(3), graphs=None)


def test_float_special_values_and_int_overflow_of_python_math():
    def f(x, a):
        return x * a, a == float("inf"), 2 ** 70 // 3, -7 // 2, -7 % 3, round(-2.5), int(-3.9)

    check(f, torch.ones(2), float("inf"))
