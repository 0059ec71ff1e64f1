"""Building and unpacking containers and strings."""
from __future__ import annotations

from ... import graph_breaks as gb
from ... import bytecode_compat
from ...exc import GraphBreak
from ...variables import arith
from ...variables.builtin import user_object_text
from ...variables.constant import ConstantVariable
from ...variables.formatted_text import can_format_later, FormattedTextVariable
from ...variables.mappings import DictVariable
from ...variables.sequences import ListVariable, SizeVariable, SliceVariable, TupleVariable
from ...variables.sets import SetVariable
from ...variables.tensor import SymNodeVariable
from . import register


@register("BUILD_TUPLE")
def BUILD_TUPLE(tx, inst):
    tx.push(TupleVariable(tx.popn(inst.arg)))


@register("BUILD_LIST")
def BUILD_LIST(tx, inst):
    tx.push(ListVariable(tx.popn(inst.arg)))


@register("BUILD_SET")
def BUILD_SET(tx, inst):
    tx.push(SetVariable(tx.popn(inst.arg), tx=tx))


@register("BUILD_MAP")
def BUILD_MAP(tx, inst):
    items = tx.popn(2 * inst.arg)
    d = DictVariable({})
    for k, v in zip(items[::2], items[1::2]):
        d.items[d._key(k, tx)] = v
    tx.push(d)


@register("BUILD_CONST_KEY_MAP")
def BUILD_CONST_KEY_MAP(tx, inst):
    keys = tx.pop().as_python_constant()
    values = tx.popn(inst.arg)
    tx.push(DictVariable(dict(zip(keys, values))))


def _slice(parts):
    if all(p.is_python_constant() and not p.symbolic for p in parts):  # (x[:n] of a symbolic n stays symbolic)
        return ConstantVariable(slice(*[p.as_python_constant() for p in parts]))
    return SliceVariable(parts)


@register("BUILD_SLICE")
def BUILD_SLICE(tx, inst):
    tx.push(_slice(tx.popn(inst.arg)))


@register("BINARY_SLICE")
def BINARY_SLICE(tx, inst):
    # container[start:end] (3.12): BUILD_SLICE 2 + BINARY_SUBSCR in one
    parts = tx.popn(2)
    container = tx.pop()
    tx.push(container.getitem(tx, _slice(parts)))


@register("STORE_SLICE")
def STORE_SLICE(tx, inst):
    # container[start:end] = value (3.12)
    parts = tx.popn(2)
    container = tx.pop()
    value = tx.pop()
    container.setitem(tx, _slice(parts), value)


@register("BUILD_STRING")
def BUILD_STRING(tx, inst):
    parts = tx.popn(inst.arg)
    if any(isinstance(p, FormattedTextVariable) for p in parts) and \
            all(isinstance(p, FormattedTextVariable) or p.is_python_constant() for p in parts):
        tx.push(FormattedTextVariable.join(parts))  # tensor fields: the text is made after the graph
        return
    if not all(p.is_python_constant() for p in parts):
        raise GraphBreak(gb.VALUE_UNKNOWN, "f-string with values not known at trace time")
    tx.push(ConstantVariable("".join(p.as_python_constant() for p in parts)))


def _formattable(value):
    """The value an f-string formats: a constant, or a copy of a list / tuple / dict / set of
    constants (formatted as their str())."""
    if value.is_python_constant():
        return value.as_python_constant()
    try:
        kind = value.python_type()
    except GraphBreak:
        kind = None
    if kind in (list, tuple, dict, set, frozenset):
        try:
            copy = value.constant_copy()
        except NotImplementedError:
            copy = None
        if copy is not None and type(copy) is kind and not callable(copy):
            return copy
    raise GraphBreak(gb.VALUE_UNKNOWN, f"formatting {value.describe()} in an f-string")


