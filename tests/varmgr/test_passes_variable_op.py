"""§11.3 variable_op_pass cases (36-51) and the §11.7 fusion scenarios."""
import pytest

from engine.core.errors import PassFailure
from engine.varmgr.desc import desc_from_proto
from engine.varmgr.nodes import output_desc
from engine.varmgr.passes.variable_op import run_variable_op
from engine.varmgr.policy_load import default_policy
from engine.varmgr.rebuild import GraphRebuildStateCtrl

from .conftest import FLOAT, FLOAT16, INT32, NC1HWC0, NCHW, ND, desc
from .graphs import GraphBuilder

HWCN = 16
D4, D5 = (1, 2, 3, 4), (1, 2, 3, 4, 5)
V4 = desc(D4, NCHW, INT32, origin_dims=D4)
V5 = desc(D5, NC1HWC0, FLOAT, origin_dims=D5)
V5_INT = desc(D5, NC1HWC0, INT32, origin_dims=D5)


def session(pool, *names, d=V4):
    vm = pool.instance(0)
    vm.init(0, 0, 0, 0)
    for n in names:
        vm.assign_var_mem(n, None, d.with_size(96), 2)
    return vm


def graph0(ref_in=V5):
    """Node4D with two TransData and a var-ref through an inverse TransData; Node4D_new with mixed outputs."""
    b = GraphBuilder("graph0")
    b.op("Node4D", "Variable", outs=[V4])
    b.op("4d_to_5d_1", "TransData", inputs=["Node4D:0"], outs=[V5])
    b.op("4d_to_5d_2", "TransData", inputs=["Node4D:0"], outs=[V5])
    b.op("relu", "Relu", inputs=["4d_to_5d_1:0", "4d_to_5d_2:0"], ins=[V5, V5], outs=[V5])
    b.op("ApplyMomentum", "ApplyMomentum", outs=[ref_in])
    b.op("5d_to_4d_1", "TransData", inputs=["ApplyMomentum:0"], outs=[V4])
    b.op("Node4D_ref", "Variable", inputs=["5d_to_4d_1:0"], outs=[V4],
         attrs={"ref_var_src_var_name": "Node4D"})
    b.op("Node4D_new", "Variable", outs=[V4])
    b.op("4d_to_5d_1_new", "TransData", inputs=["Node4D_new:0"], outs=[V5])
    b.op("4d_to_5d_2_new", "TransData", inputs=["Node4D_new:0"], outs=[V5_INT])
    return b.build()


def run(pool, model, vm=None):
    vm = vm or session(pool)
    ctrl = GraphRebuildStateCtrl(pool.policy)
    ctrl.add_graph(0, model)
    return run_variable_op(model.root, vm, ctrl, 0), vm, ctrl


def od(model, name):
    return output_desc(model.root.find(name), default_policy())


def shape(d):
    return (d.format, d.dtype, len(d.dims))


def test_trans_data_remove(pool):                                       # 36
    m = graph0()
    vm = session(pool, "Node4D", "Node4D_new")
    changes, vm, ctrl = run(pool, m, vm)
    assert shape(od(m, "Node4D")) == (NC1HWC0, FLOAT, 5)
    ref = m.root.find("Node4D_ref")
    assert shape(desc_from_proto(ref.op.input_desc[0])) == (NC1HWC0, FLOAT, 5)
    for gone in ("4d_to_5d_1", "4d_to_5d_2", "5d_to_4d_1"):
        assert m.root.find(gone) is None
    assert m.root.find("4d_to_5d_1_new") is not None
    assert shape(od(m, "Node4D_new")) == (NCHW, INT32, 4)
    assert ref.ins[0].peer.node.name == "ApplyMomentum"
    assert [p.node.name for p in m.root.find("Node4D").outs[0].peers] == ["relu", "relu"]
    road = vm.get_trans_road("Node4D")
    assert [s.node_type for s in road] == ["TransData"]
    assert vm.get_changed_graph_id("Node4D") == 0 and ctrl.is_graph_need_rebuild(0)
    assert not ctrl.is_var_permit_to_change_formats("Node4D")
    assert changes[-1].detail == {"road": ["TransData"], "format": "NC1HWC0", "dtype": "DT_FLOAT",
                                  "shape": list(D5)}


