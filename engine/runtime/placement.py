"""`memconflict runtime placement`: GE's PlacedLoweringResult (runtime/v2/lowering/placement/
placed_lowering_result.cc) on a case — the copy chains between placements (the pack's copy table),
data-dependent requests (BuildTensor), raw tensors, copies built on the init graph, and the order
holders each result carries (spec ge-runtime.md "placement")."""
from __future__ import annotations

from dataclasses import dataclass, field

from engine.core.errors import Collector, Loc, did_you_mean, display_path
from engine.core.schema import Reader
from engine.core.yamlloc import load_yaml
from engine.runtime.lowering import BuildFailure, Builder

UNSET = -1
CALLS = ("GetResult", "GetOutputResult", "GetOutputTensorResult")
RAW = 2       # the raw-tensor column of GE's per-output table (false, true, raw)


@dataclass
class Out:
    """OutputLowerResult."""
    order_holders: list = field(default_factory=list)
    shape: str | None = None
    address: str | None = None
    has_init: bool = False


@dataclass
class Case:
    streams: int | None
    init_streams: int | None
    model_stream_num: int | None
    node_type: str
    node_name: str
    dtype: str
    node_stream: int
    node_outputs: int
    refed_by_ref: bool
    holders: dict
    init_nodes: list
    init_returns: list
    order_holders: list
    outputs: list            # [(shape, address, placement value or UNSET)]
    requests: list           # [(call, index, placement value or UNSET, data_dependent, stream)]


