"""Acceptance: Python object semantics around tensor code, compared with eager.

Written the way an outside PyTorch user would test dynamo_lite.compile(fn,
backend="eager"): each case is run eagerly and through one compiled function,
for several calls (the second hits the cache, the third changes the inputs so
the code recompiles), and everything observable must be equal:

    return value, raised exception (type, str, args, attributes, __cause__,
    __context__, __suppress_context__ and the file/line of the traceback's last
    frame), printed output, the arguments after the call (deep state of lists,
    dicts, dataclasses, user objects incl. __slots__, generators' remaining
    items), object identity/aliasing between the result and the arguments, and
    optional global/class state (``snapshot``).

Areas: generators (called from compiled code, yield from, generator
expressions, send/throw/close, itertools over them, generators passed in and
returned), context managers (user classes, contextlib.contextmanager, nested
and multi-item withs, suppression, contextlib.suppress/nullcontext/ExitStack/
redirect_stdout), dataclasses (defaults, default_factory, __post_init__,
frozen, eq/order, asdict/astuple/replace/fields, tensors inside), user classes
(inheritance, super(), class/static methods, properties, __getattr__,
__getattribute__, operator dunders, __slots__, class attributes, ABCs) and
exceptions (custom attributes, raise from, re-raise, finally ordering,
exceptions escaping compiled code, errors from tensor ops).

A case that exposes a dynamo_lite bug goes to tests/test_known_bugs.py (strict xfail).
"""
from __future__ import annotations

import abc
import collections.abc
import contextlib
import dataclasses
import functools
import inspect
import io
import itertools
import sys
import traceback
import typing
from typing import Callable, Optional

import pytest
import torch

import dynamo_lite
from dynamo_lite.testing import CompileCounter, assert_same, check_calls, compare, observe

# ----------------------------------------------------------------------------- harness
# dynamo_lite.testing.check_calls with structure=True: result and arguments as a picture that
# shows identity/aliasing and generator state, exceptions with their chain and last frame.


@dataclasses.dataclass
class Case:
    fn: Callable  # the user function, run eagerly and through dynamo_lite.compile
    make: Callable  # make(i) -> the argument tuple of call i (fresh objects for each run)
    calls: int  # how many calls of one compiled function (2nd: cache hit, 3rd: new shapes)
    snapshot: Optional[Callable]  # () -> global/class state to compare after each call
    reset: Optional[Callable]  # () -> restores that state before each run
    graphs: int  # minimum graphs the compiled runs must produce (0: the frame runs in Python)


CASES: dict[str, Case] = {}


def _default_make(i):
    shape = [(3,), (3,), (2, 4)][i]
    return (torch.randn(shape),)


def case(make=None, *, calls=3, snapshot=None, reset=None, graphs=1):
    """Register ``fn`` as a case.  ``make(i) -> args`` builds fresh arguments for call i
    (called under the same seed for the eager and the compiled run)."""

    def deco(fn):
        CASES[fn.__name__] = Case(fn, make or _default_make, calls, snapshot, reset, graphs)
        return fn

    return deco


def run_case(c: Case):
    """Each call i eagerly and through one compiled function, both on fresh ``make(i)``."""
    return check_calls(c.fn, [functools.partial(c.make, i) for i in range(c.calls)], reset=c.reset,
                       snapshot=c.snapshot, graphs=c.graphs or None, structure=True)


# ============================================================================ generators


def gen_range_scaled(x, n):
    for i in range(n):
        yield x * i


def gen_with_print(x):
    print("gen start")
    try:
        yield x + 1
        print("gen middle")
        yield x + 2
    finally:
        print("gen finally")


def gen_inner(x):
    yield x
    yield x * 2
    return "inner-done"


def gen_outer(x):
    r = yield from gen_inner(x)
    yield x * 3
    yield r


def gen_accumulate(xs):
    total = torch.zeros_like(xs[0])
    for t in xs:
        total = total + t
        yield total


def gen_echo(x):
    acc = x
    while True:
        v = yield acc
        if v is None:
            return
        acc = acc + v


def gen_count_forever(start):
    n = start
    while True:
        yield n
        n += 1


def gen_raises_after(x, k):
    for i in range(5):
        if i == k:
            raise ValueError(f"gen failed at {i}")
        yield x + i


@case()
def gen_list_of_generator(x):
    return list(gen_range_scaled(x, 3))


@case()
def gen_for_loop_sum(x):
    out = torch.zeros_like(x)
    for t in gen_range_scaled(x, 4):
        out = out + t
    return out


@case()
def gen_yield_from_return_value(x):
    x = x * 2  # tensor work ahead of the construct under test
    return list(gen_outer(x))


@case()
def gen_expression_sum(x):
    return sum(x * i for i in range(4))


@case(lambda i: ([torch.randn(3) for _ in range(3 + i)],))
def gen_expression_over_list(xs):
    return sum(t.sin() for t in xs), max(t.shape[0] for t in xs)


@case(graphs=0)  # the whole frame runs in Python
def gen_send(x):
    x = x * 2  # tensor work ahead of the construct under test
    g = gen_echo(x)
    a = next(g)
    b = g.send(x)
    c = g.send(torch.ones_like(x))
    return a, b, c


@case(graphs=0)  # the whole frame runs in Python
def gen_send_then_return_stopiteration_value(x):
    x = x * 2  # tensor work ahead of the construct under test
    g = gen_echo(x)
    next(g)
    try:
        g.send(None)
    except StopIteration as e:
        return x, e.value, inspect.getgeneratorstate(g)
    return None


@case()
def gen_close_runs_finally(x):
    x = x * 2  # tensor work ahead of the construct under test
    g = gen_with_print(x)
    a = next(g)
    print("closing")
    g.close()
    print("closed", inspect.getgeneratorstate(g))
    return a


@case()
def gen_print_order_interleaved(x):
    x = x * 2  # tensor work ahead of the construct under test
    out = []
    for t in gen_with_print(x):
        print("got", t.shape)
        out.append(t * 2)
    return out


@case(graphs=0)  # the whole frame runs in Python
def gen_throw_into_generator(x):
    x = x * 2  # tensor work ahead of the construct under test
    def g():
        try:
            yield x
        except KeyError as e:
            print("caught in gen", e)
            yield x + 100

    it = g()
    first = next(it)
    second = it.throw(KeyError("k"))
    return first, second


@case()
def gen_holding_tensors_running_total(x):
    xs = [x, x * 2, x * 3]
    return [t.clone() for t in gen_accumulate(xs)]


@case()
def gen_itertools_chain_islice(x):
    a = gen_range_scaled(x, 2)
    b = gen_range_scaled(x + 1, 3)
    return list(itertools.islice(itertools.chain(a, b), 1, 4))


@case(graphs=0)  # the whole frame runs in Python
def gen_itertools_islice_infinite(x):
    x = x * 2  # tensor work ahead of the construct under test
    return [x * n for n in itertools.islice(gen_count_forever(2), 3)]


