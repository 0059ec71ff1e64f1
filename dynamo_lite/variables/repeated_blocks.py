"""Repeated blocks captured once: the first call of a block's ``forward`` is traced and kept
as a template; later calls of blocks of the same class (the other layers of a stack) replay it.

A model that runs N instances of one block class (the decoder layers of a transformer) would
otherwise have every layer's bytecode interpreted again: capture time grows with depth.  Here the
first call of a block is traced as usual while its effects on the trace are recorded (a
``Recording``): the graph nodes it added, the graph inputs it made (its parameters), every guard
added (GuardSet.recorders) and every write and read of the trace's own side-effect log
(SideEffects.recorders).  A later call of a block of the same class, with arguments of the same
structure (tensors of the same metadata, equal constants) and the same grad mode, checks that
every guard the template relied on about its own block holds for the new one (compiled once per
template into one check over the block and the frame's arguments), then copies the template's
nodes into the graph with the new block's parameters as inputs, and guards the new block with
one BlockGuard (guards/kinds.py): the template's guards about its block compiled once over
``___block`` and copied into the frame's C program with the new block in its place (facts about
a submodule's class are not repeated: the new submodule is guarded to have the very class of
the template's).  The graph the backend gets is the one per-layer tracing would give, node for
node.

What a template may depend on, checked at the end of its call (else no template: every call of
that key is traced): its arguments (tensors, constants, tuples of them); the block's own
attributes, parameters and submodules, read through sources under the block (guarded);
globals and objects outside the block (guarded, and those guards hold for every later call of
the same trace); values the trace wrote before the call (the same trackers, in the same state,
at a replay).  It must leave nothing but graph nodes and guards: no write to an object made
before it (but one that puts back the value the object holds for real: a set-and-reset), no
replayed call or warning, no in-place op on a tensor it did not make or on a view, no result
that is a view, no change of grad mode or global mode, no symbolic size, no value read from
tensor data, no Python random draw, no ``id()`` of one of its objects but as a key of a dict it
made (mappings.py, constant.ObservedConstant).  A block whose modules or parameters are shared
differently from the template's, or that the trace already knows, is traced as usual.

Which blocks (``config.repeated_blocks``): "auto" (default) -- any module with submodules whose
class is not torch.nn's own; "marked" -- only forwards marked with
``dynamo_lite.nested_compile_region`` or ``torch.compiler.nested_compile_region`` (whose wrapper
is traced through either way); "off".  The ``repeated_blocks`` log says what happened and why.
Tested by tests/torch/test_repeated_blocks.py; bench/capture_depth.py measures it.
"""
from __future__ import annotations

import builtins
import copy
import dataclasses
import functools
import inspect
import logging
import re
import sys
from typing import Any, Optional

import torch
from torch import nn

from .. import bytecode_compat, config, guards
from ..source import LocalSource, Source, TypeSource, guard_local_name
from .base import VariableTracker
from .constant import ConstantVariable
from .sequences import TupleVariable
from .tensor import SymNodeVariable, TensorVariable, wrap_op_result

# the marker of dynamo_lite.nested_compile_region (api.py sets it on the function)
MARK = "__dynamo_lite_compile_region__"
# torch.compiler.nested_compile_region's wrapper keeps the function it wraps here
TORCH_MARK = "__marked_compile_region_fn__"
_BLOCK = LocalSource("___block")  # the block, in the template's own check
log = logging.getLogger("dynamo_lite.repeated_blocks")


def unwrap_marked(fn):
    """The function a ``torch.compiler.nested_compile_region`` wrapper calls (innermost), or None."""
    inner = None
    while callable(fn) and hasattr(fn, TORCH_MARK):
        inner = fn = getattr(fn, TORCH_MARK)
    return inner


def _is_marked(fn) -> bool:
    return getattr(fn, MARK, False) or unwrap_marked(fn) is not None


def applies(module: nn.Module, forward) -> bool:
    """Is a call of ``module`` (running ``forward``) captured through templates?"""
    mode = config.repeated_blocks
    if mode == "off":
        return False
    if _is_marked(forward):
        return True
    if mode != "auto":
        return False
    cls = type(module)
    return bool(module._modules) and not cls.__module__.startswith("torch.")


