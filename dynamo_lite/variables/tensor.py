"""Tensors: every tensor in the trace is an FX node plus a FakeTensor example.

``record_op`` is the one place a tensor operation enters the graph: it turns
tracker arguments into node arguments and fake example arguments, runs the
operation on the fakes (never on real tensors), and wraps the result.  An
operation that fails on fakes (a shape error the user will see, or an
operation whose output depends on tensor data) breaks the graph at the
current instruction, so Python runs it for real and behaves exactly as eager.
An operation whose fake run issues a warning breaks the same way, unless the warning is one
issued from the arguments' types alone (``_REPLAYABLE_WARNINGS``: ``torch.tensor(tensor)``'s
copy-construct warning, ``F.upsample``'s deprecation): then it is replayed after the graph
from the user's line and the graph's own call is kept quiet.
``Tensor.register_hook`` is answered from above (replayed.register_tensor_hook).
Reading an attribute a tensor does not have is a DL0011 "missing attribute"
(so ``hasattr(t, "x")`` folds to False; guarded for input tensors).
Tested by tests/torch/test_tensor_ops.py.
"""
from __future__ import annotations

import contextlib
import functools
import logging
import math
import operator
import re
import types
import warnings
from typing import Any, Optional

import numpy as np
import sympy
import torch
from torch._dispatch.python import enable_python_dispatcher
import torch.fx
from torch.utils._sympy.symbol import SymT, symbol_is_type
from torch.fx.experimental.symbolic_shapes import (GuardOnDataDependentSymNode, free_unbacked_symbols,
                                                   statically_known_true)
from torch._subclasses.fake_tensor import (
    DataDependentOutputException,
    DynamicOutputShapeException,
)

from .. import graph_breaks as gb
from .. import guards
from .. import config, runtime, static
from ..exc import GraphBreak
from .base import IdentityKey, VariableTracker
from .constant import ConstantVariable, NONE
from .exceptions import ExceptionVariable
from ..source import AttrSource, FloatTensorSource
from .sequences import BaseListVariable, LazyIteratorVariable, ListVariable, SizeVariable, SliceVariable, StructSeqVariable, TupleVariable
from .mappings import DictVariable
from .folding import wrap_constant_result
from .methods import TensorMethodVariable

# Tensor methods and attributes that cannot be part of a graph.
_DATA_DEPENDENT_METHODS = {
    "item": "Tensor.item() reads a value out of the tensor",
    "tolist": "Tensor.tolist() reads values out of the tensor",
    "__bool__": "bool(tensor) depends on tensor data",
    "__int__": "int(tensor) depends on tensor data",
    "__float__": "float(tensor) depends on tensor data",
    "__index__": "using a tensor as an index depends on tensor data",
    "nonzero": "nonzero() has a data-dependent output shape",
    "__array__": "converting to numpy leaves torch",
}
_SIDE_EFFECT_METHODS = {
    "backward": "Tensor.backward() runs autograd outside the graph",
    "register_hook": "Tensor.register_hook() installs a Python hook",
    "retain_grad": "Tensor.retain_grad() changes autograd state",
    "requires_grad_": "Tensor.requires_grad_() changes a tensor's autograd flag",
    "data_ptr": "Tensor.data_ptr() exposes storage addresses",
    "untyped_storage": "storage access is not traceable",
    "storage": "storage access is not traceable",
    "storage_type": "storage access is not traceable",
    "is_shared": "storage access is not traceable",
    "set_": "Tensor.set_() swaps storage",
    "resize_": "Tensor.resize_() changes storage",
    "share_memory_": "share_memory_ changes storage",
    "pin_memory": "pin_memory is not traceable",
    "record_stream": "record_stream is not traceable",
    "__setstate__": "pickling protocol",
    "__reduce_ex__": "pickling protocol",
}
# Methods whose result is plain metadata (computed from the fake, no node).
_METADATA_METHODS = {
    "size", "dim", "ndimension", "numel", "nelement", "element_size", "stride",
    "storage_offset", "is_contiguous", "is_floating_point", "is_complex", "is_signed",
    "get_device", "is_sparse", "__len__", "type_as_dtype", "is_inference",
}
_METADATA_ATTRS = {
    "dtype", "device", "layout", "ndim", "is_cuda", "is_cpu", "is_sparse", "is_quantized",
    "is_meta", "is_mkldnn", "is_nested", "is_leaf",
    # the device and layout (guarded), read from the fake tensor
    "is_mps", "is_xpu", "is_xla", "is_ipu", "is_maia", "is_mtia", "is_vulkan", "is_sparse_csr",
}
_GRAPH_ATTRS = {"T", "mT", "H", "mH", "real", "imag", "data"}


