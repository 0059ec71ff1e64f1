"""Loop bodies as functions of their own: graph breaks inside loops.

A graph break inside a loop cannot resume through a resume function (each
iteration would nest one more Python frame).  TorchDynamo gives up on the
whole frame there.  We keep the code before the loop captured and turn the
loop body into a function of its own (named like the function, shown as
"f (loop body at line N)" in diagnostics):

    parent (generated code)                 loop body function B(item, locals)
    ------------------------                ---------------------------------
    graph for the code before the           prologue: restore the locals the
      iteration the break is in               body reads, push placeholders for
    for loops: FOR_ITER runs natively         the stack below, push the item
    each iteration: tag, v = B(item, reads) the original body bytecode, with
      0: store written locals, next           continue -> return (0, written)
      1: return v                             return v -> return (1, v)
      2+i: store locals, go to exit i         break/exit i -> return (2+i, written)

The graph ends where the iteration around the break began (convert_frame asks
frame_code.iteration_start), so B runs that iteration too: one capture of the body serves
them all.  A while loop's repeat test (its conditional back-edge) is the end of B: taken
it continues, falling through it is an exit.  At each instruction the loop
leaves to (``exit_targets``) the parent continues in a resume function
(frame_code._resume_after_loop), unless that code is inside another loop.
B is an ordinary function: the hook captures it, and a break inside it is an
ordinary (non-loop) break with a resume function.  Exceptions propagate out
of B into the parent (loops inside a try/with block of the parent are not
made into functions: its handler would see stale locals); handlers inside
the body stay inside B.
``find_loop`` refuses shapes it does not model (jumps into the body from
outside, deleted locals, a comprehension's appends to a result below the iterator, exits at unexpected stack depths, a loop inside a
try/with block of the parent, zero-argument super() or locals()); the caller
then lets the rest of the frame run natively.
Tested by tests/breaks/test_graph_breaks.py (the loop cases).
"""
from __future__ import annotations

import builtins
import dataclasses
import types
from typing import Optional

from bytecode import Bytecode, CellVar, Compare, FreeVar, Instr, Label, TryBegin, TryEnd

from .. import bytecode_compat, runtime
from .pycodegen import PyCodegen, assemble, original_instructions
from .liveness import FlowInfo
from ..cache import derived, register_generated, remember_derived
from ..source import LOOP_BODY_LOCALS

_TAG_CONTINUE = 0
_TAG_RETURN = 1
_TAG_EXIT = 2  # 2 + index of the exit target


@dataclasses.dataclass(frozen=True)
class LoopInfo:
    """A loop around a graph break; instructions numbered as in liveness.FlowInfo."""

    header: int  # FOR_ITER (for) or the back-edge target (while)
    entry: int  # the first body instruction: where the dispatch goes
    last: int  # the last back-edge
    is_for: bool
    exits: tuple  # instructions outside the loop that the body jumps to
    reads: tuple  # fast locals the body may read before assigning them (live at its entry)
    writes: tuple  # fast locals the body assigns
    below: int  # stack depth under the body (for loops: including the iterator)


