"""The symbolic interpreter: runs a frame's bytecode over VariableTrackers.

``InstructionTranslatorBase`` holds the state of one frame being interpreted
(value stack, locals, closure cells, instruction pointer) and the step loop;
each instruction is handled by the function registered for its opname in
``symbolic/opcodes``.  ``InstructionTranslator`` is the frame being compiled:
its locals come from the real arguments, and it can stop *before* a given
step so that a graph break compiles exactly the work done up to there.
``InliningTranslator`` (inliner.py) runs a called user function over the same
OutputGraph.

Graph breaks restart: the first trace runs until a ``GraphBreak`` escapes;
convert_frame then traces again with ``stop_at_step`` set to the root step at
which it happened, so the state at the stop is exactly "before that
instruction" even when the break came from deep inside an inlined call.
Tested by tests/semantics/test_branches_and_loops.py and tests/breaks/test_graph_breaks.py.
"""
from __future__ import annotations

import builtins
import linecache
import types
from typing import Callable, Optional

from .. import graph_breaks as gb
from .. import bytecode_compat, config
from ..exc import GraphBreak, InternalError, SkipFrame, UserFrame
from ..source import STACK_PREFIX, AttrSource, ClosureSource, GlobalSource, LocalSource, ModuleGlobalSource
from ..variables.base import UnreadArgumentVariable, VariableTracker
from ..variables.constant import ConstantVariable
from ..variables.cells import CellVariable
from ..variables.exceptions import chain_to_handled, ExceptionVariable
from ..variables.sequences import ListIteratorVariable
from .opcodes import HANDLERS
from ..variables.builder import wrap, wrap_builtin_name


class _StopTracing(Exception):
    """Raised inside the loop when the root reaches its stop step."""


class SymbolicException(Exception):
    """A user exception raised by traced code (``raise`` of a modelled exception).

    It unwinds the symbolic frames like CPython unwinds real ones: each frame
    looks for a handler in its exception table; a frame without one passes it
    to its caller.  If it leaves the root frame, the graph breaks at the root
    step that raised, so Python raises it for real.

    Attributes:
        exc: the tracker of the exception object (an ExceptionVariable).
        root_step: the root frame's step during which it was raised.
    """

    def __init__(self, exc, root_step: int):
        super().__init__(exc)
        self.exc = exc
        self.root_step = root_step


def _context_steps(exc) -> list:
    """Root steps at which the exceptions of ``exc``'s traced ``__context__`` chain were raised."""
    steps = []
    context, seen = getattr(exc, "context", None), {id(exc)}
    while context is not None and id(context) not in seen and getattr(context, "raised_at_step", None) is not None:
        seen.add(id(context))
        steps.append(context.raised_at_step)
        context = getattr(context, "context", None)
    return steps


