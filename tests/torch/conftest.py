"""Fixtures shared by the tests of torch work (tests/torch/)."""
import pytest
import torch


@pytest.fixture(scope="module")
def single_thread():
    """Tiny models: one intra-op thread is faster and steadier on shared cores (no
    oversubscription).  A module uses it with ``pytestmark = pytest.mark.usefixtures("single_thread")``."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
