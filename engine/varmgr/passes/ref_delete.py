"""VariableRefDeleteOpPass: fold each VariableRef into its writer's output descriptor.

Note [variable_ref_delete]: §9 of the spec does not describe this pass; we follow
GE's variable_ref_delete_op_pass.cc. A VariableRef is a var-like node (Variable,
VariableV2, RefData: `op_types.var_like`) carrying `ref_var_src_var_name`; its
source must be the name of some var-like node of the root graph or its subgraphs
(else FAILED). The producer feeding the ref's input 0 gets the same attr on that
output's descriptor (which AssignMemory2HasRefAttrNode reads), unless the producer
is the source variable itself (GE's "avoid self reference"); a PartitionedCall
producer passes the attr to the node inside its subgraph that feeds the NetOutput
input whose `_parent_node_index` is that output. The ref is then isolated (its
input 0 relinked to its consumers, control edges bridged) and removed.
"""
from __future__ import annotations

import weakref

from engine.core.attrs import node_typed, typed_attr
from engine.core.errors import PassFailure
from engine.core.graph import Graph, Model, OutAnchor, set_desc_attr
from engine.core.surgery import isolate, remove_node
from engine.varmgr.policy import VarPolicy
from engine.varmgr.passes.util import Change, keep

PASS_ID = "variable_ref_delete"
RULE = "var/ref-into-writer-desc"


_NAMES: "weakref.WeakKeyDictionary[Model, set[str]]" = weakref.WeakKeyDictionary()


def _var_like_names(model: Model, var_like) -> set[str]:
    """Names of every var-like node of the root graph and its subgraphs (GE's all_var_names),
    computed once per model: the pass runs on every graph and removes only VariableRefs, and a
    removed ref's name was never the source another ref needs."""
    got = _NAMES.get(model)
    if got is None:
        got = {n.name for n in model.all_nodes() if n.type in var_like}
        _NAMES[model] = got
    return got


def run_variable_ref_delete(model: Model, graph: Graph, policy: VarPolicy, kept: list | None = None) -> list[Change]:
    key = policy.attrs.ref_var_src_var_name
    var_like = policy.op_types.var_like
    changes: list[Change] = []
    names = None
    for node in graph.node_list():
        if node.type not in var_like:
            continue
        src = node_typed(node, key, "s")
        if src is None:
            if kept is not None:        # the texts are made only for a why-not run
                keep(kept, node, RULE, f"{node.name} is a VariableRef (carries {key})", "no: a variable, kept")
            continue
        if names is None:
            names = _var_like_names(model, var_like)
        if src not in names:
            raise PassFailure(PASS_ID, f"Can not find source variable[{src}] of variable ref[{node.name}]",
                              node.name)
        peer = node.ins[0].peer if node.ins else None
        if peer is None:
            raise PassFailure(PASS_ID, f"variable ref {node.name} has no writer on input 0", node.name)
        writer = peer.node
        target = _desc_owner(peer, policy, node.name)
        detail = {"variable": src, "writer": f"{writer.name}:{peer.idx}"}
        if target is not peer:
            detail["inside"] = f"{target.node.name}:{target.idx}"
        if src == writer.name:
            detail["why"] = "the ref is fed by its own source variable: no attr (GE avoids a self reference)"
        else:
            set_desc_attr(target, key, src)    # a lean writer stays lean (Note [lean descriptor writes])
        isolate(node, [0])
        remove_node(node)
        changes.append(Change("removed", node.name, node.type, graph.name, RULE, detail))
    return changes


def _desc_owner(peer: OutAnchor, policy: VarPolicy, ref: str) -> OutAnchor:
    """The output whose descriptor gets the attr: `peer`, or for a PartitionedCall the producer
    inside its subgraph of the NetOutput input with `_parent_node_index` == peer's index (the
    last subgraph with one wins, as GE's loop overwrites)."""
    writer = peer.node
    target = peer
    if writer.type in policy.op_types.partitioned_call:
        for sub in writer.subgraphs:
            out = _net_output(sub, policy) if sub is not None else None
            src = _input_for_parent_index(out, peer.idx, policy, ref) if out is not None else None
            if src is not None:
                target = src
    if target.idx >= target.node.desc_count(True):
        raise PassFailure(PASS_ID, f"writer {target.node.name} of {ref} has no output desc {target.idx}", ref)
    return target


def _net_output(graph: Graph, policy: VarPolicy):
    return next((n for n in graph.nodes() if n.type in policy.op_types.net_output), None)


def _input_for_parent_index(net_output, index: int, policy: VarPolicy, ref: str) -> OutAnchor | None:
    key = policy.attrs.parent_node_index
    for i, td in enumerate(net_output.op.input_desc):
        if typed_attr(td.attr, key, "i") == index:
            anchor = net_output.ins[i] if i < len(net_output.ins) else None
            if anchor is None or anchor.peer is None:
                raise PassFailure(PASS_ID, f"input {i} of {net_output.name} (the subgraph output behind "
                                  f"{ref}'s writer) has no producer", ref)
            return anchor.peer
    return None
