"""The escape hatches: allow_in_graph, nonstrict_trace, substitute_in_graph, assume_constant_result.

Each is compared with eager (results, printed output, mutated arguments, gradients) and, where
torch has the hatch, with torch.compile(backend=...) using torch's own in the same test: graph
count, what the graph calls, what is printed.  Breaks name the hatch (DL0068 / DL0069).
"""
import bisect
import dataclasses
import functools
import zlib

import pytest
import torch
import torch._dynamo
import torch.utils._pytree as pytree

import dynamo_lite
from dynamo_lite import graph_breaks as gb
from dynamo_lite.testing import CompileCounter, check, check_breaks
from dynamo_lite.variables import escape_hatches


class TorchCounter:
    """A torch.compile backend that counts graphs and keeps them."""

    def __init__(self):
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return gm.forward


def torch_compiled(fn):
    torch._dynamo.reset()
    counter = TorchCounter()
    return torch.compile(fn, backend=counter), counter


def calls_of(graphs, target):
    return sum(1 for gm in graphs for n in gm.graph.nodes if n.op == "call_function" and n.target is target)


def reasons(fn, *args):
    info = dynamo_lite.explain(fn)(*args)
    return info, [(b.break_id, b.reason) for b in info.break_reasons]


# ---- allow_in_graph ----------------------------------------------------------------------------

def pair_of(x, y):
    return x.sin() + y, (x * y, [y.cos()])


dynamo_lite.allow_in_graph(pair_of)
torch._dynamo.allow_in_graph(pair_of)


def uses_pair(x, y):
    a, (b, [c]) = pair_of(x, y)
    return a * b - c


def test_allow_in_graph_is_one_node_whose_target_is_the_function():
    x, y = torch.randn(3), torch.randn(3)
    cnt = check(uses_pair, x, y, graphs=1)
    assert cnt.frame_count == 1
    assert calls_of(cnt.graphs, pair_of) == 1
    compiled, ref = torch_compiled(uses_pair)
    torch.testing.assert_close(compiled(x, y), uses_pair(x, y))
    assert len(ref.graphs) == 1 and calls_of(ref.graphs, pair_of) == 1


def test_allow_in_graph_gradients():
    x = torch.randn(4, requires_grad=True)
    y = torch.randn(4, requires_grad=True)
    check(uses_pair, x, y, backward=True, graphs=1)


def add_into(t, n):
    t.add_(n)


dynamo_lite.allow_in_graph(add_into)
torch._dynamo.allow_in_graph(add_into)


def mutates(x):
    add_into(x, 2)
    return x * 3


def test_allow_in_graph_mutation_of_an_argument():
    cnt = check(mutates, torch.ones(3), graphs=1)
    assert calls_of(cnt.graphs, add_into) == 1
    compiled, ref = torch_compiled(mutates)
    x = torch.ones(3)
    torch.testing.assert_close(compiled(x), mutates(torch.ones(3)))
    torch.testing.assert_close(x, torch.full((3,), 3.0))
    assert len(ref.graphs) == 1 and calls_of(ref.graphs, add_into) == 1


def shout(x):
    print("shout", type(x).__name__)
    return x + 1


dynamo_lite.allow_in_graph(shout)
torch._dynamo.allow_in_graph(shout)


def calls_shout(x):
    return shout(x) * 2


def test_allow_in_graph_body_runs_on_fakes_at_trace_time_as_in_torch(capsys):
    """Its body runs once on FakeTensors while tracing, then on real tensors at each call."""
    compiled, ref = torch_compiled(calls_shout)
    compiled(torch.ones(2))
    compiled(torch.ones(2))
    torch_out = capsys.readouterr().out
    cnt = CompileCounter()
    ours = dynamo_lite.compile(calls_shout, backend=cnt)
    torch.testing.assert_close(ours(torch.ones(2)), torch.full((2,), 4.0))
    ours(torch.ones(2))
    assert capsys.readouterr().out == torch_out == "shout FakeTensor\nshout Tensor\nshout Tensor\n"
    assert cnt.frame_count == len(ref.graphs) == 1


def with_dict(d, scale):
    return {"sum": d["a"] + d["b"] * scale, "none": None, "parts": (d["a"], d["b"])}


dynamo_lite.allow_in_graph(with_dict)


