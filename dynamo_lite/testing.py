"""The one differential harness: run code eagerly and compiled from identical starting
states and compare everything a user can observe; plus a counting backend.

    CompileCounter(backend=None) backend that counts graphs and ops, runs graphs as they are
                                 (or hands them on to ``backend``, e.g. aot_eager's callable)
    Observed                     what one call showed: return value or exception (type and
                                 message), stdout, stderr, log records of the "acceptance"
                                 logger, warnings (category, message, file, line), arguments
                                 after the call (mutated inputs), grads of tensor arguments,
                                 grad mode, RNG state, a ``snapshot()`` of touched globals
                                 and the exception of a backward after the call;
                                 optionally (``views=True``) the layout, autograd flags and
                                 aliasing of every returned tensor and the input tensors right
                                 after the call, and (``structure=True``) a ``picture`` of
                                 result, arguments and snapshot (identity/aliasing, generator
                                 state) with the exception chain (cause, context, last frame)
    observe(fn, args, kwargs)    one call -> Observed (what is recorded is chosen by options)
    compare(eager, comp)         asserts two Observed are equal, field by field
    assert_same(a, b)            deep comparison of two values as a user would see them (a
                                 module: type, training, parameters with requires_grad and
                                 grads, every buffer persistent or not)
    picture(obj)                 comparable picture of a value that also shows identity
    normalize(obj)               numpy values, Generators, sets, deques as comparable data
    run_both(fn, *args)          one eager and one compiled call on deep copies, same RNG state
    assert_same_as_eager(fn, *args)      run_both + compare; returns the compiled Observed
    check(fn, *args)             seeded call each way (warnings, logs, grads, ``reset``/
                                 ``snapshot`` hooks, optional backward); >= ``graphs`` captured
    check_calls(fn, calls)       the same sequence of calls eagerly and through one compiled fn
                                 (a call is an args tuple, or a factory making fresh inputs)
    twins(factory, seed=0)       two identical modules: (eager one, one to compile)
    check_module(factory, steps) two modules from the same seed (or ``twins``), one compiled,
                                 each step (a function of the module, or an (args, kwargs)
                                 call of it) on both
    check_breaks(fn, *args, breaks=n)    assert_same_as_eager and exactly n graph breaks
    seed_all(seed=SEED)          seeds torch, random and numpy; LOG is the "acceptance" logger
    recording()                  (events, context manager): the structured events of a block;
                                 event_kinds(events) names their types
    line_of(fn, text)            the line number of the first line of ``fn`` containing ``text``
    print_with_graph_break       print, and a graph break where compiled code calls it

Every run starts from the same RNG state and, when ``reset`` is given, from the same
global state: a test that mutates globals passes ``reset`` (and ``snapshot`` to compare
them) so the eager run cannot leak into the compiled one.
Tested by the whole test-suite (tests/), which runs every comparison through it.
"""
from __future__ import annotations

import collections
import contextlib
import copy
import dataclasses
import inspect
import io
import logging
import os
import random
import re
import traceback
import warnings as _warnings
from typing import Any, Callable, Optional, Sequence

import torch

import dynamo_lite

from .backends import lookup_backend
from .report import events
from .report.explain import build_explain_output

try:
    import numpy as np
except ImportError:  # pragma: no cover - numpy is a test dependency
    np = None

SEED = 1234
LOG = logging.getLogger("acceptance")

__all__ = ["SEED", "LOG", "CompileCounter", "Observed", "observe", "compare", "assert_same", "normalize",
           "picture", "run_both", "assert_same_as_eager", "check", "check_calls", "twins", "check_module", "check_breaks",
           "seed_all", "recording", "event_kinds", "line_of", "print_with_graph_break"]


