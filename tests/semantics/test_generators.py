"""Generators made in compiled code run lazily, as in Python (symbolic/inliner.py).

Calling a generator function in traced code runs nothing; each item asked for
resumes the generator's frame up to its next ``yield``.  So a generator sees
the world as it is when it runs (appends, in-place ops, attributes changed
after it was made), its side effects interleave with its consumer's, infinite
generators are fine, and a generator that must outlive the trace (returned,
inspected, ``send``) is made by Python instead.  Every case compares with
eager: return value, stdout, mutated arguments.
"""
import inspect
import types

import pytest
import torch

import dynamo_lite
from dynamo_lite.testing import CompileCounter, assert_same_as_eager, check_calls
from dynamo_lite.testing import print_with_graph_break


def naturals():
    i = 0
    while True:
        yield i
        i += 1


def scaled(x, n):
    for i in range(n):
        yield x * i


def infinite_generator_zipped_with_range(x):
    out = x
    for i, k in zip(range(4), naturals()):
        out = out + k * i
    return out


def sees_list_appended_after_creation(x):
    items = [x, x + 1]
    g = (t * 2 for t in items)
    items.append(x + 2)
    return list(g)


def sees_in_place_update_between_items(x):
    acc = torch.zeros_like(x)

    def running():
        for i in range(3):
            yield acc.clone()

    out = []
    for v in running():
        out.append(v)
        acc.add_(1)
    return out


def side_effects_interleave_with_consumer(x, log):
    def g():
        for i in range(3):
            log.append(f"make {i}")
            yield x * i

    total = x
    for v in g():
        log.append("use")
        total = total + v
    return total


def prints_interleave(x):
    def g():
        for i in range(2):
            print("yield", i)
            yield x + i

    for v in g():
        print("got", v.shape)
    return x


def partially_consumed_then_listed(x):
    g = scaled(x, 4)
    first = next(g)
    second = next(g)
    return first + second, list(g)


def exception_from_generator_caught_by_consumer(x):
    def g():
        yield x + 1
        raise ValueError("stop here")

    out = []
    try:
        for v in g():
            out.append(v)
    except ValueError as e:
        out.append(str(e))
    return out


def generator_of_generator(x):
    def doubled(gen):
        for v in gen:
            yield v * 2

    return sum(doubled(scaled(x, 3)))


def any_stops_at_the_first_true(x, log):
    def checks():
        for i in range(5):
            log.append(i)
            yield i >= 1

    return any(checks()), x + 1


def next_with_default_on_exhausted(x):
    g = scaled(x, 1)
    a = next(g)
    b = next(g, "done")
    return a, b


def returned_generator(x):
    return scaled(x + 1, 3)


def generator_state_inspected(x):
    g = scaled(x, 3)
    next(g)
    return inspect.getgeneratorstate(g), list(g)


def send_to_generator(x):
    def acc():
        total = 0
        while True:
            got = yield total
            total += got

    g = acc()
    next(g)
    g.send(2)
    return x * g.send(3)


@pytest.mark.parametrize("fn", [
    infinite_generator_zipped_with_range, sees_list_appended_after_creation, sees_in_place_update_between_items,
    prints_interleave, partially_consumed_then_listed, exception_from_generator_caught_by_consumer,
    generator_of_generator, next_with_default_on_exhausted, generator_state_inspected, send_to_generator,
], ids=lambda f: f.__name__)
def test_generator_behaves_as_in_eager(fn):
    assert_same_as_eager(fn, torch.randn(3))
    assert_same_as_eager(fn, torch.randn(3))


@pytest.mark.parametrize("fn", [side_effects_interleave_with_consumer, any_stops_at_the_first_true],
                         ids=lambda f: f.__name__)
def test_generator_side_effects_happen_when_items_are_taken(fn):
    assert_same_as_eager(fn, torch.randn(3), [])


