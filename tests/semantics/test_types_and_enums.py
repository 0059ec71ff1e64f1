"""isinstance/type checks, enums and typing constructs, eager vs compiled.

Every test compares compiled with eager through dynamo_lite.testing; known bugs are strict
xfails in tests/test_known_bugs.py.
"""
import enum
import typing

import torch

from dynamo_lite.testing import check_calls


def t(*vals):
    return torch.tensor([float(v) for v in vals])


X1, X2 = (t(1, 2, 3),), (t(-4, 5, 0.5, 2),)


# ---------------------------------------------------------------- isinstance / types

def test_isinstance_tensor_vs_parameter():
    def f(x, p):
        return (isinstance(x, torch.Tensor), isinstance(x, torch.nn.Parameter),
                isinstance(p, torch.Tensor), isinstance(p, torch.nn.Parameter),
                type(p) is torch.nn.Parameter, type(x).__name__, x * p)

    check_calls(f, [(t(1, 2), torch.nn.Parameter(t(3, 4))), (t(1, 2), t(3, 4))])


def test_parameter_arith_type():
    def f(p):
        y = p * 2
        return type(y).__name__, y.requires_grad, isinstance(y, torch.nn.Parameter), p.requires_grad

    check_calls(f, [(torch.nn.Parameter(t(1, 2)),), (torch.nn.Parameter(t(1, 2), requires_grad=False),)])


# ---------------------------------------------------------------- enums / typing

class Mode(enum.Enum):
    TRAIN = "train"
    EVAL = "eval"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Flags(enum.Flag):
    A = 1
    B = 2


def test_enum_branches_and_dict_keys():
    table = {Mode.TRAIN: 2.0, Mode.EVAL: 0.5}

    def f(x, mode, lvl):
        y = x * table[mode]
        if mode is Mode.TRAIN:
            y = y + 1
        if lvl > Level.LOW:
            y = y * lvl
        return y, mode.value, mode.name, lvl + 1, Level(lvl) is lvl, str(mode), repr(lvl)

    check_calls(f, [(X1[0], Mode.TRAIN, Level.LOW), (X1[0], Mode.EVAL, Level.HIGH), (X1[0], Mode.EVAL, 2)])


def test_enum_iteration_and_lookup():
    def f(x):
        names = [m.name for m in Mode]
        by_val = Mode("eval")
        return x * len(names), names, by_val, Level["HIGH"], Flags.A | Flags.B, Mode.TRAIN in Mode

    check_calls(f, [X1])


def test_intenum_as_tensor_index_and_arith():
    def f(x, lvl):
        return x[lvl], x * lvl, torch.full((2,), lvl), lvl * 1.5

    check_calls(f, [(X1[0], Level.LOW), (X1[0], Level.HIGH)])


class Pair(typing.NamedTuple):
    a: torch.Tensor
    b: int = 3

    def total(self):
        return self.a * self.b


class Cfg(typing.TypedDict):
    scale: float
    name: str


def test_namedtuple_class():
    def f(x):
        p = Pair(x)
        q = p._replace(b=x.shape[0])
        a, b = q
        return p.total(), q, b, q._asdict()["b"], Pair._fields, p[1], len(p)

    check_calls(f, [X1, X2])


def test_namedtuple_as_input_and_print():
    def f(p):
        print(p.b)
        return Pair(p.a + 1, p.b * 2)

    check_calls(f, [(Pair(t(1, 2), 4),), (Pair(t(0), 1),)])


def test_typeddict_and_optional():
    def g(x: torch.Tensor, bias: typing.Optional[torch.Tensor] = None) -> torch.Tensor:
        return x if bias is None else x + bias

    def f(x, cfg: Cfg):
        c = Cfg(scale=cfg["scale"] * 2, name=cfg["name"])
        return g(x) * c["scale"], g(x, x), c, type(c).__name__

    check_calls(f, [(X1[0], {"scale": 1.5, "name": "n"}), (X2[0], {"scale": -1.0, "name": "m"})])


def test_typing_cast_and_annotations():
    def f(x: "torch.Tensor") -> typing.List[int]:
        y: int = typing.cast(int, x.shape[0])
        z: typing.Union[int, None] = None
        return [y, z is None], typing.cast(torch.Tensor, x) * 2

    check_calls(f, [X1, X2])


class _Perm(enum.Flag):
    READ = enum.auto()
    WRITE = enum.auto()
    EXEC = enum.auto()


def test_flag_membership_in_a_combination():
    def f(x, mode):
        rw = _Perm.READ | _Perm.WRITE
        return x * (2 if mode in rw else 3), _Perm.EXEC in rw, (rw & _Perm.READ) in rw, rw

    check_calls(f, [(torch.ones(3), _Perm.READ), (torch.ones(3), _Perm.EXEC)])


class _Colormap(enum.Enum):
    """kornia's ColorMapType: members whose methods and properties are Python code."""
    AUTUMN = 1
    BONE = 2

    def base(self, scale=1.0):
        return {"AUTUMN": lambda: [1.0, 0.5], "BONE": lambda: [0.25]}[self.name]() + [scale]

    @property
    def size(self):
        return len(self.base())

    @classmethod
    def names(cls):
        return [c.name for c in cls]


class _Scale(enum.IntEnum):
    ONE = 1
    TWO = 2

    def doubled(self):
        return self * 2


def test_methods_and_properties_of_an_enum_are_traced_without_a_break():
    from dynamo_lite.testing import check_breaks

    def f(x, name, member, level):
        if name not in _Colormap.names():
            raise ValueError(name)
        return x * len(_Colormap[name].base(2.0)), member.size, member.base(), level.doubled()

    check_breaks(f, X1[0], "BONE", _Colormap.AUTUMN, _Scale.TWO, breaks=0)
    check_calls(f, [(X1[0], "BONE", _Colormap.AUTUMN, _Scale.TWO), (X1[0], "AUTUMN", _Colormap.BONE, _Scale.ONE)],
                graphs=None)


def test_replacing_an_enum_method_between_calls_recompiles():
    def f(x):
        return x * len(_Colormap.BONE.base())

    def swap():
        _Colormap.base = lambda self, scale=1.0: [1.0, 2.0, 3.0]

    original = _Colormap.base
    try:
        check_calls(f, [X1, {"args": lambda: (swap(), X1[0])[1:]}, X1], interleave=False,
                    reset=lambda: setattr(_Colormap, "base", original))
    finally:
        _Colormap.base = original


def test_in_none_raises_type_error_the_code_catches():
    # sklearn's _unique: ``"unique" in y.dtype.metadata`` inside try/except TypeError (metadata None)
    def f(x, meta):
        try:
            return x + ("unique" in meta)
        except TypeError as e:
            return x - 1, str(e)

    check_calls(f, [(X1[0], None)], graphs=None)
