"""nn.Module calls, attributes and training steps through compiled code.

Every test compares compiled with eager through dynamo_lite.testing; known bugs are strict
xfails in tests/test_known_bugs.py.
"""
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F

import dynamo_lite
from dynamo_lite.testing import assert_same, assert_same_as_eager
from dynamo_lite.testing import check_module


def _compiled(fn, backend="eager"):
    return dynamo_lite.compile(fn, backend=backend)


# ---------------------------------------------------------------------------
# nn.Module
# ---------------------------------------------------------------------------
class _Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.bn = nn.BatchNorm1d(4)
        self.drop = nn.Dropout(0.5)

    def forward(self, x, scale=1.0, *extra, bias=None, **kw):
        y = self.drop(self.bn(self.lin(x))) * scale
        for e in extra:
            y = y + e
        if bias is not None:
            y = y + bias
        if kw.get("neg"):
            y = -y
        return y


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([_Block() for _ in range(2)])
        self.heads = nn.ModuleDict({"a": nn.Linear(4, 2), "b": nn.Linear(4, 3)})
        self.seq = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4))
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))

    def forward(self, x, head="a"):
        self.steps += 1
        for i, b in enumerate(self.blocks):
            x = b(x) if i % 2 == 0 else b(x, 0.5, x, bias=1.0, neg=True)
        x = self.seq[0](x) + self.seq[-1](x) + self.seq[1:](x)
        return self.heads[head](x), len(self.seq), [k for k in self.heads]


def test_nested_containers_defaults_star_args_and_train_eval_switching():
    x = torch.randn(5, 4)
    steps = [lambda m: m(x), lambda m: m(x, "b"), lambda m: m.eval() and m(x), lambda m: m(x, head="b"),
             lambda m: m.train() and m(x)]
    check_module(_Net, steps, attrs=("steps",))


