"""GE's multi-stream allocator as a state machine (runtime/v2/kernel/memory/): MultiStreamMemBlock,
its pool, the BorrowAllocator, the L2 pool over an L1 allocator and MultiStreamL2Allocator with
its birth / borrow / local recycle.

A GE failure is a `GeFailure(status, message)`; the trace runner turns it into a step with
`ok: false`. Every recycle, shrink, record and wander is appended to `World.events`."""
from __future__ import annotations

from bisect import bisect_left, insort

from engine.runtime.mif import LocalRecycleList, Mif, VersionEntry


class GeFailure(Exception):
    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status


class Mem:
    """A ge::MemBlock: an address with its size, owned by an L2 pool, an L1 allocator or a
    wrapped TensorData (owner None: Free does nothing). `root` is the L1 chunk an L2 lease
    stands on (itself for an L1 chunk); `cap` that chunk's size."""

    __slots__ = ("addr", "size", "cap", "owner", "live", "root")

    def __init__(self, addr: str, size: int, cap: int, owner, root: "Mem | None" = None) -> None:
        self.addr, self.size, self.cap, self.owner, self.live = addr, size, cap, owner, True
        self.root = self if root is None else root

    def free(self) -> None:
        if self.live and self.owner is not None:
            self.live = False
            self.owner.take_back(self)


class L1:
    """The first-level allocator: occupied bytes against an optional capacity; `fail` makes every
    malloc fail (the tests' aclrtMalloc mock)."""

    __slots__ = ("name", "capacity", "occupied", "world")

    def __init__(self, name: str, capacity: int | None, world: "World") -> None:
        self.name, self.capacity, self.occupied, self.world = name, capacity, 0, world

    def malloc(self, size: int) -> Mem | None:
        if self.world.l1_fail or (self.capacity is not None and self.occupied + size > self.capacity):
            return None
        self.occupied += size
        return Mem(self.world.new_addr(), size, size, self)

    def take_back(self, mem: Mem) -> None:
        self.occupied -= mem.cap


class L2Pool:
    """L2MemPool: memory taken from L1 and kept after Free (best fit on reuse) until Recycle."""

    __slots__ = ("stream", "l1", "cached", "world")

    def __init__(self, stream: int, l1: L1, world: "World") -> None:
        self.stream, self.l1, self.cached, self.world = stream, l1, [], world

    def malloc(self, size: int) -> Mem | None:
        cached, best = self.cached, -1
        for i, m in enumerate(cached):
            if m.cap >= size and (best < 0 or m.cap < cached[best].cap):
                best = i
        root = cached.pop(best) if best >= 0 else self._l1_alloc(size)
        if root is None:
            return None
        root.live = True
        return Mem(root.addr, size, root.cap, self, root)

    def _l1_alloc(self, size: int) -> Mem | None:
        """MultiStreamL1Allocator::Alloc: on failure shrink each stream's pool in turn and retry.
        Note [one retry]: L2MemPool::Malloc then recycles its own pool and asks again; every pool
        is empty by then, so that second attempt changes nothing and is not repeated here."""
        mem = self.l1.malloc(size)
        if mem is None:
            for pool in self.world.pools:
                pool.recycle()
                mem = self.l1.malloc(size)
                if mem is not None:
                    break
        return mem

    def take_back(self, mem: Mem) -> None:
        self.cached.append(mem.root)

    def move_to_l1(self, mem: Mem, name: str) -> Mem | None:
        """L2MemPool::MoveL2ToL1: a lease that is its whole L1 chunk hands the chunk itself over
        (ConvertToRootBlock drops the span from the pool, so the chunk goes straight back to L1
        when freed); a split one is copied into a new L1 chunk (MultiStreamL1Allocator::Alloc,
        with its shrink-and-retry) and freed back to this pool; None when that chunk cannot be
        had. Note [split]: GE splits a cached span when the request needs fewer pages
        (1 << page_bits bytes, at least one) than the span has; the leases here stand on whole
        chunks, so a lease is split when it needs fewer pages than its chunk. The new chunk has
        the lease's size (the model's L1 chunks are the requested sizes, not GE's page-rounded
        spans)."""
        bits, root = self.world.rules.page_bits, mem.root
        if _pages(mem.size, bits) >= _pages(root.cap, bits):
            mem.live = False                      # the span is gone; the chunk is the block's now
            self.world.events.append({"kind": "l2_to_l1", "stream": self.stream, "block": name, "split": False})
            return root
        chunk = self._l1_alloc(mem.size)
        if chunk is None:
            return None
        self.world.events.append({"kind": "l2_to_l1", "stream": self.stream, "block": name, "split": True})
        mem.free()
        return chunk

    def recycle(self) -> None:
        """L2MemPool::Recycle: every cached chunk back to its L1 ("Shrink memory pool")."""
        if not self.cached:
            return
        for root in self.cached:
            root.free()
        self.cached = []
        self.world.events.append({"kind": "l2_shrink", "stream": self.stream})


