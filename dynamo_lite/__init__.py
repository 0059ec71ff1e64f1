"""dynamo_lite: a readable frame-evaluation JIT for PyTorch.

Public API (see docs/api.md):
    compile(fn_or_module, *, backend="inductor", fullgraph=False, dynamic=None)
    optimize(backend)            context manager and decorator
    disable(fn)                  run without capture
    reset()                      forget compiled code
    explain(fn)(*args, **kw)     what was captured, where it broke, the guards
    mark_dynamic(t, dim, min=, max=), maybe_mark_dynamic(t, dim), mark_static(t, dim)
                                 dynamic shapes (docs/recompiles.md)
    Unsupported                  raised by fullgraph=True
    config                       every knob (config.patch(...))
    set_logs(...)                log artifacts, as DYNAMO_LITE_LOGS (docs/debugging.md)
"""
from . import config
from .api import (OptimizedModule, compile, disable, explain, mark_dynamic, mark_static, maybe_mark_dynamic,
                  optimize, reset)
from .backends import list_backends, register_backend
from .exc import Unsupported
from .log import set_logs
from .report.explain import ExplainOutput

__all__ = [
    "compile", "optimize", "disable", "reset", "explain", "ExplainOutput", "Unsupported",
    "OptimizedModule", "config", "register_backend", "list_backends", "set_logs", "mark_dynamic",
    "maybe_mark_dynamic", "mark_static",
]
