"""torch functions, classes and namespaces.

Calling a torch function records a graph node (``record_op``), except for a
short list handled specially: grad-mode context managers, functions that
answer from global state (``torch.is_grad_enabled``), functions that only
read metadata and fold to constants, tracing-status queries
(``torch.compiler.is_compiling()`` answers True inside a trace, as under
torch.compile, so libraries take the path they wrote for compilers;
``torch.jit.is_tracing()`` etc. answer False: a frame another tracer runs is never
traced), functions with side effects outside the graph (seeding, printing options,
autograd entry points), which break, and other tracers and compilers: calling
torch.jit.trace/script, torch.fx.symbolic_trace, torch.export or make_fx (or a
TorchScript module) breaks with DL0040 and runs natively; a torch.compile()d function
or module called from traced code is traced into the graph, as TorchDynamo does.
A CPU ``torch.Generator()`` made and seeded in the frame is replayed before the graph with its
draws (``GeneratorVariable``).
Tested by tests/torch/test_tensor_ops.py and tests/torch/test_grad_mode.py.
"""
from __future__ import annotations

import functools
import inspect
import types

import torch
import torch.distributions.kl
import torch.utils._foreach_utils

from .. import _C
from .. import graph_breaks as gb
from .. import guards, runtime, static
from ..exc import GraphBreak
from ..source import AttrSource, RandomDrawSource
from .base import KnownValueVariable, VariableTracker
from .collectives import call_collective, is_collective
from .constant import ConstantVariable, InputConstantVariable
from .objects import ObjectVariable
from .sequences import ListVariable, SizeVariable, TupleVariable
from .mappings import DictVariable
from .folding import wrap_constant_result
from .functions import BaseUserFunctionVariable, PYTHON_FUNCTION_HANDLERS
from .contexts import GlobalModeContextVariable, GlobalModeDecoratedVariable, GradModeVariable, inference_mode_context
from .tensor import fake_arg, record_op, SymNodeVariable, TensorVariable, uses_default_dtype, warnings_issued
from .numpy_arrays import numpy_scalar_to_torch, numpy_to_torch
from .methods import BoundMethodOfVariable


# torch C functions answered by another module (replayed.py: calls replayed after the graph),
# by the function's id (they live as long as torch)
TORCH_CALL_HANDLERS: dict = {}

# torch packages of plain Python classes over tensors: their classes are traced like user
# classes (``Normal(loc, scale).log_prob(x)``), their code is inlined (skipfiles.py)
_USER_LIKE_TORCH_PACKAGES = ("torch.distributions.",)


def is_user_like_torch_class(value) -> bool:
    """A class of torch's that is traced as user code (torch.distributions), or an instance of
    one (a callable ``Transform``: its Python ``__call__`` is inlined, as a user object's)."""
    cls = value if isinstance(value, type) else type(value)
    return static.module_name(cls).startswith(_USER_LIKE_TORCH_PACKAGES)


def is_torch_class(value) -> bool:
    """A class torch defines (under ``torch.``, not a package named torch-something)."""
    return isinstance(value, type) and static.defined_in_torch(value) and not is_user_like_torch_class(value)


_SIDE_EFFECTS = {
    torch.manual_seed: "torch.manual_seed() changes the global RNG",
    torch.seed: "torch.seed() changes the global RNG",
    torch.set_default_dtype: "torch.set_default_dtype() changes global state",
    torch.set_printoptions: "torch.set_printoptions() changes global state",
    torch.set_rng_state: "torch.set_rng_state() changes the global RNG",
    torch.get_rng_state: "torch.get_rng_state() reads the global RNG",
    torch.save: "torch.save() does I/O",
    torch.load: "torch.load() does I/O",
    torch.autograd.grad: "torch.autograd.grad() runs autograd outside the graph",
    torch.autograd.backward: "torch.autograd.backward() runs autograd outside the graph",
    torch.use_deterministic_algorithms: "changes global state",
    torch.set_num_threads: "changes global state",
    torch.set_anomaly_enabled if hasattr(torch, "set_anomaly_enabled") else torch.seed: "changes global state",
}
# keyed by the plain functions: torch._dynamo, imported by torch itself and by libraries, wraps
# some of them (torch.manual_seed), once or again later
_SIDE_EFFECTS = {inspect.unwrap(fn) if isinstance(fn, types.FunctionType) else fn: why
                 for fn, why in _SIDE_EFFECTS.items()}
# Functions whose result depends only on metadata: run on fakes, fold to a constant.
_METADATA = {torch.is_tensor, torch.is_floating_point, torch.is_complex, torch.numel,
             torch.is_storage, torch.result_type, torch.promote_types, torch.can_cast,
             torch.overrides.is_tensor_like}
_FROM_NUMPY = {torch.from_numpy, torch.as_tensor, torch.asarray, torch.tensor}
_GRAD_CLASSES = {torch.no_grad: False, torch.enable_grad: True}
# the legacy typed constructors (CPU), by the dtype they make
_LEGACY_CONSTRUCTORS = {torch.FloatTensor: torch.float32, torch.DoubleTensor: torch.float64,
                        torch.HalfTensor: torch.float16, torch.BFloat16Tensor: torch.bfloat16,
                        torch.LongTensor: torch.int64, torch.IntTensor: torch.int32, torch.ShortTensor: torch.int16,
                        torch.CharTensor: torch.int8, torch.ByteTensor: torch.uint8, torch.BoolTensor: torch.bool}


