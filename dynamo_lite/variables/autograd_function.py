"""Custom ``torch.autograd.Function`` subclasses and torch.func transforms in traced code.

``MyFn.apply(*args)`` becomes one graph node whose target is ``MyFn.apply``: the graph
runs the real Function, so autograd records its own node and the user's ``backward`` runs
at backward time, exactly as in eager (a functionalising backend such as aot_eager traces
that forward and backward itself).  Before recording it, the trace proves the Function is
safe to run that way: ``forward`` (and ``setup_context``) and then ``backward`` are
interpreted over trackers, as a dry run, with a stand-in ``ctx``; a graph break or a
side effect in either (print, a global or attribute write, ``.item()``, a data-dependent
branch) makes the call a graph break instead (Python runs ``apply``).  The dry run's graph
nodes are removed again; only the ``apply`` node stays (run on FakeTensors for its result).
``vmap(fn)(x)`` / ``grad(fn)(x)`` / ``jacrev`` / ``jacfwd`` / ``hessian`` work the same way:
one node that runs the transform on the real function (or on one made again from its code and
its closure's current tensors and constants), after a dry run of ``fn``.
``torch.utils.checkpoint.checkpoint(fn, *args, use_reentrant=False)`` traces ``fn`` as a plain
call after a dry run proves it free of side effects (eager repeats them in backward).
So does torch's ``associative_scan(combine_fn, xs, dim, combine_mode="generic")`` (one node
running torch's own scan on the real ``combine_fn``).
Tested by tests/torch/test_autograd_functions.py.
"""
from __future__ import annotations

import inspect
import sys
import types
import weakref
from typing import Callable

import torch
import torch.utils.checkpoint

from .. import graph_breaks as gb
from ..exc import GraphBreak
from ..source import AttrSource
from .base import VariableTracker, HeldValueVariable
from .constant import ConstantVariable
from .sequences import TupleVariable
from .tensor import RUNS_USER_CODE, TensorVariable, record_op


def is_autograd_function_class(value) -> bool:
    return isinstance(value, type) and issubclass(value, torch.autograd.Function) and \
        value is not torch.autograd.Function


class AutogradFunctionClassVariable(VariableTracker):
    """A user subclass of torch.autograd.Function (its identity is guarded by the builder)."""

    def __init__(self, cls, source=None):
        super().__init__(source)
        self.cls = cls

    def _repr_body(self):
        return self.cls.__qualname__

    def describe(self):
        return f"autograd.Function {self.cls.__qualname__}"

    def python_type(self):
        return type(self.cls)

    def is_python_constant(self):
        return True

    def as_python_constant(self):
        return self.cls

    def var_getattr(self, tx, name):
        if name == "apply":
            return AutogradApplyVariable(self)
        try:
            value = inspect.getattr_static(self.cls, name)
        except AttributeError as e:
            raise GraphBreak(gb.MISSING_ATTRIBUTE, f"{self.describe()} has no attribute {name!r}") from e
        if isinstance(value, staticmethod):
            value = value.__func__
        elif not isinstance(value, (int, float, bool, str, type(None))):
            raise GraphBreak(gb.UNSUPPORTED_ATTRIBUTE, f"attribute {name!r} of {self.describe()} is not supported")
        return tx.wrap(value, AttrSource(self.source, name) if self.source is not None else None)

    def call_function(self, tx, args, kwargs):
        raise GraphBreak(gb.UNSUPPORTED_CALL, f"constructing {self.describe()} (call its .apply instead)")

    def reconstruct(self, cg):
        if self.source is not None:
            return super().reconstruct(cg)
        cg.load_const(self.cls)

    def can_reconstruct(self):
        return True


class AutogradApplyVariable(VariableTracker):
    """``MyFn.apply``: calling it records one node (see the module docstring)."""

    def __init__(self, fn_class: AutogradFunctionClassVariable):
        super().__init__(None)
        self.fn_class = fn_class

    def _repr_body(self):
        return f"{self.fn_class.cls.__qualname__}.apply"

    def describe(self):
        return f"{self.fn_class.cls.__qualname__}.apply"

    def python_type(self):
        return type(self.fn_class.cls.apply)

    def call_function(self, tx, args, kwargs):
        cls = self.fn_class.cls
        if kwargs:
            raise GraphBreak(gb.UNSUPPORTED_CALL, f"{self.describe()} with keyword arguments")
        for a in args:
            if not (isinstance(a, TensorVariable) or a.is_python_constant()):
                raise GraphBreak(gb.UNSUPPORTED_CALL, f"{self.describe()} with a {a.describe()} argument "
                                 "(only tensors and constants are traced)")
        _dry_run(tx, self.fn_class, args)
        return record_op(tx, "call_function", applier(cls), list(args), {})

    def reconstruct(self, cg):
        cg.load_const(self.fn_class.cls.apply)

    def can_reconstruct(self):
        return True


