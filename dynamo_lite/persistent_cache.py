"""The persistent capture cache: a frame captured in one process is not traced again in the next.

    store(converter, code, func, ...)   after a capture (convert_frame): the entry, written to disk
                                        when everything in it can be found again in another process
    load(converter, code, f_locals, func, ...)
                                        on a cache miss, before tracing: an entry an earlier process
                                        wrote for this code whose key matches and whose guards pass
                                        now, rebuilt without a trace (the backend runs again; its own
                                        caches make that cheap)

An entry is keyed by everything that changes what a capture means (``key_parts``): the code
object (bytecode, constants, names, line table: ``code_fingerprint``), the Python, torch and
dynamo_lite versions (dynamo_lite's by the size and mtime of its Python files and the bytes of
its C extension), the config knobs that change capture, the backend (by its registered name,
with inductor's options), fullgraph and dynamic.  A changed part is a miss whose reason names the part.  Inlined functions are not part
of the key: their identity guards are.

Guards are stored as they are, except the facts that name an object by identity, which hold only
in the process that made them.  Those are stored as what the object was, in words that hold in
another process, and made identity guards again on load, on the object the same source finds
there (``_Rebind``):

    a module           the module of that name (sys.modules)
    a class, builtin   the object of that module and qualified name (imported)
    a class made at    a class of that module and qualified name with the same bases and body
      run time         (``_class_fingerprint``), found by the same source
    a Python function  the function of that module and qualified name, with the same code,
                       defaults and closure contents (``function_fingerprint``)
    a code object      a code object with the same fingerprint
    an nn.Module       an instance of the same class with the same parameter, buffer and
                       submodule names (the attributes the trace read, its parameters' and
                       buffers' metadata and its training flag are guarded on their own)
    a compiled module  an OptimizedModule class over the same class (compile(module))

An entry holding any other object by identity (a user object with no such description, a
closure holding one), a backend given as a callable or a graph under DDP is not stored
(``stats()`` and the ``dynamo_lite.persistent_cache`` log say why).  A process does not load the
entries it wrote; a loaded entry emits the events its trace emitted (its break, its graph).
Packages (``save_package`` / ``load_package``: dynamo_lite.save / load) carry entries, inductor's
cache artifacts and kernels, and AOTInductor libraries of inference graphs (``_aot_library``).

The generated code is stored with its constants: code objects (marshal), functions dynamo_lite
generated (resume functions, trampolines: rebuilt with the frame's globals), importable objects
(by name, functions by fingerprint) and the compiled graph (the GraphModule, pickled; compiled
again on load by the backend on fake inputs of the stored metadata).

Files: ``<cache_dir>/<FORMAT>/<frame>/<entry>.dle``, ``frame`` a hash of the code's file,
qualified name, first line and kind (a resume function's offset).  A file is written whole to a
temporary name and renamed (readers see all of it or nothing; processes writing the same entry
write the same name); it starts with a checksum of the rest, and a file whose checksum, header or
contents do not load is ignored (never trusted, never an error).
Tested by tests/api/test_persistent_cache.py.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import enum
import hashlib
import importlib
import io
import logging
import marshal
import operator
import os
import pickle
import re
import sys
import tempfile
import threading
import time
import types
import weakref
from typing import Any, Optional

import torch
import torch.fx.immutable_collections

from . import _C, bytecode_compat, cache, config, static
from .backends import TRACE_FAKES, registered_backend_name
from .guards import BlockGuard, ConstAttrIsGuard, ExprGuard, Guard, GuardSet, IdGuard, IsGuard, TypeGuard, source_scope
from .guards.kinds import held_object, hold
from .guards.kinds import storage_groups
from .exc import UserFrame
from .report import events
from .source import Source

log = logging.getLogger("dynamo_lite.persistent_cache")

FORMAT = "v1"
_MAGIC = b"DYNAMO_LITE_ENTRY\n"
_MAX_FILES = 64  # entries read per frame (the newest)
_CONFIG_KNOBS = ("max_traced_instructions", "max_inline_depth", "optimize_ddp", "capture_scalar_outputs",
                 "capture_dynamic_output_shape_ops", "repeated_blocks")


class Unpersistable(Exception):
    """Why an entry is not stored."""


class Miss(Exception):
    """Why a stored entry does not serve this call."""


# ---- statistics ----------------------------------------------------------------------
_STATS: collections.Counter = collections.Counter()
_NOT_STORED: collections.Counter = collections.Counter()
_MISSES: collections.Counter = collections.Counter()


def stats() -> dict:
    """Counts of this process: ``hits`` (entries loaded instead of a trace), ``stored``,
    ``misses`` (traces that found no usable stored entry), and the reasons (``not_stored``:
    reason -> count; ``miss_reasons``: reason -> count)."""
    return {"hits": _STATS["hits"], "stored": _STATS["stored"], "misses": _STATS["misses"],
            "not_stored": dict(_NOT_STORED), "miss_reasons": dict(_MISSES)}


def reset_stats() -> None:
    _STATS.clear()
    _NOT_STORED.clear()
    _MISSES.clear()


def enabled() -> bool:
    return bool(config.persistent_cache)


def cache_dir() -> str:
    """Where entries live: ``config.cache_dir``, else ``$XDG_CACHE_HOME/dynamo_lite`` (or
    ``~/.cache/dynamo_lite``)."""
    if config.cache_dir:
        return os.path.abspath(os.path.expanduser(config.cache_dir))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "dynamo_lite")


# ---- fingerprints and keys --------------------------------------------------------------
_CODE_FINGERPRINTS: "weakref.WeakKeyDictionary[types.CodeType, str]" = weakref.WeakKeyDictionary()


def code_fingerprint(code: types.CodeType) -> str:
    """A hash of everything a code object is (bytecode, constants, nested code, names, flags,
    file, line table and exception table): equal in two processes exactly when the code is."""
    fp = _CODE_FINGERPRINTS.get(code)
    if fp is None:
        h = hashlib.sha256()
        _feed_code(h, code)
        fp = _CODE_FINGERPRINTS[code] = h.hexdigest()
    return fp


def _feed_code(h, code: types.CodeType) -> None:
    for name in ("co_argcount", "co_posonlyargcount", "co_kwonlyargcount", "co_flags", "co_firstlineno",
                 "co_name", "co_qualname", "co_filename", "co_names", "co_varnames", "co_freevars",
                 "co_cellvars"):
        h.update(repr(getattr(code, name)).encode())
        h.update(b"\0")
    h.update(code.co_code)
    h.update(code.co_linetable)
    h.update(code.co_exceptiontable)
    for const in code.co_consts:
        _feed_const(h, const)


def _feed_const(h, value) -> None:
    if isinstance(value, types.CodeType):
        h.update(b"<code>")
        _feed_code(h, value)
    elif type(value) in (tuple, frozenset):
        items = list(value)
        if type(value) is frozenset:  # (its iteration order follows string hashes: per process)
            items.sort(key=lambda v: (type(v).__name__, repr(v)))
        h.update(f"<{type(value).__name__} {len(items)}>".encode())
        for item in items:
            _feed_const(h, item)
    elif _is_constant(value):  # what a compiled code object can hold: None, bool, int, float, str, ...
        h.update(f"{type(value).__name__}:{value!r}\0".encode())
    else:  # an object in generated code (resume functions, loop bodies): what it is, across processes
        h.update(f"<object {_stable_name(value)}>".encode())


def _stable_name(obj) -> str:
    """An object constant of generated code, named as it would be in another process; an object
    with no such name gets a name of this process only (its code then matches no stored entry)."""
    if type(obj) is _C.CallWithHookOff:
        return f"hook off: {_stable_name(obj.__wrapped__)}"
    if isinstance(obj, types.FunctionType) and (cache.is_generated(obj.__code__)
                                                or obj.__code__ in cache._GENERATED_KIND):
        h = hashlib.sha256(code_fingerprint(obj.__code__).encode())
        for default in obj.__defaults__ or ():
            _feed_const(h, default)
        return f"generated {obj.__qualname__} {h.hexdigest()}"
    try:
        return repr(_describe(obj))
    except Unpersistable:
        return f"{static.qualname(obj)} at {id(obj):#x} in process {os.getpid()}"


def function_fingerprint(fn: types.FunctionType, within: tuple = ()) -> str:
    """What a Python function does: its code, its defaults and what its closure cells hold
    (constants; functions by their fingerprint; classes, modules and builtins by name: a
    decorator's wrapper, a default that is a function).  Raises Unpersistable for any other
    object there."""
    where = static.qualname(fn)
    h = hashlib.sha256(code_fingerprint(fn.__code__).encode())
    within = (*within, fn)
    for default in (fn.__defaults__ or ()) + tuple(sorted((fn.__kwdefaults__ or {}).items())):
        _feed_value(h, default, f"function {where} has a default", within)
    for cell in fn.__closure__ or ():
        try:
            content = cell.cell_contents
        except ValueError:
            h.update(b"<empty cell>")
            continue
        _feed_value(h, content, f"function {where} closes over", within)
    return h.hexdigest()


def _feed_value(h, value, where: str, within: tuple) -> None:
    if _is_constant(value):
        _feed_const(h, value)
    elif type(value) is tuple:  # (a keyword default: (name, value))
        for item in value:
            _feed_value(h, item, where, within)
    elif isinstance(value, types.FunctionType):
        if any(value is f for f in within):  # (a function reaching itself: the n-th one up)
            h.update(f"<recursive {[f is value for f in within].index(True)}>".encode())
        elif len(within) < 8:
            h.update(f"<function {function_fingerprint(value, within)}>".encode())
        else:
            raise Unpersistable(f"{where} functions nested too deep")
    elif isinstance(value, (type, types.ModuleType) + _NAMED_TYPES + _SINGLETONS):
        h.update(repr(_describe(value)).encode())
    elif static.defined_in_torch(value) and not isinstance(value, (torch.Tensor, torch.nn.Module)) \
            and isinstance(getattr(value, "__dict__", None), dict) \
            and all(_is_constant(v) or isinstance(v, _SINGLETONS + (torch.device,)) for v in vars(value).values()):
        # a torch object holding constants (a decorator's torch.autocast): its class and state
        h.update(f"{_describe(type(value))} {sorted((k, repr(v)) for k, v in vars(value).items())}".encode())
    elif isinstance(value, torch.nn.Module) and _stateless_module(value):
        # a module with no parameters, buffers, submodules or hooks (a decorator's marker, as
        # transformers' hub-kernel decorators keep): its class, by what the class is
        h.update(f"<module {_class_fingerprint(type(value), where, within)} "
                 f"{sorted((k, repr(v)) for k, v in _instance_dict(value).items() if _is_constant(v))}>".encode())
    else:
        raise Unpersistable(f"{where} a {static.qualname(type(value))} object")


def _instance_dict(obj) -> dict:
    d = object.__getattribute__(obj, "__dict__")  # (no descriptor of the user's class runs)
    return d if type(d) is dict else {}


def _stateless_module(module: torch.nn.Module) -> bool:
    for name, v in _instance_dict(module).items():
        if _is_constant(v):
            continue
        if name.startswith("_") and type(v) in (dict, set, collections.OrderedDict) and not v:
            continue  # (its empty parameter, buffer, submodule and hook tables)
        return False
    return True


def _class_fingerprint(cls: type, where: str, within: tuple) -> str:
    """What a class made at run time is: its module, qualified name, bases and the functions and
    constants of its body.  Raises Unpersistable for anything else there."""
    h = hashlib.sha256(f"{static.module_name(cls)}.{static.qualname(cls)}".encode())
    for base in cls.__bases__:
        try:
            h.update(repr(_describe(base)).encode())
        except Unpersistable:
            if len(within) >= 8:
                raise
            h.update(_class_fingerprint(base, where, (*within, base)).encode())
    for name, v in sorted(cls.__dict__.items()):
        if name in ("__module__", "__qualname__", "__doc__", "__dict__", "__weakref__", "__annotations__"):
            continue
        if isinstance(v, (staticmethod, classmethod)):
            v = v.__func__
        h.update(name.encode())
        _feed_value(h, v, f"{where} a {static.qualname(cls)} object whose class holds", within)
    return h.hexdigest()


def _is_constant(value) -> bool:
    if type(value) in (tuple, frozenset):
        return all(_is_constant(v) for v in value)
    return type(value) in (type(None), bool, int, float, complex, str, bytes) or value is Ellipsis


_PACKAGE_FP: list = []


def _package_fingerprint() -> str:
    """dynamo_lite's version as its files are: the content of every Python source (an edited
    checkout is another version; the same sources installed elsewhere are the same version, so a
    cache directory or a package moves to another machine) and of the C extension this
    interpreter loaded (extensions built beside it for other interpreters are not this one's)."""
    if not _PACKAGE_FP:
        root = os.path.dirname(os.path.abspath(__file__))
        h = hashlib.sha256()
        if getattr(_C, "__file__", None):
            with open(_C.__file__, "rb") as f:
                h.update(hashlib.sha256(f.read()).digest())
        for folder, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                if name.endswith(".py"):
                    with open(os.path.join(folder, name), "rb") as f:
                        content = f.read()
                    h.update(f"{os.path.relpath(os.path.join(folder, name), root)}:{len(content)}\n".encode())
                    h.update(content)
        _PACKAGE_FP.append(h.hexdigest()[:32])
    return _PACKAGE_FP[0]


def key_parts(converter, code: types.CodeType) -> dict:
    """What an entry's meaning depends on besides its guards (see the module docstring)."""
    name = registered_backend_name(converter.base_backend)
    if name is None:
        raise Unpersistable("the backend is a callable, not a registered name (it cannot be named in another "
                            "process)")
    patches = sorted((k, repr(v)) for k, v in (converter.inductor_patches or {}).items())
    return {"code": code_fingerprint(code), "python": sys.version, "torch": torch.__version__,
            "dynamo_lite": _package_fingerprint(),
            "config": repr([(k, getattr(config, k)) for k in _CONFIG_KNOBS]),
            "backend": f"{name} {patches}" if patches else name,
            "fullgraph": repr(converter.fullgraph), "dynamic": repr(converter.dynamic)}


_PART_WORDS = {"code": "the code of the function changed", "python": "another Python version",
               "torch": "another torch version", "dynamo_lite": "another dynamo_lite version",
               "config": "a config knob that changes capture differs", "backend": "another backend",
               "fullgraph": "fullgraph differs", "dynamic": "dynamic= differs",
               "hash_seed": "another string hash seed (PYTHONHASHSEED): the capture followed string hashes "
                            "(a set's order, hash())"}


def _hash_seed_fixed() -> bool:
    """Are string hashes the same in the next process (PYTHONHASHSEED set, or randomization off)?"""
    return not sys.flags.hash_randomization or os.environ.get("PYTHONHASHSEED", "random") != "random"


def _hash_probe() -> str:
    """Equal in two processes exactly when their string hashes are (PYTHONHASHSEED)."""
    return str(hash("dynamo_lite: string hash probe"))


def _frame_dir(code: types.CodeType) -> str:
    kind = cache._GENERATED_KIND.get(code, ("", ""))
    text = f"{code.co_filename}\0{code.co_qualname}\0{code.co_firstlineno}\0{kind[0]}\0{kind[1]}"
    return os.path.join(cache_dir(), FORMAT, hashlib.sha256(text.encode()).hexdigest()[:24])


# ---- what a guard holds by identity, in words that hold across processes ------------------
def _importable(module: str, qualname: str):
    """The object at ``module``.``qualname`` (imported); raises Miss."""
    if not module or "<locals>" in qualname:
        raise Miss(f"{module}.{qualname} cannot be imported")
    try:
        obj = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except Exception as e:  # noqa: BLE001 - anything an import or a module attribute raises
        raise Miss(f"{module}.{qualname} cannot be found ({type(e).__name__})") from None
    return obj


_MODULE_SINGLETONS = (("os", "environ"),)
# the builtin types the types module names (their own names, `function`, are not importable)
_TYPES_NAMES = {v: k for k, v in vars(types).items() if isinstance(v, type) and v.__module__ == "builtins"
                and not k.startswith("_")}
_SINGLETONS = (torch.dtype, torch.layout, torch.memory_format, enum.Enum)
_NAMED_TYPES = (types.BuiltinFunctionType, types.MethodDescriptorType, types.WrapperDescriptorType,
                types.ClassMethodDescriptorType, types.GetSetDescriptorType, types.MemberDescriptorType)


def _describe(obj, found_by_source: bool = False) -> tuple:
    """``obj`` in words that hold in another process (see the module docstring); raises
    Unpersistable.  ``found_by_source``: a guard's source finds the object again (a function
    then needs no importable name: a decorated method's inner function)."""
    if isinstance(obj, types.ModuleType):
        name = obj.__name__
        if sys.modules.get(name) is not obj:
            raise Unpersistable(f"module {name!r} is not sys.modules[{name!r}]")
        return ("module", name)
    if isinstance(obj, types.CodeType):
        return ("code", code_fingerprint(obj))
    if isinstance(obj, types.FunctionType):
        module, qualname = static.module_name(obj), static.qualname(obj)
        if not found_by_source and ("<locals>" in qualname or _safe_importable(module, qualname) is not obj):
            raise Unpersistable(f"function {qualname} cannot be found by its name")
        return ("function", module, qualname, function_fingerprint(obj))
    if isinstance(obj, type):
        if getattr(obj, "_dynamo_lite_optimized_module", False) and "_dl_converter" in obj.__dict__:
            return ("optimized", _describe(obj.__bases__[1]))
        module, qualname = static.module_name(obj), static.qualname(obj)
        if module == "builtins" and _TYPES_NAMES.get(obj):  # (types.FunctionType, named `function`)
            return ("global", "types", _TYPES_NAMES[obj])
        if _safe_importable(module, qualname) is not obj:
            if found_by_source:  # (a class made at run time: by what it is)
                return ("class", module, qualname, _class_fingerprint(obj, f"class {qualname}", (obj,)))
            raise Unpersistable(f"class {qualname} cannot be found by its name")
        return ("global", module, qualname)
    if isinstance(obj, types.BuiltinMethodType) and not isinstance(obj.__self__, (types.ModuleType, type(None))):
        owner, name = obj.__self__, obj.__name__  # a method of a constant or a class: frozenset(...).__contains__
        if _is_constant(owner):
            return ("bound", ("value", owner), name)
        if isinstance(owner, type):
            return ("bound", _describe(owner), name)
        raise Unpersistable(f"a method of a {static.qualname(type(owner))} object is held by identity")
    if isinstance(obj, _NAMED_TYPES):
        module = getattr(obj, "__module__", None) or getattr(getattr(obj, "__objclass__", None), "__module__", "")
        qualname = getattr(obj, "__qualname__", "")
        name = getattr(obj, "__name__", "")
        for attr in (qualname, name):  # (torch.arange's qualname is _VariableFunctionsClass.arange)
            if isinstance(module, str) and isinstance(attr, str) and attr and _safe_importable(module, attr) is obj:
                return ("global", module, attr)
        owner = getattr(obj, "__objclass__", None)  # a slot of a class: FunctionType.__builtins__
        if isinstance(owner, type) and isinstance(name, str) and owner.__dict__.get(name) is obj:
            return ("descriptor", _describe(owner), name)
        raise Unpersistable(f"{type(obj).__name__} {qualname} cannot be found by its name")
    if isinstance(obj, torch.nn.Module):
        stores = tuple(tuple(obj.__dict__.get(s, {})) for s in ("_parameters", "_buffers", "_modules"))
        return ("nn_module", _describe(type(obj), found_by_source), stores)
    if type(obj) in (property, staticmethod, classmethod) and found_by_source:
        parts = (obj.fget, obj.fset, obj.fdel) if type(obj) is property else (obj.__func__,)
        return (type(obj).__name__, tuple(None if p is None else _describe(p, True) for p in parts))
    for module, attr in _MODULE_SINGLETONS:  # (objects whose state the trace guards read by read)
        if obj is getattr(sys.modules.get(module), attr, None):
            return ("attr", module, attr)
    if obj is None or type(obj) is bool or isinstance(obj, _SINGLETONS):
        return ("const", obj)  # (unpickled as the same object: dtypes, layouts, enum members)
    raise Unpersistable(f"a guard holds a {static.qualname(obj)} object by identity")


def _safe_importable(module: str, qualname: str):
    try:
        return _importable(module, qualname)
    except Miss:
        return None


def _check(desc: tuple, obj, what: str) -> None:
    """Raises Miss unless ``obj`` (found now at ``what``) is what ``desc`` says."""
    kind = desc[0]
    if kind == "const":
        ok = obj is desc[1]
    elif kind == "module":
        ok = isinstance(obj, types.ModuleType) and sys.modules.get(desc[1]) is obj
    elif kind == "code":
        ok = isinstance(obj, types.CodeType) and code_fingerprint(obj) == desc[1]
        if not ok:
            raise Miss(f"{what}: the code changed")
    elif kind == "function":
        ok = isinstance(obj, types.FunctionType) and static.module_name(obj) == desc[1] \
            and static.qualname(obj) == desc[2]
        if ok:
            try:
                same = function_fingerprint(obj) == desc[3]
            except Unpersistable as e:
                raise Miss(f"{what}: {e}") from None
            if not same:
                raise Miss(f"{what}: function {desc[2]} changed (its code or defaults)")
    elif kind == "global":
        ok = obj is _importable(desc[1], desc[2])
    elif kind == "class":
        ok = isinstance(obj, type) and static.module_name(obj) == desc[1] and static.qualname(obj) == desc[2]
        if ok:
            try:
                same = _class_fingerprint(obj, f"class {desc[2]}", (obj,)) == desc[3]
            except Unpersistable as e:
                raise Miss(f"{what}: {e}") from None
            if not same:
                raise Miss(f"{what}: class {desc[2]} changed")
    elif kind == "bound":
        owner = getattr(obj, "__self__", None)
        ok = isinstance(obj, types.BuiltinMethodType) and obj.__name__ == desc[2]
        if ok and desc[1][0] == "value":
            ok = type(owner) is type(desc[1][1]) and owner == desc[1][1]
        elif ok:
            _check(desc[1], owner, f"{what}.__self__")
    elif kind == "attr":
        ok = obj is getattr(sys.modules.get(desc[1]), desc[2], None)
    elif kind == "descriptor":
        owner = getattr(obj, "__objclass__", None)
        ok = isinstance(obj, _NAMED_TYPES) and isinstance(owner, type) and owner.__dict__.get(desc[2]) is obj
        if ok:
            _check(desc[1], owner, f"{what}.__objclass__")
    elif kind == "optimized":
        ok = isinstance(obj, type) and getattr(obj, "_dynamo_lite_optimized_module", False) \
            and len(obj.__bases__) == 2
        if ok:
            _check(desc[1], obj.__bases__[1], what)
    elif kind in ("property", "staticmethod", "classmethod"):
        ok = type(obj).__name__ == kind and type(obj) in (property, staticmethod, classmethod)
        if ok:
            now = (obj.fget, obj.fset, obj.fdel) if kind == "property" else (obj.__func__,)
            for part, d in zip(now, desc[1]):
                if d is None:
                    ok = ok and part is None
                else:
                    _check(d, part, f"{what} ({kind})")
    elif kind == "nn_module":
        ok = isinstance(obj, torch.nn.Module)
        if ok:
            _check(desc[1], type(obj), f"type({what})")
            now = tuple(tuple(obj.__dict__.get(s, {})) for s in ("_parameters", "_buffers", "_modules"))
            if now != desc[2]:
                raise Miss(f"{what}: the module's parameters, buffers or submodules changed")
    else:
        ok = False
    if not ok:
        raise Miss(f"{what} is not the {_words(desc)} it was")


def _words(desc: tuple) -> str:
    kind = desc[0]
    if kind in ("function", "global", "class"):
        return f"{desc[1]}.{desc[2]}"
    if kind == "module":
        return f"module {desc[1]}"
    if kind == "nn_module":
        return f"{_words(desc[1])} module"
    if kind == "optimized":
        return f"compiled {_words(desc[1])}"
    return kind


@dataclasses.dataclass
class _Rebind:
    """A guard whose ``field`` held an object by identity: made again on load about the object
    the same source finds then, after checking that it is what ``desc`` says."""

    cls: type
    fields: dict  # every field of the guard but ``field``
    field: str
    desc: tuple
    # rebinds of one object share a number, of different objects differ (_portable_set): the
    # objects found on load must be one object, or different ones, the same way
    alias: int = -1

    def bind(self, scope: dict) -> Guard:
        fields = dict(self.fields)
        if self.cls is IdGuard:
            what = fields["source"].name()
            obj = _eval(what, scope)
        elif self.cls is TypeGuard:
            what = f"type({fields['source'].name()})"
            obj = type(_eval(fields["source"].name(), scope))
        elif self.cls is IsGuard:
            target = IsGuard(fields["source"], fields["attrs"], None)._target()
            what = target.name()
            obj = _eval(what, scope)
        elif self.cls is ConstAttrIsGuard:
            what = f"{_words(_describe_or_none(fields['owner']))}.{fields['attr']}"
            try:
                obj = getattr(fields["owner"], fields["attr"])
            except Exception as e:  # noqa: BLE001
                raise Miss(f"{what} cannot be read ({type(e).__name__})") from None
        else:
            raise Miss(f"no rebinding for {self.cls.__name__}")
        _check(self.desc, obj, what)
        fields[self.field] = hold(obj) if self.field == "held" else obj
        return _make(self.cls, fields)


def _describe_or_none(obj) -> tuple:
    try:
        return _describe(obj)
    except Unpersistable:
        return ("object",)


def _eval(text: str, scope: dict):
    try:
        return eval(text, scope)  # noqa: S307 - a source's own expression (what the guards read)
    except Exception as e:  # noqa: BLE001 - the object is not there now
        raise Miss(f"{text} cannot be read now ({type(e).__name__})") from None


@dataclasses.dataclass
class _BlockRebind:
    """A BlockGuard: its template's guards stored (and rebound) like an entry's, compiled again."""

    source: Source
    guards: list
    arg_names: tuple
    template_root: Any
    outside: tuple

    def bind(self, scope: dict) -> Guard:
        inner = dict(scope)
        inner["___block"] = _eval(self.source.name(), scope)
        gs = GuardSet()
        for g in self.guards:
            gs.add(g.bind(inner) if isinstance(g, (_Rebind, _BlockRebind)) else g)
        return BlockGuard(self.source, gs.compile(self.arg_names), self.template_root, self.outside)


_REBIND_FIELDS = {IdGuard: "held", IsGuard: "held", ConstAttrIsGuard: "value"}


def _rebound_value(guard: Guard, field: str):
    """The object a guard's rebound field holds (``held``: the object ``hold`` keeps)."""
    return held_object(guard.held) if field == "held" else getattr(guard, field)


def _portable(guard: Guard):
    """``guard`` as stored: itself, or a _Rebind / _BlockRebind."""
    if isinstance(guard, BlockGuard):
        template = list(dict.fromkeys(g for _, g in guard.check.exprs))
        return _BlockRebind(guard.source, [_portable(g) for g in template], tuple(guard.check.arg_names),
                            guard.template_root, tuple(guard.outside))
    if isinstance(guard, ExprGuard):
        for key, value in guard.consts:
            if not _is_constant(value):
                _describe(value)  # (raises Unpersistable: e.g. a table held by identity)
    field = _REBIND_FIELDS.get(type(guard))
    if type(guard) is TypeGuard and isinstance(guard.type, type) \
            and (getattr(guard.type, "_dynamo_lite_optimized_module", False)
                 or _safe_importable(static.module_name(guard.type), static.qualname(guard.type)) is not guard.type):
        field = "type"  # (a class found by the instance's type: compile(module)'s, one made at run time)
    if field is None:
        return guard
    value = _rebound_value(guard, field)
    if value is None or type(value) is bool:
        return guard
    fields = {f.name: getattr(guard, f.name) for f in dataclasses.fields(guard) if f.name != field}
    return _Rebind(type(guard), fields, field, _describe(value, found_by_source=True))


def _portable_set(guard_set) -> list:
    items, groups = [], {}
    for g in guard_set:
        p = _portable(g)
        if isinstance(p, _Rebind):
            p.alias = groups.setdefault(id(_rebound_value(g, p.field)), len(groups))
        items.append(p)
    return items


def _bind_all(stored: list, scope: dict) -> GuardSet:
    """The stored guards made guards of this process (rebinding each identity fact); raises Miss."""
    gs = GuardSet()
    by_alias: dict = {}
    seen: dict = {}
    for g in stored:
        if isinstance(g, _Rebind):
            guard = g.bind(scope)
            if g.alias >= 0:
                obj = getattr(guard, g.field)
                if by_alias.setdefault(g.alias, obj) is not obj or seen.setdefault(id(obj), g.alias) != g.alias:
                    raise Miss(f"objects the entry relied on are not one object (or not distinct) as they were: "
                               f"{guard.describe()}")
            gs.add(guard)
        else:
            gs.add(g.bind(scope) if isinstance(g, _BlockRebind) else g)
    return gs


def _make(cls, fields: dict):
    obj = object.__new__(cls)
    for name, value in fields.items():
        object.__setattr__(obj, name, value)
    return obj


# ---- pickling: objects by name, never by value -----------------------------------------
_VALUE_TYPES = (torch.dtype, torch.device, torch.Size, torch.layout, torch.memory_format, slice, range,
                enum.Enum, torch._ops.OpOverload, torch._ops.OpOverloadPacket)


class _Load(threading.local):
    f_globals: Optional[dict] = None
    graph: Any = None


_LOAD = _Load()


def _load_code(data: bytes, consts: tuple, kind):
    code = marshal.loads(data).replace(co_consts=consts)
    if kind is None:
        cache.add_generated(code)
    elif kind != "user":
        cache.register_generated(code, *kind)
    return code


def _load_function(code, name: str, qualname: str, defaults, kwdefaults):
    fn = types.FunctionType(code, _LOAD.f_globals, name, defaults)
    fn.__qualname__ = qualname
    fn.__kwdefaults__ = kwdefaults
    return fn


def _load_graph():
    return _LOAD.graph


def _resolve(desc: tuple):
    if desc[0] == "module":
        module = sys.modules.get(desc[1])
        if module is None:
            try:
                module = importlib.import_module(desc[1])
            except Exception as e:  # noqa: BLE001
                raise Miss(f"module {desc[1]} cannot be imported ({type(e).__name__})") from None
        return module
    obj = _importable(desc[1], desc[2])
    if desc[0] == "function":
        _check(desc, obj, f"{desc[1]}.{desc[2]}")
    return obj


def _load_op(namespace: str, name: str, overload: Optional[str]):
    """``torch.ops.<namespace>.<name>[.<overload>]`` (a graph's aten targets, stored by name)."""
    try:
        packet = getattr(getattr(torch.ops, namespace), name)
        return packet if overload is None else getattr(packet, overload)
    except (AttributeError, RuntimeError) as e:
        raise Miss(f"operator {namespace}::{name} is not in this torch ({type(e).__name__})") from None


class _Reducers:
    """Pickles guards and generated code: our dataclasses by fields, values by value, and
    every other object by name (``_describe``), or not at all (Unpersistable)."""

    def __init__(self, file, graph_fn=None, f_globals=None, code: bool = False, avoid=frozenset()):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)  # type: ignore[call-arg]
        self.graph_fn = graph_fn
        self.f_globals = f_globals
        # generated code: a list, dict or set constant is an object the code may mutate (a copy
        # would not be it); in guards they are expected values
        self.code = code
        self.avoid = avoid

    def reducer_override(self, obj):
        if self.graph_fn is not None and obj is self.graph_fn:
            return _load_graph, ()
        if isinstance(obj, (Guard, Source, _Rebind, _BlockRebind, _NodeRef)) or (
                dataclasses.is_dataclass(obj) and not isinstance(obj, type)
                and type(obj).__module__.startswith("dynamo_lite.guards")):
            fields = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
            return _make, (type(obj), fields)
        if isinstance(obj, types.CodeType):
            kind = cache._GENERATED_KIND.get(obj)
            if kind is None:
                kind = None if cache.is_generated(obj) else "user"
            data = marshal.dumps(obj.replace(co_consts=(None,) * len(obj.co_consts)))
            return _load_code, (data, obj.co_consts, kind)
        if type(obj) is _C.CallWithHookOff:
            return _C.CallWithHookOff, (obj.__wrapped__,), dict(obj.__dict__) or None
        if isinstance(obj, (type, types.FunctionType, types.BuiltinFunctionType)) \
                and static.module_name(obj).split(".")[0] == "dynamo_lite":
            return NotImplemented  # ours (the loaders above, guard kinds): by name; our version is in the key
        if isinstance(obj, types.FunctionType):
            code = obj.__code__
            if (cache.is_generated(code) or code in cache._GENERATED_KIND) and obj.__globals__ is self.f_globals \
                    and not obj.__closure__:
                return _load_function, (code, obj.__name__, obj.__qualname__, obj.__defaults__, obj.__kwdefaults__)
            return _resolve, (_describe(obj),)
        if isinstance(obj, types.BuiltinMethodType) and not isinstance(obj.__self__, (types.ModuleType, type(None))):
            desc = _describe(obj)
            return getattr, (desc[1][1] if desc[1][0] == "value" else obj.__self__, desc[2])
        if isinstance(obj, (type, types.ModuleType) + _NAMED_TYPES):
            desc = _describe(obj)
            if desc[0] == "optimized":
                raise Unpersistable("a compiled module's class is held outside a guard")
            return _resolve, (desc,)
        if isinstance(obj, torch._ops.OpOverload):  # (its own pickling reaches pybind11 records)
            return _load_op, (obj.namespace, obj._opname, obj._overloadname)
        if isinstance(obj, torch._ops.OpOverloadPacket):
            namespace, name = obj._qualified_op_name.split("::", 1)
            return _load_op, (namespace, name, None)
        if isinstance(obj, _VALUE_TYPES):
            return NotImplemented  # their own pickling (by value or by name)
        if type(obj) in (tuple, frozenset, int, float, complex, str, bytes, bool, type(None), type(Ellipsis)) \
                or type(obj) in (list, dict, set) and not self.code:
            return NotImplemented
        raise Unpersistable(f"the entry holds a {static.qualname(obj)} object")


