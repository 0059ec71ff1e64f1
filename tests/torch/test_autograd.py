"""Acceptance: grad mode, in-place ops and autograd through compiled code.

Grad-mode contexts (no_grad / enable_grad / set_grad_enabled / inference_mode) as
blocks, decorators and with exceptions; in-place ops on inputs, views and leaves
(including the errors eager raises); version counters; backward through compiled
graphs with gradients w.r.t. inputs and parameters; custom autograd.Function;
torch.autograd.grad; retain_graph; tensor hooks.  Helpers:
dynamo_lite/testing.py.
"""
import pytest
import torch

import dynamo_lite
from dynamo_lite.testing import assert_same
from dynamo_lite.testing import check, check_calls


def rg(*shape):
    return torch.randn(*shape, requires_grad=True)


# ---------------------------------------------------------------- grad mode

def test_no_grad_block_inside():
    def f(x):
        with torch.no_grad():
            y = x * 2
        z = x * 3
        return y, z, y.requires_grad, z.requires_grad, torch.is_grad_enabled()

    check(f, rg(3), backward=True)


def test_enable_grad_inside_no_grad():
    def f(x):
        with torch.no_grad():
            a = x + 1
            with torch.enable_grad():
                b = x * 2
            c = x - 1
        return a, b, c

    check(f, rg(3), backward=True)


def test_set_grad_enabled_as_function_and_context():
    def f(x, flag):
        with torch.set_grad_enabled(flag):
            y = x * 2
        torch.set_grad_enabled(False)
        z = x * 3
        torch.set_grad_enabled(True)
        return y, z

    check_calls(f, [(rg(2), False), (rg(2), True)])


def test_grad_mode_left_disabled_by_compiled_function():
    def f(x):
        torch.set_grad_enabled(False)
        return x * 2

    check(f, rg(2))


def test_called_under_outer_no_grad():
    def f(x):
        return x * 2, torch.is_grad_enabled()

    opt = dynamo_lite.compile(f, backend="eager")
    x = rg(2)
    a = opt(x)
    with torch.no_grad():
        b = opt(x)
        b_e = f(x)
    assert a[0].requires_grad and a[1]
    assert_same(b, b_e)


def test_no_grad_decorator_on_inner_function():
    @torch.no_grad()
    def helper(x):
        return x * 2

    def f(x):
        return helper(x) + x

    check(f, rg(3), backward=True)


def test_inference_mode_block():
    def f(x):
        a = x + 1
        with torch.inference_mode():
            y = x * 2
            inf = torch.is_inference_mode_enabled()
        return y, inf, y.is_inference(), x.is_inference(), a, torch.is_inference_mode_enabled()

    check(f, torch.randn(3))


def test_exception_inside_no_grad_restores_mode():
    def f(x):
        try:
            with torch.no_grad():
                y = x * 2
                raise ValueError("boom")
        except ValueError as e:
            return y, str(e), torch.is_grad_enabled()

    check(f, rg(2), graphs=None)


def test_no_grad_with_graph_break_inside():
    def f(x):
        with torch.no_grad():
            y = x * 2
            print("inside")
            z = y + x
        return z, z.requires_grad, torch.is_grad_enabled(), x * 4

    check(f, rg(2), backward=True)


# ---------------------------------------------------------------- in-place ops

def test_inplace_on_input_is_visible_to_caller():
    def f(x, y):
        x.add_(1)
        y[0] = 5
        y.mul_(2)
        return x.sum() + y.sum()

    check(f, torch.randn(3), torch.randn(3))


def test_inplace_on_view_updates_base():
    def f(x):
        v = x[1:]
        v.mul_(10)
        x.view(-1)[0] = -1
        t = x.t()
        t.add_(1)
        return x, v

    check(f, torch.randn(3, 3))


