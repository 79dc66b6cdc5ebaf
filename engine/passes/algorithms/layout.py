"""Algorithm `layout_conflict`: GE's MemLayoutConflictOptimizer (ge-conflict-rules.md §5).

GE's structure, data from the pack's `layout_conflict` section:

* which graphs are processed (`target_graph`), then CtrlNodeConflict (§5.9, in
  engine/algorithms/ctrl_conflict.py) before the symbol sweep;
* anchor attributes: an ordered list of (attribute, DSL condition) for inputs
  and for outputs, with a default when none applies;
* the wildcard, absolute no-conflict and absolute conflict pair tables;
* checkers: DSL expressions over the pair (`a`, `b`), the `symbol` and the
  processed `graph` that return the anchors to isolate; registrations map an
  attribute pair to a checker (called once per symbol when `per_symbol`);
* `skip_pair` (IsSkip), `skip_insert` (IsSkipInsert) and the Identity insert rule.

Symbols are processed in name order, anchor pairs in symbol-list order, conflict
anchors solved in key order; the table is not recomputed between symbols and
there is no fixed-point iteration (a second run inserts nothing because of
`skip_insert`).
"""
from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Any

from engine.passes.registry import Algorithm, register
from engine.core import surgery
from engine.core.toposort import sort_model
from engine.passes.context import Insertion, anchor_ref
from engine.dsl.compiler import Compiler, def_source, precompile
from engine.dsl.ast import Binary, Expr, ListLit, Paren
from engine.core.errors import Cite, Collector, Loc, PassFailure, did_you_mean
from engine.core.graph import Graph, InAnchor, Node, OutAnchor, writable_desc
from engine.passes.insertion import InsertSpec, apply_neighbour_attrs, build_op, load_insert_spec
from engine.pack.model import FuncDef, Pack
from engine.pack.loader import function_specs, load_functions, parse_rule_expr, register_rule_id
from engine.dsl.library import PrimSpec, bound_functions, register as register_functions
from engine.core.schema import Reader, str_list
from engine.core.yamlloc import item_span, span_of
from engine.passes.surgery_hooks import surgery_hooks
from engine.passes.symbols import SymbolTable, symbol_builder
from engine.passes.probe import ISOLATED, NO_CONFLICT, NOT_LOOKED, Step, expr_cite
from engine.passes.budget import BudgetEvent, budget_for

CHECK_VARS = ("a", "b", "symbol", "graph")
MARK_VARS = ("node", "anchor", "graph")


def _lp(name, arity, doc, sig):
    return name, PrimSpec(name, arity, doc, lambda ctx: None, sig)


# `Mark` is the section's `attributes` vocabulary (Scope.enums)
LAYOUT_PRIMS = register_functions("layout", dict([
    _lp("marks", (1, 1), "marks(anchor): the anchor's layout attributes, in marking order", "(Anchor) -> list[Mark]"),
    _lp("has_mark", (2, 2), 'has_mark(anchor, "CONTINUOUS_INPUT"): the anchor carries that attribute',
        "(Anchor, Mark) -> bool"),
    _lp("ref_from_input", (1, 1), "ref_from_input(out_anchor): the input index it aliases (symbols.ref_from_input) or none",
        "(OutAnchor) -> int"),
    _lp("same_symbol", (2, 2), "same_symbol(x, y): both anchors are in one symbol", "(Anchor, Anchor) -> bool"),
    _lp("symbol_anchors", (1, 1), "symbol_anchors(anchor): the anchors of its symbol, in symbol order",
        "(Anchor) -> list[Anchor]"),
    _lp("real_producers", (1, 1), "real_producers(node): producers of its inputs, following aliases upward",
        "(Node) -> list[OutAnchor]"),
    _lp("same_or_partial_same", (2, 2), "same_or_partial_same(xs, ys): GE IsSameOrPartialSame on two anchor lists",
        "(list[Anchor], list[Anchor]) -> bool"),
    _lp("is_sub_vector", (2, 2),
        "is_sub_vector(vec, sub): GE IsSubVector — from vec's first element that sub holds, vec goes on as sub does",
        "(list[T], list[T]) -> bool"),
    _lp("key", (1, 1), "key(anchor): GE's anchor key '<node>_in_<i>' / '<node>_out_<i>'", "(Anchor) -> str"),
]))


@dataclass(frozen=True, slots=True)
class Mark:
    attr: str
    when: Expr
    loc: Loc
    guard: Expr | None = None     # Note [mark guards]: the leading conjuncts not naming `anchor`
    rest: Expr | None = None      # ... and the rest (None: the whole condition is node-level)


@dataclass(frozen=True, slots=True)
class Checker:
    name: str
    body: Expr
    per_symbol: bool
    doc: str
    loc: Loc
    end: Loc | None = None        # where its `name: {doc, body}` entry ends

    @property
    def cite(self) -> Cite:
        return Cite(f"layout/{self.name}", self.loc, self.end or self.loc)


@dataclass(frozen=True, slots=True)
class Registration:
    a: str
    b: str
    checker: str
    loc: Loc
    end: Loc | None = None

    @property
    def cite(self) -> Cite:
        return Cite("", self.loc, self.end or self.loc)


@dataclass(frozen=True)
class LayoutConfig:
    attributes: tuple[str, ...]
    input_marks: list[Mark]
    output_marks: list[Mark]
    input_default: str
    output_default: str
    wildcard: frozenset
    abs_no_conflict: dict[frozenset, Cite]     # pair → its table entry
    abs_conflict: dict[frozenset, Cite]
    absolute_checker: str
    checkers: dict[str, Checker]
    registrations: dict[frozenset, Registration]
    functions: dict[str, FuncDef]
    target_graph: Expr
    skip_pair: Expr
    skip_insert: Expr
    netoutput_fixup: Expr | None
    insert: InsertSpec
    ctrl: Any = None                      # CtrlNodeConfig (ctrl_conflict.py)
    loc: Loc = field(default=Loc("<pack>"))
    wildcard_cite: Cite | None = None     # the `wildcard_no_conflict:` list
    input_const: Expr | None = None       # NodeUtils::UpdateIsInputConst: a node's is_input_const list


