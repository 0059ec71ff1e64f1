"""Connect the C guard evaluator to the C++ tensor-metadata reader, if it is safe.

``dynamo_lite._tensor_meta`` (csrc/tensor_meta.cpp, optional) reads a tensor's
dtype, device, sizes, strides and requires_grad from its ``c10::TensorImpl``.
It is built against one torch (its file is named after that torch's version,
``torch_compat.tensor_meta_filename``); a build for another torch is never
loaded (its TensorImpl layout and libc10 symbols may differ). At import this
module:
  0. loads the build made for the running torch, if there is one (a log line
     says when there is none, or only builds for other torch versions);
  1. finds where a tensor object keeps its TensorImpl pointer, by comparing
     the words of probe tensors with ``tensor._cdata`` (the address torch
     reports), and configures the reader with that offset;
  2. checks on probe tensors of several kinds (dtypes, views with odd
     strides, nn.Parameter, requires_grad, 0-d, meta device) that the reader
     agrees with the Python attributes;
  3. only then registers it with ``_C._set_tensor_api``.
If anything is missing or disagrees, CHECK_TENSOR reads Python attributes
(slower, same answers).

``codes(dtype, device)`` gives the C++ codes a CHECK_TENSOR op expects;
``eligible(tp)`` says whether instances of ``tp`` may be checked by the
reader: ``torch.Tensor`` itself, or a subclass that overrides neither the
metadata getters nor ``__torch_function__``/``__torch_dispatch__`` (so its
Python attributes are the TensorImpl's, e.g. ``nn.Parameter``).
Tested by tests/unit/test_guards.py.
"""
from __future__ import annotations

import ctypes
import functools
import glob
import importlib.machinery
import importlib.util
import logging
import os
import sys
from typing import Optional

import torch

from .. import _C, torch_compat

log = logging.getLogger("dynamo_lite.guards")

_GETTERS = ("shape", "dtype", "device", "requires_grad", "stride", "size", "layout")
_meta = None  # the _tensor_meta module once validated


def _find_offset(meta) -> Optional[int]:
    probes = [torch.empty(2, 3), torch.nn.Parameter(torch.empty(4))]
    base = torch._C.TensorBase.__basicsize__
    for offset in range(ctypes.sizeof(ctypes.c_void_p) * 2, base, ctypes.sizeof(ctypes.c_void_p)):
        if all(ctypes.c_void_p.from_address(id(t) + offset).value == t._cdata for t in probes):
            return offset
    return None


def _probes():
    # metadata probes only: torch.empty, never torch.randn (must not consume the user's RNG)
    yield torch.empty(0)
    yield torch.empty(3, 4)
    yield torch.empty(3, 4).t()
    yield torch.empty(5, 6)[1:4:2, ::3]
    yield torch.tensor(1.5, dtype=torch.float64)
    yield torch.zeros(2, 3, dtype=torch.int64).expand(4, 2, 3)
    yield torch.ones(7, dtype=torch.bool)
    yield torch.empty(2, 2, requires_grad=True)
    yield torch.nn.Parameter(torch.empty(3, 3))
    yield torch.nn.Parameter(torch.empty(3, 3), requires_grad=False)
    yield torch.empty(4, 4, requires_grad=True)[1:]
    yield torch.empty(3, 2, device="meta")
    yield torch.empty(2, 3, 4).permute(2, 0, 1)


def _agrees(meta) -> bool:
    seen_codes: dict = {}
    for t in _probes():
        scalar_type, device_type, dev_index, rg, sizes, strides = meta.read(t)
        if sizes != tuple(t.shape) or strides != tuple(t.stride()) or bool(rg) != t.requires_grad:
            return False
        key = (t.dtype, t.device)
        code = (scalar_type, device_type, dev_index)
        if seen_codes.setdefault(key, code) != code:
            return False
        if codes(t.dtype, t.device, _meta_module=meta) != code:
            return False
    # distinct dtypes/devices must get distinct codes
    return len(set(seen_codes.values())) == len(seen_codes)


_MODULE_NAME = "dynamo_lite._tensor_meta"


_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _import_build(package_dir: str = _PACKAGE_DIR):
    """The ``_tensor_meta`` module built for the running torch, or None (logged)."""
    path = os.path.join(package_dir, torch_compat.tensor_meta_filename())
    if not os.path.exists(path):
        others = sorted(os.path.basename(p) for p in glob.glob(os.path.join(package_dir, "_tensor_meta*")))
        if others:
            log.warning("dynamo_lite._tensor_meta has no build for torch %s (found: %s; build it with "
                        "python setup.py build_ext --inplace); tensor guards read Python attributes",
                        torch.__version__, ", ".join(others))
        else:
            log.debug("dynamo_lite._tensor_meta is not built: tensor guards read Python attributes")
        return None
    # the file's name is not the module's (PyInit__tensor_meta): load it under the module's name
    loader = importlib.machinery.ExtensionFileLoader(_MODULE_NAME, path)
    spec = importlib.util.spec_from_file_location(_MODULE_NAME, path, loader=loader)
    if spec is None:
        return None
    try:
        meta = importlib.util.module_from_spec(spec)
        loader.exec_module(meta)
    except ImportError as e:
        log.warning("dynamo_lite._tensor_meta (%s) does not load (%s); tensor guards read Python attributes",
                    os.path.basename(path), e)
        return None
    sys.modules[_MODULE_NAME] = meta
    return meta


