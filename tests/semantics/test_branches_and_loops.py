"""Branches and loops (for/while/else, break/continue, generators in loops), with graph breaks inside.

Every test compares compiled with eager through dynamo_lite.testing; known bugs are strict
xfails in tests/test_known_bugs.py.
"""
from __future__ import annotations

import contextlib
import io

import torch

import dynamo_lite
from dynamo_lite.testing import CompileCounter, assert_same, check_calls
from dynamo_lite.testing import print_with_graph_break as print  # noqa: A001 - a graph break at each print


# ----------------------------------------------------------------------------- helpers

def ones(*shape, **kw):
    return torch.ones(*shape, **kw)


# ----------------------------------------------------------------------------- control flow

def test_elif_chain_on_python_int_recompiles_per_branch():
    def f(x, n):
        if n == 0:
            y = x + 1
        elif n == 1:
            y = x * 2
        elif n < 5:
            y = x - 3
        else:
            y = -x
        return y

    check_calls(f, [(ones(3), 0), (ones(3), 1), (ones(3), 3), (ones(3), 9), (ones(3), 0), (ones(3), 1)], interleave=False, graphs=None)


def test_elif_chain_on_tensor_values_with_item():
    def f(x):
        s = x.sum().item()
        if s > 5:
            tag = "big"
        elif s > 0:
            tag = "small"
        elif s == 0:
            tag = "zero"
        else:
            tag = "neg"
        return x * len(tag), tag

    check_calls(f, [ones(6), ones(2), torch.zeros(2), -ones(2), ones(6)], interleave=False, graphs=None)


def test_short_circuit_and_or_run_side_effects_in_order():
    def f(x):
        log = []

        def s(v, r):
            log.append(v)
            return r

        a = s(1, 0) and s(2, 1)
        b = s(3, 0) or s(4, x)
        c = s(5, x) and s(6, 7) or s(8, 9)
        d = s(10, None) or s(11, "") or s(12, [])
        return a, b, c, d, log

    check_calls(f, [ones(2), ones(2)], interleave=False, graphs=None)


def test_short_circuit_on_tensor_condition_with_print():
    def f(x):
        out = []

        def p(m):
            print(m)
            out.append(m)
            return True

        r = (x.sum() > 0 and p("pos")) or p("neg")
        return r, out

    check_calls(f, [ones(2), -ones(2), ones(2)], interleave=False, graphs=None)


def test_tensor_and_or_not_return_operands():
    def f(x, y):
        return (x or y), (x and y), (not x)

    check_calls(f, [(torch.zeros(1), ones(1)), (ones(1), torch.zeros(1))], interleave=False, graphs=None)


def test_bool_of_multi_element_tensor_raises_same_error():
    def f(x):
        if x:
            return 1
        return 0

    check_calls(f, [ones(2), ones(1), torch.zeros(1)], interleave=False, graphs=None)


def test_ternaries_on_python_and_tensor_values():
    def f(x, t):
        y = x if t > 0 else -x
        z = (x + 1) if x.sum() > 0 else (x - 1)
        w = 1 if x.sum().item() > 0 else (2 if x.sum().item() == 0 else 3)
        return y, z, w

    check_calls(f, [(ones(2), 1), (-ones(2), -1), (torch.zeros(2), 0), (ones(2), 1)], interleave=False, graphs=None)


def test_mixed_static_and_data_dependent_conditions():
    def f(x):
        if x.dtype == torch.int64 and x.max() > 3:
            return "big int"
        elif x.is_floating_point() or x.sum() == 0:
            return "float or zero"
        return "other"

    check_calls(f, [torch.tensor([5]), torch.tensor([1]), torch.tensor([0.5]), torch.tensor([0])], interleave=False, graphs=None)


def test_walrus_in_tensor_condition():
    def f(x):
        if (s := x.sum()) > 0:
            return s
        return -s

    check_calls(f, [ones(2), -ones(2)], interleave=False, graphs=None)


def test_match_statement_literal_sequence_mapping_guard():
    def f(x, cmd):
        match cmd:
            case "add":
                return x + 1
            case ["mul", k]:
                return x * k
            case {"op": "sub", "v": v}:
                return x - v
            case (a, b, c):
                return x + a + b + c
            case int(n) if n > 3:
                return x * n
            case _:
                return x

    check_calls(f, [(ones(2), "add"), (ones(2), ["mul", 3]), (ones(2), {"op": "sub", "v": 2}),
             (ones(2), (1, 2, 3)), (ones(2), 5), (ones(2), 2), (ones(2), "add")], interleave=False, graphs=None)


