"""Standard-library objects that model code reads, answered at trace time.

The standard library is not traced (skipfiles.py), so a call into it breaks
the graph.  A few read-only queries that real models make on every forward
are answered here instead, from the real value, with a guard on what was read:

- ``os.environ`` (``get``, ``[]``, ``in``): each key read is guarded on its value;
  writes break.
- ``inspect.signature(fn)`` of a function, bound method or module forward
  known at trace time: the real Signature (immutable) as a constant, so
  ``len(sig.parameters)`` and ``"name" in sig.parameters`` fold.  ``sig.bind(...)`` /
  ``bind_partial(...)`` make a BoundArgumentsVariable: the real Signature binds placeholders, so
  ``.arguments`` holds the argument trackers; ``.args``, ``.kwargs`` and ``apply_defaults()``
  run inspect's own code on placeholders (a default that is not a constant breaks).  A Signature
  read from the inputs (a closure, a global: einx keeps one per operation) is the same constant,
  guarded by identity (builder.py).  ``sig.parameters`` is the real mappingproxy of Parameters
  (constants; rebuilt as ``sig.parameters``); a Parameter's ``default`` / ``annotation`` is the
  real object when it is a constant, a class or a function, and breaks otherwise (a list default
  could be mutated behind the trace).
- ``copy.copy`` / ``copy.deepcopy`` (``copy_value``, registered by builtin.py) of what the trace
  models: constants, lists, tuples, dicts (OrderedDict, defaultdict), sets, and instances of plain
  user classes and dataclasses (config objects: ``__dict__`` state, no ``__copy__``/``__deepcopy__``/
  ``__reduce__``/``__setstate__`` of their own), following copy's protocol: a new object made by
  ``cls.__new__`` whose ``__dict__`` is the (deep-copied) state, memo shared so aliasing and cycles
  are kept.  Functions, classes and builtins are atomic (the copy is the object).  Tensors, modules
  and anything else break the graph, and Python copies them (for a tensor the reason names
  ``x.clone()``, which is traced).
- ``functools.singledispatch`` functions: ``fn(arg, ...)`` calls the implementation that
  ``fn.dispatch(type(arg))`` picks now, in the trace, guarded on picking it again.

- Python's ``random`` module, replayed with eager's state.  A call of the module's functions
  (``random.random()``, ``randint``, ``uniform``, ``choice``, ``gauss``, ``seed``, ``getstate``,
  ``setstate``, ...: bound methods of its hidden ``Random`` instance) is not made at trace time:
  it goes into ``OutputGraph.random_calls``, and generated code makes all of them, in trace
  order, before the graph (``runtime.random_draws``), so the numbers drawn and the module's state
  afterwards are eager's.  A drawn int is a SymInt graph input, a drawn float a 0-d float64
  input read with ``.item()`` (as backends expect floats), both symbols of shapes.py that are
  never guarded: tensor arithmetic on them stays in the graph; Python arithmetic and comparisons
  on draws (``+ - *``, ``<`` ...: none raises) are replayed before the graph too; code that needs
  a value (a branch, ``int()``, an index) breaks there (DL0050) and Python goes on with the
  drawn number.  Other results (``getstate()``'s tuple, ``choice`` of strings) are opaque:
  they can be returned, stored or passed to a later random call.  ``random.Random(seed)`` made
  in the frame with a constant seed is deterministic: its draws are computed at trace time on a
  private copy (constants; its ``shuffle`` of a list reorders the list's trackers), and the
  object, if it escapes, is rebuilt in its final state.
  A ``random.Random`` from outside the frame (an argument, a module's attribute) is guarded by
  identity and its calls are replayed like the module's.  Anything else of the module
  (``shuffle`` of a list made in the frame, arguments not known at trace time, a subclass of
  Random) breaks with DL0051.
- Classes made in the frame, which eager makes anew every time: ``collections.namedtuple(...)``,
  a ``class`` statement whose body runs the same twice (``build_class``), and
  ``dataclasses.dataclass`` on such a class.  The making call is replayed before the graph with
  the random calls (so every call of compiled code makes a new class, as eager does), and the
  trace models the class by a twin made now; codegen loads the run-time class wherever the twin
  (or an Enum member of it) would be (``PyCodegen.constant_sources``).

Tested by tests/torch/test_models.py (test_library_reads_*),
tests/semantics/test_functools_copy_identity.py (copy, singledispatch), tests/semantics/test_randomness.py (random),
tests/semantics/test_stdlib_modules.py (namedtuple) and tests/semantics/test_user_classes.py (class statements).
"""
from __future__ import annotations

import abc
import builtins
import collections
import copy
import dataclasses
import dis
import enum
import functools
import operator
import inspect
import os
import random
import types
import typing
from typing import Optional

import torch

from .. import graph_breaks as gb
from .. import bytecode_compat, runtime
from .. import guards
from ..source import AttrSource, RandomDrawSource, TypeSource
from ..exc import GraphBreak, InternalError
from .base import IdentityKey, VariableTracker
from .constant import CONSTANT_ATTR_HANDLERS, ConstantVariable, is_constant_value, NONE
from .folding import CONSTANT_METHOD_HANDLERS
from .functions import PYTHON_FUNCTION_MATCHERS, BaseUserFunctionVariable, NestedUserFunctionVariable, UserFunctionVariable, UserMethodVariable
from .mappings import DefaultDictVariable, DictVariable, MappingProxyVariable
from .methods import BoundMethodOfVariable, ContainerMethodVariable
from .nn_module import NNModuleVariable
from .sequences import LIST_TRACKERS, ListVariable, SizeVariable, TupleVariable
from .sets import SetVariable
from .tensor import SymNodeVariable, TensorVariable
from .user_objects import (
    InstanceDictVariable, mro_lookup, NamedTupleVariable, NewObjectVariable, UserDefinedClassVariable, UserDefinedObjectVariable,
)


