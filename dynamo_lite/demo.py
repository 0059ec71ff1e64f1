"""The demo: capture a small real model whole and show what dynamo_lite produced.

    python -m dynamo_lite.demo [--backend eager|inductor|...] [--model gpt2|nanogpt]
                               [--calls N] [--no-graph] [--all-guards]

Builds a small model with random weights (transformers' GPT-2 from a config when
transformers is installed, else a nanoGPT-style transformer defined here), compiles
it, and prints:

    1. the captured graph(s): readable FX code and the number of ops,
    2. the guards the compiled code checks on every call,
    3. the graph breaks (none expected),
    4. whether compiled outputs equal eager ones,
    5. eager vs compiled time per call (median of N calls, one intra-op thread).

With the eager backend it runs in a few seconds.  ``main(argv)`` is the entry point
(returns an exit code); tests/api/test_demo.py runs it in-process.
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from typing import Optional

import torch
from torch import nn
from torch.nn import functional as F

import dynamo_lite

_SEQ_LEN = 8
_VOCAB = 128
_GUARDS_SHOWN = 30


# ---- the fallback model ---------------------------------------------------------------------
class _Attention(nn.Module):
    def __init__(self, dim: int, heads: int, block: int):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.heads = heads
        self.register_buffer("mask", torch.tril(torch.ones(block, block)).view(1, 1, block, block))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
        att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf")).softmax(dim=-1)
        return self.proj((att @ v).transpose(1, 2).reshape(B, T, C))


class _Block(nn.Module):
    def __init__(self, dim: int, heads: int, block: int):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = _Attention(dim, heads, block)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class NanoGPT(nn.Module):
    """A nanoGPT-style decoder: token + position embeddings, blocks, tied LM head."""

    def __init__(self, vocab: int = _VOCAB, dim: int = 64, heads: int = 4, layers: int = 2, block: int = 32):
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.wpe = nn.Embedding(block, dim)
        self.blocks = nn.ModuleList([_Block(dim, heads, block) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, input_ids):
        pos = torch.arange(input_ids.size(1), device=input_ids.device)
        x = self.wte(input_ids) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        return F.linear(self.ln_f(x), self.lm_head.weight)


# ---- building the model -------------------------------------------------------------------------
def build_model(kind: str = "auto"):
    """(description, model in eval mode, keyword inputs)."""
    torch.manual_seed(0)
    input_ids = torch.randint(0, _VOCAB, (2, _SEQ_LEN))
    if kind in ("auto", "gpt2"):
        try:
            import transformers
            from transformers.utils import logging as hf_logging
        except ImportError:
            if kind == "gpt2":
                raise SystemExit("--model gpt2 needs transformers (pip install transformers)") from None
        else:
            hf_logging.set_verbosity_error()
            config = transformers.GPT2Config(vocab_size=_VOCAB, n_positions=32, n_embd=64, n_layer=2, n_head=4,
                                             bos_token_id=1, eos_token_id=2)
            model = transformers.GPT2LMHeadModel(config).eval()
            return (f"transformers {transformers.__version__} GPT2LMHeadModel (2 layers, hidden 64, random weights)",
                    model, {"input_ids": input_ids, "use_cache": False})
    model = NanoGPT().eval()
    return "nanoGPT-style transformer (2 layers, hidden 64, random weights)", model, {"input_ids": input_ids}


# ---- measuring ----------------------------------------------------------------------------------
def _median_ms(fn, kwargs, calls: int) -> float:
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        fn(**kwargs)
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def _first_tensor(out):
    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, dict):
        out = list(out.values())
    for item in out:
        if isinstance(item, torch.Tensor):
            return item
    raise TypeError(f"no tensor in {type(out).__name__}")


def _section(title: str) -> None:
    print()
    print(f"== {title} " + "=" * max(0, 72 - len(title)))


def main(argv: Optional[list] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dynamo_lite.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="eager", help="eager (default), inductor, aot_eager, ...")
    parser.add_argument("--model", default="auto", choices=("auto", "gpt2", "nanogpt"))
    parser.add_argument("--calls", type=int, default=20, help="timed calls per variant (median reported)")
    parser.add_argument("--no-graph", action="store_true", help="do not print the graph code")
    parser.add_argument("--all-guards", action="store_true", help=f"print every guard (default: the first "
                                                                  f"{_GUARDS_SHOWN})")
    args = parser.parse_args(argv)

    previous_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _run(args)
    finally:
        torch.set_num_threads(previous_threads)


def _run(args) -> int:
    description, model, inputs = build_model(args.model)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"dynamo_lite demo: {description}, {n_params:,} parameters")
    print(f"input_ids: {tuple(inputs['input_ids'].shape)}, backend: {args.backend!r}, "
          f"torch {torch.__version__}, 1 thread")

    with torch.no_grad():
        start = time.perf_counter()
        info = dynamo_lite.explain(model, backend=args.backend)(**inputs)
        first_call = time.perf_counter() - start

        for i, gm in enumerate(info.graphs):
            where = ""
            if i < len(info.graph_infos):
                g = info.graph_infos[i]
                where = f" of {g.frame} ({g.filename}:{g.lineno})"
            _section(f"Captured graph {i}{where}: {info.ops_per_graph[i]} ops")
            if not args.no_graph:
                print(gm.print_readable(print_output=False).strip("\n"))

        for i, guards in enumerate(info.guards):
            _section(f"Guards of graph {i}: {len(guards)} checked on every call")
            shown = guards if args.all_guards else guards[:_GUARDS_SHOWN]
            for line in shown:
                print(f"  {line}")
            if len(shown) < len(guards):
                print(f"  ... and {len(guards) - len(shown)} more (--all-guards prints them all)")

        _section(f"Graph breaks: {info.graph_break_count}")
        if info.break_reasons:
            for b in info.break_reasons:
                print(f"  {b}")
        else:
            print("  none: the whole forward is one graph")

        compiled = dynamo_lite.compile(model, backend=args.backend)
        eager_out = _first_tensor(model(**inputs))
        compiled_out = _first_tensor(compiled(**inputs))
        same = torch.allclose(eager_out, compiled_out, rtol=1e-4, atol=1e-5)
        _section("Outputs")
        print(f"  compiled == eager: {same} (max abs diff {(eager_out - compiled_out).abs().max().item():.2e})")

        for _ in range(2):  # warm up both
            model(**inputs)
            compiled(**inputs)
        eager_ms = _median_ms(model, inputs, args.calls)
        compiled_ms = _median_ms(compiled, inputs, args.calls)
    _section(f"Time per call (median of {args.calls})")
    print(f"  first call (trace + {args.backend} compile + run): {first_call * 1e3:8.1f} ms")
    print(f"  eager:                                   {eager_ms:8.3f} ms")
    print(f"  compiled ({args.backend}):{' ' * max(1, 30 - len(args.backend))}{compiled_ms:8.3f} ms"
          f"   ({eager_ms / compiled_ms:.2f}x eager)")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
