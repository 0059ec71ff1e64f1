"""Operators: one table for every binary, unary, comparison and `in` operation.

BINARY_OP (all 26 variants), COMPARE_OP, IS_OP, CONTAINS_OP, UNARY_* and the
``operator`` module all come here (``in`` is the trackers' ``contains``, truth their ``bool``:
base.py's protocol).  Constants fold exactly; anything involving
a tensor becomes a graph node; containers concatenate, repeat and compare
element by element like CPython (identity first), builtins of different kinds (a dict and
a str) are never equal; builtin containers of
constants fold on copies; user objects (inputs and objects made in the trace)
with operator dunders are inlined, ``!=`` falling back to ``not __eq__``.
Tested by tests/semantics/test_builtins.py, tests/semantics/test_containers.py and tests/semantics/test_user_classes.py.
"""
from __future__ import annotations

import collections
import operator

import numpy as np
import torch


from .. import graph_breaks as gb
from ..exc import GraphBreak
from .. import guards
from .base import guard_distinct, same_object, type_or_none, VariableTracker
from .constant import ConstantVariable
from .sequences import BaseListVariable, ListVariable, SizeVariable, TupleVariable
from .mappings import DefaultDictVariable, DictVariable, DictViewVariable, MappingProxyVariable
from .objects import IdVariable, ObjectVariable
from .sets import SetVariable
from .folding import fold_numpy_quietly, raise_folded, wrap_constant_result
from .numpy_arrays import NumpyArrayVariable, numpy_operator
from .formatted_text import FormattedTextVariable
from .functions import UserMethodVariable
from .tensor import record_op, sym_operator, SymNodeVariable, TensorVariable
from .user_objects import mro_lookup, ObjectLike

BINARY = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
    "//": operator.floordiv, "%": operator.mod, "**": operator.pow, "@": operator.matmul,
    "&": operator.and_, "|": operator.or_, "^": operator.xor, "<<": operator.lshift,
    ">>": operator.rshift,
    "+=": operator.iadd, "-=": operator.isub, "*=": operator.imul, "/=": operator.itruediv,
    "//=": operator.ifloordiv, "%=": operator.imod, "**=": operator.ipow, "@=": operator.imatmul,
    "&=": operator.iand, "|=": operator.ior, "^=": operator.ixor, "<<=": operator.ilshift,
    ">>=": operator.irshift,
}
_DUNDER = {
    operator.add: ("__add__", "__radd__"), operator.sub: ("__sub__", "__rsub__"),
    operator.mul: ("__mul__", "__rmul__"), operator.truediv: ("__truediv__", "__rtruediv__"),
    operator.floordiv: ("__floordiv__", "__rfloordiv__"), operator.mod: ("__mod__", "__rmod__"),
    operator.pow: ("__pow__", "__rpow__"), operator.matmul: ("__matmul__", "__rmatmul__"),
    operator.and_: ("__and__", "__rand__"), operator.or_: ("__or__", "__ror__"),
    operator.xor: ("__xor__", "__rxor__"), operator.lshift: ("__lshift__", "__rlshift__"),
    operator.rshift: ("__rshift__", "__rrshift__"),
}
_INPLACE_TO_PLAIN = {
    operator.iadd: operator.add, operator.isub: operator.sub, operator.imul: operator.mul,
    operator.itruediv: operator.truediv, operator.ifloordiv: operator.floordiv,
    operator.imod: operator.mod, operator.ipow: operator.pow, operator.imatmul: operator.matmul,
    operator.iand: operator.and_, operator.ior: operator.or_, operator.ixor: operator.xor,
    operator.ilshift: operator.lshift, operator.irshift: operator.rshift,
}
COMPARE = {
    "<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne,
    ">": operator.gt, ">=": operator.ge,
}
_COMPARE_DUNDER = {
    operator.lt: ("__lt__", "__gt__"), operator.le: ("__le__", "__ge__"),
    operator.eq: ("__eq__", "__eq__"), operator.ne: ("__ne__", "__ne__"),
    operator.gt: ("__gt__", "__lt__"), operator.ge: ("__ge__", "__le__"),
}
UNARY = {
    "-": operator.neg, "+": operator.pos,
    "~": operator.invert,
}


