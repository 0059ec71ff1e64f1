"""Acceptance: nn.Module under compile - custom modules, attributes changing between
calls, buffers, train/eval, hooks, containers of modules, parameters' gradients.

Two modules are built from the same seed (check_module); one is compiled with
dynamo_lite.compile(module); every step runs on both and results, state_dict,
parameter grads and selected attributes must match.  Helpers:
dynamo_lite/testing.py.
"""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import dynamo_lite
from dynamo_lite.testing import CompileCounter, assert_same
from dynamo_lite.testing import check, check_module, seed_all


class MLP(nn.Module):
    def __init__(self, d=4, h=8):
        super().__init__()
        self.fc1 = nn.Linear(d, h)
        self.fc2 = nn.Linear(h, d)
        self.act = nn.ReLU()
        self.scale = 1.0

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x))) * self.scale


class WithBuffer(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.register_buffer("running", torch.zeros(3))
        self.register_buffer("steps", torch.tensor(0))
        self.calls = 0

    def forward(self, x):
        y = self.lin(x)
        if self.training:
            self.running.mul_(0.9).add_(y.detach().mean(0) * 0.1)
            self.steps += 1
        self.calls += 1
        return y - self.running


X4 = torch.randn(2, 4)


def to_eval(m):
    m.eval()


def to_train(m):
    m.train()

X3 = torch.randn(5, 3)


def test_mlp_forward_and_backward():
    check_module(MLP, [lambda m: m(X4), lambda m: m(X4 * 2)], backward=True)


def test_plain_attribute_changes_between_calls():
    def set_scale(m):
        m.scale = 3.0

    check_module(MLP, [lambda m: m(X4), set_scale, lambda m: m(X4)], attrs=["scale"])


def test_buffers_updated_in_place_and_python_counter():
    check_module(WithBuffer, [lambda m: m(X3), lambda m: m(X3), to_eval, lambda m: m(X3),
                              to_train, lambda m: m(X3)], attrs=["calls", "running", "steps"])


def test_batchnorm_dropout_train_eval():
    def factory():
        return nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.Dropout(0.5), nn.Linear(6, 2))

    check_module(factory, [lambda m: m(X4), to_eval, lambda m: m(X4), to_train,
                           lambda m: m(X4)], backward=True)


def test_forward_pre_hook_and_forward_hook_fire_like_eager():
    log = []

    def factory():
        m = MLP()
        m.register_forward_pre_hook(lambda mod, args: log.append(("pre", args[0].shape)))
        m.register_forward_hook(lambda mod, args, out: out * 2)
        m.fc1.register_forward_hook(lambda mod, args, out: log.append(("fc1", out.shape)))
        return m

    def step(m):
        del log[:]
        out = m(X4)
        return out, list(log)

    check_module(factory, [step, step])


def test_hook_added_and_removed_between_calls():
    def factory():
        return MLP()

    handles = {}

    def add(m):
        handles[id(m)] = m.register_forward_hook(lambda mod, a, out: out + 100)

    def remove(m):
        handles.pop(id(m)).remove()

    check_module(factory, [lambda m: m(X4), add, lambda m: m(X4), remove, lambda m: m(X4)])


def test_backward_hook_on_module_and_tensor_hook():
    grads = []

    def factory():
        m = MLP()
        m.fc2.register_full_backward_hook(lambda mod, gi, go: grads.append(go[0].shape))
        return m

    def step(m):
        del grads[:]
        out = m(X4)
        out.sum().backward()
        return out, list(grads), m.fc1.weight.grad

    check_module(factory, [step])


def test_parameter_replaced_and_requires_grad_toggled():
    def swap(m):
        m.fc1.weight = nn.Parameter(torch.ones_like(m.fc1.weight))

    def freeze(m):
        m.fc2.weight.requires_grad_(False)

    def step(m):
        out = m(X4)
        return out, out.requires_grad

    check_module(MLP, [step, swap, step, freeze, step], backward=True)


def test_submodule_replaced_between_calls():
    def swap(m):
        m.act = nn.Tanh()

    check_module(MLP, [lambda m: m(X4), swap, lambda m: m(X4)])


