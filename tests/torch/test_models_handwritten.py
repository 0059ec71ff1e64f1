"""Hand-written models: the model code PyTorch users write by hand, compiled with
backend="eager" (a few with "aot_eager"), must behave exactly like eager.

Every test builds two identical copies (``torch.manual_seed`` before each model and
input), runs one eagerly and one through ``dynamo_lite.compile`` over at least two
calls (the second hits the cache) and with changed inputs (recompiles), and compares
returns, exceptions, gradients, parameters, buffers (BatchNorm running stats,
non-persistent buffers) and optimizer state.

Covers: hand-written attention (triu/tril causal masks, padding masks, softmax,
dropout train/eval, einsum, SDPA), LayerNorm + residual blocks, KV caches kept in
lists/dicts across calls, rotary embeddings with cached sin/cos buffers; CNNs
(Conv/BatchNorm train+eval, momentum=None, pooling, flatten); LSTM/GRU modules and
hand-written recurrent loops; embeddings; whole training steps (zero_grad, forward,
loss, backward, optimizer.step) compared step by step; autocast(bfloat16); no_grad and
inference_mode; torch.utils.checkpoint; module subclasses with properties, config
objects, ModuleDict, ParameterList, non-persistent buffers; hooks registered before and
after compiling; kwargs calls returning dicts/namedtuples/dataclasses; config-flag
branching; train()/eval() and requires_grad_ toggles between calls; state_dict round
trips and deepcopy of compiled modules; tiny transformers GPT-2 / Llama / BERT models.
Known dynamo_lite bugs are strict xfails in tests/test_known_bugs.py.
"""
import collections
import copy
import dataclasses
import io
import math
import warnings

import pytest
import torch
import torch.nn.functional as F
import torch.utils.checkpoint
from torch import nn

import dynamo_lite
from dynamo_lite.testing import assert_same, assert_same_as_eager, check_calls, check_module, twins

try:
    import transformers
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
except ImportError:  # pragma: no cover - depends on the environment
    transformers = None

needs_transformers = pytest.mark.skipif(transformers is None, reason="transformers is not installed")
RTOL, ATOL = 1e-4, 1e-5


pytestmark = pytest.mark.usefixtures("single_thread")  # (tests/torch/conftest.py)


# ---- helpers ------------------------------------------------------------------------------------
# twins(factory) builds the two identical models, check_module((e, c), calls) runs the eager one
# and the compiled copy on each (args, kwargs) and compares outputs, gradients (``backward=loss``)
# and state (parameters, grads, every buffer); assert_same(e, c) compares the state of the two.
def sq(out):
    return out.float().pow(2).mean()


def rand(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


# ---- hand-written transformer pieces ----------------------------------------------------------------
class Attention(nn.Module):
    def __init__(self, d=16, h=2, p=0.0, mask_kind="triu"):
        super().__init__()
        self.h, self.d = h, d
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.drop = nn.Dropout(p)
        self.mask_kind = mask_kind

    def forward(self, x, pad_mask=None):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(self.d, dim=2)
        q, k, v = (t.view(B, T, self.h, C // self.h).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
        if self.mask_kind == "triu":
            mask = torch.triu(torch.ones(T, T, dtype=torch.bool, device=x.device), diagonal=1)
            att = att.masked_fill(mask, float("-inf"))
        elif self.mask_kind == "tril":
            mask = torch.tril(torch.ones(T, T)).view(1, 1, T, T)
            att = att.masked_fill(mask == 0, float("-inf"))
        if pad_mask is not None:
            att = att.masked_fill(~pad_mask[:, None, None, :], torch.finfo(att.dtype).min)
        att = self.drop(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(y)


class Block(nn.Module):
    def __init__(self, d=16, h=2, p=0.0):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = Attention(d, h, p)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d), nn.Dropout(p))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


@pytest.mark.parametrize("kind", ["triu", "tril", "none"])
def test_attention_causal_masks_two_calls_and_new_length(kind):
    e, c = twins(lambda: Attention(mask_kind=kind))
    cnt = check_module((e, c), [((rand(2, 5, 16),), {}), ((rand(2, 5, 16, seed=1),), {}),
                               ((rand(2, 7, 16, seed=2),), {})], backward=sq, rtol=RTOL, atol=ATOL)
    assert cnt.frame_count == 2  # one recompile for T=7


def test_attention_with_padding_mask():
    e, c = twins(Attention)
    pad = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])
    check_module((e, c), [((rand(2, 6, 16),), {"pad_mask": pad}), ((rand(2, 6, 16, seed=3),), {"pad_mask": pad}),
                      ((rand(2, 6, 16, seed=4),), {})], backward=sq, rtol=RTOL, atol=ATOL)


def test_block_with_dropout_train_then_eval_then_train():
    e, c = twins(lambda: Block(p=0.3))
    compiled = dynamo_lite.compile(c, backend="eager")
    x = rand(2, 5, 16)
    for mode in (True, True, False, False, True):
        e.train(mode)
        compiled.train(mode)
        assert c.training is mode and all(m.training is mode for m in c.modules())
        torch.manual_seed(7)
        ye = e(x)
        torch.manual_seed(7)
        yc = compiled(x)
        assert_same(ye, yc, "output", RTOL, ATOL)
        e.zero_grad()
        c.zero_grad()
        sq(ye).backward()
        sq(yc).backward()
        assert_same(e, c, "model", RTOL, ATOL)
    # dropout really is active in train mode
    torch.manual_seed(1)
    a = compiled(x)
    torch.manual_seed(2)
    assert not torch.allclose(a, compiled(x))


def test_dropout_rng_consumption_matches_eager():
    """After a compiled train-mode call the global RNG is where eager leaves it."""
    e, c = twins(lambda: Block(p=0.5))
    compiled = dynamo_lite.compile(c, backend="eager")
    x = rand(2, 4, 16)
    torch.manual_seed(3)
    e(x)
    after_e = torch.rand(3)
    torch.manual_seed(3)
    compiled(x)
    after_c = torch.rand(3)
    assert torch.equal(after_e, after_c)


def test_einsum_attention_and_scaled_dot_product_attention():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.wq = nn.Parameter(torch.randn(8, 8))
            self.wk = nn.Parameter(torch.randn(8, 8))

        def forward(self, x, causal: bool):
            q = torch.einsum("btd,de->bte", x, self.wq)
            k = torch.einsum("btd,de->bte", x, self.wk)
            s = torch.einsum("bqd,bkd->bqk", q, k) / 8 ** 0.5
            a = s.softmax(-1)
            y1 = torch.einsum("bqk,bkd->bqd", a, x)
            y2 = F.scaled_dot_product_attention(q[:, None], k[:, None], x[:, None], is_causal=causal)
            return y1 + y2[:, 0]

    e, c = twins(M)
    cnt = check_module((e, c), [((rand(2, 5, 8), True), {}), ((rand(2, 5, 8, seed=1), True), {}),
                               ((rand(2, 5, 8, seed=2), False), {})], backward=sq, rtol=RTOL, atol=ATOL)
    assert cnt.frame_count == 2


