"""dynamo_lite.set_stance: as a function, a context manager and a decorator, with
torch.compiler.set_stance's stances; every compiled call is compared with eager."""
import pytest
import torch

import dynamo_lite
from dynamo_lite import stance


class CountingBackend:
    """Counts compiles and calls of the compiled graphs (to see which code ran)."""

    def __init__(self):
        self.compiles = 0
        self.calls = 0

    def __call__(self, gm, example_inputs):
        self.compiles += 1

        def run(*args):
            self.calls += 1
            return gm(*args)

        return run


def scale(x):
    return x * 2 + 1


@pytest.fixture(autouse=True)
def _default_stance():
    assert stance.current() == "default"
    yield
    dynamo_lite.set_stance("default")


def _compiled():
    backend = CountingBackend()
    return dynamo_lite.compile(scale, backend=backend), backend


def test_force_eager_runs_neither_the_compiler_nor_compiled_code():
    compiled, backend = _compiled()
    x = torch.ones(3)
    compiled(x)
    assert (backend.compiles, backend.calls) == (1, 1)
    dynamo_lite.set_stance("force_eager")
    torch.testing.assert_close(compiled(x), scale(x))  # guards would pass: still eager
    torch.testing.assert_close(compiled(torch.ones(2, 2)), scale(torch.ones(2, 2)))
    assert (backend.compiles, backend.calls) == (1, 1)
    dynamo_lite.set_stance("default")
    compiled(x)
    assert (backend.compiles, backend.calls) == (1, 2)


def test_eager_on_recompile_keeps_compiled_code_and_compiles_nothing_new():
    compiled, backend = _compiled()
    x = torch.ones(3)
    compiled(x)
    with dynamo_lite.set_stance("eager_on_recompile"):
        torch.testing.assert_close(compiled(x), scale(x))  # guards pass: compiled code
        y = torch.ones(3, dtype=torch.float64)
        torch.testing.assert_close(compiled(y), scale(y))  # a miss: eager, no compile
        fresh = dynamo_lite.compile(lambda t: t - 1, backend=backend)
        torch.testing.assert_close(fresh(x), x - 1)  # never compiled: eager too
    assert (backend.compiles, backend.calls) == (1, 2)


def test_fail_on_recompile_names_the_function_and_the_failed_guard():
    compiled, backend = _compiled()
    x = torch.ones(3)
    compiled(x)
    with dynamo_lite.set_stance("fail_on_recompile"):
        torch.testing.assert_close(compiled(x), scale(x))
        with pytest.raises(dynamo_lite.RecompileError) as info:
            compiled(torch.ones(3, dtype=torch.float64))
    text = str(info.value)
    assert isinstance(info.value, RuntimeError)
    assert f"scale ({__file__}:{scale.__code__.co_firstlineno})" in text, text
    assert "x.dtype changed from float32 to float64" in text, text
    assert (backend.compiles, backend.calls) == (1, 2)
    compiled(torch.ones(3, dtype=torch.float64))  # the default stance again: compiles
    assert backend.compiles == 2


def test_fail_on_recompile_raises_for_a_first_compile_too():
    backend = CountingBackend()
    compiled = dynamo_lite.compile(lambda t: t + 5, backend=backend)
    with dynamo_lite.set_stance("fail_on_recompile"):
        with pytest.raises(dynamo_lite.RecompileError, match="was not compiled before"):
            compiled(torch.ones(2))
        assert compiled(3) == 8  # no tensor: nothing to capture, nothing raised
    assert backend.compiles == 0


def test_as_a_decorator_the_stance_holds_while_the_function_runs():
    compiled, backend = _compiled()

    @dynamo_lite.set_stance("force_eager")
    def serve(x):
        assert stance.current() == "force_eager"
        return compiled(x)

    assert stance.current() == "default"  # decorating does not change it
    torch.testing.assert_close(serve(torch.ones(2)), scale(torch.ones(2)))
    assert stance.current() == "default"
    assert backend.compiles == 0


def test_as_a_function_and_nested_blocks_restore_what_was_before():
    dynamo_lite.set_stance("eager_on_recompile")
    with dynamo_lite.set_stance("fail_on_recompile"):
        with dynamo_lite.set_stance("force_eager"):
            assert stance.current() == "force_eager"
        assert stance.current() == "fail_on_recompile"
    assert stance.current() == "eager_on_recompile"
    with pytest.raises(ZeroDivisionError):
        with dynamo_lite.set_stance("force_eager"):
            1 / 0
    assert stance.current() == "eager_on_recompile"


def test_an_unknown_stance_is_an_error_that_lists_the_stances():
    with pytest.raises(ValueError, match="'eager_then_compile'.*default, force_eager, eager_on_recompile, "
                                         "fail_on_recompile"):
        dynamo_lite.set_stance("eager_then_compile")
    assert stance.current() == "default"


def test_modules_and_optimize_regions_follow_the_stance():
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    backend = CountingBackend()
    compiled = dynamo_lite.compile(model, backend=backend)
    x = torch.randn(4, 3)
    compiled(x)
    with dynamo_lite.set_stance("fail_on_recompile"):
        torch.testing.assert_close(compiled(x), model(x))
        with pytest.raises(dynamo_lite.RecompileError):
            compiled(torch.randn(4, 3, dtype=torch.float64).float().T.contiguous().T)  # other strides
    with dynamo_lite.set_stance("force_eager"), dynamo_lite.optimize(backend):
        torch.testing.assert_close(scale(x), x * 2 + 1)
    assert backend.compiles == 1
