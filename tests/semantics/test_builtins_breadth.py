"""Every builtin that makes sense in model code, plus isinstance/issubclass with tuples, unions
and typing aliases, eager vs compiled, with the number of graph breaks torch.compile (2.13)
has for the same code (measured with torch._dynamo.explain; 0 unless said otherwise).

Every test compares compiled with eager through dynamo_lite.testing; known bugs are strict
xfails in tests/test_known_bugs.py.
"""
import collections.abc
import typing

import torch

from dynamo_lite.testing import check_breaks


def t(*vals):
    return torch.tensor([float(v) for v in vals])


X = t(1, 2, 3)


class A:
    pass


class B(A):
    pass


def test_isinstance_and_issubclass_with_tuples_unions_and_typing_aliases():
    def f(x, lst, o):
        checks = (isinstance(lst, list | tuple), isinstance(x, (int, torch.Tensor)), issubclass(bool, int),
                  isinstance(3, int | None), isinstance(o, (A, B)), isinstance(o, A | int),
                  issubclass(type(o), (A, int)), issubclass(B, A | None), isinstance(lst, typing.List),
                  isinstance(lst, typing.Sequence), isinstance(None, type(None)), isinstance(o, object),
                  isinstance(lst, collections.abc.Sequence), isinstance(lst, (collections.abc.Mapping, dict)),
                  isinstance({}, typing.Mapping), issubclass(list, typing.Iterable))
        return x * sum(checks), checks

    check_breaks(f, X, [1], B(), breaks=0)


def test_union_and_generic_alias_values():
    def f(x, o):
        kind = list | tuple
        return x * isinstance(o, kind), kind, int | str, list[int], typing.Optional[int]

    check_breaks(f, X, (1,), breaks=0)


class Obj:
    def __init__(self):
        self.a = 1
        self.b = [2]


def test_numeric_and_text_builtins():
    def f(x):
        return (x * abs(-2), all([1, 2]), any([0, 0]), ascii("é"), bin(5), bool(0), callable(len), chr(65),
                divmod(7, 2), list(enumerate("ab", 1)), list(filter(None, [0, 1, 2])), format(3.14159, ".2f"),
                format(5, "b"), hex(255), oct(8), ord("a"), pow(2, 10), pow(2, 3, 5), round(2.567, 2), round(2.5),
                int("12"), float("1.5"), complex(1, 2), len(range(3)), slice(1, 2).start)

    check_breaks(f, X, breaks=0)


def test_repr_str_ascii_of_containers_of_constants():
    def f(x, o):
        return (x + 1, repr("a"), repr([1, "b"]), str([1, ("x", None)]), repr({"k": [1.5]}), str({3}),
                ascii(["é"]), repr(()), str(o.b), repr(o.b), f"{[1, 2]}")

    check_breaks(f, X, Obj(), breaks=0)


def test_container_and_iteration_builtins():
    def f(x):
        it = iter([1, 2])
        return (x + 1, list(reversed([1, 2])), sorted([3, 1], reverse=True), sum([1, 2], 10),
                list(zip([1, 2], "ab", strict=True)), max(1, 5), min([4, 2], key=lambda v: -v), next(it),
                next(it, 9), next(it, 9), dict(zip("ab", [1, 2])), list(map(lambda a, b: a + b, [1, 2], [3, 4])),
                frozenset([1]), set("aa"), tuple("ab"), sorted({"b": 1, "a": 2}.items()),
                max({"a": 1, "b": 2}, key=lambda k: k), sum(v for v in range(4)), any(v > 2 for v in range(4)))

    check_breaks(f, X, breaks=0)


def test_attribute_builtins_on_objects():
    def f(x, o):
        setattr(o, "c", 3)
        return x * getattr(o, "a"), hasattr(o, "zz"), getattr(o, "zz", 5), type(o).__name__, vars(o)["c"], type(3)

    check_breaks(f, X, Obj(), breaks=0)


def test_len_of_vars_sees_the_attributes_written_in_the_trace():
    def f(x, o):
        before = len(vars(o))
        o.c = 3
        a = A()
        a.z = 1
        a.y = 2
        del a.y
        return x * before, len(vars(o)), len(o.__dict__), len(vars(a)), len(A().__dict__)

    check_breaks(f, X, Obj(), breaks=0)


class Ordered:
    def __init__(self, v):
        self.v = v

    def __lt__(self, other):
        print("lt", self.v, other.v)  # the comparisons are made in eager's order
        return self.v < other.v


def test_sorting_objects_by_their_lt_is_traced_in_eagers_order():
    def f(x, objs):
        made = [Ordered(3), Ordered(1), Ordered(2), Ordered(1)]
        s = sorted(made)
        made.sort(reverse=True)
        return x * s[0].v, [id(o) for o in s] == [id(made[3]), id(made[2]), id(made[1]), id(made[0])], \
            [o.v for o in made], [o.v for o in sorted(objs, key=lambda o: o)]

    check_breaks(f, X, [Ordered(5), Ordered(4)], breaks=0)


