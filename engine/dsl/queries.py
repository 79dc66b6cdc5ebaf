"""Graph queries for rewrite rules, beyond the generic table in primitives.py.

Each is a GE utility that walks the graph (shape status through subgraphs,
reference chains); none names an op type: the reference relation comes from
the pack's `symbols.ref_from_input` rules.
"""
from __future__ import annotations

from engine.core.graph import Graph, InAnchor, Node, OutAnchor, op_list
from engine.core.surgery import predecessors, successors
from engine.dsl.library import PrimSpec, register
from engine.proto import ge_ir_pb2 as pb

UNKNOWN_DIMS = (-1, -2)          # GE UNKNOWN_DIM, UNKNOWN_DIM_NUM


def _node(x) -> Node | None:
    if x is None:
        return None
    return x if isinstance(x, Node) else getattr(x, "node", None)


def unknown_shape(node) -> bool:
    """NodeUtils::GetNodeUnknownShapeStatus: a descriptor with an unknown dim, or
    such a node in one of its subgraphs (recursively)."""
    n = _node(node)
    if n is None:
        return False
    for d in list(n.descs()) + list(n.descs(True)):
        if any(x in UNKNOWN_DIMS for x in d.shape.dim):
            return True
    return any(unknown_shape_graph(g) for g in n.subgraphs if g is not None)


def unknown_shape_graph(graph: Graph | None) -> bool:
    """GraphUtils::IsUnknownShapeGraph: some direct node has an unknown shape status."""
    return graph is not None and any(unknown_shape(n) for n in graph.nodes())


def ref_chain_forward(sym, anchor: InAnchor | None) -> list[InAnchor]:
    """MemLayoutConflictUtil::TraverseRefChain order: `anchor`, then the consumers of
    every output of its node that references that input, and so on (depth first)."""
    out: list[InAnchor] = []
    if anchor is None:
        return out
    stack, seen = [anchor], set()
    while stack:
        a = stack.pop()
        if a in seen:
            continue
        seen.add(a)
        out.append(a)
        for o in a.node.outs:
            if sym.ref_from_input(o) == a.idx:
                stack.extend(o.peers)
    return out


def ref_chain_reverse(sym, anchor: OutAnchor | None) -> list[OutAnchor]:
    """MemLayoutConflictUtil::TraverseRefChainReverse: `anchor`, then the producer of
    the input it references, and so on."""
    out: list[OutAnchor] = []
    seen = set()
    a = anchor
    while a is not None and a not in seen:
        seen.add(a)
        out.append(a)
        k = sym.ref_from_input(a)
        if k is None or not 0 <= k < len(a.node.ins):
            break
        a = a.node.ins[k].peer
    return out


def dtype(anchor) -> str | None:
    d = None if anchor is None else anchor.desc
    if d is None or d.dtype not in pb.DataType.values():
        return None                 # no descriptor, or a dtype number the proto does not name
    return pb.DataType.Name(d.dtype)


def op_field(node, field: str) -> list:
    n = _node(node)
    if n is None or field not in ("input_i", "output_i", "is_input_const"):
        return []
    return op_list(n, field)        # the lean op has them (Note [lean offset writes])


def in_nodes(node) -> list[Node]:
    """GetInAllNodes: data producers (input order) then control predecessors."""
    n = _node(node)
    if n is None:
        return []
    return predecessors(n)


def out_nodes(node) -> list[Node]:
    """GetOutAllNodes: data consumers (output, then peer order) then control successors."""
    n = _node(node)
    if n is None:
        return []
    return successors(n)


def _registry_atomic(ctx, node) -> bool:
    n = _node(node)
    spec = ctx.pack.ops.get(n.type) if n is not None else None
    return bool(spec is not None and spec.atomic)


def _sym(ctx):
    return ctx.symbol_builder()


def _q(name, arity, doc, factory, sig):
    return name, PrimSpec(name, arity, doc, factory, sig)


QUERY_PRIMITIVES: dict[str, PrimSpec] = register("query", dict([
    _q("unknown_shape", (1, 1), "unknown_shape(node): an unknown dim (-1/-2) in its descriptors or its subgraphs",
       lambda ctx: unknown_shape, "(Node) -> bool"),
    _q("unknown_shape_graph", (1, 1), "unknown_shape_graph(graph): some direct node has an unknown shape",
       lambda ctx: unknown_shape_graph, "(Graph) -> bool"),
    _q("ref_chain_forward", (1, 1),
       "ref_chain_forward(in_anchor): it and the inputs reached through outputs that reference it",
       lambda ctx: lambda a: ref_chain_forward(_sym(ctx), a), "(InAnchor) -> list[InAnchor]"),
    _q("ref_chain_reverse", (1, 1),
       "ref_chain_reverse(out_anchor): it and the outputs reached backwards through referenced inputs",
       lambda ctx: lambda a: ref_chain_reverse(_sym(ctx), a), "(OutAnchor) -> list[OutAnchor]"),
    _q("dtype", (1, 1), 'dtype(anchor): its data type name ("DT_FLOAT", ...) or none', lambda ctx: dtype,
       "(Anchor) -> str"),
    ("op_field", PrimSpec("op_field", (2, 2), "op_field(node, field): a repeated OpDef field (input_i, output_i, is_input_const)",
                          lambda ctx: op_field, "(Node, str) -> list[any]",
                          by_key=(("input_i", "list[int]"), ("output_i", "list[int]"), ("is_input_const", "list[bool]")))),
    _q("registry_atomic", (1, 1), "registry_atomic(node): the op registry marks its type atomic (ops.yaml `atomic:`)",
       lambda ctx: lambda n: _registry_atomic(ctx, n), "(Node) -> bool"),
    _q("in_nodes", (1, 1), "in_nodes(node): data producers then control predecessors", lambda ctx: in_nodes,
       "(Node) -> list[Node]"),
    _q("out_nodes", (1, 1), "out_nodes(node): data consumers then control successors", lambda ctx: out_nodes,
       "(Node) -> list[Node]"),
]))
