"""GE's graph-surgery behaviour (ge-conflict-rules.md §2) on the graph model."""
from __future__ import annotations

import pytest

from engine.core import surgery
from engine.core.toposort import sort_graph
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
    # Note [edges appended]: RemoveEdge then AddEdge, so new is a's last consumer
    assert [p.node.name for p in a.outs[0].peers] == ["c", "id"]
    assert b.ins[0].peer.node is new
    assert new.in_ctrl == [x] and b.in_ctrl == [clean]


def test_insert_after_appends_the_new_node_and_moves_the_listed_consumers(tmp_path):
    """Note [insert-after order]: AddEdge(src, new) first, then each dst moved: a consumer left
    on src stays before the new node; with no dst nothing moves, control edges neither."""
    m = model_of(tmp_path, G)
    g = m.root
    a, y = g.find("a"), g.find("y")
    new = surgery.insert_after(a.outs[0], [a.outs[0].peers[0]], op("id"))
    assert [p.node.name for p in a.outs[0].peers] == ["c", "id"]
    assert [p.node.name for p in new.outs[0].peers] == ["b"] and new.out_ctrl == [y]
    lone = surgery.insert_after(new.outs[0], [], op("lone"))
    assert [p.node.name for p in new.outs[0].peers] == ["b", "lone"]
    assert new.out_ctrl == [y] and list(lone.out_ctrl) == []


def test_insert_after_takes_all_consumers_and_moves_out_control(tmp_path):
    m = model_of(tmp_path, G)
    g = m.root
    a, b, c, y = (g.find(k) for k in "abcy")
    new = surgery.insert_after(a.outs[0], list(a.outs[0].peers), op("id"))
    assert [p.node for p in a.outs[0].peers] == [new]
    assert [p.node.name for p in new.outs[0].peers] == ["b", "c"]
    assert new.out_ctrl == [y] and list(a.out_ctrl) == []


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


# ---- find_cycle: Note [forward edges] ------------------------------------------------------
def _kahn_cycle(graph, ignore_edge):
    """find_cycle's answer by Kahn's algorithm over every edge (what it computed before)."""
    order = graph.node_list()
    indeg = {n: 0 for n in order}
    kept = {n: [s for s in surgery.successors(n) if s in indeg and not ignore_edge(n, s)] for n in order}
    for n in order:
        for s in kept[n]:
            indeg[s] += 1
    stack = [n for n in order if indeg[n] == 0]
    while stack:
        for s in kept[stack.pop()]:
            indeg[s] -= 1
            if indeg[s] == 0:
                stack.append(s)
    left = [n for n in order if indeg[n] > 0]
    return left or None


def _random_model(rng, size):
    g = pb.ModelDef().graph.add(name="g")
    for i in range(size):
        o = g.op.add(name=f"n{i}", type="Relu")
        o.output_desc.add()
        for _ in range(rng.randrange(3)):
            o.input_desc.add()
            o.input.append(f"n{rng.randrange(size)}:0")
        for _ in range(rng.randrange(2)):
            o.input.append(f"n{rng.randrange(size)}:-1")
    md = pb.ModelDef()
    md.graph.append(g)
    return build_model(md)


def test_find_cycle_answers_as_kahns_algorithm():
    import random
    rng = random.Random(7)
    found = 0
    for trial in range(300):
        model = _random_model(rng, rng.randrange(1, 12))
        g = model.root
        skip = {n for n in g.nodes() if rng.random() < 0.3}
        ignore = lambda a, b: a in skip
        if rng.random() < 0.5:
            sort_graph(g)               # sorted graphs take the one-walk answer
        got = surgery.find_cycle(g, ignore)
        assert got == _kahn_cycle(g, ignore)
        found += got is not None
    assert 30 < found < 270             # both answers were exercised


