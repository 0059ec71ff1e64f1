"""Every knob of dynamo_lite in one place.

Read as ``config.NAME``; change by plain assignment (``config.cache_size_limit = 2``) or for a
block with ``config.patch(NAME=value)`` (a context manager and decorator).  Assigning a name
that is not a setting raises AttributeError (a typo never passes silently); aliases
(``recompile_limit``) set their setting too.  Tested by tests/api/test_api.py.
"""
from __future__ import annotations

import contextlib
import os
import sys
import types

# Maximum number of cache entries (compiled variants) per code object; past it
# the frame runs eagerly, with one warning.
cache_size_limit: int = 8
# Alias of cache_size_limit (torch's newer name): setting either sets both.
recompile_limit: int = cache_size_limit

# What a failing backend does.  False (the default, as torch.compile): a backend
# that raises or returns a non-callable, or whose callable returns wrong outputs
# (caught on its first call), raises BackendCompilerFailed naming the backend and
# chaining its exception.  True: the frame runs eagerly (or, for wrong outputs,
# the captured graph replaces the backend's callable), with one warning per frame.
# Tested by tests/robustness/test_hostile.py.
suppress_errors: bool = os.environ.get("DYNAMO_LITE_SUPPRESS_ERRORS", "0") == "1"

# Re-raise InternalError instead of falling back (the test-suite sets this).
raise_internal_errors: bool = os.environ.get("DYNAMO_LITE_RAISE_INTERNAL", "0") == "1"

# Largest number of instructions one frame may execute symbolically (unrolled
# loops count every iteration) before the frame falls back to eager.
max_traced_instructions: int = 50_000

# Deepest chain of inlined user calls before the call site breaks the graph.
max_inline_depth: int = 32

# Default backend of compile()/optimize().
default_backend: str = "inductor"


def patch(**changes):
    """Temporarily set config values: ``with config.patch(cache_size_limit=2): ...``."""
    return _Patch(changes)


class _Patch(contextlib.ContextDecorator):
    def __init__(self, changes):
        module = sys.modules[__name__]
        for name in changes:
            if not hasattr(module, name) or name.startswith("_"):
                raise AttributeError(f"dynamo_lite.config has no setting {name!r}")
        self.changes = changes
        self.saved: list[dict] = []

    def __enter__(self):
        module = sys.modules[__name__]
        self.saved.append({k: getattr(module, k) for k in self.changes})
        for k, v in self.changes.items():
            setattr(module, k, v)
        return self

    def __exit__(self, *exc):
        module = sys.modules[__name__]
        for k, v in self.saved.pop().items():
            setattr(module, k, v)
        return False


# name -> the other name of the same setting
_ALIASES = {"recompile_limit": "cache_size_limit", "cache_size_limit": "recompile_limit"}


class _ConfigModule(types.ModuleType):
    """This module's type: assignments are checked and aliases kept in step."""

    def __setattr__(self, name, value):
        if not name.startswith("_") and name not in self.__dict__:
            raise AttributeError(f"dynamo_lite.config has no setting {name!r}")
        super().__setattr__(name, value)
        other = _ALIASES.get(name)
        if other is not None:
            super().__setattr__(other, value)


sys.modules[__name__].__class__ = _ConfigModule
