"""register_backend and backends looked up by name.

Every test compares compiled with eager through dynamo_lite.testing; known bugs are strict
xfails in tests/test_known_bugs.py.
"""

import pytest
import torch

import dynamo_lite
from dynamo_lite.testing import CompileCounter, assert_same

pytest_plugins = ["pytester"]

X = torch.arange(6, dtype=torch.float32).reshape(2, 3) / 7 - 0.3


# ---------------------------------------------------------------- register_backend
def test_register_backend_by_name_and_decorator_with_name():
    from dynamo_lite import backends

    cnt = CompileCounter()
    name = "acceptance_api2_counter"
    try:
        dynamo_lite.register_backend(name, cnt)
        assert name in dynamo_lite.list_backends()
        assert_same(dynamo_lite.compile(lambda x: x * 2, backend=name)(X), X * 2)
        assert cnt.frame_count == 1
        with pytest.raises(ValueError):
            dynamo_lite.register_backend(name, cnt)
    finally:
        backends._BACKENDS.pop(name, None)


def test_register_backend_bare_decorator_as_in_torch():
    from dynamo_lite import backends

    def acceptance_api2_bare(gm, example_inputs):
        return gm.forward

    try:
        registered = dynamo_lite.register_backend(acceptance_api2_bare)
        assert registered is acceptance_api2_bare
        assert "acceptance_api2_bare" in dynamo_lite.list_backends()
    finally:
        for k in [k for k, v in backends._BACKENDS.items() if k is acceptance_api2_bare or
                  k == "acceptance_api2_bare"]:
            backends._BACKENDS.pop(k, None)