def test_version_counter_after_inplace():
    def f(x):
        v0 = x._version
        x.add_(1)
        x.mul_(2)
        return x * 1, x._version - v0

    check(f, torch.randn(3), graphs=None)


def test_inplace_on_leaf_requiring_grad_raises():
    def f(x):
        y = x * 2
        x.add_(1)
        return y

    check(f, rg(3), graphs=None)


def test_inplace_on_leaf_under_no_grad_is_allowed():
    def f(w, g):
        with torch.no_grad():
            w.sub_(0.1 * g)
        return w * 1

    check(f, rg(3), torch.ones(3))


def test_inplace_needed_for_backward_raises_at_backward():
    def f(x):
        y = x.sigmoid()
        y.mul_(2)
        return y

    check(f, rg(3), backward=True, graphs=None)


def test_out_argument_and_inplace_functional_variants():
    def f(x):
        out = torch.empty(3)
        torch.add(x, 1, out=out)
        torch.relu_(x)
        x.clamp_(max=0.5)
        return out, x

    check(f, torch.randn(3))


def test_inplace_on_buffer_of_module_arg():
    def f(bn, x):
        return bn(x), bn.running_mean, bn.num_batches_tracked

    check(f, torch.nn.BatchNorm1d(3), torch.randn(4, 3))


def test_setitem_with_tensor_requires_grad_into_fresh_tensor():
    def f(x):
        buf = torch.zeros(2, 3)
        buf[0] = x
        buf[1] = x * 2
        return buf

    check(f, rg(3), backward=True)


# ---------------------------------------------------------------- autograd

def test_backward_gradients_w_r_t_inputs():
    def f(x, w, b):
        return torch.tanh(x @ w + b).sum(), (x * w.sum()).mean()

    check(f, rg(2, 3), rg(3, 4), rg(4), backward=True)


def test_backward_called_inside_compiled_function():
    def f(x, w):
        loss = (x * w).pow(2).sum()
        loss.backward()
        return loss.detach(), w.grad.clone(), x.grad

    check(f, torch.randn(3), rg(3), graphs=None)


def test_autograd_grad_inside_compiled_function():
    def f(x):
        y = (x ** 3).sum()
        (g,) = torch.autograd.grad(y, x, create_graph=True)
        return y, g, g.requires_grad

    check(f, rg(3), graphs=None)


def test_retain_graph_second_backward():
    def f(x):
        y = (x * x).sum()
        y.backward(retain_graph=True)
        g1 = x.grad.clone()
        y.backward()
        return g1, x.grad

    check(f, rg(3), graphs=None)


def test_second_backward_without_retain_graph_raises():
    def f(x):
        y = (x.exp()).sum()
        y.backward()
        y.backward()
        return x.grad

    check(f, rg(3), graphs=None)


def test_compiled_output_used_for_backward_outside():
    w = rg(3)

    def f(x):
        return (x * w).relu()

    opt = dynamo_lite.compile(f, backend="eager")
    x = torch.randn(3)
    opt(x).sum().backward()
    g_c = w.grad.clone()
    w.grad = None
    f(x).sum().backward()
    assert_same(g_c, w.grad)


class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 2 * x + 1  # deliberately not the true gradient: must be used as written


class ScaleFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, k):
        ctx.k = k
        return x * k

    @staticmethod
    def backward(ctx, g):
        return g * ctx.k, None


def test_custom_autograd_function_forward_and_backward():
    def f(x):
        return Square.apply(x) + ScaleFn.apply(x, 3.0)

    check(f, rg(4), backward=True, graphs=None)


def test_custom_autograd_function_on_tensor_without_grad():
    def f(x):
        y = Square.apply(x)
        return y, y.requires_grad

    check(f, torch.randn(3), graphs=None)


