"""DDP-aware compilation: a captured graph is cut at DistributedDataParallel's gradient buckets.

DDP all-reduces gradients bucket by bucket, as soon as every gradient of a bucket is
accumulated.  A backend that builds one autograd node for the whole graph (``aot_eager``,
``inductor``) produces all parameter gradients at the end of backward, so no all-reduce can
overlap with backward compute.  When a graph is compiled while a ``DistributedDataParallel``
runs its module (``DDP(compile(m))`` and ``compile(DDP(m))``: DDP.forward, a torch file, runs
natively and marks itself active; the wrapped module's forward is the captured frame),
``split_backend`` hands the backend one piece per bucket instead:

    split_backend(backend)                 the backend itself unless a DDP is active and
                                           config.optimize_ddp
      -> DDPSplitBackend(backend, ddp)(gm, example_inputs)
           -> ddp_buckets(ddp)             the buckets DDP reduces, in reduction order
           -> piece_of_nodes(gm, ...)      node -> piece: a new piece where the graph first
                                           reads a parameter of another bucket
           -> torch.fx split_module        one submodule per piece, the parent calls them
           -> fake propagation             example inputs of every piece (FakeTensors)
           -> backend(piece, examples)     per piece; each is its own autograd node
      <- the parent GraphModule's forward  (same inputs and outputs as gm)

Which buckets: once the reducer has built its final buckets (the rebuild after the first
backward; with ``find_unused_parameters`` the ones of DDP.__init__), its own
(``GradBucket.parameters()``); before that, the rebuild it will make, computed by DDP's own
``_compute_bucket_assignment_by_size`` over the parameters DDP manages (what
``_build_params_for_reducer`` lists: requires_grad, not ignored, shared ones once) in reverse
order, with its caps (``bucket_cap_mb``, the smaller first bucket, a ``bucket_cap_mb_list``).
A split made on that prediction is made again, once, on the first call after the rebuild if
the real buckets cut the graph elsewhere (SplitGraph).  Unused parameters count in the bucket
sizes but are in no graph.  The split only changes when gradients are reduced, never what is
computed: a wrong guess of DDP's buckets costs overlap, not results.  Not split (the whole
graph goes to the backend): one bucket, a graph that changes grad mode or autocast, DDP's
Python reducer; a cut never falls where a value that is not a tensor is live (it moves to
the next node).  If cutting fails, the graph is compiled whole (logged; raised in tests).
Tested by tests/distributed/test_ddp.py.
"""
from __future__ import annotations

import dataclasses
import logging
import weakref
from typing import Callable, Optional

import torch
import torch.fx
from torch.fx.passes.split_module import split_module

from .. import config
from .. import log as dl_log
from ..report import events

graph_code_log = logging.getLogger("dynamo_lite.graph_code")


def active_ddp_module():
    """The DistributedDataParallel whose forward is running now (None: none, or no torch.distributed)."""
    if not torch.distributed.is_available():
        return None
    from torch.nn.parallel import DistributedDataParallel

    return DistributedDataParallel._get_active_ddp_module()


def split_backend(backend: Callable) -> Callable:
    """What compiles the graph of a frame captured now: ``backend``, or a DDPSplitBackend
    around it when a DDP module is running its forward (and ``config.optimize_ddp``)."""
    if not config.optimize_ddp:
        return backend
    ddp = active_ddp_module()
    if ddp is None:
        return backend
    return DDPSplitBackend(backend, ddp)


