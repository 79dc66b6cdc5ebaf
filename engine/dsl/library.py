"""The DSL's function library: one registry of every function a rule can call, and the
generic primitives.

They know graphs, anchors, attributes, options and the op registry — never a
particular op type. Each primitive is built per run from a `RunContext`
(`factory(ctx)`), so it can read options and the pack. The modules that implement
functions register them here (`register(group, specs)`): engine/dsl/queries.py, the
actions of engine/passes/actions.py, and each pass algorithm's own (the RW pass's
`is_ref_output`, ...). A `PrimSpec` carries the signature the type checker uses
(engine/dsl/types.py) and its effects; `memconflict rules functions` lists the registry.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from engine.core.attrs import _node_of, attr_keys, attr_value, desc_attr, node_attr, node_value
from engine.dsl.compiler import Primitive, bool_attr_true
from engine.dsl.types import parse_sig

EFFECTS = ("", "fails", "edits")     # none; may stop the pass (`fail`); edits the graph


@dataclass(frozen=True)
class PrimSpec:
    name: str
    arity: tuple[int, int]
    doc: str
    factory: Callable[[Any], Callable]
    sig: str = ""                     # "(Anchor, Mark) -> bool" (engine/dsl/types.py parse_sig)
    effects: str = ""                 # one of EFFECTS
    template: tuple | None = None     # a pack-defined function: (params, body)
    by_key: tuple = ()                # (key, result type): the result when argument 2 is that literal key
    memo: bool = False                # a pack-defined function with `memo: true`
    inline: str = ""                  # Note [inline attribute tests] (engine/dsl/compiler.py)
    total: bool = False               # never none (Note [direct comparisons] in engine/dsl/compiler.py)

    def __post_init__(self):
        if self.effects not in EFFECTS:
            raise ValueError(f"function '{self.name}': effects must be one of {EFFECTS}")
        signature = parse_sig(self.sig) if self.sig else None
        if signature is not None:
            n = len(signature.params)
            if (n - signature.optional, n) != tuple(self.arity):
                raise ValueError(f"function '{self.name}': signature {self.sig} does not match arity {self.arity}")
        elif self.template is None:
            raise ValueError(f"function '{self.name}' has no signature")
        if self.by_key:
            from dataclasses import replace
            from engine.dsl.types import parse_type
            signature = replace(signature, by_key={k: parse_type(t) for k, t in self.by_key})
        object.__setattr__(self, "signature", signature)
        object.__setattr__(self, "instances", {})     # template instances by argument types

    def primitive(self, fn: Callable, inline: bool = True) -> Primitive:
        return Primitive(self.name, fn, self.arity, self.doc, self.signature, self.effects, self.template,
                         self.instances, self.memo, self.inline if inline else "", self.total and inline)


# ---- the registry ---------------------------------------------------------------------------
REGISTRY: dict[str, PrimSpec] = {}
GROUPS: dict[str, list[str]] = {}          # group (the module's area) → names, in registration order
_GROUP_OF: dict[str, str] = {}


def register(group: str, specs: dict[str, PrimSpec]) -> dict[str, PrimSpec]:
    """Register functions under `group`; a name registered twice is an error naming both groups."""
    for name, spec in specs.items():
        if name in REGISTRY and REGISTRY[name] is not spec:
            raise ValueError(f"DSL function '{name}' ({group}) is already registered by {_GROUP_OF[name]}")
        if name not in REGISTRY:
            REGISTRY[name] = spec
            _GROUP_OF[name] = group
            GROUPS.setdefault(group, []).append(name)
    return specs


def group_of(name: str) -> str:
    return _GROUP_OF.get(name, "")


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


def _engine_reader(ctx):
    """engine_of for one run, with the pack's attribute key looked up once."""
    key = ctx.pack.attr_key("op_kernel_lib")
    by_type = ctx.pack.engine_of_type
    known: dict[str, str] = {}      # op type → the registry's engine (the pack does not change in a run)

    def engine(node) -> str:
        kind = getattr(node, "is_node", None)       # _node_of, inline (Note [is_node])
        n = node if kind is True else node.node if kind is False else _node_of(node)
        if n is None:
            return ""
        # a graph node's key set (Note [attribute key sets]); an importer's op builder has none
        if key in (n.akeys or attr_keys(n)) if kind is not None else key in n.op.attr:
            v = node_value(n, key) if kind is not None else attr_value(n.op.attr[key])
            if isinstance(v, str) and v:
                return v
        t = n.type
        e = known.get(t)
        if e is None:
            e = known[t] = by_type(t)
        return e
    return engine


