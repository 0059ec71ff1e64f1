"""dict / set / list methods on every receiver, dict views, collections and types containers,
eager vs compiled, with the number of graph breaks torch.compile (2.13) has for the same
code (measured with torch._dynamo.explain; 0 unless said otherwise).

Every test compares compiled with eager through dynamo_lite.testing (check_breaks counts
the breaks); known bugs are strict xfails in tests/test_known_bugs.py.
"""
import collections
from collections.abc import Mapping

import pytest
import torch

from dynamo_lite.testing import check_breaks, check_calls


def t(*vals):
    return torch.tensor([float(v) for v in vals])


X = t(1, 2, 3)


# ---------------------------------------------------------------- exceptions raised by containers, traced

class UserMap(Mapping):
    """A Mapping whose get/__contains__ are the collections.abc mixins (get catches KeyError)."""

    def __init__(self, d):
        self._d = d

    def __getitem__(self, k):
        return self._d[k]

    def __iter__(self):
        return iter(self._d)

    def __len__(self):
        return len(self._d)


class AttentionFunctions(Mapping):
    """transformers' AttentionInterface: a local dict, then the global one."""

    _global = {"sdpa": lambda t: t * 2}

    def __init__(self):
        self._local = {}

    def __getitem__(self, k):
        if k in self._local:
            return self._local[k]
        return self._global[k]

    def __iter__(self):
        return iter({**self._global, **self._local})

    def __len__(self):
        return len(self._global) + len(self._local)


ATTENTION = AttentionFunctions()


def test_mapping_get_catches_the_keyerror_in_the_trace():
    def f(x, m):
        return x * m.get("a", 7) + m.get("zz", 3) + ("zz" in m) + ("a" in m)

    check_breaks(f, X, UserMap({"a": 2}), breaks=0)


def test_mapping_views_of_a_user_mapping():
    def f(x, m):
        new = UserMap({"p": 1, "q": 2})
        keys, values, items = new.keys(), new.values(), new.items()
        total = sum(values) + sum(v for _, v in m.items())
        return (x + total + len(keys) + ("p" in keys) + (2 in values) + (("q", 2) in items),
                list(keys), list(m.keys()), sorted(m.values()), list(items), "z" in m.keys())

    check_breaks(f, X, UserMap({"a": 2, "b": 3}), breaks=0)


def test_mapping_view_returned_from_compiled_code():
    def f(x):
        view = UserMap({"a": 1}).keys()
        return x + 1, view

    out = check_breaks(f, X, breaks=0)
    assert list(out.value[1]) == ["a"]


def test_mapping_get_of_a_global_lookup_table():
    def f(x):
        fn = ATTENTION.get("sdpa", None)
        missing = ATTENTION.get("flash", None)
        return fn(x) if missing is None else x

    check_breaks(f, X, breaks=0)


def test_caught_keyerror_message_and_repr():
    def f(x, d):
        try:
            d["missing"]
        except KeyError as e:
            caught = (str(e), repr(e), e.args)
        try:
            [1, 2][5]
        except IndexError as e:
            index = str(e)
        try:
            [].pop()
        except IndexError as e:
            pop = str(e)
        try:
            d.pop("nope")
        except KeyError as e:
            popped = repr(e)
        try:
            {1}.remove(2)
        except KeyError as e:
            removed = e.args
        return x + 1, caught, index, pop, popped, removed, str(ValueError("bad", 3)), repr(TypeError("t"))

    check_breaks(f, X, {"a": 1}, breaks=0)


def test_uncaught_keyerror_is_raised_by_python():
    def f(x, d):
        y = x + 1
        return y, d["missing"]

    check_calls(f, [(X, {"a": 1})], graphs=None)


def test_keyerror_raised_in_a_handler_chains_the_handled_exception():
    def f(x, d):
        try:
            try:
                raise ValueError("first")
            except ValueError:
                d["missing"]
        except KeyError as e:
            return x + 1, type(e.__context__).__name__, str(e.__context__)

    check_breaks(f, X, {}, breaks=0)


