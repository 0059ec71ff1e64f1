"""Run a function on several local ranks joined in a gloo process group (tests, bench).

    run_ranks(target, *args, world_size=2, timeout=120.0) -> [result of rank 0, rank 1, ...]

Each rank is a fresh ``python`` process (``subprocess``, so the environment is explicit):
PYTHONPATH starts with the checkout this module is in and the directory of ``target``'s
file, so ranks import the same dynamo_lite and the same test module as the caller.  A rank
joins ``gloo`` on 127.0.0.1 at a free port (``init_process_group``), runs one intra-op
thread, calls ``target(rank, world_size, *args)`` (a module-level function; arguments and
result are pickled) and destroys the group.  The call is bounded: when a rank fails, the
others get a few seconds to fail too (they usually wait in a collective) and are then
killed; at ``timeout`` every rank still running is killed (and a rank whose launcher
died exits by itself).  Either way the error names each
rank's exception, with its traceback and the tail of its output.  Internal errors of
dynamo_lite are raised in the ranks, as in the test-suite (DYNAMO_LITE_RAISE_INTERNAL=1).
Tested by tests/distributed/test_ddp.py.
"""
from __future__ import annotations

import os
import pickle
import socket
import subprocess
import sys
import tempfile
import time
from typing import Callable

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the checkout holding dynamo_lite/
_GRACE_SECONDS = 5.0  # how long the other ranks get to fail after one failed


class RanksFailed(AssertionError):
    """A rank raised, was killed at the timeout, or exited without a result."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(target: Callable, *args, world_size: int = 2, timeout: float = 120.0, env: dict = None) -> list:
    """``[target(0, world_size, *args), target(1, ...), ...]``, each run in its own process."""
    module = sys.modules[target.__module__]
    where = os.path.dirname(os.path.abspath(module.__file__))
    with tempfile.TemporaryDirectory(prefix="dl_ranks_") as tmp:
        job = os.path.join(tmp, "job.pkl")
        with open(job, "wb") as f:
            pickle.dump((_module_name(module), target.__qualname__, args, world_size, free_port()), f)
        child_env = dict(os.environ, **(env or {}))
        child_env["PYTHONPATH"] = os.pathsep.join([_ROOT, where] + [p for p in [os.environ.get("PYTHONPATH")] if p])
        child_env.setdefault("DYNAMO_LITE_RAISE_INTERNAL", "1")
        procs, logs = [], []
        try:
            for rank in range(world_size):
                log = open(os.path.join(tmp, f"rank{rank}.log"), "wb")
                logs.append(log)
                procs.append(subprocess.Popen(
                    [sys.executable, "-c", "import sys; from dynamo_lite.ranks import _rank_main; "
                                           "_rank_main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))",
                     tmp, str(rank), str(os.getpid())],
                    env=child_env, stdout=log, stderr=subprocess.STDOUT, cwd=tmp))
            timed_out = _wait(procs, time.monotonic() + timeout)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            for log in logs:
                log.close()
        results, problems = [], []
        for rank, p in enumerate(procs):
            path = os.path.join(tmp, f"rank{rank}.out")
            status, value = ("missing", None)
            if os.path.exists(path):
                with open(path, "rb") as f:
                    status, value = pickle.load(f)
            if status == "ok":
                results.append(value)
                continue
            with open(os.path.join(tmp, f"rank{rank}.log"), "rb") as f:
                tail = f.read().decode(errors="replace")[-3000:]
            what = value if status == "error" else (
                f"killed after {timeout:.0f} s" if rank in timed_out else f"exited with {p.returncode}, no result")
            problems.append(f"--- rank {rank}: {what}\n--- its output (tail):\n{tail}")
        if problems:
            raise RanksFailed(f"{target.__qualname__} on {world_size} ranks:\n" + "\n".join(problems))
        return results


def _module_name(module) -> str:
    """The name a rank imports ``module`` by (a script run as __main__: its file's name)."""
    if module.__name__ != "__main__":
        return module.__name__
    if module.__spec__ is not None:  # python -m package.module
        return module.__spec__.name
    return os.path.splitext(os.path.basename(module.__file__))[0]


def _wait(procs: list, deadline: float) -> set:
    """Wait for every process; the ranks still running at the deadline (returned) or a grace
    period after one failed are killed by the caller."""
    failed_at = None
    while True:
        codes = [p.poll() for p in procs]
        if all(c is not None for c in codes):
            return set()
        now = time.monotonic()
        if failed_at is None and any(c not in (None, 0) for c in codes):
            failed_at = now
        if now > deadline or failed_at is not None and now > failed_at + _GRACE_SECONDS:
            return {i for i, c in enumerate(codes) if c is None}
        time.sleep(0.05)


def _exit_with_launcher(launcher: int) -> None:
    """A rank whose launcher died (killed before it could kill the ranks) exits too."""
    import threading

    def watch():
        while os.getppid() == launcher:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, name="dl-rank-watchdog", daemon=True).start()


def _rank_main(tmp: str, rank: int, launcher: int) -> None:
    """A rank's process: join the group, run the target, write (status, value)."""
    import importlib
    import traceback

    _exit_with_launcher(launcher)
    with open(os.path.join(tmp, "job.pkl"), "rb") as f:
        module_name, qualname, args, world_size, port = pickle.load(f)
    out = os.path.join(tmp, f"rank{rank}.out")
    try:
        import torch
        import torch.distributed as dist

        torch.set_num_threads(1)
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size)
        try:
            target = importlib.import_module(module_name)
            for part in qualname.split("."):
                target = getattr(target, part)
            result = ("ok", target(rank, world_size, *args))
        finally:
            dist.destroy_process_group()
    except BaseException:  # noqa: BLE001 - reported to the parent with the traceback
        result = ("error", traceback.format_exc())
    with open(out + ".tmp", "wb") as f:
        pickle.dump(result, f)
    os.replace(out + ".tmp", out)
    sys.exit(0 if result[0] == "ok" else 1)


__all__ = ["run_ranks", "free_port", "RanksFailed"]