class TensorVariable(VariableTracker):
    """A tensor: its FX node and its FakeTensor example value.

    Attributes:
        node: the torch.fx Node producing this tensor in the current graph.
        example: FakeTensor with the tensor's metadata (shape, dtype, ...).
        source: set for tensors read from the frame's inputs (then ``node``
            is a placeholder).
    """

    def identity_key(self):
        return IdentityKey(self, ("var", id(self)))

    def __init__(self, node: torch.fx.Node, example: torch.Tensor, source=None):
        super().__init__(source)
        self.node = node
        self.example = example

    def _repr_body(self):
        return f"{self.node.name}: {str(self.example.dtype).replace('torch.', '')}{list(self.example.shape)}"

    def describe(self):
        return f"tensor {self.node.name}"

    def python_type(self):
        return type(self.example) if not _is_fake(self.example) else _real_type(self)

    def truthiness(self, tx):
        return None

    def legacy_type_name(self) -> str:
        """What ``t.type()`` answers ("torch.FloatTensor"; dtype and device are guarded)."""
        return _type_string(self.example)

    def is_tensor(self):
        return True

    def getitem(self, tx, key):
        if isinstance(key, SymNodeVariable) and key.python_type() is int and self.example.dim() > 0:
            # a symbolic index: an int read from tensor data (t[int(t.argmax())]), or one computed from
            # sizes (x[n - 1]): Tensor.__getitem__ would specialise it; torch.select takes it
            # symbolically (and checks the bounds when the graph runs)
            return record_op(tx, "call_function", torch.select, [self, ConstantVariable(0), key], {})
        return record_op(tx, "call_function", operator.getitem, [self, key], {})

    def setitem(self, tx, key, value):
        self.call_method(tx, "__setitem__", [key, value], {})

    def has_len(self):
        return self.example.dim() > 0

    def len(self, tx):
        if self.example.dim() == 0:
            raise GraphBreak(gb.OPERATION_RAISES, "len() of a 0-d tensor")
        return SymNodeVariable.concrete(tx.output.shapes, self.example.shape[0])

    def contains(self, tx, item):
        raise GraphBreak(gb.DATA_DEPENDENT, "`in` on a tensor depends on tensor data")

    def unpack(self, tx):
        if self.example.dim() == 0:
            raise GraphBreak(gb.OPERATION_RAISES, "iteration over a 0-d tensor")
        return [record_op(tx, "call_function", operator.getitem, [self, ConstantVariable(i)], {})
                for i in range(SymNodeVariable.concrete(tx.output.shapes, self.example.shape[0]))]

    # ``requires_grad_()`` replayed after the graph (replayed.enable_grad_after_graph): the real tensor
    # will require grad, this trace's does not.  Holds (root step or None, user stack) of the call:
    # what the trace would do with the tensor next ends the graph before that call (made by the
    # root frame's own code) or before that use, where Python goes on with the tensor requiring grad
    grad_enabled_later: Any = None

    def _check_grad_enabled_later(self, what: str) -> None:
        if self.grad_enabled_later:
            step, where = self.grad_enabled_later
            if step is None:
                raise GraphBreak(gb.SIDE_EFFECT, f"{what} of a tensor after its requires_grad_(): Python goes on "
                                 "from here with the tensor requiring grad")
            brk = GraphBreak(gb.SIDE_EFFECT, f"requires_grad_() on a tensor the graph computed, which is then "
                             f"used ({what}): the graph ends before the call, Python makes it and goes on with "
                             "the tensor requiring grad")
            brk.restart_step = step
            brk.user_stack = list(where)
            raise brk

    def setattr(self, tx, name, value):
        if name == "grad" and self.source is not None and self._grad_store_matches(value):
            # ``p.grad = None`` / ``p.grad = g`` on a tensor read from outside (zero_grad, a manual
            # optimizer step): replayed after the graph; reads of .grad in the trace see it
            tx.output.side_effects.store_attr(self, "grad", value)
            return NONE
        if name == "requires_grad" and value.is_python_constant() and type(value.as_python_constant()) is bool:
            flag = value.as_python_constant()
            if flag and not self.example.requires_grad and not self.grad_enabled_later:
                VariableTracker.enable_grad_after_graph(tx, self)
                return NONE
            if flag == self.example.requires_grad and not self.grad_enabled_later and self.example.grad_fn is None:
                return NONE  # (a leaf: the flag it already has)
        return super().setattr(tx, name, value)

    def _grad_store_matches(self, value) -> bool:
        """Would ``self.grad = value`` succeed in eager, for None or a tensor like this one (same
        sizes, dtype, device and layout, not requiring grad)?  Anything else breaks (eager raises,
        or checks what the trace cannot)."""
        if value.is_python_constant() and value.as_python_constant() is None:
            return True
        if not isinstance(value, TensorVariable):
            return False
        a, b = self.example, value.example
        return (all(type(d) is int for d in (*a.shape, *b.shape)) and a.shape == b.shape and a.dtype == b.dtype
                and a.device == b.device and a.layout == b.layout and not b.requires_grad)

    def _requires_grad_(self, tx, args, kwargs):
        """``requires_grad_(flag=True)``: the flag it already has returns the tensor; turning it on
        for a tensor that does not require grad is replayed after the graph."""
        flag = kwargs.get("requires_grad", args[0] if args else None)
        if len(args) + len(kwargs) > 1 or (kwargs and "requires_grad" not in kwargs):
            raise GraphBreak(gb.OPERATION_RAISES, "Tensor.requires_grad_() with unexpected arguments (TypeError)")
        flag = True if flag is None else (flag.as_python_constant() if flag.is_python_constant() else None)
        if type(flag) is not bool:
            raise GraphBreak(gb.SIDE_EFFECT, _SIDE_EFFECT_METHODS["requires_grad_"])
        if self.grad_enabled_later:
            if flag:
                return self
            self._check_grad_enabled_later("requires_grad_(False)")
        if flag == self.example.requires_grad and (flag or self.example.grad_fn is None):
            return self  # already so (True on a tensor with a grad_fn is allowed and changes nothing)
        if flag:
            return VariableTracker.enable_grad_after_graph(tx, self)
        raise GraphBreak(gb.SIDE_EFFECT, _SIDE_EFFECT_METHODS["requires_grad_"])

    # ---- attributes --------------------------------------------------------
    def var_getattr(self, tx, name):
        ex = self.example
        if self.grad_enabled_later:
            if name == "requires_grad":
                return ConstantVariable(True)
            if name != "requires_grad_":
                self._check_grad_enabled_later(f".{name}")
        if name in ("shape",):
            return metadata_result(tx, self, "size", (), ex.shape)
        if name == "__class__":
            return tx.wrap(getattr(self, "real_type", torch.Tensor), None)
        if name == "is_leaf":  # the one property among _INPUT_FACTS (the others are methods)
            if self.node.op != "placeholder" and (not ex.requires_grad or ex.grad_fn is not None):
                # computed in the graph: a tensor that does not require grad is a leaf, one with a
                # grad_fn is not (eager answers the same; a new leaf requiring grad is left to Python)
                return ConstantVariable(not ex.requires_grad)
            return self._input_fact(tx, name)
        if name in _METADATA_ATTRS:
            return ConstantVariable(getattr(ex, name))
        if name == "requires_grad":
            return ConstantVariable(ex.requires_grad)
        if name in _GRAPH_ATTRS:
            if name == "data":  # not detach(): .data has its own version counter (writes through
                # it are not seen by autograd's checks), detach() shares the tensor's
                return record_op(tx, "call_function", torch._C._autograd._get_data_attr, [self], {})
            return record_op(tx, "call_function", getattr, [self, ConstantVariable(name)], {})
        if name == "grad":
            stored = tx.output.side_effects.load_attr(self, "grad")
            if stored is not None:  # written earlier in the trace (setattr)
                return stored
            if self.source is not None:
                return tx.wrap(getattr(tx.output.real_value_of(self), "grad"), AttrSource(self.source, "grad"))
            raise GraphBreak(gb.UNSUPPORTED_ATTRIBUTE, ".grad of a tensor computed in the graph")
        if name in ("grad_fn", "_version", "_base", "names"):
            raise GraphBreak(gb.UNSUPPORTED_ATTRIBUTE, f"Tensor.{name} is not traceable")
        if name in _DATA_DEPENDENT_METHODS or name in _SIDE_EFFECT_METHODS or hasattr(torch.Tensor, name):
            return TensorMethodVariable(self, name)
        if self.source is not None:
            real = tx.output.real_value_of(self)
            if name in getattr(real, "__dict__", {}):
                return tx.wrap(real.__dict__[name], AttrSource(self.source, name))
            if type(real) is not torch.Tensor and hasattr(type(real), name):
                raise GraphBreak(gb.UNSUPPORTED_ATTRIBUTE, f"attribute {name!r} of tensor subclass {type(real).__name__}")
            tx.output.add_expr_guard(f"not hasattr({self.source.name()}, {name!r})")
        raise GraphBreak(gb.MISSING_ATTRIBUTE, f"'Tensor' object has no attribute {name!r}")

    def call_method(self, tx, name, args, kwargs):
        if name == "numpy":
            return VariableTracker.tensor_numpy(tx, self, args, kwargs)
        if name == "new_tensor" and args and _holds_numpy_scalar(args[0]):
            # torch takes the new tensor's dtype from numpy scalars in the data; the node would hold
            # plain numbers (see _node_arg)
            raise GraphBreak(gb.VALUE_UNKNOWN, "Tensor.new_tensor() of numpy scalars")
        if name == "item" and config.capture_scalar_outputs or \
                name == "nonzero" and config.capture_dynamic_output_shape_ops:
            # a value read from the data: a symbolic number / size of the graph (record_op
            # breaks where the fake run cannot go on)
            return record_op(tx, "call_method", name, [self, *args], kwargs)
        if name == "tolist" and config.capture_scalar_outputs and not args and not kwargs:
            return _tolist(tx, self)
        if name in _DATA_DEPENDENT_METHODS:
            raise GraphBreak(gb.DATA_DEPENDENT, _DATA_DEPENDENT_METHODS[name])
        if name == "requires_grad_":
            return self._requires_grad_(tx, args, kwargs)
        self._check_grad_enabled_later(f"Tensor.{name}()")
        if name == "register_hook" and len(args) == 1 and not kwargs:
            return VariableTracker.register_tensor_hook(tx, self, args[0])
        if name in _SIDE_EFFECT_METHODS:
            raise GraphBreak(gb.SIDE_EFFECT, _SIDE_EFFECT_METHODS[name])
        if name == "is_inference" and not args and not kwargs and self.node.op != "placeholder":
            # made in the graph: the fake was made under the trace's inference mode (entered for
            # real while tracing, as the graph enters it), so it answers as the real result
            tx.output.guard_inference_mode()
            return ConstantVariable(self.example.is_inference())
        if name in _INPUT_FACTS and not args and not kwargs:
            return self._input_fact(tx, name)
        if name in _METADATA_METHODS:
            fake_args, fake_kwargs = _fake_args(args), {k: fake_arg(v) for k, v in kwargs.items()}
            try:
                value = getattr(self.example, name)(*fake_args, **fake_kwargs)
            except (IndexError, TypeError, ValueError) as e:
                # a question about the guarded metadata (x.size(5): IndexError): raised in the trace,
                # as Python raises it at this line (the traced code's except clauses see it)
                if type(e) not in (IndexError, TypeError, ValueError):
                    raise GraphBreak(gb.OPERATION_RAISES, f"Tensor.{name}() raised {type(e).__name__}") from e
                tx.raise_builtin_exception(type(e), [ConstantVariable(str(e))])
            tx.output.shapes.note()
            return metadata_result(tx, self, name, tuple(fake_args), value)
        if name == "type" and not args and not kwargs:
            return ConstantVariable(self.example.type() if not _is_fake(self.example) else
                                    _type_string(self.example))
        if name == "__getitem__":
            return record_op(tx, "call_function", operator.getitem, [self, *args], kwargs)
        if name == "__setitem__":
            if _mask_assignment_with_grad(tx, self, args):
                # its backward takes the mask's nonzero(), a data-dependent shape no autograd-tracing
                # backend (aot_eager, inductor) can compile: Python runs it (as TorchDynamo does)
                raise GraphBreak(gb.DATA_DEPENDENT, "assignment through a boolean mask to or from a tensor that "
                                 "requires grad")
            return record_op(tx, "call_function", operator.setitem, [self, *args], kwargs)
        if name in ("__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__add__", "__mul__",
                    "__sub__", "__truediv__", "__matmul__", "__neg__", "__radd__", "__rmul__"):
            return record_op(tx, "call_method", name, [self, *args], kwargs)
        if name in ("__contains__",):
            raise GraphBreak(gb.DATA_DEPENDENT, "`in` on a tensor depends on tensor data")
        return record_op(tx, "call_method", name, [self, *args], kwargs)

    def _input_fact(self, tx, name):
        """A fact the TENSOR guard does not cover (is_leaf, storage_offset(), conj/neg bits, ...):
        read from the real input tensor and guarded; computed tensors break the graph."""
        if self.source is None or self.node.op != "placeholder":
            raise GraphBreak(gb.UNSUPPORTED_ATTRIBUTE, f"Tensor.{name} of a tensor computed in the graph")
        real = tx.output.real_value_of(self)
        value = getattr(real, name) if name in _METADATA_ATTRS else getattr(real, name)()
        if name in _FAKE_TRACKED_FACTS and getattr(self.example, name)() != value:
            # changed by an in-place op earlier in the trace (x.as_strided_(...)): Python answers
            raise GraphBreak(gb.UNSUPPORTED_ATTRIBUTE, f"Tensor.{name} of an input changed in place")
        read = f"{self.source.name()}.{name}" + ("" if name in _METADATA_ATTRS else "()")
        tx.output.add_guard(guards.ExprGuard(f"{read} == {value!r}" if type(value) is int else
                                             f"{read} is {value!r}", (), self.source))
        return ConstantVariable(value)

    def reconstruct(self, cg):
        cg.reconstruct_tensor(self)

    def can_reconstruct(self):
        return True


