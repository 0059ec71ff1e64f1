"""Touch only what eager touches: tracing, guards, recompile reasons and break descriptions
never run user-defined Python on a real object (attribute hooks, repr, bool, ==, hash) that
eager does not run there.

Objects here record every dunder and attribute hook that runs on them, and answer unknown
attributes with an object whose truth test raises (as a torch.fx.Proxy or a permissive mock
does).  Each test runs the same calls eagerly and compiled and compares what was touched and
what came back.  Also: code that builds a torch.fx graph by hand makes the same graph compiled,
"is this torch?" is decided by the module (torchvision-like package names are user code), and a
module with a TorchScript child walks its parameters.
"""
from __future__ import annotations

import sys
import textwrap

import pytest
import torch
import torch.fx as fx

import dynamo_lite
from dynamo_lite.testing import assert_same

TOUCHED: list = []


class _Bomb:
    """What a permissive __getattr__ answers: using it as a bool (``or``, ``if``) raises."""

    def __bool__(self):
        raise RuntimeError("a _Bomb has no truth value")


class Tattletale:
    """Records every hook Python runs on it; unknown attributes are _Bombs."""

    def __getattr__(self, name):
        TOUCHED.append(("getattr", name))
        return _Bomb()

    def __call__(self, x):
        TOUCHED.append(("call",))
        return x * 3

    def __repr__(self):
        TOUCHED.append(("repr",))
        return "Tattletale()"

    def __str__(self):
        TOUCHED.append(("str",))
        return "Tattletale"

    def __bool__(self):
        TOUCHED.append(("bool",))
        return True

    def __eq__(self, other):
        TOUCHED.append(("eq",))
        return self is other

    def __hash__(self):
        TOUCHED.append(("hash",))
        return 7

    def __len__(self):
        TOUCHED.append(("len",))
        return 1


def _helper(x):
    return x + 1


def _touched_by(fn, calls):
    """(results, touched hooks) of calling fn on each argument tuple in turn."""
    TOUCHED.clear()
    results = [fn(*args) for args in calls]
    return results, list(TOUCHED)


def _same_as_eager(fn, calls):
    eager_results, eager_touched = _touched_by(fn, calls)
    compiled = dynamo_lite.compile(fn, backend="eager")
    got_results, got_touched = _touched_by(compiled, calls)
    assert_same(eager_results, got_results)
    assert got_touched == eager_touched
    return eager_touched


def test_recompile_reason_for_a_failed_identity_guard_does_not_ask_the_new_object():
    # the first call guards fn by identity; the second fails that guard: explaining it must
    # describe the Tattletale by its type, not read its __qualname__ (a _Bomb whose truth raises)
    def apply(fn, x):
        return fn(x) + 1

    x = torch.ones(2)
    touched = _same_as_eager(apply, [(_helper, x), (Tattletale(), x), (_helper, x)])
    assert touched == [("call",)]


def test_recompile_reasons_are_logged_without_touching_the_objects(capsys):
    # +recompiles renders every guard that failed, with the objects involved
    def apply(fn, x):
        return fn(x) * 2

    x = torch.ones(2)
    compiled = dynamo_lite.compile(apply, backend="eager")
    compiled(_helper, x)
    TOUCHED.clear()
    dynamo_lite.set_logs("+recompiles")
    try:
        torch.testing.assert_close(compiled(Tattletale(), x), x * 6)
    finally:
        dynamo_lite.set_logs()
    assert TOUCHED == [("call",)]
    err = capsys.readouterr().err
    assert "Recompiling apply" in err and "Tattletale" in err, err


def test_passing_and_returning_user_objects_touches_nothing():
    def f(obj, x):
        pair = (obj, x + 1)
        d = {"o": obj}
        return pair[0] is d["o"], pair, [obj]

    touched = _same_as_eager(f, [(Tattletale(), torch.ones(2))])
    assert touched == []


def test_identity_tests_and_branches_on_none_touch_nothing():
    def f(obj, x):
        if obj is None:
            return x
        if obj is not _helper:
            return x * 2
        return x - 1

    touched = _same_as_eager(f, [(Tattletale(), torch.ones(2)), (None, torch.ones(2)), (_helper, torch.ones(2))])
    assert touched == []


def test_recompile_reason_after_a_none_argument_describes_the_object_by_type():
    # the entry for None fails on the object: its reason ("obj changed from None to ...") must not
    # run the object's __repr__
    def f(obj, x):
        if obj is None:
            return x
        return x * 2

    touched = _same_as_eager(f, [(None, torch.ones(2)), (Tattletale(), torch.ones(2))])
    assert touched == []


