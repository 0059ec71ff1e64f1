"""Callables: user functions (inlined), nested functions made in the trace,
bound methods of user functions, functools.partial (bound methods of tensors,
containers and constants are in methods.py).

Calling a user function inlines it: a child translator runs its bytecode over
the same output graph (symbolic/inliner.py).  A function from a file we do not
trace (the standard library, torch internals) is not inlined: the call breaks
the graph so Python runs it, except: functions with a handler in
PYTHON_FUNCTION_HANDLERS (filled by builtin.py), and functions decorated by
``@torch.no_grad()`` / ``enable_grad()`` / ``set_grad_enabled(b)`` (torch's
wrapper is recognised and the wrapped function is inlined inside that mode).
Tested by tests/semantics/test_functions.py and tests/torch/test_grad_mode.py.
"""
from __future__ import annotations

import contextlib
import functools
import types
from typing import Any, Callable, Optional

from .. import graph_breaks as gb
from .. import guards, torch_compat
from ..exc import GraphBreak
from .base import IdentityKey, VariableTracker
from .constant import ConstantVariable
from ..skipfiles import skip_reason
from ..source import AttrSource, ItemSource
from .mappings import DictVariable
from .sequences import TupleVariable
from .contexts import ContextManagerFunctionVariable, GlobalModeContextVariable, GlobalModeDecoratedVariable, \
    GradModeDecoratedVariable, GradModeVariable, inference_mode_context, \
    make_generator_context


# Python-level functions (standard library, nn.Module dunders) answered without
# inlining them: function object -> handler(tx, args, kwargs), which returns a
# tracker or None (None: inline the function as usual).  Filled at import time
# by builtin.py, which owns the handlers and their argument checking.
PYTHON_FUNCTION_HANDLERS: dict[Any, Callable[[Any, list, dict], Optional[VariableTracker]]] = {}
# For callables made at run time that no dict can list in advance (a library's lru_cache'd
# method): fn -> its handler or None; filled at import time (replayed.py).
PYTHON_FUNCTION_MATCHERS: list[Callable[[Any], Optional[Callable]]] = []


def _graph_break_called(name: str):
    def handler(tx, args, kwargs):
        raise GraphBreak(gb.GRAPH_BREAK_CALLED, f"{name}() called")
    return handler


PYTHON_FUNCTION_HANDLERS[gb.graph_break] = _graph_break_called("dynamo_lite.graph_break")
# functions marked ``breaks_graph = True`` (testing.print_with_graph_break) break like graph_break()
PYTHON_FUNCTION_MATCHERS.append(lambda fn: _graph_break_called(fn.__name__)
                                if getattr(fn, "breaks_graph", False) is True else None)
# the code of the function @contextlib.contextmanager returns (its closure: the decorated function)
_CONTEXTMANAGER_HELPER = contextlib.contextmanager(lambda: None).__code__
PYTHON_FUNCTION_HANDLERS[contextlib.contextmanager] = \
    lambda tx, args, kwargs: ContextManagerFunctionVariable(args[0]) if len(args) == 1 and not kwargs else None


def python_function_handler(fn) -> Optional[Callable]:
    """The handler answering calls of the real callable ``fn`` without inlining it, if any."""
    try:
        handler = PYTHON_FUNCTION_HANDLERS.get(fn)
    except TypeError:  # unhashable
        return None
    if handler is None:
        for match in PYTHON_FUNCTION_MATCHERS:
            handler = match(fn)
            if handler is not None:
                break
    return handler



# functions have __type_params__ (PEP 695) where the running Python has them
_HAS_TYPE_PARAMS = hasattr(types.FunctionType, "__type_params__")

class BaseUserFunctionVariable(VariableTracker):
    def get_code(self) -> types.CodeType:
        raise NotImplementedError

    def get_globals(self) -> dict:
        raise NotImplementedError

    def fn_name(self) -> str:
        return self.get_code().co_name

    def describe(self):
        return f"function {self.fn_name()}"

    def python_type(self):
        return types.FunctionType

    def bind_args(self, tx, args: list, kwargs: dict) -> dict:
        """Map call arguments to the callee's parameter names (like CPython)."""
        raise NotImplementedError

    def closure_cells(self, tx) -> list:
        """Trackers of the callee's free-variable cells, in co_freevars order."""
        raise NotImplementedError

    def call_function(self, tx, args, kwargs):
        return tx.inline_user_function(self, args, kwargs)