class CachedAttention(nn.Module):
    """Decoder attention that appends k/v to a Python list cache kept on the module."""

    def __init__(self, d=8):
        super().__init__()
        self.q, self.k, self.v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.cache_k: list = []
        self.cache_v: list = []

    def forward(self, x):
        self.cache_k.append(self.k(x))
        self.cache_v.append(self.v(x))
        k = torch.cat(self.cache_k, dim=1)
        v = torch.cat(self.cache_v, dim=1)
        att = (self.q(x) @ k.transpose(1, 2)).softmax(-1)
        return att @ v, len(self.cache_k)


def test_kv_cache_list_on_module_appended_across_calls():
    e, c = twins(CachedAttention)
    compiled = dynamo_lite.compile(c, backend="eager")
    with torch.no_grad():
        for step in range(4):
            x = rand(1, 1, 8, seed=step)
            assert_same(e(x), compiled(x), f"step {step}", RTOL, ATOL)
            assert len(c.cache_k) == len(e.cache_k) == step + 1
            for a, b in zip(e.cache_k, c.cache_k):
                assert_same(a, b, "cache", RTOL, ATOL)
    e.cache_k.clear(), e.cache_v.clear(), c.cache_k.clear(), c.cache_v.clear()
    x = rand(1, 3, 8, seed=9)  # new prompt, new shape
    assert_same(e(x), compiled(x), "after reset", RTOL, ATOL)


def test_kv_cache_dict_passed_in_and_returned():
    lin = nn.Linear(8, 16)

    def decode(x, cache, layer):
        kv = lin(x)
        k, v = kv.chunk(2, dim=-1)
        if layer in cache:
            pk, pv = cache[layer]
            k = torch.cat([pk, k], dim=1)
            v = torch.cat([pv, v], dim=1)
        cache[layer] = (k, v)
        out = F.softmax(x @ k.transpose(1, 2), dim=-1) @ v
        return out, cache

    compiled = dynamo_lite.compile(decode, backend="eager")
    ce, cc = {}, {}
    with torch.no_grad():
        for step in range(3):
            for layer in ("l0", "l1"):
                x = rand(1, 1, 8, seed=step)
                oe, re_ = decode(x, ce, layer)
                oc, rc = compiled(x, cc, layer)
                assert rc is cc and re_ is ce
                assert_same(oe, oc, "out", RTOL, ATOL)
                assert_same(ce, cc, "cache", RTOL, ATOL)


class Rotary(nn.Module):
    """Rotary embedding caching cos/sin in non-persistent buffers, grown on demand."""

    def __init__(self, dim=8, base=10000.0):
        super().__init__()
        inv = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv, persistent=False)
        self.seq_len_cached = 0
        self.cos_cached = None
        self.sin_cached = None

    def _update(self, T):
        if T > self.seq_len_cached:
            self.seq_len_cached = T
            t = torch.arange(T, dtype=self.inv_freq.dtype)
            freqs = torch.outer(t, self.inv_freq)
            emb = torch.cat((freqs, freqs), dim=-1)
            self.cos_cached = emb.cos()[None, None]
            self.sin_cached = emb.sin()[None, None]

    @staticmethod
    def rotate_half(x):
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat((-x2, x1), dim=-1)

    def forward(self, q, k):
        T = q.shape[-2]
        self._update(T)
        cos, sin = self.cos_cached[:, :, :T], self.sin_cached[:, :, :T]
        return q * cos + self.rotate_half(q) * sin, k * cos + self.rotate_half(k) * sin


def test_rotary_embedding_with_cached_sin_cos_grown_between_calls():
    e, c = twins(Rotary)
    cnt = check_module((e, c), [((rand(1, 2, 4, 8), rand(1, 2, 4, 8, seed=1)), {}),
                                      ((rand(1, 2, 3, 8, seed=2), rand(1, 2, 3, 8, seed=3)), {}),
                                      ((rand(1, 2, 6, 8, seed=4), rand(1, 2, 6, 8, seed=5)), {}),
                                      ((rand(1, 2, 6, 8, seed=6), rand(1, 2, 6, 8, seed=7)), {})], rtol=RTOL, atol=ATOL)
    assert c.seq_len_cached == e.seq_len_cached == 6
    assert_same(e.cos_cached, c.cos_cached, "cos cache")
    assert "inv_freq" not in c.state_dict() and "inv_freq" in dict(c.named_buffers())


def test_nn_multihead_attention_with_masks_and_weights():
    e, c = twins(lambda: nn.MultiheadAttention(16, 2, batch_first=True))
    T = 5
    causal = nn.Transformer.generate_square_subsequent_mask(T)
    kpm = torch.tensor([[False] * 5, [False] * 3 + [True] * 2])
    x = rand(2, T, 16)
    check_module((e, c), [((x, x, x), {"attn_mask": causal, "key_padding_mask": kpm}),
                      ((x * 2, x, x), {"attn_mask": causal, "need_weights": False}),
                      ((x, x, x), {"key_padding_mask": kpm, "average_attn_weights": False})],
               backward=lambda out: sq(out[0]), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("train", [True, False])
def test_transformer_encoder_with_causal_mask(train):
    def make():
        layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.1, batch_first=True)
        return nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)

    e, c = twins(make)
    e.train(train), c.train(train)
    mask = nn.Transformer.generate_square_subsequent_mask(5)
    calls = [((rand(2, 5, 16),), {"mask": mask, "is_causal": True}), ((rand(2, 5, 16, seed=1),), {"mask": mask})]
    if train:
        check_module((e, c), calls, backward=sq, rtol=RTOL, atol=ATOL)
    else:
        with torch.no_grad():  # takes the fused fast path in eager
            check_module((e, c), calls, rtol=RTOL, atol=ATOL)


# ---- CNNs -------------------------------------------------------------------------------------------
class SmallCNN(nn.Module):
    def __init__(self, momentum=0.1, affine=True, track=True, flatten="flatten"):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(4, momentum=momentum, affine=affine, track_running_stats=track)
        self.conv2 = nn.Conv2d(4, 6, 3, stride=2, bias=False)
        self.bn2 = nn.BatchNorm2d(6, momentum=momentum, affine=affine, track_running_stats=track)
        self.pool = nn.MaxPool2d(2)
        self.head = nn.Linear(6, 3)
        self.flatten = flatten

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.pool(F.relu(self.bn2(self.conv2(x))))
        x = F.adaptive_avg_pool2d(x, 1)
        if self.flatten == "flatten":
            x = torch.flatten(x, 1)
        elif self.flatten == "view":
            x = x.view(x.size(0), -1)
        else:
            x = nn.Flatten()(x)
        return self.head(x)


