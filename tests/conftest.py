"""Shared fixtures: every test starts with empty caches; internal errors are raised."""
import pytest
import torch

import dynamo_lite
from dynamo_lite import config


@pytest.fixture(autouse=True)
def _fresh_state():
    dynamo_lite.reset()
    torch.manual_seed(0)
    with config.patch(raise_internal_errors=True):
        yield
    dynamo_lite.reset()
