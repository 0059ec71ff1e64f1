"""Randomness (torch / random / numpy) and math / numpy results, eager vs compiled.

Every test compares compiled with eager through dynamo_lite.testing; known bugs are strict
xfails in tests/test_known_bugs.py.
"""
import logging
import math
import random

import numpy as np
import pytest
import torch

import dynamo_lite
from dynamo_lite import graph_breaks as gb
from dynamo_lite.backends import lookup_backend
from dynamo_lite.testing import CompileCounter, check, check_breaks, check_calls, check_module

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


# ---------------------------------------------------------------- Python's random module, replayed
# Calls of the random module are replayed before the graph in eager's order (variables/stdlib.py):
# no break, the same numbers, the same state afterwards (each function returns random.getstate(),
# itself replayed, and check_calls(rng=True) compares the state after every call).

def test_random_draws_are_graph_inputs_without_a_break():
    def f(x):
        return x * random.random() + random.randint(0, 5), random.getstate()

    check_breaks(f, torch.ones(3), breaks=0)
    check_calls(f, [torch.ones(3), torch.ones(3), torch.ones(3)], rng=True, hits=[1, 2], interleave=False)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_random_draws_through_real_backends(backend):
    def f(x):
        return x * random.uniform(1, 2) + random.randint(0, 1), x * random.gauss(0, 1), random.random()

    check_calls(f, [torch.arange(3), torch.arange(3), torch.ones(3, dtype=torch.half)], rng=True,
                interleave=False, backend=CompileCounter(lookup_backend(backend)[0]), warnings=False)


def test_random_uniform_choice_gauss_and_friends():
    def f(x):
        a = random.uniform(1, 2)
        b = random.choice([1, 2, 3])
        c = random.gauss(0, 1)
        d = random.choice("abc")  # an opaque draw: returned as it is
        e = random.randrange(0, 10, 2)
        s = random.sample(range(10), 3)
        return x * a + b * c + e, d, s, random.getstate()

    check_breaks(f, torch.ones(3), breaks=0)


def test_random_seed_getstate_setstate_inside():
    def f(x):
        random.seed(5)
        st = random.getstate()
        a = random.random()
        random.setstate(st)
        b = random.random()
        return x * (a + b), a, b

    check_breaks(f, torch.ones(3), breaks=0)
    check_calls(f, [torch.ones(3), torch.ones(2)], rng=True)


def test_random_object_made_in_the_frame():
    def f(x):
        r = random.Random(3)
        a = r.random()
        n = r.randint(0, 10)
        lst = [r.random() for _ in range(2)]
        return x * a + n, lst, r  # r escapes: rebuilt in its final state

    out = check_breaks(f, torch.ones(3), breaks=0)
    assert out.value[2].random() == f(torch.ones(3))[2].random()


def test_random_object_state_escapes_and_draws_on():
    def f(x):
        r = random.Random("seed")
        r.random()
        return x + 1, r

    check_breaks(f, torch.ones(3), breaks=0)
    eager = f(torch.ones(3))[1]
    comp = dynamo_lite.compile(f, backend="eager")(torch.ones(3))[1]
    assert type(comp) is random.Random and comp.getstate() == eager.getstate()


def test_random_value_that_decides_a_branch_breaks_there():
    def f(x):
        y = x * 2
        if random.random() > 0.5:
            return y + 1
        return y - 1

    check_breaks(f, torch.ones(3), breaks=1)
    check_calls(f, [torch.ones(3)] * 6, rng=True, interleave=False)
    info = dynamo_lite.explain(f)(torch.ones(3))
    assert info.break_reasons[0].break_id == gb.RANDOM_VALUE_NEEDED


def test_random_value_as_an_int_or_index_breaks():
    def f(x):
        n = random.randint(1, 3)
        return x[:n] * 2, [x] * n

    check_breaks(f, torch.arange(5.0), breaks=1)


def test_random_draw_passed_on_to_a_later_call():
    def f(x):
        hi = random.randint(3, 9)
        return x * random.uniform(0, 1), random.getstate(), hi

    check_calls(f, [torch.ones(3)] * 3, rng=True, interleave=False)


def test_random_shuffle_of_a_list_made_in_the_frame_breaks_with_a_reason():
    def f(x):
        lst = [1, 2, 3, 4]
        random.shuffle(lst)
        return x * lst[0], lst

    check_breaks(f, torch.ones(3), breaks=1)
    info = dynamo_lite.explain(f)(torch.ones(3))
    assert info.break_reasons[0].break_id == gb.RANDOM_NOT_REPLAYED


def test_random_draws_then_an_error_in_the_graph():
    # the graph raises (an index only the data shows out of range): the frame is not run again
    # from the start (that would draw again); the error reaches the user's except as in eager
    def f(x, i):
        a = random.random()
        try:
            return x[i] * a
        except IndexError:
            return random.random()

    def g(x, i):
        a = random.random()
        return x[i] * a

    check_calls(f, [(torch.ones(3), torch.tensor([1])), (torch.ones(3), torch.tensor([5]))], rng=True)
    check_calls(g, [(torch.ones(3), torch.tensor([1])), (torch.ones(3), torch.tensor([5]))], rng=True)


