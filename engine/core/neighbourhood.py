"""A node's bounded surroundings, as plain data: what the report draws around an
inserted node, captured when the pass records it and again from the final graph.

`capture(node)` is O(1) per node whatever the fan-out: at most MAX_PEERS consumers
and control neighbours per side and MAX_SIBLINGS other consumers of each producer
are kept, and `omitted` counts the rest.
"""
from __future__ import annotations

from engine.core.graph import Node

MAX_PEERS = 8          # consumers / control neighbours drawn per side
MAX_SIBLINGS = 3       # other consumers of a producer, for context
CTRL = -1              # port index of a control edge (GE's "src:-1")


def capture(node: Node) -> dict:
    """{"nodes": [[name, type], ...] (0 = the node), "edges": [[src, out, dst, in]], "omitted": k}."""
    nodes: list[list[str]] = []
    index: dict[Node, int] = {}
    edges: list[list[int]] = []
    omitted = 0

    def add(n: Node) -> int:
        if n not in index:
            index[n] = len(nodes)
            nodes.append([n.name, n.type])
        return index[n]

    add(node)
    for a in node.ins:
        if a.peer is None:
            continue
        p = add(a.peer.node)
        edges.append([p, a.peer.idx, 0, a.idx])
        peers = a.peer.peers          # Note [bounded capture]: look at a few, count the rest (huge fan-outs)
        others = [c for c in peers[:MAX_SIBLINGS + 1] if c.node is not node][:MAX_SIBLINGS]
        for c in others:
            edges.append([p, a.peer.idx, add(c.node), c.idx])
        omitted += max(0, len(peers) - 1 - len(others))
    for o in node.outs:
        for c in o.peers[:MAX_PEERS]:
            edges.append([0, o.idx, add(c.node), c.idx])
        omitted += max(0, len(o.peers) - MAX_PEERS)
    for p in node.in_ctrl[:MAX_PEERS]:
        edges.append([add(p), CTRL, 0, CTRL])
    for s in node.out_ctrl[:MAX_PEERS]:
        edges.append([0, CTRL, add(s), CTRL])
    omitted += max(0, len(node.in_ctrl) - MAX_PEERS) + max(0, len(node.out_ctrl) - MAX_PEERS)
    return {"nodes": nodes, "edges": edges, "omitted": omitted}
