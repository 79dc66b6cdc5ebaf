"""GE's topological sort as the engine runs it (engine/core/toposort.py): the strategy the pack
reads from the options, the shortcut for a graph a repeatable sort left unedited, and the
pack's say over it. GE's own unit-test scenarios are in tests/test_toposort_ge.py."""
from __future__ import annotations

import random

import pytest

from engine.core import surgery, toposort
from engine.core.dumpio import build_model
from engine.core.errors import InputError
from engine.core.toposort import SortPolicy, sort_graph, sort_model
from engine.dsl.library import _int32, _strtol
from engine.passes.catalog import load_pack
from engine.passes.context import RunContext
from engine.passes.manager import install_policies, resolve_passes, run_passes
from engine.proto import ge_ir_pb2 as pb
from harness import CASES, shared_pack
from test_diff_util import edited_pack
from test_surgery import model_of

PACK = shared_pack()


# ---- the strategy from the options ---------------------------------------------------------
def test_strtol_and_int32_read_as_c_does():
    assert [_strtol(x) for x in ("12", " \t-7x", "+3", "abc", "", "1.9", "٣")] == [12, -7, 3, 0, 0, 1, 0]
    assert _strtol("99999999999999999999") == (1 << 63) - 1 and _strtol(None) is None
    assert [_int32(x) for x in (1, 4294967297, 1 << 31, -1)] == [1, 1, -(1 << 31), -1]


@pytest.mark.parametrize("options, mode", [
    ({}, "dfs"),
    ({"ge.graphRunMode": "1"}, "bfs"),
    ({"ge.graphRunMode": "0"}, "dfs"),
    ({"ge.graphRunMode": "2"}, "bfs"),                   # >= TRAIN
    ({"ge.topoSortingMode": "3"}, "stable_rdfs"),
    ({"ge.topoSortingMode": " 2"}, "rdfs"),
    ({"ge.topoSortingMode": "abc"}, "bfs"),              # strtol reads 0
    ({"ge.topoSortingMode": "10", "ge.graphRunMode": "1"}, "bfs"),   # invalid: the train flag decides
    ({"ge.topoSortingMode": "-1"}, "dfs"),
    ({"ge.topoSortingMode": "", "ge.graphRunMode": "1"}, "bfs"),
    ({"ge.topoSortingMode": "4294967298"}, "rdfs"),      # cast to the enum: 2
    ({"ge.topoSortingMode": "1", "ge.graphRunMode": "1"}, "dfs"),
])
def test_mode_is_ges_strategy(options, mode):
    ctx = RunContext(PACK, build_model(_md()), options)
    install_policies(ctx)
    assert ctx.model.sort_policy.mode == mode
    assert ctx.model.sort_policy.memory_priority is False


def test_memory_priority_and_the_classes_come_from_the_pack(tmp_path):
    m = model_of(tmp_path, "graphs:\n  root:\n    nodes: {d: Data, r: Recv, c: Const, v: Variable, x: Relu}\n")
    ctx = RunContext(PACK, m, {"ge.exec.memoryOptimizationPolicy": "MemoryPriority"})
    install_policies(ctx)
    pol = m.sort_policy
    assert pol.memory_priority and not pol.repeatable and pol.delays
    assert [n.name for n in m.root.nodes() if pol.inputs_first(n)] == ["d", "r"]
    assert [n.name for n in m.root.nodes() if pol.long_lived(n)] == ["d", "c", "v"]


def _md() -> pb.ModelDef:
    md = pb.ModelDef()
    g = md.graph.add(name="g")
    g.op.add(name="a", type="Relu")
    return md


