"""Inlining: running a called user function's bytecode inside the caller's trace.

The callee gets its own translator (its own stack, locals and cells) over the
caller's OutputGraph, so its tensor work lands in the same graph and its
side effects in the same log.  A graph break inside the callee propagates to
the root, which breaks at its own call instruction: the callee then runs as a
frame of its own and is captured separately by the hook.
Calling a generator function (a generator expression included) makes a
GeneratorObjectVariable and runs nothing, as Python does: each item asked for
(FOR_ITER, next(), list(...)) resumes the callee's translator until its next
YIELD_VALUE, so the generator reads the world when it runs, and infinite
generators are fine.  A graph break inside a resumed generator, or a
generator object that must outlive the trace (returned, live at a break),
restarts the trace so that it stops where the generator was created: Python
then makes and runs the real generator.
Tested by tests/semantics/test_functions.py and tests/semantics/test_generators.py.
"""
from __future__ import annotations

import builtins
import types
from typing import Optional

from .. import graph_breaks as gb
from .. import bytecode_compat, config
from ..exc import GraphBreak
from ..variables.base import VariableTracker
from ..variables.constant import ConstantVariable, NONE
from ..variables.sequences import LazyIteratorVariable
from ..variables.functions import UserFunctionVariable, is_inlinable_function
from ..variables.cells import CellVariable
from ..variables.exceptions import ExceptionVariable
from ..variables.methods import BoundMethodOfVariable
from .translator import InstructionTranslatorBase, SymbolicException


class InliningTranslator(InstructionTranslatorBase):
    """Interprets one call of a user function (or a generator, collecting yields)."""

    def __init__(self, parent, code, f_globals, symbolic_locals, cells, is_generator: bool):
        super().__init__(parent.output, code, f_globals, symbolic_locals, cells, parent)
        self.is_generator = is_generator
        self.suspended = False  # a generator stopped at YIELD_VALUE
        self.yielded: Optional[VariableTracker] = None

    def suspend(self, value: VariableTracker) -> None:
        self.yielded = value
        self.suspended = True

    def run(self) -> None:
        self.suspended = False
        while not self.done and not self.suspended:
            self.count_step()
            self.step()


