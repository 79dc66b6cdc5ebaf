"""Several devices (issue 13 part A): per-device memory and flags, one variable allocator per
session and device, and what VarManager keeps of them.

GE: SessionMemAllocator<ExpandableActiveMemoryAllocator>::GetMemAllocator(session, device, ...),
VarManager::InitExpandableMemoryAllocator (the first allocator stays), VarResource's per-device
var_is_instance_ (SetVarIsReady / IsVarReady) and dev_loaded_var_offset_ (CheckAndSetVarLoaded),
DavinciModel::InitConstant / InitFileConstant.
"""
from engine.varmgr.loading import SessionAllocators

from .test_var_policy_modes import GiB, MiB, _plan, graph, mode  # noqa: F401 (graph is a fixture)


def test_session_allocators_one_per_session_and_device():
    allocs = SessionAllocators()
    m = mode()
    a = allocs.get(1, 0, m, GiB)
    assert allocs.get(1, 0, m, GiB) is a
    b, c = allocs.get(1, 1, m, GiB), allocs.get(2, 0, m, GiB)
    assert len({a.base, b.base, c.base}) == 3


def test_device_malloc_per_device():
    from engine.varmgr.physical import DEVICE_BASE, DEVICE_STRIDE, DeviceMemory
    mem = DeviceMemory()
    assert mem.malloc(2, "p", 100, 0) == DEVICE_BASE
    assert mem.malloc(2, "p", 100, 3) == DEVICE_BASE + 3 * DEVICE_STRIDE
    assert mem.malloc(2, "p", 100, 0) == DEVICE_BASE + 512


def test_load_on_two_devices_ready_and_loaded_flags(graph, tmp_path, capsys):
    doc = _plan(tmp_path, [graph, "--plan-only", "--load-device", "0", "--load-device", "1",
                           "--memory-size", str(GiB)])
    loads = {(l["device"], v["node"]): v for l in doc["loads"] for v in l["variables"]}
    # constants: the second shares the first one's block (identical weights), so the load skips it
    assert loads[(0, "c1")]["action"] == "weight copied"
    assert loads[(0, "c2")]["action"] == "loaded: shares the weight of an earlier constant"
    assert loads[(1, "c1")]["action"] == "weight copied"          # loaded flags are per device
    assert loads[(0, "fc")]["action"] == "loaded from file"
    # VarManager keeps the first allocator it gets (device 0's) for every device
    a0 = doc["devices"]["0"]["allocators"][0]
    assert doc["var_memory_allocator"] == a0["base"]
    assert loads[(0, "w")]["dev_addr"] == a0["base"] + 512
    assert doc["devices"]["1"]["allocators"][0]["used"] == 0
    assert doc["devices"]["0"]["ready"] == ["fc2_0"]
    assert doc["devices"]["1"]["ready"] == ["fc2_0"]
    # CheckAndSetVarLoaded returns before SetVarLoaded when the offset is loaded: c2 is not recorded
    assert [n for n, _ in doc["devices"]["0"]["loaded"]] == ["c1"]
    assert doc["devices"]["0"]["allocators"][0]["used"] == 2 * 3 * 1536   # both devices, 3 blocks each
    assert a0["page_size"] == 2 * MiB and a0["virtual_size"] == GiB
    assert "graph 0 loaded on device 1: 4 of 4 variables have device memory" in capsys.readouterr().out


def test_second_graph_file_constant_is_ready(graph, tmp_path):
    doc = _plan(tmp_path, [graph, graph, "--plan-only", "--load-device", "0"])
    second = [v for l in doc["loads"] if l["graph_id"] == 1 for v in l["variables"]]
    assert {v["node"]: v["action"] for v in second}["fc"] == "ready, skipped"


def test_free_var_memory_releases_the_allocator_and_clears_every_device():
    """test_var_manager_addr_and_free with the expandable allocator installed: FreeVarMemory calls
    the allocator's FreeMemory (its range released), clears the device addresses of each device
    without freeing them one by one, and the VarManager drops the allocator; the next
    GetVarMemoryAddr takes fresh device memory."""
    from engine.varmgr import VarManagerPool, VarOp
    from engine.varmgr.loading import ExpandableAllocator
    from engine.varmgr.session import open_session

    from .conftest import desc
    vm = open_session(VarManagerPool(), 0, None, {}, None)
    d = desc((1, 2, 3, 4), size=24)
    vm.assign_var_mem("v", VarOp("v", "Variable", d), d, 2)
    alloc = vm.expandable_allocator = ExpandableAllocator(0x4000_0000_0000, 64 * MiB, 2 * MiB)
    logic = 137_438_953_472
    assert vm.get_var_memory_addr(logic, 2, 0) == alloc.base + 512
    assert vm.get_var_memory_addr(logic, 2, 1) == alloc.base + 1536 + 512    # device 1: same allocator
    vm.free_var_memory()
    assert vm.mem_manager.freed == []                   # the allocator owned both blocks
    assert (alloc.used, alloc.mapped_pages, alloc.virtual_size) == (0, 0, None)
    assert vm.expandable_allocator is None and vm.var_malloc_mem_size == 0
    assert all(e.dev_addr == 0 for m in vm.var_resource.device_dev_maps.values() for e in m.values())
    again = vm.get_var_memory_addr(logic, 2, 0)
    assert again is not None and again < alloc.base     # MemManager's memory now


def test_negative_device_is_an_input_error(graph, tmp_path, capsys):
    from engine.cli import main
    out = tmp_path / "plan.json"
    assert main(["vars", "plan", graph, "--plan-only", "--load-device", "-1", "--json", str(out)]) == 2
    assert "a device id is a number >= 0" in capsys.readouterr().err and not out.exists()
