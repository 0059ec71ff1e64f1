"""Facts about real objects read without running their Python.

Tracing, guarding, explaining recompiles and describing breaks must touch only what eager
touches (docs/how-it-works.md): an attribute read on a user object may run its class's
``__getattr__`` / ``__getattribute__`` or a descriptor, and ``bool``/``==``/``hash``/``repr``
run its dunders.  What dynamo_lite needs to know about an object it did not make (its name,
the module that defined it, whether it is torch's) is read here from the object's type and
from the C-level slots of functions and classes, never through the object itself.

Tested by tests/robustness/test_touch_only_what_eager_touches.py.
"""
from __future__ import annotations

import types

# callables whose __name__ / __qualname__ / __module__ are C-level fields (no user code reads them)
_FUNCTION_TYPES = (types.FunctionType, types.BuiltinFunctionType, types.MethodDescriptorType,
                   types.WrapperDescriptorType, types.MethodWrapperType, types.ClassMethodDescriptorType,
                   types.GetSetDescriptorType, types.MemberDescriptorType)

_TYPE_QUALNAME = type.__dict__["__qualname__"]
_TYPE_MODULE = type.__dict__["__module__"]


def qualname(obj) -> str:
    """The qualified name of a class or function, else its type's: a class by ``type``'s own
    getter (no metaclass runs), a bound method by its function's."""
    if isinstance(obj, type):
        return _TYPE_QUALNAME.__get__(obj, type)
    if isinstance(obj, types.MethodType) and isinstance(obj.__func__, _FUNCTION_TYPES):
        obj = obj.__func__
    if isinstance(obj, _FUNCTION_TYPES):  # (C-level fields: reading them runs no user code)
        name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
        if isinstance(name, str):
            return name
    return _TYPE_QUALNAME.__get__(type(obj), type)


def module_name(obj) -> str:
    """The name of the module that defined a class or function, else its type's ('' when the
    object does not say)."""
    if isinstance(obj, type):
        name = _TYPE_MODULE.__get__(obj, type)
    elif isinstance(obj, types.MethodType) and isinstance(obj.__func__, _FUNCTION_TYPES):
        name = getattr(obj.__func__, "__module__", None)
    elif isinstance(obj, _FUNCTION_TYPES):
        name = getattr(obj, "__module__", None)
    else:
        name = _TYPE_MODULE.__get__(type(obj), type)
    return name if isinstance(name, str) else ""


def is_torch_module_name(name: str) -> bool:
    """``torch`` or a module under it (``torch.nn.functional``), not a package whose name merely
    starts with "torch" (torchvision, torchaudio, torchmetrics, torchdiffeq...)."""
    return name == "torch" or name.startswith("torch.")


def defined_in_torch(obj) -> bool:
    """Was this class or function (or this object's class) defined by torch itself?"""
    return is_torch_module_name(module_name(obj))


__all__ = ["qualname", "module_name", "is_torch_module_name", "defined_in_torch"]
