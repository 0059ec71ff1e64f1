"""2-rank DDP training step (gloo, CPU): eager DDP vs torch.compile vs dynamo_lite.

One launch of 2 ranks per (model, backend) (dynamo_lite.ranks.run_ranks: fresh processes,
gloo on 127.0.0.1, one intra-op thread each) holds every system: eager DDP, torch.compile and
dynamo_lite, each in both wrappings (``outer``: compile(DDP(model)); ``inner``:
DDP(compile(model))), and dynamo_lite with ``config.optimize_ddp = False`` (one graph: what
the split buys), each with its own model from the same seed.  Each runs WARMUP training
steps (capture, compile, DDP's bucket rebuild); then ROUNDS rounds, in a shuffled order,
run PER_ROUND timed steps of each system, so a change of the machine's load hits all of
them alike (SGD; every system sees the same data).  Per step, wall clock:

- step ms: forward + backward + optimizer step (median over steps, the slower rank);
- exposed comm ms: from the end of gradient computation (the last parameter's gradient
  accumulated: a post-accumulate-grad hook) to the end of ``backward()`` (DDP has waited for
  every all-reduce): the all-reduce time that did not overlap with backward (median);
- graphs: backend calls (one per piece of a split graph; torch.compile counted the same way,
  through a counting wrapper around the same backend);
- same: the parameters after all steps equal eager DDP's on both ranks (bitwise for
  aot_eager; inductor fuses differently, so "max diff" is shown instead).

    python bench/distributed.py [--quick] [--backends aot_eager,inductor] [--models mlp,transformer]
        [--no-write] [--merge]
Results go to bench/results/distributed.json and the table to docs/performance.md
(``python bench/run_all.py --doc-only`` rewrites the page from the results).
Covered by tests/robustness/test_bench_smoke.py (--help).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

# the checkout this file is in, not whatever dynamo_lite is installed (ranks inherit it)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

import _timing  # noqa: E402

MODELS = ("mlp", "transformer", "transformer-1mb")
# several buckets per model; torch.compile's DDPOptimizer refuses a cap below 1 MB (its first
# bucket is 1 MB), hence the transformer a second time with 1 MB buckets
BUCKET_CAP_MB = {"mlp": 2, "transformer": 0.5, "transformer-1mb": 1}
WARMUP, ROUNDS, PER_ROUND = 3, 6, 2  # timed steps per system: ROUNDS * PER_ROUND


class MLP(nn.Module):
    """8 layers of 512x512 (1 MB each): 4 buckets of 2 MB."""

    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(512, 512) for _ in range(8))

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / (d // self.heads) ** 0.5)
        att = att.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf")).softmax(-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.out(torch.nn.functional.gelu(self.fc(self.ln2(x))))


class Transformer(nn.Module):
    """A small GPT: 4 blocks of width 128 (3.3 MB of parameters: 7 buckets of 0.5 MB, 4 of 1 MB)."""

    def __init__(self, vocab=256, d=128, heads=4, layers=4, context=64):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(context, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


def _data(name, step, rank):
    g = torch.Generator().manual_seed(1000 * step + rank)
    if name == "mlp":
        return torch.randn(64, 512, generator=g)
    return torch.randint(0, 256, (8, 64), generator=g)


def _loss(name, out):
    return out.square().mean() if name == "mlp" else out.logsumexp(-1).mean()


class _Counting:
    """A backend that counts its calls and hands the graph on."""

    def __init__(self, backend):
        self.backend, self.calls = backend, 0

    def __call__(self, gm, example_inputs):
        self.calls += 1
        return self.backend(gm, example_inputs)


def _backend(system, name):
    if name == "inductor":
        from torch._inductor.compile_fx import compile_fx

        return compile_fx
    if system == "torch.compile":
        from torch._dynamo.backends.registry import lookup_backend

        return lookup_backend(name)
    from dynamo_lite.backends import lookup_backend

    return lookup_backend(name)[0]


SYSTEMS = (("eager", "-"), ("torch.compile", "outer"), ("torch.compile", "inner"), ("dynamo_lite", "outer"),
           ("dynamo_lite", "inner"), ("dynamo_lite", "inner-unsplit"))


def _setup(model_name, system, backend, wrap):
    """(callable training module, model, optimizer, counting backend or None) for one system."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)
    model = MLP() if model_name == "mlp" else Transformer()  # transformer, transformer-1mb
    ddp_kw = {"bucket_cap_mb": BUCKET_CAP_MB[model_name]}
    counter = None
    if system == "eager":
        run = DDP(model, **ddp_kw)
    else:
        counter = _Counting(_backend(system, backend))
        if system == "torch.compile":
            compile_fn = torch.compile
        else:
            import dynamo_lite

            compile_fn = dynamo_lite.compile
        run = compile_fn(DDP(model, **ddp_kw), backend=counter) if wrap == "outer" else \
            DDP(compile_fn(model, backend=counter), **ddp_kw)
        if wrap == "inner-unsplit":  # the same, with config.optimize_ddp off: one graph, one autograd node
            from dynamo_lite import config

            inner = run

            def run(x):
                with config.patch(optimize_ddp=False):
                    return inner(x)
    return run, model, torch.optim.SGD(model.parameters(), lr=0.01), counter