# ---------------------------------------------------------------- dict views, | and |=

def test_dict_views_membership_len_iteration_and_set_algebra():
    def f(x, d, keep=sorted):
        k, v, it = d.keys(), d.values(), d.items()
        return (x * sum(v), len(k), len(it), "a" in k, "q" in k, ("a", 1) in it, ("a", 2) in it, 3 in it,
                2 in v, keep(k & {"a", "q"}), keep(k | {"z"}), keep(k - {"a"}), keep(k ^ {"a", "c"}),
                keep(it & {("a", 1)}), k == {"a", "b"}, k.isdisjoint(["q"]), it.isdisjoint([("b", 2)]), list(it),
                sorted(k), [kk for kk in k], tuple(v))

    check_breaks(f, X, {"a": 1, "b": 2}, breaks=0)
    # the sets themselves returned: a set whose table a copy-then-delete shaped (k ^ {...}, with
    # some string hashes) cannot be rebuilt to iterate as eager's: that return breaks (DL0006)
    check_breaks(f, X, {"a": 1, "b": 2}, keep=lambda s: s, breaks=None)


def test_dict_views_of_tensor_values():
    def f(x, d):
        k = d.keys()
        return sum(d.values()), k - {"a"}, "b" in k, (("a", d["a"]) in d.items())

    check_breaks(f, X, {"a": X, "b": X * 2}, breaks=0)


def test_dict_or_and_inplace_or():
    def f(x, d, od):
        e = d | {"c": x}
        d |= {"d": 4}
        d |= [("e", 5)]
        o = od | {"z": 1}
        od |= {"a": x}
        return x * len(e), e, o, type(o).__name__

    check_breaks(f, X, {"a": 1}, collections.OrderedDict(b=2), breaks=0)


def test_defaultdict_or_keeps_the_factory():
    def f(x, dd):
        merged = dd | {"k": 1}
        merged["new"] += 2
        return x + 1, merged, merged.default_factory

    check_breaks(f, X, collections.defaultdict(int, a=1), breaks=0)


# ---------------------------------------------------------------- OrderedDict

def test_ordereddict_move_to_end_and_popitem_last():
    def f(x, od):
        new = collections.OrderedDict()
        new["b"] = x
        new["a"] = 2
        new["c"] = 3
        new.move_to_end("b")
        new.move_to_end("c", last=False)
        first = new.popitem(last=False)
        last = new.popitem()
        od.move_to_end("p", False)
        return x * 2, first, last, new, list(od)

    check_breaks(f, X, collections.OrderedDict(q=1, p=2), breaks=0)


def test_ordereddict_errors_are_eagers():
    def f(x, od):
        try:
            od.move_to_end("missing")
        except KeyError as e:
            missing = e.args
        try:
            collections.OrderedDict().popitem(last=False)
        except KeyError as e:
            empty = e.args
        return x + 1, missing, empty

    check_breaks(f, X, collections.OrderedDict(q=1), breaks=0)


# ---------------------------------------------------------------- deque, Counter, MappingProxyType, SimpleNamespace

import types  # noqa: E402 - grouped with its tests


def test_deque_made_in_compiled_code():
    def f(x):
        q = collections.deque([1, 2], maxlen=3)
        q.append(3)
        q.appendleft(0)
        q.append(x)
        first = q.popleft()
        q.extendleft([7, 8])
        q.rotate(-1)
        q.extend([x * 2, 5])
        return x * 2, q, first, len(q), q.maxlen, q[0], q[-1], 8 in q, [v for v in q], q.copy()

    check_breaks(f, X, breaks=0)