class _Pickler(_Reducers, pickle.Pickler):
    pass


class _ScanningPickler(_Reducers, pickle._Pickler):  # type: ignore[name-defined]
    """The same, in Python (it sees every int): raises Unpersistable on an int in ``avoid``
    (an id() or identity hash the trace read: an address of this process)."""

    def persistent_id(self, obj):
        if type(obj) is int and obj in self.avoid:
            raise Unpersistable("the entry holds an object's id() or identity hash (an address of this process)")
        return None


def _dumps(obj, avoid=frozenset(), **kw) -> bytes:
    buf = io.BytesIO()
    (_ScanningPickler if avoid else _Pickler)(buf, avoid=avoid, **kw).dump(obj)
    return buf.getvalue()


def _loads(data: bytes):
    try:
        return pickle.loads(data)
    except (Miss, Unpersistable):
        raise
    except Exception as e:  # noqa: BLE001 - a damaged or foreign file
        raise Miss(f"the entry does not load ({type(e).__name__}: {e})") from None


# ---- graph inputs ---------------------------------------------------------------------
def _input_specs(graph_inputs) -> Optional[list]:
    """Metadata of the graph's inputs to make fake inputs from on load; None when one is
    symbolic (a dynamic size): only a backend that needs no inputs can rebuild that graph."""
    specs = []
    for gi in graph_inputs:
        fake = gi.fake
        if isinstance(fake, torch.Tensor):
            if type(fake).__name__ != "FakeTensor" and not isinstance(fake, torch.nn.Parameter):
                return None
            if any(not isinstance(v, int) for v in (*fake.shape, *fake.stride(), fake.storage_offset())):
                return None
            specs.append(("tensor", tuple(fake.shape), tuple(fake.stride()), fake.storage_offset(), fake.dtype,
                          fake.device.type, fake.requires_grad, isinstance(gi.example, torch.nn.Parameter)))
        elif type(fake) in (int, float, bool):
            specs.append(("value", fake))
        else:
            return None
    return specs


