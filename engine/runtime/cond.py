"""If/Case on the execute graph, as GE's RT2 builder does it (bg_condition, value_holder):
ConnectFromParents' InnerData, the cond control frame, CalcSubgraphGuardersPolicy with its
IdentityAddr plus-refs and parent guarders, CalcChainConflictSolvePolicy with one
PointFromInputs per branch, and UpdatePlacement. Every name and type comes from the pack's
`runtime:` section (rules/ge/runtime.yaml)."""
from __future__ import annotations

from engine.core.errors import InputError, Loc, Problem
from engine.runtime.exegraph import (XGraph, XNode, add_ctrl, add_edge, graph_records, insert_after, insert_before,
                                     node_record, remove_node)
from engine.runtime.model import BranchSpec, CaseSpec, CondSpec, NodeSpec, Ref

COND_GRAPH = "cond"   # Note [cond graph name]: GE's kConditionGraph is "CondGraph"; the interface calls it `cond`


class Holder:
    """A ValueHolder: one output of a node (idx -1: the node itself, no data output)."""

    __slots__ = ("node", "idx", "placement", "guarder")

    def __init__(self, node: XNode, idx: int, placement: str):
        self.node = node
        self.idx = idx
        self.placement = placement
        self.guarder: XNode | None = None


class CondFailure(Exception):
    """GE returns no holders (a modelled failure: `ok: false`)."""


