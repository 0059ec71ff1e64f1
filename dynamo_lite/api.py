"""The public API: compile(), optimize(), disable(), reset(), explain().

    compile(fn_or_module, backend=..., fullgraph=..., dynamic=...)
      function -> a wrapper that runs fn with a FrameConverter as the hook callback
      module   -> an OptimizedModule: the same module (shared state) whose calls are captured
    optimize(backend) -> context manager / decorator capturing every frame started inside
    disable(fn)       -> fn runs with the hook off (and nothing it calls is captured)
    reset()           -> forget every compiled entry
    mark_dynamic(t, dim, min=, max=) / maybe_mark_dynamic(t, dim) / mark_static(t, dim)
                      -> which dimensions are symbolic (shapes.py)
Tested by tests/api/test_api.py and tests/torch/test_dynamic_shapes.py.
"""
from __future__ import annotations

import functools
import os
import types
import inspect
import weakref
from typing import Any, Callable, Optional, ParamSpec, TypeVar, Union, overload

import torch
from torch.nn.modules import module as _nn_module

from . import _C, cache, config, persistent_cache, shapes
from . import stance as _stance
from .backends import CompilerFn, inductor_config_patches, inductor_with, lookup_backend, registered_backend_name
from .convert_frame import FrameConverter
from .eval_frame import enable
from .report import events
from .report.explain import ExplainOutput, build_explain_output
from . import static as _static
from .variables import escape_hatches as _escape_hatches
from .variables import repeated_blocks as _repeated_blocks

_MODULE_CALL = torch.nn.Module.__call__  # nn.Module's own __call__ (_wrapped_call_impl)

# what the public functions accept and return (checked by mypy: tests/unit/test_typing.py)
Backend = Union[str, CompilerFn]  # a registered name, or a backend callable
_F = TypeVar("_F", bound=Callable[..., Any])
_M = TypeVar("_M", bound=torch.nn.Module)
_P = ParamSpec("_P")


# One converter per (backend, fullgraph, dynamic): compiled entries belong to a converter,
# so two compile() calls with the same configuration share them and a different
# configuration compiles its own (kept alive by the wrappers and entries using it).
_CONVERTERS: "weakref.WeakValueDictionary" = weakref.WeakValueDictionary()


def _make_converter(backend: Optional[Backend], fullgraph: bool, dynamic: Optional[bool],
                    mode: Optional[str] = None, options: Optional[dict[str, Any]] = None) -> FrameConverter:
    fn, name = lookup_backend(backend if backend is not None else config.default_backend)
    patches: dict[str, Any] = {}
    if mode is not None or options is not None:
        if name != "inductor":
            raise RuntimeError(f"mode= and options= configure inductor: backend={name!r} takes neither")
        patches = inductor_config_patches(mode, options)
    key = (id(fn), name, bool(fullgraph), dynamic, tuple(sorted(patches.items(), key=lambda kv: kv[0])))
    converter = _CONVERTERS.get(key)
    if converter is None or converter.base_backend is not fn:
        converter = _CONVERTERS[key] = FrameConverter(inductor_with(patches) if patches else fn, name,
                                                      fullgraph=fullgraph, dynamic=dynamic)
        converter.base_backend, converter.inductor_patches = fn, patches
    return converter