class GeneratorObjectVariable(LazyIteratorVariable):
    """A generator object made in the trace: its frame (an InliningTranslator) runs
    on demand, one item per ``next_item``.

    created_at_step: the root step that created it; a break inside it, or a need
    to rebuild it as a real object, restarts the trace to stop there.
    """

    def __init__(self, child: InliningTranslator, created_at_step: int, created_where: list):
        super().__init__(types.GeneratorType)
        self.child = child
        self.created_where = created_where  # user stack of the call that made it
        child.output.generators.append(self)
        self.generator = child.code.co_name  # (ListIteratorVariable: send/throw/close/gi_* run eagerly)
        self.created_at_step = created_at_step
        self.started = False
        self.running = False  # its code is being run (a next() from inside it is a ValueError)

    def describe(self):
        return f"generator {self.generator}()"

    def next_item(self, tx) -> Optional[VariableTracker]:
        return self.send_item(tx, None)

    def send_item(self, tx, sent: Optional[VariableTracker]) -> Optional[VariableTracker]:
        """Resume the generator with ``sent`` (None: next()) as the value of its paused
        ``yield``; its next yielded item, or None when it returned (``returned()``)."""
        child = self.child
        self._check_not_running(tx)
        if self.exhausted or child.done:
            self.exhausted = True
            return None
        if self.started:
            child.push(NONE if sent is None else sent)  # the value of the paused `yield` expression
        elif sent is not None:
            raise self._python_runs_it("is sent a value before it started (TypeError)")
        self.started = True
        return self._resume(tx, None)

    def throw_item(self, tx, exc: VariableTracker):
        """``gen.throw(exc)`` at its paused ``yield`` (for a contextmanager's __exit__):
        ("yield", item), ("return", None), or ("raise", exception tracker) when it raised."""
        child = self.child
        self._check_not_running(tx)
        if not self.started or self.exhausted or child.done or child.ip == 0:
            raise self._python_runs_it("is thrown an exception while not paused at a yield")
        if self._paused_in_yield_from():  # Python throws it into the sub-iterator first
            raise self._python_runs_it("is thrown an exception while delegating with yield from")
        try:
            item = self._resume(tx, exc)
        except SymbolicException as e:
            return "raise", e.exc
        return ("return", None) if item is None else ("yield", item)

    def _check_not_running(self, tx) -> None:
        """Resumed from its own code (``next(g)`` inside g): Python raises ValueError there."""
        if self.running:
            tx.raise_builtin_exception(ValueError, [ConstantVariable("generator already executing")])

    def _resume(self, tx, throw: Optional[VariableTracker]) -> Optional[VariableTracker]:
        child = self.child
        root = tx.root()
        previous = root._active
        root._active = child
        child.parent = tx  # exceptions leaving the generator go to its consumer
        self.running = True
        try:
            if throw is not None:
                step = getattr(throw, "raised_at_step", None)
                child.unwind(SymbolicException(throw, root.steps if step is None else step),
                             child.instructions[child.ip - 1])
            child.run()
        except GraphBreak as e:
            if not e.user_stack:
                e.user_stack = child.user_stack()
            prior = e.restart_step
            e.restart_step = self.created_at_step if prior is None else min(prior, self.created_at_step)
            raise
        except SymbolicException as e:
            self.exhausted = True  # a generator that raised is finished
            exc_type = e.exc.python_type() if isinstance(e.exc, VariableTracker) else None
            if isinstance(exc_type, type) and issubclass(exc_type, StopIteration):
                # PEP 479: Python turns it into a RuntimeError (chained); let Python do it
                raise self._python_runs_it("raises StopIteration (a RuntimeError in Python)") from None
            raise
        except BaseException:
            self.exhausted = True
            raise
        finally:
            root._active = previous
            self.running = False
        if child.done:
            self.exhausted = True
            return None
        return child.yielded

    def returned(self) -> VariableTracker:
        """What the generator returned (the value of ``yield from`` it; StopIteration.value)."""
        return self.child.return_value if self.child.done and self.child.return_value is not None else NONE

    def stop_iteration_args(self) -> list[VariableTracker]:
        ret = self.returned()
        return [] if ret.is_python_constant() and ret.as_python_constant() is None else [ret]

    def _python_runs_it(self, why: str) -> GraphBreak:
        brk = GraphBreak(gb.CALL_NOT_TRACED, f"generator {self.generator}() {why}")
        brk.restart_step = self.created_at_step
        brk.user_stack = list(self.created_where)
        return brk

    def _paused_in_yield_from(self) -> bool:
        child = self.child
        if not self.started or self.exhausted or child.done or child.ip >= len(child.instructions):
            return False
        nxt = child.instructions[child.ip]
        return nxt.opname == "RESUME" and bytecode_compat.resume_kind(nxt) == bytecode_compat.RESUME_AFTER_YIELD_FROM

    def _paused_in_try(self) -> bool:
        """Is it paused where closing it (GeneratorExit thrown at its ``yield``) runs code: inside
        a try block whose handler is more than ``except <exception class>:`` clauses that
        GeneratorExit passes (a finally, a with block, ``except BaseException``...)?"""
        child = self.child
        if not self.started or self.exhausted or child.done or child.ip == 0:
            return False
        offset = child.instructions[child.ip - 1].offset
        return any(start <= offset < end and not self._lets_generator_exit_through(target)
                   for start, end, target, *_ in child.exception_entries())

    def _lets_generator_exit_through(self, target: int, depth: int = 0) -> bool:
        """Does GeneratorExit, raised into the handler at ``target``, leave the generator with no
        code run (``except <other class>:`` clauses, clean-ups), and so does every handler it is
        re-raised into (a try/finally around a try/except runs its finally)?"""
        child = self.child
        insts, i = child.instructions, child.offset_to_index.get(target)
        if i is not None and bytecode_compat.is_pass_through_handler(insts, i):
            return True  # (3.12) a generator's own catch-all, an inlined comprehension's clean-up
        if i is not None and i + 2 < len(insts) and \
                [inst.opname for inst in insts[i:i + 3]] == ["COPY", "POP_EXCEPT", "RERAISE"]:
            # the cleanup of an except clause being run: it restores the handled exception
            return self._reraised_through(i + 2, depth)
        if i is None or insts[i].opname != "PUSH_EXC_INFO":
            return False
        i += 1
        while i + 2 < len(insts):
            load, match, jump = insts[i], insts[i + 1], insts[i + 2]
            if load.opname == "RERAISE":
                return self._reraised_through(i, depth)
            if load.opname != "LOAD_GLOBAL" or match.opname != "CHECK_EXC_MATCH" or \
                    not jump.opname.startswith("POP_JUMP") or "IF_FALSE" not in jump.opname:
                return False
            name = load.argval
            cls = child.f_globals[name] if name in child.f_globals else getattr(builtins, name, None)
            if not (isinstance(cls, type) and issubclass(cls, BaseException)) or issubclass(GeneratorExit, cls):
                return False
            i = child.offset_to_index.get(jump.argval, len(insts))
        return False

    def _reraised_through(self, index: int, depth: int) -> bool:
        """Does the exception re-raised by the instruction at ``index`` leave the generator with
        no code run?  It goes to the handler of the exception-table entry covering it, if any."""
        if depth > 16:
            return False
        offset = self.child.instructions[index].offset
        return all(self._lets_generator_exit_through(target, depth + 1)
                   for start, end, target, *_ in self.child.exception_entries() if start <= offset < end)

    def call_method(self, tx, name, args, kwargs):
        if name == "send" and len(args) == 1 and not kwargs:
            sent = args[0]
            none = sent.is_python_constant() and sent.as_python_constant() is None
            item = self.send_item(tx, None if none else sent)
            if item is None:
                tx.raise_builtin_exception(StopIteration, self.stop_iteration_args())
            return item
        if name == "close" and not args and not kwargs:
            if self._paused_in_try() or self._paused_in_yield_from():
                # GeneratorExit would run its except/finally/with exits, or close its sub-iterator
                raise self._python_runs_it("is closed while paused in a try/with block or a yield from")
            self.exhausted = True
            self.child.done = True
            return NONE
        if name == "throw" and len(args) == 1 and not kwargs:
            exc = _exception_to_throw(tx, args[0])
            if exc is None:
                raise self._python_runs_it("is thrown a value the trace does not model")
            outcome, result = self.throw_item(tx, exc)
            if outcome == "yield":
                return result
            if outcome == "return":
                ret = self.returned()
                none_ret = ret.is_python_constant() and ret.as_python_constant() is None
                tx.raise_builtin_exception(StopIteration, [] if none_ret else [ret])
            tx.raise_exception(result, reraise=True)
        if name in ("send", "throw", "close") or name.startswith("gi_"):
            raise self._python_runs_it(f"used through .{name}")
        return super().call_method(tx, name, args, kwargs)

    def var_getattr(self, tx, name):
        if name in ("send", "close", "throw"):
            return BoundMethodOfVariable(self, name)
        if name.startswith("gi_"):
            # only the real generator has them: Python makes it (and runs what follows)
            raise self._python_runs_it(f"used through .{name}")
        return super().var_getattr(tx, name)

    def can_reconstruct(self):
        return False

    def reconstruct(self, cg):
        raise self.escape("outlives the traced code")

    def escape(self, why: str) -> "GeneratorEscapes":
        escape = GeneratorEscapes(self.created_at_step, f"generator {self.generator}() {why}; Python makes it")
        escape.user_stack = list(self.created_where)
        return escape


