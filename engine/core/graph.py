"""The graph model: GE's ComputeGraph semantics over ge.proto messages.

A `Model` holds the root `Graph` and its subgraphs. Each `Node` keeps its
`ge.proto.OpDef` message (attributes, descriptors and every field the engine does
not interpret survive untouched); edges live in the anchors:

* `OutAnchor.peers` is the ordered list of consumer in-anchors (GE's peer list);
* `InAnchor.peer` is the producer out-anchor or None;
* `Node.in_ctrl` / `Node.out_ctrl` are ordered control predecessors/successors.

Each graph keeps its direct nodes in a doubly linked list so that inserting a
node right after its source (GE's `InsertNode`) and removing a node are O(1),
and a walk over the live list sees nodes inserted after the current one.
"""
from __future__ import annotations

import sys
from contextlib import contextmanager
from types import MappingProxyType
from typing import Iterator, Mapping

from engine.core.attrs import attr_def, attr_keys, attrs_changed, set_attr
from engine.core.lean import (LEAN_STRIP_PEER, VERIFY_CACHES, _DUPLICATE, CompactOp, OwnDescs, check_canonical,
                              decode_lean, entry_of, lean_order, shared_attr, shared_desc, tail_with)
from engine.proto import ge_ir_pb2 as pb

# Note [port names]: GE's dump names ports in two parallel list attributes per side.
PORT_NAME_ATTRS = (("input", "_input_name_key", "_input_name_value"),
                   ("output", "_output_name_key", "_output_name_value"))
_IN_KEY, _IN_VALUE = PORT_NAME_ATTRS[0][1:]         # Node.ports reads these per node
_OUT_KEY, _OUT_VALUE = PORT_NAME_ATTRS[1][1:]


# Note [descriptor cache]: an anchor keeps its TensorDescriptor message once read (the
# passes' predicates read it millions of times, each a repeated-field access). Descriptor
# lists only grow (nothing in the engine deletes or replaces an op's descriptors), so the
# message an anchor found stays the one at its index.
_NO_NODES: frozenset = frozenset()
_intern = sys.intern


class InAnchor:
    __slots__ = ("node", "idx", "peer", "_desc")
    is_out = False
    is_node = False

    def __init__(self, node: "Node", idx: int):
        self.node = node
        self.idx = idx
        self.peer: OutAnchor | None = None
        self._desc = None       # Note [descriptor cache]

    @property
    def key(self) -> str:
        return f"{self.node.name}_in_{self.idx}"

    @property
    def desc(self) -> pb.TensorDescriptor | None:
        d = self._desc
        if d is None:
            n = self.node
            op = n._op
            # Note [lean ops]: an undecoded node's descriptor is a shared read-only decoding
            descs = op.input_desc if op is not None else n.lean.input_desc
            if self.idx < len(descs):
                d = self._desc = descs[self.idx] if op is not None else shared_desc(descs[self.idx])
        return d

    def __repr__(self) -> str:
        return f"<in {self.node.name}:{self.idx}>"


class OutAnchor:
    __slots__ = ("node", "idx", "peers", "_desc")
    is_out = True
    is_node = False

    def __init__(self, node: "Node", idx: int):
        self.node = node
        self.idx = idx
        self.peers: list[InAnchor] = []
        self._desc = None       # Note [descriptor cache]

    @property
    def key(self) -> str:
        return f"{self.node.name}_out_{self.idx}"

    @property
    def desc(self) -> pb.TensorDescriptor | None:
        d = self._desc
        if d is None:
            n = self.node
            op = n._op
            # Note [lean ops]: an undecoded node's descriptor is a shared read-only decoding
            descs = op.output_desc if op is not None else n.lean.output_desc
            if self.idx < len(descs):
                d = self._desc = descs[self.idx] if op is not None else shared_desc(descs[self.idx])
        return d

    def __repr__(self) -> str:
        return f"<out {self.node.name}:{self.idx}>"


