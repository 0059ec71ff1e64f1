"""Grad-mode contexts and decorators around compiled code, eager vs compiled.

Every test compares compiled with eager through dynamo_lite.testing; known bugs are strict
xfails in tests/test_known_bugs.py.
"""
import contextlib

import torch

import dynamo_lite
from dynamo_lite.testing import check, check_calls


def _compiled(fn, backend="eager"):
    return dynamo_lite.compile(fn, backend=backend)


# ---------------------------------------------------------------------------
# grad mode
# ---------------------------------------------------------------------------
def test_no_grad_and_set_grad_enabled_decorators_on_compiled_function():
    @torch.no_grad()
    def f(x):
        return x * 2, torch.is_grad_enabled()

    @torch.set_grad_enabled(False)
    def g(x):
        return x * 3, torch.is_grad_enabled()

    check_calls(f, [(torch.ones(2, requires_grad=True),), (torch.ones(3, requires_grad=True),)])
    check_calls(g, [(torch.ones(2, requires_grad=True),), (torch.ones(3, requires_grad=True),)], graphs=None)


def test_set_grad_enabled_mode_from_argument_and_from_tensor():
    def f(x, mode):
        with torch.set_grad_enabled(bool(mode)):
            y = x * 2
        return y, y.requires_grad, torch.is_grad_enabled()

    x = torch.ones(2, requires_grad=True)
    check_calls(f, [(x, False), (x, True), (x, torch.tensor(False)), (x, torch.tensor(True))], graphs=None)


def test_set_grad_enabled_function_form_leaks_like_eager():
    def f(x):
        torch.set_grad_enabled(False)
        return x * 2, torch.is_grad_enabled()

    check(f, torch.ones(2, requires_grad=True))


def test_set_grad_enabled_across_graph_break_and_restore():
    def f(x):
        prev = torch.is_grad_enabled()
        torch.set_grad_enabled(False)
        y = x * 2
        print("break")
        z = x * 3
        torch.set_grad_enabled(prev)
        w = x * 4
        return y.requires_grad, z.requires_grad, w.requires_grad

    check(f, torch.ones(2, requires_grad=True))


def test_inference_mode_block_and_decorated_compiled_function():
    def f(x):
        with torch.inference_mode():
            y = x * 2
            inner = torch.is_inference_mode_enabled()
        return y, y.is_inference(), inner, torch.is_inference_mode_enabled(), torch.is_grad_enabled()

    @torch.inference_mode()
    def g(x):
        y = x * 2
        return y, y.is_inference(), torch.is_grad_enabled()

    check(f, torch.ones(2, requires_grad=True), graphs=None)
    check_calls(g, [(torch.ones(2),), (torch.ones(3),)], graphs=None)


def test_inference_mode_false_and_enable_grad_inside_inference_mode():
    def f(x):
        with torch.inference_mode(False):
            a = x * 2
        with torch.inference_mode():
            with torch.enable_grad():
                b = x * 2
        return a.requires_grad, b.requires_grad, b.is_inference()

    check(f, torch.ones(2, requires_grad=True), graphs=None)


def test_inference_tensor_inputs_and_their_errors():
    with torch.inference_mode():
        t = torch.ones(2)

    def f(x):
        return x * 2, x.is_inference()

    def g(x, w):
        return x * w

    def h(x):
        x.add_(1)
        return x

    check_calls(f, [(t,), (torch.ones(2),)], graphs=None)
    check(g, t, torch.ones(2, requires_grad=True), graphs=None)
    check(h, t, graphs=None)


def test_grad_mode_restored_after_exceptions():
    def f(x):
        with torch.no_grad():
            try:
                with torch.enable_grad():
                    raise ValueError("boom")
            except ValueError:
                pass
            g = torch.is_grad_enabled()
        return g, torch.is_grad_enabled(), x * 2

    def escapes(x):
        with torch.no_grad():
            x = x * 2
            raise RuntimeError("escapes")

    def caught_outside(x):
        try:
            with torch.no_grad():
                y = x * 2
                1 / 0
        except ZeroDivisionError:
            z = x * 3
        return y.requires_grad, z.requires_grad, torch.is_grad_enabled()

    check(f, torch.ones(2, requires_grad=True))
    check(escapes, torch.ones(2, requires_grad=True), graphs=None)
    check(caught_outside, torch.ones(2, requires_grad=True), graphs=None)
    assert torch.is_grad_enabled()


def test_grad_mode_leaked_by_function_form_before_exception():
    def f(x):
        torch.set_grad_enabled(False)
        if x.sum() > 0:
            raise ValueError("positive")
        return x

    check(f, torch.ones(2, requires_grad=True), graphs=None)


def test_grad_mode_context_objects_reused_and_passed_in():
    ctx = torch.no_grad()

    def f(x):
        with ctx:
            y = x * 2
        with ctx:
            z = x * 3
        return y.requires_grad, z.requires_grad, x * 4

    def g(x, c):
        with c:
            y = x * 2
        return y, y.requires_grad

    check(f, torch.ones(2, requires_grad=True), graphs=None)
    x = torch.ones(2, requires_grad=True)
    check_calls(g, [(x, torch.no_grad()), (x, torch.enable_grad()), (x, contextlib.nullcontext())], graphs=None)


def test_compiled_function_follows_outer_grad_mode_between_calls():
    def f(x):
        return x * 2, torch.is_grad_enabled()

    cf = _compiled(f)
    x = torch.ones(1, requires_grad=True)
    a = cf(x)
    with torch.no_grad():
        b = cf(x)
    c = cf(x)
    assert (a[1], b[1], c[1]) == (True, False, True)
    assert (a[0].requires_grad, b[0].requires_grad, c[0].requires_grad) == (True, False, True)


def test_grad_mode_seen_by_helper_across_breaks():
    def helper(x):
        print("in helper", torch.is_grad_enabled())
        return x + 1

    def f(x):
        with torch.no_grad():
            a = helper(x)
        b = helper(x)
        return a.requires_grad, b.requires_grad

    check(f, torch.ones(2, requires_grad=True))
