"""Every guard program checks torch's per-thread state (grad mode, autocast, the torch-function and
dispatch mode stacks, jit tracing, torch.func transforms) on every call.  With the C++ reader
(csrc/tensor_meta.cpp ``state``) a program reads them with LOAD_TORCH_STATE, calling no Python;
program.py uses it only where the reader agrees with torch's own function when the program is
built, and calls the function otherwise (guards/tensor_api.py ``torch_state``).

What a user sees is the same either way: a compiled call under a state it was not compiled for
recompiles or runs as eager does; these tests check the reader against torch's functions under
each state, the programs built, and compiled calls under each state against eager.
"""
from __future__ import annotations

import threading

import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

import dynamo_lite
from dynamo_lite import _C, torch_compat
from dynamo_lite.convert_frame import entries_for
from dynamo_lite.guards import tensor_api
from dynamo_lite.testing import CompileCounter, assert_same

needs_reader = pytest.mark.skipif(tensor_api._meta is None, reason="dynamo_lite._tensor_meta is not built")

GRAD, AUTOCAST, TF_STACK, DISPATCH_STACK, JIT_TRACING, FUNCTORCH, FX_TRACING, CUBLAS_TF32 = (
    tensor_api.STATE_NAMES.index(name) for name in (
        "grad_enabled", "any_autocast", "torch_function_stack_len", "dispatch_stack_len", "jit_tracing",
        "functorch_transform", "fx_tracing", "cublas_allow_tf32"))