def test_deque_input_mutated_in_place():
    def f(x, q, unbounded):
        q.append(x)
        q.rotate(1)
        z = q.pop() * 2
        unbounded.extend([5, 6])
        unbounded.popleft()
        return z, x + 1

    check_breaks(f, X, collections.deque([1, 2], maxlen=3), collections.deque([x for x in range(3)]), breaks=0)


def test_deque_errors_and_mutation_during_iteration():
    def f(x):
        q = collections.deque()
        try:
            q.pop()
        except IndexError as e:
            empty = str(e)
        try:
            q[3]
        except IndexError as e:
            index = str(e)
        for v in collections.deque([1, 2]):
            x = x + v
        return x, empty, index

    def mutate_while_iterating(x):
        q = collections.deque([1, 2])
        for v in q:
            q.append(v)  # RuntimeError in eager: the frame runs in Python
        return x

    check_breaks(f, X, breaks=0)
    check_calls(mutate_while_iterating, [(X,)], graphs=None)


def test_counter_made_in_compiled_code():
    def f(x):
        c = collections.Counter("abca")
        c["z"] += 2
        c.update(["a"])
        c.update(b=3)
        c.subtract({"b": 1})
        del c["nothing"]
        return (x * c["a"], c.most_common(2), c.most_common(), dict(c), c["q"], "q" in c, sorted(c.elements()),
                c.total(), c + collections.Counter("zz"), c.copy(), c)

    check_breaks(f, X, breaks=0)


def test_counter_input_and_tensor_counts():
    def f(x, c):
        c["a"] += 1
        c.update(b=3)
        t = collections.Counter()
        t["t"] += x
        t.update({"t": x})
        return x * c["a"] + c["missing"], t["t"], t

    check_breaks(f, X, collections.Counter(a=1, k=2), breaks=0)


def test_mappingproxy_reads_its_dict_live():
    def f(x):
        d = {"a": 2}
        mp = types.MappingProxyType(d)
        d["b"] = 3
        return x * mp["a"] + mp.get("b", 1) + len(mp), "a" in mp, list(mp), mp.copy(), list(mp.items()), mp

    check_breaks(f, X, breaks=0)


def test_mappingproxy_write_raises_typeerror():
    def f(x):
        mp = types.MappingProxyType({"a": 2})
        mp["a"] = 3
        return x

    check_calls(f, [(X,)], graphs=None)


def test_dict_update_and_dict_of_a_mappingproxy_copy_its_items():
    # a mappingproxy is a mapping (it has keys()): its items are copied, its two-letter keys
    # are not split into key/value pairs
    def f(x):
        source = {"ab": x, "cd": x + 1}
        d = {"q": x - 1}
        d.update(types.MappingProxyType(source))
        return d, dict(types.MappingProxyType(source)), dict(types.MappingProxyType({"xy": 1}), z=2)

    check_breaks(f, X, breaks=0)


def test_mappingproxy_compares_as_its_dict():
    def f(x):
        d = {"a": 1}
        mp = types.MappingProxyType(d)
        return x + 1, mp == d, d == mp, mp != d, mp == {"b": 1}, mp == types.MappingProxyType({"a": 1}), mp == 3

    check_breaks(f, X, breaks=0)


def test_dict_view_mapping_is_a_live_mappingproxy():
    def f(x):
        d = {"a": 1, "b": 2}
        m = d.keys().mapping
        y = x * 2
        if isinstance(m, types.MappingProxyType) and m == d:
            y = y + 1
        d["c"] = 3
        return y, m, type(m), dict(d.items().mapping), len(d.values().mapping)

    check_breaks(f, X, breaks=0)


class PairsWithKeys:
    """Iterates as key/value pairs but has keys(): dict() and dict.update() read it as a mapping."""

    def __iter__(self):
        return iter([("ab", 1)])

    def keys(self):
        return ["cd"]

    def __getitem__(self, k):
        return k * 2


def test_dict_update_of_an_object_with_keys_uses_keys_not_its_pairs():
    def f(x):
        obj = PairsWithKeys()
        d = {}
        d.update(obj)
        return x + 1, d, dict(obj)

    check_calls(f, [(X,)], graphs=None)


