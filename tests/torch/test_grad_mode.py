"""Grad mode inside compiled code: torch.no_grad(), enable_grad() and
set_grad_enabled(b) as with-blocks and as decorators of functions called from
the compiled frame, user-defined context managers, and the grad mode left
after the call (restored on exit, as eager does).

Each test compares the compiled run with eager (values, requires_grad of
every output, grad mode after the call) and checks the number of graph breaks.
"""
import contextlib

import pytest
import torch

import dynamo_lite
from dynamo_lite.testing import check_breaks as check
from dynamo_lite.testing import print_with_graph_break as print  # noqa: A001 - a graph break at each print




def leaf():
    return torch.randn(3, requires_grad=True)


# ---- with-blocks ----------------------------------------------------------------------------
def test_no_grad_block():
    def f(x):
        with torch.no_grad():
            y = x * 2
        z = x * 3
        return y, z, torch.is_grad_enabled()

    out = check(f, leaf())
    assert not out.value[0].requires_grad and out.value[1].requires_grad


def test_enable_grad_inside_no_grad():
    def f(x):
        with torch.no_grad():
            a = x * 2
            with torch.enable_grad():
                b = x * 3
            c = x * 4
        return a, b, c

    check(f, leaf())


def test_set_grad_enabled_block_constant_and_argument():
    def f(x, flag):
        with torch.set_grad_enabled(flag):
            y = x * 2
        with torch.set_grad_enabled(False):
            z = x + 1
        return y, z

    check(f, leaf(), True)
    check(f, leaf(), False)


def test_set_grad_enabled_as_function_call_changes_mode():
    def f(x):
        torch.set_grad_enabled(False)
        y = x * 2
        torch.set_grad_enabled(True)
        return y, x * 3

    check(f, leaf())


def test_compiled_frame_called_under_no_grad():
    def f(x):
        return x * 2, torch.is_grad_enabled()

    with torch.no_grad():
        out = check(f, leaf())
    assert out.value[1] is False


def test_grad_mode_is_guarded_between_calls():
    def f(x):
        return x * 2

    cf = dynamo_lite.compile(f, backend="eager")
    x = leaf()
    assert cf(x).requires_grad
    with torch.no_grad():
        assert not cf(x).requires_grad
    assert cf(x).requires_grad


def test_no_grad_block_with_graph_break_inside():
    def f(x):
        with torch.no_grad():
            y = x * 2
            print("inside")
            z = y + 1
        return z, x * 2

    check(f, leaf(), breaks=1)


def test_is_grad_enabled_inside_blocks():
    def f(x):
        flags = [torch.is_grad_enabled()]
        with torch.no_grad():
            flags.append(torch.is_grad_enabled())
        flags.append(torch.is_grad_enabled())
        return x + 1, flags

    check(f, leaf())


def test_no_grad_block_in_inlined_function():
    def inner(x):
        with torch.no_grad():
            return x * 2

    def f(x):
        return inner(x) + x

    check(f, leaf())


def test_return_inside_no_grad_block_restores_mode():
    def f(x):
        with torch.no_grad():
            return x * 2

    check(f, leaf())


def test_backward_through_compiled_output():
    def f(x):
        with torch.no_grad():
            scale = x.sum() * 0 + 2
        return (x * scale).sum()

    x1, x2 = leaf(), None
    x2 = x1.detach().clone().requires_grad_(True)
    f(x1).backward()
    dynamo_lite.compile(f, backend="eager")(x2).backward()
    torch.testing.assert_close(x1.grad, x2.grad)


# ---- decorators -------------------------------------------------------------------------------
@torch.no_grad()
def _no_grad_helper(x):
    return x * 2, torch.is_grad_enabled()


@torch.no_grad
def _no_grad_bare_helper(x):
    return x * 2


@torch.enable_grad()
def _enable_grad_helper(x):
    return x * 3


@torch.set_grad_enabled(False)
def _set_false_helper(x):
    return x + 1