class EnvironVariable(VariableTracker):
    """``os.environ``: reads of single keys, each guarded."""

    def python_type(self):
        return type(os.environ)

    def describe(self):
        return "os.environ"

    def _read(self, tx, key_var):
        if not key_var.is_python_constant() or not isinstance(key_var.as_python_constant(), str):
            raise GraphBreak(gb.VALUE_UNKNOWN, "os.environ key not known at trace time")
        key = key_var.as_python_constant()
        value = os.environ.get(key)
        tx.output.add_expr_guard(f"___sys.modules['os'].environ.get({key!r}) == {value!r}")
        return key, value

    def var_getattr(self, tx, name):
        if name in ("get", "__getitem__", "__contains__"):
            return ContainerMethodVariable(self, name)
        raise GraphBreak(gb.UNSUPPORTED_ATTRIBUTE, f"os.environ.{name}")

    def call_method(self, tx, name, args, kwargs):
        if kwargs or not args:
            raise GraphBreak(gb.UNSUPPORTED_CALL, f"os.environ.{name}() with these arguments")
        if name == "get" and len(args) <= 2:
            _, value = self._read(tx, args[0])
            return ConstantVariable(value) if value is not None else (args[1] if len(args) == 2 else NONE)
        if name == "__contains__" and len(args) == 1:
            _, value = self._read(tx, args[0])
            return ConstantVariable(value is not None)
        if name == "__getitem__" and len(args) == 1:
            key, value = self._read(tx, args[0])
            if value is None:
                raise GraphBreak(gb.OPERATION_RAISES, f"KeyError: {key!r}")
            return ConstantVariable(value)
        raise GraphBreak(gb.SIDE_EFFECT, f"os.environ.{name}() is not a plain read")

    def reconstruct(self, cg):
        if self.source is not None:
            return super().reconstruct(cg)
        cg.load_const(os)
        cg.load_attr("environ")

    def can_reconstruct(self):
        return True


class _Slot:
    """A placeholder standing for one argument while a real Signature binds them."""

    __slots__ = ("var",)

    def __init__(self, var):
        self.var = var


def _from_slots(value):
    """A bound value made of placeholders, back as trackers (a *args tuple, a **kwargs dict)."""
    if isinstance(value, _Slot):
        return value.var
    if type(value) is tuple:
        return TupleVariable([_from_slots(v) for v in value])
    if type(value) is dict:
        return DictVariable({k: _from_slots(v) for k, v in value.items()})
    if is_constant_value(value):
        return ConstantVariable(value)  # a parameter's default
    raise GraphBreak(gb.VALUE_UNKNOWN, f"a {type(value).__name__} default in inspect.BoundArguments")


def _to_slots(tx, sig, name, var):
    """An ``arguments`` value as placeholders (a *args / **kwargs value unpacked into them)."""
    param = sig.parameters.get(name)
    if param is not None and param.kind is param.VAR_POSITIONAL:
        if not isinstance(var, TupleVariable):
            raise GraphBreak(gb.UNSUPPORTED_CALL, "BoundArguments with a *args value that is not a tuple")
        return tuple(_Slot(v) for v in var.items)
    if param is not None and param.kind is param.VAR_KEYWORD:
        if type(var) is not DictVariable or not all(isinstance(k, str) for k in var.items):
            raise GraphBreak(gb.UNSUPPORTED_CALL, "BoundArguments with a **kwargs value that is not a dict of str keys")
        return {k: _Slot(v) for k, v in var.items.items()}
    return _Slot(var)


class BoundArgumentsVariable(VariableTracker):
    """``inspect.Signature.bind`` / ``bind_partial`` of a Signature known at trace time: the real
    signature binds placeholders (which parameter gets which argument depends only on how many
    there are and the keyword names), so ``.arguments`` is a dict tracker of the very argument
    trackers; ``.args`` / ``.kwargs`` / ``apply_defaults()`` run the real code on placeholders.

    Attributes:
        signature: the real inspect.Signature.
        arguments: the DictVariable of ``.arguments`` (apply_defaults replaces it by a new one).
    """

    mutable_local = True

    def __init__(self, signature: inspect.Signature, arguments: DictVariable):
        super().__init__()
        self.signature = signature
        self.arguments = arguments

    @staticmethod
    def bind(tx, const, name, args, kwargs):
        if name not in ("bind", "bind_partial"):
            return None
        sig = const.value
        try:
            bound = getattr(sig, name)(*[_Slot(a) for a in args], **{k: _Slot(v) for k, v in kwargs.items()})
        except TypeError as e:
            raise GraphBreak(gb.OPERATION_RAISES, f"Signature.{name}() raised TypeError: {e}") from e
        arguments = DictVariable({k: _from_slots(v) for k, v in bound.arguments.items()})
        return BoundArgumentsVariable(sig, arguments)

    def _real(self, tx):
        """A real BoundArguments of placeholders for the current ``arguments``."""
        if type(self.arguments) is not DictVariable or not all(isinstance(k, str) for k in self.arguments.items):
            raise GraphBreak(gb.UNSUPPORTED_CALL, "BoundArguments whose arguments are not a dict of str keys")
        return inspect.BoundArguments(self.signature, {
            k: _to_slots(tx, self.signature, k, v) for k, v in self.arguments.items.items()})

    def python_type(self):
        return inspect.BoundArguments

    def describe(self):
        return "inspect.BoundArguments object"

    def var_getattr(self, tx, name):
        if name == "arguments":
            return self.arguments
        if name == "signature":
            return ConstantVariable(self.signature)
        if name in ("args", "kwargs"):
            return _from_slots(getattr(self._real(tx), name))
        if name == "apply_defaults":
            return BoundMethodOfVariable(self, name)
        raise GraphBreak(gb.UNSUPPORTED_ATTRIBUTE, f"BoundArguments.{name}")

    def call_method(self, tx, name, args, kwargs):
        if name == "apply_defaults" and not args and not kwargs:
            real = self._real(tx)
            real.apply_defaults()
            self.arguments = DictVariable({k: _from_slots(v) for k, v in real.arguments.items()})
            return NONE
        raise GraphBreak(gb.UNSUPPORTED_CALL, f"BoundArguments.{name}()")

    def reconstruct(self, cg):
        cg.load_callable(inspect.BoundArguments)
        cg.load_const(self.signature)
        cg.reconstruct(self.arguments)
        cg.call(2)

    def can_reconstruct(self):
        return self.arguments.can_reconstruct()


CONSTANT_METHOD_HANDLERS[inspect.Signature] = BoundArgumentsVariable.bind


