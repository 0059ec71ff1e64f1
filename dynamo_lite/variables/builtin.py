"""Builtin functions and types (len, isinstance, range, zip, int, list, ...),
plus pure C functions of ``math``, ``operator``, ``itertools`` and ``functools``.

Each supported builtin has one handler in ``_HANDLERS``; pure functions fold
when every argument is a constant; anything else breaks the graph so Python
calls it for real.  ``print`` and ``warnings.warn`` are replayed after the graph
when that is exact, else they break (replayed.py).  Handlers registered in functions.PYTHON_FUNCTION_HANDLERS
answer a few pure-Python functions (dataclasses.fields/replace/is_dataclass, typing.cast,
nn.Module.__getattr__/__setattr__) that are never inlined.  ``operator.itemgetter``/``attrgetter``/
``methodcaller`` with constant arguments become ``OperatorGetterVariable``.  Also answered:
``id()`` (a guarded constant for inputs, an IdVariable compared by identity otherwise),
``hash()`` (a Python ``__hash__`` inlined), ``repr``/``str``/``ascii`` of containers of
constants, ``str``/``repr``/``format`` of a user object with a Python ``__str__``/``__repr__``/
``__format__`` (inlined, the result must be a str; ``user_object_text``, also used by f-strings), ``vars``/``delattr``, ``copy.copy``/``deepcopy`` (stdlib.copy_value),
``dataclasses.asdict``/``astuple``, ``functools.wraps``/``update_wrapper``, ``re`` functions,
``textwrap.dedent``/``indent``/``shorten``/``wrap``/``fill`` and ``string.capwords`` with constant arguments
(an exception they or another fold on constants raise, e.g. ``int("z")``, is raised in the trace when it is a
builtin made from its args: folding.raise_folded), ``object()`` (a new sentinel), ``inspect.isfunction``/``ismethod``/``isclass``, ``types.MappingProxyType``.
Keywords are checked against the real builtin's signature; ``_HANDLERS`` is only
looked up for values of its key types (``has_handler``: a user ``__hash__`` never runs).
Tested by tests/semantics/test_builtins.py (and tests/semantics/test_containers.py, tests/semantics/test_user_classes.py,
tests/semantics/test_builtin_errors.py, tests/semantics/test_builtins_breadth.py,
tests/semantics/test_functools_copy_identity.py, tests/semantics/test_stdlib_modules.py).
"""
from __future__ import annotations

import builtins
import collections
import copy
import dataclasses
import functools
import itertools
import inspect
import math
import operator
import re
import string
import textwrap
import types
import typing
import warnings
from typing import Any, Callable, Optional

import torch

from .. import graph_breaks as gb
from .. import config, guards, runtime
from ..exc import GraphBreak
from .base import KnownValueVariable, VariableTracker, type_or_none
from .constant import ConstantVariable, InputConstantVariable, is_constant_value, NONE, FALSE, TRUE, ObservedConstant
from ..source import AttrSource, ItemSource
from .arith import apply_operator, binary_op
from .mappings import (
    CounterVariable, DefaultDictVariable, dict_from_args, DictIteratorVariable, DictVariable, DictViewVariable,
    MappingProxyVariable,
)
from .sequences import CmpToKeyVariable, LIST_TRACKERS, ListIteratorVariable, ListVariable, sort_items, TupleVariable
from .sets import SetVariable
from .folding import raise_folded, wrap_constant_result
from .functions import (
    BaseUserFunctionVariable, NestedUserFunctionVariable, PartialVariable, PYTHON_FUNCTION_HANDLERS,
    UserFunctionVariable, UserMethodVariable,
)
from .methods import BoundMethodOfVariable
from .iterators import (
    AccumulateIteratorVariable, EnumerateIteratorVariable, FilterIteratorVariable, iterate_lazily,
    ITERTOOLS_HANDLERS, ITERTOOLS_KEYWORDS, ListReverseIteratorVariable, MapIteratorVariable, next_of,
    UserIteratorVariable, ZipIteratorVariable,
)
from .exceptions import ExceptionVariable, PLAIN_INIT_EXCEPTIONS
from .replayed import replay_print, replay_warn
from .stdlib import build_class, copy_value
from .objects import IdVariable
from .nn_module import MODULE_FUNCTION_HANDLERS, NNModuleVariable
from .python_modules import PythonModuleVariable
from .tensor import make_range, record_op, SymNodeVariable, TensorVariable
from .formatted_text import FormattedTextVariable
from .torch_vars import TorchVariable
from .user_objects import (
    _DICT_METHODS, mro_lookup, ObjectLike, class_of, guard_class_attr, DataclassFieldVariable, DictStorageMixin,
    NewObjectVariable, SuperVariable,
    UserDefinedClassVariable, UserDefinedObjectVariable, _is_plain_meta,
)

_HANDLERS: dict[Any, Callable] = {}
_PURE_MODULES = ("math", "operator", "cmath", "_operator")


def _handler(*fns):
    def deco(impl):
        for fn in fns:
            _HANDLERS[fn] = impl
        return impl
    return deco


def has_handler(value) -> bool:
    """``value`` is a key of ``_HANDLERS``, found without hashing arbitrary objects: only
    values of the key types (builtin functions, descriptors, plain classes) are looked up,
    so a user ``__hash__`` never runs (it may print, raise, or see a half-built object)."""
    return type(value) in _HANDLER_KEY_TYPES and value in _HANDLERS


def is_builtin_callable(value) -> bool:
    if has_handler(value):
        return True
    if isinstance(value, type) and value.__module__ == "builtins":
        return True
    if isinstance(value, (types.BuiltinFunctionType,)) and getattr(value, "__module__", None) in (
            "builtins", "math", "cmath", "_operator", "operator", "itertools", "functools", "_functools"):
        return True
    return False


class BuiltinVariable(KnownValueVariable):
    """A builtin function or type."""

    def __init__(self, value, source=None):
        super().__init__(source)
        self.value = value

    def _repr_body(self):
        return getattr(self.value, "__name__", repr(self.value))

    def describe(self):
        return f"builtin {getattr(self.value, '__name__', self.value)}"

    def call_function(self, tx, args, kwargs):
        fn = self.value
        handler = _HANDLERS.get(fn) if has_handler(fn) else None
        if handler is not None:
            result = call_handler(handler, fn, tx, args, kwargs)
            if result is not None:
                return result
        if fn is object and not args and not kwargs:  # a sentinel: a new object, compared by identity
            obj = NewObjectVariable(object)
            tx.output.side_effects.track_new_object(obj)
            return obj
        if fn in _ARITH_FNS:
            return _arith_call(tx, fn, args, kwargs)
        if args and isinstance(args[0], DictStorageMixin) and getattr(fn, "__objclass__", None) in (
                dict, collections.OrderedDict) and getattr(fn, "__name__", None) in (*_DICT_METHODS, "__init__") and \
                isinstance(fn, (types.MethodDescriptorType, types.WrapperDescriptorType)):
            # dict.__setitem__(self, k, v) / OrderedDict.__setitem__(self, ...) / super().get(k) on a
            # dict subclass instance: the base's own method, on its contents
            return args[0].call_base_method(tx, fn.__name__, list(args[1:]), kwargs)
        if isinstance(fn, (types.MethodDescriptorType, types.WrapperDescriptorType)) and args and \
                getattr(fn, "__objclass__", None) in _UNBOUND_METHOD_TYPES:
            # str.upper(s), dict.get(d, k), list.append(lst, v): the method of the first argument
            try:
                self_type = args[0].python_type()
            except GraphBreak:
                self_type = None
            # only when the argument's class does not override it: dict.__init__(self, ...) in a
            # dict subclass with its own __init__ must run dict's, not the subclass's
            if isinstance(self_type, type) and issubclass(self_type, fn.__objclass__) and \
                    mro_lookup(self_type, fn.__name__)[0] is fn:
                return args[0].call_method(tx, fn.__name__, list(args[1:]), kwargs)
        if fn in _GETTER_TYPES and all(a.is_python_constant() for a in args) and \
                all(v.is_python_constant() for v in kwargs.values()):
            try:
                getter = fn(*[a.as_python_constant() for a in args],
                            **{k: v.as_python_constant() for k, v in kwargs.items()})
            except Exception as e:  # noqa: BLE001 - raise it for real
                raise GraphBreak(gb.OPERATION_RAISES, f"{_name(fn)}() raised {type(e).__name__}") from e
            return OperatorGetterVariable(getter)
        if fn in _FOLD_ON_COPIES and not kwargs:
            try:
                copies = [a.constant_copy() for a in args]
            except NotImplementedError:
                copies = None
            if copies is not None and not any(callable(c) for c in copies):
                try:
                    value = fn(*copies)
                except Exception as e:  # noqa: BLE001 - raise it for real, from Python
                    raise GraphBreak(gb.OPERATION_RAISES, f"{_name(fn)}() raised {type(e).__name__} at trace time") from e
                return wrap_constant_result(value)
        if all(a.is_python_constant() for a in args) and all(v.is_python_constant() for v in kwargs.values()) \
                and _is_pure(fn):
            try:
                value = fn(*[a.as_python_constant() for a in args],
                           **{k: v.as_python_constant() for k, v in kwargs.items()})
            except Exception as e:  # noqa: BLE001 - raised in the trace, or by Python
                raise_folded(tx, e, f"{_name(fn)}()", args, kwargs)
            return wrap_constant_result(value)
        if isinstance(fn, type) and issubclass(fn, BaseException):
            return ExceptionVariable.create(tx, fn, args, kwargs)
        raise GraphBreak(gb.UNSUPPORTED_CALL, f"builtin {_name(fn)}() with arguments ({', '.join(a.describe() for a in args)})")

    def var_getattr(self, tx, name):
        if self.value is dict and name == "fromkeys":
            return BoundMethodOfVariable(self, name)
        value = getattr(self.value, name, None)
        if value is None:
            raise GraphBreak(gb.MISSING_ATTRIBUTE, f"{_name(self.value)} has no attribute {name!r}")
        return tx.wrap(value, None)

    def call_method(self, tx, name, args, kwargs):
        if self.value is dict and name == "fromkeys":
            keys = args[0].unpack(tx)
            value = args[1] if len(args) > 1 else NONE
            return DictVariable({k.as_python_constant(): value for k in keys})
        return super().call_method(tx, name, args, kwargs)


