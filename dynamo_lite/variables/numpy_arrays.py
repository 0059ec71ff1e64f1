"""numpy inside graphs: ndarrays and numpy scalars backed by graph tensors, computed by torch._numpy.

An ndarray the trace makes or reads (an argument, ``Tensor.numpy()``, ``np.arange(6)``) is a
``NumpyArrayVariable``: a graph tensor with the array's dtype and shape, shown to the code as
an ``np.ndarray``.  A numpy scalar computed in the graph (``a.sum()``, ``a[0]``) is the same
tracker with ``scalar=True`` (a 0-d tensor shown as ``np.float64``...).  Numpy scalars that are
known at trace time (``np.int64(3)``, ``np.pi * np.float32(2)``) are plain constants
(constant.py folds them by running numpy), and numpy callables (functions, ufuncs, scalar types)
are ``NumpyFunctionVariable``.

How a numpy operation enters the graph (``call_numpy``): its arguments become a template (arrays
are slots, everything else is a constant), and one FX node calls a wrapper that turns the slot
tensors into ``torch._numpy`` arrays, calls torch._numpy's function of the same name and returns
tensors.  Before the node is kept, numpy itself answers on stand-ins of the same dtypes and
shapes (broadcast ones, numpy scalars of the same types): the result's kind (ndarray, numpy
scalar), dtype and shape must equal torch._numpy's, else the graph breaks (DL0046).  So dtype
promotion corner cases, scalar-vs-array results and warnings numpy would issue are numpy's.

What breaks instead of being traced (the note the brief asks for):
- in-place mutation of any array (``a[i] = v``, ``a += b``, ``out=``, ``fill``/``sort``/...,
  ``np.copyto``...): DL0047.  Eager numpy runs it, so every alias sees it exactly.
- ``np.random.*`` and random Generators: DL0048 (numpy's global RNG state stays eager's).
- numpy functions with no torch._numpy counterpart, tensors passed to numpy, object / string /
  structured / byte-swapped / read-only / negatively strided arrays, unsigned 16-64 bit dtypes,
  and arrays that share memory with another array or tensor argument (``f(torch.from_numpy(a),
  a)``: an in-place tensor op would change the array behind the graph's back; guarded): DL0045.
- results torch._numpy would give differently (dtype, shape, scalar vs array), functions whose
  result is not unique (argsort tie order, eig/svd/qr signs), a warning numpy issues on the
  stand-ins: DL0046.
- reading data out (``bool(a)``, ``float(s)``, ``a.tolist()``, ``a.item()``): the usual DL0007.
Floating-point sums may differ from numpy's pairwise summation in the last bits (as under
torch.compile).

Array arguments are graph inputs: the generated code passes ``torch.as_tensor(a)`` (same
memory), guarded on type, dtype, shape, strides and writeability (their sizes stay static: a new
shape recompiles); arrays returned or live at a break are rebuilt with ``Tensor.numpy()`` (numpy
scalars with ``[()]``).  ``Tensor.numpy()`` of a tensor with symbolic sizes keeps them symbolic.
Tested by tests/torch/test_numpy_in_graph.py.
"""
from __future__ import annotations

import dataclasses
import operator
import types
import weakref
from typing import Any, Optional

import numpy as np
import torch
import torch._numpy as tnp

from .. import graph_breaks as gb
from .. import guards
from .. import runtime
from ..exc import GraphBreak
from ..source import Source
from .base import IdentityKey, KnownValueVariable, VariableTracker
from .constant import ConstantVariable, InputConstantVariable
from .folding import wrap_constant_result
from .methods import BoundMethodOfVariable
from .sequences import BaseListVariable, ListVariable, SliceVariable, TupleVariable
from .tensor import record_op, SymNodeVariable, TensorVariable, warnings_issued

# numpy dtypes a graph tensor holds exactly (torch's uint16/32/64 support too few ops)
_TORCH_DTYPES = {np.dtype(k): v for k, v in [
    (np.bool_, torch.bool), (np.uint8, torch.uint8), (np.int8, torch.int8), (np.int16, torch.int16),
    (np.int32, torch.int32), (np.int64, torch.int64), (np.float16, torch.float16),
    (np.float32, torch.float32), (np.float64, torch.float64), (np.complex64, torch.complex64),
    (np.complex128, torch.complex128)]}
_NUMPY_DTYPES = {v: k for k, v in _TORCH_DTYPES.items()}

# ndarray methods that write into the array
_INPLACE_METHODS = {"fill", "sort", "partition", "put", "itemset", "resize", "setflags", "setfield", "byteswap",
                    "__setitem__", "__delitem__", "__iadd__", "__isub__", "__imul__", "__itruediv__",
                    "__ifloordiv__", "__imod__", "__ipow__", "__imatmul__", "__iand__", "__ior__", "__ixor__",
                    "__ilshift__", "__irshift__"}
# ndarray methods that read data out of the graph or leave numpy
_DATA_METHODS = {"item": "ndarray.item() reads a value out of the array",
                 "tolist": "ndarray.tolist() reads values out of the array",
                 "tobytes": "ndarray.tobytes() reads the array's bytes",
                 "tostring": "ndarray.tostring() reads the array's bytes",
                 "__bool__": "bool() of a numpy value depends on its data",
                 "__int__": "int() of a numpy value depends on its data",
                 "__float__": "float() of a numpy value depends on its data",
                 "__complex__": "complex() of a numpy value depends on its data",
                 "__index__": "using a numpy value as an index depends on its data",
                 "__array__": "__array__ hands the array itself out",
                 "nonzero": "ndarray.nonzero() has a data-dependent output shape",
                 "__repr__": "repr() of a numpy value shows its data", "__str__": "str() of a numpy value shows its data",
                 "__format__": "formatting a numpy value shows its data", "__hash__": "hash() of a numpy value"}