def test_simple_namespace_made_and_read():
    def f(x, ns):
        made = types.SimpleNamespace(a=1, b=x)
        made.c = 3
        ns.z = 5
        return made.b * made.a + made.c + ns.a, made, getattr(made, "missing", 7), hasattr(ns, "z")

    check_breaks(f, X, types.SimpleNamespace(a=2), breaks=0)


# ---------------------------------------------------------------- dict subclasses

class MyDict(dict):
    def total(self):
        return sum(self.values())


class MyOrderedDict(collections.OrderedDict):
    extra = 1


class OutputLike(collections.OrderedDict):
    """transformers' ModelOutput pattern: items mirrored as attributes through the base's methods."""

    def __init__(self, **kwargs):
        super().__init__()
        for k, v in kwargs.items():
            self[k] = v

    def __setitem__(self, k, v):
        collections.OrderedDict.__setitem__(self, k, v)
        object.__setattr__(self, k, v)

    def __setattr__(self, k, v):
        if k in self.keys() and v is not None:
            super().__setitem__(k, v)
        super().__setattr__(k, v)

    def to_tuple(self):
        return tuple(self[k] for k in self.keys())


def test_methods_of_a_dict_subclass_input():
    def f(x, d):
        d["c"] = 3
        return (x * d.get("a", 0) + d.get("b", 5), d.total(), list(d.keys()), "c" in d, len(d), dict.get(d, "c"),
                d.copy(), isinstance(d, dict), [k for k in d], d.pop("c"), bool(d), type(d).__name__)

    check_breaks(f, X, MyDict(a=2), breaks=0)


def test_methods_of_an_ordereddict_subclass_input():
    def f(x, d):
        d.update(z=x)
        d.move_to_end("a")
        return x * d["z"], list(d), d.extra, super(MyOrderedDict, d).get("b")

    check_breaks(f, X, MyOrderedDict(a=1, b=2), breaks=0)


def test_dict_subclass_made_in_compiled_code():
    def f(x):
        d = MyDict(a=x, b=2)
        d["c"] = x * 2
        d.note = "attr"
        return d, d.total(), d.note, list(d.items()), type(d).__name__

    check_breaks(f, X, breaks=0)


def test_model_output_like_object_built_in_compiled_code():
    def f(x):
        out = OutputLike(logits=x * 2, loss=None)
        out["hidden"] = x + 1
        out.logits = x * 3  # through __setattr__: the item too
        return out, out.logits, out["hidden"], out.to_tuple(), list(out.keys()), vars(out)

    check_breaks(f, X, breaks=0)


# ---------------------------------------------------------------- methods of builtin containers, on inputs

def test_list_methods_on_an_input():
    def f(x, lst):
        lst.sort(key=lambda v: -v)
        c = lst.copy()
        lst.reverse()
        lst.remove(2)
        lst.insert(0, 9)
        lst.extend((7,))
        i, n = lst.index(9), lst.count(7)
        doubled = lst * 2
        lst += [1]
        del lst[0]
        lst[1:2] = [5, 6]
        return x * i, lst, c, n, doubled, sorted(lst), lst[::-1], list.copy(lst), min(lst), lst.pop(0), lst.pop()

    check_breaks(f, X, [3, 1, 2], breaks=0)


def test_set_methods_on_an_input_and_pop_of_a_new_set():
    def f(x, s):
        s.add(4)
        s.discard(1)
        u, i, d = s.union([7]), s.intersection({4, 5}), s - {4}
        sd = s.symmetric_difference([2])
        s |= {8}
        s &= {2, 3, 4, 8}
        s -= {3}
        new = {5, 6, 7}
        popped = [new.pop(), new.pop()]
        try:
            set().pop()
        except KeyError as e:
            empty = e.args
        return (x * len(s), s, u, i, d, sd, s.copy(), s.issubset([2, 4, 8, 9]), s.issuperset([2]),
                s.isdisjoint([99]), popped, new, empty, frozenset(s) | {0}, 4 in s)

    check_breaks(f, X, {1, 2, 3}, breaks=0)


