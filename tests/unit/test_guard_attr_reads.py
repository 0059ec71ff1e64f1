"""The guard's reads of object attributes and dict items (csrc/guards.c LOAD_ATTR, LOAD_ITEM)
are exact and quiet on every interpreter.

What a cache hit must never do: answer from a stale value.  The guard remembers, per op, what
it found last: the value with the dict's version, and on 3.13, where a store into an object's
inline values (``obj.a = v``) does not give its ``__dict__`` a new version, the key's entry
index in the split dict's keys (csrc/cpython_compat.h, ``dl_dict_slot_value``).  So every way
of changing an attribute after a hit is tried here, on objects with inline values, with a
``__dict__`` materialised before or after the first hit, replaced by a plain dict, or too big
to share keys; with objects freed and new ones made at the same address; and on several
threads.  Each change is checked end to end (the compiled function returns eager's result)
and on the C program itself (it answers as the Python expression does).

What a cache hit must not do either: run code eager does not run.  Reading ``fn.__code__``
through its getter raises the audit event "object.__getattr__", which runs every
``sys.addaudithook`` hook (filelock, imported with torch's compile stack, adds one on 3.12+);
the guard reads the code directly, so a hit raises the events eager raises and no others.
"""
from __future__ import annotations

import collections
import gc
import sys
import threading

import pytest
import torch
from torch import nn

import dynamo_lite
from dynamo_lite import _C
from dynamo_lite.testing import CompileCounter, assert_same


def _prog(ops, nargs=1):
    n = nargs + 2
    return _C.GuardProgram(n, n + 8, ops, None)


def _attr_equals(name, value):
    """A program: getattr(arg0, name) == value."""
    return _prog([("LOAD_ATTR", 3, 0, 0, name), ("CHECK_EQ", 3, 0, 0, value)])


class Plain:
    def __init__(self, a=1):
        self.a = a
        self.b = "b"


# ---- the C program answers as getattr does after every kind of change -------------------
def _set_attr(o, v):
    o.a = v


def _set_builtin(o, v):
    setattr(o, "a", v)


def _set_through_dict(o, v):
    o.__dict__["a"] = v


def _set_object_setattr(o, v):
    object.__setattr__(o, "a", v)


def _del_then_set(o, v):
    del o.a
    o.a = v


def _dict_update(o, v):
    o.__dict__.update(a=v)


SETTERS = [_set_attr, _set_builtin, _set_through_dict, _set_object_setattr, _del_then_set, _dict_update]


def _fresh_inline():
    return Plain()


def _dict_materialised_first():
    o = Plain()
    o.__dict__  # noqa: B018 - materialise the instance dict before the first hit
    return o


def _dict_replaced():
    o = Plain()
    o.__dict__ = {"a": 1, "b": "b"}  # a plain (combined) dict, not the shared keys
    return o


def _many_attributes():
    o = Plain()
    for i in range(40):  # more than a shared keys table holds
        setattr(o, f"x{i}", i)
    return o


MAKERS = [_fresh_inline, _dict_materialised_first, _dict_replaced, _many_attributes]


@pytest.mark.parametrize("make", MAKERS, ids=lambda f: f.__name__.strip("_"))
@pytest.mark.parametrize("change", SETTERS, ids=lambda f: f.__name__.strip("_"))
def test_program_sees_every_attribute_change(make, change):
    p = _attr_equals("a", 1)
    o = make()
    assert p(o, {}, None) and p(o, {}, None)  # the second run answers from what it remembered
    change(o, 2)
    assert not p(o, {}, None)
    change(o, 1)
    assert p(o, {}, None)
    o.__dict__  # noqa: B018 - materialised after the first hits
    change(o, 3)
    assert not p(o, {}, None)
    del o.a
    assert not p(o, {}, None)  # AttributeError: failed, not raised
    o.a = 1
    assert p(o, {}, None)


def test_program_sees_deleted_and_readded_keys_and_other_objects():
    p = _attr_equals("b", "b")
    objs = [Plain(i) for i in range(5)]
    for o in objs:
        assert p(o, {}, None)
    objs[2].b = "c"  # same keys table, different values
    assert [p(o, {}, None) for o in objs] == [True, True, False, True, True]
    del objs[3].b
    assert [p(o, {}, None) for o in objs] == [True, True, False, False, True]
    objs[3].b = "b"
    objs[2].__dict__.clear()
    assert [p(o, {}, None) for o in objs] == [True, True, False, True, True]


def test_program_with_an_equal_but_not_identical_name():
    name = "".join(["a", "b", "c"])  # not the interned string setattr stores
    p = _attr_equals(name, 5)

    class C:
        def __init__(self):
            self.abc = 5

    o = C()
    assert p(o, {}, None) and p(o, {}, None)
    o.abc = 6
    assert not p(o, {}, None)


def test_program_after_objects_are_freed_and_addresses_reused():
    p = _attr_equals("a", 1)
    seen = collections.Counter()
    for i in range(200):
        o = Plain(i % 3)
        seen[id(o)] += 1
        assert p(o, {}, None) is (i % 3 == 1)
        del o
        gc.collect() if i % 50 == 0 else None
    assert max(seen.values()) > 1  # addresses were reused: the case is exercised


def test_program_on_a_changed_class_layout():
    class C:
        def __init__(self, first):
            if first:
                self.a = 1
                self.z = 0
            else:  # another insertion order: the dict may stop sharing keys
                self.z = 0
                self.a = 1

    p = _attr_equals("a", 1)
    x, y = C(True), C(False)
    for _ in range(3):
        assert p(x, {}, None) and p(y, {}, None)
    y.a = 7
    assert p(x, {}, None) and not p(y, {}, None)
    x.a = 7
    assert not p(x, {}, None)


