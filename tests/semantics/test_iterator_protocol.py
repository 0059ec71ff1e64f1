"""The iterator protocol in compiled code, eager vs compiled, and no more graph breaks than
torch.compile 2.13 (none for any case here): ``next()`` on every kind of iterator with and
without a default, StopIteration raised in the trace and caught by traced code, user classes
with ``__iter__``/``__next__`` (inlined; variables/iterators.py UserIteratorVariable),
generators driven by ``send``/``close`` and delegating with ``yield from`` (symbolic/inliner.py,
the SEND opcode), generator expressions consumed by builtins.
"""
import pytest
import torch

from dynamo_lite.testing import check_breaks, check_calls


class Countdown:
    """A user iterator: its own __iter__, a __next__ that raises StopIteration."""

    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return self

    def __next__(self):
        if self.n <= 0:
            raise StopIteration
        self.n -= 1
        return self.n


class Bag:
    """An iterable whose __iter__ is a generator."""

    def __init__(self, *items):
        self.items = list(items)

    def __iter__(self):
        for v in self.items:
            yield v * 10


class Pairs:
    """An iterable returning a separate user iterator."""

    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return Countdown(self.n)


def next_on_builtin_iterators(x):
    d = {"a": 1, "b": 2}
    its = [iter([1, 2]), iter((3, 4)), iter(d), iter(d.values()), iter(d.items()), iter(range(5, 7)),
           iter("xy"), enumerate([7]), zip([1], [2]), map(abs, [-3]), filter(None, [0, 4]), reversed([5, 6])]
    out = [next(it) for it in its]
    return x + len(out), out, [next(it, "end") for it in its]


def stop_iteration_caught(x):
    it = iter([1])
    a = next(it)
    try:
        next(it)
    except StopIteration as e:
        return x + a, e.args, e.value
    return x


def stop_iteration_leaves_the_frame(x):
    y = x + 1
    it = iter([])
    return next(it), y


def user_iterator_next_and_for(x):
    c = Countdown(4)
    first = next(c)
    total = 0
    for v in c:
        total += v
        x = x + v
    return x, first, total, next(c, "done"), c.n


def user_iterator_consumers(x):
    return (x + sum(Countdown(3)), list(Countdown(3)), list(zip(Countdown(2), "ab")),
            [v for v in Countdown(2)], sorted(Countdown(3)), max(Countdown(4)), dict(enumerate(Countdown(2))))


def user_iterable_with_generator_iter(x):
    b = Bag(1, 2)
    out = [v for v in b]
    b.items.append(3)
    return x + sum(b), out, list(Pairs(3))


def user_iterator_identity_and_state(x):
    c = Countdown(3)
    it = iter(c)
    next(it)
    return x * c.n, it is c, iter(it) is c, type(it).__name__


class Bad:
    def __iter__(self):
        return self

    def __next__(self):
        raise ValueError("bad next")


def user_iterator_raises_other(x):
    out = []
    try:
        for v in Bad():
            out.append(v)
    except ValueError as e:
        out.append(e.args)
    return x + 1, out


def list_iterator_partly_consumed(x):
    items = [1, 2, 3, 4]
    it = iter(items)
    next(it)
    items.append(5)  # a list iterator reads the list live
    for v in it:
        x = x + v
    return x, next(it, None)


def lazy_builtin_iterators_by_next(x):
    e = enumerate(["a", "b"], start=3)
    z = zip([1, 2, 3], "xy")
    m = map(lambda v: v * x, [1, 2])
    f = filter(lambda v: v % 2, range(6))
    r = reversed((1, 2, 3))
    return next(e), next(e), next(e, None), next(z), list(z), next(m) + next(m), next(f), list(f), next(r), list(r)


# ---- generators ------------------------------------------------------------------------------

def generator_send(x):
    def running_total():
        total = 0
        while True:
            v = yield total
            if v is None:
                return total
            total += v

    g = running_total()
    next(g)
    g.send(2)
    r = g.send(3)
    try:
        g.send(None)
    except StopIteration as e:
        final = e.value
    return x * r, final, next(g, "exhausted")


def generator_close(x):
    def gen():
        yield x + 1
        yield x + 2

    g = gen()
    first = next(g)
    g.close()
    g.close()  # closing twice is fine
    fresh = gen()
    fresh.close()  # never started
    return first, next(g, "closed"), list(fresh)


def generator_throw(x):
    def worker():
        handled = []
        while True:
            try:
                yield len(handled)
            except ValueError as e:
                handled.append(e.args)
            except KeyError:
                return handled

    g = worker()
    next(g)
    a = g.throw(ValueError("first"))
    b = g.throw(ValueError)
    try:
        g.throw(KeyError("stop"))
    except StopIteration as e:
        done = e.value
    try:
        h = worker()
        next(h)
        h.throw(TypeError("not handled"))
    except TypeError as e:
        escaped = e.args
    return x + a + b, done, escaped, next(g, "finished")