def _tracing_status_answers() -> dict:
    """Functions libraries call to ask "am I being compiled/traced?", and what a trace answers.

    Like torch.compile, a trace answers ``torch.compiler.is_compiling()`` with True:
    libraries (transformers) use it to pick the code path written for compilers
    (no ContextVar, no data-dependent checks); both paths compute the same result.
    torch.jit/fx/export/CUDA-graph tracing is never active inside a dynamo_lite trace.
    """
    import torch._utils
    import torch.jit

    answers = {torch.compiler.is_compiling: True, torch.compiler.is_dynamo_compiling: True,
               torch.compiler.is_exporting: False, torch.jit.is_tracing: False,
               torch.jit.is_scripting: False, torch._C._get_tracing_state: None}
    if hasattr(torch._utils, "is_compiling"):
        answers[torch._utils.is_compiling] = True
    if hasattr(torch.cuda, "is_current_stream_capturing"):
        answers[torch.cuda.is_current_stream_capturing] = False
    return answers


_TRACING_STATUS = _tracing_status_answers()


@functools.lru_cache(maxsize=None)
def _foreign_tracers() -> dict:
    """Entry points of the other tracers and compilers: called from traced code, the graph
    breaks before the call and the call runs natively (the frame hook leaves every frame they
    run alone, convert_frame.foreign_tracer).  Built on first use (torch.export is a big import)."""
    import torch.export
    import torch.fx.experimental.proxy_tensor
    import torch.jit

    tracers = {torch.jit.trace: "torch.jit.trace", torch.jit.trace_module: "torch.jit.trace_module",
               torch.jit.script: "torch.jit.script", torch.jit.freeze: "torch.jit.freeze",
               torch.fx.symbolic_trace: "torch.fx.symbolic_trace", torch.export.export: "torch.export.export",
               torch.fx.experimental.proxy_tensor.make_fx: "make_fx"}
    return {inspect.unwrap(fn): name for fn, name in tracers.items()}


def _foreign_tracer_name(fn):
    try:
        return _foreign_tracers().get(inspect.unwrap(fn) if isinstance(fn, types.FunctionType) else fn)
    except TypeError:  # unhashable callable
        return None


def _torch_compiled_inner(fn):
    """The function a torch.compile() wrapper runs (TorchDynamo marks its wrappers with the
    function to inline when a compiled region calls them), or None: not such a wrapper (a
    torch.compiler.disable() wrapper is not one either: it must run natively)."""
    if not isinstance(fn, types.FunctionType) or getattr(fn, "_torchdynamo_disable", False):
        return None
    inner = getattr(fn, "_torchdynamo_inline", None)
    if inner is None or inner is not getattr(fn, "_torchdynamo_orig_callable", None):
        return None
    return inner


def is_torch_compile_wrapper(fn) -> bool:
    """A function made by torch.compile() or torch.compiler.disable() (both run TorchDynamo's
    frame hook machinery when called natively: TorchVariable decides what a call does)."""
    return isinstance(fn, types.FunctionType) and hasattr(fn, "_torchdynamo_orig_callable")


def _is_tracing_status(fn) -> bool:
    try:
        return fn in _TRACING_STATUS
    except TypeError:  # unhashable callable
        return False


def _torch_check(tx, fn, args: list, kwargs: dict) -> VariableTracker:
    """``torch._check(cond, message)`` / ``torch._check_is_size(n)``: a condition known at trace
    time passes (nothing to do) or fails (Python raises it at this line); on a symbolic number it
    is asked of the ShapeEnv as torch.compile does (a guard on a size, a run-time check of a number
    read from tensor data)."""
    subject = args[0]
    if not isinstance(subject, SymNodeVariable) and subject.is_python_constant():
        value = subject.as_python_constant()
        passes = value is True if fn is torch._check else type(value) is int and value >= 0
        if passes and fn is torch._check and not kwargs.keys() - {"message"}:
            return ConstantVariable(None)
        raise GraphBreak(gb.OPERATION_RAISES, f"torch.{fn.__name__}() of {value!r}: Python raises it")
    if isinstance(subject, SymNodeVariable) and len(args) <= 2 and not kwargs:
        try:
            with warnings_issued() as caught:
                fn(fake_arg(subject))  # (the message is only made when the check fails)
        except Exception as e:  # noqa: BLE001 - false for the values of this call: Python raises it
            raise GraphBreak(gb.OPERATION_RAISES, f"torch.{fn.__name__}() failed at trace time") from e
        tx.output.shapes.note()
        for w in caught:  # (_check_is_size's FutureWarning): issued from the user's line after the graph
            VariableTracker.replay_warning(tx, str(w.message), w.category)
        return ConstantVariable(None)
    raise GraphBreak(gb.UNSUPPORTED_CALL, f"torch.{fn.__name__}() of {subject.describe()}")


def _torch_assert(tx, args: list, kwargs: dict) -> VariableTracker:
    """``torch._assert(condition, message)`` is ``assert condition, message``: a condition known at
    trace time (a constant, a fact about sizes, guarded) passes, or Python raises the
    AssertionError at this line; a tensor's truth breaks as a branch on it does."""
    if len(args) != 2 or kwargs or not (isinstance(args[0], (SymNodeVariable, TensorVariable))
                                        or args[0].is_python_constant()):
        raise GraphBreak(gb.UNSUPPORTED_CALL, "torch._assert() of a value other than a bool, a number or a tensor")
    if args[0].bool(tx):
        return ConstantVariable(None)
    raise GraphBreak(gb.OPERATION_RAISES, "torch._assert() fails: Python raises its AssertionError")


TORCH_CALL_HANDLERS[id(torch._assert)] = _torch_assert


