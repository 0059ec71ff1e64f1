"""What differs between Python versions, in one place.

Nothing else in dynamo_lite checks ``sys.version_info``, spells an opcode that exists in only
some supported Pythons (``VERSION_SPECIFIC_OPNAMES``; the handler modules of symbolic/opcodes
name the opcodes they handle, and registration is by version) or builds an instruction whose
argument form differs by version (``VERSION_SPECIFIC_FORMS``) other than through the emitters
here; the check is tests/unit/test_codegen_roundtrip.py::test_version_knowledge_stays_in_bytecode_compat.
Supported: CPython 3.11 and 3.12 (the C side: csrc/cpython_compat.h).  What it knows:

- opcode names by version: ``OPNAMES`` (the running Python's real opcodes; 3.12's dis.opmap
  also lists pseudo and instrumented ones), ``KNOWN_OPNAMES`` (every supported Python's),
  ``has_opcode``;
- opcode tables for the symbolic interpreter's handlers: ``NOOPS``,
  ``CONDITIONAL_JUMPS`` (opname -> pops?, jump when truthy?, test kind),
  ``UNCONDITIONAL_JUMPS``, ``BACKWARD_JUMPS``, ``CALL_PREFIX`` (the
  instructions before a CALL that belong to it), ``OP_KW_NAMES``,
  ``OP_LOAD_METHOD``, ``OP_LIST_TO_TUPLE``, ``OP_LOAD_SUPER_ATTR``, ``RETURNS``,
  ``LOCAL_READS``, ``RESUMABLE``, ``UNSUPPORTED_OPS`` (version-only opcodes the
  interpreter refuses, by kind);
- code flags (``CO_*``) and MAKE_FUNCTION flag bits (``MF_*``);
- decoding for the interpreter: ``instructions`` (``dis.Instruction``s without
  CACHE/EXTENDED_ARG), ``exception_table``, ``binary_op_name``,
  ``load_global_pushes_null``, ``load_attr_is_method`` (3.12's method bit),
  ``load_super_attr_form``, ``intrinsic_name``, ``return_value_of``,
  ``FOR_ITER_EXIT_SKIP`` (3.12 jumps past END_FOR), ``SEND_KEEPS_RECEIVER``,
  ``inlined_comprehension_loops`` (PEP 709), ``is_pass_through_handler``, ``arg_names``;
- emitters for generated code, each returning a list of ``bytecode.Instr``:
  ``push_null``, ``call`` (n positional arguments, the last ones by keyword; 3.11 adds
  PRECALL), ``load_method`` / ``call_method`` (3.12: ``LOAD_ATTR (True, name)``),
  ``load_attr``, ``load_global``, ``load_closure``, ``return_const``, ``return_as_jump``,
  ``jump``, ``jump_if`` (by truth; 3.12's conditional jumps go forward only and never keep
  their value), ``redirect_jump`` (same test, new target), ``frame_prologue`` (COPY_FREE_VARS,
  MAKE_CELL, RESUME), ``make_function`` (named flags); ``is_prologue`` /
  ``ends_prologue`` recognise the original prologue;
- stack effects: ``stack_effect`` (``dis.stack_effect`` through
  ``bytecode.Instr``) and ``nulls_after`` (which stack slots hold NULL after an
  instruction: only calls consume NULL, only the NULL-pushing loads make one).

The boundary between the two instruction representations: the symbolic
interpreter (symbolic/translator.py and its handlers) steps over the
``dis.Instruction`` list of ``instructions(code)``; everything in codegen/
(liveness, stack depths, loop detection, resume planning and every rewrite)
walks one list of ``bytecode`` items (Instr / Label / TryBegin / TryEnd) made
by ``codegen.pycodegen.original_instructions``.  Both lists hold the real
instructions in the same order, so the interpreter hands codegen the index of
the breaking instruction; ``codegen.liveness.FlowInfo`` checks the two agree
once, where the index crosses over.
Tested by tests/unit/test_codegen_roundtrip.py (the emitters, the grep for version-specific
names) and, through codegen, by tests/breaks/test_graph_breaks.py.
"""
from __future__ import annotations

