"""Algorithm `rw_conflict`: GE's GraphOptimize::HandleMemoryRWConflict
(ge-conflict-rules.md §4), with every op-specific decision taken from the pack's
`rw_conflict` section:

* the type vocabularies, the decision matrix and the CombineInputRW table;
* first-match rule lists typing a single node's outputs and inputs;
* predicates naming the roles the walk needs (loop parents, subgraph Data and
  NetOutput, identities, skipped consumers, ...);
* the insert rule for the Identity it creates.

The walk itself (subgraph propagation in reverse order, the peer loop with
NeedCheckSkip, SplitIdentity, RemoveNoUseIdentity) is GE's structure and names
no op type.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.passes.registry import Algorithm, register
from engine.passes.context import Insertion, Removal, anchor_ref
from engine.dsl.compiler import Compiler, depth_guarded
from engine.dsl.ast import Call, Expr, walk
from engine.core.errors import Cite, Collector, Loc, PassFailure, did_you_mean
from engine.core.graph import Graph, InAnchor, Node, OutAnchor
from engine.passes.insertion import InsertSpec, build_op, load_insert_spec
from engine.pack.model import Pack, Rule
from engine.pack.loader import load_rules, parse_rule_expr
from engine.dsl.library import PrimSpec, bound_functions, register as register_functions
from engine.core.attrs import node_attr, set_node_attr, typed_attr
from engine.pack.rulelist import check_rules, compile_rules
from engine.core.schema import Reader, str_list
from engine.core.yamlloc import span_of
from engine.core import surgery
from engine.passes.surgery_hooks import surgery_hooks
from engine.passes.probe import NO_CONFLICT, Step, expr_cite, ref

DECISIONS = ("do_nothing", "insert_identity", "wrong_graph")
IN_ROLES = ("read_only", "writeable", "scope_writeable", "invalid")
OUT_ROLES = ("read_only", "soft_read", "writeable", "invalid")
PREDICATES = {
    "loop_parent": "a parent whose subgraphs are left alone (and whose inputs/outputs are fixed by overrides)",
    "subgraph_data": "a subgraph input node carrying the parent index",
    "subgraph_netoutput": "a subgraph output node",
    "skip_node": "a node the main walk skips entirely",
    "identity": "an identity-like node (SplitIdentity / RemoveNoUseIdentity)",
    "skip_consumer": "a consumer whose inputs are never isolated",
    "keep_identity_before": "a single consumer that keeps an identity in front of it",
    "always_optimizable_parent": "a parent whose Writeable subgraph outputs never need an Identity",
    "data_source": "where NeedCheckSkip's backward walk ends (a Data-like node)",
    "rw_control_source": "identity input kinds that make an identity useful for RW ordering",
    "rw_control_writer": "control successors that make an identity useful for RW ordering",
}
# `InputRW` / `OutputRW` are the section's input_types / output_types (Scope.enums)
RW_PRIMS = register_functions("rw_conflict", {
    "is_ref_output": PrimSpec("is_ref_output", (1, 1),
                              "is_ref_output(out_anchor): output shares a name with an input (of a node of this name)",
                              lambda ctx: None, "(OutAnchor) -> bool"),
    "is_ref_input": PrimSpec("is_ref_input", (1, 1),
                             "is_ref_input(in_anchor): input shares a name with an output (of a node of this name)",
                             lambda ctx: None, "(InAnchor) -> bool"),
    "single_output_rw": PrimSpec("single_output_rw", (1, 1),
                                 "single_output_rw(out_anchor): the output rules applied to another anchor",
                                 lambda ctx: None, "(OutAnchor) -> OutputRW"),
})


@dataclass(frozen=True)
class RWConfig:
    input_types: tuple[str, ...]
    output_types: tuple[str, ...]
    in_role: dict[str, str]
    out_role: dict[str, str]
    matrix: dict[tuple[str, str], str]
    matrix_cites: dict[tuple[str, str], Cite]     # each cell, quoted as its row with the cell marked
    combine: dict[tuple[str, str], str]          # (new, acc) → result
    output_rules: list[Rule]
    input_rules: list[Rule]
    output_overrides: list[Rule]
    input_overrides: list[Rule]
    predicates: dict[str, Expr]
    parent_index_attr: str
    reference_attr: str
    insert: InsertSpec
    loc: Loc


# ---- loading ------------------------------------------------------------------------
def load(value: Any, pack: Pack, errors: Collector) -> RWConfig | None:
    fallback = Loc(str(pack.path))
    r = Reader(value, "rw_conflict", errors, fallback)
    in_types = tuple(map(str, str_list(r.get("input_types", list, [], required=True), "input_types", errors, r.loc)))
    out_types = tuple(map(str, str_list(r.get("output_types", list, [], required=True), "output_types", errors, r.loc)))
    roles = Reader(r.get("roles", dict, {}, required=True), "rw_conflict.roles", errors, r.loc)
    in_role = _roles(roles.get("input", dict, {}, required=True), "roles.input", IN_ROLES, in_types, errors, roles.loc)
    out_role = _roles(roles.get("output", dict, {}, required=True), "roles.output", OUT_ROLES, out_types, errors, roles.loc)
    roles.done()
    valid_in = [t for t in in_types if t != in_role.get("invalid")]
    valid_out = [t for t in out_types if t != out_role.get("invalid")]
    matrix, mlocs = _table(r.get("matrix", dict, {}, required=True), "matrix", valid_out, valid_in,
                           DECISIONS, errors, r.loc)
    combine, _ = _table(r.get("combine_input", dict, {}, required=True), "combine_input", valid_in, valid_in,
                        in_types, errors, r.loc)
    consts = {t: t for t in in_types + out_types}
    rules = {}
    for key in ("output_rules", "input_rules", "output_overrides", "input_overrides"):
        rules[key] = load_rules(r.get(key, list, [], required=key.endswith("rules")), f"rw_conflict.{key}",
                                pack, errors, r.loc)
    preds_r = Reader(r.get("predicates", dict, {}, required=True), "rw_conflict.predicates", errors, r.loc)
    preds: dict[str, Expr] = {}
    for name in PREDICATES:
        text = preds_r.get(name, (str, bool), None, required=True)
        if text is not None:
            e = parse_rule_expr(text, preds_r.value_loc(name), errors)
            if e is not None:
                preds[name] = e
    preds_r.done()
    pidx = pack.attr_key("parent_node_index")
    ref_attr = str(r.get("reference_attr", str, ""))
    insert = load_insert_spec(r.get("insert", dict, None, required=True), "rw_conflict.insert", errors, r.loc)
    r.done()
    enums = {"InputRW": in_types, "OutputRW": out_types}
    comp = Compiler(pack.scope(("node", "anchor"), consts, RW_PRIMS, enums=enums), errors)
    for key, lst in rules.items():
        side = "Out" if key.startswith("output") else "In"
        check_rules(comp, lst, {"node": "Node", "anchor": f"{side}Anchor"}, f"{side}putRW")
    pscope = Compiler(pack.scope(("node",), consts, RW_PRIMS, enums=enums), errors)
    for name, e in preds.items():
        pscope.check(e, (), "bool", f"predicate '{name}'")
    if errors or insert is None:
        return None
    return RWConfig(in_types, out_types, in_role, out_role, matrix, mlocs, combine, rules["output_rules"],
                    rules["input_rules"], rules["output_overrides"], rules["input_overrides"], preds, pidx,
                    ref_attr, insert, r.loc)


def _roles(value, what, names, types, errors, fallback) -> dict[str, str]:
    r = Reader(value, what, errors, fallback)
    out = {}
    for role in names:
        t = r.get(role, str, None, required=True)
        if t is not None:
            if t not in types:
                errors.error(r.value_loc(role), f"{what}: '{t}' is not a declared type", did_you_mean(t, types, "types"))
            out[role] = str(t)
    r.done()
    return out


def _table(value, what, rows, cols, allowed, errors, fallback):
    """A complete rows × cols table of names from `allowed` (holes are errors)."""
    r = Reader(value, what, errors, fallback)
    out: dict[tuple[str, str], str] = {}
    locs: dict[tuple[str, str], Cite] = {}
    for row in rows:
        rr = Reader(r.get(row, dict, {}, required=True), f"{what}[{row}]", errors, r.loc)
        for col in cols:
            v = rr.get(col, str, None, required=True)
            if v is None:
                continue
            if v not in allowed:
                errors.error(rr.value_loc(col), f"{what}[{row}][{col}]: unknown value '{v}'", did_you_mean(v, allowed))
                continue
            out[(row, col)] = str(v)
            locs[(row, col)] = Cite("", rr.value_loc(col), getattr(v, "end", rr.value_loc(col)),
                                    span_of(r.map, row, r.loc))
        rr.done()
    r.done()
    return out, locs


def _first_use(rules: list[Rule], fn: str) -> Loc:
    """Where the first of `rules` calls `fn` (its list's first rule if none does)."""
    for rule in rules:
        if any(isinstance(e, Call) and e.fn == fn for x in (rule.when, rule.value) for e in walk(x)):
            return rule.value.loc
    return rules[0].loc if rules else Loc("<pack>")


def _may_stop(prim, name: str) -> bool:
    """A function whose call may stop the pass: a pack-defined one (its body unseen here), one
    that may `fail`, or this section's primitive that applies the output rules again (its call
    depth is guarded)."""
    return prim is None or prim.template is not None or bool(prim.effects) or name == "single_output_rw"


# ---- running -----------------------------------------------------------------------
class _Typed:
    __slots__ = ("value", "why")

    def __init__(self, value: str, why: str):
        self.value = value
        self.why = why


class RWPass:
    """One execution of the RW conflict walk on the root graph."""

    def __init__(self, ctx, cfg: RWConfig, spec):
        self.ctx, self.cfg, self.spec = ctx, cfg, spec
        # Note [ref relations by name]: GE's refs_output_2_input_ / refs_input_2_output_, keyed by
        # the node's name over GetAllNodes (so a node is a writer when any node of its name is)
        self.ref_out: dict[str, dict[int, int]] = {}
        self.ref_in: dict[str, dict[int, int]] = {}
        self.in_cache: dict[InAnchor, _Typed] = {}
        # Note [recorded types by name]: GE's node_rwtype_map_, the types recorded for subgraph
        # Data (input map, {0: type}) and NetOutput (output map, in-anchor index → type) nodes,
        # keyed by the node's name and filled by emplace: when subgraphs reuse a name (arg0,
        # netoutput), the first one marked (subgraphs go in reverse GetAllSubgraphs order)
        # answers for all of them, and a Data's entry has no outputs for a NetOutput of its name
        self.recorded: dict[str, tuple[dict[int, str], dict[int, str]]] = {}
        self.subgraph_inputs: set[tuple[Graph, int]] = set()  # GE subgraph_inputs_: (subgraph, parent index)
        self.subgraph_netoutput: dict[Graph, Node] = {}       # GE subgraph_netoutput_ (the last one marked)
        consts = {t: t for t in cfg.input_types + cfg.output_types}
        prims = bound_functions(ctx, RW_PRIMS, {
            # the maps are filled in place (never replaced): bound once, not read off self per call
            "is_ref_output": lambda a, refs=self.ref_out: a is not None and a.idx in refs.get(a.node.name, ()),
            "is_ref_input": lambda a, refs=self.ref_in: a is not None and a.idx in refs.get(a.node.name, ()),
            "single_output_rw": depth_guarded(self._single_output_value, "single_output_rw",
                                              _first_use(cfg.output_rules, "single_output_rw")),
        })
        pack = ctx.pack
        comp = Compiler(pack.scope(("node", "anchor"), consts, functions=prims), Collector())
        self.f_out = compile_rules(comp, cfg.output_rules, ("node", "anchor"))
        self.f_in = compile_rules(comp, cfg.input_rules, ("node", "anchor"))
        self.f_out_over = compile_rules(comp, cfg.output_overrides, ("node", "anchor"))
        self.f_in_over = compile_rules(comp, cfg.input_overrides, ("node", "anchor"))
        pcomp = Compiler(pack.scope(("node",), consts, functions=prims), Collector())
        self.p = {k: pcomp.function(e, ("node",)) for k, e in cfg.predicates.items()}
        self.hooks = surgery_hooks(ctx)
        R, O = cfg.in_role, cfg.out_role
        self.IN_RO, self.IN_W, self.IN_SW, self.IN_INV = R["read_only"], R["writeable"], R["scope_writeable"], R["invalid"]
        self.OUT_RO, self.OUT_SOFT, self.OUT_W, self.OUT_INV = O["read_only"], O["soft_read"], O["writeable"], O["invalid"]
        self.in_rank = {t: i for i, t in enumerate(cfg.input_types)}
        self._cites: dict[int, list[Cite]] = {}      # Note [cite lists]
        # Note [shared typings]: a typing is a (type, rule) pair and a rule list yields only
        # a handful of them, while the walk types every anchor (250k at 100k nodes); each
        # distinct pair is made once per list and shared (nothing writes a _Typed's fields)
        self._t_out: dict = {}
        self._t_in: dict = {}
        self._t_out_over: dict = {}
        self._t_in_over: dict = {}
        self._no_producer = _Typed(self.OUT_INV, "no producer")
        self._no_out_rule = _Typed(self.OUT_INV, "no output rule matched")
        self._no_in_rule = _Typed(self.IN_INV, "no input rule matched")
        # the decision of every (output type, input type) pair, as `decide` gives it
        self._decisions = {(o, i): self.decide(o, i) for o in cfg.output_types for i in cfg.input_types
                           if o == self.OUT_INV or i == self.IN_INV or (o, i) in cfg.matrix}
        # Note [quiet output rows]: an output type whose matrix row inserts for no input type
        # (an Invalid input: wrong_graph, which inserts nothing either) decides every consumer
        # edge without the consumer's type; when NeedCheckSkip is off too, the peer loop only
        # types the inputs and moves on. It is skipped then, provided nothing can tell: no
        # probe (it reports each edge), and neither the input typing rules nor skip_consumer
        # call anything that may stop the pass (a pack function, a `fail`, a primitive that
        # applies rules again; nor subgraph_data, which input_rw asks of a parent's subgraph
        # nodes). The input typings it would have cached are never read from
        # the cache later: the walk's later cached reads (split_identity and
        # remove_no_use_identity, at an identity's own visit, before its insert_as_needed)
        # are of consumers whose producer has not been visited, and every edge the walk
        # re-links is typed before it is re-linked.
        self._quiet_rows = frozenset(
            o for o in cfg.output_types
            if all((o, i) in self._decisions and self._decisions[(o, i)] != "insert_identity"
                   for i in cfg.input_types))
        fns = comp.scope.functions
        exprs = [x for r in cfg.input_rules + cfg.input_overrides for x in (r.when, r.value)]
        exprs += [cfg.predicates["skip_consumer"], cfg.predicates["subgraph_data"]]     # input_rw reads the latter
        self._inputs_pure = not any(isinstance(e, Call) and _may_stop(fns.get(e.fn), e.fn)
                                    for x in exprs if x is not None for e in walk(x))

    # ---- typing ----------------------------------------------------------------
    def _cite(self, rules: list[Rule], i: int) -> Cite | str:
        if i < 0:
            return "no rule matched"
        # Note [cite lists]: a rule's Cite is a fresh frozen value per `.cite`; each list's
        # are built once and shared (the walk types every anchor: 250k cites at 100k nodes)
        cites = self._cites.get(id(rules))
        if cites is None:
            cites = self._cites[id(rules)] = [r.cite for r in rules]
        return cites[i]

    def _single_output_value(self, anchor: OutAnchor | None) -> str:
        return self.single_output(anchor).value

    def _typed(self, memo: dict, rules: list[Rule], v: str, i: int) -> _Typed:
        """The shared typing (v, rule i of `rules`) (Note [shared typings])."""
        t = memo.get((v, i))
        if t is None:
            t = memo[(v, i)] = _Typed(v, self._cite(rules, i))
        return t

    def single_output(self, anchor: OutAnchor | None) -> _Typed:
        if anchor is None:
            return self._no_producer
        v, i = self.f_out(anchor.node, anchor)
        if v is None:
            return self._no_out_rule
        return self._typed(self._t_out, self.cfg.output_rules, v, i)

    def single_input(self, anchor: InAnchor) -> _Typed:
        v, i = self.f_in(anchor.node, anchor)
        if v is None:
            return self._no_in_rule
        return self._typed(self._t_in, self.cfg.input_rules, v, i)

    def output_rw(self, anchor: OutAnchor | None, marked: bool = True) -> _Typed:
        """OutputRW. Note [no output cache]: an output's type depends on its current
        consumer count, which the walk changes; GE recomputes it on every call.

        Note [subgraph output slots]: a node with subgraphs reads its one subgraph output's
        recorded type, where it has exactly one slot and the slot holds a NetOutput. GE's
        walk (`marked`, GetSubgraphOutputNodes with use_cache) has a slot per subgraph name,
        holding the NetOutput MarkRWTypeForSubgraph met there (none for a missing subgraph or
        one without); the subgraph marking itself (use_cache false, NodeUtils) a slot per
        subgraph that exists, holding its first NetOutput."""
        if anchor is None:
            return self._no_producer
        node = anchor.node
        v, i = self.f_out_over(node, anchor)
        if v is not None:
            t = self._typed(self._t_out_over, self.cfg.output_overrides, v, i)
        elif not node.subgraphs:
            t = self.single_output(anchor)
        else:
            if marked:
                slots = [self.subgraph_netoutput.get(g) if g is not None else None for g in node.subgraphs]
            else:
                slots = [next((n for n in g.nodes() if self.p["subgraph_netoutput"](n)), None)
                         for g in node.subgraphs if g is not None]
            if len(slots) == 1 and slots[0] is not None:
                net = slots[0]
                entry = self.recorded.get(net.name)
                val = entry[1].get(anchor.idx, self.OUT_INV) if entry is not None else self.OUT_INV
                why = f"recorded for subgraph '{net.graph.name}' output {anchor.idx}"
            else:
                val, why = self.OUT_SOFT, f"{len(slots)} subgraph output slot(s)"
            if val != self.OUT_W and len(anchor.peers) > 1:
                val, why = self.OUT_RO, why + "; several consumers"
            t = _Typed(val, why)
        return t

    def input_rw(self, anchor: InAnchor, use_cache: bool = True) -> _Typed:
        if use_cache:
            t = self.in_cache.get(anchor)        # never None once stored
            if t is not None:
                return t
        node = anchor.node
        v, i = self.f_in_over(node, anchor)
        if v is not None:
            t = self._typed(self._t_in_over, self.cfg.input_overrides, v, i)
        elif not node.subgraphs or not any(g is not None for g in node.subgraphs):
            t = self.single_input(anchor)
        else:
            vals = []
            for g in node.subgraphs:
                if g is None:
                    continue
                for n in g.nodes():
                    if self.p["subgraph_data"](n) and node_attr(n, self.cfg.parent_index_attr) == anchor.idx:
                        entry = self.recorded.get(n.name)        # Note [recorded types by name]
                        vals.append(entry[0].get(0, self.IN_INV) if entry is not None else self.IN_INV)
            if not vals:
                t = _Typed(self.IN_RO, "no subgraph input uses it")
            else:
                t = _Typed(self.combine(vals), f"combined over {len(vals)} subgraph input(s)")
        if use_cache:
            self.in_cache[anchor] = t
        return t

    def combine(self, values) -> str:
        acc = self.IN_RO
        for new in sorted(set(values), key=lambda t: self.in_rank[t]):
            if new == self.IN_INV:
                return self.IN_INV
            acc = self.cfg.combine[(new, acc)]
            if acc == self.IN_INV:
                return acc
        return acc

    def decide(self, out_t: str, in_t: str) -> str:
        if out_t == self.OUT_INV or in_t == self.IN_INV:
            return "wrong_graph"
        return self.cfg.matrix[(out_t, in_t)]

    # ---- ref relations -----------------------------------------------------------
    def mark_ref_relations(self) -> None:
        # Note [ref relations per port map]: the (output → input, input → output) maps of a
        # node follow from its port-name maps alone, which nodes named alike share (Note
        # [shared port maps] in engine/core/graph.py); they are worked out once per distinct
        # map pair and shared by its nodes (read only). Marking `reference_attr` once per
        # node writes what marking it once per shared name did (the same key, the same value).
        per_ports: dict[int, tuple] = {}
        ref_out, ref_in, ref_attr = self.ref_out, self.ref_in, self.cfg.reference_attr
        for node in self.ctx.model.all_nodes():
            pair = node.ports()
            hit = per_ports.get(id(pair))
            if hit is None:
                ins, outs = pair
                o2i: dict[int, int] = {}
                i2o: dict[int, int] = {}
                if ins and outs:
                    for name, in_idx in ins.items():
                        out_idx = outs.get(name)
                        if out_idx is not None:
                            o2i[out_idx] = in_idx
                            i2o[in_idx] = out_idx
                hit = per_ports[id(pair)] = (pair, o2i, i2o)     # the pair kept alive: its id stays its own
            if hit[1]:
                name = node.name
                have = ref_out.get(name)
                if have is None:
                    ref_out[name] = hit[1]              # shared, read only
                    ref_in[name] = hit[2]
                else:       # Note [ref relations by name]: a later node of the name adds what is new (emplace)
                    ref_out[name] = {**hit[1], **have}
                    ref_in[name] = {**hit[2], **ref_in[name]}
                if ref_attr:
                    set_node_attr(node, ref_attr, True)

    # ---- subgraph propagation (MarkRWTypeForAllSubgraph) ----------------------------
    def mark_subgraphs(self) -> None:
        names = set()
        for g in reversed(self.ctx.model.all_subgraphs()):
            parent = g.parent_node
            if parent is None or self.p["loop_parent"](parent):
                continue
            if g.name in names:
                raise PassFailure(self.spec.id, f"subgraph name '{g.name}' is not unique")
            names.add(g.name)
            for n in g.node_list():
                if self.p["subgraph_data"](n):
                    self._mark_data(g, n)
                elif self.p["subgraph_netoutput"](n):
                    self._mark_netoutput(g, n, parent)
                    self.subgraph_netoutput[g] = n

    def _mark_data(self, g: Graph, n: Node) -> None:
        idx = node_attr(n, self.cfg.parent_index_attr)
        if not isinstance(idx, int):
            raise PassFailure(self.spec.id, f"subgraph input has no {self.cfg.parent_index_attr}", n.name)
        if (g, idx) in self.subgraph_inputs:
            raise PassFailure(self.spec.id, f"two subgraph inputs of '{g.name}' use parent index {idx}", n.name)
        self.subgraph_inputs.add((g, idx))
        vals = [self.input_rw(p, use_cache=False).value for p in (n.outs[0].peers if n.outs else [])]
        self.recorded.setdefault(n.name, ({0: self.combine(vals)}, {}))

    def _mark_netoutput(self, g: Graph, n: Node, parent: Node) -> None:
        # Note [recorded types by name]: each input's type is recorded under its own index, as
        # GE records it (the parent index decides the insertion and is what the parent's output
        # is looked up by: they differ only where a graph gives an input another one's index)
        out_types: dict[int, str] = {}
        for a in list(n.ins):
            d = a.desc
            if d is None or self.cfg.parent_index_attr not in d.attr:
                raise PassFailure(self.spec.id, f"subgraph output input {a.idx} has no {self.cfg.parent_index_attr}", n.name)
            p = typed_attr(d.attr, self.cfg.parent_index_attr, "i") or 0
            src = a.peer
            if src is None:             # GE_CHECK_NOTNULL(pre_out_anchor), after the index is read
                raise PassFailure(self.spec.id, f"subgraph output input {a.idx} has no producer", n.name)
            t = self.output_rw(src, marked=False)
            if t.value == self.OUT_W and not self.optimizable(parent, p):
                self.insert_after(src, a, {
                    "kind": "subgraph-output", "why": "a Writeable subgraph output feeds a parent output whose "
                    "consumers do not only read it", "output_rw": t.value, "output_rule": t.why,
                    "parent": parent.name, "parent_output": p})
                out_types.setdefault(a.idx, self.OUT_SOFT)
            else:
                out_types.setdefault(a.idx, t.value)
        self.recorded.setdefault(n.name, ({}, out_types))

    def optimizable(self, parent: Node, p: int) -> bool:
        if self.p["always_optimizable_parent"](parent) or p >= len(parent.outs):
            return True
        if len(parent.subgraphs) > 1:
            # IsOutputRwConfilctAmongSubGraph: the subgraphs in instance order; the first that is
            # missing, has no output, or whose output p is absent or unfed ends the look with no
            # conflict found (its GE_ASSERT_NOTNULL returns a failure JudgeOptimizableByParentNode
            # reads as "no conflict")
            for g in parent.subgraphs:
                net = next((n for n in g.nodes() if self.p["subgraph_netoutput"](n)), None) if g is not None else None
                if net is None or p >= len(net.ins) or net.ins[p].peer is None:
                    break
                if self.output_rw(net.ins[p].peer, marked=False).value == self.OUT_RO:
                    return False
        for c in parent.outs[p].peers:
            if any(g is not None for g in c.node.subgraphs):
                return False
            if self.single_input(c).value != self.IN_RO:
                return False
        return True

    # ---- main walk -------------------------------------------------------------------
    def run(self) -> None:
        self.mark_ref_relations()
        self.mark_subgraphs()
        P = self.p
        # Note [walk snapshot]: GE iterates a copy of GetAllNodes(), so nodes inserted
        # during the walk are not visited (spec §10.5 reads otherwise; a live walk
        # would also loop forever under a pack whose inserted node re-triggers itself).
        probe = self.ctx.probe
        for node in self.ctx.model.all_nodes():
            if not node.alive:
                continue
            g = node.graph
            if g.parent_node is not None:
                if P["loop_parent"](g.parent_node):
                    if probe is not None and not probe.near and probe.wants_node(node):
                        self._why_node_skipped(node, "loop_parent", f"its graph's parent {g.parent_node.name}")
                    continue
                if P["subgraph_data"](node) or P["subgraph_netoutput"](node):
                    if probe is not None and not probe.near and probe.wants_node(node):
                        which = "subgraph_data" if P["subgraph_data"](node) else "subgraph_netoutput"
                        self._why_node_skipped(node, which, node.name)
                    continue
            if P["skip_node"](node):
                if probe is not None and not probe.near and probe.wants_node(node):
                    self._why_node_skipped(node, "skip_node", node.name)
                continue
            if P["identity"](node):
                self.split_identity(node)
                if node.alive:
                    self.remove_no_use_identity(node)
            if node.alive:
                self.insert_as_needed(node)

    def insert_as_needed(self, node: Node) -> None:
        outs = node.outs
        for o in outs:                  # has_data_consumers, inline
            if o.peers:
                break
        else:
            return
        skip_consumer = self.p["skip_consumer"]
        input_rw, decide, in_sw = self.input_rw, self.decide, self.IN_SW
        decisions, in_cache = self._decisions, self.in_cache
        probe = self.ctx.probe
        quiet = self._quiet_rows if probe is None and self._inputs_pure else ()
        for o in outs:
            out_t = self.output_rw(o)
            out_v = out_t.value
            skip_last = self.need_check_skip(out_v, node, o)
            if not skip_last and out_v in quiet:
                continue                # Note [quiet output rows]
            last_node = None
            peers = list(o.peers)
            for k, peer in enumerate(peers):
                pn = peer.node
                if skip_consumer(pn):
                    if probe is not None and probe.wants_pair(o, peer):
                        self._why_not(o, peer, out_t, None, "skip-consumer")
                    continue
                in_t = in_cache.get(peer) or input_rw(peer)
                res = decisions.get((out_v, in_t.value)) or decide(out_v, in_t.value)
                if skip_last:
                    if last_node is None:
                        last_node = pn
                    skip_last = pn is last_node and in_t.value == in_sw
                if res != "insert_identity":
                    if probe is not None and probe.wants_pair(o, peer):
                        self._why_not(o, peer, out_t, in_t, "matrix-cell")
                    skip_last = False
                    continue
                if k == len(peers) - 1 and skip_last:
                    if probe is not None and probe.wants_pair(o, peer):
                        self._why_not(o, peer, out_t, in_t, "bypass")
                    continue
                self.insert_before(peer, {
                    "kind": "matrix", "output_rw": out_t.value, "output_rule": out_t.why,
                    "input_rw": in_t.value, "input_rule": in_t.why, "decision": res,
                    "cell": f"matrix[{out_t.value}][{in_t.value}]",
                    "cell_loc": self.cfg.matrix_cites.get((out_t.value, in_t.value), ""),
                })

    def need_check_skip(self, out_t: str, node: Node, o: OutAnchor) -> bool:
        if out_t == self.OUT_RO:
            return True
        if out_t != self.OUT_W:
            return False
        t, a = node, o
        seen = set()
        while True:
            if len(a.peers) > 1:
                return False
            if self.p["data_source"](t):
                return not t.has_attr(self.cfg.parent_index_attr)
            refs = self.ref_out.get(t.name)        # Note [ref relations by name]
            if not refs or a.idx not in refs:
                return True
            if t in seen:       # a ref cycle through a loop: stop like a missing producer
                return False
            seen.add(t)
            src = t.ins[refs[a.idx]].peer if refs[a.idx] < len(t.ins) else None
            if src is None:
                return False
            a, t = src, src.node

    # ---- why not (only with a probe: engine/passes/probe.py) ------------------------------
    def _pred_cite(self, name: str) -> Cite | None:
        return expr_cite(self.cfg.predicates.get(name), f"rw_conflict.predicates.{name}")

    def _typed_step(self, what: str, t: _Typed) -> Step:
        return Step(what, t.value, t.why if isinstance(t.why, Cite) else None,
                    () if isinstance(t.why, Cite) else (("because", t.why),))

    def _why_node_skipped(self, node: Node, predicate: str, subject: str) -> None:
        step = Step(f"predicate {predicate}({subject})", "true", self._pred_cite(predicate))
        self.ctx.probe.look(self.spec.id, node.graph, node.name, NO_CONFLICT, "skipped-node", [step], 0)

    def _why_not(self, o: OutAnchor, peer: InAnchor, out_t: _Typed, in_t: _Typed | None, kind: str) -> None:
        """One consumer edge the walk left without an Identity, and what decided it."""
        steps = [self._typed_step(f"output type of {ref(o)}", out_t)]
        close = False
        if kind == "skip-consumer":
            steps.append(Step(f"predicate skip_consumer({peer.node.name}): the walk never isolates its inputs",
                              "true", self._pred_cite("skip_consumer")))
            in_t = self.input_rw(peer)
            close = self.decide(out_t.value, in_t.value) == "insert_identity"
            steps.append(self._typed_step(f"input type of {ref(peer)} (not consulted)", in_t))
            steps.append(Step(f"matrix[{out_t.value}][{in_t.value}] (not consulted)",
                              self.decide(out_t.value, in_t.value), self.cfg.matrix_cites.get((out_t.value, in_t.value))))
            decisive = 1
        else:
            steps.append(self._typed_step(f"input type of {ref(peer)}", in_t))
            res = self.decide(out_t.value, in_t.value)
            steps.append(Step(f"matrix[{out_t.value}][{in_t.value}]", res,
                              self.cfg.matrix_cites.get((out_t.value, in_t.value))))
            decisive = 2
            if kind == "bypass":
                steps.append(Step(f"NeedCheckSkip: {ref(o)} is {out_t.value} and every consumer it checks is a "
                                  f"{in_t.value} input of {peer.node.name}; the last of them keeps the buffer",
                                  "skip", None, (("consumer", peer.node.name),)))
                decisive, close = 3, True
        self.ctx.probe.look(self.spec.id, o.node.graph, f"{ref(o)} -> {ref(peer)}", NO_CONFLICT, kind, steps,
                            decisive, close)

    # ---- identities --------------------------------------------------------------------
    def split_identity(self, ident: Node) -> None:
        if not ident.outs or len(ident.outs[0].peers) <= 1:
            return
        pre = ident.ins[0].peer if ident.ins else None
        if pre is None:                 # SplitIdentity's GE_CHECK_NOTNULL on the input and its peer
            raise PassFailure(self.spec.id, "an identity with several consumers has no producer", ident.name)
        for c in list(ident.outs[0].peers):
            t = self.input_rw(c)
            if t.value in (self.IN_W, self.IN_SW):
                self.insert_before(c, {"kind": "split-identity", "identity": ident.name, "input_rw": t.value,
                                       "input_rule": t.why,
                                       "why": "an identity shared by several consumers is split so the writer gets its own copy"},
                                   named_after=pre)
            else:
                surgery.unlink(ident.outs[0], c)
                surgery.copy_in_ctrl(ident, c.node)         # CopyInCtrlEdges, then CopyOutCtrlEdges
                for s in ident.out_ctrl:
                    surgery.link_ctrl(pre.node, s)
                surgery.link(pre, c)
        if not ident.has_data_consumers():
            self.remove(ident, "split-identity", {"why": "every consumer was re-linked or got its own identity"})

    def remove_no_use_identity(self, ident: Node) -> None:
        P = self.p
        if not ident.ins or ident.ins[0].peer is None:
            return
        consumers = [p for o in ident.outs for p in o.peers]
        if len(consumers) > 1:
            return
        pre = ident.ins[0].peer
        if consumers and P["keep_identity_before"](consumers[0].node):
            return
        if self._near_subgraph(pre.node) or (consumers and self._near_subgraph(consumers[0].node, output=True)):
            return
        if self._useful_for_rw_control(ident, pre):
            return
        if not consumers:
            res = "do_nothing"
            out_t = in_t = None
        else:
            out_t = self.output_rw(pre)
            in_t = self.input_rw(consumers[0])
            res = self.decide(out_t.value, in_t.value)
        if res == "do_nothing":
            reason = {"why": "the identity separates nothing: its producer and consumer do not conflict"}
            if out_t is not None:
                reason.update(output_rw=out_t.value, output_rule=out_t.why, input_rw=in_t.value, input_rule=in_t.why)
            surgery.isolate(ident, [0])
            self.remove(ident, "remove-no-use-identity", reason, isolated=True)

    def _near_subgraph(self, n: Node, output: bool = False) -> bool:
        if any(g is not None for g in n.subgraphs):
            return True
        if n.graph.parent_node is None:
            return False
        return self.p["subgraph_netoutput"](n) if output else self.p["subgraph_data"](n)

    def _useful_for_rw_control(self, ident: Node, pre: OutAnchor) -> bool:
        if not ident.out_ctrl or sum(1 for a in ident.ins if a.peer is not None) != 1:
            return False
        if not ident.has_data_consumers() or not self.p["rw_control_source"](pre.node):
            return False
        return any(self.p["rw_control_writer"](s) and any(a.peer is pre for a in s.ins) for s in ident.out_ctrl)

    # ---- rewriting -------------------------------------------------------------------
    def insert_before(self, dst: InAnchor, reason: dict, named_after: OutAnchor | None = None) -> Node:
        """Identity before dst; named after (and described by) `named_after`, default dst's producer."""
        src = dst.peer
        origin = named_after or src
        desc = origin.desc if origin is not None else None
        op = build_op(self.ctx, self.cfg.insert, dst.node.graph, [desc], origin.node if origin else None, {})
        moved = [p.name for p in dst.node.in_ctrl if not self.hooks.keep_in_ctrl(p)]
        node = surgery.insert_before(dst, op, keep_ctrl=self.hooks.keep_in_ctrl, inherit=self.hooks.inherit)
        self._record(node, src, [dst], reason, moved, "input")
        return node

    def insert_after(self, src: OutAnchor, dst: InAnchor, reason: dict) -> Node:
        op = build_op(self.ctx, self.cfg.insert, src.node.graph, [src.desc], src.node, {})
        move = not self.hooks.keep_out_ctrl(src.node)
        moved = [s.name for s in src.node.out_ctrl] if move else []
        node = surgery.insert_after(src, [dst], op, move_ctrl=move, inherit=self.hooks.inherit)
        self._record(node, src, [dst], reason, moved, "output")
        return node

    def _record(self, node: Node, src: OutAnchor | None, dsts: list[InAnchor], reason: dict, moved: list[str],
                isolated: str) -> None:
        rule = reason.get("kind", "")
        cell = self.cfg.matrix_cites.get((reason.get("output_rw"), reason.get("input_rw"))) if rule == "matrix" else None
        cite = Cite(f"rw/{rule}", cell.loc, cell.span, cell.row) if cell is not None else self.cfg.insert.cite(f"rw/{rule}")
        decisive = self._decisive(reason) if cell is not None else None
        if decisive is not None:
            reason = {**reason, "matrix_rule": f"rw/{rule}"}
            cite = decisive
        self.ctx.record(Insertion(
            name=node.name, type=node.type, graph=node.graph.name, pass_id=self.spec.id,
            rule=cite.rule_id, cite=cite, producer=anchor_ref(src),
            consumers=tuple(anchor_ref(d) for d in dsts), reason=reason,
            attrs=self.cfg.insert.attr_reasons(), moved_control=tuple(moved), choice=f"rw/{rule}",
            isolated=isolated))

    def _decisive(self, reason: dict) -> Cite | None:
        """Note [decisive typing rule]: the matrix only combines two types; the rule that
        made the difference is the typing rule whose side, typed as a plain read instead
        (the input role read_only, the output role soft_read), would not have inserted —
        the consumer's rule first (a rule that makes an input write is what users add),
        then the producer's. None when neither side alone decides (the cell stays the rule)."""
        out_t, in_t, decision = reason.get("output_rw"), reason.get("input_rw"), reason.get("decision")
        plain_in, plain_out = self.cfg.in_role.get("read_only"), self.cfg.out_role.get("soft_read")
        for rule, counter in (("input_rule", (out_t, plain_in)), ("output_rule", (plain_out, in_t))):
            why = reason.get(rule)
            if isinstance(why, Cite) and why.rule_id and self.cfg.matrix.get(counter, decision) != decision:
                return why
        return None

    def remove(self, node: Node, rule: str, reason: dict, isolated: bool = False) -> None:
        if not isolated:
            surgery.isolate(node, [0])
        self.ctx.removals.append(Removal(node.name, node.type, node.graph.name, self.spec.id, f"rw/{rule}", reason))
        surgery.remove_node(node)


def run(ctx, graph: Graph, cfg: RWConfig, spec) -> None:
    RWPass(ctx, cfg, spec).run()


register(Algorithm("rw_conflict", "rw_conflict", load, run,
                   "GE HandleMemoryRWConflict: read/write typing, decision matrix, Identity insertion",
                   ("rw/matrix", "rw/split-identity", "rw/subgraph-output")))
