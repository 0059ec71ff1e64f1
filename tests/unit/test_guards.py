"""The fast guards (csrc/guards.c, guards/program.py, csrc/tensor_meta.cpp) are correct.

Every test is differential twice over: the compiled call must behave like
eager after each kind of change (so a stale entry would show as a wrong
result), and for every cache entry the C GuardProgram must answer exactly as
the Python check built from the same guard expressions (``guard.py_fn``).
Each test runs with the C++ tensor reader and with attribute reads (fixture
``tensor_reader``).  Unit tests of GuardProgram cover the ops' semantics:
no identity shortcut in ==, attribute caches invalidated by class changes,
dict caches invalidated by mutation, errors.
"""
from __future__ import annotations

import copy
import gc
import types
import weakref

import contextlib

import pytest
import torch
from torch import nn

import dynamo_lite
from dynamo_lite import _C
from dynamo_lite.convert_frame import entries_for
from dynamo_lite.guards import tensor_api
from dynamo_lite.testing import CompileCounter, assert_same


@pytest.fixture(autouse=True, params=["cxx_reader", "attribute_reads"])
def tensor_reader(request):
    if request.param == "cxx_reader":
        if not tensor_api.enabled():
            pytest.skip("dynamo_lite._tensor_meta is not built")
        assert _C._has_tensor_api()
        yield request.param
        return
    _C._set_tensor_api(None)
    try:
        yield request.param
    finally:
        if tensor_api.enabled():
            from dynamo_lite import _tensor_meta

            _C._set_tensor_api(_tensor_meta._C_API)


# ---- helpers ---------------------------------------------------------------------
def _guard_answers(fn, code, frame_args):
    """[(C answer, Python answer)] of every entry of ``code`` for these frame arguments."""
    out = []
    for entry in entries_for(code):
        args = (*frame_args, fn.__globals__, fn)
        c_answer = entry.guard.fn(*args)
        try:
            py_answer = entry.guard.py_fn(*args) is True
        except Exception:  # noqa: BLE001 - a raising Python check has failed
            py_answer = False
        out.append((c_answer, py_answer))
    return out


class Case:
    """A function or module compiled with a CompileCounter, checked against eager on every call
    (static shapes unless ``dynamic`` says otherwise: most cases test the static guard kinds)."""

    def __init__(self, target, dynamic=False):
        self.target = target
        self.counter = CompileCounter()
        self.compiled = dynamo_lite.compile(target, backend=self.counter, dynamic=dynamic)
        self.is_module = isinstance(target, nn.Module)
        self.fn = type(target).forward if self.is_module else target
        self.code = self.fn.__code__

    def __call__(self, *args, compiled=True):
        eager_target = copy.deepcopy(self.target) if self.is_module else self.target
        expected = eager_target(*args)  # the functions here do not mutate their inputs
        got = self.compiled(*args)
        assert_same(expected, got)
        frame_args = ((self.target,) if self.is_module else ()) + args  # (forward runs on the user's module)
        answers = _guard_answers(self.fn, self.code, frame_args)
        assert all(c is p for c, p in answers), f"C and Python guards disagree: {answers}"
        if compiled:
            assert any(c for c, _ in answers), "no entry accepts the arguments it was just called with"
        return got

    @property
    def compiles(self) -> int:
        return self.counter.frame_count


def _program(case: Case, index: int = 0):
    return entries_for(case.code)[index].guard


# ---- tensor inputs -----------------------------------------------------------------
def add_mul(x):
    return (x + 1) * 2


def test_program_has_no_residual_for_plain_tensor_function():
    c = Case(add_mul)
    c(torch.randn(3))
    guard = _program(c)
    assert isinstance(guard.fn, _C.GuardProgram)
    assert guard.residual_source is None
    assert any(op[0] == "CHECK_TENSOR" for op in guard.fn.ops)


@pytest.mark.parametrize("make_other", [
    pytest.param(lambda x: x.double(), id="dtype"),
    pytest.param(lambda x: torch.randn(5, 4), id="shape"),
    pytest.param(lambda x: torch.randn(4, 4).t(), id="strides"),
    pytest.param(lambda x: x.clone().requires_grad_(), id="requires_grad"),
    pytest.param(lambda x: nn.Parameter(x.clone()), id="subclass-parameter"),
    pytest.param(lambda x: torch.randn(()), id="zero-dim"),
    pytest.param(lambda x: torch.randn(4, 4)[:, :2], id="view-offset-strides"),
])
def test_tensor_metadata_change_recompiles(make_other):
    c = Case(add_mul)
    x = torch.randn(4, 4)
    c(x)
    assert c.compiles == 1
    other = make_other(x)
    c(other)
    assert c.compiles == 2
    # the old entry rejects the new tensor, the new one rejects the old tensor
    assert [a for a, _ in _guard_answers(add_mul, c.code, (x,))] == [False, True]
    c(x)
    assert c.compiles == 2


class MyTensor(torch.Tensor):
    pass


def test_tensor_subclass_is_not_a_tensor_hit():
    c = Case(add_mul)
    x = torch.randn(3)
    c(x)
    sub = x.clone().as_subclass(MyTensor)
    assert [a for a, _ in _guard_answers(add_mul, c.code, (sub,))] == [False]
    c(sub, compiled=False)  # a subclass with __torch_function__ may run eagerly: never the tensor entry
    c(x)


