"""Exceptions raised, caught, chained and raised by Python-level operations, as eager shows them.

Every test compares compiled with eager through dynamo_lite.testing; known bugs are strict
xfails in tests/test_known_bugs.py.
"""
import collections
import logging
import math
import os
import sys
import warnings

import pytest
import torch

import dynamo_lite
from dynamo_lite.testing import check, check_calls

log = logging.getLogger("acceptance.model")


class MyError(Exception):
    pass


class CodeError(ValueError):
    def __init__(self, code):
        super().__init__(f"code {code}")
        self.code = code


# ---------------------------------------------------------------- exceptions

def test_exception_raised_out_of_compiled_function():
    def f(x):
        y = x * 2
        if y.shape[0] == 3:
            raise MyError(f"bad shape {tuple(y.shape)}")
        return y

    check(f, torch.ones(3), graphs=None)


def test_exception_raised_after_side_effects_keeps_them():
    def f(x, l):
        l.append("before")
        y = x + 1
        l.append(y)
        raise CodeError(7)

    check(f, torch.ones(2), [], graphs=None)


def test_exception_caught_inside():
    def f(x):
        try:
            y = x * 2
            raise KeyError("k")
        except KeyError as e:
            y = y + 1
            msg = str(e)
        return y, msg

    check(f, torch.ones(2), graphs=None)


def test_try_except_else_finally_order():
    def f(x, fail):
        order = []
        try:
            order.append("try")
            if fail:
                raise ValueError("fail")
        except ValueError:
            order.append("except")
            x = x - 1
        else:
            order.append("else")
            x = x + 1
        finally:
            order.append("finally")
            x = x * 2
        return x, order

    check_calls(f, [(torch.ones(2), False), (torch.ones(2), True)], graphs=None)


def test_exception_from_tensor_op_is_same_type_and_message():
    def f(x, y):
        z = x + 1
        return z @ y

    check(f, torch.ones(2, 3), torch.ones(2, 3), graphs=None)


def test_caught_tensor_op_error():
    def f(x):
        try:
            x.view(7)
        except RuntimeError as e:
            return x + 1, "shape" in str(e)
        return x

    check(f, torch.ones(3), graphs=None)


def test_exception_chaining_and_attributes():
    def f(x):
        try:
            try:
                raise CodeError(3)
            except CodeError as inner:
                raise MyError("outer") from inner
        except MyError as e:
            return x * e.__cause__.code, type(e.__cause__).__name__, str(e)

    check(f, torch.ones(2), graphs=None)


def test_raise_in_inlined_helper_caught_in_caller():
    def helper(x):
        if x.dim() == 1:
            raise IndexError("need 2d")
        return x

    def f(x):
        try:
            return helper(x)
        except IndexError as e:
            return x.unsqueeze(0) * 3, e.args

    check(f, torch.ones(2), graphs=None)


def test_stop_iteration_and_lookup_errors_in_python_code():
    def f(x, d):
        it = iter([1])
        next(it)
        try:
            next(it)
        except StopIteration:
            x = x + 1
        try:
            d["missing"]
        except LookupError as e:
            x = x * 2
            k = repr(e)
        return x, k

    check(f, torch.ones(2), {"a": 1}, graphs=None)


def test_exception_from_compiled_function_has_user_traceback_frame():
    def f(x):
        y = x + 1
        raise MyError("where")

    opt = dynamo_lite.compile(f, backend="eager")
    with pytest.raises(MyError) as info:
        opt(torch.ones(2))
    names = [entry.name for entry in info.traceback]
    assert "f" in names or any(n.startswith("__resume") for n in names)


# ---------------------------------------------------------------- errors raised by Python-level operations

