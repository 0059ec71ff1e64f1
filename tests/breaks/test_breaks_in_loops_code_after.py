"""A graph break inside a loop: the code after the loop is captured again.

The loop goes on natively, calling its body function each iteration (codegen/loop_bodies.py);
where it leaves to (its end, a ``break``, the end of a while loop's test) the frame continues in
a resume function, which the hook captures like any other (codegen/frame_code.py
``_resume_after_loop``).  So ``for layer in layers: if <tensor test>: ...`` followed by the
model's output object and loss is one more graph, not eager code (Hugging Face's LayerDrop
loops: wav2vec2's encoder built its ``BaseModelOutput`` eagerly, and every write to it broke).
Not done where the code after the loop is itself inside a loop (each outer iteration would nest
one more frame) or only returns.  Each case compares everything observable with eager.
"""
from __future__ import annotations

import dataclasses

import pytest
import torch

import dynamo_lite
from dynamo_lite.report import events
from dynamo_lite.testing import CompileCounter, check_calls


def _graph_ops(counter: CompileCounter) -> list[set]:
    return [{getattr(n.target, "__name__", str(n.target)) for n in gm.graph.nodes if n.op == "call_method"
             or n.op == "call_function"} for gm in counter.graphs]


def after_for(x, n):
    acc = x * 2
    for i in range(n):
        if acc.sum() > 0:  # data-dependent: breaks inside the loop
            acc = acc + i
        else:
            acc = acc - i
    y = acc.sin()
    return y.cos() + 1


def test_code_after_a_for_loop_with_a_break_is_captured():
    counter = check_calls(after_for, [(torch.ones(3), 3), (-torch.ones(3), 2), (torch.ones(3), 0)])
    assert any({"sin", "cos"} <= ops for ops in _graph_ops(counter))


def after_break_statement(x, limits):
    found = None
    for lim in limits:
        if x.sum() > lim:
            found = lim
            break
        x = x + 1
    return x.relu() * 2, found


@pytest.mark.parametrize("limits", [[5, 1, 0], [100, 200], []])
def test_code_after_a_break_statement_is_captured(limits):
    counter = check_calls(after_break_statement, [(torch.ones(3), limits)])
    if limits:
        assert any("relu" in ops for ops in _graph_ops(counter))


def assigned_only_in_the_loop(x, n):
    for i in range(n):
        if x.sum() > 0:
            last = i  # unbound after the loop when n == 0: eager raises UnboundLocalError
        x = x * 2
    return x + last


@pytest.mark.parametrize("n", [0, 1, 3])
def test_a_local_first_assigned_in_the_loop(n):
    check_calls(assigned_only_in_the_loop, [(torch.ones(2), n)], graphs=None)


def after_while(x):
    steps = 0
    while x.norm() < 10:  # a tensor test at the loop's head
        x = x * 1.5
        steps += 1
    return x.tanh(), steps


def test_code_after_a_while_loop_on_a_tensor_test():
    check_calls(after_while, [(torch.ones(2),), (torch.full((2,), 20.0),)], graphs=None)


def stack_under_the_loop(x, items):
    # the loop runs inside a call's argument list: values below it on the stack
    return torch.stack([x] + [x * k for k in items if x.sum() > k]) + 1


def test_a_comprehension_loop_with_values_under_it():
    check_calls(stack_under_the_loop, [(torch.ones(2), [0, 5, 1])], graphs=None)


def nested(x, rows):
    total = x
    for row in rows:
        for v in row:
            if total.sum() > v:
                total = total + v
        total = total * 2  # after the inner loop, inside the outer one: runs natively
    return total - 1


def test_a_break_in_an_inner_loop():
    check_calls(nested, [(torch.ones(2), [[1, 2], [3], []]), (torch.ones(2), [])], graphs=None)


def with_print_after(x, n):
    for i in range(n):
        if x.max() > i:
            x = x + 1
    print("after the loop", n)  # stdout compared with eager's
    return x * 3


def test_a_break_after_the_loop_too():
    check_calls(with_print_after, [(torch.zeros(2), 3)], graphs=None)


@dataclasses.dataclass
class Out:
    hidden: torch.Tensor
    count: int