def _is_tensor(v) -> bool:
    return isinstance(v, TensorVariable)


def apply_operator(tx, fn, args: list) -> VariableTracker:
    """Apply an ``operator`` function (binary, compare, unary) to trackers."""
    if fn in (operator.eq, operator.ne) and len(args) == 2 and all(isinstance(a, IdVariable) for a in args):
        same = same_object(args[0].obj, args[1].obj)  # id(a) == id(b) is `a is b`
        if same is None:
            raise GraphBreak(gb.VALUE_UNKNOWN, "comparing id() of objects whose identity is not known at trace time")
        if not same:
            guard_distinct(tx, args[0].obj, args[1].obj)
        return ConstantVariable(same if fn is operator.eq else not same)
    if any(isinstance(a, NumpyArrayVariable) for a in args):
        return numpy_operator(tx, fn, args)
    if fn in (operator.add, operator.iadd) and any(isinstance(a, FormattedTextVariable) for a in args) and all(
            isinstance(a, FormattedTextVariable) or (a.is_python_constant() and type(a.as_python_constant()) is str)
            for a in args):
        return FormattedTextVariable.join(args)  # "got " + f"{x}": still made after the graph
    if any(_is_tensor(a) for a in args):
        if fn is operator.not_:
            raise GraphBreak(gb.DATA_DEPENDENT, "`not tensor` depends on tensor data")
        if fn in _INPLACE_TO_PLAIN and not _is_tensor(args[0]):
            fn = _INPLACE_TO_PLAIN[fn]
        if fn in (operator.is_, operator.is_not):
            return ConstantVariable(_identity_compare(tx, fn, *args))
        if fn is operator.pow and not _is_tensor(args[0]) and args[0].is_python_constant():
            # number ** tensor is Tensor.__rpow__, torch.pow(number, tensor) (and a graph printed
            # as `-2 ** x` would compute -(2 ** x))
            return record_op(tx, "call_function", torch.pow, args, {})
        return record_op(tx, "call_function", fn, args, {})
    if fn in _SET_INPLACE and _is_set(args[0], frozen=False) and _is_set(args[1]):
        # s |= t mutates s in place (every alias sees it; an input set is updated after the graph)
        args[0].call_method(tx, _SET_INPLACE[fn], [args[1]], {})
        return args[0]
    if fn in (operator.or_, operator.ior) and type(args[0]) in (DictVariable, DefaultDictVariable) and \
            args[0].dict_type in _PLAIN_DICT_TYPES and (fn is operator.ior or isinstance(args[1], DictVariable)):
        # d | other (a new dict of d's type), d |= other (d.update(other), in place)
        return args[0].call_method(tx, "__ior__" if fn is operator.ior else "__or__", [args[1]], {})
    if fn in (operator.is_, operator.is_not) and (args[0] is args[1] or any(_is_set(a) for a in args)):
        # one tracker is one object (t = (1, 2); t is t), and sets are compared as themselves:
        # never on folded copies, which are new objects
        return ConstantVariable(_identity_compare(tx, fn, *args))  # not on folded copies
    if fn in _SET_OPERATORS and len(args) == 2 and _is_set(args[0]) and _is_set(args[1]):
        # s | t: by the set (not folded on copies, whose tables, so the result's order, may not be eager's)
        return args[0].call_method(tx, _SET_OPERATORS[fn], [args[1]], {})
    replayed = next((a for a in args if getattr(a, "replay_operator", None) is not None), None)
    if replayed is not None and fn not in (operator.is_, operator.is_not):
        # a number drawn from Python's random module at run time (stdlib.py): the operation is replayed too
        return replayed.replay_operator(tx, fn, args)
    if any(isinstance(a, SymNodeVariable) for a in args) and fn not in (operator.is_, operator.is_not):
        if fn is operator.not_:
            return ConstantVariable(not args[0].bool(tx))  # a guard on the branch, not a constant
        if all(isinstance(a, SymNodeVariable) or a.is_python_constant() for a in args):
            return sym_operator(tx, _INPLACE_TO_PLAIN.get(fn, fn), args)
        # a symbolic int with a container or an object (`[x] * n`, `seq[n:]` through __getitem__):
        # the int is specialised and the other operand's own operator answers
        return apply_operator(tx, fn, [ConstantVariable(a.as_python_constant()) if isinstance(a, SymNodeVariable)
                                       else a for a in args])
    if all(a.is_python_constant() for a in args):
        values = [a.as_python_constant() for a in args]
        if any(isinstance(v, np.generic) for v in values):  # overflow warnings are numpy's, at run time
            return wrap_constant_result(fold_numpy_quietly(getattr(fn, "__name__", str(fn)), fn, *values))
        try:
            result = fn(*values)
        except Exception as e:  # noqa: BLE001 - raised in the trace (1 // 0 in a try), or by Python
            raise_folded(tx, e, getattr(fn, '__name__', str(fn)), args, {})
        return wrap_constant_result(result)
    if fn in (operator.is_, operator.is_not):
        return ConstantVariable(_identity_compare(tx, fn, *args))
    return _sequence_or_object_op(tx, fn, args)