def test_match_with_print_in_case_bodies():
    def f(x, cmd):
        match cmd:
            case {"op": op, **rest}:
                print(op, rest)
                return x + len(rest)
            case [first, *others] if first > 0:
                print("list", others)
                return x * len(others)
            case str() as s:
                return x + len(s)
        return None

    check_calls(f, [(ones(1), {"op": "a", "b": 1}), (ones(1), [1, 2, 3]), (ones(1), [0]), (ones(1), "abc")], interleave=False, graphs=None)


class _Pt:
    __match_args__ = ("a", "b")

    def __init__(self, a, b):
        self.a = a
        self.b = b


def test_match_class_patterns():
    def f(x, o):
        match o:
            case _Pt(a=1, b=b):
                return x + b
            case _Pt(a, b):
                print("pos", a, b)
                return x - a - b
        return x

    check_calls(f, [(ones(1), _Pt(1, 5)), (ones(1), _Pt(2, 3)), (ones(1), 3)], interleave=False, graphs=None)


def test_match_inside_loop_with_item():
    def f(x):
        r = []
        for i in range(4):
            match i % 3:
                case 0:
                    r.append("z")
                case 1:
                    print("one")
                    r.append(x.sum().item())
                case _:
                    r.append(None)
        return r

    check_calls(f, [ones(2), ones(2)], interleave=False, graphs=None)


def test_assert_on_shape_and_data():
    def f(x):
        assert x.shape[0] == 3, "bad shape"
        assert x.sum() > 0, f"neg sum {tuple(x.shape)}"
        return x * 2

    check_calls(f, [ones(3), -ones(3), ones(2), ones(3)], interleave=False, graphs=None)


def test_assert_with_item_message_after_print():
    def f(x):
        assert x.sum().item() > 0, "neg: %s" % x.tolist()
        print("ok")
        assert isinstance(x, torch.Tensor)
        return x

    check_calls(f, [ones(2), -ones(2)], interleave=False, graphs=None)


# ----------------------------------------------------------------------------- loops

def test_for_range_with_print_every_iteration():
    def f(x):
        for i in range(10):
            print("it", i)
            x = x + i
        return x, i

    check_calls(f, [torch.zeros(2), ones(2)], interleave=False, graphs=None)


def test_loop_with_print_does_not_recompile_on_second_call():
    def f(x):
        for i in range(10):
            print(i)
            x = x + i
        return x * 2

    cnt = CompileCounter()
    c = dynamo_lite.compile(f, backend=cnt)
    with contextlib.redirect_stdout(io.StringIO()):
        r1 = c(ones(2))
        first = cnt.frame_count
        r2 = c(ones(2))
    assert first >= 1
    assert cnt.frame_count == first
    assert_same(f.__call__(ones(2)) if False else r1, r2)
    with contextlib.redirect_stdout(io.StringIO()):
        assert_same(f(ones(2)), r2)


def test_loop_item_break_continue_else():
    def f(x):
        acc = []
        for i in range(6):
            v = x[i % 2].item()
            if v > 0.5 and i > 2:
                acc.append(i)
                continue
            x = x * 1.1
            if i == 5:
                break
        else:
            acc.append("else")
        return x, acc

    check_calls(f, [torch.tensor([0.4, 0.9]), torch.tensor([0.1, 0.2]), torch.tensor([0.4, 0.9])], interleave=False, graphs=None)


def test_many_item_iterations_accumulate():
    def f(x):
        total = 0.0
        for i in range(20):
            total += x[i % 3].item()
            x = x + 0.01
        return total, x

    check_calls(f, [torch.tensor([0.5, -1.0, 2.0]), torch.tensor([1.0, 1.0, 1.0])], interleave=False, graphs=None)


def test_hundred_iterations_occasional_item():
    def f(x):
        out = 0
        for i in range(100):
            if i % 10 == 0:
                out += x[0].item()
            x = x + 1
        return out, x

    check_calls(f, [torch.zeros(1), ones(1)], interleave=False, graphs=None)