_APPLIERS: "weakref.WeakKeyDictionary[type, Callable]" = weakref.WeakKeyDictionary()


def applier(cls):
    """The graph node's target for ``cls.apply``: a plain function (FX would write a bound
    method of a torch class as a torch path, ``torch.autograd.function.apply``)."""
    fn = _APPLIERS.get(cls)
    if fn is None:
        def fn(*args):
            return cls.apply(*args)

        fn.__name__ = fn.__qualname__ = f"{cls.__name__}_apply"
        setattr(fn, RUNS_USER_CODE, True)
        _APPLIERS[cls] = fn
    return fn


def _user_static(cls, name):
    """The user's own staticmethod ``name`` of ``cls`` (None: torch's default)."""
    for klass in cls.__mro__:
        if klass in (torch.autograd.Function, torch.autograd.function._SingleLevelFunction):
            return None
        if name in vars(klass):
            value = vars(klass)[name]
            return value.__func__ if isinstance(value, staticmethod) else None
    return None


def _dry_run(tx, fn_class: AutogradFunctionClassVariable, args: list) -> None:
    """Interpret forward (+ setup_context) and backward over trackers; GraphBreak when either
    cannot be traced or has a side effect; the graph is left as it was."""
    cls = fn_class.cls
    output = tx.output
    forward = _user_static(cls, "forward")
    backward = _user_static(cls, "backward")
    setup = _user_static(cls, "setup_context")
    if forward is None or backward is None or _user_static(cls, "jvp") is not None or \
            getattr(cls, "generate_vmap_rule", False) or _user_static(cls, "vmap") is not None:
        raise GraphBreak(gb.UNSUPPORTED_CALL, f"{fn_class.describe()} without its own forward and backward "
                         "(or with jvp/vmap rules) is not traced")

    def fn_var(name, fn):
        src = AttrSource(fn_class.source, name) if fn_class.source is not None else None
        return tx.wrap(fn, src)

    def body():
        ctx = AutogradCtxVariable(args, output.grad_enabled)
        output.set_grad_enabled(False)  # apply runs forward and backward without grad recording
        if setup is None:
            result = fn_var("forward", forward).call_function(tx, [ctx, *args], {})
        else:
            result = fn_var("forward", forward).call_function(tx, list(args), {})
            fn_var("setup_context", setup).call_function(tx, [ctx, TupleVariable(list(args)), result], {})
        outs = list(result.unpack(tx)) if isinstance(result, TupleVariable) else [result]
        grads = [record_op(tx, "call_function", torch.ones_like, [o], {}) if isinstance(o, TensorVariable)
                 else ConstantVariable(None) for o in outs]
        fn_var("backward", backward).call_function(tx, [ctx, *grads], {})

    speculate(tx, body, f"{fn_class.describe()}: forward/backward not traceable as one graph node")


def speculate(tx, body, what: str, repeated: frozenset = frozenset()):
    """Run ``body()`` (interpreting user code over trackers) as a dry run: its graph nodes are
    removed afterwards and grad mode restored; a graph break or a side effect in it becomes a
    GraphBreak ``what (reason); Python runs it``.  ``repeated``: graph effects eager would make
    again (``"writes"``: in-place ops on tensors; ``"draws"``: random numbers), which break too.
    Returns body's result (its trackers refer to removed nodes: only inspect them)."""
    output = tx.output
    before = set(output.graph.nodes)
    last = next(reversed(output.graph.nodes), None)
    effects = output.side_effects.version
    prev_grad = output.grad_enabled
    try:
        result = body()
        if output.side_effects.version != effects:
            raise GraphBreak(gb.SIDE_EFFECT, "it mutates objects or globals")
        made = output.effects_after(last) & repeated
        if made:
            raise GraphBreak(gb.SIDE_EFFECT, " and ".join(sorted({"writes": "it changes tensors in place",
                                                                  "draws": "it draws random numbers"}[m]
                                                                 for m in made)))
    except GraphBreak as e:
        raise GraphBreak(gb.UNSUPPORTED_CALL, f"{what} ({e.reason}); Python runs it") from e
    finally:
        output.set_grad_enabled(prev_grad)
    for node in reversed(list(output.graph.nodes)):
        if node not in before and node.op != "placeholder" and not node.users:
            output.graph.erase_node(node)
    if any(n not in before and n.op != "placeholder" for n in output.graph.nodes):
        raise GraphBreak(gb.UNSUPPORTED_CALL, f"{what}: its dry run left graph nodes behind")
    return result


