"""Acceptance: the public API and recompilation, as a user drives them.

compile() of functions, lambdas, bound methods, modules (decorator and call
forms); optimize() as context manager and decorator; disable(); reset();
explain(); fullgraph=True raising Unsupported; config.patch; cache_size_limit;
recompiles on dtype / shape / value / requires_grad / grad-mode changes,
counted with CompileCounter, results checked against eager.  Helpers:
dynamo_lite/testing.py.
"""
import pytest
import torch

import dynamo_lite
from dynamo_lite import config
from dynamo_lite.testing import CompileCounter, assert_same
from dynamo_lite.testing import check, check_calls
from dynamo_lite.testing import print_with_graph_break as print  # noqa: A001 - a graph break at each print


def test_compile_as_decorator_with_and_without_arguments():
    cnt = CompileCounter()

    @dynamo_lite.compile(backend=cnt)
    def f(x):
        return x.sin() + 1

    with config.patch(default_backend="eager"):  # the bare form uses the default backend (inductor is slow)
        @dynamo_lite.compile
        def g(x):
            return x.cos() - 1

    x = torch.randn(3)
    assert_same(f(x), x.sin() + 1)
    assert_same(g(x), x.cos() - 1)
    assert cnt.frame_count == 1
    assert f.__name__ == "f"


def test_compile_lambda_and_bound_method_and_callable_object():
    class Scaler:
        def __init__(self, k):
            self.k = k

        def apply(self, x):
            return x * self.k

        def __call__(self, x):
            return x + self.k

    s = Scaler(3.0)
    x = torch.randn(2)
    cnt = CompileCounter()
    assert_same(dynamo_lite.compile(lambda t: t * 2, backend=cnt)(x), x * 2)
    assert_same(dynamo_lite.compile(s.apply, backend=cnt)(x), x * 3)
    assert_same(dynamo_lite.compile(s, backend=cnt)(x), x + 3)
    assert cnt.frame_count == 3


def test_compile_module_returns_module_sharing_state():
    m = torch.nn.Linear(3, 3)
    cnt = CompileCounter()
    opt = dynamo_lite.compile(m, backend=cnt)
    x = torch.randn(2, 3)
    assert_same(opt(x), m(x))
    with torch.no_grad():
        m.weight.zero_()
    assert_same(opt(x), m(x))
    assert opt.weight is m.weight
    assert cnt.frame_count >= 1


def test_optimize_context_manager_and_decorator():
    cnt = CompileCounter()

    def f(x):
        return x * 2 + 1

    x = torch.randn(3)
    with dynamo_lite.optimize(cnt):
        out = f(x)
    assert_same(out, x * 2 + 1)
    assert cnt.frame_count == 1
    f(x)  # outside: not captured
    assert cnt.frame_count == 1

    @dynamo_lite.optimize(cnt)
    def g(x):
        return x - 5

    assert_same(g(x), x - 5)
    assert cnt.frame_count == 2


def test_disable_inside_compiled_function_runs_eagerly():
    cnt = CompileCounter()
    seen = []

    @dynamo_lite.disable
    def helper(x):
        seen.append(x.shape)
        return x * 3

    def f(x):
        return helper(x + 1) - 1

    x = torch.randn(2)
    assert_same(dynamo_lite.compile(f, backend=cnt)(x), (x + 1) * 3 - 1)
    assert len(seen) == 1


def test_reset_forgets_compiled_code():
    cnt = CompileCounter()

    def f(x):
        return x + 1

    opt = dynamo_lite.compile(f, backend=cnt)
    opt(torch.ones(2))
    opt(torch.ones(2))
    assert cnt.frame_count == 1
    dynamo_lite.reset()
    opt(torch.ones(2))
    assert cnt.frame_count == 2


def test_fullgraph_raises_unsupported_on_graph_break_and_passes_otherwise():
    def bad(x):
        y = x + 1
        print("break")
        return y

    def good(x):
        return (x + 1).relu()

    with pytest.raises(dynamo_lite.Unsupported):
        dynamo_lite.compile(bad, backend="eager", fullgraph=True)(torch.ones(2))
    assert_same(dynamo_lite.compile(good, backend="eager", fullgraph=True)(torch.ones(2)), good(torch.ones(2)))