import dis
import opcode
import sys
import types
import weakref
from typing import Optional

from bytecode import Instr, Label

_VERSION = sys.version_info[:2]
SUPPORTED = _VERSION in ((3, 11), (3, 12))
PY_VERSION = "%d.%d" % _VERSION
_PY312 = _VERSION >= (3, 12)

# ---- opcode names by version ----------------------------------------------------------------
# Real opcodes that exist in only some of the supported Pythons.  (3.12's dis.opmap also lists
# pseudo-instructions, >= 256, and INSTRUMENTED_* ones, which never appear in a code object.)
_ONLY_311 = frozenset({
    "ASYNC_GEN_WRAP", "IMPORT_STAR", "JUMP_IF_FALSE_OR_POP", "JUMP_IF_TRUE_OR_POP",
    "LIST_TO_TUPLE", "LOAD_CLASSDEREF", "LOAD_METHOD", "POP_JUMP_BACKWARD_IF_FALSE",
    "POP_JUMP_BACKWARD_IF_NONE", "POP_JUMP_BACKWARD_IF_NOT_NONE", "POP_JUMP_BACKWARD_IF_TRUE",
    "POP_JUMP_FORWARD_IF_FALSE", "POP_JUMP_FORWARD_IF_NONE", "POP_JUMP_FORWARD_IF_NOT_NONE",
    "POP_JUMP_FORWARD_IF_TRUE", "PRECALL", "PREP_RERAISE_STAR", "PRINT_EXPR", "UNARY_POSITIVE",
})
_FROM_312 = frozenset({
    "BINARY_SLICE", "CALL_INTRINSIC_1", "CALL_INTRINSIC_2", "CLEANUP_THROW", "END_FOR", "END_SEND",
    "INTERPRETER_EXIT", "LOAD_FAST_AND_CLEAR", "LOAD_FAST_CHECK", "LOAD_FROM_DICT_OR_DEREF",
    "LOAD_FROM_DICT_OR_GLOBALS", "LOAD_LOCALS", "LOAD_SUPER_ATTR", "POP_JUMP_IF_FALSE",
    "POP_JUMP_IF_NONE", "POP_JUMP_IF_NOT_NONE", "POP_JUMP_IF_TRUE", "RESERVED", "RETURN_CONST",
    "STORE_SLICE",
})
_MIN_NOT_REAL = min(getattr(opcode, "MIN_INSTRUMENTED_OPCODE", 256), 256)
# the real opcodes of the running Python (what a code object can hold)
OPNAMES = frozenset(name for name, op in dis.opmap.items() if op < _MIN_NOT_REAL)
# every real opcode name of a supported Python
KNOWN_OPNAMES = OPNAMES | _ONLY_311 | _FROM_312


def has_opcode(name: str) -> bool:
    """Is ``name`` a real opcode of the running Python?  (Handlers register by version:
    symbolic/opcodes installs a handler only for these.)"""
    return name in OPNAMES


# Opcodes that do nothing to the symbolic state.
NOOPS = frozenset({"NOP", "RESUME", "CACHE", "EXTENDED_ARG"} | (set() if _PY312 else {"PRECALL"}))

# Conditional jumps: opname -> (pops the value?, jump when truthy?, test kind).
# test kind: "bool" (truthiness) or "none" (is None).
if _PY312:
    CONDITIONAL_JUMPS = {
        "POP_JUMP_IF_TRUE": (True, True, "bool"),
        "POP_JUMP_IF_FALSE": (True, False, "bool"),
        "POP_JUMP_IF_NONE": (True, True, "none"),
        "POP_JUMP_IF_NOT_NONE": (True, False, "none"),
    }
else:
    CONDITIONAL_JUMPS = {
        "POP_JUMP_FORWARD_IF_TRUE": (True, True, "bool"),
        "POP_JUMP_BACKWARD_IF_TRUE": (True, True, "bool"),
        "POP_JUMP_FORWARD_IF_FALSE": (True, False, "bool"),
        "POP_JUMP_BACKWARD_IF_FALSE": (True, False, "bool"),
        "POP_JUMP_FORWARD_IF_NONE": (True, True, "none"),
        "POP_JUMP_BACKWARD_IF_NONE": (True, True, "none"),
        "POP_JUMP_FORWARD_IF_NOT_NONE": (True, False, "none"),
        "POP_JUMP_BACKWARD_IF_NOT_NONE": (True, False, "none"),
        "JUMP_IF_TRUE_OR_POP": (False, True, "bool"),
        "JUMP_IF_FALSE_OR_POP": (False, False, "bool"),
    }
