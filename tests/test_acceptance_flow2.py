"""Acceptance (outside-user view): control flow, loops, functions, globals and side
effects, with graph breaks in the middle of them.

Every test runs a function eagerly and through ``dynamo_lite.compile(fn,
backend="eager")`` from identical starting states (deep-copied arguments, reset
globals, same RNG seeds), over several calls (the second call hits the cache,
changed inputs recompile), and compares everything a user observes: return
values, exceptions (type and message), stdout, mutated arguments, module
globals and objects, and object identity where it matters.

Areas: if/elif chains on Python and tensor values, ternaries, ``and``/``or``
short-circuit with side effects, ``match``, ``assert``; for over
range/list/dict/zip/enumerate/tensor rows/sets/iterators, while with
break/continue/else, nested loops, loops mutating what they iterate; graph
breaks (print, ``.item()``) inside loops, nested functions, try/finally and with
blocks (resume functions and loop-body functions, codegen/resume.py and
codegen/loops.py); closures, nonlocal, recursion, lambdas, decorators, default
arguments, compiled-calls-compiled; module globals read, rebound and mutated;
math/random/numpy inside loops.

Tests marked ``xfail(strict=True, reason="bug: ...")`` expose known dynamo_lite bugs.

PYTEST_DONT_REWRITE: the user functions under test contain ``assert`` statements whose
messages are compared; pytest must not rewrite them (its messages embed object addresses).
"""
from __future__ import annotations

import contextlib
import copy
import functools
import io
import math
import operator
import random

import numpy as np
import pytest
import torch

import dynamo_lite
from dynamo_lite.testing import CompileCounter, assert_same, assert_same_as_eager, check_calls, normalize, seed_all


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


@pytest.mark.xfail(strict=True, reason="open: generator broken out of is closed late (its finally runs after "
                                        "the code following the loop): the intercepted frame of the resume "
                                        "function that received it keeps its arguments until the call returns")
def test_break_out_of_generator_runs_its_finally_before_following_code():
    def f(x):
        def gen():
            try:
                yield 1
                yield 2
            finally:
                print("gen closed")

        for v in gen():
            if v == 1:
                break
        print("after loop")
        return x + v

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


# ----------------------------------------------------------------------------- try / with around graph breaks

def test_try_except_in_loop_with_item():
    def f(x):
        r = []
        for i in range(3):
            try:
                v = x[i].item()
                if v < 0:
                    raise ValueError(i)
                r.append(v)
            except ValueError as e:
                r.append(("err", e.args))
        return r

    check_calls(f, [torch.tensor([1., -1., 2.])], interleave=False, graphs=None)


def test_try_except_else_finally_around_print():
    def f(x):
        y = x
        try:
            y = y + 1
            print("p")
            y = y + 1
            {}["k"]
        except KeyError as e:
            y = y * 10
            print("caught", repr(e))
        else:
            y = y - 1
        finally:
            y = y + 0.5
        return y

    check_calls(f, [ones(2)], interleave=False, graphs=None)


def test_nested_try_finally_around_print():
    def f(x):
        y = 0
        try:
            try:
                y += 1
                print("inner")
                raise KeyError("a")
            finally:
                y += 10
                print("inner fin")
        except KeyError:
            y += 100
        return x + y

    check_calls(f, [ones(2)], interleave=False, graphs=None)


def test_raise_after_several_breaks_in_try_keeps_locals():
    def f(x):
        y = x
        try:
            y = y + 1
            print("p")
            y = y + 1
            z = y.sum().item()
            y = y + z
            raise ValueError
        except ValueError:
            y = y * 10
        return y

    check_calls(f, [ones(2)], interleave=False, graphs=None)


def test_raise_inside_loop_with_print_except_sees_updated_local():
    def f(x):
        try:
            for i in range(3):
                print("in try", i)
                x = x + 1
                if i == 1:
                    raise ValueError("boom")
        except ValueError as e:
            print("caught", e)
            x = x * 10
        finally:
            print("finally")
            x = x - 1
        return x

    check_calls(f, [ones(2)], interleave=False, graphs=None)


