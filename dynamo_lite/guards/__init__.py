"""Guards: the facts a compiled graph relies on, compiled into one check.

The translator records ``Guard`` objects as it relies on properties of values
(see variables/builder.py).  ``GuardSet.compile`` states each guard as Python
expressions over the frame's arguments, ``___G`` (globals) and ``___F`` (the
function) -- the specification -- and compiles them into the check the hook
runs, ``check(*frame_args, ___G, ___F) -> bool`` (the calling convention of
csrc/eval_frame.c): a ``_C.GuardProgram`` in C (guards/program.py; tensor
metadata read from the TensorImpl by guards/tensor_api.py when available),
with the same expressions as a Python function (``py_fn``) for tests and for
``USE_PROGRAM = False``.  ``explain_failure`` (Python, only on a cache miss)
tells the user in words which fact changed.

Kinds are classes (guards/kinds.py, one per kind: its expressions, readable
line, failure words, evaluation rank and C emission); call sites build them
from Sources, e.g. ``output.add_guard(guards.TypeGuard(source, int))``.
Cheapest first in the Python check (``rank``): TYPE, ID, CONST, LENGTH,
NOT_IN, DICT_KEYS, TENSOR, the kinds that were expressions (NAN, FLOAT_REPR,
SET_EQ, NOT_IN_DICT, ABSENT_ATTR, IS, SAME, CONST_ATTR_IS, EXPR), then
GLOBAL_STATE; program.py orders the C program.  Whatever the C program cannot
state runs in a residual Python check, logged on the ``guards`` artifact.
Tested by tests/unit/test_guards.py and tests/api/test_recompiles.py.
"""
from __future__ import annotations

import builtins
import os
import sys
import itertools
from typing import Any, Optional

import torch

from .. import torch_compat
from ..source import Source, guard_local_name
from .kinds import (WeakConst, AbsentAttrGuard, BlockGuard, ConstAttrIsGuard, ConstGuard, DictKeysGuard, EmptyGuard, ExprGuard, FloatFactGuard, FloatReprGuard,
                    GlobalStateGuard, Guard, IdGuard, IsGuard, LengthGuard, NanGuard, NoOtherTracerGuard,
                    NotInDictGuard, NotInGlobalsGuard, SameObjectGuard, SetEqualsGuard, SetOrderGuard, ShapeEqGuard, ShapeGuardBase,
                    ShapeRangeGuard, ShapeRelGuard, TensorAliasingGuard, DistinctGuard, ClassLacksGuard, TensorGuard, TensorSpec, TypeGuard,
                    pretty_name)
from .program import build_program, order_guards, render_program

__all__ = ["Guard", "GuardSet", "CompiledGuard", "source_scope", "TensorSpec", "USE_PROGRAM",
           "TypeGuard", "IdGuard", "ConstGuard", "LengthGuard", "EmptyGuard", "NotInGlobalsGuard", "DictKeysGuard", "TensorGuard",
           "NanGuard", "FloatReprGuard", "SetEqualsGuard", "SetOrderGuard", "NotInDictGuard", "AbsentAttrGuard", "IsGuard",
           "SameObjectGuard", "BlockGuard", "ConstAttrIsGuard", "ExprGuard", "GlobalStateGuard", "NoOtherTracerGuard",
           "TensorAliasingGuard", "DistinctGuard", "ClassLacksGuard", "ShapeGuardBase", "ShapeRangeGuard", "ShapeEqGuard", "ShapeRelGuard", "FloatFactGuard"]

# Compile guards into a C GuardProgram (False: the Python check is the guard;
# tests flip it to compare the two; DYNAMO_LITE_PY_GUARDS=1 turns it off).
USE_PROGRAM: bool = os.environ.get("DYNAMO_LITE_PY_GUARDS", "0") != "1"

class GuardSet:
    """An ordered, de-duplicated collection of guards for one cache entry."""

    def __init__(self):
        self._guards: dict[Guard, None] = {}
        # lists that see every guard added, repeats included (a block call being recorded as a
        # template: variables/repeated_blocks.py)
        self.recorders: list[list] = []

    def add(self, guard: Guard) -> None:
        self._guards.setdefault(guard, None)
        for recorder in self.recorders:
            recorder.append(guard)

    def discard(self, guard: Guard) -> None:
        self._guards.pop(guard, None)

    def __iter__(self):
        # A guard on lst[0] or obj.attr must run after the TYPE/LENGTH guards of its
        # parent (the and-chain short-circuits), so sources nest outermost first.
        return iter(sorted(self._guards, key=lambda g: (_source_depth(g.source), g.rank)))

    def __len__(self):
        return len(self._guards)

    # ---- compilation -----------------------------------------------------
    def compile(self, arg_names: tuple[str, ...]) -> "CompiledGuard":
        arg_names = tuple(guard_local_name(n) for n in arg_names)
        namespace = _base_namespace()
        counter = itertools.count()
        parts: list[str] = []
        exprs: list[tuple[str, Guard]] = []

        def const(obj, weak: bool = False) -> str:
            name = f"___c{next(counter)}"
            if weak and type(obj).__weakrefoffset__:  # (compared by identity: held weakly)
                namespace[name] = WeakConst(obj)
                return f"{name}()"
            namespace[name] = obj
            return name

        guards = list(self)
        texts_of: dict[int, list[str]] = {}
        for guard in guards:
            texts_of[id(guard)] = guard.exprs(const)
            for expr in texts_of[id(guard)]:
                parts.append(expr)
                exprs.append((expr, guard))
        body = " and ".join(f"({p})" for p in parts) or "True"
        params = ", ".join([*arg_names, "___G", "___F"])
        src = f"def ___check({params}):\n    return {body}\n"
        if not USE_PROGRAM:
            guard = CompiledGuard(None, src, exprs, namespace, arg_names)
            guard.fn = guard.py_fn
            return guard
        exprs_of = lambda g: texts_of[id(g)]  # noqa: E731
        ordered = order_guards(guards, exprs_of)
        program, residual_src, ops, regs = build_program(ordered, exprs_of, tuple(arg_names), namespace)
        guard = CompiledGuard(program, src, exprs, namespace, arg_names, residual_source=residual_src)
        guard.program_ops = ops
        guard.program_regs = regs
        return guard

    def render(self) -> list[str]:
        """Readable lines, one per guard (for explain() and the guards log)."""
        return [describe_guard(g) for g in self]


