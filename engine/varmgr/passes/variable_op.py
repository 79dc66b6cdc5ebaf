"""VariableOpPass (§9.2): fuse a variable with the trans ops after it.

When every consumer of a variable is the same supported trans op (TransData,
Cast, Reshape, ... per variables.yaml), the variable takes that op's output
layout and the trans ops go; the steps are recorded as the variable's trans road
in the VarManager and the graphs holding the variable are marked for rebuild.
"""
from __future__ import annotations

from dataclasses import replace

from engine.core.attrs import attr_keys, node_typed
from engine.core.errors import PassFailure
from engine.core.graph import Graph, Node
from engine.core.surgery import copy_in_ctrl, isolate, link, remove_node, unlink
from engine.varmgr import getypes as t
from engine.varmgr.desc import TensorDesc, desc_from_proto, desc_to_proto
from engine.varmgr.manager import VarManager
from engine.varmgr.nodes import desc_at, output_desc, var_op
from engine.varmgr.policy import TransSupport, VarPolicy
from engine.varmgr.rebuild import GraphRebuildStateCtrl
from engine.varmgr.records import TransNodeInfo, VarError
from engine.varmgr.passes.util import Change, keep
from engine.varmgr.passes.util import data_in_nodes, out_data_nodes

PASS_ID = "variable_op"
RULE = "var/format-fusion"


def run_variable_op(graph: Graph, mgr: VarManager, ctrl: GraphRebuildStateCtrl | None,
                    graph_id: int, kept: list | None = None) -> list[Change]:
    if graph.parent_node is not None:
        keep(kept, None, RULE, f"graph {graph.name} is a root graph", "no: VariableOpPass runs on root graphs only")
        return []
    if mgr.has_shared_var_mem_between_batch():
        keep(kept, None, RULE, "variables share memory between batches (HasSharedVarMemBetweenBatch)",
             "yes: no format fusion")
        return []
    if ctrl is None:
        raise PassFailure(PASS_ID, "INTERNAL_ERROR: no GraphRebuildStateCtrl")
    policy = mgr.policy
    nodes = _all_nodes(graph)           # one walk for both: renewing descriptors edits no edge
    _renew_var_desc(nodes, mgr, graph_id)
    changes: list[Change] = []
    for name, (same_vars, refs) in _same_variables(nodes, policy).items():
        if not ctrl.is_var_permit_to_change_formats(name):
            for v in same_vars:
                keep(kept, v, RULE, f"{name} may change its format (GraphRebuildStateCtrl)",
                     "no: its one format change is spent")
            continue
        why: list[str] = []
        road, removed = _fusion_if_need(same_vars, refs, policy, why)
        if not road:
            for v in same_vars:
                keep(kept, v, RULE, f"every consumer of {name} is one supported trans op",
                     f"no: {why[0] if why else 'no trans op follows'}")
            continue
        mgr.set_trans_road(name, road)
        mgr.set_changed_graph_id(name, graph_id)
        ctrl.set_state_changed(name)
        _update_io_format_info(road[-1].output, same_vars, refs, policy)
        if all(step.node_type in policy.format_fusion.renew_only_types for step in road):
            mgr.renew_cur_var_desc(name, var_op(same_vars[0], policy))
        for node in removed:
            changes.append(Change("removed", node[0], node[1], node[2], RULE, {"variable": name}))
        final = road[-1].output
        changes.append(Change("updated", name, same_vars[0].type, same_vars[0].graph.name, RULE, {
            "road": [s.node_type for s in road], "format": t.format_name(final.format),
            "dtype": t.dtype_serial(final.dtype), "shape": list(final.dims)}))
    return changes


def _all_nodes(graph: Graph) -> list[Node]:
    """Note [variables under the root]: GE's VariableOpPass runs on the root graph and reads its
    GetAllNodes (GenerateVariableVariableRefMap, RenewVarDesc): a variable in a subgraph is
    fused too, in its own graph, with the others of its name."""
    return graph.model.all_nodes(graph) if graph.model is not None else graph.node_list()


