"""§11.5 var_is_initialized_op_pass cases (64-73) and variable_ref_delete."""
import pytest

from engine.core.errors import PassFailure
from engine.varmgr.passes.is_initialized import run_var_is_initialized
from engine.varmgr.passes.ref_delete import run_variable_ref_delete

from .conftest import desc
from .graphs import GraphBuilder

BOOL = desc((), dtype=12)


def switch_graph(extra=None):
    b = GraphBuilder("g")
    b.op("variable", "Variable", outs=[desc((2,))])
    b.op("var_is_init", extra or "VarIsInitializedOp", inputs=["variable:0"], outs=[BOOL])
    b.op("const", "Const", outs=[desc((2,))])
    b.op("switch", "Switch", inputs=["const:0", "var_is_init:0"], outs=[desc((2,)), desc((2,))])
    b.op("refswitch", "RefSwitch", inputs=["variable:0", "var_is_init:0"], outs=[desc((2,)), desc((2,))])
    b.op("merge", "Merge", inputs=["switch:0", "refswitch:1"], outs=[desc((2,))])
    b.op("netoutput", "NetOutput", inputs=["merge:0"], outs=[])
    return b.build()


def session(pool):
    vm = pool.instance(0)
    vm.init(0, 0, 0, 0)
    return vm


def value_of(node):
    return node.op.attr["value"].t.data


def test_run_success(pool):                                             # 64
    vm = session(pool)
    vm.assign_var_mem("variable", None, desc((2,), size=8), 2)
    m = switch_graph()
    changes = run_var_is_initialized(m.root, vm)
    const = m.root.find("var_is_init")
    assert const.type == "Const" and value_of(const) == b"\x01"
    assert m.root.count == 7
    assert changes[0].detail == {"variable": "variable", "value": True,
                                 "why": "the VarManager knows the variable"}
    assert [p.node.name for p in const.outs[0].peers] == ["switch", "refswitch"]
    assert const.in_ctrl == [m.root.find("variable")]


def test_change_to_false(pool):                                         # 65
    m = switch_graph()
    run_var_is_initialized(m.root, session(pool))
    assert value_of(m.root.find("var_is_init")) == b"\x00"


def test_the_weight_and_output_take_the_nodes_output_descriptor(pool):
    """CreateConstant: GeTensor(GetOutputDesc(0), &bool) and AddOutputDesc(that descriptor): the
    weight's descriptor is the VarIsInitializedOp's output 0 (here a bool of shape [1] in NCHW),
    not a fresh one."""
    b = GraphBuilder("g")
    b.op("variable", "Variable", outs=[desc((2,))])
    b.op("var_is_init", "VarIsInitializedOp", inputs=["variable:0"], outs=[desc((1,), 0, 12)])
    b.op("netoutput", "NetOutput", inputs=["var_is_init:0"], outs=[])
    m = b.build()
    before = type(m.root.find("var_is_init").op.output_desc[0])()
    before.CopyFrom(m.root.find("var_is_init").op.output_desc[0])
    run_var_is_initialized(m.root, session(pool))
    const = m.root.find("var_is_init").op
    assert const.attr["value"].t.desc == before          # message equality (map order is not fixed in bytes)
    assert list(const.output_desc) == [before]
    assert list(const.attr["value"].t.desc.shape.dim) == [1]


def test_input_must_be_variable(pool):                                  # 66
    b = GraphBuilder()
    b.op("c", "Constant")
    b.op("init", "VarIsInitializedOp", inputs=["c:0"], outs=[BOOL])
    with pytest.raises(PassFailure, match="not a variable"):
        run_var_is_initialized(b.build().root, session(pool))


def test_two_data_inputs_fail(pool):                                    # 67
    b = GraphBuilder()
    b.op("v", "Variable")
    b.op("init", "VarIsInitializedOp", inputs=["v:0", "v:0"], outs=[BOOL])
    with pytest.raises(PassFailure, match="has 2 data inputs, expected 1"):
        run_var_is_initialized(b.build().root, session(pool))