def _group_tensors_by_device_and_dtype(tx, args: list, kwargs: dict) -> VariableTracker:
    """``torch._C._group_tensors_by_device_and_dtype(tensorlistlist, with_indices)`` (clip_grad_norm_,
    the foreach optimizers): grouping by metadata, which the fake tensors answer as the real ones
    will; the groups hold the callers' own tensor trackers."""
    if kwargs or not 1 <= len(args) <= 2 or not all(isinstance(a, TensorVariable) or a.is_python_constant()
                                                    for lst in args[0].unpack(tx) for a in lst.unpack(tx)):
        raise GraphBreak(gb.UNSUPPORTED_CALL, "torch._C._group_tensors_by_device_and_dtype of values other than "
                         "lists of tensors")
    trackers = {}
    fakes = []
    for lst in args[0].unpack(tx):
        row = []
        for a in lst.unpack(tx):
            fake = fake_arg(a)
            if isinstance(a, TensorVariable):
                trackers[id(fake)] = a
            row.append(fake)
        fakes.append(row)
    with_indices = args[1].as_python_constant() if len(args) == 2 else False
    try:
        with tx.output.fake_mode:
            grouped = torch._C._group_tensors_by_device_and_dtype(fakes, with_indices)
    except Exception as e:  # noqa: BLE001 - Python raises it
        raise GraphBreak(gb.OPERATION_RAISES, f"torch._C._group_tensors_by_device_and_dtype raised "
                         f"{type(e).__name__}") from e

    def back(value):
        if isinstance(value, torch.Tensor):
            return trackers[id(value)]
        if isinstance(value, list):
            return ListVariable([back(v) for v in value])
        if isinstance(value, tuple):
            return TupleVariable([back(v) for v in value])
        return ConstantVariable(value)

    return DictVariable({key: back(value) for key, value in grouped.items()})


TORCH_CALL_HANDLERS[id(torch._C._group_tensors_by_device_and_dtype)] = _group_tensors_by_device_and_dtype
# (its Python wrapper, under no_grad: grouping records nothing autograd would see)
TORCH_CALL_HANDLERS[id(torch.utils._foreach_utils._group_tensors_by_device_and_dtype)] = \
    _group_tensors_by_device_and_dtype


def _privateuse1_backend_name(tx, args: list, kwargs: dict) -> VariableTracker:
    """``torch._C._get_privateuse1_backend_name()`` (the device-type lists of foreach support and
    of parameters_to_vector): the process's name for it, guarded."""
    if args or kwargs:
        raise GraphBreak(gb.BAD_ARGUMENTS, "torch._C._get_privateuse1_backend_name() takes no arguments")
    name = torch._C._get_privateuse1_backend_name()
    tx.output.add_guard(guards.GlobalStateGuard("___torch._C._get_privateuse1_backend_name() == {n}",
                                                (("n", name),)))
    return ConstantVariable(name)


TORCH_CALL_HANDLERS[id(torch._C._get_privateuse1_backend_name)] = _privateuse1_backend_name


# what these answer while no dispatch mode is active: a new empty list, no modes
_NO_DISPATCH_MODES = {torch.utils._python_dispatch._get_current_dispatch_mode_stack: lambda: ListVariable([]),
                      torch._C._len_torch_dispatch_stack: lambda: ConstantVariable(0)}


