"""shapes.py and the shape guard kinds on their own: the automatic-dynamic memory, sympy facts
lowered to guard expressions, and CHECK_INT_EXPR / CHECK_INT_RANGE / LOAD_SIZE in C against
the same expressions evaluated by Python."""
import random

import pytest
import sympy
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from dynamo_lite import _C
from dynamo_lite.guards import GuardSet, ShapeEqGuard, ShapeRangeGuard, ShapeRelGuard, TensorGuard
from dynamo_lite.guards.kinds import eval_expr, render_expr
from dynamo_lite.shapes import FrameSizes, ShapeTracker
from dynamo_lite.source import LocalSource, TensorSizeSource, TensorStrideSource

A, B = LocalSource("a"), LocalSource("b")


def test_frame_sizes_remember_what_changed():
    sizes = FrameSizes()
    assert sizes.merge_sizes("x", (4, 3)) == (4, 3)
    assert sizes.merge_sizes("x", (4, 3)) == (4, 3)
    assert sizes.merge_sizes("x", (5, 3)) == (None, 3)
    assert sizes.merge_sizes("x", (4, 3)) == (None, 3)  # symbolic once changed
    assert sizes.merge_sizes("x", (4, 3, 1)) == (4, 3, 1)  # another rank: a new tensor
    assert not sizes.merge_int("n", 2) and not sizes.merge_int("n", 2)
    assert sizes.merge_int("n", 3) and sizes.merge_int("n", 2)
    assert list(sizes.changed) == ["x", "n"]


def _rand_expr(rng, depth=0):
    if depth > 3 or rng.random() < 0.3:
        return rng.choice([("src", A), ("src", B), ("int", rng.randint(-5, 9))])
    op = rng.choice(["+", "*", "//", "%", "max", "min", "**"])
    if op == "**":
        return ("**", _rand_expr(rng, depth + 1), ("int", rng.randint(0, 3)))
    return (op, _rand_expr(rng, depth + 1), _rand_expr(rng, depth + 1))


def _program_for(relation):
    guard = ShapeRelGuard(relation, "", None)
    gs = GuardSet()
    gs.add(guard)
    return gs.compile(("a", "b"))


@pytest.mark.parametrize("seed", range(6))
def test_c_int_expressions_equal_python(seed):
    rng = random.Random(seed)
    for _ in range(60):
        left, right = _rand_expr(rng), _rand_expr(rng)
        relation = (rng.choice(["==", "!=", "<", "<=", ">", ">="]), left, right)
        compiled = _program_for(relation)
        assert compiled.residual_source is None
        for _ in range(6):
            a, b = rng.randint(-7, 7), rng.randint(-7, 7)
            try:
                expected = bool(eval_expr(relation, {A: a, B: b}.__getitem__))
            except ZeroDivisionError:
                expected = False  # a guard that raises has failed
            try:
                py = compiled.py_fn(a, b, {}, None)
            except ZeroDivisionError:
                py = False
            assert compiled.fn(a, b, {}, None) is expected is py, (render_expr(relation, str), a, b)


def test_c_int_checks_refuse_non_ints_and_overflow():
    compiled = _program_for(("==", ("*", ("src", A), ("src", A)), ("int", 4)))
    assert compiled.fn(2, 0, {}, None) is True
    assert compiled.fn(2.0, 0, {}, None) is False  # not an int
    assert compiled.fn(True, 0, {}, None) is False
    assert compiled.fn(2 ** 40, 0, {}, None) is False  # int64 overflow: fails (recompiles)
    gs = GuardSet()
    gs.add(ShapeRangeGuard(A, 2, 8))
    rng = gs.compile(("a", "b"))
    assert [rng.fn(v, 0, {}, None) for v in (1, 2, 8, 9, "3")] == [False, True, True, False, False]


def test_bad_int_expr_programs_are_rejected():
    with pytest.raises(ValueError):
        _C.GuardProgram(3, 3, [("CHECK_INT_EXPR", 0, 0, 0, ((1, 2), (2, 2)))])  # + needs two values
    with pytest.raises(ValueError):
        _C.GuardProgram(3, 3, [("CHECK_INT_EXPR", 0, 0, 0, ((0, 7),))])  # register not loaded
    with pytest.raises(TypeError):
        _C.GuardProgram(3, 3, [("CHECK_INT_RANGE", 0, 0, 0, "x")])


def test_size_and_stride_loads_read_the_tensor():
    x = torch.randn(4, 6)
    gs = GuardSet()
    gs.add(TensorGuard.of(A, x, ("s0", 6), ("s1", 1)))
    gs.add(ShapeRangeGuard(TensorSizeSource(A, 0), 2, None))
    gs.add(ShapeEqGuard(TensorStrideSource(A, 0), ("src", TensorSizeSource(A, 1))))
    compiled = gs.compile(("a", "b"))
    assert {op[0] for op in compiled.fn.ops} >= {"LOAD_SIZE", "LOAD_STRIDE", "CHECK_INT_RANGE", "CHECK_INT_EQ"}
    for t in [x, torch.randn(9, 6), torch.randn(1, 6), torch.randn(6, 4).t(), torch.randn(4, 5), "x"]:
        assert compiled.fn(t, 0, {}, None) is compiled.py_fn(t, 0, {}, None)
    assert compiled.fn(torch.randn(9, 6), 0, {}, None) is True
    assert compiled.fn(torch.randn(6, 4).t(), 0, {}, None) is False


def test_lowering_sympy_facts():
    st = ShapeTracker(True, None)
    mode = FakeTensorMode(shape_env=st.env, static_shapes=True)
    fx, shape, stride = st.fake_input(mode, torch.randn(4, 6), A)
    assert type(shape[0]) is str and type(shape[1]) is str and stride[1] == 1
    s0, s1 = fx.shape[0].node.expr, fx.shape[1].node.expr
    lowered = st.lower(sympy.Eq(sympy.Mod(s0 * s1, 2), 0))
    assert render_expr(lowered, lambda s: s.pretty()) in ("(a.size(0) * a.size(1)) % 2 == 0",
                                                         "(a.size(1) * a.size(0)) % 2 == 0")
    guards = st.produce_guards()
    texts = [g.describe() for g in guards]
    assert "a.size(0) >= 2" in texts and "a.size(1) >= 2" in texts and "a.stride(0) == a.size(1)" in texts


def test_sizes_of_zero_and_one_stay_static_ints_of_zero_and_one_do_not():
    # sizes 0 and 1 are specialised (torch's rule); an int argument is not a size: torch.compile's
    # unspecialised ints are symbolic at 0 and 1 too
    st = ShapeTracker(True, None)
    mode = FakeTensorMode(shape_env=st.env, static_shapes=True)
    fx, shape, _ = st.fake_input(mode, torch.randn(1, 0, 5), A)
    assert shape[0] == 1 and shape[1] == 0 and type(shape[2]) is str
    assert isinstance(st.int_symbol(1, B), torch.SymInt) and isinstance(st.int_symbol(0, B), torch.SymInt)
    assert isinstance(st.int_symbol(7, B), torch.SymInt)
    assert st.int_symbol(1.0, B) is None and st.int_symbol(0.0, B) is None  # (floats 0.0 and 1.0 stay static)