# ---- sources -------------------------------------------------------------------------------
def _under(source: Optional[Source], root: Source) -> bool:
    while source is not None:
        if source == root:
            return True
        source = getattr(source, "parent", None)
    return False


def _reroot(source: Source, old: Source, new: Source, memo: Optional[dict] = None) -> Source:
    """``source`` with ``old`` (an ancestor, or itself) replaced by ``new``."""
    if source == old:
        return new
    if memo is not None:
        done = memo.get(source)
        if done is not None:
            return done
    parent = getattr(source, "parent", None)
    result = source if parent is None else dataclasses.replace(source, parent=_reroot(parent, old, new, memo))
    if memo is not None:
        memo[source] = result
    return result


def _name_pattern(root: Source) -> "re.Pattern":
    return re.compile(r"(?<![\w.])" + re.escape(root.name()) + r"(?!\w)")


def _guard_sources(guard) -> list:
    out = []
    for f in dataclasses.fields(guard):
        v = getattr(guard, f.name)
        if isinstance(v, Source):
            out.append(v)
        elif isinstance(v, tuple):
            out.extend(s for s in v if isinstance(s, Source))
    return out


def _reroot_plan(guard) -> tuple:
    """The fields of ``guard`` a re-rooting changes: ((name, kind), ...), kind "source", "tuple"
    (of sources and constants) or "text" (an expression naming sources)."""
    plan = []
    for f in dataclasses.fields(guard):
        v = getattr(guard, f.name)
        if isinstance(v, Source):
            plan.append((f.name, "source"))
        elif isinstance(v, tuple) and any(isinstance(s, Source) for s in v):
            plan.append((f.name, "tuple"))
        elif f.name == "text" and isinstance(v, str):
            plan.append((f.name, "text"))
    return tuple(plan)


def _reroot_guard(guard, old: Source, new: Source, pattern, memo: Optional[dict] = None):
    changes = {}
    for name, kind in _reroot_plan(guard):
        v = getattr(guard, name)
        if kind == "source":
            changes[name] = _reroot(v, old, new, memo)
        elif kind == "tuple":
            changes[name] = tuple(_reroot(s, old, new, memo) if isinstance(s, Source) else s for s in v)
        else:
            changes[name] = pattern.sub(lambda _m: new.name(), v)
    return dataclasses.replace(guard, **changes)


def _class_level(guard, root: Source) -> Optional[Source]:
    """P when every source of ``guard`` under ``root`` reads through ``type(P)``, P under root (a
    fact about the class of a module of the block: the same class for every block whose modules
    have the same types), else None."""
    if getattr(guard, "text", None) is not None:
        return None
    found = None
    for source in _guard_sources(guard):
        if not _under(source, root):
            continue
        owner, node = None, source
        while node is not None:
            if isinstance(node, TypeSource) and _under(node.parent, root):
                owner = node.parent  # the one nearest the root wins
            node = getattr(node, "parent", None)
        if owner is None or (found is not None and owner != found):
            return None
        found = owner
    return found


def _involves(guard, root: Source, pattern) -> bool:
    if any(_under(s, root) for s in _guard_sources(guard)):
        return True
    text = getattr(guard, "text", None)
    return isinstance(text, str) and pattern.search(text) is not None


# ---- arguments -----------------------------------------------------------------------------
class _NotReplayable(Exception):
    """Why a call cannot be a template or a replay (logged)."""


def _tensor_key(var: TensorVariable) -> tuple:
    t = var.example
    if any(not isinstance(s, int) for s in (*t.shape, *t.stride(), t.storage_offset())):
        raise _NotReplayable("an argument has a symbolic size")
    return (type(var), var.python_type(), var.source is None, tuple(t.shape), t.stride(), t.storage_offset(),
            t.dtype, t.device, t.layout, t.requires_grad, t.is_leaf, t._is_view(), t.is_inference())


