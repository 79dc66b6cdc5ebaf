"""GE's ComputeGraph::TopologicalSorting (graph_metadef compute_graph.cc), every strategy.

Note [GE's topological sort]: GE does not keep a sorted order; each sort rebuilds it:
* the strategy (GetTopoSortingStrategy) is the option ge.topoSortingMode when it names one
  (0 BFS, 1 DFS, 2 reverse DFS, 3 stable reverse DFS), else BFS for a training graph
  (ge.graphRunMode >= 1), else DFS; the pack's `surgery.topological_sort` says so in rules;
* SortNodes puts the sources (no counted in-edge) on a stack: the others first, in reverse,
  then the inputs (IsDataNode, Input, Recv, Send), in reverse, so the first input is popped
  first and every input before any other source. A data edge from a loop's back-edge node
  (NextIteration) is not counted, which lets a loop's Merge start;
* DFS pushes, per output anchor and then for the control edges, the consumers whose last
  in-edge that was, in peer order; the last pushed is visited next;
* BFS queues them instead, each node's batch in name order;
* with ge.exec.memoryOptimizationPolicy=MemoryPriority both take from a set ordered by
  (data consumers, output bytes, name) instead, and DelayTopoSort then moves chains fed by
  long-lived values (constants, variables, inputs) down to just before their first consumer;
* the reverse strategies walk producers from the sinks (RDFS, by output bytes then name) or
  from every node in list order (stable RDFS, by position, keeping a sorted order).
Ids become positions. Sorting a root sorts each subgraph on its own, numbers every node in
GetAllNodes order, and lists the subgraphs in that order (sub_graph_.swap); sorting a
subgraph sorts its direct nodes alone (GE keeps every subgraph on the root).

Note [sorted stays sorted]: DFS and BFS read the list order only through the order of the
sources of each kind, which a sort keeps; so sorting what such a sort left, with no edit in
between, gives the same order. A graph remembers the policy that sorted it (`sorted_by`),
every edit forgets it (engine/core/surgery.py and the node list methods of Graph), and a sort
by the same repeatable policy only renumbers; a root's sort that finds every graph so, and the
model numbered by that policy's last root sort (`Model.numbered_by`; a subgraph sorted alone
numbers itself and drops it), does nothing. The memory-priority and reverse strategies do not
repeat themselves in general (DelayTopoSort moves nodes again) and always sort.
"""
from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass
from typing import Callable

from engine.core.graph import Graph, Model, Node
from engine.core.surgery import predecessors, successors

MODES = ("bfs", "dfs", "rdfs", "stable_rdfs")       # TopoSortingMode 0..3


def _never(node: Node) -> bool:
    return False


@dataclass(frozen=True, eq=False)
class SortPolicy:
    """How TopologicalSorting sorts in one run (the pack's `surgery.topological_sort` and
    the run's options, engine/passes/manager.py)."""

    mode: str = "dfs"
    memory_priority: bool = False
    inputs_first: Callable[[Node], bool] = _never     # SortNodes' input nodes
    loop_back: Callable[[Node], bool] | None = None   # GetInEdgeSize leaves out a data edge from these
    loop_types: frozenset | None = None               # the types loop_back can hold for (None: any)
    long_lived: Callable[[Node], bool] = _never       # InputIsLongLifeTimeNode, of a producer
    output_size: Callable[[Node], int] | None = None  # GetNodeOutputRealSize

    @property
    def repeatable(self) -> bool:
        """Note [sorted stays sorted]."""
        return self.mode in ("bfs", "dfs") and not self.memory_priority

    @property
    def delays(self) -> bool:
        """DoTopologicalSorting runs DelayTopoSort after the strategy."""
        return (self.memory_priority and self.mode != "stable_rdfs") or self.mode == "rdfs"


DEFAULT = SortPolicy()


def policy_of(model: Model | None) -> SortPolicy:
    pol = model.sort_policy if model is not None else None
    return pol if pol is not None else DEFAULT


