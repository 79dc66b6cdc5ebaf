"""Graph queries and the change record the variable passes share."""
from __future__ import annotations

from dataclasses import dataclass, field

from engine.core.graph import Node


def data_in_nodes(node: Node) -> list[Node]:
    """In-data producers, one per connected in-anchor (GE GetInDataNodes)."""
    return [a.peer.node for a in node.ins if a.peer is not None]


def out_data_nodes(node: Node) -> list[Node]:
    return [p.node for o in node.outs for p in o.peers]


@dataclass(frozen=True, slots=True)
class Change:
    """One edit a variable pass made, with the rule that made it."""

    kind: str             # "inserted" | "removed" | "replaced" | "updated"
    node: str
    type: str
    graph: str
    rule: str             # e.g. "var/ref-after-writer"
    detail: dict = field(default_factory=dict)