def test_variable_ref_illegal(pool):                                    # 37
    m = graph0(ref_in=V5_INT)
    run(pool, m)
    assert shape(od(m, "Node4D")) == (NCHW, INT32, 4)
    assert all(m.root.find(n) is not None for n in ("4d_to_5d_1", "4d_to_5d_2", "5d_to_4d_1"))


def test_unregistered_variables_still_run(pool):                        # 39, 44
    m = graph0()
    changes, _, _ = run(pool, m)
    assert shape(od(m, "Node4D")) == (NC1HWC0, FLOAT, 5)


def test_single_node(pool):                                             # 41
    b = GraphBuilder()
    b.op("v", "Variable", outs=[V4])
    assert run(pool, b.build())[0] == []


def test_un_matched_two_rounds(pool):                                   # 42
    b = GraphBuilder()
    b.op("Node4D", "Variable", outs=[V4])
    for k in (1, 2):
        b.op(f"td{k}", "TransData", inputs=["Node4D:0"], outs=[V5])
        b.op(f"cast{k}", "Cast", inputs=[f"td{k}:0"], outs=[V5_INT])
        b.op(f"relu{k}", "Relu", inputs=[f"cast{k}:0"], outs=[V5_INT])
    m = b.build()
    _, vm, _ = run(pool, m)
    assert shape(od(m, "Node4D")) == (NC1HWC0, INT32, 5)
    assert all(m.root.find(n) is None for n in ("td1", "td2", "cast1", "cast2"))


def test_same_op_not_fused(pool):                                       # 43
    b = GraphBuilder()
    b.op("v", "Variable", outs=[V4])
    b.op("td", "TransData", inputs=["v:0"], outs=[V4])
    m = b.build()
    assert run(pool, m)[0] == []
    assert m.root.find("td") is not None and shape(od(m, "v")) == (NCHW, INT32, 4)


def test_delete_reshape_and_check_shape(pool):                          # 45
    b = GraphBuilder()
    var = desc((192, 2), ND, FLOAT, origin_dims=(192, 2))
    out = desc((8, 8, 3, 2), HWCN, FLOAT, origin_dims=(8, 8, 3, 2))
    b.op("var1", "Variable", outs=[var])
    b.op("reshape", "Reshape", inputs=["var1:0"], outs=[out])
    b.op("data", "Data", outs=[out])
    b.op("conv1", "Conv2D", inputs=["data:0", "reshape:0"], outs=[out])
    m = b.build()
    run(pool, m)
    v = m.root.find("var1")
    assert [p.node.name for p in v.outs[0].peers] == ["conv1"]
    d = od(m, "var1")
    assert (d.format, d.dims, d.origin_dims) == (HWCN, (8, 8, 3, 2), (8, 8, 3, 2))


def test_reformat(pool):                                                # 46
    b = GraphBuilder()
    b.op("var1", "Variable", outs=[desc((8, 8, 3, 2), NCHW, FLOAT)])
    b.op("reformat", "ReFormat", inputs=["var1:0"], outs=[desc((8, 8, 3, 2), ND, FLOAT)])
    b.op("conv1", "Conv2D", inputs=["reformat:0"])
    m = b.build()
    run(pool, m)
    assert [p.node.name for p in m.root.find("var1").outs[0].peers] == ["conv1"]
    d = od(m, "var1")
    assert (d.format, d.dims) == (ND, (8, 8, 3, 2))


def test_trans_road_insert_reformat(pool):                              # 47
    b = GraphBuilder()
    b.op("var1", "Variable", outs=[desc((8, 8, 3, 2), ND, FLOAT)])
    b.op("cast", "Cast", inputs=["var1:0"], ins=[desc((8, 8, 3, 2), NCHW, FLOAT)],
         outs=[desc((8, 8, 3, 2), NCHW, FLOAT16)])
    b.op("conv1", "Conv2D", inputs=["cast:0"])
    m = b.build()
    vm = session(pool, "var1", d=desc((8, 8, 3, 2), ND, FLOAT))
    run(pool, m, vm)
    road = vm.get_trans_road("var1")
    assert [s.node_type for s in road] == ["ReFormat", "Cast"]
    assert (road[0].input.format, road[0].output.format) == (ND, NCHW)


