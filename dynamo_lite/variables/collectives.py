"""torch.distributed inside traced code.

Functional collectives (``torch.distributed._functional_collectives``: ``all_reduce``,
``all_gather_tensor`` / ``all_gather_single``, ``reduce_scatter_tensor`` /
``reduce_scatter_single``) become graph nodes: the ``_c10d_functional`` op they call and its
``wait_tensor``, plus the chunk/cat they do for a gather or scatter dimension other than 0.
The graph's result is the waited tensor (eagerly these functions return an
``AsyncCollectiveTensor`` that waits on first use: same values, as under torch.compile).
The process group is resolved to its name at trace time and guarded by identity when it was
read from a source.

The classic collectives of ``torch.distributed`` (``dist.all_reduce(t)``, ``broadcast``,
``barrier``, ...) write into their arguments and may return work handles: they break the
graph (DISTRIBUTED_COLLECTIVE) and Python runs them between graphs, in program order.
Tested by tests/distributed/test_collectives.py.
"""
from __future__ import annotations

import inspect

import torch

from .. import graph_breaks as gb
from .. import guards
from ..exc import GraphBreak
from .base import VariableTracker
from .constant import ConstantVariable
from .tensor import TensorVariable, record_op

_C10D = "torch.distributed.distributed_c10d"
_FUNCOL = "torch.distributed._functional_collectives"


def is_collective(fn) -> bool:
    """Is ``fn`` a collective of torch.distributed (functional or classic)?"""
    module = getattr(fn, "__module__", None)
    return module in (_C10D, _FUNCOL) and getattr(fn, "__name__", "") in _HANDLERS.get(module, ())


def call_collective(tx, fn, args: list, kwargs: dict):
    """The tracker of ``fn(*args, **kwargs)``: graph nodes for a functional collective; a
    graph break for one that mutates its arguments."""
    module, name = fn.__module__, fn.__name__
    if module == _C10D:
        raise GraphBreak(gb.DISTRIBUTED_COLLECTIVE,
                         f"torch.distributed.{name}() communicates with the other ranks and writes into its "
                         f"arguments; Python runs it between graphs")
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
    except TypeError as e:
        raise GraphBreak(gb.DISTRIBUTED_COLLECTIVE, f"{name}() called with arguments it does not take: {e}") from e
    bound.apply_defaults()
    a = bound.arguments
    tensor = a["self"]
    if not isinstance(tensor, TensorVariable):
        raise GraphBreak(gb.DISTRIBUTED_COLLECTIVE, f"{name}() of a {tensor.describe()}, not a tensor")
    group_name, group_size = _group(tx, name, a["group"], _constant(name, a["tag"], "tag"))
    return _HANDLERS[_FUNCOL][name](tx, name, tensor, a, group_name, group_size)


def _constant(name, var, what):
    if not isinstance(var, VariableTracker):
        return var  # a default of the signature
    if var.is_python_constant():
        return var.as_python_constant()
    raise GraphBreak(gb.DISTRIBUTED_COLLECTIVE, f"{name}() with a {what} not known at trace time")


def _group(tx, name, var, tag) -> tuple[str, int]:
    """(group name, group size) of the ``group`` argument: a ProcessGroup, a group name or a
    1-D DeviceMesh (a ProcessGroup or mesh read from a source is guarded by identity)."""
    from torch.distributed import distributed_c10d as c10d
    from torch.distributed import ProcessGroup
    from torch.distributed.device_mesh import DeviceMesh

    value = getattr(var, "value", None)  # the object behind an opaque tracker (ProcessGroup, DeviceMesh)
    if isinstance(value, (ProcessGroup, DeviceMesh)):
        if var.source is not None:
            tx.output.add_guard(guards.IdGuard(var.source, value))
        if isinstance(value, DeviceMesh) and value.ndim != 1:
            raise GraphBreak(gb.DISTRIBUTED_COLLECTIVE, f"{name}() over a {value.ndim}-D DeviceMesh")
        group_name = value.group_name if isinstance(value, ProcessGroup) else value._dim_group_names[0]
    elif var.is_python_constant() and isinstance(var.as_python_constant(), str):
        group_name = var.as_python_constant()
    else:
        raise GraphBreak(gb.DISTRIBUTED_COLLECTIVE,
                         f"{name}() with group {var.describe()}: only a ProcessGroup, a group name or a 1-D "
                         f"DeviceMesh is put in graphs")
    if tag:
        raise GraphBreak(gb.DISTRIBUTED_COLLECTIVE, f"{name}() with a tag")
    return group_name, c10d._get_group_size_by_name(group_name)