# numpy functions that write into an argument
_INPLACE_FUNCTIONS = {"copyto", "put", "place", "putmask", "fill_diagonal", "put_along_axis"}
# numpy functions whose result torch computes differently: not unique (sign and order conventions
# of decompositions, tie order of unstable sorts)
_NOT_UNIQUE = {"argsort", "argpartition", "partition", "lexsort", "eig", "eigh", "eigvals", "svd", "qr", "lstsq",
               "sort_complex"}
_SHAPE_ATTRS = {"shape", "ndim", "size", "dtype", "itemsize", "nbytes"}
_GRAPH_ATTRS = {"T", "mT", "real", "imag"}
_NAMESPACES = ((np, tnp), (np.linalg, tnp.linalg), (np.fft, tnp.fft))


def is_numpy_dtype_supported(dtype) -> bool:
    return dtype in _TORCH_DTYPES and dtype.isnative


def numpy_dtype(torch_dtype: torch.dtype):
    dt = _NUMPY_DTYPES.get(torch_dtype)
    if dt is None:
        raise GraphBreak(gb.NUMPY_UNSUPPORTED, f"no numpy dtype for {torch_dtype}")
    return dt


# ---- trackers -------------------------------------------------------------------------------------
class NumpyArrayVariable(VariableTracker):
    """An ndarray (or a numpy scalar, ``scalar=True``) whose data is a graph tensor.

    Attributes:
        tensor: the TensorVariable of the graph tensor holding the data (same dtype and shape;
            a 0-d tensor for a scalar).  Its node is a placeholder for an array argument.
        scalar: True for a numpy scalar (np.float64, np.int64, np.bool_...), False for an ndarray.
        source: where an array argument was read (it is rebuilt from there: never mutated in the
            trace, since in-place writes break); None for values made in the trace, which
            codegen rebuilds once from the graph output (``mutable_local``).
    """

    def __init__(self, tensor: TensorVariable, scalar: bool = False, source: Optional[Source] = None):
        super().__init__(source)
        self.tensor = tensor
        self.scalar = scalar
        self.mutable_local = source is None  # rebuilt once; every name of it shares the object

    def _repr_body(self):
        return f"{self.dtype}{list(self.tensor.example.shape)}{' scalar' if self.scalar else ''}"

    @property
    def dtype(self):
        return numpy_dtype(self.tensor.example.dtype)

    def describe(self):
        return f"numpy {self.dtype.type.__name__}" if self.scalar else f"ndarray ({self.dtype})"

    def python_type(self):
        return self.dtype.type if self.scalar else np.ndarray

    def truthiness(self, tx):
        return None

    def identity_key(self):
        return IdentityKey(self, ("var", id(self)))

    def shape(self, tx) -> tuple:
        """The shape as plain ints (a symbolic size is specialised: the code reads it)."""
        return tuple(SymNodeVariable.concrete(tx.output.shapes, s) for s in self.tensor.example.shape)

    def shape_hint(self) -> tuple:
        """The shape of the arrays the trace was made for, without specialising symbolic sizes (the
        stand-ins numpy checks an operation on: its result's dtype and kind do not depend on sizes
        other than the 0 and 1 a graph specialises, and torch guards what its kernels check)."""
        return _hints(self.tensor.example.shape)

    # ---- protocol --------------------------------------------------------------------------------
    def var_getattr(self, tx, name):
        if name == "__class__":
            return tx.wrap(self.python_type(), None)
        if name in _SHAPE_ATTRS:
            shape = self.shape(tx)
            size = 1
            for s in shape:
                size *= s
            dt = self.dtype
            value = {"shape": shape, "ndim": len(shape), "size": size, "dtype": dt,
                     "itemsize": dt.itemsize, "nbytes": size * dt.itemsize}[name]
            return ConstantVariable(value) if name == "dtype" else wrap_constant_result(value)
        if name in _GRAPH_ATTRS:
            return call_numpy(tx, ("attr", name), [self], {})
        owner = self.python_type()
        if callable(getattr(owner, name, None)):
            return NumpyMethodVariable(self, name)
        raise GraphBreak(gb.NUMPY_UNSUPPORTED, f"attribute {name!r} of {self.describe()} is not traced")

    def call_method(self, tx, name, args, kwargs):
        if name in _INPLACE_METHODS and not self.scalar:
            raise GraphBreak(gb.NUMPY_INPLACE, f"ndarray.{name}() writes into the array")
        if name in _DATA_METHODS:
            raise GraphBreak(gb.DATA_DEPENDENT, _DATA_METHODS[name])
        if name == "__getattribute__" or name in _SHAPE_ATTRS | _GRAPH_ATTRS:
            return super().call_method(tx, name, args, kwargs)
        if name == "__len__" and not args and not kwargs:
            return ConstantVariable(self.len(tx))
        if name in _INPLACE_METHODS and name.startswith("__i"):  # a scalar's s += 1 is s + 1 (immutable)
            name = "__" + name[3:]
        if "out" in kwargs:
            raise GraphBreak(gb.NUMPY_INPLACE, f"{name}(out=...) writes into an array")
        return call_numpy(tx, ("method", name), [self, *args], kwargs)

    def getitem(self, tx, key):
        return call_numpy(tx, ("method", "__getitem__"), [self, key], {})

    def setitem(self, tx, key, value):
        raise GraphBreak(gb.NUMPY_INPLACE, "item assignment writes into the array")

    def setattr(self, tx, name, value):
        raise GraphBreak(gb.NUMPY_INPLACE, f"setting {self.describe()}.{name}")

    def contains(self, tx, item):
        raise GraphBreak(gb.DATA_DEPENDENT, "`in` on an ndarray depends on its data")

    def has_len(self):
        return not self.scalar and self.tensor.example.dim() > 0

    def len(self, tx):
        if not self.has_len():
            raise GraphBreak(gb.OPERATION_RAISES, f"len() of {self.describe()} (TypeError)")
        return self.shape(tx)[0]

    def unpack(self, tx):
        return [self.getitem(tx, ConstantVariable(i)) for i in range(self.len(tx))]

    def reconstruct(self, cg):
        if self.source is not None:
            self.source.reconstruct(cg)
            return
        cg.load_callable(runtime.numpy_scalar_of if self.scalar else runtime.numpy_array_of)
        cg.reconstruct_tensor(self.tensor)
        cg.call(1)

    def can_reconstruct(self):
        return True


