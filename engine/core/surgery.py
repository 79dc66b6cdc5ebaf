"""Edge edits and GE's graph-surgery primitives (ge-conflict-rules.md §2).

All functions keep peer lists ordered the way GE's anchors do, because several
rules ("the first consumer keeps the direct edge") read that order.
"""
from __future__ import annotations

from typing import Callable, Iterable

from engine.core.attrs import attrs_changed
from engine.core.graph import Graph, InAnchor, Model, Node, OutAnchor, write_port_names
from engine.proto import ge_ir_pb2 as pb


# ---- finding an entry in a peer list ----------------------------------------------
# Note [hinted search]: an edge leaves a peer list by position (GE's anchors keep vectors),
# and `list.remove` scans from the front: a MemSet controlling 40 % of the graph whose
# successors each get an Identity moved in front of them cost O(N) per edge, O(N²) per
# pass. The search starts at the position the list's last removal was found at and widens
# in doubling windows both ways, so walking a list in order (what every pass does) costs
# O(distance) per edge; the entry found, hence the result, is the one `list.index` finds
# (entries are unique: a repeated control edge is not searched so, Note [repeated control
# edges]). Hints are kept for long lists only, keyed by id (a stale hint only
# costs a wider search).
_SHORT = 32
_hints: dict[int, int] = {}
scanned = [0]       # entries compared by the searches of long lists (tests count the work)


def position(lst: list, x) -> int:
    """The index of `x` in `lst` (ValueError if absent), searched from the list's hint."""
    n = len(lst)
    if n <= _SHORT:
        return lst.index(x)
    h = min(_hints.get(id(lst), 0), n)
    lo = hi = h
    w = _SHORT
    while lo > 0 or hi < n:
        nhi = min(n, hi + w)
        if nhi > hi:
            scanned[0] += nhi - hi
            try:
                i = lst.index(x, hi, nhi)
                break
            except ValueError:
                hi = nhi
        nlo = max(0, lo - w)
        if nlo < lo:
            scanned[0] += lo - nlo
            try:
                i = lst.index(x, nlo, lo)
                break
            except ValueError:
                lo = nlo
        w *= 2
    else:
        raise ValueError(f"{x!r} is not in the list")
    if len(_hints) > 4096:      # lists come and go (a batch run loads many graphs)
        _hints.clear()
    _hints[id(lst)] = i
    return i


def _remove(lst: list, x) -> None:
    del lst[position(lst, x)]


# ---- data edges -----------------------------------------------------------
def link(src: OutAnchor, dst: InAnchor) -> None:
    if dst.peer is not None:
        unlink(dst.peer, dst)
    src.peers.append(dst)
    dst.peer = src
    n = dst.node
    n.dirty = True
    n.graph.sorted_by = None        # Note [sorted stays sorted] in engine/core/toposort.py


def unlink(src: OutAnchor, dst: InAnchor) -> None:
    _remove(src.peers, dst)
    dst.peer = None
    n = dst.node
    n.dirty = True
    n.graph.sorted_by = None


def replace_peer(src: OutAnchor, old: InAnchor, new: InAnchor) -> None:
    """GE Anchor::ReplacePeer: `new` takes `old`'s position in src's peer list."""
    pos = position(src.peers, old)
    src.peers[pos] = new
    old.peer = None
    old.node.dirty = True
    if new.peer is not None:
        unlink(new.peer, new)
    new.peer = src
    new.node.dirty = True
    new.node.graph.sorted_by = None