def _pages(size: int, bits: int) -> int:
    """ScalableAllocator::GetAllocSize in pages: at least one, rounded up."""
    return max(1, -(-size >> bits))


class Block:
    """A MultiStreamMemBlock. `oid` names the instance (a pool hands it out again after a birth
    recycle); `name` is the trace name bound to it last."""

    __slots__ = ("oid", "name", "mem", "version", "birth", "kind", "mif", "counts")

    def __init__(self, oid: str, max_streams: int) -> None:
        self.oid, self.name = oid, oid
        self.mem: Mem | None = None
        self.version = 0
        self.birth: "Allocator | None" = None
        self.kind = "end"
        self.mif = Mif()
        self.counts = [0] * max_streams

    # -- MultiStreamMemBlock -------------------------------------------------------------
    def valid(self, stream: int) -> bool:
        return 0 <= stream < len(self.counts)

    def reinit(self, birth: "Allocator", mem: Mem | None, kind: str, statuses: dict) -> None:
        self.birth = birth
        if self.mem is not None:
            raise GeFailure(statuses["param_invalid"], f"block {self.name}: origin mem_block is not cleared")
        self.mem, self.kind = mem, kind
        # ReInitMifs, then NewAccess(birth, birth) on the cleared rows and counts
        s, n = birth.stream, birth.world.stream_num
        self.mif.rows = [1 << s] * n
        counts = self.counts = [0] * n
        counts[s] = 1

    def reinit_mifs(self) -> None:
        n = self.birth.world.stream_num
        self.mif.reinit(n)
        self.counts = [0] * n

    def new_access(self, src: int, dst: int, statuses: dict) -> None:
        n = len(self.counts)
        if not (0 <= src < n and 0 <= dst < n):
            raise GeFailure(statuses["failed"], f"block {self.name}: invalid stream id {dst if 0 <= src < n else src}")
        self.counts[dst] += 1
        bit, rows = 1 << dst, self.mif.rows
        for i in range(len(rows)):
            rows[i] |= bit

    def free(self, stream: int) -> None:
        if self.mem is not None and 0 <= stream < len(self.counts):
            birth = self.birth
            (birth if stream == birth.stream else birth.world.allocators[stream]).free(self)

    def sync_local(self, src: int, dst: int, statuses: dict) -> None:
        n = len(self.counts)
        if not (0 <= src < n and 0 <= dst < n):
            raise GeFailure(statuses["failed"], f"block {self.name}: invalid stream id")
        rows, sb, db = self.mif.rows, 1 << src, 1 << dst
        # the robustness checks of SyncLocalRecycleStatus: a stream's own clear bit is the newest
        if (not rows[src] & db and rows[dst] & db) or (not rows[dst] & sb and rows[src] & sb):
            raise GeFailure(statuses["failed"], f"block {self.name}: stream {dst} was marked clear by another stream")
        rows[dst] &= rows[src]
        if not rows[dst]:
            self.free(dst)

    def move_l2_to_l1(self, statuses: dict) -> None:
        """MultiStreamL2Allocator::MoveL2ToL1 on the birth allocator (TensorToOut calls it that
        way): the block's memory becomes an L1 chunk (L2Pool.move_to_l1); a block wrapping a
        caller's TensorData (share_tensor_data) is left as it is."""
        if self.kind == "wrapped":
            return
        mem = self.mem
        if mem is None:
            raise GeFailure(statuses["failed"], f"block {self.name}: MoveL2ToL1 of a null mem block")
        pool = self.birth.pool
        if mem.owner is not pool:
            # ConvertToRootBlock casts the mem block to a PageSpan of this pool: an L1 chunk (one
            # already moved) or another pool's span is not one
            raise GeFailure(statuses["undefined"], f"block {self.name}: its memory is not a span of "
                                                   f"stream {self.birth.stream}'s L2 pool")
        chunk = pool.move_to_l1(mem, self.name)
        if chunk is None:
            raise GeFailure(statuses["failed"], f"block {self.name}: no L1 memory of {mem.size} bytes to move to")
        self.mem = chunk

    def sync_all_local(self, dst: int, statuses: dict) -> None:
        if not self.valid(dst):
            raise GeFailure(statuses["failed"], f"block {self.name}: invalid dst stream id {dst}")
        for s in range(len(self.counts)):
            if s == dst:
                continue
            self.mif.merge_cleared_from(s, dst)
            if not self.mif.is_any_set(dst):
                self.free(dst)
                break