# ---- loading ---------------------------------------------------------------------------
def _pairs(value, what, attrs, errors, fallback) -> dict[frozenset, Cite]:
    out: dict[frozenset, Cite] = {}
    if not isinstance(value, list):
        errors.error(getattr(value, "loc", fallback), f"{what} must be a list of [A, B] pairs", "")
        return out
    for i, item in enumerate(value):
        loc = value.item_locs[i]
        names = str_list(item, f"{what} item {i + 1}", errors, loc)
        if len(names) != 2:
            errors.error(loc, f"{what} item {i + 1}: a pair has two attributes", "write [A, B]")
            continue
        for n in names:
            if n not in attrs:
                errors.error(getattr(n, "loc", loc), f"{what}: unknown attribute '{n}'", did_you_mean(n, attrs, "attributes"))
        key = frozenset(map(str, names))
        if key in out:
            errors.error(loc, f"{what}: pair {names[0]} × {names[1]} listed twice", f"first at {out[key].loc}")
        out[key] = Cite("", *item_span(value, i, loc))
    return out


def _marks(value, what, attrs, pack, errors, fallback) -> list[Mark]:
    out = []
    if not isinstance(value, list):
        errors.error(getattr(value, "loc", fallback), f"{what} must be a list of {{attr, when}}", "")
        return out
    for i, item in enumerate(value):
        r = Reader(item, f"{what} {i + 1}", errors, value.item_locs[i])
        attr = r.get("attr", str, "", required=True)
        when = r.get("when", (str, bool), None, required=True)
        r.get("doc", str)
        r.done()
        if attr and attr not in attrs:
            errors.error(r.value_loc("attr"), f"{what}: unknown attribute '{attr}'", did_you_mean(attr, attrs, "attributes"))
        e = parse_rule_expr(when, r.value_loc("when"), errors) if when is not None else None
        if e is not None and attr:
            out.append(Mark(str(attr), e, value.item_locs[i], *split_guard(e)))
    return out


def load(value: Any, pack: Pack, errors: Collector) -> LayoutConfig | None:
    from engine.passes.algorithms.ctrl_conflict import load_ctrl

    r = Reader(value, "layout_conflict", errors, Loc(str(pack.path)))
    attrs = tuple(map(str, str_list(r.get("attributes", list, [], required=True), "attributes", errors, r.loc)))
    if len(set(attrs)) != len(attrs):
        errors.error(r.value_loc("attributes"), "attributes: a name is listed twice", "")
    funcs = load_functions(r.get("functions", dict), "layout_conflict.functions", pack, errors, r.loc)
    in_marks = _marks(r.get("input_marks", list, [], required=True), "input_marks", attrs, pack, errors, r.loc)
    out_marks = _marks(r.get("output_marks", list, [], required=True), "output_marks", attrs, pack, errors, r.loc)
    defaults = {}
    for key in ("input_default", "output_default"):
        v = r.get(key, str, "", required=True)
        if v and v not in attrs:
            errors.error(r.value_loc(key), f"{key}: unknown attribute '{v}'", did_you_mean(v, attrs, "attributes"))
        defaults[key] = str(v)
    wildcard = frozenset(map(str, str_list(r.get("wildcard_no_conflict", list, []), "wildcard_no_conflict", errors, r.loc)))
    for w in wildcard:
        if w not in attrs:
            errors.error(r.value_loc("wildcard_no_conflict"), f"wildcard_no_conflict: unknown attribute '{w}'", "")
    abs_no = _pairs(r.get("absolute_no_conflict", list, [], required=True), "absolute_no_conflict", attrs, errors, r.loc)
    abs_yes = _pairs(r.get("absolute_conflict", list, [], required=True), "absolute_conflict", attrs, errors, r.loc)
    for k in set(abs_no) & set(abs_yes):
        errors.error(abs_yes[k], f"pair {' × '.join(sorted(k))} is both absolute no-conflict and absolute conflict",
                     f"no-conflict entry at {abs_no[k]}")
    checkers: dict[str, Checker] = {}
    cr = Reader(r.get("checkers", dict, {}, required=True), "layout_conflict.checkers", errors, r.loc)
    for name in list(cr.map):
        c = Reader(cr.get(name, dict), f"checker '{name}'", errors, cr.key_loc(name))
        body = c.get("body", str, None, required=True)
        per_symbol = c.get("per_symbol", bool, False)
        doc = c.get("doc", str, "")
        c.done()
        e = parse_rule_expr(body, c.value_loc("body"), errors) if body is not None else None
        register_rule_id(pack, f"layout/{name}", cr.key_loc(name), errors)
        if e is not None:
            checkers[str(name)] = Checker(str(name), e, bool(per_symbol), str(doc), *span_of(cr.map, name, cr.loc))
    cr.done()
    absolute = str(r.get("absolute_checker", str, "", required=True))
    if absolute and absolute not in checkers:
        errors.error(r.value_loc("absolute_checker"), f"absolute_checker: unknown checker '{absolute}'",
                     did_you_mean(absolute, checkers, "checkers"))
    regs: dict[frozenset, Registration] = {}
    rv = r.get("registrations", list, [], required=True) or []
    for i, item in enumerate(rv):
        loc = rv.item_locs[i]
        g = Reader(item, f"registration {i + 1}", errors, loc)
        ta, tb = g.get("a", str, "", required=True), g.get("b", str, "", required=True)
        chk = g.get("checker", str, "", required=True)
        g.done()
        for t in (ta, tb):
            if t and t not in attrs:
                errors.error(loc, f"registration {i + 1}: unknown attribute '{t}'", did_you_mean(t, attrs, "attributes"))
        if chk and chk not in checkers:
            errors.error(g.value_loc("checker"), f"registration {i + 1}: unknown checker '{chk}'",
                         did_you_mean(chk, checkers, "checkers"))
        key = frozenset((str(ta), str(tb)))
        if key in regs:
            errors.error(loc, f"pair {ta} × {tb} is registered twice", f"first registered at {regs[key].loc}")
        for table, name in ((abs_no, "absolute no-conflict"), (abs_yes, "absolute conflict")):
            if key in table:
                errors.error(loc, f"pair {ta} × {tb} is registered and also listed as {name}",
                             f"listed at {table[key]}; remove one of them")
        if set((str(ta), str(tb))) & wildcard:
            errors.error(loc, f"pair {ta} × {tb} involves a wildcard no-conflict attribute and can never be checked", "")
        regs[key] = Registration(str(ta), str(tb), str(chk), *item_span(rv, i, loc))
    exprs = {}
    for key, req in (("target_graph", True), ("skip_pair", True), ("skip_insert", True), ("netoutput_fixup", False),
                     ("input_const", False)):
        text = r.get(key, (str, bool), None, required=req)
        exprs[key] = parse_rule_expr(text, r.value_loc(key), errors) if text is not None else None
    insert = load_insert_spec(r.get("insert", dict, None, required=True), "layout_conflict.insert", errors, r.loc)
    ctrl = load_ctrl(r.get("ctrl_nodes", dict), pack, errors, r.loc)
    r.done()
    # check every DSL value against its scope
    consts = {a: a for a in attrs}
    extra = dict(LAYOUT_PRIMS)
    extra.update(function_specs(funcs))
    enums = {"Mark": attrs}
    for f in funcs.values():
        Compiler(pack.scope(f.params, consts, extra, enums=enums), errors).check(f.body, {p: "any" for p in f.params}, define_as=f.name)
    mc = Compiler(pack.scope(MARK_VARS, consts, extra, enums=enums), errors)
    for side, marks in (("In", in_marks), ("Out", out_marks)):
        for m in marks:
            mc.check(m.when, {"anchor": f"{side}Anchor"}, "bool", f"the `when` of mark {m.attr}")
            if not errors.problems:         # the parts the pass compiles (Note [compile at load])
                for part in (m.guard, m.rest):
                    if part is not None and part is not m.when:
                        precompile(def_source("_f", MARK_VARS, mc.source(part, MARK_VARS)))
    if not errors.problems:                 # ... and each side's list of them (Note [one call a side])
        for conds in _side_lists(in_marks, out_marks, lambda e: mc.source(e, MARK_VARS)):
            if conds:
                precompile(def_source("_f", MARK_VARS, mc.source(side_list(conds), MARK_VARS)))
    cc = Compiler(pack.scope(CHECK_VARS, consts, extra, enums=enums), errors)
    for c in checkers.values():
        cc.check(c.body, (), "list[Anchor]", "checker")
    bools = (("skip_pair", CHECK_VARS), ("target_graph", ("graph",)), ("skip_insert", ("anchor",)),
             ("netoutput_fixup", ("node",)))
    for key, params in bools:
        if exprs[key] is not None:
            Compiler(pack.scope(params, consts, extra, enums=enums), errors).check(exprs[key], (), "bool", f"`{key}`")
    if exprs["input_const"] is not None:
        Compiler(pack.scope(("node",), consts, extra, enums=enums), errors).check(
            exprs["input_const"], (), "list[bool]", "`input_const`")
    if ctrl is not None:
        from engine.passes.algorithms.ctrl_conflict import PREDICATES as CTRL_PREDICATES
        for key, e in ctrl.predicates.items():
            Compiler(pack.scope(CTRL_PREDICATES[key], consts, extra, enums=enums), errors).check(
                e, (), "bool", f"ctrl_nodes `{key}`")
    if errors or insert is None:
        return None
    return LayoutConfig(attrs, in_marks, out_marks, defaults["input_default"], defaults["output_default"], wildcard,
                        abs_no, abs_yes, absolute, checkers, regs, funcs, exprs["target_graph"], exprs["skip_pair"],
                        exprs["skip_insert"], exprs["netoutput_fixup"], insert, ctrl, r.loc,
                        wildcard_cite=Cite("", r.value_loc("wildcard_no_conflict"), r.value_loc("wildcard_no_conflict")),
                        input_const=exprs["input_const"])


