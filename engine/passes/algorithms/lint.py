"""Algorithm `graph_lint`: GE's GraphLint::Verify (ge-conflict-rules.md §8).

The walk is GE's: take the topological order, type every node input while visiting
all nodes in reverse (so that subgraph nodes are typed before their parent), then,
graph by graph, look at every output with two or more consumers and stop at the first
writer that no path orders against another writer or a reader. What writes, what is
ignored, which node carries a type up to the parent, which edges order nodes and the
diagnostic code all come from the pack's `graph_lint` section.

The pass changes nothing but the order of the nodes (GE sorts before it looks): a conflict
is a diagnostic, not a failure.
"""
from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from typing import Any

from engine.passes.registry import Algorithm, register
from engine.passes.context import Diagnostic
from engine.dsl.compiler import Compiler
from engine.dsl.ast import Call, Const, Expr, Paren, Var, walk as walk_expr
from engine.core.errors import Cite, Collector, Loc, PassFailure, did_you_mean
from engine.core.graph import Graph, InAnchor, Node, OutAnchor
from engine.pack.model import Pack, Rule
from engine.pack.loader import load_rules, parse_rule_expr
from engine.dsl.library import PrimSpec, bound_functions, register as register_functions
from engine.core.attrs import node_attr
from engine.pack.rulelist import check_rules, compile_rules
from engine.core.schema import Reader, str_list
from engine.core.toposort import sort_model
from engine.passes.probe import NO_CONFLICT, NOT_LOOKED, Step
from engine.passes.budget import BudgetEvent, budget_for

ROLES = ("read_only", "writable", "ignore", "invalid")
SEVERITIES = ("warning", "error", "info")
RULE_VARS = ("node", "anchor", "original")
CHUNK = 4096        # reachability sources per forward sweep (bits per Python int)
BUDGET = 256        # edges one bounded pair search may examine (Note [pair search])


def _output_index(node, name):
    if name is None:
        return None
    if node.__class__ is not Node:          # the rule's `node` is one; anything else, as it says
        node = node if hasattr(node, "ports") else getattr(node, "node", None)
        if node is None:
            return None
    return node.ports()[1].get(name)


LINT_PRIMS = register_functions("graph_lint", {
    "output_index": PrimSpec("output_index", (2, 2),
                             "output_index(node, name): the output port called name, or none (GetOutputIndexByName)",
                             lambda ctx: _output_index, "(Node, str) -> int"),
})


@dataclass(frozen=True)
class LintConfig:
    types: tuple[str, ...]
    role: dict[str, str]
    original_type: Expr
    input_rules: list[Rule]
    source: Expr                  # a subgraph node whose consumers type the parent's input
    parent_index_attr: str
    initial: str
    sticky: frozenset
    control_edges: bool
    code: str
    severity: str
    loc: Loc


# ---- loading ------------------------------------------------------------------------
def load(value: Any, pack: Pack, errors: Collector) -> LintConfig | None:
    r = Reader(value, "graph_lint", errors, Loc(str(pack.path)))
    types = tuple(map(str, str_list(r.get("types", list, [], required=True), "graph_lint.types", errors, r.loc)))
    roles = Reader(r.get("roles", dict, {}, required=True), "graph_lint.roles", errors, r.loc)
    role = {k: _type_name(roles, k, types, errors) for k in ROLES}
    roles.done()
    original = _expr(r, "original_type", errors)
    rules = load_rules(r.get("input_rules", list, [], required=True), "graph_lint.input_rules", pack, errors, r.loc)
    s = Reader(r.get("subgraph_inputs", dict, {}, required=True), "graph_lint.subgraph_inputs", errors, r.loc)
    source = _expr(s, "source", errors)
    pidx = pack.attr_key("parent_node_index")
    initial = _type_name(s, "initial", types, errors)
    sticky = str_list(s.get("sticky", list, [], required=True), "graph_lint.subgraph_inputs.sticky", errors, s.loc)
    for name in sticky:
        if name not in types:
            errors.error(getattr(name, "loc", s.loc), f"graph_lint.subgraph_inputs.sticky: '{name}' is not a declared type",
                         did_you_mean(name, types, "types"))
    s.done()
    reach = Reader(r.get("reachability", dict, {}, required=True), "graph_lint.reachability", errors, r.loc)
    control = bool(reach.get("control_edges", bool, True, required=True))
    reach.done()
    d = Reader(r.get("diagnostic", dict, {}, required=True), "graph_lint.diagnostic", errors, r.loc)
    code = str(d.get("code", str, "", required=True))
    severity = str(d.get("severity", str, "warning", required=True))
    if severity not in SEVERITIES:
        errors.error(d.value_loc("severity"), f"graph_lint.diagnostic: unknown severity '{severity}'",
                     did_you_mean(severity, SEVERITIES, "severities"))
    d.done()
    r.done()
    consts = {t: t for t in types}
    enums = {"LintRW": types}
    check_rules(Compiler(pack.scope(RULE_VARS, consts, LINT_PRIMS, enums=enums), errors), rules,
                {"node": "Node", "anchor": "InAnchor", "original": "Node"}, "LintRW")
    node_comp = Compiler(pack.scope(("node",), consts, LINT_PRIMS, enums=enums), errors)
    for e, want, what in ((original, "str", "`original_type`"), (source, "bool", "`source`")):
        if e is not None:
            node_comp.check(e, (), want, what)
    if errors:
        return None
    return LintConfig(types, role, original, rules, source, pidx, initial, frozenset(map(str, sticky)),
                      control, code, severity, r.loc)


