"""Algorithm `atomic_clean`: GE's AtomicAddrCleanPass (ge-conflict-rules.md §6.5),
GE's structure with every op type, attribute name, option and node name from the
pack's `atomic_clean` section.

Per graph (the runner calls it for the root and then each subgraph):

1. detection, in node order: an op the registry marks atomic whose inputs come
   from no user input is an *HCCL atomic* node; otherwise a node carrying atomic
   attributes is marked atomic and is either collected, or compiled separately
   (marked, not collected) when the clean policy says so or when it feeds a no-task
   node / references a variable;
2. an unknown-shape graph gets no clean node;
3. a loop graph (one with a loop-cond node; Note [sticky loop flag]) gives every
   collected node its own clean node;
4. otherwise nodes connected to the graph output get their own (dispersed) clean
   node, and the rest share one, which is also ordered before the producers of
   every HCCL atomic node and before every successor of an input-less Data or
   Variable.

Clean nodes are added at the graph front (after a leading Data) and named by the
pack's templates (GE: [<graph>_]<base><session id><counter>, plus the index the loop
and dispersed cases append); they are MemSet nodes when the kernel store supports
MemSet, AtomicAddrClean nodes otherwise.
"""
from __future__ import annotations

import string
from dataclasses import dataclass
from typing import Any, Callable

from engine.passes.registry import Algorithm, register
from engine.core import surgery
from engine.passes.context import Diagnostic, Insertion
from engine.passes.probe import ISOLATED, NO_CONFLICT, Step
from engine.dsl.compiler import Compiler
from engine.dsl.ast import Expr
from engine.core.errors import Cite, Collector, Loc, PassFailure, did_you_mean
from engine.core.graph import Graph, Node
from engine.pack.model import Pack
from engine.pack.loader import parse_rule_expr, register_rule_id
from engine.dsl.library import bound_functions
from engine.core.attrs import attr_value, attrs_changed, node_typed, set_attr, set_node_attr
from engine.dsl.queries import QUERY_PRIMITIVES
from engine.core.schema import Reader
from engine.core.yamlloc import span_of

PREDICATES = {
    "clean_separately": "the clean policy compiles every atomic node's clean task itself (over no node)",
    "use_memset": "the kernel store supports the MemSet op (over no node)",
    "unknown_graph": "the graph is unknown-shape: no clean node is inserted",
    "loop_node": "a node that makes the graph a loop graph",
    "kernel_atomic": "the op registry marks the op atomic (HCCL)",
    "user_input": "a producer that keeps a kernel-atomic op from being an HCCL atomic node",
    "atomic_attrs": "the node carries atomic clean attributes",
    "compile_separately": "the node's clean task is compiled with the node (no-task consumer, variable reference)",
    "output_only": "only outputs need cleaning (loop graphs skip it when every atomic output feeds an HCCL atomic node)",
    "dispersed": "the node is connected to the graph output and gets its own clean node",
    "first_node": "an input-less graph input whose successors the shared clean node precedes",
    "not_second": "a successor of a first node that is never linked",
    "front_after": "a first node the clean node is added after (AddNodeFront)",
    "already_cleaned": "Note [idempotent re-run]: an atomic node this pass already handled",
}


NAME_FIELDS = ("prefix", "base", "session", "n", "index")


@dataclass(frozen=True, slots=True)
class CleanOp:
    type: str
    name: str
    attrs: tuple[tuple[str, Any], ...]
    loc: Loc


@dataclass(frozen=True)
class AtomicConfig:
    predicates: dict[str, Expr]
    pred_cites: dict[str, Cite]          # each predicate's value, quoted as its `name: expr` entry
    atomic_output_attr: str
    mark_atomic: str
    mark_gentask: str
    stream_label_attr: str
    session_attr: str
    memset: CleanOp
    fallback: CleanOp
    names: dict[str, str]
    subgraph_prefix: str
    loc: Loc
    # LinkToPotentialPrecedenceNode: "each_edge" links a second node once per time it is an
    # output node of a first node (GE's LinkTo asks nothing; Note [repeated control edges]
    # in engine/core/surgery.py), "once" once in all
    precedence_links: str = "once"


