"""Structured events (report/events.py) and explain() (report/explain.py): JSON, text report, drawings."""
import json
import os
import shutil

import pytest
import torch

import dynamo_lite
from dynamo_lite.testing import line_of as _line_of
from dynamo_lite import config
from dynamo_lite.report import events
from dynamo_lite.report.explain import build_explain_output, graph_to_dot, source_excerpt
from dynamo_lite.testing import print_with_graph_break as print  # noqa: A001 - a graph break at each print


def with_print(x):
    y = x * 2
    print("y is", y.shape)
    return (y + 1).relu()


def helper_that_prints(y):
    print("inside helper")
    return y


def calls_helper(x):
    y = x.sin()
    y = helper_that_prints(y)
    return y.cos()


def plain(x):
    return x + 1


# A frame that falls back is marked "skip" for good (reset() does not clear it): separate functions.
def too_long(x):
    return x + 1


def limited(x):
    return x + 1


def record(fn, *calls):
    recorded = []
    compiled = dynamo_lite.compile(fn, backend="eager")
    with events.collecting(recorded.append):
        for args in calls:
            compiled(*args)
    return recorded


def test_every_event_kind_is_json_serialisable():
    recorded = record(with_print, (torch.randn(3),), (torch.randn(3, dtype=torch.float64),))
    with config.patch(max_traced_instructions=3):
        recorded += record(too_long, (torch.randn(2),))  # trace too long -> fallback
    with config.patch(cache_size_limit=1):
        recorded += record(limited, (torch.randn(2),), (torch.randn(3),))  # second shape -> cache limit
    kinds = {type(e).__name__ for e in recorded}
    assert kinds == {"GraphBreakEvent", "FallbackEvent", "GraphEvent", "RecompileEvent", "CacheLimitEvent"}
    for event in recorded:
        d = event.to_dict()
        assert json.loads(json.dumps(d)) == d
        assert d["kind"] == event.kind


def test_break_event_dict_has_user_stack_and_registry_text():
    [brk] = [e for e in record(with_print, (torch.randn(3),)) if isinstance(e, events.GraphBreakEvent)]
    d = brk.to_dict()
    line = _line_of(with_print, 'print("y is"')
    assert d["break_id"] == "DL0030"
    assert d["user_stack"] == [{"filename": __file__, "lineno": line, "name": "with_print",
                                "line": 'print("y is", y.shape)'}]
    assert (d["filename"], d["lineno"]) == (__file__, line)
    assert d["title"] == "graph_break() called" and d["hints"] and d["explanation"]
    assert d["instruction"] == "CALL"


def test_recompile_event_carries_the_failed_guard():
    recorded = record(plain, (torch.randn(3),), (torch.randn(3, dtype=torch.float64),))
    [rec] = [e.to_dict() for e in recorded if isinstance(e, events.RecompileEvent)]
    assert rec["reasons"] == ["x.dtype changed from float32 to float64"]
    assert rec["frame"] == "plain" and rec["compile_id"].endswith("/1")


def test_fallback_event():
    def long_loop(x):
        for _ in range(10):
            x = x + 1
        return x

    with config.patch(max_traced_instructions=20):
        [fb] = [e for e in record(long_loop, (torch.randn(2),)) if isinstance(e, events.FallbackEvent)]
    assert fb.break_id == "DL0018"
    assert fb.to_dict()["user_stack"][0]["name"] == "long_loop"


def test_emit_without_sinks_is_a_no_op():
    assert events._SINKS == [] or all(callable(s) for s in events._SINKS)
    seen = []
    with events.collecting(seen.append):
        events.emit("x")
    events.emit("y")
    assert seen == ["x"]


def test_explain_counts_and_report_text():
    x = torch.randn(3)
    out = dynamo_lite.explain(with_print)(x)
    assert (out.graph_count, out.graph_break_count, out.ops_per_graph) == (2, 1, [1, 2])
    torch.testing.assert_close(out.out, with_print(x))
    text = str(out)
    line = _line_of(with_print, 'print("y is"')
    assert "Graph count: 2" in text and "Graph break count: 1" in text
    assert "1. [DL0030] graph_break() called (graph break): print_with_graph_break() called" in text
    assert f"at {__file__}:{line} in with_print" in text
    assert f'> {line} |     print("y is", y.shape)' in text  # source excerpt, breaking line marked
    assert f"  {line - 1} |     y = x * 2" in text
    assert "hint: Remove the call when one graph is wanted." in text
    assert "ops: mul" in text and "ops: add, relu" in text
    assert "guard: x: Tensor(dtype=float32" in text


