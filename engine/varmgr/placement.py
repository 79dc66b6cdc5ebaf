"""VarMemAssignUtil (§7): compile-time placement of variables into a graph.

`plan_graph` runs AssignStaticMemory2Node, AssignVarAttr2Nodes and
AssignMemory2HasRefAttrNode on one model in one session, writes output offsets
(`OpDef.output_i`) and output-0 sizes into the graph, and returns a plan.
"""
from __future__ import annotations

from dataclasses import dataclass

from engine.core.attrs import typed_attr
from engine.core.graph import Model, Node
from engine.varmgr.desc import TensorDesc, desc_from_proto
from engine.varmgr.manager import VarManager
from engine.varmgr.nodes import (is_ref_node, memory_type_of, name_for_var_manager, node_var_size,
    output_desc, var_op)
from engine.varmgr.records import BroadcastInfo, Status, VarError

MAX_RECURSION = 16        # kVarMemMaxRecursion


@dataclass(frozen=True, slots=True)
class PlanEntry:
    graph_id: int
    graph: str            # the (sub)graph holding the node
    node: str
    name: str             # name in the VarManager
    key: str              # VarKey
    memory_type: str
    size: int
    address: int          # logical address written to output offset 0
    offset: int           # address - logic base for offset-allocated memory, else the address
    footprint: int        # logical bytes of the new block (0 when the address was reused)
    decision: str         # "new block", a reuse rule id, or "already placed"


@dataclass(frozen=True, slots=True)
class GraphPlan:
    graph_id: int
    graph: str
    entries: tuple[PlanEntry, ...]
    broadcasts: tuple[BroadcastInfo, ...]
    batch_names: tuple[tuple[str, str], ...] = ()     # (batch variable name, the name it shares)


def plan_graph(model: Model, mgr: VarManager, graph_id: int) -> GraphPlan:
    batch = register_batch_variables(model, mgr)
    descs: dict[Node, TensorDesc] = {}
    entries = assign_static_memory(model, mgr, graph_id, descs)
    broadcasts = assign_var_attr_to_nodes(model, mgr, graph_id, descs)
    assign_memory_to_ref_attr_nodes(model, mgr)
    return GraphPlan(graph_id, model.root.name, tuple(entries), tuple(broadcasts), batch)


def register_batch_variables(model: Model, mgr: VarManager) -> tuple[tuple[str, str], ...]:
    """SetBatchVariablesKeyName for each variable named `<name><batch_name_postfix><k>` (what
    MultiBatchClonePass names a variable's copy in batch k, and what ModelHelper registers when
    it loads such a model): the copies share `<name>`'s VarKey, hence its memory, and
    VariableOpPass leaves the session alone (HasSharedVarMemBetweenBatch)."""
    postfix = mgr.policy.batch_name_postfix
    out = []
    if not postfix:
        return ()
    for node in model.all_nodes():
        if node.type in mgr.policy.op_types.variable:
            pos = node.name.find(postfix)
            if pos > 0:
                mgr.set_batch_variables_key_name(node.name, node.name[:pos])
                out.append((node.name, node.name[:pos]))
    return tuple(out)


def _padding(mgr: VarManager) -> int:
    rule = mgr.policy.size_rule
    text = mgr.options.get(rule.padding_option)
    return int(text) if text is not None else rule.default_padding


def assign_static_memory(model: Model, mgr: VarManager, graph_id: int,
                         descs: dict[Node, TensorDesc] | None = None) -> list[PlanEntry]:
    """AssignStaticMemory2Node over GetAllNodes (subgraphs included).

    `descs` (optional) receives each placed node's output-0 descriptor with its size.
    """
    descs = {} if descs is None else descs
    policy = mgr.policy
    placed = policy.op_types.placed
    padding = _padding(mgr)
    res = mgr.res("AssignStaticMemory2Node")
    hbm = mgr.hbm_rt
    out: list[PlanEntry] = []
    init_attr = policy.attrs.init_value
    for node in model.all_nodes():
        if node.type not in placed or is_ref_node(node, policy):
            continue
        name = name_for_var_manager(node, policy)
        op = node.op
        out_descs = op.output_desc
        if not out_descs:
            raise VarError(Status.FAILED, f"node:{node.name} has no OutputDesc", node.name)
        mem_type = memory_type_of(node, policy)
        td = out_descs[0]
        desc = desc_from_proto(td, init_attr)
        size = node_var_size(node, desc, policy, padding)
        td.size = size
        desc = descs[node] = desc.with_size(size)
        offsets = op.output_i
        del offsets[:]
        offsets.extend([0] * len(out_descs))
        if not res.is_var_exist(name, desc):
            result = mgr.assign_var_mem(name, var_op(node, policy, desc), desc, mem_type)
            if node.type in policy.op_types.variable:
                _assign_data_to_fp32_var(node, mgr)
            mgr.set_allocated_graph_id(name, graph_id)
            footprint, decision, key = result.footprint, result.rule or "new block", result.key
        else:
            key = _check_same_key_size(node, name, desc, mgr)
            footprint, decision = 0, "already placed"
        address, typ = mgr.get_var_addr(name, desc)
        offsets[0] = address
        spec = policy.mem_type_by_rt(typ)
        offset = address - mgr.var_mem_logic_base if typ == hbm else address
        out.append(PlanEntry(graph_id, node.graph.name, node.name, name, key,
                             spec.name if spec else str(typ), size, address, offset, footprint, decision))
    return out