@pytest.mark.parametrize("flatten", ["flatten", "view", "module"])
def test_cnn_batchnorm_train_running_stats_then_eval(flatten):
    e, c = twins(lambda: SmallCNN(flatten=flatten))
    compiled = dynamo_lite.compile(c, backend="eager")
    for step, mode in enumerate([True, True, True, False, False, True]):
        e.train(mode), compiled.train(mode)
        x = rand(4, 3, 10, 10, seed=step)
        ye, yc = e(x), compiled(x)
        assert_same(ye, yc, f"step {step}", RTOL, ATOL)
        e.zero_grad(), c.zero_grad()
        sq(ye).backward(), sq(yc).backward()
        assert_same(e, c, "model", RTOL, ATOL)
    assert int(c.bn1.num_batches_tracked) == 4


def test_batchnorm_momentum_none_cumulative_average():
    """momentum=None: the factor is 1/num_batches_tracked, read from the buffer in Python."""
    e, c = twins(lambda: SmallCNN(momentum=None))
    e.train(), c.train()
    check_module((e, c), [((rand(4, 3, 8, 8, seed=s),), {}) for s in range(4)], backward=sq, rtol=RTOL, atol=ATOL)
    assert int(c.bn1.num_batches_tracked) == 4


def test_batchnorm_without_running_stats_and_without_affine():
    e, c = twins(lambda: SmallCNN(affine=False, track=False))
    for mode in (True, False):
        e.train(mode), c.train(mode)
        check_module((e, c), [((rand(2, 3, 8, 8, seed=s),), {}) for s in range(2)], backward=sq, rtol=RTOL, atol=ATOL)


def test_batchnorm1d_groupnorm_conv1d_avgpool():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv1d(4, 8, 3, padding="same")
            self.gn = nn.GroupNorm(2, 8)
            self.bn = nn.BatchNorm1d(8)
            self.pool = nn.AvgPool1d(2)

        def forward(self, x):
            return self.pool(self.bn(F.silu(self.gn(self.conv(x))))).mean(-1)

    e, c = twins(M)
    check_module((e, c), [((rand(3, 4, 10, seed=s),), {}) for s in range(3)] + [((rand(3, 4, 12),), {})], backward=sq, rtol=RTOL, atol=ATOL)


def test_batchnorm_eval_with_aot_eager_backend():
    e, c = twins(SmallCNN)
    e.train(), c.train()
    check_module((e, c), [((rand(4, 3, 8, 8, seed=s),), {}) for s in range(2)], backend="aot_eager", backward=sq, rtol=RTOL, atol=ATOL)
    e.eval(), c.eval()
    check_module((e, c), [((rand(4, 3, 8, 8, seed=s),), {}) for s in range(2)], backend="aot_eager", backward=sq, rtol=RTOL, atol=ATOL)


# ---- recurrent models ------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["lstm", "gru", "rnn"])
def test_rnn_modules_with_initial_state(kind):
    cls = {"lstm": nn.LSTM, "gru": nn.GRU, "rnn": nn.RNN}[kind]
    e, c = twins(lambda: cls(4, 6, num_layers=2, batch_first=True, bidirectional=kind == "gru"))
    layers = 2 * (2 if kind == "gru" else 1)
    h0 = rand(layers, 3, 6, seed=5)
    state = (h0, rand(layers, 3, 6, seed=6)) if kind == "lstm" else h0
    check_module((e, c), [((rand(3, 5, 4),), {}), ((rand(3, 5, 4, seed=1), state), {}),
                      ((rand(3, 7, 4, seed=2), state), {})],
               backward=lambda out: sq(out[0]) + sq(out[1][0] if kind == "lstm" else out[1]), rtol=RTOL, atol=ATOL)


class LoopLSTM(nn.Module):
    def __init__(self, i=4, h=6):
        super().__init__()
        self.cell = nn.LSTMCell(i, h)
        self.out = nn.Linear(h, 2)
        self.h = h

    def forward(self, x, state=None):
        B, T, _ = x.shape
        if state is None:
            state = (x.new_zeros(B, self.h), x.new_zeros(B, self.h))
        outs = []
        for t in range(T):
            state = self.cell(x[:, t], state)
            outs.append(self.out(state[0]))
        return torch.stack(outs, 1), state


def test_hand_written_lstm_cell_loop_over_time_steps():
    e, c = twins(LoopLSTM)
    check_module((e, c), [((rand(2, 4, 4),), {}), ((rand(2, 4, 4, seed=1),), {}), ((rand(2, 6, 4, seed=2),), {}),
                      ((rand(2, 3, 4, seed=3), (rand(2, 6), rand(2, 6, seed=1))), {})],
               backward=lambda out: sq(out[0]) + sq(out[1][1]), rtol=RTOL, atol=ATOL)


def test_hand_written_elman_rnn_with_early_stop_on_tensor_value():
    w = rand(5, 5) * 0.3
    u = rand(3, 5, seed=1)

    def rnn(xs):
        h = torch.zeros(5)
        steps = 0
        for x in xs.unbind(0):
            h = torch.tanh(x @ u + h @ w)
            steps += 1
            if h.abs().max() > 0.999:  # data-dependent: graph break
                break
        return h, steps

    assert_same_as_eager(rnn, rand(6, 3, seed=2))
    assert_same_as_eager(rnn, rand(6, 3, seed=3) * 20)


def test_packed_sequence_lstm():
    e, c = twins(lambda: nn.LSTM(3, 4, batch_first=True))

    class Wrap(nn.Module):
        def __init__(self, lstm):
            super().__init__()
            self.lstm = lstm

        def forward(self, x, lengths):
            packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
            out, (h, _) = self.lstm(packed)
            out, lens = nn.utils.rnn.pad_packed_sequence(out, batch_first=True)
            return out, h, lens

    check_module((Wrap(e), Wrap(c)), [((rand(3, 5, 3), torch.tensor([5, 2, 3])), {}),
                                  ((rand(3, 5, 3, seed=1), torch.tensor([4, 5, 1])), {})],
               backward=lambda out: sq(out[0]) + sq(out[1]), rtol=RTOL, atol=ATOL)


# ---- embeddings -------------------------------------------------------------------------------------
def test_embedding_with_padding_idx_positions_and_tied_head():
    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(20, 8, padding_idx=0)
            self.pos = nn.Embedding(16, 8)
            self.ln = nn.LayerNorm(8)
            self.head = nn.Linear(8, 20, bias=False)
            self.head.weight = self.tok.weight

        def forward(self, idx, targets=None):
            pos = torch.arange(idx.size(1), device=idx.device)
            logits = self.head(self.ln(self.tok(idx) + self.pos(pos)))
            if targets is None:
                return {"logits": logits}
            return {"logits": logits, "loss": F.cross_entropy(logits.view(-1, 20), targets.view(-1), ignore_index=0)}

    e, c = twins(LM)
    idx = torch.tensor([[1, 5, 0, 0], [3, 4, 7, 9]])
    check_module((e, c), [((idx,), {}), ((idx,), {"targets": idx.roll(1, 1)}), ((idx[:, :3],), {"targets": idx[:, :3].contiguous()})],
               backward=lambda out: out["loss"] if "loss" in out else sq(out["logits"]), rtol=RTOL, atol=ATOL)