def test_allow_in_graph_dict_arguments_and_results():
    def fn(x, y):
        out = with_dict({"a": x, "b": y}, 3)
        return out["sum"] + out["parts"][1], out["none"]

    cnt = check(fn, torch.randn(3), torch.randn(3), graphs=1)
    assert calls_of(cnt.graphs, with_dict) == 1


def returns_arg(x):
    return x


dynamo_lite.allow_in_graph(returns_arg)


def test_allow_in_graph_result_that_is_its_argument_keeps_identity():
    def fn(x):
        return returns_arg(x) is x, x + 1

    check(fn, torch.ones(2), graphs=1)


def reads_item(x):
    return x * x.sum().item()


dynamo_lite.allow_in_graph(reads_item)
torch._dynamo.allow_in_graph(reads_item)


def calls_reads_item(x):
    return reads_item(x + 1) - 1


def test_allow_in_graph_that_fails_on_fakes_breaks_naming_it():
    # then Python calls it, and its own frame is captured (with .item() in its graph), as under
    # torch.compile (which breaks at the .item() too, unless capture_scalar_outputs)
    check_breaks(calls_reads_item, torch.ones(3), breaks=1)
    info, why = reasons(calls_reads_item, torch.ones(3))
    assert why[0][0] == gb.ESCAPE_HATCH_NOT_IN_GRAPH
    assert "reads_item (marked dynamo_lite.allow_in_graph)" in why[0][1]
    assert "fake tensors" in why[0][1]
    compiled, ref = torch_compiled(calls_reads_item)
    torch.testing.assert_close(compiled(torch.ones(3)), calls_reads_item(torch.ones(3)))


def size_of(x):
    return x.shape[0] + 1


dynamo_lite.allow_in_graph(size_of)
torch._dynamo.allow_in_graph(size_of)


def test_allow_in_graph_returning_a_number_breaks_as_in_torch():
    def fn(x):
        return x * size_of(x)

    check_breaks(fn, torch.ones(3), breaks=1)
    _, why = reasons(fn, torch.ones(3))
    assert "size_of (marked dynamo_lite.allow_in_graph)" in why[0][1] and "returns a int" in why[0][1]
    torch._dynamo.reset()
    with pytest.raises(Exception, match="non-Tensor"):
        torch.compile(fn, backend="eager", fullgraph=True)(torch.ones(3))


class Box:
    def __init__(self, t):
        self.t = t


def unbox(b):
    return b.t + 1


dynamo_lite.allow_in_graph(unbox)


def test_allow_in_graph_with_an_object_argument_breaks():
    def fn(x):
        return unbox(Box(x)) * 2

    check_breaks(fn, torch.ones(3), breaks=None)
    _, why = reasons(fn, torch.ones(3))
    assert any(i == gb.ESCAPE_HATCH_NOT_IN_GRAPH and "unbox" in r and "Box" in r for i, r in why), why


def test_allow_in_graph_arguments():
    def f(x):
        return x

    def g(x):
        return x

    assert dynamo_lite.allow_in_graph(f) is f
    assert dynamo_lite.allow_in_graph([f, g]) == [f, g]
    assert dynamo_lite.allow_in_graph(torch.add) is torch.add  # already a graph node: left alone
    assert escape_hatches.mark_of(torch.add) is None
    with pytest.raises(TypeError, match="allow_in_graph expects a callable"):
        dynamo_lite.allow_in_graph(3)
    with pytest.raises(AssertionError, match="allow_in_graph expects a callable"):
        torch._dynamo.allow_in_graph(3)  # (torch says so with an AssertionError)
    with pytest.raises(ValueError, match="already marked allow_in_graph"):
        dynamo_lite.assume_constant_result(f)


# ---- nonstrict_trace ---------------------------------------------------------------------------

@dataclasses.dataclass
class Point:
    a: torch.Tensor
    b: torch.Tensor
    label: object = None


pytree.register_dataclass(Point)


class Config:
    """A constant of the graph (pytree.register_constant: __eq__ and __hash__ of its own)."""

    def __init__(self, scale):
        self.scale = scale

    def __eq__(self, other):
        return type(other) is Config and other.scale == self.scale

    def __hash__(self):
        return hash(self.scale)


pytree.register_constant(Config)


class Pair:
    """A class registered with a flatten function of its own (traced, never run on the object)."""

    def __init__(self, first, second):
        self.first = first
        self.second = second


