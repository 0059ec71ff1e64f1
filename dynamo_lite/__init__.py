"""dynamo_lite: a readable frame-evaluation JIT for PyTorch.

Public API (see docs/api.md):
    compile(fn_or_module, *, backend="inductor", fullgraph=False, dynamic=None)
    optimize(backend)            context manager and decorator
    disable(fn)                  run without capture
    reset()                      forget compiled code
    save(compiled, path), load(path)
                                 a package of captured frames for another process (docs/warm-start.md)
    explain(fn)(*args, **kw)     what was captured, where it broke, the guards
    mark_dynamic(t, dim, min=, max=), maybe_mark_dynamic(t, dim), mark_static(t, dim)
                                 dynamic shapes (docs/recompiles.md)
    set_stance(stance)           "default" / "force_eager" / "eager_on_recompile" / "fail_on_recompile"
    Unsupported                  raised by fullgraph=True
    RecompileError               raised under set_stance("fail_on_recompile")
    BackendCompilerFailed        raised when a backend fails (unless config.suppress_errors)
    config                       every knob (config.patch(...))
    set_logs(...)                log artifacts, as DYNAMO_LITE_LOGS (docs/debugging.md)
    graph_break()                does nothing; compiled code breaks the graph there
    allow_in_graph(fn), nonstrict_trace(fn), substitute_in_graph(original)(polyfill),
    assume_constant_result(fn)   escape hatches: calls the trace treats specially (docs/api.md)
    nested_compile_region(fn)    mark a block's forward: traced once, reused by its repeats
    use_as_torch_compile()       torch.compile(...) calls compile with dynamo_lite (also a context
                                 manager; DYNAMO_LITE_AS_TORCH_COMPILE=1 without importing dynamo_lite)

``import dynamo_lite`` imports neither torch nor the compiler: each public name is
imported the first time it is read (module ``__getattr__``), so the pytest plugin,
``dynamo_lite.config`` and ``dynamo_lite.graph_breaks`` cost nothing in a process
that never compiles.  Type checkers and IDEs see the names through the
``TYPE_CHECKING`` imports below (the package ships ``py.typed``).
Tested by tests/api/test_api.py and tests/api/test_pytest_plugin_inert.py.
"""
from __future__ import annotations

import importlib as _importlib
import types as _types
from typing import TYPE_CHECKING

from . import config

if TYPE_CHECKING:
    from .api import (OptimizedModule, compile, disable, explain, load, mark_dynamic, mark_static, maybe_mark_dynamic,
                      optimize, reset, save, set_stance)
    from .backends import CompilerFn, list_backends, register_backend
    from .exc import BackendCompilerFailed, RecompileError, Unsupported
    from .api import allow_in_graph, assume_constant_result, nested_compile_region, nonstrict_trace, substitute_in_graph
    from .graph_breaks import graph_break
    from .log import set_logs
    from .report.explain import ExplainOutput
    from .torch_compile_switch import use_as_torch_compile

# public name -> the module that defines it (imported on first use)
_LAZY = {
    "compile": "api", "optimize": "api", "disable": "api", "reset": "api", "explain": "api",
    "OptimizedModule": "api", "mark_dynamic": "api", "maybe_mark_dynamic": "api", "mark_static": "api",
    "set_stance": "api", "ExplainOutput": "report.explain", "Unsupported": "exc", "RecompileError": "exc",
    "BackendCompilerFailed": "exc", "register_backend": "backends", "list_backends": "backends",
    "CompilerFn": "backends", "set_logs": "log", "graph_break": "graph_breaks",
    "use_as_torch_compile": "torch_compile_switch",
    "allow_in_graph": "api", "nonstrict_trace": "api", "substitute_in_graph": "api", "assume_constant_result": "api",
    "nested_compile_region": "api", "save": "api", "load": "api",
}

__all__ = [
    "compile", "optimize", "disable", "reset", "explain", "ExplainOutput", "Unsupported",
    "BackendCompilerFailed", "OptimizedModule", "config", "register_backend", "list_backends",
    "CompilerFn", "set_logs", "graph_break", "mark_dynamic", "maybe_mark_dynamic", "mark_static",
    "set_stance", "RecompileError", "use_as_torch_compile",
    "allow_in_graph", "nonstrict_trace", "substitute_in_graph", "assume_constant_result", "nested_compile_region",
    "save", "load",
]


if not TYPE_CHECKING:  # type checkers see the imports above; a typo stays an error for them
    def __getattr__(name: str) -> object:
        module = _LAZY.get(name)
        if module is None:
            raise AttributeError(f"module 'dynamo_lite' has no attribute {name!r}")
        value = getattr(_importlib.import_module(f".{module}", __name__), name)
        globals()[name] = value  # later reads are plain module attributes
        return value


def __dir__() -> list[str]:
    """The public names and the submodules imported so far."""
    loaded = {k for k, v in globals().items() if isinstance(v, _types.ModuleType) and not k.startswith("_")}
    return sorted(set(__all__) | loaded)
