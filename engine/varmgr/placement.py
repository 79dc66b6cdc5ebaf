"""VarMemAssignUtil (§7): compile-time placement of variables into a graph.

`plan_graph` runs AssignStaticMemory2Node, AssignVarAttr2Nodes and
AssignMemory2HasRefAttrNode on one model in one session, writes output offsets
(`OpDef.output_i`) and output-0 sizes into the graph, and returns a plan.
"""
from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from typing import NamedTuple

from engine.core.attrs import node_typed
from engine.core.gcpause import no_gc
from engine.core.graph import Model, Node, decodes_rolled_back, op_list, set_desc_size, set_op_list
from engine.core.lean import CompactOp
from engine.varmgr import getypes as t
from engine.varmgr.desc import DescCache, TensorDesc, desc_from_proto
from engine.varmgr.manager import VarManager
from engine.varmgr.nodes import attr_getter, is_ref_node, node_var_size, output_desc, reader_for, var_op
from engine.varmgr.records import BroadcastInfo, Status, VarError

MAX_RECURSION = 16        # kVarMemMaxRecursion


class Journal:
    """The fields a placement writes, as they were, to put back afterwards.

    Note [placement journal]: the run report places the graph once more to show planned
    addresses, then restores the graph (engine/report/varlinks.py). The placement writes
    three fields of few nodes (output offsets, input offsets of broadcasts, the output
    sizes of placed nodes), so each node is saved the first time one of them is about to
    be written, instead of saving and comparing every node of the graph (most of the
    report's cost at 10^5 nodes). A lean node is written lean (Note [lean offset writes],
    Note [lean descriptor writes] in engine/core/graph.py): what it holds for those fields
    is saved as the objects themselves (a compact op's tail and descriptor tuple, its
    anchors' descriptor messages) and put back so, which leaves it exactly as it was,
    sharing what it shared. The plan runs inside `decodes_rolled_back`, which gives each
    node it decoded back its encoded op, the writes dropped with the decoded one (Note
    [decode rollback]): one decoded inside the plan before its first write is saved but
    its decoded op not restored; its lean op is (the rollback comes first)."""

    __slots__ = ("saved",)

    def __init__(self) -> None:
        self.saved: dict[int, tuple] = {}    # id(node) → (node, op or lean op, what it held)

    def note(self, node: Node) -> None:
        if id(node) in self.saved:
            return
        op = node._op
        if op is not None:
            held = (list(op.output_i), list(op.input_i), [td.size for td in op.output_desc])
        elif type(node.lean) is CompactOp:
            held = (node.lean.tail, node.lean.output_desc, [a._desc for a in node.outs])
        else:
            lean = node.lean
            held = (list(lean.output_i), list(lean.input_i), list(lean.output_desc), [a._desc for a in node.outs])
        self.saved[id(node)] = (node, op if op is not None else node.lean, held)

    def restore(self) -> None:
        for node, op, held in self.saved.values():
            if op is node._op:
                outs, ins, sizes = held
                for field, old in ((op.output_i, outs), (op.input_i, ins)):
                    if list(field) != old:
                        del field[:]
                        field.extend(old)
                for td, size in zip(op.output_desc, sizes):
                    td.size = size
            elif op is node.lean:
                if type(op) is CompactOp:
                    op.tail, op.output_desc, descs = held
                else:
                    outs, ins, raws, descs = held
                    for field, old in ((op.output_i, outs), (op.input_i, ins), (op.output_desc, raws)):
                        if list(field) != old:
                            del field[:]
                            field.extend(old)
                for a, d in zip(node.outs, descs):
                    a._desc = d
            # else: decoded inside the plan, with its writes, and given back its lean op
        self.saved.clear()


_JOURNAL: ContextVar[Journal | None] = ContextVar("placement_journal", default=None)


