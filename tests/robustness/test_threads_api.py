"""Compiled functions used from several threads through the public API.

From the suite this file was split out of:
the public API and diagnostics as a torch.compile user drives them.

Covers what tests/api/test_api_usage.py does not: compile() of staticmethods,
classmethods, callable objects, functools.partial, closures, `compile(model.forward)`
and methods decorated in a class body; compiled functions calling compiled functions;
`disable` (decorator, context manager, of a compiled function); `optimize()` nesting
and re-entry; `reset()` inside compiled code; every `explain()` field and its text;
`fullgraph=True` messages naming the user's file and line; `config.patch`
(`recompile_limit` alias, `suppress_errors`, cache-size limit with one warning);
recompiles on dtype / shape / requires_grad / scalars / globals / closures / module
attributes with results compared to eager; DYNAMO_LITE_LOGS and `set_logs`; user
logging records and warnings inside compiled code (must equal eager's); the pytest
plugin run on small files with pytester (`--dl`); `register_backend`; and two
threads compiling at once.

Bugs and doc/behaviour mismatches found here are strict xfails in tests/test_known_bugs.py.
"""
import contextlib
import functools
import importlib
import io
import logging
import os
import pkgutil
import subprocess
import sys
import threading
import warnings

import pytest
import torch

import dynamo_lite
from dynamo_lite import config
from dynamo_lite.report import events
from dynamo_lite.testing import CompileCounter, assert_same

pytest_plugins = ["pytester"]

X = torch.arange(6, dtype=torch.float32).reshape(2, 3) / 7 - 0.3


def _recording():
    seen = []
    return seen, events.collecting(seen.append)


def _kinds(seen):
    return [type(e).__name__ for e in seen]


# ---------------------------------------------------------------- threads
def _loop_sin(t):
    for _ in range(15):
        t = t.sin() + 1
    return t


def _loop_cos(t):
    for _ in range(15):
        t = t.cos() * 2
    return t


def test_two_threads_compile_different_functions_at_once():
    ca, cb = CompileCounter(), CompileCounter()
    fa = dynamo_lite.compile(_loop_sin, backend=ca)
    fb = dynamo_lite.compile(_loop_cos, backend=cb)
    barrier = threading.Barrier(2)
    results, errors = {}, []

    def run(name, f):
        try:
            barrier.wait()
            results[name] = [f(X) for _ in range(4)]
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=("a", fa)), threading.Thread(target=run, args=("b", fb))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    for r in results["a"]:
        assert_same(r, _loop_sin(X))
    for r in results["b"]:
        assert_same(r, _loop_cos(X))
    assert (ca.frame_count, cb.frame_count) == (1, 1)


def test_optimize_in_one_thread_does_not_capture_in_another():
    cnt = CompileCounter()
    barrier = threading.Barrier(2)
    done = threading.Event()

    def plain(t):
        return t + 1

    def other():
        barrier.wait()
        for _ in range(50):
            plain(X)
        done.set()

    def capturing():
        barrier.wait()
        with dynamo_lite.optimize(cnt):
            while not done.is_set():
                _loop_cos(X)

    threads = [threading.Thread(target=other), threading.Thread(target=capturing)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert cnt.frame_count == 1
    assert all("add" not in str(n.target) for g in cnt.graphs for n in g.graph.nodes)
