"""Data-dependent work kept in the graph (config.capture_scalar_outputs and
config.capture_dynamic_output_shape_ops, on by default): ``.item()``, ``int(t)`` /
``float(t)``, ``tolist()``, ``nonzero``, boolean masks, ``masked_select``, ``unique``,
``bincount`` are graph nodes with symbolic values; a use that needs the value in Python (a
branch, ``range()``, printing) breaks there.  Every case is compared with eager on several
inputs through one compiled function (the values change, nothing recompiles), and beside
torch.compile with the same two settings on."""
import pytest
import torch

import dynamo_lite
from dynamo_lite import config
from dynamo_lite.report import events
from dynamo_lite.report.explain import build_explain_output
from dynamo_lite.testing import CompileCounter, assert_same_as_eager, check_breaks, check_calls


def scale_by_sum(x):
    return x * x.sum().item()


def normalized_by_max(x):
    return x / x.abs().max().item() + 1


def shifted_by_int(x, idx):
    return x + int(idx[0]) * 2


def scaled_by_float(x):
    return x * float(x[0])


def nonzero_plus_one(x):
    return x.nonzero() + 1


def masked(x):
    return x[x > 0] * 2


def masked_select_sum(x):
    return torch.masked_select(x, x > 0).sum() + x.mean()


def unique_counts(x):
    values, counts = torch.unique(x.round(), return_counts=True)
    return values * 2, counts + 1


def bincount_of(x):
    return torch.bincount((x * 3).abs().long(), minlength=2) * 2


def tolist_doubled(x):
    return [v * 2 for v in x.tolist()]


def count_of_nonzero(x):
    return x + x.nonzero().shape[0]


def zeros_of_count(x):
    k = (x > 0).sum().item()
    return torch.zeros(k) + 1, x + k


def nonzero_as_tuple(x):
    rows, cols = torch.nonzero(x > 0, as_tuple=True)
    return rows * 2, cols + 1


def zero_the_positives(x):
    x = x.clone()
    x[x > 0] = 0
    return x


def repeated_by_counts(x, counts):
    return torch.repeat_interleave(x, counts)


def stats_in_a_dict(x):
    return {"argmax": x.abs().argmax().item(), "max": x.max().item(), "any": (x > 1).any().item()}


def nested_tolist(x):
    return x.long().tolist()


def prefix_of_count(x):
    n = (x > 0).sum().item()
    return x[:n] * 2


def pick_the_largest(x):
    return x[int(x.abs().argmax())] * 2


# (function, example-input makers) whose whole body is one graph
ONE_GRAPH = [
    (scale_by_sum, lambda i: (torch.randn(6) + i,)),
    (normalized_by_max, lambda i: (torch.randn(3, 4) * (i + 1),)),
    (shifted_by_int, lambda i: (torch.randn(5), torch.tensor([i, 7]))),
    (scaled_by_float, lambda i: (torch.randn(4) - i,)),
    (nonzero_plus_one, lambda i: (torch.randn(3, 5) > i - 1,)),
    (masked, lambda i: (torch.randn(8) + i - 1,)),
    (masked_select_sum, lambda i: (torch.randn(2, 6) + i,)),
    (unique_counts, lambda i: (torch.randn(10) * (i + 1),)),
    (bincount_of, lambda i: (torch.randn(7) * (i + 1),)),
    (tolist_doubled, lambda i: (torch.arange(4) * i,)),
    (count_of_nonzero, lambda i: (torch.randn(5) + i - 1,)),
    (zeros_of_count, lambda i: (torch.randn(6) + i - 1,)),
    (nonzero_as_tuple, lambda i: (torch.randn(3, 4) + i - 1,)),
    (zero_the_positives, lambda i: (torch.randn(7) - i,)),
    (repeated_by_counts, lambda i: (torch.arange(4.0), torch.tensor([1, i, 0, 2]))),
    (stats_in_a_dict, lambda i: (torch.randn(5) * (i + 1),)),
    (nested_tolist, lambda i: (torch.randn(2, 3) * 4 + i,)),
    (prefix_of_count, lambda i: (torch.randn(8) + i - 1,)),
    (pick_the_largest, lambda i: (torch.randn(3, 2) * (i + 1),)),
]