def test_module_containers_modulelist_moduledict_sequential():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])
            self.heads = nn.ModuleDict({"a": nn.Linear(4, 1), "b": nn.Linear(4, 2)})
            self.seq = nn.Sequential(nn.Linear(4, 4), nn.GELU())
            self.params = nn.ParameterList([nn.Parameter(torch.randn(4)) for _ in range(2)])

        def forward(self, x):
            for i, layer in enumerate(self.layers):
                x = layer(x) + self.params[i % 2]
            x = self.seq[0](x) + self.seq(x)
            out = {k: h(x) for k, h in self.heads.items()}
            return out, len(self.layers), list(self.heads.keys())

    check_module(Net, [lambda m: m(X4)], backward=True)


def test_module_methods_and_properties_called_from_forward():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        @property
        def dim(self):
            return self.lin.in_features

        def helper(self, x, k=2):
            return x * k + self.lin.bias

        def forward(self, x):
            return self.helper(self.lin(x)) / self.dim, self.lin.weight.shape, self.lin.weight.dtype

    check_module(Net, [lambda m: m(X4)], backward=True)


def test_parameters_iteration_named_modules_and_numel():
    class Net(MLP):
        def forward(self, x):
            n = sum(p.numel() for p in self.parameters())
            names = [name for name, _ in self.named_parameters()]
            reg = sum((p ** 2).sum() for p in self.parameters())
            return super().forward(x) + reg * 0.01, n, names, len(list(self.children()))

    check_module(Net, [lambda m: m(X4)], backward=True)


def test_compiled_method_of_module_and_compile_of_bound_forward():
    seed_all()
    m_e = MLP()
    seed_all()
    m_c = MLP()
    opt = dynamo_lite.compile(m_c.forward, backend="eager")
    assert_same(m_e(X4), opt(X4))
    m_c.scale = 4.0
    m_e.scale = 4.0
    assert_same(m_e(X4), opt(X4))


def test_function_taking_module_argument_inlines_it():
    def f(m, x):
        return m(x) + m.fc1(x).sum(), m.training

    seed_all()
    check(f, MLP(), X4, backward=True)


def test_module_call_kwargs_and_multiple_outputs():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x, *, mask=None, return_hidden=False):
            h = self.lin(x)
            if mask is not None:
                h = h.masked_fill(mask, 0.0)
            return (h.sum(), h) if return_hidden else h.sum()

    mask = X4 > 0
    check_module(Net, [lambda m: m(X4), lambda m: m(X4, mask=mask), lambda m: m(X4, return_hidden=True)])


def test_nn_functional_and_builtin_layers():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(2, 3, 3, padding=1)
            self.norm = nn.LayerNorm([3, 6, 6])
            self.emb = nn.Embedding(10, 4)
            self.gru = nn.GRUCell(4, 4)

        def forward(self, img, ids):
            y = F.max_pool2d(F.relu(self.norm(self.conv(img))), 2)
            e = self.emb(ids)
            h = self.gru(e)
            return y.flatten(1), h

    img = torch.randn(2, 2, 6, 6)
    ids = torch.tensor([1, 5])
    check_module(Net, [lambda m: m(img, ids)], backward=True)


def test_multihead_attention_and_transformer_layer():
    def factory():
        return nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16, dropout=0.0, batch_first=True)

    x = torch.randn(2, 5, 8)
    check_module(factory, [lambda m: m(x), to_eval, lambda m: m(x)], backward=True)


def test_module_attribute_mutated_inside_forward():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)
            self.history = []
            self.last = None
            self.n = 0

        def forward(self, x):
            self.n += 1
            y = self.lin(x)
            self.last = y.detach()
            self.history.append(self.n)
            return y

    check_module(Net, [lambda m: m(X4), lambda m: m(X4 + 1)], attrs=["n", "last", "history"])


def test_module_state_dict_load_between_calls():
    def load(m):
        sd = {k: torch.full_like(v, 0.1) for k, v in m.state_dict().items()}
        m.load_state_dict(sd)

    check_module(MLP, [lambda m: m(X4), load, lambda m: m(X4)])


def test_optimizer_step_between_compiled_calls():
    def factory():
        m = MLP()
        m.opt = torch.optim.SGD(m.parameters(), lr=0.1)
        return m

    def train_step(m):
        m.opt.zero_grad()
        loss = m(X4).pow(2).mean()
        loss.backward()
        m.opt.step()
        return loss

    check_module(factory, [train_step, train_step, train_step])


