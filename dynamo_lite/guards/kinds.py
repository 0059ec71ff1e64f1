"""Guard kinds: one class per kind of fact a compiled graph relies on.

Every kind is a frozen dataclass built from ``Source`` trees (source.py) and
constants -- never from pre-rendered ``source.name()`` text -- and implements:

    exprs(const) -> list[str]    the Python expressions stating the fact (the
                                 specification: the Python check, failure
                                 explanations and parity tests use them);
                                 ``const(obj)`` names a constant in the check
    describe() -> str            the readable line (explain(), the guards log)
    explain_failure(actual, pretty) -> str
                                 the words on a cache miss (``actual``: the value
                                 now at ``source``; ``pretty``: its readable name)
    emit(b)                      the C ops (guards/program.py ``_Builder``), loaded
                                 from the Source tree; raises ``Untranslatable``
                                 (the whole guard goes to the residual Python
                                 check) or sends part of itself there with
                                 ``b.residual(self, text)``
    reads() -> list[Source]      the sources the check reads (evaluation order:
                                 it runs after the establishing guards of each)

and declares ``rank`` (GuardSet order among guards at the same source depth),
``establishes`` (the kind says what the object at ``source`` is: guards reading
through it run after it) and ``local_priority`` (C program order when
``source`` is a frame argument).  ``source`` is the anchor: the source whose
nesting depth orders the guard (None: depth 0).

Kinds (``kind`` names them in logs):
    TYPE            type(s) is T
    ID              s is <object>                            (modules, functions, classes)
    CONST           type(s) is T and s == v                  (None/bool/int/float/str/...)
    LENGTH          len(s) == n                              (tuples, lists, dicts)
    EMPTY           len(s.a) == 0 for each attribute a       (a module's hook dicts)
    NOT_IN          name not in ___G                         (builtins not shadowed)
    DICT_KEYS       list(s.keys()) == keys
    TENSOR          type, dtype, device, shape, strides, requires_grad
    NAN             type(s) is float and s != s              (a NaN constant)
    FLOAT_REPR      repr(s) == text                          (the sign of 0.0)
    SET_EQ          type(s) is set and s == v
    SET_ORDER       list(s) == elements                      (a set read from the frame: its order)
    NOT_IN_DICT     name not in s.<__dict__>                 (no instance attribute)
    ABSENT_ATTR     not hasattr(s, name)
    IS              s.<attr path> is obj                     (x.__func__, x.__code__, m.training)
    SAME            s is other                               (two sources, one object)
    BLOCK           a repeated block's template's guards hold for s (one check, copied into C)
    CONST_ATTR_IS   obj.attr is v                            (an attribute of a fixed object)
    SHAPE_RANGE     lo <= s <= hi                           (a symbolic size or int input)
    SHAPE_EQ        s == expr                               (sizes shared, strides, specialised)
    SHAPE_REL       a relation over sizes and ints          (divisibility, branches taken)
    EXPR            any boolean expression (text with {key} constants)
    GLOBAL_STATE    an EXPR about interpreter state (grad mode, default dtype)
Tested by tests/unit/test_guards.py (each kind: Python and C agree).
"""
from __future__ import annotations

import dataclasses
import re
import weakref
from typing import Any, Callable, ClassVar, Optional

import torch

from ..source import AttrSource, GenericAttrSource, LocalSource, Source
from . import tensor_api
from .. import static

Const = Callable[..., str]  # const(obj, weak=False): names a constant object in the check's namespace
_SINGLETONS = (None, True, False, Ellipsis)


def _is_singleton(v) -> bool:
    return any(v is s for s in _SINGLETONS)


