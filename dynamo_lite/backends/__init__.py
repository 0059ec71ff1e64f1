"""Backends: ``backend(gm, example_inputs) -> callable``, the torch.compile contract.

Registry of named backends ("eager", "aot_eager", "aot_eager_decomp_partition", "inductor") plus any user
callable.  Third-party packages can add names through the
``dynamo_lite.backends`` entry-point group.

    lookup_backend(name_or_callable)
      -> registered name      -> the registered function
      -> entry point name     -> loaded once, then registered
      -> callable             -> used as it is
Tested by tests/torch/test_backends.py.
"""
from __future__ import annotations

import difflib
import typing
from typing import Any, Callable, Optional, Protocol, Sequence, TypeVar, Union, overload

import torch
import torch._guards


class CompilerFn(Protocol):
    """The backend protocol (torch.compile's): called once per captured graph with the
    ``torch.fx.GraphModule`` and its example inputs (tensors, or ints/SymInts for sizes);
    returns the callable that runs the graph, taking the inputs positionally and returning
    a tuple or list with one value per graph output."""

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any], /) -> Callable[..., Any]: ...


_BACKENDS: dict[str, CompilerFn] = {}
_B = TypeVar("_B", bound=CompilerFn)


@overload
def register_backend(name: _B, fn: None = None, *, compiler_fn: None = None) -> _B: ...
@overload
def register_backend(name: Optional[str], fn: _B, *, compiler_fn: None = None) -> _B: ...
@overload
def register_backend(name: Optional[str] = None, fn: None = None, *, compiler_fn: _B) -> _B: ...
@overload
def register_backend(name: Optional[str] = None, fn: None = None, *, compiler_fn: None = None) -> Callable[[_B], _B]: ...


def register_backend(name: Any = None, fn: Optional[CompilerFn] = None, *,
                     compiler_fn: Optional[CompilerFn] = None) -> Any:
    """Register a backend by name; every form returns the function (or a decorator):

        register_backend("name", fn)        @register_backend("name")
        @register_backend                   (torch's form: the function's own name)
        register_backend(compiler_fn=fn, name="name")
    """
    if callable(name) and not isinstance(name, str):  # @register_backend / register_backend(fn)
        name, fn = None, name
    fn = fn if fn is not None else compiler_fn

    def deco(f: CompilerFn) -> CompilerFn:
        key = name if name is not None else getattr(f, "__name__", type(f).__name__)
        if key in _BACKENDS:
            raise ValueError(f"backend {key!r} is already registered")
        _BACKENDS[key] = f
        return f
    return deco(fn) if fn is not None else deco


def list_backends() -> list[str]:
    _load_entry_points()
    return sorted(_BACKENDS)


def _load_entry_points() -> None:
    from importlib.metadata import entry_points

    for ep in entry_points(group="dynamo_lite.backends"):
        if ep.name not in _BACKENDS:
            try:
                _BACKENDS[ep.name] = ep.load()
            except Exception:  # noqa: BLE001 - a broken plugin must not break us
                continue


def registered_backend_name(fn: object) -> Optional[str]:
    """The name ``fn`` is registered under, or None."""
    return next((name for name, f in _BACKENDS.items() if f is fn), None)


def lookup_backend(backend: Union[str, CompilerFn]) -> tuple[CompilerFn, str]:
    """(backend function, display name)."""
    if isinstance(backend, str):
        if backend not in _BACKENDS:
            _load_entry_points()
        if backend not in _BACKENDS:
            raise ValueError(f"unknown dynamo_lite backend {backend!r}; known: {', '.join(sorted(_BACKENDS))}")
        return _BACKENDS[backend], backend
    if not callable(backend):
        raise TypeError(f"backend must be a name or a callable (gm, example_inputs) -> callable, got {backend!r}")
    name = getattr(backend, "__name__", None) or type(backend).__name__
    return backend, name