def _load():
    global _meta
    meta = _import_build()  # the optional C++ extension (links libc10)
    if meta is None:
        return
    try:
        offset = _find_offset(meta)
        if offset is None:
            log.debug("tensor layout not recognised: tensor guards read Python attributes")
            return
        meta.configure(offset)
        if not _agrees(meta):
            log.warning("dynamo_lite._tensor_meta disagrees with torch; tensor guards read Python attributes")
            return
        _C._set_tensor_api(meta._C_API)
        _meta = meta
    except Exception as e:  # noqa: BLE001 - never fatal: attribute reads are the fallback
        log.warning("dynamo_lite._tensor_meta unusable (%s: %s); tensor guards read Python attributes",
                    type(e).__name__, e)


# LOAD_TORCH_STATE's states, by code (csrc/tensor_meta.h DL_STATE_*, in the same order)
STATE_NAMES = ("grad_enabled", "any_autocast", "torch_function_stack_len", "dispatch_stack_len",
               "jit_tracing", "functorch_transform", "fx_tracing", "cublas_allow_tf32")
_FX_TRACING = STATE_NAMES.index("fx_tracing")  # (read by C itself, not the C++ reader)


def _state_functions() -> dict:
    """torch's state queries -> (code, kind); "value": the op loads what the function returns (a
    bool, a stack length, torch.fx's flag); "presence": only whether it returns None (another
    tracer), so only ``... is None`` may use it."""
    queries = {"grad_enabled": (torch.is_grad_enabled, "value"),
               "any_autocast": (torch._C._is_any_autocast_enabled, "value"),
               "torch_function_stack_len": (torch._C._len_torch_function_stack, "value"),
               "dispatch_stack_len": (torch._C._len_torch_dispatch_stack, "value"),
               "jit_tracing": (torch._C._get_tracing_state, "presence"),
               "functorch_transform": (torch._C._functorch.peek_interpreter_stack, "presence"),
               "fx_tracing": (torch_compat.is_fx_tracing, "value"),
               "cublas_allow_tf32": (torch._C._get_cublas_allow_tf32, "value")}
    return {fn: (STATE_NAMES.index(name), kind) for name, (fn, kind) in queries.items()}


_STATE_FUNCTIONS: dict = {}


def _read_state(code: int):
    return _C._torch_state(code)


def torch_state(fn, kind: str) -> Optional[int]:
    """The code of LOAD_TORCH_STATE that reads what torch's state query ``fn`` tells (kind "value":
    its result; "presence": whether its result is None), or None: another function, no reader for
    it, or the op does not load what ``fn`` returns right now (both are read; a guard then calls
    ``fn``)."""
    if not _STATE_FUNCTIONS:
        _STATE_FUNCTIONS.update(_state_functions())
    try:
        code, fn_kind = _STATE_FUNCTIONS.get(fn, (None, None))
    except TypeError:  # (an unhashable object)
        return None
    if code is None or fn_kind != kind:
        return None
    if code != _FX_TRACING and (_meta is None or not _C._has_tensor_api()):
        return None  # (programs read through the registered C++ reader)
    try:
        read, told = _read_state(code), fn()
    except Exception:  # noqa: BLE001 - the guard calls fn instead
        return None
    if kind == "presence":  # (None: no tracer; True: one runs)
        return code if (read is None) == (told is None) else None
    return code if read is not None and type(read) is type(told) and read == told else None


@functools.lru_cache(maxsize=None)
def _codes_cached(dtype, device, meta):
    t = torch.empty(0, dtype=dtype, device=device)
    scalar_type, device_type, device_index, *_ = meta.read(t)
    return (scalar_type, device_type, device_index)


def codes(dtype, device, _meta_module=None) -> Optional[tuple]:
    """(scalar_type, device_type, device_index) for a CHECK_TENSOR op, or None (no reader)."""
    meta = _meta_module or _meta
    if meta is None:
        return None
    try:
        return _codes_cached(dtype, device, meta)
    except Exception:  # noqa: BLE001 - e.g. a device we cannot allocate on: use attribute reads
        return None


@functools.lru_cache(maxsize=None)
def eligible(tp: type) -> bool:
    """May instances of exactly ``tp`` be checked by the C++ reader?"""
    if tp is torch.Tensor:
        return True
    if not (isinstance(tp, type) and issubclass(tp, torch.Tensor)):
        return False
    if tp.__torch_function__ is not torch._C._disabled_torch_function_impl:
        return False
    if getattr(tp, "__torch_dispatch__", None) is not torch._C._disabled_torch_dispatch_impl:
        return False
    for cls in tp.__mro__:
        if cls is torch.Tensor:
            break
        if any(name in cls.__dict__ for name in _GETTERS):
            return False
    return True


def enabled() -> bool:
    return _meta is not None


_load()
