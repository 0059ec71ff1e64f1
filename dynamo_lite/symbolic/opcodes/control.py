"""Control flow: jumps decided at trace time, loops (unrolled), iteration, return."""
from __future__ import annotations

from ... import bytecode_compat
from ...exc import GraphBreak
from ...variables.containers import ListIteratorVariable
from . import register


def _branch(tx, inst):
    pops, jump_if, kind = bytecode_compat.CONDITIONAL_JUMPS[inst.opname]
    value = tx.peek()
    if kind == "none":
        if value.is_python_constant():
            is_none = value.as_python_constant() is None
        else:
            try:
                t = value.python_type()
            except GraphBreak:
                t = None
            if t is None or t is type(None):
                raise GraphBreak("DL0007", f"`is None` test on {value.describe()} not known at trace time")
            is_none = False
        outcome = is_none
    else:
        outcome = value.truthiness(tx)
        if outcome is None:
            from ...variables.tensor import TensorVariable

            if isinstance(value, TensorVariable):
                raise GraphBreak("DL0025", "branch on a tensor value (data-dependent control flow)")
            raise GraphBreak("DL0007", f"branch on {value.describe()} not known at trace time")
    taken = outcome == jump_if
    if pops or not taken:
        tx.pop()
    if taken:
        tx.jump_to(inst.argval)


register(*bytecode_compat.CONDITIONAL_JUMPS)(_branch)


@register(*bytecode_compat.UNCONDITIONAL_JUMPS)
def JUMP(tx, inst):
    tx.jump_to(inst.argval)


@register("RETURN_VALUE")
def RETURN_VALUE(tx, inst):
    tx.return_value = tx.pop()
    tx.done = True


@register("GET_ITER")
def GET_ITER(tx, inst):
    value = tx.pop()
    if isinstance(value, ListIteratorVariable):
        tx.push(value)
        return
    tx.push(ListIteratorVariable(value.unpack(tx)))


@register("FOR_ITER")
def FOR_ITER(tx, inst):
    it = tx.peek()
    if not isinstance(it, ListIteratorVariable):
        raise GraphBreak("DL0005", f"iterating over {it.describe()}")
    item = it.next_item(tx)
    if item is None:
        tx.pop()
        tx.jump_to(inst.argval)
    else:
        tx.push(item)


@register("RAISE_VARARGS")
def RAISE_VARARGS(tx, inst):
    raise GraphBreak("DL0015", "raise statement (the exception is raised by Python)")