def test_no_grad_decorator_on_called_function():
    def f(x):
        y, flag = _no_grad_helper(x)
        return y, flag, x * 2, torch.is_grad_enabled()

    out = check(f, leaf())
    assert not out.value[0].requires_grad and out.value[1] is False


def test_bare_no_grad_decorator():
    check(lambda x: (_no_grad_bare_helper(x), x * 2), leaf())


def test_enable_grad_decorator_under_no_grad_block():
    def f(x):
        with torch.no_grad():
            a = _enable_grad_helper(x)
            b = x * 3
        return a, b

    out = check(f, leaf())
    assert out.value[0].requires_grad and not out.value[1].requires_grad


def test_set_grad_enabled_decorator():
    check(lambda x: (_set_false_helper(x), x + 1), leaf())


def test_decorated_method_of_user_class():
    class Model:
        def __init__(self, w):
            self.w = w

        @torch.no_grad()
        def predict(self, x):
            return x @ self.w

    check(lambda m, x: (m.predict(x), x @ m.w), Model(torch.randn(3, 2, requires_grad=True)), torch.randn(4, 3))


def test_decorator_applied_inside_compiled_frame():
    def f(x):
        @torch.no_grad()
        def g(v):
            return v * 2

        return g(x), x * 2

    out = check(f, leaf())
    assert not out.value[0].requires_grad


def test_no_grad_decorated_module_method():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(3, 2)

        @torch.no_grad()
        def forward(self, x):
            return self.lin(x)

    m = M()
    x = torch.randn(4, 3)
    counter_out = dynamo_lite.explain(m)(x)
    assert counter_out.graph_break_count == 0, [str(b) for b in counter_out.break_reasons]
    torch.testing.assert_close(counter_out.out, m(x))
    assert not counter_out.out.requires_grad


# ---- user context managers ------------------------------------------------------------------------
class Recorder:
    def __init__(self, log, tag):
        self.log = log
        self.tag = tag

    def __enter__(self):
        self.log.append("enter " + self.tag)
        return self

    def __exit__(self, exc_type, exc, tb):
        self.log.append("exit " + self.tag)
        return False


def test_user_context_manager_logs_to_input_list():
    def f(x, log):
        with Recorder(log, "a") as r:
            y = x * 2
            log.append(r.tag)
        return y

    check(f, torch.randn(3), [])


def test_nested_user_and_grad_context_managers():
    def f(x, log):
        with Recorder(log, "outer"), torch.no_grad():
            y = x * 2
            with Recorder(log, "inner"):
                z = y + 1
        return y, z

    check(f, leaf(), [])


def test_user_context_manager_passed_in():
    def f(x, ctx):
        with ctx:
            y = x + 1
        return y, ctx.log

    check(f, torch.randn(3), Recorder([], "in"))


def test_contextlib_nullcontext():
    def f(x):
        with contextlib.nullcontext():
            y = x * 2
        return y

    check(f, torch.randn(3))


def test_grad_mode_object_stored_and_entered_later():
    def f(x):
        ctx = torch.no_grad()
        y = x * 2
        with ctx:
            z = x * 3
        return y, z

    check(f, leaf())


@pytest.mark.parametrize("initial", [True, False])
def test_grad_mode_after_call_matches_eager(initial):
    def f(x):
        torch.set_grad_enabled(not initial)
        return x * 2

    torch.set_grad_enabled(initial)
    try:
        check(f, leaf())
    finally:
        torch.set_grad_enabled(True)


def test_nullcontext_with_enter_result_and_conditional_context():
    def f(x, use_no_grad):
        ctx = torch.no_grad() if use_no_grad else contextlib.nullcontext("r")
        with ctx as r:
            y = x * 2
        with contextlib.nullcontext(x) as same:
            z = same + 1
        return y, z, r

    check(f, leaf(), True)
    check(f, leaf(), False)
