"""Dataclasses and user classes (properties, inheritance, __call__, __getattr__), eager vs compiled.

Every test compares compiled with eager through dynamo_lite.testing; known bugs are strict
xfails in tests/test_known_bugs.py.
"""
import collections
import dataclasses
import enum
import typing

import pytest

import torch

import dynamo_lite
from dynamo_lite.testing import CompileCounter
from dynamo_lite.testing import check, check_breaks, check_calls


Point = collections.namedtuple("Point", ["x", "y"])


class Pair(typing.NamedTuple):
    a: torch.Tensor
    b: int = 2


# ---------------------------------------------------------------- dataclasses

@dataclasses.dataclass
class Config:
    scale: float = 2.0
    shift: float = 0.0
    tags: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class Frozen:
    w: torch.Tensor
    n: int


def test_dataclass_input_read_and_mutated():
    def f(x, cfg):
        cfg.tags.append("used")
        cfg.shift = cfg.shift + 1
        return x * cfg.scale + cfg.shift

    check(f, torch.ones(2), Config(scale=3.0))


def test_dataclass_created_inside_and_returned():
    def f(x):
        c = Config(scale=x.shape[0])
        d = dataclasses.replace(c, shift=1.5)
        return x * c.scale, c, d, dataclasses.asdict(d), c == Config(scale=2), dataclasses.fields(c)[0].name

    check(f, torch.ones(2), graphs=None)


def test_frozen_dataclass_with_tensor_and_setattr_error():
    def f(fr):
        y = fr.w * fr.n
        try:
            fr.n = 5
        except dataclasses.FrozenInstanceError as e:
            return y, type(e).__name__, str(e)
        return y

    check(f, Frozen(torch.ones(2), 3), graphs=None)


# ---------------------------------------------------------------- user classes

class Base:
    kind = "base"
    count = 0

    def __init__(self, w):
        self.w = w

    def apply(self, x):
        return x * self.w

    @property
    def double(self):
        return self.w * 2

    @classmethod
    def make(cls, w):
        return cls(w)

    @staticmethod
    def shift(x):
        return x + 1


class Child(Base):
    kind = "child"

    def apply(self, x):
        return super().apply(x) + self.shift(x)

    def __call__(self, x):
        return self.apply(x) * 10


class Lazy:
    def __init__(self):
        self.real = {"a": 1.5}

    def __getattr__(self, name):
        real = self.__dict__.get("real", {})  # not self.real: copy.deepcopy probes before __init__
        if name in real:
            return real[name]
        raise AttributeError(f"no {name}")


class Key:
    def __init__(self, k):
        self.k = k

    def __eq__(self, other):
        return isinstance(other, Key) and self.k == other.k

    def __hash__(self):
        return hash(self.k)


class Slotted:
    __slots__ = ("a", "b")

    def __init__(self, a, b):
        self.a = a
        self.b = b


class Vec:
    def __init__(self, t):
        self.t = t

    def __add__(self, other):
        return Vec(self.t + other.t)

    def __mul__(self, k):
        return Vec(self.t * k)

    __rmul__ = __mul__

    def __len__(self):
        return self.t.shape[0]

    def __getitem__(self, i):
        return self.t[i]

    def __iter__(self):
        return iter(self.t.unbind(0))

    def __bool__(self):
        return len(self) > 0

    def __repr__(self):
        return f"Vec({tuple(self.t.shape)})"


def test_user_class_methods_properties_classmethods_staticmethods():
    def f(x, obj):
        c = Child.make(3.0)
        return obj.apply(x), obj.double, c(x), c.kind, Base.kind, Child.shift(x), isinstance(c, Base), type(c).__name__

    check(f, torch.ones(2), Base(2.0))


def test_user_object_created_inside_and_returned():
    def f(x):
        c = Child(x.sum())
        c.extra = [1, 2]
        return c.apply(x), c

    check(f, torch.ones(2))


def test_user_object_attribute_mutation_visible_after_call():
    def f(x, obj):
        obj.w = obj.w + 1
        obj.new_attr = "set"
        Base.count += 1
        return obj.apply(x)

    def reset():
        Base.count = 0

    check(f, torch.ones(2), Base(2.0), reset=reset, snapshot=lambda: Base.count)


