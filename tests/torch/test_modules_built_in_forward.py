"""nn modules built inside compiled code (``loss_fct = CrossEntropyLoss()`` in forward, as
Hugging Face models do; ``BoxBlur((3, 3))(img)`` in a test): a stateless module of torch.nn's own
classes is traced without a break, a new object on every call where it outlives the graph, and
passing one made anew on every call to a resume function does not recompile (its type and
structure are guarded, not its identity).  So is a library's module class whose construction is
nn.Module's own (only a forward, as transformers' activations built by ``ACT2FN[...]``).  A user
class with an ``__init__`` of its own has it traced (nn.Module's ``__init__``, ``__setattr__``,
``__getattr__``, ``register_buffer`` and ``__call__`` answered by the tracer) and is rebuilt with
eager's ``__dict__`` when it outlives the graph.  Modules with weights of their own still break
(DL0016): Python builds them, and the resume function that uses one guards its type and
structure, not its identity (no recompile per call).
"""
import torch
from torch import nn

import dynamo_lite
from dynamo_lite.testing import CompileCounter, check_breaks, check_calls, event_kinds, recording
from dynamo_lite.testing import print_with_graph_break as print  # noqa: A001 - a graph break at each print

X = torch.randn(4, 5)
Y = torch.tensor([0, 1, 2, 3])


def test_loss_and_activation_built_in_forward_are_traced():
    def f(x, y):
        loss_fct = nn.CrossEntropyLoss()
        return loss_fct(x, y), nn.GELU(approximate="tanh")(x), nn.Softmax(dim=-1)(x)

    check_breaks(f, X, Y, breaks=0)


def test_built_module_that_escapes_is_a_new_object_on_each_call():
    def f(x):
        m = nn.Dropout(0.0)
        m.p = 0.0  # an attribute write, replayed on the object the caller gets
        return m(x), m

    check_breaks(f, X, breaks=0)
    compiled = dynamo_lite.compile(f)
    (_, a), (_, b) = compiled(X), compiled(X)
    assert a is not b and type(a) is nn.Dropout and a.p == 0.0


def test_module_built_before_a_break_does_not_recompile_the_resume_function():
    def f(x, y):
        loss_fct = nn.CrossEntropyLoss(reduction="sum")
        print("break")
        return loss_fct(x, y)

    cnt = CompileCounter()
    compiled = dynamo_lite.compile(f, backend=cnt)
    for _ in range(4):
        assert torch.allclose(compiled(X, Y), f(X, Y))
    assert cnt.frame_count == 1


def test_stateless_module_argument_with_other_attributes_recompiles():
    def f(loss, x, y):
        return loss(x, y)

    check_calls(f, [(nn.CrossEntropyLoss(), X, Y), (nn.CrossEntropyLoss(reduction="sum"), X, Y),
                    (nn.CrossEntropyLoss(label_smoothing=0.1), X, Y), (nn.MSELoss(), X, X)], graphs=None)


def test_module_with_weights_built_in_forward_still_breaks():
    def f(x):
        return nn.Linear(5, 2)(x).shape

    check_breaks(f, X, breaks=1)


def test_constructor_that_warns_breaks_so_python_warns_on_every_call():
    def f(x, y):
        return nn.CrossEntropyLoss(size_average=True)(x, y)

    check_breaks(f, X, Y, breaks=1)


def test_frame_without_tensors_called_natively_is_not_specialised_to_the_limit():
    """A config-like object's __getattribute__, called by a natively run deepcopy with a new key
    each time, has nothing to capture: it runs as it is, never hitting the cache limit."""
    import copy
    import warnings as _warnings

    class Config:
        def __init__(self):
            self.a, self.b = 1, [2, 3]

        def __getattribute__(self, key):
            return super().__getattribute__(key)

    def f(x, cfg):
        print("break")  # deepcopy below runs natively after the break
        return x + copy.deepcopy(cfg).a

    cnt = CompileCounter()
    compiled = dynamo_lite.compile(f, backend=cnt)
    with _warnings.catch_warnings():
        _warnings.simplefilter("error")
        seen, collecting = recording()
        with collecting:
            for _ in range(3):
                assert torch.equal(compiled(X, Config()), X + 1)
    assert "CacheLimitEvent" not in event_kinds(seen)
    assert "RecompileEvent" not in event_kinds(seen)


# ---- a library's own activation classes looked up in forward (transformers' ACT2FN[...]) -----
class _SiLUActivation(nn.Module):  # only a forward: construction is nn.Module's own
    def forward(self, x):
        return nn.functional.silu(x)


class _ScaledActivation(nn.Module):  # an __init__ of its own: Python runs the construction
    def __init__(self, scale=2.0):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return x * self.scale