UNCONDITIONAL_JUMPS = frozenset(
    {"JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT"}
)
BACKWARD_JUMPS = frozenset(n for n in OPNAMES if "BACKWARD" in n)

# A forward jump of the same meaning as a (possibly backward) jump opname:
# used when generated code redirects a jump to a stub placed at the end.
def forward_variant(opname: str) -> str:
    return opname.replace("BACKWARD", "FORWARD") if "BACKWARD_IF" in opname else (
        "JUMP_FORWARD" if opname in UNCONDITIONAL_JUMPS else opname
    )


def backward_variant(opname: str) -> str:
    if "FORWARD_IF" in opname:
        return opname.replace("FORWARD", "BACKWARD")
    if opname == "JUMP_FORWARD":
        return "JUMP_BACKWARD"
    return opname


# Instructions that start a call sequence (3.11: [KW_NAMES] PRECALL CALL; 3.12: [KW_NAMES] CALL).
CALL_PREFIX = ("KW_NAMES",) if _PY312 else ("KW_NAMES", "PRECALL")
OP_KW_NAMES = "KW_NAMES"  # sets the keyword names of the next CALL
OP_LOAD_METHOD = "LOAD_METHOD"  # 3.11: NULL + bound attribute, or the function + self
OP_LIST_TO_TUPLE = "LIST_TO_TUPLE"  # 3.11; an intrinsic from 3.12 on
OP_LOAD_FAST_AND_CLEAR = "LOAD_FAST_AND_CLEAR"  # 3.12: saves a local (inlined comprehensions)
OP_LOAD_SUPER_ATTR = "LOAD_SUPER_ATTR"  # 3.12: super().name in one instruction

# Instructions that end the frame with a return.
RETURNS = ("RETURN_VALUE", "RETURN_CONST") if _PY312 else ("RETURN_VALUE",)
# Fast-local reads (liveness): instructions whose argument is a local they read.
LOCAL_READS = ("LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_AND_CLEAR", "DELETE_FAST") if _PY312 else \
    ("LOAD_FAST", "DELETE_FAST")
# Instructions of one version after which a frame may continue in a resume function (besides
# the common ones codegen/resume.py lists): they push no NULL.
RESUMABLE = (frozenset({"BINARY_SLICE", "STORE_SLICE", "CALL_INTRINSIC_1", "LOAD_FAST_CHECK"}) if _PY312
             else frozenset({"UNARY_POSITIVE", OP_LIST_TO_TUPLE}))

# Version-only opcodes the interpreter does not trace, by kind (symbolic/opcodes/unsupported.py
# gives each kind its reason).
if _PY312:
    UNSUPPORTED_OPS = {
        "LOAD_LOCALS": "class body",
        "LOAD_FROM_DICT_OR_DEREF": "class body",
        "LOAD_FROM_DICT_OR_GLOBALS": "class body",
        "CLEANUP_THROW": "throw into yield from",
        "INTERPRETER_EXIT": "internal",
        "RESERVED": "internal",
    }
else:
    UNSUPPORTED_OPS = {
        "PREP_RERAISE_STAR": "except*",
        "ASYNC_GEN_WRAP": "async",
        "LOAD_CLASSDEREF": "class body",
        "IMPORT_STAR": "import *",
        "PRINT_EXPR": "interactive",
    }