class Node:
    __slots__ = ("name", "type", "_op", "graph", "ins", "outs", "in_ctrl", "out_ctrl", "out_ctrl_count",
                 "subgraphs", "prev", "next", "dirty", "_ports", "alive", "akeys", "lean", "lflags", "korder", "lpeer")
    is_node = True          # Note [is_node] in engine/core/attrs.py

    def __init__(self, op: pb.OpDef, graph: "Graph", name: str | None = None):
        """`name`: op.name, when the caller has read it already (the loader)."""
        self._op: pb.OpDef | None = op
        self.name: str = op.name if name is None else name
        self.type: str = _intern(op.type)         # a few dozen types over all nodes
        self.graph = graph
        # none, one or two anchors a side is the common case: made without a comprehension
        k = len(op.input_desc)
        if k == 1:
            self.ins: list[InAnchor] = [InAnchor(self, 0)]
        elif k == 2:
            self.ins = [InAnchor(self, 0), InAnchor(self, 1)]
        else:
            self.ins = [InAnchor(self, i) for i in range(k)] if k else []
        k = len(op.output_desc)
        if k == 1:
            self.outs: list[OutAnchor] = [OutAnchor(self, 0)]
        else:
            self.outs = [OutAnchor(self, i) for i in range(k)] if k else []
        # Note [shared empties]: most nodes have no control edge and no subgraph; they share
        # one empty tuple / frozenset (an empty list is 56 bytes, an empty dict 64 and more once used) until the
        # first edit (engine.surgery.link_ctrl, the loader), which gives the node its own
        # list / dict; readers only iterate, index, count or test them
        self.in_ctrl: list[Node] | tuple = ()
        self.out_ctrl: list[Node] | tuple = ()
        # each control successor's number of edges (Note [repeated control edges] in
        # engine/core/surgery.py): membership of out_ctrl, in O(1)
        self.out_ctrl_count: dict[Node, int] | frozenset = _NO_NODES
        self.subgraphs: list[Graph | None] | tuple = ()       # by subgraph index; None = empty name
        self.prev: Node | None = None
        self.next: Node | None = None
        # True: inputs changed, OpDef.input is rewritten on save; False: a loaded node whose
        # OpDef.input is what a rewrite writes; None: not known (Note [inputs as written] in
        # engine/core/dumpio.py)
        self.dirty: bool | None = None
        self._ports = None
        self.alive = True
        self.akeys = None
        # Note [lean ops] (engine/core/lean.py): a loaded node's encoded op until `op` is
        # first asked for (then None); LEAN_* flags; the lean attribute keys in order, once read
        self.lean = None
        self.lflags = 0
        self.korder: tuple | None = None
        self.lpeer: tuple | None = None     # the peer index the lean op holds (interned)

    @property
    def op(self) -> pb.OpDef:
        """The node's OpDef (a lean node's is decoded now: Note [lean ops])."""
        op = self._op
        return op if op is not None else self._decode()

    @op.setter
    def op(self, op: pb.OpDef) -> None:
        self._op = op
        self.lean = self.korder = None

    def _decode(self) -> pb.OpDef:
        lean = self.lean
        if _ROLLBACK is not None:       # Note [decode rollback]
            _ROLLBACK.append((self, lean, lean.input, self.korder, self.akeys))
        if lean.input is None:          # Note [compact inputs]
            lean.input = input_entries(self)
        op = self._op = decode_lean(lean, self.graph.model, self.lflags & LEAN_STRIP_PEER)
        self.lean = self.korder = None
        for a in self.ins:
            a._desc = None
        for a in self.outs:
            a._desc = None
        return op

    # ---- identity -------------------------------------------------------
    @property
    def id(self) -> int:
        op = self._op
        return (op if op is not None else self.lean).id

    @id.setter
    def id(self, value: int) -> None:
        op = self._op
        (op if op is not None else self.lean).id = value

    def __repr__(self) -> str:
        return f"<{self.type} {self.name}>"

    # ---- attributes (op-level) ------------------------------------------
    def attr(self, key: str):
        """The AttrDef for `key`, or None (a lean node's is shared and read only)."""
        return attr_def(self, key) if key in (self.akeys or attr_keys(self)) else None

    def has_attr(self, key: str) -> bool:
        return key in (self.akeys or attr_keys(self))

    def descs(self, outputs: bool = False):
        """The op's input_desc (or output_desc) list; a lean node's as shared read-only
        decodings (Note [lean ops])."""
        op = self._op
        if op is not None:
            return op.output_desc if outputs else op.input_desc
        return [shared_desc(r) for r in (self.lean.output_desc if outputs else self.lean.input_desc)]

    def desc_bytes(self, idx: int, outputs: bool = False) -> bytes | None:
        """A lean node's input (or output) descriptor `idx` as encoded, or None (a decoded
        node, or none there): a key for what is a function of the descriptor alone, as
        equal bytes decode to equal descriptors (Note [lean ops])."""
        if self._op is not None:
            return None
        raws = self.lean.output_desc if outputs else self.lean.input_desc
        return raws[idx] if 0 <= idx < len(raws) else None

    def descs_may_hold(self, needle: bytes, outputs: bool = False) -> bool:
        """False when no input (or output) descriptor can hold `needle`: a lean node's
        descriptors are bytes, and an attribute key a descriptor carries is in them
        (Note [lean ops]); a decoded node's always may. A filter before a read, never an
        answer: a descriptor holding the bytes elsewhere (in a name, a value) is read."""
        if self._op is not None:
            return True
        for raw in (self.lean.output_desc if outputs else self.lean.input_desc):
            if needle in raw:
                return True
        return False

    def desc_count(self, outputs: bool = False) -> int:
        """len(op.input_desc) (or output_desc), without decoding a lean node."""
        op = self._op if self._op is not None else self.lean
        return len(op.output_desc if outputs else op.input_desc)

    # ---- port names (from _input_name_key/_value, _output_name_key/_value) ----
    def ports(self) -> tuple[Mapping[str, int], Mapping[str, int]]:
        """(input name → index, output name → index), read-only (Note [shared port maps])."""
        return (self._ports or self._read_ports()).pair

    def input_name(self, idx: int) -> str | None:
        return (self._ports or self._read_ports()).in_names.get(idx)

    def output_name(self, idx: int) -> str | None:
        return (self._ports or self._read_ports()).out_names.get(idx)

    def _read_ports(self) -> "_PortNames":
        op = self._op
        p = self._ports = port_names(op) if op is not None else _lean_port_names(self)
        return p

    def set_ports(self, inputs: list[str], outputs: list[str]) -> None:
        """Name the ports as GE's dump does (`_input_name_key/_value`, ...)."""
        write_port_names(self.op, inputs, outputs)
        self._ports = None
        attrs_changed(self)

    # ---- neighbourhood --------------------------------------------------
    def data_consumers(self) -> list["Node"]:
        return [p.node for o in self.outs for p in o.peers]

    def has_data_consumers(self) -> bool:
        return any(o.peers for o in self.outs)

    def in_producers(self) -> list["Node"]:
        return [a.peer.node for a in self.ins if a.peer is not None]

    def ensure_inputs(self, n: int) -> None:
        while len(self.ins) < n:
            self.ins.append(InAnchor(self, len(self.ins)))

    def ensure_outputs(self, n: int) -> None:
        while len(self.outs) < n:
            self.outs.append(OutAnchor(self, len(self.outs)))