def test_device_change_recompiles():
    c = Case(add_mul)
    c(torch.randn(3))
    meta = torch.empty(3, device="meta")
    assert [a for a, _ in _guard_answers(add_mul, c.code, (meta,))] == [False]
    out = c.compiled(meta)
    assert out.device.type == "meta" and out.shape == (3,)
    assert [a for a, _ in _guard_answers(add_mul, c.code, (meta,))].count(True) == 1


def test_tensor_replaced_by_non_tensor():
    c = Case(add_mul)
    c(torch.randn(3))
    c(3, compiled=False)  # no tensor: not compiled, and no tensor entry accepts it
    c(2.5, compiled=False)
    c(torch.randn(3))


def test_same_metadata_new_values_hit_and_are_fresh():
    c = Case(add_mul)
    c(torch.randn(3))
    for _ in range(3):
        c(torch.randn(3))
    assert c.compiles == 1


def many_inputs(a, b, c, d, e, f, g, h, i, j):
    return a + b * c - d + e * f - g + h * i - j


def test_ten_inputs_each_guarded():
    c = Case(many_inputs)
    xs = [torch.randn(4) for _ in range(10)]
    c(*xs)
    for k in range(10):
        changed = list(xs)
        changed[k] = torch.randn(4, dtype=torch.float64)
        assert [a for a, _ in _guard_answers(many_inputs, c.code, tuple(changed))] == [False], k
    c(*[x.clone() for x in xs])
    assert c.compiles == 1


def aliased(x, y):
    return x + y


def test_aliasing_change_is_guarded():
    c = Case(aliased)
    x = torch.randn(3)
    c(x, x)
    c(x, x.clone())
    c(x, x)


# ---- python values -----------------------------------------------------------------
def scale_by(x, k, flag, name):
    if flag and name == "double":
        return x * k * 2
    return x * k


@pytest.mark.parametrize("args", [
    (3, True, "double"), (2.5, True, "double"), (2, False, "double"), (2, True, "single"), (True, True, "double"),
])
def test_constant_arguments(args):
    c = Case(scale_by)
    x = torch.randn(3)
    c(x, 2, True, "double")
    c(x, *args)
    c(x, 2, True, "double")


def containers(xs, d, t):
    out = d["a"] * t[0]
    for x in xs:
        out = out + x
    return out


def test_container_structure_changes():
    c = Case(containers)
    a = torch.randn(2)
    c([a, a], {"a": a}, (a, 1))
    c([a, a, a], {"a": a}, (a, 1))  # list length
    c([a, a], {"a": a, "b": a}, (a, 1))  # dict keys
    c([a, a], {"b": a, "a": a}, (a, 1))  # dict key order
    c([a, a], {"a": a}, (a, 2))  # tuple item constant
    c([a, a], {"a": a.double()}, (a, 1))  # tensor inside a dict
    c([a, a], {"a": a}, (a, 1))


def maybe(x, y):
    if y is None:
        return x + 1
    return x + y


def test_none_versus_tensor():
    c = Case(maybe)
    x = torch.randn(3)
    c(x, None)
    c(x, x)
    c(x, None)
    assert c.compiles == 2


# ---- globals, builtins, closures, grad mode ------------------------------------------
SCALE = 2
BIAS = torch.ones(3)


def act(x):
    return torch.relu(x)


def uses_globals(x):
    return act(x) * SCALE + BIAS


def test_global_constant_changed():
    global SCALE
    c = Case(uses_globals)
    x = torch.randn(3)
    c(x)
    try:
        SCALE = 5
        c(x)
        assert c.compiles == 2
    finally:
        SCALE = 2
    c(x)


def test_global_function_replaced():
    global act
    c = Case(uses_globals)
    x = torch.randn(3)
    c(x)
    old = act
    try:
        act = torch.tanh
        c(x)

        def act(x):  # noqa: F811 - a new global function
            return x * 3

        c(x)
    finally:
        act = old
    c(x)


def test_global_tensor_replaced():
    global BIAS
    c = Case(uses_globals)
    x = torch.randn(3)
    c(x)
    old = BIAS
    try:
        BIAS = torch.full((3,), 7.0)  # same metadata, new values
        c(x)
        BIAS = torch.ones(1, 3)  # new shape
        c(x)
        BIAS = torch.ones(3, dtype=torch.float64)
        c(x)
    finally:
        BIAS = old


def test_global_deleted_raises_like_eager():
    global SCALE
    c = Case(uses_globals)
    x = torch.randn(3)
    c(x)
    try:
        del SCALE
        with pytest.raises(NameError):
            uses_globals(x)
        with pytest.raises(NameError):
            c.compiled(x)
    finally:
        SCALE = 2


def uses_abs(x):
    return abs(x) + 1


def test_builtin_shadowed_by_global():
    c = Case(uses_abs)
    x = torch.randn(3)
    c(x)
    g = uses_abs.__globals__
    g["abs"] = lambda v: v * 10
    try:
        c(x)
        assert c.compiles == 2
    finally:
        del g["abs"]
    c(x)


def make_closure():
    k = 2

    def inner(x):
        return x * k

    def set_k(v):
        nonlocal k
        k = v

    return inner, set_k


def test_closure_variable_changed():
    inner, set_k = make_closure()
    c = Case(inner)
    x = torch.randn(3)
    c(x)
    set_k(3)
    c(x)
    set_k(torch.ones(3))
    c(x)
    set_k(2)
    c(x)


def test_grad_mode_changed():
    c = Case(add_mul)
    x = torch.randn(3, requires_grad=True)
    c(x)
    with torch.no_grad():
        c(x)
        assert not c.compiled(x).requires_grad
    assert c.compiled(x).requires_grad