def _check_same_key_size(node: Node, name: str, desc, mgr: VarManager) -> str:
    # Note [same-key size conflict]: GE skips AssignVarMem when the VarKey exists and
    # hands out the old address even if this node's tensor is larger, so the variable
    # would overrun its block. We report that as a failure naming both sizes.
    res = mgr.var_resource
    key = res.var_key(name, desc)
    entry = res.var_addr_mgr_map[key]
    if desc.size > entry.desc.size:
        gid = res.var_names_to_allocated_graph_id.get(res.batch_key(name))
        where = f" (placed by graph {gid})" if gid is not None else ""
        raise VarError(Status.FAILED, f"variable '{name}' (node '{node.name}'): {desc.describe()} needs "
                       f"{desc.size} bytes, but VarKey {key} already holds a block of "
                       f"{entry.desc.size} bytes{where}; two variables with one name need compatible "
                       "sizes", name)
    return key


def _assign_data_to_fp32_var(node: Node, mgr: VarManager) -> None:
    src = typed_attr(node.op.attr, mgr.policy.attrs.src_var_name, "s")
    if src is None:
        return
    cur = mgr.get_cur_var_desc(src)
    address, typ = mgr.get_var_addr(src, cur)
    mgr.set_var_addr(node.name, cur, address, typ, var_op(node, mgr.policy))


# ---- AssignVarAttr2Nodes ------------------------------------------------------------
def assign_var_attr_to_nodes(model: Model, mgr: VarManager, graph_id: int,
                             descs: dict[Node, TensorDesc] | None = None) -> list[BroadcastInfo]:
    policy = mgr.policy
    descs = {} if descs is None else descs
    types = policy.op_types
    infos: list[BroadcastInfo] = []
    for node in model.all_nodes():
        if node.type not in types.variable or is_ref_node(node, policy):
            continue
        if node not in descs:
            descs[node] = output_desc(node, policy)
        _set_out_variable_attr(node, node, mgr, descs)
        for anchor in node.outs:
            for peer in list(anchor.peers):
                dst = peer.node
                if dst.type in types.broadcast:
                    infos.append(_deal_broadcast(graph_id, dst, peer.idx, node, mgr))
                    continue
                if dst.type in types.assign and peer.idx == 0:
                    _deal_export_variable(dst, node, mgr, 0, descs)
                if dst.type in types.trans_chain:
                    _deal_trans(_final_trans_node(dst, types.trans_chain, 0), mgr)
    return infos


def _offsets(node: Node):
    """The node's output offsets, sized to its outputs when a dump has none.

    Note [empty output offsets]: GE runs AssignVarAttr2Nodes after the graph memory
    assigner gave every node an offset list; a dump taken earlier has none, so we
    start from zeros instead of failing with "Output_list is empty".
    """
    op = node.op
    if not op.output_i and op.output_desc:
        op.output_i.extend([0] * len(op.output_desc))
    return op.output_i


def _set_out_variable_attr(node: Node, var_node: Node, mgr: VarManager,
                           descs: dict[Node, TensorDesc]) -> None:
    outputs = _offsets(node)
    if not outputs:
        raise VarError(Status.PARAM_INVALID, f"node:{node.name} Output_list is empty (output offsets "
                       f"of variable '{var_node.name}' cannot be written)", var_node.name)
    address, _ = mgr.get_var_addr(var_node.name, descs[var_node])
    outputs[0] = address