def flatten_arguments(args: list, kwargs: dict) -> tuple[tuple, list]:
    """(key, tensors): the arguments' structure and metadata, equal for calls a template
    serves, and their tensor trackers in order.  Raises _NotReplayable for other arguments."""
    tensors: list = []
    seen: dict[int, int] = {}

    def key(v):
        if isinstance(v, TensorVariable):
            first = seen.setdefault(id(v), len(tensors))
            tensors.append(v)
            return ("t", first, _tensor_key(v))
        if isinstance(v, SymNodeVariable):
            raise _NotReplayable("an argument is a symbolic number")
        if type(v) is TupleVariable:
            return ("tuple", tuple(key(i) for i in v.items))
        if type(v) is ConstantVariable and v.is_python_constant():
            c = v.as_python_constant()
            if c is None or type(c) in (bool, int, float, str):
                return ("c", type(c), c)
        raise _NotReplayable(f"an argument is a {v.describe()}")

    k = (tuple(key(a) for a in args), tuple((name, key(v)) for name, v in kwargs.items()))
    return k, tensors


# ---- templates -----------------------------------------------------------------------------
@dataclasses.dataclass
class _Output:
    """How to rebuild one leaf of the template's result."""

    kind: str  # "new" (a node of the template), "arg" (an argument tensor), "input" (a graph input)
    node: Any = None
    index: int = 0  # "arg": its index among the argument tensors
    fake: Any = None


class Template:
    """The recorded first call of a block class (see the module docstring).  What only a replay
    needs (the guards about the block sorted out, their check compiled) is made on first use: most
    blocks of a model are never repeated."""

    def __init__(self, root: Source, nodes: list, arg_nodes: dict, inputs: dict, shared_inputs: set,
                 recorded_guards: list, result, compiling_queries: list, writes: tuple, reads: list,
                 arg_names: tuple):
        self.root = root
        self.nodes = nodes  # the template's graph nodes, in order (no placeholders)
        self.arg_nodes = arg_nodes  # node -> index of the argument tensor it is
        self.inputs = inputs  # placeholder node -> its source (under root), for the template's block
        self.shared_inputs = shared_inputs  # placeholder nodes of sources outside the block
        self.recorded_guards = recorded_guards  # every guard added during the call, repeats included
        self.result = result  # the result's structure: _Output leaves in tuples, constants
        self.compiling_queries = compiling_queries
        self.writes = writes  # write_state() before the call
        self.reads = reads  # (event, fingerprint) of each value read from the trace's own writes
        self.arg_names = arg_names  # the frame's arguments (guards may read them)
        self.block_guards: list = []  # guards about the block (sources under root), but its identity
        self.module_ids: list = []  # [(source under root, template module)] guarded by identity
        self.class_level: dict = {}  # id(guard) -> P: a fact about type(P), P a module of the block
        self.check = None  # (CompiledGuard, resolver) over the block and the frame's arguments
        self.replayed_guards: list = []  # the guards a replay states about its block (one BlockGuard)
        self.block_check = None  # those guards compiled over ("___block", *frame args): a BlockGuard
        self.block_reads: tuple = ()  # the sources outside the block they read
        self.class_owners: list = []  # modules whose class a replay guards to be the template's

    def prepare(self, output) -> None:
        if self.check is not None:
            return
        root, pattern = self.root, _name_pattern(self.root)
        block_guards = [g for g in self.recorded_guards if _involves(g, root, pattern)
                        and not (isinstance(g, guards.IdGuard) and g.source == root)]  # (its caller's)
        # modules of the block guarded by identity are the new block's own modules in a replay;
        # one that code outside the block relies on too must stay the very same object
        outside = {id(g.obj) for g in output.guards if isinstance(g, guards.IdGuard) and not _involves(g, root, pattern)}
        check_guards = []
        for g in dict.fromkeys(block_guards):
            if isinstance(g, guards.IdGuard) and isinstance(g.obj, nn.Module) and id(g.obj) not in outside:
                self.module_ids.append((g.source, g.obj))
                check_guards.append(guards.TypeGuard(_reroot(g.source, root, _BLOCK), type(g.obj)))
            else:
                check_guards.append(_reroot_guard(g, root, _BLOCK, pattern))
        self.block_guards = list(dict.fromkeys(block_guards))
        self.class_level = {id(g): owner for g in self.block_guards if (owner := _class_level(g, root)) is not None}
        # what a replay adds for the new block: the guards re-rooted (but facts about the class of a
        # module, stated once by the template's guard, and the metadata of its tensors, which
        # wrapping them as graph inputs guards)
        module_sources = {s for s, _ in self.module_ids}
        input_sources = set(self.inputs.values())
        self.replayed_guards = [g for g in self.block_guards
                                if not (isinstance(g, guards.IdGuard) and g.source in module_sources)
                                and id(g) not in self.class_level
                                and not (isinstance(g, guards.TensorGuard) and g.source in input_sources)]
        self.class_owners = list(dict.fromkeys(self.class_level.values()))
        self.check = _compile_check(check_guards, self.arg_names, [_reroot(s, root, _BLOCK) for s, _ in self.module_ids]
                                    + [_reroot(s, root, _BLOCK) for s in self.inputs.values()])
        # the replayed guards as one program over the block (a BlockGuard states it about each
        # replayed block); its modules' classes first, so nothing is read through one unchecked
        if self.replayed_guards or self.class_owners:
            replayed = guards.GuardSet()
            for source, module in self.module_ids:
                replayed.add(guards.TypeGuard(_reroot(source, root, _BLOCK), type(module)))
            for g in self.replayed_guards:
                replayed.add(_reroot_guard(g, root, _BLOCK, pattern))
            for owner in self.class_owners:
                # facts about the class of one of its modules: the template's guards state them
                # once; each replayed block's module has the very same class
                replayed.add(guards.SameObjectGuard(TypeSource(_reroot(owner, root, _BLOCK)), TypeSource(owner)))
            self.block_check = replayed.compile(("___block", *self.arg_names))
            self.block_reads = tuple(dict.fromkeys(s for g in replayed for s in g.reads() if not _under(s, _BLOCK)))