def test_find_cycle_asks_only_about_backward_edges():
    """A sorted graph whose one loop edge goes back: one question, no cycle; the same
    edge counted: the cycle's nodes."""
    md = pb.ModelDef()
    g = md.graph.add(name="g")
    size = 2000
    for i in range(size):
        o = g.op.add(name=f"n{i}", type="Relu")
        o.input_desc.add()
        o.output_desc.add()
        o.input.append(f"n{(i - 1) % size}:0")     # n0 is fed by the last node: the back edge
    model = build_model(md)
    asked = []

    def ignore(a, b):
        asked.append((a.name, b.name))
        return a.name == f"n{size - 1}"
    assert surgery.find_cycle(model.root, ignore) is None
    assert asked == [(f"n{size - 1}", "n0")]
    cycle = surgery.find_cycle(model.root, lambda a, b: False)
    assert cycle is not None and len(cycle) == size


def test_a_graphs_node_list_is_kept_until_the_list_changes(tmp_path, monkeypatch):
    """Note [node list kept]: node_list walks the list once until a method changes it (each
    one drops the kept list), gives the caller a copy, and in verify mode names a change
    made behind the methods' back."""
    from engine.core import graph as graph_mod
    monkeypatch.setattr(graph_mod, "VERIFY_CACHES", False)     # verify mode walks every time
    m = model_of(tmp_path, G)
    g = m.root
    walks = []
    real = graph_mod.Graph._walk
    monkeypatch.setattr(graph_mod.Graph, "_walk", lambda self: walks.append(1) or real(self))
    names = lambda: [n.name for n in g.node_list()]
    first = g.node_list()
    first.clear()                                   # the caller's own copy
    assert names() == ["a", "b", "c", "clean", "x", "y"] and len(walks) == 1
    a, b = g.find("a"), g.find("b")
    new = surgery.insert_before(b.ins[0], op("i"))  # linked in after its producer
    assert names() == ["a", "i", "b", "c", "clean", "x", "y"] and len(walks) == 2
    names()
    assert len(walks) == 2
    surgery.remove_node(new)
    assert names() == ["a", "b", "c", "clean", "x", "y"]
    front = surgery.new_node(g, op("f"), None)
    g.unlink_from_list(front)
    g.prepend(front)                                # linked in again: live again
    assert names() == ["f", "a", "b", "c", "clean", "x", "y"] and front.alive
    g.reorder(list(reversed(g.node_list())))
    assert names() == ["y", "x", "clean", "c", "b", "a", "f"] and len(walks) == 5
    # a node taken out by hand, not by unlink_from_list: verify mode says so
    monkeypatch.setattr(graph_mod, "VERIFY_CACHES", True)
    a.alive = False
    with pytest.raises(AssertionError, match="kept node list differs"):
        g.node_list()


def test_a_yaml_graphs_edge_list_orders_control_successors_too(tmp_path):
    """engine/core/yamlgraph.py: edges are listed in peer order, control edges included:
    a source's control successors are in the order its `~>` edges are listed, whatever the
    order of the nodes (GE files control entries under their source as data ones)."""
    from engine.core.yamlgraph import load_yaml_graph
    from harness import shared_pack
    orders = []
    for nodes in ("{v: Variable, a: Relu, b: Relu, c: Relu}", "{c: Relu, b: Relu, v: Variable, a: Relu}"):
        p = tmp_path / "g.yaml"
        p.write_text(f"graphs:\n  root:\n    nodes: {nodes}\n    edges: [v ~> b, v ~> a, v ~> c, a -> c]\n")
        model, _ = load_yaml_graph(p, shared_pack())
        v = model.root.find("v")
        orders.append([n.name for n in v.out_ctrl])
    assert orders == [["b", "a", "c"], ["b", "a", "c"]]


# ---- repeated control edges (Note [repeated control edges]) ---------------------------
R = """
graphs:
  root:
    nodes: {s: Relu, x: Relu, a: Relu, b: Relu, n: Relu}
    edges: [s -> n]
"""


def _names(nodes):
    return [n.name for n in nodes]


