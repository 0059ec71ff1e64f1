"""Exceptions raised and handled inside traced code are traced, not broken on.

A `raise` of a modelled exception unwinds the symbolic frames through their
3.11 exception tables; handlers (except, finally, with-exit) run in the trace.
Only an exception that leaves the compiled frame breaks the graph, at the
step that raised it, so Python raises it for real.
"""
import collections.abc

import pytest
import torch

import dynamo_lite
from dynamo_lite.testing import assert_same_as_eager, check_calls


def _captured_whole(fn, *args):
    out = dynamo_lite.explain(fn)(*args)
    return out.graph_count == 1 and out.graph_break_count == 0


class _View(collections.abc.Sequence):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i >= self.n:
            raise IndexError(i)
        return i


def seq_iteration(x):
    return x + sum(_View(3))  # Sequence.__iter__ stops on IndexError


def catch_own_raise(x):
    try:
        if x.shape[0] > 1:
            raise ValueError("big")
        y = x
    except ValueError as e:
        y = x * 2 + len(e.args[0])
    return y


def _helper(n):
    if n > 2:
        raise KeyError(n)
    return n


def catch_from_callee(x):
    try:
        return x * _helper(5)
    except KeyError:
        return x - 1


def finally_then_except(x, log):
    try:
        try:
            raise ValueError("a")
        finally:
            log.append("finally")
    except ValueError:
        log.append("caught")
    return x + 1


def bare_reraise_caught_outside(x):
    try:
        try:
            raise ValueError("inner")
        except ValueError:
            raise
    except ValueError:
        return x * 3


def tuple_of_classes_no_match_then_match(x):
    try:
        try:
            raise TypeError("t")
        except (KeyError, ValueError):
            return x
    except TypeError:
        return x + 10


class _Suppress:
    def __init__(self, log):
        self.log = log

    def __enter__(self):
        return self

    def __exit__(self, t, v, tb):
        self.log.append(t.__name__ if t else None)
        return t is KeyError


def with_exit_suppresses(x, log):
    with _Suppress(log):
        raise KeyError("k")
    with _Suppress(log):
        y = x + 1
    return y


def catch_folded_builtin_error(x):
    # int("z") / "ab".index("z") / 1 // 0 raise while folding on constants: raised in the trace
    out = []
    for text in ("12", "z"):
        try:
            out.append(int(text))
        except ValueError as e:
            out.append(str(e))
    try:
        n = "ab".index("z")
    except ValueError as e:
        n = len(e.args[0])
    try:
        v = 1 // 0
    except ZeroDivisionError:
        v = -1
    return x * n + v, out


def folded_error_escapes(x):
    y = x + 1
    return y * int("q")


CAPTURED = [
    (catch_folded_builtin_error, lambda: (torch.randn(2),)),
    (seq_iteration, lambda: (torch.randn(2),)),
    (catch_own_raise, lambda: (torch.randn(3),)),
    (catch_from_callee, lambda: (torch.randn(3),)),
    (finally_then_except, lambda: (torch.randn(2), [])),
    (bare_reraise_caught_outside, lambda: (torch.randn(2),)),
    (tuple_of_classes_no_match_then_match, lambda: (torch.randn(2),)),
    (with_exit_suppresses, lambda: (torch.randn(2), [])),
]


@pytest.mark.parametrize("fn,make_args", CAPTURED, ids=[f.__name__ for f, _ in CAPTURED])
def test_handled_exceptions_are_captured_whole_and_match_eager(fn, make_args):
    assert_same_as_eager(fn, *make_args())
    assert _captured_whole(fn, *make_args())


def raise_escapes(x):
    y = x + 1
    raise RuntimeError(f"nope {y.shape[0]}")


def reraise_escapes(x):
    try:
        raise ValueError("out")
    except ValueError:
        raise


def print_in_handler(x):
    try:
        raise ValueError("p")
    except ValueError as e:
        print("handled", e)
        y = x * 2
    return y


def assert_fails(x):
    assert x.shape[0] == 5, "wrong shape"
    return x


@pytest.mark.parametrize("fn", [raise_escapes, reraise_escapes, print_in_handler, assert_fails, folded_error_escapes])
def test_exceptions_leaving_the_frame_or_breaking_in_handlers_match_eager(fn):
    assert_same_as_eager(fn, torch.randn(2))
    assert_same_as_eager(fn, torch.randn(2))  # cached code


def test_fullgraph_lets_user_exceptions_through():
    with pytest.raises(RuntimeError, match="nope 2"):
        dynamo_lite.compile(raise_escapes, backend="eager", fullgraph=True)(torch.randn(2))


# ---- exceptions leaving the frame while traced handlers run: the __context__ chain -----
def _raises_key_error(y):
    raise KeyError(f"h {y.shape[0]}")