class Recording:
    """What one block call did to the trace, taken while the call is traced."""

    def __init__(self, tx, module_var, tensors: list):
        output = tx.output
        self.output = output
        self.root = module_var.source
        self.arg_nodes = {t.node: i for i, t in reversed(list(enumerate(tensors)))}
        self.last_node = _last_node(output.graph)
        self.guards: list = []
        output.guards.recorders.append(self.guards)
        self.inputs_before = len(output.graph_inputs)
        self.state = _trace_state(output)
        self.queries_before = len(output.compiling_queries)
        self.writes = write_state(output.side_effects)
        self.effects: list = []
        output.side_effects.recorders.append(self.effects)

    def stop(self) -> None:
        for recorders, mine in ((self.output.guards.recorders, self.guards),
                                (self.output.side_effects.recorders, self.effects)):
            if recorders and recorders[-1] is mine:
                recorders.pop()

    def finish(self, tx, result) -> Template:
        """The template of this call, or _NotReplayable (why not)."""
        output = self.output
        if self.root is None:
            raise _NotReplayable("the block has no source")
        changed = [what for what, a, b in zip(_STATE, self.state, _trace_state(output)) if a != b]
        if changed:
            raise _NotReplayable(f"the call left more than graph nodes and guards: {', '.join(changed)}")
        reads = self._reads(output.side_effects)
        new_inputs = output.graph_inputs[self.inputs_before:]
        inputs, shared, self.input_values = {}, set(), []
        for gi in output.graph_inputs:
            if _under(gi.source, self.root):
                if not isinstance(gi.example, torch.Tensor):
                    raise _NotReplayable("a graph input of the block is not a tensor")
                inputs[gi.node] = gi.source
                self.input_values.append(gi.example)
            elif gi in new_inputs and not isinstance(gi.example, torch.Tensor):
                raise _NotReplayable("the call made a symbolic input")
        input_nodes = {gi.node for gi in output.graph_inputs}
        nodes = []
        node = self.last_node.next if self.last_node is not None else next(iter(output.graph.nodes), None)
        root_end = output.graph._root
        while node is not None and node is not root_end:
            if node.op != "placeholder":
                nodes.append(node)
            node = node.next
        inside = set(nodes)
        for n in nodes:
            if n.op not in ("call_function", "call_method"):
                raise _NotReplayable(f"the call made a {n.op} node")
            for a in n.all_input_nodes:
                if a in inside or a in self.arg_nodes:
                    continue
                if a in input_nodes:
                    if a not in inputs:
                        shared.add(a)
                    continue
                raise _NotReplayable("the call used a tensor that is neither an argument nor an input")
            if not _mutation_allowed(n, inside):
                raise _NotReplayable("the call changes a tensor it did not make, or a view, in place")
        # the result: tensors made here (not views), argument tensors, graph inputs, constants
        by_fake: dict = {}
        for n in nodes:
            if isinstance(n.meta.get("example_value"), torch.Tensor):
                by_fake.setdefault(id(n.meta["example_value"]), n)

        def leaf(v):
            if isinstance(v, TensorVariable):
                if v.node in inside:
                    if v.example._is_view() or by_fake.get(id(v.example)) is not v.node or type(v) is not TensorVariable:
                        raise _NotReplayable("the result is a view or an unusual tensor")
                    return _Output("new", node=v.node, fake=v.example)
                if v.node in self.arg_nodes:
                    return _Output("arg", index=self.arg_nodes[v.node])
                if v.node in input_nodes:
                    return _Output("input", node=v.node)
                raise _NotReplayable("the result is a tensor from outside the call")
            if type(v) is TupleVariable:
                return tuple(leaf(i) for i in v.items)
            if type(v) is ConstantVariable and v.is_python_constant() and \
                    (v.as_python_constant() is None or type(v.as_python_constant()) in (bool, int, float, str)):
                return ("c", v.as_python_constant())
            raise _NotReplayable(f"the result is a {v.describe()}")

        shape = leaf(result)
        template = Template(self.root, nodes, dict(self.arg_nodes), inputs, shared, self.guards, shape,
                            output.compiling_queries[self.queries_before:], self.writes, reads,
                            bytecode_compat.arg_names(tx.root().code))
        template.input_values = self.input_values
        return template

    def _reads(self, se) -> list:
        """The values the call read from the trace's own earlier writes, as (event, fingerprint);
        raises _NotReplayable when the call leaves a write behind (a write to an object outside the
        call that does not put back what the object holds for real, as a set-and-reset does)."""
        reads, reached, written = [], {}, set()
        for event in self.effects:
            kind = event[0]
            if kind == "external":
                raise _NotReplayable(f"the call has a side effect (a {event[1]} replayed after the graph)")
            if kind == "store":
                written.add((id(event[1]), event[2]))
            elif kind == "read_attr" and (id(event[1]), event[2]) not in written:
                _reach(event[-1], se, reached)
                reads.append((event, fingerprint(event[-1], se)))
            elif kind == "read_global":
                _reach(event[-1], se, reached)
                reads.append((event, fingerprint(event[-1], se)))
        for event in self.effects:
            if event[0] == "identity" and _under(event[1].source, self.root):
                # an id() of an object of the block: another block's is another number, which only
                # a dict made in the call keyed by it treats the same way
                container = event[2]
                if container is None or container.source is not None or id(container) in reached:
                    raise _NotReplayable(f"the call uses the id() of {event[1].describe()}, an object of the "
                                         "block, other than as a key of a dict it made")
        # attributes the trace had written before the call (not putting back the real value): a
        # write that puts back the real value is no set-and-reset there
        pending_before = {(obj_id, name) for obj_id, written in self.writes[0] for name, _ in written}
        for event in self.effects:
            target = event[1] if event[0] in ("mutate", "store") else None
            if target is None:
                continue
            if event[0] == "store" and target.source is not None and not _under(target.source, self.root) \
                    and _no_op_write(se, target, event[2]) and (id(target), event[2]) not in pending_before:
                continue
            if target.source is not None or id(target) in reached:
                raise _NotReplayable(f"the call writes to {target.describe()}, made before it")
        return reads


