"""Whole models: dynamo_lite vs torch.compile(backend="eager"), one fresh process per (model, system).

For each model and each system a worker process (``--worker``) reports:
    graphs, breaks, ops   graphs compiled, graph breaks, FX ops captured (call nodes)
    capture_ms            first call of the model (trace + guards + codegen + the backend,
                          which for "eager" is nothing); the system's one-time start-up
                          is paid first on a small unrelated module, so this is the
                          model's own capture cost.  Process CPU time.
    hit_us / eager_us     one cache-hit call / one eager call (medians over interleaved
                          rounds, thread CPU time, torch.no_grad(), one thread)
    peak_rss_mb           peak RSS of the worker; rss_delta_mb over the RSS after the
                          model and inputs were built
    fake_alive            FakeTensors and FakeTensorModes still alive after compilation (should be 0)
    extra_tensor_mb       storage of real tensors alive after compilation that belong to
                          neither the model, the inputs nor the outputs (copies: should be 0)
Models: a 4-layer MLP, a nanoGPT-style transformer, and (if transformers is installed)
tiny random-weight GPT-2, BERT, T5 and Llama.  Running each system in its own process keeps
their caches, hooks and allocator state apart.

    python bench/models.py [--quick] [--models mlp,nanogpt,...] [--systems dynamo_lite,torch.compile]
Covered by tests/robustness/test_bench_smoke.py (quick mode).
"""
from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import math
import os
import resource
import sys
import time
import warnings

# the checkout this file is in, not whatever dynamo_lite is installed (workers inherit it)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import _timing  # noqa: E402

SYSTEMS = ("dynamo_lite", "torch.compile")
VOCAB = 256


