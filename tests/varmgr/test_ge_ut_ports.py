"""Ports of GE's unit tests for the variable passes, on GE's own graphs.

Sources (GE mirror, tests/ge/ut/ge/graph/passes/):
  variable_prepare_pass_unittest.cc, variable_op_pass_unittest.cc,
  var_is_initialized_op_pass_unittest.cc, variable_ref_useless_control_out_delete_pass_unittest.cc
(variable_ref_delete_pass_unittest.cc is covered by tests/cases/variables/own-ref-delete-*.yaml and
test_passes_init.py). test_passes_*.py already hold simplified versions of most of these cases; the
ports here rebuild GE's exact graphs (node names, port counts, port names, descriptors, the edges
GE's builders really make) and assert what GE's test asserts. A check GE's test does not make is
marked "derived" and follows from reading GE's pass for that graph.

Each test has a fresh VarManager pool: GE's variable_op fixture does not reset the pool between
tests, but nothing its tests assert depends on that.
"""
import pytest

from engine.core.errors import PassFailure
from engine.core.surgery import link_ctrl
from engine.varmgr import getypes as t
from engine.varmgr.desc import desc_from_proto
from engine.varmgr.nodes import output_desc
from engine.varmgr.passes.is_initialized import run_var_is_initialized
from engine.varmgr.passes.prepare import add_variable_ref, insert_variable_ref, run_variable_prepare
from engine.varmgr.passes.useless_ctrl import run_variable_ref_useless_control_out_delete
from engine.varmgr.passes.variable_op import run_variable_op
from engine.varmgr.rebuild import GraphRebuildStateCtrl

from .conftest import FLOAT, INT32, NC1HWC0, NCHW, NHWC, ND, desc
from .graphs import GraphBuilder

F = t.FORMAT_VALUE
HWCN, CHWN = F["HWCN"], F["CHWN"]
BOOL = 12
REF_ATTR = "ref_var_src_var_name"


def names(nodes):
    return [n.name for n in nodes]


def value_of(node):
    return node.op.attr["value"].t.data


def session(pool):
    vm = pool.instance(0)
    vm.init(0, 0, 0, 0)
    return vm


# ---------------------------------------------------------------------------------------------
# variable_prepare_pass_unittest.cc
# ---------------------------------------------------------------------------------------------
DSL_VAR = desc((1, 1, 224, 224), NCHW)      # OP_CFG(VARIABLE, 1, 1) and CONSTANT's default tensor
DSL_IN = desc((), ND)                       # NodeUtils::AppendInputAnchor's GeTensorDesc(GeShape(), ND, FLOAT)


def prepare_graph():
    """BuildGraphVariablePreparePass as GE's DSL makes it. Variable has OP_CFG(1, 1); Assign,
    FrameworkOp and NetOutput have no OP_CFG, so they get only the input anchors their edges
    append (named __input<i>) and no output. UpdateInputName({var: 0}) fails on assign's two
    inputs (factory map smaller than the inputs), UpdateOutputName({var: 0}) leaves its no
    outputs unnamed: assign is no writer. netoutput's one input is named var."""
    b = GraphBuilder("variablePreparePassGraph")
    b.op("variable", "Variable", inputs=[""], ins=[DSL_VAR], outs=[DSL_VAR], ports=(["var"], ["var"]))
    b.op("const", "Const", outs=[DSL_VAR])
    b.op("assign", "Assign", inputs=["variable:0", "const:0"], ins=[DSL_IN, DSL_IN], outs=[],
         ports=(["__input0", "__input1"], []))
    b.op("framworkop", "FrameworkOp", inputs=["variable:0"], ins=[DSL_IN], outs=[],
         attrs={"original_type": "Assign"}, ports=(["__input0"], []))
    b.op("variable1", "Variable", inputs=["variable:0"], ins=[DSL_VAR], outs=[DSL_VAR],
         ports=(["var"], ["var"]))
    b.op("netoutput", "NetOutput", inputs=["variable1:0"], ins=[DSL_IN], outs=[], ports=(["var"], []))
    return b.build()


