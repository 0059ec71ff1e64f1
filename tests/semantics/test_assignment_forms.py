"""Assignment forms around tensor code: walrus, chained comparisons, augmented assignment, del, star unpacking.

Every test compares compiled with eager through dynamo_lite.testing; known bugs are strict
xfails in tests/test_known_bugs.py.
"""

import torch

import dynamo_lite
from dynamo_lite.testing import assert_same, check_calls


def t(*vals):
    return torch.tensor([float(v) for v in vals])


X1, X2 = (t(1, 2, 3),), (t(-4, 5, 0.5, 2),)


# ---------------------------------------------------------------- walrus / comparisons

def test_walrus_in_if_and_comprehension():
    def f(x):
        if (n := x.shape[0]) > 2:
            y = x * n
        else:
            y = x - n
        ys = [z for v in range(n) if (z := v * 2) > 1]
        return y, ys, n, z

    check_calls(f, [X1, X2, (t(1, 2),)])


def test_walrus_with_item_break():
    def f(x):
        if (s := x.sum().item()) > 3:
            return x * s, s
        return x + (m := x.max()), m

    check_calls(f, [X1, (t(0, 1),)])


def test_walrus_in_while():
    def f(x):
        out = []
        i = 0
        while (i := i + 1) < x.shape[0] + 1:
            out.append(x[i - 1] * i)
        return torch.stack(out), i

    check_calls(f, [X1, X2])


def test_chained_comparisons():
    def f(x, a):
        n = x.shape[0]
        r = []
        r.append(0 < n < 4)
        r.append(1 <= a < n <= 10)
        r.append(a == n == 3)
        r.append(n > a > 0 > -1)
        r.append(a is not None is not False)
        return x * (2 if 0 < a < n else 3), r

    check_calls(f, [(t(1, 2, 3), 2), (t(1, 2, 3, 4, 5), 7), (t(1, 2, 3), 0)])


def test_chained_comparison_tensors():
    def f(x):
        return (0 < x.sum() < 10), (x.shape[0] < 5 > 2)

    check_calls(f, [X1, (t(100, 1),)])


def test_chained_comparison_short_circuit_side_effect():
    def g(v, log):
        log.append(v)
        return v

    def f(x, log):
        b = g(3, log) < g(1, log) < g(5, log)
        print(log[-2:])
        return x + len(log), b

    check_calls(f, [(X1[0], []), (X2[0], [0])])


# ---------------------------------------------------------------- augmented assignment

class Box:
    def __init__(self, v):
        self.v = v
        self.items = [1, 2]


class Acc:
    def __init__(self, v):
        self.v = v
        self.ops = []

    def __iadd__(self, other):
        self.v = self.v + other
        self.ops.append("iadd")
        return self


class AddOnly:
    def __init__(self, v):
        self.v = v

    def __add__(self, other):
        return AddOnly(self.v + other)


def test_augassign_attribute():
    def f(x, b):
        b.v += x
        b.v *= 2
        b.items += [3]
        return b.v.sum(), b.items

    check_calls(f, [(t(1, 2), Box(t(1, 1))), (t(3, 4, 5), Box(t(0, 0, 0)))])


def test_augassign_subscripts_and_slices():
    def f(x, lst):
        lst[0] += 1
        lst[-1] *= x.shape[0]
        lst[1:3] += [9]
        x2 = x.clone()
        x2[1:] += 10
        x2[0] -= x2[-1]
        return x2, lst

    check_calls(f, [(t(1, 2, 3), [1, 2, 3, 4]), (t(4, 5), [5, 6, 7])])


def test_augassign_list_slice_in_place_identity():
    def f(x, lst):
        alias = lst
        lst += [x.shape[0]]
        lst[:] += [0]
        return alias is lst, lst, x * 2

    check_calls(f, [(t(1, 2), [1]), (t(1, 2, 3), [])])


def test_augassign_dict_entries():
    def f(x, d):
        d["a"] += 1
        d["t"] = d.get("t", 0) + x
        d["t"] += x
        d.setdefault("n", 0)
        d["n"] += x.shape[0]
        return d["t"] * d["a"], d

    check_calls(f, [(t(1, 2), {"a": 1}), (t(3), {"a": 5, "n": 2, "t": t(1)})])


def test_augassign_user_iadd():
    def f(x, a):
        alias = a
        a += x
        a += 1
        return a.v, a is alias, a.ops

    check_calls(f, [(t(1, 2), Acc(t(0, 1))), (t(5), Acc(t(2)))])


def test_augassign_fallback_to_add():
    def f(x, a):
        alias = a
        a += x
        return a.v, a is alias, alias.v

    check_calls(f, [(t(1, 2), AddOnly(t(0, 1))), (t(5), AddOnly(t(2)))])


def test_augassign_user_iadd_on_attribute_with_break():
    def f(x, b):
        b.v += x
        print("mid", b.v.shape)
        b.v += 1
        return b.v, b.v.ops

    check_calls(f, [(t(1, 2), Box(Acc(t(0, 1)))), (t(3), Box(Acc(t(1))))])


