"""Comprehensions and generator expressions mixed with tensor code, eager vs compiled.

Every test compares compiled with eager through dynamo_lite.testing; known bugs are strict
xfails in tests/test_known_bugs.py.
"""

import torch

from dynamo_lite.testing import check_calls


def t(*vals):
    return torch.tensor([float(v) for v in vals])


X1, X2 = (t(1, 2, 3),), (t(-4, 5, 0.5, 2),)


# ---------------------------------------------------------------- comprehensions

def test_comprehension_scoping_outer_vars():
    def f(x):
        k = 3
        i = "outer"
        lst = [x * k + i for i in range(3)]
        st = {v * k for v in range(4) if v % 2}
        dc = {str(j): x[j % x.shape[0]] for j in range(k)}
        g = sum(x * j for j in range(k))
        return lst, st, dc, g, i

    check_calls(f, [X1, X2])


def test_nested_comprehensions():
    def f(x):
        m = [[x[i] * x[j] for j in range(x.shape[0]) if j >= i] for i in range(x.shape[0])]
        flat = [v for row in m for v in row if v.item() != 0]
        pairs = {(a, b) for a in range(2) for b in range(a, 3)}
        return m, flat, sorted(pairs)

    check_calls(f, [X1, (t(0, 2),)])


def test_comprehension_with_closure_late_binding():
    def f(x):
        fns = [lambda y: y * i for i in range(3)]
        fns2 = [lambda y, i=i: y * i for i in range(3)]
        return [g(x) for g in fns], [g(x) for g in fns2]

    check_calls(f, [X1, X2])


def test_generator_expression_consumed_partially():
    def f(x):
        gen = (x * i for i in range(5))
        a = next(gen)
        b = next(gen)
        rest = list(gen)
        return a, b, rest

    check_calls(f, [X1, X2])


def test_comprehension_with_print_break():
    def f(x):
        out = [print(i) or x * i for i in range(3)]
        return torch.stack(out), {i: print(i) for i in range(2)}

    check_calls(f, [X1, X2])


def test_generator_any_all_with_tensors():
    def f(x):
        a = any(v > 2 for v in x.tolist())
        b = all(v.item() > 0 for v in x)
        return a, b, x * a

    check_calls(f, [X1, X2])


def test_dict_comprehension_key_collision_order():
    def f(x):
        d = {i % 2: x * i for i in range(5)}
        return list(d.items())

    check_calls(f, [X1, X2])


def test_comprehension_class_scope_error():
    def f(x):
        class C:
            n = 3
            vals = [i * 2 for i in range(n)]
        return x * len(C.vals)

    check_calls(f, [X1, X2], graphs=None)
