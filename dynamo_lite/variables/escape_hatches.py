"""Escape hatches: functions the user marked so that traced code treats their calls specially.

The marks are set by the public API (``dynamo_lite.allow_in_graph``, ``nonstrict_trace``,
``substitute_in_graph``, ``assume_constant_result``: api.py) in ``_MARKS``, a registry keyed by
the id of the marked object (the object is never asked anything: no ``__hash__``, no attribute
read); builder.py looks every value up there first and makes one of the trackers below.

- ``allow_in_graph(fn)``: a call is ONE ``call_function`` node whose target is ``fn``; its example
  output comes from running ``fn`` on the fake tensors (as torch.compile does: the body runs once
  per trace on fakes, then at every run of the graph on the real tensors).  Arguments: tensors,
  symbolic ints, constants and lists/tuples/dicts of them; results: tensors, None and
  lists/tuples/dicts of them.
- ``nonstrict_trace(fn)``: the same, but the arguments are flattened as pytrees
  (torch.utils._pytree): classes registered there (register_dataclass, register_pytree_node,
  register_constant) and constant leaves are allowed; the node's target is a small function that
  rebuilds the arguments from its flat inputs and the spec found at trace time, and calls fn.
  Tensors ``fn`` reads from globals are constants of the fake run, as in torch.  Results may also
  hold Python scalars (taken from the fake run, as torch does).
- ``substitute_in_graph(original)(polyfill)``: a call of ``original`` (or of the wrapper the
  decorator returns) inlines ``polyfill`` instead; with ``can_constant_fold_through`` and constant
  arguments, ``original`` itself is called at trace time and its result is a constant.
- ``assume_constant_result(fn)``: called once per trace, for real, with constant arguments; its
  result is a constant of the trace and nothing is guarded on it.

Whatever cannot be done this way breaks the graph with DL0068 / DL0069 and a reason naming the
function and its mark; Python then makes the call, as eager does.
Tested by tests/api/test_escape_hatches.py.
"""
from __future__ import annotations

import collections
import dataclasses
import operator
import weakref
from typing import Any, Callable, Optional

import torch
import torch.utils._pytree as pytree
from torch._dispatch.python import enable_python_dispatcher
from torch._subclasses.fake_tensor import DataDependentOutputException, DynamicOutputShapeException

from .. import graph_breaks as gb
from .. import guards, static
from ..exc import GraphBreak
from .base import IdentityKey, KnownValueVariable, VariableTracker, type_or_none
from .constant import ConstantVariable
from .folding import wrap_constant_result
from .functions import is_inlinable_function
from .mappings import DictVariable
from .sequences import ListVariable, TupleVariable
from .tensor import SymNodeVariable, TensorVariable, warnings_issued, wrap_op_result

ALLOW_IN_GRAPH = "allow_in_graph"
NONSTRICT_TRACE = "nonstrict_trace"
SUBSTITUTE_IN_GRAPH = "substitute_in_graph"
ASSUME_CONSTANT_RESULT = "assume_constant_result"


@dataclasses.dataclass(frozen=True)
class Mark:
    """What a marked object's calls mean in traced code."""

    kind: str  # one of the four constants above
    fn: Callable[..., Any]  # the user's function (nonstrict_trace: the one the wrapper calls;
    #                         substitute_in_graph: the original, run in eager and when folding)
    polyfill: Optional[Callable[..., Any]] = None  # substitute_in_graph: the Python stand-in
    can_constant_fold_through: bool = False  # substitute_in_graph: fold constant calls of the original


# id(marked object) -> (a function returning the object while it lives, its mark).  Entries of
# objects that can be weakly referenced leave with them (weakref.finalize), so an id is never
# reused for a different object while marked; builtins (not weakly referenceable) live forever.
_MARKS: dict[int, tuple[Callable[[], Any], Mark]] = {}


def add_mark(obj: Any, mark: Mark) -> None:
    """Mark ``obj``; ValueError if it already has a mark of another kind."""
    current = mark_of(obj)
    if current is not None and current.kind != mark.kind:
        raise ValueError(f"{static.qualname(obj)} is already marked {current.kind}: it cannot also be "
                         f"marked {mark.kind}")
    key = id(obj)
    try:
        ref: Callable[[], Any] = weakref.ref(obj)
        weakref.finalize(obj, _MARKS.pop, key, None)
    except TypeError:  # a builtin function: kept alive by the registry
        ref = (lambda kept=obj: kept)
    _MARKS[key] = (ref, mark)