class AutogradCtxVariable(VariableTracker):
    """The ``ctx`` of a dry run: attributes, save_for_backward/saved_tensors, needs_input_grad,
    mark_non_differentiable, set_materialize_grads (mark_dirty: a break)."""

    _METHODS = ("save_for_backward", "mark_non_differentiable", "set_materialize_grads", "mark_dirty",
                "save_for_forward")

    def __init__(self, args: list, grad_enabled: bool):
        super().__init__(None)
        self.attrs: dict[str, VariableTracker] = {}
        self.saved: list[VariableTracker] = []
        self.needs_input_grad = tuple(bool(grad_enabled and isinstance(a, TensorVariable)
                                           and a.example.requires_grad) for a in args)

    def describe(self):
        return "autograd ctx"

    def python_type(self):
        return torch.autograd.function.FunctionCtx

    def var_getattr(self, tx, name):
        if name in self.attrs:
            return self.attrs[name]
        if name == "saved_tensors":
            return TupleVariable(list(self.saved))
        if name == "needs_input_grad":
            return TupleVariable([ConstantVariable(b) for b in self.needs_input_grad])
        if name in self._METHODS:
            return _CtxMethodVariable(self, name)
        raise GraphBreak(gb.UNSUPPORTED_ATTRIBUTE, f"ctx.{name} in a traced autograd.Function")

    def call_method(self, tx, name, args, kwargs):
        return self.var_getattr(tx, name).call_function(tx, args, kwargs)

    def setattr(self, tx, name, value):
        self.attrs[name] = value


class _CtxMethodVariable(VariableTracker):
    def __init__(self, ctx: AutogradCtxVariable, name: str):
        super().__init__(None)
        self.ctx = ctx
        self.name = name

    def describe(self):
        return f"ctx.{self.name}"

    def call_function(self, tx, args, kwargs):
        if self.name == "save_for_backward" and not kwargs:
            self.ctx.saved = list(args)
        elif self.name in ("mark_non_differentiable", "set_materialize_grads") and not kwargs:
            pass  # recorded by the real ctx when the graph runs apply
        else:
            raise GraphBreak(gb.UNSUPPORTED_CALL, f"ctx.{self.name}() in a traced autograd.Function")
        return ConstantVariable(None)


# ---- torch.utils.checkpoint -------------------------------------------------------------------
def is_checkpoint(value) -> bool:
    return value is torch.utils.checkpoint.checkpoint


_CHECKPOINT_DEFAULTS = {"context_fn": None, "determinism_check": "default", "debug": False, "early_stop": True}


class CheckpointVariable(HeldValueVariable):
    """``torch.utils.checkpoint.checkpoint(fn, *args, use_reentrant=False)``: ``fn`` is traced
    into the graph as a plain call.  Its values and gradients are those of ``fn(*args)``
    (checkpointing only trades memory for recomputation, and its non-reentrant form records
    the ops' own autograd nodes); what could tell the two apart is a side effect of ``fn``,
    which eager repeats when backward recomputes it: so ``fn`` is first run as a dry run, and
    a print, a mutation or a graph break in it leaves the call to Python (a graph break)."""

    def __init__(self, value, source=None):
        super().__init__(source)
        self.value = value

    def describe(self):
        return "torch.utils.checkpoint.checkpoint"

    def python_type(self):
        return types.FunctionType

    def is_python_constant(self):
        return True

    def as_python_constant(self):
        return self.value

    def call_function(self, tx, args, kwargs):
        kwargs = dict(kwargs)
        reentrant = kwargs.pop("use_reentrant", None)
        # preserved (the default), the recomputation draws what the forward drew and puts the RNG back:
        # drawn once here, as eager's forward; not preserved, it draws anew (other masks, the RNG moves)
        preserve = kwargs.pop("preserve_rng_state", None)
        preserved = preserve is None or (preserve.is_python_constant() and bool(preserve.as_python_constant()))
        options = {k: kwargs.pop(k) for k in list(kwargs) if k in _CHECKPOINT_DEFAULTS}
        plain = reentrant is not None and reentrant.is_python_constant() and reentrant.as_python_constant() is False
        for k, v in options.items():
            if k == "context_fn":
                plain = plain and v.is_python_constant() and \
                    v.as_python_constant() is torch.utils.checkpoint.noop_context_fn
            else:
                plain = plain and v.is_python_constant() and v.as_python_constant() == _CHECKPOINT_DEFAULTS[k]
        if not args or not plain:
            raise GraphBreak(gb.UNSUPPORTED_CALL, f"{self.describe()} other than (fn, *args, use_reentrant=False) "
                             "with default options: Python runs it")
        fn, fn_args = args[0], list(args[1:])
        speculate(tx, lambda: fn.call_function(tx, fn_args, dict(kwargs)),
                  f"{self.describe()} of {fn.describe()}: a side effect or break in it (eager repeats the "
                  "function in backward)", repeated=frozenset({"writes"} if preserved else {"writes", "draws"}))
        return fn.call_function(tx, fn_args, dict(kwargs))


