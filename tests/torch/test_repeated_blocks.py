"""Repeated blocks captured once (config.repeated_blocks, nested_compile_region): the first call
of a block class is traced as a template and later calls of blocks of that class replay it.

Every test compares the compiled run with eager (outputs, module state, gradients, logs,
warnings) and checks from the repeated_blocks log which calls replayed a template and which
were traced; the graph must be the one per-layer tracing gives.  Covers
dynamo_lite/variables/repeated_blocks.py.
"""
import contextlib
import copy
import logging

import pytest
import torch
from torch import nn

import dynamo_lite
from dynamo_lite import config
from dynamo_lite.testing import CompileCounter, assert_same, check_module, recording, twins


pytestmark = pytest.mark.usefixtures("single_thread")  # (tests/torch/conftest.py)


@contextlib.contextmanager
def block_log():
    """The repeated_blocks log lines written inside the block."""
    lines: list[str] = []
    logger = logging.getLogger("dynamo_lite.repeated_blocks")

    class Collect(logging.Handler):
        def emit(self, record):
            lines.append(record.getMessage())

    handler, level, propagate = Collect(), logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        yield lines
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate


def replayed(lines, cls="Block") -> int:
    return sum(1 for line in lines if line.startswith(f"{cls}:") and " replayed the template of " in line)


def traced_again(lines, cls="Block") -> list[str]:
    return [line for line in lines if line.startswith(f"{cls}:") and " is traced: " in line]


class Block(nn.Module):
    def __init__(self, dim=8, eps=1e-5, residual=True):
        super().__init__()
        self.norm = nn.LayerNorm(dim, eps=eps)
        self.fc = nn.Linear(dim, dim)
        self.residual = residual

    def forward(self, x, scale=None):
        y = torch.relu(self.fc(self.norm(x)))
        if self.residual:
            y = y + x
        return y if scale is None else y * scale


class Stack(nn.Module):
    def __init__(self, n=6, **kw):
        super().__init__()
        self.embed = nn.Linear(8, 8)
        self.blocks = nn.ModuleList([Block(**kw) for _ in range(n)])

    def forward(self, x, scale=None):
        h = self.embed(x)
        for block in self.blocks:
            h = block(h, scale)
        return h


def _graph_ops(gm):
    return [(n.op, str(n.target)) for n in gm.graph.nodes if n.op not in ("placeholder", "output")]


def test_a_stack_of_blocks_traces_one_and_replays_the_rest():
    x = torch.randn(3, 8)
    with block_log() as lines:
        cnt = check_module(Stack, [((x,), {}), ((x,), {})], graphs=1)
    assert replayed(lines) == 5 and not traced_again(lines), lines
    # the backend gets the graph per-layer tracing gives, node for node
    off = CompileCounter()
    with config.patch(repeated_blocks="off"):
        check_module(Stack, [((x,), {})], backend=off)
    assert _graph_ops(cnt.graphs[0]) == _graph_ops(off.graphs[0])
    assert len(cnt.graphs[0].graph.find_nodes(op="placeholder")) == len(off.graphs[0].graph.find_nodes(op="placeholder"))


def test_training_step_gradients_match_eager():
    x = torch.randn(3, 8, requires_grad=True)
    with block_log() as lines:
        check_module(Stack, [((x,), {})], backward=True, graphs=1)
    assert replayed(lines) == 5


def test_new_weights_are_inputs_not_recompiles():
    x = torch.randn(3, 8)
    eager, comp = twins(Stack)
    cnt = CompileCounter()
    compiled = dynamo_lite.compile(comp, backend=cnt)
    assert_same(eager(x), compiled(x))
    for m in (eager, comp):
        with torch.no_grad():
            m.blocks[3].fc.weight.mul_(-2.0)
            m.blocks[5].norm.bias.add_(1.0)
    assert_same(eager(x), compiled(x))
    assert cnt.frame_count == 1


def test_a_block_whose_python_attributes_differ_is_traced():
    def factory():
        model = Stack()
        model.blocks[2].norm.eps = 0.5
        model.blocks[4].residual = False
        return model

    x = torch.randn(3, 8)
    with block_log() as lines:
        check_module(factory, [((x,), {})], graphs=1)
    again = traced_again(lines)
    assert len(again) == 2 and all("does not hold" in line for line in again), lines
    assert any("eps" in line for line in again) and any("residual" in line for line in again), again