# Note [shared port maps]: nodes of one kind carry the same four port-name attributes, so
# they share one prebuilt _PortNames, found by the attributes' serialized bytes (one C call
# each, where decoding the lists costs a wrapper per element): equal bytes parse to equal
# lists, so a hit gives the maps that decoding would. The maps are read-only views (a caller
# that wants to change one copies it) and `input_name`/`output_name` are dict lookups in the
# reverse maps, which keep the first name per index (the old scan's answer). The cache is
# bounded: past _PORT_CACHE_MAX kinds a node's maps are built for it alone.
_PORT_CACHE: dict[tuple, "_PortNames"] = {}
_PORT_CACHE_MAX = 4096


class _PortNames:
    __slots__ = ("pair", "in_names", "out_names")

    def __init__(self, ins: dict[str, int], outs: dict[str, int]):
        self.pair = (MappingProxyType(ins), MappingProxyType(outs))
        self.in_names = _first_names(ins)
        self.out_names = _first_names(outs)


def _first_names(names: dict[str, int]) -> dict[int, str]:
    out: dict[int, str] = {}
    for name, i in names.items():
        out.setdefault(i, name)
    return out


def port_names(op: pb.OpDef) -> _PortNames:
    """An op's port names, shared with every op that names its ports alike."""
    get = op.attr.get
    ik, iv, ok, ov = get(_IN_KEY), get(_IN_VALUE), get(_OUT_KEY), get(_OUT_VALUE)
    key = (None if ik is None else ik.SerializeToString(), None if iv is None else iv.SerializeToString(),
           None if ok is None else ok.SerializeToString(), None if ov is None else ov.SerializeToString())
    p = _PORT_CACHE.get(key)
    if p is None:
        p = _PortNames(_name_map(ik, iv), _name_map(ok, ov))
        if len(_PORT_CACHE) < _PORT_CACHE_MAX:
            _PORT_CACHE[key] = p
    return p


