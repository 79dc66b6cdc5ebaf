"""§11.1 graph_var_manager_unittest.cc cases, through the VarManager API."""
import struct

import pytest

from engine.varmgr import InitValue, Status, TransNodeInfo, VarError, VarOp
from engine.varmgr.physical import BumpAllocator, DeviceMemory
from engine.varmgr.resource import VarResource

from .conftest import (COMPLEX64, FLOAT, GiB, HBM, INT32, NC1HWC0, NCHW, ND, NHWC, RDMA, RESERVED,
                       UINT8, desc)

BASE_32G = 34_359_738_368
BASE_128G = 137_438_953_472


def ready(pool, sid=1, total=GiB):
    vm = pool.instance(sid)
    vm.init(1, sid, 0, 0)
    vm.set_memory_malloc_size({}, total)
    return vm


@pytest.mark.parametrize("options", [{}, {"ge.graphMemoryMaxSize": "536870912"},
                                     {"ge.variableMemoryMaxSize": "536870912"}])
def test_set_memory_malloc_size_ignores_options(pool, options):        # cases 1-3
    vm = pool.instance(0)
    vm.set_memory_malloc_size(options, GiB)
    assert vm.graph_mem_max_size == 872_415_232
    assert vm.var_mem_max_size == 167_772_160
    assert vm.use_max_mem_size == 1_040_187_392
    assert vm.var_mem_logic_base == BASE_128G
    vm.init(0, 0, 0, 0)


def test_mem_manager_not_set(pool):                                     # case 4
    vm = pool.instance(0)
    vm.init(0, 0, 0, 0)
    for _ in range(2):
        assert vm.get_var_memory_addr(0, RDMA) is None
        with pytest.raises(VarError) as err:
            vm.assign_var_mem("global_step", None, desc(), RDMA)
        assert err.value.status is Status.INTERNAL_ERROR
        assert "global_step" in str(err.value) and "rdma" in str(err.value)


def test_with_mem_manager(pool):                                        # case 5
    vm = pool.instance(0)
    vm.mem_manager = DeviceMemory(rdma=BumpAllocator(0x2000_0000_0000, capacity=0))
    vm.init(0, 0, 0, 0)
    x = 0x7FFF_0000_1234
    assert vm.get_var_memory_addr(x, RDMA) == x
    assert vm.get_var_memory_addr(x, HBM) is None
    with pytest.raises(VarError) as err:
        vm.assign_var_mem("global_step", None, desc(), RDMA)
    assert err.value.status is Status.INTERNAL_ERROR


def test_var_manager_addr_and_free(pool):                               # case 6
    vm = pool.instance(5)
    vm.mem_manager = DeviceMemory()
    vm.init(0, 0, 0, 0)                 # the VarResource captures session 0
    vm.init(0, 0, 0, 0)                 # second Init: no-op
    vm.set_memory_malloc_size({}, GiB)
    vm.assign_var_mem("global_step", None, desc(size=24), HBM)
    logic, _ = vm.get_var_addr("global_step", desc(size=24))
    assert logic == BASE_32G            # base read from VM(0), still at its default
    vm.update_dev_var_mgr_info(0)
    vm.set_var_mgr_dev_addr(0, BASE_32G, 0)
    assert vm.get_var_memory_addr(BASE_32G, HBM) is not None
    vm.free_var_memory()
    ptr = 0x5000_0000
    vm.set_var_mgr_dev_addr(0, BASE_32G, ptr)
    assert vm.get_var_memory_addr(BASE_32G, HBM) == ptr + 512
    assert vm.get_var_memory_addr(0x7FFC_1234_5678, HBM) is None


class _FailingAllocator:
    def malloc(self, size):
        return None


def test_malloc_1g_huge_page_failed(pool):                              # case 7
    vm = pool.instance(5)
    vm.mem_manager = DeviceMemory()
    vm.options["ge.variableUse1gHugePage"] = "1"
    vm.expandable_allocator = _FailingAllocator()
    vm.init(0, 0, 0, 0)
    vm.set_memory_malloc_size({}, GiB)
    vm.assign_var_mem("global_step", None, desc(size=24), HBM)
    vm.update_dev_var_mgr_info(0)
    assert vm.get_var_memory_addr(BASE_32G, HBM) is None     # no fallback when "1G only"
    vm.free_var_memory()


