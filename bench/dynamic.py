"""Dynamic-shape sweeps: graphs, recompiles, first-call and sweep time, dynamo_lite vs torch.compile.

Each sweep calls one function or model with a sequence of inputs whose sizes
(or an int argument) change, through dynamo_lite and through torch.compile in
the same process, both with a counting backend around the same compiler
("eager" by default, "inductor" with --inductor).  Printed per sweep and
system: graphs compiled, recompiles (graphs after the first), the first call's
time, the total time of the sweep (compiles included) and whether every result
equals eager.  Sweeps:

    mlp_order     an MLP over batch 1..64 in order
    mlp_shuffled  the same batches shuffled
    attention     an attention block over batch x sequence, shuffled
    int_arg       an int argument 1..20
    reshape       reshapes that use sizes in arithmetic
    range_loop    a loop over range(n) with a graph break in the body (torch._dynamo.graph_break(),
                  which breaks in both systems), n = 1..8
    range_unrolled  a loop over range(n) without a break, n = 1..16
    gpt2 / bert / llama   tiny Hugging Face models (random weights) over 7 sequence lengths

Then the cache-hit overhead of an entry with symbolic shape guards against
the static entry of the same function (bench/_timing.py's interleaved rounds).

    python bench/dynamic.py [--quick] [--inductor] [--sweeps mlp_order,...] [--no-write] [--doc]

``--doc`` also replaces this backend's section of docs/performance.md (the section
bench/run_all.py writes from bench/results/; the rest of the page is kept).
Covered by tests/robustness/test_bench_smoke.py (quick mode).
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
from torch import nn  # noqa: E402

import _timing  # noqa: E402
import dynamo_lite  # noqa: E402
from dynamo_lite.backends import lookup_backend  # noqa: E402


# ---- the sweeps -----------------------------------------------------------------------
class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.GELU(), nn.Linear(64, 8))

    def forward(self, x):
        return self.net(x)


class Attention(nn.Module):
    def __init__(self, d=32, heads=4):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        q = q.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(b, t, d))


def int_arg(x, n):
    return (x * n).sin() + n // 2


def reshape(x):
    b, t, d = x.shape
    y = x.reshape(b * t, d).relu().view(b, t * d)
    return y[:, : t * d // 2].sum(-1) * (b + t)


def range_loop(x, n):
    for i in range(n):
        x = x + i
        torch._dynamo.graph_break()  # a break in both systems (dynamo_lite: an unsupported call)
    return x


def range_unrolled(x, n):
    for i in range(n):
        x = x * 2 + i
    return x


def _sweeps(quick: bool):
    rng = random.Random(0)
    torch.manual_seed(0)
    batches = list(range(1, 65 if not quick else 13))
    shuffled = batches[:]
    rng.shuffle(shuffled)
    bt = [(b, t) for b in (1, 2, 3, 5, 8) for t in (4, 7, 12, 16)]
    rng.shuffle(bt)
    if quick:
        bt = bt[:6]
    seqs = [5, 9, 13, 17, 21, 25, 30] if not quick else [5, 9, 13]
    yield "mlp_order", MLP().eval(), [((torch.randn(b, 32),), {}) for b in batches]
    yield "mlp_shuffled", MLP().eval(), [((torch.randn(b, 32),), {}) for b in shuffled]
    yield "attention", Attention().eval(), [((torch.randn(b, t, 32),), {}) for b, t in bt]
    yield "int_arg", int_arg, [((torch.randn(8), n), {}) for n in range(1, 21 if not quick else 8)]
    yield "reshape", reshape, [((torch.randn(b, t, 4),), {}) for b, t in bt]
    yield "range_loop", range_loop, [((torch.zeros(3), n), {}) for n in range(1, 9 if not quick else 5)]
    yield "range_unrolled", range_unrolled, [((torch.zeros(3), n), {}) for n in range(1, 17 if not quick else 6)]
    try:
        import transformers  # noqa: F401
    except ImportError:
        return
    import models  # bench/models.py: tiny configs, random weights

    for name in ("gpt2", "bert", "llama"):
        model = models._hf(name).eval()
        g = torch.Generator().manual_seed(0)
        yield name, model, [((), {"input_ids": torch.randint(3, models.VOCAB, (2, s), generator=g)}) for s in seqs]


# ---- running one system over one sweep ------------------------------------------------
class Counting:
    """A backend that counts graphs and compiles with ``inner``."""

    def __init__(self, inner):
        self.inner = inner
        self.graphs = 0

    def __call__(self, gm, example_inputs):
        self.graphs += 1
        return self.inner(gm, example_inputs)


def _eager_backend(gm, example_inputs):
    return gm.forward


def _torch_inductor(gm, example_inputs):
    from torch._inductor.compile_fx import compile_fx

    return compile_fx(gm, example_inputs)


def _same(a, b) -> bool:
    """Tensors (in tuples, lists, dicts and ModelOutputs) equal; other objects (a KV cache) skipped."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.shape == b.shape and torch.allclose(a, b, rtol=1e-4, atol=1e-5)
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return list(a.keys()) == list(b.keys()) and all(_same(a[k], b[k]) for k in a.keys())
    if isinstance(a, (int, float, str, bool, type(None))):
        return a == b
    return True