@case()
def gen_zip_and_enumerate(x):
    out = []
    for i, (a, b) in enumerate(zip(gen_range_scaled(x, 3), gen_range_scaled(x, 5))):
        out.append(a + b + i)
    return out


@case()
def gen_next_with_default_on_exhausted(x):
    g = gen_range_scaled(x, 1)
    a = next(g)
    b = next(g, "exhausted")
    return a, b


@case()
def gen_exception_midway_caught(x):
    x = x * 2  # tensor work ahead of the construct under test
    got = []
    try:
        for t in gen_raises_after(x, 2):
            got.append(t)
    except ValueError as e:
        got.append(str(e))
    return got


@case()
def gen_exception_midway_escapes(x):
    x = x * 2  # tensor work ahead of the construct under test
    got = []
    for t in gen_raises_after(x, 1):
        got.append(t)
        print("item")
    return got


@case(lambda i: (torch.randn(3), gen_range_scaled(torch.ones(2), 4)))
def gen_passed_in_partially_consumed(x, g):
    a = next(g)
    b = next(g)
    return x + a.sum() + b.sum()


@case()
def gen_returned_unstarted(x):
    y = x + 1
    return y, gen_range_scaled(y, 3)


@case()
def gen_defined_inside_with_closure(x):
    scale = 3

    def g():
        for i in range(2):
            yield x * scale + i

    return list(g())


@case()
def gen_recursive_yield_from(x):
    def walk(node):
        if isinstance(node, torch.Tensor):
            yield node
        else:
            for child in node:
                yield from walk(child)

    tree = [x, [x + 1, [x + 2, x + 3]], (x + 4,)]
    return list(walk(tree))


@case(lambda i: ([], ))
def gen_mutates_list_argument(log):
    def g(n):
        for i in range(n):
            log.append(i)
            yield torch.full((2,), float(i))

    return torch.stack(list(g(3))), len(log)


@case()
def gen_any_on_tensor_conditions(x):
    if any((x > 10).any() for _ in range(2)):
        return x + 1
    return x - 1


@case()
def gen_method_generator_iter(x):
    x = x * 2  # tensor work ahead of the construct under test
    class Bag:
        def __init__(self, items):
            self.items = items

        def __iter__(self):
            for it in self.items:
                yield it * 2

    return list(Bag([x, x + 1]))


@case()
def gen_stopiteration_escapes_plain_function(x):
    x = x * 2  # tensor work ahead of the construct under test
    it = iter([x])
    next(it)
    return next(it)


@case(graphs=0)  # the generators are made by Python (the zip error needs the real ones)
def gen_zip_strict_mismatch(x):
    return list(zip(gen_range_scaled(x, 2), gen_range_scaled(x, 3), strict=True))


@case(graphs=0)  # the generator outlives the trace (or is inspected): Python makes it
def gen_generator_state_after_partial_iteration(x):
    g = gen_range_scaled(x, 3)
    for t in g:
        if t.shape[0] > 0:
            break
    return inspect.getgeneratorstate(g), list(g)


@case()
def gen_exhausted_generator_reused(x):
    g = gen_range_scaled(x, 2)
    first = list(g)
    second = list(g)
    return first, second


@case()
def gen_lazy_sees_list_mutated_after_creation(x):
    lst = [x, x + 1]
    g = (t * 2 for t in lst)
    lst.pop()
    return list(g)


@case()
def gen_lazy_sees_dict_mutated_after_creation(x):
    d = {"k": 1}

    def read():
        yield d["k"]

    g = read()
    d["k"] = 100
    return x * next(g)


@case()
def gen_lazy_sees_tensor_mutated_in_place(x):
    t = x.clone()
    g = (t + i for i in range(2))
    t.mul_(10)
    return list(g)


class _Box:
    def __init__(self, v):
        self.v = v


def _gen_box(bx, n):
    for i in range(n):
        yield bx.v * i


@case()
def gen_lazy_sees_attribute_mutated_between_next_calls(x):
    bx = _Box(x)
    g = _gen_box(bx, 3)
    first = next(g)
    bx.v = x + 10
    return first, list(g)


@case(graphs=0)  # the generator outlives the trace (or is inspected): Python makes it
def gen_returned_partially_consumed(x):
    g = gen_range_scaled(x, 3)
    first = next(g)
    return first, g


@case()
def gen_expression_over_list_consumed_by_caller_after_append(x):
    items = [x]
    g = (t + 1 for t in items)
    items.append(x * 3)
    return sum(g)


# ====================================================================== context managers


class Tracker:
    """A context manager that logs its calls and can suppress exceptions."""

    def __init__(self, name, suppress=False, value=None, verbose=False):
        self.name = name
        self.suppress = suppress
        self.value = value
        self.verbose = verbose
        self.log = []

    def __enter__(self):
        if self.verbose:
            print(f"enter {self.name}")
        self.log.append("enter")
        return self if self.value is None else self.value

    def __exit__(self, exc_type, exc, tb):
        if self.verbose:
            print(f"exit {self.name} {exc_type.__name__ if exc_type else None} {exc}")
        self.log.append(("exit", exc_type.__name__ if exc_type else None, str(exc) if exc else None))
        return self.suppress


class TensorScope:
    """__exit__ mutates a tensor in place."""

    def __init__(self, t):
        self.t = t

    def __enter__(self):
        return self.t

    def __exit__(self, *exc):
        self.t.mul_(2)
        return False


@contextlib.contextmanager
def printing_cm(tag):
    print("cm enter", tag)
    try:
        yield tag.upper()
    finally:
        print("cm exit", tag)


@contextlib.contextmanager
def swallowing_cm():
    try:
        yield
    except ValueError as e:
        print("swallowed", e)


@contextlib.contextmanager
def tensor_cm(x):
    buf = x.clone()
    yield buf
    buf.add_(1)
    print("tensor_cm done", buf.shape)


@case()
def cm_user_class_enter_returns_self(x):
    t = Tracker("a")
    with t as tt:
        y = x + 1
        tt.log.append("body")
    return y, t.log, tt is t


@case()
def cm_enter_returns_other_value(x):
    with Tracker("b", value=x * 2) as v:
        y = v + 1
    return y


@case()
def cm_exit_true_suppresses(x):
    t = Tracker("s", suppress=True)
    y = x
    with t:
        y = x + 1
        raise ValueError("inside")
    print("after with")
    return y, t.log


@case()
def cm_exit_false_propagates(x):
    t = Tracker("p")
    with t:
        y = x + 1
        raise KeyError("propagated")
    return y


@case(lambda i: (torch.randn(3), Tracker("arg", suppress=bool(i % 2))))
def cm_passed_in_state_mutated(x, t):
    with t:
        y = x * 3
        if t.suppress:
            raise RuntimeError("boom")
    return y


@case()
def cm_contextmanager_generator(x):
    x = x * 2  # tensor work ahead of the construct under test
    with printing_cm("hello") as tag:
        y = x + len(tag)
    return y, tag


