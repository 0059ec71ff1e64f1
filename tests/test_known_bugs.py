"""Every known dynamo_lite bug, one strict xfail each, with its reason.

A fix makes its test XPASS, which fails the run (strict): then drop the mark and move the
test to the subject file it belongs in (tests/<folder>/ as named in the comment above it).
No other file holds a strict xfail.
"""
import builtins
import contextlib

import pytest
import torch

import dynamo_lite
from dynamo_lite.backends import lookup_backend
from dynamo_lite.testing import CompileCounter, check, check_calls
from dynamo_lite.testing import print_with_graph_break as print  # noqa: A001 - a graph break at each print


def t(*vals):
    return torch.tensor([float(v) for v in vals])


X1, X2 = (t(1, 2, 3),), (t(-4, 5, 0.5, 2),)


# from tests/torch/test_backends.py
@pytest.mark.xfail(strict=True, reason="bug: aot_eager regenerates a view of an input made under no_grad with "
                                       "grad_fn=ViewBackward: gradient leaks into the input (torch.compile too)")
def test_output_view_created_under_no_grad_aot_eager():
    def f(x):
        with torch.no_grad():
            v = x.view(3)
        return v

    make = lambda: (torch.randn(3, requires_grad=True),)  # noqa: E731
    check_calls(f, [make, make], backend=CompileCounter(lookup_backend("aot_eager")[0]), views=True,
                grad_fn_names=False, warnings=False, backward=lambda v: (v * 3).sum())


class _Noisy:
    def __init__(self, name):
        self.name = name

    def __del__(self):
        print("del", self.name)


class _NoisyCM(_Noisy):
    def __enter__(self):
        builtins.print("enter", self.name)
        return self

    def __exit__(self, *exc):
        builtins.print("exit", self.name)
        return False


# from tests/semantics/test_object_lifetime.py
@pytest.mark.xfail(strict=True, reason="open: a local rebound in a loop whose body breaks the graph is freed one "
                                       "iteration late: the body runs as a loop-body function, and the parent frame "
                                       "keeps its own copy of the local until the body returns the new value "
                                       "(codegen/loop_bodies.py)")
def test_local_rebound_in_a_loop_with_a_break_is_freed_at_the_rebinding():
    def f(x):
        for i in range(3):
            o = _Noisy(i)  # noqa: F841 - frees the previous iteration's object
            print("it", i)  # a graph break
        builtins.print("after loop")
        return x + 1

    check_calls(f, [(torch.ones(1),)], graphs=None)


# from tests/semantics/test_object_lifetime.py
@pytest.mark.xfail(strict=True, reason="open: the context manager of a with-statement is freed after the code "
                                       "following the block: its last reference is the bound __exit__, which the "
                                       "trace drops inside the exit call, not at a del/store/pop (DL0066 is not "
                                       "raised there)")
def test_with_statement_context_manager_freed_after_the_block():
    def f(x):
        with _NoisyCM("cm"):
            print("in")  # a graph break
        builtins.print("after with")
        return x

    check(f, torch.ones(1), graphs=None)


# from tests/semantics/test_object_lifetime.py
@pytest.mark.xfail(strict=True, reason="open: a tensor local overwritten after a graph break lives until the "
                                       "function returns: the frame that breaks keeps the locals that are dead at "
                                       "the break (resume functions take the live ones, and of the dead ones only "
                                       "those whose freeing runs code; taking every dead local would guard values "
                                       "never used)")
def test_tensor_overwritten_after_a_break_is_freed_at_the_assignment():
    import weakref

    alive = dynamo_lite.disable(lambda r: builtins.print("alive", r() is not None))

    def f(x):
        t = x * 2
        r = weakref.ref(t)  # a break (t is dead after it: overwritten below)
        t = x + 1
        alive(r)
        return t

    check(f, torch.ones(2), graphs=None)


# from tests/semantics/test_exceptions.py
@pytest.mark.xfail(strict=True, reason="open: a graph whose only trace is a random draw re-raises a later graph error "
                                       "at once: the Python work recorded before the failing op (an append) is lost")
def test_error_after_a_random_draw_keeps_eagers_python_work():
    def f(x, idx, log):
        noise = torch.rand(3)
        log.append("drew")
        return (x + noise)[idx]

    check(f, torch.zeros(3), torch.tensor([10]), [])


# from tests/semantics/test_exceptions.py
# A graph that wrote into an input re-raises a graph error at once: the Python work recorded before
# the failing op (replayed after the graph) and the handlers around it are skipped.  Ending the graph
# before every op that can fail on tensor values there was tried and dropped: HF's StaticCache
# (index_copy_ into the cache inside a with-block) went from 1 graph to 13.
def update_then_append_then_index(x, idx, log):
    x.add_(1)
    log.append("updated")  # Python work waiting for the graph
    return x[idx]


def update_then_index_in_finally(x, idx, log):
    try:
        x.mul_(2)
        log.append("try")
        return x[idx]
    finally:
        log.append("finally")


def update_then_index_in_suppressing_with(x, idx, log):
    with contextlib.suppress(IndexError):  # eager returns; the compiled call raised
        x.mul_(2)
        log.append("mul")
        x = x[idx] + 1
    return x


@pytest.mark.xfail(strict=True, reason="open: a graph that wrote into an input re-raises a graph error at once, "
                                       "skipping the Python work before the failing op and the handlers around it")
@pytest.mark.parametrize("fn", [update_then_append_then_index, update_then_index_in_finally,
                                update_then_index_in_suppressing_with])
def test_error_after_an_in_place_update_keeps_eagers_python_work_and_handlers(fn):
    check(fn, torch.ones(3), torch.tensor([10]), [])
