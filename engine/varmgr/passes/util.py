"""Small graph edits the variable passes share."""
from __future__ import annotations

from dataclasses import dataclass, field

from engine.core.graph import Graph, Node
from engine.proto import ge_ir_pb2 as pb
from engine.core.surgery import new_node


def make_op(name: str, type_: str, inputs: list[pb.TensorDescriptor],
            outputs: list[pb.TensorDescriptor]) -> pb.OpDef:
    op = pb.OpDef(name=name, type=type_)
    for td in inputs:
        op.input_desc.add().CopyFrom(td)
    for td in outputs:
        op.output_desc.add().CopyFrom(td)
    return op


def add_node(graph: Graph, op: pb.OpDef, after: Node | None) -> Node:
    """A new node right after `after` (GE InsertNode) or at the end."""
    node = new_node(graph, op, after)
    node.ensure_inputs(len(op.input_desc))
    node.ensure_outputs(len(op.output_desc))
    return node


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
