"""The compiler's stance: what compiled functions do when called (``dynamo_lite.set_stance``).

    "default"             compile on a cache miss, run compiled code when guards pass
    "force_eager"         run everything eagerly: no compile, and no compiled code is run
    "eager_on_recompile"  run compiled code when guards pass; on a miss run eagerly (no compile)
    "fail_on_recompile"   run compiled code when guards pass; a miss that would compile raises
                          RecompileError, saying which guards failed and where (serving code
                          uses it to make sure nothing compiles after warm-up)

The stance is process-wide, as torch.compile's is.  force_eager is a flag the C hook reads on
every frame (csrc/eval_frame.c: cached entries are bypassed too); the other two are decided on
a cache miss, in convert_frame.py.  api.set_stance is the public function / context manager /
decorator.  Tested by tests/api/test_stances.py.
"""
from __future__ import annotations

from . import _C

STANCES = ("default", "force_eager", "eager_on_recompile", "fail_on_recompile")

_current = "default"


def current() -> str:
    return _current


def set_current(stance: str) -> str:
    """Make ``stance`` the current one; returns the previous one."""
    global _current
    if stance not in STANCES:
        raise ValueError(f"invalid dynamo_lite stance {stance!r}: expected one of {', '.join(STANCES)}")
    _C._set_force_eager(stance == "force_eager")
    previous, _current = _current, stance
    return previous


__all__ = ["STANCES", "current", "set_current"]