# ---- list algorithms GE's checkers use ---------------------------------------------------
def same_or_partial_same(xs, ys) -> bool:
    """GE IsSameOrPartialSame: overlapping as head/tail runs, nothing else shared."""
    xs, ys = list(xs or []), list(ys or [])
    i = j = None
    pos_y = {id(y): k for k, y in reversed(list(enumerate(ys)))}
    for k, x in enumerate(xs):
        if id(x) in pos_y:
            i, j = k, pos_y[id(x)]
            break
    if i is None or not (i == 0 or j == 0):
        return False
    while i < len(xs) and j < len(ys):
        if xs[i] is not ys[j]:
            return False
        i += 1
        j += 1
    ids_x, ids_y = {id(x) for x in xs}, {id(y) for y in ys}
    return not any(id(x) in ids_y for x in xs[i:]) and not any(id(y) in ids_x for y in ys[j:])


def is_sub_vector(vec, sub) -> bool:
    """GE IsSubVector(vec, sub_vec): from the first element of `vec` that `sub` holds anywhere,
    `vec` goes on as all of `sub` does, element for element (true for an empty `sub`)."""
    vec, sub = list(vec or []), list(sub or [])
    held = {id(y) for y in sub}
    j = next((k for k, x in enumerate(vec) if id(x) in held), len(vec))
    i = 0
    while i < len(sub) and j < len(vec):
        if sub[i] is not vec[j]:
            return False
        i += 1
        j += 1
    return i == len(sub)