def writable_desc(anchor):
    """The descriptor of `anchor` to write into (None without one): its node's own, so a
    lean node is decoded first (the one `anchor.desc` gives it is shared by every node
    with the same bytes, and read only: Note [lean ops] in engine/core/lean.py)."""
    anchor.node.op
    return anchor.desc


def set_desc_attr(anchor, key: str, value, kind: str | None = None) -> bool:
    """Set attribute `key` of the anchor's tensor descriptor to `value` (set_attr's
    kinds); False when the anchor has no descriptor.

    Note [lean descriptor writes]: a lean node stays lean. Its descriptor's bytes are
    decoded into a message of the anchor's own, the attribute set there, and the bytes in
    the lean op replaced by that message's deterministic encoding: what a deterministic
    save of the decoded op writes for it, so the op stays canonical if it was (its other
    fields are as they were). variable_ref_delete writes one attribute into each writer
    of a variable (a tenth of a training step's ops); decoding those ops took ~8 KB each
    (0.8 GB at 1M nodes) and their saves' encodings besides. The anchor keeps the message
    (Note [descriptor cache]), never shared; a compact op's list becomes an `OwnDescs`."""
    n = anchor.node
    if n._op is not None:
        d = anchor.desc
        if d is None:
            return False
        set_attr(d.attr, key, value, kind)
        return True
    return _lean_desc_write(n, anchor.is_out, anchor.idx, lambda d: set_attr(d.attr, key, value, kind), key)


def set_desc_size(n: "Node", idx: int, size: int) -> bool:
    """Set the `size` field of output descriptor `idx` of node `n`; False when it has none
    there. A lean node stays lean (Note [lean descriptor writes])."""
    op = n._op
    if op is not None:
        descs = op.output_desc
        if idx >= len(descs):
            return False
        descs[idx].size = size
        return True

    def write(d):
        d.size = size
    return _lean_desc_write(n, True, idx, write, "size")


def _lean_desc_write(n: "Node", outputs: bool, i: int, edit, what: str) -> bool:
    """Note [lean descriptor writes]: `edit` a decoding of lean node `n`'s descriptor `i`
    (an output's, or an input's) and put its deterministic encoding in the descriptor's
    place; the anchor, if there is one, keeps the message."""
    lean = n.lean
    raws = lean.output_desc if outputs else lean.input_desc
    if i >= len(raws):
        return False
    d = pb.TensorDescriptor.FromString(raws[i])
    edit(d)
    raw = d.SerializeToString(deterministic=True)
    if type(lean) is CompactOp:
        raws = OwnDescs(raws[:i] + (raw,) + raws[i + 1:])
        if outputs:
            lean.output_desc = raws
        else:
            lean.input_desc = raws
    else:
        raws[i] = raw
    anchors = n.outs if outputs else n.ins
    if i < len(anchors):
        anchors[i]._desc = d
    if VERIFY_CACHES:
        check_canonical(n, what)
    return True


# Note [lean offset writes]: the variable placement writes OpDef.output_i (and input_i of
# broadcasts) into every variable and writer of a graph, a quarter of a training step's
# ops; it decoded each of them (~8 KB, 0.35 s at 100k nodes for the report's placement
# alone). A lean op holds those fields itself: a lean message as fields, a compact op in
# its tail (Note [compact ops]), whose bytes are written again, as upb writes fields 22-32
# in number order — what a deterministic save of the decoded op writes for them — so a
# canonical op stays canonical.
def op_list(n: "Node", field: str) -> list:
    """The repeated OpDef field `field` (output_i, input_i, ...) of node `n`, as a new list
    (a lean node's read from its lean op: Note [lean ops])."""
    op = n._op
    return list(getattr(op if op is not None else n.lean, field))