# ---- loading --------------------------------------------------------------------------
def load(value: Any, pack: Pack, errors: Collector) -> AtomicConfig | None:
    r = Reader(value, "atomic_clean", errors, Loc(str(pack.path)))
    r.get("doc", str, "")
    pr = Reader(r.get("predicates", dict, {}, required=True), "atomic_clean.predicates", errors, r.loc)
    preds, locs = {}, {}
    for name in PREDICATES:
        text = pr.get(name, (str, bool), None, required=True)
        e = parse_rule_expr(text, pr.value_loc(name), errors) if text is not None else None
        if e is not None:
            preds[name] = e
            entry = span_of(pr.map, name, pr.loc)
            locs[name] = Cite("", pr.value_loc(name), entry[1], entry)
    pr.done()
    keys = {k: str(r.get(k, str, "", required=True)) for k in
            ("atomic_output_attr", "mark_atomic", "mark_gentask", "stream_label_attr", "session_attr")}
    memset = _clean_op(r.get("memset", dict, None, required=True), "atomic_clean.memset", errors, r.loc)
    fallback = _clean_op(r.get("fallback", dict, None, required=True), "atomic_clean.fallback", errors, r.loc)
    nr = Reader(r.get("names", dict, {}, required=True), "atomic_clean.names", errors, r.loc)
    names = {k: _template(nr, k, NAME_FIELDS, errors) for k in ("shared", "dispersed", "loop")}
    nr.done()
    prefix = _template(r, "subgraph_prefix", ("graph",), errors)
    links = str(r.get("precedence_links", str, "once"))
    if links not in PRECEDENCE_LINKS:
        errors.error(r.value_loc("precedence_links"), f"atomic_clean.precedence_links: unknown value '{links}'",
                     did_you_mean(links, PRECEDENCE_LINKS, "values"))
    r.done()
    for rid in ("atomic/shared", "atomic/dispersed", "atomic/loop"):
        register_rule_id(pack, rid, r.loc, errors)
    comp = Compiler(pack.scope(("graph", "node"), {}, QUERY_PRIMITIVES), errors)
    for name, e in preds.items():
        comp.check(e, (), "bool", f"predicate '{name}'")
    if errors or memset is None or fallback is None:
        return None
    return AtomicConfig(preds, locs, memset=memset, fallback=fallback, names=names, subgraph_prefix=prefix,
                        loc=r.loc, precedence_links=links, **keys)


PRECEDENCE_LINKS = ("once", "each_edge")


def _template(r: Reader, key: str, fields: tuple[str, ...], errors: Collector) -> str:
    text = str(r.get(key, str, "", required=True))
    try:
        used = [f for _, f, _, _ in string.Formatter().parse(text) if f is not None]
    except ValueError as exc:
        errors.error(r.value_loc(key), f"{key}: bad name template: {exc}", "write fields as {name}")
        return text
    for f in used:
        if f not in fields:
            errors.error(r.value_loc(key), f"{key}: unknown name field '{{{f}}}'", did_you_mean(f, fields, "name fields"))
    return text


def _clean_op(value: Any, what: str, errors: Collector, fallback: Loc) -> CleanOp | None:
    r = Reader(value, what, errors, fallback)
    typ = str(r.get("type", str, "", required=True))
    name = str(r.get("name", str, "", required=True))
    attrs = r.get("attrs", dict, {}) or {}
    r.done()
    out = []
    for k, v in attrs.items():
        if not isinstance(v, (bool, int, str, list)):
            errors.error(attrs.value_locs[k], f"{what}: attribute '{k}' must be a bool, int, string or list", "")
            continue
        out.append((str(k), list(v) if isinstance(v, list) else v))
    return CleanOp(typ, name, tuple(out), r.loc) if typ and name else None


# ---- running --------------------------------------------------------------------------
class _State:
    """What one invocation of the pass keeps across the graphs it visits.

    Note [sticky loop flag]: GE's `is_loop_graph_` is a member that ClearStatus does
    not reset, so once a loop graph was seen, every later graph of the same
    PassManager run is handled as a loop graph. The root starts a new run."""

    def __init__(self, ctx, cfg: AtomicConfig, spec):
        self.loop = False
        comp = Compiler(ctx.pack.scope(("graph", "node"), functions=bound_functions(ctx, QUERY_PRIMITIVES)),
                        Collector())
        self.p: dict[str, Callable] = {k: comp.function(e, ("graph", "node")) for k, e in cfg.predicates.items()}


