"""use_as_torch_compile(): code that calls torch.compile compiles with dynamo_lite, unedited.

An opt-in switch for trying dynamo_lite on an existing script or library (a Hugging Face
model's ``get_compiled_call``, ``nn.Module.compile()``, a Lightning module) that calls
``torch.compile`` itself.  It replaces the public names below with functions of this module,
and turning it off puts the original objects back (the same objects, by identity):

    torch.compile, torch.compiler.compile  -> torch_compile(): torch.compile's arguments,
                                              mapped onto dynamo_lite.compile
    torch.compiler.disable                 -> compiler_disable(): dynamo_lite.disable
    torch.compiler.set_stance              -> compiler_set_stance(): dynamo_lite.set_stance
    torch.compiler.reset                   -> compiler_reset(): dynamo_lite.reset
    torch.compiler.allow_in_graph, .substitute_in_graph, .assume_constant_result
                                           -> dynamo_lite's functions of the same names

Three ways to turn it on:

    dynamo_lite.use_as_torch_compile()      a function (until use_as_torch_compile(False)) and a
                                            context manager (the block's end restores what was
                                            in place when it was made)
    DYNAMO_LITE_AS_TORCH_COMPILE=1          in a process that never imports dynamo_lite: the
                                            ``dynamo_lite_as_torch_compile.pth`` file installed
                                            with the package calls install_from_environment() at
                                            start-up, which switches right after ``import torch``
                                            finishes (no cost when the variable is unset: one
                                            dictionary lookup; it never imports torch itself)
    python -m dynamo_lite.run script.py ... run a script (or ``-m module``) with the switch on
                                            (dynamo_lite/run.py; sets the variable for children)

What it never does: import or call TorchDynamo (``torch._dynamo``) or touch its names
(``torch._dynamo.disable``, ``torch._dynamo.config``, ... stay TorchDynamo's).  Names are
replaced where code reads them at call time; a ``from torch import compile`` made before the
switch keeps torch's function (the variable route switches before any library is imported).
``torch.compiler.is_compiling()`` / ``is_dynamo_compiling()`` are not replaced: a dynamo_lite
trace already answers True for them (variables/torch_vars.py, by identity) and code running
eagerly gets False, as under torch.compile.

torch.compile's arguments: ``fullgraph``, ``dynamic``, ``mode``, ``options`` mean what they
mean for dynamo_lite.compile; ``backend=None`` is dynamo_lite's default backend
(``config.default_backend``, "inductor" unless DYNAMO_LITE_DEFAULT_BACKEND says otherwise); a
backend name dynamo_lite does not have raises ValueError at the torch.compile call (nothing
falls back to TorchDynamo); ``mode=``/``options=`` for a backend other than inductor are passed
to it as keyword arguments when its signature takes them, as torch.compile does, and dropped
otherwise (dynamo_lite's "eager" and "aot_eager" ignore them, as torch's do); ``disable=True``
returns the model itself; ``name`` is accepted; ``recompile_limit``, ``isolate_recompiles``
and ``shapes_spec`` have no per-call equivalent here and are ignored with a warning
(``config.cache_size_limit`` is the process-wide limit).
Tested by tests/api/test_use_as_torch_compile.py.
"""
from __future__ import annotations

import functools
import inspect
import os
import sys
import warnings
from typing import Any, Callable, Optional

ENV_VAR = "DYNAMO_LITE_AS_TORCH_COMPILE"
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off", "")

# (module name, attribute, replacement's name in this module): what the switch replaces
_TARGETS = (
    ("torch", "compile", "torch_compile"),
    ("torch.compiler", "compile", "torch_compile"),
    ("torch.compiler", "disable", "compiler_disable"),
    ("torch.compiler", "set_stance", "compiler_set_stance"),
    ("torch.compiler", "reset", "compiler_reset"),
    ("torch.compiler", "allow_in_graph", "compiler_allow_in_graph"),
    ("torch.compiler", "substitute_in_graph", "compiler_substitute_in_graph"),
    ("torch.compiler", "assume_constant_result", "compiler_assume_constant_result"),
)
# (module name, attribute) -> the object that was there before the switch replaced it
_ORIGINALS: dict[tuple[str, str], Any] = {}
# torch.compile arguments with no per-call equivalent, already warned about
_WARNED: set[str] = set()


