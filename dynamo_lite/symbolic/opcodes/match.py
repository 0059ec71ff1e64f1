"""Structural pattern matching: MATCH_MAPPING, MATCH_SEQUENCE, MATCH_KEYS, MATCH_CLASS.

The handlers follow CPython's ceval (3.11's ceval.c, 3.12/3.13's bytecodes.c: ``match_keys``,
``match_class``, ``match_class_attr``); the rest of a ``match`` statement is ordinary bytecode
(GET_LEN, COMPARE_OP, UNPACK_*, DICT_UPDATE, DELETE_SUBSCR) handled elsewhere.

- MATCH_MAPPING / MATCH_SEQUENCE read the subject's type flags (Py_TPFLAGS_MAPPING /
  Py_TPFLAGS_SEQUENCE, set for dict/list/tuple/range..., inherited, and set by a
  collections.abc registration or base class): read from the type, never from the object, so
  no user code runs (eager runs none either).  str, bytes and bytearray do not have them.
- MATCH_KEYS calls the subject's ``get(key, sentinel)`` for each key, in order, through the
  tracker (a dict answers it; a user mapping's ``get`` is inlined like any method call, or
  breaks); a key seen twice raises ValueError, as in CPython.
- MATCH_CLASS: the pattern must be a class (TypeError), isinstance() through the builtin's
  handler, ``__match_args__`` read from the class, the positional count checked (TypeError),
  the "match self" rule of the builtin types that have _Py_TPFLAGS_MATCH_SELF (bool, int, str,
  list, dict...), a repeated attribute (TypeError), then getattr() for each attribute through
  the builtin's handler: a missing attribute (AttributeError, also raised by an inlined
  property) is "no match", anything else propagates.

Exceptions CPython raises here are raised in the trace (the traced code's handlers see them, or
Python raises them when they leave the frame).  A subject whose type is not known at trace
time, or mapping keys that are not literal constants, break the graph.
Tested by tests/semantics/test_match_statements.py.
"""
from __future__ import annotations

from ... import bytecode_compat
from ... import graph_breaks as gb
from ... import guards
from ...exc import GraphBreak
from ...variables.builtin import BuiltinVariable
from ...variables.constant import ConstantVariable, NONE
from ...variables.sequences import TupleVariable
from . import register

# CPython's type flags (Include/object.h): what MATCH_SEQUENCE / MATCH_MAPPING test, the flag of
# the builtin types whose single positional sub-pattern is the subject itself, and heap types
# (whose tp_name is their __name__)
_TPFLAGS_SEQUENCE = 1 << 5
_TPFLAGS_MAPPING = 1 << 6
_TPFLAGS_HEAPTYPE = 1 << 9
_TPFLAGS_MATCH_SELF = 1 << 22

# keys whose hash and == are the builtin ones: MATCH_KEYS's duplicate check runs on them at trace time
_LITERAL_KEY_TYPES = (int, float, complex, str, bytes, bool, type(None))


def _type_flags(cls: type) -> int:
    # type's own __flags__ getter: a metaclass cannot override what it reads
    return type.__dict__["__flags__"].__get__(cls)


def _tp_name(cls: type) -> str:
    """The type's C ``tp_name``, as CPython's messages print it: a class defined in Python has its
    ``__name__``; a static (C) type its module-qualified name, unless it is a builtin."""
    if _type_flags(cls) & _TPFLAGS_HEAPTYPE or cls.__module__ == "builtins":
        return cls.__name__
    return f"{cls.__module__}.{cls.__name__}"


def _subject_type(tx, subject) -> type:
    """type(subject), known at trace time (through the builtin's handler, which guards it), or a break."""
    cls = BuiltinVariable(type).call_function(tx, [subject], {})
    if not cls.is_python_constant() or not isinstance(cls.as_python_constant(), type):
        raise GraphBreak(gb.UNKNOWN_TYPE, f"match statement on {subject.describe()}, whose type is not known "
                         "at trace time")
    return cls.as_python_constant()


def _flag_of(cls: type, flag: int) -> bool:
    """Does ``cls`` have ``flag`` now (the guard of a class whose flags may change)?"""
    return bool(_type_flags(cls) & flag)


def _match_by_flag(flag: int):
    def handler(tx, inst):
        cls = _subject_type(tx, tx.peek())
        has = _flag_of(cls, flag)
        if _type_flags(cls) & _TPFLAGS_HEAPTYPE:
            # a class defined in Python gains the flag when registered with collections.abc later
            tx.output.add_guard(guards.ExprGuard("{f}({c}, {n}) is {v}",
                                                 (("f", _flag_of), ("c", cls), ("n", flag), ("v", has))))
        tx.push(ConstantVariable(has))
    return handler


register("MATCH_MAPPING")(_match_by_flag(_TPFLAGS_MAPPING))
register("MATCH_SEQUENCE")(_match_by_flag(_TPFLAGS_SEQUENCE))