def _last_node(graph):
    nodes = graph.nodes
    return next(iter(reversed(nodes)), None)


_STATE = ("a Python random draw", "a call before the graph",
          "a class made before the graph", "a hook registered", "grad mode", "a mode entered", "symbolic sizes",
          "a value read from tensor data", "a symbolic size", "library code modelled")


def _trace_state(output) -> tuple:
    """What a block call may not change (a template's effects are graph nodes and guards only):
    one item per _STATE."""
    return (len(output.random_calls), len(output.prologue_calls),
            len(output.made_before_graph), len(output.pending_module_hooks), output.grad_enabled,
            len(output.global_modes), output.shapes.used, output.shapes.data_dependent, len(output.symbol_nodes),
            output.modelled_library_code)


_WRITES_FIRST_ARGUMENT = frozenset({"setitem", "__setitem__", "delitem", "__delitem__", "iadd", "isub", "imul",
                                    "itruediv", "ifloordiv", "imod", "ipow", "imatmul", "iand", "ior", "ixor",
                                    "ilshift", "irshift"})


@functools.lru_cache(maxsize=None)
def _takes_inplace(fn) -> bool:
    try:
        return "inplace" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def _mutation_allowed(node, inside: set) -> bool:
    """False when ``node`` writes to a tensor the template did not make, or to a view: an in-place
    method or operator, ``out=``, a function called with ``inplace`` (it returns its argument's
    fake: record_op keeps the argument's tracker; ``.contiguous()`` or ``.to()`` returning their
    tensor itself do not write)."""
    target = node.target
    name = target if isinstance(target, str) else getattr(target, "__name__", "")
    if "out" in node.kwargs:
        return False
    written = None
    if name in _WRITES_FIRST_ARGUMENT or (name.endswith("_") and not name.endswith("__")):
        written = node.args[0] if node.args and isinstance(node.args[0], torch.fx.Node) else node
    elif node.op == "call_function" and callable(target) and _takes_inplace(target):
        example = node.meta.get("example_value")
        written = next((a for a in node.all_input_nodes if a.meta.get("example_value") is example), None)
    if written is None:
        return True
    fake = written.meta.get("example_value")
    return written in inside and isinstance(fake, torch.Tensor) and not fake._is_view()