def test_prepare_succ1_run_on_ges_graph(pool):
    """variable_prepare_pass_succ1, Run part: SUCCESS. Derived: the map has only Variable
    {0: [0]} (assign and netoutput name no input like an output), so variable1 is the writer:
    variable_TO_variable1_REF_0 after it, ordered before netoutput; when variable1's own turn
    comes, that ref (a Variable) writes it, and gets variable1_TO_..._REF_0 (AddControlEdge
    copies the first ref's control edge to netoutput). No ref after assign or framworkop."""
    m = prepare_graph()
    changes = run_variable_prepare(m.root, pool.policy)
    assert [c.node for c in changes] == ["variable_TO_variable1_REF_0",
                                         "variable1_TO_variable_TO_variable1_REF_0_REF_0"]
    ref, ref2 = m.root.find("variable_TO_variable1_REF_0"), m.root.find("variable1_TO_variable_TO_variable1_REF_0_REF_0")
    assert ref.type == ref2.type == "Variable"
    assert ref.op.attr[REF_ATTR].s == b"variable" and ref2.op.attr[REF_ATTR].s == b"variable1"
    assert ref.ins[0].peer.node.name == "variable1" and ref2.ins[0].peer.node is ref
    assert names(m.root.find("netoutput").in_ctrl) == [ref.name, ref2.name]
    assert m.root.find("variable_TO_assign_REF_0") is None
    assert m.root.find("variable_TO_framworkop_REF_0") is None


def test_prepare_add_variable_ref_on_ges_graph(pool):
    """add_variable_ref: AddVariableRef(variable, variable1, 3) -> SUCCESS, nothing made (no
    output 3); after variable1 gets ref_var_src_var_name=src_var_name, AddVariableRef(variable,
    variable1, 0) -> SUCCESS. Derived: variable1 names another source, so it is no ref of
    variable1 and a ref variable1_TO_variable_REF_0 is made after variable:0, ordered before
    every consumer of variable (framworkop has its original_type, Assign: no Identity)."""
    m = prepare_graph()
    var, var1 = m.root.find("variable"), m.root.find("variable1")
    changes = []
    add_variable_ref(var, var1, 3, pool.policy, changes)
    assert changes == [] and m.root.count == 6
    var1.op.attr[REF_ATTR].s = b"src_var_name"
    add_variable_ref(var, var1, 0, pool.policy, changes)
    assert [c.node for c in changes] == ["variable1_TO_variable_REF_0"]
    ref = m.root.find("variable1_TO_variable_REF_0")
    assert ref.type == "Variable" and ref.op.attr[REF_ATTR].s == b"variable1"
    assert ref.ins[0].peer.node is var
    assert sorted(names(ref.out_ctrl)) == ["assign", "framworkop", "variable1"]


def control_op_graph(set_refmerge_type: bool):
    """BuildControlOpGraph: refswitch (FrameworkOp, no OP_CFG) gets two inputs and one output from
    its edges; the table's RefSwitch {0: [0, 1]} makes its output 1 == its output count
    (GetPeerNodeOfRefOutput's `== GetOutputsSize` case: SUCCESS, nothing followed). assign is
    named {ref: 0, value: 1} / {ref: 0} (UpdateOutputName drops value, index 1 >= 1 output)."""
    b = GraphBuilder("ControlOpGraph")
    b.op("variable", "Variable", inputs=[""], ins=[DSL_VAR], outs=[DSL_VAR], ports=(["var"], ["var"]))
    b.op("const0", "Const", outs=[DSL_VAR])
    b.op("refswitch", "FrameworkOp", inputs=["variable:0", "const0:0"], ins=[DSL_IN, DSL_IN],
         outs=[DSL_IN], attrs={"original_type": "RefSwitch"}, ports=(["__input0", "__input1"], ["__output0"]))
    b.op("const1", "Const", outs=[DSL_VAR])
    b.op("assign", "Assign", inputs=["refswitch:0", "const1:0"], ins=[DSL_IN, DSL_IN], outs=[DSL_IN],
         ports=(["ref", "value"], ["ref"]))
    b.op("refmerge", "FrameworkOp", inputs=["assign:0"], ins=[DSL_IN], outs=[DSL_IN],
         attrs={"original_type": "RefMerge"} if set_refmerge_type else None)
    b.op("netoutput", "NetOutput", inputs=["refmerge:0"], ins=[DSL_IN], outs=[])
    return b.build()


def test_prepare_control_op_on_ges_graph(pool):
    """variable_prepare_pass_control_op: refmerge without original_type -> FAILED; with RefMerge
    -> SUCCESS and Identity_assign_TO_refmerge_0 exists. Derived: the ref is after assign (the
    walk passes refswitch, a FrameworkOp gets none) and ordered before the Identity."""
    with pytest.raises(PassFailure, match="FrameworkOp refmerge has no attr 'original_type'"):
        run_variable_prepare(control_op_graph(False).root, pool.policy)
    m = control_op_graph(True)
    changes = run_variable_prepare(m.root, pool.policy)
    ident = m.root.find("Identity_assign_TO_refmerge_0")
    assert ident is not None and ident.type == "Identity"
    assert sorted(c.node for c in changes) == ["Identity_assign_TO_refmerge_0", "variable_TO_assign_REF_0"]
    assert names(ident.in_ctrl) == ["variable_TO_assign_REF_0"]
    assert m.root.find("variable_TO_refswitch_REF_0") is None and m.root.find("variable_TO_refswitch_REF_1") is None