# torch.Tensor.add(x, 1) / torch.Tensor.size(x, 0): TensorBase's C methods, unbound, are x's methods
_UNBOUND_METHOD_TYPES = (str, bytes, int, float, complex, bool, list, tuple, dict, set, frozenset, torch._C.TensorBase)


_SIGNATURES: dict = {}


def call_handler(handler, fn, tx, args, kwargs):
    """Run a handler; wrong arguments (a TypeError in Python) and values that
    turn out not to be constants break the graph instead of failing the trace."""
    import inspect

    sig = _SIGNATURES.get(handler)
    if sig is None:
        sig = _SIGNATURES[handler] = inspect.signature(handler)
    try:
        if kwargs:
            _check_keywords(fn, args, kwargs)
        sig.bind(tx, *args, **kwargs)
    except TypeError as e:
        raise GraphBreak(gb.BAD_ARGUMENTS, f"{_name(fn)}() called with unexpected arguments ({e})") from e
    try:
        return handler(tx, *args, **kwargs)
    except NotImplementedError as e:  # as_python_constant() of a value that is not a constant
        raise GraphBreak(gb.VALUE_UNKNOWN, f"{_name(fn)}() with arguments not known at trace time") from e


# keywords accepted by builtins that have no inspect.signature (the others are checked
# against their real signature: a handler's own parameters are never positional-only)
_KEYWORDS_OF = {
    builtins.min: ("key", "default"), builtins.max: ("key", "default"), builtins.getattr: (),
    builtins.next: (), builtins.iter: (), builtins.range: (), builtins.type: (), builtins.super: (),
    builtins.zip: ("strict",), builtins.map: (), builtins.filter: (), builtins.set: (), builtins.frozenset: (),
    builtins.bool: (), builtins.int: ("base",), builtins.str: ("object", "encoding", "errors"),
    functools.reduce: (), itertools.chain: (), itertools.islice: (), itertools.product: ("repeat",),
    itertools.zip_longest: ("fillvalue",), itertools.repeat: ("object", "times"),
}
_REAL_SIGNATURES: dict = {}


def _check_keywords(fn, args, kwargs) -> None:
    """Raise TypeError (as the call would) when the real ``fn`` rejects these keywords."""
    import inspect

    allowed = _KEYWORDS_OF.get(fn) if has_handler(fn) else None
    if allowed is not None:
        bad = [k for k in kwargs if k not in allowed]
        if bad:
            raise TypeError(f"{_name(fn)}() got an unexpected keyword argument {bad[0]!r}")
        return
    if fn not in _REAL_SIGNATURES:
        try:
            _REAL_SIGNATURES[fn] = inspect.signature(fn)
        except (TypeError, ValueError):  # no signature: the handler's own binding decides
            _REAL_SIGNATURES[fn] = None
    sig = _REAL_SIGNATURES[fn]
    if sig is not None:
        sig.bind(*args, **kwargs)


def _name(fn):
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


_IMPURE = {builtins.print, builtins.input, builtins.open, builtins.exec, builtins.eval, builtins.compile,
           builtins.globals, builtins.locals, builtins.vars, builtins.id, builtins.breakpoint,
           builtins.__import__, builtins.setattr, builtins.delattr, builtins.exit if hasattr(builtins, "exit") else print}


# alternate constructors of builtin types, computed from their arguments alone (bound
# classmethods are made anew on each attribute read: compared by equality, never identity)
_PURE_CONSTRUCTORS = (int.from_bytes, float.fromhex, bytes.fromhex, str.maketrans,
                      bytes.maketrans)


def _is_pure(fn) -> bool:
    if isinstance(fn, types.BuiltinMethodType) and fn in _PURE_CONSTRUCTORS:
        return True
    if fn in _IMPURE:
        return False
    if isinstance(fn, type):
        return fn.__module__ == "builtins" and not issubclass(fn, BaseException) and fn not in (object, type)
    owner = getattr(fn, "__self__", None)
    if isinstance(fn, types.BuiltinMethodType) and type(owner) in (str, bytes, frozenset) and \
            (type(owner) is not frozenset or all(map(is_constant_value, owner))):
        # a method bound to an immutable value (keyword.iskeyword is frozenset(kwlist).__contains__)
        return True
    module = getattr(fn, "__module__", None)
    return module in ("builtins", *_PURE_MODULES)


# ---- arithmetic functions that may meet tensors -------------------------------------
_ARITH_FNS = {
    **{getattr(operator, n): getattr(operator, n) for n in (
        "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and_", "or_", "xor",
        "lshift", "rshift", "neg", "pos", "invert", "lt", "le", "eq", "ne", "gt", "ge", "not_",
        "iadd", "isub", "imul", "itruediv", "ifloordiv", "imod", "ipow", "imatmul", "iand", "ior",
        "ixor", "abs", "is_", "is_not")},
}


def _arith_call(tx, fn, args, kwargs):
    if kwargs:
        raise GraphBreak(gb.UNSUPPORTED_CALL, f"operator.{fn.__name__} with keyword arguments")
    return apply_operator(tx, fn, list(args))


@_handler(operator.getitem)
def _getitem(tx, obj, key):
    return obj.getitem(tx, key)


@_handler(operator.setitem)
def _setitem(tx, obj, key, value):
    obj.setitem(tx, key, value)
    return NONE


@_handler(operator.contains)
def _op_contains(tx, container, item):
    return ConstantVariable(container.contains(tx, item))


@_handler(operator.truth)
def _op_truth(tx, v):
    return ConstantVariable(v.bool(tx))


@_handler(operator.itemgetter, operator.attrgetter, operator.methodcaller)
def _op_getters(tx, *args, **kwargs):
    if all(a.is_python_constant() for a in args) and all(v.is_python_constant() for v in kwargs.values()):
        return None  # made by BuiltinVariable.call_function as an OperatorGetterVariable
    raise GraphBreak(gb.UNSUPPORTED_CALL, "operator getters with arguments not known at trace time")


_GETTER_TYPES = (operator.itemgetter, operator.attrgetter, operator.methodcaller)


class OperatorGetterVariable(VariableTracker):
    """operator.itemgetter / attrgetter / methodcaller with constant arguments.

    Calling it applies the item/attribute/method access to the argument's
    tracker (so it works on tensors and containers); ``getter`` is the real
    object, rebuilt as a constant.
    """

    def __init__(self, getter, source=None):
        super().__init__(source)
        self.getter = getter

    def python_type(self):
        return type(self.getter)

    def as_python_constant(self):
        return self.getter

    def is_python_constant(self):
        return True

    def call_function(self, tx, args, kwargs):
        if len(args) != 1 or kwargs:
            raise GraphBreak(gb.BAD_ARGUMENTS, f"{type(self.getter).__name__} expects one argument")
        obj = args[0]
        cls, spec = self.getter.__reduce__()[:2]
        if isinstance(cls, functools.partial):  # methodcaller(name, *args, **kwargs)
            name, *margs = [*cls.args, *spec]
            mkwargs = {k: wrap_constant_result(v) for k, v in cls.keywords.items()}
            return obj.call_method(tx, name, [wrap_constant_result(a) for a in margs], mkwargs)
        if cls is operator.methodcaller:
            name, *margs = spec
            return obj.call_method(tx, name, [wrap_constant_result(a) for a in margs], {})
        if cls is operator.itemgetter:
            results = [obj.getitem(tx, ConstantVariable(k)) for k in spec]
        else:
            results = []
            for path in spec:
                value = obj
                for part in path.split("."):
                    value = value.var_getattr(tx, part)
                results.append(value)
        return results[0] if len(results) == 1 else TupleVariable(results)

    def reconstruct(self, cg):
        if self.source is not None:
            return super().reconstruct(cg)
        cg.load_const(self.getter)

    def can_reconstruct(self):
        return True


@_handler(builtins.__build_class__)
def _build_class(tx, func, name, *bases):
    return build_class(tx, func, name, bases)


@_handler(builtins.len)
def _len(tx, obj):
    return obj.len_tracker(tx)


def _python_type(tx, obj):
    return obj.python_type()