def test_changing_an_attribute_of_a_replayed_block_recompiles_and_names_it():
    x = torch.randn(3, 8)
    eager, comp = twins(Stack)
    cnt = CompileCounter()
    compiled = dynamo_lite.compile(comp, backend=cnt)
    assert_same(eager(x), compiled(x))
    for m in (eager, comp):
        m.blocks[4].residual = False
    assert_same(eager(x), compiled(x))
    assert cnt.frame_count == 2
    for m in (eager, comp):
        m.blocks[5].norm.eps = 1e-2
    assert_same(eager(x), compiled(x))
    assert cnt.frame_count == 3


def test_recompile_reason_names_the_replayed_block():
    x = torch.randn(3, 8)
    model = Stack()
    compiled = dynamo_lite.compile(model, backend="eager")
    compiled(x)
    model.blocks[3].residual = False
    seen, rec = recording()
    with rec:
        compiled(x)
    reasons = [str(e.to_dict()) for e in seen if type(e).__name__ == "RecompileEvent"]
    assert len(reasons) == 1 and "self.blocks.3.residual changed from True to False" in reasons[0], reasons


def test_different_arguments_make_another_template():
    model = Stack(n=4)

    class Caller(nn.Module):
        def __init__(self):
            super().__init__()
            self.m = model

        def forward(self, x):
            h = x * 1.0  # (block 0's argument is then not a graph input, as the others')
            for i, block in enumerate(self.m.blocks):
                h = block(h, None if i % 2 else 2.0)
            return h

    x = torch.randn(3, 8, requires_grad=True)
    with block_log() as lines:
        check_module(lambda: Caller(), [((x,), {})], graphs=1)
    assert replayed(lines) == 2, lines  # blocks 2 and 3 replay the templates of blocks 0 and 1


def test_forward_hooks_on_one_block_fire_as_in_eager():
    def factory():
        model = Stack()
        model.blocks[3].register_forward_hook(lambda mod, args, out: out * 0.5)
        model.blocks[1].register_forward_pre_hook(lambda mod, args: (args[0] + 1.0,) + args[1:])
        return model

    x = torch.randn(3, 8)
    with block_log() as lines:
        check_module(factory, [((x,), {})], graphs=1)
    assert replayed(lines) >= 3, lines


def test_a_block_that_writes_its_own_state_is_traced_every_time():
    class Counting(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 8)
            self.calls = 0

        def forward(self, x):
            self.calls += 1
            return self.fc(x) * self.calls

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.Sequential(*[Counting() for _ in range(3)])

        def forward(self, x):
            return self.blocks(x) + self.blocks[0](x)

    x = torch.randn(2, 8)
    with block_log() as lines:
        eager, comp = twins(M)
        check_module((eager, comp), [((x,), {}), ((x,), {})], graphs=None)
    assert replayed(lines, "Counting") == 0
    assert [b.calls for b in comp.blocks] == [b.calls for b in eager.blocks] == [4, 2, 2]


def test_a_block_that_appends_to_a_global_list_is_traced():
    seen = []

    class Recording(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 8)

        def forward(self, x):
            seen.append(x.shape[0])
            return self.fc(x)

    model = nn.Sequential(*[Recording() for _ in range(3)])
    x = torch.randn(2, 8)
    expected = model(x)
    assert seen == [2, 2, 2]
    seen.clear()
    with block_log() as lines:
        got = dynamo_lite.compile(model, backend="eager")(x)
    assert_same(expected, got)
    assert seen == [2, 2, 2]
    assert replayed(lines, "Recording") == 0


def test_in_place_work_on_the_input_is_never_replayed():
    class InPlace(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 8)

        def forward(self, x):
            x.mul_(2.0)
            return self.fc(x)

    class InPlaceOwn(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 8)

        def forward(self, x):
            y = self.fc(x)
            y.add_(1.0)  # on a tensor the block made: fine to replay
            return y

    x = torch.randn(2, 8)
    with block_log() as lines:
        check_module(lambda: nn.Sequential(*[InPlace() for _ in range(3)]), [((x,), {})], graphs=1)
        check_module(lambda: nn.Sequential(*[InPlaceOwn() for _ in range(3)]), [((x,), {})], graphs=1)
    assert replayed(lines, "InPlace") == 0
    assert replayed(lines, "InPlaceOwn") == 1  # block 0 reads a graph input; 1 is the template, 2 replays