def test_embedding_bag_and_functional_embedding_max_norm():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.bag = nn.EmbeddingBag(10, 4, mode="mean")
            self.emb = nn.Embedding(10, 4, max_norm=1.0)

        def forward(self, idx, offsets):
            return self.bag(idx, offsets), self.emb(idx)

    e, c = twins(M)
    idx = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9])
    check_module((e, c), [((idx, torch.tensor([0, 4])), {}), ((idx.flip(0), torch.tensor([0, 3])), {})],
               backward=lambda out: sq(out[0]) + sq(out[1]), rtol=RTOL, atol=ATOL)


# ---- whole training steps ---------------------------------------------------------------------------
def _mlp():
    return nn.Sequential(nn.Linear(6, 12), nn.LayerNorm(12), nn.ReLU(), nn.Dropout(0.2), nn.Linear(12, 3))


def make_step(model, opt, set_to_none=True, clip=None, sched=None):
    def step(x, y):
        opt.zero_grad(set_to_none=set_to_none)
        out = model(x)
        loss = F.cross_entropy(out, y)
        loss.backward()
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        if sched is not None:
            sched.step()
        return loss.detach(), out.argmax(-1)

    return step


def _opt_state_same(oe, oc):
    se, sc = oe.state_dict(), oc.state_dict()
    assert se["param_groups"] == sc["param_groups"]
    assert_same(se["state"], sc["state"], "optimizer state", RTOL, ATOL)


@pytest.mark.parametrize("opt_name", ["sgd_momentum", "adam", "adamw"])
def test_compiled_training_step_matches_eager_over_steps(opt_name):
    e, c = twins(_mlp)
    e.train(), c.train()

    def make_opt(m):
        if opt_name == "sgd_momentum":
            return torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, nesterov=True)
        if opt_name == "adam":
            return torch.optim.Adam(m.parameters(), lr=1e-2)
        return torch.optim.AdamW(m.parameters(), lr=1e-2, weight_decay=0.1)

    oe, oc = make_opt(e), make_opt(c)
    step_e = make_step(e, oe)
    step_c = dynamo_lite.compile(make_step(c, oc), backend="eager")
    for i in range(4):
        x, y = rand(8, 6, seed=i), torch.randint(0, 3, (8,), generator=torch.Generator().manual_seed(i))
        torch.manual_seed(i)
        le, pe = step_e(x, y)
        torch.manual_seed(i)
        lc, pc = step_c(x, y)
        assert_same((le, pe), (lc, pc), f"step {i}", RTOL, ATOL)
        assert_same(e, c, "model", RTOL, ATOL)
        _opt_state_same(oe, oc)


def test_compiled_training_step_with_clipping_scheduler_and_zero_grad_to_zero():
    e, c = twins(_mlp)
    oe, oc = torch.optim.SGD(e.parameters(), lr=0.5), torch.optim.SGD(c.parameters(), lr=0.5)
    se, sc = torch.optim.lr_scheduler.StepLR(oe, 2, 0.5), torch.optim.lr_scheduler.StepLR(oc, 2, 0.5)
    step_e = make_step(e, oe, set_to_none=False, clip=0.5, sched=se)
    step_c = dynamo_lite.compile(make_step(c, oc, set_to_none=False, clip=0.5, sched=sc), backend="eager")
    for i in range(4):
        x, y = rand(8, 6, seed=i), torch.randint(0, 3, (8,), generator=torch.Generator().manual_seed(i))
        torch.manual_seed(i)
        r_e = step_e(x, y)
        torch.manual_seed(i)
        r_c = step_c(x, y)
        assert_same(r_e, r_c, f"step {i}", RTOL, ATOL)
        assert_same(e, c, "model", RTOL, ATOL)
        _opt_state_same(oe, oc)
        assert se.get_last_lr() == sc.get_last_lr()


def test_training_step_with_aot_eager_backend_and_eval_between():
    e, c = twins(lambda: SmallCNN())
    oe, oc = torch.optim.SGD(e.parameters(), lr=0.1), torch.optim.SGD(c.parameters(), lr=0.1)

    def make(model, opt):
        def step(x):
            model.train()
            opt.zero_grad()
            loss = sq(model(x))
            loss.backward()
            opt.step()
            model.eval()
            with torch.no_grad():
                ev = model(x)
            return loss, ev

        return step

    step_e, step_c = make(e, oe), dynamo_lite.compile(make(c, oc), backend="aot_eager")
    for i in range(3):
        x = rand(4, 3, 8, 8, seed=i)
        assert_same(step_e(x), step_c(x), f"step {i}", RTOL, ATOL)
        assert_same(e, c, "model", RTOL, ATOL)


# ---- autocast, no_grad, checkpoint -------------------------------------------------------------------
def test_autocast_bfloat16_block_inside_forward():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(8, 8)
            self.b = nn.Linear(8, 4)

        def forward(self, x):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                h = F.relu(self.a(x))
                dt = h.dtype
                with torch.autocast("cpu", enabled=False):
                    n = h.float().norm(dim=-1, keepdim=True)
            return self.b(h.float()) / n, dt, torch.is_autocast_enabled("cpu")

    e, c = twins(M)
    check_module((e, c), [((rand(3, 8),), {}), ((rand(3, 8, seed=1),), {})], backward=lambda out: sq(out[0]), rtol=RTOL, atol=ATOL)


def test_model_called_under_autocast_from_outside():
    e, c = twins(lambda: nn.Sequential(nn.Linear(8, 8), nn.GELU(), nn.Linear(8, 2)))
    compiled = dynamo_lite.compile(c, backend="eager")
    x = rand(4, 8)
    for enabled in (True, True, False):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=enabled):
            ye, yc = e(x), compiled(x)
        assert_same(ye, yc, f"autocast={enabled}", 1e-2, 1e-2)


def test_no_grad_and_inference_mode_inference():
    e, c = twins(lambda: Block())
    e.eval(), c.eval()
    compiled = dynamo_lite.compile(c, backend="eager")
    x = rand(2, 4, 16)
    for ctx in (torch.no_grad, torch.inference_mode, torch.no_grad):
        with ctx():
            ye, yc = e(x), compiled(x)
        assert_same(ye, yc, ctx.__name__, RTOL, ATOL)
        assert yc.is_inference() == ye.is_inference()
    ye, yc = e(x), compiled(x)  # grad mode again
    assert yc.requires_grad and ye.requires_grad


def test_no_grad_decorated_generate_loop():
    e, c = twins(lambda: CachedAttention(8))

    def make(model):
        @torch.no_grad()
        def generate(x, n):
            outs = []
            for _ in range(n):
                y, _ = model(x)
                x = y[:, -1:]
                outs.append(x)
            return torch.cat(outs, 1)

        return generate

    ge, gc = make(e), dynamo_lite.compile(make(c), backend="eager")
    assert_same(ge(rand(1, 2, 8), 3), gc(rand(1, 2, 8), 3), "generated", RTOL, ATOL)
    assert len(e.cache_k) == len(c.cache_k) == 3


