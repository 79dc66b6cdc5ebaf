"""The variable passes in GE's order, then placement: a var-ref folds into its writer's address."""
from engine.varmgr.nodes import output_desc
from engine.varmgr.passes.prepare import run_variable_prepare
from engine.varmgr.passes.ref_delete import run_variable_ref_delete
from engine.varmgr.passes.variable_op import run_variable_op
from engine.varmgr.placement import plan_graph
from engine.varmgr.rebuild import GraphRebuildStateCtrl

from .conftest import FLOAT, GiB, NC1HWC0, NCHW, desc
from .graphs import GraphBuilder

BASE = 137_438_953_472
V4 = desc((2, 3, 4, 5), NCHW, FLOAT, origin_dims=(2, 3, 4, 5))
V5 = desc((2, 1, 4, 5, 16), NC1HWC0, FLOAT, origin_dims=(2, 3, 4, 5))


def test_fuse_then_plan_ref_writer(pool):
    b = GraphBuilder("train")
    b.op("var1", "Variable", outs=[V4])
    b.op("td1", "TransData", inputs=["var1:0"], outs=[V5])
    b.op("td2", "TransData", inputs=["var1:0"], outs=[V5])
    b.op("conv", "Conv2D", inputs=["td1:0", "td2:0"], outs=[V5])
    b.op("apply", "ApplyMomentum", inputs=["conv:0"], outs=[V5])
    b.op("td_back", "TransData", inputs=["apply:0"], outs=[V4])
    b.op("var1_ref", "Variable", inputs=["td_back:0"], outs=[V4], attrs={"ref_var_src_var_name": "var1"})
    m = b.build()
    vm = pool.instance(0)
    vm.init(2, 0, 0, 0)
    vm.set_memory_malloc_size({}, 32 * GiB)
    ctrl = GraphRebuildStateCtrl(pool.policy)
    ctrl.add_graph(0, m)

    assert run_variable_prepare(m.root, pool.policy) == []
    fused = run_variable_op(m.root, vm, ctrl, 0)
    assert {c.node for c in fused if c.kind == "removed"} == {"td1", "td2", "td_back"}
    removed = run_variable_ref_delete(m, m.root, pool.policy)
    assert [c.node for c in removed] == ["var1_ref"]
    plan = plan_graph(m, vm, 0)

    (entry,) = plan.entries
    assert (entry.key, entry.size, entry.address) == ("var13_0", 2 * 1 * 4 * 5 * 16 * 4 + 32, BASE)
    assert list(m.root.find("apply").op.output_i) == [BASE]        # the writer updates var1 in place
    assert output_desc(m.root.find("var1"), pool.policy).format == NC1HWC0
    assert [s.node_type for s in vm.get_trans_road("var1")] == ["TransData"]
    assert ctrl.is_graph_need_rebuild(0)


def test_run_variable_pass_dispatch():
    from engine.varmgr.passes import PASS_IDS, run_variable_pass
    from engine.varmgr.session import VarSession
    session = VarSession.open()
    assert session.manager.var_mem_logic_base == BASE
    b = GraphBuilder("g")
    b.op("v", "Variable", outs=[V4])
    b.op("init", "VarIsInitializedOp", inputs=["v:0"], outs=[desc((), dtype=12)])
    m = b.build()
    results = {pid: run_variable_pass(pid, session, m, m.root) for pid in PASS_IDS}
    assert [c.node for c in results["var_is_initialized"]] == ["init"]
    assert results["variable_prepare"] == results["variable_op"] == results["variable_ref_delete"] == []
