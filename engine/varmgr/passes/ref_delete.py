"""VariableRefDeleteOpPass: fold each VariableRef into its writer's output descriptor.

Note [variable_ref_delete]: §9 of the spec does not describe this pass; we follow
GE's VariableRefDeleteOpPass as its role is described in the seed notes and used
by §7: for a variable node carrying `ref_var_src_var_name`, the writer feeding
its input 0 gets the same attr on that output's descriptor (which
AssignMemory2HasRefAttrNode reads), and the ref node is isolated and removed.
A ref whose source variable is not in the graph fails (INTERNAL_ERROR in GE).
"""
from __future__ import annotations

import weakref

from engine.core.attrs import set_attr, typed_attr
from engine.core.errors import PassFailure
from engine.core.graph import Graph, Model
from engine.core.surgery import remove_node
from engine.varmgr.policy import VarPolicy
from engine.varmgr.passes.util import Change

PASS_ID = "variable_ref_delete"
RULE = "var/ref-into-writer-desc"


_SOURCES: "weakref.WeakKeyDictionary[Model, set[str]]" = weakref.WeakKeyDictionary()


def _sources(model: Model, variables, key: str) -> set[str]:
    """Names of the source variables, computed once per model (the pass runs on every
    subgraph and removes only VariableRefs, never sources)."""
    got = _SOURCES.get(model)
    if got is None:
        got = {n.name for n in model.all_nodes() if n.type in variables and typed_attr(n.op.attr, key, "s") is None}
        _SOURCES[model] = got
    return got


def run_variable_ref_delete(model: Model, graph: Graph, policy: VarPolicy) -> list[Change]:
    key = policy.attrs.ref_var_src_var_name
    variables = policy.op_types.variable
    sources = _sources(model, variables, key)
    changes: list[Change] = []
    for node in graph.node_list():
        src = typed_attr(node.op.attr, key, "s") if node.type in variables else None
        if src is None:
            continue
        if src not in sources:
            raise PassFailure(PASS_ID, f"Can not find source variable[{src}] of variable ref[{node.name}]",
                              node.name)
        peer = node.ins[0].peer if node.ins else None
        if peer is None:
            raise PassFailure(PASS_ID, f"variable ref {node.name} has no writer on input 0", node.name)
        writer = peer.node
        if peer.idx >= len(writer.op.output_desc):
            raise PassFailure(PASS_ID, f"writer {writer.name} of {node.name} has no output desc {peer.idx}",
                              node.name)
        set_attr(writer.op.output_desc[peer.idx].attr, key, src)
        remove_node(node)
        changes.append(Change("removed", node.name, node.type, graph.name, RULE,
                              {"variable": src, "writer": f"{writer.name}:{peer.idx}"}))
    return changes