@case()
def cm_contextmanager_swallows(x):
    x = x * 2  # tensor work ahead of the construct under test
    y = x
    with swallowing_cm():
        y = x + 1
        raise ValueError("swallow me")
    return y


@case()
def cm_contextmanager_does_not_swallow_other(x):
    x = x * 2  # tensor work ahead of the construct under test
    with swallowing_cm():
        raise KeyError("not swallowed")
    return x


@case()
def cm_contextmanager_yields_tensor(x):
    x = x * 2  # tensor work ahead of the construct under test
    with tensor_cm(x) as b:
        b.mul_(3)
        r = b.clone()
    return r, b


@case()
def cm_nested_order(x):
    with Tracker("outer"):
        with Tracker("inner"):
            y = x + 1
        print("between")
    return y


@case()
def cm_multi_item_with(x):
    a, b = Tracker("a"), Tracker("b")
    with a, b as bb:
        y = x * 2
    return y, a.log, b.log, bb is b


@case()
def cm_inner_suppresses_outer_sees_nothing(x):
    x = x * 2  # tensor work ahead of the construct under test
    outer, inner = Tracker("o"), Tracker("i", suppress=True)
    with outer:
        with inner:
            raise IndexError("deep")
        y = x + 1
    return y, outer.log, inner.log


@case()
def cm_return_inside_with(x):
    t = Tracker("r")
    with t:
        return x + 1, t.log


@case()
def cm_break_continue_inside_with_in_loop(x):
    out = []
    for i in range(5):
        with Tracker(f"l{i}"):
            if i == 1:
                continue
            if i == 3:
                break
            out.append(x + i)
    return out


@case()
def cm_exit_mutates_tensor(x):
    with TensorScope(x) as t:
        y = t + 1
    return y, x


@case()
def cm_contextlib_suppress(x):
    x = x * 2  # tensor work ahead of the construct under test
    y = x
    with contextlib.suppress(ZeroDivisionError, KeyError):
        y = x + 1
        {}["missing"]
    return y


@case()
def cm_contextlib_suppress_not_matching(x):
    x = x * 2  # tensor work ahead of the construct under test
    with contextlib.suppress(KeyError):
        raise ValueError("nope")
    return x


@case()
def cm_nullcontext(x):
    with contextlib.nullcontext(x * 2) as v:
        y = v + 1
    with contextlib.nullcontext():
        y = y + 1
    return y


@case()
def cm_exitstack_callbacks_order(x):
    x = x * 2  # tensor work ahead of the construct under test
    log = []
    with contextlib.ExitStack() as stack:
        stack.callback(log.append, "first-registered")
        stack.callback(print, "cb print")
        t = stack.enter_context(Tracker("es"))
        y = x + 1
    return y, log, t.log


@case()
def cm_exitstack_suppression(x):
    x = x * 2  # tensor work ahead of the construct under test
    with contextlib.ExitStack() as stack:
        stack.enter_context(Tracker("es", suppress=True))
        raise ValueError("stacked")
    return x + 1


@case()
def cm_redirect_stdout_inside(x):
    x = x * 2  # tensor work ahead of the construct under test
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        print("captured", x.shape)
    print("visible")
    return x + 1, buf.getvalue()


@case()
def cm_no_grad_inside_user_cm(x):
    with Tracker("g"):
        with torch.no_grad():
            y = x * 2
        z = x * 3
    return y.requires_grad, z.requires_grad, torch.is_grad_enabled()


@case(lambda i: (torch.randn(3, requires_grad=True),))
def cm_user_cm_disabling_grad(x):
    class NoGrad:
        def __enter__(self):
            self.prev = torch.is_grad_enabled()
            torch.set_grad_enabled(False)

        def __exit__(self, *a):
            torch.set_grad_enabled(self.prev)

    with NoGrad():
        y = x * 2
    z = x * 3
    return y, z


@case()
def cm_exit_raises_new_exception_context(x):
    x = x * 2  # tensor work ahead of the construct under test
    class Bad:
        def __enter__(self):
            return self

        def __exit__(self, et, ev, tb):
            raise RuntimeError("from exit")

    with Bad():
        raise ValueError("original")
    return x


@case()
def cm_exception_in_with_inside_loop_suppressed(x):
    t = Tracker("loop", suppress=True)
    total = x
    for i in range(3):
        with t:
            if i == 1:
                raise ValueError(f"skip {i}")
            total = total + i
    return total, t.log


@case()
def cm_contextdecorator(x):
    @printing_cm("deco")
    def inner(v):
        return v * 5

    return inner(x)


@case()
def cm_with_in_generator(x):
    x = x * 2  # tensor work ahead of the construct under test
    def g():
        with Tracker("ingen"):
            yield x
            yield x + 1

    return list(g())


@case()
def cm_exit_receives_exception_args(x):
    x = x * 2  # tensor work ahead of the construct under test
    seen = {}

    class Spy:
        def __enter__(self):
            return self

        def __exit__(self, et, ev, tb):
            seen["type"] = et
            seen["args"] = ev.args if ev else None
            seen["tb"] = tb is not None
            return True

    with Spy():
        raise LookupError("a", 2)
    return x, seen


@case(lambda i: (torch.randn(3), Tracker("rt", suppress=True)))
def cm_runtime_tensor_error_inside_user_cm(x, t):
    y = x * 2
    with t:
        y = y[torch.tensor([10])]  # out of bounds: only known when the graph runs
    return y, t.log


@case()
def cm_runtime_tensor_error_inside_no_grad_restores_grad_mode(x):
    with torch.no_grad():
        y = x[torch.tensor([10])]
    return y


# ============================================================================ dataclasses


@dataclasses.dataclass
class Point:
    x: float
    y: float = 0.0
    tags: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Batch:
    data: torch.Tensor
    scale: float = 1.0
    norm: Optional[torch.Tensor] = dataclasses.field(default=None, init=False)

    def __post_init__(self):
        self.norm = self.data * self.scale

    def total(self):
        return self.norm.sum()


@dataclasses.dataclass(frozen=True)
class Frozen:
    a: int
    b: str = "b"


@dataclasses.dataclass(order=True)
class Ranked:
    rank: int
    name: str = dataclasses.field(compare=False, default="")


@dataclasses.dataclass
class Holder:
    t: torch.Tensor
    extra: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Child(Point):
    z: float = 5.0


@dataclasses.dataclass(kw_only=True)
class KwOnly:
    a: int
    b: int = 2


@dataclasses.dataclass(slots=True)
class Slotted:
    a: torch.Tensor
    b: int = 1


@dataclasses.dataclass
class WithClassVar:
    counter: typing.ClassVar[int] = 0
    v: int = 0


@case()
def dc_defaults_and_factory_created_inside(x):
    p = Point(1.0)
    q = Point(2.0, 3.0, ["t"])
    p.tags.append("new")
    return x * p.x + q.y, p, q, Point(0.0).tags


@case()
def dc_post_init_tensor(x):
    b = Batch(x, scale=2.0)
    return b.total(), b.norm, b