class InstructionTranslatorBase:
    """State and step loop shared by the root frame and inlined frames.

    Attributes:
        output: the OutputGraph shared by the whole trace.
        code: the code object being interpreted.
        instructions: real instructions (no CACHE/EXTENDED_ARG), in order.
        offset_to_index: instruction offset -> index into ``instructions``.
        ip: index of the next instruction.
        current_inst: the instruction being executed.
        stack: the value stack (NullVariable stands for 3.11's NULL).
        symbolic_locals: fast locals by name (unbound names are absent).
        cells: CellVariable per cell and free variable name.
        kw_names: the keyword names set for the next CALL (bytecode_compat.OP_KW_NAMES).
        parent: the translator of the calling frame (None for the root).
    """

    def __init__(self, output, code: types.CodeType, f_globals: dict, symbolic_locals: dict,
                 cells: dict, parent: Optional["InstructionTranslatorBase"]):
        self.output = output
        self.code = code
        self.f_globals = f_globals
        self.instructions = bytecode_compat.instructions(code)
        self.offset_to_index = {inst.offset: i for i, inst in enumerate(self.instructions)}
        self.ip = 0
        self.current_inst: Optional[bytecode_compat.Instruction] = None
        self.stack: list[VariableTracker] = []
        self.symbolic_locals = symbolic_locals
        self.cells = cells
        self.kw_names: Optional[tuple] = None
        self.parent = parent
        self.lineno = code.co_firstlineno
        self.done = False
        self.return_value: Optional[VariableTracker] = None
        self.depth = 0 if parent is None else parent.depth + 1
        self._exception_entries: Optional[list] = None
        # exceptions whose handlers are running (PUSH_EXC_INFO pushes, POP_EXCEPT
        # pops); each carries .raised_at_step, the root step that raised it
        self.handling: list = []

    # ---- stack ------------------------------------------------------------
    def push(self, v: VariableTracker) -> None:
        if not isinstance(v, VariableTracker):
            raise InternalError(f"a handler pushed {type(v).__name__} {v!r}, not a tracker")
        self.stack.append(v)

    def pop(self) -> VariableTracker:
        if not self.stack:
            raise InternalError("stack underflow: a handler popped more than the bytecode pushed")
        return self.stack.pop()

    def popn(self, n: int) -> list[VariableTracker]:
        if n == 0:
            return []
        items = self.stack[-n:]
        del self.stack[-n:]
        return items

    def peek(self, depth: int = 1) -> VariableTracker:
        return self.stack[-depth]

    # ---- control ----------------------------------------------------------
    def jump_to(self, offset: int) -> None:
        self.ip = self.offset_to_index[offset]

    def step(self) -> None:
        inst = self.instructions[self.ip]
        self.current_inst = inst
        # the instruction's own line, as a traceback shows it (a FOR_ITER reached by the loop's
        # back-edge is on the `for` line, though no line starts there); artificial ones have none
        line = inst.positions.lineno if inst.positions is not None else None
        starts = bytecode_compat.starts_line(inst)
        if line or starts:
            self.lineno = line or starts
        self.ip += 1
        handler = HANDLERS.get(inst.opname)
        if handler is None:
            raise GraphBreak(gb.UNSUPPORTED_BYTECODE, f"opcode {inst.opname} is not supported")
        try:
            handler(self, inst)
        except SymbolicException as e:
            self.unwind(e, inst)
        except GraphBreak as e:
            # A break inside a handler entered during the trace cannot resume
            # there (the real frame never raised): break where it was raised.
            handling = self.handling_step()
            if handling is not None:
                prior = e.restart_step
                e.restart_step = handling if prior is None else min(prior, handling)
            raise

    # ---- exceptions raised by traced code ----------------------------------
    def raise_exception(self, exc, reraise: bool = False) -> None:
        step = getattr(exc, "raised_at_step", None) if reraise else None
        if step is None:
            step = self.root().steps
            exc.raised_at_step = step
        raise SymbolicException(exc, step)

    def unwind(self, e: SymbolicException, inst) -> None:
        """Jump to this frame's handler for ``e`` (CPython's exception table), or re-raise."""
        for start, end, target, depth, lasti in self.exception_entries():
            if start <= inst.offset < end:
                del self.stack[depth:]
                if lasti:
                    self.push(ConstantVariable(inst.offset))
                self.push(e.exc)
                self.jump_to(target)
                return
        raise e

    def exception_entries(self) -> list:
        if self._exception_entries is None:
            self._exception_entries = bytecode_compat.exception_table(self.code)
        return self._exception_entries

    def handling_step(self):
        """Root step at which the exception being handled (in any traced frame) was raised."""
        steps = []
        tx = self
        while tx is not None:
            for exc in tx.handling:
                steps.append(getattr(exc, "raised_at_step", tx.root().steps))
                # raised while handling an earlier traced exception (its __context__): Python must
                # run that handler too, or the native raise would have no context to chain
                steps.extend(_context_steps(exc))
            tx = tx.parent
        return min(steps) if steps else None

    def run(self) -> None:
        while not self.done:
            self.count_step()
            self.step()

    def count_step(self) -> None:
        root = self.root()
        root.total_steps += 1
        if root.total_steps > config.max_traced_instructions:
            raise SkipFrame(
                gb.TRACE_TOO_LONG, f"trace exceeded config.max_traced_instructions={config.max_traced_instructions} "
                "(a very long unrolled loop?)")

    def root(self) -> "InstructionTranslator":
        tx = self
        while tx.parent is not None:
            tx = tx.parent
        return tx

    # ---- loops that can run natively ---------------------------------------
    # (code, instruction index) -> True when a graph break at the for loop's FOR_ITER at that
    # index lets the loop go on natively with its body compiled as a loop-body function
    # (codegen/loop_bodies.find_loop).  codegen and symbolic never import each other:
    # convert_frame installs it; until then no loop qualifies.
    loop_body_at: Callable[[types.CodeType, int], bool] = staticmethod(lambda code, index: False)

    def at_loop_that_runs_natively(self) -> bool:
        """Is the current instruction a for loop's FOR_ITER, in the frame being compiled (not an
        inlined call, whose break would end the caller's graph at the call), that a graph break
        would turn into a native loop calling its body as a function?  (A loop over range() of a
        symbolic int breaks there rather than unroll for one value: variables/tensor.py,
        SymRangeIteratorVariable.)"""
        inst = self.current_inst
        return self.parent is None and inst is not None and inst.opname == "FOR_ITER" and \
            InstructionTranslatorBase.loop_body_at(self.code, self.offset_to_index[inst.offset])

    # ---- where are we -----------------------------------------------------
    def frame_summary(self) -> UserFrame:
        line = linecache.getline(self.code.co_filename, self.lineno).strip() if self.lineno else ""
        name = self.code.co_name
        return UserFrame(self.code.co_filename, self.lineno, name, line)

    def user_stack(self) -> list[UserFrame]:
        frames = []
        tx = self
        while tx is not None:
            frames.append(tx.frame_summary())
            tx = tx.parent
        return list(reversed(frames))

    # ---- names ------------------------------------------------------------
    def load_global(self, name: str) -> VariableTracker:
        pending = self.output.side_effects.load_global(name) if self.f_globals is self.output.f_globals else None
        if pending is not None:
            return pending
        if self.output.written_in_trace(self.f_globals):
            # the module's dict itself was written in the trace (globals()[name] = v, update()):
            # Python reads the name after those writes
            raise GraphBreak(gb.SIDE_EFFECT, f"reading global {name!r} after writing the module's globals() dict")
        if name in self.f_globals:
            return wrap(self, self.f_globals[name], self.global_source(name))
        builtins_dict = self.f_globals.get("__builtins__", builtins)
        if isinstance(builtins_dict, types.ModuleType):
            builtins_dict = builtins_dict.__dict__
        if name in builtins_dict:
            if builtins_dict is builtins.__dict__:
                if self.f_globals is self.output.f_globals:
                    return wrap_builtin_name(self, name)
                return wrap(self, builtins_dict[name], None)
            raise GraphBreak(gb.NONSTANDARD_BUILTINS, "frame uses a non-standard __builtins__")
        raise GraphBreak(gb.UNBOUND_NAME, f"name {name!r} is not defined (NameError)")

    def global_source(self, name: str):
        import sys

        if self.f_globals is self.output.f_globals:
            return GlobalSource(name)
        module = self.f_globals.get("__name__")
        mod = sys.modules.get(module) if isinstance(module, str) else None
        if mod is not None and getattr(mod, "__dict__", None) is self.f_globals:
            return ModuleGlobalSource(module, name)
        return None

    def store_global(self, name: str, value: VariableTracker) -> None:
        if self.f_globals is not self.output.f_globals:
            raise GraphBreak(gb.SIDE_EFFECT, "assigning a global of another module")
        self.output.side_effects.store_global(name, value)

    def cell_load(self, name: str) -> VariableTracker:
        cell = self.cells[name]
        if cell.contents is None:
            if cell.kind == "root" and cell.source is not None:
                real = cell.real_cell
                try:
                    value = real.cell_contents
                except ValueError as e:
                    raise GraphBreak(gb.UNBOUND_NAME, f"free variable {name!r} referenced before assignment") from e
                cell.contents = wrap(self, value, cell.source)
            elif cell.kind == "real":
                try:
                    value = cell.real_cell.cell_contents
                except ValueError as e:
                    raise GraphBreak(gb.UNBOUND_NAME, f"free variable {name!r} referenced before assignment") from e
                cell.contents = wrap(self, value, AttrSource(cell.source, "cell_contents") if cell.source else None)
            else:
                raise GraphBreak(gb.UNBOUND_NAME, f"local variable {name!r} referenced before assignment")
        return cell.contents

    def cell_store(self, name: str, value: VariableTracker) -> None:
        cell = self.cells[name]
        cell.contents = value
        self.output.side_effects.version += 1
        if cell.kind == "real" or (cell.kind == "root" and cell.source is not None):
            if cell.kind == "real" and cell.source is None:
                raise GraphBreak(gb.SIDE_EFFECT, "assigning a closure variable of a function without a source")
            self.output.side_effects.store_cell(cell, value)

    def read_argument(self, name: str) -> None:
        """Before the code reads or rebinds the local ``name`` (the root frame wraps its arguments
        on first use; an inlined frame's are trackers already)."""

    def read_all_arguments(self) -> None:
        """Before something reads every local (``locals()``)."""

    def zero_arg_super(self):
        code = self.code
        if "__class__" not in self.cells or not code.co_argcount:
            raise GraphBreak(gb.UNSUPPORTED_CALL, "super() without arguments outside a method")
        cls = self.cell_load("__class__").as_python_constant()
        first = code.co_varnames[0]
        self.read_argument(first)
        obj = self.cells[first].contents if first in self.cells else self.symbolic_locals.get(first)
        if obj is None:
            raise GraphBreak(gb.UNSUPPORTED_CALL, "super(): first argument is unbound")
        return cls, obj

    # ---- services for trackers (variables/ never imports this package) -----
    def wrap(self, value, source) -> VariableTracker:
        """The tracker for a real ``value`` read at ``source`` (variables/builder.py's ``wrap``)."""
        return wrap(self, value, source)

    def call_until_stop_iteration(self, call) -> Optional[VariableTracker]:
        """``call()`` (an inlined ``__next__``), or None when it raised StopIteration in the
        trace (the iterator protocol's end: FOR_ITER, next(), list(...) take it as exhausted)."""
        return self.call_unless_raises(call, StopIteration)

    def call_unless_raises(self, call, exc_type: type) -> Optional[VariableTracker]:
        """``call()``, or None when it raised ``exc_type`` (or a subclass) in the trace and a C
        caller in Python would clear it (getattr() in a class pattern: AttributeError is "no match")."""
        try:
            return call()
        except SymbolicException as e:
            raised = e.exc.python_type() if isinstance(e.exc, VariableTracker) else None
            if isinstance(raised, type) and issubclass(raised, exc_type):
                return None
            raise

    def raise_builtin_exception(self, exc_type: type, args: list) -> None:
        """Raise ``exc_type(*args)`` in the trace, as a builtin would (handled by the traced
        code's own except clauses, or raised by Python if it leaves the frame)."""
        exc = ExceptionVariable.create(self, exc_type, list(args), {})
        chain_to_handled(self, exc)
        self.raise_exception(exc)

    # ---- calls ------------------------------------------------------------
    def inline_user_function(self, fn_var, args: list, kwargs: dict) -> VariableTracker:
        from .inliner import inline_call  # lazy: inliner.py subclasses this translator (cycle)

        return inline_call(self, fn_var, args, kwargs)


