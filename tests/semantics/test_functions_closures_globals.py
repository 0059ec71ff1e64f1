"""Acceptance: user functions, closures, globals, builtins and generators.

Inlined calls (default args, *args/**kwargs, keyword-only, lambdas, recursion,
decorators, functools), closures (read, nonlocal write, cells created in the
compiled frame), module globals (read, rebinding, container mutation - reset
before each run and compared after), builtins and generator functions.
Helpers: dynamo_lite/testing.py.
"""
import functools
import operator
import sys
import types

import pytest
import torch

import dynamo_lite
from dynamo_lite.testing import check

SCALE = 3.0
COUNTER = 0
LOG_LIST = []
CONFIG = {"mode": "add", "k": 2}
BUFFER = torch.zeros(3)
FLAG = True


def _globals_reset(**initial):
    """reset/snapshot pair for check(): globals restored before each run, read after."""
    g = globals()

    def reset():
        for k, v in initial.items():
            g[k] = v.clone() if isinstance(v, torch.Tensor) else __import__("copy").deepcopy(v)

    def snapshot():
        return {k: g[k] for k in initial}

    return dict(reset=reset, snapshot=snapshot)


def helper_add(x, y=1.0, *, scale=1.0):
    return (x + y) * scale


def helper_varargs(*args, **kwargs):
    total = sum(args)
    for k in sorted(kwargs):
        total = total + kwargs[k] * len(k)
    return total


def test_call_with_defaults_keywords_and_keyword_only():
    def f(x):
        return helper_add(x), helper_add(x, 2), helper_add(x, y=3, scale=2), helper_add(y=x, x=x, scale=0.5)

    check(f, torch.randn(3))


def test_star_args_and_star_kwargs_forwarding():
    def f(x, *rest, **opts):
        a = helper_varargs(x, *rest, **opts)
        b = helper_varargs(*[x, x], **{"ab": x})
        return a, b, len(rest), sorted(opts)

    check(f, torch.randn(2), torch.ones(2), torch.ones(2), alpha=torch.ones(2), b=torch.zeros(2))


def test_mutable_default_argument_is_shared_between_calls():
    def g(x, cache=[]):  # noqa: B006 - the point of the test
        cache.append(1)
        return x * len(cache)

    def f(x):
        return g(x), g(x)

    # one compiled function and one eager function must not share the default list
    calls = []
    for fn in (f, None):
        g.__defaults__ = ([],)
        if fn is None:
            import dynamo_lite
            from dynamo_lite.testing import CompileCounter
            fn = dynamo_lite.compile(f, backend=CompileCounter())
        calls.append([fn(torch.ones(1)), fn(torch.ones(1)), list(g.__defaults__[0])])
    from dynamo_lite.testing import assert_same
    assert_same(calls[0], calls[1])


def test_lambdas_and_higher_order_functions():
    def f(x):
        sq = lambda t: t * t  # noqa: E731
        compose = lambda a, b: (lambda t: a(b(t)))  # noqa: E731
        h = compose(sq, torch.sin)
        return h(x), list(map(sq, [x, x + 1])), functools.reduce(operator.add, [x, x, x])

    check(f, torch.randn(3))


def test_closure_reads_and_nonlocal_writes():
    def f(x):
        count = 0
        acc = []

        def step(t):
            nonlocal count
            count += 1
            acc.append(count)
            return t * count

        y = step(step(x))
        return y, count, acc

    check(f, torch.randn(2))


def test_closure_over_outer_test_variable_changes_between_calls():
    factor = [2.0]

    def f(x):
        return x * factor[0]

    def run(fn, x):
        factor[0] = 2.0
        a = fn(x)
        factor[0] = 5.0
        return a, fn(x)

    import dynamo_lite
    opt = dynamo_lite.compile(f, backend="eager")
    from dynamo_lite.testing import assert_same
    assert_same(run(f, torch.ones(2)), run(opt, torch.ones(2)))


def test_closure_cell_rebound_between_calls():
    def make():
        k = 1.0

        def f(x):
            return x * k

        def set_k(v):
            nonlocal k
            k = v

        return f, set_k

    import dynamo_lite
    f, set_k = make()
    opt = dynamo_lite.compile(f, backend="eager")
    r1 = opt(torch.ones(2))
    set_k(4.0)
    r2 = opt(torch.ones(2))
    torch.testing.assert_close(r1, torch.ones(2))
    torch.testing.assert_close(r2, torch.full((2,), 4.0))


