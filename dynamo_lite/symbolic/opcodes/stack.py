"""Stack shuffling and instructions with no symbolic effect."""
from __future__ import annotations

from ... import bytecode_compat
from ...variables.base import NullVariable
from . import register
from .load_store import drop_reference


@register(*bytecode_compat.NOOPS - {"CACHE"})
def NOP(tx, inst):
    pass


@register("POP_TOP")
def POP_TOP(tx, inst):
    drop_reference(tx, tx.pop(), "a value left unused")  # (a break restarts the trace before this)


@register("PUSH_NULL")
def PUSH_NULL(tx, inst):
    tx.push(NullVariable())


@register("COPY")
def COPY(tx, inst):
    tx.push(tx.stack[-inst.arg])


@register("SWAP")
def SWAP(tx, inst):
    i = inst.arg
    tx.stack[-1], tx.stack[-i] = tx.stack[-i], tx.stack[-1]