def test_raise_inside_while_with_item_except_sees_updated_local():
    def f(x):
        r = None
        i = 0
        try:
            while True:
                y = x.sum().item()
                r = i
                if i == 2:
                    raise KeyError(i)
                i += 1
        except KeyError:
            return r, y

    check_calls(f, [ones(2)], interleave=False, graphs=None)


def test_raise_inside_loop_finally_prints_updated_local():
    def f(x):
        try:
            for i in range(3):
                x = x + 1
                print(i)
                if i == 1:
                    raise KeyError(i)
        finally:
            print("x in finally", x)

    check_calls(f, [ones(2)], interleave=False, graphs=None)


def test_raise_inside_loop_without_break_except_sees_updated_local():
    def f(x):
        try:
            for i in range(3):
                x = x + 1
                if i == 1:
                    raise ValueError("boom")
        except ValueError:
            x = x * 10
        return x

    check_calls(f, [ones(2)], interleave=False, graphs=None)


def test_return_from_loop_inside_try_finally_with_print():
    def f(x):
        try:
            for i in range(3):
                print(i)
                x = x + 1
                if i == 1:
                    return x
        finally:
            print("fin", x)
            x.add_(100)

    check_calls(f, [ones(1)], interleave=False, graphs=None)


def test_continue_and_break_through_finally_with_print():
    def f(x):
        for i in range(3):
            try:
                print(i)
                x = x + 1
                if i == 1:
                    continue
                x = x * 2
            finally:
                x = x - 0.5
                print("fin", i)
        for j in range(3):
            try:
                print(j)
                if j == 1:
                    break
            finally:
                x = x + 10
        return x, i, j

    check_calls(f, [ones(1)], interleave=False, graphs=None)


def test_return_inside_try_finally_inside_loop():
    def f(x):
        for i in range(3):
            try:
                print(i)
                if i == 1:
                    return x + 7
            finally:
                x = x * 2

    check_calls(f, [ones(2)], interleave=False, graphs=None)


def test_break_in_loop_inside_try_finally():
    def f(x):
        try:
            for i in range(3):
                print(i)
                x = x + 1
                if i == 1:
                    break
        finally:
            x = x * 3
        return x

    check_calls(f, [ones(2)], interleave=False, graphs=None)


def test_no_grad_block_with_print():
    def f(x):
        with torch.no_grad():
            y = x * 2
            print("inside")
            z = y + 1
        return z, z.requires_grad, torch.is_grad_enabled()

    check_calls(f, [ones(2, requires_grad=True)], interleave=False, graphs=None)


def test_no_grad_inside_loop_with_print_and_continue():
    def f(x):
        for i in range(3):
            with torch.no_grad():
                print("in with", i)
                if i == 1:
                    continue
                x = x * 2
            x = x + 1
        return x, x.requires_grad, torch.is_grad_enabled()

    check_calls(f, [ones(2, requires_grad=True)], interleave=False, graphs=None)


def test_loop_inside_no_grad_with_print_and_break():
    def f(x):
        with torch.no_grad():
            for i in range(3):
                print(i)
                x = x * 2
                if i == 1:
                    break
        return x, torch.is_grad_enabled(), x.requires_grad

    check_calls(f, [ones(2, requires_grad=True)], interleave=False, graphs=None)


def test_return_from_no_grad_block_inside_loop():
    def f(x):
        for i in range(3):
            with torch.no_grad():
                print(i)
                if i == 1:
                    return x * 2, torch.is_grad_enabled()

    check_calls(f, [ones(2, requires_grad=True)], interleave=False, graphs=None)


def test_return_from_loop_inside_no_grad_with_print():
    def f(x):
        with torch.no_grad():
            for i in range(3):
                print(i)
                if i == 1:
                    return x * 5, torch.is_grad_enabled()
        return x

    check_calls(f, [ones(2, requires_grad=True)], interleave=False, graphs=None)


def test_return_from_loop_inside_enable_grad_with_item():
    def f(x):
        with torch.enable_grad():
            for i in range(3):
                v = x.sum().item()
                if i == 1:
                    return x * v, torch.is_grad_enabled()
        return x

    check_calls(f, [ones(2, requires_grad=True)], interleave=False, graphs=None)