class TorchVariable(KnownValueVariable):
    """A torch function, class or object reached through the torch namespace."""

    def __init__(self, value, source=None):
        super().__init__(source)
        self.value = value

    def _repr_body(self):
        return static.qualname(self.value)

    def describe(self):
        return f"torch {static.qualname(self.value)}"

    def var_getattr(self, tx, name):
        if is_torch_optimized_module(self.value) and self.source is not None:
            if name == "_orig_mod":
                return self._orig_mod(tx)
            if name not in vars(self.value) and not hasattr(type(self.value), name):
                return self._orig_mod(tx).var_getattr(tx, name)  # OptimizedModule.__getattr__ forwards them
        try:
            value = getattr(self.value, name)
        except AttributeError as e:
            raise GraphBreak(gb.MISSING_ATTRIBUTE, f"{self.describe()} has no attribute {name!r}") from e
        return tx.wrap(value, None)

    def call_function(self, tx, args, kwargs):
        fn = self.value
        if isinstance(kwargs.get("generator"), GeneratorVariable):
            return kwargs["generator"].draw(tx, fn, args, kwargs)
        if fn is torch.Generator:
            return GeneratorVariable.make(tx, args, kwargs)
        if fn in _FROM_NUMPY:  # an ndarray or numpy scalar of the trace (numpy_arrays.py)
            result = numpy_to_torch(tx, fn, args, kwargs) or numpy_scalar_to_torch(tx, fn, args, kwargs)
            if result is not None:
                return result
        if fn in _GRAD_CLASSES:
            ctx = GradModeVariable(_GRAD_CLASSES[fn], fn)
            if len(args) == 1 and not kwargs and not (args[0].is_python_constant() and args[0].as_python_constant() is None):
                # torch.no_grad(f): its __new__ returns no_grad()(f), the decorated function
                return ctx.call_function(tx, args, {})
            if kwargs or (args and not args[0].is_python_constant()) or len(args) > 1:
                raise GraphBreak(gb.UNSUPPORTED_CALL, f"{fn.__name__} with arguments")
            return ctx  # no_grad() or no_grad(None)
        if fn is torch.set_grad_enabled:
            if len(args) != 1 or not args[0].is_python_constant():
                raise GraphBreak(gb.VALUE_UNKNOWN, "torch.set_grad_enabled() with a mode not known at trace time")
            ctx = GradModeVariable(bool(args[0].as_python_constant()), fn, sets_on_init=True)
            ctx.prev = tx.output.grad_enabled
            tx.output.set_grad_enabled(ctx.enabled)
            return ctx
        if fn is torch.is_grad_enabled:
            return ConstantVariable(tx.output.grad_enabled)
        handler = TORCH_CALL_HANDLERS.get(id(fn))
        if handler is not None:
            return handler(tx, args, kwargs)
        if fn is torch.jit.annotate and len(args) == 2 and not kwargs:
            return args[1]  # a type hint for TorchScript; in Python it returns the value
        if not args and not kwargs and _is_tracing_status(fn):
            answer = _TRACING_STATUS[fn]
            if answer is True:  # the code takes its compiler path here: reported (pytest plugin)
                where = tx.frame_summary()
                tx.output.compiling_queries.append(f"{where.filename}:{where.lineno}")
            return ConstantVariable(answer)
        if is_torch_optimized_module(fn):
            if self.source is None or any(getattr(fn, h) for h in _MODULE_HOOK_DICTS):
                raise GraphBreak(gb.FOREIGN_TRACER, "a torch.compile()d module with hooks of its own: it runs natively")
            # TorchDynamo inlines a compiled module called from compiled code: so does this trace
            return self._orig_mod(tx).call_function(tx, args, kwargs)
        if isinstance(fn, (torch.jit.ScriptModule, torch.jit.ScriptFunction)):
            raise GraphBreak(gb.FOREIGN_TRACER, f"calling TorchScript ({type(fn).__name__}): the TorchScript "
                             "interpreter runs it natively")
        if is_torch_compile_wrapper(fn) and getattr(fn, "_torchdynamo_disable", False) \
                and _foreign_tracer_name(fn) is None:
            inner = inspect.unwrap(fn)
            raise GraphBreak(gb.USER_DISABLED, f"{static.qualname(inner)} is marked torch.compiler.disable: Python "
                             "runs it (frames it calls are captured on their own)")
        tracer = _foreign_tracer_name(fn)
        if tracer is not None:
            raise GraphBreak(gb.FOREIGN_TRACER, f"{tracer}() traces the code it is given itself: it runs natively")
        if fn is torch.compile:
            return _nested_compile(tx, args, kwargs)
        inner = _torch_compiled_inner(fn)
        if inner is not None:
            # a torch.compile()d function called from compiled code: its code is traced into this
            # graph, as TorchDynamo does (the result is the same; only the backend differs)
            inner_source = AttrSource(self.source, "_torchdynamo_inline") if self.source is not None else None
            return tx.wrap(inner, inner_source).call_function(tx, args, kwargs)
        if fn is torch.get_default_dtype:
            tx.output.guard_default_dtype()
            return ConstantVariable(torch.get_default_dtype())
        if fn in (torch._check, torch._check_is_size) and args:
            return _torch_check(tx, fn, args, kwargs)
        if fn in _NO_DISPATCH_MODES and not args and not kwargs:
            # no dispatch mode is active where compiled code runs (every entry's NoOtherTracerGuard):
            # nn.MultiheadAttention's and TransformerEncoderLayer's fast-path checks ask
            return _NO_DISPATCH_MODES[fn]()
        if fn is torch.inference_mode:
            return _inference_mode(tx, args, kwargs)
        if fn is torch.is_inference_mode_enabled and not args and not kwargs:
            tx.output.guard_inference_mode()
            return ConstantVariable(torch.is_inference_mode_enabled())  # the trace enters blocks for real
        if fn is torch.autocast:
            return _autocast(tx, fn, args, kwargs)
        plain = inspect.unwrap(fn) if isinstance(fn, types.FunctionType) else fn
        if plain is _MANUAL_SEED:
            seeded = _seed_before_the_graph(tx, fn, args, kwargs)
            if seeded is not None:
                return seeded
        if plain in _SIDE_EFFECTS:
            raise GraphBreak(gb.SIDE_EFFECT, _SIDE_EFFECTS[plain])
        if fn is torch.nn.init.calculate_gain and all(v.is_python_constant() for v in [*args, *kwargs.values()]):
            try:  # plain Python arithmetic over its arguments
                return ConstantVariable(fn(*[a.as_python_constant() for a in args],
                                           **{k: v.as_python_constant() for k, v in kwargs.items()}))
            except Exception as e:  # noqa: BLE001 - Python raises it
                raise GraphBreak(gb.OPERATION_RAISES, f"calculate_gain raised {type(e).__name__}") from e
        if fn is torch.typename and len(args) == 1 and not kwargs and isinstance(args[0], TensorVariable):
            return args[0].call_method(tx, "type", [], {})  # torch.typename(t) is t.type()
        if fn is torch.Size:
            items = args[0].unpack(tx) if args else []
            return SizeVariable(items)
        if fn in (torch.device, torch.dtype, torch.finfo, torch.iinfo) or fn in _METADATA:
            if fn in _METADATA and any(isinstance(a, TensorVariable) for a in args):
                fakes = [fake_arg(a) for a in args], {k: fake_arg(v) for k, v in kwargs.items()}
                with tx.output.fake_mode:
                    value = fn(*fakes[0], **fakes[1])
                if uses_default_dtype(value, *fakes):  # torch.result_type(int_tensor, 1.0)
                    tx.output.guard_default_dtype()
                return wrap_constant_result(value)
            if fn is torch.is_tensor and len(args) == 1 and not kwargs and not args[0].is_python_constant():
                # torch.is_tensor(obj) is isinstance(obj, torch.Tensor): the type answers it
                # (a list of tensors, a user object; python_type breaks when the type is unknown)
                return ConstantVariable(issubclass(args[0].python_type(), torch.Tensor))
            if all(a.is_python_constant() for a in args) and all(v.is_python_constant() for v in kwargs.values()):
                consts = [a.as_python_constant() for a in args], {k: v.as_python_constant() for k, v in kwargs.items()}
                try:
                    value = fn(*consts[0], **consts[1])
                except Exception as e:  # noqa: BLE001
                    raise GraphBreak(gb.OPERATION_RAISES, f"{self.describe()} raised {type(e).__name__}") from e
                if fn in _METADATA and uses_default_dtype(value, *consts):  # torch.result_type(1, 2.5)
                    tx.output.guard_default_dtype()
                return ConstantVariable(value)
        if fn in _LEGACY_CONSTRUCTORS and len(args) == 1 and not kwargs and _number_sequence(args[0]):
            # torch.LongTensor([1, 2]): torch.tensor(data, dtype=...) (the sizes form,
            # torch.FloatTensor(2, 3), is uninitialised memory and stays a break below)
            return record_op(tx, "call_function", torch.tensor, [args[0]],
                             {"dtype": ConstantVariable(_LEGACY_CONSTRUCTORS[fn])})
        if fn is torch.Tensor and len(args) == 1 and not kwargs and _number_sequence(args[0]):
            # torch.Tensor([gamma]) (kornia): the default dtype's legacy constructor, as above
            tx.output.guard_default_dtype()
            return record_op(tx, "call_function", torch.tensor, [args[0]],
                             {"dtype": ConstantVariable(torch.get_default_dtype())})
        if isinstance(fn, type):
            if issubclass(fn, torch.nn.Module):
                made = VariableTracker.build_module(tx, fn, list(args), dict(kwargs))
                if made is not None:
                    return made
                raise GraphBreak(gb.MODULE_CREATED, f"creating a module ({fn.__name__}) inside a compiled region")
            if issubclass(fn, torch.autograd.Function):
                raise GraphBreak(gb.UNSUPPORTED_CALL, "constructing an autograd.Function")
            if fn is torch.nn.Parameter:
                raise GraphBreak(gb.MODULE_CREATED, "creating an nn.Parameter inside a compiled region")
            if fn is torch.Tensor:
                raise GraphBreak(gb.UNSUPPORTED_CALL, "calling torch.Tensor() directly")
            raise GraphBreak(gb.UNSUPPORTED_CALL, f"calling torch class {fn.__name__}")
        # (ConstantVariable only: asking a symbolic int whether it is a constant specialises it)
        if not kwargs and all(isinstance(a, ConstantVariable) and type(a.value) is str for a in args):
            answer = _setting_query(tx, fn, tuple(a.value for a in args))
            if answer is not None:
                return answer
        if is_collective(fn):
            return call_collective(tx, fn, list(args), kwargs)
        if not _graphable(fn):
            raise GraphBreak(gb.UNSUPPORTED_CALL, f"{self.describe()} is not a tensor operation dynamo_lite puts in graphs")
        return record_op(tx, "call_function", fn, list(args), kwargs)

    def _orig_mod(self, tx):
        return tx.wrap(self.value._orig_mod, AttrSource(self.source, "_orig_mod"))


