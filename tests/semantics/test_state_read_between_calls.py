"""Acceptance: state a compiled function read changes between calls -> new results.

Each scenario calls a function eagerly and compiled after each mutation of
what it reads (global functions, defaults, nested attributes, global
containers, partial keywords, an object's class, instance and class methods,
static methods, properties, class attributes through inheritance, closures,
enums, slots, builtins shadowed by globals, a module's forward replaced on the
instance, grad mode and global torch flags); compiled results must follow.
Helpers: dynamo_lite/testing.py.
"""
import collections
import dataclasses
import enum
import functools
import types

import numpy as np
import pytest
import torch

import dynamo_lite
from dynamo_lite.testing import assert_same

X = torch.ones(2)


def scenario(fn, mutations, restore=None):
    opt = dynamo_lite.compile(fn, backend="eager")
    try:
        for i, mut in enumerate([None, *mutations]):
            if mut is not None:
                mut()
            assert_same(fn(X.clone()), opt(X.clone()), f"after mutation #{i}")
    finally:
        if restore is not None:
            restore()


def helper(x):
    return x + 1


def _other(x):
    return x * 100


def test_global_function_rebound():
    def f(x):
        return helper(x)

    def rebind():
        globals()["helper"] = _other

    scenario(f, [rebind], restore=lambda: globals().__setitem__("helper", _helper_orig))


_helper_orig = helper


def test_function_defaults_changed():
    def g(x, k=2):
        return x * k

    def f(x):
        return g(x)

    def mut():
        g.__defaults__ = (5,)

    scenario(f, [mut])


def test_function_code_replaced():
    def g(x):
        return x + 1

    def f(x):
        return g(x)

    def mut():
        g.__code__ = (lambda x: x - 50).__code__

    scenario(f, [mut])


class _Obj:
    pass


def test_nested_attribute_changed_and_replaced():
    obj = _Obj()
    obj.inner = _Obj()
    obj.inner.scale = 2.0

    def f(x):
        return x * obj.inner.scale

    def m1():
        obj.inner.scale = 3.0

    def m2():
        obj.inner = _Obj()
        obj.inner.scale = 7.0

    scenario(f, [m1, m2])


LST = [1, 2]
DCT = {"a": 1}
SET = {1, 2}
TUP = (1, (2, 3))


def _restore_containers():
    globals().update(LST=[1, 2], DCT={"a": 1}, SET={1, 2}, TUP=(1, (2, 3)))


def test_global_containers_changed_in_place():
    def f(x):
        return x * LST[0] + len(LST) + DCT["a"] * len(DCT) + len(SET) * (3 in SET) + TUP[1][0]

    scenario(f, [lambda: LST.__setitem__(0, 9), lambda: LST.append(3), lambda: DCT.__setitem__("a", 4),
                 lambda: DCT.__setitem__("b", 4), lambda: SET.add(3),
                 lambda: globals().__setitem__("TUP", (1, (5, 3)))], restore=_restore_containers)


def test_partial_keywords_changed():
    p = functools.partial(torch.add, alpha=2)

    def f(x):
        return p(x, x)

    scenario(f, [lambda: p.keywords.__setitem__("alpha", 5)])


class _A:
    def run(self, x):
        return x + 1


class _B:
    def run(self, x):
        return x * 10


def test_object_class_swapped():
    o = _A()

    def f(x):
        return o.run(x)

    def mut():
        o.__class__ = _B

    scenario(f, [mut])


def test_instance_method_bound_on_object():
    o = _A()

    def f(x):
        return o.run(x)

    def mut():
        o.run = types.MethodType(lambda self, x: x - 7, o)

    scenario(f, [mut])


def test_static_and_class_methods_replaced_on_class():
    class S:
        @staticmethod
        def h(x):
            return x + 1

        @classmethod
        def c(cls, x):
            return x * 2

    def f(x):
        return S.h(x) + S.c(x) + S().h(x)

    def m1():
        S.h = staticmethod(lambda x: x * 3)

    def m2():
        S.c = classmethod(lambda cls, x: x - 4)

    scenario(f, [m1, m2])


