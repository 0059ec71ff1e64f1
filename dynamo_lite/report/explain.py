"""explain(): what dynamo_lite captured for one call, and why it broke.

``explain(fn)(*args, **kwargs)`` forgets compiled code (``reset()``), runs
``fn`` once under capture with a backend ("eager" unless given) and returns
an ``ExplainOutput`` built from the structured events of that run
(``build_explain_output(events)`` does the same for any recorded events).

    print(out)       readable report: each break with its user stack, source
                     excerpt, explanation and hint; each graph with its ops and
                     guards; recompiles with the guard that failed
    out.to_dict()    the same, JSON-ready (json.dumps works)
    out.draw(dir)    each graph as graph_<i>.dot, and graph_<i>.svg when graphviz's
                     ``dot`` is on PATH; drawn by torch's FxGraphDrawer when pydot is
                     installed (the ``viz`` extra), else by ``graph_to_dot``
Tested by tests/api/test_explain.py.
"""
from __future__ import annotations

import dataclasses
import importlib.util
import linecache
import os
import shutil
import subprocess
from typing import TYPE_CHECKING, Any, Optional

from .. import graph_breaks
from ..exc import UserFrame
from . import events, summary

if TYPE_CHECKING:  # this module imports no torch at run time (the pytest plugin imports report/)
    import torch.fx


@dataclasses.dataclass
class BreakReason:
    """One graph break or fallback, with where it happened in user code."""

    reason: str  # specific to this occurrence
    break_id: str  # registry id (graph_breaks.REGISTRY)
    filename: str  # innermost user file ("" when unknown)
    lineno: Optional[int]
    user_stack: list[UserFrame]  # innermost last
    kind: str  # "graph_break" (the rest resumed) or "fallback" (the frame ran eagerly)
    frame: str  # code name of the frame that was being compiled
    compile_id: str = ""  # "frame_id/n", as in the logs

    @property
    def title(self) -> str:
        return graph_breaks.lookup(self.break_id).title

    @property
    def explanation(self) -> str:
        return graph_breaks.lookup(self.break_id).explanation

    @property
    def hints(self) -> tuple[str, ...]:
        return graph_breaks.lookup(self.break_id).hints

    def to_dict(self) -> dict:
        d = events.jsonable(self)
        d.update(title=self.title, explanation=self.explanation, hints=list(self.hints))
        return d

    def __str__(self) -> str:
        where = f"{self.filename}:{self.lineno}" if self.filename else "<unknown>"
        return f"[{self.break_id}] {self.reason} ({where})"


def source_excerpt(filename: str, lineno: Optional[int], context: int = 2) -> list[str]:
    """Lines ``lineno-context .. lineno`` of ``filename``, numbered, the last one marked with '>'."""
    if not filename or not lineno or not linecache.getline(filename, lineno).strip():
        return []
    out = []
    width = len(str(lineno))
    for n in range(max(1, lineno - context), lineno + 1):
        text = linecache.getline(filename, n).rstrip()
        if not text and n != lineno:
            continue
        out.append(f"{'>' if n == lineno else ' '} {n:>{width}} | {text}")
    return out


def op_names(gm: "torch.fx.GraphModule") -> list[str]:
    """The operations of a graph, in order (``add``, ``relu``, ``linear`` ...)."""
    names = []
    for node in gm.graph.nodes:
        if node.op == "call_function":
            names.append(getattr(node.target, "__name__", str(node.target)))
        elif node.op in ("call_method", "call_module"):
            names.append(str(node.target))
    return names


@dataclasses.dataclass
class GraphInfo:
    """Where a graph came from."""

    compile_id: str
    frame: str  # code name of the captured frame
    filename: str
    lineno: int  # first line of that frame
    backend: str
    loaded: bool = False  # from the persistent capture cache: not traced in this process