def test_nested_function_returned_and_called_later():
    def f(x):
        def inner(y):
            return x + y

        return inner, inner(x)

    import dynamo_lite
    inner_c, r_c = dynamo_lite.compile(f, backend="eager")(torch.ones(2))
    inner_e, r_e = f(torch.ones(2))
    torch.testing.assert_close(r_c, r_e)
    torch.testing.assert_close(inner_c(torch.ones(2)), inner_e(torch.ones(2)))


def test_recursive_function_on_nested_lists():
    def total(obj):
        if isinstance(obj, (list, tuple)):
            return sum((total(o) for o in obj), torch.tensor(0.0))
        return obj.sum()

    def f(tree):
        return total(tree)

    check(f, [torch.ones(2), [torch.ones(3), (torch.ones(1),)]])


def test_decorated_function_and_functools_wraps():
    def twice(fn):
        @functools.wraps(fn)
        def wrapper(*a, **k):
            return fn(*a, **k) * 2

        return wrapper

    @twice
    def g(x, b=1):
        return x + b

    def f(x):
        return g(x), g(x, b=3), g.__name__

    check(f, torch.randn(2))


def test_functools_partial_and_lru_cache_free_helper():
    def f(x):
        p = functools.partial(helper_add, y=2.0)
        q = functools.partial(torch.clamp, min=0.0)
        return p(x), p(x, scale=3.0), q(x)

    check(f, torch.randn(4))


def test_global_read_and_change_between_calls():
    def f(x):
        return x * SCALE

    global SCALE
    import dynamo_lite
    opt = dynamo_lite.compile(f, backend="eager")
    try:
        SCALE = 3.0
        a = opt(torch.ones(2))
        SCALE = 7.0
        b = opt(torch.ones(2))
    finally:
        SCALE = 3.0
    torch.testing.assert_close(a, torch.full((2,), 3.0))
    torch.testing.assert_close(b, torch.full((2,), 7.0))


def test_global_rebinding_inside_compiled_function():
    def f(x):
        global COUNTER, FLAG
        COUNTER += 1
        FLAG = not FLAG
        return x + COUNTER

    check(f, torch.ones(2), **_globals_reset(COUNTER=0, FLAG=True))


def test_global_list_and_dict_mutation():
    def f(x):
        LOG_LIST.append("called")
        LOG_LIST.extend([1, 2])
        CONFIG["k"] += 1
        CONFIG["seen"] = True
        del CONFIG["mode"]
        return x * CONFIG["k"]

    check(f, torch.ones(2), **_globals_reset(LOG_LIST=[], CONFIG={"mode": "add", "k": 2}))


def test_global_tensor_in_place_update():
    def f(x):
        BUFFER.add_(x)
        return BUFFER * 2

    check(f, torch.ones(3), **_globals_reset(BUFFER=torch.zeros(3)))


def test_global_mutation_then_graph_break_then_more():
    def f(x):
        global COUNTER
        COUNTER += 1
        LOG_LIST.append(COUNTER)
        print("between", COUNTER)
        COUNTER += 10
        LOG_LIST.append(COUNTER)
        return x + COUNTER

    check(f, torch.ones(2), **_globals_reset(COUNTER=0, LOG_LIST=[]))


def test_global_read_after_write_in_same_call():
    def f(x):
        global SCALE
        old = SCALE
        SCALE = SCALE * 2
        return x * old, x * SCALE

    check(f, torch.ones(2), **_globals_reset(SCALE=3.0))


@pytest.mark.parametrize("name", ["len", "min_max", "sum_abs", "round_divmod", "all_any", "isinstance",
                                  "sorted_reversed", "enumerate_zip", "getattr_hasattr", "int_float_bool_str",
                                  "range_slice", "map_filter", "chr_ord_hash", "pow_abs"])
