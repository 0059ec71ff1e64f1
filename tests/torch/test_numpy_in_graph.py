"""numpy code inside compiled functions: traced into the graph through torch._numpy.

Every test compares with eager through dynamo_lite.testing (values, dtypes, and the type a user
sees: np.ndarray, a numpy scalar or a Python number) and counts graph breaks: 0 where
torch.compile has 0, and the registered break (DL0045-DL0048) where numpy semantics cannot be
reproduced exactly (variables/numpy_arrays.py lists what breaks and why).
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import dynamo_lite
from dynamo_lite import graph_breaks as gb
from dynamo_lite.testing import CompileCounter, check_breaks, check_calls


def break_ids(fn, *args):
    report = dynamo_lite.explain(fn)(*args)
    return [b.break_id for b in report.break_reasons]


# ----------------------------------------------------------------------------- numpy scalars

def test_numpy_integer_compares_with_python_int():
    def f(x):
        a = np.int64(0) == 0
        b = 0 in (np.int64(0), np.int64(2))
        c = np.int64(3) < 4.5
        return x + 1, a, b, c

    out = check_breaks(f, torch.ones(3), breaks=0)
    assert type(out.value[1]) is np.bool_ and out.value[2] is True


def test_numpy_scalar_types_and_constants():
    def f(x):
        k = np.int64(3)
        s = np.float32(0.5) * 2          # stays np.float32 (NEP 50)
        y = x.view(k, -1) * float(s) + np.pi
        return y, s, k + 1, np.sqrt(2.0), np.float32(np.pi), int(k)

    out = check_breaks(f, torch.arange(6.0), breaks=0)
    assert type(out.value[1]) is np.float32 and type(out.value[3]) is np.float64 and type(out.value[5]) is int


def test_numpy_scalar_methods_fold():
    # einx's shape solver: np.prod([...]).astype("int32") and str() of the result (torch.compile: 0 breaks)
    def f(x, n):
        v = np.prod([n, 3]).astype("int32")
        w = np.int64(n).item()
        return x * int(v), v, w, str(v), f"{v:>4}", np.float64(2.5).round(), np.int32(7).tolist()

    out = check_breaks(f, torch.ones(2), 4, breaks=0)
    assert type(out.value[1]) is np.int32 and type(out.value[2]) is int and type(out.value[5]) is np.float64


def test_numpy_scalar_method_that_warns_or_raises_runs_eagerly():
    # a cast numpy warns about (nan to int) is not folded: Python runs it and the warning is eager's;
    # np.float64(1.5).tofile(...) would write a file: not folded either
    def f(x, v):
        return x + 1, np.float64(v).astype("int32")

    check_breaks(f, torch.ones(2), float("nan"), breaks=1)  # the warning is compared too

    def g(x):
        return x + 1, np.int64(2).astype("bogus")

    check_breaks(g, torch.ones(2), breaks=None, raises=TypeError)


def test_numpy_scalar_arithmetic_that_overflows_warns_as_in_eager():
    # folded at trace time, the overflow warning was lost: now numpy's warning breaks and Python
    # computes it (np.int64 overflow, float division by zero)
    def f(x, n):
        v = np.int64(n) + np.int64(9223372036854775807)
        w = np.float64(n) / np.float64(0.0)
        return x + 1, v, w

    check_breaks(f, torch.ones(2), 4, breaks=None)

    def g(x, n):
        return x * int(np.int64(n) * np.int64(3)), np.float32(n) / 2  # no warning: folded

    check_breaks(g, torch.ones(2), 4, breaks=0)


def test_numpy_scalar_argument_is_guarded_by_type_and_value():
    def f(x, s):
        return x * s, s == 2

    check_calls(f, [(torch.ones(2), np.int64(2)), (torch.ones(2), np.int64(2)), (torch.ones(2), np.int32(2)),
                    (torch.ones(2), 2), (torch.ones(2), np.float64(2.5))], graphs=None)


def test_numpy_scalar_to_tensor_keeps_its_dtype():
    def f(x):
        return x + torch.as_tensor(np.float64(2.0)), torch.tensor(np.int32(3)), torch.as_tensor(np.float64(4))

    out = check_breaks(f, torch.ones(2), breaks=0)
    assert out.value[2].dtype is torch.float64 and out.value[1].dtype is torch.int32


# ----------------------------------------------------------------------------- Tensor <-> ndarray

def test_tensor_numpy_ufunc_and_from_numpy():
    def f(x):
        a = x.numpy()
        return torch.from_numpy(np.sin(a) * 2 + a.sum())

    check_breaks(f, torch.randn(4), breaks=0)


def test_numpy_pipeline_as_tensor_of_mean():
    def f(x):
        return x + torch.as_tensor(np.mean(np.arange(6).reshape(2, 3), axis=0))

    out = check_breaks(f, torch.ones(3), breaks=0)
    assert out.value.dtype is torch.float64


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_one_graph_for_numpy_code(backend):
    def f(x):
        a = x.numpy()
        b = np.concatenate([a, np.zeros(2)]) + np.linalg.norm(a)
        c = np.where(b > 0, b, -b).reshape(2, -1).T
        return torch.from_numpy(c.astype(np.float32)) * 2

    cnt = CompileCounter(dynamo_lite.backends.lookup_backend(backend)[0])
    check_breaks(f, torch.randn(4), breaks=0)
    compiled = dynamo_lite.compile(f, backend=cnt)
    x = torch.randn(4)
    torch.testing.assert_close(compiled(x), f(x))
    assert cnt.frame_count == 1


def test_tensor_numpy_of_requires_grad_raises_as_eager():
    def f(x):
        return x.numpy()

    check_breaks(f, torch.ones(2, requires_grad=True), breaks=None, raises=RuntimeError)


def test_tensor_numpy_shares_memory_with_the_tensor():
    def f(x):
        a = x.numpy()
        x.add_(1)
        return a + 0

    check_breaks(f, torch.zeros(3), breaks=0)


# ----------------------------------------------------------------------------- arrays as arguments / results

def test_array_argument_and_array_result():
    def f(a, b):
        return np.sum(a * b, axis=1), a.mean(), (a @ b.T).max()

    out = check_breaks(f, np.arange(6.0).reshape(2, 3), np.ones((2, 3)), breaks=0)
    assert type(out.value[0]) is np.ndarray and type(out.value[1]) is np.float64


def test_array_dtypes_follow_numpy():
    def f(a, i):
        return a + i, i * 2, i / 2, (i > 1), a.astype(np.int32) + np.int8(1), i.sum(), a.dtype, i.shape

    check_breaks(f, np.arange(4, dtype=np.float32), np.arange(4), breaks=0)


def test_array_argument_recompiles_on_dtype_and_shape():
    def f(a):
        return np.cos(a) + a.shape[0]

    cnt = check_calls(f, [np.zeros(3), np.ones(3), np.ones(4), np.ones(3, dtype=np.float32),
                          np.ones(3, dtype=np.int64)], graphs=None)
    assert cnt.frame_count == 4


def test_array_argument_returned_as_is_keeps_identity():
    def f(a, x):
        return a, x + torch.from_numpy(a)

    check_breaks(f, np.ones(3), torch.ones(3), breaks=0)
    a = np.ones(3)
    compiled = dynamo_lite.compile(f, backend="eager")
    assert compiled(a, torch.ones(3))[0] is a


def test_array_attributes_and_indexing():
    def f(a):
        return (a.T, a.shape, a.ndim, a.size, a.dtype, a[0], a[1, 2], a[:, 1:], a[a.shape[0] - 1], len(a),
                a.reshape(-1)[::2], a.flatten(), a.transpose(1, 0).copy())

    out = check_breaks(f, np.arange(12.0).reshape(3, 4), breaks=0)
    assert type(out.value[6]) is np.float64


def test_numpy_functions():
    def f(a):
        return (np.zeros((2, 2)), np.ones(3, dtype=np.int32), np.arange(1, 7, 2), np.linspace(0, 1, 5),
                np.exp(a), np.add(a, 1), np.maximum(a, 2.0), np.clip(a, 1, 3), np.abs(-a), np.stack([a, a]),
                np.cumsum(a), np.prod(a + 1), np.std(a), np.var(a), np.argmax(a), np.all(a > -1), np.any(a > 3),
                np.square(a), np.dot(a, a), np.expand_dims(a, 0), np.tanh(a), np.floor(a / 3))

    check_breaks(f, np.arange(5.0), breaks=0)


def test_operators_on_arrays_and_traced_scalars():
    def f(a):
        s = a.sum()
        return -a, a ** 2, 2 - a, a // 2, a % 3, s * 2, s + 1, s > 3, a == s, abs(a - 2)

    out = check_breaks(f, np.arange(4.0), breaks=0)
    assert type(out.value[5]) is np.float64 and type(out.value[7]) is np.bool_


# ----------------------------------------------------------------------------- what breaks, with its reason

def test_inplace_mutation_of_an_array_breaks():
    def f(a):
        b = a * 2
        a += 1
        b[0] = 7
        return a, b

    check_breaks(f, np.arange(3.0), breaks=None)
    assert gb.NUMPY_INPLACE in break_ids(f, np.arange(3.0))


def test_numpy_random_keeps_numpy_state():
    def f(x):
        return x + torch.from_numpy(np.random.rand(3)), np.random.randint(0, 10)

    check_calls(f, [torch.ones(3), torch.ones(3)], graphs=None, rng=True)
    assert break_ids(f, torch.ones(3))[0] == gb.NUMPY_RANDOM


def test_tensor_passed_to_numpy_breaks():
    def f(x):
        return np.sin(x)

    check_breaks(f, torch.ones(3), breaks=None, need_graph=False)
    assert break_ids(f, torch.ones(3)) == [gb.NUMPY_UNSUPPORTED]


def test_non_unique_results_break():
    def f(a):
        return np.argsort(a)

    check_breaks(f, np.array([1.0, 1.0, 0.0]), breaks=None, need_graph=False)
    assert break_ids(f, np.array([1.0, 1.0, 0.0])) == [gb.NUMPY_SEMANTICS]


def test_unsupported_arrays_run_in_numpy():
    def f(a):
        return a + a

    for arr in (np.array(["a", "b"]), np.array([1, "x"], dtype=object), np.arange(4)[::-1],
                np.arange(3, dtype=np.uint32)):
        check_breaks(f, arr, breaks=None, need_graph=False)


def test_read_only_array_argument_runs_in_numpy():
    def f(a):
        return a * 2

    a = np.ones(3)
    a.flags.writeable = False
    check_breaks(f, a, breaks=None, need_graph=False)


def test_aliasing_array_arguments():
    def f(a, b):
        return a + b

    base = np.arange(4.0)
    check_breaks(f, base, base, breaks=0)  # the same array twice is one input
    check_calls(f, [(np.ones(3), np.zeros(3)), lambda: ((lambda z: (z, z[:3]))(np.arange(4.0)))], graphs=None)


def test_data_dependent_uses_break():
    def f(a):
        if a.sum() > 2:
            return float(a[0]), a.tolist()
        return a.max().item(), []

    check_breaks(f, np.arange(3.0), breaks=None)


def test_values_live_across_a_graph_break():
    def f(a):
        b = np.cos(a)
        s = b.sum()
        dynamo_lite.graph_break()
        return b * 2, s, math.pi

    out = check_breaks(f, np.arange(3.0), breaks=1)
    assert type(out.value[1]) is np.float64


def test_linalg_on_square_matrices():
    def f(a):
        return np.linalg.inv(a), np.linalg.det(a), np.linalg.solve(a, np.ones(2)), np.linalg.norm(a, axis=1)

    check_breaks(f, np.array([[2.0, 1.0], [1.0, 3.0]]), breaks=0)


def test_integer_division_by_an_array_breaks():
    def f(a, b):
        return a // 2, a % 3, a // b

    out = check_breaks(f, np.arange(4), np.array([1, 0, 2, 0]), breaks=None)
    assert gb.NUMPY_SEMANTICS in break_ids(f, np.arange(4), np.array([1, 2, 2, 1]))
    assert out.value[2].tolist() == [0, 0, 1, 0]


def test_numpy_error_state_raise_runs_in_numpy():
    def f(a):
        return a / 0.0

    with np.errstate(divide="raise"):
        check_breaks(f, np.ones(2), breaks=None, need_graph=False, raises=FloatingPointError)


def test_complex_results_come_back_as_arrays():
    def f(a):
        c = a + 1j
        return np.conj(c), c.real, np.abs(c)

    check_breaks(f, np.arange(3.0), breaks=0)


def test_iterating_an_array_and_numpy_types():
    def f(x):
        a = x.numpy()
        out = 0
        for v in a:
            out = out + v * 2
        return (torch.from_numpy(np.asarray(out)), isinstance(a, np.ndarray), a.dtype == np.float32, a.dtype.kind,
                str(a.dtype), np.float32, type(a.sum()), isinstance(a.sum(), np.floating))

    out = check_breaks(f, torch.arange(1.0, 5.0), breaks=0)
    assert out.value[5] is np.float32 and out.value[6] is np.float32


def test_tensor_numpy_with_changing_sizes():
    def f(x):
        a = x.numpy()
        return torch.from_numpy(np.sin(a) * 2 + a.sum()), a.mean(axis=0) + np.ones(1)

    cnt = check_calls(f, [torch.randn(4), torch.randn(5), torch.randn(6), torch.randn(7)], graphs=None)
    assert cnt.frame_count == 2  # the second size makes x dynamic; the numpy code does not specialise it


def test_numpy_scalar_times_tensor():
    def f(x):
        return np.int64(3) * x, x * np.float32(0.5), x + np.float64(1.5)

    out = check_breaks(f, torch.ones(2), breaks=0)
    assert out.value[1].dtype is torch.float32


def test_writing_into_tensor_numpy_result_breaks_and_mutates_the_tensor():
    def f(x):
        a = x.numpy()
        a[0] = 5.0
        return x * 1

    check_breaks(f, torch.zeros(3), breaks=None)


def test_from_numpy_of_an_argument_shares_its_memory():
    def f(a):
        t = torch.from_numpy(a)
        t.add_(1)
        return a

    check_breaks(f, np.zeros(3), breaks=0)


def test_numpy_fixes_where_torch_numpy_promotes_differently():
    def f(i, h):
        # torch._numpy alone gives float32 for these (torch's default dtype); numpy gives float64
        return np.where(i > 2, 1.5, i), i / 2, np.true_divide(i, i + 1), h ** i

    out = check_breaks(f, np.arange(4), np.full(4, 0.5, dtype=np.float32), breaks=0)
    assert [v.dtype for v in out.value] == [np.float64] * 4


def test_results_torch_numpy_gets_wrong_break():
    def f(a, j):
        return np.median(a), np.cumsum(j)  # torch._numpy: a [1]-shaped median; int8 cumsum

    check_breaks(f, np.arange(5.0), np.arange(3, dtype=np.int8), breaks=None, need_graph=False)
    assert set(break_ids(f, np.arange(5.0), np.arange(3, dtype=np.int8))) == {gb.NUMPY_SEMANTICS}


def test_split_list_result_and_finfo_constants():
    def f(x):
        a = x.numpy()
        left, right = np.split(a, 2)
        eps = np.finfo(np.float32).eps
        return torch.from_numpy(left * right + eps), np.iinfo(np.int16).max, np.bool_(True) + 1, np.dtype("int32")

    check_breaks(f, torch.arange(4.0), breaks=0)


def test_overflowing_python_int_raises_as_eager():
    def f(j):
        return j + 200

    check_breaks(f, np.arange(3, dtype=np.int8), breaks=None, need_graph=False, raises=OverflowError)


def test_numpy_integers_used_as_ints():
    def f(x, items):
        k = np.int64(2)
        return x.view(k, -1)[np.int64(1)], items[np.int32(1)], list(range(np.int64(3))), x[:k]

    check_breaks(f, torch.arange(6.0), [10, 20, 30], breaks=0)


def test_tensor_argument_viewing_an_array_argument():
    def f(t, a):
        t.add_(1)
        return a + 1

    def both():
        a = np.zeros(3)
        return (torch.from_numpy(a), a)

    check_calls(f, [both, (torch.zeros(3), np.zeros(3)), both], graphs=None, backend="aot_eager")


def test_array_argument_viewed_by_a_later_tensor_argument():
    def f(a, t):
        t.add_(1)
        return a + 1

    def both():
        a = np.zeros(3)
        return (a, torch.from_numpy(a))

    check_calls(f, [both, (np.zeros(3), torch.zeros(3)), both], graphs=None, backend="aot_eager")


def _write_through_view(a, b):
    v = a.view()
    v[0] = 9
    return a


def _write_through_flat(a, b):
    a.flat[0] = 1
    return a


def _ufunc_out(a, b):
    np.add(a, b, out=a)
    return a


def _transpose_iadd(a, b):
    x = a.T
    x += 1
    return a


def _alias_in_list(a, b):
    items = [a]
    items[0] += 1
    return a


def _masked_assignment(a, b):
    a[a > 1] = 0
    return a


def _copyto(a, b):
    np.copyto(a, b)
    return a


@pytest.mark.parametrize("fn", [_write_through_view, _write_through_flat, _ufunc_out, _transpose_iadd,
                                _alias_in_list, _masked_assignment, _copyto])
def test_every_write_into_an_array_runs_in_numpy(fn):
    check_breaks(fn, np.arange(3.0), np.ones(3), breaks=None, need_graph=False)
    assert break_ids(fn, np.arange(3.0), np.ones(3))


def test_inplace_bitwise_operators_on_arrays_and_scalars():
    def f(i):
        s = i.sum()
        s &= 3
        i |= 1
        return i, s

    check_breaks(f, np.arange(4), breaks=None)
    assert break_ids(f, np.arange(4)) == [gb.NUMPY_INPLACE]


def test_tensor_data_of_numpy_scalars_keeps_their_dtype():
    def f(x):
        return (x + 1, torch.tensor([np.float64(1.5), 2.0]), torch.tensor([[np.int32(1)], [np.int32(2)]]),
                torch.as_tensor([np.float16(1)]), torch.tensor([np.int64(1)], dtype=torch.float32),
                torch.full((2,), np.float64(1.5)), x.new_tensor([np.float64(2.0)]))

    out = check_breaks(f, torch.ones(2), breaks=None)
    assert [t.dtype for t in out.value[1:4]] == [torch.float64, torch.int32, torch.float16]


def test_identity_checks_on_arrays():
    def f(a, mask=None):
        b = np.asarray(a)
        c = a * 1
        if mask is None and a is not None and b is a and c is not a:
            return c + 1
        return c

    check_breaks(f, np.ones(3), breaks=0)


def test_positional_ufunc_output_runs_in_numpy():
    def f(a, b, c):
        np.add(a, b, c)
        return c

    check_breaks(f, np.ones(3), np.ones(3), np.zeros(3), breaks=None, need_graph=False)


def test_numpy_result_whose_size_depends_on_the_values_breaks():
    def f(x):
        return np.unique(x.numpy()), x + 1

    check_breaks(f, torch.tensor([3, 1, 3]), breaks=1)


def test_array_shared_with_a_tensor_that_requires_grad_survives_a_break():
    # einops' test_gradients_imperatives: torch.from_numpy(a) made to require grad shares a's
    # memory (in the graph, a's tensor is that tensor); rebuilding the array at a break called
    # .numpy() on a tensor that requires grad (RuntimeError) where eager has no error
    def f():
        a = np.arange(1, 25).reshape([2, 3, 4]).astype("float32")
        t = torch.from_numpy(a)
        t.requires_grad = True
        print("a break")
        t.sum().backward()
        a[0, 0, 0] = 100.0  # written through the array: the tensor sees it
        return a, t.detach().clone(), t.grad

    check_breaks(f, breaks=None)