def plan_graph_and_undo(model: Model, mgr: VarManager, graph_id: int) -> GraphPlan:
    """plan_graph, with every field it wrote put back as it was (Note [placement journal])."""
    journal = Journal()
    token = _JOURNAL.set(journal)
    try:
        with decodes_rolled_back(model):
            return plan_graph(model, mgr, graph_id)
    finally:
        _JOURNAL.reset(token)
        journal.restore()


class PlanEntry(NamedTuple):
    """One placed node (a NamedTuple: one is made per variable, see Note [compact records])."""

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
    op_type: str = ""     # the node's type


@dataclass(frozen=True, slots=True)
class GraphPlan:
    graph_id: int
    graph: str
    entries: tuple[PlanEntry, ...]
    broadcasts: tuple[BroadcastInfo, ...]
    batch_names: tuple[tuple[str, str], ...] = ()     # (batch variable name, the name it shares)


def plan_graph(model: Model, mgr: VarManager, graph_id: int) -> GraphPlan:
    # Note [no collector during planning]: planning makes a few records per variable and no
    # reference cycles, so the cyclic collector only re-scans the growing maps (a fifth of
    # the time at 10^5 variables, more beyond); it is paused while one graph is planned.
    with no_gc():
        # one GetAllNodes snapshot (the steps add no nodes); without subgraphs, the root's nodes
        nodes = list(model.root.nodes()) if len(model.graphs) == 1 else model.all_nodes()
        batch = register_batch_variables(model, mgr, nodes)
        descs: dict[Node, TensorDesc] = {}
        addrs: dict[Node, int] = {}
        entries = assign_static_memory(model, mgr, graph_id, descs, nodes, addrs)
        broadcasts = assign_var_attr_to_nodes(model, mgr, graph_id, descs, nodes, addrs)
        assign_memory_to_ref_attr_nodes(model, mgr, nodes)
    return GraphPlan(graph_id, model.root.name, tuple(entries), tuple(broadcasts), batch)


def graph_available_memory(model: Model, mgr: VarManager) -> int:
    """GetGraphAvailableMemory (model_data_info.cc), asked before the graph is placed: the use
    maximum less the variable space (its maximum, or what is in use when that is more) less the
    padded output sizes of the root graph's placed nodes the session does not know by name.
    Unsigned 64-bit arithmetic as GE's (a shortfall wraps around)."""
    policy = mgr.policy
    types = policy.op_types.available_memory or policy.op_types.placed
    padding = _padding(mgr)
    new_total = 0
    for node in model.root.nodes():
        if node.type not in types or mgr.is_var_exist(node.name):
            continue
        for td in node.descs(True):
            new_total += node_var_size(node, output_desc_of(td, policy), policy, padding)
    max_var = mgr.get_var_mem_max_size()
    current = mgr.get_var_mem_size(mgr.hbm_rt)
    return (mgr.get_use_max_memory_size() - max(current, max_var) - new_total) % (1 << 64)


def register_batch_variables(model: Model, mgr: VarManager,
                             nodes: list[Node] | None = None) -> tuple[tuple[str, str], ...]:
    """SetBatchVariablesKeyName for each variable named `<name><batch_name_postfix><k>` (what
    MultiBatchClonePass names a variable's copy in batch k, and what ModelHelper registers when
    it loads such a model): the copies share `<name>`'s VarKey, hence its memory, and
    VariableOpPass leaves the session alone (HasSharedVarMemBetweenBatch)."""
    postfix = mgr.policy.batch_name_postfix
    out = []
    if not postfix:
        return ()
    variable = mgr.policy.op_types.variable
    for node in model.all_nodes() if nodes is None else nodes:
        if node.type in variable:
            pos = node.name.find(postfix)
            if pos > 0:
                mgr.set_batch_variables_key_name(node.name, node.name[:pos])
                out.append((node.name, node.name[:pos]))
    return tuple(out)


def output_desc_of(td, policy) -> TensorDesc:
    return desc_from_proto(td, policy.attrs.init_value)