def test_raise_from_loop_inside_no_grad_restores_grad_mode():
    def f(x):
        try:
            with torch.no_grad():
                for i in range(3):
                    print(i)
                    if i == 1:
                        raise ValueError("v")
        except ValueError:
            return torch.is_grad_enabled()

    check_calls(f, [ones(2, requires_grad=True)], interleave=False, graphs=None)


@contextlib.contextmanager
def _tag(name, log):
    log.append("enter " + name)
    try:
        yield name
    finally:
        log.append("exit " + name)


def test_return_from_loop_inside_user_context_manager():
    def f(x, log):
        with _tag("a", log) as t:
            for i in range(3):
                log.append(i)
                print(t, i)
                if i == 1:
                    return x + i

    check_calls(f, [(ones(2), [])], interleave=False, graphs=None)


def test_nested_user_context_managers_with_print():
    def f(x, log):
        with _tag("a", log):
            with _tag("b", log):
                print("inside")
                x = x + 1
            x = x * 2
        return x

    check_calls(f, [(ones(2), [])], interleave=False, graphs=None)


# ----------------------------------------------------------------------------- functions and closures

def test_closures_over_loop_variable_late_and_early_binding():
    def f(x):
        fs = []
        for i in range(3):
            fs.append(lambda y: y + i)
        gs = [lambda y, i=i: y * i for i in range(3)]
        return [h(x) for h in fs] + [g(x) for g in gs]

    check_calls(f, [ones(2)], interleave=False, graphs=None)


def test_closures_created_in_loop_with_print():
    def f(x):
        fs = []
        for i in range(3):
            print(i)
            fs.append(lambda: x + i)

            def g(i=i):
                print("g", i)
                return x * i
            fs.append(g)
        return [h() for h in fs]

    check_calls(f, [ones(1)], interleave=False, graphs=None)


def test_nonlocal_counter_with_print_and_item():
    def f(x):
        count = 0
        total = 0.0

        def inc(v):
            nonlocal count, total
            count += 1
            print("count", count)
            total += v.sum().item()
            return v + count

        for _ in range(3):
            x = inc(x)
        return x, count, total

    check_calls(f, [ones(2), ones(2)], interleave=False, graphs=None)


def test_closure_late_binding_across_break():
    def f(x):
        k = 1

        def g():
            return x * k

        r1 = g()
        print("mid")
        k = 10
        r2 = g()
        return r1, r2

    check_calls(f, [ones(2)], interleave=False, graphs=None)


def test_cellvar_written_in_loop_with_print():
    def f(x):
        k = 0

        def get():
            return k

        for i in range(3):
            k = k + i
            print(get())
        return x + k, get()

    check_calls(f, [ones(1)], interleave=False, graphs=None)


def test_cellvar_written_in_loop_then_raise_is_visible():
    def f(x):
        k = 0

        def get():
            return k

        try:
            for i in range(3):
                k = k + 1
                print(i)
                if i == 1:
                    raise ValueError
        except ValueError:
            pass
        return get()

    check_calls(f, [ones(1)], interleave=False, graphs=None)


def test_recursion_plain_and_with_print():
    def fact(x, n):
        if n <= 1:
            return x
        return fact(x * n, n - 1)

    def fib(x, n):
        if n <= 1:
            print("base", n)
            return x
        return fib(x, n - 1) + fib(x, n - 2)

    check_calls(fact, [(ones(2), 5), (ones(2), 3), (ones(2), 5)], interleave=False, graphs=None)
    check_calls(fib, [(ones(2), 4), (ones(2), 2)], interleave=False, graphs=None)


def test_nested_recursive_helper_appending_with_print():
    def f(x):
        acc = []

        def rec(n):
            if n == 0:
                return
            acc.append(n)
            print(n)
            rec(n - 1)

        rec(3)
        return x + len(acc), acc

    check_calls(f, [ones(1)], interleave=False, graphs=None)


