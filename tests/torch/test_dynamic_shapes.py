"""Dynamic shapes: automatic dynamic, dynamic=True/False, the marks, symbolic ints, shape guards.

Every case runs differentially against eager over many sizes (0, 1, sizes seen only after
the symbolic compile) through the harness, and counts graphs.
"""
import logging
import math
import random

import pytest
import torch
from torch import nn
from torch.nn import functional as F

import dynamo_lite
from dynamo_lite import config
from dynamo_lite import graph_breaks as gb
from dynamo_lite.backends import lookup_backend
from dynamo_lite.exc import Unsupported
from dynamo_lite.report import events
from dynamo_lite.testing import CompileCounter, assert_same, check_calls, recording


@pytest.fixture(autouse=True)
def _fresh():
    dynamo_lite.reset()
    yield
    dynamo_lite.reset()


def mlp(x, w1, w2):
    return torch.relu(x @ w1) @ w2


W1, W2 = torch.randn(6, 8), torch.randn(8, 3)


def _mlp_calls(sizes):
    return [(torch.randn(b, 6), W1, W2) for b in sizes]


# ---- automatic dynamic -------------------------------------------------------------
def test_batch_sizes_in_order_compile_two_graphs():
    sizes = list(range(1, 41))
    cnt = check_calls(mlp, _mlp_calls(sizes), hits=range(2, 40))
    assert cnt.frame_count == 2  # batch 1 (static), then one symbolic graph for 2..40


def test_shuffled_sizes_with_zero_and_one_and_new_sizes_after_the_symbolic_compile():
    sizes = [5, 3, 9, 1, 0, 17, 2, 64, 1, 0, 33, 4]
    cnt = check_calls(mlp, _mlp_calls(sizes), hits=[2, 5, 6, 7, 8, 9, 10, 11])
    # 5 static, 3 -> symbolic (>= 2), 1 and 0 specialised
    assert cnt.frame_count == 4


def test_dynamic_true_is_symbolic_from_the_first_compile():
    cnt = check_calls(mlp, _mlp_calls([7, 2, 30, 5, 1, 3]), hits=[1, 2, 3, 5], dynamic=True)
    assert cnt.frame_count == 2  # symbolic, then size 1
    # (after compile, node metadata keeps a symbolic size as its text)
    x_meta = next(n.meta["example_value"] for n in cnt.graphs[0].graph.nodes if n.op == "placeholder")
    assert all(isinstance(s, str) for s in x_meta.shape)  # every dimension


def test_dynamic_false_compiles_every_size():
    cnt = check_calls(mlp, _mlp_calls([2, 3, 4, 5]), dynamic=False)
    assert cnt.frame_count == 4


def test_changed_dimension_only_becomes_symbolic():
    def f(x):
        return x.sum(0) * x.shape[1]

    cnt = check_calls(f, [torch.randn(3, 4), torch.randn(5, 4), torch.randn(9, 4), torch.randn(6, 5)],
                      hits=[2])
    assert cnt.frame_count == 3  # dim 1 changes last: a second symbolic compile


def test_sizes_used_in_reshape_arithmetic():
    def f(x):
        b, t, d = x.shape
        y = x.reshape(b * t, d).relu()
        z = y.view(b, t // 2, 2 * d) if t % 2 == 0 else y.view(b, t, d)
        return z.sum(-1) + b - t, z.shape[0] * z.shape[1]

    calls = [torch.randn(b, t, 3) for b, t in [(2, 4), (3, 6), (5, 8), (4, 5), (7, 3), (1, 4), (6, 10)]]
    cnt = check_calls(f, calls)
    assert cnt.frame_count <= 5


def _pad_to_multiple(x, multiple):
    # local-attention's pad_to_multiple: F.pad by an amount computed from a symbolic size
    n = x.shape[1]
    remainder = math.ceil(n / multiple) * multiple - n
    return F.pad(x, (0, 0, 0, remainder), value=0)


def test_pad_by_an_amount_computed_from_a_symbolic_size_stays_in_the_graph():
    # constant_pad_nd takes symbolic pads only through its Python decomposition (torch.compile
    # runs fake ops under the Python dispatcher too): without it, every size broke with DL0010
    calls = [(torch.randn(2, n, 3), 4) for n in (5, 6, 7, 9, 12)]
    check_calls(_pad_to_multiple, calls, dynamic=True)
    seen, collecting = recording()
    with collecting:
        dynamo_lite.reset()
        dynamo_lite.compile(_pad_to_multiple, backend="eager", dynamic=True)(torch.randn(2, 5, 3), 4)
    assert not [e for e in seen if isinstance(e, events.GraphBreakEvent)], seen


def test_attention_block_over_batch_and_sequence():
    torch.manual_seed(0)
    block = nn.MultiheadAttention(16, 4, batch_first=True)

    def f(x):
        b, t, _ = x.shape
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), 1)
        out, _ = block(x, x, x, attn_mask=mask, need_weights=False)
        return out.reshape(b * t, -1).mean(0)

    shapes = [(2, 5), (3, 7), (4, 9), (2, 12), (5, 3), (3, 4)]
    cnt = check_calls(f, [torch.randn(b, t, 16) for b, t in shapes], hits=[3, 4, 5])
    assert cnt.frame_count <= 3


def test_module_forward_serves_every_batch():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.LayerNorm(16), nn.Linear(16, 2))
    cnt = CompileCounter()
    compiled = dynamo_lite.compile(model, backend=cnt)
    for b in list(range(1, 20)) + [40, 3, 1]:
        x = torch.randn(b, 6)
        assert_same(compiled(x), model(x))
    assert cnt.frame_count == 2


# ---- the marks ------------------------------------------------------------------------
def test_mark_dynamic_is_symbolic_from_the_first_compile():
    def f(x):
        return (x * 2 + 1).sum(1)

    cnt = CompileCounter()
    g = dynamo_lite.compile(f, backend=cnt)
    for b in [4, 7, 2, 30]:
        x = torch.randn(b, 6)
        dynamo_lite.mark_dynamic(x, 0)
        assert_same(g(x), f(x))
    assert cnt.frame_count == 1