def bind_arguments(tx, code, name, defaults: list, kwdefaults: dict, args, kwargs) -> dict:
    """Bind trackers to parameters following CPython's rules; TypeError -> break."""
    nposargs = code.co_argcount
    nkwonly = code.co_kwonlyargcount
    names = code.co_varnames
    pos_names = names[:nposargs]
    kwonly_names = names[nposargs:nposargs + nkwonly]
    has_varargs = bool(code.co_flags & 0x04)
    has_varkw = bool(code.co_flags & 0x08)
    idx = nposargs + nkwonly
    varargs_name = names[idx] if has_varargs else None
    varkw_name = names[idx + has_varargs] if has_varkw else None
    posonly = code.co_posonlyargcount
    bound: dict = {}
    for pname, value in zip(pos_names, args):
        bound[pname] = value
    extra = list(args[nposargs:])
    if extra and not has_varargs:
        raise GraphBreak(gb.BAD_ARGUMENTS, f"{name}() takes {nposargs} positional arguments but {len(args)} were given")
    extra_kw = {}
    for key, value in kwargs.items():
        if key in pos_names[posonly:] or key in kwonly_names:
            if key in bound:
                raise GraphBreak(gb.BAD_ARGUMENTS, f"{name}() got multiple values for argument {key!r}")
            bound[key] = value
        elif has_varkw:
            extra_kw[key] = value
        else:
            raise GraphBreak(gb.BAD_ARGUMENTS, f"{name}() got an unexpected keyword argument {key!r}")
    ndefaults = len(defaults)
    for i, pname in enumerate(pos_names):
        if pname not in bound:
            di = i - (nposargs - ndefaults)
            if di >= 0:
                bound[pname] = defaults[di]
            else:
                raise GraphBreak(gb.BAD_ARGUMENTS, f"{name}() missing required argument {pname!r}")
    for pname in kwonly_names:
        if pname not in bound:
            if pname in kwdefaults:
                bound[pname] = kwdefaults[pname]
            else:
                raise GraphBreak(gb.BAD_ARGUMENTS, f"{name}() missing keyword-only argument {pname!r}")
    if has_varargs:
        bound[varargs_name] = TupleVariable(extra)
    if has_varkw:
        bound[varkw_name] = DictVariable(extra_kw)
    return bound


