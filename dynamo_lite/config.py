"""Every knob of dynamo_lite in one place.

Read as ``config.NAME``; change by plain assignment (``config.cache_size_limit = 2``) or for a
block with ``config.patch(NAME=value)`` (a context manager and decorator).  Assigning a name
that is not a setting raises AttributeError (a typo never passes silently); aliases
(``recompile_limit``) set their setting too.  Each setting's default can be given by an
environment variable, read once at import (``_ENV_VARS``; docs/api.md lists them; a value
that does not parse raises ValueError naming the variable).  Code reads ``config.NAME`` when
it needs it, never a copy, so an assignment counts from the next compile on.
Tested by tests/api/test_config_knobs.py and tests/api/test_config_fullgraph.py.
"""
from __future__ import annotations

import contextlib
import os
import sys
import types
from typing import Any, Optional, TypeVar, Union

# setting -> the environment variable that gives its default
_ENV_VARS = {
    "cache_size_limit": "DYNAMO_LITE_CACHE_SIZE_LIMIT", "recompile_limit": "DYNAMO_LITE_CACHE_SIZE_LIMIT",
    "suppress_errors": "DYNAMO_LITE_SUPPRESS_ERRORS", "raise_internal_errors": "DYNAMO_LITE_RAISE_INTERNAL",
    "max_traced_instructions": "DYNAMO_LITE_MAX_TRACED_INSTRUCTIONS",
    "max_inline_depth": "DYNAMO_LITE_MAX_INLINE_DEPTH", "default_backend": "DYNAMO_LITE_DEFAULT_BACKEND",
    "optimize_ddp": "DYNAMO_LITE_OPTIMIZE_DDP",
    "capture_scalar_outputs": "DYNAMO_LITE_CAPTURE_SCALAR_OUTPUTS",
    "capture_dynamic_output_shape_ops": "DYNAMO_LITE_CAPTURE_DYNAMIC_OUTPUT_SHAPE_OPS",
    "repeated_blocks": "DYNAMO_LITE_REPEATED_BLOCKS",
    "persistent_cache": "DYNAMO_LITE_PERSISTENT_CACHE", "cache_dir": "DYNAMO_LITE_CACHE_DIR",
    "cache_max_mb": "DYNAMO_LITE_CACHE_MAX_MB", "aot_libraries": "DYNAMO_LITE_AOT_LIBRARIES",
}
_T = TypeVar("_T", bool, int, str)
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off", "")


def _env(name: str, default: _T) -> _T:
    """The default of setting ``name``: its environment variable parsed as ``default``'s type."""
    var = _ENV_VARS[name]
    text = os.environ.get(var)
    if text is None:
        return default
    if isinstance(default, bool):
        if text.strip().lower() in _TRUE + _FALSE:
            return text.strip().lower() in _TRUE
        raise ValueError(f"{var}={text!r}: expected 1 or 0")
    if isinstance(default, int):
        try:
            return int(text)
        except ValueError:
            raise ValueError(f"{var}={text!r}: expected an integer") from None
    return text


def _aot_mode(text: Optional[str]) -> Union[bool, str]:
    """DYNAMO_LITE_AOT_LIBRARIES: 1 / 0 (as a boolean) or ``background`` (the default)."""
    if text is None or text.strip().lower() == "background":
        return "background"
    if text.strip().lower() in _TRUE + _FALSE:
        return text.strip().lower() in _TRUE
    raise ValueError(f"{_ENV_VARS['aot_libraries']}={text!r}: expected 1, 0 or background")


# Maximum number of cache entries (compiled variants) per code object; past it
# the frame runs eagerly, with one warning.
cache_size_limit: int = _env("cache_size_limit", 8)
# Alias of cache_size_limit (torch's newer name): setting either sets both.
recompile_limit: int = cache_size_limit

# What a failing backend does.  False (the default, as torch.compile): a backend
# that raises or returns a non-callable, or whose callable returns wrong outputs
# (caught on its first call), raises BackendCompilerFailed naming the backend and
# chaining its exception.  True: the frame runs eagerly (or, for wrong outputs,
# the captured graph replaces the backend's callable), with one warning per frame.
# Tested by tests/robustness/test_hostile.py.
suppress_errors: bool = _env("suppress_errors", False)

# Re-raise InternalError instead of falling back (the test-suite sets this).
raise_internal_errors: bool = _env("raise_internal_errors", False)

# Largest number of instructions one frame may execute symbolically (unrolled
# loops count every iteration, inlined calls count) before the frame falls back to eager.
# A decoder layer of a Hugging Face Llama is about 3,000: 1,000,000 covers models of a few
# hundred layers (a trace of that length takes 10-20 s), and still ends a runaway unrolled loop.
max_traced_instructions: int = _env("max_traced_instructions", 1_000_000)

