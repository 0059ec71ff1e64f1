"""transformers' ModelOutput: the dataclass + OrderedDict every HF model returns.

A ModelOutput is an ``OrderedDict`` subclass decorated with ``@dataclass``:
its fields are attributes, and the fields that are not None are also dict
entries (in field order, later insertions at the end).  Its methods are
ordinary Python, but tracing them generically would need a dict-subclass
object model; ``ModelOutputVariable`` models the type directly instead:

- construction (``Cls(a=..., b=...)``) follows the generated ``__init__``,
  ``ModelOutput.__setattr__`` and ``__post_init__`` (common path: the first
  field is a tensor or some other field is set; the "first field is an
  iterator of (key, value) pairs" path breaks the graph);
- ``out.x``, ``out["x"]``, ``out[0]`` / ``out[1:]`` (``to_tuple()``), ``keys()``,
  ``values()``, ``items()``, ``get``, ``in``, ``len``, iteration, ``to_tuple()``,
  ``out["x"] = v`` and ``out.x = v`` (with ``past_key_values``/``cache_params``
  renamed to ``cache`` like the real class) are answered at trace time;
- after the graph, generated code rebuilds the object by calling the class
  with the constructor's arguments, then replays the later writes in order,
  so keys, order and attributes are the eager ones.  The rebuild runs with the
  hook off (it is library code, not user code to capture).

A ModelOutput read from the frame's inputs is wrapped the same way (guarded on
its type and keys); writing to such an object breaks the graph.
Only classes whose behaviour is ModelOutput's own (no overridden
``__post_init__``/``__setattr__``/``__getitem__``/..., dataclass ``__init__``) are
modelled; others are treated as ordinary user classes.
Tested by tests/torch/test_models.py (test_model_output_*).
"""
from __future__ import annotations

import dataclasses
import sys
from collections import OrderedDict
import types
from typing import Optional

from .. import graph_breaks as gb
from .. import guards
from .. import _C
from ..exc import GraphBreak
from .base import KnownValueVariable, VariableTracker
from .constant import ConstantVariable, NONE
from ..source import AttrSource, ItemSource
from .sequences import ListIteratorVariable, TupleVariable
from .functions import UserFunctionVariable, UserMethodVariable
from .methods import BoundMethodOfVariable
from .tensor import TensorVariable
from .user_objects import mro_lookup, UserDefinedClassVariable

_BEHAVIOUR = ("__post_init__", "__setattr__", "__setitem__", "__getitem__", "__delitem__", "to_tuple",
              "__contains__", "get", "_replace_old_cache_name", "keys", "values", "items", "__iter__",
              "__len__", "__bool__")
_RENAMED = ("past_key_values", "cache_params")


def _model_output_base() -> Optional[type]:
    mod = sys.modules.get("transformers.utils.generic")
    return getattr(mod, "ModelOutput", None) if mod is not None else None


def is_model_output_class(cls) -> bool:
    """A ModelOutput dataclass whose behaviour is ModelOutput's own."""
    base = _model_output_base()
    if base is None or not isinstance(cls, type) or not issubclass(cls, base) or cls is base:
        return False
    if not dataclasses.is_dataclass(cls):
        return False
    for name in _BEHAVIOUR:
        for klass in cls.__mro__:
            if name in klass.__dict__:
                if klass.__module__ not in ("transformers.utils.generic", "collections", "builtins") and not (
                        name == "to_tuple" and isinstance(klass.__dict__[name], types.FunctionType)):
                    return False  # (a Python to_tuple of its own, e.g. CLIPOutput's, is inlined)
                break
    for klass in cls.__mro__:
        if klass is base:
            break
        init = klass.__dict__.get("__init__")
        if init is not None:
            inner = getattr(init, "__wrapped__", init)
            if getattr(getattr(inner, "__code__", None), "co_filename", None) != "<string>":
                return False  # not the dataclass-generated __init__
    fields = dataclasses.fields(cls)
    if not fields or any(f.default is not None for f in fields[1:]) or any(
            f.default_factory is not dataclasses.MISSING or not f.init for f in fields):
        return False
    return True