class OptimizedModule(torch.nn.Module):
    """Mixin of the class returned by compile(module): calls go through the hook.

    The instance shares ``__dict__`` with the original module, so parameters,
    buffers, submodules, state_dict keys, train()/eval() and attribute access
    are the original's.  ``_orig_mod`` is the original module.
    """

    # recognised by variables/nn_module.py, which does not import this module
    _dynamo_lite_optimized_module = True

    _dl_converter: FrameConverter
    # True when the class's next __call__ is nn.Module's own (set by _compile_module).
    _dl_plain_call: bool = False
    # nn.Module.__call__ in a frame of this class's own (set by _compile_module): calls with hooks
    _dl_call_with_hooks: Callable

    def __call__(self, *args, **kwargs):
        prev = _C.set_callback(self._dl_converter)
        try:
            if (self._dl_plain_call and torch.nn.Module.__call__ is _MODULE_CALL
                    and self._compiled_call_impl is None
                    and not (self._backward_hooks or self._backward_pre_hooks or self._forward_hooks
                             or self._forward_pre_hooks or _nn_module._global_backward_pre_hooks
                             or _nn_module._global_backward_hooks or _nn_module._global_forward_hooks
                             or _nn_module._global_forward_pre_hooks)
                    and not torch._C._get_tracing_state()):
                # nn.Module._call_impl's own no-hook fast path, minus its two Python frames
                # (forward runs on the original module: its ``self`` is of the user's class)
                return self.__dict__["_dl_orig_mod"].forward(*args, **kwargs)
            if self._dl_plain_call and torch.nn.Module.__call__ is _MODULE_CALL:
                # hooks: one frame of this compiled module's own (_call_with_hooks) runs
                # nn.Module.__call__, so its hooks and forward are captured together
                return type(self)._dl_call_with_hooks(self.__dict__["_dl_orig_mod"], *args, **kwargs)
            return self.__dict__["_dl_orig_mod"](*args, **kwargs)
        finally:
            _C.set_callback(prev)

    @property
    def _orig_mod(self):
        return self.__dict__["_dl_orig_mod"]

    def __reduce_ex__(self, protocol):
        # pickled as "compile(<the module>, <same backend and options>)": a registered backend
        # by name, any other backend as itself (it must be picklable, like a module-level function)
        converter = self._dl_converter
        backend = registered_backend_name(converter.base_backend) or converter.base_backend
        return _recompile, (self._orig_mod, backend, converter.fullgraph, converter.dynamic,
                            converter.inductor_patches or None)


_CALL_WITH_HOOKS_FILE = "<compiled module call>"