def _fake_inputs(specs: list):
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    mode = FakeTensorMode(shape_env=ShapeEnv())
    fakes = []
    with mode:
        for spec in specs:
            if spec[0] == "value":
                fakes.append(spec[1])
                continue
            _, shape, stride, offset, dtype, device, requires_grad, is_param = spec
            t = torch.empty_strided(shape, stride, dtype=dtype, device=device)
            if offset:
                t = t.as_strided(shape, stride, offset)
            t.requires_grad_(requires_grad)
            fakes.append(t)
    return mode, fakes


# ---- store ------------------------------------------------------------------------------
def store(converter, code: types.CodeType, func, guard_set: GuardSet, arg_names: tuple, new_code,
          graph_fn, gm, graph_inputs, hash_seed_dependent: bool = False,
          process_dependent: Optional[str] = None, process_values=frozenset(),
          break_event=None, report: Optional[dict] = None) -> None:
    """Write the entry just made for ``code`` (never raises: an entry that cannot be stored is
    counted, with its reason).  ``hash_seed_dependent``: the trace followed string hashes (a
    set's order), so the entry is keyed by the hash seed too; ``process_dependent``: it used an
    address (the order of a set of objects), so it is not stored; ``process_values``: the values of
    id() and identity hashes it read: an entry holding one is not stored.  ``break_event`` (the
    trace's GraphBreakEvent) and ``report`` (``ops``, ``queries`` of its GraphEvent) are emitted
    again when the entry is loaded, so reports see a loaded frame as they saw it traced."""
    try:
        if process_dependent:
            raise Unpersistable(f"the trace used {process_dependent}, which holds in this process only")
        parts = key_parts(converter, code)
        if hash_seed_dependent:
            if not _hash_seed_fixed():
                raise Unpersistable("the capture followed string hashes (a set's order, hash()), which change with "
                                    "every process unless PYTHONHASHSEED is set: set it to reuse such frames")
            parts["hash_seed"] = _hash_probe()
        if gm is not None and graph_fn is not None and type(graph_fn).__name__ != "CheckedCompiledGraph":
            raise Unpersistable("the graph was split for DDP")
        specs = _input_specs(graph_inputs) if gm is not None else []
        backend = registered_backend_name(converter.base_backend)
        if gm is not None and backend != "eager":
            # the backend compiles the stored graph again on fake inputs made from metadata: what
            # a functionalising backend assumes of the real inputs beyond that (which share
            # storage, which are views it may write through) must not matter
            if specs is None:
                raise Unpersistable(f"a graph with symbolic inputs is compiled again only for backend 'eager' "
                                    f"(this one: {backend!r})")
            if _mutates(gm):
                raise Unpersistable(f"a graph that mutates tensors in place is compiled again only for backend "
                                    f"'eager' (this one: {backend!r})")
            groups = storage_groups(*[gi.example for gi in graph_inputs if isinstance(gi.example, torch.Tensor)])
            if groups is None or any(g != i for i, g in enumerate(groups)):
                raise Unpersistable(f"graph inputs that share storage are compiled again only for backend 'eager' "
                                    f"(this one: {backend!r})")
        avoid = frozenset(process_values)
        portable = _portable_set(guard_set)
        guards_data = _dumps(portable, f_globals=func.__globals__, avoid=avoid)
        code_data = _dumps(new_code, graph_fn=graph_fn, f_globals=func.__globals__, code=True, avoid=avoid) \
            if new_code is not None else None
        gm_data = _graph_bytes(gm, func.__globals__, avoid) if gm is not None else None
        brk = None
        if break_event is not None:
            brk = (break_event.break_id, break_event.reason, break_event.instruction,
                   [(f.filename, f.lineno, f.name, f.line) for f in break_event.user_stack])
        record = {"arg_names": tuple(arg_names), "guards": guards_data, "code": code_data, "graph": gm_data,
                  "inputs": specs, "name": cache.display_name(code), "created": time.time(), "break": brk,
                  "report": dict(report or {}), "grad": torch.is_grad_enabled()}
        body = pickle.dumps(record, protocol=pickle.HIGHEST_PROTOCOL)
        header = pickle.dumps(parts, protocol=pickle.HIGHEST_PROTOCOL)
        path = _write(_frame_dir(code), header, body, _canonical(portable))
        if config.aot_libraries and gm is not None and backend == "inductor":
            if config.aot_libraries == "background":
                _queue_aot_library(path, record)
            else:
                _store_aot_library(path)
    except Unpersistable as e:
        _NOT_STORED[str(e)] += 1
        log.debug("%s: entry not stored: %s", cache.display_name(code), e)
        return
    except Exception as e:  # noqa: BLE001 - the disk, a pickling failure: the capture stands
        _NOT_STORED[f"{type(e).__name__}: {e}"] += 1
        log.debug("%s: entry not stored: %s: %s", cache.display_name(code), type(e).__name__, e)
        return
    _STATS["stored"] += 1
    _WRITTEN.add(path)
    _ENTRIES.setdefault(converter, {})[(os.path.basename(os.path.dirname(path)), os.path.basename(path))] = path
    log.debug("%s: entry stored", cache.display_name(code))
    _STORES_SINCE_TRIM[0] += 1
    if _STORES_SINCE_TRIM[0] >= _TRIM_EVERY or _STORES_SINCE_TRIM[0] == 1:
        trim()