# ---- running -----------------------------------------------------------------------------
class LayoutPass:
    def __init__(self, ctx, cfg: LayoutConfig, spec):
        self.ctx, self.cfg, self.spec = ctx, cfg, spec
        self.sym = symbol_builder(ctx)
        self.table: SymbolTable | None = None
        self.graph: Graph | None = None
        self.solved = False             # whether solve ran in this run (it edits the graph)
        self.marks: dict[Any, tuple[str, ...]] = {}     # Note [shared mark tuples]
        self._tuples: dict[tuple, tuple] = {}
        self._active_cache: dict = {}
        self._plans: dict = {}          # distinct mark lists of a symbol, in order → their partners (_pairs)
        consts = {a: a for a in cfg.attributes}
        own = {
            "marks": lambda a: list(self.marks.get(a, ())),
            "has_mark": lambda a, m: m in self.marks.get(a, ()),
            "ref_from_input": lambda a: None if a is None or not a.is_out else self.sym.ref_from_input(a),
            "same_symbol": self._same_symbol,
            "symbol_anchors": lambda a: list(self.table.anchors.get(self.table.of.get(a), [])) if a is not None else [],
            "real_producers": self.real_producers,
            "same_or_partial_same": same_or_partial_same,
            "is_sub_vector": is_sub_vector,
            "key": lambda a: None if a is None else a.key,
        }
        fn_specs = function_specs(cfg.functions)
        prims = bound_functions(ctx, {**LAYOUT_PRIMS, **fn_specs}, {**own, **{n: _late for n in fn_specs}})
        self.comp = Compiler(ctx.pack.scope(CHECK_VARS + MARK_VARS, consts, functions=prims), Collector())
        for f in cfg.functions.values():
            self.comp.define(f.name, f.params, f.body, f.memo)
        fn = self.comp.function
        # Note [node-level marks]: a condition that never names `anchor` is evaluated once per
        # node, and one both sides have (the same generated source: `not address_refreshable(node)`)
        # once for both — a mark condition edits nothing, so a second evaluation would give the
        # same value (or have failed the first time)
        # Note [mark guards]: a per-anchor condition `g1 and ... and rest` whose leading
        # conjuncts g1... do not name `anchor` has them as a node-level guard, evaluated once
        # per node like the conditions above (and shared with them by source); `rest` is
        # evaluated per anchor only where the guard holds. The same value, as `and` stops at
        # a false guard anyway (the pack's memory_type marks put has_attr first, which spares
        # a call per anchor of every node without the list). mark_node then takes a side's
        # plan by the tuple of its node-level values: a graph has a handful of combinations
        src = lambda e: self.comp.source(e, MARK_VARS)
        in_fs, in_side, extra_fs, out_side, out_fs, alone_side = _mark_plans(
            [_mark_fns(m, fn) for m in cfg.input_marks], [_mark_fns(m, fn) for m in cfg.output_marks], src)
        # Note [one call a side]: a side's node-level conditions are one compiled list display,
        # evaluated in order as the separate functions were (and failing where they would)
        def fused(exprs):
            return fn(side_list(exprs), MARK_VARS) if exprs else None
        self._plans_of_marks = (fused(in_fs), in_side, fused(extra_fs), out_side, fused(out_fs), alone_side)
        self.f_check = {n: fn(c.body, CHECK_VARS) for n, c in cfg.checkers.items()}
        self.f_skip_pair = fn(cfg.skip_pair, CHECK_VARS)
        self.f_skip_insert = fn(cfg.skip_insert, ("anchor",))
        self.f_target = fn(cfg.target_graph, ("graph",))
        self.f_fixup = fn(cfg.netoutput_fixup, ("node",)) if cfg.netoutput_fixup is not None else (lambda n: False)
        self.f_input_const = fn(cfg.input_const, ("node",)) if cfg.input_const is not None else None
        self.hooks = surgery_hooks(ctx)
        self.probe = ctx.probe          # why-not probe (engine/passes/probe.py); None on normal runs
        self.allowance: int | None = None   # pair checks left under --budget (None: unbounded)

    # ---- primitives ------------------------------------------------------------------
    def _same_symbol(self, x, y) -> bool:
        if x is None or y is None or self.table is None:
            return False
        s = self.table.of.get(x)
        return s is not None and s == self.table.of.get(y)

    def real_producers(self, node) -> list:
        out = []
        if node is None:
            return out
        for a in node.ins:
            p = a.peer
            seen = set()
            while p is not None and id(p) not in seen:
                seen.add(id(p))
                k = self.sym.ref_from_input(p)
                if k is None or not 0 <= k < len(p.node.ins) or p.node.ins[k].peer is None:
                    break
                p = p.node.ins[k].peer
            if p is not None:
                out.append(p)
        return out

    # ---- the pass ---------------------------------------------------------------------
    def targets(self) -> list[Graph]:
        model = self.ctx.model
        root = model.root
        if self.f_target(root):
            return [root]
        out = []
        for g in model.all_subgraphs():
            parent = g.parent_node
            if parent is not None and self.f_target(g) and not self.f_target(parent.graph):
                out.append(g)
        return out

    def run(self, graph: Graph) -> None:
        from engine.passes.algorithms.ctrl_conflict import CtrlNodeConflict

        if not graph.is_root:
            if not self.f_target(graph):
                return
            targets = [graph]
        else:
            targets = self.targets()
        if self.probe is not None and graph.is_root and not self.probe.near:
            self._why_not_targets(targets)
        if not targets:
            return
        self.sort(graph)
        if self.cfg.ctrl is not None:
            ctrl = CtrlNodeConflict(self)
            for g in targets:
                ctrl.solve(g)
        # GE sorts again after CtrlNodeConflict; with nothing inserted, a repeatable sort only
        # renumbers (Note [sorted stays sorted] in engine/core/toposort.py)
        self.sort(graph)
        self.solved = False
        tables = []
        for g in targets:
            self.process(g)
            tables.append((g, self.table))
        # Note [handed-on symbol tables] (engine/passes/manager.py): with nothing solved the
        # graphs are as the tables were built on them
        if not self.solved:
            for g, table in tables:
                self.ctx.leave_symbols(g, table)

    def sort(self, graph: Graph) -> None:
        """graph->TopologicalSorting(); GE_ASSERT_SUCCESS fails the pass on a cycle."""
        cyclic = sort_model(self.ctx.model, graph)
        if cyclic:
            raise PassFailure(self.spec.id, f"graph '{cyclic[0].name}' has a cycle; it cannot be sorted topologically")

    def process(self, g: Graph) -> None:
        model = self.ctx.model
        self.graph = g
        self.table = self.sym.build(model, g)
        self.marks = {}
        for node in model.all_nodes(g):
            self.mark_node(node, g)
        probe = self.probe
        asked = self._asked_symbols() if probe is not None and not probe.near else None
        bound = budget_for(self.ctx, self.spec.id)
        self.allowance = bound[0] if bound is not None else None
        spent_out: list = []           # (symbol, anchors isolated by the fallback, pairs it stood for)
        table_anchors = self.table.anchors
        if probe is None and bound is None:
            names = self._candidates()
        else:
            names = self.table.names()
        for name in names:
            anchors = list(table_anchors.get(name, []))
            trace = [] if probe is not None and (asked is None or name in asked) else None
            # a symbol of one anchor has no pair: nothing to look for (nor to count under --budget);
            # Note [two-anchor symbols]: most are an output and its one consumer whose marks never
            # pair, where find_conflicts would look at no pair (and spend no budget) either
            if spent_out or len(anchors) < 2:
                found = {}
            elif trace is None and not self._may_pair(anchors):
                found = {}
            else:
                found = self.find_conflicts(anchors, trace)
            if self.allowance is not None and self.allowance < 0:
                self.allowance = 0
                spent_out.append((name, *self._fallback(anchors, found, bound)))
            elif spent_out:
                spent_out.append((name, *self._fallback(anchors, found, bound)))
            if trace is not None:
                self._why_not_symbol(name, anchors, found, trace)
            if found:
                self.solve(found, name, anchors)
        if spent_out:
            n, decl = bound
            isolated = sum(k for _, k, _ in spent_out)
            self.ctx.budget_events.append(BudgetEvent(
                self.spec.id, g.name, decl.unit, n, n + sum(p for _, _, p in spent_out),
                f"from symbol {spent_out[0][0]} on ({len(spent_out)} symbol(s)) the pairs were not checked",
                f"{isolated} input(s) of those symbols in an attribute pair that could conflict were isolated "
                "as absolute conflicts (an Identity before each)", decl.cite))

    def _candidates(self) -> list[str]:
        """The symbols that can have a conflict, in name order.

        Note [candidate symbols]: GE walks every symbol in name order, but a symbol of one
        anchor has no pair, and one of two whose mark lists never pair (most: an output and
        its one consumer) finds nothing (Note [two-anchor symbols]); neither spends budget
        nor edits anything. Solving a symbol changes neither the table nor the marks (the
        nodes it inserts are in neither), so which symbols can find a conflict is known
        before the walk, and the walk visits those alone, in the same order. Only without a
        why-not probe (which reports on the others too) and without a budget (which counts
        every symbol past the point it ran out): sorting and walking all of them was a
        tenth of the pass at 100k nodes, and grows as N log N."""
        may_pair = self._may_pair
        out = [name for name, anchors in self.table.anchors.items() if len(anchors) > 1 and may_pair(anchors)]
        out.sort()
        return out

    def _may_pair(self, anchors: list) -> bool:
        """Whether a symbol of two or more anchors can have a pair to check: one of three or more
        is looked at; one of two only when its mark lists pair (Note [two-anchor symbols])."""
        if len(anchors) != 2:
            return True
        ka, kb = self.marks.get(anchors[0], ()), self.marks.get(anchors[1], ())
        return self._active(ka, kb) or self._active(kb, ka)

    def mark_node(self, node: Node, g: Graph) -> None:
        in_f, in_side, extra_f, out_side, out_f, alone_side = self._plans_of_marks
        ins, outs = node.ins, node.outs
        # Note [node-level marks]: each distinct node-level condition once per node, in mark
        # order: the inputs' before their per-anchor ones, then the outputs' not among them
        # (Note [one call a side]: each side's list in one call)
        if ins:
            level = in_f(node, None, g) if in_f is not None else ()
            self._mark_side(node, g, ins, in_side, level, self.cfg.input_default)
            if outs:
                if extra_f is not None:
                    level += extra_f(node, None, g)
                self._mark_side(node, g, outs, out_side, level, self.cfg.output_default)
        elif outs:
            self._mark_side(node, g, outs, alone_side, out_f(node, None, g) if out_f is not None else (),
                            self.cfg.output_default)

    def _mark_side(self, node, g, anchors, side, level, default) -> None:
        # Note [shared mark tuples]: an anchor's marks are a tuple, one object for every
        # anchor with the same marks (a graph has a few dozen distinct lists; a list per
        # anchor was 300k objects at 100k nodes, made, converted to tuples by _pairs, freed)
        seq, plans = side
        # the side's plan for these node-level values (a graph has a handful of combinations)
        try:
            key = tuple(level)
            plan = plans.get(key)
        except TypeError:       # a condition's value is unhashable: planned for this node alone
            key = plan = None
        if plan is None:
            plan = self._side_plan(seq, level, default)
            if key is not None:
                plans[key] = plan
        marks = self.marks
        fixed, test, yes, no = plan
        if fixed is not None:
            for a in anchors:
                marks[a] = fixed
        elif yes is not None:
            for a in anchors:
                marks[a] = yes if test(node, a, g) else no
        else:
            tuples = self._tuples
            for a in anchors:
                t = tuple([attr for attr, f in test if f is None or f(node, a, g)]) or (default,)
                marks[a] = tuples.setdefault(t, t)

    def _side_plan(self, seq, level, default) -> tuple:
        """(the marks of every anchor, or None; else the one per-anchor condition, the
        marks when it holds and when not; else the [(attr, condition or None)] to test per
        anchor): the marks in order, node-level ones that hold and per-anchor conditions
        whose guard holds (Note [mark guards])."""
        tuples = self._tuples
        items = [(attr, f) for attr, k, f in seq if k is None or level[k]]
        if all(f is None for _, f in items):
            t = tuple(attr for attr, _ in items) or (default,)
            return tuples.setdefault(t, t), None, None, None
        if len(items) == 1:
            attr, f = items[0]
            yes, no = (attr,), (default,)
            return None, f, tuples.setdefault(yes, yes), tuples.setdefault(no, no)
        return None, items, None, None

    def _active(self, ma: tuple, mb: tuple) -> bool:
        """Whether any attribute pair of two mark lists leads to a check (cached)."""
        key = (ma, mb)
        hit = self._active_cache.get(key)
        if hit is None:
            cfg = self.cfg
            hit = False
            for ta in ma:
                for tb in mb:
                    if ta in cfg.wildcard or tb in cfg.wildcard:
                        continue
                    pair = frozenset((ta, tb))
                    if pair in cfg.abs_no_conflict:
                        continue
                    if pair in cfg.abs_conflict or pair in cfg.registrations:
                        hit = True
            self._active_cache[key] = hit
        return hit

    def _pairs(self, anchors: list):
        """The pairs (i < j) in GE's order, leaving out pairs whose attributes can
        never lead to a check. Note [pair pruning]: a symbol with thousands of plain
        readers would otherwise cost O(k²) predicate calls for nothing."""
        marks = self.marks
        if len(anchors) == 2:
            # most symbols are one output and its one consumer: the general case below yields
            # (0, 1) exactly when the two mark lists pair, whether they are one bucket or two
            ka, kb = marks.get(anchors[0], ()), marks.get(anchors[1], ())
            if self._active(ka, kb) or self._active(kb, ka):
                yield 0, 1
            return
        keys = [marks.get(a, ()) for a in anchors]
        buckets: dict[tuple, list[int]] = {}
        for i, k in enumerate(keys):
            buckets.setdefault(k, []).append(i)
        # per distinct mark list (not per anchor): the buckets it can pair with, in bucket order;
        # worked out once per combination of mark lists (most symbols share a few)
        combo = tuple(buckets)
        plan = self._plans.get(combo)
        if plan is None:
            plan = self._plans[combo] = tuple(
                tuple(n for n, kb in enumerate(combo) if self._active(ka, kb) or self._active(kb, ka)) for ka in combo)
        if not any(plan):
            return
        in_order = list(buckets.values())
        partners = {ka: [in_order[n] for n in plan[m]] for m, ka in enumerate(combo)}
        for i, ki in enumerate(keys):
            lists = partners[ki]
            if not lists:
                continue
            if len(lists) == 1:
                idxs = lists[0]
                js = idxs[bisect_right(idxs, i):]      # one bucket: already in order
            else:
                js = []
                for idxs in lists:
                    js.extend(idxs[bisect_right(idxs, i):])
                js.sort()
            for j in js:
                yield i, j

    def find_conflicts(self, anchors: list, trace: list | None = None) -> dict:
        """FindConflictNodes: anchor → the first (checker, pair) that selected it.
        With `trace` (a why-not probe asks), the pairs it asks about get their steps
        appended as (a, b, steps, picked anything) — the same loop, nothing else changes."""
        result: dict = {}
        visit: dict = {}
        cfg = self.cfg
        for i, j in self._pairs(anchors):
            if self.allowance is not None:
                self.allowance -= 1
                if self.allowance < 0:
                    return result          # out of budget: process() falls back for this symbol on
            a, b = anchors[i], anchors[j]
            steps = [] if trace is not None and self.probe.wants_pair(a, b) else None
            if self.f_skip_pair(a, b, anchors, self.graph):
                if steps is not None:
                    steps.append(Step(f"skip_pair({a.key}, {b.key})", "true", expr_cite(cfg.skip_pair, "layout/skip_pair")))
                    trace.append((a, b, steps, None))
                continue
            picked_any = False
            for ta in self.marks.get(a, ()):
                if ta in cfg.wildcard:
                    if steps is not None:
                        steps.append(Step(f"{ta} (of {a.key})", "wildcard no-conflict", cfg.wildcard_cite))
                    continue
                for tb in self.marks.get(b, ()):
                    if tb in cfg.wildcard:
                        if steps is not None:
                            steps.append(Step(f"{tb} (of {b.key})", "wildcard no-conflict", cfg.wildcard_cite))
                        continue
                    pair = frozenset((ta, tb))
                    if pair in cfg.abs_no_conflict:
                        if steps is not None:
                            steps.append(Step(f"{ta} × {tb}", "absolute no-conflict", cfg.abs_no_conflict[pair]))
                        continue
                    if pair in cfg.abs_conflict:
                        got = self._check(cfg.absolute_checker, a, b, anchors, result, ta, tb, "absolute conflict",
                                          cfg.abs_conflict[pair])
                        picked_any |= bool(got)
                        if steps is not None:
                            steps.append(self._checker_step(cfg.absolute_checker, a, b, ta, tb, got,
                                                            cfg.abs_conflict[pair], "absolute conflict"))
                        continue
                    reg = cfg.registrations.get(pair)
                    if reg is None:
                        if steps is not None:
                            steps.append(Step(f"{ta} × {tb}", "no checker registered for the pair", None))
                        continue
                    if cfg.checkers[reg.checker].per_symbol:
                        if pair in visit:
                            if steps is not None:
                                steps.append(Step(f"{ta} × {tb}: per-symbol checker {reg.checker}",
                                                  f"already ran for this symbol on {visit[pair]}",
                                                  cfg.checkers[reg.checker].cite))
                            continue
                        visit[pair] = f"{a.key} × {b.key}"
                    got = self._check(reg.checker, a, b, anchors, result, ta, tb, "registered", reg.cite)
                    picked_any |= bool(got)
                    if steps is not None:
                        steps.append(self._checker_step(reg.checker, a, b, ta, tb, got, reg.cite, "registered"))
            if steps is not None:
                trace.append((a, b, steps, picked_any))
        return result

    def _checker_step(self, name, a, b, ta, tb, got, pair: Cite, how: str) -> Step:
        keys = [x.key for x in got or () if x is not None]
        return Step(f"{ta} × {tb} ({how}): checker {name}({a.key}, {b.key})",
                    "[" + ", ".join(keys) + "]" if keys else "[] (no conflict)",
                    self.cfg.checkers[name].cite, (("pair entry", pair),))

    # ---- budget (only with --budget: engine/passes/budget.py) -------------------------------
    def _fallback(self, anchors: list, found: dict, bound) -> tuple[int, int]:
        """GE's conservative answer for a symbol the budget could not pay for: every input
        whose attributes could conflict with another anchor's is isolated, as an absolute
        conflict (the absolute checker's side). Linear in the symbol: attribute tuples are
        grouped first. Returns (inputs selected, pairs they stand for)."""
        buckets: dict[tuple, list] = {}
        for a in anchors:
            buckets.setdefault(self.marks.get(a, ()), []).append(a)
        keys = list(buckets)
        hot, pairs = set(), 0
        for i, ka in enumerate(keys):
            for kb in keys[i:]:
                same = ka == kb
                if (same and len(buckets[ka]) < 2) or not (self._active(ka, kb) or self._active(kb, ka)):
                    continue
                pairs += len(buckets[ka]) * (len(buckets[ka]) - 1) // 2 if same else len(buckets[ka]) * len(buckets[kb])
                hot.update((ka, kb))
        n, decl = bound
        chosen = 0
        for k in keys:
            if k not in hot:
                continue
            for x in buckets[k]:
                if x.is_out or x in found:
                    continue
                found[x] = {"why": f"the analysis budget ({n} {decl.unit}) ran out before this symbol's pairs were "
                                   f"checked; GE's conservative answer isolates the input", "checker": self.cfg.absolute_checker,
                            "checker_loc": self.cfg.checkers[self.cfg.absolute_checker].cite, "budget": n,
                            "budget_loc": decl.cite, "b_marks": list(k)}
                chosen += 1
        return chosen, pairs

    # ---- why not (only with a probe) -------------------------------------------------------
    def _asked_symbols(self) -> set:
        of = self.table.of
        out = {of[a] for a in self.probe.anchors if a in of}
        for n in self.probe.nodes:
            out.update(of[a] for a in (*n.ins, *n.outs) if a in of)
        return out

    def _why_not_targets(self, targets: list[Graph]) -> None:
        """A subject in a graph the pass does not process: the `target_graph` gate."""
        probe = self.probe
        nodes = set(probe.nodes) | {a.node for a in probe.anchors}
        covered = set(targets)
        for n in sorted(nodes, key=lambda n: n.name):
            g = n.graph
            while g is not None and g not in covered:        # a target's nested subgraphs are processed with it
                g = g.parent_graph
            if g is None:
                step = Step(f"target_graph({n.graph.name})", "false: the graph is not processed",
                            expr_cite(self.cfg.target_graph, "layout/target_graph"))
                probe.look(self.spec.id, n.graph, n.name, NOT_LOOKED, "gate", [step], 0)

    def _why_not_symbol(self, name: str, anchors: list, found: dict, trace: list) -> None:
        probe = self.probe
        seen = set()
        for a, b, steps, picked in trace:
            seen.add(frozenset((a, b)))
            about = f"{a.key} × {b.key} in symbol {name}"
            if picked is None:
                probe.look(self.spec.id, self.graph, about, NO_CONFLICT, "skip-pair", steps, -1, close=True)
                continue
            if picked:
                probe.look(self.spec.id, self.graph, about, ISOLATED, "checker", steps, None)
                continue
            called = [k for k, st in enumerate(steps) if "checker " in st.text and st.result.startswith("[]")]
            if called:
                probe.look(self.spec.id, self.graph, about, NO_CONFLICT, "checker", steps, called[-1], close=True)
            else:
                k = next((k for k, st in enumerate(steps) if st.result != "no checker registered for the pair"), 0)
                probe.look(self.spec.id, self.graph, about, NO_CONFLICT, _kind(steps[k]) if steps else "no-pair",
                           steps, k if steps else None)
        if probe.near:
            return
        for x, y in probe.pair_list:
            pair = frozenset((x, y))
            in_x, in_y = x in self.table.of, y in self.table.of
            if not (in_x and in_y):
                continue
            if self.table.of[x] != self.table.of[y]:
                if self.table.of[x] == name:
                    steps = [Step(f"symbol of {x.key}", self.table.of[x]), Step(f"symbol of {y.key}", self.table.of[y])]
                    probe.look(self.spec.id, self.graph, f"{x.key} × {y.key}", NO_CONFLICT, "different-symbols",
                               steps, 1)
                continue
            if pair not in seen:
                self._why_not_static(x, y, name)
        pruned = 0
        if not probe.pairs:     # a node or one anchor: count its pairs the sweep left out (O(k), not O(k²))
            subj = [a for a in anchors if probe.wants(a)]
            pruned = len(subj) * (len(anchors) - 1) - len(subj) * (len(subj) - 1) // 2 - len(seen)
        if pruned:
            step = Step(f"{pruned} other anchor pair(s) of symbol {name} involving the subject", "no attribute "
                        "pair of theirs is registered or an absolute conflict: never checked")
            probe.look(self.spec.id, self.graph, f"symbol {name}", NO_CONFLICT, "no-check", [step], 0)
        for x in sorted(found, key=lambda t: t.key):
            if (probe.wants(x) or any(x in p for p in probe.pairs)) and self.f_skip_insert(x):
                step = Step(f"skip_insert({x.key}): already isolated", "true",
                            expr_cite(self.cfg.skip_insert, "layout/skip_insert"),
                            (("selected by", found[x].get("checker", "")),))
                probe.look(self.spec.id, self.graph, x.key, NO_CONFLICT, "skip-insert", [step], 0, close=True)

    def _why_not_static(self, a, b, name: str) -> None:
        """A subject pair the sweep never checks: every attribute pair is a table no-conflict or unregistered."""
        cfg, steps = self.cfg, []
        for ta in self.marks.get(a, ()):
            for tb in self.marks.get(b, ()):
                pair = frozenset((ta, tb))
                if ta in cfg.wildcard or tb in cfg.wildcard:
                    steps.append(Step(f"{ta} × {tb}", "wildcard no-conflict", cfg.wildcard_cite))
                elif pair in cfg.abs_no_conflict:
                    steps.append(Step(f"{ta} × {tb}", "absolute no-conflict", cfg.abs_no_conflict[pair]))
                else:
                    steps.append(Step(f"{ta} × {tb}", "no checker registered for the pair", None))
        k = next((k for k, st in enumerate(steps) if st.cite is not None), 0)
        self.probe.look(self.spec.id, self.graph, f"{a.key} × {b.key} in symbol {name}", NO_CONFLICT,
                        _kind(steps[k]) if steps else "no-marks", steps, k if steps else None)

    def _check(self, name, a, b, anchors, result, ta, tb, how, pair: Cite) -> list:
        try:
            picked = self.f_check[name](a, b, anchors, self.graph)
        except PassFailure:
            raise
        for x in picked or ():
            if x is None:
                continue
            if not isinstance(x, (InAnchor, OutAnchor)):
                raise PassFailure(self.spec.id, f"checker '{name}' returned {x!r}, not an anchor", a.node.name)
            if x not in result:
                c = self.cfg.checkers[name]
                side = f"{x.node.name}:{x.idx} ({'output' if x.is_out else 'input'})"
                result[x] = {"why": f"{a.node.name}:{a.idx} and {b.node.name}:{b.idx} share one buffer but "
                                    f"{ta} and {tb} cannot; checker {name} isolates {side}",
                             "checker": name, "checker_loc": c.cite, "pair": f"{ta} × {tb}",
                             "pair_rule": how, "pair_loc": pair,
                             "a": a.key, "a_marks": list(self.marks.get(a, ())),
                             "b": b.key, "b_marks": list(self.marks.get(b, ()))}
        return picked

    def solve(self, found: dict, symbol: str, anchors: list) -> None:
        self.solved = True
        for x in sorted(found, key=lambda t: t.key):
            if self.f_skip_insert(x):
                continue
            why = dict(found[x])
            why["symbol"] = symbol
            why["symbol_anchors"] = [a.key for a in anchors]
            if not x.is_out:
                if x.peer is None:
                    continue
                self.insert_before(x, why)
            elif x.peers:
                self.insert_after(x, why)

    # ---- rewriting --------------------------------------------------------------------
    def insert_before(self, dst: InAnchor, why: dict) -> Node:
        src = dst.peer
        op = build_op(self.ctx, self.cfg.insert, dst.node.graph, [src.desc], src.node,
                      {"idx": dst.idx, "dst": dst.node.name})
        apply_neighbour_attrs(op, self.cfg.insert, src.node, dst.node)
        moved = [p.name for p in dst.node.in_ctrl if not self.hooks.keep_in_ctrl(p)]
        node = surgery.insert_before(dst, op, keep_ctrl=self.hooks.keep_in_ctrl, inherit=self.hooks.inherit)
        self._fixup_netoutput(node, [dst])
        self.record(node, src, [dst], why, moved, isolated="input")
        return node

    def insert_after(self, src: OutAnchor, why: dict) -> Node:
        dsts = list(src.peers)
        first = dsts[0]
        op = build_op(self.ctx, self.cfg.insert, src.node.graph, [src.desc], src.node,
                      {"idx": first.idx, "dst": first.node.name})
        apply_neighbour_attrs(op, self.cfg.insert, src.node, first.node)
        move = not self.hooks.keep_out_ctrl(src.node)
        moved = [s.name for s in src.node.out_ctrl] if move else []
        node = surgery.insert_after(src, dsts, op, move_ctrl=move, inherit=self.hooks.inherit)
        self._fixup_netoutput(node, dsts)
        self.record(node, src, dsts, why, moved, isolated="output")
        return node

    def _fixup_netoutput(self, node: Node, dsts: list) -> None:
        """GE UpdateIsInputConstForNetoutput, for each consumer `netoutput_fixup` names: the
        Identity's is_input_const made anew from its producers (NodeUtils::UpdateIsInputConst,
        the pack's `input_const`), the data offset moved onto the Identity, then the consumer's
        is_input_const made anew (a constant no longer feeds it there)."""
        for k, dst in enumerate(dsts):
            if not self.f_fixup(dst.node):
                continue
            if self.f_input_const is not None:
                _set_input_const(node, self.f_input_const(node))
            nd = writable_desc(dst)
            if nd is None:
                continue
            idesc = node.op.input_desc[min(k, len(node.op.input_desc) - 1)]
            idesc.data_offset = nd.data_offset
            nd.data_offset = 0
            if self.f_input_const is not None:
                _set_input_const(dst.node, self.f_input_const(dst.node))

    def record(self, node: Node, src, dsts: list, why: dict, moved: list, rule: str | None = None,
               isolated: str = "") -> None:
        name = rule or why.get("checker", "")
        c = self.cfg.checkers.get(name)
        self.ctx.record(Insertion(
            name=node.name, type=node.type, graph=node.graph.name, pass_id=self.spec.id,
            rule=f"layout/{name}", cite=c.cite if c is not None else self.cfg.insert.cite(f"layout/{name}"),
            producer=anchor_ref(src), consumers=tuple(anchor_ref(d) for d in dsts), reason=why,
            attrs=self.cfg.insert.attr_reasons(), moved_control=tuple(moved), isolated=isolated,
            choice=BUDGET_CHOICE if "budget" in why else ""))


