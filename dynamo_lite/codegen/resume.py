"""Resume functions: the rest of a frame after a graph break.

A resume function is a new function whose code is the original bytecode with
a prologue that pushes the saved value stack (NULLs included) and jumps to
``offset``.  It keeps the original's name (tracebacks, logging, frames look
like the user's function); ``display_name`` tells diagnostics which part it is.  Its arguments are the non-NULL stack values and the
frame's live locals; cell and free variables are shared through its closure.
Because it is an ordinary function, the hook captures it like any other frame,
with its own cache and guards.

``plan_successors`` decides what follows the breaking instruction k: one
resume function per successor, or None when the rest of the frame must run
natively (k inside a loop: resuming there would nest one frame per
iteration).
Tested by tests/breaks/test_graph_breaks.py.
"""
from __future__ import annotations

import dataclasses
import dis
import types
from typing import Optional

from bytecode import Bytecode, CellVar, FreeVar, Instr, Label

from .. import bytecode_compat
from .codegen import assemble, original_instructions
from ..variables.base import NullVariable

# Arguments of a resume function holding the saved value stack: STACK_PREFIX + slot.
STACK_PREFIX = "___stack"

# Values pushed by instructions that may break the graph (pops = pushes - net effect).
_PUSHES = {
    "BINARY_OP": 1, "BINARY_SUBSCR": 1, "COMPARE_OP": 1, "CONTAINS_OP": 1, "IS_OP": 1,
    "UNARY_NEGATIVE": 1, "UNARY_POSITIVE": 1, "UNARY_INVERT": 1, "UNARY_NOT": 1, "GET_ITER": 1,
    "FORMAT_VALUE": 1, "BUILD_STRING": 1, "LOAD_ATTR": 1, "STORE_ATTR": 0, "STORE_SUBSCR": 0,
    "DELETE_SUBSCR": 0, "IMPORT_NAME": 1, "IMPORT_FROM": 1, "BUILD_TUPLE": 1, "BUILD_LIST": 1,
    "BUILD_SET": 1, "BUILD_MAP": 1, "BUILD_CONST_KEY_MAP": 1, "BUILD_SLICE": 1, "LIST_APPEND": 0,
    "SET_ADD": 0, "MAP_ADD": 0, "LIST_EXTEND": 0, "SET_UPDATE": 0, "DICT_UPDATE": 0,
    "DICT_MERGE": 0, "LIST_TO_TUPLE": 1, "CALL_FUNCTION_EX": 1, "STORE_GLOBAL": 0,
    "LOAD_GLOBAL": None, "GET_LEN": 1, "LOAD_DEREF": 1, "STORE_DEREF": 0, "LOAD_FAST": 1,
    "MAKE_FUNCTION": 1,
}
_NO_SUCCESSOR = ("RETURN_VALUE", "RAISE_VARARGS", "RERAISE")


@dataclasses.dataclass
class Successor:
    offset: int  # where the resume function continues
    is_jump_target: bool  # reached by k's jump (else by falling through)
    nulls: tuple  # per stack slot at the successor: True where the slot holds NULL
    label: Optional[Label] = None  # the stub in the transformed code


def _in_loop(insts, k: int) -> bool:
    off = insts[k].offset
    return any(i.opname in bytecode_compat.BACKWARD_JUMPS and i.offset >= off and i.argval <= off
               for i in insts)


def plan_successors(code, insts, k: int, stack: list) -> Optional[list]:
    inst = insts[k]
    name = inst.opname
    if name in _NO_SUCCESSOR:
        return []
    if _in_loop(insts, k) or k + 1 >= len(insts):
        return None
    before = [isinstance(v, NullVariable) for v in stack]
    nxt = insts[k + 1].offset
    if name in bytecode_compat.CONDITIONAL_JUMPS:
        pops_always = bytecode_compat.CONDITIONAL_JUMPS[name][0]
        below = tuple(before[:-1])
        jump_stack = below if pops_always else tuple(before)
        return [Successor(inst.argval, True, jump_stack), Successor(nxt, False, below)]
    if name == "CALL":
        pops, pushes = inst.arg + 2, 1
    else:
        pushes = _PUSHES.get(name)
        if pushes is None:
            return None
        pops = pushes - dis.stack_effect(inst.opcode, inst.arg)
    if pops > len(before):
        return None
    below = tuple(before[:len(before) - pops])
    return [Successor(nxt, False, below + (False,) * pushes)]


