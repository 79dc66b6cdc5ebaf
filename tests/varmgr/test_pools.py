"""RDMA and host variable memory with their limits (RdmaMemResource / HostMemResource, §4.2):
GE's RdmaPoolAllocator (best fit, split only at <= half a block, nothing before InitRdmaPool),
a bounded host memory, both failing as GE fails, through `vars plan`; the host memory type
reached by a policy edit."""
import json

from engine.cli import main
from engine.core.dumpio import save_model
from engine.varmgr.physical import RDMA_BASE, HOST_BASE, RdmaPool

from .conftest import desc
from .graphs import GraphBuilder


def test_rdma_pool_is_ge_allocator():
    pool = RdmaPool(RDMA_BASE, 4096)
    assert pool.malloc(100) == RDMA_BASE                  # 512 <= 4096/2: split
    assert pool.free == [(3584, RDMA_BASE + 512)]
    assert pool.malloc(2000) == RDMA_BASE + 512           # 2048 > 3584/2: the whole block goes
    assert pool.free == [] and pool.used == 4096
    assert pool.malloc(0) is None                         # "Memory block not founded."
    assert RdmaPool(RDMA_BASE, None).malloc(1) is None    # no InitRdmaPool: no block at all
    big = RdmaPool(RDMA_BASE, 16384)
    assert (big.malloc(512), big.malloc(4096)) == (RDMA_BASE, RDMA_BASE + 512)   # both split
    assert big.free == [(11776, RDMA_BASE + 4608)] and big.used == 4608
    assert big.malloc(6000) == RDMA_BASE + 4608 and big.free == []              # 6144 > 11776/2


def _graph(tmp_path, name, variables):
    b = GraphBuilder(name)
    for var, elems, mem_type in variables:
        b.op(var, "Variable", outs=[desc((elems,))], attrs={"_output_memory_type": mem_type})
    p = tmp_path / f"{name}.pbtxt"
    save_model(b.build(), p)
    return str(p)


def test_rdma_variables_need_the_pool_and_fail_when_it_runs_out(tmp_path, capsys):
    g = _graph(tmp_path, "g", [("r1", 8, 1), ("r2", 1000, 1)])          # sizes 64 and 4032
    assert main(["vars", "plan", g]) == 1
    assert "malloc rdma memory fail, var_size:64, var_name:r1" in capsys.readouterr().err
    plan = tmp_path / "p.json"
    assert main(["vars", "plan", g, "--option", "context.rdmaPoolSize=16384", "--json", str(plan)]) == 0
    doc = json.loads(plan.read_text())
    rows = {v["node"]: v for v in doc["graphs"][0]["variables"]}
    assert (rows["r1"]["memory_type"], rows["r1"]["address"]) == ("RDMA_HBM", RDMA_BASE)
    assert rows["r2"]["address"] == RDMA_BASE + 512
    assert doc["memory"]["RDMA_HBM"]["var_mem_size"] == 64 + 4032   # no alignment in the resource
    assert doc["pools"]["rdma"] == {"size": 16384, "used": 512 + 4096}
    assert "rdma pool: 4608 of 16384 bytes taken" in capsys.readouterr().out
    assert main(["vars", "plan", g, "--option", "context.rdmaPoolSize=4096"]) == 1      # 4032 > 3584 left
    err = capsys.readouterr().err
    assert "[Assign][VarMem] by offset failed" in err and "var_name:r2" in err
    assert main(["vars", "plan", g, "--option", "context.rdmaPoolSize=lots"]) == 2
    assert "option 'context.rdmaPoolSize': bad value 'lots': expected a decimal integer" in capsys.readouterr().err


def test_restored_session_keeps_its_rdma_blocks(tmp_path, capsys):
    state, plan = tmp_path / "s.pb", tmp_path / "p.json"
    opt = ["--option", "context.rdmaPoolSize=65536"]
    assert main(["vars", "plan", _graph(tmp_path, "a", [("r1", 8, 1)]), "--var-state", str(state), *opt]) == 0
    assert main(["vars", "plan", _graph(tmp_path, "b", [("r2", 8, 1)]), "--var-state", str(state), *opt,
                 "--json", str(plan)]) == 0
    (row,) = json.loads(plan.read_text())["graphs"][0]["variables"]
    assert row["address"] == RDMA_BASE + 512                 # after r1's block, not over it


def test_host_memory_type_is_a_policy_edit(pack_copy, tmp_path, capsys):
    path = pack_copy / "variables.yaml"
    text = path.read_text()
    assert "  values: {1: RDMA_HBM}\n" in text
    path.write_text(text.replace("  values: {1: RDMA_HBM}\n", "  values: {1: RDMA_HBM, 2: HOST}\n"))
    g = _graph(tmp_path, "h", [("h1", 8, 2), ("h2", 100, 2)])          # sizes 64 and 448
    plan = tmp_path / "p.json"
    assert main(["vars", "plan", g, "--rules", str(pack_copy), "--json", str(plan)]) == 0
    doc = json.loads(plan.read_text())
    rows = {v["node"]: v for v in doc["graphs"][0]["variables"]}
    assert (rows["h1"]["memory_type"], rows["h1"]["address"]) == ("HOST", HOST_BASE)
    assert rows["h2"]["address"] == HOST_BASE + 512
    assert doc["memory"]["HOST"]["var_mem_size"] == 64 + 448
    assert main(["vars", "plan", g, "--rules", str(pack_copy), "--option", "context.hostMemorySize=600"]) == 1
    assert "malloc host memory fail, var_size:448, var_name:h2" in capsys.readouterr().err


def test_batch_variables_share_their_variable(tmp_path, capsys):      # multi_batch_trans_road, restated
    from .conftest import NCHW
    b = GraphBuilder("batch")
    d4 = desc((2, 3, 4, 5), NCHW, origin_dims=(2, 3, 4, 5))
    d5 = desc((2, 1, 4, 5, 16), 3, origin_dims=(2, 3, 4, 5))
    for name in ("var1", "var1_ascend_mbatch_batch_0", "var1_ascend_mbatch_batch_1"):
        b.op(name, "Variable", outs=[d4])
        b.op(f"{name}_td", "TransData", inputs=[f"{name}:0"], outs=[d5])
    p = tmp_path / "batch.pbtxt"
    save_model(b.build(), p)
    plan, out = tmp_path / "p.json", tmp_path / "o.pbtxt"
    assert main(["vars", "plan", str(p), "--json", str(plan), "--out", str(out)]) == 0
    g = json.loads(plan.read_text())["graphs"][0]
    assert g["batch_variables"] == {"var1_ascend_mbatch_batch_0": "var1", "var1_ascend_mbatch_batch_1": "var1"}
    rows = {v["node"]: v for v in g["variables"]}
    assert {v["var_key"] for v in rows.values()} == {"var10_0"}
    assert len({v["address"] for v in rows.values()}) == 1             # one block for the three
    assert [rows[n]["decision"] for n in ("var1_ascend_mbatch_batch_0", "var1_ascend_mbatch_batch_1")] \
        == ["already placed", "already placed"]
    from engine.core.dumpio import load_model
    assert load_model(out).root.find("var1_td") is not None     # VariableOpPass: batch memory shared, no fusion
    single = GraphBuilder("single")
    single.op("var1", "Variable", outs=[d4])
    single.op("var1_td", "TransData", inputs=["var1:0"], outs=[d5])
    save_model(single.build(), p)
    assert main(["vars", "plan", str(p), "--out", str(out)]) == 0
    assert load_model(out).root.find("var1_td") is None          # without batch copies it is fused