PY_ERRORS = {
    "list_pop_out_of_range": lambda x, l: (l.pop(5), x + 1),
    "list_pop_keyword": lambda x, l: (l.pop(index=0), x + 1),
    "list_remove_missing": lambda x, l: (l.remove(99), x + 1),
    "list_index_missing": lambda x, l: (l.index(99), x + 1),
    "list_sort_mixed_types": lambda x, l: (l.append("s"), l.sort(), x + 1),
    "sorted_with_none": lambda x, l: (sorted([None, 1]), x + 1),
    "dict_get_keyword": lambda x, l: ({"a": 1}.get("a", default=2), x + 1),
    "dict_popitem_keyword": lambda x, l: ({"a": 1}.popitem(last=False), x + 1),
    "dict_pop_missing": lambda x, l: ({"a": 1}.pop("b"), x + 1),
    "namedtuple_replace_bad_field": lambda x, l: (collections.namedtuple("P", "a b")(1, 2)._replace(c=3), x + 1),
    "namedtuple_missing_arg": lambda x, l: (collections.namedtuple("P", "a b")(1), x + 1),
    "min_mixed_types": lambda x, l: (min([1, "a"]), x + 1),
    "max_empty": lambda x, l: (max([]), x + 1),
    "sum_of_strings": lambda x, l: (sum(["a", "b"]), x + 1),
    "len_of_int": lambda x, l: (len(5), x + 1),
    "int_of_bad_string": lambda x, l: (int("x"), x + 1),
    "math_domain_error": lambda x, l: (math.sqrt(-1), x + 1),
    "zero_division": lambda x, l: (divmod(1, 0), x + 1),
    "negative_shift": lambda x, l: (1 << -1, x + 1),
    "unhashable_key": lambda x, l: ({l: 1}, x + 1),
    "next_exhausted": lambda x, l: (next(iter([])), x + 1),
    "zip_strict_mismatch": lambda x, l: (list(zip([1], [1, 2], strict=True)), x + 1),
    "bad_format_spec": lambda x, l: ("{:d}".format(1.5), x + 1),
    "percent_format_arity": lambda x, l: ("%d %d" % (1,), x + 1),
    "str_join_of_ints": lambda x, l: (",".join(l), x + 1),
    "unexpected_keyword": lambda x, l: ((lambda a: a)(a=1, b=2), x),
    "missing_argument": lambda x, l: ((lambda a, b: a)(1), x),
    "shape_index_out_of_range": lambda x, l: (x.shape[5], x + 1),
    "size_dim_out_of_range": lambda x, l: (x.size(3), x + 1),
    "reduction_dim_out_of_range": lambda x, l: (x.sum(dim=3), x + 1),
    "tensor_item_of_many": lambda x, l: (x.item(), x + 1),
    "tensor_index_out_of_range": lambda x, l: (x[5], x + 1),
    "tensor_plus_string": lambda x, l: (x + "a", x + 1),
    "zeros_negative_size": lambda x, l: (torch.zeros(-1), x + 1),
    "arange_zero_step": lambda x, l: (torch.arange(0, 10, 0), x + 1),
}


@pytest.mark.parametrize("name", sorted(PY_ERRORS))
def test_errors_of_python_and_tensor_operations_match(name):
    check(PY_ERRORS[name], torch.ones(2), [1, 2, 3], graphs=None)


def test_failing_tensor_op_writes_nothing_extra_to_stderr(capfd):
    def f(x):
        y = x + 1
        return y @ torch.ones(3, 3)

    for fn in (f, dynamo_lite.compile(f, backend="eager")):
        with pytest.raises(RuntimeError):
            fn(torch.ones(2))
    captured = capfd.readouterr()
    assert captured.err == "", captured.err[:500]


def _warn_helper(x):
    warnings.warn("from helper", UserWarning, stacklevel=2)
    return x * 2


def _warns_twice(x):
    y = x + 1
    z = _warn_helper(y)
    warnings.warn("direct", RuntimeWarning)
    return z


def _record_calls(fn, action, n=3):
    globals().pop("__warningregistry__", None)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter(action)
        for _ in range(n):
            fn(torch.ones(3))
    globals().pop("__warningregistry__", None)
    return [(str(i.message), i.category, os.path.basename(i.filename), i.lineno) for i in w]


