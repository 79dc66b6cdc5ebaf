"""`memconflict runtime memtrace`: run an op trace through the multi-stream allocator model
(engine/runtime/msalloc.py) and report each step — op, ok, result, events and the state after it
(spec ge-runtime.md "memtrace", output schema there). A GE failure is a step with `ok: false`
and `status`; the run goes on, as GE's caller would see the status and carry on."""
from __future__ import annotations

from engine.runtime.mif import Mif, bits_of, to_all_bit
from engine.runtime.msalloc import Block, BlockPool, GeFailure, L1, Mem, Tensor, World
from engine.core.gcpause import no_gc
from engine.runtime.tracefile import Trace


class Event:
    """A GertEvent: its compile-time src/dst streams and its space (blocks the src freed, at the
    version they had; borrowed blocks to hand back to their birth stream)."""

    __slots__ = ("id", "src", "dst", "free_by_src", "return_birth", "named")

    def __init__(self, eid: int, src: int, dst: int, free_by_src=(), return_birth=()) -> None:
        self.id, self.src, self.dst = eid, src, dst
        self.free_by_src = list(free_by_src)     # [(block or name, version)]
        self.return_birth = list(return_birth)   # [block or name]
        self.named = bool(self.free_by_src or self.return_birth)


class Runner:
    def __init__(self, trace: Trace, rules, state: str = "all", timeline: bool = False) -> None:
        self.rules = rules
        self.world = World(trace.streams, trace.l1_capacity, trace.placement, rules, timeline)
        self.st = rules.statuses
        self.blocks: dict[str, Block | None] = {}
        self.tensors: dict[str, Tensor] = {}
        self.mems: dict = {}
        self.mifs: dict[str, Mif] = {}
        self.pools: dict[str, BlockPool] = {}
        self.loose = 0
        self.state_mode = state
        self.event_table = [Event(i, e["src"], e["dst"], [tuple(x) for x in e.get("free_by_src", [])],
                                  e.get("return_birth", [])) for i, e in enumerate(trace.events)]
        self.ops = trace.ops
        self.allocs = self.world.allocators

    # -- running -----------------------------------------------------------------------
    def run(self) -> dict:
        steps = []
        world = self.world
        dispatch = {name: getattr(self, "op_" + name) for name in _op_names()}
        with_state = self.state_mode == "all"
        append = steps.append
        track = world.timeline is not None
        for i, op in enumerate(self.ops):
            (name, body), = op.items()
            if track:
                world.step = i
            events = world.events = []
            try:
                step = {"op": name, "ok": True, "result": dispatch[name](body), "events": events}
            except GeFailure as exc:
                step = {"op": name, "ok": False, "result": None, "status": exc.status, "message": str(exc),
                        "events": events}
            if with_state:
                step.update(self.state())
            append(step)
        self.timeline = world.timeline
        out: dict = {"steps": steps}
        if not with_state:
            out["final"] = self.state()
        return out

    def _block(self, body) -> Block:
        name = body.get("block")
        block = self.blocks[name] if name is not None else self.tensors[body["block_of"]].block
        if block is None:
            raise GeFailure(self.st["undefined"], f"block '{body.get('block', body.get('block_of'))}' is null")
        return block

    def _bind(self, name: str, block: Block | None) -> None:
        self.blocks[name] = block
        if block is not None:
            block.name = name

    def _alloc(self, stream: int):
        return self.world.allocators[stream]

    # -- allocator ops -----------------------------------------------------------------
    def op_malloc(self, b):
        name = b["as"]
        try:
            block = self.allocs[b["stream"]].malloc(b["size"])
        except GeFailure:
            self._bind(name, None)
            raise
        self.blocks[name] = block
        if block is not None:
            block.name = name
        else:
            raise GeFailure(self.st["alloc_failed"], f"malloc of {b['size']} bytes on stream {b['stream']} failed")
        return block.oid

    def op_malloc_tensor_data(self, b):
        try:
            block = self._alloc(b["stream"]).malloc(b["size"])
        except GeFailure:
            self.tensors[b["as"]] = Tensor(None, b["size"], self.world.placement, b["stream"], None)
            raise
        if block is not None and block.mem is None:
            # a borrowed block that was made with no memory (reinit/pool_acquire with mem: null):
            # ToGertTensorData reads its address through the null mem block
            self.tensors[b["as"]] = Tensor(None, b["size"], self.world.placement, b["stream"], None)
            raise GeFailure(self.st["undefined"], f"block {block.name} has no memory: its address is read through null")
        t = Tensor(block.mem.addr if block is not None else None, b["size"], self.world.placement, b["stream"], block)
        self.tensors[b["as"]] = t
        if block is None:
            raise GeFailure(self.st["alloc_failed"], f"malloc of {b['size']} bytes on stream {b['stream']} failed")
        block.name = b["as"]
        return t.addr

    op_alloc_tensor = op_malloc_tensor_data

    def op_free(self, b):
        block = self.blocks[b["block"]]
        if block is None:
            raise GeFailure(self.st["undefined"], f"block '{b['block']}' is null")
        block.free(b["stream"])

    def op_new_access(self, b):
        block = self.blocks[b["block"]]
        (block if block is not None else self._block(b)).new_access(b["src"], b["dst"], self.st)

    def op_sync_local_recycle(self, b):
        self._block(b).sync_local(b["src"], b["dst"], self.st)

    def op_sync_all_local_recycle(self, b):
        self._block(b).sync_all_local(b["dst"], self.st)

    def op_get_clear_local_recycle(self, b):
        dst = b.get("dst")
        if dst is not None:
            self._bit(dst)
        return [x.name for x in self._alloc(b["allocator"]).local_blocks(dst, b.get("take"))]

    def _bit(self, stream: int) -> None:
        """ToBit(stream) is a shift of a uint64: undefined outside 0..63."""
        if not 0 <= stream < self.rules.stream_bits:
            raise GeFailure(self.st["undefined"], f"ToBit({stream}) shifts outside uint64")

    def op_get_and_clear_borrow(self, b):
        return [x.name for x in self._alloc(b["allocator"]).borrow.get_and_clear(b["dst"])]

    def op_birth_recycle(self, b):
        self._alloc(b["allocator"]).birth_recycle(self.blocks[b["block"]])

    def op_plus_version(self, b):
        block = self._block(b)
        block.version += 1
        return block.version

    def op_move_l2_to_l1(self, b):
        name = b.get("block")
        block = self.blocks[name] if name is not None else self.tensors[b["block_of"]].block
        if block is None:        # GE_ASSERT_NOTNULL(block): a checked failure, not a null dereference
            raise GeFailure(self.st["failed"], f"MoveL2ToL1 of a null block ('{name or b['block_of']}')")
        block.move_l2_to_l1(self.st)
        return block.mem.addr if block.mem is not None else None     # a wrapped block is left as it is

    def op_reinit(self, b):
        block = self.blocks.get(b["as"])
        if block is None:
            self.loose += 1
            block = Block(f"loose#{self.loose}", self.rules.default_max_streams)
            self._bind(b["as"], block)
        mem = self.mems[b["mem"]] if b.get("mem") is not None else None
        block.reinit(self._alloc(b["allocator"]), mem, "norm", self.st)

    def op_add_count(self, b):
        block = self._block(b)
        if not block.valid(b["stream"]):
            return 0
        block.counts[b["stream"]] += 1
        return block.counts[b["stream"]]

    def op_sub_count(self, b):
        block = self._block(b)
        if not block.valid(b["stream"]):
            return 0
        block.counts[b["stream"]] = (block.counts[b["stream"]] - 1) % (1 << 64)   # size_t wraps
        return block.counts[b["stream"]]

    def op_pool_acquire(self, b):
        pool = self.pools.get(b["pool"])
        if pool is None:
            pool = self.pools[b["pool"]] = BlockPool(b["pool"], self.rules.pool_segment, self.rules.default_max_streams)
        if "mem" in b:
            mem = self.mems[b["mem"]]
        else:
            mem = self.world.l1s["default"].malloc(b["size"])
        try:
            block = pool.acquire(self._alloc(b["allocator"]), mem, "norm", self.st)
        except GeFailure:
            self._bind(b["as"], None)
            raise
        self._bind(b["as"], block)
        return block.oid

    def op_pool_release(self, b):
        pool = self.pools.get(b["pool"])
        if pool is None:
            raise GeFailure(self.st["undefined"], f"pool '{b['pool']}' was never used")
        pool.release(self._block(b), self.st)

    def op_l1_malloc(self, b):
        l1 = self._l1(b.get("l1", "default"), None)
        mem = l1.malloc(b["size"])
        self.mems[b["as"]] = mem
        if mem is None:
            raise GeFailure(self.st["alloc_failed"], f"L1 malloc of {b['size']} bytes failed")
        return mem.addr

    def op_l1_free(self, b):
        """MultiStreamL1Allocator::Free: a null block (`mem: null`, or one whose malloc failed)
        is skipped, no shrink; Free reports true either way. A chunk freed twice is a double
        free of a ge::MemBlock in GE."""
        mem = self.mems[b["mem"]] if b["mem"] is not None else None
        if mem is None:
            return True
        if not mem.live:
            raise GeFailure(self.st["undefined"], f"mem '{b['mem']}' is freed twice")
        mem.free()
        return True

    def op_l1_fail(self, b):
        self.world.l1_fail = bool(b)

    def op_set_l1(self, b):
        self._alloc(b["allocator"]).pool.l1 = self._l1(b["l1"], b.get("capacity"))

    def _l1(self, name: str, capacity):
        l1 = self.world.l1s.get(name)
        if l1 is None:
            l1 = self.world.l1s[name] = L1(name, capacity, self.world)
        return l1

    # -- Mif and bits ------------------------------------------------------------------
    def _mif(self, b, rows=(), bits=()) -> Mif:
        """The named Mif; a row outside it or a stream outside the bit set is undefined in GE
        (SmallVector and shift without checks), reported as such."""
        mif = self.mifs[b["mif"]]
        for r in rows:
            if not 0 <= r < len(mif.rows):
                raise GeFailure(self.st["undefined"], f"mif '{b['mif']}': row {r} is outside its {len(mif.rows)} rows")
        for s in bits:
            if not 0 <= s < self.rules.stream_bits:
                raise GeFailure(self.st["undefined"], f"mif '{b['mif']}': stream {s} is outside the bit set")
        return mif

    def op_mif_new(self, b):
        mif = self.mifs[b["as"]] = Mif()
        mif.reinit(b["streams"])

    def op_mif_set(self, b):
        self._mif(b, (b["maintained"],), (b["stream"],)).set(b["maintained"], b["stream"])

    def op_mif_clear(self, b):
        self._mif(b, (b["maintained"],), (b["stream"],)).clear(b["maintained"], b["stream"])

    def op_mif_set_all(self, b):
        self._mif(b, (), (b["stream"],)).set_all(b["stream"])

    def op_mif_set_maintained_all(self, b):
        self._mif(b, (b["maintained"],)).set_maintained_all(b["maintained"])

    def op_mif_merge_cleared_from(self, b):
        self._mif(b, (b["src"], b["dst"])).merge_cleared_from(b["src"], b["dst"])

    def op_mif_is_set(self, b):
        return self._mif(b, (b["maintained"],), (b["stream"],)).is_set(b["maintained"], b["stream"])

    def op_mif_is_any_set(self, b):
        return self._mif(b, (b["maintained"],)).is_any_set(b["maintained"])

    def op_to_all_bit(self, b):
        bits = self.rules.stream_bits
        if not (0 <= b["stream_num"] <= bits and 0 <= b["stream"] < bits):
            raise GeFailure(self.st["undefined"], f"ToAllBit({b['stream_num']}, {b['stream']}) shifts outside uint64")
        return bits_of(to_all_bit(b["stream_num"], b["stream"]) & ((1 << bits) - 1))

    # -- events ------------------------------------------------------------------------
    def op_create_events(self, b):
        if b["infos"] is None:
            raise GeFailure(self.st["failed"], "CreateGertEvents: the event infos input is null")
        infos = [(x["src"], x["dst"]) if isinstance(x, dict) else tuple(x) for x in b["infos"]]
        self.event_table = [Event(i, s, d) for i, (s, d) in enumerate(infos)]
        return [{"id": e.id, "src": e.src, "dst": e.dst} for e in self.event_table]

    def op_define_events(self, b):
        self.event_table = [Event(i, e["src"], e["dst"], [tuple(x) for x in e.get("free_by_src", [])],
                                  e.get("return_birth", [])) for i, e in enumerate(b)]

    def _events_of(self, b) -> list[Event]:
        """DoEvents: no input may be null, the rt events must cover the table and every id must
        name an event. Note [partial events]: GE stops at a bad id after doing the ones before
        it; so does this (the caller walks the list and fails at the first bad id)."""
        table = self.event_table
        if b["ids"] is None or b.get("allocator", 0) is None or b.get("rt_events", 0) is None:
            null = [k for k in ("ids", "allocator", "rt_events") if k in b and b[k] is None]
            raise GeFailure(self.st["failed"], f"the kernel's {', '.join(null)} input is null")
        rt = b.get("rt_events")
        if rt is None:
            return table
        rt = len(rt) if isinstance(rt, list) else rt
        if len(table) > rt:
            raise GeFailure(self.st["failed"], f"rt events ({rt}) not enough, at least {len(table)}")
        return table

    def _event(self, table, eid: int) -> Event:
        if not 0 <= eid < len(table):
            raise GeFailure(self.st["failed"], f"invalid logic event id {eid}")
        ev = table[eid]
        return self._resolved(ev) if ev.named else ev

    def _resolved(self, ev: Event) -> Event:
        ev.named = False
        ev.free_by_src = [(self.blocks[x] if isinstance(x, str) else x, v) for x, v in ev.free_by_src]
        ev.return_birth = [self.blocks[x] if isinstance(x, str) else x for x in ev.return_birth]
        return ev

    def op_send_events(self, b):
        table = self._events_of(b)
        alloc = self.allocs[b["allocator"]]
        log = self.world.events
        bits, local, borrow = self.rules.stream_bits, alloc.local, alloc.borrow
        n, own = self.world.stream_num, alloc.stream
        for eid in b["ids"]:
            ev = self._event(table, eid)
            dst = ev.dst
            if not 0 <= dst < bits:
                self._bit(dst)
            if local.entries:
                ev.free_by_src += [(block, block.version) for block in local.walk(own, n, dst, None)]
            if borrow.by_stream:
                ev.return_birth += borrow.get_and_clear(dst)
            log.append({"kind": "rt_record", "event": ev.id})

    def op_wait_events(self, b):
        table = self._events_of(b)
        alloc = self.allocs[b["allocator"]]
        st = self.st
        for eid in b["ids"]:
            ev = self._event(table, eid)
            if ev.free_by_src:
                src, dst = ev.src, ev.dst
                for block, version in ev.free_by_src:
                    if block is not None and version == block.version:
                        block.sync_local(src, dst, st)
                ev.free_by_src = []
            if ev.return_birth:
                for block in ev.return_birth:
                    alloc.birth_recycle(block)
                ev.return_birth = []

    def op_last_wait_events(self, b):
        table = self._events_of(b)
        for eid in b["ids"]:
            self._event(table, eid)
        allocs = self.world.allocators
        for src in allocs:
            for block in src.local_blocks(None, None):
                block.sync_all_local(block.birth.stream, self.st)
            for dst in range(len(allocs)):
                for block in src.borrow.get_and_clear(dst):
                    allocs[block.birth.stream].birth_recycle(block)
        for a in allocs:
            a.pool.recycle()

    # -- tensors -----------------------------------------------------------------------
    def op_access_cross_stream(self, b):
        src = self.tensors[b["tensor"]]
        dst = self.tensors.get(b["as"])
        if dst is None or dst is src:
            dst = self.tensors[b["as"]] = Tensor()
        if src.placement in self.rules.host_not_following:
            dst.share_from(src)
        else:
            self.world.events.append({"kind": "wander", "src": src.stream, "dst": b["dst_stream"]})
            dst.wander_from(src, b["dst_stream"], self.st)
        return dst.addr

    def op_share_tensor_data(self, b):
        """ShareTdToGtd of a TensorData with a manager: the allocator's TiGtdAllocator wraps the
        caller's memory in a TiBlock and takes a block of its pool for it (alloc type
        kTensorDataWrapped); the memory is the caller's, so freeing the block gives no byte back
        to any L1 or L2 pool here (the TiBlock drops its share of the caller's tensor)."""
        alloc = self.allocs[b["allocator"]]
        mem = Mem(b["addr"], b["size"], b["size"], None)
        block = alloc.blocks.acquire(alloc, mem, "wrapped", self.st)
        block.name = b["as"]
        self.tensors[b["as"]] = Tensor(mem.addr, b["size"], self.world.placement, alloc.stream, block)
        return block.oid

    def op_free_tensor(self, b):
        self.tensors[b["tensor"]].free()

    # -- state -------------------------------------------------------------------------
    def state(self) -> dict:
        return {
            "blocks": {n: _block_state(x) for n, x in self.blocks.items()},
            "tensors": {n: {"addr": t.addr, "stream": t.stream, "placement": t.placement, "size": t.size}
                        for n, t in self.tensors.items()},
            "mems": {n: (m.addr if m is not None else None) for n, m in self.mems.items()},
            "mifs": {n: m.render() for n, m in self.mifs.items()},
            "allocators": {str(a.stream): {
                "local_recycle": [{"block": e.block.name, "version": e.version, "sent": bits_of(e.sent)}
                                  for e in a.local.entries.values()],
                "borrow": {str(s): [x.name for x in bs] for s, bs in sorted(a.borrow.by_stream.items()) if bs}}
                for a in self.world.allocators},
            "l1": {n: l1.occupied for n, l1 in self.world.l1s.items()},
            "events_space": {str(e.id): {"free_by_src": [[_name(x), v] for x, v in e.free_by_src],
                                         "return_birth": [_name(x) for x in e.return_birth]}
                             for e in self.event_table},
        }


def _name(x) -> str:
    return x if isinstance(x, str) else (x.name if x is not None else None)


def _block_state(x: Block | None) -> dict:
    if x is None:
        return {"object": None, "null": True, "has_mem": False, "addr": None, "size": 0, "birth_stream": None,
                "version": 0, "counts": [], "mif": []}
    return {"object": x.oid, "null": False, "has_mem": x.mem is not None,
            "addr": x.mem.addr if x.mem is not None else None, "size": x.mem.size if x.mem is not None else 0,
            "birth_stream": x.birth.stream if x.birth is not None else None, "version": x.version,
            "counts": list(x.counts), "mif": x.mif.render()}


def _op_names():
    from engine.runtime.tracefile import OPS
    return OPS


def simulate(trace: Trace, rules, state: str = "all", timeline: list | None = None) -> dict:
    """The steps of `trace`; `timeline` (when given) receives the run's (step, kind, stream,
    object) records: pool acquisitions and recycles, for the picture."""
    runner = Runner(trace, rules, state, timeline is not None)
    with no_gc():
        out = runner.run()
    if timeline is not None:
        timeline.extend(runner.timeline)
    return out
