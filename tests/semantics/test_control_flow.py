"""Acceptance: control flow on Python values, on shapes and on tensor data; loops.

Branches on constants, shapes and dtypes are resolved at trace time (guarded);
branches on tensor data (.item(), bool(t), `if t.sum() > 0`) break the graph and
must still take the same path as eager.  Helpers: dynamo_lite/testing.py.
"""
import itertools

import pytest
import torch

from dynamo_lite.testing import check, check_calls


def test_branch_on_python_flag_and_recompile_on_change():
    def f(x, flag):
        if flag:
            return x + 1
        return x - 1

    check_calls(f, [(torch.randn(3), True), (torch.randn(3), False), (torch.randn(3), True)])


def test_branch_on_shape_and_dtype():
    def f(x):
        if x.shape[0] > 2 and x.dtype == torch.float32:
            y = x.sum(0)
        elif x.ndim == 1:
            y = x * 3
        else:
            y = x.double()
        return y

    check_calls(f, [(torch.randn(4, 2),), (torch.randn(2, 2),), (torch.randn(5),), (torch.randn(3, 2),)])


def test_data_dependent_if_on_sum():
    def f(x):
        y = x * 2
        if y.sum() > 0:
            return y + 10
        return y - 10

    check_calls(f, [(torch.ones(3),), (-torch.ones(3),), (torch.ones(3),)], graphs=None)


def test_data_dependent_bool_and_item_branch():
    def f(x):
        if bool(x.max() > 0.5):
            x = x * 2
        n = x.sum().item()
        if n > 1.0:
            return x, n
        return -x, n

    check_calls(f, [(torch.tensor([0.9, 0.1]),), (torch.tensor([0.1, 0.2]),)], graphs=None)


def test_data_dependent_while_loop():
    def f(x):
        steps = 0
        while x.norm() > 1:
            x = x / 2
            steps += 1
        return x, steps

    check(f, torch.full((4,), 5.0), graphs=None)


def test_tensor_truthiness_of_single_element_and_any_all():
    def f(x):
        out = []
        if x[0]:
            out.append(1)
        if (x > 0).any():
            out.append(2)
        if not (x > 0).all():
            out.append(3)
        return x + len(out), out

    check(f, torch.tensor([1.0, -2.0]), graphs=None)


def test_ambiguous_truth_value_raises_same_error():
    def f(x):
        y = x + 1
        if y:
            return y
        return y * 2

    check(f, torch.randn(3), graphs=None)


def test_for_loop_with_break_continue_else():
    def f(x, n):
        acc = x
        for i in range(n):
            if i == 1:
                continue
            if i == 4:
                break
            acc = acc + i
        else:
            acc = acc * 100
        for j in range(2):
            acc = acc - j
        else:
            acc = acc + 0.5
        return acc

    check_calls(f, [(torch.zeros(2), 6), (torch.zeros(2), 3)])


def test_while_loop_with_else_and_counter():
    def f(x):
        i = 0
        while i < 5:
            x = x * 1.1
            i += 1
            if i > 10:
                break
        else:
            x = -x
        return x, i

    check(f, torch.ones(2))


def test_enumerate_zip_reversed_sorted_over_lists_of_tensors():
    def f(xs, ws):
        total = 0
        for i, (a, w) in enumerate(zip(xs, ws)):
            total = total + a * w * i
        for k, a in enumerate(reversed(xs), start=3):
            total = total + a * k
        return total, [t.sum() for t in sorted(xs, key=lambda t: t.shape[0])]

    check(f, [torch.randn(2), torch.randn(2), torch.randn(2)], [1.0, 2.0, 3.0])


def test_loop_over_tensor_rows_and_dict_items():
    def f(x, d):
        out = []
        for row in x:
            out.append(row.sum())
        for k, v in d.items():
            out.append(v * len(k))
        return torch.stack(out)

    check(f, torch.randn(3, 2), {"a": torch.tensor(1.0), "bbb": torch.tensor(2.0)})