class UserFunctionVariable(BaseUserFunctionVariable):
    """A real Python function object (from globals, attributes, closures)."""

    def identity_key(self):
        return IdentityKey(self, ("obj", id(self.fn)))

    def __init__(self, fn: types.FunctionType, source=None):
        super().__init__(source)
        if isinstance(fn, staticmethod):
            fn = fn.__func__
        self.fn = fn

    def _repr_body(self):
        return self.fn.__qualname__

    def get_code(self):
        return self.fn.__code__

    def get_globals(self):
        return self.fn.__globals__

    def call_function(self, tx, args, kwargs):
        handler = python_function_handler(self.fn)
        if handler is not None:
            result = handler(tx, args, kwargs)
            if result is not None:
                return result
        if getattr(self.fn, "__code__", None) is _CONTEXTMANAGER_HELPER:  # a @contextmanager function
            src = AttrSource(ItemSource(AttrSource(self.source, "__closure__"), 0), "cell_contents") \
                if self.source is not None else None
            return make_generator_context(tx, tx.wrap(self.fn.__closure__[0].cell_contents, src), args, kwargs)
        decorated = _grad_mode_decorated(tx, self)
        if decorated is not None:
            return decorated.call_function(tx, args, kwargs)
        return super().call_function(tx, args, kwargs)

    def as_python_constant(self):
        return self.fn

    def is_python_constant(self):
        return True

    def bind_args(self, tx, args, kwargs):
        fn = self.fn
        # the code inlined is the function's code now: `fn.__code__ = ...` later is a recompile
        if self.source is not None:
            tx.output.add_guard(guards.IdGuard(AttrSource(self.source, "__code__"), fn.__code__))
        else:
            tx.output.add_guard(guards.ConstAttrIsGuard(fn, "__code__", fn.__code__))
        defaults = []
        for i, d in enumerate(fn.__defaults__ or ()):
            src = ItemSource(AttrSource(self.source, "__defaults__"), i) if self.source else None
            defaults.append(tx.wrap(d, src))
        kwdefaults = {}
        for k, d in (fn.__kwdefaults__ or {}).items():
            src = ItemSource(AttrSource(self.source, "__kwdefaults__"), k) if self.source else None
            kwdefaults[k] = tx.wrap(d, src)
        return bind_arguments(tx, fn.__code__, fn.__name__, defaults, kwdefaults, args, kwargs)

    def closure_cells(self, tx):
        cells = []
        for i, cell in enumerate(self.fn.__closure__ or ()):
            src = ItemSource(AttrSource(self.source, "__closure__"), i) if self.source else None
            cells.append(tx.output.cell_for_real(cell, src))
        return cells

    def var_getattr(self, tx, name):
        if name in ("__name__", "__qualname__", "__module__", "__doc__"):
            return ConstantVariable(getattr(self.fn, name))
        if name == "__code__":  # inlining already relies on the function's code
            return ConstantVariable(self.fn.__code__)
        if name == "__type_params__" and _HAS_TYPE_PARAMS:  # (functools.wraps copies it)
            return tx.wrap(self.fn.__type_params__, AttrSource(self.source, name) if self.source else None)
        if name == "__annotations__":
            return tx.wrap(self.fn.__annotations__, AttrSource(self.source, name) if self.source else None)
        if name in self.fn.__dict__:
            return tx.wrap(self.fn.__dict__[name], AttrSource(self.source, name) if self.source else None)
        if name == "__get__":
            return GetMethodVariable(self)
        if type(self.fn) is types.FunctionType and not hasattr(types.FunctionType, name):
            # neither the function's __dict__ nor its type has it: AttributeError (a flag some code
            # probes with getattr(fn, "__flag__", False)), guarded on the function's __dict__
            if self.source is not None:
                tx.output.add_guard(guards.NotInDictGuard(self.source, name))
            else:
                tx.output.add_guard(guards.ExprGuard("{n} not in {f}.__dict__", (("n", name), ("f", self.fn))))
            raise GraphBreak(gb.MISSING_ATTRIBUTE, f"function {self.fn.__qualname__!r} has no attribute {name!r}")
        return super().var_getattr(tx, name)

    def reconstruct(self, cg):
        if self.source is not None:
            return super().reconstruct(cg)
        cg.load_const(self.fn)  # a real function object reached without a source (e.g. a class attribute)

    def can_reconstruct(self):
        return True


class GetMethodVariable(VariableTracker):
    """fn.__get__ (binds a function to an object)."""

    def __init__(self, fn_var):
        super().__init__()
        self.fn_var = fn_var

    def call_function(self, tx, args, kwargs):
        if len(args) >= 1:
            return UserMethodVariable(self.fn_var.fn, args[0])
        return super().call_function(tx, args, kwargs)


