"""A small model of GE's lowering graph builder (bg::ValueHolder, FrameSelector, LoweringGlobalData)
as far as placed_lowering_result.cc uses it: two graphs (main and init), nodes created in the
current frame, values returned from the init graph through the `Init` node (one output per init
value, the init graph's InnerNetOutput input of the same index), unique holders by key, and the
allocator and stream holders LoweringGlobalData builds. Node types come from
rules/ge/runtime-memory.yaml (`placement.nodes`)."""
from __future__ import annotations


class BuildFailure(Exception):
    """A GE_ASSERT in the lowering: the request's result is null."""


class Graph:
    def __init__(self, name: str) -> None:
        self.name = name
        self.nodes: list[dict] = []
        self.by_name: dict[str, dict] = {}

    def add(self, record: dict) -> None:
        self.nodes.append(record)
        self.by_name[record["name"]] = record


class Builder:
    def __init__(self, rules, node_stream: int = 0) -> None:
        self.rules = rules
        self.t = rules.nodes
        self.graphs = {"main": Graph("main"), "init": Graph("init")}
        self.frame = "main"
        self.counts: dict[str, int] = {}
        self.node_stream = node_stream
        self.unique: dict[str, str | None] = {}
        self.streams: dict[str, list[str]] = {"main": [], "init": []}
        self.init_node: dict | None = None
        self.netoutput: dict | None = None
        self.init_index: dict[str, int] = {}       # init value → Init output index
        self.guarded: set[str] = set()             # values that have a FreeMemory guarder
        self.placement: dict[str, int] = {}        # DevMemValueHolder placements

    # -- nodes ---------------------------------------------------------------------------
    def graph_of(self, ref: str) -> str:
        name = ref.rsplit(":", 1)[0]
        return "main" if name in self.graphs["main"].by_name else "init"

    def node(self, typ: str, inputs, outputs: int = 1, name: str | None = None, attrs=None) -> list[str]:
        for ref in inputs:
            if ref is None:
                raise BuildFailure(f"{typ}: an input holder is null")
            if self.graph_of(ref) != self.frame:
                raise BuildFailure(f"{typ}: input {ref} is on the {self.graph_of(ref)} graph, not {self.frame}")
        if name is None:
            n = self.counts.get(typ, 0)
            self.counts[typ] = n + 1
            name = f"{typ}_{n}"
        record = {"name": name, "type": typ, "inputs": list(inputs), "ctrl_inputs": [], "attrs": dict(attrs or {}),
                  "subgraphs": []}
        self.graphs[self.frame].add(record)
        return [f"{name}:{i}" for i in range(outputs)]

    def one(self, typ: str, inputs, **kw) -> str:
        return self.node(typ, inputs, **kw)[0]

    def const(self, value) -> str:
        return self.one(self.t["const"], [], attrs={"value": value})

    def depend(self, src: str | None, dst: str | None) -> None:
        """ValueHolder::AddDependency: a control edge; a second one is a second edge."""
        if src is None or dst is None:
            raise BuildFailure("AddDependency on a null holder")
        record = self.record(dst)
        record["ctrl_inputs"].append(src.rsplit(":", 1)[0])

    def record(self, ref: str) -> dict:
        name = ref.rsplit(":", 1)[0]
        return self.graphs["main"].by_name.get(name) or self.graphs["init"].by_name[name]

    def guard(self, value: str) -> None:
        self.one(self.t["free"], [value])
        self.guarded.add(value)

    # -- frames ----------------------------------------------------------------------------
    def on_init(self, build):
        """FrameSelector::OnInitRoot: run `build` on the init graph; the values it returns are
        seen from the main graph as outputs of the Init node."""
        saved, self.frame = self.frame, "init"
        try:
            values = build()
        finally:
            self.frame = saved
        return [self.init_return(v) if v is not None else None for v in values]

    def on_main(self, build):
        saved, self.frame = self.frame, "main"
        try:
            return build()
        finally:
            self.frame = saved

    def init_return(self, value: str) -> str:
        """Note [one Init output per value]: an init value returned twice is one Init output (GE's
        ResultGet_HostToHbmOnInit_Const finds the copied result's shape at the index the lowered
        shape already had)."""
        if self.graph_of(value) == "main":
            return value
        k = self.init_index.get(value)
        if k is None:
            if self.init_node is None:
                self.init_node = {"name": self.t["init"], "type": self.t["init"], "inputs": [], "ctrl_inputs": [],
                                  "attrs": {}, "subgraphs": []}
                self.graphs["main"].add(self.init_node)
                self.netoutput = {"name": self.t["inner_netoutput"], "type": self.t["inner_netoutput"], "inputs": [],
                                  "ctrl_inputs": [], "attrs": {}, "subgraphs": []}
                self.graphs["init"].add(self.netoutput)
            k = self.init_index[value] = len(self.netoutput["inputs"])
            self.netoutput["inputs"].append(value)
        out = f"{self.t['init']}:{k}"
        if value in self.placement:
            self.placement[out] = self.placement[value]
        if value in self.guarded:
            self.guarded.add(out)
        return out

    def holder_on_init(self, ref: str | None) -> str | None:
        """bg::HolderOnInit: the init value behind an Init output, else null."""
        if ref is None or self.init_node is None:
            return None
        name, _, idx = ref.rpartition(":")
        if name != self.init_node["name"]:
            return None
        return self.netoutput["inputs"][int(idx)]

    # -- LoweringGlobalData ------------------------------------------------------------
    def uniq(self, key: str, build) -> str | None:
        if key not in self.unique:
            self.unique[key] = build()
        return self.unique[key]

    def split_streams(self, count: int) -> list[str]:
        """LoweringAndSplitRtStreams on the current frame."""
        num = self.const(count)
        feed = self.one(self.t["data"], [], attrs={"index": -1})
        self.streams[self.frame] = self.node(self.t["streams"], [feed, num], outputs=count)
        return self.streams[self.frame]

    def stream_by_id(self, sid: int) -> str | None:
        if self.frame == "init" and sid != 0:
            return None
        streams = self.streams[self.frame]
        return streams[sid] if 0 <= sid < len(streams) else None

    def stream(self) -> str | None:
        """GetStream(): the stream of the compute node being lowered."""
        return self.stream_by_id(self.node_stream if self.frame == "main" else 0)

    def _is_host(self, placement: int) -> bool:
        return placement == self.rules.placements["host"].value

    def _is_device(self, placement: int) -> bool:
        return placement in (self.rules.placements["hbm"].value, self.rules.placements["p2p"].value)

    def l1_allocator(self, placement: int, usage: str) -> str | None:
        key = f"L1-{placement}-{usage}"
        have = self.unique.get(key + ("-Init" if self.frame == "init" else ""))
        if have is not None:
            return have
        made: list[str] = []

        def build():
            p = self.const(placement)
            made.append(self.one(self.t["l1_allocator"], [p]))
            return [made[0], p]
        main = self.on_init(build)[0]
        self.unique[key + "-Init"] = made[0]
        self.unique[key] = main
        return made[0] if self.frame == "init" else main

    def l2_allocators(self, placement: int, usage: str) -> str | None:
        def build():
            def on_init():
                p = self.const(placement)
                l1 = self.l1_allocator(placement, usage)
                num = self.unique.get("ModelStreamNum")
                if num is None:
                    return [None]
                out = self.node(self.t["l2_allocators"], [num, p], outputs=2)[0]
                self.depend(l1, out)
                return [out]
            return self.on_init(on_init)[0]
        return self.uniq(f"L2s-{placement}", build)

    def l2_allocator(self, sid: int, placement: int, usage: str) -> str | None:
        """GetOrCreateL2Allocator."""
        if self.frame == "init":
            return self.init_l2_allocator(placement, usage)
        key = f"L2-{placement}-{sid}" if self._is_device(placement) else f"L2-{placement}"
        if self.unique.get(key) is not None:
            return self.unique[key]

        def on_main():
            if self._is_device(placement):
                def build():
                    l2s = self.l2_allocators(placement, usage)
                    sid_c = self.const(sid)
                    return self.one(self.t["select_l2_allocator"], [sid_c, self.stream_by_id(sid),
                                                                    self.l1_allocator(placement, usage), l2s])
            else:
                def build():
                    return self.one(self.t["host_l2_allocator"], [self.l1_allocator(placement, usage)])
            return self.uniq(key, build)
        out = self.on_main(on_main)
        if self._is_host(placement):
            self.on_init(lambda: [self.init_l2_allocator(placement, usage)])
        self.placement[out] = placement
        return out

    def init_l2_allocator(self, placement: int, usage: str) -> str | None:
        key = f"L2-{placement}-Init"
        if self._is_host(placement):
            out = self.uniq(key, lambda: self.one(self.t["host_l2_allocator"], [self.l1_allocator(placement, usage)]))
        elif self._is_device(placement):
            l2s = self.holder_on_init(self.l2_allocators(placement, usage))
            out = self.uniq(key, lambda: self.node(self.t["init_l2_allocator"], [
                self.l1_allocator(placement, usage), l2s, self.stream_by_id(0)], outputs=2)[0])
        else:
            return None
        self.on_init(lambda: [out])
        self.placement[out] = placement
        return out