def set_op_list(n: "Node", field: str, values) -> None:
    """Set the repeated OpDef field `field` of node `n` to `values`; a lean node stays lean
    (Note [lean offset writes])."""
    op = n._op
    lean = n.lean if op is None else None
    if type(lean) is CompactOp:
        lean.tail = tail_with(lean.tail, field, values)
    else:
        f = getattr(op if op is not None else lean, field)
        if list(f) != list(values):
            del f[:]
            f.extend(values)
    if lean is not None and VERIFY_CACHES:
        check_canonical(n, field)


def input_entries(n: "Node") -> list[str]:
    """OpDef.input as a save writes it from the node's edges: "src:idx" for each in-anchor
    ("" when unconnected; trailing unconnected slots beyond the descriptors left out),
    then "src:-1" for each control predecessor.

    Note [compact inputs]: a loaded node whose entries are exactly these (`dirty` is
    False, Note [inputs as written] in engine/core/dumpio.py) and whose op is compact
    lets its entries go (`input` is None: ~170 bytes a node of a training step); the
    save and the decoding make them anew from the edges, which have not changed (any
    edge change marks the node dirty, and no node is renamed)."""
    entries = [("" if a.peer is None else f"{a.peer.node.name}:{a.peer.idx}") for a in n.ins]
    if entries and entries[-1] == "":
        k = n.desc_count()
        while entries and entries[-1] == "" and len(entries) > k:
            entries.pop()
    for p in n.in_ctrl:
        entries.append(f"{p.name}:-1")
    return entries


def _lean_port_names(n: "Node") -> _PortNames:
    """port_names of a lean node, from its attributes' bytes (Note [lean ops]).

    Note [lean port entries]: the four port attributes' places are found once per key
    order (a training step has a few hundred), and a lean node's maps are found by those
    entries' bytes, key included (the shared entry objects hash once): equal entries hold
    equal values. Looking each key up in the order and splitting its entry cost ~1.5 us a
    node."""
    ko = n.korder or lean_order(n)
    if ko is _DUPLICATE:
        return port_names(n.op)
    places = _PORT_PLACES.get(ko)
    if places is None:
        if len(_PORT_PLACES) >= _PORT_CACHE_MAX:
            _PORT_PLACES.clear()
        places = _PORT_PLACES[ko] = tuple(ko.index(k) if k in ko else -1 for k in _PORT_KEYS)
    entries = n.lean.attr
    raw = tuple([None if i < 0 else entries[i] for i in places])
    p = _LEAN_PORTS.get(raw)
    if p is None:
        ik, iv, ok, ov = (None if r is None else shared_attr(entry_of(r)[1]) for r in raw)
        p = _PortNames(_name_map(ik, iv), _name_map(ok, ov))
        if len(_LEAN_PORTS) < _PORT_CACHE_MAX:
            _LEAN_PORTS[raw] = p
    return p


_PORT_KEYS = (_IN_KEY, _IN_VALUE, _OUT_KEY, _OUT_VALUE)
_PORT_PLACES: dict[tuple, tuple] = {}       # Note [lean port entries]: key order → the port keys' places (-1: none)
_LEAN_PORTS: dict[tuple, _PortNames] = {}   # ... the four entries (None: none) → their maps


def _name_map(keys: pb.AttrDef | None, values: pb.AttrDef | None) -> dict[str, int]:
    if keys is None or values is None:
        return {}
    return {k.decode("utf-8", "replace"): int(v) for k, v in zip(keys.list.s, values.list.i)}


def write_port_names(op: pb.OpDef, inputs: list[str] | None, outputs: list[str] | None) -> None:
    """Name an op's ports as GE's dump does: `_input_name_key` [names] with
    `_input_name_value` [0..n-1], the same for outputs; an empty side is left alone."""
    for (_, key_attr, value_attr), names in zip(PORT_NAME_ATTRS, (inputs, outputs)):
        if names:
            set_attr(op.attr, key_attr, [str(n) for n in names], "list_s")
            set_attr(op.attr, value_attr, list(range(len(names))), "list_i")


