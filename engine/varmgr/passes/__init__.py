"""The variable passes of §9, as functions over the graph model.

Each `run_*` takes the graph it runs on, the session's VarManager (and, for
variable_op, the GraphRebuildStateCtrl) and returns the changes it made; a GE
failure status raises PassFailure naming the node. Op types and attribute keys
come from the policy (rules/ge/variables.yaml).

Pass ids (the runner's): variable_prepare, variable_op, var_is_initialized,
variable_ref_delete.
"""
from __future__ import annotations

from engine.varmgr.passes.is_initialized import run_var_is_initialized
from engine.varmgr.passes.prepare import run_variable_prepare
from engine.varmgr.passes.ref_delete import run_variable_ref_delete
from engine.varmgr.passes.util import Change
from engine.varmgr.passes.variable_op import run_variable_op


PASS_IDS = ("variable_prepare", "variable_op", "var_is_initialized", "variable_ref_delete")


def run_variable_pass(pass_id: str, session, model, graph) -> list[Change]:
    """Run one variable pass on `graph` (the root or a subgraph of `model`).

    `session` is a `VarSession`; its `graph_id` names the graph being compiled.
    """
    policy = session.pool.policy
    if pass_id == "variable_prepare":
        return run_variable_prepare(graph, policy)
    if pass_id == "variable_op":
        return run_variable_op(graph, session.manager, session.ctrl, session.graph_id)
    if pass_id == "var_is_initialized":
        return run_var_is_initialized(graph, session.manager)
    if pass_id == "variable_ref_delete":
        return run_variable_ref_delete(model, graph, policy)
    raise KeyError(pass_id)
