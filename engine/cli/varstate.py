"""Sessions that outlive one graph: `run --var-state` and `vars plan --var-state`.

A graph compiled in a session: AddGraph in the session's GraphRebuildStateCtrl, the pack's
passes (the variable passes read and change the session's VarManager: registered variables,
refreshed descriptions, the format-change limit, VarIsInitializedOp folding), then the
build's variable placement (AssignVarMemory: the graph's variables are registered for the
graphs after it) and SetGraphBuildEnd. The state file holds every session (VarManagerPool);
it is read when it exists and written back with the other outputs (engine/cli/outputs.py).
"""
from __future__ import annotations

from engine.core.errors import InputError, Loc, PassFailure, Problem, display_path
from engine.varmgr.placement import GraphPlan, plan_graph
from engine.varmgr.records import VarError
from engine.varmgr.session import VarSession, VarStore
from engine.varmgr.state import is_text_path


def pack_policy(pack, what: str):
    cfg = pack.configs.get("var_policy")
    if cfg is None:
        raise InputError(Problem(Loc(str(pack.path)), f"{what} needs a pack with a variable policy",
                                 "add `var_policy: {file: variables.yaml}` to the pack"))
    return cfg.policy


def open_store(path: str | None, pack, what: str = "--var-state") -> VarStore:
    return VarStore(pack_policy(pack, what), path)


def begin_graph(session: VarSession, model) -> int:
    """GraphManager::AddGraph: the graph's variables become its rebuild resources."""
    from engine.varmgr.placement import register_batch_variables
    session.ctrl.add_graph(session.graph_id, model)
    register_batch_variables(model, session.manager)     # MultiBatchClonePass runs before the variable passes
    return session.graph_id


def end_graph(session: VarSession, model, path: str) -> GraphPlan:
    """The build's variable placement for the graph just compiled, then SetGraphBuildEnd."""
    gid = session.graph_id
    try:
        plan = plan_graph(model, session.manager, gid)
    except VarError as exc:
        raise PassFailure("variable placement", f"graph {gid} ({display_path(path)}) in session "
                          f"{session.manager.session_id}: {exc.message}", exc.var) from None
    session.ctrl.set_graph_build_end(gid)
    session.graph_id = gid + 1
    return plan


def encoded(store: VarStore, path: str) -> bytes:
    return store.encode(is_text_path(path))