class Graph:
    """One ComputeGraph: ordered direct nodes, graph attributes, parent link."""

    def __init__(self, proto: pb.GraphDef, model: "Model"):
        self.proto = proto          # the GraphDef (its `op` list is rebuilt on save)
        self.name: str = proto.name
        self.model = model
        self.parent_node: Node | None = None
        self.head: Node | None = None
        self.tail: Node | None = None
        self.by_name: dict[str, Node] = {}
        self.count = 0
        self._listed: list[Node] | None = None     # Note [node list kept]
        # the SortPolicy whose sort left the graph as it is, None after any edit (Note
        # [sorted stays sorted] in engine/core/toposort.py)
        self.sorted_by = None

    def __repr__(self) -> str:
        return f"<graph {self.name} ({self.count} nodes)>"

    @property
    def parent_graph(self) -> "Graph | None":
        return self.parent_node.graph if self.parent_node is not None else None

    @property
    def is_root(self) -> bool:
        return self.parent_node is None

    def attr(self, key: str):
        attrs = self.proto.attr
        return attrs[key] if key in attrs else None

    def nodes(self) -> Iterator[Node]:
        """Direct nodes in order; a live walk (sees nodes inserted after the current one)."""
        n = self.head
        while n is not None:
            yield n
            # a removed node keeps its `next`, so the walk continues past it
            n = n.next
            while n is not None and not n.alive:
                n = n.next

    def node_list(self) -> list[Node]:
        """The direct live nodes in order, a list of the caller's own.

        Note [node list kept]: the passes ask for a graph's list ~20 times a run (1.8M nodes
        walked at 100k). The walk's result is kept until the list changes, which only the
        methods below do (each drops it: linking a node in, which also makes it live, taking
        one out, a new order); a call gets a copy of it. Verify mode walks anyway and compares."""
        kept = self._listed
        if kept is not None:
            if VERIFY_CACHES and kept != self._walk():
                raise AssertionError(f"graph {self.name}: the kept node list differs from the list's nodes")
            return kept[:]
        out = self._listed = self._walk()
        return out[:]

    def _walk(self) -> list[Node]:
        out = []
        n = self.head
        while n is not None:
            if n.alive:
                out.append(n)
            n = n.next
        return out

    def find(self, name: str) -> Node | None:
        return self.by_name.get(name)

    # ---- list surgery ---------------------------------------------------
    def _link_after(self, node: Node, after: Node | None) -> None:
        self._listed = None                     # Note [node list kept]
        self.sorted_by = None
        node.alive = True
        if after is None:                       # append at the end
            node.prev, node.next = self.tail, None
            if self.tail is not None:
                self.tail.next = node
            else:
                self.head = node
            self.tail = node
        else:
            node.prev, node.next = after, after.next
            if after.next is not None:
                after.next.prev = node
            else:
                self.tail = node
            after.next = node
        self.count += 1

    def append(self, node: Node) -> None:
        self._register(node)
        self._link_after(node, None)

    def link_loaded(self, nodes: list[Node]) -> None:
        """`append` each of `nodes` in order, for the loader: new nodes of this graph that
        are in `by_name` already (unlinked: `prev`/`next` None)."""
        if not nodes:
            return
        self._listed = None                     # Note [node list kept]
        self.sorted_by = None
        prev = self.tail
        if prev is None:
            self.head = nodes[0]
        else:
            prev.next = nodes[0]
        for n in nodes:
            n.prev = prev
            prev = n
        for a, b in zip(nodes, nodes[1:]):
            a.next = b
        self.tail = prev
        self.count += len(nodes)

    def insert_after(self, node: Node, after: Node) -> None:
        """GE ComputeGraph::InsertNode: right after `after`, sharing its topological id."""
        self._register(node)
        self._link_after(node, after)
        node.id = after.id

    def prepend(self, node: Node) -> None:
        """GE AddNodeFront."""
        self._register(node)
        self._listed = None                     # Note [node list kept]
        self.sorted_by = None
        node.alive = True
        node.prev, node.next = None, self.head
        if self.head is not None:
            self.head.prev = node
        else:
            self.tail = node
        self.head = node
        self.count += 1

    def _register(self, node: Node) -> None:
        node.graph = self
        self.by_name[node.name] = node

    def unlink_from_list(self, node: Node) -> None:
        self._listed = None                     # Note [node list kept]
        self.sorted_by = None
        if node.prev is not None:
            node.prev.next = node.next
        else:
            self.head = node.next
        if node.next is not None:
            node.next.prev = node.prev
        else:
            self.tail = node.prev
        self.count -= 1
        if self.by_name.get(node.name) is node:
            del self.by_name[node.name]
        node.alive = False

    def reorder(self, order: list[Node]) -> None:
        """Replace the node order (used by topological sorting); counted in the model's
        `reorders` (Note [handed-on symbol tables] in engine/passes/manager.py)."""
        if self.model is not None:
            self.model.reorders += 1
        self._listed = None                     # Note [node list kept]
        self.sorted_by = None
        self.head = self.tail = None
        self.count = 0
        prev = None
        for n in order:
            n.prev, n.next = prev, None
            if prev is None:
                self.head = n
            else:
                prev.next = n
            prev = n
            self.count += 1
        self.tail = prev