def _announce(fn):
    @functools.wraps(fn)
    def wrapper(*a, **k):
        print("calling", fn.__name__)
        return fn(*a, **k) * 2
    return wrapper


@_announce
def _decorated(x, y=1):
    return x + y


def test_functools_wraps_decorator_with_print():
    def f(x):
        return _decorated(x, y=3), _decorated.__name__, _decorated.__wrapped__(x)

    check_calls(f, [ones(2), ones(2)], interleave=False, graphs=None)


@functools.lru_cache(maxsize=None)
def _square(n):
    print("compute", n)
    return n * n


@functools.lru_cache
def _ones_cached(n):
    print("computing", n)
    return torch.ones(n)


def test_lru_cache_prints_only_on_miss():
    def f(x, n):
        return x + _square(n) + _square(n)

    def g(x):
        return x + _ones_cached(2), _ones_cached(2) is _ones_cached(2)

    def reset():
        _square.cache_clear()
        _ones_cached.cache_clear()

    check_calls(f, [(ones(2), 3), (ones(2), 4), (ones(2), 3)], reset=reset, interleave=False, graphs=None)
    check_calls(g, [ones(2), ones(2)], reset=reset, interleave=False, graphs=None)


def test_functools_partial_and_reduce():
    def f(x):
        p = functools.partial(torch.add, alpha=2)
        q = functools.partial(lambda a, b, c=0: a * b + c, c=5)
        r = functools.reduce(operator.add, [x, x * 2, x * 3])
        return p(x, x), q(x, 2), q.keywords, r

    check_calls(f, [ones(2)], interleave=False, graphs=None)


def test_partial_of_print_in_loop():
    def f(x):
        p = functools.partial(print, "pre:", sep="|")
        for i in range(2):
            p(i, "z")
            x = x + i
        return x

    check_calls(f, [ones(1)], interleave=False, graphs=None)


def test_args_kwargs_keyword_only():
    def g(x, *args, scale=1, **kw):
        s = sum(args)
        for k, v in sorted(kw.items()):
            x = x + v
        return x * scale + s, args, kw

    def f(x):
        return g(x, 1, 2, scale=3, b=4, a=5), g(x), g(x, scale=0, z=1)

    check_calls(f, [ones(2)], interleave=False, graphs=None)
    check_calls(g, [(ones(1), 1, 2), (ones(1),)], interleave=False, graphs=None)


def test_kwargs_loop_with_print():
    def g(x, **kw):
        for k, v in kw.items():
            print(k)
            x = x * v
        return x, kw

    check_calls(lambda x: g(x, a=2, b=3), [ones(1)], interleave=False, graphs=None)


def test_call_forms_and_type_errors():
    def f(x, mode):
        def g(a, b):
            return a - b

        def h(a, *, b):
            return a - b

        if mode == 0:
            return g(b=x, a=1), g(*[x, 2]), g(**{"a": x, "b": 3})
        if mode == 1:
            return g(x)
        return h(x, 1)

    check_calls(f, [(ones(2), 0), (ones(2), 1), (ones(2), 2)], interleave=False, graphs=None)


def test_varargs_with_mixed_callables_and_tensors():
    def g(x, *args):
        total = x
        for a in args:
            if isinstance(a, torch.Tensor) and a.sum() > 0:
                total = total + a
            elif callable(a):
                total = a(total)
        return total

    check_calls(lambda x: g(x, x, -x, lambda t: t * 3, 4), [ones(1), ones(1)], interleave=False, graphs=None)


def _with_default(x, acc=[]):  # noqa: B006 - the mutable default is the point
    acc.append(len(acc))
    print("len", len(acc))
    return x + len(acc), list(acc)


def test_mutable_default_argument_mutated_across_calls():
    check_calls(_with_default, [ones(1), ones(1), ones(1)], reset=lambda: _with_default.__defaults__[0].clear(), snapshot=lambda: list(_with_default.__defaults__[0]), interleave=False, graphs=None)


def test_function_defaults_changed_between_calls():
    def f(x, a=2):
        return x * a

    c = dynamo_lite.compile(f, backend="eager")
    for d in [(2,), (7,), (1,), (7,)]:
        f.__defaults__ = d
        assert_same(f(ones(2)), c(ones(2)))


