"""Logical -> physical translation (GetVarMemoryAddr, §8) over a simulated device.

`DeviceMemory` stands in for GE's MemManager and pools: it hands out
deterministic, non-overlapping addresses and remembers bytes written, so tests
can read an `_init_value` back. Nothing here touches real memory.
"""
# `mgr` arguments are the VarManager (engine/varmgr/manager.py imports this module, not the reverse).
from __future__ import annotations

from dataclasses import dataclass, field

from engine.varmgr.policy import Allocator
from engine.varmgr.records import Status, VarDevAddr, VarError


DEVICE_BASE = 0x1_0000_0000      # first simulated device address
DEVICE_STRIDE = 1 << 40          # device d's memory starts at DEVICE_BASE + d * DEVICE_STRIDE
RDMA_BASE = 0x2000_0000_0000
HOST_BASE = 0x3000_0000_0000
AUTO_MALLOC_PURPOSE = "Auto malloc var and constant op memory"


@dataclass
class BumpAllocator:
    """Addresses from `base` upwards, 512-aligned; `capacity` None = unbounded."""

    base: int
    capacity: int | None = None
    used: int = 0

    def malloc(self, size: int) -> int | None:
        size = (size + 511) // 512 * 512 or 512
        if self.capacity is not None and self.used + size > self.capacity:
            return None
        addr = self.base + self.used
        self.used += size
        return addr


class RdmaPool:
    """GE's RdmaPoolAllocator over one block of `size` bytes (InitRdmaPool); `size` None = the pool
    was never initialised, so every request fails (GE's empty block bin).

    A request takes the smallest free block that fits its 512-aligned size (ties: the lowest
    address, GE's BlockComparator), and splits it only when the request is at most half the
    block (kSplitBlockThreshold): otherwise the whole block is handed out. Planning never frees.
    """

    ALIGN = 512
    SPLIT_THRESHOLD = 0.5

    def __init__(self, base: int, size: int | None = None):
        self.base, self.size = base, size
        self.free: list[tuple[int, int]] = [(size, base)] if size else []      # (size, address), sorted
        self.taken: list[tuple[int, int]] = []                                  # (address, block size)

    def malloc(self, size: int) -> int | None:
        import bisect
        aligned = self.ALIGN if size == 0 else (size + self.ALIGN - 1) // self.ALIGN * self.ALIGN
        i = bisect.bisect_left(self.free, (aligned, -1))
        if i == len(self.free):
            return None                               # "Memory block not founded."
        block, addr = self.free.pop(i)
        if aligned <= block * self.SPLIT_THRESHOLD:
            bisect.insort(self.free, (block - aligned, addr + aligned))
            block = aligned
        self.taken.append((addr, block))
        return addr

    def reserve(self, end: int) -> None:
        """Keep [base, end) out of the pool: blocks a restored session already holds."""
        if not self.size or end <= self.base:
            return
        cut = min(end - self.base, self.size)
        cut = (cut + self.ALIGN - 1) // self.ALIGN * self.ALIGN
        self.free = [(self.size - cut, self.base + cut)] if cut < self.size else []
        self.taken.append((self.base, min(cut, self.size)))

    @property
    def used(self) -> int:
        return sum(b for _, b in self.taken)


@dataclass
class DeviceMemory:
    """A simulated MemManager with RDMA and host pools."""

    device: BumpAllocator = field(default_factory=lambda: BumpAllocator(DEVICE_BASE))
    rdma: "BumpAllocator | RdmaPool" = field(default_factory=lambda: BumpAllocator(RDMA_BASE))
    host: BumpAllocator = field(default_factory=lambda: BumpAllocator(HOST_BASE))
    fail_device_malloc: bool = False
    other_devices: dict[int, BumpAllocator] = field(default_factory=dict)
    contents: dict[int, bytes] = field(default_factory=dict)
    freed: list[int] = field(default_factory=list)

    def malloc(self, mem_type: int, purpose: str, size: int, device: int) -> int | None:
        """aclrtMalloc on `device`: each device has its own memory (device 0 at DEVICE_BASE)."""
        if self.fail_device_malloc:
            return None
        if device == 0:
            return self.device.malloc(size)
        mem = self.other_devices.get(device)
        if mem is None:
            mem = self.other_devices[device] = BumpAllocator(DEVICE_BASE + device * DEVICE_STRIDE)
        return mem.malloc(size)

    def rdma_malloc(self, size: int) -> int | None:
        return self.rdma.malloc(size)

    def host_malloc(self, size: int) -> int | None:
        addr = self.host.malloc(size)
        if addr is not None:
            self.contents[addr] = bytes(size)           # host memory is zero-filled
        return addr

    def free(self, addr: int) -> None:
        self.freed.append(addr)

    @classmethod
    def for_session(cls, rdma_pool_size: int | None, host_memory_size: int | None) -> "DeviceMemory":
        """What a command's session gets: an RDMA pool of `rdma_pool_size` bytes (None: not
        initialised, as in GE until InitRdmaPool) and host memory of at most `host_memory_size`."""
        return cls(rdma=RdmaPool(RDMA_BASE, rdma_pool_size), host=BumpAllocator(HOST_BASE, host_memory_size))

    def pools(self) -> dict[str, dict]:
        """The pools' sizes and use, for plans and reports."""
        out = {}
        for name, pool in (("rdma", self.rdma), ("host", self.host)):
            size = pool.size if isinstance(pool, RdmaPool) else pool.capacity
            out[name] = {"size": size, "used": pool.used}
        return out

    def write(self, addr: int, data: bytes) -> None:
        self.contents[addr] = bytes(data)

    def read(self, addr: int, size: int) -> bytes:
        return self.contents.get(addr, b"")[:size]