def _compile_check(check_guards: list, arg_names: tuple, resolve: list):
    """(check, resolver): the template's guards about its block as one check over
    ``(block, *frame arguments, globals, function)``, and a function of the same arguments giving
    the objects at ``resolve`` sources."""
    gs = guards.GuardSet()
    for g in check_guards:
        gs.add(g)
    compiled = gs.compile(("___block", *arg_names))
    namespace = {"___builtins": builtins, "___torch": torch, "___sys": sys}
    body = ", ".join(s.name() for s in resolve)
    params = ", ".join(guard_local_name(n) for n in ("___block", *arg_names, "___G", "___F"))
    exec(f"def ___resolve({params}):\n    return ({body}{',' if resolve else ''})\n", namespace)
    return compiled, namespace["___resolve"]


# ---- the call ------------------------------------------------------------------------------
def call_block(tx, module_var, forward_var, args: list, kwargs: dict) -> VariableTracker:
    """``forward(block, *args, **kwargs)``: a template's copy when one serves this call; else
    traced (and kept as the template of its class when it qualifies)."""
    output = tx.output
    module = module_var.value

    def traced():
        return forward_var.call_function(tx, [module_var, *args], kwargs)

    if module_var.source is None or output.global_modes:
        return traced()
    try:
        key, tensors = flatten_arguments(args, kwargs)
    except _NotReplayable:
        return traced()
    full_key = (type(module), forward_var.fn, key, output.grad_enabled)
    template = output.block_templates.get(full_key)
    where = module_var.source.name()
    if isinstance(template, Template):
        try:
            result = replay(tx, template, module_var, tensors)
        except _NotReplayable as e:
            log.info("%s: %s is traced: the template of %s does not hold for it: %s", type(module).__name__,
                     where, template.root.name(), e)
            return traced()
        log.info("%s: %s replayed the template of %s (%d nodes)", type(module).__name__, where,
                 template.root.name(), len(template.nodes))
        return result
    if template is not None:  # the first call could not be a template
        return traced()
    recording = Recording(tx, module_var, tensors)
    try:
        result = traced()
    finally:
        recording.stop()
    try:
        output.block_templates[full_key] = recording.finish(tx, result)
        log.info("%s: %s is traced and kept as the template of its class for such arguments",
                 type(module).__name__, where)
    except _NotReplayable as e:
        output.block_templates[full_key] = str(e)
        log.info("%s: %s cannot be a template: %s", type(module).__name__, where, e)
    except Exception as e:  # noqa: BLE001 - a call we cannot analyse is no template; it was traced
        output.block_templates[full_key] = f"{type(e).__name__}: {e}"
        log.info("%s: %s cannot be a template (%s: %s)", type(module).__name__, where, type(e).__name__, e)
    return result


