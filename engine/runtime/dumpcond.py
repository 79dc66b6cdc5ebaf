"""Every If/Case of a GE dump as a `runtime cond` case: the node's inputs are the feeds (a
branch Data's `_parent_node_index` names the one it stands for, so it is InnerData's
index), each branch subgraph's nodes are built in order, its NetOutput inputs (by their
`_parent_node_index`) are the branch outputs, and the pack's `runtime.dump.guarders` rules
say which guarder the lowering gives each output."""
from __future__ import annotations

from engine.core.attrs import attr_value
from engine.core.errors import Collector, InputError, Loc, Problem, display_path
from engine.runtime.cond import run_case
from engine.runtime.model import BranchSpec, CaseSpec, CondSpec, Feed, NodeSpec, Ref


class DumpConds:
    def __init__(self, model, pack, path: str):
        from engine.dsl.compiler import Compiler
        from engine.dsl.library import bound_functions
        from engine.passes.context import RunContext

        self.model = model
        self.pack = pack
        self.rt = pack.configs["runtime"]
        self.loc = Loc(display_path(path))
        self.parent_key = pack.attr_key("parent_node_index")
        ctx = RunContext(pack, model, {})
        comp = Compiler(pack.scope(("node",), functions=bound_functions(ctx)), Collector())
        self.rules = [(r, comp.function(r.when, ("node",))) for r in self.rt.guard_rules]
        cls = pack.classes.get("netoutput")       # the dump's NetOutput types: the op class, else the runtime's
        self.netoutputs = cls.types if cls is not None else frozenset({self.rt.node_types["netoutput"]})
        self._guard_cache: dict = {}

    def guard(self, node):
        """(guarder type or None, the rule that decided) for the outputs of `node`."""
        hit = self._guard_cache.get(node)
        if hit is None:
            hit = (None, None)
            for rule, fn in self.rules:
                if fn(node):
                    hit = (rule.guarder, rule)
                    break
            self._guard_cache[node] = hit
        return hit

    def cond_nodes(self) -> list:
        ops = self.rt.if_ops | self.rt.case_ops
        return [n for n in self.model.all_nodes() if n.type in ops]

    def case_of(self, node) -> CaseSpec:
        self.used: dict[str, int] = {}
        feeds, refs = [], []
        for a in node.ins:
            p = a.peer
            base = f"{p.node.name}" if p is not None and p.idx == 0 else \
                f"{p.node.name}.{p.idx}" if p is not None else f"{node.name}.in{a.idx}"
            name = self.unique(base)
            guarder, rule = self.guard(p.node) if p is not None else (None, None)
            feeds.append(Feed(name, guarder, self.rt.default_placement, self.loc, rule))
            refs.append(Ref(name, 0, self.loc))
        if not refs:
            cond_spec = CondSpec(node.name, node.type, self.kind(node), None, (), self.loc)
            return CaseSpec((), cond_spec, False, self.loc, {"node": node.name, "graph": node.graph.name})
        spec = self.cond(node, refs)
        return CaseSpec(tuple(feeds), spec, False, self.loc, {"node": node.name, "graph": node.graph.name})

    def unique(self, base: str) -> str:
        k = self.used.get(base, 0)
        self.used[base] = k + 1
        return base if k == 0 else f"{base}#{k}"

    def kind(self, node) -> str:
        return "if" if node.type in self.rt.if_ops else "case"

    def cond(self, node, inputs: list[Ref]) -> CondSpec:
        """`inputs`: the refs of the node's inputs in its own graph's naming."""
        branches = []
        for sg in node.subgraphs:
            branches.append(None if sg is None else self.branch(sg, inputs))
        if self.kind(node) == "if":
            branches = (branches + [None, None])[:2]
        return CondSpec(node.name, node.type, self.kind(node), inputs[0], tuple(branches), self.loc,
                        extra_inputs=tuple(inputs[1:]))

    def branch(self, graph, parent_inputs: list[Ref]) -> BranchSpec:
        names: dict = {}            # dump node → its ref here; a parent Data → the parent's input
        parent_data: set = set()
        nodes, outputs = [], {}
        for n in graph.nodes():
            pidx = attr_value(n.attr(self.parent_key))
            if n.type not in self.netoutputs and all(a.peer is None for a in n.ins) and isinstance(pidx, int) and 0 <= pidx < len(parent_inputs):
                names[n] = parent_inputs[pidx]
                parent_data.add(n)
                continue
            if n.type in self.netoutputs:
                for a in n.ins:
                    if a.peer is None:
                        continue
                    d = a.desc
                    p = attr_value(d.attr[self.parent_key]) if d is not None and self.parent_key in d.attr else a.idx
                    outputs[int(p)] = self.ref(names, parent_data, a.peer)
                continue
            ins = [self.ref(names, parent_data, a.peer) for a in n.ins if a.peer is not None]
            own = self.unique(n.name)
            names[n] = Ref(own, 0, self.loc)
            if n.type in self.rt.if_ops | self.rt.case_ops and ins:
                nodes.append(NodeSpec(own, n.type, (), 0, (), "", {}, (), self.loc, cond=self.cond_named(n, own, ins)))
                continue
            guarder, rule = self.guard(n)
            guards = tuple((k, guarder) for k in range(len(n.outs))) if guarder else ()
            ctrl = tuple(names[c] for c in n.in_ctrl if c in names and c not in parent_data)
            nodes.append(NodeSpec(own, n.type, tuple(ins), len(n.outs), guards, self.rt.default_placement, {},
                                  ctrl, self.loc, rule=rule))
        if outputs and sorted(outputs) != list(range(len(outputs))):
            raise InputError(Problem(self.loc, f"graph '{graph.name}': NetOutput's {self.parent_key} values "
                                     f"{sorted(outputs)} are not 0..{len(outputs) - 1}",
                                     "each parent output needs exactly one NetOutput input"))
        return BranchSpec(graph.name, tuple(nodes), tuple(outputs[k] for k in sorted(outputs)), self.loc)

    def cond_named(self, n, own: str, ins: list[Ref]) -> CondSpec:
        c = self.cond(n, ins)
        return CondSpec(own, c.op, c.kind, c.cond, c.branches, c.loc, c.extra_inputs)

    def ref(self, names: dict, parent_data: set, peer) -> Ref:
        r = names.get(peer.node)
        if r is None:
            raise InputError(Problem(self.loc, f"graph '{peer.node.graph.name}': '{peer.node.name}' is used before it "
                                     "is defined (the dump is not in topological order)", "save the graph sorted"))
        return r if peer.node in parent_data else Ref(r.name, peer.idx, self.loc)


def dump_conds(path: str, pack, only: str | None = None) -> dict:
    from engine.core.io import load_graph
    model, _ = load_graph(path, pack)
    dc = DumpConds(model, pack, path)
    nodes = dc.cond_nodes()
    if only is not None:
        nodes = [n for n in nodes if n.name == only]
        if not nodes:
            from engine.core.errors import did_you_mean
            raise InputError(Problem(Loc("--node"), f"no If/Case node named '{only}'",
                                     did_you_mean(only, [n.name for n in dc.cond_nodes()], "If/Case nodes")))
    results = [analyse(dc, n) for n in nodes]
    if only is not None:
        return results[0][0]
    return {"graph": display_path(path), "conds": [r for r, _ in results]}


def analyse(dc: DumpConds, node) -> tuple[dict, list[dict]]:
    case = dc.case_of(node)
    out, decisions = run_case(case, dc.rt)
    return {"node": node.name, "graph": node.graph.name, "type": node.type, **out}, decisions