class Placed:
    def __init__(self, case: Case, rules, b: Builder) -> None:
        self.case, self.rules, self.b = case, rules, b
        self.p = {name: pl.value for name, pl in rules.placements.items()}
        self.end = self.p["end"]
        self.table: list[dict] = []
        for shape, address, placement in case.outputs:
            cell: dict = {}
            if address is not None:
                cell[(placement if placement >= 0 else self.end, 0)] = Out(list(case.order_holders), shape, address, True)
            self.table.append(cell)

    def find(self, index: int, placement: int, col: int) -> Out | None:
        """TableDriven2::FindPointer: an entry of the (placement × 3) table, null outside it."""
        if not 0 <= placement <= self.end:
            return None
        return self.table[index].setdefault((placement, col), Out())

    def addr_placement(self, index: int) -> int:
        return self.case.outputs[index][2]

    # -- GE's calls ------------------------------------------------------------------
    def output_tensor_result(self, index: int, placement: int, stream: int):
        dd = placement in {self.p[n] for n in self.rules.host_not_following}
        result = self.output_result(index, placement, stream, dd)
        if result is None or dd:
            return result
        return self.raw_tensor(result, index, placement)

    def output_result(self, index: int, placement: int, stream: int, dd: bool):
        if not 0 <= index < len(self.table):
            return None
        if placement < 0:
            placement = self.addr_placement(index)
        result = self.find(index, placement, int(dd))
        if result is None:
            return None
        if result.has_init:
            return result
        plain = self.no_dd_result(index, placement, stream)
        if plain is None or not dd:
            return plain
        host = self.no_dd_result(index, self.p["host"], 0)
        if host is None:
            return None
        return self.dd_result(index, placement, plain, host)

    def no_dd_result(self, index: int, placement: int, stream: int):
        result = self.find(index, placement, 0)
        if result is None:
            return None
        if result.has_init:
            return result
        return self.create_no_dd(index, placement, stream)

    def create_no_dd(self, index: int, placement: int, stream: int):
        if index >= self.case.node_outputs:       # the node has no output desc there
            return None
        src_pl = self.addr_placement(index)
        source = self.find(index, src_pl, 0)
        target = self.find(index, placement, 0)
        if source is None or target is None:
            return None
        copy = self._copy(src_pl, placement)
        if copy is None:
            return None
        b = self.b
        shape_i, addr_i = b.holder_on_init(source.shape), b.holder_on_init(source.address)
        orders_i = self._orders_on_init(shape_i, addr_i, source.order_holders)
        try:
            if orders_i is not None:
                made = Out(orders_i, shape_i, addr_i, True)

                def build():
                    dst = Out()
                    copy(made, placement, 0, dst)
                    return [dst.shape, dst.address]
                shape, address = b.on_init(build)
                target.shape, target.address = shape, address
                target.order_holders = list(source.order_holders)
            else:
                copy(source, placement, stream, target)
        except BuildFailure:
            return None
        target.has_init = True
        return target

    def _orders_on_init(self, shape_i, addr_i, orders) -> list | None:
        """ShouldGenOnInit: shape and address come from the init graph and every order holder that
        is an Init output maps to the init graph (those are the init copy's order holders)."""
        if shape_i is None or addr_i is None:
            return None
        out = []
        for order in orders:
            if self.b.record(order)["type"] == self.rules.nodes["init"]:
                on_init = self.b.holder_on_init(order)
                if on_init is None:
                    return None
                out.append(on_init)
        return out

    def dd_result(self, index: int, placement: int, plain: Out, host: Out):
        tensor = self.find(index, placement, 1)
        if tensor is None:
            return None
        tensor.address = plain.address
        shape = self.case.outputs[index][0]
        try:
            tensor.shape = self._build_tensor(index, self.p["host"], shape, host.address,
                                              host.address in self.b.guarded, "build_tensor")
        except BuildFailure:
            return None
        tensor.order_holders = list(host.order_holders)
        seen = set(host.order_holders)
        tensor.order_holders += [h for h in plain.order_holders if h not in seen]
        tensor.has_init = True
        return tensor

    def raw_tensor(self, result: Out, index: int, placement: int):
        tensor = self.find(index, placement, RAW)
        if tensor is None:
            return None
        if tensor.has_init:
            return tensor
        tensor.address = result.address
        try:
            tensor.shape = self._build_tensor(index, placement, self.case.outputs[index][0], result.address,
                                              result.address in self.b.guarded, "build_ref_tensor")
        except BuildFailure:
            return None
        tensor.order_holders = list(result.order_holders)
        tensor.has_init = True
        return tensor

    def _build_tensor(self, index, placement, shape, address, guarded: bool, kind: str) -> str:
        """bg::BuildTensor (a BuildTensor node guarded by FreeTensorMemory), BuildTensorWithoutGuarder
        (the node alone) or BuildRefTensor; the Const is the BuildTensorAttr."""
        b, t = self.b, self.rules.nodes
        if index >= self.case.node_outputs:
            raise BuildFailure(f"the node has no output {index} (CreateBuildTensorAttr)")
        attr = b.const({"placement": self._pname(placement), "dtype": self.case.dtype, "output_index": index})
        if kind == "build_ref_tensor" and guarded:
            return b.one(t["build_ref_tensor"], [shape, address, attr])
        tensor = b.one(t["build_tensor"], [shape, address, attr])
        if kind == "build_tensor" and guarded:
            b.one(t["free_tensor"], [tensor])
            b.guarded.add(tensor)
        return tensor

    def _pname(self, value: int) -> str:
        return next((n for n, v in self.p.items() if v == value), str(value))

    # -- the generators of the copy table -----------------------------------------
    def _copy(self, src: int, dst: int):
        """PlacedLoweringRegistry's generator for the node type, else the copy table's."""
        kind = self.rules.registry.get(self.case.node_type)
        if kind is None:
            entry = self.rules.copy_table.get((self._pname(src), self._pname(dst)))
            if entry is None:
                return None
            kind = entry[0]
        return getattr(self, "_gen_" + kind)

    def _size(self, dt: str, src: Out, unaligned: bool = False) -> str:
        b, t = self.b, self.rules.nodes
        if self.case.dtype == self.rules.string_dtype:
            return b.one(t["string_size"], [dt, src.shape, src.address, b.stream()])
        return b.one(t["unaligned_size" if unaligned else "size"], [dt, src.shape])

    def _gen_host_to_device(self, src: Out, placement: int, stream: int, dst: Out) -> None:
        b, t = self.b, self.rules.nodes
        alloc = b.l2_allocator(stream, placement, self.rules.usages["output"])
        if alloc is None:
            raise BuildFailure("no L2 allocator")
        dt = b.const(self.case.dtype)
        size = self._size(dt, src, unaligned=True)
        addr = b.one(t["h2d"], [b.stream_by_id(stream), alloc, src.address, size, src.shape, dt])
        b.guard(addr)
        for h in src.order_holders:
            b.depend(h, addr)
        dst.shape, dst.address = src.shape, addr
        b.placement[addr] = placement
        dst.order_holders.append(addr)

    def _gen_device_to_host(self, src: Out, placement: int, stream: int, dst: Out) -> None:
        b, t, sid = self.b, self.rules.nodes, self.case.node_stream
        src_stream = b.stream_by_id(sid)
        sync = b.uniq(self.rules.sync_stream_key + self.case.node_name,
                      lambda: b.one(t["sync_stream"], [src_stream], outputs=1))
        for h in src.order_holders:
            b.depend(h, sync)
        dt = b.const(self.case.dtype)
        size = self._size(dt, src)
        alloc = b.l2_allocator(sid, self.p["host"], self.rules.usages["workspace"])
        addr = b.one(t["d2h"], [src.address, size, alloc])
        b.guard(addr)
        b.depend(sync, addr)
        dst.order_holders = [addr]
        dst.shape, dst.address = src.shape, addr
        b.placement[addr] = self.p["host"]

    def _gen_make_sure_at_host(self, src: Out, placement: int, stream: int, dst: Out) -> None:
        b, t, sid = self.b, self.rules.nodes, self.case.node_stream
        dt = b.const(self.case.dtype)
        size = self._size(dt, src)
        need_sync = self.case.node_type != t["data"] or self.case.refed_by_ref
        inputs = [b.stream(), b.l2_allocator(sid, self.p["host"], self.rules.usages["workspace"]), src.address, size]
        addr = b.one(t["at_host" if need_sync else "at_host_without_sync"], inputs)
        for h in src.order_holders:
            b.depend(h, addr)
        dst.shape, dst.address = src.shape, addr
        b.placement[addr] = self.p["host"]
        dst.order_holders.append(addr)

    def _gen_make_sure_at_device(self, src: Out, placement: int, stream: int, dst: Out) -> None:
        b, t = self.b, self.rules.nodes
        alloc = b.l2_allocator(self.case.node_stream if b.frame == "main" else 0, placement,
                               self.rules.usages["output"])
        if alloc is None:
            raise BuildFailure("no allocator")
        dt = b.const(self.case.dtype)
        size = self._size(dt, src)
        addr = b.one(t["at_device"], [b.stream(), alloc, src.address, size, src.shape, dt])
        b.guard(addr)
        dst.shape, dst.order_holders, dst.address = src.shape, list(src.order_holders), addr
        b.placement[addr] = placement