def _expr(r: Reader, key: str, errors: Collector) -> Expr | None:
    text = r.get(key, (str, bool), None, required=True)
    return parse_rule_expr(text, r.value_loc(key), errors) if text is not None else None


def _type_name(r: Reader, key: str, types: tuple[str, ...], errors: Collector) -> str:
    t = r.get(key, str, None, required=True)
    if t is not None and t not in types:
        errors.error(r.value_loc(key), f"{r.what}: '{t}' is not a declared type", did_you_mean(t, types, "types"))
    return str(t)


# ---- running -----------------------------------------------------------------------
class _Original:
    """A node as GE's GetOriginalType sees it: nothing but a type."""

    __slots__ = ("type",)
    is_node = None      # neither node nor anchor, found without a failed lookup (Note [is_node])

    def __init__(self, op_type: str):
        self.type = op_type


def _has_subgraphs(node: Node) -> bool:
    return bool(node.subgraphs) and any(g is not None for g in node.subgraphs)


def _preds(node: Node) -> list[Node]:
    out = [a.peer.node for a in node.ins if a.peer is not None]
    out.extend(node.in_ctrl)
    return out


class GraphLint:
    """One GraphLint::Verify on a root graph."""

    def __init__(self, ctx, cfg: LintConfig, spec):
        self.ctx, self.cfg, self.spec = ctx, cfg, spec
        consts = {t: t for t in cfg.types}
        prims = bound_functions(ctx, LINT_PRIMS)
        rule_comp = Compiler(ctx.pack.scope(RULE_VARS, consts, functions=prims), Collector())
        self.f_input = compile_rules(rule_comp, cfg.input_rules, RULE_VARS)
        node_comp = Compiler(ctx.pack.scope(("node",), consts, functions=prims), Collector())
        self.f_original = node_comp.function(cfg.original_type, ("node",))
        self.f_source = node_comp.function(cfg.source, ("node",))
        self.W, self.RO = cfg.role["writable"], cfg.role["read_only"]
        self.valid = frozenset(cfg.types) - {cfg.role["invalid"]}
        # Note [inputs typed as asked]
        self.total = _always_typed(rule_comp, cfg.input_rules, consts, self.valid)
        self.lazy: bool | None = None       # decided when the nodes are typed (mark)
        self.orders: dict[Graph, list[Node]] = {}
        self.pos: dict[Node, int] = {}
        self.rw: dict[Node, list[str]] = {}                       # node → type per input
        self.set_by: dict[tuple[Node, int], tuple[InAnchor, Node]] = {}   # parent input → inner input, source
        self.reach: dict[Graph, _Reach] = {}
        self.asked: dict[Graph, _AskedReach] = {}     # Note [pairs as asked]
        self.eager = False          # build every graph's reachability up front (tests compare the two)
        self.partners: dict[Graph, dict] = {}
        self.graph_rank: dict[Graph, int] = {}
        self.originals: dict[str, _Original] = {}       # one view per original type

    def fail(self, message: str, node: Node | None = None) -> PassFailure:
        return PassFailure(self.spec.id, message, node.name if node is not None else None)

    def verify(self, root: Graph) -> None:
        """GE stops at the first conflict and reports it."""
        found = next(self.conflicts(root), None)
        if found is not None:
            self.report(*found)
        if self.ctx.probe is not None:
            self.why_not(found)

    # ---- why not (only with a probe: engine/passes/probe.py) ------------------------------
    def why_not(self, found) -> None:
        """For each shared output the probe asks about: the consumers' types and, for
        each writer/other pair, the path that orders them — or that GE stopped earlier."""
        probe = self.ctx.probe
        stop = None if found is None else (self.graph_rank[found[0]], self.pos[found[1].node], found[1].idx)
        data_reach: dict = {}
        for g in self.graph_rank:
            for node in self.orders[g]:
                for o in node.outs:
                    if not probe.near and not any(probe.wants_pair(o, p) or probe.wants(p) for p in o.peers) \
                            and not probe.wants(o):
                        continue
                    self._why_not_output(g, o, stop, found, data_reach)

    def _why_not_output(self, g, o, stop, found, data_reach) -> None:
        probe = self.ctx.probe
        about = f"consumers of {o.node.name}:{o.idx}"
        if len(o.peers) < 2:
            if not probe.near:
                probe.look(self.spec.id, g, about, NO_CONFLICT, "not-shared",
                           [Step("consumers", str(len(o.peers)), None, (("checked from", 2),))], 0)
            return
        if stop is not None and (self.graph_rank[g], self.pos[o.node], o.idx) > stop:
            if not probe.near:
                probe.look(self.spec.id, g, about, NOT_LOOKED, "stopped-earlier",
                           [Step("GE stops at the first conflict", f"reported at {found[1].node.name}:{found[1].idx}")], 0)
            return
        steps = []
        writers, others = [], []
        for p in o.peers:
            t = self.type_of(p)
            text, rule = self.why(p)
            steps.append(Step(f"type of {p.node.name}:{p.idx}", t, rule if isinstance(rule, Cite) else None,
                              () if isinstance(rule, Cite) else (("because", text),)))
            (writers if t == self.W else others if t == self.RO else []).append(p)
        if not writers:
            if not probe.near:
                probe.look(self.spec.id, g, about, NO_CONFLICT, "no-writer", steps + [
                    Step("a writer among the consumers", "none: readers alone never conflict")], -1)
            return
        reach = self.reach.get(g) or self.build_reach(g)
        for k, w in enumerate(writers):
            for other in [x for x in writers[k + 1:] if x.node is not w.node] + others:
                if not self._asks(probe, o, w, other):
                    continue
                if not reach.connected(w.node, other.node):
                    continue        # the W18888 itself (reported, or after the first one)
                by_data = self._data_connected(g, w.node, other.node, data_reach)
                how = "a path of data edges" if by_data else "a path that needs a control edge"
                pair = steps + [Step(f"{w.node.name} and {other.node.name} ordered", f"yes, by {how}", None,
                                     (("control edges count", self.cfg.control_edges),))]
                probe.look(self.spec.id, g, f"{w.node.name}:{w.idx} × {other.node.name}:{other.idx} "
                           f"(consumers of {o.node.name}:{o.idx})", NO_CONFLICT, "ordered", pair, -1,
                           close=not by_data)

    @staticmethod
    def _asks(probe, o, w, other) -> bool:
        """Is the consumer pair (w, other) of o part of the subject? An edge o -> I asks about
        the pairs with I; two inputs about their pair; a node or one anchor about every pair it is in."""
        if probe.near:
            return True
        if probe.pairs:
            return probe.wants_pair(w, other) or (o in probe.anchors and (w in probe.anchors or other in probe.anchors))
        return probe.wants(w) or probe.wants(other) or probe.wants(o)

    def _data_connected(self, g, a, b, cache) -> bool:
        """Whether data edges alone order a and b (the asked pairs of a graph: one more set of sweeps)."""
        if g not in cache:
            cache[g] = _Reach(self.orders[g], self.pos, self.partners[g], False)
        return cache[g].connected(a, b)

    def conflicts(self, root: Graph):
        """Every shared output with a conflict, in GE's order: (graph, output, writer, other, kind)."""
        graphs: list[Graph] = []
        self.sort(root, graphs)
        self.graph_rank = {g: k for k, g in enumerate(graphs)}
        self.mark(root)
        for g in graphs:
            for node in self.orders[g]:
                for o in node.outs:
                    if len(o.peers) >= 2:
                        found = self.check_output(g, o)
                        if found is not None:
                            yield (g, o, *found)

    # ---- TopologicalSorting ------------------------------------------------------
    def sort(self, g: Graph, graphs: list[Graph]) -> None:
        """GraphLint::Initialize sorts the root in place (and with it every subgraph:
        engine/core/toposort.py); Verify then takes the root and GetAllSubgraphs, in the
        order the sort leaves them."""
        model = self.ctx.model
        cyclic = sort_model(model, g)
        if cyclic:
            raise self.fail(f"TopologicalSorting fails: graph '{cyclic[0].name}' has a cycle")
        graphs.append(g)
        if g is model.root:
            graphs.extend(model.all_subgraphs())
        for h in graphs:
            order = h.node_list()
            self.orders[h] = order
            self.pos.update(zip(order, range(len(order))))

    # ---- MarkAllNodesInputRwType ------------------------------------------------------
    def mark(self, root: Graph) -> None:
        """MarkAllNodesInputRwType.

        Note [inputs typed as asked]: GE types every input before it looks at any output and
        stops at the first conflict, so most of the types (a third of graph_lint at 100k
        nodes) are never read. When the pack's input rules give every input a valid type
        without failing (_always_typed: the last rule holds always, each value is a valid
        type, and no condition reaches a function that may fail or a recursive one), the
        inputs of a root graph's node are typed when first read (`_types`), with the same
        rules, on the same unchanged graph, so with the same answer; its original type is
        still read here, so a node without one fails the pass as before, at the same node. A
        subgraph's nodes are typed here, as they type their parent's inputs (refresh_parent),
        and so is everything when a why-not probe or an analysis budget is on, or `eager`."""
        self.lazy = self.total and not self.eager and self.ctx.probe is None \
            and budget_for(self.ctx, self.spec.id) is None
        for node in reversed(self.ctx.model.all_nodes(root)):     # GetAllNodes, sorted in place
            if node.subgraphs and _has_subgraphs(node):
                continue          # typed by its subgraph nodes, visited just before
            if self.lazy and node.graph.parent_node is None:
                self.original_of(node)      # typed when read (Note [inputs typed as asked])
                continue
            self.rw[node] = self.mark_single(node)
            if node.graph.parent_node is not None:
                self.refresh_parent(node)

    def original_of(self, node: Node) -> str:
        op_type = self.f_original(node)
        if type(op_type) is not str:
            raise self.fail("its original type cannot be read (graph_lint.original_type gives none)", node)
        return op_type

    def _types(self, node: Node) -> list[str] | None:
        """The node's input types: typed by mark, or now (Note [inputs typed as asked])."""
        desc = self.rw.get(node)
        if desc is None and self.lazy and node.graph.parent_node is None \
                and not (node.subgraphs and _has_subgraphs(node)):
            desc = self.rw[node] = self.mark_single(node)
        return desc

    def mark_single(self, node: Node) -> list[str]:
        op_type = self.original_of(node)
        original = self.originals.get(op_type)
        if original is None:
            original = self.originals[op_type] = _Original(op_type)
        types = []
        f_input, valid = self.f_input, self.valid
        for a in node.ins:
            value, _ = f_input(node, a, original)
            if value not in valid:
                what = "no input rule matched" if value is None else f"the input rules give {value}"
                raise self.fail(f"input {a.idx} has no read/write type: {what}", node)
            types.append(value)
        return types

    def refresh_parent(self, node: Node) -> None:
        """RefreshParentNodeIfNeed: inputs fed by a subgraph input type the parent's input."""
        cfg = self.cfg
        parent = node.graph.parent_node
        for a in node.ins:
            src = a.peer.node if a.peer is not None else None
            if src is None or not self.f_source(src):
                continue
            idx = node_attr(src, cfg.parent_index_attr)
            if not isinstance(idx, int) or isinstance(idx, bool):
                raise self.fail(f"subgraph input has no int attribute {cfg.parent_index_attr}", src)
            desc = self.rw.get(parent)
            if desc is None:
                desc = self.rw[parent] = [cfg.initial] * len(parent.ins)
            if not 0 <= idx < len(desc):
                raise self.fail(f"{cfg.parent_index_attr} {idx} is out of range: parent '{parent.name}' "
                                f"has {len(desc)} input(s)", src)
            if desc[idx] in cfg.sticky:
                continue
            desc[idx] = self.rw[node][a.idx]
            self.set_by[(parent, idx)] = (a, src)

    # ---- VerifyRwConflictPerOutAnchor -----------------------------------------------------
    def type_of(self, a: InAnchor) -> str:
        desc = self._types(a.node)
        if desc is None or a.idx >= len(desc):
            raise self.fail(f"input {a.idx} was never typed: no node of its subgraphs reads a subgraph input", a.node)
        return desc[a.idx]

    def known_type(self, a: InAnchor) -> str | None:
        desc = self._types(a.node)
        return desc[a.idx] if desc is not None and a.idx < len(desc) else None

    def check_output(self, g: Graph, o: OutAnchor):
        """The first (writer, other, kind) with no path between them, or None.

        Note [first conflict]: GE walks unordered sets of writers and readers; here
        both keep the peer order, so the reported pair is deterministic."""
        writers, readers, seen_w, seen_r = [], [], set(), set()
        for p in o.peers:
            t = self.type_of(p)
            if t == self.W and p.node not in seen_w:
                seen_w.add(p.node)
                writers.append(p)
            elif t == self.RO and p.node not in seen_r:
                seen_r.add(p.node)
                readers.append(p)
        if not writers:
            return None
        reach = self.reach_of(g)
        for w in writers:
            for other in writers:
                if other.node is not w.node and not reach.connected(w.node, other.node):
                    return w, other, "write"
            for r in readers:
                if not reach.connected(w.node, r.node):
                    return w, r, "read"
        return None

    def reach_of(self, g: Graph) -> "_Reach | _AskedReach":
        """What check_output asks whether two nodes of `g` are ordered: the graph's
        reachability if built, else, with no analysis budget and no why-not probe, pairs
        decided as they are asked (Note [pairs as asked]); else the reachability, built."""
        reach = self.reach.get(g)
        if reach is not None:
            return reach
        asked = self.asked.get(g)
        if asked is not None:
            return asked
        if self.eager or self.ctx.probe is not None or budget_for(self.ctx, self.spec.id) is not None:
            return self.build_reach(g)
        asked = self.asked[g] = _AskedReach(self, g)
        return asked

    def build_reach(self, g: Graph) -> "_Reach":
        """Pairs that may be asked about: a writer with every other writer or reader of one output.

        Note [search order]: the nodes come in the order the walk meets them (graph order,
        output, peer), never in a set's order: a set of nodes iterates by address, and under
        --budget the order of the searches decides which pairs the budget pays for."""
        partners: dict[Node, set[Node]] = {}
        known = self.known_type
        for n in self.orders[g]:
            for o in n.outs:
                if len(o.peers) < 2:
                    continue
                types = [known(p) for p in o.peers]
                writers = list(dict.fromkeys(p.node for p, t in zip(o.peers, types) if t == self.W))
                if not writers:
                    continue
                readers = list(dict.fromkeys(p.node for p, t in zip(o.peers, types) if t == self.RO))
                for w in writers:
                    partners.setdefault(w, set()).update(writers, readers)
                for r in readers:
                    partners.setdefault(r, set()).update(writers)
        self.partners[g] = partners
        bound = budget_for(self.ctx, self.spec.id)
        reach = _Reach(self.orders[g], self.pos, partners, self.cfg.control_edges, bound[0] if bound else None)
        if reach.unverified:
            n, decl = bound
            self.ctx.budget_events.append(BudgetEvent(
                self.spec.id, g.name, decl.unit, n, reach.needed,
                f"{len(reach.unverified)} writer/reader pair(s) of graph '{g.name}' not swept",
                "treated as unordered: a W18888 for the first of them (GE's answer when no path is known)", decl.cite))
        self.reach[g] = reach
        return reach

    # ---- the diagnostic ---------------------------------------------------------------
    def report(self, g: Graph, o: OutAnchor, w: InAnchor, other: InAnchor, kind: str) -> None:
        roles = ["writer", "writer" if kind == "write" else "reader"]
        whys = [self.why(w), self.why(other)]
        shared = f"{o.node.name}:{o.idx}"
        unverified = self.reach_of(g).is_unverified(w.node, other.node)
        message = (f"write node '{w.node.name}' ({_port(w)}: {whys[0][0]}) and "
                   f"{'other write' if kind == 'write' else 'read'} node '{other.node.name}' "
                   f"({_port(other)}: {whys[1][0]}) both consume '{shared}' in graph '{g.name}' with no control "
                   f"relation between them, so they may run in either order (precision problem); "
                   f"order them with a control edge"
                   + ("; not verified: the analysis budget ran out (--budget)" if unverified else ""))
        self.ctx.diagnostics.append(Diagnostic(self.cfg.code, self.cfg.severity, message, self.spec.id, {
            "graph": g.name, "anchor": shared, "nodes": [w.node.name, other.node.name], "roles": roles,
            "inputs": [f"{w.node.name}:{w.idx}", f"{other.node.name}:{other.idx}"],
            "types": [self.type_of(w), self.type_of(other)], "rules": [_rule_name(c) for _, c in whys],
            **({"budget": "unverified"} if unverified else {})},
            tuple(dict.fromkeys(c for _, c in whys if isinstance(c, Cite)))))

    def why(self, a: InAnchor) -> tuple[str, Cite | str]:
        """(explanation, deciding rule: its Cite, or the name of what decided) of an input's type."""
        path = []                     # through nested subgraphs, iteratively (Note [no recursion])
        while (a.node, a.idx) in self.set_by:
            inner, src = self.set_by[(a.node, a.idx)]
            path.append(f"through subgraph '{inner.node.graph.name}', where {src.name} feeds "
                        f"{inner.node.name} {_port(inner)}: ")
            a = inner
        if _has_subgraphs(a.node):
            return ("".join(path) + "no subgraph node sets it (graph_lint.subgraph_inputs.initial)",
                    "graph_lint.subgraph_inputs.initial")
        _, k = self.f_input(a.node, a, _Original(self.f_original(a.node)))
        rule = self.cfg.input_rules[k]
        return "".join(path) + str(rule.cite), rule.cite