@dataclasses.dataclass(frozen=True)
class _NodeRef:
    """A graph node named in another node's arguments (stored graphs)."""

    name: str


def _strip_nodes(a):
    if isinstance(a, torch.fx.Node):
        return _NodeRef(a.name)
    if type(a) is tuple:
        return tuple(_strip_nodes(x) for x in a)
    if type(a) in (list, torch.fx.immutable_collections.immutable_list):
        return [_strip_nodes(x) for x in a]
    if type(a) in (dict, torch.fx.immutable_collections.immutable_dict):
        return {k: _strip_nodes(v) for k, v in a.items()}
    if isinstance(a, (tuple, list, dict)):
        raise Unpersistable(f"a graph node's argument is a {static.qualname(type(a))}")
    if isinstance(a, slice):
        return slice(_strip_nodes(a.start), _strip_nodes(a.stop), _strip_nodes(a.step))
    return a


def _with_nodes(a, env: dict):
    if isinstance(a, _NodeRef):
        return env[a.name]
    if type(a) in (tuple, list):
        return type(a)(_with_nodes(x, env) for x in a)
    if type(a) is dict:
        return {k: _with_nodes(v, env) for k, v in a.items()}
    if type(a) is slice:
        return slice(_with_nodes(a.start, env), _with_nodes(a.stop, env), _with_nodes(a.step, env))
    return a


