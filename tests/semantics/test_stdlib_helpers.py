"""operator / functools / itertools / collections, sorted, id, hash and recursion, eager vs compiled.

Every test compares compiled with eager through dynamo_lite.testing; known bugs are strict
xfails in tests/test_known_bugs.py.
"""
import collections
import functools
import itertools
import operator

import torch

import dynamo_lite
from dynamo_lite.testing import check_calls


def t(*vals):
    return torch.tensor([float(v) for v in vals])


X1, X2 = (t(1, 2, 3),), (t(-4, 5, 0.5, 2),)


# ---------------------------------------------------------------- operator / functools / itertools

def test_operator_module_functions():
    def f(x):
        ops = [operator.add, operator.mul, operator.sub, operator.truediv]
        res = [op(x, 2) for op in ops]
        ig = operator.itemgetter(0, 2)
        ag = operator.attrgetter("shape")
        mc = operator.methodcaller("sum")
        return (res, ig([10, 20, 30]), ag(x), mc(x), operator.neg(x), operator.getitem(x, 1),
                operator.contains([1, 2], 2), operator.index(x.shape[0]), operator.not_(0))

    check_calls(f, [X1, X2])


def test_operator_inplace_functions():
    def f(x, lst):
        y = operator.iadd(x.clone(), 1)
        lst2 = operator.iadd(lst, [9])
        return y, lst2 is lst, lst, operator.imul(3, x.shape[0])

    check_calls(f, [(X1[0], [1]), (X2[0], [])])


def test_functools_reduce():
    def f(x):
        a = functools.reduce(operator.add, [x, x * 2, x * 3])
        b = functools.reduce(lambda acc, v: acc * v, x.shape, 1)
        c = functools.reduce(lambda acc, v: acc + [v * 2], range(3), [])
        return a, b, c

    check_calls(f, [X1, (torch.zeros(2, 3),)])


def test_functools_reduce_empty_error():
    def f(x):
        return functools.reduce(operator.add, [])

    check_calls(f, [X1], graphs=None)


def test_functools_partial_and_lru_cache_free():
    def scale(x, s, *, b=0):
        return x * s + b

    def f(x):
        p = functools.partial(scale, s=2)
        q = functools.partial(scale, b=1)
        return p(x), q(x, 3), p.keywords

    check_calls(f, [X1, X2])


def test_itertools_chain_product_accumulate_islice():
    def f(x):
        ch = list(itertools.chain([x], [x * 2], (x * 3,)))
        pr = list(itertools.product(range(2), "ab"))
        ac = list(itertools.accumulate([x, x, x]))
        ac2 = list(itertools.accumulate([1, 2, 3], operator.mul))
        sl = list(itertools.islice(range(10), 1, 8, 3))
        z = [x * i for i, _ in zip(itertools.count(1), range(3))]
        return ch, pr, ac, ac2, sl, z

    check_calls(f, [X1, X2])


def test_itertools_with_print_break():
    def f(x):
        it = itertools.count(5, 2)
        a = next(it)
        print("mid", a)
        b = next(it)
        pairs = list(zip(itertools.count(), [x, x + 1]))
        return x * a + b, pairs

    check_calls(f, [X1, X2])


def test_itertools_misc():
    def f(x):
        return (list(itertools.repeat(x.shape[0], 3)),
                list(itertools.combinations(range(x.shape[0]), 2)),
                list(itertools.permutations("ab")),
                list(itertools.zip_longest([1, 2], [x], fillvalue=0)),
                [(k, list(g)) for k, g in itertools.groupby("aabbbc")],
                list(itertools.starmap(operator.mul, [(x, 2), (x, 3)])),
                list(itertools.pairwise(range(4))))

    check_calls(f, [X1, X2])


# ---------------------------------------------------------------- collections

def test_collections_counter():
    def f(x, words):
        c = collections.Counter(words)
        c.update(["z"] * x.shape[0])
        top = c.most_common(2)
        return x * c["a"], dict(c), top, c["missing"], sum(c.values())

    check_calls(f, [(X1[0], ["a", "b", "a"]), (X2[0], ["q"])])


def test_collections_deque():
    def f(x):
        d = collections.deque([x, x * 2, x * 3], maxlen=4)
        d.appendleft(x * 0)
        d.append(x * 5)
        d.rotate(1)
        left = d.popleft()
        d.rotate(-2)
        return left, list(d), len(d), d.maxlen

    check_calls(f, [X1, X2])


def test_collections_deque_of_ints_with_break():
    def f(x):
        d = collections.deque(range(5))
        d.rotate(2)
        print(list(d))
        d.extendleft([9, 8])
        return x * d[0], list(d)

    check_calls(f, [X1, X2], graphs=None)