def _op(name):
    return getattr(torch.ops._c10d_functional, name).default


def _waited(tx, node):
    return record_op(tx, "call_function", _op("wait_tensor"), [node], {})


def _chunk_cat(tx, tensor, chunks: int, chunk_dim: int, cat_dim: int):
    parts = record_op(tx, "call_function", torch.chunk, [tensor, ConstantVariable(chunks)],
                      {"dim": ConstantVariable(chunk_dim)})
    return record_op(tx, "call_function", torch.cat, [parts], {"dim": ConstantVariable(cat_dim)})


def _reduce_op(name, a) -> str:
    op = _constant(name, a["reduceOp"], "reduceOp")
    if not isinstance(op, str):
        raise GraphBreak(gb.DISTRIBUTED_COLLECTIVE, f"{name}() with reduceOp {op!r} (a string is put in graphs)")
    return op.lower()


def _all_reduce(tx, name, tensor, a, group_name, group_size):
    out = record_op(tx, "call_function", _op("all_reduce"),
                    [tensor, ConstantVariable(_reduce_op(name, a)), ConstantVariable(group_name)], {})
    return _waited(tx, out)


def _all_gather(tx, name, tensor, a, group_name, group_size):
    dim = _constant(name, a["gather_dim"], "gather_dim")
    out = record_op(tx, "call_function", _op("all_gather_into_tensor"),
                    [tensor, ConstantVariable(group_size), ConstantVariable(group_name)], {})
    out = _waited(tx, out)
    return out if dim == 0 else _chunk_cat(tx, out, group_size, 0, dim)


def _reduce_scatter(tx, name, tensor, a, group_name, group_size):
    dim = _constant(name, a["scatter_dim"], "scatter_dim")
    op = _reduce_op(name, a)
    if tensor.example.size(dim) % group_size:
        raise GraphBreak(gb.DISTRIBUTED_COLLECTIVE, f"{name}(): dimension {dim} of the input is not a multiple of "
                                                    f"the group size {group_size} (Python raises)")
    if dim != 0:
        tensor = _chunk_cat(tx, tensor, group_size, dim, 0)
    out = record_op(tx, "call_function", _op("reduce_scatter_tensor"),
                    [tensor, ConstantVariable(op), ConstantVariable(group_size), ConstantVariable(group_name)], {})
    return _waited(tx, out)


# the classic collectives: they mutate tensors in place (or synchronise) and may return work handles
_CLASSIC = frozenset((
    "all_reduce", "all_reduce_coalesced", "all_gather", "all_gather_into_tensor", "all_gather_object",
    "all_to_all", "all_to_all_single", "barrier", "broadcast", "broadcast_object_list", "gather",
    "gather_object", "isend", "irecv", "send", "recv", "reduce", "reduce_scatter", "reduce_scatter_tensor",
    "scatter", "scatter_object_list", "batch_isend_irecv", "monitored_barrier", "_all_gather_base",
    "_reduce_scatter_base"))
_HANDLERS = {
    _C10D: dict.fromkeys(_CLASSIC),
    _FUNCOL: {"all_reduce": _all_reduce, "all_gather_tensor": _all_gather, "all_gather_single": _all_gather,
              "reduce_scatter_tensor": _reduce_scatter, "reduce_scatter_single": _reduce_scatter},
}


__all__ = ["is_collective", "call_collective"]