_MODULE_HOOK_DICTS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")


def is_torch_optimized_module(value) -> bool:
    """The module torch.compile(module) returns (TorchDynamo's OptimizedModule)."""
    cls = type(value)
    return isinstance(value, torch.nn.Module) and cls.__name__ == "OptimizedModule" and \
        cls.__module__.split(".") == ["torch", "_dynamo", "eval_frame"] and "_orig_mod" in vars(value).get("_modules", {})


class DisabledFunctionVariable(ObjectVariable):
    """A function the user marked ``dynamo_lite.disable`` (api.disable: a ``_C.CallWithHookOff``
    around it) or ``disable(fn, recursive=False)`` (the function itself, marked): calling it breaks
    the graph, and Python runs it, with capture off or, for the latter, capturing what it calls."""

    def __init__(self, value, source=None):
        super().__init__(value, source)
        self.frame_only = type(value) is types.FunctionType
        # (a member of the C type: reading it runs no Python)
        self.wrapped = value if self.frame_only else value.__wrapped__

    def describe(self):
        return f"{static.qualname(self.wrapped)} (marked dynamo_lite.disable)"

    def call_function(self, tx, args, kwargs):
        if self.frame_only:
            raise GraphBreak(gb.USER_DISABLED, f"{static.qualname(self.wrapped)} is marked dynamo_lite.disable("
                             "recursive=False): Python runs it, and the functions it calls are captured")
        raise GraphBreak(gb.USER_DISABLED, f"{static.qualname(self.wrapped)} is marked dynamo_lite.disable: "
                         "Python runs it without capture")


class FxProxyVariable(ObjectVariable):
    """A ``torch.fx.Proxy`` of a graph the user's code builds by hand: every attribute read,
    call, comparison or truth test on it runs torch.fx's Python, which records a node in that
    graph (or raises).  The trace does none of them: each breaks the graph, and Python does it
    once, where eager does."""

    def describe(self):
        return f"a {static.qualname(self.value)} (torch.fx)"

    def _recorded(self, what: str) -> GraphBreak:
        return GraphBreak(gb.FOREIGN_TRACER, f"{what} {self.describe()} records a node in the fx graph it belongs "
                          "to: Python does it")

    def var_getattr(self, tx, name):
        raise self._recorded(f"reading .{name} of")

    def call_function(self, tx, args, kwargs):
        raise self._recorded("calling")

    def call_method(self, tx, name, args, kwargs):
        raise self._recorded(f"{name}() on")