def test_property_replaced_on_class():
    class P:
        @property
        def v(self):
            return 2

    o = P()

    def f(x):
        return x * o.v

    def mut():
        P.v = property(lambda self: 5)

    scenario(f, [mut])


def test_inherited_class_attribute_changes():
    class Base:
        factor = 2

    class Sub(Base):
        pass

    s = Sub()

    def f(x):
        return x * s.factor + Base.factor + Sub().factor

    def m1():
        Sub.factor = 9

    def m2():
        del Sub.factor

    def m3():
        Base.factor = 11

    def m4():
        s.factor = 4  # instance attribute now shadows the class's

    scenario(f, [m1, m2, m3, m4])


def test_closure_cell_changed():
    k = 1

    def inner(t):
        return t + k

    def f(x):
        return inner(x)

    def mut():
        nonlocal k
        k = 50

    scenario(f, [mut])


class Color(enum.Enum):
    R = 1
    G = 2


CURRENT = Color.R


def test_enum_global_rebound():
    def f(x):
        return x + (1 if CURRENT == Color.R else 2)

    def mut():
        globals()["CURRENT"] = Color.G

    scenario(f, [mut], restore=lambda: globals().__setitem__("CURRENT", Color.R))


def test_dataclass_and_slots_fields_changed():
    @dataclasses.dataclass
    class DC:
        a: float = 1.0

    class Slots:
        __slots__ = ("v",)

    dc, sl = DC(), Slots()
    sl.v = 1

    def f(x):
        return x * dc.a + sl.v

    def m1():
        dc.a = 4.0

    def m2():
        sl.v = 6

    scenario(f, [m1, m2])


def test_ordered_dict_order_changed():
    od = collections.OrderedDict(a=1, bb=2)

    def f(x):
        return x * len(list(od)[0]) + od["a"]

    scenario(f, [lambda: od.move_to_end("a")])


def test_builtin_shadowed_by_global_then_restored():
    def f(x):
        return x * abs(-2)

    def shadow():
        globals()["abs"] = lambda v: 40

    def unshadow():
        del globals()["abs"]

    scenario(f, [shadow, unshadow], restore=lambda: globals().pop("abs", None))


def test_module_forward_replaced_on_instance():
    lin = torch.nn.Linear(2, 2)

    def f(x):
        return lin(x)

    def mut():
        lin.forward = lambda x: x * 1000

    scenario(f, [mut])


def test_module_class_attribute_and_submodule_swapped():
    class M(torch.nn.Module):
        scale = 2.0

        def __init__(self):
            super().__init__()
            self.act = torch.nn.ReLU()

        def forward(self, x):
            return self.act(x - 1.5) * self.scale

    m = M()

    def f(x):
        return m(x)

    def m1():
        M.scale = 5.0

    def m2():
        m.act = torch.nn.Tanh()

    scenario(f, [m1, m2])


def test_result_type_follows_the_default_dtype():
    # torch.result_type(int_tensor, 1.0) and of two numbers is the default dtype: answered at trace
    # time, it had no guard on it
    def f(x):
        return torch.result_type(torch.tensor(1), 1.0), torch.result_type(2, 0.5), x + 1

    old = torch.get_default_dtype()
    scenario(f, [lambda: torch.set_default_dtype(torch.float64), lambda: torch.set_default_dtype(torch.float32)],
             restore=lambda: torch.set_default_dtype(old))


def test_grad_mode_and_default_dtype_changes():
    def f(x):
        return x + (1 if torch.is_grad_enabled() else 2), torch.ones(1).dtype

    old = torch.get_default_dtype()
    scenario(f, [lambda: torch.set_grad_enabled(False), lambda: torch.set_grad_enabled(True),
                 lambda: torch.set_default_dtype(torch.float64)],
             restore=lambda: (torch.set_grad_enabled(True), torch.set_default_dtype(old)))


def test_deterministic_algorithms_flag():
    def f(x):
        return x * torch.are_deterministic_algorithms_enabled()

    scenario(f, [lambda: torch.use_deterministic_algorithms(True), lambda: torch.use_deterministic_algorithms(False)],
             restore=lambda: torch.use_deterministic_algorithms(False))


