"""Tensor attributes, metadata, promotion, indexing/setitem, strides and in-place ops, eager vs compiled.

Every test compares compiled with eager through dynamo_lite.testing; known bugs are strict
xfails in tests/test_known_bugs.py.
"""
import operator

import pytest
import torch
import torch.nn.functional as F

import dynamo_lite
from dynamo_lite.testing import assert_same
from dynamo_lite.testing import check, check_breaks, check_calls


def _compiled(fn, backend="eager"):
    return dynamo_lite.compile(fn, backend=backend)


# ---------------------------------------------------------------------------
# tensor attributes, metadata, promotion
# ---------------------------------------------------------------------------
def test_metadata_attributes_as_python_values():
    def f(x):
        return (x.shape, x.size(), x.dim(), x.numel(), x.dtype, x.device, x.requires_grad, x.is_leaf,
                x.grad_fn is None, x.is_contiguous(), x.stride(), x.T.stride(), x.mT.shape,
                x.t().is_contiguous(), x.storage_offset(), x[1:].storage_offset(), x.layout, x.is_cuda,
                x.itemsize, x.nbytes, x.dim_order(), x.permute(1, 0).dim_order())

    check(f, torch.randn(3, 4))


def test_python_scalar_classes_as_dtypes_stay_in_the_graph():
    # torch reads dtype=int / float / bool / complex as int64 / float64 / bool / complex128
    # (transformers' linear-attention caches build torch.tensor(0, dtype=int))
    def f(x):
        return (torch.tensor(0, dtype=int), x.to(float), torch.zeros(2, dtype=bool),
                x.new_ones(2, dtype=complex), torch.full((2,), 3, dtype=float), x.to(dtype=int))

    check(f, torch.randn(3), fullgraph=True)


def test_torch_size_behaves_like_a_tuple():
    def f(x):
        s = x.shape
        return (s == (2, 3), s == torch.Size([2, 3]), list(s), s + (1,), type(s + (1,)).__name__, s[1:],
                type(s[1:]).__name__, s.numel(), x.size()[::-1], str(s), s.index(3), s.count(2),
                hash(s) == hash((2, 3)), x.new_zeros(s[::-1]).shape, max(s), sum(s), divmod(s[1], 2))

    check(f, torch.ones(2, 3), graphs=None)


def test_grad_fn_names_and_leaf_flags_of_computed_tensors():
    def f(x):
        y = x * 2
        z = y.sum()
        return type(y.grad_fn).__name__, y.grad_fn.name(), z.grad_fn.name(), y.is_leaf, z.requires_grad

    check(f, torch.randn(3, requires_grad=True), graphs=None)


def test_returned_tensors_have_eager_grad_fn_types():
    def f(x):
        return x * 2, x.sum(), x[0], x.view(3), x.detach()

    x = torch.ones(3, requires_grad=True)
    eager, comp = f(x), _compiled(f)(x)
    assert [type(t.grad_fn).__name__ for t in comp] == [type(t.grad_fn).__name__ for t in eager]
    assert [t.is_leaf for t in comp] == [t.is_leaf for t in eager]


@pytest.mark.parametrize("name", ["H", "T", "mH", "itemsize", "nbytes", "is_cpu", "is_meta", "is_nested",
                                  "is_quantized", "output_nr", "retains_grad", "_has_symbolic_sizes_strides",
                                  "_backward_hooks", "__module__"])
def test_tensor_properties_of_inputs_and_computed_tensors(name):
    def f(x):
        y = x * 2
        a, b = getattr(x, name), getattr(y, name)
        return a if not isinstance(a, torch.Tensor) else a.clone(), b if not isinstance(b, torch.Tensor) else b.clone()

    check(f, torch.ones(2, 2, requires_grad=True), graphs=None)