@_handler(builtins.isinstance)
def _isinstance(tx, obj, classes):
    if not classes.is_python_constant():
        if isinstance(classes, TupleVariable):
            classes = ConstantVariable(tuple(c.as_python_constant() for c in classes.items))
        else:
            raise GraphBreak(gb.VALUE_UNKNOWN, "isinstance() with a class not known at trace time")
    cls = classes.as_python_constant()
    t = _python_type(tx, obj)
    try:
        if isinstance(obj, TensorVariable):
            import torch

            # a FakeTensor is a torch.Tensor; report the user-visible type
            if _legacy_tensor_type_matches(obj, cls):
                return ConstantVariable(True)
            return ConstantVariable(issubclass(getattr(obj, "real_type", torch.Tensor), cls))
        custom = _custom_instancecheck(cls)
        if custom is not None:
            raise GraphBreak(gb.UNSUPPORTED_CALL, f"isinstance() with {custom.__name__}, whose metaclass defines "
                             "__instancecheck__: Python runs it")
        return ConstantVariable(issubclass(t, cls))
    except TypeError as e:
        raise GraphBreak(gb.OPERATION_RAISES, "isinstance() arg 2 must be a type or tuple of types") from e


def _custom_instancecheck(classes) -> Optional[type]:
    """A class in ``classes`` (nested tuples too) whose metaclass answers ``isinstance`` with
    its own Python ``__instancecheck__`` (not abc's, typing's or torch's, which answer as
    ``issubclass(type(obj), cls)`` does for the objects the trace sees), else None."""
    if isinstance(classes, tuple):
        return next((c for c in map(_custom_instancecheck, classes) if c is not None), None)
    if not isinstance(classes, type):
        return None
    fn = mro_lookup(type(classes), "__instancecheck__")[0]
    if isinstance(fn, types.FunctionType) and fn.__module__ not in ("abc", "_py_abc", "typing") and \
            f"{fn.__module__}.{fn.__qualname__}" not in _ISSUBCLASS_LIKE_INSTANCECHECKS:
        return classes
    return None


# torch metaclasses whose __instancecheck__ answers as issubclass(type(obj), cls) for the objects
# that are not tensors (tensors are answered above); torch's legacy storage classes
# (torch.BoolStorage: by the storage's dtype and device) and the rest are not among them
_ISSUBCLASS_LIKE_INSTANCECHECKS = frozenset({"torch.nn.parameter._ParameterMeta.__instancecheck__",
                                             "torch.autograd.variable.VariableMeta.__instancecheck__"})


def _legacy_tensor_type_matches(tensor, classes) -> bool:
    """``isinstance(t, torch.FloatTensor)`` (a legacy tensor type, in ``classes`` or nested tuples
    of it): its metaclass answers by the tensor's dtype and device, as ``t.type()`` names them."""
    import torch

    if isinstance(classes, tuple):
        return any(_legacy_tensor_type_matches(tensor, c) for c in classes)
    if not any(classes is c for c in torch._tensor_classes):  # (by identity: a metaclass's __hash__ is not run)
        return False
    return tensor.legacy_type_name() == f"{classes.__module__}.{classes.__name__}"


@_handler(builtins.issubclass)
def _issubclass(tx, a, b):
    if a.is_python_constant() and b.is_python_constant():
        try:
            return ConstantVariable(issubclass(a.as_python_constant(), b.as_python_constant()))
        except TypeError as e:
            raise GraphBreak(gb.OPERATION_RAISES, "issubclass() raised TypeError") from e
    return None


@_handler(builtins.type)
def _type(tx, *args):
    import torch

    if len(args) != 1:
        raise GraphBreak(gb.UNSUPPORTED_CALL, "type() with 3 arguments creates a class")
    obj = args[0]
    if isinstance(obj, TensorVariable):
        return tx.wrap(getattr(obj, "real_type", torch.Tensor), None)
    return class_of(tx, obj, _python_type(tx, obj))


@_handler(builtins.getattr)
def _getattr(tx, obj, name, *default):
    if not name.is_python_constant():
        raise GraphBreak(gb.VALUE_UNKNOWN, "getattr() with a name not known at trace time")
    if not isinstance(name.as_python_constant(), str):
        raise GraphBreak(gb.OPERATION_RAISES, "getattr(): attribute name must be a string (TypeError)")
    try:
        return obj.var_getattr(tx, name.as_python_constant())
    except GraphBreak as e:
        if default and e.break_id == gb.MISSING_ATTRIBUTE:
            _guard_attribute_absent(tx, obj, name.as_python_constant())
            return default[0]
        if default and _missing_on_builtin(obj, name.as_python_constant()):
            return default[0]
        raise


def _missing_on_builtin(obj, name: str) -> bool:
    """Has ``obj``, an instance of a type without an instance ``__dict__`` and with object's
    attribute lookup (a set, a tuple, an int, abc's ``_abc_data``...), no attribute ``name``?
    Then only its type could have it, and it does not (read from the MRO's dicts; a tracker that
    does not model the attribute would otherwise break)."""
    cls = type_or_none(obj)
    return isinstance(cls, type) and not type.__dict__["__dictoffset__"].__get__(cls) \
        and mro_lookup(cls, "__getattribute__")[1] in _GENERIC_GETATTR and mro_lookup(cls, "__getattr__")[1] is None \
        and mro_lookup(cls, name)[1] is None


# builtin types whose __getattribute__ is the generic lookup (type, class, instance dict) and no more
_GENERIC_GETATTR = frozenset({object, set, frozenset, list, tuple, dict, int, float, complex, str, bytes, range,
                              slice, types.MethodWrapperType, types.BuiltinMethodType})


@_handler(object.__new__)
def _object_new(tx, cls, *args):
    """``object.__new__(cls)`` in a class's own ``__new__`` (``super().__new__(cls)``): a new
    instance of a plain class (abstract classes and extra arguments: Python raises)."""
    if args or not isinstance(cls, UserDefinedClassVariable) or getattr(cls.value, "__abstractmethods__", None) \
            or (type(cls.value) is not type and not _is_plain_meta(cls.value)):
        raise GraphBreak(gb.UNSUPPORTED_CALL, f"object.__new__() of {cls.describe()}"
                         + (" with more arguments" if args else ""))
    return cls.new_instance(tx)


@_handler(builtins.hasattr)
def _hasattr(tx, obj, name):
    if not name.is_python_constant():
        raise GraphBreak(gb.VALUE_UNKNOWN, "hasattr() with a name not known at trace time")
    if not isinstance(name.as_python_constant(), str):
        raise GraphBreak(gb.OPERATION_RAISES, "hasattr(): attribute name must be a string (TypeError)")
    if isinstance(obj, PartialVariable) and obj.python_type() is functools.partial and \
            _type_attribute_always_found(functools.partial, name.as_python_constant()):
        return TRUE
    try:
        obj.var_getattr(tx, name.as_python_constant())
        return TRUE
    except GraphBreak as e:
        if e.break_id == gb.MISSING_ATTRIBUTE:
            _guard_attribute_absent(tx, obj, name.as_python_constant())
            return FALSE
        if _missing_on_builtin(obj, name.as_python_constant()):
            return FALSE
        raise


# what a class holds that instance lookup always finds (methods, slot wrappers, getset descriptors
# of C types): hasattr() is True whatever the instance's own attributes are
_ALWAYS_FOUND = (types.FunctionType, types.WrapperDescriptorType, types.MethodDescriptorType,
                 types.BuiltinFunctionType, types.ClassMethodDescriptorType, staticmethod, classmethod, str)


def _type_attribute_always_found(cls: type, name: str) -> bool:
    """hasattr(x, name) is True for every instance x of ``cls``, a C type whose attribute
    lookup is the generic one (functools.partial: PyObject_GenericGetAttr): ``name`` is a
    method or plain value of the class, or object's ``__class__`` / the ``__dict__`` getset."""
    attr, _owner = mro_lookup(cls, name)
    if isinstance(attr, _ALWAYS_FOUND):
        return True
    return name in ("__class__", "__dict__") and isinstance(attr, types.GetSetDescriptorType) and \
        cls.__dictoffset__ != 0


def _guard_attribute_absent(tx, obj, name: str) -> None:
    """getattr(obj, name) raised AttributeError in the trace: guard that it still would.

    Plain objects and modules whose class does not define ``name`` (nor ``__getattr__``, for
    objects) hold attributes in dicts: a C-checkable ``not in`` per dict; anything else is
    guarded with hasattr() itself."""
    import torch

    src = obj.source
    if src is not None and isinstance(obj, PythonModuleVariable):
        # a module's attributes live in its __dict__; a module-level __getattr__ (PEP 562) is
        # asked again on every call, as by eager's getattr
        if "__getattr__" in vars(obj.module):
            tx.output.add_guard(guards.AbsentAttrGuard(src, name))
        else:
            for missing in (name, "__getattr__"):
                tx.output.add_guard(guards.NotInDictGuard(src, missing, "__dict__"))
        return
    if isinstance(obj, UserDefinedClassVariable):
        # a class lacks it along its MRO (read from the classes' own dicts): ``K.x = 1`` later adds it
        where = src.name() if src is not None else "{c}"
        tx.output.add_guard(guards.ExprGuard("{f}(" + where + ", {n})", (("f", guards.kinds.class_lacks),
                                             ("n", (name,)), *((("c", obj.value),) if src is None else ())), src))
        return
    if src is None or not isinstance(obj, (UserDefinedObjectVariable, NNModuleVariable)):
        return  # no source: nothing outside the trace can add it; other kinds: fixed by their type
    value = obj.value
    cls = type(value)
    in_class = mro_lookup(cls, name)[0] is not None
    if not in_class and isinstance(getattr(value, "__dict__", None), dict) and (
            isinstance(value, torch.nn.Module) or mro_lookup(cls, "__getattr__")[0] is None):
        dicts = ["__dict__"] + (["_parameters", "_buffers", "_modules"] if isinstance(value, torch.nn.Module) else [])
        generic = isinstance(obj, UserDefinedObjectVariable) and obj._own_getattribute()
        for d in dicts:
            tx.output.add_guard(guards.NotInDictGuard(src, name, d, generic=generic))
        # ... nor the class (a class attribute, a property, a __getattr__ set on it later)
        tx.output.add_guard(guards.ClassLacksGuard.of(
            src, (name,) if isinstance(value, torch.nn.Module) else (name, "__getattr__")))
        return
    tx.output.add_guard(guards.AbsentAttrGuard(src, name))


