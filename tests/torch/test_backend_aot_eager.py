"""Acceptance (part 2): tensors, in-place ops, autograd, grad mode, modules, recompiles, API.

Written the way an outside PyTorch user would test dynamo_lite: every test runs a
function (or module) eagerly and through ``dynamo_lite.compile`` from identical
states and compares everything observable -- return values, exceptions (type and
message), stdout, mutated arguments, gradients, module state and grad mode -- over
several calls (cache hits) and changed inputs (recompiles).  It complements
tests/test_acceptance_tensors.py with:

- tensor metadata / dtype promotion / integer division / comparisons, tables of
  indexing and advanced setitem cases, result strides of many ops, views vs copies
- in-place ops: on inputs, views and slices, ``add_`` returning self, aliasing
  (the same tensor passed twice, overlapping views), ``out=``, ``resize_``,
  in-place dtype casting rules and their errors
- data-dependent control flow (item/bool/any/while/tolist/nonzero/masked_select)
- grad mode (no_grad/enable_grad/set_grad_enabled/inference_mode as context
  managers and decorators, restored after exceptions)
- autograd (backward inside, torch.autograd.grad, hooks, retain_grad, custom
  autograd.Function: multiple outputs, non-differentiable outputs, data-dependent
  forward, needs_input_grad, set_materialize_grads, mark_dirty)
- nn.Module (containers, buffers reassigned in forward, train/eval, dropout with
  seeds, hooks, parameters frozen/replaced, optimizer steps outside, ``.to()``)
- recompiles (counts via CompileCounter stay sane, results always right)
- public API (decorator forms, methods, disable, reset, explain, optimize,
  fullgraph), and a few runs with backend="aot_eager"
- known bugs: strict xfails in tests/test_known_bugs.py.

Helpers: dynamo_lite/testing.py (check, check_calls, check_module).
"""
import contextlib
import copy
import io
import operator

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import dynamo_lite
from dynamo_lite.testing import CompileCounter, assert_same, assert_same_as_eager
from dynamo_lite.testing import check, check_calls, check_module


def _compiled(fn, backend="eager"):
    return dynamo_lite.compile(fn, backend=backend)


# ---------------------------------------------------------------------------
# backend="aot_eager"
# ---------------------------------------------------------------------------
def test_aot_eager_backward_and_custom_function_gradients():
    def f(x, w):
        y, _, n = _ArgmaxToo.apply(x @ w, 2.0)
        return torch.tanh(y).sum() * n + _Scale.apply(w, 3.0).sum()

    x = torch.randn(2, 3)
    w1 = torch.randn(3, 2, requires_grad=True)
    w2 = w1.detach().clone().requires_grad_()
    f(x, w1).backward()
    _compiled(f, "aot_eager")(x, w2).backward()
    assert_same(w1.grad, w2.grad)


def test_aot_eager_input_mutations_and_views():
    def f(x, y):
        x.add_(y)
        y[0] = 5
        x[0].mul_(3)
        x.t()[1] = 7
        return x * y

    cf = _compiled(f, "aot_eager")
    for _ in range(2):
        e = (torch.ones(2, 2), torch.arange(2.))
        c = copy.deepcopy(e)
        assert_same(f(*e), cf(*c))
        assert_same(e, c, "inputs")


def test_aot_eager_mutation_of_input_that_is_a_view():
    def f(x):
        x.add_(1)
        return x * 2

    base, base_c = torch.zeros(4), torch.zeros(4)
    assert_same(f(base[1:3]), _compiled(f, "aot_eager")(base_c[1:3]))
    assert_same(base, base_c)


def test_aot_eager_returned_views_alias_input():
    def f(x):
        v = x.view(-1)
        v.mul_(2)
        return v, x[0]

    x1, x2 = torch.ones(2, 2), torch.ones(2, 2)
    r1, r2 = f(x1), _compiled(f, "aot_eager")(x2)
    r1[0][0] = 100
    r2[0][0] = 100
    r1[1][1] = -1
    r2[1][1] = -1
    assert_same(x1, x2)


def test_aot_eager_follows_grad_mode_autocast_and_inference_mode():
    def f(x, w):
        return x @ w

    cf = _compiled(f, "aot_eager")
    x, w = torch.randn(2, 2), torch.randn(2, 2, requires_grad=True)
    assert cf(x, w).requires_grad
    with torch.no_grad():
        assert not cf(x, w).requires_grad
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert cf(x, w).dtype == f(x, w).dtype == torch.bfloat16
    with torch.inference_mode():
        assert cf(x, w).is_inference()


def test_aot_eager_leaf_inplace_error_and_no_grad_parameter_update():
    def f(x):
        x.add_(1)
        return x

    assert_same_as_eager(f, torch.ones(1, requires_grad=True), backend="aot_eager")
    p = nn.Parameter(torch.ones(2))

    def g(grad):
        with torch.no_grad():
            p.sub_(0.1 * grad)
        return p * 1

    r = _compiled(g, "aot_eager")(torch.ones(2))
    assert_same(p.detach(), torch.full((2,), 0.9))
    assert r.requires_grad