class NumpyMethodVariable(BoundMethodOfVariable):
    """A bound method of a traced ndarray or numpy scalar (``a.sum``): calling it is
    ``call_method``; it rebuilds as ``array.name``."""

    def python_type(self):
        return types.BuiltinMethodType


class NumpyFunctionVariable(KnownValueVariable):
    """A numpy callable: a function (np.mean, np.linalg.norm), a ufunc (np.sin) or a scalar type
    (np.float32).  Its value is known (``as_python_constant``: ``dtype=np.float32`` passes it on);
    without a source it rebuilds as a constant (type(a.sum()) is the module-level np.float64)."""

    def __init__(self, value, source=None):
        super().__init__(source)
        self.value = value

    def _repr_body(self):
        return _qualname(self.value)

    def describe(self):
        return _qualname(self.value)

    def var_getattr(self, tx, name):
        if name in ("__name__", "__qualname__", "__module__", "__doc__") or \
                isinstance(self.value, np.ufunc) and name in ("nin", "nout", "nargs", "ntypes", "identity"):
            return wrap_constant_result(getattr(self.value, name))
        raise GraphBreak(gb.NUMPY_UNSUPPORTED, f"attribute {name!r} of {self.describe()} is not traced")

    def call_function(self, tx, args, kwargs):
        value = self.value
        name = _qualname(value)
        if is_numpy_random(value):
            raise GraphBreak(gb.NUMPY_RANDOM, f"{name}() uses numpy's random state")
        short = getattr(value, "__name__", "")
        if short in _INPLACE_FUNCTIONS or "out" in kwargs:
            raise GraphBreak(gb.NUMPY_INPLACE, f"{name}() writes into an array")
        if short in _NOT_UNIQUE:
            raise GraphBreak(gb.NUMPY_SEMANTICS, f"{name}() has no unique answer (torch may order or sign it "
                             "differently)")
        if value in _METADATA_FUNCTIONS:
            return _metadata_call(tx, value, args, kwargs)
        counterpart = tnp_counterpart(value)
        pure = counterpart is not None or isinstance(value, (np.ufunc, type))  # (np.seterr is not)
        if pure and not any(_holds_array(a) for a in [*args, *kwargs.values()]):
            folded = _fold(tx, value, args, kwargs)
            if folded is not None:
                return folded
        if counterpart is None:
            raise GraphBreak(gb.NUMPY_UNSUPPORTED, f"{name}() has no torch._numpy counterpart")
        return call_numpy(tx, ("fn", counterpart, short), args, kwargs, numpy_fn=value)


# numpy functions answering from dtypes and shapes only: computed at trace time on stand-ins
# (shapes read this way are specialised), their result a constant
_METADATA_FUNCTIONS = {np.dtype, np.result_type, np.promote_types, np.can_cast, np.issubdtype, np.isscalar,
                       np.ndim, np.shape, np.size, np.iscomplexobj, np.isrealobj, np.min_scalar_type}


def _metadata_call(tx, fn, args, kwargs) -> VariableTracker:
    slots: list = []
    template = ([_template(tx, a, slots) for a in args], {k: _template(tx, v, slots) for k, v in kwargs.items()})
    stand_ins = [np.broadcast_to(np.ones((), s.dtype), s.shape(tx)) if not s.scalar else s.dtype.type(1)
                 for s in slots]
    real_args, real_kwargs = _fill(template, stand_ins, _for_numpy)
    with warnings_issued() as caught:
        try:
            result = fn(*real_args, **real_kwargs)
        except Exception as e:  # noqa: BLE001 - numpy raises it for real
            raise GraphBreak(gb.OPERATION_RAISES, f"{_qualname(fn)}() raised {type(e).__name__} at trace time") from e
    if caught:
        raise GraphBreak(gb.NUMPY_SEMANTICS, f"{_qualname(fn)}() issues a warning: {str(caught[0].message)[:120]}")
    return wrap_constant_result(result)


def _holds_array(v) -> bool:
    if isinstance(v, NumpyArrayVariable):
        return True
    if isinstance(v, BaseListVariable):
        return any(_holds_array(i) for i in v.items)
    return False


def _fold(tx, fn, args, kwargs) -> Optional[VariableTracker]:
    """numpy on constants (np.int64(3), np.sqrt(2.0), np.float32(np.pi)): the real call, when its
    result is an immutable number; None when the result is an array (it is made in the graph)."""
    try:
        values = [a.constant_copy() for a in args]
        kw = {k: v.constant_copy() for k, v in kwargs.items()}
    except NotImplementedError:
        return None
    with np.errstate(all="raise"), warnings_issued() as caught:
        try:
            result = fn(*values, **kw)
        except Exception as e:  # noqa: BLE001 - numpy raises it for real (or warns)
            raise GraphBreak(gb.OPERATION_RAISES, f"{_qualname(fn)}() raised {type(e).__name__} at trace time") from e
    if caught:
        raise GraphBreak(gb.NUMPY_SEMANTICS, f"{_qualname(fn)}() issues a warning: {caught[0].message}")
    if isinstance(result, np.generic) and result.dtype.kind in "biufc" or \
            type(result) in (int, float, bool, complex) or isinstance(result, (np.finfo, np.iinfo, np.dtype)):
        return ConstantVariable(result)  # (finfo / iinfo are immutable and cached by numpy)
    if isinstance(result, np.ndarray):
        return None
    raise GraphBreak(gb.NUMPY_UNSUPPORTED, f"{_qualname(fn)}() returned {type(result).__name__}")


