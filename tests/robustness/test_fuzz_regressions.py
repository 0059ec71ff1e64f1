"""Minimised programs from differential fuzzing (tests/test_fuzz.py, bench/fuzz.py).

Each test is a program that once behaved differently compiled than eager (or
made dynamo_lite itself fail), reduced to the statements that matter, with the
sequence of calls that showed it.  The docstring names the symptom and the fix.
Like the fuzzer, every sequence uses ONE compiled function across its calls,
so guards, recompiles and cache hits are part of the test.
"""
from __future__ import annotations

import sys

import pytest
import torch

import dynamo_lite
from dynamo_lite.testing import CompileCounter, check_calls


class _Unraisable:
    """Collect exceptions that C reports as unraisable (e.g. a guard that raised)."""

    def __enter__(self):
        self.seen = []
        self._old = sys.unraisablehook
        sys.unraisablehook = lambda info: self.seen.append(f"{info.exc_type.__name__}: {info.exc_value}")
        return self

    def __exit__(self, *exc):
        sys.unraisablehook = self._old
        return False


def test_inplace_int_times_float_raises_inside_try():
    """`x *= 0.5` on an int64 tensor raises in eager ("result type Float can't be cast to the
    desired output type Long").  FakeTensor's mul_ does not check the cast, so the op went into
    the graph, which then raised outside the user's try block.  Fix: record_op checks the
    result-type cast of binary in-place ops (variables/tensor.py:_check_inplace_cast)."""
    def f(x, s):
        try:
            x *= s
        except RuntimeError as err:
            print("caught", type(err).__name__, err)
        return x + 1

    ints = torch.arange(6).reshape(2, 3)
    check_calls(f, [(torch.ones(2, 3), 0.5), (ints, 0.5), (ints, 2)])


def test_inplace_method_and_operator_casts():
    """The same check for mul_/div_/add_ and their operator forms, tensor and scalar operands."""
    def f(x, y):
        out = []
        for op in ("mul_", "div_", "add_"):
            try:
                getattr(x.clone(), op)(y)
                out.append(op)
            except RuntimeError as err:
                out.append(str(err))
        z = x.clone()
        try:
            z /= 2
        except RuntimeError as err:
            out.append(str(err))
        return out, z

    ints, bools = torch.arange(4), torch.tensor([True, False])
    check_calls(f, [(ints, 0.5), (ints, torch.ones(4)), (ints, 3), (bools, 2), (torch.ones(4), 2)])


@pytest.fixture(params=[False, True], ids=["python-guards", "c-guard-program"])
def guard_kind(request, monkeypatch):
    from dynamo_lite import guards

    monkeypatch.setattr(guards, "USE_PROGRAM", request.param)
    return request.param


def test_list_item_guard_runs_after_the_length_guard(guard_kind):
    """A guard on lst[0] was evaluated before the guard on len(lst): a call with a shorter list
    made the compiled check raise IndexError (reported as unraisable, counted as a miss).
    Fix: guards are ordered by source nesting, then by kind (guards/__init__.py)."""
    lines = dynamo_lite.explain(lambda x, lst: x * lst[0])(torch.ones(2), [3, 1]).guards[0]
    assert lines.index("lst: len == 2") < lines.index("lst[0]: == 3")

    def f(x, lst):
        return x * sorted(lst)[0] if lst else x

    with _Unraisable() as unraisable:
        check_calls(f, [(torch.ones(2), [3, 1, 2]), (torch.ones(2), []), (torch.ones(2), [5]),
                                   (torch.ones(2), [3, 1, 2])])
    assert unraisable.seen == []


def test_nested_dict_guard_order(guard_kind):
    """The same ordering for attributes and dict items nested two levels deep."""
    class Cfg:
        def __init__(self, sizes):
            self.sizes = sizes

    def f(x, cfg):
        return x + cfg.sizes["a"][1]

    with _Unraisable() as unraisable:
        check_calls(f, [(torch.ones(2), Cfg({"a": [1, 2]})), (torch.ones(2), Cfg({"a": [1]})),
                                   (torch.ones(2), Cfg({"b": [1, 2]})), (torch.ones(2), Cfg({"a": [4, 5]}))])
    assert unraisable.seen == []


def test_no_grad_inside_disabled_grad_across_breaks():
    """`torch.set_grad_enabled(False)` then `with torch.no_grad():` around a graph break: the
    resume function rebuilt the entered context as if it had switched grad mode on entry
    (enabled = not prev), re-enabling grad when rebuilding it; eager leaves grad disabled.
    Fixes: variables/builder.py reads the mode the context set (its type, or .mode of
    set_grad_enabled); convert_frame sets the traced grad mode last at every break."""
    def f(x):
        torch.set_grad_enabled(False)
        with torch.no_grad():
            print("inside", torch.is_grad_enabled())
        print("after", torch.is_grad_enabled())
        return x * 2

    check_calls(f, [(torch.ones(2),), (torch.ones(3),)])
    torch.set_grad_enabled(True)


