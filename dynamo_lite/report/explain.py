"""explain(): what dynamo_lite captured for one call, and why it broke.

``explain(fn)(*args, **kwargs)`` runs ``fn`` once under capture with a
recording backend ("eager" unless given) and returns an ``ExplainOutput``
built from the structured events of that run.  ``print(out)`` is a readable
report; ``out.to_dict()`` is JSON-ready; ``out.draw(dir)`` writes each graph
as a .dot file (and .svg when graphviz's ``dot`` is on PATH).
Tested by tests/test_explain.py.
"""
from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
from typing import Any, Optional

from .. import graph_breaks
from . import events


@dataclasses.dataclass
class BreakReason:
    """One graph break or fallback, with where it happened in user code."""

    reason: str
    break_id: str
    filename: str
    lineno: Optional[int]
    user_stack: list
    kind: str  # "graph_break" or "fallback"
    frame: str

    @property
    def explanation(self) -> str:
        return graph_breaks.lookup(self.break_id).explanation

    @property
    def hints(self) -> tuple:
        return graph_breaks.lookup(self.break_id).hints

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["user_stack"] = [dataclasses.asdict(f) for f in self.user_stack]
        d["explanation"] = self.explanation
        d["hints"] = list(self.hints)
        return d

    def __str__(self) -> str:
        where = f"{self.filename}:{self.lineno}" if self.filename else "<unknown>"
        return f"[{self.break_id}] {self.reason} ({where})"


@dataclasses.dataclass
class ExplainOutput:
    graphs: list  # torch.fx.GraphModule per captured graph, in capture order
    graph_count: int
    graph_break_count: int  # graph breaks (each resumes) + whole-frame fallbacks
    break_reasons: list  # BreakReason, in order
    ops_per_graph: list  # number of ops in each graph
    guards: list  # list of readable guard lines per graph
    compile_times: list  # backend seconds per graph
    recompiles: list = dataclasses.field(default_factory=list)
    out: Any = None  # what the call returned

    def to_dict(self) -> dict:
        return {
            "graph_count": self.graph_count,
            "graph_break_count": self.graph_break_count,
            "break_reasons": [b.to_dict() for b in self.break_reasons],
            "ops_per_graph": self.ops_per_graph,
            "guards": self.guards,
            "compile_times": self.compile_times,
            "recompiles": self.recompiles,
            "graphs": [g.code for g in self.graphs],
        }

    def __str__(self) -> str:
        import linecache

        lines = [f"Graph count: {self.graph_count}", f"Graph break count: {self.graph_break_count}",
                 f"Op count: {sum(self.ops_per_graph)}"]
        if self.break_reasons:
            lines.append("Break reasons:")
            for i, b in enumerate(self.break_reasons, 1):
                lines.append(f"  {i}. [{b.break_id}] {graph_breaks.lookup(b.break_id).title}: {b.reason}")
                if b.filename:
                    lines.append(f"     at {b.filename}:{b.lineno} in {b.frame}")
                    src = linecache.getline(b.filename, b.lineno or 0).rstrip()
                    if src:
                        lines.append(f"       {b.lineno} | {src.strip()}")
                for hint in b.hints[:1]:
                    lines.append(f"     hint: {hint}")
        for i, (ops, guards) in enumerate(zip(self.ops_per_graph, self.guards)):
            lines.append(f"Graph {i}: {ops} ops, {len(guards)} guards")
            for g in guards:
                lines.append(f"    guard: {g}")
        return "\n".join(lines)

    def draw(self, directory: str) -> list[str]:
        """Write each graph as graph_<i>.dot (and .svg when `dot` is available); returns the paths."""
        from torch.fx.passes.graph_drawer import FxGraphDrawer

        os.makedirs(directory, exist_ok=True)
        paths = []
        for i, gm in enumerate(self.graphs):
            dot = FxGraphDrawer(gm, f"graph_{i}").get_dot_graph()
            path = os.path.join(directory, f"graph_{i}.dot")
            with open(path, "w") as f:
                f.write(dot.to_string())
            paths.append(path)
            if shutil.which("dot"):
                svg = path[:-4] + ".svg"
                subprocess.run(["dot", "-Tsvg", path, "-o", svg], check=False)
                paths.append(svg)
        return paths


def build_explain_output(recorded: list, out=None) -> ExplainOutput:
    graphs, ops, guards, times, reasons, recompiles = [], [], [], [], [], []
    for ev in recorded:
        if isinstance(ev, events.GraphEvent):
            graphs.append(ev.graph)
            ops.append(ev.ops)
            guards.append(ev.guards)
            times.append(ev.compile_seconds)
        elif isinstance(ev, (events.GraphBreakEvent, events.FallbackEvent)):
            reasons.append(BreakReason(ev.reason, ev.break_id, ev.filename, ev.lineno, ev.user_stack,
                                       ev.kind, ev.frame))
        elif isinstance(ev, events.RecompileEvent):
            recompiles.append(ev.to_dict())
    return ExplainOutput(graphs, len(graphs), len(reasons), reasons, ops, guards, times, recompiles, out)


def explain(fn, *extra_args, backend="eager", **extra_kwargs):
    """``explain(fn)(*args, **kwargs) -> ExplainOutput`` (one fresh compile of the call)."""
    from ..api import compile as dl_compile, reset

    if extra_args or extra_kwargs:  # torch._dynamo.explain(fn, *args) style
        return explain(fn, backend=backend)(*extra_args, **extra_kwargs)

    def run(*args, **kwargs):
        recorded: list = []
        reset()
        compiled = dl_compile(fn, backend=backend)
        with events.collecting(recorded.append):
            out = compiled(*args, **kwargs)
        return build_explain_output(recorded, out)

    return run