@case()
def dc_frozen_setattr_raises(x):
    x = x * 2  # tensor work ahead of the construct under test
    f = Frozen(1)
    f.a = 2
    return x


@case()
def dc_frozen_caught_and_hash(x):
    x = x * 2  # tensor work ahead of the construct under test
    f = Frozen(1, "z")
    try:
        f.b = "no"
    except dataclasses.FrozenInstanceError as e:
        msg = str(e)
    d = {f: x}
    return d[Frozen(1, "z")] + 1, msg, hash(f) == hash(Frozen(1, "z"))


@case()
def dc_eq_and_order(x):
    items = [Ranked(3, "c"), Ranked(1, "a"), Ranked(2, "b")]
    items.sort()
    eq = Ranked(1, "x") == Ranked(1, "y")
    lt = Ranked(1) < Ranked(2)
    return x * items[0].rank, [r.name for r in items], eq, lt, max(items).name


@case()
def dc_asdict_copies_tensor_containers(x):
    x = x * 2  # tensor work ahead of the construct under test
    h = Holder(x, {"k": [1, 2]})
    d = dataclasses.asdict(h)
    d["extra"]["k"].append(3)
    return d, h.extra


@case()
def dc_astuple_and_fields(x):
    p = Point(1.0, 2.0, ["a"])
    names = [f.name for f in dataclasses.fields(p)]
    return x + 1, dataclasses.astuple(p), names, dataclasses.is_dataclass(p)


@case()
def dc_replace(x):
    p = Point(1.0, 2.0)
    q = dataclasses.replace(p, y=x.shape[0])
    return x * q.y, p, q, p is q


@case()
def dc_replace_frozen_and_post_init(x):
    b = Batch(x, 2.0)
    c = dataclasses.replace(b, scale=3.0)
    return c.norm, b.norm


@case(lambda i: (Holder(torch.randn(3), {"n": i}),))
def dc_passed_in_field_reassigned(h):
    h.t = h.t + 1
    h.extra["seen"] = True
    return h.t * 2


@case(lambda i: (Holder(torch.randn(3)),))
def dc_passed_in_field_mutated_in_place(h):
    h.t.add_(5)
    return h.t.sum()


@case(lambda i: (Batch(torch.randn(4), scale=1.0 + i),))
def dc_passed_in_method_call(b):
    return b.total() * b.scale


@case()
def dc_inheritance(x):
    c = Child(1.0, 2.0)
    return x * c.z + c.x, c, isinstance(c, Point), [f.name for f in dataclasses.fields(Child)]


@case()
def dc_kw_only_and_missing_arg(x):
    x = x * 2  # tensor work ahead of the construct under test
    k = KwOnly(a=3)
    try:
        KwOnly(1)
    except TypeError as e:
        msg = str(e)
    return x * k.a + k.b, msg


@case()
def dc_missing_arg_escapes(x):
    x = x * 2  # tensor work ahead of the construct under test
    return Point() if x.shape[0] else x


@case()
def dc_slots(x):
    s = Slotted(x)
    s.b = 7
    try:
        s.c = 1
    except AttributeError:
        pass
    return s.a * s.b, s


@case(reset=lambda: setattr(WithClassVar, "counter", 0), snapshot=lambda: WithClassVar.counter)
def dc_classvar_mutated(x):
    WithClassVar.counter += 1
    w = WithClassVar(3)
    return x * w.v, [f.name for f in dataclasses.fields(w)]


@case()
def dc_repr_printed(x):
    print(Point(1.0, 2.0))
    print(Frozen(3))
    return x + 1, repr(Ranked(2, "n"))


@case()
def dc_holding_tensor_created_inside_returned(x):
    h = Holder(x.sin(), {"grad": x.requires_grad})
    h.extra["shape"] = tuple(x.shape)
    return h


@case(lambda i: (Batch(torch.randn(3)), Batch(torch.randn(3))), graphs=0)  # the whole frame runs in Python
def dc_eq_with_tensors_raises(a, b):
    return a == b


class _HashPrints:
    """__hash__ has a visible side effect: the compiler must not call it on its own."""

    def __init__(self, t):
        self.t = t

    def __hash__(self):
        print("hash called")
        return 1


@case(lambda i: (torch.randn(3), _HashPrints(i)))
def dc_user_hash_not_called_by_compiler(x, k):
    return x + k.t


class _HashNeedsField:
    def __init__(self):
        self.ready = True

    def __hash__(self):
        return hash(self.field)  # raises AttributeError until `field` is set


@case(lambda i: (torch.randn(3), _HashNeedsField()))
def dc_argument_whose_hash_raises(x, o):
    o.field = 1
    return x + 1, hash(o) == hash(1)


# ========================================================================== user classes


class Base:
    kind = "base"

    def __init__(self, scale):
        self.scale = scale

    def apply(self, x):
        return x * self.scale

    @classmethod
    def make(cls, s):
        return cls(s)

    @staticmethod
    def helper(x):
        return x + 1

    def describe(self):
        return f"{type(self).__name__}:{self.kind}"


class Derived(Base):
    kind = "derived"

    def __init__(self, scale, shift):
        super().__init__(scale)
        self.shift = shift

    def apply(self, x):
        return super().apply(x) + self.shift


class Temperature:
    def __init__(self, c):
        self._c = c

    @property
    def c(self):
        return self._c

    @c.setter
    def c(self, v):
        if v < -273:
            raise ValueError(f"too cold: {v}")
        self._c = v

    @property
    def f(self):
        return self._c * 9 / 5 + 32


class Fallback:
    def __init__(self):
        self.real = 1

    def __getattr__(self, name):
        if name.startswith("dyn_"):
            return len(name)
        raise AttributeError(f"no {name}")


class Logged:
    def __init__(self, t):
        self.t = t
        self.reads = 0

    def __getattribute__(self, name):
        if name == "t":
            object.__setattr__(self, "reads", object.__getattribute__(self, "reads") + 1)
        return object.__getattribute__(self, name)


class Vec:
    def __init__(self, t):
        self.t = t

    def __add__(self, other):
        if isinstance(other, Vec):
            return Vec(self.t + other.t)
        if isinstance(other, (int, float)):
            return Vec(self.t + other)
        return NotImplemented

    def __radd__(self, other):
        print("radd", type(other).__name__)
        return self.__add__(other)

    def __iadd__(self, other):
        self.t.add_(other.t if isinstance(other, Vec) else other)
        return self

    def __mul__(self, k):
        return Vec(self.t * k)

    def __neg__(self):
        return Vec(-self.t)

    def __eq__(self, other):
        return isinstance(other, Vec) and bool((self.t == other.t).all())

    def __lt__(self, other):
        return self.t.sum() < other.t.sum()

    def __len__(self):
        return self.t.shape[0]

    def __iter__(self):
        return iter(self.t.unbind(0))

    def __contains__(self, v):
        return bool((self.t == v).any())

    def __getitem__(self, i):
        return self.t[i]

    def __call__(self, k):
        return self.t * k

    def __bool__(self):
        return self.t.numel() > 0

    def __repr__(self):
        return f"Vec(shape={tuple(self.t.shape)})"


