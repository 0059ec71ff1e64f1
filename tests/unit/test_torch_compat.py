"""dynamo_lite/torch_compat.py: what differs between torch 2.13, 2.14 and 2.15, read the same way
on each; version knowledge stays in that module; the C++ tensor reader built for one torch is
never loaded by another; the hard rules (no torch._dynamo, torch.compile, torch._C._dynamo or
torch's frame hook in dynamo_lite/) hold on every version.
"""
from __future__ import annotations

import ast
import glob
import logging
import os
import re
import shutil
import threading

import pytest
import torch
import torch.fx

import dynamo_lite
from dynamo_lite import torch_compat
from dynamo_lite.convert_frame import entries_for
from dynamo_lite.guards import NoOtherTracerGuard, tensor_api

_PACKAGE_DIR = os.path.dirname(os.path.abspath(dynamo_lite.__file__))


def _package_files():
    files = glob.glob(os.path.join(_PACKAGE_DIR, "**", "*.py"), recursive=True)
    assert len(files) > 30
    return files


def test_running_torch_is_a_supported_version():
    assert torch_compat.TORCH_VERSION in torch_compat.SUPPORTED


def test_fx_tracing_is_seen_while_fx_traces_and_only_then():
    seen = []

    def probe(x):
        seen.append(torch_compat.is_fx_tracing())
        return x + 1

    assert torch_compat.is_fx_tracing() is False
    torch.fx.symbolic_trace(probe)
    assert seen == [True]
    assert torch_compat.is_fx_tracing() is False


def test_no_other_tracer_guard_fails_while_fx_traces():
    """The entry's guard (C program and Python check alike) reads torch_compat's answer."""
    def g(x):
        return x.cos() + 1

    x = torch.randn(3)
    compiled = dynamo_lite.compile(g, backend="eager")
    compiled(x)
    (entry,) = entries_for(g.__code__)
    args = (x, g.__globals__, g)
    assert entry.guard.fn(*args) is True and entry.guard.py_fn(*args) is True
    inside = []

    def probe(y):
        inside.append((entry.guard.fn(*args), entry.guard.py_fn(*args)))
        return y

    torch.fx.symbolic_trace(probe)
    assert inside == [(False, False)]
    assert "not ___torch_compat.is_fx_tracing()" in NoOtherTracerGuard().exprs(None)


def test_fx_tracing_in_another_thread_is_not_this_threads():
    """From 2.14.1 on the flag is thread-local; on 2.13 it is global and another thread's trace is
    seen too (a cached entry then runs eager for that while: never wrong, only slower)."""
    started, release, seen = threading.Event(), threading.Event(), []

    def slow(x):
        started.set()
        release.wait(10)
        return x

    worker = threading.Thread(target=torch.fx.symbolic_trace, args=(slow,))
    worker.start()
    try:
        assert started.wait(10)
        seen.append(torch_compat.is_fx_tracing())
    finally:
        release.set()
        worker.join(10)
    global_flag = hasattr(torch.fx._symbolic_trace, "_is_fx_tracing_flag")
    assert seen == [global_flag]


def test_thread_local_get_reads_this_threads_value_or_the_default():
    # what torch_compat.is_fx_tracing calls on a thread-local flag: getattr(local, name, default)
    from dynamo_lite import _C

    local = threading.local()
    assert _C.thread_local_get(local, "flag", False) is False
    local.flag = "set here"
    assert _C.thread_local_get(local, "flag", False) == "set here"
    other = []
    worker = threading.Thread(target=lambda: other.append(_C.thread_local_get(local, "flag", None)))
    worker.start()
    worker.join(10)
    assert other == [None]
    del local.flag
    assert _C.thread_local_get(local, "flag", 0) == 0
    with pytest.raises(TypeError):
        _C.thread_local_get(local, 1, False)
    with pytest.raises(TypeError):
        _C.thread_local_get(local, "flag")


# ---- version knowledge stays in torch_compat --------------------------------------------
# the spellings that differ between the supported torch versions (torch_compat's docstring)
_VERSION_SPECIFIC = ("_is_fx_tracing_flag", "_get_is_fx_tracing", "_is_fx_tracing_tls")


def _dotted(node) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _reads_torch_version(node) -> bool:
    return any(_dotted(n) in ("torch.__version__", "torch.version.__version__") or _dotted(n).startswith("torch.torch_version")
               for n in ast.walk(node) if isinstance(n, ast.Attribute))


def test_version_knowledge_stays_in_torch_compat():
    """No module but torch_compat spells a name that differs between torch versions or decides
    anything by ``torch.__version__`` (showing it in a report or log line is fine)."""
    offenders = []
    for path in _package_files():
        name = os.path.relpath(path, _PACKAGE_DIR)
        if name == "torch_compat.py":
            continue
        text = open(path, encoding="utf-8").read()
        for n, line in enumerate(text.splitlines(), 1):
            if any(s in line.split("#", 1)[0] for s in _VERSION_SPECIFIC):
                offenders.append(f"{name}:{n}: {line.strip()}")
        for node in ast.walk(ast.parse(text)):
            test = getattr(node, "test", None) if isinstance(node, (ast.If, ast.IfExp, ast.While, ast.Assert)) else None
            if isinstance(node, ast.Compare) or test is not None:
                if _reads_torch_version(test if test is not None else node):
                    offenders.append(f"{name}:{node.lineno}: decides by the torch version")
    assert offenders == []


_FORBIDDEN_MODULES = ("torch._dynamo", "torch._C._dynamo")