# ---- replay --------------------------------------------------------------------------------
def replay(tx, template: Template, module_var, tensors: list) -> VariableTracker:
    """The template's result for this call, its nodes copied into the graph; raises _NotReplayable
    (before changing anything) when the template does not serve this block."""
    output = tx.output
    root = module_var.source
    template.prepare(output)
    check, resolve = template.check
    frame = tx.root()
    args = (module_var.value, *(frame.f_locals.get(n) for n in bytecode_compat.arg_names(frame.code)))
    try:
        ok = check.fn(*args, frame.f_globals, frame.func)
    except Exception:  # noqa: BLE001 - a guard that cannot be evaluated does not hold
        ok = False
    if not ok:
        why = "a guard of the template fails"
        if log.isEnabledFor(logging.INFO):  # (the guards again, in Python: only for the log)
            why = check.explain_failure(args, frame.f_globals, frame.func) or why
        raise _NotReplayable(why.replace(_BLOCK.name(), root.name()))
    if output.pending_module_hooks:
        raise _NotReplayable("a hook registration is pending")
    _reads_hold(template, output.side_effects)
    objects = resolve(*args, frame.f_globals, frame.func)
    n_modules = len(template.module_ids)
    modules, params = objects[:n_modules], objects[n_modules:]
    if not _same_identities([m for _, m in template.module_ids], modules, output):
        raise _NotReplayable("its submodules are shared differently")
    if not _same_identities(template.input_values, params, output):
        raise _NotReplayable("its parameters are tied differently, or the trace read them before")
    # the block's guards, re-rooted; its modules guarded by identity; its tensors as graph inputs
    memo: dict = {}
    if template.block_check is not None:
        output.add_guard(guards.BlockGuard(root, template.block_check, template.root, template.block_reads))
    for (source, _), obj in zip(template.module_ids, modules):
        output.add_guard(guards.IdGuard(_reroot(source, template.root, root, memo), obj))
    env: dict = {}
    for node, value in zip(template.inputs, params):
        var = tx.wrap(value, _reroot(template.inputs[node], template.root, root, memo))
        env[node] = var.node
    for node in template.shared_inputs:
        env[node] = node
    for node, index in template.arg_nodes.items():
        env[node] = tensors[index].node
    graph = output.graph
    for node in template.nodes:
        env[node] = _copy_node(graph, node, env)
    output.compiling_queries.extend(template.compiling_queries)
    made: dict = {}

    def build(shape):
        if isinstance(shape, _Output):
            if shape.kind == "arg":
                return tensors[shape.index]
            if shape.kind == "input":
                return _input_var(output, env[shape.node])
            if id(shape.node) not in made:
                made[id(shape.node)] = wrap_op_result(tx, env[shape.node], _fresh_fake(output, shape.fake))
            return made[id(shape.node)]
        if isinstance(shape, tuple) and shape and shape[0] == "c":
            return ConstantVariable(shape[1])
        return TupleVariable([build(s) for s in shape])

    return build(template.result)


def _copy_node(graph, node, env: dict):
    """``graph.node_copy(node, env.__getitem__)``, made with its arguments set after creation
    (create_node would walk them with pytree looking for raw symbolic numbers, which a template,
    having no symbolic size, cannot hold: a third of the cost)."""
    new = graph.create_node(node.op, node.target, (), None, node.name, node.type)
    new.args = torch.fx.node.map_arg(node.args, env.__getitem__)
    if node.kwargs:
        new.kwargs = torch.fx.node.map_arg(node.kwargs, env.__getitem__)
    new.meta = copy.copy(node.meta)
    return new


def _input_var(output, node):
    for var in output.source_cache.values():
        if isinstance(var, TensorVariable) and var.node is node:
            return var
    raise _NotReplayable("a result tensor is a graph input without a tracker")


def _fresh_fake(output, fake):
    """A new fake tensor with ``fake``'s metadata (a replayed result is a tensor of its own)."""
    with output.fake_mode, torch.enable_grad():
        new = torch.empty_strided(fake.shape, fake.stride(), dtype=fake.dtype, device=fake.device)
        if fake.requires_grad:
            new = new.requires_grad_()
            if not fake.is_leaf:
                new = new.clone()
    return new