def test_mark_dynamic_size_one_that_the_ops_specialise_is_refused():
    # a marked size 1 stays symbolic, but elementwise ops decide broadcasting on it
    def f(x):
        return (x * 2 + 1).sum(1)

    x = torch.randn(1, 6)
    dynamo_lite.mark_dynamic(x, 0)
    with pytest.raises(Unsupported, match=r"x\.size\(0\) was marked dynamic .* constant 1"):
        dynamo_lite.compile(f, backend="eager")(x)


def test_mark_dynamic_range_is_guarded():
    x = torch.randn(4, 6)
    dynamo_lite.mark_dynamic(x, 0, min=2, max=8)
    out = dynamo_lite.explain(mlp)(x, W1, W2)  # (explain() starts from reset())
    assert "x.size(0) >= 2 and x.size(0) <= 8" in out.guards[0]
    cnt = CompileCounter()
    f = dynamo_lite.compile(mlp, backend=cnt)
    assert_same(f(x, W1, W2), mlp(x, W1, W2))
    y = torch.randn(9, 6)  # not marked, outside the range: the entry does not serve it
    seen, collecting = recording()
    with collecting:
        assert_same(f(y, W1, W2), mlp(y, W1, W2))
    reasons = [r for e in seen if isinstance(e, events.RecompileEvent) for r in e.reasons]
    assert any("x.size(0) = 9 but the graph needs x.size(0) >= 2 and x.size(0) <= 8" in r for r in reasons), reasons


def test_mark_dynamic_outside_its_range_raises():
    x = torch.randn(10, 6)
    dynamo_lite.mark_dynamic(x, 0, max=8)
    with pytest.raises(Unsupported, match="outside the range"):
        dynamo_lite.compile(mlp, backend="eager")(x, W1, W2)


def test_mark_dynamic_dimension_made_constant_names_the_line():
    scale = [0.5, 1.5, 2.5, 3.5, 4.5]

    def f(x):
        total = x.sum(0)
        w = scale[x.shape[0]]  # a list index needs a plain int: specialises x.size(0)
        return total * w

    x = torch.randn(4, 3)
    dynamo_lite.mark_dynamic(x, 0)
    with pytest.raises(Unsupported, match=r"x\.size\(0\) was marked dynamic .* made it the constant 4 at "
                                          r"test_dynamic_shapes\.py:\d+ in f: w = scale"):
        dynamo_lite.compile(f, backend="eager")(x)


def test_maybe_mark_dynamic_may_specialise():
    def f(x):
        return x * x.shape[0]

    cnt = CompileCounter()
    g = dynamo_lite.compile(f, backend=cnt)
    for b in [3, 5, 8]:
        x = torch.randn(b, 2)
        dynamo_lite.maybe_mark_dynamic(x, 0)
        assert_same(g(x), f(x))
    assert cnt.frame_count == 1


def test_mark_static_keeps_a_dimension_static_under_dynamic_true():
    cnt = CompileCounter()
    f = dynamo_lite.compile(mlp, backend=cnt, dynamic=True)
    for b in [3, 4, 5]:
        x = torch.randn(b, 6)
        dynamo_lite.mark_static(x, 0)
        assert_same(f(x, W1, W2), mlp(x, W1, W2))
    assert cnt.frame_count == 3


def test_mark_static_on_a_module_class():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(6, 2)

        def forward(self, x):
            return self.fc(x).relu()

    dynamo_lite.mark_static(Net)
    torch.manual_seed(0)
    net = Net()
    cnt = CompileCounter()
    compiled = dynamo_lite.compile(net, backend=cnt, dynamic=True)
    for b in [2, 3, 4]:
        x = torch.randn(b, 6)
        assert_same(compiled(x), net(x))
    assert cnt.frame_count == 3


def test_marks_reject_bad_arguments():
    with pytest.raises(IndexError):
        dynamo_lite.mark_dynamic(torch.randn(2), 1)
    with pytest.raises(TypeError):
        dynamo_lite.mark_dynamic([1, 2], 0)


# ---- symbolic ints -----------------------------------------------------------------
def test_int_argument_one_to_twenty_compiles_two_graphs():
    def f(x, n):
        return x * n + n // 3

    cnt = check_calls(f, [(torch.randn(3), n) for n in range(1, 21)], hits=range(2, 20))
    assert cnt.frame_count == 2
    placeholders = [n for n in cnt.graphs[1].graph.nodes if n.op == "placeholder"]
    assert [n.name for n in placeholders] == ["x", "n"]


def test_int_in_a_closure_cell_changing_between_calls_compiles_two_graphs():
    # a function made anew around each value (the same code): automatic dynamic, as torch.compile
    def make(n):
        def f(x):
            return x * n + n // 3, x.new_zeros(n).sum()
        return f

    cnt = CompileCounter()
    for n in range(2, 9):
        f = make(n)
        x = torch.randn(3)
        assert_same(dynamo_lite.compile(f, backend=cnt)(x), f(x))
    assert cnt.frame_count == 2
    assert len([n for n in cnt.graphs[1].graph.nodes if n.op == "placeholder"]) == 2  # x and the cell's int


def test_symbolic_int_in_shapes_factories_and_comparisons():
    def f(x, n):
        y = x.view(n, -1) + torch.ones(n, 1)
        z = torch.arange(n * 2).float().sum()
        if n > 4:  # a guard on the branch taken, not a break
            y = y * 2
        return y, z, n * 3 - 1, n % 4 == 1

    calls = [(torch.randn(n * 6), n) for n in [2, 3, 5, 6, 7, 3, 9, 2]]
    cnt = check_calls(f, calls, hits=[3, 4, 5, 6, 7])
    assert cnt.frame_count == 3  # n=2 static; then n <= 4 and n > 4


def test_int_float_and_indexing_of_a_symbolic_int_keep_working():
    table = [10, 20, 30, 40, 50, 60]

    def f(x, n):
        return x + float(n) / 2 + int(n) + table[n] + len(range(n))

    cnt = check_calls(f, [(torch.zeros(2), n) for n in [1, 2, 3, 4, 5]])
    assert cnt.frame_count >= 2


def test_range_of_a_symbolic_int_specialises_with_correct_results():
    def f(x, n):
        for i in range(n):
            x = x + i
        return x

    check_calls(f, [(torch.zeros(2), n) for n in [1, 2, 3, 4, 0]])