def test_huge_page_fallback_without_option(pool):
    vm = ready(pool)
    vm.mem_manager = DeviceMemory()
    vm.expandable_allocator = _FailingAllocator()
    vm.assign_var_mem("global_step", None, desc(size=24), HBM)
    assert vm.get_var_memory_addr(BASE_128G, HBM) is not None
    assert vm.expandable_allocator is None                  # dropped after its failure


def test_var_address_op_fail(pool, ):                                   # case 9
    res = VarResource(pool.policy, 22, lambda: BASE_32G)
    with pytest.raises(VarError) as err:
        res.get_var_addr("", desc())
    assert err.value.status is Status.FAILED
    bare = pool.instance(22)
    for call in (lambda: bare.set_var_addr("a", desc(), 0, HBM), lambda: bare.get_var_addr("a", desc())):
        with pytest.raises(VarError) as err:
            call()
        assert err.value.status is Status.INTERNAL_ERROR
    vm = ready(pool)
    vm.assign_var_mem("global_step", None, desc(size=24), HBM)
    with pytest.raises(VarError) as err:
        vm.save_var_addr("global_step", desc(size=24), 0, HBM)
    assert err.value.status is Status.FAILED
    assert "var_key:global_step2_0 conflict" in err.value.message


def test_renew_current_var_desc(pool):                                  # case 10
    res = VarResource(pool.policy, 1, lambda: BASE_32G)
    res.renew_cur_var_desc("some_var", desc())          # unknown: SUCCESS
    with pytest.raises(VarError):
        res.get_cur_var_desc("some_var")
    res.set_var_addr("some_var", desc(fmt=NCHW), 0x1000, RDMA, VarOp("some_var", "Add"))
    res.renew_cur_var_desc("some_var", desc(fmt=NC1HWC0))
    assert res.get_cur_var_desc("some_var").format == NC1HWC0
    assert "some_var3_0" in res.var_addr_mgr_map and "some_var0_0" not in res.var_addr_mgr_map


def test_var_manager_with_no_var_resource(pool):                        # case 11
    vm = pool.instance(1)
    internal = [
        lambda: vm.renew_cur_var_desc("a", VarOp("a", "Variable", desc())),
        lambda: vm.renew_cur_var_desc("a", desc()),
        lambda: vm.record_staged_var_desc(0, "a", desc()),
        lambda: vm.set_trans_road("a", []),
        lambda: vm.get_changed_graph_id("a"),
        lambda: vm.set_allocated_graph_id("a", 0),
        lambda: vm.get_allocated_graph_id("a"),
        lambda: vm.get_all_variables(),
        lambda: vm.save_broadcast_info(0, None),
    ]
    for call in internal:
        with pytest.raises(VarError) as err:
            call()
        assert err.value.status is Status.INTERNAL_ERROR
    from engine.varmgr.state import to_info
    with pytest.raises(VarError):
        to_info(vm)
    assert not vm.is_var_ready("a", desc()) and not vm.is_var_exist("a") and not vm.is_var_exist("a", desc())
    assert vm.get_staged_var_descs(0) == {} and vm.get_changed_var_names(0) == set()
    assert vm.get_var_mem_type(0) == RESERVED
    assert vm.get_trans_road("a") is None
    assert not vm.has_shared_var_mem_between_batch()


def _const(name, weight, dtype=UINT8):
    return VarOp(name, "Constant", desc(dtype=dtype), weight=bytes(weight))


def test_aoe_const_mem_reuse(pool):                                     # case 12
    vm = pool.instance(0)
    vm.mem_manager = DeviceMemory()
    vm.init(0, 0, 0, 0)
    a1 = vm.assign_var_mem("const1", _const("const1", [1, 2, 3]), desc(dtype=UINT8), HBM)
    a2 = vm.assign_var_mem("const2", _const("const2", [1, 2, 3]), desc(dtype=UINT8), HBM)
    a3 = vm.assign_var_mem("const3", _const("const3", [1, 2, 3, 4, 5]), desc(dtype=UINT8), HBM)
    assert (a1.address, a1.rule, a1.footprint) == (BASE_32G, None, 1024)
    assert (a2.address, a2.rule, a2.footprint) == (BASE_32G, "var/identical-constant", 0)
    assert (a3.address, a3.rule) == (BASE_32G + 1024, None)
    assert vm.get_var_mgr_info(0, 0) is None
    with pytest.raises(VarError):
        vm.set_var_mgr_dev_addr(0, 0, 0)
    vm.update_dev_var_mgr_info(0)
    assert vm.get_var_mgr_info(0, BASE_32G) is not None
    assert vm.get_var_mgr_info(0, 0) is None
    with pytest.raises(VarError):
        vm.set_var_mgr_dev_addr(0, 0, 0)
    vm.set_var_mgr_dev_addr(0, BASE_32G, 0)


