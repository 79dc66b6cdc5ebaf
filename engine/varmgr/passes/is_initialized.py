"""VarIsInitializedOpPass (§9.4): VarIsInitializedOp becomes a bool Const."""
from __future__ import annotations

from engine.core.errors import PassFailure
from engine.core.graph import Graph, Node
from engine.proto import ge_ir_pb2 as pb
from engine.core.surgery import link, link_ctrl, new_node, remove_node
from engine.core.toposort import depth_first_order
from engine.varmgr.manager import VarManager
from engine.varmgr.policy import one
from engine.varmgr.passes.util import Change, keep
from engine.varmgr.passes.util import data_in_nodes

PASS_ID = "var_is_initialized"
RULE = "var/is-initialized-to-const"


def run_var_is_initialized(graph: Graph, mgr: VarManager,
                           inited: dict[Node, frozenset[Node]] | None = None, kept: list | None = None) -> list[Change]:
    """Visit the direct nodes in order; `inited` (optional) receives each node's initialized set.

    Note [inited sets by node]: GE keys the sets by node id; ids in a dump are not
    unique after insertions, so we key by node.
    """
    types = mgr.policy.op_types
    changes: list[Change] = []
    nodes = graph.node_list()
    # Note [no work without VarIsInitializedOp]: the inited sets are only read when
    # replacing such a node; propagating them is O(nodes × variables), so a run that
    # does not ask for them skips it when there is nothing to replace (GE's check of every
    # writer, which can fail the pass, still runs)
    if inited is None and not any(n.type in types.var_is_initialized for n in nodes):
        for node in nodes:
            if node.type in types.init_writer:
                _writer_var(node)
        keep(kept, None, RULE, f"a {' or '.join(sorted(types.var_is_initialized))} node in graph {graph.name}",
             "none: nothing to replace")
        return changes
    inited = {} if inited is None else inited
    for node in _dataflow_order(nodes):
        _update_inited(node, inited, types.init_writer)
        if node.type in types.var_is_initialized:
            changes.append(_replace(node, mgr, inited))
    return changes


def _dataflow_order(nodes: list[Node]) -> list[Node]:
    """The order GE's node-pass runner visits the direct nodes in: each after its inputs (a
    depth-first topological order; the list's own when it has a cycle)."""
    return depth_first_order(nodes) or nodes


def _writer_var(node: Node) -> Node:
    """CheckAndSetVarInited: the variable an Assign writes, its input 0's producer; an Assign
    without one fails the pass (PARAM_INVALID), whatever else the graph holds."""
    if not node.ins or node.ins[0].peer is None:
        raise PassFailure(PASS_ID, f"invalid assign node {node.name}: no variable feeds its ref input 0", node.name)
    return node.ins[0].peer.node


def _update_inited(node: Node, inited: dict[Node, frozenset[Node]], writers: frozenset[str]) -> None:
    merged: frozenset[Node] = frozenset()
    for pred in [*data_in_nodes(node), *node.in_ctrl]:
        merged = merged | inited.get(pred, frozenset())
    if node.type in writers:
        merged = merged | {_writer_var(node)}
    inited[node] = merged


def _replace(node: Node, mgr: VarManager, inited: dict[Node, frozenset[Node]]) -> Change:
    types = mgr.policy.op_types
    ins = data_in_nodes(node)
    if len(ins) != 1:
        raise PassFailure(PASS_ID, f"{node.type} node {node.name} has {len(ins)} data inputs, expected 1", node.name)
    var = ins[0]
    if var.type not in types.variable:
        raise PassFailure(PASS_ID, f"input of {node.name} is {var.name} ({var.type}), not a variable", node.name)
    if len(node.ins) != 1 or len(node.outs) != 1:
        raise PassFailure(PASS_ID, f"{node.name} must have exactly 1 data input and 1 data output anchor "
                          f"(has {len(node.ins)} and {len(node.outs)})", node.name)
    from_manager = mgr.is_var_exist(var.name)
    value = from_manager or var in inited.get(node, frozenset())
    op = node.graph.model.new_op(node.name, one(types.init_flag))      # Note [op memory]
    op.id = node.id
    # CreateConstant: the weight is GeTensor(GetOutputDesc(0), the bool) and the output desc that
    # same descriptor (GE's default GeTensorDesc, ND DT_FLOAT, when the node has no output 0)
    src = node.op.output_desc[0] if node.op.output_desc else pb.TensorDescriptor(layout="ND", dtype=pb.DT_FLOAT)
    op.output_desc.add().CopyFrom(src)
    tensor = op.attr[mgr.policy.attrs.weights].t
    tensor.desc.CopyFrom(src)
    tensor.data = b"\x01" if value else b"\x00"
    preds, succs = list(node.in_ctrl), list(node.out_ctrl)
    consumers = [p for o in node.outs for p in o.peers]
    graph, before = node.graph, node.prev
    remove_node(node)
    const = new_node(graph, op, before)
    if before is None:
        graph.unlink_from_list(const)
        graph.prepend(const)                # linked in again, so live again
    const.op.id = op.id
    # ProcessInAnchor: AddEdge(var, const), then MoveInCtrlEdges and MoveOutCtrlEdges (GE's
    # AddCtrlEdges: predecessors const had already are skipped, a repeated one copied again;
    # a successor once; Note [repeated control edges])
    link_ctrl(var, const)
    for p in preds:
        if p is not var:
            link_ctrl(p, const, repeat=True)
    for s in succs:
        link_ctrl(const, s)
    for dst in consumers:
        link(const.outs[0], dst)
    inited[const] = inited.pop(node, frozenset())
    why = "the VarManager knows the variable" if from_manager else (
        "an Assign before it initialized the variable" if value else "nothing initializes the variable before it")
    return Change("replaced", const.name, const.type, graph.name, RULE,
                  {"variable": var.name, "value": bool(value), "why": why})