# ---- torch.func transforms ------------------------------------------------------------------
def _func_transforms() -> dict:
    return {torch.func.vmap: "vmap", torch.func.grad: "grad", torch.func.grad_and_value: "grad_and_value",
            torch.func.jacrev: "jacrev", torch.func.jacfwd: "jacfwd", torch.func.hessian: "hessian"}


_FUNC_TRANSFORMS = _func_transforms()


def is_func_transform(value) -> bool:
    return any(value is t for t in _FUNC_TRANSFORMS)


class FuncTransformVariable(VariableTracker):
    """``torch.func.vmap`` / ``grad`` / ``grad_and_value`` (also ``torch.vmap``): applying it
    to a function makes a ``TransformedFunctionVariable``."""

    def __init__(self, transform, source=None):
        super().__init__(source)
        self.transform = transform

    def describe(self):
        return f"torch.func.{_FUNC_TRANSFORMS[self.transform]}"

    def python_type(self):
        return type(self.transform)

    def is_python_constant(self):
        return True

    def as_python_constant(self):
        return self.transform

    def call_function(self, tx, args, kwargs):
        if not args or not all(v.is_python_constant() for v in [*args[1:], *kwargs.values()]):
            raise GraphBreak(gb.UNSUPPORTED_CALL, f"{self.describe()} with arguments not known at trace time")
        try:
            bound = inspect.signature(self.transform).bind(None, *[a.as_python_constant() for a in args[1:]],
                                                           **{k: v.as_python_constant() for k, v in kwargs.items()})
        except TypeError as e:
            raise GraphBreak(gb.BAD_ARGUMENTS, f"{self.describe()}: {e}") from e
        options = {k: v for k, v in bound.arguments.items() if k != "func"}
        return TransformedFunctionVariable(self.transform, args[0], options)

    def reconstruct(self, cg):
        if self.source is not None:
            return super().reconstruct(cg)
        cg.load_const(self.transform)

    def can_reconstruct(self):
        return True


def _closure_function(fn_var):
    """For a function made in the trace with a closure: ``(make, free)``, ``make(values)`` builds
    the function anew with fresh cells holding the closure's current values, whose tensors are
    ``free`` (trackers, passed to the graph node) and constants are fixed now; None if a cell
    holds anything else (or defaults are not constants)."""
    code = getattr(fn_var, "code", None)
    closure = getattr(fn_var, "closure", None)
    if not isinstance(code, types.CodeType) or closure is None or getattr(fn_var, "kwdefaults", None) is not None:
        return None
    defaults = getattr(fn_var, "defaults", None)
    if defaults is not None:
        if not defaults.is_python_constant():
            return None
        defaults = tuple(defaults.as_python_constant())
    slots, free = [], []  # per cell: ("tensor", index in free) / ("const", value) / ("empty", None)
    for cell in closure:
        contents = getattr(cell, "contents", None)
        if contents is None:
            if getattr(cell, "kind", None) != "local":
                return None  # a real or frame cell whose contents the dry run never read
            slots.append(("empty", None))
        elif isinstance(contents, TensorVariable):
            slots.append(("tensor", len(free)))
            free.append(contents)
        elif contents.is_python_constant() and type(contents.as_python_constant()) in (
                bool, int, float, complex, str, type(None)):
            slots.append(("const", contents.as_python_constant()))
        else:
            return None
    f_globals, name = fn_var.get_globals(), code.co_name

    def make(values):
        cells = tuple(types.CellType(values[v]) if kind == "tensor" else types.CellType(v) if kind == "const"
                      else types.CellType() for kind, v in slots)
        return types.FunctionType(code, f_globals, name, defaults, cells)
    return make, free