# ---- modules -------------------------------------------------------------------------
class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 4)
        self.scale = 2.0

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        if self.training:
            h = h * self.scale
        return self.fc2(h)


def test_module_program_is_all_c():
    c = Case(MLP())
    c(torch.randn(2, 8))
    guard = _program(c)
    assert guard.residual_source is None
    kinds = [op[0] for op in guard.fn.ops]
    assert kinds.count("CHECK_TENSOR") == 5  # input + 4 parameters


def test_parameter_replaced_same_metadata():
    m = MLP()
    c = Case(m)
    x = torch.randn(2, 8)
    c(x)
    m.fc1.weight = nn.Parameter(torch.randn(16, 8))
    c(x)  # fresh values are read on every call
    m.fc1._parameters["bias"] = nn.Parameter(torch.randn(16))
    c(x)


def test_parameter_replaced_new_shape_and_submodule_replaced():
    m = MLP()
    c = Case(m)
    c(torch.randn(2, 8))
    m.fc2 = nn.Linear(16, 6)
    c(torch.randn(2, 8))
    m.fc1 = nn.Linear(5, 16)
    c(torch.randn(2, 5))
    assert c.compiles == 3


@pytest.mark.parametrize("change", [
    pytest.param(lambda m: m.double(), id="module.double() keeps parameter identity"),
    pytest.param(lambda m: m.fc1.weight.requires_grad_(False), id="requires_grad_ in place"),
    pytest.param(lambda m: setattr(m.fc1.weight, "data", m.fc1.weight.data.t().contiguous().t()),
                 id=".data with new strides"),
    pytest.param(lambda m: setattr(m.fc2.bias, "data", torch.zeros(1)), id=".data with new shape"),
])
def test_parameter_changed_in_place_recompiles(change):
    m = MLP()
    c = Case(m)
    x = torch.randn(2, 8)
    c(x)
    ids = [id(p) for p in m.parameters()]
    change(m)
    assert [id(p) for p in m.parameters()] == ids  # same objects, new metadata
    assert [a for a, _ in _guard_answers(c.fn, c.code, (c.compiled, x))] == [False]
    x2 = x.double() if m.fc1.weight.dtype == torch.float64 else x
    c(x2)
    assert c.compiles == 2


def test_module_attribute_and_training_changed():
    m = MLP()
    c = Case(m)
    x = torch.randn(2, 8)
    c(x)
    m.scale = 3.0
    c(x)
    m.eval()
    c(x)
    m.train()
    c(x)
    assert c.compiles == 3


def test_forward_hook_added_after_compile_runs():
    m = MLP()
    c = Case(m)
    x = torch.randn(2, 8)
    c(x)
    calls = []

    def hook(mod, args, out):
        calls.append(1)
        return out + 100

    handle = m.fc2.register_forward_hook(hook)
    try:
        got = c.compiled(x)
        assert calls, "the hook did not run"
        assert_same(m(x), got)
    finally:
        handle.remove()
    c(x)


def test_global_forward_hook_added_after_compile_runs():
    m = MLP()
    c = Case(m)
    x = torch.randn(2, 8)
    c(x)
    calls = []
    handle = nn.modules.module.register_module_forward_hook(
        lambda mod, a, out: calls.append(type(mod).__name__.replace("Optimized", "")))
    try:
        m(x)
        eager_calls = list(calls)
        calls.clear()
        c.compiled(x)
        assert calls == eager_calls == ["Linear", "Linear", "MLP"]
    finally:
        handle.remove()
    c(x)


class Stack(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(n))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def test_module_list_grows_and_layer_weight_changes():
    m = Stack(5)
    c = Case(m)
    x = torch.randn(2, 4)
    c(x)
    m.layers.append(nn.Linear(4, 4))
    c(x)
    with torch.no_grad():
        m.layers[3].weight.mul_(2)  # values only: no recompile, fresh result
    c(x)
    m.layers[2].weight.data = torch.randn(4, 4).t()
    c(x)
    assert c.compiles == 3


# ---- GuardProgram units ----------------------------------------------------------------
def _prog(ops, nargs=1, nregs=None, residual=None):
    n = nargs + 2
    return _C.GuardProgram(n, nregs if nregs is not None else n + 8, ops, residual)


def test_program_validates_registers():
    with pytest.raises(ValueError):
        _prog([("CHECK_ID", 7, 0, 0, None)])  # register never loaded
    with pytest.raises(ValueError):
        _prog([("LOAD_ATTR", 0, 0, 0, "x")])  # writes an argument register
    with pytest.raises(ValueError):
        _prog([("NO_SUCH_OP", 0, 0, 0, None)])
    with pytest.raises(TypeError):
        _prog([("CHECK_TENSOR", 0, 0, 0, (int,))])


def test_class_lacks_follows_the_class_and_its_bases():
    class Base:
        pass

    class Child(Base):
        pass

    p = _prog([("CHECK_CLASS_LACKS", 0, 0, 0, ("zz", "__getattr__"))])
    c = Child()
    c.zz = 1  # an instance attribute is not the class's
    assert p(c, {}, None) and p(c, {}, None)
    Base.zz = 2
    assert not p(c, {}, None)
    del Base.zz
    assert p(c, {}, None)
    Child.__getattr__ = lambda self, name: 3
    assert not p(c, {}, None)
    with pytest.raises(TypeError):
        _prog([("CHECK_CLASS_LACKS", 0, 0, 0, ["zz"])])  # the names are a tuple of str