def test_loop_data_dependent_branch_fifty_iterations():
    def f(x):
        total = 0
        for i in range(50):
            if x[i % 4] > 0:
                total += 1
        return total

    check_calls(f, [torch.tensor([1., -1., 2., -2.]), torch.tensor([1., 1., 2., -2.])], interleave=False, graphs=None)


def test_while_tensor_condition_with_else():
    def f(x):
        i = 0
        while x.sum() < 10:
            x = x + 1
            i += 1
            if i > 100:
                break
        else:
            i = -i
        return x, i

    check_calls(f, [torch.zeros(3), torch.full((3,), 5.0), torch.zeros(3)], interleave=False, graphs=None)


def test_while_tensor_condition_with_print():
    def f(x):
        i = 0
        while x.max() < 5:
            x = x * 2
            i += 1
            print("i", i)
        return x, i

    check_calls(f, [torch.tensor([0.3, 0.1]), torch.tensor([10.0]), torch.tensor([1.0, 2.0])], interleave=False, graphs=None)


def test_while_true_item_break_continue():
    def f(x):
        i = 0
        while True:
            i += 1
            v = (x * i).sum().item()
            if v > 10:
                break
            if i % 2:
                continue
            x = x + 0.5
        return x, i, v

    check_calls(f, [ones(2), torch.full((2,), 3.0)], interleave=False, graphs=None)


def test_while_else_runs_when_no_break_with_print():
    def f(x, stop):
        i = 0
        while i < 5:
            i += 1
            print(i)
            if i == stop:
                break
        else:
            print("else")
            x = x - 1
        return x, i

    check_calls(f, [(ones(1), 10), (ones(1), 3), (ones(1), 10)], interleave=False, graphs=None)


def test_while_continue_break_print():
    def f(x):
        i = 0
        out = []
        while i < 10:
            i += 1
            if i % 3 == 0:
                print("skip", i)
                continue
            if i == 8:
                break
            out.append(x * i)
        return out, i

    check_calls(f, [ones(1)], interleave=False, graphs=None)


def test_while_on_shape_and_data():
    def f(x):
        y = x.clone()
        while y.numel() > 1 and y.sum() > 0:
            y = y[1:]
            print(tuple(y.shape))
        return y

    check_calls(f, [torch.tensor([1., 2., 3.]), torch.tensor([-5., 1.])], interleave=False, graphs=None)


def test_walrus_in_while_condition_with_print():
    def f(x):
        data = [3, 2, 1, 0, 5]
        i = 0
        while (v := data[i]) > 0:
            print(v)
            i += 1
        return x + i, v

    check_calls(f, [ones(1)], interleave=False, graphs=None)


def test_nested_loops_break_out_of_both_with_for_else():
    def f(x):
        found = None
        for i in range(3):
            for j in range(3):
                if i * j == 2:
                    found = (i, j)
                    print("found", i, j)
                    break
            else:
                continue
            break
        return x + found[0], found

    check_calls(f, [ones(2)], interleave=False, graphs=None)


def test_nested_loops_print_break_else_and_loop_vars_after():
    def f(x):
        for i in range(3):
            for j in range(3):
                print(i, j)
                if j == i:
                    break
                x = x + j
            else:
                x = x * 100
            if i == 2:
                break
        else:
            x = x * 1000
        return x, i, j

    check_calls(f, [ones(1)], interleave=False, graphs=None)


def test_triple_nested_loops_with_print_continue_break():
    def f(x):
        total = x
        for a in range(2):
            for b in range(2):
                for c in range(2):
                    print(a, b, c)
                    if c == 1 and b == 0:
                        continue
                    if a == 1 and b == 1:
                        break
                    total = total + a * 4 + b * 2 + c
        return total

    check_calls(f, [torch.zeros(1)], interleave=False, graphs=None)


def test_nested_loops_item_break_else():
    def f(x):
        res = []
        for i in range(3):
            for j in range(3):
                v = (x * (i + j)).sum().item()
                if v > 4:
                    break
                res.append(v)
            else:
                res.append("noskip")
        return res

    check_calls(f, [ones(1), ones(2)], interleave=False, graphs=None)


def test_loop_appends_to_iterated_list():
    def f(x, lst):
        for v in lst:
            if v < 3:
                lst.append(v + 10)
            x = x + v
        return x, lst

    check_calls(f, [(ones(2), [1, 2, 5])], interleave=False, graphs=None)


