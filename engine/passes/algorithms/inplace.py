"""Algorithm `inplace`: GE's ProcessInplace (mem_inplace.cc, ge-conflict-rules.md §7).

Candidates come from a list-list attribute (`[[out, in], ...]`); the filters
GE applies (last consumer, one stream, no reference consumer, equal byte size,
read-only symbols, continuous outputs, ref-var outputs, same symbol, a layout
conflict in the merged symbol) and the control-node revert are GE's; which nodes
are read-only sources, which consumers block and which outputs are excluded come
from the pack's `inplace:` section. Chosen outputs get `reuse_input=true` and
`reuse_input_index`, and their symbol is merged into the input's.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.passes.registry import Algorithm, register
from engine.passes.context import Diagnostic
from engine.dsl.compiler import Compiler
from engine.dsl.ast import Call, Expr, walk
from engine.core.errors import Cite, Collector, Loc, PassFailure
from engine.core.graph import Graph, InAnchor, OutAnchor, writable_desc
from engine.core.lean import VERIFY_CACHES
from engine.pack.model import Pack
from engine.pack.loader import parse_rule_expr
from engine.dsl.library import bound_functions
from engine.core.attrs import attr_keys, node_attr
from engine.core.schema import Reader
from engine.passes.symbols import SymbolTable, check_same_table
from engine.passes.algorithms.ctrl_conflict import CtrlNodeConflict
from engine.passes.algorithms.layout import LayoutPass
from engine.passes.probe import ISOLATED, NO_CONFLICT, Step, expr_cite
from engine.varmgr.getypes import calc_tensor_mem_size
from engine.varmgr.nodes import desc_at

PREDICATES = {"read_only_source": ("node",), "consumer_blocks": ("node",), "no_inplace_node": ("node",),
              "excluded_output": ("anchor",)}


@dataclass(frozen=True)
class InplaceConfig:
    ability_attr: str
    stream_wildcard: int
    predicates: dict[str, Expr]
    layout_section: str
    loc: Loc


def load(value: Any, pack: Pack, errors: Collector) -> InplaceConfig | None:
    r = Reader(value, "inplace", errors, Loc(str(pack.path)))
    ability = r.get("ability_attr", str, "", required=True)
    wildcard = r.get("stream_wildcard", int, -1)
    layout = r.get("layout_section", str, "layout_conflict")
    preds = {}
    for name, params in PREDICATES.items():
        text = r.get(name, (str, bool), None, required=True)
        e = parse_rule_expr(text, r.value_loc(name), errors) if text is not None else None
        if e is not None:
            types = {"anchor": "OutAnchor"} if "anchor" in params else ()
            Compiler(pack.scope(params), errors).check(e, types, "bool", f"`{name}`")
            preds[name] = e
    r.done()
    if errors:
        return None
    return InplaceConfig(str(ability), int(wildcard), preds, str(layout), r.loc)


def _may_fail(prim) -> bool:
    """A primitive that may stop the pass; a pack-defined one (its body unseen here) counts."""
    return prim is None or prim.template is not None or bool(prim.effects)


def _byte_size(a) -> int:
    """RemoveSizeNotEqual's size, TensorUtils::GetTensorSizeInBytes: CalcTensorMemSize of the
    descriptor's shape, format and data type, unaligned (engine/varmgr/getypes.py). GE never
    reads the descriptor's `size` field here: a built dump's sizes are aligned (a [3] and a [4]
    float tensor both say 64 bytes). Where GE's call fails, or gives a negative size (an unknown
    shape, a data type without a size), GE_ASSERT_SUCCESS fails ProcessInplace: PassFailure with
    the pass id filled in by the caller (`_SizeUnknown`)."""
    is_out = a.is_out
    td = desc_at(a.node, a.idx, "", outputs=is_out)
    size = calc_tensor_mem_size(td.dims, td.format, td.dtype) if td is not None else None
    if size is None or size < 0:
        side = "output" if is_out else "input"
        raise _SizeUnknown(f"the size of {side} {a.idx} of {a.node.name} cannot be computed (GetTensorSizeInBytes: "
                           + ("no descriptor" if td is None else f"shape {list(td.dims)}") + ")")
    return size


class _SizeUnknown(Exception):
    """A tensor size GetTensorSizeInBytes cannot compute (the pass fails)."""


def _sizes_equal(out, inp) -> bool:
    """The why-not probe's reading of the size filter (a size that fails the pass is no match)."""
    try:
        return _byte_size(out) == _byte_size(inp)
    except _SizeUnknown:
        return False