# Opcode names whose use is version knowledge: they exist in only some supported Pythons, or
# their form changes (KW_NAMES goes in 3.13).  No other module of dynamo_lite spells them, except
# as the names a handler registers for (registration is by version); the check is
# tests/unit/test_codegen_roundtrip.py::test_version_knowledge_stays_in_bytecode_compat.
VERSION_SPECIFIC_OPNAMES = _ONLY_311 | _FROM_312 | {"KW_NAMES", "JUMP_BACKWARD_NO_INTERRUPT"}
# Opcodes whose argument form differs between versions (LOAD_ATTR's method bit in 3.12,
# LOAD_GLOBAL's NULL bit, calls, jumps, MAKE_FUNCTION's flags, LOAD_CLOSURE's slot): generated
# code builds them only through the emitters below, never as a literal ``Instr(name, ...)``.
VERSION_SPECIFIC_FORMS = frozenset({
    "LOAD_ATTR", "LOAD_GLOBAL", "LOAD_CLOSURE", "CALL", "CALL_FUNCTION_EX", "MAKE_FUNCTION",
    "PUSH_NULL", "JUMP_FORWARD", "JUMP_BACKWARD", "RETURN_CONST", "COPY_FREE_VARS", "MAKE_CELL",
    "RESUME", *VERSION_SPECIFIC_OPNAMES,
})

# RESUME's argument after the YIELD_VALUE of a `yield from` (1: after a plain yield, 3: after await)
RESUME_AFTER_YIELD_FROM = 2

# The frame prologue: instructions before RESUME that set up cells (then RESUME itself).
PROLOGUE_OPS = ("COPY_FREE_VARS", "MAKE_CELL", "RESUME")

# Code flags.
CO_VARARGS = 0x04
CO_VARKEYWORDS = 0x08
CO_NESTED = 0x10
CO_GENERATOR = 0x20
CO_COROUTINE = 0x80
CO_ITERABLE_COROUTINE = 0x100
CO_ASYNC_GENERATOR = 0x200
GENERATOR_LIKE = CO_GENERATOR | CO_COROUTINE | CO_ITERABLE_COROUTINE | CO_ASYNC_GENERATOR

# MAKE_FUNCTION flag bits.
MF_DEFAULTS = 0x01
MF_KWDEFAULTS = 0x02
MF_ANNOTATIONS = 0x04
MF_CLOSURE = 0x08


# id(code) -> (weak reference to code, instructions): decoding is a large part of
# tracing time when the same functions are inlined many times (every layer of a model)
_INSTRUCTIONS: dict = {}


def instructions(code: types.CodeType) -> list[dis.Instruction]:
    """The real instructions of ``code`` (no CACHE, no EXTENDED_ARG); a new list each call.

    A jump to an instruction with EXTENDED_ARG prefixes targets the first prefix;
    its ``argval`` is moved to the real instruction, so every target is in the list.
    """
    hit = _INSTRUCTIONS.get(id(code))
    if hit is not None and hit[0]() is code:
        return list(hit[1])
    insts = _decode(code)
    if len(_INSTRUCTIONS) > 4096:
        _INSTRUCTIONS.clear()
    key = id(code)

    def forget(ref, key=key):  # the code object died: drop its entry (unless the id was reused)
        entry = _INSTRUCTIONS.get(key)
        if entry is not None and entry[0] is ref:
            del _INSTRUCTIONS[key]

    _INSTRUCTIONS[key] = (weakref.ref(code, forget), tuple(insts))
    return insts


def _decode(code: types.CodeType) -> list[dis.Instruction]:
    insts = []
    prefixed: dict[int, int] = {}  # offset of an EXTENDED_ARG -> offset of its instruction
    pending: list[int] = []
    for i in dis.get_instructions(code):
        if i.opname == "EXTENDED_ARG":
            pending.append(i.offset)
            continue
        for off in pending:
            prefixed[off] = i.offset
        pending = []
        insts.append(i)
    if prefixed:
        jumps = set(dis.hasjrel) | set(dis.hasjabs)
        insts = [i._replace(argval=prefixed[i.argval]) if i.opcode in jumps and i.argval in prefixed else i
                 for i in insts]
    return insts


def arg_names(code: types.CodeType) -> tuple[str, ...]:
    """Names of every argument slot, in frame order (positional, kw-only, *a, **k)."""
    n = code.co_argcount + code.co_kwonlyargcount
    n += bool(code.co_flags & CO_VARARGS) + bool(code.co_flags & CO_VARKEYWORDS)
    return code.co_varnames[:n]