def test_link_ctrl_asks_first_unless_told_to_repeat(tmp_path):
    m = model_of(tmp_path, R)
    s, x = m.root.find("s"), m.root.find("x")
    surgery.link_ctrl(s, x)
    surgery.link_ctrl(s, x)
    assert _names(s.out_ctrl) == ["x"] and _names(x.in_ctrl) == ["s"]
    surgery.link_ctrl(s, x, repeat=True)
    assert _names(s.out_ctrl) == ["x", "x"] and _names(x.in_ctrl) == ["s", "s"]
    assert s.out_ctrl_count == {x: 2}


def test_unlink_ctrl_takes_the_first_of_a_repeated_edge(tmp_path):
    """Anchor::Unlink erases the first matching peer of each list: [x, a, x] less one x is
    [a, x], which a later sort and the saved peer index read."""
    m = model_of(tmp_path, R)
    s, x, a = (m.root.find(k) for k in "sxa")
    for t in (x, a, x):
        surgery.link_ctrl(s, t, repeat=True)
    surgery.unlink_ctrl(s, x)
    assert _names(s.out_ctrl) == ["a", "x"] and s.out_ctrl_count == {a: 1, x: 1}
    assert _names(x.in_ctrl) == ["s"]
    surgery.unlink_ctrl(s, x)
    assert _names(s.out_ctrl) == ["a"] and x not in s.out_ctrl_count and list(x.in_ctrl) == []


def test_insert_before_moves_each_edge_and_after_too(tmp_path):
    """InsertNodeBefore / InsertNodeAfter move every control edge, a repeated one each time."""
    m = model_of(tmp_path, R)
    s, x, n = (m.root.find(k) for k in "sxn")
    surgery.link_ctrl(x, n, repeat=True)
    surgery.link_ctrl(x, n, repeat=True)
    new = surgery.insert_before(n.ins[0], op("before"))
    assert _names(new.in_ctrl) == ["x", "x"] and list(n.in_ctrl) == [] and x.out_ctrl_count == {new: 2}
    a, b = m.root.find("a"), m.root.find("b")
    for t in (a, b, a):
        surgery.link_ctrl(s, t, repeat=True)
    after = surgery.insert_after(s.outs[0], [new.ins[0]], op("after"))
    assert _names(after.out_ctrl) == ["a", "b", "a"] and list(s.out_ctrl) == []
    assert _names(a.in_ctrl) == ["after", "after"]


def _saved(model) -> pb.ModelDef:
    from engine.core.dumpio import serialize_model
    md = pb.ModelDef()
    md.ParseFromString(serialize_model(model))
    return md


def test_a_repeated_edge_saves_twice_with_the_first_ones_peer_index(tmp_path):
    """SerializeEdge writes `s:-1` per edge, and GenCtrlInputInfo gives both the first
    place of the destination among the source's control successors."""
    from engine.core.dumpio import PEER_INDEX_ATTR
    m = model_of(tmp_path, R)
    s, x, a = (m.root.find(k) for k in "sxa")
    for t in (a, x, a):
        surgery.link_ctrl(s, t, repeat=True)
    m.emit_peer_index = True
    ops = {o.name: o for o in _saved(m).graph[0].op}
    assert list(ops["a"].input) == ["s:-1", "s:-1"]
    assert list(ops["a"].attr[PEER_INDEX_ATTR].list.i) == [0, 0]
    assert list(ops["x"].attr[PEER_INDEX_ATTR].list.i) == [1]
    for _ in range(8):          # a long list: the save's position map (Note [position maps])
        surgery.link_ctrl(s, a, repeat=True)
    ops = {o.name: o for o in _saved(m).graph[0].op}
    assert list(ops["a"].attr[PEER_INDEX_ATTR].list.i) == [0] * 10