# Facts about an input tensor outside its TENSOR guard (type, dtype, device, shape, strides,
# requires_grad): answered from the real input and guarded on use (TensorVariable._input_fact).
_INPUT_FACTS = {"is_leaf", "storage_offset", "is_inference", "is_conj", "is_neg", "is_shared", "is_pinned"}
# ... of which these follow in-place ops on the fake (checked against it)
_FAKE_TRACKED_FACTS = {"storage_offset", "is_conj", "is_neg"}


def _is_fake(t) -> bool:
    from torch._subclasses.fake_tensor import FakeTensor

    return isinstance(t, FakeTensor)


def _real_type(tv: TensorVariable):
    return getattr(tv, "real_type", torch.Tensor)


def _type_string(fake) -> str:
    names = {torch.float32: "FloatTensor", torch.float64: "DoubleTensor", torch.float16: "HalfTensor",
             torch.bfloat16: "BFloat16Tensor", torch.int64: "LongTensor", torch.int32: "IntTensor",
             torch.int16: "ShortTensor", torch.int8: "CharTensor", torch.uint8: "ByteTensor",
             torch.bool: "BoolTensor", torch.complex64: "ComplexFloatTensor",
             torch.complex128: "ComplexDoubleTensor", torch.complex32: "ComplexHalfTensor"}
    name = names.get(fake.dtype)
    if name is None:
        raise GraphBreak(gb.UNSUPPORTED_ATTRIBUTE, f"Tensor.type() for {fake.dtype}")
    return f"torch.{name}" if fake.device.type == "cpu" else f"torch.{fake.device.type}.{name}"


# ---- turning trackers into node arguments ---------------------------------------
# the dtypes torch's argument parser reads Python's scalar classes as (dtype=int, x.to(float))
_SCALAR_TYPE_DTYPES = {bool: torch.bool, int: torch.int64, float: torch.float64, complex: torch.complex128}


def _node_arg(v: VariableTracker):
    if isinstance(v, TensorVariable):
        return v.node
    if isinstance(v, SymNodeVariable):
        return v.as_node()
    if isinstance(v, SliceVariable) and any(p.symbolic for p in v.parts):
        return slice(*[_node_arg(p) for p in v.parts])
    if isinstance(v, ConstantVariable):
        # a numpy scalar is a Python number to torch's argument parser (tensor data is not:
        # torch_vars / numpy_arrays give torch.tensor([np.float64(1)]) eager's dtype); the graph's
        # code cannot name numpy, so the node holds the number
        return v.value.item() if isinstance(v.value, np.generic) else v.value
    if isinstance(v, SizeVariable):
        items = [_node_arg(i) for i in v.items]
        # a size with symbolic items is a tuple of nodes in the graph (torch.Size holds ints only)
        return tuple(items) if any(isinstance(i, torch.fx.Node) for i in items) else torch.Size(items)
    if isinstance(v, BaseListVariable):
        items = [_node_arg(i) for i in v.items]
        return tuple(items) if v.python_type() is not list else items
    if isinstance(v, DictVariable):
        return {k: _node_arg(i) for k, i in v.items.items()}
    if v.is_python_constant():
        value = v.as_python_constant()
        if isinstance(value, type):
            if value in _SCALAR_TYPE_DTYPES:  # torch.tensor(0, dtype=int): torch's parser reads it as a dtype
                return _SCALAR_TYPE_DTYPES[value]
            # another class (x.as_subclass(C)): the graph's code cannot name it
            raise GraphBreak(gb.VALUE_UNKNOWN, f"class {value.__qualname__} passed to a tensor operation")
        return value
    raise GraphBreak(gb.VALUE_UNKNOWN, f"{v.describe()} cannot be passed to a tensor operation in a graph")


def _holds_numpy_scalar(v: VariableTracker) -> bool:
    if isinstance(v, ConstantVariable):
        return isinstance(v.value, np.generic)
    return isinstance(v, BaseListVariable) and any(_holds_numpy_scalar(i) for i in v.items)


def fake_arg(v: VariableTracker):
    """The value a tensor operation receives for ``v`` at trace time (a FakeTensor for a tensor)."""
    if isinstance(v, TensorVariable):
        return v.example
    if isinstance(v, SymNodeVariable):
        return v.value
    if isinstance(v, SliceVariable) and any(p.symbolic for p in v.parts):
        return slice(*[fake_arg(p) for p in v.parts])
    if isinstance(v, ConstantVariable):
        return v.value
    if isinstance(v, SizeVariable):
        return torch.Size([fake_arg(i) for i in v.items])
    if isinstance(v, BaseListVariable):
        items = [fake_arg(i) for i in v.items]
        return tuple(items) if v.python_type() is not list else items
    if isinstance(v, DictVariable):
        return {k: fake_arg(i) for k, i in v.items.items()}
    if v.is_python_constant():
        return v.as_python_constant()
    raise GraphBreak(gb.VALUE_UNKNOWN, f"{v.describe()} cannot be passed to a tensor operation in a graph")


def _fake_args(args):
    return [fake_arg(a) for a in args]


def _target_name(kind: str, target: Any) -> str:
    if kind == "call_method":
        return f"Tensor.{target}"
    return getattr(target, "__qualname__", None) or getattr(target, "__name__", None) or str(target)


@contextlib.contextmanager
def warnings_issued():
    """Collect the warnings issued inside the block instead of showing them.

    Not ``warnings.catch_warnings``: that bumps the filters version, which empties
    every ``__warningregistry__``, so a "default"-action warning the user has
    already seen would be shown again by eager code after any compile.  Here an
    "always" filter is put in front of the user's filters *in place* (the version
    is untouched; "always" writes no registry entry) and ``_showwarnmsg`` records;
    both are restored on exit.  A warning the registry says was already shown is
    not issued, here as in eager code.
    """
    caught: list = []
    filters, show = warnings.filters, warnings._showwarnmsg
    saved = list(filters)
    filters.insert(0, ("always", None, Warning, None, 0))
    warnings._showwarnmsg = caught.append
    # C++ TORCH_WARN_ONCE warns on every call while warn-always is on: the fake run reports it
    # without using up the process's one warning, which eager's run (or Python's, after a break) issues
    warn_always = torch.is_warn_always_enabled()
    torch.set_warn_always(True)
    try:
        yield caught
    finally:
        torch.set_warn_always(warn_always)
        filters[:] = saved
        warnings._showwarnmsg = show


def _squeezes_data_dependent_size(kind, target, fake_args, fake_kwargs) -> bool:
    """``squeeze`` (all dimensions, or the given ones) over a size read from tensor data (a
    boolean mask's count)."""
    if not (kind == "call_method" and target == "squeeze" or target in (torch.squeeze, torch.Tensor.squeeze)):
        return False
    if not fake_args or not isinstance(fake_args[0], torch.Tensor):
        return False
    shape = fake_args[0].shape
    dims = fake_args[1] if len(fake_args) > 1 else fake_kwargs.get("dim")
    if dims is None:
        dims = range(len(shape))
    elif isinstance(dims, int):
        dims = [dims]
    try:
        return any(isinstance(shape[d], torch.SymInt) and free_unbacked_symbols(shape[d]) for d in dims)
    except (IndexError, TypeError):
        return False  # (the op raises: record_op's run says so)