# ---- range() over a symbolic int -----------------------------------------------------
# n = 1..8, then 0, 1 and values seen only after the symbolic compile
_LOOP_NS = [1, 2, 3, 4, 5, 6, 7, 8, 0, 1, 12, 2, 30, -2]


def range_loop(x, n):
    for i in range(n):
        x = x + i
        dynamo_lite.graph_break()  # each later iteration runs the body as a loop-body function
    return x


def test_range_loop_with_a_break_keeps_one_body_graph_for_every_n():
    cnt = check_calls(range_loop, [(torch.zeros(3), n) for n in _LOOP_NS], hits=range(4, len(_LOOP_NS) - 1))
    # the frame: n == 1 (one iteration in the graph), then symbolic n: every iteration is a
    # call of the body (0 < n is not known for every n), which compiles for i == 0, then for a
    # symbolic i (an int argument, not a size: 1 does not stay specialised, as in torch.compile)
    assert cnt.frame_count == 3, cnt.frame_count
    # entries of the frame: n == 1 and symbolic n (n = 0 and n = -2 too: the native loop runs no body)
    assert len(dynamo_lite.cache.entries(range_loop.__code__)) == 2


def test_range_loop_dynamic_true_compiles_each_frame_once():
    cnt = check_calls(range_loop, [(torch.zeros(3), n) for n in [3, 5, 2, 9, 4, 12]], dynamic=True,
                      hits=range(1, 6))
    # the frame once (symbolic n, no tensor work before the loop: no graph); the body once, for a
    # symbolic i (ints are not sizes: 0 and 1 are symbolic too)
    assert cnt.frame_count == 1


def test_range_loop_body_reading_n_and_an_int_accumulator_stays_symbolic():
    def f(x, n):
        acc = 0
        for i in range(2, n, 2):  # a symbolic stop with a start and a step
            x = x * 2 + i + n  # the body reads n: an int local handed to it, symbolic after a change
            acc += i
            dynamo_lite.graph_break()
        return x, acc

    calls = [(torch.ones(3), n) for n in [3, 4, 7, 5, 12, 0, 1, 9, 2, 15]]
    cnt = check_calls(f, calls, hits=[7, 9])
    assert cnt.frame_count <= 6, cnt.frame_count


def test_range_loop_with_a_symbolic_start_and_a_negative_step():
    def count_down(x, n):
        for i in range(n, 0, -1):
            x = x * i
            dynamo_lite.graph_break()
        return x

    def from_n(x, n):
        seen = []
        for i in range(n, 3 * n, 3):  # items n, n + 3, ...: symbolic
            seen.append(i)
            x = x + i
            dynamo_lite.graph_break()
        return x, seen

    ns = [2, 3, 5, 0, 1, 7, -1, 4]
    check_calls(count_down, [(torch.ones(2), n) for n in ns])
    check_calls(from_n, [(torch.ones(2), n) for n in ns])


def test_range_iterator_of_a_symbolic_int_outlives_the_graph():
    def f(x, n):
        it = iter(range(1, n))
        first = next(it)
        dynamo_lite.graph_break()
        return x + first, list(it), type(it).__name__

    check_calls(f, [(torch.zeros(2), n) for n in [3, 4, 6, 2, 9, 1]])  # n = 1: StopIteration, as eager


def test_range_of_a_symbolic_int_used_as_a_value_specialises():
    def f(x, n):
        r = range(n)
        return x + len(r), list(reversed(r)), 3 in r, r[-1] if n > 0 else None, r.stop, bool(r)

    check_calls(f, [(torch.zeros(2), n) for n in [2, 3, 5, 0, 1, 7]])


def unrolled(x, n):
    for i in range(n):
        x = x * 2 + i
    return x.sum(), x


def test_range_loop_without_a_break_becomes_a_loop_body_for_symbolic_n():
    # unrolled in one graph, the graph would be for one n (torch.compile recompiles per n):
    # once n is symbolic, the graph ends at the loop (DL0041) and the body is a function
    cnt = check_calls(unrolled, [(torch.ones(3), n) for n in _LOOP_NS], hits=range(5, len(_LOOP_NS)))
    assert cnt.frame_count <= 5, cnt.frame_count  # n == 1, n == 2; the body: i == 0, i == 1, symbolic i
    seen, collecting = recording()
    with collecting:
        dynamo_lite.reset()
        dynamo_lite.compile(unrolled, backend="eager", dynamic=True)(torch.ones(3), 5)
    breaks = [e for e in seen if isinstance(e, events.GraphBreakEvent)]
    assert [b.break_id for b in breaks] == [gb.SYMBOLIC_RANGE_LOOP], breaks
    assert "range(n)" in breaks[0].user_stack[-1].line


def test_range_loop_without_a_break_unrolls_per_value_with_dynamic_false():
    cnt = check_calls(unrolled, [(torch.ones(3), n) for n in [2, 3, 4, 3]], dynamic=False, hits=[3])
    assert cnt.frame_count == 3


def _add_up_to(x, n):
    for i in range(n):
        x = x + i
    return x


def test_range_loop_in_an_inlined_call_is_unrolled_per_n():
    def f(x, n):
        return _add_up_to(x * 2, n) + n  # inlined: its loop is unrolled (n == value), no break

    cnt = check_calls(f, [(torch.zeros(2), n) for n in [2, 3, 4, 0, 1, 3]], hits=[5])
    assert cnt.frame_count == 5


def test_range_loop_that_cannot_be_a_function_specialises_n():
    # a loop inside a with block stays in its frame (its body cannot be a function): unrolled for
    # one n, guarded n == value on the loop's line
    def f(x, n):
        with torch.no_grad():
            for i in range(n):
                x = x + i
        return x

    g = dynamo_lite.compile(f, backend="eager")
    seen, collecting = recording()
    with collecting:
        for n in [2, 3, 4, 3]:
            assert_same(g(torch.zeros(2), n), f(torch.zeros(2), n))
    graphs = [e for e in seen if isinstance(e, events.GraphEvent)]
    assert len(graphs) == 3
    assert any("n == 4" in line and "for i in range(n)" in line for line in graphs[2].guards), graphs[2].guards