def _format_field(tx, value, conv: int, spec: str):
    """One f-string field: ``format(value, spec)`` after the conversion ``conv`` (0: none,
    1: str, 2: repr, 3: ascii), as a tracker."""
    if can_format_later(value, spec):
        return FormattedTextVariable.of_field(tx, value, conv)  # formatted from the tensor after the graph
    if (isinstance(value, SymNodeVariable) or isinstance(value, SizeVariable) and any(
            getattr(i, "symbolic", False) for i in value.items)) and not spec:
        # a symbolic number (an int argument that varies, a size) or a shape holding one: its text is
        # made after the graph from the values the graph returns, so the entry is not specialised on
        # it (a training loop's f"step {step}", f"shape {y.shape}")
        return FormattedTextVariable([(value, conv)])
    if isinstance(value, FormattedTextVariable) and conv in (0, 1) and not spec:
        return value  # format(text, "") / str(text): the same text (3.13's CONVERT_VALUE, then FORMAT_SIMPLE)
    if conv in (0, 1, 2):
        # a user object with a Python __str__ / __repr__ / __format__: the method inlined
        dunder = ("__format__", "__str__", "__repr__")[conv]
        text = user_object_text(tx, value, dunder, (ConstantVariable(spec),) if conv == 0 else ())
        if text is not None and conv == 0:
            return text  # __format__(spec) already applied the spec
        if text is not None:
            value, conv = text, 0  # format(str(u), spec)
    v = _formattable(value)
    if conv == 1:
        v = str(v)
    elif conv == 2:
        v = repr(v)
    elif conv == 3:
        v = ascii(v)
    try:
        return ConstantVariable(format(v, spec))
    except Exception as e:  # noqa: BLE001 - raise it for real
        raise GraphBreak(gb.OPERATION_RAISES, f"format() raised {type(e).__name__}") from e


@register(bytecode_compat.OP_FORMAT_VALUE)
def format_value(tx, inst):
    # (3.11, 3.12) conversion and format spec of one field in one instruction
    flags = inst.arg
    spec = tx.pop().as_python_constant() if flags & 0x04 else ""
    tx.push(_format_field(tx, tx.pop(), flags & 0x03, spec))


@register("CONVERT_VALUE")
def CONVERT_VALUE(tx, inst):
    # (3.13) !s / !r / !a of a field (str / repr / ascii); the formatting follows
    tx.push(_format_field(tx, tx.pop(), inst.arg, ""))


@register("FORMAT_SIMPLE")
def FORMAT_SIMPLE(tx, inst):
    # (3.13) a field without a format spec: format(value, "")
    tx.push(_format_field(tx, tx.pop(), 0, ""))


@register("FORMAT_WITH_SPEC")
def FORMAT_WITH_SPEC(tx, inst):
    # (3.13) a field with a format spec: format(value, spec)
    spec = tx.pop().as_python_constant()
    tx.push(_format_field(tx, tx.pop(), 0, spec))


@register("LIST_APPEND")
def LIST_APPEND(tx, inst):
    v = tx.pop()
    tx.peek(inst.arg).call_method(tx, "append", [v], {})


@register("SET_ADD")
def SET_ADD(tx, inst):
    v = tx.pop()
    tx.peek(inst.arg).call_method(tx, "add", [v], {})


@register("MAP_ADD")
def MAP_ADD(tx, inst):
    v = tx.pop()
    k = tx.pop()
    tx.peek(inst.arg).call_method(tx, "__setitem__", [k, v], {})


@register("LIST_EXTEND")
def LIST_EXTEND(tx, inst):
    v = tx.pop()
    tx.peek(inst.arg).call_method(tx, "extend", [v], {})


@register("SET_UPDATE")
def SET_UPDATE(tx, inst):
    v = tx.pop()
    tx.peek(inst.arg).call_method(tx, "update", [v], {})


@register("DICT_UPDATE", "DICT_MERGE")
def DICT_UPDATE(tx, inst):
    v = tx.pop()
    target = tx.peek(inst.arg)
    if inst.opname == "DICT_MERGE" and isinstance(v, DictVariable):
        dup = set(v.items) & set(target.items)
        if dup:
            raise GraphBreak(gb.OPERATION_RAISES, f"got multiple values for keyword argument {sorted(map(str, dup))[0]!r}")
    if not isinstance(v, DictVariable):
        keys = v.call_method(tx, "keys", [], {}).unpack(tx)
        v = DictVariable({k.as_python_constant(): v.call_method(tx, "__getitem__", [k], {}) for k in keys})
    target.call_method(tx, "update", [v], {})