_PLAIN_DICT_TYPES = (dict, collections.OrderedDict, collections.defaultdict)
_SET_INPLACE = {operator.ior: "update", operator.iand: "intersection_update",
                operator.isub: "difference_update", operator.ixor: "symmetric_difference_update"}


_SET_OPERATORS = {operator.or_: "__or__", operator.and_: "__and__", operator.sub: "__sub__",
                  operator.xor: "__xor__"}


def _is_set(v, frozen=None) -> bool:
    return isinstance(v, SetVariable) and (frozen is None or v.frozen == frozen)


def _identity_compare(tx, fn, a, b) -> bool:
    same = same_object(a, b)
    if same is None:
        raise GraphBreak(gb.VALUE_UNKNOWN, "identity of these values is not known at trace time")
    if not same:
        guard_distinct(tx, a, b)
    return same if fn is operator.is_ else not same


def _is_tuple(v) -> bool:
    return isinstance(v, TupleVariable)


def _folds_on_copies(v) -> bool:
    return v.is_python_constant() or isinstance(v, (DictVariable, DictViewVariable, ListVariable, SetVariable))


def _compare_sequences(tx, fn, a, b):
    """``a <op> b`` for two lists or two tuples, element by element like CPython."""
    if isinstance(a, ListVariable) != isinstance(b, ListVariable):
        if fn in (operator.eq, operator.ne):
            return ConstantVariable(fn is operator.ne)
        raise GraphBreak(gb.OPERATION_RAISES, f"comparing {a.describe()} with {b.describe()} (TypeError)")
    if fn in (operator.eq, operator.ne) and len(a.items) != len(b.items):
        return ConstantVariable(fn is operator.ne)
    for x, y in zip(a.items, b.items):
        if same_object(x, y) is True:
            continue  # CPython compares items by identity first
        if _is_tensor(x) or _is_tensor(y):
            raise GraphBreak(gb.DATA_DEPENDENT, "comparing sequences of tensors depends on tensor data")
        if apply_operator(tx, operator.eq, [x, y]).bool(tx):
            continue
        if fn is operator.eq:
            return ConstantVariable(False)
        if fn is operator.ne:
            return ConstantVariable(True)
        return ConstantVariable(apply_operator(tx, fn, [x, y]).bool(tx))
    return ConstantVariable(fn(len(a.items), len(b.items)))