class SignatureParametersVariable(MappingProxyVariable):
    """``sig.parameters`` of a Signature known at trace time: the real read-only mapping of names to
    Parameters (immutable, as constants); rebuilt as ``sig.parameters``, the very same object."""

    def __init__(self, sig_var: ConstantVariable):
        params = sig_var.value.parameters
        # params.copy(): a copy of the mapping behind the proxy (an OrderedDict on 3.11)
        super().__init__(DictVariable({k: ConstantVariable(v) for k, v in params.items()},
                                      dict_type=type(params.copy())))
        self.sig_var = sig_var

    def reconstruct(self, cg):
        cg.reconstruct(self.sig_var)
        cg.load_attr("parameters")

    def can_reconstruct(self):
        return self.sig_var.can_reconstruct()


def _signature_attr(tx, const, name):
    if name == "parameters":
        return SignatureParametersVariable(const)
    if name == "return_annotation":
        return _fixed_value(tx, const.value.return_annotation, "Signature.return_annotation")
    return None


def _parameter_attr(tx, const, name):
    if name in ("default", "annotation"):
        return _fixed_value(tx, getattr(const.value, name), f"Parameter.{name}")
    return None


def _fixed_value(tx, value, what):
    """An attribute of an immutable Signature / Parameter: a constant, a class (``inspect._empty``,
    an annotation) or a function is that very object; anything else (a list default) may be mutated
    behind the trace's back, so it breaks."""
    if is_constant_value(value) or isinstance(value, (type, types.FunctionType)):
        return tx.wrap(value, None)
    raise GraphBreak(gb.VALUE_UNKNOWN, f"{what} is a {type(value).__name__}, not a constant")


CONSTANT_ATTR_HANDLERS[inspect.Signature] = _signature_attr
CONSTANT_ATTR_HANDLERS[inspect.Parameter] = _parameter_attr


class SignatureFunctionVariable(VariableTracker):
    """``inspect.signature``: evaluated on callables whose code is known at trace time."""

    def python_type(self):
        return types.FunctionType

    def describe(self):
        return "inspect.signature"

    def as_python_constant(self):
        return inspect.signature

    def is_python_constant(self):
        return True

    def call_function(self, tx, args, kwargs):
        if len(args) != 1 or kwargs:
            raise GraphBreak(gb.UNSUPPORTED_CALL, "inspect.signature() with options")
        fn = args[0]
        if isinstance(fn, UserFunctionVariable):
            return ConstantVariable(inspect.signature(fn.fn))
        if isinstance(fn, UserMethodVariable) and isinstance(fn.fn, types.FunctionType):
            sig = inspect.signature(fn.fn)
            params = list(sig.parameters.values())
            if not params or params[0].kind not in (params[0].POSITIONAL_ONLY, params[0].POSITIONAL_OR_KEYWORD):
                raise GraphBreak(gb.UNSUPPORTED_CALL, "inspect.signature() of a method without a self parameter")
            return ConstantVariable(sig.replace(parameters=params[1:]))
        if isinstance(fn, NNModuleVariable) and fn.source is not None:
            # signature of a callable instance: its __call__ (Module._wrapped_call_impl(*args, **kwargs))
            return ConstantVariable(inspect.signature(fn.value))
        raise GraphBreak(gb.UNSUPPORTED_CALL, f"inspect.signature() of {fn.describe()}")

    def reconstruct(self, cg):
        cg.load_const(inspect.signature)

    def can_reconstruct(self):
        return True


# ---- copy.copy / copy.deepcopy ----------------------------------------------------------
# what copy's protocol would find on the class (a method of the class's own, not object's, means
# the class copies itself its own way: Python runs it)
_COPY_HOOKS = ("__copy__", "__deepcopy__", "__reduce__", "__reduce_ex__", "__getstate__", "__setstate__",
               "__getnewargs__", "__getnewargs_ex__")
_ATOMIC = (BaseUserFunctionVariable, UserDefinedClassVariable)


def copy_value(tx, obj: VariableTracker, deep: bool, memo: dict) -> VariableTracker:
    """``copy.deepcopy(obj)`` (``deep``) or ``copy.copy(obj)`` as a tracker; ``memo``: id(tracker)
    -> its copy, shared by one deepcopy call (aliasing and cycles are kept, as copy's memo does)."""
    if id(obj) in memo:
        return memo[id(obj)]
    result = _copy_value(tx, obj, deep, memo)
    memo[id(obj)] = result
    return result


def _copy_value(tx, obj, deep, memo):
    builtin_types = (type(len), type(object.__init__), type("".join), type(object().__str__))
    if isinstance(obj, _ATOMIC) or (obj.is_python_constant() and isinstance(obj.as_python_constant(), builtin_types)):
        return obj  # copy's atomic types: functions, classes, builtins
    if type(obj) is ConstantVariable:
        value = obj.as_python_constant()
        copied = copy.deepcopy(value) if deep else copy.copy(value)
        return obj if copied is value else ConstantVariable(copied)
    if type(obj) in (TupleVariable, NamedTupleVariable, SizeVariable):
        items = [copy_value(tx, i, deep, memo) for i in obj.items] if deep else list(obj.items)
        if type(obj) is TupleVariable:
            # copy.copy(tuple) is the tuple; so is a deep copy whose items are their own copies
            return obj if all(a is b for a, b in zip(items, obj.items)) else TupleVariable(items)
        # a tuple subclass (namedtuple, torch.Size) is rebuilt by __reduce_ex__: a new object
        if type(obj) is NamedTupleVariable:
            return NamedTupleVariable(obj.tuple_type, items)
        return SizeVariable(items)
    if type(obj) in LIST_TRACKERS:
        new = ListVariable([])
        memo[id(obj)] = new  # before the items: a list that contains itself
        new.items = [copy_value(tx, i, deep, memo) if deep else i for i in obj.items]
        return new
    if type(obj) in (DictVariable, DefaultDictVariable) and obj.dict_type in (
            dict, collections.OrderedDict, collections.defaultdict):
        if deep and any(isinstance(k, IdentityKey) for k in obj.items):
            raise GraphBreak(gb.UNSUPPORTED_CALL, "copy.deepcopy() of a dict keyed by objects")
        new = DefaultDictVariable({}, obj.default_factory) if type(obj) is DefaultDictVariable else \
            DictVariable({}, dict_type=obj.dict_type)
        memo[id(obj)] = new
        new.items = {k: copy_value(tx, v, deep, memo) if deep else v for k, v in obj.items.items()}
        return new
    if type(obj) is SetVariable and obj.is_python_constant():
        if obj.frozen and not deep:
            return obj  # copy.copy(frozenset) is the frozenset; a deep copy is a new one
        return SetVariable(list(obj.items.values()), frozen=obj.frozen)
    if isinstance(obj, (UserDefinedObjectVariable, NewObjectVariable)):
        return _copy_object(tx, obj, deep, memo)
    if isinstance(obj, InstanceDictVariable):  # copy.deepcopy(self.__dict__): a plain dict
        new = DictVariable({})
        memo[id(obj)] = new
        new.items = {k: copy_value(tx, v, deep, memo) if deep else v for k, v in obj.items(tx).items()}
        return new
    what = f"copy.{'deepcopy' if deep else 'copy'}() of {obj.describe()}"
    if isinstance(obj, TensorVariable):
        # Tensor.__deepcopy__ copies the whole storage, offset and strides, grad and __dict__ (and
        # raises for non-leaves): Python runs it
        raise GraphBreak(gb.UNSUPPORTED_CALL, f"{what}: Python copies the tensor; x.clone() (or "
                         "x.detach().clone()) is traced instead")
    raise GraphBreak(gb.UNSUPPORTED_CALL, what)


