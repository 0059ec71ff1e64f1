"""Structured events: everything users ask "why?" about is one of these.

Events are dataclasses that serialise to JSON (``to_dict``).  They are sent
to every active sink (``explain()``, the pytest plugin, tests) through
``emit``; logging renders them too.  Nothing downstream parses message text.
Tested by tests/test_explain.py.
"""
from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Callable, Optional

from ..exc import UserFrame


@dataclasses.dataclass
class GraphBreakEvent:
    """The graph was cut before an instruction; Python ran it and the rest resumed."""

    break_id: str
    reason: str
    user_stack: list  # list[UserFrame], innermost last
    frame: str  # code name of the frame that broke
    compile_id: str
    instruction: str = ""
    kind: str = "graph_break"

    @property
    def filename(self) -> str:
        return self.user_stack[-1].filename if self.user_stack else ""

    @property
    def lineno(self) -> Optional[int]:
        return self.user_stack[-1].lineno if self.user_stack else None

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["filename"], d["lineno"] = self.filename, self.lineno
        return d


@dataclasses.dataclass
class FallbackEvent:
    """A whole frame ran eagerly (nothing captured for it)."""

    break_id: str
    reason: str
    user_stack: list
    frame: str
    compile_id: str
    kind: str = "fallback"

    @property
    def filename(self) -> str:
        return self.user_stack[-1].filename if self.user_stack else ""

    @property
    def lineno(self) -> Optional[int]:
        return self.user_stack[-1].lineno if self.user_stack else None

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["filename"], d["lineno"] = self.filename, self.lineno
        return d


@dataclasses.dataclass
class GraphEvent:
    """A graph was captured and compiled by the backend."""

    compile_id: str
    frame: str
    filename: str
    lineno: int
    graph: Any  # torch.fx.GraphModule (not serialised)
    ops: int
    guards: list  # readable guard lines
    compile_seconds: float
    trace_seconds: float
    backend: str
    kind: str = "graph"

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d.pop("graph")
        return d


@dataclasses.dataclass
class RecompileEvent:
    """A frame was compiled again because a guard of every cached entry failed."""

    frame: str
    filename: str
    lineno: int
    compile_id: str
    reasons: list  # one line per failed entry, the first failing fact
    kind: str = "recompile"

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class CacheLimitEvent:
    """A frame hit config.cache_size_limit and now runs eagerly on a miss."""

    frame: str
    filename: str
    lineno: int
    limit: int
    reasons: list
    kind: str = "cache_limit"

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


_SINKS: list[Callable[[Any], None]] = []


def emit(event) -> None:
    for sink in list(_SINKS):
        sink(event)


@contextlib.contextmanager
def collecting(sink: Callable[[Any], None]):
    """Send every event to ``sink`` inside the block."""
    _SINKS.append(sink)
    try:
        yield
    finally:
        _SINKS.remove(sink)


def add_sink(sink) -> None:
    _SINKS.append(sink)


def remove_sink(sink) -> None:
    if sink in _SINKS:
        _SINKS.remove(sink)


__all__ = ["GraphBreakEvent", "FallbackEvent", "GraphEvent", "RecompileEvent", "CacheLimitEvent",
           "emit", "collecting", "add_sink", "remove_sink", "UserFrame"]
