"""Model load on a device, as far as variables go (DavinciModel::InitVariableMem and the
weight / variable initialisation after it), over the simulated device memory.

`memory_mode(policy, options)` resolves the static memory policy and the 1G huge-page mode
as GE's VarManager statics do; `ExpandableAllocator` is the ExpandableActiveMemoryAllocator a
session gets per device; `load_graph` resolves every placed variable of a planned graph on
one device (GetVarMemoryAddr) and sets the ready / loaded flags GE sets on the way.
"""
# `mgr` arguments are the VarManager (this module sits beside physical.py, below the CLI).
from __future__ import annotations

from dataclasses import dataclass, field

from engine.varmgr.policy import Allocator, MemoryModes, VarPolicy
from engine.varmgr.records import VarOp

EXPANDABLE_BASE = 0x4000_0000_0000      # first simulated virtual range of an expandable allocator
EXPANDABLE_STRIDE = 1 << 44             # one range per (session, device), far apart


@dataclass(frozen=True, slots=True)
class MemoryMode:
    """The memory mode of a session's variables (what GE logs as "Final StaticMemoryPolicy")."""

    policy: str                 # the final static memory policy: "0", "2", "3" or "4"
    static_extend: bool         # IsGeUseExtendSizeMemory(false)
    dynamic_extend: bool        # IsGeUseExtendSizeMemory(true)
    huge_page: str              # "none", "only" (ge.variableUse1gHugePage=1) or "first" (=2)
    page_size: int              # the page size of the session's variable allocator
    device_memory: int          # the virtual range: the device's total memory
    huge_pages: int | None      # 1G pages the device can give; None = as many as asked

    def to_json(self) -> dict:
        return {"static_memory_policy": self.policy, "static_extend": self.static_extend,
                "dynamic_extend": self.dynamic_extend, "huge_page": self.huge_page,
                "page_size": self.page_size, "device_memory": self.device_memory,
                "huge_pages": self.huge_pages}


def memory_mode(policy: VarPolicy, options: dict[str, str], device_memory: int | None = None) -> MemoryMode | None:
    """None when the policy declares no `memory_modes`."""
    modes: MemoryModes | None = policy.memory_modes
    if modes is None:
        return None
    # IsGeUseExtendSizeMemory: the environment variable and the option each enable a mode
    sources = [v for v in (options.get(modes.policy_env), options.get(modes.policy_option)) if v is not None]
    static = any(v in modes.static_extend for v in sources)
    dynamic = any(v in modes.dynamic_extend for v in sources)
    final = modes.final[0 if static and dynamic else 1 if static else 2 if dynamic else 3]
    use = options.get(policy.options.huge_page, "0")
    huge = "only" if use in modes.huge_page_only else "first" if use in modes.huge_page_first else "none"
    page = modes.huge_page_size if huge != "none" else modes.page_size
    if page != modes.huge_page_size and dynamic:
        page = modes.dynamic_page_size       # ReserveVirtualMemory: one page table for variables and fm
    count = options.get(modes.huge_pages_option)
    return MemoryMode(final, static, dynamic, huge, page,
                      device_memory if device_memory is not None else modes.device_memory_default,
                      int(count) if count is not None else None)