def test_functions_returning_functions():
    def make_adder(n):
        def add(x):
            return x + n
        return add

    def f(x):
        a = make_adder(3)
        b = make_adder(x)
        return a(x), b(x), a(b(x))

    def g(x):
        def outer(a):
            def mid(b):
                def inn(c):
                    return a + b + c
                return inn
            return mid
        return outer(x)(2)(3)

    check_calls(f, [ones(2)], interleave=False, graphs=None)
    check_calls(g, [ones(2)], interleave=False, graphs=None)


def test_returned_closure_is_callable_after_compiled_call():
    def f(x):
        k = x * 2
        print("made")
        return lambda y: y + k

    e = f(ones(2))
    c = dynamo_lite.compile(f, backend="eager")
    with contextlib.redirect_stdout(io.StringIO()):
        h = c(ones(2))
    assert_same(e(ones(2)), h(ones(2)))


def test_compiled_function_called_from_compiled_function():
    inner = dynamo_lite.compile(lambda x: x * 2 + 1, backend="eager")

    def f(x):
        y = inner(x)
        print("between")
        return inner(y)

    check_calls(f, [ones(2), ones(2)], interleave=False, graphs=None)


def test_compiled_inner_with_break_raises_into_outer():
    def inner_fn(x):
        print("inner")
        if x.sum() < 0:
            raise ValueError("negative")
        return x + 1

    inner = dynamo_lite.compile(inner_fn, backend="eager")

    def f(x):
        try:
            return inner(x) * 2
        except ValueError as e:
            return str(e)

    check_calls(f, [ones(2), -ones(2), ones(2)], interleave=False, graphs=None)


def test_nested_calls_with_breaks_in_callee():
    def f(x):
        def a(t):
            print("a")
            return b(t) + 1

        def b(t):
            y = t.sum().item()
            return t * y

        return a(x)

    check_calls(f, [ones(2), torch.full((2,), 3.0)], interleave=False, graphs=None)


def test_nested_function_raising_after_print_keeps_caller_local():
    def f(x):
        y = x + 1

        def inner(t):
            t = t * 2
            print("in")
            raise ValueError("bad %d" % t.numel())

        try:
            y = inner(y)
        except ValueError as e:
            y = y + 100
            msg = str(e)
        return y, msg

    check_calls(f, [ones(2)], interleave=False, graphs=None)


def test_nested_function_try_finally_with_print():
    def f(x):
        def inner(t):
            try:
                print("in")
                return t + 1
            finally:
                print("fin")
        return inner(x) * 2

    check_calls(f, [ones(2)], interleave=False, graphs=None)


def test_nested_function_with_no_grad_and_print():
    def f(x):
        def inner(v):
            with torch.no_grad():
                print("inner")
                return v * 2
        y = inner(x)
        return y, y.requires_grad, torch.is_grad_enabled()

    check_calls(f, [ones(2, requires_grad=True)], interleave=False, graphs=None)


def test_closure_cell_changed_between_calls():
    def mk():
        k = [1]
        scale = 2

        def f(x):
            return x * scale + k[0]

        def setscale(v):
            nonlocal scale
            scale = v

        return f, setscale, k

    f, setscale, k = mk()
    c = dynamo_lite.compile(f, backend="eager")
    for step in [lambda: None, lambda: setscale(5), lambda: k.__setitem__(0, 9), lambda: setscale(0.5)]:
        step()
        assert_same(f(ones(2)), c(ones(2)))


class _Base:
    def step(self, x, i):
        return x + i


class _Child(_Base):
    def run_break_first(self, x):
        print("a")
        return super().step(x, 1)

    def run_loop(self, x):
        for i in range(3):
            print(i)
            x = super().step(x, i) * 2
        return x


def test_zero_arg_super_after_break():
    check_calls(lambda x: _Child().run_break_first(x), [ones(1)], interleave=False, graphs=None)