def _attr_true(node, key: str) -> bool:
    """node_attr(node, key) is True, without decoding: only a `b` field holds True."""
    kind = getattr(node, "is_node", None)       # Note [is_node] in engine/core/attrs.py
    n = node if kind is True else node.node if kind is False else _node_of(node)
    if n is None:
        return False
    # a graph node's key set (Note [attribute key sets]); an importer's op builder has none
    if key not in (n.akeys or attr_keys(n)) if kind is not None else key not in n.op.attr:
        return False
    return bool_attr_true(n, key)


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


_LONG_MAX = (1 << 63) - 1


def _strtol(text):
    """C's strtol(text, nullptr, 10) (64-bit long): leading white space, an optional sign,
    the longest run of digits; 0 when there is none; clamped to LONG_MIN..LONG_MAX."""
    if text is None:
        return None
    s = str(text).lstrip(" \t\n\v\f\r")
    sign = 1
    if s[:1] in ("+", "-"):
        sign = -1 if s[0] == "-" else 1
        s = s[1:]
    k = 0
    while k < len(s) and "0" <= s[k] <= "9":
        k += 1
    v = sign * int(s[:k]) if k else 0
    return max(-_LONG_MAX - 1, min(_LONG_MAX, v))


def _int32(v):
    if v is None:
        return None
    v = int(v) & 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


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
    return ctx.pack.option(ctx.options, key)


_DESC_FIELD_TYPES = (("reuse_input", "bool"), ("reuse_input_index", "int"), ("size", "int"), ("data_offset", "int"),
                     ("real_dim_cnt", "int"), ("layout", "str"), ("weight_size", "int"), ("output_tensor", "bool"),
                     ("input_tensor", "bool"), ("device_type", "str"))
_DESC_FIELDS = frozenset(k for k, _ in _DESC_FIELD_TYPES)


def _spec(name, arity, doc, factory, sig, effects="", inline="", total=False):
    return name, PrimSpec(name, arity, doc, factory, sig, effects, inline=inline, total=total)


# Note [inline attribute tests]: the test of _attr_true / _has_attr / node_attr for a graph
# node, in place; {n} is a variable, {k} a string literal, {f} the primitive (for anything
# but a graph node). The answers are the primitives' own (tests/test_dsl_inline.py).
_KEYS = "({k} in ({n}.akeys or _ak({n})))"
_INLINE_ATTR = f"((_nv({{n}}, {{k}}) if {_KEYS} else None) if {{n}}.__class__ is _Node else {{f}}({{n}}, {{k}}))"
_INLINE_HAS = f"({_KEYS} if {{n}}.__class__ is _Node else {{f}}({{n}}, {{k}}))"
_INLINE_TRUE = f"(({_KEYS} and _abt({{n}}, {{k}})) if {{n}}.__class__ is _Node else {{f}}({{n}}, {{k}}))"


