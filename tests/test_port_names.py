"""Port names (Note [shared port maps] in engine/core/graph.py): nodes that name their ports
alike share one read-only pair of maps; the names by index keep the first name of an index;
renaming a node's ports gives it fresh maps; past the cache's bound the answers are the same."""
from __future__ import annotations

import pytest

from engine.core import graph as graph_mod
from engine.core.attrs import set_attr
from engine.core.dumpio import build_model
from engine.core.surgery import make_op, new_node
from engine.proto import ge_ir_pb2 as pb


def _node(graph, name, ins=None, outs=None, n_in=2, n_out=1):
    op = make_op(name, "Op", [pb.TensorDescriptor()] * n_in, [pb.TensorDescriptor()] * n_out, ins, outs,
                 model=graph.model)
    return new_node(graph, op, graph.tail)


@pytest.fixture
def graph():
    proto = pb.ModelDef(name="m")
    proto.graph.add(name="g")
    return build_model(proto).root


def test_alike_nodes_share_read_only_maps(graph):
    a = _node(graph, "a", ["ref", "value"], ["ref"])
    b = _node(graph, "b", ["ref", "value"], ["ref"])
    c = _node(graph, "c", ["x", "y"], ["z"])
    assert a.ports() == ({"ref": 0, "value": 1}, {"ref": 0}) == b.ports()
    assert a.ports() is b.ports() and c.ports() is not a.ports()
    assert (a.input_name(1), a.output_name(0), c.input_name(0), c.output_name(0)) == ("value", "ref", "x", "z")
    assert a.input_name(2) is None and a.output_name(5) is None
    with pytest.raises(TypeError):
        a.ports()[0]["other"] = 2      # shared: a caller that wants to change one copies it


def test_names_by_index_keep_the_first_name_and_missing_sides_are_empty(graph):
    n = _node(graph, "n", n_in=3)
    attrs = n.op.attr
    set_attr(attrs, "_input_name_key", ["p", "q", "p", "s", "r"], "list_s")
    set_attr(attrs, "_input_name_value", [1, 0, 2, 0], "list_i")      # one value short: r is unnamed
    assert n.ports()[0] == {"p": 2, "q": 0, "s": 0} and list(n.ports()[0]) == ["p", "q", "s"]
    assert [n.input_name(i) for i in range(3)] == ["q", None, "p"]
    assert n.ports()[1] == {} and n.output_name(0) is None     # no _output_name_* at all
    half = _node(graph, "half", n_in=1)
    set_attr(half.op.attr, "_input_name_key", ["x"], "list_s")      # keys without values
    assert half.ports() == ({}, {}) and half.input_name(0) is None


def test_set_ports_gives_the_node_new_maps(graph):
    a = _node(graph, "a", ["x", "y"], ["z"])
    b = _node(graph, "b", ["x", "y"], ["z"])
    assert a.input_name(0) == "x"
    a.set_ports(["ref", "value"], ["ref"])
    assert a.ports() == ({"ref": 0, "value": 1}, {"ref": 0}) and a.input_name(0) == "ref"
    assert b.ports() == ({"x": 0, "y": 1}, {"z": 0}) and b.input_name(0) == "x"


def test_past_the_cache_bound_each_node_gets_its_own_maps(graph, monkeypatch):
    monkeypatch.setattr(graph_mod, "_PORT_CACHE", {})
    monkeypatch.setattr(graph_mod, "_PORT_CACHE_MAX", 2)
    nodes = [_node(graph, f"n{i}", [f"in{i}", "v"], [f"out{i}"]) for i in range(5)]
    assert [n.input_name(0) for n in nodes] == [f"in{i}" for i in range(5)]
    assert [n.ports()[1] for n in nodes] == [{f"out{i}": 0} for i in range(5)]
    assert len(graph_mod._PORT_CACHE) == 2
    again = _node(graph, "again", ["in4", "v"], ["out4"])
    assert again.ports() == nodes[4].ports() and again.ports() is not nodes[4].ports()


def test_lean_nodes_read_their_port_maps_from_the_entries_once_per_key_order(monkeypatch):
    """Note [lean port entries]: every lean node of a training step (dump attributes and
    all) reads the maps its decoded op would; nodes whose port entries are equal share one
    map object; the port keys are looked up once per key order, not per node."""
    from benchmarks.gen_graph import make_model, serialize
    from engine.core.dumpio import build_lean_model
    monkeypatch.setattr(graph_mod, "_PORT_PLACES", {})
    monkeypatch.setattr(graph_mod, "_LEAN_PORTS", {})
    data = serialize(make_model(2000, dump_attrs=True))
    model = build_lean_model(data, "step.pb")
    ops = {(g.name, op.name): op for g in pb.ModelDef.FromString(data).graph for op in g.op}
    found = {}
    orders = set()
    nodes = [(g, n) for g in model.graph_order for n in g.node_list()]
    assert all(n._op is None for _, n in nodes)
    for g, n in nodes:
        ports = n.ports()
        orders.add(n.korder)
        assert ports == graph_mod.port_names(ops[(g.name, n.name)]).pair, n.name
        assert [n.input_name(i) for i in range(len(n.ins))] == [graph_mod.port_names(ops[(g.name, n.name)]).in_names.get(i)
                                                               for i in range(len(n.ins))]
        found.setdefault(id(n._ports), []).append(n)
        assert n._op is None            # read without decoding
    assert len(graph_mod._PORT_PLACES) == len(orders) < len(nodes) // 4
    assert len(graph_mod._LEAN_PORTS) == len(found) < len(nodes)
    named = [n for _, n in nodes if n.ports()[0]]
    assert len(named) > len(nodes) // 2         # the dump names most nodes' ports
    # past the bound a node's maps are its own, and still right
    monkeypatch.setattr(graph_mod, "_LEAN_PORTS", {})
    monkeypatch.setattr(graph_mod, "_PORT_PLACES", {})
    monkeypatch.setattr(graph_mod, "_PORT_CACHE_MAX", 1)
    model = build_lean_model(data, "step.pb")
    again = [n for g in model.graph_order for n in g.node_list()]
    assert [n.ports() for n in again] == [n.ports() for _, n in nodes]
    assert len(graph_mod._LEAN_PORTS) == 1 and len(graph_mod._PORT_PLACES) <= 1
