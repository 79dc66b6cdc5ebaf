"""Memory symbols: GE's GraphUtils::GetRefMapping (ge-conflict-rules.md §3).

Anchors that share one buffer are grouped into a symbol. The structure is GE's
(inputs join their producer, outputs that reference an input or another node
join that symbol, subgraph Data/NetOutput link to the parent, Merge unions its
inputs); which nodes and outputs do so is the pack's `symbols:` section.

Symbol names are anchor keys (`<node>_in_<i>` / `<node>_out_<i>`): a symbol is
named after its first anchor, and a union keeps the larger group's name.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.passes.registry import register_section
from engine.dsl.compiler import Compiler
from engine.dsl.ast import Expr
from engine.core.errors import Collector, Loc, PassFailure
from engine.core.graph import Graph, Model, Node, OutAnchor
from engine.pack.model import Pack, Rule
from engine.pack.loader import load_rules, parse_rule_expr
from engine.dsl.library import bound_functions
from engine.core.attrs import node_attr, typed_attr
from engine.pack.rulelist import check_rules, compile_rules
from engine.core.schema import Reader

PREDICATES = ("subgraph_data", "subgraph_netoutput", "merge")


@dataclass(frozen=True)
class SymbolsConfig:
    predicates: dict[str, Expr]
    ref_from_input: list[Rule]
    ref_from_other: list[Rule]
    parent_index_attr: str
    next_iteration_attr: str
    loc: Loc


def load(value: Any, pack: Pack, errors: Collector) -> SymbolsConfig | None:
    r = Reader(value, "symbols", errors, Loc(str(pack.path)))
    preds_r = Reader(r.get("predicates", dict, {}, required=True), "symbols.predicates", errors, r.loc)
    preds = {}
    for name in PREDICATES:
        text = preds_r.get(name, str, None, required=True)
        e = parse_rule_expr(text, preds_r.value_loc(name), errors) if text is not None else None
        if e is not None:
            preds[name] = e
    preds_r.done()
    rfi = load_rules(r.get("ref_from_input", list, [], required=True), "symbols.ref_from_input", pack, errors, r.loc)
    rfo = load_rules(r.get("ref_from_other", list, []), "symbols.ref_from_other", pack, errors, r.loc)
    pidx = pack.attr_key("parent_node_index")
    nxt = str(r.get("next_iteration_attr", str, "", required=True))
    r.done()
    comp = Compiler(pack.scope(("node", "anchor")), errors)
    check_rules(comp, rfi, {"node": "Node", "anchor": "OutAnchor"}, "int")
    check_rules(comp, rfo, {"node": "Node", "anchor": "OutAnchor"}, "OutAnchor")
    pc = Compiler(pack.scope(("node",)), errors)
    for name, e in preds.items():
        pc.check(e, (), "bool", f"predicate '{name}'")
    if errors:
        return None
    return SymbolsConfig(preds, rfi, rfo, pidx, nxt, r.loc)


register_section("symbols", load)


_UNSEEN = object()       # not looked up yet (None is an answer)


class SymbolTable:
    """anchor → symbol name, symbol name → ordered anchors."""

    def __init__(self):
        self.of: dict[Any, str] = {}
        self.anchors: dict[str, list] = {}

    def new(self, a) -> str:
        name = a.key
        while name in self.anchors:        # duplicate node names across subgraphs
            name += "'"
        self.anchors[name] = [a]
        self.of[a] = name
        return name

    def add(self, a, sym: str) -> None:
        self.anchors[sym].append(a)
        self.of[a] = sym

    def union(self, s1: str, s2: str) -> str:
        """GE UnionSymbolMapping: the smaller list (ties: s1's) joins the larger."""
        if s1 == s2:
            return s1
        l1, l2 = self.anchors[s1], self.anchors[s2]
        small, big = (s1, s2) if len(l1) <= len(l2) else (s2, s1)
        for a in self.anchors[small]:
            self.of[a] = big
        self.anchors[big].extend(self.anchors.pop(small))
        return big

    def names(self) -> list[str]:
        return sorted(self.anchors)

    def to_json(self) -> dict:
        return {name: [a.key for a in self.anchors[name]] for name in self.names()}


class SymbolBuilder:
    """Builds the symbol table of a graph (and its nested subgraphs) per the pack."""

    def __init__(self, ctx, cfg: SymbolsConfig):
        self.cfg = cfg
        comp = Compiler(ctx.pack.scope(("node", "anchor"), functions=bound_functions(ctx)), Collector())
        self.f_rfi = compile_rules(comp, cfg.ref_from_input, ("node", "anchor"))
        self.f_rfo = compile_rules(comp, cfg.ref_from_other, ("node", "anchor"))
        self.p = {k: comp.function(e, ("node",)) for k, e in cfg.predicates.items()}
        self._rfi: dict = {}
        self.ctx = ctx

    def ref_from_input(self, out: OutAnchor) -> int | None:
        """GE IsRefFromInput: the input index this output aliases, or None (memoised:
        an output's alias does not change when nodes are inserted around it)."""
        k = self._rfi.get(out, _UNSEEN)
        if k is not _UNSEEN:
            return k
        k, _ = self.f_rfi(out.node, out)
        k = k if isinstance(k, int) and not isinstance(k, bool) else None
        self._rfi[out] = k
        return k

    def build(self, model: Model, graph: Graph) -> SymbolTable:
        t = SymbolTable()
        of, anchors = t.of, t.anchors
        merge, f_rfo, memo = self.p["merge"], self.f_rfo, self._rfi
        for node in model.all_nodes(graph):
            # Note [plain symbol step]: the inputs of a node that is no subgraph boundary and no
            # merge (nearly all) join their producers' symbols, and then every node's outputs
            # are placed, both inline here (no call per node or anchor); the special inputs
            # are _special_inputs' (which tests `merge` again: a predicate, no effect)
            special = (node.graph is not graph or merge(node)) and self._special_inputs(t, node, graph)
            if not special:
                for a in node.ins:
                    p = a.peer
                    if p is None:
                        t.new(a)
                        continue
                    s = of.get(p)
                    if s is None:
                        s = t.new(p)
                    anchors[s].append(a)
                    of[a] = s
            ins = node.ins
            for o in node.outs:
                if o in of:
                    continue
                # Note [output symbols]: GE HandleOutAnchorMapping, step by step. An output that
                # references another node (a RefData it names) joins that node's output 0 when the
                # table has it; one that reuses input k then joins input k's symbol through
                # UpdateRefMapping, which appends it whatever it had (so a reference and a reuse
                # of one symbol list it twice), and fails when input k is in no symbol or when the
                # output is already in another; an output that reuses no input gets a symbol of
                # its own name (emplace: when the reference placed it already, that symbol holds
                # it while the output stays where the reference put it)
                other, _ = f_rfo(o.node, o)
                if isinstance(other, OutAnchor):
                    s = of.get(other)
                    if s is not None:
                        anchors[s].append(o)
                        of[o] = s
                k = memo.get(o, _UNSEEN)
                if k is _UNSEEN:
                    k = self.ref_from_input(o)
                if k is not None and 0 <= k < len(ins):
                    src = of.get(ins[k])
                    if src is None:
                        self._fail(node, f"output {o.idx} reuses input {k}, which is in no symbol (UpdateRefMapping)")
                    anchors[src].append(o)
                    cur = of.setdefault(o, src)
                    if cur != src:
                        self._fail(node, f"output {o.idx} is in symbol {cur} by the node it references and would join "
                                         f"{src} by reusing input {k} (UpdateRefMapping)")
                elif o not in of:
                    t.new(o)
                elif o.key not in anchors:
                    anchors[o.key] = [o]
        return t

    def _fail(self, node: Node, message: str) -> None:
        """Note [symbol failures]: where GE's GetRefMapping returns a failure, the pass that
        asked for the symbols fails (each caller GE_ASSERTs its result)."""
        raise PassFailure(self.ctx.current_pass or "?", message, node.name)

    def _sym_of_out(self, t: SymbolTable, o: OutAnchor) -> str:
        s = t.of.get(o)
        return s if s is not None else t.new(o)

    def _special_inputs(self, t: SymbolTable, node: Node, graph: Graph) -> bool:
        """The symbols of a subgraph NetOutput's or Data's inputs, or a merge's; False (and
        nothing done) for any other node, whose inputs are the plain step (Note [plain
        symbol step])."""
        pidx = self.cfg.parent_index_attr
        parent = node.graph.parent_node
        if node.graph is not graph and parent is not None:
            if self.p["subgraph_netoutput"](node):
                # GE HandleSubgraphOutput: every input needs a producer (GE_CHECK_NOTNULL before
                # the index is read), an input without the parent index is passed over, and one
                # naming no output of the parent fails; Note [symbol failures]
                for a in node.ins:
                    if a.peer is None:
                        self._fail(node, f"input {a.idx} of the subgraph output has no producer (HandleSubgraphOutput)")
                    d = a.desc
                    if d is None or pidx not in d.attr:
                        continue
                    p = typed_attr(d.attr, pidx, "i") or 0
                    if not 0 <= p < len(parent.outs):
                        self._fail(node, f"input {a.idx} names output {p} of {parent.name}, which has "
                                         f"{len(parent.outs)} (HandleSubgraphOutput)")
                    sym = t.union(self._sym_of_out(t, a.peer), self._sym_of_out(t, parent.outs[p]))
                    t.add(a, sym)
                return True
            if self.p["subgraph_data"](node):
                p = node_attr(node, pidx)
                if isinstance(p, int) and not 0 <= p < len(parent.ins):
                    # GE HandleSubgraphInput: GE_CHECK_NOTNULL on the parent's in-anchor
                    self._fail(node, f"it names input {p} of {parent.name}, which has {len(parent.ins)} "
                                     "(HandleSubgraphInput)")
                if isinstance(p, int) and parent.ins[p].peer is not None and node.ins:
                    t.add(node.ins[0], self._sym_of_out(t, parent.ins[p].peer))
                return True
        if self.p["merge"](node):
            # GE HandleMergeInput: the producers' symbols (exist_node_infos) are joined, each to
            # the first of the largest as UnionSymbolMapping(max, other) joins them (on a tie the
            # other's symbol stays); then the merge's inputs (cur_node_infos) join the result in
            # input order, an input fed by NextIteration (no producer) followed by that node's
            # output, which keeps a symbol it has (anchor_to_symbol.emplace)
            sources, joining, unfed = [], [], []
            for a in node.ins:
                if a.peer is not None:
                    sources.append(a.peer)
                    joining.append(a)
                    continue
                nxt = node_attr(node, self.cfg.next_iteration_attr)
                src = node.graph.find(nxt) if isinstance(nxt, str) and nxt else None
                if src is not None and src.outs:
                    joining += (a, src.outs[0])
                else:
                    unfed.append(a)         # in no symbol in GE: one of its own here (no pair)
            syms = [self._sym_of_out(t, o) for o in sources]
            if not syms:
                for a in node.ins:
                    t.new(a)
                return True
            big = max(syms, key=lambda s: len(t.anchors[s]))   # first of the largest
            for s in syms:
                big = t.union(big, s) if s in t.anchors and s != big else big
            members = t.anchors[big]
            for x in joining:
                members.append(x)
                t.of.setdefault(x, big)
            for a in unfed:
                t.new(a)
            return True
        return False


def check_same_table(kept: SymbolTable, built: SymbolTable, graph: Graph) -> None:
    """Verify mode (MEMCONFLICT_VERIFY_CACHES=1): a table handed on to a later pass is the
    one building it now gives, symbol by symbol and anchor by anchor, in order (Note
    [handed-on symbol tables] in engine/passes/manager.py)."""
    if list(kept.anchors.items()) != list(built.anchors.items()) or list(kept.of.items()) != list(built.of.items()):
        raise AssertionError(f"graph {graph.name}: a symbol table handed on from an earlier pass differs "
                             "from the one its graph gives now")


def symbol_builder(ctx) -> SymbolBuilder:
    cfg = ctx.pack.configs.get("symbols")
    if cfg is None:
        from engine.core.errors import InputError, Problem
        raise InputError(Problem(Loc(str(ctx.pack.path)), "the pack has no `symbols:` section",
                                 "symbols are needed by the layout and in-place passes"))
    return SymbolBuilder(ctx, cfg)