def test_zero_arg_super_in_loop_with_print():
    check_calls(lambda x: _Child().run_loop(x), [ones(1)], interleave=False, graphs=None)


def test_locals_inside_loop_with_print():
    def f(x):
        for i in range(2):
            y = i
            print(sorted(locals()))
        return x

    check_calls(f, [ones(1)], interleave=False, graphs=None)


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(2, 2)
        self.calls = 0

    def forward(self, x):
        for i in range(3):
            self.calls += 1
            print("iter", i, self.calls)
            x = self.lin(x)
        return x


def test_module_forward_loop_with_print_counts_attribute():
    torch.manual_seed(0)
    m1 = _Net()
    torch.manual_seed(0)
    m2 = _Net()
    c = dynamo_lite.compile(m2, backend="eager")
    x = ones(1, 2)
    b1, b2 = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(b1):
        r1 = [m1(x), m1(x)]
    with contextlib.redirect_stdout(b2):
        r2 = [c(x), c(x)]
    assert_same(r1, r2)
    assert b1.getvalue() == b2.getvalue()
    assert m1.calls == m2.calls == 6


# ----------------------------------------------------------------------------- globals

COUNTER = 0
SCALE = 2.0
REG: list = []
TABLE: dict = {}
SEEN: set = set()
FLAG = True


class _Cfg:
    pass


CFG = _Cfg()


def _reset_globals():
    global COUNTER, SCALE, REG, FLAG
    COUNTER = 0
    SCALE = 2.0
    REG = []
    TABLE.clear()
    SEEN.clear()
    FLAG = True
    CFG.flag = True
    CFG.n = 0
    globals().pop("NEWGLOBAL", None)


def _globals_state():
    return dict(COUNTER=COUNTER, SCALE=SCALE, REG=list(REG), TABLE=dict(TABLE), SEEN=sorted(SEEN),
                flag=CFG.flag, n=CFG.n, new=globals().get("NEWGLOBAL"))


def _same_g(fn, calls=None):
    check_calls(fn, calls or [ones(2), ones(2), torch.full((2,), 3.0)], reset=_reset_globals, snapshot=_globals_state, interleave=False, graphs=None)


def test_global_counter_incremented():
    def f(x):
        global COUNTER
        COUNTER += 1
        return x * SCALE + COUNTER

    _same_g(f)


def test_global_counter_in_loop_with_print_and_list_append():
    def f(x):
        global COUNTER
        for i in range(3):
            COUNTER += 1
            print("c", COUNTER)
            REG.append(COUNTER)
        return x + COUNTER

    _same_g(f)


def test_global_write_around_item():
    def f(x):
        global COUNTER
        COUNTER += 1
        y = x.sum().item()
        COUNTER += int(y)
        TABLE[COUNTER] = y
        return x + COUNTER

    _same_g(f)


def test_global_rebound_then_read_in_same_frame():
    def f(x):
        global SCALE
        r1 = x * SCALE
        SCALE = SCALE * 3
        r2 = x * SCALE
        return r1, r2

    _same_g(f)


def test_global_list_returned_is_the_global_object():
    def f(x):
        REG.append(x)
        print(len(REG))
        REG.append(x * 2)
        return REG

    c = dynamo_lite.compile(f, backend="eager")
    _reset_globals()
    with contextlib.redirect_stdout(io.StringIO()):
        r = c(ones(1))
    assert r is REG and len(REG) == 2
    _same_g(f)


def test_global_object_attribute_flipped_each_call():
    def f(x):
        CFG.n += 1
        if CFG.flag:
            CFG.flag = False
            return x + CFG.n
        CFG.flag = True
        return x - CFG.n

    _same_g(f, [ones(1)] * 4)


def test_global_container_rebound_across_break():
    def f(x):
        global REG
        REG = REG + [1]
        print("rebound")
        REG.append(2)
        return x

    _same_g(f)


def test_global_written_in_try_finally_with_exception():
    def f(x):
        global COUNTER
        try:
            COUNTER += 1
            print("in try")
            COUNTER += 10
            raise KeyError("k")
        finally:
            COUNTER += 100

    _same_g(f)


