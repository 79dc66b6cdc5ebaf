"""§11.4 variable_prepare_pass cases (52-63)."""
import pytest

from engine.core.errors import PassFailure
from engine.varmgr.passes.prepare import add_variable_ref, build_ref_map, run_variable_prepare

from .conftest import desc
from .graphs import GraphBuilder

VAR_PORTS = (["var"], ["var"])
ASSIGN_PORTS = (["ref", "value"], ["ref"])


def preds(node):
    return sorted(n.name for n in node.in_ctrl)


def test_variable_prepare_pass_succ1(pool):                             # 52
    b = GraphBuilder()
    b.op("variable", "Variable", outs=[desc((4,))], ports=VAR_PORTS)
    b.op("const", "Const", outs=[desc((4,))])
    b.op("assign", "Assign", inputs=["variable:0", "const:0"], outs=[desc((4,))], ports=ASSIGN_PORTS)
    b.op("framworkop", "FrameworkOp", inputs=["variable:0", "const:0"], outs=[desc((4,))],
         attrs={"original_type": "Assign"}, ports=ASSIGN_PORTS)
    b.op("variable1", "Variable", inputs=["variable:0"], outs=[desc((4,))], ports=VAR_PORTS)
    b.op("netoutput", "NetOutput", inputs=["variable1:0"], outs=[])
    m = b.build()
    changes = run_variable_prepare(m.root, pool.policy)
    # Note [refs are writers too]: Variable names its input and output alike here, so the ref made
    # after variable1 is itself a writer of variable1 when variable1's turn comes, and gets a ref
    # (GE's DealVariableNode follows every consumer the type-keyed map gives ref outputs)
    assert sorted(c.node for c in changes) == ["variable1_TO_variable_TO_variable1_REF_0_REF_0",
                                               "variable_TO_assign_REF_0", "variable_TO_variable1_REF_0"]
    ref = m.root.find("variable_TO_assign_REF_0")
    assert ref.type == "Variable" and ref.op.attr["ref_var_src_var_name"].s == b"variable"
    assert ref.ins[0].peer.node.name == "assign"
    ref1 = m.root.find("variable_TO_variable1_REF_0")
    assert ref1.ins[0].peer.node.name == "variable1"
    ref2 = m.root.find("variable1_TO_variable_TO_variable1_REF_0_REF_0")
    assert ref2.ins[0].peer.node is ref1 and ref2.op.attr["ref_var_src_var_name"].s == b"variable1"
    assert preds(m.root.find("netoutput")) == ["variable1_TO_variable_TO_variable1_REF_0_REF_0",
                                               "variable_TO_variable1_REF_0"]
    assert m.root.find("variable_TO_framworkop_REF_0") is None       # FrameworkOp: skipped


def test_add_variable_ref_index_out_of_range_and_existing(pool):       # 54
    b = GraphBuilder()
    b.op("variable", "Variable", outs=[desc((4,))])
    b.op("variable1", "Variable", inputs=["variable:0"], outs=[desc((4,))])
    m = b.build()
    changes = []
    var, var1 = m.root.find("variable"), m.root.find("variable1")
    add_variable_ref(var1, var, 3, pool.policy, changes)
    assert changes == []
    add_variable_ref(var1, var, 0, pool.policy, changes)
    add_variable_ref(var1, var, 0, pool.policy, changes)       # already has its ref: no second one
    assert [c.node for c in changes] == ["variable_TO_variable1_REF_0"]


def control_graph(refmerge_type):
    b = GraphBuilder()
    b.op("variable", "Variable", outs=[desc((4,))], ports=VAR_PORTS)
    b.op("refswitch", "FrameworkOp", inputs=["variable:0"], outs=[desc((4,)), desc((4,))],
         attrs={"original_type": "RefSwitch"})
    b.op("const", "Const", outs=[desc((4,))])
    b.op("assign", "Assign", inputs=["refswitch:0", "const:0"], outs=[desc((4,))], ports=ASSIGN_PORTS)
    attrs = {"original_type": refmerge_type} if refmerge_type else {}
    b.op("refmerge", "FrameworkOp", inputs=["assign:0"], outs=[desc((4,))], attrs=attrs)
    b.op("netoutput", "NetOutput", inputs=["refmerge:0"], outs=[])
    return b.build()


