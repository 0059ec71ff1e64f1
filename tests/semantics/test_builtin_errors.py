"""Builtins and user objects whose eager behaviour is an error or a validation:
the compiled run must raise the same exception (type, message, user's line)
and never run user code eager would not run (a user ``__hash__`` called by the
compiler when it wraps a value).

Covers: builtin.has_handler (no user __hash__), abstract-class instantiation,
setattr on a ``__slots__`` object, len()/truth validation of ``__len__`` /
``__bool__``, builtins rejecting keywords or bad arguments (sum, min/max,
getattr/hasattr, defaultdict), and ``__traceback__`` of exceptions raised and
caught in traced code.  Each test compares with eager (testing.assert_same_as_eager).
"""
import abc
import collections
import dataclasses
import traceback

import pytest
import torch

import dynamo_lite
from dynamo_lite.testing import check


def T():
    return torch.arange(3, dtype=torch.float32) + 1


def raised_at(fn, *args):
    """(type, message, line of the innermost frame) of what ``fn(*args)`` raises."""
    try:
        fn(*args)
    except Exception as e:  # noqa: BLE001 - the exception is the result
        tb = e.__traceback__
        while tb.tb_next is not None:
            tb = tb.tb_next
        return type(e), str(e), tb.tb_frame.f_code.co_filename, tb.tb_lineno
    raise AssertionError("did not raise")


def same_raise_site(fn, *args):
    """Compiled ``fn`` raises what eager raises, from the same line."""
    assert raised_at(fn, *args) == raised_at(dynamo_lite.compile(fn, backend="eager"), *args)


# ------------------------------------------------------------ the user's __hash__ is never called

class LoudHash:
    def __init__(self, t):
        self.t = t

    def __hash__(self):
        print("hash called")
        return 1


class HashNeedsField:
    def __hash__(self):
        return hash(self.field)  # AttributeError until .field is set


class CallableBadHash:
    def __call__(self, x):
        return x + 1

    def __hash__(self):
        raise AttributeError("no hash")


@dataclasses.dataclass(frozen=True)
class Frozen:
    a: int
    b: str


def test_argument_hash_not_called():
    def f(x, k):
        return x + k.t

    check(f, T(), LoudHash(T()))


def test_argument_hash_raising():
    def f(x, o):
        o.field = 1
        return x + 1, hash(o) == hash(1)

    check(f, T(), HashNeedsField())


def test_callable_argument_hash_raising():
    def f(x, fn):
        return fn(x * 2)

    check(f, T(), CallableBadHash())


def test_frozen_dataclass_built_and_hashed():
    def f(x):
        x = x * 2
        fr = Frozen(1, "z")
        try:
            fr.b = "no"
        except dataclasses.FrozenInstanceError as e:
            msg = str(e)
        return {fr: x}[Frozen(1, "z")] + 1, msg

    check(f, T())


# ------------------------------------------------------------ abstract classes

class Shape(abc.ABC):
    @abc.abstractmethod
    def area(self):
        ...


class Square(Shape):
    def area(self):
        return 4


def test_abstract_instantiation_raises_at_user_line():
    def f(x):
        y = x * 2
        return Shape(), y

    check(f, T())
    same_raise_site(f, T())


def test_abstract_instantiation_caught():
    def f(x, log):
        y = x * 2
        try:
            Shape()
        except TypeError as e:
            log.append(str(e))
        return y + Square().area()

    check(f, T(), [])


# ------------------------------------------------------------ __slots__

class Pt:
    __slots__ = ("x", "y")
    kind = "pt"

    def __init__(self, x, y):
        self.x = x
        self.y = y

    def __eq__(self, other):  # compared after the call by the differential harness
        return type(other) is Pt and all(
            torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b
            for a, b in ((self.x, other.x), (self.y, other.y)))

    __hash__ = object.__hash__


class NoDict:
    __slots__ = ()


@pytest.mark.parametrize("name", ["z", "kind"])
def test_slots_setattr_unknown_caught(name):
    def f(x, p):
        y = x * 2
        try:
            setattr(p, name, 1)
        except AttributeError as e:
            msg = str(e)
        return y, msg, p.x

    check(f, T(), Pt(1, 2))


def test_slots_setattr_unknown_raises_at_user_line():
    def f(x, p):
        y = x * 2
        p.z = y
        return y

    check(f, T(), Pt(1, 2))
    same_raise_site(f, T(), Pt(1, 2))


def test_new_object_without_dict_setattr():
    def f(x):
        y = x + 1
        o = NoDict()
        o.a = 1
        return y

    check(f, T())
    same_raise_site(f, T())


class SlotsWithDel:
    __slots__ = ("a",)
    blank_deleted = []  # instances freed without .a: made by someone else than the test

    def __init__(self):
        self.a = 1

    def __eq__(self, other):
        return type(other) is SlotsWithDel

    __hash__ = object.__hash__

    def __del__(self):
        if not hasattr(self, "a"):
            SlotsWithDel.blank_deleted.append(1)


def test_slots_error_caught_then_captured():
    """The AttributeError is raised in the trace: the code after the except block is captured."""
    def f(x, p):
        try:
            p.z = 1
        except AttributeError as e:
            p.x = p.x * 3
            msg = e.args
        return x + 1, msg, p.x

    cnt = check(f, T(), Pt(T(), 2))
    assert cnt.frame_count == 1


def test_slots_error_attributes_read_from_real_exception():
    def f(x, p):
        y = x * 2
        try:
            p.z = 1
        except AttributeError as e:
            err = e
        return y + 1, err.name, err.obj is p, str(err)

    check(f, T(), Pt(1, 2))