def rank_main(rank, world_size, model_name, backend, systems, warmup, rounds, per_round):
    """Every system on this rank: warm-up steps each, then ``rounds`` rounds in a shuffled order
    (the same on both ranks), ``per_round`` timed steps per system per round."""
    import random

    setups = [_setup(model_name, system, backend, wrap) for system, wrap in systems]
    last_grad = [0.0]
    for _, model, _, _ in setups:
        for p in model.parameters():
            p.register_post_accumulate_grad_hook(lambda _p: last_grad.__setitem__(0, time.perf_counter()))
    steps = [0] * len(setups)
    times = [([], []) for _ in setups]

    def step(i, timed):
        run, model, opt, _ = setups[i]
        x = _data(model_name, steps[i], rank)
        steps[i] += 1
        start = time.perf_counter()
        loss = _loss(model_name, run(x))
        loss.backward()
        done = time.perf_counter()
        opt.step()
        opt.zero_grad()
        end = time.perf_counter()
        if timed:
            times[i][0].append((end - start) * 1e3)
            times[i][1].append((done - last_grad[0]) * 1e3)

    errors = {}
    for i in range(len(setups)):
        try:
            for _ in range(warmup):
                step(i, False)
        except Exception as e:  # noqa: BLE001 - the system fails alike on every rank (at compile time): reported
            errors[i] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    order = [i for i in range(len(setups)) if i not in errors]
    shuffle = random.Random(0)
    for _ in range(rounds):
        shuffle.shuffle(order)
        for i in order:
            for _ in range(per_round):
                step(i, True)
    return [{"error": errors[i]} if i in errors else
            {"step_ms": t[0], "exposed_ms": t[1], "graphs": c.calls if c else 0,
             "params": torch.cat([p.detach().flatten() for p in m.parameters()])}
            for i, ((_, m, _, c), t) in enumerate(zip(setups, times))]


def run_model(model_name, backend, quick) -> list:
    from dynamo_lite.ranks import run_ranks

    warmup, rounds, per_round = (2, 1, 2) if quick else (WARMUP, ROUNDS, PER_ROUND)
    systems = SYSTEMS
    try:
        per_rank = run_ranks(rank_main, model_name, backend, systems, warmup, rounds, per_round, timeout=3000,
                             env={"OMP_NUM_THREADS": "1"})
    except AssertionError as e:
        return [{"model": model_name, "system": s, "backend": backend, "wrap": w, "error": str(e)[-1500:]}
                for s, w in systems]
    rows = []
    reference = per_rank[0][0]["params"], per_rank[1][0]["params"]  # eager DDP on each rank
    for i, (system, wrap) in enumerate(systems):
        r0, r1 = per_rank[0][i], per_rank[1][i]
        if "error" in r0 or "error" in r1:
            rows.append({"model": model_name, "system": system, "backend": backend, "wrap": wrap,
                         "error": r0.get("error") or r1.get("error")})
            continue
        # a step is as slow as its slower rank
        step = [max(a, b) for a, b in zip(r0["step_ms"], r1["step_ms"])]
        exposed = [max(a, b) for a, b in zip(r0["exposed_ms"], r1["exposed_ms"])]
        diff = max(float((r["params"] - ref).abs().max()) for r, ref in zip((r0, r1), reference))
        rows.append({"model": model_name, "system": system, "backend": "-" if system == "eager" else backend,
                     "wrap": wrap, "step_ms": statistics.median(step), "exposed_ms": statistics.median(exposed),
                     "graphs": r0["graphs"], "same": torch.equal(r0["params"], r1["params"]) and diff == 0.0,
                     "max_diff": diff})
    return rows