def test_tensor_hook_registered_inside():
    def f(x):
        y = x * 2
        y.register_hook(lambda g: g * 10)
        return y.sum()

    check(f, rg(3), backward=True, graphs=None)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_torch_func_transforms_of_closures_kwargs_and_jacobians(backend):
    # TorchDynamo: one graph, no break
    from dynamo_lite.backends import lookup_backend
    from dynamo_lite.testing import CompileCounter

    def f(x):
        w = x[0] * 2  # requires grad: gradients flow through the closure as in eager
        c = 3.0
        v = torch.func.vmap(lambda r: r * w + c)(x)
        k = torch.func.vmap(lambda r, scale=1.0: r * scale)(x, scale=2.0)
        g = torch.func.grad(lambda r: (r * w).sum())(x[1])
        s = torch.vmap(torch.sin)(x)
        j = torch.func.jacrev(lambda r: r.sin() * c)(x[0])
        jf = torch.func.jacfwd(lambda r: r.cos())(x[0])
        h = torch.func.hessian(lambda r: (r ** 3).sum())(x[0])
        return v.sum() + k.sum() + g.sum() + s.sum() + j.sum() + jf.sum() + h.sum(), v, g, j, h

    cnt = CompileCounter(lookup_backend(backend)[0])
    check_calls(f, [(rg(2, 3),), (rg(2, 3),)], backend=cnt, hits=[1], warnings=False, backward=True)
    assert cnt.frame_count == 1
    assert _explain_breaks(f, rg(2, 3)) == 0


def test_torch_func_transform_of_a_closure_over_an_object_breaks():
    class Scale:
        k = 2.0

    def f(x):
        s = Scale()
        return torch.func.vmap(lambda r: r * s.k)(x)

    check(f, torch.randn(2, 3), graphs=None)


def _triple(g):
    return g * 3


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_tensor_hooks_are_captured_without_a_break(backend):
    # TorchDynamo: one graph, no break, for each of these
    from dynamo_lite.backends import lookup_backend
    from dynamo_lite.testing import CompileCounter

    def on_intermediates(x):
        y = x * 2
        y.register_hook(lambda g: g * 3)  # a lambda made in the frame
        z = y.sin()
        z.register_hook(_triple)  # a global function
        return z.sum(), y.requires_grad

    def on_input(x):
        x.register_hook(lambda g: g * 5)  # replayed after the graph on the input itself
        return (x * 2).sum()

    def hook_returning_none(x):
        y = x * 2
        y.register_hook(lambda g: None)
        return (y * y).sum()

    for fn in (on_intermediates, on_input, hook_returning_none):
        cnt = CompileCounter(lookup_backend(backend)[0])
        check(fn, rg(3), backward=True, graphs=None, compiled=lambda _: dynamo_lite.compile(fn, backend=cnt))
        assert cnt.frame_count == 1, fn.__name__
        assert dynamo_lite.explain(fn)(rg(3)).graph_break_count == 0, fn.__name__


def test_tensor_hooks_python_registers():
    # each a graph break (Python registers the hook), with eager's gradients and output
    def printing_hook(x):
        y = x * 2
        y.register_hook(lambda g: print("grad", g.shape))
        return y.sum()

    def closure_over_a_tensor(x):
        w = x.detach() + 1
        y = x * 2
        y.register_hook(lambda g: g * w)
        return y.sum()

    def handle_removed(x):
        y = x * 2
        h = y.register_hook(lambda g: g * 3)
        h.remove()
        return y.sum()

    def on_a_tensor_without_grad(x):
        y = x.detach() * 2
        y.register_hook(lambda g: g)  # RuntimeError, as in eager
        return y

    for fn in (printing_hook, closure_over_a_tensor, handle_removed):
        check(fn, rg(3), backward=True, graphs=None)
        assert dynamo_lite.explain(fn)(rg(3)).graph_break_count >= 1
    check(on_a_tensor_without_grad, rg(3), graphs=None)


def test_retain_grad_on_intermediate():
    def f(x):
        y = x * 3
        y.retain_grad()
        z = y.sum()
        z.backward()
        return y.grad, x.grad

    check(f, rg(3), graphs=None)