@pytest.mark.parametrize("reentrant", [False, True])
def test_activation_checkpointing(reentrant):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList(Block(8, 2, p=0.1) for _ in range(2))

        def forward(self, x):
            for b in self.blocks:
                x = torch.utils.checkpoint.checkpoint(b, x, use_reentrant=reentrant)
            return x

    e, c = twins(M)
    x1, x2 = rand(2, 3, 8).requires_grad_(reentrant), rand(2, 3, 8, seed=1).requires_grad_(reentrant)
    check_module((e, c), [((x1,), {}), ((x2,), {})], backward=sq, rtol=RTOL, atol=ATOL)


# ---- module subclasses, configs, containers, hooks ---------------------------------------------------
@dataclasses.dataclass
class Cfg:
    d: int = 8
    use_bias_branch: bool = True
    act: str = "gelu"
    scale: float = 0.5


@dataclasses.dataclass
class Out:
    y: torch.Tensor
    aux: dict
    n: int = 0


Pair = collections.namedtuple("Pair", "main extra")


class Configured(nn.Module):
    def __init__(self, cfg: Cfg):
        super().__init__()
        self.cfg = cfg
        self.layers = nn.ModuleDict({"in": nn.Linear(cfg.d, cfg.d), "out": nn.Linear(cfg.d, cfg.d)})
        self.scales = nn.ParameterList([nn.Parameter(torch.ones(cfg.d)) for _ in range(2)])
        self.register_buffer("shift", torch.arange(cfg.d).float() / cfg.d, persistent=False)
        self.register_buffer("calls", torch.zeros((), dtype=torch.long))

    @property
    def act(self):
        return {"gelu": F.gelu, "relu": F.relu, "tanh": torch.tanh}[self.cfg.act]

    def forward(self, x, *, extra=None, as_dataclass=False):
        self.calls += 1
        h = self.act(self.layers["in"](x)) * self.scales[0]
        if self.cfg.use_bias_branch:
            h = h + self.shift
        for name, layer in self.layers.items():
            if name != "in":
                h = layer(h)
        h = h * self.scales[-1] * self.cfg.scale
        if as_dataclass:
            return Out(h, {"norm": h.norm(), "shift": self.shift}, n=len(self.scales))
        if extra is not None:
            return Pair(h, extra * h.sum())
        return {"y": h, "mean": h.mean()}


def test_configured_module_returns_dict_namedtuple_dataclass():
    e, c = twins(lambda: Configured(Cfg()))
    x = rand(3, 8)
    cnt = check_module((e, c), [((x,), {}), ((x,), {}), ((x,), {"extra": torch.tensor(2.0)}),
                               ((x,), {"as_dataclass": True}), ((x,), {"as_dataclass": True})],
                        backward=lambda out: sq(out.y if isinstance(out, Out) else out[0] if isinstance(out, Pair)
                                            else out["y"]), rtol=RTOL, atol=ATOL)
    assert int(c.calls) == 5
    assert "shift" not in c.state_dict() and "calls" in c.state_dict()


def test_config_flags_changed_between_calls_recompile_and_match():
    e, c = twins(lambda: Configured(Cfg()))
    compiled = dynamo_lite.compile(c, backend="eager")
    x = rand(3, 8)
    for change in [{}, {"use_bias_branch": False}, {"act": "tanh"}, {"scale": 2.0}, {"act": "relu"}, {}]:
        for k, v in change.items():
            setattr(e.cfg, k, v)
            setattr(c.cfg, k, v)
        assert_same(e(x), compiled(x), f"after {change}", RTOL, ATOL)


def test_cfg_object_replaced_and_moduledict_entry_replaced():
    e, c = twins(lambda: Configured(Cfg()))
    compiled = dynamo_lite.compile(c, backend="eager")
    x = rand(3, 8)
    assert_same(e(x), compiled(x), "first", RTOL, ATOL)
    e.cfg = Cfg(scale=3.0, use_bias_branch=False)
    c.cfg = Cfg(scale=3.0, use_bias_branch=False)
    assert_same(e(x), compiled(x), "new cfg", RTOL, ATOL)
    e.layers["out"] = nn.Identity()
    c.layers["out"] = nn.Identity()
    assert_same(e(x), compiled(x), "replaced layer", RTOL, ATOL)
    e.layers["extra"] = nn.Linear(8, 8)
    c.layers["extra"] = copy.deepcopy(e.layers["extra"])
    assert_same(e(x), compiled(x), "added layer", RTOL, ATOL)


class PList(nn.Module):
    def __init__(self):
        super().__init__()
        self.ps = nn.ParameterList([nn.Parameter(torch.ones(2)), nn.Parameter(torch.ones(2))])

    def forward(self, x, how):
        if how == "last":
            return x * self.ps[-1]
        if how == "len":
            return x * len(self.ps)
        for p in self.ps:
            x = x + p
        return x


@pytest.mark.parametrize("how", ["last", "len", "iter"])
def test_parameterlist_appended_between_calls(how):
    e, c = twins(PList)
    compiled = dynamo_lite.compile(c, backend="eager")
    x = torch.ones(2)
    assert_same(e(x, how), compiled(x, how), "first", RTOL, ATOL)
    for m in (e, c):
        m.ps.append(nn.Parameter(torch.full((2,), 5.0)))
    assert_same(e(x, how), compiled(x, how), "after append", RTOL, ATOL)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(2, 2)


def l2_penalty(model):
    return sum(p.pow(2).sum() for p in model.parameters())


def _grow(model, how):
    torch.manual_seed(42)
    if how == "new_submodule":
        model.head = nn.Linear(2, 5)
    elif how == "new_parameter":
        model.body.register_parameter("scale", nn.Parameter(torch.ones(2)))
    elif how == "replaced_submodule":
        model.body = nn.Linear(2, 3)
    else:
        model.body.bias = None


@pytest.mark.parametrize("how", ["new_submodule", "new_parameter", "replaced_submodule", "bias_removed"])
def test_parameters_iteration_after_model_grows_between_calls(how):
    """An L2 penalty over model.parameters() (a compiled training-loss helper)."""
    e, c = twins(Net)
    compiled = dynamo_lite.compile(l2_penalty, backend="eager")
    assert_same(l2_penalty(e), compiled(c), "first")
    _grow(e, how)
    _grow(c, how)
    assert_same(l2_penalty(e), compiled(c), f"after {how}")


def test_parameters_iteration_after_a_none_parameter_is_set_between_calls():
    """parameters() skips a None parameter (bias=None): setting it later must be seen."""
    e, c = twins(Net)
    for m in (e, c):
        m.body.bias = None
    compiled = dynamo_lite.compile(l2_penalty, backend="eager")
    assert_same(l2_penalty(e), compiled(c), "first")
    for m in (e, c):
        m.body.bias = nn.Parameter(torch.full((2,), 10.0))
    assert_same(l2_penalty(e), compiled(c), "after bias set")


