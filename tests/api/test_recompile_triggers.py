"""What makes a compiled function recompile (values, shapes, globals), eager vs compiled.

Every test compares compiled with eager through dynamo_lite.testing; known bugs are strict
xfails in tests/test_known_bugs.py.
"""

import pytest
import torch

import dynamo_lite
from dynamo_lite.testing import CompileCounter, assert_same, assert_same_as_eager
from dynamo_lite.testing import check_calls
from dynamo_lite.testing import print_with_graph_break as print  # noqa: A001 - a graph break at each print


def _compiled(fn, backend="eager"):
    return dynamo_lite.compile(fn, backend=backend)


# ---------------------------------------------------------------------------
# recompiles
# ---------------------------------------------------------------------------
_K = 2


def test_recompile_counts_for_shape_dtype_requires_grad_int_and_global():
    global _K

    def f(x, n):
        return x * n + _K

    cnt = CompileCounter()
    cf = dynamo_lite.compile(f, backend=cnt)
    counts = []
    cf(torch.ones(2), 1)
    cf(torch.ones(2), 1)
    counts.append(cnt.frame_count)
    for args in [(torch.ones(3), 1), (torch.ones(2, dtype=torch.float64), 1), (torch.ones(2, requires_grad=True), 1),
                 (torch.ones(2), 2)]:
        assert_same(cf(*args), f(*args))
        counts.append(cnt.frame_count)
    _K = 5
    try:
        assert_same(cf(torch.ones(2), 2), torch.full((2,), 7.))
        counts.append(cnt.frame_count)
    finally:
        _K = 2
    assert counts == [1, 2, 3, 4, 5, 6]
    for args in [(torch.ones(2), 1), (torch.ones(3), 1), (torch.ones(2), 2)]:
        assert_same(cf(*args), f(*args))
    assert cnt.frame_count == 6  # going back to seen inputs hits the cache


def test_python_scalar_arguments_of_each_kind():
    def f(x, s):
        return x * s, type(s).__name__, s != s

    calls = [(torch.ones(2), v) for v in (0.5, 1.5, 2, True, 1, -0.0, float("nan"), 1.0, float("nan"))]
    check_calls(f, calls)


def test_list_dtype_and_device_arguments_recompile_only_when_needed():
    def f(x, shape, dt):
        return x.reshape(shape).to(dt), torch.zeros(1, dtype=dt, device="cpu")

    cnt = CompileCounter()
    cf = dynamo_lite.compile(f, backend=cnt)
    calls = [([2, 3], torch.float16), ([3, 2], torch.float16), ([2, 3], torch.int32), ([2, 3], torch.float16)]
    for shape, dt in calls:
        assert_same(cf(torch.arange(6.), shape, dt), f(torch.arange(6.), shape, dt))
    assert cnt.frame_count == 3


def test_requires_grad_and_stride_changes_between_calls():
    def f(x):
        return (x.view(-1) if x.is_contiguous() else x.reshape(-1) * 2), x.requires_grad

    cnt = check_calls(f, [(torch.ones(2, 3),), (torch.ones(3, 2).t(),), (torch.ones(2, 3, requires_grad=True),),
                          (torch.ones(2, 3),), (torch.ones(3, 2).t(),)])
    assert cnt.frame_count == 3


def test_many_values_hit_cache_limit_with_correct_results():
    def f(x, n):
        return x * n + x.shape[0]

    cnt = CompileCounter()
    cf = dynamo_lite.compile(f, backend=cnt)
    with dynamo_lite.config.patch(cache_size_limit=3):
        for n in range(8):
            x = torch.ones(n % 3 + 1)
            assert_same(cf(x, n), f(x, n))
    assert cnt.frame_count == 3


def test_resume_functions_recompile_with_their_frame():
    def f(x, k):
        y = x * k
        print("break", k)
        return y + k

    cnt = check_calls(f, [(torch.ones(1), k) for k in (1, 2, 1, 2, 3)], hits=[2, 3, 4])
    # f and its resume function: k=1 static, then (automatic dynamic) one symbolic graph each for k >= 2
    assert cnt.frame_count == 4
    cnt = check_calls(f, [(torch.ones(1), k) for k in (1, 2, 1, 2, 3)], dynamic=False)
    assert cnt.frame_count == 6  # static: two graphs per distinct k


def test_global_tensor_replaced_resized_and_mutated():
    global _GT
    _GT = torch.ones(2)

    def f(x):
        return x + _GT

    cf = _compiled(f)
    try:
        cf(torch.ones(2))
        _GT = torch.full((2,), 10.)
        assert_same(cf(torch.ones(2)), torch.full((2,), 11.))
        _GT = torch.ones(3)
        assert_same_as_eager(f, torch.ones(2), compiled_fn=cf)  # broadcast error
        _GT.add_(1)
        assert_same(cf(torch.ones(3)), torch.full((3,), 3.))
    finally:
        del _GT


class _Finalized:
    freed: list = []

    def __init__(self, name):
        self.name = name

    def __del__(self):
        _Finalized.freed.append(self.name)


def test_arguments_the_trace_never_reads_are_not_guarded():
    # kornia's MILossFromRef.trace_in_ref_mask(self, ...) breaks on its first line; `self` is read
    # only after the break, yet its type was guarded: a subclass recompiled the frame (torch.compile
    # guards what the trace reads)
    from dynamo_lite.report import events

    class Base:
        scale = 2

        def trace(self, sig, m):
            if m.all():  # a branch on tensor data: the graph ends here
                return sig * self.scale
            return sig - self.scale

    class A(Base):
        pass

    class B(Base):
        scale = 3

    f = dynamo_lite.compile(lambda obj, s, m: obj.trace(s, m), backend="eager")
    recorded = []
    with events.collecting(recorded.append):
        for obj in (A(), B(), A(), B()):
            for m in (torch.tensor([True, True]), torch.tensor([True, False])):
                assert_same(f(obj, torch.ones(2), m), obj.trace(torch.ones(2), m))
    recompiled = [e.frame for e in recorded if isinstance(e, events.RecompileEvent)]
    assert "trace" not in recompiled  # only the resume functions, which read `self`, see B
    assert any(name.startswith("trace (resumed") for name in recompiled)


def _unread_cases():
    def deleted_unread(x, y):
        del y
        print("between")
        return x + 1

    def rebound_unread(x, y):
        y = x * 2
        print("between")
        return x + y

    def read_after_break(x, y):
        print("between")
        return x + y

    def all_locals(x, y):
        print("between")
        return sorted(locals())

    def finalizer_kept(x, obj):
        print("between")
        return x + len(_Finalized.freed)

    return [deleted_unread, rebound_unread, read_after_break, all_locals, finalizer_kept]


@pytest.mark.parametrize("fn", _unread_cases(), ids=lambda f: f.__name__)
def test_unread_arguments_keep_eager_behaviour(fn):
    def args():
        return (torch.ones(2), _Finalized("arg") if fn.__name__ == "finalizer_kept" else torch.zeros(2))

    for call in range(2):
        _Finalized.freed.clear()
        expected = fn(*args())
        freed_eager = list(_Finalized.freed)
        _Finalized.freed.clear()
        got = dynamo_lite.compile(fn, backend="eager")(*args())
        assert_same(expected, got)
        assert _Finalized.freed == freed_eager