def _qualname(value) -> str:
    module = getattr(value, "__module__", None) or "numpy"
    name = getattr(value, "__qualname__", None) or getattr(value, "__name__", None) or type(value).__name__
    return f"{'np' if module.split('.')[0] == 'numpy' and module in ('numpy', 'numpy._core.numeric') else module}.{name}"


def is_numpy_random(value) -> bool:
    module = getattr(value, "__module__", None) or ""
    owner = getattr(value, "__self__", None)
    return module.startswith("numpy.random") or isinstance(owner, (np.random.RandomState, np.random.Generator,
                                                                  np.random.BitGenerator))


def is_numpy_callable(value) -> bool:
    """A numpy function, ufunc or scalar type (the values NumpyFunctionVariable stands for)."""
    if isinstance(value, np.ufunc) or isinstance(value, type) and issubclass(value, np.generic) or \
            any(value is t for t in (np.dtype, np.finfo, np.iinfo)):  # (== on numpy objects is elementwise)
        return True
    if isinstance(value, types.MethodType):
        return isinstance(value.__self__, (np.random.RandomState, np.random.Generator))
    if isinstance(value, (types.FunctionType, types.BuiltinFunctionType)) or \
            type(value).__name__ in ("_ArrayFunctionDispatcher", "cython_function_or_method"):
        module = getattr(value, "__module__", None) or ""
        return module.split(".")[0] == "numpy" or is_numpy_random(value)
    return False


def tnp_counterpart(value):
    """torch._numpy's function of the same name as numpy's ``value`` (None: none)."""
    name = getattr(value, "__name__", None)
    if not name:
        return None
    for ours, theirs in _NAMESPACES:
        if getattr(ours, name, None) is value:
            return getattr(theirs, name, None) or getattr(theirs, name + "_", None)  # np.bool is tnp.bool_
    return None


# (every array argument numpy sees at trace time is a read-only stand-in: an operation that would
# write into one, e.g. a positional ufunc output np.add(a, b, c), raises there and breaks)
# ---- one numpy operation in the graph ----------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class _Slot:
    """Where the i-th array argument goes in a call template."""

    index: int


@dataclasses.dataclass(frozen=True)
class _Scalar:
    """A numpy scalar constant in a call template (torch._numpy gets a 0-d array of its dtype:
    numpy scalars are not weak like Python numbers)."""

    value: Any


@dataclasses.dataclass(frozen=True)
class _DType:
    """A dtype in a call template (np.float32, np.dtype("int16"), float): torch._numpy gets its
    numpy name ("float32"; float -> "float64" as numpy maps it)."""

    value: Any


def _template(tx, v: VariableTracker, slots: list):
    if isinstance(v, NumpyArrayVariable):
        slots.append(v)
        return _Slot(len(slots) - 1)
    if isinstance(v, TensorVariable):
        raise GraphBreak(gb.NUMPY_UNSUPPORTED, "a torch tensor passed to numpy (use Tensor.numpy())")
    if isinstance(v, SymNodeVariable):
        return v.as_python_constant()
    if isinstance(v, SliceVariable) and not v.is_python_constant():
        return slice(*[_template(tx, p, slots) for p in v.parts])
    if isinstance(v, BaseListVariable) and not v.is_python_constant():
        items = [_template(tx, i, slots) for i in v.items]
        return items if v.python_type() is list else tuple(items)
    if v.is_python_constant():
        value = v.constant_copy()
        if not _plain_constant(value):
            raise GraphBreak(gb.NUMPY_UNSUPPORTED, f"{type(value).__name__} passed to numpy in a graph")
        return _scalars_marked(value)
    raise GraphBreak(gb.NUMPY_UNSUPPORTED, f"{v.describe()} passed to numpy in a graph")


def _plain_constant(value) -> bool:
    if value is None or value is Ellipsis or type(value) in (int, float, bool, complex, str, slice):
        return True
    if isinstance(value, np.generic):
        return is_numpy_dtype_supported(value.dtype)
    if isinstance(value, np.dtype) or isinstance(value, type) and (issubclass(value, np.generic) or
                                                                  value in (int, float, bool, complex)):
        return True
    if type(value) in (list, tuple):
        return all(_plain_constant(v) for v in value)
    return False


def _scalars_marked(value):
    if isinstance(value, np.generic):
        return _Scalar(value)
    if isinstance(value, np.dtype) or isinstance(value, type):
        try:
            dt = np.dtype(value)
        except TypeError:  # an abstract type (np.floating): passed as it is
            return value
        if not is_numpy_dtype_supported(dt):
            raise GraphBreak(gb.NUMPY_UNSUPPORTED, f"dtype {dt} passed to numpy in a graph")
        return _DType(value)
    if type(value) in (list, tuple):
        return type(value)(_scalars_marked(v) for v in value)
    return value


def _fill(template, arrays: list, convert):
    """The template with slot i -> arrays[i], and marked constants -> ``convert(marker)``."""
    if isinstance(template, _Slot):
        return arrays[template.index]
    if isinstance(template, (_Scalar, _DType)):
        return convert(template)
    if type(template) in (list, tuple):
        return type(template)(_fill(t, arrays, convert) for t in template)
    if type(template) is dict:
        return {k: _fill(t, arrays, convert) for k, t in template.items()}
    if type(template) is slice:
        return slice(*[_fill(p, arrays, convert) for p in (template.start, template.stop, template.step)])
    return template


def _for_tnp(marker):
    """A marked constant as torch._numpy takes it."""
    if isinstance(marker, _DType):
        return np.dtype(marker.value).name
    value = marker.value
    return tnp.asarray(torch.tensor(value.item(), dtype=_TORCH_DTYPES[value.dtype]))