def test_dict_methods_on_an_input():
    def f(x, d):
        d.setdefault("k", []).append(x)
        fk, fk2 = dict.fromkeys(["a", "b"], 0), dict.fromkeys("xy")
        d.update([("z", 1)], w=2)
        popped = d.pop("w")
        merged = {**d, "n": 1}
        return (x + 1, d, fk, fk2, popped, merged, [*d], len(d), d.get("z"), list(reversed(d)),
                dict(sorted(d.items(), key=lambda kv: kv[0])))

    check_breaks(f, X, {"a": 1}, breaks=0)


def test_tuple_and_str_methods():
    def f(x, tup, s):
        return (x * tup.index(2), tup.count(1), tup + (4,), tup * 2, tup[1:], 2 in tup, tup < (2,),
                s.split("."), s.rsplit(".", 1), s.partition("."), s.replace("a", "b"), s.title(), s.find("b"),
                s.center(11, "*"), "%s-%d" % (s, 3), s.startswith(("a", "z")), s.removeprefix("a."), s.casefold())

    check_breaks(f, X, (1, 2, 3), "a.b.c", breaks=0)


def test_chainmap_made_in_compiled_code():
    def f(x, base):
        cm = collections.ChainMap({"a": 1}, base)
        cm["n"] = 5
        child = cm.new_child({"a": 9})
        try:
            cm["missing"]
        except KeyError as e:
            missing = e.args
        return (x * cm["a"] + cm["b"] + cm.get("q", 0), len(cm), list(cm), "b" in cm, cm, child["a"],
                child.parents["a"], cm.maps[1] is base, dict(cm), base, missing, cm.copy())

    check_breaks(f, X, {"a": 2, "b": 3}, breaks=0)


# ---- a table keyed by classes and typing forms (huggingface_hub's validators by origin) ---------
def _validate_list(x):
    return x * 2


def _validate_union(x):
    return x + 1


import typing  # noqa: E402 - grouped with its tests

VALIDATORS = {list: _validate_list, typing.Union: _validate_union, "default": None}


def test_class_keyed_table_is_read_without_a_break_and_a_change_recompiles():
    def f(x, which):
        fn = VALIDATORS.get(typing.get_origin(which))
        return fn(x) if fn is not None else x, list in VALIDATORS, len(VALIDATORS)

    check_breaks(f, torch.ones(2), list[int], breaks=0)

    def swap():
        VALIDATORS[list] = _validate_union

    try:
        check_calls(f, [(torch.ones(2), list[int]), {"args": lambda: (swap(), torch.ones(2), list[int])[1:]},
                        (torch.ones(2), typing.Optional[int])])
    finally:
        VALIDATORS[list] = _validate_list


class _Backend:
    def __init__(self, scale):
        self.scale = scale

    def apply(self, x):
        return x * self.scale


# einops' get_backend: a table from tensor types to backend objects, read with .get(type(x))
BACKENDS = {torch.Tensor: _Backend(2), list: _Backend(3)}


def test_class_keyed_table_of_objects_is_read_without_a_break_and_its_changes_are_seen():
    def f(x):
        backend = BACKENDS.get(type(x), None)
        if backend is None:
            return x
        return backend.apply(x) + len(BACKENDS)

    check_breaks(f, torch.ones(2), breaks=0)

    saved = dict(BACKENDS)

    def scale_changed():
        BACKENDS[torch.Tensor].scale = 5
        return (torch.ones(2),)

    def value_replaced():
        BACKENDS[torch.Tensor] = _Backend(7)
        return (torch.ones(2),)

    def key_added():
        BACKENDS[tuple] = _Backend(11)
        return (torch.ones(2),)

    def tensor_key_removed():
        BACKENDS.pop(torch.Tensor, None)
        return (torch.ones(2),)

    try:
        check_calls(f, [(torch.ones(2),), scale_changed, value_replaced, key_added, tensor_key_removed,
                        (torch.ones(2),)], hits=[5])
    finally:
        BACKENDS.clear()
        BACKENDS.update(saved)
        saved[torch.Tensor].scale = 2