def test_variable_prepare_pass_control_op(pool):                        # 59
    with pytest.raises(PassFailure, match="FrameworkOp refmerge has no attr 'original_type'"):
        run_variable_prepare(control_graph(None).root, pool.policy)
    m = control_graph("RefMerge")
    changes = run_variable_prepare(m.root, pool.policy)
    ident = m.root.find("Identity_assign_TO_refmerge_0")
    assert ident is not None and ident.type == "Identity"
    assert m.root.find("refmerge").ins[0].peer.node is ident
    assert preds(ident) == ["variable_TO_assign_REF_0"]
    assert [c.rule for c in changes] == ["var/identity-before-merge", "var/ref-after-writer"]


def test_add_variable_ref_for_refdata(pool):                            # 60
    b = GraphBuilder()
    b.op("refdata", "RefData", outs=[desc((4,))], ports=(["x"], ["x"]))
    b.op("data", "Data", outs=[desc((4,))])
    b.op("assign", "Assign", inputs=["refdata:0", "data:0"], outs=[desc((4,))], ports=ASSIGN_PORTS)
    b.op("netoutput", "NetOutput", inputs=["assign:0"], outs=[])
    m = b.build()
    run_variable_prepare(m.root, pool.policy)
    ref = m.root.find("refdata_TO_assign_REF_0")
    assert ref.op.attr["ref_var_src_var_name"].s == b"refdata" and ref.type == "RefData"
    assert preds(m.root.find("netoutput")) == ["refdata_TO_assign_REF_0"]


def test_ref_map_unknown_type_is_empty(pool):                           # 62
    b = GraphBuilder()
    b.op("variable", "Variable", outs=[desc((4,))])
    b.op("relu", "Relu", inputs=["variable:0"])
    m = b.build()
    assert build_ref_map(m.root, pool.policy) == {}
    assert run_variable_prepare(m.root, pool.policy) == []


def test_stream_label_copied(pool):                                     # 63
    b = GraphBuilder()
    b.op("variable", "Variable", outs=[desc((4,))], ports=VAR_PORTS)
    b.op("const", "Const", outs=[desc((4,))])
    b.op("assign", "Assign", inputs=["variable:0", "const:0"], outs=[desc((4,))], ports=ASSIGN_PORTS,
         attrs={"_stream_label": "test_stream"})
    m = b.build()
    run_variable_prepare(m.root, pool.policy)
    assert m.root.find("variable_TO_assign_REF_0").op.attr["_stream_label"].s == b"test_stream"


def test_ref_port_index_input_gets_ref_identity(pool):
    b = GraphBuilder()
    b.op("variable", "Variable", outs=[desc((4,))])
    scatter = b.op("scatter", "ScatterUpdate", inputs=["variable:0"], outs=[], ports=(["var"], []))
    scatter.input_desc[0].attr["ref_port_index"].list.i.append(0)
    b.op("after", "Relu", inputs=["scatter:-1"], outs=[])
    m = b.build()
    changes = run_variable_prepare(m.root, pool.policy)
    assert [c.node for c in changes] == ["RefIdentity_variable_0_TO_scatter_0", "variable_TO_scatter_REF_0"]
    ident = m.root.find("RefIdentity_variable_0_TO_scatter_0")
    ref = m.root.find("variable_TO_scatter_REF_0")
    assert m.root.find("scatter").ins[0].peer.node is ident and ref.ins[0].peer.node is ident
    assert preds(ref) == ["scatter"]
    assert preds(m.root.find("after")) == ["scatter", "variable_TO_scatter_REF_0"]


def _refs_in_subgraphs(k: int, clash: bool = False):
    """A root calling k subgraphs, each with a variable v<i> its Assign writes (one ref each);
    with `clash`, the root has a node named like the first subgraph's ref."""
    b = GraphBuilder("root")
    b.op("x", "Data", outs=[desc((4,))])
    for i in range(k):
        b.op(f"call{i}", "PartitionedCall", inputs=["x:0"], outs=[desc((4,))], subgraphs=[f"body{i}"])
    if clash:
        b.op("v0_TO_assign_REF_0", "Relu", inputs=["x:0"], outs=[desc((4,))])
    for i in range(k):
        g = f"body{i}"
        b.sub(g)
        b.op("data", "Data", outs=[desc((4,))], attrs={"_parent_node_index": 0}, graph=g)
        b.op(f"v{i}", "Variable", outs=[desc((4,))], ports=VAR_PORTS, graph=g)
        b.op("assign", "Assign", inputs=[f"v{i}:0", "data:0"], outs=[desc((4,))], ports=ASSIGN_PORTS, graph=g)
        b.op("out", "NetOutput", inputs=["assign:0"], outs=[], graph=g)
    return b.build()