# ---- control edges ----------------------------------------------------------
# Note [repeated control edges]: GE's OutControlAnchor::LinkTo appends to both anchors'
# peer lists without asking whether the two are linked already, so a control edge can be
# there twice (AtomicAddrCleanPass's LinkToPotentialPrecedenceNode links a node once per
# time it is an output node of an input-less Data or Variable; GraphUtils::InsertNodeBefore
# moves every in-control edge, a repeated one twice). GetOutControlNodes, GetInEdgeSize
# and the saved `src:-1` entries count each edge. Most GE call sites ask IsLinkedWith
# first, and so does `link_ctrl` unless told `repeat`. A node counts its edges to each
# control successor (`out_ctrl_count`); Anchor::Unlink removes the first matching peer
# from each list, which the hinted search finds only when the entry is there once, so a
# repeated edge is looked up from the front.
def link_ctrl(a: Node, b: Node, repeat: bool = False) -> None:
    """a → b, unless linked already and not `repeat` (GE's IsLinkedWith, then AddEdge)."""
    count = a.out_ctrl_count
    k = count.get(b, 0) if count else 0
    if k and not repeat:
        return
    if not a.out_ctrl:
        a.out_ctrl = []             # Note [shared empties] in engine/core/graph.py
    a.out_ctrl.append(b)
    if not count:
        count = a.out_ctrl_count = {}
    count[b] = k + 1
    if not b.in_ctrl:
        b.in_ctrl = []
    b.in_ctrl.append(a)
    b.dirty = True
    b.graph.sorted_by = None


def unlink_ctrl(a: Node, b: Node) -> None:
    """One edge a → b (the first of each list, as Anchor::Unlink takes it)."""
    count = a.out_ctrl_count
    k = count[b]
    if k == 1:
        del count[b]
        _remove(a.out_ctrl, b)
        _remove(b.in_ctrl, a)
    else:
        count[b] = k - 1
        a.out_ctrl.remove(b)
        b.in_ctrl.remove(a)
    b.dirty = True
    b.graph.sorted_by = None


def copy_in_ctrl(src: Node, dst: Node) -> None:
    """GraphUtils::CopyInCtrlEdges (AddCtrlEdges): src's control predecessors to dst, each
    edge of src's list but from a node dst had as one before (a repeat is copied again)."""
    had = set(dst.in_ctrl)
    for p in list(src.in_ctrl):
        if p not in had:
            link_ctrl(p, dst, repeat=True)


# ---- node creation --------------------------------------------------------
def make_op(name: str, type_: str, inputs: list[pb.TensorDescriptor], outputs: list[pb.TensorDescriptor],
            in_names: list[str] | None = None, out_names: list[str] | None = None, *,
            model: Model | None = None) -> pb.OpDef:
    """A new OpDef: one input/output per descriptor (copied), ports named when names are
    given; made in `model`'s op memory when it is given (Model.new_op)."""
    op = pb.OpDef(name=name, type=type_) if model is None else model.new_op(name, type_)
    for td in inputs:
        op.input_desc.add().CopyFrom(td)
    for td in outputs:
        op.output_desc.add().CopyFrom(td)
    write_port_names(op, in_names, out_names)
    return op


def add_node(graph: Graph, op: pb.OpDef) -> Node:
    """GE ComputeGraph::AddNode: at the end of the list, id = the number of nodes before it."""
    op.id = graph.count
    return new_node(graph, op, None)


def new_node(graph: Graph, op: pb.OpDef, after: Node | None) -> Node:
    """Add `op` to `graph`: right after `after` (sharing its id) or at the end."""
    node = Node(op, graph)
    if after is not None and after.graph is graph:
        graph.insert_after(node, after)
    else:
        graph.append(node)
    node.dirty = True
    return node


def inherit_attrs(dst: Node, src: Node, keys: Iterable[str]) -> None:
    for key in keys:
        if src.has_attr(key) and not dst.has_attr(key):
            dst.op.attr[key].CopyFrom(src.attr(key))      # a lean src is read lean (Note [lean ops])
            attrs_changed(dst)


def insert_before(dst: InAnchor, op: pb.OpDef, *, in_idx: int = 0, out_idx: int = 0,
                  keep_ctrl: Callable[[Node], bool] = lambda n: False,
                  inherit: Iterable[str] = ()) -> Node:
    """GE GraphUtils::InsertNodeBefore: producer → new.in[in_idx], new.out[out_idx] → dst.

    The new node sits right after the producer; the in-control edges of dst's node
    move to the new node, except those from nodes for which `keep_ctrl` holds.

    Note [edges appended]: GE removes producer → dst and adds producer → new (RemoveEdge,
    AddEdge), so the new node is the producer's last consumer, not in dst's place; the
    order is what a later sort pushes and the saved peer index records.
    """
    src = dst.peer
    node = new_node(dst.node.graph, op, src.node if src is not None else None)
    node.ensure_inputs(in_idx + 1)
    node.ensure_outputs(out_idx + 1)
    put_before(dst, node, in_idx, out_idx, keep_ctrl)
    inherit_attrs(node, dst.node, inherit)
    return node