def _same_identities(template_objs: list, new_objs, output) -> bool:
    """The new block's objects alias one another as the template's did, and are the template's
    own or objects the trace does not know yet (else the trace would have treated them as those)."""
    first_t: dict[int, int] = {}
    first_n: dict[int, int] = {}
    for i, (t, n) in enumerate(zip(template_objs, new_objs)):
        if first_t.setdefault(id(t), i) != first_n.setdefault(id(n), i):
            return False
        if n is not t and id(n) in output.object_cache:
            return False
    return True


# ---- the trace's own writes ------------------------------------------------------------------
def write_state(se) -> tuple:
    """The writes to objects outside the trace that the trace holds (replayed after the graph): a
    template serves a later call only where they are the same as before the template's call (it
    read the real objects, or these writes)."""
    attrs = []
    for obj in se.attr_objects.values():
        if obj.source is not None:
            written = tuple((name, id(v)) for name, v in se.attr_values.get(id(obj), {}).items()
                            if not _no_op_write(se, obj, name))
            if written:
                attrs.append((id(obj), written))
    attrs = tuple(attrs)
    return (attrs, tuple((name, id(v)) for name, v in se.global_stores.items()),
            tuple((key, id(v[1])) for key, v in se.cell_stores.items()),
            tuple((key, fingerprint(v, se)) for key, v in se.mutated.items()))


_MISSING = object()


def _no_op_write(se, obj, name: str) -> bool:
    """Does the trace's pending write of ``obj.name`` (an object outside the trace) put back the
    constant the object holds for real?  (Read from its instance __dict__, no Python runs.)"""
    value = se.attr_values.get(id(obj), {}).get(name)
    if not (isinstance(value, ConstantVariable) and value.is_python_constant()):
        return False
    new = value.as_python_constant()
    if not (new is None or type(new) in (bool, int, float, str)):
        return False
    real = getattr(obj, "value", _MISSING)
    descr = next((k.__dict__["__dict__"] for k in type(real).__mro__ if "__dict__" in k.__dict__), None)
    if type(descr).__name__ != "getset_descriptor":
        return False
    d = descr.__get__(real)
    old = d.get(name, _MISSING) if type(d) is dict else _MISSING
    return type(old) is type(new) and old == new


def _children(var, se) -> list:
    items = getattr(var, "items", None)
    out = []
    if isinstance(items, dict):
        out.extend(items.values())
    elif isinstance(items, list):
        out.extend(items)
    out.extend(se.attr_values.get(id(var), {}).values())
    return [v for v in out if isinstance(v, VariableTracker)]


def _reach(var, se, reached: dict) -> None:
    """Every tracker reachable from ``var`` (container items, attributes the trace set)."""
    stack = [var]
    while stack:
        v = stack.pop()
        if id(v) in reached:
            continue
        reached[id(v)] = v
        stack.extend(_children(v, se))


def fingerprint(var, se, seen: Optional[set] = None):
    """The state of a tracker the trace made, as a comparable value (its items' and attributes'
    trackers, recursively): equal fingerprints, the same Python-visible state."""
    if isinstance(var, ConstantVariable) and var.is_python_constant():
        c = var.as_python_constant()
        if c is None or type(c) in (bool, int, float, str):
            return ("c", type(c), c)
    seen = set() if seen is None else seen
    if id(var) in seen:
        return ("seen", id(var))
    seen.add(id(var))
    items = getattr(var, "items", None)
    keys = tuple(items) if isinstance(items, dict) else None
    return ("o", id(var), keys, tuple(fingerprint(c, se, seen) for c in _children(var, se)))


def _reads_hold(template: Template, se) -> None:
    if write_state(se) != template.writes:
        raise _NotReplayable("the trace wrote to an object outside it since the template's call")
    for event, fp in template.reads:
        if event[0] == "read_attr":
            current = se.attr_values.get(id(event[1]), {}).get(event[2])
        else:
            current = se.global_stores.get(event[1])
        if current is not event[-1] or fingerprint(current, se) != fp:
            raise _NotReplayable(f"a value the template read from the trace's writes ({event[1:-1]}) changed")
