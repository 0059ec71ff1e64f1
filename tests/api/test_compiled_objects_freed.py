"""Compiling does not keep a user's objects alive: once the user drops a compiled model (or a
function, or an argument the graph was specialised on), it is freed as it is eagerly, without
``dynamo_lite.reset()``; and the entries that relied on it stop counting against the cache limit.

(Guards hold what they compare by identity weakly: tests/unit/test_guard_weak_refs.py.  The cases
follow PyTorch's test_misc.py: test_custom_module_free, test_sequential_module_free,
test_parameter_free, test_outside_linear_module_free.)
"""
from __future__ import annotations

import gc
import weakref

import pytest
import torch
from torch import nn

import dynamo_lite
from dynamo_lite import config
from dynamo_lite.testing import CompileCounter


class WithChild(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        return self.fc(x).relu()


class WithParameter(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(16, 16))

    def forward(self, x):
        return x @ self.w


def _sequential():
    return nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 16))


BUILDERS = {
    "submodule": (WithChild, lambda m: m.fc),
    "sequential": (_sequential, lambda m: m[0]),
    "parameter": (WithParameter, lambda m: m.w),
    "model": (WithChild, lambda m: m),
}


@pytest.fixture(autouse=True)
def _fresh():
    dynamo_lite.reset()
    yield
    dynamo_lite.reset()


@pytest.mark.parametrize("how", ["compile", "decorate_forward", "context"])
@pytest.mark.parametrize("what", sorted(BUILDERS))
def test_a_dropped_model_is_freed(what, how):
    build, part = BUILDERS[what]
    x = torch.randn(4, 16)
    freed = []

    def run():
        m = build()
        weakref.finalize(part(m), freed.append, True)
        expected = m(x)
        if how == "compile":
            got = dynamo_lite.compile(m, backend="eager")(x)
        elif how == "decorate_forward":
            got = dynamo_lite.compile(m.forward, backend="eager")(x)
        else:
            with dynamo_lite.optimize("eager"):
                got = m(x)
        torch.testing.assert_close(got, expected)

    run()
    gc.collect()
    assert freed == [True]


def test_a_linear_made_outside_and_called_in_a_compiled_function_is_freed():
    freed = []

    def run():
        lin = nn.Linear(8, 8)
        weakref.finalize(lin, freed.append, True)

        @dynamo_lite.compile(backend="eager")
        def f(x):
            return lin(x) * 2

        torch.testing.assert_close(f(torch.ones(2, 8)), lin(torch.ones(2, 8)) * 2)

    run()
    gc.collect()
    assert freed == [True]


def test_a_callback_argument_is_freed_after_the_call():
    """A function passed as an argument is guarded by identity; the caller's lambda dies."""

    @dynamo_lite.compile(backend="eager")
    def apply(fn, x):
        return fn(x) + 1

    freed = []
    for scale in range(3):
        fn = (lambda k: (lambda t: t * k))(scale)
        weakref.finalize(fn, freed.append, scale)
        torch.testing.assert_close(apply(fn, torch.ones(3)), torch.ones(3) * scale + 1)
        del fn
        gc.collect()
    assert freed == [0, 1, 2]


def test_models_rebuilt_one_after_another_stay_compiled_and_are_freed(monkeypatch):
    """A notebook or a test suite builds a model, runs it, drops it, builds the next: entries of
    dead models do not fill the cache (no fallback to eager at the limit) and no model stays
    alive."""
    monkeypatch.setattr(config, "cache_size_limit", 2)
    compiled, runs = [], []

    def backend(gm, example_inputs):
        compiled.append(gm)

        def run(*args):
            runs.append(1)
            return gm(*args)
        return run

    alive = weakref.WeakSet()
    x = torch.randn(4, 16)
    for i in range(6):
        torch.manual_seed(i)
        m = WithChild()
        alive.add(m.fc)
        expected = m(x)
        torch.testing.assert_close(dynamo_lite.compile(m, backend=backend)(x), expected)
        del m
        gc.collect()
        assert len(alive) == 0
    assert len(runs) == 6  # every call ran a captured graph
    assert 1 <= len(compiled) <= 6


def test_an_object_made_anew_for_every_call_does_not_recompile_forever():
    """An argument guarded by identity that dies after each call (here a class made per call)
    drops its entry every time: the dropped entries count toward the cache limit, so the frame
    stops compiling (as when the entries kept it alive) instead of compiling on every call."""
    from dynamo_lite.report import events

    def f(cls, x):
        return x * cls.k

    counter = CompileCounter()
    cf = dynamo_lite.compile(f, backend=counter)
    seen: list = []
    with events.collecting(seen.append):
        for _ in range(3 * config.cache_size_limit):
            made = type("Made", (), {"k": 3})
            torch.testing.assert_close(cf(made, torch.ones(2)), f(made, torch.ones(2)))
            del made
            gc.collect()
    assert counter.frame_count <= config.cache_size_limit
    limits = [e for e in seen if isinstance(e, events.CacheLimitEvent)]
    assert limits and "died between calls" in limits[0].reasons[0]
