"""Operations shared by several opcode handlers and builtins (subscript, attributes)."""
from __future__ import annotations

from ... import graph_breaks as gb
from ...exc import GraphBreak
from ...variables.base import VariableTracker


def subscript(tx, obj: VariableTracker, key: VariableTracker) -> VariableTracker:
    from ...variables.containers import BaseListVariable, DictVariable
    from ...variables.tensor import TensorVariable, record_op
    import operator

    if isinstance(obj, TensorVariable):
        return record_op(tx, "call_function", operator.getitem, [obj, key], {})
    if isinstance(obj, (BaseListVariable, DictVariable)):
        if isinstance(key, TensorVariable):
            raise GraphBreak(gb.DATA_DEPENDENT, "indexing a Python container with a tensor")
        return obj.getitem(tx, key)
    if obj.is_python_constant() and key.is_python_constant():
        try:
            from ...variables.containers import wrap_constant_result

            return wrap_constant_result(obj.as_python_constant()[key.as_python_constant()])
        except Exception as e:  # noqa: BLE001 - raise it for real
            raise GraphBreak(gb.OPERATION_RAISES, f"subscript raised {type(e).__name__}") from e
    return obj.call_method(tx, "__getitem__", [key], {})


def store_subscript(tx, obj, key, value) -> None:
    from ...variables.containers import DictVariable, ListVariable
    from ...variables.tensor import TensorVariable, record_op
    import operator

    if isinstance(obj, TensorVariable):
        record_op(tx, "call_function", operator.setitem, [obj, key, value], {})
        return
    if isinstance(obj, ListVariable):
        obj.setitem(tx, key, value)
        return
    if isinstance(obj, DictVariable):
        obj.call_method(tx, "__setitem__", [key, value], {})
        return
    obj.call_method(tx, "__setitem__", [key, value], {})


def store_attr(tx, obj, name: str, value) -> None:
    from ...variables.nn_module import NNModuleVariable
    from ...variables.user_objects import _ObjectLike

    if isinstance(obj, (_ObjectLike, NNModuleVariable)) or callable(getattr(obj, "store_attr", None)):
        obj.store_attr(tx, name, value)
        return
    raise GraphBreak(gb.SIDE_EFFECT, f"setting attribute {name!r} on {obj.describe()}")


def call(tx, fn: VariableTracker, args: list, kwargs: dict) -> VariableTracker:
    result = fn.call_function(tx, args, kwargs)
    if result is None:
        raise AssertionError(f"{fn!r}.call_function returned None")
    return result


__all__ = ["subscript", "store_subscript", "store_attr", "call"]