def test_training_steps_with_optimizer_outside_compiled_module():
    torch.manual_seed(0)
    em = _Net()
    cm_ = copy.deepcopy(em)
    cm = _compiled(cm_)
    eo = torch.optim.SGD(em.parameters(), lr=0.1, momentum=0.9)
    co = torch.optim.SGD(cm_.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(5, 4)
    for i in range(3):
        torch.manual_seed(i)
        le = em(x)[0].pow(2).sum()
        le.backward()
        eo.step()
        eo.zero_grad()
        torch.manual_seed(i)
        lc = cm(x)[0].pow(2).sum()
        lc.backward()
        co.step()
        co.zero_grad()
        assert_same(le, lc, f"loss {i}")
    assert_same(em.state_dict(), cm_.state_dict(), "state_dict")


class _Ema(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("avg", torch.zeros(3))
        self.register_buffer("count", torch.tensor(0), persistent=False)
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        if self.training:
            self.avg = 0.9 * self.avg + 0.1 * x.mean(0).detach()
            self.count += 1
        return self.lin(x - self.avg)


def test_buffer_reassigned_in_forward_stays_a_buffer():
    x = torch.randn(4, 3)
    steps = [lambda m: m(x), lambda m: m(x * 2), lambda m: (m.eval(), m(x))[1], lambda m: (m.train(), m(x))[1]]
    check_module(_Ema, steps, attrs=("avg", "count"))
    m = _Ema()
    _compiled(m)(torch.ones(2, 3))
    assert m._buffers["avg"] is m.avg and "avg" in m.state_dict() and "count" not in m.state_dict()


def test_batchnorm_running_stats_then_eval():
    torch.manual_seed(0)
    em = nn.BatchNorm1d(3, momentum=None)
    cm_ = copy.deepcopy(em)
    cm = _compiled(cm_)
    for _ in range(3):
        x = torch.randn(4, 3)
        assert_same(em(x), cm(x))
    em.eval()
    cm_.eval()
    x = torch.randn(4, 3)
    assert_same(em(x), cm(x))
    assert_same(em, cm_, "module")


def test_dropout_with_manual_seed_and_submodule_eval():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)
            self.drop = nn.Dropout(0.3)

        def forward(self, x):
            return self.drop(self.lin(x)), F.dropout(x, 0.5, self.training)

    torch.manual_seed(0)
    m = M()
    cm = _compiled(m)
    x = torch.randn(3, 4)
    for seed in (5, 6):
        torch.manual_seed(seed)
        a = m(x)
        torch.manual_seed(seed)
        assert_same(a, cm(x))
    m.drop.eval()
    torch.manual_seed(7)
    a = m(x)
    torch.manual_seed(7)
    assert_same(a, cm(x))
    m.eval()
    assert_same(m(x), cm(x))


def test_parameters_frozen_mutated_and_replaced_between_calls():
    torch.manual_seed(0)
    m = nn.Linear(3, 2)
    cm = _compiled(m)
    x = torch.randn(2, 3)
    assert cm(x).requires_grad
    m.requires_grad_(False)
    assert not cm(x).requires_grad
    with torch.no_grad():
        m.weight.mul_(0)
    assert_same(cm(x), m(x))
    m.weight = nn.Parameter(torch.ones(2, 3))
    assert_same(cm(x), m(x))
    assert cm(x).requires_grad
    m.weight = nn.Parameter(torch.ones(5, 3))
    m.bias = nn.Parameter(torch.zeros(5))
    assert_same(cm(x), m(x))
    del m.weight
    m.weight = torch.full((5, 3), 2.)
    r = cm(x)
    assert_same(r, m(x))


def test_forward_hooks_added_and_removed_between_calls():
    m = nn.Linear(3, 3)
    cm = _compiled(m)
    x = torch.randn(2, 3)
    calls = []
    h = m.register_forward_hook(lambda mod, inp, out: out * 0)
    assert_same(cm(x), m(x))
    assert not cm(x).any()
    h.remove()
    assert_same(cm(x), m(x))
    h = m.register_forward_pre_hook(lambda mod, inp: (inp[0] * 0,))
    assert_same(cm(x), m(x))
    assert_same(cm(x), m.bias.expand(2, 3))
    h.remove()
    m.register_forward_hook(lambda mod, args, kwargs, out: calls.append(len(kwargs)) or out + 1, with_kwargs=True)
    assert_same(cm(x), m(x))
    assert calls == [0, 0]


def test_compile_then_module_to_float64():
    torch.manual_seed(0)
    em = nn.Sequential(nn.Linear(3, 3), nn.Tanh())
    cm_ = copy.deepcopy(em)
    cm = _compiled(cm_)
    x = torch.randn(2, 3)
    assert_same(em(x), cm(x))
    em.to(torch.float64)
    cm.to(torch.float64)
    assert_same(em(x.double()), cm(x.double()))
    assert_same_as_eager(lambda m, t: m(t), em, x, compiled_fn=lambda m, t: cm(t))  # dtype mismatch error


def test_module_with_star_args_and_kwargs_forward():
    class M(nn.Module):
        def forward(self, *xs, **kw):
            s = sum(xs)
            for k, v in sorted(kw.items()):
                s = s * v
            return s, len(xs), sorted(kw)

    m = M()
    cm = _compiled(m)
    a = torch.ones(2)
    for args, kw in [((a, a), {"b": 2.0}), ((a,), {}), ((a, a, a), {"z": 3, "a": torch.full((2,), 2.)})]:
        assert_same(m(*args, **kw), cm(*args, **kw))


def test_module_containers_change_between_calls():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
            self.d = nn.ModuleDict({"a": nn.Linear(2, 2), "b": nn.Identity()})

        def forward(self, x):
            for layer in self.layers[1:]:
                x = layer(x)
            out = {k: mod(x) for k, mod in self.d.items()}
            return x, len(self.layers), out, "a" in self.d

    torch.manual_seed(0)
    m = M()
    cm = _compiled(m)
    x = torch.ones(1, 2)
    assert_same(m(x), cm(x))
    m.layers.append(nn.Linear(2, 2))
    m.d["c"] = nn.ReLU()
    assert_same(m(x), cm(x))
    del m.layers[0]
    del m.d["a"]
    assert_same(m(x), cm(x))


def test_compiled_module_method_and_no_grad_decorated_method():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.l = nn.Linear(2, 2)

        @torch.no_grad()
        def predict(self, x):
            return self.l(x)

        def forward(self, x):
            return self.predict(x), self.l(x)

        def other(self, x, k=2):
            return self.l(x) * k

    torch.manual_seed(0)
    m = M()
    co = _compiled(m.other)
    x = torch.randn(1, 2)
    assert_same(co(x), m.other(x))
    assert_same(co(x, k=3), m.other(x, k=3))
    a, b = _compiled(m)(x)
    assert not a.requires_grad and b.requires_grad


def test_state_dict_load_and_deepcopy_of_compiled_module():
    torch.manual_seed(0)
    m = nn.Linear(2, 2)
    cm = _compiled(m)
    x = torch.ones(1, 2)
    a = cm(x)
    cm2 = copy.deepcopy(cm)
    cm.load_state_dict({k: torch.zeros_like(v) for k, v in m.state_dict().items()})
    assert_same(cm(x), torch.zeros(1, 2, requires_grad=True))
    assert_same(cm2(x), a)


class _Built(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(2, 2)

    def forward(self, x):
        return self.lin(x)


def test_module_built_inside_compiled_code_runs_its_init_in_python():
    """The __init__ frame sees a half-built module (no nn.Module state yet): it runs eagerly,
    with no internal error (the suite raises internal errors), and the result equals eager."""
    def f(x):
        torch.manual_seed(0)
        m = _Built()
        return m(x).sum(), m.training

    assert_same_as_eager(f, torch.ones(2))


# ---- forward hooks (transformers 5 installs output-capturing hooks on submodules) ----------
def _capturing_model(collector):
    """Submodules carry closures as hooks, like transformers' output_capturing_hook: it reads a
    global collector and returns None (the output is kept)."""
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))

    def install(module, key):
        def output_capturing_hook(mod, args, output):
            if collector.get(key) is None:
                return
            collector[key].append(output)
        module.register_forward_hook(output_capturing_hook)

    install(model[0], "first")
    install(model[2], "last")
    model[1].register_forward_pre_hook(lambda mod, args: args[0] * 2)  # a non-tuple result: the one argument
    model[2].register_forward_hook(lambda mod, args, out: out + args[0].sum())  # replaces the output
    return model