# -- running a case -------------------------------------------------------------------------
def run_case(case: Case, rules) -> dict:
    b = Builder(rules, case.node_stream)
    names: dict[str, str] = {}
    if case.init_streams:
        b.on_init(lambda: (b.split_streams(case.init_streams), [])[1])
    if case.model_stream_num is not None:
        b.on_init(lambda: (b.unique.__setitem__("ModelStreamNum", b.const(case.model_stream_num)), [])[1])
    if case.streams:
        b.split_streams(case.streams)
    for name, h in case.holders.items():
        ref = b.one(h["type"], [], name=name, attrs=h.get("attrs", {}))
        names[name] = ref
        if h.get("guarder"):
            b.guarded.add(ref)
    init_of = {}

    def init_nodes():
        local: dict[str, str] = {}
        for n in case.init_nodes:
            refs = b.node(n["type"], [_ref(x, local) for x in n.get("inputs", [])], outputs=n.get("outputs", 1),
                          name=n["name"], attrs=n.get("attrs"))
            local[n["name"]] = refs[0]
            for c in n.get("ctrl_inputs", []):
                b.depend(_ref(c, local), refs[0])
        return [_ref(r["from"], local) for r in case.init_returns]
    if case.init_nodes or case.init_returns:
        for r, ref in zip(case.init_returns, b.on_init(init_nodes)):
            init_of[r["as"]] = names[r["as"]] = ref
    resolved = Case(**{**case.__dict__,
                       "order_holders": [names[n] for n in case.order_holders],
                       "outputs": [(_ref(s, names), _ref(a, names) if a is not None else None, p)
                                   for s, a, p in case.outputs]})
    placed = Placed(resolved, rules, b)
    results = []
    for call, index, placement, dd, stream in case.requests:
        if call == "GetResult":
            results.append({"call": call, "null": False, "order_holders": list(resolved.order_holders),
                            "out_shapes": [s for s, _, _ in resolved.outputs],
                            "out_addrs": [a for _, a, _ in resolved.outputs]})
            continue
        if call == "GetOutputTensorResult":
            out = placed.output_tensor_result(index, placement, stream)
        else:
            out = placed.output_result(index, placement, stream, dd)
        record = {"call": call, "index": index, "null": out is None}
        if out is not None:
            record.update({"has_init": out.has_init, "shape": out.shape, "address": out.address,
                           "order_holders": list(out.order_holders),
                           "placement": placed._pname(b.placement.get(out.address, UNSET))
                           if out.address in b.placement else None})
        results.append(record)
    return {"env": {"streams": b.streams["main"], "init_streams": b.streams["init"], "init_of": init_of},
            "results": results,
            "graphs": {g: {"nodes": graph.nodes} for g, graph in b.graphs.items()}}