def test_not_hasattr_is_the_builtin_lookup():
    calls = []

    class Lazy:
        def __getattr__(self, name):  # hasattr asks it, as eager's hasattr does
            calls.append(name)
            if name == "made":
                return 1
            raise AttributeError(name)

    class Broken:
        def __getattr__(self, name):
            raise KeyError(name)  # not an AttributeError: hasattr raises, the guard fails

    p = _prog([("CHECK_NOT_HASATTR", 0, 0, 0, "jax")])
    assert p(Obj(), {}, None) is True
    o = Obj()
    o.jax = 0
    assert p(o, {}, None) is False
    assert p(Lazy(), {}, None) is True and calls == ["jax"]
    assert _prog([("CHECK_NOT_HASATTR", 0, 0, 0, "made")])(Lazy(), {}, None) is False
    assert p(Broken(), {}, None) is False
    with pytest.raises(TypeError):
        _prog([("CHECK_NOT_HASATTR", 0, 0, 0, 3)])


def test_distinct_checks_identity_and_the_fixed_ids():
    a, b, c = Obj(), Obj(), Obj()
    ops = [("LOAD_ITEM", 3, 0, 0, 0), ("LOAD_ITEM", 4, 0, 0, 1), ("LOAD_ITEM", 5, 0, 0, 2),
           ("CHECK_DISTINCT", 3, 0, 0, ((3, 4, 5), frozenset({id(c)})))]
    p = _prog(ops)
    assert p([a, b, Obj()], {}, None) is True
    assert p([a, a, Obj()], {}, None) is False  # two are one object
    assert p([a, b, c], {}, None) is False  # one is an object whose id is fixed
    assert _prog(ops[:3] + [("CHECK_DISTINCT", 3, 0, 0, ((3, 4, 5), frozenset()))])([a, b, c], {}, None) is True
    with pytest.raises(ValueError):
        _prog([("CHECK_DISTINCT", 0, 0, 0, ((0, 6), frozenset()))])  # register 6 never loaded
    with pytest.raises(TypeError):
        _prog([("CHECK_DISTINCT", 0, 0, 0, ((0,), {1}))])  # a frozenset, not a set


def test_load_item_own_lookup_skips_the_subclass_methods():
    class Table(dict):
        def __getitem__(self, key):  # the guard never runs this
            raise AssertionError("override called")

        def __missing__(self, key):
            raise AssertionError("__missing__ called")

    class Pair(tuple):
        def __getitem__(self, i):
            raise AssertionError("override called")

    p = _prog([("LOAD_ITEM", 3, 0, 1, "gelu"), ("CHECK_EQ", 3, 0, 0, 1)])
    t = Table(gelu=1)
    assert p(t, {}, None) is True and p(t, {}, None) is True
    dict.__setitem__(t, "gelu", 2)
    assert p(t, {}, None) is False
    assert p(Table(), {}, None) is False  # missing: the guard fails, __missing__ is not asked
    q = _prog([("LOAD_ITEM", 3, 0, 1, -1), ("CHECK_EQ", 3, 0, 0, "b")])
    assert q(Pair(("a", "b")), {}, None) is True
    assert q(Pair(()), {}, None) is False
    assert q(["a", "b"], {}, None) is False  # neither a dict nor a tuple
    with pytest.raises(TypeError):
        _prog([("LOAD_ITEM", 3, 0, 1, 1.5)])


def test_program_eq_has_no_identity_shortcut():
    nan = float("nan")
    p = _prog([("CHECK_EQ", 0, 0, 0, nan)])
    assert p(nan, {}, None) is False  # nan == nan is False in Python
    assert p(1.0, {}, None) is False
    q = _prog([("CHECK_EQ", 0, 0, 0, 3)])
    assert q(3, {}, None) is True and q(3.0, {}, None) is True and q(4, {}, None) is False


def test_program_int_eq_and_ne_are_ints_own_comparison():
    # exact ints compare by value in C; past 64 bits, bools and int subclasses by Python's ==
    big = 2 ** 70

    class Loose(int):
        def __eq__(self, other):
            return True

        __hash__ = int.__hash__

    eq, ne = _prog([("CHECK_EQ", 0, 0, 0, 0)]), _prog([("CHECK_NE", 0, 0, 0, 0)])
    assert [eq(v, {}, None) for v in (0, 1, -1, False, True, big, Loose(5))] == \
        [True, False, False, True, False, False, True]
    assert [ne(v, {}, None) for v in (0, 1, big, False)] == [False, True, True, False]
    assert _prog([("CHECK_EQ", 0, 0, 0, big)])(2 ** 70, {}, None) is True
    assert _prog([("CHECK_EQ", 0, 0, 0, -2 ** 63)])(-2 ** 63, {}, None) is True


def test_program_wrong_argument_count_fails():
    p = _prog([])
    assert p(1, {}, None) is True
    assert p({}, None) is False


class Obj:
    def __init__(self):
        self.a = 1


def test_load_attr_cache_sees_class_changes_and_class_reassignment():
    p = _prog([("LOAD_ATTR", 3, 0, 0, "a"), ("CHECK_EQ", 3, 0, 0, 1)])
    o = Obj()
    assert p(o, {}, None) and p(o, {}, None)
    o.a = 2
    assert not p(o, {}, None)
    o.a = 1

    class Shadow(Obj):
        pass

    s = Shadow()
    assert p(s, {}, None)
    Shadow.a = property(lambda self: 5)  # a data descriptor now wins over the instance dict
    assert not p(s, {}, None)
    del Shadow.a
    assert p(s, {}, None)

    class Other:
        a = 1  # class attribute only

    o.__class__ = Other
    del o.a
    assert p(o, {}, None)


