"""FSDP2 (torch.distributed.fsdp.fully_shard) under dynamo_lite on 2 gloo ranks: training
equals eager FSDP2, and the graph breaks are the ones FSDP's hooks need.

``ranks_main`` runs on 2 ranks (in the one launch of ranks_suite.py).
"""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn

import dynamo_lite
from dynamo_lite import graph_breaks as gb
from dynamo_lite.backends import lookup_backend
from dynamo_lite.testing import CompileCounter, recording
from ranks_suite import results_of

STEPS = 3


def _sharded_mlp(mesh):
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 4))
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def _train(rank, backend):
    from torch.distributed.device_mesh import init_device_mesh

    dynamo_lite.reset()
    mesh = init_device_mesh("cpu", (2,))
    eager, model = _sharded_mlp(mesh), _sharded_mlp(mesh)
    counter = CompileCounter(lookup_backend(backend)[0])
    compiled = dynamo_lite.compile(model, backend=counter)
    opts = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (eager, model)]
    same = []
    seen, rec = recording()
    with rec:
        for step in range(STEPS):
            torch.manual_seed(10 * step + rank)
            x = torch.randn(8, 16)
            eager_loss = eager(x).square().mean()
            eager_loss.backward()
            loss = compiled(x).square().mean()
            loss.backward()
            grads = all(torch.equal(a.grad.full_tensor(), b.grad.full_tensor())
                        for a, b in zip(eager.parameters(), model.parameters()))
            for opt in opts:
                opt.step()
                opt.zero_grad()
            params = all(torch.equal(a.full_tensor(), b.full_tensor())
                         for a, b in zip(eager.parameters(), model.parameters()))
            same.append(bool(torch.equal(loss, eager_loss) and grads and params))
    breaks = [(e.break_id, e.reason) for e in seen if type(e).__name__ in ("GraphBreakEvent", "FallbackEvent")]
    return {"same": same, "graphs": counter.frame_count, "breaks": breaks,
            "sharded": type(next(model.parameters())).__name__}


def ranks_main(rank, world_size):
    return {backend: _train(rank, backend) for backend in ("eager", "aot_eager")}


@pytest.fixture(scope="module")
def ranks():
    return results_of("test_fsdp")


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_fsdp2_trains_like_eager(ranks, backend):
    for rank, result in enumerate(ranks):
        r = result[backend]
        assert r["sharded"] == "DTensor"  # the parameters really are sharded
        assert r["same"] == [True] * STEPS, (rank, r)
        assert r["graphs"] >= 3, r  # the linear layers' work is captured


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_fsdp2_breaks_only_at_its_hooked_modules(ranks, backend):
    """Each fully_shard module has forward hooks (FSDP all-gathers its parameters before
    forward and frees them after): the parent graph ends at its call, Python runs the module
    with its hooks, and its forward is captured as a frame of its own, and that is all (the
    named tuples FSDP's own code builds are not captured: their generated ``__new__`` is
    skipped)."""
    for result in ranks:
        kinds = {(bid, reason.split(" has ")[-1] if bid == gb.MODULE_HOOKS else reason.split(" with ")[0])
                 for bid, reason in result[backend]["breaks"]}
        # FSDP registers its pre-forward hook with_kwargs=True: the module call stays a break
        assert kinds == {(gb.MODULE_HOOKS, "forward hooks registered with with_kwargs=True or always_call=True")}, kinds