def test_detach_requires_grad_toggles():
    def f(x):
        d = x.detach()
        d.requires_grad_(True)
        e = x.clone().detach().requires_grad_()
        return d * 2, e.is_leaf, d.is_leaf, (x * 1).requires_grad_(False) if False else x.detach() * 3

    check(f, rg(3), backward=True, graphs=None)


def test_requires_grad_change_between_calls_recompiles():
    def f(x):
        return x * 2

    cnt = check_calls(f, [(torch.randn(2),), (rg(2),), (torch.randn(2),)], backward=True)
    assert cnt.frame_count == 2


def test_grad_of_params_accumulates_over_compiled_calls():
    lin = torch.nn.Linear(3, 2)
    lin_e = torch.nn.Linear(3, 2)
    lin_e.load_state_dict(lin.state_dict())

    def f(m, x):
        return m(x).pow(2).sum()

    opt = dynamo_lite.compile(f, backend="eager")
    x = torch.randn(4, 3)
    for _ in range(2):
        opt(lin, x).backward()
        f(lin_e, x).backward()
    assert_same(lin.weight.grad, lin_e.weight.grad)
    assert_same(lin.bias.grad, lin_e.bias.grad)


def test_higher_order_gradient_through_compiled_function():
    def f(x):
        return (x.sin() * x).sum()

    opt = dynamo_lite.compile(f, backend="eager")
    for fn in (f, opt):
        x = torch.tensor([0.3, 0.7], requires_grad=True)
        (g,) = torch.autograd.grad(fn(x), x, create_graph=True)
        g.sum().backward()
        if fn is f:
            expected = (g.detach().clone(), x.grad.clone())
        else:
            assert_same(expected, (g.detach(), x.grad))


def test_gradient_checkpoint_like_detach_and_graph_break():
    def f(x, w):
        h = x @ w
        print("mid")
        h2 = h.detach() + h
        return h2.sum()

    check(f, torch.randn(2, 3), rg(3, 3), backward=True)


def test_torch_func_grad_via_functional_api():
    def f(x):
        return torch.autograd.functional.jacobian(lambda t: t * t, x)

    check(f, torch.randn(3), graphs=None)


# ---------------------------------------------------------------- more autograd surface

class Dirty(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x.mul_(2)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, g):
        return g * 2


class NeedsGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b, (a + b).detach()

    @staticmethod
    def backward(ctx, g1, g2):
        a, b = ctx.saved_tensors
        return (g1 * b if ctx.needs_input_grad[0] else None, g1 * a if ctx.needs_input_grad[1] else None)


