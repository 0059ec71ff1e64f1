"""f-strings and str methods on values computed from tensors, eager vs compiled.

Every test compares compiled with eager through dynamo_lite.testing; known bugs are strict
xfails in tests/test_known_bugs.py.
"""

import torch
import dynamo_lite

from dynamo_lite.testing import check_breaks, check_calls


def t(*vals):
    return torch.tensor([float(v) for v in vals])


X1, X2 = (t(1, 2, 3),), (t(-4, 5, 0.5, 2),)


# ---------------------------------------------------------------- f-strings / str

def test_fstring_format_specs():
    def f(x, v):
        s = f"{v:>8.3f}|{v!r}|{v!s:<6}|{x.shape[0]:03d}|{x.dtype}|{tuple(x.shape)!r}|{'a'!r:^7}"
        return x * 2, s, f"{v:+.2e}", f"{12345678:,}", f"{255:#x}", f"{v=}"

    check_calls(f, [(t(1, 2), 3.14159), (t(1), -2.5)])


def test_fstring_of_tensor_values_is_formatted_after_the_graph():
    # the values are only known when the code runs: the text is made by Python after the graph,
    # from a snapshot of the tensor where the f-string formats it (variables/formatted_text.py)
    def f(x):
        y = x + 1
        s = f"value {y}"
        return y * 2, s

    check_breaks(f, t(1, 2, 3), breaks=0, raises=None)


def test_fstring_of_tensor_shape_and_dtype():
    def f(x):
        s = f"shape={x.shape} dtype={x.dtype!s} size={x.size()!r} dev={x.device} n={x.numel():>4}"
        return x.sum(), s

    check_calls(f, [(torch.zeros(2, 3),), (torch.zeros(4, dtype=torch.float64),)])


def test_fstring_with_item_break():
    def f(x):
        msg = f"sum={x.sum().item():.2f} max={x.max().item()!r}"
        return msg, x * 2

    check_calls(f, [X1, X2])


def test_fstring_nested_spec():
    def f(x, w):
        return f"{x.shape[0]:>{w}}|{1.5:{w}.{w - 1}f}", x

    check_calls(f, [(X1[0], 5), (X1[0], 3)], graphs=None)


def test_str_methods():
    def f(x, s):
        parts = s.split(",")
        j = "-".join(p.strip().upper() for p in parts)
        r = s.replace(",", ";", 1)
        st = (s.startswith("a"), s.endswith(("z", "c")), s.find("b"), s.count(","))
        fm = "{0}:{name}:{0!r}".format(x.shape[0], name=j)
        return x * len(parts), j, r, st, fm, s.rsplit(",", 1), s.partition(",")

    check_calls(f, [(t(1), "a, b,c"), (t(1, 2), "xyz")], graphs=None)


def test_str_format_with_tensor_dims():
    def f(x):
        s = "{0}x{1}".format(*x.shape)
        t2 = "%d-%s-%.1f" % (x.shape[0], x.dtype, 2.25)
        return x.view(-1), s, t2, str(x.shape[0]).zfill(4)

    check_calls(f, [(torch.zeros(2, 3),), (torch.zeros(5, 1),)])


def test_str_split_drives_tensor_ops():
    def f(x, spec):
        for op in spec.split("|"):
            name, _, arg = op.partition(":")
            if name == "add":
                x = x + float(arg)
            elif name.startswith("mul"):
                x = x * int(arg)
        return x

    check_calls(f, [(X1[0], "add:1.5|mul:3"), (X1[0], "mul2:2|add:-1")])


# ---------------------------------------------------------------- str / repr / format of user objects

class _Shown:
    def __init__(self, v):
        self.v = v

    def __str__(self):
        return f"Shown({self.v})"

    def __repr__(self):
        return f"Shown<{self.v!r}>"

    def __format__(self, spec):
        return f"[{spec}:{self.v}]"


class _ReprOnly:
    def __repr__(self):
        return "ReprOnly!"


class _BadStr:
    def __str__(self):
        return 3