def _mask_assignment_with_grad(tx, target, args) -> bool:
    """``target[index] = value`` with a boolean tensor in the index, grad mode on and the target or
    the value requiring grad."""
    if len(args) != 2 or not tx.output.grad_enabled or tx.output.backend_runs_graph_as_is:
        return False  # (backend eager runs the assignment as it is: its backward is autograd's own)
    index, value = args
    if not any(t.example.dtype == torch.bool for t in _tensors_in(index)):
        return False
    return target.example.requires_grad or any(t.example.requires_grad for t in _tensors_in(value))


def _tensors_in(v: VariableTracker, depth: int = 0):
    """The TensorVariables in ``v`` and the lists, tuples and dicts it holds (as _node_arg sees them)."""
    if isinstance(v, TensorVariable):
        yield v
    elif depth < 4 and isinstance(v, BaseListVariable):
        for item in v.items:
            yield from _tensors_in(item, depth + 1)
    elif depth < 4 and isinstance(getattr(v, "items", None), dict):
        for item in v.items.values():
            yield from _tensors_in(item, depth + 1)


def _not_held_by_graphs(kind: str, target, fake_args, fake_kwargs) -> Optional[str]:
    """Why a graph would not compute this op as eager does under a compiling backend (AOTAutograd's
    functionalization and decompositions), or None.  torch.compile breaks at each of these too;
    with backend "eager" (the graph's ops run as they are) they stay in the graph."""
    name = target if kind == "call_method" else getattr(target, "__name__", "")
    out = fake_kwargs.get("out")
    outs = out if isinstance(out, (tuple, list)) else (out,)
    if any(isinstance(o, torch.Tensor) and not o.is_contiguous() for o in outs):
        return "out= a tensor that is not contiguous (functionalized as a contiguous one)"
    if name in ("lstm", "gru", "rnn_tanh", "rnn_relu") and torch.is_grad_enabled() and any(
            isinstance(t, torch.Tensor) and t.requires_grad for t in torch.utils._pytree.tree_leaves(fake_args)):
        return "a recurrent network's fused op with gradients (AOTAutograd cannot save what its backward needs)"
    if name in ("lstm", "gru", "rnn_tanh", "rnn_relu"):
        # (input, hx, params, has_biases, num_layers, dropout, train, ...): the decomposition skips dropout
        for i, a in enumerate(fake_args[:-1]):
            if type(a) is float and a > 0 and fake_args[i + 1] is True:
                return "dropout between the layers of a recurrent network in training (its decomposition skips it)"
    if name == "random_" and (len(fake_args) > 1 or fake_kwargs):
        return "random_(from, to) (its graph code does not compile: `from` is a keyword)"
    return None


def record_op(tx, kind: str, target: Any, args: list, kwargs: dict) -> VariableTracker:
    """Run ``target`` on fake values and record it as an FX node.

    kind is "call_function" (target is a callable) or "call_method" (target is
    a Tensor method name and args[0] is the tensor).
    """
    for a in (*args, *kwargs.values()):
        for t in _tensors_in(a):
            t._check_grad_enabled_later(f"{_target_name(kind, target)}()")
    rg = kwargs.get("requires_grad")
    if rg is not None and rg.is_python_constant() and rg.as_python_constant() is True:
        # a new leaf that requires grad: a graph output would not be that leaf under AOTAutograd
        raise GraphBreak(gb.SIDE_EFFECT, f"{_target_name(kind, target)}(requires_grad=True) makes a leaf tensor")
    node_args = tuple(_node_arg(a) for a in args)
    node_kwargs = {k: _node_arg(v) for k, v in kwargs.items()}
    fake_args = _fake_args(args)
    fake_kwargs = {k: fake_arg(v) for k, v in kwargs.items()}
    if any(isinstance(a, torch.dtype) and a in _QUANTIZED_DTYPES for a in (*fake_args, *fake_kwargs.values())):
        # (the fake kernel of torch.quantize_per_tensor answers float32)
        raise GraphBreak(gb.UNSUPPORTED_CALL, f"{_target_name(kind, target)} makes a quantized tensor, which graphs "
                         "do not hold: Python runs it")
    held = None if tx.output.backend_runs_graph_as_is else _not_held_by_graphs(kind, target, fake_args, fake_kwargs)
    if held is not None:
        raise GraphBreak(gb.UNSUPPORTED_CALL, f"{_target_name(kind, target)}: {held}: Python runs it")
    if _squeezes_data_dependent_size(kind, target, fake_args, fake_kwargs):
        # the fake run assumes such a size is not 1 (and keeps the dimension): a mask's single
        # hit squeezes to a 0-d tensor in eager, so the graph's shapes would be wrong from here
        raise GraphBreak(gb.DATA_DEPENDENT, "squeeze() of a dimension whose size is read from tensor data")
    output = tx.output
    quiet = not _FAKE_LOG.disabled
    try:
        # a failing op is re-run by Python, which raises the user's error: FakeTensorMode's own
        # "failed while attempting to run meta" traceback log would only be noise on stderr
        _FAKE_LOG.disabled = True
        # the Python dispatcher, as torch.compile's fake runs have it: composite kernels (pad's
        # constant_pad_nd) take symbolic sizes only through their Python decompositions
        with output.fake_mode, enable_python_dispatcher(), warnings_issued() as caught, \
                _reading_real_tensors(output.fake_mode, runs_user_code(target)):
            _check_inplace_cast(kind, target, fake_args)
            if kind == "call_method":
                example = getattr(fake_args[0], target)(*fake_args[1:], **fake_kwargs)
            else:
                example = target(*fake_args, **fake_kwargs)
        if caught and not all(_replayable_warning(w) for w in caught):
            # Python runs the op so the warning comes from the user's line, once, as in eager
            raise GraphBreak(gb.OPERATION_RAISES, f"{_target_name(kind, target)} issues a warning: "
                                       f"{str(caught[0].message).splitlines()[0][:120]}")
    except (DataDependentOutputException, DynamicOutputShapeException) as e:
        raise GraphBreak(gb.DATA_DEPENDENT, f"{_target_name(kind, target)} depends on tensor data ({type(e).__name__})") from e
    except GuardOnDataDependentSymNode as e:  # needs the value of a number read from tensor data
        raise data_dependent_break(output.shapes, f"{_target_name(kind, target)}() needs", e) from e
    except GraphBreak:
        raise
    except Exception as e:  # noqa: BLE001 - the user's op fails: run it in Python so it raises for real
        if output.shapes.float_symbols:
            output.shapes.refuse_float_facts(torch.utils._pytree.tree_leaves((fake_args, fake_kwargs)))
        raise GraphBreak(
            gb.OPERATION_RAISES, f"{_target_name(kind, target)} raised {type(e).__name__} at trace time: {str(e).splitlines()[0] if str(e) else ''}"
        ) from e
    finally:
        if quiet:
            _FAKE_LOG.disabled = False
    for w in caught:  # issued whatever the data: replayed after the graph from the user's line
        VariableTracker.replay_warning(tx, str(w.message), w.category)
    if caught and kind == "call_function":
        target = _quiet(target)  # the graph's run must not issue it again (from the graph's code)
    output.shapes.note()
    if uses_default_dtype(example, fake_args, fake_kwargs):
        output.guard_default_dtype()
    example = _undefined_outputs_as_none(target, fake_args, fake_kwargs, example)
    node = output.create_node(kind, target, node_args, node_kwargs)
    output.shapes.bind_data_dependent(node, example, _target_name(kind, target))
    if isinstance(example, torch.Tensor):
        # in-place ops and out= return their argument itself: keep its tracker, so
        # `x.add_(1) is x` holds as in eager (the node stays in the graph)
        for arg, fake in zip([*args, *kwargs.values()], [*fake_args, *fake_kwargs.values()]):
            if fake is example and isinstance(arg, TensorVariable):
                node.meta["example_value"] = example
                return arg
    return wrap_op_result(tx, node, example)


# A graph node's target that runs the user's Python at run time (an autograd.Function's apply,
# a function under a torch.func transform: variables/autograd_function.py) carries this attribute.
# Its code may read real tensors (a global weight) that the trace guarded in its dry run: the
# fake run meets them as they are, and the real run reads them as eager does.
RUNS_USER_CODE = "_dynamo_lite_runs_user_code"


def runs_user_code(target) -> bool:
    return type(target) is types.FunctionType and target.__dict__.get(RUNS_USER_CODE, False) is True


@contextlib.contextmanager
def _reading_real_tensors(mode, on: bool):
    if not on:
        yield
        return
    saved = mode.allow_non_fake_inputs
    mode.allow_non_fake_inputs = True
    try:
        yield
    finally:
        mode.allow_non_fake_inputs = saved


