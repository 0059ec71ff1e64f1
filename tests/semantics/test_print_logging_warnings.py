"""print, logging and warnings from compiled code, eager vs compiled.

Every test compares compiled with eager through dynamo_lite.testing; known bugs are strict
xfails in tests/test_known_bugs.py.
"""
import logging
import warnings

import torch

import dynamo_lite
from dynamo_lite.testing import LOG, check

log = logging.getLogger("acceptance.model")


class MyError(Exception):
    pass


class CodeError(ValueError):
    def __init__(self, code):
        super().__init__(f"code {code}")
        self.code = code


# ---------------------------------------------------------------- print / logging / warnings

def test_print_values_and_kwargs():
    def f(x):
        print("a", 1, [1, 2], sep="|", end="!\n")
        print(x.shape, x.dtype, x.numel())
        y = x + 1
        print(f"{y.sum().item():.2f}")
        return y

    check(f, torch.ones(3), graphs=None)


def test_logging_records_and_levels():
    def f(x):
        log.debug("debug %d", x.shape[0])
        y = x * 2
        log.info("info %s", tuple(y.shape))
        log.warning("warn")
        if log.isEnabledFor(logging.DEBUG):
            y = y + 1
        return y

    check(f, torch.ones(2), graphs=None)


def test_logging_level_change_between_calls():
    def f(x):
        log.info("hello")
        return x + 1

    def run(fn):
        out = []
        for level in (logging.DEBUG, logging.ERROR, logging.DEBUG):
            LOG.setLevel(level)
            h = logging.Handler()
            records = []
            h.emit = records.append
            log.addHandler(h)
            try:
                fn(torch.ones(2))
            finally:
                log.removeHandler(h)
            out.append(len(records))
        LOG.setLevel(logging.NOTSET)
        return out

    assert run(f) == run(dynamo_lite.compile(f, backend="eager"))


def test_warnings_warn_category_and_line():
    def f(x):
        warnings.warn("first", UserWarning)
        y = x + 1
        warnings.warn("second", DeprecationWarning, stacklevel=1)
        return y

    check(f, torch.ones(2), graphs=None)


def test_warning_as_error_raises_same_exception():
    def f(x):
        y = x * 2
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            warnings.warn("now an error", RuntimeWarning)
        return y

    check(f, torch.ones(2), graphs=None)


def test_torch_op_warning_matches():
    def f(x):
        return torch.nn.functional.softmax(x) * 2  # implicit dim warning

    check(f, torch.randn(3), graphs=None)


class _KeepsRecords(logging.Handler):
    def __init__(self):
        super().__init__()
        self.records = []

    def emit(self, record):
        self.records.append(record.getMessage())


def test_code_that_reads_what_its_own_handler_kept_sees_the_record():
    # logging calls are replayed after the graph when every handler only writes the record out; a
    # handler of the user's own (a list of records) sees it when the call is made, as the code
    # after it may read (it read an empty list before); the decision is guarded
    handler = _KeepsRecords()
    kept = logging.getLogger("acceptance.kept")
    kept.setLevel(logging.INFO)

    def f(x):
        handler.records.clear()
        y = x * 2
        kept.info("value %s", tuple(y.shape))
        return y * len(handler.records), list(handler.records)

    check(f, torch.ones(2), graphs=None)  # (no handler of its own: replayed)
    kept.addHandler(handler)
    try:
        check(f, torch.ones(2), graphs=None)
        compiled = dynamo_lite.compile(f, backend="eager")
        kept.removeHandler(handler)
        compiled(torch.ones(2))
        kept.addHandler(handler)
        out = compiled(torch.ones(2))  # (the guard: recompiled with the handler back)
        assert out[1] == ["value (2,)"] and torch.equal(out[0], torch.full((2,), 2.0))
    finally:
        kept.removeHandler(handler)