def _always_typed(comp: Compiler, rules: list[Rule], consts: dict, valid: frozenset) -> bool:
    """Whether the input rules give every input a valid type and cannot fail (Note [inputs
    typed as asked]): the last rule's condition is `true`, every value is one of the valid
    types named, and no condition calls a function with an effect (`fail`, ...) or a
    recursive pack function (its depth guard fails), through the pack functions it calls."""
    if not rules or not (isinstance(rules[-1].when, Const) and rules[-1].when.value is True):
        return False
    functions = comp.scope.functions
    todo = []
    for r in rules:
        v = r.value
        while isinstance(v, Paren):
            v = v.inner
        if not (isinstance(v, Var) and v.name in consts and consts[v.name] in valid
                or isinstance(v, Const) and v.value in valid):
            return False
        todo.append(r.when)
    seen: set[str] = set()
    while todo:
        for e in walk_expr(todo.pop()):
            if not isinstance(e, Call):
                continue
            prim = functions.get(e.fn)
            if prim is None or prim.effects:
                return False
            if prim.template is not None and e.fn not in seen:
                seen.add(e.fn)
                if comp._recursive(e.fn, prim.template[1]):
                    return False
                todo.append(prim.template[1])
    return True


def _rule_name(c: Cite | str) -> str:
    return c.rule_id if isinstance(c, Cite) else c


