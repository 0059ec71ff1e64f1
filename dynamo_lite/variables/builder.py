"""Wrapping real values read from outside the frame into trackers.

``wrap(tx, value, source)`` is the one entry point.  It picks the tracker kind
for the value, installs the guards the trace will rely on (type, identity,
constant value, length, tensor metadata), and makes every alias of the same
mutable object share one tracker, so mutations are seen through every name.
A few library objects get dedicated trackers: transformers' ModelOutput
classes and instances (model_output.py), ``os.environ`` and
``inspect.signature`` (stdlib.py), ``frozendict.frozendict`` (a read-only FrozenDictVariable,
its keys guarded like a dict's).
Tested by tests/unit/test_guards.py and tests/semantics/test_container_values.py.
"""
from __future__ import annotations

import builtins
import collections
import dataclasses
import enum
import functools
import inspect
import os
import random
import sys
import types
import weakref
from typing import Any, Optional

import numpy as np
import torch
from torch import nn

from .. import graph_breaks as gb
from .. import _C, guards, runtime, static
from ..exc import GraphBreak, SkipFrame
from ..source import (AttrSource, BuiltinSource, DictItemSource, DictValueSource, ItemSource, LocalSource, Source,
                      TupleItemSource,
                      from_resume_stack)
from .base import VariableTracker
from .constant import ConstantVariable, InputConstantVariable, is_constant_value
from ..skipfiles import skip_reason
from .builtin import BuiltinVariable, has_handler, is_builtin_callable
from .mappings import (
    CounterVariable, DefaultDictVariable, DictVariable, FrozenDictVariable, hash_key, hashes_by_identity,
    is_frozendict_class, ObjectKeyedDictVariable,
)
from .numpy_arrays import check_tensor_input, wrap_numpy_value
from .sequences import DequeVariable, InputDequeVariable, InputListVariable, ListVariable, SizeVariable, TupleVariable
from .user_objects import NamedTupleVariable
from .sets import SetVariable
from .functions import PartialVariable, python_function_handler, UserFunctionVariable, UserMethodVariable
from .stdlib import is_random_module_function, library_variable
from .contexts import GradModeExitVariable, GradModeVariable
from .objects import ObjectVariable, WeakRefVariable
from .methods import ContainerMethodVariable
from .python_modules import PythonModuleVariable
from .model_output import is_model_output_class, ModelOutputClassVariable, ModelOutputVariable
from .nn_module import NNModuleVariable, is_stateless_torch_module
from .tensor import symbolic_input, TensorVariable
from .autograd_function import (AssociativeScanVariable, AutogradFunctionClassVariable, CheckpointVariable,
                                FuncTransformVariable, is_associative_scan, is_autograd_function_class,
                                is_checkpoint, is_func_transform)
from .escape_hatches import escape_hatch_variable
from .torch_vars import DisabledFunctionVariable, FxProxyVariable, is_torch_class, is_torch_compile_wrapper, is_user_like_torch_class, is_torch_optimized_module, TorchVariable
from .user_objects import (
    DictSubclassObjectVariable, mro_lookup, plain_dict_subclass, UserDefinedClassVariable, UserDefinedObjectVariable,
)


def _identity_hashed(key) -> bool:
    """A dict key compared by identity or an immutable constant: a class whose metaclass keeps
    type's ``==``/hash, a typing form, a str/int/..., or a tuple of those (einx's backend table is
    keyed by tuples of tensor types)."""
    if type(key) is tuple:
        return all(map(_identity_hashed, key))
    if isinstance(key, type):
        return type(key).__eq__ is type.__eq__ and type(key).__hash__ is type.__hash__
    if type(key) is types.FunctionType or (type(key) is types.BuiltinFunctionType and (
            key.__self__ is None or isinstance(key.__self__, types.ModuleType))):
        return True  # a function (torch.relu, a user's activation): equal only to itself
    if isinstance(key, enum.Enum):  # a member (equal only to itself; hashed by its name)
        return mro_lookup(type(key), "__eq__")[1] in (object, enum.Enum) and \
            mro_lookup(type(key), "__hash__")[1] is enum.Enum
    return is_constant_value(key) and not isinstance(key, (float, complex))  # NaN != NaN


