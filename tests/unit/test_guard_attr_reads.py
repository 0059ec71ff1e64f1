"""The guard's reads of object attributes (csrc/guards.c LOAD_ATTR) are quiet.

A cache hit must not run code eager does not run.  Reading ``fn.__code__`` through its getter
raises the audit event "object.__getattr__", which runs every ``sys.addaudithook`` hook
(filelock, imported with torch's compile stack, adds one on 3.12+); the guard reads the code
directly, so a hit raises the events eager raises and no others.
"""
from __future__ import annotations

import collections
import sys

import torch
from torch import nn

import dynamo_lite
from dynamo_lite.testing import CompileCounter, assert_same


# ---- a hit raises only the audit events eager raises --------------------------------------
_EVENTS: list = []
_RECORDING = [False]


def _audit(event, args):
    if _RECORDING[0]:
        _EVENTS.append(event)


def _events_of(fn, *args):
    _EVENTS.clear()
    _RECORDING[0] = True
    try:
        fn(*args)
    finally:
        _RECORDING[0] = False
    return collections.Counter(_EVENTS)


class Layers(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(3))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def test_cache_hit_raises_no_audit_events_eager_does_not():
    sys.addaudithook(_audit)  # (a process cannot remove it again: it records only when asked)
    m = Layers()
    counter = CompileCounter()
    compiled = dynamo_lite.compile(m, backend=counter)
    x = torch.randn(2, 4)
    with torch.no_grad():
        compiled(x)
        compiled(x)
        eager = _events_of(m, x)
        hit = _events_of(compiled, x)
    assert counter.frame_count == 1
    assert hit == eager


def test_guard_on_code_still_sees_a_replaced_code():
    """The guard reads fn.__code__ without the getter: a function given new code still fails it."""

    class M(nn.Module):
        def forward(self, x):
            return x + 1

    def other_forward(self, x):
        return x - 1

    m = M()
    counter = CompileCounter()
    compiled = dynamo_lite.compile(m, backend=counter)
    x = torch.ones(2)
    assert_same(m(x), compiled(x))
    original = M.forward.__code__
    try:
        M.forward.__code__ = other_forward.__code__
        assert_same(m(x), compiled(x))
        assert_same(torch.zeros(2), compiled(x))
    finally:
        M.forward.__code__ = original
    assert_same(m(x), compiled(x))