def test_hooks_eager_runs_run_once_in_the_compiled_call_too():
    def f(obj, x):
        if obj:  # eager runs __bool__ here
            x = x + len(obj)  # ... and __len__ here
        return x, obj == obj  # ... and __eq__ here

    touched = _same_as_eager(f, [(Tattletale(), torch.ones(2))])
    assert touched == [("bool",), ("len",), ("eq",)]


def test_explain_and_break_reasons_describe_user_objects_by_type():
    def f(obj, x):
        y = x + 1
        sys.getrefcount(obj)  # a C function dynamo_lite does not trace: a break whose reason names obj
        return y, obj

    TOUCHED.clear()
    info = dynamo_lite.explain(f)(Tattletale(), torch.ones(2))
    text = str(info) + "".join(str(b) for b in info.break_reasons)
    assert info.graph_break_count >= 1
    assert TOUCHED == []
    assert "Tattletale()" not in text


# ---- code that builds a torch.fx graph by hand ------------------------------------------------
def _build_graph(shape):
    graph = fx.Graph()
    tracer = fx.proxy.GraphAppendingTracer(graph)
    x = fx.Proxy(graph.placeholder("x"), tracer)
    y = x.expand(shape)
    z = (y + 1).sum()
    graph.output(z.node)
    return [(n.op, str(n.target)) for n in graph.nodes]


def test_building_an_fx_graph_by_hand_makes_the_same_graph_compiled():
    # each operation on a Proxy records a node: the trace must not read its attributes
    # (that recorded extra getattr nodes) nor compare it (Proxy.__eq__ raises)
    expected = _build_graph((2, 3))
    compiled = dynamo_lite.compile(_build_graph, backend="eager")
    assert compiled((2, 3)) == expected
    assert compiled((2, 3)) == expected
    info = dynamo_lite.explain(_build_graph)((2, 3))
    assert not [b for b in info.break_reasons if "DL0026" in str(b)], info.break_reasons


# ---- "is this torch?" by the module, not by a name prefix -------------------------------------
_PACKAGE = '''
import torch


class Scaler:
    def __init__(self, factor):
        self.factor = factor
        self.calls = 0

    def __repr__(self):
        return f"Scaler({self.factor}, calls={self.calls})"  # needs __init__ to have run

    def __call__(self, x):
        self.calls += 1
        return x * self.factor


def scale_twice(x, factor):
    s = Scaler(factor)
    return s(s(x)), s.calls
'''


@pytest.mark.parametrize("package", ["torchlike_userpkg", "plainlike_userpkg"])
def test_a_package_named_torch_something_is_user_code(tmp_path, monkeypatch, package):
    (tmp_path / package).mkdir()
    (tmp_path / package / "__init__.py").write_text(textwrap.dedent(_PACKAGE))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, package, raising=False)
    mod = __import__(package)

    def f(x):
        return mod.scale_twice(x, 3.0)

    x = torch.ones(2)
    expected = f(x)
    info = dynamo_lite.explain(f)(x)
    assert (info.graph_count, info.graph_break_count) == (1, 0), info.break_reasons
    assert_same(expected, dynamo_lite.compile(f, backend="eager")(x))


