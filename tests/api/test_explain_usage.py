"""explain() as a user reads it: counts, ops per graph, break reasons with file and line.

Every test compares compiled with eager through dynamo_lite.testing; known bugs are strict
xfails in tests/test_known_bugs.py.
"""

import pytest
import torch

import dynamo_lite
from dynamo_lite.testing import assert_same
from dynamo_lite.testing import line_of as _line_of
from dynamo_lite.testing import print_with_graph_break as print  # noqa: A001 - a graph break at each print

pytest_plugins = ["pytester"]

X = torch.arange(6, dtype=torch.float32).reshape(2, 3) / 7 - 0.3


# ---------------------------------------------------------------- explain
def _two_breaks(t):
    a = t.sin()
    print("hi")
    b = a.cos()
    if b.sum() > 0:
        b = b + 1
    return b


def test_explain_counts_and_ops_per_graph(capsys):
    r = dynamo_lite.explain(_two_breaks)(X)
    assert (r.graph_count, r.graph_break_count) == (3, 2)
    assert r.ops_per_graph == [1, 3, 1]
    assert len(r.graphs) == len(r.guards) == 3
    assert_same(r.out, _two_breaks(X))


def test_explain_break_reasons_name_user_file_and_line(capsys):
    r = dynamo_lite.explain(_two_breaks)(X)
    got = [(b.break_id, b.filename, b.lineno) for b in r.break_reasons]
    assert got == [("DL0030", __file__, _line_of(_two_breaks, 'print("hi")')),
                   ("DL0025", __file__, _line_of(_two_breaks, "if b.sum()"))]
    text = str(r)
    assert f"{__file__}:{_line_of(_two_breaks, 'print(')}" in text
    assert text.startswith("Graph count: 3\nGraph break count: 2\nOp count: 5")


def test_explain_break_in_resumed_code_names_the_user_function(capsys):
    r = dynamo_lite.explain(_two_breaks)(X)
    assert [b.user_stack[-1].name for b in r.break_reasons] == ["_two_breaks", "_two_breaks"]
    assert "__resume_at" not in str(r).split("Graph 0")[0]


def test_explain_guards_describe_inputs():
    def f(x, factor, names):
        for _ in names:
            x = x * factor
        return x

    r = dynamo_lite.explain(f)(X, 0.5, ["a", "b"])
    lines = r.guards[0]
    assert "factor: == 0.5" in lines
    assert "names: len == 2" in lines
    assert any(line.startswith("x: Tensor(dtype=float32") and "shape=[2, 3]" in line for line in lines)


def test_explain_accepts_kwargs_and_torch_style_args():
    def f(x, k=2.0):
        return x * k

    r1 = dynamo_lite.explain(f)(X, k=3.0)
    r2 = dynamo_lite.explain(f, X, k=3.0)
    assert_same(r1.out, X * 3.0)
    assert (r1.graph_count, r1.graph_break_count) == (r2.graph_count, r2.graph_break_count) == (1, 0)


def test_explain_of_module_and_of_compiled_module():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU())
    r1 = dynamo_lite.explain(m)(X)
    r2 = dynamo_lite.explain(dynamo_lite.compile(m, backend="eager"))(X)
    assert r1.ops_per_graph == r2.ops_per_graph == [2]
    assert r1.graph_break_count == r2.graph_break_count == 0


def test_explain_propagates_user_exception():
    def bad(x):
        return x + torch.ones(4)

    with pytest.raises(RuntimeError, match="size"):
        dynamo_lite.explain(bad)(X)


def test_explain_to_dict_is_json_and_consistent(capsys):
    import json

    r = dynamo_lite.explain(_two_breaks)(X)
    d = json.loads(json.dumps(r.to_dict()))
    assert d["graph_count"] == 3 and d["graph_break_count"] == 2
    assert [b["break_id"] for b in d["break_reasons"]] == ["DL0030", "DL0025"]
    assert d["op_names"][0] == ["sin"]


def test_explain_counts_fallback_as_break():
    with torch.device("cpu"):  # a torch function mode: the frame runs eagerly
        r = dynamo_lite.explain(lambda x: x.sin() + 1)(X)
    assert (r.graph_count, r.graph_break_count) == (0, 1)
    assert r.break_reasons[0].kind == "fallback"
    assert "frame ran eagerly" in str(r)
