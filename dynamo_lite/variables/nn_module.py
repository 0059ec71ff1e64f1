"""nn.Module instances.

A module read from the frame's inputs (arguments, globals, attributes of other
modules) is guarded by identity and by its ``training`` flag (a module often made
anew on every call -- a stateless torch.nn one, or one a resume function gets on its
saved stack -- by its type and structure instead: variables/builder.py); its parameters and
buffers become graph inputs (placeholders) read through
``module._parameters[name]`` / ``module._buffers[name]``, so guards and generated
code avoid ``nn.Module.__getattr__`` and weight updates need no recompile.

- Attribute reads follow Python's order (class data descriptors, instance
  ``__dict__``, class attributes, then ``Module.__getattr__`` or the class's own
  ``__getattr__``, which is inlined).  Python values read from a module are
  guarded, so changing them recompiles.
- Calling a module inlines ``type(module).forward`` (torch.nn's own modules
  included), or the class's own ``__call__``.  Forward pre-hooks and forward
  hooks that are Python functions are inlined around ``forward`` in
  ``Module.__call__``'s order (a pre-hook's non-None result replaces the
  arguments, a forward hook's the result); the hook dicts' keys and each hook
  are guarded.  Backward hooks, global module hooks and hooks registered with
  ``with_kwargs``/``always_call`` break the graph (DL0013) and Python runs
  ``Module.__call__``, so hooks fire exactly as in eager; the absence of
  hooks is guarded, so a hook added later recompiles.  ``register_forward_hook``/
  ``register_forward_pre_hook`` called in the trace on an input module are replayed
  after the graph (variables/replayed.py); calling that module or reading its hook
  dicts later in the same trace stops the trace before the registration
  (``check_no_pending_hooks``).
- Sequential/ModuleList/ModuleDict/ParameterList: iteration, ``len``, indexing
  (negative and slices too), ``items/keys/values``; ``parameters()``,
  ``buffers()``, ``modules()``, ``children()`` and their ``named_`` forms.
- Modules built by the traced code: a stateless torch.nn one (``CrossEntropyLoss()``) is traced
  through a twin built now (FreshModuleVariable); a user class's instance has its ``__init__``
  traced, with nn.Module's own ``__init__``, ``__setattr__``, ``__getattr__``,
  ``register_buffer``, ``__call__``, ``train``/``eval`` and ``to`` answered here
  (NewModuleVariable); modules with weights of their own break (Python builds them).
- Writes: Python attributes are replayed after the graph (side effects);
  ``self.buf += 1`` on a buffer is the in-place op itself; assigning a new
  tensor to a buffer is replayed as ``setattr``; assigning parameters or
  submodules, and the state-changing methods (``train()``, ``to()``, ...), break.
Tested by tests/torch/test_nn_module.py (and the models of tests/torch/test_models.py).
"""
from __future__ import annotations

import collections
import inspect
import types
import warnings

import torch
import torch.fx
from torch import nn

from .. import graph_breaks as gb
from .. import guards
from .. import runtime
from ..exc import GraphBreak
from ..source import AttrSource, ItemSource, NthValueSource, TypeSource, attr_source
from .base import IdentityKey, VariableTracker
from .constant import ConstantVariable, NONE
from .user_objects import (bind_class_attribute, class_of, classmethod_of_descriptor, mro_lookup, guard_class_attr,
                           guard_function, NewObjectVariable, UserDefinedClassVariable)
from .mappings import DictVariable
from .sequences import ListIteratorVariable, TupleVariable
from .sets import SetVariable
from .functions import PYTHON_FUNCTION_MATCHERS, UserFunctionVariable, UserMethodVariable
from .methods import BoundMethodOfVariable
from .tensor import TensorVariable
from . import repeated_blocks


# what a forward (pre-)hook registration changes on the module
_HOOK_STATE = ("_forward_hooks", "_forward_pre_hooks", "_forward_hooks_with_kwargs", "_forward_hooks_always_called",
               "_forward_pre_hooks_with_kwargs", "__dict__")
_GLOBAL_HOOKS = ("_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks",
                 "_global_backward_pre_hooks")


def _is_none(var, what: str) -> bool:
    """Whether ``var`` is None, known at trace time (else the call breaks)."""
    if var.is_python_constant():
        return var.as_python_constant() is None
    try:
        t = var.python_type()
    except GraphBreak:
        t = None
    if isinstance(t, type) and t is not type(None):
        return False
    raise GraphBreak(gb.MODULE_HOOKS, f"{what} ({var.describe()}) may or may not be None")


def _global_hooks_present() -> bool:
    from torch.nn.modules import module as m

    return any(getattr(m, name, None) for name in _GLOBAL_HOOKS)