@pytest.mark.parametrize("fn", [infinite_generator_zipped_with_range, side_effects_interleave_with_consumer,
                                generator_of_generator, sees_list_appended_after_creation],
                         ids=lambda f: f.__name__)
def test_lazy_generators_stay_in_one_graph(fn):
    counter = CompileCounter()
    args = (torch.randn(3), []) if "log" in fn.__code__.co_varnames else (torch.randn(3),)
    dynamo_lite.compile(fn, backend=counter)(*args)
    assert counter.frame_count == 1


def test_returned_generator_is_a_real_generator():
    x = torch.randn(3)
    out = dynamo_lite.compile(returned_generator, backend="eager")(x)
    assert isinstance(out, types.GeneratorType)
    assert all(torch.equal(a, b) for a, b in zip(out, returned_generator(x)))


def test_generator_paused_in_try_finally_is_closed():
    def f(x, log):
        def g():
            try:
                yield x + 1
                yield x + 2
            finally:
                log.append("closed")

        for v in g():
            out = v
            break
        return out * 2

    log = []
    out = dynamo_lite.compile(f, backend="eager")(torch.ones(2), log)
    assert torch.equal(out, torch.full((2,), 4.0))
    assert log == ["closed"]


def _except_inside_finally(t, log):
    try:
        try:
            yield t.sin()
        except ValueError:
            log.append("except")
            yield t.cos()
        finally:
            log.append("inner finally")
    finally:
        log.append("outer finally")


@pytest.mark.parametrize("how", ["dropped", "closed", "thrown then dropped"])
def test_closing_a_generator_paused_in_try_except_runs_the_finally_around_it(how):
    # GeneratorExit passes `except ValueError:`, and is re-raised into the finally blocks
    # around it (they ran no code here before: the except clause was taken to end it)
    def f(x, log):
        g = _except_inside_finally(x, log)
        y = next(g)
        if how == "closed":
            g.close()
        elif how == "thrown then dropped":
            y = y + g.throw(ValueError)
        log.append("returning")
        return y * 2

    check_calls(f, [(torch.ones(2), [])], graphs=None)


def test_break_out_of_generator_runs_its_finally_before_following_code():
    # a graph break in the loop body: the loop runs in a resume function, which receives the
    # generator; breaking out drops the last reference right there, so its finally prints first
    def f(x):
        def gen():
            try:
                yield 1
                yield 2
            finally:
                print_with_graph_break("gen closed")

        for v in gen():
            if v == 1:
                break
        print_with_graph_break("after loop")
        return x + v

    check_calls(f, [torch.ones(1)], interleave=False, graphs=None)


# ---- next() on an exhausted generator: StopIteration carries its return value (as the
# trampoline package reads it: torchsde's BrownianInterval)
def yields_then_returns(x):
    yield 1
    return x * 2


def returns_at_once(x):
    return x + 1
    yield


def drained_with_next(g):
    out = []
    try:
        while True:
            out.append(next(g))
    except StopIteration as e:
        out.append(e.value)
    return out


def next_after_yield(x):
    return drained_with_next(yields_then_returns(x))


def next_on_a_returning_generator(x):
    return drained_with_next(returns_at_once(x)), x * 3


def next_through_yield_from(x):
    def outer():
        got = yield from returns_at_once(x)
        return got * 2
    return drained_with_next(outer())


@pytest.mark.parametrize("fn", [next_after_yield, next_on_a_returning_generator, next_through_yield_from])
def test_next_raises_stop_iteration_with_the_generators_return_value(fn):
    out = assert_same_as_eager(fn, torch.ones(2))  # the drained list ends with the returned tensor
    assert out.exception is None


def test_a_generator_resumed_from_its_own_code_raises_value_error():
    # (the trace looped forever)
    def f(x):
        def gen():
            yield next(g)

        g = gen()
        try:
            next(g)
        except ValueError as e:
            return x + 1, e.args, list(g)

    check_calls(f, [torch.ones(2)])