def _port(a: InAnchor) -> str:
    name = a.node.input_name(a.idx)
    return f"input {a.idx} '{name}'" if name is not None else f"input {a.idx}"


class _Reach:
    """Which asked-about pairs of one graph's nodes are ordered (a slice of GE's ConnectionMatrix).

    Note [reachability]: GE fills an N×N bit matrix per graph: in topological order, a
    node's row is its own bit OR the rows of its data and control predecessors (a
    predecessor later in the order, i.e. a loop back edge, adds nothing). So b is
    connected from an earlier a exactly when a path of edges going forward in the order
    leads from a to b. Only consumers of shared outputs that have a writer are ever asked
    about, and those pairs are decided in two steps with the same answers:

    * a bounded search per pair (Note [pair search]): forward from a, never past b's
      position, then backward from b, never before a's, each stopped after BUDGET edges.
      Finding the other node proves a path; running out of nodes proves there is none;
    * the pairs whose searches both hit the budget go to the sweep: in topological order it
      carries the bits of the earlier node of each pair forward as Python ints, CHUNK
      sources per sweep, and each source then reads its bit in its later partners' rows.

    What is kept is the set of connected (earlier, later) pairs. The searches cost at most
    2·BUDGET edges a pair, so the sweeps — which cost a pass over the graph's span each —
    see only the few pairs no short search decides.
    """

    def __init__(self, order: list[Node], pos: dict[Node, int], partners: dict[Node, set], control: bool,
                 budget: int | None = None, search: int | None = None):
        """`budget`: work units (edges the pair searches examine, nodes the sweeps visit) the
        analysis may spend (the analysis budget, engine/passes/budget.py; None: unbounded); the
        pairs it cannot pay for are `unverified` and count as not connected. `search`: edges
        each pair search may examine (default BUDGET; 0: sweeps only)."""
        self.linked: set[tuple[Node, Node]] = set()
        self.unverified: set[tuple[Node, Node]] = set()
        self.needed = 0
        self.work = 0                     # edges examined by the searches plus nodes swept
        self.pos, self.control = pos, control
        self.forward: dict[Node, tuple] = {}      # Note [adjacency cache]
        self.backward: dict[Node, tuple] = {}
        search = self.search = BUDGET if search is None else search
        later = {a: sorted((b for b in bs if pos[b] > pos[a]), key=pos.__getitem__) for a, bs in partners.items()}
        unresolved: dict[Node, list[Node]] = {}
        for a, bs in later.items():
            for b in bs:
                left = None if budget is None else budget - self.work     # the searches spend the budget too
                if left is not None and left <= 0:
                    self.unverified.add((a, b))
                    self.needed += 1                                      # at least one unit each
                    continue
                cap = search if left is None else min(search, left)
                found = _search(a, b, pos, control, cap, self) if cap else None
                if found:
                    self.linked.add((a, b))
                elif found is None:
                    if left is not None and self.work >= budget:
                        self.unverified.add((a, b))
                        self.needed += 1
                    else:
                        unresolved.setdefault(a, []).append(b)
        self.needed += self.work
        sources = sorted(unresolved, key=pos.__getitem__)
        spent = self.work
        for start in range(0, len(sources), CHUNK):
            chunk = sources[start:start + CHUNK]
            last = max(pos[b] for a in chunk for b in unresolved[a])
            cost = last + 1 - pos[chunk[0]]
            self.needed += cost
            if budget is not None and spent + cost > budget:
                self.unverified.update((a, b) for a in chunk for b in unresolved[a])
                continue
            spent += cost
            span = order[pos[chunk[0]]:last + 1]
            self.work += len(span)
            rows = _sweep(span, {a: 1 << i for i, a in enumerate(chunk)}, control)
            for i, a in enumerate(chunk):
                self.linked.update((a, b) for b in unresolved[a] if rows.get(b, 0) >> i & 1)

    def adjacency(self, x: Node, forward: bool) -> tuple[int, list[int], list[Node]]:
        """Note [adjacency cache]: what a pair search reads of x, once per graph (the graph
        does not change while the lint runs): the edges it costs (every consumer and, with
        control edges, control successor; going back every input, connected or not, and
        control predecessor), then its neighbours in the search's direction — later in the
        order going forward, earlier going back — each once, with their sort keys (the
        position forward, minus it back) in ascending key order. That is the order the
        search pushes them in (the old per-visit sort of (key, node) pairs), and with
        bisect the window's end and the goal are found without looking at the rest. A node
        whose edges cost more than a whole search (`search`) stops every search that pops
        it: its neighbours are listed once (its degree, once per graph) and never looked at."""
        pos, control = self.pos, self.control
        if forward:
            nbrs = [p.node for o in x.outs for p in o.peers]
            if control and x.out_ctrl:
                nbrs += x.out_ctrl
            cost = len(nbrs)
        else:
            nbrs = [a.peer.node for a in x.ins if a.peer is not None]
            if control and x.in_ctrl:
                nbrs += x.in_ctrl
            cost = len(x.ins) + (len(x.in_ctrl) if control else 0)
        px, get = pos[x], pos.get
        if cost > self.search:
            entry = (cost, [], [])        # every search stops here: its window is never looked at
        elif len(nbrs) == 1:
            py = get(nbrs[0])
            ok = py is not None and (py > px if forward else py < px)
            entry = (cost, [py if forward else -py], nbrs) if ok else (cost, [], [])
        else:
            keys: list[int] = []
            nodes: list[Node] = []
            for y in dict.fromkeys(nbrs):
                py = get(y)
                if py is not None and (py > px if forward else py < px):
                    keys.append(py if forward else -py)
                    nodes.append(y)
            if len(keys) > 1:
                order = sorted(range(len(keys)), key=keys.__getitem__)
                keys, nodes = [keys[i] for i in order], [nodes[i] for i in order]
            entry = (cost, keys, nodes)
        (self.forward if forward else self.backward)[x] = entry
        return entry

    def connected(self, a: Node, b: Node) -> bool:
        """GE IsConnected in either direction; a node is connected to itself."""
        return a is b or (a, b) in self.linked or (b, a) in self.linked

    def is_unverified(self, a: Node, b: Node) -> bool:
        return bool(self.unverified) and ((a, b) in self.unverified or (b, a) in self.unverified)