def test_global_counter_in_data_dependent_loop_with_set():
    def f(x):
        global COUNTER
        for i in range(4):
            COUNTER += 1
            if x.sum() > COUNTER:
                continue
            SEEN.add(i)
        return x

    _same_g(f)


def test_new_global_created_across_break():
    def f(x):
        global NEWGLOBAL
        NEWGLOBAL = x + 1
        print("set")
        return NEWGLOBAL * 2

    _same_g(f)


def test_global_temporarily_changes_type_across_break():
    def f(x):
        global COUNTER
        old = COUNTER
        COUNTER = "str"
        print(COUNTER)
        COUNTER = old + 1
        return x

    _same_g(f)


def test_globals_changed_between_calls_are_seen():
    def f(x):
        if FLAG:
            return x * SCALE + len(REG)
        return x - SCALE

    global FLAG, SCALE
    c = dynamo_lite.compile(f, backend="eager")
    _reset_globals()
    for flag, scale, app in [(True, 2.0, 0), (True, 2.0, 1), (False, 2.0, 0), (True, 5.0, 2), (False, 0.5, 0)]:
        FLAG, SCALE = flag, scale
        REG.extend([0] * app)
        assert_same(f(ones(2)), c(ones(2)))
    _reset_globals()


def _helper(x):
    return x + 1


def test_global_function_rebound_between_calls_loop_with_print():
    def f(x):
        for i in range(2):
            print(i)
            x = _helper(x)
        return x

    global _helper
    orig = _helper
    c = dynamo_lite.compile(f, backend="eager")
    try:
        for h in [orig, lambda t: t * 10, lambda t: t - 1, orig]:
            _helper = h
            with contextlib.redirect_stdout(io.StringIO()):
                assert_same(f(ones(2)), c(ones(2)))
    finally:
        _helper = orig


# ----------------------------------------------------------------------------- side effects

def test_returned_argument_container_keeps_identity_across_break():
    def f(x, lst, d):
        lst.append(x)
        print("p")
        lst.append(1)
        d2 = d
        d2["k"] = x
        return lst, d2, x

    c = dynamo_lite.compile(f, backend="eager")
    for _ in range(2):
        lst, d, x = [], {}, ones(1)
        with contextlib.redirect_stdout(io.StringIO()):
            r = c(x, lst, d)
        assert r[0] is lst and r[1] is d and r[2] is x
    check_calls(f, [(ones(1), [], {})], interleave=False, graphs=None)


def test_list_iadd_alias_identity():
    def f(x, lst):
        y = lst
        y += [1]
        return y

    c = dynamo_lite.compile(f, backend="eager")
    lst = [0]
    assert c(ones(1), lst) is lst and lst == [0, 1]


def test_local_aliasing_preserved_across_break():
    def f(x):
        a = [x]
        b = a
        b.append(2)
        c = dict(k=a)
        t = (a, a)
        print("brk")
        c["k"].append(3)
        t[0].append(4)
        return a is b, c["k"] is a, t[0] is t[1], a

    check_calls(f, [ones(1)], interleave=False, graphs=None)


class _Obj:
    pass


def _obj():
    o = _Obj()
    o.c = 1
    return o


def test_attribute_mutation_and_delete_across_break():
    def f(x, obj):
        obj.a = x
        print("set a")
        obj.b = obj.a * 2
        del obj.c
        return obj

    c = dynamo_lite.compile(f, backend="eager")
    o = _obj()
    with contextlib.redirect_stdout(io.StringIO()):
        assert c(ones(1), o) is o
    check_calls(f, [(ones(1), _obj())], interleave=False, graphs=None)


def test_list_dict_set_method_sequences():
    def f(x, lst, d, s):
        lst[:] = [x, x + 1, x - 1]
        lst.sort(key=lambda t: t.sum().item())
        lst.reverse()
        lst.insert(0, 5)
        lst.pop()
        lst.extend([7])
        lst.remove(5)
        d.update(a=1)
        d.setdefault("b", []).append(x)
        d.pop("z", None)
        s |= {1, 2}
        s.discard(1)
        s.add(9)
        print(sorted(s))
        d.popitem()
        return len(lst), d, s

    check_calls(f, [(ones(1), [1, 2, 3], {"z": 1, "q": 2}, {5})], interleave=False, graphs=None)