# ---- models ---------------------------------------------------------------------------
class _WarmUp(nn.Module):
    """The module each system's one-time start-up is paid on: a class and ``forward`` of its own,
    so the timed first call of a model is a first compile, not a recompile of the same code."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(64, 8)

    def forward(self, x):
        return F.relu(self.fc(x))


class MLP4(nn.Module):
    def __init__(self, width=256):
        super().__init__()
        self.fc1 = nn.Linear(64, width)
        self.fc2 = nn.Linear(width, width)
        self.fc3 = nn.Linear(width, width)
        self.fc4 = nn.Linear(width, 10)

    def forward(self, x):
        x = F.gelu(self.fc1(x))
        x = F.gelu(self.fc2(x))
        x = F.gelu(self.fc3(x))
        return self.fc4(x)


@dataclasses.dataclass
class GPTConfig:
    block_size: int = 64
    vocab_size: int = VOCAB
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    dropout: float = 0.0
    bias: bool = True


class CausalSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.register_buffer("bias", torch.tril(torch.ones(config.block_size, config.block_size))
                             .view(1, 1, config.block_size, config.block_size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        att = self.attn_dropout(att)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.c_proj(F.gelu(self.c_fc(self.ln_2(x))))


class NanoGPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.vocab_size, config.n_embd),
            wpe=nn.Embedding(config.block_size, config.n_embd),
            drop=nn.Dropout(config.dropout),
            h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
            ln_f=nn.LayerNorm(config.n_embd, bias=config.bias),
        ))
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight

    def forward(self, idx):
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x))


def _hf(name):
    import transformers as T

    common = dict(vocab_size=VOCAB, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                  hidden_size=128, intermediate_size=256, max_position_embeddings=64,
                  bos_token_id=1, eos_token_id=2, pad_token_id=0)
    if name == "gpt2":
        return T.GPT2LMHeadModel(T.GPT2Config(vocab_size=VOCAB, n_positions=64, n_embd=128, n_layer=2, n_head=4,
                                              bos_token_id=1, eos_token_id=2))
    if name == "bert":
        return T.BertModel(T.BertConfig(vocab_size=VOCAB, hidden_size=128, num_hidden_layers=2,
                                        num_attention_heads=4, intermediate_size=256, max_position_embeddings=64))
    if name == "t5":
        return T.T5ForConditionalGeneration(T.T5Config(vocab_size=VOCAB, d_model=128, d_kv=32, d_ff=256,
                                                       num_layers=2, num_heads=4, decoder_start_token_id=0,
                                                       pad_token_id=0, eos_token_id=1))
    if name == "llama":
        return T.LlamaForCausalLM(T.LlamaConfig(**common))
    raise KeyError(name)


def build(name: str):
    """(model in eval mode, kwargs) for a model name."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    if name == "mlp":
        return MLP4().eval(), {"x": torch.randn(32, 64, generator=g)}
    if name == "nanogpt":
        return NanoGPT(GPTConfig()).eval(), {"idx": torch.randint(0, VOCAB, (2, 32), generator=g)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = _hf(name).eval()
    kwargs = {"input_ids": torch.randint(3, VOCAB, (2, 32), generator=g)}
    if name == "t5":
        kwargs["decoder_input_ids"] = torch.randint(3, VOCAB, (2, 16), generator=g)
    if name == "bert":
        kwargs["attention_mask"] = torch.ones(2, 32, dtype=torch.long)
    else:
        kwargs["use_cache"] = False
    return model, kwargs


def available_models() -> list[str]:
    names = ["mlp", "nanogpt"]
    try:
        import transformers  # noqa: F401

        names += ["gpt2", "bert", "t5", "llama"]
    except ImportError:
        pass
    return names


# ---- worker ---------------------------------------------------------------------------
class Counting:
    """Behaves like backend "eager" (returns gm.forward); counts graphs and call nodes."""

    def __init__(self):
        self.graphs = 0
        self.ops = 0

    def __call__(self, gm, example_inputs):
        self.graphs += 1
        self.ops += sum(1 for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module"))
        return gm.forward


def _tensors(value):
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _tensors(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _tensors(v)
    elif hasattr(value, "to_tuple"):
        yield from _tensors(value.to_tuple())


def _census(model, kwargs, outputs, other=None) -> tuple[int, float]:
    """(FakeTensors and FakeTensorModes alive, MB of real tensor storage owned by nothing we know of)."""
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

    gc.collect()
    known = set()
    others = [*other.parameters(), *other.buffers()] if other is not None else []
    for t in [*model.parameters(), *model.buffers(), *_tensors(kwargs), *_tensors(outputs), *others]:
        known.add(t.untyped_storage().data_ptr())
    fake = 0
    extra: dict[int, int] = {}
    for obj in gc.get_objects():
        if not isinstance(obj, torch.Tensor):
            continue
        if isinstance(obj, (FakeTensor, FakeTensorMode)):
            fake += 1
            continue
        if obj.device.type != "cpu" or obj.is_sparse:
            continue
        try:
            storage = obj.untyped_storage()
        except Exception:  # noqa: BLE001 - e.g. tensors without storage
            continue
        if storage.data_ptr() not in known and storage.nbytes():
            extra[storage.data_ptr()] = storage.nbytes()
    return fake, sum(extra.values()) / 2**20


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _same(a, b) -> bool:
    ta, tb = list(_tensors(a)), list(_tensors(b))
    return len(ta) == len(tb) and all(
        x.shape == y.shape and torch.allclose(x, y, rtol=1e-4, atol=1e-5) for x, y in zip(ta, tb))


def worker(name: str, system: str, quick: bool) -> dict:
    torch.set_num_threads(1)
    model, kwargs = build(name)
    if system == "dynamo_lite":
        import dynamo_lite
        from dynamo_lite.report import events

        compile_fn = dynamo_lite.compile
        breaks = []
        sink = events.collecting(lambda e: breaks.append(e) if type(e).__name__ == "GraphBreakEvent" else None)
    else:
        import contextlib

        from torch import _dynamo

        compile_fn = torch.compile
        breaks = None
        sink = contextlib.nullcontext()
    rss_base = _rss_mb()
    # one-time start-up of the system, on a module unrelated to the model
    warm = _WarmUp().eval()
    with torch.no_grad():
        warm_c = compile_fn(warm, backend="eager")
        warm_c(torch.randn(2, 64))
        warm_c(torch.randn(2, 64))
    counting = Counting()
    compiled = compile_fn(model, backend=counting)
    with torch.no_grad(), sink:
        if system == "torch.compile":
            _dynamo.utils.counters.clear()
        start = time.process_time()
        out = compiled(**kwargs)
        capture = time.process_time() - start
        compiled(**kwargs)
        if system == "torch.compile":
            n_breaks = sum(_dynamo.utils.counters["graph_break"].values())
        else:
            n_breaks = len(breaks)
        expected = model(**kwargs)
    graphs_after_first = counting.graphs
    fake_alive, extra_mb = _census(model, kwargs, (out, expected), warm)
    systems = {"eager": lambda: model(**kwargs), "compiled": lambda: compiled(**kwargs)}
    with torch.no_grad():
        n = _timing.calibrate(systems["eager"], 0.0005 if quick else 0.005, max_n=200)
        samples = _timing.interleaved(systems, 3 if quick else 25, n)
        recompiled = counting.graphs != graphs_after_first
    return {
        "model": name,
        "system": system,
        "graphs": graphs_after_first,
        "breaks": n_breaks,
        "ops": counting.ops,
        "capture_ms": capture * 1000,
        "hit_us": _timing.median(samples["compiled"]) / 1000,
        "eager_us": _timing.median(samples["eager"]) / 1000,
        "overhead_us": _timing.paired_overhead(samples, "compiled") / 1000,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "rss_delta_mb": _rss_mb() - rss_base,
        "fake_alive": fake_alive,
        "extra_tensor_mb": extra_mb,
        "correct": _same(expected, out),
        "recompiled_on_hits": recompiled,
    }


# ---- driver ---------------------------------------------------------------------------
def run(quick: bool = False, models=None, systems=SYSTEMS) -> dict:
    rows = []
    for name in models or available_models():
        for system in systems:
            args = [os.path.abspath(__file__), "--worker", name, "--system", system] + (["--quick"] if quick else [])
            res = _timing.run_subprocess_json(args)
            res.setdefault("model", name)
            res.setdefault("system", system)
            rows.append(res)
    return {"env": _timing.environment(), "rows": rows}


def render(data: dict) -> str:
    by = {(r["model"], r["system"]): r for r in data["rows"]}
    models = list(dict.fromkeys(r["model"] for r in data["rows"]))
    head = ["model", "graphs dl/tc", "breaks dl/tc", "ops dl/tc", "capture ms dl", "capture ms tc", "ratio",
            "hit us dl (eager)", "hit us tc (eager)", "hit-eager us dl", "hit-eager us tc", "peak RSS MB dl/tc",
            "fake alive dl/tc", "extra MB dl"]
    rows = []
    errors = []
    for m in models:
        d, t = by.get((m, "dynamo_lite")), by.get((m, "torch.compile"))
        if d is None or t is None:
            rows.append([m, *(["-"] * (len(head) - 1))])
            continue
        for r in (d, t):
            if "error" in r:
                errors.append(f"{m} / {r['system']}: {r['error'].strip().splitlines()[-1] if r['error'].strip() else '?'}")
        if "error" in d or "error" in t:
            rows.append([m] + ["error"] * (len(head) - 1))
            continue
        rows.append([
            m, f"{d['graphs']}/{t['graphs']}", f"{d['breaks']}/{t['breaks']}", f"{d['ops']}/{t['ops']}",
            f"{d['capture_ms']:.1f}", f"{t['capture_ms']:.1f}", _timing.fmt_ratio(d["capture_ms"], t["capture_ms"]),
            f"{d['hit_us']:.0f} ({d['eager_us']:.0f})", f"{t['hit_us']:.0f} ({t['eager_us']:.0f})",
            f"{d['overhead_us']:.1f}", f"{t['overhead_us']:.1f}",
            f"{d['peak_rss_mb']:.0f}/{t['peak_rss_mb']:.0f}", f"{d['fake_alive']}/{t['fake_alive']}",
            f"{d['extra_tensor_mb']:.2f}",
        ])
        for r in (d, t):
            if not r.get("correct", True) or r.get("recompiled_on_hits"):
                errors.append(f"{m} / {r['system']}: correct={r.get('correct')} "
                              f"recompiled_on_hits={r.get('recompiled_on_hits')}")
    out = ["Models (backend eager; dl = dynamo_lite, tc = torch.compile; ratio = dl / tc, capture target <= 0.5; "
           "hit = one cache-hit call with eager in brackets, timed in the same process; hit-eager = median of the "
           "per-round differences, negative when the graph beats eager)",
           _timing.table(head, rows)]
    if errors:
        out += ["", "Problems:", *errors]
    return "\n".join(out)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--models", default=None, help="comma-separated subset of " + ",".join(available_models()))
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    p.add_argument("--system", default=None, help=argparse.SUPPRESS)
    p.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated subset of " + ",".join(SYSTEMS))
    p.add_argument("--no-write", action="store_true")
    p.add_argument("--json-rows", action="store_true", help="print the raw rows as one JSON line")
    a = p.parse_args(argv)
    if a.worker:
        print(json.dumps(worker(a.worker, a.system, a.quick)))
        return None
    data = run(quick=a.quick, models=a.models.split(",") if a.models else None, systems=a.systems.split(","))
    if a.json_rows:
        print(json.dumps(data["rows"], default=str))
        return data
    print(render(data))
    if not a.no_write:
        _timing.write_json("models" + ("_quick" if a.quick else ""), data)
    return data


if __name__ == "__main__":
    main()