def test_prepare_writer_with_control_out_gets_a_ref_too(pool):
    """has_control_out_check tests HasControlOut alone (no counterpart here); derived scenario for
    the branch it serves in DealWritableNode: a writer followed by a further writer gets a ref
    of its own only when it has a control successor (assign1 here), the last writer always."""
    ports = (["ref", "value"], ["ref"])
    b = GraphBuilder()
    b.op("variable", "Variable", outs=[desc((4,))], ports=(["var"], ["var"]))
    b.op("c", "Const", outs=[desc((4,))])
    b.op("assign1", "Assign", inputs=["variable:0", "c:0"], outs=[desc((4,))], ports=ports)
    b.op("assign2", "Assign", inputs=["assign1:0", "c:0"], outs=[desc((4,))], ports=ports)
    b.op("relu", "Relu", inputs=["c:0", "assign1:-1"], outs=[desc((4,))])
    m = b.build()
    changes = run_variable_prepare(m.root, pool.policy)
    assert [c.node for c in changes] == ["variable_TO_assign1_REF_0", "variable_TO_assign2_REF_0"]
    assert sorted(names(m.root.find("variable_TO_assign1_REF_0").out_ctrl)) == ["assign2", "relu"]
    b2 = GraphBuilder()                                      # the same without assign1 -> relu
    b2.op("variable", "Variable", outs=[desc((4,))], ports=(["var"], ["var"]))
    b2.op("c", "Const", outs=[desc((4,))])
    b2.op("assign1", "Assign", inputs=["variable:0", "c:0"], outs=[desc((4,))], ports=ports)
    b2.op("assign2", "Assign", inputs=["assign1:0", "c:0"], outs=[desc((4,))], ports=ports)
    assert [c.node for c in run_variable_prepare(b2.build().root, pool.policy)] == ["variable_TO_assign2_REF_0"]


# ---------------------------------------------------------------------------------------------
# variable_op_pass_unittest.cc
# ---------------------------------------------------------------------------------------------
D4, D5 = (1, 2, 3, 4), (1, 2, 3, 4, 5)
REF_NAME = "Node4D_to_5d_to_4d_1_REF_0"      # CreatVariableRef: "<var>_to_<trans>_REF_<count>"


def d(dims, fmt, dtype):
    """NodeBuilder's descriptors: shape, format and data type only."""
    return desc(dims, fmt, dtype)


def _var(b, name, out):
    b.op(name, "Variable", outs=[out])


def _trans(b, name, src, i, o, type_="TransData"):
    b.op(name, type_, inputs=[src], ins=[i], outs=[o])


def _relu(b, name, src, i):
    b.op(name, "Relu", inputs=[src], ins=[i], outs=[])


def _ref(b, src):
    """The var-ref of Node4D after `src`: Node4D's output desc in and out, Node4D's attrs (none)
    and ref_var_src_var_name."""
    b.op(REF_NAME, "Variable", inputs=[src], ins=[d(D4, NCHW, INT32)], outs=[d(D4, NCHW, INT32)],
         attrs={REF_ATTR: "Node4D"})


