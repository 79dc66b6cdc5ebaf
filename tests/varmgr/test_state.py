"""var_manager.proto round trip (§10, §11.1 case 8) and unusable state files."""
import pytest

from engine.core.errors import InputError
from engine.varmgr import BroadcastInfo, TransNodeInfo, VarManagerPool, VarOp
from engine.varmgr.physical import DeviceMemory
from engine.varmgr.state import encode, load_state, restore_session, save_state, to_info

from .conftest import FLOAT16, GiB, HBM, NC1HWC0, NCHW, RDMA, UINT8, desc

BASE_128G = 137_438_953_472


def test_var_manager_serial_deserial(pool):                             # case 8
    vm = pool.instance(1)
    vm.init(1, 1, 0, 0x5A5A)
    vm.set_memory_malloc_size({}, GiB)
    vm.assign_var_mem("global_step", None, desc(size=24), HBM)
    assert vm.mem_resources[HBM].var_mem_size == 1536
    vm.set_trans_road("global_step", [TransNodeInfo("", desc(), desc())])
    vm.save_broadcast_info(0, BroadcastInfo("test", "", 0, 0, 0, 0, 0))
    info = to_info(vm)
    assert info.session_id == 1
    info.session_id = 2
    vm2 = restore_session(pool, info)
    assert vm2 is pool.instance(2)
    assert (vm2.graph_mem_max_size, vm2.var_mem_max_size) == (872_415_232, 167_772_160)
    assert vm2.version == 1 and vm2.job_id == 0x5A5A
    assert (vm2.use_max_mem_size, vm2.var_mem_logic_base) == (vm.use_max_mem_size, vm.var_mem_logic_base)
    res = vm2.var_resource
    assert res.session_id == 2
    assert len(res.var_offset_map) == len(res.var_addr_mgr_map) == len(res.cur_var_tensor_desc_map) == 1
    assert vm2.is_var_exist("global_step", desc(size=24))
    assert len(vm2.mem_resources) == 1 and vm2.mem_resources[HBM].var_mem_size == 1536
    a = vm2.assign_var_mem("Hello_variable", None, desc(size=24), HBM)
    assert a.address == BASE_128G + 1536


def _training_session(pool):
    vm = pool.instance(7)
    vm.mem_manager = DeviceMemory()
    vm.init(2, 7, 0, 99)
    vm.set_memory_malloc_size({}, 32 * GiB)
    w = desc((64, 3, 7, 7), NCHW, size=37664)
    vm.assign_var_mem("w", VarOp("w", "Variable", w), w, HBM)
    vm.assign_var_mem("c1", VarOp("c1", "Constant", desc(dtype=UINT8), weight=b"\1\2\3"), desc(dtype=UINT8), HBM)
    vm.assign_var_mem("c2", VarOp("c2", "Constant", desc(dtype=UINT8), weight=b"\1\2\3"), desc(dtype=UINT8), HBM)
    frac = desc((4, 1, 16, 16), NC1HWC0, FLOAT16, size=2048)
    vm.assign_var_mem("w", VarOp("w", "Variable", frac), frac, HBM)          # fits: same block
    vm.assign_var_mem("r", VarOp("r", "Variable", desc(size=64)), desc(size=64), RDMA)
    cph = desc((2,), size=8)
    vm.assign_var_mem("cph", VarOp("cph", "ConstPlaceHolder", cph, external_address=0x9000), cph, HBM)
    vm.set_trans_road("w", [TransNodeInfo("TransData", w, frac)])
    vm.set_changed_graph_id("w", 3)
    vm.set_allocated_graph_id("w", 1)
    vm.save_broadcast_info(1, BroadcastInfo("w", "bcast", 0, 512, 37664, 512, 37664))
    return vm


@pytest.mark.parametrize("suffix", [".pb", ".pbtxt"])
def test_round_trip_is_lossless(pool, tmp_path, suffix):
    vm = _training_session(pool)
    path = tmp_path / ("state" + suffix)
    save_state(vm, path)
    info = load_state(path)
    vm2 = restore_session(VarManagerPool(), info)
    assert encode(to_info(vm2), False) == encode(to_info(vm), False)
    assert path.read_bytes() == encode(to_info(vm2), suffix == ".pbtxt")


def test_restored_session_answers_address_queries(pool, tmp_path):
    vm = _training_session(pool)
    path = tmp_path / "state.pb"
    save_state(vm, path)
    vm2 = restore_session(VarManagerPool(), load_state(path))
    vm2.mem_manager = DeviceMemory()
    res1, res2 = vm.var_resource, vm2.var_resource
    for key, entry in res1.var_addr_mgr_map.items():
        e2 = res2.var_addr_mgr_map[key]
        assert (e2.address, e2.offset, e2.memory_type, e2.desc) == (entry.address, entry.offset,
                                                                    entry.memory_type, entry.desc)
    for name, d in res1.cur_var_tensor_desc_map.items():
        assert vm2.get_var_addr(name, d) == vm.get_var_addr(name, d)
    probes = [a for a in res1.var_offset_map] + [a + 100 for a in res1.var_offset_map] + [5, BASE_128G - 1]
    for logic in probes:
        assert vm2.is_var_addr(logic) == vm.is_var_addr(logic)
        assert vm2.get_var_mem_type(logic) == vm.get_var_mem_type(logic)
        mt = vm.get_var_mem_type(logic) if vm.is_var_addr(logic) else HBM
        assert vm2.get_var_memory_addr(logic, mt) == vm.get_var_memory_addr(logic, mt)
    cph_logic = BASE_128G + (37_888 + 1024) + 1024      # after w and c1 (c2 and w's new view reuse)
    assert vm.get_var_addr("cph", desc((2,), size=8))[0] == cph_logic
    assert vm2.get_var_memory_addr(cph_logic, HBM) == 0x9000             # external, verbatim
    assert vm2.get_trans_road("w") == vm.get_trans_road("w")
    assert vm2.get_broadcast_info(1, "w") == vm.get_broadcast_info(1, "w")
    assert vm2.get_changed_var_names(3) == {"w"}


def test_empty_state_file(tmp_path):
    path = tmp_path / "s.pb"
    path.write_bytes(b"")
    with pytest.raises(InputError, match="s.pb: error: state file is empty"):
        load_state(path)


def test_corrupt_binary_state_file(tmp_path):
    path = tmp_path / "s.pb"
    path.write_bytes(b"\x0a\xff\xff\xff\xff\x0fgarbage")
    with pytest.raises(InputError, match="corrupt state file: not a binary deployer.VarManagerInfo"):
        load_state(path)


def test_corrupt_text_state_file(tmp_path):
    path = tmp_path / "s.pbtxt"
    path.write_text("version: 1\nsesion_id: 2\n")
    with pytest.raises(InputError) as err:
        load_state(path)
    assert "s.pbtxt:2:1: error: not a deployer.VarManagerInfo" in str(err.value)


def test_inconsistent_state_file(tmp_path, pool):
    vm = _training_session(pool)
    info = to_info(vm)
    info.var_resource.var_offset_map[12345] = 2
    info.mem_resource_map[77].var_mem_size = 1
    path = tmp_path / "s.pb"
    path.write_bytes(encode(info, False))
    with pytest.raises(InputError) as err:
        load_state(path)
    text = str(err.value)
    assert "var_offset_map address 12345 belongs to no variable" in text
    assert "mem_resource_map has unknown memory type 77" in text