def test_enable_grad_inside_no_grad_across_breaks():
    """The mirror case: enable_grad() nested in no_grad() and set_grad_enabled(True) in
    set_grad_enabled(True), each block broken by a print."""
    def f(x):
        with torch.no_grad():
            with torch.enable_grad():
                y = x * 2
                print("inner", torch.is_grad_enabled())
            print("outer", torch.is_grad_enabled())
        with torch.set_grad_enabled(True):
            with torch.set_grad_enabled(True):
                print("same mode", torch.is_grad_enabled())
            z = y + 1
        return y, z

    x = torch.ones(3, requires_grad=True)
    check_calls(f, [(x,), (x,)])


def test_grad_mode_fuzz_program():
    """The fuzzer's original program for the grad-mode bug (lightly trimmed)."""
    def f(x, y, n, flag):
        torch.set_grad_enabled(False)
        with torch.set_grad_enabled(False):
            for e4 in list((x, y)):
                v5 = (0 == n)
            else:
                v6 = (x - y)[1, 0]
            print('p8', x.shape)
        c9 = 0
        while c9 < 2:
            c9 += 1
            print('p11', (y * 0.5))
        print('p13', y.shape)
        if flag:
            return torch.abs(x * 0.5)
        return None

    x, y = torch.randn(3, 4), torch.randn(3, 4)
    try:
        check_calls(f, [(x, y, 2, True), (x, y, 2, True), (x, y, 0, False)])
    finally:
        torch.set_grad_enabled(True)


def test_cache_limit_under_threads_counts_each_variant_once():
    """Found by the thread stress test: threads converting the same frame at once all passed
    the cache-size check and inserted duplicate entries (9 entries with a limit of 3).
    Fix: frames are converted under one lock, and a thread that finds a matching entry
    after waiting runs eagerly once (convert_frame.FrameConverter.__call__)."""
    import threading

    from dynamo_lite import config
    from dynamo_lite.convert_frame import entries_for

    counter = CompileCounter()

    def f(x, k):
        return x * k

    cf = dynamo_lite.compile(f, backend=counter, dynamic=False)  # static: each k is an entry
    barrier = threading.Barrier(6)

    def worker():
        barrier.wait()
        for k in (1, 2, 3, 1, 2):
            assert torch.equal(cf(torch.ones(2), k), torch.ones(2) * k)

    with config.patch(cache_size_limit=3):
        threads = [threading.Thread(target=worker) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    assert len(entries_for(f.__code__)) == 3
    assert counter.frame_count == 3


def _make_counter_closure():
    c = 0

    def bump(k):
        nonlocal c
        c += k
        return c

    def inner(x):
        r = bump(2)
        return x + c + r  # c must be read after bump changed it

    return inner


def test_free_variable_shared_with_an_inlined_closure():
    """A frame reading free variable `c` and calling a closure that changes the same cell
    (nonlocal) read the stale value: the frame's own cell tracker and the one reached
    through bump.__closure__ were two trackers of one real cell (a wrong result).
    Fix: the root frame registers its free-variable cells with OutputGraph.cells, so
    cell_for_real returns the same tracker (symbolic/translator.py)."""
    for _ in range(2):
        eager, compiled = _make_counter_closure(), dynamo_lite.compile(_make_counter_closure(), backend="eager")
        x = torch.ones(2)
        assert torch.equal(compiled(x), eager(x))
        assert torch.equal(compiled(x), eager(x))  # second call: the cell now holds 2


def test_nonlocal_counter_in_resume_function():
    """The fuzzer's program (minimised): the cell becomes a free variable of the resume
    function after a tensor branch, and the counter closure is one of its live locals."""
    G = {"count": 0}

    def f(x, y, n):
        cnt2 = 0

        def bump3(k):
            nonlocal cnt2
            cnt2 += k
            return cnt2

        if torch.stack([x, y]).sum():
            G["count"] += bump3(n)
            G["count"] += cnt2
        print("after", cnt2)
        return x + cnt2

    x, y = torch.randn(3, 4), torch.randn(3, 4)
    check_calls(f, [(x, y, 2), (x, y, 3), (-x.abs() - 1, y.abs() * 0, 1)])
    compiled = dynamo_lite.compile(f, backend="eager")
    G["count"] = 0
    compiled(x.abs() + 1, y.abs(), 2)
    assert G["count"] == 4


