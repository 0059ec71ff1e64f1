"""A guard compares some objects by identity (a module, a function, a class); it holds them
weakly, so a compiled entry never keeps a user's model alive (csrc/guards.c, "Weakly held
objects"; guards/kinds.py ``hold``).

An op given a ``weakref.ref`` with n = 1 (CHECK_ID, LOAD_CONST) keeps a borrowed pointer and a
weak reference of the program's own: once the object dies the program fails every run (a new
object at the old address can never pass) and the cache drops its entry (csrc/cache_entry.c).
These tests drive the C program and the cache directly; tests/api/test_compiled_objects_freed.py
has what a user sees.
"""
from __future__ import annotations

import gc
import weakref

import pytest
import torch

import dynamo_lite
from dynamo_lite import _C, cache, guards
from dynamo_lite.source import LocalSource


class Obj:
    pass


def _is_obj(ref):
    """check(x, ___G, ___F): x is ref's object, the object held weakly."""
    return _C.GuardProgram(3, 4, [("CHECK_ID", 0, 0, 1, ref)], None)


def test_weak_check_id_passes_on_the_object_and_fails_on_others():
    o, other = Obj(), Obj()
    p = _is_obj(weakref.ref(o))
    assert p(o, {}, None) is True
    assert p(other, {}, None) is False
    assert p(None, {}, None) is False
    assert p.dead is False


def test_weak_check_id_keeps_nothing_alive_and_fails_for_good_once_the_object_dies():
    o = Obj()
    p = _is_obj(weakref.ref(o))
    watcher = weakref.ref(o)
    del o
    gc.collect()
    assert watcher() is None  # the program did not keep it
    assert p.dead is True
    for _ in range(50):  # whatever object sits at the old address now
        assert p(Obj(), {}, None) is False
        assert p(None, {}, None) is False


def test_weak_load_const():
    o = Obj()
    o.a = 1
    p = _C.GuardProgram(3, 5, [("LOAD_CONST", 3, 0, 1, weakref.ref(o)), ("LOAD_ATTR", 4, 3, 0, "a"),
                               ("CHECK_EQ", 4, 0, 0, 1)], None)
    assert p(None, {}, None) is True
    o.a = 2
    assert p(None, {}, None) is False
    del o
    gc.collect()
    assert p.dead and p(None, {}, None) is False


def test_the_program_releases_its_weak_references():
    o = Obj()
    progs = [_is_obj(weakref.ref(o)) for _ in range(20)]
    assert weakref.getweakrefcount(o) == 21  # each program's own, and the one given (shared)
    del progs
    gc.collect()
    assert weakref.getweakrefcount(o) == 0


@pytest.mark.parametrize("bad", [lambda o: o, lambda o: 5, lambda o: weakref.ref(Obj())])
def test_weak_op_needs_a_live_weak_reference(bad):
    o = Obj()
    with pytest.raises(TypeError, match="weakref.ref to a live object"):
        _is_obj(bad(o))


def test_objects_that_take_no_weak_reference_are_held_strongly():
    n = 10 ** 30  # an int: no weak reference
    g = guards.IdGuard(LocalSource("x"), n)
    assert g.held == (n,) and g.obj is n
    o = Obj()
    g = guards.IdGuard(LocalSource("x"), o)
    assert type(g.held) is weakref.ReferenceType and g.obj is o
    assert g == guards.IdGuard(LocalSource("x"), o)  # de-duplicated by identity, as before
    assert g != guards.IdGuard(LocalSource("x"), Obj())


def test_compiled_guard_python_check_holds_the_object_weakly_too():
    """The Python form of the check (tests, DYNAMO_LITE_PY_GUARDS=1, failure explanations)
    names the object through a weak constant: it fails, never matches None, once it died."""
    o = Obj()
    gs = guards.GuardSet()
    gs.add(guards.IdGuard(LocalSource("x"), o))
    compiled = gs.compile(("x",))
    assert compiled.py_fn(o, {}, None) and compiled.fn(o, {}, None)
    watcher = weakref.ref(o)
    del o
    gc.collect()
    assert watcher() is None
    assert compiled.py_fn(None, {}, None) is False
    assert compiled.fn(None, {}, None) is False


def test_cache_drops_an_entry_whose_object_died():
    class Holder:  # a plain object: the module it holds is guarded by identity
        def __init__(self):
            self.lin = torch.nn.Linear(3, 3)

    def f(holder, x):
        return holder.lin(x)

    dynamo_lite.reset()
    m = Holder()
    dynamo_lite.compile(f, backend="eager")(m, torch.ones(2, 3))
    code = f.__code__
    assert len(_C.cache_entries(code)) == 1
    held = [g.obj for _, g in cache.entries(code)[0].guard.exprs if isinstance(g, guards.IdGuard)]
    assert m.lin in held
    del held
    del m
    gc.collect()
    assert _C.cache_entries(code) == []  # dropped: its submodule is gone
    dynamo_lite.reset()


def test_an_object_dying_during_a_run_is_never_used():
    """A property the program reads drops the last reference to an object the program holds
    weakly and loads later in the same run: the run fails, the freed object is not touched."""
    holder = [Obj()]
    holder[0].a = 1

    class Reader:
        @property
        def p(self):
            holder.clear()
            gc.collect()
            return 1

    p = _C.GuardProgram(3, 6, [("LOAD_ATTR", 3, 0, 0, "p"), ("LOAD_CONST", 4, 0, 1, weakref.ref(holder[0])),
                               ("LOAD_ATTR", 5, 4, 0, "a"), ("CHECK_EQ", 5, 0, 0, 1)], None)
    assert p(Reader(), {}, None) is False
    assert p.dead
