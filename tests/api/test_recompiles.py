"""Recompiles as a user meets them: guards that fail, cache_size_limit, dynamic shapes.

Every test compares compiled with eager through dynamo_lite.testing; known bugs are strict
xfails in tests/test_known_bugs.py.
"""

import copy

import pytest
import torch

import dynamo_lite
from dynamo_lite import config
from dynamo_lite.report import events
from dynamo_lite.testing import CompileCounter, assert_same, print_with_graph_break
from dynamo_lite.testing import recording as _recording

pytest_plugins = ["pytester"]

X = torch.arange(6, dtype=torch.float32).reshape(2, 3) / 7 - 0.3


# ---------------------------------------------------------------- recompiles
def _calls(fn, arg_list, backend=None):
    cnt = backend or CompileCounter()
    cf = dynamo_lite.compile(fn, backend=cnt)
    for args in arg_list:
        expected = fn(*args)
        got = cf(*args)
        assert_same(got, expected)
        if isinstance(expected, torch.Tensor):
            assert got.dtype == expected.dtype and got.requires_grad == expected.requires_grad
    return cnt


def test_recompile_reasons_dtype_shape_value():
    def affine(x, bias):
        return x * 2 + bias

    seen, rec = _recording()
    with rec:
        _calls(affine, [(torch.ones(4), 1.0), (torch.ones(4), 1.0), (torch.ones(4, dtype=torch.float64), 1.0),
                        (torch.ones(5), 1.0), (torch.ones(4), 2.0)])
    reasons = [" | ".join(e.reasons) for e in seen if isinstance(e, events.RecompileEvent)]
    assert reasons == ["x.dtype changed from float32 to float64",  # newest entry first (docs/recompiles.md)
                       "x.dtype changed from float64 to float32 | x.shape changed from [4] to [5]",
                       " | ".join(["bias changed from 1.0 to 2.0"] * 3)]


def test_a_frame_that_captures_nothing_twice_runs_as_it_is():
    # einx's shape solver: tensors reach it, but it only does Python work on other values; after a
    # second trace with nothing to capture the code is left to Python (torch.compile: at once)
    log = []

    def solve(x, spec):
        log.append(spec)  # a side effect Python does itself once the frame runs as it is
        return len(spec) if isinstance(spec, str) else spec * 2

    seen, rec = _recording()
    with rec:
        _calls(solve, [(X, "ab"), (X, 3), (X, 4.5), (X, (1, 2)), (X, "abc")])
    recompiles = [e for e in seen if isinstance(e, events.RecompileEvent)]
    assert len(recompiles) == 1  # the 2nd call traced again; the 3rd to 5th ran without a callback
    assert log == ["ab", "ab", 3, 3, 4.5, 4.5, (1, 2), (1, 2), "abc", "abc"]


def test_a_frame_that_once_captured_a_graph_is_not_left_to_python():
    def f(x, flag):
        if flag:
            return x + 1
        return flag

    seen, rec = _recording()
    with rec:
        cnt = _calls(f, [(X, True), (X, 0), (X, None), (X, 1)])
    assert cnt.frame_count == 2  # flag=1 compiled its own graph: the code was not skipped
    assert len([e for e in seen if isinstance(e, events.RecompileEvent)]) == 3


def test_recompile_on_requires_grad_and_grads_match():
    def f(x):
        return (x * 2).sum()

    cnt = CompileCounter()
    cf = dynamo_lite.compile(f, backend=cnt)
    assert not cf(X).requires_grad
    y = X.clone().requires_grad_()
    out = cf(y)
    out.backward()
    assert out.requires_grad and torch.equal(y.grad, torch.full_like(X, 2.0))
    assert cnt.frame_count == 2


def test_python_scalar_types_int_float_bool_keep_eager_dtype():
    def f(x, s):
        return x * s

    ints = torch.ones(3, dtype=torch.int64)
    cnt = _calls(f, [(X, 2), (X, 2.0), (X, True), (ints, 2), (ints, 2.0), (ints, True)])
    assert cnt.frame_count == 6