def mark_of(value: Any) -> Optional[Mark]:
    """The mark of ``value`` (compared by identity only), or None."""
    entry = _MARKS.get(id(value))
    if entry is None or entry[0]() is not value:
        return None
    return entry[1]


def escape_hatch_variable(value: Any, source) -> Optional[VariableTracker]:
    """The tracker of a marked value (builder.py), or None: not marked."""
    mark = mark_of(value)
    if mark is None:
        return None
    return _TRACKERS[mark.kind](value, mark, source)


class _MarkedFunctionVariable(KnownValueVariable):
    """A marked callable (``value``: the object the code holds; ``mark``: what it means)."""

    def __init__(self, value, mark: Mark, source=None):
        super().__init__(source)
        self.value = value
        self.mark = mark

    def _repr_body(self):
        return static.qualname(self.mark.fn)

    def what(self) -> str:
        """How reports name it: ``f (marked dynamo_lite.allow_in_graph)``."""
        return f"{static.qualname(self.mark.fn)} (marked dynamo_lite.{self.mark.kind})"

    def describe(self):
        return self.what()

    def identity_key(self):
        return IdentityKey(self, ("obj", id(self.value)))


# ---- allow_in_graph and nonstrict_trace: one opaque node --------------------------------------

def _refused(what: str, why: str) -> GraphBreak:
    return GraphBreak(gb.ESCAPE_HATCH_NOT_IN_GRAPH, f"{what}: {why}; Python makes the call")


_SCALARS = (bool, int, float, complex, str, type(None), torch.dtype, torch.device, torch.layout,
            torch.memory_format)


def _graph_value(tx, var: VariableTracker, what: str, inputs: dict) -> tuple[Any, Any]:
    """(node argument, fake value) of an argument of an allow_in_graph function: a tensor, a
    symbolic int, a constant, or a list/tuple/dict of them.  ``inputs``: id(fake) -> tracker."""
    if isinstance(var, TensorVariable):
        inputs[id(var.example)] = var
        return var.node, var.example
    if isinstance(var, SymNodeVariable):
        return var.as_node(), var.value
    t = type_or_none(var)
    if t in (list, tuple):
        pairs = [_graph_value(tx, item, what, inputs) for item in var.unpack(tx)]
        return t(p[0] for p in pairs), t(p[1] for p in pairs)
    if t in (dict, collections.OrderedDict) and isinstance(var, DictVariable):
        if any(isinstance(k, IdentityKey) or type(k) not in _SCALARS for k in var.items):
            raise _refused(what, "a dict argument with keys other than constants")
        pairs = {k: _graph_value(tx, v, what, inputs) for k, v in var.items.items()}
        return t((k, p[0]) for k, p in pairs.items()), t((k, p[1]) for k, p in pairs.items())
    if var.is_python_constant():
        value = var.as_python_constant()
        if type(value) in _SCALARS or type(value) is torch.Size:
            return value, value
    raise _refused(what, f"its argument {var.describe()} cannot be passed to a graph node (tensors, numbers, "
                         "strings and lists/tuples/dicts of them can)")


def _fake_run(tx, what: str, target: Callable[..., Any], fake_args: tuple, fake_kwargs: dict,
              allow_real_tensors: bool) -> Any:
    """``target`` run on the fake arguments (its body runs, on FakeTensors, as under torch.compile).
    A failure breaks the graph: Python then makes the call for real (and raises what it raises)."""
    output = tx.output
    mode = output.fake_mode
    before = mode.allow_non_fake_inputs
    mode.allow_non_fake_inputs = allow_real_tensors or before
    try:
        # warnings are dropped: the graph's run calls the function, which issues them from its own line
        with mode, enable_python_dispatcher(), warnings_issued():
            return target(*fake_args, **fake_kwargs)
    except (DataDependentOutputException, DynamicOutputShapeException) as e:
        raise _refused(what, f"its result depends on tensor data ({type(e).__name__}) when run on fake "
                             "tensors") from e
    except Exception as e:  # noqa: BLE001 - Python calls it and raises what it raises
        first = str(e).splitlines()[0][:160] if str(e) else ""
        raise _refused(what, f"it raised {type(e).__name__} when run on fake tensors at trace time: {first}") from e
    finally:
        mode.allow_non_fake_inputs = before
        output.shapes.note()