@pytest.mark.parametrize("attr,value", [("momentum", 0.5), ("momentum", None), ("track_running_stats", False),
                                        ("eps", 0.5)])
def test_batchnorm_attribute_changed_between_calls(attr, value):
    e, c = twins(lambda: nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU()))
    compiled = dynamo_lite.compile(c, backend="eager")
    x = rand(4, 3, 6, 6)
    assert_same(e(x), compiled(x), "first", RTOL, ATOL)
    setattr(e[1], attr, value)
    setattr(c[1], attr, value)
    for i in range(2):
        assert_same(e(x), compiled(x), f"after {attr}={value}", RTOL, ATOL)
        assert_same(e, c, "model", RTOL, ATOL)


def test_dropout_p_and_layernorm_eps_changed_between_calls():
    e, c = twins(lambda: nn.Sequential(nn.Linear(3, 8), nn.Dropout(0.2), nn.LayerNorm(8)))
    compiled = dynamo_lite.compile(c, backend="eager")
    x = rand(5, 3)
    for p, eps in ((0.2, 1e-5), (0.7, 1e-5), (0.0, 10.0)):
        e[1].p = c[1].p = p
        e[2].eps = c[2].eps = eps
        torch.manual_seed(3)
        ye = e(x)
        torch.manual_seed(3)
        assert_same(ye, compiled(x), f"p={p} eps={eps}", RTOL, ATOL)


def test_hooks_registered_before_and_after_compiling():
    e, c = twins(lambda: nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2)))
    log_e, log_c = [], []

    def add_hooks(model, log):
        model[0].register_forward_pre_hook(lambda m, args: (args[0] * 2,))
        model[2].register_forward_hook(lambda m, args, out: log.append(out.shape) or out + 1)

    add_hooks(e, log_e)
    add_hooks(c, log_c)
    compiled = dynamo_lite.compile(c, backend="eager")
    x = rand(3, 4)
    assert_same(e(x), compiled(x), "before", RTOL, ATOL)
    assert_same(e(x), compiled(x), "cached", RTOL, ATOL)
    # registered after compiling, on the top module and a child
    for model, log in ((e, log_e), (c, log_c)):
        model.register_forward_hook(lambda m, args, out, log=log: log.append("top") or out * 3)
        h = model[1].register_forward_pre_hook(lambda m, args: (args[0] - 0.1,))
    assert_same(e(x), compiled(x), "after", RTOL, ATOL)
    assert log_e == log_c and log_c[-1] == "top"


def test_hook_removed_after_compiling():
    e, c = twins(lambda: nn.Sequential(nn.Linear(4, 4), nn.Tanh()))
    he = e[1].register_forward_hook(lambda m, a, out: out * 10)
    hc = c[1].register_forward_hook(lambda m, a, out: out * 10)
    compiled = dynamo_lite.compile(c, backend="eager")
    x = rand(2, 4)
    assert_same(e(x), compiled(x), "with hook", RTOL, ATOL)
    he.remove(), hc.remove()
    assert_same(e(x), compiled(x), "hook removed", RTOL, ATOL)


def test_requires_grad_toggled_on_some_parameters_between_calls():
    e, c = twins(lambda: Block())
    compiled = dynamo_lite.compile(c, backend="eager")
    x = rand(2, 4, 16)
    for frozen in ([], ["attn"], ["attn", "mlp"], []):
        for model in (e, c):
            for name, p in model.named_parameters():
                p.requires_grad_(not any(name.startswith(f) for f in frozen))
            model.zero_grad(set_to_none=True)
        ye, yc = e(x), compiled(x)
        assert_same(ye, yc, f"frozen={frozen}", RTOL, ATOL)
        sq(ye).backward(), sq(yc).backward()
        assert_same(e, c, "model", RTOL, ATOL)


def test_freeze_everything_output_does_not_require_grad():
    e, c = twins(lambda: nn.Linear(4, 4))
    compiled = dynamo_lite.compile(c, backend="eager")
    x = rand(2, 4)
    assert_same(e(x), compiled(x))
    e.requires_grad_(False), c.requires_grad_(False)
    ye, yc = e(x), compiled(x)
    assert not yc.requires_grad
    assert_same(ye, yc)


def test_state_dict_round_trip_of_compiled_module():
    e, c = twins(SmallCNN)
    e.train(), c.train()
    compiled = dynamo_lite.compile(c, backend="eager")
    x = rand(4, 3, 8, 8)
    assert_same(e(x), compiled(x), "train", RTOL, ATOL)
    buf = io.BytesIO()
    torch.save(compiled.state_dict(), buf)
    buf.seek(0)
    sd = torch.load(buf)
    assert list(sd) == list(e.state_dict())
    torch.manual_seed(99)
    fresh = SmallCNN()
    fresh.load_state_dict(sd)
    fresh.eval(), e.eval(), compiled.eval()
    assert_same(e(x), fresh(x), "loaded", RTOL, ATOL)
    # load different weights into the compiled module: the next call uses them
    torch.manual_seed(5)
    other = SmallCNN().eval()
    compiled.load_state_dict(other.state_dict())
    e.load_state_dict(other.state_dict())
    assert_same(other(x), compiled(x), "after load_state_dict", RTOL, ATOL)
    assert_same(e(x), compiled(x), "again", RTOL, ATOL)


def test_whole_compiled_module_saved_with_torch_save():
    e, c = twins(lambda: Configured(Cfg()))
    compiled = dynamo_lite.compile(c, backend="eager")
    x = rand(2, 8)
    compiled(x)
    buf = io.BytesIO()
    torch.save(compiled, buf)
    buf.seek(0)
    loaded = torch.load(buf, weights_only=False)
    e(x)
    assert_same(e(x), loaded(x), "loaded module", RTOL, ATOL)


def test_deepcopy_of_compiled_module_is_independent():
    e, c = twins(lambda: Block(p=0.0))
    compiled = dynamo_lite.compile(c, backend="eager")
    x = rand(2, 4, 16)
    assert_same(e(x), compiled(x), "first", RTOL, ATOL)
    clone = copy.deepcopy(compiled)
    with torch.no_grad():
        clone.ln1.weight.fill_(2.0)
    assert_same(e(x), compiled(x), "original untouched", RTOL, ATOL)
    with torch.no_grad():
        e.ln1.weight.fill_(2.0)
    assert_same(e(x), clone(x), "clone uses its own weights", RTOL, ATOL)
    assert clone.ln1.weight.data_ptr() != c.ln1.weight.data_ptr()


def test_module_forward_with_default_kwargs_and_varargs():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, *xs, scale=1.0, reduce="sum", **opts):
            h = sum(self.lin(x) for x in xs) * scale
            if opts.get("normalize"):
                h = F.normalize(h, dim=-1)
            return getattr(h, reduce)(-1)

    e, c = twins(M)
    a, b = rand(2, 4), rand(2, 4, seed=1)
    check_module((e, c), [((a,), {}), ((a, b), {"scale": 2.0}), ((a, b), {"reduce": "mean", "normalize": True}),
                      ((a,), {"normalize": False})], backward=sq, rtol=RTOL, atol=ATOL)