# ---------------------------------------------------------------- frozendict (einx freezes its kwargs with it)

def test_frozendict_built_and_read_in_the_trace():
    frozendict = pytest.importorskip("frozendict").frozendict

    def f(x):
        d = frozendict(a=1, b=2)
        e = frozendict({"c": x}, z=3)
        return (x + d["a"] + len(d) + d.get("b") + e["c"], frozendict(d) is d, isinstance(d, dict),
                list(d.items()), "a" in d, dict(d), {**d}, d == {"a": 1, "b": 2}, list(e))

    check_breaks(f, X, breaks=0)


def test_frozendict_made_in_the_trace_returned_and_mutated():
    frozendict = pytest.importorskip("frozendict").frozendict

    def returned(x):
        d = frozendict(a=1, b=x)
        return x + 1, d, d, d | {"c": 2}

    out = check_breaks(returned, X, breaks=None)
    assert type(out.value[1]) is frozendict and out.value[1] is out.value[2]

    def mutated(x):
        d = frozendict(a=1)
        d["b"] = 2
        return x

    check_breaks(mutated, X, breaks=None, raises=TypeError)

    def others(x):
        return x + 1, frozendict(), hash(frozendict(a=1)), frozendict(a=1).copy()

    check_breaks(others, X, breaks=None)


def test_frozendict_argument_read_and_guarded():
    frozendict = pytest.importorskip("frozendict").frozendict

    def f(x, d):
        return x + d["a"] + len(d) + d.get("b", 0), d, list(d.items()), frozendict(d) is d

    check_breaks(f, X, frozendict(a=1, b=2), breaks=0)
    check_calls(f, [(X, frozendict(a=1, b=2)), (X, frozendict(a=3, b=4)), (X, frozendict(a=3)), (X, {"a": 5})])

    def mutated(x, d):
        d["a"] = 2
        return x

    check_breaks(mutated, X, frozendict(a=1), breaks=None, raises=TypeError)


def test_list_sort_empties_the_list_while_its_key_runs():
    # CPython sorts a list with its items taken out: the key sees an empty list
    def f(x):
        p = [1, 3, 2]
        seen = []

        def key(v):
            seen.append((len(p), list(p)))
            return v

        p.sort(key=key)
        return x + 1, p, seen

    check_breaks(f, X, breaks=0)


def test_list_modified_by_its_sort_key_raises_valueerror():
    def f(x):
        p = [1, 3, 2]

        def key(v):
            p.append(v)
            return v

        try:
            p.sort(key=key)
        except ValueError as e:
            return x + 1, p, str(e)
        return x, p, ""

    check_calls(f, [(X,)], graphs=None)


_Path = collections.namedtuple("input", "tensor, start, stop")


def test_dict_made_in_the_trace_keyed_by_namedtuples_is_rebuilt():
    # e3nn's ReducedTensorProducts memoises fx proxies in a dict keyed by _INPUT(...) paths
    def f(x, n):
        values = {}
        for i in range(n):
            values[_Path(i, 0, 2)] = x[i:i + 2] * 2
        return values

    out = check_breaks(f, torch.arange(6.0), 3, breaks=0)
    assert all(type(k) is _Path for k in out.value)