def test_torch_backend_flag_read_in_branch():
    def f(x):
        return x * (2 if torch.backends.cudnn.enabled else 3)

    def mut():
        torch.backends.cudnn.enabled = False

    scenario(f, [mut], restore=lambda: setattr(torch.backends.cudnn, "enabled", True))


# ---------------------------------------------------------------- tensor facts outside shape/stride/dtype

def _calls(fn, inputs):
    opt = dynamo_lite.compile(fn, backend="eager")
    for i, args in enumerate(inputs):
        assert_same(fn(*args), opt(*args), f"call #{i}")


def _inference_tensor():
    with torch.inference_mode():
        return torch.ones(2)


def _with_grad():
    t = torch.ones(2, requires_grad=True)
    t.grad = torch.full((2,), 3.0)
    return t


_BASE = torch.arange(3.0)
_CPLX = torch.tensor([1 + 2j, 3 - 1j])
TENSOR_FACTS = {
    "storage_offset": (lambda x: x + x.storage_offset(), [(_BASE[1:],), (_BASE[:-1],)]),
    "is_conj": (lambda x: (x * 1, x.is_conj()), [(_CPLX,), (_CPLX.conj(),)]),
    "is_neg": (lambda x: (x * 1, x.is_neg()), [(_CPLX,), (torch._neg_view(_CPLX),)]),
    "is_leaf": (lambda x: (x * 1, x.is_leaf), [(torch.ones(2, requires_grad=True),),
                                               (torch.ones(2, requires_grad=True) * 1,)]),
    "is_shared": (lambda x: (x * 1, x.is_shared()), [(torch.ones(2),), (torch.ones(2).share_memory_(),)]),
    "is_inference": (lambda x: (x + 1, x.is_inference()), [(torch.ones(2),), (_inference_tensor(),)]),
    "grad_is_none": (lambda x: x * 2 if x.grad is None else x * x.grad,
                     [(torch.ones(2, requires_grad=True),), (_with_grad(),)]),
    "expanded_strides": (lambda x: (x * 1, x.stride()), [(torch.ones(2, 2),), (torch.ones(1, 2).expand(2, 2),)]),
    "channels_last": (lambda x: (x * 1, x.is_contiguous(memory_format=torch.channels_last)),
                      [(torch.ones(1, 2, 1, 2),), (torch.ones(1, 2, 1, 2).contiguous(memory_format=torch.channels_last),)]),
}


@pytest.mark.parametrize("name", sorted(TENSOR_FACTS))
def test_tensor_fact_changes_between_calls(name):
    fn, inputs = TENSOR_FACTS[name]
    _calls(fn, inputs)


# ---------------------------------------------------------------- arguments of every kind changing between calls