class AtomicPass:
    def __init__(self, ctx, cfg: AtomicConfig, spec, state: _State, graph: Graph):
        self.ctx, self.cfg, self.spec, self.state, self.graph = ctx, cfg, spec, state, graph
        self.p = state.p
        self.hcom: list[Node] = []        # hcom_node_vec_ (cleared per graph)
        self.hcom_set: set[Node] = set()
        self.gentask: list[Node] = []     # need_gentask_atomic_node_

    def pred(self, name: str, node: Node | None = None) -> bool:
        return bool(self.p[name](self.graph, node))

    # ---- detection --------------------------------------------------------------------
    def hccl_atomic(self, node: Node) -> bool:
        """CheckAtomicFromOpsKernel (records the node as an HCCL atomic node)."""
        p, g = self.p, self.graph
        if not p["kernel_atomic"](g, node):
            return False
        user_input = p["user_input"]
        if any(a.peer is not None and user_input(g, a.peer.node) for a in node.ins):
            return False
        if node not in self.hcom_set:
            self.hcom.append(node)
            self.hcom_set.add(node)
        return True

    def need_clean(self, node: Node, separately: bool) -> bool:
        # the hot tests call their predicates directly (`pred` is one more frame per call)
        p, g = self.p, self.graph
        if p["already_cleaned"](g, node):
            return False
        if not separately and self.hccl_atomic(node):
            return True
        if not p["atomic_attrs"](g, node):
            return False
        self.mark(node, self.cfg.mark_atomic, "the node carries atomic clean attributes")
        if separately:
            self.mark(node, self.cfg.mark_gentask, "the clean policy cleans every atomic node separately")
            return False
        if self.pred("compile_separately", node):
            self.mark(node, self.cfg.mark_gentask, "it feeds a no-task node or references a variable")
            self.gentask.append(node)
            return False
        return True

    # ---- why not (only with a probe) -------------------------------------------------------
    def _why_not(self, asked: dict, atomic: set) -> None:
        """For each node the probe asks about: IsNeedCleanNode's tests in GE's order, the one
        that decided, then the graph-wide gate (unknown graph) and the HCCL and loop skips."""
        probe = self.ctx.probe
        for node, (steps, decisive) in asked.items():
            if node not in atomic:
                probe.look(self.spec.id, self.graph, node.name, NO_CONFLICT, "not-atomic", steps, decisive)
                continue
            if self.pred("unknown_graph"):
                steps.append(Step(f"unknown_graph: graph {self.graph.name} has unknown shape", "holds",
                                  self._cite("", "unknown_graph")))
                probe.look(self.spec.id, self.graph, node.name, NO_CONFLICT, "gate", steps, -1, close=True)
            elif self.state.loop and self.skip_in_loop(node):      # loop_graph asked the same: no new HCCL node
                steps.append(Step(f"in a loop graph: only atomic outputs ({self.cfg.atomic_output_attr}), each "
                                  "feeding an HCCL atomic node (CheckSkipInsertInLoopGraph)", "holds",
                                  self._cite("", "output_only")))
                probe.look(self.spec.id, self.graph, node.name, NO_CONFLICT, "loop-skip", steps, -1)
            elif self.all_connect_hccl(node):
                steps.append(Step("every output feeds an HCCL atomic node (IsAllConnectHcclNode)", "holds"))
                probe.look(self.spec.id, self.graph, node.name, NO_CONFLICT, "hccl-consumers", steps, -1)
            else:
                probe.look(self.spec.id, self.graph, node.name, ISOLATED, "atomic", steps, len(steps) - 1)

    def _need_clean_steps(self, node: Node, separately: bool) -> tuple[list[Step], int]:
        """`need_clean`'s tests as steps (pure: nothing is marked or collected), and which decided."""
        steps: list[Step] = []

        def test(name: str, text: str, subject: Node | None = node) -> bool:
            held = self.pred(name, subject)
            steps.append(Step(f"{name}: {text}", "holds" if held else "does not hold", self._cite("", name)))
            return held

        if test("already_cleaned", "a clean node already precedes it"):
            return steps, len(steps) - 1
        if not separately and test("kernel_atomic", "the kernel store registers it as atomic (HCCL)"):
            fed = [a.peer.node.name for a in node.ins if a.peer is not None and self.pred("user_input", a.peer.node)]
            steps.append(Step("a user input feeds it", ", ".join(fed) if fed else "no"))
            if not fed:
                return steps, len(steps) - 1
        if not test("atomic_attrs", "it carries atomic clean attributes"):
            return steps, len(steps) - 1
        if test("clean_separately", "the clean policy cleans every atomic node separately", None):
            return steps, len(steps) - 1
        if test("compile_separately", "it feeds a no-task node or references a variable"):
            return steps, len(steps) - 1
        return steps, len(steps) - 1

    def mark(self, node: Node, key: str, why: str) -> None:
        old = node_typed(node, key, "b")
        set_node_attr(node, key, True)
        if old is not True:
            self.ctx.diagnostics.append(Diagnostic("ATTR_SET", "info", f"{node.name}: attribute {key} = true", self.spec.id,
                                                   {"node": node.name, "graph": node.graph.name, "attr": key,
                                                    "value": True, "why": why}))

    def all_connect_hccl(self, node: Node) -> bool:
        """IsAllConnectHcclNode: every output feeds some HCCL atomic node (true without outputs)."""
        hcom = self.hcom_set
        return all(any(p.node in hcom for p in o.peers) for o in node.outs)

    def skip_in_loop(self, node: Node) -> bool:
        """CheckSkipInsertInLoopGraph: only atomic outputs, each feeding an HCCL atomic node."""
        if not self.pred("output_only", node):
            return False
        idxs = attr_value(node.attr(self.cfg.atomic_output_attr)) or []
        for i in idxs:
            if not isinstance(i, int) or not 0 <= i < len(node.outs):
                return False
            if not any(self.hccl_atomic(p.node) for p in list(node.outs[i].peers)):
                return False
        return True

    # ---- the pass ---------------------------------------------------------------------
    def run(self) -> None:
        separately = self.pred("clean_separately")
        probe = self.ctx.probe
        # the tests as the pass meets them, before it edits the graph (pure predicates only)
        asked = {n: self._need_clean_steps(n, separately) for n in self.graph.node_list()
                 if probe is not None and not probe.near and probe.wants_node(n)}
        atomic = []
        loop_node, g, state = self.p["loop_node"], self.graph, self.state
        # Note [need_clean inline]: need_clean's first tests, in its order, with the
        # predicates looked up once: most nodes are neither cleaned already, nor HCCL
        # atomic, nor carry atomic attributes, and leave here without a method call
        cleaned, kernel, attrs, need_clean = self.p["already_cleaned"], self.p["kernel_atomic"], \
            self.p["atomic_attrs"], self.need_clean
        for node in g.node_list():
            if not cleaned(g, node) and (not separately and kernel(g, node) or attrs(g, node)) \
                    and need_clean(node, separately):
                atomic.append(node)
            if not state.loop and loop_node(g, node):
                state.loop = True
        if atomic and not self.pred("unknown_graph"):
            if self.state.loop:
                self.loop_graph(atomic)
            else:
                self.normal_graph(atomic)
        if asked:                  # classified after the run: its HCCL and loop state is final
            self._why_not(asked, set(atomic))

    def loop_graph(self, atomic: list[Node]) -> None:
        index = 0
        for node in atomic:
            if self.skip_in_loop(node) or self.all_connect_hccl(node):
                continue
            clean = self.add_clean("loop", index)
            self.link(node, clean)
            self.record(clean, "atomic/loop", "output_only", [node], {
                "kind": "loop", "atomic_node": node.name,
                "why": "in a loop graph every atomic node gets its own clean node, cleaned on every iteration"})
            index += 1

    def normal_graph(self, atomic: list[Node]) -> None:
        common, dispersed = [], []
        index = 0
        hcom = self.hcom_set
        for node in atomic:
            if self.all_connect_hccl(node):
                continue
            if self.pred("dispersed", node) and node not in hcom:
                clean = self.add_clean("dispersed", index)
                index += 1
                self.link(node, clean)
                dispersed.append(node)
                peers = self.link_hcom_peers(clean)
                self.record(clean, "atomic/dispersed", "dispersed", [node] + peers, {
                    "kind": "dispersed", "atomic_node": node.name, "hccl_inputs": [p.name for p in peers],
                    "why": "the node is connected to the graph output: zero copy may move its output, so it is "
                           "cleaned separately"})
            else:
                common.append(node)
        if not common:
            return
        clean = self.add_clean("shared", 0)
        for node in common:
            self.link(node, clean)
        peers = self.link_hcom_peers(clean)
        second = self.link_precedence(clean, dispersed)
        self.record(clean, "atomic/shared", "atomic_attrs", common + peers + second, {
            "kind": "shared", "atomic_nodes": [n.name for n in common], "hccl_nodes": [n.name for n in self.hcom],
            "hccl_inputs": [p.name for p in peers], "first_successors": [n.name for n in second],
            "why": "one clean node at the graph front, before every atomic node, the producers of every HCCL "
                   "atomic node and every successor of an input-less graph input"})

    def link_hcom_peers(self, clean: Node) -> list[Node]:
        """LinkToHcomPeerInNode: the clean node precedes every producer of an HCCL atomic node."""
        out, seen = [], set()
        for node in self.hcom:
            for a in node.ins:
                if a.peer is None:
                    raise PassFailure(self.spec.id, "an input of an HCCL atomic node has no producer", node.name)
                self.link(a.peer.node, clean)
                if a.peer.node not in seen:
                    seen.add(a.peer.node)
                    out.append(a.peer.node)
        return out

    def link_precedence(self, clean: Node, dispersed: list[Node]) -> list[Node]:
        """LinkToPotentialPrecedenceNode: before the successors of input-less graph inputs
        (each edge to them, under `precedence_links: each_edge`; the nodes the clean node
        controls before the walk are left out either way)."""
        skip = set(dispersed) | set(self.gentask) | set(clean.out_ctrl)
        repeat = self.cfg.precedence_links == "each_edge"
        out = []
        g, first = self.graph, self.p["first_node"]
        for node in g.node_list():
            if not first(g, node):
                continue
            succs = [p.node for o in node.outs for p in o.peers] + list(node.out_ctrl)
            for s in succs:
                if s in skip or self.pred("not_second", s) or s is clean:
                    continue
                if self.link_ctrl(clean, s, repeat):
                    out.append(s)
        return out

    def link_ctrl(self, clean: Node, node: Node, repeat: bool = False) -> bool:
        """A control edge clean → node unless there is one and not `repeat` (surgery counts
        each node's edges, so a clean node's large fan-out links in linear time)."""
        if node in clean.out_ctrl_count and not repeat:
            return False
        surgery.link_ctrl(clean, node, repeat)
        return True

    def link(self, node: Node, clean: Node) -> None:
        """LinkToAtomicNode: clean → node; in a loop graph the clean node takes the node's stream label."""
        self.link_ctrl(clean, node)
        key = self.cfg.stream_label_attr
        if self.state.loop and node_typed(node, key, "s") is not None:
            clean.op.attr[key].CopyFrom(node.op.attr[key])
            attrs_changed(clean)

    def add_clean(self, kind: str, index: int) -> Node:
        """InsertAtomicMemsetNode + the caller's renaming (the pack's `names`); AddNodeFront."""
        g = self.graph
        op_spec = self.cfg.memset if self.pred("use_memset") else self.cfg.fallback
        session = attr_value(g.attr(self.cfg.session_attr)) if self.cfg.session_attr else None
        session = session if isinstance(session, str) else ""
        prefix = self.cfg.subgraph_prefix.format(graph=g.name) if g.parent_node is not None else ""
        while True:                        # Note [unique names] (insertion.py)
            n = self.ctx.next_count("atomic_clean") + 1      # GE pre-increments a process-wide counter
            name = self.cfg.names[kind].format(prefix=prefix, base=op_spec.name, session=session, n=n, index=index)
            if name not in g.by_name:
                break
        op = g.model.new_op(name, op_spec.type)      # Note [op memory] in engine/core/graph.py
        for key, value in op_spec.attrs:
            set_attr(op.attr, key, value)
        if session:
            set_attr(op.attr, self.cfg.session_attr, session)
        op.id = g.count
        node = Node(op, g)
        node.dirty = True
        head = g.head
        if head is not None and self.pred("front_after", head):
            g.insert_after(node, head)
            node.id = g.count - 1
        else:
            g.prepend(node)
        return node

    def _cite(self, rule: str, pred: str) -> Cite:
        c = self.cfg.pred_cites.get(pred)
        return Cite(rule, c.loc, c.span, c.row) if c is not None else Cite(rule, self.cfg.loc, self.cfg.loc)

    def record(self, clean: Node, rule: str, pred: str, linked: list[Node], reason: dict) -> None:
        reason = dict(reason)
        reason["loop_graph"] = self.state.loop
        reason["op"] = clean.type
        attrs = {k: "set by the clean op entry" for k in sorted(clean.op.attr)}   # a proto map has no stable order
        self.ctx.record(Insertion(
            name=clean.name, type=clean.type, graph=self.graph.name, pass_id=self.spec.id, rule=rule,
            cite=self._cite(rule, pred), producer="",
            consumers=tuple(f"{n.name}:-1" for n in linked), reason=reason, attrs=attrs))


def run(ctx, graph: Graph, cfg: AtomicConfig, spec) -> None:
    states = ctx.atomic_state
    if graph.is_root or spec.id not in states:
        states[spec.id] = _State(ctx, cfg, spec)
    AtomicPass(ctx, cfg, spec, states[spec.id], graph).run()


register(Algorithm("atomic_clean", "atomic_clean", load, run,
                   "GE AtomicAddrCleanPass: shared, dispersed and per-node clean nodes before atomic nodes",
                   ("atomic/shared", "atomic/dispersed", "atomic/loop")))
