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
- Writes: Python attributes are replayed after the graph (side effects);
  ``self.buf += 1`` on a buffer is the in-place op itself; assigning a new
  tensor to a buffer is replayed as ``setattr``; assigning parameters or
  submodules, and the state-changing methods (``train()``, ``to()``, ...), break.
Tested by tests/torch/test_nn_module.py (and the models of tests/torch/test_models.py).
"""
from __future__ import annotations

import collections
import types
import warnings

import torch
import torch.fx
from torch import nn

from .. import graph_breaks as gb
from .. import guards
from ..exc import GraphBreak
from ..source import AttrSource, ItemSource, NthValueSource, TypeSource, attr_source
from .base import IdentityKey, VariableTracker
from .constant import ConstantVariable, NONE
from .user_objects import mro_lookup, guard_class_attr, guard_function, UserDefinedClassVariable
from .sequences import ListIteratorVariable, TupleVariable
from .functions import UserFunctionVariable, UserMethodVariable
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
            return UserDefinedClassVariable(cls)
        src = self.source
        d = module.__dict__
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
        if cls_attr is not None:
            if name in _MODULE_METHODS and owner.__module__.startswith("torch.nn.modules"):
                return BoundMethodOfVariable(self, name)  # answered by call_method
            if isinstance(cls_attr, (staticmethod, classmethod, types.FunctionType)):
                guard_class_attr(tx, cls_src, cls_attr)
            if isinstance(cls_attr, staticmethod):
                return UserFunctionVariable(cls_attr.__func__, cls_src)
            if isinstance(cls_attr, classmethod):
                return UserMethodVariable(cls_attr.__func__, UserDefinedClassVariable(cls),
                                          fn_source=attr_source(cls_src, "__func__"))
            if isinstance(cls_attr, types.FunctionType):
                return UserMethodVariable(cls_attr, self, fn_source=cls_src)
            if hasattr(type(cls_attr), "__get__") and not isinstance(cls_attr, type) and not callable(cls_attr):
                raise GraphBreak(gb.UNSUPPORTED_ATTRIBUTE, f"descriptor {name!r} of {cls.__name__}")
            return tx.wrap(cls_attr, cls_src)
        getattr_fn, _ = mro_lookup(cls, "__getattr__")
        if getattr_fn is not nn.Module.__getattr__:
            if isinstance(getattr_fn, types.FunctionType):
                return UserMethodVariable(getattr_fn, self).call_function(tx, [ConstantVariable(name)], {})
            raise GraphBreak(gb.UNSUPPORTED_ATTRIBUTE, f"{cls.__name__} defines __getattr__")
        return self.module_getattr(tx, name)

    def module_getattr(self, tx, name):
        """``nn.Module.__getattr__``: parameters, buffers and submodules."""
        d = self.value.__dict__
        src = self.source
        for store in ("_parameters", "_buffers", "_modules"):
            table = d.get(store)
            if table is not None and name in table:
                return tx.wrap(table[name], ItemSource(AttrSource(src, store), name) if src else None)
        raise GraphBreak(gb.MISSING_ATTRIBUTE, f"{type(self.value).__name__!r} object has no attribute {name!r}")

    def setattr(self, tx, name, value):
        module = self.value
        if type(module).__setattr__ is not nn.Module.__setattr__:
            raise GraphBreak(gb.SIDE_EFFECT, f"{type(module).__name__} defines __setattr__")
        return self.module_setattr(tx, name, value)

    def module_setattr(self, tx, name, value):
        """``nn.Module.__setattr__`` for the assignments a graph can hold."""
        module = self.value
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
        tx.output.side_effects.store_attr(self, name, value)
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
        if self.source is not None:
            tx.output.add_guard(guards.DictKeysGuard(AttrSource(self.source, store), tuple(getattr(self.value, store))))

    def children_vars(self, tx) -> list[tuple[str, VariableTracker]]:
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
        if name in ("train", "eval", "to", "cuda", "cpu", "apply", "zero_grad", "register_buffer",
                    "register_parameter", "add_module", "requires_grad_", "half", "float", "double"):
            raise GraphBreak(gb.SIDE_EFFECT, f"Module.{name}() changes module state")
        if name in _MODULE_METHODS:  # var_getattr sends these here: never back to var_getattr
            raise GraphBreak(gb.UNSUPPORTED_CALL, f"Module.{name}() with these arguments")
        return super().call_method(tx, name, args, kwargs)

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
    """``nn.Module.__getattr__(m, name)`` / ``__setattr__(m, name, v)`` called explicitly
    (``super().__getattr__(name)`` in a module defining its own)."""
    def impl(tx, obj=None, name=None, *rest, **kwargs):
        if not isinstance(obj, NNModuleVariable) or name is None or not name.is_python_constant() or kwargs:
            return None
        if kind == "get" and not rest:
            return obj.module_getattr(tx, name.as_python_constant())
        if kind == "set" and len(rest) == 1:
            return obj.module_setattr(tx, name.as_python_constant(), rest[0])
        return None
    return impl


def _module_call_handler(tx, obj=None, *args, **kwargs):
    """``nn.Module.__call__(m, *args)`` called as a function (``super().__call__(x)`` in a module
    defining its own ``__call__``; compile(module)'s call with hooks, api.py): the module call,
    not the class's own ``__call__`` again."""
    if not isinstance(obj, NNModuleVariable):
        return None
    obj.check_no_pending_hooks(tx, "a call")
    return obj.module_call(tx, list(args), kwargs)


# nn.Module.__getattr__/__setattr__/__call__ called as functions (``nn.Module.__getattr__(self, name)``):
# builtin.py registers these in functions.PYTHON_FUNCTION_HANDLERS
MODULE_FUNCTION_HANDLERS = {
    nn.Module.__call__: _module_call_handler,
    nn.Module.__getattr__: _module_dunder_handler("get"),
    nn.Module.__setattr__: _module_dunder_handler("set"),
}


# nn.Module methods answered by NNModuleVariable.call_method (when the class does not override them)
_MODULE_METHODS = frozenset({
    "parameters", "named_parameters", "buffers", "named_buffers", "modules", "named_modules",
    "children", "named_children", "train", "eval", "to", "cuda", "cpu", "apply", "zero_grad",
    "register_buffer", "register_parameter", "add_module", "requires_grad_", "half", "float", "double",
})


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
    with warnings.catch_warnings(record=True) as caught:
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
        cg.load_callable(type(self.value))
        for a in self.args:
            cg.load_const(a)
        for v in self.kwargs.values():
            cg.load_const(v)
        cg.call(len(self.args) + len(self.kwargs), tuple(self.kwargs))


VariableTracker.build_module = staticmethod(build_fresh_module)  # see VariableTracker.build_module