class CompileCounter:
    """A backend that records what it is given and runs graphs as they are, or through
    ``backend`` (a backend callable, e.g. ``dynamo_lite.backends.lookup_backend("aot_eager")[0]``)."""

    def __init__(self, backend: Optional[Callable] = None):
        self.backend = backend
        self.frame_count = 0
        self.op_count = 0
        self.graphs: list[torch.fx.GraphModule] = []

    @property
    def runs_graph_as_is(self) -> bool:
        """Are the graph's ops run as they are (no backend, or backend eager)?  convert_frame asks,
        to keep in the graph what only AOTAutograd would compute otherwise."""
        return self.backend is None or self.backend is lookup_backend("eager")[0] or \
            getattr(self.backend, "runs_graph_as_is", False) is True

    def __call__(self, gm: torch.fx.GraphModule, example_inputs):
        self.frame_count += 1
        self.graphs.append(gm)
        self.op_count += sum(1 for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module"))
        return gm.forward if self.backend is None else self.backend(gm, example_inputs)

    def clear(self):
        self.frame_count = 0
        self.op_count = 0
        self.graphs.clear()


def seed_all(seed: int = SEED) -> None:
    torch.manual_seed(seed)
    random.seed(seed)
    if np is not None:
        np.random.seed(seed)


# ---------------------------------------------------------------------------------------- one call

@dataclasses.dataclass
class Observed:
    """Everything observable about one call; a field left ``None`` was not recorded.

    ``views`` (one entry per returned tensor): shape, stride, storage offset, dtype,
    requires_grad, is_leaf, whether grad_fn is None, and which input tensors and which
    other returned tensors it is (``is``) or shares storage with; ``inputs``: the input
    tensors (of the arguments and of ``watch``) right after the call, before any backward.
    ``structure``: ``picture`` of (value, args, kwargs) and of the snapshot; ``chain``:
    the exception with its args, attributes, last traceback frame, cause and context."""

    value: Any = None
    exception: Optional[BaseException] = None
    backward_exception: Optional[BaseException] = None
    stdout: str = ""
    stderr: Optional[str] = None
    logs: Optional[list] = None
    warnings: Optional[list] = None
    args: tuple = ()
    kwargs: dict = dataclasses.field(default_factory=dict)
    grads: Optional[list] = None
    grad_enabled: bool = True
    rng: Any = None
    state: Any = None
    views: Optional[list] = None
    inputs: Optional[list] = None
    structure: Any = None
    chain: Any = None


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records: list = []

    def emit(self, record):
        self.records.append((record.name, record.levelname, record.getMessage()))


@contextlib.contextmanager
def _capture_logs(enabled: bool):
    if not enabled:
        yield None
        return
    handler = _Records()
    old_level, old_prop = LOG.level, LOG.propagate
    LOG.addHandler(handler)
    LOG.setLevel(logging.DEBUG)
    LOG.propagate = False
    try:
        yield handler.records
    finally:
        LOG.removeHandler(handler)
        LOG.setLevel(old_level)
        LOG.propagate = old_prop


@contextlib.contextmanager
def _capture_warnings(enabled: bool):
    if not enabled:
        yield None
        return
    with _warnings.catch_warnings(record=True) as w:
        _warnings.simplefilter("always")
        yield w


def _tensors(obj, out, seen):
    if id(obj) in seen:
        return out
    seen.add(id(obj))
    if isinstance(obj, torch.Tensor):
        out.append(obj)
    elif isinstance(obj, torch.nn.Module):
        out.extend(obj.parameters())
        out.extend(obj.buffers())
    elif isinstance(obj, dict):
        for v in obj.values():
            _tensors(v, out, seen)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _tensors(v, out, seen)
    return out


def _grads(obj) -> list:
    with _warnings.catch_warnings():
        _warnings.simplefilter("ignore")  # .grad of a non-leaf tensor: None, with a warning
        return [None if t.grad is None else t.grad.detach().clone() for t in _tensors(obj, [], set())]


def _shares(a: torch.Tensor, b: torch.Tensor) -> bool:
    return bool(a.numel() and b.numel()) and a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def _views(outputs: list, inputs: list) -> list:
    """Per returned tensor: layout, autograd flags, and which inputs / other outputs it is or shares with."""
    def related(t, ts):
        return tuple(i for i, x in enumerate(ts) if t is x), tuple(i for i, x in enumerate(ts) if _shares(t, x))

    return [(tuple(t.shape), t.stride(), t.storage_offset() if t.numel() else 0, t.dtype, t.requires_grad,
             t.is_leaf, t.grad_fn is None, related(t, inputs), related(t, outputs)) for t in outputs]


def _default_loss(value):
    """1.5 * the sum of every returned float/complex tensor that requires grad (|z| for complex);
    None when there is none."""
    ts = [t for t in _tensors(value, [], set()) if t.requires_grad and (t.is_floating_point() or t.is_complex())]
    if not ts:
        return None
    return sum((t.abs() if t.is_complex() else t).mul(1.5).sum() for t in ts)


def _rng_state():
    state = {"python": random.getstate(), "torch": torch.get_rng_state()}
    if np is not None:
        state["numpy"] = np.random.get_state()
    return state


def _set_rng_state(state) -> None:
    random.setstate(state["python"])
    torch.set_rng_state(state["torch"])
    if "numpy" in state:
        np.random.set_state(state["numpy"])


def _copy_state(state):
    try:
        return copy.deepcopy(state)
    except Exception:  # noqa: BLE001 - a snapshot that cannot be copied is compared as it is
        return state


def observe(fn: Callable, args: tuple = (), kwargs: Optional[dict] = None, *, seed: Optional[int] = None,
            reset: Optional[Callable] = None, snapshot: Optional[Callable] = None, backward=False,
            warnings: bool = False, logs: bool = False, grads: bool = False, stderr: bool = False,
            rng: bool = False, views: bool = False, watch=(), structure: bool = False) -> Observed:
    """Call ``fn(*args, **kwargs)`` (after ``reset()`` and ``seed_all(seed)`` when given) and record it.

    ``backward``: True (1.5 * the sum of the returned tensors that require grad) or
    ``loss(value) -> tensor``: backward after the call, its exception recorded as
    ``backward_exception``, grads recorded; ``warnings``/``logs``/``grads``/``stderr``/``rng``:
    also record those; ``views``: record ``views`` and ``inputs``; ``watch``: more objects
    (e.g. the base of a view argument, a module) whose tensors count as inputs (their state
    and grads are recorded too); ``structure``: record ``structure`` and ``chain``;
    ``snapshot()`` runs after."""
    kwargs = {} if kwargs is None else kwargs
    out = Observed(args=args, kwargs=kwargs)
    if reset is not None:
        reset()
    if seed is not None:
        seed_all(seed)
    grad = torch.is_grad_enabled()
    inputs = _tensors((args, kwargs, watch), [], set())
    buf, err = io.StringIO(), io.StringIO()
    with _capture_warnings(warnings) as w, _capture_logs(logs) as records, contextlib.redirect_stdout(buf), \
            (contextlib.redirect_stderr(err) if stderr else contextlib.nullcontext()):
        try:
            out.value = fn(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - compared between eager and compiled
            out.exception = e
        if views:
            if out.exception is None:
                out.views = _views(_tensors(out.value, [], set()), inputs)
            out.inputs = [t.detach().clone() for t in inputs]
        if backward and out.exception is None:
            try:
                loss = (_default_loss if backward is True else backward)(out.value)
                if loss is not None:
                    loss.backward()
            except Exception as e:  # noqa: BLE001 - compared between eager and compiled
                out.backward_exception = e
    out.grad_enabled = torch.is_grad_enabled()
    torch.set_grad_enabled(grad)
    out.stdout = buf.getvalue()
    if stderr:
        out.stderr = err.getvalue()
    if w is not None:
        out.warnings = [(i.category, str(i.message), os.path.basename(i.filename), i.lineno) for i in w
                        if "dynamo_lite" not in i.filename]
    if records is not None:
        out.logs = list(records)
    if grads or backward:
        out.grads = _grads((args, kwargs, watch))
    if rng:
        out.rng = _rng_state()
    if snapshot is not None:
        out.state = _copy_state(snapshot())
    if structure:
        out.structure = picture({"result": out.value, "args": args, "kwargs": kwargs, "state": out.state})
        out.chain = _exception_picture(out.exception)
    return out


# ---------------------------------------------------------------------------------------- comparison

def _numpy_values(obj):
    """The values of a numpy array or scalar: a tensor for floating dtypes torch has (compared
    with the tensor tolerance), else plain Python values (compared exactly)."""
    if obj.dtype.kind in "fc" and obj.dtype.itemsize <= 16 and obj.dtype != np.longdouble:
        return torch.from_numpy(np.array(obj, dtype=obj.dtype.newbyteorder("="), ndmin=1)).reshape(np.shape(obj))
    return obj.tolist() if isinstance(obj, np.ndarray) else obj.item()


def normalize(obj, memo=None):
    """Values ``assert_same`` cannot compare as they are (numpy arrays and scalars, torch
    Generators, RNG states, sets, deques, dict subclasses) as comparable data."""
    memo = {} if memo is None else memo
    if id(obj) in memo:
        return memo[id(obj)]
    if np is not None and isinstance(obj, np.ndarray):
        # floating values compare as tensors do (rtol/atol: numpy code computed by torch sums and
        # factorises in another order); everything else exactly
        out = ("ndarray", str(obj.dtype), obj.shape, _numpy_values(obj))
    elif np is not None and isinstance(obj, np.generic):
        out = ("npscalar", type(obj).__name__, _numpy_values(obj))
    elif isinstance(obj, torch.Generator):
        out = ("Generator", obj.get_state())
    elif isinstance(obj, collections.deque):
        out = ("deque", [normalize(v, memo) for v in obj], obj.maxlen)
    elif isinstance(obj, (set, frozenset)) and type(obj) in (set, frozenset):
        items = list(obj)
        if all(" at 0x" not in repr(v) for v in items):
            items = sorted(items, key=repr)
            out = (type(obj).__name__, [normalize(v, memo) for v in items])
        else:
            out = obj
    elif type(obj) in (list, tuple):
        out = type(obj)(normalize(v, memo) for v in obj)
    elif type(obj) is dict:
        out = {k: normalize(v, memo) for k, v in obj.items()}
    elif isinstance(obj, dict):
        out = (type(obj).__name__, [(k, normalize(v, memo)) for k, v in obj.items()],
               getattr(obj, "default_factory", None))
    else:
        out = obj
    memo[id(obj)] = out
    return out


_IMMUTABLE = (int, float, complex, str, bytes, bool, type(None), type, range, slice)
_RESUME = re.compile(r"^(?:__resume_at_\d+_)+")


def picture(obj, ids: Optional[dict] = None, path: str = "$"):
    """A comparable picture of ``obj`` that also shows identity: containers and objects
    (``__dict__`` and ``__slots__``) recursed, generators drained (name, state, remaining
    items), exceptions as their chain, and a second occurrence of the same mutable object
    recorded as ``("ref", path of the first)`` (aliasing).  Tensors stay tensors."""
    ids = {} if ids is None else ids
    if isinstance(obj, _IMMUTABLE) or obj is Ellipsis or obj is NotImplemented:
        return obj
    if isinstance(obj, (type(len), type(picture))) or inspect.ismethod(obj):
        return ("callable", getattr(obj, "__qualname__", repr(obj)))
    if id(obj) in ids:
        return ("ref", ids[id(obj)])
    ids[id(obj)] = path
    if isinstance(obj, torch.Tensor):
        return obj
    if isinstance(obj, BaseException):
        return _exception_picture(obj)
    if inspect.isgenerator(obj):
        state = inspect.getgeneratorstate(obj)
        rest = list(obj) if state != inspect.GEN_RUNNING else None
        return ("generator", obj.__name__, state, picture(rest, ids, path + ".rest"))
    if isinstance(obj, io.StringIO):
        return ("StringIO", obj.getvalue())
    if isinstance(obj, (list, tuple)):
        return (type(obj), [picture(v, ids, f"{path}[{i}]") for i, v in enumerate(obj)])
    if isinstance(obj, (set, frozenset)):
        return (type(obj), sorted(repr(v) for v in obj))
    if isinstance(obj, dict):
        return (type(obj), [(picture(k, ids, path + ".key"), picture(v, ids, f"{path}[{k!r}]"))
                            for k, v in obj.items()])
    out = {}
    for cls in type(obj).__mro__:
        for name in getattr(cls, "__slots__", ()):
            if name not in ("__dict__", "__weakref__") and hasattr(obj, name):
                out[name] = picture(object.__getattribute__(obj, name), ids, f"{path}.{name}")
    if hasattr(obj, "__dict__"):
        for k, v in vars(obj).items():
            out[k] = picture(v, ids, f"{path}.{k}")
    return (type(obj), out)


def _exception_picture(e: Optional[BaseException], depth: int = 0):
    """Type, str, args, attributes, last traceback frame (file, line, function without the
    resume-function prefix), cause, context and suppress_context of ``e``."""
    if e is None:
        return None
    tb = traceback.extract_tb(e.__traceback__) if e.__traceback__ is not None else []
    last = (os.path.basename(tb[-1].filename), tb[-1].lineno, _RESUME.sub("", tb[-1].name)) if tb else None
    attrs = {k: v for k, v in vars(e).items() if not k.startswith("__")}
    return dict(type=type(e), str=_without_addresses(str(e)), args=picture(tuple(map(_without_addresses, e.args))),
                attrs=picture(attrs), last_frame=last,
                cause=_exception_picture(e.__cause__, depth + 1) if depth < 3 else "...",
                context=_exception_picture(e.__context__, depth + 1) if depth < 3 else "...",
                suppress_context=e.__suppress_context__)


def _assert_same_picture(a, b, path="$", rtol=1e-5, atol=1e-6):
    """Two pictures are equal: tensors by ``assert_same``, the rest by type and ==."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        assert_same(a, b, path, rtol, atol)
    elif isinstance(a, dict) and isinstance(b, dict):
        assert list(a) == list(b), f"{path}: keys {list(a)} != {list(b)}"
        for k in a:
            _assert_same_picture(a[k], b[k], f"{path}.{k}", rtol, atol)
    elif isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), f"{path}: {a!r} != {b!r}"
        for i, (x, y) in enumerate(zip(a, b)):
            _assert_same_picture(x, y, f"{path}[{i}]", rtol, atol)
    else:
        assert type(a) is type(b) and a == b, f"{path}: eager {a!r} != compiled {b!r}"


def assert_same(a: Any, b: Any, path: str = "result", rtol=1e-5, atol=1e-6, _seen: Optional[dict] = None) -> None:
    """Deep comparison of two values as a user would see them (objects that contain themselves
    are compared once)."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor), f"{path}: expected a tensor, got {type(b).__name__}"
        assert type(a) is type(b), f"{path}: type {type(a).__name__} != {type(b).__name__}"
        assert a.shape == b.shape, f"{path}: shape {tuple(a.shape)} != {tuple(b.shape)}"
        assert a.dtype == b.dtype, f"{path}: dtype {a.dtype} != {b.dtype}"
        assert a.device == b.device, f"{path}: device {a.device} != {b.device}"
        assert a.requires_grad == b.requires_grad, f"{path}: requires_grad {a.requires_grad} != {b.requires_grad}"
        if a.is_floating_point() or a.is_complex():
            torch.testing.assert_close(b.detach(), a.detach(), rtol=rtol, atol=atol, equal_nan=True,
                                       msg=lambda m: f"{path}: {m}")
        else:
            assert torch.equal(a, b), f"{path}: values differ: {a} vs {b}"
        return
    if _seen is None:
        _seen = {}
    if not isinstance(a, (int, float, str, bytes, bool, type(None))):
        if (id(a), id(b)) in _seen:
            return
        _seen[id(a), id(b)] = (a, b)  # (kept alive: a freed temporary's id may come again)
    if isinstance(a, torch.nn.Module):
        assert type(a) is type(b), f"{path}: module type {type(a).__name__} != {type(b).__name__}"
        assert a.training == b.training, f"{path}.training: {a.training} != {b.training}"
        assert_same(dict(a.state_dict()), dict(b.state_dict()), f"{path}.state_dict()", rtol, atol)
        pa, pb = dict(a.named_parameters()), dict(b.named_parameters())
        assert list(pa) == list(pb), f"{path}: parameters {list(pa)} != {list(pb)}"
        for name in pa:
            assert_same(pa[name], pb[name], f"{path}.{name}", rtol, atol, _seen)  # values and requires_grad
            ga, gb = pa[name].grad, pb[name].grad
            assert (ga is None) == (gb is None), f"{path}.{name}.grad: eager {ga} vs compiled {gb}"
            if ga is not None:
                assert_same(ga, gb, f"{path}.{name}.grad", rtol, atol, _seen)
        assert_same(dict(a.named_buffers()), dict(b.named_buffers()), f"{path} buffers", rtol, atol)
        return
    if isinstance(a, (list, tuple)):
        assert type(a) is type(b), f"{path}: type {type(a).__name__} != {type(b).__name__}"
        assert len(a) == len(b), f"{path}: length {len(a)} != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{path}[{i}]", rtol, atol, _seen)
        return
    if isinstance(a, dict):
        assert type(a) is type(b), f"{path}: type {type(a).__name__} != {type(b).__name__}"
        assert list(a.keys()) == list(b.keys()), f"{path}: keys {list(a)} != {list(b)}"
        for k in a:
            assert_same(a[k], b[k], f"{path}[{k!r}]", rtol, atol, _seen)
        return
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        assert type(a) is type(b), f"{path}: type differs"
        for f in dataclasses.fields(a):
            assert_same(getattr(a, f.name), getattr(b, f.name), f"{path}.{f.name}", rtol, atol, _seen)
        return
    if hasattr(a, "__dict__") and not isinstance(a, type) and not callable(a):
        assert type(a) is type(b), f"{path}: type {type(a).__name__} != {type(b).__name__}"
        assert_same(vars(a), vars(b), f"{path}.__dict__", rtol, atol, _seen)
        return
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return
    assert type(a) is type(b), f"{path}: type {type(a).__name__} != {type(b).__name__}"
    if callable(a) and not isinstance(a, type):
        return  # functions rebuilt by generated code are equal in behaviour, not identity
    assert a == b, f"{path}: {a!r} != {b!r}"


def results_differ(eager: Any, compiled: Any) -> bool:
    """True when two results differ as a user would see them (assert_same on normalized values);
    exceptions are compared by type only.  For sweeps that count differences instead of failing."""
    if isinstance(eager, BaseException) or isinstance(compiled, BaseException):
        return type(eager) is not type(compiled)
    try:
        assert_same(normalize(eager), normalize(compiled))
        return False
    except AssertionError:
        return True


# "<... object at 0x7f...>" in a message: two runs never share addresses but by the allocator's
# chance (pytest's assertion messages print bound methods this way)
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _without_addresses(text):
    return _ADDRESS.sub(" at 0x…", text) if isinstance(text, str) else text


def _message(e: BaseException, grad_fn_names: bool) -> str:
    if grad_fn_names:
        return _without_addresses(str(e))
    # AOTAutograd names the outputs of its graph "output 0 of CompiledFunction"
    text = re.sub(r", which is output \d+ of [\w:]+,", "", _without_addresses(str(e)))
    return re.sub(r"(?i)output (\d+) of [\w:]+", r"output \1 of <grad_fn>", text)


def _assert_same_exception(a, b, what: str, grad_fn_names: bool) -> None:
    assert (a is None) == (b is None), f"{what}: eager {a!r} vs compiled {b!r}"
    if a is not None:
        assert type(a) is type(b), f"{what}: {a!r} vs {b!r}"
        assert _message(a, grad_fn_names) == _message(b, grad_fn_names), f"{what}: {a!r} vs {b!r}"


def compare(eager: Observed, comp: Observed, where: str = "", *, rtol=1e-5, atol=1e-6,
            grad_fn_names: bool = True) -> None:
    """Every recorded field of the eager and the compiled call is equal (AssertionError if not).

    Tensors within ``rtol``/``atol``; ``grad_fn_names=False``: grad_fn names in exception
    messages are not compared (AOTAutograd calls them CompiledFunction).  When ``structure``
    was recorded it replaces the value/arguments/snapshot comparison (it is the stricter one)."""
    tol = dict(rtol=rtol, atol=atol)
    try:
        _assert_same_exception(eager.exception, comp.exception, "exception", grad_fn_names)
        _assert_same_picture(eager.chain, comp.chain, "exception", **tol)
        assert (eager.structure is None) == (comp.structure is None), "structure recorded on one side only"
        if eager.structure is not None:
            _assert_same_picture(eager.structure, comp.structure, "$", **tol)
        else:
            if eager.exception is None:
                assert_same(normalize(eager.value), normalize(comp.value), **tol)
            assert_same(normalize(eager.args), normalize(comp.args), "arguments after the call", **tol)
            assert_same(normalize(eager.kwargs), normalize(comp.kwargs), "kwargs after the call", **tol)
            assert_same(normalize(eager.state), normalize(comp.state), "state after the call", **tol)
        assert eager.views == comp.views, f"returned tensors (shape, stride, offset, dtype, requires_grad, " \
                                          f"is_leaf, grad_fn is None, is/shares-with inputs, is/shares-with " \
                                          f"outputs):\n eager    {eager.views}\n compiled {comp.views}"
        assert_same(eager.inputs, comp.inputs, "input tensors after the call", **tol)
        _assert_same_exception(eager.backward_exception, comp.backward_exception, "backward", grad_fn_names)
        assert eager.stdout == comp.stdout, f"stdout differs:\n eager: {eager.stdout!r}\n compiled: {comp.stdout!r}"
        assert eager.stderr == comp.stderr, f"stderr differs:\n eager: {eager.stderr!r}\n compiled: {comp.stderr!r}"
        assert eager.warnings == comp.warnings, f"warnings differ:\n eager: {eager.warnings}\n compiled: {comp.warnings}"
        assert eager.logs == comp.logs, f"logs differ:\n eager: {eager.logs}\n compiled: {comp.logs}"
        assert (eager.grads is None) == (comp.grads is None), "grads recorded on one side only"
        if eager.grads is not None:
            assert len(eager.grads) == len(comp.grads)
            for i, (a, b) in enumerate(zip(eager.grads, comp.grads)):
                assert (a is None) == (b is None), f"grad #{i}: eager {a} vs compiled {b}"
                if a is not None:
                    assert_same(a, b, f"grad #{i}", **tol)
        assert eager.grad_enabled == comp.grad_enabled, "grad mode after the call differs"
        assert_same(normalize(eager.rng), normalize(comp.rng), "RNG state after the call")
    except AssertionError as e:
        if where:
            raise AssertionError(f"{where}: {e}") from None
        raise


def _assert_graphs(cnt: CompileCounter, graphs: Optional[int]) -> None:
    if graphs is not None:
        assert cnt.frame_count >= graphs, f"expected >= {graphs} graphs, got {cnt.frame_count}"


# ---------------------------------------------------------------------------------------- eager vs compiled

def run_both(fn: Callable, *args, backend="eager", compiled_fn=None, **kwargs) -> tuple[Observed, Observed]:
    """One eager and one compiled call on deep copies of the inputs; the compiled call
    starts from the RNG state the eager call started from."""
    eager_args, eager_kwargs = copy.deepcopy((args, kwargs))
    comp_args, comp_kwargs = copy.deepcopy((args, kwargs))
    rng = _rng_state()
    eager = observe(fn, eager_args, eager_kwargs)
    compiled = compiled_fn if compiled_fn is not None else dynamo_lite.compile(fn, backend=backend)
    _set_rng_state(rng)  # both runs draw the same random numbers
    comp = observe(compiled, comp_args, comp_kwargs)
    return eager, comp


def assert_same_as_eager(fn: Callable, *args, backend="eager", compiled_fn=None, **kwargs) -> Observed:
    """Run ``fn`` eagerly and compiled on deep copies of the inputs; everything must match."""
    eager, comp = run_both(fn, *args, backend=backend, compiled_fn=compiled_fn, **kwargs)
    compare(eager, comp)
    return comp


def check(fn: Callable, *args, backward: bool = False, reset: Callable = None, snapshot: Callable = None,
          graphs: Optional[int] = 1, fullgraph: bool = False, compiled=None, **kwargs) -> CompileCounter:
    """One eager and one compiled call of ``fn`` from the same seeded state; all observations
    (value, stdout, warnings, logs, arguments, grads, grad mode, snapshot) equal.

    ``graphs``: minimum number of graphs the compiled run must produce (None: not checked)
    so a test cannot silently stop exercising the compiler; ``compiled(backend)``: how to
    compile (default ``dynamo_lite.compile(fn, backend=..., fullgraph=fullgraph)``).
    """
    cnt = CompileCounter()
    opts = dict(seed=SEED, reset=reset, snapshot=snapshot, backward=backward, warnings=True, logs=True, grads=True)
    eager_in = copy.deepcopy((args, kwargs))
    comp_in = copy.deepcopy((args, kwargs))
    eager = observe(fn, *eager_in, **opts)
    opt = compiled(cnt) if compiled is not None else dynamo_lite.compile(fn, backend=cnt, fullgraph=fullgraph)
    comp = observe(opt, *comp_in, **opts)
    if reset is not None:
        reset()
    compare(eager, comp)
    _assert_graphs(cnt, graphs)
    return cnt


def _made(call, i: int):
    """(args, watch) of call #i: a tuple is deep-copied, a factory is called from
    ``seed_all(SEED + i)`` (the RNG state around it is left as it was); a factory returns
    the args tuple, or ``{"args": ..., "watch": ...}``."""
    if not callable(call):
        return copy.deepcopy((call, ()))
    rng = _rng_state()
    seed_all(SEED + i)
    try:
        made = call()
    finally:
        _set_rng_state(rng)
    if isinstance(made, dict):
        return tuple(made["args"]), tuple(made.get("watch", ()))
    return tuple(made), ()


def check_calls(fn: Callable, calls: Sequence, *, backward=False, reset: Callable = None,
                snapshot: Callable = None, graphs: Optional[int] = 1, seed: Optional[int] = SEED,
                hits: Sequence[int] = (), interleave: bool = True, stderr: bool = False, rng: bool = False,
                views: bool = False, structure: bool = False, grad_fn_names: bool = True,
                warnings: bool = True, backend=None, dynamic=None) -> CompileCounter:
    """The same sequence of calls eagerly and through one compiled ``fn``; every call's
    observations must be equal.  A call is an args tuple (a non-tuple is one argument),
    deep-copied for each side, or a factory ``() -> args`` (or ``{"args", "watch"}``)
    called for each side from the same seed, for inputs deepcopy cannot rebuild (views of a
    base, non-leaf tensors that require grad).

    ``interleave=True``: each call runs eagerly then compiled, each from ``reset()`` and the
    same seed; ``interleave=False``: all calls eagerly, then all compiled, each side from
    ``reset()`` and the seed once (state carried from call to call, as a program would).
    ``hits``: indices of calls that must be served from the cache (no new graph);
    ``graphs``: minimum graphs over all calls; ``seed=None``: no reseeding;
    ``backward``: True or a loss function, as in ``observe``;
    ``stderr``/``rng``/``views``/``structure``: also record and compare those (``observe``);
    ``grad_fn_names``: as in ``compare``; ``warnings=False``: warnings not compared (a
    backend such as AOTAutograd or inductor warns while it compiles);
    ``backend``: compile with it instead of a fresh ``CompileCounter`` (graphs are checked
    only when it is a ``CompileCounter``, e.g. ``CompileCounter(aot_eager)``); ``dynamic``:
    compile()'s (None: automatic dynamic shapes).
    """
    cnt = backend if isinstance(backend, CompileCounter) else CompileCounter()
    opt = dynamo_lite.compile(fn, backend=cnt if backend is None else backend, dynamic=dynamic)
    calls = [c if isinstance(c, tuple) or callable(c) else (c,) for c in calls]
    opts = dict(backward=backward, snapshot=snapshot, warnings=warnings, logs=True, grads=True, stderr=stderr,
                rng=rng, views=views, structure=structure)
    how = dict(grad_fn_names=grad_fn_names)
    if interleave:
        for i, call in enumerate(calls):
            before = cnt.frame_count
            seen = []
            for f in (fn, opt):
                if reset is not None:
                    reset()
                args, watch = _made(call, i)  # after reset: a factory may set up state
                seen.append(observe(f, args, seed=seed, watch=watch, **opts))
            compare(*seen, f"call #{i}", **how)
            if i in hits:
                assert cnt.frame_count == before, f"call #{i} recompiled although its inputs match an earlier call"
    else:
        sides = []
        for f in (fn, opt):
            if reset is not None:
                reset()
            if seed is not None:
                seed_all(seed)
            side = []
            for i, call in enumerate(calls):
                args, watch = _made(call, i)
                side.append(observe(f, args, watch=watch, **opts))
            sides.append(side)
        for i, (eager, comp) in enumerate(zip(*sides)):
            compare(eager, comp, f"call #{i}", **how)
    if reset is not None:
        reset()
    if backend is None or isinstance(backend, CompileCounter):
        _assert_graphs(cnt, graphs)
    return cnt


def twins(factory: Callable[[], torch.nn.Module], seed: int = 0) -> tuple:
    """Two identical modules, (eager one, one to compile): ``factory()`` from ``seed`` and a deep copy."""
    torch.manual_seed(seed)
    module = factory()
    return module, copy.deepcopy(module)


def check_module(factory, steps: list, *, attrs=(), backward=False, graphs: Optional[int] = 1,
                 backend=None, rtol=1e-5, atol=1e-6) -> CompileCounter:
    """Two identical modules, one compiled; run each step on both and compare results,
    module state (``assert_same``: training, parameters with requires_grad and grads, every
    buffer), the grads of tensor arguments and the named ``attrs``.

    ``factory``: builds the module (called once per side from the same seed), or a pair
    ``(eager module, module to compile)`` from ``twins`` (state carried over from earlier
    checks, inspected afterwards); a step is ``step(module)`` or an ``(args, kwargs)`` call of
    the module on deep copies; ``backward``: True or a loss function, as in ``observe``
    (grads accumulate over the steps); ``backend``: as in ``check_calls``;
    ``rtol``/``atol``: tolerance of every tensor comparison."""
    cnt = backend if isinstance(backend, CompileCounter) else CompileCounter()
    if isinstance(factory, tuple):
        eager_m, comp_orig = factory
    else:
        seed_all()
        eager_m = factory()
        seed_all()
        comp_orig = factory()
    comp_m = dynamo_lite.compile(comp_orig, backend=cnt if backend is None else backend)
    for i, step in enumerate(steps):
        opts = dict(seed=SEED, backward=backward, warnings=True, logs=True, grads=True)
        if isinstance(step, tuple):
            e_call, c_call = copy.deepcopy(step), copy.deepcopy(step)
            eager = observe(lambda m, a, k: m(*a, **k), (eager_m,) + e_call, **opts)
            comp = observe(lambda m, a, k: m(*a, **k), (comp_m,) + c_call, **opts)
        else:
            eager = observe(step, (eager_m,), **opts)
            comp = observe(step, (comp_m,), **opts)
        comp.args = (comp_orig,) + comp.args[1:]  # same state, the plain class (compare type too)
        try:
            compare(eager, comp, rtol=rtol, atol=atol)
            for a in attrs:
                assert_same(getattr(eager_m, a), getattr(comp_m, a), f"module.{a}", rtol, atol)
            assert eager_m.training == comp_m.training
        except AssertionError as e:
            raise AssertionError(f"step #{i}: {e}") from None
    if backend is None or isinstance(backend, CompileCounter):
        _assert_graphs(cnt, graphs)
    return cnt


def check_breaks(fn, *args, breaks=0, raises=..., need_graph=True, **kwargs) -> Observed:
    """``assert_same_as_eager``, and the compiled run broke the graph ``breaks`` times
    (None: not counted); with ``breaks=0`` (and ``need_graph``) at least one graph must
    have been captured (a frame loaded from the persistent capture cache reports the graph and
    break its trace reported: persistent_cache.py).
    ``raises``: the exception type both runs must raise, ``None``: neither may raise;
    not given, exceptions are left to the comparison."""

    recorded: list = []
    with events.collecting(recorded.append):
        out = assert_same_as_eager(fn, *args, **kwargs)
    if raises is None:
        assert out.exception is None, out.exception
    elif raises is not ...:
        assert isinstance(out.exception, raises), out.exception
    info = build_explain_output(recorded)
    if breaks is not None:
        assert info.graph_break_count == breaks, [str(b) for b in info.break_reasons]
    if breaks == 0 and need_graph:
        assert info.graph_count >= 1, "nothing was captured: the test does not exercise the compiler"
    return out


def print_with_graph_break(*args, **kwargs) -> None:
    """``print``, and a graph break where compiled code calls it (DL0030), as plain ``print``
    broke before it was replayed after the graph: tests about breaks import it as ``print``."""
    print(*args, **kwargs)


print_with_graph_break.breaks_graph = True


def recording():
    """``(events, context manager)``: entering the manager collects the structured events
    (dynamo_lite.report.events) emitted inside the block into the list ``events``."""
    seen: list = []
    return seen, events.collecting(seen.append)


def event_kinds(seen: list) -> list[str]:
    """The class names of recorded events, in order (``"GraphEvent"``, ``"GraphBreakEvent"``...)."""
    return [type(e).__name__ for e in seen]


def line_of(fn: Callable, text: str) -> int:
    """The line number, in ``fn``'s file, of the first source line of ``fn`` that contains ``text``."""
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if text in line)