def _renew_var_desc(nodes: list[Node], mgr: VarManager, graph_id: int) -> None:
    policy = mgr.policy
    for node in nodes:
        if node.type not in policy.op_types.fused_variable or not mgr.is_var_exist(node.name):
            continue
        try:
            mgr.renew_cur_var_desc(node.name, var_op(node, policy))
            mgr.record_staged_var_desc(graph_id, node.name, output_desc(node, policy))
        except VarError as exc:
            raise PassFailure(PASS_ID, f"GE_GRAPH_VARIABLE_OP_PASS_FAILED: renew var desc of "
                              f"{node.name}: {exc.message}", node.name) from None


def _same_variables(nodes: list[Node], policy: VarPolicy) -> dict[str, tuple[list[Node], list[Node]]]:
    key = policy.attrs.ref_var_src_var_name
    groups: dict[str, tuple[list[Node], list[Node]]] = {}
    refs: dict[str, list[Node]] = {}
    fused = policy.op_types.fused_variable
    for node in nodes:
        # most nodes are no VariableRef: their key set answers (Note [attribute key sets]),
        # read as Node.has_attr reads it, without the call
        src = node_typed(node, key, "s") if key in (node.akeys or attr_keys(node)) else None
        if src is not None:
            refs.setdefault(src, []).append(node)
        elif node.type in fused:
            groups.setdefault(node.name, ([], []))[0].append(node)
    for name, (_, ref_list) in groups.items():
        ref_list.extend(refs.get(name, ()))
    return groups


def _fusion_if_need(same_vars: list[Node], refs: list[Node], policy: VarPolicy, why: list | None = None):
    road: list[TransNodeInfo] = []
    removed: list[tuple[str, str, str]] = []
    while True:
        step = _check_same_and_trans_op(same_vars, policy, why if not road else None)
        if step is None:
            break
        if not _check_variable_ref_legally(same_vars, refs):
            if why is not None:
                why.insert(0, "a VariableRef's connection does not mirror the trans op's (illegal ref)")
            return [], []
        if not road:
            var_out = output_desc(same_vars[0], policy)
            if var_out.format != step.input.format:
                road.append(TransNodeInfo(policy.format_fusion.reformat_type, var_out, step.input))
        road.append(step)
        removed.extend(_deal_fusion(same_vars, refs, policy))
    return road, removed


def _key(desc: TensorDesc) -> str:
    return f"{desc.format}-{desc.dtype}-" + "".join(f"{d}-" for d in desc.dims)


def _check_same_and_trans_op(same_vars: list[Node], policy: VarPolicy,
                             why: list | None = None) -> TransNodeInfo | None:
    """The trans step every consumer makes alike, or None (`why` gets the reason)."""
    fusion = policy.format_fusion
    keys: set[str] = set()
    last = None                         # (consumer, input index, output desc): GE's out_node after the loop
    for var in same_vars:
        for anchor in var.outs:
            for peer in anchor.peers:
                consumer = peer.node
                op = fusion.trans_op(consumer.type)
                if op is None or peer.idx != op.data_index or not consumer.desc_count(True):
                    if why is not None:
                        why.append(f"consumer {consumer.name} ({consumer.type}) is not a supported trans op "
                                   f"fed at its data input" if op is None or peer.idx != op.data_index
                                   else f"consumer {consumer.name} has no output description")
                    return None
                out = output_desc(consumer, policy)
                keys.add(_key(out))
                last = (consumer, peer.idx, out)
    # Note [the last consumer's step]: GE's CheckSameAndTransOp builds the step from the last
    # consumer it looked at (`out_node` outlives its loop): consumers need share only the output
    # key, so a Reshape and a Squeeze alike fuse when the Reshape comes last, and not otherwise
    step = None
    if last is not None:
        consumer, idx, out = last
        in_desc = desc_at(consumer, idx, policy.attrs.init_value, False) or \
            desc_from_proto(consumer.descs()[idx], policy.attrs.init_value)
        step = TransNodeInfo(consumer.type, in_desc, out)
    if step is None or len(keys) != 1:
        if why is not None:
            why.append("it has no consumer" if step is None else f"its consumers produce {len(keys)} different outputs")
        return None                     # "trans_op type size ... is over 1, Currently not supported"
    if not _is_trans_support(step, policy):
        if why is not None:
            why.append(f"the {step.node_type} step is not a supported transfer (format, dtype or unknown shape)")
        return None
    return step


