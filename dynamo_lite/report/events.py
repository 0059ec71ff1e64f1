"""Structured events: everything users ask "why?" about is one of these.

Events are dataclasses sent to every active sink (``explain()``, the pytest
plugin, tests) through ``emit``; ``convert_frame`` creates them, logging
renders the same facts.  Nothing downstream parses message text.

Invariants:
- ``to_dict()`` of every event is JSON-serialisable (``json.dumps`` works):
  user stacks become lists of ``{"filename", "lineno", "name", "line"}``
  (innermost last), non-JSON values become strings, the FX graph of a
  ``GraphEvent`` is left out (use ``graph.code``).
- ``kind`` names the event type in dicts ("graph_break", "fallback", "graph",
  "ddp_split", "recompile", "cache_limit").
- ``emit`` costs one list check when nobody listens.
- A break's ``user_stack`` is what the interpreter traced (the compiled frame and
  the calls it inlined); ``caller_stack`` is the Python stack that called the
  compiled frame (``caller_frames()``: outermost first, dynamo_lite's own frames
  left out), so reports can name the user's code that led to a break inside a
  library (report/summary.py).
Tested by tests/api/test_explain.py.
"""
from __future__ import annotations

import contextlib
import dataclasses
import linecache
import os
import sys
from typing import Any, Callable, Optional

from ..exc import UserFrame
from ..graph_breaks import lookup


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON data (dataclasses -> dicts, unknown objects -> str)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    return str(value)


class _Event:
    """Shared behaviour: ``to_dict`` and the innermost user location."""

    _NOT_SERIALISED: tuple = ()

    def to_dict(self) -> dict:
        return {f.name: jsonable(getattr(self, f.name)) for f in dataclasses.fields(self)
                if f.name not in self._NOT_SERIALISED}


class _BreakLike(_Event):
    """GraphBreakEvent and FallbackEvent: a registry id, a reason and a user stack."""

    @property
    def filename(self) -> str:
        return self.user_stack[-1].filename if self.user_stack else ""

    @property
    def lineno(self) -> Optional[int]:
        return self.user_stack[-1].lineno if self.user_stack else None

    @property
    def source_line(self) -> str:
        return self.user_stack[-1].line if self.user_stack else ""

    @property
    def title(self) -> str:
        return lookup(self.break_id).title

    @property
    def hints(self) -> tuple:
        return lookup(self.break_id).hints

    def to_dict(self) -> dict:
        d = super().to_dict()
        bt = lookup(self.break_id)
        d.update(filename=self.filename, lineno=self.lineno, title=bt.title, explanation=bt.explanation,
                 hints=list(bt.hints))
        return d


@dataclasses.dataclass
class GraphBreakEvent(_BreakLike):
    """The graph was cut before an instruction; Python ran it and the rest resumed."""

    break_id: str  # registry id (dynamo_lite/graph_breaks.py), e.g. DL0014 (graph_breaks.PRINT)
    reason: str  # one sentence about this occurrence
    user_stack: list  # list[UserFrame], innermost last
    frame: str  # code name of the frame that broke
    compile_id: str  # "frame_id/n": n-th compile of that frame
    instruction: str = ""  # opname of the instruction Python runs
    kind: str = "graph_break"
    caller_stack: list = dataclasses.field(default_factory=list)  # list[UserFrame] that called the frame,
    #                                                                outermost first (caller_frames())


@dataclasses.dataclass
class FallbackEvent(_BreakLike):
    """A whole frame ran eagerly (nothing captured for it)."""

    break_id: str
    reason: str
    user_stack: list  # list[UserFrame], innermost last
    frame: str
    compile_id: str
    kind: str = "fallback"
    caller_stack: list = dataclasses.field(default_factory=list)  # as GraphBreakEvent.caller_stack


@dataclasses.dataclass
class GraphEvent(_Event):
    """A graph was captured and compiled by the backend."""

    compile_id: str
    frame: str  # code name of the captured frame
    filename: str
    lineno: int  # first line of the frame's code
    graph: Any  # torch.fx.GraphModule (not serialised)
    ops: int  # call_function/call_method/call_module nodes
    guards: list  # readable guard lines
    compile_seconds: float  # backend time
    trace_seconds: float  # symbolic interpretation time
    backend: str
    kind: str = "graph"
    # where the trace answered torch.compiler.is_compiling() (or is_dynamo_compiling()) with
    # True ("path:line"): code there takes its compiler path (often: skipping input checks)
    compiling_queries: list = dataclasses.field(default_factory=list)
    # the entry came from the persistent capture cache (no trace in this process; trace_seconds 0,
    # compile_seconds the backend's time on load)
    loaded: bool = False

    _NOT_SERIALISED = ("graph",)