_FAKE_LOG = logging.getLogger("torch._subclasses.fake_tensor")
_SYM_NODE_LOG = logging.getLogger("torch.fx.experimental.sym_node")
# Warnings a torch operation issues from its arguments' types alone, never from tensor data:
# the fake run issues them exactly when the real one does, so they are replayed, not broken on
# (torch.nn.functional's deprecated upsample* warn with stacklevel=2: the caller's line, the user's)
_REPLAYABLE_WARNINGS = ((UserWarning, "To copy construct from a tensor, it is recommended to use "
                                      "sourceTensor.detach().clone()"),
                        (UserWarning, "`nn.functional.upsample` is deprecated. "),
                        (UserWarning, "`nn.functional.upsample_nearest` is deprecated. "),
                        (UserWarning, "`nn.functional.upsample_bilinear` is deprecated. "))


@functools.lru_cache(maxsize=None)
def _quiet(fn):
    """``fn`` run with the warnings of _REPLAYABLE_WARNINGS ignored (they are replayed from the
    user's line instead).  The filter goes in front of the user's filters in place, as
    warnings_issued does: "ignore" writes no registry entry and the filters version is kept."""
    def quiet(*args, **kwargs):
        filters = warnings.filters
        saved = list(filters)
        for cat, prefix in _REPLAYABLE_WARNINGS:
            filters.insert(0, ("ignore", re.compile(re.escape(prefix)), cat, None, 0))
        try:
            return fn(*args, **kwargs)
        finally:
            filters[:] = saved
    quiet.__name__ = quiet.__qualname__ = f"{getattr(fn, '__name__', 'op')}_replayed_warnings"
    return quiet


def _replayable_warning(w) -> bool:
    return any(w.category is cat and str(w.message).startswith(prefix) for cat, prefix in _REPLAYABLE_WARNINGS)


def uses_default_dtype(example, fake_args, fake_kwargs) -> bool:
    """A floating result (or dtype: ``torch.result_type(int_tensor, 1.0)``) made without floating
    inputs or a dtype took torch.get_default_dtype() (torch.ones(2), torch.tensor([1.5]),
    int_tensor / 2): the graph is only valid for it."""
    dtype = example.dtype if isinstance(example, torch.Tensor) else example
    if not isinstance(dtype, torch.dtype) or not (dtype.is_floating_point or dtype.is_complex):
        return False
    for f in [*fake_args, *fake_kwargs.values()]:
        if isinstance(f, torch.dtype) or isinstance(f, torch.Tensor) and (f.is_floating_point() or f.is_complex()):
            return False
    return True


def _undefined_outputs_as_none(target: Any, fake_args: tuple, fake_kwargs: dict, example: Any) -> Any:
    """Outputs an op leaves undefined (None in Python) where its fake kernel makes an empty
    tensor: the attention weights of torch._native_multi_head_attention with need_weights=False
    (nn.MultiheadAttention's inference fast path)."""
    if target is torch._native_multi_head_attention and isinstance(example, tuple) and len(example) == 2:
        need = fake_args[10] if len(fake_args) > 10 else fake_kwargs.get("need_weights", True)
        if need is False:
            return (example[0], None)
    return example


_INPLACE_BINARY_METHODS = {"mul_", "__imul__", "div_", "__itruediv__", "true_divide_", "add_", "__iadd__",
                           "sub_", "__isub__"}
_INPLACE_BINARY_OPERATORS = {operator.imul, operator.itruediv, operator.iadd, operator.isub}


def _check_inplace_cast(kind: str, target: Any, fake_args: tuple) -> None:
    """Eager refuses a binary in-place op whose result type cannot be cast to self's
    dtype (int_tensor *= 0.5); the fake kernels of mul_/__imul__ do not check it."""
    if not (kind == "call_method" and target in _INPLACE_BINARY_METHODS
            or kind == "call_function" and target in _INPLACE_BINARY_OPERATORS):
        return
    other = fake_args[1] if len(fake_args) >= 2 else None
    # a symbolic number promotes as a Python number of its kind (its value does not matter)
    other = {torch.SymInt: 2, torch.SymFloat: 2.0, torch.SymBool: True}.get(type(other), other)
    if len(fake_args) < 2 or not isinstance(fake_args[0], torch.Tensor) or \
            not isinstance(other, (torch.Tensor, bool, int, float, complex)):
        return
    result = torch.result_type(fake_args[0], other)
    if target in ("div_", "__itruediv__", "true_divide_", operator.itruediv) and \
            not (result.is_floating_point or result.is_complex):
        result = torch.get_default_dtype()
    if not torch.can_cast(result, fake_args[0].dtype):
        raise RuntimeError(f"result type {result} can't be cast to the desired output type {fake_args[0].dtype}")


def untraced_tensor_kind(t: torch.Tensor) -> Optional[str]:
    """What makes ``t`` a tensor traces do not model ("a sparse_coo tensor", "a quantized
    tensor", "a nested tensor"), or None.  Their fake kernels are not exact (a sparse tensor's
    number of stored values is data; the fake of quantize_per_tensor is float32), so Python runs
    what makes or uses one."""
    if t.is_nested:
        return "a nested tensor"
    if t.layout is not torch.strided:
        return f"a {str(t.layout).replace('torch.', '')} tensor"
    if t.is_quantized or t.dtype in _QUANTIZED_DTYPES:  # (a fake's is_quantized is False)
        return "a quantized tensor"
    return None


_QUANTIZED_DTYPES = (torch.qint8, torch.quint8, torch.qint32, torch.quint4x2, torch.quint2x4)


def _untraced_result(example: Any) -> Optional[str]:
    for leaf in torch.utils._pytree.tree_leaves(example):
        if isinstance(leaf, torch.Tensor):
            kind = untraced_tensor_kind(leaf)
            if kind is not None:
                return kind
    return None


def wrap_op_result(tx, node: torch.fx.Node, example: Any) -> VariableTracker:
    output = tx.output
    kind = _untraced_result(example)
    if kind is not None:
        output.remove_node(node)
        raise GraphBreak(gb.UNSUPPORTED_CALL, f"{_target_name(node.op, node.target)} makes {kind}, which graphs "
                         "do not hold: Python runs it")
    if isinstance(example, torch.Tensor):
        node.meta["example_value"] = example
        return TensorVariable(node, example)
    if isinstance(example, _SYM_TYPES):
        node.meta["example_value"] = example
        return SymNodeVariable(example, output.shapes, node=node)
    if isinstance(example, torch.Size) and any(isinstance(e, _SYM_TYPES) for e in example):
        node.meta["example_value"] = example
        return SizeVariable([SymNodeVariable(e, output.shapes, make_node=functools.partial(
            output.create_node, "call_function", operator.getitem, (node, i), {}))
            if isinstance(e, _SYM_TYPES) else ConstantVariable(e) for i, e in enumerate(example)])
    if isinstance(example, torch.Size):
        output.remove_node(node)
        return SizeVariable([ConstantVariable(int(s)) for s in example])
    if isinstance(example, (tuple, list)) and any(isinstance(e, (torch.Tensor, *_SYM_TYPES)) for e in example):
        # (an autograd.Function's forward returning a tensor and a size: each item from the node)
        node.meta["example_value"] = example
        items = []
        for i, ex in enumerate(example):
            if isinstance(ex, torch.Tensor):
                sub = output.create_node("call_function", operator.getitem, (node, i), {})
                items.append(wrap_op_result(tx, sub, ex))
            elif isinstance(ex, _SYM_TYPES):
                items.append(SymNodeVariable(ex, output.shapes, make_node=functools.partial(
                    output.create_node, "call_function", operator.getitem, (node, i), {})))
            elif ex is None or isinstance(ex, (int, float, bool)):
                items.append(ConstantVariable(ex))
            else:
                raise GraphBreak(gb.VALUE_UNKNOWN, f"operation returned a {type(ex).__name__} inside a sequence")
        if hasattr(type(example), "n_fields"):  # torch.return_types structseq
            return StructSeqVariable(type(example), items)
        return ListVariable(items) if isinstance(example, list) else TupleVariable(items)
    if example is None or isinstance(example, (bool, int, float, complex, str, torch.dtype, torch.device)):
        # plain metadata: nothing to compute at run time (shapes are static)
        if not _folds_to_constant(node):
            output.remove_node(node)
            raise GraphBreak(gb.DATA_DEPENDENT, f"{_target_name(node.op, node.target)} returns a Python value the graph "
                                       "cannot compute (it depends on data, identity or global state)")
        if not _has_side_effect(node):
            output.remove_node(node)
        return ConstantVariable(example)
    if isinstance(example, (tuple, list)) and all(isinstance(e, (int, float, bool)) for e in example):
        if not _has_side_effect(node):  # (an op that writes its arguments and returns ``()`` stays)
            output.remove_node(node)
        items = [ConstantVariable(e) for e in example]
        return ListVariable(items) if isinstance(example, list) else TupleVariable(items)
    output.remove_node(node)
    raise GraphBreak(gb.VALUE_UNKNOWN, f"operation returned {type(example).__name__}, which a graph cannot hold")