def test_print_order_relative_to_mutations():
    def f(x, lst, d):
        print("before", len(lst))
        lst.append(1)
        print("after", len(lst), lst)
        for i in range(3):
            d[i] = x + i
            print("d has", sorted(d))
        lst.append(2)
        print("end", lst)
        return x

    check_calls(f, [(ones(1), [], {})], interleave=False, graphs=None)


def test_closure_mutating_argument_in_loop_with_print():
    def f(x, lst):
        def add(v):
            lst.append(v)
            print("added", v, len(lst))

        for i in range(3):
            add(i)
        return x

    check_calls(f, [(ones(1), [])], interleave=False, graphs=None)


def test_mutations_before_exceptions_are_kept():
    def f(x, d, lst, o, mode):
        d["a"] = 1
        lst.append(1)
        o.a = 5
        if mode == 0:
            print("p")
            d["b"] = 2
            raise RuntimeError("after mutate")
        if mode == 1:
            lst[5] = 3
        if mode == 2:
            return d["missing"]
        if mode == 3:
            return o.missing
        return x + lst

    for mode in range(5):
        check_calls(f, [(ones(1), {}, [], _obj(), mode)], interleave=False, graphs=None)


def test_mutation_of_list_items_after_item():
    def f(x, lst):
        lst.append(x)
        y = lst[-1].sum().item()
        lst.append(y)
        del lst[0]
        return lst

    check_calls(f, [(ones(1), [9]), (torch.full((1,), 2.0), [9])], interleave=False, graphs=None)


def test_in_place_tensor_mutation_of_argument_in_loop_with_print():
    def f(x, y):
        for i in range(3):
            x.add_(i)
            print(i, x.sum().item())
            y.mul_(2)
        return x is not None

    check_calls(f, [(ones(2), ones(2))], interleave=False, graphs=None)


# ----------------------------------------------------------------------------- math / random / numpy

def test_math_in_loop_with_item():
    def f(x):
        s = 0.0
        for i in range(5):
            s += math.sqrt(i) + math.sin(x[i].item())
            x = x * math.pi
        return s, x

    check_calls(f, [torch.rand(5), torch.rand(5)], interleave=False, graphs=None)


def test_python_random_and_torch_rand_in_loop():
    def f(x):
        vals = []
        for i in range(4):
            vals.append(random.random())
            x = x + torch.rand(2)
        return x, vals

    check_calls(f, [ones(2), ones(2)], interleave=False, graphs=None)


def test_numpy_in_loop_with_item():
    def f(x):
        a = np.arange(4.0)
        for i in range(3):
            a = a * 2 + np.float64(x[i].item())
        return torch.from_numpy(a) + x.sum(), a.tolist()

    check_calls(f, [ones(4), torch.arange(4.0)], interleave=False, graphs=None)


def test_numpy_random_in_loop():
    def f(x):
        rs = []
        for i in range(3):
            rs.append(np.random.rand())
            x = x * 2
        return x, rs

    check_calls(f, [ones(1), ones(1)], interleave=False, graphs=None)


def test_sorted_max_with_item_keys():
    def f(x):
        r = [x[i] if x[i] > 0 else -x[i] for i in range(3)]
        return (max(r, key=lambda t: t.item()), min(x.tolist()),
                sorted([x[1], x[0], x[2]], key=lambda t: t.item()),
                [v for v in x.tolist() if v > 0], any(v > 2 for v in x.tolist()))

    check_calls(f, [torch.tensor([-3., 1., 2.]), torch.tensor([3., -1., 0.5])], interleave=False, graphs=None)


def test_assert_same_as_eager_helper_on_loop_with_break():
    def f(x, lst):
        for v in lst:
            print(v)
            x = x * v
            if x.sum() > 20:
                break
        lst.append(int(x.sum().item()))
        return x

    assert_same_as_eager(f, ones(2), [2, 3, 4, 5])
