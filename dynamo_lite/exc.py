"""Three failure kinds, three exception types, one constructor order.

- ``GraphBreak``: "break the graph here".  The interpreter met something it
  cannot put in a graph at a known instruction; the frame is compiled up to
  that instruction, the instruction runs in Python, and the rest resumes.
- ``SkipFrame``: "run this frame eagerly".  Nothing is captured for the frame.
- ``InternalError``: a bug in dynamo_lite (an invariant of ours broke).  Re-raised
  when ``config.raise_internal_errors`` is set (tests), logged and fallen back
  from otherwise.

``Unsupported`` is the public error raised by ``fullgraph=True`` compiles.

Every failure that names a break type takes ``(break_id, reason, *, ...)`` in that
order; ``break_id`` is one of the constants of ``graph_breaks`` (never a literal).
This module imports only ``graph_breaks`` (to check the id is registered).
Tested by tests/breaks/test_graph_breaks.py, tests/robustness/test_hostile.py and tests/api/test_docs.py.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Optional, Sequence

from . import graph_breaks


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


def _checked(break_id: str) -> str:
    if break_id not in graph_breaks.REGISTRY:
        raise InternalError(f"unregistered break id {break_id!r} (add it to graph_breaks.py)")
    return break_id


class DynamoLiteError(Exception):
    """Base class of every error dynamo_lite raises on purpose."""


class InternalError(DynamoLiteError):
    """A bug in dynamo_lite (never the user's fault): an invariant of ours does not hold."""


class GraphBreak(DynamoLiteError):
    """The graph must end before the current instruction.

    Attributes:
        break_id: stable id, a constant of ``graph_breaks`` (e.g. ``graph_breaks.DATA_DEPENDENT``).
        reason: one sentence, specific to this occurrence.
        user_stack: innermost-last list of ``UserFrame`` (filled by the translator).
        user_exception: True when the break is the user's own code raising (fullgraph then lets
            Python raise it instead of reporting a capture failure); set by the translator.
        restart_step: root-frame step at which the trace must restart to stop before the cause
            (a generator that must be real, a traced raise whose handlers ran); None: break here.
    """

    def __init__(self, break_id: str, reason: str, *, user_stack: Sequence[UserFrame] = ()):
        super().__init__(reason)
        self.break_id = _checked(break_id)
        self.reason = reason
        self.user_stack: list[UserFrame] = list(user_stack)
        self.user_exception: bool = False
        self.restart_step: Optional[int] = None


class SkipFrame(DynamoLiteError):
    """Run this frame eagerly; capture nothing for it.

    Attributes:
        break_id, reason, user_stack: as for ``GraphBreak``.
        permanent: True: the code is never captured again (until reset()); False: only this
            call runs eagerly (the reason depends on the arguments; existing entries stay in use).
    """

    def __init__(self, break_id: str, reason: str, *, user_stack: Sequence[UserFrame] = (),
                 permanent: bool = True):
        super().__init__(reason)
        self.break_id = _checked(break_id)
        self.reason = reason
        self.user_stack: list[UserFrame] = list(user_stack)
        self.permanent = permanent


class BackendCompilerFailed(DynamoLiteError, RuntimeError):
    """The backend raised while compiling a graph.

    Attributes:
        fallback_guard: the compiled guard of the graph that failed (set by convert_frame),
            so calls that pass it run the original code instead of retrying the backend;
            None when unknown.
    """

    def __init__(self, text: str):
        super().__init__(text)
        self.fallback_guard: Optional[Any] = None


class RecompileError(DynamoLiteError, RuntimeError):
    """Raised to the user under ``set_stance("fail_on_recompile")`` when a call would compile:
    the message names the function, its file and line, and each guard that failed."""


class Unsupported(DynamoLiteError):
    """Raised to the user by ``fullgraph=True`` when capture cannot be whole.

    Attributes: break_id, reason, user_stack as for ``GraphBreak``.
    """

    def __init__(self, break_id: str, reason: str, *, user_stack: Sequence[UserFrame] = ()):
        self.break_id = _checked(break_id)
        self.reason = reason
        self.user_stack = list(user_stack)
        where = ""
        if self.user_stack:
            top = self.user_stack[-1]
            where = f" at {top.filename}:{top.lineno}"
        text = f"[{break_id}] {reason}{where}"
        if self.user_stack:
            text += "\nUser stack (most recent call last):\n" + "\n".join(
                str(f) for f in self.user_stack
            )
        super().__init__(text)


class DynamicDimSpecialized(Unsupported):
    """A ``mark_dynamic`` dimension was forced to a constant by the traced code (raised to the
    user, whatever ``fullgraph`` says: the mark is a promise the code cannot keep)."""