class _ClassInstantier(dict):
    def __getitem__(self, key):
        content = super().__getitem__(key)
        cls, kwargs = content if isinstance(content, tuple) else (content, {})
        return cls(**kwargs)


ACT2FN = _ClassInstantier({"silu": _SiLUActivation, "leaky": (nn.LeakyReLU, {"negative_slope": 0.2}),
                           "scaled": _ScaledActivation})


def test_activation_built_by_a_dict_subclass_lookup_is_traced_and_does_not_recompile():
    def f(x):
        return ACT2FN["silu"](x) + ACT2FN["leaky"](x)

    check_breaks(f, X, breaks=0)
    check_calls(f, [X, X, X], hits=(1, 2))


def test_library_module_with_its_own_init_is_traced():
    def f(x):
        return ACT2FN["scaled"](x) + 1

    check_breaks(f, X, breaks=0)
    check_calls(f, [X, X], hits=(1,))


def test_changing_the_lookup_table_recompiles():
    def f(x):
        return ACT2FN["silu"](x)

    def swap():
        ACT2FN["silu"] = nn.ReLU if dict.__getitem__(ACT2FN, "silu") is _SiLUActivation else _SiLUActivation

    try:
        check_calls(f, [X, {"args": lambda: (swap(), X)[1:]}, X])
    finally:
        ACT2FN["silu"] = _SiLUActivation


# ---- a module with weights or an __init__ of its own, built in forward: Python builds it (the
# graph breaks at the construction), and the resume function that uses it guards its type and
# structure, not its identity: weights drawn from torch's RNG as eager does, no recompile per call