@_handler(builtins.setattr)
def _setattr(tx, obj, name, value):
    if not name.is_python_constant():
        raise GraphBreak(gb.VALUE_UNKNOWN, "setattr() with a name not known at trace time")
    obj.setattr(tx, name.as_python_constant(), value)
    return NONE


@_handler(types.MappingProxyType)
def _mappingproxy(tx, mapping):
    if type(mapping) not in (DictVariable, DefaultDictVariable, CounterVariable):
        raise GraphBreak(gb.UNSUPPORTED_CALL, f"MappingProxyType() of {mapping.describe()}")
    return MappingProxyVariable(mapping)


@_handler(builtins.vars)
def _vars(tx, *args):
    if len(args) == 1 and isinstance(args[0], ObjectLike):
        return args[0].var_getattr(tx, "__dict__")  # the object's own (live) __dict__
    if not args:
        return _locals(tx)
    raise GraphBreak(gb.UNSUPPORTED_CALL, f"vars() of {args[0].describe()}")


@_handler(builtins.delattr)
def _delattr(tx, obj, name):
    if not name.is_python_constant() or not isinstance(name.as_python_constant(), str):
        raise GraphBreak(gb.VALUE_UNKNOWN, "delattr() with a name not known at trace time")
    attr = name.as_python_constant()
    if isinstance(obj, NewObjectVariable) and mro_lookup(obj.value_type, "__delattr__")[0] is object.__delattr__ \
            and not hasattr(type(mro_lookup(obj.value_type, attr)[0]), "__delete__"):
        # an object made in the trace: rebuilt without the attribute (a missing one: AttributeError)
        if tx.output.side_effects.delete_new_object_attr(obj, attr):
            return NONE
        raise GraphBreak(gb.OPERATION_RAISES, f"delattr(): {obj.describe()} has no attribute {attr!r} (AttributeError)")
    raise GraphBreak(gb.SIDE_EFFECT, f"delattr() on {obj.describe()}")


@_handler(builtins.callable)
def _callable(tx, obj):
    if isinstance(obj, (BaseUserFunctionVariable, UserMethodVariable, BuiltinVariable, TorchVariable,
                        NNModuleVariable, BoundMethodOfVariable)):
        return TRUE
    return ConstantVariable(callable(_python_type(tx, obj)) and hasattr(_python_type(tx, obj), "__call__")
                            if not isinstance(_python_type(tx, obj), type) else
                            any("__call__" in k.__dict__ for k in _python_type(tx, obj).__mro__[:-1]))


@_handler(builtins.range)
def _range(tx, *args):
    symbolic = make_range(tx, list(args))  # a symbolic bound stays symbolic while iterated (tensor.py)
    if symbolic is not None:
        return symbolic
    if all(a.is_python_constant() for a in args):
        try:
            return ConstantVariable(range(*[a.as_python_constant() for a in args]))
        except (TypeError, ValueError) as e:
            raise GraphBreak(gb.OPERATION_RAISES, f"range() raised {type(e).__name__}") from e
    raise GraphBreak(gb.VALUE_UNKNOWN, "range() with arguments not known at trace time")


def _iter_items(tx, obj) -> list:
    return obj.unpack(tx)


@_handler(builtins.enumerate)
def _enumerate(tx, iterable, start=None):
    s = 0
    if start is not None:
        if not start.is_python_constant():
            raise GraphBreak(gb.VALUE_UNKNOWN, "enumerate() start not known at trace time")
        try:
            s = operator.index(start.as_python_constant())
        except TypeError as e:
            raise GraphBreak(gb.OPERATION_RAISES, f"enumerate() start raised TypeError: {e}") from e
    return EnumerateIteratorVariable(iterable.iter(tx), s)  # lazy: items on demand


@_handler(builtins.zip)
def _zip(tx, *iterables, strict=None):
    if strict is not None and not strict.is_python_constant():
        raise GraphBreak(gb.VALUE_UNKNOWN, "zip(strict=...) not known at trace time")
    # lazy: items on demand; a strict zip breaks where Python raises ValueError
    return ZipIteratorVariable([it.iter(tx) for it in iterables],
                               strict=strict is not None and bool(strict.as_python_constant()))


@_handler(builtins.reversed)
def _reversed(tx, seq):
    if isinstance(seq, TensorVariable):
        return seq.call_method(tx, "__reversed__", [], {})  # a tensor: x.flip(0), a copy (x itself for 0-d)
    if type(seq) in LIST_TRACKERS:
        return ListReverseIteratorVariable(seq)  # reads the list live
    if isinstance(seq, DictVariable):
        return DictIteratorVariable(seq, "keys", reverse=True)
    if isinstance(seq, DictViewVariable):
        return DictIteratorVariable(seq.dict_var, seq.kind, reverse=True)
    if isinstance(seq, (SetVariable, ListIteratorVariable)):
        raise GraphBreak(gb.OPERATION_RAISES, f"reversed() of {seq.describe()} (TypeError: not reversible)")
    if seq.is_python_constant() and isinstance(seq.as_python_constant(), range):
        return ListIteratorVariable(list(reversed(_iter_items(tx, seq))), kind=type(iter(range(0))))
    return ListIteratorVariable(list(reversed(_iter_items(tx, seq))), kind=reversed)


@_handler(builtins.iter)
def _iter(tx, obj, *sentinel):
    if sentinel:
        raise GraphBreak(gb.UNSUPPORTED_CALL, "iter() with a sentinel")
    return obj.iter(tx)


@_handler(builtins.next)
def _next(tx, it, *default):
    if isinstance(it, ObjectLike) and isinstance(mro_lookup(it.value_type, "__next__")[0], types.FunctionType):
        it = UserIteratorVariable(it)
    if not isinstance(it, ListIteratorVariable):
        raise GraphBreak(gb.UNSUPPORTED_CALL, f"next() on {it.describe()}")
    return next_of(tx, it, list(default))


@_handler(builtins.sorted)
def _sorted(tx, iterable, **kwargs):
    return ListVariable(sort_items(tx, _iter_items(tx, iterable), kwargs))


def _minmax(fn):
    def impl(tx, *args, **kwargs):
        if not args or (len(args) > 1 and "default" in kwargs):
            raise GraphBreak(gb.BAD_ARGUMENTS, f"{fn.__name__}() arguments (TypeError)")
        items = list(args) if len(args) > 1 else _iter_items(tx, args[0])
        if not items:
            if "default" in kwargs:
                return kwargs["default"]
            raise GraphBreak(gb.OPERATION_RAISES, f"{fn.__name__}() of an empty sequence")
        key = kwargs.get("key")
        if len(items) == 1:  # nothing is compared (torchdiffeq's max of one tensor's norm); the key runs once
            if key is not None and not (key.is_python_constant() and key.as_python_constant() is None):
                key.call_function(tx, [items[0]], {})
            return items[0]
        if any(isinstance(i, TensorVariable) for i in items):
            raise GraphBreak(gb.DATA_DEPENDENT, f"{fn.__name__}() of tensors compares tensor data")
        keys = [key.call_function(tx, [i], {}) for i in items] if key is not None else items
        if not all(k.is_python_constant() for k in keys):
            raise GraphBreak(gb.VALUE_UNKNOWN, f"{fn.__name__}() of values not known at trace time")
        values = [k.as_python_constant() for k in keys]
        try:
            best = fn(values)
        except TypeError as e:  # unorderable values: Python raises it at the call
            raise GraphBreak(gb.OPERATION_RAISES, f"{fn.__name__}() raised TypeError: {e}") from e
        return items[values.index(best)]
    return impl


_HANDLERS[builtins.min] = _minmax(min)
_HANDLERS[builtins.max] = _minmax(max)


@_handler(builtins.sum)
def _sum(tx, iterable, start=None):
    if start is not None and start.is_python_constant() and isinstance(start.as_python_constant(),
                                                                       (str, bytes, bytearray)):
        raise GraphBreak(gb.OPERATION_RAISES, "sum() can't sum strings or bytes (TypeError)")
    total = start if start is not None else ConstantVariable(0)
    items = _iter_items(tx, iterable)
    # the leading plain numbers are summed by sum() itself: from 3.12 it adds floats with
    # compensation (sum([0.1] * 10) == 1.0), which one + after another does not give
    plain = 0
    while plain < len(items) and type(items[plain]) is ConstantVariable and \
            type(items[plain].value) in (int, float):
        plain += 1
    if plain and type(total) is ConstantVariable and type(total.value) in (int, float):
        total = ConstantVariable(builtins.sum([item.value for item in items[:plain]], total.value))
        items = items[plain:]
    for item in items:
        total = binary_op(tx, "+", total, item)
    return total