def graph0():
    """BuildComputeGraph0, node for node (apply_monetum's input has no producer)."""
    b = GraphBuilder("0")
    _var(b, "Node4D_new", d(D4, NCHW, INT32))
    _trans(b, "4d_to_5d_1_new", "Node4D_new:0", d(D4, NCHW, INT32), d(D5, NC1HWC0, FLOAT))
    _trans(b, "4d_to_5d_2_new", "Node4D_new:0", d(D4, NCHW, INT32), d(D5, NC1HWC0, INT32))
    _var(b, "Node4D", d(D4, NCHW, INT32))
    _trans(b, "4d_to_5d_1", "Node4D:0", d(D4, NCHW, INT32), d(D5, NC1HWC0, FLOAT))
    _trans(b, "4d_to_5d_2", "Node4D:0", d(D4, NCHW, INT32), d(D5, NC1HWC0, FLOAT))
    _relu(b, "5D_1", "4d_to_5d_1:0", d(D5, NC1HWC0, FLOAT))
    _relu(b, "5D_2", "4d_to_5d_2:0", d(D5, NC1HWC0, FLOAT))
    for suffix, fmt in (("NHWC", NHWC), ("HWCN", HWCN), ("CHWN", CHWN)):
        _var(b, f"Node4D_{suffix}", d(D4, fmt, INT32))
        _trans(b, f"4d_to_5d_1_{suffix}", f"Node4D_{suffix}:0", d(D4, fmt, INT32), d(D5, NC1HWC0, FLOAT))
        _relu(b, f"5D_1_{suffix}", f"4d_to_5d_1_{suffix}:0", d(D5, NC1HWC0, FLOAT))
    _var(b, "Node4D_D", d((1,), CHWN, INT32))
    _trans(b, "4d_to_5d_1_D", "Node4D_D:0", d(D4, CHWN, INT32), d(D5, NC1HWC0, FLOAT))
    _relu(b, "5D_1_D", "4d_to_5d_1_D:0", d(D5, NC1HWC0, FLOAT))
    b.op("apply_monetum", "ApplyMomentum", inputs=[""], ins=[d(D4, NCHW, INT32)], outs=[d(D5, NC1HWC0, FLOAT)])
    _trans(b, "5d_to_4d_1", "apply_monetum:0", d(D5, NC1HWC0, FLOAT), d(D4, NCHW, INT32))
    _ref(b, "5d_to_4d_1:0")
    return b.build()


def graph1(with_dangling_trans: bool = False):
    """BuildComputeGraph1; with `with_dangling_trans`, BuildComputeGraph4: the same plus
    5d_to_4d_2, whose edge into the ref's input 0 GE's AddEdge refuses (the anchor has its
    peer already), so it is left with neither input nor consumer."""
    b = GraphBuilder("0")
    _var(b, "Node4D", d(D4, NCHW, INT32))
    _trans(b, "4d_to_5d_1", "Node4D:0", d(D4, NCHW, INT32), d(D5, NC1HWC0, FLOAT))
    _trans(b, "4d_to_5d_2", "Node4D:0", d(D4, NCHW, INT32), d(D5, NC1HWC0, FLOAT))
    _relu(b, "5D_1", "4d_to_5d_1:0", d(D5, NC1HWC0, FLOAT))
    _relu(b, "5D_2", "4d_to_5d_2:0", d(D5, NC1HWC0, FLOAT))
    b.op("apply_monetum", "ApplyMomentum", inputs=[""], ins=[d(D4, NCHW, INT32)], outs=[d(D5, NC1HWC0, INT32)])
    _trans(b, "5d_to_4d_1", "apply_monetum:0", d(D5, NC1HWC0, INT32), d(D4, NCHW, INT32))
    if with_dangling_trans:
        b.op("5d_to_4d_2", "TransData", inputs=[""], ins=[d(D5, NC1HWC0, INT32)], outs=[d(D4, NCHW, INT32)])
    _ref(b, "5d_to_4d_1:0")
    return b.build()


def run_varop(pool, model, registered=()):
    vm = session(pool)
    for name in registered:
        vm.assign_var_mem(name, None, output_desc(model.root.find(name), pool.policy), 2)
    ctrl = GraphRebuildStateCtrl(pool.policy)
    ctrl.add_graph(0, model)
    return run_variable_op(model.root, vm, ctrl, 0)


def fds(node, kind="out"):
    td = (node.op.output_desc if kind == "out" else node.op.input_desc)[0]
    x = desc_from_proto(td, "")
    return x.format, x.dtype, len(x.dims)


GRAPH0_VARS = ("Node4D_new", "Node4D", "Node4D_NHWC", "Node4D_HWCN", "Node4D_CHWN", "Node4D_D")


def test_varop_trans_data_remove_on_ges_graph0(pool):
    """test_trans_data_remove (DoTest0/CheckTest0): the six variables registered."""
    m = graph0()
    run_varop(pool, m, GRAPH0_VARS)
    g = m.root
    assert fds(g.find("Node4D")) == (NC1HWC0, FLOAT, 5)
    assert fds(g.find(REF_NAME), "in") == (NC1HWC0, FLOAT, 5)
    assert all(g.find(n) is None for n in ("4d_to_5d_1", "4d_to_5d_2", "5d_to_4d_1"))
    assert g.find("4d_to_5d_1_new") is not None
    assert fds(g.find("Node4D_new")) == (NCHW, INT32, 4)


def test_varop_variable_ref_on_ges_graph1(pool):
    """test_variable_ref (DoTest1/CheckTest1): nothing registered; the ref's TransData takes
    NC1HWC0 INT32, no inverse of 4d_to_5d_1 (FLOAT): nothing changes."""
    m = graph1()
    run_varop(pool, m)
    g = m.root
    assert fds(g.find("Node4D")) == (NCHW, INT32, 4)
    assert fds(g.find(REF_NAME), "in") == (NCHW, INT32, 4)
    assert all(g.find(n) is not None for n in ("4d_to_5d_1", "4d_to_5d_2", "5d_to_4d_1"))