class NNModuleVariable(VariableTracker):
    """A real nn.Module (with a source) whose forward is inlined."""

    def identity_key(self):
        return IdentityKey(self, ("obj", id(self.value)))

    def __init__(self, value: nn.Module, source=None):
        super().__init__(source)
        self.value = value

    def _repr_body(self):
        return type(self.value).__name__

    def describe(self):
        return f"module {type(self.value).__name__}"

    def python_type(self):
        return type(self.value)

    # ---- attributes --------------------------------------------------------
    def var_getattr(self, tx, name):
        """``module.name`` in Python's order: data descriptors of the class, the instance
        ``__dict__``, other class attributes, then ``Module.__getattr__`` (parameters,
        buffers, submodules) or the class's own ``__getattr__``."""
        module = self.value
        cls = type(module)
        pending = tx.output.side_effects.load_attr(self, name)
        if pending is not None:
            return pending
        if name in _HOOK_STATE:
            self.check_no_pending_hooks(tx, f"reading .{name}")
        if mro_lookup(cls, "__getattribute__")[0] is not object.__getattribute__:
            raise GraphBreak(gb.UNSUPPORTED_ATTRIBUTE, f"{cls.__name__} defines __getattribute__")
        if name == "__class__":
            return class_of(tx, self, cls)
        src = self.source
        d = module.__dict__
        self._check_unchanged(tx, d, "__dict__")
        cls_attr, owner = mro_lookup(cls, name)
        # class attributes read below are guarded: `type(module).name` still holds the same object
        cls_src = AttrSource(TypeSource(src), name) if src is not None and cls_attr is not None else None
        if isinstance(cls_attr, property):
            if cls_attr.fget is None:
                raise GraphBreak(gb.MISSING_ATTRIBUTE, f"property {name!r} of {cls.__name__} has no getter")
            guard_class_attr(tx, cls_src, cls_attr)
            return UserFunctionVariable(cls_attr.fget, attr_source(cls_src, "fget")).call_function(tx, [self], {})
        if cls_attr is not None and hasattr(type(cls_attr), "__set__") and not isinstance(cls_attr, type):
            raise GraphBreak(gb.UNSUPPORTED_ATTRIBUTE, f"descriptor {name!r} of {cls.__name__}")
        if name in d:
            return tx.wrap(d[name], AttrSource(src, name) if src else None)
        stored = tx.output.side_effects.load_class_attr(cls, name)
        if stored is not None:  # the class attribute written earlier in the trace (never a descriptor)
            return stored
        if cls_attr is not None:
            if name in _MODULE_METHODS and owner.__module__.startswith("torch.nn.modules"):
                return BoundMethodOfVariable(self, name)  # answered by call_method
            if isinstance(cls_attr, (staticmethod, classmethod, types.FunctionType)):
                guard_class_attr(tx, cls_src, cls_attr)
            if isinstance(cls_attr, staticmethod):
                return UserFunctionVariable(cls_attr.__func__, cls_src)
            if isinstance(cls_attr, classmethod) and not isinstance(cls_attr.__func__, types.FunctionType):
                return classmethod_of_descriptor(tx, cls_attr, UserDefinedClassVariable(cls), name)
            if isinstance(cls_attr, classmethod):
                return UserMethodVariable(cls_attr.__func__, UserDefinedClassVariable(cls),
                                          fn_source=attr_source(cls_src, "__func__"))
            if isinstance(cls_attr, types.FunctionType):
                return UserMethodVariable(cls_attr, self, fn_source=cls_src)
            return bind_class_attribute(tx, self, cls, name, cls_attr, cls_src, owner)
        getattr_fn, _ = mro_lookup(cls, "__getattr__")
        if getattr_fn is not nn.Module.__getattr__:
            if isinstance(getattr_fn, types.FunctionType):
                return UserMethodVariable(getattr_fn, self).call_function(tx, [ConstantVariable(name)], {})
            raise GraphBreak(gb.UNSUPPORTED_ATTRIBUTE, f"{cls.__name__} defines __getattr__")
        return self.module_getattr(tx, name)

    def check_tables_unchanged(self, tx, *stores: str) -> None:
        """The module's real ``_parameters`` / ``_buffers`` / ``_modules`` are read below: break if
        the traced code wrote into one of them directly (``self._modules[k] = m``,
        ``ModuleList.insert``, ``del module_dict[k]``: replayed after the graph, so the real table
        is not yet what Python would read here)."""
        for store in stores:
            self._check_unchanged(tx, self.value.__dict__.get(store), store)

    def _check_unchanged(self, tx, table, what: str) -> None:
        if tx.output.written_in_trace(table):
            raise GraphBreak(gb.SIDE_EFFECT, f"{self.describe()}: reading {what} after the traced code changed it")

    def module_getattr(self, tx, name):
        """``nn.Module.__getattr__``: parameters, buffers and submodules."""
        self.check_tables_unchanged(tx, "_parameters", "_buffers", "_modules")
        d = self.value.__dict__
        src = self.source
        for store in ("_parameters", "_buffers", "_modules"):
            table = d.get(store)
            if table is not None and name in table:
                return tx.wrap(table[name], ItemSource(AttrSource(src, store), name) if src else None)
        raise GraphBreak(gb.MISSING_ATTRIBUTE, f"{type(self.value).__name__!r} object has no attribute {name!r}")

    def setattr(self, tx, name, value):
        module = self.value
        setattr_fn = type(module).__setattr__
        if setattr_fn is not nn.Module.__setattr__:
            # the class's own __setattr__ (a metric refusing its constants, then super().__setattr__,
            # which module_setattr answers with explicit=True): inlined, guarded on the class
            if not isinstance(setattr_fn, types.FunctionType):
                raise GraphBreak(gb.SIDE_EFFECT, f"{type(module).__name__}.__setattr__ is not a Python function")
            fn_src = AttrSource(TypeSource(self.source), "__setattr__") if self.source is not None else None
            if fn_src is not None:
                guard_function(tx, fn_src, setattr_fn)
            return UserMethodVariable(setattr_fn, self, fn_source=fn_src).call_function(
                tx, [ConstantVariable(name), value], {})
        return self.module_setattr(tx, name, value)

    def module_setattr(self, tx, name, value, explicit=False):
        """``nn.Module.__setattr__`` for the assignments a graph can hold.  ``explicit``: called as
        ``nn.Module.__setattr__(m, ...)`` (``super().__setattr__`` in a class defining its own): a
        plain attribute is replayed by ``object.__setattr__``, as nn.Module stores it (a
        ``setattr`` would run the class's own ``__setattr__`` again)."""
        module = self.value
        if explicit and (name in module._buffers or _is_module(value)):
            raise GraphBreak(gb.SIDE_EFFECT, f"nn.Module.__setattr__ of a buffer or submodule ({name!r}) called "
                                             "explicitly")
        if name in module._buffers and isinstance(value, TensorVariable):
            current = self.var_getattr(tx, name)
            if isinstance(current, TensorVariable) and current.example is value.example:
                return NONE  # `self.buf += 1`: the in-place result stored back, a no-op
            if self.source is None:
                raise GraphBreak(gb.SIDE_EFFECT, f"assigning buffer {name!r} of a module without a source")
            # replayed as setattr(module, name, tensor): Module.__setattr__ stores it in _buffers
            tx.output.side_effects.store_attr(self, name, value)
            return NONE
        if name in module._parameters or name in module._modules or name in module._buffers:
            raise GraphBreak(gb.SIDE_EFFECT, f"assigning a parameter, buffer or submodule ({name!r}) of a module")
        if isinstance(value, TensorVariable) and issubclass(value.python_type(), nn.Parameter):
            raise GraphBreak(gb.SIDE_EFFECT, f"assigning a parameter ({name!r}) registers it")
        if isinstance(value, NNModuleVariable):
            raise GraphBreak(gb.SIDE_EFFECT, f"assigning a submodule ({name!r})")
        tx.output.side_effects.store_attr(self, name, value, raw=explicit)
        return NONE

    def check_no_pending_hooks(self, tx, why: str) -> None:
        """A forward (pre-)hook registration on this module is replayed after the graph
        (variables/replayed.py), so the real hooks are still the old ones: the trace restarts
        to stop before the registration, and Python registers the hook there."""
        pending = tx.output.pending_module_hooks.get(id(self.value))
        if pending is not None:
            step, where, what = pending
            brk = GraphBreak(gb.SIDE_EFFECT, f"{what} followed by {why} of that module in the traced code: "
                             "Python registers the hook")
            brk.restart_step = step
            brk.user_stack = list(where)
            raise brk

    # ---- calls -------------------------------------------------------------
    def call_function(self, tx, args, kwargs):
        module = self.value
        self.check_no_pending_hooks(tx, "a call")
        call = type(module).__call__
        if getattr(type(module), "_dynamo_lite_disabled_module", False):  # (api.disable(module))
            raise GraphBreak(gb.USER_DISABLED, f"module {type(module).__bases__[1].__name__} is marked dynamo_lite.disable: "
                             "Python runs it without capture")
        # the class defines its own __call__ (an OptimizedModule's only switches capture on: inline forward;
        # api.OptimizedModule carries the marker, so this layer need not import the API)
        if call is not nn.Module.__call__ and not getattr(type(module), "_dynamo_lite_optimized_module", False):
            if _is_graph_module_call(module, call):
                # a torch.fx.GraphModule: its class's __call__ goes on to nn.Module.__call__ (hooks,
                # then the generated forward), only formatting an error on the way: the module
                # call below, with that __call__ guarded
                if self.source is not None:
                    guard_function(tx, AttrSource(TypeSource(self.source), "__call__"), call)
            elif isinstance(call, types.FunctionType):
                call_src = AttrSource(TypeSource(self.source), "__call__") if self.source is not None else None
                if call_src is not None:
                    guard_function(tx, call_src, call)
                return UserMethodVariable(call, self, fn_source=call_src).call_function(tx, args, kwargs)
            else:
                raise GraphBreak(gb.UNSUPPORTED_CALL, f"{type(module).__name__}.__call__ is not a Python function")
        return self.module_call(tx, args, kwargs)

    def module_call(self, tx, args, kwargs):
        """What ``nn.Module.__call__`` does: forward pre-hooks, forward, forward hooks."""
        module = self.value
        pre_hooks, post_hooks = self._forward_hooks(tx)
        if self.source is not None:
            empty = tuple(hooks for hooks in ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks",
                                              "_backward_pre_hooks")
                          if hasattr(module, hooks) and not getattr(module, hooks))
            if empty:
                tx.output.add_guard(guards.EmptyGuard(self.source, empty))
        # hooks registered on every module (register_module_forward_hook, ...) after this compile
        for hooks in _GLOBAL_HOOKS:
            tx.output.add_expr_guard(f"not ___sys.modules['torch.nn.modules.module'].{hooks}")
        forward, _ = mro_lookup(type(module), "forward")
        if not isinstance(forward, types.FunctionType):
            raise GraphBreak(gb.UNSUPPORTED_CALL, f"{type(module).__name__}.forward is not a Python function")
        if "forward" in module.__dict__:
            raise GraphBreak(gb.UNSUPPORTED_CALL, "forward replaced on the instance")
        forward_src = None
        if self.source is not None:  # ... and not replaced on the instance or the class after this compile
            tx.output.add_guard(guards.NotInDictGuard(self.source, "forward"))
            forward_src = AttrSource(TypeSource(self.source), "forward")
            guard_function(tx, forward_src, forward)
        if not pre_hooks and not post_hooks:
            return self._call_forward(tx, forward, forward_src, args, kwargs)
        # Module._call_impl with forward hooks: pre-hooks may replace the positional arguments,
        # forward hooks the result (a hook returning None keeps them)
        for hook in pre_hooks:
            new_args = hook.call_function(tx, [self, TupleVariable(list(args))], {})
            if not _is_none(new_args, "a forward pre-hook's result"):
                # a non-tuple result is the one argument
                args = list(new_args.unpack(tx)) if issubclass(new_args.python_type(), tuple) else [new_args]
        result = self._call_forward(tx, forward, forward_src, args, kwargs)
        for hook in post_hooks:
            hook_result = hook.call_function(tx, [self, TupleVariable(list(args)), result], {})
            if not _is_none(hook_result, "a forward hook's result"):
                result = hook_result
        return result

    def _call_forward(self, tx, forward, forward_src, args, kwargs):
        """``forward(self, *args, **kwargs)``: traced, or a repeated block's template replayed."""
        inner = repeated_blocks.unwrap_marked(forward)
        fn, fn_src = forward, forward_src
        if inner is not None:  # torch.compiler.nested_compile_region: the function it wraps
            fn_src = AttrSource(forward_src, repeated_blocks.TORCH_MARK) if forward_src is not None else None
            if fn_src is not None:
                guard_function(tx, fn_src, inner)
            fn = inner
        if not repeated_blocks.applies(self.value, forward):
            return UserFunctionVariable(fn, fn_src).call_function(tx, [self, *args], kwargs)
        return repeated_blocks.call_block(tx, self, UserFunctionVariable(fn, fn_src), args, kwargs)

    def _forward_hooks(self, tx):
        """(forward pre-hooks, forward hooks) of the module as trackers, in the order
        ``Module.__call__`` runs them; hooks it cannot run the same way break (DL0013).  The hook
        dicts' keys and each hook function are guarded, so adding or removing a hook recompiles."""
        module = self.value
        pre, post = getattr(module, "_forward_pre_hooks", None), getattr(module, "_forward_hooks", None)
        if not pre and not post:
            if (module._backward_hooks or getattr(module, "_backward_pre_hooks", None)
                    or _global_hooks_present()):
                raise GraphBreak(gb.MODULE_HOOKS, f"module {type(module).__name__} has backward hooks")
            return [], []
        name = type(module).__name__
        if self.source is None:
            raise GraphBreak(gb.MODULE_HOOKS, f"module {name} has forward hooks (module made in the trace)")
        if module._backward_hooks or getattr(module, "_backward_pre_hooks", None) or _global_hooks_present():
            raise GraphBreak(gb.MODULE_HOOKS, f"module {name} has backward hooks or global module hooks")
        for flags in ("_forward_hooks_with_kwargs", "_forward_hooks_always_called", "_forward_pre_hooks_with_kwargs"):
            if getattr(module, flags, None):
                raise GraphBreak(gb.MODULE_HOOKS, f"module {name} has forward hooks registered with "
                                                  "with_kwargs=True or always_call=True")
            if hasattr(module, flags):
                tx.output.add_expr_guard(f"not {AttrSource(self.source, flags).name()}")
        out = []
        for store, hooks in (("_forward_pre_hooks", pre), ("_forward_hooks", post)):
            trackers = []
            if hooks:
                if type(hooks) is not collections.OrderedDict or not all(type(k) is int for k in hooks):
                    raise GraphBreak(gb.MODULE_HOOKS, f"module {name}: {store} is not an OrderedDict of hook ids")
                src = AttrSource(self.source, store)
                tx.output.add_guard(guards.TypeGuard(src, collections.OrderedDict))
                # by position, not by hook id (ids are process-wide: another module with the same
                # hooks has other ids); each hook is guarded as the function it is
                tx.output.add_guard(guards.LengthGuard(src, len(hooks)))
                for i, hook in enumerate(hooks.values()):
                    if not isinstance(hook, types.FunctionType):
                        raise GraphBreak(gb.MODULE_HOOKS, f"module {name} has a hook that is not a Python "
                                                          f"function ({type(hook).__name__})")
                    trackers.append(tx.wrap(hook, NthValueSource(src, i)))
            out.append(trackers)
        return out[0], out[1]

    def guard_keys(self, tx, store: str) -> None:
        """Guard the names in ``module.<store>`` (_modules, _parameters, _buffers): code that walked
        them (iteration, parameters(), len) must see a module added or removed later."""
        self.check_tables_unchanged(tx, store)
        if self.source is not None:
            tx.output.add_guard(guards.DictKeysGuard(AttrSource(self.source, store), tuple(getattr(self.value, store))))

    def children_vars(self, tx) -> list[tuple[str, VariableTracker]]:
        self.check_tables_unchanged(tx, "_modules")
        self.guard_keys(tx, "_modules")
        out = []
        for key, child in self.value._modules.items():
            src = ItemSource(AttrSource(self.source, "_modules"), key) if self.source else None
            out.append((key, tx.wrap(child, src)))
        return out

    def unpack(self, tx):
        module = self.value
        if isinstance(module, (nn.Sequential, nn.ModuleList)):
            if self.source is not None:
                tx.output.add_guard(guards.LengthGuard(AttrSource(self.source, "_modules"), len(module._modules)))
            return [v for _, v in self.children_vars(tx)]
        if isinstance(module, nn.ModuleDict):
            return [ConstantVariable(k) for k, _ in self.children_vars(tx)]
        if isinstance(module, (nn.ParameterList,)):
            self.guard_keys(tx, "_parameters")
            return [self.var_getattr(tx, k) for k in module._parameters]
        raise GraphBreak(gb.UNSUPPORTED_ITERATION, f"iterating over {type(module).__name__}")

    def has_len(self):
        return isinstance(self.value, (nn.Sequential, nn.ModuleList, nn.ModuleDict, nn.ParameterList))

    def call_method(self, tx, name, args, kwargs):
        module = self.value
        if name == "__len__" and self.has_len():
            self.guard_keys(tx, "_parameters" if isinstance(module, nn.ParameterList) else "_modules")
            return ConstantVariable(len(module))
        if name == "__getitem__" and len(args) == 1 and args[0].is_python_constant():
            key = args[0].as_python_constant()
            if isinstance(module, nn.ModuleDict):
                pairs = dict(self.children_vars(tx))
                if key not in pairs:
                    raise GraphBreak(gb.OPERATION_RAISES, f"ModuleDict has no key {key!r}")
                return pairs[key]
            if isinstance(module, (nn.Sequential, nn.ModuleList)) and isinstance(key, slice):
                return ModuleSliceVariable(self, key, self.unpack(tx)[key])
            if isinstance(module, (nn.Sequential, nn.ModuleList)) and isinstance(key, int):
                items = self.unpack(tx)
                try:
                    return items[key]
                except IndexError as e:
                    raise GraphBreak(gb.OPERATION_RAISES, "module index out of range") from e
            if isinstance(module, nn.ParameterList) and isinstance(key, int):
                self.guard_keys(tx, "_parameters")
                if not -len(module) <= key < len(module):
                    raise GraphBreak(gb.OPERATION_RAISES, "ParameterList index out of range")
                return self.var_getattr(tx, str(key % len(module)))
            raise GraphBreak(gb.UNSUPPORTED_CALL, f"{type(module).__name__}[{key!r}]")
        if isinstance(module, nn.ModuleDict) and name in ("items", "keys", "values") and not args:
            pairs = self.children_vars(tx)
            if name == "keys":
                return ListIteratorVariable([ConstantVariable(k) for k, _ in pairs])
            if name == "values":
                return ListIteratorVariable([v for _, v in pairs])
            return ListIteratorVariable([TupleVariable([ConstantVariable(k), v]) for k, v in pairs])
        if name in ("children", "named_children") and not args:
            pairs = self.children_vars(tx)
            if name == "children":
                return ListIteratorVariable([v for _, v in pairs])
            return ListIteratorVariable([TupleVariable([ConstantVariable(k), v]) for k, v in pairs])
        if name in ("parameters", "named_parameters", "buffers", "named_buffers") and not kwargs and not args:
            kind = "_parameters" if "param" in name else "_buffers"
            items = []
            for prefix, sub in module.named_modules():
                sub_var = self._descendant(tx, prefix)
                if not isinstance(sub_var, NNModuleVariable):  # a TorchScript submodule: TorchScript holds them
                    raise GraphBreak(gb.UNSUPPORTED_CALL, f"Module.{name}() reaching {sub_var.describe()} "
                                     f"({prefix}): Python walks it")
                sub_var.guard_keys(tx, "_modules")  # (which modules and tensors there are is guarded)
                sub_var.guard_keys(tx, kind)
                for key, value in getattr(sub, kind).items():
                    if value is None:  # (skipped, as Python skips it: it must stay None)
                        if sub_var.source is not None:
                            tx.output.add_guard(guards.IsGuard(ItemSource(AttrSource(sub_var.source, kind), key),
                                                               (), None))
                        continue
                    var = sub_var.var_getattr(tx, key)
                    items.append(TupleVariable([ConstantVariable(f"{prefix}.{key}" if prefix else key), var])
                                 if name.startswith("named") else var)
            return ListIteratorVariable(_dedupe_by_identity(items, name.startswith("named")))
        if name in ("modules", "named_modules") and not args and not kwargs:
            items = []
            for prefix, sub in module.named_modules():
                var = self._descendant(tx, prefix)
                if not isinstance(var, NNModuleVariable):
                    raise GraphBreak(gb.UNSUPPORTED_CALL, f"Module.{name}() reaching {var.describe()} "
                                     f"({prefix}): Python walks it")
                var.guard_keys(tx, "_modules")
                items.append(TupleVariable([ConstantVariable(prefix), var]) if name == "named_modules" else var)
            return ListIteratorVariable(items)
        if name == "__setattr__" and len(args) == 2 and args[0].is_python_constant():
            return self.setattr(tx, args[0].as_python_constant(), args[1])
        if name == "eval" and not args and not kwargs:  # self.train(False): the class's own, if it has one
            return self.var_getattr(tx, "train").call_function(tx, [ConstantVariable(False)], {})
        if name == "train" and not kwargs:
            mode = _training_mode(args)
            if mode is not None:
                return self._set_training(tx, mode)
        if name == "zero_grad" and self._zero_grad_to_none(tx, args, kwargs):
            return NONE
        if name in ("train", "eval", "to", "cuda", "cpu", "apply", "zero_grad", "register_buffer",
                    "register_parameter", "add_module", "requires_grad_", "half", "float", "double"):
            raise GraphBreak(gb.SIDE_EFFECT, f"Module.{name}() changes module state")
        if name in _MODULE_METHODS:  # var_getattr sends these here: never back to var_getattr
            raise GraphBreak(gb.UNSUPPORTED_CALL, f"Module.{name}() with these arguments")
        return super().call_method(tx, name, args, kwargs)

    def _zero_grad_to_none(self, tx, args, kwargs) -> bool:
        """``module.zero_grad(set_to_none=True)`` (the default): ``p.grad = None`` for every parameter
        whose grad is set, replayed after the graph.  False (Python runs it) for ``set_to_none=False``
        (grads zeroed in place), a replica's call (it warns) or a class with its own ``zero_grad``."""
        flag = kwargs.get("set_to_none", args[0] if args else None)
        if len(args) + len(kwargs) > 1 or (kwargs and "set_to_none" not in kwargs) or (
                flag is not None and not (flag.is_python_constant() and flag.as_python_constant() is True)):
            return False
        module = self.value
        if mro_lookup(type(module), "zero_grad")[1] is not nn.Module or \
                inspect.getattr_static(module, "_is_replica", False):
            return False
        for p in self.call_method(tx, "parameters", [], {}).unpack(tx):
            grad = p.var_getattr(tx, "grad")
            if not (grad.is_python_constant() and grad.as_python_constant() is None):
                p.setattr(tx, "grad", NONE)
        return True

    def _set_training(self, tx, mode: bool) -> VariableTracker:
        """``nn.Module.train(mode)``: ``training`` set here (replayed after the graph, as any module
        attribute), then each child's own ``train(mode)`` called (an override of it is inlined)."""
        module = self.value
        self.guard_keys(tx, "_modules")  # (which children there are)
        self.setattr(tx, "training", ConstantVariable(mode))
        for key, child in module._modules.items():
            if child is None:
                continue
            child_var = self.var_getattr(tx, key)
            if not isinstance(child_var, NNModuleVariable):
                raise GraphBreak(gb.SIDE_EFFECT, f"Module.train() reaching {child_var.describe()} ({key})")
            child_var.var_getattr(tx, "train").call_function(tx, [ConstantVariable(mode)], {})
        return self

    def _descendant(self, tx, path: str) -> "NNModuleVariable":
        var = self
        if path:
            for part in path.split("."):
                var = var.var_getattr(tx, part)
        return var

    def reconstruct(self, cg):
        if self.source is None:
            cg.load_const(self.value)
            return
        super().reconstruct(cg)

    def can_reconstruct(self):
        return True


