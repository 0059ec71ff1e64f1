"""contextlib in compiled code, eager vs compiled, with no more graph breaks than torch.compile
2.13 (none where it has none): ``@contextmanager`` contexts defined at module level or in the
compiled function (their generator is inlined: setup, the value of ``as``, teardown, an
exception of the block thrown into the generator, which may swallow it or let it through),
``nullcontext`` and ``suppress``.  What the trace does not model (a generator that yields
twice, one that raises another exception on leaving, a context live at a graph break) is run
by Python.
"""
import contextlib

import pytest
import torch

from dynamo_lite.testing import check_breaks, check_calls

LOG = []


@contextlib.contextmanager
def scaled(factor, log):
    log.append(("enter", factor))
    try:
        yield factor * 2
    finally:
        log.append(("exit", factor))


@contextlib.contextmanager
def swallowing(log):
    try:
        yield
    except ValueError as e:
        log.append(("swallowed", e.args))


@contextlib.contextmanager
def passing(log):
    try:
        yield "p"
    except KeyError:
        log.append("saw KeyError")
        raise


@contextlib.contextmanager
def plain():
    yield 5


def module_level_contextmanager(x, log):
    with scaled(3, log) as v:
        x = x * v
        log.append("body")
    return x


def nested_contextmanagers(x, log):
    with scaled(1, log) as a, scaled(2, log) as b:
        with plain() as c:
            x = x + a + b + c
    return x


def contextmanager_defined_inside(x):
    seen = []

    @contextlib.contextmanager
    def tagged(tag):
        seen.append(f"open {tag}")
        yield tag.upper()
        seen.append(f"close {tag}")

    with tagged("a") as t:
        y = x + len(t)
    return y, seen


def exception_swallowed_by_the_generator(x, log):
    with swallowing(log):
        x = x + 1
        raise ValueError("inside", 3)
    return x * 2


def exception_let_through_by_the_generator(x, log):
    try:
        with passing(log) as p:
            x = x + len(p)
            raise KeyError("k")
    except KeyError as e:
        log.append(("caught", e.args))
    return x


def exception_passes_through_finally(x, log):
    try:
        with scaled(2, log):
            raise RuntimeError("boom")
    except RuntimeError as e:
        log.append(e.args)
    return x + 1


def nullcontext_and_suppress(x, log):
    with contextlib.nullcontext(4) as four:
        x = x + four
    with contextlib.suppress(KeyError, IndexError):
        x = x * 2
        raise IndexError("dropped")
    with contextlib.suppress(ZeroDivisionError):
        x = x - 1
    try:
        with contextlib.suppress(KeyError):
            raise ValueError("not suppressed")
    except ValueError as e:
        log.append(e.args)
    return x


def contextmanager_in_a_loop(x, log):
    for i in range(3):
        with scaled(i, log) as v:
            x = x + v
    return x


CASES = [module_level_contextmanager, nested_contextmanagers, exception_swallowed_by_the_generator,
         exception_let_through_by_the_generator, exception_passes_through_finally, nullcontext_and_suppress,
         contextmanager_in_a_loop]


@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
def test_same_as_eager_without_graph_breaks(fn):
    check_breaks(fn, torch.arange(3.0), [], breaks=0)


@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
def test_second_call_hits_the_cache(fn):
    check_calls(fn, [(torch.arange(3.0), []), (torch.arange(3.0), [])], hits=[1], graphs=None)


def test_contextmanager_defined_in_the_compiled_function():
    check_breaks(contextmanager_defined_inside, torch.ones(2), breaks=0)


@contextlib.contextmanager
def yields_twice():
    yield 1
    yield 2


@contextlib.contextmanager
def raises_another(log):
    try:
        yield
    except ValueError:
        raise TypeError("replaced")


def misbehaving_contexts(x, log):
    try:
        with yields_twice():
            x = x + 1
    except RuntimeError as e:
        log.append(str(e))
    try:
        with raises_another(log):
            raise ValueError("v")
    except TypeError as e:
        log.append((type(e.__context__).__name__, e.args))
    return x


def context_live_at_a_graph_break(x, log):
    with scaled(2, log) as v:
        y = x * v
        log.append(int(y.sum().item()))  # data-dependent: a graph break inside the block
    return y


@pytest.mark.parametrize("fn", [misbehaving_contexts, context_live_at_a_graph_break], ids=lambda f: f.__name__)
def test_python_runs_what_the_trace_does_not_model(fn):
    check_calls(fn, [(torch.ones(2), []), (torch.ones(2), [])], graphs=None)
