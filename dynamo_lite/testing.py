"""Helpers for testing code under dynamo_lite: counting backends and eager comparison.

    CompileCounter()            backend that counts graphs and ops, runs graphs eagerly
    run_both(fn, *args)         eager and compiled runs on deep copies -> two Outcomes
    assert_same_as_eager(fn, *args, backend=..., **kwargs)
                                compares return values, raised exceptions (type and
                                message), printed output, mutated arguments and grad mode
Tested by the whole test-suite (tests/*).
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import io
from typing import Any, Callable, Optional

import torch


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


@dataclasses.dataclass
class Outcome:
    """Everything observable about one call."""

    value: Any = None
    exception: Optional[BaseException] = None
    stdout: str = ""
    args: tuple = ()
    kwargs: dict = dataclasses.field(default_factory=dict)
    grad_enabled: bool = True


def _call(fn, args, kwargs) -> Outcome:
    out = Outcome(args=args, kwargs=kwargs)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        try:
            out.value = fn(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - compared between eager and compiled
            out.exception = e
    out.stdout = buf.getvalue()
    out.grad_enabled = torch.is_grad_enabled()
    return out


def _rng_state():
    import random

    state = {"python": random.getstate(), "torch": torch.get_rng_state()}
    try:
        import numpy

        state["numpy"] = numpy.random.get_state()
    except ImportError:
        pass
    return state


def _set_rng_state(state) -> None:
    import random

    random.setstate(state["python"])
    torch.set_rng_state(state["torch"])
    if "numpy" in state:
        import numpy

        numpy.random.set_state(state["numpy"])


def run_both(fn: Callable, *args, backend="eager", compiled_fn=None, **kwargs) -> tuple[Outcome, Outcome]:
    from . import compile as dl_compile

    eager_args, eager_kwargs = copy.deepcopy((args, kwargs))
    comp_args, comp_kwargs = copy.deepcopy((args, kwargs))
    grad = torch.is_grad_enabled()
    rng = _rng_state()
    eager = _call(fn, eager_args, eager_kwargs)
    torch.set_grad_enabled(grad)
    compiled = compiled_fn if compiled_fn is not None else dl_compile(fn, backend=backend)
    _set_rng_state(rng)  # both runs draw the same random numbers
    comp = _call(compiled, comp_args, comp_kwargs)
    torch.set_grad_enabled(grad)
    return eager, comp


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


def assert_outcomes_equal(eager: Outcome, comp: Outcome) -> None:
    if eager.exception is not None or comp.exception is not None:
        assert comp.exception is not None, f"eager raised {eager.exception!r}, compiled returned {comp.value!r}"
        assert eager.exception is not None, f"compiled raised {comp.exception!r}, eager did not"
        assert type(eager.exception) is type(comp.exception), f"{eager.exception!r} vs {comp.exception!r}"
        assert str(eager.exception) == str(comp.exception), f"{eager.exception!r} vs {comp.exception!r}"
    else:
        assert_same(eager.value, comp.value)
    assert eager.stdout == comp.stdout, f"stdout differs:\n eager: {eager.stdout!r}\n compiled: {comp.stdout!r}"
    assert_same(eager.args, comp.args, "args (after the call)")
    assert_same(eager.kwargs, comp.kwargs, "kwargs (after the call)")
    assert eager.grad_enabled == comp.grad_enabled, "grad mode after the call differs"


def assert_same_as_eager(fn: Callable, *args, backend="eager", compiled_fn=None, **kwargs) -> Outcome:
    """Run ``fn`` eagerly and compiled on deep copies of the inputs; everything must match."""
    eager, comp = run_both(fn, *args, backend=backend, compiled_fn=compiled_fn, **kwargs)
    assert_outcomes_equal(eager, comp)
    return comp


def check_breaks(fn, *args, breaks=0, **kwargs) -> Outcome:
    """``assert_same_as_eager``, and the compiled run broke the graph ``breaks`` times
    (None: not counted); with ``breaks=0`` at least one graph must have been captured."""
    from .report import events
    from .report.explain import build_explain_output

    recorded: list = []
    with events.collecting(recorded.append):
        out = assert_same_as_eager(fn, *args, **kwargs)
    info = build_explain_output(recorded)
    if breaks is not None:
        assert info.graph_break_count == breaks, [str(b) for b in info.break_reasons]
    if breaks == 0:
        assert info.graph_count >= 1, "nothing was captured: the test does not exercise the compiler"
    return out