def _padding(mgr: VarManager) -> int:
    rule = mgr.policy.size_rule
    text = mgr.options.get(rule.padding_option)
    return int(text) if text is not None else rule.default_padding


def assign_static_memory(model: Model, mgr: VarManager, graph_id: int,
                         descs: dict[Node, TensorDesc] | None = None,
                         nodes: list[Node] | None = None,
                         addrs: dict[Node, int] | None = None) -> list[PlanEntry]:
    """AssignStaticMemory2Node over GetAllNodes (subgraphs included).

    `descs` (optional) receives each placed node's output-0 descriptor with its size, `addrs`
    the address of each placed node whose VarManager name is its own (what GetVarAddr gives
    for it while the graph is planned: nothing re-keys an address before the plan ends).
    """
    descs = {} if descs is None else descs
    policy = mgr.policy
    placed = policy.op_types.placed
    variable = policy.op_types.variable
    padding = _padding(mgr)
    res = mgr.res("AssignStaticMemory2Node")
    hbm = mgr.hbm_rt
    base = mgr.var_mem_logic_base
    out: list[PlanEntry] = []
    append = out.append
    reader = reader_for(policy)
    journal = _JOURNAL.get()
    cache = DescCache(policy.attrs.init_value)
    read_desc, sized = cache.read, cache.with_size
    addr_map = res.var_addr_mgr_map
    var_key = res.var_key
    type_names: dict[int, str] = {}
    zero_offsets: dict[int, tuple[int, ...]] = {}
    sizes: dict[bytes, int] = {}
    inners: dict[bytes, int] = {}
    string = t.DT_STRING
    for node in model.all_nodes() if nodes is None else nodes:
        if node.type not in placed:
            continue
        is_ref, name, mem_type = reader.head(node)
        if is_ref:
            continue
        if journal is not None:
            journal.note(node)
        op = node._op       # a lean node is read lean, and written so (Note [lean offset writes])
        out_descs = op.output_desc if op is not None else node.descs(True)
        if not out_descs:
            raise VarError(Status.FAILED, f"node:{node.name} has no OutputDesc", node.name)
        td = out_descs[0]
        dkey, desc = read_desc(td)
        # a size depends on the descriptor alone except for strings (their weight or length)
        size = sizes.get(dkey) if dkey is not None and desc.dtype != string else None
        if size is None:
            size = node_var_size(node, desc, policy, padding)
            if dkey is not None and desc.dtype != string:
                sizes[dkey] = size
        if size != desc.size:                 # desc.size is td.size as read
            set_desc_size(node, 0, size)
        desc = descs[node] = sized(dkey, desc, size)
        count = len(out_descs)
        zeros = zero_offsets.get(count)
        if zeros is None:
            zeros = zero_offsets[count] = ((0,) * count, [0] * (count - 1))
        zeros, tail = zeros
        # Note [one offset write]: the offsets are reset to zeros and offset 0 set to the
        # address; only AssignData2Fp32Var reads them in between, so they are written once
        # (twice for a variable with a source variable attribute)
        key = var_key(name, desc)
        if key not in addr_map:
            inner = inners.get(dkey) if dkey is not None else None
            if inner is None:
                inner = reader.inner_offset(td)     # a function of the descriptor's bytes
                if dkey is not None:
                    inners[dkey] = inner
            result = mgr.assign_var_mem(name, reader.var_op(node, desc, zeros, inner), desc, mem_type, key)
            if node.type in variable and attr_getter(node) is not None:
                set_op_list(node, "output_i", zeros)
                _assign_data_to_fp32_var(node, mgr)
            mgr.set_allocated_graph_id(name, graph_id)
            footprint, decision = result.footprint, result.rule or "new block"
        else:
            _check_same_key_size(node, name, desc, mgr, key)
            footprint, decision = 0, "already placed"
        entry = addr_map.get(key)
        if entry is None:
            mgr.get_var_addr(name, desc)              # fails as GetVarAddr fails
        address, typ = entry.address, entry.memory_type
        set_op_list(node, "output_i", [address, *tail])
        type_name = type_names.get(typ)
        if type_name is None:
            spec = policy.mem_type_by_rt(typ)
            type_name = type_names[typ] = spec.name if spec else str(typ)
        append(PlanEntry(graph_id, node.graph.name, node.name, name, key, type_name, size, address,
                         address - base if typ == hbm else address, footprint, decision, node.type))
        if addrs is not None and name == node.name:
            addrs[node] = address             # GetVarAddr(node name, this desc) until the plan ends
    return out