def test_exception_from_model_matches_eager():
    e, c = twins(lambda: nn.Linear(4, 3))
    compiled = dynamo_lite.compile(c, backend="eager")
    bad = rand(2, 5)
    with pytest.raises(RuntimeError) as ee:
        e(bad)
    with pytest.raises(RuntimeError) as ec:
        compiled(bad)
    assert str(ee.value) == str(ec.value)
    assert_same(e(rand(2, 4)), compiled(rand(2, 4)))


def test_train_eval_switching_on_compiled_module_every_call():
    e, c = twins(lambda: nn.Sequential(nn.Linear(6, 6), nn.BatchNorm1d(6), nn.Dropout(0.5), nn.Linear(6, 2)))
    compiled = dynamo_lite.compile(c, backend="eager")
    for i in range(6):
        mode = i % 2 == 0
        e.train(mode), compiled.train(mode)
        x = rand(5, 6, seed=i)
        torch.manual_seed(i)
        ye = e(x)
        torch.manual_seed(i)
        yc = compiled(x)
        assert_same(ye, yc, f"call {i}", RTOL, ATOL)
        assert_same(e, c, "model", RTOL, ATOL)


# ---- transformers models -----------------------------------------------------------------------------
VOCAB = 64


def _hf(name):
    T = transformers
    if name == "gpt2":
        return T.GPT2LMHeadModel(T.GPT2Config(vocab_size=VOCAB, n_positions=32, n_embd=32, n_layer=2, n_head=2))
    if name == "llama":
        return T.LlamaForCausalLM(T.LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                                                num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                                max_position_embeddings=32))
    if name == "bert":
        return T.BertForSequenceClassification(T.BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
                                                             num_attention_heads=2, intermediate_size=64,
                                                             max_position_embeddings=32, num_labels=3))
    raise KeyError(name)


def hf_twins(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return twins(lambda: _hf(name))


def _ids(B, T, seed=0):
    return torch.randint(3, VOCAB, (B, T), generator=torch.Generator().manual_seed(seed))


def _hf_compare(expected, got):
    assert type(expected) is type(got)
    assert list(expected.keys()) == list(got.keys())
    for k in expected.keys():
        if k == "past_key_values":
            continue
        assert_same(expected[k], got[k], k, RTOL, ATOL)


@needs_transformers
@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_hf_causal_lm_train_with_labels_and_padding_mask(name):
    e, c = hf_twins(name)
    e.train(), c.train()
    compiled = dynamo_lite.compile(c, backend="eager")
    for i, (B, T) in enumerate([(2, 6), (2, 6), (2, 9)]):
        ids = _ids(B, T, seed=i)
        mask = torch.ones(B, T, dtype=torch.long)
        mask[1, : T // 3] = 0  # left padding
        kw = dict(input_ids=ids, attention_mask=mask, labels=ids, use_cache=False)
        torch.manual_seed(i)
        oe = e(**kw)
        torch.manual_seed(i)
        oc = compiled(**kw)
        _hf_compare(oe, oc)
        e.zero_grad(), c.zero_grad()
        oe.loss.backward(), oc.loss.backward()
        assert_same(e, c, "model", RTOL, ATOL)


@needs_transformers
@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_hf_causal_lm_eval_incremental_decoding_with_cache(name):
    e, c = hf_twins(name)
    e.eval(), c.eval()
    compiled = dynamo_lite.compile(c, backend="eager")
    ids = _ids(1, 4)
    with torch.no_grad():
        oe, oc = e(input_ids=ids, use_cache=True), compiled(input_ids=ids, use_cache=True)
        _hf_compare(oe, oc)
        pe, pc = oe.past_key_values, oc.past_key_values
        for step in range(3):
            nxt = oe.logits[:, -1:].argmax(-1)
            assert torch.equal(nxt, oc.logits[:, -1:].argmax(-1))
            oe = e(input_ids=nxt, past_key_values=pe, use_cache=True)
            oc = compiled(input_ids=nxt, past_key_values=pc, use_cache=True)
            _hf_compare(oe, oc)
            pe, pc = oe.past_key_values, oc.past_key_values
        assert pe.get_seq_length() == pc.get_seq_length() == 7


@needs_transformers
def test_hf_bert_sequence_classification_labels_train_and_eval():
    e, c = hf_twins("bert")
    compiled = dynamo_lite.compile(c, backend="eager")
    for i, train in enumerate([True, True, False]):
        e.train(train), compiled.train(train)
        ids = _ids(2, 7, seed=i)
        mask = torch.tensor([[1] * 7, [1] * 4 + [0] * 3])
        tt = torch.tensor([[0] * 3 + [1] * 4] * 2)
        kw = dict(input_ids=ids, attention_mask=mask, token_type_ids=tt, labels=torch.tensor([0, 2]))
        torch.manual_seed(i)
        oe = e(**kw)
        torch.manual_seed(i)
        oc = compiled(**kw)
        _hf_compare(oe, oc)
        e.zero_grad(), c.zero_grad()
        oe.loss.backward(), oc.loss.backward()
        assert_same(e, c, "model", RTOL, ATOL)


@needs_transformers
def test_hf_gpt2_return_dict_false_and_output_hidden_states():
    e, c = hf_twins("gpt2")
    e.eval(), c.eval()
    kw = dict(input_ids=_ids(2, 5), return_dict=False, output_hidden_states=True, use_cache=False)
    check_module((e, c), [((), kw), ((), dict(kw, input_ids=_ids(2, 5, seed=1)))], rtol=RTOL, atol=ATOL)


@needs_transformers
@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_hf_generate_through_compiled_module_greedy_and_sampled(name):
    e, c = hf_twins(name)
    e.eval(), c.eval()
    compiled = dynamo_lite.compile(c, backend="eager")
    ids = _ids(2, 5)
    mask = torch.tensor([[0, 0, 1, 1, 1], [1] * 5])
    kw = dict(attention_mask=mask, max_new_tokens=3, pad_token_id=0)
    assert torch.equal(e.generate(ids, do_sample=False, **kw), compiled.generate(ids, do_sample=False, **kw))
    torch.manual_seed(3)
    ge = e.generate(ids, do_sample=True, top_k=5, temperature=0.7, **kw)
    torch.manual_seed(3)
    assert torch.equal(ge, compiled.generate(ids, do_sample=True, top_k=5, temperature=0.7, **kw))


@needs_transformers
def test_hf_gradient_checkpointing_enabled_train_step():
    e, c = hf_twins("llama")
    e.train(), c.train()
    e.gradient_checkpointing_enable(), c.gradient_checkpointing_enable()
    compiled = dynamo_lite.compile(c, backend="eager")
    ids = _ids(2, 6)
    for i in range(2):
        torch.manual_seed(i)
        oe = e(input_ids=ids, labels=ids)
        torch.manual_seed(i)
        oc = compiled(input_ids=ids, labels=ids)
        _hf_compare(oe, oc)
        e.zero_grad(), c.zero_grad()
        oe.loss.backward(), oc.loss.backward()
        assert_same(e, c, "model", RTOL, ATOL)


# ---- more training-step shapes ----------------------------------------------------------------------
def _train_twins(opt_fn, backend="eager", mutate=None, steps=3):
    e, c = twins(lambda: nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)))
    oe, oc = opt_fn(e), opt_fn(c)

    def make(model, opt):
        def step(x):
            opt.zero_grad()
            loss = model(x).pow(2).mean()
            loss.backward()
            opt.step()
            return loss

        return step

    step_e, step_c = make(e, oe), dynamo_lite.compile(make(c, oc), backend=backend)
    for i in range(steps):
        if mutate is not None and i == 1:
            mutate(e, oe), mutate(c, oc)
        x = rand(4, 3, seed=i)
        assert_same(step_e(x), step_c(x), f"loss {i}", RTOL, ATOL)
        assert_same(e, c, "model", RTOL, ATOL)
        _opt_state_same(oe, oc)