def _exception_to_throw(tx, value: VariableTracker) -> Optional[VariableTracker]:
    """The exception tracker ``gen.throw(value)`` raises in the generator: an exception made in
    the trace, or a new instance of an exception class (None: not modelled)."""
    if isinstance(value, ExceptionVariable):
        return value
    if value.is_python_constant():
        cls = value.as_python_constant()
        if isinstance(cls, type) and issubclass(cls, Exception):
            try:
                return ExceptionVariable.create(tx, cls, [], {})
            except GraphBreak:
                return None
    return None


def unclosed_generator(output) -> Optional[GeneratorObjectVariable]:
    """A generator of this trace paused inside a try/with block: when Python drops it, closing
    it runs user code (finally, __exit__, except GeneratorExit) that the trace never ran."""
    for gen in output.generators:
        if gen._paused_in_try():
            return gen
    return None


class GeneratorEscapes(GraphBreak):
    """A generator object made in the trace must exist for real (returned, stored, live at a
    break): the trace restarts to stop where it was created (convert_frame)."""

    def __init__(self, step: int, reason: str):
        super().__init__(gb.CALL_NOT_TRACED, reason)
        self.restart_step = step


def inline_call(parent: InstructionTranslatorBase, fn_var, args: list, kwargs: dict) -> VariableTracker:
    if isinstance(fn_var, UserFunctionVariable):
        reason = is_inlinable_function(fn_var.fn)
        if reason is not None:
            raise GraphBreak(gb.CALL_NOT_TRACED, f"call to {fn_var.fn.__qualname__} is not traced: {reason}")
    code = fn_var.get_code()
    flags = code.co_flags
    is_generator = bool(flags & bytecode_compat.CO_GENERATOR)
    if flags & (bytecode_compat.CO_COROUTINE | bytecode_compat.CO_ASYNC_GENERATOR | bytecode_compat.CO_ITERABLE_COROUTINE):
        raise GraphBreak(gb.CALL_NOT_TRACED, f"{code.co_name} is a coroutine")
    if parent.depth + 1 > config.max_inline_depth:
        raise GraphBreak(gb.INLINING_TOO_DEEP, f"inlining deeper than config.max_inline_depth={config.max_inline_depth} "
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
        raise GraphBreak(gb.CALL_NOT_TRACED, f"closure of {code.co_name} does not match its code")
    for name, cell in zip(code.co_freevars, closure):
        cells[name] = cell
    child = InliningTranslator(parent, code, fn_var.get_globals(), symbolic_locals, cells, is_generator)
    if is_generator:
        # runs when its items are asked for
        return GeneratorObjectVariable(child, parent.root().steps, parent.user_stack())
    root = parent.root()
    previous = root._active
    root._active = child
    try:
        child.run()
    except GraphBreak as e:
        if not e.user_stack:
            e.user_stack = child.user_stack()
        raise
    finally:
        root._active = previous
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


__all__ = ["inline_call", "InliningTranslator", "GeneratorObjectVariable"]