def _new_sentinel(tx):
    """A fresh ``object()``, compared by identity: what a lookup returns when it finds nothing."""
    return BuiltinVariable(object).call_function(tx, [], {})


@register("MATCH_KEYS")
def MATCH_KEYS(tx, inst):
    keys_var = tx.peek()
    subject = tx.peek(2)
    if not keys_var.is_python_constant():
        raise GraphBreak(gb.VALUE_UNKNOWN, "mapping pattern with keys not known at trace time")
    keys = keys_var.as_python_constant()
    if not keys:
        tx.push(TupleVariable([]))  # no keys: no lookups (CPython does not even look `get` up)
        return
    if not all(type(k) in _LITERAL_KEY_TYPES for k in keys):
        bad = next(k for k in keys if type(k) not in _LITERAL_KEY_TYPES)
        raise GraphBreak(gb.VALUE_UNKNOWN, f"mapping pattern key of type {type(bad).__name__} (Python hashes "
                         "and compares it)")
    get = subject.var_getattr(tx, "get")  # looked up once, before the first key (an error propagates)
    missing = _new_sentinel(tx)
    seen: set = set()
    values = []
    for key in keys:
        if key in seen:
            tx.raise_builtin_exception(ValueError, [ConstantVariable(f"mapping pattern checks duplicate key ({key!r})")])
        seen.add(key)
        value = get.call_function(tx, [ConstantVariable(key), missing], {})
        if value is missing:
            tx.push(NONE)
            return
        values.append(value)
    tx.push(TupleVariable(values))


def _raise_type_error(tx, message: str) -> None:
    tx.raise_builtin_exception(TypeError, [ConstantVariable(message)])


@register("MATCH_CLASS")
def MATCH_CLASS(tx, inst):
    subject, cls_var, names_var = tx.popn(3)
    nargs = inst.arg
    tx.push(NONE if (attrs := _match_class(tx, subject, cls_var, nargs, names_var)) is None else attrs)


def _match_class(tx, subject, cls_var, nargs: int, names_var):
    """The tuple of the pattern's attributes of ``subject``, or None when it does not match."""
    if not cls_var.is_python_constant():
        raise GraphBreak(gb.VALUE_UNKNOWN, f"class pattern with {cls_var.describe()}, not known at trace time")
    cls = cls_var.as_python_constant()
    if not isinstance(cls, type):
        _raise_type_error(tx, bytecode_compat.MATCH_CLASS_NOT_A_CLASS)
    if not BuiltinVariable(isinstance).call_function(tx, [subject, cls_var], {}).as_python_constant():
        return None
    keyword_names = names_var.as_python_constant()  # a constant tuple of str (the compiler builds it)
    seen: set = set()
    attrs = []
    if nargs:
        missing = _new_sentinel(tx)
        match_args = BuiltinVariable(getattr).call_function(
            tx, [cls_var, ConstantVariable("__match_args__"), missing], {})
        match_self = False
        if match_args is missing:
            match_args = ()
            match_self = bool(_type_flags(cls) & _TPFLAGS_MATCH_SELF)
        else:
            got = match_args.python_type()
            if got is not tuple:
                _raise_type_error(tx, f"{_tp_name(cls)}.__match_args__ must be a tuple (got {_tp_name(got)})")
            if not match_args.is_python_constant():
                raise GraphBreak(gb.VALUE_UNKNOWN, f"{cls.__name__}.__match_args__ is not known at trace time")
            match_args = match_args.as_python_constant()
        allowed = 1 if match_self else len(match_args)
        if allowed < nargs:
            _raise_type_error(tx, f"{_tp_name(cls)}() accepts {allowed} positional sub-pattern"
                                  f"{'' if allowed == 1 else 's'} ({nargs} given)")
        if match_self:
            attrs.append(subject)
        else:
            for name in match_args[:nargs]:
                if type(name) is not str:
                    _raise_type_error(tx, f"__match_args__ elements must be strings (got {_tp_name(type(name))})")
                attr = _match_class_attr(tx, subject, cls, name, seen)
                if attr is None:
                    return None
                attrs.append(attr)
    for name in keyword_names:
        attr = _match_class_attr(tx, subject, cls, name, seen)
        if attr is None:
            return None
        attrs.append(attr)
    return TupleVariable(attrs)


def _match_class_attr(tx, subject, cls: type, name: str, seen: set):
    """getattr(subject, name), or None when it raises AttributeError (the pattern does not match)."""
    if name in seen:
        _raise_type_error(tx, f"{_tp_name(cls)}() got multiple sub-patterns for attribute {name!r}")
    seen.add(name)
    missing = _new_sentinel(tx)
    value = tx.call_unless_raises(
        lambda: BuiltinVariable(getattr).call_function(tx, [subject, ConstantVariable(name), missing], {}),
        AttributeError)
    return None if value is None or value is missing else value
