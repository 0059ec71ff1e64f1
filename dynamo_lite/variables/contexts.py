"""Context managers the interpreter enters itself: ``contextlib.nullcontext``, grad mode
(``torch.no_grad()``, ``enable_grad()``, ``set_grad_enabled(b)``, as ``with`` blocks, as
decorators, and the ``__exit__`` left on the stack), ``contextlib.suppress`` and
``torch.inference_mode(mode)`` and ``torch.autocast(...)`` (a ``with`` block or a decorator:
entered in the graph and, while tracing, for real, so results are inference tensors and
autocast dtypes exactly where eager's are; a graph break inside the block makes Python run the
whole block), ``@contextlib.contextmanager`` contexts (their generator runs inlined: entering runs it to its
``yield``, leaving resumes it, or throws the exception of the block into it, as
``_GeneratorContextManager`` does).
Tested by tests/torch/test_grad_mode.py and tests/semantics/test_context_managers.py.
"""
from __future__ import annotations

from typing import Optional

import torch

from .. import graph_breaks as gb
from .. import runtime
from ..exc import GraphBreak
from .base import VariableTracker
from .constant import FALSE, NONE, TRUE
from .methods import BoundMethodOfVariable


class ContextManagerVariable(VariableTracker):
    """A context manager whose ``with`` the interpreter runs itself (BEFORE_WITH
    calls ``enter``; the ``__exit__`` left on the stack calls ``exit``)."""

    def enter(self, tx) -> VariableTracker:
        raise NotImplementedError

    def exit(self, tx) -> VariableTracker:
        raise NotImplementedError

    def exit_with(self, tx, args: list) -> VariableTracker:
        """``__exit__(*args)``: (None, None, None) or the exception type, value and traceback.
        Contexts that never swallow exceptions ignore them."""
        return self.exit(tx)

    def lets_exceptions_through(self) -> bool:
        """True when ``__exit__`` never suppresses an exception nor raises another one."""
        return True


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
    """The bound ``__exit__`` that BEFORE_WITH leaves on the stack (of any ContextManagerVariable)."""

    def __init__(self, ctx: ContextManagerVariable):
        super().__init__()
        self.ctx = ctx

    def call_function(self, tx, args, kwargs):
        return self.ctx.exit_with(tx, list(args))

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


class GlobalModeContextVariable(ContextManagerVariable):
    """A context whose mode lives in torch's thread-local state and is entered inside the graph:
    ``torch.inference_mode(mode)``, ``torch.autocast(...)``.  Entering records
    ``enter_fn(*args)`` in the graph (leaving, ``exit_fn`` of its result) and enters the mode in
    the trace too (the fake ops then see what the real ones will: inference tensors, autocast
    dtypes; grad mode reads as eager's).  It is never rebuilt: a graph break inside the block,
    or the object outliving the trace, makes the trace stop where it was created, and Python
    runs the block."""

    def __init__(self, ctx_type: type, enter_fn, args: tuple, exit_fn, created_at_step: int, created_where: list):
        super().__init__()
        self.ctx_type = ctx_type
        self.enter_fn = enter_fn
        self.args = args
        self.exit_fn = exit_fn
        self.created_at_step = created_at_step
        self.created_where = created_where
        self.node = None  # the enter node while entered

    def python_type(self):
        return self.ctx_type

    def describe(self):
        return f"{self.ctx_type.__name__}{self.args!r}"

    def fresh(self, tx) -> "GlobalModeContextVariable":
        return GlobalModeContextVariable(self.ctx_type, self.enter_fn, self.args, self.exit_fn, tx.root().steps,
                                         tx.user_stack())

    def _python_runs_it(self, why: str) -> GraphBreak:
        brk = GraphBreak(gb.UNSUPPORTED_CONTEXT_MANAGER, f"{self.describe()} {why}; Python runs it")
        brk.restart_step = self.created_at_step
        brk.user_stack = list(self.created_where)
        return brk

    def enter(self, tx):
        if self.node is not None:
            raise self._python_runs_it("is entered twice")
        self.node = tx.output.enter_global_mode(self.enter_fn, self.args, self.exit_fn)
        tx.output.grad_enabled = torch.is_grad_enabled()  # inference mode turns grad mode off
        return NONE

    def exit(self, tx):
        if self.node is None:
            raise self._python_runs_it("is left without being entered")
        tx.output.exit_global_mode(self.node)
        self.node = None
        tx.output.grad_enabled = torch.is_grad_enabled()  # what the block found, restored
        return NONE

    def call_method(self, tx, name, args, kwargs):
        if name == "__enter__" and not args and not kwargs:
            return self.enter(tx)
        if name == "__exit__":
            return self.exit(tx)
        return super().call_method(tx, name, args, kwargs)

    def var_getattr(self, tx, name):
        if name in ("__enter__", "__exit__"):
            return BoundMethodOfVariable(self, name)
        return super().var_getattr(tx, name)

    def call_function(self, tx, args, kwargs):
        if len(args) == 1 and not kwargs and self.node is None:  # used as a decorator
            return GlobalModeDecoratedVariable(self, args[0])
        return super().call_function(tx, args, kwargs)

    def reconstruct(self, cg):
        raise self._python_runs_it("outlives the traced code (or a graph break is inside its block)")

    def can_reconstruct(self):
        return False


def inference_mode_context(mode: bool, step: int, where: list) -> GlobalModeContextVariable:
    grad_mode = torch.autograd.grad_mode
    return GlobalModeContextVariable(torch.inference_mode, grad_mode._enter_inference_mode, (mode,),
                                     grad_mode._exit_inference_mode, step, where)