def test_slots_error_inside_other_handler_chains_context():
    def f(x, p):
        y = x * 2
        try:
            try:
                raise KeyError("first")
            except KeyError:
                p.z = 1
        except AttributeError as e:
            ctx = repr(e.__context__)
        return y, ctx

    check(f, T(), Pt(1, 2))


def test_slots_object_setattr_and_del_class():
    def f(x, p, q):
        y = x * 2
        try:
            object.__setattr__(p, "z", 1)
        except AttributeError as e:
            m1 = str(e)
        try:
            q.b = 1
        except AttributeError as e:
            m2 = str(e)
        object.__setattr__(p, "y", 5)
        return y, m1, m2, p.y

    check(f, T(), Pt(1, 2), SlotsWithDel())
    assert SlotsWithDel.blank_deleted == []  # the compiler made no blank instance (its __del__ would run)


# ------------------------------------------------------------ __len__ / __bool__ results

class Sized:
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n


class Truthy:
    def __init__(self, v):
        self.v = v

    def __bool__(self):
        return self.v


@pytest.mark.parametrize("n", [3, 0, True, -1, 2.0, "a"])
def test_len_result_validated(n):
    def f(x):
        y = x * 2
        n = len(Sized(nval))
        return y, n, type(n).__name__

    nval = n
    check(f, T())


@pytest.mark.parametrize("n", [2, 0, -1, 1.5])
def test_truth_through_len_validated(n):
    def f(x):
        y = x * 2
        if Sized(nval):
            return y
        return -y

    nval = n
    check(f, T())


@pytest.mark.parametrize("v", [True, False, 1, 0, None])
def test_bool_result_validated(v):
    def f(x):
        y = x * 2
        if Truthy(val):
            return y
        return -y

    val = v
    check(f, T())


# ------------------------------------------------------------ builtins raising TypeError

def _builtin_errors():
    it = iter([1])
    return {
        "sum_str": lambda: sum(["a", "b"], ""),
        "sum_str_kw": lambda: sum([], start=""),
        "sum_bytes": lambda: sum([b"a"], b""),
        "max_default_several": lambda: max(1, 2, default=0),
        "min_no_args": lambda: min(key=len),
        "max_no_args": lambda: max(),
        "min_unorderable": lambda: min([1, "a"]),
        "max_unorderable_args": lambda: max(1, "a"),
        "min_bad_keyword": lambda: min([1], foo=1),
        "defaultdict_factory": lambda: collections.defaultdict(5),
        "len_kw": lambda: len(obj=[1]),
        "sorted_kw": lambda: sorted(iterable=[2, 1]),
        "abs_kw": lambda: abs(x=-1),
        "any_kw": lambda: any(iterable=[1]),
        "next_kw": lambda: next(it=it),
        "callable_kw": lambda: callable(obj=len),
        "isinstance_kw": lambda: isinstance(1, class_or_tuple=int),
        "getattr_int_name": lambda: getattr(1, 5),
        "getattr_int_name_default": lambda: getattr(1, 5, None),
        "hasattr_int_name": lambda: hasattr(1, 5),
    }


@pytest.mark.parametrize("name", sorted(_builtin_errors()))
def test_builtin_raises_as_eager(name):
    call = _builtin_errors()[name]

    def f(x):
        y = x * 2
        return y, call()

    check(f, T())


def test_builtin_keywords_still_accepted():
    def f(x):
        vals = [3, 1, 2]
        return (x * 2, sorted(vals, key=lambda v: -v, reverse=True), min(vals, key=lambda v: -v),
                max([], default=7), min(vals, default=0), sum(vals, start=1), int("11", base=2),
                list(zip([1, 2], [3, 4], strict=True)), getattr(x, "shape"), hasattr(x, "nope"),
                collections.defaultdict(list, a=1)["a"], collections.defaultdict(None)["q"] if False else 0)

    check(f, T())


# ------------------------------------------------------------ __traceback__ of traced exceptions

def _tb_lines(e):
    lines = []
    tb = e.__traceback__
    while tb is not None:
        lines.append(tb.tb_lineno)
        tb = tb.tb_next
    return lines


def _helper_raise():
    try:
        raise ValueError("inner")
    except ValueError as e:
        return e


def test_caught_exception_traceback():
    def f(x):
        y = x * 2
        try:
            raise ValueError("tb")
        except ValueError as e:
            err = e
        return y + 1, _tb_lines(err)

    check(f, T())


def test_reraised_instance_traceback_accumulates():
    def f(x):
        y = x * 2
        e = RuntimeError("again")
        for i in range(3):
            try:
                raise e
            except RuntimeError:
                y = y + i
        return y, _tb_lines(e)

    check(f, T())


def test_traceback_of_exception_from_inlined_call():
    def f(x):
        y = x * 2
        e = _helper_raise()
        return y + 1, _tb_lines(e)

    check(f, T())


def test_traceback_of_never_raised_exception_is_none():
    def f(x):
        e = ValueError("built only")
        return x * 2, e.__traceback__

    cnt = check(f, T())
    assert cnt.frame_count == 1


def test_format_exception_in_handler():
    def f(x):
        y = x * 2
        try:
            raise KeyError("k")
        except KeyError as e:
            text = "".join(traceback.format_exception(e))
        return y, text.count("KeyError"), text.count("raise KeyError")

    check(f, T())


def test_with_traceback_after_traced_raise():
    def f(x):
        y = x * 2
        try:
            raise KeyError("k")
        except KeyError as e:
            err = e
        return y, err.with_traceback(None) is err, err.__traceback__

    check(f, T())
