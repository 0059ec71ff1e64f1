"""Text formatted from tensor values in traced code (``f"got {x}"``): FormattedTextVariable.

A tensor's ``str()`` depends on its data, which the trace does not have.  Libraries format
tensors into messages they only use when a check fails (kornia's ``KORNIA_CHECK(cond,
f"... {x} ...")``), so the text is made after the graph: the field takes a snapshot of the tensor
in the graph (``clone()``, so a later in-place change in the graph is not seen), and generated
code formats the snapshot with ``runtime.format_fields`` only if the text is still held when the
graph ends (a raised exception's message, a returned value).  A snapshot nothing uses is removed
from the graph (OutputGraph.finalize).  Only plain tensors that do not require grad are formatted
so (a grad_fn in the text would name the graph's backward, not eager's); anything done with the
text other than passing it on, joining it into more f-string text or testing its truth breaks
the graph, where Python formats it.  A symbolic number (an int argument that varies between
calls, a size) is a field too, formatted from the value the graph returns: ``print(f"step
{step}")`` does not specialise the entry on ``step``.

Tested by tests/semantics/test_strings.py.
"""
from __future__ import annotations

import torch

from .. import graph_breaks as gb
from .. import runtime
from ..exc import GraphBreak
from .base import VariableTracker
from .tensor import record_op, TensorVariable

SNAPSHOT_META = "dl_format_snapshot"  # node.meta flag of a snapshot made for formatting


def can_format_later(value: VariableTracker, spec: str) -> bool:
    """Can the f-string field ``{value:spec}`` be formatted after the graph?"""
    if not isinstance(value, TensorVariable) or spec:
        return False
    example = value.example
    return (getattr(value, "real_type", torch.Tensor) is torch.Tensor and not example.requires_grad
            and example.layout is torch.strided and not example.is_quantized)


class FormattedTextVariable(VariableTracker):
    """A str made of constant text and tensor or number fields, formatted by Python after the graph.

    ``parts``: str pieces and ``(snapshot TensorVariable or SymNodeVariable, conversion)`` fields, where the
    conversion is the f-string's (0: ``format(t, "")``, 1: ``str``, 2: ``repr``, 3: ``ascii``).
    """

    def __init__(self, parts: list):
        super().__init__()
        self.parts = parts

    @staticmethod
    def of_field(tx, tensor: TensorVariable, conv: int) -> "FormattedTextVariable":
        snapshot = record_op(tx, "call_method", "clone", [tensor], {})
        snapshot.node.meta[SNAPSHOT_META] = True
        return FormattedTextVariable([(snapshot, conv)])

    @staticmethod
    def join(parts: list) -> "FormattedTextVariable":
        """BUILD_STRING: constant pieces (trackers) and formatted texts, in order."""
        out: list = []
        for p in parts:
            out.extend(p.parts if isinstance(p, FormattedTextVariable) else [p.as_python_constant()])
        return FormattedTextVariable(out)

    def python_type(self):
        return str

    def is_python_constant(self):
        # fields of symbolic numbers only: a constant on demand, by specialising them (as a
        # SymNodeVariable is), for code that needs the text itself (a nested format spec, a key)
        return all(type(p) is str or not isinstance(p[0], TensorVariable) for p in self.parts)

    def as_python_constant(self):
        if not self.is_python_constant():
            raise NotImplementedError("text formatted from tensor data")
        return runtime.format_fields(tuple(p if type(p) is str else p[1] for p in self.parts),
                                     *(p[0].as_python_constant() for p in self.parts if type(p) is not str))

    def describe(self):
        return "text formatted after the graph (an f-string field of a tensor or a symbolic number)"

    def truthiness(self, tx):
        return True  # a tensor's or a number's text is never empty

    def var_getattr(self, tx, name):
        raise GraphBreak(gb.VALUE_UNKNOWN, f"{self.describe()}: .{name} needs the text, which Python makes from the "
                         "tensor's data")

    def reconstruct(self, cg):
        cg.load_callable(runtime.format_fields)
        cg.load_const(tuple(p if type(p) is str else p[1] for p in self.parts))
        fields = [p[0] for p in self.parts if type(p) is not str]
        for t in fields:
            cg.reconstruct(t)
        cg.call(1 + len(fields))

    def can_reconstruct(self):
        return all(p[0].can_reconstruct() for p in self.parts if type(p) is not str)


__all__ = ["FormattedTextVariable", "can_format_later", "SNAPSHOT_META"]