# ---- the pack decides --------------------------------------------------------------------------
def test_a_pack_edit_changes_the_strategy(tmp_path):
    """Declarative: an edited `mode` (stable reverse DFS) keeps a sorted list
    where GE's default reorders it."""
    text = "graphs:\n  root:\n    nodes: {a: Relu, b: Relu, c: Relu}\n    edges: [a -> b, a -> c]\n"
    orders = []
    for pack in (PACK, load_pack(edited_pack(tmp_path, {"surgery.yaml": [
            ('      then "bfs" else "dfs"', '      then "bfs" else "stable_rdfs"')]}))):
        m = model_of(tmp_path, text)
        install_policies(RunContext(pack, m, {}))
        assert sort_model(m) == []
        orders.append([n.name for n in m.root.nodes()])
    assert orders == [["a", "c", "b"], ["a", "b", "c"]]


def test_a_mode_outside_the_strategies_is_a_located_error(tmp_path):
    pack = load_pack(edited_pack(tmp_path, {"surgery.yaml": [('      then "bfs" else "dfs"', '      then "bfs" else "depth"')]}))
    with pytest.raises(InputError) as e:
        install_policies(RunContext(pack, build_model(_md()), {}))
    assert "surgery.yaml" in str(e.value) and "'depth'" in str(e.value) and "stable_rdfs" in str(e.value)


# ---- Note [sorted stays sorted] -------------------------------------------------------------------
def _random_dag(rng: random.Random, size: int):
    """Edges only from a smaller index to a larger one, the list shuffled; a few Data nodes."""
    md = pb.ModelDef()
    g = md.graph.add(name="g")
    names = [f"n{i}" for i in range(size)]
    ops = []
    for i, name in enumerate(names):
        o = pb.OpDef(name=name, type="Data" if rng.random() < 0.15 else "Relu")
        o.output_desc.add()
        if i and o.type != "Data":
            for _ in range(rng.randrange(3)):
                o.input_desc.add()
                o.input.append(f"n{rng.randrange(i)}:0")
            if rng.random() < 0.3:
                o.input.append(f"n{rng.randrange(i)}:-1")
        ops.append(o)
    rng.shuffle(ops)
    g.op.extend(ops)
    return build_model(md)


@pytest.mark.parametrize("mode", ["dfs", "bfs"])
def test_a_second_sort_changes_nothing(mode):
    """The shortcut's premise: DFS and BFS give back the order they made."""
    rng = random.Random(3)
    pol = SortPolicy(mode, inputs_first=lambda n: n.type == "Data")
    for _ in range(200):
        g = _random_dag(rng, rng.randrange(1, 30)).root
        once = toposort._forward(g.node_list(), pol)
        assert toposort._forward(once, pol) == once


@pytest.mark.parametrize("mode", ["dfs", "bfs"])
def test_the_shortcut_never_keeps_a_stale_order(mode, monkeypatch):
    """After any mix of sorts and edits, sort_graph leaves what a full sort of the list gives;
    an unedited graph is not sorted again."""
    rng = random.Random(11)
    pol = SortPolicy(mode, inputs_first=lambda n: n.type == "Data")
    full = []
    forward = toposort._forward
    monkeypatch.setattr(toposort, "_forward", lambda nodes, p: full.append(1) or forward(nodes, p))
    skipped = 0
    for _ in range(60):
        g = _random_dag(rng, rng.randrange(2, 25)).root
        for _ in range(6):
            expected = forward(g.node_list(), pol)
            before = len(full)
            assert sort_graph(g, pol)
            assert g.node_list() == expected and [n.id for n in expected] == list(range(len(expected)))
            skipped += len(full) == before
            _edit(rng, g)
    assert skipped > 50


def _edit(rng: random.Random, g) -> None:
    """Nothing, a new forward data or control edge, or a removed data edge."""
    nodes = g.node_list()
    if len(nodes) < 2 or rng.random() < 0.4:
        return
    a, b = sorted(rng.sample(nodes, 2), key=lambda n: int(n.name[1:]))
    if rng.random() < 0.5:
        surgery.link_ctrl(a, b)
        return
    linked = [(p.peer, p) for n in nodes for p in n.ins if p.peer is not None]
    if linked and rng.random() < 0.5:
        surgery.unlink(*rng.choice(linked))
    elif b.type != "Data":
        b.ensure_inputs(len(b.ins) + 1)
        surgery.link(a.outs[0], b.ins[-1])