def real_function(fn_var):
    """The real function object a transform is applied to at run time (None: there is none
    to hand it, e.g. a closure over values of the trace)."""
    fn = getattr(fn_var, "fn", None)
    if isinstance(fn, types.FunctionType):
        return fn
    if isinstance(fn_var, TransformedFunctionVariable):  # vmap(grad(f)): the inner transform, made again
        inner = real_function(fn_var.fn_var)
        return None if inner is None else fn_var.transform(inner, **fn_var.options)
    if fn_var.is_python_constant() and callable(fn_var.as_python_constant()):
        return fn_var.as_python_constant()  # a torch function (vmap(torch.sin))
    code = getattr(fn_var, "code", None)
    if not isinstance(code, types.CodeType) or code.co_freevars or getattr(fn_var, "kwdefaults", None) is not None:
        return None
    defaults = getattr(fn_var, "defaults", None)
    if defaults is not None:
        if not defaults.is_python_constant():
            return None
        defaults = tuple(defaults.as_python_constant())
    return types.FunctionType(code, fn_var.get_globals(), code.co_name, defaults)


class TransformedFunctionVariable(VariableTracker):
    """``vmap(fn, ...)`` / ``grad(fn, ...)`` made in the trace.  A call is one graph node that
    runs the transform on the real function (exact: torch.func runs it), after a dry run of
    ``fn`` over trackers (on one sample for vmap) proves it traceable and side-effect free."""

    def __init__(self, transform, fn_var, options: dict):
        super().__init__(None)
        self.transform = transform
        self.fn_var = fn_var
        self.options = options

    def describe(self):
        return f"torch.func.{_FUNC_TRANSFORMS[self.transform]}({self.fn_var.describe()})"

    def python_type(self):
        return types.FunctionType

    def call_function(self, tx, args, kwargs):
        name = _FUNC_TRANSFORMS[self.transform]
        if not all(isinstance(a, TensorVariable) or a.is_python_constant() for a in [*args, *kwargs.values()]):
            raise GraphBreak(gb.UNSUPPORTED_CALL, f"{self.describe()} called with arguments that are neither "
                             "tensors nor constants (containers of tensors): Python runs it")
        if name == "vmap":
            sample_args = self._samples(tx, args)
        else:
            if self.options.get("has_aux"):
                raise GraphBreak(gb.UNSUPPORTED_CALL, f"{self.describe()} with has_aux=True: Python runs it")
            sample_args = None

        def body():
            call_args = sample_args() if sample_args is not None else list(args)
            return self.fn_var.call_function(tx, call_args, dict(kwargs))

        result = speculate(tx, body, f"{self.describe()}: the function is not traceable as one graph node")
        if name != "vmap" and not isinstance(result, TensorVariable):
            raise GraphBreak(gb.UNSUPPORTED_CALL, f"{self.describe()}: the function does not return one tensor")
        # the function as the graph runs it: the real one, or one made again from its code and the
        # values its closure holds now (the call happens now, and the dry run proved it writes no cell)
        fn, free = real_function(self.fn_var), []
        if fn is None:
            made = _closure_function(self.fn_var)
            if made is None:
                raise GraphBreak(gb.UNSUPPORTED_CALL, f"{self.describe()} of a function whose closure holds values "
                                 "other than tensors and constants: Python runs it")
            make, free = made
        transform, options, n_args = self.transform, dict(self.options), len(args)

        def run(*call_args, **call_kwargs):
            f = fn if fn is not None else make(call_args[n_args:])
            return transform(f, **options)(*call_args[:n_args], **call_kwargs)

        label = getattr(fn, "__name__", None) or getattr(self.fn_var, "code", None) and self.fn_var.code.co_name or "fn"
        run.__name__ = run.__qualname__ = f"{name}_{label}".replace("<", "_").replace(">", "_")
        setattr(run, RUNS_USER_CODE, True)
        return record_op(tx, "call_function", run, [*args, *free], dict(kwargs))

    def _samples(self, tx, args):
        in_dims = self.options.get("in_dims", 0)
        if self.options.get("out_dims", 0) != 0 or self.options.get("chunk_size") is not None:
            raise GraphBreak(gb.UNSUPPORTED_CALL, f"{self.describe()} with out_dims/chunk_size: Python runs it")
        dims = [in_dims] * len(args) if isinstance(in_dims, int) else list(in_dims) \
            if isinstance(in_dims, tuple) and len(in_dims) == len(args) else None
        if dims is None or not all(d is None or isinstance(d, int) for d in dims):
            raise GraphBreak(gb.UNSUPPORTED_CALL, f"{self.describe()} with in_dims={in_dims!r}: Python runs it")

        def make():
            out = []
            for a, d in zip(args, dims):
                if d is not None and isinstance(a, TensorVariable):
                    out.append(record_op(tx, "call_method", "select", [a, ConstantVariable(d), ConstantVariable(0)], {}))
                elif d is not None:
                    raise GraphBreak(gb.UNSUPPORTED_CALL, "vmap over a non-tensor argument")
                else:
                    out.append(a)
            return out
        return make

    def reconstruct(self, cg):
        cg.load_callable(self.transform)
        cg.reconstruct(self.fn_var)
        for v in self.options.values():
            cg.load_const(v)
        cg.call(1 + len(self.options), tuple(self.options))

    def can_reconstruct(self):
        return self.fn_var.can_reconstruct()