def _sequence_or_object_op(tx, fn, args):
    if len(args) == 2:
        a, b = args
        if fn in (operator.eq, operator.ne):
            # a mappingproxy compares as the dict it views (on either side, through the reflected
            # operand); its <, > raise TypeError naming mappingproxy, so they are not unwrapped
            a, b = (v.dict_var if isinstance(v, MappingProxyVariable) else v for v in (a, b))
        plain = _INPLACE_TO_PLAIN.get(fn, fn)
        if fn is plain and _folds_on_copies(a) and _folds_on_copies(b):
            # e.g. d.keys() & {"a"}, "%(k)s" % {"k": 1}, {1: 2} == {1: 2}: builtin containers of
            # constants, computed on copies (non-inplace operators do not mutate their operands)
            try:
                values = [a.constant_copy(), b.constant_copy()]
            except NotImplementedError:
                values = None
            if values is not None:
                try:
                    result = fn(*values)
                except Exception as e:  # noqa: BLE001 - let Python raise it for real
                    raise GraphBreak(gb.OPERATION_RAISES, f"{getattr(fn, '__name__', fn)} raised {type(e).__name__}") from e
                if fn not in COMPARE.values() and isinstance(result, (list, dict, set)) and \
                        (result is values[0] or result is values[1]):
                    values = None  # an operand came back: keep its identity (handled below)
                else:
                    return wrap_constant_result(result)
        if plain is operator.add and isinstance(a, BaseListVariable) and isinstance(b, BaseListVariable):
            if fn is operator.iadd and isinstance(a, ListVariable):
                a.call_method(tx, "extend", [b], {})
                return a
            if isinstance(a, ListVariable) and isinstance(b, ListVariable):
                return ListVariable([*a.items, *b.items])
            if _is_tuple(a) and _is_tuple(b):
                if isinstance(a, SizeVariable) or isinstance(b, SizeVariable):
                    return SizeVariable([*a.items, *b.items])
                return TupleVariable([*a.items, *b.items])
            raise GraphBreak(gb.OPERATION_RAISES, f"cannot concatenate {a.describe()} and {b.describe()} (TypeError)")
        if plain is operator.mul and isinstance(a, BaseListVariable) and b.is_python_constant():
            n = b.as_python_constant()
            if isinstance(n, int) and not isinstance(n, bool):
                if fn is operator.imul and isinstance(a, ListVariable):
                    tx.output.side_effects.mutate(a)
                    a.items[:] = a.items * n
                    return a
                kind = ListVariable if isinstance(a, ListVariable) else (
                    SizeVariable if isinstance(a, SizeVariable) else TupleVariable)
                return kind(a.items * n)
        if plain is operator.mul and isinstance(b, BaseListVariable) and a.is_python_constant():
            return _sequence_or_object_op(tx, plain, [b, a])
        if fn in COMPARE.values() and isinstance(a, BaseListVariable) and isinstance(b, BaseListVariable):
            return _compare_sequences(tx, fn, a, b)
        if fn in _SET_OPERATORS and _is_set(a) and _is_set(b):
            return a.call_method(tx, _SET_OPERATORS[fn], [b], {})  # (sets of names and objects: sets.py)
        return _user_dunder(tx, fn, a, b)
    if len(args) == 1 and fn is operator.not_:
        return ConstantVariable(not args[0].bool(tx))
    raise GraphBreak(gb.VALUE_UNKNOWN, f"operator {getattr(fn, '__name__', fn)} on {', '.join(a.describe() for a in args)}")