def _same_value(a, b) -> bool:
    """Field equality for de-duplication: same type and ==, identity when == fails."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - an odd __eq__: compare by identity
        return False


def _hashable(v):
    try:
        hash(v)
    except TypeError:
        return id(v)
    return v


def _short(dtype) -> str:
    return str(dtype).replace("torch.", "")


def _is_constant_value(v) -> bool:
    """A value whose repr runs no user code (exact builtin constants, tuples of them)."""
    if type(v) in (tuple, frozenset, torch.Size):
        return all(_is_constant_value(x) for x in v)
    return type(v) in (int, float, str, bool, bytes, complex, type(None))


def short_repr(obj) -> str:
    """How a constant appears in a readable guard line."""
    text = static.qualname(obj)  # (never an attribute read on a user object: its __getattr__ may run)
    return f"<{text}>" if not isinstance(obj, (int, float, str, bool, type(None))) else repr(obj)


def hold(obj):
    """How a guard keeps an object it compares by identity: a weak reference when the object
    takes one (a compiled entry must not keep a user's model, module or function alive: the C
    program watches it too and fails every run once it dies, csrc/guards.c), else ``(obj,)``."""
    if type(obj).__weakrefoffset__:  # (a static read: no user code)
        try:
            return weakref.ref(obj)
        except TypeError:
            pass
    return (obj,)


def held_object(held):
    """The object ``hold`` kept (None once a weakly held one has died)."""
    return held() if type(held) is weakref.ReferenceType else held[0]


def held_operand(held) -> tuple[int, Any]:
    """(n, obj) of a CHECK_ID / LOAD_CONST op about the held object: n = 1 with the weak
    reference (the program watches it), else 0 with the object."""
    return (1, held) if type(held) is weakref.ReferenceType else (0, held[0])


class WeakConst(weakref.ref):
    """A constant of the Python check (``name()`` in its text) held weakly: the object, or a
    marker no value is once it has died."""

    __slots__ = ()

    def __call__(self):
        obj = super().__call__()
        return _GONE if obj is None else obj


_GONE = object()


def _name(source: Optional[Source]) -> str:
    return source.name() if source is not None else ""


class Guard:
    """Base of the guard kinds: one fact, checked on every call of a cache entry.

    Subclasses are frozen dataclasses; their fields are the fact.  Equality
    (de-duplication in GuardSet) compares kind and fields: ``_IDENTITY`` fields
    by identity, the others by type and value.
    """

    kind: ClassVar[str]
    rank: ClassVar[int] = 7  # GuardSet order among guards at the same source depth
    establishes: ClassVar[bool] = False  # says what the object at `source` is
    local_priority: ClassVar[Optional[int]] = None  # C order when `source` is a frame argument
    _IDENTITY: ClassVar[tuple[str, ...]] = ()  # fields compared by identity

    source: Optional[Source]  # the anchor (every kind declares it as a field)

    def exprs(self, const: Const) -> list[str]:
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError

    def explain_failure(self, actual, pretty: str) -> str:
        return f"failed: {self.describe()}"

    def reads(self) -> list[Source]:
        return [self.source] if self.source is not None else []

    def emit(self, b) -> None:
        raise NotImplementedError

    def priority(self) -> int:
        """C program order (guards/program.py): arguments' cheap facts, their tensors,
        global state, the rest."""
        if self.local_priority is not None and isinstance(self.source, LocalSource):
            return self.local_priority
        return 3

    # ---- identity ----------------------------------------------------------------
    def _fields(self):
        return [(f.name, getattr(self, f.name)) for f in dataclasses.fields(self)]

    def __eq__(self, other):
        if type(other) is not type(self):
            return False
        for name, v in self._fields():
            w = getattr(other, name)
            if not (v is w if name in self._IDENTITY else _same_value(v, w)):
                return False
        return True

    def __hash__(self):
        cached = self.__dict__.get("_hash")  # (frozen: computed once; a model has thousands)
        if cached is None:
            cached = hash((type(self), *(id(v) if n in self._IDENTITY else _hashable(v) for n, v in self._fields())))
            object.__setattr__(self, "_hash", cached)
        return cached


# ---- kinds about one source --------------------------------------------------------
@dataclasses.dataclass(frozen=True, eq=False)
class TypeGuard(Guard):
    kind: ClassVar[str] = "TYPE"
    rank: ClassVar[int] = 0
    establishes: ClassVar[bool] = True
    local_priority: ClassVar[Optional[int]] = 0
    source: Source
    type: type  # the exact type (type(value) is T)

    def exprs(self, const):
        return [f"type({self.source.name()}) is {const(self.type)}"]

    def describe(self):
        return f"{self.source.name()}: type is {self.type.__qualname__}"

    def explain_failure(self, actual, pretty):
        return f"type({pretty}) changed from {self.type.__name__} to {type(actual).__name__}"

    def emit(self, b):
        b.op("CHECK_TYPE", b.reg(self.source), obj=self.type)


class _HoldsObject:
    """A guard kind whose ``held`` field keeps an object compared by identity (``hold``)."""

    held: Any

    @property
    def obj(self):
        return held_object(self.held)


@dataclasses.dataclass(frozen=True, eq=False, init=False)
class IdGuard(_HoldsObject, Guard):
    kind: ClassVar[str] = "ID"
    rank: ClassVar[int] = 1
    establishes: ClassVar[bool] = True
    local_priority: ClassVar[Optional[int]] = 0
    source: Source
    held: Any  # the object, as ``hold`` keeps it (weakly when it can be)

    def __init__(self, source: Source, obj: Any = None, *, held: Any = None):
        object.__setattr__(self, "source", source)  # (held: as kept already, from dataclasses.replace)
        object.__setattr__(self, "held", hold(obj) if held is None else held)

    def _fields(self):
        return [("source", self.source), ("obj", self.obj)]

    _IDENTITY: ClassVar[tuple[str, ...]] = ("obj",)

    def exprs(self, const):
        return [f"{self.source.name()} is {const(self.obj, weak=True)}"]

    def describe(self):
        return f"{self.source.name()}: is the object {short_repr(self.obj)} (id {id(self.obj):#x})"

    def explain_failure(self, actual, pretty):
        return f"{pretty} is a different object than when compiled ({short_repr(actual)})"

    def emit(self, b):
        n, obj = held_operand(self.held)
        b.op("CHECK_ID", b.reg(self.source), n=n, obj=obj)


@dataclasses.dataclass(frozen=True, eq=False)
class ConstGuard(Guard):
    kind: ClassVar[str] = "CONST"
    rank: ClassVar[int] = 2
    establishes: ClassVar[bool] = True
    local_priority: ClassVar[Optional[int]] = 0
    source: Source
    value: Any  # None/bool/int/float/str/bytes/Size/frozenset...: compared by type and ==

    def exprs(self, const):
        name, v = self.source.name(), self.value
        if _is_singleton(v):
            return [f"{name} is {v!r}"]
        return [f"type({name}) is {const(type(v))}", f"{name} == {const(v)}"]

    def describe(self):
        return f"{self.source.name()}: == {self.value!r}"

    def explain_failure(self, actual, pretty):
        now = repr(actual) if _is_constant_value(actual) else short_repr(actual)  # (a user object: by type)
        return f"{pretty} changed from {self.value!r} to {now}"

    def emit(self, b):
        reg, v = b.reg(self.source), self.value
        if _is_singleton(v):
            b.op("CHECK_ID", reg, obj=v)
        else:
            b.op("CHECK_TYPE", reg, obj=type(v))
            b.op("CHECK_EQ", reg, obj=v)


@dataclasses.dataclass(frozen=True, eq=False)
class LengthGuard(Guard):
    kind: ClassVar[str] = "LENGTH"
    rank: ClassVar[int] = 3
    local_priority: ClassVar[Optional[int]] = 0
    source: Source
    length: int

    def exprs(self, const):
        return [f"len({self.source.name()}) == {self.length}"]

    def describe(self):
        return f"{self.source.name()}: len == {self.length}"

    def explain_failure(self, actual, pretty):
        now = len(actual) if hasattr(actual, "__len__") else "?"
        return f"len({pretty}) changed from {self.length} to {now}"

    def emit(self, b):
        b.op("CHECK_LEN", b.reg(self.source), n=self.length)


@dataclasses.dataclass(frozen=True, eq=False)
class EmptyGuard(Guard):
    """Each of ``s.<attr>`` is empty (``len == 0``): a module's hook dicts, one guard for all of
    them (a model has thousands: one guard each would make its guard set compile slower)."""

    kind: ClassVar[str] = "EMPTY"
    rank: ClassVar[int] = 3
    local_priority: ClassVar[Optional[int]] = 0
    source: Source
    attrs: tuple  # attribute names

    def exprs(self, const):
        return [f"len({self.source.name()}.{a}) == 0" for a in self.attrs]

    def describe(self):
        return f"{self.source.name()}: {', '.join(self.attrs)} empty"

    def explain_failure(self, actual, pretty):
        full = [a for a in self.attrs if len(getattr(actual, a, ()) or ())]
        return f"{pretty}.{full[0] if full else self.attrs[0]} is no longer empty"

    def emit(self, b):
        for a in self.attrs:
            b.op("CHECK_LEN", b.reg(AttrSource(self.source, a)), n=0)


@dataclasses.dataclass(frozen=True, eq=False)
class NotInGlobalsGuard(Guard):
    """The global ``name`` is not defined (so the builtin of that name is what was read)."""

    kind: ClassVar[str] = "NOT_IN"
    rank: ClassVar[int] = 4
    name: str
    source: Optional[Source] = None  # always None (reads ___G)

    def exprs(self, const):
        return [f"{self.name!r} not in ___G"]

    def describe(self):
        return f"global {self.name!r}: not defined (builtin used)"

    def explain_failure(self, actual, pretty):
        return f"global {self.name!r} now shadows the builtin"

    def emit(self, b):
        b.op("CHECK_NOT_IN", b.globals_reg(), obj=self.name)


@dataclasses.dataclass(frozen=True, eq=False)
class DictKeysGuard(Guard):
    kind: ClassVar[str] = "DICT_KEYS"
    rank: ClassVar[int] = 5
    source: Source
    keys: tuple  # the keys, in order

    def exprs(self, const):
        return [f"list({self.source.name()}.keys()) == {const(list(self.keys))}"]

    def describe(self):
        return f"{self.source.name()}: keys == {list(self.keys)!r}"

    def explain_failure(self, actual, pretty):
        now = list(actual.keys()) if hasattr(actual, "keys") else "?"
        return f"keys of {pretty} changed from {list(self.keys)} to {now}"

    def emit(self, b):
        b.op("CHECK_KEYS", b.reg(self.source), obj=list(self.keys))


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    """What a TENSOR guard expects of a tensor.  A size or stride that is symbolic in the graph
    (dynamic shapes) is its symbol's text (``"s0"``, ``"3*s1"``) instead of an int: the TENSOR
    guard does not check it, the shape guards (SHAPE_RANGE, SHAPE_EQ, SHAPE_REL) do."""

    type: type
    dtype: torch.dtype
    device: torch.device
    shape: tuple  # ints, or str for a symbolic size
    stride: tuple  # ints, or str for a symbolic stride
    requires_grad: bool

    @classmethod
    def of(cls, t: torch.Tensor, shape=None, stride=None) -> "TensorSpec":
        return cls(type(t), t.dtype, t.device, tuple(t.shape) if shape is None else tuple(shape),
                   tuple(t.stride()) if stride is None else tuple(stride), t.requires_grad)

    def is_static(self) -> bool:
        return all(type(v) is int for v in (*self.shape, *self.stride))

    def describe(self) -> str:
        return (f"{self.type.__name__}(dtype={_short(self.dtype)}, device={self.device}, "
                f"shape={_dims(self.shape)}, stride={_dims(self.stride)}, "
                f"requires_grad={self.requires_grad})")


def _dims(values) -> str:
    return "[" + ", ".join(str(v) for v in values) + "]"


@dataclasses.dataclass(frozen=True, eq=False)
class TensorGuard(Guard):
    kind: ClassVar[str] = "TENSOR"
    rank: ClassVar[int] = 6
    establishes: ClassVar[bool] = True
    local_priority: ClassVar[Optional[int]] = 1
    source: Source
    spec: TensorSpec

    @classmethod
    def of(cls, source: Source, t: torch.Tensor, shape=None, stride=None) -> "TensorGuard":
        return cls(source, TensorSpec.of(t, shape, stride))

    def exprs(self, const):
        name, spec = self.source.name(), self.spec
        head = [
            f"type({name}) is {const(spec.type)}",
            f"{name}.dtype is {const(spec.dtype)}",
            f"{name}.device == {const(spec.device)}",
        ]
        if spec.is_static():
            dims = [f"{name}.shape == {const(torch.Size(spec.shape))}",
                    f"{name}.stride() == {const(spec.stride)}"]
        else:  # symbolic sizes/strides: the number of dims and the static ones
            dims = [f"{name}.dim() == {len(spec.shape)}"]
            dims += [f"{name}.shape[{i}] == {v}" for i, v in enumerate(spec.shape) if type(v) is int]
            dims += [f"{name}.stride()[{i}] == {v}" for i, v in enumerate(spec.stride) if type(v) is int]
        return [*head, *dims, f"{name}.requires_grad is {spec.requires_grad!r}"]

    def describe(self):
        return f"{self.source.name()}: {self.spec.describe()}"

    def explain_failure(self, actual, pretty):
        if not isinstance(actual, torch.Tensor):
            return f"{pretty} is no longer a tensor (now {type(actual).__name__})"
        spec, now = self.spec, TensorSpec.of(actual)
        for field in ("type", "dtype", "device", "shape", "stride", "requires_grad"):
            old, new = getattr(spec, field), getattr(now, field)
            if field in ("shape", "stride") and not spec.is_static():
                same = len(old) == len(new) and all(type(o) is not int or o == n for o, n in zip(old, new))
            else:
                same = old == new
            if not same:
                if field == "dtype":
                    old, new = _short(old), _short(new)
                if field == "type":
                    old, new = old.__name__, new.__name__
                if field in ("shape", "stride"):
                    old, new = _dims(old), list(new)
                return f"{pretty}.{field} changed from {old} to {new}"
        return f"failed: {self.describe()}"

    def emit(self, b):
        spec = self.spec
        codes = tensor_api.codes(spec.dtype, spec.device) if tensor_api.eligible(spec.type) else None
        # -1: a symbolic size or stride, not checked here (sizes and strides are never negative)
        sizes = tuple(v if type(v) is int else -1 for v in spec.shape)
        strides = tuple(v if type(v) is int else -1 for v in spec.stride)
        desc = (spec.type, spec.dtype, spec.device, sizes, strides, bool(spec.requires_grad), codes)
        b.op("CHECK_TENSOR", b.reg(self.source), obj=desc)


# ---- kinds that were EXPR text (same text, same rank: the same order and log lines) --
@dataclasses.dataclass(frozen=True, eq=False)
class NanGuard(Guard):
    """A NaN float constant (NaN == NaN is False: a CONST guard would never pass)."""

    kind: ClassVar[str] = "NAN"
    source: Source

    def exprs(self, const):
        name = self.source.name()
        return [f"type({name}) is {const(float)} and {name} != {name}"]

    def describe(self):
        name = self.source.name()
        return f"type({name}) is {short_repr(float)} and {name} != {name}"

    def emit(self, b):
        # for an exact float, float.hex(x) is 'nan' for every NaN (any sign or payload) and only then
        reg = b.reg(self.source)
        b.op("CHECK_TYPE", reg, obj=float)
        b.op("CHECK_EQ", b.call0(b.attr(reg, "hex")), obj="nan")


@dataclasses.dataclass(frozen=True, eq=False)
class FloatReprGuard(Guard):
    """``repr(s) == text`` for a float (0.0 == -0.0: the CONST guard does not see the sign).
    Always added after the CONST guard of ``source`` (which checks the exact type first)."""

    kind: ClassVar[str] = "FLOAT_REPR"
    source: Source
    text: str  # repr() of the value

    def exprs(self, const):
        return [f"___builtins.repr({self.source.name()}) == {self.text!r}"]

    def describe(self):
        return self.exprs(None)[0]

    def emit(self, b):
        # float.__repr__ of an exact float is repr(): checked through the type, not the instance
        reg = b.reg(self.source)
        b.op("CHECK_TYPE", reg, obj=float)
        b.op("CHECK_EQ", b.call0(b.attr(reg, "__repr__")), obj=self.text)


@dataclasses.dataclass(frozen=True, eq=False)
class SetEqualsGuard(Guard):
    kind: ClassVar[str] = "SET_EQ"
    source: Source
    value: frozenset  # the elements (constants)

    def exprs(self, const):
        name = self.source.name()
        return [f"type({name}) is set and {name} == {const(set(self.value))}"]

    def describe(self):
        name = self.source.name()
        return f"type({name}) is set and {name} == {short_repr(set(self.value))}"

    def emit(self, b):
        reg = b.reg(self.source)
        b.op("CHECK_TYPE", reg, obj=set)
        b.op("CHECK_EQ", reg, obj=set(self.value))


@dataclasses.dataclass(frozen=True, eq=False)
class SetOrderGuard(Guard):
    """``list(s) == elements``: a set (or frozenset) of constants iterates in this order.  Its
    order is its history's (deletions, table growth), not a function of its elements: the trace
    that used it holds only for sets that iterate the same way (iterating runs no user code)."""

    kind: ClassVar[str] = "SET_ORDER"
    source: Source
    elements: tuple  # the constants, in iteration order

    def exprs(self, const):
        return [f"list({self.source.name()}) == {const(list(self.elements))}"]

    def describe(self):
        return f"{self.source.name()}: iterates as {short_repr(list(self.elements))}"

    def emit(self, b):
        b.op("CHECK_KEYS", b.reg(self.source), obj=list(self.elements))


@dataclasses.dataclass(frozen=True, eq=False)
class NotInDictGuard(Guard):
    """``name not in s.<dict_attr>`` (no instance attribute shadows what was read)."""

    kind: ClassVar[str] = "NOT_IN_DICT"
    source: Source
    name: str
    dict_attr: str = "__dict__"
    generic: bool = False  # read the dict with object.__getattribute__ (the class has its own)

    def _dict(self) -> Source:
        return (GenericAttrSource if self.generic else AttrSource)(self.source, self.dict_attr)

    def exprs(self, const):
        return [f"{self.name!r} not in {self._dict().name()}"]

    def describe(self):
        return self.exprs(None)[0]

    def reads(self):
        return [self._dict()]

    def emit(self, b):
        b.op("CHECK_NOT_IN", b.reg(self._dict()), obj=self.name)


@dataclasses.dataclass(frozen=True, eq=False)
class AbsentAttrGuard(Guard):
    """``not hasattr(s, name)`` (CHECK_NOT_HASATTR: the lookup hasattr makes, in C)."""

    kind: ClassVar[str] = "ABSENT_ATTR"
    source: Source
    name: str

    def exprs(self, const):
        return [f"not ___builtins.hasattr({self.source.name()}, {self.name!r})"]

    def describe(self):
        return self.exprs(None)[0]

    def emit(self, b):
        b.op("CHECK_NOT_HASATTR", b.reg(self.source), obj=self.name)


@dataclasses.dataclass(frozen=True, eq=False, init=False)
class IsGuard(_HoldsObject, Guard):
    """``s.<attrs> is obj``: the object reached from ``source`` through an attribute path
    (``m.training is True``, ``f.__func__ is <fn>``); anchored (ordered) at ``source``."""

    kind: ClassVar[str] = "IS"
    _IDENTITY: ClassVar[tuple[str, ...]] = ("obj",)
    source: Source
    attrs: tuple  # attribute names, may be empty
    held: Any  # the object, as ``hold`` keeps it (weakly when it can be)

    def __init__(self, source: Source, attrs: tuple, obj: Any = None, *, held: Any = None):
        object.__setattr__(self, "source", source)  # (held: as kept already, from dataclasses.replace)
        object.__setattr__(self, "attrs", attrs)
        object.__setattr__(self, "held", hold(obj) if held is None else held)

    def _fields(self):
        return [("source", self.source), ("attrs", self.attrs), ("obj", self.obj)]

    def _target(self) -> Source:
        src = self.source
        for a in self.attrs:
            src = AttrSource(src, a)
        return src

    def exprs(self, const):
        rhs = repr(self.obj) if _is_singleton(self.obj) else const(self.obj, weak=True)
        return [f"{self._target().name()} is {rhs}"]

    def describe(self):
        return f"{self._target().name()} is {short_repr(self.obj)}"

    def reads(self):
        return [self._target()]

    def emit(self, b):
        n, obj = held_operand(self.held)
        b.op("CHECK_ID", b.reg(self._target()), n=n, obj=obj)


@dataclasses.dataclass(frozen=True, eq=False)
class SameObjectGuard(Guard):
    """``a is b``: two sources hold one object (aliasing the trace relied on)."""

    kind: ClassVar[str] = "SAME"
    a: Source
    b: Source
    source: Optional[Source] = None  # anchored at depth 0

    def exprs(self, const):
        return [f"{self.a.name()} is {self.b.name()}"]

    def describe(self):
        return self.exprs(None)[0]

    def reads(self):
        return [self.a, self.b]

    def emit(self, b):
        ra = b.reg(self.a)
        b.op("CHECK_SAME", ra, b.reg(self.b))


_BLOCK_NAME = re.compile(r"(?<![\w.])___block(?!\w)")


@dataclasses.dataclass(frozen=True, eq=False)
class BlockGuard(Guard):
    """The guards of a repeated block's template, stated about another block of its class
    (variables/repeated_blocks.py): ``check(s, *frame args, ___G, ___F)``, ``check`` the
    template's guards compiled once over ``("___block", *frame args)`` (a CompiledGuard).  In C
    the template's ops are copied into the program with ``s``'s register for ``___block``
    (``_Builder.inline``): one guard to add and order per block instead of a hundred, the same
    ops on every call."""

    kind: ClassVar[str] = "BLOCK"
    _IDENTITY: ClassVar[tuple[str, ...]] = ("check",)
    source: Source  # the block
    check: Any  # CompiledGuard over ("___block", *frame args)
    template_root: Any  # the template's block (a Source): named in the readable line
    outside: tuple = ()  # sources outside the block the check reads (it runs after what establishes them)

    def reads(self):
        return [self.source, *self.outside]

    def exprs(self, const):
        args = ", ".join(self.check.arg_names[1:])
        return [f"{const(self.check.fn)}({self.source.name()}, {args}{', ' if args else ''}___G, ___F)"]

    def describe(self):
        return (f"{self.source.name()}: the {len(self.check.exprs)} facts its template "
                f"{self.template_root.name()} relied on hold for it (a repeated block)")

    def explain_in(self, scope: dict) -> str:
        """The first failing fact of the template, said about this block."""
        block = eval(self.source.name(), scope)  # noqa: S307 - our own source expression
        args = tuple(scope[n] for n in self.check.arg_names[1:])
        text = self.check.explain_failure((block, *args), scope["___G"], scope["___F"]) or self.describe()
        pretty = pretty_name(self.source.name())
        return _BLOCK_NAME.sub(lambda _m: pretty, text)

    def emit(self, b):
        b.inline(self.check, self.source)


@dataclasses.dataclass(frozen=True, eq=False)
class ConstAttrIsGuard(Guard):
    """``owner.attr is value``: an attribute of a fixed object (a class or module reached
    without a source, a function's ``__code__``)."""

    kind: ClassVar[str] = "CONST_ATTR_IS"
    _IDENTITY: ClassVar[tuple[str, ...]] = ("owner", "value")
    owner: Any
    attr: str
    value: Any
    source: Optional[Source] = None  # anchored at depth 0

    def exprs(self, const):
        return [f"{const(self.owner)}.{self.attr} is {const(self.value)}"]

    def describe(self):
        return f"{short_repr(self.owner)}.{self.attr} is {short_repr(self.value)}"

    def emit(self, b):
        b.op("CHECK_ID", b.attr(b.const(self.owner), self.attr), obj=self.value)


# ---- free expressions ---------------------------------------------------------------
@dataclasses.dataclass(frozen=True, eq=False)
class ExprGuard(Guard):
    """A boolean expression with no kind of its own: ``text`` over the sources (as their
    ``name()``), ``___G``/``___F``/``___builtins``/``___torch``/``___sys``/``___torch_compat``, and constants
    written ``{key}`` (``consts``: (key, object) pairs).  program.py parses it with ``ast``;
    what it cannot translate runs in the residual Python check (logged)."""

    kind: ClassVar[str] = "EXPR"
    text: str
    consts: tuple = ()  # ((key, object), ...)
    source: Optional[Source] = None  # anchor (ordering only)

    def exprs(self, const):
        text = self.text
        for key, obj in self.consts:
            text = text.replace("{" + key + "}", const(obj))
        return [text]

    def describe(self):
        text = self.text
        for key, obj in self.consts:
            text = text.replace("{" + key + "}", short_repr(obj))
        return text

    def emit(self, b):
        for text in b.exprs_of(self):
            b.add_expr(self, text)


@dataclasses.dataclass(frozen=True, eq=False)
class GlobalStateGuard(ExprGuard):
    """An expression about interpreter state (grad mode, default dtype, torch function mode)."""

    kind: ClassVar[str] = "GLOBAL_STATE"
    rank: ClassVar[int] = 8

    def priority(self):
        return 2


def storage_groups(*tensors) -> tuple:
    """For each tensor, the index of the first tensor sharing its storage (``(0, 1, 0)``: the
    third is a view of, or is, the first); None when a tensor has no storage to compare."""
    seen: dict = {}
    try:
        return tuple(seen.setdefault(t.untyped_storage()._cdata, i) for i, t in enumerate(tensors))
    except Exception:  # noqa: BLE001 - sparse, nested or subclass tensors without one storage
        return None


@dataclasses.dataclass(frozen=True, eq=False)
class TensorAliasingGuard(ExprGuard):
    """The graph's tensor inputs share storage exactly as when it was compiled.  Added when
    the graph mutates an input: a functionalising backend (aot_eager, inductor) assumes the
    aliasing it saw (``f(z, z)`` after ``f(x, y)`` with ``a.add_(1); return a + b`` must not
    reuse the entry).  A residual Python check (storage identity is not a C op)."""

    kind: ClassVar[str] = "TENSOR_ALIASING"
    sources: tuple = ()  # the tensors' Sources, in ``groups`` order
    groups: tuple = ()  # storage_groups() of them at compile time

    @classmethod
    def of(cls, sources, tensors) -> "TensorAliasingGuard":
        names = ", ".join(s.name() for s in sources)
        groups = storage_groups(*tensors)
        return cls("{f}(" + names + ") == {g}", (("f", storage_groups), ("g", groups)), sources[0],
                   tuple(sources), groups)

    def reads(self):
        return list(self.sources)

    def describe(self):
        names = [pretty_name(s.name()) for s in self.sources]
        shared = [f"{names[i]} shares storage with {names[g]}" for i, g in enumerate(self.groups or ())
                  if g != i]
        return f"tensors {', '.join(names)}: " + ("; ".join(shared) if shared else "no two share storage")

    def explain_failure(self, actual, pretty):
        return f"storage sharing of the tensor inputs changed (compiled for: {self.describe()})"


_MRO = type.__dict__["__mro__"].__get__
_TYPE_DICT = type.__dict__["__dict__"].__get__


def class_lacks(cls, names: tuple) -> bool:
    """No class in ``cls``'s MRO defines any of ``names`` (read from the classes' own dicts: no
    metaclass code runs)."""
    for klass in _MRO(cls):
        d = _TYPE_DICT(klass)
        for name in names:
            if name in d:
                return False
    return True


@dataclasses.dataclass(frozen=True, eq=False)
class ClassLacksGuard(ExprGuard):
    """The class of the object at ``source`` still defines none of ``names``: an attribute the
    trace found absent (hasattr() False, getattr()'s default) would be found again if the class
    gained it, or a ``__getattr__``."""

    kind: ClassVar[str] = "CLASS_LACKS"
    names: tuple = ()

    @classmethod
    def of(cls, source, names) -> "ClassLacksGuard":
        return cls("{f}(___builtins.type(" + source.name() + "), {n})", (("f", class_lacks), ("n", tuple(names))),
                   source, tuple(names))

    def reads(self):
        return [self.source]

    def emit(self, b):
        b.op("CHECK_CLASS_LACKS", b.reg(self.source), obj=self.names)

    def describe(self):
        return f"type({pretty_name(self.source.name())}) defines none of {', '.join(self.names)}"

    def explain_failure(self, actual, pretty):
        return f"the class of {pretty_name(self.source.name())} now defines one of {', '.join(self.names)}"


def distinct_objects(*objs, fixed: frozenset = frozenset()) -> bool:
    """No two of ``objs`` are one object, and none is one of the objects whose ids are ``fixed``."""
    ids = {id(o) for o in objs}
    return len(ids) == len(objs) and fixed.isdisjoint(ids)


@dataclasses.dataclass(frozen=True, eq=False)
class DistinctGuard(ExprGuard):
    """Objects read from outside the trace that it found to be different objects (``a is b``
    False, ``a == b`` answered by identity, two keys of one dict): a later call that passes one
    object for two of them must not reuse the entry.  (The same object from two sources is one
    tracker, with a SameObjectGuard.)  One guard per trace, over every such source
    (OutputGraph.guard_distinct): stricter than the pairs the trace compared, never looser."""

    kind: ClassVar[str] = "DISTINCT"
    sources: tuple = ()
    fixed: frozenset = frozenset()  # ids of objects that none of them may be

    @classmethod
    def of(cls, sources, fixed: frozenset = frozenset()) -> "DistinctGuard":
        def depth(source) -> int:
            n = 0
            while getattr(source, "parent", None) is not None:
                source, n = source.parent, n + 1
            return n

        # anchored at the deepest source: it runs after the guards that make every source readable
        tail, consts = ("", (("f", distinct_objects),)) if not fixed else \
            (", fixed={fixed}", (("f", distinct_objects), ("fixed", frozenset(fixed))))
        return cls("{f}(" + ", ".join(s.name() for s in sources) + tail + ")", consts,
                   max(sources, key=depth), tuple(sources), frozenset(fixed))

    def reads(self):
        return list(self.sources)

    def emit(self, b):
        regs = tuple(b.reg(s) for s in self.sources)
        b.op("CHECK_DISTINCT", regs[0], obj=(regs, self.fixed))

    def describe(self):
        return f"{', '.join(pretty_name(s.name()) for s in self.sources)} are {len(self.sources)} different objects"

    def explain_failure(self, actual, pretty):
        return f"two of {', '.join(pretty_name(s.name()) for s in self.sources)} are now one object (compiled for " \
               "different objects)"


# The states in which another tracer or compiler runs this thread's code: torch.jit tracing,
# torch.fx symbolic tracing (also non-strict export), a dispatch mode (FakeTensorMode, make_fx's
# proxy mode, a TorchDispatchMode) and a torch.func transform (vmap, grad, ...).
_NO_OTHER_TRACER = ("___torch._C._get_tracing_state() is None",
                    "not ___torch_compat.is_fx_tracing()",  # (its spelling differs by torch version)
                    "___torch._C._len_torch_dispatch_stack() == 0",
                    "___torch._C._functorch.peek_interpreter_stack() is None")


@dataclasses.dataclass(frozen=True, eq=False)
class NoOtherTracerGuard(GlobalStateGuard):
    """No other tracer or compiler is running this thread's code: a cached entry must never
    serve a frame that torch.jit, torch.fx, make_fx or torch.func is tracing (they must see
    the original code).  One C op or two per state (convert_frame checks the same states,
    and more, on a miss)."""

    kind: ClassVar[str] = "NO_OTHER_TRACER"
    text: str = " and ".join(f"({e})" for e in _NO_OTHER_TRACER)

    def exprs(self, const):
        return list(_NO_OTHER_TRACER)

    def describe(self):
        return "no other tracer is running (torch.jit, torch.fx, a dispatch mode, torch.func)"

    def explain_failure(self, actual, pretty):
        return "another tracer is running (torch.jit, torch.fx, a dispatch mode or torch.func)"


# ---- shape guards (dynamic shapes: relations between sizes, strides and int inputs) -------
# An integer expression is a tuple tree (built by shapes.py from the ShapeEnv's sympy facts):
#   ("src", Source)   the int at a source (a size, a stride, an int argument)
#   ("int", v)        a constant
#   (op, a, b, ...)   op in INT_OPS (arithmetic, max/min), CMP_OPS, "and"/"or" (n-ary), "not"
INT_OPS = ("+", "*", "//", "%", "**", "max", "min")
CMP_OPS = ("==", "!=", "<", "<=", ">", ">=")
# codes of CHECK_INT_EXPR's postfix program (csrc/guards.c); arguments: register or constant
EXPR_CODES = {"reg": 0, "int": 1, "+": 2, "*": 3, "//": 4, "%": 5, "**": 6, "max": 7, "min": 8,
              "==": 9, "!=": 10, "<": 11, "<=": 12, ">": 13, ">=": 14, "and": 15, "or": 16, "not": 17}


def expr_sources(expr) -> list:
    """The sources an integer expression reads, in order of first use."""
    if expr[0] == "src":
        return [expr[1]]
    if expr[0] == "int":
        return []
    out: list = []
    for sub in expr[1:]:
        out.extend(s for s in expr_sources(sub) if s not in out)
    return out


_PRECEDENCE = {"or": 1, "and": 2, "not": 3, "==": 4, "!=": 4, "<": 4, "<=": 4, ">": 4, ">=": 4,
               "+": 5, "*": 6, "//": 6, "%": 6, "**": 7}
_ASSOCIATIVE = ("+", "*", "and", "or")


def render_expr(expr, name: Callable[[Source], str]) -> str:
    """The expression as Python text (``name`` names each source), parenthesised only where
    Python's precedence needs it."""
    op = expr[0]
    if op == "src":
        return name(expr[1])
    if op == "int":
        return str(expr[1])
    if op in ("max", "min"):
        return f"{op}({', '.join(render_expr(e, name) for e in expr[1:])})"
    mine = _PRECEDENCE[op]

    def sub(e, first):
        text = render_expr(e, name)
        theirs = _PRECEDENCE.get(e[0], 9) if e[0] != "int" or e[1] >= 0 else 5
        if theirs < mine or theirs == mine and not (e[0] == op and op in _ASSOCIATIVE and first) \
                and theirs != 9 and not (e[0] == op and op in _ASSOCIATIVE):
            return f"({text})"
        return text

    if op == "not":
        return f"not {sub(expr[1], True)}"
    return f" {op} ".join(sub(e, i == 0) for i, e in enumerate(expr[1:]))


def _source_name(source: Source) -> str:
    return source.name()


def pretty_source(source: Source) -> str:
    pretty = getattr(source, "pretty", None)
    return pretty_name(pretty() if pretty is not None else source.name())


def eval_expr(expr, value: Callable[[Source], Any]):
    """The expression's value, with ``value(source)`` for each source (explanations)."""
    op = expr[0]
    if op == "src":
        return value(expr[1])
    if op == "int":
        return expr[1]
    args = [eval_expr(e, value) for e in expr[1:]]
    if op == "and":
        return all(args)
    if op == "or":
        return any(args)
    if op == "not":
        return not args[0]
    if op in ("max", "min"):
        return (max if op == "max" else min)(args)
    fn = {"+": lambda a, b: a + b, "*": lambda a, b: a * b, "//": lambda a, b: a // b, "%": lambda a, b: a % b,
          "**": lambda a, b: a ** b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b,
          "<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}[op]
    result = args[0]
    for a in args[1:]:
        result = fn(result, a)
    return result


def postfix(expr, reg: Callable[[Source], int]) -> list:
    """CHECK_INT_EXPR's program for the expression: (code, argument) pairs, arity in the code's
    argument for n-ary ops."""
    op = expr[0]
    if op == "src":
        return [(EXPR_CODES["reg"], reg(expr[1]))]
    if op == "int":
        return [(EXPR_CODES["int"], expr[1])]
    out = []
    for sub in expr[1:]:
        out.extend(postfix(sub, reg))
    out.append((EXPR_CODES[op], len(expr) - 1))
    return out


class ShapeGuardBase(Guard):
    """Shared by the shape kinds: a relation over sizes, strides and int inputs that the graph
    relies on, with the user line that introduced it.  Checked in C by CHECK_INT_EXPR (sources
    loaded as ints with LOAD_SIZE / LOAD_STRIDE / the argument itself)."""

    rank: ClassVar[int] = 9  # after the TENSOR / TYPE guards of the sources it reads

    def relation(self) -> tuple:
        raise NotImplementedError

    def exprs(self, const):
        return [render_expr(self.relation(), _source_name)]

    def describe(self):
        text = render_expr(self.relation(), pretty_source)
        return f"{text}  # {self.where}" if self.where else text

    def reads(self):
        return expr_sources(self.relation())

    def explain_values(self, value: Callable[[Source], Any]) -> str:
        """'x.size(0) = 1 but the graph needs x.size(0) >= 2' (``value`` reads a source now)."""
        now = []
        for src in self.reads():
            try:
                now.append(f"{pretty_source(src)} = {value(src)!r}")
            except Exception as e:  # noqa: BLE001 - not readable any more (not a tensor)
                now.append(f"{pretty_source(src)} cannot be read ({type(e).__name__})")
        needs = render_expr(self.relation(), pretty_source)
        line = f" (from {self.where})" if self.where else ""
        return f"{', '.join(now)} but the graph needs {needs}{line}"

    def emit(self, b):
        program = postfix(self.relation(), b.int_reg)
        b.op("CHECK_INT_EXPR", 0, obj=tuple(program))


@dataclasses.dataclass(frozen=True, eq=False)
class ShapeRangeGuard(ShapeGuardBase):
    """``lo <= s <= hi`` for one symbolic size or int input (hi None: no upper bound); sizes 0
    and 1 are specialised, so a symbolic size is at least 2 unless the user marked it."""

    kind: ClassVar[str] = "SHAPE_RANGE"
    source: Source  # the size / int source
    lo: Optional[int]
    hi: Optional[int]
    where: str = ""

    def relation(self):
        parts = []
        if self.lo is not None:
            parts.append((">=", ("src", self.source), ("int", self.lo)))
        if self.hi is not None:
            parts.append(("<=", ("src", self.source), ("int", self.hi)))
        return parts[0] if len(parts) == 1 else ("and", *parts)

    def emit(self, b):
        lo = self.lo if self.lo is not None else -(1 << 62)
        hi = self.hi if self.hi is not None else (1 << 62)
        b.op("CHECK_INT_RANGE", b.int_reg(self.source), n=lo, obj=hi)


@dataclasses.dataclass(frozen=True, eq=False)
class ShapeEqGuard(ShapeGuardBase):
    """``s == expr``: a size, stride or int input equals an expression of others (two inputs
    share a size, a contiguous stride is a product of sizes, a size was specialised)."""

    kind: ClassVar[str] = "SHAPE_EQ"
    source: Source  # the left-hand side
    rhs: tuple  # integer expression
    where: str = ""

    def relation(self):
        return ("==", ("src", self.source), self.rhs)

    def emit(self, b):
        if self.rhs[0] == "src":  # the common case (shared sizes, contiguous strides): one op
            lhs = b.int_reg(self.source)
            b.op("CHECK_INT_EQ", lhs, b.int_reg(self.rhs[1]))
        elif self.rhs[0] == "int":
            b.op("CHECK_INT_RANGE", b.int_reg(self.source), n=self.rhs[1], obj=self.rhs[1])
        else:
            super().emit(b)


@dataclasses.dataclass(frozen=True, eq=False)
class ShapeRelGuard(ShapeGuardBase):
    """Any other relation the trace relied on (``x.size(1) % 8 == 0``, ``n > 3``, a branch
    taken on a symbolic value)."""

    kind: ClassVar[str] = "SHAPE_REL"
    expr: tuple  # boolean expression
    where: str = ""
    source: Optional[Source] = None  # anchor: the first source read

    def relation(self):
        return self.expr


@dataclasses.dataclass(frozen=True, eq=False)
class FloatFactGuard(ExprGuard):
    """A relation over float arguments made symbolic by automatic dynamic (``ta <= tb``,
    ``t < 1.0``: a branch taken on them), as Python text over the sources (shapes.py writes
    only relations whose float arithmetic Python evaluates as the traced code did).  A residual
    Python check: the C program has integer registers only."""

    kind: ClassVar[str] = "FLOAT_FACT"
    rank: ClassVar[int] = 9  # after the TYPE guards of the floats it reads
    pretty: str = ""
    where: str = ""
    sources: tuple = ()

    def reads(self):
        return list(self.sources)

    def describe(self):
        return f"{self.pretty}  # {self.where}" if self.where else self.pretty

    def explain_values(self, value: Callable[[Source], Any]) -> str:
        """'ta = 0.7, tb = 0.5 but the graph needs ta <= tb' (``value`` reads a source now)."""
        now = []
        for src in self.sources:
            try:
                now.append(f"{pretty_source(src)} = {value(src)!r}")
            except Exception as e:  # noqa: BLE001 - not readable any more
                now.append(f"{pretty_source(src)} cannot be read ({type(e).__name__})")
        line = f" (from {self.where})" if self.where else ""
        return f"{', '.join(now)} but the graph needs {self.pretty}{line}"


def pretty_name(name: str) -> str:
    """A source name as the user wrote it (``___G['x']`` -> ``x``, ``m._modules['fc']`` -> ``m.fc``)."""
    name = re.sub(r"___G\[('([^']*)')\]", r"\2", name)
    name = re.sub(r"___F\.__closure__\[\d+\]\.cell_contents", "<closure var>", name)
    name = re.sub(r"\._parameters\['([^']*)'\]", r".\1", name)
    name = re.sub(r"\._buffers\['([^']*)'\]", r".\1", name)
    name = re.sub(r"\._modules\['([^']*)'\]", r".\1", name)
    name = re.sub(r"\b___builtins\.", "builtins.", name)
    return name