def _is_none(v: VariableTracker) -> bool:
    return v.is_python_constant() and v.as_python_constant() is None


def _rename(key):
    return "cache" if key in _RENAMED else key


def _rebuild(cls, init_kwargs, writes, fields, behaviour):
    """The ModelOutput the trace made: ``cls(**init_kwargs)``, then the later writes.

    While ``cls`` still has the methods the trace modelled (``behaviour``: its ``__init__``,
    ``__setattr__`` and ``__post_init__`` then) and is registered with pytree (all its
    ``__post_init__`` would do besides setting state), the state the constructor leaves is set
    directly, about a tenth of its cost: every field (``fields``, in order) an attribute, the ones
    not None also entries.  (The trace took the common ``__post_init__`` path: ``construct``.)"""
    if (cls.__init__ is behaviour[0] and cls.__setattr__ is behaviour[1] and cls.__post_init__ is behaviour[2]
            and cls in getattr(sys.modules.get("transformers.utils.generic"), "_registered_model_output_types", ())):
        out = cls.__new__(cls)
        for name in fields:
            value = init_kwargs.get(name)
            if value is not None:
                OrderedDict.__setitem__(out, name, value)
            object.__setattr__(out, name, value)
    else:
        out = cls(**init_kwargs)
    for kind, key, value in writes:
        if kind == "item":
            out[key] = value
        else:
            setattr(out, key, value)
    return out


_REBUILD = _C.CallWithHookOff(_rebuild)


class ModelOutputClassVariable(KnownValueVariable):
    """A ModelOutput subclass; calling it creates a ModelOutputVariable."""

    def __init__(self, value: type, source=None):
        super().__init__(source)
        self.value = value

    def _repr_body(self):
        return self.value.__qualname__

    def describe(self):
        return f"class {self.value.__qualname__}"

    def var_getattr(self, tx, name):
        return UserDefinedClassVariable(self.value, self.source).var_getattr(tx, name)

    def call_function(self, tx, args, kwargs):
        return ModelOutputVariable.construct(tx, self.value, list(args), dict(kwargs))