_MANUAL_SEED = inspect.unwrap(torch.manual_seed)


def _seed_before_the_graph(tx, fn, args, kwargs):
    """``torch.manual_seed(n)`` reached before the graph does anything (no op recorded, no
    effect logged): generated code calls it before the graph, which is the same as eager
    (nothing before it in this graph reads or changes the RNG, nor can fail).  Its result
    (the default generator) may only be dropped.  None: not so (the graph breaks)."""
    if len(args) != 1 or kwargs or not args[0].is_python_constant() or type(args[0].as_python_constant()) is not int:
        return None
    output = tx.output
    if any(n.op != "placeholder" for n in output.graph.nodes) or not output.side_effects.is_empty() \
            or output.global_modes:
        return None
    seed = args[0].as_python_constant()
    try:
        torch.Generator().manual_seed(seed)  # the seed is valid (else Python raises at the call)
    except Exception:  # noqa: BLE001
        return None
    step, where = tx.root().steps, tx.user_stack()
    output.prologue_calls.append((fn, (seed,)))
    return DroppedResultVariable("torch.manual_seed()", step, where)


def _is_cpu_device(device) -> bool:
    """Is ``device`` (a constant: "cpu", torch.device("cpu"), ...) the CPU?"""
    if not isinstance(device, (str, torch.device)):
        return False
    try:
        return torch.device(device).type == "cpu"
    except RuntimeError:  # not a device: Python raises it at the call
        return False


class GeneratorVariable(VariableTracker):
    """A CPU ``torch.Generator()`` made in the frame, seeded there with ``manual_seed(n)``: its
    numbers follow from its seed alone (no other code can reach it before the frame hands it
    out), like ``random.Random(seed)`` (stdlib.py).  The trace keeps a twin in the same state;
    generated code makes the generator, seeds it and draws from it before the graph, in trace
    order (``OutputGraph.random_calls``), and each draw (``torch.randn(..., generator=g)`` with
    constant arguments) is a graph input: the values eager computes, and the generator the
    caller may get is in the same state.  A generator never seeded (its seed is the default
    one, as eager's) is used as it is.  Anything else done with it breaks the graph."""

    mutable_local = True

    def __init__(self, twin: torch.Generator, source):
        super().__init__(source)
        self.twin = twin

    @staticmethod
    def make(tx, args, kwargs):
        given = [*args, *kwargs.values()]  # torch.Generator(device="cpu"), or the device positional
        device = given[0].as_python_constant() if len(given) == 1 and given[0].is_python_constant() else None
        if len(given) > 1 or set(kwargs) - {"device"} or given and not _is_cpu_device(device):
            raise GraphBreak(gb.UNSUPPORTED_CALL, "torch.Generator() other than a CPU generator")
        return GeneratorVariable(torch.Generator(), _replay(tx, torch.Generator, (), {}))

    def python_type(self):
        return torch.Generator

    def describe(self):
        return "a torch.Generator made in the frame"

    def var_getattr(self, tx, name):
        if name == "manual_seed":
            return BoundMethodOfVariable(self, name)
        raise GraphBreak(gb.UNSUPPORTED_ATTRIBUTE, f"torch.Generator.{name} of a generator made in the frame")

    def call_method(self, tx, name, args, kwargs):
        if name == "manual_seed" and len(args) == 1 and not kwargs and isinstance(args[0], InputConstantVariable) \
                and args[0].convert is int:
            # manual_seed(int(seed)) of a numpy seed read from the frame: the seed is read when the
            # frame runs (no value guard); the twin takes this call's, the draws are graph inputs
            seed = args[0].peek()
            try:
                self.twin.manual_seed(seed)
            except Exception as e:  # noqa: BLE001 - Python raises it where eager does
                raise GraphBreak(gb.OPERATION_RAISES, f"Generator.manual_seed({seed}) raises {type(e).__name__}") from e
            _replay(tx, torch.Generator.manual_seed,
                    (runtime.DrawRef(self.source.index), tx.output.random_input(args[0].source, int)), {})
            return self
        if name == "manual_seed" and len(args) == 1 and not kwargs and args[0].is_python_constant() and \
                type(args[0].as_python_constant()) is int:
            seed = args[0].as_python_constant()
            try:
                self.twin.manual_seed(seed)
            except Exception as e:  # noqa: BLE001 - Python raises it where eager does
                raise GraphBreak(gb.OPERATION_RAISES, f"Generator.manual_seed({seed}) raises {type(e).__name__}") from e
            _replay(tx, torch.Generator.manual_seed, (runtime.DrawRef(self.source.index), seed), {})
            return self  # manual_seed returns the generator
        raise GraphBreak(gb.UNSUPPORTED_CALL, f"torch.Generator.{name}() on a generator made in the frame "
                         "(only manual_seed(int) is traced)")

    def draw(self, tx, fn, args, kwargs):
        """``fn(*args, generator=self, **kwargs)`` with constant arguments: made before the
        graph on the real generator, now on the twin (the graph's example input)."""
        rest = {k: v for k, v in kwargs.items() if k != "generator"}
        if not all(a.is_python_constant() for a in [*args, *rest.values()]):
            raise GraphBreak(gb.VALUE_UNKNOWN, f"{getattr(fn, '__name__', fn)}(generator=g) of a generator made in "
                             "the frame with arguments not known at trace time")
        const_args = tuple(a.as_python_constant() for a in args)
        const_kwargs = {k: v.as_python_constant() for k, v in rest.items()}
        state = self.twin.get_state()
        try:
            real = fn(*const_args, generator=self.twin, **const_kwargs)
        except Exception as e:  # noqa: BLE001 - Python raises it where eager does
            self.twin.set_state(state)
            raise GraphBreak(gb.OPERATION_RAISES, f"{getattr(fn, '__name__', fn)}(generator=g) raises "
                             f"{type(e).__name__}") from e
        if type(real) is not torch.Tensor or real.requires_grad or real.device.type != "cpu":
            self.twin.set_state(state)
            raise GraphBreak(gb.UNSUPPORTED_CALL, f"{getattr(fn, '__name__', fn)}(generator=g) returning "
                             "other than a plain CPU tensor")
        source = _replay(tx, runtime.generator_draw, (fn, runtime.DrawRef(self.source.index), const_args,
                                                      const_kwargs), {})
        output = tx.output
        fake = output.fake_mode.from_tensor(real, static_shapes=True)
        node = output.add_replayed_input(source, real, fake)
        return TensorVariable(node, fake)

    def reconstruct(self, cg):
        self.source.reconstruct(cg)