def test_dicts_and_lists_of_tensors_compared_with_eq_are_not_compared_by_identity():
    # torchmetrics' multitask test: `results["Classification"] == classification_results`, two dicts
    # of 0-d tensors, was answered False (identity) where eager compares the tensors: True
    def f(a, b):
        d1 = {"x": a.sum(), "y": b.mean()}
        d2 = {"x": a.sum(), "y": b.mean()}
        return d1 == d2, {"k": d1} != {"k": d2}, d1 == {"x": a.sum()}, d1 == 3, [a] == (a,)

    check_breaks(f, torch.ones(3), torch.arange(3.0), breaks=None)

    class Plain:
        pass

    def g(x, o):
        return x + 1, o == 3, 3 == o, o != None, o == o, {"k": 1} == {"k": 1}  # noqa: E711

    check_breaks(g, torch.ones(2), Plain(), breaks=0)


# ---- dicts keyed by objects, read from outside: looked up key by key -------------------------

class _Node:
    """Hashed by identity (object's __hash__ / __eq__), as torchsde's intervals are."""


class _LRUCache(dict):
    """torchsde's ``_LRUDict``: a dict subclass whose Python ``__setitem__`` evicts the oldest."""

    def __init__(self, max_size):
        super().__init__()
        self._max_size = max_size
        self._keys = []

    def __setitem__(self, key, value):
        if key in self:
            self._keys.remove(key)
        elif len(self) >= self._max_size:
            del self[self._keys.pop(0)]
        super().__setitem__(key, value)
        self._keys.append(key)


def _memo(x, cache, node):
    try:
        return x + cache[node]
    except KeyError:
        value = x * 2
        cache[node] = value
        return value


def _memo_get(x, cache, node, other):
    hit = cache.get(node)
    if other in cache:
        cache.pop(other)
    return x * 3 if hit is None else x + hit


@pytest.mark.parametrize("make", [dict, lambda: _LRUCache(2)], ids=["dict", "lru_subclass"])
def test_a_dict_keyed_by_objects_is_looked_up_key_by_key(make):
    # a memo table keyed by objects broke at every lookup (dict's __getitem__ of it, and the
    # subclass's __contains__ / __len__ / dict.__setitem__: torchsde's interval cache, 283 + 146
    # breaks in its selection); each looked-up key is guarded (present or not, its value an input)
    # and the writes are replayed with dict's own __setitem__ / __delitem__, so the compiled calls
    # return, mutate and evict as eager, and a grown table is not compiled again for its size
    import dynamo_lite
    from dynamo_lite.report import events
    from dynamo_lite.testing import CompileCounter

    sides = {}
    for side in ("eager", "compiled"):
        nodes = [_Node() for _ in range(4)]
        cache = make()
        cache[nodes[3]] = torch.full((2,), 7.0)
        counter = CompileCounter()
        fn = _memo if side == "eager" else dynamo_lite.compile(_memo, backend=counter)
        seen: list = []
        with events.collecting(seen.append):
            outs = [fn(torch.ones(2) * i, cache, nodes[j]) for i, j in enumerate([0, 1, 0, 2, 1, 3, 0])]
        state = [(nodes.index(k), v) for k, v in dict.items(cache)]
        sides[side] = (outs, state, getattr(cache, "_keys", None) and [nodes.index(k) for k in cache._keys])
        if side == "compiled":
            breaks = [e for e in seen if type(e).__name__ in ("GraphBreakEvent", "FallbackEvent")]
            assert not breaks, [e.reason for e in breaks]
            assert counter.frame_count <= 4, counter.frame_count  # miss / hit, not one per key or size
    (eo, es, ek), (co, cs, ck) = sides["eager"], sides["compiled"]
    assert len(eo) == len(co) and all(torch.equal(a, b) for a, b in zip(eo, co))
    assert [i for i, _ in es] == [i for i, _ in cs] and all(torch.equal(a, b) for (_, a), (_, b) in zip(es, cs))
    assert ek == ck


def _memo_sized(x, cache, node):
    if not cache:
        scale = 1
    else:
        scale = len(cache)
    try:
        return x * scale + cache[node]
    except KeyError:
        cache[node] = x * 2
        return x * scale