_RESUME_CACHE: dict = {}


def live_local_names(state, offset: int) -> tuple:
    from .liveness import live_locals_at

    code = state.code
    live = live_locals_at(code, offset)
    names = tuple(n for n in state.symbolic_locals if n in live and n not in code.co_cellvars)
    # zero-argument super() reads local slot 0: keep the first argument first (and alive)
    first = code.co_varnames[0] if code.co_varnames and "__class__" in code.co_freevars and (
        code.co_argcount or code.co_flags & bytecode_compat.CO_VARARGS) else None
    if first is not None and first in state.symbolic_locals and first not in code.co_cellvars:
        names = (first,) + tuple(n for n in names if n != first)
    return names


def emit_resume_call(cg, code, succ: Successor, state) -> None:
    """Stub body: save the stack, call the resume function, return its result."""
    depth = len(succ.nulls)
    for i in reversed(range(depth)):
        cg.store_fast(f"{STACK_PREFIX}{i}")  # a NULL slot stores NULL: the local just stays unbound
    live = live_local_names(state, succ.offset)
    resume_code = make_resume_code(code, succ.offset, succ.nulls, live)
    cg.emit("PUSH_NULL")
    cg.make_sibling_function(resume_code, code)
    nargs = 0
    for n in live:  # live locals first: slot 0 stays the frame's first argument (super())
        cg.load_fast(n)
        nargs += 1
    for i in range(depth):
        if not succ.nulls[i]:
            cg.load_fast(f"{STACK_PREFIX}{i}")
            cg.emit("DELETE_FAST", f"{STACK_PREFIX}{i}")  # only the stack holds it, as in the original frame
            nargs += 1
    cg.call(nargs)
    cg.emit("RETURN_VALUE")


def make_resume_code(code: types.CodeType, offset: int, nulls: tuple, live: tuple) -> types.CodeType:
    key = (code, offset, nulls, live)
    cached = _RESUME_CACHE.get(key)
    if cached is not None:
        return cached
    insts = bytecode_compat.instructions(code)
    index = next(i for i, inst in enumerate(insts) if inst.offset == offset)
    items = original_instructions(code)
    positions = [i for i, x in enumerate(items) if isinstance(x, Instr)]
    cells = set(code.co_cellvars)
    seen_resume = False
    for p in positions:
        instr = items[p]
        if not seen_resume and instr.name in ("COPY_FREE_VARS", "MAKE_CELL", "RESUME"):
            seen_resume = instr.name == "RESUME"
            items[p] = Instr("NOP", lineno=instr.lineno or code.co_firstlineno)
            continue
        if isinstance(instr.arg, CellVar) and instr.arg.name in cells:
            items[p] = Instr(instr.name, FreeVar(instr.arg.name), location=instr.location)
    target_line = insts[index].positions.lineno or code.co_firstlineno
    label = Label()
    items.insert(positions[index], label)
    freevars = list(code.co_cellvars) + list(code.co_freevars)
    prologue = []
    if freevars:
        prologue.append(Instr("COPY_FREE_VARS", len(freevars), lineno=target_line))
    prologue.append(Instr("RESUME", 0, lineno=target_line))
    argnames = list(live)
    for i, is_null in enumerate(nulls):
        if is_null:
            prologue.append(Instr("PUSH_NULL", lineno=target_line))
        else:
            argnames.append(f"{STACK_PREFIX}{i}")
            prologue.append(Instr("LOAD_FAST", f"{STACK_PREFIX}{i}", lineno=target_line))
            prologue.append(Instr("DELETE_FAST", f"{STACK_PREFIX}{i}", lineno=target_line))
    prologue.append(Instr("JUMP_FORWARD", label, lineno=target_line))
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
    _RESUME_CACHE[key] = new_code
    register_generated(new_code, "resume", f"resumed at line {target_line}")
    return new_code


# generated code objects (resume functions, loop bodies) and their display names: cache.py
from ..cache import display_name, is_loop_body, is_resume_code, register_generated  # noqa: E402,F401
