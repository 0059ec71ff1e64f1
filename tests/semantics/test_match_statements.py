"""Acceptance: `match` statements are traced in one graph, with CPython's semantics.

MATCH_MAPPING / MATCH_SEQUENCE (type flags: str is not a sequence), MATCH_KEYS (the subject's
``get``, a user mapping's inlined), MATCH_CLASS (isinstance, ``__match_args__``, the builtin
"self" patterns, getattr: AttributeError is no match) and the errors CPython raises there
(dynamo_lite/symbolic/opcodes/match.py).  Each test first proves the opcodes are there.
"""
import collections
import dataclasses
import dis
import enum
from collections.abc import Mapping

import pytest
import torch

import dynamo_lite
from dynamo_lite.testing import check_breaks, check_calls, print_with_graph_break

X = torch.ones(3)


def _uses(fn, *opnames):
    present = {i.opname for i in dis.get_instructions(fn)}
    missing = set(opnames) - present
    assert not missing, f"{fn.__name__} no longer uses {sorted(missing)}"


class Color(enum.Enum):
    RED = 1
    GREEN = 2


def literals_captures_or_and_guards(x, s):
    match s:
        case [a, b] if a > b:
            return x * a - b
        case [a, b]:
            return x * b - a
        case 0 | 1:
            return x + 1
        case Color.RED:
            return x + 2
        case "add" | "plus":
            return x + 3
        case None:
            return x + 4
        case n if isinstance(n, int) and n > 10:
            return x * n
        case _:
            return x - 1


@pytest.mark.parametrize("s", [0, 1, Color.RED, Color.GREEN, "add", "plus", None, [5, 2], (2, 5), 20, 5, "other"])
def test_literals_captures_or_patterns_and_guards(s):
    _uses(literals_captures_or_and_guards, "MATCH_SEQUENCE", "GET_LEN")
    check_breaks(literals_captures_or_and_guards, X, s, breaks=0)


def sequences(x, s):
    match s:
        case []:
            return x - 5
        case [a]:
            return x + a
        case [a, *rest]:
            return x * a + len(rest)
        case _:
            return x - 100


@pytest.mark.parametrize("s", [[], [2], [3, 4, 5], (), (7,), (1, 2, 3, 4), range(0), range(2, 6), "ab", "",
                               b"xy", bytearray(b"z"), 5, {"a": 1}])
def test_sequence_patterns_with_star(s):
    # str, bytes and bytearray are not sequences for match (nor a dict, nor an int)
    _uses(sequences, "MATCH_SEQUENCE", "UNPACK_EX")
    check_breaks(sequences, X, s, breaks=0)


def test_sequence_pattern_recompiles_for_another_type():
    _uses(sequences, "MATCH_SEQUENCE")
    check_calls(sequences, [(X, [1, 2]), (X, "ab"), (X, (3,)), (X, [1, 2])])


def nested(x, s):
    match s:
        case [(a, b), {"k": [c, *_]}]:
            return x + a + b + c
        case [int(a), str() as name]:
            return x * a + len(name)
        case _:
            return x * 0


@pytest.mark.parametrize("s", [[(1, 2), {"k": [3, 4]}], [(1, 2), {"k": []}], [4, "abc"], [4, 5], "no"])
def test_nested_patterns(s):
    _uses(nested, "MATCH_SEQUENCE", "MATCH_MAPPING", "MATCH_KEYS", "MATCH_CLASS")
    check_breaks(nested, X, s, breaks=0)


class ReadOnly(Mapping):
    """A user mapping: `get` is collections.abc.Mapping's, calling this __getitem__."""

    def __init__(self, data):
        self._data = dict(data)

    def __getitem__(self, key):
        return self._data[key]

    def __iter__(self):
        return iter(self._data)

    def __len__(self):
        return len(self._data)


class Logged(ReadOnly):
    def get(self, key, default=None):
        self.asked = getattr(self, "asked", ()) + (key,)
        return super().get(key, default)


def mappings(x, m):
    match m:
        case {"op": "add", "v": v}:
            return x + v
        case {"op": "mul", **rest}:
            return x * len(rest)
        case {}:
            return x - 1
        case _:
            return x - 2


@pytest.mark.parametrize("m", [{"op": "add", "v": 2}, {"op": "mul", "a": 1, "b": 2}, {"op": "sub"}, {}, [1],
                               collections.OrderedDict(op="add", v=5), ReadOnly({"op": "add", "v": 3}),
                               ReadOnly({"op": "mul", "z": 0}), ReadOnly({"v": 1}), Logged({"op": "add", "v": 4}),
                               Logged({"op": "x"})])