class BlockPool:
    """MultiStreamMemBlockPool over NoDestructRefObjectPool: a LIFO free list; a new segment of
    `segment` instances is pushed when it runs dry (the last of them is handed out first)."""

    __slots__ = ("name", "free_list", "segments", "segment", "max_streams")

    def __init__(self, name: str, segment: int, max_streams: int) -> None:
        self.name, self.free_list, self.segments = name, [], 0
        self.segment, self.max_streams = segment, max_streams

    def acquire(self, birth: "Allocator", mem: Mem | None, kind: str, statuses: dict) -> Block:
        if not self.free_list:
            base = self.segments * self.segment
            self.free_list = [Block(f"{self.name}#{base + i}", self.max_streams) for i in range(self.segment)]
            self.segments += 1
        block = self.free_list.pop()
        block.reinit(birth, mem, kind, statuses)
        if birth.world.timeline is not None:
            birth.world.timeline.append((birth.world.step, "acquire", birth.stream, block.oid))
        return block

    def release(self, block: Block, statuses: dict) -> None:
        if block.mem is None:
            raise GeFailure(statuses["undefined"], f"block {block.name}: released with no memory (a null dereference in GE)")
        block.mem.free()
        block.version += 1
        block.mem = None
        self.free_list.append(block)


class BorrowAllocator:
    """Blocks recycled on a stream that is not their birth stream, by size and by birth stream.
    Note [unordered sets]: GE keeps std::unordered_sets and takes `*begin()`; here the sets keep
    insertion order, so the oldest block of the smallest fitting size is lent first."""

    __slots__ = ("by_size", "sizes", "by_stream")

    def __init__(self) -> None:
        self.by_size: dict[int, dict] = {}
        self.sizes: list[int] = []
        self.by_stream: dict[int, dict] = {}

    def alloc(self, size: int, statuses: dict) -> Block | None:
        i = bisect_left(self.sizes, size)
        if i == len(self.sizes):
            return None
        key = self.sizes[i]
        blocks = self.by_size[key]
        if not blocks:
            # Note [erase by request]: Alloc erases the *requested* size's key when the set it
            # took from runs empty, so a set under a larger key can stay behind empty and the
            # next `*blocks.begin()` on it is undefined behaviour in GE.
            raise GeFailure(statuses["undefined"], f"borrow pool holds an empty set for size {key}")
        block = next(iter(blocks))
        del blocks[block]
        self.by_stream.get(block.birth.stream, {}).pop(block, None)
        if not blocks:
            self._erase(size)
        return block

    def _erase(self, size: int) -> None:
        if size in self.by_size:
            del self.by_size[size]
            self.sizes.pop(bisect_left(self.sizes, size))

    def free(self, block: Block) -> None:
        size = block.mem.size if block.mem is not None else 0
        if size not in self.by_size:
            self.by_size[size] = {}
            insort(self.sizes, size)
        self.by_size[size][block] = None
        self.by_stream.setdefault(block.birth.stream, {})[block] = None

    def get_and_clear(self, stream: int) -> list[Block]:
        blocks = self.by_stream.pop(stream, None)
        if not blocks:
            return []
        out = list(blocks)
        for block in out:
            size = block.mem.size if block.mem is not None else 0
            group = self.by_size.get(size)
            if group is not None:
                group.pop(block, None)
                if not group:
                    self._erase(size)
        return out