def test_builtins(name):
    cases = {
        "len": lambda x, l: x * len(l) + len(x),
        "min_max": lambda x, l: (x * min(l) + max(3, 4, 1), max(x.shape), min(l, key=lambda v: -v)),
        "sum_abs": lambda x, l: (x + sum(l) + abs(-2), sum([x, x], start=x)),
        "round_divmod": lambda x, l: (x * round(2.567, 2), divmod(17, 5), round(7.5)),
        "all_any": lambda x, l: (x, all(l), any(v > 2 for v in l), all([])),
        "isinstance": lambda x, l: (x, isinstance(l, list), isinstance(1, (str, int)), issubclass(bool, int)),
        "sorted_reversed": lambda x, l: (x, sorted(l, reverse=True), list(reversed(l)), sorted({3: 1, 1: 2})),
        "enumerate_zip": lambda x, l: (x, list(enumerate(l, 1)), list(zip(l, "abc")), dict(zip("ab", l))),
        "getattr_hasattr": lambda x, l: (x, getattr(x, "shape"), hasattr(x, "nope"), getattr(l, "zzz", 5)),
        "int_float_bool_str": lambda x, l: (x, int("12"), float(3), bool([]), str(l), repr(1.5), f"{l[0]:03d}"),
        "range_slice": lambda x, l: (x[slice(1, None)], list(range(10, 0, -3)), l[::-1], range(5)[2]),
        "map_filter": lambda x, l: (x, list(map(str, l)), list(filter(None, [0, 1, 2])), tuple(map(operator.neg, l))),
        "chr_ord_hash": lambda x, l: (x, chr(65), ord("a"), hash(3) == hash(3), id(l) == id(l)),
        "pow_abs": lambda x, l: (x ** 2, pow(2, 5), pow(2, 3, 5), abs(-3.5), x.abs()),
    }

    def f(x, l):
        return cases[name](x, l) if False else cases[name](x + 0, l)

    check(f, torch.randn(3), [1, 2, 3])


def test_generator_function_consumed_inside():
    def gen(x, n):
        for i in range(n):
            yield x * i

    def f(x):
        return list(gen(x, 3)), sum(gen(x, 4)), next(iter(gen(x, 2)))

    check(f, torch.randn(2), graphs=None)


def test_generator_expression_with_send_like_usage():
    def f(x):
        g = (x * i for i in range(3))
        first = next(g)
        rest = list(g)
        return first, rest, next(g, "done")

    check(f, torch.randn(2), graphs=None)


def test_generator_returned_from_compiled_function():
    def f(x):
        y = x + 1
        return (y * i for i in range(3))

    import dynamo_lite
    e = list(f(torch.ones(2)))
    c = list(dynamo_lite.compile(f, backend="eager")(torch.ones(2)))
    from dynamo_lite.testing import assert_same
    assert_same(e, c)


def test_yield_from_and_generator_return_value():
    def inner(x):
        yield x
        yield x + 1
        return "inner-done"

    def outer(x):
        r = yield from inner(x)
        yield r

    def f(x):
        return list(outer(x * 2))

    check(f, torch.ones(1), graphs=None)


def test_function_attributes_and_introspection():
    def g(a, b=2):
        """doc"""
        return a

    g.custom = 5

    def f(x):
        return x * g.custom, g.__name__, g.__doc__, g.__defaults__, callable(g)

    check(f, torch.ones(2))


def test_method_call_on_builtin_values():
    def f(x, s, l, d):
        parts = s.split(",")
        l2 = l.copy()
        l2.insert(0, 9)
        l2.sort()
        return (x * len(parts), s.upper(), "-".join(parts), l2, l.index(3), l.count(1), d.get("a", 0),
                d.get("zz", -1), list(d.keys()), s.startswith("a"), f"{s!r}")

    check(f, torch.ones(1), "a,b,c", [3, 1, 2, 1], {"a": 1, "b": 2})


def test_string_formatting_with_tensor_shapes():
    def f(x):
        msg = "shape=%s dtype=%s n=%d" % (tuple(x.shape), x.dtype, x.numel())
        msg2 = "{}x{}".format(*x.shape)
        return x + 1, msg, msg2, f"{x.shape[0]:>4}"

    check(f, torch.randn(2, 3))


def test_print_inside_compiled_function_with_tensors():
    def f(x):
        y = x + 1
        print("y is", y.shape, y.dtype)
        print(f"sum={y.sum():.3f}")
        return y * 2

    check(f, torch.ones(3), graphs=None)


