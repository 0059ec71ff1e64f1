"""The public API: compile/optimize/disable/reset/explain, modules, recompiles, limits."""
import copy
import logging
import sys

import pytest
import torch

import dynamo_lite
from dynamo_lite import config
from dynamo_lite.testing import CompileCounter, assert_same_as_eager


def test_extension_imports():
    from dynamo_lite import _C

    assert _C.SKIP is _C.SKIP
    assert callable(_C.set_callback)


def test_public_names():
    for name in ["compile", "optimize", "disable", "reset", "explain", "Unsupported", "config"]:
        assert name in dynamo_lite.__all__
        assert hasattr(dynamo_lite, name)


def test_compile_preserves_function_metadata():
    def my_function(x):
        """doc"""
        return x + 1

    cf = dynamo_lite.compile(my_function, backend="eager")
    assert cf.__name__ == "my_function" and cf.__doc__ == "doc"
    assert dynamo_lite.compile(cf, backend="eager")(torch.ones(1)).item() == 2.0


def test_compile_as_decorator_with_options():
    counter = CompileCounter()

    @dynamo_lite.compile(backend=counter)
    def f(x):
        return x.sin() + 1

    x = torch.randn(4)
    torch.testing.assert_close(f(x), x.sin() + 1)
    assert counter.frame_count == 1


def test_compile_rejects_non_callables():
    with pytest.raises(TypeError, match="int"):
        dynamo_lite.compile(3, backend="eager")


def test_unknown_backend_name_is_a_clear_error():
    with pytest.raises(ValueError, match="no_such_backend"):
        dynamo_lite.compile(lambda x: x, backend="no_such_backend")


def test_compiled_module_behaves_as_the_module():
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    cm = dynamo_lite.compile(model, backend="eager")
    assert isinstance(cm, torch.nn.Sequential)
    assert cm._orig_mod is model
    assert [n for n, _ in cm.named_parameters()] == [n for n, _ in model.named_parameters()]
    assert list(cm.state_dict()) == list(model.state_dict())
    assert cm[0] is model[0]
    cm.eval()
    assert not model.training
    cm.train()
    assert model.training
    x = torch.randn(5, 3)
    torch.testing.assert_close(cm(x), model(x).detach() * 0 + cm(x))


class _SeesItself(torch.nn.Module):
    def forward(self, x):
        try:
            self.missing
        except AttributeError as e:
            message = str(e)
        return x + 1, (type(self) is _SeesItself, type(self).__name__, self._get_name(), message,
                       type(type(self)()).__name__)


@pytest.mark.parametrize("hooked", [False, True])
def test_forward_of_a_compiled_module_sees_the_users_module(hooked):
    """Inside forward, ``self`` is the user's module, not the compiled wrapper: its type, its
    name in error messages and ``type(self)()`` are the user's class (as torch.compile)."""
    model = _SeesItself()
    if hooked:
        model.register_forward_hook(lambda m, args, out: (out[0] * 2, out[1]))
    x = torch.ones(2)
    expected = model(x)
    got = dynamo_lite.compile(model, backend="eager")(x)
    assert got[1] == expected[1] == ((True, "_SeesItself", "_SeesItself",
                                      "'_SeesItself' object has no attribute 'missing'", "_SeesItself"))
    torch.testing.assert_close(got[0], expected[0])


def test_train_eval_switch_recompiles_and_is_correct():
    counter = CompileCounter()
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Dropout(0.5))
    cm = dynamo_lite.compile(model, backend=counter)
    x = torch.randn(8, 3)
    model.eval()
    torch.testing.assert_close(cm(x), model(x))
    model.train()
    torch.manual_seed(1)
    a = cm(x)
    torch.manual_seed(1)
    b = model(x)
    torch.testing.assert_close(a, b)
    assert counter.frame_count == 2


def test_optimize_context_manager_and_decorator():
    counter = CompileCounter()

    def f(x):
        return x * 3

    with dynamo_lite.optimize(counter):
        out = f(torch.ones(2))
    assert counter.frame_count == 1
    torch.testing.assert_close(out, torch.full((2,), 3.0))

    @dynamo_lite.optimize(counter)
    def g(x):
        return f(x) + 1

    g(torch.ones(2))
    assert counter.frame_count == 2


