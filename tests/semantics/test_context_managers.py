"""User and contextlib context managers around tensor code, eager vs compiled.

Every test compares compiled with eager through dynamo_lite.testing; known bugs are strict
xfails in tests/test_known_bugs.py.
"""
import contextlib
import logging

import torch

from dynamo_lite.testing import check

log = logging.getLogger("acceptance.model")


class MyError(Exception):
    pass


class CodeError(ValueError):
    def __init__(self, code):
        super().__init__(f"code {code}")
        self.code = code


# ---------------------------------------------------------------- context managers

class Recorder:
    def __init__(self, log):
        self.log = log

    def __enter__(self):
        self.log.append("enter")
        return self

    def __exit__(self, exc_type, exc, tb):
        self.log.append(("exit", exc_type.__name__ if exc_type else None))
        return False


class Suppress:
    def __enter__(self):
        return "value"

    def __exit__(self, exc_type, exc, tb):
        return exc_type is not None and issubclass(exc_type, KeyError)


@contextlib.contextmanager
def scaled(log, k):
    log.append(("start", k))
    try:
        yield k * 2
    finally:
        log.append(("stop", k))


def test_user_context_manager_enter_exit():
    def f(x, log):
        with Recorder(log) as r:
            y = x * 2
            r.log.append("body")
        return y

    check(f, torch.ones(2), [], graphs=None)


def test_user_context_manager_sees_exception_and_suppresses():
    def f(x, log):
        with Recorder(log):
            with Suppress() as v:
                y = x + 1
                raise KeyError("swallowed")
        return y, v

    check(f, torch.ones(2), [], graphs=None)


def test_contextlib_contextmanager_and_nested_with():
    def f(x, log):
        with scaled(log, 2) as a, scaled(log, 3) as b:
            y = x * a * b
        return y

    check(f, torch.ones(2), [], graphs=None)


def test_exception_propagates_through_contextmanager_finally():
    def f(x, log):
        with scaled(log, 1):
            y = x + 1
            raise MyError("inside")
        return y

    check(f, torch.ones(2), [], graphs=None)


def test_nullcontext_and_exitstack():
    def f(x, log):
        with contextlib.nullcontext(x) as t:
            y = t * 2
        with contextlib.ExitStack() as stack:
            stack.callback(log.append, "cb")
            y = y + 1
        return y

    check(f, torch.ones(2), [], graphs=None)


def test_suppress_contextlib():
    def f(x):
        with contextlib.suppress(ZeroDivisionError):
            x = x + 1
            _ = 1 / 0
        return x

    check(f, torch.ones(2), graphs=None)


def test_grad_mode_class_called_on_a_function_decorates_it():
    # torch.no_grad(f) is no_grad()(f) (its __new__): f runs under the mode, the call site's
    # mode is left alone; fullgraph: no break for it
    def fn(x):
        def inner(y):
            return y.sin() * 2, torch.is_grad_enabled()

        with torch.enable_grad():
            wrapped = torch.no_grad(inner)
            assert torch.is_grad_enabled()
        with torch.no_grad():
            back = torch.enable_grad(inner)
        out, mode = wrapped(x)
        out2, mode2 = back(x)
        return out, mode, out2, mode2, out2.requires_grad, torch.is_grad_enabled()

    check(fn, torch.ones(3, requires_grad=True), fullgraph=True)


def test_a_local_function_decorated_with_a_torch_mode_context_survives_a_graph_break():
    # `@torch.inference_mode()` / `@torch.autocast(...)` on a local function, then a graph break:
    # the code rebuilding the function called the new context without its NULL
    # (UnboundLocalError from the generated code)
    def inference_off(x):
        @torch.inference_mode(False)
        def inner(t):
            return t * 2
        a = inner(x)
        return a.grad_fn is not None, a

    def inference_on(x):
        @torch.inference_mode()
        def inner(t):
            return t * 2
        a = inner(x)
        return a.grad_fn is None, a.is_inference()

    def autocast(x):
        @torch.autocast("cpu", dtype=torch.bfloat16)
        def inner(t):
            return t @ t
        a = inner(x)
        return a.grad_fn is not None, a.dtype, inner(x).float()

    for fn in (inference_off, inference_on, autocast):
        check(fn, torch.ones(2, 2, requires_grad=True), graphs=None)