def test_warnings_with_always_filter_repeat_like_eager():
    assert _record_calls(dynamo_lite.compile(_warns_twice, backend="eager"), "always") == \
        _record_calls(_warns_twice, "always")


def test_default_filter_shows_each_warning_once_like_eager():
    assert _record_calls(dynamo_lite.compile(_warns_twice, backend="eager"), "default") == \
        _record_calls(_warns_twice, "default")


def _op_warns(x):
    y = torch.nn.functional.softmax(x + 1)  # implicit dim: torch warns (a tensor op that warns)
    return y * 2


@pytest.mark.parametrize("action", ["default", "always", "once", "ignore", "module"])
def test_tensor_op_warnings_shown_as_eager_shows_them(action):
    def later(x):  # compiled after the warning was shown: its trace must not reset the registry
        return x.sum() + 1

    def calls(fn, other):
        globals().pop("__warningregistry__", None)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter(action)
            for _ in range(3):
                fn(torch.ones(3))
                other(torch.ones(3))
        globals().pop("__warningregistry__", None)
        return [(str(i.message)[:40], i.category, os.path.basename(i.filename)) for i in w]

    compiled = calls(dynamo_lite.compile(_op_warns, backend="eager"), dynamo_lite.compile(later, backend="eager"))
    assert compiled == calls(_op_warns, later)



# ---------------------------------------------------------------- exceptions raised and handled inside traced code
# (called with a tensor and an empty list that handlers append to)
EXC_CASES = {}


def _exc_case(fn):
    EXC_CASES[fn.__name__] = fn
    return fn


class _E1(Exception):
    pass


class _E2(_E1):
    pass


@_exc_case
def nested_try_reraise(x, l):
    try:
        try:
            l.append(1)
            raise _E2("inner")
        except _E1 as e:
            l.append(str(e))
            raise
    except _E2 as e:
        l.append("outer " + str(e))
    return x + len(l)


@_exc_case
def bare_raise_out(x, l):
    try:
        raise ValueError("v")
    except ValueError:
        l.append("h")
        raise


@_exc_case
def raise_from_none(x, l):
    try:
        try:
            raise KeyError("k")
        except KeyError:
            raise ValueError("v") from None
    except ValueError as e:
        return (x, e.__cause__, e.__suppress_context__, type(e.__context__).__name__)


@_exc_case
def implicit_context(x, l):
    try:
        try:
            raise KeyError("k")
        except KeyError:
            raise ValueError("v")
    except ValueError as e:
        return (x, type(e.__context__).__name__, str(e.__context__))


@_exc_case
def sys_exc_info_in_handler(x, l):
    try:
        raise _E1("a")
    except _E1:
        t, v, tb = sys.exc_info()
        return (x, t.__name__, str(v), tb is not None)


@_exc_case
def exc_info_cleared_after(x, l):
    try:
        raise _E1("a")
    except _E1:
        pass
    return (x, sys.exc_info())


@_exc_case
def exception_in_else(x, l):
    try:
        y = x + 1
    except ValueError:
        y = x
    else:
        l.append("else")
        raise _E1("from else")
    return y


@_exc_case
def finally_with_exception_and_mutation(x, l):
    try:
        try:
            y = x * 2
            raise _E1("f")
        finally:
            l.append("fin")
            y = y + 1
    except _E1:
        l.append("caught")
    return y


@_exc_case
def return_in_finally_swallows(x, l):

    def g():
        try:
            raise _E1("lost")
        finally:
            return x * 3
    return g()


@_exc_case
def break_in_finally_swallows(x, l):
    for i in range(3):
        try:
            raise _E1("lost")
        finally:
            break
    return x + i