def test_mapping_patterns_with_rest(m):
    _uses(mappings, "MATCH_MAPPING", "MATCH_KEYS")
    check_breaks(mappings, X, m, breaks=0)


def test_literal_patterns_before_a_mapping_pattern():
    def f(x, s):
        match s:
            case "add" | 3:
                return x + 1
            case {"op": op}:
                return x + len(op)
            case _:
                return x - 1

    _uses(f, "MATCH_MAPPING", "MATCH_KEYS")
    for s in [{"op": "ab"}, {"z": 1}, [1, 2], "add", 3]:
        check_breaks(f, X, s, breaks=0)  # a dict compared with "add" and 3 is not equal


def test_mapping_pattern_does_not_create_keys_of_a_defaultdict():
    def f(x, d):
        match d:
            case {"k": v}:
                return x + len(v), d
            case _:
                return x - 1, d

    _uses(f, "MATCH_KEYS")
    check_breaks(f, X, collections.defaultdict(list), breaks=0)  # get(), not d["k"]: d stays empty


class Keys:
    a = "same"
    b = "same"


def test_duplicate_mapping_key_raises_value_error():
    def f(x, d):
        try:
            match d:
                case {Keys.a: 1, Keys.b: 2}:
                    return x
        except ValueError as e:
            return x + 1, str(e)
        return x - 1

    _uses(f, "MATCH_KEYS")
    check_breaks(f, X, {"same": 1}, breaks=0)


@dataclasses.dataclass
class Point:
    x: int
    y: int


Pair = collections.namedtuple("Pair", "first second")


class Box:
    __match_args__ = ("w", "h")

    def __init__(self, w, h, label="box"):
        self.w = w
        self.h = h
        self.label = label


def classes(x, o):
    match o:
        case Point(0, y):
            return x + y
        case Point(x=px, y=0):
            return x * px
        case Pair(a, b) if a == b:
            return x - a
        case Pair(first=a):
            return x + a * 10
        case Box(w, h, label="big"):
            return x * w * h
        case Box(w):
            return x + w
        case _:
            return x * 0


@pytest.mark.parametrize("o", [Point(0, 5), Point(3, 0), Point(1, 1), Pair(2, 2), Pair(1, 3),
                               Box(2, 3, "big"), Box(4, 1), (1, 2), 7])
def test_class_patterns_dataclass_namedtuple_and_match_args(o):
    _uses(classes, "MATCH_CLASS")
    check_breaks(classes, X, o, breaks=0)


class Celsius(int):
    pass


def builtin_self(x, v):
    match v:
        case bool(b):
            return x + 100 * b
        case int(n) if n < 0:
            return x - n
        case int(n) | float(n):
            return x + n
        case str(s):
            return x + len(s)
        case tuple((a, *_)) | list([a, *_]):
            return x * a
        case dict({"k": k}):
            return x + k
        case set(s) | frozenset(s):
            return x + len(s)
        case bytes(b) | bytearray(b):
            return x - len(b)
        case _:
            return x * 0


@pytest.mark.parametrize("v", [True, -4, 3, 2.5, "abcd", (3, 1), [2], {"k": 5}, {1, 2}, frozenset({1}), b"xy",
                               None])
def test_builtin_self_patterns(v):
    _uses(builtin_self, "MATCH_CLASS")
    check_breaks(builtin_self, X, v, breaks=0)


def test_self_pattern_of_a_builtin_subclass_binds_the_subject():
    def f(x, v):
        match v:
            case Celsius(n):
                return x + 1, n is v
            case _:
                return x - 1, None

    _uses(f, "MATCH_CLASS")
    check_breaks(f, X, Celsius(7), breaks=0)
    check_breaks(f, X, 7, breaks=0)


def test_match_on_tensor_metadata():
    def f(x, flag):
        match x.dim():
            case 1:
                y = x + 1
            case 2:
                y = x.sum(0)
            case _:
                y = x.flatten()
        match (x.shape[0], flag):
            case (3, True):
                return y * 2
            case (n, _):
                return y - n

    _uses(f, "MATCH_SEQUENCE")
    for args in [(torch.ones(3), True), (torch.ones(3, 2), False), (torch.ones(4, 2, 2), True)]:
        check_breaks(f, *args, breaks=0)


def test_match_on_a_tensor_and_its_shape():
    def f(x):
        match x:
            case [a, b]:  # a tensor is not a sequence for match
                return a + b
            case torch.Tensor(shape=(n, m)):
                return x * n + m
            case torch.Tensor(ndim=1):
                return x - 1

    _uses(f, "MATCH_SEQUENCE", "MATCH_CLASS")
    check_breaks(f, torch.ones(2, 3), breaks=0)
    check_breaks(f, torch.ones(2), breaks=0)