_X = torch.ones(2)
ARGUMENT_CHANGES = {
    "numpy_and_python_scalars": (lambda x, s: (x * s, (x * s).dtype, type(s).__name__),
                                 [np.float32(1.5), np.float64(1.5), 1.5, np.int64(2), 2, True, np.bool_(True)]),
    "int_float_bool_same_value": (lambda x, s: (x.long() * s, (x.long() * s).dtype), [2, 2.0, True]),
    "bool_as_index": (lambda x, s: ([0, 1, 2][s], x * s), [True, 1]),
    "numpy_array_dtype_and_values": (lambda x, a: (x + torch.from_numpy(a).float() * float(a[0]), a.dtype.name),
                                     [np.ones(2, dtype=np.float32), np.full(2, 3.0), np.ones(2)]),
    "list_of_numbers_to_tensor": (lambda x, l: x + torch.tensor(l), [[1.0, 2.0], [3.0, 4.0], [1, 2]]),
    "nan_argument": (lambda x, s: x * s, [float("nan"), float("nan"), 1.0]),
    "signed_zero": (lambda x, s: (1 / (x * 0 + s), str(s)), [0.0, -0.0, 0.0]),
    "large_int": (lambda x, s: (x * (s % 7), s), [2 ** 70, 2 ** 70 + 1]),
    "string": (lambda x, s: x * len(s) if s.startswith("a") else x + 0, ["abc", "bcd", "ab"]),
    "none_or_value": (lambda x, s: x + 0 if s is None else x * s, [None, 3, None]),
    "tuple_of_mixed_numbers": (lambda x, t: x * t[0] + t[1], [(1, 2.0), (1.0, 2), (True, 2)]),
    "complex_number": (lambda x, c: (x * c.real, c), [1 + 2j, 1 - 2j]),
    "dtype": (lambda x, d: x.to(d), [torch.float64, torch.int32]),
    "device": (lambda x, d: x.to(d) * 1, [torch.device("cpu"), "cpu", torch.device("meta")]),
    "slice": (lambda x, s: x[s] * 1, [slice(0, 1), slice(1, 2), slice(None)]),
    "range": (lambda x, r: [x * i for i in r], [range(2), range(3), range(1, 3)]),
    "bytes": (lambda x, b: x * len(b), [b"ab", b"abc"]),
    "frozenset": (lambda x, s: x * len(s), [frozenset({1}), frozenset({1, 2})]),
    "ellipsis_or_int": (lambda x, e: x[e] * 1, [..., 0]),
    "class": (lambda x, t: x * (2 if t is int else 3), [int, float]),
    "function": (lambda x, f: f(x), [torch.sin, torch.cos, lambda t: t * 5]),
    "module": (lambda x, m: m(x - 0.5), [torch.nn.ReLU(), torch.nn.Tanh()]),
}


@pytest.mark.parametrize("name", sorted(ARGUMENT_CHANGES))
def test_argument_kind_changes_between_calls(name):
    fn, values = ARGUMENT_CHANGES[name]
    _calls(fn, [(_X, v) for v in values])


# ---------------------------------------------------------------- attributes that were missing appear later

class _Plain:
    pass


class _WithGetattr:
    def __getattr__(self, name):
        if name == "dyn":
            return 5
        raise AttributeError(name)


@pytest.mark.parametrize("make", [_Plain, _WithGetattr, lambda: torch.nn.Linear(1, 1)],
                         ids=["object", "object_with___getattr__", "module"])
def test_hasattr_and_getattr_default_follow_attribute_added_later(make):
    obj = make()

    def f(x):
        return x + hasattr(obj, "zzz"), x * getattr(obj, "zzz", 10)

    def add():
        obj.zzz = 3

    def add_param():
        if isinstance(obj, torch.nn.Module):
            del obj.zzz
            obj.zzz = torch.nn.Parameter(torch.ones(1))

    scenario(f, [add, add_param])


@pytest.mark.parametrize("make", [_Plain, lambda: torch.nn.Linear(1, 1)], ids=["object", "module"])
def test_hasattr_and_getattr_default_follow_the_class_gaining_the_attribute(make):
    obj = make()
    cls = type(obj) if not isinstance(obj, torch.nn.Module) else type("Sub", (torch.nn.Linear,), {})
    if isinstance(obj, torch.nn.Module):
        obj.__class__ = cls

    def f(x):
        return x + hasattr(obj, "zzz"), x * getattr(obj, "zzz", 10)

    def add_to_class():
        cls.zzz = 3

    def add_property():
        cls.zzz = property(lambda self: 4)

    scenario(f, [add_to_class, add_property], restore=lambda: delattr(cls, "zzz"))


def test_getattr_default_follows_a_getattr_set_on_the_class():
    class Late:
        pass

    obj = Late()

    def f(x):
        return x * getattr(obj, "zzz", 10)

    def add_getattr():
        Late.__getattr__ = lambda self, name: 7

    scenario(f, [add_getattr])


class _Slotted:
    __slots__ = ("a",)


class _SlottedChild(_Slotted):
    __slots__ = ("b",)


@pytest.mark.parametrize("make", [_Slotted, _SlottedChild])
def test_objects_with_slots_only_have_no_dict(make):
    def f(x, obj):
        try:
            d = obj.__dict__
        except AttributeError as e:
            d = str(e)
        return x + 1, d, hasattr(obj, "__dict__")

    opt = dynamo_lite.compile(f, backend="eager")
    for _ in range(2):
        assert_same(f(torch.ones(1), make()), opt(torch.ones(1), make()))


