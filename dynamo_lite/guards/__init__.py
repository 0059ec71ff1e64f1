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

Kinds (cheapest first in the Python check; program.py orders the C program):
    TYPE        type(value) is T
    ID          value is <object>                       (modules, functions, classes)
    CONST       type(value) is T and value == v         (None/bool/int/float/str/...)
    LENGTH      len(value) == n                         (tuples, lists, dicts)
    DICT_KEYS   list(value.keys()) == keys
    NOT_IN      name not in ___G                        (builtins not shadowed)
    TENSOR      type, dtype, device, shape, strides, requires_grad
    EXPR        any boolean expression over the sources (rare kinds)
Tested by tests/unit/test_guards.py and tests/api/test_recompiles.py.
"""
from __future__ import annotations

import builtins
import os
import sys
import dataclasses
import itertools
from typing import Any, Optional

import torch

from ..source import Source
from .program import build_program, order_guards

# Compile guards into a C GuardProgram (False: the Python check is the guard;
# tests flip it to compare the two; DYNAMO_LITE_PY_GUARDS=1 turns it off).
USE_PROGRAM: bool = os.environ.get("DYNAMO_LITE_PY_GUARDS", "0") != "1"

_ORDER = {"TYPE": 0, "ID": 1, "CONST": 2, "LENGTH": 3, "NOT_IN": 4, "DICT_KEYS": 5,
          "TENSOR": 6, "EXPR": 7, "GLOBAL_STATE": 8}


@dataclasses.dataclass(frozen=True)
class Guard:
    """One fact about one source.

    kind: one of the kinds above.
    source: where the value comes from (None for global-state guards).
    value: the expected value; its meaning depends on kind (a type, an object
        for ID, a constant, a length, a key tuple, a TensorSpec, a name, an
        expression string).
    """

    kind: str
    source: Optional[Source]
    value: Any = None

    def __hash__(self):
        v = self.value
        try:
            hash(v)
        except TypeError:
            v = id(v)
        return hash((self.kind, self.source, v if self.kind != "ID" else id(self.value)))

    def __eq__(self, other):
        if not isinstance(other, Guard) or other.kind != self.kind or other.source != self.source:
            return False
        if self.kind == "ID":
            return self.value is other.value
        return type(self.value) is type(other.value) and self.value == other.value


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    """What a TENSOR guard expects of a tensor."""

    type: type
    dtype: torch.dtype
    device: torch.device
    shape: tuple
    stride: tuple
    requires_grad: bool

    @classmethod
    def of(cls, t: torch.Tensor) -> "TensorSpec":
        return cls(type(t), t.dtype, t.device, tuple(t.shape), tuple(t.stride()), t.requires_grad)

    def describe(self) -> str:
        return (f"{self.type.__name__}(dtype={_short(self.dtype)}, device={self.device}, "
                f"shape={list(self.shape)}, stride={list(self.stride)}, "
                f"requires_grad={self.requires_grad})")


def _short(dtype) -> str:
    return str(dtype).replace("torch.", "")


class GuardSet:
    """An ordered, de-duplicated collection of guards for one cache entry."""

    def __init__(self):
        self._guards: dict[Guard, None] = {}

    def add(self, guard: Guard) -> None:
        self._guards.setdefault(guard, None)

    def __iter__(self):
        # A guard on lst[0] or obj.attr must run after the TYPE/LENGTH guards of its
        # parent (the and-chain short-circuits), so sources nest outermost first.
        return iter(sorted(self._guards, key=lambda g: (_source_depth(g.source), _ORDER[g.kind])))

    def __len__(self):
        return len(self._guards)

    # ---- compilation -----------------------------------------------------
    def compile(self, arg_names: tuple[str, ...]) -> "CompiledGuard":
        from ..source import guard_local_name

        arg_names = tuple(guard_local_name(n) for n in arg_names)
        namespace: dict[str, Any] = {"___builtins": builtins, "___torch": torch, "___sys": sys}
        counter = itertools.count()
        parts: list[str] = []
        exprs: list[tuple[str, Guard]] = []

        def const(obj) -> str:
            name = f"___c{next(counter)}"
            namespace[name] = obj
            return name

        guards = list(self)
        texts_of: dict[int, list[str]] = {}
        for guard in guards:
            texts_of[id(guard)] = _guard_exprs(guard, const)
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
        program, residual_src = build_program(ordered, exprs_of, tuple(arg_names), namespace)
        return CompiledGuard(program, src, exprs, namespace, arg_names, residual_source=residual_src)

    def render(self) -> list[str]:
        """Readable lines, one per guard (for explain() and the guards log)."""
        return [describe_guard(g) for g in self]


def _source_depth(source: Optional[Source]) -> int:
    depth = 0
    while getattr(source, "parent", None) is not None:
        source = source.parent
        depth += 1
    return depth


def _guard_exprs(guard: Guard, const) -> list[str]:
    kind, v = guard.kind, guard.value
    name = guard.source.name() if guard.source is not None else ""
    if kind == "TYPE":
        return [f"type({name}) is {const(v)}"]
    if kind == "ID":
        return [f"{name} is {const(v)}"]
    if kind == "CONST":
        if v is None or v is True or v is False or v is Ellipsis:
            return [f"{name} is {v!r}"]
        return [f"type({name}) is {const(type(v))}", f"{name} == {const(v)}"]
    if kind == "LENGTH":
        return [f"len({name}) == {v}"]
    if kind == "DICT_KEYS":
        return [f"list({name}.keys()) == {const(list(v))}"]
    if kind == "NOT_IN":
        return [f"{v!r} not in ___G"]
    if kind == "TENSOR":
        spec: TensorSpec = v
        return [
            f"type({name}) is {const(spec.type)}",
            f"{name}.dtype is {const(spec.dtype)}",
            f"{name}.device == {const(spec.device)}",
            f"{name}.shape == {const(torch.Size(spec.shape))}",
            f"{name}.stride() == {const(spec.stride)}",
            f"{name}.requires_grad is {spec.requires_grad!r}",
        ]
    if kind in ("EXPR", "GLOBAL_STATE"):
        text, consts = v
        for key, obj in consts:
            text = text.replace("{" + key + "}", const(obj))
        return [text]
    raise AssertionError(f"unknown guard kind {kind}")


def describe_guard(g: Guard) -> str:
    name = g.source.name() if g.source is not None else ""
    if g.kind == "TYPE":
        return f"{name}: type is {g.value.__qualname__}"
    if g.kind == "ID":
        return f"{name}: is the object {_short_repr(g.value)} (id {id(g.value):#x})"
    if g.kind == "CONST":
        return f"{name}: == {g.value!r}"
    if g.kind == "LENGTH":
        return f"{name}: len == {g.value}"
    if g.kind == "DICT_KEYS":
        return f"{name}: keys == {list(g.value)!r}"
    if g.kind == "NOT_IN":
        return f"global {g.value!r}: not defined (builtin used)"
    if g.kind == "TENSOR":
        return f"{name}: {g.value.describe()}"
    if g.kind in ("EXPR", "GLOBAL_STATE"):
        text = g.value[0]
        for key, obj in g.value[1]:
            text = text.replace("{" + key + "}", _short_repr(obj))
        return text
    return f"{g.kind} {name} {g.value!r}"


def _short_repr(obj) -> str:
    text = getattr(obj, "__qualname__", None) or type(obj).__qualname__
    return f"<{text}>" if not isinstance(obj, (int, float, str, bool, type(None))) else repr(obj)


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
    exprs: (expression, guard) pairs in GuardSet order.
    """

    def __init__(self, fn, source_code, exprs, namespace, arg_names, residual_source=None):
        self.fn = fn
        self.source_code = source_code
        self.exprs = exprs
        self.residual_source = residual_source
        self._namespace = namespace
        self._arg_names = arg_names
        self._py_fn = None

    @property
    def py_fn(self):
        """``source_code`` compiled (on first use: the hook runs ``fn``)."""
        if self._py_fn is None:
            scope = dict(self._namespace)
            exec(compile(self.source_code, "<dynamo_lite guards>", "exec"), scope)  # noqa: S102
            self._py_fn = scope["___check"]
        return self._py_fn

    def explain_failure(self, args: tuple, f_globals: dict, func) -> Optional[str]:
        """The first failing fact, in words; None when the guard passes."""
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