@_handler(builtins.abs)
def _abs(tx, x):
    return apply_operator(tx, operator.abs, [x])


def _make_all_any(fn):
    def impl(tx, iterable):
        for item in iterate_lazily(tx, iterable):  # stops consuming at the deciding item
            t = item.bool(tx)
            if fn is builtins.all and not t:
                return FALSE
            if fn is builtins.any and t:
                return TRUE
        return ConstantVariable(fn is builtins.all)
    return impl


_HANDLERS[builtins.all] = _make_all_any(builtins.all)
_HANDLERS[builtins.any] = _make_all_any(builtins.any)


@_handler(builtins.map)
def _map(tx, fn, *iterables):
    if not iterables:
        raise GraphBreak(gb.OPERATION_RAISES, "map() must have at least two arguments (TypeError)")
    return MapIteratorVariable(fn, [it.iter(tx) for it in iterables])  # lazy: fn runs on demand


@_handler(builtins.filter)
def _filter(tx, fn, iterable):
    return FilterIteratorVariable(fn, iterable.iter(tx))  # lazy: fn runs on demand


@_handler(builtins.tuple)
def _tuple(tx, iterable=None):
    return TupleVariable(_iter_items(tx, iterable) if iterable is not None else [])


@_handler(builtins.list)
def _list(tx, iterable=None):
    return ListVariable(_iter_items(tx, iterable) if iterable is not None else [])


def _make_set(frozen):
    def impl(tx, iterable=None):
        out = SetVariable(_iter_items(tx, iterable) if iterable is not None else [], frozen=frozen)
        table = iterable._table() if isinstance(iterable, SetVariable) else None
        if table is not None and out.shadow is not None:  # (CPython merges a set's table: set_merge)
            out.shadow = (frozenset if frozen else set)(table)
        return out
    return impl


_HANDLERS[builtins.set] = _make_set(False)
_HANDLERS[builtins.frozenset] = _make_set(True)


@_handler(builtins.dict)
def _dict(tx, *args, **kwargs):
    return dict_from_args(tx, *args, **kwargs)


def _exception_text(fn, exc):
    """str() / repr() of an exception made in the trace: computed on a real one made from the
    same constant arguments when its class formats it with builtin code (None: not known)."""
    if not isinstance(exc, ExceptionVariable) or not all(a.is_python_constant() for a in exc.args):
        return None
    dunder = "__str__" if fn is str else "__repr__"
    if mro_lookup(exc.exc_type, dunder)[1].__module__ != "builtins" or \
            mro_lookup(exc.exc_type, "__new__")[1].__module__ != "builtins":
        return None
    args = tuple(a.as_python_constant() for a in exc.args)
    if exc.custom_init:  # a Python __init__ ran in the trace: its args, without running it again
        return ConstantVariable(fn(runtime.exception_with(exc.exc_type, args, ())))
    if mro_lookup(exc.exc_type, "__init__")[1].__module__ != "builtins":
        return None
    return ConstantVariable(fn(exc.exc_type(*args)))


def user_object_text(tx, obj, dunder, args=()):
    """``str()`` / ``repr()`` / ``format()`` of a user object whose class has a Python
    ``__str__`` / ``__repr__`` / ``__format__``: the method inlined (its class attribute guarded);
    its result must be a str known at trace time (None: not a user object with such a method)."""
    if not isinstance(obj, ObjectLike):
        return None
    cls = obj.value_type
    fn, _ = mro_lookup(cls, dunder)
    used = [(dunder, fn)]
    if dunder == "__format__" and fn is object.__format__:
        if args and not (args[0].is_python_constant() and args[0].as_python_constant() == ""):
            return None  # object.__format__ raises TypeError on a non-empty spec: not answered here
        dunder, args = "__str__", ()
        fn, _ = mro_lookup(cls, dunder)
        used.append((dunder, fn))
    if dunder == "__str__" and fn is object.__str__:
        dunder = "__repr__"
        fn, _ = mro_lookup(cls, dunder)
        used.append((dunder, fn))
    if not isinstance(fn, types.FunctionType):
        return None  # object.__repr__ shows an address; C methods are not known
    for name, attr in used:
        guard_class_attr(tx, obj._class_attr_source(name), attr)
    result = UserMethodVariable(fn, obj).call_function(tx, list(args), {})
    if result.is_python_constant() and type(result.as_python_constant()) is str:
        return ConstantVariable(result.as_python_constant())
    try:
        kind = result.python_type()
    except GraphBreak:
        kind = None
    if kind is not None and not issubclass(kind, str):
        raise GraphBreak(gb.OPERATION_RAISES, f"{cls.__name__}.{dunder} returned non-string "
                         f"(type {kind.__name__}) (TypeError)")
    raise GraphBreak(gb.VALUE_UNKNOWN, f"{cls.__name__}.{dunder}() result is not a str known at trace time")


def _container_text(fn, obj):
    """str() / repr() / ascii() of a list, tuple, dict or set of constants (computed on a copy)."""
    if type(obj) not in (*LIST_TRACKERS, TupleVariable, DictVariable, SetVariable, CounterVariable):
        return None
    try:
        value = obj.constant_copy()
    except NotImplementedError:
        return None
    if any(callable(v) for v in _leaves(value)):
        return None  # a function's repr shows its address: not known at trace time
    return ConstantVariable(fn(value))


def _leaves(value):
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(k)
            yield from _leaves(v)
    elif isinstance(value, (list, tuple, set, frozenset)):
        for v in value:
            yield from _leaves(v)
    else:
        yield value


def _make_repr(fn):
    def impl(tx, obj):
        text = _exception_text(fn, obj) if fn is repr else None
        if text is None and fn is repr:
            text = user_object_text(tx, obj, "__repr__")
        return text if text is not None else _container_text(fn, obj)  # None: folded when a constant
    return impl


_HANDLERS[builtins.repr] = _make_repr(repr)
_HANDLERS[builtins.ascii] = _make_repr(ascii)


# pure functions that read (never mutate) their container arguments: folded on constant copies
_FOLD_ON_COPIES = {operator.concat, operator.countOf, operator.indexOf, operator.length_hint, math.fsum,
                   math.hypot, math.dist, builtins.format, builtins.bytes}


@_handler(builtins.format)
def _format(tx, value, spec=None):
    if isinstance(value, ObjectLike):
        return user_object_text(tx, value, "__format__", (spec if spec is not None else ConstantVariable(""),))
    return None  # folded on constant copies


def _scalar_conversion(fn):
    def impl(tx, *args, **kwargs):
        if fn is int and len(args) == 1 and not kwargs and isinstance(args[0], InputConstantVariable) and \
                args[0].convert is None:
            return args[0].converted(int)  # int(seed): still read from the input when the frame runs
        if fn is str and len(args) == 1 and not kwargs and isinstance(args[0], SymNodeVariable) and \
                isinstance(args[0].value, (torch.SymInt, torch.SymFloat)):
            # a symbolic number's text, made after the graph from the value it returns (as f"{n}"):
            # the entry is not specialised on it ("rows=" + str(n))
            return FormattedTextVariable([(args[0], 1)])
        if fn is str and len(args) == 1 and not kwargs:
            text = _exception_text(str, args[0])
            if text is None:
                text = _container_text(str, args[0])
            if text is None:
                text = user_object_text(tx, args[0], "__str__")
            if text is not None:
                return text
        if args and isinstance(args[0], TensorVariable):
            if len(args) == 1 and not kwargs and _item_converts(fn, args[0]):
                return args[0].call_method(tx, "item", [], {})  # a symbolic number of the graph
            raise GraphBreak(gb.DATA_DEPENDENT, f"{fn.__name__}(tensor) reads a value out of the tensor")
        if fn is bool and len(args) == 1 and not kwargs and getattr(args[0], "symbolic", False):
            return ConstantVariable(args[0].bool(tx))  # a symbolic number: its truth, as a branch takes it
        if args and not args[0].is_python_constant():
            if fn is bool:
                return ConstantVariable(args[0].bool(tx))
            if fn is str:
                raise GraphBreak(gb.UNSUPPORTED_CALL, f"str() of {args[0].describe()}")
        return None  # fold as a pure builtin
    return impl


def _item_converts(fn, tensor) -> bool:
    """Is ``fn(tensor)`` exactly ``tensor.item()`` (config.capture_scalar_outputs)?  ``int`` of an
    integer tensor and ``float`` of a real floating one (``int(float_tensor)`` truncates, and
    ``float(int_tensor)`` converts: both stay breaks)."""
    if not config.capture_scalar_outputs:
        return False
    dtype = tensor.example.dtype
    if fn is int:
        return not dtype.is_floating_point and not dtype.is_complex and dtype is not torch.bool
    return fn is float and dtype.is_floating_point


for _fn in (int, float, bool, str, complex):
    _HANDLERS[_fn] = _scalar_conversion(_fn)


@_handler(builtins.print)
def _print(tx, *args, **kwargs):
    return replay_print(tx, list(args), kwargs)


@_handler(warnings.warn)
def _warn(tx, message, category=None, stacklevel=None, source=None):
    return replay_warn(tx, message, category, stacklevel, source)


@_handler(builtins.super)
def _super(tx, *args):
    if args:
        if len(args) != 2:
            raise GraphBreak(gb.UNSUPPORTED_CALL, "super() with one argument")
        return SuperVariable(args[0].as_python_constant(), args[1])
    cls, obj = tx.zero_arg_super()
    return SuperVariable(cls, obj)