def test_varop_covarage_trans_var_data_on_ges_graph0(pool):
    """test_covarage_trans_var_data (DoTest3): all but Node4D_new registered; Run's status is
    not GE_GRAPH_VARIABLE_OP_PASS_FAILED (here: the pass does not fail)."""
    run_varop(pool, graph0(), GRAPH0_VARS[1:])


def test_varop_illegally_ref_on_ges_graph4(pool):
    """test_illegally_ref (DoTest4): SUCCESS. Derived: the ref is illegal as in graph 1 (its
    TransData takes INT32), so nothing is fused; the dangling 5d_to_4d_2 stays."""
    m = graph1(with_dangling_trans=True)
    assert run_varop(pool, m) == []
    assert fds(m.root.find("Node4D")) == (NCHW, INT32, 4)
    assert m.root.find("5d_to_4d_2") is not None and m.root.find("4d_to_5d_1") is not None


def test_varop_error_return_on_ges_graph0_unregistered(pool):
    """test_error_return (DoTest8): graph 0, nothing registered; GE checks nothing but that the
    run completes (CheckTest8 is always true). Derived: the pass does not fail."""
    run_varop(pool, graph0())


# ---------------------------------------------------------------------------------------------
# var_is_initialized_op_pass_unittest.cc
# ---------------------------------------------------------------------------------------------
GE_DEFAULT = desc()                         # GeTensorDesc(): ND, DT_FLOAT, scalar
GE_BOOL = desc(dtype=BOOL)


def make_graph_correct(type_="VarIsInitializedOp", node_name="VARISINITIALIZEDOP"):
    """MakeGraphCorrect (and MakeVarInitGraph with IsVariableInitialized), with its control
    edges Variable -> init -> Switch, RefSwitch."""
    b = GraphBuilder("test_graph")
    b.op("Variable", "Variable", outs=[GE_DEFAULT])
    b.op("const", "Const", outs=[GE_DEFAULT])
    b.op(node_name, type_, inputs=["Variable:0", "Variable:-1"], ins=[GE_DEFAULT], outs=[GE_BOOL])
    b.op("Switch", "Switch", inputs=["const:0", f"{node_name}:0", f"{node_name}:-1"],
         ins=[GE_DEFAULT, GE_DEFAULT], outs=[GE_DEFAULT, GE_DEFAULT])
    b.op("RefSwitch", "RefSwitch", inputs=["Variable:0", f"{node_name}:0", f"{node_name}:-1"],
         ins=[GE_DEFAULT, GE_DEFAULT], outs=[GE_DEFAULT, GE_DEFAULT])
    b.op("Merge", "Merge", inputs=["Switch:0", "RefSwitch:1"], ins=[GE_DEFAULT, GE_DEFAULT],
         outs=[GE_DEFAULT, GE_DEFAULT])
    b.op("NetOutput", "NetOutput", inputs=["Merge:0"], ins=[GE_DEFAULT], outs=[GE_DEFAULT])
    return b.build()


def test_is_init_run_success_on_ges_graph(pool):
    """run_success: SUCCESS and 7 direct nodes (GE's later asserts are other passes':
    SwitchDeadBranchElimination, MergePass). GE registers the variable in a VarManager it never
    Init-s, so the Const's value is not certain there and is not checked. Derived: the Const
    takes the name; MoveInCtrlEdges skips Variable, which ProcessInAnchor linked already (one
    edge, AddCtrlEdges); the control edges to Switch and RefSwitch move to it."""
    vm = session(pool)
    vm.assign_var_mem("Variable", None, GE_DEFAULT, 2)
    m = make_graph_correct()
    run_var_is_initialized(m.root, vm)
    assert m.root.count == 7
    const = m.root.find("VARISINITIALIZEDOP")
    assert const.type == "Const"
    assert names(const.in_ctrl) == ["Variable"]
    assert names(const.out_ctrl) == ["Switch", "RefSwitch"]
    assert sorted(p.node.name for p in const.outs[0].peers) == ["RefSwitch", "Switch"]


def test_is_init_change_to_false_on_ges_graph(pool):
    """change_to_false: the variable not registered -> a Const of the same name, 1-byte value 0."""
    m = make_graph_correct()
    run_var_is_initialized(m.root, session(pool))
    const = m.root.find("VARISINITIALIZEDOP")
    assert const.type == "Const" and value_of(const) == b"\x00"


