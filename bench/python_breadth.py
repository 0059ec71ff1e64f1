"""Python breadth: builtins, stdlib modules and torch's Python-level APIs, dynamo_lite vs torch.compile.

Each case is a small function of one tensor ``x``: one tensor op plus one Python feature (a
builtin, a method of str/bytes/list/dict/set/tuple, a standard-library helper real model code
uses, or a torch Python-level API). Every case runs eagerly, through dynamo_lite and through
torch.compile (both with a counting "eager" backend, in one process): graphs and breaks come from
each system's ``explain``; the compiled function is then called twice (the trace, then a cache
hit) and both results are compared with eager's (dynamo_lite.testing's comparison; an exception
must have eager's type). Printed: one row per case where dynamo_lite makes more graphs or breaks
than torch.compile or differs from eager (with our first break reason), then the totals.

    python bench/python_breadth.py [--quick] [--verbose] [--only SUBSTRING]
Covered by tests/robustness/test_bench_smoke.py (quick mode); the numbers are in docs/testing.md.
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import copy
import dataclasses
import enum
import functools
import inspect
import io
import itertools
import math
import operator
import os
import random
import re
import string
import sys
import textwrap
import typing
import warnings

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import dynamo_lite  # noqa: E402
from dynamo_lite.testing import results_differ as differs  # noqa: E402


# ---- helpers the cases use (module-level, as in real model code) ----

@dataclasses.dataclass
class Point:
    a: int
    b: float = 2.0


@dataclasses.dataclass(frozen=True)
class FrozenPoint:
    a: int
    b: int


class Color(enum.Enum):
    RED = 1
    GREEN = 2


class Perm(enum.Flag):
    R = 1
    W = 2
    X = 4


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 3


class NT(typing.NamedTuple):
    a: int
    b: int = 5


Pair = collections.namedtuple("Pair", "a b")


class Base:
    def scale(self):
        return 2


class Child(Base):
    def scale(self):
        return super().scale() + 1


class Cached:
    @functools.cached_property
    def value(self):
        return 3


class Slotted:
    __slots__ = ("a",)

    def __init__(self, a):
        self.a = a


class Ordered:
    def __init__(self, v):
        self.v = v

    def __lt__(self, other):
        return self.v < other.v


@functools.singledispatch
def dispatch(v):
    return 0


@dispatch.register(int)
def _(v):
    return 1


@dispatch.register(float)
def _(v):
    return 2


@functools.lru_cache(maxsize=None)
def cached_double(n):
    return n * 2


def annotated(a: int, b: float = 1.0) -> float:
    return a * b


def decorate(fn):
    @functools.wraps(fn)
    def inner(*args):
        return fn(*args) + 1
    return inner


@decorate
def decorated(t):
    return t * 2


@contextlib.contextmanager
def user_cm(log):
    log.append("enter")
    yield 2
    log.append("exit")


PATTERN = re.compile(r"layer\.(\d+)\.weight")
SHAPE = re.compile(r"(\d+)x(\d+)")


# ---- the corpus ----
# One-expression cases: "name | expression of x". Multi-statement cases follow as functions.
EXPRESSIONS = r"""
abs | x * abs(-3)
abs_shape | x * abs(x.shape[0] - 10)
all_list | x * all([1, 2, 3])
all_gen | x * all(d > 0 for d in x.shape)
any_list | x + any([0, 0, 1])
any_gen | x + any(d > 3 for d in x.shape)
ascii | x * len(ascii("h\u00e9llo"))
bin | x * len(bin(x.shape[0]))
bool_int | x * bool(x.shape[1])
bool_list | x + bool([])
bytes_n | x * len(bytes(3))
bytes_list | x * bytes([1, 2, 3])[1]
bytearray | x * bytearray(b"ab")[0]
callable_fn | x * callable(torch.relu)
callable_int | x * callable(3)
chr_ord | x * ord(chr(65 + x.shape[0]))
complex_imag | x * complex(1, 2).imag
divmod_int | x * divmod(x.shape[0], 3)[1]
divmod_float | x * divmod(7.5, 2)[0]
enumerate_rows | sum(i * r for i, r in enumerate(x))
enumerate_start | x * [i for i, _ in enumerate(x.shape, 1)][-1]
filter_none | x * len(list(filter(None, [0, 1, 2, 0])))
filter_lambda | x * sum(filter(lambda d: d > 3, x.shape))
float_str | x * float("1.5")
float_inf | x.clamp(max=float("inf"))
format_float | x * len(format(3.14159, ".2f"))
format_int | x * int(format(x.shape[0], "03d"))
frozenset_len | x * len(frozenset([1, 2, 2]))
frozenset_or | x * len(frozenset({1, 2}) | frozenset({3}))
getattr_method | getattr(x, "sum")()
getattr_default | x * getattr(x, "missing", 2)
hasattr_yes | x * hasattr(x, "shape")
hasattr_no | x * hasattr(x, "missing")
hash_int | x * (hash(3) == 3)
hash_str | x * (hash("ab") == hash("ab"))
hash_tuple | x * (hash((1, 2)) == hash((1, 2)))
hex | x * len(hex(255))
id_same | x * (id(x) == id(x))
int_str | x * int("12")
int_base | x * int("ff", 16)
int_float | x * int(2.7)
isinstance_tensor | x * isinstance(x, torch.Tensor)
isinstance_tuple | x * isinstance(3, (float, int))
issubclass | x * issubclass(bool, int)
iter_next | next(iter(x))
len_tensor | x * len(x)
list_tensor | list(x)[0] * 2
map_lambda | sum(map(lambda r: r * 2, x))
map_two | x * sum(map(operator.mul, [1, 2], [3, 4]))
max_shape | x * max(x.shape)
max_key | x * max([3, 1, 2], key=lambda v: -v)
max_default | x * max([], default=5)
min_args | x * min(3, 4, 1)
next_default | x * next(iter([]), 7)
oct | x * len(oct(8))
ord | x * ord("a")
pow_int | x * pow(2, 3)
pow_mod | x * pow(3, 4, 5)
pow_neg | x * pow(2, -1)
range_sum | x * sum(range(x.shape[0]))
range_len | x * len(range(0, 10, 3))
range_index | x * range(10)[3]
range_slice | x * range(10)[2:8:2][1]
range_contains | x * (3 in range(0, 10, 3))
repr_float | x * len(repr(1.5))
repr_list | x * len(repr([1, "a"]))
reversed_rows | torch.stack(list(reversed(list(x))))
reversed_range | x * list(reversed(range(3)))[0]
round_digits | x * round(2.567, 1)
round_neg | x * round(7, -1)
round_half | x * round(2.5)
set_len | x * len(set([1, 2, 2, 3]))
set_and | x * len({1, 2} & {2, 3})
slice_index | x[slice(1, 3)]
slice_attr | x * slice(1, 5, 2).stop
slice_indices | x * slice(None, None, 2).indices(7)[1]
sorted_list | x * sorted([3, 1, 2])[0]
sorted_key | x * len(sorted(["bb", "a", "ccc"], key=len)[0])
sorted_reverse | x * sorted(x.shape, reverse=True)[0]
sorted_objects | x * sorted([Ordered(3), Ordered(1)])[0].v
str_int | x * len(str(x.shape[0]))
str_float | x * len(str(1.25))
sum_tensors | sum([x, x, x])
sum_start | x * sum([1, 2], 10)
tuple_list | x * tuple([1, 2])[1]
type_is | x * (type(x) is torch.Tensor)
type_name | x * len(type(3).__name__)
vars_obj | x * len(vars(Point(1)))
zip_rows | sum(a * b for a, b in zip(x, [1, 2, 3, 4]))
zip_strict | x * len(list(zip([1, 2], [3, 4], strict=True)))
dict_kwargs | x * dict(a=1, b=2)["b"]
dict_zip | x * dict(zip("ab", [1, 2]))["b"]
object_new | x * (object() is not None)
super_method | x * Child().scale()
isinstance_dataclass | x * isinstance(Point(1), Point)
str_upper | x * len("abc".upper())
str_split | x * len("a,b,c".split(","))
str_join | x * len("-".join(["a", "b"]))
str_replace | x * len("hello".replace("l", "LL"))
str_startswith | x * "model.layer".startswith("model")
str_endswith_tuple | x * "w.bias".endswith(("bias", "gamma"))
str_find | x * "abcdef".find("d")
str_strip | x * len("  ab  ".strip())
str_format | x * len("{}-{}".format(1, 2))
str_format_named | x * len("{a}/{b:>4}".format(a=1, b="z"))
fstring_shape | x * len(f"{x.shape[0]}x{x.shape[1]}")
fstring_spec | x * len(f"{3.14159:.2f}")
fstring_repr | x * len(f"{'a'!r}")
str_percent | x * len("%d-%s" % (3, "a"))
str_isdigit | x * "123".isdigit()
str_count | x * "banana".count("a")
str_partition | x * len("k=v".partition("=")[2])
str_zfill | x * int("7".zfill(3))
str_encode | x * len("h\u00e9llo".encode())
str_title | x * ("ab cd".title() == "Ab Cd")
str_in | x * ("b" in "abc")
str_mul | x * len("ab" * 3)
str_index | x * ord("abc"[1])
str_rsplit | x * len("a.b.c".rsplit(".", 1)[0])
str_removeprefix | x * len("model.fc".removeprefix("model."))
str_lower_cmp | x * ("ReLU".lower() == "relu")
str_casefold | x * len("Stra\u00dfe".casefold())
str_center | x * len("a".center(5, "*"))
str_splitlines | x * len("a\nb\nc".splitlines())
str_isidentifier | x * "fc1".isidentifier()
str_maketrans | x * len("abc".translate(str.maketrans("a", "x")))
bytes_decode | x * len(b"abc".decode())
bytes_hex | x * len(b"ab".hex())
bytes_split | x * b"a,b".split(b",")[1][0]
bytes_fromhex | x * bytes.fromhex("0a0b")[1]
int_from_bytes | x * int.from_bytes(b"\x01\x02", "big")
int_to_bytes | x * (5).to_bytes(2, "little")[0]
int_bit_length | x * (x.shape[0]).bit_length()
float_is_integer | x * (2.0).is_integer()
float_as_ratio | x * (0.5).as_integer_ratio()[1]
tuple_count | x * (1, 2, 1).count(1)
tuple_index | x * (1, 2, 3).index(3)
tuple_concat | x * len((1, 2) + (3,))
tuple_cmp | x * ((1, 2) < (1, 3))
list_index | x * [4, 5, 6].index(5)
list_count | x * [1, 1, 2].count(1)
list_mul | x * len([0] * 4)
list_slice_step | x * [1, 2, 3, 4][::2][1]
dict_get | x * {"a": 1}.get("b", 3)
dict_items | x * sum(v for _, v in {"a": 1, "b": 2}.items())
dict_keys_list | x * len(list({"a": 1, "b": 2}.keys()))
dict_merge | x * len({"a": 1} | {"b": 2})
dict_fromkeys | x * len(dict.fromkeys("abc", 0))
dict_in | x * ("a" in {"a": 1})
set_union | x * len({1}.union([2, 3]))
set_issubset | x * {1}.issubset({1, 2})
set_difference | x * len({1, 2, 3} - {2})
set_symdiff | x * len({1, 2} ^ {2, 3})
math_sqrt | x * math.sqrt(x.shape[1])
math_floor_ceil | x * (math.floor(2.5) + math.ceil(2.5))
math_prod | x * math.prod(x.shape)
math_isclose | x * math.isclose(0.1 + 0.2, 0.3)
math_log_exp | x * math.log(math.exp(2.0))
math_pi | x * math.pi
math_inf | x.clamp(max=math.inf)
math_gcd_lcm | x * (math.gcd(12, 18) + math.lcm(4, 6))
math_isfinite | x * math.isfinite(1.0)
math_comb | x * math.comb(5, 2)
math_factorial | x * math.factorial(4)
math_fsum | x * math.fsum([0.1] * 10)
math_trunc | x * math.trunc(-2.7)
math_copysign | x * math.copysign(2, -1)
math_hypot | x * math.hypot(3, 4)
math_isqrt | x * math.isqrt(17)
math_log2 | x * math.log2(x.shape[0])
math_radians | x * math.radians(180)
math_erf | x * math.erf(0.5)
math_nan | x * math.isnan(math.nan)
random_random | x * random.random()
random_randint | x * random.randint(1, 6)
random_choice | x * random.choice([1, 2, 3])
random_uniform | x * random.uniform(0, 1)
random_instance | x * random.Random(0).random()
functools_reduce | functools.reduce(operator.add, [x, x, x])
functools_reduce_init | x * functools.reduce(lambda a, b: a * b, x.shape, 1)
functools_partial | functools.partial(torch.add, alpha=2)(x, x)
functools_partial_user | functools.partial(annotated, 2)(b=3.0) * x
functools_cached_property | x * Cached().value
functools_singledispatch | x * (dispatch(1) + dispatch(1.0) + dispatch("a"))
functools_lru_cache | x * cached_double(3)
functools_wraps | decorated(x)
functools_cmp_to_key | x * sorted([3, 1, 2], key=functools.cmp_to_key(lambda a, b: b - a))[0]
itertools_chain | x * sum(itertools.chain([1, 2], (3,)))
itertools_chain_from | x * len(list(itertools.chain.from_iterable([[1], [2, 3]])))
itertools_product | x * len(list(itertools.product(range(2), repeat=2)))
itertools_permutations | x * len(list(itertools.permutations([1, 2, 3], 2)))
itertools_combinations | x * len(list(itertools.combinations(range(4), 2)))
itertools_combinations_wr | x * len(list(itertools.combinations_with_replacement(range(3), 2)))
itertools_accumulate | x * list(itertools.accumulate([1, 2, 3]))[-1]
itertools_accumulate_fn | x * list(itertools.accumulate([1, 2, 3], operator.mul))[-1]
itertools_islice | x * sum(itertools.islice(itertools.count(), 4))
itertools_repeat | sum(itertools.repeat(x, 3))
itertools_cycle | x * sum(itertools.islice(itertools.cycle([1, 2]), 5))
itertools_zip_longest | x * len(list(itertools.zip_longest([1], [2, 3], fillvalue=0)))
itertools_groupby | x * len([k for k, _ in itertools.groupby("aabbc")])
itertools_starmap | x * sum(itertools.starmap(pow, [(2, 2), (3, 2)]))
itertools_takewhile | x * len(list(itertools.takewhile(lambda v: v < 3, [1, 2, 3, 1])))
itertools_dropwhile | x * len(list(itertools.dropwhile(lambda v: v < 3, [1, 2, 3, 1])))
itertools_compress | x * sum(itertools.compress([1, 2, 3], [1, 0, 1]))
itertools_pairwise | x * len(list(itertools.pairwise([1, 2, 3])))
itertools_filterfalse | x * sum(itertools.filterfalse(lambda v: v % 2, range(5)))
itertools_tee | x * sum(itertools.tee([1, 2])[1])
itertools_pairwise_rows | sum(b - a for a, b in itertools.pairwise(x))
collections_ordereddict | x * list(collections.OrderedDict([("a", 1), ("b", 2)]).values())[1]
collections_counter | x * collections.Counter("abca")["a"]
collections_counter_most | x * collections.Counter("abca").most_common(1)[0][1]
collections_deque | x * collections.deque([1, 2, 3], maxlen=2)[0]
collections_namedtuple | x * Pair(1, 2).b
collections_namedtuple_asdict | x * len(Pair(1, 2)._asdict())
collections_namedtuple_replace | x * Pair(1, 2)._replace(a=5).a
collections_chainmap | x * collections.ChainMap({"a": 1}, {"a": 2, "b": 3})["b"]
typing_namedtuple | x * NT(1).b
operator_add | operator.add(x, 1)
operator_getitem | operator.getitem(x, 0)
operator_itemgetter | operator.itemgetter(0, 2)(x)[1]
operator_itemgetter_dict | x * operator.itemgetter("b")({"a": 1, "b": 2})
operator_attrgetter | operator.attrgetter("shape")(x)[0] * x
operator_attrgetter_dotted | x * operator.attrgetter("a.b")(Point(Point(1, 3.0)))
operator_methodcaller | operator.methodcaller("sum", 0)(x)
operator_neg | operator.neg(x)
operator_truediv | operator.truediv(x, 2)
operator_index | x * operator.index(3)
operator_contains | x * operator.contains([1, 2], 2)
operator_not | x * operator.not_(0)
operator_is | x * operator.is_(None, None)
operator_matmul | operator.matmul(x, x.T)
copy_copy_list | x * len(copy.copy([1, 2]))
copy_deepcopy_dict | x * copy.deepcopy({"a": [1]})["a"][0]
copy_copy_dataclass | x * copy.copy(Point(4)).a
copy_copy_tensor | copy.copy(x) + 1
copy_deepcopy_tensor | copy.deepcopy(x) + 1
dataclasses_fields | x * len(dataclasses.fields(Point))
dataclasses_fields_names | x * len([f.name for f in dataclasses.fields(Point(1))])
dataclasses_replace | x * dataclasses.replace(Point(1), a=5).a
dataclasses_asdict | x * dataclasses.asdict(Point(1))["b"]
dataclasses_astuple | x * dataclasses.astuple(Point(1))[1]
dataclasses_is_dataclass | x * dataclasses.is_dataclass(Point)
dataclasses_frozen_eq | x * (FrozenPoint(1, 2) == FrozenPoint(1, 2))
dataclasses_frozen_hash | x * len({FrozenPoint(1, 2), FrozenPoint(1, 2)})
enum_value | x * Color.GREEN.value
enum_call | x * Color(2).value
enum_getitem | x * Color["RED"].value
enum_name | x * len(Color.RED.name)
enum_list | x * len(list(Color))
enum_len | x * len(Color)
enum_is | x * (Color(1) is Color.RED)
enum_flag_or | x * (Perm.R | Perm.W).value
enum_flag_contains | x * (Perm.R in (Perm.R | Perm.W))
enum_flag_and | x * bool(Perm.R & Perm.W)
enum_flag_invert | x * (~Perm.R).value
enum_intenum_arith | x * (Level.HIGH + 1)
enum_intenum_cmp | x * (Level.HIGH > Level.LOW)
enum_members | x * len(Color.__members__)
typing_cast | typing.cast(torch.Tensor, x) * 2
typing_get_type_hints | x * len(typing.get_type_hints(annotated))
typing_get_origin | x * (typing.get_origin(typing.List[int]) is list)
typing_get_args | x * len(typing.get_args(typing.Tuple[int, str]))
typing_type_checking | x * (not typing.TYPE_CHECKING)
inspect_signature_len | x * len(inspect.signature(annotated).parameters)
inspect_signature_default | x * inspect.signature(annotated).parameters["b"].default
inspect_isfunction | x * inspect.isfunction(annotated)
inspect_isclass | x * inspect.isclass(Point)
inspect_ismethod | x * inspect.ismethod(Child().scale)
inspect_getfullargspec | x * len(inspect.getfullargspec(annotated).args)
inspect_isgeneratorfunction | x * inspect.isgeneratorfunction(annotated)
re_match | x * (re.match(r"\d+", "123abc") is not None)
re_match_group | x * int(re.match(r"(\d+)", "42px").group(1))
re_compiled_match | x * int(PATTERN.match("layer.3.weight").group(1))
re_fullmatch | x * (re.fullmatch(r"[a-z]+", "abc") is not None)
re_search_span | x * re.search(r"b+", "abbbc").span()[1]
re_sub | x * len(re.sub(r"\.", "_", "a.b.c"))
re_findall | x * len(re.findall(r"\d", "a1b2c3"))
re_split | x * len(re.split(r"[,;]", "a,b;c"))
re_groups | x * sum(int(g) for g in SHAPE.match("3x4").groups())
re_escape | x * len(re.escape("a.b"))
string_consts | x * len(string.ascii_lowercase + string.digits)
string_template | x * len(string.Template("$a-$b").substitute(a=1, b=2))
string_capwords | x * len(string.capwords("ab cd"))
textwrap_dedent | x * len(textwrap.dedent("  a\n  b"))
textwrap_indent | x * len(textwrap.indent("a\nb", "> "))
textwrap_shorten | x * len(textwrap.shorten("hello world foo", width=10))
contextlib_nullcontext | contextlib.nullcontext(x).__enter__() * 2
torch_is_tensor | x * torch.is_tensor(x)
torch_is_floating_point | x * torch.is_floating_point(x)
torch_is_complex | x * torch.is_complex(x)
torch_get_default_dtype | x.to(torch.get_default_dtype())
torch_finfo_eps | x + torch.finfo(x.dtype).eps
torch_finfo_max | x.clamp(max=torch.finfo(torch.float16).max)
torch_iinfo | x * (torch.iinfo(torch.int8).max + 1)
torch_size_concat | x.reshape(x.shape + (1,))
torch_size_numel | x * x.shape.numel()
torch_size_slice | x.reshape(-1, *x.shape[1:])
torch_size_new | x.new_zeros(torch.Size([2, 3])) + 1
torch_size_eq | x * (x.shape == (4, 3))
torch_size_index | x * x.shape.index(3)
torch_broadcast_shapes | x.expand(torch.broadcast_shapes(x.shape, (1, 3)))
torch_dim_ndim | x * (x.dim() + x.ndim)
torch_numel | x * x.numel()
torch_size_call | x * x.size(0) * x.size()[-1]
torch_stride | x * x.stride()[0]
torch_element_size | x * x.element_size()
torch_is_contiguous | x * x.is_contiguous()
torch_device_type | x * (x.device.type == "cpu")
torch_device_ctor | x.to(torch.device("cpu"))
torch_device_eq | x * (x.device == torch.device("cpu"))
torch_dtype_is_float | x * x.dtype.is_floating_point
torch_dtype_itemsize | x * x.dtype.itemsize
torch_dtype_is_signed | x * torch.int8.is_signed
torch_dtype_eq | x * (torch.float32 == torch.float)
torch_promote_types | x.to(torch.promote_types(torch.int32, x.dtype))
torch_result_type | x.to(torch.result_type(x, 2))
torch_can_cast | x * torch.can_cast(torch.int32, torch.float32)
torch_cuda_is_available | x * (not torch.cuda.is_available())
torch_backends_cudnn | x * torch.backends.cudnn.enabled
torch_backends_mps | x * (not torch.backends.mps.is_available())
torch_is_grad_enabled | x * torch.is_grad_enabled()
torch_deterministic | x * (not torch.are_deterministic_algorithms_enabled())
torch_is_autocast | x * (not torch.is_autocast_enabled())
torch_jit_is_scripting | x * (not torch.jit.is_scripting())
torch_jit_is_tracing | x * (not torch.jit.is_tracing())
torch_typename | x * len(torch.typename(x))
torch_numel_fn | x * torch.numel(x)
torch_split_sizes | torch.split(x, [1, 3])[1]
torch_chunk | torch.chunk(x, 2)[0]
torch_unbind | sum(torch.unbind(x))
torch_tensor_list | x + torch.tensor([1.0, 2.0, 3.0])
torch_as_tensor | x + torch.as_tensor([1.0, 2.0, 3.0])
torch_tensor_method_unbound | torch.Tensor.add(x, 1)
torch_tensor_size_unbound | x * torch.Tensor.size(x, 0)
torch_parameter | torch.nn.Parameter(x * 2).sum()
torch_distributed_available | x * torch.distributed.is_available()
torch_distributed_initialized | x * (not torch.distributed.is_initialized())
torch_version | x * (torch.__version__ >= "2")
torch_pair | x * torch.nn.modules.utils._pair(3)[1]
torch_pytree_flatten | sum(torch.utils._pytree.tree_flatten({"a": x, "b": [x]})[0])
torch_pytree_map | torch.utils._pytree.tree_map(lambda t: t * 2, {"a": x})["a"]
torch_has_torch_function | x * (not torch.overrides.has_torch_function((x,)))
torch_is_nonzero_shape | x * bool(x.shape)
F_pad | F.pad(x, (1, 1))
F_normalize | F.normalize(x, dim=-1)
F_gelu_tanh | F.gelu(x, approximate="tanh")
F_softmax_dim | F.softmax(x, dim=-1)
F_one_hot | F.one_hot(torch.arange(3), 4) * 1.0 + x[0, 0]
F_interpolate | F.interpolate(x[None], scale_factor=2.0)
F_dropout_eval | F.dropout(x, p=0.5, training=False)
F_linear | F.linear(x, torch.ones(2, 3))
F_layer_norm | F.layer_norm(x, x.shape[-1:])
F_cross_entropy | F.cross_entropy(x, torch.tensor([0, 1, 2, 0]))
F_scaled_dot_product | F.scaled_dot_product_attention(x[None], x[None], x[None])
"""

CASES_SOURCE = r'''
def case_list_append(x):
    out = []
    for r in x:
        out.append(r * 2)
    return torch.stack(out)

def case_list_extend_insert(x):
    items = [1]
    items.extend([2, 3])
    items.insert(0, 5)
    return x * items[0] + items[-1]

def case_list_pop_remove(x):
    items = [1, 2, 3, 4]
    items.remove(2)
    return x * items.pop() + items.pop(0)

def case_list_sort_reverse(x):
    items = [3, 1, 2]
    items.sort()
    items.reverse()
    return x * items[0]

def case_list_sort_key(x):
    items = ["bb", "a", "ccc"]
    items.sort(key=len, reverse=True)
    return x * len(items[0])

def case_list_copy_clear(x):
    items = [1, 2]
    other = items.copy()
    items.clear()
    return x * (len(other) - len(items))

def case_list_del_slice(x):
    items = [1, 2, 3, 4]
    del items[1:3]
    return x * sum(items)

def case_list_slice_assign(x):
    items = [1, 2, 3, 4]
    items[1:3] = [9]
    return x * len(items) + items[1]

def case_dict_setdefault(x):
    d = {}
    d.setdefault("a", []).append(2)
    return x * d["a"][0]

def case_dict_update_pop(x):
    d = {"a": 1}
    d.update(b=2, c=3)
    return x * d.pop("b") + d.pop("z", 0)

def case_dict_popitem(x):
    d = {"a": 1, "b": 2}
    k, v = d.popitem()
    return x * v

def case_dict_del_iter(x):
    d = {"a": 1, "b": 2, "c": 3}
    del d["b"]
    return x * sum(d[k] for k in d)

def case_dict_tensor_values(x):
    d = {"w": x, "b": x + 1}
    return sum(d.values())

def case_dict_comprehension(x):
    d = {f"l{i}": i for i in range(3)}
    return x * d["l2"]

def case_dict_copy_mutate(x):
    d = {"a": 1}
    e = d.copy()
    e["a"] = 5
    return x * d["a"] + e["a"]

def case_set_add_discard(x):
    s = {1, 2}
    s.add(3)
    s.discard(1)
    return x * len(s)

def case_set_iteration(x):
    total = 0
    for v in sorted({3, 1, 2}):
        total = total * 10 + v
    return x * total

def case_set_update(x):
    s = set()
    s.update([1, 2], [3])
    return x * len(s)

def case_defaultdict(x):
    d = collections.defaultdict(list)
    d["a"].append(x)
    d["a"].append(x * 2)
    return sum(d["a"])

def case_defaultdict_int(x):
    d = collections.defaultdict(int)
    for c in "abca":
        d[c] += 1
    return x * d["a"]

def case_ordereddict_move(x):
    d = collections.OrderedDict(a=1, b=2)
    d.move_to_end("a")
    return x * list(d)[0].__len__() + d["a"]

def case_counter_update(x):
    c = collections.Counter()
    c.update([1, 1, 2])
    return x * c[1]

def case_deque_ops(x):
    d = collections.deque([1, 2, 3])
    d.appendleft(0)
    d.rotate(1)
    return x * d.popleft() + d.pop()

def case_deque_tensors(x):
    d = collections.deque(maxlen=2)
    for r in x:
        d.append(r)
    return d[0] + d[1]

def case_namedtuple_unpack(x):
    a, b = Pair(x, 2)
    return a * b

def case_dataclass_mutate(x):
    p = Point(1)
    p.a = 3
    return x * p.a + p.b

def case_dataclass_tensor_field(x):
    p = Point(x, 2.0)
    return p.a * p.b

def case_slots_object(x):
    s = Slotted(2)
    s.a += 1
    return x * s.a

def case_random_shuffle(x):
    items = [1, 2, 3, 4]
    random.shuffle(items)
    return x * items[0]

def case_random_seed_then_draw(x):
    random.seed(3)
    return x * random.random()

def case_contextlib_suppress(x):
    with contextlib.suppress(KeyError):
        {}["missing"]
    return x + 1

def case_contextlib_nullcontext_with(x):
    with contextlib.nullcontext(3) as v:
        y = x * v
    return y

def case_contextlib_exitstack(x):
    log = []
    with contextlib.ExitStack() as stack:
        stack.callback(log.append, 1)
        y = x * 2
    return y * len(log)

def case_contextlib_user_cm(x):
    log = []
    with user_cm(log) as v:
        y = x * v
    return y + len(log)

def case_torch_no_grad(x):
    with torch.no_grad():
        y = x * 2
    return y + 1

def case_torch_enable_grad(x):
    with torch.enable_grad():
        y = x * 2
    return y

def case_torch_set_grad_enabled(x):
    with torch.set_grad_enabled(False):
        y = x * 2
    return y.requires_grad, y

def case_torch_init_zeros(x):
    w = torch.empty(3, 2)
    torch.nn.init.zeros_(w)
    return x @ w

def case_torch_init_constant(x):
    w = torch.empty(3)
    torch.nn.init.constant_(w, 0.5)
    return x * w

def case_torch_init_ones_eye(x):
    w = torch.empty(3, 3)
    torch.nn.init.eye_(w)
    return x @ w

def case_torch_init_normal(x):
    torch.manual_seed(0)
    w = torch.empty(3)
    torch.nn.init.normal_(w, std=0.02)
    return x * w

def case_torch_init_kaiming(x):
    torch.manual_seed(0)
    w = torch.empty(2, 3)
    torch.nn.init.kaiming_uniform_(w, a=math.sqrt(5))
    return x @ w.T

def case_torch_init_calc_gain(x):
    return x * torch.nn.init.calculate_gain("relu")

def case_try_except_keyerror(x):
    try:
        v = {}["a"]
    except KeyError:
        v = 2
    return x * v

def case_try_except_attribute(x):
    try:
        v = x.missing
    except AttributeError:
        v = 3
    return x * v

def case_walrus(x):
    if (n := x.shape[0]) > 2:
        return x * n
    return x

def case_global_counter(x):
    global _COUNTER
    _COUNTER = _COUNTER + 1
    return x * 2

def case_closure_nonlocal(x):
    total = 0
    def add(v):
        nonlocal total
        total += v
    add(2)
    add(3)
    return x * total

def case_lambda_default(x):
    fns = [lambda t, k=k: t * k for k in range(3)]
    return fns[2](x)

def case_generator_expression_sum(x):
    return sum(r.sum() for r in x)

def case_generator_function(x):
    def gen():
        for i in range(3):
            yield i
    return x * sum(gen())

def case_star_args(x):
    def f(*args, **kwargs):
        return len(args) + len(kwargs)
    return x * f(1, 2, a=3)

def case_unpack_star(x):
    first, *rest = [1, 2, 3]
    return x * first + len(rest)

def case_print(x):
    print("shape", tuple(x.shape))
    return x * 2

def case_isinstance_abc(x):
    return x * isinstance([], collections.abc.Sequence)

def case_isinstance_typing(x):
    return x * isinstance({}, typing.Mapping)

def case_type_call(x):
    return x * type(3)("5")

def case_class_attr(x):
    class Local:
        k = 3
    return x * Local.k

def case_getattr_setattr_obj(x):
    p = Point(1)
    setattr(p, "a", 7)
    return x * getattr(p, "a")

def case_delattr(x):
    p = Point(1)
    p.extra = 2
    delattr(p, "extra")
    return x * hasattr(p, "extra")

def case_iter_sentinel_list(x):
    it = iter([1, 2, 3])
    next(it)
    return x * next(it)

def case_zip_dict(x):
    names = ["a", "b"]
    return {n: x * i for i, n in enumerate(names)}

def case_max_tensors_key(x):
    rows = list(x)
    return max(range(len(rows)), key=lambda i: -i) * x

def case_str_format_tensor_shape(x):
    name = "{}_{}".format(*x.shape)
    return x * len(name)

def case_string_keys_module_like(x):
    state = {"layer.0.weight": 1, "layer.1.weight": 2}
    total = 0
    for k, v in state.items():
        m = PATTERN.match(k)
        if m:
            total += int(m.group(1)) * v
    return x * total

def case_math_on_shape_loop(x):
    scale = 1.0
    for d in x.shape:
        scale *= math.sqrt(d)
    return x / scale

def case_inspect_signature_bind(x):
    sig = inspect.signature(annotated)
    bound = sig.bind(1, b=2.0)
    return x * bound.arguments["b"]

def case_enum_iteration(x):
    total = 0
    for c in Color:
        total += c.value
    return x * total

def case_enum_dict_key(x):
    table = {Color.RED: 2, Color.GREEN: 3}
    return x * table[Color.GREEN]

def case_flag_iteration(x):
    return x * len(list(Perm.R | Perm.X))

def case_dataclass_fields_loop(x):
    p = Point(2, 3.0)
    total = 0
    for f in dataclasses.fields(p):
        total += getattr(p, f.name)
    return x * total

def case_copy_deepcopy_list_tensors(x):
    items = copy.deepcopy([x, x])
    return items[0] + items[1]

def case_functools_partial_chain(x):
    p = functools.partial(functools.partial(torch.clamp, min=0.0), max=1.0)
    return p(x)

def case_bytes_build(x):
    data = bytearray()
    data.extend(b"ab")
    data.append(99)
    return x * len(bytes(data))

def case_int_methods(x):
    n = x.shape[0]
    return x * (n.bit_count() + int.__add__(n, 1))

def case_chained_comparison(x):
    n = x.shape[0]
    return x * (1 < n < 10)

def case_sorted_dict_items(x):
    d = {"b": 2, "a": 1}
    return x * sorted(d.items())[0][1]

def case_nested_comprehension(x):
    grid = [[i * j for j in range(3)] for i in range(3)]
    return x * grid[2][2]

def case_assert_shape(x):
    assert x.dim() == 2, "expected a matrix"
    return x * 2

def case_raise_caught_valueerror(x):
    try:
        int("z")
    except ValueError as e:
        return x * len(str(e)) * 0 + 1
    return x
'''

_COUNTER = 0


def corpus(quick: bool, only: str | None) -> list:
    """(name, function) pairs, expression cases first."""
    namespace = globals()
    lines = [line.split(" | ", 1) for line in EXPRESSIONS.strip().splitlines()]
    source = "".join(f"def case_{name.strip()}(x):\n    return {expr.strip()}\n\n" for name, expr in lines)
    code = compile(source + textwrap.dedent(CASES_SOURCE), "<python_breadth>", "exec")
    exec(code, namespace)  # noqa: S102 - the corpus, defined above
    cases = [(k[len("case_"):], v) for k, v in namespace.items() if k.startswith("case_")]
    if only:
        cases = [c for c in cases if only in c[0]]
    return cases[:20] if quick else cases


def make_input():
    return torch.arange(12.0).reshape(4, 3) / 7 - 0.5


def seeded(fn):
    random.seed(0)
    torch.manual_seed(0)
    try:
        return fn(make_input())
    except Exception as e:  # noqa: BLE001 - compared with eager's exception
        return e


def run(system: str, fn):
    """(first result, second result, graphs, breaks, first break reason)."""
    global _COUNTER
    _COUNTER = 0
    if system == "dynamo_lite":
        dynamo_lite.reset()
        random.seed(0)
        torch.manual_seed(0)
        try:
            report = dynamo_lite.explain(fn)(make_input())
            graphs, breaks = report.graph_count, report.graph_break_count
            reason = (f"{report.break_reasons[0].break_id}: {report.break_reasons[0].reason}"
                      if report.break_reasons else "")
        except Exception as e:  # noqa: BLE001
            graphs, breaks, reason = -1, -1, f"explain raised {type(e).__name__}: {e}"
        dynamo_lite.reset()
        compiled = dynamo_lite.compile(fn, backend="eager")
    else:
        import torch._dynamo as reference  # torch.compile, measured side by side

        reference.reset()
        random.seed(0)
        torch.manual_seed(0)
        try:
            report = reference.explain(fn)(make_input())
            graphs, breaks = report.graph_count, report.graph_break_count
            reason = str(report.break_reasons[0].reason).splitlines()[0] if report.break_reasons else ""
        except Exception as e:  # noqa: BLE001
            graphs, breaks, reason = -1, -1, f"explain raised {type(e).__name__}"
        reference.reset()
        compiled = torch.compile(fn, backend="eager")
    first = seeded(compiled)
    second = seeded(compiled)
    return first, second, graphs, breaks, reason


def cost(graphs: int, breaks: int) -> tuple:
    """How far a run is from one whole graph, ordered: breaks (a frame that made no graph at all,
    for which torch.compile's explain reports -1 breaks, or an explain that raised, counts as one),
    then no graph at all, then the number of graphs."""
    if graphs <= 0:
        return (max(breaks, 1), 1, 0)
    return (breaks, 0, graphs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the first 20 cases")
    parser.add_argument("--verbose", action="store_true", help="one line per case")
    parser.add_argument("--only", help="cases whose name contains this")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    cases = corpus(args.quick, args.only)
    tally = {"more": 0, "fewer": 0, "equal": 0, "ours_wrong": 0, "tc_wrong": 0, "ours_one_graph": 0,
             "tc_one_graph": 0}
    rows = []
    for name, fn in cases:
        global _COUNTER
        _COUNTER = 0
        with contextlib.redirect_stdout(io.StringIO()):  # what the cases print (both systems replay it)
            eager = seeded(fn)
            ours = run("dynamo_lite", fn)
            theirs = run("torch.compile", fn)
        ours_wrong = differs(eager, ours[0]) or differs(eager, ours[1])
        tc_wrong = differs(eager, theirs[0]) or differs(eager, theirs[1])
        ours_cost, tc_cost = cost(ours[2], ours[3]), cost(theirs[2], theirs[3])
        more, fewer = ours_cost > tc_cost, ours_cost < tc_cost
        tally["more" if more else "fewer" if fewer else "equal"] += 1
        tally["ours_wrong"] += ours_wrong
        tally["tc_wrong"] += tc_wrong
        tally["ours_one_graph"] += ours[2:4] == (1, 0)
        tally["tc_one_graph"] += theirs[2:4] == (1, 0)
        line = (f"{name:32s} ours {ours[2]}g {ours[3]}b{' WRONG' if ours_wrong else '':6s} "
                f"tc {theirs[2]}g {theirs[3]}b{' WRONG' if tc_wrong else '':6s}")
        if args.verbose:
            print(line, ours[4][:110], "|", theirs[4][:60], flush=True)
        if more or ours_wrong:
            rows.append(f"{line} {ours[4][:150]}")
    if rows:
        print("cases where dynamo_lite has more graphs/breaks than torch.compile, or differs from eager:")
        print("\n".join(rows))
    print(f"{len(cases)} cases (one tensor op + one Python feature each)")
    print(f"dynamo_lite vs torch.compile (graphs, breaks): more {tally['more']}, fewer {tally['fewer']}, "
          f"equal {tally['equal']}")
    print(f"one graph, no break: dynamo_lite {tally['ours_one_graph']}, torch.compile {tally['tc_one_graph']}")
    print(f"differ from eager: dynamo_lite {tally['ours_wrong']}, torch.compile {tally['tc_wrong']}")


if __name__ == "__main__":
    main()