def ddp_buckets(ddp) -> Optional[list[list[torch.nn.Parameter]]]:
    """The parameters of each gradient bucket of ``ddp``, in the order DDP reduces them
    (bucket 0 first: the parameters whose gradients are ready first, the last ones used);
    None when DDP does not reduce by buckets (its Python reducer, delayed all-reduce)."""
    if getattr(ddp, "_use_python_reducer", False) or getattr(ddp, "_delay_all_reduce_all_params", False):
        return None
    if final_buckets(ddp):
        # the reducer's own buckets (GradBucket.parameters() of each, in reduction order)
        return [list(bucket.parameters()) for bucket in ddp.reducer._get_zeros_like_grad_buckets()]
    params, expect_sparse = reducer_parameters(ddp)
    caps = ddp._bucket_config
    # the buckets the reducer will build after the first backward, from the order gradients get
    # ready in: predicted as the reverse of the parameters' order (the order DDP itself assumes)
    limits = list(caps.per_bucket_bytes_caps) or [caps.first_bucket_bytes_cap, caps.bucket_bytes_cap]
    order = list(range(len(params)))[::-1]
    indices, _ = torch.distributed._compute_bucket_assignment_by_size(
        [params[i] for i in order], limits, [expect_sparse[i] for i in order], order)
    return [[params[i] for i in bucket] for bucket in indices]


def rebuilt(ddp) -> bool:
    """Has the reducer built its final buckets (the rebuild after the first backward)?"""
    return bool(getattr(ddp, "_has_rebuilt_buckets", False))


def final_buckets(ddp) -> bool:
    """Are ``ddp_buckets(ddp)`` the reducer's final buckets, not a prediction?"""
    return rebuilt(ddp) or (ddp.find_unused_parameters and not ddp.static_graph)


def reducer_parameters(ddp) -> tuple[list, list]:
    """The parameters DDP's reducer manages, in its index order, and whether each expects a
    sparse gradient: what DDP's ``_build_params_for_reducer`` lists (parameters of every
    submodule that require grad and are not in ``parameters_to_ignore``, shared ones once),
    read without its side effects."""
    params, sparse, memo = [], [], set()
    ignored = getattr(ddp, "parameters_to_ignore", set())
    for module_name, module in ddp.module.named_modules():
        for param_name, param in module.named_parameters(recurse=False):
            if not param.requires_grad or f"{module_name}.{param_name}" in ignored or id(param) in memo:
                continue
            memo.add(id(param))
            params.append(param)
            sparse.append(isinstance(module, (torch.nn.Embedding, torch.nn.EmbeddingBag)) and module.sparse)
    return params, sparse


@dataclasses.dataclass
class Piece:
    """One piece of a split graph: a submodule of the parent, compiled by the backend."""

    name: str  # attribute of the parent GraphModule ("submod_0", ...)
    graph: torch.fx.GraphModule  # the piece as captured (before the backend)
    buckets: list  # indices (into ddp_buckets) of the buckets whose parameters it reads first
    params: list  # names of those parameters in the DDP module ("0.weight")
    ops: int  # call_function/call_method/call_module nodes


class _CompiledPiece(torch.nn.Module):
    """Stands in the parent graph for a submodule: calls what the backend made of it."""

    def __init__(self, compiled):
        super().__init__()
        self.compiled = compiled

    def forward(self, *args):
        return self.compiled(*args)


class DDPSplitBackend:
    """A backend that compiles one graph per DDP bucket (see the module docstring)."""

    def __init__(self, backend: Callable, ddp):
        self.backend = backend
        self.ddp = ddp

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list):
        split = SplitGraph(self.backend, gm, weakref.ref(self.ddp))
        try:
            split.build(ddp_buckets(self.ddp), example_inputs)
        except Exception as e:  # noqa: BLE001 - a failed cut must not cost the graph: compile it whole
            if config.raise_internal_errors:
                raise
            graph_code_log.warning("dynamo_lite: cutting graph %s at DDP's gradient buckets failed (%s: %s); "
                                   "compiling it whole", gm.meta.get("dynamo_lite_compile_id", ""),
                                   type(e).__name__, e)
            return self.backend(gm, example_inputs)
        if final_buckets(self.ddp):
            return split.fn
        return split