pytree.register_pytree_node(Pair, lambda p: ([p.first, p.second], "pair"), lambda xs, ctx: Pair(*xs))


def combine(p, cfg, pair, n, name="x"):
    return {"out": p.a * cfg.scale + p.b * n + pair.first * pair.second * len(name), "n": n}


ours_combine = dynamo_lite.nonstrict_trace(combine)
torch_combine = torch._dynamo.nonstrict_trace(combine)


def uses_combine(impl, x, p, cfg):
    d = impl(p, cfg, Pair(x, x + 1), 3, name="y")
    return d["out"] + d["n"], d["n"]


def test_nonstrict_trace_takes_pytrees_in_one_node():
    x = torch.randn(3)
    p = Point(torch.randn(3), torch.randn(3))
    cfg = Config(2.0)
    cnt = check(lambda x, p, cfg: uses_combine(ours_combine, x, p, cfg), x, p, cfg, graphs=1)
    assert cnt.frame_count == 1
    assert [n.target.__name__ for n in cnt.graphs[0].graph.nodes if n.op == "call_function"].count("combine") == 1
    compiled, ref = torch_compiled(lambda x, p, cfg: uses_combine(torch_combine, x, p, cfg))
    torch.testing.assert_close(compiled(x, p, cfg)[0], uses_combine(combine, x, p, cfg)[0])
    assert len(ref.graphs) == 1


def test_nonstrict_trace_recompiles_for_another_constant_object():
    cnt = CompileCounter()
    fn = dynamo_lite.compile(lambda x, p, cfg: uses_combine(ours_combine, x, p, cfg), backend=cnt)
    x, p = torch.randn(3), Point(torch.randn(3), torch.randn(3))
    for scale in (2.0, 5.0):
        torch.testing.assert_close(fn(x, p, Config(scale))[0], uses_combine(combine, x, p, Config(scale))[0])
    assert cnt.frame_count == 2  # the constant is guarded (by identity)


def test_nonstrict_trace_gradients():
    x = torch.randn(3, requires_grad=True)
    p = Point(torch.randn(3, requires_grad=True), torch.randn(3))
    check(lambda x, p, cfg: uses_combine(ours_combine, x, p, cfg)[0].sum(), x, p, Config(1.5), backward=True,
          graphs=1)


def test_nonstrict_trace_constant_made_in_the_compiled_code_breaks_as_in_torch():
    def fn(x, p):
        return uses_combine(ours_combine, x, p, Config(1.5))[0]

    check_breaks(fn, torch.randn(3), Point(torch.randn(3), torch.randn(3)), breaks=1)
    _, why = reasons(fn, torch.randn(3), Point(torch.randn(3), torch.randn(3)))
    assert "Config (pytree.register_constant) made inside the compiled code" in why[0][1]


SHIFT = torch.tensor([10.0, 20.0])


@dynamo_lite.nonstrict_trace
def shifted(x):
    print("shifted", type(x).__name__)
    return x + SHIFT  # a global tensor: a constant of the fake run, as in torch


@torch._dynamo.nonstrict_trace
def torch_shifted(x):
    print("shifted", type(x).__name__)
    return x + SHIFT


def test_nonstrict_trace_reads_global_tensors_and_prints_as_torch(capsys):
    compiled, ref = torch_compiled(lambda x: torch_shifted(x) * 2)
    compiled(torch.ones(2))
    torch_out = capsys.readouterr().out
    cnt = CompileCounter()
    out = dynamo_lite.compile(lambda x: shifted(x) * 2, backend=cnt)(torch.ones(2))
    assert capsys.readouterr().out == torch_out == "shifted FakeTensor\nshifted Tensor\n"
    torch.testing.assert_close(out, (torch.ones(2) + SHIFT) * 2)
    assert cnt.frame_count == len(ref.graphs) == 1


class Unregistered:
    def __init__(self, t):
        self.t = t


@dynamo_lite.nonstrict_trace
def takes_unregistered(u):
    return u.t * 2


def test_nonstrict_trace_with_an_unregistered_class_breaks_naming_it():
    def fn(x, u):
        return takes_unregistered(u) + x

    check_breaks(fn, torch.ones(2), Unregistered(torch.ones(2)), breaks=1)
    _, why = reasons(fn, torch.ones(2), Unregistered(torch.ones(2)))
    assert why[0][0] == gb.ESCAPE_HATCH_NOT_IN_GRAPH
    assert "takes_unregistered (marked dynamo_lite.nonstrict_trace)" in why[0][1] and "register" in why[0][1]