def _takes_node(node: torch.fx.Node) -> bool:
    found = []
    torch.fx.node.map_arg((node.args, node.kwargs), lambda n: found.append(n) or n)
    return bool(found)


def _folds_to_constant(node: torch.fx.Node) -> bool:
    """May a non-tensor result of this node be taken from the fake run as a constant?
    Yes for operators and torch.nn.functional helpers (pure functions of metadata);
    no for Tensor methods that reach here (the metadata ones are answered before
    record_op: __repr__, __hash__, is_set_to, data pointers would come from the fake)
    and for other torch functions (get_num_threads(), set_flush_denormal(), ... read
    or write global state the graph does not hold)."""
    if node.op == "call_method":
        return _has_side_effect(node)
    module = static.module_name(node.target)
    if not static.is_torch_module_name(module) or module == "torch.nn.functional":
        return True
    name = getattr(node.target, "__name__", "")
    if name.startswith("__") and name.endswith("__"):
        return False  # torch.Tensor.__repr__(t), __hash__, __format__: answered by the fake
    # a torch function of tensors answering from their metadata (has_torch_function, is_complex)
    return _takes_node(node)


# checks that return nothing and raise at run time (kornia validates with torch._assert_async):
# kept in the graph although nothing uses their result
_ASSERTS = frozenset({torch._assert_async, torch.ops.aten._assert_async.default, torch.ops.aten._assert_async.msg,
                      torch.ops.aten._assert_scalar.default})


def _has_side_effect(node: torch.fx.Node) -> bool:
    """Must the node stay in the graph although nothing uses its result?  An in-place op, an
    ``out=`` variant (``torch.unbind_copy(x, out=[...])`` returns None), an operator whose schema
    writes an argument (``mylib::fill(Tensor x, *, Tensor(a!) out) -> ()``), an assert."""
    target = node.target
    if node.op == "call_method":
        return isinstance(target, str) and target.endswith("_") and not target.endswith("__")
    name = getattr(target, "__name__", "")
    return name.endswith("_") and not name.endswith("__") or target is operator.setitem or \
        (type(target) is not str and target in _ASSERTS) or "out" in node.kwargs or schema_writes(target)


def schema_writes(target) -> bool:
    """Does the operator (an OpOverload, or any overload of an OpOverloadPacket) write an argument?"""
    if isinstance(target, torch._ops.OpOverload):
        return target._schema.is_mutable
    if isinstance(target, torch._ops.OpOverloadPacket):
        return any(getattr(target, name)._schema.is_mutable for name in target.overloads())
    return False


# ---- symbolic ints (dynamic shapes) ---------------------------------------------------
_SYM_TYPES = (torch.SymInt, torch.SymBool, torch.SymFloat)
_SYM_PYTHON_TYPES = {torch.SymInt: int, torch.SymBool: bool, torch.SymFloat: float}


class SymNodeVariable(VariableTracker):
    """A symbolic int (or bool, float) of the trace: a size of a tensor with symbolic shape, an
    int argument that is symbolic, or arithmetic / comparisons on them.

    It is a Python constant only on demand: ``as_python_constant()`` (what code that needs a
    plain value calls: ``range()``, list indexing, ``int()``) specialises it -- the ShapeEnv
    records ``s == value`` and the entry is guarded on it (for a ``mark_dynamic`` dimension that
    is an error naming the line).  Arithmetic and comparisons stay symbolic (arith.py calls
    ``sym_operator``); a Python branch on a comparison guards on the branch taken.

    Attributes:
        value: the SymInt / SymBool / SymFloat (its node's expression is over input symbols).
        shapes: the trace's ShapeTracker (specialisation is noted there).
        node: the FX node computing it at run time, or None until ``as_node`` makes it with
            ``make_node`` (a size nobody passes to the graph costs no node).
    """

    symbolic = True

    float_computed = False  # computed from symbolic float arguments (sym_operator)
    # (guard text, pretty text, sources, value): the Python arithmetic that computed it from input
    # symbols and constants, in the traced code's order (sym_operator), or None
    py_number: Optional[tuple] = None

    def __init__(self, value, shapes, node=None, make_node=None, source=None):
        super().__init__(source)
        self.value = value
        self.shapes = shapes
        self.node = node
        self.make_node = make_node

    def _repr_body(self):
        return f"{type(self.value).__name__}({self.value.node.expr})"

    def describe(self):
        return f"symbolic {self.python_type().__name__} {self.value.node.expr}"

    def python_type(self):
        return _SYM_PYTHON_TYPES[type(self.value)]

    def iter(self, tx):
        # an int, float or bool is never iterable, whatever its value: TypeError, as Python raises it
        tx.raise_exception(ExceptionVariable(TypeError, [ConstantVariable(
            f"{self.python_type().__name__!r} object is not iterable")]))

    def as_node(self) -> torch.fx.Node:
        if self.node is None:
            self._make_operands_first()
            self.node = self.make_node()
            self.node.meta["example_value"] = self.value
        return self.node

    def _make_operands_first(self) -> None:
        """Make the nodes of not-yet-made symbolic operands, deepest first, without recursion:
        ``sum(x.size(0) for x in many)`` is a chain of hundreds of lazy additions."""
        order, stack, seen = [], list(getattr(self, "lazy_operands", ())), set()
        while stack:
            v = stack.pop()
            if not isinstance(v, SymNodeVariable) or v.node is not None or id(v) in seen:
                continue
            seen.add(id(v))
            order.append(v)
            stack.extend(getattr(v, "lazy_operands", ()))
        for v in reversed(order):
            if v.node is None:
                v.node = v.make_node()
                v.node.meta["example_value"] = v.value

    def is_python_constant(self):
        return True  # on demand, by specialising (see the class docstring)

    def as_python_constant(self):
        return SymNodeVariable.concrete(self.shapes, self.value)

    def constant_copy(self):
        raise NotImplementedError("a symbolic int is folded only by specialising it")

    @staticmethod
    def concrete(shapes, value):
        """The plain value of a SymInt/SymBool/SymFloat (or an int), specialising it.  A value
        read from tensor data has none at trace time: the graph breaks (DL0007)."""
        if not isinstance(value, _SYM_TYPES):
            return value
        what = "the truth of" if type(value) is torch.SymBool else f"{_SYM_PYTHON_TYPES[type(value)].__name__}() of"
        if _reads_a_float_from_data(value):
            raise data_dependent_break(shapes, what, value.node.expr)
        try:
            result = _SYM_PYTHON_TYPES[type(value)](value)
        except GuardOnDataDependentSymNode as e:
            # (a branch tests a SymBool through bool() on 3.13, through truthiness before)
            raise data_dependent_break(shapes, what, e) from e
        shapes.note()
        return result

    def truthiness(self, tx):
        if _reads_a_float_from_data(self.value):
            raise data_dependent_break(self.shapes, "the truth of", self.value.node.expr)
        try:
            result = bool(self.value)  # SymInt: guards s != 0, not s == value
        except GuardOnDataDependentSymNode as e:
            raise data_dependent_break(self.shapes, "the truth of", e) from e
        self.shapes.note()
        return result

    def var_getattr(self, tx, name):
        return ConstantVariable(self.as_python_constant()).var_getattr(tx, name)

    def call_method(self, tx, name, args, kwargs):
        return ConstantVariable(self.as_python_constant()).call_method(tx, name, args, kwargs)

    def reconstruct(self, cg):
        self.as_node()
        cg.reconstruct_tensor(self)

    def can_reconstruct(self):
        return True


def _reads_a_float_from_data(value) -> bool:
    """Does ``value`` (a SymBool / SymFloat / SymInt) depend on a float read from tensor data
    (``.item()`` of a floating tensor)?  Then no fact about it is known at trace time: torch's
    simplifier answers some anyway (``u > u`` is True, ``u * u >= 0`` is True), wrongly for
    NaN and infinities, so the trace never asks it."""
    expr = getattr(getattr(value, "node", None), "expr", None)
    return expr is not None and any(symbol_is_type(s, SymT.UNBACKED_FLOAT) for s in getattr(expr, "free_symbols", ()))


def data_dependent_break(shapes, what: str, error) -> GraphBreak:
    """The break where Python needs the value of a number read from tensor data (``.item()``,
    a size of ``nonzero()``'s result): guarding on it would be wrong (it changes with the data),
    so Python goes on from here with the real value.  ``error``: torch's
    GuardOnDataDependentSymNode, or the expression itself."""
    made = shapes.describe_data_values(getattr(error, "cond", error))
    return GraphBreak(gb.DATA_DEPENDENT, f"{what} a value read from tensor data ({made}): Python goes on from here "
                      "with the real value")