def _ref(value: str, names: dict) -> str:
    if value in names:
        return names[value]
    if ":" in value:
        base, _, idx = value.rpartition(":")
        if base in names:
            return f"{names[base].rsplit(':', 1)[0]}:{idx}"
    return value


# -- reading a case ---------------------------------------------------------------------------
def case_from_flags(src, dst, data_dependent: bool, dtype, rules) -> Case:
    errors = Collector()
    for flag, value in (("--from", src), ("--to", dst)):
        if value is None:
            errors.error(Loc(flag), f"{flag} is required without CASE.json", "give --from P --to P or a case file")
        elif value not in rules.placements:
            errors.error(Loc(flag), f"unknown placement '{value}'", did_you_mean(value, rules.placements, "placements"))
    errors.check()
    data = rules.nodes["data"]
    return Case(1, 1, 1, "node", "node", dtype or "float", 0, 1, False,
                {"order": {"type": data}, "shape": {"type": data}, "address": {"type": data}}, [], [],
                ["order"], [("shape", "address", rules.placements[src].value)],
                [("GetOutputResult", 0, rules.placements[dst].value, data_dependent, 0)])


def load_case(path: str, rules) -> Case:
    doc = load_yaml(path)
    file = display_path(path)
    errors = Collector()
    top = Reader(doc, "placement case", errors, Loc(file, 1, 1))
    gd = Reader(top.get("global_data", dict, {}), "global_data", errors, top.loc)
    streams = gd.get("streams", int)
    init_streams = gd.get("init_streams", int)
    model_num = gd.get("model_stream_num", int)
    # Note [root model]: GE's tests build a GlobalDataFaker(root_model) for the cases whose copies
    # need device allocators; what it sets up that matters here is one main stream, one init
    # stream and the model's stream count (kGlobalDataModelStreamNum, which CreateL2Allocators
    # reads). `root_model: true` means those three, each unless given.
    if gd.get("root_model", (bool, dict, str), False):
        streams = 1 if streams is None else streams
        init_streams = 1 if init_streams is None else init_streams
        model_num = streams if model_num is None else model_num
    gd.done()
    nd = Reader(top.get("node", dict, {}, required=True), "node", errors, top.loc)
    node_type = str(nd.get("type", str, "node", required=True))
    node_name = str(nd.get("name", str, node_type))
    dtype = str(nd.get("dtype", str, "float"))
    node_outputs = nd.get("outputs", (int, list), None)      # a count, or one entry per output
    node_outputs = len(node_outputs) if isinstance(node_outputs, list) else node_outputs
    node_stream = nd.get("stream", int, 0)
    refed = nd.get("refed_by_ref", bool, False)
    nd.done()
    holders: dict = {}
    hmap = top.get("holders", dict, {})
    for name, h in (hmap or {}).items():
        hr = Reader(h, f"holder '{name}'", errors, getattr(hmap, "key_locs", {}).get(name, top.loc))
        holders[str(name)] = {"type": str(hr.get("type", str, rules.nodes["data"])),
                              "guarder": hr.get("guarder", bool, False), "attrs": hr.get("attrs", dict, {}) or {}}
        hr.get("devmem", bool, False)
        hr.done()
    oi = Reader(top.get("on_init", dict, {}), "on_init", errors, top.loc)
    init_nodes, made = [], set()
    for n in oi.get("nodes", list, []) or []:
        node = _init_node(n, errors, oi.loc)
        for ref in node["inputs"] + node["ctrl_inputs"]:
            _check_name(ref, made, errors, getattr(n, "loc", oi.loc), "init node")
        made.add(node["name"])
        init_nodes.append(node)
    init_returns = []
    for r in oi.get("returns", list, []) or []:
        rr = Reader(r, "on_init return", errors, getattr(r, "loc", oi.loc))
        init_returns.append({"as": str(rr.get("as", str, "", required=True)),
                             "from": str(rr.get("from", str, "", required=True))})
        _check_name(init_returns[-1]["from"], made, errors, rr.value_loc("from"), "init node")
        rr.done()
    oi.done()
    known = set(holders) | {r["as"] for r in init_returns}
    lr = Reader(top.get("lower_result", dict, {}, required=True), "lower_result", errors, top.loc)
    orders = lr.get("order_holders", list, []) or []
    for i, name in enumerate(orders):
        _check_name(name, known, errors, _item_loc(orders, i, lr.loc))
    outputs = []
    outs = lr.get("outputs", list, []) or []
    for i, o in enumerate(outs):
        orr = Reader(o, f"output {i}", errors, _item_loc(outs, i, lr.loc))
        shape = orr.get("shape", str, "", required=True)
        address = orr.get("address", (str, type(None)), None, required=True)
        pl = orr.get("placement", str, None)
        for key, v in (("shape", shape), ("address", address)):
            if v:
                _check_name(v, known, errors, orr.value_loc(key))
        # Note [default placement]: a ValueHolder's placement starts at 0 (kOnDeviceHbm), not -1
        outputs.append((str(shape), None if address is None else str(address),
                        _placement(pl if pl is not None else "hbm", rules, errors, orr.value_loc("placement"))))
        orr.done()
    lr.done()
    requests = []
    reqs = top.get("requests", list, [], required=True) or []
    for i, q in enumerate(reqs):
        qr = Reader(q, f"request {i}", errors, _item_loc(reqs, i, top.loc))
        call = qr.get("call", str, "GetOutputResult", required=True)
        if call not in CALLS:
            errors.error(qr.value_loc("call"), f"unknown call '{call}'", did_you_mean(str(call), CALLS, "calls"))
        index = qr.get("index", int, 0)
        pl = qr.get("placement", (str, type(None)), None)
        requests.append((str(call), index, _placement(pl, rules, errors, qr.value_loc("placement")),
                         qr.get("data_dependent", bool, False), qr.get("stream", int, 0)))
        qr.done()
    top.done()
    errors.check()
    if node_outputs is None:
        node_outputs = len(outputs)
    return Case(streams, init_streams, model_num, node_type, node_name, dtype, node_stream, node_outputs, refed, holders,
                init_nodes, init_returns, [str(x) for x in orders], outputs, requests)


