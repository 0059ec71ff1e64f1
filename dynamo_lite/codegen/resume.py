"""Resume functions: the rest of a frame after a graph break.

A resume function is a new function whose code is the original bytecode with
a prologue that pushes the saved value stack (NULLs included) and jumps to
``offset``.  It keeps the original's name (tracebacks, logging, frames look
like the user's function); ``display_name`` tells diagnostics which part it is.  Its arguments are the non-NULL stack values and the
frame's live locals (and the dead ones whose freeing runs code: the original frame keeps them
until it overwrites them); cell and free variables are shared through its closure.  The stub
calls it through ``_C.call_moving``: once its frame runs, that frame is the only holder of its
arguments, so objects die where they die in the original frame (tests/semantics/test_object_lifetime.py).
Because it is an ordinary function, the hook captures it like any other frame,
with its own cache and guards.

``plan_successors`` decides what follows the breaking instruction k: one
resume function per successor, or None when the rest of the frame must run
natively or through a loop-body function (k inside a loop: resuming there
would nest one frame per iteration; see loop_bodies.py).  Instructions are
numbered as in liveness.FlowInfo.
Tested by tests/breaks/test_graph_breaks.py and tests/semantics/test_object_lifetime.py.
"""
from __future__ import annotations

import dataclasses
import types
from typing import Optional

from bytecode import Bytecode, CellVar, FreeVar, Instr, Label

from .. import _C, bytecode_compat, runtime
from .. import source as source_mod
from ..cache import derived, register_generated, remember_derived
from .pycodegen import assemble, original_instructions
from .liveness import FlowInfo, live_locals_at
from ..variables.base import NullVariable, runs_code_when_freed

# Arguments of a resume function holding the saved value stack: STACK_PREFIX + slot (defined in
# source.py: the builder relaxes guards on modules found there).
STACK_PREFIX = source_mod.STACK_PREFIX

# Instructions after which the frame continues in a resume function (after any other
# breaking instruction the rest of the frame runs natively).  CALL and the conditional
# jumps are handled too.
_RESUMABLE = frozenset({
    "BINARY_OP", "BINARY_SUBSCR", "COMPARE_OP", "CONTAINS_OP", "IS_OP",
    "UNARY_NEGATIVE", "UNARY_INVERT", "UNARY_NOT", "GET_ITER",
    "BUILD_STRING", "LOAD_ATTR", "STORE_ATTR", "STORE_SUBSCR",
    "DELETE_SUBSCR", "IMPORT_NAME", "IMPORT_FROM", "BUILD_TUPLE", "BUILD_LIST",
    "BUILD_SET", "BUILD_MAP", "BUILD_CONST_KEY_MAP", "BUILD_SLICE", "LIST_APPEND",
    "SET_ADD", "MAP_ADD", "LIST_EXTEND", "SET_UPDATE", "DICT_UPDATE",
    "DICT_MERGE", "CALL", "CALL_FUNCTION_EX", "STORE_GLOBAL",
    "GET_LEN", "LOAD_DEREF", "STORE_DEREF", "LOAD_FAST", "MAKE_FUNCTION",
    "STORE_FAST", "DELETE_FAST", "POP_TOP",
}) | bytecode_compat.RESUMABLE
NO_SUCCESSOR = (*bytecode_compat.RETURNS, "RAISE_VARARGS", "RERAISE")


@dataclasses.dataclass
class Successor:
    index: int  # the instruction where the resume function continues
    is_jump_target: bool  # reached by k's jump (else by falling through)
    nulls: tuple  # per stack slot at the successor: True where the slot holds NULL
    label: Optional[Label] = None  # the stub in the transformed code
    after: Optional[int] = None  # the jump to the stub goes after this instruction (None: after k)
    # locals the instructions from k to ``after`` may assign (a walrus in a comprehension) that
    # the rest of the frame reads: unbound ones are handed over as runtime.UNBOUND
    assigned: tuple = ()


def in_loop(flow: FlowInfo, k: int) -> bool:
    return any(flow.is_backward_jump(j) and flow.target[j] <= k for j in range(k, len(flow)))


def plan_successors(flow: FlowInfo, k: int, stack: list) -> Optional[list]:
    k = bytecode_compat.fused_truth_test([x.name for x in flow.instrs], k)
    inst = flow.instrs[k]
    name = inst.name
    if name in NO_SUCCESSOR:
        return []
    before = tuple(isinstance(v, NullVariable) for v in stack)
    if k in flow.comprehensions:
        return _after_comprehension(flow, k, flow.comprehensions[k], before)
    if in_loop(flow, k) or k + 1 >= len(flow):
        return None
    nxt = k + 1
    if name in bytecode_compat.CONDITIONAL_JUMPS:
        pops_always = bytecode_compat.CONDITIONAL_JUMPS[name][0]
        below = before[:-1]
        jump_stack = below if pops_always else before
        return [Successor(flow.target[k], True, jump_stack), Successor(nxt, False, below)]
    if name not in _RESUMABLE:
        return None
    after = bytecode_compat.nulls_after(inst, before)
    if after is None:
        return None
    return [Successor(nxt, False, after)]