def test_is_init_run_fail_2_on_ges_graph(pool):
    """run_fail_2 (MakeGraphError): the input is a Constant (CONSTANTOP) -> FAILED."""
    b = GraphBuilder("test_graph")
    b.op("Const", "Constant", outs=[GE_DEFAULT])
    b.op("VARISINITIALIZEDOP", "VarIsInitializedOp", inputs=["Const:0"], ins=[GE_DEFAULT], outs=[GE_BOOL])
    b.op("Switch", "Switch", inputs=["Const:0", "VARISINITIALIZEDOP:0"], ins=[GE_DEFAULT] * 2,
         outs=[GE_DEFAULT] * 2)
    b.op("RefSwitch", "RefSwitch", inputs=["VARISINITIALIZEDOP:0"], ins=[GE_DEFAULT], outs=[GE_DEFAULT])
    b.op("Merge", "Merge", inputs=["Switch:1", "RefSwitch:0"], ins=[GE_DEFAULT] * 2, outs=[GE_DEFAULT])
    b.op("NetOutput", "NetOutput", inputs=["Merge:0"], ins=[GE_DEFAULT], outs=[GE_DEFAULT])
    with pytest.raises(PassFailure, match="not a variable"):
        run_var_is_initialized(b.build().root, session(pool))


def test_is_init_run_fail_3_on_ges_graph(pool):
    """run_fail_3 (MakeGraphErrorTwo): two data inputs (Const, Variable) -> FAILED."""
    b = GraphBuilder("test_graph")
    b.op("Const", "Constant", outs=[GE_DEFAULT])
    b.op("Variable", "Variable", outs=[GE_DEFAULT])
    b.op("VARISINITIALIZEDOP", "VarIsInitializedOp", inputs=["Const:0", "Variable:0"], ins=[GE_DEFAULT] * 2,
         outs=[GE_BOOL])
    b.op("Switch", "Switch", inputs=["Const:0", "VARISINITIALIZEDOP:0"], ins=[GE_DEFAULT] * 2, outs=[GE_DEFAULT])
    b.op("RefSwitch", "RefSwitch", inputs=["VARISINITIALIZEDOP:0"], ins=[GE_DEFAULT], outs=[GE_DEFAULT])
    b.op("Merge", "Merge", inputs=["Switch:0", "RefSwitch:0"], ins=[GE_DEFAULT] * 2, outs=[GE_DEFAULT])
    b.op("NetOutput", "NetOutput", inputs=["Merge:0"], ins=[GE_DEFAULT], outs=[GE_DEFAULT])
    with pytest.raises(PassFailure, match="has 2 data inputs, expected 1"):
        run_var_is_initialized(b.build().root, session(pool))


def test_is_init_run_fail_4_on_ges_graph(pool):
    """run_fail_4 (MakeGraphErrorThree): two outputs -> FAILED (ProcessInAnchor's anchor count)."""
    vm = session(pool)
    vm.assign_var_mem("Variable", None, GE_DEFAULT, 2)
    b = GraphBuilder("test_graph")
    b.op("Variable", "Variable", outs=[GE_DEFAULT])
    b.op("VARISINITIALIZEDOP", "VarIsInitializedOp", inputs=["Variable:0"], ins=[GE_DEFAULT],
         outs=[GE_BOOL, GE_BOOL])
    b.op("Switch", "Switch", inputs=["Variable:0", "VARISINITIALIZEDOP:0"], ins=[GE_DEFAULT] * 2,
         outs=[GE_DEFAULT])
    b.op("RefSwitch", "RefSwitch", inputs=["VARISINITIALIZEDOP:0"], ins=[GE_DEFAULT], outs=[GE_DEFAULT])
    b.op("Merge", "Merge", inputs=["Switch:0", "RefSwitch:0"], ins=[GE_DEFAULT] * 2, outs=[GE_DEFAULT])
    b.op("NetOutput", "NetOutput", inputs=["Merge:0"], ins=[GE_DEFAULT], outs=[GE_DEFAULT])
    with pytest.raises(PassFailure, match="exactly 1 data input and 1 data output anchor"):
        run_var_is_initialized(b.build().root, vm)


UT = desc((1, 1, 224, 224), NCHW)           # ut::GraphBuilder::AddNode's default tensor