def find_loop(code: types.CodeType, flow: FlowInfo, k: int) -> Optional[LoopInfo]:
    if "__class__" in code.co_freevars or {"locals", "vars", "super"} & set(code.co_names):
        return None  # zero-argument super() and locals() need the frame's own locals and first argument
    n = len(flow)
    best = None
    for j in range(n):
        if flow.is_backward_jump(j) and flow.target[j] <= k <= j:
            t = flow.target[j]
            if best is None or t > best[0] or (t == best[0] and j > best[1]):
                best = (t, j)
    if best is None:
        return None
    header, _ = best
    last = max(j for j in range(n) if flow.is_backward_jump(j) and flow.target[j] == header)
    is_for = flow.instrs[header].name == "FOR_ITER"
    entry = header + 1 if is_for else header
    if not (header if is_for else entry) <= k <= last:
        return None  # (a break at a for loop's FOR_ITER: every later iteration calls the body)
    depths = flow.depth
    if depths[entry] is None:
        return None
    below = depths[entry] - (1 if is_for else 0)
    exit_depth = below - 1 if is_for else below
    lo, hi = entry, last
    exits: list[int] = []
    reads, writes = set(), set()
    for i, inst in enumerate(flow.instrs):
        inside = lo <= i <= hi
        t = flow.target[i]
        if t is not None:
            target_inside = lo <= t <= hi
            if inside:
                if t == header or target_inside:
                    continue
                if depths[t] != exit_depth and inst.name != "FOR_ITER":
                    return None
                if t not in exits:
                    exits.append(t)
            elif target_inside and not (t == lo and not is_for):
                return None  # a jump into the body from outside
        if not inside:
            continue
        if inst.name in ("DELETE_FAST", "YIELD_VALUE", "SEND", "LOAD_NAME", "STORE_NAME"):
            return None
        if inst.name in ("LIST_APPEND", "SET_ADD", "MAP_ADD"):
            return None  # a comprehension's result lies under the iterator: not in B's stack
        reads.update(bytecode_compat.local_reads(inst))
        writes.update(bytecode_compat.local_writes(inst))
    if flow.instrs[last].name in bytecode_compat.CONDITIONAL_JUMPS and last + 1 < n:
        fall = last + 1
        if depths[fall] != exit_depth:
            return None
        if fall not in exits:
            exits.append(fall)
    for start, end, target in flow.try_blocks:  # instructions start..end-1
        overlaps = start <= hi and end > lo
        if not overlaps:
            continue
        if lo <= target <= hi and not (start >= lo and end <= hi + 1):
            return None  # a handler inside the body covering code outside it
        if not lo <= target <= hi:
            # an enclosing try/with: its handler would see the locals as they were before the
            # iteration that raised (B hands them back only when it returns), and a `return`
            # inside the block must run the block's exit in the parent: let the frame run natively
            return None
    # only what the body may read before assigning it: a local every path through the body assigns
    # first (the loop variable) is not handed in, so its value from the previous iteration is not
    # guarded (a loop over range(n) would otherwise recompile the body for each i)
    reads &= flow.live_in[entry]
    return LoopInfo(header, entry, last, is_for, tuple(exits), tuple(sorted(reads)), tuple(sorted(writes)), below)


def exit_targets(flow: FlowInfo, info: LoopInfo) -> list:
    """The instructions the loop leaves to: its body's exits and, for a for loop, the one its
    exhausted FOR_ITER goes on at (past END_FOR on 3.12+)."""
    out = list(info.exits)
    if info.is_for:
        t = flow.target[info.header]
        if t is not None:
            natural = t + bytecode_compat.FOR_ITER_EXIT_SKIP
            if natural < len(flow) and natural not in out:
                out.append(natural)
    return out


def _label_positions(items) -> dict:
    out = {}
    pending = []
    pos = 0
    for x in items:
        if isinstance(x, Label):
            pending.append(x)
        elif isinstance(x, Instr):
            for lab in pending:
                out[id(lab)] = pos
            pending = []
            pos += 1
    return out