def test_reload_drops_a_repeat_with_the_peer_index_and_keeps_one_without(tmp_path):
    """HandleNodeNameRef files a source's edges in a set ordered by key: with the peer index
    both edges have one key and the second is dropped; without it each has its running
    number and both are linked."""
    m = model_of(tmp_path, R)
    s, a = m.root.find("s"), m.root.find("a")
    surgery.link_ctrl(s, a, repeat=True)
    surgery.link_ctrl(s, a, repeat=True)
    plain = _saved(m)
    again = build_model(plain)
    assert _names(again.root.find("s").out_ctrl) == ["a", "a"]
    assert _names(again.root.find("a").in_ctrl) == ["s", "s"]
    m.emit_peer_index = True
    indexed = build_model(_saved(m))
    assert _names(indexed.root.find("s").out_ctrl) == ["a"]
    assert _names(indexed.root.find("a").in_ctrl) == ["s"]


def test_the_sort_counts_a_repeated_edge_each_time(tmp_path):
    """GetInEdgeSize counts each in-control edge and the walk frees a node at its last one:
    a repeated edge neither blocks nor frees a node early."""
    m = model_of(tmp_path, R)
    s, x, a = (m.root.find(k) for k in "sxa")
    surgery.link_ctrl(s, x, repeat=True)
    surgery.link_ctrl(s, x, repeat=True)
    surgery.link_ctrl(x, a)
    assert sort_graph(m.root)
    order = _names(m.root.node_list())
    assert order.index("s") < order.index("x") < order.index("a")


def test_precedence_links_is_the_packs_choice(tmp_path):
    """Declarative: `atomic_clean.precedence_links: once` links each second node one time
    (the default pack says each_edge, as GE's LinkTo does); an unknown value is a located error."""
    from engine.core.errors import InputError
    from engine.passes.catalog import load_pack
    from engine.passes.context import RunContext
    from engine.passes.manager import check_graph, resolve_passes, run_passes
    from harness import shared_pack
    from test_diff_util import edited_pack
    text = """
graphs:
  root:
    nodes:
      d: {type: Data, inputs: 0, outputs: 1}
      add: {type: Add, inputs: 2, outputs: 1}
      at: {type: Relu, inputs: 1, outputs: 1, attrs: {atomic_input_index: [0]}}
    edges: [d:0 -> add:0, d:0 -> add:1, add -> at]
"""
    got = []
    for pack in (shared_pack(), load_pack(edited_pack(tmp_path, {"atomic.yaml": [
            ("precedence_links: each_edge", "precedence_links: once")]}))):
        m = model_of(tmp_path, text)
        ctx = RunContext(pack, m, {})
        check_graph(ctx)
        run_passes(ctx, resolve_passes(pack, ["atomic_addr_clean"], {}))
        got.append(_names(m.root.find("add").in_ctrl))
    assert got == [["atomic_memset1", "atomic_memset1"], ["atomic_memset1"]]
    with pytest.raises(InputError) as e:
        load_pack(edited_pack(tmp_path / "bad", {"atomic.yaml": [
            ("precedence_links: each_edge", "precedence_links: every_edge")]}))
    assert "atomic.yaml:" in str(e.value) and "each_edge" in str(e.value)


# ---- IsolateNode's control bridge -------------------------------------------------------
def test_isolate_bridges_control_in_predecessor_name_order(tmp_path):
    """RelinkControlNodeIfNeed walks the predecessors as a std::map by NodeCompareKey (name)."""
    m = model_of(tmp_path, """
graphs:
  root:
    nodes: {p: Relu, i: Identity, c: Relu, zb: Relu, ya: Relu}
    edges: [p -> i, i -> c, zb ~> i, ya ~> i]
""")
    g = m.root
    surgery.isolate(g.find("i"), [0])
    assert [n.name for n in g.find("c").in_ctrl] == ["ya", "zb"]


def _fan(tmp_path, k_in: int, k_out: int):
    nodes = ", ".join([f"p{i}: Relu" for i in range(k_in)] + [f"s{j}: Relu" for j in range(k_out)] + ["x: Identity", "d: Relu"])
    edges = ", ".join([f"p{i} ~> x" for i in range(k_in)] + [f"x ~> s{j}" for j in range(k_out)] + ["d -> x", "x -> s0"])
    return model_of(tmp_path, f"graphs:\n  root:\n    nodes: {{{nodes}}}\n    edges: [{edges}]\n")