def switch_graph(name: str, link_init: str):
    """BuildGraph1 / BuildGraph3 / BuildGraph4 of the file: ut::GraphBuilder nodes (refswitch1 and
    switch1 with 2 inputs, 1 output: the edge refswitch1:1 -> merge1:1 is refused by GE's AddEdge,
    there is no output 1). `link_init`: "parallel" (graph 1), "before" (graph 3: assign1 -> addn1
    -> netoutput1, addn1 controls var_is_init1), "after" (graph 4: var_is_init1 controls assign1)."""
    b = GraphBuilder(name)
    b.op("const1", "Const", outs=[UT])
    b.op("var1", "Variable", outs=[UT])
    b.op("assign1", "Assign", inputs=["var1:0", "const1:0"], ins=[UT, UT], outs=[UT])
    if link_init == "before":
        b.op("addn1", "AddN", inputs=["assign1:0"], ins=[UT], outs=[UT])
        init_in = ["var1:0", "addn1:-1"]
    else:
        init_in = ["var1:0"]
    b.op("var_is_init1", "VarIsInitializedOp", inputs=init_in, ins=[UT], outs=[UT])
    b.op("const2", "Const", outs=[UT])
    b.op("refswitch1", "RefSwitch", inputs=["var1:0", "var_is_init1:0"], ins=[UT, UT], outs=[UT])
    b.op("switch1", "Switch", inputs=["const2:0", "var_is_init1:0"], ins=[UT, UT], outs=[UT])
    b.op("merge1", "Merge", inputs=["switch1:0", ""], ins=[UT, UT], outs=[UT])
    b.op("var2", "Variable", outs=[UT])
    b.op("assign2", "Assign", inputs=["var2:0", "merge1:0"], ins=[UT, UT], outs=[UT])
    first = "addn1:0" if link_init == "before" else "assign1:0"
    b.op("netoutput1", "NetOutput", inputs=[first, "assign2:0"], ins=[UT, UT], outs=[])
    m = b.build()
    if link_init == "after":                      # AddControlEdge(var_is_init1, assign1)
        link_ctrl(m.root.find("var_is_init1"), m.root.find("assign1"))
    return m


def test_is_init_init_before_on_ges_graph3(pool):
    """init_before_VarIsInitializedOp: Const, 2 in-nodes, in-control {addn1, var1}, value 1."""
    m = switch_graph("g3", "before")
    run_var_is_initialized(m.root, session(pool))
    c = m.root.find("var_is_init1")
    assert c.type == "Const" and value_of(c) == b"\x01"
    assert len(c.in_ctrl) == 2 and set(names(c.in_ctrl)) == {"addn1", "var1"}
    assert not any(a.peer for a in c.ins)


def test_is_init_init_after_on_ges_graph4(pool):
    """init_after_VarIsInitializedOp: Const, 1 in-node; out data {switch1, refswitch1}; 3 out
    nodes; out-control[0] assign1; in-control[0] var1; value 0."""
    m = switch_graph("g4", "after")
    run_var_is_initialized(m.root, session(pool))
    c = m.root.find("var_is_init1")
    assert c.type == "Const" and value_of(c) == b"\x00"
    assert names(c.in_ctrl) == ["var1"] and not any(a.peer for a in c.ins)
    data_out = {p.node.name for o in c.outs for p in o.peers}
    assert data_out == {"switch1", "refswitch1"}
    assert len(data_out | set(names(c.out_ctrl))) == 3
    assert names(c.out_ctrl)[0] == "assign1"


def _inited(m, pool):
    inited = {}
    run_var_is_initialized(m.root, session(pool), inited)
    return {n.name: sorted(v.name for v in s) for n, s in inited.items()}


def test_is_init_init_parallel_on_ges_graph1(pool):
    """init_parallel_VarIsInitializedOp: value 0; inited sets assign1 {var1}, var1 none, merge1
    none, assign2 {var2}, netoutput1 {var1, var2} (GE keeps no entry for an empty set)."""
    m = switch_graph("g1", "parallel")
    got = _inited(m, pool)
    c = m.root.find("var_is_init1")
    assert c.type == "Const" and value_of(c) == b"\x00"
    assert got["assign1"] == ["var1"] and got["assign2"] == ["var2"]
    assert not got.get("var1") and not got.get("merge1")
    assert got["netoutput1"] == ["var1", "var2"]