class ModuleSliceVariable(VariableTracker):
    """``seq[a:b]`` of a ModuleList/Sequential: a new container of the same modules.

    Answers len, iteration, indexing and (for Sequential) calls from the items;
    generated code rebuilds it by slicing the real container again (a new
    object, as in eager).
    """

    def __init__(self, parent: NNModuleVariable, key: slice, items: list):
        super().__init__()
        self.parent = parent
        self.key = key
        self.items = items

    def describe(self):
        return f"slice of {self.parent.describe()}"

    def python_type(self):
        return type(self.parent.value)

    def has_len(self):
        return True

    def len(self, tx):
        return len(self.items)

    def unpack(self, tx):
        return list(self.items)

    def call_method(self, tx, name, args, kwargs):
        if name == "__len__" and not args:
            return ConstantVariable(len(self.items))
        if name == "__iter__" and not args:
            return ListIteratorVariable(list(self.items))
        if name == "__getitem__" and len(args) == 1 and args[0].is_python_constant():
            key = args[0].as_python_constant()
            if isinstance(key, slice):
                return ModuleSliceVariable(self, key, self.items[key])
            if isinstance(key, int) and -len(self.items) <= key < len(self.items):
                return self.items[key]
        raise GraphBreak(gb.UNSUPPORTED_CALL, f"{name} on a slice of {type(self.parent.value).__name__}")

    def call_function(self, tx, args, kwargs):
        if not isinstance(self.parent.value, nn.Sequential) or type(self.parent.value).forward is not \
                nn.Sequential.forward or len(args) != 1 or kwargs:
            raise GraphBreak(gb.UNSUPPORTED_CALL, f"calling a slice of {type(self.parent.value).__name__}")
        value = args[0]
        for module in self.items:
            value = module.call_function(tx, [value], {})
        return value

    def reconstruct(self, cg):
        cg.reconstruct(self.parent)
        cg.load_const(self.key)
        cg.emit("BINARY_SUBSCR")

    def can_reconstruct(self):
        return self.parent.can_reconstruct()