# The persistent capture cache (persistent_cache.py; docs/warm-start.md): a frame captured in one
# process is stored under cache_dir, and a later process runs it from there without tracing it
# again (when its key and guards match).  On by default; False (DYNAMO_LITE_PERSISTENT_CACHE=0)
# neither reads nor writes it.
persistent_cache: bool = _env("persistent_cache", True)
# Where it lives ("" = $XDG_CACHE_HOME/dynamo_lite, or ~/.cache/dynamo_lite).
cache_dir: str = _env("cache_dir", "")
# Largest size of the entries under cache_dir, in MB: past it, the least recently used entries
# are removed when an entry is stored.
cache_max_mb: int = _env("cache_max_mb", 1024)
# With backend="inductor", an AOTInductor library of each inference graph stored in the
# persistent cache, which a later process runs with torch's C++ runner: no inductor import, no
# compile on its first call.  "background" (the default): a builder process of low priority
# (dynamo_lite/aot_builder.py, one per cache directory) builds them after the capture, so
# the capturing process pays nothing and the processes after the build load them; True: the
# capturing process builds each one when it stores the entry (a second inductor compile); False:
# none (a later process compiles the graph through inductor's caches).  dynamo_lite.save() builds
# them for its packages whatever this says.
aot_libraries: Union[bool, str] = _aot_mode(os.environ.get(_ENV_VARS["aot_libraries"]))

# Deepest chain of inlined user calls before the call site breaks the graph.
max_inline_depth: int = _env("max_inline_depth", 32)

# Cut graphs captured inside DistributedDataParallel at its gradient buckets, one backend
# call per bucket, so all-reduces overlap backward (backends/ddp.py; docs/distributed.md).
optimize_ddp: bool = _env("optimize_ddp", True)

# Data-dependent work kept in the graph (torch's settings of the same names; both default to
# False there, True here: the graph computes what eager computes, and only a use that needs the
# value in Python -- a branch, range(), an index into a list -- breaks).
# capture_scalar_outputs: ``t.item()``, ``int(t)`` / ``float(t)`` of one element and
# ``t.tolist()`` give symbolic numbers (unbacked SymInts/SymFloats of torch's ShapeEnv) that
# arithmetic and tensor ops use in the graph.
# capture_dynamic_output_shape_ops: ops whose output size depends on the data (``nonzero``,
# boolean-mask indexing, ``masked_select``, ``unique``, ``bincount``) are graph nodes with
# symbolic sizes.  False: each breaks the graph (DL0007), Python runs it.
# Tested by tests/torch/test_data_dependent.py.
capture_scalar_outputs: bool = _env("capture_scalar_outputs", True)
capture_dynamic_output_shape_ops: bool = _env("capture_dynamic_output_shape_ops", True)

# Repeated blocks captured once (variables/repeated_blocks.py): the first call of a block's
# forward is traced as a template; later calls of blocks of the same class with arguments of the
# same structure copy its graph nodes (their own parameters as inputs, its guards re-rooted)
# instead of being traced again, so capture time stops growing with the number of layers.
# "auto": any module with submodules whose class is not torch.nn's own; "marked": only forwards
# marked with dynamo_lite.nested_compile_region or torch.compiler.nested_compile_region; "off".
# Tested by tests/torch/test_repeated_blocks.py.
repeated_blocks: str = _env("repeated_blocks", "auto")
_CHOICES = {"repeated_blocks": ("auto", "marked", "off")}
if repeated_blocks not in _CHOICES["repeated_blocks"]:
    raise ValueError(f"DYNAMO_LITE_REPEATED_BLOCKS={repeated_blocks!r}: expected auto, marked or off")

# Default backend of compile()/optimize().
default_backend: str = _env("default_backend", "inductor")


def patch(**changes: Any) -> "_Patch":
    """Temporarily set config values: ``with config.patch(cache_size_limit=2): ...``."""
    return _Patch(changes)


class _Patch(contextlib.ContextDecorator):
    def __init__(self, changes: dict[str, Any]) -> None:
        module = sys.modules[__name__]
        for name in changes:
            if not hasattr(module, name) or name.startswith("_"):
                raise AttributeError(f"dynamo_lite.config has no setting {name!r}")
        self.changes = changes
        self.saved: list[dict[str, Any]] = []

    def __enter__(self) -> "_Patch":
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
        choices = _CHOICES.get(name)
        if choices is not None and value not in choices:
            raise ValueError(f"dynamo_lite.config.{name} = {value!r}: expected one of {', '.join(choices)}")
        super().__setattr__(name, value)
        other = _ALIASES.get(name)
        if other is not None:
            super().__setattr__(other, value)


sys.modules[__name__].__class__ = _ConfigModule