def test_disable_runs_without_capture():
    counter = CompileCounter()

    def inner(x):
        return x + 1

    disabled = dynamo_lite.disable(inner)

    def outer(x):
        return disabled(x) * 2

    with dynamo_lite.optimize(counter):
        out = outer(torch.ones(2))
    torch.testing.assert_close(out, torch.full((2,), 4.0))
    graphs = "".join(g.code for g in counter.graphs)
    assert "add" not in graphs  # inner ran eagerly


def test_reset_forgets_compiled_code():
    counter = CompileCounter()
    cf = dynamo_lite.compile(lambda x: x - 1, backend=counter)
    cf(torch.ones(2))
    cf(torch.ones(2))
    assert counter.frame_count == 1
    dynamo_lite.reset()
    cf(torch.ones(2))
    assert counter.frame_count == 2


@pytest.mark.parametrize("change", ["dtype", "shape", "requires_grad", "python_int", "global", "noncontig"])
def test_guard_failure_recompiles(change):
    counter = CompileCounter()
    scale = {"v": 2}

    def f(x, n):
        return x * n + scale["v"]

    cf = dynamo_lite.compile(f, backend=counter)
    x = torch.randn(4, 4)
    cf(x, 3)
    if change == "dtype":
        args = (x.double(), 3)
    elif change == "shape":
        args = (torch.randn(5, 4), 3)
    elif change == "requires_grad":
        args = (x.clone().requires_grad_(), 3)
    elif change == "python_int":
        args = (x, 4)
    elif change == "noncontig":
        args = (x.t(), 3)
    else:
        scale["v"] = 7
        args = (x, 3)
    out = cf(*args)
    torch.testing.assert_close(out, f(*args))
    assert counter.frame_count == 2


def test_global_tensor_and_global_constant_are_guarded():
    counter = CompileCounter()
    mod = sys.modules[__name__]
    mod.GLOBAL_SCALE = 2.0
    mod.GLOBAL_T = torch.ones(3)

    def f(x):
        return x * GLOBAL_SCALE + GLOBAL_T  # noqa: F821 - set above

    cf = dynamo_lite.compile(f, backend=counter)
    x = torch.randn(3)
    torch.testing.assert_close(cf(x), x * 2.0 + 1)
    mod.GLOBAL_SCALE = 5.0
    torch.testing.assert_close(cf(x), x * 5.0 + 1)
    mod.GLOBAL_T = torch.zeros(3)
    torch.testing.assert_close(cf(x), x * 5.0)  # same metadata: no recompile, new value read
    assert counter.frame_count == 2


def test_grad_mode_is_guarded():
    counter = CompileCounter()
    cf = dynamo_lite.compile(lambda x: x * 2, backend=counter)
    x = torch.randn(3, requires_grad=True)
    assert cf(x).requires_grad
    with torch.no_grad():
        assert not cf(x).requires_grad
    assert counter.frame_count == 2


def test_cache_size_limit_runs_eagerly_with_one_warning(caplog):
    counter = CompileCounter()

    def f(x, n):
        return x + n

    cf = dynamo_lite.compile(f, backend=counter, dynamic=False)  # each n an entry
    with config.patch(cache_size_limit=3), caplog.at_level(logging.WARNING, logger="dynamo_lite"):
        for n in range(10):
            torch.testing.assert_close(cf(torch.zeros(2), n), torch.full((2,), float(n)))
    assert counter.frame_count == 3
    warnings = [r for r in caplog.records if "cache_size_limit" in r.getMessage()]
    assert len(warnings) == 1
    assert "test_api.py" in warnings[0].getMessage()


def test_recursive_hook_installation_without_tensor_work_is_not_warned_about(caplog):
    # transformers installs output-capturing hooks recursively on every submodule on the first
    # call: the frame is specialised on each module and never captures a graph. It may reach
    # the cache limit (then it is logged at INFO: no tensor work is left to eager) or run as
    # plain Python before that (a code whose traces capture nothing is skipped): never a warning
    hooked = []

    def install(module):
        for child in module.children():
            install(child)
        hooked.append(type(module).__name__)
        module.register_forward_hook(lambda m, a, o: None)

    model = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU()) for _ in range(4)])
    eager_model = copy.deepcopy(model)
    eager_hooked = []

    def install_eager(module):
        for child in module.children():
            install_eager(child)
        eager_hooked.append(type(module).__name__)
        module.register_forward_hook(lambda m, a, o: None)

    install_eager(eager_model)
    with config.patch(cache_size_limit=3), caplog.at_level(logging.INFO, logger="dynamo_lite"):
        dynamo_lite.compile(install, backend=CompileCounter())(model)
    assert hooked == eager_hooked
    assert all(len(m._forward_hooks) == 1 for m in model.modules())
    limit = [r for r in caplog.records if "cache_size_limit" in r.getMessage()]
    assert all(r.levelno == logging.INFO for r in limit)  # if reached: logged, not warned


