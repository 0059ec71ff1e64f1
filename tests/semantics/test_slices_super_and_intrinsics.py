"""Slices, super(), unary plus, star-unpacking into tuples and PEP 695 generics in compiled code.

These are the constructs whose bytecode changed in 3.12: ``x[a:b]`` / ``x[a:b] = v`` became
BINARY_SLICE / STORE_SLICE, ``super().m()`` one LOAD_SUPER_ATTR, ``+x`` and ``(*a,)`` calls of
CALL_INTRINSIC_1 (UNARY_POSITIVE, LIST_TO_TUPLE), ``return None`` a RETURN_CONST.  Each test
first checks that the function's bytecode holds one of the forms it is about (3.11's or
3.12's), then compares with eager.
"""
import dis
import sys

import pytest
import torch

import dynamo_lite
from dynamo_lite.testing import check, check_breaks

X = torch.arange(6.0)


def _opnames(fn) -> set:
    return {i.opname for i in dis.get_instructions(fn)}


def test_slice_load_and_store():
    def f(x, l):
        head = x[1:4]
        l[0:2] = [head.sum(), x[-2:].sum()]
        return head * 2, l[1:]

    assert _opnames(f) & {"BINARY_SLICE", "BUILD_SLICE"}
    assert _opnames(f) & {"STORE_SLICE", "STORE_SUBSCR"}
    check(f, X, [1, 2, 3])


def test_slice_of_a_tensor_with_a_step_and_a_stored_tensor_slice():
    def f(x):
        y = x.clone()
        y[1:3] = x[::2][:2] * 10
        return y

    check(f, X)


class Base(torch.nn.Module):
    scale = 3.0

    def forward(self, x):
        return x + 1

    def extra(self, x, k=2):
        return x * k


class Child(Base):
    def forward(self, x):
        return super().forward(x) * super().scale + super().extra(x, k=5)


def test_super_method_and_attribute():
    assert _opnames(Child.forward) & {"LOAD_SUPER_ATTR", "LOAD_GLOBAL"}
    check(Child(), X)


def test_unary_plus_and_star_into_a_tuple():
    def f(x, *rest):
        t = (*rest, x)
        return +x, +t[0], len(t)

    assert _opnames(f) & {"CALL_INTRINSIC_1", "UNARY_POSITIVE"}
    check(f, X, 1, 2)


def test_return_of_a_constant_after_tensor_work():
    def f(x, out):
        out.append(x.sin())
        return None

    assert _opnames(f) & {"RETURN_CONST", "RETURN_VALUE"}
    check(f, X, [])


@pytest.mark.skipif(sys.version_info < (3, 12), reason="type parameter syntax (PEP 695) is new in 3.12")
def test_generic_function_defined_in_compiled_code_breaks_and_matches_eager():
    namespace: dict = {}
    exec("def f(x):\n    def g[T](v: T) -> T:\n        return v\n    return g(x) * 2, g.__type_params__[0].__name__\n",
         {"torch": torch}, namespace)
    f = namespace["f"]
    check_breaks(f, X, breaks=None)
    reasons = dynamo_lite.explain(f)(X).break_reasons
    assert any("PEP 695" in r.reason for r in reasons), reasons  # a break with its reason, not an error