@dataclass
class ExpandableAllocator:
    """ExpandableActiveMemoryAllocator as VarManager uses it (MallocMemory with incremental=true).

    The first request reserves a virtual range of the device's total memory, rounded up to
    the page size, and fails (the allocator then reports no expandable support) when it
    alone exceeds that memory; each request takes the next `size` bytes of the range, and the
    pages under it are mapped once (a page shared by two variables is mapped once). A request
    past the range fails. 1G pages beyond the device's huge pages fail in 1G-only mode; in
    1G-first mode they are taken as 2M-typed pages (rtMallocPhysical retried with the 2M
    page type, same page size).
    """

    base: int
    device_memory: int
    page_size: int
    huge_only: bool = False
    huge_pages: int | None = None
    huge_page_size: int = 1 << 30
    virtual_size: int | None = None
    used: int = 0
    mapped_pages: int = 0
    fallback_pages: int = 0          # 1G-first: pages that fell back to the 2M page type
    supported: bool = True           # IsSupportExpandableMemory
    failures: list[str] = field(default_factory=list)

    def malloc(self, size: int) -> int | None:
        end = self.used + size
        if self.virtual_size is None:
            if end > self.device_memory:
                self.supported = False
                self.failures.append(f"memory_size: {end}, total_mem_size: {self.device_memory}")
                return None
            self.virtual_size = -(-self.device_memory // self.page_size) * self.page_size
        if end > self.virtual_size:
            self.failures.append(f"virtual_memory_size:{end - self.used} is invalid past "
                                 f"{self.virtual_size} reserved bytes")
            return None
        need = -(-end // self.page_size)
        while self.mapped_pages < need:
            if not self._map_page():
                return None
        addr = self.base + self.used
        self.used = end
        return addr

    def free_memory(self) -> None:
        """FreeMemory with no non-incremental user left: every page unmapped, the range released."""
        self.used = self.mapped_pages = self.fallback_pages = 0
        self.virtual_size = None

    def _map_page(self) -> bool:
        huge = self.page_size == self.huge_page_size
        if huge and self.huge_pages is not None and self.mapped_pages - self.fallback_pages >= self.huge_pages:
            if self.huge_only:
                self.failures.append(f"rtMallocPhysical failed, size:{self.page_size}, pg_type: 1G, "
                                     "1G huge page only")
                return False
            self.fallback_pages += 1
        self.mapped_pages += 1
        return True

    def to_json(self) -> dict:
        return {"base": self.base, "page_size": self.page_size, "virtual_size": self.virtual_size,
                "used": self.used, "mapped_pages": self.mapped_pages,
                "mapped_bytes": self.mapped_pages * self.page_size,
                "fallback_pages": self.fallback_pages, "supported": self.supported,
                "failures": list(self.failures)}


class SessionAllocators:
    """SessionMemAllocator<ExpandableActiveMemoryAllocator>: one allocator per (session, device,
    page size), made on first request, in a fixed address order."""

    def __init__(self) -> None:
        self.allocators: dict[tuple[int, int, int], ExpandableAllocator] = {}

    def get(self, session: int, device: int, mode: MemoryMode, huge_page_size: int) -> ExpandableAllocator:
        key = (session, device, mode.page_size)
        got = self.allocators.get(key)
        if got is None:
            got = self.allocators[key] = ExpandableAllocator(
                EXPANDABLE_BASE + len(self.allocators) * EXPANDABLE_STRIDE, mode.device_memory,
                mode.page_size, mode.huge_page == "only", mode.huge_pages, huge_page_size)
        return got


@dataclass(frozen=True, slots=True)
class LoadedVar:
    node: str
    name: str
    var_key: str
    memory_type: str
    logic: int
    dev_addr: int | None        # None: GetVarMemoryAddr returned nullptr
    action: str                 # what the load did with the variable's data


def load_graph(mgr, plan, device: int, allocators: SessionAllocators, mode: MemoryMode) -> list[LoadedVar]:
    """One model load of `plan` on `device`: InitVariableMem installs the session's allocator for
    the device (VarManager keeps the first one it gets, whatever device later loads use), then
    each placed variable is resolved. Constants copy their weight unless CheckAndSetVarLoaded says
    an earlier constant of this device already did; FileConstants are skipped when IsVarReady,
    else loaded and marked ready (SetVarIsReady)."""
    policy = mgr.policy
    types = policy.op_types
    modes = policy.memory_modes
    # Note [one variable allocator per session]: SessionMemAllocator makes an allocator for each
    # (session, device), but VarManager::InitExpandableMemoryAllocator keeps only the first one;
    # a load on another device then takes variable memory from that first device's range.
    alloc = allocators.get(mgr.session_id, device, mode, modes.huge_page_size)
    if mgr.expandable_allocator is None and alloc.supported:
        mgr.expandable_allocator = alloc
    out: list[LoadedVar] = []
    res = mgr.var_resource
    for e in plan.entries:
        spec = next((s for s in policy.memory_types if s.name == e.memory_type), None)
        rt = spec.rt if spec is not None else mgr.hbm_rt
        ptr = mgr.get_var_memory_addr(e.address, rt, device, plan.graph)
        entry = res.var_addr_mgr_map.get(e.key)
        desc = entry.desc if entry is not None else None
        if ptr is None:
            action = "failed: GetVarMemoryAddr returned nullptr"
        elif e.op_type in types.file_constant:
            if desc is not None and mgr.is_var_ready(e.node, desc, device):
                action = "ready, skipped"
            else:
                action = "loaded from file"
                if desc is not None:
                    mgr.set_var_is_ready(e.node, desc, device)
        elif e.op_type in types.const_place_holder:
            action = "external memory"
        elif e.op_type in types.variable or spec is None or spec.allocator is not Allocator.OFFSET:
            action = "allocated"
        else:
            op = VarOp(e.node, e.op_type, output_offsets=(e.address,))
            action = "loaded: shares the weight of an earlier constant" if mgr.check_and_set_var_loaded(
                op, device) else "weight copied"
        out.append(LoadedVar(e.node, e.name, e.key, e.memory_type, e.address, ptr, action))
    return out


def device_flags(mgr, device: int) -> dict:
    """The ready (VarKeys) and loaded ((name, offset)) flags of one device, sorted."""
    res = mgr.var_resource
    if res is None:
        return {"ready": [], "loaded": []}
    return {"ready": sorted(res.var_is_instance.get(device, ())),
            "loaded": [[n, o] for n, o in sorted(res.dev_loaded_var_offset.get(device, ()))]}