def _check_same_key_size(node: Node, name: str, desc, mgr: VarManager, key: str) -> str:
    # Note [same-key size conflict]: GE skips AssignVarMem when the VarKey exists and
    # hands out the old address even if this node's tensor is larger, so the variable
    # would overrun its block. We report that as a failure naming both sizes.
    res = mgr.var_resource
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
    src = node_typed(node, mgr.policy.attrs.src_var_name, "s")
    if src is None:
        return
    cur = mgr.get_cur_var_desc(src)
    address, typ = mgr.get_var_addr(src, cur)
    mgr.set_var_addr(node.name, cur, address, typ, var_op(node, mgr.policy))


# ---- AssignVarAttr2Nodes ------------------------------------------------------------
def assign_var_attr_to_nodes(model: Model, mgr: VarManager, graph_id: int,
                             descs: dict[Node, TensorDesc] | None = None,
                             nodes: list[Node] | None = None,
                             addrs: dict[Node, int] | None = None) -> list[BroadcastInfo]:
    policy = mgr.policy
    descs = {} if descs is None else descs
    types = policy.op_types
    variable, broadcast, assign, trans_chain = types.variable, types.broadcast, types.assign, types.trans_chain
    infos: list[BroadcastInfo] = []
    addrs = {} if addrs is None else addrs   # each variable's address, read once (nothing moves it here)
    for node in model.all_nodes() if nodes is None else nodes:
        if node.type not in variable:
            continue
        if is_ref_node(node, policy):
            continue
        if node not in descs:
            descs[node] = output_desc(node, policy)
        _set_out_variable_attr(node, node, mgr, descs, addrs)
        for anchor in node.outs:
            for peer in list(anchor.peers):
                dst = peer.node
                kind = dst.type
                if kind in broadcast:
                    infos.append(_deal_broadcast(graph_id, dst, peer.idx, node, mgr))
                    continue
                if kind in assign and peer.idx == 0:
                    _deal_export_variable(dst, node, mgr, 0, descs, addrs)
                if kind in trans_chain:
                    _deal_trans(_final_trans_node(dst, trans_chain, 0), mgr)
    return infos


def _offsets(node: Node):
    """The node's output offsets, sized to its outputs when a dump has none.

    Note [empty output offsets]: GE runs AssignVarAttr2Nodes after the graph memory
    assigner gave every node an offset list; a dump taken earlier has none, so we
    start from zeros instead of failing with "Output_list is empty".
    """
    journal = _JOURNAL.get()
    if journal is not None:
        journal.note(node)      # every write outside assign_static_memory goes through here
    offsets = op_list(node, "output_i")
    count = node.desc_count(True)
    if not offsets and count:
        offsets = [0] * count
        set_op_list(node, "output_i", offsets)
    return offsets


def _set_out_variable_attr(node: Node, var_node: Node, mgr: VarManager,
                           descs: dict[Node, TensorDesc], addrs: dict[Node, int] | None = None) -> None:
    outputs = _offsets(node)
    if not outputs:
        raise VarError(Status.PARAM_INVALID, f"node:{node.name} Output_list is empty (output offsets "
                       f"of variable '{var_node.name}' cannot be written)", var_node.name)
    address = addrs.get(var_node) if addrs is not None else None
    if address is None:
        address, _ = mgr.get_var_addr(var_node.name, descs[var_node])
        if addrs is not None:
            addrs[var_node] = address
    outputs[0] = address
    set_op_list(node, "output_i", outputs)