def test_two_outputs_fail(pool):                                        # 68
    vm = session(pool)
    vm.assign_var_mem("v", None, desc(size=4), 2)
    b = GraphBuilder()
    b.op("v", "Variable")
    b.op("init", "VarIsInitializedOp", inputs=["v:0"], outs=[BOOL, BOOL])
    with pytest.raises(PassFailure, match="exactly 1 data input and 1 data output anchor"):
        run_var_is_initialized(b.build().root, vm)


def test_init_before(pool):                                             # 69
    b = GraphBuilder()
    b.op("var1", "Variable")
    b.op("assign1", "Assign", inputs=["var1:0", "var1:0"])
    b.op("addn1", "AddN", inputs=["assign1:0"])
    b.op("var_is_init1", "VarIsInitializedOp", inputs=["var1:0", "addn1:-1"], outs=[BOOL])
    m = b.build()
    run_var_is_initialized(m.root, session(pool))
    const = m.root.find("var_is_init1")
    assert value_of(const) == b"\x01"
    assert {n.name for n in const.in_ctrl} == {"addn1", "var1"} and len(const.in_ctrl) == 2


def test_init_after(pool):                                              # 70
    b = GraphBuilder()
    b.op("var1", "Variable")
    b.op("var_is_init1", "VarIsInitializedOp", inputs=["var1:0"], outs=[BOOL])
    b.op("switch1", "Switch", inputs=["var1:0", "var_is_init1:0"], outs=[desc(), desc()])
    b.op("refswitch1", "RefSwitch", inputs=["var1:0", "var_is_init1:0"], outs=[desc(), desc()])
    b.op("assign1", "Assign", inputs=["var1:0", "var1:0", "var_is_init1:-1"])
    m = b.build()
    run_var_is_initialized(m.root, session(pool))
    const = m.root.find("var_is_init1")
    assert value_of(const) == b"\x00"
    assert [n.name for n in const.in_ctrl] == ["var1"]
    assert {p.node.name for p in const.outs[0].peers} == {"switch1", "refswitch1"}
    assert [n.name for n in const.out_ctrl] == ["assign1"]


def test_init_parallel_and_delivering(pool):                            # 71, 72
    b = GraphBuilder()
    for n in ("var1", "const1", "const2"):
        b.op(n, "Variable" if n.startswith("var") else "Const")
    b.op("add1", "Add", inputs=["const1:0", "const2:0"])
    for n in ("const3", "var2", "var3", "const4"):
        b.op(n, "Variable" if n.startswith("var") else "Const")
    b.op("assign1", "Assign", inputs=["var1:0", "const3:0"])
    b.op("addn1", "AddN", inputs=["assign1:0", "add1:0"])
    b.op("conv1", "Conv2D", inputs=["addn1:0", "const4:0"])
    b.op("assign2", "Assign", inputs=["var2:0", "conv1:0"])
    b.op("assign3", "Assign", inputs=["var3:0", "const4:0"])
    b.op("sub1", "Sub", inputs=["assign2:0", "assign3:0"])
    b.op("netoutput1", "NetOutput", inputs=["sub1:0"], outs=[])
    m = b.build()
    inited = {}
    run_var_is_initialized(m.root, session(pool), inited)
    got = {n.name: sorted(v.name for v in s) for n, s in inited.items()}
    for n in ("var1", "const1", "const2", "add1", "const3", "var2", "var3", "const4"):
        assert got[n] == []
    assert got["assign1"] == ["var1"] and got["addn1"] == ["var1"] and got["conv1"] == ["var1"]
    assert got["assign2"] == ["var1", "var2"] and got["assign3"] == ["var3"]
    assert got["sub1"] == got["netoutput1"] == ["var1", "var2", "var3"]


def test_is_variable_initialized_alias(pool):                           # 73
    m = switch_graph("IsVariableInitialized")
    run_var_is_initialized(m.root, session(pool))
    const = m.root.find("var_is_init")
    assert const.type == "Const" and value_of(const) == b"\x00"