def _set_input_const(node: Node, flags: list) -> None:
    """OpDesc::SetIsInputConst: the node's is_input_const list becomes `flags`."""
    field = node.op.is_input_const
    if list(field) != flags:
        del field[:]
        field.extend(flags)


# the choice point of an input isolated because the analysis budget ran out (`_fallback`)
BUDGET_CHOICE = "layout/budget-fallback"


def _kind(step: Step) -> str:
    return {"wildcard no-conflict": "wildcard", "absolute no-conflict": "absolute-no-conflict"}.get(
        step.result, "unregistered")


def split_guard(e: Expr) -> tuple[Expr | None, Expr | None]:
    """A mark condition's (guard, rest) (Note [mark guards]): (e, None) when `e` does not
    name `anchor` (node-level); (None, e) when its first conjunct does; else the leading
    conjuncts that do not, and the others."""
    if not _uses_anchor(e):
        return e, None
    terms = _conjuncts(e)
    k = 0
    while not _uses_anchor(terms[k]):
        k += 1
    if k == 0:
        return None, e
    return _conjunction(terms[:k]), _conjunction(terms[k:])


def _mark_fns(m: Mark, fn) -> tuple:
    """(mark, its node-level condition or guard, or None (an expression: compiled with its
    side's others, Note [one call a side]); the condition evaluated per anchor compiled, or
    None)."""
    return (m, m.guard, None if m.rest is None else fn(m.rest, MARK_VARS))