def test_nonstrict_trace_arguments():
    def f(x):
        return x

    wrapped = dynamo_lite.nonstrict_trace(f)
    assert wrapped is not f and wrapped.__wrapped__ is f and wrapped.__name__ == "f"
    assert wrapped(3) == 3  # eager: calls f
    with pytest.raises(TypeError):
        dynamo_lite.nonstrict_trace()  # type: ignore[call-arg]  (a decorator without parentheses, as torch's)
    with pytest.raises(TypeError):
        torch._dynamo.nonstrict_trace()  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="nonstrict_trace expects a callable"):
        dynamo_lite.nonstrict_trace(3)  # type: ignore[arg-type]


# ---- substitute_in_graph -----------------------------------------------------------------------

@pytest.fixture
def unmark():
    """Marks on builtins live as long as the process: take them off after the test."""
    marked = []
    yield marked.append
    for obj in marked:
        escape_hatches._MARKS.pop(id(obj), None)


def bisect_polyfill(a, x, lo=0, hi=None, *, key=None):
    hi = len(a) if hi is None else hi
    while lo < hi:
        mid = (lo + hi) // 2
        if x < (a[mid] if key is None else key(a[mid])):
            hi = mid
        else:
            lo = mid + 1
    return lo


def test_substitute_in_graph_traces_the_polyfill(unmark):
    def fn(x):
        return x * bisect.bisect_right([1, 3, 5, 7], 5)

    check_breaks(fn, torch.ones(2), breaks=1)  # a C function the trace cannot see into
    unmark(bisect.bisect_right)
    wrapped = dynamo_lite.substitute_in_graph(bisect.bisect_right)(bisect_polyfill)
    assert wrapped.__name__ == "bisect_polyfill" and wrapped.__dynamo_lite_original__ is bisect.bisect_right
    assert wrapped([1, 3, 5], 3) == 2 and bisect.bisect_right([1, 3, 5], 3) == 2  # eager: the C function
    dynamo_lite.reset()
    check_breaks(fn, torch.ones(2), breaks=0)
    check(lambda x: x * wrapped([1, 3, 5, 7], 6), torch.ones(2), graphs=1)


def test_substitute_in_graph_constant_folds_through_the_original(unmark):
    def polyfill(data, value=0, /):
        dynamo_lite.graph_break()  # never traced: constant arguments call the original
        return 0

    unmark(zlib.crc32)
    dynamo_lite.substitute_in_graph(zlib.crc32, can_constant_fold_through=True)(polyfill)
    check_breaks(lambda x: x + zlib.crc32(b"abc") % 7, torch.ones(2), breaks=0)


def test_substitute_in_graph_break_in_the_polyfill_names_it(unmark):
    def adler(data, value=1, /):
        dynamo_lite.graph_break()
        return value

    unmark(zlib.adler32)
    dynamo_lite.substitute_in_graph(zlib.adler32)(adler)

    def fn(x):
        return x + zlib.adler32(b"ab") % 5

    check_breaks(fn, torch.ones(2), breaks=1)
    _, why = reasons(fn, torch.ones(2))
    assert "polyfill of adler32 (substituted by" in why[0][1] and "substitute_in_graph" in why[0][1]


def test_substitute_in_graph_checks_as_torch_does(unmark):
    def wrong(a, y):
        return 0

    for substitute in (dynamo_lite.substitute_in_graph, torch.compiler.substitute_in_graph):
        with pytest.raises(TypeError, match="Signature mismatch"):
            substitute(bisect.insort_left)(wrong)
        with pytest.raises(TypeError, match="expects a function"):
            substitute(Box)  # a class
        with pytest.raises(TypeError, match="expects a"):
            substitute(bisect.insort_left)(functools.partial(wrong))  # the polyfill must be a function
    with pytest.raises(TypeError, match="expects a Python function"):
        dynamo_lite.substitute_in_graph(bisect.insort_left)(len)  # (torch takes a C one: it cannot be traced)
    unmark(bisect.insort_left)
    dynamo_lite.substitute_in_graph(bisect.insort_left, skip_signature_check=True)(wrong)
    with pytest.raises(ValueError, match="Duplicate"):
        dynamo_lite.substitute_in_graph(bisect.insort_left, skip_signature_check=True)(wrong)

    def anything(*args, **kwargs):
        return 0

    unmark(zlib.compress)
    dynamo_lite.substitute_in_graph(zlib.compress)(anything)  # (*args, **kwargs) matches any signature