class _AskedReach(_Reach):
    """A graph's pairs decided as check_output asks about them (Note [pairs as asked]).

    Note [pairs as asked]: GE stops at the first conflict, and the reachability built up
    front (build_reach) searched every writer/reader pair of the graph first: at 100k nodes
    of a training step 18.8k searches (a third of graph_lint) where the first conflict was
    found at the fifth shared output. Here a pair gets its bounded search (Note [pair
    search]) when it is asked, once; the answer is the search's, which is the full
    reachability's. The first pair no search decides builds the full reachability, which
    answers from then on, so a graph without a conflict costs about what it cost before:
    the same searches, and those made before that pair once more. Only without an analysis
    budget and a why-not probe: the budget pays for the searches in build_reach's order,
    and the probe reads its pairs."""

    def __init__(self, lint: "GraphLint", g: Graph):      # not _Reach.__init__, which searches every pair
        self.lint, self.graph = lint, g
        self.pos, self.control, self.search = lint.pos, lint.cfg.control_edges, BUDGET
        self.forward: dict[Node, tuple] = {}      # Note [adjacency cache]
        self.backward: dict[Node, tuple] = {}
        self.known: dict[tuple[Node, Node], bool] = {}
        self.work = 0
        self.full: _Reach | None = None

    def connected(self, a: Node, b: Node) -> bool:
        if a is b:
            return True
        if self.full is not None:
            return self.full.connected(a, b)
        pos = self.pos
        pair = (a, b) if pos[a] < pos[b] else (b, a)
        hit = self.known.get(pair)
        if hit is None:
            hit = _search(pair[0], pair[1], pos, self.control, self.search, self)
            if hit is None:         # both searches stopped: the full reachability decides
                self.full = self.lint.build_reach(self.graph)
                return self.full.connected(a, b)
            self.known[pair] = hit
        return hit

    def is_unverified(self, a: Node, b: Node) -> bool:
        return self.full is not None and self.full.is_unverified(a, b)