def test_const_reuse_needs_same_element_size(pool):
    vm = ready(pool)
    vm.assign_var_mem("c1", _const("c1", [1, 0, 0, 0]), desc(dtype=UINT8), HBM)
    a = vm.assign_var_mem("c2", _const("c2", [1, 0, 0, 0], INT32), desc(dtype=INT32), HBM)
    assert a.rule is None


def _file_const(name, path):
    return VarOp(name, "FileConstant", desc(dtype=UINT8), file_path=path, file_offset=0)


def test_fileconstant_mem_reuse(pool):                                  # case 13
    vm = ready(pool, 0)
    path = "tmp_weight/12345/weight.bin"
    a1 = vm.assign_var_mem("file_const1", _file_const("file_const1", path), desc(dtype=UINT8, size=3), HBM)
    a2 = vm.assign_var_mem("file_const2", _file_const("file_const2", path), desc(dtype=UINT8, size=3), HBM)
    a3 = vm.assign_var_mem("file_const3", _file_const("file_const3", "other/weight.bin"),
                           desc(dtype=UINT8, size=3), HBM)
    assert a1.rule is None and a2.rule == "var/file-constant-slice" and a2.address == a1.address
    assert a3.rule is None and a3.address == a1.address + 1536
    vm.var_resource.var_addr_mgr_map.clear()
    a4 = vm.assign_var_mem("file_const4", _file_const("file_const4", path), desc(dtype=UINT8, size=3), HBM)
    assert a4.rule is None and a4.address == a3.address + 1536


def test_get_reuse_addr_failed_with_no_data(pool):                      # case 14
    vm = ready(pool)
    assert vm.var_resource.get_reuse_addr(_const("c", [])) is None
    assert vm.var_resource.get_reuse_addr(None) is None


def test_evaluate_graph_resource_mode(pool):                            # case 15
    vm = pool.instance(0)
    vm.options["ge.evaluateGraphResourceMode"] = "1"
    assert vm.get_var_mem_max_size(True) == 2 ** 64 - 1
    assert vm.get_graph_memory_max_size(True) == 2 ** 64 - 1
    assert vm.get_use_max_memory_size() == 2 ** 64 - 1
    for value in ("0", None):
        if value is None:
            vm.options.clear()
        else:
            vm.options["ge.evaluateGraphResourceMode"] = value
        assert vm.get_var_mem_max_size() == 5 * GiB
        assert vm.get_graph_memory_max_size() == 32 * GiB * 26 // 32 == 26 * GiB


def test_multi_batch_trans_road(pool):                                  # case 16
    vm = ready(pool)
    vm.set_batch_variables_key_name("var1_ascend_mbatch_batch_0", "var1")
    vm.set_trans_road("var1", [TransNodeInfo("TransData", desc(), desc())])
    assert vm.get_trans_road("var1_ascend_mbatch_batch_0")[0].node_type == "TransData"
    assert vm.has_shared_var_mem_between_batch()


def test_const_place_holder_set_addr(pool):                             # case 17
    vm = ready(pool, 0)
    vm.mem_manager = DeviceMemory()
    d = desc((1, 2, 3), size=24)
    vm.assign_var_mem("cph", VarOp("cph", "ConstPlaceHolder", d, external_address=20000), d, HBM)
    assert vm.get_var_memory_addr(BASE_128G, HBM) == 20000
    assert vm.get_var_mem_size(HBM) == 0          # external memory is not session memory


def test_check_and_set_var_loaded(pool):                                # case 18
    vm = pool.instance(1)
    op = VarOp("global_step", "Variable", desc(size=24))
    assert vm.check_and_set_var_loaded(op, 0) is False
    vm = ready(pool)
    a = vm.assign_var_mem("global_step", op, desc(size=24), HBM)
    op = VarOp("global_step", "Variable", desc(size=24), output_offsets=(a.address,))
    assert vm.check_and_set_var_loaded(op, 0) is False
    assert vm.check_and_set_var_loaded(op, 0) is True