class NestedUserFunctionVariable(BaseUserFunctionVariable):
    """A function created by MAKE_FUNCTION during the trace (closures, lambdas, comprehensions).

    One real function object: generated code builds it once and every place that holds it
    (locals, containers, ``__wrapped__``) gets that object, so ``is`` stays what it was."""

    mutable_local = True

    def __init__(self, code, f_globals, qualname, defaults, kwdefaults, closure, annotations=None):
        super().__init__()
        self.code = code
        self.f_globals = f_globals
        self.qualname = qualname
        self.defaults = defaults  # TupleVariable or None
        self.kwdefaults = kwdefaults  # DictVariable or None
        self.closure = closure  # list of CellVariable or None
        self.annotations = annotations
        # attributes set on it in the trace (functools.wraps: __name__, __doc__, __wrapped__, ...),
        # applied by generated code after it builds the function
        self.attrs: dict[str, VariableTracker] = {}
        # f_globals are not the compiled frame's (made in an inlined call of another module):
        # generated code builds it with types.FunctionType instead of MAKE_FUNCTION
        self.foreign_globals = False

    def _repr_body(self):
        return self.qualname

    def get_code(self):
        return self.code

    def get_globals(self):
        return self.f_globals

    def bind_args(self, tx, args, kwargs):
        defaults = list(self.defaults.items) if self.defaults is not None else []
        kwdefaults = {}
        if self.kwdefaults is not None:
            kwdefaults = {k: v for k, v in self.kwdefaults.items.items()}
        return bind_arguments(tx, self.code, self.code.co_name, defaults, kwdefaults, args, kwargs)

    def closure_cells(self, tx):
        return list(self.closure or [])

    def var_getattr(self, tx, name):
        if name in self.attrs:
            return self.attrs[name]
        if name in ("__name__",):
            return ConstantVariable(self.code.co_name)
        if name == "__qualname__":
            return ConstantVariable(self.qualname)
        if name == "__code__":
            return ConstantVariable(self.code)
        if name == "__module__":
            return ConstantVariable(self.f_globals.get("__name__"))
        if name == "__annotations__":  # one dict, made on first read (as CPython does)
            self.attrs[name] = self._annotations_dict()
            return self.attrs[name]
        if name == "__type_params__" and _HAS_TYPE_PARAMS:
            return ConstantVariable(())  # (a generic function's are set by an intrinsic the trace does not run)
        if name == "__doc__":  # what MAKE_FUNCTION takes: the first constant when it is a str
            consts = self.code.co_consts
            return ConstantVariable(consts[0] if consts and isinstance(consts[0], str) else None)
        return super().var_getattr(tx, name)

    def _annotations_dict(self) -> DictVariable:
        """``__annotations__`` from MAKE_FUNCTION's (name, value, ...) tuple (empty: none)."""
        items = self.annotations.items if isinstance(self.annotations, TupleVariable) else []
        if self.annotations is not None and not isinstance(self.annotations, TupleVariable):
            raise GraphBreak(gb.UNSUPPORTED_ATTRIBUTE, "__annotations__ of a function made in the trace")
        return DictVariable({items[i].as_python_constant(): items[i + 1] for i in range(0, len(items), 2)})

    def setattr(self, tx, name, value):
        if name in ("__code__", "__defaults__", "__kwdefaults__", "__closure__", "__globals__", "__dict__") \
                and name not in self.attrs:
            raise GraphBreak(gb.SIDE_EFFECT, f"setting {name} of a function made in the trace")
        tx.output.side_effects.version += 1
        self.attrs[name] = value

    def reconstruct(self, cg):
        cg.make_function(self)
        attrs = dict(self.attrs)
        if self.annotations is not None and "__annotations__" not in attrs:
            attrs = {"__annotations__": self._annotations_dict(), **attrs}  # MAKE_FUNCTION's, kept
        for name, value in attrs.items():  # fn.name = value, keeping fn on the stack
            cg.emit("COPY", 1)
            cg.reconstruct(value)
            cg.emit("SWAP", 2)
            cg.emit("STORE_ATTR", name)

    def can_reconstruct(self):
        return all(v.can_reconstruct() for v in self.attrs.values()) and \
            all(c.can_reconstruct_as_cell() for c in (self.closure or [])) and (
            self.defaults is None or self.defaults.can_reconstruct()) and (
            self.kwdefaults is None or self.kwdefaults.can_reconstruct())


_METHOD_OWN_ATTRS = frozenset(dir(types.MethodType))