@register_backend("eager")
def eager(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
    """Run the captured graph as it is (no compilation): for testing capture."""
    return gm.forward


@register_backend("aot_eager")
def aot_eager(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
    """Trace forward and backward with AOTAutograd, run them without compiling."""
    from functorch.compile import make_boxed_func  # type: ignore[import-untyped]
    from torch._functorch.aot_autograd import aot_module_simplified

    def run(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Any:  # (AOTAutograd's names)
        return make_boxed_func(gm.forward)

    return aot_module_simplified(gm, example_inputs, fw_compiler=run, bw_compiler=run)


@register_backend("aot_eager_decomp_partition")
def aot_eager_decomp_partition(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
    """``aot_eager`` with inductor's decompositions and its min-cut partition of forward and
    backward, the graphs run without compiling: what inductor would be given, for debugging a
    difference between ``aot_eager`` and ``inductor`` (the name torch.compile uses for it)."""
    import functools

    from functorch.compile import make_boxed_func
    from torch._functorch.aot_autograd import aot_module_simplified
    from torch._functorch.partitioners import min_cut_rematerialization_partition
    from torch._inductor.compile_fx import select_decomp_table

    def run(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Any:
        return make_boxed_func(gm.forward)

    return aot_module_simplified(gm, example_inputs, fw_compiler=run, bw_compiler=run,
                                 decompositions=select_decomp_table(),
                                 partition_fn=functools.partial(min_cut_rematerialization_partition,
                                                                compiler="inductor"))


# gm.meta key: (the trace's FakeTensorMode, the graph's fake example inputs), set by
# OutputGraph.compile for the duration of the backend call
TRACE_FAKES = "dynamo_lite_trace_fakes"


def _compile_fx(gm: torch.fx.GraphModule, example_inputs: list[Any], patches: dict[str, Any]) -> Any:
    """compile_fx as torch.compile calls it: on the trace's fake inputs, inside a tracing context
    holding the trace's FakeTensorMode (and ShapeEnv), which inductor's FX graph cache and
    AOTAutograd's cache need (without it both are bypassed: "No shape env", and every new
    process compiles again).  A graph the trace did not make (a DDP bucket's piece) is compiled
    on its real inputs."""
    from torch._inductor.compile_fx import compile_fx

    fakes = gm.meta.get(TRACE_FAKES)
    if fakes is None or len(fakes[1]) != len(example_inputs):
        return compile_fx(gm, example_inputs, config_patches=dict(patches))
    fake_mode, fake_inputs = fakes
    with torch._guards.tracing(torch._guards.TracingContext(fake_mode)):
        return compile_fx(gm, list(fake_inputs), config_patches=dict(patches))


@register_backend("inductor")
def inductor(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
    """torch._inductor's compile_fx: generated C++/OpenMP kernels on CPU."""
    compiled: Any = _compile_fx(gm, example_inputs, {})  # (its declared result covers AOT modes too)
    return compiled


def inductor_config_patches(mode: Optional[str], options: Optional[dict[str, Any]]) -> dict[str, Any]:
    """inductor's config patches for torch.compile's ``mode=`` / ``options=``, checked as
    torch.compile checks them: a known mode, known option names (``-`` read as ``_``), values
    of the option's type, and not both at once."""
    if mode is not None and options is not None:
        raise RuntimeError("Either mode or options can be specified, but both can't be specified at the same time.")
    from torch._inductor import config as inductor_config
    from torch._inductor import list_mode_options

    given = dict(list_mode_options(mode) if mode not in (None, "default") else options or {})
    current = inductor_config.get_config_copy()
    patches = {}
    for key, value in given.items():
        name = key.replace("-", "_")
        if name not in current:
            close = difflib.get_close_matches(name, current, n=3)
            raise RuntimeError(f"Unexpected optimization option {key!r} for inductor"
                               + (f" (did you mean {', '.join(map(repr, close))}?)" if close else "")
                               + "; the options are the names in torch._inductor.config")
        expected = inductor_config.get_type(name)  # type: ignore[attr-defined]
        if typing.get_origin(expected) is None and isinstance(expected, type) and not isinstance(value, expected):
            raise RuntimeError(f"Unexpected type of option {key!r}: got {type(value).__name__}, "
                               f"inductor expects {type(current[name]).__name__}")
        patches[name] = value
    return patches


def inductor_with(patches: dict[str, Any]) -> CompilerFn:
    """The inductor backend with these config patches (compile(..., mode=, options=))."""
    def inductor(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        compiled: Any = _compile_fx(gm, example_inputs, patches)
        return compiled

    return inductor
