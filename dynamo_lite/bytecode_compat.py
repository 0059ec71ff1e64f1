"""What differs between Python versions, in one place.

Nothing else in dynamo_lite checks ``sys.version_info``, spells an opcode that exists in only
some supported Pythons (``VERSION_SPECIFIC_OPNAMES``; the handler modules of symbolic/opcodes
name the opcodes they handle, and registration is by version) or builds an instruction whose
argument form differs by version (``VERSION_SPECIFIC_FORMS``) other than through the emitters
here; the check is tests/unit/test_codegen_roundtrip.py::test_version_knowledge_stays_in_bytecode_compat.
Supported: CPython 3.11, 3.12 and 3.13 (the C side: csrc/cpython_compat.h).  What it knows:

- opcode names by version: ``OPNAMES`` (the running Python's real opcodes; 3.12's dis.opmap
  also lists pseudo and instrumented ones), ``KNOWN_OPNAMES`` (every supported Python's),
  ``has_opcode``; ``OP_*`` names of the opcodes only some versions have (3.13's CALL_KW,
  TO_BOOL, SET_FUNCTION_ATTRIBUTE; 3.11/3.12's KW_NAMES, LOAD_CLOSURE, FORMAT_VALUE...);
- opcode tables for the symbolic interpreter's handlers: ``NOOPS``,
  ``CONDITIONAL_JUMPS`` (opname -> pops?, jump when truthy?, test kind),
  ``UNCONDITIONAL_JUMPS``, ``BACKWARD_JUMPS``, ``CALL_PREFIX`` (the
  instructions before a CALL that belong to it), ``OP_KW_NAMES``,
  ``OP_LOAD_METHOD``, ``OP_LIST_TO_TUPLE``, ``OP_LOAD_SUPER_ATTR``, ``RETURNS``,
  ``LOCAL_READS``, ``RESUMABLE``, ``UNSUPPORTED_OPS`` (version-only opcodes the
  interpreter refuses, by kind); ``MATCH_CLASS_NOT_A_CLASS`` (an error message of MATCH_CLASS);
- code flags (``CO_*``) and MAKE_FUNCTION flag bits (``MF_*``);
- decoding for the interpreter: ``instructions`` (``Instruction``s, dis's fields and values, without
  CACHE/EXTENDED_ARG), ``exception_table``, ``binary_op_name``, ``starts_line``,
  ``load_global_pushes_null``, ``load_attr_is_method`` (3.12's method bit), ``with_null`` /
  ``call_operands`` (where a call's NULL is: below the callable until 3.12, above it in 3.13),
  ``compare_to_bool``, ``make_function_flags``, ``resume_kind``, ``END_FOR_POPS``,
  ``local_reads`` / ``local_writes`` (3.13's LOAD_FAST_LOAD_FAST and the like),
  ``load_super_attr_form``, ``intrinsic_name``, ``return_value_of``,
  ``FOR_ITER_EXIT_SKIP`` (3.12 jumps past END_FOR), ``SEND_KEEPS_RECEIVER``,
  ``inlined_comprehension_loops`` (PEP 709), ``is_pass_through_handler``, ``arg_names``;
- emitters for generated code, each returning a list of ``bytecode.Instr``:
  ``push_null``, ``null_before_callable`` / ``null_after_callable``, ``call`` (n positional
  arguments, the last ones by keyword; 3.11 adds PRECALL; 3.13: CALL_KW),
  ``load_method`` / ``call_method`` (3.12: ``LOAD_ATTR (True, name)``),
  ``load_attr``, ``load_global``, ``load_closure``, ``return_const``, ``return_as_jump``,
  ``jump``, ``jump_if`` (by truth; 3.12's conditional jumps go forward only and never keep
  their value; 3.13's need an exact bool: TO_BOOL first), ``redirect_jump`` (same test, new
  target), ``before_entry`` / ``fused_truth_test`` (entering the original code at a test of
  truth in 3.13), ``frame_prologue`` (COPY_FREE_VARS, MAKE_CELL, RESUME), ``make_function``
  (named flags; 3.13: SET_FUNCTION_ATTRIBUTE), ``mark_cell_loads`` (3.13's closure loads
  of argument cells); ``is_prologue`` / ``ends_prologue`` recognise the original prologue;
- stack effects: ``stack_effect`` (``dis.stack_effect`` through
  ``bytecode.Instr``) and ``nulls_after`` (which stack slots hold NULL after an
  instruction: only calls consume NULL, only the NULL-pushing loads make one).

The boundary between the two instruction representations: the symbolic
interpreter (symbolic/translator.py and its handlers) steps over the
``Instruction`` list of ``instructions(code)``; everything in codegen/
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

import collections
import dis
import opcode
import sys
import types
import weakref
from typing import Optional

from bytecode import CellVar, Instr, Label

_VERSION = sys.version_info[:2]
SUPPORTED = _VERSION in ((3, 11), (3, 12), (3, 13))
PY_VERSION = "%d.%d" % _VERSION
_PY312 = _VERSION >= (3, 12)
_PY313 = _VERSION >= (3, 13)

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
# Real opcodes of 3.11 and 3.12 that 3.13 removed (LOAD_CLOSURE is a pseudo-instruction there:
# the compiler turns it into LOAD_FAST of the cell's slot) ...
_UNTIL_312 = frozenset({"FORMAT_VALUE", "KW_NAMES", "LOAD_CLOSURE"})
# ... and the ones it added (ENTER_EXECUTOR and EXIT_INIT_CHECK never appear in a code object's
# own bytecode: the specialising interpreter writes them)
_FROM_313 = frozenset({
    "CALL_KW", "CONVERT_VALUE", "ENTER_EXECUTOR", "EXIT_INIT_CHECK", "FORMAT_SIMPLE", "FORMAT_WITH_SPEC",
    "LOAD_FAST_LOAD_FAST", "SET_FUNCTION_ATTRIBUTE", "STORE_FAST_LOAD_FAST", "STORE_FAST_STORE_FAST",
    "TO_BOOL",
})
_MIN_NOT_REAL = min(getattr(opcode, "MIN_INSTRUMENTED_OPCODE", 256), 256)
# the real opcodes of the running Python (what a code object can hold)
OPNAMES = frozenset(name for name, op in dis.opmap.items() if op < _MIN_NOT_REAL)
# every real opcode name of a supported Python
KNOWN_OPNAMES = OPNAMES | _ONLY_311 | _FROM_312 | _UNTIL_312 | _FROM_313


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


# Instructions that start a call sequence (3.11: [KW_NAMES] PRECALL CALL; 3.12: [KW_NAMES] CALL;
# 3.13: CALL, or CALL_KW after the LOAD_CONST of the keyword names, a value on the stack).
CALL_PREFIX = () if _PY313 else ("KW_NAMES",) if _PY312 else ("KW_NAMES", "PRECALL")
OP_KW_NAMES = "KW_NAMES"  # (3.11, 3.12) sets the keyword names of the next CALL
OP_CALL_KW = "CALL_KW"  # (3.13) a call whose keyword names are a tuple on top of the stack
OP_LOAD_METHOD = "LOAD_METHOD"  # 3.11: NULL + bound attribute, or the function + self
OP_LIST_TO_TUPLE = "LIST_TO_TUPLE"  # 3.11; an intrinsic from 3.12 on
OP_LOAD_FAST_AND_CLEAR = "LOAD_FAST_AND_CLEAR"  # 3.12: saves a local (inlined comprehensions)
OP_LOAD_SUPER_ATTR = "LOAD_SUPER_ATTR"  # 3.12: super().name in one instruction
OP_LOAD_CLOSURE = "LOAD_CLOSURE"  # 3.11, 3.12: the cell object of a cell / free variable
OP_FORMAT_VALUE = "FORMAT_VALUE"  # 3.11, 3.12: one f-string field (3.13: CONVERT_VALUE + FORMAT_*)
OP_TO_BOOL = "TO_BOOL"  # 3.13: bool(TOS), before a conditional jump or `not`
OP_SET_FUNCTION_ATTRIBUTE = "SET_FUNCTION_ATTRIBUTE"  # 3.13: MAKE_FUNCTION's flags, one at a time
# The instructions that make a function object (a class body made of plain statements has them).
MAKE_FUNCTION_OPS = ("MAKE_FUNCTION", OP_SET_FUNCTION_ATTRIBUTE) if _PY313 else ("MAKE_FUNCTION",)
# The instruction that pushes a cell object for a closure tuple (3.13: LOAD_FAST of the cell's slot).
CLOSURE_LOAD_OP = "LOAD_FAST" if _PY313 else OP_LOAD_CLOSURE
# (3.13) LOAD_FAST of a cell or free variable's slot pushes the cell itself (what LOAD_CLOSURE
# did): after MAKE_CELL / COPY_FREE_VARS a cell's slot holds only the cell.
LOAD_FAST_OF_CELL_IS_CLOSURE = _PY313
# classmethod.__get__ chains to the wrapped object's __get__ (``@classmethod @property``) before 3.13
CLASSMETHOD_CHAINS_DESCRIPTORS = not _PY313

# Instructions that only move values between locals and the stack, or jump: code made of these
# alone does no work a graph could capture (frame_code.iteration_start).
VALUE_MOVES = frozenset({
    "NOP", "RESUME", "CACHE", "EXTENDED_ARG", "LOAD_FAST", "LOAD_CONST", "STORE_FAST", "POP_TOP", "COPY", "SWAP",
    "PUSH_NULL", "JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT",
    *(("LOAD_FAST_CHECK",) if _PY312 else ()),
    *(("LOAD_FAST_LOAD_FAST", "STORE_FAST_LOAD_FAST", "STORE_FAST_STORE_FAST") if _PY313 else ()),
})
# Instructions that end the frame with a return.
RETURNS = ("RETURN_VALUE", "RETURN_CONST") if _PY312 else ("RETURN_VALUE",)
# Fast-local reads (liveness): instructions whose argument is a local they read (3.13's
# superinstructions read and write several: ``local_reads`` / ``local_writes``).
LOCAL_READS = ("LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_AND_CLEAR", "DELETE_FAST") if _PY312 else \
    ("LOAD_FAST", "DELETE_FAST")


def local_reads(instr) -> tuple:
    """Names of the fast locals a ``bytecode.Instr`` reads, as liveness sees it (a local read
    after the instruction assigned it is not a read of the value before it).  A load of a cell's
    slot (3.13's closure loads, arg a CellVar / FreeVar) reads no fast local."""
    name, arg = instr.name, instr.arg
    if name in LOCAL_READS:
        return (arg,) if isinstance(arg, str) else ()
    if name == "LOAD_FAST_LOAD_FAST":
        return tuple(arg)
    if name == "STORE_FAST_LOAD_FAST":
        return () if arg[1] == arg[0] else (arg[1],)
    return ()


def local_writes(instr) -> tuple:
    """Names of the fast locals a ``bytecode.Instr`` (or an ``Instruction``) assigns."""
    name = getattr(instr, "name", None) or instr.opname
    arg = instr.arg if hasattr(instr, "name") else instr.argval
    if name == "STORE_FAST":
        return (arg,)
    if name == "STORE_FAST_LOAD_FAST":
        return (arg[0],)
    if name == "STORE_FAST_STORE_FAST":
        return tuple(arg)
    return ()


# Instructions of one version after which a frame may continue in a resume function (besides
# the common ones codegen/resume.py lists): they push no NULL.
if _PY313:
    RESUMABLE = frozenset({
        "BINARY_SLICE", "STORE_SLICE", "CALL_INTRINSIC_1", "LOAD_FAST_CHECK", "CALL_KW", "TO_BOOL",
        "CONVERT_VALUE", "FORMAT_SIMPLE", "FORMAT_WITH_SPEC", "LOAD_FAST_LOAD_FAST",
        "STORE_FAST_LOAD_FAST", "STORE_FAST_STORE_FAST", "SET_FUNCTION_ATTRIBUTE",
    })
elif _PY312:
    RESUMABLE = frozenset({"BINARY_SLICE", "STORE_SLICE", "CALL_INTRINSIC_1", "LOAD_FAST_CHECK", OP_FORMAT_VALUE})
else:
    RESUMABLE = frozenset({"UNARY_POSITIVE", OP_LIST_TO_TUPLE, OP_FORMAT_VALUE})

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
    if _PY313:
        UNSUPPORTED_OPS.update({"ENTER_EXECUTOR": "internal", "EXIT_INIT_CHECK": "internal"})
else:
    UNSUPPORTED_OPS = {
        "PREP_RERAISE_STAR": "except*",
        "ASYNC_GEN_WRAP": "async",
        "LOAD_CLASSDEREF": "class body",
        "IMPORT_STAR": "import *",
        "PRINT_EXPR": "interactive",
    }

# MATCH_CLASS's TypeError when the pattern's name is not a class (3.11 says "type")
MATCH_CLASS_NOT_A_CLASS = "called match pattern must be a class" if _PY312 else "called match pattern must be a type"

# Opcode names whose use is version knowledge: they exist in only some supported Pythons.  No
# other module of dynamo_lite spells them, except as the names a handler registers for
# (registration is by version); the check is
# tests/unit/test_codegen_roundtrip.py::test_version_knowledge_stays_in_bytecode_compat.
VERSION_SPECIFIC_OPNAMES = _ONLY_311 | _FROM_312 | _UNTIL_312 | _FROM_313 | {"JUMP_BACKWARD_NO_INTERRUPT"}
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


def resume_kind(inst) -> int:
    """Where a RESUME is (0: start, 1: after yield, 2: after yield from, 3: after await); 3.13
    adds a bit for the exception depth above these."""
    return inst.arg & 3

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



def entry_stack_depth(flags: int) -> int:
    """Values on the stack when a frame of code with these flags starts running its
    instructions: a generator's frame in 3.11 and 3.12 starts with one (the value its first
    POP_TOP drops; the compiler counts the stack without RETURN_GENERATOR), 3.13's RETURN_GENERATOR
    pushes it itself."""
    return 1 if not _PY313 and flags & GENERATOR_LIKE else 0


# MAKE_FUNCTION flag bits.
MF_DEFAULTS = 0x01
MF_KWDEFAULTS = 0x02
MF_ANNOTATIONS = 0x04
MF_CLOSURE = 0x08


# id(code) -> (weak reference to code, instructions): decoding is a large part of
# tracing time when the same functions are inlined many times (every layer of a model)
_INSTRUCTIONS: dict = {}


def instructions(code: types.CodeType) -> list:
    """The real instructions of ``code`` (no CACHE, no EXTENDED_ARG) as ``Instruction``s; a new
    list each call.

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


# One decoded instruction: the fields of ``dis.Instruction`` that dynamo_lite reads, with the
# same values ``dis.get_instructions`` gives them on the running Python (3.13's ``starts_line``
# is a bool and the number is ``line_number``; 3.11 and 3.12 have no ``line_number``).  Not
# filled: ``argrepr`` and the jump-target / label / cache fields, which nothing here reads and
# which cost most of dis's time (its per-instruction work is about twice 3.11's on 3.13).
Instruction = collections.namedtuple(
    "Instruction", ("opname", "opcode", "arg", "argval", "offset", "starts_line", "line_number", "positions")
    if _PY313 else ("opname", "opcode", "arg", "argval", "offset", "starts_line", "positions"))

# How an argument becomes ``argval``, by opcode (dis's rules on the running Python).
(_A_RAW, _A_CONST, _A_UNKNOWN, _A_NAME, _A_NAME_SHR1, _A_NAME_SHR2, _A_JREL, _A_JBACK, _A_JABS,
 _A_LOCAL, _A_LOCAL_PAIR, _A_COMPARE, _A_FORMAT, _A_CONVERT) = range(14)


def _arg_kinds() -> tuple:
    kinds = [_A_RAW] * 256
    caches = [0] * 256
    has_arg = [False] * 256
    for op in (dis.hasarg if hasattr(dis, "hasarg") else range(dis.HAVE_ARGUMENT, 256)):
        if op < 256:
            has_arg[op] = True
    entries = opcode._inline_cache_entries  # noqa: SLF001 - a list by opcode (3.11, 3.12), a dict by name (3.13)
    for op in range(256):
        name = dis.opname[op]
        caches[op] = entries.get(name, 0) if isinstance(entries, dict) else entries[op]
        if op in dis.hasconst:
            kinds[op] = _A_CONST if (_PY312 or name == "LOAD_CONST") else _A_UNKNOWN
        elif op in dis.hasname:
            kinds[op] = (_A_NAME_SHR1 if name == "LOAD_GLOBAL" or (_PY312 and name == "LOAD_ATTR")
                         else _A_NAME_SHR2 if name == "LOAD_SUPER_ATTR" else _A_NAME)
        elif op in dis.hasjabs:
            kinds[op] = _A_JABS
        elif op in dis.hasjrel:
            kinds[op] = _A_JBACK if "JUMP_BACKWARD" in name else _A_JREL
        elif name in ("LOAD_FAST_LOAD_FAST", "STORE_FAST_LOAD_FAST", "STORE_FAST_STORE_FAST"):
            kinds[op] = _A_LOCAL_PAIR
        elif op in dis.haslocal or op in dis.hasfree:
            kinds[op] = _A_LOCAL
        elif op in dis.hascompare:
            kinds[op] = _A_COMPARE
        elif name == "FORMAT_VALUE":
            kinds[op] = _A_FORMAT
        elif name == "CONVERT_VALUE":
            kinds[op] = _A_CONVERT
    return tuple(kinds), tuple(caches), tuple(has_arg)


_ARG_KIND, _CACHE_UNITS, _HAS_ARG = _arg_kinds()
_COMPARE_SHIFT = 5 if _PY313 else 4 if _PY312 else 0
_JUMP_OVER_CACHES = _PY312  # 3.12+: a relative jump counts from after the instruction's caches
_FORMAT_CONVERTERS = (None, str, repr, ascii)
_EXTENDED_ARG = dis.opmap["EXTENDED_ARG"]
_OPNAME = tuple(dis.opname[:256])
_Positions = dis.Positions


def _decode(code: types.CodeType) -> list:
    """``dis.get_instructions(code)`` without its EXTENDED_ARGs and CACHEs, as ``Instruction``s:
    one pass over the code with the argument rules tabled by opcode (tested field by field
    against dis: tests/unit/test_decode.py)."""
    raw = code.co_code
    positions = list(code.co_positions())
    linestarts = dict(dis.findlinestarts(code))
    consts, names = code.co_consts, code.co_names
    varname = code._varname_from_oparg  # noqa: SLF001 - what dis itself uses for locals and cells
    kinds, caches, has_arg = _ARG_KIND, _CACHE_UNITS, _HAS_ARG
    insts = []
    prefixed: dict[int, int] = {}  # offset of an EXTENDED_ARG -> offset of its instruction
    pending: list[int] = []
    extended = 0
    line_number = None
    offset, end = 0, len(raw)
    while offset < end:
        op = raw[offset]
        if _PY313 and offset in linestarts:
            line_number = linestarts[offset]
        if has_arg[op]:
            arg = raw[offset + 1] | extended
        else:
            arg = None
        if op == _EXTENDED_ARG:
            extended = arg << 8
            if extended >= 2**31:  # the argument is a signed int: it wraps, as in dis
                extended -= 2**32
            pending.append(offset)
            offset += 2
            continue
        extended = 0
        if pending:
            for off in pending:
                prefixed[off] = offset
            pending = []
        kind = kinds[op]
        if arg is None or kind == _A_RAW:
            argval = arg
        elif kind == _A_LOCAL:
            argval = varname(arg)
        elif kind == _A_CONST:
            argval = consts[arg]
        elif kind == _A_NAME:
            argval = names[arg]
        elif kind == _A_NAME_SHR1:
            argval = names[arg >> 1]
        elif kind == _A_JREL:
            argval = offset + 2 + arg * 2 + (2 * caches[op] if _JUMP_OVER_CACHES else 0)
        elif kind == _A_JBACK:
            argval = offset + 2 - arg * 2 + (2 * caches[op] if _JUMP_OVER_CACHES else 0)
        elif kind == _A_COMPARE:
            argval = dis.cmp_op[arg >> _COMPARE_SHIFT]
        elif kind == _A_LOCAL_PAIR:
            argval = (varname(arg >> 4), varname(arg & 15))
        elif kind == _A_NAME_SHR2:
            argval = names[arg >> 2]
        elif kind == _A_JABS:
            argval = arg * 2
        elif kind == _A_FORMAT:
            argval = (_FORMAT_CONVERTERS[arg & 3], bool(arg & 4))
        elif kind == _A_CONVERT:
            argval = _FORMAT_CONVERTERS[arg]
        else:  # _A_UNKNOWN: 3.11's KW_NAMES, whose constant dis does not resolve
            argval = dis.UNKNOWN
        pos = _Positions(*positions[offset >> 1])
        if _PY313:
            insts.append(Instruction(_OPNAME[op], op, arg, argval, offset, offset in linestarts, line_number, pos))
        else:
            insts.append(Instruction(_OPNAME[op], op, arg, argval, offset, linestarts.get(offset), pos))
        offset += 2 + 2 * caches[op]
    if prefixed:
        jumps = set(dis.hasjrel) | set(dis.hasjabs)
        insts = [i._replace(argval=prefixed[i.argval]) if i.opcode in jumps and i.argval in prefixed else i
                 for i in insts]
    return insts


def starts_line(inst: Instruction) -> Optional[int]:
    """The line number an ``Instruction`` starts, or None (3.13's ``starts_line`` is a bool
    and the number is ``line_number``)."""
    if _PY313:
        return inst.line_number if inst.starts_line else None
    return inst.starts_line


def arg_names(code: types.CodeType) -> tuple[str, ...]:
    """Names of every argument slot, in frame order (positional, kw-only, *a, **k)."""
    n = code.co_argcount + code.co_kwonlyargcount
    n += bool(code.co_flags & CO_VARARGS) + bool(code.co_flags & CO_VARKEYWORDS)
    return code.co_varnames[:n]


def load_global_pushes_null(inst: Instruction) -> bool:
    """LOAD_GLOBAL pushes NULL first when the low bit of its arg is set (3.11 and 3.12)."""
    return bool(inst.arg & 1)


def load_attr_is_method(inst: Instruction) -> bool:
    """3.12's LOAD_ATTR with the low bit set loads a method: it pushes two values
    (the function + self, or NULL + the attribute), like 3.11's LOAD_METHOD."""
    return _PY312 and bool(inst.arg & 1)


def with_null(value, null) -> tuple:
    """The two stack slots of a callable loaded for a call with no self, bottom first: NULL below
    the callable (3.11, 3.12: PUSH_NULL, LOAD_GLOBAL's and LOAD_ATTR's NULL bit), or above it (3.13)."""
    return (value, null) if _PY313 else (null, value)


def call_operands(items: list, is_null) -> tuple:
    """(callable, arguments) of a call whose stack is ``items``: the two slots below the
    arguments, then the arguments.  3.11 and 3.12 have ``NULL, callable`` or ``method, self``;
    3.13 has ``callable, NULL`` or ``method, self``; a self is the first argument."""
    first, second, args = items[0], items[1], list(items[2:])
    if _PY313:
        return (first, args) if is_null(second) else (first, [second, *args])
    return (second, args) if is_null(first) else (first, [second, *args])


def compare_to_bool(inst: Instruction) -> bool:
    """3.13's COMPARE_OP with bit 16 of its argument converts its result to bool (the compiler
    sets it before a conditional jump, which needs an exact bool)."""
    return _PY313 and bool(inst.arg & 16)


def make_function_flags(inst: Instruction) -> int:
    """The ``MF_*`` flags of a MAKE_FUNCTION: which values it pops below the code object (3.13:
    none; SET_FUNCTION_ATTRIBUTE sets each afterwards, its argument one flag)."""
    return 0 if _PY313 else inst.arg


def load_super_attr_form(inst: Instruction) -> tuple:
    """3.12's LOAD_SUPER_ATTR (pops super, the class and self): (loads a method?, calls
    super with the two arguments, rather than with none as ``super()`` is written?)."""
    return bool(inst.arg & 1), bool(inst.arg & 2)


def intrinsic_name(inst: Instruction) -> str:
    """The intrinsic a CALL_INTRINSIC_1/2 calls, without its prefix ('LIST_TO_TUPLE', ...)."""
    descs = dis._intrinsic_1_descs if inst.opname == "CALL_INTRINSIC_1" else dis._intrinsic_2_descs  # noqa: SLF001
    name = descs[inst.arg] if 0 <= inst.arg < len(descs) else "INVALID"
    return name[len("INTRINSIC_"):] if name.startswith("INTRINSIC_") else name


def is_stopiteration_handler(inst: Instruction) -> bool:
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


# An exhausted FOR_ITER pops the iterator and jumps to its target (3.11), past the END_FOR at its
# target (3.12), or past the END_FOR and the POP_TOP after it (3.13): by this many instructions.
FOR_ITER_EXIT_SKIP = 2 if _PY313 else 1 if _PY312 else 0
# Values END_FOR pops (3.12: the iterator and the value; 3.13: one, a POP_TOP follows).
END_FOR_POPS = 1 if _PY313 else 2
# When the sub-iterator of SEND returns: 3.11 pops it and pushes the value; 3.12 keeps it under
# the value (the END_SEND at the target pops it).
SEND_KEEPS_RECEIVER = _PY312


def return_value_of(inst: Instruction):
    """(True, constant) for RETURN_CONST; (False, None) for RETURN_VALUE (returns TOS)."""
    if inst.opname == "RETURN_CONST":
        return True, inst.argval
    return False, None


def inlined_comprehension_loops(code: types.CodeType) -> dict:
    """3.12 inlines list/set/dict comprehensions (PEP 709) into the function that runs them:
    instruction index of each such comprehension's outer FOR_ITER -> index of the last
    instruction of its loop's end, which its exhausted FOR_ITER skips (END_FOR; 3.13: the
    POP_TOP after it).  The compiler starts one with ``BUILD_LIST/SET/MAP 0; SWAP 2; FOR_ITER``
    (the result goes under the iterator); 3.11's comprehensions are functions of their own (none here)."""
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
                last = end + FOR_ITER_EXIT_SKIP - 1
                if last < len(insts) and (last == end or insts[last].opname == "POP_TOP"):
                    out[n] = last
    return out


def exception_table(code: types.CodeType):
    """Entries (start, end, target, depth, lasti) of the exception table (3.11, 3.12)."""
    return [
        (e.start, e.end, e.target, e.depth, e.lasti)
        for e in dis._parse_exception_table(code)  # noqa: SLF001 - stable in 3.11 and 3.12
    ]


def binary_op_name(inst: Instruction) -> str:
    """The operator symbol of a BINARY_OP (e.g. '+', '+=', '@')."""
    return dis._nb_ops[inst.arg][1]  # noqa: SLF001 - stable in 3.11 and 3.12


def mark_cell_loads(items: list, code: types.CodeType) -> list:
    """(3.13) ``bytecode`` gives a closure load of an argument's cell (LOAD_FAST of its slot) as
    ``LOAD_FAST 'name'``, like a plain local: make its argument a ``CellVar`` (the same code), so
    liveness does not take it for a read of the local and rewrites that turn the frame's cells
    into free variables see it.  Other Pythons' items are returned unchanged."""
    if not _PY313 or not code.co_cellvars:
        return items
    cells = set(code.co_cellvars)
    for n, x in enumerate(items):
        if isinstance(x, Instr) and x.name == "LOAD_FAST" and isinstance(x.arg, str) and x.arg in cells:
            items[n] = Instr("LOAD_FAST", CellVar(x.arg), location=x.location)
    return items


# ---- emitters: lists of bytecode.Instr for generated code ---------------------------------
def push_null(lineno: int) -> list:
    """A NULL stack slot (where the trace's stack has one: ``with_null`` gives its place)."""
    return [Instr("PUSH_NULL", lineno=lineno)]


def null_before_callable(lineno: int) -> list:
    """What goes before the callable of a call with no self: NULL (3.11, 3.12), nothing (3.13)."""
    return [] if _PY313 else [Instr("PUSH_NULL", lineno=lineno)]


def null_after_callable(lineno: int) -> list:
    """What goes after the callable of a call with no self: nothing (3.11, 3.12), NULL (3.13)."""
    return [Instr("PUSH_NULL", lineno=lineno)] if _PY313 else []


def call(nargs: int, kwnames: tuple = (), *, lineno: int) -> list:
    """Call: the stack holds the callable and NULL (``null_before_callable`` /
    ``null_after_callable``; or what ``load_method`` left), then ``nargs`` arguments, the last
    ``len(kwnames)`` of them passed by keyword."""
    if _PY313:
        if kwnames:
            return [Instr("LOAD_CONST", tuple(kwnames), lineno=lineno), Instr(OP_CALL_KW, nargs, lineno=lineno)]
        return [Instr("CALL", nargs, lineno=lineno)]
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
    """Push the global ``name`` (with the NULL of a call when ``push_null``: below it until 3.12,
    above it in 3.13)."""
    return [Instr("LOAD_GLOBAL", (push_null, name), lineno=lineno)]


def load_closure(var, *, lineno: int) -> list:
    """Push the cell object of ``var`` (a bytecode CellVar / FreeVar), not its contents
    (3.13: LOAD_FAST of the cell's slot)."""
    return [Instr(CLOSURE_LOAD_OP, var, lineno=lineno)]


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


def _to_bool(lineno: int) -> list:
    """3.13's conditional jumps test an exact bool (an int 0 does not jump): convert first."""
    return [Instr(OP_TO_BOOL, lineno=lineno)] if _PY313 else []


def jump_if(truth: bool, label: Label, pop: bool = True, *, backward: bool = False,
            lineno: int) -> list:
    """Jump when TOS's truth is ``truth`` (any value: 3.13 converts it to bool first).  ``pop``:
    TOS is popped either way; else it is popped only when the jump is not taken."""
    if not pop:
        if backward:
            raise ValueError("a jump that keeps its value goes forward")
        if _PY312:  # no JUMP_IF_*_OR_POP: test a copy, pop the value when not jumping
            return [Instr("COPY", 1, lineno=lineno), *_to_bool(lineno),
                    Instr("POP_JUMP_IF_TRUE" if truth else "POP_JUMP_IF_FALSE", label, lineno=lineno),
                    Instr("POP_TOP", lineno=lineno)]
        return [Instr("JUMP_IF_TRUE_OR_POP" if truth else "JUMP_IF_FALSE_OR_POP", label, lineno=lineno)]
    if _PY312:
        if backward:  # conditional jumps go forward only: jump over a backward jump
            over = Label()
            return [*_to_bool(lineno),
                    Instr("POP_JUMP_IF_FALSE" if truth else "POP_JUMP_IF_TRUE", over, lineno=lineno),
                    Instr("JUMP_BACKWARD", label, lineno=lineno), over]
        return [*_to_bool(lineno), Instr(f"POP_JUMP_IF_{'TRUE' if truth else 'FALSE'}", label, lineno=lineno)]
    direction = "BACKWARD" if backward else "FORWARD"
    return [Instr(f"POP_JUMP_{direction}_IF_{'TRUE' if truth else 'FALSE'}", label, lineno=lineno)]


def redirect_jump(instr: Instr, label: Label, *, lineno: Optional[int]) -> Instr:
    """A jump with the test of ``instr`` (a jump of the original code) to ``label``, which
    generated code places after it (a stub at the end)."""
    return Instr(forward_variant(instr.name), label, lineno=lineno)


def tests_truth(name: str) -> bool:
    """Does the instruction take the truth of TOS, which 3.13 requires to be an exact bool
    (made by a TO_BOOL or COMPARE_OP's bool bit before it)?  The conditional jumps by truth and
    UNARY_NOT; in 3.11 and 3.12 they convert any value themselves."""
    return name == "UNARY_NOT" or CONDITIONAL_JUMPS.get(name, (None, None, None))[2] == "bool"


def before_entry(name: str, *, lineno: int) -> list:
    """Instructions that generated code runs just before it jumps into the original code at an
    instruction ``name`` with the stack the trace had there: 3.13 converts TOS to the exact bool
    a test of its truth needs (``tests_truth``); the trace's value there may be a tensor or an
    object that an original COMPARE_OP with its bool bit would have converted."""
    return _to_bool(lineno) if _PY313 and tests_truth(name) else []


def fused_truth_test(names: list, k: int) -> int:
    """The index of the instruction whose successors follow a graph break at ``k``: k itself,
    or (3.13) the conditional jump after a TO_BOOL at k, which tests the bool it makes, so
    that a break at the TO_BOOL continues in one resume function per branch, as a break at
    the jump of 3.11 / 3.12 does."""
    if _PY313 and names[k] == OP_TO_BOOL and k + 1 < len(names) and names[k + 1] in CONDITIONAL_JUMPS:
        return k + 1
    return k


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
    defaults tuple, kw-only defaults dict, annotations, closure tuple (3.13: MAKE_FUNCTION of
    the code alone, then one SET_FUNCTION_ATTRIBUTE per value, the last pushed first)."""
    flags = (MF_DEFAULTS if defaults else 0) | (MF_KWDEFAULTS if kwdefaults else 0) | \
        (MF_ANNOTATIONS if annotations else 0) | (MF_CLOSURE if closure else 0)
    if _PY313:
        out = [Instr("MAKE_FUNCTION", lineno=lineno)]
        for flag in (MF_CLOSURE, MF_ANNOTATIONS, MF_KWDEFAULTS, MF_DEFAULTS):
            if flags & flag:
                out.append(Instr(OP_SET_FUNCTION_ATTRIBUTE, flag, lineno=lineno))
        return out
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
    if instr.name == OP_CALL_KW:  # pops the keyword names too
        pops = instr.arg + 3
        if pops > len(nulls):
            return None
        return nulls[:len(nulls) - pops] + (False,)
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
