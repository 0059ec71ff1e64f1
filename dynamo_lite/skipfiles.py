"""Which code dynamo_lite traces, by file.

Two questions, asked with the code's file name:
- ``skip_reason(file, name)``: should a *frame* of this code be left alone by
  the hook?  Yes for the standard library, torch's own Python code, dynamo_lite
  itself and test/packaging infrastructure.
- ``skip_reason(file, name, inline=True)``: may the interpreter *inline* a call
  to it?  Same list today.
torch.nn's module code (``forward`` of nn.Linear, nn.Sequential, ...) is
traced like user code, so its tensor work enters the graph, except
``torch/nn/modules/module.py`` (``Module.__call__`` and its hook machinery).
``torch/distributions``, ``torch/nn/utils/parametrize.py``/``parametrizations.py`` (a
parametrized weight's property, e.g. ``weight_norm``), ``rnn.py`` (pad_sequence),
``clip_grad.py``, ``convert_parameters.py`` and ``torch/utils/_foreach_utils.py`` are inlined when
traced code calls them (their frames entered on their own run eagerly).

Third-party model libraries (transformers, ...) are traced like user code.
A few files of untraced libraries are pure Python over their arguments and may be
inlined (``_INLINABLE_LIBRARY_FILES``: huggingface_hub's strict-dataclass validators,
which run on every assignment to a transformers config).
Of the standard library, the ``_collections_abc`` mixin methods and ``unittest/case.py``
(TestCase's assertion methods, called by test bodies compiled whole) may be inlined.
The answer for a file never changes while the process runs, so it is cached.
Tested by tests/robustness/test_hostile.py and tests/semantics/test_stdlib_modules.py.
"""
from __future__ import annotations

import functools
import os
import sysconfig
from typing import Optional

import torch

_DYNAMO_LITE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
_TORCH_INLINE_DIRS = (
    os.path.join(_TORCH_DIR, "nn", "modules") + os.sep,
)
# torch Python packages whose functions are inlined like user code when traced code calls them
# (their frames, entered on their own, still run eagerly): torch.distributions is plain tensor
# code over Python objects (Normal(...).log_prob(x), kl_divergence), as torch.compile traces it
_TORCH_INLINE_ONLY_DIRS = (
    os.path.join(_TORCH_DIR, "distributions") + os.sep,
    # parametrizations (weight_norm, orthogonal, ...): the injected property's getter and the
    # ParametrizationList forward it calls are plain module code over the original tensors
    os.path.join(_TORCH_DIR, "nn", "utils", "parametrize.py"),
    os.path.join(_TORCH_DIR, "nn", "utils", "parametrizations.py"),
    os.path.join(_TORCH_DIR, "nn", "utils", "rnn.py"),
    os.path.join(_TORCH_DIR, "nn", "utils", "clip_grad.py"),
    os.path.join(_TORCH_DIR, "nn", "utils", "convert_parameters.py"),
    os.path.join(_TORCH_DIR, "utils", "_foreach_utils.py"),
)
_MODULE_PY = os.path.join("nn", "modules", "module.py")  # Module.__call__ machinery: never traced
# dynamo_lite files holding user-style model code (the demo's nanoGPT): traced like user code
_TRACED_OWN_FILES = (os.path.join(_DYNAMO_LITE_DIR, "demo.py"),)
_STDLIB_DIRS = tuple(
    {os.path.abspath(sysconfig.get_paths()[k]) + os.sep for k in ("stdlib", "platstdlib")}
)
_INFRA_PACKAGES = (
    "_pytest", "pytest", "pluggy", "numpy", "bytecode", "hypothesis", "typing_extensions",
    "sympy", "triton", "filelock", "fsspec", "jinja2", "networkx", "setuptools", "pip",
    "_distutils_hack", "tqdm", "huggingface_hub", "safetensors", "tokenizers", "regex",
    "packaging", "yaml", "attr", "attrs", "coverage", "py", "iniconfig", "sortedcontainers",
    "depyf", "pydot", "IPython", "traitlets", "mpmath", "opt_einsum", "optree",
)


# standard-library code that is pure Python over its arguments and may be inlined
# (the Mapping/Sequence mixin methods: __contains__, get, keys, items, ...)
_INLINABLE_STDLIB = ("<frozen _collections_abc>",)
# unittest's assertion methods (assertTrue, assertIn, assertIsNone, ...), called from test bodies
# that are compiled whole (PyTorch's make_dynamo_test tests): plain comparisons over their arguments
_INLINABLE_STDLIB_FILES = (os.path.join("unittest", "case.py"),)

# files of untraced libraries whose functions are pure Python over their arguments and may be
# inlined (not captured as frames): huggingface_hub's strict dataclasses validate every field
# assignment of a transformers config (``__strict_setattr__`` and its type validators)
_INLINABLE_LIBRARY_FILES = (os.path.join("huggingface_hub", "dataclasses.py"),)


@functools.lru_cache(maxsize=None)
def _file_reason(filename: str, inline: bool) -> Optional[str]:
    if inline and filename in _INLINABLE_STDLIB:
        return None
    if filename.startswith("<frozen"):
        return "frozen standard-library module"
    path = os.path.abspath(filename) if not filename.startswith("<") else filename
    if path.startswith(_DYNAMO_LITE_DIR) and path not in _TRACED_OWN_FILES:
        return "dynamo_lite's own code"
    if path.startswith(_TORCH_DIR):
        if path.startswith(_TORCH_INLINE_DIRS) and not path.endswith(_MODULE_PY):
            return None  # torch.nn's modules: traced like user code (frames: forward only)
        if inline and path.startswith(_TORCH_INLINE_ONLY_DIRS):
            return None
        return "torch's own Python code"
    for marker in ("site-packages", "dist-packages"):
        idx = path.find(os.sep + marker + os.sep)
        if idx >= 0:
            rest = path[idx + len(marker) + 2:]
            top = rest.split(os.sep, 1)[0]
            if top.endswith(".py"):
                top = top[:-3]
            if top in _INFRA_PACKAGES:
                if inline and rest in _INLINABLE_LIBRARY_FILES:
                    return None
                return f"library {top!r} is not traced"
            return None
    if path.startswith(_STDLIB_DIRS):
        if inline and path.endswith(_INLINABLE_STDLIB_FILES) and \
                os.path.relpath(path, _stdlib_dir_of(path)) in _INLINABLE_STDLIB_FILES:
            return None
        return "standard-library code"
    return None


def _stdlib_dir_of(path: str) -> str:
    return next(d for d in _STDLIB_DIRS if path.startswith(d))


def skip_reason(filename: str, name: str = "", inline: bool = False) -> Optional[str]:
    """Why code from ``filename`` is not traced (None when it is)."""
    reason = _file_reason(filename, inline)
    if reason is None and not inline and name != "forward" and filename.startswith(_TORCH_DIR):
        # a torch.nn module's forward is a frame worth capturing (compile(nn.Sequential(...)));
        # its __init__, helpers and properties run eagerly when entered as frames
        return "torch.nn module code other than forward()"
    return reason