def _after_comprehension(flow: FlowInfo, k: int, end: int, before: tuple) -> Optional[list]:
    """A break at the first FOR_ITER of an inlined comprehension (3.12; the trace stops there
    when it breaks anywhere inside it): Python runs the comprehension, and the frame resumes
    after its END_FOR with the stack below the iterator and the result.  A local the
    comprehension assigns (a walrus) and the rest reads is handed over as it is then: bound
    or not (the comprehension may never assign it)."""
    if end + 1 >= len(flow) or any(flow.is_backward_jump(j) and flow.target[j] < k for j in range(k, len(flow))):
        return None
    body = flow.instrs[k:end + 1]
    if any(x.name == "DELETE_FAST" for x in body):
        return None
    assigned = {n for x in body for n in bytecode_compat.local_writes(x)}
    return [Successor(end + 1, False, before[:-1], after=end,
                      assigned=tuple(sorted(assigned & flow.live_in[end + 1])))]


def live_local_names(state, index: int) -> tuple:
    code = state.code
    live = live_locals_at(code, index)
    names = tuple(n for n in state.frame_locals if n in live and n not in code.co_cellvars)
    # zero-argument super() reads local slot 0: keep the first argument first (and alive)
    first = code.co_varnames[0] if code.co_varnames and "__class__" in code.co_freevars and (
        code.co_argcount or code.co_flags & bytecode_compat.CO_VARARGS) else None
    if first is not None and first in state.frame_locals and first not in code.co_cellvars:
        names = (first,) + tuple(n for n in names if n != first)
    return names


def emit_resume_call(cg, code, succ: Successor, state) -> None:
    """Stub body: save the stack, call the resume function, return its result.

    The frame ends here, so it keeps nothing it hands over: the arguments go in a list that
    ``_C.call_moving`` empties, and once the resume function's frame runs it is their only
    holder.  An object the rest of the function drops (a generator broken out of, a ``del``-eted
    local) dies where it dies in the original frame, not when this frame returns."""
    depth = len(succ.nulls)
    for i in reversed(range(depth)):
        cg.store_fast(f"{STACK_PREFIX}{i}")  # a NULL slot stores NULL: the local just stays unbound
    live = live_local_names(state, succ.index) + _dead_but_finalized_locals(state, succ.index)
    # unbound at the break, assigned by the native code before the stub (maybe, maybe not)
    maybe_unbound = tuple(n for n in succ.assigned if n not in live and n not in code.co_cellvars)
    resume_code = make_resume_code(code, succ.index, succ.nulls, live + maybe_unbound,
                                   maybe_unbound_cells(state), maybe_unbound)
    cg.load_callable(_C.call_moving)
    cg.make_sibling_function(resume_code, code)
    nargs = 0
    for n in live:  # live locals first: slot 0 stays the frame's first argument (super())
        cg.load_fast(n)
        cg.emit("DELETE_FAST", n)
        nargs += 1
    for n in maybe_unbound:  # its value, or runtime.UNBOUND (locals() has no entry for it)
        cg.load_callable(runtime.local_or_unbound)
        cg.load_callable(locals)
        cg.call(0)
        cg.load_const(n)
        cg.call(2)
        cg.load_const(None)  # unbind it, bound or not
        cg.store_fast(n)
        cg.emit("DELETE_FAST", n)
        nargs += 1
    for i in range(depth):
        if not succ.nulls[i]:
            cg.load_fast(f"{STACK_PREFIX}{i}")
            cg.emit("DELETE_FAST", f"{STACK_PREFIX}{i}")
            nargs += 1
    cg.emit("BUILD_LIST", nargs)
    cg.call(2)
    cg.emit("RETURN_VALUE")


def _dead_but_finalized_locals(state, index: int) -> tuple:
    """Bound locals not live at ``index`` whose freeing runs code (variables.base.runs_code_when_freed):
    the original frame keeps them until it overwrites or deletes them, so the resume function
    takes them too (this frame keeps nothing), and they are freed where eager frees them."""
    code = state.code
    live = set(live_locals_at(code, index))
    k = bytecode_compat.instructions(code)[state.break_index] if state.break_index is not None else None
    touched = set(bytecode_compat.local_writes(k)) if k is not None else set()
    if k is not None and k.opname == "DELETE_FAST":
        touched.add(k.argval)
    return tuple(n for n, v in state.frame_locals.items()
                 if n not in live and n not in touched and n not in code.co_cellvars and runs_code_when_freed(v))


def maybe_unbound_cells(state) -> tuple:
    """The frame's cell variables that may be empty after the break: not assigned in the
    trace, or deleted somewhere in the code."""
    deleted = _deleted_cells(state.code)
    return tuple(sorted(name for name, cell in state.root_cells.items()
                        if cell.contents is None or name in deleted))