class Seq:
    """Old-style sequence: iteration through __getitem__ until IndexError."""

    def __init__(self, n):
        self.n = n

    def __getitem__(self, i):
        if i >= self.n:
            raise IndexError(i)
        return i * 10


class Sized:
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n


class Pt:
    __slots__ = ("x", "y")

    def __init__(self, x, y):
        self.x = x
        self.y = y

    def norm(self):
        return (self.x ** 2 + self.y ** 2).sqrt()


class Registry:
    count = 0
    items: list = []

    @classmethod
    def register(cls, v):
        cls.count += 1
        cls.items.append(v)
        return cls.count


def _reset_registry():
    Registry.count = 0
    Registry.items = []


class Shape(abc.ABC):
    @abc.abstractmethod
    def area(self): ...


class Square(Shape):
    def __init__(self, s):
        self.s = s

    def area(self):
        return self.s * self.s


class Duck:
    def __len__(self):
        return 2

    def __iter__(self):
        return iter((1, 2))

    def __contains__(self, v):
        return v in (1, 2)


Shape.register(Duck)


class Idx:
    def __init__(self, i):
        self.i = i

    def __index__(self):
        return self.i


class Key:
    def __init__(self, k):
        self.k = k

    def __hash__(self):
        return hash(self.k)

    def __eq__(self, other):
        return isinstance(other, Key) and self.k == other.k


class NoHash:
    def __eq__(self, other):
        return True


@case()
def cls_inheritance_super(x):
    d = Derived(2.0, 1.0)
    return d.apply(x), d.describe(), d.kind, Base.kind, isinstance(d, Base)


@case()
def cls_classmethod_staticmethod(x):
    d = Derived.make.__func__(Base, 3.0)  # explicit cls
    b = Base.make(4.0)
    return b.apply(x), d.apply(x), Base.helper(x), b.helper(x), type(b).__name__


@case()
def cls_classmethod_constructs_subclass(x):
    class Sub(Base):
        kind = "sub"

    s = Sub.make(2.0)
    return s.apply(x), s.describe(), type(s) is Sub


@case()
def cls_property_getter_setter(x):
    t = Temperature(10.0)
    t.c = 20.0
    return x * t.f, t.c, t._c


@case()
def cls_property_setter_raises(x):
    x = x * 2  # tensor work ahead of the construct under test
    t = Temperature(10.0)
    t.c = x.shape[0] - 1000
    return x


@case(lambda i: (torch.randn(3), Temperature(float(i))))
def cls_property_setter_on_argument(x, t):
    t.c = t.c + 5
    return x + t.f


@case()
def cls_getattr_fallback(x):
    f = Fallback()
    return x * f.dyn_abc + f.real, hasattr(f, "missing"), getattr(f, "other", "dflt")


@case()
def cls_getattr_fallback_raises(x):
    x = x * 2  # tensor work ahead of the construct under test
    f = Fallback()
    return x + f.missing


@case(lambda i: (Logged(torch.randn(3)),))
def cls_getattribute_counts_reads(o):
    return o.t + o.t, o.reads


@case()
def cls_dunder_add_radd(x):
    a, b = Vec(x), Vec(x * 2)
    c = a + b
    d = 1 + a
    e = sum([a, b], 0)
    return c.t, d.t, e.t


@case()
def cls_dunder_add_notimplemented_typeerror(x):
    x = x * 2  # tensor work ahead of the construct under test
    return Vec(x) + "str"


@case(lambda i: (Vec(torch.randn(3)),))
def cls_dunder_iadd_mutates_in_place(v):
    alias = v
    v += 1
    v += Vec(torch.ones(3))
    return v is alias, v.t


@case()
def cls_dunder_eq_lt_sorted(x):
    vs = [Vec(x + 2), Vec(x), Vec(x + 1)]
    ordered = sorted(vs)
    return [v.t for v in ordered], Vec(x) == Vec(x.clone()), Vec(x) != Vec(x + 1)


@case()
def cls_dunder_len_iter_contains_getitem(x):
    v = Vec(x)
    return len(v), list(v), 0.5 in v, v[0], v[1:], [e * 2 for e in v]


@case()
def cls_dunder_call_bool_neg(x):
    v = Vec(x)
    empty = Vec(x[:0])
    out = v(3)
    if empty:
        out = out + 100
    if v:
        out = out + 1
    return out, (-v).t, bool(empty)


@case()
def cls_bool_falls_back_to_len(x):
    r = []
    for n in (0, 2):
        if Sized(n):
            r.append(x + n)
        else:
            r.append(x - n)
    return r, bool(Sized(0))


@case()
def cls_old_style_getitem_iteration(x):
    x = x * 2  # tensor work ahead of the construct under test
    s = Seq(3)
    return [x * v for v in s], 20 in s, list(s)


@case()
def cls_slots_object(x):
    p = Pt(x, x + 1)
    p.x = p.x * 2
    try:
        p.z = 1
    except AttributeError as e:
        msg = str(e)
    return p.norm(), p, msg


@case(lambda i: (Pt(torch.randn(3), torch.randn(3)),))
def cls_slots_argument_mutated(p):
    p.y = p.x + p.y
    return p.norm()


@case(reset=_reset_registry, snapshot=lambda: (Registry.count, list(Registry.items)))
def cls_class_attribute_mutated(x):
    Registry.register("a")
    n = Registry.register("b")
    return x * n


@case(reset=lambda: setattr(Base, "kind", "base"), snapshot=lambda: (Base.kind, Derived.kind))
def cls_class_attribute_assigned_then_read_via_instance(x):
    b = Base(1.0)
    Base.kind = "changed"
    return x + 1, b.kind, b.describe(), Derived(1.0, 0.0).kind


@case()
def cls_instance_attribute_shadows_class_attribute(x):
    b = Base(2.0)
    b.kind = "instance"
    b.apply = lambda t: t * 100
    return b.apply(x), b.describe(), Base.kind


@case()
def cls_object_created_inside_returned_with_alias(x):
    d = Derived(1.0, 2.0)
    return d, [d, d], d.apply(x)


@case(lambda i: (Derived(1.0, float(i)),), graphs=0)  # the whole frame runs in Python
def cls_argument_returned_identity(d):
    d.new_attr = d.shift * 2
    del d.scale
    return d, d.shift


@case()
def cls_isinstance_issubclass_abc(x):
    sq = Square(2)
    duck = Duck()
    return (x * sq.area(), isinstance(sq, Shape), isinstance(duck, Shape), issubclass(Duck, Shape),
            isinstance(duck, collections.abc.Sized), isinstance(duck, collections.abc.Container),
            isinstance(x, collections.abc.Iterable), isinstance([], collections.abc.Sequence))


@case()
def cls_abstract_instantiation_error(x):
    x = x * 2  # tensor work ahead of the construct under test
    return Shape(), x