# ---- one graph -------------------------------------------------------------------
def sort_graph(graph: Graph, policy: SortPolicy | None = None, renumber: bool = True) -> bool:
    """DoTopologicalSorting on `graph`'s direct nodes: reorder them, ids 0..n-1 (unless
    `renumber` is false: the caller numbers them). False when some node is never reached (a
    cycle): the order is left as it was, as GE leaves it."""
    pol = policy if policy is not None else policy_of(graph.model)
    if pol.repeatable and graph.sorted_by is pol:
        if renumber:
            number(graph.node_list())
        return True
    nodes = graph.node_list()
    if pol.mode in ("dfs", "bfs"):
        out = _forward(nodes, pol)
    elif pol.mode == "rdfs":
        out = _reverse(nodes, pol)
    else:
        out = _stable_reverse(nodes, pol)
    if len(out) != len(nodes):
        return False
    if pol.delays:
        out = _delay(out, pol)
    if out != nodes:
        graph.reorder(out)
    if renumber:
        number(out)
    graph.sorted_by = pol
    return True


def number(nodes: list[Node]) -> None:
    """Ids 0..n-1 in the order of `nodes`, writing only those that differ."""
    i = 0
    for n in nodes:
        # Node.id without the property: a lean node's id is in its lean message (Note [lean ops])
        op = n._op
        if op is None:
            op = n.lean
        if op.id != i:
            op.id = i
        i += 1


def depth_first_order(nodes: list[Node]) -> list[Node] | None:
    """The nodes in the default policy's depth-first order, without reordering anything (a
    node after its inputs, as GE's node-pass runner visits them); None on a cycle."""
    order = _forward(nodes, DEFAULT)
    return order if len(order) == len(nodes) else None


def _in_counts(nodes: list[Node], pol: SortPolicy) -> dict[Node, int]:
    """GetInEdgeSize of each node: connected data inputs, but those fed by a loop's
    back-edge node, plus control inputs."""
    back, types = pol.loop_back, pol.loop_types
    counts: dict[Node, int] = {}
    if back is not None and types is None:      # any node may be a back-edge source: ask per edge
        for n in nodes:
            k = len(n.in_ctrl)
            for a in n.ins:
                p = a.peer
                if p is not None and not back(p.node):
                    k += 1
            counts[n] = k
        return counts
    for n in nodes:
        k = len(n.in_ctrl)
        for a in n.ins:
            if a.peer is not None:
                k += 1
        counts[n] = k
    if back is not None:
        # the back-edge sources (a type the test can hold for, then the test), per node rather
        # than per edge: their data edges are taken off their consumers' counts
        for n in nodes:
            if n.type in types and back(n):
                for o in n.outs:
                    for p in o.peers:
                        c = p.node
                        if c in counts:
                            counts[c] -= 1
    return counts


def _sources(nodes: list[Node], counts: dict[Node, int], pol: SortPolicy) -> list[Node]:
    """SortNodes' stack (popped from the end): the other sources reversed, then the inputs
    reversed."""
    inputs, others = [], []
    first = pol.inputs_first
    for n in nodes:
        if counts[n] == 0:
            (inputs if first(n) else others).append(n)
    others.reverse()
    inputs.reverse()
    return others + inputs


def _forward(nodes: list[Node], pol: SortPolicy) -> list[Node]:
    """DFSTopologicalSorting / BFSTopologicalSorting (TopoSortStack)."""
    counts = _in_counts(nodes, pol)
    stack = _sources(nodes, counts, pol)
    if pol.memory_priority:
        return _by_priority(stack, counts, pol)
    out: list[Node] = []
    emit = out.append
    if pol.mode == "dfs":
        # Note [inline DFS]: _freed's loop written out here: the depth-first sort is every
        # run's (three full sorts at 100k nodes), and the call and list per node were a third
        # of its time (0.20 -> 0.14 s at 100k)
        get = counts.get
        pop, push = stack.pop, stack.append
        while stack:
            n = pop()
            emit(n)
            for o in n.outs:
                for p in o.peers:
                    s = p.node
                    c = get(s)
                    if c is not None:
                        counts[s] = c - 1
                        if c == 1:
                            push(s)
            if n.out_ctrl:
                for s in n.out_ctrl:
                    c = get(s)
                    if c is not None:
                        counts[s] = c - 1
                        if c == 1:
                            push(s)
        return out
    queue: deque[Node] = deque()
    while stack or queue:
        n = queue.popleft() if queue else stack.pop()
        emit(n)
        freed = _freed(n, counts)
        if freed:
            batch: dict[str, Node] = {}
            for s in freed:
                batch.setdefault(s.name, s)     # std::map::emplace by name: a second one is dropped
            queue.extend(batch[k] for k in sorted(batch))
    return out