class Recording(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.calls.append(getattr(func, "__name__", str(func)))
        return func(*args, **(kwargs or {}))


class Passing(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def _python_states():
    """What torch's Python functions say, in the reader's terms."""
    return [int(torch.is_grad_enabled()), int(torch._C._is_any_autocast_enabled()),
            torch._C._len_torch_function_stack(), torch._C._len_torch_dispatch_stack(),
            int(torch._C._get_tracing_state() is not None),
            int(torch._C._functorch.peek_interpreter_stack() is not None),
            int(bool(torch_compat.is_fx_tracing())), int(torch._C._get_cublas_allow_tf32())]


def _reader_states():
    """What the C++ reader says (and C, for torch.fx's flag)."""
    return ([tensor_api._meta.state(i) for i in range(6)] + [int(bool(_C._torch_state(FX_TRACING)))]
            + [tensor_api._meta.state(CUBLAS_TF32)])


@needs_reader
def test_the_reader_agrees_with_torch_in_each_state():
    seen = {}
    assert _reader_states() == _python_states() == [1, 0, 0, 0, 0, 0, 0, 0]
    with torch.no_grad():
        seen["no_grad"] = (_reader_states(), _python_states())
    with torch.autocast("cpu", dtype=torch.bfloat16):
        seen["autocast"] = (_reader_states(), _python_states())
    with torch.autocast("cpu", enabled=False):
        seen["autocast off"] = (_reader_states(), _python_states())
    with Recording(), Recording():
        seen["two torch-function modes"] = (_reader_states(), _python_states())
    with Passing():
        seen["dispatch mode"] = (_reader_states(), _python_states())
    old_tf32 = torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = True
        seen["tf32"] = (_reader_states(), _python_states())
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old_tf32

    def traced(x):
        seen["jit trace"] = (_reader_states(), _python_states())
        return x * 2

    torch.jit.trace(traced, torch.randn(2), check_trace=False)  # (a check runs it again, eagerly)

    def mapped(x):
        seen["vmap"] = (_reader_states(), _python_states())
        return x * 2

    torch.vmap(mapped)(torch.randn(3, 2))

    def other_thread():  # (torch 2.14+ keeps the fx flag per thread: unset there, False)
        seen["thread"] = (_reader_states(), _python_states())

    t = threading.Thread(target=other_thread)
    t.start()
    t.join()
    def fx_traced(x):
        seen["fx"] = (_reader_states(), _python_states())
        return x * 2

    torch.fx.symbolic_trace(fx_traced)
    for name, (reader, python) in seen.items():
        assert reader == python, name
    assert seen["fx"][0][FX_TRACING] == 1
    assert seen["tf32"][0][CUBLAS_TF32] == 1
    assert seen["no_grad"][0][GRAD] == 0
    assert seen["autocast"][0][AUTOCAST] == 1 and seen["autocast off"][0][AUTOCAST] == 0
    assert seen["two torch-function modes"][0][TF_STACK] == 2
    assert seen["dispatch mode"][0][DISPATCH_STACK] == 1
    assert seen["jit trace"][0][JIT_TRACING] == 1
    assert seen["vmap"][0][FUNCTORCH] == 1
    assert _reader_states() == [1, 0, 0, 0, 0, 0, 0, 0]  # all back


def _f(x):
    return torch.mm(x, x.t()) + 1


def _op_names(fn):
    return [op[0] for op in entries_for(fn.__code__)[0].guard.fn.ops]


@needs_reader
def test_a_program_reads_the_states_without_calling_python():
    dynamo_lite.reset()
    dynamo_lite.compile(_f, backend="eager")(torch.randn(3, 3))
    names = _op_names(_f)
    assert names.count("LOAD_TORCH_STATE") == 8
    assert "LOAD_CALL0" not in names


@needs_reader
def test_a_state_the_reader_gets_wrong_is_checked_by_calling_torch(monkeypatch):
    real = tensor_api._read_state

    def wrong(which):
        """The real reads, but grad mode inverted."""
        value = real(which)
        return (not value) if which == GRAD else value

    monkeypatch.setattr(tensor_api, "_read_state", wrong)
    dynamo_lite.reset()
    dynamo_lite.compile(_f, backend="eager")(torch.randn(3, 3))
    names = _op_names(_f)
    assert names.count("LOAD_TORCH_STATE") == 7
    assert names.count("LOAD_CALL0") == 1  # grad mode: torch.is_grad_enabled() is called
    dynamo_lite.reset()


@needs_reader
def test_a_program_whose_reader_is_gone_fails_instead_of_raising():
    program = _C.GuardProgram(2, 3, [("LOAD_TORCH_STATE", 2, 0, GRAD, None), ("CHECK_ID", 2, 0, 0, True)],
                              None)
    assert program({}, None) is True
    with torch.no_grad():
        assert program({}, None) is False
    try:
        _C._set_tensor_api(None)
        assert program({}, None) is False
    finally:
        _C._set_tensor_api(tensor_api._meta._C_API)
    assert program({}, None) is True
    with pytest.raises(ValueError, match="no state"):
        _C.GuardProgram(2, 3, [("LOAD_TORCH_STATE", 2, 0, 99, None)], None)


def test_compiled_calls_under_each_state_behave_as_eager():
    """Grad mode, autocast and a torch-function mode switched around the same compiled function:
    each call returns (dtype, requires_grad, the mode's record) what eager does, and a state
    seen before hits its entry again."""
    dynamo_lite.reset()
    counter = CompileCounter()
    compiled = dynamo_lite.compile(_f, backend=counter)
    x = torch.randn(3, 3, requires_grad=True)

    def both(call):
        return call(_f), call(compiled)

    def plain(fn):
        return fn(x)

    def no_grad(fn):
        with torch.no_grad():
            return fn(x)

    def autocast(fn):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return fn(x)

    def mode(fn):
        with Recording() as m:
            out = fn(x)
        return out, m.calls

    for call in (plain, no_grad, autocast, plain, no_grad, autocast):
        expected, got = both(call)
        assert_same(got, expected)
    eager_out, eager_calls = mode(_f)
    out, calls = mode(compiled)
    assert_same(out, eager_out)
    assert calls == eager_calls  # the mode sees every torch call, as eagerly
    assert plain(compiled).requires_grad and not no_grad(compiled).requires_grad
    assert autocast(compiled).dtype is torch.bfloat16
    frames = counter.frame_count
    for call in (plain, no_grad, autocast):
        call(compiled)
    assert counter.frame_count == frames  # each state seen before: a hit
    dynamo_lite.reset()


def test_a_graph_compiled_without_tf32_is_not_reused_with_it():
    """cuBLAS TF32 is global state a backend may bake into its kernels (inductor picks the matmul
    precision at compile time): switching it recompiles, as torch.compile does, and switching it
    back hits the first entry again."""
    seen = []

    def backend(gm, example_inputs):
        flag = torch.backends.cuda.matmul.allow_tf32  # read when compiling, as inductor does

        def run(*args):
            seen.append(flag)
            return gm(*args)

        return run

    dynamo_lite.reset()
    compiled = dynamo_lite.compile(lambda x: x + 1, backend=backend)
    old = torch.backends.cuda.matmul.allow_tf32
    try:
        for flag in (False, True, False, True):
            torch.backends.cuda.matmul.allow_tf32 = flag
            compiled(torch.ones(2))
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old
    assert seen == [False, True, False, True]
    dynamo_lite.reset()