def test_explain_report_shows_the_calling_frames_of_an_inlined_break():
    out = dynamo_lite.explain(calls_helper)(torch.randn(3))
    first = out.break_reasons[0]
    assert [f.name for f in first.user_stack] == ["calls_helper", "helper_that_prints"]
    text = str(out)
    assert f"called from {__file__}:{_line_of(calls_helper, 'helper_that_prints(y)')} in calls_helper" in text


def test_explain_to_dict_is_json_ready():
    out = dynamo_lite.explain(with_print)(torch.randn(3))
    d = json.loads(json.dumps(out.to_dict()))
    assert d["graph_count"] == 2 and d["graph_break_count"] == 1
    assert d["op_names"] == [["mul"], ["add", "relu"]]
    assert d["break_reasons"][0]["user_stack"][0]["name"] == "with_print"
    assert d["break_reasons"][0]["hints"]
    assert "def forward" in d["graphs"][0]
    assert [g["frame"] for g in d["graph_infos"]][0] == "with_print"


def test_explain_torch_style_call_and_recompiles_section():
    out = dynamo_lite.explain(plain, torch.randn(3))
    assert out.graph_count == 1 and out.graph_break_count == 0
    recorded = record(plain, (torch.randn(3),), (torch.randn(3, dtype=torch.float64),))
    text = str(build_explain_output(recorded))
    assert "Recompiles:" in text and "x.dtype changed from float32 to float64" in text


def test_draw_writes_dot_and_svg(tmp_path):
    out = dynamo_lite.explain(with_print)(torch.randn(3))
    paths = out.draw(str(tmp_path / "pics"), drawer="dynamo_lite")
    dots = [p for p in paths if p.endswith(".dot")]
    assert [os.path.basename(p) for p in dots] == ["graph_0.dot", "graph_1.dot"]
    dot = open(dots[1]).read()
    assert dot.startswith('digraph "graph_1" {')
    assert '"y" -> "add";' in dot and '"add" -> "relu";' in dot
    assert "float32[3]" in dot
    svgs = [p for p in paths if p.endswith(".svg")]
    if shutil.which("dot"):
        assert len(svgs) == 2 and "<svg" in open(svgs[0]).read()
    else:
        assert svgs == []


def test_draw_with_torchs_fx_graph_drawer(tmp_path):
    pytest.importorskip("pydot")  # the viz extra
    out = dynamo_lite.explain(with_print)(torch.randn(3))
    paths = out.draw(str(tmp_path / "pics"), fmt="png")  # "auto": torch's drawer, as pydot is here
    dots = [p for p in paths if p.endswith(".dot")]
    assert [os.path.basename(p) for p in dots] == ["graph_0.dot", "graph_1.dot"]
    dot = open(dots[1]).read()
    assert dot.startswith("digraph graph_1 {") and "name=%relu|op_code=call_" in dot
    assert "y -> add;" in dot and "add -> relu;" in dot
    pngs = [p for p in paths if p.endswith(".png")]
    if shutil.which("dot"):
        assert len(pngs) == 2 and open(pngs[0], "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="drawer"):
        out.draw(str(tmp_path), drawer="matplotlib")


def test_graph_to_dot_escapes_quotes():
    class M(torch.nn.Module):
        def forward(self, x):
            return x + 1

    gm = torch.fx.symbolic_trace(M())
    gm.graph.nodes.__iter__().__next__().name = 'x"quoted'
    text = graph_to_dot(gm)
    assert '\\"quoted' in text


def test_source_excerpt_handles_missing_files():
    assert source_excerpt("<string>", 3) == []
    assert source_excerpt(__file__, None) == []
    lines = source_excerpt(__file__, 1, context=3)
    assert lines[-1].startswith("> 1 |")


def test_break_without_user_stack_renders():
    ev = events.GraphBreakEvent("DL0003", "some call", [], "f", "0/0")
    assert ev.filename == "" and ev.lineno is None
    out = build_explain_output([ev])
    # a limitation of dynamo_lite says so
    assert "[DL0003] Unsupported call (graph break): dynamo_lite does not trace this yet: some call" in str(out)
    json.dumps(out.to_dict())