def test_getattr_default_counter_on_object():
    class Holder:
        pass

    h = Holder()

    def f(x):
        h.calls = getattr(h, "calls", 0) + 1
        return x * h.calls

    opt = dynamo_lite.compile(f, backend="eager")
    assert [opt(torch.ones(1)).item() for _ in range(3)] == [1.0, 2.0, 3.0]


def test_method_code_replaced():
    class C:
        def get(self, x):
            return x + 1

    obj = C()

    def f(x):
        return obj.get(x)

    def mut():
        C.get.__code__ = (lambda self, x: x - 50).__code__

    scenario(f, [mut])


class _Inner(torch.nn.Module):
    scale = 2.0

    def forward(self, x):
        return x * self.scale

    def extra(self, x):
        return x + 1


class _Outer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = _Inner()

    def forward(self, x):
        return self.inner.extra(self.inner(x))


def _restore_inner(forward=_Inner.forward, extra=_Inner.extra):
    _Inner.forward, _Inner.extra, _Inner.scale = forward, extra, 2.0


@pytest.mark.parametrize("mutation", ["class_forward", "class_method", "class_attribute", "subclass_forward"])
def test_submodule_class_changed_after_compile(mutation):
    model = _Outer()
    if mutation == "subclass_forward":
        model.inner.__class__ = type("_Sub", (_Inner,), {})  # forward inherited: replaced on the subclass
    muts = {
        "class_forward": lambda: setattr(_Inner, "forward", lambda self, x: x - 100),
        "class_method": lambda: setattr(_Inner, "extra", lambda self, x: x * 7),
        "class_attribute": lambda: setattr(_Inner, "scale", -3.0),
        "subclass_forward": lambda: setattr(type(model.inner), "forward", lambda self, x: x + 40),
    }

    def f(x):
        return model(x)

    scenario(f, [muts[mutation]], restore=_restore_inner)


def test_compiled_module_follows_its_class_forward():
    model = _Inner()
    opt = dynamo_lite.compile(model, backend="eager")
    try:
        assert_same(model(X), opt(X))
        _Inner.forward = lambda self, x: x - 100
        assert_same(model(X), opt(X))
        assert torch.equal(opt(X), X - 100)
    finally:
        _restore_inner()


def test_builtin_replaced_in_the_builtins_module():
    import builtins
    original = builtins.abs

    def f(x):
        return x + abs(-3)

    def patch():
        builtins.abs = lambda v: 1000

    scenario(f, [patch], restore=lambda: setattr(builtins, "abs", original))


def test_math_constant_replaced():
    import math
    original = math.pi

    def f(x):
        return x * math.pi

    def patch():
        math.pi = 3.0

    scenario(f, [patch], restore=lambda: setattr(math, "pi", original))


def test_method_reached_through_super_replaced_or_its_defaults_changed():
    class A:
        def f(self, x, z=1):
            return x + z

    class B(A):
        def f(self, x):
            return super().f(x)

    b = B()

    def f(x):
        return b.f(x)

    def new_defaults():
        A.f.__defaults__ = (5,)

    def replace():
        A.f = lambda self, x: x + 100

    scenario(f, [new_defaults, replace])


def test_call_of_an_object_whose_class_call_is_replaced():
    class K:
        def __call__(self, x, z=1):
            return x * z

    k = K()

    def f(x):
        return k(x)

    def new_defaults():
        K.__call__.__defaults__ = (9,)

    def replace():
        K.__call__ = lambda self, x: x + 10

    scenario(f, [new_defaults, replace])


def test_autocast_entered_outside_the_compiled_function():
    def f(x, w):
        return x @ w, (x @ w).dtype

    opt = dynamo_lite.compile(f, backend="eager")
    a = torch.ones(2, 2)
    assert_same(opt(a, a), f(a, a))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert_same(opt(a, a), f(a, a))
    assert_same(opt(a, a), f(a, a))


