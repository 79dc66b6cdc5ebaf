"""Generic primitives the rule DSL can call.

They know graphs, anchors, attributes, options and the op registry — never a
particular op type. Each primitive is built per run from a `RunContext`
(`factory(ctx)`), so it can read options and the pack. Pass algorithms add
their own primitives (e.g. the RW pass's `is_ref_output`) with the same shape.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from engine.core.attrs import _node_of, attr_value, desc_attr, node_attr
from engine.dsl.compiler import Primitive


@dataclass(frozen=True)
class PrimSpec:
    name: str
    arity: tuple[int, int]
    doc: str
    factory: Callable[[Any], Callable]


# The pack's attribute keys (`attr_keys:`) that primitives read, with the primitive
# that reads each; a pack must declare them.
ATTR_KEY_USERS = {"parent_node_index": "parent_input", "op_kernel_lib": "engine"}


def parent_input(node, key: str):
    """For a subgraph Data: the parent node's in-anchor at its parent index (attribute `key`)."""
    n = _node_of(node)
    if n is None or n.graph is None or n.graph.parent_node is None:
        return None
    idx = node_attr(n, key)
    parent = n.graph.parent_node
    if not isinstance(idx, int) or not 0 <= idx < len(parent.ins):
        return None
    return parent.ins[idx]


def engine_of(ctx, node) -> str:
    n = _node_of(node)
    if n is None:
        return ""
    v = node_attr(n, ctx.pack.attr_key("op_kernel_lib"))
    if isinstance(v, str) and v:
        return v
    return ctx.pack.engine_of_type(n.type)


def _count(x) -> int:
    try:
        return 0 if x is None else len(x)
    except TypeError:
        return 0


def _flatten(xs) -> list:
    out = []
    for x in xs or ():
        if isinstance(x, (list, tuple)):
            out.extend(x)
        elif x is not None:
            out.append(x)
    return out


def _distinct(xs) -> list:
    seen, out = set(), []
    for x in xs or ():
        if id(x) not in seen:
            seen.add(id(x))
            out.append(x)
    return out


def _fail(ctx, message, node=None):
    from engine.core.errors import PassFailure
    n = _node_of(node)
    raise PassFailure(ctx.current_pass or "?", str(message), n.name if n is not None else None)


def _producer(a):
    return None if a is None else a.peer


def _producer_node(a):
    p = _producer(a)
    return None if p is None else p.node


def _consumers(a):
    if a is None:
        return []
    if hasattr(a, "peers"):
        return list(a.peers)
    return [p for o in a.outs for p in o.peers]


def _in(node, i):
    n = _node_of(node)
    return n.ins[i] if n is not None and i is not None and 0 <= i < len(n.ins) else None


def _out(node, i):
    n = _node_of(node)
    return n.outs[i] if n is not None and i is not None and 0 <= i < len(n.outs) else None


def _subgraphs(node):
    n = _node_of(node)
    return [] if n is None else [g for g in n.subgraphs if g is not None]


def _nodes(graph):
    return [] if graph is None else graph.node_list()


def _parent(node):
    n = _node_of(node)
    return None if n is None or n.graph is None else n.graph.parent_node


def _dims(anchor):
    d = None if anchor is None else anchor.desc
    return [] if d is None else list(d.shape.dim)


def _option(ctx, key):
    return ctx.options.get(key)


def _spec(name, arity, doc, factory):
    return name, PrimSpec(name, arity, doc, factory)