def test_tied_weights_and_a_block_called_twice():
    def factory():
        model = Stack(n=4)
        model.blocks[2].fc.weight = model.blocks[1].fc.weight  # tied: block 2 differs from the template
        model.blocks.append(model.blocks[3])  # the same block twice
        return model

    x = torch.randn(3, 8, requires_grad=True)
    with block_log() as lines:
        check_module(factory, [((x,), {})], backward=True, graphs=1)
    assert any("tied differently" in line or "trace read them before" in line for line in traced_again(lines)), lines


def test_blocks_returning_tuples_with_constants():
    class Pair(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(8, 8)
            self.b = nn.Linear(8, 8)

        def forward(self, x, mask=None):
            return self.a(x), None, self.b(x) if mask is None else self.b(x) * mask

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([Pair() for _ in range(4)])

        def forward(self, x, mask):
            outs = []
            for layer in self.layers:
                h, nothing, g = layer(x, mask=mask)
                assert nothing is None
                x = h + g
                outs.append(g)
            return x, outs

    x, mask = torch.randn(2, 8), torch.rand(2, 8)
    with block_log() as lines:
        check_module(M, [((x, mask), {}), ((x, None), {})], graphs=2)
    assert replayed(lines, "Pair") >= 4, lines


def test_grad_mode_is_part_of_the_key():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([Block() for _ in range(4)])

        def forward(self, x):
            h = x * 1.0
            with torch.no_grad():
                h = self.layers[0](h)
            h = self.layers[1](h)  # an argument like layer 0's, but grad mode differs: traced
            h = self.layers[2](h)
            return self.layers[3](h)  # replays layer 2

    x = torch.randn(3, 8)
    with block_log() as lines:
        check_module(M, [((x,), {})], backward=True, graphs=1)
    assert replayed(lines) == 1 and "_modules['3'] replayed the template of" in "".join(lines), lines


def test_a_block_returning_a_view_is_traced():
    class Viewing(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 8)

        def forward(self, x):
            return self.fc(x).view(-1, 8)

    x = torch.randn(2, 8)
    with block_log() as lines:
        check_module(lambda: nn.Sequential(*[Viewing() for _ in range(3)]), [((x,), {})], graphs=1)
    assert replayed(lines, "Viewing") == 0
    assert any("view" in line for line in lines if "cannot be a template" in line), lines


FLAG = True


class ReadsGlobal(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        return self.fc(x) if FLAG else -self.fc(x)


def test_a_global_written_between_blocks_in_the_trace():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([ReadsGlobal() for _ in range(4)])

        def forward(self, x):
            global FLAG
            x = self.layers[0](x)
            x = self.layers[1](x)
            FLAG = False
            x = self.layers[2](x)
            x = self.layers[3](x)
            FLAG = True
            return x

    x = torch.randn(2, 8)
    check_module(M, [((x,), {}), ((x,), {})], graphs=1)
    assert FLAG is True


def test_dropout_in_training_mode_draws_as_eager():
    class Drop(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 8)
            self.drop = nn.Dropout(0.5)

        def forward(self, x):
            return self.drop(self.fc(x))

    x = torch.randn(4, 8)
    with block_log() as lines:
        check_module(lambda: nn.Sequential(*[Drop() for _ in range(4)]).train(), [((x,), {})], backward=True, graphs=1)
    assert replayed(lines, "Drop") == 2


def test_off_and_marked_modes():
    x = torch.randn(3, 8)
    with config.patch(repeated_blocks="off"), block_log() as lines:
        check_module(Stack, [((x,), {})], graphs=1)
    assert replayed(lines) == 0
    with config.patch(repeated_blocks="marked"), block_log() as lines:
        check_module(Stack, [((x,), {})], graphs=1)
    assert replayed(lines) == 0

    class Marked(Block):
        @dynamo_lite.nested_compile_region
        def forward(self, x, scale=None):
            return super().forward(x, scale)

    with config.patch(repeated_blocks="marked"), block_log() as lines:
        check_module(lambda: nn.Sequential(*[Marked() for _ in range(4)]), [((x,), {})], graphs=1)
    assert replayed(lines, "Marked") == 2
    with pytest.raises(ValueError, match="auto, marked, off"):
        config.repeated_blocks = "sometimes"
    assert config.repeated_blocks == "auto"


def test_torch_nested_compile_region_is_honoured_without_breaks():
    class TorchMarked(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 8)

        @torch.compiler.nested_compile_region
        def forward(self, x):
            return torch.relu(self.fc(x)) + x

    x = torch.randn(3, 8)
    with config.patch(repeated_blocks="marked"), block_log() as lines:
        out = dynamo_lite.explain(nn.Sequential(*[TorchMarked() for _ in range(4)]))(x)
    assert out.graph_count == 1 and out.graph_break_count == 0, out
    assert replayed(lines, "TorchMarked") == 2
    model = nn.Sequential(*[TorchMarked() for _ in range(4)])
    assert_same(model(x), dynamo_lite.compile(model, backend="eager")(x))


def test_tiny_llama_eval_and_training_step():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=4,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32)
    ids = torch.randint(0, 64, (1, 6))

    def factory():
        return transformers.LlamaForCausalLM(cfg)

    with block_log() as lines:
        check_module(lambda: factory().eval(), [((ids,), {"use_cache": False})], graphs=1)
    assert replayed(lines, "LlamaDecoderLayer") == 3, lines
    with block_log() as lines:
        check_module(factory, [((ids,), {"use_cache": False, "labels": ids})], backward=lambda out: out.loss, graphs=1)
    assert replayed(lines, "LlamaDecoderLayer") == 3, lines


def test_batchnorm_blocks_in_training_update_running_stats_as_eager():
    class Conv(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(4, 4, 3, padding=1)
            self.bn = nn.BatchNorm2d(4)

        def forward(self, x):
            return torch.relu(self.bn(self.conv(x)))

    x = torch.randn(2, 4, 6, 6)
    steps = [((x,), {}), lambda m: (m.eval(), None)[1], ((x,), {}), lambda m: (m.train(), None)[1], ((x,), {})]
    with block_log() as lines:
        check_module(lambda: nn.Sequential(*[Conv() for _ in range(4)]), steps, backward=True, graphs=None)
    # in training mode BatchNorm writes its running statistics in place: those calls are traced
    assert any("in place" in line for line in lines), lines
    assert replayed(lines, "Conv") >= 2, lines  # in eval mode the blocks replay


def test_nested_groups_of_blocks():
    class Group(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([Block() for _ in range(3)])

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return x

    class Deep(nn.Module):
        def __init__(self):
            super().__init__()
            self.groups = nn.ModuleList([Group() for _ in range(3)])

        def forward(self, x):
            x = x * 1.0
            for g in self.groups:
                x = g(x)
            return x

    x = torch.randn(3, 8, requires_grad=True)
    with block_log() as lines:
        check_module(Deep, [((x,), {})], backward=True, graphs=1)
    assert replayed(lines, "Group") >= 1, lines


class _Context:
    pass


CTX = _Context()
CTX.flag = False
CTX.active = None


class SetsAndResets(nn.Module):
    """Sets a global object's attribute for its inner call and puts it back (as the kernels
    package does around each layer): a write that leaves the real value is no side effect."""

    def __init__(self):
        super().__init__()
        self.inner = nn.Linear(8, 8)

    def forward(self, x):
        CTX.active = "on"
        try:
            y = self.inner(x) * (2.0 if CTX.active == "on" else 1.0)
        finally:
            CTX.active = None
        return y


class ResetsAFlag(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = nn.Linear(8, 8)

    def forward(self, x):
        CTX.flag = False
        return self.inner(x)


def test_a_set_and_reset_of_a_global_object_replays():
    x = torch.randn(2, 8)
    with block_log() as lines:
        check_module(lambda: nn.Sequential(*[SetsAndResets() for _ in range(4)]), [((x,), {}), ((x,), {})], graphs=1)
    assert replayed(lines, "SetsAndResets") == 2, lines
    assert CTX.active is None


def test_a_reset_after_the_caller_set_the_flag_again():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([ResetsAFlag() for _ in range(4)])

        def forward(self, x):
            x = x * 1.0
            for i, layer in enumerate(self.layers):
                if i % 2:
                    CTX.flag = True  # the layer must put it back to False
                x = layer(x)
            return x, CTX.flag

    x = torch.randn(2, 8)
    for _ in range(2):
        CTX.flag = False
        check_module(M, [((x,), {})], graphs=1)
        assert CTX.flag is False