def test_sorting_by_a_comparison_not_known_at_trace_time_breaks():
    def f(x):
        return sorted([x[0], x[1]])

    check_breaks(f, X, breaks=1)


def test_zip_strict_mismatch_raises():
    def f(x):
        return x + 1, list(zip([1, 2], [1], strict=True))

    from dynamo_lite.testing import check_calls
    check_calls(f, [(X,)], graphs=None)


# ---------------------------------------------------------------- operator and math

import math  # noqa: E402 - grouped with its tests
import operator  # noqa: E402
import types  # noqa: E402


def test_operator_functions():
    def f(x):
        ns = types.SimpleNamespace(a=types.SimpleNamespace(b=3))
        return (x + 1, operator.itemgetter(1)([1, 2]), operator.itemgetter(0, 2)("abc"),
                operator.attrgetter("a.b")(ns), operator.methodcaller("upper")("a"),
                operator.methodcaller("split", ",")("a,b"), operator.add(1, 2), operator.mul(x, 2), operator.neg(x),
                operator.truth(0), operator.concat([1], [2]), operator.index(3), operator.length_hint([1, 2]),
                operator.countOf([1, 1], 1), operator.indexOf([1, 2], 2), operator.matmul(x, x), operator.lt(1, 2),
                operator.is_(None, None), operator.contains("ab", "a"), operator.getitem({"a": 1}, "a"),
                operator.pos(x), operator.abs(-x), operator.floordiv(7, 2), operator.not_(0))

    check_breaks(f, X, breaks=0)


def test_math_functions():
    def f(x):
        return (x * math.sqrt(4), math.floor(2.5), math.ceil(2.1), math.log(8, 2), math.pi, math.isclose(1.0, 1.0),
                math.inf > 1, math.isnan(float("nan")), math.prod([2, 3]), math.gcd(4, 6), math.comb(4, 2),
                math.exp(0), math.fsum([0.1] * 3), math.isqrt(17), math.log2(8), math.hypot(3, 4),
                math.dist([0, 0], [3, 4]), math.copysign(1, -0.0), math.trunc(-2.5), math.factorial(5))

    check_breaks(f, X, breaks=0)


def test_bytes_of_a_list_of_ints_and_of_a_size():
    def f(x):
        return x + 1, bytes([1, 2, 255]), bytes(3), bytes((7,)) + b"a", bytes([1, 2]).hex()

    check_breaks(f, torch.ones(3), breaks=0)


def test_zip_strict_length_mismatch_raises_in_the_trace():
    def f(x, *seqs):
        try:
            pairs = list(zip(*seqs, strict=True))
        except ValueError as e:
            return x + 1, str(e)
        return x - 1, pairs

    for seqs in ([[1], [1, 2]], [[1, 2], [1]], [[1, 2], [1, 2], [1]], [[1], [1], [1, 2]], [[1, 2], [3, 4]]):
        check_breaks(f, torch.ones(3), *seqs, breaks=0)


def test_alternate_constructors_of_builtin_types_fold():
    # classmethods / staticmethods of int, float, bytes and str are computed from their arguments
    def f(x):
        return (x * int.from_bytes(b"\x01\x02", "big"), bytes.fromhex("0a0b"), float.fromhex("0x1.8p1"),
                "abc".translate(str.maketrans("a", "x")), bytes.maketrans(b"a", b"b"),
                int.from_bytes(b"\x01", byteorder="little", signed=True))

    check_breaks(f, X, breaks=0)


def test_unbound_tensor_methods_are_the_tensors_methods():
    # torch.Tensor.add(x, 1) is x.add(1): traced (torch.compile traces it too)
    def f(x):
        return torch.Tensor.add(x, 1, alpha=2), x * torch.Tensor.size(x, 0), torch.Tensor.view(x, -1, 1).sum(1), \
            torch.Tensor.dim(x)

    check_breaks(f, X, breaks=0)


def test_unbound_tensor_method_with_bad_arguments_raises_as_eager():
    def f(x):
        return torch.Tensor.add(x, "a")

    check_breaks(f, X, breaks=None, raises=TypeError)


def test_object_sentinel_made_in_the_frame():
    # a fresh object() compared by identity (a "missing" sentinel); it cannot take attributes
    def f(x, d):
        missing = object()
        v = d.get("b", missing)
        return x * (v is missing), v is not missing, type(missing) is object, missing == missing, [missing][0] is missing

    check_breaks(f, X, {"a": 1}, breaks=0)
    check_breaks(f, X, {"b": 1}, breaks=0)

    def g(x):
        s = object()
        s.a = 1
        return x + 1

    check_breaks(g, X, breaks=None, raises=AttributeError)


def test_object_sentinel_returned_is_a_new_object_each_call():
    import dynamo_lite

    def f(x):
        s = object()
        return x + 1, s, s

    compiled = dynamo_lite.compile(f, backend="eager")
    a, b = compiled(X), compiled(X)
    assert type(a[1]) is object and a[1] is a[2] and a[1] is not b[1]