def test_module_no_grad_inference_with_eval():
    def step(m):
        m.eval()
        with torch.no_grad():
            out = m(X4)
        return out, out.requires_grad

    check_module(MLP, [step])


def test_recompile_counts_for_module_attribute_changes():
    cnt = CompileCounter()
    m = MLP()
    opt = dynamo_lite.compile(m, backend=cnt)
    opt(X4)
    opt(X4)
    assert cnt.frame_count == 1
    m.scale = 2.0
    out = opt(X4)
    assert_same(out, m.__class__.forward(m, X4))
    assert cnt.frame_count == 2


def test_global_forward_hook_fires():
    seen = []
    handle = nn.modules.module.register_module_forward_hook(lambda mod, a, out: seen.append(
        type(mod).__name__.replace("Optimized", "")))  # the compiled module's class is OptimizedMLP (by design)
    try:
        def step(m):
            seen.clear()
            return m(X4), list(seen)

        check_module(MLP, [step, step])
    finally:
        handle.remove()


def test_state_dict_keys_and_module_repr_of_compiled_module():
    m = MLP()
    opt = dynamo_lite.compile(m, backend="eager")
    assert list(opt.state_dict().keys()) == list(m.state_dict().keys())
    assert isinstance(opt, MLP)
    opt(X4)
    assert opt.fc1 is m.fc1


# ---------------------------------------------------------------- stateful and unusual modules