@dataclasses.dataclass
class ExplainOutput:
    """What ``explain(fn)(*args)`` saw: the graphs, the breaks with their user stacks, the guards.

    ``print()`` it for a readable report, ``to_dict()`` for JSON, ``draw(dir)`` for pictures."""

    graphs: list[torch.fx.GraphModule]  # per captured graph, in capture order
    graph_count: int
    graph_break_count: int  # graph breaks (each resumes) + whole-frame fallbacks
    break_reasons: list[BreakReason]  # in order
    ops_per_graph: list[int]  # number of ops in each graph
    guards: list[list[str]]  # readable guard lines per graph
    compile_times: list[float]  # backend seconds per graph
    recompiles: list[dict[str, Any]] = dataclasses.field(default_factory=list)  # RecompileEvent.to_dict() each
    out: Any = None  # what the call returned
    graph_infos: list[GraphInfo] = dataclasses.field(default_factory=list)  # per graph
    # per graph: the DDPSplitEvent of its latest split at DDP's buckets (backends/ddp.py), or None
    ddp_splits: list = dataclasses.field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (graphs as their Python code)."""
        return {
            "graph_count": self.graph_count,
            "graph_break_count": self.graph_break_count,
            "break_reasons": [b.to_dict() for b in self.break_reasons],
            "ops_per_graph": list(self.ops_per_graph),
            "op_names": [op_names(g) for g in self.graphs],
            "guards": events.jsonable(self.guards),
            "compile_times": list(self.compile_times),
            "recompiles": events.jsonable(self.recompiles),
            "graph_infos": events.jsonable(self.graph_infos),
            "ddp_splits": [split.to_dict() if split is not None else None for split in self.ddp_splits],
            "graphs": [g.code for g in self.graphs],
        }

    def __str__(self) -> str:
        lines = [f"Graph count: {self.graph_count}", f"Graph break count: {self.graph_break_count}",
                 f"Op count: {sum(self.ops_per_graph)}"]
        if self.break_reasons:
            lines.append("")
            lines.append("Break reasons:")
            for i, b in enumerate(self.break_reasons, 1):
                what = "graph break" if b.kind == "graph_break" else "frame ran eagerly"
                lines.append(f"  {i}. [{b.break_id}] {b.title} ({what}): {summary.message(b.break_id, b.reason)}")
                for frame in b.user_stack[:-1]:
                    lines.append(f"     called from {frame.filename}:{frame.lineno} in {frame.name}")
                if b.filename:
                    lines.append(f"     at {b.filename}:{b.lineno} in {b.user_stack[-1].name}")
                    excerpt = source_excerpt(b.filename, b.lineno)
                    if excerpt:
                        lines.extend("       " + line for line in excerpt)
                    elif b.user_stack[-1].line:
                        lines.append(f"       > {b.lineno} | {b.user_stack[-1].line}")
                if b.explanation:
                    lines.append(f"     why: {b.explanation}")
                innermost = b.user_stack[-1] if b.user_stack else None
                for hint in summary.applicable_hints(b.break_id, innermost)[:1]:
                    lines.append(f"     hint: {hint}")
        for i, (gm, ops, guards) in enumerate(zip(self.graphs, self.ops_per_graph, self.guards)):
            lines.append("")
            head = f"Graph {i}: {ops} ops, {len(guards)} guards"
            if i < len(self.graph_infos):
                info = self.graph_infos[i]
                head += f"  [{info.compile_id}] {info.frame} at {info.filename}:{info.lineno}"
                if info.loaded:
                    head += " (loaded from the persistent capture cache, not traced)"
            lines.append(head)
            names = op_names(gm)
            if names:
                lines.append(f"    ops: {', '.join(names)}")
            split = self.ddp_splits[i] if i < len(self.ddp_splits) else None
            if split is not None and split.not_split is None:
                lines.append(f"    split for DDP into {len(split.pieces)} graphs at its {split.buckets} gradient buckets:")
                for j, (piece, params) in enumerate(zip(split.pieces, split.params)):
                    lines.append(f"      piece {j}: {len(op_names(piece))} ops, parameters {', '.join(params) or '-'}")
            elif split is not None:
                lines.append(f"    not split for DDP: {split.not_split}")
            for g in guards:
                lines.append(f"    guard: {g}")
        if self.recompiles:
            lines.append("")
            lines.append("Recompiles:")
            for r in self.recompiles:
                lines.append(f"  [{r['compile_id']}] {r['frame']} ({r['filename']}:{r['lineno']}): "
                             f"{r['reasons'][0] if r['reasons'] else '?'}")
        return "\n".join(lines)

    def draw(self, directory: str, *, fmt: str = "svg", drawer: str = "auto") -> list[str]:
        """Write each graph as ``graph_<i>.dot``, and as ``graph_<i>.<fmt>`` (svg, png, pdf) when
        graphviz's ``dot`` is on PATH; returns the paths written.

        ``drawer``: ``"torch"`` draws with torch's ``torch.fx.passes.graph_drawer.FxGraphDrawer``
        (needs pydot: ``pip install 'dynamo-lite[viz]'``), ``"dynamo_lite"`` with ``graph_to_dot``
        (no Python dependency; each box shows the value's dtype and shape), ``"auto"`` the first
        when pydot is installed."""
        if drawer not in ("auto", "torch", "dynamo_lite"):
            raise ValueError(f"drawer must be 'auto', 'torch' or 'dynamo_lite', got {drawer!r}")
        if drawer == "auto":
            drawer = "torch" if importlib.util.find_spec("pydot") is not None else "dynamo_lite"
        os.makedirs(directory, exist_ok=True)
        dot_exe = shutil.which("dot")
        paths = []
        for i, gm in enumerate(self.graphs):
            path = os.path.join(directory, f"graph_{i}.dot")
            with open(path, "w") as f:
                f.write(torch_dot_source(gm, f"graph_{i}") if drawer == "torch" else graph_to_dot(gm, f"graph_{i}"))
            paths.append(path)
            if dot_exe:
                picture = f"{path[:-4]}.{fmt}"
                subprocess.run([dot_exe, f"-T{fmt}", path, "-o", picture], check=False, capture_output=True)
                if os.path.exists(picture):
                    paths.append(picture)
        return paths


def torch_dot_source(gm: "torch.fx.GraphModule", name: str) -> str:
    """The DOT source torch's FX graph drawer makes for ``gm`` (needs pydot)."""
    from torch.fx.passes.graph_drawer import FxGraphDrawer

    return FxGraphDrawer(gm, name).get_dot_graph().to_string()


def _dot_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _describe_value(node: "torch.fx.Node") -> str:
    val = node.meta.get("example_value", node.meta.get("val"))
    shape = getattr(val, "shape", None)
    dtype = getattr(val, "dtype", None)
    if shape is not None and dtype is not None:
        return f"{str(dtype).replace('torch.', '')}{list(shape)}"
    return ""


def graph_to_dot(gm: "torch.fx.GraphModule", name: str = "graph") -> str:
    """A graphviz DOT rendering of an FX graph: one box per node (op, target, dtype/shape), edges = uses."""
    colors = {"placeholder": "lightblue", "output": "lightgrey", "get_attr": "khaki",
              "call_module": "palegreen", "call_method": "lightsalmon", "call_function": "white"}
    lines = [f"digraph {_dot_quote(name)} {{", '  rankdir="TB";', '  node [shape=box, style=filled, fontname="monospace"];']
    for node in gm.graph.nodes:
        if node.op in ("call_function",):
            target = getattr(node.target, "__name__", str(node.target))
        else:
            target = str(node.target)
        label = f"{node.name}\n{node.op}: {target}"
        desc = _describe_value(node)
        if desc:
            label += f"\n{desc}"
        lines.append(f"  {_dot_quote(node.name)} [label={_dot_quote(label)}, "
                     f"fillcolor={_dot_quote(colors.get(node.op, 'white'))}];")
    for node in gm.graph.nodes:
        for src in node.all_input_nodes:
            lines.append(f"  {_dot_quote(src.name)} -> {_dot_quote(node.name)};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def build_explain_output(recorded: list, out: Any = None) -> ExplainOutput:
    """An ExplainOutput from events recorded with ``events.collecting``."""
    graphs, ops, guards, times, reasons, recompiles = [], [], [], [], [], []
    infos: list[GraphInfo] = []
    splits: list[Any] = []  # per graph: its DDPSplitEvent or None
    pending_split = None  # a DDPSplitEvent comes just before the GraphEvent of its graph
    for ev in recorded:
        if isinstance(ev, events.DDPSplitEvent):
            if ev.compile_id in {i.compile_id for i in infos} and ev.compile_id:
                # split again after DDP rebuilt its buckets: the later split is the one in use
                splits[[i.compile_id for i in infos].index(ev.compile_id)] = ev
            else:
                pending_split = ev
        elif isinstance(ev, events.GraphEvent):
            splits.append(pending_split if pending_split is not None and pending_split.compile_id == ev.compile_id
                          else None)
            pending_split = None
            graphs.append(ev.graph)
            ops.append(ev.ops)
            guards.append(ev.guards)
            times.append(ev.compile_seconds)
            infos.append(GraphInfo(ev.compile_id, ev.frame, ev.filename, ev.lineno, ev.backend, ev.loaded))
        elif isinstance(ev, (events.GraphBreakEvent, events.FallbackEvent)):
            reasons.append(BreakReason(ev.reason, ev.break_id, ev.filename, ev.lineno, ev.user_stack,
                                       ev.kind, ev.frame, ev.compile_id))
        elif isinstance(ev, events.RecompileEvent):
            recompiles.append(ev.to_dict())
    return ExplainOutput(graphs, len(graphs), len(reasons), reasons, ops, guards, times, recompiles, out, infos,
                         splits)
