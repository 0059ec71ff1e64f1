"""Module globals read, rebound and mutated by compiled code, with graph breaks.

Every test compares compiled with eager through dynamo_lite.testing; known bugs are strict
xfails in tests/test_known_bugs.py.
"""
from __future__ import annotations

import contextlib
import io

import torch

import dynamo_lite
from dynamo_lite.testing import assert_same, check_calls


# ----------------------------------------------------------------------------- helpers

def ones(*shape, **kw):
    return torch.ones(*shape, **kw)


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


def test_global_read_after_a_write_through_the_globals_dict():
    # globals()["SCALE"] = v (or .update) then SCALE by name: Python reads the new value
    # (torch.compile 2.13 reads the old one)
    def f(x):
        globals()["SCALE"] = SCALE + 3
        y = x * SCALE
        globals().update(NEWGLOBAL=y.sum().item() > 0, COUNTER=COUNTER + 1)
        return y + COUNTER, NEWGLOBAL

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