class Stateful(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.cache = None

    def forward(self, x):
        h = self.lin(x)
        if self.cache is not None:
            h = h + self.cache
        self.cache = h.detach()
        return h


def test_module_caches_a_tensor_between_calls():
    check_module(Stateful, [lambda m: m(X4)] * 3, attrs=["cache"])


def test_attribute_deleted_in_forward():
    class DelAttr(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)
            self.tmp = 1

        def forward(self, x):
            if hasattr(self, "tmp"):
                del self.tmp
                return self.lin(x)
            return self.lin(x) * 2

    check_module(DelAttr, [lambda m: m(X4)] * 3, graphs=None)


def test_train_mode_toggled_inside_forward():
    class Toggle(nn.Module):
        def __init__(self):
            super().__init__()
            self.d = nn.Dropout(0.5)

        def forward(self, x):
            self.train(False)
            y = self.d(x)
            self.train(True)
            return y, self.training

    check_module(Toggle, [lambda m: m(X4)] * 2, graphs=None)


def test_tied_weights_and_plain_list_of_submodules():
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(4, 4, bias=False)
            self.b = nn.Linear(4, 4, bias=False)
            self.b.weight = self.a.weight
            self.order = [self.b, self.a]

        def forward(self, x):
            for layer in self.order:
                x = layer(x)
            return x

    check_module(Tied, [lambda m: m(X4)] * 2, backward=True)


def test_dtype_and_requires_grad_of_parameters_changed_between_calls():
    def to_double(m):
        m.double()

    def to_float(m):
        m.float()

    def freeze(m):
        m.requires_grad_(False)

    def zero_grad(m):
        m.zero_grad()

    check_module(lambda: nn.Linear(4, 2), [lambda m: m(X4), to_double, lambda m: m(X4.double()), to_float,
                                           lambda m: m(X4), zero_grad, freeze, lambda m: (m(X4), m(X4).requires_grad)],
                 backward=True)


def test_hooks_with_kwargs_and_prepend():
    def factory():
        m = nn.Linear(4, 4)
        m.register_forward_pre_hook(lambda mod, args, kwargs: ((args[0] * 2,), kwargs), with_kwargs=True)
        m.register_forward_hook(lambda mod, args, kwargs, out: out + 1, with_kwargs=True, prepend=True)
        m.register_forward_hook(lambda mod, args, out: out * 3)
        return m

    check_module(factory, [lambda m: m(X4)] * 2, graphs=None)


def test_module_overriding_call():
    class CallOverride(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def __call__(self, x):
            return super().__call__(x) * 3

        def forward(self, x):
            return self.lin(x)

    check_module(CallOverride, [lambda m: m(X4)] * 2)


def test_plain_tensor_attribute_replaced_and_mutated():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.randn(4, 4)

        def forward(self, x):
            return x @ self.w

    def change(m):
        m.w = torch.ones(4, 4)

    def inplace(m):
        m.w.mul_(2)

    check_module(M, [lambda m: m(X4), change, lambda m: m(X4), inplace, lambda m: m(X4)])


def test_buffer_and_python_counters_incremented():
    class Counter(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("n", torch.zeros(()))
            self.k = 0

        def forward(self, x):
            self.n += 1
            self.k += 1
            return x * self.n + self.k

    check_module(Counter, [lambda m: m(X4)] * 3, attrs=["n", "k"])


def test_same_submodule_called_twice_with_hook():
    class Twice(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)
            self.calls = []
            self.lin.register_forward_hook(lambda mod, a, o: self.calls.append(tuple(o.shape)))

        def forward(self, x):
            return self.lin(self.lin(x)), len(self.calls)

    check_module(Twice, [lambda m: m(X4)] * 2, attrs=["calls"], graphs=None)


def test_buffer_registered_lazily_in_forward():
    class Lazy(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x):
            if not hasattr(self, "stat"):
                self.register_buffer("stat", x.mean(0).detach())
            return self.lin(x) - self.stat

    check_module(Lazy, [lambda m: m(X4)] * 2, graphs=None)


def test_parameter_data_clamped_under_no_grad_and_grad_in_forward():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 1)

        def forward(self, x):
            with torch.no_grad():
                self.lin.weight.data.clamp_(-0.1, 0.1)
            x = x.clone().requires_grad_(True)
            y = self.lin(x).sum()
            (g,) = torch.autograd.grad(y, x, create_graph=True)
            return g + self.lin(x)

    check_module(M, [lambda m: m(X4)] * 2, backward=True, graphs=None)


def test_sequential_subclass_iteration_and_append():
    class Seq(nn.Sequential):
        def forward(self, x):
            for i, m in enumerate(self):
                x = m(x) + i
            return x

    def add_layer(m):
        m.append(nn.Linear(2, 2))

    check_module(lambda: Seq(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2)),
                 [lambda m: m(X4), add_layer, lambda m: m(X4)], backward=True)


def test_parameter_dict_and_lstm():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.p = nn.ParameterDict({"a": nn.Parameter(torch.ones(4)), "b": nn.Parameter(torch.zeros(4))})
            self.rnn = nn.LSTM(4, 3, batch_first=True)

        def forward(self, x):
            y = sum(x * v for k, v in self.p.items())
            out, (h, c) = self.rnn(y.unsqueeze(0))
            return out, h, c, list(self.p.keys())

    check_module(M, [lambda m: m(X4)] * 2, backward=True)


# ---------------------------------------------------------------- a realistic training step

class _TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 8)
        self.blocks = nn.ModuleList([nn.Sequential(nn.LayerNorm(8), nn.Linear(8, 8), nn.GELU()) for _ in range(2)])
        self.head = nn.Linear(8, 5)
        self.drop = nn.Dropout(0.1)

    def forward(self, ids, mask=None):
        h = self.emb(ids)
        for i, b in enumerate(self.blocks):
            h = h + self.drop(b(h)) * (1.0 / (i + 1) ** 0.5)
        if mask is not None:
            h = h * mask.unsqueeze(-1)
        return self.head(h.mean(1))


def _train_step(model, opt, sched, batch, metrics):
    model.train()
    opt.zero_grad(set_to_none=True)
    logits = model(batch["ids"], mask=batch.get("mask"))
    loss = F.cross_entropy(logits, batch["y"])
    loss.backward()
    gn = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    sched.step()
    metrics.setdefault("loss", []).append(loss.item())
    metrics["gn"] = float(gn)
    metrics["lr"] = sched.get_last_lr()[0]
    return loss.detach()


