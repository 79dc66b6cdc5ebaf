"""§7 VarMemAssignUtil and the §11.2 var_mem_assign_util cases, through plan_graph."""
import pytest

from engine.varmgr import VarError
from engine.varmgr.nodes import name_for_var_manager
from engine.varmgr.placement import plan_graph

from .conftest import GiB, UINT8, desc
from .graphs import GraphBuilder, tensor

BASE = 137_438_953_472
DT_STRING = 13


def session(pool, sid=0):
    vm = pool.instance(sid)
    vm.init(0, sid, 0, 0)
    vm.set_memory_malloc_size({}, 32 * GiB)
    return vm


def test_two_float_variables_example(pool):
    """§7 example: 250 floats -> size 1056, footprint 2560."""
    b = GraphBuilder()
    b.op("v1", "Variable", outs=[desc((250,))])
    b.op("v2", "Variable", outs=[desc((250,))])
    model = b.build()
    plan = plan_graph(model, session(pool), 1)
    assert [(e.node, e.size, e.address, e.footprint, e.decision) for e in plan.entries] == [
        ("v1", 1056, BASE, 2560, "new block"),
        ("v2", 1056, BASE + 2560, 2560, "new block"),
    ]
    op = model.root.find("v2").op
    assert list(op.output_i) == [BASE + 2560] and op.output_desc[0].size == 1056


def test_size_rule_padding_option(pool):
    vm = session(pool)
    vm.options["soc.AICoreSpec.padding_size"] = "0"
    b = GraphBuilder()
    b.op("v", "Variable", outs=[desc((250,))])
    b.op("s", "Variable", outs=[desc((0,))])
    plan = plan_graph(b.build(), vm, 1)
    assert [e.size for e in plan.entries] == [1024, 32]     # (1000+31)//32*32; empty -> 32


def test_name_for_var_manager(pool):                                     # cases 26-28, 35
    b = GraphBuilder()
    b.op("name", "Constant")
    b.op("alias", "Constant", attrs={"_src_const_name": "real_name"})
    b.op("test_name", "Constant", attrs={"_src_const_name": ""})
    m = b.build()
    pol = pool.policy
    assert name_for_var_manager(None, pol) == ""
    assert [name_for_var_manager(m.root.find(n), pol) for n in ("name", "alias", "test_name")] == \
        ["name", "real_name", "test_name"]


def test_file_constant_string_size(pool):                                # case 29
    b = GraphBuilder()
    b.op("fc", "FileConstant", outs=[desc((1,), dtype=DT_STRING)], attrs={"length": 100})
    m = b.build()
    plan_graph(m, session(pool), 1)
    assert m.root.find("fc").op.output_desc[0].size == 100


def test_constant_string_size(pool):                                     # case 30
    b = GraphBuilder()
    data = b"\x05\x00\x00\x00hello-world"
    b.op("c", "Constant", outs=[desc((1,), dtype=DT_STRING)],
         attrs={"value": tensor(data, desc((1,), dtype=DT_STRING))})
    m = b.build()
    plan_graph(m, session(pool), 1)
    assert m.root.find("c").op.output_desc[0].size == len(data)


def test_graph_without_variables(pool):                                  # cases 33, 34
    b = GraphBuilder()
    b.op("fc", "FileConstant", outs=[desc((4,))], attrs={"file_path": "w.bin"})
    b.op("relu", "Relu", inputs=["fc:0"])
    plan = plan_graph(b.build(), session(pool), 1)
    assert [e.node for e in plan.entries] == ["fc"]


def test_no_output_desc_fails(pool):
    b = GraphBuilder()
    b.op("v", "Variable", outs=[])
    with pytest.raises(VarError, match="node:v has no OutputDesc"):
        plan_graph(b.build(), session(pool), 1)


def test_rdma_by_output_memory_type(pool):
    from engine.varmgr.physical import DeviceMemory
    vm = session(pool)
    vm.mem_manager = DeviceMemory()
    b = GraphBuilder()
    b.op("r", "Variable", outs=[desc((8,))], attrs={"_output_memory_type": 1})
    e = plan_graph(b.build(), vm, 1).entries[0]
    assert (e.memory_type, e.address) == ("RDMA_HBM", 0x2000_0000_0000)


