"""A small workload for tools/valgrind_check.sh: every path of the C extension, briefly.

The hook (install, per-thread callback, frame filter), the co_extra cache
(insert, hit, miss, SKIP, reset), guard programs (pass, fail, recompile),
CallWithHookOff, resume functions after graph breaks, exceptions through
compiled code, two threads, and teardown.  Prints "workload ok" at the end.
"""
import gc
import threading

import torch

import dynamo_lite
from dynamo_lite import _C


def full(x, y):
    return (x * y).relu() + 1


def broken(x, n):
    y = x.sin() + n
    print("break", n)
    if y.sum() > 0:
        return y * 2
    return y - 1


def raises(x):
    y = x + 1
    raise ValueError(f"user error {tuple(y.shape)}")


def main():
    for backend in ("eager",):
        cf, cb, cr = (dynamo_lite.compile(f, backend=backend) for f in (full, broken, raises))
        for n in range(3):
            for shape in ((2, 3), (4,)):
                x = torch.randn(shape)
                assert torch.equal(cf(x, x), full(x, x))
                assert torch.equal(cb(x, n), broken(x, n))
                try:
                    cr(x)
                except ValueError:
                    pass
        wrapped = _C.CallWithHookOff(full)
        x = torch.ones(3)
        assert torch.equal(wrapped(x, x), full(x, x))

        def worker():
            for i in range(5):
                t = torch.randn(i + 1)
                assert torch.equal(cf(t, t), full(t, t))

        threads = [threading.Thread(target=worker) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        dynamo_lite.reset()
        gc.collect()
    assert _C.get_callback() is None
    print("extension:", _C.__file__)
    print("workload ok")


if __name__ == "__main__":
    main()