@_handler(object.__setattr__)
def _object_setattr(tx, obj, name, value):
    # replay is a STORE_ATTR, which would run a custom __setattr__ again: only plain ones
    plain = isinstance(obj, NewObjectVariable) or mro_lookup(obj.value_type, "__setattr__")[0] in (
        object.__setattr__, None) if isinstance(obj, ObjectLike) else False
    if isinstance(obj, ObjectLike) and name.is_python_constant() and plain:
        if not getattr(obj.value_type, "__dictoffset__", 1) and not hasattr(
                type(mro_lookup(obj.value_type, name.as_python_constant())[0]), "__set__"):
            raise GraphBreak(gb.OPERATION_RAISES, "object.__setattr__ of a name with no slot and no __dict__ (AttributeError)")
        tx.output.side_effects.store_attr(obj, name.as_python_constant(), value)
        return NONE
    if isinstance(obj, UserDefinedObjectVariable) and name.is_python_constant() and \
            type(name.as_python_constant()) is str and getattr(obj.value_type, "__dictoffset__", 0) and \
            not hasattr(type(mro_lookup(obj.value_type, name.as_python_constant())[0]), "__set__"):
        # the class's own __setattr__ ends here (transformers' config: super().__setattr__(key,
        # value)): a plain instance-dict store, replayed as this call
        tx.output.side_effects.store_attr(obj, name.as_python_constant(), value, raw=True)
        return NONE
    raise GraphBreak(gb.SIDE_EFFECT, "object.__setattr__ on this value")


@_handler(type.__call__)
def _type_call(tx, cls, *args, **kwargs):
    """type.__call__(cls, ...) (a metaclass's super().__call__): make the instance as for a class
    with a plain metaclass."""
    if not isinstance(cls, UserDefinedClassVariable):
        return None
    plain = UserDefinedClassVariable(cls.value, cls.source)
    plain.metaclass_call_done = True
    return plain.call_function(tx, list(args), kwargs)


@_handler(object.__init__)
def _object_init(tx, *args, **kwargs):
    return NONE


@_handler(*(cls.__dict__["__init__"] for cls in PLAIN_INIT_EXCEPTIONS))
def _exception_init(tx, exc, *args):
    """``super().__init__(msg)`` in a Python ``__init__`` of an exception made in the trace:
    BaseException's own __init__ replaces ``args`` (keywords: Python raises TypeError)."""
    if not isinstance(exc, ExceptionVariable):
        return None
    exc.args = list(args)
    return NONE


def _dict_slot(fn):
    """dict.get/__getitem__/__contains__(obj, key) on a real dict-subclass instance
    (``super().get(key)`` inside its methods): reads the real dict, guarding the key."""
    def impl(tx, obj, *args):
        if isinstance(obj, DictStorageMixin):  # its items are modelled (changes included)
            return obj.call_base_method(tx, fn.__name__, list(args), {})
        nargs = 2 if fn is dict.get else 1
        if not (isinstance(obj, UserDefinedObjectVariable) and isinstance(obj.value, dict)
                and obj.source is not None and 1 <= len(args) <= nargs and args[0].is_python_constant()):
            return None
        key = args[0].as_python_constant()
        if type(key) not in (str, int, bool, type(None)) or \
                mro_lookup(type(obj.value), "__getitem__")[0] is not dict.__getitem__:
            return None
        present = dict.__contains__(obj.value, key)
        tx.output.add_expr_guard(f"___builtins.dict.__contains__({obj.source.name()}, {key!r}) is {present!r}")
        if fn is dict.__contains__:
            return ConstantVariable(present)
        if present:
            return tx.wrap(dict.__getitem__(obj.value, key), ItemSource(obj.source, key))
        if fn is dict.__getitem__:
            raise GraphBreak(gb.OPERATION_RAISES, f"KeyError: {key!r}")
        return args[1] if len(args) == 2 else NONE
    return impl


for _fn in (dict.get, dict.__getitem__, dict.__contains__):
    _HANDLERS[_fn] = _dict_slot(_fn)


@_handler(object.__getattribute__)
def _object_getattribute(tx, obj, name):
    if isinstance(obj, ObjectLike) and name.is_python_constant():
        return obj.generic_getattr(tx, name.as_python_constant())
    return None


@_handler(builtins.locals)
def _locals(tx):
    """locals() of a traced frame: its bound fast locals and known cell contents."""
    tx.read_all_arguments()
    items = dict(tx.symbolic_locals)
    for name, cell in tx.cells.items():
        if cell.contents is None and cell.kind != "local":  # a closure cell not read yet
            try:
                tx.cell_load(name)
            except GraphBreak:
                continue  # an empty cell: locals() leaves it out
        if cell.contents is not None:
            items[name] = cell.contents
    return DictVariable(items)


@_handler(builtins.dir)
def _dir(tx, *args):
    """dir() of a traced frame: the sorted names of its locals (not the tracer's own);
    dir(obj) goes the way of any other call."""
    if len(args) == 1 and isinstance(args[0], NewObjectVariable) and not isinstance(args[0], NNModuleVariable):
        return _dir_of_new_object(tx, args[0])
    if args:
        return None
    return ListVariable([ConstantVariable(k) for k in sorted(_locals(tx).items)])


_MRO = type.__dict__["__mro__"].__get__
_TYPE_DICT = type.__dict__["__dict__"].__get__


def _dir_of_new_object(tx, obj):
    """``dir(obj)`` of an object made in the trace whose class keeps object's ``__dir__``: its
    attributes (the trace wrote all of them) and the names in its class's MRO dicts, sorted, as
    ``object.__dir__`` gives them.  The class's names are guarded (a method added later)."""
    cls = obj.value_type
    _, owner = mro_lookup(cls, "__dir__")
    if owner is not object or not getattr(cls, "__dictoffset__", 0) or \
            mro_lookup(type(cls), "__dir__")[1] is not type:  # (the guard's dir(cls): no metaclass code)
        return None
    names = set(tx.output.side_effects.new_object_attrs(obj))
    for klass in _MRO(cls):
        names.update(k for k in _TYPE_DICT(klass) if type(k) is str)
    if obj.class_source is not None:
        tx.output.add_guard(guards.ExprGuard("___builtins.dir(" + obj.class_source.name() + ") == {names}",
                                             (("names", sorted(dir(cls))),), obj.class_source))
    elif cls not in runtime.MADE_CLASSES:
        return None  # (a class that cannot be guarded)
    return ListVariable([ConstantVariable(k) for k in sorted(names)])


def _pick(tx, mapping, names):
    """runtime.pick: the bound ones among names (generated loop-body code)."""
    keys = names.as_python_constant()
    return DictVariable({k: v for k, v in mapping.items.items() if k in keys})


_HANDLERS[runtime.pick] = _pick


def _cell_contents(tx, cell, name):
    """runtime.cell_contents (resume code reading the original frame's cell variable): a
    read of the cell; an empty one breaks and Python raises UnboundLocalError."""
    name = name.as_python_constant()
    if tx.cells.get(name) is not cell:
        raise GraphBreak(gb.UNSUPPORTED_CALL, f"checked read of a cell other than the frame's {name!r}")
    return tx.cell_load(name)


_HANDLERS[runtime.cell_contents] = _cell_contents


@_handler(runtime.cell_delete)
def _cell_delete(tx, cell, name):
    raise GraphBreak(gb.UNSUPPORTED_BYTECODE, "DELETE_DEREF: deleting a closure variable")


def _real_object(tx, obj, note_identity: bool = True):
    """The real object a tracker read from the frame's inputs stands for, guarded by identity
    (so its id() and identity hash are constants of this cache entry); None when the tracker has
    no source or keeps no real object (new objects, tensors, containers)."""
    if obj.source is None or isinstance(obj, TensorVariable):
        return None
    if isinstance(obj, (UserDefinedObjectVariable, NNModuleVariable, UserDefinedClassVariable)):
        value = obj.value
    elif isinstance(obj, UserFunctionVariable):
        value = obj.fn
    else:
        return None
    tx.output.add_guard(guards.IdGuard(obj.source, value))
    if note_identity:
        tx.output.side_effects.note_identity(obj)
    return value


def _address(tx, obj, number: int) -> ObservedConstant:
    """``id()`` or the identity hash of a real object: a constant of this cache entry (the object
    is guarded by identity) and of this process only.  A stored entry (persistent_cache.py) may
    hold it only as a dict key the trace used (another process's object gives another key, the
    same way); any other use of the number marks the trace as this process's.  While a repeated
    block is recorded, its uses are reported to it (``obj`` given)."""
    output = tx.output
    output.process_values.add(number)
    se = output.side_effects
    recording = obj is not None and bool(se.recorders)

    def on_use(container):
        if recording:
            se.note_identity(obj, container)
        if container is None and output.process_dependent is None:
            output.process_dependent = "an object's id() or identity hash as a number (not only as a dict key)"
    return ObservedConstant(number, on_use)


@_handler(builtins.id)
def _id(tx, obj):
    value = _real_object(tx, obj, note_identity=False)
    if value is not None:
        se = tx.output.side_effects
        return _address(tx, obj, id(value))
    if obj.is_python_constant() and not obj.mutable_local:
        # an int or str constant may be a new object in the real run: its id is not known
        value = obj.as_python_constant()
        if value is None or isinstance(value, (bool, type)):
            return _address(tx, None, id(value))  # singletons and classes
    return IdVariable(obj)