def _copy_object(tx, obj, deep, memo):
    """A user object copied by copy's default protocol: ``cls.__new__(cls)``, then its ``__dict__``
    updated with the (deep-copied) state, without running ``__init__`` or ``__setattr__``."""
    cls = obj.value_type
    what = f"copy.{'deepcopy' if deep else 'copy'}() of {obj.describe()}"
    for name in _COPY_HOOKS:
        fn, owner = mro_lookup(cls, name)
        if fn is not None and owner is not object:
            raise GraphBreak(gb.UNSUPPORTED_CALL, f"{what}: the class defines {name}")
    if type(cls) not in (type, abc.ABCMeta) or mro_lookup(cls, "__new__")[1] is not object or \
            not getattr(cls, "__dictoffset__", 0) or any("__slots__" in k.__dict__ for k in cls.__mro__[:-1]) or \
            any(k.__module__ == "builtins" for k in cls.__mro__[:-1]):
        raise GraphBreak(gb.UNSUPPORTED_CALL, f"{what}: not a plain class with a __dict__")
    getattribute = mro_lookup(cls, "__getattribute__")[0]
    if isinstance(getattribute, types.FunctionType):
        # copy looks __deepcopy__ / __copy__ up through the class's own __getattribute__: run it
        try:
            obj.var_getattr(tx, "__deepcopy__" if deep else "__copy__")
        except GraphBreak as e:
            if e.break_id != gb.MISSING_ATTRIBUTE:
                raise
        else:
            raise GraphBreak(gb.UNSUPPORTED_CALL, f"{what}: its __getattribute__ gives a copy hook")
    elif getattribute is not object.__getattribute__:
        raise GraphBreak(gb.UNSUPPORTED_CALL, f"{what}: the class defines __getattribute__")
    state = dict(_object_state(tx, obj))
    # the copy's class is the original's: class attributes read through the copy are guarded
    # through the original's type (e.g. a strict dataclass's validators, read by its __setattr__)
    if isinstance(obj, NewObjectVariable):
        class_source = obj.class_source
    else:
        class_source = TypeSource(obj.source) if obj.source is not None else None
    new = NewObjectVariable(cls, class_source)
    tx.output.side_effects.track_new_object(new)
    memo[id(obj)] = new
    for name, value in state.items():
        tx.output.side_effects.store_attr(new, name, copy_value(tx, value, deep, memo) if deep else value)
    return new


def _object_state(tx, obj):
    """(name, tracker) of the instance ``__dict__`` of a user object as the trace sees it now."""
    if isinstance(obj, UserDefinedObjectVariable) and obj.source is None:
        raise GraphBreak(gb.VALUE_UNKNOWN, f"the state of {obj.describe()} (no source to guard it by)")
    return list(InstanceDictVariable(obj).items(tx).items())


# ---- random -------------------------------------------------------------------------------
# functions of the random module that draw numbers: name -> the Python type of the result
# (None: given by the sequence, for choice); all are methods of random.Random
_RANDOM_NUMBER_METHODS = {
    "random": float, "uniform": float, "gauss": float, "normalvariate": float, "lognormvariate": float,
    "expovariate": float, "triangular": float, "betavariate": float, "gammavariate": float,
    "vonmisesvariate": float, "paretovariate": float, "weibullvariate": float,
    "randint": int, "randrange": int, "getrandbits": int, "choice": None,
}
# other methods replayed as they are: their results are opaque (or None)
_RANDOM_OTHER_METHODS = {"seed": type(None), "setstate": type(None), "getstate": tuple, "sample": list,
                         "choices": list, "randbytes": bytes}
# methods that break with a reason: the order they leave a list in is drawn at run time
_RANDOM_BREAKING_METHODS = {"shuffle": "random.shuffle() reorders the list by numbers drawn at run time, and the "
                                       "trace would have to know the new order: Python runs it"}


def is_random_module_function(value) -> bool:
    """A function of the ``random`` module we replay: a bound method of its hidden Random
    instance that is Random's own (not replaced by a subclass or monkeypatch)."""
    if not isinstance(value, (types.BuiltinMethodType, types.MethodType)):
        return False  # (and no attribute of any other object is read)
    owner = getattr(value, "__self__", None)
    name = getattr(value, "__name__", None)
    if owner is not getattr(random, "_inst", None) or type(owner) is not random.Random:
        return False
    if name not in _RANDOM_NUMBER_METHODS and name not in _RANDOM_OTHER_METHODS and \
            name not in _RANDOM_BREAKING_METHODS:
        return False
    own = getattr(random.Random, name, None)
    return own is not None and (getattr(value, "__func__", None) is own or
                                (type(value) is type(random.random) and value == own.__get__(owner)))


def _plain_constant(value) -> bool:
    t = type(value)
    if t in (int, float, bool, str, bytes, type(None), range):
        return True
    if t in (tuple, list):
        return all(_plain_constant(v) for v in value)
    return False


