"""Helpers shared by the acceptance suite (tests/test_acceptance_*.py); holds no tests.

The acceptance tests are written the way an outside PyTorch user would test
dynamo_lite: run a function eagerly and compiled from identical starting
states and compare everything observable.

    check(fn, *args, **kwargs)       one call each way; compares return value or
                                     exception (type + message), stdout, warnings
                                     (category, message, file, line), records of the
                                     "acceptance" logger, mutated arguments, .grad of
                                     every tensor argument (after an optional backward),
                                     grad mode and any ``snapshot()`` state
    check_calls(fn, [args, ...])     several calls of one compiled function (caching,
                                     recompiles) against the same calls eagerly
    check_module(factory, steps)     two modules from the same seed, one compiled;
                                     each step runs on both; compares results, state_dict,
                                     parameter grads and ``attrs``

Every run starts from the same RNG state (torch, random, numpy) and, when
``reset`` is given, from the same global state: a test that mutates globals
passes ``reset`` so the eager run cannot leak into the compiled one.
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import io
import logging
import os
import random
import warnings
from typing import Any, Callable, Optional

import numpy as np
import torch

import dynamo_lite
from dynamo_lite.testing import CompileCounter, assert_same

SEED = 1234
LOG = logging.getLogger("acceptance")


def seed_all(seed: int = SEED) -> None:
    torch.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed)


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records: list = []

    def emit(self, record):
        self.records.append((record.name, record.levelname, record.getMessage()))


@contextlib.contextmanager
def _capture_logs():
    handler = _Records()
    old_level, old_prop = LOG.level, LOG.propagate
    LOG.addHandler(handler)
    LOG.setLevel(logging.DEBUG)
    LOG.propagate = False
    try:
        yield handler.records
    finally:
        LOG.removeHandler(handler)
        LOG.setLevel(old_level)
        LOG.propagate = old_prop


@dataclasses.dataclass
class Observed:
    value: Any = None
    exception: Optional[BaseException] = None
    stdout: str = ""
    warnings: list = dataclasses.field(default_factory=list)
    logs: list = dataclasses.field(default_factory=list)
    args: Any = None
    grads: list = dataclasses.field(default_factory=list)
    grad_enabled: bool = True
    state: Any = None


def _tensors(obj, out, seen):
    if id(obj) in seen:
        return out
    seen.add(id(obj))
    if isinstance(obj, torch.Tensor):
        out.append(obj)
    elif isinstance(obj, torch.nn.Module):
        out.extend(obj.parameters())
    elif isinstance(obj, dict):
        for v in obj.values():
            _tensors(v, out, seen)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _tensors(v, out, seen)
    return out


def _grads(obj) -> list:
    return [None if t.grad is None else t.grad.detach().clone() for t in _tensors(obj, [], set())]


def _call(fn, args, kwargs, *, backward, reset, snapshot) -> Observed:
    out = Observed()
    if reset is not None:
        reset()
    seed_all()
    grad = torch.is_grad_enabled()
    buf = io.StringIO()
    with warnings.catch_warnings(record=True) as w, _capture_logs() as logs, contextlib.redirect_stdout(buf):
        warnings.simplefilter("always")
        try:
            out.value = fn(*args, **kwargs)
            if backward:
                loss = sum(t.sum() for t in _tensors(out.value, [], set()) if t.requires_grad)
                loss.backward()
        except Exception as e:  # noqa: BLE001 - compared between eager and compiled
            out.exception = e
    out.grad_enabled = torch.is_grad_enabled()
    torch.set_grad_enabled(grad)
    out.stdout = buf.getvalue()
    out.warnings = [(i.category, str(i.message), os.path.basename(i.filename), i.lineno) for i in w
                    if "dynamo_lite" not in i.filename]
    out.logs = list(logs)
    out.args = (args, kwargs)
    out.grads = _grads((args, kwargs))
    if snapshot is not None:
        out.state = snapshot()
    return out


def _normalize(obj, memo=None):
    """Values assert_same cannot compare (numpy arrays, torch Generators) as comparable data."""
    memo = {} if memo is None else memo
    if id(obj) in memo:
        return memo[id(obj)]
    if isinstance(obj, np.ndarray):
        out = ("ndarray", str(obj.dtype), obj.shape, obj.tolist())
    elif isinstance(obj, torch.Generator):
        out = ("Generator", obj.get_state())
    elif type(obj) in (list, tuple):
        out = type(obj)(_normalize(v, memo) for v in obj)
    elif type(obj) is dict:
        out = {k: _normalize(v, memo) for k, v in obj.items()}
    else:
        out = obj
    memo[id(obj)] = out
    return out


def compare(eager: Observed, comp: Observed) -> None:
    if eager.exception is not None or comp.exception is not None:
        assert comp.exception is not None, f"eager raised {eager.exception!r}, compiled returned {comp.value!r}"
        assert eager.exception is not None, f"compiled raised {comp.exception!r}, eager did not"
        assert type(eager.exception) is type(comp.exception), f"{eager.exception!r} vs {comp.exception!r}"
        assert str(eager.exception) == str(comp.exception), f"{eager.exception!r} vs {comp.exception!r}"
    else:
        assert_same(_normalize(eager.value), _normalize(comp.value))
    assert eager.stdout == comp.stdout, f"stdout differs:\n eager: {eager.stdout!r}\n compiled: {comp.stdout!r}"
    assert eager.warnings == comp.warnings, f"warnings differ:\n eager: {eager.warnings}\n compiled: {comp.warnings}"
    assert eager.logs == comp.logs, f"logs differ:\n eager: {eager.logs}\n compiled: {comp.logs}"
    assert_same(_normalize(eager.args), _normalize(comp.args), "arguments after the call")
    assert len(eager.grads) == len(comp.grads)
    for i, (a, b) in enumerate(zip(eager.grads, comp.grads)):
        assert (a is None) == (b is None), f"grad #{i}: eager {a} vs compiled {b}"
        if a is not None:
            assert_same(a, b, f"grad #{i}")
    assert eager.grad_enabled == comp.grad_enabled, "grad mode after the call differs"
    assert_same(eager.state, comp.state, "state after the call")


def check(fn: Callable, *args, backward: bool = False, reset: Callable = None, snapshot: Callable = None,
          graphs: Optional[int] = 1, fullgraph: bool = False, compiled=None, **kwargs) -> CompileCounter:
    """One eager and one compiled call of ``fn`` from the same state; all observations equal.

    ``graphs``: minimum number of graphs the compiled run must produce (None: not checked)
    so a test cannot silently stop exercising the compiler.
    """
    cnt = CompileCounter()
    eager_in = copy.deepcopy((args, kwargs))
    comp_in = copy.deepcopy((args, kwargs))
    eager = _call(fn, *eager_in, backward=backward, reset=reset, snapshot=snapshot)
    opt = compiled(cnt) if compiled is not None else dynamo_lite.compile(fn, backend=cnt, fullgraph=fullgraph)
    comp = _call(opt, *comp_in, backward=backward, reset=reset, snapshot=snapshot)
    if reset is not None:
        reset()
    compare(eager, comp)
    if graphs is not None:
        assert cnt.frame_count >= graphs, f"expected >= {graphs} graphs, got {cnt.frame_count}"
    return cnt


def check_calls(fn: Callable, calls: list, *, backward: bool = False, reset: Callable = None,
                snapshot: Callable = None, graphs: Optional[int] = 1) -> CompileCounter:
    """The same sequence of calls (each an args tuple) eagerly and through one compiled fn."""
    cnt = CompileCounter()
    opt = dynamo_lite.compile(fn, backend=cnt)
    for i, args in enumerate(calls):
        eager = _call(fn, *copy.deepcopy((args, {})), backward=backward, reset=reset, snapshot=snapshot)
        comp = _call(opt, *copy.deepcopy((args, {})), backward=backward, reset=reset, snapshot=snapshot)
        try:
            compare(eager, comp)
        except AssertionError as e:
            raise AssertionError(f"call #{i}: {e}") from None
    if reset is not None:
        reset()
    if graphs is not None:
        assert cnt.frame_count >= graphs, f"expected >= {graphs} graphs, got {cnt.frame_count}"
    return cnt


def check_module(factory: Callable[[], torch.nn.Module], steps: list, *, attrs=(), backward: bool = False,
                 graphs: Optional[int] = 1) -> CompileCounter:
    """Build two modules from the same seed; compile one; run each step(module) on both."""
    cnt = CompileCounter()
    seed_all()
    eager_m = factory()
    seed_all()
    comp_m = dynamo_lite.compile(factory(), backend=cnt)
    for i, step in enumerate(steps):
        eager = _call(step, (eager_m,), {}, backward=backward, reset=None, snapshot=None)
        comp = _call(step, (comp_m,), {}, backward=backward, reset=None, snapshot=None)
        comp.args = ((comp_m._orig_mod,), {})  # same state, the plain class (compare type too)
        try:
            compare(eager, comp)
            for a in attrs:
                assert_same(getattr(eager_m, a), getattr(comp_m, a), f"module.{a}")
            assert eager_m.training == comp_m.training
        except AssertionError as e:
            raise AssertionError(f"step #{i}: {e}") from None
    if graphs is not None:
        assert cnt.frame_count >= graphs, f"expected >= {graphs} graphs, got {cnt.frame_count}"
    return cnt