def _freed(n: Node, counts: dict[Node, int]) -> list[Node]:
    """The successors whose last counted in-edge was n's, in the order GE pushes them: each
    output's consumers in peer order, then the control successors (GetOutNodesFromAnchor)."""
    out = []
    get = counts.get
    for s in successors(n):
        c = get(s)
        if c is not None:
            counts[s] = c - 1
            if c == 1:
                out.append(s)
    return out


def _by_priority(stack: list[Node], counts: dict[Node, int], pol: SortPolicy) -> list[Node]:
    """TopoSortStack under MemoryPriority: the next node is the least by NodeOutInfo
    (data consumers, output bytes, name). DFS starts with every source in the set; BFS
    takes a source from its stack only when the set is empty."""
    size = _sizes(pol)
    heap: list[tuple[int, int, str, Node]] = []
    held: set[tuple[int, int, str]] = set()

    def push(n: Node) -> None:
        # std::map::emplace: a node whose key is held already is dropped (the sort then
        # comes out short, and fails as on a cycle)
        key = (sum(len(o.peers) for o in n.outs), size(n), n.name)
        if key not in held:
            held.add(key)
            heapq.heappush(heap, (*key, n))

    if pol.mode == "dfs":
        while stack:
            push(stack.pop())
    out: list[Node] = []
    while heap or stack:
        if heap:
            item = heapq.heappop(heap)
            held.discard(item[:3])
            n = item[3]
        else:
            n = stack.pop()
        out.append(n)
        for s in _freed(n, counts):
            push(s)
    return out


def _sizes(pol: SortPolicy) -> Callable[[Node], int]:
    """GetNodeOutputRealSize, once per node: the sum of its outputs' CalcTensorMemSize (a
    failing one adds nothing). GE keeps the sum only when it is not 0, and computes a 0
    again each time: the same answer."""
    calc = pol.output_size
    memo: dict[Node, int] = {}

    def size(n: Node) -> int:
        v = memo.get(n)
        if v is None:
            v = memo[n] = calc(n) if calc is not None else 0
        return v
    return size


def _reverse(nodes: list[Node], pol: SortPolicy) -> list[Node]:
    """RDFSTopologicalSorting: from each sink in list order, producers first, a node's
    inputs taken smallest output first (then by name)."""
    size = _sizes(pol)

    def inputs(cur: Node, status: dict) -> list[Node]:
        ins = _distinct(predecessors(cur))
        ins.sort(key=lambda n: (size(n), n.name), reverse=True)
        return ins
    sinks = [n for n in nodes if not n.out_ctrl and not any(o.peers for o in n.outs)]
    return _producers_first(nodes, sinks, inputs)


def _stable_reverse(nodes: list[Node], pol: SortPolicy) -> list[Node]:
    """StableRDFSTopologicalSorting: from every node in list order, producers first, a
    node's unwalked inputs taken in list order (InitNodeStatus numbers the list first)."""
    number(nodes)
    pos = {n: i for i, n in enumerate(nodes)}

    def inputs(cur: Node, status: dict) -> list[Node]:
        ins = [n for n in _distinct(predecessors(cur)) if status.get(n, 0) == 0]
        ins.sort(key=pos.__getitem__, reverse=True)
        return ins
    return _producers_first(nodes, nodes, inputs)


def _producers_first(nodes: list[Node], starts: list[Node], inputs) -> list[Node]:
    """The reverse strategies' walk: from each start not yet walked, a node is pushed, then
    `inputs(node, status)` above it (the last is walked first), and it is emitted when it
    comes back to the top; met again while its own inputs are being walked (a cycle), it is
    emitted there, as GE's walk emits it."""
    status: dict[Node, int] = dict.fromkeys(nodes, 0)        # 0 not walked, 1 walking, 2 walked
    out: list[Node] = []
    for start in starts:
        if status[start] == 2:
            continue
        stack = [start]
        while stack:
            cur = stack[-1]
            st = status.get(cur, 0)
            if st == 0:
                status[cur] = 1
                stack.extend(inputs(cur, status))
                continue
            stack.pop()
            if st == 1:
                status[cur] = 2
                out.append(cur)
    return out


