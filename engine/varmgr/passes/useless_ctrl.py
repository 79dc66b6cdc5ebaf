"""VariableRefUselessControlOutDeletePass: drop a VariableRef's control edges that its writer
already orders (variable_ref_useless_control_out_delete_pass.cc).

For each direct var-like node carrying `ref_var_src_var_name` with a data input, a control
edge ref → n is removed when n is already an out-node (data or control) of the node feeding
the ref's first input. A ref without an input is left alone (GE logs a warning).
"""
from __future__ import annotations

from engine.core.attrs import node_typed
from engine.core.graph import Graph
from engine.core.surgery import unlink_ctrl
from engine.varmgr.policy import VarPolicy
from engine.varmgr.passes.util import Change, data_in_nodes, keep

PASS_ID = "variable_ref_useless_control_out_delete"
RULE = "var/ref-useless-control-out"


def run_variable_ref_useless_control_out_delete(graph: Graph, policy: VarPolicy, kept: list | None = None) -> list[Change]:
    key = policy.attrs.ref_var_src_var_name
    changes: list[Change] = []
    var_like = policy.op_types.var_like
    for node in graph.node_list():
        if node.type not in var_like:
            continue
        if not node.out_ctrl:
            if kept is not None:        # the texts are made only for a why-not run
                keep(kept, node, RULE, f"{node.name} has control successors", "no: nothing to drop")
            continue
        src = node_typed(node, key, "s")
        producers = data_in_nodes(node) if src is not None else []
        if not producers:
            if kept is not None:
                keep(kept, node, RULE, f"{node.name} is a VariableRef with a writer on its input",
                     "no: not a VariableRef" if src is None else "no: no data input (GE warns)")
            continue
        writer = producers[0]
        ordered = {p.node for o in writer.outs for p in o.peers}.union(writer.out_ctrl_count)
        dropped = [s for s in node.out_ctrl if s in ordered]
        if not dropped and kept is not None:
            keep(kept, node, RULE, f"a control successor of {node.name} its writer {writer.name} already precedes",
                 "none: every control edge orders something new",
                 ("control successors", [s.name for s in node.out_ctrl]))
        for succ in dropped:
            unlink_ctrl(node, succ)
        if dropped:
            changes.append(Change("unlinked", node.name, node.type, graph.name, RULE, {
                "variable": src, "writer": writer.name, "control_out": [s.name for s in dropped],
                "why": "the writer feeding the ref already precedes these nodes"}))
    return changes
