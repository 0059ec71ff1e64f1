"""numpy code inside compiled functions: dynamo_lite vs torch.compile, side by side.

Each snippet is one numpy expression of four array arguments (float64, int64, float32, bool).
It runs eagerly, through dynamo_lite and through torch.compile (both with a counting "eager"
backend, in the same process); printed per system: how many snippets made one graph with no
break, the total graphs and breaks, and how many results differ from eager in what a user sees
(ndarray vs numpy scalar, dtype, shape, values; dynamo_lite.testing's comparison).

    python bench/numpy_code.py [--quick] [--verbose]
Covered by tests/robustness/test_bench_smoke.py (quick mode).
"""
from __future__ import annotations

import argparse
import os
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import dynamo_lite  # noqa: E402
from dynamo_lite.testing import results_differ as differs  # noqa: E402

SNIPPETS = """
a + i | f * 2.5 | f * np.float64(2.5) | i * 2.5 | i / 2 | i / i | i // 2 | i ** 2 | -i | b + b
np.sum(b) | np.mean(f) | np.mean(i, axis=1) | f.mean(axis=0, keepdims=True) | np.std(i) | a.max(axis=1)
np.argmax(a, axis=1) | np.cumprod(i + 1) | np.prod(f) | a @ a.T | np.dot(f, f.T) | np.outer(a[0], a[1])
np.concatenate([a, i], axis=0) | np.stack([f, f], axis=-1) | np.split(a, 3, axis=1) | np.transpose(a)
a.reshape(3, 2) | np.tile(a, 2) | np.flip(a, 0) | np.sort(a, axis=0) | np.where(a > 2, a, 0)
np.where(i > 2, 1.5, i) | np.clip(i, 1, 3) | np.round(a / 3, 2) | np.exp(i) | np.log1p(f) | np.sqrt(i)
np.arctan2(a, a + 1) | np.maximum(i, 2) | np.isnan(a) | np.linalg.norm(f) | np.linalg.norm(i, axis=0)
np.zeros_like(i) | np.full((2, 2), 7) | np.eye(3) | np.linspace(0, 1, 4) | np.arange(0, 1, 0.25)
np.array([1, 2, 3]) | a[0] | a[0, 1] | a[:, None] | a[[0, 1], [1, 2]] | a.astype(int) | a.T.copy()
a.sum() > 3 | (a > 2).any() | a.cumsum(axis=1) | np.diff(a) | np.trace(a) | np.diag(a) | np.cross(a, a)
np.median(a) | np.percentile(a, 50) | np.searchsorted(a[0], 1.5) | np.meshgrid(a[0], a[1])
np.sum(a, dtype=np.float32) | np.true_divide(i, 2) | np.divide(i, i) | np.mod(a, 2) | np.power(i, 2)
np.logical_and(b, b) | np.fft.fft(a) | np.fft.rfft(f) | np.conj(a + 1j) | np.float32(2) * a
np.int64(0) == 0 | 0 in (np.int64(0), np.int64(2)) | np.finfo(np.float32).eps * a | np.pi * f
"""


def snippets(quick: bool) -> list:
    items = [s.strip() for line in SNIPPETS.strip().splitlines() for s in line.split("|")]
    return items[:12] if quick else items


def make(snippet: str):
    namespace = {"np": np, "torch": torch}
    exec(f"def f(a, i, f, b):\n    return {snippet}\n", namespace)  # noqa: S102
    return namespace["f"]


def inputs():
    return (np.arange(6.0).reshape(2, 3), np.arange(6).reshape(2, 3),
            np.arange(6, dtype=np.float32).reshape(2, 3), np.array([True, False, True]))


def run(system: str, fn):
    """(result or exception, graphs, breaks)."""
    if system == "dynamo_lite":
        report = dynamo_lite.explain(fn)(*inputs())
        graphs, breaks = report.graph_count, report.graph_break_count
        compiled = dynamo_lite.compile(fn, backend="eager")
    else:
        import torch._dynamo  # the reference: torch.compile, measured side by side

        torch._dynamo.reset()
        report = torch._dynamo.explain(fn)(*inputs())
        graphs, breaks = report.graph_count, report.graph_break_count
        torch._dynamo.reset()
        compiled = torch.compile(fn, backend="eager")
    try:
        return compiled(*inputs()), graphs, breaks
    except Exception as e:  # noqa: BLE001 - compared with eager's exception
        return e, graphs, breaks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the first 12 snippets")
    parser.add_argument("--verbose", action="store_true", help="one line per snippet")
    args = parser.parse_args()
    systems = ("dynamo_lite", "torch.compile")
    totals = {s: {"one_graph": 0, "graphs": 0, "breaks": 0, "wrong": 0} for s in systems}
    items = snippets(args.quick)
    warnings.simplefilter("ignore")
    for snippet in items:
        fn = make(snippet)
        try:
            eager = fn(*inputs())
        except Exception as e:  # noqa: BLE001
            eager = e
        line = [f"{snippet:38s}"]
        for system in systems:
            result, graphs, breaks = run(system, fn)
            total = totals[system]
            total["one_graph"] += graphs == 1 and breaks == 0
            total["graphs"] += graphs
            total["breaks"] += max(breaks, 0)
            wrong = differs(eager, result)
            total["wrong"] += wrong
            line.append(f"{system}: {graphs}g {breaks}b{' WRONG' if wrong else ''}")
        if args.verbose:
            print("  ".join(line))
    print(f"{len(items)} numpy snippets")
    print(f"{'system':15s} {'one graph, 0 breaks':>20s} {'graphs':>7s} {'breaks':>7s} {'differ from eager':>18s}")
    for system in systems:
        t = totals[system]
        print(f"{system:15s} {t['one_graph']:>20d} {t['graphs']:>7d} {t['breaks']:>7d} {t['wrong']:>18d}")


if __name__ == "__main__":
    main()