def _failure_text(guard: Guard, scope) -> str:
    name = guard.source.name() if guard.source is not None else ""
    try:
        actual = eval(name, scope) if name else None  # noqa: S307
    except Exception:  # noqa: BLE001
        actual = None
    pretty = _pretty_name(name)
    if guard.kind == "TENSOR" and isinstance(actual, torch.Tensor):
        spec: TensorSpec = guard.value
        now = TensorSpec.of(actual)
        for field in ("type", "dtype", "device", "shape", "stride", "requires_grad"):
            old, new = getattr(spec, field), getattr(now, field)
            if old != new:
                if field == "dtype":
                    old, new = _short(old), _short(new)
                if field == "type":
                    old, new = old.__name__, new.__name__
                if field in ("shape", "stride"):
                    old, new = list(old), list(new)
                return f"{pretty}.{field} changed from {old} to {new}"
    if guard.kind == "TENSOR":
        return f"{pretty} is no longer a tensor (now {type(actual).__name__})"
    if guard.kind == "TYPE":
        return f"type({pretty}) changed from {guard.value.__name__} to {type(actual).__name__}"
    if guard.kind == "CONST":
        return f"{pretty} changed from {guard.value!r} to {actual!r}"
    if guard.kind == "LENGTH":
        return f"len({pretty}) changed from {guard.value} to {len(actual) if hasattr(actual, '__len__') else '?'}"
    if guard.kind == "ID":
        return f"{pretty} is a different object than when compiled ({_short_repr(actual)})"
    if guard.kind == "DICT_KEYS":
        return f"keys of {pretty} changed from {list(guard.value)} to {list(actual.keys()) if hasattr(actual, 'keys') else '?'}"
    if guard.kind == "NOT_IN":
        return f"global {guard.value!r} now shadows the builtin"
    return f"failed: {describe_guard(guard)}"


def _pretty_name(name: str) -> str:
    import re

    name = re.sub(r"___G\[('([^']*)')\]", r"\2", name)
    name = re.sub(r"___F\.__closure__\[\d+\]\.cell_contents", "<closure var>", name)
    name = re.sub(r"\._parameters\['([^']*)'\]", r".\1", name)
    name = re.sub(r"\._buffers\['([^']*)'\]", r".\1", name)
    name = re.sub(r"\._modules\['([^']*)'\]", r".\1", name)
    return name
