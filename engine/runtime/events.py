"""Event-sync stages of a multi-stream graph, as GE's bg_event.cc collects them:
CollectAllEventInfos (the model's events, validated per id), the first-sync, last-sync and
last-resource-clean stages. From the CASE form or a GE dump (`stream_id`,
`_send_event_ids`/`_recv_event_ids`, the keys the pack's `runtime.events` names)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from engine.core.errors import Collector, InputError, Loc, Problem
from engine.core.schema import Reader


@dataclass
class EvNode:
    name: str
    stream: int
    send: list[int]
    recv: list[int]
    unknown: bool                   # its graph's GetGraphUnknownFlag
    direct: bool                    # a direct node of the root graph
    has_in: bool = False
    has_out: bool = False


@dataclass
class EvGraph:
    nodes: list[EvNode] = field(default_factory=list)
    stream_num: int = 1
    event_num: int = 0


def collect_model_events(g: EvGraph) -> tuple[list[list[int]], str | None]:
    """CollectAllEventInfos: (src stream, dst stream) per event id, or the failure."""
    infos = [[-1, -1] for _ in range(max(g.event_num, 0))]
    ids: set[int] = set()
    sends: set[int] = set()
    recvs: set[int] = set()
    for n in g.nodes:
        if not n.unknown:
            continue
        for side, lst, seen in (("send", n.send, sends), ("receive", n.recv, recvs)):
            for eid in lst:
                ids.add(eid)
                if eid in seen:
                    return [], f"duplicated {side} event id {eid} on node {n.name}"
                seen.add(eid)
                # Note [negative event id]: GE checks only `id < event_num`; a negative id indexes
                # before its table (undefined), so it is out of range here too
                if not 0 <= eid < g.event_num:
                    return [], f"{side} event id {eid} on node {n.name} out of range {g.event_num}"
                infos[eid][0 if side == "send" else 1] = n.stream
    if len(ids) != g.event_num:
        return [], f"{len(ids)} event id(s) on the nodes, but the model has event_num {g.event_num}"
    for i, (src, dst) in enumerate(infos):
        if src == -1 or dst == -1:
            return [], f"event {i} is not in a pair (no {'sender' if src == -1 else 'receiver'})"
    return infos, None


def stages(g: EvGraph, main: int) -> dict[str, list[list[int]]]:
    first = [[main, n.stream] for n in g.nodes if n.direct and n.stream > main and not n.has_in and not n.recv]
    last = [[n.stream, main] for n in g.nodes if n.direct and n.stream > main and not n.has_out and not n.send]
    clean = [[s, main] for s in range(1, g.stream_num)] if g.stream_num > 1 else []
    return {"first_sync": first, "last_sync": last, "last_resource_clean": clean}


def stage_kernels(model_events: list, staged: dict[str, list[list[int]]], rt) -> tuple[list | None, list[dict]]:
    """CreateConstOfAllEventInfos and the stages' lowering (graph_converter.cc): the GertEvents
    table is the model's events, then each stage's in stage order (None when all are empty: GE
    creates no CreateGertEvents then); a stage's ids follow the ones before it. First sync: one
    send kernel on the main stream over all its ids, then a wait kernel per event on its dst,
    each after the send. Last sync and last resource clean: one wait kernel on the main stream
    over all ids, then a send kernel per event on its src, the wait after each of them."""
    table = [list(e) for e in model_events]
    kernels: list[dict] = []
    main = rt.main_stream
    for stage in rt.stages:
        pairs = staged[stage]
        if not pairs:
            continue
        send, wait = rt.stage_kernels[stage]
        ids = list(range(len(table), len(table) + len(pairs)))
        table.extend(list(p) for p in pairs)
        head = len(kernels)
        if stage == rt.stages[0]:
            kernels.append({"stage": stage, "type": send, "stream": main, "ids": ids, "after": []})
            for eid, (_, dst) in zip(ids, pairs):
                kernels.append({"stage": stage, "type": wait, "stream": dst, "ids": [eid], "after": [head]})
        else:
            kernels.append({"stage": stage, "type": wait, "stream": main, "ids": ids, "after": []})
            for eid, (src, _) in zip(ids, pairs):
                kernels[head]["after"].append(len(kernels))
                kernels.append({"stage": stage, "type": send, "stream": src, "ids": [eid], "after": []})
    return (table or None), kernels


def node_kernels(g: EvGraph, rt) -> list[dict]:
    """LoweringEventSync, per lowered node (those CollectAllEventInfos reads): a wait kernel on
    the node's stream over its recv ids before it, then a send kernel over its send ids after it."""
    send, wait = rt.node_kernels
    out = []
    for n in g.nodes:
        if not n.unknown:
            continue
        if n.recv:
            out.append({"node": n.name, "type": wait, "stream": n.stream, "ids": list(n.recv), "when": "before"})
        if n.send:
            out.append({"node": n.name, "type": send, "stream": n.stream, "ids": list(n.send), "when": "after"})
    return out