def test_collections_defaultdict_list():
    def f(x, keys):
        dd = collections.defaultdict(list)
        for i, k in enumerate(keys):
            dd[k].append(x * i)
        return {k: torch.stack(v).sum(0) for k, v in dd.items()}, len(dd), "zz" in dd

    check_calls(f, [(X1[0], ["a", "b", "a"]), (X2[0], ["c"])])


def test_defaultdict_input_mutated():
    def f(x, dd):
        dd["new"] += x.shape[0]
        dd["old"] += 1
        return x, dd

    check_calls(f, [(X1[0], collections.defaultdict(int, old=1)), (X2[0], collections.defaultdict(int))], graphs=None)


def test_ordered_dict_move_to_end():
    def f(x):
        od = collections.OrderedDict(a=x, b=x * 2, c=x * 3)
        od.move_to_end("a")
        k, v = od.popitem(last=False)
        return list(od.keys()), k, v

    check_calls(f, [X1, X2])


def test_namedtuple_factory():
    P = collections.namedtuple("P", ["x", "y"], defaults=[0])

    def f(x):
        p = P(x)
        q = P(x, y=x.shape[0])
        return p, q, p.y, q._replace(x=1)

    check_calls(f, [X1, X2], graphs=None)


# ---------------------------------------------------------------- sorted / id / hash / recursion

def test_sorted_key_lambda_on_shapes():
    def f(a, b, c):
        ts = [a, b, c]
        by_shape = sorted(ts, key=lambda v: (v.shape[0], v.dim()))
        rev = sorted([(v.shape, i) for i, v in enumerate(ts)], key=lambda p: p[0][0], reverse=True)
        return by_shape, [i for _, i in rev], max(ts, key=lambda v: v.numel()).shape

    check_calls(f, [(torch.zeros(3), torch.ones(1), torch.ones(2)), (torch.zeros(1), torch.ones(4), torch.ones(2, 2))], graphs=None)


def test_sorted_stability_and_item_key():
    def f(x):
        items = [(x[i].item(), i) for i in range(x.shape[0])]
        return sorted(items), sorted(range(x.shape[0]), key=lambda i: -x[i].item())

    check_calls(f, [X1, X2])


def test_list_sort_in_place_input():
    def f(x, lst):
        lst.sort(key=lambda p: p[1])
        lst.reverse()
        return x * lst[0][1], lst

    check_calls(f, [(X1[0], [("a", 2), ("b", 1), ("c", 3)]), (X2[0], [("z", 0)])])


def test_id_and_hash_of_strings_and_tuples():
    def f(x, s):
        k = (s, 1)
        same_id = id(s) == id(s)
        h = hash(k) == hash((s, 1))
        return x, same_id, h, hash("abc") == hash("ab" + "c"), id(x) == id(x), hash(x.shape) == hash(tuple(x.shape))

    check_calls(f, [(X1[0], "key"), (X2[0], "other")], graphs=None)


def test_hash_values_equal():
    def f(x, s):
        return x * 2, hash(s), hash((s, 3)), hash(3.5), hash(None) == hash(None)

    check_calls(f, [(X1[0], "key"), (X2[0], "other")])


def test_id_of_arguments():
    def f(x, lst):
        return x + 1, id(lst), id(x) == id(lst)

    lst = [1]
    cfn = dynamo_lite.compile(f, backend="eager")
    a = cfn(X1[0], lst)
    assert a[1] == id(lst) and a[2] is False


def test_recursion_with_memo_dict():
    def fib(n, memo):
        if n in memo:
            return memo[n]
        r = n if n < 2 else fib(n - 1, memo) + fib(n - 2, memo)
        memo[n] = r
        return r

    def f(x, memo):
        return x * fib(x.shape[0] + 5, memo), len(memo)

    check_calls(f, [(X1[0], {}), (X2[0], {0: 0, 1: 1})])


def test_recursion_on_tensors():
    def tree_sum(v):
        if isinstance(v, (list, tuple)):
            return sum(tree_sum(e) for e in v)
        if isinstance(v, dict):
            return sum(tree_sum(e) for e in v.values())
        return v

    def f(x):
        return tree_sum([x, (x * 2, {"a": x * 3, "b": [x]})])

    check_calls(f, [X1, X2])


def test_recursion_depth_error():
    def r(n):
        return r(n + 1)

    def f(x):
        try:
            r(0)
        except RecursionError:
            return x * 2

    check_calls(f, [X1], graphs=None)


def test_typing_get_origin_and_get_args_of_annotations():
    import typing

    from dynamo_lite.testing import check_breaks

    table = {list: "list", typing.Union: "union", dict: "dict"}

    def f(x):
        out = []
        for tp in (int, typing.Optional[int], list[int], typing.Dict[str, int], int | None, typing.Any):
            origin, args = typing.get_origin(tp), typing.get_args(tp)
            out.append((table.get(origin), len(args), origin is None, type(None) in args))
        return x + 1, out

    check_breaks(f, torch.ones(2), breaks=0)
