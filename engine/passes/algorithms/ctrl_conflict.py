"""CtrlNodeConflict (ge-conflict-rules.md §5.9): subgraph-boundary conflicts of
branch nodes (If/Case) and loops (While), solved before the symbol sweep.

Which nodes are branches or loops, which producers may not feed a branch output
directly, and what counts as a continuous-input node come from the pack
(`layout_conflict.ctrl_nodes`); the procedure is GE's.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.core import surgery
from engine.dsl.ast import Expr
from engine.core.errors import Collector, Loc, PassFailure
from engine.core.graph import Graph, InAnchor, Node
from engine.passes.insertion import apply_neighbour_attrs, build_op, copy_from_src
from engine.passes.probe import ISOLATED, NO_CONFLICT, Step, expr_cite
from engine.pack.model import Pack
from engine.pack.loader import parse_rule_expr
from engine.core.attrs import node_attr, typed_attr
from engine.core.schema import Reader

PREDICATES = {
    "branch": ("node",),
    "loop": ("node",),
    "netoutput": ("node",),
    "data": ("node",),
    "branch_output_conflict": ("node", "netoutput"),
    "continuous_input": ("node",),
    "two_branches": ("node",),
}
OPTIONAL = {"two_branches"}        # absent: false (every branch node's subgraphs are taken as listed)


@dataclass(frozen=True)
class CtrlNodeConfig:
    predicates: dict[str, Expr]
    body_index: int
    parent_index_attr: str
    loc: Loc


def load_ctrl(value: Any, pack: Pack, errors: Collector, fallback: Loc) -> CtrlNodeConfig | None:
    if value is None:
        return None
    r = Reader(value, "layout_conflict.ctrl_nodes", errors, fallback)
    preds = {}
    for name in PREDICATES:
        text = r.get(name, (str, bool), None if name not in OPTIONAL else False, required=name not in OPTIONAL)
        e = parse_rule_expr(text, r.value_loc(name), errors) if text is not None else None
        if e is not None:
            preds[name] = e
    body = r.get("body_index", int, 1)
    pidx = pack.attr_key("parent_node_index")
    r.done()
    return CtrlNodeConfig(preds, int(body), str(pidx), r.loc)


class CtrlNodeConflict:
    def __init__(self, layout):
        self.lp = layout
        cfg: CtrlNodeConfig = layout.cfg.ctrl
        self.cfg = cfg
        self.p = {k: layout.comp.function(e, PREDICATES[k]) for k, e in cfg.predicates.items()}

    def _netoutput(self, g: Graph) -> Node | None:
        for n in g.nodes():
            if self.p["netoutput"](n):
                return n
        return None

    def _fail(self, node: Node, message: str) -> None:
        raise PassFailure(self.lp.spec.id, message, node.name)

    def branches(self, node: Node) -> list[Graph]:
        """The subgraphs GE solves (and checks) of a branch node: an If's 0 and 1 (then, else;
        SolveIfConflict), a Case's each one it names (SolveCaseConflict); a missing one fails
        (GE_CHECK_NOTNULL), an If's before either branch is looked at."""
        subs = list(node.subgraphs)
        if self.p["two_branches"](node):
            subs = [subs[i] if i < len(subs) else None for i in (0, 1)]
            if None in subs:
                self._fail(node, f"{node.type} has no {'then' if subs[0] is None else 'else'} branch (SolveIfConflict)")
        for i, sg in enumerate(subs):
            if sg is None:
                self._fail(node, f"{node.type} has no subgraph {i} (SolveCaseConflict)")
        return subs

    def loop_body(self, node: Node) -> tuple[Graph, Node]:
        """A loop's body and its NetOutput; either missing fails (SolveWhileConflict)."""
        idx = self.cfg.body_index
        body = node.subgraphs[idx] if idx < len(node.subgraphs) else None
        if body is None:                  # GE_CHECK_NOTNULL(while_body)
            self._fail(node, f"{node.type} has no body (subgraph {idx}) (SolveWhileConflict)")
        net = self._netoutput(body)
        if net is None:
            self._fail(node, f"loop body {body.name} has no NetOutput (SolveWhileConflict)")
        return body, net

    def solve(self, g: Graph) -> None:
        for node in self.lp.ctx.model.all_nodes(g):
            if not node.alive:
                continue
            if self.p["branch"](node):
                for sg in self.branches(node):
                    if self._netoutput(sg) is None:
                        self._fail(node, f"branch {sg.name} has no NetOutput (CheckOneSubGraphConflict)")
                    anchors = self.check_branch(sg, node, record=True)
                    if anchors:
                        self.insert_multi(anchors, {"kind": "ctrl-branch", "parent": node.name, "branch": sg.name,
                                                    "why": "a branch output aliases a subgraph input, a constant or a "
                                                           "variable, or repeats an earlier output's buffer"})
            elif self.p["loop"](node):
                self.solve_loop(node)

    def check_branch(self, branch: Graph, parent: Node | None = None, record: bool = False) -> list[InAnchor]:
        """The branch outputs to isolate; `record`: tell a why-not probe (the solve, not ProcessInplace's check)."""
        net = self._netoutput(branch)
        if net is None:
            return []
        table = self.lp.sym.build(self.lp.ctx.model, branch)
        seen: dict[str, InAnchor] = {}
        out = []
        probe = self.lp.probe if record else None
        for a in net.ins:
            sym = table.of.get(a)
            if sym is None:
                continue
            outs = [x for x in table.anchors[sym] if x.is_out]
            hit = [x for x in outs if self.p["branch_output_conflict"](x.node, net)]
            if hit or sym in seen:
                out.append(a)
            if probe is not None and (probe.wants(a) or (parent is not None and probe.wants_node(parent))):
                self._why_not_branch(a, parent, sym, outs, hit, seen.get(sym))
            seen.setdefault(sym, a)
        return out

    # ---- why not (only with a probe) -------------------------------------------------------
    def _why_not_branch(self, a: InAnchor, parent: Node | None, sym: str, outs: list, hit: list,
                        first: InAnchor | None) -> None:
        """SolveIfConflict for one branch output: the producers its symbol holds, the
        `branch_output_conflict` verdict on each, and whether an earlier output has the symbol."""
        cite = expr_cite(self.cfg.predicates["branch_output_conflict"], "layout/ctrl_nodes.branch_output_conflict")
        steps = [Step(f"branch_output_conflict on the producers of symbol {sym}",
                      "true for " + ", ".join(x.key for x in hit) if hit else "false for every one", cite,
                      (("producers", tuple(x.key for x in outs)),)),
                 Step(f"an earlier output of {a.node.name} has symbol {sym}",
                      f"yes: {first.node.name}:{first.idx}" if first is not None else "no")]
        about = f"{a.node.name}:{a.idx} (branch output" + (f" of {parent.name}" if parent is not None else "") + ")"
        if hit or first is not None:
            self.lp.probe.look(self.lp.spec.id, a.node.graph, about, ISOLATED, "ctrl-branch", steps, 0 if hit else 1)
        else:
            self.lp.probe.look(self.lp.spec.id, a.node.graph, about, NO_CONFLICT, "ctrl-branch", steps, 0)

    def _why_not_loop(self, node: Node, net: Node, need: bool, verdict: str, bypass: set, exchanged: list) -> None:
        """SolveWhileConflict: IsWhileNeedInsertIdentityAtOutput's answer, the outputs bypassed
        (Data p feeds output p) and the exchanged loop variables."""
        probe = self.lp.probe
        if not (probe.wants_node(node) or any(probe.wants(a) for a in net.ins)):
            return
        cite = expr_cite(self.cfg.predicates["continuous_input"], "layout/ctrl_nodes.continuous_input")
        steps = [Step("the body's outputs need an Identity (IsWhileNeedInsertIdentityAtOutput)",
                      f"{'yes' if need else 'no'}: {verdict}", cite, (("outputs", len(net.ins)),)),
                 Step("outputs a Data feeds at its own index (bypassed)", ", ".join(map(str, sorted(bypass))) or "none"),
                 Step("loop variables exchanged between iterations (Data p feeds output q≠p)",
                      ", ".join(d.name for d in exchanged) or "none")]
        isolated = need or bool(exchanged)
        probe.look(self.lp.spec.id, net.graph, f"{node.name} (loop body {net.graph.name})",
                   ISOLATED if isolated else NO_CONFLICT, "ctrl-loop", steps, 0 if need or not exchanged else 2)

    def solve_loop(self, node: Node) -> None:
        body, net = self.loop_body(node)
        exchanged, bypass = self.body_data_to_netoutput(body, net)
        need, verdict = self.output_identity_verdict(body, net, node)
        if self.lp.probe is not None:
            self._why_not_loop(node, net, need, verdict, bypass, exchanged)
        if need:
            anchors = [a for a in net.ins if a.idx not in bypass and a.peer is not None and not self.lp.f_skip_insert(a)]
            if anchors:
                self.insert_multi(anchors, {"kind": "ctrl-loop-output", "parent": node.name, "body": body.name,
                                            "bypassed": sorted(bypass),
                                            "why": "the loop body's outputs would overwrite buffers its inputs still use"})
        firsts = [d.outs[0].peers[0] for d in exchanged if d.outs and d.outs[0].peers]
        if firsts:
            self.insert_multi(firsts, {"kind": "ctrl-loop-exchange", "parent": node.name, "body": body.name,
                                       "exchanged": [d.name for d in exchanged],
                                       "why": "loop variables are exchanged between iterations (Data p feeds output q≠p)"})

    def body_data_to_netoutput(self, body: Graph, net: Node) -> tuple[list[Node], set[int]]:
        pidx = self.cfg.parent_index_attr
        exchanged, bypass = [], set()
        for d in body.nodes():
            if not self.p["data"](d) or not d.outs:
                continue
            p = node_attr(d, pidx)
            peers = d.outs[0].peers
            if not isinstance(p, int) or len(peers) != 1 or peers[0].node is not net:
                continue
            desc = peers[0].desc
            if desc is None or pidx not in desc.attr:
                continue
            q = typed_attr(desc.attr, pidx, "i") or 0
            if p != q:
                exchanged.append(d)
            else:
                bypass.add(peers[0].idx)
        return exchanged, bypass

    def output_identity_verdict(self, body: Graph, net: Node, loop: Node | None = None) -> tuple[bool, str]:
        """IsWhileNeedInsertIdentityAtOutput, with the fact that decided it; with `loop` (the
        solve), GE's failures: a body without a Data, or whose one output has no producer."""
        if len(net.ins) != 1:
            return True, f"the body's NetOutput has {len(net.ins)} inputs, not one"
        first = next((d for d in body.nodes() if self.p["data"](d)), None)
        if first is None and loop is not None:
            self._fail(loop, f"loop body {body.name} has no Data (IsWhileNeedInsertIdentityAtOutput)")
        if first is not None and len(first.outs) != 1:
            return True, f"the body's first Data {first.name} has {len(first.outs)} outputs, not one"
        src = net.ins[0].peer
        if src is None and loop is not None:
            self._fail(loop, f"the one output of loop body {body.name} has no producer (IsWhileNeedInsertIdentityAtOutput)")
        table = self.lp.sym.build(self.lp.ctx.model, body)
        if len(table.anchors) == 2:
            return True, "the body has exactly two memory symbols"
        if src is None:
            return False, "the body's one output has no producer"
        sym = table.of.get(src)
        readers = [x.node.name for x in table.anchors.get(sym, []) if not x.is_out and self.p["continuous_input"](x.node)]
        if readers:
            return True, f"a continuous-input node reads the output's symbol {sym}: {', '.join(readers)}"
        return False, (f"one output, one Data with one output, {len(table.anchors)} symbols (not two), and no "
                       f"continuous-input reader of the output's symbol {sym}")

    def insert_multi(self, anchors: list[InAnchor], why: dict) -> Node:
        """One Identity with an input/output pair per anchor, inserted before each."""
        lp = self.lp
        g = anchors[0].node.graph
        srcs = [a.peer for a in anchors]
        first = anchors[0]
        op = build_op(lp.ctx, lp.cfg.insert, g, [s.desc if s is not None else None for s in srcs],
                      srcs[-1].node if srcs[-1] is not None else None, {"idx": first.idx, "dst": first.node.name})
        # GE CreateIdentityOpDesc calls CopyAttr once per anchor, in order: each producer's flags
        # move onto the Identity, and the last producer with a label (and the last consumer) wins
        for a, s in zip(anchors, srcs):
            src_node = s.node if s is not None else None
            copy_from_src(op, lp.cfg.insert, src_node)
            apply_neighbour_attrs(op, lp.cfg.insert, src_node, a.node)
        # graph->InsertNode(in_data_anchors.back()->GetOwnerNode(), ...): right after the last
        # anchor's own node, with its id
        node = surgery.new_node(g, op, anchors[-1].node)
        node.ensure_inputs(len(anchors))
        node.ensure_outputs(len(anchors))
        moved = []
        for k, a in enumerate(anchors):
            # GraphUtils::InsertNodeBefore(anchor, node, k, k); a node controlling two owners
            # controls the one copy twice (Note [repeated control edges] in engine/core/surgery.py)
            moved.extend(p.name for p in surgery.put_before(a, node, k, k, lp.hooks.keep_in_ctrl))
        lp._fixup_netoutput(node, anchors)
        why = dict(why)
        why["checker"] = why["kind"]
        lp.record(node, srcs[0], anchors, why, moved, rule=why["kind"])
        return node
