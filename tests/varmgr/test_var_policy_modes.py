"""Memory modes of variable memory (issue 13 part A): the static memory policy, 1G huge pages,
page sizes, the expandable allocator's limits and fallbacks, several devices, ready/loaded flags.

Each scenario restates GE code or a GE unit test:
* graph_var_manager.h IsGeUseExtendSizeMemory / IsVariableUse1gHugePageOnly / ...First;
* davinci_model.cc InitVariableMem (page size), active_memory_allocator.cc ReserveVirtualMemory
  (8 MiB pages under a dynamic-extend policy), ExpandableActiveMemoryAllocator::MallocMemory;
* graph_var_manager_unittest Malloc1GHugePageFailed_Return, aoe_const_mem_reuse_succ and
  test_check_and_set_var_loaded (loaded flags), DavinciModel::InitFileConstant (ready flags).
"""
import json

import pytest

from engine.cli import main
from engine.core.dumpio import save_model
from engine.varmgr import VarManagerPool
from engine.varmgr.loading import ExpandableAllocator, memory_mode
from engine.varmgr.policy_load import default_policy

from .conftest import desc
from .graphs import GraphBuilder, tensor

GiB, MiB = 2 ** 30, 2 ** 20
BASE = 137_438_953_472


def mode(**options):
    return memory_mode(default_policy(), {k.replace("__", "."): v for k, v in options.items()})


@pytest.mark.parametrize("policy, env, final, static, dynamic", [
    (None, None, "0", False, False),
    ("1", None, "2", True, False),         # kStaticMemory: static extend, logged as kExtendSizeType
    ("2", None, "2", True, False),
    ("3", None, "3", False, True),
    ("4", None, "4", True, True),
    ("0", "3", "3", False, True),          # the environment variable alone enables dynamic extend
    ("1", "3", "4", True, True),           # option static + environment dynamic = both
    (None, "4", "4", True, True),
    ("5", None, "0", False, False),        # an unknown value enables nothing
])
def test_static_memory_policy_resolution(policy, env, final, static, dynamic):
    opts = {}
    if policy is not None:
        opts["ge.exec.staticMemoryPolicy"] = policy
    if env is not None:
        opts["env.GE_USE_STATIC_MEMORY"] = env
    m = memory_mode(default_policy(), opts)
    assert (m.policy, m.static_extend, m.dynamic_extend) == (final, static, dynamic)


@pytest.mark.parametrize("huge, policy, page, kind", [
    ("0", None, 2 * MiB, "none"),           # kDrvPageSize
    ("1", None, GiB, "only"),               # kDrv1GPageSize
    ("2", None, GiB, "first"),
    ("0", "3", 8 * MiB, "none"),            # dynamic extend: kLargePageSize
    ("0", "4", 8 * MiB, "none"),
    ("0", "2", 2 * MiB, "none"),            # static extend alone keeps 2 MiB
    ("1", "4", GiB, "only"),                # 1G pages are never shrunk to 8 MiB
])
def test_page_size_of_variable_memory(huge, policy, page, kind):
    opts = {"ge.variableUse1gHugePage": huge}
    if policy:
        opts["ge.exec.staticMemoryPolicy"] = policy
    m = memory_mode(default_policy(), opts)
    assert (m.page_size, m.huge_page) == (page, kind)


def test_expandable_allocator_hands_out_consecutive_addresses_and_maps_pages_once():
    a = ExpandableAllocator(0x4000_0000_0000, device_memory=64 * MiB, page_size=2 * MiB)
    first = a.malloc(1536)                 # a 24-byte variable's malloc size (512 + 1024)
    second = a.malloc(3 * MiB)
    assert (first, second) == (0x4000_0000_0000, 0x4000_0000_0000 + 1536)
    assert a.virtual_size == 64 * MiB
    assert a.mapped_pages == 2             # [0, 3 MiB + 1536) touches two 2 MiB pages
    assert a.used == 3 * MiB + 1536


def test_expandable_allocator_first_request_larger_than_device_memory_disables_it():
    a = ExpandableAllocator(0, device_memory=4 * MiB, page_size=2 * MiB)
    assert a.malloc(5 * MiB) is None
    assert not a.supported                 # MallocVirtualMemory failed: "Maybe not support rtReserveMemAddress"
    assert "total_mem_size: 4194304" in a.failures[0]


def test_expandable_allocator_request_past_the_reserved_range_fails_but_stays_supported():
    a = ExpandableAllocator(0, device_memory=3 * MiB, page_size=2 * MiB)
    assert a.malloc(3 * MiB) == 0          # range rounded up to 4 MiB
    assert a.malloc(1 * MiB) == 3 * MiB
    assert a.malloc(1) is None
    assert a.supported