def test_user_exception_escaping_frame_without_and_with_fullgraph():
    def f(x):
        raise KeyError("user")

    def g(x):  # a separate code object: compiled entries are per code object
        raise KeyError("user")

    with pytest.raises(KeyError):
        dynamo_lite.compile(g, backend="eager")(torch.ones(2))
    # fullgraph: the user's own exception still reaches the user (not Unsupported)
    with pytest.raises(KeyError):
        dynamo_lite.compile(f, backend="eager", fullgraph=True)(torch.ones(2))


def test_explain_counts_graphs_and_breaks():
    def f(x):
        y = x * 2
        print("one")
        y = y + 1
        print("two")
        return y.sum()

    out = dynamo_lite.explain(f)(torch.ones(3))
    assert out.graph_count == 3
    assert out.graph_break_count == 2
    assert len(out.break_reasons) == 2
    assert all(r.lineno for r in out.break_reasons)


def test_explain_fields_describe_each_graph():
    def f(x, n):
        y = (x * n).relu()
        print("break")
        return y.sum() + 1

    out = dynamo_lite.explain(f)(torch.ones(3), 2)
    assert out.graph_count == len(out.graphs) == len(out.ops_per_graph) == len(out.guards) == 2
    assert out.ops_per_graph[0] == 2 and out.ops_per_graph[1] == 2
    assert any("n" in line and "2" in line for line in out.guards[0])  # the constant n is guarded
    assert_same(out.out, f(torch.ones(3), 2))
    reason = out.break_reasons[0]
    assert reason.filename.endswith("test_api_usage.py") and "print" in reason.reason.lower()
    assert "Graph count: 2" in str(out)


def test_explain_does_not_change_results_or_side_effects():
    calls = []

    def f(x):
        calls.append(1)
        return x * 3

    out = dynamo_lite.explain(f)(torch.ones(2))
    assert calls == [1]
    assert out.graph_count == 1


def test_config_patch_restores_values_and_rejects_unknown():
    old = config.cache_size_limit
    with config.patch(cache_size_limit=2):
        assert config.cache_size_limit == 2
    assert config.cache_size_limit == old
    with pytest.raises(AttributeError):
        config.patch(no_such_setting=1)


def test_cache_size_limit_falls_back_to_eager_with_correct_results():
    cnt = CompileCounter()

    def f(x, n):
        return x * n

    opt = dynamo_lite.compile(f, backend=cnt)
    with config.patch(cache_size_limit=2):
        outs = [opt(torch.ones(2), n) for n in range(5)]
    assert cnt.frame_count == 2
    assert_same(outs, [torch.ones(2) * n for n in range(5)])


def test_custom_backend_receives_graph_and_example_inputs():
    seen = {}

    def backend(gm, example_inputs):
        seen["n_inputs"] = len(example_inputs)
        seen["ops"] = [n.target for n in gm.graph.nodes if n.op == "call_function"]
        return gm.forward

    def f(x, y):
        return torch.relu(x) + y

    out = dynamo_lite.compile(f, backend=backend)(torch.randn(3), torch.randn(3))
    assert out.shape == (3,)
    assert seen["n_inputs"] == 2
    assert len(seen["ops"]) == 2


def test_backend_returning_wrong_callable_is_used_as_given():
    def backend(gm, example_inputs):
        def run(*args):
            return tuple(o * 0 if isinstance(o, torch.Tensor) else o for o in gm.forward(*args))
        return run

    def f(x):
        return x + 1

    out = dynamo_lite.compile(f, backend=backend)(torch.ones(2))
    assert_same(out, torch.zeros(2))


# ---------------------------------------------------------------- recompiles

def test_recompile_on_dtype_change():
    def f(x):
        return x * 2

    cnt = check_calls(f, [(torch.ones(2),), (torch.ones(2, dtype=torch.float64),), (torch.ones(2),),
                          (torch.ones(2, dtype=torch.int32),)])
    assert cnt.frame_count == 3


def test_recompile_on_shape_and_stride_change():
    def f(x):
        return x.sum(0) + x.stride(0)

    cnt = check_calls(f, [(torch.ones(2, 3),), (torch.ones(4, 3),), (torch.ones(3, 2).t(),), (torch.ones(2, 3),)])
    assert cnt.frame_count == 3