def _conjuncts(e: Expr) -> list[Expr]:
    """The terms of `e` read as `t1 and t2 and ...` (parentheses around a conjunction
    opened), in evaluation order."""
    while isinstance(e, Paren):
        e = e.inner
    if isinstance(e, Binary) and e.op == "and":
        return _conjuncts(e.left) + _conjuncts(e.right)
    return [e]


def _conjunction(terms: list[Expr]) -> Expr:
    out = terms[0]
    for t in terms[1:]:
        out = Binary(out.loc, "and", out, t)
    return out


def _mark_plan(marks: list, fs: list, index: dict, source) -> list:
    """[(attr, index into `fs` of its node-level condition or guard, or None; the
    per-anchor condition, or None)] in mark order; `fs` gains the side's node-level
    conditions and guards (expressions) not in it yet (`index`: by generated source, so a
    condition both sides name runs once)."""
    seq = []
    for m, level, per_anchor in marks:
        k = None
        if level is not None:
            text = source(level)
            k = index.get(text)
            if k is None:
                k = index[text] = len(fs)
                fs.append(level)
        seq.append((m.attr, k, per_anchor))
    # two node-level marks of one attribute both read the later one's value (a map by attribute before)
    last = {attr: k for attr, k, f in seq if f is None}
    return [(attr, last[attr] if f is None else k, f) for attr, k, f in seq]