class LayerDropEncoder(torch.nn.Module):
    """Hugging Face's LayerDrop loop, then the model's output object."""

    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(4, 4) for _ in range(3))

    def forward(self, h):
        used = 0
        for layer in self.layers:
            if self.training and torch.rand([]) < 0.3:
                continue
            h = layer(h)
            used += 1
        return Out(hidden=h.relu(), count=used)


def test_layerdrop_loop_builds_its_output_in_a_graph():
    torch.manual_seed(0)
    model = LayerDropEncoder().train()
    x = torch.randn(2, 4)
    torch.manual_seed(5)
    expected = model(x)
    seen: list = []
    counter = CompileCounter()
    with events.collecting(seen.append):
        torch.manual_seed(5)
        got = dynamo_lite.compile(model, backend=counter)(x)
    torch.testing.assert_close(got.hidden, expected.hidden)
    assert got.count == expected.count
    assert any("relu" in ops for ops in _graph_ops(counter))
    # the output object is built in the traced code: no frame of its own
    assert not any(getattr(e, "frame", "") == "__init__" for e in seen)


def integrate(y, ts):
    # torchsde's solver loop: a tensor test in an inner while, a list appended after it
    ys = [y]
    t = ts[0]
    for out_t in ts[1:]:
        while t < out_t:
            t = t + 0.25
            y = y * 1.1
        ys.append(y + out_t)
    return torch.stack(ys)


def test_the_rest_of_an_outer_iteration_stays_in_its_loop_body():
    """The loop body function runs once per outer iteration: the code after its inner loop runs
    natively there (a resume function would see ``ys`` one longer each time and recompile)."""
    seen: list = []
    with events.collecting(seen.append):
        counter = check_calls(integrate, [(torch.ones(2), torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0]))], graphs=None)
    import inspect

    lines, first = inspect.getsourcelines(integrate)
    append_line = first + next(i for i, text in enumerate(lines) if "ys.append" in text)
    stack_line = first + next(i for i, text in enumerate(lines) if "torch.stack" in text)
    frames = {getattr(e, "frame", "") for e in seen}
    assert f"integrate (resumed at line {append_line})" not in frames, frames
    # after the outer loop, in the frame itself: captured
    assert f"integrate (resumed at line {stack_line})" in frames, frames
    assert any("stack" in ops for ops in _graph_ops(counter))


def collect(x, n):
    outs = []
    for i in range(n):
        y = x * i
        if y.sum() > 0:  # data-dependent: a break in the loop body
            y = y + 1
        outs.append(y.sin())
    return torch.stack(outs)


def test_a_list_collected_across_iterations_does_not_recompile_the_loop_body():
    """The loop body and the resume function after the break append to ``outs``, one item
    longer at every iteration: they do not read its length, so they are not compiled again for
    each length (only once more, when ``i`` turns out to change and becomes dynamic)."""
    seen: list = []
    with events.collecting(seen.append):
        counter = check_calls(collect, [(torch.ones(2), 3), (torch.ones(2), 9)], graphs=None)
    reasons = [r for e in seen for r in getattr(e, "reasons", ()) or ()]
    assert not any("len(___locals" in r for r in reasons), reasons  # the loop body's
    # the resume function's: none; after the loop, torch.stack reads it: once, for the new n
    assert sum("len(outs)" in r for r in reasons) <= 1, reasons
    assert counter.frame_count <= 8, counter.frame_count


class _Layer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return torch.tanh(self.lin(x)) + x


class _LayerDropEncoder(torch.nn.Module):
    """Hugging Face's LayerDrop loop (wav2vec2, hubert): a draw, a branch on it, then the layer."""

    def __init__(self, n):
        super().__init__()
        self.layers = torch.nn.ModuleList([_Layer() for _ in range(n)])
        self.layerdrop = 0.0  # (a tensor test all the same: the draw is made and compared)

    def forward(self, x):
        x = x * 2
        for layer in self.layers:
            skip = torch.rand([]) < self.layerdrop
            if not skip:
                x = layer(x)
        return x.sum()