def _deleted_cells(code: types.CodeType) -> set:
    """Names ``del``-eted as cells by ``code`` or by a function nested in it (``nonlocal v; del v``)."""
    names = {i.argval for i in bytecode_compat.instructions(code) if i.opname == "DELETE_DEREF"}
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _deleted_cells(const)
    return names


def _checked_cell_access(instr: Instr, name: str, fallback_line: int) -> list:
    """Instructions replacing LOAD_DEREF/DELETE_DEREF of the original frame's cell variable
    ``name``, now a free variable: an empty cell must raise UnboundLocalError, not NameError."""
    helper = runtime.cell_contents if instr.name == "LOAD_DEREF" else runtime.cell_delete
    line = instr.lineno or fallback_line
    out = bytecode_compat.null_before_callable(line) + [Instr("LOAD_CONST", helper, lineno=line)] + \
        bytecode_compat.null_after_callable(line) + [
        *bytecode_compat.load_closure(FreeVar(name), lineno=line),
        Instr("LOAD_CONST", name, lineno=line),
    ] + bytecode_compat.call(2, lineno=line)
    if instr.name == "DELETE_DEREF":
        out.append(Instr("POP_TOP", lineno=line))
    return out


def make_resume_code(code: types.CodeType, index: int, nulls: tuple, live: tuple,
                     maybe_unbound: tuple = (), unbound_args: tuple = ()) -> types.CodeType:
    """The resume function's code: continue at instruction ``index`` with the stack ``nulls``
    describes (its non-NULL slots and the ``live`` locals are the arguments).  Reads and
    deletes of the cells in ``maybe_unbound`` check for an empty cell like the original frame;
    the arguments in ``unbound_args`` (among ``live``) are unbound when they are runtime.UNBOUND."""
    key = ("resume", index, nulls, live, maybe_unbound, unbound_args)
    cached = derived(code, key)
    if cached is not None:
        return cached
    items = original_instructions(code)
    positions = [i for i, x in enumerate(items) if isinstance(x, Instr)]
    target_line = items[positions[index]].lineno or code.co_firstlineno
    cells = set(code.co_cellvars)
    seen_resume = False
    for p in positions:
        instr = items[p]
        if not seen_resume and bytecode_compat.is_prologue(instr):
            seen_resume = bytecode_compat.ends_prologue(instr)
            items[p] = Instr("NOP", lineno=instr.lineno or code.co_firstlineno)
            continue
        if isinstance(instr.arg, CellVar) and instr.arg.name in cells:
            items[p] = Instr(instr.name, FreeVar(instr.arg.name), location=instr.location)
    checked = {p: _checked_cell_access(items[p], items[p].arg.name, code.co_firstlineno) for p in positions
               if items[p].name in ("LOAD_DEREF", "DELETE_DEREF") and items[p].arg.name in maybe_unbound
               and items[p].arg.name in cells}
    label = Label()
    items.insert(positions[index], label)
    for p in sorted(checked, reverse=True):  # after the label: positions past it moved by one
        at = p + 1 if p >= positions[index] else p
        items[at:at + 1] = checked[p]
    freevars = list(code.co_cellvars) + list(code.co_freevars)
    prologue = bytecode_compat.frame_prologue(n_freevars=len(freevars), lineno=target_line)
    argnames = list(live)
    for name in unbound_args:
        bound = Label()
        prologue += [Instr("LOAD_FAST", name, lineno=target_line),
                     Instr("LOAD_CONST", runtime.UNBOUND, lineno=target_line),
                     Instr("IS_OP", 0, lineno=target_line),
                     *bytecode_compat.jump_if(False, bound, lineno=target_line),
                     Instr("DELETE_FAST", name, lineno=target_line), bound]
    for i, is_null in enumerate(nulls):
        if is_null:
            prologue.extend(bytecode_compat.push_null(target_line))
        else:
            argnames.append(f"{STACK_PREFIX}{i}")
            prologue.append(Instr("LOAD_FAST", f"{STACK_PREFIX}{i}", lineno=target_line))
            prologue.append(Instr("DELETE_FAST", f"{STACK_PREFIX}{i}", lineno=target_line))
    prologue.extend(bytecode_compat.jump(label, lineno=target_line))
    bc = Bytecode(prologue + items)
    # the user's own name: tracebacks, logging's funcName and sys._getframe() see the function
    # the code came from (diagnostics say which part: display_name)
    bc.name = code.co_name
    bc.qualname = code.co_qualname
    bc.filename = code.co_filename
    bc.first_lineno = code.co_firstlineno
    bc.argnames = argnames
    bc.argcount = len(argnames)
    bc.posonlyargcount = 0
    bc.kwonlyargcount = 0
    flags = code.co_flags & ~(bytecode_compat.CO_VARARGS | bytecode_compat.CO_VARKEYWORDS)
    if freevars:
        flags |= bytecode_compat.CO_NESTED
    bc.flags = flags
    bc.cellvars = []
    bc.freevars = freevars
    new_code = assemble(bc, code, len(prologue))
    remember_derived(code, key, new_code)
    register_generated(new_code, "resume", f"resumed at line {target_line}", parent=code)
    return new_code