def put_before(dst: InAnchor, node: Node, in_idx: int, out_idx: int,
               keep_ctrl: Callable[[Node], bool] = lambda n: False) -> list[Node]:
    """The edges of GraphUtils::InsertNodeBefore(dst, node, in_idx, out_idx) for a node that
    is in the graph already: producer → node.in[in_idx] (the producer's last consumer, Note
    [edges appended]), node.out[out_idx] → dst, and dst's node's in-control edges moved to
    `node`, each edge, but those from nodes `keep_ctrl` holds for (and from `node` itself).
    Returns the predecessors whose edges moved."""
    src = dst.peer
    if src is not None:
        unlink(src, dst)
        link(src, node.ins[in_idx])
    link(node.outs[out_idx], dst)
    target = dst.node
    moved = []
    for pred in list(target.in_ctrl):
        if pred is node or keep_ctrl(pred):
            continue
        unlink_ctrl(pred, target)
        link_ctrl(pred, node, repeat=True)      # each edge moves (Note [repeated control edges])
        moved.append(pred)
    return moved


def insert_after(src: OutAnchor, dsts: list[InAnchor], op: pb.OpDef, *,
                 move_ctrl: bool = True, inherit: Iterable[str] = ()) -> Node:
    """GE GraphUtils::InsertNodeAfter: src → new.in0, new.out0 → every dst.

    Note [insert-after order]: GE adds src → new first (the last of src's consumers), then
    moves each dst in turn (RemoveEdge, AddEdge; Note [edges appended]). The out-control
    edges of src's node move to the new node when `move_ctrl`, at the first dst (none
    move when there is no dst).
    """
    owner = src.node.graph
    node = new_node(owner, op, src.node)
    node.ensure_inputs(1)
    node.ensure_outputs(1)
    link(src, node.ins[0])
    for dst in dsts:
        unlink(src, dst)
        link(node.outs[0], dst)
    if move_ctrl and dsts:
        s = src.node
        for succ in list(s.out_ctrl):
            unlink_ctrl(s, succ)
            link_ctrl(node, succ, repeat=True)
    inherit_attrs(node, src.node, inherit)
    return node


def isolate(node: Node, io_map: list[int]) -> None:
    """GE GraphUtils::IsolateNode: bypass data through io_map, bridge control, unlink."""
    preds = list(dict.fromkeys(predecessors(node)))     # GetInNodes, each once
    succs = list(dict.fromkeys(successors(node)))       # GetOutNodes, each once, in order
    relinked: dict[Node, list[Node]] = {}       # GE RelinkDataIO's connected_data_in_to_out
    relinked_to: dict[Node, list[Node]] = {}    # ... and connected_data_out_to_in
    for i, o in enumerate(node.outs):
        src = None
        if i < len(io_map) and 0 <= io_map[i] < len(node.ins):
            src = node.ins[io_map[i]].peer
        for dst in list(o.peers):
            unlink(o, dst)
            if src is not None:
                link(src, dst)
                relinked.setdefault(src.node, []).append(dst.node)
                relinked_to.setdefault(dst.node, []).append(src.node)
    noop = node.graph.model.isolate_noop if node.graph is not None and node.graph.model is not None else None
    k_in, k_out = len(preds), len(succs)
    if noop is not None and k_in * k_out > noop.threshold and k_in * k_out > k_in + k_out:
        _bridge_through(node, noop, preds, succs, relinked, relinked_to)
        detach(node)
        return
    # Note [control bridge]: GE RelinkControlNodeIfNeed links every predecessor to every
    # successor but the pairs the data just relinked through the node and those linked by
    # control already; a data edge the pair had before does not count (GE adds the control
    # edge beside it). The predecessors are a std::map by NodeCompareKey: in name order.
    for p in sorted(preds, key=_by_name):
        done = relinked.get(p, ())
        for s in succs:
            if p is s or p is node or s is node or s in done:
                continue
            link_ctrl(p, s)             # nothing when p → s is a control edge already
    detach(node)


def _by_name(n: Node) -> str:
    return n.name