def _replay(tx, fn, args, kwargs) -> RandomDrawSource:
    """Log a call generated code makes before the graph; the source of its result."""
    output = tx.output
    output.random_calls.append((fn, args, kwargs, None))
    return RandomDrawSource(len(output.random_calls) - 1)


class DroppedResultVariable(VariableTracker):
    """The result of a call made before the graph (``torch.manual_seed``), which the traced
    code drops.  Any use makes the trace stop before the call, and Python makes it."""

    def __init__(self, what: str, step: int, where: list):
        super().__init__()
        self.what = what
        self.step = step
        self.where = where

    def describe(self):
        return f"the result of {self.what}"

    def _python_calls(self, why: str) -> GraphBreak:
        brk = GraphBreak(gb.SIDE_EFFECT, f"{self.what} whose result {why}: Python calls it")
        brk.restart_step = self.step
        brk.user_stack = list(self.where)
        return brk

    def var_getattr(self, tx, name):
        raise self._python_calls(f"is used (.{name})")

    def call_method(self, tx, name, args, kwargs):
        raise self._python_calls(f"is used (.{name}())")

    def reconstruct(self, cg):
        raise self._python_calls("outlives the traced code")

    def can_reconstruct(self):
        return False


def _inference_mode(tx, args, kwargs):
    """``torch.inference_mode(mode=True)``, or ``torch.inference_mode`` applied to a function."""
    if len(args) == 1 and not kwargs and not args[0].is_python_constant():
        # @torch.inference_mode (no parentheses)
        return GlobalModeDecoratedVariable(inference_mode_context(True, tx.root().steps, tx.user_stack()), args[0])
    if len(args) + len(kwargs) > 1 or set(kwargs) - {"mode"}:
        raise GraphBreak(gb.BAD_ARGUMENTS, "torch.inference_mode() takes one argument, mode")
    mode = (args or list(kwargs.values()) or [ConstantVariable(True)])[0]
    if not mode.is_python_constant() or type(mode.as_python_constant()) is not bool:
        raise GraphBreak(gb.VALUE_UNKNOWN, "torch.inference_mode(mode) with a mode not known at trace time")
    return inference_mode_context(mode.as_python_constant(), tx.root().steps, tx.user_stack())


def _autocast(tx, cls, args, kwargs):
    """``torch.autocast(device_type, dtype=None, enabled=True, cache_enabled=None)`` (also
    ``torch.amp.autocast``): entered in the graph with ``torch.amp._enter_autocast``, as
    TorchDynamo does.  Arguments must be known at trace time, and making the context must
    issue no warning (an unsupported dtype disables autocast with a warning: Python does it)."""
    if not all(a.is_python_constant() for a in [*args, *kwargs.values()]):
        raise GraphBreak(gb.VALUE_UNKNOWN, f"{cls.__name__}() with arguments not known at trace time")
    values = [a.as_python_constant() for a in args]
    options = {k: v.as_python_constant() for k, v in kwargs.items()}
    try:
        bound = inspect.signature(torch.autocast.__init__).bind(None, *values, **options)
    except TypeError as e:
        raise GraphBreak(gb.BAD_ARGUMENTS, f"{cls.__name__}(): {e}") from e
    bound.apply_defaults()
    vals = tuple(v for k, v in bound.arguments.items() if k != "self")
    try:
        with warnings_issued() as caught:
            made = torch.autocast(*vals)
    except Exception as e:  # noqa: BLE001 - Python raises it
        raise GraphBreak(gb.OPERATION_RAISES, f"{cls.__name__}() raised {type(e).__name__}") from e
    del made
    if caught:
        raise GraphBreak(gb.UNSUPPORTED_CONTEXT_MANAGER, f"{cls.__name__}{tuple(vals)!r} changes its arguments "
                         "(with a warning): Python runs it")
    return GlobalModeContextVariable(cls, torch.amp._enter_autocast, vals, torch.amp._exit_autocast,
                                     tx.root().steps, tx.user_stack())


def _number_sequence(var) -> bool:
    """A list or tuple of Python numbers known at trace time (nested ones too)."""
    try:
        value = var.constant_copy()
    except Exception:  # noqa: BLE001 - not made of constants (the protocol refuses with a break)
        return False

    def numbers(v):
        return type(v) in (bool, int, float) or type(v) in (list, tuple) and all(numbers(i) for i in v)
    return type(value) in (list, tuple) and numbers(value)