def test_python_float_negative_zero_and_nan():
    def f(x, s):
        return torch.ones(1) / s + x

    cnt = _calls(f, [(torch.zeros(1), 0.0), (torch.zeros(1), -0.0), (torch.zeros(1), 0.0)])
    assert cnt.frame_count == 2
    g = dynamo_lite.compile(lambda x, s: x + s, backend="eager")
    for _ in range(3):
        assert torch.isnan(g(X, float("nan"))).all()


def test_string_and_none_arguments():
    def f(x, mode, extra):
        y = x.sum() if mode == "sum" else x.mean()
        return y if extra is None else y + extra

    _calls(f, [(X, "sum", None), (X, "mean", None), (X, "sum", 1.0), (X, "sum", None), (X, "mean", X)])


GLOBAL_SCALE = 2.0
GLOBAL_W = torch.ones(3)


def test_global_scalar_and_tensor_changes_recompile_or_reread():
    global GLOBAL_SCALE, GLOBAL_W

    def f(x):
        return x * GLOBAL_SCALE + GLOBAL_W

    cf = dynamo_lite.compile(f, backend="eager")
    try:
        assert_same(cf(X), f(X))
        GLOBAL_SCALE = 3.0
        assert_same(cf(X), f(X))
        GLOBAL_W = torch.zeros(3)
        assert_same(cf(X), f(X))
        GLOBAL_W = torch.zeros(3, dtype=torch.float64)
        assert_same(cf(X), f(X))
        del GLOBAL_W
        with pytest.raises(NameError):
            cf(X)
    finally:
        GLOBAL_SCALE, GLOBAL_W = 2.0, torch.ones(3)


def test_closure_cell_value_and_type_change():
    def make():
        k = 1.0

        def inner(x):
            return x * k

        def set_k(v):
            nonlocal k
            k = v
        return inner, set_k

    inner, set_k = make()
    f = dynamo_lite.compile(inner, backend="eager")
    assert_same(f(X), X)
    set_k(5.0)
    assert_same(f(X), X * 5.0)
    set_k(torch.full((3,), 2.0))
    assert_same(f(X), X * 2.0)
    set_k(3)
    assert_same(f(X), X * 3)


def test_module_attribute_flag_and_submodule_replacement():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.flag = True
            self.scale = 2.0
            self.lin = torch.nn.Linear(3, 3)

        def forward(self, x):
            return self.lin(x) * self.scale if self.flag else x * self.scale

    torch.manual_seed(0)
    m = M()
    cm = dynamo_lite.compile(m, backend="eager")
    assert_same(cm(X), m(X))
    m.flag = False
    assert_same(cm(X), m(X))
    cm.scale = 4.0  # set through the compiled module: shared state
    assert m.scale == 4.0
    assert_same(cm(X), m(X))
    m.flag = True
    m.lin = torch.nn.Identity()
    assert_same(cm(X), m(X))


class _Block(torch.nn.Module):
    def __init__(self, k=1):
        super().__init__()
        self.k = k
        self.calls = 0
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x):
        return self.lin(x) * self.k


def test_modules_passed_in_turn_compile_once_not_once_per_module():
    """The layers of a model passed to one compiled function: the compile guards the module
    argument and its submodules by their type and structure, and serves every further module of
    that shape (their own weights: parameters are graph inputs)."""
    def f(block, x):
        return block(x).relu() + 1

    torch.manual_seed(0)
    blocks = [_Block() for _ in range(4)]
    cnt = _calls(f, [(b, X) for b in blocks] + [(blocks[0], X)])
    assert cnt.frame_count == 1
    patched = _Block()
    patched.forward = lambda x: x * 100  # an instance's own forward: not the class's
    hooked = _Block()
    hooked.lin.register_forward_hook(lambda mod, args, out: out * 0)
    other = _Block()
    other.lin = torch.nn.Identity()  # another structure
    _calls(f, [(b, X) for b in blocks[:2] + [patched, hooked, other, _Block(k=2), blocks[0].eval()]])