class Model:
    """A ModelDef: root graph + subgraphs (graph[0] is the root)."""

    def __init__(self, proto: pb.ModelDef, source: str = "<memory>"):
        self.proto = proto
        self.source = source
        self.graphs: dict[str, Graph] = {}
        self.graph_order: list[Graph] = []
        self.root: Graph | None = None
        self.emit_peer_index = False   # re-emit _src_out_peer_index_for_ge_txt_load on save
        # node → bool: edges out of such nodes close loops and are left out of sorting (pack's
        # surgery.loop_back_edge_from, set by the runner)
        self.loop_back_source = None
        # (kind, text) notes of the reading: attributes derived as GE derives them, port
        # names taken from the pack, ops imported without GE's IR (engine/core/importers)
        self.notes: list[tuple[str, str]] = []
        self._ops: pb.GraphDef | None = None      # Note [op memory]
        self.reorders = 0           # Graph.reorder calls: a sort that found the order kept adds none
        self.sort_policy = None     # the run's SortPolicy (engine/core/toposort.py), set by the runner
        self.isolate_noop = None    # surgery.isolate_noop of the run's pack (engine/core/surgery.isolate)
        self.policies_from = None   # the RunContext loop_back_source and sort_policy were made for
        # the SortPolicy whose sort of the root last numbered every node (Note [sorted stays
        # sorted] in engine/core/toposort.py); a sort of a subgraph alone drops it
        self.numbered_by = None

    def new_op(self, name: str, type_: str) -> pb.OpDef:
        """A new, empty OpDef for a node the passes add to this model.

        Note [op memory]: a message made on its own gets memory of its own, ~5 KB for an
        op with two descriptors, where the same op inside another message takes ~2.2 KB
        (measured with upb: 10k such ops, 54 MB against 22 MB). The passes add ~12k ops
        to a 100k-node graph, so they are made as elements of one holder message the
        model keeps (never serialized: saving writes each node's op). An op whose node is
        removed stays in the holder until the model goes."""
        holder = self._ops
        if holder is None:
            holder = self._ops = pb.GraphDef()
        return holder.op.add(name=name, type=type_)

    def add_graph(self, g: Graph) -> None:
        self.graphs[g.name] = g
        self.graph_order.append(g)

    def all_nodes(self, graph: Graph | None = None) -> list[Node]:
        """GE ComputeGraph::GetAllNodes: a snapshot, each parent followed by its
        subgraphs' nodes (depth first, subgraph index order)."""
        return _nodes_under(graph or self.root)

    def walk_all_nodes(self, graph: Graph | None = None) -> Iterator[Node]:
        """Like all_nodes, but live: nodes inserted after the current one are visited."""
        return (x for x in walk(graph or self.root) if isinstance(x, Node))

    def all_subgraphs(self, graph: Graph | None = None) -> list[Graph]:
        """GE GetAllSubgraphs: the root's flat list of subgraphs, in the order the model
        lists them (the file's, until a sort of the root puts them in the order its
        numbering finds them: engine/core/toposort.py); a graph no live node owns is left
        out. With a `graph` below the root: the subgraphs under it, depth first."""
        if graph is None or graph is self.root:
            # Note [owned subgraphs]: a subgraph is under the root when its parent node is
            # live, still owns it, and sits in a graph under the root: decided per graph from
            # the parent links (the passes ask once per graph pass; a walk of every node to
            # find the subgraphs took 0.13 s a run at 100k nodes)
            root = self.root
            under: dict[Graph, bool] = {root: True}

            def owned(g: Graph) -> bool:
                chain = []
                while g not in under:
                    chain.append(g)
                    p = g.parent_node
                    if p is None or not p.alive or g not in p.subgraphs:
                        break
                    g = p.graph
                ok = under.get(g, False)
                for x in chain:
                    under[x] = ok
                return ok
            return [g for g in self.graph_order if g is not root and owned(g)]
        return _graphs_under(graph)

    def node_count(self) -> int:
        return sum(g.count for g in self.graphs.values())

    def unique_name(self, graph: Graph, base: str) -> str:
        return base if base not in graph.by_name else _bump(graph, base)


