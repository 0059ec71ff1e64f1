"""Three failure kinds, three exception types.

- ``GraphBreak``: "break the graph here".  The interpreter met something it
  cannot put in a graph at a known instruction; the frame is compiled up to
  that instruction, the instruction runs in Python, and the rest resumes.
- ``SkipFrame``: "run this frame eagerly".  Nothing is captured for the frame.
- ``InternalError``: a bug in dynamo_lite.  Re-raised when
  ``config.raise_internal_errors`` is set (tests), logged and fallen back
  from otherwise.

``Unsupported`` is the public error raised by ``fullgraph=True`` compiles.
Tested by tests/breaks/test_graph_breaks.py and tests/robustness/test_hostile.py.
"""
from __future__ import annotations

import dataclasses
from typing import Optional


@dataclasses.dataclass
class UserFrame:
    """One entry of the user stack at which something happened."""

    filename: str  # the user's source file
    lineno: Optional[int]  # line number in that file (None when unknown)
    name: str  # function name
    line: str = ""  # the source line, stripped ("" when unavailable)

    def __str__(self) -> str:
        text = f'  File "{self.filename}", line {self.lineno}, in {self.name}'
        if self.line:
            text += f"\n    {self.line}"
        return text


class DynamoLiteError(Exception):
    """Base class of every error dynamo_lite raises on purpose."""


class GraphBreak(DynamoLiteError):
    """The graph must end before the current instruction.

    Attributes:
        break_id: stable id from ``graph_breaks.REGISTRY`` (e.g. ``"DL0003"``).
        reason: one sentence, specific to this occurrence.
        user_stack: innermost-last list of ``UserFrame`` (filled by the translator).
    """

    def __init__(self, break_id: str, reason: str):
        super().__init__(reason)
        self.break_id = break_id
        self.reason = reason
        self.user_stack: list[UserFrame] = []


class SkipFrame(DynamoLiteError):
    """Run this frame eagerly; capture nothing for it."""

    def __init__(self, reason: str, break_id: str = "DL0001", permanent: bool = True):
        super().__init__(reason)
        self.reason = reason
        self.break_id = break_id
        self.user_stack: list[UserFrame] = []
        # True: the code is never captured again (until reset()); False: only this call runs
        # eagerly (the reason depends on the arguments; existing entries stay in use)
        self.permanent = permanent


class InternalError(DynamoLiteError):
    """A bug in dynamo_lite (never the user's fault)."""


class BackendCompilerFailed(DynamoLiteError):
    """The backend raised while compiling a graph."""


class Unsupported(DynamoLiteError):
    """Raised to the user by ``fullgraph=True`` when capture cannot be whole."""

    def __init__(self, reason: str, break_id: str = "", user_stack=None):
        self.reason = reason
        self.break_id = break_id
        self.user_stack = list(user_stack or [])
        where = ""
        if self.user_stack:
            top = self.user_stack[-1]
            where = f" at {top.filename}:{top.lineno}"
        text = f"{reason}{where}"
        if break_id:
            text = f"[{break_id}] {text}"
        if self.user_stack:
            text += "\nUser stack (most recent call last):\n" + "\n".join(
                str(f) for f in self.user_stack
            )
        super().__init__(text)