def test_modules_guarded_by_structure_that_are_one_object_in_a_later_call():
    """A trace that changed one module's state while reading another's holds only while they are
    two objects: the same module passed twice compiles again (it returned the stale count)."""
    def f(a, b, x):
        a.calls += 1
        return a(x) * b.calls

    torch.manual_seed(0)
    blocks = [_Block() for _ in range(5)]
    twins = copy.deepcopy(blocks)
    compiled = dynamo_lite.compile(f, backend="eager")
    for i, j in [(0, 1), (2, 3), (4, 4), (2, 2), (0, 3)]:
        assert_same(compiled(blocks[i], blocks[j], X), f(twins[i], twins[j], X))
        assert [b.calls for b in blocks] == [b.calls for b in twins]


def test_function_defaults_and_code_replacement():
    def f(x, k=2):
        return x * k

    cf = dynamo_lite.compile(f, backend="eager")
    assert_same(cf(X), X * 2)
    f.__defaults__ = (5,)
    assert_same(cf(X), X * 5)
    f.__code__ = (lambda x, k=2: x + k * 100).__code__
    assert_same(cf(X), X + 500)


def test_grad_mode_and_inference_mode_entries():
    cf = dynamo_lite.compile(lambda x: x * 2, backend="eager")
    y = X.clone().requires_grad_()
    assert cf(y).requires_grad
    with torch.no_grad():
        assert not cf(y).requires_grad
    with torch.inference_mode():
        assert cf(X).is_inference()
    assert not cf(X).is_inference()


def test_strided_views_recompile_and_match():
    a = torch.arange(12.0).reshape(3, 4)

    def f(x):
        return x.reshape(-1) * 2

    cnt = _calls(f, [(a,), (a.t(),), (a[:, ::2],), (a,)])
    assert cnt.frame_count == 3


def test_same_inputs_no_recompile_new_values_no_recompile():
    cnt = _calls(lambda x, y: x @ y.T, [(X, X + 1), (X * 2, X - 1), (torch.randn(2, 3), torch.randn(2, 3))])
    assert cnt.frame_count == 1


def test_keyword_order_varargs_and_list_length_changes():
    def f(x, *, a=1.0, b=2.0):
        return x * a - b

    def g(*args, **kw):
        return sum(args) + sum(kw.values())

    def h(ts):
        return sum(t * i for i, t in enumerate(ts))

    _calls(f, [(X,)])
    cf = dynamo_lite.compile(f, backend="eager")
    for kw in (dict(a=2.0, b=1.0), dict(b=1.0, a=2.0), dict(b=5.0), {}):
        assert_same(cf(X, **kw), f(X, **kw))
    cg = dynamo_lite.compile(g, backend="eager")
    for a, kw in (((X,), {}), ((X, X), {}), ((X,), {"q": X}), ((X,), {"q": X, "r": 1.0})):
        assert_same(cg(*a, **kw), g(*a, **kw))
    _calls(h, [([X],), ([X, X],), ([X, X * 2, X],), ([X],)])


def test_module_buffer_replaced_mutated_and_reshaped():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("b", torch.ones(3))

        def forward(self, t):
            return t + self.b

    m = M()
    cm = dynamo_lite.compile(m, backend="eager")
    assert_same(cm(X), m(X))
    m.b = torch.zeros(3)
    assert_same(cm(X), m(X))
    m.b.fill_(4)
    assert_same(cm(X), X + 4)
    m.b = torch.ones(1, 3, dtype=torch.float64)
    assert_same(cm(X), m(X))


def test_cache_limit_two_backends_interleaved_results_right():
    c1, c2 = CompileCounter(), CompileCounter()

    def h(t, s):
        return t * s

    # static: each value of s is an entry (automatic dynamic would serve them all with one)
    h1 = dynamo_lite.compile(h, backend=c1, dynamic=False)
    h2 = dynamo_lite.compile(h, backend=c2, dynamic=False)
    with config.patch(cache_size_limit=2):
        for s in range(5):
            assert_same(h1(X, s), X * s)
            assert_same(h2(X, s + 10), X * (s + 10))
        assert_same(h1(X, 1), X)
        assert_same(h2(X, 11), X * 11)
    assert (c1.frame_count, c2.frame_count) == (2, 2)