def _user_dunder(tx, fn, a, b):
    plain = _INPLACE_TO_PLAIN.get(fn, fn)
    names = _DUNDER.get(plain) or _COMPARE_DUNDER.get(plain)
    if names is None:
        raise GraphBreak(gb.VALUE_UNKNOWN, f"operator {getattr(fn, '__name__', fn)} on {a.describe()} and {b.describe()}")
    if plain is operator.ne and not _has_user_dunder(a, "__ne__") and not _has_user_dunder(b, "__ne__") and (
            _has_user_dunder(a, "__eq__") or _has_user_dunder(b, "__eq__")):
        # object.__ne__ inverts __eq__
        return ConstantVariable(not _user_dunder(tx, operator.eq, a, b).bool(tx))
    if fn in _INPLACE_TO_PLAIN and _has_user_dunder(a, "__i" + names[0][2:]):
        result = a.call_method(tx, "__i" + names[0][2:], [b], {})
        if not (result.is_python_constant() and result.as_python_constant() is NotImplemented):
            return result  # (NotImplemented: Python falls back to __add__ / __radd__, as below)
    reflected_first = _reflected_first(plain, a, b, names)
    if reflected_first:  # the right operand's class is a subclass of the left's: it answers first
        result = b.call_method(tx, names[1], [a], {})
        if not (result.is_python_constant() and result.as_python_constant() is NotImplemented):
            return result
    if _has_user_dunder(a, names[0]):
        result = a.call_method(tx, names[0], [b], {})
        if not (result.is_python_constant() and result.as_python_constant() is NotImplemented):
            return result
    elif isinstance(a, ObjectLike) and a.has_class_attr(names[0]) and not _object_default(a, names[0]):
        raise GraphBreak(gb.VALUE_UNKNOWN, f"{a.describe()}.{names[0]} is not a Python function")
    if not reflected_first and _has_user_dunder(b, names[1]):
        result = b.call_method(tx, names[1], [a], {})
        if not (result.is_python_constant() and result.as_python_constant() is NotImplemented):
            return result
    if plain in (operator.eq, operator.ne) and isinstance(a, UserMethodVariable) and \
            isinstance(b, UserMethodVariable) and not isinstance(a.fn, VariableTracker) and \
            not isinstance(b.fn, VariableTracker):
        # bound methods are equal when bound to the same object (by identity) with equal functions
        same = a.fn is b.fn and same_object(a.obj, b.obj)
        if same is not None:
            if a.fn is b.fn and not same:
                guard_distinct(tx, a.obj, b.obj)
            return ConstantVariable(same if plain is operator.eq else not same)
    if plain in (operator.eq, operator.ne):
        opaque = next((v for v in (a, b) if _compares_in_c(v, names[0])), None)
        if opaque is not None:
            # e.g. np.int64(0) == 0 is True: identity is only the answer when neither type compares
            raise GraphBreak(gb.VALUE_UNKNOWN, f"{opaque.describe()} compares with its type's own {names[0]}")
        if _never_equal_builtins(a, b):
            # {"op": 1} == "add", [1] == 1: each type's == returns NotImplemented for the other,
            # then identity, and objects of two types are never one object
            return ConstantVariable(plain is operator.ne)
        # identity is the answer only when both types compare as object does (a dict, a list or
        # an int compares its contents: {"x": t} == {"x": t2} compares the tensors)
        same = same_object(a, b) if _compared_by_identity(a, b, names[0]) else None
        if same is not None:
            if not same:
                guard_distinct(tx, a, b)
            return ConstantVariable(same if plain is operator.eq else not same)
    raise GraphBreak(gb.VALUE_UNKNOWN, f"operator {getattr(fn, '__name__', fn)} on {a.describe()} and {b.describe()}")


# builtin types whose __eq__/__ne__ return NotImplemented for an operand of an unrelated type
_FOREIGN_NOT_IMPLEMENTED = (int, float, complex, str, bytes, tuple, list, dict, set, frozenset, type(None))


# exact builtin types whose == returns NotImplemented for an operand of another kind here (numbers
# compare with numbers, sets with frozensets); bytes is left out (== with a str warns under -b)
_EQ_KIND = {bool: "number", int: "number", float: "number", complex: "number", str: "str", tuple: "tuple",
            list: "list", dict: "dict", set: "set", frozenset: "set", type(None): "None"}