def _graph_bytes(gm: torch.fx.GraphModule, f_globals, avoid=frozenset()) -> bytes:
    """The graph as its nodes (op, name, target, args, kwargs; targets by name) and the tensors
    its get_attr nodes read (by value): rebuilt on load without tracing anything."""
    nodes, attrs = [], {}
    for n in gm.graph.nodes:
        if n.op == "call_module":
            raise Unpersistable("the graph calls a submodule")
        if n.op == "get_attr":
            value = getattr(gm, n.target)
            if type(value) not in (torch.Tensor, torch.nn.Parameter):
                raise Unpersistable(f"the graph holds a {static.qualname(type(value))} attribute")
            attrs[n.target] = value.detach().clone() if type(value) is torch.Tensor else value
        nodes.append((n.op, n.name, n.target, _strip_nodes(n.args), _strip_nodes(n.kwargs)))
    return _dumps((nodes, pickle.dumps(attrs, protocol=pickle.HIGHEST_PROTOCOL)), f_globals=f_globals, avoid=avoid)


# operator's in-place functions (iadd, iand, ..., setitem, delitem)
_OPERATOR_INPLACE = frozenset(n for n in vars(operator) if n.startswith("i") and (n[1:] in vars(operator)
                                                                                  or n[1:] + "_" in vars(operator))) \
    | {"setitem", "delitem", "__setitem__", "__delitem__"}


def _mutates(gm: torch.fx.GraphModule) -> bool:
    """Might the graph write to a tensor in place (``x.add_()``, ``relu_``, ``out=``,
    ``inplace=True``, ``x[i] = v``, ``x += y``)?  Erring towards yes."""
    for n in gm.graph.nodes:
        if n.op not in ("call_function", "call_method"):
            continue
        name = n.target if isinstance(n.target, str) else getattr(n.target, "__name__", "")
        if getattr(n.target, "__module__", "") in ("_operator", "operator"):
            if name in _OPERATOR_INPLACE:  # (operator.and_ is `a & b`: not in place)
                return True
            continue
        if name.endswith("_") and not name.endswith("__") or "out" in n.kwargs \
                or n.kwargs.get("inplace") is True or name in ("setitem", "__setitem__", "copy_"):
            return True
        if isinstance(n.target, torch._ops.OpOverload) and n.target._schema.is_mutable:
            return True
    return False


def _graph_module(data: bytes) -> torch.fx.GraphModule:
    nodes, attrs = _loads(data)
    graph = torch.fx.Graph()
    env: dict = {}
    for op, name, target, args, kwargs in nodes:
        node = graph.create_node(op, target, _with_nodes(args, env), _with_nodes(kwargs, env), name=name)
        env[name] = node
    return torch.fx.GraphModule(pickle.loads(attrs), graph)


def _canonical(obj) -> str:
    """A text of stored guards that two processes making the same entry agree on (pickles differ:
    a frozenset's order follows the hash seed)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return f"{type(obj).__name__}({', '.join(_canonical(getattr(obj, f.name)) for f in dataclasses.fields(obj))})"
    if type(obj) in (tuple, list):
        return f"{type(obj).__name__}[{', '.join(_canonical(v) for v in obj)}]"
    if type(obj) in (set, frozenset):
        return f"{type(obj).__name__}{{{', '.join(sorted(_canonical(v) for v in obj))}}}"
    if type(obj) is dict:
        return f"dict{{{', '.join(sorted(f'{_canonical(k)}: {_canonical(v)}' for k, v in obj.items()))}}}"
    if isinstance(obj, (type, types.FunctionType, types.ModuleType) + _NAMED_TYPES):
        return f"<{static.module_name(obj)}.{static.qualname(obj)}>"
    return f"{type(obj).__name__}:{obj!r}"


_KEEP_FILES = 64  # entries kept per frame (the oldest beyond are removed when one is stored)


def _write(folder: str, header: bytes, body: bytes, identity: str) -> None:
    """Write atomically; the name is a hash of the key and the guards, so two processes making
    the same entry write (rename onto) the same file."""
    payload = len(header).to_bytes(8, "little") + header + body
    digest = hashlib.sha256(payload).digest()
    os.makedirs(folder, exist_ok=True)
    name = hashlib.sha256(header + identity.encode()).hexdigest()[:24] + ".dle"
    with _replacing(os.path.join(folder, name)) as f:
        f.write(_MAGIC + digest + payload)
    with contextlib.suppress(OSError):
        names = [n for n in os.listdir(folder) if n.endswith(".dle") and not n.startswith(".")]
        if len(names) > _KEEP_FILES:
            for old in sorted(names, key=lambda n: _mtime(os.path.join(folder, n)))[:len(names) - _KEEP_FILES]:
                for gone in (old, old[:-len(".dle")] + ".aot"):
                    with contextlib.suppress(OSError):
                        os.unlink(os.path.join(folder, gone))
    return os.path.join(folder, name)


# entries written by this process: a later process reads them, this one traces again (after
# reset(), as before the first capture; the reports of a test suite do not depend on its order)
_WRITTEN: set = set()
# converter -> {(frame, entry file name): its path (None: from a package)}: the entries it stored
# or loaded in this process (save())
_ENTRIES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_TRIM_EVERY = 256  # stores between two looks at the cache's size
_STORES_SINCE_TRIM = [0]


def trim(limit_mb: Optional[float] = None) -> int:
    """Remove the least recently used entries (by file time: written or last loaded) until the
    cache is at most 3/4 of ``config.cache_max_mb``, when it is over; the number removed."""
    _STORES_SINCE_TRIM[0] = 1
    limit = int((config.cache_max_mb if limit_mb is None else limit_mb) * 1024 * 1024)
    root = os.path.join(cache_dir(), FORMAT)
    files = []
    try:
        for frame in os.scandir(root):
            if not frame.is_dir(follow_symlinks=False):
                continue
            with contextlib.suppress(OSError):
                for entry in os.scandir(frame.path):
                    if entry.name.endswith((".dle", ".aot")) and not entry.name.startswith("."):
                        st = entry.stat(follow_symlinks=False)
                        files.append((st.st_mtime, st.st_size, entry.path))
    except OSError:
        return 0
    total = sum(f[1] for f in files)
    if total <= limit:
        return 0
    removed = 0
    for _, size, path in sorted(files):
        if total <= limit * 3 // 4:
            break
        with contextlib.suppress(OSError):
            os.unlink(path)
            total -= size
            removed += 1
    log.info("persistent cache over %.1f MB: %d least recently used entries removed", limit / 1024 / 1024, removed)
    return removed


_AOT_MAGIC = b"DYNAMO_LITE_AOT\n"


_AOT_NONE = b"DYNAMO_LITE_NO_AOT\n"  # an entry's graph that has no library: not asked for again


def _store_aot_library(path: str) -> None:
    """``<entry>.aot`` beside the entry: its graph's AOTInductor library, or a mark that it has
    none (config.aot_libraries)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return  # (trimmed, or replaced, meanwhile)
    library = _aot_library(os.path.basename(path), data)
    with _replacing(path[:-len(".dle")] + ".aot") as f:
        f.write(_AOT_NONE if library is None else _AOT_MAGIC + hashlib.sha256(library).digest() + library)