def test_optimize_and_compile_with_same_backend_share_entries():
    cnt = CompileCounter()

    def k(t):
        return t.exp()

    with dynamo_lite.optimize(cnt):
        k(X)
    assert_same(dynamo_lite.compile(k, backend=cnt)(X), X.exp())
    assert cnt.frame_count == 1


def test_a_call_with_nothing_to_capture_is_not_a_recompile():
    # torchsde's _Interval._randn: a method compiled for the root of a tree (which holds tensors)
    # and called for its children (which hold none): those calls run as they are, and are not
    # reported as recompiles (they were, on every call, each explaining its guard failures)
    class Node:
        def __init__(self, table=None):
            self.table = table

        def scaled(self, k):
            return self.table * k if self.table is not None else k

    root, leaf = Node(torch.ones(3)), Node()
    seen, rec = _recording()
    with rec:
        _calls(lambda node, k: node.scaled(k), [(root, 2), (leaf, 2), (leaf, 3), (leaf, 4), (root, 2)])
    assert [e for e in seen if isinstance(e, events.RecompileEvent)] == []


class _Tree:
    """A tree whose nodes hold tensors only through their root (torchsde's interval tree)."""

    def __init__(self, parent=None, depth=0):
        self.parent, self.depth = parent, depth
        self.root = self if parent is None else parent.root
        self.scale = torch.ones(3) if parent is None else None

    def child(self):
        return _Tree(self, self.depth + 1)


def _walk(node, n):
    # a helper its caller's trace cannot inline (it prints): Python runs it, its frame reaches the
    # hook, and its arguments hold tensors only in attributes
    print_with_graph_break("walking", n)
    for _ in range(n):
        node = node.child()
    return node


def test_a_helper_reached_natively_whose_arguments_hold_tensors_only_in_attributes_runs_as_it_is():
    """As torch.compile: such a frame (run by Python at a graph break) is not captured, so it is
    not specialised, broken and recompiled per node; what the user compiled still is."""
    def f(tree, x, n):
        y = x * 2
        node = _walk(tree, n)  # a break: Python calls _walk, the rest resumes
        return y + node.root.scale * node.depth

    seen, rec = _recording()
    with rec:
        cnt = _calls(f, [(_Tree(), X[0], k) for k in range(1, 6)])
    frames = {getattr(e, "frame", "") for e in seen}
    assert "_walk" not in frames and "child" not in frames, frames  # (__init__ names torch: captured)
    assert [e for e in seen if isinstance(e, events.RecompileEvent) and e.frame.startswith("_walk")] == []
    assert cnt.frame_count >= 2  # f and its resume function


def test_what_the_user_compiled_is_captured_when_its_arguments_hold_the_tensors():
    class Holder:
        def __init__(self, t):
            self.t = t

    class Slotted:
        __slots__ = ("t",)

        def __init__(self, t):
            self.t = t

    def f(h):
        return h.t.sin() + 1

    for make in (Holder, Slotted):
        cnt = _calls(f, [(make(X),)])
        assert cnt.frame_count == 1
        dynamo_lite.reset()

    class Calls:
        def __init__(self, t):
            self.t = t

        def __call__(self, k):
            return self.t * k

    cnt = CompileCounter()
    assert_same(dynamo_lite.compile(Calls(X), backend=cnt)(3), X * 3)
    assert cnt.frame_count == 1


def test_a_recursive_closure_reached_natively_runs_as_it_is():
    """torchsde's BrownianInterval._set_points: a recursive closure over a float and itself,
    called on each node of a tree: not captured when Python runs it at a break."""
    def f(tree, x):
        limit = 2

        def visit(node):
            print_with_graph_break("visit", node.depth)  # Python runs visit, and visit calls itself
            if node.depth < limit:
                visit(node.child())

        visit(tree)
        return x * 2

    seen, rec = _recording()
    with rec:
        _calls(f, [(_Tree(), X[0]), (_Tree(), X[1])])
    assert not any(getattr(e, "frame", "").startswith("visit") for e in seen), {getattr(e, "frame", "") for e in seen}