def test_isolate_orders_a_large_fan_through_one_noop(tmp_path):
    """RelinkControlNodeWithNoOpOptimize: (distinct in) × (distinct out) over 1000 goes through one
    `<node>_noop` (surgery.isolate_noop); a predecessor the data relinked to every successor, or a
    successor relinked from every predecessor, stays off it."""
    from harness import shared_pack
    m = _fan(tmp_path, 40, 30)
    m.isolate_noop = shared_pack().surgery.isolate_noop
    g = m.root
    count = g.count
    surgery.isolate(g.find("x"), [0])
    noop = g.find("x_noop")
    assert noop.type == "NoOp" and noop.id == count and g.node_list()[-1] is noop
    assert len(noop.in_ctrl) == 41 and {n.name for n in noop.in_ctrl} == {f"p{i}" for i in range(40)} | {"d"}
    assert [n.name for n in noop.out_ctrl] == sorted(f"s{j}" for j in range(30))
    assert all(list(g.find(f"p{i}").out_ctrl) == [noop] for i in range(40))
    assert g.find("s0").ins[0].peer.node is g.find("d")


def test_isolate_links_each_pair_under_the_threshold_or_without_the_pack_entry(tmp_path):
    m = _fan(tmp_path, 40, 25)      # 41 × 25 = 1025 > 1000, but no isolate_noop: a pair each
    g = m.root
    surgery.isolate(g.find("x"), [0])
    assert g.find("x_noop") is None and len(g.find("p0").out_ctrl) == 25
    m = _fan(tmp_path, 30, 30)      # 31 × 30 = 930: under GE's threshold
    from harness import shared_pack
    m.isolate_noop = shared_pack().surgery.isolate_noop
    surgery.isolate(m.root.find("x"), [0])
    assert m.root.find("x_noop") is None and len(m.root.find("p0").out_ctrl) == 30


def test_isolate_noop_is_checked_when_the_pack_loads(tmp_path):
    from engine.core.errors import InputError
    from engine.passes.catalog import load_pack
    from test_diff_util import edited_pack
    with pytest.raises(InputError) as e:
        load_pack(edited_pack(tmp_path, {"surgery.yaml": [("threshold: 1000}", "threshold: -1}")]}))
    assert "surgery.yaml:" in str(e.value) and "threshold must be 0 or more" in str(e.value)


def test_framework_ops_count_as_their_original_type_for_the_control_rules(tmp_path):
    """NodeUtils::GetNodeType: IsLikeAtomicClean and InsertNodeAfter's switch test read a
    FrameworkOp's original_type (surgery.keep_in_ctrl_from / keep_out_ctrl_of)."""
    from engine.passes.context import RunContext
    from engine.passes.surgery_hooks import surgery_hooks
    from harness import shared_pack
    m = model_of(tmp_path, """
graphs:
  root:
    nodes:
      fs: {type: FrameworkOp, attrs: {original_type: RefSwitch}}
      fm: {type: FrameworkOp, attrs: {original_type: MemSet}}
      fx: {type: FrameworkOp, attrs: {original_type: Relu}}
      fn: FrameworkOp
""")
    hooks = surgery_hooks(RunContext(shared_pack(), m, {}))
    g = m.root
    assert [bool(hooks.keep_out_ctrl(g.find(k))) for k in ("fs", "fm", "fx", "fn")] == [True, False, False, False]
    assert [bool(hooks.keep_in_ctrl(g.find(k))) for k in ("fs", "fm", "fx", "fn")] == [False, True, False, False]


def test_an_insert_specs_desc_reset_names_known_fields(tmp_path):
    from engine.core.errors import InputError
    from engine.passes.catalog import load_pack
    from test_diff_util import edited_pack
    with pytest.raises(InputError) as e:
        load_pack(edited_pack(tmp_path, {"layout.yaml": [("reset: [reuse_input]", "reset: [reuse_inputs]")]}))
    assert "layout.yaml:" in str(e.value) and "unknown field 'reuse_inputs'" in str(e.value) and "reuse_input" in str(e.value)