def _keyed_by_objects(d: dict) -> bool:
    """Does the dict hold a key hashed by identity that is not a class (an object: a memo
    table's)?  Read by dict's own iteration and the keys' types, no key's code."""
    return any(hashes_by_identity(type(k)) and not isinstance(k, type) for k in dict.keys(d))


def _immutable_value(value) -> bool:
    """A value the trace may take as a constant once it is guarded equal: a Python function (its
    ``==`` is identity), a class, or an immutable constant."""
    return isinstance(value, (types.FunctionType, type)) or (
        is_constant_value(value) and not isinstance(value, (float, complex)))  # NaN != NaN


def _is_torch_callable(value) -> bool:
    """A callable torch defines (read statically: the object is never asked)."""
    if isinstance(value, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return True
    if static.defined_in_torch(value) and callable(value):
        return True
    if isinstance(value, types.BuiltinFunctionType) and isinstance(value.__self__, types.ModuleType) and \
            static.is_torch_module_name(value.__self__.__name__):
        return True
    return False


def _submodule_of_structural(output, source: Source) -> bool:
    """``source`` is ``m._modules[name]`` of a module ``m`` guarded by its structure."""
    if type(source) is not ItemSource or type(source.parent) is not AttrSource or source.parent.attr != "_modules":
        return False
    parent = output.source_cache.get(source.parent.parent)
    return parent is not None and id(getattr(parent, "value", None)) in output.structural_modules


def wrap(tx, value: Any, source: Optional[Source]) -> VariableTracker:
    """The tracker for a real ``value`` found at ``source`` (None: a trusted constant place)."""
    output = tx.output
    if source is not None:
        cached = output.source_cache.get(source)
        if cached is not None:
            return cached
    var = _wrap(tx, value, source)
    if source is not None:
        output.source_cache[source] = var
    elif var.mutable_local or isinstance(var, UserDefinedObjectVariable):
        # a real object the trace reached by no path it can name (a class attribute, the closure
        # of a function it has no source for): changing it could not be replayed on the real one
        var.unreplayable = True
    return var


def _graph_input(output, source, value: torch.Tensor) -> TensorVariable:
    """The tracker of a real tensor that becomes a graph input."""
    check_tensor_input(output, source, value)  # not a view of an ndarray argument's memory
    node, fake = output.add_graph_input(source, value)
    var = TensorVariable(node, fake, source)
    var.real_type = type(value)
    output.set_real_value(var, value)
    return var


def _aliased(tx, value, source, make):
    """Return the tracker already made for this object, or make one."""
    output = tx.output
    existing = output.object_cache.get(id(value))
    if existing is not None and existing[0] is value:
        var = existing[1]
        if source is not None and var.source is not None and var.source != source:
            output.add_guard(guards.SameObjectGuard(source, var.source))
        return var
    var = make()
    output.object_cache[id(value)] = (value, var)
    return var


def _answers_attributes_in_python(cls: type) -> bool:
    """Instances of ``cls`` run Python on every attribute read, ``__class__`` included (a
    ``__getattribute__`` of a Python class): ``isinstance(obj, T)`` would run it whenever cls is
    not a T, so such objects are classified by their type alone."""
    for klass in type.__dict__["__mro__"].__get__(cls, type):
        found = vars(klass).get("__getattribute__")
        if found is not None:
            return isinstance(found, types.FunctionType)
    return False


def _wrap(tx, value, source):
    output = tx.output
    guard = output.add_guard if source is not None else (lambda *a, **k: None)
    cls = type(value)
    marked = escape_hatch_variable(value, source)  # allow_in_graph & co. (escape_hatches.py): before all else
    if marked is not None:
        guard(guards.IdGuard(source, value))
        return marked
    if _answers_attributes_in_python(cls) and not issubclass(cls, (type, torch.Tensor, nn.Module)):
        guard(guards.TypeGuard(source, cls))
        return _aliased(tx, value, source, lambda: UserDefinedObjectVariable(value, source))

    if value is os.environ or value is inspect.signature or value is random.Random or \
            value is collections.namedtuple or value is dataclasses.dataclass or is_random_module_function(value) or \
            (type(value) is random.Random and source is not None):
        guard(guards.IdGuard(source, value))
        return library_variable(value, source)
    if type(value) is types.BuiltinMethodType and source is not None and \
            type(value.__self__) in (list, dict, set, collections.deque, collections.OrderedDict):
        # a container's method loaded before a graph break (``out.append(f(x))`` with the break in
        # f): the resume function gets the bound method; it is that container's method, traced
        guard(guards.TypeGuard(source, types.BuiltinMethodType))
        guard(guards.ConstGuard(AttrSource(source, "__name__"), value.__name__))
        return ContainerMethodVariable(wrap(tx, value.__self__, AttrSource(source, "__self__")), value.__name__)
    if callable(value) and not isinstance(value, type) and _has_builtin_handler(value):
        guard(guards.IdGuard(source, value))
        return BuiltinVariable(value, source)
    if isinstance(value, torch.Tensor):
        if source is None:
            raise GraphBreak(gb.VALUE_UNKNOWN, "a tensor reached without a source (e.g. a class attribute) is not supported")
        if type(value) is not torch.Tensor and \
                getattr(type(value), "__torch_function__", None) is not torch._C._disabled_torch_function_impl:
            # a subclass whose ops return the subclass (Tensor.__torch_function__): fake values
            # would be plain tensors, so types and subclass overrides would differ from eager
            raise SkipFrame(gb.UNKNOWN_TYPE, f"tensor subclass {type(value).__qualname__} with __torch_function__",
                            permanent=False)
        return _aliased(tx, value, source, lambda: _graph_input(output, source, value))
    if type(value) is np.ndarray:  # a graph input (numpy_arrays.py)
        return _aliased(tx, value, source, lambda: wrap_numpy_value(tx, value, source, guard))
    if type(value).__module__.split(".")[0] == "numpy" or type(value) in _NUMPY_CALLABLE_TYPES or \
            type(value).__name__ == "cython_function_or_method":
        var = wrap_numpy_value(tx, value, source, guard)  # numpy scalars, dtypes, functions, ufuncs
        if var is not None:
            return var
    if isinstance(value, dict) and type(value) not in (dict,) and _is_model_output(value):
        if source is None:
            raise GraphBreak(gb.VALUE_UNKNOWN, "a ModelOutput reached without a source")
        return _aliased(tx, value, source, lambda: ModelOutputVariable.from_real(tx, value, source))
    if isinstance(value, torch.Size):
        guard(guards.ConstGuard(source, value))
        return SizeVariable([ConstantVariable(int(v)) for v in value], source)
    if isinstance(value, enum.Enum):
        guard(guards.IdGuard(source, value))
        return ConstantVariable(value, source)
    if type(value) is inspect.Signature and source is not None:
        # immutable, as one made in the trace by inspect.signature (stdlib.py binds it)
        guard(guards.IdGuard(source, value))
        return ConstantVariable(value, source)
    if type(value) in (int, float) and source is not None:
        symbolic = symbolic_input(tx, value, source)  # an int / float argument that is symbolic (shapes.py)
        if symbolic is not None:
            guard(guards.TypeGuard(source, type(value)))
            return symbolic
    if isinstance(value, np.integer) and source is not None and is_constant_value(value):
        # a numpy integer numpy_arrays.py does not model (np.uint32): its value guarded once used
        # (torchsde's noise seeds, passed on to a generator, need none: InputConstantVariable)
        guard(guards.TypeGuard(source, type(value)))
        return InputConstantVariable(value, source, lambda: guard(guards.ConstGuard(source, value)))
    if is_constant_value(value):
        if type(value) is float and value != value:  # NaN == NaN is False: a CONST guard would never pass
            if source is not None:
                guard(guards.NanGuard(source))
        else:
            guard(guards.ConstGuard(source, value))
        if type(value) is float and value == 0.0 and source is not None:  # 0.0 == -0.0: guard the sign too
            guard(guards.FloatReprGuard(source, repr(value)))
        return ConstantVariable(value, source)
    if type(value) is tuple or (isinstance(value, tuple) and hasattr(type(value), "_fields")):
        guard(guards.TypeGuard(source, type(value)))
        # a namedtuple class may define __len__ / __getitem__: guards and loads must not run them
        if type(value) is tuple or mro_lookup(type(value), "__len__")[1] is tuple:
            guard(guards.LengthGuard(source, len(value)))
        elif source is not None:
            guard(guards.ExprGuard(f"___builtins.tuple.__len__({source.name()}) == {tuple.__len__(value)}", (), source))
        item_source = ItemSource if type(value) is tuple or mro_lookup(type(value), "__getitem__")[1] is tuple \
            else TupleItemSource
        items = [wrap(tx, v, item_source(source, i) if source else None) for i, v in enumerate(tuple.__iter__(value))]
        if type(value) is tuple:
            return TupleVariable(items, source)
        return NamedTupleVariable(type(value), items, source)
    if type(value) in (list, collections.deque):
        def entry_items():  # (read when the trace first needs them: the lazy trackers below)
            guard(guards.LengthGuard(source, len(value)))
            return [wrap(tx, v, ItemSource(source, i) if source else None) for i, v in enumerate(value)]

        def make():
            guard(guards.TypeGuard(source, type(value)))
            if type(value) is list:
                return ListVariable(entry_items()) if source is None else InputListVariable(source, entry_items)
            if source is None:
                return DequeVariable(entry_items(), value.maxlen)
            guard(guards.ExprGuard(f"{source.name()}.maxlen == {value.maxlen!r}", (), source))
            return InputDequeVariable(value.maxlen, source, entry_items)
        return _aliased(tx, value, source, make)
    if type(value) in (dict, collections.OrderedDict, collections.defaultdict, collections.Counter):
        if all(type(k) in (str, int, bool, type(None), float) for k in value):
            def make():
                guard(guards.TypeGuard(source, type(value)))
                guard(guards.DictKeysGuard(source, tuple(value.keys())))
                items = {k: wrap(tx, v, ItemSource(source, k) if source else None) for k, v in value.items()}
                if type(value) is collections.Counter:  # a missing key counts 0
                    return CounterVariable(items, source)
                if type(value) is collections.defaultdict:  # a missing key calls the (guarded) factory
                    factory = wrap(tx, value.default_factory, AttrSource(source, "default_factory") if source else None)
                    return DefaultDictVariable(items, factory, source)
                return DictVariable(items, source, dict_type=type(value))
            return _aliased(tx, value, source, make)
        if type(value) is dict and source is not None and value and all(map(_identity_hashed, value)) \
                and all(map(_immutable_value, value.values())):
            # a table keyed by classes / typing forms ({list: validate_list, Union: ...}): its
            # whole contents are guarded in one check, so its keys and values are trace constants
            def make():
                guard(guards.TypeGuard(source, dict))
                guard(guards.ExprGuard(f"list({source.name()}.items()) == {{items}}",
                                       (("items", list(value.items())),), source))
                items = {hash_key(wrap(tx, k, None), "dict key"): wrap(tx, v, None) for k, v in value.items()}
                return DictVariable(items, source)
            return _aliased(tx, value, source, make)
        if type(value) is dict and source is not None and all(map(_identity_hashed, value)):
            # a table keyed by classes whose values are objects (einops' {tensor type: backend}):
            # its keys are guarded (identity, in order), each value is an input at its place
            def make():
                guard(guards.TypeGuard(source, dict))
                guard(guards.DictKeysGuard(source, tuple(value.keys())))
                items = {hash_key(wrap(tx, k, None), "dict key"): wrap(tx, v, DictValueSource(source, k, i))
                         for i, (k, v) in enumerate(value.items())}
                return DictVariable(items, source)
            return _aliased(tx, value, source, make)
        if type(value) is dict and source is not None and _keyed_by_objects(value):
            # a memo table (``cache[self]``): each key the trace looks up is guarded, not the whole
            def make():
                guard(guards.TypeGuard(source, dict))
                return ObjectKeyedDictVariable(value, source)
            return _aliased(tx, value, source, make)
        guard(guards.TypeGuard(source, type(value)))
        return ObjectVariable(value, source)
    if is_frozendict_class(type(value)) and source is not None and \
            all(type(k) in (str, int, bool, type(None), float) for k in value):
        def make():  # read-only: its items are guarded like a dict's
            guard(guards.TypeGuard(source, type(value)))
            guard(guards.DictKeysGuard(source, tuple(value.keys())))
            items = {k: wrap(tx, v, ItemSource(source, k)) for k, v in value.items()}
            return FrozenDictVariable(items, source, dict_type=type(value))
        return _aliased(tx, value, source, make)
    if type(value) in (set, frozenset):
        if all(is_constant_value(v) for v in value):
            def make():
                guard(guards.ConstGuard(source, frozenset(value))) if type(value) is frozenset else guard(
                    guards.SetEqualsGuard(source, frozenset(value)))
                guard(guards.SetOrderGuard(source, tuple(value)))  # (what iterating it, or folding it, sees)
                return SetVariable([ConstantVariable(v) for v in value], source, frozen=type(value) is frozenset,
                                   real=value)
            return _aliased(tx, value, source, make)
        guard(guards.TypeGuard(source, type(value)))
        return ObjectVariable(value, source)
    if is_torch_optimized_module(value):
        guard(guards.IdGuard(source, value))  # torch.compile(module): calls trace the module (torch_vars.py)
        return TorchVariable(value, source)
    if isinstance(value, (torch.jit.ScriptModule, torch.jit.ScriptFunction)):
        guard(guards.IdGuard(source, value))  # TorchScript runs it: calls break (torch_vars.py)
        return TorchVariable(value, source)
    if isinstance(value, nn.Module):
        if "_modules" not in vars(value) or "training" not in vars(value):
            # a module under construction (its __init__ before nn.Module.__init__ ran): a new object
            # every call, with no module state to trace yet; Python runs the frame
            raise SkipFrame(gb.MODULE_CREATED, f"{type(value).__qualname__} is being constructed "
                            "(nn.Module.__init__ has not run yet)")
        if source is not None and (is_stateless_torch_module(value) or from_resume_stack(source)
                                   or (type(source) is LocalSource and not getattr(
                                       type(value), "_dynamo_lite_optimized_module", False))
                                   or _submodule_of_structural(output, source)
                                   or output.shapes.object_changed(source, value)):
            # often made anew on every call (a loss built in forward, or any module whose
            # construction broke the graph and is handed to the resume function with its
            # submodules), passed to the frame (a module argument, the ``self`` of a method: any
            # module of that structure may come next, as torch.compile assumes; not the module
            # compile(module) made, called again and again, nor its submodules), or found to be
            # another module than at an earlier compile (the layers of a model read in turn from
            # a global or an attribute), or a submodule of one so guarded (the next layer's
            # submodules are other objects too): guard its type and structure, not its identity; the
            # Python attributes the trace reads are guarded through their sources, and parameters
            # and buffers are graph inputs guarded as tensors
            origin = runtime.MADE_CLASSES.get(type(value))
            if origin is not None:
                # its class was made by a class statement in compiled code, anew on every call:
                # guard that it was made by the same statement (code, globals, name, bases)
                guard(guards.ExprGuard(f"{{made}}.get(type({source.name()})) == {{origin}}",
                                       (("made", runtime.MADE_CLASSES), ("origin", origin)), source))
            else:
                guard(guards.TypeGuard(source, type(value)))
            for store in ("_parameters", "_buffers", "_modules"):
                guard(guards.DictKeysGuard(AttrSource(source, store), tuple(getattr(value, store))))
            output.structural_modules.add(id(value))
        else:
            guard(guards.IdGuard(source, value))
        if source is not None:
            output.module_sources.setdefault(id(value), source)
            guard(guards.IsGuard(source, ("training",), value.training))
        return _aliased(tx, value, source, lambda: NNModuleVariable(value, source))
    if is_checkpoint(value):
        guard(guards.IdGuard(source, value))
        return CheckpointVariable(value, source)
    if is_associative_scan(value):
        guard(guards.IdGuard(source, value))
        return AssociativeScanVariable(value, source)
    if is_func_transform(value):
        guard(guards.IdGuard(source, value))
        return FuncTransformVariable(value, source)
    if type(value) is types.FunctionType and value.__dict__.get("_dynamo_lite_disabled") == "frame":
        guard(guards.IdGuard(source, value))  # disable(fn, recursive=False): called, never inlined
        return DisabledFunctionVariable(value, source)
    if isinstance(value, types.FunctionType):
        if "<locals>" in value.__qualname__ and source is not None:
            # a nested function (lambda, closure, generator expression) is a new object on every
            # call of its maker: guard what it runs (code; defaults and cells are guarded when read)
            guard(guards.TypeGuard(source, types.FunctionType))
            guard(guards.IdGuard(AttrSource(source, "__code__"), value.__code__))
        else:
            guard(guards.IdGuard(source, value))
        if _is_torch_callable(value) and value.__module__.split(".")[0] == "torch" and not _inline_torch(value) \
                and python_function_handler(value) is None:  # (nn.Module.__call__ has a handler)
            return TorchVariable(value, source)
        if is_torch_compile_wrapper(value):  # its __module__ is the wrapped function's
            return TorchVariable(value, source)
        return UserFunctionVariable(value, source)
    if isinstance(value, types.MethodType) and value.__name__ == "__exit__" and \
            type(value.__self__) in (torch.no_grad, torch.enable_grad, torch.set_grad_enabled):
        # the __exit__ of an entered grad-mode block (e.g. a resume function inside `with no_grad()`)
        ctx = value.__self__
        prev = getattr(ctx, "prev", None)
        # the mode the block set (not always `not prev`: no_grad() inside no_grad())
        enabled = getattr(ctx, "mode", None) if type(ctx) is torch.set_grad_enabled else \
            type(ctx) is torch.enable_grad
        if isinstance(prev, bool) and isinstance(enabled, bool):
            if source is not None:
                guard(guards.ExprGuard(f"type({source.name()}.__self__) is {{t}} and "
                                       f"{source.name()}.__self__.prev is {prev!r} and "
                                       f"getattr({source.name()}.__self__, 'mode', {enabled!r}) is {enabled!r}",
                                       (("t", type(ctx)),), source))
            entered = GradModeVariable(enabled, type(ctx))
            entered.prev = prev
            return GradModeExitVariable(entered)
    if isinstance(value, types.MethodType):
        guard(guards.IdGuard(source, value.__func__)) if source is None else guard(
            guards.IsGuard(source, ("__func__",), value.__func__))
        self_var = wrap(tx, value.__self__, AttrSource(source, "__self__") if source else None)
        if isinstance(value.__func__, types.FunctionType):
            return UserMethodVariable(value.__func__, self_var, source)
        return ObjectVariable(value, source)
    if isinstance(value, functools.partial):
        return _aliased(tx, value, source, lambda: _wrap_partial(tx, value, source, guard))
    if isinstance(value, types.ModuleType):
        guard(guards.IdGuard(source, value))
        return PythonModuleVariable(value, source)
    if is_builtin_callable(value):
        guard(guards.IdGuard(source, value))
        return BuiltinVariable(value, source)
    if is_autograd_function_class(value):
        guard(guards.IdGuard(source, value))
        return AutogradFunctionClassVariable(value, source)
    if type(value) is _C.CallWithHookOff and value.__dict__.get("_dynamo_lite_disabled") is True:
        guard(guards.IdGuard(source, value))
        return DisabledFunctionVariable(value, source)
    if isinstance(value, torch.fx.Proxy):  # (a callable torch object, but every use of it records a node)
        guard(guards.TypeGuard(source, type(value)))
        return FxProxyVariable(value, source)
    if is_torch_class(value) or _is_torch_callable(value) and not is_user_like_torch_class(value):
        guard(guards.IdGuard(source, value))
        return TorchVariable(value, source)
    if isinstance(value, type):
        guard(guards.IdGuard(source, value))
        if _is_model_output(value):
            return ModelOutputClassVariable(value, source)
        return UserDefinedClassVariable(value, source)
    if isinstance(value, (torch.finfo, torch.iinfo)):
        return ConstantVariable(value, source)
    if isinstance(value, (types.BuiltinFunctionType, types.BuiltinMethodType, types.MethodWrapperType,
                          types.WrapperDescriptorType, types.MethodDescriptorType)):
        guard(guards.IdGuard(source, value))
        return BuiltinVariable(value, source)
    if isinstance(value, types.CellType):
        raise GraphBreak(gb.VALUE_UNKNOWN, "a raw closure cell")
    dict_base = plain_dict_subclass(type(value), python_overrides=True)
    if dict_base is not None and source is not None and \
            all(type(k) in (str, int, bool, type(None), float) for k in dict.keys(value)):
        # read the items without running an overriding __getitem__ (ClassInstantier's makes objects)
        item_source = ItemSource if mro_lookup(type(value), "__getitem__")[1] in (dict, collections.OrderedDict) \
            else DictItemSource

        def make():  # a dict subclass (Python overrides are inlined): its items are a dict's
            guard(guards.TypeGuard(source, type(value)))
            guard(guards.DictKeysGuard(source, tuple(dict.keys(value))))
            items = {k: wrap(tx, dict.__getitem__(value, k), item_source(source, k)) for k in dict.keys(value)}
            return DictSubclassObjectVariable(value, DictVariable(items, source, dict_type=dict_base), source)
        return _aliased(tx, value, source, make)
    if dict_base is dict and source is not None and mro_lookup(type(value), "__missing__")[1] is None and \
            _keyed_by_objects(value):
        def make():  # a dict subclass keyed by objects (torchsde's _LRUDict): looked up key by key
            guard(guards.TypeGuard(source, type(value)))
            return DictSubclassObjectVariable(value, ObjectKeyedDictVariable(value, source), source)
        return _aliased(tx, value, source, make)
    guard(guards.TypeGuard(source, type(value)))
    if type(value) is weakref.ReferenceType and source is not None:
        return _aliased(tx, value, source, lambda: WeakRefVariable(value, source))
    if type(value).__module__ == "builtins" or not hasattr(value, "__dict__") and not hasattr(type(value), "__slots__"):
        if source is not None:  # (one tracker per object: `a is b` is known, and guarded)
            return _aliased(tx, value, source, lambda: ObjectVariable(value, source))
        return ObjectVariable(value, source)
    return _aliased(tx, value, source, lambda: UserDefinedObjectVariable(value, source))


# numpy functions written in Python, builtin ones and ufuncs are typed outside numpy's modules
# (np.random.rand is a method of numpy's global RandomState)
_NUMPY_CALLABLE_TYPES = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, type)