def make_body_code(code: types.CodeType, flow: FlowInfo, info: LoopInfo) -> types.CodeType:
    key = ("loop body", info)
    cached = derived(code, key)
    if cached is not None:
        return cached
    items = original_instructions(code)
    label_pos = _label_positions(items)
    lo_i, hi_i = info.entry, info.last
    cells = set(code.co_cellvars)
    cont_label, ret_label = Label(), Label()
    exit_labels = {x: Label() for x in info.exits}
    entry_label = Label()
    # drop handlers that belong to code around the loop: their exceptions must
    # reach the parent, whose copy of the code has them
    dropped = set()
    for x in items:
        if isinstance(x, TryBegin) and not lo_i <= label_pos.get(id(x.target), -1) <= hi_i:
            dropped.add(id(x))
    out: list = []
    n = -1
    seen_resume = False
    for x in items:
        if isinstance(x, TryBegin) and id(x) in dropped:
            continue
        if isinstance(x, TryEnd) and id(x.entry) in dropped:
            continue
        if not isinstance(x, Instr):
            out.append(x)
            continue
        n += 1
        line = x.lineno or code.co_firstlineno
        if n == lo_i:
            out.append(entry_label)
        if not seen_resume and bytecode_compat.is_prologue(x):
            seen_resume = bytecode_compat.ends_prologue(x)
            out.append(Instr("NOP", lineno=line))
            continue
        if isinstance(x.arg, CellVar) and x.arg.name in cells:
            x = Instr(x.name, FreeVar(x.arg.name), location=x.location)
        inside = lo_i <= n <= hi_i
        t = flow.target[n]
        if inside and t is not None and x.name != "FOR_ITER" and t == info.header:
            out.append(bytecode_compat.redirect_jump(x, cont_label, lineno=line))
        elif inside and t is not None and x.name != "FOR_ITER" and t in exit_labels:
            out.append(bytecode_compat.redirect_jump(x, exit_labels[t], lineno=line))
        elif inside and x.name in bytecode_compat.RETURNS:
            out.extend(bytecode_compat.return_as_jump(x, ret_label, lineno=line))
        else:
            out.append(x)
        if n == hi_i and x.name in bytecode_compat.CONDITIONAL_JUMPS:
            # the loop's last test falls through out of the loop
            out.extend(bytecode_compat.jump(exit_labels[n + 1], lineno=line))
    line = flow.instrs[lo_i].lineno or code.co_firstlineno
    cg = PyCodegen(code, collecting=False)
    cg.cellvars, cg.freevars = set(), set(code.co_cellvars) | set(code.co_freevars)
    cg.lineno = line

    def ret_locals(tag):
        # Make the written locals live here for liveness analysis (resume
        # functions of this body must receive them): a branch never taken.
        taken = Label()
        cg.load_const(False)
        cg.jump_if(False, taken)
        for name in info.writes:
            cg.load_fast(name)
            cg.emit("POP_TOP")
        cg.label(taken)
        cg.load_const(tag)
        cg.load_callable(runtime.pick)
        cg.load_callable(builtins.locals)
        cg.call(0)
        cg.load_const(info.writes)
        cg.call(2)
        cg.emit("BUILD_TUPLE", 2)
        cg.emit("RETURN_VALUE")

    cg.label(cont_label)
    ret_locals(_TAG_CONTINUE)
    for i, x in enumerate(info.exits):
        cg.label(exit_labels[x])
        ret_locals(_TAG_EXIT + i)
    cg.label(ret_label)
    cg.load_const(_TAG_RETURN)
    cg.emit("SWAP", 2)
    cg.emit("BUILD_TUPLE", 2)
    cg.emit("RETURN_VALUE")
    stubs = cg.instrs
    pro = PyCodegen(code, collecting=False)
    pro.lineno = line
    freevars = list(code.co_cellvars) + list(code.co_freevars)
    pro.instrs.extend(bytecode_compat.frame_prologue(n_freevars=len(freevars), lineno=line))
    pro.store_locals_from_dict(LOOP_BODY_LOCALS, info.reads)
    for _ in range(info.below):
        pro.load_const(None)
    if info.is_for:
        pro.load_fast("___item")
    pro.jump(entry_label)
    bc = Bytecode(pro.instrs + out + stubs)
    bc.name = code.co_name  # the user's name (tracebacks, logging); see cache.display_name
    bc.qualname = code.co_qualname
    bc.filename = code.co_filename
    bc.first_lineno = code.co_firstlineno
    bc.argnames = ["___item", LOOP_BODY_LOCALS]
    bc.argcount = 2
    bc.posonlyargcount = 0
    bc.kwonlyargcount = 0
    flags = code.co_flags & ~(bytecode_compat.CO_VARARGS | bytecode_compat.CO_VARKEYWORDS)
    if freevars:
        flags |= bytecode_compat.CO_NESTED
    bc.flags = flags
    bc.cellvars = []
    bc.freevars = freevars
    new_code = assemble(bc, code, len(pro.instrs) + len(stubs))
    remember_derived(code, key, new_code)
    register_generated(new_code, "loop body", f"loop body at line {line}")
    return new_code