def walk(graph: Graph, nodes_of=Graph.nodes) -> Iterator[Node | Graph]:
    """Every node under `graph` depth first, each node followed by its subgraphs (each
    yielded as it is entered, then its nodes), in subgraph index order; a graph's nodes
    are `nodes_of(graph)`, read as they are reached (so a live iterator sees insertions).
    Note [no recursion]: subgraph nesting is the input's to choose (If in If thousands of
    levels deep), so the walk keeps its own stack instead of recursing."""
    stack: list[tuple[bool, Iterator]] = [(False, iter(nodes_of(graph)))]
    while stack:
        in_subgraphs, it = stack[-1]
        if in_subgraphs:
            sg = next(it, None)
            if sg is None:
                stack.pop()
            else:
                yield sg
                stack.append((False, iter(nodes_of(sg))))
            continue
        for x in it:            # a graph's nodes in one loop until one owns subgraphs
            yield x
            if x.subgraphs:
                subs = [sg for sg in x.subgraphs if sg is not None]
                if subs:
                    stack.append((True, iter(subs)))
                    break
        else:
            stack.pop()


# Note [decode rollback]: a reader that decodes lean nodes only to write fields it puts back
# afterwards (the run report's second placement of the variables, engine/report/varlinks.py)
# runs inside `decodes_rolled_back`. Each lean node decoded there is logged with what the
# decode changed (its lean op, that op's input entries, key order and attribute keys) and
# goes back to its encoded op at the end: its writes go with the decoded op, and the save
# writes its original bytes as for a node never decoded. The decodes are made in a holder
# message of the window's own (Note [op memory]), let go at the end, so their memory is
# freed. Only for code that changes nothing but fields of decoded ops: no lean writes, no
# edges, no nodes added or removed (a node made inside keeps its op: a message keeps the
# holder it lives in alive).
_ROLLBACK: list | None = None


@contextmanager
def decodes_rolled_back(model: "Model") -> Iterator[list]:
    """Every lean node of `model` decoded inside goes back to its encoded op at the end
    (Note [decode rollback]); yields the log, (node, lean op, ...) per decode, in order."""
    global _ROLLBACK
    outer, holder = _ROLLBACK, model._ops
    log = _ROLLBACK = []
    model._ops = None
    try:
        yield log
    finally:
        _ROLLBACK = outer
        model._ops = holder
        for node, lean, inputs, korder, akeys in log:
            node._op = None
            node.lean, node.korder, node.akeys = lean, korder, akeys
            if inputs is None:
                lean.input = None       # Note [compact inputs]: made from the graph again
            for a in node.ins:
                a._desc = None
            for a in node.outs:
                a._desc = None


def _nodes_under(graph: Graph) -> list[Node]:
    """`walk`'s nodes as a list, without its generators (the passes take this snapshot
    dozens of times a run): a stack of where each enclosing graph's list resumes."""
    out: list[Node] = []
    stack: list[Node | None] = [graph.head]
    while stack:
        n = stack.pop()
        while n is not None:
            if not n.alive:
                n = n.next
                continue
            out.append(n)
            if n.subgraphs:
                stack.append(n.next)
                stack.extend(sg.head for sg in reversed(n.subgraphs) if sg is not None)
                break
            n = n.next
    return out


def _graphs_under(graph: Graph) -> list[Graph]:
    """`walk`'s graphs as a list, each when it is entered (a graph, then the subgraphs of
    its nodes, depth first): the stack holds graphs to enter and nodes to resume at."""
    out: list[Graph] = []
    stack: list = [graph.head]
    while stack:
        n = stack.pop()
        if isinstance(n, Graph):
            out.append(n)
            n = n.head
        while n is not None:
            if n.alive and n.subgraphs:
                stack.append(n.next)
                stack.extend(sg for sg in reversed(n.subgraphs) if sg is not None)
                break
            n = n.next
    return out


def _bump(graph: Graph, base: str) -> str:
    k = 1
    while f"{base}_{k}" in graph.by_name:
        k += 1
    return f"{base}_{k}"
