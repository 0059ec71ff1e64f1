"""Which fast locals are live (may be read before written) at an instruction.

Resume functions take only the live locals as arguments, which keeps their
signatures, guards and generated code small.  A classic backward data-flow
over the instruction graph, with exception-handler edges, on 3.11 bytecode.
Tested by tests/breaks/test_graph_breaks.py (test_resume_args_are_live_locals).
"""
from __future__ import annotations

import functools
import types

from .. import bytecode_compat

_NO_FALLTHROUGH = frozenset({"RETURN_VALUE", "RAISE_VARARGS", "RERAISE", *bytecode_compat.UNCONDITIONAL_JUMPS})
_JUMPS = frozenset({*bytecode_compat.CONDITIONAL_JUMPS, *bytecode_compat.UNCONDITIONAL_JUMPS, "FOR_ITER",
                    "SEND"})


@functools.lru_cache(maxsize=256)
def _analysis(code: types.CodeType):
    insts = bytecode_compat.instructions(code)
    index = {inst.offset: i for i, inst in enumerate(insts)}
    table = bytecode_compat.exception_table(code)
    succs: list[list[int]] = []
    for i, inst in enumerate(insts):
        out = []
        if inst.opname not in _NO_FALLTHROUGH and i + 1 < len(insts):
            out.append(i + 1)
        if inst.opname in _JUMPS and inst.argval in index:
            out.append(index[inst.argval])
        for start, end, target, _depth, _lasti in table:
            if start <= inst.offset < end and target in index:
                out.append(index[target])
        succs.append(out)
    uses = []
    defs = []
    for inst in insts:
        if inst.opname in ("LOAD_FAST", "LOAD_FAST_CHECK", "DELETE_FAST"):
            uses.append({inst.argval})
            defs.append(set())
        elif inst.opname == "STORE_FAST":
            uses.append(set())
            defs.append({inst.argval})
        else:
            uses.append(set())
            defs.append(set())
    live_in = [set() for _ in insts]
    changed = True
    while changed:
        changed = False
        for i in reversed(range(len(insts))):
            out = set()
            for s in succs[i]:
                out |= live_in[s]
            new = uses[i] | (out - defs[i])
            if new != live_in[i]:
                live_in[i] = new
                changed = True
    return index, live_in


def live_locals_at(code: types.CodeType, offset: int) -> frozenset:
    """Fast locals that may be read at or after ``offset`` before being assigned."""
    index, live_in = _analysis(code)
    return frozenset(live_in[index[offset]])


@functools.lru_cache(maxsize=256)
def stack_depths(code: types.CodeType) -> dict:
    """Offset -> value-stack depth before the instruction (None where unreachable)."""
    import dis

    insts = bytecode_compat.instructions(code)
    index = {inst.offset: i for i, inst in enumerate(insts)}
    depth: dict[int, int] = {}
    work = [(0, 0)]
    for start, _end, target, d, lasti in bytecode_compat.exception_table(code):
        if target in index:
            work.append((index[target], d + 1 + int(bool(lasti))))
    while work:
        i, d = work.pop()
        while i < len(insts):
            inst = insts[i]
            if inst.offset in depth:
                break
            depth[inst.offset] = d
            name = inst.opname
            if name in _JUMPS and inst.argval in index:
                work.append((index[inst.argval], d + dis.stack_effect(inst.opcode, inst.arg, jump=True)))
            if name in _NO_FALLTHROUGH:
                break
            d += dis.stack_effect(inst.opcode, inst.arg, jump=False) if name in _JUMPS else \
                dis.stack_effect(inst.opcode, inst.arg) if inst.opcode >= dis.HAVE_ARGUMENT else \
                dis.stack_effect(inst.opcode)
            i += 1
    return depth