def test_backend_error_names_the_backend():
    def broken_backend(gm, example_inputs):
        raise RuntimeError("kaboom")

    cf = dynamo_lite.compile(lambda x: x + 1, backend=broken_backend)
    with config.patch(suppress_errors=False):
        with pytest.raises(Exception, match="broken_backend"):
            cf(torch.ones(2))
    dynamo_lite.reset()
    with config.patch(suppress_errors=True):
        torch.testing.assert_close(cf(torch.ones(2)), torch.full((2,), 2.0))


def test_generator_functions_in_compiled_region():
    def gen(x):
        for i in range(3):
            yield x * i

    def f(x):
        return sum(gen(x)), list(gen(x))

    assert_same_as_eager(f, torch.randn(3))
    cg = dynamo_lite.compile(gen, backend="eager")
    assert [t.tolist() for t in cg(torch.ones(1))] == [[0.0], [1.0], [2.0]]


def test_recursion_is_inlined_when_bounded():
    def fact(n, x):
        return x if n == 0 else fact(n - 1, x * n)

    out = dynamo_lite.explain(fact)(5, torch.ones(2))
    assert out.graph_count == 1 and out.graph_break_count == 0
    assert_same_as_eager(fact, 5, torch.randn(3))


def test_deep_recursion_is_correct():
    def deep(n, x):
        return x if n == 0 else deep(n - 1, x + 1)

    assert_same_as_eager(deep, 80, torch.randn(3))


def test_user_recursion_error_is_eagers():
    def forever(x):
        return forever(x + 1)

    cf = dynamo_lite.compile(forever, backend="eager")
    with pytest.raises(RecursionError):
        cf(torch.ones(1))
    # the hook and caches still work afterwards
    assert dynamo_lite.compile(lambda x: x * 2, backend="eager")(torch.ones(1)).item() == 2.0


def test_nested_compiled_functions():
    inner = dynamo_lite.compile(lambda x: x * 2, backend="eager")

    def outer(x):
        return inner(x) + 1

    assert_same_as_eager(outer, torch.randn(3))


def test_compiled_call_in_two_threads():
    import threading

    cf = dynamo_lite.compile(lambda x: (x * 2).sum(), backend="eager")
    results = {}

    def work(i):
        x = torch.full((10,), float(i))
        results[i] = [cf(x).item() for _ in range(50)]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {i: [20.0 * i] * 50 for i in range(2)}


def test_argument_refcounts_stay_flat():
    cf = dynamo_lite.compile(lambda x, n: x + n, backend="eager")
    x = torch.ones(2)
    cf(x, 1)
    before = sys.getrefcount(x)
    for _ in range(100_000):
        cf(x, 1)
    assert sys.getrefcount(x) == before


def test_user_exception_type_message_and_line():
    import traceback

    def f(x):
        y = x + 1
        raise ValueError(f"bad value {y.shape[0]}")

    cf = dynamo_lite.compile(f, backend="eager")
    with pytest.raises(ValueError, match="bad value 3") as info:
        cf(torch.ones(3))
    last = traceback.extract_tb(info.value.__traceback__)[-1]
    assert last.filename == __file__ and "raise ValueError" in last.line


def test_optimize_decorating_a_module_keeps_its_methods_and_attributes():
    # TorchDynamo's test_guard_ordering_shape_fail: `optimize(backend)(module).fn(...)` and
    # `.forward(...)`; a plain function wrapper lost them
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = 3

        def fn(self, t):
            return t + self.scale

        def forward(self, t):
            return t * 2

    cnt = CompileCounter()
    m = M()
    opt = dynamo_lite.optimize(cnt)(m)
    assert isinstance(opt, M) and opt.scale == 3
    assert torch.equal(opt(torch.ones(2)), torch.full((2,), 2.0)) and cnt.frame_count == 1
    assert torch.equal(opt.fn(torch.ones(2)), torch.full((2,), 4.0))
    assert torch.equal(opt.forward(torch.ones(2)), torch.full((2,), 2.0))