def _search(a: Node, b: Node, pos: dict[Node, int], control: bool, budget: int, reach: _Reach) -> bool | None:
    """Note [pair search]: is there a forward path a → b (pos[a] < pos[b])? True or False
    when a search decides it, None when both stopped at the budget. Each search is depth
    first and tries the neighbour nearest the other end first (the largest position not
    past b going forward, the smallest not before a going back), which follows the long
    edges of a training step (a forward activation's consumer in the backward pass) first.

    A node's edges are counted before they are listed: a node controlling much of the graph
    ends the search instead of costing its degree to every search. Only edges going forward
    in the order count; each search stays inside (pos[a], pos[b]). The neighbour lists come
    from reach's adjacency (Note [adjacency cache]), which leaves out the neighbours of a
    node costing more than reach.search: `budget` is never more."""
    assert budget <= reach.search
    lo, hi = pos[a], pos[b]
    for forward in (True, False):
        if forward:
            start, goal, edges, bound = a, b, reach.forward, hi
        else:
            start, goal, edges, bound = b, a, reach.backward, -lo
        seen = {start}
        stack = [start]
        left = budget
        while stack:
            x = stack.pop()
            cost, keys, nodes = edges.get(x) or reach.adjacency(x, forward)
            left -= cost
            if left < 0:
                break
            n = len(keys)
            k = bisect_left(keys, bound) if n else 0
            if k < n and keys[k] == bound:          # the goal sits at its own position
                j = k
                while j < n and keys[j] == bound:
                    if nodes[j] is goal:
                        reach.work += budget - left
                        return True
                    j += 1
            for y in (nodes if k == n else nodes[:k]):
                if y not in seen:
                    seen.add(y)
                    stack.append(y)
        else:
            reach.work += budget - left
            return False          # every node the window lets it reach was seen
        reach.work += budget
    return None


def _sweep(nodes: list[Node], own: dict[Node, int], control: bool) -> dict[Node, int]:
    rows: dict[Node, int] = {}
    get = rows.get
    for n in nodes:
        row = own.get(n, 0)
        for a in n.ins:
            if a.peer is not None:
                row |= get(a.peer.node, 0)
        if control:
            for p in n.in_ctrl:
                row |= get(p, 0)
        if row:
            rows[n] = row
    return rows


def run(ctx, graph: Graph, cfg: LintConfig, spec) -> None:
    if graph.parent_node is not None:
        raise PassFailure(spec.id, f"GraphLint verifies a root graph only; '{graph.name}' is a subgraph "
                                   f"of '{graph.parent_node.name}'")
    GraphLint(ctx, cfg, spec).verify(graph)


register(Algorithm("graph_lint", "graph_lint", load, run,
                   "GE GraphLint::Verify: unordered writer/reader consumers of one output (W18888)"))
