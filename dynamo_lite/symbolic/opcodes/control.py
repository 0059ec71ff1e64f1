"""Control flow: jumps decided at trace time, loops (unrolled), iteration, return."""
from __future__ import annotations

from ... import graph_breaks as gb
from ... import bytecode_compat
from ...exc import GraphBreak
from ...variables.constant import ConstantVariable, NONE
from ...variables.sequences import ListIteratorVariable, TupleVariable
from ...variables.builder import wrap
from ...variables.exceptions import ExceptionVariable
from ...variables.tensor import TensorVariable
from . import register
from .load_store import LOAD_CONST


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
                raise GraphBreak(gb.DATA_DEPENDENT, f"`is None` test on {value.describe()} not known at trace time")
            is_none = False
        outcome = is_none
    else:
        outcome = _truth(tx, value)
    taken = outcome == jump_if
    if pops or not taken:
        tx.pop()
    if taken:
        tx.jump_to(inst.argval)


def _truth(tx, value) -> bool:
    """bool(value), known at trace time, or a graph break at the instruction that tests it."""
    outcome = value.truthiness(tx)
    if outcome is None:
        if isinstance(value, TensorVariable):
            raise GraphBreak(gb.TENSOR_BRANCH, "branch on a tensor value (data-dependent control flow)")
        raise GraphBreak(gb.DATA_DEPENDENT, f"branch on {value.describe()} not known at trace time")
    return bool(outcome)


register(*bytecode_compat.CONDITIONAL_JUMPS)(_branch)


@register(bytecode_compat.OP_TO_BOOL)
def to_bool(tx, inst):
    # (3.13) bool(TOS) before a conditional jump or `not`.  A truth not known at trace time breaks
    # here (not at the jump after it): the trace may have inlined a __bool__ to find out, and
    # Python must run it, once; a break here continues in one resume function per branch of
    # that jump (bytecode_compat.fused_truth_test), as a break at a 3.12 jump does.
    outcome = _truth(tx, tx.peek())
    tx.pop()
    tx.push(ConstantVariable(outcome))


@register(*bytecode_compat.UNCONDITIONAL_JUMPS)
def JUMP(tx, inst):
    tx.jump_to(inst.argval)


@register("RETURN_VALUE", "RETURN_CONST")
def RETURN_VALUE(tx, inst):
    if bytecode_compat.return_value_of(inst)[0]:
        LOAD_CONST(tx, inst)  # (3.12's RETURN_CONST: the constant as LOAD_CONST pushes it)
    tx.return_value = tx.pop()
    tx.done = True


@register("GET_ITER")
def GET_ITER(tx, inst):
    tx.push(tx.pop().iter(tx))


@register("FOR_ITER")
def FOR_ITER(tx, inst):
    it = tx.peek()
    if not isinstance(it, ListIteratorVariable):
        raise GraphBreak(gb.UNSUPPORTED_ITERATION, f"iterating over {it.describe()}")
    item = it.next_item(tx)
    if item is None:
        tx.pop()
        tx.jump_to(inst.argval)
        tx.ip += bytecode_compat.FOR_ITER_EXIT_SKIP  # (3.12: past the END_FOR there)
    else:
        tx.push(item)


@register("END_FOR")
def END_FOR(tx, inst):
    # the end of a for loop (an exhausted FOR_ITER jumps past it)
    tx.popn(bytecode_compat.END_FOR_POPS)


# ---- exceptions: raised by traced code and handled by its own handlers ---------------
def _as_exception(tx, value):
    """The exception object a `raise` of ``value`` raises (None: not modelled)."""
    if isinstance(value, ExceptionVariable):
        return value
    if value.is_python_constant():
        cls = value.as_python_constant()
        if isinstance(cls, type) and issubclass(cls, BaseException):
            try:
                return ExceptionVariable.create(tx, cls, [], {})
            except GraphBreak:
                return None
    return None


@register("RAISE_VARARGS")
def RAISE_VARARGS(tx, inst):
    if inst.arg == 0:  # bare `raise` in a handler: the exception being handled
        if not tx.handling:
            raise GraphBreak(gb.EXCEPTION_RAISED, "bare raise outside a handler the trace entered")
        tx.raise_exception(tx.handling[-1], reraise=True)
    cause = tx.pop() if inst.arg == 2 else None
    exc = _as_exception(tx, tx.pop())
    if exc is None:
        raise GraphBreak(gb.EXCEPTION_RAISED, "raise statement (the exception is raised by Python)")
    if cause is not None:  # `raise exc from cause`
        if cause.is_python_constant() and cause.as_python_constant() is None:
            exc.cause = cause
        else:
            exc.cause = _as_exception(tx, cause)
            if exc.cause is None:
                raise GraphBreak(gb.EXCEPTION_RAISED, "raise ... from a cause the trace does not model")
        exc.suppress_context = True
    handled = _handled_exception(tx)
    if handled is not None and handled is not exc:
        exc.context = handled  # implicit chaining: raised while another exception is handled
        link = handled  # as CPython: cut the chain where it would come back to exc (no cycles)
        while getattr(link, "context", None) is not None:
            if link.context is exc:
                link.context = None
                break
            link = link.context
    tx.raise_exception(exc)


def _handled_exception(tx):
    """The exception being handled (sys.exc_info()[1]) in the innermost traced frame that handles one."""
    while tx is not None:
        if tx.handling:
            return tx.handling[-1]
        tx = tx.parent
    return None


@register("RERAISE")
def RERAISE(tx, inst):
    tx.raise_exception(tx.pop(), reraise=True)


@register("PUSH_EXC_INFO")
def PUSH_EXC_INFO(tx, inst):
    exc = tx.pop()
    tx.push(tx.handling[-1] if tx.handling else NONE)  # the previously handled exception
    tx.push(exc)
    tx.handling.append(exc)


@register("POP_EXCEPT")
def POP_EXCEPT(tx, inst):
    tx.pop()
    if tx.handling:
        tx.handling.pop()


@register("CHECK_EXC_MATCH")
def CHECK_EXC_MATCH(tx, inst):
    classes = tx.pop()
    exc = tx.peek()
    if not classes.is_python_constant():
        if not isinstance(classes, TupleVariable) or not classes.is_python_constant():
            raise GraphBreak(gb.VALUE_UNKNOWN, "except clause with classes not known at trace time")
    match = classes.as_python_constant()
    try:
        tx.push(ConstantVariable(issubclass(exc.python_type(), match)))
    except TypeError as e:
        raise GraphBreak(gb.OPERATION_RAISES, "except clause with something that is not an exception class") from e


@register("WITH_EXCEPT_START")
def WITH_EXCEPT_START(tx, inst):
    exc = tx.peek(1)
    exit_fn = tx.peek(4)
    tx.push(exit_fn.call_function(tx, [wrap(tx, exc.python_type(), None), exc, NONE], {}))


@register("LOAD_ASSERTION_ERROR")
def LOAD_ASSERTION_ERROR(tx, inst):
    tx.push(wrap(tx, AssertionError, None))