def get_var_memory_addr(mgr, logic: int, mem_type: int, device: int = 0,
                        graph_name: str = "") -> int | None:
    if mgr.mem_manager is None:
        return None                                   # "MemManager has not been init"
    policy = mgr.policy
    spec = policy.mem_type_by_rt(mem_type)
    if spec is not None and spec.allocator is Allocator.RDMA_POOL:
        return logic                                  # already a real pointer
    hbm = mem_type == mgr.hbm_rt
    if mgr.external_var_addr and hbm:
        base = mgr.var_mem_logic_base
        real = logic - base
        if mgr.external_var_size < mgr.get_var_mem_size(mem_type) or real < 0 or real >= mgr.external_var_size:
            return None
        return mgr.external_var_addr + real
    res = mgr.var_resource
    if res is None:
        return None
    dmap = res.device_map(device)
    entry = dmap.get(logic)
    inner = 0
    if entry is None:
        entry = _containing(dmap, logic)
        if entry is None:
            return None                               # "Logic addr info is not assign"
        inner = logic - entry.logic_addr
    head = policy.memory.align
    if entry.dev_addr:
        _count_shared(mgr, graph_name, entry)
        return entry.dev_addr if entry.is_extern_mem else entry.dev_addr + inner + head
    size = policy.memory.footprint(entry.desc.size)
    dev = None
    if mgr.expandable_allocator is not None:
        dev = mgr.expandable_allocator.malloc(size)
    # Note [1G-only fallback]: GE falls back to MemManager whenever 1G-only mode is off, and
    # never in it, installed allocator or not (GetVarMemoryAddr)
    if dev is None and not huge_page_only(mgr):
        mgr.expandable_allocator = None
        dev = mgr.mem_manager.malloc(mem_type, AUTO_MALLOC_PURPOSE, size, device)
    if not dev:
        return None                                   # "Malloc var caching mem failed"
    mgr.var_malloc_mem_size += size
    entry = entry._replace(dev_addr=dev)
    dmap[entry.logic_addr] = entry
    if graph_name:
        stat = mgr.graph_var_mem_statistic.setdefault(graph_name, {"alloc": 0, "shared": 0, "addrs": set()})
        stat["alloc"] += size
        stat["addrs"].add(dev)
    ptr = dev + inner + head
    init = entry.desc.init_value
    if init is not None:
        d = entry.desc
        if (init.dims, init.dtype, init.format) != (d.dims, d.dtype, d.format) or len(init.data) > d.size:
            return None
        mgr.mem_manager.write(ptr, init.data)
    return ptr


def huge_page_only(mgr) -> bool:
    """IsVariableUse1gHugePageOnly: ge.variableUse1gHugePage holds a 1G-only value."""
    policy = mgr.policy
    value = mgr.options.get(policy.options.huge_page, "0")
    modes = policy.memory_modes
    return value in modes.huge_page_only if modes is not None else value == "1"


def check_init_value(desc) -> str | None:
    """Why an `_init_value` would make GetVarMemoryAddr fail, or None."""
    init = desc.init_value
    if init is None:
        return None
    for what, a, b in (("shape", init.dims, desc.dims), ("data type", init.dtype, desc.dtype),
                       ("format", init.format, desc.format)):
        if a != b:
            return f"_init_value {what} {a} differs from the variable's {b}"
    if len(init.data) > desc.size:
        return f"_init_value holds {len(init.data)} bytes, more than the variable's size {desc.size}"
    return None


def _containing(dmap: dict[int, VarDevAddr], logic: int) -> VarDevAddr | None:
    for e in dmap.values():
        if e.logic_addr < logic < e.logic_addr + e.desc.size:
            return e
    return None


def _count_shared(mgr, graph_name: str, entry: VarDevAddr) -> None:
    if not graph_name:
        return
    stat = mgr.graph_var_mem_statistic.setdefault(graph_name, {"alloc": 0, "shared": 0, "addrs": set()})
    if entry.dev_addr not in stat["addrs"]:
        stat["addrs"].add(entry.dev_addr)
        stat["shared"] += mgr.policy.memory.footprint(entry.desc.size)


def free_var_memory(mgr) -> None:
    """FreeVarMemory: the allocator gives its memory back first (ExpandableActiveMemoryAllocator::
    FreeMemory), blocks it did not hand out go back to MemManager, every device address is
    cleared, and the VarManager drops the allocator."""
    if mgr.mem_manager is None:
        raise VarError(Status.FAILED, "MemManager has not been init")
    alloc = mgr.expandable_allocator
    if alloc is not None and hasattr(alloc, "free_memory"):
        alloc.free_memory()
    res = mgr.var_resource
    if res is not None:
        for dmap in res.device_dev_maps.values():
            for logic, entry in list(dmap.items()):
                if entry.dev_addr and not entry.is_extern_mem:
                    if mgr.expandable_allocator is None:
                        mgr.mem_manager.free(entry.dev_addr)
                    dmap[logic] = entry._replace(dev_addr=0)
    mgr.var_malloc_mem_size = 0
    mgr.expandable_allocator = None