def test_isinstance_with_a_metaclass_instancecheck():
    class Meta(type):
        def __instancecheck__(cls, obj):
            return getattr(obj, "quacks", False)

    class Duck(metaclass=Meta):
        pass

    class K:
        quacks = True

    def f(x, k):
        return x + 1 if isinstance(k, Duck) else x - 1, isinstance(k, (int, Duck))

    opt = dynamo_lite.compile(f, backend="eager")
    for k in (K(), object(), K()):
        assert_same(opt(X.clone(), k), f(X.clone(), k))


def test_module_attribute_absent_then_added():
    mod = types.ModuleType("dl_test_late_attribute")

    def f(x):
        return x + getattr(mod, "X", 0) + hasattr(mod, "Y")

    def add():
        mod.X = 3

    def add_other():
        mod.Y = 1

    def add_module_getattr():
        mod.__getattr__ = lambda name: 10

    scenario(f, [add, add_other, add_module_getattr])


class _WithNoneFlag:
    flag = None


class _InheritsNoneFlag(_WithNoneFlag):
    pass


class _Empty:
    pass


class _Single:
    _inst = None

    def __new__(cls):
        if cls._inst is None:
            cls._inst = object.__new__(cls)
        return cls._inst


def test_class_attributes_that_are_none_or_absent_are_guarded():
    # a class attribute whose value is None (and one the class lacks) was read without a guard:
    # after `K.flag = 5` (or `K.x = 1`) the compiled call took the branch of the first call, and a
    # singleton's `if cls._inst is None` made a new object on every call
    import torch

    def flag_of(cls, obj, t):
        a = t + 1 if cls.flag is None else t - 1
        b = t * 2 if type(obj).flag is None else t * 3
        c = t + 10 if hasattr(_Empty, "x") else t - 10
        d = t * 5 if getattr(_Empty, "y", None) is None else t * 7
        return a, b, c, d

    def single(t):
        a, b = _Single(), _Single()
        return a is b, _Single._inst is a, t + 1

    compiled = dynamo_lite.compile(flag_of, backend="eager")
    compiled_single = dynamo_lite.compile(single, backend="eager")
    obj = _InheritsNoneFlag()
    try:
        for change in (None, lambda: setattr(_WithNoneFlag, "flag", 5),
                       lambda: (setattr(_Empty, "x", 1), setattr(_Empty, "y", 2))):
            if change is not None:
                change()
            for a, b in zip(compiled(_WithNoneFlag, obj, torch.zeros(1)), flag_of(_WithNoneFlag, obj, torch.zeros(1))):
                assert torch.equal(a, b)
        _Single._inst = None
        assert compiled_single(torch.zeros(1))[:2] == (True, True)
        first = _Single._inst
        assert compiled_single(torch.zeros(1))[:2] == (True, True) and _Single._inst is first
    finally:
        _WithNoneFlag.flag = None
        for name in ("x", "y"):
            if name in vars(_Empty):
                delattr(_Empty, name)


class _Act(enum.Enum):
    RELU = "relu"
    GELU = "gelu"


_ACTS = {_Act.RELU: torch.relu, _Act.GELU: torch.nn.functional.gelu}
_SCALES = {torch.relu: 1.0, torch.tanh: 2.0}


def test_tables_keyed_by_enum_members_or_functions_are_read_without_a_break_and_follow_changes():
    # a registry keyed by Enum members or by functions broke the graph at every lookup
    # (`__getitem__ of dict object is not supported`); torch.compile reads it
    from dynamo_lite.testing import check_breaks

    def act(x, a):
        return _ACTS[a](x) * _SCALES.get(torch.relu, 0.0), _Act.GELU in _ACTS, len(_ACTS)

    check_breaks(act, X, _Act.GELU, breaks=0)
    old_acts, old_scales = dict(_ACTS), dict(_SCALES)
    try:
        scenario(lambda x: act(x, _Act.RELU),
                 [lambda: _ACTS.__setitem__(_Act.RELU, torch.tanh), lambda: _SCALES.__setitem__(torch.relu, 3.0),
                  lambda: _ACTS.pop(_Act.GELU)])
    finally:
        _ACTS.clear(), _ACTS.update(old_acts), _SCALES.clear(), _SCALES.update(old_scales)