@case()
def cls_index_dunder(x):
    vals = [10, 20, 30]
    return x * vals[Idx(1)], x[Idx(0)], list(range(Idx(3)))


@case()
def cls_hash_eq_dict_keys(x):
    d = {Key("a"): x, Key("b"): x + 1}
    d[Key("a")] = d[Key("a")] * 2
    return d[Key("a")], Key("b") in d, len(d)


@case()
def cls_eq_without_hash_unhashable(x):
    x = x * 2  # tensor work ahead of the construct under test
    return {NoHash(): x}


@case()
def cls_repr_str_in_print_and_fstring(x):
    v = Vec(x)
    print(v, f"[{v!r}]", str(v))
    return x + 1


@case()
def cls_init_subclass_and_set_name(x):
    x = x * 2  # tensor work ahead of the construct under test
    registry = []

    class Plugin:
        def __init_subclass__(cls, **kw):
            registry.append(cls.__name__)

    class Desc:
        def __set_name__(self, owner, name):
            self.name = name

        def __get__(self, obj, owner):
            return self.name if obj is None else obj.__dict__.get(self.name, 0) + 1

    class A(Plugin):
        attr = Desc()

    a = A()
    return x * a.attr, registry, A.attr


@case()
def cls_cached_property(x):
    class Lazy:
        calls = 0

        def __init__(self, t):
            self.t = t

        @functools.cached_property
        def heavy(self):
            Lazy.calls += 1
            return self.t * 10

    lz = Lazy(x)
    return lz.heavy + lz.heavy, Lazy.calls, "heavy" in vars(lz)


@case()
def cls_setattr_override(x):
    x = x * 2  # tensor work ahead of the construct under test
    class Recorder:
        def __init__(self):
            object.__setattr__(self, "history", [])

        def __setattr__(self, k, v):
            self.history.append(k)
            object.__setattr__(self, k, v)

    r = Recorder()
    r.a = x + 1
    r.b = 2
    return r.a * r.b, r.history


@case()
def cls_eq_returning_tensor(x):
    class Elem:
        def __init__(self, t):
            self.t = t

        def __eq__(self, other):
            return self.t == other.t

    return Elem(x) == Elem(x.clone())


@case()
def cls_metaclass_call_count(x):
    x = x * 2  # tensor work ahead of the construct under test
    class Meta(type):
        created = 0

        def __call__(cls, *a, **k):
            Meta.created += 1
            return super().__call__(*a, **k)

    class M(metaclass=Meta):
        def __init__(self, v):
            self.v = v

    m = M(x)
    return m.v + 1, Meta.created


@case()
def cls_multiple_inheritance_mro(x):
    x = x * 2  # tensor work ahead of the construct under test
    class A:
        def f(self):
            return ["A"]

    class B(A):
        def f(self):
            return ["B"] + super().f()

    class C(A):
        def f(self):
            return ["C"] + super().f()

    class D(B, C):
        def f(self):
            return ["D"] + super().f()

    return x * len(D().f()), D().f(), [k.__name__ for k in D.__mro__]


@case()
def cls_mutable_class_default_shared(x):
    x = x * 2  # tensor work ahead of the construct under test
    class Bad:
        items = []

        def add(self, v):
            self.items.append(v)

    a, b = Bad(), Bad()
    a.add(x)
    b.add(x + 1)
    return len(Bad.items), a.items is b.items, Bad.items


@case()
def cls_getitem_slice_and_setitem(x):
    x = x * 2  # tensor work ahead of the construct under test
    class Grid:
        def __init__(self):
            self.cells = {}

        def __setitem__(self, k, v):
            self.cells[k] = v

        def __getitem__(self, k):
            if isinstance(k, slice):
                return (k.start, k.stop, k.step)
            return self.cells[k]

        def __delitem__(self, k):
            del self.cells[k]

    g = Grid()
    g[0, 1] = x
    g["z"] = x + 1
    del g["z"]
    return g[0, 1], g[1:5:2], list(g.cells)


@case()
def cls_getitem_keyerror_escapes(x):
    x = x * 2  # tensor work ahead of the construct under test
    class Grid:
        def __getitem__(self, k):
            return {"a": x}[k]

    return Grid()["b"]


class _Scaled:
    scale = 1

    def bump(self):
        type(self).scale += 1


def _scaled_with(v):
    _Scaled.scale = v
    return (torch.randn(3), _Scaled())


@case(lambda i: _scaled_with([1, 1, 5][i]), snapshot=lambda: _Scaled.scale)
def cls_class_attr_via_type_changes_between_calls(x, o):
    return x * type(o).scale


@case(lambda i: _scaled_with([1, 1, 5][i]), snapshot=lambda: _Scaled.scale)
def cls_class_attr_via_dunder_class_changes_between_calls(x, o):
    return x * o.__class__.scale


@case(lambda i: _scaled_with(0), snapshot=lambda: _Scaled.scale)
def cls_type_self_counter_in_method_called_twice(x, o):
    o.bump()
    o.bump()
    return x * _Scaled.scale


@case(lambda i: (torch.randn(3), Pt(torch.ones(2), torch.ones(2))))
def cls_slots_argument_setattr_unknown_caught(x, p):
    try:
        p.z = 1
    except AttributeError:
        p.x = p.x * 3
    return x + 1


@case(lambda i: (torch.randn(3), []), graphs=0)  # raises before any tensor op: no graph to compile
def cls_abstract_instantiation_not_returned(x, log):
    log.append(1)
    s = Shape()
    log.append(2)
    return x + 1


@case(lambda i: (torch.randn(3), []))
def cls_abstract_instantiation_caught(x, log):
    y = x * 2
    try:
        Shape()
    except TypeError as e:
        log.append(str(e))
    return y


@case(graphs=0)  # Python raises the TypeError before any tensor work
def cls_unhashable_object_in_set_not_returned(x):
    s = {NoHash()}
    return x + 1


@case()
def cls_unhashable_object_as_dict_key_caught(x):
    y = x * 2
    try:
        d = {NoHash(): y}
    except TypeError as e:
        return y, str(e)
    return y + 100, len(d)


class Hashy:
    def __init__(self, k):
        self.k = k

    def __hash__(self):
        return self.k

    def __eq__(self, other):
        return isinstance(other, Hashy) and other.k == self.k


@case()
def cls_set_and_dict_of_new_objects_use_eq_hash(x):
    s = {Hashy(1), Hashy(1), Hashy(2)}
    d = {Hashy(1): "a", Hashy(1): "b"}
    return x * len(s), len(d), list(d.values()), Hashy(2) in s


@case()
def cls_len_dunder_result_validated(x):
    class LenTrue:
        def __len__(self):
            return True

    return x * 2, len(LenTrue()), type(len(LenTrue())).__name__


@case()
def cls_len_dunder_negative_raises(x):
    y = x * 2
    return y, len(Sized(-1))