def test_nested_loops_with_itertools():
    def f(x):
        acc = x
        for a, b in itertools.product(range(2), range(3)):
            acc = acc + a * b
        for p in itertools.chain([1, 2], (3,)):
            acc = acc * p
        return acc

    check(f, torch.ones(2))


def test_ternary_and_short_circuit_values():
    def f(x, y, flag):
        a = x if flag else y
        b = flag and x or y
        c = None or y
        d = 0 and x
        return a + b + c, d

    check_calls(f, [(torch.ones(2), torch.zeros(2), True), (torch.ones(2), torch.zeros(2), False)])


def test_comparison_chains_and_in_operator():
    def f(x, n, names):
        r = x
        if 0 < n <= 3:
            r = r + 1
        if "b" in names and "z" not in names:
            r = r * 2
        if n in (1, 2):
            r = r - 5
        return r

    check_calls(f, [(torch.ones(2), 2, ["a", "b"]), (torch.ones(2), 5, ["b", "z"])])


def test_is_none_checks_and_optional_args():
    def f(x, mask=None, bias=None):
        if mask is not None:
            x = x * mask
        if bias is None:
            bias = 1.0
        return x + bias

    check_calls(f, [(torch.ones(3),), (torch.ones(3), torch.tensor([1.0, 0.0, 1.0])),
                    (torch.ones(3), None, torch.ones(3))])


def test_match_statement_on_values():
    def f(x, spec):
        match spec:
            case {"op": "add", "v": v}:
                return x + v
            case ("mul", v):
                return x * v
            case [a, b, *rest]:
                return x - a - b - len(rest)
            case _:
                return x

    check_calls(f, [(torch.ones(2), {"op": "add", "v": 2}), (torch.ones(2), ("mul", 3)),
                    (torch.ones(2), [1, 2, 3, 4]), (torch.ones(2), 5)], graphs=None)


def test_loop_builds_list_with_data_dependent_break():
    def f(x):
        out = []
        for i in range(5):
            x = x * 2
            out.append(x.sum())
            if x.sum() > 20:
                break
        return out, i

    check(f, torch.ones(2), graphs=None)


def test_recursion_unrolled_on_python_int():
    def fact(n, x):
        if n <= 1:
            return x
        return fact(n - 1, x * n)

    def f(x):
        return fact(4, x)

    check(f, torch.ones(2))


def test_assert_statement_passes_and_fails():
    def f(x, n):
        assert n > 0, f"n must be positive, got {n}"
        assert x.shape[0] == 3
        return x * n

    check_calls(f, [(torch.ones(3), 2), (torch.ones(3), -1)], graphs=None)


def test_early_return_inside_loop_and_try():
    def f(x):
        for i in range(10):
            try:
                if i == 3:
                    return x + i
            finally:
                x = x + 0.5
        return x

    check(f, torch.zeros(1), graphs=None)


def test_shape_dependent_loop_count():
    def f(x):
        acc = torch.zeros(x.shape[1])
        for i in range(x.shape[0]):
            acc = acc + x[i]
        return acc

    check_calls(f, [(torch.randn(2, 3),), (torch.randn(4, 3),)])


def test_walrus_and_comprehension_scoping():
    def f(x):
        ys = [(y := x * i) for i in range(3)]
        squares = {i: i * i for i in range(4) if i % 2}
        total = sum(t.sum() for t in ys)
        return y, squares, total

    check(f, torch.ones(2))


def test_data_dependent_branch_mutating_local_list_and_global_counter():
    def f(x, acc):
        acc.append("start")
        if x.sum() > 0:
            acc.append("pos")
            y = x + 1
        else:
            acc.append("neg")
            y = x - 1
        acc.append(len(acc))
        return y

    check_calls(f, [(torch.ones(2), []), (-torch.ones(2), ["pre"])], graphs=None)


@pytest.mark.parametrize("n", [0, 1, 3])
def test_loop_zero_one_many_iterations(n):
    def f(x, n):
        last = None
        for i in range(n):
            last = x * i
        return (last if last is not None else x) + 1

    check(f, torch.ones(2), n)