def test_getattr_fallback_and_hasattr():
    def f(x, obj):
        return x * obj.a, hasattr(obj, "zzz"), getattr(obj, "a", 0), getattr(obj, "b", "dflt")

    check(f, torch.ones(2), Lazy())


def test_missing_attribute_error_matches_eager():
    def f(x, obj):
        y = x + 1
        return y * obj.missing

    check(f, torch.ones(2), Lazy(), graphs=None)


def test_eq_hash_keys_in_dict_and_set():
    def f(x, table):
        k = Key("w")
        s = {Key(1), Key(1), Key(2)}
        return x * table[k], len(s), Key(3) == Key(3), Key(3) != Key(4), k in table

    check(f, torch.ones(2), {Key("w"): 4.0})


def test_slots_class():
    def f(x, s):
        s.b = s.b + 1
        return x * s.a + s.b

    def snap_free(fn):
        return fn

    s_e, s_c = Slotted(2.0, 1), Slotted(2.0, 1)
    r_e = f(torch.ones(2), s_e)
    r_c = dynamo_lite.compile(f, backend=CompileCounter())(torch.ones(2), s_c)
    torch.testing.assert_close(r_c, r_e)
    assert (s_e.a, s_e.b) == (s_c.a, s_c.b)


def test_operator_overloads_on_user_class():
    def f(a, b):
        c = a + b
        d = 2 * c
        e = d * 3
        return e.t, len(e), e[0], [t * 1 for t in e], bool(e), repr(e)

    check(f, Vec(torch.ones(3)), Vec(torch.ones(3) * 2))


def test_class_attribute_change_between_calls():
    class Model:
        factor = 2.0

        def run(self, x):
            return x * self.factor

    m = Model()

    def f(x):
        return m.run(x)

    opt = dynamo_lite.compile(f, backend=CompileCounter())
    a = opt(torch.ones(2))
    Model.factor = 5.0
    b = opt(torch.ones(2))
    m.factor = 7.0  # instance attribute now shadows
    c = opt(torch.ones(2))
    torch.testing.assert_close(torch.stack([a, b, c]), torch.tensor([[2.0, 2.0], [5.0, 5.0], [7.0, 7.0]]))


def test_method_monkeypatched_between_calls():
    class M:
        def g(self, x):
            return x + 1

    obj = M()

    def f(x):
        return obj.g(x)

    opt = dynamo_lite.compile(f, backend=CompileCounter())
    a = opt(torch.ones(2))
    obj.g = lambda x: x * 100
    b = opt(torch.ones(2))
    M.g = lambda self, x: x - 1
    del obj.g
    c = opt(torch.ones(2))
    torch.testing.assert_close(torch.stack([a, b, c]), torch.tensor([[2.0, 2.0], [100.0, 100.0], [0.0, 0.0]]))


class Color(enum.Enum):
    RED = 1
    BLUE = 2


def test_enum_values_in_branches():
    def f(x, c):
        if c is Color.RED:
            return x + c.value
        return x * c.value, c.name

    check_calls(f, [(torch.ones(2), Color.RED), (torch.ones(2), Color.BLUE)])


def test_user_class_with_tensor_attribute_mutated_in_place():
    class State:
        def __init__(self):
            self.h = torch.zeros(2)
            self.steps = 0

    def f(x, st):
        st.h.add_(x)
        st.h = st.h * 0.5
        st.steps += 1
        return st.h.sum()

    check(f, torch.ones(2), State())


def test_stale_attribute_swap_values():
    class Obj:
        def __init__(self):
            self.a = torch.ones(2)
            self.b = torch.zeros(2)

    def f(o):
        old_a = o.a
        o.a = o.b
        o.b = old_a
        return old_a + 1, o.a

    check(f, Obj())


def test_list_item_swap_and_dict_value_read_before_overwrite():
    def f(l, d):
        first = l[0]
        l[0], l[1] = l[1], l[0]
        old = d["k"]
        d["k"] = old * 10
        return first * 1, old * 1

    check(f, [torch.ones(2), torch.zeros(2)], {"k": torch.ones(2)})