def torch_compile(model: Any = None, *, fullgraph: bool = False, dynamic: Optional[bool] = None,
                  backend: Any = None, mode: Optional[str] = None, options: Optional[dict[str, Any]] = None,
                  name: Optional[str] = None, disable: bool = False, recompile_limit: Optional[int] = None,
                  isolate_recompiles: bool = False, shapes_spec: Any = None) -> Any:
    """torch.compile, compiled by dynamo_lite (``dynamo_lite.use_as_torch_compile`` is on).

    Takes torch.compile's arguments (see the module docstring for how each maps onto
    ``dynamo_lite.compile``); ``torch.compile(fullgraph=True)`` without a model is a decorator."""
    if model is None:  # @torch.compile(...) / torch.compile(**kw)(model): torch checks nothing until applied
        def decorate(model: Any) -> Any:
            if model is None:
                raise RuntimeError("Model can't be None")
            return torch_compile(model, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode,
                                 options=options, name=name, disable=disable, recompile_limit=recompile_limit,
                                 isolate_recompiles=isolate_recompiles, shapes_spec=shapes_spec)

        return decorate
    if mode is not None and options is not None:
        raise RuntimeError("Either mode or options can be specified, but both can't be specified at the same time.")
    for arg, given in (("recompile_limit", recompile_limit is not None), ("isolate_recompiles", bool(isolate_recompiles)),
                       ("shapes_spec", shapes_spec is not None)):
        if given and arg not in _WARNED:
            _WARNED.add(arg)
            warnings.warn(f"torch.compile({arg}=...) is ignored: torch.compile calls go to dynamo_lite "
                          f"({ENV_VAR} / dynamo_lite.use_as_torch_compile), which has no per-call {arg}",
                          stacklevel=2)
    if disable:
        return model
    from . import api, config  # lazy: the switch is installed before torch and the compiler are imported
    from .backends import lookup_backend

    try:
        backend_fn, backend_name = lookup_backend(backend if backend is not None else config.default_backend)
    except ValueError as e:
        raise ValueError(f"torch.compile(backend={backend!r}) goes to dynamo_lite ({ENV_VAR} / "
                         f"dynamo_lite.use_as_torch_compile): {e}. Register it with dynamo_lite.register_backend, "
                         "pass a backend callable, or turn the switch off to use TorchDynamo") from None
    mode = None if mode == "default" else mode
    if backend_name == "inductor":
        return api.compile(model, backend=backend_fn, fullgraph=fullgraph, dynamic=dynamic, mode=mode, options=options)
    return api.compile(model, backend=_with_backend_kwargs(backend_fn, mode, options), fullgraph=fullgraph,
                       dynamic=dynamic)


def _with_backend_kwargs(backend: Callable[..., Any], mode: Optional[str], options: Optional[dict[str, Any]]) -> Any:
    """torch.compile's wrapper of a backend other than inductor (torch._TorchCompileWrapper): it is
    called with ``mode=`` / ``options=`` when given; here only when its signature takes them."""
    kwargs: dict[str, Any] = {}
    if mode:
        kwargs["mode"] = mode
    if options:
        kwargs["options"] = options
    if not kwargs:
        return backend
    try:
        inspect.signature(backend).bind(None, [], **kwargs)
    except TypeError:
        return backend  # a backend that takes no options (dynamo_lite's eager, aot_eager): as torch's, it ignores them
    except ValueError:  # no signature to read (a C callable): pass them, as torch does
        pass
    return functools.update_wrapper(functools.partial(backend, **kwargs), backend)


def compiler_disable(fn: Optional[Callable[..., Any]] = None, recursive: bool = True, *,
                     reason: Optional[str] = None) -> Any:
    """torch.compiler.disable, as dynamo_lite.disable (``reason`` is accepted and not shown)."""
    from . import api  # lazy: see torch_compile

    return api.disable(fn, recursive=recursive)


def compiler_set_stance(stance: str = "default", *, skip_guard_eval_unsafe: bool = False,
                        force_backend: Any = None) -> Any:
    """torch.compiler.set_stance, as dynamo_lite.set_stance (a function, context manager and decorator)."""
    if skip_guard_eval_unsafe or force_backend is not None:
        raise NotImplementedError("torch.compiler.set_stance(skip_guard_eval_unsafe=, force_backend=) has no "
                                  f"dynamo_lite equivalent (torch.compiler calls go to dynamo_lite: {ENV_VAR})")
    from . import api  # lazy: see torch_compile

    return api.set_stance(stance)


def compiler_reset() -> None:
    """torch.compiler.reset, as dynamo_lite.reset: forget every compiled entry."""
    from . import api  # lazy: see torch_compile

    api.reset()


def compiler_allow_in_graph(fn: Any) -> Any:
    """torch.compiler.allow_in_graph, as dynamo_lite.allow_in_graph."""
    from . import api  # lazy: see torch_compile

    return api.allow_in_graph(fn)