def load_global_pushes_null(inst: dis.Instruction) -> bool:
    """LOAD_GLOBAL pushes NULL first when the low bit of its arg is set (3.11 and 3.12)."""
    return bool(inst.arg & 1)


def load_attr_is_method(inst: dis.Instruction) -> bool:
    """3.12's LOAD_ATTR with the low bit set loads a method: it pushes two values
    (the function + self, or NULL + the attribute), like 3.11's LOAD_METHOD."""
    return _PY312 and bool(inst.arg & 1)


def load_super_attr_form(inst: dis.Instruction) -> tuple:
    """3.12's LOAD_SUPER_ATTR (pops super, the class and self): (loads a method?, calls
    super with the two arguments, rather than with none as ``super()`` is written?)."""
    return bool(inst.arg & 1), bool(inst.arg & 2)


def intrinsic_name(inst: dis.Instruction) -> str:
    """The intrinsic a CALL_INTRINSIC_1/2 calls, without its prefix ('LIST_TO_TUPLE', ...)."""
    descs = dis._intrinsic_1_descs if inst.opname == "CALL_INTRINSIC_1" else dis._intrinsic_2_descs  # noqa: SLF001
    name = descs[inst.arg] if 0 <= inst.arg < len(descs) else "INVALID"
    return name[len("INTRINSIC_"):] if name.startswith("INTRINSIC_") else name


def is_stopiteration_handler(inst: dis.Instruction) -> bool:
    """The start of 3.12's catch-all handler of a generator's body, which turns a StopIteration
    leaving it into a RuntimeError and re-raises anything else unchanged (no user code)."""
    return inst.opname == "CALL_INTRINSIC_1" and intrinsic_name(inst) == "STOPITERATION_ERROR"


def is_pass_through_handler(insts: list, i: int) -> bool:
    """Does the exception handler starting at ``insts[i]`` only tidy up and re-raise, running no
    user code: 3.12's handler of an inlined comprehension (put the shadowed local back:
    SWAP / POP_TOP / STORE_FAST, then RERAISE) or of a generator's body (``is_stopiteration_handler``)?"""
    if i is None or i >= len(insts):
        return False
    if is_stopiteration_handler(insts[i]):
        return True
    while i < len(insts) and insts[i].opname in ("SWAP", "POP_TOP", "STORE_FAST"):
        i += 1
    return i < len(insts) and insts[i].opname == "RERAISE"


# An exhausted FOR_ITER jumps to its target (3.11), or past the END_FOR at its target (3.12).
FOR_ITER_EXIT_SKIP = 1 if _PY312 else 0
# When the sub-iterator of SEND returns: 3.11 pops it and pushes the value; 3.12 keeps it under
# the value (the END_SEND at the target pops it).
SEND_KEEPS_RECEIVER = _PY312


def return_value_of(inst: dis.Instruction):
    """(True, constant) for RETURN_CONST; (False, None) for RETURN_VALUE (returns TOS)."""
    if inst.opname == "RETURN_CONST":
        return True, inst.argval
    return False, None


def inlined_comprehension_loops(code: types.CodeType) -> dict:
    """3.12 inlines list/set/dict comprehensions (PEP 709) into the function that runs them:
    instruction index of each such comprehension's outer FOR_ITER -> index of its END_FOR.
    The compiler starts one with ``BUILD_LIST/SET/MAP 0; SWAP 2; FOR_ITER`` (the result goes
    under the iterator); 3.11's comprehensions are functions of their own (none here)."""
    if not _PY312:
        return {}
    insts = instructions(code)
    index = {inst.offset: n for n, inst in enumerate(insts)}
    out = {}
    for n in range(2, len(insts)):
        head, swap, build = insts[n], insts[n - 1], insts[n - 2]
        if head.opname == "FOR_ITER" and swap.opname == "SWAP" and swap.arg == 2 and \
                build.opname in ("BUILD_LIST", "BUILD_SET", "BUILD_MAP") and build.arg == 0:
            end = index.get(head.argval)
            if end is not None and insts[end].opname == "END_FOR":
                out[n] = end
    return out