def _for_numpy(marker):
    return marker.value


def _apply(op, args, kwargs, module_fn=None):
    kind = op[0]
    if kind == "fn":
        return (module_fn or op[1])(*args, **kwargs)
    if kind == "method":
        return getattr(args[0], op[1])(*args[1:], **kwargs)
    if kind == "attr":
        return getattr(args[0], op[1])
    return op[1](*args, **kwargs)  # "operator"


_DIVISIONS = {"truediv", "true_divide", "divide", "__truediv__", "__rtruediv__"}


def _op_short_name(op) -> str:
    return op[2] if op[0] == "fn" else op[1] if op[0] in ("method", "attr") else op[1].__name__


def _op_name(op) -> str:
    kind = op[0]
    if kind == "fn":
        return f"np.{op[2]}"
    if kind in ("method", "attr"):
        return f"ndarray.{op[1]}"
    return f"operator.{op[1].__name__}"


def _make_graph_fn(op, template, cast_to=None, cast_kinds=""):
    """The node's target: tensors in, torch._numpy in the middle, tensors out.  ``cast_to``: a
    floating dtype name the arrays of ``cast_kinds`` are cast to first (numpy's int / int is
    float64; torch._numpy's follows torch's default dtype)."""

    def to_tensors(out):
        if isinstance(out, tnp.ndarray):
            return out.tensor
        if type(out) in (tuple, list):
            return tuple(to_tensors(o) for o in out)
        return out

    def numpy_call(*tensors):
        arrays = [tnp.ndarray(t) for t in tensors]
        if cast_to is not None:
            arrays = [a.astype(cast_to) if a.dtype.kind in cast_kinds else a for a in arrays]
        args, kwargs = _fill(template, arrays, _for_tnp)
        return to_tensors(_apply(op, args, kwargs))

    name = "numpy_" + _op_name(op).split(".")[-1].strip("_")
    numpy_call.__name__ = numpy_call.__qualname__ = name
    return numpy_call


def _hints(shape) -> tuple:
    return tuple(s if type(s) is int else _hint(s) for s in shape)


def _hint(s) -> int:
    hint = getattr(s.node, "hint", None)
    if hint is None and s.node.expr.free_symbols:
        # a size only the data decides (np.unique, np.nonzero): numpy's own call gives it
        raise GraphBreak(gb.DATA_DEPENDENT, "the result's size depends on the array's values")
    return int(hint) if hint is not None else int(s)


def _stand_in(tx, var: NumpyArrayVariable):
    """What numpy computes on instead of the (unknown) data: ones, or identity matrices for
    stacks of square matrices (so np.linalg.inv / solve / cholesky have an answer)."""
    dt = var.dtype
    if var.scalar:
        return dt.type(1)
    shape = var.shape_hint()
    if len(shape) >= 2 and shape[-1] == shape[-2]:
        return np.broadcast_to(np.eye(shape[-1], dtype=dt), shape)
    return np.broadcast_to(np.ones((), dt), shape)


_INT_DIVISIONS = {"floordiv", "mod", "floor_divide", "remainder", "fmod", "divmod", "__floordiv__", "__mod__",
                  "__divmod__", "__rfloordiv__", "__rmod__", "__rdivmod__"}


def _check_integer_division(op, args: list, slots: list, spec) -> None:
    """numpy's integer // and % by zero give 0 with a warning; torch's raise.  Traced only with a
    nonzero constant divisor (the data of a divisor array is unknown at trace time)."""
    if _op_short_name(op) not in _INT_DIVISIONS or not any(s.dtype.kind in "biu" for s in slots):
        return
    reflected = _op_short_name(op).startswith("__r")
    divisor = args[0] if reflected else (args[1] if len(args) > 1 else None)
    if divisor is None or isinstance(divisor, NumpyArrayVariable) or not divisor.is_python_constant() or \
            divisor.as_python_constant() == 0 or not isinstance(divisor.as_python_constant(), (int, float, np.number)):
        raise GraphBreak(gb.NUMPY_SEMANTICS, f"integer {_op_name(op)} by a divisor not known at trace time (numpy "
                         "gives 0 with a warning for a zero divisor; torch raises)")


_DEFAULT_ERRSTATE = {"divide": "warn", "over": "warn", "under": "ignore", "invalid": "warn"}
# OutputGraph -> True once its numpy error-state guard is installed
_ERRSTATE_GUARDED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _check_errstate(tx) -> None:
    """Graphs compute numpy code only under numpy's default error handling (np.seterr /
    np.errstate set to "raise" would make eager raise on data the trace cannot see)."""
    output = tx.output
    if output in _ERRSTATE_GUARDED:
        return
    if np.geterr() != _DEFAULT_ERRSTATE:
        raise GraphBreak(gb.NUMPY_SEMANTICS, f"numpy's error handling is not the default ({np.geterr()})")
    output.add_guard(guards.GlobalStateGuard("{geterr}() == {d}", (("geterr", np.geterr), ("d", _DEFAULT_ERRSTATE))))
    _ERRSTATE_GUARDED[output] = True


def _kind_of(result):
    """(kind, dtype, shape) of a numpy result, or raises GraphBreak for one a graph cannot hold."""
    if type(result) is np.ndarray:
        kind = "array"
    elif isinstance(result, np.generic):
        kind = "scalar"
    elif type(result) in (tuple, list):
        return (type(result).__name__, [_kind_of(r) for r in result])
    else:
        raise GraphBreak(gb.NUMPY_UNSUPPORTED, f"numpy returns {type(result).__name__} here")
    if not is_numpy_dtype_supported(result.dtype):
        raise GraphBreak(gb.NUMPY_UNSUPPORTED, f"numpy returns dtype {result.dtype} here")
    return (kind, result.dtype, tuple(result.shape))