GRAPH_PRIMITIVES: dict[str, PrimSpec] = dict([
    _spec("attr", (2, 2), "attr(node, key): the op attribute's value or none", lambda ctx: node_attr),
    _spec("has_attr", (2, 2), "has_attr(node, key): the op carries the attribute",
          lambda ctx: lambda n, k: (_node_of(n) is not None and k in _node_of(n).op.attr)),
    _spec("attr_true", (2, 2), "attr_true(node, key): bool attribute set to true",
          lambda ctx: lambda n, k: node_attr(n, k) is True),
    _spec("desc_attr", (2, 2), "desc_attr(anchor, key): the tensor descriptor attribute's value or none",
          lambda ctx: desc_attr),
    _spec("dims", (1, 1), "dims(anchor): the tensor shape as a list", lambda ctx: _dims),
    _spec("producer", (1, 1), "producer(in_anchor): the feeding out-anchor or none", lambda ctx: _producer),
    _spec("producer_node", (1, 1), "producer_node(in_anchor): the feeding node or none", lambda ctx: _producer_node),
    _spec("consumers", (1, 1), "consumers(out_anchor or node): consumer in-anchors in peer order",
          lambda ctx: _consumers),
    _spec("count", (1, 1), "count(list): its length (0 for none)", lambda ctx: _count),
    _spec("input", (2, 2), "input(node, i): the i-th in-anchor or none", lambda ctx: _in),
    _spec("output", (2, 2), "output(node, i): the i-th out-anchor or none", lambda ctx: _out),
    _spec("subgraphs", (1, 1), "subgraphs(node): its subgraph instances", lambda ctx: _subgraphs),
    _spec("nodes", (1, 1), "nodes(graph): its direct nodes in order", lambda ctx: _nodes),
    _spec("parent", (1, 1), "parent(node): the node owning the node's graph, or none", lambda ctx: _parent),
    _spec("parent_input", (1, 1), "parent_input(data): parent's in-anchor at its PARENT_NODE_INDEX",
          lambda ctx: lambda n: parent_input(n, ctx.pack.attr_key("parent_node_index"))),
    _spec("engine", (1, 1), "engine(node): kernel lib (attribute OP_KERNEL_LIB, else the op registry)",
          lambda ctx: lambda n: engine_of(ctx, n)),
    _spec("option", (1, 1), "option(key): a --option value (string) or none", lambda ctx: lambda k: _option(ctx, k)),
    _spec("input_name", (1, 1), "input_name(in_anchor): its port name or none",
          lambda ctx: lambda a: None if a is None else a.node.input_name(a.idx)),
    _spec("output_name", (1, 1), "output_name(out_anchor): its port name or none",
          lambda ctx: lambda a: None if a is None else a.node.output_name(a.idx)),
    _spec("input_index", (2, 2), "input_index(node, port_name): index of the input with that name, or none",
          lambda ctx: lambda n, name: None if n is None or name is None else n.ports()[0].get(name)),
    _spec("desc_field", (2, 2), "desc_field(anchor, field): a TensorDescriptor field (reuse_input, size, ...)",
          lambda ctx: _desc_field),
    _spec("node_named", (2, 2), "node_named(graph, name): the graph's node of that name, or none",
          lambda ctx: lambda g, name: None if g is None or name is None else g.find(name)),
    _spec("first", (1, 1), "first(list): its first element, or none", lambda ctx: lambda l: l[0] if l else None),
    _spec("option_true", (1, 1), 'option_true(key): the option is "1" or "true"',
          lambda ctx: lambda k: str(ctx.options.get(k, "")).lower() in ("1", "true")),
    _spec("graph_attr_true", (2, 2), "graph_attr_true(graph, key): bool graph attribute set to true",
          lambda ctx: _graph_attr_true),
    _spec("root_graph", (0, 0), "root_graph(): the model's root graph", lambda ctx: lambda: ctx.model.root),
    _spec("flatten", (1, 1), "flatten(lists): one list of the elements of a list of lists", lambda ctx: _flatten),
    _spec("distinct", (1, 1), "distinct(list): without repeats, first occurrence order", lambda ctx: _distinct),
    _spec("rest", (1, 1), "rest(list): all but the first element", lambda ctx: lambda l: list(l or [])[1:]),
    _spec("producers", (1, 1), "producers(node): the out-anchors feeding its inputs, in input order",
          lambda ctx: lambda n: [] if _node_of(n) is None else [a.peer for a in _node_of(n).ins if a.peer is not None]),
    _spec("fail", (1, 2), "fail(message[, node]): stop the pass as GE does (exit status 1)",
          lambda ctx: lambda m, n=None: _fail(ctx, m, n)),
])


def _desc_field(anchor, name):
    d = None if anchor is None else anchor.desc
    if d is None or name not in _DESC_FIELDS:
        return None
    return getattr(d, name)


_DESC_FIELDS = frozenset({"reuse_input", "reuse_input_index", "size", "data_offset", "real_dim_cnt", "layout",
                          "weight_size", "output_tensor", "input_tensor", "device_type"})


def _graph_attr_true(graph, key):
    if graph is None or key not in graph.proto.attr:
        return False
    return attr_value(graph.proto.attr[key]) is True


def placeholder_functions(extra: dict[str, PrimSpec] | None = None) -> dict[str, Primitive]:
    """Names and arities only, for checking rules without running them."""
    table = dict(GRAPH_PRIMITIVES)
    table.update(extra or {})
    return {name: Primitive(name, _unbound, spec.arity, spec.doc) for name, spec in table.items()}


def bound_functions(ctx, extra: dict[str, PrimSpec] | None = None,
                    bound_extra: dict[str, Callable] | None = None) -> dict[str, Primitive]:
    """The primitives for one run: generic ones plus a pass's own (already bound)."""
    table = dict(GRAPH_PRIMITIVES)
    table.update(extra or {})
    out = {}
    for name, spec in table.items():
        fn = (bound_extra or {}).get(name) or spec.factory(ctx)
        out[name] = Primitive(name, fn, spec.arity, spec.doc)
    return out


def _unbound(*_args):
    raise RuntimeError("placeholder primitive called")