@register(bytecode_compat.OP_LIST_TO_TUPLE)
def list_to_tuple(tx, inst):
    tx.push(TupleVariable(tx.pop().unpack(tx)))


# ---- 3.12's intrinsics: CALL_INTRINSIC_1/2 by the intrinsic's name ----------------------
def _unary_positive(tx, inst):
    tx.push(arith.unary_op(tx, "+", tx.pop()))


def _stopiteration_error(tx, inst):
    # a generator's catch-all handler: StopIteration leaving it becomes a RuntimeError (PEP 479);
    # any other exception passes unchanged to the RERAISE that follows
    exc = tx.peek()
    try:
        kind = exc.python_type()
    except GraphBreak:
        kind = None
    if not isinstance(kind, type) or issubclass(kind, (StopIteration, StopAsyncIteration)):
        raise GraphBreak(gb.CALL_NOT_TRACED, "a generator raises StopIteration (a RuntimeError in Python)")


_INTRINSICS = {
    "LIST_TO_TUPLE": list_to_tuple,
    "UNARY_POSITIVE": _unary_positive,
    "STOPITERATION_ERROR": _stopiteration_error,
}
# the others, each with the reason it is not traced (a graph break; Python runs it)
_UNTRACED_INTRINSICS = {
    "PRINT": "interactive mode is not traced",
    "IMPORT_STAR": "import * is not traced",
    "ASYNC_GEN_WRAP": "async code is not traced",
    "TYPEVAR": "type parameter scopes (PEP 695) are not traced",
    "PARAMSPEC": "type parameter scopes (PEP 695) are not traced",
    "TYPEVARTUPLE": "type parameter scopes (PEP 695) are not traced",
    "SUBSCRIPT_GENERIC": "type parameter scopes (PEP 695) are not traced",
    "TYPEALIAS": "type statements (PEP 695) are not traced",
    "PREP_RERAISE_STAR": "except* runs in Python",
    "TYPEVAR_WITH_BOUND": "type parameter scopes (PEP 695) are not traced",
    "TYPEVAR_WITH_CONSTRAINTS": "type parameter scopes (PEP 695) are not traced",
    "SET_FUNCTION_TYPE_PARAMS": "type parameter scopes (PEP 695) are not traced",
}


@register("CALL_INTRINSIC_1", "CALL_INTRINSIC_2")
def CALL_INTRINSIC(tx, inst):
    name = bytecode_compat.intrinsic_name(inst)
    handler = _INTRINSICS.get(name) if inst.opname == "CALL_INTRINSIC_1" else None
    if handler is None:
        reason = _UNTRACED_INTRINSICS.get(name, "an intrinsic the interpreter does not know")
        raise GraphBreak(gb.UNSUPPORTED_BYTECODE, f"{inst.opname} {name}: {reason}")
    handler(tx, inst)


@register("UNPACK_SEQUENCE")
def UNPACK_SEQUENCE(tx, inst):
    seq = tx.pop()
    items = seq.unpack(tx)
    if len(items) != inst.arg:
        raise GraphBreak(gb.OPERATION_RAISES, f"cannot unpack {len(items)} values into {inst.arg} (ValueError)")
    for item in reversed(items):
        tx.push(item)


@register("UNPACK_EX")
def UNPACK_EX(tx, inst):
    before, after = inst.arg & 0xFF, inst.arg >> 8
    items = tx.pop().unpack(tx)
    if len(items) < before + after:
        raise GraphBreak(gb.OPERATION_RAISES, "not enough values to unpack (ValueError)")
    middle = ListVariable(items[before:len(items) - after])
    for item in reversed(items[len(items) - after:]):
        tx.push(item)
    tx.push(middle)
    for item in reversed(items[:before]):
        tx.push(item)