def call_numpy(tx, op, args: list, kwargs: dict, numpy_fn=None) -> VariableTracker:
    """One numpy operation on traced values: ``op`` is ("fn", tnp_fn, name), ("method", name),
    ("attr", name) or ("operator", fn); args/kwargs are trackers.  Checked against numpy on
    stand-ins, recorded as one node, wrapped as arrays / numpy scalars."""
    _check_errstate(tx)
    slots: list = []
    template = ([_template(tx, a, slots) for a in args], {k: _template(tx, v, slots) for k, v in kwargs.items()})
    name = _op_name(op)
    # numpy's answer on stand-ins of the same dtypes and shapes: the kind, dtype and shape to match
    stand_ins = [_stand_in(tx, s) for s in slots]
    real_args, real_kwargs = _fill(template, stand_ins, _for_numpy)
    with np.errstate(all="ignore"), warnings_issued() as caught:
        try:
            expected = _apply(op, real_args, real_kwargs, module_fn=numpy_fn)
        except Exception as e:  # noqa: BLE001 - numpy raises it for real
            raise GraphBreak(gb.OPERATION_RAISES, f"{name} raised {type(e).__name__} at trace time: {e}") from e
    if caught:
        raise GraphBreak(gb.NUMPY_SEMANTICS, f"{name} issues a warning: {str(caught[0].message)[:120]}")
    for candidate, var in zip(stand_ins, slots):
        if expected is candidate and not var.scalar:
            return var  # np.asarray(a), a.view(): numpy returns the array itself
    spec = _kind_of(expected)
    _check_integer_division(op, args, slots, spec)
    inputs = [s.tensor for s in slots]
    single = spec[0] not in ("tuple", "list")
    if single and _op_short_name(op) in _DIVISIONS and spec[1].kind == "f" and all(s.dtype.kind in "biu" for s in slots):
        # int / int: numpy divides in float64 (torch in its default dtype)
        return _wrap_result(tx, record_op(tx, "call_function", _make_graph_fn(op, template, spec[1].name, "biu"),
                                          inputs, {}), spec, name)
    result = record_op(tx, "call_function", _make_graph_fn(op, template), inputs, {})
    if single and spec[1].kind in "fc" and isinstance(result, TensorVariable) and \
            _NUMPY_DTYPES.get(result.example.dtype) != spec[1] and any(s.dtype.kind in "iu" for s in slots):
        # numpy computes a floating result of integer arrays by casting them to that dtype first
        # (np.where(c, 1.5, ints), f32 ** ints); torch._numpy often lands in torch's default dtype
        tx.output.remove_node(result.node)
        result = record_op(tx, "call_function", _make_graph_fn(op, template, spec[1].name, "iu"), inputs, {})
    return _wrap_result(tx, result, spec, name)


def _wrap_result(tx, result, spec, name):
    if spec[0] in ("tuple", "list"):
        items = result.items if isinstance(result, TupleVariable) else None
        if items is None or len(items) != len(spec[1]):
            raise GraphBreak(gb.NUMPY_SEMANTICS, f"torch._numpy's {name} returns a different structure")
        items = [_wrap_result(tx, r, s, name) for r, s in zip(items, spec[1])]
        return TupleVariable(items) if spec[0] == "tuple" else ListVariable(items)
    kind, dtype, shape = spec
    if not isinstance(result, TensorVariable):
        raise GraphBreak(gb.NUMPY_SEMANTICS, f"torch._numpy's {name} returns {result.describe()}")
    ex = result.example
    got_shape = _hints(ex.shape)
    if _NUMPY_DTYPES.get(ex.dtype) != dtype or got_shape != shape:
        raise GraphBreak(gb.NUMPY_SEMANTICS, f"torch._numpy's {name} gives {ex.dtype} {list(got_shape)} where "
                         f"numpy gives {dtype} {list(shape)}")
    return NumpyArrayVariable(result, scalar=kind == "scalar")


def numpy_operator(tx, fn, args: list) -> VariableTracker:
    """An ``operator`` function (+, <, -x, +=...) with an ndarray or traced numpy scalar operand."""
    if any(isinstance(a, TensorVariable) for a in args):
        raise GraphBreak(gb.NUMPY_UNSUPPORTED, "an operator mixing a torch tensor and a numpy value")
    if fn in (operator.is_, operator.is_not):
        same = args[0] is args[1] or None
        if same is None and any(not isinstance(a, NumpyArrayVariable) for a in args):
            # `a is None`: a value known at trace time (or any other kind) is never this array
            other = args[0] if not isinstance(args[0], NumpyArrayVariable) else args[1]
            same = False if other.is_python_constant() or other.is_tensor() or other.mutable_local else None
        if same is None:
            same = False if any(isinstance(a, NumpyArrayVariable) and a.mutable_local for a in args) else None
        if same is None:
            raise GraphBreak(gb.VALUE_UNKNOWN, "identity of these values is not known at trace time")
        return ConstantVariable(same if fn is operator.is_ else not same)
    if fn is operator.not_ or fn is operator.truth:
        raise GraphBreak(gb.DATA_DEPENDENT, "the truth of a numpy value depends on its data")
    if fn in _INPLACE_OPERATORS:
        if isinstance(args[0], NumpyArrayVariable) and not args[0].scalar:
            raise GraphBreak(gb.NUMPY_INPLACE, f"{fn.__name__} writes into the array")
        fn = _INPLACE_OPERATORS[fn]  # a numpy scalar is immutable: s += 1 is s = s + 1
    return call_numpy(tx, ("operator", fn), args, {})


_INPLACE_OPERATORS = {getattr(operator, "i" + n.rstrip("_")): getattr(operator, n) for n in (
    "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and_", "or_", "xor", "lshift", "rshift")}


# ---- values entering and leaving numpy -----------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class NumpyTensorSource(Source):
    """The graph input of an array argument: ``torch.as_tensor(array)`` (the same memory)."""

    array: Source

    def name(self):
        return f"___torch.as_tensor({self.array.name()})"

    def reconstruct(self, cg):
        cg.load_callable(torch.as_tensor)
        self.array.reconstruct(cg)
        cg.call(1)

    def base(self):
        return self.array.base()