class Builder:
    def __init__(self, rt):
        self.rt = rt
        self.t = rt.node_types
        self.a = rt.attrs
        self.root = XGraph("ROOT", None, [0])
        self.frames = [self.root]
        self.generated = 0
        self.values: dict[str, list[Holder]] = {}
        self.decisions: list[dict] = []          # one record per cond built (outermost last)

    # ---- ValueHolder ------------------------------------------------------------------
    @property
    def cur(self) -> XGraph:
        return self.frames[-1]

    def gen_name(self, type_: str) -> str:
        """GenerateNodeName: type and a counter (Note [generated names]: GE's counter also
        counts ValueHolders, ours only generated names, so names differ in number only)."""
        name = f"{type_}_{self.generated}"
        self.generated += 1
        return name

    def create_node(self, type_: str, inputs: list[Holder], n_out: int, name: str | None = None,
                    loc: Loc | None = None) -> XNode:
        data_ins = [h for h in inputs if h.idx >= 0]
        node = self.cur.add_node(name or self.gen_name(type_), type_, len(data_ins), n_out)
        outs_type = (self.t["netoutput"], self.t["inner_netoutput"])
        k = 0
        for h in inputs:
            if h.idx < 0:                 # a void holder feeds a control edge
                add_ctrl(self.connect_node(h.node, node, loc), node)
                continue
            src, si = self.connect_from_parents(h.node, h.idx, node, loc)
            add_edge(src, si, node, k)
            k += 1
            if h.guarder is not None and type_ not in outs_type:
                self.dependency_to_guarder(node, h.guarder)
        return node

    def connect_node(self, src: XNode, dst: XNode, loc: Loc | None) -> XNode:
        if src.graph is not dst.graph:
            raise InputError(Problem(loc or Loc("<case>"), f"'{src.name}' has no data output and is not on the graph "
                                     f"of '{dst.name}'", "only a value with outputs can be passed into a branch"))
        return src

    def connect_from_parents(self, src: XNode, si: int, dst: XNode, loc: Loc | None) -> tuple[XNode, int]:
        """ConnectFromParents: one InnerData per distinct outer value per graph on the way down."""
        if src.graph is dst.graph:
            return src, si
        path, g = [], dst.graph
        while g.parent is not None:
            path.append((g.parent, g))
            g = g.parent.graph
            if g is src.graph:
                break
        else:
            raise InputError(Problem(loc or Loc("<case>"), f"'{src.name}' is not on the graph of '{dst.name}' or "
                                     f"on one of its parent graphs", "a branch can use its own values, the values "
                                     "of the branches around it and the feeds, not a sibling branch's"))
        outside_key, type_key = self.a["guarder_outside"], self.a["guarder_node_type"]
        for parent, graph in reversed(path):
            di = next((d_in for d, d_in in src.outs[si] if d is parent), None)
            if di is None:                  # EnsureHasDataEdge: append an input to the parent
                di = len(parent.ins)
                add_edge(src, si, parent, di)
            data = graph.inner_data.get(di)
            if data is None:                # EnsureHasData
                data = graph.add_node(self.gen_name(self.t["inner_data"]), self.t["inner_data"], 0, 1)
                data.attrs[self.a["index"]] = di
                graph.inner_data[di] = data
                guarder = src.attrs.get(outside_key) or src.attrs.get(type_key)
                if guarder:
                    data.attrs[outside_key] = guarder
            src, si = data, 0
        return src, si

    def dependency_to_guarder(self, node: XNode, guarder: XNode) -> None:
        """AddDependencyToGuarder: the node (or its ancestor on the guarder's graph) before the guarder."""
        cur = node
        while cur.graph is not guarder.graph:
            if cur.graph.parent is None:
                return
            cur = cur.graph.parent
        add_ctrl(cur, guarder)

    def create_void_guarder(self, type_: str, h: Holder) -> XNode:
        g = self.create_node(type_, [h], 0)
        g.attrs[self.a["release_resource_index"]] = 0
        h.node.attrs[self.a["guarder_node_type"]] = type_
        h.guarder = g
        return g

    def push(self, owner: XNode, name: str) -> XGraph:
        g = XGraph(name, owner, self.cur.counter)
        owner.subgraphs.append((name, g))
        self.frames.append(g)
        return g

    def resolve(self, r: Ref) -> Holder:
        hs = self.values.get(r.name)
        if hs is None:
            raise InputError(Problem(r.loc, f"'{r.name}' is not defined before this use",
                                     "name a feed, or a node defined earlier in this branch or around it"))
        if not 0 <= r.idx < len(hs) or hs[r.idx].idx < 0:
            n = sum(1 for h in hs if h.idx >= 0)
            raise InputError(Problem(r.loc, f"'{r.name}' has {n} output(s); there is no output {r.idx}",
                                     f"use {r.name}:0 .. {r.name}:{n - 1}" if n else "it has no data output"))
        return hs[r.idx]

    def define(self, name: str, holders: list[Holder], loc: Loc) -> None:
        if name in self.values:
            raise InputError(Problem(loc, f"'{name}' is defined twice", "node names are unique in a case"))
        self.values[name] = holders

    # ---- Cond ---------------------------------------------------------------------------
    def build_cond(self, c: CondSpec) -> list[Holder]:
        """bg::If / bg::Case: the holders GE returns (raises CondFailure where GE returns {})."""
        if c.cond is None:
            raise CondFailure(f"the input {'cond' if c.kind == 'if' else 'index'} of {c.op} is null")
        builders = list(c.branches)
        if c.kind == "if":
            if all(b is None for b in builders):
                raise CondFailure("then and else branch builders are both null")
            names = [b.name if b is not None and b.name else self.rt.if_branches[k] for k, b in enumerate(builders)]
        else:
            for k, b in enumerate(builders):
                if b is None:
                    raise CondFailure(f"the {k} th builder of Case is null")
            names = [b.name or self.rt.names["case_branch"].format(branch=k) for k, b in enumerate(builders)]
            if not builders:
                raise CondFailure("Case has no subgraph builders")
        inputs = [self.resolve(c.cond)] + [self.resolve(r) for r in c.extra_inputs]
        node = self.create_node(c.op, inputs, 0, c.name, c.loc)
        self.control_frame(node, len(builders))
        branch_outputs: list[list[Holder]] = []
        for k, b in enumerate(builders):
            self.push(node, names[k])
            outs = self.build_branch(b) if b is not None else []
            if k > 0 and len(outs) != len(branch_outputs[0]):
                raise CondFailure(f"branch {k} ({names[k]}) returns {len(outs)} output(s), branch 0 "
                                  f"({names[0]}) {len(branch_outputs[0])}")
            self.create_node(self.t["inner_netoutput"], outs, 0)
            self.frames.pop()
            branch_outputs.append(outs)
        n = len(branch_outputs[0])
        record = {"node": node.name, "op": c.op, "branches": names, "parent_guarders": [], "identity_addrs": [],
                  "point_froms": [], "conflict_indexes": [], "all_same_indexes": [], "output_placements": []}
        if n == 0:
            self.decisions.append(record)
            return [Holder(node, -1, c.placement or self.rt.default_placement)]
        start = node.append_outputs(n)
        holders = [Holder(node, start + k, self.rt.default_placement) for k in range(n)]
        self.ensure_lifecycle_extended(node, holders, record)
        self.ensure_chain_conflict_solved(node, record)
        self.update_placement(branch_outputs, holders, record)
        self.decisions.append(record)
        return holders

    def control_frame(self, node: XNode, n: int) -> None:
        """CreateControlFrame: InnerData(0) → SwitchNotify → WatcherPlaceholder / BranchPivot(i) ⇢ BranchDone(i) ⇢ WaitAnyone."""
        t, a = self.t, self.a
        self.push(node, COND_GRAPH)
        data = self.create_node(t["inner_data"], [], 1)
        data.attrs[a["index"]] = 0
        sn = self.create_node(t["switch_notify"], [Holder(data, 0, "")], n + 1)
        sn.attrs[a["request_watcher"]] = True
        self.create_node(t["watcher_placeholder"], [Holder(sn, 0, "")], 0)
        wait = self.create_node(t["wait_anyone"], [], 0)
        for i in range(n):
            pivot = self.create_node(t["branch_pivot"], [Holder(sn, i + 1, "")], 0)
            done = self.create_node(t["branch_done"], [], 0)
            pivot.attrs[a["branch"]] = i + 1
            done.attrs[a["branch"]] = i + 1
            add_ctrl(pivot, done)
            add_ctrl(done, wait)
        self.frames.pop()

    def build_branch(self, b: BranchSpec) -> list[Holder]:
        for ns in b.nodes:
            self.build_node(ns)
        return [self.resolve(r) for r in b.outputs]

    def build_node(self, ns: NodeSpec) -> None:
        if ns.cond is not None:
            try:
                holders = self.build_cond(ns.cond)
            except CondFailure as exc:
                raise CondFailure(f"nested {ns.cond.op} '{ns.name}': {exc}") from None
            self.define(ns.name, holders, ns.loc)
            return
        node = self.create_node(ns.type, [self.resolve(r) for r in ns.inputs], ns.outputs, ns.name, ns.loc)
        node.attrs.update(ns.attrs)
        for r in ns.ctrl_inputs:
            src = self.resolve_node(r)
            add_ctrl(self.connect_node(src, node, r.loc), node)
        holders = [Holder(node, k, ns.placement) for k in range(ns.outputs)] or [Holder(node, -1, ns.placement)]
        self.define(ns.name, holders, ns.loc)
        for out, type_ in ns.guarders:
            self.create_void_guarder(type_, holders[out])

    def resolve_node(self, r: Ref) -> XNode:
        hs = self.values.get(r.name)
        if hs is None:
            raise InputError(Problem(r.loc, f"'{r.name}' is not defined before this use", "name an earlier node"))
        return hs[0].node

    # ---- EnsureResourceLifeCycleExtended ------------------------------------------------------
    def find_guarder(self, src: XNode, si: int) -> tuple[bool, XNode | None, str]:
        """FindGuarder: an InnerData guarded outside (by a Free* type), or an in-graph guarder
        whose ReleaseResourceIndex is the input it consumes this output at."""
        if src.type == self.t["inner_data"]:
            outside = src.attrs.get(self.a["guarder_outside"])
            if outside:
                if outside not in self.rt.free_guarders:
                    return False, None, ""
                return True, None, outside
        rri = self.a["release_resource_index"]
        for dst, di in src.outs[si]:
            if rri in dst.attrs and dst.attrs[rri] == di:
                return True, dst, dst.type
        return False, None, ""

    def ensure_lifecycle_extended(self, node: XNode, holders: list[Holder], record: dict) -> None:
        branches = [g for _, g in node.subgraphs[1:]]
        guard_set: set[tuple[int, str]] = set()
        why: dict[tuple[int, str], list[dict]] = {}
        per_branch_indexes: list[set[int]] = []
        no_guarder: list[dict[int, tuple]] = []
        policies: list[tuple[list[XNode], list[tuple]]] = []
        for k, g in enumerate(branches):
            net = g.first_of_type(self.t["inner_netoutput"])
            seen: set[tuple[XNode, int]] = set()
            indexes, free, removed, plus = set(), {}, [], []
            for di, e in enumerate(net.ins):
                if e is None:
                    continue
                src, si = e
                has, in_graph, type_ = self.find_guarder(src, si)
                if not has:
                    free[di] = (src, si, net, di)
                    continue
                guard_set.add((di, type_))
                indexes.add(di)
                source = {"branch": k, "source": f"{src.name}:{si}", "source_type": src.type}
                if in_graph is not None:
                    source["guarder"] = in_graph.name
                    if (src, si) in seen:
                        plus.append((src, si, net, di, "second use of a guarded output"))
                    seen.add((src, si))
                    removed.append(in_graph)
                else:
                    source["outside"] = type_
                    plus.append((src, si, net, di, f"input guarded outside by {type_}"))
                why.setdefault((di, type_), []).append(source)
            per_branch_indexes.append(indexes)
            no_guarder.append(free)
            policies.append((removed, plus))
        for di, type_ in sorted(guard_set):
            for k in range(len(branches)):
                if di not in per_branch_indexes[k] and di in no_guarder[k]:
                    policies[k][1].append((*no_guarder[k][di], f"output {di} is guarded by {type_} in another branch"))
        if not guard_set:
            return
        for di, type_ in sorted(guard_set):
            g = self.create_void_guarder(type_, holders[di])
            record["parent_guarders"].append({"name": g.name, "type": type_, "output": di,
                                              "sources": why.get((di, type_), [])})
        for k, (removed, plus) in enumerate(policies):
            for gn in removed:
                if gn.alive:
                    remove_node(gn)
            if plus:
                name = self.rt.names["identity_addr"].format(cond=node.name, branch=k)
                ia = branches[k].add_node(name, self.t["identity_addr"], len(plus), len(plus))
                for j, (src, si, net, di, _) in enumerate(plus):
                    insert_after(src, si, [(net, di)], ia, j, j)
                record["identity_addrs"].append({"name": name, "branch": k, "graph": branches[k].name, "pairs": [
                    {"port": j, "source": f"{src.name}:{si}", "output": di, "why": w}
                    for j, (src, si, net, di, w) in enumerate(plus)]})

    # ---- EnsureChainConflictSolved ------------------------------------------------------------
    def ensure_chain_conflict_solved(self, node: XNode, record: dict) -> None:
        branches = [g for _, g in node.subgraphs[1:]]
        n_out = len(node.outs)
        per_output: list[set[int]] = [set() for _ in range(n_out)]
        nets = []
        sources: list[list[str]] = [[] for _ in range(n_out)]
        for g in branches:
            net = g.first_of_type(self.t["inner_netoutput"])
            nets.append(net)
            k = 0
            for e in net.ins:
                if e is None:
                    continue
                src = e[0]
                if k >= n_out:
                    raise CondFailure(f"{net.name} has more inputs than {node.name} has outputs")
                if src.type == self.t["inner_data"]:
                    per_output[k].add(int(src.attrs[self.a["index"]]))
                    sources[k].append(f"input {src.attrs[self.a['index']]}")
                else:
                    per_output[k].add(-1)
                    sources[k].append(f"{src.type} {src.name}")
                k += 1
        conflicts = [i for i, s in enumerate(per_output) if len(s) > 1]
        record["conflict_indexes"] = conflicts
        record["all_same_indexes"] = [i for i, s in enumerate(per_output) if len(s) == 1 and s != {-1}]
        record["conflict_sources"] = {str(i): sources[i] for i in conflicts}
        if not conflicts:
            return
        for k, net in enumerate(nets):
            name = self.rt.names["point_from_inputs"].format(cond=node.name, branch=k)
            pf = net.graph.add_node(name, self.t["point_from_inputs"], len(conflicts), len(conflicts))
            for j, ci in enumerate(conflicts):
                insert_before(net, ci, pf, j, j)
            record["point_froms"].append({"name": name, "branch": k, "graph": net.graph.name, "outputs": conflicts})

    # ---- UpdatePlacement ------------------------------------------------------------------------
    def update_placement(self, branch_outputs: list[list[Holder]], holders: list[Holder], record: dict) -> None:
        rt = self.rt
        for i, h in enumerate(holders):
            seen = {rt.following_as if o[i].placement == rt.following else o[i].placement for o in branch_outputs}
            h.placement = next(iter(seen)) if len(seen) == 1 else rt.mixed_placement
        record["output_placements"] = [h.placement for h in holders]


