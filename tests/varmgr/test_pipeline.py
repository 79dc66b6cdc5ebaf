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


FRACTAL_Z, HWCN, ND = 4, 16, 2


def test_training_changes_variable_format_across_graphs(pool):          # §11.7 scenario 2
    vm = pool.instance(0)
    vm.init(2, 0, 0, 0)
    vm.set_memory_malloc_size({}, 32 * GiB)
    ctrl = GraphRebuildStateCtrl(pool.policy)
    nd = desc((2, 2, 3, 2), ND, origin_dims=(2, 2, 3, 2))
    hwcn = desc((2, 2, 3, 2), HWCN, origin_dims=(2, 2, 3, 2))
    init = GraphBuilder("init")
    for name, d in (("var1", nd), ("var2", hwcn)):
        init.op(name, "Variable", outs=[d])
        init.op(f"{name}_c", "Const", outs=[d])
        init.op(f"{name}_assign", "Assign", inputs=[f"{name}:0", f"{name}_c:0"], outs=[d])
    init_model = init.build()
    ckpt = GraphBuilder("checkpoint")
    ckpt.op("var1", "Variable", outs=[nd])
    ckpt.op("save", "Save", inputs=["var1:0"], outs=[])
    ctrl.add_graph(0, init_model)
    ctrl.add_graph(1, ckpt.build())
    plan_graph(init_model, vm, 0)
    assert vm.get_cur_var_desc("var1").format == ND and vm.get_cur_var_desc("var2").format == HWCN
    ctrl.set_graph_build_end(0)
    ctrl.set_graph_build_end(1)

    frac = desc((4, 1, 16, 16), FRACTAL_Z, origin_dims=(2, 2, 3, 2))
    train = GraphBuilder("train")
    train.op("var1", "Variable", outs=[nd])
    train.op("trans", "TransData", inputs=["var1:0"], outs=[frac])
    train.op("x", "Data", outs=[desc((1, 2, 8, 8))])
    train.op("conv", "Conv2D", inputs=["x:0", "trans:0"], outs=[desc((1, 2, 8, 8))])
    model = train.build()
    ctrl.add_graph(2, model)
    run_variable_op(model.root, vm, ctrl, 2)
    var1 = output_desc(model.root.find("var1"), pool.policy)
    assert (var1.format, var1.dims, var1.origin_dims) == (FRACTAL_Z, (4, 1, 16, 16), (2, 2, 3, 2))
    assert ctrl.is_graph_need_rebuild(1)                 # the checkpoint graph holds var1
    plan = plan_graph(model, vm, 2)
    (entry,) = plan.entries
    # FRACTAL_Z needs 4128 bytes > 96 of the ND block: size-compatible reuse fails, new block
    assert (entry.key, entry.size, entry.decision) == ("var14_0", 4128, "new block")
    assert entry.address == BASE + 2 * 1536             # after the ND blocks of var1 and var2
    assert vm.get_var_addr("var1", nd)[0] == BASE        # the old view keeps its address