def run_events_graph(g: EvGraph, rt) -> dict:
    events, failure = collect_model_events(g)
    out = {"ok": failure is None, "model_events": events}
    if failure is not None:
        out["reason"] = failure
        out.update({s: [] for s in rt.stages})
        out.update({"gert_events": None, "kernels": [], "node_kernels": []})
        return out
    staged = stages(g, rt.main_stream)
    out.update(staged)
    out["gert_events"], out["kernels"] = stage_kernels(events, staged, rt)
    out["node_kernels"] = node_kernels(g, rt)
    return out


# ---- the CASE form --------------------------------------------------------------------
_EDGE = re.compile(r"^\s*(?P<src>[^\s:]+)(?::(?P<si>-?\d+))?\s*->\s*(?P<dst>[^\s:]+)(?::(?P<di>-?\d+))?\s*$")


def _ids(r: Reader, key: str, what: str, errors: Collector) -> list[int]:
    v = r.get(key, list, [])
    out = []
    for i, x in enumerate(v):
        if isinstance(x, bool) or not isinstance(x, int):
            errors.error(v.item_locs[i], f"{what}: event ids are integers, got {x!r}", "write e.g. [0, 1]")
            continue
        out.append(x)
    return out


def read_events_case(path: str) -> EvGraph:
    from engine.runtime.casefile import read_case_file
    doc = read_case_file(path)
    errors = Collector()
    r = Reader(doc, "events case", errors, doc.loc)
    unknown = r.get("graph_unknown", bool, True)
    g = EvGraph(stream_num=r.get("stream_num", int, 1, required=True), event_num=r.get("event_num", int, 0, required=True))
    nm = r.get("nodes", dict, {}, required=True)
    edges = r.get("edges", list, [])
    r.done()
    nr = Reader(nm, "nodes", errors, r.loc)
    by_name: dict[str, EvNode] = {}
    for name in list(nm):
        e = Reader(nr.get(name, dict, {}), f"node '{name}'", errors, nr.key_loc(name))
        e.get("type", str, "")
        stream = e.get("stream", int, 0)
        send = _ids(e, "send", f"node '{name}': send", errors)
        recv = _ids(e, "recv", f"node '{name}': recv", errors)
        e.get("attached_stream", int)
        e.done()
        node = EvNode(str(name), int(stream), send, recv, bool(unknown), True)
        by_name[str(name)] = node
        g.nodes.append(node)
    nr.done()
    for i, text in enumerate(edges):
        loc = edges.item_locs[i]
        m = _EDGE.match(text) if isinstance(text, str) else None
        if m is None:
            errors.error(loc, f"bad edge {text!r}", "write \"A:0 -> B:1\" (a control edge: \"A -> B\")")
            continue
        for end in ("src", "dst"):
            if m.group(end) not in by_name:
                errors.error(loc, f"edge names unknown node '{m.group(end)}'", "declare it under `nodes:`")
        if m.group("src") in by_name and m.group("dst") in by_name:
            by_name[m.group("src")].has_out = True
            by_name[m.group("dst")].has_in = True
    errors.check()
    return g


def run_events(g: EvGraph, rt) -> dict:
    return run_events_graph(g, rt)


# ---- a GE dump --------------------------------------------------------------------------
def dump_events(path: str, pack, stream_num: int | None, event_num: int | None) -> dict:
    from engine.core.attrs import attr_value
    from engine.core.io import load_graph

    rt = pack.configs["runtime"]
    ev = rt.events
    model, _ = load_graph(path, pack)
    g = EvGraph()
    streams = {0}
    ids: set[int] = set()
    for node in model.all_nodes():
        flag = attr_value(node.graph.attr(ev["unknown_flag_attr"]))
        send = _int_list(attr_value(node.attr(ev["send_attr"])), node, ev["send_attr"], path)
        recv = _int_list(attr_value(node.attr(ev["recv_attr"])), node, ev["recv_attr"], path)
        n = EvNode(node.name, int(node.op.stream_id), send, recv, bool(flag), node.graph.is_root,
                   bool(node.in_producers() or node.in_ctrl), bool(node.has_data_consumers() or node.out_ctrl))
        streams.add(n.stream)
        if n.unknown:
            ids.update(send + recv)
        g.nodes.append(n)
    # Note [dump counts]: the model's reusable stream and event counts (ModelDesc) are model
    # attributes when the dump carries them; else the streams used and the event ids found
    g.stream_num = stream_num if stream_num is not None else _model_int(model, ev["stream_num_attr"], max(streams) + 1)
    g.event_num = event_num if event_num is not None else _model_int(model, ev["event_num_attr"], len(ids))
    out = run_events_graph(g, rt)
    return {"graph": str(path), "stream_num": g.stream_num, "event_num": g.event_num, **out}


def _int_list(v, node, key: str, path: str) -> list[int]:
    if v is None:
        return []
    if not isinstance(v, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        raise InputError(Problem(Loc(str(path)), f"node '{node.name}': attribute {key} is not a list of integers",
                                 "GE writes event ids as a list_int attribute"))
    return list(v)


def _model_int(model, key: str, default: int) -> int:
    from engine.core.attrs import attr_value
    attrs = model.proto.attr
    if key in attrs and isinstance(attr_value(attrs[key]), int):
        return int(attr_value(attrs[key]))
    return default
