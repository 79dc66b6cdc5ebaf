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


@dataclass(frozen=True, slots=True)
class Kept:
    """A place where a variable pass decided to change nothing, and the fact that decided it
    (recorded only when asked: `memconflict explain --why-not`). `node` None: the whole graph."""

    node: Node | None
    rule: str             # the pass's rule (its policy entry is the citation)
    test: str             # what the pass tested
    result: str           # the decisive answer
    facts: tuple = ()     # ((label, value), ...)


def keep(kept: list | None, node: Node | None, rule: str, test: str, result: str, *facts) -> None:
    """Record a Kept when a list is given (why-not runs); a no-op otherwise."""
    if kept is not None:
        kept.append(Kept(node, rule, test, result,
                         tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in facts)))
