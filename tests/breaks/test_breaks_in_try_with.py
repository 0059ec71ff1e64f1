"""Graph breaks inside try/except/finally and with-blocks.

Every test compares compiled with eager through dynamo_lite.testing; known bugs are strict
xfails in tests/test_known_bugs.py.
"""
from __future__ import annotations

import contextlib

import torch

from dynamo_lite.testing import check_calls
from dynamo_lite.testing import print_with_graph_break as print  # noqa: A001 - a graph break at each print


# ----------------------------------------------------------------------------- helpers

def ones(*shape, **kw):
    return torch.ones(*shape, **kw)


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