def _wrap_partial(tx, value, source, guard):
    """A functools.partial read from the inputs: its func, args and keywords wrapped and guarded."""
    guard(guards.TypeGuard(source, functools.partial))
    fn = wrap(tx, value.func, AttrSource(source, "func") if source else None)
    args = [wrap(tx, a, ItemSource(AttrSource(source, "args"), i) if source else None)
            for i, a in enumerate(value.args)]
    guard(guards.LengthGuard(AttrSource(source, "args") if source else None, len(value.args)))
    kwargs = {k: wrap(tx, v, ItemSource(AttrSource(source, "keywords"), k) if source else None)
              for k, v in value.keywords.items()}
    if source is not None:
        guard(guards.DictKeysGuard(AttrSource(source, "keywords"), tuple(value.keywords)))
    return PartialVariable(fn, args, kwargs, source, value=value)


def _is_model_output(value) -> bool:
    """transformers' ModelOutput (a class or an instance) with ModelOutput's own behaviour."""
    cls = value if isinstance(value, type) else type(value)
    return "transformers" in sys.modules and is_model_output_class(cls)


def _has_builtin_handler(value) -> bool:
    return has_handler(value)  # never hashes a user object (its __hash__ may print or raise)


def _inline_torch(fn) -> bool:
    return skip_reason(fn.__code__.co_filename, fn.__name__, inline=True) is None


def wrap_builtin_name(tx, name: str) -> VariableTracker:
    """A builtin read by LOAD_GLOBAL (not shadowed by a global)."""
    value = getattr(builtins, name)
    tx.output.add_guard(guards.NotInGlobalsGuard(name))
    tx.output.add_guard(guards.IdGuard(BuiltinSource(name), value))  # (builtins.abs = ... replaces it)
    return wrap(tx, value, None) if not isinstance(value, type) or value.__module__ == "builtins" else wrap(
        tx, value, BuiltinSource(name))
