"""try/finally, with-blocks and assert around tensor code, eager vs compiled.

Every test compares compiled with eager through dynamo_lite.testing; known bugs are strict
xfails in tests/test_known_bugs.py.
"""

import torch

from dynamo_lite.testing import check_calls


def t(*vals):
    return torch.tensor([float(v) for v in vals])


X1, X2 = (t(1, 2, 3),), (t(-4, 5, 0.5, 2),)


# ---------------------------------------------------------------- try / finally

def test_finally_return_overrides_try_return():
    def f(x):
        try:
            return x + 1
        finally:
            return x + 2  # noqa: B012

    check_calls(f, [X1, X2])


def test_finally_return_swallows_exception():
    def f(x):
        try:
            raise ValueError("boom")
        finally:
            return x * 3  # noqa: B012

    check_calls(f, [X1, X2])


def test_except_return_vs_finally_side_effect():
    def f(x, log):
        try:
            y = x * 2
            if y.sum() > 5:
                raise KeyError("big")
            return y
        except KeyError as e:
            log.append(str(e))
            return x - 1
        else:
            log.append("else")
        finally:
            log.append("finally")

    check_calls(f, [(t(1), []), (t(5), [])])


def test_try_else_return():
    def f(x, log):
        try:
            y = x + 1
        except RuntimeError:
            return None
        else:
            log.append("else")
            return y * 2
        finally:
            log.append("fin")

    check_calls(f, [(t(1), []), (t(2, 3), ["a"])])


def test_try_with_print_break_in_each_clause():
    def f(x, fail):
        out = []
        try:
            print("try")
            out.append(x + 1)
            if fail:
                raise ValueError(f"fail {fail}")
        except ValueError as e:
            print("except", e)
            out.append(x - 1)
        else:
            print("else")
            out.append(x * 2)
        finally:
            print("finally")
            out.append(x * 0)
        return out

    check_calls(f, [(X1[0], 0), (X1[0], 1), (X1[0], 2)])


def test_exception_variable_cleared_after_except():
    def f(x):
        try:
            raise TypeError("t")
        except TypeError as e:
            msg = str(e)
        try:
            e  # noqa: F821
            bound = True
        except NameError:
            bound = False
        return x, msg, bound

    check_calls(f, [X1], graphs=None)


def test_nested_try_reraise_with_context():
    def f(x):
        try:
            try:
                x.sum().item()
                raise ValueError("inner")
            except ValueError as e:
                raise RuntimeError("outer") from e
        except RuntimeError as e:
            return x * 2, str(e), repr(e.__cause__), type(e.__context__).__name__

    check_calls(f, [X1, X2])


def test_exception_propagates_after_partial_mutation():
    def f(x, lst):
        lst.append(x.shape[0])
        y = x * 2
        lst.append("mid")
        return {}["missing" + str(y.shape[0])]

    check_calls(f, [(X1[0], []), (X2[0], [1])])


def test_finally_runs_on_break_in_loop():
    def f(x):
        log = []
        for i in range(5):
            try:
                if i == 2:
                    break
                x = x + i
            finally:
                log.append(i)
        return x, log

    check_calls(f, [X1, X2])


def test_finally_continue_in_loop_with_item():
    def f(x):
        log = []
        for i in range(4):
            try:
                if x[i % x.shape[0]].item() > 1:
                    continue
                log.append(("body", i))
            finally:
                log.append(("fin", i))
        return log

    check_calls(f, [X1, X2])


# ---------------------------------------------------------------- with

class Ctx:
    def __init__(self, name, log, swallow=False):
        self.name, self.log, self.swallow = name, log, swallow

    def __enter__(self):
        self.log.append("enter " + self.name)
        return self.name

    def __exit__(self, et, ev, tb):
        self.log.append(f"exit {self.name} {et.__name__ if et else None}")
        return self.swallow


def test_with_multiple_context_managers():
    def f(x, log):
        with Ctx("a", log) as a, Ctx("b", log) as b, torch.no_grad():
            y = x * 2
            log.append(a + b)
        return y, y.requires_grad, torch.is_grad_enabled()

    check_calls(f, [(t(1).requires_grad_(), []), (t(1, 2), ["pre"])])


def test_with_multiple_exception_order_and_swallow():
    def f(x, log):
        with Ctx("outer", log, swallow=True), Ctx("inner", log):
            y = x + 1
            raise ValueError("x")
        return y, log

    check_calls(f, [(X1[0], []), (X2[0], [])])


def test_with_return_inside():
    def f(x, log):
        with Ctx("a", log), Ctx("b", log):
            return x * 2
        return None

    check_calls(f, [(X1[0], []), (X2[0], [])])


def test_with_print_break_inside():
    def f(x, log):
        with Ctx("a", log) as a, torch.no_grad():
            y = x * 2
            print("inside", a)
            z = y + 1
        return z, z.requires_grad

    check_calls(f, [(t(1, 2).requires_grad_(), []), (t(3).requires_grad_(), [])])


# ---------------------------------------------------------------- assert

def test_assert_with_message_passes_and_fails():
    def f(x):
        assert x.dim() == 1, f"bad dim {x.dim()}"
        assert x.shape[0] < 4, "too long: %d" % x.shape[0]
        return x * 2

    check_calls(f, [X1, X2, (torch.zeros(2, 2),)])


def test_assert_on_tensor_value():
    def f(x):
        y = x * 2
        assert (y > 0).all(), "negative"
        return y

    check_calls(f, [X1, X2])


def test_assert_no_message_and_item():
    def f(x):
        assert x.sum().item() < 6
        return x + 1

    check_calls(f, [(t(1, 2),), X1])