def _deal_export_variable(node: Node, var_node: Node, mgr: VarManager, depth: int,
                          descs: dict[Node, TensorDesc], addrs: dict[Node, int] | None = None) -> None:
    if depth >= MAX_RECURSION:
        raise VarError(Status.FAILED, f"[DealExportVariableNode]There are too much recursion:{depth} > "
                       f"max:{MAX_RECURSION} (assign chain of variable '{var_node.name}')", var_node.name)
    assign = mgr.policy.op_types.assign
    if node.outs:
        for peer in list(node.outs[0].peers):
            if peer.node.type in assign and peer.idx == 0:
                _deal_export_variable(peer.node, var_node, mgr, depth + 1, descs, addrs)
    _set_out_variable_attr(node, var_node, mgr, descs, addrs)


def _deal_broadcast(graph_id: int, node: Node, idx: int, var_node: Node, mgr: VarManager) -> BroadcastInfo:
    in_descs = node.descs(False)
    if idx >= len(in_descs):
        raise VarError(Status.FAILED, f"Get broadcast op {node.name} input tensor desc size "
                       f"[{len(in_descs)}] < idx [{idx}]", var_node.name)
    outputs = _offsets(node)
    if len(outputs) <= idx:
        raise VarError(Status.FAILED, f"Get broadcast op {node.name} output_list size [{len(outputs)}] "
                       f"< idx [{idx}]", var_node.name)
    set_op_list(node, "input_i", outputs)
    out_descs = node.descs(True)
    if len(out_descs) <= idx:
        raise VarError(Status.FAILED, f"Get broadcast op {node.name} output tensor desc size "
                       f"[{len(out_descs)}] < idx [{idx}]", var_node.name)
    in_size, out_size = in_descs[idx].size, out_descs[idx].size
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
    source, offsets = _offsets(final), _offsets(node)
    if not source or not offsets:
        raise VarError(Status.PARAM_INVALID, f"output offsets of {final.name} or {node.name} are empty",
                       node.name)
    offsets[0] = source[0]
    set_op_list(node, "output_i", offsets)


# ---- AssignMemory2HasRefAttrNode -------------------------------------------------------
def assign_memory_to_ref_attr_nodes(model: Model, mgr: VarManager, nodes: list[Node] | None = None) -> None:
    policy = mgr.policy
    key = policy.attrs.ref_var_src_var_name
    lookup: dict[str, Node] | None = None
    needle = key.encode()
    for node in model.all_nodes() if nodes is None else nodes:
        # read through the node, lean (Note [lean ops]); most descriptors have no such key
        if not node.descs_may_hold(needle, outputs=True):
            continue
        for idx, td in enumerate(node.descs(outputs=True)):
            a = td.attr.get(key)
            if a is None or a.WhichOneof("value") != "s":
                continue
            src_name = a.s.decode("utf-8", "replace")
            if lookup is None:
                lookup = _name_lookup(model)
            src = lookup.get(src_name)
            if src is None:
                raise VarError(Status.FAILED, f"ref node {node.name}: source variable '{src_name}' of "
                               f"output {idx} is in no graph of the model", src_name)
            if src.type in policy.op_types.ref_data:
                continue
            address, _ = mgr.get_var_addr(src_name, output_desc(src, policy))
            offsets = _offsets(node)
            if idx >= len(offsets):
                raise VarError(Status.FAILED, f"out_index {idx} >= ref_attr_node_output_list.size() "
                               f"{len(offsets)} (node {node.name})", src_name)
            offsets[idx] = address
            set_op_list(node, "output_i", offsets)


def _name_lookup(model: Model) -> dict[str, Node]:
    """Root direct nodes first, then each subgraph's (first match wins)."""
    out: dict[str, Node] = {}
    for g in [model.root, *model.all_subgraphs()]:
        for n in g.nodes():
            out.setdefault(n.name, n)
    return out