# largest tensor whose tolist() is unrolled into the graph (one node per element)
_TOLIST_MAX_ELEMENTS = 256


def _tolist(tx, tensor: TensorVariable) -> VariableTracker:
    """``t.tolist()`` with config.capture_scalar_outputs: nested lists of symbolic numbers, each
    ``t[i][j].item()`` in the graph (the shape is static; a larger tensor breaks)."""
    shape = tensor.example.shape
    if not all(type(s) is int for s in shape) or tensor.example.numel() > _TOLIST_MAX_ELEMENTS:
        raise GraphBreak(gb.DATA_DEPENDENT, f"Tensor.tolist() of a tensor of shape {tuple(shape)} (unrolled only up "
                         f"to {_TOLIST_MAX_ELEMENTS} elements of static shape): Python runs it")

    def build(t: VariableTracker, dims: tuple) -> VariableTracker:
        if not dims:
            return t.call_method(tx, "item", [], {})
        return ListVariable([build(t.getitem(tx, ConstantVariable(i)), dims[1:]) for i in range(dims[0])])

    return build(tensor, tuple(shape))


def symbolic_input(tx, value, source) -> VariableTracker:
    """The tracker of an int or float argument: symbolic when shapes.py says so, else None."""
    output = tx.output
    sym = output.shapes.int_symbol(value, source)
    if sym is None:
        return None
    if type(value) is float:
        # the graph takes it as a 0-d float64 tensor and reads it with item() (as a random draw)
        node = output.float_input(FloatTensorSource(source), value, sym)
        return SymNodeVariable(sym, output.shapes, node=node, source=source)
    node = output.symbol_node(sym.node.expr, source, value, sym)
    return SymNodeVariable(sym, output.shapes, node=node, source=source)


def metadata_result(tx, tensor: TensorVariable, name: str, args: tuple, value) -> VariableTracker:
    """The tracker of a tensor metadata answer (``x.shape``, ``x.size(1)``, ``x.numel()``):
    constants where static, SymNodeVariables where symbolic."""
    if isinstance(value, _SYM_TYPES):
        return _sym_metadata(tx, tensor, name, args, value)
    if isinstance(value, (tuple, list)) and any(isinstance(v, _SYM_TYPES) for v in value):
        items = [_sym_metadata(tx, tensor, name, (i,), v) if isinstance(v, _SYM_TYPES) else ConstantVariable(v)
                 for i, v in enumerate(value)]
        return SizeVariable(items) if isinstance(value, torch.Size) else TupleVariable(items)
    return wrap_constant_result(value)


_SYM_METADATA_OPS = {"size": torch.ops.aten.sym_size.int, "stride": torch.ops.aten.sym_stride.int,
                     "numel": torch.ops.aten.sym_numel.default, "nelement": torch.ops.aten.sym_numel.default,
                     "storage_offset": torch.ops.aten.sym_storage_offset.default}


def _sym_metadata(tx, tensor, name, args, value) -> VariableTracker:
    output = tx.output
    expr = value.node.expr
    if isinstance(expr, sympy.Symbol):
        source = output.shapes.symbol_source(expr)
        if source is not None:  # an input symbol: the graph reads it as a SymInt input
            hint = output.shapes.hint(expr)
            return SymNodeVariable(value, output.shapes, make_node=functools.partial(
                output.symbol_node, expr, source, hint, value))
    op = _SYM_METADATA_OPS.get(name)
    if op is None or (name in ("size", "stride") and len(args) != 1):
        raise GraphBreak(gb.VALUE_UNKNOWN, f"symbolic Tensor.{name}() with arguments {args}")
    node_args = (tensor.node, *args) if name in ("size", "stride") else (tensor.node,)
    return SymNodeVariable(value, output.shapes, make_node=functools.partial(
        output.create_node, "call_function", op, node_args, {}))


_COMPARISONS = frozenset({operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne})


_PY_ARITHMETIC = {operator.add: "+", operator.sub: "-", operator.mul: "*", operator.truediv: "/",
                  operator.neg: "-"}
_COMPARISON_TEXT = {operator.lt: "<", operator.le: "<=", operator.gt: ">", operator.ge: ">=", operator.eq: "==",
                    operator.ne: "!="}


def _py_term(shapes, var) -> Optional[tuple]:
    """(guard text, pretty text, sources, value) of a number as Python computes it, or None."""
    if isinstance(var, ConstantVariable):
        v = var.value
        return (repr(v), repr(v), (), v) if type(v) in (int, float) and math.isfinite(v) else None
    if not isinstance(var, SymNodeVariable):
        return None
    if var.py_number is not None:
        return var.py_number
    expr = getattr(getattr(var.value, "node", None), "expr", None)
    return shapes.python_number(expr) if isinstance(expr, sympy.Symbol) else None


def _py_arithmetic(shapes, fn, args) -> Optional[tuple]:
    """The Python arithmetic of ``fn(*args)`` over terms that have theirs (exact: the same float
    operations on the same values, in the same order), or None."""
    terms = [_py_term(shapes, a) for a in args]
    if any(t is None for t in terms):
        return None
    op = _PY_ARITHMETIC[fn]
    try:
        value = fn(*[t[3] for t in terms])
    except ArithmeticError:
        return None
    sources = tuple(dict.fromkeys(src for t in terms for src in t[2]))
    if len(terms) == 1:
        return f"({op}{terms[0][0]})", f"({op}{terms[0][1]})", sources, value
    (ta, pa, _, _), (tb, pb, _, _) = terms
    return f"({ta} {op} {tb})", f"({pa} {op} {pb})", sources, value


def _exact_float_comparison(shapes, fn, args) -> Optional[VariableTracker]:
    """A comparison of floats computed from float arguments, decided as Python decides it and
    guarded by the same Python arithmetic (shapes.exact_float_comparison), or None."""
    if len(args) != 2:
        return None
    terms = [_py_term(shapes, a) for a in args]
    if any(t is None for t in terms):
        return None
    (ta, pa, sa, va), (tb, pb, sb, vb) = terms
    sources = tuple(dict.fromkeys((*sa, *sb)))
    if not sources:
        return None
    result = bool(fn(va, vb))
    op = _COMPARISON_TEXT[fn]
    text, pretty = f"{ta} {op} {tb}", f"{pa} {op} {pb}"
    if not result:
        text, pretty = f"not ({text})", f"not ({pretty})"
    shapes.exact_float_comparison(text, pretty, sources)
    return ConstantVariable(result)


def _refuse_float_fold(shapes, fn, args) -> None:
    """Sympy's algebra folded arithmetic on a symbolic float to a number (``s * 0.0`` is 0, which
    Python computes as -0.0 for a negative s): a float argument's frame is traced again with static
    inputs; a float read from tensor data (``t.item()``) breaks, and Python computes it."""
    floats = [a for a in args if isinstance(a, SymNodeVariable) and isinstance(a.value, torch.SymFloat)]
    if any(shapes.is_float_input(a.value) for a in floats):
        shapes.refuse_computed_float_comparison(fn)
    if floats:
        raise GraphBreak(gb.DATA_DEPENDENT, f"{getattr(fn, '__name__', fn)} of a float read from tensor data, "
                         "which the graph's symbolic algebra would round otherwise")


def _may_be_complex_power(base, exponent) -> bool:
    """``base ** exponent`` with a symbolic float base not known to be >= 0 and an exponent that
    is not an integer constant (Python's float power is complex for a negative base)."""
    if not (isinstance(base, SymNodeVariable) and isinstance(base.value, torch.SymFloat)):
        return False
    if isinstance(exponent, ConstantVariable) and type(exponent.value) in (int, bool):
        return False
    if isinstance(exponent, ConstantVariable) and type(exponent.value) is float and exponent.value.is_integer():
        return False
    expr = base.value.node.expr
    return not bool(getattr(expr, "is_nonnegative", False))


