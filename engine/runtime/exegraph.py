"""A small execute graph (GE's ExecuteGraph / FastNode): nodes with indexed data inputs,
fan-out lists per output, control edges, attributes and subgraphs, and GE's edits on it
(InsertNodeAfter, InsertNodeBefore, UnlinkAll) with GE's side effects on control edges."""
from __future__ import annotations

import heapq
from typing import Any


class XNode:
    __slots__ = ("name", "type", "graph", "ins", "outs", "in_ctrl", "out_ctrl", "attrs", "subgraphs", "seq", "alive")

    def __init__(self, graph: "XGraph", name: str, type_: str, n_in: int, n_out: int, seq: int):
        self.name = name
        self.type = type_
        self.graph = graph
        self.ins: list[tuple[XNode, int] | None] = [None] * n_in
        self.outs: list[list[tuple[XNode, int]]] = [[] for _ in range(n_out)]
        self.in_ctrl: dict[XNode, None] = {}        # ordered sets
        self.out_ctrl: dict[XNode, None] = {}
        self.attrs: dict[str, Any] = {}
        self.subgraphs: list[tuple[str, XGraph]] = []
        self.seq = seq
        self.alive = True

    def __repr__(self) -> str:
        return f"<{self.type} {self.name}>"

    def append_outputs(self, n: int) -> int:
        start = len(self.outs)
        self.outs.extend([] for _ in range(n))
        return start

    def in_nodes(self) -> list["XNode"]:
        return [e[0] for e in self.ins if e is not None] + list(self.in_ctrl)

    def out_nodes(self) -> list["XNode"]:
        return [d for o in self.outs for d, _ in o] + list(self.out_ctrl)


class XGraph:
    __slots__ = ("name", "parent", "nodes", "inner_data", "counter")

    def __init__(self, name: str, parent: XNode | None, counter: list[int]):
        self.name = name
        self.parent = parent
        self.nodes: list[XNode] = []
        self.inner_data: dict[int, XNode] = {}      # kInnerDataNodes: parent input index → InnerData
        self.counter = counter                      # shared by a whole build: creation sequence

    @property
    def parent_graph(self) -> "XGraph | None":
        return self.parent.graph if self.parent is not None else None

    def add_node(self, name: str, type_: str, n_in: int, n_out: int) -> XNode:
        self.counter[0] += 1
        node = XNode(self, name, type_, n_in, n_out, self.counter[0])
        self.nodes.append(node)
        return node

    def live_nodes(self) -> list[XNode]:
        return [n for n in self.nodes if n.alive]

    def first_of_type(self, type_: str) -> XNode | None:
        return next((n for n in self.nodes if n.alive and n.type == type_), None)


# ---- edges ----------------------------------------------------------------------------
def add_edge(src: XNode, si: int, dst: XNode, di: int) -> None:
    while di >= len(dst.ins):
        dst.ins.append(None)
    if dst.ins[di] is not None:
        remove_in_edge(dst, di)
    dst.ins[di] = (src, si)
    src.outs[si].append((dst, di))


def remove_in_edge(dst: XNode, di: int) -> None:
    e = dst.ins[di]
    if e is None:
        return
    src, si = e
    src.outs[si].remove((dst, di))
    dst.ins[di] = None


def add_ctrl(src: XNode, dst: XNode) -> None:
    if src is dst:
        return
    src.out_ctrl[dst] = None
    dst.in_ctrl[src] = None


def remove_ctrl(src: XNode, dst: XNode) -> None:
    src.out_ctrl.pop(dst, None)
    dst.in_ctrl.pop(src, None)


def unlink_all(node: XNode) -> None:
    """FastNodeUtils::UnlinkAll."""
    for di in range(len(node.ins)):
        remove_in_edge(node, di)
    for o in node.outs:
        for dst, di in list(o):
            remove_in_edge(dst, di)
    for s in list(node.in_ctrl):
        remove_ctrl(s, node)
    for d in list(node.out_ctrl):
        remove_ctrl(node, d)


def remove_node(node: XNode) -> None:
    unlink_all(node)
    node.alive = False


def insert_after(src: XNode, si: int, dsts: list[tuple[XNode, int]], node: XNode, i: int, o: int) -> None:
    """ExecuteGraphUtils::InsertNodeAfter. Note [moved control edges]: for each destination GE
    also removes every out-control edge of `src` and adds `node` → destination instead."""
    add_edge(src, si, node, i)
    for dst, di in dsts:
        remove_in_edge(dst, di)
        add_edge(node, o, dst, di)
        for c in list(src.out_ctrl):
            remove_ctrl(src, c)
            add_ctrl(node, dst)


def insert_before(dst: XNode, di: int, node: XNode, i: int, o: int) -> None:
    """ExecuteGraphUtils::InsertNodeBefore: the in-control edges of `dst` move to `node`."""
    e = dst.ins[di]
    if e is None:
        raise ValueError(f"{dst.name}:{di} has no input edge")
    src, si = e
    remove_in_edge(dst, di)
    add_edge(src, si, node, i)
    add_edge(node, o, dst, di)
    for c in list(dst.in_ctrl):
        remove_ctrl(c, dst)
        add_ctrl(c, node)


# ---- order and records ----------------------------------------------------------------
def topo_order(graph: XGraph) -> list[XNode]:
    """A topological order of the live nodes (data and control edges inside the graph),
    ties broken by creation order. Note [sorted order]: GE sorts branch subgraphs
    (SortAllSubgraphs); its exact tie-break is its own, ours is creation order."""
    nodes = graph.live_nodes()
    indeg = {n: 0 for n in nodes}
    for n in nodes:
        for p in n.in_nodes():
            if p in indeg:
                indeg[n] += 1
    heap = [(n.seq, n) for n in nodes if indeg[n] == 0]
    heapq.heapify(heap)
    out = []
    while heap:
        _, n = heapq.heappop(heap)
        out.append(n)
        for d in n.out_nodes():
            if d in indeg:
                indeg[d] -= 1
                if indeg[d] == 0:
                    heapq.heappush(heap, (d.seq, d))
    if len(out) < len(nodes):                # a cycle: keep the rest in creation order
        seen = set(out)
        out += [n for n in nodes if n not in seen]
    return out


def ref(node: XNode, idx: int) -> str:
    return node.name if idx == 0 else f"{node.name}:{idx}"


def node_record(node: XNode, sorted_graphs: bool = True) -> dict:
    rec = {"name": node.name, "type": node.type,
           "inputs": [ref(*e) if e is not None else None for e in node.ins],
           "ctrl_inputs": [c.name for c in node.in_ctrl],
           "attrs": dict(sorted(node.attrs.items())),
           "subgraphs": [{"name": name, "nodes": graph_records(g, sort=sorted_graphs and k > 0)}
                         for k, (name, g) in enumerate(node.subgraphs)]}
    return rec


def graph_records(graph: XGraph, sort: bool = True) -> list[dict]:
    nodes = topo_order(graph) if sort else graph.live_nodes()
    return [node_record(n) for n in nodes]
