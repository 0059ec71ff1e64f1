"""Closure cells of a frame after a graph break: in the resume function the frame's cell
variables are free variables, yet reading or deleting an empty one raises what the original
frame raises (UnboundLocalError with the local-variable message), and cells keep working
(shared with closures, deleted, reassigned) across the break.
"""
import pytest
import torch

import dynamo_lite
from dynamo_lite.testing import check_breaks, check_calls
from dynamo_lite.testing import print_with_graph_break as print  # noqa: A001 - a graph break at each print


def t(*vals):
    return torch.tensor([float(v) for v in vals])


X1, X2 = (t(1, 2, 3),), (t(-4, 5, 0.5, 2),)


def test_except_unboundlocalerror_on_cell_after_break():
    def f(x):
        y = x + 1
        print("break")
        try:
            r = v  # noqa: F821 - v is assigned below (a cell: the lambda captures it)
        except UnboundLocalError:
            r = "unbound"
        v = 2
        return y, r, (lambda: v)()

    check_calls(f, [X1, X2])



def nonlocal_del(x):
    v = 1
    def g():
        nonlocal v
        del v
    g()
    try:
        return v
    except NameError as e:
        return x, str(e)


def test_mixed_nonlocal_del():
    check_calls(nonlocal_del, [(t(1,2),), (t(3,4,5),)], graphs=None)

def cell_unbound_name_error_type(x):
    print("b")
    try:
        v
    except NameError as e:
        r = (type(e).__name__, str(e))
    v = 1
    return (lambda: v)(), r, x


def test_mixed_cell_unbound_name_error_type():
    check_calls(cell_unbound_name_error_type, [(t(1,2),), (t(3,4,5),)], graphs=None)



def test_unassigned_cell_variable_read_after_a_break_raises_unboundlocalerror():
    def f(x):
        print("break")
        v = (x.sum() * v).item()  # noqa: F821 - read before assignment, on purpose

        def g(a):
            return a * v

        return g(x)

    with pytest.raises(Exception) as eager:
        f(torch.ones(2))
    with pytest.raises(Exception) as compiled:
        dynamo_lite.compile(f, backend="eager")(torch.ones(2))
    assert (type(compiled.value), str(compiled.value)) == (type(eager.value), str(eager.value))



def test_deleted_cell_read_after_a_break_raises_unboundlocalerror():
    def f(x):
        v = x * 2
        print("b")
        w = v + 1
        del v
        try:
            v  # noqa: B018 - raises: v was deleted
        except NameError as e:
            r = (type(e).__name__, str(e))
        v = 5
        return (lambda: v + w)(), r

    check_calls(f, [X1, X2], graphs=None)


def test_cell_maybe_assigned_on_a_data_dependent_branch():
    def f(x):
        print("b")
        if x.sum() > 100:
            v = 3
        try:
            r = v * x
        except UnboundLocalError as e:
            r = str(e)
        return r, (lambda: v if x.sum() > 100 else 0)()

    check_calls(f, [X1, (torch.full((3,), 50.0),)], graphs=None)


def test_cell_assigned_after_the_break_is_traced_without_another_break():
    def f(x):
        print("b")
        v = x + 1
        g = lambda: v * 3  # noqa: E731
        return g() * 2, v + 1

    check_breaks(f, torch.ones(2), breaks=1)