class Once(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.exp()

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x.exp()


def test_autograd_function_mark_dirty_needs_input_grad_once_differentiable():
    def f(a, b):
        out, aux = NeedsGrad.apply(a, b)
        return Dirty.apply(a * 1), out, aux, aux.requires_grad, Once.apply(a) + 1

    check(f, rg(3), torch.randn(3), backward=True, graphs=None)


def test_grad_attribute_reset_and_manual_accumulation():
    def f(x):
        (x * 2).sum().backward()
        g = x.grad.clone()
        x.grad = None
        (x * 3).sum().backward()
        x.grad += 1
        return g, x.grad * 1

    check(f, rg(3), graphs=None)


def test_backward_with_gradient_argument_and_allow_unused():
    def f(x, y):
        (x * 3).backward(torch.tensor([1.0, 2.0, 3.0]))
        g = torch.autograd.grad((x * 2).sum(), [x, y], allow_unused=True)
        return x.grad, g[0], g[1] is None

    check(f, rg(3), rg(3), graphs=None)


def test_detach_inplace_and_hooks_on_input_leaf():
    def f(x):
        y = x * 2
        y.detach_()
        seen = []
        x.register_hook(lambda g: g * 100)
        x.register_post_accumulate_grad_hook(lambda p: seen.append(p.grad.sum().item()))
        (x * 2).sum().backward()
        return y, y.requires_grad, y.is_leaf, x.grad, seen

    check(f, rg(3), graphs=None)


def test_checkpoint_inside_compiled_function():
    import torch.utils.checkpoint as cp

    def f(x):
        return cp.checkpoint(lambda t: t.sin() * 2, x, use_reentrant=False)

    check(f, rg(3), backward=True, graphs=None)


def test_checkpoint_is_traced_without_a_break():
    # TorchDynamo: one graph, no break
    import torch.utils.checkpoint as cp

    def block(t, w):
        return torch.nn.functional.dropout(t.sin() @ w, 0.5, training=True) * 2

    def f(x, w):
        y = cp.checkpoint(block, x, w, use_reentrant=False)
        return cp.checkpoint(lambda t: t.cos(), y, use_reentrant=False, preserve_rng_state=False).sum()

    check(f, rg(3, 3), rg(3, 3), backward=True)
    assert dynamo_lite.explain(f)(rg(3, 3), rg(3, 3)).graph_break_count == 0


def test_checkpoint_python_runs():
    import torch.utils.checkpoint as cp

    def printing(x):
        return cp.checkpoint(lambda t: print("fwd") or t.sin(), x, use_reentrant=False).sum()  # prints twice

    def reentrant(x):
        return cp.checkpoint(lambda t: t.sin(), x, use_reentrant=True).sum()

    for fn in (printing, reentrant):
        check(fn, rg(3), backward=True, graphs=None)
        assert dynamo_lite.explain(fn)(rg(3)).graph_break_count >= 1


def test_user_saved_tensor_hooks_see_only_real_tensors():
    packed = []

    def pack(t):
        packed.append(type(t).__name__)
        return t

    def f(t):
        return t.sin() * 2

    for fn in (f, dynamo_lite.compile(f, backend="eager")):
        del packed[:]
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            fn(rg(3)).sum().backward()
        assert packed == ["Tensor"], packed


def test_torch_func_grad_and_vmap():
    def f(x):
        return torch.func.grad(lambda t: (t ** 2).sum())(x), torch.func.vmap(lambda r: r.sum() * 2)(x.view(3, 1))

    check(f, torch.randn(3), graphs=None)


def _sample_norm(r):
    return (r * r).sum().sqrt()


def _explain_breaks(fn, *args):
    return dynamo_lite.explain(fn)(*args).graph_break_count


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_torch_func_transforms_are_one_graph_node_each(backend):
    # TorchDynamo: one graph, no break, for grad(lambda) and vmap(lambda) as well
    from dynamo_lite.backends import lookup_backend
    from dynamo_lite.testing import CompileCounter

    def f(x):
        g = torch.func.grad(lambda t: (t.sin() ** 2).sum())(x)
        v = torch.vmap(_sample_norm)(x.view(3, 2))
        w, val = torch.func.grad_and_value(_sample_norm)(x)
        return g + 1, v * 2, w, val, torch.vmap(lambda a, b: a * b, in_dims=(0, None))(x.view(2, 3), x[:3])

    cnt = CompileCounter(lookup_backend(backend)[0])
    check_calls(f, [(torch.randn(6),), (torch.randn(6),)], backend=cnt, hits=[1], warnings=False)
    assert cnt.frame_count == 1
    assert _explain_breaks(f, torch.randn(6)) == 0


def test_torch_func_transform_of_impure_function_breaks():
    def f(x, k):
        g = torch.func.grad(lambda t: (t * k).sum())(x)  # a closure over a constant: captured
        return g + 1, torch.vmap(lambda r: print(r.shape) or r * 2)(x.view(2, 3))  # prints: Python runs it

    check(f, torch.randn(6), 3.0, graphs=None)
    assert _explain_breaks(f, torch.randn(6), 3.0) == 1


def test_grad_mode_decorators_used_inside():
    def f(x):
        @torch.set_grad_enabled(False)
        def h(t):
            return t * 2

        @torch.enable_grad()
        def k(t):
            return t * 3

        r = h(x)
        with torch.no_grad():
            s = k(x)
        return r, r.requires_grad, s, s.requires_grad, torch.is_grad_enabled()

    check(f, rg(3), backward=True)


def test_no_grad_inplace_on_intermediate_then_used():
    def f(x):
        y = x * 1
        with torch.no_grad():
            y.add_(5)
        return y * 2

    check(f, rg(3), backward=True)


def test_split_unbind_and_index_put_gradients():
    def f(x):
        a, b = x.split(2)
        c, d = b.unbind()
        y = torch.zeros(5)
        y[torch.tensor([0, 2, 4])] = x[:3]
        return a * 2, c * d, y * 2

    check(f, rg(4), backward=True)


def test_grad_fn_name_and_returned_leaf_input():
    def f(x):
        y = x.t().matmul(x)
        return x, y, type(y.grad_fn).__name__

    check(f, rg(2, 2), backward=True, graphs=None)


def _inference_tensor_add():
    with torch.inference_mode():
        t = torch.ones(2)
    t.add_(1)
    return t


AUTOGRAD_ERRORS = {
    "inplace_on_view_of_leaf": lambda x: x[0].add_(1),
    "inplace_on_expanded_tensor": lambda x: x.detach()[:1].expand(3, 2).add_(1),
    "inplace_int_tensor_float_value": lambda x: torch.ones(2, dtype=torch.int64).add_(0.5),
    "inplace_broadcast_to_larger_shape": lambda x: torch.ones(2).add_(torch.ones(3, 2)),
    "inplace_after_use_in_backward": lambda x: (lambda y: ((y * y), y.add_(1), (y * y).sum().backward()))(x * 2),
    "requires_grad_false_on_non_leaf": lambda x: (x * 2).requires_grad_(False),
    "requires_grad_on_int_tensor": lambda x: torch.ones(2, dtype=torch.int64).requires_grad_(),
    "backward_of_non_scalar": lambda x: (x * 2).backward(),
    "backward_without_graph": lambda x: (x.detach() * 2).sum().backward(),
    "grad_wrt_tensor_not_in_graph": lambda x: torch.autograd.grad((x * 2).sum(), torch.ones(2)),
    "inference_tensor_updated_outside": lambda x: _inference_tensor_add() + x,
    "out_argument_with_grad": lambda x: torch.mul(x, 2, out=torch.empty(2)),
    "leaf_data_inplace_is_allowed": lambda x: (x.data.add_(1), x * 1),
}


@pytest.mark.parametrize("name", sorted(AUTOGRAD_ERRORS))
def test_autograd_errors_and_allowed_cases_match(name):
    check(AUTOGRAD_ERRORS[name], rg(2), graphs=None)


def test_a_compiled_module_inside_eager_checkpointing():
    # non-reentrant checkpoint stops its recomputation early with an exception raised from its
    # pack hook, inside the compiled graph: the generated code ran the frame again on that error,
    # which called the hook again ("Unexpected state: target_frame.early_stop is set")
    import torch.utils.checkpoint as cp

    torch.manual_seed(0)
    block = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh(), torch.nn.Linear(4, 4))
    compiled = dynamo_lite.compile(block, backend="eager")
    grads = []
    for run in (block, compiled):
        x = torch.randn(2, 4, generator=torch.Generator().manual_seed(1), requires_grad=True)
        for _ in range(2):
            cp.checkpoint(run, x, use_reentrant=False).sum().backward()
        grads.append((x.grad.clone(), [p.grad.clone() for p in block.parameters()]))
        block.zero_grad()
    assert_same(grads[0], grads[1])