def array_supported(a) -> bool:
    """Can the graph hold this ndarray as a tensor of the same memory?"""
    return (type(a) is np.ndarray and is_numpy_dtype_supported(a.dtype) and a.flags.writeable
            and all(s >= 0 and s % a.itemsize == 0 for s in a.strides))


# OutputGraph -> [(source, array)]: the array arguments of one trace (no two may share memory)
_ARRAY_INPUTS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def wrap_array_input(tx, value: np.ndarray, source: Source) -> VariableTracker:
    """An ndarray argument: a graph input, guarded on type, dtype, shape, strides, writeability and
    on not sharing memory with the other array arguments."""
    output = tx.output
    if not array_supported(value):
        output.add_guard(guards.ExprGuard(f"not {{ok}}({source.name()})", (("ok", array_supported),), source))
        raise GraphBreak(gb.NUMPY_UNSUPPORTED, f"ndarray of dtype {value.dtype} (strides {value.strides}, "
                         f"writeable {value.flags.writeable}) cannot be a graph input")
    output.add_guard(guards.ExprGuard(
        f"{{ok}}({source.name()}) and {source.name()}.dtype == {{dt}} and {source.name()}.shape == {{shape}} and "
        f"{source.name()}.strides == {{strides}}",
        (("ok", array_supported), ("dt", value.dtype), ("shape", value.shape), ("strides", value.strides)), source))
    others = _ARRAY_INPUTS.setdefault(output, [])
    for other_source, other in others:
        if np.may_share_memory(value, other):
            raise GraphBreak(gb.NUMPY_UNSUPPORTED, f"{source.name()} shares memory with {other_source.name()}")
        output.add_guard(guards.ExprGuard(f"not {{msm}}({source.name()}, {other_source.name()})",
                                          (("msm", np.may_share_memory),), source))
    others.append((source, value))
    for gi in output.graph_inputs:  # a tensor argument viewing the array's memory (torch.from_numpy(a))
        if not isinstance(gi.example, torch.Tensor) or isinstance(gi.source, NumpyTensorSource):
            continue
        if _overlaps(gi.example, value):
            raise GraphBreak(gb.NUMPY_UNSUPPORTED, f"{source.name()} shares memory with tensor {gi.source.name()}")
        output.add_guard(guards.ExprGuard(f"not {{ov}}({gi.source.name()}, {source.name()})",
                                          (("ov", _overlaps),), source))
    tensor = torch.as_tensor(value)
    tsource = NumpyTensorSource(source)
    node, fake = output.add_graph_input(tsource, tensor)
    inner = TensorVariable(node, fake, tsource)
    output.set_real_value(inner, tensor)
    return NumpyArrayVariable(inner, source=source)


def check_tensor_input(output, source: Source, value: torch.Tensor) -> None:
    """A tensor argument read after array arguments: it must not view their memory (the graph
    would not know that writing into it changes them); guarded on later calls."""
    for array_source, array in _ARRAY_INPUTS.get(output, ()):
        if _overlaps(value, array):
            raise GraphBreak(gb.NUMPY_UNSUPPORTED, f"tensor {source.name()} shares memory with {array_source.name()}")
        output.add_guard(guards.ExprGuard(f"not {{ov}}({source.name()}, {array_source.name()})",
                                          (("ov", _overlaps),), source))


def _overlaps(t: torch.Tensor, a: np.ndarray) -> bool:
    """Do a CPU tensor's storage and an array's buffer overlap?"""
    if t.device.type != "cpu" or t.layout is not torch.strided or a.size == 0:
        return False
    try:
        start = t.untyped_storage().data_ptr()
        end = start + t.untyped_storage().nbytes()
    except Exception:  # noqa: BLE001 - tensors without one storage
        return False
    lo, hi = np.lib.array_utils.byte_bounds(a) if hasattr(np.lib, "array_utils") else np.byte_bounds(a)
    return lo < end and start < hi


def wrap_numpy_value(tx, value, source, guard) -> Optional[VariableTracker]:
    """The tracker of a numpy value read from outside the frame, or None when it is not one."""
    if type(value) is np.ndarray:
        if source is None:
            raise GraphBreak(gb.NUMPY_UNSUPPORTED, "an ndarray reached without a source")
        return wrap_array_input(tx, value, source)
    if isinstance(value, np.generic):
        if not is_numpy_dtype_supported(value.dtype) or type(value) is not value.dtype.type:
            return None
        if source is not None:
            guard(guards.TypeGuard(source, type(value)))
            if value != value:
                value_guard = guards.ExprGuard(f"{source.name()} != {source.name()}", (), source)
            else:
                value_guard = guards.ExprGuard(f"{source.name()} == {{v}} and str({source.name()}) == {{s}}",
                                               (("v", value), ("s", str(value))), source)
            if isinstance(value, np.integer):  # (a seed passed on to a generator needs no value guard)
                return InputConstantVariable(value, source, lambda: guard(value_guard))
            guard(value_guard)
        return ConstantVariable(value, source)
    if isinstance(value, np.dtype):
        if source is not None:
            guard(guards.TypeGuard(source, type(value)))
            guard(guards.ExprGuard(f"{source.name()} == {{v}}", (("v", value),), source))
        return ConstantVariable(value, source)
    if is_numpy_callable(value):
        if isinstance(value, types.MethodType):  # a method of a RandomState / Generator (new each read)
            if source is not None:
                guard(guards.TypeGuard(source, types.MethodType))
                guard(guards.ExprGuard(f"isinstance({source.name()}.__self__, {{rng}})",
                                       (("rng", (np.random.RandomState, np.random.Generator)),), source))
        else:
            guard(guards.IdGuard(source, value))
        return NumpyFunctionVariable(value, source)
    return None