def test_the_size_of_a_dict_keyed_by_objects_becomes_symbolic_once_it_changed():
    # an LRU cache filling up changed its size on every call, and the size was guarded by value:
    # one compile per size until it was full (torchsde's interval cache: 103 recompiles in its
    # selection); now the size is an int input like an int argument, symbolic after one change
    import dynamo_lite
    from dynamo_lite.testing import CompileCounter

    sides = {}
    for side in ("eager", "compiled"):
        nodes = [_Node() for _ in range(9)]
        cache = _LRUCache(6)
        counter = CompileCounter()
        fn = _memo_sized if side == "eager" else dynamo_lite.compile(_memo_sized, backend=counter)
        order = [0, 1, 2, 3, 4, 5, 6, 7, 8, 8, 7, 2, 0]
        outs = [fn(torch.ones(2) * i, cache, nodes[j]) for i, j in enumerate(order)]
        sides[side] = (outs, [(nodes.index(k), v) for k, v in dict.items(cache)], [nodes.index(k) for k in cache._keys])
        if side == "compiled":
            # empty (no object keys yet), 1 key, any size below the limit, the full cache missed
            # and hit (before: one more compile for each of the sizes 2 to 5)
            assert counter.frame_count <= 5, counter.frame_count
    (eo, es, ek), (co, cs, ck) = sides["eager"], sides["compiled"]
    assert all(torch.equal(a, b) for a, b in zip(eo, co))
    assert [i for i, _ in es] == [i for i, _ in cs] and all(torch.equal(a, b) for (_, a), (_, b) in zip(es, cs))
    assert ek == ck


def _run_both(fn, make_args, calls):
    """(eager, compiled) results of ``calls`` (argument index tuples into ``make_args()``), each side
    on its own objects; the dict (argument 1) as (node index or key, value) pairs after them."""
    import dynamo_lite
    from dynamo_lite.report import events

    out = []
    for compiled in (False, True):
        args = make_args()
        f = dynamo_lite.compile(fn, backend="eager") if compiled else fn
        seen: list = []
        with events.collecting(seen.append):
            results = [f(*[args[i] for i in call]) for call in calls]
        if compiled:  # looked up key by key: no break (every lookup broke before)
            assert not [e.reason for e in seen if type(e).__name__ in ("GraphBreakEvent", "FallbackEvent")]
        nodes = args[-1]
        state = [(nodes.index(k) if k in nodes else k, v) for k, v in dict.items(args[1])]
        out.append((results, state))
    return out


def test_dict_keyed_by_objects_get_in_and_pop():
    def make():
        nodes = [_Node() for _ in range(3)]
        return torch.ones(2), {nodes[0]: torch.ones(2), nodes[1]: torch.zeros(2), "tag": 1}, nodes[0], nodes[1], \
            nodes[2], nodes

    (eo, es), (co, cs) = _run_both(_memo_get, make, [(0, 1, 2, 3), (0, 1, 4, 2), (0, 1, 2, 4)])
    assert all(torch.equal(a, b) for a, b in zip(eo, co))
    assert [k for k, _ in es] == [k for k, _ in cs] == ["tag"]  # 1 and 0 popped by the first two calls


def test_iterating_a_dict_keyed_by_objects_breaks_and_python_runs_it():
    import dynamo_lite

    def total(x, cache):
        return x + sum(v for v in cache.values())

    nodes = [_Node() for _ in range(2)]
    cache = {nodes[0]: torch.ones(2), nodes[1]: torch.ones(2)}
    info = dynamo_lite.explain(total, torch.ones(2), cache)
    assert info.graph_break_count >= 1 and "reads its whole contents" in info.break_reasons[0].reason
    assert torch.equal(dynamo_lite.compile(total, backend="eager")(torch.ones(2), cache), torch.full((2,), 3.0))
