"""Context managers the interpreter enters itself: ``contextlib.nullcontext`` and grad mode
(``torch.no_grad()``, ``enable_grad()``, ``set_grad_enabled(b)``, as ``with`` blocks, as
decorators, and the ``__exit__`` left on the stack).
Tested by tests/torch/test_grad_mode.py.
"""
from __future__ import annotations

from typing import Optional

from .. import runtime
from .base import VariableTracker
from .constant import NONE
from .methods import BoundMethodOfVariable


class ContextManagerVariable(VariableTracker):
    """A context manager whose ``with`` the interpreter runs itself (BEFORE_WITH
    calls ``enter``; the ``__exit__`` left on the stack calls ``exit``)."""

    def enter(self, tx) -> VariableTracker:
        raise NotImplementedError

    def exit(self, tx) -> VariableTracker:
        raise NotImplementedError


class NullContextVariable(ContextManagerVariable):
    """contextlib.nullcontext(enter_result)."""

    def __init__(self, enter_result: VariableTracker):
        super().__init__()
        self.enter_result = enter_result

    def python_type(self):
        import contextlib

        return contextlib.nullcontext

    def enter(self, tx):
        return self.enter_result

    def exit(self, tx):
        return NONE

    def call_method(self, tx, name, args, kwargs):
        if name == "__enter__":
            return self.enter(tx)
        if name == "__exit__":
            return self.exit(tx)
        return super().call_method(tx, name, args, kwargs)

    def var_getattr(self, tx, name):
        if name in ("__enter__", "__exit__"):
            return BoundMethodOfVariable(self, name)
        return super().var_getattr(tx, name)

    def reconstruct(self, cg):
        import contextlib

        cg.load_callable(contextlib.nullcontext)
        cg.reconstruct(self.enter_result)
        cg.call(1)

    def can_reconstruct(self):
        return self.enter_result.can_reconstruct()


class GradModeVariable(ContextManagerVariable):
    """torch.no_grad() / enable_grad() / set_grad_enabled(b) used as a context manager."""

    def __init__(self, enabled: bool, ctx_type: type, sets_on_init: bool = False):
        super().__init__()
        self.enabled = enabled
        self.ctx_type = ctx_type
        self.sets_on_init = sets_on_init  # set_grad_enabled changes mode when constructed
        self.prev: Optional[bool] = None

    def python_type(self):
        return self.ctx_type

    def describe(self):
        return f"{self.ctx_type.__name__} context"

    def enter(self, tx) -> VariableTracker:
        if self.prev is None:
            self.prev = tx.output.grad_enabled
        tx.output.set_grad_enabled(self.enabled)
        return NONE

    def exit(self, tx) -> VariableTracker:
        tx.output.set_grad_enabled(self.prev)
        return NONE

    def call_method(self, tx, name, args, kwargs):
        if name == "__enter__":
            return self.enter(tx)
        if name == "__exit__":
            return self.exit(tx)
        if name == "clone":
            return GradModeVariable(self.enabled, self.ctx_type)
        return super().call_method(tx, name, args, kwargs)

    def var_getattr(self, tx, name):
        if name in ("__enter__", "__exit__", "clone"):
            return BoundMethodOfVariable(self, name)
        return super().var_getattr(tx, name)

    def call_function(self, tx, args, kwargs):
        # used as a decorator: @torch.no_grad() def f(...)
        if len(args) == 1 and not kwargs:
            if self.sets_on_init and self.prev is not None:
                tx.output.set_grad_enabled(self.prev)  # as set_grad_enabled.__call__: undo what __init__ set
            return GradModeDecoratedVariable(self, args[0])
        return super().call_function(tx, args, kwargs)

    def reconstruct(self, cg):
        # Rebuild an *entered* context: its __exit__ must restore the mode that
        # was current before the with-block (known from the trace).
        if self.prev is None:
            cg.load_callable(self.ctx_type)
            cg.call(0)
            return
        cg.load_callable(runtime.reenter_grad_mode)
        cg.load_const(self.enabled)
        cg.load_const(self.prev)
        cg.call(2)

    def can_reconstruct(self):
        return self.prev is not None or not self.sets_on_init


class GradModeExitVariable(VariableTracker):
    """The bound ``__exit__`` that BEFORE_WITH leaves on the stack."""

    def __init__(self, ctx: GradModeVariable):
        super().__init__()
        self.ctx = ctx

    def call_function(self, tx, args, kwargs):
        return self.ctx.exit(tx)

    def reconstruct(self, cg):
        self.ctx.reconstruct(cg)
        cg.load_attr("__exit__")

    def can_reconstruct(self):
        return True


class GradModeDecoratedVariable(VariableTracker):
    """A function wrapped by a grad-mode context used as a decorator."""

    def __init__(self, ctx: GradModeVariable, fn: VariableTracker):
        super().__init__()
        self.ctx = ctx
        self.fn = fn

    def call_function(self, tx, args, kwargs):
        ctx = GradModeVariable(self.ctx.enabled, self.ctx.ctx_type)
        ctx.enter(tx)
        result = self.fn.call_function(tx, args, kwargs)
        ctx.exit(tx)
        return result


__all__ = ["ContextManagerVariable", "NullContextVariable", "GradModeVariable", "GradModeExitVariable", "GradModeDecoratedVariable"]