def test_subgraph_and_missing_ctrl(pool):                               # 49
    b = GraphBuilder("root")
    b.op("call", "PartitionedCall", subgraphs=["sub"])
    b.sub("sub")
    b.op("v", "Variable", outs=[V4], graph="sub")
    b.op("td", "TransData", inputs=["v:0"], outs=[V5], graph="sub")
    m = b.build()
    vm = session(pool)
    with pytest.raises(PassFailure, match="no GraphRebuildStateCtrl"):
        run_variable_op(m.root, vm, None, 0)
    assert run_variable_op(m.graphs["sub"], vm, None, 0) == []        # subgraph: skipped first


def test_ref_with_two_producers_fails(pool):                            # 51
    b = GraphBuilder()
    b.op("v", "Variable", outs=[V4])
    b.op("td", "TransData", inputs=["v:0"], outs=[V5])
    b.op("a", "Add", outs=[V4])
    b.op("ref", "Variable", inputs=["a:0", "td:0"], ins=[V4, V5], outs=[V4],
         attrs={"ref_var_src_var_name": "v"})
    with pytest.raises(PassFailure, match=r"In data node num:2 of node:ref\(Variable\) bigger than 1"):
        run(pool, b.build())


def test_trans_node_without_a_descriptor_fails(pool):
    """CheckTransNodeAreInverse GE_CHECK_NOTNULLs both trans nodes' input and output 0
    descriptors; CheckVarAndVarRefAreAlike fails the pass with GE_GRAPH_VARIABLE_OP_PASS_FAILED."""
    m = graph0()
    del m.root.find("5d_to_4d_1").op.input_desc[:]
    with pytest.raises(PassFailure, match=r"CheckTransNodeAreInverse\] failed: 4d_to_5d_1 or 5d_to_4d_1 has no "
                                          r"descriptor"):
        run(pool, m)


def test_format_change_permitted_once(pool):
    """kMaxVarChangeTimes = 1: a second graph cannot change the variable again."""
    ctrl = GraphRebuildStateCtrl(pool.policy)
    vm = session(pool, "w")
    for gid in (0, 1):
        b = GraphBuilder(f"g{gid}")
        b.op("w", "Variable", outs=[V4])
        b.op("td", "TransData", inputs=["w:0"], outs=[V5])
        m = b.build()
        ctrl.add_graph(gid, m)
        changes = run_variable_op(m.root, vm, ctrl, gid)
        assert bool(changes) is (gid == 0)


def test_reshape_fusion_then_relu(pool):                                # §11.7 scenario 3
    b = GraphBuilder()
    b.op("var", "Variable", outs=[desc((2, 3, 4, 5), NCHW, origin_dims=(2, 3, 4, 5))])
    b.op("reshape", "Reshape", inputs=["var:0"], outs=[desc(D5, NCHW, origin_dims=D5)])
    b.op("relu", "Relu", inputs=["reshape:0"], outs=[desc(D5, NCHW)])
    m = b.build()
    vm = session(pool, "var", d=desc((2, 3, 4, 5), NCHW))
    run(pool, m, vm)
    assert [p.node.name for p in m.root.find("var").outs[0].peers] == ["relu"]
    assert od(m, "var").origin_dims == D5


def test_the_refs_take_the_variables_updated_descriptor_whole(pool):
    """UpdateVarAndRefOutputFormatInfo: the variable's output 0 takes the road's format, data
    type, shape and origin shape; each ref's input and output 0 become that descriptor, whole —
    the variable's origin format and size stay, nothing comes from the trans op's own fields."""
    m = graph0()
    m.root.find("Node4D").op.output_desc[0].attr["_var_only"].s = b"kept"     # the trans ops lack it
    run(pool, m, session(pool, "Node4D", "Node4D_new"))
    var_td = m.root.find("Node4D").op.output_desc[0]
    ref = m.root.find("Node4D_ref")
    assert var_td.attr["_var_only"].s == b"kept" and var_td.layout == "NC1HWC0"
    assert ref.op.input_desc[0] == var_td and ref.op.output_desc[0] == var_td