def compiler_substitute_in_graph(original_fn: Callable[..., Any], *, can_constant_fold_through: bool = False,
                                 skip_signature_check: bool = False) -> Any:
    """torch.compiler.substitute_in_graph, as dynamo_lite.substitute_in_graph."""
    from . import api  # lazy: see torch_compile

    return api.substitute_in_graph(original_fn, can_constant_fold_through=can_constant_fold_through,
                                   skip_signature_check=skip_signature_check)


def compiler_assume_constant_result(fn: Any) -> Any:
    """torch.compiler.assume_constant_result, as dynamo_lite.assume_constant_result."""
    from . import api  # lazy: see torch_compile

    return api.assume_constant_result(fn)


def is_enabled() -> bool:
    """Whether the switch's functions are in place of torch's now."""
    torch = sys.modules.get("torch")
    return torch is not None and getattr(torch, "compile", None) is torch_compile


def _set(enabled: bool) -> None:
    import torch.compiler  # (torch imports it; the import makes sure and returns at once)

    ours = globals()
    for module_name, attr, replacement in _TARGETS:
        module = sys.modules.get(module_name)
        if module is None or not hasattr(module, attr):
            continue  # (a torch without this name: nothing to replace)
        current, key = getattr(module, attr), (module_name, attr)
        if enabled and current is not ours[replacement]:
            _ORIGINALS[key] = current
            setattr(module, attr, ours[replacement])
        elif not enabled and current is ours[replacement] and key in _ORIGINALS:
            setattr(module, attr, _ORIGINALS.pop(key))


class use_as_torch_compile:
    """Make ``torch.compile(...)`` (and ``torch.compiler.compile``, ``.disable``, ``.set_stance``,
    ``.reset``) compile with dynamo_lite, in code that is not edited (see
    dynamo_lite/torch_compile_switch.py for each argument's meaning).

    - as a function, ``use_as_torch_compile()`` turns it on and ``use_as_torch_compile(False)``
      puts torch's own functions back;
    - as a context manager, ``with use_as_torch_compile():`` turns it on for the block and
      leaves it as it was before at the end.

    Objects ``torch.compile`` already returned stay what they are.  The environment variable
    ``DYNAMO_LITE_AS_TORCH_COMPILE=1`` turns it on in a process that never imports dynamo_lite.
    """

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.prev = is_enabled()
        _set(enabled)

    def __enter__(self) -> "use_as_torch_compile":
        _set(self.enabled)
        return self

    def __exit__(self, *exc: object) -> None:
        _set(self.prev)


def install_from_environment() -> bool:
    """Called at start-up by ``dynamo_lite_as_torch_compile.pth`` when ``DYNAMO_LITE_AS_TORCH_COMPILE``
    is set: if it says yes, turn the switch on as soon as ``import torch`` finishes (now, if
    torch is imported already).  Returns whether it will be on.  Imports nothing heavy."""
    value = os.environ.get(ENV_VAR, "").strip().lower()
    if value not in _TRUE:
        if value not in _FALSE:
            warnings.warn(f"{ENV_VAR}={os.environ[ENV_VAR]!r} is not 1 or 0: torch.compile stays torch's")
        return False
    if "torch" in sys.modules:
        _switch_on_quietly()
    elif not any(isinstance(f, _AfterTorchImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterTorchImport())
    return True


def _switch_on_quietly() -> None:
    try:
        use_as_torch_compile(True)
    except Exception as e:  # noqa: BLE001 - a broken switch must not break ``import torch``
        warnings.warn(f"{ENV_VAR}: could not route torch.compile to dynamo_lite ({type(e).__name__}: {e})")


class _AfterTorchImport:
    """A meta path finder that finds nothing itself: when ``torch`` is about to be imported, it
    steps aside, lets the other finders find torch, and makes torch's loader turn the switch on
    once torch's ``__init__`` has run."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != "torch":
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)  # once: torch is imported once
        import importlib.util

        spec = importlib.util.find_spec(fullname)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module
        own = getattr(loader, "__dict__", {}).get("exec_module")  # (normally none: the class's method)

        def exec_module(module: Any) -> None:
            try:
                run(module)
            finally:  # a loader may be shared: only this one call is ours
                if own is None:
                    del loader.exec_module
                else:
                    loader.exec_module = own
            if module.__name__ == "torch":
                _switch_on_quietly()

        try:
            loader.exec_module = exec_module
        except (AttributeError, TypeError):  # a loader without an instance __dict__: switch on later
            return spec
        return spec


__all__ = ["use_as_torch_compile", "torch_compile", "compiler_disable", "compiler_set_stance", "compiler_reset",
           "compiler_allow_in_graph", "compiler_substitute_in_graph", "compiler_assume_constant_result",
           "install_from_environment", "is_enabled", "ENV_VAR"]