def test_str_repr_format_of_new_user_object_inline_its_methods():
    def f(x):
        u, r = _Shown(3), _ReprOnly()
        s = f"{u}|{u!s}|{u!r}|{u:>5}|{r}|{r!r}|{r!s}"
        return x + len(str(u)) + len(repr(u)), s, str(r), format(u, "q"), format(r), format(r, "")

    check_breaks(f, t(1, 2), breaks=0)


def test_str_of_user_object_argument_follows_the_class():
    def f(x, u):
        return x + len(str(u)), str(u), f"{u!r}"

    check_calls(f, [(t(1), _Shown(1)), (t(2), _Shown("ab")), (t(3), _ReprOnly())])


def test_str_of_user_object_returning_non_str_raises_type_error():
    def f(x):
        return x + 1, str(_BadStr())

    check_breaks(f, t(1), breaks=None, raises=TypeError)


def test_format_spec_of_object_without_format_raises_type_error():
    def f(x):
        return x + 1, format(_ReprOnly(), "5")

    check_breaks(f, t(1), breaks=None, raises=TypeError)


def test_str_of_object_with_default_repr_is_still_exact():
    class Plain:
        pass

    def f(x, p):
        return x + 1, str(p) == repr(p), f"{p}" == str(p)

    check_breaks(f, t(1), Plain(), breaks=None)


# ---------------------------------------------------------------- f-strings of tensors
class _CheckError(Exception):
    pass


def _check(cond, msg):
    if not cond:
        raise _CheckError(msg)


def test_fstring_of_tensors_is_made_after_the_graph():
    # kornia: KORNIA_CHECK(direction.size(0) == angle.size(0), f"... Got {direction} and {angle}.")
    def validate(direction, angle):
        _check(direction.size(0) == angle.size(0), f"same length. Got {direction} and {angle!r}.")
        return direction * 2

    def later_change_not_seen(x):
        y = x + 1
        text = f"y={y} s={x.sum()} {x.sum()!s} {x!a}"
        y.add_(5)
        print("got " + text)
        return y, text

    def no_grad_value_of_a_grad_input(x):
        with torch.no_grad():
            w = x * 2
        return x.sum(), f"{w}"

    check_breaks(validate, torch.ones(2), torch.ones(2), breaks=0)
    out = check_breaks(validate, torch.ones(2), torch.ones(3), breaks=1, raises=_CheckError)
    assert str(out.exception) == "same length. Got tensor([1., 1.]) and tensor([1., 1., 1.])."
    out = check_breaks(later_change_not_seen, torch.ones(2), breaks=0)
    assert out.value[1] == "y=tensor([2., 2.]) s=2.0 tensor(2.) tensor([1., 1.])"
    check_breaks(no_grad_value_of_a_grad_input, torch.ones(2, requires_grad=True), breaks=0)
    # the passing check keeps no snapshot of the tensors in the graph
    graph = dynamo_lite.explain(validate)(torch.ones(2), torch.ones(2)).graphs[0]
    assert [n.target for n in graph.graph.nodes if n.op == "call_method"] == []


def test_fstring_of_tensors_used_as_text_breaks_where_python_needs_it():
    def length(x):
        return x + 1, len(f"{x}")

    def of_a_tensor_that_requires_grad(x):
        y = x * 2
        return f"{y}"

    check_breaks(length, torch.ones(2), breaks=1)
    check_breaks(of_a_tensor_that_requires_grad, torch.ones(2, requires_grad=True), breaks=1)


def test_fstring_of_a_varying_int_argument_is_made_after_the_graph():
    """A training loop printing its step: the int is formatted from the value the graph returns,
    so the entry is not specialised on it (0 and 1 are specialised by the shape environment, then
    one entry serves every step); repr/str conversions, sizes and arithmetic on it likewise."""

    def train_step(x, step):
        msg = f"step {step} of {x.shape[0]}: next {step + 1!r}"
        print(msg)
        return x * 2, msg

    counter = check_calls(train_step, [(torch.ones(3 + (i % 2)), i) for i in range(8)], graphs=None)
    assert counter.frame_count <= 4, counter.frame_count