@case()
def cls_bool_dunder_returning_int_raises(x):
    class BadBool:
        def __bool__(self):
            return 1

    y = x * 2
    if BadBool():
        return y
    return -y


@case()
def cls_contains_result_converted_to_bool(x):
    class Five:
        def __contains__(self, v):
            return 5

    return x * 2, 3 in Five(), 3 not in Five()


# ============================================================================ exceptions


class AppError(Exception):
    def __init__(self, msg, code, payload=None):
        super().__init__(msg)
        self.code = code
        self.payload = payload


class AppSubError(AppError):
    def __str__(self):
        return f"[{self.code}] {self.args[0]}"


def fail_with(kind, x):
    if kind == "value":
        raise ValueError("bad value", x.shape[0])
    if kind == "app":
        raise AppError("app failed", 42)
    return x


@case()
def exc_custom_with_attributes_escapes(x):
    x = x * 2  # tensor work ahead of the construct under test
    raise AppError("broken", code=x.shape[0], payload={"dim": x.dim()})


@case()
def exc_custom_str_override_escapes(x):
    y = x + 1
    raise AppSubError("sub", 7)


@case()
def exc_custom_caught_attributes_used(x):
    x = x * 2  # tensor work ahead of the construct under test
    try:
        fail_with("app", x)
    except AppError as e:
        return x * e.code, e.args, str(e), type(e).__name__


@case()
def exc_raise_from(x):
    x = x * 2  # tensor work ahead of the construct under test
    try:
        {}["key"]
    except KeyError as e:
        raise AppError("wrapped", 1) from e
    return x


@case()
def exc_raise_from_none(x):
    x = x * 2  # tensor work ahead of the construct under test
    try:
        [][1]
    except IndexError:
        raise ValueError("clean") from None
    return x


@case()
def exc_implicit_context(x):
    x = x * 2  # tensor work ahead of the construct under test
    try:
        1 / 0
    except ZeroDivisionError:
        raise RuntimeError("during handling")
    return x


@case()
def exc_bare_reraise(x):
    x = x * 2  # tensor work ahead of the construct under test
    try:
        fail_with("value", x)
    except ValueError:
        print("logging and re-raising")
        raise
    return x


@case()
def exc_reraise_caught_variable(x):
    x = x * 2  # tensor work ahead of the construct under test
    try:
        fail_with("app", x)
    except AppError as e:
        err = e
    y = x + 1
    raise err


@case()
def exc_finally_ordering_prints(x):
    print("start")
    try:
        print("try")
        y = x + 1
        return y
    finally:
        print("finally")


@case()
def exc_finally_return_overrides(x):
    try:
        raise ValueError("lost")
    finally:
        return x + 1  # noqa: B012 - intentional


@case()
def exc_finally_runs_on_escape(x):
    x = x * 2  # tensor work ahead of the construct under test
    try:
        print("body")
        fail_with("value", x)
    finally:
        print("cleanup")
    return x


@case()
def exc_nested_try_finally_order(x):
    x = x * 2  # tensor work ahead of the construct under test
    log = []
    try:
        try:
            log.append("inner try")
            raise KeyError("inner")
        finally:
            log.append("inner finally")
    except KeyError as e:
        log.append(f"outer except {e}")
    else:
        log.append("else")
    finally:
        log.append("outer finally")
    return x + len(log), log


@case()
def exc_try_except_in_loop_continue(x):
    out, errors = [], []
    for i in range(5):
        try:
            if i % 2:
                raise ValueError(i)
            out.append(x * i)
        except ValueError as e:
            errors.append(e.args)
            continue
        finally:
            print("iter", i)
    return out, errors


@case()
def exc_tensor_shape_mismatch_caught(x):
    try:
        y = x + torch.ones(7)
    except RuntimeError as e:
        print("caught:", str(e).split(",")[0])
        y = x
    return y


@case()
def exc_tensor_shape_mismatch_escapes(x):
    y = x * 2
    return y @ torch.ones(5, 2)


@case()
def exc_tensor_index_out_of_range(x):
    x = x * 2  # tensor work ahead of the construct under test
    return x[10]


@case(lambda i: ([torch.randn(3), torch.randn(4), torch.randn(3)],))
def exc_tensor_error_in_loop_recovered(xs):
    w = torch.randn(3)
    out = []
    for t in xs:
        try:
            out.append(t @ w)
        except RuntimeError:
            out.append(None)
    return out


ARGS_LOG: list = []


@case(reset=lambda: ARGS_LOG.clear(), snapshot=lambda: list(ARGS_LOG))
def exc_side_effects_before_escape_are_visible(x):
    x = x * 2  # tensor work ahead of the construct under test
    ARGS_LOG.append(x.shape[0])
    print("about to fail")
    raise AppError("after effects", 3)


@case(lambda i: ([], {"n": 0}))
def exc_argument_mutations_before_raise(log, d):
    t = torch.ones(2)
    log.append(t)
    d["n"] += 1
    d["t"] = t * 2
    raise KeyError("after mutations")


@case()
def exc_keyerror_args_and_str(x):
    x = x * 2  # tensor work ahead of the construct under test
    d = {"a": x}
    try:
        return d["b"]
    except KeyError as e:
        return x, e.args, str(e), repr(e)


@case()
def exc_except_tuple_and_base_class(x):
    x = x * 2  # tensor work ahead of the construct under test
    caught = []
    for kind in ("value", "app"):
        try:
            fail_with(kind, x)
        except (TypeError, ValueError) as e:
            caught.append(("tv", type(e).__name__))
        except Exception as e:
            caught.append(("base", type(e).__name__))
    return x + len(caught), caught


@case()
def exc_sys_exc_info_in_handler(x):
    x = x * 2  # tensor work ahead of the construct under test
    try:
        raise AppError("info", 5)
    except AppError:
        et, ev, tb = sys.exc_info()
        inside = (et.__name__, ev.code, tb is not None)
    after = sys.exc_info()
    return x * 2, inside, after


@case()
def exc_assert_statement(x):
    x = x * 2  # tensor work ahead of the construct under test
    assert x.shape[0] == 100, f"expected 100 rows, got {x.shape[0]}"
    return x


@case()
def exc_name_unbound_after_except(x):
    x = x * 2  # tensor work ahead of the construct under test
    try:
        raise ValueError("v")
    except ValueError as e:
        pass
    return x, e  # noqa: F821 - UnboundLocalError like eager


@case()
def exc_exception_object_returned_not_raised(x):
    e = AppError("returned", 9, payload=x + 1)
    return e, x


@case()
def exc_exception_group_except_star(x):
    x = x * 2  # tensor work ahead of the construct under test
    got = []
    try:
        raise ExceptionGroup("grp", [ValueError("v1"), KeyError("k1")])
    except* ValueError as eg:
        got.append(("value", [str(e) for e in eg.exceptions]))
    except* KeyError as eg:
        got.append(("key", [str(e) for e in eg.exceptions]))
    return x + 1, got


