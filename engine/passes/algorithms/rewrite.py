"""Algorithm `rewrite`: a pass written as rule data — GE's dedicated memory-conflict
passes (ge-conflict-rules.md §6) are rule sets of this one engine.

A rule set (one pass) declares:

* `walk`: the nodes visited — `graph` (GetDirectNode of the graph the runner gives,
  a snapshot) or `all` (GetAllNodes: the graph and its subgraphs, a snapshot);
* `gate`: a DSL predicate over `graph`; the pass does nothing where it is false;
* `once`: actions run once per graph, just before the first matched node;
* `steps`, tried in order on every node: `match` (over `graph`, `node`), `each`
  (`node`, `inputs` or `outputs`: what `anchor` ranges over), `let` bindings, and a
  first-match rule list whose `do:` actions run in order (`- name: expr` binds a
  result for the actions after it; `stop: true` ends the node's anchors);
* `functions`: pack-defined DSL functions; `insert`: the nodes its actions build.

Actions (engine/passes/actions.py) edit the graph and record provenance: the rule id and
file:line, and `reason` = the step's `let` values plus the rule's `reason:` facts.

Note [rewrite families]: the runner finds a pass's configuration through its
algorithm's section, and a pack section lives in one file. The pack therefore
declares families of rule sets (`rewrite_sets: {name: doc}` in passes.yaml), each
family an algorithm and a section of that name in its own file; a pass names its
family as its algorithm and its rule set with `config:`. A new rewrite pass is a new
rule set in any family, a new family a `rewrite_sets:` entry: no engine change.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from engine.passes.registry import Algorithm, register_family
from engine.passes.actions import ACTION_PRIMS, Rewriter, Why
from engine.dsl.ast import Binary, Call, Const, Expr, Index, IsClass, Paren, Var, walk
from engine.dsl.compiler import Compiler
from engine.core.errors import Cite, Collector, Loc, PassFailure, did_you_mean
from engine.passes.probe import ISOLATED, NO_CONFLICT, NOT_LOOKED, Step as PStep, expr_cite
from engine.core.graph import Graph, InAnchor, Node, OutAnchor
from engine.passes.insertion import InsertSpec, load_insert_spec
from engine.pack.model import FuncDef, Pack
from engine.pack.loader import function_specs, load_functions, parse_rule_expr, register_rule_id
from engine.dsl.library import PrimSpec, bound_functions, register as register_functions
from engine.dsl.queries import QUERY_PRIMITIVES
from engine.core.schema import Reader
from engine.core.yamlloc import item_span
from engine.passes.surgery_hooks import surgery_hooks

WALKS = ("graph", "all")
EACH = ("node", "inputs", "outputs")
BASE_VARS = ("graph", "node", "anchor")
# which argument of an action names an insert spec (checked at load time)
SPEC_ARG = {"insert_before": 1, "insert_after": 2, "insert_between": 2, "insert_multi_after": 1,
            "insert_multi_before": 1, "add_node": 0, "insert_name": 0}
REWRITE_PRIMS: dict[str, PrimSpec] = {
    **QUERY_PRIMITIVES, **ACTION_PRIMS,
    **register_functions("rewrite", {
        "insert_name": PrimSpec("insert_name", (2, 2), 'insert_name("spec", graph): the name the spec gives in graph '
                                "when its template uses only {graph}", lambda ctx: None, "(str, Graph) -> str"),
    }),
}


@dataclass(frozen=True, slots=True)
class Action:
    bind: str | None          # `- name: expr` keeps the result for later actions
    expr: Expr
    loc: Loc

    def __str__(self) -> str:
        return f"{self.bind}: {self.expr}" if self.bind else str(self.expr)


@dataclass(frozen=True, slots=True)
class RewriteRule:
    id: str
    when: Expr
    do: tuple[Action, ...]
    reason: tuple[tuple[str, Expr], ...]
    stop: bool
    doc: str
    loc: Loc
    end: Loc | None = None     # where its list item ends

    @property
    def cite(self) -> Cite:
        return Cite(self.id, self.loc, self.end or self.loc)


@dataclass(frozen=True, slots=True)
class Step:
    name: str
    match: Expr
    each: str
    let: tuple[tuple[str, Expr], ...]
    rules: tuple[RewriteRule, ...]
    loc: Loc


@dataclass(frozen=True)
class RuleSet:
    name: str
    doc: str
    walk: str
    gate: Expr | None
    once: tuple[Action, ...]
    steps: tuple[Step, ...]
    functions: dict[str, FuncDef]
    inserts: dict[str, InsertSpec]
    loc: Loc
    rule_count: int = 0


@dataclass(frozen=True)
class Family:
    section: str
    rule_sets: dict[str, RuleSet] = field(default_factory=dict)


# ---- loading --------------------------------------------------------------------------
def _loader(section: str) -> Callable:
    def load(value: Any, pack: Pack, errors: Collector) -> Family | None:
        r = Reader(value, section, errors, Loc(str(pack.path)))
        sets = {}
        for name in list(r.map):
            rs = load_rule_set(r.get(name, dict), f"{section}.{name}", str(name), pack, errors, r.key_loc(name))
            if rs is not None:
                sets[str(name)] = rs
        r.done()
        for spec in pack.passes.values():       # passes are loaded before algorithm sections
            if spec.algorithm == section and (spec.config or spec.id) not in sets:
                name = spec.config or spec.id
                errors.error(spec.loc, f"pass '{spec.id}': section '{section}' has no rule set '{name}'",
                             did_you_mean(name, sets, "rule sets") if sets else f"add `{name}:` under `{section}:`")
        return None if errors else Family(section, sets)
    return load


def load_rule_set(value: Any, what: str, name: str, pack: Pack, errors: Collector, fallback: Loc) -> RuleSet | None:
    r = Reader(value, what, errors, fallback)
    doc = str(r.get("doc", str, ""))
    walk_kind = str(r.get("walk", str, "graph"))
    if walk_kind not in WALKS:
        errors.error(r.value_loc("walk"), f"{what}: unknown walk '{walk_kind}'", did_you_mean(walk_kind, WALKS, "walks"))
    gate_text = r.get("gate", (str, bool))
    gate = parse_rule_expr(gate_text, r.value_loc("gate"), errors) if gate_text is not None else None
    funcs = load_functions(r.get("functions", dict), f"{what}.functions", pack, errors, r.loc)
    once = _actions(r.get("once", list, []), f"{what}.once", errors, r.loc)
    inserts = {}
    ir = Reader(r.get("insert", dict, {}), f"{what}.insert", errors, r.loc)
    for iname in list(ir.map):
        spec = load_insert_spec(ir.get(iname, dict), f"{what}.insert.{iname}", errors, ir.key_loc(iname))
        if spec is not None:
            inserts[str(iname)] = spec
    ir.done()
    steps = []
    sv = r.get("steps", list, [], required=True) or []
    seen_steps: dict[str, Loc] = {}
    for i, item in enumerate(sv):
        step = _step(item, f"{what} step {i + 1}", pack, errors, sv.item_locs[i])
        if step is None:
            continue
        if step.name in seen_steps:
            errors.error(step.loc, f"{what}: step name '{step.name}' is used twice", f"first used at {seen_steps[step.name]}")
        seen_steps[step.name] = step.loc
        steps.append(step)
    r.done()
    rs = RuleSet(name, doc, walk_kind, gate, tuple(once), tuple(steps), funcs, inserts, r.loc,
                 sum(len(s.rules) for s in steps))
    _check(rs, pack, errors)
    return rs


def _step(value: Any, what: str, pack: Pack, errors: Collector, fallback: Loc) -> Step | None:
    r = Reader(value, what, errors, fallback)
    name = str(r.get("name", str, "", required=True))
    match_text = r.get("match", (str, bool), True)
    match = parse_rule_expr(match_text, r.value_loc("match"), errors)
    each = str(r.get("each", str, "node"))
    if each not in EACH:
        errors.error(r.value_loc("each"), f"{what}: 'each' must be one of {', '.join(EACH)}", did_you_mean(each, EACH))
    lets = []
    lr = Reader(r.get("let", dict, {}), f"{what}.let", errors, r.loc)
    for key in list(lr.map):
        text = lr.get(key, (str, bool))
        if key in BASE_VARS:
            errors.error(lr.key_loc(key), f"{what}.let: '{key}' is a reserved name", "choose another name")
        e = parse_rule_expr(text, lr.value_loc(key), errors) if text is not None else None
        if e is not None:
            lets.append((str(key), e))
    lr.done()
    rules = []
    rv = r.get("rules", list, [], required=True) or []
    for i, item in enumerate(rv):
        rule = _rule(item, f"{what} rule {i + 1}", pack, errors, *item_span(rv, i, r.loc))
        if rule is not None:
            rules.append(rule)
    r.done()
    if match is None or not name:
        return None
    return Step(name, match, each, tuple(lets), tuple(rules), r.loc)


def _rule(value: Any, what: str, pack: Pack, errors: Collector, fallback: Loc, end: Loc) -> RewriteRule | None:
    r = Reader(value, what, errors, fallback)
    rid = str(r.get("id", str, "", required=True))
    when_text = r.get("when", (str, bool), True)
    when = parse_rule_expr(when_text, r.value_loc("when"), errors)
    doc = str(r.get("doc", str, ""))
    stop = bool(r.get("stop", bool, False))
    reason = []
    rr = Reader(r.get("reason", dict, {}), f"{what}.reason", errors, r.loc)
    for key in list(rr.map):
        e = parse_rule_expr(rr.get(key, (str, bool)), rr.value_loc(key), errors)
        if e is not None:
            reason.append((str(key), e))
    rr.done()
    do = _actions(r.get("do", list, []), f"{what}.do", errors, r.loc)
    r.done()
    if rid:
        register_rule_id(pack, rid, r.value_loc("id"), errors)
    if when is None or not rid:
        return None
    return RewriteRule(rid, when, tuple(do), tuple(reason), stop, doc, fallback, end)


def _actions(value: Any, what: str, errors: Collector, fallback: Loc) -> list[Action]:
    out = []
    if not isinstance(value, list):
        return out
    for i, item in enumerate(value):
        loc = value.item_locs[i] if hasattr(value, "item_locs") else fallback
        if isinstance(item, dict):
            if len(item) != 1:
                errors.error(loc, f"{what}: a binding action is one `name: expression` pair", "write `- name: expr`")
                continue
            (bind, text), = item.items()
            e = parse_rule_expr(text, item.value_locs.get(bind, loc), errors)
            if e is not None:
                out.append(Action(str(bind), e, loc))
        else:
            e = parse_rule_expr(item, loc, errors)
            if e is not None:
                out.append(Action(None, e, loc))
    return out


def _check(rs: RuleSet, pack: Pack, errors: Collector) -> None:
    """Names, arities, types and insert-spec references, once at load time."""
    extra = {**REWRITE_PRIMS, **function_specs(rs.functions)}
    comp = Compiler(pack.scope(BASE_VARS, {}, extra), errors)
    for f in rs.functions.values():
        comp.check(f.body, {p: "any" for p in f.params}, edits=True, define_as=f.name)
    exprs: list[Expr] = []
    # each value is compiled with the parameters its run-time function takes (Note [compile at load])
    if rs.gate is not None:
        comp.check(rs.gate, ("graph",), "bool", "a rule set's `gate`", params=("graph",))
        exprs.append(rs.gate)
    _check_actions(comp, rs.once, {"graph": "Graph", "node": "none", "anchor": "none"}, BASE_VARS, exprs)
    for step in rs.steps:
        comp.check(step.match, {"node": "Node", "anchor": "none"}, "bool", "a step's `match`",
                   params=("graph", "node"))
        # the anchor ranged over: each input, each output, or none (`each: node`)
        names: dict = {"node": "Node", "anchor": {"inputs": "InAnchor", "outputs": "OutAnchor"}.get(step.each, "none")}
        params = BASE_VARS
        for key, e in step.let:
            names[key] = comp.check(e, names, params=params)
            params += (key,)
            exprs.append(e)
        for rule in step.rules:
            comp.check(rule.when, names, "bool", "a rule's `when`", params=params)
            for _, e in rule.reason:
                comp.check(e, names, params=params)
            _check_actions(comp, rule.do, dict(names), params, exprs)
    exprs += [f.body for f in rs.functions.values()]
    for e in exprs:
        for sub in walk(e):
            if isinstance(sub, Call) and sub.fn in SPEC_ARG and len(sub.args) > SPEC_ARG[sub.fn]:
                arg = sub.args[SPEC_ARG[sub.fn]]
                if isinstance(arg, Const) and isinstance(arg.value, str) and arg.value not in rs.inserts:
                    errors.error(arg.loc, f"{rs.name}: no insert spec named '{arg.value}'",
                                 did_you_mean(arg.value, rs.inserts, "insert specs of this rule set"))


# ---- running ---------------------------------------------------------------------------
class _Compiled:
    """A rule set compiled into Python functions for one run."""

    def __init__(self, ctx, rs: RuleSet, spec):
        self.rs = rs
        self.rewriter = Rewriter(ctx, spec.id, rs.inserts, surgery_hooks(ctx))
        fn_specs = function_specs(rs.functions)
        own = dict(self.rewriter.bound())
        own["insert_name"] = self.insert_name
        prims = bound_functions(ctx, {**REWRITE_PRIMS, **fn_specs}, {**own, **{n: _late for n in fn_specs}})
        comp = Compiler(ctx.pack.scope(BASE_VARS, functions=prims), Collector())
        for f in rs.functions.values():
            comp.define(f.name, f.params, f.body)
        self.gate = comp.function(rs.gate, ("graph",)) if rs.gate is not None else None
        self.once = _compile_actions(comp, rs.once, BASE_VARS)
        self.steps = []
        for step in rs.steps:
            params = BASE_VARS
            lets = []
            for key, e in step.let:
                lets.append((key, comp.function(e, params)))
                params += (key,)
            rules = []
            for rule in step.rules:
                rules.append((rule, comp.function(rule.when, params),
                              [(k, comp.function(e, params)) for k, e in rule.reason],
                              _compile_actions(comp, rule.do, params)))
            self.steps.append((step, comp.function(step.match, ("graph", "node")), lets, rules))
        classes = ctx.pack.class_sets()
        self.needs = [node_types_needed(step.match, classes) for step in rs.steps]
        self.by_type: dict[str, tuple] = {}     # node type → the steps that can match it
        # Note [inert steps]: a step without rules and lets does nothing once its match holds
        # but start the `once` actions; a rule set of such steps that always match is done
        # after its first node
        self.inert = bool(rs.steps) and all(not s.rules and not s.let and _is_true(s.match) for s in rs.steps)
        self.spec_id = spec.id
        self.probe = ctx.probe          # why-not probe (engine/passes/probe.py); None on normal runs
        self.inserting = {r.id: any(isinstance(x, Call) and x.fn in SPEC_ARG for a in r.do for x in walk(a.expr))
                          for st in rs.steps for r in st.rules}

    def insert_name(self, spec_name: str, graph: Graph | None) -> str | None:
        spec = self.rs.inserts.get(spec_name)
        if spec is None or graph is None:
            return None
        return spec.name.format(graph=graph.name, src="", dst="", n="", idx="", out="")

    def run(self, graph: Graph) -> None:
        probe = self.probe
        asking = probe is not None and not probe.near
        if self.gate is not None and not self.gate(graph):
            if asking:
                self._why_not_gate(graph)
            return
        if probe is None and self.inert:
            # Note [inert steps]: GetAllNodes has a node iff the graph has a direct one
            n = graph.head
            while n is not None and not n.alive:
                n = n.next
            if n is not None:
                self._once(graph)
            return
        model = self.rewriter.ctx.model
        nodes = model.all_nodes(graph) if self.rs.walk == "all" else graph.node_list()
        started = False
        all_steps = self.steps
        # Note [steps by node type]: without a probe, a node tries only the steps whose match
        # can hold for its type (the why-not probe evaluates every match, as it reports them)
        by_type = self.by_type if probe is None else None
        for node in nodes:
            if not node.alive:
                continue
            if by_type is None:
                steps = all_steps
                if asking and probe.wants_node(node) and not any(m(graph, node) for _, m, _, _ in steps):
                    probe.look(self.spec_id, graph, node.name, NOT_LOOKED, "no-step",
                               [PStep(f"step {st.name}: match", "false", expr_cite(st.match, f"{self.rs.name}/{st.name}"))
                                for st, _, _, _ in steps])
            else:
                steps = by_type.get(node.type)
                if steps is None:
                    steps = by_type[node.type] = self._steps_for(node.type)
            for step, match, lets, rules in steps:
                if not match(graph, node):
                    continue
                if not started:
                    started = True
                    self._once(graph)
                if rules or lets:       # Note [inert steps]
                    self._step(graph, node, step, lets, rules)
                if not node.alive:
                    break

    def _steps_for(self, op_type: str) -> tuple:
        """The steps, in order, whose match can hold for a node of type `op_type`."""
        return tuple(s for s, need in zip(self.steps, self.needs) if need is None or op_type in need)

    def _once(self, graph: Graph) -> None:
        if not self.once:
            return
        rule = f"{self.rs.name}/once"
        self.rewriter.why = Why(rule, Cite(rule, self.rs.loc, self.rs.loc), {"graph": graph.name})
        env = [graph, None, None]
        for bind, f in self.once:
            v = f(*env)
            if bind:
                env.append(v)

    def _step(self, graph: Graph, node: Node, step: Step, lets, rules) -> None:
        if step.each == "inputs":
            anchors = list(node.ins)
        elif step.each == "outputs":
            anchors = list(node.outs)
        else:
            anchors = [None]
        probe = self.probe
        for anchor in anchors:
            env = [graph, node, anchor]
            for _, f in lets:
                env.append(f(*env))
            if probe is not None and rules and (probe.wants(anchor) if anchor is not None else probe.wants_node(node)):
                if self._traced(graph, node, anchor, step, env, rules):
                    return
                continue
            for rule, when, reason, actions in rules:
                if not when(*env):
                    continue
                if actions or reason:       # Note [silent rules]
                    self._fire(rule, env, reason, actions, step)
                if rule.stop:
                    return
                break


    def _fire(self, rule, env, reason, actions, step: Step) -> None:
        """Run a rule that holds: its facts become the provenance of what its actions insert.

        Note [silent rules]: the facts are read only by the actions that follow (an insert's
        provenance, an ATTR_SET diagnostic); every `_fire` and `once` sets them afresh before
        its actions. A rule without actions and without `reason:` (whose values might fail)
        therefore need not be fired outside a why-not trace: `_step` skips it."""
        facts = {"step": step.name}
        for (key, _), value in zip(step.let, env[3:]):
            facts[key] = to_json(value)
        for key, f in reason:
            facts[key] = to_json(f(*env))
        if rule.doc:
            facts["why"] = rule.doc
        self.rewriter.why = Why(rule.id, rule.cite, facts)
        local = list(env)
        for bind, f in actions:
            v = f(*local)
            if bind:
                local.append(v)

    # ---- why not (only with a probe) --------------------------------------------------------
    def _traced(self, graph, node, anchor, step: Step, env, rules) -> bool:
        """The first-match loop of `_step` for an anchor the probe asks about, recording
        every `when` it evaluates; True when the fired rule stops the step."""
        ctx = self.rewriter.ctx
        where = f"{node.name}:{anchor.idx}" if anchor is not None else node.name
        about = f"{where} ({'input' if anchor is not None and not anchor.is_out else 'output' if anchor is not None else 'node'}"\
                f", step {self.rs.name}/{step.name})"
        steps: list[PStep] = []
        for k, (rule, when, reason, actions) in enumerate(rules):
            held = bool(when(*env))
            steps.append(PStep(f"rule {rule.id}" + (f": {rule.doc}" if rule.doc else ""), "holds" if held else "does not hold",
                               rule.cite))
            if not held:
                continue
            before = len(ctx.insertions)
            later = self._later_inserting(rules[k + 1:], env) if not self.inserting.get(rule.id) else None
            self._fire(rule, env, reason, actions, step)
            if len(ctx.insertions) > before:
                self.probe.look(self.spec_id, graph, about, ISOLATED, "rule", steps, len(steps) - 1)
            else:
                kind = "bypass" if not rule.do else "rule"
                if later is not None:
                    steps.append(PStep(f"rule {later.id} (not reached)", "would hold and insert", later.cite))
                self.probe.look(self.spec_id, graph, about, NO_CONFLICT, kind, steps, k, close=later is not None)
            return rule.stop
        self.probe.look(self.spec_id, graph, about, NO_CONFLICT, "no-rule", steps)
        return False

    def _later_inserting(self, rest, env):
        """The first later rule that inserts and whose `when` holds too (a near miss), or None.
        Note [pure when]: a `when` cannot edit the graph (engine/dsl/types.py effects), so
        evaluating it ahead changes nothing; one that cannot be evaluated here counts as not holding."""
        for rule, when, _, _ in rest:
            if not self.inserting.get(rule.id):
                continue
            try:
                if when(*env):
                    return rule
            except (PassFailure, TypeError, AttributeError, ValueError, IndexError, KeyError):
                continue
        return None

    def _why_not_gate(self, graph: Graph) -> None:
        probe = self.probe
        nodes = set(probe.nodes) | {a.node for a in probe.anchors}
        for n in sorted((n for n in nodes if n.graph is graph), key=lambda n: n.name):
            probe.look(self.spec_id, graph, n.name, NOT_LOOKED, "gate",
                       [PStep(f"gate of rule set {self.rs.name} on graph {graph.name}", "false",
                              expr_cite(self.rs.gate, f"{self.rs.name}/gate"))], 0)


def _check_actions(comp: Compiler, actions, bound: dict, params: tuple[str, ...], exprs: list) -> None:
    """Check an action list as `_compile_actions` builds it: each `bind` names its result
    (typed) for the actions after it."""
    for a in actions:
        t = comp.check(a.expr, bound, edits=True, params=params)
        exprs.append(a.expr)
        if a.bind:
            bound[a.bind] = t
            params += (a.bind,)


def _compile_actions(comp: Compiler, actions, params: tuple[str, ...]) -> list:
    out = []
    for a in actions:
        out.append((a.bind, comp.function(a.expr, params)))
        if a.bind:
            params += (a.bind,)
    return out


def _conjuncts(e: Expr) -> list[Expr]:
    """`a and b and c` as [a, b, c] (parentheses dropped); any other expression as [e]."""
    while isinstance(e, Paren):
        e = e.inner
    if isinstance(e, Binary) and e.op == "and":
        return _conjuncts(e.left) + _conjuncts(e.right)
    return [e]


def _is_true(e: Expr) -> bool:
    return isinstance(e, Const) and e.value is True


def node_types_needed(match: Expr, classes: dict[str, frozenset]) -> frozenset | None:
    """The op types a node must have for `match` to hold, or None (any type may).

    Note [steps by node type]: a match that is a conjunction with a test `node is CLASS`
    is false for a node whose type is not in the class. Node types do not change during a
    pass (Node.type is set when the node is made), and a match cannot edit the graph (it is
    checked without edits at load), so not calling it changes nothing, provided the
    conjuncts the compiled `and` evaluates before the test cannot fail either: only tests
    before which every conjunct reads `graph` alone (no node, no anchor, no index: a
    per-graph flag such as `in_subgraph(graph)`) count. With several such tests the types
    are the intersection of their classes."""
    need: frozenset | None = None
    for c in _conjuncts(match):          # parentheses already dropped
        if isinstance(c, IsClass) and not c.negated and isinstance(c.subject, Var) and c.subject.name == "node" \
                and c.cls in classes:
            need = classes[c.cls] if need is None else need & classes[c.cls]
            continue
        if not _graph_only(c):
            break
    return need


def _graph_only(e: Expr) -> bool:
    """`e` reads no variable but `graph` and indexes nothing (cannot fail on one node and
    not another, nor fail at all on a graph: Note [steps by node type])."""
    for sub in walk(e):
        if isinstance(sub, Var) and sub.name != "graph":
            return False
        if isinstance(sub, Index):
            return False
    return True


def _late(*_a):
    raise RuntimeError("pack function called before definition")


def to_json(v: Any) -> Any:
    """A fact as a plain JSON value: nodes by name, anchors as 'node:idx', graphs by name."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, Node):
        return v.name
    if isinstance(v, (InAnchor, OutAnchor)):
        return f"{v.node.name}:{v.idx}"
    if isinstance(v, Graph):
        return v.name
    if isinstance(v, (list, tuple)):
        return [to_json(x) for x in v]
    return str(v)


def compiled(ctx, family: Family, spec) -> _Compiled:
    """One compiled rule set per run and pass (the runner calls `run` once per graph).

    Note [per-run cache]: the cache lives in the RunContext (rewrite_cache), so a new run
    (new options, new model) compiles afresh."""
    cache = ctx.rewrite_cache
    key = (family.section, spec.id)
    if key not in cache:
        name = spec.config or spec.id
        cache[key] = _Compiled(ctx, family.rule_sets[name], spec)
    return cache[key]


def _run(ctx, graph: Graph, family: Family, spec) -> None:
    c = compiled(ctx, family, spec)
    c.rewriter.changed = False
    c.run(graph)
    # Note [handed-on symbol tables] (engine/passes/manager.py): a run whose actions edited
    # nothing vouches for the graph (every graph of the pass must)
    if c.rewriter.changed:
        ctx.graph_kept = False
    elif ctx.graph_kept is None:
        ctx.graph_kept = True


def family_algorithm(section: str, doc: str) -> Algorithm:
    """The algorithm of one rewrite family a pack declares under `rewrite_sets:`."""
    return Algorithm(section, section, _loader(section), _run, f"rule-data rewrites: {doc}")


register_family("rewrite_sets", family_algorithm)