def rewrite_parent_copy(copy: list, code: types.CodeType, flow: FlowInfo, info: LoopInfo, body_code) -> list:
    """Insert the per-iteration dispatch into the parent's copy of the original code."""
    positions = [i for i, x in enumerate(copy) if isinstance(x, Instr)]
    label_pos = _label_positions(copy)
    entry_pos = positions[info.entry]
    # insertion point: after labels (jump targets of the body start) and after
    # try-blocks around the loop, before try-blocks that belong to the body
    insert_at = entry_pos
    while insert_at > 0 and isinstance(copy[insert_at - 1], TryBegin) and \
            info.entry <= label_pos.get(id(copy[insert_at - 1].target), -1) <= info.last:
        insert_at -= 1
    j = insert_at - 1
    while j >= 0 and not isinstance(copy[j], Instr):
        if isinstance(copy[j], TryBegin) and info.entry <= label_pos.get(id(copy[j].target), -1) <= info.last:
            return None
        j -= 1
    header_label = Label()
    if info.is_for:
        copy.insert(positions[info.header], header_label)
        if positions[info.header] <= insert_at:
            insert_at += 1
    else:
        copy.insert(insert_at, header_label)
        insert_at += 1
    # exit targets: labels before their instructions
    positions = [i for i, x in enumerate(copy) if isinstance(x, Instr)]
    exit_labels = {x: Label() for x in info.exits}
    line = flow.instrs[info.entry].lineno or code.co_firstlineno
    cg = PyCodegen(code, collecting=False)
    cg.lineno = line
    if info.is_for:
        cg.store_fast("___loop_item")
    cg.null_before_callable()
    cg.make_sibling_function(body_code, code)
    cg.null_after_callable()
    if info.is_for:
        cg.load_fast("___loop_item")
    else:
        cg.load_const(None)
    cg.load_callable(runtime.pick)
    cg.load_callable(builtins.locals)
    cg.call(0)
    cg.load_const(info.reads)
    cg.call(2)
    cg.call(2)
    cg.emit("UNPACK_SEQUENCE", 2)
    cg.store_fast("___loop_tag")
    cg.store_fast("___loop_vars")
    not_ret = Label()
    cg.load_fast("___loop_tag")
    cg.load_const(_TAG_RETURN)
    cg.emit("COMPARE_OP", Compare.EQ)
    cg.jump_if(False, not_ret)
    cg.load_fast("___loop_vars")
    cg.emit("RETURN_VALUE")
    cg.label(not_ret)
    cg.store_locals_from_dict("___loop_vars", info.writes)
    for i, x in enumerate(info.exits):
        nxt = Label()
        cg.load_fast("___loop_tag")
        cg.load_const(_TAG_EXIT + i)
        cg.emit("COMPARE_OP", Compare.EQ)
        cg.jump_if(False, nxt)
        if info.is_for:
            cg.emit("POP_TOP")  # the iterator
        cg.jump(exit_labels[x], backward=x <= info.entry)
        cg.label(nxt)
    cg.jump(header_label, backward=True)  # continue
    for x, lab in exit_labels.items():
        p = positions[x]
        copy.insert(p, lab)
        positions = [i for i, y in enumerate(copy) if isinstance(y, Instr)]
        if p <= insert_at:
            insert_at += 1
    copy[insert_at:insert_at] = cg.instrs
    return copy
