"""itertools in compiled code, eager vs compiled, with no more graph breaks than torch.compile
2.13 (none here).  count, cycle, islice, takewhile, dropwhile, pairwise, tee, groupby, chain,
chain.from_iterable, zip_longest, starmap and accumulate are lazy trackers (variables/iterators.py): items are computed, predicates and key functions
called, and the argument iterators advanced exactly when CPython does it; one that must outlive
the trace is made by Python (the trace stops where it was created).
"""
import itertools as it
import operator

import pytest
import torch

import dynamo_lite

from dynamo_lite.testing import check_breaks, check_calls
from dynamo_lite.testing import print_with_graph_break as print  # noqa: A001 - a graph break at each print


def count_and_islice(x):
    c = it.count(2)
    a, b = next(c), next(c)
    fc = it.count(0.5, 0.25)
    return (x + a + b, list(it.islice(it.count(), 2, 8, 2)), [next(fc) for _ in range(3)],
            list(it.islice("abcdef", 3)), list(it.islice(range(10), 1, None, 3)), list(it.islice([1, 2], 5, 9)))


def islice_reads_only_what_it_needs(x):
    source = iter([1, 2, 3, 4, 5])
    head = list(it.islice(source, 2))
    rest = list(source)  # islice stopped after two items
    s = it.islice(source, 0)
    return x + sum(head), head, rest, list(s)


def cycle_with_a_bound(x):
    c = it.cycle([1, 2, 3])
    first = [next(c) for _ in range(7)]
    empty = list(it.islice(it.cycle([]), 3))
    return x + sum(first), first, empty, list(it.islice(it.cycle("ab"), 5))


def chain_product_and_friends(x):
    return (x + sum(it.chain([1, 2], (3,))), list(it.chain.from_iterable([[1], [2, 3]])),
            list(it.product([1, 2], "ab")), list(it.accumulate([1, 2, 3])), list(it.accumulate([1, 2, 3], operator.mul)),
            list(it.repeat("r", 3)), list(it.zip_longest([1, 2], [3], fillvalue=0)),
            list(it.permutations([1, 2, 3], 2)), list(it.combinations([1, 2, 3], 2)),
            list(it.starmap(operator.mul, [(1, 2), (3, 4)])))


def takewhile_and_dropwhile(x):
    seen = []

    def small(v):
        seen.append(v)
        return v < 3

    t = list(it.takewhile(small, [1, 2, 3, 1]))
    d = list(it.dropwhile(small, [1, 2, 3, 1]))
    return x + sum(t) + sum(d), t, d, seen


def takewhile_stops_reading(x):
    source = iter([1, 2, 5, 1, 7])
    t = list(it.takewhile(lambda v: v < 3, source))
    return x + len(t), t, list(source)  # 5 was read (and dropped) by takewhile


def pairwise_and_tee(x):
    a, b = it.tee([1, 2, 3])
    first = next(a)
    both = list(b), list(a)
    t1, t2, t3 = it.tee(iter("xyz"), 3)
    return x + first, list(it.pairwise([1, 2, 3, 4])), list(it.pairwise([1])), both, list(zip(t1, t2, t3))


def filterfalse_and_compress(x):
    odd_calls = []

    def odd(v):
        odd_calls.append(v)
        return v % 2

    source = iter([1, 2, 3, 4, 5])
    c = it.compress(source, [1, 0, 1])  # stops with its selectors: 4 and 5 stay in source
    return (x + sum(it.filterfalse(odd, range(6))), list(it.filterfalse(None, [0, 1, "", "a", None])),
            odd_calls, list(c), list(source), list(it.compress("abcd", (v > 1 for v in [2, 0, 3, 1]))))


def groupby_keys_and_groups(x):
    out = []
    for k, g in it.groupby([1, 1, 2, 3, 3, 3, 1]):
        out.append((k, list(g)))
    words = ["apple", "avocado", "banana", "blueberry", "cherry"]
    by_letter = [(k, len(list(g))) for k, g in it.groupby(words, key=lambda w: w[0])]
    return x + len(out), out, by_letter


def groupby_groups_expire(x):
    groups = it.groupby("aabbc")
    k1, g1 = next(groups)
    k2, g2 = next(groups)  # g1 is no longer valid
    return x + 1, k1, list(g1), k2, list(g2), [k for k, _ in groups]


def itertools_with_tensors(x):
    total = x
    for a, b in it.product([x, x * 2], [1, 2]):
        total = total + a * b
    for a, b in it.pairwise([x, x + 1, x + 2]):
        total = total + a * b
    for k, g in it.groupby([1, 1, 2]):
        for v in g:
            total = total + k * v
    return total, [t.sum() for t in it.islice(it.cycle([x, -x]), 3)]


def _logged(tag, log, n=2):
    for i in range(n):
        log.append(f"{tag}{i}")
        yield i


def chain_reads_its_iterables_as_asked(x):
    # a generator in a chain runs as its items are asked for; iter() of the next iterable is
    # called only when the one before it is exhausted
    log = []
    for v in it.chain(_logged("a", log), _logged("b", log)):
        log.append(f"use{v}")
    for v in it.chain.from_iterable(_logged(t, log, 1) for t in "pq"):
        log.append(f"got{v}")
    source = iter([1, 2, 3])
    first = next(it.chain(source))
    nested = iter([[1], [2], [3]])
    head = next(it.chain.from_iterable(nested))
    return x + first + head, log, list(source), list(nested)


