"""What differs between the torch versions we support (2.13, 2.14, 2.15), in one place.

Nothing else in dynamo_lite checks ``torch.__version__`` for behaviour or reads a private torch
attribute that moved between these versions: it asks this module (the check is
tests/unit/test_torch_compat.py).  Where torch offers a way to tell that does not depend on the
version number (an attribute that exists or not), this module uses it, so a patch release that
back-ports a change is still read right.  What differs, and where:

- torch.fx's "symbolic tracing is running" flag: a module global
  ``torch.fx._symbolic_trace._is_fx_tracing_flag`` on 2.13; a thread-local
  (``_is_fx_tracing_tls.flag``, read by ``_get_is_fx_tracing()``) on 2.14.1 and 2.15 (the global
  is gone; an fx trace in another thread is no longer seen).  ``is_fx_tracing`` reads it, at a
  miss (convert_frame.foreign_tracer) and in every entry's guard (guards/kinds.py,
  NO_OTHER_TRACER: ``___torch_compat.is_fx_tracing()``, so the guard text and its C program
  read the same on every version).
- the wrapper ``@torch.no_grad`` / ``enable_grad`` / ``set_grad_enabled`` / ``inference_mode``
  put around a function (``torch.utils._contextlib.context_decorator``'s ``decorate_context``):
  its code is named ``decorate_context`` on 2.13 and 2.14; on 2.15 torch renames each wrapper's
  code after its context manager (``no_grad``, ``enable_grad``, ...).  ``is_context_decorator_code``
  recognises it by its code, whatever its name (variables/functions.py).
- ShapeEnv's private ``_get_user_frame`` (skipped on our ShapeEnvs: ``skip_user_frame_lookup``).
- the C++ extension ``dynamo_lite._tensor_meta`` is built against one torch's headers and
  libc10 (``setup.py``); its file carries that torch's version (``tensor_meta_filename``), and
  guards/tensor_api.py loads only the file built for the running torch.

Invariant: imports nothing of dynamo_lite but the C extension (bottom layer of the import-linter
contracts).
Tested by tests/unit/test_torch_compat.py.
"""
from __future__ import annotations

import functools
import re
import sysconfig
import types

import torch
import torch.fx._symbolic_trace as _fx_symbolic_trace
import torch.utils._contextlib as _torch_contextlib

from . import _C

# (major, minor) of the running torch, for reports and for tests that must name a version;
# behaviour is chosen by feature below, not by this number
_MAJOR, _MINOR = (int(p) for p in re.findall(r"\d+", torch.__version__)[:2])
TORCH_VERSION = (_MAJOR, _MINOR)
SUPPORTED = ((2, 13), (2, 14), (2, 15))

# ---- torch.fx symbolic tracing -------------------------------------------------------
# ``is_fx_tracing()``: is torch.fx symbolic tracing (fx.symbolic_trace, non-strict export)
# running here?  Every guard check calls it: a C call with no Python frame, and (the thread-local
# flag is unset in a thread that never traced) no AttributeError made and dropped each time.
if hasattr(_fx_symbolic_trace, "_is_fx_tracing_flag"):  # one module global
    is_fx_tracing = functools.partial(getattr, _fx_symbolic_trace, "_is_fx_tracing_flag")
    _C._set_fx_tracing_flag(vars(_fx_symbolic_trace), "_is_fx_tracing_flag", False)
else:  # thread-local (what torch's _get_is_fx_tracing() reads)
    is_fx_tracing = functools.partial(_C.thread_local_get, _fx_symbolic_trace._is_fx_tracing_tls, "flag", False)
    _C._set_fx_tracing_flag(_fx_symbolic_trace._is_fx_tracing_tls, "flag", True)
is_fx_tracing.__name__ = "is_fx_tracing"  # (how a guard program shows it)
# (guard programs read the same flag from C, with no call: LOAD_TORCH_STATE fx_tracing)


# ---- ShapeEnv's user-frame lookup ------------------------------------------------------
# ShapeEnv records, with each symbol and guard, the first stack frame outside torch's files;
# the first lookup builds torch's "uninteresting files" set, which imports torch._dynamo,
# torch._inductor and torch.export (about 0.4 s, on the first symbolic int of a process).  The
# location only decorates ShapeEnv's own logs (dynamo_lite records where each guard came from
# itself: shapes.ShapeTracker.where), so our ShapeEnvs answer "no frame", which ShapeEnv
# handles.  On every supported version ``_get_user_frame`` is a method of ShapeEnv; if a
# later torch drops it, nothing is set.
def _no_user_frame():
    return None


def skip_user_frame_lookup(env) -> None:
    """Make ``env`` (a ShapeEnv) skip the user-frame lookup (see above)."""
    if callable(getattr(type(env), "_get_user_frame", None)):
        env._get_user_frame = _no_user_frame


# ---- torch's context-manager decorators ------------------------------------------------
def _decorate_context_template() -> types.CodeType:
    (code,) = (c for c in _torch_contextlib.context_decorator.__code__.co_consts
               if isinstance(c, types.CodeType) and c.co_name == "decorate_context")
    return code


_DECORATE_CONTEXT = _decorate_context_template()


def is_context_decorator_code(code: types.CodeType) -> bool:
    """Is ``code`` the wrapper torch.utils._contextlib puts around a function decorated by a
    grad-mode context manager (closure cells ``ctx_factory``, ``func``)?  On 2.15 its name is the
    context manager's; everything else about the code is torch's one ``decorate_context``."""
    if code is _DECORATE_CONTEXT:
        return True
    if code.co_filename != _DECORATE_CONTEXT.co_filename or code.co_freevars != _DECORATE_CONTEXT.co_freevars:
        return False
    return code.replace(co_name=_DECORATE_CONTEXT.co_name, co_qualname=_DECORATE_CONTEXT.co_qualname) == _DECORATE_CONTEXT


# ---- the C++ tensor-metadata reader ----------------------------------------------------
def torch_build_tag(version: str) -> str:
    """The part of ``_tensor_meta``'s file name that names the torch it was built against
    (``2.15.0+cpu`` -> ``torch2_15_0_cpu``).  setup.py applies the same rule."""
    return "torch" + re.sub(r"[^0-9A-Za-z]+", "_", version)


def tensor_meta_filename() -> str:
    """The file name of ``dynamo_lite._tensor_meta`` built for the running torch and Python."""
    return f"_tensor_meta.{torch_build_tag(torch.__version__)}{sysconfig.get_config_var('EXT_SUFFIX')}"