GRAPH_PRIMITIVES: dict[str, PrimSpec] = register("graph", dict([
    _spec("attr", (2, 2), "attr(node, key): the op attribute's value or none", lambda ctx: node_attr,
          "(Node | Anchor, str) -> any", inline=_INLINE_ATTR),
    _spec("has_attr", (2, 2), "has_attr(node, key): the op carries the attribute",
          lambda ctx: _has_attr, "(Node | Anchor, str) -> bool", inline=_INLINE_HAS),
    _spec("attr_true", (2, 2), "attr_true(node, key): bool attribute set to true",
          lambda ctx: _attr_true, "(Node | Anchor, str) -> bool", inline=_INLINE_TRUE),
    _spec("desc_attr", (2, 2), "desc_attr(anchor, key): the tensor descriptor attribute's value or none",
          lambda ctx: desc_attr, "(Anchor, str) -> any"),
    _spec("dims", (1, 1), "dims(anchor): the tensor shape as a list", lambda ctx: _dims, "(Anchor) -> list[int]"),
    _spec("producer", (1, 1), "producer(in_anchor): the feeding out-anchor or none", lambda ctx: _producer,
          "(InAnchor) -> OutAnchor"),
    _spec("producer_node", (1, 1), "producer_node(in_anchor): the feeding node or none", lambda ctx: _producer_node,
          "(InAnchor) -> Node"),
    _spec("consumers", (1, 1), "consumers(out_anchor or node): consumer in-anchors in peer order",
          lambda ctx: _consumers, "(OutAnchor | Node) -> list[InAnchor]"),
    _spec("count", (1, 1), "count(list): its length (0 for none)", lambda ctx: _count, "(list[T]) -> int", total=True),
    _spec("input", (2, 2), "input(node, i): the i-th in-anchor or none", lambda ctx: _in, "(Node, int) -> InAnchor"),
    _spec("output", (2, 2), "output(node, i): the i-th out-anchor or none", lambda ctx: _out, "(Node, int) -> OutAnchor"),
    _spec("subgraphs", (1, 1), "subgraphs(node): its subgraph instances", lambda ctx: _subgraphs,
          "(Node) -> list[Graph]"),
    _spec("nodes", (1, 1), "nodes(graph): its direct nodes in order", lambda ctx: _nodes, "(Graph) -> list[Node]"),
    _spec("parent", (1, 1), "parent(node): the node owning the node's graph, or none", lambda ctx: _parent,
          "(Node) -> Node"),
    _spec("parent_input", (1, 1), "parent_input(data): parent's in-anchor at its PARENT_NODE_INDEX",
          lambda ctx: lambda n: parent_input(n, ctx.pack.attr_key("parent_node_index")), "(Node) -> InAnchor"),
    _spec("engine", (1, 1), "engine(node): kernel lib (attribute OP_KERNEL_LIB, else the op registry)",
          lambda ctx: _engine_reader(ctx), "(Node) -> str"),
    _spec("option", (1, 1), "option(key): the --option value (its canonical text), else the pack's declared default, else none",
          lambda ctx: lambda k: _option(ctx, k), "(Option) -> str"),
    _spec("input_name", (1, 1), "input_name(in_anchor): its port name or none",
          lambda ctx: lambda a: None if a is None else a.node.input_name(a.idx), "(InAnchor) -> str"),
    _spec("output_name", (1, 1), "output_name(out_anchor): its port name or none",
          lambda ctx: lambda a: None if a is None else a.node.output_name(a.idx), "(OutAnchor) -> str"),
    _spec("input_index", (2, 2), "input_index(node, port_name): index of the input with that name, or none",
          lambda ctx: lambda n, name: None if n is None or name is None else n.ports()[0].get(name), "(Node, str) -> int"),
    ("desc_field", PrimSpec("desc_field", (2, 2), "desc_field(anchor, field): a TensorDescriptor field (reuse_input, size, ...)",
                            lambda ctx: _desc_field, "(Anchor, str) -> any", by_key=_DESC_FIELD_TYPES)),
    _spec("node_named", (2, 2), "node_named(graph, name): the graph's node of that name, or none",
          lambda ctx: lambda g, name: None if g is None or name is None else g.find(name), "(Graph, str) -> Node"),
    _spec("first", (1, 1), "first(list): its first element, or none", lambda ctx: lambda l: l[0] if l else None,
          "(list[T]) -> T"),
    _spec("option_true", (1, 1), 'option_true(key): the option is "1" or "true"',
          lambda ctx: lambda k: str(_option(ctx, k) or "").lower() in ("1", "true"), "(Option) -> bool"),
    _spec("graph_attr_true", (2, 2), "graph_attr_true(graph, key): bool graph attribute set to true",
          lambda ctx: _graph_attr_true, "(Graph, str) -> bool"),
    _spec("root_graph", (0, 0), "root_graph(): the model's root graph", lambda ctx: lambda: ctx.model.root,
          "() -> Graph"),
    _spec("flatten", (1, 1), "flatten(lists): one list of the elements of a list of lists", lambda ctx: _flatten,
          "(list[list[T]]) -> list[T]"),
    _spec("distinct", (1, 1), "distinct(list): without repeats, first occurrence order", lambda ctx: _distinct,
          "(list[T]) -> list[T]"),
    _spec("rest", (1, 1), "rest(list): all but the first element", lambda ctx: lambda l: list(l or [])[1:],
          "(list[T]) -> list[T]"),
    _spec("strtol", (1, 1), "strtol(text): C's strtol base 10 (spaces, a sign, digits; 0 without digits; none for none)",
          lambda ctx: _strtol, "(str) -> int"),
    _spec("int32", (1, 1), "int32(value): the value cast to a 32-bit int as C++ casts to an enum (two's complement)",
          lambda ctx: _int32, "(int) -> int"),
    _spec("producers", (1, 1), "producers(node): the out-anchors feeding its inputs, in input order",
          lambda ctx: lambda n: [] if _node_of(n) is None else [a.peer for a in _node_of(n).ins if a.peer is not None],
          "(Node) -> list[OutAnchor]"),
    _spec("fail", (1, 2), "fail(message[, node]): stop the pass as GE does (exit status 1)",
          lambda ctx: lambda m, n=None: _fail(ctx, m, n), "(str, Node | Anchor?) -> never", "fails"),
]))