class SplitGraph:
    """The callable a split graph compiles to.  Split on buckets DDP has not built yet (the
    reducer rebuilds them once, after the first backward, from the order gradients got
    ready), it checks on each call whether they are built; the first call after that splits
    again on the real buckets if they cut the graph elsewhere, and from then on only the
    parent graph runs (``fn``).

    Attributes:
        backend: the user's backend.  gm: the whole graph.  ddp: weak reference to the DDP.
        fn: what runs: the parent GraphModule's forward (or the backend's callable for the
            whole graph when it was not split).  piece_of: node -> piece of the current split.
        final: the split is on DDP's final buckets (nothing left to check).
    """

    def __init__(self, backend, gm, ddp_ref):
        self.backend = backend
        self.gm = gm
        self.ddp = ddp_ref
        self.fn = None
        self.piece_of = None
        self.final = False
        self.param_names = {}  # parameter placeholder -> the parameter's name in the DDP module
        self.pieces = []  # Piece per piece of the current split ([]: not split)
        # nodes whose value is a tensor (node metadata keeps FakeTensors only until compiled)
        self.tensors = {n for n in gm.graph.nodes if isinstance(n.meta.get("example_value"), torch.Tensor)}

    def __call__(self, *args):
        if not self.final:
            ddp = self.ddp()
            if ddp is None:
                self.final = True
            elif rebuilt(ddp):
                self.final = True
                buckets = ddp_buckets(ddp)
                piece_of, why_not, _ = self._pieces(buckets, args) if buckets is not None else ({}, "", {})
                if why_not is None and piece_of != self.piece_of:
                    try:
                        self.build(buckets, list(args))
                    except Exception as e:  # noqa: BLE001 - the split made at compile time still runs
                        graph_code_log.warning("dynamo_lite: splitting graph %s again on DDP's rebuilt buckets "
                                               "failed (%s: %s); keeping the first split",
                                               self.gm.meta.get("dynamo_lite_compile_id", ""), type(e).__name__, e)
        return self.fn(*args)

    def _pieces(self, buckets, inputs) -> tuple[dict, Optional[str], dict]:
        """(node -> piece, why not split or None, parameter placeholder -> bucket index)."""
        bucket_of = {id(p): i for i, bucket in enumerate(buckets) for p in bucket}
        placeholders = [n for n in self.gm.graph.nodes if n.op == "placeholder"]
        param_bucket = {node: bucket_of[id(value)] for node, value in zip(placeholders, inputs)
                        if id(value) in bucket_of}
        ddp = self.ddp()
        names = {id(p): name for name, p in ddp.module.named_parameters()} if ddp is not None else {}
        self.param_names = {node: names.get(id(value), node.name) for node, value in zip(placeholders, inputs)
                            if node in param_bucket}
        return (*piece_of_nodes(self.gm, param_bucket, self.tensors), param_bucket)

    def build(self, buckets, example_inputs):
        """Split ``gm`` on ``buckets`` and compile the pieces (or the whole graph)."""
        gm = self.gm
        compile_id = gm.meta.get("dynamo_lite_compile_id", "")
        if buckets is None:
            piece_of, why_not, param_bucket = {}, "DDP does not reduce gradients by buckets here (its Python reducer, or delayed all-reduce)", {}
        else:
            piece_of, why_not, param_bucket = self._pieces(buckets, example_inputs)
        self.piece_of = piece_of
        n_buckets = len(buckets or ())
        if why_not is not None:
            graph_code_log.info("[%s] DDP: graph not split (%s)", compile_id, why_not)
            events.emit(events.DDPSplitEvent(compile_id, [], [], n_buckets, why_not))
            self.fn = self.backend(gm, example_inputs) if self.fn is None else self.fn
            return
        parent = split_module(gm, None, lambda node: piece_of[node], keep_original_order=True, tuple_return=True)
        pieces = [Piece(node.target, getattr(parent, node.target), [], [], 0)
                  for node in parent.graph.nodes if node.op == "call_module"]
        _describe_pieces(pieces, piece_of, param_bucket, self.param_names)
        inputs = _piece_inputs(parent, example_inputs)
        for piece in pieces:
            compiled = self.backend(piece.graph, inputs[piece.name])
            if not callable(compiled):
                raise TypeError(f"the backend returned {type(compiled).__name__} for DDP piece {piece.name}")
            setattr(parent, piece.name, _CompiledPiece(compiled))
        parent.meta["dynamo_lite_compile_id"] = compile_id
        graph_code_log.info("[%s] DDP: graph split into %d pieces at %d gradient buckets:\n%s", compile_id,
                            len(pieces), n_buckets, dl_log.lazy(_render, pieces))
        events.emit(events.DDPSplitEvent(compile_id, [p.graph for p in pieces], [p.params for p in pieces],
                                         n_buckets, None))
        self.pieces = pieces
        self.fn = parent.forward