class InplacePass:
    def __init__(self, ctx, cfg: InplaceConfig, spec):
        self.ctx, self.cfg, self.spec = ctx, cfg, spec
        comp = Compiler(ctx.pack.scope(("node", "anchor"), functions=bound_functions(ctx)), Collector())
        self.p = {k: comp.function(e, PREDICATES[k]) for k, e in cfg.predicates.items()}
        # Note [pure predicate]: one that cannot stop the pass (no `fail` reached) may go
        # unevaluated on a node with no candidate: nothing else would differ
        fns = comp.scope.functions
        self.pure_no_inplace = not any(isinstance(x, Call) and _may_fail(fns.get(x.fn))
                                       for x in walk(cfg.predicates["no_inplace_node"]))
        layout_cfg = ctx.pack.configs.get(cfg.layout_section)
        self.lp = LayoutPass(ctx, layout_cfg, spec)
        self.lp.probe = None       # its merged-symbol checks are not the layout pass deciding

    def candidates(self, node) -> list[tuple[int, int]]:
        """GE GetSupportInplaceOutput's pairs: none when the attribute is no list of lists (GetListListInt
        fails); the pass fails at the first item that is not a pair, or names an input without a producer
        or an output the node lacks (GE_ASSERT_NOTNULL), as GE's memory assignment does."""
        v = node_attr(node, self.cfg.ability_attr)
        if not isinstance(v, list) or not all(isinstance(item, list) for item in v):
            return []
        pairs = []
        for item in v:
            if len(item) != 2 or not all(isinstance(x, int) and not isinstance(x, bool) for x in item):
                raise PassFailure(self.spec.id, f"{self.cfg.ability_attr} item {item} is not an [output, input] pair",
                                  node.name)
            o, i = item
            if not (0 <= i < len(node.ins)) or node.ins[i].peer is None:
                raise PassFailure(self.spec.id, f"{self.cfg.ability_attr} names input {i}, which has no producer",
                                  node.name)
            if not 0 <= o < len(node.outs):
                raise PassFailure(self.spec.id, f"{self.cfg.ability_attr} names output {o}, which the node lacks",
                                  node.name)
            pairs.append((o, i))
        return pairs

    def last_consumer_ok(self, node, a: InAnchor) -> bool:
        src = a.peer
        if src is None:
            return False
        consumers = [p.node for o in src.node.outs for p in o.peers]
        if not consumers or max(c.id for c in consumers) != node.id:
            return False
        # GE HasSameStreamId: a producer without a stream (the wildcard) takes its first
        # consumer's; every later consumer is on that stream or on none
        cur = src.node.op.stream_id
        w = self.cfg.stream_wildcard
        for c in consumers:
            sid = c.op.stream_id
            if cur == w:
                cur = sid
            elif sid != cur and sid != w:
                return False
        return not any(self.p["consumer_blocks"](c) for c in consumers)      # then HasRefAttr

    def run(self, graph: Graph) -> None:
        model = self.ctx.model
        lp = self.lp
        # Note [handed-on symbol tables] (engine/passes/manager.py): the layout pass's, when
        # nothing was edited since it was built
        table = self.ctx.take_symbols(graph)
        if table is None:
            table = lp.sym.build(model, graph)
        elif VERIFY_CACHES:
            check_same_table(table, lp.sym.build(model, graph), graph)
        # one node list for both walks: neither edits the graph (predicates cannot: the type checker
        # refuses an editing function outside actions; the chosen pairs are written after both)
        nodes = model.all_nodes(graph)
        read_only = {table.of[o] for n in nodes if self.p["read_only_source"](n)
                     for o in n.outs if o in table.of}
        chosen: list[tuple[InAnchor, OutAnchor]] = []
        rejected: dict[OutAnchor, list[dict]] = {}
        probe = self.ctx.probe
        ability, pure = self.cfg.ability_attr, self.pure_no_inplace
        for node in nodes:
            if probe is not None and not probe.near and probe.wants_node(node):
                self.why_not(graph, table, read_only, node)
            # a node without the ability attribute has no candidate: its key set says so
            # before the attribute is looked up (Note [attribute key sets])
            if ability not in (node.akeys or attr_keys(node)):
                if pure:
                    continue
                cands = []
            else:
                cands = self.candidates(node)
            if not cands and pure:
                continue                # every filter below keeps nothing (Note [pure predicate])
            cand = [(o, i) for o, i in cands
                    if 0 <= o < len(node.outs) and 0 <= i < len(node.ins)]
            cand = [(o, i) for o, i in cand if self.last_consumer_ok(node, node.ins[i])]
            try:
                cand = [(o, i) for o, i in cand if _byte_size(node.outs[o]) == _byte_size(node.ins[i])]
            except _SizeUnknown as e:
                raise PassFailure(self.spec.id, str(e), node.name) from None
            cand = [(o, i) for o, i in cand if node.ins[i] in table.of and table.of[node.ins[i]] not in read_only]
            if self.p["no_inplace_node"](node):
                cand = []
            cand = [(o, i) for o, i in cand if not self.p["excluded_output"](node.outs[o])]
            cand = [(o, i) for o, i in cand if table.of.get(node.ins[i]) != table.of.get(node.outs[o])]
            cand = [(o, i) for o, i in cand if not self.merged_conflict(graph, table, node.ins[i], node.outs[o])]
            used: set[int] = set()
            for o in sorted({o for o, _ in cand}):
                for oo, i in cand:
                    if oo == o and i not in used:
                        if sum(1 for x, _ in cands if x == o) > 1:      # a choice between inputs
                            rejected[node.outs[o]] = self.rejected_inputs(graph, table, read_only, node, o, i, set(used))
                        used.add(i)
                        chosen.append((node.ins[i], node.outs[o]))
                        break
        if not chosen:
            self.ctx.symbols = table
            return
        for i, o in chosen:
            d = writable_desc(o)
            d.reuse_input = True
            d.reuse_input_index = i.idx
        if self.ctrl_conflict(graph):
            for i, o in chosen:
                d = writable_desc(o)
                d.reuse_input = False
                d.reuse_input_index = 0
            self.ctx.diagnostics.append(Diagnostic("INPLACE_REVERTED", "info",
                                                   "in-place reuse reverted: a control-node subgraph would conflict",
                                                   self.spec.id, {"pairs": [f"{i.key}->{o.key}" for i, o in chosen]}))
            self.ctx.symbols = table
            return
        for i, o in chosen:
            src = i.peer
            if src is not None and src in table.of and o in table.of:
                table.union(table.of[o], table.of[src])
            details: dict = {"node": o.node.name, "output": o.idx, "input": i.idx}
            cites: tuple = ()
            if rejected.get(o):
                cites = tuple(dict.fromkeys(r["rule_loc"] for r in rejected[o] if "rule_loc" in r))
                details["rejected_inputs"] = [{k: (str(v.loc) if isinstance(v, Cite) else v) for k, v in r.items()}
                                              for r in rejected[o]]
            self.ctx.diagnostics.append(Diagnostic("INPLACE_REUSE", "info",
                                                   f"{o.key} reuses the memory of {i.key}", self.spec.id,
                                                   details, cites))
        self.ctx.symbols = table

    # ---- why not (only with a probe: engine/passes/probe.py) ------------------------------
    def why_not(self, graph: Graph, table: SymbolTable, read_only: set, node) -> None:
        """Each in-place candidate (output, input) of node and the first filter that drops it."""
        probe = self.ctx.probe
        cands = self.candidates(node)
        ability = Step(f"{self.cfg.ability_attr} of {node.name}", str([[o, i] for o, i in cands]) if cands else "absent",
                       None, (("section", "inplace.ability_attr"),))
        if not cands:
            probe.look(self.spec.id, graph, node.name, NO_CONFLICT, "no-candidate", [ability], 0)
            return
        for o, i in cands:
            tests = self._filters(graph, table, read_only, node, o, i)
            steps, failed = [ability], None
            for text, test, cite in tests:
                ok = bool(test()) if callable(test) else bool(test)
                steps.append(Step(text, "yes" if ok else "no", cite))
                if not ok:
                    failed = len(steps) - 1
                    break
            about = f"output {o} reusing input {i} of {node.name}"
            if failed is None:
                probe.look(self.spec.id, graph, about, ISOLATED, "in-place", steps, None)
            else:
                probe.look(self.spec.id, graph, about, NO_CONFLICT, "filter", steps, failed)

    def _filters(self, graph: Graph, table: SymbolTable, read_only: set, node, o: int, i: int) -> list:
        """The filters `run` applies to candidate (output o, input i), in its order: (text, test, cite)."""
        pcite = {k: expr_cite(e, f"inplace.{k}") for k, e in self.cfg.predicates.items()}
        if not (0 <= o < len(node.outs) and 0 <= i < len(node.ins)):
            return [("ports exist", False, None)]
        out, inp = node.outs[o], node.ins[i]
        return [
            ("the node is its input's producer's last consumer, on one stream, no blocking consumer",
             lambda: self.last_consumer_ok(node, inp), pcite.get("consumer_blocks")),
            ("equal byte sizes", lambda: _sizes_equal(out, inp), None),
            ("the input's symbol is not read-only (fed by a read-only source)",
             lambda: inp in table.of and table.of[inp] not in read_only, pcite.get("read_only_source")),
            ("not no_inplace_node", lambda: not self.p["no_inplace_node"](node), pcite.get("no_inplace_node")),
            ("not excluded_output", lambda: not self.p["excluded_output"](out), pcite.get("excluded_output")),
            ("input and output in different symbols", lambda: table.of.get(inp) != table.of.get(out), None),
            ("no layout conflict in the merged symbol", lambda: not self.merged_conflict(graph, table, inp, out), None),
        ]

    def rejected_inputs(self, graph: Graph, table: SymbolTable, read_only: set, node, o: int, taken: int,
                        used: set) -> list[dict]:
        """Note [in-place on input i or j]: ProcessInplace reuses, per output, the first input of
        `_output_inplace_ability` that passes every filter. The other inputs listed for output o,
        and why each was not taken: the filter that dropped it (with the pack item it reads), an
        earlier output took it, or it comes after the one taken."""
        out = []
        order = [i for oo, i in self.candidates(node) if oo == o]
        cands = [i for i in order if i != taken]
        for i in dict.fromkeys(cands):
            failed = next(((text, cite) for text, test, cite in self._filters(graph, table, read_only, node, o, i)
                           if not (test() if callable(test) else test)), None)
            if failed is not None:
                why = {"input": i, "rejected": f"fails: {failed[0]}"}
                if failed[1] is not None:
                    why["rule_loc"] = failed[1]
            elif i in used:
                why = {"input": i, "rejected": "an earlier output reuses it already"}
            elif order.index(i) > order.index(taken):
                why = {"input": i, "rejected": f"input {taken} comes first in {self.cfg.ability_attr} and passes"}
            else:
                continue
            out.append(why)
        return out

    def merged_conflict(self, graph: Graph, table: SymbolTable, i: InAnchor, o: OutAnchor) -> bool:
        """IsGraphExistMemConflictSymbol on the one symbol {in_sym ∪ out_sym}."""
        anchors = list(table.anchors.get(table.of[i], [])) + list(table.anchors.get(table.of[o], []))
        single = SymbolTable()
        name = table.of[i]
        single.anchors[name] = anchors
        for a in anchors:
            single.of[a] = name
        lp = self.lp
        lp.graph, lp.table = graph, single
        lp.marks = {}
        for n in {id(a.node): a.node for a in anchors}.values():
            lp.mark_node(n, graph)
        return bool(lp.find_conflicts(anchors))

    def ctrl_conflict(self, graph: Graph) -> bool:
        """IsCtrlNodeSubgraphExistMemConflictSymbol: §5.9's checks, as predicates.

        Note [ctrl check failures]: GE gathers the anchors of every control node first, and
        a check that fails on the way (a missing branch or body, a branch without a NetOutput,
        a one-output body with no Data or an unfed output: the solve's failures) makes the
        whole answer false (GE_ASSERT in a bool function), whatever was found before it. A
        loop output IsSkipInsert passes over (fed by a copy) is no conflict, as in the solve."""
        if self.lp.cfg.ctrl is None:
            return False
        ctrl = CtrlNodeConflict(self.lp)
        found = False
        try:
            for node in self.ctx.model.all_nodes(graph):
                if ctrl.p["branch"](node):
                    for sg in ctrl.branches(node):
                        if ctrl._netoutput(sg) is None:
                            return False
                        found = found or bool(ctrl.check_branch(sg))
                elif ctrl.p["loop"](node):
                    body, net = ctrl.loop_body(node)
                    exchanged, bypass = ctrl.body_data_to_netoutput(body, net)
                    need = ctrl.output_identity_verdict(body, net, node)[0]
                    skip = self.lp.f_skip_insert
                    if exchanged or (need and any(a.idx not in bypass and not skip(a) for a in net.ins)):
                        found = True
        except PassFailure:
            return False
        return found


def run(ctx, graph: Graph, cfg: InplaceConfig, spec) -> None:
    InplacePass(ctx, cfg, spec).run(graph)


register(Algorithm("inplace", "inplace", load, run,
                   "GE ProcessInplace: in-place output reuse with read-only, conflict and control-node filters"))
