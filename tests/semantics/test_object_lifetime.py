"""When objects are freed: finalizers (``__del__``, a paused generator's ``finally``, weakref
callbacks) run where eager runs them, around graph breaks and in compiled frames.

Python frees an object when its last reference goes: a ``del``, an assignment over it, a value
left unused, the end of a frame.  A trace never makes objects it does not need and drops
references only when the generated code returns, so:

- an instance of a class with ``__del__`` is made by Python (DL0065, variables/user_objects.py);
- dropping what may be the last reference to a real object whose freeing runs code breaks the
  graph there (DL0066, symbolic/opcodes/load_store.py ``drop_reference``);
- resume functions are called through ``_C.call_moving`` and take the dead locals whose
  freeing runs code (codegen/resume.py), so neither the frame that breaks nor the hooked frame
  of the resume function keeps anything alive (csrc/eval_frame.c).

Every case compares stdout (the finalizers print) with eager.
"""
import weakref

import pytest
import torch

import dynamo_lite
from dynamo_lite import graph_breaks as gb
from dynamo_lite.testing import check, check_breaks, print_with_graph_break


class Noisy:
    def __init__(self, name):
        self.name = name

    def __del__(self):
        print("del", self.name)


def gen():
    try:
        yield 1
        yield 2
    finally:
        print("gen closed")


def del_after_break(x):
    o = Noisy("a")
    print_with_graph_break("p")
    del o
    print("after del")
    return x + 1


def dead_after_break(x):
    o = Noisy("a")  # noqa: F841 - freed when the frame ends
    print_with_graph_break("p")
    return x + 1


def rebound_after_break(x):
    o = Noisy("a")  # noqa: F841
    print_with_graph_break("p")
    o = Noisy("b")  # frees "a" here
    print("after rebind")
    return x + 1


def del_without_break(x):
    o = Noisy("a")
    y = x * 2
    del o
    print("after del")
    return y


def never_used(x):
    Noisy("a")
    print("mid")
    return x + 1


def temporary_argument(x):
    print_with_graph_break(Noisy("tmp").name)
    print("after")
    return x


def temporary_on_the_stack_at_a_break(x):
    y = [Noisy("s")][0].name + str(print_with_graph_break("p"))
    print("after", y)
    return x


def generator_dropped_after_break(x):
    g = gen()
    v = next(g)
    print_with_graph_break("p")
    del g  # closes it: its finally prints now
    print("after del")
    return x + v


def generator_dropped_without_break(x):
    g = gen()
    v = next(g)
    del g
    print("after del")
    return x + v


def argument_deleted_after_break(x, n):
    print_with_graph_break("p")
    del n
    print("after del")
    return x + 1


def weakref_callback_after_break(x, n):
    r = weakref.ref(n, lambda _: print("callback"))
    print_with_graph_break("p")
    del n
    print("after del", r() is None)
    return x + 1


@pytest.mark.parametrize("fn", [
    del_after_break, dead_after_break, rebound_after_break, del_without_break, never_used, temporary_argument,
    temporary_on_the_stack_at_a_break, generator_dropped_after_break, generator_dropped_without_break,
], ids=lambda f: f.__name__)
def test_finalizer_runs_where_eager_runs_it(fn):
    check(fn, torch.ones(2), graphs=None)


@pytest.mark.parametrize("fn", [argument_deleted_after_break, weakref_callback_after_break],
                         ids=lambda f: f.__name__)
def test_argument_freed_in_the_frame(fn):
    check(fn, torch.ones(2), Noisy("n"), graphs=None)


def _break_ids(fn, *args):
    return [b.break_id for b in dynamo_lite.explain(fn)(*args).break_reasons]


def test_making_an_object_with_del_breaks_there():
    def f(x):
        y = x * 2
        o = Noisy("a")
        return y + len(o.name)

    check_breaks(f, torch.ones(2), breaks=1)
    assert _break_ids(f, torch.ones(2)) == [gb.FINALIZER_OBJECT]


def test_dropping_a_real_object_with_del_breaks_there():
    def f(x, n):
        y = x * 2
        del n
        print("after del")
        return y

    check_breaks(f, torch.ones(2), Noisy("n"), breaks=1)
    assert _break_ids(f, torch.ones(2), Noisy("n")) == [gb.FINALIZER_DROPPED]


def test_dropping_an_object_held_elsewhere_does_not_break():
    def f(x, n):
        m = n
        del n  # m still holds it
        print("after del")
        return x + len(m.name)

    check_breaks(f, torch.ones(2), Noisy("n"), breaks=0)


@dynamo_lite.disable
def report_alive(r):
    print("alive", r() is not None)  # asked natively, after the frame let go


def tensor_deleted_after_a_break(x):
    t = x * 2
    r = weakref.ref(t)  # a break: the rest runs in a resume function that receives t
    del t  # its last reference (not the graph's outputs, not the frame that broke)
    report_alive(r)
    return x


def test_tensor_deleted_after_a_break_is_freed_there():
    check(tensor_deleted_after_a_break, torch.ones(2), graphs=None)


def weakref_to_a_deleted_intermediate_tensor(x):
    t = x * 2
    r = weakref.ref(t)
    del t
    print("dead", r() is None)
    return x + 1


def test_weakref_to_a_deleted_intermediate_tensor_is_dead():
    check(weakref_to_a_deleted_intermediate_tensor, torch.ones(1), graphs=None)