def exception_table(code: types.CodeType):
    """Entries (start, end, target, depth, lasti) of the exception table (3.11, 3.12)."""
    return [
        (e.start, e.end, e.target, e.depth, e.lasti)
        for e in dis._parse_exception_table(code)  # noqa: SLF001 - stable in 3.11 and 3.12
    ]


def binary_op_name(inst: dis.Instruction) -> str:
    """The operator symbol of a BINARY_OP (e.g. '+', '+=', '@')."""
    return dis._nb_ops[inst.arg][1]  # noqa: SLF001 - stable in 3.11 and 3.12


# ---- emitters: lists of bytecode.Instr for generated code ---------------------------------
def push_null(lineno: int) -> list:
    """The NULL a call expects below a callable that is not a method."""
    return [Instr("PUSH_NULL", lineno=lineno)]


def call(nargs: int, kwnames: tuple = (), *, lineno: int) -> list:
    """Call: the stack holds NULL (or the self of ``load_method``), the callable, then
    ``nargs`` arguments, the last ``len(kwnames)`` of them passed by keyword."""
    out = [Instr(OP_KW_NAMES, tuple(kwnames), lineno=lineno)] if kwnames else []
    if not _PY312:
        out.append(Instr("PRECALL", nargs, lineno=lineno))
    out.append(Instr("CALL", nargs, lineno=lineno))
    return out


def load_method(name: str, *, lineno: int) -> list:
    """Replace TOS with what ``call_method`` needs to call its method ``name``."""
    if _PY312:
        return [Instr("LOAD_ATTR", (True, name), lineno=lineno)]
    return [Instr(OP_LOAD_METHOD, name, lineno=lineno)]


def call_method(nargs: int, *, lineno: int) -> list:
    """Call after ``load_method`` with ``nargs`` positional arguments."""
    return call(nargs, lineno=lineno)


def load_attr(name: str, *, lineno: int) -> list:
    """Replace TOS with its attribute ``name`` (a plain load, no method bit)."""
    return [Instr("LOAD_ATTR", (False, name) if _PY312 else name, lineno=lineno)]


def load_global(name: str, *, push_null: bool = False, lineno: int) -> list:
    """Push the global ``name`` (NULL first when ``push_null``: the start of a call)."""
    return [Instr("LOAD_GLOBAL", (push_null, name), lineno=lineno)]


def load_closure(var, *, lineno: int) -> list:
    """Push the cell object of ``var`` (a bytecode CellVar / FreeVar), not its contents."""
    return [Instr("LOAD_CLOSURE", var, lineno=lineno)]


def return_const(value, *, lineno: int) -> list:
    return [Instr("RETURN_CONST", value, lineno=lineno)] if _PY312 else \
        [Instr("LOAD_CONST", value, lineno=lineno), Instr("RETURN_VALUE", lineno=lineno)]


def return_as_jump(instr: Instr, label: Label, *, lineno: int) -> list:
    """A return of the original code (``RETURNS``) turned into a jump to ``label`` with the
    returned value pushed."""
    out = [Instr("LOAD_CONST", instr.arg, lineno=lineno)] if instr.name == "RETURN_CONST" else []
    return out + jump(label, lineno=lineno)


def jump(label: Label, *, backward: bool = False, lineno: int) -> list:
    """Unconditional jump; ``backward`` when ``label`` is placed before the jump."""
    return [Instr("JUMP_BACKWARD" if backward else "JUMP_FORWARD", label, lineno=lineno)]


def jump_if(truth: bool, label: Label, pop: bool = True, *, backward: bool = False,
            lineno: int) -> list:
    """Jump when TOS's truth is ``truth``.  ``pop``: TOS is popped either way; else it is
    popped only when the jump is not taken."""
    if not pop:
        if backward:
            raise ValueError("a jump that keeps its value goes forward")
        if _PY312:  # no JUMP_IF_*_OR_POP: test a copy, pop the value when not jumping
            return [Instr("COPY", 1, lineno=lineno),
                    Instr("POP_JUMP_IF_TRUE" if truth else "POP_JUMP_IF_FALSE", label, lineno=lineno),
                    Instr("POP_TOP", lineno=lineno)]
        return [Instr("JUMP_IF_TRUE_OR_POP" if truth else "JUMP_IF_FALSE_OR_POP", label, lineno=lineno)]
    if _PY312:
        if backward:  # conditional jumps go forward only: jump over a backward jump
            over = Label()
            return [Instr("POP_JUMP_IF_FALSE" if truth else "POP_JUMP_IF_TRUE", over, lineno=lineno),
                    Instr("JUMP_BACKWARD", label, lineno=lineno), over]
        return [Instr(f"POP_JUMP_IF_{'TRUE' if truth else 'FALSE'}", label, lineno=lineno)]
    direction = "BACKWARD" if backward else "FORWARD"
    return [Instr(f"POP_JUMP_{direction}_IF_{'TRUE' if truth else 'FALSE'}", label, lineno=lineno)]