@_exc_case
def exception_in_with_exit(x, l):

    class CM:
        def __enter__(self):
            return self

        def __exit__(self, *a):
            l.append(a[0].__name__ if a[0] else None)
            raise _E2("from exit")
    try:
        with CM():
            y = x + 1
            raise _E1("body")
    except _E2 as e:
        return (y, str(e), type(e.__context__).__name__)


@_exc_case
def with_exit_suppresses_specific(x, l):

    class CM:
        def __enter__(self):
            return self

        def __exit__(self, t, v, tb):
            return t is _E2
    out = []
    for exc in (_E2, _E1):
        try:
            with CM():
                raise exc("x")
            out.append("suppressed")
        except _E1 as e:
            out.append("propagated " + type(e).__name__)
    return (x, out)


@_exc_case
def exception_types_tuple_and_order(x, l):
    out = []
    for exc in (KeyError("a"), IndexError("b"), ZeroDivisionError("c"), _E2("d")):
        try:
            raise exc
        except (KeyError, IndexError) as e:
            out.append(("lookup", type(e).__name__))
        except ArithmeticError:
            out.append("arith")
        except Exception as e:
            out.append(("other", str(e)))
    return (x, out)


@_exc_case
def exception_from_tensor_op_caught_and_retried(x, l):
    try:
        y = x.view(3, 5)
    except RuntimeError:
        y = x.view(-1)
    return y * 2


@_exc_case
def exception_in_loop_with_continue_and_state(x, l):
    total = x
    for i in range(4):
        try:
            if i % 2:
                raise _E1(str(i))
            total = total + i
        except _E1 as e:
            l.append(str(e))
            continue
        finally:
            total = total * 1.5
    return total


@_exc_case
def except_star(x, l):
    try:
        raise ExceptionGroup("g", [_E1("a"), KeyError("b")])
    except* _E1 as eg:
        l.append(len(eg.exceptions))
    except* KeyError:
        l.append("k")
    return x + len(l)


@_exc_case
def assert_error_message(x, l):
    try:
        assert x.shape[0] == 5, f"bad {x.shape[0]}"
    except AssertionError as e:
        return (x, str(e))


@_exc_case
def exception_args_and_notes(x, l):
    e = _E1("a", 2)
    e.add_note("note!")
    try:
        raise e
    except _E1 as err:
        return (x, err.args, err.__notes__)


@_exc_case
def generator_finally_on_close(x, l):

    def gen():
        try:
            yield 1
            yield 2
        finally:
            l.append("closed")
    g = gen()
    v = next(g)
    g.close()
    return x * v


@_exc_case
def stopiteration_in_generator_becomes_runtimeerror(x, l):

    def gen():
        yield 1
        raise StopIteration
    try:
        return list(gen())
    except RuntimeError as e:
        return (x, str(e))


@_exc_case
def unbound_local_error(x, l):

    def g(flag):
        if flag:
            y = 1
        return y
    try:
        g(False)
    except UnboundLocalError as e:
        return (x, str(e))


@_exc_case
def name_error_global(x, l):
    try:
        return undefined_name_xyz  # noqa: F821 - the NameError is the point
    except NameError as e:
        return (x, str(e))


@_exc_case
def attribute_error_message(x, l):
    try:
        x.nonexistent_attr
    except AttributeError as e:
        return (x, str(e))


@_exc_case
def type_error_call_message(x, l):

    def g(a):
        return a
    try:
        g(1, 2)
    except TypeError as e:
        return (x, str(e))


@pytest.mark.parametrize("name", sorted(EXC_CASES))
def test_exceptions_handled_inside(name):
    check(EXC_CASES[name], torch.ones(2), [], graphs=None)


def test_exception_context_cycle_is_cut_like_cpython():
    def f(x):
        a = KeyError("a")
        b = ValueError("b")
        try:
            try:
                raise a
            except KeyError:
                try:
                    raise b
                except ValueError:
                    raise a
        except KeyError as e:
            return x + 1, type(e.__context__).__name__, type(e.__context__.__context__).__name__, str(e)

    check(f, torch.ones(2), graphs=None)