def _never_equal_builtins(a, b) -> bool:
    """Are ``a`` and ``b`` of exact builtin types of different kinds (never ==)?"""
    kind_a, kind_b = _EQ_KIND.get(type_or_none(a)), _EQ_KIND.get(type_or_none(b))
    return kind_a is not None and kind_b is not None and kind_a != kind_b


def _compared_by_identity(a, b, name: str) -> bool:
    """Does ``a == b`` (``name``: ``__eq__``/``__ne__``) come down to ``a is b``?  When both types
    keep object's comparison, or one does and the other is a builtin that returns
    NotImplemented for it (``obj == 3``); not for two builtins (``{"x": t} == {"x": t2}``
    compares the contents)."""
    ta, tb = type_or_none(a), type_or_none(b)
    if not (isinstance(ta, type) and isinstance(tb, type)):
        return False
    plain_a, plain_b = mro_lookup(ta, name)[1] is object, mro_lookup(tb, name)[1] is object
    if plain_a and plain_b:
        return True
    if plain_a and tb in _FOREIGN_NOT_IMPLEMENTED and not issubclass(ta, _FOREIGN_NOT_IMPLEMENTED):
        return True
    return plain_b and ta in _FOREIGN_NOT_IMPLEMENTED and not issubclass(tb, _FOREIGN_NOT_IMPLEMENTED)


def _compares_in_c(v, name: str) -> bool:
    """``v`` is an opaque object (passed through, not modelled) whose type defines ``name``
    (``__eq__``/``__ne__``) in C rather than inheriting object's identity comparison."""
    if not isinstance(v, ObjectVariable):
        return False
    return getattr(type(v.value), name, None) is not getattr(object, name)


def _reflected_first(plain, a, b, names) -> bool:
    """Does Python try ``b``'s reflected method before ``a``'s own?  When ``type(b)`` is a proper
    subclass of ``type(a)`` (by the MRO, as PyType_IsSubtype: no ``__subclasscheck__``): always for
    comparisons (do_richcompare), and for arithmetic when the subclass overrides the reflected
    method (the binary slots' ``method_is_overloaded``)."""
    if not (isinstance(a, ObjectLike) and isinstance(b, ObjectLike)) or not _has_user_dunder(b, names[1]):
        return False
    ta, tb = a.value_type, b.value_type
    if ta is tb or ta not in type.__dict__["__mro__"].__get__(tb):
        return False
    return plain in _COMPARE_DUNDER or mro_lookup(tb, names[1])[0] is not mro_lookup(ta, names[1])[0]


def _has_user_dunder(v, name: str) -> bool:
    """Does ``v``'s class define ``name`` as a Python function (which we can inline)?"""
    import types

    if not isinstance(v, ObjectLike):
        return False
    attr, _ = mro_lookup(v.value_type, name)
    return isinstance(attr, types.FunctionType)


def _object_default(v, name: str) -> bool:
    """Is ``v``'s ``name`` the one inherited from ``object`` (identity semantics)?"""
    _, owner = mro_lookup(v.value_type, name)
    return owner is object


def binary_op(tx, symbol: str, a, b):
    return apply_operator(tx, BINARY[symbol], [a, b])


def compare(tx, symbol: str, a, b):
    return apply_operator(tx, COMPARE[symbol], [a, b])


def unary_op(tx, symbol: str, v):
    """``-v``, ``+v`` or ``~v`` (by the operator's symbol)."""
    return apply_operator(tx, UNARY[symbol], [v])


# the container methods below this layer that compare items (list.index, list.remove, `in`)
VariableTracker.apply_operator = staticmethod(apply_operator)  # see VariableTracker.apply_operator


__all__ = ["apply_operator", "binary_op", "compare", "unary_op",
           "BINARY", "COMPARE", "UNARY"]
