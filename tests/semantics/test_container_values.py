"""Containers built, mutated and returned; values moved between objects, containers and globals.

Every test compares compiled with eager through dynamo_lite.testing; known bugs are strict
xfails in tests/test_known_bugs.py.
"""
import collections
import typing

import pytest
import torch

import dynamo_lite
from dynamo_lite.testing import CompileCounter
from dynamo_lite.testing import check, check_calls


Point = collections.namedtuple("Point", ["x", "y"])


class Pair(typing.NamedTuple):
    a: torch.Tensor
    b: int = 2


# ---------------------------------------------------------------- containers

def test_list_build_mutate_return():
    def f(x, l):
        out = [x, x * 2]
        out.append(x + 1)
        out.extend([x - 1])
        out.insert(1, x * 0)
        del out[0]
        popped = out.pop()
        out[0] = out[0] + 5
        out += [popped]
        out.reverse()
        l.append(len(out))
        l[0] = "changed"
        return out, out[1:3], out[::-1], out * 2 if False else out.index(out[1])

    check(f, torch.ones(2), ["orig", 0])


def test_list_sort_remove_clear_on_input():
    def f(x, l):
        l.sort(reverse=True)
        l.remove(2)
        c = list(l)
        l.clear()
        return x * sum(c), c

    check(f, torch.ones(2), [3, 1, 2, 5])


def test_tuple_ops_unpacking_and_star():
    def f(t):
        a, *mid, z = t
        (p, q), r = (t[0], t[1]), t[2]
        return a + z, len(mid), p * q * r, t + (1,), t.count(1) if False else t[-2:], (*mid, a)

    check(f, (torch.ones(2), torch.ones(2) * 2, torch.ones(2) * 3, torch.ones(2) * 4))


def test_dict_build_mutate_iterate():
    def f(x, d):
        out = {"a": x, "b": x * 2}
        out["c"] = x + 1
        out.update({"d": x - 1}, e=x * 0)
        del out["a"]
        v = out.pop("b")
        default = out.setdefault("z", x * 5)
        keys = list(out)
        d["new"] = v.sum()
        d.pop("drop")
        merged = {**out, **{"m": 1}}
        return out, keys, default, merged, list(out.values())[0], list(out.items())[-1], "c" in out, d | {"q": 1}

    check(f, torch.ones(2), {"drop": 1, "keep": 2})


def test_dict_with_tensor_values_and_non_string_keys():
    def f(d):
        return {k: v * k for k, v in d.items()}, sorted(d), max(d, key=lambda k: d[k].sum())

    check(f, {1: torch.ones(2), 3: torch.ones(2) * 5, 2: torch.zeros(2)})


def test_set_and_frozenset_operations():
    def f(x, s):
        t = {1, 2, 3}
        t.add(4)
        t.discard(1)
        u = t | s
        i = t & s
        s.add(99)
        return x * len(u), sorted(u), sorted(i), 2 in t, frozenset([1, 2]) == frozenset([2, 1]), sorted(t - s)

    check(f, torch.ones(2), {3, 4, 5})


def test_namedtuple_create_access_replace():
    def f(p):
        q = Point(p.x * 2, y=p.y + 1)
        r = q._replace(y=q.y * 0)
        pa = Pair(p.x)
        return q, r, q.x + r.y, q._fields, pa, pa.b, type(q).__name__, tuple(q)[0], q._asdict()

    check(f, Point(torch.ones(2), torch.ones(2)))


def test_ordered_dict_defaultdict_deque_counter():
    def f(x):
        od = collections.OrderedDict()
        od["b"] = x
        od["a"] = x * 2
        od.move_to_end("b")
        dd = collections.defaultdict(list)
        dd["k"].append(x)
        dd["k"].append(x + 1)
        dq = collections.deque([1, 2], maxlen=3)
        dq.append(3)
        dq.append(4)
        dq.appendleft(0)
        c = collections.Counter("abca")
        return od, list(od.keys()), dd["k"], dict(dd).keys() == {"k"}.__iter__ and list(dd), list(dq), c["a"]

    check(f, torch.ones(2), graphs=None)


def test_defaultdict_and_ordereddict_arguments_mutated():
    def f(x, dd, od):
        dd["new"] += 1
        od["z"] = x.sum()
        od.popitem(last=False)
        return x + dd["a"]

    check(f, torch.ones(2), collections.defaultdict(int, a=3), collections.OrderedDict(a=1, b=2), graphs=None)