def test_recompile_on_python_value_change():
    def f(x, n, s):
        return x * n if s == "mul" else x + n

    cnt = check_calls(f, [(torch.ones(2), 2, "mul"), (torch.ones(2), 3, "mul"), (torch.ones(2), 2, "add"),
                          (torch.ones(2), 2, "mul")])
    assert cnt.frame_count == 3


def test_recompile_on_grad_mode_change():
    def f(x):
        return x * 2

    cnt = CompileCounter()
    opt = dynamo_lite.compile(f, backend=cnt)
    x = torch.ones(2, requires_grad=True)
    a = opt(x)
    with torch.no_grad():
        b = opt(x)
    c = opt(x)
    assert a.requires_grad and not b.requires_grad and c.requires_grad
    assert cnt.frame_count == 2


def test_recompile_on_default_dtype_change():
    def f(x):
        return x + torch.ones(2)

    cnt = CompileCounter()
    opt = dynamo_lite.compile(f, backend=cnt)
    old = torch.get_default_dtype()
    try:
        a = opt(torch.ones(2))
        torch.set_default_dtype(torch.float64)
        b = opt(torch.ones(2, dtype=torch.float64))
        b_e = f(torch.ones(2, dtype=torch.float64))
    finally:
        torch.set_default_dtype(old)
    assert a.dtype == torch.float32
    assert_same(b, b_e)


def test_recompile_on_list_length_and_tuple_contents():
    def f(xs, cfg):
        out = xs[0]
        for t in xs[1:]:
            out = out + t
        return out * cfg[0]

    check_calls(f, [([torch.ones(2)] * 2, (1,)), ([torch.ones(2)] * 3, (1,)), ([torch.ones(2)] * 2, (5,))])


def test_no_recompile_for_same_inputs_and_new_tensor_values():
    def f(x, n):
        return x * n

    cnt = check_calls(f, [(torch.randn(3), 2), (torch.randn(3), 2), (torch.randn(3), 2)])
    assert cnt.frame_count == 1


def test_guard_on_global_module_attribute_change():
    def f(x):
        return x * config_holder.factor

    config_holder.factor = 2
    cnt = CompileCounter()
    opt = dynamo_lite.compile(f, backend=cnt)
    try:
        a = opt(torch.ones(2))
        config_holder.factor = 4
        b = opt(torch.ones(2))
    finally:
        config_holder.factor = 2
    assert_same((a, b), (torch.full((2,), 2.0), torch.full((2,), 4.0)))


class _Holder:
    factor = 2


config_holder = _Holder()


def test_recompile_when_closure_value_changes_type():
    def make(v):
        def f(x):
            return x * v
        return f

    cnt = CompileCounter()
    for v in (2, 2.5, torch.tensor(3.0)):
        f = make(v)
        assert_same(dynamo_lite.compile(f, backend=cnt)(torch.ones(2)), f(torch.ones(2)))


def test_compiled_function_called_recursively_from_itself():
    def f(x, n):
        if n == 0:
            return x
        return opt(x + 1, n - 1)

    opt = dynamo_lite.compile(f, backend="eager")
    assert_same(opt(torch.zeros(2), 3), torch.full((2,), 3.0))


def test_nested_compiled_functions_with_different_backends():
    inner_cnt, outer_cnt = CompileCounter(), CompileCounter()
    inner = dynamo_lite.compile(lambda x: x * 2, backend=inner_cnt)

    def outer(x):
        return inner(x) + 1

    assert_same(dynamo_lite.compile(outer, backend=outer_cnt)(torch.ones(2)), torch.full((2,), 3.0))


def test_kwargs_only_call_and_defaults_of_compiled_function():
    def f(x, *, scale=2.0, bias=None):
        y = x * scale
        return y if bias is None else y + bias

    check_calls(f, [(torch.ones(2),)])
    opt = dynamo_lite.compile(f, backend="eager")
    assert_same(opt(torch.ones(2), scale=3.0, bias=torch.ones(2)), f(torch.ones(2), scale=3.0, bias=torch.ones(2)))


def test_wrong_call_signature_raises_same_type_error():
    def f(x, y):
        return x + y

    check(f, torch.ones(2), graphs=None)