def test_loop_appends_to_iterated_list_with_print():
    def f(x, lst):
        for v in lst:
            print("v", v)
            if v < 3:
                lst.append(v + 10)
            x = x + v
        return x, lst, v

    check_calls(f, [(ones(1), [1, 2, 5]), (ones(1), [7])], interleave=False, graphs=None)


def test_loop_removes_from_iterated_list_with_print():
    def f(x):
        lst = list(range(6))
        for v in lst:
            print(v)
            lst.remove(v)
        return x + len(lst), lst

    check_calls(f, [ones(1)], interleave=False, graphs=None)


def test_enumerate_and_zip_over_appended_list_with_print():
    def f(x, lst):
        out = []
        for i, v in enumerate(lst):
            print(i, v)
            if v < 3:
                lst.append(v + 10)
        for a, b in zip(lst, range(10)):
            print(a)
            if a < 2:
                lst.append(a + 20)
            out.append(b)
        return x, lst, out, i

    check_calls(f, [(ones(1), [1, 5])], interleave=False, graphs=None)


def test_dict_changed_size_during_iteration_raises():
    def f(x, d):
        for k in d:
            d["new"] = 1
        return x

    check_calls(f, [(ones(2), {"a": 2})], interleave=False, graphs=None)


def test_dict_changed_size_during_iteration_with_print_raises():
    def f(x, d):
        for k, v in d.items():
            print(k)
            d[k + "x"] = v
        return x

    check_calls(f, [(ones(1), {"a": 1})], interleave=False, graphs=None)


def test_dict_values_reassigned_during_iteration_is_fine():
    def f(x, d):
        for k, v in d.items():
            x = x * v
            print(k)
        for k in d:
            d[k] = v + 1
        return x, d

    check_calls(f, [(ones(2), {"a": 2, "b": 3})], interleave=False, graphs=None)


def test_delete_keys_while_iterating_copy_with_print():
    def f(x, d):
        for k, v in list(d.items()):
            print(k)
            if v < 0:
                del d[k]
            else:
                d[k] = v * 2
        return x, d

    check_calls(f, [(ones(1), {"a": 1, "b": -1, "c": 3})], interleave=False, graphs=None)


def test_set_changed_size_during_iteration_raises():
    def f(x):
        s = {1, 2}
        for v in s:
            s.add(v + 10)
        return x, s

    check_calls(f, [ones(1)], interleave=False, graphs=None)


def test_set_changed_size_during_iteration_with_print_raises():
    def f(x):
        s = {1, 2}
        for v in s:
            print(v)
            s.add(v + 10)
        return x, s

    check_calls(f, [ones(1)], interleave=False, graphs=None)


def test_set_argument_discard_during_iteration_with_print_raises():
    def f(x, s):
        for v in s:
            print(v)
            s.discard(v)
        return x

    check_calls(f, [(ones(1), {1, 2})], interleave=False, graphs=None)


def test_set_iterator_across_break_then_set_mutated():
    def f(x, s):
        it = iter(s)
        first = next(it)
        print(first)
        s.add(99)
        return x, list(it)

    check_calls(f, [(ones(1), {1, 2})], interleave=False, graphs=None)


def test_set_add_existing_element_during_iteration_is_fine():
    def f(x, s):
        for v in s:
            print(v)
            s.add(v)
        return x, s

    check_calls(f, [(ones(1), {1, 2})], interleave=False, graphs=None)


def test_iterate_tensor_rows_zip_enumerate():
    def f(x):
        rows = []
        for r in x:
            rows.append(r.sum())
        for i, (a, b) in enumerate(zip(x, x.flip(0))):
            rows.append(a * b + i)
        return rows

    check_calls(f, [torch.randn(3, 2), torch.randn(4, 2)], interleave=False, graphs=None)


def test_tensor_rows_data_dependent_branch():
    def f(x):
        out = []
        for row in x:
            if row.sum() > 0:
                out.append(row * 2)
            else:
                out.append(row)
        return torch.stack(out)

    check_calls(f, [torch.tensor([[1., 2.], [-3., 1.], [0., -1.]]), torch.tensor([[-1., 2.], [3., 1.], [0., 1.]])], interleave=False, graphs=None)


def test_tensor_rows_break_with_print():
    def f(x):
        ys = []
        for r in x:
            print(tuple(r.shape))
            ys.append(r)
            if len(ys) == 2:
                break
        return ys

    check_calls(f, [torch.arange(6.).reshape(3, 2)], interleave=False, graphs=None)


