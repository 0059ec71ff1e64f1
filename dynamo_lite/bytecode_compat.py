"""What differs between Python versions, in one place.

Nothing else in dynamo_lite checks ``sys.version_info``.  Today only CPython
3.11 is supported; the tables below name the 3.11 opcodes the interpreter and
code generator rely on, so a port to 3.12 changes this module first.
Tested by tests/unit/test_codegen_roundtrip.py.
"""
from __future__ import annotations

import dis
import sys
import types
import weakref

SUPPORTED = sys.version_info[:2] == (3, 11)
PY_VERSION = "%d.%d" % sys.version_info[:2]

# Opcodes that do nothing to the symbolic state.
NOOPS = frozenset({"NOP", "RESUME", "CACHE", "EXTENDED_ARG", "PRECALL"})

# Conditional jumps: opname -> (pops the value?, jump when truthy?, test kind).
# test kind: "bool" (truthiness) or "none" (is None).
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
BACKWARD_JUMPS = frozenset(n for n in dis.opmap if "BACKWARD" in n)

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


# Instructions that start a call sequence (3.11: [KW_NAMES] PRECALL CALL).
CALL_PREFIX = ("KW_NAMES", "PRECALL")

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
    """3.11 LOAD_GLOBAL pushes NULL first when the low bit of its arg is set."""
    return bool(inst.arg & 1)


def exception_table(code: types.CodeType):
    """Entries (start, end, target, depth, lasti) of the 3.11 exception table."""
    return [
        (e.start, e.end, e.target, e.depth, e.lasti)
        for e in dis._parse_exception_table(code)  # noqa: SLF001 - stable in 3.11
    ]


def binary_op_name(inst: dis.Instruction) -> str:
    """The operator symbol of a BINARY_OP (e.g. '+', '+=', '@')."""
    return dis._nb_ops[inst.arg][1]  # noqa: SLF001 - stable in 3.11