def test_training_steps_with_optimizer_scheduler_and_clipping():
    gen = torch.Generator().manual_seed(5)
    batches = [{"ids": torch.randint(0, 20, (4, 6), generator=gen), "y": torch.randint(0, 5, (4,), generator=gen),
                "mask": (torch.rand(4, 6, generator=gen) > 0.2).float()} for _ in range(4)]
    del batches[2]["mask"]
    results = []
    for compiled in (False, True):
        seed_all()
        model = _TinyLM()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        sched = torch.optim.lr_scheduler.StepLR(opt, 2, 0.5)
        step = dynamo_lite.compile(_train_step, backend="eager") if compiled else _train_step
        metrics = {}
        seed_all(1)
        losses = [step(model, opt, sched, b, metrics) for b in batches]
        results.append((losses, metrics, model.state_dict(), opt.state_dict()["state"][0]["exp_avg"]))
    assert_same(results[0], results[1])


# ---------------------------------------------------------------- hooks and parametrizations

def test_full_backward_pre_hook_and_backward_hook():
    log = []

    def factory():
        m = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
        m[0].register_full_backward_pre_hook(lambda mod, go: (go[0] * 2,))
        m[2].register_full_backward_hook(lambda mod, gi, go: log.append(("bw", tuple(go[0].shape))))
        return m

    def step(m):
        del log[:]
        out = m(X4)
        out.sum().backward()
        return out, list(log), m[0].weight.grad

    check_module(factory, [step, step], graphs=None)


def test_tensor_hook_registered_in_forward():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x):
            h = self.lin(x)
            if h.requires_grad:
                h.register_hook(lambda g: g * 0.5)
            return h.relu()

    check_module(M, [lambda m: m(X4)] * 2, backward=True, graphs=None)


def test_pre_hook_counting_calls_on_the_module():
    def factory():
        m = nn.Linear(4, 4)

        def pre(mod, args):
            mod.calls = getattr(mod, "calls", 0) + 1

        m.register_forward_pre_hook(pre)
        return m

    check_module(factory, [lambda m: (m(X4), m.calls)] * 3, graphs=None)


def test_hooks_returning_none_or_a_bare_value():
    def factory():
        m = nn.Linear(4, 4)
        m.register_forward_hook(lambda mod, a, o: None)
        m.register_forward_pre_hook(lambda mod, a: None)
        m.register_forward_pre_hook(lambda mod, a: a[0] * 3)  # a non-tuple result is wrapped
        return m

    check_module(factory, [lambda m: m(X4)] * 2, graphs=None)


@pytest.mark.parametrize("kind", ["weight_norm", "identity"])
def test_parametrized_weights(kind):
    def factory():
        lin = nn.Linear(4, 4)
        if kind == "weight_norm":
            lin = nn.utils.parametrizations.weight_norm(lin)
        else:
            nn.utils.parametrize.register_parametrization(lin, "weight", nn.Identity())
        return nn.Sequential(lin)  # parametrized classes are made per instance: compare through a container

    check_module(factory, [lambda m: m(X4)] * 2, backward=True, graphs=None)


class _FrozenNorm(torch.nn.Module):
    """Overrides train() to keep its norm in eval mode (a common fine-tuning idiom)."""

    def __init__(self):
        super().__init__()
        self.bn = torch.nn.BatchNorm1d(4)
        self.drop = torch.nn.Dropout(0.5)
        self.lin = torch.nn.Linear(4, 4)

    def train(self, mode=True):
        super().train(mode)
        self.bn.eval()
        return self

    def forward(self, x):
        return self.lin(self.drop(self.bn(x)))


def test_train_and_eval_inside_compiled_code_are_one_graph():
    # model.eval() ... model.train() in an evaluation step broke the graph twice ("changes module
    # state"); the flags are set in the trace and replayed on the modules, an override of train()
    # inlined (its super().train(mode) too)
    from dynamo_lite.testing import check_calls

    def make():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4), torch.nn.Dropout(0.3),
                                   _FrozenNorm())

    def evaluate(m, x):
        m.eval()
        with torch.no_grad():
            y = m(x)
        m.train()
        return y, m(x), [s.training for s in m.modules()]

    check_calls(evaluate, [(make(), torch.randn(5, 4)), (make(), torch.randn(6, 4))], graphs=None, rng=True)
    info = dynamo_lite.explain(evaluate, make(), torch.randn(5, 4))
    assert (info.graph_count, info.graph_break_count) == (1, 0), [b.reason for b in info.break_reasons]
    check_calls(lambda m: m.train("yes"), [(make(),)], graphs=None)  # ValueError, as eager
