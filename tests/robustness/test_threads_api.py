"""Compiled functions used from several threads through the public API.

Every test compares compiled with eager through dynamo_lite.testing; known bugs are strict
xfails in tests/test_known_bugs.py.
"""
import threading

import torch

import dynamo_lite
from dynamo_lite.testing import CompileCounter, assert_same

pytest_plugins = ["pytester"]

X = torch.arange(6, dtype=torch.float32).reshape(2, 3) / 7 - 0.3


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
