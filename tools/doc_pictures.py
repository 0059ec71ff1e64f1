"""Draw the pictures of the docs from real runs: docs/img/explain-graph.svg.

    python tools/doc_pictures.py            redraw (needs pydot and graphviz's `dot`)

The example is ``EXAMPLE`` below, the one docs/debugging.md shows ("Pictures of graphs");
tests/api/test_docs.py checks that the committed picture holds every node of its graph.
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PICTURE = os.path.join(ROOT, "docs", "img", "explain-graph.svg")

EXAMPLE = '''
import torch

def mlp(x, w1, w2):
    h = torch.relu(x @ w1)
    return torch.softmax(h @ w2, dim=-1)
'''


def example_report():
    """``explain()`` of the example, called with small tensors."""
    sys.path.insert(0, ROOT)
    import torch

    import dynamo_lite

    namespace: dict = {}
    exec(compile(EXAMPLE, "example.py", "exec"), namespace)
    return dynamo_lite.explain(namespace["mlp"])(torch.randn(4, 8), torch.randn(8, 16), torch.randn(16, 3))


def main() -> int:
    if shutil.which("dot") is None:
        print("graphviz's dot is not installed (apt-get install graphviz)", file=sys.stderr)
        return 1
    report = example_report()
    with tempfile.TemporaryDirectory() as tmp:
        paths = report.draw(tmp, fmt="svg", drawer="torch")
        os.makedirs(os.path.dirname(PICTURE), exist_ok=True)
        shutil.copy(next(p for p in paths if p.endswith(".svg")), PICTURE)
    print(f"wrote {os.path.relpath(PICTURE, ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
