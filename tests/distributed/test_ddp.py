"""DistributedDataParallel under dynamo_lite on 2 gloo ranks: graphs cut at DDP's gradient
buckets (backends/ddp.py), in both wrappings, train exactly like eager DDP.

``ranks_main`` runs on 2 ranks (in the one launch of ranks_suite.py); each test checks one
part of what the ranks reported.
"""
from __future__ import annotations

import copy

import pytest
import torch
import torch.nn as nn

import dynamo_lite
from ranks_suite import results_of
from dynamo_lite.testing import CompileCounter, recording

STEPS = 3
# (name, wrapping, bucket_cap_mb (None: DDP's default), backend, find_unused_parameters)
SCENARIOS = [
    ("outer-0.1", "outer", 0.1, "aot_eager", False),
    ("inner-0.1", "inner", 0.1, "aot_eager", False),
    ("outer-0.25", "outer", 0.25, "aot_eager", False),
    ("outer-default", "outer", None, "aot_eager", False),
    ("inner-default", "inner", None, "aot_eager", False),
    ("inner-0.1-unused", "inner", 0.1, "aot_eager", True),
    ("outer-0.1-off", "outer", 0.1, "aot_eager", False),
]


class MLP(nn.Module):
    """Six 128x128 layers (64.5 KB each): 0.1 MB buckets hold two layers, 0.25 MB four; with
    ``unused`` one more layer that forward never calls."""

    def __init__(self, unused=False):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(128, 128) for _ in range(6))
        if unused:
            self.spare = nn.Linear(128, 128)

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


def _compiled_nodes(loss) -> int:
    """The autograd nodes of the compiled pieces in the graph of ``loss``."""
    seen, todo, count = set(), [loss.grad_fn], 0
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        count += "CompiledFunction" in type(node).__name__
        todo.extend(next_fn for next_fn, _ in node.next_functions)
    return count


def _scenario(rank, wrap, cap, backend, unused, off):
    from torch.nn.parallel import DistributedDataParallel as DDP

    from dynamo_lite.backends import lookup_backend

    dynamo_lite.reset()
    torch.manual_seed(0)
    model = MLP(unused)
    reference = copy.deepcopy(model)
    kw = dict(bucket_cap_mb=cap, find_unused_parameters=unused)
    counter = CompileCounter(lookup_backend(backend)[0])
    if wrap == "outer":
        ddp = DDP(model, **kw)
        run = dynamo_lite.compile(ddp, backend=counter)
    else:
        ddp = run = DDP(dynamo_lite.compile(model, backend=counter), **kw)
    eager = DDP(reference, **kw)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    eager_opt = torch.optim.SGD(reference.parameters(), lr=0.05)
    same, nodes = [], 0
    seen, rec = recording()
    with rec, dynamo_lite.config.patch(optimize_ddp=not off):
        for step in range(STEPS):
            torch.manual_seed(100 * step + rank)
            x = torch.randn(16, 128)
            loss = run(x).square().mean()
            nodes = _compiled_nodes(loss)
            loss.backward()
            eager_loss = eager(x).square().mean()
            eager_loss.backward()
            opt.step(), eager_opt.step()
            opt.zero_grad(), eager_opt.zero_grad()
            same.append(torch.equal(loss, eager_loss) and all(
                torch.equal(a, b) for a, b in zip(model.parameters(), reference.parameters())))
    names = {id(p): n for n, p in model.named_parameters()}
    splits = [e for e in seen if type(e).__name__ == "DDPSplitEvent"]
    return {
        "same": same,
        "pieces": [e.params for e in splits if e.not_split is None],
        "not_split": [e.not_split for e in splits if e.not_split is not None],
        "buckets": [[names[id(p)] for p in b.parameters()] for b in ddp.reducer._get_zeros_like_grad_buckets()],
        "backend_calls": counter.frame_count,
        "graphs": sum(type(e).__name__ == "GraphEvent" for e in seen),
        "compiled_nodes": nodes,
    }