def test_huge_page_only_fails_past_the_devices_huge_pages_first_falls_back():
    only = ExpandableAllocator(0, 8 * GiB, GiB, huge_only=True, huge_pages=2)
    assert only.malloc(GiB) is not None and only.malloc(GiB) is not None
    assert only.malloc(512) is None
    assert "1G huge page only" in only.failures[-1]
    first = ExpandableAllocator(0, 8 * GiB, GiB, huge_only=False, huge_pages=2)
    for _ in range(3):
        assert first.malloc(GiB) is not None
    assert (first.mapped_pages, first.fallback_pages) == (3, 1)   # the third page is 2M-typed


# ---- GetVarMemoryAddr with the allocator (VarManager level) -----------------------------
def _session(options=None):
    from engine.varmgr.session import open_session
    pool = VarManagerPool()
    vm = open_session(pool, 0, None, dict(options or {}), None)
    return vm


def test_get_var_memory_addr_takes_the_expandable_allocator_then_falls_back():
    from engine.varmgr import VarOp
    vm = _session()
    d = desc((1, 2, 3, 4), size=24)
    vm.assign_var_mem("a", VarOp("a", "Variable", d), d, 2)
    vm.assign_var_mem("b", VarOp("b", "Variable", d), d, 2)
    vm.expandable_allocator = ExpandableAllocator(0x4000_0000_0000, device_memory=1536, page_size=512)
    pa = vm.get_var_memory_addr(BASE, 2)
    assert pa == 0x4000_0000_0000 + 512           # the allocator's block, data after the 512-byte head
    pb = vm.get_var_memory_addr(BASE + 1536, 2)   # past the 1536-byte range: allocator dropped, device malloc
    assert vm.expandable_allocator is None
    assert pb is not None and pb < 0x4000_0000_0000


def test_huge_page_only_without_any_allocator_returns_nullptr():
    """GE: `(var_dev_addr == nullptr) && !IsVariableUse1gHugePageOnly()` guards the fallback."""
    from engine.varmgr import VarOp
    vm = _session({"ge.variableUse1gHugePage": "1"})
    d = desc((1, 2, 3, 4), size=24)
    vm.assign_var_mem("a", VarOp("a", "Variable", d), d, 2)
    assert vm.expandable_allocator is None
    assert vm.get_var_memory_addr(BASE, 2) is None


# ---- through the command line ---------------------------------------------------------------
@pytest.fixture
def graph(tmp_path):
    g = GraphBuilder("g")
    g.op("w", "Variable", outs=[desc((1, 2, 3, 4))])
    g.op("c1", "Constant", outs=[desc((3,), dtype=4)], attrs={"value": tensor(b"\1\2\3", desc((3,), dtype=4))})
    g.op("c2", "Constant", outs=[desc((3,), dtype=4)], attrs={"value": tensor(b"\1\2\3", desc((3,), dtype=4))})
    g.op("fc", "FileConstant", outs=[desc((4,))], attrs={"file_path": "weights/w.bin"})
    p = tmp_path / "g.pbtxt"
    save_model(g.build(), p)
    return str(p)


def _plan(tmp_path, argv, code=0):
    out = tmp_path / "plan.json"
    assert main(["vars", "plan", *argv, "--json", str(out)]) == code
    return json.loads(out.read_text())


def test_plan_json_shows_the_memory_mode(graph, tmp_path):
    doc = _plan(tmp_path, [graph, "--plan-only", "--option", "ge.exec.staticMemoryPolicy=3"])
    assert doc["memory_mode"] == {"static_memory_policy": "3", "static_extend": False, "dynamic_extend": True,
                                  "huge_page": "none", "page_size": 8 * MiB, "device_memory": 32 * GiB,
                                  "huge_pages": None}


def test_huge_page_only_load_fails_past_the_huge_pages(graph, tmp_path, capsys):
    """Malloc1GHugePageFailed_Return: 1G-only mode, the physical 1G page cannot be had."""
    out = tmp_path / "plan.json"
    code = main(["vars", "plan", graph, "--plan-only", "--load-device", "0", "--json", str(out),
                 "--option", "ge.variableUse1gHugePage=1", "--option", "context.hugePageCount=0"])
    assert code == 1 and not out.exists()
    err = capsys.readouterr().err
    assert "GetVarMemoryAddr returns nullptr for graph 0 on device 0: 'w'" in err
    assert "1G-only" in err


def test_huge_page_first_load_falls_back_to_2m_pages(graph, tmp_path):
    doc = _plan(tmp_path, [graph, "--plan-only", "--load-device", "0", "--option", "ge.variableUse1gHugePage=2",
                           "--option", "context.hugePageCount=0"])
    a0 = doc["devices"]["0"]["allocators"][0]
    assert (a0["page_size"], a0["mapped_pages"], a0["fallback_pages"]) == (GiB, 1, 1)
    assert all(v["dev_addr"] is not None for l in doc["loads"] for v in l["variables"])


