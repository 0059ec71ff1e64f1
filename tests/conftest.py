"""Shared fixtures: every test starts with empty caches; internal errors are raised.

The persistent capture cache writes into a directory of this run (removed at exit).

Process-wide state a test may change is put back after it: the first ``torch.compile`` (the
reference some tests run side by side) turns ``torch.distributions.Distribution``'s default
``validate_args`` off for the rest of the process (TorchDynamo's TorchPatcher), which would make
later tests see validation-free distributions where eager code (and dynamo_lite) validates.
"""
import atexit
import os
import shutil
import tempfile

import pytest
import torch

import dynamo_lite
from dynamo_lite import config

# The persistent capture cache is on by default: this run (and the processes its tests start)
# writes into a directory of its own, so it neither reads a user's entries nor leaves its own
_CACHE_DIR = tempfile.mkdtemp(prefix="dynamo-lite-test-cache-")
os.environ["DYNAMO_LITE_CACHE_DIR"] = config.cache_dir = _CACHE_DIR
atexit.register(shutil.rmtree, _CACHE_DIR, ignore_errors=True)
# no background AOTInductor builds (config.aot_libraries) behind the tests' backs: the tests of
# them ask for them
os.environ["DYNAMO_LITE_AOT_LIBRARIES"] = "0"
config.aot_libraries = False

# read before any test module is collected: a module that runs torch.compile at import time, or a
# module-scoped fixture that does, must not make its "off" the value every test puts back
_VALIDATE_ARGS = torch.distributions.Distribution._validate_args


@pytest.fixture(autouse=True)
def _fresh_state():
    dynamo_lite.reset()
    torch.manual_seed(0)
    try:
        with config.patch(raise_internal_errors=True):
            yield
    finally:
        torch.distributions.Distribution.set_default_validate_args(_VALIDATE_ARGS)
    dynamo_lite.reset()
