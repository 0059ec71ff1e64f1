"""Other tracers and compilers meet compiled code: torch.jit, torch.fx, make_fx, torch.func,
FakeTensorMode, a nested torch.compile.

Frames another tracer runs are left alone (convert_frame.foreign_tracer at a miss, and guards
of every entry at a hit); calling a tracer from traced code breaks (DL0040) and runs it
natively; a torch.compile()d function called from traced code is traced into the graph, as
TorchDynamo does.  Graph and break counts are TorchDynamo's (measured with a counting backend).
"""
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import dynamo_lite
from dynamo_lite import graph_breaks as gb
from dynamo_lite.backends import lookup_backend
from dynamo_lite.testing import CompileCounter, assert_same, check, check_breaks, recording


def _lin():
    torch.manual_seed(0)
    return torch.nn.Linear(3, 2)


def _sin1(x):
    return torch.sin(x) + 1


def _break_ids(seen):
    return [e.break_id for e in seen if type(e).__name__ in ("GraphBreakEvent", "FallbackEvent")]


def test_jit_trace_inside_compiled_code_runs_natively():
    m = _lin()

    def f(x):
        y = x * 2
        traced = torch.jit.trace(m, y)
        return traced(y) + 1

    seen, collecting = recording()
    with collecting:
        cnt = check(f, torch.randn(4, 3), graphs=2)  # TorchDynamo: 2 graphs as well
    assert cnt.frame_count == 2
    assert _break_ids(seen)[0] == gb.FOREIGN_TRACER


def test_jit_script_function_called_from_compiled_code_breaks():
    scripted = torch.jit.script(_sin1)

    def f(x):
        return scripted(x * 2) - 1

    seen, collecting = recording()
    with collecting:
        check(f, torch.randn(3), graphs=2)
    assert _break_ids(seen) == [gb.FOREIGN_TRACER]


def test_jit_trace_of_a_function_with_a_cache_entry_sees_the_original_code():
    def g(x):
        return x.cos() * 3

    def ops(traced):
        # the recorded ops and the line of g each comes from (the value numbers are left out: a
        # finalizer that the garbage collector happens to run mid-trace uses some up)
        return [(n.kind(), n.sourceRange().splitlines()[0]) for n in traced.graph.nodes()]

    x = torch.randn(3)
    expected = ops(torch.jit.trace(g, x))
    assert [k for k, _ in expected] == ["aten::cos", "prim::Constant", "aten::mul"]
    cnt = CompileCounter()
    with dynamo_lite.optimize(cnt):
        g(x)  # g now has an entry that matches x
        assert cnt.frame_count == 1
        traced = torch.jit.trace(g, x)
    assert ops(traced) == expected
    assert cnt.frame_count == 1
    assert_same(traced(x), g(x))


def test_fx_symbolic_trace_and_make_fx_see_the_original_code():
    from torch.fx.experimental.proxy_tensor import make_fx

    def g(x):
        return torch.relu(x) + 2

    x = torch.randn(3)
    eager_fx = str(torch.fx.symbolic_trace(g).graph)
    eager_make_fx = str(make_fx(g)(x).graph)
    cnt = CompileCounter()
    with dynamo_lite.optimize(cnt):
        g(x)
        fx_graph = str(torch.fx.symbolic_trace(g).graph)
        made = str(make_fx(g)(x).graph)
    assert (fx_graph, made) == (eager_fx, eager_make_fx)
    assert cnt.frame_count == 1


def test_vmap_and_fake_mode_run_a_compiled_function_natively():
    def g(x):
        return x.sin() * x.sum()

    x = torch.randn(3)
    cnt = CompileCounter()
    cg = dynamo_lite.compile(g, backend=cnt)
    cg(x)
    xs = torch.randn(4, 3)
    assert_same(torch.func.vmap(cg)(xs), torch.func.vmap(g)(xs))
    with FakeTensorMode() as mode:
        out = cg(mode.from_tensor(x))
    assert out.shape == (3,)
    assert cnt.frame_count == 1


def test_nested_torch_compile_is_traced_into_the_graph():
    def f(x):
        y = x * 2
        return torch.compile(_sin1, backend="aot_eager")(y) * 2

    cnt = check(f, torch.randn(3), graphs=1)  # TorchDynamo: one graph of 4 ops, no break
    assert (cnt.frame_count, cnt.op_count) == (1, 4)
    check_breaks(f, torch.randn(3), breaks=0)


_compiled_sin1 = torch.compile(_sin1, backend="aot_eager")


def test_global_torch_compiled_function_is_traced_into_the_graph():
    def f(x):
        return _compiled_sin1(x * 2) * 2

    cnt = check(f, torch.randn(3), graphs=1)
    assert (cnt.frame_count, cnt.op_count) == (1, 4)


def test_torch_compiled_function_made_in_traced_code_escapes():
    def f(x):
        h = torch.compile(_sin1, backend="eager")
        return h, x + 1

    h, _ = dynamo_lite.compile(f, backend="eager")(torch.ones(2))
    assert hasattr(h, "_torchdynamo_orig_callable")
    assert_same(h(torch.ones(2)), _sin1(torch.ones(2)))


def test_nested_compile_under_aot_eager():
    def f(x):
        return torch.compile(_sin1, backend="aot_eager")(x).sum()

    cnt = CompileCounter(lookup_backend("aot_eager")[0])
    out = dynamo_lite.compile(f, backend=cnt)(torch.ones(3))
    assert_same(out, f(torch.ones(3)))
    assert cnt.frame_count == 1


def test_torch_compiled_module_called_from_compiled_code_is_traced_into_the_graph(monkeypatch):
    # TorchDynamo warns at each guard it builds on CPython 3.13.0 (its dict-version bug): eager
    # would show warnings that the compiled run, which traces the module instead, does not
    if hasattr(torch._dynamo.config, "issue_3_13_0_warning"):
        monkeypatch.setattr(torch._dynamo.config, "issue_3_13_0_warning", False)
    torch.manual_seed(0)
    inner = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU())
    compiled_inner = torch.compile(inner, backend="eager")

    def f(x):
        return compiled_inner(x * 2) + compiled_inner._orig_mod[0].bias.sum(), compiled_inner.training

    cnt = check(f, torch.randn(2, 3), graphs=1)  # TorchDynamo: one graph too
    assert cnt.frame_count == 1
    check_breaks(f, torch.randn(2, 3), breaks=0)