def _buckets_as_ddp_builds_them(rank, cap, unused):
    """Our reading of DDP's buckets next to the reducer's, before and after its rebuild."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    from dynamo_lite.backends.ddp import ddp_buckets, reducer_parameters

    torch.manual_seed(0)
    ddp = DDP(MLP(unused), bucket_cap_mb=cap, find_unused_parameters=unused)
    names = {id(p): n for n, p in ddp.module.named_parameters()}
    predicted = [[names[id(p)] for p in b] for b in ddp_buckets(ddp)]
    for _ in range(2):
        ddp(torch.randn(4, 128)).sum().backward()
    ddp(torch.randn(4, 128))  # the rebuild happens at the start of a forward
    actual = [[names[id(p)] for p in b.parameters()] for b in ddp.reducer._get_zeros_like_grad_buckets()]
    read = [[names[id(p)] for p in b] for b in ddp_buckets(ddp)]
    ours = [id(p) for p in reducer_parameters(ddp)[0]]
    return {"predicted": predicted, "actual": actual, "read": read,
            "params": ours == [id(p) for p in ddp._build_params_for_reducer()[0]]}


def _explain_and_log(rank):
    """explain() and the graph_code log of compile(DDP(model)) with 0.1 MB buckets."""
    import io
    import logging

    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)
    ddp = DDP(MLP(), bucket_cap_mb=0.1)
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logging.getLogger("dynamo_lite.graph_code").addHandler(handler)
    dynamo_lite.set_logs(graph_code=True)
    try:
        report = dynamo_lite.explain(ddp, backend="aot_eager")(torch.randn(4, 128))
    finally:
        dynamo_lite.set_logs()
        logging.getLogger("dynamo_lite.graph_code").removeHandler(handler)
    report.out.sum().backward()
    return {"text": str(report), "graph_count": report.graph_count, "pieces": len(report.ddp_splits[0].pieces),
            "dict": report.to_dict()["ddp_splits"][0]["params"], "log": stream.getvalue()}


def ranks_main(rank, world_size):
    out = {name: _scenario(rank, wrap, cap, backend, unused, name.endswith("-off"))
           for name, wrap, cap, backend, unused in SCENARIOS}
    out["reading"] = {cap: _buckets_as_ddp_builds_them(rank, cap, unused)
                      for cap, unused in ((0.1, False), (0.25, False), (None, False), (0.1, True))}
    out["explain"] = _explain_and_log(rank)
    return out


@pytest.fixture(scope="module")
def ranks():
    return results_of("test_ddp")


@pytest.mark.parametrize("name", [s[0] for s in SCENARIOS])
def test_trains_exactly_like_eager_ddp_on_both_ranks(ranks, name):
    for rank, result in enumerate(ranks):
        assert result[name]["same"] == [True] * STEPS, (rank, result[name])


@pytest.mark.parametrize("name", [s[0] for s in SCENARIOS if s[2] is not None and not s[0].endswith("-off")])
def test_graph_is_cut_at_ddp_buckets(ranks, name):
    for result in ranks:
        r = result[name]
        pieces = r["pieces"][-1]  # the split in use (made again after DDP rebuilt its buckets)
        assert len(pieces) >= 2 and r["backend_calls"] >= len(pieces), r
        piece_of = {p: i for i, piece in enumerate(pieces) for p in piece}
        assert sorted(piece_of) == sorted(p for b in r["buckets"] for p in b if p in piece_of)
        # backward runs the pieces last to first: behind every cut, some bucket of DDP's (its
        # real buckets, read from the reducer) has all its parameters, so its all-reduce starts
        # while the pieces before the cut still run backward (a parameter the graph never reads
        # is marked ready when backward starts, with find_unused_parameters)
        for cut in range(1, len(pieces)):
            assert any(all(piece_of.get(p, len(pieces)) >= cut for p in b) for b in r["buckets"]), \
                (cut, pieces, r["buckets"])
        if r["compiled_nodes"]:
            assert r["compiled_nodes"] == len(pieces)  # one autograd node per piece


def test_cut_follows_bucket_size(ranks):
    r = ranks[0]
    assert len(r["outer-0.1"]["pieces"][-1]) == 3 and len(r["outer-0.25"]["pieces"][-1]) == 2
    assert r["outer-0.1"]["pieces"][-1][0] == ["layers.0.weight", "layers.0.bias", "layers.1.weight",
                                                "layers.1.bias"]


@pytest.mark.parametrize("name", ["outer-default", "inner-default", "outer-0.1-off"])
def test_not_split(ranks, name):
    for result in ranks:
        r = result[name]
        assert r["pieces"] == [] and r["backend_calls"] == r["graphs"] == 1, r
        if name.endswith("default"):  # 400 KB of parameters: one bucket
            assert r["not_split"] == ["its parameters are all in one bucket"]
        else:
            assert r["not_split"] == []  # config.optimize_ddp = False: nothing asked


@pytest.mark.parametrize("cap", [0.1, 0.25, None])
def test_buckets_read_as_ddp_builds_them(ranks, cap):
    r = ranks[0]["reading"][cap]
    assert r["params"]
    assert r["predicted"] == r["actual"] == r["read"]


def test_unused_parameters_are_in_ddps_buckets(ranks):
    r = ranks[0]["reading"][0.1]
    assert r["params"] and r["read"] == r["actual"]
    assert any("spare.weight" in b for b in r["actual"])


def test_split_is_in_explain_and_the_graph_log(ranks):
    r = ranks[0]["explain"]
    assert r["graph_count"] == 1 and r["pieces"] == 3
    assert "split for DDP into 3 graphs at its 3 gradient buckets:" in r["text"]
    assert "piece 0: 4 ops, parameters layers.0.weight, layers.0.bias, layers.1.weight, layers.1.bias" in r["text"]
    assert r["dict"][2] == ["layers.4.weight", "layers.4.bias", "layers.5.weight", "layers.5.bias"]
    assert "DDP: graph split into 3 pieces at 3 gradient buckets" in r["log"]
    assert "piece 2 (submod_2): 4 ops, buckets [0], parameters layers.4.weight" in r["log"]
