"""Flow facts of a code object's original instructions: jump targets, handlers,
stack depths, live locals.

Every analysis in codegen/ and every rewrite walks the same representation:
the `bytecode` items of ``original_instructions(code)`` (Instr / Label /
TryBegin / TryEnd).  ``FlowInfo`` numbers the real instructions of that list
0..n-1 (the n-th ``Instr``), and all facts are indexed by that number; a
rewrite takes a fresh copy of the same list and finds instruction i at
``positions[i]``.  The interpreter (translator) numbers its ``dis`` instructions
the same way (see bytecode_compat's docstring); ``FlowInfo`` checks the two
agree once, so a break index from the interpreter means the same instruction
here.

Resume functions take only the live locals as arguments, which keeps their
signatures, guards and generated code small: a classic backward data-flow
over the instruction graph, with exception-handler edges.
Tested by tests/breaks/test_graph_breaks.py (test_resume_args_are_live_locals).
"""
from __future__ import annotations

import types
from typing import Optional

from bytecode import Instr, Label, TryBegin, TryEnd

from .. import bytecode_compat
from ..cache import derived, remember_derived
from .pycodegen import CodegenFailed, original_items


class FlowInfo:
    """Facts about the real instructions of one code object, by instruction number.

    Attributes:
        instrs: the real instructions (``Instr`` of ``original_items``, shared with every
            FlowInfo of the code), in order; do not mutate: rewrites take their own
            ``original_instructions`` copy.
        target: per instruction, the number of its jump target (None: not a jump).
        handler: per instruction, (handler number, depth, push_lasti) of the try block
            covering it, or None.
        try_blocks: (first, end, handler number) per TryBegin: instructions first..end-1.
        depth: per instruction, the value-stack depth before it (None: unreachable).
        live_in: per instruction, the fast locals that may be read at or after it before
            being assigned.
        comprehensions: outer FOR_ITER -> its END_FOR, per inlined comprehension (3.12).
    """

    def __init__(self, code: types.CodeType):
        items = original_items(code)
        self.instrs: list[Instr] = []
        label_at: dict[int, int] = {}  # id(Label) -> number of the instruction after it
        open_try: Optional[TryBegin] = None
        try_start = 0
        covering: list[Optional[TryBegin]] = []
        blocks: list[tuple] = []
        for x in items:
            if isinstance(x, Label):
                label_at[id(x)] = len(self.instrs)
            elif isinstance(x, TryBegin):
                if open_try is not None:
                    blocks.append((try_start, len(self.instrs), open_try))
                open_try, try_start = x, len(self.instrs)
            elif isinstance(x, TryEnd):
                blocks.append((try_start, len(self.instrs), x.entry))
                open_try = None
            elif isinstance(x, Instr):
                self.instrs.append(x)
                covering.append(open_try)
        if open_try is not None:
            blocks.append((try_start, len(self.instrs), open_try))
        # the boundary with the interpreter: its dis instructions are these, in this order
        dis_names = [i.opname for i in bytecode_compat.instructions(code)]
        if dis_names != [x.name for x in self.instrs]:
            raise CodegenFailed("bytecode and dis disagree on this code's instructions")
        self.target: list[Optional[int]] = [
            label_at.get(id(x.arg)) if x.has_jump() and isinstance(x.arg, Label) else None
            for x in self.instrs]
        self.handler: list[Optional[tuple]] = [
            None if tb is None else (label_at[id(tb.target)], tb.stack_depth, bool(tb.push_lasti))
            for tb in covering]
        self.try_blocks: list[tuple] = [(s, e, label_at[id(tb.target)]) for s, e, tb in blocks]
        self.depth = self._stack_depths()
        self.live_in = self._liveness(frozenset(code.co_varnames))
        # 3.12's inlined comprehensions: FOR_ITER number -> END_FOR number
        self.comprehensions: dict = bytecode_compat.inlined_comprehension_loops(code)

    def __len__(self) -> int:
        return len(self.instrs)

    def falls_through(self, i: int) -> bool:
        return not self.instrs[i].is_final() and i + 1 < len(self.instrs)

    def is_backward_jump(self, i: int) -> bool:
        t = self.target[i]
        return t is not None and t <= i

    def _successors(self, i: int) -> list[int]:
        out = [i + 1] if self.falls_through(i) else []
        if self.target[i] is not None:
            out.append(self.target[i])
        if self.handler[i] is not None:
            out.append(self.handler[i][0])
        return out

    def _liveness(self, all_locals: frozenset) -> list[frozenset]:
        n = len(self.instrs)
        succs = [self._successors(i) for i in range(n)]
        uses: list[frozenset] = []
        defs: list[frozenset] = []
        for x in self.instrs:
            if _reads_every_local(x):
                uses.append(all_locals)
                defs.append(frozenset())
                continue
            uses.append(frozenset(bytecode_compat.local_reads(x)))
            defs.append(frozenset(bytecode_compat.local_writes(x)))
        live_in = [frozenset() for _ in range(n)]
        changed = True
        while changed:
            changed = False
            for i in reversed(range(n)):
                out = set()
                for s in succs[i]:
                    out |= live_in[s]
                new = uses[i] | (out - defs[i])
                if new != live_in[i]:
                    live_in[i] = frozenset(new)
                    changed = True
        return live_in

    def _stack_depths(self) -> list[Optional[int]]:
        depth: list[Optional[int]] = [None] * len(self.instrs)
        work = [(0, 0)]
        for h in self.handler:
            if h is not None:
                work.append((h[0], h[1] + 1 + int(h[2])))
        while work:
            i, d = work.pop()
            while i < len(self.instrs):
                if depth[i] is not None:
                    break
                depth[i] = d
                x = self.instrs[i]
                if self.target[i] is not None:
                    work.append((self.target[i], d + bytecode_compat.stack_effect(x, jump=True)))
                if x.is_final():
                    break
                d += bytecode_compat.stack_effect(x, jump=False if self.target[i] is not None else None)
                i += 1
        return depth


# builtins that read the calling frame's locals when called without them: ``locals()``,
# ``vars()``, ``dir()``, ``eval``/``exec`` with default namespaces, ``breakpoint()``
_FRAME_READERS = frozenset({"locals", "vars", "dir", "eval", "exec", "breakpoint"})


def _reads_every_local(x: Instr) -> bool:
    """Loading one of _FRAME_READERS by name: every bound local is live there (a resume
    function after a break must see them all, as the original frame's ``locals()`` does)."""
    if x.name not in ("LOAD_GLOBAL", "LOAD_NAME"):
        return False
    name = x.arg[1] if isinstance(x.arg, tuple) else x.arg
    return name in _FRAME_READERS


def flow_info(code: types.CodeType) -> FlowInfo:
    """The control-flow facts of ``code``, computed once while it lives."""
    info = derived(code, ("flow",))
    if info is None:
        info = FlowInfo(code)
        remember_derived(code, ("flow",), info)
    return info


def live_locals_at(code: types.CodeType, index: int) -> frozenset:
    """Fast locals that may be read at or after instruction ``index`` before being assigned."""
    return flow_info(code).live_in[index]
