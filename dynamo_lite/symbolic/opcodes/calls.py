"""Calls and function objects: keyword names of a call, CALL, CALL_FUNCTION_EX, MAKE_FUNCTION,
BEFORE_WITH, and the generator protocol used when inlining generators."""
from __future__ import annotations

from ... import graph_breaks as gb
from ... import bytecode_compat
from ...exc import GraphBreak
from ...variables.base import NullVariable
from ...variables.constant import NONE
from ...variables.mappings import DictVariable
from ...variables.sequences import ListIteratorVariable, TupleVariable
from ...variables.functions import NestedUserFunctionVariable, UserMethodVariable
from ...variables.builder import wrap
from ...variables.contexts import ContextManagerVariable, GradModeExitVariable
from ...variables.user_objects import ObjectLike
from . import register


def _call(tx, fn, args: list, kwargs: dict):
    result = fn.call_function(tx, args, kwargs)
    if result is None:
        raise AssertionError(f"{fn!r}.call_function returned None")
    return result


@register(bytecode_compat.OP_KW_NAMES)
def kw_names(tx, inst):  # (3.11, 3.12)
    tx.kw_names = tx.code.co_consts[inst.arg]  # dis shows no argval for it in 3.11


def _is_null(v) -> bool:
    return isinstance(v, NullVariable)


def _call_with(tx, n: int, kw_names) -> None:
    """A call of ``n`` arguments (the last ``len(kw_names)`` by keyword) over the callable and
    its NULL-or-self slot below them (bytecode_compat.call_operands gives their order)."""
    fn, args = bytecode_compat.call_operands(tx.popn(n + 2), _is_null)
    kwargs = {}
    if kw_names:
        kw_values = args[len(args) - len(kw_names):]
        args = args[:len(args) - len(kw_names)]
        kwargs = dict(zip(kw_names, kw_values))
    tx.push(_call(tx, fn, list(args), kwargs))


@register("CALL")
def CALL(tx, inst):
    kw_names, tx.kw_names = tx.kw_names, None  # (3.11, 3.12: set by KW_NAMES)
    _call_with(tx, inst.arg, kw_names)


@register(bytecode_compat.OP_CALL_KW)
def call_kw(tx, inst):
    # (3.13) the keyword names are a constant tuple on top of the arguments
    kw_names = tx.pop().as_python_constant()
    _call_with(tx, inst.arg, kw_names)


@register("CALL_FUNCTION_EX")
def CALL_FUNCTION_EX(tx, inst):
    kwargs_var = tx.pop() if inst.arg & 1 else None
    args_var = tx.pop()
    fn, first_args = bytecode_compat.call_operands(tx.popn(2), _is_null)  # (the slot is NULL)
    args = [*first_args, *args_var.unpack(tx)]
    kwargs = {}
    if kwargs_var is not None:
        if not isinstance(kwargs_var, DictVariable):
            raise GraphBreak(gb.VALUE_UNKNOWN, "** argument is not a dict known at trace time")
        for k, v in kwargs_var.items.items():
            if not isinstance(k, str):
                raise GraphBreak(gb.OPERATION_RAISES, "keywords must be strings")
            kwargs[k] = v
    tx.push(_call(tx, fn, list(args), kwargs))


@register("MAKE_FUNCTION")
def MAKE_FUNCTION(tx, inst):
    flags = bytecode_compat.make_function_flags(inst)
    code = tx.pop().as_python_constant()
    fn = NestedUserFunctionVariable(code, tx.f_globals, code.co_qualname, None, None, None, None)
    # made in an inlined call of another module: generated code must build it with that module's
    # globals, not the compiled frame's (MAKE_FUNCTION takes the running frame's)
    fn.foreign_globals = tx.f_globals is not tx.output.f_globals
    for flag in (bytecode_compat.MF_CLOSURE, bytecode_compat.MF_ANNOTATIONS, bytecode_compat.MF_KWDEFAULTS,
                 bytecode_compat.MF_DEFAULTS):
        if flags & flag:
            _set_function_attribute(tx, fn, flag, tx.pop())
    tx.push(fn)


