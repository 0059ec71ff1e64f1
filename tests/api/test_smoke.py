"""End-to-end smoke tests: a function and a module are captured, cached and equal eager."""
import torch

import dynamo_lite
from dynamo_lite.testing import CompileCounter, assert_same_as_eager


def test_function_is_captured_once_and_cached():
    counter = CompileCounter()

    def f(x, y):
        return (x + y).relu() * 2

    cf = dynamo_lite.compile(f, backend=counter)
    x, y = torch.randn(3), torch.randn(3)
    for _ in range(3):
        torch.testing.assert_close(cf(x, y), f(x, y))
    assert counter.frame_count == 1
    assert counter.op_count == 3


def test_module_is_captured():
    counter = CompileCounter()
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    cm = dynamo_lite.compile(model, backend=counter)
    x = torch.randn(5, 4)
    torch.testing.assert_close(cm(x), model(x))
    assert counter.frame_count == 1
    assert isinstance(cm, torch.nn.Sequential)
    assert list(cm.state_dict()) == list(model.state_dict())


def test_print_breaks_the_graph_and_prints_once():
    def f(x):
        y = x * 2
        print("value", y.shape)
        return y + 1

    assert_same_as_eager(f, torch.randn(3))