@pytest.mark.parametrize("n", [2, 5])
def test_every_iteration_of_a_loop_that_breaks_runs_through_one_capture_of_its_body(n):
    # the graph ends where the iteration around the break began, so the first iteration runs
    # through the loop-body function and its resume function as the others do: the layer is
    # captured once, inside the resume function, for every layer; the rest of the first iteration
    # used to run natively, which captured the layer's forward as a frame of its own (a second
    # graph of the same code), and each layer's submodules recompiled the resume function
    torch.manual_seed(0)
    enc = _LayerDropEncoder(n)
    calls = [lambda: (torch.randn(2, 4, requires_grad=True),)] * 2
    counter = check_calls(enc, calls, rng=True, backward=True, hits=[1])
    # before the loop, the body up to the branch, the rest of the body, after the loop
    assert [ops for ops in _graph_ops(counter)] == [{"mul"}, {"rand", "lt"}, {"linear", "tanh", "add"}, {"sum"}]


def test_the_last_iteration_of_a_loop_that_breaks_stays_in_the_frames_graph():
    # no iteration after it: the body function would serve none, so the graph keeps the
    # iteration up to the break, and the layer is called from the rest of it, natively
    torch.manual_seed(0)
    enc = _LayerDropEncoder(1)
    counter = check_calls(enc, [lambda: (torch.randn(2, 4, requires_grad=True),)] * 2, rng=True, backward=True,
                          hits=[1])
    assert [ops for ops in _graph_ops(counter)] == [{"mul", "rand", "lt"}, {"linear", "tanh", "add"}, {"sum"}]


def _step(y, t):
    return torch.sin(y) * t + y


def integrate_from_one_state(y0, ts):
    # torchsde's integration loop: the first iteration starts with ``prev`` and ``curr`` one object
    prev = curr = y0
    for t in ts:
        if curr.abs().sum() > 1e9:  # a tensor test: breaks in every iteration
            curr = curr * 0
        prev, curr = curr, _step(curr, t) + (curr - prev) / 2
    return prev, curr


def test_a_first_iteration_that_starts_unlike_the_others_stays_in_the_frames_graph():
    # where the locals the body reads are one object at the first iteration (or not all bound),
    # running that iteration through the body function too would compile it once for the first
    # iteration and again for the others: the graph ends at the break there, as before
    seen: list = []
    with events.collecting(seen.append):
        check_calls(integrate_from_one_state, [(torch.ones(3), torch.tensor([0.1, 0.2, 0.3, 0.4]))], graphs=None)
    recompiled = [e.frame for e in seen if type(e).__name__ == "RecompileEvent"]
    assert not any("loop body" in frame for frame in recompiled), recompiled


def scaled(x, scales):
    for s in scales:
        if x.abs().sum() > 1e9:  # a tensor test: breaks in every iteration
            x = x * 0
        x = torch.sin(x) * s
    return x


def test_a_loop_over_two_numbers_compiles_its_body_once():
    # the body is compiled for its number by value at first, and again for any value at the next
    # one: running the first of two iterations through it too would compile it twice
    seen: list = []
    with events.collecting(seen.append):
        check_calls(scaled, [(torch.ones(3), [0.5, 2.0])], graphs=None)
    recompiled = [e.frame for e in seen if type(e).__name__ == "RecompileEvent"]
    assert not any("loop body" in frame for frame in recompiled), recompiled


def erode(x, n):
    # kornia's HausdorffERLoss.perform_erosion: `for k in range(self.k)` around a tensor test
    out = torch.zeros_like(x)
    for k in range(n):
        x = torch.relu(x - 0.5)
        if x.any():
            x = x / 2
        out = out + x * (k + 1)
    return out


def test_a_range_loop_whose_first_item_is_0_keeps_it_in_the_frames_graph():
    # the body function is compiled for 0 and for 1 by value (always static), and only then for
    # any k: running the first iteration (k = 0) through it too would compile it once more
    seen: list = []
    with events.collecting(seen.append):
        check_calls(erode, [(torch.ones(3), 6)], graphs=None)
    body = [e for e in seen if type(e).__name__ in ("GraphEvent", "RecompileEvent") and "loop body" in e.frame]
    assert sum(type(e).__name__ == "RecompileEvent" for e in body) <= 1, [getattr(e, "reasons", None) for e in body]