def _counts(fn, calls):
    """(graphs, breaks, frames compiled) of running ``calls`` through one compiled ``fn``."""
    cnt = CompileCounter()
    compiled = dynamo_lite.compile(fn, backend=cnt)
    recorded = []
    with events.collecting(recorded.append):
        for args in calls:
            compiled(*args)
    info = build_explain_output(recorded)
    return info.graph_count, info.graph_break_count, cnt.frame_count


@pytest.mark.parametrize("fn, make", ONE_GRAPH, ids=[f.__name__ for f, _ in ONE_GRAPH])
def test_one_graph_equal_to_eager_and_no_recompile_for_new_data(fn, make):
    calls = [make(i) for i in range(3)]
    check_calls(fn, calls)  # eager and one compiled function, call by call
    graphs, breaks, frames = _counts(fn, calls)
    assert (graphs, breaks, frames) == (1, 0, 1)  # new values need no new compile


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("fn, make", [ONE_GRAPH[0], ONE_GRAPH[5], ONE_GRAPH[7], ONE_GRAPH[11]],
                         ids=["scale_by_sum", "masked", "unique_counts", "zeros_of_count"])
def test_backends_that_trace_again_take_the_graph(fn, make, backend):
    for i in range(2):
        assert_same_as_eager(fn, *make(i), backend=backend)


def test_gradients_flow_through_the_graph_around_an_item():
    def f(w):
        return (w * w.detach().sum().item()).sum()

    w = torch.randn(4, requires_grad=True)
    check_breaks(f, w, breaks=0, backend="aot_eager")
    w1, w2 = w.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    f(w1).backward()
    dynamo_lite.compile(f, backend="aot_eager")(w2).backward()
    torch.testing.assert_close(w1.grad, w2.grad)


def branch_on_item(x):
    if x.sum().item() > 0:
        return x + 1
    return x - 1


def range_of_item(x):
    out = x
    for _ in range(int((x > 0).sum())):
        out = out * 2
    return out


def print_item(x):
    m = x.max().item()
    print("max", m)
    return x / m


def loop_over_nonzero_rows(x):
    out = []
    for row in x.nonzero():  # how many rows: Python needs the count
        out.append(row.sum())
    return out


@pytest.mark.parametrize("fn", [branch_on_item, range_of_item, loop_over_nonzero_rows])
def test_a_use_of_the_value_in_python_breaks_and_every_value_is_right(fn):
    calls = [(torch.randn(5) + shift,) for shift in (3.0, -3.0, 0.5)]  # both branches, several counts
    check_calls(fn, calls)
    _graphs, breaks, _frames = _counts(fn, calls[:1])
    assert breaks == 1


def test_a_value_read_from_data_is_printed_from_the_graph_without_a_break():
    # print(m) of m = x.max().item(): the replayed print gets the value the graph returns
    calls = [(torch.randn(5) + shift,) for shift in (3.0, -3.0, 0.5)]
    check_calls(print_item, calls)
    _graphs, breaks, _frames = _counts(print_item, calls[:1])
    assert breaks == 0


def test_the_branch_break_names_the_value_read_from_data():
    out = check_breaks(branch_on_item, torch.ones(3), breaks=1)
    assert out.exception is None
    reason = dynamo_lite.explain(branch_on_item)(torch.ones(3)).break_reasons[0]
    assert "value read from tensor data" in reason.reason
    assert reason.lineno == branch_on_item.__code__.co_firstlineno + 1


def test_errors_are_eagers():
    def item_of_many(x):
        return x.item() + 1

    def int_of_many(x):
        return int(x) + 1

    check_breaks(item_of_many, torch.ones(3), breaks=None, raises=RuntimeError)
    check_breaks(int_of_many, torch.ones(2, dtype=torch.int64), breaks=None, raises=ValueError)

    def negative_size(x):
        return torch.zeros(int((x > 0).sum()) - 10)

    check_breaks(negative_size, torch.ones(3), breaks=None, raises=RuntimeError)

    def index_out_of_range(x):
        return x[int((x > 0).sum()) + 5]

    check_breaks(index_out_of_range, torch.ones(3), breaks=None, raises=IndexError)


def test_conversions_that_are_not_item_still_break():
    def int_of_float(x):
        return x + int(x[0])  # truncates toward zero (and raises on nan): Python does it

    def float_of_int(x):
        return float(x[0]) * 2

    check_breaks(int_of_float, torch.tensor([2.7, 1.0]), breaks=1)
    check_breaks(float_of_int, torch.tensor([3, 1]), breaks=None)