def test_load_attr_through_the_dict_descriptor():
    p = _prog([("LOAD_ATTR", 3, 0, 0, "__dict__"), ("CHECK_NOT_IN", 3, 0, 0, "forward")])
    o = Obj()
    assert p(o, {}, None) and p(o, {}, None)
    o.forward = 1
    assert not p(o, {}, None)
    o.__dict__ = {"a": 1}
    assert p(o, {}, None)

    class Slotted:
        __slots__ = ()

        def __getattr__(self, name):  # no instance dict: getattr falls back to this
            return {"forward": 2}

    assert not p(Slotted(), {}, None) and not p(Slotted(), {}, None)
    assert p(o, {}, None)


def test_load_item_cache_sees_mutation():
    d = {"k": 1}
    p = _prog([("LOAD_ITEM", 3, 0, 0, "k"), ("CHECK_EQ", 3, 0, 0, 1)])
    assert p(d, {}, None) and p(d, {}, None)
    d["k"] = 2
    assert not p(d, {}, None)
    d["k"] = 1
    assert p(d, {}, None)
    del d["k"]
    assert not p(d, {}, None)  # KeyError: failed, not raised
    assert p({"k": 1}, {}, None)


def test_program_errors():
    class Boom:
        def __eq__(self, other):
            raise ValueError("boom")

    p = _prog([("CHECK_EQ", 0, 0, 0, 1)])
    assert p(Boom(), {}, None) is False

    class Stop:
        def __eq__(self, other):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        p(Stop(), {}, None)


def test_residual_runs_after_c_checks():
    seen = []

    def residual(x, g, f):
        seen.append(x)
        return x < 3

    p = _prog([("CHECK_TYPE", 0, 0, 0, int)], residual=residual)
    assert p(2, {}, None) is True
    assert p(5, {}, None) is False
    assert p("s", {}, None) is False
    assert seen == [2, 5]


def test_untranslatable_expression_goes_to_residual():
    from dynamo_lite.guards import ExprGuard, GuardSet, TypeGuard
    from dynamo_lite.source import LocalSource

    gs = GuardSet()
    gs.add(TypeGuard(LocalSource("x"), int))
    gs.add(ExprGuard("x < 3"))
    guard = gs.compile(("x",))
    assert guard.residual_source is not None and "x < 3" in guard.residual_source
    assert guard.fn(2, {}, None) is True and guard.fn(4, {}, None) is False


def test_program_is_collected_with_a_cycle():
    holder = []
    p = _prog([("CHECK_ID", 0, 0, 0, holder)])
    holder.append(p)
    ref = weakref.ref(p)
    del p, holder
    gc.collect()
    assert ref() is None


def test_tensor_check_matches_attributes_on_many_tensors():
    specs = [torch.randn(3, 4), torch.randn(3, 4).t(), torch.zeros(2, dtype=torch.int64),
             nn.Parameter(torch.randn(2, 2)), torch.randn(2, requires_grad=True), torch.tensor(3.0),
             torch.empty(2, 3, device="meta"), torch.randn(6)[::2]]
    from dynamo_lite.guards import TensorSpec

    for want in specs:
        spec = TensorSpec.of(want)
        codes = tensor_api.codes(spec.dtype, spec.device) if tensor_api.eligible(spec.type) else None
        p = _prog([("CHECK_TENSOR", 0, 0, 0, (spec.type, spec.dtype, spec.device, spec.shape, spec.stride,
                                                spec.requires_grad, codes))])
        for t in specs:
            expected = TensorSpec.of(t) == spec
            assert p(t, {}, None) is expected, (want, t)


# ---- entries that run the original code ------------------------------------------------
def plain_add(a, b):  # no tensor argument, no global: nothing to capture
    return a + b


def test_nothing_to_capture_is_cached_per_argument_types():
    c = Case(plain_add)
    assert c(1, 2, compiled=False) == 3
    cache = _C.get_cache(plain_add.__code__)
    assert [e.code for e in cache] == [None]  # runs the original code, no callback next time
    check = cache[0].check
    assert check(1, 2, plain_add.__globals__, plain_add) is True
    assert check(1.0, 2, plain_add.__globals__, plain_add) is False
    assert c(5, 6, compiled=False) == 11
    assert len(_C.get_cache(plain_add.__code__)) == 1
    assert c("a", "b", compiled=False) == "ab"  # other types: one more entry
    assert len(_C.get_cache(plain_add.__code__)) == 2
    x = torch.randn(3)
    c(x, x)  # a tensor: compiled as usual
    assert c.compiles == 1
    assert c(7, 1, compiled=False) == 8
    dynamo_lite.reset()
    assert _C.get_cache(plain_add.__code__) is None


def test_cache_limit_falls_back_to_eager_without_hiding_entries():
    from dynamo_lite import config

    with config.patch(cache_size_limit=2):
        c = Case(add_mul)
        a, b = torch.randn(2), torch.randn(3)
        c(a)
        c(b)
        c(torch.randn(4), compiled=False)  # limit reached: eager from now on when nothing matches
        cache = _C.get_cache(add_mul.__code__)
        assert (cache[-1].check, cache[-1].code) == (_C.ALWAYS, None)
        assert c.compiles == 2
        c(torch.randn(5), compiled=False)
        c(a)  # the compiled entries still match first
        c(b)
        assert c.compiles == 2
        assert (_C.get_cache(add_mul.__code__)[-1].check, _C.get_cache(add_mul.__code__)[-1].code) == \
            (_C.ALWAYS, None)