def _desc_field(anchor, name):
    """A TensorDescriptor field by name (the ones in _DESC_FIELD_TYPES), or none."""
    d = None if anchor is None else anchor.desc
    if d is None or name not in _DESC_FIELDS:
        return None
    return getattr(d, name)




def _has_attr(node, key: str) -> bool:
    """The op carries attribute `key`: a graph node's own test (Node.has_attr)."""
    kind = getattr(node, "is_node", None)       # _node_of, inline (Note [is_node] in engine/core/attrs.py)
    if kind is True:
        return node.has_attr(key)
    n = node.node if kind is False else _node_of(node)
    if n is None:
        return False
    return n.has_attr(key) if getattr(n, "is_node", None) is True else key in n.op.attr


def _graph_attr_true(graph, key):
    if graph is None or key not in graph.proto.attr:
        return False
    return attr_value(graph.proto.attr[key]) is True


def placeholder_functions(extra: dict[str, PrimSpec] | None = None) -> dict[str, Primitive]:
    """Names and arities only, for checking rules without running them."""
    table = dict(GRAPH_PRIMITIVES)
    table.update(extra or {})
    return {name: spec.primitive(_unbound) for name, spec in table.items()}


def bound_functions(ctx, extra: dict[str, PrimSpec] | None = None,
                    bound_extra: dict[str, Callable] | None = None) -> dict[str, Primitive]:
    """The primitives for one run: generic ones plus a pass's own (already bound)."""
    table = dict(GRAPH_PRIMITIVES)
    table.update(extra or {})
    out = {}
    for name, spec in table.items():
        own = (bound_extra or {}).get(name)
        out[name] = spec.primitive(own or spec.factory(ctx), inline=own is None)
    return out


def _unbound(*_args):
    raise RuntimeError("placeholder primitive called")