def _nested_compile(tx, args, kwargs):
    """``torch.compile(fn, **options)`` in traced code: a function whose calls are traced into
    this graph (TorchDynamo inlines nested compiles the same way)."""
    if len(args) != 1 or not all(v.is_python_constant() for v in kwargs.values()):
        raise GraphBreak(gb.FOREIGN_TRACER, "torch.compile() with arguments dynamo_lite does not model: it runs natively")
    options = {k: v.as_python_constant() for k, v in kwargs.items()}
    if not isinstance(args[0], BaseUserFunctionVariable):
        raise GraphBreak(gb.FOREIGN_TRACER, "torch.compile() of a module or decorator form in traced code: "
                         "it runs natively")
    return NestedCompileVariable(args[0], options)


_COMPILE_HOOK_OFF = _C.CallWithHookOff(torch.compile)


class NestedCompileVariable(VariableTracker):
    """The result of ``torch.compile(fn, **options)`` made in traced code: calls trace ``fn``;
    rebuilt (when it escapes) by calling torch.compile again."""

    def __init__(self, fn_var, options: dict):
        super().__init__(None)
        self.fn_var = fn_var
        self.options = options

    def _repr_body(self):
        return f"torch.compile({self.fn_var!r})"

    def describe(self):
        return "a torch.compile()d function"

    def python_type(self):
        return types.FunctionType

    def call_function(self, tx, args, kwargs):
        return self.fn_var.call_function(tx, args, kwargs)

    def reconstruct(self, cg):
        cg.load_callable(_COMPILE_HOOK_OFF)  # torch.compile() may import and run backend code
        cg.reconstruct(self.fn_var)
        for v in self.options.values():
            cg.load_const(v)
        cg.call(1 + len(self.options), tuple(self.options))

    def can_reconstruct(self):
        return self.fn_var.can_reconstruct()


_GRAPHABLE_PY_MODULES = ("torch.nn.functional", "torch.functional", "torch._tensor", "torch.nn.init",
                         "torch.random", "torch._refs", "torch.special", "torch.fft", "torch.linalg",
                         "torch._C._nn", "torch._C._fft", "torch._C._linalg", "torch._C._special")


def _graphable(fn) -> bool:
    if isinstance(fn, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return True
    if isinstance(fn, types.BuiltinFunctionType) or type(fn).__name__ in ("builtin_function_or_method",
                                                                            "method_descriptor"):
        return True
    module = getattr(fn, "__module__", "") or ""
    if isinstance(fn, types.FunctionType):
        if fn.__name__ in ("manual_seed", "seed", "fork_rng", "initial_seed"):
            return False
        return module in _GRAPHABLE_PY_MODULES or module.startswith("torch.nn.functional")
    return False


def _setting_query(tx, fn, args: tuple = ()):
    """A query of a global setting, of no arguments or of device names
    (``torch.backends.mha.get_fastpath_enabled()``, ``torch.is_anomaly_enabled()``,
    ``torch.get_num_threads()``, ``torch.get_autocast_dtype("cpu")``): the answer now, guarded
    by asking again on every call.  None: not such a query (Python or the graph handles it)."""
    name = getattr(fn, "__name__", "")
    if not name.startswith(("is_", "are_", "get_")) or name.startswith("get_rng") or \
            args and "autocast" not in name:
        return None
    if tx.output.global_modes and ("autocast" in name or "inference" in name):
        # inside an autocast / inference-mode block the trace entered for real: the answer
        # follows from the block and the state the frame started in (guarded on entering it,
        # for the cpu and cuda autocast states)
        if any(a not in ("cpu", "cuda") for a in args):
            raise GraphBreak(gb.VALUE_UNKNOWN, f"{name}{args!r} inside an autocast or inference-mode block")
        return ConstantVariable(fn(*args))
    try:
        value = fn(*args)
    except Exception:  # noqa: BLE001 - not a plain query (e.g. needs a device): left to Python
        return None
    if type(value) not in (bool, int, str) and not isinstance(value, torch.dtype):
        return None
    if args:
        tx.output.add_guard(guards.GlobalStateGuard("{f}(*{a}) == {v}", (("f", fn), ("a", args), ("v", value))))
    else:
        tx.output.add_guard(guards.GlobalStateGuard("{f}() == {v}", (("f", fn), ("v", value))))
    return ConstantVariable(value)


# ---- torch.distributions.kl_divergence --------------------------------------------------------

def _kl_divergence(tx, args, kwargs):
    """``kl_divergence(p, q)``: its implementation is looked up by the classes of ``p`` and
    ``q`` in a registry dict keyed by class pairs (memoised in another, inside a try block),
    which the trace does at trace time: the function found is inlined.  The registry is
    guarded (``register_kl`` changes it).  None: inline kl_divergence itself."""
    kl = torch.distributions.kl
    if len(args) != 2 or kwargs:
        return None
    try:
        types_pq = (args[0].python_type(), args[1].python_type())
    except Exception:  # noqa: BLE001 - not a tracker with a known class
        return None
    fun = kl._dispatch_kl(*types_pq)
    if fun is NotImplemented:
        return None  # kl_divergence raises NotImplementedError: inlined, it does
    tx.output.add_guard(guards.GlobalStateGuard("{r} == {snapshot}", (("r", kl._KL_REGISTRY),
                                                                      ("snapshot", dict(kl._KL_REGISTRY)))))
    return tx.wrap(fun, None).call_function(tx, list(args), {})


PYTHON_FUNCTION_HANDLERS[torch.distributions.kl.kl_divergence] = _kl_divergence
