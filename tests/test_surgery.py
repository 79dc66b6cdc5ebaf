"""GE's graph-surgery behaviour (ge-conflict-rules.md §2) on the graph model."""
from __future__ import annotations

from engine.core import surgery
from engine.core.dumpio import build_model
from engine.proto import ge_ir_pb2 as pb
from engine.core.yamlgraph import _to_modeldef
from engine.core.errors import Collector
from engine.core.yamlloc import load_yaml


def model_of(tmp_path, text):
    p = tmp_path / "g.yaml"
    p.write_text(text)
    errors = Collector()
    proto, _ = _to_modeldef(load_yaml(p), str(p), None, errors)
    errors.check()
    return build_model(proto)


def op(name, n=1):
    o = pb.OpDef(name=name, type="Identity")
    for _ in range(n):
        o.input_desc.add()
        o.output_desc.add()
    return o


G = """
graphs:
  root:
    nodes: {a: Relu, b: Relu, c: Relu, clean: AtomicAddrClean, x: Relu, y: Relu}
    edges: [a -> b, a -> c, x ~> b, clean ~> b, a ~> y]
"""


def test_insert_before_places_after_producer_and_moves_in_control(tmp_path):
    m = model_of(tmp_path, G)
    g = m.root
    a, b, c, clean, x = (g.find(k) for k in ("a", "b", "c", "clean", "x"))
    a.id = 7
    new = surgery.insert_before(b.ins[0], op("id"), keep_ctrl=lambda n: n.type == "AtomicAddrClean")
    assert [n.name for n in g.nodes()][:2] == ["a", "id"]
    assert new.id == 7
    # new takes b's place in a's peer list (first consumer stays first)
    assert [p.node.name for p in a.outs[0].peers] == ["id", "c"]
    assert b.ins[0].peer.node is new
    assert new.in_ctrl == [x] and b.in_ctrl == [clean]


def test_insert_after_takes_all_consumers_and_moves_out_control(tmp_path):
    m = model_of(tmp_path, G)
    g = m.root
    a, b, c, y = (g.find(k) for k in "abcy")
    new = surgery.insert_after(a.outs[0], list(a.outs[0].peers), op("id"))
    assert [p.node for p in a.outs[0].peers] == [new]
    assert [p.node.name for p in new.outs[0].peers] == ["b", "c"]
    assert new.out_ctrl == [y] and a.out_ctrl == []


def test_isolate_relinks_data_and_bridges_control(tmp_path):
    m = model_of(tmp_path, """
graphs:
  root:
    nodes: {p: Relu, i: Identity, c1: Relu, c2: Relu, k: Relu, s: Relu}
    edges: [p -> i, i -> c1, i -> c2, k ~> i, i ~> s, p ~> s]
""")
    g = m.root
    p, i, c1, c2, k, s = (g.find(x) for x in ("p", "i", "c1", "c2", "k", "s"))
    surgery.isolate(i, [0])
    surgery.remove_node(i)
    assert [q.node.name for q in p.outs[0].peers] == ["c1", "c2"]
    # k gets control to every successor; p→s already connected so no duplicate
    assert [n.name for n in k.out_ctrl] == ["c1", "c2", "s"]
    assert p.out_ctrl == [s]
    assert g.find("i") is None and g.count == 5


def test_topo_sort_keeps_sorted_order_and_assigns_ids(tmp_path):
    m = model_of(tmp_path, """
graphs:
  root:
    nodes: {c: Relu, a: Relu, b: Relu}
    edges: [a -> b, b -> c]
""")
    order = surgery.topo_sort(m.root)
    assert [n.name for n in order] == ["a", "b", "c"]
    assert [n.id for n in order] == [0, 1, 2]
    again = surgery.topo_sort(m.root)
    assert [n.name for n in again] == ["a", "b", "c"]


def test_live_walk_sees_nodes_inserted_after_current(tmp_path):
    m = model_of(tmp_path, "graphs:\n  root:\n    nodes: {a: Relu, b: Relu}\n    edges: [a -> b]\n")
    seen = []
    for n in m.root.nodes():
        seen.append(n.name)
        if n.name == "a":
            surgery.insert_before(n.outs[0].peers[0], op("mid"))
        if n.name == "mid":
            surgery.remove_node(m.root.find("b"))
    assert seen == ["a", "mid"]


def test_all_nodes_order_is_depth_first_by_subgraph_index(tmp_path):
    m = model_of(tmp_path, """
graphs:
  root:
    nodes: {d: Data, if: {type: If, inputs: 1, outputs: 0, subgraphs: [t, e]}, z: Relu}
    edges: [d -> if]
  t:
    nodes: {t1: Data, t2: Relu}
  e:
    nodes: {e1: Data}
""")
    assert [n.name for n in m.all_nodes()] == ["d", "if", "t1", "t2", "e1", "z"]
    assert [g.name for g in m.all_subgraphs()] == ["t", "e"]