def _read_aot_library(path: str) -> Optional[bytes]:
    """The library beside entry ``path``, or None (none, or damaged)."""
    try:
        with open(path[:-len(".dle")] + ".aot", "rb") as f:
            data = f.read()
    except OSError:
        return None
    digest, library = data[len(_AOT_MAGIC):len(_AOT_MAGIC) + 32], data[len(_AOT_MAGIC) + 32:]
    if not data.startswith(_AOT_MAGIC) or hashlib.sha256(library).digest() != digest:
        return None
    return library


# ---- AOTInductor libraries built in the background (config.aot_libraries == "background") ---
# A capturing process writes a request (a file naming the entry) under <cache>/v1/aot-queue and
# starts `python dynamo_lite/aot_builder.py <cache>/v1` unless a builder holds the lock file
# there; the builder (one per cache directory, at the lowest CPU priority, in a session of its
# own so it outlives the process) builds the libraries asked for until the queue is empty.
_AOT_QUEUE, _AOT_LOCK = "aot-queue", "aot-builder.lock"
_BUILDER_STARTED = [0.0]  # (time.monotonic() when this process last started a builder)


def _aot_unsuitable(body: dict) -> Optional[str]:
    """Why an entry's graph gets no AOTInductor library, read off its input specs alone, or None."""
    specs = body.get("inputs")
    if body.get("graph") is None or not specs:
        return "no graph, or a graph without tensor inputs"
    if any(s[0] != "tensor" or s[5] != "cpu" for s in specs):
        return "inputs other than CPU tensors"
    if body.get("grad", True) and any(s[6] for s in specs):
        return "an input requires grad (the graph is compiled for autograd)"
    return None


def _queue_aot_library(path: str, body: dict) -> None:
    """Ask the background builder for the library of entry ``path`` (when its graph may have one);
    a failure to ask is logged, never raised (the entry stands; a later load asks again)."""
    try:
        _ask_builder(path, body)
    except Exception as e:  # noqa: BLE001 - (the disk, no /bin/sh, ...)
        log.warning("dynamo_lite: could not ask for the AOTInductor library of %s (%s: %s)", path,
                    type(e).__name__, e)


def _ask_builder(path: str, body: dict) -> None:
    if _aot_unsuitable(body) is not None or os.path.exists(path[:-len(".dle")] + ".aot"):
        return
    try:
        import fcntl  # noqa: F401 - (the builder's lock; not on Windows: no background builds there)
    except ImportError:
        return
    root = os.path.join(cache_dir(), FORMAT)
    queue = os.path.join(root, _AOT_QUEUE)
    os.makedirs(queue, exist_ok=True)
    request = os.path.join(queue, f"{os.path.basename(os.path.dirname(path))}-{os.path.basename(path)}")
    with _replacing(request) as f:
        f.write(os.path.abspath(path).encode())
    if _builder_running(root):  # (after the request is written: that builder looks again before it ends)
        return
    import subprocess

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p),
               TORCHINDUCTOR_COMPILE_THREADS="1")
    log_path = os.path.join(root, "aot-builder.log")
    with open(log_path, "ab" if _mtime(log_path) and os.path.getsize(log_path) < 1 << 20 else "wb") as out:
        # started by a shell that leaves it in the background and ends: the builder is no child
        # of this process (nothing to reap, no "still running" warning when this one ends)
        starter = subprocess.Popen(["/bin/sh", "-c", '"$@" &', "sh", sys.executable,
                                    os.path.join(os.path.dirname(__file__), "aot_builder.py"), root], env=env,
                                   stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                   start_new_session=True, close_fds=True)
    starter.wait()
    _BUILDER_STARTED[0] = time.monotonic()
    log.debug("AOTInductor library of %s asked of a background builder", path)