# ---- a module with a TorchScript child ---------------------------------------------------------
class _WithScripted(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.scripted = torch.jit.script(torch.nn.Linear(3, 2))

    def forward(self, x):
        total = sum(p.sum() for p in self.parameters())
        names = [n for n, _ in self.named_parameters()]
        return self.lin(x) * total, names


def test_parameters_of_a_module_with_a_torchscript_child():
    torch.manual_seed(0)
    m = _WithScripted()
    x = torch.randn(2, 3)
    expected = m(x)
    got = dynamo_lite.compile(m, backend="eager")(x)
    assert_same(expected, got)
    info = dynamo_lite.explain(m)(x)
    assert not [b for b in info.break_reasons if "DL0026" in str(b)], info.break_reasons


# ---- more places a user object can sit ----------------------------------------------------------
GLOBAL_TATTLE = Tattletale()


def _closure_over(obj):
    def inner(x):
        return (x + 1, obj) if obj is not None else x
    return inner


@pytest.mark.parametrize("where", ["global", "closure", "default", "kwarg", "container", "type and id"])
def test_user_objects_wherever_they_are_read_from(where):
    x = torch.ones(2)
    if where == "global":
        def f(x):
            return x * 2, GLOBAL_TATTLE
        calls = [(x,), (x,)]
    elif where == "closure":
        f = _closure_over(Tattletale())
        calls = [(x,), (x,)]
    elif where == "default":
        def f(x, obj=Tattletale()):
            return x - 1, obj
        calls = [(x,), (x,)]
    elif where == "kwarg":
        def f(x, **kw):
            return x + 2, kw["obj"], sorted(kw)
        f = (lambda g: (lambda x, obj: g(x, obj=obj)))(f)
        calls = [(x, Tattletale()), (x, Tattletale())]
    elif where == "container":
        def f(x, box):
            return x * 3, box[0], {"k": box[1]}["k"], len(box)
        calls = [(x, [Tattletale(), Tattletale()]), (x, (Tattletale(), Tattletale()))]
    else:
        def f(x, obj):
            return x + 1, type(obj) is Tattletale, isinstance(obj, Tattletale), callable(obj), id(obj) == id(obj)
        calls = [(x, Tattletale()), (x, Tattletale())]
    touched = _same_as_eager(f, calls)
    assert touched == []


def test_hasattr_and_getattr_run_getattr_as_eager_does():
    def f(x, obj):
        has = hasattr(obj, "anything")  # eager runs __getattr__("anything") once
        return x + 1, has

    touched = _same_as_eager(f, [(torch.ones(2), Tattletale())])
    assert touched == [("getattr", "anything")]


class Spy:
    """A class that answers every attribute read in Python (__class__ and __dict__ included)."""

    def __init__(self):
        object.__setattr__(self, "val", 3)

    def __getattribute__(self, name):
        TOUCHED.append(("getattribute", name))
        return object.__getattribute__(self, name)


def test_objects_answering_every_attribute_read_in_python_are_classified_by_type():
    # isinstance(obj, T) reads obj.__class__ through __getattribute__ when obj's type is not a
    # T: the builder's classification must not run it (it did some 50 times per trace)
    def f(x, obj):
        return x + 1, obj, [obj]

    touched = _same_as_eager(f, [(torch.ones(2), Spy()), (torch.ones(2), Spy())])
    assert touched == []


def test_a_python_getattribute_is_traced_once_per_call():
    def f(x, obj):
        return x * obj.val

    x = torch.ones(2)
    TOUCHED.clear()
    info = dynamo_lite.explain(f)(x, Spy())
    assert (info.graph_count, info.graph_break_count) == (1, 0), info.break_reasons
    assert TOUCHED == [("getattribute", "val")]  # the compiled call's own read (replayed), none at trace time


def test_guards_read_what_a_python_getattribute_read_without_running_it():
    """The trace inlined the class's __getattribute__ (its reads through object.__getattribute__
    guarded as such): each compiled call runs it exactly as often as eager, guards never."""
    touched = []

    class Local:
        def __init__(self):
            object.__setattr__(self, "val", 3)

        def __getattribute__(self, name):
            touched.append(name)  # a list in the method's closure: the change is replayed
            return object.__getattribute__(self, name)

    def f(x, obj):
        return x * obj.val

    compiled = dynamo_lite.compile(f, backend="eager")
    x, obj = torch.ones(2), Local()
    f(x, obj)
    eager = list(touched)
    touched.clear()
    compiled(x, obj)
    compiled(x, obj)
    assert touched == eager * 2
    object.__setattr__(obj, "val", 4)  # the guard still sees a change
    touched.clear()
    assert torch.equal(compiled(x, obj), x * 4) and touched == eager


class AliasedConfig:
    """Like transformers' PretrainedConfig: names mapped through a class table in __getattribute__."""

    attribute_map = {"hidden": "d_model"}
    scale = 2  # a class attribute: guarded as not shadowed by the instance

    def __init__(self, d_model):
        object.__setattr__(self, "d_model", d_model)

    def __getattribute__(self, key):
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        TOUCHED.append(("getattribute", key))
        return super().__getattribute__(key)


def test_a_config_with_an_attribute_map_is_read_as_eager_reads_it():
    def f(x, config):
        return x * config.hidden + config.scale

    calls = [(torch.ones(2), AliasedConfig(3)), (torch.ones(2), AliasedConfig(3)), (torch.ones(2), AliasedConfig(5))]
    touched = _same_as_eager(f, calls)
    assert touched == [("getattribute", "d_model"), ("getattribute", "scale")] * 3
    shadowed = AliasedConfig(3)
    object.__setattr__(shadowed, "scale", 10)  # the instance now shadows the class attribute
    assert torch.equal(dynamo_lite.compile(f, backend="eager")(torch.ones(2), shadowed), torch.ones(2) * 3 + 10)
