"""nn.Module instances.

A module read from the frame's inputs is guarded by identity; its parameters
and buffers become graph inputs (placeholders) read through
``module._parameters[name]`` / ``module._buffers[name]`` so guards and
generated code avoid ``nn.Module.__getattr__``.  Calling a module inlines
``type(module).forward`` (torch.nn's own modules included) when it has no
hooks; with hooks the call breaks the graph and Python runs it.
Tested by tests/test_nn_module.py.
"""
from __future__ import annotations

import types

from torch import nn

from ..exc import GraphBreak
from ..source import AttrSource, ItemSource
from .base import VariableTracker
from .constant import ConstantVariable, NONE
from .user_objects import _mro_lookup


def _global_hooks_present() -> bool:
    from torch.nn.modules import module as m

    return bool(m._global_forward_hooks or m._global_forward_pre_hooks or m._global_backward_hooks
                or m._global_backward_pre_hooks or getattr(m, "_global_forward_hooks_always_called", None))


class NNModuleVariable(VariableTracker):
    """A real nn.Module (with a source) whose forward is inlined."""

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
        from .builder import wrap
        from .functions import UserFunctionVariable, UserMethodVariable

        module = self.value
        pending = tx.output.side_effects.load_attr(self, name)
        if pending is not None:
            return pending
        src = self.source
        d = module.__dict__
        if name in d:
            return wrap(tx, d[name], AttrSource(src, name) if src else None)
        for store in ("_parameters", "_buffers", "_modules"):
            table = d.get(store)
            if table is not None and name in table:
                return wrap(tx, table[name], ItemSource(AttrSource(src, store), name) if src else None)
        cls_attr, owner = _mro_lookup(type(module), name)
        if name in _MODULE_METHODS and owner is not None and owner.__module__.startswith("torch.nn.modules"):
            from .functions import BoundMethodOfVariable

            return BoundMethodOfVariable(self, name)  # answered by call_method
        if isinstance(cls_attr, property):
            return UserFunctionVariable(cls_attr.fget).call_function(tx, [self], {})
        if isinstance(cls_attr, staticmethod):
            return UserFunctionVariable(cls_attr.__func__)
        if isinstance(cls_attr, classmethod):
            from .user_objects import UserDefinedClassVariable

            return UserMethodVariable(cls_attr.__func__, UserDefinedClassVariable(type(module)))
        if isinstance(cls_attr, types.FunctionType):
            return UserMethodVariable(cls_attr, self)
        if name == "__class__":
            from .user_objects import UserDefinedClassVariable

            return UserDefinedClassVariable(type(module))
        if cls_attr is not None:
            return wrap(tx, cls_attr, None)
        raise GraphBreak("DL0011", f"{type(module).__name__!r} object has no attribute {name!r}")

    def store_attr(self, tx, name, value):
        module = self.value
        from .tensor import TensorVariable

        if type(module).__setattr__ is not nn.Module.__setattr__:
            raise GraphBreak("DL0008", f"{type(module).__name__} defines __setattr__")

        if name in module._buffers and isinstance(value, TensorVariable):
            current = self.var_getattr(tx, name)
            if isinstance(current, TensorVariable) and current.example is value.example:
                return NONE  # `self.buf += 1`: the in-place result stored back, a no-op
            if self.source is None:
                raise GraphBreak("DL0008", f"assigning buffer {name!r} of a module without a source")
            # replayed as setattr(module, name, tensor): Module.__setattr__ stores it in _buffers
            tx.output.side_effects.store_attr(self, name, value)
            return NONE
        if name in module._parameters or name in module._modules or name in module._buffers:
            raise GraphBreak("DL0008", f"assigning a parameter, buffer or submodule ({name!r}) of a module")
        if isinstance(value, TensorVariable) and issubclass(value.python_type(), nn.Parameter):
            raise GraphBreak("DL0008", f"assigning a parameter ({name!r}) registers it")
        if isinstance(value, NNModuleVariable):
            raise GraphBreak("DL0008", f"assigning a submodule ({name!r})")
        tx.output.side_effects.store_attr(self, name, value)
        return NONE

    # ---- calls -------------------------------------------------------------
    def call_function(self, tx, args, kwargs):
        module = self.value
        if (module._forward_hooks or module._forward_pre_hooks or module._backward_hooks
                or getattr(module, "_backward_pre_hooks", None) or _global_hooks_present()):
            raise GraphBreak("DL0013", f"module {type(module).__name__} has forward/backward hooks")
        if self.source is not None:
            for hooks in ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks"):
                tx.output.add_expr_guard(f"not {AttrSource(self.source, hooks).name()}")
        forward, _ = _mro_lookup(type(module), "forward")
        if not isinstance(forward, types.FunctionType):
            raise GraphBreak("DL0003", f"{type(module).__name__}.forward is not a Python function")
        if "forward" in module.__dict__:
            raise GraphBreak("DL0003", "forward replaced on the instance")
        from .functions import UserFunctionVariable

        return UserFunctionVariable(forward).call_function(tx, [self, *args], kwargs)

    def children_vars(self, tx) -> list[tuple[str, VariableTracker]]:
        from .builder import wrap

        out = []
        for key, child in self.value._modules.items():
            src = ItemSource(AttrSource(self.source, "_modules"), key) if self.source else None
            out.append((key, wrap(tx, child, src)))
        return out

    def unpack(self, tx):
        module = self.value
        if isinstance(module, (nn.Sequential, nn.ModuleList)):
            if self.source is not None:
                tx.output.add_guard("LENGTH", AttrSource(self.source, "_modules"), len(module._modules))
            return [v for _, v in self.children_vars(tx)]
        if isinstance(module, nn.ModuleDict):
            return [ConstantVariable(k) for k, _ in self.children_vars(tx)]
        if isinstance(module, (nn.ParameterList,)):
            return [self.var_getattr(tx, k) for k in module._parameters]
        raise GraphBreak("DL0005", f"iterating over {type(module).__name__}")

    def has_len(self):
        return isinstance(self.value, (nn.Sequential, nn.ModuleList, nn.ModuleDict, nn.ParameterList))

    def call_method(self, tx, name, args, kwargs):
        from .containers import ListIteratorVariable, TupleVariable

        module = self.value
        if name == "__len__" and self.has_len():
            if self.source is not None:
                tx.output.add_guard("LENGTH", AttrSource(self.source, "_modules"), len(module._modules))
            return ConstantVariable(len(module))
        if name == "__getitem__" and len(args) == 1 and args[0].is_python_constant():
            key = args[0].as_python_constant()
            if isinstance(module, nn.ModuleDict):
                pairs = dict(self.children_vars(tx))
                if key not in pairs:
                    raise GraphBreak("DL0010", f"ModuleDict has no key {key!r}")
                return pairs[key]
            if isinstance(module, (nn.Sequential, nn.ModuleList)) and isinstance(key, slice):
                return ModuleSliceVariable(self, key, self.unpack(tx)[key])
            if isinstance(module, (nn.Sequential, nn.ModuleList)) and isinstance(key, int):
                items = self.unpack(tx)
                try:
                    return items[key]
                except IndexError as e:
                    raise GraphBreak("DL0010", "module index out of range") from e
            if isinstance(module, nn.ParameterList) and isinstance(key, int):
                return self.var_getattr(tx, str(key % len(module)))
            raise GraphBreak("DL0003", f"{type(module).__name__}[{key!r}]")
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
                for key, value in getattr(sub, kind).items():
                    if value is None:
                        continue
                    var = sub_var.var_getattr(tx, key)
                    items.append(TupleVariable([ConstantVariable(f"{prefix}.{key}" if prefix else key), var])
                                 if name.startswith("named") else var)
            return ListIteratorVariable(_dedupe_by_identity(items, name.startswith("named")))
        if name in ("modules", "named_modules") and not args and not kwargs:
            items = []
            for prefix, sub in module.named_modules():
                var = self._descendant(tx, prefix)
                items.append(TupleVariable([ConstantVariable(prefix), var]) if name == "named_modules" else var)
            return ListIteratorVariable(items)
        if name == "__setattr__" and len(args) == 2 and args[0].is_python_constant():
            return self.store_attr(tx, args[0].as_python_constant(), args[1])
        if name in ("train", "eval", "to", "cuda", "cpu", "apply", "zero_grad", "register_buffer",
                    "register_parameter", "add_module", "requires_grad_", "half", "float", "double"):
            raise GraphBreak("DL0008", f"Module.{name}() changes module state")
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

    def unpack(self, tx):
        return list(self.items)

    def call_method(self, tx, name, args, kwargs):
        from .containers import ListIteratorVariable

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
        raise GraphBreak("DL0003", f"{name} on a slice of {type(self.parent.value).__name__}")

    def call_function(self, tx, args, kwargs):
        if not isinstance(self.parent.value, nn.Sequential) or type(self.parent.value).forward is not \
                nn.Sequential.forward or len(args) != 1 or kwargs:
            raise GraphBreak("DL0003", f"calling a slice of {type(self.parent.value).__name__}")
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
