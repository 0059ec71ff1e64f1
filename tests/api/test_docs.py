"""The docs are true: generated pages are current, examples run, printed outputs match, the site builds.

- docs/graph-breaks.md is exactly what tools/gen_graph_break_docs.py renders
  from dynamo_lite/graph_breaks.py;
- each registry example breaks with its own id;
- every ```python block of docs/*.md is run (``<!-- test: run -->``) or says
  why not (``<!-- test: skip: reason -->``), and ``<!-- test: output -->``
  blocks equal a real run (tools/doc_examples.py; ``--update`` rewrites them);
- ``mkdocs build --strict`` succeeds (when mkdocs is installed: the docs extra).
"""
import importlib.util
import os
import re
import subprocess
import sys

import pytest
import torch

import dynamo_lite
from dynamo_lite import graph_breaks
from dynamo_lite.graph_breaks import REGISTRY

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOCS = os.path.join(ROOT, "docs")


def _load_tool(name):
    spec = importlib.util.spec_from_file_location(f"_tool_{name}", os.path.join(ROOT, "tools", f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


gen_docs = _load_tool("gen_graph_break_docs")
doc_examples = _load_tool("doc_examples")

PAGES = sorted(name for name in os.listdir(DOCS) if name.endswith(".md"))
RUNNABLE_PAGES = [name for name in PAGES if doc_examples.RUN in open(os.path.join(DOCS, name)).read()]


def test_graph_break_page_is_current():
    with open(gen_docs.PAGE) as f:
        current = f.read()
    assert current == gen_docs.render(), (
        "docs/graph-breaks.md is stale: run `python tools/gen_graph_break_docs.py`")
    assert gen_docs.main(["--check"]) == 0


def test_registry_entries_are_complete():
    for break_id, bt in REGISTRY.items():
        assert re.fullmatch(r"DL\d{4}", break_id) and bt.id == break_id
        assert bt.title and bt.explanation.endswith((".", ")")), break_id
        assert bt.cause in (graph_breaks.CODE, graph_breaks.DYNAMO_LITE), break_id
        # a break inherent to the user's code says what to change; a limitation of ours needs none
        assert bt.hints or bt.cause == graph_breaks.DYNAMO_LITE, f"{break_id} has no hint"
        assert not bt.hints_only_in or bt.hints, break_id


def test_every_id_raised_in_the_code_is_registered():
    """Code names break types by their graph_breaks constant, never by a raw "DL00nn" literal."""
    from dynamo_lite import graph_breaks

    used, literals = set(), []
    for dirpath, _, files in os.walk(os.path.join(ROOT, "dynamo_lite")):
        for name in files:
            if name.endswith(".py") and name != "graph_breaks.py":
                text = open(os.path.join(dirpath, name)).read()
                used |= set(re.findall(r"\bgb\.([A-Z][A-Z_]+)\b", text))
                literals += [f"{name}: {m}" for m in re.findall(r'"DL\d{4}"', text)]
    assert used, "no break ids found: did the layout change?"
    assert not literals, f"raw break-id literals outside graph_breaks.py: {literals}"
    missing = sorted(n for n in used if getattr(graph_breaks, n, None) not in REGISTRY)
    assert not missing, f"names used but not registered in graph_breaks.py: {missing}"


@pytest.mark.parametrize("break_id", sorted(i for i, bt in REGISTRY.items() if bt.example))
def test_registry_example_breaks_with_its_id(break_id, capsys):
    namespace = {"torch": torch}
    exec(compile(REGISTRY[break_id].example, f"<example {break_id}>", "exec"), namespace)  # noqa: S102
    report = dynamo_lite.explain(namespace["f"])(torch.randn(3))
    assert [b.break_id for b in report.break_reasons] == [break_id], [b.reason for b in report.break_reasons]


# Pages written by other areas, whose python blocks are illustrations (listings, trimmed code):
# they are built into the site but not held to the run-or-skip rule yet.
_NOT_CHECKED = {"resume.md", "performance.md"}


def test_every_python_block_is_run_or_skipped_with_a_reason():
    unmarked = []
    for name in PAGES:
        if name == "graph-breaks.md" or name in _NOT_CHECKED:  # generated: its examples are run above
            continue
        lines = open(os.path.join(DOCS, name)).read().split("\n")
        for i, line in enumerate(lines):
            if line.strip() == "```python":
                before = lines[i - 1].strip() if i else ""
                if before != doc_examples.RUN and not re.fullmatch(r"<!-- test: skip: .+ -->", before):
                    unmarked.append(f"docs/{name}:{i + 1}")
    assert not unmarked, "python blocks neither run nor skipped with a reason: " + ", ".join(unmarked)


def test_normalise_ignores_what_changes_between_runs():
    a = "I1130 07:01:05.287 dynamo_lite.graph_breaks] [3/1] at 0x7f00ab  \n"
    b = "I0101 00:00:00.000 dynamo_lite.graph_breaks] [17/1] at 0x1234"
    assert doc_examples.normalise(a) == doc_examples.normalise(b)
    assert doc_examples.normalise("[3/1]") != doc_examples.normalise("[3/2]")
    # a random temporary directory whose name holds "0x" and a hex digit is still one directory
    assert doc_examples.normalise('File "/tmp/tmp420x5i5g/test_model.py", line 8') == \
        doc_examples.normalise('File "/tmp/tmpgtd5lk05/test_model.py", line 8')


# The docs' printed outputs were recorded on this Python: a bytecode listing (dis) differs on
# another version, so those blocks are compared only here (every example still runs everywhere).
DOCUMENTED_PYTHON = (3, 11)
_DIS_LISTING = re.compile(r"^\s*\d*\s+\d+ RESUME\s+0$", re.M)


@pytest.mark.parametrize("page", RUNNABLE_PAGES)
def test_page_examples_run_and_outputs_match(page):
    problems = doc_examples.check_page(os.path.join(DOCS, page))
    if sys.version_info[:2] != DOCUMENTED_PYTHON:
        problems = [p for p in problems if not _DIS_LISTING.search(p.split("--- actual:")[0])]
    assert not problems, "\n\n".join(problems)


def test_mkdocs_build_strict(tmp_path):
    pytest.importorskip("mkdocs", reason="the docs extra is not installed (pip install -e '.[docs]')")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "site" / "graph-breaks" / "index.html").exists()


def test_doc_picture_is_the_graph_of_its_example():
    """docs/img/explain-graph.svg (tools/doc_pictures.py) draws every node of the example's graph."""
    pictures = _load_tool("doc_pictures")
    svg = open(pictures.PICTURE).read()
    [gm] = pictures.example_report().graphs
    names = [n.name for n in gm.graph.nodes]
    assert sorted(names) == sorted(["x", "w1", "w2", "matmul", "relu", "matmul_1", "softmax", "output"])
    for name in names:
        assert f"name=%{name}" in svg, name
    assert "img/explain-graph.svg" in open(os.path.join(ROOT, "docs", "debugging.md")).read()
