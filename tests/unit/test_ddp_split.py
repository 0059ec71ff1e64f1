"""backends/ddp.py on its own (no process group): where piece_of_nodes cuts a captured graph.

A graph is captured with a counting backend; its parameter placeholders are given bucket
indices by hand, as DDPSplitBackend reads them from DDP.  The 2-rank behaviour (DDP's real
buckets, training equal to eager DDP) is tests/distributed/test_ddp.py.
"""
from __future__ import annotations

import torch
import torch.nn as nn

import dynamo_lite
from dynamo_lite.backends.ddp import piece_of_nodes
from dynamo_lite.graph.output_graph import ExampleSummary
from dynamo_lite.testing import CompileCounter


class Stack(nn.Module):
    def __init__(self, n=4):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(8, 8) for _ in range(n))

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


def _captured(module, *args):
    """(graph module, {placeholder: parameter name}, tensor nodes) of ``module(*args)``."""
    counter = CompileCounter()
    dynamo_lite.compile(module, backend=counter)(*args)
    [gm] = counter.graphs
    names = {}
    for node in gm.graph.nodes:
        if node.op == "placeholder" and "layers" in node.meta["source"]:
            index = node.meta["source"].split("_modules['")[2].split("'")[0]
            kind = node.meta["source"].rsplit("'", 2)[-2]
            names[node] = f"layers.{index}.{kind}"
    # (after compiling, node metadata keeps a summary of each FakeTensor)
    tensors = {n for n in gm.graph.nodes if isinstance(n.meta.get("example_value"), (torch.Tensor, ExampleSummary))}
    return gm, names, tensors


def _pieces(gm, piece_of, names):
    """Per piece, the parameters whose first reader is in it."""
    out, seen = {}, set()
    for node in gm.graph.nodes:
        for arg in node.all_input_nodes:
            if arg in names and arg not in seen:
                seen.add(arg)
                out.setdefault(piece_of[node], []).append(names[arg])
    return [out[k] for k in sorted(out)]


def test_a_piece_starts_where_a_new_bucket_is_first_read():
    gm, names, tensors = _captured(Stack(), torch.randn(2, 8))
    # DDP's bucket 0 holds the last parameters (their gradients are ready first)
    bucket = {node: 1 if int(name.split(".")[1]) < 2 else 0 for node, name in names.items()}
    piece_of, why_not = piece_of_nodes(gm, bucket, tensors)
    assert why_not is None
    assert _pieces(gm, piece_of, names) == [
        ["layers.0.weight", "layers.0.bias", "layers.1.weight", "layers.1.bias"],
        ["layers.2.weight", "layers.2.bias", "layers.3.weight", "layers.3.bias"]]
    assert sorted(set(piece_of.values())) == [0, 1]  # pieces follow the graph's order


def test_one_bucket_or_no_parameter_is_not_split():
    gm, names, tensors = _captured(Stack(), torch.randn(2, 8))
    assert piece_of_nodes(gm, dict.fromkeys(names, 0), tensors) == ({}, "its parameters are all in one bucket")
    assert piece_of_nodes(gm, {}, tensors) == ({}, "it reads no parameter of the DDP module")


class TupleAcross(Stack):
    def forward(self, x):
        parts = torch.relu(self.layers[0](x)).chunk(2, dim=1)  # a tuple: not a tensor
        y = self.layers[1](torch.cat([parts[0], parts[0]], 1))
        z = self.layers[2](y)
        return self.layers[3](z) + torch.cat([parts[1], parts[1]], 1)  # the tuple read again


def test_no_cut_while_a_value_that_is_not_a_tensor_is_live():
    # torch.fx's own tracer reads tuple items where they are used (and, tracing into the
    # linear layers, makes their parameters get_attr nodes)
    class IntoModules(torch.fx.Tracer):
        def is_leaf_module(self, m, qualname):
            return False

    module = TupleAcross()
    gm = torch.fx.GraphModule(module, IntoModules().trace(module))
    nodes = list(gm.graph.nodes)
    params = {n: n.target for n in nodes if n.op == "get_attr"}
    bucket = {n: 1 if int(name.split(".")[1]) < 2 else 0 for n, name in params.items()}
    chunk = next(n for n in nodes if n.target == "chunk")
    tensors = set(nodes) - {chunk}
    piece_of, why_not = piece_of_nodes(gm, bucket, tensors)
    assert why_not is None
    # wanted: before layer 2 (its first bucket-0 parameter); the tuple is live up to its last
    # read, so the cut moves to the first node after that
    last_read = max(i for i, n in enumerate(nodes) if chunk in n.all_input_nodes)
    first_of_second = min(i for i, n in enumerate(nodes) if piece_of[n] == 1)
    layer2 = min(i for i, n in enumerate(nodes) if n.op == "get_attr" and n.target.startswith("layers.2"))
    assert first_of_second == last_read + 1 > layer2
    # every tensor still crosses the cut as a tensor: torch.fx can split there
    assert all(piece_of[n] == 0 for n in nodes[:first_of_second])


class NoGradInside(Stack):
    def forward(self, x):
        x = self.layers[0](x)
        with torch.no_grad():
            x = x * 2
        return self.layers[1](x)


def test_a_graph_changing_grad_mode_is_not_split():
    gm, names, tensors = _captured(NoGradInside(2), torch.randn(2, 8))
    bucket = {node: int(name.split(".")[1]) for node, name in names.items()}
    piece_of, why_not = piece_of_nodes(gm, bucket, tensors)
    assert piece_of == {} and "_set_grad_enabled" in why_not