def test_an_error_in_a_graph_under_saved_tensor_hooks_does_not_call_them_again():
    # the frame ran again after its graph raised, so the pack hooks the graph's ops had called
    # ran twice (offloading, counters)
    calls = []

    def pack(t):
        calls.append(1)
        return t

    def f(x, a):
        y = x.exp() * x
        return torch.linalg.cholesky(a) + y.sum()

    compiled = dynamo_lite.compile(f, backend="eager")
    counts = []
    for fn in (f, compiled):
        calls.clear()
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            with pytest.raises(torch.linalg.LinAlgError):
                fn(torch.ones(2, requires_grad=True), -torch.eye(2))
        counts.append(len(calls))
    assert counts[0] == counts[1] > 0


class _CountingBuffer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, x):
        self.calls.add_(1)
        return x * self.calls


def test_checkpointed_functions_whose_recomputation_eager_would_repeat_run_in_python():
    # non-reentrant checkpoint runs its function again in backward: a function that writes a
    # buffer in place (a counter, BatchNorm's running statistics) or draws random numbers without
    # preserve_rng_state was traced as a plain call, so the second run's effects were missing
    # (running stats updated once, gradients of the first run's values, other dropout masks)
    import torch.utils.checkpoint as cp

    def run(make, fn_of, x_shape, **options):
        results = []
        for compiled in (False, True):
            torch.manual_seed(0)
            m = make()
            fn = fn_of(m)
            if compiled:
                fn = dynamo_lite.compile(fn, backend="eager")
            x = torch.randn(*x_shape, requires_grad=True)
            torch.manual_seed(1)
            fn(x).sum().backward()
            results.append((x.grad, [b.clone() for b in m.buffers()], torch.rand(2)))
        assert_same(results[0], results[1])

    run(_CountingBuffer, lambda m: lambda x: cp.checkpoint(m, x, use_reentrant=False), (3,))
    run(lambda: torch.nn.BatchNorm1d(3), lambda m: lambda x: cp.checkpoint(m, x, use_reentrant=False), (4, 3))
    run(lambda: torch.nn.Dropout(0.5), lambda m: lambda x: cp.checkpoint(m, x, use_reentrant=False,
                                                                         preserve_rng_state=False), (8,))
    # preserved (the default): the recomputation draws what the forward drew, so one graph holds it
    drop = torch.nn.Dropout(0.5)
    check(lambda x: cp.checkpoint(drop, x, use_reentrant=False).sum(), rg(8), backward=True)