# ---- shape guards --------------------------------------------------------------------
def test_relation_between_inputs_is_guarded():
    def f(x, y):
        return torch.cat([x, y], 1).view(x.shape[0], 2, -1)

    calls = [(torch.randn(2, 4), torch.randn(2, 4)), (torch.randn(3, 4), torch.randn(3, 6)),
             (torch.randn(5, 3), torch.randn(5, 5)), (torch.randn(4, 3), torch.randn(4, 4)),  # odd: raises
             (torch.randn(4, 3), torch.randn(5, 4))]  # batch sizes differ: raises
    check_calls(f, calls)


def test_explain_and_recompile_reasons_name_the_shape_guard():
    def f(x):
        return x.view(-1, 2).sum(1)

    g = dynamo_lite.compile(f, backend="eager")
    seen, collecting = recording()
    with collecting:
        for b in [4, 6, 8, 1, 2]:
            g(torch.randn(b, 4))
    graphs = [e for e in seen if isinstance(e, events.GraphEvent)]
    text = "\n".join(graphs[1].guards)
    assert "x.size(0) >= 2" in text and "x.stride(0) == 4" not in text
    reasons = [r for e in seen if isinstance(e, events.RecompileEvent) for r in e.reasons]
    assert "x.size(0) = 1 but the graph needs x.size(0) >= 2" in reasons


def test_c_program_checks_shape_guards_without_python():
    def f(x, y, n):
        return torch.cat([x, y]).view(-1, 2) * n

    g = dynamo_lite.compile(f, backend="eager", dynamic=True)
    g(torch.randn(4, 6), torch.randn(4, 6), 3)
    (entry,) = dynamo_lite.cache.entries(f.__code__)
    ops = {op[0] for op in entry.guard.fn.ops}
    assert {"LOAD_SIZE", "CHECK_INT_RANGE", "CHECK_INT_EQ", "CHECK_INT_EXPR"} <= ops
    assert entry.guard.residual_source is None
    for args in [(torch.randn(4, 6), torch.randn(4, 6), 3), (torch.randn(5, 6), torch.randn(5, 6), 7),
                 (torch.randn(4, 6), torch.randn(5, 6), 3), (torch.randn(1, 6), torch.randn(1, 6), 3),
                 (torch.randn(4, 5), torch.randn(4, 6), 3), (torch.randn(4, 6), torch.randn(4, 6), 1),
                 (torch.randn(4, 6).t(), torch.randn(6, 4).t(), 3)]:
        c = entry.guard.fn(*args, f.__globals__, f)
        py = entry.guard.py_fn(*args, f.__globals__, f)
        assert c is py, (args, c, py)


def test_cache_limit_warning_says_what_kept_changing(caplog):
    import logging

    def f(x, n):
        return x * [1, 2, 3, 4, 5, 6, 7, 8][n]  # a list index: every value of n is an entry

    g = dynamo_lite.compile(f, backend="eager")
    with config.patch(cache_size_limit=3), caplog.at_level(logging.WARNING, logger="dynamo_lite"):
        for n in range(2, 8):
            assert_same(g(torch.zeros(2), n), f(torch.zeros(2), n))
    text = " ".join(r.getMessage() for r in caplog.records if "cache_size_limit" in r.getMessage())
    assert "Inputs that kept changing: n" in text
    # symbolic n was tried: the warning names the line that makes it a constant again
    assert "the code makes n a constant at test_dynamic_shapes.py:" in text and "[n]" in text


def test_cache_limit_warning_suggests_marks_for_sizes_that_kept_changing(caplog):
    import logging

    g = dynamo_lite.compile(mlp, backend="eager", dynamic=False)
    with config.patch(cache_size_limit=3), caplog.at_level(logging.WARNING, logger="dynamo_lite"):
        for b in range(2, 8):
            x = torch.randn(b, 6)
            assert_same(g(x, W1, W2), mlp(x, W1, W2))
    text = " ".join(r.getMessage() for r in caplog.records if "cache_size_limit" in r.getMessage())
    assert "Inputs that kept changing: x" in text and "mark_dynamic" in text and "dynamic=True" in text


# ---- backends -------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["aot_eager", "inductor"])
def test_backend_compiles_once_and_serves_every_size(name):
    def f(x, n):
        return torch.nn.functional.gelu(x @ W1).sum(-1) * n + x.shape[0]

    cnt = CompileCounter(lookup_backend(name)[0])
    calls = [(torch.randn(b, 6), n) for b, n in [(2, 1), (3, 2), (5, 3), (17, 4), (8, 9)]]
    check_calls(f, calls, backend=cnt, warnings=False, hits=[2, 3, 4])
    assert cnt.frame_count == 2


def test_shuffled_sizes_random_order_match_eager():
    rng = random.Random(0)
    sizes = list(range(0, 24))
    rng.shuffle(sizes)

    def f(x):
        h = x.unsqueeze(1).expand(-1, 3, -1).reshape(x.shape[0], -1)
        return h.softmax(-1).sum(0), h.shape

    check_calls(f, [torch.randn(b, 4) for b in sizes])


def test_past_the_cache_limit_callees_are_not_compiled_one_by_one():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 2))
    cnt = CompileCounter()
    compiled = dynamo_lite.compile(model, backend=cnt, dynamic=False)  # static: every batch is an entry
    with config.patch(cache_size_limit=4):
        for b in range(1, 20):
            x = torch.randn(b, 6)
            assert_same(compiled(x), model(x))
    assert cnt.frame_count == 4  # not 4 + one per submodule forward per later size