def test_many_arguments_and_keyword_only_function():
    def f(a, b, c, d, e, f_, g, h, *, i, j=None):
        return a + b + c + d + e + f_ + g + h + i + (0 if j is None else j)

    ts = [torch.full((2,), float(k)) for k in range(8)]
    check(f, *ts, i=torch.ones(2))


# ---------------------------------------------------------------- state kept by closures and callables across calls

def _make_counter():
    n = 0

    def inc(x):
        nonlocal n
        n += 1
        return x * n

    return inc


def _make_pusher():
    data = []

    def push(x):
        data.append(x.sum())
        print("pushed")
        data.append(len(data))
        return len(data)

    return push, data


class _Acc:
    def __init__(self):
        self.total = 0

    def __call__(self, x):
        self.total += 1
        return x * self.total


def _sequence(fn, reset, observe):
    """Three calls eagerly and three compiled, each series from the same reset state."""
    import dynamo_lite
    from dynamo_lite.testing import assert_same

    outs = []
    for f in (fn, dynamo_lite.compile(fn, backend="eager")):
        reset()
        outs.append([f(torch.ones(2) * i) for i in range(1, 4)] + [observe()])
    assert_same(outs[0], outs[1])


def test_closure_counter_state_persists_across_calls():
    inc = _make_counter()

    def f(x):
        return inc(x) + 1

    def reset():
        inc.__closure__[0].cell_contents = 0

    _sequence(f, reset, lambda: inc.__closure__[0].cell_contents)


def test_closure_list_mutated_around_a_graph_break():
    push, data = _make_pusher()

    def f(x):
        return x * push(x)

    _sequence(f, data.clear, lambda: list(data))


def test_callable_object_state_across_calls():
    acc = _Acc()

    def f(x):
        return acc(x) + acc(x)

    def reset():
        acc.total = 0

    _sequence(f, reset, lambda: acc.total)


def test_memoizing_decorator_with_dict_cache():
    cache = {}

    def memo(fn):
        @functools.wraps(fn)
        def wrapper(x, k):
            if k not in cache:
                cache[k] = fn(x, k)
            return cache[k]

        return wrapper

    @memo
    def heavy(x, k):
        return x * k

    def f(x):
        return heavy(x, 2) + heavy(x, 2) + heavy(x, 3)

    _sequence(f, cache.clear, lambda: sorted(cache))


def test_closures_made_in_loops_and_stored_methods():
    def f(x):
        fs = []
        for i in range(2):
            def g(t, i=i):
                return t + i

            fs.append(g)
        late = [lambda t: t * i for i in range(3)]
        acc = []
        push = acc.append
        for h in fs + late:
            push(h(x))
        m = x.add
        return acc, m(1)

    check(f, torch.ones(2))


def test_super_inside_lambda_and_recursive_closure():
    def f(x):
        class B:
            def f(self, t):
                return t + 1

        class C(B):
            def f(self, t):
                g = lambda: super(C, self).f(t)  # noqa: E731
                return g() * 2

        def fib(n):
            return n if n < 2 else fib(n - 1) + fib(n - 2)

        return C().f(x) * fib(8)

    check(f, torch.ones(2), graphs=None)


# ---------------------------------------------------------------- attributes of another (user) module

_user_mod = types.ModuleType("acceptance_user_cfg")
_user_mod.SCALE = 2.0
_user_mod.LOG = []
_user_mod.helper = lambda t: t * _user_mod.SCALE
sys.modules["acceptance_user_cfg"] = _user_mod
import acceptance_user_cfg as user_cfg  # noqa: E402


def _reset_user_mod():
    _user_mod.SCALE = 2.0
    _user_mod.LOG = []
    _user_mod.__dict__.pop("NEW", None)


def _snapshot_user_mod():
    return _user_mod.SCALE, list(_user_mod.LOG), getattr(_user_mod, "NEW", None)


def _mod_read(x):
    return x * user_cfg.SCALE


def _mod_write(x):
    user_cfg.SCALE = user_cfg.SCALE * 3
    return x * user_cfg.SCALE


def _mod_new_attr(x):
    user_cfg.NEW = x.sum()
    return x + 1


def _mod_list_append(x):
    user_cfg.LOG.append(x.shape[0])
    return x + len(user_cfg.LOG)


def _mod_function(x):
    return user_cfg.helper(x)