def test_identical_constants_share_block(pool):
    b = GraphBuilder()
    for name in ("c1", "c2"):
        b.op(name, "Constant", outs=[desc((3,), dtype=UINT8)],
             attrs={"value": tensor(b"\1\2\3", desc((3,), dtype=UINT8))})
    plan = plan_graph(b.build(), session(pool), 1)
    assert [e.decision for e in plan.entries] == ["new block", "var/identical-constant"]
    assert plan.entries[0].address == plan.entries[1].address


def test_ref_nodes_skipped_and_get_source_address(pool):
    b = GraphBuilder()
    b.op("var", "Variable", outs=[desc((4,))])
    b.op("assign", "Assign", inputs=["var:0"], outs=[desc((4,))])
    b.op("var_TO_assign_REF_0", "Variable", inputs=["assign:0"], outs=[desc((4,))],
         attrs={"ref_var_src_var_name": "var"}, out_attrs={0: {"ref_var_src_var_name": "var"}})
    m = b.build()
    plan = plan_graph(m, session(pool), 1)
    assert [e.node for e in plan.entries] == ["var"]
    assert list(m.root.find("var_TO_assign_REF_0").op.output_i) == [BASE]
    assert list(m.root.find("assign").op.output_i)[0] == BASE        # assign chain gets the address


def test_broadcast_info_recorded(pool):
    vm = session(pool)
    b = GraphBuilder()
    b.op("var", "Variable", outs=[desc((4,), size=64)])
    bc = b.op("bcast", "HcomBroadcast", inputs=["var:0"], outs=[desc((4,), size=64)])
    bc.output_i.extend([4096])
    m = b.build()
    b.proto.graph[0].op[0].output_desc[0].size = 64
    plan = plan_graph(m, vm, 3)
    info = vm.get_broadcast_info(3, "var")
    assert plan.broadcasts == (info,)
    assert (info.broadcast_name, info.idx, info.input_offset, info.output_offset) == ("bcast", 0, 4096, 4096)
    assert list(m.root.find("bcast").op.input_i) == [4096]


def test_trans_chain_assign_gets_final_offset(pool):
    b = GraphBuilder()
    b.op("var", "Variable", outs=[desc((4,))])
    b.op("t1", "TransData", inputs=["var:0"], outs=[desc((4,))])
    t2 = b.op("t2", "Cast", inputs=["t1:0"], outs=[desc((4,))])
    t2.output_i.extend([777])
    a = b.op("assign", "Assign", inputs=["t2:0"], outs=[desc((4,))])
    a.output_i.extend([0])
    m = b.build()
    plan_graph(m, session(pool), 1)
    assert list(m.root.find("assign").op.output_i) == [777]


def test_same_name_incompatible_sizes(pool):
    vm = session(pool)
    b1 = GraphBuilder("g1")
    b1.op("w", "Variable", outs=[desc((250,))])
    plan_graph(b1.build(), vm, 1)
    b2 = GraphBuilder("g2")
    b2.op("w", "Variable", outs=[desc((1000,))])
    with pytest.raises(VarError) as err:
        plan_graph(b2.build(), vm, 2)
    assert err.value.var == "w"
    assert ("variable 'w' (node 'w'): ND DT_FLOAT [1000] needs 4032 bytes, but VarKey w2_0 already "
            "holds a block of 1056 bytes (placed by graph 1)") in err.value.message


def test_size_overflow(pool):
    b = GraphBuilder()
    b.op("huge", "Variable", outs=[desc((2 ** 40, 2 ** 40))])
    with pytest.raises(VarError) as err:
        plan_graph(b.build(), session(pool), 1)
    assert err.value.var == "huge" and "overflows int64" in err.value.message


def test_unknown_shape_fails(pool):
    b = GraphBuilder()
    b.op("dyn", "Variable", outs=[desc((-1, 4))])
    with pytest.raises(VarError, match=r"op:dyn\(Variable\): shape \[-1, 4\] has an unknown dimension"):
        plan_graph(b.build(), session(pool), 1)


def test_subgraph_variables_are_placed(pool):
    b = GraphBuilder("root")
    b.op("v", "Variable", outs=[desc((4,))])
    b.op("call", "PartitionedCall", inputs=["v:0"], subgraphs=["sub"])
    b.sub("sub")
    b.op("sv", "Variable", outs=[desc((4,))], graph="sub")
    plan = plan_graph(b.build(), session(pool), 1)
    assert [(e.graph, e.node) for e in plan.entries] == [("root", "v"), ("sub", "sv")]