def test_forward_hooks_and_pre_hooks_are_traced_without_a_break():
    from dynamo_lite.testing import check_breaks, check_calls

    capturing = _capturing_model({"first": None, "last": []})
    check_breaks(lambda x: capturing(x), torch.randn(3, 4), breaks=0)
    idle = _capturing_model({"first": None, "last": None})  # hooks installed, not capturing
    check_calls(lambda x: idle(x), [torch.ones(3, 4), torch.ones(3, 4), torch.ones(3, 4)], hits=(1, 2))


def test_forward_hook_with_kwargs_still_breaks_and_fires_as_eager():
    from dynamo_lite.testing import check_breaks

    model = nn.Linear(4, 4)
    model.register_forward_hook(lambda mod, args, kwargs, out: out * 3, with_kwargs=True)
    check_breaks(lambda x: model(x).relu(), torch.randn(2, 4), breaks=1)


# ---- compile(module) of a module with hooks: hooks and forward in one graph -------------------
def _counting_backend():
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward
    return graphs, backend


def test_compiled_module_with_forward_hooks_is_one_graph_and_recompiles_on_a_new_hook():
    torch.manual_seed(0)
    m = nn.Linear(4, 4)
    m.register_forward_pre_hook(lambda mod, args: (args[0] + 1,))
    m.register_forward_hook(lambda mod, args, out: out * 2)
    graphs, backend = _counting_backend()
    cm = dynamo_lite.compile(m, backend=backend)
    x = torch.randn(3, 4)
    for _ in range(3):
        assert_same(cm(x), m(x))
    assert len(graphs) == 1  # the hooks and forward, as torch.compile
    h = m.register_forward_hook(lambda mod, args, out: out - 1)
    assert_same(cm(x), m(x))
    assert len(graphs) == 2
    h.remove()
    assert_same(cm(x), m(x))  # the first entry again
    assert len(graphs) == 2


def test_compiled_module_with_a_backward_hook_runs_every_hook_as_eager():
    torch.manual_seed(0)
    em = nn.Linear(4, 4)
    cm_ = copy.deepcopy(em)
    grads = {"eager": [], "compiled": []}
    for mod, key in ((em, "eager"), (cm_, "compiled")):
        mod.register_full_backward_hook(lambda m, gi, go, key=key: grads[key].append(go[0].clone()))
        mod.register_forward_hook(lambda m, args, out: out.relu())
    cm = dynamo_lite.compile(cm_, backend="eager")
    x = torch.randn(3, 4)
    ye, yc = em(x), cm(x)
    assert_same(yc, ye)
    ye.sum().backward()
    yc.sum().backward()
    assert len(grads["eager"]) == len(grads["compiled"]) == 1
    assert_same(grads["compiled"][0], grads["eager"][0])
    assert_same(cm_.weight.grad, em.weight.grad)


def test_compiled_module_whose_hook_raises_raises_as_eager():
    m = nn.Linear(4, 4)

    def bad_hook(mod, args, out):
        raise ValueError("no")

    m.register_forward_hook(bad_hook)
    cm = dynamo_lite.compile(m, backend="eager")
    x = torch.randn(2, 4)
    for fn in (m, cm):
        try:
            fn(x)
        except ValueError as e:
            assert str(e) == "no"
        else:
            raise AssertionError("the hook's error was not raised")


def test_recurrent_modules_are_one_graph_and_follow_a_replaced_weight():
    # nn.RNNBase.forward asks whether its weights changed by calling the weakrefs it keeps
    # (`ref() is not weight`): calling a weakref broke the graph twice on every LSTM/GRU call
    from dynamo_lite.testing import check_calls

    for cls in (nn.LSTM, nn.GRU):
        torch.manual_seed(0)
        m = cls(4, 5, num_layers=2, batch_first=True, bidirectional=True)

        def f(x):
            out, h = m(x)
            return out.sum(1), h

        info = dynamo_lite.explain(f, torch.randn(2, 3, 4))
        assert (info.graph_count, info.graph_break_count) == (1, 0), [b.reason for b in info.break_reasons]
        check_calls(f, [(torch.randn(2, 3, 4),), (torch.randn(2, 6, 4),)], backward=True, graphs=1)
        eager_m = copy.deepcopy(m)
        compiled = dynamo_lite.compile(lambda x: m(x)[0], backend="eager")
        x = torch.randn(2, 3, 4)
        assert_same(compiled(x), eager_m(x)[0])
        new = torch.randn_like(m.weight_ih_l0)
        m.weight_ih_l0 = nn.Parameter(new.clone())  # the weakref now points elsewhere (or nowhere)
        eager_m.weight_ih_l0 = nn.Parameter(new.clone())
        assert_same(compiled(x), eager_m(x)[0])