class UserMethodVariable(VariableTracker):
    """A function bound to an object (obj.method).

    Attributes:
        fn: the function (or a tracker of it).
        obj: the tracker of the object it is bound to.
        fn_source: where the function itself is read (``type(obj).name``), when known: its
            closure cells are then guarded like any other input (a nonlocal rebound later
            recompiles).
    """

    def __init__(self, fn, obj: VariableTracker, source=None, fn_source=None):
        super().__init__(source)
        self.fn = fn
        self.obj = obj
        self.fn_source = fn_source

    def _fn_var(self) -> VariableTracker:
        return self.fn if isinstance(self.fn, VariableTracker) else UserFunctionVariable(self.fn, self.fn_source)

    def _repr_body(self):
        return getattr(self.fn, "__qualname__", str(self.fn))

    def describe(self):
        return f"method {getattr(self.fn, '__qualname__', self.fn)}"

    def python_type(self):
        return types.MethodType

    def call_function(self, tx, args, kwargs):
        return self._fn_var().call_function(tx, [self.obj, *args], kwargs)

    def var_getattr(self, tx, name):
        if name == "__self__":
            return self.obj
        if name == "__func__":
            return self._fn_var()
        if name in ("__name__", "__qualname__") and not isinstance(self.fn, VariableTracker):
            return ConstantVariable(getattr(self.fn, name))
        if name == "__doc__" or name not in _METHOD_OWN_ATTRS:
            # a bound method answers the rest from its function (__module__, __dict__, __wrapped__,
            # __annotations__: what functools.wraps(obj.method) reads)
            return self._fn_var().var_getattr(tx, name)
        return super().var_getattr(tx, name)

    def reconstruct(self, cg):
        if self.source is not None:
            return super().reconstruct(cg)
        cg.load_callable(types.MethodType)
        if isinstance(self.fn, VariableTracker):
            cg.reconstruct(self.fn)
        else:
            cg.load_const(self.fn)
        cg.reconstruct(self.obj)
        cg.call(2)

    def can_reconstruct(self):
        return self.source is not None or self.obj.can_reconstruct()


class PartialVariable(VariableTracker):
    """functools.partial(fn, *args, **kwargs)."""

    def __init__(self, fn: VariableTracker, args: list, kwargs: dict, source=None, value=None):
        super().__init__(source)
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.value = value  # the real partial (read from the inputs), or None (made in the trace)
        self.mutable_local = source is None  # one object: rebuilt once, wherever it is held
        self.instance_dict: Optional[DictVariable] = None  # its __dict__ once read (made in the trace)

    def python_type(self):
        return functools.partial

    def setattr(self, tx, name, value):
        if name in ("func", "args", "keywords", "__dict__"):
            raise GraphBreak(gb.OPERATION_RAISES, f"setting {name} of a partial")
        if self.source is None:  # a partial made in the trace: an entry of its __dict__
            self._instance_dict(tx).setitem(tx, ConstantVariable(name), value)
            return
        tx.output.side_effects.store_attr(self, name, value)  # replayed on the real partial

    def _instance_dict(self, tx) -> DictVariable:
        """The partial's ``__dict__``: the real one (inputs), or one made with it in the trace."""
        if self.value is not None and self.source is not None:
            return tx.wrap(self.value.__dict__, AttrSource(self.source, "__dict__"))
        if self.source is not None:
            raise GraphBreak(gb.UNSUPPORTED_ATTRIBUTE, "__dict__ of a partial without its real object")
        if self.instance_dict is None:
            self.instance_dict = DictVariable({})
        return self.instance_dict

    def call_function(self, tx, args, kwargs):
        return self.fn.call_function(tx, [*self.args, *args], {**self.kwargs, **kwargs})

    def var_getattr(self, tx, name):
        if name == "func":
            return self.fn
        if name == "args":
            return TupleVariable(self.args)
        if name == "keywords":
            return DictVariable(dict(self.kwargs))
        pending = tx.output.side_effects.load_attr(self, name) if self.source is not None else None
        if pending is not None:
            return pending
        if name == "__dict__":
            if self.source is not None and tx.output.side_effects.new_object_attrs(self):
                raise GraphBreak(gb.UNSUPPORTED_ATTRIBUTE, "__dict__ of a partial whose attributes were set")
            return self._instance_dict(tx)
        if name in ("__doc__", "__module__") or not hasattr(_BLANK_PARTIAL, name):
            # an attribute set on the partial, else the class's (__doc__), else AttributeError
            # (a partial has no __name__: getattr(p, "__name__", default) gives the default)
            d = self._instance_dict(tx)
            if d.contains(tx, ConstantVariable(name)):
                return d.getitem(tx, ConstantVariable(name))
            if hasattr(_BLANK_PARTIAL, name):
                return ConstantVariable(getattr(_BLANK_PARTIAL, name))
            raise GraphBreak(gb.MISSING_ATTRIBUTE, f"'functools.partial' object has no attribute {name!r}")
        return super().var_getattr(tx, name)

    def reconstruct(self, cg):
        if self.source is not None:
            return super().reconstruct(cg)
        cg.load_callable(functools.partial)
        cg.reconstruct(self.fn)
        for a in self.args:
            cg.reconstruct(a)
        for v in self.kwargs.values():
            cg.reconstruct(v)
        cg.call(1 + len(self.args) + len(self.kwargs), tuple(self.kwargs))
        for k, v in (self.instance_dict.items.items() if self.instance_dict is not None else ()):
            if not isinstance(k, str):
                raise GraphBreak(gb.CANNOT_REBUILD, "a partial whose __dict__ has a non-str key")
            cg.emit("COPY", 1)  # p.k = v, keeping p on the stack
            cg.reconstruct(v)
            cg.emit("SWAP", 2)
            cg.emit("STORE_ATTR", k)

    def can_reconstruct(self):
        return self.source is not None or (
            self.fn.can_reconstruct() and all(a.can_reconstruct() for a in self.args)
            and all(v.can_reconstruct() for v in self.kwargs.values()))


