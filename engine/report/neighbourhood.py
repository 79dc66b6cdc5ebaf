"""Neighbourhoods of inserted nodes, for the report's before/after drawings.

`capture(node)` (engine/core/neighbourhood.py) records the inserted node, its
producers, consumers and control neighbours (a few siblings for context), capped
so each record is O(1). `undo(hood, moved)` rebuilds the picture without the node,
and `layout(...)` places a small neighbourhood in layers, left to right.

Note [before as seen]: "after" is the final graph (what `--out` holds). "before"
is the graph as the inserting pass saw it: the neighbourhood captured the moment
the pass recorded the node (RunContext.record), with this one insertion undone as
its record says — data edges through the node are joined producer → consumer, and
the control edges the pass moved onto the node go back to the consumer (moved
in-control) or the producer (moved out-control). So nodes later passes inserted
never appear in it. A record without a capture (built outside a run) falls back
to the final graph.
"""
from __future__ import annotations

from functools import lru_cache

from engine.core.neighbourhood import CTRL, MAX_PEERS, MAX_SIBLINGS, capture  # noqa: F401 (re-exported)


def record_only(producer: str, consumers: list[str], name: str, typ: str, graph=None) -> dict:
    """A neighbourhood from the record alone, when the node is gone from the final graph
    (types of the other nodes from `graph` where they still exist)."""
    nodes = [[name, typ]]
    edges = []
    index: dict[str, int] = {}

    def add(ref: str) -> tuple[int, int]:
        n, _, i = ref.rpartition(":")
        if n not in index:
            index[n] = len(nodes)
            found = graph.find(n) if graph is not None else None
            nodes.append([n, found.type if found is not None else ""])
        return index[n], int(i) if i.lstrip("-").isdigit() else 0

    if producer:
        p, o = add(producer)
        edges.append([p, o, 0, 0])
    for c in consumers:
        d, i = add(c)
        edges.append([0, 0, d, i])
    return {"nodes": nodes, "edges": edges, "omitted": 0}


def undo(hood: dict, moved: list[str]) -> list[list[int]]:
    """The edges of the neighbourhood without node 0 (Note [before from after])."""
    names = [n[0] for n in hood["nodes"]]
    moved_set = set(moved)
    ins = [e for e in hood["edges"] if e[2] == 0 and e[3] != CTRL]
    outs = [e for e in hood["edges"] if e[0] == 0 and e[1] != CTRL]
    out: list[list[int]] = [e for e in hood["edges"] if 0 not in (e[0], e[2])]
    for _, j, d, k in outs:
        src = [e for e in ins if e[3] == j] or (ins if len(ins) == 1 else [])
        for s, o, _, _ in src:
            out.append([s, o, d, k])
    consumers = sorted({e[2] for e in outs})
    producers = sorted({e[0] for e in ins})
    for s, o, d, i in hood["edges"]:
        if o != CTRL:
            continue
        if d == 0 and names[s] in moved_set:
            out += [[s, CTRL, c, CTRL] for c in consumers]
        elif s == 0 and names[d] in moved_set:
            out += [[p, CTRL, d, CTRL] for p in producers]
    seen: set[tuple[int, ...]] = set()
    unique = []
    for e in out:
        if tuple(e) not in seen:
            seen.add(tuple(e))
            unique.append(e)
    return unique


# ---- layout ---------------------------------------------------------------------
NODE_W, NODE_H = 170, 40          # keep in step with reports/report.js
GAP_X, GAP_Y = 60, 14
PAD = 12
PORT_GAP = 16                     # vertical distance between two ports of one side (labels ~11 px high)


def layout(count: int, edges: list[list[int]], skip: int | None = None) -> dict:
    """Layered left-to-right placement: {"w", "h", "pos": [[x, y] or None per node],
    "hs": [height per node], "ports": [{"in": [[port, dy]], "out": [[port, dy]]} per node]}.

    Longest-path layers (edges point right), one barycentre sweep to order each
    layer, layers centred vertically. `skip` leaves a node out (the "before" view).
    Note [ports apart]: each data port a drawing uses gets its own height on its side
    of the node (in ports on the left, out ports on the right, in index order,
    PORT_GAP apart), and a node grows to fit them, so port labels never overlap.
    Neighbourhoods repeat a few shapes, so layouts are memoised by shape.
    """
    return _layout(count, tuple(map(tuple, edges)), skip)


def _ports(count: int, edges: tuple, live: set) -> list[dict]:
    ins: list[set] = [set() for _ in range(count)]
    outs: list[set] = [set() for _ in range(count)]
    for s, o, d, i in edges:
        if s in live and d in live and o >= 0:
            outs[s].add(o)
            ins[d].add(i)
    out = []
    for k in range(count):
        n = max(len(ins[k]), len(outs[k]))
        h = max(NODE_H, PORT_GAP * (n + 1))
        out.append({"h": h, "in": [[p, h * (r + 1) // (len(ins[k]) + 1)] for r, p in enumerate(sorted(ins[k]))],
                    "out": [[p, h * (r + 1) // (len(outs[k]) + 1)] for r, p in enumerate(sorted(outs[k]))]})
    return out


@lru_cache(maxsize=4096)
def _layout(count: int, edges: tuple, skip: int | None) -> dict:
    live = [i for i in range(count) if i != skip]
    succ: dict[int, list[int]] = {i: [] for i in live}
    pred: dict[int, list[int]] = {i: [] for i in live}
    for s, _, d, _ in edges:
        if s in succ and d in succ and s != d and d not in succ[s]:
            succ[s].append(d)
            pred[d].append(s)
    layer = {i: 0 for i in live}
    for _ in range(len(live)):              # Bellman-Ford style; ends early on a DAG
        changed = False
        for s in live:
            for d in succ[s]:
                if layer[d] < layer[s] + 1 and layer[s] + 1 < len(live):
                    layer[d] = layer[s] + 1
                    changed = True
        if not changed:
            break
    columns: dict[int, list[int]] = {}
    for i in live:
        columns.setdefault(layer[i], []).append(i)
    rank: dict[int, float] = {}
    for k in sorted(columns):
        col = columns[k]
        if k > 0:
            key = {i: (sum(rank.get(p, 0) for p in pred[i]) / len(pred[i]) if pred[i] else len(col), i) for i in col}
            col.sort(key=key.__getitem__)
        for r, i in enumerate(col):
            rank[i] = r
    ports = _ports(count, edges, set(live))
    extent = {k: sum(ports[i]["h"] for i in col) + GAP_Y * (len(col) - 1) for k, col in columns.items()}
    tallest = max(extent.values(), default=0)
    height = tallest + 2 * PAD
    pos: list[list[int] | None] = [None] * count
    for k, col in columns.items():
        y = PAD + (tallest - extent[k]) // 2
        for i in col:
            pos[i] = [PAD + k * (NODE_W + GAP_X), y]
            y += ports[i]["h"] + GAP_Y
    width = PAD * 2 + (max(columns, default=0) + 1) * (NODE_W + GAP_X) - GAP_X
    return {"w": width, "h": max(height, NODE_H + 2 * PAD), "pos": pos,
            "hs": [p["h"] for p in ports], "ports": [{"in": p["in"], "out": p["out"]} for p in ports]}