def _call_with_hooks(self: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
    return _MODULE_CALL(self, *args, **kwargs)


def _own_call_with_hooks(cls_name: str) -> Callable[..., Any]:
    """A copy of _call_with_hooks with a code object of its own: each compiled module class
    keeps its own cache entries (per code object) for its calls with hooks.  Its file name is
    not dynamo_lite's (whose frames are never captured)."""
    code = _call_with_hooks.__code__
    code = code.replace(co_name="__call__", co_qualname=f"{cls_name}.__call__",
                        co_filename=_CALL_WITH_HOOKS_FILE)
    return types.FunctionType(code, _call_with_hooks.__globals__, "__call__")


def _recompile(module, backend, fullgraph, dynamic, inductor_patches=None):
    """Unpickling a compiled module (OptimizedModule.__reduce_ex__)."""
    return compile(module, backend=backend, fullgraph=fullgraph, dynamic=dynamic, options=inductor_patches)


_OWN_STORAGE_KEY = 0


def _compile_module(module: torch.nn.Module, converter: FrameConverter) -> torch.nn.Module:
    if isinstance(module, OptimizedModule):
        module = module._orig_mod
    cls = type(module)
    opt_cls: Any = type(f"Optimized{cls.__name__}", (OptimizedModule, cls), {"_dl_converter": converter,
                                                                       "__module__": cls.__module__})
    opt_cls._dl_plain_call = cls.__call__ is _MODULE_CALL
    opt_cls._dl_call_with_hooks = _own_call_with_hooks(opt_cls.__name__)
    return _sharing_state(opt_cls, module)


def _sharing_state(new_cls: type, module: torch.nn.Module) -> torch.nn.Module:
    """An instance of ``new_cls`` (a subclass of the module's class) whose ``__dict__`` is the
    module's own: parameters, buffers, submodules, hooks and attributes are the original's."""
    new: torch.nn.Module = object.__new__(new_cls)
    shared: dict = module.__dict__
    # CPython 3.13 may keep an instance's attributes inside the instance ("inline values") with
    # its __dict__ only a view of them, which the garbage collector reaches through the instance
    # alone: a module referenced only by the wrapper (unpickled, deep-copied) would be collected
    # under it.  A key that is not a str makes the dict keep its own items (any Python).
    shared[_OWN_STORAGE_KEY] = None
    del shared[_OWN_STORAGE_KEY]
    object.__setattr__(new, "__dict__", shared)
    # __dict__ is shared, so this one key is visible on the original too; it is
    # the only trace compile() leaves on the module.
    module.__dict__["_dl_orig_mod"] = module
    return new


@overload
def compile(model: _M, *, backend: Optional[Backend] = None, fullgraph: bool = False,
            dynamic: Optional[bool] = None, mode: Optional[str] = None, options: Optional[dict[str, Any]] = None,
            disable: bool = False) -> _M: ...
@overload
def compile(model: _F, *, backend: Optional[Backend] = None, fullgraph: bool = False,
            dynamic: Optional[bool] = None, mode: Optional[str] = None, options: Optional[dict[str, Any]] = None,
            disable: bool = False) -> _F: ...
@overload
def compile(model: None = None, *, backend: Optional[Backend] = None, fullgraph: bool = False,
            dynamic: Optional[bool] = None, mode: Optional[str] = None, options: Optional[dict[str, Any]] = None,
            disable: bool = False) -> Callable[[_F], _F]: ...


def compile(model: Any = None, *, backend: Optional[Backend] = None, fullgraph: bool = False,
            dynamic: Optional[bool] = None, mode: Optional[str] = None, options: Optional[dict[str, Any]] = None,
            disable: bool = False) -> Any:
    """Capture ``model``'s tensor work into graphs compiled by ``backend``.

    Returns a callable with the same behaviour (or a module sharing the
    original's state).  With ``fullgraph=True`` any graph break raises
    ``dynamo_lite.Unsupported`` instead of falling back.  ``dynamic``: None
    (automatic: sizes and int arguments that change between compiles become
    symbolic), True (symbolic from the first compile) or False (never); see
    shapes.py and docs/recompiles.md.  ``disable=True`` returns ``model`` itself (a
    decorator that does), as torch.compile does.
    """
    if disable:
        return model if model is not None else (lambda m: m)
    if model is None:
        _make_converter(backend, fullgraph, dynamic, mode, options)  # (bad arguments fail here, not at use)
        return lambda m: compile(m, backend=backend, fullgraph=fullgraph, dynamic=dynamic, mode=mode,
                                 options=options)
    converter = _make_converter(backend, fullgraph, dynamic, mode, options)
    if isinstance(model, torch.nn.Module):
        return _compile_module(model, converter)
    if not callable(model):
        raise TypeError(f"dynamo_lite.compile() expects a function or an nn.Module, got {type(model).__name__}")
    if getattr(model, "_dl_compiled", False):
        model = model.__wrapped__
    if inspect.iscoroutinefunction(model) or inspect.isgeneratorfunction(model) or \
            inspect.isasyncgenfunction(model):
        return model  # generator and coroutine frames are never captured: behaviour is eager's
    if isinstance(model, type):
        return model

    _mark_target(model)
    # a C-level wrapper: it sets the callback around the call and adds no Python frame
    # (warnings' stacklevel, tracebacks and sys._getframe() see the caller directly)
    compiled: Any = functools.update_wrapper(_C.CallWithCallback(model, converter), model)
    compiled._dl_compiled = True
    compiled._dl_converter = converter
    return compiled


def _code_of(fn: Any) -> Optional[types.CodeType]:
    """The code of the first frame a call of ``fn`` runs, found statically (a function, a bound
    method, a functools.partial of one, an object with a Python ``__call__``), or None."""
    for _ in range(8):
        if isinstance(fn, types.FunctionType):
            return fn.__code__
        if isinstance(fn, types.MethodType):
            fn = fn.__func__
        elif isinstance(fn, functools.partial):
            fn = fn.func
        else:
            call = inspect.getattr_static(type(fn), "__call__", None)
            return call.__code__ if isinstance(call, types.FunctionType) else None
    return None


def _mark_target(fn: Any) -> None:
    """``fn`` is what the user compiled: convert_frame looks inside its arguments for tensors."""
    code = _code_of(fn)
    if code is not None:
        cache.mark_compile_target(code)


class optimize(enable):
    """Capture every frame that starts inside the block (or the decorated function)."""

    def __init__(self, backend: Optional[Backend] = None, *, fullgraph: bool = False,
                 dynamic: Optional[bool] = None) -> None:
        super().__init__(_make_converter(backend, fullgraph, dynamic))

    def __call__(self, fn):
        """As a decorator; a module decorated is the module ``compile`` makes (its methods and
        attributes stay reachable, as TorchDynamo's optimize keeps them for a module)."""
        if isinstance(fn, torch.nn.Module):
            return _compile_module(fn, self.callback)
        _mark_target(fn)
        return super().__call__(fn)


@overload
def disable(fn: _F, *, recursive: bool = True) -> _F: ...
@overload
def disable(fn: None = None, *, recursive: bool = True) -> Any: ...


def disable(fn: Optional[Callable[..., Any]] = None, *, recursive: bool = True) -> Any:
    """Run ``fn`` (and everything it calls) without capture.  Also a context manager.

    ``recursive=False`` (as torch.compiler.disable's): only ``fn``'s own frame is never
    captured, and the functions it calls are captured as usual; ``fn`` itself is returned,
    marked (a plain Python function is required)."""
    if fn is None:
        if not recursive:  # @disable(recursive=False)
            return lambda f: disable(f, recursive=False)
        return enable(None)
    if not recursive:
        if not isinstance(fn, types.FunctionType):
            raise TypeError(f"disable(recursive=False) takes a Python function, not {type(fn).__name__}")
        fn.__dict__["_dynamo_lite_disabled"] = "frame"  # convert_frame runs its frames as they are; traced callers break
        return fn
    if getattr(fn, "_dl_compiled", False):
        fn = getattr(fn, "__wrapped__")  # disable(compile(f)) is f, run without capture
    elif isinstance(fn, OptimizedModule):
        fn = fn._orig_mod
    if isinstance(fn, torch.nn.Module):
        return _disable_module(fn)
    wrapped = _C.CallWithHookOff(fn)
    functools.update_wrapper(wrapped, fn)
    wrapped._dynamo_lite_disabled = True  # the user's choice: compiled callers say so (variables/torch_vars.py)
    return wrapped


class DisabledModule(torch.nn.Module):
    """Mixin of the class returned by disable(module): a module (it can replace a submodule,
    its parameters are the original's) whose calls run the original module without capture."""

    # recognised by variables/nn_module.py (a compiled caller breaks the graph at its call)
    _dynamo_lite_disabled_module = True
    _dl_call_off: Callable  # _C.CallWithHookOff(the original module)

    def __call__(self, *args, **kwargs):
        return type(self).__dict__["_dl_call_off"](*args, **kwargs)

    @property
    def _orig_mod(self):
        return self.__dict__["_dl_orig_mod"]


def _disable_module(module: torch.nn.Module) -> torch.nn.Module:
    """A module sharing ``module``'s state (as compile(module) makes one) whose call is the
    original module's, run with capture off (torch.compiler.disable(module) returns a module too)."""
    if isinstance(module, DisabledModule):
        return module
    cls = type(module)
    call_off = _C.CallWithHookOff(module)
    call_off._dynamo_lite_disabled = True
    dis_cls: Any = type(f"Disabled{cls.__name__}", (DisabledModule, cls), {"_dl_call_off": call_off,
                                                                         "__module__": cls.__module__})
    return _sharing_state(dis_cls, module)


class set_stance:
    """Set the compiler's stance (dynamo_lite/stance.py), as ``torch.compiler.set_stance``:

    - as a function, ``set_stance("force_eager")`` sets it until it is set again;
    - as a context manager, ``with set_stance("fail_on_recompile"):`` sets it for the block;
    - as a decorator, ``@set_stance("eager_on_recompile")`` sets it while the function runs.

    Stances: "default"; "force_eager" (no compile, no compiled code: everything runs eagerly);
    "eager_on_recompile" (compiled code runs when its guards pass; anything else runs eagerly,
    without compiling); "fail_on_recompile" (compiled code runs when its guards pass; a call that
    would compile raises ``RecompileError`` naming the function, its line and the guards that
    failed).  The stance is process-wide.
    """

    def __init__(self, stance: str = "default") -> None:
        self.stance = stance
        self.prev = _stance.set_current(stance)

    def __call__(self, fn: _F) -> _F:
        _stance.set_current(self.prev)  # a decorator: the stance applies while fn runs

        @functools.wraps(fn)
        def with_stance(*args: Any, **kwargs: Any) -> Any:
            with set_stance(self.stance):
                return fn(*args, **kwargs)

        return with_stance  # type: ignore[return-value]

    def __enter__(self) -> "set_stance":
        _stance.set_current(self.stance)
        return self

    def __exit__(self, *exc: object) -> None:
        _stance.set_current(self.prev)  # the stance before this object was made


def reset() -> None:
    """Forget every compiled entry (the next call of each function compiles again, or loads an
    entry another process stored in the persistent cache, or one of a package ``load`` read)."""
    cache.reset()
    persistent_cache.clear()


def save(compiled: Any, path: Union[str, "os.PathLike[str]"]) -> dict:
    """Write the frames ``compiled`` captured in this process (what ``compile`` returned, called
    at least once) to the file ``path``: a package another process makes usable with ``load`` and
    then runs without tracing (same Python, torch and dynamo_lite versions; docs/warm-start.md).
    The package holds every frame stored in this process under ``compiled``'s configuration
    (backend, fullgraph, dynamic; functions compiled with the same one share it), and, for
    ``backend="inductor"``, inductor's cache artifacts of this process.  Returns a summary
    (``entries``, ``inductor_artifacts``, ``path``); raises ValueError when there is nothing to
    save (naming why frames were not stored)."""
    converter = getattr(type(compiled), "_dl_converter", None) if isinstance(compiled, torch.nn.Module) \
        else getattr(compiled, "_dl_converter", None)
    if not isinstance(converter, FrameConverter):
        raise TypeError(f"dynamo_lite.save() expects what dynamo_lite.compile() returned, got {type(compiled).__name__}")
    return persistent_cache.save_package(converter, os.fspath(path))


def load(path: Union[str, "os.PathLike[str]"]) -> dict:
    """Read a package ``save`` wrote: the frames it holds run from it, without a trace, on their
    first call under ``compile`` with the same configuration (when their guards pass; otherwise
    they are traced as usual).  Works with ``config.persistent_cache`` off.  Returns a summary
    (``entries``, ``inductor_artifacts``, ``backend``); raises ValueError for a file that is not
    a package or was written by other versions (naming which)."""
    return persistent_cache.load_package(os.fspath(path))


def mark_dynamic(t: torch.Tensor, index: Union[int, list[int], tuple[int, ...]], *, min: Optional[int] = None, max: Optional[int] = None) -> None:
    """Dimension ``index`` (an int or a list) of ``t`` is symbolic from the first compile,
    sizes 0 and 1 included, within ``[min, max]`` when given; code that forces it to one value
    raises ``Unsupported`` (DL0031) naming the line."""
    shapes.set_mark(t, index, ("dynamic", min, max))


def maybe_mark_dynamic(t: torch.Tensor, index: Union[int, list[int], tuple[int, ...]]) -> None:
    """Dimension ``index`` of ``t`` is symbolic from the first compile, but may be specialised
    by the code (no error; sizes 0 and 1 stay specialised)."""
    shapes.set_mark(t, index, ("maybe",))


def mark_static(t: Union[torch.Tensor, torch.nn.Module, type],
                index: Union[int, list[int], tuple[int, ...], None] = None) -> None:
    """Dimension ``index`` of ``t`` never becomes symbolic (not even with ``dynamic=True``); on a
    module or class, no input of its methods' frames does."""
    if isinstance(t, (torch.nn.Module, type)):
        shapes.set_mark(t, None, ("static",))
        return
    shapes.set_mark(t, range(t.dim()) if index is None else index, ("static",))



# ---- escape hatches: calls the trace treats specially (variables/escape_hatches.py) ----------------
_R = TypeVar("_R")
# what substitute_in_graph accepts as the original and the polyfill (as torch's): functions
_FUNCTION_TYPES = (types.FunctionType, types.BuiltinFunctionType, types.MethodDescriptorType,
                   types.WrapperDescriptorType)


@overload
def allow_in_graph(fn: _F) -> _F: ...
@overload
def allow_in_graph(fn: Union[list[Callable[..., Any]], tuple[Callable[..., Any], ...]]) -> list[Callable[..., Any]]: ...


def allow_in_graph(fn: Any) -> Any:
    """Put every call of ``fn`` from compiled code in the graph as ONE node whose target is ``fn``
    (as ``torch.compiler.allow_in_graph``): its code is not traced; its example output comes from
    running it on fake tensors at trace time, and the graph calls it on the real tensors.

    Arguments and results must be tensors, constants (results: None) and lists/tuples/dicts of
    them, and ``fn`` must work on FakeTensors; otherwise the graph breaks at the call (DL0068,
    naming ``fn``) and Python calls it.  ``fn`` should have no side effects besides its result and
    in-place changes of its tensor arguments (its body runs once more per trace, on fakes).
    Returns ``fn`` itself (a list for a list or tuple of functions); torch's own functions are
    already graph nodes and are returned unmarked."""
    if isinstance(fn, (list, tuple)):
        return [allow_in_graph(f) for f in fn]
    if not callable(fn):
        raise TypeError(f"allow_in_graph expects a callable, got {type(fn).__name__}")
    if not _static.defined_in_torch(fn):
        _escape_hatches.add_mark(fn, _escape_hatches.Mark(_escape_hatches.ALLOW_IN_GRAPH, fn))
    return fn


def nonstrict_trace(traceable_fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """Return a function calling ``traceable_fn`` whose calls from compiled code are ONE graph node
    (as ``torch._dynamo.nonstrict_trace``; a decorator, used without parentheses).

    Like ``allow_in_graph``, but the arguments are pytrees: besides tensors, constants and
    lists/tuples/dicts, instances of classes registered with ``torch.utils._pytree``
    (``register_dataclass``, ``register_pytree_node``: their flatten function is traced;
    ``register_constant``: the object itself, guarded by identity) are flattened, and the node
    takes the flat leaves and rebuilds the arguments before calling ``traceable_fn``.  Tensors it
    reads from globals are constants of the fake run.  Results may also hold numbers and strings
    (taken from the fake run).  What cannot be flattened breaks the graph (DL0068)."""
    if not callable(traceable_fn):
        raise TypeError(f"nonstrict_trace expects a callable, got {type(traceable_fn).__name__}")

    @functools.wraps(traceable_fn)
    def wrapped(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        return traceable_fn(*args, **kwargs)

    _escape_hatches.add_mark(wrapped, _escape_hatches.Mark(_escape_hatches.NONSTRICT_TRACE, traceable_fn))
    return wrapped


def _signature_key(sig: inspect.Signature) -> tuple:
    """What substitute_in_graph compares of two signatures: the names of the parameters that are
    neither keyword-only nor ``*args``/``**kwargs``, in order; the keyword-only names; the
    defaults (annotations and the names of ``*args``/``**kwargs`` do not matter)."""
    params = list(sig.parameters.values())
    variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    return (tuple(p.name for p in params if p.kind not in variadic and p.kind is not inspect.Parameter.KEYWORD_ONLY),
            frozenset(p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY),
            tuple((p.name, p.default) for p in params if p.kind not in variadic))


_WILDCARD_SIGNATURE = _signature_key(inspect.signature(lambda *args, **kwargs: None))


def substitute_in_graph(original_fn: Callable[_P, _R], *, can_constant_fold_through: bool = False,
                        skip_signature_check: bool = False) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
    """``@substitute_in_graph(original_fn)`` on a Python ``polyfill``: compiled code calling
    ``original_fn`` (usually a C function the trace cannot see into) traces ``polyfill`` in its
    place, as ``torch.compiler.substitute_in_graph``.  Eager calls still run ``original_fn``.

    Returns a function that calls ``original_fn`` (named like the polyfill); calling it from
    compiled code inlines the polyfill too.  ``can_constant_fold_through=True``: a call whose
    arguments are all constants calls ``original_fn`` at trace time and puts its result in as a
    constant.  The signatures must match (parameter names, keyword-only names, defaults; either
    may be ``(*args, **kwargs)``) unless ``skip_signature_check=True`` or ``original_fn`` has no
    signature Python can read.  TypeError: not functions, or the signatures differ; ValueError:
    ``original_fn`` already has a polyfill (or another mark).  A graph break inside the polyfill
    names it and ``original_fn``; Python then calls ``original_fn``."""
    if not isinstance(original_fn, _FUNCTION_TYPES):
        raise TypeError(f"substitute_in_graph expects a function but got {type(original_fn)!r}")

    def register(polyfill: Callable[_P, _R]) -> Callable[_P, _R]:
        if not isinstance(polyfill, types.FunctionType):
            raise TypeError(f"@substitute_in_graph(...) expects a Python function but got {type(polyfill)!r}")
        if not skip_signature_check:
            try:
                original_sig = inspect.signature(original_fn)
            except (TypeError, ValueError):  # a C function without a text signature: nothing to compare
                original_sig = None
            if original_sig is not None:
                keys = {_signature_key(original_sig), _signature_key(inspect.signature(polyfill))}
                if len(keys) > 1 and _WILDCARD_SIGNATURE not in keys:
                    raise TypeError(f"Signature mismatch between {original_fn} and {polyfill}: "
                                    f"{original_sig} != {inspect.signature(polyfill)}")
        current = _escape_hatches.mark_of(original_fn)
        if current is not None:
            raise ValueError(f"Duplicate polyfill for {original_fn}: already marked {current.kind}"
                             + (f" (by {current.polyfill})" if current.polyfill is not None else ""))

        @functools.wraps(polyfill)
        def wrapped(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            return original_fn(*args, **kwargs)

        mark = _escape_hatches.Mark(_escape_hatches.SUBSTITUTE_IN_GRAPH, original_fn, polyfill,
                                    can_constant_fold_through)
        _escape_hatches.add_mark(original_fn, mark)
        _escape_hatches.add_mark(wrapped, mark)
        wrapped.__dynamo_lite_original__ = original_fn  # type: ignore[attr-defined]
        wrapped.__dynamo_lite_polyfill__ = polyfill  # type: ignore[attr-defined]
        wrapped.__dynamo_lite_can_constant_fold_through__ = can_constant_fold_through  # type: ignore[attr-defined]
        return wrapped

    return register


def assume_constant_result(fn: _F) -> _F:
    """Compiled code calling ``fn`` calls it once per trace, for real, with its (constant)
    arguments, and uses the result as a constant (as ``torch._dynamo.assume_constant_result``):
    nothing is guarded on it, so a later change of what ``fn`` would return is not seen until the
    code is compiled again.  Arguments that are not constants known at trace time, a call that
    raises or a result that is not a number, string, None or a container of them break the graph
    (DL0069) and Python calls ``fn``.  Returns ``fn`` itself, marked."""
    if not callable(fn):
        raise TypeError(f"assume_constant_result expects a callable, got {type(fn).__name__}")
    _escape_hatches.add_mark(fn, _escape_hatches.Mark(_escape_hatches.ASSUME_CONSTANT_RESULT, fn))
    return fn

def nested_compile_region(fn: Optional[_F] = None) -> Any:
    """Mark a module's ``forward`` (``@nested_compile_region`` on it, or
    ``Block.forward = nested_compile_region(Block.forward)``) as a block repeated in a model: its
    first call in a trace is traced once as a template, and later calls of blocks of that class
    with arguments of the same structure reuse it (as ``torch.compiler.nested_compile_region``,
    which is honoured too).  ``config.repeated_blocks`` ("auto", the default) already does this
    for every module with submodules; the mark matters under ``"marked"``.  Eager calls are
    untouched: returns ``fn`` itself, marked (variables/repeated_blocks.py)."""
    def mark(f: _F) -> _F:
        if not callable(f):
            raise TypeError(f"nested_compile_region expects a function, got {type(f).__name__}")
        setattr(f, _repeated_blocks.MARK, True)
        return f

    return mark if fn is None else mark(fn)


__all__ = ["compile", "optimize", "disable", "reset", "set_stance", "OptimizedModule", "mark_dynamic", "maybe_mark_dynamic",
           "mark_static", "allow_in_graph", "nonstrict_trace", "substitute_in_graph", "assume_constant_result",
           "nested_compile_region"]


@overload
def explain(fn: Callable[_P, Any], *, backend: Backend = "eager") -> Callable[_P, ExplainOutput]: ...
@overload
def explain(fn: Callable[..., Any], *extra_args: Any, backend: Backend = "eager",
            **extra_kwargs: Any) -> ExplainOutput: ...


def explain(fn: Callable[..., Any], *extra_args: Any, backend: Backend = "eager", **extra_kwargs: Any) -> Any:
    """``explain(fn)(*args, **kwargs) -> ExplainOutput``: forget compiled code (``reset()``),
    compile ``fn`` once with ``backend`` and call it, recording every graph, break, guard and
    recompile (report/explain.py renders what was recorded)."""
    if extra_args or extra_kwargs:  # explain(fn, *args): the older one-call form
        return explain(fn, backend=backend)(*extra_args, **extra_kwargs)

    def run(*args: Any, **kwargs: Any) -> ExplainOutput:
        recorded: list = []
        reset()
        compiled = compile(fn, backend=backend)
        # (a frame another process stored is loaded, and reported as its trace was, marked loaded)
        with events.collecting(recorded.append):
            out = compiled(*args, **kwargs)
        return build_explain_output(recorded, out)

    return run