def _is_graph_module_call(module, call) -> bool:
    """``call`` is the ``__call__`` GraphModule.recompile() puts on a GraphModule's class, and it
    ends in nn.Module.__call__: the class wraps no __call__ of its own and none is defined
    between it and nn.Module (all read statically)."""
    if not isinstance(module, torch.fx.GraphModule) or not isinstance(call, types.FunctionType):
        return False
    code = call.__code__
    if code.co_name != "call_wrapped" or code.co_filename != torch.fx.graph_module.__file__:
        return False
    cls = type(module)
    wrapped = vars(cls).get("_wrapped_call")
    if type(wrapped) is not torch.fx.graph_module._WrappedCall or wrapped.cls_call is not None \
            or wrapped.cls is not cls or "_wrapped_call" in module.__dict__:
        return False
    after = type.__dict__["__mro__"].__get__(cls, type)[1:]
    return next((k for k in after if "__call__" in vars(k)), None) is nn.Module


def _module_dunder_handler(kind):
    """``nn.Module.__getattr__(m, name)`` / ``__setattr__(m, name, v)``: called explicitly
    (``super().__getattr__(name)`` in a module defining its own), or reached by the attribute
    lookup and store of a module built in the trace (NewModuleVariable)."""
    def impl(tx, obj=None, name=None, *rest, **kwargs):
        if not isinstance(obj, (NNModuleVariable, NewModuleVariable)) or name is None or \
                not name.is_python_constant() or kwargs:
            return None
        if kind == "get" and not rest:
            return obj.module_getattr(tx, name.as_python_constant())
        if kind == "set" and len(rest) == 1:
            if isinstance(obj, NewModuleVariable):
                return obj.module_setattr(tx, name.as_python_constant(), rest[0])
            return obj.module_setattr(tx, name.as_python_constant(), rest[0], explicit=True)
        return None
    return impl