# ---- torch's associative_scan (transformers' Mamba scans with it while compiling) ------------
def is_associative_scan(value) -> bool:
    module = sys.modules.get("torch._higher_order_ops.associative_scan")
    return module is not None and value is getattr(module, "associative_scan", None)


class AssociativeScanVariable(VariableTracker):
    """``associative_scan(combine_fn, xs, dim, reverse=False, combine_mode="generic")``: one graph
    node that runs torch's own associative_scan on the real ``combine_fn`` (so the graph computes
    what eager computes), after a dry run of ``combine_fn`` over the inputs proves it traceable and
    side-effect free.  ``combine_mode="pointwise"`` (CUDA; torch compiles it) and combine
    functions that are closures break."""

    def __init__(self, fn, source=None):
        super().__init__(source)
        self.fn = fn

    def describe(self):
        return "torch associative_scan"

    def python_type(self):
        return type(self.fn)

    def call_function(self, tx, args, kwargs):
        try:
            bound = inspect.signature(self.fn).bind(*args, **kwargs)
        except TypeError as e:
            raise GraphBreak(gb.BAD_ARGUMENTS, f"associative_scan: {e}") from e
        bound.apply_defaults()
        combine_var, xs = bound.arguments["combine_fn"], bound.arguments["xs"]
        options = {}
        for name in ("dim", "reverse", "combine_mode"):
            v = bound.arguments[name]
            v = v if not isinstance(v, VariableTracker) else (v.as_python_constant() if v.is_python_constant() else ...)
            if v is ...:
                raise GraphBreak(gb.UNSUPPORTED_CALL, f"associative_scan with {name} not known at trace time")
            options[name] = v
        if options["combine_mode"] != "generic":
            raise GraphBreak(gb.UNSUPPORTED_CALL, "associative_scan with combine_mode other than 'generic' "
                                                  "(torch compiles it): Python runs it")
        fn = real_function(combine_var)
        single = isinstance(xs, TensorVariable)
        leaves = [xs] if single else (xs.unpack(tx) if type(xs) is TupleVariable else None)
        if fn is None or not leaves or not all(isinstance(t, TensorVariable) for t in leaves):
            raise GraphBreak(gb.UNSUPPORTED_CALL, "associative_scan of a closure, or over something other than a "
                                                  "tensor or a tuple of tensors: Python runs it")

        def body():  # the combine function on whole inputs: same dtypes and ranks as the slices
            return combine_var.call_function(tx, [xs, xs], {})

        result = speculate(tx, body, "associative_scan: the combine function is not traceable as one graph node")
        out = [result] if single else (result.unpack(tx) if type(result) is TupleVariable else None)
        if out is None or len(out) != len(leaves) or not all(isinstance(t, TensorVariable) for t in out):
            raise GraphBreak(gb.UNSUPPORTED_CALL, "associative_scan: the combine function does not return the "
                                                  "structure of its inputs: Python runs it")
        scan = self.fn

        def run(*tensors):
            return scan(fn, tensors[0] if single else tuple(tensors), **options)

        run.__name__ = run.__qualname__ = f"associative_scan_{fn.__name__}".replace("<", "_").replace(">", "_")
        return record_op(tx, "call_function", run, list(leaves), {})

    def reconstruct(self, cg):
        if self.source is not None:
            return super().reconstruct(cg)
        cg.load_const(self.fn)

    def can_reconstruct(self):
        return True