def test_is_init_init_delivering_on_ges_graph2(pool):
    """init_delivering: BuildGraph2 exactly (assign1 controls addn1, add1 feeds it; conv1 takes
    const3); the inited sets of every node."""
    b = GraphBuilder("g2")
    for n, ty in (("var1", "Variable"), ("const1", "Const"), ("const2", "Const")):
        b.op(n, ty, outs=[UT])
    b.op("assign1", "Assign", inputs=["var1:0", "const1:0"], ins=[UT, UT], outs=[UT])
    b.op("add1", "Add", inputs=["const1:0", "const2:0"], ins=[UT, UT], outs=[UT])
    b.op("addn1", "AddN", inputs=["add1:0", "assign1:-1"], ins=[UT], outs=[UT])
    b.op("const3", "Const", outs=[UT])
    b.op("conv1", "Conv2D", inputs=["addn1:0", "const3:0"], ins=[UT, UT], outs=[UT])
    for n, ty in (("var2", "Variable"), ("var3", "Variable"), ("const4", "Const")):
        b.op(n, ty, outs=[UT])
    b.op("assign2", "Assign", inputs=["var2:0", "conv1:0"], ins=[UT, UT], outs=[UT])
    b.op("assign3", "Assign", inputs=["var3:0", "const4:0"], ins=[UT, UT], outs=[UT])
    b.op("sub1", "Sub", inputs=["assign2:0", "assign3:0"], ins=[UT, UT], outs=[UT])
    b.op("netoutput1", "NetOutput", inputs=["sub1:0"], ins=[UT], outs=[])
    got = _inited(b.build(), pool)
    expected = {"var1": [], "const1": [], "const2": [], "assign1": ["var1"], "add1": [], "addn1": ["var1"],
                "const3": [], "conv1": ["var1"], "var2": [], "assign2": ["var1", "var2"], "var3": [],
                "const4": [], "assign3": ["var3"], "sub1": ["var1", "var2", "var3"],
                "netoutput1": ["var1", "var2", "var3"]}
    assert {n: got.get(n, []) for n in expected} == expected


def test_is_init_is_variable_initialized_on_ges_graph(pool):
    """is_variable_initialized_success (MakeVarInitGraph): IsVariableInitialized -> "Const",
    value 0 (GE registers nothing there)."""
    m = make_graph_correct("IsVariableInitialized", "ISVARIABLEINITIALIZED")
    run_var_is_initialized(m.root, session(pool))
    c = m.root.find("ISVARIABLEINITIALIZED")
    assert c.type == "Const" and value_of(c) == b"\x00"


# ---------------------------------------------------------------------------------------------
# variable_ref_useless_control_out_delete_pass_unittest.cc
# ---------------------------------------------------------------------------------------------
def test_useless_ctrl_nothing_changed_on_ges_graph3(pool):
    """NothingChanged (BuildGraph3): var1 (a ref of TestVar) has no control successor: SUCCESS,
    5 nodes, var1 still has its one out node."""
    b = GraphBuilder("g3")
    b.op("data1", "Data", inputs=[""], ins=[UT], outs=[UT])
    b.op("addn1", "AddN", inputs=["data1:0"], outs=[UT])
    b.op("var1", "Variable", inputs=["addn1:0"], outs=[UT], attrs={REF_ATTR: "TestVar"})
    b.op("addn2", "AddN", inputs=["addn1:0"], outs=[UT])
    b.op("netoutput1", "NetOutput", inputs=["var1:0", "addn2:0"], outs=[UT, UT])
    m = b.build()
    assert run_variable_ref_useless_control_out_delete(m.root, pool.policy) == []
    assert m.root.count == 5
    var1 = m.root.find("var1")
    assert [p.node.name for o in var1.outs for p in o.peers] == ["netoutput1"] and not var1.out_ctrl


def test_prepare_succ1_insert_variable_ref_with_a_non_variable_source(pool):
    """variable_prepare_pass_succ1, second part: after Run, InsertVariableRef(variable1, 0,
    netoutput) -> SUCCESS. GE's CreateVariableRef gives the ref one input and one output, both
    var_node's GetOutputDesc(0), which for netoutput (no outputs) is InvalidGeTensorDesc(); the
    rest as for any InsertVariableRef (derived)."""
    m = prepare_graph()
    run_variable_prepare(m.root, pool.policy)
    v1, no = m.root.find("variable1"), m.root.find("netoutput")
    changes = []
    insert_variable_ref(v1, 0, no, pool.policy, changes)
    ident = m.root.find("RefIdentity_variable_0_TO_variable1_0")
    ref = m.root.find("netoutput_TO_variable1_REF_0")
    assert ident.type == "RefIdentity" and ref.type == "NetOutput"
    assert ref.op.attr[REF_ATTR].s == b"netoutput"
    assert len(ref.op.input_desc) == len(ref.op.output_desc) == 1
    assert v1.ins[0].peer.node is ident and ident.ins[0].peer.node.name == "variable"
    assert ref.ins[0].peer.node is ident
    assert names(ref.in_ctrl) == ["variable1"]
    assert sorted(names(ref.out_ctrl)) == ["netoutput", "variable_TO_variable1_REF_0"]