def _base_namespace() -> dict[str, Any]:
    """The names every guard expression may use besides the frame's arguments, ___G and ___F."""
    return {"___builtins": builtins, "___torch": torch, "___sys": sys, "___torch_compat": torch_compat,
            "___object_getattribute": object.__getattribute__}


def source_scope(arg_names: tuple[str, ...], args: tuple, f_globals: dict, func) -> dict[str, Any]:
    """The names a source's expression (``source.name()``) is evaluated in, for a frame with these
    arguments (as a guard reads them)."""
    scope = _base_namespace()
    scope.update(zip((guard_local_name(n) for n in arg_names), args))
    scope["___G"] = f_globals
    scope["___F"] = func
    return scope


def _source_depth(source: Optional[Source]) -> int:
    depth = 0
    while getattr(source, "parent", None) is not None:
        source = source.parent
        depth += 1
    return depth


def describe_guard(g: Guard) -> str:
    return g.describe()


class CompiledGuard:
    """The compiled check of one cache entry, and the text to explain it.

    fn: the check, called by C as fn(*frame_args, frame_globals, func): a
        ``_C.GuardProgram`` (guards/program.py), or ``py_fn`` when
        ``USE_PROGRAM`` is off.
    py_fn: the same check as a Python function (the specification; built on
        first use; tests compare the two).
    source_code: py_fn's source (for the guards log).
    residual_source: source of the Python part of ``fn`` (expressions the C
        program does not translate), or None.
    program_ops: the C program's ops (None when ``USE_PROGRAM`` is off);
        ``program_text()`` renders them.
    program_regs: the value each loaded register holds, by key (program.py ``_Builder.regs``):
        a BlockGuard copies the ops into another program (``_Builder.inline``).
    arg_names: the check's parameters but ``___G`` and ``___F``.
    exprs: (expression, guard) pairs in GuardSet order.
    """

    def __init__(self, fn, source_code, exprs, namespace, arg_names, residual_source=None):
        self.fn = fn
        self.source_code = source_code
        self.exprs = exprs
        self.residual_source = residual_source
        self.program_ops: Optional[list] = None
        self.program_regs: Optional[dict] = None
        self._namespace = namespace
        self._arg_names = arg_names
        self._py_fn = None

    @property
    def arg_names(self) -> tuple[str, ...]:
        return self._arg_names

    def program_text(self) -> Optional[str]:
        """The C guard program, one op a line (None when the Python check is the guard)."""
        if self.program_ops is None:
            return None
        return render_program(self.program_ops, self._arg_names, self.residual_source)

    @property
    def py_fn(self):
        """``source_code`` compiled (on first use: the hook runs ``fn``)."""
        if self._py_fn is None:
            scope = dict(self._namespace)
            exec(compile(self.source_code, "<dynamo_lite guards>", "exec"), scope)  # noqa: S102
            self._py_fn = scope["___check"]
        return self._py_fn

    def explain_failure(self, args: tuple, f_globals: dict, func) -> Optional[str]:
        """The first failing fact, in words; None when the guard passes.  Evaluated with the
        thread's torch-function modes set aside: a mode the user entered must not see the reads
        of the guard expressions (``x.dtype``, ``x.stride()``), which eager never makes."""
        with torch_function_modes_off():
            return self._explain_failure(args, f_globals, func)

    def _explain_failure(self, args: tuple, f_globals: dict, func) -> Optional[str]:
        scope = dict(self._namespace)
        scope.update(zip(self._arg_names, args))
        scope["___G"] = f_globals
        scope["___F"] = func
        for expr, guard in self.exprs:
            try:
                ok = eval(expr, scope)  # noqa: S307 - our own generated expression
            except Exception as e:  # noqa: BLE001 - a guard that raises has failed
                return f"{describe_guard(guard)} (raised {type(e).__name__}: {e})"
            if not ok:
                return _failure_text(guard, scope)
        return None


class torch_function_modes_off:
    """Take this thread's torch-function modes off torch's stack, and put them back on exit (the
    raw stack operations: no mode's ``__enter__``/``__exit__`` runs)."""

    def __enter__(self):
        self._modes = [torch._C._pop_torch_function_stack() for _ in range(torch._C._len_torch_function_stack())]

    def __exit__(self, *exc):
        for mode in reversed(self._modes):
            torch._C._push_on_torch_function_stack(mode)
        self._modes = []


def _failure_text(guard: Guard, scope) -> str:
    if isinstance(guard, (ShapeGuardBase, FloatFactGuard)):
        return guard.explain_values(lambda src: eval(src.name(), scope))  # noqa: S307
    if isinstance(guard, BlockGuard):
        return guard.explain_in(scope)
    name = guard.source.name() if guard.source is not None else ""
    try:
        actual = eval(name, scope) if name else None  # noqa: S307
    except Exception:  # noqa: BLE001
        actual = None
    return guard.explain_failure(actual, pretty_name(name))