def _forbidden(name: str) -> bool:
    return any(name == f or name.startswith(f + ".") for f in _FORBIDDEN_MODULES) or "set_eval_frame" in name


def test_no_torch_dynamo_torch_compile_or_torch_frame_hook_in_the_package():
    """The hard rules, read from the code (torch itself may import torch._dynamo underneath):
    nothing imports or reads torch._dynamo / torch._C._dynamo or torch's frame hook, and nothing
    calls torch.compile (comparing a user's callee with it, and rebuilding a torch.compile()
    call the user's own code made, are not calls of ours)."""
    offenders = []
    for path in _package_files():
        tree = ast.parse(open(path, encoding="utf-8").read())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Attribute):
                names = [_dotted(node)]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("torch."):
                names = [node.value]  # importlib.import_module("torch._dynamo") and the like
            elif isinstance(node, ast.Call) and _dotted(node.func) == "torch.compile":
                names = ["torch.compile(...)"]
            offenders += [f"{os.path.relpath(path, _PACKAGE_DIR)}:{node.lineno}: {n}" for n in names
                          if _forbidden(n) or n == "torch.compile(...)"]
    assert offenders == []


# ---- the C++ tensor reader: one build per torch ----------------------------------------
def test_tensor_meta_file_name_names_the_torch():
    name = torch_compat.tensor_meta_filename()
    assert name.startswith("_tensor_meta." + torch_compat.torch_build_tag(torch.__version__) + ".")
    assert torch_compat.torch_build_tag("2.15.0+cpu") == "torch2_15_0_cpu"
    # not a module name: pkgutil and `import` never pick a build up by themselves
    import inspect

    assert "." in inspect.getmodulename(name)


def test_setup_py_names_the_build_by_the_same_rule():
    """setup.py cannot import the package it builds: it spells torch_build_tag's rule itself."""
    with open(os.path.join(os.path.dirname(_PACKAGE_DIR), "setup.py"), encoding="utf-8") as f:
        setup_py = f.read()
    assert '"torch" + re.sub(r"[^0-9A-Za-z]+", "_", torch.__version__)' in setup_py
    assert 'f"_tensor_meta.{tag}"' in setup_py
    assert torch_compat.torch_build_tag(torch.__version__) == "torch" + re.sub(r"[^0-9A-Za-z]+", "_", torch.__version__)


def test_the_loaded_tensor_meta_is_the_build_for_this_torch():
    if not tensor_api.enabled():
        pytest.skip("dynamo_lite._tensor_meta is not built for this torch")
    assert os.path.basename(tensor_api._meta.__file__) == torch_compat.tensor_meta_filename()


def test_a_build_for_another_torch_is_not_loaded(tmp_path, caplog):
    builds = glob.glob(os.path.join(_PACKAGE_DIR, "_tensor_meta.*"))
    if not builds:
        pytest.skip("dynamo_lite._tensor_meta is not built")
    other = tmp_path / torch_compat.tensor_meta_filename().replace(
        torch_compat.torch_build_tag(torch.__version__), torch_compat.torch_build_tag("2.12.0+cpu"))
    shutil.copy(builds[0], other)
    with caplog.at_level(logging.WARNING, logger="dynamo_lite.guards"):
        assert tensor_api._import_build(str(tmp_path)) is None
    assert f"has no build for torch {torch.__version__}" in caplog.text and other.name in caplog.text


def test_no_build_at_all_is_quiet(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="dynamo_lite.guards"):
        assert tensor_api._import_build(str(tmp_path)) is None
    assert caplog.text == ""


# ---- torch's context-manager decorators --------------------------------------------------
@pytest.mark.parametrize("make", [lambda: torch.no_grad(), lambda: torch.enable_grad(),
                                  lambda: torch.set_grad_enabled(False), lambda: torch.inference_mode()],
                         ids=["no_grad", "enable_grad", "set_grad_enabled", "inference_mode"])
def test_grad_mode_decorator_wrappers_are_recognised(make):
    def f(x):
        return x

    wrapped = make()(f)
    assert wrapped is not f and wrapped.__wrapped__ is f
    assert torch_compat.is_context_decorator_code(wrapped.__code__)


def test_other_code_is_not_a_context_decorator():
    def decorate_context(*args, **kwargs):  # same name, not torch's code
        return args

    assert not torch_compat.is_context_decorator_code(decorate_context.__code__)
    assert not torch_compat.is_context_decorator_code(torch.autocast("cpu")(lambda x: x).__code__)
    assert not torch_compat.is_context_decorator_code(torch.nn.functional.relu.__code__)


def test_first_symbolic_int_does_not_import_the_compiler_stacks():
    # ShapeEnv's user-frame lookup would import torch._inductor and torch.export (with more of
    # torch._dynamo: ~0.4 s) on a process's first symbolic int; our ShapeEnvs skip it
    import subprocess
    import sys

    code = (
        "import sys, torch, dynamo_lite\n"
        "def f(x, n):\n"
        "    return x * n + 1\n"
        "c = dynamo_lite.compile(f, backend='eager')\n"
        "x = torch.randn(4)\n"
        "assert torch.equal(c(x, 3), f(x, 3)) and torch.equal(c(x, 5), f(x, 5))\n"
        "print(sorted(m for m in ('torch._inductor.sizevars', 'torch.export._trace') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_shape_env_user_frame_lookup_is_skipped_only_on_our_env():
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    ours, theirs = ShapeEnv(), ShapeEnv()
    torch_compat.skip_user_frame_lookup(ours)
    assert ours._get_user_frame() is None
    assert "_get_user_frame" not in vars(theirs)