def test_substitute_in_graph_as_torch(unmark):
    """The same polyfill registered with torch and with dynamo_lite: both capture one graph."""
    def hexlify_polyfill(data, /):
        return "".join("%02x" % b for b in data)

    import binascii

    unmark(binascii.hexlify)
    dynamo_lite.substitute_in_graph(binascii.hexlify, skip_signature_check=True)(hexlify_polyfill)
    torch.compiler.substitute_in_graph(binascii.hexlify, skip_signature_check=True)(hexlify_polyfill)

    def fn(x):
        return x * len(binascii.hexlify(b"ab"))

    check_breaks(fn, torch.ones(2), breaks=0)
    compiled, ref = torch_compiled(fn)
    torch.testing.assert_close(compiled(torch.ones(2)), fn(torch.ones(2)))
    assert len(ref.graphs) == 1


# ---- assume_constant_result --------------------------------------------------------------------

SETTINGS = {"scale": 3.0}
CALLS = []


def current_scale(name):
    CALLS.append(name)
    return SETTINGS[name]


dynamo_lite.assume_constant_result(current_scale)
torch._dynamo.assume_constant_result(current_scale)


def scaled(x):
    return x * current_scale("scale")


def test_assume_constant_result_is_called_at_trace_time_and_not_guarded():
    CALLS.clear()
    cnt = CompileCounter()
    fn = dynamo_lite.compile(scaled, backend=cnt)
    torch.testing.assert_close(fn(torch.ones(2)), torch.full((2,), 3.0))
    assert CALLS == ["scale"]  # once, while tracing
    fn(torch.ones(2))
    assert CALLS == ["scale"]  # the graph holds the constant
    SETTINGS["scale"] = 5.0
    try:
        ours = fn(torch.ones(2))
        compiled, ref = torch_compiled(scaled)
        SETTINGS["scale"] = 3.0
        compiled(torch.ones(2))
        SETTINGS["scale"] = 5.0
        theirs = compiled(torch.ones(2))
    finally:
        SETTINGS["scale"] = 3.0
    # nothing guarded: both keep the value they traced with
    torch.testing.assert_close(ours, torch.full((2,), 3.0))
    torch.testing.assert_close(theirs, torch.full((2,), 3.0))
    assert cnt.frame_count == len(ref.graphs) == 1


def test_assume_constant_result_in_a_differential_run():
    check_breaks(scaled, torch.randn(3), breaks=0)


def tensor_norm(t):
    return float(t.norm())


dynamo_lite.assume_constant_result(tensor_norm)


def test_assume_constant_result_with_a_tensor_argument_breaks_naming_it():
    def fn(x):
        return x / tensor_norm(x)

    # (never run on real tensors while tracing; Python calls it, and its own frame is captured,
    # float(t) in its graph)
    check_breaks(fn, torch.randn(3), breaks=1)
    _, why = reasons(fn, torch.randn(3))
    assert why[0][0] == gb.ASSUMED_CONSTANT_NOT_CALLED
    assert "tensor_norm (marked dynamo_lite.assume_constant_result)" in why[0][1]


def missing_setting():
    return SETTINGS["missing"]


dynamo_lite.assume_constant_result(missing_setting)


def test_assume_constant_result_that_raises_raises_as_in_eager():
    def fn(x):
        return x * missing_setting()

    check_breaks(fn, torch.ones(2), breaks=1, raises=KeyError)


def test_assume_constant_result_arguments():
    def f():
        return 1

    assert dynamo_lite.assume_constant_result(f) is f
    with pytest.raises(TypeError, match="assume_constant_result expects a callable"):
        dynamo_lite.assume_constant_result(None)  # type: ignore[type-var]


def test_the_hatches_are_public():
    for name in ("allow_in_graph", "nonstrict_trace", "substitute_in_graph", "assume_constant_result"):
        assert name in dynamo_lite.__all__ and getattr(dynamo_lite, name).__doc__