class InstructionTranslator(InstructionTranslatorBase):
    """The root frame: the one whose code is being compiled.

    Attributes:
        func: the real function object of the frame (for closures and guards).
        stop_at_step: stop before the root step with this number (graph break).
        steps: root instructions executed so far; total_steps counts inlined ones too.
        step_ips: the instruction index each root step ran; iteration_locals: the bound locals
            at each step that began a loop iteration (frame_code.iteration_start).
        stopped: True when tracing stopped for a graph break.
    """

    def __init__(self, output, code, func, f_locals: dict, stop_at_step: Optional[int] = None):
        cells: dict[str, CellVariable] = {}
        super().__init__(output, code, func.__globals__, {}, cells, None)
        self.func = func
        self.f_locals = f_locals  # the frame's arguments (a repeated block's template checks guards on them)
        self.stop_at_step = stop_at_step
        self.steps = 0
        self.total_steps = 0
        self.stopped = False
        self.break_step: Optional[int] = None
        # the instruction (index) each root step ran: where a loop's iteration around a break began;
        # and at each step that began an iteration (a backward jump's target), the bound locals
        # (name -> id of the tracker; None for a constant): what the iteration started from, and
        # how many iterations were left (a for loop over known items; else None)
        self.step_ips: list[int] = []
        self.iteration_locals: dict[int, tuple] = {}
        self._loop_heads = {self.offset_to_index[i.argval] for i in self.instructions
                            if i.opname in bytecode_compat.BACKWARD_JUMPS and i.argval in self.offset_to_index}
        # 3.12's inlined comprehensions (PEP 709): FOR_ITER index -> END_FOR index, and the ones
        # being run as (FOR_ITER index, END_FOR index, root step of their first FOR_ITER).  A
        # break inside one stops before it: Python runs the whole comprehension, and the frame
        # resumes after it (codegen/resume.py), as it does after a 3.11 comprehension's call.
        self._comprehensions = bytecode_compat.inlined_comprehension_loops(code)
        self._open_comprehensions: list[tuple] = []
        output.user_stack_fn = self._current_user_stack
        self._active = self
        # arguments are wrapped when the code first reads them (read_argument): one the trace
        # never reads (the frame breaks first, or passes it on untouched) is not guarded
        self.unread_arguments: dict[str, object] = {}
        for name in bytecode_compat.arg_names(code):
            if name in f_locals:
                if name in code.co_cellvars:
                    var = wrap(self, f_locals[name], LocalSource(name))
                    cells[name] = CellVariable("root", contents=var, name=name)
                elif name.startswith(STACK_PREFIX):
                    # a resume function's saved stack: its prologue reads it at once (and the
                    # generated code assumes no break inside that prologue)
                    self.symbolic_locals[name] = wrap(self, f_locals[name], LocalSource(name))
                else:
                    self.unread_arguments[name] = f_locals[name]
        for name in code.co_cellvars:
            cells.setdefault(name, CellVariable("root", name=name))
        for i, name in enumerate(code.co_freevars):
            cell = func.__closure__[i]
            cells[name] = CellVariable("root", name=name, real_cell=cell, source=ClosureSource(name, i))
            # an inlined function closing over the same cell (fn.__closure__) must share this tracker
            output.cells[id(cell)] = cells[name]

    def _current_user_stack(self):
        return self._active.user_stack()

    def read_argument(self, name: str) -> None:
        """Wrap the argument ``name`` if the trace has not read it yet (its guards start here)."""
        if name in self.unread_arguments:
            # (a break while wrapping it leaves it unread: the generated code keeps it as it is)
            self.symbolic_locals[name] = wrap(self, self.unread_arguments[name], LocalSource(name))
            del self.unread_arguments[name]

    def read_all_arguments(self) -> None:
        for name in list(self.unread_arguments):
            self.read_argument(name)

    def frame_locals(self) -> dict:
        """The bound locals for generated code: trackers, and the arguments never read as they are."""
        out = dict(self.symbolic_locals)
        for name, value in self.unread_arguments.items():
            out[name] = UnreadArgumentVariable(type(value), LocalSource(name))
        return out

    def run(self) -> None:
        try:
            while not self.done:
                if self.stop_at_step is not None and self.steps == self.stop_at_step:
                    self.stopped = True
                    self.current_inst = self.instructions[self.ip]
                    return
                if self._comprehensions:
                    self._track_comprehensions()
                self.step_ips.append(self.ip)
                if self.ip in self._loop_heads:
                    self._record_iteration_locals()
                self.count_step()
                self.step()
                self.steps += 1
        except SymbolicException as e:
            brk = GraphBreak(gb.EXCEPTION_RAISED, f"{e.exc.describe()} raised by traced code leaves the frame "
                                       "(Python raises it)")
            brk.user_stack = self._active.user_stack()
            brk.user_exception = True  # not a capture failure (fullgraph lets Python raise it)
            # raised while handling exceptions raised in the trace: Python raises those first, so the
            # real exception gets its __context__ chain
            # an exception raised earlier in the trace and raised again (``except E as e: err = e``,
            # ``raise err``): Python raises it from its first raise, so its traceback is eager's
            first = getattr(e.exc, "first_raised_at_step", None)
            self.break_step = min([e.root_step, *([first] if first is not None else []), *_context_steps(e.exc),
                                   *self._comprehension_start()])
            raise brk from None
        except GraphBreak as e:
            if not e.user_stack:
                e.user_stack = self._active.user_stack()
            restart = e.restart_step
            self.break_step = min([self.steps if restart is None else restart, *self._comprehension_start()])
            raise

    def _record_iteration_locals(self) -> None:
        bound = {name: None if isinstance(var, ConstantVariable) else id(var)
                 for name, var in self.symbolic_locals.items()}
        for name in self.unread_arguments:
            bound[name] = id(self.unread_arguments[name])
        # iterations left, this one included, where the iterator's items are known; counted one
        # less when they are constants (numbers the body is compiled for by value at first: the
        # second iteration compiles it again, for any value, and only a third one gains), and
        # none when this one is 0 or 1 (always compiled for by value: range(n)'s first item)
        left = None
        if self.instructions[self.ip].opname == "FOR_ITER" and self.stack:
            it = self.stack[-1]
            if type(it) is ListIteratorVariable and not it.exhausted:
                rest = it.items[it.index:]
                constants = all(isinstance(item, ConstantVariable) for item in rest)
                first = rest[0].value if constants and rest else None
                left = 0 if type(first) in (int, float, bool) and first in (0, 1) else len(rest) - constants
        self.iteration_locals[self.steps] = (bound, left)

    def _track_comprehensions(self) -> None:
        """Before each root step: which inlined comprehensions is the frame inside of?"""
        ip = self.ip
        self._open_comprehensions = [c for c in self._open_comprehensions if c[0] <= ip <= c[1]]
        end = self._comprehensions.get(ip)
        if end is not None and not any(c[0] == ip for c in self._open_comprehensions):
            self._open_comprehensions.append((ip, end, self.steps))

    def _comprehension_start(self) -> list:
        """[root step of the first FOR_ITER of the outermost comprehension being run], or []."""
        return [self._open_comprehensions[0][2]] if self._open_comprehensions else []