@dataclasses.dataclass
class DDPSplitEvent(_Event):
    """A graph compiled inside DistributedDataParallel was cut at its gradient buckets
    (backends/ddp.py); sent before the GraphEvent of the whole graph."""

    compile_id: str  # the whole graph's compile id
    pieces: list  # torch.fx.GraphModule per piece, in graph order (not serialised); [] when not split
    params: list  # per piece: names (in the DDP module) of the parameters it reads first
    buckets: int  # number of DDP buckets
    not_split: Optional[str] = None  # why the graph went to the backend whole (None: it was split)
    kind: str = "ddp_split"

    _NOT_SERIALISED = ("pieces",)


@dataclasses.dataclass
class RecompileEvent(_Event):
    """A frame was compiled again because a guard of every cached entry failed."""

    frame: str
    filename: str
    lineno: int
    compile_id: str  # id of the new compile
    reasons: list  # str per cached entry (newest first): its first failing fact,
    #                e.g. "x.dtype changed from float32 to float64"
    kind: str = "recompile"


@dataclasses.dataclass
class CacheLimitEvent(_Event):
    """A frame hit config.cache_size_limit and now runs eagerly on a miss."""

    frame: str
    filename: str
    lineno: int
    limit: int
    reasons: list  # as RecompileEvent.reasons
    kind: str = "cache_limit"


@dataclasses.dataclass
class PersistentCacheEvent(_Event):
    """A frame's first call in this process looked in the persistent capture cache: ``hit``
    (an entry stored by an earlier process runs, no trace) or a miss with its reason."""

    frame: str
    filename: str
    lineno: int
    compile_id: str
    hit: bool
    reason: str  # a miss: why no stored entry serves the call ("" for a hit)
    path: str = ""  # a hit: the entry's file
    kind: str = "persistent_cache"


_OWN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_DEMO_FILE = _OWN_DIR + "demo.py"  # the README's demo model is user code
MAX_CALLER_FRAMES = 24  # innermost caller frames kept per break


def caller_frames(code: Optional[Any] = None, generated: Optional[Callable[[Any], bool]] = None,
                  limit: int = MAX_CALLER_FRAMES) -> list:
    """The Python frames running now, outside dynamo_lite, as UserFrames (outermost first; the
    ``limit`` innermost).  Called while the frame of ``code`` is converted: these are its callers.

    A frame running generated code (``generated(f_code)``) that called a frame of the same
    function (same file and name: a resume function or loop body it tail-called, or ``code``
    itself) is the same call of the user's function, shown once: the inner one is kept."""
    raw = []  # (code, lineno), innermost first
    f = sys._getframe(1)
    while f is not None and len(raw) < limit:
        filename = f.f_code.co_filename
        if not filename.startswith(_OWN_DIR) or filename == _DEMO_FILE:
            raw.append((f.f_code, f.f_lineno))
        f = f.f_back
    out = []
    inner = code
    for c, lineno in raw:
        same_call = (generated is not None and inner is not None and generated(c)
                     and c.co_filename == inner.co_filename and c.co_name == inner.co_name)
        if not same_call:
            out.append(UserFrame(c.co_filename, lineno, c.co_name,
                                 linecache.getline(c.co_filename, lineno).strip() if lineno else ""))
        inner = c
    out.reverse()
    return out


_SINKS: list[Callable[[Any], None]] = []


def emit(event) -> None:
    """Send ``event`` to every sink (no-op when there is none)."""
    if _SINKS:
        for sink in list(_SINKS):
            sink(event)


def listening() -> bool:
    """Is any sink active (worth building an event)?"""
    return bool(_SINKS)


@contextlib.contextmanager
def collecting(sink: Callable[[Any], None]):
    """Send every event to ``sink`` inside the block."""
    _SINKS.append(sink)
    try:
        yield
    finally:
        remove_sink(sink)


def add_sink(sink) -> None:
    _SINKS.append(sink)


def remove_sink(sink) -> None:
    if sink in _SINKS:
        _SINKS.remove(sink)


EVENT_TYPES = (GraphBreakEvent, FallbackEvent, GraphEvent, DDPSplitEvent, RecompileEvent, CacheLimitEvent)

__all__ = ["GraphBreakEvent", "FallbackEvent", "GraphEvent", "DDPSplitEvent", "RecompileEvent", "CacheLimitEvent",
           "EVENT_TYPES", "emit", "collecting", "add_sink", "remove_sink", "jsonable", "UserFrame", "caller_frames",
           "listening"]