@register(bytecode_compat.OP_SET_FUNCTION_ATTRIBUTE)
def set_function_attribute(tx, inst):
    # (3.13) one of MAKE_FUNCTION's flags, set on the function MAKE_FUNCTION just made
    fn = tx.pop()
    value = tx.pop()
    if not isinstance(fn, NestedUserFunctionVariable):
        raise GraphBreak(gb.UNSUPPORTED_BYTECODE, f"SET_FUNCTION_ATTRIBUTE on {fn.describe()}")
    _set_function_attribute(tx, fn, inst.arg, value)
    tx.push(fn)


def _set_function_attribute(tx, fn, flag: int, value) -> None:
    if flag == bytecode_compat.MF_CLOSURE:
        fn.closure = value.items
    elif flag == bytecode_compat.MF_ANNOTATIONS:
        fn.annotations = value
    elif flag == bytecode_compat.MF_KWDEFAULTS:
        fn.kwdefaults = value
    elif flag == bytecode_compat.MF_DEFAULTS:
        fn.defaults = value if isinstance(value, TupleVariable) else TupleVariable(value.unpack(tx))
    else:
        raise GraphBreak(gb.UNSUPPORTED_BYTECODE, f"function attribute flag {flag:#x}")


@register("BEFORE_WITH")
def BEFORE_WITH(tx, inst):
    ctx = tx.pop()
    if isinstance(ctx, ContextManagerVariable):
        result = ctx.enter(tx)
        tx.push(GradModeExitVariable(ctx))
        tx.push(result)
        return
    if isinstance(ctx, ObjectLike) and ctx.has_class_attr("__enter__") and ctx.has_class_attr("__exit__"):
        exit_fn = ctx.var_getattr(tx, "__exit__")
        enter = ctx.var_getattr(tx, "__enter__")
        if isinstance(exit_fn, UserMethodVariable) and isinstance(enter, UserMethodVariable):
            result = enter.call_function(tx, [], {})
            tx.push(exit_fn)
            tx.push(result)
            return
    raise GraphBreak(gb.UNSUPPORTED_CONTEXT_MANAGER, f"`with` on {ctx.describe()} is not supported")


@register("LOAD_BUILD_CLASS")
def LOAD_BUILD_CLASS(tx, inst):
    # a class statement: the body function is made in the trace, and the call of
    # __build_class__ (not traceable) breaks the graph there; the rest of the frame resumes
    import builtins

    tx.push(wrap(tx, builtins.__build_class__, None))


@register("RETURN_GENERATOR")
def RETURN_GENERATOR(tx, inst):
    if not getattr(tx, "is_generator", False):
        raise GraphBreak(gb.CALL_NOT_TRACED, "generator frame")
    tx.push(NONE)  # what the first resume sends; popped by the POP_TOP that follows


@register("YIELD_VALUE")
def YIELD_VALUE(tx, inst):
    if not getattr(tx, "is_generator", False):
        raise GraphBreak(gb.CALL_NOT_TRACED, "yield outside an inlined generator")
    tx.suspend(tx.pop())  # the consumer takes the value; resuming pushes what next() sends (None)




@register("GET_YIELD_FROM_ITER")
def GET_YIELD_FROM_ITER(tx, inst):
    # a generator stays itself; anything else becomes its iterator (iter())
    value = tx.pop()
    tx.push(value if isinstance(value, ListIteratorVariable) else value.iter(tx))


@register("SEND")
def SEND(tx, inst):
    # `yield from`: send the value to the sub-iterator; its next item is yielded by the
    # YIELD_VALUE that follows, its return value (StopIteration) ends the loop at the target
    value = tx.pop()
    receiver = tx.peek()
    sent = None if value.is_python_constant() and value.as_python_constant() is None else value
    send = getattr(receiver, "send_item", None)  # a generator made in the trace (inliner.py)
    if sent is not None and send is None:
        raise GraphBreak(gb.UNSUPPORTED_CALL, f"yield from {receiver.describe()} that is sent a value")
    item = send(tx, sent) if send is not None else receiver.next_item(tx)
    if item is None:
        if not bytecode_compat.SEND_KEEPS_RECEIVER:
            tx.pop()
        returned = getattr(receiver, "returned", None)
        tx.push(returned() if returned is not None else NONE)
        tx.jump_to(inst.argval)
    else:
        tx.push(item)


@register("END_SEND")
def END_SEND(tx, inst):
    # the end of a `yield from` (3.12): drop the sub-iterator under its return value
    value = tx.pop()
    tx.pop()
    tx.push(value)