def _is_trans_support(step: TransNodeInfo, policy: VarPolicy) -> bool:
    if any(d < 0 for d in step.output.dims):
        return False
    op = policy.format_fusion.trans_op(step.node_type)
    fusion = policy.format_fusion
    if op.support is TransSupport.ALWAYS:
        return True
    if op.support is TransSupport.FORMAT_TRANSFER:
        pair = (t.primary_format(step.input.format), t.primary_format(step.output.format))
        return pair in fusion.format_transfers
    if op.support is TransSupport.CAST:
        return (step.input.dtype, step.output.dtype) in fusion.cast_pairs
    return False


def _alike(a: TensorDesc, b: TensorDesc) -> bool:
    return a.format == b.format and a.dtype == b.dtype and a.dims == b.dims


def _check_variable_ref_legally(same_vars: list[Node], refs: list[Node]) -> bool:
    for var in same_vars:
        outs = out_data_nodes(var)
        for ref in refs:
            ins = data_in_nodes(ref)
            if len(ins) > 1:
                raise PassFailure(PASS_ID, f"GE_GRAPH_VARIABLE_OP_PASS_FAILED: In data node num:{len(ins)} "
                                  f"of node:{ref.name}({ref.type}) bigger than 1", ref.name)
            if not ins or not outs:
                continue
            a, b = outs[0], ins[0]
            if not (a.op.output_desc and b.op.input_desc and b.op.output_desc and a.op.input_desc):
                # CheckTransNodeAreInverse: GE_CHECK_NOTNULL on each of the four descriptors, and
                # CheckVarAndVarRefAreAlike turns its failure into the pass's
                raise PassFailure(PASS_ID, f"GE_GRAPH_VARIABLE_OP_PASS_FAILED: [Call][CheckTransNodeAreInverse] "
                                  f"failed: {a.name} or {b.name} has no descriptor at input or output 0", b.name)
            if not (_alike(_proto_desc(a.op.output_desc[0]), _proto_desc(b.op.input_desc[0])) and
                    _alike(_proto_desc(b.op.output_desc[0]), _proto_desc(a.op.input_desc[0]))):
                return False                    # "variable ref connection are illegally"
    return True


def _proto_desc(td) -> TensorDesc:
    return desc_from_proto(td, "")


def _deal_fusion(same_vars: list[Node], refs: list[Node], policy: VarPolicy) -> list[tuple[str, str, str]]:
    removed: list[tuple[str, str, str]] = []        # (name, type, graph)
    for var in same_vars:
        for node in out_data_nodes(var):
            if not node.alive:
                continue
            removed.append((node.name, node.type, node.graph.name))
            isolate(node, [0])
            remove_node(node)
    for ref in refs:
        # every in-data node of the ref, whatever its type (GE's DealFusion: the road checks
        # before it compared descriptors, not types)
        for anchor in list(ref.ins):
            peer = anchor.peer
            if peer is None:
                continue
            trans = peer.node
            if len(out_data_nodes(trans)) > 1:
                copy_in_ctrl(trans, ref)        # GraphUtils::CopyInCtrlEdges
                unlink(peer, anchor)
                if trans.ins and trans.ins[0].peer is not None:
                    link(trans.ins[0].peer, anchor)
            else:
                removed.append((trans.name, trans.type, trans.graph.name))
                isolate(trans, [0])
                remove_node(trans)
    return removed


def _update_io_format_info(final: TensorDesc, same_vars: list[Node], refs: list[Node],
                           policy: VarPolicy) -> None:
    init_attr = policy.attrs.init_value
    for var in same_vars:
        td = var.op.output_desc[0]
        cur = desc_from_proto(td, init_attr)
        desc_to_proto(replace(cur, origin_dims=final.origin_dims, dims=final.dims, format=final.format,
                              dtype=final.dtype), td, init_attr)
        # UpdateVarAndRefOutputFormatInfo: each ref's input and output 0 become the variable's
        # updated output descriptor, whole (its origin format, size and attributes too); with
        # several variables of the name, the last one's
        for ref in refs:
            for descs in (ref.op.input_desc, ref.op.output_desc):
                if descs:
                    descs[0].CopyFrom(td)