def tensor_numpy(tx, tensor: TensorVariable, args: list, kwargs: dict) -> VariableTracker:
    """``Tensor.numpy()``: an ndarray of the same memory (a detached alias in the graph)."""
    force = kwargs.get("force", args[0] if args else None)
    if force is not None and (not force.is_python_constant() or force.as_python_constant() is not False) or \
            len(args) + len(kwargs) > 1 or set(kwargs) - {"force"}:
        raise GraphBreak(gb.NUMPY_UNSUPPORTED, "Tensor.numpy(force=True) copies out of the graph")
    ex = tensor.example
    if ex.requires_grad:
        raise GraphBreak(gb.DATA_DEPENDENT, "Tensor.numpy() of a tensor that requires grad (eager raises)")
    if ex.device.type != "cpu" or ex.layout is not torch.strided or ex.is_complex() or \
            ex.dtype not in _NUMPY_DTYPES or getattr(tensor, "real_type", torch.Tensor) is not torch.Tensor:
        raise GraphBreak(gb.NUMPY_UNSUPPORTED, f"Tensor.numpy() of a {ex.dtype} {ex.device.type} tensor")
    alias = record_op(tx, "call_method", "detach", [tensor], {})
    return NumpyArrayVariable(alias)


def numpy_to_torch(tx, fn, args: list, kwargs: dict) -> Optional[VariableTracker]:
    """torch.from_numpy / as_tensor / asarray / tensor of a traced ndarray or numpy scalar (None:
    not such a call)."""
    if not args or not isinstance(args[0], NumpyArrayVariable):
        return None
    var = args[0]
    if len(args) > 1 or set(kwargs) - {"dtype"}:
        raise GraphBreak(gb.NUMPY_UNSUPPORTED, f"torch.{fn.__name__}() of an ndarray with these arguments")
    if fn is torch.from_numpy and (var.scalar or kwargs):
        raise GraphBreak(gb.OPERATION_RAISES, "torch.from_numpy() of a numpy scalar (TypeError)")
    dtype = kwargs.get("dtype")
    result = TensorVariable(var.tensor.node, var.tensor.example)  # the same memory
    if dtype is not None and not (dtype.is_python_constant() and dtype.as_python_constant() is None):
        result = record_op(tx, "call_method", "to", [result, dtype], {})
    if fn is torch.tensor and (result.node is var.tensor.node):
        result = record_op(tx, "call_method", "clone", [result], {})
    return result


def numpy_scalar_to_torch(tx, fn, args: list, kwargs: dict) -> Optional[VariableTracker]:
    """torch.as_tensor / tensor / asarray of data holding numpy scalar constants (``np.float64(2)``,
    ``[np.int32(1), 2]``): torch takes its dtype from them, so the node gets the dtype eager infers
    and the plain numbers (the graph's code cannot name numpy).  None: no numpy scalar in the data."""
    if not args or fn is torch.from_numpy or not holds_numpy_scalar(args[0]):
        return None
    if len(args) > 1 or set(kwargs) - {"dtype"}:
        raise GraphBreak(gb.NUMPY_UNSUPPORTED, f"torch.{fn.__name__}() of numpy scalars with these arguments")
    try:
        data = args[0].constant_copy()
    except NotImplementedError:
        raise GraphBreak(gb.NUMPY_UNSUPPORTED, "numpy scalars mixed with traced values in tensor data") from None
    dtype = kwargs.get("dtype")
    dtype = dtype.as_python_constant() if dtype is not None and dtype.is_python_constant() else dtype
    if dtype is not None and not isinstance(dtype, torch.dtype):
        raise GraphBreak(gb.NUMPY_UNSUPPORTED, f"torch.{fn.__name__}() of numpy scalars with a dtype not known")
    if dtype is None:
        try:
            dtype = torch.tensor(data).dtype  # what eager infers from these numbers (constants)
        except Exception as e:  # noqa: BLE001 - Python raises it for real
            raise GraphBreak(gb.OPERATION_RAISES, f"torch.{fn.__name__}() raised {type(e).__name__}") from e
    return record_op(tx, "call_function", torch.tensor, [wrap_constant_result(_plain_numbers(data))],
                     {"dtype": ConstantVariable(dtype)})


def holds_numpy_scalar(v: VariableTracker) -> bool:
    if isinstance(v, ConstantVariable):
        return isinstance(v.value, np.generic)
    if isinstance(v, BaseListVariable):
        return any(holds_numpy_scalar(i) for i in v.items)
    return False


def _plain_numbers(data):
    if isinstance(data, np.generic):
        return data.item()
    if type(data) in (list, tuple):
        return type(data)(_plain_numbers(d) for d in data)
    return data


def _use_numpy_default_dtypes() -> None:
    """torch._numpy's default dtypes are numpy's (float64, complex128, numpy's int).  Its first use
    would otherwise read them from TorchDynamo's config, importing TorchDynamo; a value already
    set (by TorchDynamo itself) is kept: the stand-in check catches any dtype it changes."""
    impl = torch._numpy._dtypes_impl
    if impl._default_dtypes is None:
        impl._default_dtypes = impl.DefaultDTypes(float_dtype=torch.float64, complex_dtype=torch.complex128,
                                                  int_dtype=_TORCH_DTYPES[np.dtype(int)])


_use_numpy_default_dtypes()
# Tensor.numpy() (tensor.py is below this file: installed here, see base.py)
VariableTracker.tensor_numpy = staticmethod(tensor_numpy)

__all__ = ["check_tensor_input", "NumpyArrayVariable", "NumpyFunctionVariable", "NumpyMethodVariable", "call_numpy", "numpy_operator",
           "numpy_to_torch", "numpy_scalar_to_torch", "tensor_numpy", "wrap_numpy_value", "is_numpy_callable"]
