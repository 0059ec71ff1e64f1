"""``python <this file> CACHE_FOLDER``: the background builder of AOTInductor
libraries for the persistent capture cache (config.aot_libraries == "background").

A process that stores an inference graph captured with ``backend="inductor"`` writes a request
under ``CACHE_FOLDER/aot-queue`` and starts this builder unless one holds
``CACHE_FOLDER/aot-builder.lock``.  It runs as a script, not as ``-m dynamo_lite...``, so that it
takes that lock before anything imports torch (a second builder started meanwhile leaves at
once, having imported nothing); it runs at the lowest CPU priority, builds each
requested library beside its entry (``<entry>.aot``: persistent_cache._store_aot_library) and
ends when no request is left; it looks once more after it lets the lock go, so a request written
while it was ending is not stranded.
"""
import sys

del sys.path[0]  # (this file's folder: dynamo_lite/, whose modules are not top-level ones)

import fcntl  # noqa: E402
import logging  # noqa: E402
import os  # noqa: E402


def _lock(root: str):
    fd = os.open(os.path.join(root, "aot-builder.lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def _pending(root: str) -> bool:
    try:
        return any(not n.startswith(".") for n in os.listdir(os.path.join(root, "aot-queue")))
    except OSError:
        return False


def main(root: str) -> int:
    fd = _lock(root)
    if fd is None:
        return 0  # (another builder has the queue)
    try:
        os.nice(19)
    except OSError:
        pass
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s [{os.getpid()}] %(message)s")
    from dynamo_lite import persistent_cache  # lazy: after the lock (a builder that leaves imports no torch)

    while fd is not None:
        persistent_cache.build_queued_aot_libraries(root)
        os.close(fd)  # (lets the lock go)
        fd = _lock(root) if _pending(root) else None
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