def run_case(case: CaseSpec, rt) -> tuple[dict, list[dict]]:
    """Build the case as GE would: the interface's JSON object and the per-cond decisions.

    Note [failed builds]: where GE returns no holders, `root` shows the graph as GE left it
    (the cond node, if it was created, with the subgraphs built so far) and no root NetOutput;
    a failing nested cond fails the whole case (GE's outer builder would go on with an empty
    holder list, which no builder can use)."""
    b = Builder(rt)
    for i, f in enumerate(case.feeds):
        node = b.root.add_node(f.name, rt.node_types["data"], 0, 1)
        node.attrs[rt.attrs["index"]] = i
        h = Holder(node, 0, f.placement)
        b.define(f.name, [h], f.loc)
    for f in case.feeds:
        if f.guarder:
            b.create_void_guarder(f.guarder, b.values[f.name][0])
    out = {"ok": True, "holders": 0, "conflict_indexes": [], "all_same_indexes": [], "output_placements": []}
    try:
        holders = b.build_cond(case.cond)
    except CondFailure as exc:
        out["ok"] = False
        out["reason"] = str(exc)
        holders = []
    top = b.decisions[-1] if holders else None
    if holders:
        out.update(holders=len(holders), conflict_indexes=top["conflict_indexes"],
                   all_same_indexes=top["all_same_indexes"], output_placements=top["output_placements"])
        if case.root_netoutput:
            # PopGraphFrame(holders): the root NetOutput, named by its type
            b.create_node(rt.node_types["netoutput"], holders, 0, rt.node_types["netoutput"])
    out["root"] = {"nodes": [node_record(n) for n in b.root.live_nodes()]}
    return out, (b.decisions if holders else [])


__all__ = ["Builder", "CondFailure", "run_case", "graph_records"]
