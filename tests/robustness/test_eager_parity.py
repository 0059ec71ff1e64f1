"""Things users observe besides return values: warnings, logging, randomness,
data-dependent operations and the order of side effects."""
import logging
import random
import warnings

import numpy as np
import pytest
import torch

import dynamo_lite
from dynamo_lite.testing import assert_same_as_eager


DATA_DEPENDENT = {
    "equal": lambda a: (torch.equal(a, a.clone()), a + 1),
    "allclose": lambda a: (torch.allclose(a, a * 1.0), a + 1),
    "bool_mask_index": lambda a: a[a > 0] * 2,
    "nonzero": lambda a: torch.nonzero(a > 0) + 1,
    "unique": lambda a: torch.unique(a.round()),
    "is_nonzero": lambda a: a[0].is_nonzero(),
    "item_scale": lambda a: a * a.max().item(),
    "int_of_tensor": lambda a: a * int(a.sum() > 0),
    "float_of_tensor": lambda a: float(a.sum()),
    "bool_of_any": lambda a: bool((a > 100).any()),
    "tolist": lambda a: a.tolist(),
    "masked_fill": lambda a: a.clone().masked_fill_(a > 0, 0),
}


@pytest.mark.parametrize("name", sorted(DATA_DEPENDENT))
def test_data_dependent_operations_match_eager(name):
    assert_same_as_eager(DATA_DEPENDENT[name], torch.randn(6))


def test_boolean_mask_assignment_to_input_mutates_it():
    def f(a):
        a[a > 0] = 0
        return a.sum()

    assert_same_as_eager(f, torch.randn(5))


def test_warning_from_an_op_comes_from_the_users_line_once():
    def f(x):
        y = x * 2
        z = torch.nn.functional.softmax(y)  # implicit-dim warning
        return z + 1

    def record(fn):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            fn(torch.randn(3))
        return [(str(i.message), i.category, i.filename, i.lineno) for i in w]

    assert record(dynamo_lite.compile(f, backend="eager")) == record(f)


def test_user_warning_and_logging_are_emitted(caplog):
    log = logging.getLogger("user.model")

    def f(x):
        warnings.warn("careful", UserWarning)
        log.info("scale %s", 2)
        return x * 2

    with warnings.catch_warnings(record=True) as w, caplog.at_level(logging.INFO, logger="user.model"):
        warnings.simplefilter("always")
        out = dynamo_lite.compile(f, backend="eager")(torch.ones(2))
    torch.testing.assert_close(out, torch.full((2,), 2.0))
    assert [str(i.message) for i in w] == ["careful"]
    assert [r.getMessage() for r in caplog.records if r.name == "user.model"] == ["scale 2"]


def test_python_random_and_numpy_draw_like_eager():
    def f(a):
        r = random.random()
        n = np.random.rand()
        return a * r + torch.rand(3) * n

    assert_same_as_eager(f, torch.randn(3))


def test_generator_with_side_effects_keeps_eager_order():
    def f(lst):
        def gen():
            for i in range(3):
                lst.append(i)
                yield i

        for v in gen():
            lst.append(-v)
        return lst

    assert_same_as_eager(f, [])


def test_generator_without_side_effects_is_captured_whole():
    def f(x):
        return sum(x * i for i in range(4)), tuple(x + i for i in range(2))

    assert_same_as_eager(f, torch.randn(3))
    out = dynamo_lite.explain(f)(torch.randn(3))
    assert out.graph_break_count == 0 and out.graph_count == 1


def test_backward_inside_compiled_function():
    def f(a):
        a = a.detach().requires_grad_()
        y = (a * a).sum()
        y.backward()
        return a.grad

    assert_same_as_eager(f, torch.randn(4))


def test_gradients_flow_through_compiled_graph():
    w = torch.randn(4, 3, requires_grad=True)

    def f(x):
        return (x @ w).relu().sum()

    x = torch.randn(2, 4)
    f(x).backward()
    expected = w.grad.clone()
    w.grad = None
    dynamo_lite.compile(f, backend="eager")(x).backward()
    torch.testing.assert_close(w.grad, expected)