def _hash_of_dunder_result(value: int) -> int:
    """What ``hash(obj)`` makes of an int its class's ``__hash__`` returned (slot_tp_hash): the
    value itself when it fits in a Py_ssize_t, else the int's own hash; -1 becomes -2."""
    h = value if -(1 << 63) <= value < (1 << 63) else hash(value)
    return -2 if h == -1 else h


@_handler(builtins.hash)
def _hash(tx, obj):
    if obj.is_python_constant():
        if type(obj.as_python_constant()) not in (int, bool, float, type(None)):
            tx.output.hash_seed_dependent = True  # (str, bytes: salted per process)
        return None  # folded as a pure builtin
    if isinstance(obj, ObjectLike):
        fn, owner = mro_lookup(obj.value_type, "__hash__")
        if fn is None:
            raise GraphBreak(gb.OPERATION_RAISES, f"unhashable type: {obj.value_type.__name__!r} (TypeError)")
        if isinstance(fn, types.FunctionType):
            result = UserMethodVariable(fn, obj).call_function(tx, [], {})
            if not result.is_python_constant() or type(result.as_python_constant()) not in (int, bool):
                raise GraphBreak(gb.VALUE_UNKNOWN, "__hash__() result not known at trace time, or not an int")
            return ConstantVariable(_hash_of_dunder_result(int(result.as_python_constant())))
        if fn is object.__hash__:
            value = _real_object(tx, obj)
            if value is not None:
                return _address(tx, None, hash(value))
    raise GraphBreak(gb.UNSUPPORTED_CALL, f"hash() of {obj.describe()}")


def _make_numeric(fn):
    def impl(tx, *args):
        if not any(isinstance(a, TensorVariable) for a in args):
            return None  # fold as a pure builtin
        if fn is builtins.pow and len(args) == 2:
            return apply_operator(tx, operator.pow, list(args))
        if fn is builtins.round and isinstance(args[0], TensorVariable):
            cls = getattr(args[0], "real_type", torch.Tensor)
            if mro_lookup(cls, "__round__")[0] is None:  # torch.Tensor has none: round(x) raises
                tx.raise_exception(ExceptionVariable(TypeError, [ConstantVariable(
                    f"type {cls.__name__} doesn't define __round__ method")]))
        raise GraphBreak(gb.UNSUPPORTED_CALL, f"{fn.__name__}() on a tensor")
    return impl


for _fn in (builtins.divmod, builtins.pow, builtins.round):
    _HANDLERS[_fn] = _make_numeric(_fn)


@_handler(functools.reduce)
def _reduce(tx, fn, iterable, *initial):
    items = _iter_items(tx, iterable)
    if initial:
        acc = initial[0]
    elif items:
        acc, items = items[0], items[1:]
    else:
        raise GraphBreak(gb.OPERATION_RAISES, "reduce() of empty iterable")
    for item in items:
        acc = fn.call_function(tx, [acc, item], {})
    return acc


@_handler(functools.partial)
def _partial(tx, fn, *args, **kwargs):
    if isinstance(fn, PartialVariable) and _partial_dict_is_null(tx, fn):
        # partial(partial(g, 1, a=2), 3, b=4) is partial(g, 1, 3, a=2, b=4), as CPython makes it
        # (when the inner partial has no instance __dict__)
        return PartialVariable(fn.fn, [*fn.args, *args], {**fn.kwargs, **kwargs})
    return PartialVariable(fn, list(args), dict(kwargs))


def partial_dict_is_null(p: functools.partial) -> bool:
    """Has this partial no instance __dict__ yet?  (Read by partial's own C ``__reduce__``, which,
    unlike ``p.__dict__``, does not make one.)"""
    return functools.partial.__reduce__(p)[2][3] is None


def _partial_dict_is_null(tx, fn) -> bool:
    if fn.source is None:
        return fn.instance_dict is None  # made in the trace: its __dict__ is made when first written
    if fn.value is None:
        return False
    null = partial_dict_is_null(fn.value)
    tx.output.add_guard(guards.ExprGuard("{f}(" + fn.source.name() + ") is {v}",
                                         (("f", partial_dict_is_null), ("v", null)), fn.source))
    return null


@_handler(itertools.product)
def _product(tx, *iterables, repeat=None):
    lists = [_iter_items(tx, it) for it in iterables]
    r = repeat.as_python_constant() if repeat is not None else 1
    return ListIteratorVariable([TupleVariable(list(p)) for p in itertools.product(*lists, repeat=r)])


def _combinatoric(fn):
    def impl(tx, iterable, *rest, **kwargs):
        items = _iter_items(tx, iterable)
        if not all(r.is_python_constant() for r in rest) or not all(v.is_python_constant() for v in kwargs.values()):
            raise GraphBreak(gb.VALUE_UNKNOWN, f"itertools.{fn.__name__}() with arguments not known at trace time")
        try:
            groups = list(fn(range(len(items)), *[r.as_python_constant() for r in rest],
                             **{k: v.as_python_constant() for k, v in kwargs.items()}))
        except Exception as e:  # noqa: BLE001 - raise it for real
            raise GraphBreak(gb.OPERATION_RAISES, f"itertools.{fn.__name__}() raised {type(e).__name__}") from e
        return ListIteratorVariable([TupleVariable([items[i] for i in g]) for g in groups])
    return impl


for _fn in (itertools.combinations, itertools.permutations, itertools.combinations_with_replacement):
    _HANDLERS[_fn] = _combinatoric(_fn)
_HANDLERS.update(ITERTOOLS_HANDLERS)  # lazy ones: count, cycle, islice, takewhile, ... (iterators.py)
_KEYWORDS_OF.update(ITERTOOLS_KEYWORDS)


@_handler(itertools.accumulate)
def _accumulate(tx, iterable, func=None, *, initial=None):
    def none(v):
        return v is None or (v.is_python_constant() and v.as_python_constant() is None)

    if none(func):
        def combine(tx, total, item):
            return binary_op(tx, "+", total, item)
    else:
        def combine(tx, total, item):
            return func.call_function(tx, [total, item], {})
    return AccumulateIteratorVariable(tx, iterable.iter(tx), combine, None if none(initial) else initial)


@_handler(itertools.repeat)
def _repeat(tx, obj, times=None):
    if times is None or not times.is_python_constant():
        raise GraphBreak(gb.VALUE_UNKNOWN, "itertools.repeat() without a known count")
    return ListIteratorVariable([obj] * max(0, times.as_python_constant()))


@_handler(math.prod)
def _prod(tx, iterable, start=None):
    total = start if start is not None else ConstantVariable(1)
    for item in _iter_items(tx, iterable):
        total = binary_op(tx, "*", total, item)
    return total


# ---- Python-level standard-library functions answered without inlining them -----------------
# Registered in functions.PYTHON_FUNCTION_HANDLERS (keyed by the function object), which
# UserFunctionVariable.call_function consults before inlining (the standard library is never
# inlined); each goes through call_handler, so its arguments are checked like a builtin's.
def _py_handler(*fns):
    def deco(impl):
        for fn in fns:
            PYTHON_FUNCTION_HANDLERS[fn] = functools.partial(call_handler, impl, fn)
        return impl
    return deco


for _fn, _impl in MODULE_FUNCTION_HANDLERS.items():
    _py_handler(_fn)(_impl)


# queries of typing / inspect that read nothing but their argument (and return a new plain value
# or an object they were given): answered at trace time when the argument is a constant
def _pure_query(fn):
    def impl(tx, obj):
        if not obj.is_python_constant():
            raise GraphBreak(gb.VALUE_UNKNOWN, f"{fn.__name__}() of a value not known at trace time")
        return tx.wrap(fn(obj.as_python_constant()), None)
    return impl


for _fn in (typing.get_origin, typing.get_args, inspect.iscoroutinefunction, inspect.isgeneratorfunction,
            inspect.isasyncgenfunction):
    _py_handler(_fn)(_pure_query(_fn))


def _dataclass_type(v):
    import dataclasses

    t = v.as_python_constant() if v.is_python_constant() and isinstance(v.as_python_constant(), type) \
        else _python_type(None, v)
    return t if dataclasses.is_dataclass(t) else None


@_py_handler(dataclasses.fields)
def _dc_fields(tx, obj):
    import dataclasses

    cls = _dataclass_type(obj)
    if cls is None:
        raise GraphBreak(gb.OPERATION_RAISES, "dataclasses.fields() of a non-dataclass (TypeError)")
    return TupleVariable([DataclassFieldVariable(f) for f in dataclasses.fields(cls)])


@_py_handler(dataclasses.is_dataclass)
def _dc_is_dataclass(tx, obj):
    import dataclasses

    if obj.is_python_constant() and isinstance(obj.as_python_constant(), type):
        return ConstantVariable(dataclasses.is_dataclass(obj.as_python_constant()))
    return ConstantVariable(dataclasses.is_dataclass(_python_type(tx, obj)))