# ---- OptimizedModule.__call__ fast path ------------------------------------------------
def test_top_level_hooks_added_after_compile_run():
    m = MLP()
    compiled = dynamo_lite.compile(m, backend="eager")
    x = torch.randn(2, 8)
    compiled(x)
    seen = []
    pre = m.register_forward_pre_hook(lambda mod, args: (args[0] * 0,))
    post = m.register_forward_hook(lambda mod, args, out: seen.append(out.shape) or out + 1)
    try:
        assert_same(m(x), compiled(x))
        assert seen == [torch.Size([2, 4])] * 2
    finally:
        pre.remove()
        post.remove()
    assert_same(m(x), compiled(x))


class CustomCall(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)

    def __call__(self, x):
        return super().__call__(x) * 10  # a class-level __call__ must not be skipped

    def forward(self, x):
        return self.fc(x)


def test_module_with_its_own_call_keeps_it():
    m = CustomCall()
    compiled = dynamo_lite.compile(m, backend="eager")
    x = torch.randn(2, 3)
    assert_same(m(x), compiled(x))
    assert_same(m(x), compiled(x))


# ---- guard kinds: the Python expression and the C emission agree -------------------------
class _Obj:
    pass


def _obj(**attrs):
    o = _Obj()
    o.__dict__.update(attrs)
    return o


_SHARED = _Obj()


class _Strict(dict):
    """A dict subclass whose own lookup must not run in a guard."""

    def __getitem__(self, key):
        raise AssertionError("the subclass's __getitem__ ran")
_HOLDER = _obj(v=_SHARED)
_MOD = nn.Linear(1, 1)


def _kind_cases():
    """(guard, arg names, passing args, failing args, globals of the failing call, in C?) per kind."""
    from dynamo_lite import guards as g
    from dynamo_lite.source import AttrSource, DictItemSource, GlobalSource, ItemSource, LocalSource

    x, y = LocalSource("x"), LocalSource("y")
    t = torch.randn(2, 3)
    return {
        "TYPE": (g.TypeGuard(x, int), ("x",), (1,), ("s",), None, True),
        "ID": (g.IdGuard(x, _SHARED), ("x",), (_SHARED,), (_Obj(),), None, True),
        "CONST": (g.ConstGuard(x, 3), ("x",), (3,), (3.0,), None, True),
        "CONST_NONE": (g.ConstGuard(x, None), ("x",), (None,), (0,), None, True),
        "LENGTH": (g.LengthGuard(x, 2), ("x",), ([1, 2],), ([1],), None, True),
        "EMPTY": (g.EmptyGuard(x, ("a", "b")), ("x",), (_obj(a=[], b={}),), (_obj(a=[], b={1: 2}),), None, True),
        "NOT_IN": (g.NotInGlobalsGuard("len"), ("x",), (0,), (0,), {"len": 1}, True),
        "DICT_KEYS": (g.DictKeysGuard(x, ("a", "b")), ("x",), ({"a": 1, "b": 2},), ({"b": 1, "a": 2},), None, True),
        "TENSOR": (g.TensorGuard.of(x, t), ("x",), (torch.randn(2, 3),), (t.double(),), None, True),
        "NAN": (g.NanGuard(x), ("x",), (float("nan"),), (1.0,), None, True),
        "NAN_STR": (g.NanGuard(x), ("x",), (-float("nan"),), ("nan",), None, True),
        "FLOAT_REPR": (g.FloatReprGuard(x, "-0.0"), ("x",), (-0.0,), (0.0,), None, True),
        "SET_EQ": (g.SetEqualsGuard(x, frozenset({1, 2})), ("x",), ({2, 1},), (frozenset({1, 2}),), None, True),
        # {8, 16, 24} made in that order iterates so; made otherwise, it may not (the same elements)
        "SET_ORDER": (g.SetOrderGuard(x, (8, 16, 24)), ("x",), ({8, 16, 24},), (_set_of_history(),), None, True),
        "SET_ORDER_FROZEN": (g.SetOrderGuard(x, (8, 16, 24)), ("x",), (frozenset([8, 16, 24]),),
                             (frozenset(_set_of_history()),), None, True),
        "NOT_IN_DICT": (g.NotInDictGuard(x, "a"), ("x",), (_obj(b=1),), (_obj(a=1),), None, True),
        "NOT_IN_DICT_PARAMS": (g.NotInDictGuard(x, "weight", "_parameters"), ("x",), (nn.ReLU(),),
                               (nn.Linear(1, 1),), None, True),
        "ABSENT_ATTR": (g.AbsentAttrGuard(x, "a"), ("x",), (_obj(),), (_obj(a=1),), None, True),
        "DISTINCT": (g.DistinctGuard.of((x, y)), ("x", "y"), (_Obj(), _Obj()), (_SHARED, _SHARED), None, True),
        "DISTINCT_FIXED": (g.DistinctGuard.of((x, y), frozenset({id(_SHARED)})), ("x", "y"), (_Obj(), _Obj()),
                           (_Obj(), _SHARED), None, True),
        "EXPR_IN_IS_FALSE": (g.ExprGuard("('k' in x) is False"), ("x",), ({"j": 1},), ({"k": 1},), None, True),
        "EXPR_ITEMS": (g.ExprGuard("list(x.items()) == {items}", (("items", [(int, _Obj), ("a", 1)]),)), ("x",),
                       ({int: _Obj, "a": True},), ({int: _Obj, "a": 2},), None, True),
        "EXPR_ITEMS_FUNC": (g.ExprGuard("list(x.items()) == {items}", (("items", [(int, _obj)]),)), ("x",),
                            ({int: _obj},), ({int: lambda **kw: 0},), None, True),
        "EXPR_NOT_HASATTR": (g.ExprGuard("not hasattr(x, 'a')"), ("x",), (_obj(),), (_obj(a=1),), None, True),
        "DICT_ITEM_OWN": (g.ConstGuard(DictItemSource(x, "k"), 1), ("x",), (_Strict(k=1),), (_Strict(k=2),), None,
                          True),
        "IS": (g.IsGuard(x, ("training",), True), ("x",), (nn.Linear(1, 1),), (nn.Linear(1, 1).eval(),), None, True),
        "IS_FUNC": (g.IsGuard(AttrSource(x, "f"), ("__func__",), _Obj.__init__), ("x",),
                    (_obj(f=types.MethodType(_Obj.__init__, 1)),), (_obj(f=types.MethodType(len, 1)),), None, True),
        "SAME": (g.SameObjectGuard(x, ItemSource(y, 0)), ("x", "y"), (_SHARED, [_SHARED]), (_SHARED, [_Obj()]),
                 None, True),
        "CONST_ATTR_IS": (g.ConstAttrIsGuard(_HOLDER, "v", _SHARED), ("x",), (0,), (0,), None, True),
        "EXPR": (g.ExprGuard("x < {n}", (("n", 3),)), ("x",), (2,), (4,), None, False),
        "EXPR_C": (g.ExprGuard("not {m}._forward_hooks", (("m", _MOD),)), ("x",), (0,), (0,), None, True),
        "GLOBAL_STATE": (g.GlobalStateGuard("___G['flag'] == 1"), ("x",), (0,), (0,), {"flag": 2}, True),
        "GLOBAL_NAME": (g.TypeGuard(GlobalSource("flag"), int), ("x",), (0,), (0,), {"flag": "1"}, True),
        "TENSOR_ALIASING": (g.TensorAliasingGuard.of((x, y), (t, t[0])), ("x", "y"), (t, t[1]), (t, t.clone()),
                            None, False),
        # fails while a dispatch mode is active (the failing call runs under one)
        "NO_OTHER_TRACER": (g.NoOtherTracerGuard(), ("x",), (0,), (0,), None, True),
        # a repeated block's template guards, stated about x.b (copied into C, or left to Python)
        "BLOCK": (g.BlockGuard(AttrSource(x, "b"), _block_check(), AttrSource(x, "b0")), ("x",),
                  (_obj(b=_obj(sub=_Obj(), a=3)),), (_obj(b=_obj(sub=_Obj(), a=4)),), None, True),
        "BLOCK_RESIDUAL": (g.BlockGuard(AttrSource(x, "b"), _block_check(residual=True), AttrSource(x, "b0")),
                           ("x",), (_obj(b=_obj(sub=_Obj(), a=3)),), (_obj(b=_obj(sub=_Obj(), a=1)),), None, False),
    }