def raise_in_handler_via_helper(x):
    y = x + 1
    try:
        raise ValueError("a")
    except ValueError:
        _raises_key_error(y)


def raise_from_then_raise_in_outer_handler(x):
    y = x + 1
    try:
        try:
            raise ValueError("a")
        except ValueError as e:
            raise TypeError("b") from e
    except TypeError:
        y = y * 2
        raise RuntimeError(str(y.shape))


def handled_in_loop_then_raise(x):
    for i in range(3):
        try:
            raise ValueError(i)
        except ValueError:
            x = x + i
    raise KeyError("end")  # no __context__: every handler finished


def _chain(e):
    out = []
    while e is not None:
        out.append((type(e).__name__, str(e), type(e.__cause__).__name__, e.__suppress_context__))
        e = e.__context__
    return out


@pytest.mark.parametrize("fn", [raise_in_handler_via_helper, raise_from_then_raise_in_outer_handler,
                                handled_in_loop_then_raise])
def test_exception_chain_of_an_escaping_exception_matches_eager(fn):
    compiled = dynamo_lite.compile(fn, backend="eager")
    for _ in range(2):
        with pytest.raises(Exception) as eager:
            fn(torch.ones(2))
        with pytest.raises(Exception) as ours:
            compiled(torch.ones(2))
        assert _chain(ours.value) == _chain(eager.value)


# ---------------------------------------------------------------- exceptions with a Python __init__
class _TailCall(BaseException):  # trampoline's: carries the next call
    def __init__(self, call):
        self.call = call


class _CodedError(ValueError):
    def __init__(self, msg, code=3):
        super().__init__(msg)
        self.code = code

    def describe(self):
        return f"{self.args[0]}:{self.code}"


def _caught_coded(x, n):
    try:
        raise _CodedError("bad", code=n)
    except _CodedError as e:
        y = x * e.code
        text = (e.describe(), e.args, str(e), repr(e))
    t = _TailCall(n)
    return y + t.call, text, isinstance(t, BaseException)


def _raised_coded(x, n):
    y = x + 1
    if n > 0:
        raise _CodedError(f"n={n}", n)
    return y


def _returned_coded(x, n):
    e = _CodedError("kept", n)
    e.extra = x.sum()
    e.args = ("changed", n)
    return x * 2, e


def test_exception_with_a_python_init_is_built_in_the_trace():
    from dynamo_lite.testing import check_breaks

    check_breaks(_caught_coded, torch.ones(3), 2, breaks=0)
    out = check_breaks(_raised_coded, torch.ones(3), 4, breaks=1, raises=_CodedError)
    assert out.exception.code == 4 and out.exception.args == ("n=4",)
    out = check_breaks(_returned_coded, torch.ones(3), 5, breaks=0)
    e = out.value[1]
    assert type(e) is _CodedError and e.code == 5 and e.args == ("changed", 5) and float(e.extra) == 3.0


class _WithNew(Exception):
    def __new__(cls, *args):
        print("new")
        return super().__new__(cls, *args)


class _OverOSError(OSError):
    def __init__(self, path):
        super().__init__(2, "missing", path)


def test_exception_constructors_not_modelled_run_in_python():
    from dynamo_lite.testing import check_breaks

    def f(x):
        e = _WithNew("a")
        return x + 1, e.args

    def g(x):
        e = _OverOSError("p")
        return x + 1, e.errno, e.filename

    check_breaks(f, torch.ones(3), breaks=1)  # prints "new" once, as eager
    check_breaks(g, torch.ones(3), breaks=1)


def test_exception_caught_and_raised_again_keeps_its_first_traceback():
    # the traceback's deepest frame is where it was first raised, as in eager
    import traceback

    def fail():
        raise _CodedError("first", 1)

    def f(x):
        x = x * 2
        try:
            fail()
        except _CodedError as e:
            err = e
        y = x + 1
        raise err

    compiled = dynamo_lite.compile(f, backend="eager")
    for fn in (f, compiled):
        try:
            fn(torch.ones(2))
        except _CodedError as e:
            assert traceback.extract_tb(e.__traceback__)[-1].name == "fail"


def test_builtin_errors_raised_in_a_handler_chain_to_the_handled_exception():
    # 1/0, int("q"), math.sqrt(-1) raised inside an except block had no __context__ (a user
    # raise, a missing key did): e.__context__.__context__ then failed with AttributeError
    import math

    def f(x, text):
        try:
            try:
                try:
                    raise KeyError("a")
                except KeyError:
                    int(text)
            except ValueError:
                math.sqrt(-1.0)
        except ValueError as e:
            return x + 1, repr(e), repr(e.__context__), repr(e.__context__.__context__)
        return x - 1, "", "", ""

    check_calls(f, [(torch.ones(1), "abc"), (torch.ones(2), "q")], graphs=None)