_ARITH = {
    "int_div": lambda a, b: (a // b, a / b, a % b, -a // b, a // 2, a / 2, a % -3),
    "div_modes": lambda a, b: (torch.div(a, b, rounding_mode="floor"), torch.div(a, b, rounding_mode="trunc"),
                               torch.fmod(a, -3), torch.remainder(a, -3)),
    "int_pow": lambda a, b: (a ** 2, 2 ** a.abs(), a.abs() ** 0.5, a.float() ** a.abs(), torch.pow(a, 3)),
    "int_by_zero": lambda a, b: a // 0,
    "int_mod_zero_tensor": lambda a, b: a % (b * 0),
    "float_floor_div": lambda a, b: (a.float() // 0.3, a.float() // -2, a.float().div(0), a / 0),
    "promotion_dtypes": lambda a, b: ((a + 1.5).dtype, (a.to(torch.uint8) + 1).dtype, (a > 0).dtype,
                                      (a.to(torch.int32) + torch.ones(4)).dtype, ((a > 0) & True).dtype,
                                      (a.half() + torch.ones(4)).dtype, (a.to(torch.uint8) + a.to(torch.int8)).dtype,
                                      (torch.tensor(1.0, dtype=torch.float64) + torch.ones(4)).dtype),
    "comparisons": lambda a, b: (a == b, a < b, a != 1, (a == b).all(), torch.equal(a, b), a.eq(b).sum(),
                                 (a > 0) & (b > 0), ~(a > 0), a.float().isclose(b.float()), a == None),
    "mixed_cmp": lambda a, b: (a == b.double(), a < 0.5, a.eq(1.0), (a == 1).dtype, a > b.double()),
    "bool_arith_ok": lambda a, b: ((a > 2) + (a > 2), (a > 2).sum(), (a > 2).cumsum(0), (a > 2).argmax()),
    "bool_sub_error": lambda a, b: (a > 2) - (a > 2),
    "bool_neg_error": lambda a, b: -(a > 2),
    "int_pow_negative_error": lambda a, b: a ** -1,
    "int_overflow": lambda a, b: (a.to(torch.int8) * 100, a.to(torch.uint8) - 5),
    "reflected": lambda a, b: (2 / a, 7 // a, 7 % a, 1 - a, 5 & a, 2.5 ** a),
    "int_mean_error": lambda a, b: a.mean(),
    "int_reductions": lambda a, b: (a.mean(dtype=torch.float64), a.prod(), a.sum().dtype, a.max()),
    "matmul_int_and_mixed_error": lambda a, b: a.view(2, 2) @ a.float().view(2, 2),
}


@pytest.mark.parametrize("name", list(_ARITH))
def test_arithmetic_promotion_and_comparisons(name):
    op = _ARITH[name]

    def f(a, b):
        return op(a, b)

    check(f, torch.tensor([7, -7, 5, -5]), torch.tensor([2, 2, -3, -3]), graphs=None)


# ---------------------------------------------------------------------------
# indexing and setitem
# ---------------------------------------------------------------------------
_GETITEM = {
    "out_of_range": lambda x: x[5],
    "negative_out_of_range": lambda x: x[-4],
    "bool_mask_wrong_shape": lambda x: x[torch.tensor([True, False])],
    "list_of_bools": lambda x: x[[True, False, True]],
    "none_ellipsis_none": lambda x: x[None, ..., None],
    "empty_slice_and_list": lambda x: (x[1:1], x[[]], x[torch.tensor([], dtype=torch.long)]),
    "empty_mask_result": lambda x: x[x > 100],
    "double_ellipsis_error": lambda x: x[..., ...],
    "tensor_then_slice": lambda x: (x[torch.tensor([0, 2]), 1:], x[1:, torch.tensor([0, 1])]),
    "separated_advanced": lambda x: x.view(3, 2, 1)[[0, 1], :, [0, 0]],
    "range_and_list": lambda x: (x[range(2)], x[[0, 2]], x[[0, 2], [1, 1]], x[([0, 1], [1, 0])]),
    "negative_step_error": lambda x: x[::-1],
    "float_index_error": lambda x: x[2.0],
    "bool_scalars_and_none": lambda x: (x[True], x[False], x[None]),
    "float_tensor_index_error": lambda x: x[torch.tensor([0.0])],
    "int32_and_uint8_indices": lambda x: (x[torch.tensor([0, 2], dtype=torch.int32)],
                                          x[torch.tensor([1, 0, 1], dtype=torch.uint8)]),
    "too_many_indices": lambda x: x[0, 0, 0],
    "zero_dim_tensor_index": lambda x: x[torch.tensor(1)],
    "masks": lambda x: (x[x > 2], x[x[:, 0] > 1], x[..., 1], x[1, ...]),
    "broadcast_advanced": lambda x: (x[torch.arange(2), torch.arange(2)],
                                     x[torch.tensor([[0], [2]]), torch.tensor([0, 1])]),
    "slices_beyond_bounds": lambda x: (x[1:100, -100:], x[::5]),
    "numpy_int_index": lambda x: x[__import__("numpy").int64(1)],
}


@pytest.mark.parametrize("name", list(_GETITEM))
def test_getitem(name):
    op = _GETITEM[name]

    def f(x):
        return op(x)

    check(f, torch.arange(6.).view(3, 2), graphs=None)


_SETITEM = {
    "broadcast_error": lambda x: x.__setitem__(0, torch.ones(3)),
    "mask_with_values": lambda x: x.__setitem__(x > 2, torch.tensor([10., 20., 30.])),
    "mask_with_wrong_count": lambda x: x.__setitem__(x > 2, torch.tensor([10., 20.])),
    "duplicate_list_index": lambda x: x.__setitem__([0, 0], torch.tensor([[1., 1.], [2., 2.]])),
    "ellipsis": lambda x: x.__setitem__(..., 7),
    "none_then_int": lambda x: x.__setitem__((None, 0), 3),
    "strided": lambda x: x.__setitem__((slice(None, None, 2), 1), torch.tensor([5., 6.])),
    "from_own_view": lambda x: x.__setitem__(0, x[2]),
    "out_of_range": lambda x: x.__setitem__(10, 0),
    "empty_mask": lambda x: x.__setitem__(x > 100, 1),
    "zero_dim_index": lambda x: x.__setitem__(torch.tensor(1), 9),
    "list_pairs_and_augmented": lambda x: (x.__setitem__(([0, 1], [1, 0]), torch.tensor([9., 8.])),
                                           x[0, :2].__iadd__(1)),
}


@pytest.mark.parametrize("name", list(_SETITEM))
def test_setitem_on_input(name):
    op = _SETITEM[name]

    def f(x):
        op(x)
        return x

    check(f, torch.arange(6.).view(3, 2), graphs=None)


def test_setitem_converts_dtype_and_mask_zeroes_negatives():
    def f(x, y):
        x[0] = 2.7
        x[1] = True
        y[y < 0] = 0
        return x, y.sum()

    check(f, torch.zeros(3, dtype=torch.int32), torch.randn(10))


def test_index_put_accumulate_index_add_scatter_add():
    def f(x, i, v):
        x.index_put_((i,), v, accumulate=True)
        return x, torch.zeros(4).index_add(0, i, v), torch.zeros(4).scatter_add(0, i, v)

    check(f, torch.zeros(4), torch.tensor([0, 0, 2]), torch.tensor([1., 2., 3.]))


@pytest.mark.filterwarnings("ignore:The .grad attribute of a Tensor that is not a leaf")
def test_setitem_with_requires_grad_value_into_input():
    def f(x, v):
        x[0] = v
        return x, x.requires_grad, x.grad_fn is not None

    check(f, torch.zeros(3), torch.tensor(2.0, requires_grad=True), graphs=None)


# ---------------------------------------------------------------------------
# strides of results, views vs copies
# ---------------------------------------------------------------------------
_LAYOUT_OPS = {
    "transposed_add": lambda x, y: x.t() + 1,
    "mixed_layouts": lambda x, y: x.t() + y.t().contiguous(),
    "mixed_layouts_swapped": lambda x, y: y.t().contiguous() + x.t(),
    "clone_transposed": lambda x, y: x.t().clone(),
    "clone_strided_slice": lambda x, y: x[:, ::2].clone(),
    "expanded_clone": lambda x, y: x[:1].expand(4, 6).clone(),
    "zeros_like_slice": lambda x, y: torch.zeros_like(x[:, ::2]),
    "cat_transposed": lambda x, y: torch.cat([x.t(), y.t()]),
    "permute_unary": lambda x, y: x.reshape(2, 3, 4).permute(2, 0, 1).exp(),
    "to_double_transposed": lambda x, y: x.t().double(),
    "channels_last_conv": lambda x, y: F.conv2d(x.reshape(1, 4, 2, 3).contiguous(memory_format=torch.channels_last),
                                                torch.ones(2, 4, 1, 1)),
    "channels_last_plus_contiguous": lambda x, y: x.reshape(1, 4, 2, 3).contiguous(
        memory_format=torch.channels_last) + y.reshape(1, 4, 2, 3),
    "sort_topk_transposed": lambda x, y: (x.t().sort(0)[0], x.t().topk(2, 0)[1]),
    "flip_abs": lambda x, y: x.flip(0).abs(),
    "new_zeros_transposed": lambda x, y: x.t().new_zeros(2, 3).t(),
    "view_if_contiguous": lambda x, y: (x.t() * 2).view(-1) if (x.t() * 2).is_contiguous() else (x.t() * 2).reshape(-1),
}


@pytest.mark.parametrize("name", list(_LAYOUT_OPS))
def test_result_strides_and_contiguity_match_eager(name):
    op = _LAYOUT_OPS[name]

    def f(x, y):
        r = op(x, y)
        rs = r if isinstance(r, tuple) else (r,)
        return r, [t.stride() for t in rs], [t.is_contiguous() for t in rs], \
            [t.is_contiguous(memory_format=torch.channels_last) for t in rs if t.dim() == 4]

    check(f, torch.randn(4, 6), torch.randn(4, 6), graphs=None)


def test_views_share_storage_copies_do_not():
    def f(x):
        v = x.view(-1)
        c = x.reshape(-1).clone()
        v[0] = 100
        r = x.t().reshape(-1)  # a copy: x is not contiguous once transposed
        r[0] = -100
        return x, c, v._base is x, c._base is None, r._base is None, v._is_view(), c._is_view()

    check(f, torch.randn(2, 3), graphs=None)


def test_returned_views_alias_input_and_each_other():
    def f(x):
        y = x * 2
        return x[0], x.t(), x.view(-1), y, y.view(-1)

    x = torch.ones(2, 2)
    a, b, c, y, yv = _compiled(f)(x)
    a.fill_(5)
    b[1, 1] = 7
    c[2] = 9
    y.mul_(10)
    assert x.tolist() == [[5., 5.], [9., 7.]]
    assert a._base is x and c._base is x and yv[0].item() == 20


def test_same_output_twice_and_input_returned_keep_identity():
    def f(x):
        y = x + 1
        return y, y, x

    x = torch.ones(2)
    r = _compiled(f)(x)
    assert r[0] is r[1] and r[2] is x


# ---------------------------------------------------------------------------
# in-place ops and aliasing
# ---------------------------------------------------------------------------
def test_inplace_returns_self_and_chains():
    def f(x):
        y = x.add_(1)
        z = x.mul_(2).sub_(1)
        return y is x, z is x, x, x[0].add_(1) is x

    check(f, torch.randn(3))


def test_inplace_on_views_of_input_updates_input():
    def f(x):
        x[1].mul_(10)
        x.t()[0].zero_()
        x.view(-1)[-1] = 7
        x.diagonal().fill_(3)
        return x.sum()

    check_calls(f, [(torch.randn(3, 3),), (torch.randn(3, 3),)])


def test_inplace_on_slices_in_loop_and_overlapping_slices():
    def f(x, y):
        for i in range(x.shape[0]):
            x[i] += i
        x[1:] -= x[:-1].clone()
        y[1:] += y[:-1]  # overlapping in-place: eager's sequential semantics
        return x, y

    check(f, torch.ones(4), torch.arange(5.))


def test_view_taken_before_inplace_sees_update():
    def f(x):
        v = x[0]
        x.mul_(2)
        return v.clone(), v

    check(f, torch.ones(2, 2))


def test_clone_and_detach_aliasing_rules():
    def f(x):
        y = x.clone()
        y.add_(1)
        z = x.detach()
        z.mul_(2)  # shares storage with x
        return y, z, x

    check(f, torch.ones(2))


def test_version_counter_after_inplace_ops():
    def f(x):
        v0 = x._version
        x.add_(1)
        v1 = x._version
        x[0] = 3
        y = x.view(-1)
        y.mul_(2)
        return v0, v1, x._version, y._version

    check(f, torch.randn(3), graphs=None)


def test_inplace_on_leaf_requiring_grad_raises_same_error():
    def f(x):
        x.add_(1)
        return x

    def g(x):
        x[0] = 1
        return x

    check(f, torch.randn(3, requires_grad=True), graphs=None)
    check(g, torch.randn(3, requires_grad=True), graphs=None)


@pytest.mark.parametrize("order", [(False, True), (True, False), (True, True)])
def test_same_tensor_passed_twice(order):
    def f(a, b):
        a.add_(1)
        return a + b, b.clone()

    cf = _compiled(f)
    for same in order:
        t, te = torch.ones(3), torch.ones(3)
        u, ue = torch.ones(3), torch.ones(3)
        rc = cf(t, t) if same else cf(t, u)
        re = f(te, te) if same else f(te, ue)
        assert_same(re, rc)
        assert_same(te, t, "first argument")


def test_overlapping_views_passed_as_two_arguments():
    def f(a, b):
        a.mul_(2)
        return b + 0

    cf = _compiled(f)
    cf(torch.ones(2), torch.ones(2))
    base, base_e = torch.ones(4), torch.ones(4)
    assert_same(f(base_e[:2], base_e[1:3]), cf(base[:2], base[1:3]))
    assert_same(base_e, base)


def test_out_argument_returns_out_and_resizes_empty():
    def f(a, o, e):
        r = torch.add(a, 1, out=o)
        torch.mul(a, 2, out=e)
        return r is o, r, o, e, e.shape

    check(f, torch.ones(3), torch.empty(3), torch.empty(0), graphs=None)


def test_out_variants_that_return_nothing_still_write():
    # torch.split_with_sizes_copy / unbind_copy with out=[...] return None: the call was dropped
    # from the graph as if it were pure, and the out tensors were never written
    def f(x, out, parts):
        torch.split_with_sizes_copy(x, [1, 2], out=out)
        torch.unbind_copy(x.view(3, 1), out=parts)
        return out[1] * 2

    check(f, torch.tensor([1.0, 2.0, 3.0]), [torch.zeros(1), torch.zeros(2)],
          [torch.zeros(1), torch.zeros(1), torch.zeros(1)])


def test_an_operator_whose_schema_writes_an_argument_stays_in_the_graph():
    # a custom op ``(Tensor x, Tensor(a!) dst) -> ()`` named without a trailing underscore
    def fill_into(x, dst):
        dst.copy_(x)

    with torch.library._scoped_library("dl_test_out", "FRAGMENT") as lib:
        lib.define("fill_into(Tensor x, Tensor(a!) dst) -> ()")
        lib.impl("fill_into", fill_into, "CompositeExplicitAutograd")

        def f(x, out):
            torch.ops.dl_test_out.fill_into(x + 1, out)
            torch.ops.dl_test_out.fill_into.default(x[:1] * 3, out[1:])
            return out.sum()

        check(f, torch.tensor([1.0, 2.0]), torch.zeros(2))


def test_resize_on_input_and_on_fresh_tensor():
    def f(x):
        y = torch.zeros(4)
        y.resize_(2)
        x.resize_(2, 2)
        return x.shape, x.sum(), y, y.shape

    check(f, torch.arange(6.), graphs=None)


_INPLACE_CASTS = {
    "mul_float_tensor": lambda x: x.mul_(torch.tensor([0.5, 0.5])),
    "mul_0d_float_tensor": lambda x: x.mul_(torch.tensor(0.5)),
    "iadd_float": lambda x: operator.iadd(x, 0.5),
    "clamp_float": lambda x: x.clamp_(min=0.5),
    "pow_float": lambda x: x.pow_(0.5),
    "exp_on_int": lambda x: x.exp_(),
    "div_on_int": lambda x: x.div_(2),
    "div_trunc_on_int": lambda x: x.div_(2, rounding_mode="trunc"),
    "itruediv_on_int": lambda x: operator.itruediv(x, 2),
    "ifloordiv_on_int": lambda x: operator.ifloordiv(x, 2),
    "imod_float": lambda x: operator.imod(x, 2.5),
    "add_alpha_float": lambda x: x.add_(1, alpha=0.5),
    "sub_on_bool": lambda x: x.bool().sub_(True),
    "neg_on_bool": lambda x: (x > 0).neg_(),
    "copy_float_into_int": lambda x: x.copy_(torch.tensor([1.7, -1.7])),
    "fill_float_into_int": lambda x: x.fill_(2.9),
    "add_out_int_float": lambda x: torch.add(x, 0.5, out=x),
    "broadcast_into_smaller": lambda x: x.add_(torch.ones(2, 2, dtype=torch.long)),
    "bool_ops": lambda x: ((x > 3).__iand__(torch.tensor([True, False])), (x > 3).__ixor__(torch.tensor([True, True]))),
    "ilshift": lambda x: operator.ilshift(x, 2),
}


@pytest.mark.parametrize("name", list(_INPLACE_CASTS))
def test_inplace_dtype_casting_rules(name):
    op = _INPLACE_CASTS[name]

    def f(x):
        return op(x), x

    check(f, torch.tensor([3, 4]), graphs=None)


def test_noop_conversions_return_self_and_alias_the_input():
    def f(x):
        same = (x.to(torch.float32) is x, x.float() is x, x.contiguous() is x, x.to("cpu") is x, x.cpu() is x,
                x.detach() is x, x.clone() is x)
        x.to(torch.float32).add_(1)
        x.contiguous().mul_(2)
        return same, x

    check(f, torch.ones(2), graphs=None)


def test_inplace_metadata_ops_on_input_and_errors_on_expanded_views():
    def f(x):
        x.unsqueeze_(0)
        x.t_()
        return x.shape, x.stride(), x * 1

    def g(x):
        y = x.expand(3, 2)
        y.add_(1)
        return y

    check_calls(f, [(torch.ones(3),), (torch.ones(3),)], graphs=None)
    check(g, torch.ones(1, 2), graphs=None)
    check(lambda x: x.mul_(2), torch.ones(1).expand(3), graphs=None)


def test_masked_fill_inplace_on_input_then_functional():
    def f(x):
        x.masked_fill_(x > 0, -1)
        return x.masked_fill(x < -0.5, 9)

    check_calls(f, [(torch.randn(5),), (torch.randn(5),)])


# ---------------------------------------------------------------------------
# known bugs (xfail strict: each passes once the bug is fixed)
# ---------------------------------------------------------------------------
def test_tensor_dunder_class():
    def f(x):
        return x.__class__ is torch.Tensor, x.__class__.__name__, x * 1

    check(f, torch.ones(2), graphs=None)


@pytest.mark.parametrize("form", ["dunder_repr", "dunder_str", "dunder_format", "unbound_repr"])
def test_explicit_dunder_string_methods_of_computed_tensor(form):
    forms = {"dunder_repr": lambda y: y.__repr__(), "dunder_str": lambda y: y.__str__(),
             "dunder_format": lambda y: y.__format__(""), "unbound_repr": lambda y: torch.Tensor.__repr__(y)}
    op = forms[form]

    def f(x):
        y = x * 2
        return op(y), y + 1

    check(f, torch.ones(2), graphs=None)


@pytest.mark.parametrize("query", ["hash", "is_set_to", "const_data_ptr"])
def test_storage_and_identity_queries_are_not_answered_from_fakes(query):
    def f(x):
        y = x + 1
        if query == "hash":
            return x.__hash__() == id(x), y
        if query == "is_set_to":
            return x.is_set_to(x), y.is_set_to(x), y
        return y.const_data_ptr() == 0, y

    check(f, torch.ones(2), graphs=None)


@pytest.mark.filterwarnings("ignore:Anomaly Detection has been enabled")
def test_global_state_queries_follow_changes_between_calls():
    def f(x):
        return torch.get_num_threads(), torch.is_anomaly_enabled(), torch.is_autocast_enabled("cpu"), x + 1

    cf = _compiled(f)
    old = torch.get_num_threads()
    seen = []
    try:
        torch.set_num_threads(1)
        seen.append(cf(torch.ones(1))[:3])
        torch.set_num_threads(2)
        with torch.autograd.detect_anomaly(), torch.autocast("cpu"):
            seen.append(cf(torch.ones(1))[:3])
    finally:
        torch.set_num_threads(old)
    assert seen == [(1, False, False), (2, True, True)]


def test_global_state_setters_run_on_every_call():
    def f(x):
        torch.set_flush_denormal(True)
        torch.set_autocast_enabled("cpu", True)
        return x + 1

    cf = _compiled(f)
    try:
        cf(torch.ones(1))
        torch.set_flush_denormal(False)
        torch.set_autocast_enabled("cpu", False)
        cf(torch.ones(1))  # cache hit: must set both again
        denormal = (torch.tensor([1e-323], dtype=torch.float64) * 1.0).item()
        autocast = torch.is_autocast_enabled("cpu")
    finally:
        torch.set_flush_denormal(False)
        torch.set_autocast_enabled("cpu", False)
    assert (denormal, autocast) == (0.0, True)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_default_device_change_between_calls(backend):
    def f(x):
        z = torch.zeros(2)
        return z, z.device, x + 1

    cf = _compiled(f, backend)
    cf(torch.ones(1))
    torch.set_default_device("meta")
    try:
        r = cf(torch.ones(1, device="cpu"))
    finally:
        torch.set_default_device(None)
    assert (r[0].device.type, r[1].type) == ("meta", "meta")


def test_torch_class_dict_read():
    def f(x):
        return "__add__" in torch.Tensor.__dict__, x + 1

    check(f, torch.ones(1), graphs=None)


def test_storage_type_is_not_answered_from_a_fake():
    # (torch warns about TypedStorage once per process: only the value is compared here)
    def f(x):
        y = x + 1
        return y.storage_type().__name__, y

    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eager, compiled = f(torch.ones(2)), _compiled(f)(torch.ones(2))
    assert eager[0] == compiled[0] and torch.equal(eager[1], compiled[1])


# inputs that alias only on a later call: the TENSOR_ALIASING guard makes a new entry
@pytest.mark.parametrize("alias", ["same_tensor", "overlapping_views"])
def test_aot_eager_aliased_inputs_after_distinct_ones(alias):
    def f(a, b):
        a.mul_(2)
        return b + 0

    cf = dynamo_lite.compile(f, backend="aot_eager")
    cf(torch.ones(4), torch.ones(4))
    base, base_e = torch.ones(5), torch.ones(5)
    if alias == "same_tensor":
        base, base_e = base[:4], base_e[:4]
        assert_same(f(base_e, base_e), cf(base, base))
    else:
        assert_same(f(base_e[:4], base_e[1:]), cf(base[:4], base[1:]))
    assert_same(base_e, base)


# ---------------------------------------------------------------------------
# Python builtins and operators with a tensor on the right or inside
# ---------------------------------------------------------------------------
def test_negative_number_to_the_power_of_a_tensor():
    def f(x):
        return (-2) ** x, 2.5 ** x, (-3) ** (x + 1), pow(-2, x)

    check(f, torch.tensor([2, 3]))


def test_reversed_tensor_is_a_flipped_copy():
    def f(x):
        r = list(reversed(x))
        r[0].add_(100)  # a view of the flipped copy, not of x
        return x, r, reversed(x)

    check_calls(f, [torch.tensor([1., 2.]), torch.ones(2, 3)])


def test_round_of_a_tensor_raises_type_error():
    def f(x):
        try:
            return round(x)
        except TypeError as e:
            return x + 1, str(e)

    check(f, torch.ones(2))


_WARN_ONCE_PROGRAM = """
import sys, warnings, torch, dynamo_lite
def f(x):
    return x.T + 1, torch.meshgrid(x, x)  # both warn once per process, from C++ (TORCH_WARN_ONCE)
if sys.argv[1] == "compiled":
    f = dynamo_lite.compile(f, backend="eager")
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    for _ in range(3):
        f(torch.ones(3))
print(sorted(str(x.message)[:24] for x in w))
"""


def test_warnings_torch_issues_once_per_process_are_issued_once():
    # the fake run while tracing must not use up the process's one warning
    import subprocess
    import sys
    out = {mode: subprocess.run([sys.executable, "-c", _WARN_ONCE_PROGRAM, mode], capture_output=True, text=True,
                                check=True).stdout for mode in ("eager", "compiled")}
    assert out["compiled"] == out["eager"] and out["eager"].count("'") == 4, out


def test_non_leaf_input_under_aot_eager_issues_no_grad_warning():
    import warnings
    opt = dynamo_lite.compile(lambda x: x + 1, backend="aot_eager")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = opt(torch.ones(3, requires_grad=True) * 2)
    assert_same(out, torch.ones(3, requires_grad=True) * 2 + 1)
    assert [str(w.message)[:40] for w in caught] == []


def test_size_and_stride_of_a_dimension_out_of_range_raise_in_the_users_try():
    # (an internal error before: the fake call's IndexError escaped the trace)
    def f(x):
        out = []
        try:
            out.append(x.size(5))
        except IndexError as e:
            out.append(("IndexError", e.args))
        try:
            out.append(x.stride(-4))
        except IndexError as e:
            out.append(("IndexError", e.args))
        return x + 1, out

    check_breaks(f, torch.ones(2, 3), breaks=0)


# ---------------------------------------------------------------------------
# sparse, quantized and nested tensors: Python runs what makes or uses them
# ---------------------------------------------------------------------------
def _sparse_values(x):
    s = x.to_sparse()
    return s.coalesce().values() * 2, s.coalesce().indices(), x + 1


def _quantized_round_trip(x):
    return torch.quantize_per_tensor(x, 0.1, 0, torch.quint8).dequantize() + 1


def _nested_unbind(x):
    nt = torch.nested.nested_tensor([x, x[:1]])
    return [t * 2 for t in nt.unbind()]


_CSR = torch.tensor([[0., 1.], [2., 0.]]).to_sparse_csr()


def _uses_a_csr_global(x):
    return _CSR.to_dense() @ x + 1, x * 2


@pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor")
@pytest.mark.filterwarnings("ignore:.*nested tensors is in prototype")
@pytest.mark.parametrize("fn, args", [
    (_sparse_values, lambda: (torch.tensor([[0., 1.], [2., 0.]]),)),
    (_quantized_round_trip, lambda: (torch.tensor([0.5, 1.0, 2.0, 3.0]),)),
    (_nested_unbind, lambda: (torch.ones(3, 2),)),
    (_uses_a_csr_global, lambda: (torch.ones(2, 3),)),
], ids=["to_sparse", "quantize", "nested", "csr_global"])
def test_sparse_quantized_and_nested_tensors_run_in_python(fn, args):
    # their fake kernels are not exact (a sparse tensor's number of stored values is data, the
    # fake of quantize_per_tensor is float32): the graph's output check blamed the backend
    # (BackendCompilerFailed where eager returns), or tracing a nested / CSR input failed inside
    # the fake tensor mode (internal error); Python runs what makes or uses one
    check_breaks(fn, *args(), breaks=None, raises=None)