def run(quick=False, backends=("aot_eager", "inductor"), models=MODELS) -> dict:
    rows = []
    for model_name in models:
        for backend in backends:
            new = run_model(model_name, backend, quick)
            if rows and any(r["system"] == "eager" and r["model"] == model_name for r in rows):
                new = [r for r in new if r["system"] != "eager"]  # eager DDP once per model (it ran again as the reference)
            rows += new
            for r in new:
                print(f"{model_name} {r['system']} {r['backend']} {r['wrap']}: {r.get('step_ms', r.get('error'))}",
                      file=sys.stderr)
    warmup, rounds, per_round = (2, 1, 2) if quick else (WARMUP, ROUNDS, PER_ROUND)
    return {"env": _timing.environment(), "rows": rows, "warmup": warmup, "steps": rounds * per_round,
            "bucket_cap_mb": BUCKET_CAP_MB}


def render(data: dict) -> str:
    headers = ["model", "backend", "system", "wrapping", "graphs", "step ms", "exposed comm ms", "same as eager DDP"]
    rows = []
    wraps = {"outer": "compile(DDP(m))", "inner": "DDP(compile(m))", "-": "DDP(m)",
             "inner-unsplit": "DDP(compile(m)), optimize_ddp=False"}
    for r in data["rows"]:
        if "error" in r:
            rows.append([r["model"], r["backend"], r["system"], wraps[r["wrap"]], "-", "-", "-",
                         "fails: " + r["error"].strip().splitlines()[-1][:90]])
            continue
        same = "-" if r["system"] == "eager" else (
            "yes" if r.get("same") else f"max diff {r.get('max_diff', float('nan')):.1e}")
        rows.append([r["model"], r["backend"], r["system"], wraps[r["wrap"]], r["graphs"] or "-",
                     f"{r['step_ms']:.1f}", f"{r['exposed_ms']:.2f}", same])
    caps = ", ".join(f"{m} {c} MB" for m, c in data.get("bucket_cap_mb", {}).items())
    return (f"2 ranks, gloo, CPU, one thread per rank; bucket_cap_mb: {caps}; medians over {data.get('steps')} "
            f"steps after {data.get('warmup')} warm-up steps, wall clock, the slower rank per step; exposed comm = "
            f"end of gradient computation to end of backward() (all-reduce not overlapped); graphs = backend "
            f"calls (pieces)\n" + _timing.table(headers, rows))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="few steps, nothing written")
    p.add_argument("--backends", default="aot_eager,inductor")
    p.add_argument("--models", default=",".join(MODELS), help=f"some of {', '.join(MODELS)}")
    p.add_argument("--no-write", action="store_true")
    p.add_argument("--merge", action="store_true",
                   help="keep the rows of other models from bench/results/distributed.json")
    a = p.parse_args(argv)
    data = run(a.quick, tuple(a.backends.split(",")), tuple(a.models.split(",")))
    path = os.path.join(_timing.RESULTS_DIR, "distributed.json")
    if a.merge and os.path.exists(path):
        import json

        with open(path) as f:
            old = json.load(f)
        data["rows"] = [r for r in old["rows"] if r["model"] not in a.models.split(",")] + data["rows"]
    print(render(data))
    if not (a.quick or a.no_write):
        print("wrote", _timing.write_json("distributed", data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
