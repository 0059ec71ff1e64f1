"""One launch of 2 gloo ranks for all of tests/distributed/.

Starting a Python process with torch costs seconds here, so the test files do not launch
ranks each: every file's ``ranks_main(rank, world_size)`` runs in one launch
(dynamo_lite.ranks.run_ranks, bounded by TIMEOUT), in the order of SUBJECTS, and the results
are kept for the session.  A subject that raises in a rank reports its traceback for that
file's tests only; a rank that hangs is killed at the timeout and fails them all.
"""
from __future__ import annotations

import functools
import importlib
import traceback

from dynamo_lite.ranks import run_ranks

SUBJECTS = ("test_ddp", "test_fsdp", "test_collectives")
TIMEOUT = 240.0


def _all_subjects(rank, world_size):
    import time

    import torch.distributed as dist

    out = {}
    for name in SUBJECTS:
        start = time.perf_counter()
        try:
            out[name] = ("ok", importlib.import_module(name).ranks_main(rank, world_size))
        except Exception:  # noqa: BLE001 - reported by that subject's tests
            out[name] = ("error", traceback.format_exc())
        out[name] += (time.perf_counter() - start,)
        dist.barrier()  # the next subject starts together on every rank
    return out


@functools.lru_cache(maxsize=None)
def _results():
    return run_ranks(_all_subjects, world_size=2, timeout=TIMEOUT)


def results_of(subject: str) -> list:
    """What ``subject``'s ``ranks_main`` returned, per rank (raises with a rank's traceback)."""
    per_rank = []
    for rank, result in enumerate(_results()):
        status, value, _seconds = result[subject]
        if status != "ok":
            raise AssertionError(f"{subject}.ranks_main failed on rank {rank}:\n{value}")
        per_rank.append(value)
    return per_rank
