"""Operators: BINARY_OP (every variant), UNARY_*, COMPARE_OP, IS_OP, CONTAINS_OP, subscripts."""
from __future__ import annotations

from ... import graph_breaks as gb
from ... import bytecode_compat
from ...exc import GraphBreak
from ...variables import arith
from ...variables.constant import ConstantVariable
from ...variables.builtin import BuiltinVariable
from ...variables.tensor import TensorVariable
from . import register


@register("BINARY_OP")
def BINARY_OP(tx, inst):
    b = tx.pop()
    a = tx.pop()
    tx.push(arith.binary_op(tx, bytecode_compat.binary_op_name(inst), a, b))


_UNARY_SYMBOL = {"UNARY_NEGATIVE": "-", "UNARY_POSITIVE": "+", "UNARY_INVERT": "~"}


@register(*_UNARY_SYMBOL)
def UNARY(tx, inst):
    tx.push(arith.unary_op(tx, _UNARY_SYMBOL[inst.opname], tx.pop()))


@register("UNARY_NOT")
def UNARY_NOT(tx, inst):
    import operator

    tx.push(arith.apply_operator(tx, operator.not_, [tx.pop()]))


@register("COMPARE_OP")
def COMPARE_OP(tx, inst):
    b = tx.pop()
    a = tx.pop()
    result = arith.compare(tx, inst.argval, a, b)
    if bytecode_compat.compare_to_bool(inst) and result.is_python_constant():
        # (3.13) the bool a conditional jump needs; a result not known at trace time stays as it
        # is: the jump tests its truth (generated code entering there converts it again:
        # bytecode_compat.before_entry)
        result = ConstantVariable(bool(result.as_python_constant()))
    tx.push(result)


@register("IS_OP")
def IS_OP(tx, inst):
    import operator

    b = tx.pop()
    a = tx.pop()
    tx.push(arith.apply_operator(tx, operator.is_not if inst.arg else operator.is_, [a, b]))


@register("CONTAINS_OP")
def CONTAINS_OP(tx, inst):
    container = tx.pop()
    item = tx.pop()
    found = container.contains(tx, item)  # the tracker protocol (base.py)
    tx.push(ConstantVariable(not found if inst.arg else found))


@register("BINARY_SUBSCR")
def BINARY_SUBSCR(tx, inst):
    key = tx.pop()
    obj = tx.pop()
    tx.push(obj.getitem(tx, key))


@register("STORE_SUBSCR")
def STORE_SUBSCR(tx, inst):
    key = tx.pop()
    obj = tx.pop()
    value = tx.pop()
    obj.setitem(tx, key, value)


@register("DELETE_SUBSCR")
def DELETE_SUBSCR(tx, inst):
    key = tx.pop()
    obj = tx.pop()
    if isinstance(obj, TensorVariable):
        raise GraphBreak(gb.OPERATION_RAISES, "del on a tensor item")
    obj.call_method(tx, "__delitem__", [key], {})


@register("GET_LEN")
def GET_LEN(tx, inst):
    tx.push(BuiltinVariable(len).call_function(tx, [tx.peek()], {}))
