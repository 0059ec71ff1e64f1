"""Inlining: running a called user function's bytecode inside the caller's trace.

The callee gets its own translator (its own stack, locals and cells) over the
caller's OutputGraph, so its tensor work lands in the same graph and its
side effects in the same log.  A graph break inside the callee propagates to
the root, which breaks at its own call instruction: the callee then runs as a
frame of its own and is captured separately by the hook.
Generator functions (generator expressions included) are run to completion
and their yielded values collected, which is exact for the common consumers
(sum/all/any/tuple/list/for).
Tested by tests/test_functions.py.
"""
from __future__ import annotations

from .. import bytecode_compat, config
from ..exc import GraphBreak
from ..variables.base import VariableTracker
from ..variables.functions import UserFunctionVariable, is_inlinable_function
from ..variables.misc import CellVariable
from .translator import InstructionTranslatorBase


class InliningTranslator(InstructionTranslatorBase):
    """Interprets one call of a user function (or a generator, collecting yields)."""

    def __init__(self, parent, code, f_globals, symbolic_locals, cells, is_generator: bool):
        super().__init__(parent.output, code, f_globals, symbolic_locals, cells, parent)
        self.is_generator = is_generator
        self.generated: list[VariableTracker] = []


def inline_call(parent: InstructionTranslatorBase, fn_var, args: list, kwargs: dict) -> VariableTracker:
    from ..variables.containers import ListIteratorVariable

    if isinstance(fn_var, UserFunctionVariable):
        reason = is_inlinable_function(fn_var.fn)
        if reason is not None:
            raise GraphBreak("DL0021", f"call to {fn_var.fn.__qualname__} is not traced: {reason}")
    code = fn_var.get_code()
    flags = code.co_flags
    is_generator = bool(flags & bytecode_compat.CO_GENERATOR)
    if flags & (bytecode_compat.CO_COROUTINE | bytecode_compat.CO_ASYNC_GENERATOR | bytecode_compat.CO_ITERABLE_COROUTINE):
        raise GraphBreak("DL0021", f"{code.co_name} is a coroutine")
    if parent.depth + 1 > config.max_inline_depth:
        raise GraphBreak("DL0022", f"inlining deeper than config.max_inline_depth={config.max_inline_depth} "
                                   "(recursion?)")
    bound = fn_var.bind_args(parent, args, kwargs)
    cells: dict[str, CellVariable] = {}
    symbolic_locals = {}
    for name, value in bound.items():
        if name in code.co_cellvars:
            cells[name] = CellVariable("local", contents=value, name=name)
        else:
            symbolic_locals[name] = value
    for name in code.co_cellvars:
        cells.setdefault(name, CellVariable("local", name=name))
    closure = fn_var.closure_cells(parent)
    if len(closure) != len(code.co_freevars):
        raise GraphBreak("DL0021", f"closure of {code.co_name} does not match its code")
    for name, cell in zip(code.co_freevars, closure):
        cells[name] = cell
    child = InliningTranslator(parent, code, fn_var.get_globals(), symbolic_locals, cells, is_generator)
    root = parent.root()
    previous = root._active
    root._active = child
    version = parent.output.side_effects.version
    n_nodes = len(parent.output.graph.nodes)
    try:
        child.run()
    except GraphBreak as e:
        if not e.user_stack:
            e.user_stack = child.user_stack()
        raise
    finally:
        root._active = previous
    if is_generator:
        # The generator ran to completion here, ahead of its consumer: exact only
        # if it had no side effects its consumer could observe in between.
        if parent.output.side_effects.version != version or _mutating_nodes(parent.output.graph, n_nodes):
            raise GraphBreak("DL0021", f"generator {code.co_name} has side effects; Python runs it lazily")
        result = ListIteratorVariable(child.generated)
        result.generator = code.co_name
        return result
    return child.return_value


def _mutating_nodes(graph, start: int) -> bool:
    """Did the nodes added after the first ``start`` mutate anything (in-place ops)?"""
    import operator

    for node in list(graph.nodes)[start:]:
        target = node.target
        name = target if isinstance(target, str) else getattr(target, "__name__", "")
        if (name.endswith("_") and not name.endswith("__")) or target is operator.setitem:
            return True
    return False


__all__ = ["inline_call", "InliningTranslator"]