def test_no_case_matches():
    def f(x, s):
        y = x * 2
        match s:
            case [1, 2]:
                y = y + 1
            case {"a": 1}:
                y = y + 2
            case Point(1, 2):
                y = y + 3
        return y

    _uses(f, "MATCH_SEQUENCE", "MATCH_MAPPING", "MATCH_CLASS")
    check_breaks(f, X, (1, 3), breaks=0)
    check_breaks(f, X, Point(2, 1), breaks=0)


def too_many_positional(x, o):
    match o:
        case Box(w, h, extra):
            return x + w
        case _:
            return x * 0


def test_too_many_positional_sub_patterns_raise_type_error():
    _uses(too_many_positional, "MATCH_CLASS")
    check_breaks(too_many_positional, X, Box(1, 2), breaks=1, raises=TypeError)  # leaves the frame
    check_breaks(too_many_positional, X, 5, breaks=0, raises=None)  # not a Box: no error


def test_class_pattern_errors_handled_in_the_trace():
    class Dup:
        __match_args__ = ("a", "a")
        a = 1

    class NotTuple:
        __match_args__ = ["a"]

    def not_a_class(v):
        return v

    def f(x, o, cls):
        try:
            match o:
                case Box(w, h, extra):
                    return x + w
                case int(a, b):
                    return x + a
                case Dup(a, b):
                    return x + a
                case Box(w, label=w2) if False:
                    return x
                case NotTuple(a):
                    return x
                case cls(a):
                    return x + 2
        except TypeError as e:
            return x - 1, str(e)
        return x * 0

    _uses(f, "MATCH_CLASS")
    for o, cls in [(Box(1, 2), int), (3, int), (Dup(), int), (NotTuple(), int), (4.5, not_a_class)]:
        check_breaks(f, X, o, cls, breaks=0)


class Guarded:
    __match_args__ = ("value", "missing")

    def __init__(self, error):
        self.error = error

    @property
    def value(self):
        if self.error is not None:
            raise self.error("no value")
        return 5

    @property
    def missing(self):
        raise AttributeError("never there")


def attribute_errors(x, o):
    match o:
        case Guarded(v, m):
            return x + v + m
        case Guarded(v):
            return x + v
        case Guarded(error=e):
            return x - 1
    return x * 0


def test_attribute_error_means_no_match():
    _uses(attribute_errors, "MATCH_CLASS")
    check_breaks(attribute_errors, X, Guarded(None), breaks=0)  # `missing` raises: the next case
    check_breaks(attribute_errors, X, Guarded(AttributeError), breaks=0)


def test_attribute_getter_raising_propagates():
    def f(x, o):
        try:
            return attribute_errors(x, o)
        except ValueError as e:
            return x - 2, str(e)

    _uses(attribute_errors, "MATCH_CLASS")
    check_breaks(f, X, Guarded(ValueError), breaks=0)  # handled in the trace
    check_breaks(attribute_errors, X, Guarded(ValueError), breaks=1, raises=ValueError)  # leaves the frame


def test_case_body_with_graph_break_resumes():
    def f(x, cmd):
        y = x * 2
        match cmd:
            case {"op": op, **rest}:
                print_with_graph_break("op", op, rest)
                y = y + len(rest)
            case [first, *others]:
                y = y * first
        return y.sum() + 1

    _uses(f, "MATCH_MAPPING", "MATCH_KEYS")
    check_breaks(f, X, {"op": "a", "b": 1}, breaks=1)
    check_breaks(f, X, [3, 4], breaks=0)


class _Registered:
    """A class registered with collections.abc.Sequence after a function matched on it."""

    def __len__(self):
        return 2

    def __getitem__(self, i):
        if i >= 2:
            raise IndexError(i)
        return i * 10


def test_a_class_registered_as_a_sequence_later_matches_then():
    import collections.abc

    def f(x, obj):
        match obj:
            case [a, b]:
                return x + a + b
            case _:
                return x - 1

    compiled = dynamo_lite.compile(f, backend="eager")
    obj = _Registered()
    assert torch.equal(compiled(torch.ones(2), obj), f(torch.ones(2), obj))
    collections.abc.Sequence.register(_Registered)  # the class has the sequence flag from now on
    assert torch.equal(f(torch.ones(2), obj), torch.ones(2) + 10)
    assert torch.equal(compiled(torch.ones(2), obj), torch.ones(2) + 10)