def test_variables_beyond_device_memory_fall_back_to_device_malloc(tmp_path):
    g = GraphBuilder("big")
    g.op("a", "Variable", outs=[desc((1024, 1024))])          # 4 MiB
    g.op("b", "Variable", outs=[desc((1024, 1024))])
    p = tmp_path / "big.pbtxt"
    save_model(g.build(), p)
    doc = _plan(tmp_path, [str(p), "--plan-only", "--load-device", "0", "--memory-size", str(6 * MiB)])
    a0 = doc["devices"]["0"]["allocators"][0]
    rows = {v["node"]: v for v in doc["loads"][0]["variables"]}
    assert rows["a"]["dev_addr"] == a0["base"] + 512
    assert rows["b"]["dev_addr"] < a0["base"]                   # MemManager's memory, allocator dropped
    assert doc["var_memory_allocator"] is None
    assert a0["failures"]


# ---- the policy as data ---------------------------------------------------------------------
def _edited(tmp_path, old, new):
    import shutil
    from engine.core.resources import default_pack_dir
    pack = tmp_path / "pack"
    shutil.copytree(default_pack_dir(), pack)
    f = pack / "variables.yaml"
    text = f.read_text()
    assert old in text
    f.write_text(text.replace(old, new))
    return pack


def test_rules_check_names_an_undeclared_policy_option(tmp_path, capsys):
    pack = _edited(tmp_path, "huge_pages_option: context.hugePageCount", "huge_pages_option: context.hugePages")
    assert main(["rules", "check", str(pack)]) == 2
    err = capsys.readouterr().err
    assert "reads option 'context.hugePages', which the pack does not declare" in err
    assert "did you mean 'context.hugePageCount'?" in err


def test_rules_check_rejects_a_page_size_that_is_not_a_power_of_two(tmp_path, capsys):
    pack = _edited(tmp_path, "dynamic_page_size: 8388608", "dynamic_page_size: 8000000")
    assert main(["rules", "check", str(pack)]) == 2
    assert "memory_modes.dynamic_page_size 8000000 is not a power of two" in capsys.readouterr().err


def test_an_edited_policy_changes_the_plan(tmp_path):
    """The modes are data: 4 MiB dynamic pages in the pack give 4 MiB pages to variables."""
    pack = _edited(tmp_path, "dynamic_page_size: 8388608", "dynamic_page_size: 4194304")
    g = GraphBuilder("g")
    g.op("w", "Variable", outs=[desc((4,))])
    p = tmp_path / "g.pbtxt"
    save_model(g.build(), p)
    doc = _plan(tmp_path, [str(p), "--rules", str(pack), "--option", "ge.exec.staticMemoryPolicy=4",
                           "--load-device", "0"])
    assert doc["memory_mode"]["page_size"] == 4 * MiB
    assert doc["devices"]["0"]["allocators"][0]["page_size"] == 4 * MiB


def test_unknown_policy_value_is_an_input_error(tmp_path, graph, capsys):
    out = tmp_path / "plan.json"
    assert main(["vars", "plan", graph, "--option", "ge.exec.staticMemoryPolicy=7", "--json", str(out)]) == 2
    assert "ge.exec.staticMemoryPolicy" in capsys.readouterr().err and not out.exists()


# ---- GetGraphAvailableMemory ---------------------------------------------------------------
def test_graph_available_memory_as_graph_builder_unittest(tmp_path):
    """get_graph_available_mem: a session with `var` [1,512,1,1M] FLOAT has 26 GiB left (the use
    maximum 31 GiB less the 5 GiB variable maximum); a second graph adding `var_1` of the same
    shape has 2 GiB + 32 bytes (its padded size) less."""
    def graph(name, variables):
        g = GraphBuilder(name)
        g.op("data", "Data", outs=[desc((1, 512, 1, 1024), 0)])
        for v in variables:
            g.op(v, "Variable", outs=[desc((1, 512, 1, 1024 * 1024), 0)])
        p = tmp_path / f"{name}.pbtxt"
        save_model(g.build(), p)
        return str(p)
    g1, g2 = graph("g1", ["var"]), graph("g2", ["var_1", "var"])
    doc = _plan(tmp_path, [g1, g1, g2, "--plan-only"])
    first, again, second = doc["graphs"]
    assert first["available_memory"] == 33285996544 - 5368709120 - 2147483680   # var not yet known
    assert again["available_memory"] == 27917287424            # GE's value once var is registered
    assert second["available_memory"] == 25769803744           # GE's expected value for g2
