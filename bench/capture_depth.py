"""Capture time against model depth: a tiny Hugging Face Llama with 2 to 32 decoder layers.

For each (depth, system) a fresh worker process builds the model from a small config with random
weights (no downloads), runs it eagerly once (warm-up), then times the first compiled call
(capture + backend "eager" + one run) and the second (cache hit), and counts the graphs.  Four
systems are measured in the same run, one process each: dynamo_lite as it is (repeated blocks
captured once: config.repeated_blocks="auto"), dynamo_lite with that off (every layer traced),
torch.compile, and torch.compile with the decoder layer's forward marked
``torch.compiler.nested_compile_region``.

    python bench/capture_depth.py [--depths 2,6,12,24,32] [--use-cache] [--repeat N] [--json PATH]

First-call times are wall-clock and process CPU time (the ratio column uses CPU time, which
another process on the machine disturbs less); ``--repeat N`` runs N processes per cell and
shows the median (round robin: one process per cell per round, so a change of the machine's load
touches every depth alike).  The call is ``model(ids, use_cache=False)`` (a forward as in training or scoring); with
``--use-cache`` the model makes a KV cache that every layer writes to (dynamo_lite then traces
each layer: a block that writes to an object made before it is no template).  The ratio column
is the first-call time of each depth over that of the shallowest one: how capture grows with
depth (issue #26: under 2x from 2 to 24 layers with repeated blocks captured once).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SYSTEMS = ("dynamo_lite", "dl-no-repeat", "torch.compile", "tc+nested")


def _worker(depth: int, system: str, use_cache: bool) -> dict:
    sys.path.insert(0, ROOT)
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.set_num_threads(1)  # as every bench here (docs/performance.md: how it is measured)
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=depth,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    model = LlamaForCausalLM(cfg).eval()
    ids = torch.randint(0, 128, (1, 8))
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    with torch.no_grad():
        expected = model(ids, use_cache=use_cache).logits
        if system.startswith("d"):
            import dynamo_lite

            dynamo_lite.config.repeated_blocks = "auto" if system == "dynamo_lite" else "off"
            compiled = dynamo_lite.compile(model, backend=backend)
        else:
            if system == "tc+nested":
                from transformers.models.llama import modeling_llama

                layer = modeling_llama.LlamaDecoderLayer
                layer.forward = torch.compiler.nested_compile_region(layer.forward)
            compiled = torch.compile(model, backend=backend)
        start, cpu = time.perf_counter(), time.process_time()
        out = compiled(ids, use_cache=use_cache).logits
        first, first_cpu = time.perf_counter() - start, time.process_time() - cpu
        start = time.perf_counter()
        compiled(ids, use_cache=use_cache)
        second = time.perf_counter() - start
    return {"depth": depth, "system": system, "first_call_s": round(first, 3), "first_call_cpu_s": round(first_cpu, 3),
            "hit_ms": round(second * 1e3, 2),
            "graphs": len(graphs), "correct": bool(torch.allclose(out, expected, atol=1e-5))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depths", default="2,6,12,24,32")
    parser.add_argument("--use-cache", action="store_true")
    parser.add_argument("--repeat", type=int, default=1, help="processes per (depth, system): the median is shown")
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--json", default=None)
    parser.add_argument("--worker", nargs=2, metavar=("DEPTH", "SYSTEM"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(_worker(int(args.worker[0]), args.worker[1], args.use_cache)))
        return
    depths = [int(d) for d in args.depths.split(",")]
    systems = args.systems.split(",")
    runs: dict = {(d, s): [] for d in depths for s in systems}
    # round robin (every cell once per round): a machine whose load drifts slows every depth alike
    for _ in range(args.repeat):
        for depth in depths:
            for system in systems:
                proc = subprocess.run([sys.executable, __file__, "--worker", str(depth), system]
                                      + (["--use-cache"] if args.use_cache else []),
                                      capture_output=True, text=True, timeout=1200)
                if proc.returncode != 0:
                    raise SystemExit(f"worker {depth} {system} failed:\n{proc.stderr[-3000:]}")
                runs[depth, system].append(json.loads(proc.stdout.strip().splitlines()[-1]))
    rows = []
    for cell in runs.values():
        cell.sort(key=lambda r: r["first_call_cpu_s"])
        rows.append(cell[len(cell) // 2])  # the median run
    base = {r["system"]: r["first_call_cpu_s"] for r in rows if r["depth"] == rows[0]["depth"]}
    print(f"{'layers':>6} {'system':<14} {'first call s':>12} {'cpu s':>6} {'x shallowest':>12} {'hit ms':>8} "
          f"{'graphs':>6} correct")
    for r in rows:
        print(f"{r['depth']:>6} {r['system']:<14} {r['first_call_s']:>12.2f} {r['first_call_cpu_s']:>6.2f} "
              f"{r['first_call_cpu_s'] / base[r['system']]:>12.2f} {r['hit_ms']:>8.2f} {r['graphs']:>6} {r['correct']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
