"""Algorithm `variable_pass`: GE's variable passes (ge-var-manager.md §9) over one
run-wide variable session. The passes themselves live in engine/varmgr/passes and
read the pack's variable policy (`var_policy.file`, e.g. variables.yaml)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import Algorithm, register
from ..context import Diagnostic, Insertion, Removal
from ..errors import Collector, Loc
from ..graph import Graph
from ..pack import Pack
from ..schema import Reader


@dataclass(frozen=True)
class VarPassConfig:
    policy: Any
    loc: Loc


def load(value: Any, pack: Pack, errors: Collector) -> VarPassConfig | None:
    from ..errors import InputError
    from ..varmgr.policy import load_policy

    r = Reader(value, "var_policy", errors, Loc(str(pack.path)))
    file = r.get("file", str, "variables.yaml")
    r.done()
    try:
        policy = load_policy(Path(pack.path) / str(file))
    except InputError as exc:
        errors.problems.extend(exc.problems)
        return None
    return VarPassConfig(policy, r.loc)


def session_of(ctx, cfg: VarPassConfig):
    """The run's variable session (one VarManager per run, like one GE session)."""
    from ..varmgr.session import VarSession

    s = ctx.extras.get("var_session")
    if s is None:
        s = VarSession.open(cfg.policy, options=dict(ctx.options))
        ctx.extras["var_session"] = s
    return s


def run(ctx, graph: Graph, cfg: VarPassConfig, spec) -> None:
    from ..varmgr.passes import PASS_IDS, run_variable_pass

    kind = spec.config or spec.id
    if kind not in PASS_IDS:
        from ..errors import PassFailure
        raise PassFailure(spec.id, f"unknown variable pass '{kind}' (expected one of {', '.join(PASS_IDS)})")
    for ch in run_variable_pass(kind, session_of(ctx, cfg), ctx.model, graph):
        reason = dict(ch.detail)
        if ch.kind == "inserted":
            node = next((g.find(ch.node) for g in ctx.model.graph_order if g.find(ch.node) is not None), None)
            producer = consumers = ""
            if node is not None:
                producer = next((f"{a.peer.node.name}:{a.peer.idx}" for a in node.ins if a.peer is not None), "")
                consumers = tuple(f"{p.node.name}:{p.idx}" for o in node.outs for p in o.peers)
            ctx.insertions.append(Insertion(ch.node, ch.type, ch.graph, spec.id, ch.rule, cfg.loc,
                                            producer, tuple(consumers or ()), reason, {}))
        elif ch.kind == "removed":
            ctx.removals.append(Removal(ch.node, ch.type, ch.graph, spec.id, ch.rule, reason))
        else:
            ctx.diagnostics.append(Diagnostic("VAR_" + ch.kind.upper(), "info",
                                              f"{ch.node} ({ch.type}) {ch.kind} by {ch.rule}", spec.id,
                                              {"node": ch.node, "graph": ch.graph, "rule": ch.rule, **reason}))


register(Algorithm("variable_pass", "var_policy", load, run,
                   "GE's variable passes (VariablePrepareOp, VariableOp, VarIsInitializedOp, VariableRefDeleteOp)"))