class ModelOutputVariable(VariableTracker):
    """One ModelOutput instance.

    Attributes:
        cls: the ModelOutput subclass.
        attrs: field/attribute name -> value (every field is present).
        items: the dict entries, in order (the fields that are not None, plus
            later insertions).
        init_kwargs: constructor arguments (for the rebuild), None for a real
            object read from the inputs (``source`` set).
        writes: ("item"|"attr", key, value) written after construction, in order.
    """

    def __init__(self, cls: type, attrs: dict, items: dict, init_kwargs: Optional[dict], source=None):
        super().__init__(source)
        self.cls = cls
        self.attrs = attrs
        self.items = items
        self.init_kwargs = init_kwargs
        self.writes: list[tuple[str, str, VariableTracker]] = []
        self.mutable_local = source is None

    # ---- construction --------------------------------------------------------
    @classmethod
    def construct(cls_, tx, cls: type, args: list, kwargs: dict) -> "ModelOutputVariable":
        fields = [f.name for f in dataclasses.fields(cls)]
        for old in _RENAMED:
            if old in kwargs:
                if "cache" in kwargs:
                    raise GraphBreak(gb.OPERATION_RAISES, f"{cls.__name__}() got both cache and {old}")
                kwargs["cache"] = kwargs.pop(old)
                break
        if len(args) > len(fields):
            raise GraphBreak(gb.BAD_ARGUMENTS, f"{cls.__name__}() takes {len(fields)} positional arguments")
        bound = dict(zip(fields, args))
        for key, value in kwargs.items():
            if key not in fields or key in bound:
                raise GraphBreak(gb.BAD_ARGUMENTS, f"{cls.__name__}() got an unexpected or repeated argument {key!r}")
            bound[key] = value
        attrs, items = {}, {}
        for name in fields:  # the dataclass __init__: self.name = value, through ModelOutput.__setattr__
            value = bound.get(name, NONE)
            if not _is_none(value):
                items[name] = value
            attrs[name] = value
        # __post_init__
        first = attrs[fields[0]]
        others_none = all(_is_none(attrs[n]) for n in fields[1:])
        if others_none and not isinstance(first, TensorVariable) and not _is_none(first):
            raise GraphBreak(gb.UNSUPPORTED_CALL, f"{cls.__name__}() with a non-tensor first field (key/value iterator path)")
        init_kwargs = dict(bound)
        tx.output.modelled_library_code = True  # (the original code would trace __init__ as frames)
        return cls_(cls, attrs, items, init_kwargs)

    @classmethod
    def from_real(cls_, tx, value, source) -> "ModelOutputVariable":
        cls = type(value)
        output = tx.output
        output.add_guard(guards.TypeGuard(source, cls))
        output.add_guard(guards.DictKeysGuard(source, tuple(value.keys())))
        names = [f.name for f in dataclasses.fields(cls)]
        extra = sorted(k for k in value.__dict__ if k not in names)
        output.add_expr_guard(f"sorted(k for k in {source.name()}.__dict__ if k not in {tuple(names)!r}) == "
                              f"{extra!r}")
        attrs = {k: tx.wrap(value.__dict__[k], AttrSource(source, k)) for k in (*names, *extra)
                 if k in value.__dict__}
        items = {}
        for k in value.keys():
            real = dict.__getitem__(value, k)
            if k in value.__dict__ and value.__dict__[k] is real:
                items[k] = attrs[k]
            else:
                items[k] = tx.wrap(real, ItemSource(source, k))
        return cls_(cls, attrs, items, None, source)

    # ---- what it is ------------------------------------------------------------
    def _repr_body(self):
        return f"{self.cls.__name__}: {', '.join(self.items)}"

    def describe(self):
        return f"{self.cls.__name__} object"

    def python_type(self):
        return self.cls

    def has_len(self):
        return True

    def len(self, tx):
        return len(self.items)

    def truthiness(self, tx):
        return bool(self.items)

    def unpack(self, tx):
        return [ConstantVariable(k) for k in self.items]

    def to_tuple(self):
        return TupleVariable(list(self.items.values()))

    def call_to_tuple(self, tx):
        """``self.to_tuple()``: ModelOutput's (the values), or the class's own Python override
        inlined (CLIPOutput's turns its nested outputs into tuples too)."""
        fn, owner = mro_lookup(self.cls, "to_tuple")
        if isinstance(fn, types.FunctionType) and owner.__module__ != "transformers.utils.generic":
            return UserMethodVariable(fn, self).call_function(tx, [], {})
        return self.to_tuple()

    # ---- reads -------------------------------------------------------------------
    def var_getattr(self, tx, name):
        if name in self.attrs:
            return self.attrs[name]
        if name == "__class__":
            return ModelOutputClassVariable(self.cls)
        if name in ("to_tuple", "keys", "values", "items", "get", "__getitem__", "__setitem__", "__contains__",
                    "__len__", "__iter__", "__setattr__"):
            return BoundMethodOfVariable(self, name)
        if name == "__dict__":
            raise GraphBreak(gb.UNSUPPORTED_ATTRIBUTE, "reading a ModelOutput's __dict__")
        attr, _ = mro_lookup(self.cls, name)
        if isinstance(attr, property) and attr.fget is not None:
            return UserFunctionVariable(attr.fget).call_function(tx, [self], {})
        if isinstance(attr, staticmethod):
            return UserFunctionVariable(attr.__func__)
        if isinstance(attr, types.FunctionType):
            return UserMethodVariable(attr, self)
        if attr is not None and not callable(attr):
            return tx.wrap(attr, None)
        raise GraphBreak(gb.MISSING_ATTRIBUTE, f"{self.cls.__name__!r} object has no attribute {name!r}")

    def call_method(self, tx, name, args, kwargs):
        if kwargs:
            raise GraphBreak(gb.UNSUPPORTED_CALL, f"{self.cls.__name__}.{name}() with keyword arguments")
        if name == "to_tuple" and not args:
            return self.call_to_tuple(tx)
        if name in ("keys", "__iter__") and not args:
            return ListIteratorVariable([ConstantVariable(k) for k in self.items])
        if name == "values" and not args:
            return ListIteratorVariable(list(self.items.values()))
        if name == "items" and not args:
            return ListIteratorVariable([TupleVariable([ConstantVariable(k), v]) for k, v in self.items.items()])
        if name == "__len__" and not args:
            return ConstantVariable(len(self.items))
        if name in ("__getitem__", "get", "__contains__") and args and args[0].is_python_constant():
            key = args[0].as_python_constant()
            if name == "__getitem__" and not isinstance(key, str):
                if not isinstance(key, (int, slice)):
                    raise GraphBreak(gb.OPERATION_RAISES, f"{self.cls.__name__}[{key!r}]")
                return self.call_to_tuple(tx).getitem(tx, args[0])  # ModelOutput: self.to_tuple()[key]
            key = _rename(key) if isinstance(key, str) else key
            present = key in self.items
            if name == "__contains__":
                return ConstantVariable(present)
            if name == "get":
                return self.items[key] if present else (args[1] if len(args) > 1 else NONE)
            if not present:
                raise GraphBreak(gb.OPERATION_RAISES, f"KeyError: {key!r}")
            return self.items[key]
        if name == "__setitem__" and len(args) == 2 and args[0].is_python_constant():
            self._write(tx, "item", _rename(args[0].as_python_constant()), args[1])
            return NONE
        if name == "__setattr__" and len(args) == 2 and args[0].is_python_constant():
            return self.setattr(tx, args[0].as_python_constant(), args[1])
        raise GraphBreak(gb.UNSUPPORTED_CALL, f"{self.cls.__name__}.{name}() is not modelled")

    # ---- writes ------------------------------------------------------------------
    def setattr(self, tx, name, value):
        self._write(tx, "attr", _rename(name), value)
        return NONE

    def _write(self, tx, kind: str, key, value):
        if self.source is not None:
            raise GraphBreak(gb.SIDE_EFFECT, f"writing to a {self.cls.__name__} that exists outside the compiled code")
        if not isinstance(key, str):
            raise GraphBreak(gb.VALUE_UNKNOWN, f"{self.cls.__name__} key {key!r}")
        fields = {f.name for f in dataclasses.fields(self.cls)}
        if kind == "item" or (key in fields and not _is_none(value)):
            self.items[key] = value
        self.attrs[key] = value
        self.writes.append((kind, key, value))

    # ---- codegen -----------------------------------------------------------------
    def reconstruct(self, cg):
        if self.source is not None:
            return super().reconstruct(cg)
        cg.load_callable(_REBUILD)
        cg.load_const(self.cls)
        for key, value in self.init_kwargs.items():
            cg.load_const(key)
            cg.reconstruct(value)
        cg.emit("BUILD_MAP", len(self.init_kwargs))
        for kind, key, value in self.writes:
            cg.load_const(kind)
            cg.load_const(key)
            cg.reconstruct(value)
            cg.emit("BUILD_TUPLE", 3)
        cg.emit("BUILD_TUPLE", len(self.writes))
        cls = self.cls
        cg.load_const(tuple(f.name for f in dataclasses.fields(cls)))
        cg.load_const((cls.__init__, cls.__setattr__, cls.__post_init__))
        cg.call(5)

    def can_reconstruct(self):
        return True


__all__ = ["ModelOutputVariable", "ModelOutputClassVariable", "is_model_output_class"]