class _WithLinear(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.lin = nn.Linear(n, n)

    def forward(self, x):
        return self.lin(x).relu()


class _Scaled(nn.Module):
    def __init__(self, k):
        super().__init__()
        self.k = k
        self.act = nn.ReLU() if k > 2 else nn.Tanh()

    def forward(self, x):
        return self.act(x * self.k)


def test_module_with_weights_built_in_forward_is_used_without_recompiling():
    def f(x):
        return _WithLinear(x.shape[-1])(x) + 1

    cnt = check_calls(f, [X] * 6, hits=(1, 2, 3, 4, 5), rng=True)
    assert cnt.frame_count == 1
    check_breaks(f, X, breaks=None)


def test_module_with_its_own_init_built_in_forward_recompiles_only_when_its_structure_changes():
    k = [3]

    def f(x):
        return _Scaled(k[0])(x)

    def set_k(v):
        return lambda: (k.__setitem__(0, v), X)[1:]

    # k=3 and k=5 differ in a Python attribute, k=1 in the submodule's type: one graph each
    cnt = check_calls(f, [set_k(3), set_k(3), set_k(1), set_k(1), set_k(3), set_k(5)], hits=(1, 3, 4), graphs=None)
    assert cnt.frame_count == 3


def test_module_class_defined_and_built_in_forward_is_used_without_recompiling():
    # the class statement makes a new class (and new methods) on every call: the resume function
    # guards that its instance's class was made by the same statement, and the methods' code
    def f(x):
        class Local(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(5, 3)

            def forward(self, x, k=2):
                return self.helper(self.lin(x)) * k

            def helper(self, y):
                return y.relu()

        return Local()(x)

    cnt = check_calls(f, [X] * 6, hits=(1, 2, 3, 4, 5), rng=True)
    assert cnt.frame_count == 1


def test_method_replaced_on_a_class_defined_in_forward_recompiles():
    def f(x, swap):
        class Local(nn.Module):
            def __init__(self):
                super().__init__()
                self.k = 2

            def forward(self, x):
                return x * self.k

        if swap:
            Local.forward = _subtract_one
        return Local()(x)

    check_calls(f, [(X, False), (X, True), (X, False), (X, True)], graphs=None)


def _subtract_one(self, x):
    return x - 1


# ---- a user module class with an __init__ of its own, built in compiled code: its __init__ is
# traced (nn.Module's __init__, __setattr__, __getattr__, register_buffer and __call__ answered
# by the tracer), and a module that outlives the graph is rebuilt with eager's __dict__

class _Blur(nn.Module):
    def __init__(self, k, scale=1.0):
        super().__init__()
        self.k = k
        self.scale = scale
        self.register_buffer("kernel", torch.ones(k) / k)
        self.register_buffer("scratch", torch.zeros(1), persistent=False)
        self.act = nn.Tanh()

    def forward(self, x):
        return self.act(x * self.kernel.sum() * self.scale) + self.scratch


class _Wrapper(nn.Module):
    """torchsde's ForwardSDE: wraps a module it is given."""

    def __init__(self, inner, name="w"):
        super().__init__()
        self.name = name
        self.inner = inner
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return self.inner(x) * 2


def _module_picture(m: nn.Module) -> list:
    """What a user sees of a module beyond its tensors: its __dict__ in order, its tables' keys
    and its children's types."""
    return [type(m), list(vars(m)), list(m._parameters), list(m._buffers), sorted(m._non_persistent_buffers_set),
            [(k, type(v)) for k, v in m._modules.items()],
            {k: v for k, v in vars(m).items() if not k.startswith("_") and not isinstance(v, torch.Tensor)}]


def test_module_with_its_own_init_built_and_called_in_forward_is_traced():
    def f(x):
        return _Blur(3, scale=0.5)(x) + _Wrapper(_Blur(2))(x)

    check_breaks(f, X, breaks=0)


def test_module_built_in_forward_that_escapes_has_eager_state():
    def f(x):
        w = _Wrapper(_Blur(4), name="outer")
        return w(x), w

    check_breaks(f, X, breaks=0)
    (_, eager) = f(X)
    compiled = dynamo_lite.compile(f, backend="eager")
    (_, a), (_, b) = compiled(X), compiled(X)
    assert a is not b and a.inner is not b.inner  # a new module on every call, as in eager
    for got in (a, b):
        assert _module_picture(got) == _module_picture(eager)
        assert _module_picture(got.inner) == _module_picture(eager.inner)
        assert list(got.state_dict()) == list(eager.state_dict()) == ["inner.kernel"]
        assert got.calls == 1 and got.training


def test_module_built_around_an_argument_module_keeps_its_parameters_and_gradients():
    lin = nn.Linear(5, 5)

    def f(x, model):
        return _Wrapper(model)(x).sum()

    check_breaks(f, X, lin, breaks=0)
    check_calls(f, [(X, lin), (X, lin)], backward=True, hits=(1,))


def test_module_setattr_rules_in_a_traced_init():
    class Rules(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("buf", torch.zeros(2))
            self.buf = torch.ones(2)  # still a buffer
            self.child = 3
            self.child = nn.ReLU()  # a module replaces the plain attribute
            self.gone = nn.Tanh()
            self.gone = None  # a child slot set to None stays in _modules
            self.flag = True

        def forward(self, x):
            return x + self.buf.sum() if self.gone is None else x

    def f(x):
        m = Rules()
        return m(x), m

    check_breaks(f, X, breaks=0)
    got, eager = dynamo_lite.compile(f, backend="eager")(X)[1], f(X)[1]
    assert _module_picture(got) == _module_picture(eager)


def test_module_construction_errors_are_raised_as_eager_raises():
    class Early(nn.Module):
        def __init__(self):
            self.child = nn.ReLU()  # before nn.Module.__init__: AttributeError
            super().__init__()

    class Twice(nn.Module):
        def __init__(self):
            super().__init__()
            self.x = 1
            self.register_buffer("x", torch.ones(1))  # KeyError: attribute 'x' already exists

    class Args(nn.Module):
        def __init__(self):
            super().__init__(3)  # TypeError

    for cls in (Early, Twice, Args):
        def f(x):
            try:
                cls()
            except (AttributeError, KeyError, TypeError) as e:
                return x + 1, type(e).__name__
            return x, None

        check_breaks(f, X, breaks=None, raises=None)

        def g(x):
            return cls()(x)

        check_breaks(g, X, breaks=None, raises=(AttributeError, KeyError, TypeError))


def test_module_with_a_parameter_of_its_own_built_in_forward_still_breaks():
    class WithParam(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.ones(5))

        def forward(self, x):
            return x * self.w

    def f(x):
        m = WithParam()
        return m(x), m

    # the parameter breaks (Python builds the module), and __init__'s own frame then runs eagerly
    check_breaks(f, X, breaks=2)
    check_calls(f, [X, X], rng=True, graphs=None)


def test_module_with_weights_built_in_forward_draws_random_numbers_only_as_eager_does():
    # (the tracer used to build a twin of the module to learn it had weights, drawing them from
    # torch's generator: the module Python then built had other weights than eager's)
    def f(x):
        return nn.Linear(5, 2)(x)

    check_calls(f, [X, X], rng=True, graphs=None)


def test_global_module_registration_hook_runs_and_is_guarded():
    from torch.nn.modules.module import register_module_module_registration_hook

    seen = []

    def f(x):
        return _Wrapper(nn.ReLU())(x)

    compiled = dynamo_lite.compile(f, backend="eager")
    assert torch.equal(compiled(X), f(X))
    handle = register_module_module_registration_hook(lambda m, name, v: seen.append(name))
    try:
        assert torch.equal(compiled(X), f(X))
        assert seen == ["inner", "inner"]  # eager's call and the compiled call each ran it
    finally:
        handle.remove()


def test_forward_hook_registered_on_a_module_built_in_forward_runs():
    def f(x):
        m = _Blur(2)
        m.register_forward_hook(lambda mod, args, out: out * 10)
        return m(x)

    check_breaks(f, X, breaks=None)


def test_attribute_writes_on_a_torch_module_built_in_forward_reach_the_module_the_caller_gets():
    # (they were dropped: the caller got a module built from the constructor's arguments only)
    def f(x):
        m = nn.Dropout(0.0)
        m.p = 0.5
        m.training = False
        m.cache = x * 2
        return m(x), m

    check_breaks(f, X, breaks=0)
    got = dynamo_lite.compile(f, backend="eager")(X)[1]
    assert (got.p, got.training) == (0.5, False) and torch.equal(got.cache, X * 2)


class _Tree(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("kernel", torch.ones(3) / 3)
        self.register_buffer("index", torch.arange(3))
        self.register_buffer("nothing", None)
        self.blur = _Blur(2)
        self.act = nn.Dropout(0.5)

    def forward(self, x):
        return self.act(self.blur(x) * self.kernel.sum()) + self.index.sum()


def test_to_eval_and_train_of_a_module_built_in_forward_apply_to_its_whole_tree():
    def f(x):
        m = _Tree().to("cpu", torch.float64).eval()
        return m(x.double()), m, m.blur.training, m.act.training, m.index.dtype, m.blur.kernel.dtype

    def g(x):
        m = _Tree().to(x.double())
        m.train(False)
        m.train()
        return m(x.double()), m.training, m.blur.training, m.act.training

    check_breaks(f, X, breaks=0)
    check_breaks(g, X, breaks=0)
    got = dynamo_lite.compile(f, backend="eager")(X)[1]
    assert _module_picture(got) == _module_picture(f(X)[1])
    assert [m.training for m in got.modules()] == [False] * 4


def test_to_of_a_module_built_in_forward_with_an_integer_dtype_raises_as_eager():
    def f(x):
        return _Tree().to(torch.int64)(x)

    check_breaks(f, X, breaks=None, raises=TypeError)


def test_eval_of_a_module_built_in_forward_calls_its_own_train():
    calls = []

    class Loud(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("k", torch.ones(5))

        def train(self, mode=True):
            calls.append(mode)
            return super().train(mode)

        def forward(self, x):
            return x * self.k

    def f(x):
        m = Loud().eval()
        return m(x), m.training

    check_breaks(f, X, breaks=0)
    assert calls == [False, False]  # eager's call, then the compiled one


def test_attributes_set_before_nn_module_init_keep_their_place():
    class Early(nn.Module):
        def __init__(self, k):
            self.tag = "early"  # a plain attribute may come before nn.Module.__init__
            super().__init__()
            self.k = k

        def forward(self, x):
            return x * self.k

    def f(x):
        m = Early(3)
        return m(x), m

    check_breaks(f, X, breaks=0)
    got, eager = dynamo_lite.compile(f, backend="eager")(X)[1], f(X)[1]
    assert list(vars(got)) == list(vars(eager)) and list(vars(got))[:2] == ["tag", "training"]


def test_module_built_after_torch_compile_replaced_nn_module_init_is_traced():
    # once torch.compile has run in the process, nn.Module.__init__ is TorchDynamo's wrapper of it
    torch.compile(lambda x: x + 1, backend="eager")(X)
    assert nn.Module.__init__.__qualname__ != "Module.__init__"

    def f(x):
        m = _Wrapper(_Blur(3))
        return m(x), m

    check_breaks(f, X, breaks=0)


class _Dispatching(nn.Module):
    """torchsde's ForwardSDE: its __init__ stores bound methods of itself, picked by what the
    wrapped object has."""

    def __init__(self, inner):
        super().__init__()
        self.f = getattr(inner, "f", self.f_default)
        self.prod = {1: self.prod_diagonal}.get(2, self.prod_default)

    def f_default(self, x):
        return x * 2

    def prod_diagonal(self, a, b):
        return a * b

    def prod_default(self, a, b):
        return a + b


class _Holder:
    def __init__(self):
        self.me = self.value
        self.members = [self]

    def value(self):
        return 3


def test_modules_and_objects_whose_attributes_refer_to_them_are_rebuilt():
    # a module built in the trace holding bound methods of itself cannot be rebuilt by calling
    # its class with its attributes: made blank first, then filled (87 breaks in torchsde)
    def f(x):
        m = _Dispatching(object())
        h = _Holder()
        return m.f(x) + m.prod(x, x), m, h, h.me()

    out = check_breaks(f, torch.ones(3), breaks=0)
    module, holder = out.value[1], out.value[2]
    assert module.f.__self__ is module and module.prod.__func__ is _Dispatching.prod_default
    assert holder.members[0] is holder and holder.me() == 3