# ---- huggingface_hub's strict dataclasses (transformers' configs validate every assignment) ---
def _strict_config_class():
    import dataclasses
    from typing import Optional, Union

    strict = pytest.importorskip("huggingface_hub.dataclasses").strict

    @strict
    @dataclasses.dataclass
    class Config:
        width: int = 4
        name: str = "a"
        ratio: Optional[float] = None
        sizes: list[int] = dataclasses.field(default_factory=lambda: [1, 2])
        mode: Union[int, str] = 0

    return Config


def test_strict_dataclass_field_assignment_is_validated_in_the_trace():
    import copy as copy_module

    Config = _strict_config_class()

    def f(x, c):
        d = copy_module.deepcopy(c)  # transformers' get_text_config: a deep copy, then setattr
        d.width = 5
        d.ratio = 0.5
        d.sizes = [3, 4]
        d.mode = "m"
        d.name = "copy"
        return x * d.width + d.ratio, d.name, d.sizes

    check_breaks(f, torch.ones(2), Config(), breaks=0)


def test_strict_dataclass_rejected_assignment_raises_as_eager():
    import copy as copy_module

    Config = _strict_config_class()

    def f(x, c):
        d = copy_module.deepcopy(c)
        d.width = "wide"  # StrictDataclassFieldValidationError, chained from a TypeError
        return x + 1

    check_breaks(f, torch.ones(2), Config(), breaks=None, raises=Exception)


# ---------------------------------------------------------------- namedtuples with their own dunders

NT_LOG = []


class ReIndexed(typing.NamedTuple):
    """t[i] runs this (eager); t.a does not (a field reads the tuple slot directly)."""
    a: torch.Tensor
    b: torch.Tensor

    def __getitem__(self, index):
        NT_LOG.append(("getitem", index))
        return ReIndexed(self.a * 2, self.b + index)


class Measured(typing.NamedTuple):
    a: int
    b: int

    def __len__(self):
        NT_LOG.append("len")
        return 7

    def __iter__(self):
        NT_LOG.append("iter")
        return iter([1, 2, 3])

    def __contains__(self, item):
        NT_LOG.append(("contains", item))
        return item == 5


def test_namedtuple_own_getitem_not_run_by_guards_or_loads():
    # the fields are read without the class's __getitem__ (its guard ran it on the second call:
    # the guard failed and the recompile failed in the backend)
    def f(t):
        return t.a + 1

    check_calls(f, [lambda: (ReIndexed(torch.ones(2), torch.zeros(2)),),
                    lambda: (ReIndexed(torch.ones(2), torch.zeros(2)),)],
                reset=NT_LOG.clear, snapshot=lambda: list(NT_LOG), hits=[1])


def test_namedtuple_own_getitem_in_compiled_code():
    def f(t):
        return t[0].a + t[1].b, t.a

    check_calls(f, [lambda: (ReIndexed(torch.ones(2), torch.zeros(2)),),
                    lambda: (ReIndexed(torch.ones(2), torch.zeros(2)),)],
                reset=NT_LOG.clear, snapshot=lambda: list(NT_LOG))


def test_namedtuple_own_len_iter_contains():
    def f(x, t):
        n = len(t)
        p, q, r = t
        return x + n + p + r + (5 in t) + t.b

    check_calls(f, [lambda: (torch.ones(2), Measured(1, 2)), lambda: (torch.ones(2), Measured(1, 2))],
                reset=NT_LOG.clear, snapshot=lambda: list(NT_LOG), graphs=None)


class Extended(Pair):
    """A namedtuple subclass without __slots__: its instances take attributes."""


def test_namedtuple_subclass_made_in_frame_keeps_its_attributes():
    # the object the attribute is set on is the one returned (it was rebuilt at the break: the
    # attribute was lost)
    def f(x):
        t = Extended(x + 1, 3)
        t.c = x * 2
        return t, t.c, t.a

    check(f, torch.ones(2), graphs=None)
    got = dynamo_lite.compile(f, backend="eager")(torch.ones(2))[0]
    assert torch.equal(got.c, torch.ones(2) * 2)