def _run_prepare(model, default_pack):
    from engine.passes.context import RunContext
    from engine.passes.manager import check_graph, resolve_passes, run_passes
    ctx = RunContext(default_pack, model, {})
    check_graph(ctx)
    run_passes(ctx, resolve_passes(default_pack, ["variable_prepare"], {}))
    return ctx


def test_a_subgraphs_ref_is_reported_from_its_own_graph(default_pack):
    """Note [the change's own graph]: the insertion's producer and consumers are the new
    ref's, though the root has a node of the same name before the subgraph."""
    ctx = _run_prepare(_refs_in_subgraphs(1, clash=True), default_pack)
    (ins,) = ctx.insertions
    assert (ins.name, ins.graph, ins.producer, ins.consumers) == ("v0_TO_assign_REF_0", "body0", "assign:0", ())


def test_recording_the_refs_looks_each_up_once(default_pack, monkeypatch):
    """The refs of k subgraphs are recorded with a look-up or two each, not one per graph
    before theirs (k² in all)."""
    from engine.core import graph as graph_mod
    k = 60
    model = _refs_in_subgraphs(k)
    finds = [0]
    real = graph_mod.Graph.find

    def counted(self, name):
        finds[0] += 1
        return real(self, name)
    monkeypatch.setattr(graph_mod.Graph, "find", counted)
    ctx = _run_prepare(model, default_pack)
    assert len(ctx.insertions) == k
    assert finds[0] <= 3 * k


def test_the_ref_is_ordered_before_each_edge_of_the_writer(pool):
    """AddControlEdge adds ref → peer for every peer anchor of the writer's out anchors (the
    control one too) with AddEdge, which asks nothing: a node the writer feeds twice and
    controls gets three edges (Note [repeated control edges] in engine/core/surgery.py)."""
    b = GraphBuilder()
    b.op("variable", "Variable", outs=[desc((4,))], ports=VAR_PORTS)
    b.op("const", "Const", outs=[desc((4,))])
    b.op("assign", "Assign", inputs=["variable:0", "const:0"], outs=[desc((4,))], ports=ASSIGN_PORTS)
    b.op("add", "Add", inputs=["assign:0", "assign:0", "assign:-1"], outs=[desc((4,))])
    m = b.build()
    run_variable_prepare(m.root, pool.policy)
    add = m.root.find("add")
    assert [n.name for n in add.in_ctrl] == ["assign"] + ["variable_TO_assign_REF_0"] * 3


def test_the_identity_before_a_merge_takes_its_place_and_names_its_ports(pool):
    """InsertIdentityNode: OpDescBuilder names the ports x and y, and InsertNodeBetweenDataAnchors
    (Anchor::Insert) puts the Identity where the Merge was among the writer's consumers."""
    b = GraphBuilder()
    b.op("variable", "Variable", outs=[desc((4,))], ports=VAR_PORTS)
    b.op("const", "Const", outs=[desc((4,))])
    b.op("assign", "Assign", inputs=["variable:0", "const:0"], outs=[desc((4,))], ports=ASSIGN_PORTS)
    b.op("merge", "Merge", inputs=["assign:0"], outs=[desc((4,))])
    b.op("relu", "Relu", inputs=["assign:0"], outs=[desc((4,))])
    m = b.build()
    run_variable_prepare(m.root, pool.policy)
    ident = m.root.find("Identity_assign_TO_merge_0")
    consumers = [p.node.name for p in m.root.find("assign").outs[0].peers]
    assert consumers[:2] == ["Identity_assign_TO_merge_0", "relu"]
    assert ident.ports() == ({"x": 0}, {"y": 0})


def test_a_writer_controlling_a_merge_fails_the_pass(pool):
    """AddControlEdge walks the control anchor's peers too; a Merge there gets InsertIdentityNode
    on a control anchor, which InsertNodeBetweenDataAnchors refuses: GE's pass fails."""
    b = GraphBuilder()
    b.op("variable", "Variable", outs=[desc((4,))], ports=VAR_PORTS)
    b.op("const", "Const", outs=[desc((4,))])
    b.op("assign", "Assign", inputs=["variable:0", "const:0"], outs=[desc((4,))], ports=ASSIGN_PORTS)
    b.op("merge", "Merge", inputs=["const:0", "assign:-1"], outs=[desc((4,))])
    with pytest.raises(PassFailure, match="control output of assign and Merge merge"):
        run_variable_prepare(b.build().root, pool.policy)