def _wrap_result(tx, node: torch.fx.Node, example: Any, inputs: dict, what: str, scalars: bool) -> VariableTracker:
    """The tracker of the (part of the) opaque call's result that ``node`` computes."""
    output = tx.output
    if isinstance(example, torch.Tensor):
        same = inputs.get(id(example))
        if same is not None:  # it returned its argument itself: `f(x) is x` holds, as in eager
            node.meta["example_value"] = example
            return same
        return wrap_op_result(tx, node, example)
    if isinstance(example, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return wrap_op_result(tx, node, example)
    if example is None:
        return ConstantVariable(None)
    if scalars and type(example) in _SCALARS:
        return ConstantVariable(example)  # from the fake run, as torch.compile's nonstrict_trace
    if type(example) in (tuple, list):
        node.meta["example_value"] = example
        items = [_wrap_result(tx, output.create_node("call_function", operator.getitem, (node, i), {}), ex,
                              inputs, what, scalars) for i, ex in enumerate(example)]
        return TupleVariable(items) if type(example) is tuple else ListVariable(items)
    if type(example) in (dict, collections.OrderedDict) and all(type(k) in _SCALARS for k in example):
        entries = {k: _wrap_result(tx, output.create_node("call_function", operator.getitem, (node, k), {}), ex,
                                   inputs, what, scalars) for k, ex in example.items()}
        return DictVariable(entries, dict_type=type(example))
    raise _refused(what, f"it returns a {type(example).__name__}, which a graph cannot hold (tensors, None and "
                         "lists/tuples/dicts of them can" + (", and numbers and strings" if scalars else "") + ")")


def _opaque_call(tx, what: str, target: Callable[..., Any], node_args: tuple, node_kwargs: dict,
                 fake_args: tuple, fake_kwargs: dict, inputs: dict, nonstrict: bool) -> VariableTracker:
    """One call_function node of ``target``: fake-run, recorded, its result wrapped."""
    output = tx.output
    example = _fake_run(tx, what, target, fake_args, fake_kwargs, allow_real_tensors=nonstrict)
    output.guard_default_dtype()  # its body may make tensors of the default dtype
    before = set(output.graph.nodes)
    node = output.create_node("call_function", target, node_args, node_kwargs)
    try:
        output.shapes.bind_data_dependent(node, example, what)  # values its result holds read from data
    except GraphBreak as e:
        output.graph.erase_node(node)
        raise _refused(what, "its result depends on tensor data it reads inside (.item()) when run on fake "
                             "tensors") from e
    # the body is opaque: it may mutate, draw random numbers, print (output_graph._leaves_traces)
    node.meta["dynamo_lite_opaque_call"] = what
    try:
        return _wrap_result(tx, node, example, inputs, what, scalars=nonstrict)
    except GraphBreak:
        for made in reversed([n for n in output.graph.nodes if n not in before]):
            output.graph.erase_node(made)  # (the result's getitem nodes, then the call)
        raise


class AllowInGraphVariable(_MarkedFunctionVariable):
    """A function marked ``allow_in_graph``: each call is one node whose target is the function."""

    def call_function(self, tx, args, kwargs):
        fn, what = self.mark.fn, self.what()
        inputs: dict = {}
        pairs = [_graph_value(tx, a, what, inputs) for a in args]
        kw_pairs = {k: _graph_value(tx, v, what, inputs) for k, v in kwargs.items()}
        return _opaque_call(tx, what, fn, tuple(p[0] for p in pairs), {k: p[0] for k, p in kw_pairs.items()},
                            tuple(p[1] for p in pairs), {k: p[1] for k, p in kw_pairs.items()}, inputs,
                            nonstrict=False)


# (the spec of one leaf, as torch.utils._pytree writes it)
_LEAF = pytree.tree_structure(0)


def _dataclass_fields(flatten_fn) -> Optional[list]:
    """The field names ``pytree.register_dataclass`` registered (read from its flatten function's
    closure, statically), or None: ``flatten_fn`` is not that one."""
    code = getattr(flatten_fn, "__code__", None)
    if code is None or code.co_name != "_flatten_fn" or static.module_name(flatten_fn) != pytree.__name__ \
            or "field_names" not in code.co_freevars:
        return None
    return list(flatten_fn.__closure__[code.co_freevars.index("field_names")].cell_contents)


def _flatten(tx, var: VariableTracker, leaves: list, what: str) -> pytree.TreeSpec:
    """The pytree spec of the argument ``var`` (as torch.utils._pytree.tree_flatten would make it of
    the real value); its leaves (trackers) are appended to ``leaves``."""
    if var.is_tensor() or var.symbolic:
        leaves.append(var)
        return _LEAF
    t = type_or_none(var)
    if t in (list, tuple) or (t is not None and pytree.is_namedtuple_class(t)):
        children = [_flatten(tx, item, leaves, what) for item in var.unpack(tx)]
        return pytree.TreeSpec(t, t if t not in (list, tuple) else None, children)
    if t in (dict, collections.OrderedDict) and isinstance(var, DictVariable):
        if any(isinstance(k, IdentityKey) for k in var.items):
            raise _refused(what, "a dict argument keyed by objects")
        return pytree.TreeSpec(t, list(var.items), [_flatten(tx, v, leaves, what) for v in var.items.values()])
    if var.is_python_constant() and not (t is not None and t in pytree.SUPPORTED_NODES and t not in _SCALARS):
        value = var.as_python_constant()
        if value is None:
            return pytree.tree_structure(None)
        if type(value) in _SCALARS or type(value) is torch.Size:
            leaves.append(var)
            return _LEAF
    if t is not None and t in pytree.SUPPORTED_NODES:
        if pytree.is_constant_class(t):
            obj = getattr(var, "value", None)
            if var.source is None or type(obj) is not t:
                raise _refused(what, f"a {t.__qualname__} (pytree.register_constant) made inside the compiled code "
                                     "(only objects that exist before the call can be constants of the graph)")
            tx.output.add_guard(guards.IdGuard(var.source, obj))  # the node holds this very object
            return pytree.TreeSpec(t, pytree.ConstantNode(obj), [])
        node_def = pytree.SUPPORTED_NODES[t]
        fields = _dataclass_fields(node_def.flatten_fn)
        if fields is not None:  # pytree.register_dataclass: its fields, None ones in the context
            flat_names, none_names, children = [], [], []
            for name in fields:
                field = var.var_getattr(tx, name)
                if not field.symbolic and field.is_python_constant() and field.as_python_constant() is None:
                    none_names.append(name)
                else:
                    flat_names.append(name)
                    children.append(_flatten(tx, field, leaves, what))
            return pytree.TreeSpec(t, [flat_names, none_names], children)
        reason = is_inlinable_function(node_def.flatten_fn)
        if reason is not None:
            raise _refused(what, f"the pytree flatten function of {t.__qualname__} cannot be traced ({reason})")
        # the user's flatten function, traced (never run on the real object)
        flat = tx.wrap(node_def.flatten_fn, None).call_function(tx, [var], {}).unpack(tx)
        if len(flat) != 2:
            raise _refused(what, f"the pytree flatten function of {t.__qualname__} returned {len(flat)} values, not 2")
        try:
            context = flat[1].constant_copy()
        except NotImplementedError as e:
            raise _refused(what, f"the pytree context of a {t.__qualname__} is not a constant") from e
        return pytree.TreeSpec(t, context, [_flatten(tx, c, leaves, what) for c in flat[0].unpack(tx)])
    raise _refused(what, f"its argument {var.describe()} is neither a tensor, a constant, nor a pytree of them "
                         "(register its class with torch.utils._pytree: register_dataclass, register_pytree_node "
                         "or register_constant)")


def _nonstrict_target(fn: Callable[..., Any], spec: pytree.TreeSpec) -> Callable[..., Any]:
    """The node's target: ``fn`` called with the arguments rebuilt from the flat inputs."""
    def call(*flat):
        args, kwargs = pytree.tree_unflatten(flat, spec)
        return fn(*args, **kwargs)

    call.__name__ = call.__qualname__ = getattr(fn, "__name__", "nonstrict_trace_fn")
    call.__module__ = getattr(fn, "__module__", None) or __name__
    return call


class NonstrictTraceVariable(_MarkedFunctionVariable):
    """A function marked ``nonstrict_trace`` (the wrapper it returned): each call is one node taking
    the flat pytree leaves of its arguments."""

    def call_function(self, tx, args, kwargs):
        what = self.what()
        leaves: list = []
        spec = pytree.TreeSpec(tuple, None, [pytree.TreeSpec(tuple, None, [_flatten(tx, a, leaves, what) for a in args]),
                                             pytree.TreeSpec(dict, list(kwargs),
                                                             [_flatten(tx, v, leaves, what) for v in kwargs.values()])])
        inputs: dict = {}
        pairs = [_graph_value(tx, leaf, what, inputs) for leaf in leaves]
        target = _nonstrict_target(self.mark.fn, spec)
        return _opaque_call(tx, what, target, tuple(p[0] for p in pairs), {}, tuple(p[1] for p in pairs), {},
                            inputs, nonstrict=True)


# ---- substitute_in_graph ---------------------------------------------------------------------

class PolyfilledFunctionVariable(_MarkedFunctionVariable):
    """``original`` (or the wrapper substitute_in_graph returned): calls inline the polyfill."""

    def what(self):
        return (f"{static.qualname(self.mark.fn)} (substituted by {static.qualname(self.mark.polyfill)}, "
                "dynamo_lite.substitute_in_graph)")

    def call_function(self, tx, args, kwargs):
        mark = self.mark
        if mark.can_constant_fold_through and not any(v.symbolic for v in [*args, *kwargs.values()]) and \
                all(v.is_python_constant() for v in [*args, *kwargs.values()]):
            try:
                value = mark.fn(*[a.constant_copy() for a in args], **{k: v.constant_copy() for k, v in kwargs.items()})
            except Exception as e:  # noqa: BLE001 - Python calls it and raises
                raise GraphBreak(gb.OPERATION_RAISES, f"{self.what()} raised {type(e).__name__}") from e
            return wrap_constant_result(value)
        try:
            return tx.wrap(mark.polyfill, None).call_function(tx, list(args), dict(kwargs))
        except GraphBreak as e:
            e.reason = f"{e.reason} (in the polyfill of {self.what()})"
            e.args = (e.reason,)
            raise


# ---- assume_constant_result -------------------------------------------------------------------

class AssumeConstantResultVariable(_MarkedFunctionVariable):
    """A function marked ``assume_constant_result``: called at trace time, its result a constant."""

    def call_function(self, tx, args, kwargs):
        what = self.what()
        for v in [*args, *kwargs.values()]:
            if v.symbolic or v.is_tensor() or not v.is_python_constant():
                raise GraphBreak(gb.ASSUMED_CONSTANT_NOT_CALLED, f"{what} called with {v.describe()}, not a constant "
                                 "known at trace time; Python calls it")
        try:
            value = self.mark.fn(*[a.constant_copy() for a in args], **{k: v.constant_copy() for k, v in kwargs.items()})
        except Exception as e:  # noqa: BLE001 - Python calls it and raises it
            raise GraphBreak(gb.ASSUMED_CONSTANT_NOT_CALLED, f"{what} raised {type(e).__name__} at trace time; "
                             "Python calls it") from e
        try:
            return wrap_constant_result(value)
        except GraphBreak as e:
            raise GraphBreak(gb.ASSUMED_CONSTANT_NOT_CALLED, f"{what} returned a {type(value).__name__}: only "
                             "numbers, strings, None and containers of them are put in the trace as constants; "
                             "Python calls it") from e


_TRACKERS: dict[str, Callable[[Any, Mark, Any], VariableTracker]] = {
    ALLOW_IN_GRAPH: AllowInGraphVariable,
    NONSTRICT_TRACE: NonstrictTraceVariable,
    SUBSTITUTE_IN_GRAPH: PolyfilledFunctionVariable,
    ASSUME_CONSTANT_RESULT: AssumeConstantResultVariable,
}

__all__ = ["Mark", "add_mark", "mark_of", "escape_hatch_variable", "ALLOW_IN_GRAPH", "NONSTRICT_TRACE",
           "SUBSTITUTE_IN_GRAPH", "ASSUME_CONSTANT_RESULT"]