def generator_close_in_try(x):
    log = []

    def gen():
        try:
            yield 1
            yield 2
        finally:
            log.append("finally")

    g = gen()
    v = next(g)
    g.close()
    return x + v, log


def yield_from_sequences_and_generators(x):
    def inner(n):
        for i in range(n):
            yield i
        return n * 100

    def outer():
        yield from [x, x * 2]
        r = yield from inner(3)
        yield r
        yield from (v + 1 for v in range(2))
        yield from "ab"

    return list(outer())


def yield_from_passes_sent_values(x):
    def inner():
        got = []
        while len(got) < 2:
            got.append((yield len(got)))
        return got

    def outer():
        result = yield from inner()
        yield result

    g = outer()
    a = next(g)
    b = g.send(x)
    c = g.send("second")
    return x + a, b, c


def generator_raising_stop_iteration(x):
    def gen():
        yield 1
        raise StopIteration("inside")  # PEP 479: a RuntimeError

    try:
        return list(gen())
    except RuntimeError as e:
        return x + 1, str(e), type(e.__cause__).__name__


def generator_expressions_in_builtins(x):
    sizes = [1, 2, 3]
    return (x + sum(v * 2 for v in sizes), max(v for v in sizes), min((v for v in sizes), default=0),
            any(v > 2 for v in sizes), all(v > 0 for v in sizes), sorted((-v for v in sizes)),
            tuple(str(v) for v in sizes), dict((v, v * v) for v in sizes), set(v % 2 for v in sizes),
            "-".join(str(v) for v in sizes), sum(x * v for v in sizes))


def generator_made_and_consumed_with_next(x):
    def squares():
        i = 0
        while True:
            yield i * i
            i += 1

    g = squares()
    y = x + next(g) + next(g) + next(g)
    for _ in range(3):
        y = y + next(g)
    return y, next(g)


CASES = [
    next_on_builtin_iterators, stop_iteration_caught, user_iterator_next_and_for, user_iterator_consumers,
    user_iterable_with_generator_iter, user_iterator_identity_and_state, user_iterator_raises_other,
    list_iterator_partly_consumed, lazy_builtin_iterators_by_next, generator_send, generator_close, generator_throw,
    yield_from_sequences_and_generators, yield_from_passes_sent_values, generator_expressions_in_builtins,
    generator_made_and_consumed_with_next,
]


@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
def test_same_as_eager_without_graph_breaks(fn):
    check_breaks(fn, torch.arange(3.0), breaks=0)


@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
def test_second_call_hits_the_cache(fn):
    check_calls(fn, [torch.arange(3.0), torch.arange(3.0)], hits=[1], graphs=None)


def test_stop_iteration_leaving_the_frame_is_raised():
    out = check_breaks(stop_iteration_leaves_the_frame, torch.ones(2), breaks=None, raises=StopIteration)
    assert out.exception.args == ()


@pytest.mark.parametrize("fn", [generator_close_in_try, generator_raising_stop_iteration], ids=lambda f: f.__name__)
def test_python_runs_what_the_trace_does_not_model(fn):
    # closing a generator paused in try/finally, PEP 479: Python makes and runs the generator
    check_calls(fn, [torch.ones(2), torch.ones(2)], graphs=None)


def closing_a_delegating_generator(x):
    log = []

    def inner():
        try:
            yield 1
            yield 2
        finally:
            log.append("inner closed")

    def outer():
        yield from inner()

    g = outer()
    first = next(g)
    g.close()  # closes inner first: its finally runs
    return x + first, log


def test_closing_a_generator_paused_in_yield_from_closes_the_sub_generator():
    check_calls(closing_a_delegating_generator, [torch.ones(2), torch.ones(2)], graphs=None)


class Seq:
    """A sequence iterated by index until IndexError (collections.abc.Sequence.__iter__ style)."""

    def __init__(self, *items):
        self.items = items

    def __getitem__(self, i):
        return self.items[i]

    def __iter__(self):
        i = 0
        try:
            while True:
                yield self[i]
                i += 1
        except IndexError:
            return


def zip_stops_a_generator_paused_in_try_except(x):
    for a, b in zip([1, 2], Seq(10, 20, 30)):  # Seq's generator stays paused in its try block
        x = x + a * b
    return x


def test_generator_left_paused_in_try_except_needs_no_closing():
    # GeneratorExit passes `except IndexError`: dropping the generator runs no code
    check_breaks(zip_stops_a_generator_paused_in_try_except, torch.ones(2), breaks=0)


def generator_paused_in_an_except_clause(x):
    def g():
        try:
            yield 1
        except ValueError:
            yield 2  # paused here: closing it runs no user code

    gen = g()
    next(gen)
    return x + gen.throw(ValueError)


def test_generator_left_paused_in_an_except_clause_needs_no_closing():
    check_breaks(generator_paused_in_an_except_clause, torch.ones(2), breaks=0)
    check_calls(generator_paused_in_an_except_clause, [torch.ones(2), torch.ones(2)], hits=[1])