def test_restore_var_mem(pool):                                         # case 19
    vm = ready(pool, 9887)
    nchw = desc((1, 2, 3, 4), NCHW, size=24)
    op = VarOp("tmp_var", "Variable", nchw, output_offsets=(BASE_128G,))
    vm.restore_var_mem("tmp_var", op, nchw, HBM)
    assert vm.get_var_addr("tmp_var", nchw) == (BASE_128G, HBM)
    vm.mem_manager = DeviceMemory()
    assert vm.get_var_memory_addr(0x7FFC_1234_5678, HBM) is None
    vm.restore_var_mem("tmp_var", op, desc((1, 2, 3, 4), ND, size=24), HBM)
    assert vm.get_var_addr("tmp_var", desc((1, 2, 3, 4), ND, size=24))[0] == BASE_128G
    assert vm.get_var_addr("tmp_var", nchw)[0] == BASE_128G
    big = desc((16, 2, 3, 4), NCHW, COMPLEX64, size=384)
    with pytest.raises(VarError) as err:
        vm.restore_var_mem("tmp_var", op, big, HBM)
    assert "The format of [tmp_var] is changed, and the new tensor size [384] exceeds the size [24]" \
        in err.value.message


def test_restore_var_mem_offset_overflow(pool):
    vm = ready(pool)
    d = desc(size=24)
    op = VarOp("v", "Variable", d, output_offsets=(BASE_128G + vm.var_mem_max_size,))
    with pytest.raises(VarError) as err:
        vm.restore_var_mem("v", op, d, HBM)
    assert "Variable offset overflow max_size:[167772160]" in err.value.message


def _var_with_init(init_dims=(1, 1, 1, 1, 10), init_fmt=NCHW, init_dtype=FLOAT, data=None):
    data = struct.pack("<10f", *[1.0] * 10) if data is None else data
    return desc((1, 1, 1, 1, 10), NCHW, FLOAT, size=40,
                init_value=InitValue(init_dtype, init_fmt, tuple(init_dims), data))


def _setup_init_var(pool, d):
    vm = ready(pool, 0)
    vm.mem_manager = DeviceMemory()
    vm.assign_var_mem("var", VarOp("var", "Variable", d), d, HBM)
    vm.update_dev_var_mgr_info(0)
    return vm, vm.get_var_addr("var", d)[0]


def test_init_var_if_has_init_value_match(pool):                        # case 20
    vm, logic = _setup_init_var(pool, _var_with_init())
    ptr = vm.get_var_memory_addr(logic, HBM)
    assert ptr is not None
    assert struct.unpack("<10f", vm.mem_manager.read(ptr, 40)) == (1.0,) * 10


def test_external_var(pool):                                            # case 21
    d = desc((1, 1, 1, 1, 10), NCHW, FLOAT, size=40)
    vm, logic = _setup_init_var(pool, d)
    ext = 0x6000_0000
    vm.set_external_var(ext, vm.get_var_mem_size(HBM))
    assert vm.get_var_memory_addr(logic, HBM) == ext + (logic - BASE_128G)


@pytest.mark.parametrize("kw", [                                        # cases 22-25
    {"init_fmt": NHWC},
    {"init_dims": (8, 1, 32, 32, 16)},
    {"init_dtype": INT32},
    {"data": bytes(40_000_000)},
])
def test_init_value_mismatch(pool, kw):
    vm, logic = _setup_init_var(pool, _var_with_init(**kw))
    assert vm.get_var_memory_addr(logic, HBM) is None


def test_inner_address_resolves_inside_block(pool):
    vm = ready(pool)
    vm.mem_manager = DeviceMemory()
    d = desc((250,), size=1056)
    vm.assign_var_mem("w", VarOp("w", "Variable", d), d, HBM)
    first = vm.get_var_memory_addr(BASE_128G, HBM)
    assert vm.get_var_memory_addr(BASE_128G + 100, HBM) == first + 100
    assert vm.get_var_memory_addr(BASE_128G + 1056, HBM) is None     # past the data


def test_rdma_variable_gets_pool_pointer(pool):
    vm = ready(pool)
    vm.mem_manager = DeviceMemory()
    a = vm.assign_var_mem("r", VarOp("r", "Variable", desc(size=100)), desc(size=100), RDMA)
    assert a.address == 0x2000_0000_0000 and a.memory_type == RDMA
    assert vm.get_var_mem_type(a.address) == RDMA
    assert vm.get_var_memory_addr(a.address, RDMA) == a.address
    assert vm.get_var_mem_size(RDMA) == 100