def _set_of_history():
    """{8, 16, 24} inserted so that it does not iterate 8, 16, 24 (24 took 0's slot)."""
    s = {0, 8, 16}
    s.discard(0)
    s.add(24)
    assert list(s) != [8, 16, 24] and s == {8, 16, 24}
    return s


def _block_check(residual=False):
    """A template's guards over ("___block", "x"): its ``sub`` is an _Obj, its ``a`` is 3 (or,
    untranslatable to C, at least 2)."""
    from dynamo_lite import guards as g
    from dynamo_lite.source import AttrSource, LocalSource

    block = LocalSource("___block")
    gs = g.GuardSet()
    gs.add(g.TypeGuard(AttrSource(block, "sub"), _Obj))
    gs.add(g.ExprGuard("___block.a > {n}", (("n", 2),)) if residual else g.ConstGuard(AttrSource(block, "a"), 3))
    return gs.compile(("___block", "x"))


def test_block_guard_names_the_block_and_shares_loads():
    from dynamo_lite import guards as g
    from dynamo_lite.source import AttrSource, LocalSource

    x = LocalSource("x")
    gs = g.GuardSet()
    gs.add(g.TypeGuard(AttrSource(AttrSource(x, "b"), "sub"), _Obj))  # also read by the template's check
    gs.add(g.BlockGuard(AttrSource(x, "b"), _block_check(), AttrSource(x, "b0")))
    compiled = gs.compile(("x",))
    text = compiled.program_text()
    assert text.count(".sub") == 1 and text.count(".b\n") == 1, text
    good, bad = _obj(b=_obj(sub=_Obj(), a=3)), _obj(b=_obj(sub=_Obj(), a=5))
    assert compiled.fn(good, {}, None) is True and compiled.py_fn(good, {}, None) is True
    assert compiled.fn(bad, {}, None) is False and compiled.py_fn(bad, {}, None) is False
    assert compiled.explain_failure((bad,), {}, None) == "x.b.a changed from 3 to 5"
    assert "its template x.b0" in g.BlockGuard(AttrSource(x, "b"), _block_check(), AttrSource(x, "b0")).describe()