class GlobalModeDecoratedVariable(VariableTracker):
    """A function decorated with such a context (``@torch.inference_mode()``,
    ``@torch.autocast("cpu")``): a call runs it inside a fresh block; rebuilt by decorating
    again."""

    def __init__(self, ctx: GlobalModeContextVariable, fn: VariableTracker):
        super().__init__()
        self.ctx = ctx
        self.fn = fn

    def call_function(self, tx, args, kwargs):
        ctx = self.ctx.fresh(tx)
        ctx.enter(tx)
        result = self.fn.call_function(tx, args, kwargs)
        ctx.exit(tx)
        return result

    def reconstruct(self, cg):
        # ctx_type(*args)(fn): the context made by the first call is the callable of the second
        cg.null_before_callable()
        cg.load_callable(self.ctx.ctx_type)
        for a in self.ctx.args:
            cg.load_const(a)
        cg.call(len(self.ctx.args))
        cg.null_after_callable()
        cg.reconstruct(self.fn)
        cg.call(1)

    def can_reconstruct(self):
        return self.fn.can_reconstruct()


def _is_none(v: Optional[VariableTracker]) -> bool:
    return v is None or (v.is_python_constant() and v.as_python_constant() is None)


class SuppressVariable(ContextManagerVariable):
    """contextlib.suppress(*exception types known at trace time)."""

    def __init__(self, types: tuple):
        super().__init__()
        self.types = types

    def python_type(self):
        import contextlib

        return contextlib.suppress

    def lets_exceptions_through(self):
        return not self.types

    def enter(self, tx):
        return NONE

    def exit(self, tx):
        return FALSE

    def exit_with(self, tx, args):
        value = args[1] if len(args) == 3 else None
        if _is_none(value):
            return FALSE
        return TRUE if issubclass(value.python_type(), self.types) else FALSE

    def reconstruct(self, cg):
        import contextlib

        cg.load_callable(contextlib.suppress)
        for t in self.types:
            cg.load_const(t)
        cg.call(len(self.types))

    def can_reconstruct(self):
        return True


class GeneratorContextVariable(ContextManagerVariable):
    """The context a ``@contextlib.contextmanager`` function returns, over its generator (a
    generator tracker made in the trace: symbolic/inliner.py's, with ``send_item`` and
    ``throw_item``).  It is not rebuilt: one that must outlive the trace makes the trace stop
    where it was created, and Python makes it."""

    def __init__(self, gen: VariableTracker, created_at_step: int, created_where: list):
        super().__init__()
        self.gen = gen
        self.created_at_step = created_at_step
        self.created_where = created_where

    def python_type(self):
        import contextlib

        return contextlib._GeneratorContextManager

    def describe(self):
        return f"contextmanager {self.gen.describe()}"

    def lets_exceptions_through(self):
        return False

    def _python_runs_it(self, why: str) -> GraphBreak:
        brk = GraphBreak(gb.UNSUPPORTED_CONTEXT_MANAGER, f"{self.describe()} {why}; Python runs it")
        brk.restart_step = self.created_at_step
        brk.user_stack = list(self.created_where)
        return brk

    def enter(self, tx):
        item = self.gen.send_item(tx, None)
        if item is None:
            raise self._python_runs_it("did not yield (RuntimeError)")
        return item

    def exit(self, tx):
        return self.exit_with(tx, [NONE, NONE, NONE])

    def exit_with(self, tx, args):
        value = args[1] if len(args) == 3 else None
        if _is_none(value):
            if self.gen.send_item(tx, None) is not None:
                raise self._python_runs_it("yielded twice (RuntimeError)")
            return FALSE
        if issubclass(value.python_type(), StopIteration):
            raise self._python_runs_it("is left by a StopIteration")
        outcome, result = self.gen.throw_item(tx, value)
        if outcome == "yield":
            raise self._python_runs_it("yielded again after an exception (RuntimeError)")
        if outcome == "return":
            return TRUE  # the generator swallowed it: the with-block's exception is suppressed
        if result is value:
            return FALSE  # re-raised (or not caught): the with statement raises it
        raise self._python_runs_it("raised another exception on leaving")

    def reconstruct(self, cg):
        raise self._python_runs_it("outlives the traced code")

    def can_reconstruct(self):
        return False


class ContextManagerFunctionVariable(VariableTracker):
    """``contextlib.contextmanager(fn)`` applied in the trace: calling it calls ``fn`` (a
    generator function, inlined lazily) and wraps the generator."""

    def __init__(self, fn: VariableTracker):
        super().__init__()
        self.fn = fn

    def call_function(self, tx, args, kwargs):
        return make_generator_context(tx, self.fn, args, kwargs)

    def reconstruct(self, cg):
        import contextlib

        cg.load_callable(contextlib.contextmanager)
        cg.reconstruct(self.fn)
        cg.call(1)

    def can_reconstruct(self):
        return self.fn.can_reconstruct()


def make_generator_context(tx, fn: VariableTracker, args: list, kwargs: dict) -> VariableTracker:
    """``contextmanager(fn)(*args, **kwargs)``: the generator of ``fn`` wrapped as a context."""
    step, where = tx.root().steps, tx.user_stack()
    gen = fn.call_function(tx, args, kwargs)
    if not hasattr(gen, "throw_item"):
        raise GraphBreak(gb.UNSUPPORTED_CONTEXT_MANAGER, f"contextmanager of {fn.describe()}, which did not make a "
                         "generator in the trace")
    return GeneratorContextVariable(gen, step, where)


__all__ = ["GlobalModeContextVariable", "GlobalModeDecoratedVariable", "inference_mode_context", "SuppressVariable", "GeneratorContextVariable", "ContextManagerFunctionVariable",
           "make_generator_context", "ContextManagerVariable", "NullContextVariable", "GradModeVariable", "GradModeExitVariable", "GradModeDecoratedVariable"]
