"""Everyday Python features used together in one function, eager vs compiled.

Every test compares compiled with eager through dynamo_lite.testing; known bugs are strict
xfails in tests/test_known_bugs.py.
"""
import enum

import torch

import dynamo_lite
from dynamo_lite.testing import assert_same, check_calls


def t(*vals):
    return torch.tensor([float(v) for v in vals])


X1, X2 = (t(1, 2, 3),), (t(-4, 5, 0.5, 2),)



class Mode(enum.Enum):
    TRAIN = "train"
    EVAL = "eval"

# ---------------------------------------------------------------- misc mixed

def test_conditional_expression_and_boolean_ops_return_operands():
    def f(x, a, b):
        return (a or b), (a and b), (not a), (x if a else x * 2), (a or x).__class__.__name__

    check_calls(f, [(X1[0], 0, "s"), (X1[0], [1], None), (X1[0], "", 0)])


def test_global_dict_mutation_with_break():
    reg = _REGISTRY

    def f(x):
        reg["n"] = reg.get("n", 0) + 1
        print("n", reg["n"])
        reg.setdefault("items", []).append(x.shape[0])
        return x * reg["n"]

    cfn = dynamo_lite.compile(f, backend="eager")
    reg.clear()
    e = [f(X1[0]), f(X2[0])]
    e_state = dict(reg)
    reg.clear()
    c = [cfn(X1[0]), cfn(X2[0])]
    assert_same(e, c)
    assert_same(e_state, dict(reg))


_REGISTRY = {}


def test_nonlocal_counter_with_break():
    def make():
        n = 0

        def f(x):
            nonlocal n
            n += 1
            print(n)
            n += x.shape[0]
            return x * n
        return f

    fe, fc = make(), make()
    cfn = dynamo_lite.compile(fc, backend="eager")
    e = [fe(X1[0]), fe(X2[0])]
    c = [cfn(X1[0]), cfn(X2[0])]
    assert_same(e, c)
    assert fe.__closure__[0].cell_contents == fc.__closure__[0].cell_contents


def test_slice_objects_and_step():
    def f(x, lst):
        s = slice(1, None, 2)
        return x[s], lst[s], lst[::-1], lst[-2:], x[::-1] if False else x.flip(0), s.indices(len(lst))

    check_calls(f, [(t(1, 2, 3, 4), [1, 2, 3, 4, 5]), (t(1, 2), [0])])


def test_slice_assignment_list():
    def f(x, lst):
        lst[1:3] = [x.shape[0]] * 3
        lst[::2] = [0] * len(lst[::2])
        return x, lst

    check_calls(f, [(X1[0], [1, 2, 3, 4]), (X2[0], [9, 8, 7])], graphs=None)


def test_extended_slice_assignment_wrong_size():
    def f(x, lst):
        lst[::2] = [1]
        return x

    check_calls(f, [(X1[0], [1, 2, 3, 4])], graphs=None)


def test_int_float_builtins_on_shapes():
    def f(x):
        n = x.shape[0]
        return (divmod(n, 2), pow(n, 2, 5), abs(-n), n.bit_length(), (n / 2).is_integer(),
                int("1" * n), float(n).hex(), bin(n), round(n / 3, 2), n ** -1, -n // 2, -n % 3)

    check_calls(f, [X1, X2], graphs=None)


def test_string_keys_built_from_shapes():
    def f(x, cache):
        key = "x".join(map(str, x.shape))
        if key not in cache:
            cache[key] = x.sum()
        return cache[key] * 2, sorted(cache)

    check_calls(f, [(torch.ones(2, 3), {}), (torch.ones(3), {"3": t(1)})])


def test_zip_strict_length_error():
    def f(x):
        return list(zip([1, 2], [x], strict=True))

    check_calls(f, [X1], graphs=None)


def test_map_filter_enumerate_reversed():
    def f(x):
        a = list(map(lambda v: v * 2, [x, x + 1]))
        b = list(filter(None, [0, 1, "", "a", x.shape[0]]))
        c = list(enumerate(reversed(range(x.shape[0])), start=10))
        return a, b, c

    check_calls(f, [X1, X2])


def test_lambda_default_and_keyword_call():
    def f(x):
        g = lambda a, b=2, *, c=3: a * b + c  # noqa: E731
        return g(x), g(x, c=0), g(b=1, a=x)

    check_calls(f, [X1, X2])


def test_unpack_dict_items_and_swap():
    def f(x, d):
        a, b = x, x * 2
        a, b = b, a
        out = [k + str(v) for k, v in d.items()]
        (k1, v1), *_ = d.items()
        return a, b, out, k1, v1

    check_calls(f, [(X1[0], {"p": 1, "q": 2}), (X2[0], {"z": 0})])


def test_exception_str_with_tensor_shape():
    def f(x):
        if x.shape[0] > 2:
            raise ValueError(f"expected <=2 got {x.shape} {x.dtype!r}")
        return x

    check_calls(f, [(t(1),), X1], graphs=None)


def test_bool_of_empty_containers_and_none_checks():
    def f(x, opt):
        y = x
        if opt:
            y = y + 1
        if opt is not None and len(opt) == 0:
            y = y * 10
        return y

    check_calls(f, [(X1[0], None), (X1[0], []), (X1[0], [1])])


def test_while_else_and_for_else():
    def f(x):
        i = 0
        while i < x.shape[0]:
            if x[i].item() < 0:
                break
            i += 1
        else:
            i = -1
        for j in range(3):
            pass
        else:
            j = j * 10
        return x * i, j

    check_calls(f, [X1, X2])


def test_match_statement():
    def f(x, cmd):
        match cmd:
            case ("scale", s):
                return x * s
            case {"op": "add", "v": v}:
                return x + v
            case [a, *rest] if a == "sum":
                return x.sum() + len(rest)
            case Mode.TRAIN:
                return x - 1
            case _:
                return x

    check_calls(f, [(X1[0], ("scale", 3)), (X1[0], {"op": "add", "v": 2}), (X1[0], ["sum", 1, 2]), (X1[0], Mode.TRAIN), (X1[0], "other")], graphs=None)
