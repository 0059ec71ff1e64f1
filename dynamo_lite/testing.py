"""The one differential harness: run code eagerly and compiled from identical starting
states and compare everything a user can observe; plus a counting backend.

    CompileCounter()             backend that counts graphs and ops, runs graphs as they are
    Observed                     what one call showed: return value or exception (type and
                                 message), stdout, stderr, log records of the "acceptance"
                                 logger, warnings (category, message, file, line), arguments
                                 after the call (mutated inputs), grads of tensor arguments,
                                 grad mode, RNG state and a ``snapshot()`` of touched globals
    observe(fn, args, kwargs)    one call -> Observed (what is recorded is chosen by options)
    compare(eager, comp)         asserts two Observed are equal, field by field
    assert_same(a, b)            deep comparison of two values as a user would see them
    run_both(fn, *args)          one eager and one compiled call on deep copies, same RNG state
    assert_same_as_eager(fn, *args)      run_both + compare; returns the compiled Observed
    check(fn, *args)             seeded call each way (warnings, logs, grads, ``reset``/
                                 ``snapshot`` hooks, optional backward); >= ``graphs`` captured
    check_calls(fn, calls)       the same sequence of calls eagerly and through one compiled fn
    check_module(factory, steps) two modules from the same seed, one compiled, each step on both
    check_breaks(fn, *args, breaks=n)    assert_same_as_eager and exactly n graph breaks
    seed_all(seed=SEED)          seeds torch, random and numpy; LOG is the "acceptance" logger

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
import io
import logging
import os
import random
import warnings as _warnings
from typing import Any, Callable, Optional, Sequence

import torch

import dynamo_lite

from .report import events
from .report.explain import build_explain_output

try:
    import numpy as np
except ImportError:  # pragma: no cover - numpy is a test dependency
    np = None

SEED = 1234
LOG = logging.getLogger("acceptance")

__all__ = ["SEED", "LOG", "CompileCounter", "Observed", "observe", "compare", "assert_same", "normalize",
           "run_both", "assert_same_as_eager", "check", "check_calls", "check_module", "check_breaks",
           "seed_all"]


class CompileCounter:
    """A backend that records what it is given and runs graphs as they are."""

    def __init__(self):
        self.frame_count = 0
        self.op_count = 0
        self.graphs: list[torch.fx.GraphModule] = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs):
        self.frame_count += 1
        self.graphs.append(gm)
        self.op_count += sum(1 for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module"))
        return gm.forward

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
    """Everything observable about one call; a field left ``None`` was not recorded."""

    value: Any = None
    exception: Optional[BaseException] = None
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
    elif isinstance(obj, dict):
        for v in obj.values():
            _tensors(v, out, seen)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _tensors(v, out, seen)
    return out


def _grads(obj) -> list:
    return [None if t.grad is None else t.grad.detach().clone() for t in _tensors(obj, [], set())]


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
            reset: Optional[Callable] = None, snapshot: Optional[Callable] = None, backward: bool = False,
            warnings: bool = False, logs: bool = False, grads: bool = False, stderr: bool = False,
            rng: bool = False) -> Observed:
    """Call ``fn(*args, **kwargs)`` (after ``reset()`` and ``seed_all(seed)`` when given) and record it.

    ``backward``: sum the returned tensors that require grad and call backward (grads recorded);
    ``warnings``/``logs``/``grads``/``stderr``/``rng``: also record those; ``snapshot()`` runs after."""
    kwargs = {} if kwargs is None else kwargs
    out = Observed(args=args, kwargs=kwargs)
    if reset is not None:
        reset()
    if seed is not None:
        seed_all(seed)
    grad = torch.is_grad_enabled()
    buf, err = io.StringIO(), io.StringIO()
    with _capture_warnings(warnings) as w, _capture_logs(logs) as records, contextlib.redirect_stdout(buf), \
            (contextlib.redirect_stderr(err) if stderr else contextlib.nullcontext()):
        try:
            out.value = fn(*args, **kwargs)
            if backward:
                loss = sum(t.sum() for t in _tensors(out.value, [], set()) if t.requires_grad)
                loss.backward()
        except Exception as e:  # noqa: BLE001 - compared between eager and compiled
            out.exception = e
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
        out.grads = _grads((args, kwargs))
    if rng:
        out.rng = _rng_state()
    if snapshot is not None:
        out.state = _copy_state(snapshot())
    return out


# ---------------------------------------------------------------------------------------- comparison

def normalize(obj, memo=None):
    """Values ``assert_same`` cannot compare as they are (numpy arrays and scalars, torch
    Generators, RNG states, sets, deques, dict subclasses) as comparable data."""
    memo = {} if memo is None else memo
    if id(obj) in memo:
        return memo[id(obj)]
    if np is not None and isinstance(obj, np.ndarray):
        out = ("ndarray", str(obj.dtype), obj.shape, obj.tolist())
    elif np is not None and isinstance(obj, np.generic):
        out = ("npscalar", type(obj).__name__, obj.item())
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


def assert_same(a: Any, b: Any, path: str = "result", rtol=1e-5, atol=1e-6) -> None:
    """Deep comparison of two values as a user would see them."""
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
    if isinstance(a, torch.nn.Module):
        assert type(a) is type(b), f"{path}: module type differs"
        assert_same(dict(a.state_dict()), dict(b.state_dict()), f"{path}.state_dict()")
        return
    if isinstance(a, (list, tuple)):
        assert type(a) is type(b), f"{path}: type {type(a).__name__} != {type(b).__name__}"
        assert len(a) == len(b), f"{path}: length {len(a)} != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{path}[{i}]", rtol, atol)
        return
    if isinstance(a, dict):
        assert type(a) is type(b), f"{path}: type {type(a).__name__} != {type(b).__name__}"
        assert list(a.keys()) == list(b.keys()), f"{path}: keys {list(a)} != {list(b)}"
        for k in a:
            assert_same(a[k], b[k], f"{path}[{k!r}]", rtol, atol)
        return
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        assert type(a) is type(b), f"{path}: type differs"
        for f in dataclasses.fields(a):
            assert_same(getattr(a, f.name), getattr(b, f.name), f"{path}.{f.name}", rtol, atol)
        return
    if hasattr(a, "__dict__") and not isinstance(a, type) and not callable(a):
        assert type(a) is type(b), f"{path}: type {type(a).__name__} != {type(b).__name__}"
        assert_same(vars(a), vars(b), f"{path}.__dict__", rtol, atol)
        return
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return
    assert type(a) is type(b), f"{path}: type {type(a).__name__} != {type(b).__name__}"
    if callable(a) and not isinstance(a, type):
        return  # functions rebuilt by generated code are equal in behaviour, not identity
    assert a == b, f"{path}: {a!r} != {b!r}"


def compare(eager: Observed, comp: Observed, where: str = "") -> None:
    """Every recorded field of the eager and the compiled call is equal (AssertionError if not)."""
    try:
        if eager.exception is not None or comp.exception is not None:
            assert comp.exception is not None, f"eager raised {eager.exception!r}, compiled returned {comp.value!r}"
            assert eager.exception is not None, f"compiled raised {comp.exception!r}, eager did not"
            assert type(eager.exception) is type(comp.exception), f"{eager.exception!r} vs {comp.exception!r}"
            assert str(eager.exception) == str(comp.exception), f"{eager.exception!r} vs {comp.exception!r}"
        else:
            assert_same(normalize(eager.value), normalize(comp.value))
        assert eager.stdout == comp.stdout, f"stdout differs:\n eager: {eager.stdout!r}\n compiled: {comp.stdout!r}"
        assert eager.stderr == comp.stderr, f"stderr differs:\n eager: {eager.stderr!r}\n compiled: {comp.stderr!r}"
        assert eager.warnings == comp.warnings, f"warnings differ:\n eager: {eager.warnings}\n compiled: {comp.warnings}"
        assert eager.logs == comp.logs, f"logs differ:\n eager: {eager.logs}\n compiled: {comp.logs}"
        assert_same(normalize(eager.args), normalize(comp.args), "arguments after the call")
        assert_same(normalize(eager.kwargs), normalize(comp.kwargs), "kwargs after the call")
        assert (eager.grads is None) == (comp.grads is None), "grads recorded on one side only"
        if eager.grads is not None:
            assert len(eager.grads) == len(comp.grads)
            for i, (a, b) in enumerate(zip(eager.grads, comp.grads)):
                assert (a is None) == (b is None), f"grad #{i}: eager {a} vs compiled {b}"
                if a is not None:
                    assert_same(a, b, f"grad #{i}")
        assert eager.grad_enabled == comp.grad_enabled, "grad mode after the call differs"
        assert_same(normalize(eager.rng), normalize(comp.rng), "RNG state after the call")
        assert_same(normalize(eager.state), normalize(comp.state), "state after the call")
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


def check_calls(fn: Callable, calls: Sequence, *, backward: bool = False, reset: Callable = None,
                snapshot: Callable = None, graphs: Optional[int] = 1, seed: Optional[int] = SEED,
                hits: Sequence[int] = (), interleave: bool = True, stderr: bool = False, rng: bool = False,
                backend=None) -> CompileCounter:
    """The same sequence of calls (each an args tuple; a non-tuple is one argument) eagerly
    and through one compiled ``fn``; every call's observations must be equal.

    ``interleave=True``: each call runs eagerly then compiled, each from ``reset()`` and the
    same seed; ``interleave=False``: all calls eagerly, then all compiled, each side from
    ``reset()`` and the seed once (state carried from call to call, as a program would).
    ``hits``: indices of calls that must be served from the cache (no new graph);
    ``graphs``: minimum graphs over all calls; ``seed=None``: no reseeding;
    ``stderr``/``rng``: also compare stderr and the RNG state after each call;
    ``backend``: compile with it instead of a fresh ``CompileCounter`` (graphs then unchecked).
    """
    cnt = CompileCounter()
    opt = dynamo_lite.compile(fn, backend=cnt if backend is None else backend)
    calls = [c if isinstance(c, tuple) else (c,) for c in calls]
    opts = dict(backward=backward, snapshot=snapshot, warnings=True, logs=True, grads=True, stderr=stderr, rng=rng)
    if interleave:
        for i, args in enumerate(calls):
            before = cnt.frame_count
            eager = observe(fn, *copy.deepcopy((args, {})), seed=seed, reset=reset, **opts)
            comp = observe(opt, *copy.deepcopy((args, {})), seed=seed, reset=reset, **opts)
            compare(eager, comp, f"call #{i}")
            if i in hits:
                assert cnt.frame_count == before, f"call #{i} recompiled although its inputs match an earlier call"
    else:
        sides = []
        for f in (fn, opt):
            if reset is not None:
                reset()
            if seed is not None:
                seed_all(seed)
            sides.append([observe(f, *copy.deepcopy((args, {})), **opts) for args in calls])
        for i, (eager, comp) in enumerate(zip(*sides)):
            compare(eager, comp, f"call #{i}")
    if reset is not None:
        reset()
    if backend is None:
        _assert_graphs(cnt, graphs)
    return cnt


def check_module(factory: Callable[[], torch.nn.Module], steps: list, *, attrs=(), backward: bool = False,
                 graphs: Optional[int] = 1) -> CompileCounter:
    """Build two modules from the same seed; compile one; run each step(module) on both and
    compare results, state, parameter grads, ``training`` and the named ``attrs``."""
    cnt = CompileCounter()
    seed_all()
    eager_m = factory()
    seed_all()
    comp_m = dynamo_lite.compile(factory(), backend=cnt)
    for i, step in enumerate(steps):
        opts = dict(seed=SEED, backward=backward, warnings=True, logs=True, grads=True)
        eager = observe(step, (eager_m,), **opts)
        comp = observe(step, (comp_m,), **opts)
        comp.args = (comp_m._orig_mod,)  # same state, the plain class (compare type too)
        try:
            compare(eager, comp)
            for a in attrs:
                assert_same(getattr(eager_m, a), getattr(comp_m, a), f"module.{a}")
            assert eager_m.training == comp_m.training
        except AssertionError as e:
            raise AssertionError(f"step #{i}: {e}") from None
    _assert_graphs(cnt, graphs)
    return cnt


def check_breaks(fn, *args, breaks=0, raises=..., need_graph=True, **kwargs) -> Observed:
    """``assert_same_as_eager``, and the compiled run broke the graph ``breaks`` times
    (None: not counted); with ``breaks=0`` (and ``need_graph``) at least one graph must
    have been captured.
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