def lazy_zip_longest_starmap_accumulate(x):
    log = []

    def power(a, b):
        log.append((a, b))
        return a ** b

    source = iter([1, 2, 3])
    z = next(it.zip_longest(source, "ab", fillvalue="-"))
    pairs = iter([(2, 1), (2, 2), (2, 3)])
    s = next(it.starmap(power, pairs))
    nums = iter([1, 2, 3])
    acc = it.accumulate(nums, lambda a, b: (log.append("acc"), a + b)[1], initial=10)
    firsts = next(acc), next(acc)
    done = it.zip_longest([1], [])
    return (x + s, z, list(source), list(pairs), firsts, list(nums), log,
            list(done), list(done), list(it.zip_longest("abc", [1], [], fillvalue=0)))


def chain_with_an_endless_iterator(x):
    # (the tracer hung here when chain read its iterables up front)
    return x + 1, list(zip(range(3), it.chain(it.count(), [1]))), list(zip("ab", it.chain([9], it.cycle([2, 3]))))


CASES = [count_and_islice, islice_reads_only_what_it_needs, cycle_with_a_bound, chain_product_and_friends,
         takewhile_and_dropwhile, takewhile_stops_reading, pairwise_and_tee, filterfalse_and_compress,
         groupby_keys_and_groups,
         groupby_groups_expire, itertools_with_tensors, chain_reads_its_iterables_as_asked,
         lazy_zip_longest_starmap_accumulate, chain_with_an_endless_iterator]


@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
def test_same_as_eager_without_graph_breaks(fn):
    check_breaks(fn, torch.arange(3.0), breaks=0)


@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
def test_second_call_hits_the_cache(fn):
    check_calls(fn, [torch.arange(3.0), torch.arange(3.0)], hits=[1], graphs=None)


def returns_a_live_cycle(x):
    c = it.cycle([1, 2])
    next(c)
    return x + 1, c


def returns_a_live_count(x):
    c = it.count(5, 2)
    next(c)
    return x + 1, c


@pytest.mark.parametrize("fn", [returns_a_live_cycle, returns_a_live_count], ids=lambda f: f.__name__)
def test_iterator_that_outlives_the_trace_is_the_real_one(fn):
    expected, got = fn(torch.ones(2)), __import__("dynamo_lite").compile(fn, backend="eager")(torch.ones(2))
    assert type(expected[1]) is type(got[1])
    assert list(it.islice(expected[1], 5)) == list(it.islice(got[1], 5))
    assert torch.equal(expected[0], got[0])


@pytest.mark.parametrize("bounds", [(2,), (0,), (1, 4), (5, 3), (0, 5, 3), (2, None, 2), (3, 3), (1, 9, 4)])
def test_islice_reads_the_source_as_cpython_does(bounds):
    def f(x, bounds):
        source = iter([10, 11, 12, 13, 14, 15, 16])
        taken = list(it.islice(source, *bounds))
        return x + len(taken), taken, list(source)

    check_breaks(f, torch.ones(2), bounds, breaks=0)


def test_chain_and_zip_longest_outlive_a_graph_break():
    # rebuilt at the break: chain(<current iterator>, <iterables not started>), zip_longest with
    # its exhausted iterators as empty ones; Python goes on with the real ones
    def f(x):
        c = it.chain([1, 2], iter([5, 6]), (7,))
        z = it.zip_longest([1, 2, 3], "a", fillvalue=0)
        fi = it.chain.from_iterable([[1, 2], [3]])
        a, b, first_z, second_z, first_fi = next(c), next(c), next(z), next(z), next(fi)
        y = x + a + b
        print("break")
        return y * 2, (a, b, first_z, second_z, first_fi), c, z, fi

    expected = f(torch.ones(2))
    info = dynamo_lite.explain(f)(torch.ones(2))
    got = dynamo_lite.compile(f, backend="eager")(torch.ones(2))
    assert info.graph_break_count == 1, info.break_reasons
    assert torch.equal(expected[0], got[0]) and expected[1] == got[1]
    assert [type(i) for i in expected[2:]] == [type(i) for i in got[2:]]
    assert [list(i) for i in expected[2:]] == [list(i) for i in got[2:]]


def returns_a_live_chain(x):
    c = it.chain([1, 2], iter("ab"))
    next(c)
    return x + 1, c


def returns_a_live_starmap(x):
    s = it.starmap(pow, [(2, 1), (2, 2), (2, 3)])
    next(s)
    return x + 1, s


@pytest.mark.parametrize("fn", [returns_a_live_chain, returns_a_live_starmap], ids=lambda f: f.__name__)
def test_lazy_iterators_returned_continue_where_they_were(fn):
    expected, got = fn(torch.ones(2)), dynamo_lite.compile(fn, backend="eager")(torch.ones(2))
    assert type(expected[1]) is type(got[1])
    assert list(expected[1]) == list(got[1])
    assert torch.equal(expected[0], got[0])