def _distinct(nodes: list[Node]) -> list[Node]:
    return list(dict.fromkeys(nodes))


def _delay(nodes: list[Node], pol: SortPolicy) -> list[Node]:
    """DelayTopoSort: a chain that starts at a node fed only by long-lived values and goes
    on through single-input nodes moves to just before its first consumer, when that comes
    two or more places later; a chain that moved to a node with several consumers stops
    there."""
    number(nodes)
    n = len(nodes)
    movable = [True] * n
    groups: list[list[Node]] = [[x] for x in nodes]
    moved = 0
    for i in range(n):
        if not movable[i] or not groups[i]:
            continue
        found = _first_consumer(groups[i], pol)
        if found is None:
            continue
        to, outs = found
        if to < n and to > i + 1:
            groups[to][:0] = groups[i]
            if outs > 1:
                movable[to] = False
            groups[i] = []
            moved += 1
    if not moved:
        return nodes
    return [x for g in groups for x in g]


def _first_consumer(group: list[Node], pol: SortPolicy) -> tuple[int, int] | None:
    """GetOutNodeIndex: (the smallest id among the last node's consumers, their count), or
    None when the chain cannot move (its first node has an input that is not long-lived,
    its last node has several inputs, or no consumer)."""
    if len(group) == 1 and not _long_lived_inputs(group[0], pol):
        return None
    last = group[-1]
    if len(group) != 1 and len(last.ins) != 1:
        return None
    least = 0
    count = 0
    found = False
    for s in successors(last):
        count += 1
        k = s.id
        if least == 0 or k < least:
            least = k
            found = True
    return (least, count) if found else None


def _long_lived_inputs(node: Node, pol: SortPolicy) -> bool:
    """InputIsLongLifeTimeNode: it has a connected input, and every one is fed by a
    long-lived value."""
    match = False
    for a in node.ins:
        if a.peer is None:
            continue
        if not pol.long_lived(a.peer.node):
            return False
        match = True
    return match


# ---- a model ---------------------------------------------------------------------
def sort_model(model: Model, graph: Graph | None = None, policy: SortPolicy | None = None) -> list[Graph]:
    """ComputeGraph::TopologicalSorting on `graph` (default the root). Returns the graph a
    cycle stopped it at (GE stops at the first), or []."""
    pol = policy if policy is not None else policy_of(model)
    top = model.root if graph is None else graph
    if top is not model.root:
        model.numbered_by = None            # ids of this graph alone
        return [] if sort_graph(top, pol) else [top]
    subs = [g for g in model.graph_order if g is not top]
    # Note [sorted stays sorted]: nothing edited since this policy sorted and numbered the model
    if pol.repeatable and model.numbered_by is pol and top.sorted_by is pol \
            and all(g.sorted_by is pol for g in subs):
        return []
    model.numbered_by = None
    if not sort_graph(top, pol, renumber=not subs):
        return [top]
    for g in subs:
        if not sort_graph(g, pol):          # a graph no node owns keeps these ids
            return [g]
    if subs:
        nodes = model.all_nodes(top)
        number(nodes)
        found = _found_subgraphs(nodes)
        if len(found) == len(subs) and found != subs:
            model.graph_order[:] = [top] + found
    if pol.repeatable:
        model.numbered_by = pol
    return []


def _found_subgraphs(nodes: list[Node]) -> list[Graph]:
    """The subgraphs in the order AllGraphNodes finds them: as it takes each node (in
    GetAllNodes order), that node's subgraphs from the last to the first (it walks the
    names backwards, putting each one's nodes in front)."""
    out: list[Graph] = []
    for n in nodes:
        if n.subgraphs:
            out.extend(g for g in reversed(n.subgraphs) if g is not None)
    return out