def sym_operator(tx, fn, args: list) -> VariableTracker:
    """``fn`` (an ``operator`` function) on symbolic ints and plain numbers: a symbolic result
    (its node made on use); anything else specialises the symbolic operands and folds."""
    if fn in (operator.pow, operator.ipow) and len(args) == 2 and _may_be_complex_power(*args):
        # a negative float to a fractional power is complex in Python; the graph's symbolic float
        # would stay real: Python computes it (a float argument: traced again with static floats)
        base = args[0]
        if isinstance(base, SymNodeVariable) and tx.output.shapes.is_float_input(base.value):
            tx.output.shapes.refuse_computed_float_comparison(fn)
        raise GraphBreak(gb.DATA_DEPENDENT, "a float read from tensor data to a fractional power (complex if it "
                         "is negative)")
    if all(isinstance(a, SymNodeVariable) or isinstance(a, ConstantVariable) and type(a.value) in (int, float, bool)
           for a in args):
        quiet = not _SYM_NODE_LOG.disabled  # (it logs a warning before raising: no user line of eager's)
        _SYM_NODE_LOG.disabled = True
        try:
            example = fn(*[fake_arg(a) for a in args])
        except Exception:  # noqa: BLE001 - no symbolic rule for it: fold on plain values below
            example = None
        finally:
            if quiet:
                _SYM_NODE_LOG.disabled = False
        tx.output.shapes.note()
        if isinstance(example, _SYM_TYPES):
            output = tx.output
            if example.node.expr.is_number:
                _refuse_float_fold(output.shapes, fn, args)
            computed = [a for a in args if isinstance(a, SymNodeVariable) and a.float_computed]
            if computed and fn in _COMPARISONS:
                exact = _exact_float_comparison(output.shapes, fn, args)
                if exact is None:
                    output.shapes.refuse_computed_float_comparison(fn)
                return exact
            result = SymNodeVariable(example, output.shapes, make_node=lambda: output.create_node(
                "call_function", fn, tuple(_node_arg(a) for a in args), {}))
            result.lazy_operands = tuple(args)  # made before it (as_node)
            # a float computed from float arguments: comparing it is guarded as Python computes it,
            # or refused (shapes.py)
            result.float_computed = bool(computed) or isinstance(example, torch.SymFloat) and any(
                isinstance(a, SymNodeVariable) and output.shapes.is_float_input(a.value) for a in args)
            if result.float_computed and fn in _PY_ARITHMETIC:
                result.py_number = _py_arithmetic(output.shapes, fn, args)
            return result
        if example is not None and type(example) in (int, float, bool):
            _refuse_float_fold(tx.output.shapes, fn, args)  # (``(a + b) - a == b`` is True)
            return ConstantVariable(example)
    values = [a.as_python_constant() for a in args]
    try:
        result = fn(*values)
    except Exception as e:  # noqa: BLE001 - let Python raise it for real
        raise GraphBreak(gb.OPERATION_RAISES, f"{getattr(fn, '__name__', fn)} raised {type(e).__name__} at trace time") from e
    return wrap_constant_result(result)


# ---- range() over symbolic ints ------------------------------------------------------
_RANGE_ITERATOR = type(iter(range(0)))


class SymRangeVariable(VariableTracker):
    """``range(start, stop, step)`` where ``start`` or ``stop`` is a symbolic int (``step`` is
    specialised: its sign decides the comparisons).

    Iterating it (``SymRangeIteratorVariable``) keeps the bounds symbolic: each item is compared
    with ``stop`` through the ShapeEnv, so a loop whose first iteration ends in a graph break (the
    rest runs natively, the body as a loop-body function) needs only ``n >= 1`` of a symbolic
    ``n``, not ``n == value``.  Everything else (``len()``, ``in``, indexing, ``list()``,
    ``reversed()``) goes through ``as_python_constant()``, which specialises the bounds (guards
    ``n == value``), as ``SymNodeVariable`` does.

    Attributes:
        parts: [start, stop, step] trackers: ConstantVariable ints or SymNodeVariable SymInts
            (step always a ConstantVariable, never 0).
        shapes: the trace's ShapeTracker.
    """

    def __init__(self, parts: list, shapes):
        super().__init__()
        self.parts = parts
        self.shapes = shapes

    def _repr_body(self):
        return ", ".join(repr(p) for p in self.parts)

    def describe(self):
        return "range with a symbolic bound"

    def python_type(self):
        return range

    def is_python_constant(self):
        return True  # on demand, by specialising (see the class docstring)

    def as_python_constant(self):
        return range(*[SymNodeVariable.concrete(self.shapes, _sym_value(p)) for p in self.parts])

    def constant_copy(self):
        raise NotImplementedError("a symbolic range is folded only by specialising it")

    def has_len(self):
        return True

    def _constant(self) -> ConstantVariable:
        return ConstantVariable(self.as_python_constant())

    def iter(self, tx):
        return SymRangeIteratorVariable(self)

    def unpack(self, tx):
        return self._constant().unpack(tx)

    def contains(self, tx, item):
        return self._constant().contains(tx, item)

    def var_getattr(self, tx, name):
        if name in ("start", "stop", "step"):
            return self.parts[("start", "stop", "step").index(name)]
        return self._constant().var_getattr(tx, name)

    def call_method(self, tx, name, args, kwargs):
        return self._constant().call_method(tx, name, args, kwargs)

    def reconstruct(self, cg):
        cg.load_callable(range)
        for p in self.parts:
            cg.reconstruct(p)
        cg.call(3)

    def can_reconstruct(self):
        return all(p.can_reconstruct() for p in self.parts)


def _sym_value(v: VariableTracker):
    return v.value if isinstance(v, SymNodeVariable) else v.as_python_constant()


def make_range(tx, args: list) -> Optional[VariableTracker]:
    """``range(*args)`` when an argument is a symbolic int (None: not ours; the caller folds it)."""
    if not any(isinstance(a, SymNodeVariable) and a.python_type() is int for a in args) or not 1 <= len(args) <= 3:
        return None
    if not all(isinstance(a, SymNodeVariable) and a.python_type() is int or
               isinstance(a, ConstantVariable) and type(a.value) in (int, bool) for a in args):
        return None
    parts = [ConstantVariable(0), args[0], ConstantVariable(1)] if len(args) == 1 else list(args) + [ConstantVariable(1)]
    parts = [p if isinstance(p, SymNodeVariable) else ConstantVariable(int(p.value)) for p in parts[:3]]
    step = parts[2]
    if isinstance(step, SymNodeVariable):
        parts[2] = step = ConstantVariable(step.as_python_constant())  # the sign decides the loop: specialised
    if step.value == 0:
        return None  # ValueError: raised by the caller's folding
    return SymRangeVariable(parts, tx.output.shapes)


class SymRangeIteratorVariable(LazyIteratorVariable):
    """``iter()`` of a ``SymRangeVariable``: items ``start + i * step`` while they are before
    ``stop``.  A comparison the ShapeEnv knows from the symbols' ranges adds nothing (``0 < n``
    and ``1 < n`` when n >= 2: those iterations stay in the graph).  At the first one it does not
    know, a for loop of the compiled frame whose body can be a loop-body function
    (codegen/loop_bodies.py) breaks the graph (DL0041): the loop goes on natively and its body is
    compiled once for every n.  Anywhere else (``next()``, ``list()``, a loop that cannot be made
    a function, a loop in an inlined call) the comparison
    is guarded (``n > i``) while the loop goes on, and when it ends the bound is specialised
    (``n == value``): a loop unrolled to its end in one graph is for one ``n`` only.
    Rebuilt after a graph as ``iter(range(start, stop, step))`` advanced to the same item.

    Attributes:
        range: the SymRangeVariable iterated.
        index: items produced so far.
    """

    def __init__(self, rng: SymRangeVariable):
        super().__init__(_RANGE_ITERATOR)
        self.range = rng

    def next_item(self, tx):
        if self.exhausted:
            return None
        start, stop, step = self.range.parts
        offset = self.index * step.value
        shapes = self.range.shapes
        cur = _sym_value(start) + offset
        stop_v = _sym_value(stop)
        more = cur < stop_v if step.value > 0 else cur > stop_v
        if isinstance(more, torch.SymBool):
            if statically_known_true(more):
                more = True
            elif tx.at_loop_that_runs_natively():
                # unrolled, the graph would be right for one n only: end it here, before the
                # iterations that not every n runs; the loop goes on natively and its body is
                # compiled once as a loop-body function for every n
                raise GraphBreak(gb.SYMBOLIC_RANGE_LOOP, f"for loop over range() up to symbolic "
                                 f"{stop_v.node.expr if isinstance(stop_v, torch.SymInt) else stop_v}, "
                                 f"item {self.index}: the loop runs natively, its body as a function")
            elif more.node.hint:
                more = bool(more)  # guarded: the loop goes on for this n and every larger one
                shapes.note()
            else:  # the loop ends here: this trace is for this n only
                for p in (start, stop):
                    if isinstance(p, SymNodeVariable):
                        p.as_python_constant()
                more = False
        if not more:
            self.exhausted = True
            return None
        self.index += 1
        if isinstance(start, SymNodeVariable):
            return start if offset == 0 else sym_operator(tx, operator.add, [start, ConstantVariable(offset)])
        return ConstantVariable(cur)

    def reconstruct(self, cg):
        cg.load_callable(runtime.range_iterator_at)
        cg.reconstruct(self.range)
        cg.load_const(self.index)
        cg.call(2)

    def can_reconstruct(self):
        return self.range.can_reconstruct()
