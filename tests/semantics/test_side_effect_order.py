"""The order of side effects (lists, dicts, attributes, prints) around graph breaks.

Every test compares compiled with eager through dynamo_lite.testing; known bugs are strict
xfails in tests/test_known_bugs.py.
"""
from __future__ import annotations

import contextlib
import io

import torch

import dynamo_lite
from dynamo_lite.testing import check_calls


# ----------------------------------------------------------------------------- helpers

def ones(*shape, **kw):
    return torch.ones(*shape, **kw)


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
