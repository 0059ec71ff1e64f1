"""torch.distributed collectives inside compiled code, on 2 gloo ranks: functional
collectives become graph nodes; the classic in-place ones break the graph (DL0029) and run
in Python.  Every case goes through the harness (eager and compiled on copies of the same
inputs, then compared).

``ranks_main`` runs on 2 ranks (in the one launch of ranks_suite.py).
"""
from __future__ import annotations

import traceback

import pytest
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol

import dynamo_lite
from dynamo_lite import graph_breaks as gb
from dynamo_lite.backends import lookup_backend
from dynamo_lite.testing import CompileCounter, check_breaks, recording
from ranks_suite import results_of

GROUP = None  # the default ProcessGroup, set in the ranks (read as a global: guarded by identity)
GROUP_NAME = ""  # its name
MESH = None  # a 1-D DeviceMesh over both ranks


def all_reduce(x):
    return funcol.all_reduce(x * 2, "sum", GROUP) + 1


def all_gather(x):
    return funcol.all_gather_single(x.relu(), 0, GROUP) * 3


def all_gather_dim1(x):
    return funcol.all_gather_single(x + 1, 1, GROUP).sum(0)


def reduce_scatter(x):
    return funcol.reduce_scatter_single(x.exp(), "sum", 0, GROUP) - 1


def reduce_scatter_dim1(x):
    return funcol.reduce_scatter_single(x, "avg", 1, GROUP).neg()


def chain(x):
    y = funcol.all_reduce(x, "max", GROUP)
    z = funcol.all_gather_tensor(y + x, 0, GROUP)  # the deprecated names too
    return funcol.reduce_scatter_tensor(z, "sum", 0, GROUP) * y


def by_group_name(x):
    return funcol.all_reduce(x, "sum", GROUP_NAME) * 2


def by_device_mesh(x):
    return funcol.all_gather_single(funcol.all_reduce(x, "avg", MESH), 0, MESH).sum(0)


def in_place_all_reduce(x):
    y = x * 2
    dist.all_reduce(y)  # mutates y on every rank: runs in Python between two graphs
    return y + 1


def in_place_broadcast(x):
    y = x + 1
    dist.broadcast(y, src=1)
    return y * y


CAPTURED = [all_reduce, all_gather, all_gather_dim1, reduce_scatter, reduce_scatter_dim1, chain, by_group_name,
            by_device_mesh]
BROKEN = [in_place_all_reduce, in_place_broadcast]


def _case(fn, rank, backend):
    """'' when eager and compiled agree (and the break count is right), else the failure."""
    global GROUP, GROUP_NAME
    GROUP = dist.group.WORLD
    GROUP_NAME = GROUP.group_name
    dynamo_lite.reset()
    torch.manual_seed(rank)
    x = torch.randn(4, 6) + rank
    counter = CompileCounter(lookup_backend(backend)[0])
    seen, rec = recording()
    try:
        with rec:
            check_breaks(fn, x, breaks=0 if fn in CAPTURED else 1, compiled_fn=dynamo_lite.compile(fn, backend=counter))
    except AssertionError:
        return traceback.format_exc()
    ops = [str(n.target) for g in counter.graphs for n in g.graph.nodes if n.op == "call_function"]
    breaks = [e.break_id for e in seen if type(e).__name__ == "GraphBreakEvent"]
    return {"graphs": counter.frame_count, "collective_nodes": sum("_c10d_functional" in o for o in ops),
            "breaks": breaks, "reasons": [e.reason for e in seen if type(e).__name__ == "GraphBreakEvent"]}


def _group_change(rank):
    """The group is guarded: another group object recompiles, and runs on that group."""
    global GROUP
    dynamo_lite.reset()
    seen, rec = recording()
    compiled = dynamo_lite.compile(all_reduce, backend="eager")
    x = torch.ones(3) * (rank + 1)
    with rec:
        GROUP = dist.group.WORLD
        first = compiled(x)
        GROUP = dist.new_group([0, 1])
        second = compiled(x)
    return {"same": bool(torch.equal(first, second) and torch.equal(first, all_reduce(x))),
            "recompiles": sum(type(e).__name__ == "RecompileEvent" for e in seen)}


def ranks_main(rank, world_size):
    global MESH
    from torch.distributed.device_mesh import init_device_mesh

    MESH = init_device_mesh("cpu", (world_size,))
    out = {f"{fn.__name__}-{backend}": _case(fn, rank, backend)
           for fn in CAPTURED + BROKEN for backend in ("eager", "aot_eager")}
    out["group_change"] = _group_change(rank)
    return out


@pytest.fixture(scope="module")
def ranks():
    return results_of("test_collectives")


def _result(ranks, name):
    for rank, result in enumerate(ranks):
        r = result[name]
        assert not isinstance(r, str), f"rank {rank}:\n{r}"
    return ranks[0][name]


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("fn", CAPTURED, ids=lambda f: f.__name__)
def test_functional_collective_is_a_graph_node(ranks, fn, backend):
    r = _result(ranks, f"{fn.__name__}-{backend}")
    assert r["graphs"] == 1 and r["breaks"] == [], r
    assert r["collective_nodes"] >= 2, r  # the collective and its wait_tensor


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("fn", BROKEN, ids=lambda f: f.__name__)
def test_in_place_collective_breaks_with_its_reason(ranks, fn, backend):
    r = _result(ranks, f"{fn.__name__}-{backend}")
    assert r["breaks"] == [gb.DISTRIBUTED_COLLECTIVE] and r["graphs"] == 2, r
    assert "communicates with the other ranks" in r["reasons"][0]


def test_group_is_guarded(ranks):
    for result in ranks:
        assert result["group_change"] == {"same": True, "recompiles": 1}