class Allocator:
    """MultiStreamL2Allocator of one stream."""

    __slots__ = ("stream", "world", "pool", "blocks", "borrow", "local")

    def __init__(self, stream: int, world: "World") -> None:
        self.stream, self.world = stream, world
        self.pool = L2Pool(stream, world.l1s["default"], world)
        self.blocks = BlockPool(f"s{stream}", world.rules.pool_segment, world.rules.default_max_streams)
        self.borrow = BorrowAllocator()
        self.local = LocalRecycleList()

    def malloc(self, size: int) -> Block | None:
        st = self.world.statuses
        mem = self.pool.malloc(size)
        if mem is not None:
            return self.blocks.acquire(self, mem, "norm", st)
        block = self.borrow.alloc(size, st)
        if block is not None:
            block.new_access(self.stream, self.stream, st)
        return block

    def free(self, block: Block) -> None:
        s = self.stream
        need_recycle = False
        counts, rows = block.counts, block.mif.rows
        c = counts[s]
        if c > 0:
            counts[s] = c = c - 1
            if c == 0:
                need_recycle = True
                rows[s] &= ~(1 << s)
        if not rows[s]:
            if block.birth is self:
                self.birth_recycle(block)
            else:
                self.borrow_recycle(block)
        elif need_recycle:
            local = self.local
            local.entries[local.seq] = VersionEntry(block.version, block)    # LocalRecycleList.push
            local.seq += 1
            world = self.world
            world.events.append({"kind": "recycle", "mode": "local", "stream": s, "block": block.name})
            if world.timeline is not None:
                world.timeline.append((world.step, "local", s, block.oid))

    def birth_recycle(self, block: Block) -> None:
        st = self.world.statuses
        if block is None or block.mem is None:
            raise GeFailure(st["failed"], f"birth recycle of block {getattr(block, 'name', None)}: already recycled")
        if block.birth.stream != self.stream:
            raise GeFailure(st["failed"], f"birth recycle of block {block.name} at stream {self.stream}: "
                                          f"its birth stream is {block.birth.stream}")
        self.world.recycle("birth", self.stream, block)
        self.blocks.release(block, st)

    def borrow_recycle(self, block: Block) -> None:
        self.world.recycle("borrow", self.stream, block)
        self.borrow.free(block)
        block.version += 1
        block.reinit_mifs()

    def local_blocks(self, dst: int | None, take: int | None) -> list[Block]:
        return self.local.walk(self.stream, self.world.stream_num, dst, take)


class Tensor:
    """A GertTensorData: a copy of the address, size and placement, a stream and a block."""

    __slots__ = ("addr", "size", "placement", "stream", "block")

    def __init__(self, addr=None, size=0, placement="end", stream=-1, block: Block | None = None) -> None:
        self.addr, self.size, self.placement, self.stream, self.block = addr, size, placement, stream, block

    def free(self) -> None:
        if self.block is not None:
            self.block.free(self.stream)
            self.block = None
        self.addr = None

    def copy_from(self, other: "Tensor") -> None:
        if self.block is not None:
            self.free()
        self.addr, self.placement, self.size, self.block = other.addr, other.placement, other.size, other.block

    def share_from(self, other: "Tensor") -> None:
        if self.addr == other.addr and self.block is other.block and self.stream == other.stream:
            return
        self.copy_from(other)
        self.stream = other.stream
        if self.block is not None:
            self.block.counts[self.stream] += 1 if self.block.valid(self.stream) else 0

    def wander_from(self, other: "Tensor", dst: int, statuses: dict) -> None:
        if self.stream == other.stream:
            raise GeFailure(statuses["failed"], f"wander on the same stream {self.stream}")
        if self.block is not None and dst != self.stream:
            raise GeFailure(statuses["failed"], f"the tensor to overwrite holds memory on stream {self.stream}, not {dst}")
        self.copy_from(other)
        self.stream = dst
        if self.block is not None:
            self.block.new_access(other.stream, dst, statuses)


class World:
    """All allocators of one run, the L1 allocators, the event table and the event log."""

    def __init__(self, stream_num: int, l1_capacity: int | None, placement: str, rules, timeline: bool = True) -> None:
        self.rules = rules
        self.statuses = rules.statuses
        self.stream_num = stream_num
        self.placement = placement
        self.l1_fail = False
        self.addr_count = 0
        self.events: list[dict] = []
        self.timeline: list[tuple] | None = [] if timeline else None   # (step, kind, stream, oid): the picture
        self.step = 0
        self.l1s: dict[str, L1] = {"default": L1("default", l1_capacity, self)}
        self.allocators = [None] * stream_num
        self.pools: list[L2Pool] = []
        for s in range(stream_num):
            a = Allocator(s, self)
            self.allocators[s] = a
            self.pools.append(a.pool)

    def new_addr(self) -> str:
        self.addr_count += 1
        return f"0x{self.addr_count:x}000"

    def recycle(self, mode: str, stream: int, block: Block) -> None:
        self.events.append({"kind": "recycle", "mode": mode, "stream": stream, "block": block.name})
        if self.timeline is not None:
            self.timeline.append((self.step, mode, stream, block.oid))