def piece_of_nodes(gm: torch.fx.GraphModule, param_bucket: dict, tensors: set) -> tuple[dict, Optional[str]]:
    """({node: piece index}, None), or ({}, why the graph is not split).  Pieces follow the
    graph's order; a piece ends before the first node that reads a parameter of a bucket no
    earlier node read, provided only tensors (nodes in ``tensors``) are live across that point."""
    nodes = list(gm.graph.nodes)
    for node in nodes:
        if node.op == "call_function" and node.target in _GLOBAL_STATE_OPS:
            return {}, f"it calls {node.target.__name__} (grad mode or autocast changes inside the graph)"
    # non-tensor values (ints, sizes, tuples) must not cross a cut
    last_use = {}
    for i, node in enumerate(nodes):
        for arg in node.all_input_nodes:
            last_use[arg] = i
    blocked = [0] * (len(nodes) + 1)
    for i, node in enumerate(nodes):
        if node.op in ("placeholder", "output") or node not in last_use:
            continue
        if node not in tensors:
            blocked[i + 1] += 1
            blocked[last_use[node] + 1] -= 1
    piece_of, piece, seen, pending, live = {}, 0, set(), False, 0
    for i, node in enumerate(nodes):
        live += blocked[i]
        new = {param_bucket[a] for a in node.all_input_nodes if a in param_bucket} - seen
        if new and seen:
            pending = True
        seen |= new
        if pending and node.op != "output" and live == 0 and node.op != "placeholder":
            piece += 1
            pending = False
        piece_of[node] = piece
    if piece == 0:
        return {}, "its parameters are all in one bucket" if param_bucket else "it reads no parameter of the DDP module"
    return piece_of, None


_GLOBAL_STATE_OPS = frozenset((torch._C._set_grad_enabled, torch.amp._enter_autocast, torch.amp._exit_autocast))


def _describe_pieces(pieces: list, piece_of: dict, param_bucket: dict, names: dict) -> None:
    """Fill in, for each piece, the buckets and parameters it reads first (in graph order)."""
    seen = set()
    by_index = {}
    for node, index in piece_of.items():
        for arg in node.all_input_nodes:
            if arg in param_bucket and arg not in seen:
                seen.add(arg)
                by_index.setdefault(index, []).append(arg)
    for index, piece in enumerate(pieces):
        params = by_index.get(index, [])
        piece.params = [names.get(p, p.name) for p in params]
        piece.buckets = sorted({param_bucket[p] for p in params})
        piece.ops = sum(1 for n in piece.graph.graph.nodes if n.op in ("call_function", "call_method", "call_module"))


def _piece_inputs(parent: torch.fx.GraphModule, example_inputs: list) -> dict:
    """The example inputs of every piece: the parent run on FakeTensors (nothing real runs;
    FakeTensors are what torch.compile hands backends too)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    fake_mode = FakeTensorMode(allow_non_fake_inputs=False)
    fakes = [fake_mode.from_tensor(t) if isinstance(t, torch.Tensor) else t for t in example_inputs]
    recorded = {}

    class Recorder(torch.fx.Interpreter):
        def call_module(self, target, args, kwargs):
            recorded[target] = list(args)
            return super().call_module(target, args, kwargs)

    with fake_mode:
        Recorder(parent).run(*fakes)
    return recorded


def _render(pieces: list) -> str:
    lines = []
    for i, piece in enumerate(pieces):
        lines.append(f"piece {i} ({piece.name}): {piece.ops} ops, buckets {piece.buckets}, "
                     f"parameters {', '.join(piece.params) or '-'}")
        lines.append(piece.graph.print_readable(print_output=False).rstrip())
    return "\n".join(lines)