def test_the_passes_sort_again_only_after_an_edit(monkeypatch):
    """GE sorts five times a run here (GraphLint, HcclMemcpyPass, the layout pass before and
    after CtrlNodeConflict, the end of MemConflictProc); only GraphLint's, and the one after
    the layout pass's two Identities, are full sorts."""
    from engine.core.yamlgraph import load_yaml_graph
    model, options = load_yaml_graph(CASES / "hccl" / "HM-10.yaml", PACK)
    counted = []
    forward = toposort._forward
    monkeypatch.setattr(toposort, "_forward", lambda nodes, p: counted.append(len(nodes)) or forward(nodes, p))
    ids = ["graph_lint", "hccl_memcpy", "mem_layout_conflict", "topological_sorting"]
    ctx = RunContext(PACK, model, options)
    run_passes(ctx, resolve_passes(PACK, ids, options))
    assert [i.pass_id for i in ctx.insertions] == ["mem_layout_conflict"] * 2
    assert counted == [len(model.root.node_list()) - 2, len(model.root.node_list())]


IF_GRAPH = """
graphs:
  root:
    nodes:
      d: Data
      if: {{type: If, inputs: 1, outputs: 0, subgraphs: [then_g, else_g]}}
    edges: [d -> if]
  then_g:
    nodes: {then}
    edges: {edges}
  else_g:
    nodes: {{e: {{type: Data, attrs: {{_parent_node_index: 0}}}}}}
"""


def test_graph_scope_passes_take_the_subgraphs_in_the_models_order(tmp_path):
    """PassManager runs a graph pass on GetAllSubgraphs, which a root sort reorders: an If's
    branches last to first."""
    m = model_of(tmp_path, IF_GRAPH.format(then="{t: {type: Data, attrs: {_parent_node_index: 0}}}", edges="[]"))
    assert [g.name for g in m.all_subgraphs()] == ["then_g", "else_g"]
    install_policies(RunContext(PACK, m, {}))
    assert sort_model(m) == []
    assert [g.name for g in m.all_subgraphs()] == ["else_g", "then_g"]
    assert [(n.name, n.id) for n in m.all_nodes()] == [("d", 0), ("if", 1), ("t", 2), ("e", 3)]


def test_a_model_nothing_edited_is_not_renumbered(tmp_path, monkeypatch):
    """A root's sort that finds every graph as the same policy left it does nothing; an edit
    in one subgraph sorts that graph again and renumbers the model; a subgraph sorted alone
    numbers itself, so the next root sort numbers everything again."""
    m = model_of(tmp_path, IF_GRAPH.format(then="{t: {type: Data, attrs: {_parent_node_index: 0}}, r: Relu, s: Relu}",
                                           edges="[t -> r, t -> s]"))
    install_policies(RunContext(PACK, m, {}))
    calls = {"number": 0, "forward": []}
    number, forward = toposort.number, toposort._forward
    monkeypatch.setattr(toposort, "number", lambda nodes: calls.__setitem__("number", calls["number"] + 1) or number(nodes))
    monkeypatch.setattr(toposort, "_forward", lambda nodes, p: calls["forward"].append(nodes[0].graph.name) or forward(nodes, p))
    assert sort_model(m) == [] and calls["forward"] == ["root", "then_g", "else_g"]
    before = dict(calls, forward=list(calls["forward"]))
    assert sort_model(m) == [] and calls == before
    then_g = m.graphs["then_g"]
    surgery.link_ctrl(then_g.find("s"), then_g.find("r"))
    assert sort_model(m) == [] and calls["forward"][3:] == ["then_g"]
    assert [(n.name, n.id) for n in m.all_nodes()] == [("d", 0), ("if", 1), ("t", 2), ("s", 3), ("r", 4), ("e", 5)]
    assert sort_model(m, then_g) == [] and [n.id for n in then_g.nodes()] == [0, 1, 2]
    assert sort_model(m) == [] and [n.id for n in m.all_nodes()] == list(range(6))