@case(lambda i: (torch.randn(3 + i),))
def exc_path_depends_on_input(x):
    if x.shape[0] > 3:
        raise AppError("too big", x.shape[0])
    return x * 2


@case()
def exc_zero_division_from_shape(x):
    x = x * 2  # tensor work ahead of the construct under test
    n = x.shape[0] - x.shape[0]
    return x * (1 / n)


@case()
def exc_raise_in_inlined_caught_outer(x):
    def inner(t):
        t2 = t * 2
        raise AppError("from inner", 11, payload="p")

    try:
        inner(x)
    except AppError as e:
        return x + e.code, e.payload
    return None


@case()
def exc_escape_from_nested_function_last_frame(x):
    def level2(t):
        return t.view(-1, 7)

    def level1(t):
        return level2(t + 1)

    return level1(x)


@case()
def exc_raise_class_not_instance(x):
    y = x + 1
    raise ValueError


@case()
def exc_exception_in_except_handler_context_chain(x):
    x = x * 2  # tensor work ahead of the construct under test
    try:
        raise KeyError("first")
    except KeyError:
        try:
            raise ValueError("second")
        except ValueError:
            raise TypeError("third")
    return x


@case()
def exc_finally_with_break_in_loop(x):
    out = []
    for i in range(4):
        try:
            if i == 2:
                raise ValueError("stop")
            out.append(x + i)
        except ValueError:
            break
        finally:
            out.append(i)
    return out


@case()
def exc_with_traceback_and_notes(x):
    x = x * 2  # tensor work ahead of the construct under test
    try:
        raise AppError("noted", 1)
    except AppError as e:
        e.add_note("note one")
        notes = list(e.__notes__)
    return x + 1, notes


@case()
def exc_stopiteration_inside_generator_becomes_runtimeerror(x):
    x = x * 2  # tensor work ahead of the construct under test
    def g():
        yield x
        next(iter([]))
        yield x + 1

    return list(g())


@case()
def exc_generator_close_with_exception_in_finally(x):
    x = x * 2  # tensor work ahead of the construct under test
    def g():
        try:
            yield x
        finally:
            raise ValueError("in finally")

    it = g()
    next(it)
    it.close()
    return x


@case()
def exc_caught_exception_retained_and_str(x):
    errors = []
    for shape in ((7,), (3,)):
        try:
            y = x + torch.ones(shape)
        except RuntimeError as e:
            errors.append(type(e).__name__)
            y = None
    return errors, y


@case()
def exc_raise_from_cause_kept_when_caught(x):
    x = x * 2  # tensor work ahead of the construct under test
    try:
        try:
            raise KeyError("root")
        except KeyError as e:
            raise AppError("top", 2) from e
    except AppError as outer:
        return x + 1, type(outer.__cause__).__name__, outer.__suppress_context__, str(outer.__cause__)


@case()
def exc_caught_exception_keeps_traceback(x):
    y = x * 2
    try:
        raise ValueError("tb")
    except ValueError as e:
        err = e
    return y, err.__traceback__ is not None, err.__traceback__ and err.__traceback__.tb_lineno


@case()
def exc_reraised_same_instance_traceback(x):
    y = x + 1
    e = RuntimeError("reused")
    for i in range(2):
        try:
            raise e
        except RuntimeError:
            pass
    return y, e.__traceback__ is not None


@case(lambda i: (torch.randn(3), []))
def exc_runtime_tensor_error_caught_by_try(x, log):
    y = x * 2
    try:
        log.append("try")
        z = y[torch.tensor([10])]  # out of bounds: only known when the graph runs
        log.append("after")
    except IndexError as e:
        log.append("except")
        z = y
    finally:
        log.append("finally")
    return z


@case(lambda i: (torch.randn(3), torch.tensor([[0], [1], [7]][i])))
def exc_runtime_tensor_error_depends_on_input_data(x, idx):
    y = x * 2
    try:
        return y[idx]
    except IndexError:
        return y - 1


@case(lambda i: (torch.randn(3), [], _Box(0)))
def exc_runtime_tensor_error_keeps_earlier_side_effects(x, log, box):
    log.append(1)
    box.v = x.shape[0]
    y = x[torch.tensor([10])]
    log.append(2)
    return y


# ============================================================================== tests


# Known dynamo_lite bugs go to tests/test_known_bugs.py as strict xfails.


def _params():
    for name in CASES:
        yield pytest.param(name, id=name)


@pytest.mark.parametrize("name", list(_params()))
def test_case(name):
    run_case(CASES[name])


def test_harness_detects_differences():
    """The comparison is not vacuous: a compiled function that differs is caught."""

    def eager_fn(x):
        print("a")
        return x + 1

    c = Case(eager_fn, _default_make, 1, None, None, 0)
    run_case(c)
    r1 = observe(eager_fn, (torch.ones(2),), structure=True)
    r2 = observe(lambda x: x + 2, (torch.ones(2),), structure=True)
    with pytest.raises(AssertionError):
        compare(r1, r2)
    with pytest.raises(AssertionError):
        compare(observe(lambda: (_ for _ in ()).throw(ValueError("a")), structure=True),
                observe(lambda: (_ for _ in ()).throw(ValueError("b")), structure=True))


def test_generator_second_call_hits_cache():
    cnt = CompileCounter()
    fn = dynamo_lite.compile(gen_list_of_generator, backend=cnt)
    x = torch.randn(3)
    fn(x)
    n = cnt.frame_count
    assert_same(fn(x), gen_list_of_generator(x))
    assert cnt.frame_count == n


def test_context_manager_no_recompile_on_same_inputs():
    cnt = CompileCounter()
    fn = dynamo_lite.compile(cm_nested_order, backend=cnt)
    x = torch.randn(3)
    with contextlib.redirect_stdout(io.StringIO()):
        fn(x)
        n = cnt.frame_count
        fn(torch.randn(3))
    assert n >= 1 and cnt.frame_count == n


def test_dataclass_input_field_change_recompiles_correctly():
    fn = dynamo_lite.compile(dc_passed_in_method_call, backend="eager")
    for s in (1.0, 2.0, 1.0, 3.5):
        b1, b2 = Batch(torch.ones(2), s), Batch(torch.ones(2), s)
        assert_same(fn(b1), dc_passed_in_method_call(b2))


def test_exception_escaping_keeps_user_last_frame():
    fn = dynamo_lite.compile(exc_escape_from_nested_function_last_frame, backend="eager")
    with pytest.raises(RuntimeError) as info:
        fn(torch.randn(3))
    last = traceback.extract_tb(info.value.__traceback__)[-1]
    assert last.filename == __file__ and last.name == "level2"


def test_class_attribute_mutation_visible_across_calls():
    _reset_registry()
    fn = dynamo_lite.compile(cls_class_attribute_mutated, backend="eager")
    try:
        outs = [fn(torch.ones(1)).item() for _ in range(3)]
        assert outs == [2.0, 4.0, 6.0] and Registry.count == 6 and Registry.items == ["a", "b"] * 3
    finally:
        _reset_registry()