def _module_call_handler(tx, obj=None, *args, **kwargs):
    """``nn.Module.__call__(m, *args)`` called as a function (``super().__call__(x)`` in a module
    defining its own ``__call__``; compile(module)'s call with hooks, api.py): the module call,
    not the class's own ``__call__`` again."""
    if isinstance(obj, NewModuleVariable):
        return obj.module_call(tx, list(args), kwargs)
    if not isinstance(obj, NNModuleVariable):
        return None
    obj.check_no_pending_hooks(tx, "a call")
    return obj.module_call(tx, list(args), kwargs)


def _module_train(tx, obj, args: list, kwargs: dict):
    """``nn.Module.train(m, mode)`` called as a function (``super().train(mode)`` in a class that
    overrides it to keep a part frozen), on a module built in the trace or one from outside."""
    if isinstance(obj, NewModuleVariable):
        return obj.module_train(tx, args, kwargs)
    if isinstance(obj, NNModuleVariable) and not kwargs:
        mode = _training_mode(args)
        return None if mode is None else obj._set_training(tx, mode)
    return None


# nn.Module.__getattr__/__setattr__/__call__ called as functions (``nn.Module.__getattr__(self, name)``):
# builtin.py registers these in functions.PYTHON_FUNCTION_HANDLERS
MODULE_FUNCTION_HANDLERS = {
    nn.Module.__call__: _module_call_handler,
    nn.Module.__getattr__: _module_dunder_handler("get"),
    nn.Module.__setattr__: _module_dunder_handler("set"),
    nn.Module.register_buffer: lambda tx, obj=None, *args, **kwargs: (
        obj.register_buffer(tx, list(args), kwargs) if isinstance(obj, NewModuleVariable) else None),
    nn.Module.train: lambda tx, obj=None, *args, **kwargs: _module_train(tx, obj, list(args), kwargs),
    nn.Module.eval: lambda tx, obj=None, *args, **kwargs: (  # ``return self.train(False)``
        obj.var_getattr(tx, "train").call_function(tx, [ConstantVariable(False)], {})
        if isinstance(obj, (NewModuleVariable, NNModuleVariable)) and not args and not kwargs else None),
    nn.Module.to: lambda tx, obj=None, *args, **kwargs: (
        obj.module_to(tx, list(args), kwargs) if isinstance(obj, NewModuleVariable) else None),
}