def run_sweep(system: str, target, calls, inductor: bool) -> dict:
    import contextlib
    import io

    if system == "dynamo_lite":
        dynamo_lite.reset()
        counter = Counting(lookup_backend("inductor")[0] if inductor else _eager_backend)
        compiled = dynamo_lite.compile(target, backend=counter)
    else:
        torch._dynamo.reset()
        counter = Counting(_torch_inductor if inductor else _eager_backend)
        compiled = torch.compile(target, backend=counter)
    same = True
    first = None
    start = time.perf_counter()
    with torch.no_grad(), contextlib.redirect_stdout(io.StringIO()):
        for i, (args, kwargs) in enumerate(calls):
            t0 = time.perf_counter()
            got = compiled(*args, **kwargs)
            if i == 0:
                first = time.perf_counter() - t0
            same = same and _same(target(*args, **kwargs), got)
    total = time.perf_counter() - start
    return {"graphs": counter.graphs, "recompiles": max(0, counter.graphs - 1) if counter.graphs else 0,
            "first_call_ms": round(first * 1e3, 1), "total_s": round(total, 2), "equal_to_eager": same}


# ---- cache-hit overhead: symbolic guards vs static --------------------------------------
def _hit_overhead(quick: bool) -> dict:
    def f(x, y):
        return x + y

    x, y = torch.randn(8, 16), torch.randn(8, 16)
    dynamo_lite.reset()
    static = dynamo_lite.compile(f, backend="eager", dynamic=False)
    static(x, y)
    sym_fn = lambda x, y: x + y  # noqa: E731 - another code object: its own entries
    symbolic = dynamo_lite.compile(sym_fn, backend="eager", dynamic=True)
    symbolic(x, y)
    (entry,) = dynamo_lite.cache.entries(sym_fn.__code__)
    assert "CHECK_INT_RANGE" in {op[0] for op in entry.guard.fn.ops}
    systems = {"eager": lambda: f(x, y), "static": lambda: static(x, y), "symbolic": lambda: symbolic(x, y)}
    n = _timing.calibrate(systems["static"])
    times = _timing.interleaved(systems, rounds=5 if quick else 21, n=n)
    over = {k: _timing.median([a - b for a, b in zip(times[k], times["eager"])]) / 1e3 for k in ("static", "symbolic")}
    return {"static_us": round(over["static"], 3), "symbolic_us": round(over["symbolic"], 3),
            "difference_us": round(over["symbolic"] - over["static"], 3),
            "symbolic_guard_ops": len(entry.guard.fn.ops)}


def render(data: dict) -> str:
    """The sweep table (markdown) of one run's results."""
    rows = []
    for r in data["sweeps"]:
        a, b = r["dynamo_lite"], r["torch.compile"]
        rows.append([r["sweep"], r["calls"], f"{a['graphs']} / {b['graphs']}", f"{a['recompiles']} / {b['recompiles']}",
                     f"{a['first_call_ms']} / {b['first_call_ms']}", f"{a['total_s']} / {b['total_s']}",
                     f"{a['equal_to_eager']} / {b['equal_to_eager']}"])
    table = _timing.table(["sweep", "calls", "graphs (dl / tc)", "recompiles", "first call ms", "sweep s",
                           "equal to eager"], rows)
    hit = data["hit_overhead"]
    note = ("" if data["backend"] != "inductor" else
            "dynamo_lite runs each sweep first: inductor's caches may then serve torch.compile graphs it already "
            "compiled, so first-call and sweep times of this table are not a fair comparison (graph counts are).\n\n")
    return (note +f"Backend `{data['backend']}` for both systems (dl: dynamo_lite, tc: torch.compile); sweep time "
            f"includes every compile.\n\n{table}\n\nCache-hit overhead of `x + y` with symbolic shape guards "
            f"({hit['symbolic_guard_ops']} guard ops): {hit['symbolic_us']} us, static entry {hit['static_us']} us "
            f"(difference {hit['difference_us']} us).\n\n" + _range_note(data))