def _set_lr(model, opt):
    for g in opt.param_groups:
        g["lr"] = 0.5


def _freeze_first(model, opt):
    model[0].requires_grad_(False)


@pytest.mark.parametrize("opt_fn,backend,mutate", [
    (lambda m: torch.optim.SGD(m.parameters(), lr=0.1), "eager", _set_lr),
    (lambda m: torch.optim.Adam(m.parameters(), lr=0.1, foreach=True), "eager", _set_lr),
    (lambda m: torch.optim.Adam(m.parameters(), lr=0.1, fused=True), "eager", None),
    (lambda m: torch.optim.RMSprop(m.parameters(), lr=0.01, momentum=0.9), "eager", None),
    (lambda m: torch.optim.SGD([{"params": m[0].parameters(), "lr": 0.5}, {"params": m[2].parameters()}], lr=0.1,
                               momentum=0.9), "eager", _freeze_first),
    (lambda m: torch.optim.Adam(m.parameters(), lr=0.1), "aot_eager", _freeze_first),
], ids=["sgd-lr-changed", "adam-foreach-lr-changed", "adam-fused", "rmsprop", "groups-freeze", "adam-aot-freeze"])
def test_training_step_optimizers_and_changes_between_steps(opt_fn, backend, mutate):
    _train_twins(opt_fn, backend, mutate)


def test_hand_written_sgd_and_gradient_accumulation_with_item():
    e, c = twins(lambda: nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1)))

    def make(model):
        def step(xs, y, lr):
            total = 0.0
            for x in xs:
                loss = F.mse_loss(model(x), y) / len(xs)
                loss.backward()
                total += loss.item()
            with torch.no_grad():
                for p in model.parameters():
                    p -= lr * p.grad
                    p.grad.zero_()
            return total

        return step

    step_e, step_c = make(e), dynamo_lite.compile(make(c), backend="eager")
    for i in range(3):
        xs, y = [rand(5, 4, seed=10 * i + k) for k in range(2)], rand(5, 1, seed=i)
        assert step_e(xs, y, 0.1) == pytest.approx(step_c(xs, y, 0.1), rel=1e-5)
        assert_same(e, c, "model", RTOL, ATOL)


def test_ema_buffer_updated_under_no_grad_in_train_only():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)
            self.register_buffer("ema", torch.zeros(4))
            self.register_buffer("count", torch.tensor(0))

        def forward(self, x):
            y = self.lin(x)
            if self.training:
                with torch.no_grad():
                    self.ema.mul_(0.9).add_(y.mean(0), alpha=0.1)
                    self.count += 1
            return y - self.ema

    e, c = twins(M)
    check_module((e, c), [((rand(3, 4, seed=s),), {}) for s in range(2)], backward=sq, rtol=RTOL, atol=ATOL)
    e.eval(), c.eval()
    check_module((e, c), [((rand(3, 4, seed=s),), {}) for s in range(2)], rtol=RTOL, atol=ATOL)
    assert int(c.count) == 2


def test_module_state_after_forward_raises_matches_eager():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.cache = []
            self.count = 0
            self.register_buffer("n", torch.zeros(()))

        def forward(self, x):
            self.cache.append(x * 2)
            self.count += 1
            self.n += 1
            return torch.cat(self.cache, 0) @ torch.ones(3, 3)

    e, c = twins(M)
    compiled = dynamo_lite.compile(c, backend="eager")
    for _ in range(2):
        with pytest.raises(RuntimeError) as ee:
            e(torch.ones(1, 2))
        with pytest.raises(RuntimeError) as ec:
            compiled(torch.ones(1, 2))
        assert str(ee.value) == str(ec.value)
    assert len(e.cache) == len(c.cache) == 2 and e.count == c.count == 2
    assert_same(e.n, c.n)


def test_lstm_with_inter_layer_dropout_in_train_mode():
    e, c = twins(lambda: nn.LSTM(4, 6, num_layers=2, dropout=0.3, batch_first=True))
    check_module((e, c), [((rand(2, 5, 4, seed=s),), {}) for s in range(2)], backward=lambda out: sq(out[0]), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("kind", ["lstm", "gru", "rnn"])
@pytest.mark.parametrize("backend", ["aot_eager", "eager"])
def test_rnn_modules_with_dropout_in_training_under_aot_autograd(kind, backend):
    # the fused recurrent ops in a graph: AOTAutograd's decomposition of gru / rnn skipped the
    # dropout between layers (train output == eval output), and lstm's backward failed to save
    # its parameters (AssertionError); Python runs them (torch.compile breaks on RNNs too)
    cls = {"lstm": nn.LSTM, "gru": nn.GRU, "rnn": nn.RNN}[kind]
    e, c = twins(lambda: cls(5, 6, num_layers=2, dropout=0.5))
    check_module((e, c), [((rand(4, 3, 5, seed=s),), {}) for s in range(2)], backend=backend,
                 backward=lambda out: sq(out[0]), rtol=RTOL, atol=ATOL)
    with torch.no_grad():
        check_module((e, c), [((rand(4, 3, 5, seed=3),), {})], backend=backend, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("backend", ["aot_eager", "eager"])
def test_random_draws_into_a_strided_view_and_random_from_to_under_aot_autograd(backend):
    # randn(out=<a non-contiguous view>) was functionalized as if the view were contiguous
    # (rows of the input left at 0), and random_(0, 5) made graph code that did not compile
    def into_view(t):
        torch.randn(2, 2, out=t[:2, :2])
        return t.sum()

    def from_to(t):
        return t.clone().random_(0, 5), t.clone().random_(3)

    check_calls(into_view, [(torch.zeros(4, 4),), (torch.zeros(4, 4),)], backend=backend, graphs=None, rng=True)
    check_calls(from_to, [(torch.zeros(4),)], backend=backend, graphs=None, rng=True)