def test_augassign_tuple_and_str():
    def f(x, tup, s):
        orig = tup
        tup += (x.shape[0],)
        s += "!" * x.shape[0]
        s *= 2
        return tup, orig, s, x

    check_calls(f, [(t(1, 2), (1,), "a"), (t(1), (), "bc")], graphs=None)


def test_augassign_tensor_in_place_alias():
    def f(x):
        y = x
        y += 1
        z = x[1:]
        z *= 2
        return x, y is x

    check_calls(f, [X1, X2])


def test_augassign_int_global():
    global _COUNTER
    _COUNTER = 0

    def f(x):
        global _COUNTER
        _COUNTER += x.shape[0]
        return x * _COUNTER

    cfn = dynamo_lite.compile(f, backend="eager")
    eager = [f(t(1, 2)), f(t(1, 2, 3))]
    e_counter = _COUNTER
    _COUNTER = 0
    comp = [cfn(t(1, 2)), cfn(t(1, 2, 3))]
    assert_same(eager, comp)
    assert _COUNTER == e_counter


# ---------------------------------------------------------------- del

def test_del_local_then_unbound():
    def f(x):
        y = x * 2
        del y
        try:
            return y  # noqa: F821
        except NameError as e:
            return x, type(e).__name__, str(e)

    check_calls(f, [X1, X2], graphs=None)


def test_del_local_with_break():
    def f(x):
        y = x * 2
        z = y + 1
        del y
        print("after del")
        return z, "y" in dir()

    check_calls(f, [X1, X2])


def test_del_list_items_and_slices():
    def f(x, lst):
        del lst[0]
        del lst[-1]
        del lst[::2]
        return x * len(lst), lst

    check_calls(f, [(t(1), list(range(8))), (t(1, 2), list(range(5)))])


def test_del_dict_keys():
    def f(x, d):
        del d["a"]
        try:
            del d["missing"]
        except KeyError as e:
            err = repr(e)
        return x + len(d), d, err

    check_calls(f, [(t(1), {"a": 1, "b": 2}), (t(1, 2), {"c": 0, "a": 5})], graphs=None)


def test_del_attribute():
    def f(x, b):
        del b.v
        has = hasattr(b, "v")
        try:
            b.v
        except AttributeError as e:
            msg = str(e)
        return x, has, msg, vars(b)

    check_calls(f, [(t(1), Box(1)), (t(2), Box(3))], graphs=None)


def test_del_in_loop_with_item_break():
    def f(x):
        d = {i: x * i for i in range(4)}
        for k in list(d):
            if d[k].sum().item() > 3:
                del d[k]
        return d

    check_calls(f, [X1, (t(0.1),)])


# ---------------------------------------------------------------- star unpacking

def test_star_assignment():
    def f(x):
        a, *b = x.shape[0], 2, 3
        *c, d = [x, x * 2, x * 3]
        e, *g, h = range(x.shape[0] + 2)
        (p, q), *r = [(1, 2), (3, 4)]
        return a, b, torch.stack(c).sum(0), d, e, g, h, p, q, r

    check_calls(f, [X1, X2])


def test_star_unpack_tensor_rows():
    def f(x):
        first, *rest = x
        return first, rest, len(rest)

    check_calls(f, [(torch.arange(6.0).reshape(3, 2),), (torch.arange(4.0).reshape(2, 2),)])


def test_star_unpack_wrong_count():
    def f(x):
        a, b, *c, d = x.shape
        return a

    check_calls(f, [(torch.zeros(2, 3),)], graphs=None)


def test_star_call_with_computed_args():
    def g(a, b, c=0, *rest, k=1, **kw):
        return a * b + c + sum(rest) + k + len(kw)

    def f(x):
        args = [x] + [i for i in range(x.shape[0])]
        kw = {"k": x.shape[0], **{"z" + str(i): i for i in range(2)}}
        return g(*args, **kw), g(*args[:2], *(5,), **{"k": 2})

    check_calls(f, [X1, X2])


def test_star_call_with_break_between():
    def g(*a, **k):
        return sum(a) * len(k)

    def f(x):
        args = (x, x + 1)
        print("building")
        kw = dict(a=1, b=x.shape[0])
        return g(*args, *[x * 2], **kw, c=3)

    check_calls(f, [X1, X2])


def test_star_in_literals():
    def f(x):
        a = [*x.shape, *range(2)]
        b = (*a, x.dim())
        c = {*a}
        d = {**{"p": 1}, "q": x.shape[0], **{"p": 2}}
        return a, b, c, d, x

    check_calls(f, [(torch.zeros(2, 3),), (torch.zeros(4),)], graphs=None)


def test_duplicate_kwarg_error():
    def g(**kw):
        return kw

    def f(x):
        return g(**{"a": 1}, **{"a": 2})

    check_calls(f, [X1], graphs=None)