def _mark_plans(in_marks: list, out_marks: list, source) -> tuple:
    """mark_node's plans: (the inputs' node-level conditions, the inputs' plan, the
    outputs' conditions not among the inputs', the outputs' plan after the inputs', the
    outputs' conditions and plan for a node without inputs)."""
    in_fs, in_index = [], {}
    in_seq = _mark_plan(in_marks, in_fs, in_index, source)
    both_fs, both_index = list(in_fs), dict(in_index)
    out_seq = _mark_plan(out_marks, both_fs, both_index, source)
    out_fs: list = []
    alone_seq = _mark_plan(out_marks, out_fs, {}, source)
    def side(seq):      # with its plans by node-level values, made as they are met (_mark_side)
        return seq, {}
    return in_fs, side(in_seq), both_fs[len(in_fs):], side(out_seq), out_fs, side(alone_seq)


def side_list(exprs: list[Expr]) -> ListLit:
    """A side's node-level conditions as one list display (Note [one call a side])."""
    return ListLit(exprs[0].loc, tuple(exprs))


def _side_lists(in_marks: list, out_marks: list, source) -> tuple[list, list, list]:
    """The node-level conditions mark_node evaluates in one call each: the inputs', the
    outputs' further ones and a node without inputs' (as _mark_plans orders them)."""
    keep = lambda e, _params: e          # the per-anchor rest stands for itself: only its presence counts
    in_fs, _, extra_fs, _, out_fs, _ = _mark_plans([_mark_fns(m, keep) for m in in_marks],
                                                   [_mark_fns(m, keep) for m in out_marks], source)
    return in_fs, extra_fs, out_fs


def _uses_anchor(e: Expr) -> bool:
    from engine.dsl.ast import Var, walk
    return any(isinstance(x, Var) and x.name == "anchor" for x in walk(e))


def _late(*_a):
    raise RuntimeError("pack function called before definition")


def run(ctx, graph: Graph, cfg: LayoutConfig, spec) -> None:
    LayoutPass(ctx, cfg, spec).run(graph)


register(Algorithm("layout_conflict", "layout_conflict", load, run,
                   "GE MemLayoutConflictOptimizer: anchor attributes per symbol, checkers, Identity insertion",
                   ("layout/ctrl-branch", "layout/ctrl-loop-output", "layout/ctrl-loop-exchange", BUDGET_CHOICE)))