def _bridge_through(node: Node, noop, preds: list[Node], succs: list[Node],
                    relinked: dict[Node, list[Node]], relinked_to: dict[Node, list[Node]]) -> None:
    """RelinkControlNodeWithNoOpOptimize: one `<node>_noop` (AddNode) after every predecessor
    the data did not relink to every successor, before every successor the data did not relink
    from every predecessor. GE keeps both sides in a std::set of pointers (address order,
    which no file records): name order here."""
    ins = [p for p in sorted(preds, key=_by_name) if len(relinked.get(p, ())) != len(succs)]
    outs = [s for s in sorted(succs, key=_by_name) if len(relinked_to.get(s, ())) != len(preds)]
    if not ins or not outs:
        return
    bridge = add_node(node.graph, make_op(node.name + noop.suffix, noop.type, [], [], model=node.graph.model))
    for p in ins:
        link_ctrl(p, bridge, repeat=True)
    for s in outs:
        link_ctrl(bridge, s, repeat=True)


def detach(node: Node) -> None:
    """Remove every edge of `node`."""
    for a in node.ins:
        if a.peer is not None:
            unlink(a.peer, a)
    for o in node.outs:
        for dst in list(o.peers):
            unlink(o, dst)
    for p in list(node.in_ctrl):
        unlink_ctrl(p, node)
    for s in list(node.out_ctrl):
        unlink_ctrl(node, s)


def remove_node(node: Node) -> None:
    detach(node)
    node.graph.unlink_from_list(node)


# ---- ordering (the sorts themselves: engine/core/toposort.py) ------------------
def successors(n: Node) -> list[Node]:
    """GetOutAllNodes: data consumers (output, then peer order), then control successors,
    with repeats (one per edge)."""
    out = [p.node for o in n.outs for p in o.peers]
    out.extend(n.out_ctrl)
    return out


def predecessors(n: Node) -> list[Node]:
    """GetInAllNodes: the producers of the connected inputs (input order), then control
    predecessors, with repeats."""
    out = [a.peer.node for a in n.ins if a.peer is not None]
    out.extend(n.in_ctrl)
    return out


def find_cycle(graph: Graph, ignore_edge: Callable[[Node, Node], bool]) -> list[Node] | None:
    """A data/control cycle among the direct nodes, skipping edges `ignore_edge(a, b)`
    (a predicate without side effects): None, or the nodes on or behind a cycle, in order.

    Note [forward edges]: when every counted edge goes forward in the list order, that
    order is a topological one and there is no cycle; a graph as GE dumps it (and as
    topo_sort leaves it) is in such an order. One walk that remembers the nodes passed
    finds out, and asks `ignore_edge` only about edges back to a node passed (a loop's
    back edge): no per-node list and no in-degree table. Only a graph with a counted
    backward edge goes on to Kahn's algorithm below."""
    if not _has_backward_edge(graph, ignore_edge):
        return None
    order = graph.node_list()
    indeg = {n: 0 for n in order}
    kept: dict[Node, list[Node]] = {}       # each node's counted edges, decided once
    for n in order:
        succ = kept[n] = [s for s in successors(n) if s in indeg and not ignore_edge(n, s)]
        for s in succ:
            indeg[s] += 1
    stack = [n for n in order if indeg[n] == 0]
    seen = 0
    while stack:
        n = stack.pop()
        seen += 1
        for s in kept[n]:
            indeg[s] -= 1
            if indeg[s] == 0:
                stack.append(s)
    if seen == len(order):
        return None
    return [n for n in order if indeg[n] > 0]


def _has_backward_edge(graph: Graph, ignore_edge: Callable[[Node, Node], bool]) -> bool:
    """Some edge not ignored goes from a direct node to itself or to one before it
    (Note [forward edges]); edges to nodes outside the list do not count."""
    passed: set[Node] = set()
    mark = passed.add
    n = graph.head
    while n is not None:
        if n.alive:
            mark(n)
            for o in n.outs:
                for p in o.peers:
                    if p.node in passed and not ignore_edge(n, p.node):
                        return True
            for c in n.out_ctrl:
                if c in passed and not ignore_edge(n, c):
                    return True
        n = n.next
    return False
