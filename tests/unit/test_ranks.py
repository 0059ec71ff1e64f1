"""dynamo_lite/ranks.py: a rank that fails is reported with its traceback, and the launch
stays bounded (the rank left waiting in a collective is killed, no process outlives it)."""
from __future__ import annotations

import os
import time

import pytest

from dynamo_lite.ranks import RanksFailed, run_ranks


def fail_on_rank_1(rank, world_size):
    import torch.distributed as dist

    if rank == 1:
        raise ValueError(f"rank {rank} of {world_size} gives up")
    dist.barrier()  # rank 0 waits here for a rank that never comes


def test_a_failing_rank_is_reported_and_the_waiting_one_killed():
    start = time.monotonic()
    with pytest.raises(RanksFailed) as info:
        run_ranks(fail_on_rank_1, world_size=2, timeout=120)
    text = str(info.value)
    assert "ValueError: rank 1 of 2 gives up" in text and "--- rank 1:" in text
    assert "--- rank 0:" in text  # its own error (gloo saw the peer leave) or killed after the grace period
    assert time.monotonic() - start < 100  # bounded by the grace period, not the timeout
    # no rank of this launch is left running
    leftover = [p for p in os.listdir("/proc") if p.isdigit() and _is_rank_of(int(p), os.getpid())]
    assert leftover == []


def _is_rank_of(pid, launcher):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().split(b"\0")
    except OSError:
        return False
    return any(b"_rank_main" in c for c in cmd) and cmd[-2:-1] == [str(launcher).encode()]