def _item_loc(lst, i: int, fallback: Loc) -> Loc:
    locs = getattr(lst, "item_locs", None)
    return locs[i] if locs and i < len(locs) else fallback


def _check_name(name, known: set, errors: Collector, loc: Loc, what: str = "holder") -> None:
    base = str(name).rpartition(":")[0] if ":" in str(name) else str(name)
    if not isinstance(name, str) or base not in known:
        hint = (did_you_mean(str(name), known, what + "s") if known else
                "declare it under holders: or on_init.returns" if what == "holder" else
                "an init node may only use the init nodes listed before it")
        errors.error(getattr(name, "loc", loc), f"unknown {what} '{name}'", hint)


def _placement(name, rules, errors: Collector, loc: Loc) -> int:
    if name is None:
        return UNSET
    if name not in rules.placements:
        errors.error(getattr(name, "loc", loc), f"unknown placement '{name}'",
                     did_you_mean(str(name), rules.placements, "placements"))
        return UNSET
    return rules.placements[name].value


def _init_node(n, errors: Collector, fallback: Loc) -> dict:
    r = Reader(n, "on_init node", errors, getattr(n, "loc", fallback))
    out = {"name": str(r.get("name", str, "", required=True)), "type": str(r.get("type", str, "", required=True)),
           "inputs": [str(x) for x in (r.get("inputs", list, []) or [])], "outputs": r.get("outputs", int, 1),
           "ctrl_inputs": [str(x) for x in (r.get("ctrl_inputs", list, []) or [])],
           "attrs": r.get("attrs", dict, {}) or {}}
    r.get("subgraphs", list, [])
    r.done()
    return out