def _range_note(data: dict) -> str:
    """The paragraph on the range() sweeps, with this run's counts."""
    rows = {r["sweep"]: r for r in data["sweeps"]}

    def graphs(name):
        r = rows[name]
        return f"{r['dynamo_lite']['graphs']} graphs for dynamo_lite, {r['torch.compile']['graphs']} for torch.compile"

    parts = []
    if "range_loop" in rows:
        parts.append(f"range_loop ({rows['range_loop']['calls']} values of n; {graphs('range_loop')}): "
                     "torch.compile runs that frame eagerly (a graph break inside a for loop skips the frame). "
                     "dynamo_lite compiles the frame for n == 1, then with a symbolic n whose loop runs natively, "
                     "its body a loop-body function compiled for i == 0, i == 1 and a symbolic i: the same "
                     "graphs serve every later n.")
    if "range_unrolled" in rows:
        parts.append(f"range_unrolled ({rows['range_unrolled']['calls']} values of n; {graphs('range_unrolled')}): "
                     "torch.compile unrolls the loop and specialises n, one graph per n until its "
                     "cache_size_limit; once n is symbolic, dynamo_lite ends the graph at the loop (DL0041) "
                     "instead of unrolling it for one n, and the body compiles once for every n.")
    return "\n\n".join(parts)


TITLES = {"eager": "Dynamic shapes, backend eager (bench/dynamic.py)",
          "inductor": "Dynamic shapes, backend inductor (bench/dynamic.py --inductor)"}


def write_doc_section(data: dict) -> str:
    """Replace the section of ``data``'s backend in docs/performance.md with ``render(data)``."""
    import re

    doc = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "performance.md")
    with open(doc) as f:
        text = f.read()
    title = TITLES[data["backend"]]
    date = (data.get("env") or {}).get("date")
    section = f"### {title}, measured {date}\n\n{render(data)}\n\n" if date else f"### {title}\n\n{render(data)}\n\n"
    pattern = re.compile(r"^### " + re.escape(title) + r".*?(?=^### |\Z)", re.S | re.M)
    if pattern.search(text):
        text = pattern.sub(lambda m: section, text, count=1)
    else:
        text = text.rstrip("\n") + "\n\n" + section
    with open(doc, "w") as f:
        f.write(text.rstrip("\n") + "\n")
    return doc


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--inductor", action="store_true", help="compile with inductor instead of eager")
    p.add_argument("--sweeps", default="", help="comma-separated sweep names")
    p.add_argument("--no-write", action="store_true")
    p.add_argument("--doc", action="store_true", help="replace this backend's section of docs/performance.md")
    args = p.parse_args(argv)
    wanted = set(filter(None, args.sweeps.split(",")))
    # one-time start-up of both systems (imports, sympy, the first FakeTensorMode), paid before timing
    warm = [((torch.randn(b, 4),), {}) for b in (3, 5)]
    for system in ("dynamo_lite", "torch.compile"):
        run_sweep(system, lambda x: (x * 2).sum(0) + x.shape[0], warm, args.inductor)
    rows = []
    for name, target, calls in _sweeps(args.quick):
        if wanted and name not in wanted:
            continue
        row = {"sweep": name, "calls": len(calls)}
        for system in ("dynamo_lite", "torch.compile"):
            row[system] = run_sweep(system, target, calls, args.inductor)
        rows.append(row)
        a, b = row["dynamo_lite"], row["torch.compile"]
        print(f"{name:13s} {len(calls):3d} calls | dynamo_lite: {a['graphs']:2d} graphs, first {a['first_call_ms']:7.1f} ms, "
              f"sweep {a['total_s']:6.2f} s, equal {a['equal_to_eager']} | torch.compile: {b['graphs']:2d} graphs, "
              f"first {b['first_call_ms']:7.1f} ms, sweep {b['total_s']:6.2f} s, equal {b['equal_to_eager']}", flush=True)
    hit = _hit_overhead(args.quick)
    result_env = _timing.environment()
    print(f"cache-hit overhead (x + y, 2 inputs): static {hit['static_us']} us, symbolic {hit['symbolic_us']} us, "
          f"difference {hit['difference_us']} us")
    result = {"backend": "inductor" if args.inductor else "eager", "quick": args.quick, "sweeps": rows,
              "hit_overhead": hit, "env": result_env}
    print(render(result))
    if not args.no_write:
        _timing.write_json("dynamic_inductor" if args.inductor else "dynamic", result)
    if args.doc:
        print("updated", write_doc_section(result))
    return result


if __name__ == "__main__":
    main()
