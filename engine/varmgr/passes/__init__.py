"""The variable passes of §9, as functions over the graph model.

Each `run_*` takes the graph it runs on, the session's VarManager (and, for
variable_op, the GraphRebuildStateCtrl) and returns the changes it made; a GE
failure status raises PassFailure naming the node. Op types and attribute keys
come from the policy (rules/ge/variables.yaml).

`PASSES` is the dispatch table: a pack's pass of algorithm `variable_pass` names
its entry with `config:` (or its id), e.g. `config: variable_prepare`.
"""
from __future__ import annotations

from typing import Callable

from engine.varmgr.passes import is_initialized, prepare, ref_delete, useless_ctrl, variable_op
from engine.varmgr.passes.is_initialized import run_var_is_initialized
from engine.varmgr.passes.prepare import run_variable_prepare
from engine.varmgr.passes.ref_delete import run_variable_ref_delete
from engine.varmgr.passes.useless_ctrl import run_variable_ref_useless_control_out_delete
from engine.varmgr.passes.util import Change
from engine.varmgr.passes.variable_op import run_variable_op


# name → run(session, model, graph); `session` is a VarSession (its graph_id names the
# graph being compiled), `graph` the root or a subgraph of `model`.
# `kept`: a list the pass appends its no-change decisions to (Kept), or None (normal runs)
PASSES: dict[str, Callable[..., list[Change]]] = {
    "variable_prepare": lambda s, model, graph, kept: run_variable_prepare(                          # VariablePrepareOpPass
        graph, s.pool.policy, kept, _carried_ref_map(s, graph)),
    "variable_op": lambda s, model, graph, kept: run_variable_op(graph, s.manager, s.ctrl, s.graph_id, kept),  # VariableOpPass
    "var_is_initialized": lambda s, model, graph, kept: run_var_is_initialized(graph, s.manager, kept=kept),  # VarIsInitializedOpPass
    "variable_ref_delete": lambda s, model, graph, kept: run_variable_ref_delete(model, graph, s.pool.policy, kept),
    "variable_ref_useless_control_out_delete":                                                      # VariableRefUselessControlOutDeletePass
        lambda s, model, graph, kept: run_variable_ref_useless_control_out_delete(graph, s.pool.policy, kept),
}
PASS_IDS = tuple(PASSES)


def _carried_ref_map(session, graph) -> dict:
    """VariablePrepareOpPass's member map: a run starts it afresh on the root graph, and the
    subgraphs (the same pass object, no ClearStatus) add to it and read what the root put in."""
    if graph.is_root:
        session.prepare_ref_map = {}
    return session.prepare_ref_map


def run_variable_pass(name: str, session, model, graph, kept: list | None = None) -> list[Change]:
    """Run the variable pass `name` (a key of PASSES) on `graph`; with `kept`, also the
    places it decided to leave unchanged (engine/varmgr/passes/util.py Kept)."""
    return PASSES[name](session, model, graph, kept)


# Note [variable citations]: the variable passes' rules are GE's code, not pack rules;
# each follows one entry of the policy (a key path into variables.yaml), which is what a
# report card quotes for it.
POLICY_ENTRIES: dict[str, tuple[str, ...]] = {
    prepare.RULE_REF: ("op_types", "var_like"),
    prepare.RULE_IDENTITY: ("op_types", "merge"),
    prepare.RULE_REF_IDENTITY: ("op_types", "ref_identity"),
    is_initialized.RULE: ("op_types", "var_is_initialized"),
    ref_delete.RULE: ("op_types", "var_like"),
    useless_ctrl.RULE: ("op_types", "var_like"),
    variable_op.RULE: ("format_fusion",),
}