def test_program_on_objects_of_classes_with_other_key_tables():
    """What the op remembered from one class's objects (where "a" sits in their keys) is not
    applied to another class's objects, whose keys hold something else there."""

    class A:
        def __init__(self):
            self.a = 1

    class B:
        def __init__(self):
            self.z = 1  # where A keeps "a"
            self.a = 2

    p = _attr_equals("a", 1)
    a, b = A(), B()
    for _ in range(3):
        assert p(a, {}, None)
        assert not p(b, {}, None)
        assert p(a, {}, None)


def test_load_item_on_an_instance_dict():
    p = _prog([("LOAD_ATTR", 3, 0, 0, "__dict__"), ("LOAD_ITEM", 4, 3, 0, "a"), ("CHECK_EQ", 4, 0, 0, 1)])
    o = Plain()
    assert p(o, {}, None) and p(o, {}, None)
    o.a = 2
    assert not p(o, {}, None)
    o.a = 1
    assert p(o, {}, None)


def test_program_on_threads():
    """Threads share one program (and what its ops remember): each answer is the one for the
    value the object held, never another thread's."""
    p = _attr_equals("a", 1)
    ones, twos = [Plain(1) for _ in range(4)], [Plain(2) for _ in range(4)]
    errors = []

    def work(k):
        try:
            for i in range(3000):
                o = ones[(i + k) % 4] if (i + k) % 2 else twos[(i + k) % 4]
                if p(o, {}, None) is not (o.a == 1):
                    errors.append((k, i))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert errors == []


def test_program_keeps_reference_counts_flat():
    class C:
        pass

    name = "".join(["sl", "ot_key_", str(id(C))])  # a str of our own, not shared
    o = C()
    setattr(o, name, 1)
    key = next(k for k in o.__dict__ if k == name)  # the key object the dict holds
    value = getattr(o, name)
    before = (sys.getrefcount(key), sys.getrefcount(value), sys.getrefcount(o))
    for _ in range(100):
        p = _attr_equals(name, 1)
        for _ in range(3):
            assert p(o, {}, None)
        del p
    assert (sys.getrefcount(key), sys.getrefcount(value), sys.getrefcount(o)) == before


# ---- end to end: the compiled call returns eager's result after each change --------------
class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.scale = 2

    def forward(self, x):
        return self.lin(x) * self.scale


def _set_scale(change, m, value):
    """``change`` (one of SETTERS, which write "a") applied to attribute "scale"."""
    how = {_set_attr: lambda: m.__setattr__("scale", value),  # nn.Module.__setattr__, as m.scale = v
           _set_builtin: lambda: setattr(m, "scale", value),
           _set_through_dict: lambda: m.__dict__.__setitem__("scale", value),
           _set_object_setattr: lambda: object.__setattr__(m, "scale", value),
           _del_then_set: lambda: (delattr(m, "scale"), setattr(m, "scale", value)),
           _dict_update: lambda: m.__dict__.update(scale=value)}
    how[change]()


@pytest.mark.parametrize("change", SETTERS, ids=lambda f: f.__name__.strip("_"))
def test_module_attribute_change_recompiles(change):
    m = Scaled()
    counter = CompileCounter()
    compiled = dynamo_lite.compile(m, backend=counter)
    x = torch.randn(2, 4)
    for value in (2, 2, 5, 5, 2, 7):
        _set_scale(change, m, value)
        assert_same(m(x), compiled(x))
    assert counter.frame_count >= 2


G = Plain(3)


def add_global_attr(x):
    return x + G.a


def test_global_object_attribute_change_recompiles():
    counter = CompileCounter()
    compiled = dynamo_lite.compile(add_global_attr, backend=counter)
    x = torch.ones(2)
    for v in (3, 3, 4):
        G.a = v
        assert_same(add_global_attr(x), compiled(x))
    setattr(G, "a", 5)
    assert_same(add_global_attr(x), compiled(x))
    G.__dict__["a"] = 3
    assert_same(add_global_attr(x), compiled(x))
    assert counter.frame_count >= 2


# ---- a hit raises only the audit events eager raises --------------------------------------
_EVENTS: list = []
_RECORDING = [False]


def _audit(event, args, recording=_RECORDING, events=_EVENTS):
    # (state bound here: the hook outlives this module's globals at interpreter exit)
    if recording[0]:
        events.append(event)


def _events_of(fn, *args):
    _EVENTS.clear()
    _RECORDING[0] = True
    try:
        fn(*args)
    finally:
        _RECORDING[0] = False
    return collections.Counter(_EVENTS)


class Layers(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(3))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def test_cache_hit_raises_no_audit_events_eager_does_not():
    sys.addaudithook(_audit)  # (a process cannot remove it again: it records only when asked)
    m = Layers()
    counter = CompileCounter()
    compiled = dynamo_lite.compile(m, backend=counter)
    x = torch.randn(2, 4)
    with torch.no_grad():
        compiled(x)
        compiled(x)
        eager = _events_of(m, x)
        hit = _events_of(compiled, x)
    assert counter.frame_count == 1
    assert hit == eager


def test_guard_on_code_still_sees_a_replaced_code():
    """The guard reads fn.__code__ without the getter: a function given new code still fails it."""

    class M(nn.Module):
        def forward(self, x):
            return x + 1

    def other_forward(self, x):
        return x - 1

    m = M()
    counter = CompileCounter()
    compiled = dynamo_lite.compile(m, backend=counter)
    x = torch.ones(2)
    assert_same(m(x), compiled(x))
    original = M.forward.__code__
    try:
        M.forward.__code__ = other_forward.__code__
        assert_same(m(x), compiled(x))
        assert_same(torch.zeros(2), compiled(x))
    finally:
        M.forward.__code__ = original
    assert_same(m(x), compiled(x))