class RandomDrawVariable(VariableTracker):
    """The opaque result of a replayed random call (a state tuple, a sample, a chosen string):
    the trace does not know it; it can be returned, stored or passed to a later random call."""

    def __init__(self, source: RandomDrawSource, value_type: type):
        super().__init__(source)
        self.value_type = value_type

    def python_type(self):
        return self.value_type

    def describe(self):
        return f"the result of random call {self.source.index}"

    def truthiness(self, tx):
        raise GraphBreak(gb.RANDOM_VALUE_NEEDED, f"the truth of {self.describe()} decides a branch")

    def var_getattr(self, tx, name):
        raise GraphBreak(gb.RANDOM_VALUE_NEEDED, f"{self.describe()} is read (.{name}): it is drawn at run time")

    def call_method(self, tx, name, args, kwargs):
        raise GraphBreak(gb.RANDOM_VALUE_NEEDED, f"{self.describe()} is used (.{name}()): it is drawn at run time")


class RandomNumberVariable(SymNodeVariable):
    """An int or float drawn by a replayed random call.  Its symbol (shapes.py) and graph input
    are made on first use by symbolic code (a backend such as AOTAutograd specialises float
    symbols that no graph input carries); returned or stored as it is, it is rebuilt from the
    draws."""

    def __init__(self, output, source: RandomDrawSource, result_type: type, hint):
        VariableTracker.__init__(self, source)
        self.shapes = output.shapes
        self.node = None
        self._output = output
        self._result_type = result_type
        self._hint = hint
        self._value = None

    @property
    def value(self):
        if self._value is None:
            self._value = self.shapes.random_symbol(self._hint, self.source)
        return self._value

    def make_node(self):
        output = self._output
        if self._result_type is int:  # a SymInt input
            return output.symbol_node(self.value.node.expr, self.source, self._hint, self.value)
        # a float is a 0-d float64 tensor input read with item() in the graph (OutputGraph.float_input)
        return output.float_input(RandomDrawSource(self.source.index, as_tensor=True), self._hint, self.value)

    def python_type(self):
        return self._result_type

    def describe(self):
        return f"a number drawn by random call {self.source.index}"

    def _repr_body(self):
        return f"draw {self.source.index}"

    def reconstruct(self, cg):
        self.source.reconstruct(cg)

    def truthiness(self, tx):
        raise GraphBreak(gb.RANDOM_VALUE_NEEDED, f"the truth of {self.describe()} decides a branch")

    def as_python_constant(self):
        raise GraphBreak(gb.RANDOM_VALUE_NEEDED, f"the value of {self.describe()} is needed at trace time")

    def replay_operator(self, tx, fn, args):
        """Python arithmetic or a comparison on drawn numbers (no tensor): replayed before the graph
        too, after the draws it reads (an operation that may raise breaks: Python raises it where
        eager does)."""
        if fn not in _REPLAYED_OPERATORS:
            raise GraphBreak(gb.RANDOM_VALUE_NEEDED, f"{getattr(fn, '__name__', fn)} on {self.describe()} "
                             "(it may raise, or needs the value)")
        call_args = tuple(_draw_ref(tx, a) for a in args)
        if not all(isinstance(a, runtime.DrawRef) or type(a) in (int, float, bool) for a in call_args):
            raise GraphBreak(gb.RANDOM_VALUE_NEEDED, f"{getattr(fn, '__name__', fn)} of {self.describe()} and "
                             "a value that is not a number")
        hint = fn(*[_draw_hint(tx, a) for a in call_args])
        result_type = type(hint)
        return _replayed_call(tx, fn, call_args, {}, result_type if result_type in (int, float) else object, hint)


def _draw_ref(tx, var):
    """A random call's argument: a DrawRef to an earlier draw, or a plain constant."""
    if isinstance(var.source, RandomDrawSource) and isinstance(var, (RandomDrawVariable, RandomNumberVariable)):
        return runtime.DrawRef(var.source.index)
    if var.is_python_constant():
        value = var.as_python_constant()
    else:
        try:  # a list made in the trace, of constants: the call sees it as it is now
            value = var.constant_copy()
        except (NotImplementedError, GraphBreak):
            raise GraphBreak(gb.RANDOM_NOT_REPLAYED, f"an argument of a random call is not known at trace "
                             f"time ({var.describe()})") from None
    if not _plain_constant(value):
        raise GraphBreak(gb.RANDOM_NOT_REPLAYED, f"an argument of a random call is not plain data "
                         f"({type(value).__name__})")
    return value


# operations on drawn numbers replayed before the graph: none of them raises on ints and floats
_REPLAYED_OPERATORS = {operator.add, operator.sub, operator.mul, operator.neg, operator.pos, operator.abs,
                       operator.iadd, operator.isub, operator.imul,
                       operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne}
# functions whose arguments may be earlier draws (they raise for no number)
_DRAWN_ARGUMENTS_OK = {"setstate", "uniform", "gauss", "normalvariate", "triangular"}


def _draw_hint(tx, arg):
    """The stand-in value of an argument (a drawn number's stand-in; constants are themselves)."""
    if isinstance(arg, runtime.DrawRef):
        hint = tx.output.random_calls[arg.index][3]
        if type(hint) not in (int, float):
            raise GraphBreak(gb.RANDOM_VALUE_NEEDED, f"arithmetic on the result of random call {arg.index}, "
                             "which is not a number")
        return hint
    return arg