@pytest.mark.parametrize("case", sorted(_kind_cases()))
def test_guard_kind_python_and_c_agree(case, monkeypatch):
    import logging

    from dynamo_lite import guards as g

    guard, names, good, bad, bad_globals, in_c = _kind_cases()[case]
    monkeypatch.setattr(g, "USE_PROGRAM", True)
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    log = logging.getLogger("dynamo_lite.guards")
    old_level = log.level
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        gs = g.GuardSet()
        gs.add(guard)
        compiled = gs.compile(names)
    finally:
        log.removeHandler(handler)
        log.setLevel(old_level)
    assert isinstance(compiled.fn, _C.GuardProgram)
    residual = [r.getMessage() for r in records if "Residual" in r.getMessage()]
    if in_c:
        assert compiled.residual_source is None and residual == []
    else:  # not silent: the log names the kind and the readable line
        assert compiled.residual_source is not None
        assert residual and guard.kind in residual[0] and guard.describe() in residual[0]
    good_globals = {"flag": 1}
    assert compiled.fn(*good, good_globals, None) is True
    assert compiled.py_fn(*good, good_globals, None) is True
    assert compiled.explain_failure(good, good_globals, None) is None
    bad_globals = {**good_globals, **(bad_globals or {})}
    if case == "CONST_ATTR_IS":
        monkeypatch.setattr(_HOLDER, "v", _Obj())
    hook = _MOD.register_forward_hook(lambda *a: None) if case == "EXPR_C" else None
    from torch.utils._python_dispatch import TorchDispatchMode
    mode = TorchDispatchMode() if case == "NO_OTHER_TRACER" else contextlib.nullcontext()
    try:
        with mode:
            assert compiled.fn(*bad, bad_globals, None) is False
            assert compiled.py_fn(*bad, bad_globals, None) is False
            why = compiled.explain_failure(bad, bad_globals, None)
    finally:
        if hook is not None:
            hook.remove()
    assert isinstance(why, str) and why


def test_guard_kinds_deduplicate_by_fields():
    from dynamo_lite import guards as g
    from dynamo_lite.source import LocalSource

    x = LocalSource("x")
    gs = g.GuardSet()
    for _ in range(2):
        gs.add(g.TypeGuard(LocalSource("x"), int))
        gs.add(g.ConstGuard(x, 1))
        gs.add(g.ConstGuard(x, True))  # 1 == True, but not the same constant
        gs.add(g.IdGuard(x, [1]))  # identity: a new list each time
        gs.add(g.SetEqualsGuard(x, frozenset({1})))
        gs.add(g.ExprGuard("x > {v}", (("v", 2),)))
    assert len(gs) == 1 + 2 + 2 + 1 + 1
    assert [type(k).__name__ for k in gs][:3] == ["TypeGuard", "IdGuard", "IdGuard"]


def test_guard_log_shows_the_c_program_example():
    from dynamo_lite import guards as g
    from dynamo_lite.source import AttrSource, LocalSource

    m = LocalSource("m")
    gs = g.GuardSet()
    gs.add(g.NotInDictGuard(m, "forward"))
    gs.add(g.IdGuard(m, _MOD))
    gs.add(g.IsGuard(m, ("training",), True))
    gs.add(g.TensorGuard.of(AttrSource(m, "weight"), _MOD.weight))
    gs.add(g.TypeGuard(LocalSource("n"), int))
    compiled = gs.compile(("m", "n"))
    assert compiled.residual_source is None
    assert compiled.program_text() == PROGRAM_EXAMPLE, compiled.program_text()


# docs/how-it-works.md shows this program (keep the two in step)
PROGRAM_EXAMPLE = """\
r0 = m  r1 = n  r2 = ___G  r3 = ___F
CHECK_TYPE r1 int
CHECK_ID r0 <Linear>
r4 = LOAD_ATTR r0 .__dict__
CHECK_NOT_IN r4 'forward'
r5 = LOAD_ATTR r0 .training
CHECK_ID r5 True
r6 = LOAD_ATTR r0 .weight
CHECK_TENSOR r6 Parameter float32 cpu shape=[1, 1] stride=[1, 1] requires_grad=True"""


class _SpecConfig:
    """transformers' configs: a Python __getattribute__ that reads the instance dict through
    object.__getattribute__ on every attribute read."""

    def __init__(self):
        self.hidden = 4

    def __getattribute__(self, key):
        spec = super().__getattribute__("__dict__").get("_spec")
        if spec is not None:
            key = spec.get(key, key)
        return super().__getattribute__(key)


def _with_spec_config(x, config):
    if hasattr(config, "vision_layers"):
        x = x + 1
    return x * config.hidden


def test_guards_read_an_instance_dict_without_the_classs_getattribute():
    # the dict the trace read through object.__getattribute__, and the dict that says hasattr()
    # is False, are read the same way by the guards, in C: never through the user's method (the
    # Python residual ran it on every call)
    c = Case(_with_spec_config)
    config = _SpecConfig()
    c(torch.ones(2), config)
    c(torch.ones(2), config)
    guard = _program(c)
    assert guard.residual_source is None, guard.residual_source
    dict_loads = [line for line in guard.program_text().splitlines() if line.endswith(".__dict__")]
    assert dict_loads == [], dict_loads  # (each is "... .__dict__ (generic)")
    config._spec = {"hidden": "vision_layers"}
    config.vision_layers = 5
    c(torch.ones(2), config)
    assert c.compiles == 2