def test_random_monkeypatched_function_is_not_replayed(monkeypatch):
    monkeypatch.setattr(random, "random", lambda: 0.25)

    def f(x):
        return x * random.random()

    check(f, torch.ones(3))


class _Augment(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.rng = random.Random(7)

    def forward(self, x):
        return x * self.rng.uniform(0.5, 1.5) + self.rng.randint(0, 3)


def test_random_object_from_outside_the_frame_is_replayed():
    def f(x, rng):
        return x * rng.random() + rng.randint(0, 5), rng.getstate()

    check_breaks(f, torch.ones(3), random.Random(1), breaks=0)
    check_calls(f, [(torch.ones(3), random.Random(1)), (torch.ones(3), random.Random(2))])
    check_module(_Augment, [((torch.ones(3),), {}), ((torch.ones(3),), {}), lambda m: m.rng.getstate()])


def test_random_object_from_outside_undone_before_a_rerun():
    def f(x, i, rng):
        a = rng.random()
        try:
            return x[i] * a
        except IndexError:
            return rng.random()

    check_calls(f, [(torch.ones(3), torch.tensor([1]), random.Random(3)),
                    (torch.ones(3), torch.tensor([5]), random.Random(3))])


def test_random_object_made_in_the_frame_shuffles_a_list():
    def f(x, lst):
        r = random.Random(11)
        made = [x, x * 2, x * 3, 4, "five"]
        r.shuffle(made)
        r.shuffle(lst)  # a list from outside: reordered in place after the graph
        return made, r.random()

    check_breaks(f, torch.ones(3), [1, 2, 3, 4, 5, 6], breaks=0)


def _noise(size, seed):
    """torchsde's ``_randn``: a generator made in the frame, seeded from a numpy integer."""
    generator = torch.Generator("cpu").manual_seed(int(seed))
    return torch.randn(size, generator=generator)


def test_generator_seeded_from_a_numpy_integer_argument_compiles_once():
    seeds = [np.uint32(s) for s in np.random.SeedSequence(7).generate_state(5)] + [np.int64(-3)]
    cnt = check_calls(_noise, [((2, 3), s) for s in seeds], graphs=None, rng=True)
    assert cnt.frame_count == 2  # one entry per seed type: the values are read when the frame runs


def test_numpy_integer_argument_used_in_the_graph_is_guarded_by_value():
    def f(x, seed):
        generator = torch.Generator().manual_seed(int(seed))
        return x * int(seed) + torch.rand(2, generator=generator), int(seed), seed

    cnt = check_calls(f, [(torch.ones(2), np.uint32(s)) for s in (3, 4, 3)], graphs=None, hits=(2,))
    assert cnt.frame_count == 2


@pytest.mark.parametrize("draw", ["binomial", "gamma", "dirichlet", "exponential_", "mha_dropout"])
def test_a_graph_with_a_random_draw_is_not_run_again_when_it_raises(draw):
    # the frame's bytecode runs again when its graph raises, unless the graph drew random numbers:
    # binomial, _standard_gamma, _sample_dirichlet and the dropout of multi-head attention were not
    # known as draws, so the rerun drew again (an index eager found out of range was in range)
    mha = torch.nn.MultiheadAttention(4, 1, dropout=0.5)

    def f(x, idx):
        if draw == "binomial":
            k = torch.binomial(torch.full((1,), 10.0), torch.full((1,), 0.5))
        elif draw == "gamma":
            k = torch._standard_gamma(torch.full((1,), 3.0)) * 3
        elif draw == "dirichlet":
            k = torch._sample_dirichlet(torch.full((2,), 1.0))[:1] * 10
        elif draw == "exponential_":
            k = torch.empty(1).exponential_() * 5
        else:
            k = mha(x[None, None, :4], x[None, None, :4], x[None, None, :4])[0].reshape(-1)[:1].abs() * 10
        return x[k.long().clamp(min=0)] + idx

    for seed in range(6):
        check_calls(f, [(torch.arange(6.0), 1)], seed=seed, rng=True, graphs=None)


def test_the_seeded_ops_are_known_as_draws():
    # every aten op torch tags nondeterministic_seeded (CPU kernels) is in the list of draws
    from dynamo_lite.graph.output_graph import _RANDOM_OPS

    missing = set()
    names = {n.split("::")[1].split(".")[0] for n in torch._C._dispatch_get_all_op_names() if n.startswith("aten::")}
    for name in names:
        packet = getattr(torch.ops.aten, name, None)
        if packet is None or name.startswith(("_cudnn", "miopen", "_flash", "_efficient", "_triton", "_lstm_mps",
                                              "_nested", "_fill_mem_eff", "_fused_sdp")) or "backward" in name \
                or name.endswith("_for_mps"):
            continue
        if any(torch.Tag.nondeterministic_seeded in getattr(packet, o).tags for o in packet.overloads()):
            if name.rstrip("_") not in _RANDOM_OPS:
                missing.add(name)
    assert not missing, sorted(missing)