def test_variable_ref_delete_moves_attr_to_writer(pool):
    b = GraphBuilder()
    b.op("var", "Variable", outs=[desc((4,))])
    b.op("assign", "Assign", inputs=["var:0", "var:0"], outs=[desc((4,))])
    b.op("var_TO_assign_REF_0", "Variable", inputs=["assign:0"], outs=[desc((4,))],
         attrs={"ref_var_src_var_name": "var"})
    m = b.build()
    changes = run_variable_ref_delete(m, m.root, pool.policy)
    assert m.root.find("var_TO_assign_REF_0") is None
    assert m.root.find("assign").op.output_desc[0].attr["ref_var_src_var_name"].s == b"var"
    assert [(c.kind, c.node, c.detail["writer"]) for c in changes] == [("removed", "var_TO_assign_REF_0", "assign:0")]


def test_variable_ref_delete_unknown_source(pool):
    b = GraphBuilder()
    b.op("w", "Assign")
    b.op("ref", "Variable", inputs=["w:0"], attrs={"ref_var_src_var_name": "ghost"})
    m = b.build()
    with pytest.raises(PassFailure, match=r"Can not find source variable\[ghost\] of variable ref\[ref\]"):
        run_variable_ref_delete(m, m.root, pool.policy)


def test_init_parallel(pool):                                           # 71
    b = GraphBuilder()
    b.op("var1", "Variable")
    b.op("var2", "Variable")
    b.op("var_is_init1", "VarIsInitializedOp", inputs=["var1:0"], outs=[BOOL])
    b.op("merge1", "Merge", inputs=["var_is_init1:0"])
    b.op("assign1", "Assign", inputs=["var1:0", "var2:0"])
    b.op("assign2", "Assign", inputs=["var2:0", "var1:0"])
    b.op("netoutput1", "NetOutput", inputs=["assign1:0", "assign2:0", "merge1:0"], outs=[])
    m = b.build()
    inited = {}
    run_var_is_initialized(m.root, session(pool), inited)
    assert value_of(m.root.find("var_is_init1")) == b"\x00"
    got = {n.name: sorted(v.name for v in s) for n, s in inited.items()}
    assert got["assign1"] == ["var1"] and got["var1"] == [] and got["merge1"] == []
    assert got["assign2"] == ["var2"] and got["netoutput1"] == ["var1", "var2"]


def test_an_assign_without_a_variable_fails_the_pass(pool):
    """CheckAndSetVarInited runs on every node: an Assign whose ref input 0 has no producer is
    PARAM_INVALID, with or without a VarIsInitializedOp in the graph."""
    b = GraphBuilder()
    b.op("c", "Const", outs=[desc((2,))])
    b.op("a", "Assign", inputs=["", "c:0"], ins=[desc((2,)), desc((2,))], outs=[desc((2,))])
    with pytest.raises(PassFailure, match="invalid assign node a"):
        run_var_is_initialized(b.build().root, session(pool))
    b.op("v", "Variable", outs=[desc((2,))])
    b.op("init", "VarIsInitializedOp", inputs=["v:0"], outs=[BOOL])
    with pytest.raises(PassFailure, match="invalid assign node a"):
        run_var_is_initialized(b.build().root, session(pool))


def test_nodes_are_visited_after_their_inputs(pool):
    """GE's node-pass runner visits a node after its inputs, whatever the list order: an Assign
    listed after the VarIsInitializedOp it orders still marks the variable initialized."""
    b = GraphBuilder()
    b.op("v", "Variable", outs=[desc((2,))])
    b.op("vinit", "VarIsInitializedOp", inputs=["v:0", "a:-1"], outs=[BOOL])
    b.op("c", "Const", outs=[desc((2,))])
    b.op("a", "Assign", inputs=["v:0", "c:0"], outs=[desc((2,))])
    m = b.build()
    run_var_is_initialized(m.root, session(pool))
    assert value_of(m.root.find("vinit")) == b"\x01"
