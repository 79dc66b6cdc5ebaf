"""Algorithm `variable_pass`: GE's variable passes (ge-var-manager.md §9) over one
run-wide variable session. The passes themselves live in engine/varmgr/passes and
read the pack's variable policy (`var_policy.file`, e.g. variables.yaml)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.passes.registry import Algorithm, register
from engine.passes.context import Diagnostic, Insertion, Removal
from engine.core.errors import Cite, Collector, Loc, did_you_mean
from engine.core.graph import Graph
from engine.pack.model import Pack
from engine.core.schema import Reader
from engine.varmgr.passes import POLICY_ENTRIES


ALGORITHM = "variable_pass"



@dataclass(frozen=True)
class VarPassConfig:
    policy: Any
    loc: Loc
    entries: dict = field(default_factory=dict)     # rule id → Cite of its policy entry

    def cite(self, rule: str) -> Cite:
        return self.entries.get(rule) or Cite(rule, self.loc, self.loc)


def _entries(path: Path) -> dict[str, Cite]:
    from engine.core.yamlloc import load_yaml, span_of

    doc = load_yaml(path)
    out = {}
    for rule, keys in POLICY_ENTRIES.items():
        m = doc
        for k in keys[:-1]:
            m = m.get(k) if isinstance(m, dict) else None
        if isinstance(m, dict) and keys[-1] in m:
            out[rule] = Cite(rule, *span_of(m, keys[-1], doc.loc))
    return out


def load(value: Any, pack: Pack, errors: Collector) -> VarPassConfig | None:
    from engine.core.errors import InputError
    from engine.varmgr.policy_load import load_policy

    r = Reader(value, "var_policy", errors, Loc(str(pack.path)))
    file = r.get("file", str, "variables.yaml")
    r.done()
    from engine.varmgr.passes import PASSES
    for spec in pack.passes.values():           # passes are loaded before algorithm sections
        if spec.algorithm == ALGORITHM and (spec.config or spec.id) not in PASSES:
            errors.error(spec.loc, f"pass '{spec.id}': no variable pass '{spec.config or spec.id}'",
                         did_you_mean(spec.config or spec.id, PASSES, "variable passes"))
    try:
        # relative to the pack file that names it (an overlay inherits its base's file)
        folder = Path(file.loc.file).parent if hasattr(file, "loc") else Path(pack.path)
        policy = load_policy(folder / str(file))
        entries = _entries(folder / str(file))
    except InputError as exc:
        errors.problems.extend(exc.problems)
        return None
    _check_option_keys(policy, pack, errors)
    return VarPassConfig(policy, r.loc, entries)


def _check_option_keys(policy, pack: Pack, errors: Collector) -> None:
    """Every option the variable policy reads is one the pack declares (options.yaml), so a
    typo in either file fails `rules check` instead of leaving the option without effect."""
    declared = getattr(pack, "options", None)
    if not declared:
        return
    o = policy.options
    keys = [(o.evaluate_mode, o.loc), (o.huge_page, o.loc), (o.rdma_pool_size, o.loc),
            (o.host_memory_size, o.loc), (policy.size_rule.padding_option, policy.size_rule.loc)]
    m = policy.memory_modes
    if m is not None:
        keys += [(m.policy_option, m.loc), (m.policy_env, m.loc), (m.huge_pages_option, m.loc)]
    for key, loc in keys:
        if key and key not in declared:
            errors.error(loc, f"the variable policy reads option '{key}', which the pack does not declare",
                         did_you_mean(key, declared, "options") + " (declare it in options.yaml)")


def session_of(ctx, cfg: VarPassConfig):
    """The run's variable session (one VarManager per run, like one GE session)."""
    from engine.varmgr.session import VarSession

    if ctx.var_session is None:
        ctx.var_session = VarSession.open(cfg.policy, options=dict(ctx.options))
    return ctx.var_session


def run(ctx, graph: Graph, cfg: VarPassConfig, spec) -> None:
    from engine.varmgr.passes import run_variable_pass

    probe = ctx.probe
    kept: list | None = [] if probe is not None and not probe.near else None
    changes = run_variable_pass(spec.config or spec.id, session_of(ctx, cfg), ctx.model, graph, kept)
    if kept:
        _why_not(ctx, graph, cfg, spec, kept)
    for ch in changes:
        reason = dict(ch.detail)
        if ch.kind == "inserted":
            # Note [the change's own graph]: the node is looked up in the graph the change names
            # (where the pass put it, and where ctx.record captures it from), not in the first
            # graph holding that name: that was one look-up per graph before it (quadratic
            # when the subgraphs' variables get refs: 0.7 s at 1M nodes), and the wrong node
            # when an earlier graph has a node of the same name
            g = ctx.model.graphs.get(ch.graph)
            node = g.find(ch.node) if g is not None else None
            producer = consumers = ""
            if node is not None:
                producer = next((f"{a.peer.node.name}:{a.peer.idx}" for a in node.ins if a.peer is not None), "")
                consumers = tuple(f"{p.node.name}:{p.idx}" for o in node.outs for p in o.peers)
            ctx.record(Insertion(ch.node, ch.type, ch.graph, spec.id, ch.rule, cfg.cite(ch.rule),
                                 producer, tuple(consumers or ()), reason, {}))
        elif ch.kind == "removed":
            ctx.removals.append(Removal(ch.node, ch.type, ch.graph, spec.id, ch.rule, reason))
        else:
            cut = reason.get("control_out")
            message = f"{ch.node} ({ch.type}) {ch.kind} by {ch.rule}" + (
                f": control edges to {', '.join(cut)} (already after {reason['writer']})" if cut else "")
            ctx.diagnostics.append(Diagnostic("VAR_" + ch.kind.upper(), "info", message, spec.id,
                                              {"node": ch.node, "graph": ch.graph, "rule": ch.rule, **reason}))


def _why_not(ctx, graph: Graph, cfg: VarPassConfig, spec, kept: list) -> None:
    """The places the variable pass left unchanged, for the nodes the probe asks about
    (a graph-wide decision answers for every asked node of the graph)."""
    from engine.passes.probe import NO_CONFLICT, Step

    probe = ctx.probe
    asked = sorted({n for n in (*probe.nodes, *(a.node for a in probe.anchors)) if n.graph is graph},
                   key=lambda n: n.name)
    for k in kept:
        for node in ([k.node] if k.node is not None else asked):
            if k.node is not None and not probe.wants_node(node):
                continue
            step = Step(k.test, k.result, cfg.cite(k.rule), k.facts)
            probe.look(spec.id, graph, node.name if k.node is not None else f"{node.name} (the whole graph)",
                       NO_CONFLICT, "unchanged", [step], 0)


def _choice_points() -> tuple[str, ...]:
    from engine.varmgr.passes import prepare
    return (prepare.RULE_REF, prepare.RULE_IDENTITY, prepare.RULE_REF_IDENTITY)


register(Algorithm(ALGORITHM, "var_policy", load, run,
                   "GE's variable passes (VariablePrepareOp, VariableOp, VarIsInitializedOp, VariableRefDeleteOp)",
                   _choice_points()))