def test_grads_set_to_none_or_assigned_in_compiled_code():
    # module.zero_grad() (set_to_none) and `p.grad = ...` broke the graph; they are replayed after
    # it, and reads of .grad in the trace see them
    import copy

    def step(m, x, g):
        m.zero_grad()
        none_now = all(p.grad is None for p in m.parameters())
        first = next(m.parameters())
        first.grad = g * 2
        return m(x).sum(), none_now, first.grad + 1

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU(), torch.nn.Linear(3, 1))
    for p in model.parameters():
        p.grad = torch.ones_like(p)
    twin = copy.deepcopy(model)
    compiled = dynamo_lite.compile(step, backend="eager")
    x, g = torch.ones(2, 3), torch.arange(9.).reshape(3, 3)
    for _ in range(2):
        assert_same(step(model, x, g), compiled(twin, x, g))
        assert_same([p.grad for p in model.parameters()], [p.grad for p in twin.parameters()])
    assert dynamo_lite.explain(step)(twin, x, g).graph_break_count == 0
    # a grad of another shape: eager raises, so does the compiled call
    check(lambda p: setattr(p, "grad", torch.ones(4)), rg(3), graphs=None)
    # zero_grad(set_to_none=False) zeroes in place: Python runs it
    check(lambda m, x: (m.zero_grad(set_to_none=False), m(x))[1], torch.nn.Linear(2, 2), torch.ones(2), graphs=None)