def _deal_export_variable(node: Node, var_node: Node, mgr: VarManager, depth: int,
                          descs: dict[Node, TensorDesc]) -> None:
    if depth >= MAX_RECURSION:
        raise VarError(Status.FAILED, f"[DealExportVariableNode]There are too much recursion:{depth} > "
                       f"max:{MAX_RECURSION} (assign chain of variable '{var_node.name}')", var_node.name)
    assign = mgr.policy.op_types.assign
    if node.outs:
        for peer in list(node.outs[0].peers):
            if peer.node.type in assign and peer.idx == 0:
                _deal_export_variable(peer.node, var_node, mgr, depth + 1, descs)
    _set_out_variable_attr(node, var_node, mgr, descs)


def _deal_broadcast(graph_id: int, node: Node, idx: int, var_node: Node, mgr: VarManager) -> BroadcastInfo:
    op = node.op
    if idx >= len(op.input_desc):
        raise VarError(Status.FAILED, f"Get broadcast op {node.name} input tensor desc size "
                       f"[{len(op.input_desc)}] < idx [{idx}]", var_node.name)
    outputs = list(_offsets(node))
    if len(outputs) <= idx:
        raise VarError(Status.FAILED, f"Get broadcast op {node.name} output_list size [{len(outputs)}] "
                       f"< idx [{idx}]", var_node.name)
    del op.input_i[:]
    op.input_i.extend(outputs)
    if len(op.output_desc) <= idx:
        raise VarError(Status.FAILED, f"Get broadcast op {node.name} output tensor desc size "
                       f"[{len(op.output_desc)}] < idx [{idx}]", var_node.name)
    in_size, out_size = op.input_desc[idx].size, op.output_desc[idx].size
    if in_size != out_size:
        raise VarError(Status.FAILED, f"Broadcast op input size[{in_size}] is not equal output size"
                       f"[{out_size}] (op {node.name}, variable '{var_node.name}')", var_node.name)
    info = BroadcastInfo(var_node.name, node.name, idx, outputs[idx], in_size, outputs[idx], out_size)
    mgr.save_broadcast_info(graph_id, info)
    return info


def _final_trans_node(node: Node, trans: frozenset[str], depth: int) -> Node:
    final = node
    if depth >= MAX_RECURSION or not node.outs:
        return final
    for peer in node.outs[0].peers:
        if peer.node.type in trans and peer.idx == 0:
            final = _final_trans_node(peer.node, trans, depth + 1)
    return final


def _deal_trans(final: Node, mgr: VarManager) -> None:
    if not final.outs:
        return
    for peer in list(final.outs[0].peers):
        if peer.node.type in mgr.policy.op_types.assign:
            _deal_export_trans(peer.node, final, mgr, 0)


def _deal_export_trans(node: Node, final: Node, mgr: VarManager, depth: int) -> None:
    if depth >= MAX_RECURSION:
        raise VarError(Status.FAILED, f"[DealExportTransNode]There are too much recursion:{depth} > "
                       f"max:{MAX_RECURSION} (assign chain after '{final.name}')", final.name)
    assign = mgr.policy.op_types.assign
    if node.outs:
        for peer in list(node.outs[0].peers):
            if peer.node.type in assign:
                _deal_export_trans(peer.node, final, mgr, depth + 1)
    if not _offsets(final) or not _offsets(node):
        raise VarError(Status.PARAM_INVALID, f"output offsets of {final.name} or {node.name} are empty",
                       node.name)
    node.op.output_i[0] = final.op.output_i[0]


# ---- AssignMemory2HasRefAttrNode -------------------------------------------------------
def assign_memory_to_ref_attr_nodes(model: Model, mgr: VarManager) -> None:
    policy = mgr.policy
    key = policy.attrs.ref_var_src_var_name
    lookup: dict[str, Node] | None = None
    for node in model.all_nodes():
        for idx, td in enumerate(node.op.output_desc):
            src_name = typed_attr(td.attr, key, "s")
            if src_name is None:
                continue
            if lookup is None:
                lookup = _name_lookup(model)
            src = lookup.get(src_name)
            if src is None:
                raise VarError(Status.FAILED, f"ref node {node.name}: source variable '{src_name}' of "
                               f"output {idx} is in no graph of the model", src_name)
            if src.type in policy.op_types.ref_data:
                continue
            address, _ = mgr.get_var_addr(src_name, output_desc(src, policy))
            if idx >= len(_offsets(node)):
                raise VarError(Status.FAILED, f"out_index {idx} >= ref_attr_node_output_list.size() "
                               f"{len(node.op.output_i)} (node {node.name})", src_name)
            node.op.output_i[idx] = address


def _name_lookup(model: Model) -> dict[str, Node]:
    """Root direct nodes first, then each subgraph's (first match wins)."""
    out: dict[str, Node] = {}
    for g in [model.root, *model.all_subgraphs()]:
        for n in g.nodes():
            out.setdefault(n.name, n)
    return out