# nn.Module methods answered by NNModuleVariable.call_method (when the class does not override them)
_MODULE_METHODS = frozenset({
    "parameters", "named_parameters", "buffers", "named_buffers", "modules", "named_modules",
    "children", "named_children", "train", "eval", "to", "cuda", "cpu", "apply", "zero_grad",
    "register_buffer", "register_parameter", "add_module", "requires_grad_", "half", "float", "double",
})


def _training_mode(args: list) -> Optional[bool]:
    """The mode of ``m.train(...)`` when the trace knows it as a bool (None: Python runs the
    call, which raises for a mode that is not a bool)."""
    if not args:
        return True
    if len(args) == 1 and args[0].is_python_constant() and type(args[0].as_python_constant()) is bool:
        return args[0].as_python_constant()
    return None


def _dedupe_by_identity(items, named):
    seen = set()
    out = []
    for item in items:
        var = item.items[1] if named else item
        key = id(getattr(var, "node", var))
        if key in seen:
            continue
        seen.add(key)
        out.append(item)
    return out


__all__ = ["NNModuleVariable"]


# ---- modules the traced code builds -------------------------------------------------------
_FRESH_MODULE_PACKAGE = "torch.nn.modules."


def is_stateless_torch_module(module: nn.Module) -> bool:
    """A module of torch.nn's own classes holding no parameters, buffers or submodules
    (CrossEntropyLoss(), GELU(), Dropout(p)): everything it does follows from its class and
    its Python attributes."""
    return (_built_by_torch_nn(type(module)) and not module._modules
            and all(v is None for v in module._parameters.values())
            and all(v is None for v in module._buffers.values()))


def _built_by_torch_nn(cls: type) -> bool:
    """Constructing ``cls`` runs only torch.nn's code: a torch.nn module class, or a subclass of
    one (a library's activation, ``class SiLUActivation(nn.Module)`` with just a forward) that
    defines no ``__init__``, ``__new__``, ``__setattr__`` or metaclass of its own."""
    if cls.__module__.startswith(_FRESH_MODULE_PACKAGE):
        return True
    if type(cls) is not type or not issubclass(cls, nn.Module):
        return False
    for name in ("__init__", "__new__", "__setattr__", "__getattr__", "__init_subclass__"):
        _, owner = mro_lookup(cls, name)
        if owner is not None and owner is not object and not owner.__module__.startswith(_FRESH_MODULE_PACKAGE):
            return False
    return True


def build_fresh_module(tx, cls: type, args: list, kwargs: dict):
    """``cls(*args, **kwargs)`` for a module class called in traced code whose construction is
    torch.nn's own (``_built_by_torch_nn``): a FreshModuleVariable when the arguments are
    constants and the module is stateless (built once now, from the same arguments, to be
    traced); None: Python must build it."""
    if not _built_by_torch_nn(cls):
        return None
    if not all(a.is_python_constant() for a in [*args, *kwargs.values()]):
        return None
    const_args = tuple(a.as_python_constant() for a in args)
    const_kwargs = {k: v.as_python_constant() for k, v in kwargs.items()}
    # built on the meta device with the RNG state put back: a module with weights (not stateless,
    # so Python builds it) must not draw from the generator or allocate here
    with warnings.catch_warnings(record=True) as caught, torch.random.fork_rng(devices=[]), torch.device("meta"):
        warnings.simplefilter("always")
        try:
            module = cls(*const_args, **const_kwargs)
        except Exception:  # noqa: BLE001 - Python raises it when it runs the call
            return None
    if caught or not is_stateless_torch_module(module):
        return None  # a warning eager would show on every call, or state (weights) of its own
    return FreshModuleVariable(module, const_args, const_kwargs)


class FreshModuleVariable(NNModuleVariable):
    """A stateless torch.nn module built by the traced code (``loss_fct = CrossEntropyLoss()`` in
    forward).  It is traced through a twin built at trace time from the same constant arguments;
    if it outlives the graph, generated code calls the class again, so each call makes a new
    object as in eager, and attribute writes are replayed on it."""

    def __init__(self, value: nn.Module, args: tuple, kwargs: dict):
        super().__init__(value, None)
        self.args = args
        self.kwargs = kwargs

    @property
    def mutable_local(self) -> bool:
        return True  # one object, however many places refer to it

    def reconstruct(self, cg):
        attrs = cg.side_effects.new_object_attrs(self)  # (writes the trace made on it)
        if attrs:
            cg.load_callable(runtime.with_attrs)
        cg.load_callable(type(self.value))
        for a in self.args:
            cg.load_const(a)
        for v in self.kwargs.values():
            cg.load_const(v)
        cg.call(len(self.args) + len(self.kwargs), tuple(self.kwargs))
        if attrs:
            for name, value in attrs.items():
                cg.load_const(name)
                cg.reconstruct(value)
            cg.emit("BUILD_MAP", len(attrs))
            cg.load_const(tuple(name for name in attrs if cg.side_effects.is_raw_store(self, name)))
            cg.call(3)


VariableTracker.build_module = staticmethod(build_fresh_module)  # see VariableTracker.build_module


def _is_module_init(fn) -> bool:
    """``fn`` is nn.Module.__init__: torch's own, or the wrapper TorchDynamo puts in its place once
    torch.compile has been used in the process (it calls the original, then tags the module for
    its own bookkeeping).  Read statically: the wrapper is recognised, never called here."""
    for _ in range(4):
        if type(fn) is not types.FunctionType:
            return False
        code = fn.__code__
        if fn.__qualname__ == "Module.__init__" and code.co_filename == nn.modules.module.__file__:
            return True
        if code.co_name != "patched_init" or "init" not in code.co_freevars or \
                not str(fn.__module__).startswith("torch."):
            return False
        fn = fn.__closure__[code.co_freevars.index("init")].cell_contents
    return False


def _module_init_handler(tx, args: list, kwargs: dict):
    if not args or not isinstance(args[0], NewModuleVariable):
        return None
    return args[0].module_init(tx, args[1:], kwargs)


PYTHON_FUNCTION_MATCHERS.append(lambda fn: _module_init_handler if _is_module_init(fn) else None)
VariableTracker.new_module_object = staticmethod(lambda cls, class_source: NewModuleVariable(cls, class_source))


# ---- user modules the traced code builds --------------------------------------------------
_REGISTRATION_HOOKS = {"_modules": "_global_module_registration_hooks",
                       "_buffers": "_global_buffer_registration_hooks"}
_CALL_HOOKS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks",
               "_forward_hooks_with_kwargs", "_forward_hooks_always_called", "_forward_pre_hooks_with_kwargs")
_INIT_FIELDS: list = []


def _module_init_fields() -> list:
    """(name, value) of what ``nn.Module.__init__`` sets, in its order, for the running torch:
    read once from a module it builds (torch's code only)."""
    if not _INIT_FIELDS:
        _INIT_FIELDS.extend(nn.Module().__dict__.items())
    return _INIT_FIELDS


def _fresh_field(tx, name: str, value):
    """A tracker of a new, empty copy of the nn.Module field ``value``."""
    if value is None or type(value) is bool:
        return ConstantVariable(value)
    if type(value) in (dict, collections.OrderedDict) and not value:
        return DictVariable({}, dict_type=type(value))
    if type(value) is set and not value:
        return SetVariable([], tx=tx)
    raise GraphBreak(gb.UNSUPPORTED_CALL, f"nn.Module.__init__ of this torch sets {name} to a "
                                          f"{type(value).__name__}: Python builds the module")