def test_shared_iterator_across_two_loops_with_print():
    def f(x):
        it = iter(range(10))
        for i in it:
            print("first", i)
            if i == 3:
                break
        rest = []
        for j in it:
            rest.append(j)
            if j == 6:
                print("six")
        return x + i, rest

    check_calls(f, [ones(1)], interleave=False, graphs=None)


def test_list_and_enumerate_iterators_see_appends_after_break():
    def f(x, lst):
        it = iter(lst)
        en = enumerate(lst)
        first = next(it), next(en)
        print(first)
        lst.append(99)
        return x, list(it), list(en)

    check_calls(f, [(ones(1), [1, 2])], interleave=False, graphs=None)


def test_generator_partially_consumed_across_break():
    def f(x):
        gen = (x * i for i in range(4))
        first = next(gen)
        print("mid")
        return first, list(gen)

    check_calls(f, [ones(1)], interleave=False, graphs=None)


def test_generator_prints_interleave_with_loop_body():
    def f(x):
        def gen():
            for i in range(3):
                print("yield", i)
                yield x + i

        out = []
        for v in gen():
            out.append(v)
            print("got")
        return out

    check_calls(f, [ones(1)], interleave=False, graphs=None)


def test_manual_next_loop_with_stopiteration():
    def f(x):
        it = iter([1, 2])
        while True:
            try:
                v = next(it)
            except StopIteration:
                print("done")
                break
            print(v)
            x = x + v
        return x

    check_calls(f, [ones(1)], interleave=False, graphs=None)


def test_loop_variable_unbound_after_empty_range_with_print():
    def f(x, n):
        for i in range(n):
            print(i)
        return x + i

    check_calls(f, [(ones(1), 2), (ones(1), 0), (ones(1), 3)], interleave=False, graphs=None)


def test_empty_loop_keeps_previous_value():
    def f(x):
        i = 10
        for i in range(0):
            pass
        print("after")
        return x + i

    check_calls(f, [ones(1)], interleave=False, graphs=None)


def test_variable_defined_in_some_iterations_only():
    def f(x, n):
        for i in range(n):
            print(i)
            if i == 1:
                found = i
        return x + found

    check_calls(f, [(ones(1), 3), (ones(1), 1)], interleave=False, graphs=None)


def test_del_in_loop_then_read_raises():
    def f(x):
        for i in range(3):
            y = x * i
            print(i)
            del y
        return y

    check_calls(f, [ones(1)], interleave=False, graphs=None)


def test_star_unpacking_loop_target_with_print():
    def f(x):
        for a, *b in [(1, 2, 3), (4, 5)]:
            print(a, b)
            x = x + a + sum(b)
        return x, a, b

    check_calls(f, [ones(1)], interleave=False, graphs=None)


def test_for_else_return_and_return_from_loop():
    def f(x, stop):
        for i in range(3):
            print(i)
            if i == stop:
                return x + i
        else:
            return x * 10
        return x

    check_calls(f, [(ones(1), 5), (ones(1), 1), (ones(1), 5)], interleave=False, graphs=None)


def test_range_length_from_item():
    def f(x):
        n = int(x.sum().item())
        acc = x
        for i in range(n):
            acc = acc + i
        return acc

    check_calls(f, [torch.full((2,), 1.5), torch.full((2,), 2.5), torch.zeros(2)], interleave=False, graphs=None)


def test_loop_count_from_argument_recompiles():
    def f(x, n):
        for i in range(n):
            print(i)
            x = x + i
        return x

    check_calls(f, [(ones(2), 3), (ones(2), 3), (ones(2), 5), (ones(2), 0), (ones(2), 3)], interleave=False, graphs=None)


def test_reversed_and_sorted_loops_with_print():
    def f(x):
        k = 0
        for i in reversed(range(5)):
            print(i)
            k = k * 10 + i
        for c in sorted({3: 1, 1: 2}):
            k += c
        return x + k

    check_calls(f, [ones(1)], interleave=False, graphs=None)


def test_comprehensions_with_graph_breaks():
    def f(x):
        r = [print(i) or x * i for i in range(3)]
        s = {i: x[0].item() + i for i in range(2)}
        g = sum(x[i].item() for i in range(2))
        return r, s, g

    check_calls(f, [ones(2)], interleave=False, graphs=None)