def _builder_running(root: str) -> bool:
    """Whether a builder holds the lock of cache folder ``root``."""
    try:
        import fcntl
    except ImportError:
        return False  # (no background builds without it)
    fd = os.open(os.path.join(root, _AOT_LOCK), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # (closing releases a lock taken here)
    return False


def build_queued_aot_libraries(root: str) -> int:
    """Build the libraries asked for under cache folder ``root`` until none is left (the
    builder's work; the caller holds the lock); how many requests it took."""
    queue = os.path.join(root, _AOT_QUEUE)
    done = 0
    while True:
        try:
            requests = sorted(n for n in os.listdir(queue) if not n.startswith("."))
        except OSError:
            return done
        if not requests:
            return done
        for name in requests:
            request = os.path.join(queue, name)
            try:
                with open(request, "rb") as f:
                    path = f.read().decode()
                if path.endswith(".dle") and os.path.exists(path) and not os.path.exists(path[:-len(".dle")] + ".aot"):
                    _store_aot_library(path)
                    log.info("AOTInductor library of %s built", path)
            except Exception as e:  # noqa: BLE001 - that request is dropped; a later load asks again
                log.warning("AOTInductor library of request %s not built: %s: %s", name, type(e).__name__, e)
            finally:
                with contextlib.suppress(OSError):
                    os.unlink(request)
                done += 1


def wait_for_aot_libraries(timeout: Optional[float] = None) -> bool:
    """Wait until no AOTInductor library is being built for the cache directory or asked for
    (config.aot_libraries == "background"); False when ``timeout`` seconds passed first."""
    root = os.path.join(cache_dir(), FORMAT)
    queue = os.path.join(root, _AOT_QUEUE)
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        try:
            pending = any(not n.startswith(".") for n in os.listdir(queue))
        except OSError:
            pending = False
        running = os.path.isdir(root) and _builder_running(root)
        if not pending and not running:
            return True
        if not running and time.monotonic() - _BUILDER_STARTED[0] > 10:  # (not one still starting)
            return False  # (requests no builder of this process will take: one ended on them)
        if deadline is not None and time.monotonic() >= deadline:
            return False
        time.sleep(0.1)


@contextlib.contextmanager
def _replacing(path: str):
    """A file open for writing that becomes ``path`` whole when the block ends (a temporary file
    in the same folder, renamed: readers see all of it or nothing), or is removed on an error."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _read(path: str):
    """(key parts, body) of a file, or None when it is damaged or not an entry."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    return _parse(data)


def _parse(data: bytes):
    if not data.startswith(_MAGIC) or len(data) < len(_MAGIC) + 40:
        return None
    digest, payload = data[len(_MAGIC):len(_MAGIC) + 32], data[len(_MAGIC) + 32:]
    if hashlib.sha256(payload).digest() != digest:
        return None
    n = int.from_bytes(payload[:8], "little")
    try:
        parts = pickle.loads(payload[8:8 + n])
        body = pickle.loads(payload[8 + n:])
    except Exception:  # noqa: BLE001 - a damaged file
        return None
    if not isinstance(parts, dict) or not isinstance(body, dict):
        return None
    return parts, body


# ---- load -------------------------------------------------------------------------------
# code -> {file name: (mtime, parts, body) or None (damaged)}: files read once per process
_FILES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
# code -> file names of the entries installed from disk in this process
_INSTALLED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def load(converter, code: types.CodeType, f_locals: dict, func, compile_id: str):
    """A ``_C.CacheEntry`` rebuilt from a stored entry that serves this call, or None (a miss:
    the reason is counted and logged)."""
    try:
        parts = key_parts(converter, code)
    except Unpersistable:
        return None
    folder = _frame_dir(code)
    bundled = _BUNDLED.get(os.path.basename(folder), {})
    names = []
    if enabled():
        try:
            names = sorted((n for n in os.listdir(folder) if n.endswith(".dle") and not n.startswith(".")
                            and os.path.join(folder, n) not in _WRITTEN and n not in bundled),
                           key=lambda n: -_mtime(os.path.join(folder, n)))[:_MAX_FILES]
        except OSError:
            pass
    names = list(bundled) + names
    seen = _FILES.setdefault(code, {})
    installed = _INSTALLED.setdefault(code, set())
    reasons = []
    args = tuple(f_locals[n] for n in bytecode_compat.arg_names(code) if n in f_locals)
    for name in names:
        if name in installed:
            continue
        if name not in seen:
            seen[name] = _parse(bundled[name]) if name in bundled else _read(os.path.join(folder, name))
        read = seen[name]
        if read is None:
            reasons.append((len(parts) + 1, "a damaged entry file was ignored"))
            continue
        stored_parts, body = read
        now = dict(parts, hash_seed=_hash_probe()) if "hash_seed" in stored_parts else parts
        changed = [p for p in now if stored_parts.get(p) != now[p]]
        if changed:
            reasons.append((len(changed), _PART_WORDS.get(changed[0], f"{changed[0]} differs")))
            continue
        try:
            aot = _AOT_LIBRARIES.get((os.path.basename(folder), name)) if name in bundled else \
                _read_aot_library(os.path.join(folder, name)) if body.get("graph") is not None else None
            if aot is None and name not in bundled and config.aot_libraries == "background" and \
                    registered_backend_name(converter.base_backend) == "inductor":
                _queue_aot_library(os.path.join(folder, name), body)  # (its builder never got to it)
            entry, guard_set, backend_seconds = _install(converter, code, body, args, func, compile_id, aot,
                                                         f"{os.path.basename(folder)}-{name}")
        except Miss as e:
            reasons.append((0, str(e)))
            continue
        except Exception as e:  # noqa: BLE001 - a dynamo_lite bug: the frame is traced instead
            if config.raise_internal_errors:
                raise
            log.warning("dynamo_lite: loading %s from the persistent cache failed (%s: %s); tracing it",
                        cache.display_name(code), type(e).__name__, e)
            reasons.append((0, f"the entry did not load ({type(e).__name__}: {e})"))
            continue
        installed.add(name)
        _STATS["hits"] += 1
        path = os.path.join(folder, name)
        _ENTRIES.setdefault(converter, {})[(os.path.basename(folder), name)] = None if name in bundled else path
        if name in bundled:
            path = f"{_BUNDLE_SOURCES.get((os.path.basename(folder), name), 'a loaded bundle')}: {name}"
        else:
            for used in (path, path[:-len(".dle")] + ".aot"):
                with contextlib.suppress(OSError):
                    os.utime(used)  # (recently used: trim() keeps it)
        if events.listening():
            events.emit(events.PersistentCacheEvent(cache.display_name(code), code.co_filename, code.co_firstlineno,
                                                    compile_id, True, "", path))
            _report_loaded(converter, code, body, entry, guard_set, backend_seconds, compile_id)
        log.info("[%s] %s: loaded from the persistent cache (%s), no trace", compile_id, cache.display_name(code),
                 path)
        return entry
    _STATS["misses"] += 1
    # the reason of the entry that came closest (a failed guard, then the fewest key parts changed)
    reason = min(reasons, key=lambda r: r[0])[1] if reasons else "no stored entry"
    _MISSES[reason] += 1
    if reasons and events.listening():  # (a frame with no stored entry at all: counted, not an event)
        events.emit(events.PersistentCacheEvent(cache.display_name(code), code.co_filename, code.co_firstlineno,
                                                compile_id, False, reason))
    log.debug("[%s] %s: persistent cache miss: %s", compile_id, cache.display_name(code), reason)
    return None


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0


def _report_loaded(converter, code, body: dict, entry, guard_set, backend_seconds: float, compile_id: str) -> None:
    """The events the trace of a loaded entry emitted, again (its break, its graph)."""
    callers = events.caller_frames(code, cache.is_generated)
    report = body.get("report") or {}
    if body.get("break") is not None:
        break_id, reason, instruction, stack = body["break"]
        events.emit(events.GraphBreakEvent(break_id, reason, [UserFrame(*f) for f in stack], cache.display_name(code),
                                           compile_id, instruction, caller_stack=callers))
    if entry.graph_module is not None:
        events.emit(events.GraphEvent(compile_id, cache.display_name(code), code.co_filename, code.co_firstlineno,
                                      entry.graph_module, report.get("ops", 0), guard_set.render(),
                                      backend_seconds, 0.0, converter.backend_name,
                                      compiling_queries=list(report.get("queries", ())), loaded=True))


def _install(converter, code, body: dict, args: tuple, func, compile_id: str, aot: Optional[bytes] = None,
             aot_name: str = ""):
    _LOAD.f_globals = func.__globals__
    backend_seconds = 0.0
    try:
        stored = _loads(body["guards"])
        arg_names = body["arg_names"]
        scope = source_scope(arg_names, args, func.__globals__, func)
        guard_set = _bind_all(stored, scope)
        guard = guard_set.compile(arg_names)
        if not _passes(guard, args, func):
            raise Miss(guard.explain_failure(args, func.__globals__, func) or "a guard failed")
        gm = None
        _LOAD.graph = None
        if body["graph"] is not None:
            gm = _graph_module(body["graph"])
            start = time.perf_counter()
            _LOAD.graph = None
            if aot is not None and registered_backend_name(converter.base_backend) == "inductor":
                try:
                    _LOAD.graph = _aot_runner(*aot_name.split("-", 1), aot)
                except Exception as e:  # noqa: BLE001 - loaded through inductor instead
                    log.warning("dynamo_lite: the AOTInductor library of %s did not load (%s: %s); compiling its "
                                "graph with inductor", cache.display_name(code), type(e).__name__, e)
            if _LOAD.graph is None:
                _LOAD.graph = _compile_graph(converter, gm, body["inputs"], compile_id)
            backend_seconds = time.perf_counter() - start
        new_code = _loads(body["code"]) if body["code"] is not None else None
    finally:
        _LOAD.f_globals = None
        _LOAD.graph = None
    if new_code is not None:
        cache.add_generated(new_code)
    return (_C.CacheEntry(guard.fn, new_code, converter, compile_id=compile_id, guard=guard, graph_module=gm),
            guard_set, backend_seconds)


def _passes(guard, args: tuple, func) -> bool:
    try:
        return bool(guard.fn(*args, func.__globals__, func))
    except Exception:  # noqa: BLE001 - a guard that raises has failed
        return False


def _compile_graph(converter, gm, specs, compile_id: str):
    if _PENDING_INDUCTOR:
        _install_pending_inductor()
    gm.meta["dynamo_lite_compile_id"] = compile_id
    if specs is None or registered_backend_name(converter.base_backend) == "eager":
        return converter.backend(gm, [])  # (it needs no inputs; a graph with symbolic ones is stored only for it)
    mode, fakes = _fake_inputs(specs)
    gm.meta[TRACE_FAKES] = (mode, fakes)
    try:
        _example_values(gm, mode, fakes)
        compiled = converter.backend(gm, list(fakes))
    except Exception as e:  # noqa: BLE001 - the frame is traced instead
        raise Miss(f"the backend failed on the stored graph ({type(e).__name__}: {e})") from None
    finally:
        gm.meta.pop(TRACE_FAKES, None)
    return compiled


def _example_values(gm, mode, fakes) -> None:
    """Each node's value on the fake inputs, as a trace leaves it (``meta["example_value"]``):
    AOTAutograd's cache takes a graph without them for one it cannot check (it then traces the
    graph again: most of a warm start through inductor's caches)."""
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp

    FakeTensorProp(gm, mode).propagate_dont_convert_inputs(*fakes)
    for node in gm.graph.nodes:
        if "val" in node.meta:
            node.meta.setdefault("example_value", node.meta["val"])


def clear() -> None:
    """Forget what this process read (the files stay)."""
    _FILES.clear()
    _INSTALLED.clear()


# ---- packages: save() and load_package() ----------------------------------------------------
# frame -> {entry file name: the file's bytes}: entries of the packages loaded in this process,
# tried before the cache directory's (and also with the cache off)
_BUNDLED: dict = {}
_BUNDLE_SOURCES: dict = {}  # (frame, entry file name) -> the package's path
_AOT_LIBRARIES: dict = {}  # (frame, entry file name) -> an AOTInductor library of its graph
_PACKAGE_MANIFEST = "dynamo_lite-package.json"
_PACKAGE_KIND = "dynamo_lite compiled package"


def save_package(converter, path: str) -> dict:
    """Write the entries ``converter`` stored or loaded in this process to the zip file ``path``,
    with inductor's cache artifacts of this process when the backend is inductor; a summary."""
    import json
    import zipfile

    entries = dict(_ENTRIES.get(converter, {}))
    files = {}
    for (frame, name), where in entries.items():
        data = _BUNDLED.get(frame, {}).get(name)
        if data is None and where is not None:
            with contextlib.suppress(OSError), open(where, "rb") as f:
                data = f.read()
        if data is not None and _parse(data) is not None:
            files[f"{frame}/{name}"] = data
    if not files:
        reasons = ", ".join(f"{r} ({n}x)" for r, n in _NOT_STORED.most_common(3))
        raise ValueError("dynamo_lite.save: nothing to save: no frame compiled by this object was stored in this "
                         "process" + (f" (entries not stored: {reasons})" if reasons else
                                      "" if enabled() else " (config.persistent_cache is off)")
                         + "; call it on inputs first")
    inductor = b""
    kernels: dict = {}
    aot: dict = {}
    if registered_backend_name(converter.base_backend) == "inductor":
        from torch.compiler._cache import CacheArtifactManager
        serialized = CacheArtifactManager.serialize()
        inductor = serialized[0] if serialized else b""
        kernels = _inductor_kernel_files()
        for arc, data in files.items():
            library = _aot_library(arc, data)
            if library is not None:
                aot[arc] = library
    manifest = {"kind": _PACKAGE_KIND, "format": FORMAT, "python": sys.version.split()[0],
                "torch": torch.__version__, "dynamo_lite": _package_fingerprint(), "backend": converter.backend_name,
                "entries": sorted(files), "inductor_artifacts": bool(inductor), "inductor_kernels": sorted(kernels), "aot": sorted(aot)}
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    with _replacing(path) as f, zipfile.ZipFile(f, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(_PACKAGE_MANIFEST, json.dumps(manifest, indent=1))
        for arc, data in sorted(files.items()):
            z.writestr(f"entries/{arc}", data)
        if inductor:
            z.writestr("inductor_artifacts.bin", inductor)
        for rel, data in sorted(kernels.items()):
            z.writestr(f"inductor_kernels/{rel}", data)
        for arc, data in sorted(aot.items()):
            z.writestr(f"aot/{arc}", data)
    return {"entries": len(files), "inductor_artifacts": bool(inductor), "inductor_kernels": len(kernels),
            "aot_libraries": len(aot), "path": os.path.abspath(path)}


def _aot_library(arc: str, data: bytes) -> Optional[bytes]:
    """An AOTInductor library of an entry's graph (run by torch's C++ runner on load: no inductor
    import, no compile), or None when the graph is not one it runs as eager would: only CPU
    tensors in, no gradient needed (grad off at capture, or no input requiring it), no grad-mode
    change inside, tensors out that alias no input and no other output."""
    parsed = _parse(data)
    if parsed is None:
        return None
    body = parsed[1]
    specs = body.get("inputs")
    if body.get("graph") is None or not specs:
        return None
    why = _aot_unsuitable(body)
    gm = _graph_module(body["graph"])
    if why is None and any(n.op == "call_function" and "grad" in str(getattr(n.target, "__name__", n.target))
                           for n in gm.graph.nodes):
        why = "the graph changes grad mode"
    if why is None:
        from torch.multiprocessing.reductions import StorageWeakRef

        mode, fakes = _fake_inputs(specs)
        with mode:
            outs = gm(*fakes)
        outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
        if not all(isinstance(o, torch.Tensor) for o in outs):
            why = "an output is not a tensor"
        else:
            seen = {StorageWeakRef(f.untyped_storage()) for f in fakes}
            for o in outs:
                ref = StorageWeakRef(o.untyped_storage())
                if ref in seen:
                    why = "an output aliases an input or another output"
                    break
                seen.add(ref)
    if why is not None:
        log.info("dynamo_lite.save: %s: no AOTInductor library (%s): it loads through inductor", arc, why)
        return None
    inductor = importlib.import_module("torch._inductor")
    real = []
    for _, shape, stride, offset, dtype, *_ in specs:  # (zeros laid out as the inputs were)
        extent = offset + (sum((d - 1) * st for d, st in zip(shape, stride)) + 1 if all(shape) else 0)
        real.append(torch.zeros(max(extent, 1), dtype=dtype).as_strided(shape, stride, offset))
    try:
        with torch.no_grad():
            library = inductor.aot_compile(gm, tuple(real))
        with open(library, "rb") as f:
            return f.read()
    except Exception as e:  # noqa: BLE001 - the entry still loads through inductor
        log.warning("dynamo_lite.save: %s: AOTInductor failed (%s: %s); the entry loads through inductor", arc,
                    type(e).__name__, e)
        return None


class _AotGraph:
    """A graph run by an AOTInductor library (torch's C++ runner)."""

    def __init__(self, runner):
        self.runner = runner

    def __call__(self, *args):
        return tuple(self.runner.run(list(args)))


_AOT_DIR: list = []


def _aot_runner(frame: str, name: str, library: bytes):
    if not _AOT_DIR:
        _AOT_DIR.append(tempfile.mkdtemp(prefix="dynamo-lite-aot-"))
        import atexit
        import shutil
        atexit.register(shutil.rmtree, _AOT_DIR[0], ignore_errors=True)
    path = os.path.join(_AOT_DIR[0], f"{frame}-{name}.so")
    if not os.path.exists(path):
        with open(path, "wb") as f:
            f.write(library)
    return _AotGraph(torch._C._aoti.AOTIModelContainerRunnerCpu(path, 1))


_PROCESS_START = time.time()  # (about: when dynamo_lite was imported)
_KERNEL_NAME = re.compile(r"^[0-9a-z]{2}/[0-9A-Za-z_][0-9A-Za-z_.\-]*$")


def _inductor_kernel_files() -> dict:
    """The compiled kernels (and their sources) in inductor's cache directory that this process
    built or loaded: a package carries them, so the target machine compiles no C++ again."""
    from torch._inductor.runtime.cache_dir_utils import cache_dir as inductor_cache_dir

    root = os.path.realpath(inductor_cache_dir())
    loaded = set()
    for module in list(sys.modules.values()):
        where = getattr(module, "__file__", None)
        if isinstance(where, str) and os.path.realpath(where).startswith(root + os.sep):
            real = os.path.realpath(where)
            loaded.add((os.path.dirname(real), os.path.basename(real).split(".")[0]))
    files = {}
    try:
        subdirs = [d for d in os.scandir(root) if d.is_dir(follow_symlinks=False) and len(d.name) == 2]
    except OSError:
        return files
    for sub in subdirs:
        with contextlib.suppress(OSError):
            for f in os.scandir(sub.path):
                if not f.is_file(follow_symlinks=False) or f.name.startswith(".") or f.name.endswith(".lock"):
                    continue
                rel = f"{sub.name}/{f.name}"
                mine = f.stat().st_mtime >= _PROCESS_START or (os.path.realpath(sub.path), f.name.split(".")[0]) in loaded
                if mine and _KERNEL_NAME.match(rel):
                    with open(f.path, "rb") as fh:
                        files[rel] = fh.read()
    return files


def _install_kernel_files(files: dict) -> int:
    """Write a package's kernels into inductor's cache directory (those not there yet)."""
    from torch._inductor.runtime.cache_dir_utils import cache_dir as inductor_cache_dir

    root = inductor_cache_dir()
    written = 0
    for rel, data in files.items():
        if not _KERNEL_NAME.match(rel):
            continue  # (never a path outside the cache directory)
        dest = os.path.join(root, rel)
        if os.path.exists(dest):
            continue
        try:
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with _replacing(dest) as f:
                f.write(data)
            written += 1
        except OSError:
            pass  # (inductor compiles that kernel itself)
    return written


def load_package(path: str) -> dict:
    """Make the entries of a package written by ``save_package`` available to this process (the
    frames they were made for run from them on their first call, when key and guards match);
    install its inductor cache artifacts.  A summary; ValueError for a file that is not a
    package, or one made by other versions (what differs is named)."""
    import json
    import zipfile

    try:
        with zipfile.ZipFile(path) as z:
            manifest = json.loads(z.read(_PACKAGE_MANIFEST))
            if not isinstance(manifest, dict) or manifest.get("kind") != _PACKAGE_KIND:
                raise ValueError("no package manifest")
            files = {arc: z.read(f"entries/{arc}") for arc in manifest.get("entries", [])}
            inductor = z.read("inductor_artifacts.bin") if manifest.get("inductor_artifacts") else b""
            kernels = {rel: z.read(f"inductor_kernels/{rel}") for rel in manifest.get("inductor_kernels", [])}
            aot = {arc: z.read(f"aot/{arc}") for arc in manifest.get("aot", [])}
    except (OSError, KeyError, ValueError, zipfile.BadZipFile) as e:
        raise ValueError(f"dynamo_lite.load: {path} is not a package written by dynamo_lite.save ({e})") from None
    mine = {"format": FORMAT, "python": sys.version.split()[0], "torch": torch.__version__,
            "dynamo_lite": _package_fingerprint()}
    differs = [f"{k} {manifest.get(k)!r} (here: {v!r})" for k, v in mine.items() if manifest.get(k) != v]
    if differs:
        raise ValueError(f"dynamo_lite.load: {path} was written by other versions: {', '.join(differs)}; its "
                         f"entries cannot serve this process (save it again with these versions)")
    loaded = 0
    for arc, data in files.items():
        frame, _, name = arc.partition("/")
        if _parse(data) is None:
            log.warning("dynamo_lite.load: %s: entry %s is damaged; ignored", path, arc)
            continue
        _BUNDLED.setdefault(frame, {})[name] = data
        _BUNDLE_SOURCES[(frame, name)] = os.path.abspath(path)
        if arc in aot:
            _AOT_LIBRARIES[(frame, name)] = aot[arc]
        loaded += 1
    _FILES.clear()  # (frames already looked up look again)
    artifacts = bool(inductor)
    if kernels or inductor:
        # (with an AOTInductor library for every entry, inductor is needed only when one fails
        # to load: its caches are filled then, and importing it is not paid before)
        _PENDING_INDUCTOR.append((kernels, inductor))
        if set(aot) != set(files):
            _install_pending_inductor()
    log.info("dynamo_lite.load: %d entries from %s%s", loaded, path, " and inductor's cache artifacts" if artifacts else "")
    return {"entries": loaded, "inductor_artifacts": artifacts, "aot_libraries": len(aot),
            "backend": manifest.get("backend")}


_PENDING_INDUCTOR: list = []  # (kernel files, cache artifacts) of loaded packages, not installed yet


def _install_pending_inductor() -> None:
    while _PENDING_INDUCTOR:
        kernels, artifacts = _PENDING_INDUCTOR.pop()
        if kernels:
            _install_kernel_files(kernels)
        if artifacts:
            from torch.compiler._cache import CacheArtifactManager
            result = CacheArtifactManager.deserialize(artifacts)
            if result is not None:
                CacheArtifactManager.populate_caches(result)


def has_packages() -> bool:
    return bool(_BUNDLED)


def unload_packages() -> None:
    """Forget the packages loaded in this process."""
    _BUNDLED.clear()
    _BUNDLE_SOURCES.clear()
    _AOT_LIBRARIES.clear()
    _FILES.clear()