def test_tolist_of_a_large_tensor_breaks():
    check_breaks(tolist_doubled, torch.arange(1000), breaks=1)


@pytest.mark.parametrize("setting, fn, make", [
    ("capture_scalar_outputs", scale_by_sum, lambda: (torch.randn(4),)),
    ("capture_scalar_outputs", tolist_doubled, lambda: (torch.arange(3),)),
    ("capture_dynamic_output_shape_ops", nonzero_plus_one, lambda: (torch.randn(4) > 0,)),
    ("capture_dynamic_output_shape_ops", masked, lambda: (torch.randn(4),)),
])
def test_each_setting_off_breaks_as_torch_compile_does_by_default(setting, fn, make):
    with config.patch(**{setting: False}):
        out = check_breaks(fn, *make(), breaks=1, need_graph=False)
    assert out.exception is None


def _torch_compile_graphs(fn, args):
    """Graphs torch.compile (with both settings on) makes of ``fn`` (the reference)."""
    import torch._dynamo

    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    with torch._dynamo.config.patch(capture_scalar_outputs=True, capture_dynamic_output_shape_ops=True):
        torch.compile(fn, backend=backend)(*args)
    torch._dynamo.reset()
    return len(graphs)


@pytest.mark.parametrize("fn, make", ONE_GRAPH, ids=[f.__name__ for f, _ in ONE_GRAPH])
def test_no_more_graphs_than_torch_compile_with_the_same_settings(fn, make):
    args = make(1)
    ours, _breaks, _frames = _counts(fn, [args])
    assert ours <= _torch_compile_graphs(fn, args)


def test_async_asserts_stay_in_the_graph_and_raise_as_in_eager():
    # kornia's adjust_contrast validates with torch._assert_async; its result is never used, and
    # the check was dropped from the graph with the unused results of metadata calls
    def f(x, factor):
        torch._assert_async((factor >= 0).all(), "must be non-negative")
        torch.ops.aten._assert_async.msg((factor < 9).all(), "too large")
        return x * factor

    from dynamo_lite.testing import check_breaks

    check_breaks(f, torch.ones(2), torch.tensor([0.5]), breaks=0)
    check_breaks(f, torch.ones(2), torch.tensor([-0.5]), breaks=0, raises=RuntimeError, need_graph=False)
    check_breaks(f, torch.ones(2), torch.tensor([10.0]), breaks=0, raises=RuntimeError, need_graph=False)


def test_squeeze_of_a_masked_selection_keeps_eager_shapes():
    # torchmetrics' pearson: `(x[mask] / y[mask]).squeeze()` with one hit is 0-d in eager; the fake
    # run assumed the count is not 1, and the graph's output had the wrong shape
    def f(x, y):
        m = x > 0
        v = (x[m] / y[m].abs().add(1)).squeeze()
        return v, v.dim(), torch.squeeze(x[m], 0) if m.sum() > 0 else x

    check_calls(f, [(torch.tensor([-1.0, 2.0, -3.0]), torch.ones(3)),
                    (torch.tensor([1.0, 2.0, -3.0]), torch.ones(3))], graphs=None)


def test_float_arithmetic_on_a_value_read_from_tensor_data_that_sympy_folds_is_pythons():
    # bench/fuzz.py on 3.13 (seed 2027): `0.0 * t.item()` folded to 0 by the graph's symbolic
    # algebra (Python gives -0.0 for a negative value); it breaks there now, and Python computes it
    def f(y):
        v = y[..., -1].sum().item()
        return torch.cos(y), 0.0 * v, f"{0.0 * v}"

    check_calls(f, [(torch.ones(2, 3),), (-torch.ones(2, 3),)], graphs=None)


def test_a_float_read_from_data_to_a_fractional_power_is_computed_by_python():
    # (-8.0) ** 0.5 is complex in Python; the graph's symbolic float stayed real, so the compiled
    # call raised (the backend's outputs were float where eager's were complex)
    def f(t):
        v = t.item()
        return torch.ones(2) * (v ** 0.5), v ** 2, v ** 2.0

    def g(x, s):
        return x * (s ** 0.5)

    for order in ([-8.0, 4.0], [4.0, -8.0]):
        dynamo_lite.reset()
        check_calls(f, [(torch.tensor(v),) for v in order], graphs=None)
    check_calls(g, [(torch.ones(2), s) for s in (4.0, 9.0, -4.0, 2.0)], graphs=None)