def _mod_del_attr(x):
    user_cfg.NEW = 1
    del user_cfg.NEW
    return x + hasattr(user_cfg, "NEW")


def _mod_import_inside(x):
    import math

    import acceptance_user_cfg as uc
    from acceptance_user_cfg import SCALE

    return x * uc.SCALE * SCALE + math.pi


@pytest.mark.parametrize("fn", [_mod_read, _mod_write, _mod_new_attr, _mod_list_append, _mod_function,
                                _mod_del_attr, _mod_import_inside], ids=lambda f: f.__name__)
def test_user_module_attributes_read_and_written(fn):
    check(fn, torch.ones(2), reset=_reset_user_mod, snapshot=_snapshot_user_mod, graphs=None)


def test_user_module_attribute_changed_between_calls():
    import dynamo_lite

    _reset_user_mod()
    opt = dynamo_lite.compile(_mod_read, backend="eager")
    try:
        a = opt(torch.ones(2))
        _user_mod.SCALE = 7.0
        b = opt(torch.ones(2))
    finally:
        _reset_user_mod()
    assert (a.tolist(), b.tolist()) == ([2.0, 2.0], [7.0, 7.0])


# ---------------------------------------------------------------- functions made in another module's code

_factory_mod = types.ModuleType("acceptance_factories")
exec(compile('''
def scale_of(t):
    return t * 3

def make_vmap(k):
    def vmap_with_shapes(j, extra=1, *, shift=0):
        def vmapped(x, bias=2, *, mul=1):
            return scale_of(x) * j * k * mul + bias + extra + shift
        return vmapped
    return vmap_with_shapes
''', "<acceptance_factories>", "exec"), _factory_mod.__dict__)


def test_function_made_in_another_module_keeps_its_globals():
    # einx: a function made inside an inlined call of another module, held in a cell of a
    # function made in the compiled frame, was rebuilt with the compiled frame's globals
    # (MAKE_FUNCTION takes the running frame's): NameError when called later
    def f(x):
        func = _factory_mod.make_vmap(2)(3, shift=1)

        def wrapped(*args):
            return func(*args)

        return wrapped, func, x + 1

    import dynamo_lite
    from dynamo_lite.testing import assert_same
    wrapped_c, func_c, r_c = dynamo_lite.compile(f, backend="eager")(torch.ones(2))
    wrapped_e, func_e, r_e = f(torch.ones(2))
    assert_same(r_c, r_e)
    assert_same(wrapped_c(torch.ones(2)), wrapped_e(torch.ones(2)))
    assert_same(func_c(torch.ones(2), mul=2), func_e(torch.ones(2), mul=2))
    for attr in ("__module__", "__qualname__", "__name__", "__defaults__", "__kwdefaults__"):
        assert getattr(func_c, attr) == getattr(func_e, attr), attr
    assert func_c.__globals__ is _factory_mod.__dict__


def _closure_classes():
    """A module class and a plain class whose methods read a free variable of the function that
    made them, and a setter that rebinds it (as a decorator factory or a config closure does)."""
    scale = 1.0

    class Scaled(torch.nn.Module):
        def forward(self, x):
            return x * scale

    class Helper:
        def apply(self, x):
            return x + scale

        @staticmethod
        def shift(x):
            return x - scale

        @property
        def factor(self):
            return scale * 2

    def set_scale(value):
        nonlocal scale
        scale = value

    return Scaled, Helper, set_scale


@pytest.mark.parametrize("reach", ["module forward", "method", "staticmethod", "property"])
def test_free_variable_of_a_method_rebound_between_calls_is_seen(reach):
    # the method is found on the object's class, so its closure is read through
    # type(obj).name.__closure__: rebinding the free variable recompiles instead of replaying
    Scaled, Helper, set_scale = _closure_classes()
    holder = torch.nn.Module()
    holder.inner, holder.helper = Scaled(), Helper()

    def f(x):
        if reach == "module forward":
            return holder.inner(x) + 1
        if reach == "method":
            return holder.helper.apply(x)
        if reach == "staticmethod":
            return holder.helper.shift(x)
        return x * holder.helper.factor

    compiled = dynamo_lite.compile(f, backend="eager")
    x = torch.ones(3)
    for value in (1.0, 5.0, -2.0):
        set_scale(value)
        torch.testing.assert_close(compiled(x), f(x))