def redirect_jump(instr: Instr, label: Label, *, lineno: Optional[int]) -> Instr:
    """A jump with the test of ``instr`` (a jump of the original code) to ``label``, which
    generated code places after it (a stub at the end)."""
    return Instr(forward_variant(instr.name), label, lineno=lineno)


def frame_prologue(*, n_freevars: int = 0, cells: tuple = (), lineno: int) -> list:
    """The start of a frame: copy the closure into the free slots, make the cells, RESUME."""
    out = [Instr("COPY_FREE_VARS", n_freevars, lineno=lineno)] if n_freevars else []
    out.extend(Instr("MAKE_CELL", cell, lineno=lineno) for cell in cells)
    out.append(Instr("RESUME", 0, lineno=lineno))
    return out


def is_prologue(instr: Instr) -> bool:
    """Part of the original frame prologue (``frame_prologue``'s instructions)."""
    return instr.name in PROLOGUE_OPS


def ends_prologue(instr: Instr) -> bool:
    return instr.name == "RESUME"


def make_function(*, defaults: bool = False, kwdefaults: bool = False, annotations: bool = False,
                  closure: bool = False, lineno: int) -> list:
    """MAKE_FUNCTION over the values pushed before the code object, in flag order:
    defaults tuple, kw-only defaults dict, annotations, closure tuple."""
    flags = (MF_DEFAULTS if defaults else 0) | (MF_KWDEFAULTS if kwdefaults else 0) | \
        (MF_ANNOTATIONS if annotations else 0) | (MF_CLOSURE if closure else 0)
    return [Instr("MAKE_FUNCTION", flags, lineno=lineno)]


# ---- stack effects -------------------------------------------------------------------------
def stack_effect(instr: Instr, jump: Optional[bool] = None) -> int:
    """Net stack effect of ``instr`` (``dis.stack_effect``); ``jump`` as there."""
    return instr.stack_effect(jump=jump)


_CALLS = frozenset({"CALL", "CALL_FUNCTION_EX"})  # the only instructions that pop a NULL


def nulls_after(instr: Instr, nulls: tuple) -> Optional[tuple]:
    """Per stack slot after ``instr`` ran (not jumping), True where it holds NULL, given the
    same before it; None where that is not modelled (an instruction that may push NULL).

    Only calls consume a NULL: every call pops the NULL slot below its callable and pushes
    one result.  Other instructions pop no NULL and push none, except LOAD_GLOBAL with the
    NULL bit, LOAD_METHOD and (3.12) method loads by LOAD_ATTR / LOAD_SUPER_ATTR (not modelled), so their effect on the slots is the net effect.
    """
    effect = stack_effect(instr, jump=False)
    if instr.name in _CALLS:
        # CALL n pops NULL-or-self, the callable and n arguments (dis gives PRECALL a share
        # of that effect, but PRECALL pops nothing at run time)
        pops = instr.arg + 2 if instr.name == "CALL" else 1 - effect
        if pops > len(nulls):
            return None
        return nulls[:len(nulls) - pops] + (False,)
    if instr.name in ("LOAD_GLOBAL", OP_LOAD_METHOD, OP_LOAD_SUPER_ATTR) or \
            (instr.name == "LOAD_ATTR" and isinstance(instr.arg, tuple) and instr.arg[0]):
        return None
    if effect >= 0:
        return nulls + (False,) * effect
    if -effect > len(nulls):
        return None
    return nulls[:len(nulls) + effect]