def _check_call(fn, args, kwargs):
    """A replayed call must not raise (it runs before the graph, ahead of what precedes it):
    its arguments are checked on a private Random now; calls on earlier draws only where no
    number makes them raise."""
    if any(isinstance(a, runtime.DrawRef) for a in (*args, *kwargs.values())):
        if fn.__name__ not in _DRAWN_ARGUMENTS_OK:
            raise GraphBreak(gb.RANDOM_NOT_REPLAYED, f"random.{fn.__name__}() of a number drawn at run time")
        return
    try:
        getattr(random.Random(0), fn.__name__)(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - Python raises it where eager does
        raise GraphBreak(gb.OPERATION_RAISES, f"random.{fn.__name__}() raises {type(e).__name__}") from e


def _replayed_call(tx, fn, args, kwargs, result_type, hint=None):
    """Log a call made before the graph; its result as a tracker."""
    output = tx.output
    index = len(output.random_calls)
    if result_type in (int, float) and hint is None:
        hint = result_type(_draw_hint(tx, args[0]) if args else 0)
    output.random_calls.append((fn, args, kwargs, hint))
    if result_type is type(None):
        return NONE
    source = RandomDrawSource(index)
    if result_type in (int, float):
        return RandomNumberVariable(output, source, result_type, result_type(hint))
    return RandomDrawVariable(source, result_type)


def _hint(name, args):
    """A stand-in value of the right type for a draw (it decides nothing: nothing is guarded on it)."""
    if name in ("randint", "randrange") and args and type(args[0]) is int:
        return args[0] if name == "randint" or len(args) > 1 else 0
    return 2 if _RANDOM_NUMBER_METHODS.get(name) is int else 0.5


class RandomFunctionVariable(VariableTracker):
    """A function of the ``random`` module (a bound method of its hidden Random instance):
    calls are replayed before the graph (see the module docstring)."""

    def __init__(self, fn, source=None):
        super().__init__(source)
        self.fn = fn

    def python_type(self):
        return type(self.fn)

    def describe(self):
        return f"random.{self.fn.__name__}" if self.fn.__self__ is getattr(random, "_inst", None) else \
            f"Random.{self.fn.__name__}"

    def as_python_constant(self):
        return self.fn

    def is_python_constant(self):
        return True

    def call_function(self, tx, args, kwargs):
        name = self.fn.__name__
        if name in _RANDOM_BREAKING_METHODS:
            raise GraphBreak(gb.RANDOM_NOT_REPLAYED, _RANDOM_BREAKING_METHODS[name])
        if name == "seed" and not args and not kwargs:
            raise GraphBreak(gb.RANDOM_NOT_REPLAYED, "random.seed() without a seed (seeded from the system)")
        call_args = tuple(_draw_ref(tx, a) for a in args)
        call_kwargs = {k: _draw_ref(tx, v) for k, v in kwargs.items()}
        if name in _RANDOM_NUMBER_METHODS:
            result_type = _RANDOM_NUMBER_METHODS[name]
            if name == "choice":
                seq = call_args[0] if len(call_args) == 1 and not call_kwargs else None
                kinds = {type(v) for v in seq} if isinstance(seq, (list, tuple)) and seq else set()
                result_type = kinds.pop() if len(kinds) == 1 and kinds <= {int, float} else object
        else:
            result_type = _RANDOM_OTHER_METHODS[name]
        _check_call(self.fn, call_args, call_kwargs)
        return _replayed_call(tx, self.fn, call_args, call_kwargs, result_type,
                              _hint(name, call_args) if result_type is int else 0.5)

    def reconstruct(self, cg):
        if self.source is not None:
            return super().reconstruct(cg)
        cg.load_const(self.fn)

    def can_reconstruct(self):
        return True


class RandomSourcedObjectVariable(VariableTracker):
    """A ``random.Random`` from outside the frame (an argument, an attribute of a module),
    guarded by identity: its calls are replayed before the graph like the module's functions."""

    def __init__(self, rng: random.Random, source):
        super().__init__(source)
        self.rng = rng

    def python_type(self):
        return random.Random

    def describe(self):
        return f"random.Random {self.source.name()}"

    def var_getattr(self, tx, name):
        if name in _RANDOM_NUMBER_METHODS or name in _RANDOM_OTHER_METHODS or name in _RANDOM_BREAKING_METHODS:
            if name in vars(self.rng):
                raise GraphBreak(gb.RANDOM_NOT_REPLAYED, f"{self.describe()} has its own attribute {name!r}")
            tx.output.add_expr_guard(f"{name!r} not in {self.source.name()}.__dict__")
            return RandomFunctionVariable(getattr(self.rng, name))
        raise GraphBreak(gb.RANDOM_NOT_REPLAYED, f"attribute {name!r} of {self.describe()}")


class RandomClassVariable(VariableTracker):
    """``random.Random``: calling it with a constant seed makes a RandomObjectVariable."""

    def __init__(self, source=None):
        super().__init__(source)

    def python_type(self):
        return type

    def describe(self):
        return "random.Random"

    def as_python_constant(self):
        return random.Random

    def is_python_constant(self):
        return True

    def call_function(self, tx, args, kwargs):
        if kwargs or len(args) != 1 or not args[0].is_python_constant() or \
                type(args[0].as_python_constant()) not in (int, float, str, bytes):
            raise GraphBreak(gb.RANDOM_NOT_REPLAYED, "random.Random() without one constant seed (int, float, str, "
                             "bytes): its numbers are not known at trace time")
        return RandomObjectVariable(random.Random(args[0].as_python_constant()))

    def reconstruct(self, cg):
        if self.source is not None:
            return super().reconstruct(cg)
        cg.load_const(random.Random)

    def can_reconstruct(self):
        return True


class RandomObjectVariable(VariableTracker):
    """A ``random.Random(seed)`` made in the frame: its draws are known at trace time (computed on
    ``rng``, a private Random in the same state); rebuilt in its final state if it escapes."""

    mutable_local = True

    def __init__(self, rng: random.Random):
        super().__init__()
        self.rng = rng

    def python_type(self):
        return random.Random

    def describe(self):
        return "a random.Random made in the frame"

    def var_getattr(self, tx, name):
        if name in _RANDOM_NUMBER_METHODS or name in _RANDOM_OTHER_METHODS or name == "shuffle":
            return BoundMethodOfVariable(self, name)
        raise GraphBreak(gb.RANDOM_NOT_REPLAYED, f"attribute {name!r} of a random.Random made in the frame")

    def call_method(self, tx, name, args, kwargs):
        if name == "shuffle" and len(args) == 1 and not kwargs and type(args[0]) in LIST_TRACKERS:
            # the generator is known, so the order is: shuffle the indices as the list would be
            # shuffled (shuffle draws by the length only), then reorder the list's items
            lst = args[0]
            order = list(range(len(lst.items)))
            self.rng.shuffle(order)
            tx.output.side_effects.mutate(lst)
            lst.items[:] = [lst.items[i] for i in order]
            return NONE
        if name not in _RANDOM_NUMBER_METHODS and name not in _RANDOM_OTHER_METHODS:
            raise GraphBreak(gb.RANDOM_NOT_REPLAYED, _RANDOM_BREAKING_METHODS.get(name, f"random.Random.{name}()"))
        if name == "seed" and not args and not kwargs:
            raise GraphBreak(gb.RANDOM_NOT_REPLAYED, "Random.seed() without a seed (seeded from the system)")
        call_args = [a.as_python_constant() if a.is_python_constant() else None for a in args]
        call_kwargs = {k: v.as_python_constant() if v.is_python_constant() else None for k, v in kwargs.items()}
        if not all(_plain_constant(a) for a in call_args + list(call_kwargs.values())) or \
                None in call_args and name != "seed":
            raise GraphBreak(gb.RANDOM_NOT_REPLAYED, f"Random.{name}() with arguments not known at trace time")
        result = getattr(self.rng, name)(*call_args, **call_kwargs)
        return tx.wrap(result, None) if not isinstance(result, (list, tuple)) else ConstantVariable(result) \
            if all(_plain_constant(v) for v in result) else tx.wrap(result, None)

    def reconstruct(self, cg):
        cg.load_callable(runtime.make_random)
        cg.load_const(self.rng.getstate())
        cg.call(1)

    def can_reconstruct(self):
        return True


# ---- collections.namedtuple ---------------------------------------------------------------
class NamedTupleFactoryVariable(VariableTracker):
    """``collections.namedtuple``: a class made in the frame.  Eager makes a new class on every
    call, so generated code does too: the call is made before the graph (with the others of
    ``OutputGraph.random_calls``, ``module=`` the calling frame's module as namedtuple would
    find it), and the trace models the class with a twin made now from the same constant
    arguments; codegen loads the run-time class wherever the twin would be (the class, instances
    rebuilt after the graph), so each call's class is a new object, as in eager."""

    def python_type(self):
        return types.FunctionType

    def describe(self):
        return "collections.namedtuple"

    def as_python_constant(self):
        return collections.namedtuple

    def is_python_constant(self):
        return True

    def call_function(self, tx, args, kwargs):
        try:  # (lists of constants made in the trace: copies, which namedtuple only reads)
            values = [a.constant_copy() for a in args]
            options = {k: v.constant_copy() for k, v in kwargs.items()}
        except (NotImplementedError, GraphBreak):
            values = None
        if values is None or not all(_plain_constant(v) for v in values) or \
                not set(options) <= {"rename", "defaults", "module"} or \
                not all(_plain_constant(v) for v in options.values()):
            raise GraphBreak(gb.UNSUPPORTED_CALL, "collections.namedtuple() with arguments not known at trace time")
        if "module" not in options:
            options["module"] = getattr(tx, "f_globals", {}).get("__name__", "__main__")
        try:
            twin = collections.namedtuple(*values, **options)
        except Exception as e:  # noqa: BLE001 - Python raises it where eager does
            raise GraphBreak(gb.OPERATION_RAISES, f"collections.namedtuple() raises {type(e).__name__}") from e
        output = tx.output
        source = RandomDrawSource(len(output.random_calls))
        output.random_calls.append((collections.namedtuple, tuple(values), options, None))
        output.made_before_graph[id(twin)] = (twin, source)
        return UserDefinedClassVariable(twin)

    def reconstruct(self, cg):
        if self.source is not None:
            return super().reconstruct(cg)
        cg.load_const(collections.namedtuple)

    def can_reconstruct(self):
        return True


# ---- class statements ------------------------------------------------------------------------
# a class body made only of these runs the same at trace time and later (no call, no outside read)
_PLAIN_BODY_OPS = {"RESUME", "NOP", "LOAD_CONST", "STORE_NAME", "LOAD_NAME", *bytecode_compat.MAKE_FUNCTION_OPS,
                   *bytecode_compat.RETURNS, "MAKE_CELL", bytecode_compat.CLOSURE_LOAD_OP, "COPY", "BUILD_TUPLE", "SETUP_ANNOTATIONS", "STORE_SUBSCR",
                   "BUILD_CONST_KEY_MAP", "BUILD_MAP", "BUILD_LIST", "LIST_EXTEND"}
_PLAIN_METACLASSES = (type, abc.ABCMeta, enum.EnumType, typing.NamedTupleMeta)


def _plain_class_body(code, f_globals) -> Optional[str]:
    """Why running the class body ``code`` twice (for the twin now, for the class later) could
    differ from running it once, or None."""
    for inst in dis.get_instructions(code):
        if inst.opname not in _PLAIN_BODY_OPS:
            return f"its body runs {inst.opname} (line {inst.positions.lineno})"
        if inst.opname == "LOAD_NAME" and inst.argval not in ("__name__", "__annotations__") and \
                (inst.argval in f_globals or not hasattr(builtins, inst.argval) or
                 not isinstance(getattr(builtins, inst.argval), type)):
            return f"its body reads {inst.argval!r} (line {inst.positions.lineno})"
    if code.co_freevars:
        return "its methods close over variables of the function"
    return None


def build_class(tx, func, name, bases) -> VariableTracker:
    """``class name(*bases): ...`` inside compiled code.  Eager makes a new class object every
    time the statement runs; generated code does too: the statement's ``__build_class__`` is made
    before the graph (with the other calls of ``OutputGraph.random_calls``), and the trace models
    the class with a twin built now from the same body code and bases (codegen loads the run-time
    class, and enum members, wherever the twin's would be).  Only bodies that run the same both
    times (constants, plain methods, annotations of builtin types), bases whose metaclass is
    ``type``, ``ABCMeta`` or ``EnumType`` and that define no ``__init_subclass__``; otherwise the
    statement breaks with the reason."""
    what = "a class statement"
    if not isinstance(func, NestedUserFunctionVariable) or func.closure or func.defaults is not None or func.kwdefaults is not None:
        raise GraphBreak(gb.UNSUPPORTED_CALL, f"{what}: its body is not a plain function")
    if not name.is_python_constant() or type(name.as_python_constant()) is not str:
        raise GraphBreak(gb.UNSUPPORTED_CALL, f"{what}: its name is not known at trace time")
    class_name = name.as_python_constant()
    why = _plain_class_body(func.code, func.f_globals)
    if why is not None:
        raise GraphBreak(gb.UNSUPPORTED_CALL, f"class {class_name}: {why}; Python builds the class")
    output = tx.output
    refs, real = [], []
    for base in bases:
        value = base.as_python_constant() if base.is_python_constant() else None
        if not isinstance(value, type) and value is not typing.NamedTuple:  # (its __mro_entries__ is typing's)
            raise GraphBreak(gb.UNSUPPORTED_CALL, f"class {class_name}: a base is not a class known at trace time")
        made = output.made_before_graph.get(id(value))
        if made is not None and made[0] is value:
            refs.append(runtime.DrawRef(made[1].index))
        else:
            if base.source is not None:
                output.add_guard(guards.IdGuard(base.source, value))
            refs.append(value)
        real.append(value)
    resolved = types.resolve_bases(tuple(real))
    meta = type(resolved[0]) if resolved else type
    if meta not in _PLAIN_METACLASSES or any(type(b) is not meta and not issubclass(meta, type(b)) for b in resolved):
        raise GraphBreak(gb.UNSUPPORTED_CALL, f"class {class_name}: its metaclass {meta.__name__} may run any code")
    for base in resolved:
        if any("__init_subclass__" in vars(k) for k in base.__mro__ if k is not object):
            raise GraphBreak(gb.UNSUPPORTED_CALL, f"class {class_name}: base {base.__name__} defines "
                             "__init_subclass__; Python builds the class")
    try:
        twin = runtime.build_class(func.code, func.f_globals, class_name, *real)
    except Exception as e:  # noqa: BLE001 - Python raises it where eager does
        raise GraphBreak(gb.OPERATION_RAISES, f"class {class_name}: building it raises {type(e).__name__}") from e
    source = RandomDrawSource(len(output.random_calls))
    output.random_calls.append((runtime.build_class, (func.code, func.f_globals, class_name, *refs), {}, None))
    output.made_before_graph[id(twin)] = (twin, source)
    for member_name, member in getattr(twin, "__members__", {}).items():  # an Enum's members
        output.made_before_graph[id(member)] = (member, AttrSource(source, member_name))
    return UserDefinedClassVariable(twin)


class DataclassDecoratorVariable(VariableTracker):
    """``dataclasses.dataclass`` (or ``dataclass(**options)``) applied to a class made in the
    frame (see build_class): applied to the twin now, and to the run-time class before the graph."""

    def __init__(self, options: Optional[dict] = None, source=None):
        super().__init__(source)
        self.options = options  # None: the bare decorator

    def python_type(self):
        return types.FunctionType

    def describe(self):
        return "dataclasses.dataclass"

    def call_function(self, tx, args, kwargs):
        if self.options is None and not args:  # dataclass(frozen=True, ...): the decorator
            options = {k: v.as_python_constant() for k, v in kwargs.items() if v.is_python_constant()}
            if len(options) != len(kwargs) or not all(_plain_constant(v) for v in options.values()) or \
                    options.get("slots"):
                raise GraphBreak(gb.UNSUPPORTED_CALL, "dataclasses.dataclass() with these options")
            return DataclassDecoratorVariable(options)
        cls = args[0] if len(args) == 1 and not kwargs else None
        value = cls.as_python_constant() if isinstance(cls, UserDefinedClassVariable) else None
        made = tx.output.made_before_graph.get(id(value))
        if made is None or made[0] is not value:
            raise GraphBreak(gb.CALL_NOT_TRACED, "dataclasses.dataclass() of a class not made in the frame")
        options = dict(self.options or {})
        try:
            result = dataclasses.dataclass(value, **options)
        except Exception as e:  # noqa: BLE001 - Python raises it where eager does
            raise GraphBreak(gb.OPERATION_RAISES, f"dataclasses.dataclass() raises {type(e).__name__}") from e
        if result is not value:
            raise InternalError("dataclass() without slots returned a new class")
        tx.output.random_calls.append((_apply_dataclass, (runtime.DrawRef(made[1].index), options), {}, None))
        return cls

    def reconstruct(self, cg):
        if self.options is not None:
            raise GraphBreak(gb.UNSUPPORTED_CALL, "the decorator dataclass(...) escapes the frame")
        cg.load_const(dataclasses.dataclass)

    def can_reconstruct(self):
        return self.options is None


def _apply_dataclass(cls, options):
    return dataclasses.dataclass(cls, **options)


# ---- functools.singledispatch ----
# the code of the function singledispatch returns (its closure: the registry and dispatch)
_SINGLEDISPATCH_WRAPPER = functools.singledispatch(lambda arg: arg).__code__


def _singledispatch_handler(fn):
    """``fn(arg, ...)`` of a ``functools.singledispatch`` function: the implementation registered
    for ``type(arg)`` (``fn.dispatch``, run now on the real class) is called in the trace, guarded
    on dispatching to it again (a later ``register`` changes the answer)."""
    def handler(tx, args, kwargs):
        if not args:
            return None  # Python raises its TypeError: the wrapper is not inlined, the call breaks
        try:
            cls = args[0].python_type()
        except GraphBreak as e:
            raise GraphBreak(gb.VALUE_UNKNOWN, f"singledispatch function {fn.__name__}() of {args[0].describe()}, "
                             "whose class is not known at trace time") from e
        impl = fn.dispatch(cls)
        tx.output.add_guard(guards.ExprGuard("{f}.dispatch({c}) is {impl}", (("f", fn), ("c", cls), ("impl", impl))))
        return tx.wrap(impl, None).call_function(tx, list(args), kwargs)
    return handler


PYTHON_FUNCTION_MATCHERS.append(lambda fn: _singledispatch_handler(fn) if getattr(fn, "__code__", None)
                                is _SINGLEDISPATCH_WRAPPER and hasattr(fn, "dispatch") else None)


def library_variable(value, source):
    """The tracker for a library object modelled here, or None."""
    if value is os.environ:
        return EnvironVariable(source)
    if value is inspect.signature:
        return SignatureFunctionVariable(source)
    if value is random.Random:
        return RandomClassVariable(source)
    if value is collections.namedtuple:
        return NamedTupleFactoryVariable(source)
    if value is dataclasses.dataclass:
        return DataclassDecoratorVariable(None, source)
    if is_random_module_function(value):
        return RandomFunctionVariable(value, source)
    if type(value) is random.Random and source is not None:
        return RandomSourcedObjectVariable(value, source)
    return None


__all__ = ["EnvironVariable", "SignatureFunctionVariable", "library_variable", "copy_value", "is_random_module_function",
           "RandomFunctionVariable", "RandomClassVariable", "RandomObjectVariable", "RandomDrawVariable",
           "RandomNumberVariable", "NamedTupleFactoryVariable", "build_class"]