def test_nested_containers_round_trip():
    def f(batch):
        out = {"feats": [t * 2 for t in batch["feats"]], "meta": dict(batch["meta"]), "pair": batch["pair"][::-1]}
        out["meta"]["n"] = len(batch["feats"])
        batch["seen"] = True
        return out

    check(f, {"feats": [torch.ones(2), torch.zeros(2)], "meta": {"name": "b"}, "pair": (1, torch.ones(1))})


def test_returned_objects_keep_identity_and_aliasing():
    def f(x, l):
        y = x * 2
        l.append(y)
        return y, y, l, x

    opt = dynamo_lite.compile(f, backend=CompileCounter())
    for fn in (f, opt):
        x, l = torch.ones(2), []
        a, b, l2, x2 = fn(x, l)
        assert a is b, fn
        assert l2 is l and l[0] is a
        assert x2 is x


def test_same_list_passed_twice_aliases():
    def f(a, b, x):
        a.append(1)
        b.append(2)
        return x * len(a), a is b

    def run(fn):
        l = []
        return fn(l, l, torch.ones(2)), l

    opt = dynamo_lite.compile(f, backend=CompileCounter())
    from dynamo_lite.testing import assert_same
    assert_same(run(f), run(opt))


def test_same_tensor_passed_twice_inplace_alias():
    def f(a, b):
        a.add_(1)
        return b * 2, a is b

    def run(fn):
        t = torch.zeros(2)
        return fn(t, t), t

    opt = dynamo_lite.compile(f, backend=CompileCounter())
    from dynamo_lite.testing import assert_same
    assert_same(run(f), run(opt))
    assert_same(run(f), run(opt))


def test_list_comprehension_over_zip_and_slices_of_tensor_list():
    def f(xs):
        pairs = [(a, b) for a, b in zip(xs[:-1], xs[1:])]
        return [a - b for a, b in pairs], len(pairs)

    check(f, [torch.full((2,), float(i)) for i in range(4)])


def test_container_length_change_recompiles():
    def f(xs):
        return sum(xs)

    check_calls(f, [([torch.ones(2)] * 2,), ([torch.ones(2)] * 3,), ([torch.ones(2)] * 2,)])


# ---------------------------------------------------------------- values moved between objects, containers, globals

class _Obj:
    def __init__(self):
        self.x = torch.ones(2)
        self.y = torch.zeros(2)
        self.items = [torch.ones(1)]


GA = torch.ones(2)
GB = torch.zeros(2)


def _reset_globals():
    globals().update(GA=torch.ones(2), GB=torch.zeros(2))


MOVES = {}


def _move(fn):
    MOVES[fn.__name__] = fn
    return fn


@_move
def swap_dict_items(x, o, d, l):
    d["a"], d["b"] = d["b"], d["a"]
    return x + d["a"]


@_move
def swap_object_attributes(x, o, d, l):
    o.x, o.y = o.y, o.x
    return o.x + x


@_move
def move_between_containers(x, o, d, l):
    o.items.append(l.pop(0))
    d["moved"] = o.items[0]
    return x


@_move
def swap_globals(x, o, d, l):
    global GA, GB
    GA, GB = GB, GA
    return GA + x


@_move
def swap_globals_then_break(x, o, d, l):
    global GA, GB
    GA, GB = GB, GA
    print("b")
    return GA + x


@_move
def attribute_stored_elsewhere_then_replaced(x, o, d, l):
    old = o.x
    l.append(old)
    o.x = x * 3
    d["old"] = old
    return old


@_move
def argument_rebound_and_old_value_mutated(x, o, d, l):
    old_l = l
    l = [x]
    old_l.append(5)
    return l, old_l


@_move
def dict_value_replaced_then_read(x, o, d, l):
    v = d["a"]
    d["a"] = v + 1
    d["c"] = v
    return v, d["a"]


@_move
def closure_cells_swapped(x, o, d, l):
    a, b = x, x * 2

    def sw():
        nonlocal a, b
        a, b = b, a

    sw()
    return a - b


@_move
def attribute_list_replaced_then_old_mutated(x, o, d, l):
    inner = o.items
    o.items = [x]
    inner[0] = x * 7
    return inner, o.items


@_move
def slice_assign_from_itself(x, o, d, l):
    l[:] = l[::-1]
    l.extend(l)
    return x


@_move
def dict_updated_from_itself(x, o, d, l):
    d.update({k + "2": v for k, v in d.items()})
    return x


@pytest.mark.parametrize("name", sorted(MOVES))
def test_values_moved_between_places(name):
    check(MOVES[name], torch.ones(2), _Obj(), {"a": torch.ones(1), "b": torch.zeros(1)},
          [torch.ones(3), torch.zeros(3)], reset=_reset_globals, snapshot=lambda: (GA, GB), graphs=None)