_BLANK_PARTIAL = functools.partial(print)  # what a partial instance has without attributes of its own


def _grad_mode_decorated(tx, fn_var: "UserFunctionVariable"):
    """For a function decorated by ``@torch.no_grad()`` / ``enable_grad()`` /
    ``set_grad_enabled(b)`` / ``inference_mode(b)`` (torch's wrapper lives in
    torch/utils/_contextlib.py, which is not inlined) or ``@torch.autocast(...)``
    (torch/amp/autocast_mode.py): a tracker calling the wrapped function inside that mode.
    None otherwise."""
    import torch
    import torch.amp.autocast_mode as _autocast_mode

    code = fn_var.fn.__code__
    src = None
    if fn_var.source is not None:
        src = AttrSource(ItemSource(AttrSource(fn_var.source, "__closure__"), 1), "cell_contents")
    if code.co_name == "decorate_autocast" and code.co_filename == _autocast_mode.__file__ and \
            code.co_freevars == ("autocast_instance", "func"):
        ctx, func = (c.cell_contents for c in fn_var.fn.__closure__)
        if type(ctx) is not torch.autocast:
            return None
        vals = (ctx.device, ctx.fast_dtype, ctx._enabled, ctx._cache_enabled)
        return GlobalModeDecoratedVariable(GlobalModeContextVariable(
            torch.autocast, torch.amp._enter_autocast, vals, torch.amp._exit_autocast, tx.root().steps,
            tx.user_stack()), tx.wrap(func, src))
    if not torch_compat.is_context_decorator_code(code):  # (its co_name differs by torch version)
        return None
    factory, func = (c.cell_contents for c in fn_var.fn.__closure__)
    ctx = getattr(factory, "__self__", None)
    if type(ctx) is torch.no_grad:
        mode = False
    elif type(ctx) is torch.enable_grad:
        mode = True
    elif type(ctx) is torch.set_grad_enabled:
        mode = bool(ctx.mode)
    elif type(ctx) is torch.inference_mode and type(ctx.mode) is bool:
        return GlobalModeDecoratedVariable(inference_mode_context(ctx.mode, tx.root().steps, tx.user_stack()),
                                           tx.wrap(func, src))
    else:
        return None
    return GradModeDecoratedVariable(GradModeVariable(mode, type(ctx)), tx.wrap(func, src))


def is_inlinable_function(fn: Any) -> Optional[str]:
    """None if ``fn`` may be inlined; otherwise the reason it may not."""
    if not isinstance(fn, types.FunctionType):
        return f"{type(fn).__name__} is not a Python function"
    code = fn.__code__
    if code.co_flags & (0x80 | 0x100 | 0x200):
        return "coroutine functions are not inlined"
    return skip_reason(code.co_filename, code.co_name, inline=True)


__all__ = [
    "BaseUserFunctionVariable", "UserFunctionVariable", "NestedUserFunctionVariable",
    "UserMethodVariable", "PartialVariable",
    "GetMethodVariable", "is_inlinable_function", "python_function_handler", "PYTHON_FUNCTION_MATCHERS",
]


def call_python_function(tx, fn, args, kwargs):
    """``fn(*args, **kwargs)`` for a plain Python function, inlined (see VariableTracker.call_python_function)."""
    return UserFunctionVariable(fn).call_function(tx, list(args), dict(kwargs))


VariableTracker.call_python_function = staticmethod(call_python_function)  # see VariableTracker.call_python_function