def test_slices_and_shape_tuples_with_symbolic_ints_stay_symbolic():
    table = torch.arange(64.0).view(1, 64)

    def f(x, start):
        b, t = x.shape
        pos = table[:, start: start + t]  # a slice of symbolic bounds (not a constant)
        shape = (-1,) + x.shape[1:] + (1,)  # tuple arithmetic keeps the symbolic size
        return (x + pos).view(shape), x[:, : t // 2]

    calls = [(torch.randn(2, t), s) for t, s in [(3, 1), (5, 2), (7, 4), (9, 3), (4, 6), (11, 0)]]
    cnt = check_calls(f, calls, hits=[2, 3, 4])
    assert cnt.frame_count <= 3


def test_view_of_a_marked_tensor_before_the_tensor():
    # the fake mode makes a view's base first and keeps it: made with the base's mark_dynamic
    # dimensions symbolic, the tensor read later is symbolic there too (one graph for every size)
    def f(v, x):
        return v + x.sum(0)

    def make(n):
        def args():
            x = torch.randn(n, 3)
            dynamo_lite.mark_dynamic(x, 0)
            return (x[0], x)
        return args

    cnt = check_calls(f, [make(4), make(5), make(7)], hits=(1, 2))
    assert cnt.frame_count == 1


def test_view_of_a_marked_tensor_with_a_size_of_its_own_recompiles_on_that_size():
    # the view's own shape stays static (guarded): a new length of x[:, 1] recompiles
    def f(v, x):
        return v.sum() + x.sum()

    def make(n):
        def args():
            x = torch.randn(n, 3)
            dynamo_lite.mark_dynamic(x, 0)
            return (x[:, 1], x)
        return args

    check_calls(f, [make(4), make(4), make(5)], hits=(1,), graphs=None)


def test_view_of_a_marked_tensor_handed_to_a_loop_body_before_the_tensor():
    from dynamo_lite.testing import print_with_graph_break

    def f(x):
        v = x[0]
        acc = v * 0
        for _ in range(3):
            print_with_graph_break("step")  # the loop body becomes a function of (acc, v, x)
            acc = acc + v + x.sum(0)
        return acc

    def make(n):
        def args():
            x = torch.randn(n, 3)
            dynamo_lite.mark_dynamic(x, 0)
            return (x,)
        return args

    check_calls(f, [make(4), make(5), make(7)], hits=(1, 2), graphs=None)


def test_view_of_a_marked_tensor_whose_base_is_not_an_input():
    def f(v, y):
        return v * 2 + y

    def make(n):
        def args():
            x = torch.randn(n, 3)
            dynamo_lite.mark_dynamic(x, 0)
            return (x[1], torch.ones(3))
        return args

    check_calls(f, [make(4), make(5), make(7)], hits=(1, 2))


@pytest.mark.parametrize("expr", ["str(a)", "a * b", "a // b", "(a * b) % 7", "a << b", "a > b"])
def test_int_arguments_beyond_64_bits_after_they_became_dynamic(expr):
    # the int arguments turn symbolic on the second call; then ints no C guard op can hold
    ns = {}
    exec(f"def f(x, a, b):\n    return x + 1, {expr}", ns)
    check_calls(ns["f"], [(torch.ones(1), a, b) for a, b in [(7, 2), (9, 4), (2**64, 3), (-2**70, 5), (3, 2**65)]],
                graphs=None)


_FLOAT_CASES = {
    "scale": lambda x, s: x * s + (s * 3 - 1) / 2,
    "clamp_and_lerp": lambda x, s: x.clamp(min=s) + torch.lerp(x, x * 2, s / 10),
    "branch": lambda x, s: x * 2 if s > 1 else x - 1,
    "formatted": lambda x, s: (x + 1, str(s), f"{s:.2f}", s < 2.0),
    "math_and_int": lambda x, s: x * math.sqrt(s) + math.floor(s) + int(s),
    "tensor_of_it": lambda x, s: torch.tensor(s) + torch.full((2,), s) + x,
    "divide_by_zero": lambda x, s: x / (s - s),
}


@pytest.mark.parametrize("name", sorted(_FLOAT_CASES))
def test_float_arguments_that_change_between_calls(name):
    # a float that changed becomes a symbolic input (torch.compile's automatic dynamic floats);
    # any fact about it (a branch, str(), int(), an op that needs its value) traces it static
    # again; special values (nan, inf, -0.0) and an int in its place stay exact
    values = [0.5, 1.5, 2.5, 3.5, 1.5, -0.0, float("nan"), float("inf"), 2, 7.25]
    check_calls(_FLOAT_CASES[name], [(torch.tensor([1.0, 2.0]), v) for v in values], graphs=None)


_FLOAT_BRANCHES = {
    # comparisons of the float arguments themselves: guarded on the relation, not the values
    "interval": lambda x, a, b: x * (b - a) if a < b else (x * 0 if a == b else x - 1),
    "clip": lambda x, a, b: x + (1.0 if a > 1.0 else a) + (b if b <= 2 else 2.0),
    # a float computed from them: guarded by the same Python arithmetic (sympy would guard
    # `b > 0` for `(a + b) - a > 0`, which is 0 for a = 1e20, b = 1 in Python)
    "computed": lambda x, a, b: x + 1 if (a + b) - a > 0.0 else x - 1,
    "midpoint": lambda x, a, b: x * 2 if (a + b) / 2 < b else x * 3,
}


@pytest.mark.parametrize("name", sorted(_FLOAT_BRANCHES))
def test_branches_on_float_arguments_that_change_between_calls(name):
    # torchsde's BrownianInterval.__call__(ta, tb): `if ta > tb`, `if ta == tb`, `if tb > self._end`
    # recompiled on every new time (1,308 recompiles in its suite; torch.compile: 0)
    values = [(0.0, 0.5), (0.1, 0.6), (0.6, 0.1), (0.3, 0.3), (1e20, 1.0), (-0.0, 0.0), (float("nan"), 1.0),
              (2.5, float("inf")), (1, 2), (0.25, 3.0)]
    check_calls(_FLOAT_BRANCHES[name], [(torch.tensor([1.0, 2.0]), a, b) for a, b in values], graphs=None)


def test_a_branch_on_float_arguments_compiles_two_graphs_and_names_the_relation():
    from dynamo_lite.report import events
    cnt = CompileCounter()

    def f(x, a, b):
        if a > b:
            return x - 1
        return x * (b - a)

    opt = dynamo_lite.compile(f, backend=cnt)
    recorded = []
    with events.collecting(recorded.append):
        for a, b in [(0.0, 0.5), (0.1, 0.6), (0.2, 0.9), (0.4, 0.45), (0.9, 0.2)]:
            assert_same(opt(torch.ones(2), a, b), f(torch.ones(2), a, b))
    assert cnt.frame_count == 3  # the first values, then symbolic ones, then the other branch
    reasons = [r for e in recorded if isinstance(e, events.RecompileEvent) for r in e.reasons]
    assert reasons[0].startswith("a changed from 0.0 to 0.1")
    assert "a = 0.9, b = 0.2 but the graph needs a <= b" in reasons[1]


def test_a_branch_on_floats_computed_from_float_arguments_is_guarded_as_python_computes_them():
    # torchsde's interval tree compares midpoints and step ends computed from the query times:
    # each such branch traced static, one compile per new time until the cache limit.  The guard
    # now repeats the traced code's arithmetic in Python, so rounding decides it as in eager
    # (a * 3 > 0.9 is False for a = 0.3: 0.8999999999999999)
    from dynamo_lite.report import events
    cnt = CompileCounter()

    def f(x, a, b):
        if (a + b) / 2 < 0.5:
            return x * 2
        if a * 3 > 0.9:
            return x + 1
        return x - 1

    opt = dynamo_lite.compile(f, backend=cnt)
    recorded = []
    values = [(0.1, 0.3), (0.2, 0.4), (0.15, 0.35), (0.05, 0.2), (0.3, 0.9), (0.4, 1.2), (0.7, 1.1), (0.3, 0.8)]
    with events.collecting(recorded.append):
        for a, b in values:
            assert_same(opt(torch.ones(2), a, b), f(torch.ones(2), a, b))
    # the first values; symbolic ones; the second branch not taken (0.3), then taken (0.4)
    assert cnt.frame_count == 4
    reasons = [r for e in recorded if isinstance(e, events.RecompileEvent) for r in e.reasons]
    assert any("the graph needs ((a + b) / 2) < 0.5" in r for r in reasons), reasons
    assert any("the graph needs not ((a * 3) > 0.9)" in r for r in reasons), reasons


def test_a_refused_float_fact_keeps_int_arguments_symbolic():
    # a fact about a float argument no guard can state (abs() of it) traces the frame again with
    # static inputs; the retry made the ints static too, so an int that changes on every call
    # (torchsde's cache size beside its query times) compiled once per value until the limit
    cnt = CompileCounter()

    def f(x, ta, tb, n):
        if abs(tb - ta) > 0.1:
            x = x + 1
        return x * n

    opt = dynamo_lite.compile(f, backend=cnt)
    for i in range(2, 9):
        tb = 0.5 + (i % 2) * 0.03
        assert_same(opt(torch.ones(2), 0.5, tb, i), f(torch.ones(2), 0.5, tb, i))
    assert cnt.frame_count == 3  # static floats: one entry per tb; n symbolic from its change on


def test_float_arithmetic_sympy_folds_to_a_number_is_pythons():
    # bench/fuzz.py (seed 2027): f"{s * 0.0:.3f}" printed 0.000 for s = -1.5 on the entry where s
    # is symbolic: sympy folds s * 0.0 to 0, which Python computes as -0.0
    def f(x, s):
        print(f"{s * 0.0:.3f} {(s + 1e16) - s}")
        return x + 1, s * 0.0

    check_calls(f, [(torch.ones(2), v) for v in (0.5, 2.5, -1.5, 3.0, -7.25)], graphs=None, stderr=True)


def test_a_float_used_only_in_tensor_arithmetic_compiles_two_graphs():
    cnt = CompileCounter()
    opt = dynamo_lite.compile(lambda x, s: x * s + 1, backend=cnt)
    for s in (0.5, 1.5, 2.5, 3.5, 0.25):
        assert_same(opt(torch.ones(2), s), torch.ones(2) * s + 1)
    assert cnt.frame_count == 2  # as torch.compile: the first value, then a symbolic one


def test_symbolic_float_through_backward_and_inductor():
    def f(x, s):
        return (x * s).sum()

    check_calls(f, [lambda: (torch.ones(3, requires_grad=True), v) for v in (0.5, 1.5, 2.5)], backward=True,
                graphs=None)
    for backend in ("aot_eager", "inductor"):
        opt = dynamo_lite.compile(lambda x, s: torch.sin(x) * s, backend=backend)
        for v in (0.5, 1.5, 2.5):
            assert_same(opt(torch.ones(3), v), torch.sin(torch.ones(3)) * v)


_SCALE = 0.5


def test_numbers_that_change_between_calls_become_symbolic_as_in_torch_compile():
    # an int attribute of an argument, an item of a dict or list argument, an attribute of an
    # attribute, of a bound method's object, an int in a closure cell of a function argument, a
    # global float: two graphs for any number of values (torch.compile 2.13: the same)
    class Config:
        pass

    def attr(x, cfg):
        return x * cfg.k

    def closure(x, fn):
        return fn(x)

    def make(v):
        return lambda x: x * v

    def global_float(x):
        return x * _SCALE

    def set_scale(v):
        global _SCALE
        _SCALE = v

    def cfg_of(v):
        c = Config()
        c.k = v
        return c

    def dict_item(x, d):
        return x * d["a"]

    def list_item(x, sizes):
        return x.new_zeros(sizes[0]) + sizes[1]

    def nested(x, opts):
        return x * opts.inner.k

    def holder_of(v):
        outer = Config()
        outer.inner = cfg_of(v)
        return outer

    class Scaler:
        def __init__(self, k):
            self.k = k

        def apply(self, x):
            return x * self.k

    cases = [(attr, lambda v: (torch.ones(2), cfg_of(v)), [2, 3, 4, 5]),
             (dict_item, lambda v: (torch.ones(2), {"a": v}), [2, 3, 4, 5]),
             (list_item, lambda v: (torch.ones(2), [v, v + 1]), [2, 3, 4, 5]),
             (nested, lambda v: (torch.ones(2), holder_of(v)), [2, 3, 4, 5]),
             (closure, lambda v: (torch.ones(2), Scaler(v).apply), [2, 3, 4, 5]),
             (closure, lambda v: (torch.ones(2), make(v)), [2, 3, 4, 5]),
             (global_float, lambda v: (set_scale(v), (torch.ones(2),))[1], [0.5, 1.5, 2.5, 3.5])]
    try:
        for fn, args_of, values in cases:
            cnt = CompileCounter()
            opt = dynamo_lite.compile(fn, backend=cnt)
            for v in values:
                args = args_of(v)
                assert_same(opt(*args), fn(*args))
            assert cnt.frame_count == 2, fn.__name__
    finally:
        set_scale(0.5)


def test_modules_with_the_same_hooks_share_one_graph():
    def hook(mod, inputs, out):
        return out * 2

    def f(m, x):
        return m(x)

    cnt = CompileCounter()
    opt = dynamo_lite.compile(f, backend=cnt)
    for _ in range(4):
        m = nn.Linear(2, 2)
        m.register_forward_hook(lambda mod, i, o: o * 2)  # a new hook function, a new hook id
        assert_same(opt(m, torch.ones(2)), f(m, torch.ones(2)))
    assert cnt.frame_count == 1  # a module argument is guarded by its structure from the first compile
    m = nn.Linear(2, 2)
    m.register_forward_hook(hook)
    m.register_forward_hook(hook)  # one more hook: recompiles, and runs both
    assert_same(opt(m, torch.ones(2)), f(m, torch.ones(2)))


def test_iter_of_a_symbolic_int_raises_type_error_the_code_catches():
    # torchdiffeq's ``try: iter(tol) except TypeError``, with tol an int that changed between calls
    def f(x, n):
        try:
            iter(n)
        except TypeError as e:
            return x + n, str(e)
        return x

    seen = []
    with events.collecting(seen.append):
        check_calls(f, [(torch.ones(1), n) for n in (2, 3, 4, 1e-3, 5)], graphs=None)
    assert [e for e in seen if type(e).__name__ == "GraphBreakEvent"] == []


def test_a_long_chain_of_symbolic_additions_does_not_recurse():
    # e3nn's direct_sum: sum(x.size(-2) for x in matrices) over hundreds of matrices is a chain of
    # lazy additions, made into nodes when first used (was RecursionError, an internal error)
    def f(x, n):
        s = 0
        for _ in range(1200):
            s = s + n
        return x * s

    compiled = dynamo_lite.compile(f, backend="eager")
    for n in (3, 4, 5):  # n symbolic from the second call
        assert torch.equal(compiled(torch.ones(2), n), f(torch.ones(2), n))


def test_a_varying_float_in_python_arithmetic_logs_nothing():
    # sympy cannot take mod() of two float constants: torch logged "failed to eval mod(...)" at
    # WARNING while the trace tried it (eager logs nothing)
    def f(x, s):
        return x * s, str(s), s % 0.5

    records: list = []
    handler = logging.Handler(logging.DEBUG)
    handler.emit = records.append
    sym_log = logging.getLogger("torch.fx.experimental.sym_node")  # (torch's do not propagate)
    sym_log.addHandler(handler)
    try:
        check_calls(f, [(torch.ones(2), s) for s in (1.5, 2.5, 3.25)], graphs=None, interleave=False)
    finally:
        sym_log.removeHandler(handler)
    assert [r.getMessage() for r in records if r.levelno >= logging.WARNING] == []


def test_torch_check_stays_in_the_graph():
    # torch._check / torch._check_is_size: known at trace time (nothing to do), or asked of the
    # ShapeEnv (a guard on a size, a run-time check of a number read from tensor data), as in
    # torch.compile; they broke the graph before
    def f(x, n):
        torch._check(x.shape[0] > 1)
        torch._check(n > 0, lambda: "n must be positive")
        k = x.sum().to(torch.int64).item()
        torch._check_is_size(k)
        torch._check(k < 100)
        return x * n + k

    counter = check_calls(f, [(torch.ones(4), 2), (torch.ones(4), 3), (torch.ones(5), 4),
                              (-torch.ones(4), 2), (torch.full((4,), 30.0), 2)], graphs=None, interleave=False)
    assert counter.frame_count <= 3  # (static, then n symbolic, then the size)
    info = dynamo_lite.explain(f)(torch.ones(4), 2)
    assert info.graph_break_count == 0, info.break_reasons


_INT_USES = {
    "index": lambda x, n: x[n],
    "zeros": lambda x, n: torch.zeros(n) + n,
    "range": lambda x, n: sum((x * i for i in range(n)), torch.zeros(4, 5)),
    "truth": lambda x, n: x + 1 if n else x - 1,
    "repeat": lambda x, n: x.repeat(n, 1),
    "slice": lambda x, n: x[:n],
    "arange": lambda x, n: torch.arange(n),
    "unsqueeze": lambda x, n: x.unsqueeze(n),
    "sum_dim": lambda x, n: x.sum(n),
    "expand": lambda x, n: x[:1].expand(n + 1, 5),
    "divide": lambda x, n: x / n,
    "pow": lambda x, n: x ** n,
    "narrow": lambda x, n: x.narrow(0, n, 2),
    "chunk": lambda x, n: x.chunk(n + 1),
    "list_times": lambda x, n: [x] * n,
    "tuple_times": lambda x, n: (x, 1) * n + (n,),
    "tuple_item": lambda x, n: (x, x + 1, x + 2)[n],
    "compare": lambda x, n: (n == 0, n < 1, x),
    "int_ops": lambda x, n: (n + 1, -n, abs(n), n << 1, n & 1, str(n), float(n), x),
    "zero_division": lambda x, n: 10 // n,
    "negative_size": lambda x, n: torch.zeros(n - 1),
}


@pytest.mark.parametrize("name", sorted(_INT_USES))
def test_int_arguments_0_and_1_are_symbolic_once_the_argument_changed(name):
    # torch.compile's unspecialised ints: 0 and 1 are not sizes, so an int argument that changed
    # stays symbolic at 0 and 1 (a counter passing 0, 1, 2, 3 compiled three graphs, not two);
    # `[x] * n` with a symbolic n raised an internal error
    x = torch.randn(4, 5)
    for seq in ([0, 1, 2, 1, 0, 3], [2, 0, 1]):
        dynamo_lite.reset()
        check_calls(_INT_USES[name], [(x, n) for n in seq], graphs=None, interleave=False)


def test_an_int_argument_counting_from_0_compiles_two_graphs():
    counter = CompileCounter()
    fn = dynamo_lite.compile(lambda x, n: x * n + n, backend=counter)
    for n in range(6):
        assert torch.equal(fn(torch.ones(3), n), torch.ones(3) * n + n)
    assert counter.frame_count == 2


_VIEW_CASES = {
    "slice": (lambda x: (x * 2).sum(-1), lambda n: (torch.arange(80.).reshape(4, 20)[:, :n],)),
    "offset": (lambda x: x.cumsum(0), lambda n: (torch.arange(40.)[n:2 * n],)),
    "transposed": (lambda x: x @ x.T, lambda n: (torch.arange(60.).reshape(20, 3)[:n].t(),)),
    "written_in_place": (lambda x: x.add_(1).sum(), lambda n: (torch.zeros(4, 20)[:, :n],)),
    "two_views": (lambda a, b: a + b, lambda n: (lambda base: (base[:n], base[1:n + 1]))(torch.arange(30.))),
    "view_and_its_base": (lambda a, b: (a.mul_(2), b.sum()),
                          lambda n: (lambda base: (base[:n], base))(torch.arange(30.))),
    "stepped": (lambda x: x * 3, lambda n: (torch.arange(60.)[::2][:n],)),
    "expanded": (lambda x: x.sum(0), lambda n: (torch.arange(5.).expand(n, 5),)),
    "viewed_again": (lambda x: x.reshape(-1), lambda n: (torch.arange(80.).reshape(4, 20)[:, :n],)),
}


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("name", sorted(_VIEW_CASES))
def test_view_arguments_whose_sizes_change_become_dynamic(name, backend):
    # a slice of a larger tensor never became dynamic: one graph per size up to the cache limit,
    # then eager (torch.compile: two); a view beside its base, written in place, stays static
    fn, make = _VIEW_CASES[name]
    calls = [lambda n=n: make(n) for n in (3, 4, 5, 7, 2, 9)]
    counter = CompileCounter(lookup_backend(backend)[0])
    check_calls(fn, calls, graphs=None, interleave=False, backend=counter)
    assert counter.frame_count <= (6 if name == "view_and_its_base" else 2), counter.frame_count


class _GrowingCache(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.past = torch.zeros(1, 0, 4)

    def forward(self, x):
        self.past = torch.cat([self.past, self.lin(x)], dim=1)
        return self.past.sum(1)


class _Layer:
    def __init__(self, keys):
        self.keys = keys


class _Cache:
    def __init__(self, n):
        self.layers = [_Layer(torch.ones(1, n, 4))]


def test_tensors_reached_through_attributes_become_dynamic():
    # a module attribute growing by a token per call (a KV cache) and a tensor found in an argument
    # object's attributes (transformers' cache.layers[0].keys) recompiled at every size up to the cache
    # limit (HF generate(): one graph per new token); torch.compile: automatic dynamic
    m = _GrowingCache()
    counter = CompileCounter()
    compiled = dynamo_lite.compile(m, backend=counter)
    eager_m = _GrowingCache()
    eager_m.load_state_dict(m.state_dict())
    for step in range(8):
        x = torch.randn(1, 1, 4, generator=torch.Generator().manual_seed(step))
        assert_same(eager_m(x), compiled(x))
    assert_same(eager_m.past, m.past)
    assert counter.frame_count <= 3, counter.frame_count

    check_calls(lambda x, cache: x + cache.layers[0].keys.sum(1), [(torch.ones(4), _Cache(n)) for n in range(2, 9)],
                graphs=None)
    counter = CompileCounter()
    fn = dynamo_lite.compile(lambda x, cache: x + cache.layers[0].keys.sum(1), backend=counter)
    for n in range(2, 9):
        fn(torch.ones(4), _Cache(n))
    assert counter.frame_count == 2


def test_a_module_parameter_stays_static_when_modules_of_other_sizes_come():
    counter = CompileCounter()
    fn = dynamo_lite.compile(lambda m, x: m(x), backend=counter)
    for n in (2, 3, 4, 5):
        m = nn.Linear(n, 2)
        assert_same(fn(m, torch.ones(1, n)), m(torch.ones(1, n)))
    # the input x is dynamic after the change; the weight's shape is guarded as it is (torch.compile's
    # static parameters): one graph per module size
    assert counter.frame_count == 4


def test_an_index_or_text_of_a_symbolic_int_does_not_specialise_it():
    # x[n - 1] (n a size) and x[i] (i an int argument) specialised the int through Tensor.__getitem__,
    # and str(n) / str(f) made the text at trace time: one graph per size or value up to the cache
    # limit (torch.compile: two)
    def last_row(x):
        n = x.shape[0]
        return x[n - 1] * 2 + x[n // 2]

    def tagged(x):
        n = x.shape[0]
        return x * 2, "rows=" + str(n)

    def scaled(x, f):
        return x * f, "scale=" + str(f)

    def picked(x, i):
        return x[i] * 2

    cases = [(last_row, [(torch.randn(k, 2),) for k in (3, 5, 8, 12)]),
             (tagged, [(torch.randn(k),) for k in (3, 5, 8, 12)]),
             (scaled, [(torch.randn(3), v) for v in (1.5, 2.5, 3.25, 4.5)]),
             (picked, [(torch.arange(12.).reshape(6, 2), i) for i in (0, 1, 3, -1, -6, 5, 6, -7, 2)])]
    for fn, calls in cases:
        counter = CompileCounter()
        check_calls(fn, calls, graphs=None, interleave=False, backend=counter)
        # (picked: also the out-of-range indices, which raise: guarded apart)
        assert counter.frame_count <= (4 if fn is picked else 2), (fn.__name__, counter.frame_count)


def test_a_symbolic_shape_returned_printed_logged_or_formatted_does_not_specialise_it(caplog):
    # y.shape rebuilt as the constant torch.Size of the trace: every new size compiled again, up to
    # the cache limit (returned: 8 graphs for 8 sizes, an f-string: 15; torch.compile: 2)
    log = logging.getLogger("dynamic_shapes.shape_text")

    def returned(x):
        y = x * 2
        return y.relu(), y.shape, y.shape[1:]

    def printed(x):
        y = x * 2
        print("shape", y.shape)
        log.warning("shape %s", y.shape)
        return y.relu()

    def formatted(x):
        y = x * 2
        return y.relu(), f"shape {y.shape}", "rows " + str(y.shape[0])

    for fn, most in ((returned, 2), (printed, 2), (formatted, 2)):
        counter = CompileCounter()
        check_calls(fn, [(torch.randn(n, 2),) for n in range(3, 11)], graphs=None, backend=counter)
        assert counter.frame_count <= most, (fn.__name__, counter.frame_count)