@_py_handler(dataclasses.replace)
def _dc_replace(tx, obj, **changes):
    import dataclasses

    cls = _dataclass_type(obj)
    if cls is None or (obj.is_python_constant() and isinstance(obj.as_python_constant(), type)):
        raise GraphBreak(gb.OPERATION_RAISES, "dataclasses.replace() of a non-dataclass instance (TypeError)")
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f._field_type is dataclasses._FIELD_CLASSVAR:
            continue
        if not f.init:
            if f.name in changes:
                raise GraphBreak(gb.OPERATION_RAISES, f"dataclasses.replace(): field {f.name} is init=False (ValueError)")
            continue
        kwargs[f.name] = changes.pop(f.name) if f.name in changes else obj.var_getattr(tx, f.name)
    if changes:
        raise GraphBreak(gb.OPERATION_RAISES, "dataclasses.replace() with an unknown field (TypeError)")
    return tx.wrap(cls, None).call_function(tx, [], kwargs)


def _dc_inner(tx, obj, as_dict: bool, memo: dict):
    """What dataclasses.asdict / astuple make of a value: dataclass instances become dicts /
    tuples of their fields, lists / tuples / dicts are rebuilt item by item, anything else is
    copy.deepcopy'd."""
    cls = _dataclass_type(obj) if isinstance(obj, ObjectLike) else None
    if cls is not None:
        import dataclasses

        values = [_dc_inner(tx, obj.var_getattr(tx, f.name), as_dict, memo) for f in dataclasses.fields(cls)]
        if as_dict:
            return DictVariable({f.name: v for f, v in zip(dataclasses.fields(cls), values)})
        return TupleVariable(values)
    if type(obj) in (*LIST_TRACKERS, TupleVariable):
        return (TupleVariable if type(obj) is TupleVariable else ListVariable)(
            [_dc_inner(tx, i, as_dict, memo) for i in obj.items])
    if type(obj) is DictVariable and obj.dict_type is dict:
        if any(not isinstance(k, (str, int, bool, float, type(None))) for k in obj.items):
            raise GraphBreak(gb.UNSUPPORTED_CALL, "dataclasses.asdict() of a dict with non-constant keys")
        return DictVariable({k: _dc_inner(tx, v, as_dict, memo) for k, v in obj.items.items()})
    if isinstance(obj, (ListVariable, TupleVariable, DictVariable)):
        raise GraphBreak(gb.UNSUPPORTED_CALL, f"dataclasses.asdict() of a {obj.describe()} field")
    return copy_value(tx, obj, True, memo)


def _make_dc_convert(as_dict):
    def impl(tx, obj):
        if _dataclass_type(obj) is None or not isinstance(obj, ObjectLike):
            raise GraphBreak(gb.OPERATION_RAISES, f"dataclasses.{'asdict' if as_dict else 'astuple'}() of a "
                             "non-dataclass instance (TypeError)")
        return _dc_inner(tx, obj, as_dict, {})
    return impl


_py_handler(dataclasses.asdict)(_make_dc_convert(True))
_py_handler(dataclasses.astuple)(_make_dc_convert(False))


def _make_inspect_predicate(fn, kinds):
    def impl(tx, obj):
        if obj.is_python_constant():
            return ConstantVariable(fn(obj.as_python_constant()))
        return ConstantVariable(any(issubclass(_python_type(tx, obj), k) for k in kinds))
    return impl


for _fn, _kinds in ((inspect.isfunction, (types.FunctionType,)),
                    (inspect.ismethod, (types.MethodType,)),
                    (inspect.isclass, (type,))):
    _py_handler(_fn)(_make_inspect_predicate(_fn, _kinds))


def _function_dict_items(tx, fn) -> dict:
    """The entries of a function's ``__dict__`` (functools.update_wrapper copies them)."""
    if isinstance(fn, NestedUserFunctionVariable):
        special = set(functools.WRAPPER_ASSIGNMENTS) | {"__wrapped__"}
        return {k: v for k, v in fn.attrs.items() if k not in special}
    if isinstance(fn, UserMethodVariable):  # a bound method's __dict__ is its function's
        return _function_dict_items(tx, fn._fn_var())
    if isinstance(fn, UserFunctionVariable):
        d = fn.fn.__dict__
        if fn.source is not None:
            src = AttrSource(fn.source, "__dict__")
            tx.output.add_guard(guards.DictKeysGuard(src, tuple(d)))
            return {k: tx.wrap(v, ItemSource(src, k)) for k, v in d.items()}
        if not d:
            tx.output.add_guard(guards.ExprGuard("not {f}.__dict__", (("f", fn.fn),)))
            return {}
    raise GraphBreak(gb.UNSUPPORTED_CALL, f"functools.update_wrapper() copying the __dict__ of {fn.describe()}")


@_py_handler(functools.update_wrapper)
def _update_wrapper(tx, wrapper, wrapped, assigned=None, updated=None):
    names = functools.WRAPPER_ASSIGNMENTS if assigned is None else assigned.as_python_constant()
    dicts = functools.WRAPPER_UPDATES if updated is None else updated.as_python_constant()
    if not isinstance(wrapper, NestedUserFunctionVariable) or not all(isinstance(n, str) for n in names) or \
            tuple(dicts) not in ((), ("__dict__",)):
        raise GraphBreak(gb.UNSUPPORTED_CALL, f"functools.update_wrapper() of {wrapper.describe()}")
    for name in names:  # what update_wrapper does: the attributes wrapped has, then its __dict__
        try:
            value = wrapped.var_getattr(tx, name)
        except GraphBreak as e:
            if e.break_id != gb.MISSING_ATTRIBUTE:
                raise
            continue
        wrapper.setattr(tx, name, value)
    if dicts:
        for k, v in _function_dict_items(tx, wrapped).items():
            wrapper.setattr(tx, k, v)
    wrapper.setattr(tx, "__wrapped__", wrapped)
    return wrapper


@_py_handler(functools.wraps)
def _wraps(tx, wrapped, assigned=None, updated=None):
    # functools.wraps: partial(update_wrapper, wrapped=..., assigned=..., updated=...)
    kwargs = {"wrapped": wrapped,
              "assigned": assigned if assigned is not None else wrap_constant_result(functools.WRAPPER_ASSIGNMENTS),
              "updated": updated if updated is not None else wrap_constant_result(functools.WRAPPER_UPDATES)}
    return PartialVariable(tx.wrap(functools.update_wrapper, None), [], kwargs)


def _make_copy(deep):
    def impl(tx, obj, *memo):
        if memo and not (memo[0].is_python_constant() and memo[0].as_python_constant() is None):
            raise GraphBreak(gb.UNSUPPORTED_CALL, "copy.deepcopy() with a memo of the caller's")
        return copy_value(tx, obj, deep, {})
    return impl


_py_handler(copy.copy)(_make_copy(False))
_py_handler(copy.deepcopy)(_make_copy(True))


def _fold_text(fn):
    """re.sub / match / compile ..., textwrap.dedent / indent / ..., string.capwords with constant
    arguments: computed at trace time (pure functions; the result, a str, list, Pattern or Match,
    is immutable); a function argument (a repl callback, indent's predicate) breaks."""
    name = f"{fn.__module__}.{fn.__name__}"

    def impl(tx, *args, **kwargs):
        try:
            copies = [a.constant_copy() for a in args]
            kw = {k: v.constant_copy() for k, v in kwargs.items()}
        except NotImplementedError as e:
            raise GraphBreak(gb.VALUE_UNKNOWN, f"{name}() with arguments not known at trace time") from e
        if any(callable(c) for c in [*copies, *kw.values()]):
            raise GraphBreak(gb.UNSUPPORTED_CALL, f"{name}() with a function argument")
        try:
            value = fn(*copies, **kw)
        except Exception as e:  # noqa: BLE001 - Python raises it for real
            raise GraphBreak(gb.OPERATION_RAISES, f"{name}() raised {type(e).__name__}") from e
        return wrap_constant_result(value)
    return impl


for _fn in (re.compile, re.match, re.fullmatch, re.search, re.sub, re.subn, re.split, re.findall, re.escape,
            textwrap.dedent, textwrap.indent, textwrap.shorten, textwrap.wrap, textwrap.fill, string.capwords):
    _py_handler(_fn)(_fold_text(_fn))


@_handler(functools.cmp_to_key)
def _cmp_to_key(tx, cmp):
    return CmpToKeyVariable(cmp)


@_py_handler(typing.cast)
def _typing_cast(tx, typ, value):
    return value


def _typing_result(tx, value):
    """A result of typing.get_origin / get_args: a typing form, a class, None or a tuple of them."""
    if type(value) is tuple:
        return TupleVariable([_typing_result(tx, v) for v in value])
    if isinstance(value, type) or is_constant_value(value):
        return tx.wrap(value, None)  # immutable, computed from an immutable annotation
    raise GraphBreak(gb.VALUE_UNKNOWN, f"typing introspection gave a {type(value).__name__}")


def _make_typing_introspect(fn):
    def impl(tx, tp):
        """typing.get_origin / get_args of an annotation known at trace time (a typing form, a
        class, list[int], int | None): computed at trace time, annotations are immutable."""
        if not tp.is_python_constant():
            raise GraphBreak(gb.VALUE_UNKNOWN, f"typing.{fn.__name__}() of {tp.describe()}")
        return _typing_result(tx, fn(tp.as_python_constant()))
    return impl


for _fn in (typing.get_origin, typing.get_args):
    _py_handler(_fn)(_make_typing_introspect(_fn))


# types of the _HANDLERS keys (set once every handler is registered): see has_handler
_HANDLER_KEY_TYPES = frozenset(type(k) for k in _HANDLERS)