def _is_module(var) -> bool:
    if isinstance(var, (NNModuleVariable, NewModuleVariable)):
        return True
    try:
        cls = var.python_type()
    except GraphBreak:
        return False
    return isinstance(cls, type) and issubclass(cls, nn.Module)


def _is_parameter(var) -> bool:
    try:
        cls = var.python_type()
    except GraphBreak:
        return False
    return isinstance(cls, type) and issubclass(cls, (nn.Parameter, nn.Buffer))


class NewModuleVariable(NewObjectVariable):
    """An instance of a user nn.Module subclass built by the traced code (``head = Head(dim)`` in
    forward, ``BoxBlur((3, 3))(img)`` in a test).  Its ``__init__`` is traced; nn.Module's own
    ``__init__``, ``__setattr__``, ``__getattr__``, ``register_buffer`` and ``__call__`` are
    answered here, with the tables they fill (``_parameters``, ``_buffers``, ``_modules``, the
    hook dicts) as trackers among the object's attributes, set in ``nn.Module.__init__``'s order.
    So, when it outlives the graph, it is rebuilt as any object made in the trace
    (``object.__new__`` and its ``__dict__``, runtime.new_object): the same ``__dict__``, in the
    same order, as eager's.  Parameters (a ``nn.Parameter`` assigned, a torch.nn layer with
    weights built inside), hooks, and nn.Module's other methods (``to``, ``train``, ...) break:
    Python runs them on the rebuilt module."""

    def describe(self):
        return f"new module {self.value_type.__name__}"

    def reconstruct(self, cg):
        """``runtime.fill_module``: the attributes set before nn.Module.__init__ ran, the process's
        nn.Module.__init__ itself (as eager called it: its usage log, TorchDynamo's tag if
        torch.compile patched it), then the rest, each in the trace's order."""
        attrs = cg.side_effects.new_object_attrs(self)
        names = list(attrs)
        if "training" not in names or "_parameters" not in names:
            cg.reconstruct_new_object(self)  # its __init__ never called nn.Module's
            return
        first = names.index("training")
        cg.load_callable(runtime.fill_module)
        cg.load_fast(cg.blank_object(self))  # (its attributes may be bound methods of it)
        for part in (names[:first], names[first:]):
            for name in part:
                cg.load_const(name)
                cg.reconstruct(attrs[name])
            cg.emit("BUILD_MAP", len(part))
        cg.call(3)

    def _table(self, tx, store: str):
        """The tracker of ``self.__dict__[store]`` (None: not set, nn.Module.__init__ has not run)."""
        table = tx.output.side_effects.load_attr(self, store)
        if table is None or isinstance(table, (DictVariable, SetVariable)):
            return table
        raise GraphBreak(gb.UNSUPPORTED_ATTRIBUTE, f"{self.describe()}: {store} was replaced")

    @staticmethod
    def _has(tx, table, name: str) -> bool:
        return table is not None and table.contains(tx, ConstantVariable(name))

    def module_init(self, tx, args, kwargs):
        """``nn.Module.__init__(self)``: its fields, each a new empty table (call_super_init is
        False: arguments are a TypeError)."""
        cls = self.value_type
        if mro_lookup(cls, "call_super_init")[0] is not False:
            raise GraphBreak(gb.UNSUPPORTED_CALL, f"{cls.__name__}.call_super_init is set: Python builds it")
        if args or kwargs:
            raise GraphBreak(gb.OPERATION_RAISES, f"nn.Module.__init__() of {cls.__name__} takes no arguments "
                                                  "(TypeError)")
        for name, value in _module_init_fields():
            tx.output.side_effects.store_attr(self, name, _fresh_field(tx, name, value), raw=True)
        return NONE

    def module_getattr(self, tx, name):
        """``nn.Module.__getattr__``: parameters, buffers and submodules."""
        for store in ("_parameters", "_buffers", "_modules"):
            table = self._table(tx, store)
            if self._has(tx, table, name):
                return table.call_method(tx, "__getitem__", [ConstantVariable(name)], {})
        raise GraphBreak(gb.MISSING_ATTRIBUTE, f"{self.value_type.__name__!r} object has no attribute {name!r}")

    def _no_registration_hooks(self, tx, store: str) -> None:
        """nn.Module's global registration hooks for ``store`` are empty (guarded): a hook would
        run, and may replace the value, when Python registers it."""
        from torch.nn.modules import module as m

        hooks = _REGISTRATION_HOOKS[store]
        if getattr(m, hooks, None):
            raise GraphBreak(gb.MODULE_HOOKS, f"global {store[1:]} registration hooks are set")
        tx.output.add_expr_guard(f"not ___sys.modules['torch.nn.modules.module'].{hooks}")

    def _remove_from(self, tx, name: str, stores) -> None:
        """Module.__setattr__'s ``remove_from``: ``name`` out of the instance dict and these tables."""
        for store in stores:
            if store == "__dict__":
                tx.output.side_effects.delete_new_object_attr(self, name)
                continue
            table = self._table(tx, store)
            if self._has(tx, table, name):
                method = "__delitem__" if isinstance(table, DictVariable) else "discard"
                table.call_method(tx, method, [ConstantVariable(name)], {})

    def module_setattr(self, tx, name, value):
        """``nn.Module.__setattr__``: a submodule into ``_modules``, a tensor named as a buffer into
        ``_buffers``, anything else into the instance dict (object.__setattr__)."""
        params = self._table(tx, "_parameters")
        if _is_parameter(value):
            raise GraphBreak(gb.MODULE_CREATED, f"assigning a parameter or buffer object ({name!r}) registers it")
        if self._has(tx, params, name):
            raise GraphBreak(gb.SIDE_EFFECT, f"assigning parameter {name!r} of {self.describe()}")
        modules = self._table(tx, "_modules")
        if _is_module(value) or self._has(tx, modules, name):
            if modules is None:
                raise GraphBreak(gb.OPERATION_RAISES, "cannot assign module before Module.__init__() call "
                                                      "(AttributeError)")
            if not _is_module(value) and not (value.is_python_constant() and value.as_python_constant() is None):
                raise GraphBreak(gb.OPERATION_RAISES, f"cannot assign {value.describe()} as child module {name!r} "
                                                      "(TypeError)")
            if _is_module(value):
                self._remove_from(tx, name, ("__dict__", "_parameters", "_buffers", "_non_persistent_buffers_set"))
            self._no_registration_hooks(tx, "_modules")
            modules.call_method(tx, "__setitem__", [ConstantVariable(name), value], {})
            return NONE
        buffers = self._table(tx, "_buffers")
        if self._has(tx, buffers, name):
            if mro_lookup(self.value_type, "register_buffer")[0] is not nn.Module.register_buffer:
                raise GraphBreak(gb.UNSUPPORTED_CALL, f"{self.value_type.__name__} defines register_buffer")
            persistent = not self._has(tx, self._table(tx, "_non_persistent_buffers_set"), name)
            return self._register_buffer(tx, name, value, persistent)
        return self.generic_setattr(tx, name, value)

    def register_buffer(self, tx, args, kwargs):
        """``nn.Module.register_buffer(self, name, tensor, persistent=True)``."""
        def bind(name, tensor, persistent=ConstantVariable(True)):
            return name, tensor, persistent
        try:
            name, tensor, persistent = bind(*args, **kwargs)
        except TypeError as e:
            raise GraphBreak(gb.BAD_ARGUMENTS, f"register_buffer(): {e}") from e
        if not name.is_python_constant() or not persistent.is_python_constant():
            raise GraphBreak(gb.VALUE_UNKNOWN, "register_buffer() with a name or persistent flag not known at "
                                               "trace time")
        name = name.as_python_constant()
        if self._table(tx, "_buffers") is None or not isinstance(name, str) or "." in name or not name:
            raise GraphBreak(gb.OPERATION_RAISES, f"register_buffer({name!r}) raises")
        if not self._has(tx, self._table(tx, "_buffers"), name):
            try:  # hasattr(self, name), as register_buffer asks it
                self.var_getattr(tx, name)
            except GraphBreak as e:
                if e.break_id != gb.MISSING_ATTRIBUTE:
                    raise
            else:
                raise GraphBreak(gb.OPERATION_RAISES, f"register_buffer(): attribute {name!r} already exists "
                                                      "(KeyError)")
        return self._register_buffer(tx, name, tensor, bool(persistent.as_python_constant()))

    def _register_buffer(self, tx, name: str, tensor, persistent: bool):
        if not isinstance(tensor, TensorVariable) and not (tensor.is_python_constant() and
                                                            tensor.as_python_constant() is None):
            raise GraphBreak(gb.OPERATION_RAISES, f"cannot assign {tensor.describe()} to buffer {name!r} (TypeError)")
        self._no_registration_hooks(tx, "_buffers")
        self._table(tx, "_buffers").call_method(tx, "__setitem__", [ConstantVariable(name), tensor], {})
        self._table(tx, "_non_persistent_buffers_set").call_method(
            tx, "discard" if persistent else "add", [ConstantVariable(name)], {})
        return NONE

    def module_call(self, tx, args, kwargs):
        """``nn.Module.__call__`` of a module without hooks: ``self.forward(*args, **kwargs)``."""
        for store in _CALL_HOOKS:
            table = self._table(tx, store)
            if table is None or table.items:
                raise GraphBreak(gb.MODULE_HOOKS, f"{self.describe()} has {store} (or no nn.Module state)")
        if _global_hooks_present():
            raise GraphBreak(gb.MODULE_HOOKS, "global module hooks are set")
        for hooks in _GLOBAL_HOOKS:
            tx.output.add_expr_guard(f"not ___sys.modules['torch.nn.modules.module'].{hooks}")
        if mro_lookup(self.value_type, "_compiled_call_impl")[0] is not None or \
                tx.output.side_effects.load_attr(self, "_compiled_call_impl") is not None:
            raise GraphBreak(gb.UNSUPPORTED_CALL, f"{self.describe()} was compiled with Module.compile()")
        return self.var_getattr(tx, "forward").call_function(tx, args, kwargs)

    def _modules_below(self, tx, what: str) -> list:
        """This module and every module under it, first-seen order, when each was built in the trace
        and does ``what`` as nn.Module does (else the call breaks: Python runs it)."""
        out, todo = [], [self]
        while todo:
            m = todo.pop(0)
            if any(m is seen for seen in out):
                continue
            out.append(m)
            if isinstance(m, FreshModuleVariable):
                continue  # torch.nn's own, without tensors or children
            # (the module asked may override it and call nn.Module's: the ones under it are asked by nn.Module)
            if not isinstance(m, NewModuleVariable) or (
                    m is not self and mro_lookup(m.value_type, what)[0] is not getattr(nn.Module, what)):
                raise GraphBreak(gb.SIDE_EFFECT, f"Module.{what}() reaching {m.describe()}: Python runs it")
            modules = m._table(tx, "_modules")
            if modules is None:
                raise GraphBreak(gb.OPERATION_RAISES, f"Module.{what}() of {m.describe()} before nn.Module.__init__")
            todo.extend(v for v in modules.items.values() if not (v.is_python_constant() and v.as_python_constant() is None))
        return out

    def module_train(self, tx, args, kwargs):
        """``Module.train(mode=True)``: ``training`` set on it and every module under it."""
        if len(args) + len(kwargs) > 1 or set(kwargs) - {"mode"}:
            raise GraphBreak(gb.BAD_ARGUMENTS, "Module.train() takes one argument, mode")
        mode = [*args, *kwargs.values()][0] if args or kwargs else ConstantVariable(True)
        if not mode.is_python_constant() or type(mode.as_python_constant()) is not bool:
            raise GraphBreak(gb.OPERATION_RAISES, "Module.train(mode) with a mode that is not a bool (ValueError)")
        for m in self._modules_below(tx, "train"):
            m.setattr(tx, "training", mode)
        return self

    def module_to(self, tx, args, kwargs):
        """``Module.to(device, dtype, non_blocking)``: each buffer of it and of every module under it
        moved (floating and complex ones converted), in the graph; modules with parameters break."""
        given = [*args, *kwargs.values()]
        if len(args) == 1 and not kwargs and isinstance(args[0], TensorVariable):
            example = args[0].example
            device, dtype, non_blocking, fmt = example.device, example.dtype, False, None
        elif all(a.is_python_constant() for a in given):
            try:
                device, dtype, non_blocking, fmt = torch._C._nn._parse_to(
                    *[a.as_python_constant() for a in args], **{k: v.as_python_constant() for k, v in kwargs.items()})
            except Exception as e:  # noqa: BLE001 - Python raises it where eager does
                raise GraphBreak(gb.OPERATION_RAISES, f"Module.to() raises {type(e).__name__}") from e
        else:
            raise GraphBreak(gb.VALUE_UNKNOWN, "Module.to() with arguments not known at trace time")
        if fmt is not None or (dtype is not None and not dtype.is_floating_point):
            # a memory format, an integer dtype (TypeError), a complex one (a warning): Python runs it
            raise GraphBreak(gb.UNSUPPORTED_CALL, f"Module.to() with {fmt or dtype}")
        for m in self._modules_below(tx, "_apply"):
            if isinstance(m, FreshModuleVariable):
                continue
            params = m._table(tx, "_parameters")
            buffers = m._table(tx, "_buffers")
            if params is None or params.items or buffers is None:
                raise GraphBreak(gb.SIDE_EFFECT, f"Module.to() of {m.describe()} with parameters: Python runs it")
            for key, buf in list(buffers.items.items()):
                if not isinstance(buf, TensorVariable):
                    continue  # (None)
                ex = buf.example
                convert = dtype if ex.is_floating_point() or ex.is_complex() else None
                moved = buf.call_method(tx, "to", [ConstantVariable(device), ConstantVariable(convert),
                                                   ConstantVariable(non_blocking)], {})
                buffers.call_method(tx, "__setitem__", [ConstantVariable(key), moved], {})
        return self

