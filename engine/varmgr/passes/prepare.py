"""VariablePrepareOpPass (§9.3): a VariableRef after the last writer of each variable.

A writer is an op with a ref input (an input named like one of its outputs, or
an input desc with `ref_port_index`). From each variable, writers are followed
through their ref outputs; the last one in a chain gets `<var>_TO_<w>_REF_<o>`.
"""
from __future__ import annotations

from engine.core.attrs import node_typed, set_attr
from engine.core.errors import PassFailure
from engine.core.graph import Graph, Node
from engine.proto import ge_ir_pb2 as pb
from engine.core.surgery import add_node, link, link_ctrl, make_op, new_node, replace_peer, unlink
from engine.varmgr.policy import VarPolicy, one
from engine.varmgr.passes.util import Change, keep

PASS_ID = "variable_prepare"
RULE_REF = "var/ref-after-writer"
RULE_IDENTITY = "var/identity-before-merge"
RULE_REF_IDENTITY = "var/ref-identity-for-ref-input"

RefMap = dict[str, dict[int, list[int]]]


def run_variable_prepare(graph: Graph, policy: VarPolicy, kept: list | None = None,
                         carried: RefMap | None = None) -> list[Change]:
    """`carried`: the map the pass object holds from the graphs it ran on before in this run
    (GE's ref_input_output_map_ member, never cleared between the root and its subgraphs);
    types it has already are not read again, and it gets this graph's."""
    ref_map = build_ref_map(graph, policy, carried)
    if not ref_map:
        keep(kept, None, RULE_REF, f"a node of graph {graph.name} with a ref input (an input named like "
             "an output, or ref_port_index)", "none: no writer, so no VariableRef")
        return []                                    # "No need to add variable_ref."
    changes: list[Change] = []
    var_like = policy.op_types.var_like
    for var in graph.node_list():
        if var.type not in var_like or not var.alive:
            continue
        for anchor in list(var.outs):
            for peer in list(anchor.peers):
                outs = ref_outputs(peer.node, peer.idx, ref_map, policy)
                if not outs and peer.node.type in policy.op_types.framework_op:
                    original = node_typed(peer.node, policy.attrs.original_type, "s") or ""
                    keep(kept, var, RULE_REF, f"consumer {peer.node.name}:{peer.idx} writes {var.name}",
                         f"no: a {peer.node.type} is looked up in the framework_ref_ports table by its "
                         f"original_type ({original or 'none'}), which gives input {peer.idx} no ref output")
                elif not outs:
                    keep(kept, var, RULE_REF, f"consumer {peer.node.name}:{peer.idx} writes {var.name}",
                         f"no: input {peer.idx} of {peer.node.type} has no ref output",
                         ("ref inputs of " + peer.node.type, sorted(ref_map.get(peer.node.type, {}))))
                for o in outs:
                    _walk(peer.node, peer.idx, o, var, ref_map, policy, changes, kept)
    return changes


def ref_outputs(node: Node, in_idx: int, ref_map: RefMap, policy: VarPolicy) -> list[int]:
    """GetWritableNodeOutIndex: the ref outputs of `node`'s input `in_idx`.

    Note [framework ops by table]: GE looks a FrameworkOp up only in its fixed table
    (ref_node_without_prototype_map_, `framework_ref_ports` in variables.yaml) by its
    original_type, never in the map built from the graph: a FrameworkOp whose
    original_type is Assign is not a writer (variable_prepare_op_pass.cc).
    """
    if node.type in policy.op_types.framework_op:
        original = node_typed(node, policy.attrs.original_type, "s") or ""
        return list(policy.framework_ref_outputs(original, in_idx))
    return ref_map.get(node.type, {}).get(in_idx, [])


def build_ref_map(graph: Graph, policy: VarPolicy, out: RefMap | None = None) -> RefMap:
    """GenerateRefTypeAndInputOutputMap over the direct nodes, keyed by node type.

    As in GE, a type is read from the first node of that type that has a ref input;
    later nodes of a type already in the map are not read again.

    Note [ref plans]: nodes that name their ports alike share their port maps (Note [shared
    port maps] in engine/core/graph.py), so what the names alone decide — each named input in
    order, with the output of its name or none — is worked out once per shared pair of maps;
    only the inputs no output is named like are left to read ref_port_index from.
    """
    if out is None:
        out = {}
    ref_key = policy.attrs.ref_port_index
    plans: dict[int, tuple] = {}          # id(ports pair) → (the pair, kept alive; its plan)
    for node in graph.node_list():
        if node.type in out:
            continue
        pair = node.ports()
        known = plans.get(id(pair))
        if known is None:
            ins, outs = pair
            known = plans[id(pair)] = (pair, tuple((i, outs.get(name)) for name, i in ins.items()))
        plan = known[1]
        if not plan:
            continue
        ins = node.ins
        for i, o in plan:
            if o is not None:
                out.setdefault(node.type, {})[i] = [o]
                continue
            # the in-anchor's descriptor (None past the op's input_desc: Note [descriptor
            # cache] in graph.py), read lean when the node is (Note [lean ops]); an index
            # below 0 counts from the end, as it did
            d = ins[i].desc if 0 <= i < len(ins) else \
                node.op.input_desc[i] if i < 0 and -i <= len(node.op.input_desc) else None
            if d is not None:
                attrs = d.attr
                if ref_key in attrs and len(attrs[ref_key].list.i):      # `in` makes no wrapper
                    out.setdefault(node.type, {})[i] = [len(node.outs)]
    return out


def _walk(start: Node, in_idx: int, o: int, var: Node, ref_map: RefMap, policy: VarPolicy,
          changes: list[Change], kept: list | None = None) -> None:
    # each entry carries the writer chain that led to it as a linked list (O(1) per step)
    stack = [(start, in_idx, o, (f"{start.name}:{in_idx}", None))]
    seen: set[tuple[int, int, int]] = set()
    while stack:
        node, i, out_idx, chain = stack.pop()
        if (id(node), i, out_idx) in seen:
            continue
        seen.add((id(node), i, out_idx))
        further = []
        if out_idx < len(node.outs):
            # Note [refs are writers too]: GE's GetPeerNodeOfRefOutput and DealVariableNode follow
            # every consumer the type-keyed map gives ref outputs, a VariableRef made by this pass
            # included (it has its variable's type): where Variable has ports named alike, as in
            # GE's variable_prepare_pass_succ1, the ref after variable1 gets a ref of its own (the
            # spec's §11.4 case 52 reads two refs there; GE's code makes three, and GE's code wins)
            for peer in node.outs[out_idx].peers:
                for o2 in ref_outputs(peer.node, peer.idx, ref_map, policy):
                    further.append((peer.node, peer.idx, o2, (f"{peer.node.name}:{peer.idx}", chain)))
        if further:
            if node.out_ctrl:
                add_variable_ref(node, var, out_idx, policy, changes, chain, kept)
            else:
                keep(kept, node, RULE_REF, f"{node.name}:{out_idx} is the last writer of {var.name}",
                     "no: a later writer follows and it has no control successors to order",
                     ("later writers", [f"{n.name}:{i}" for n, i, _, _ in further]))
            stack.extend(further)       # std::stack: the last consumer pushed is walked first
        elif node.type in policy.op_types.framework_op:
            continue
        elif out_idx < len(node.outs):
            add_variable_ref(node, var, out_idx, policy, changes, chain, kept)
        else:
            insert_variable_ref(node, i, var, policy, changes, chain)


MAX_CHAIN = 8


def _chain_facts(var: Node, chain, policy: VarPolicy) -> dict:
    """The writers from the variable to this one (the last MAX_CHAIN, `var:out` first), and the
    variable the new ref names as its source."""
    names, k = [], 0
    while chain is not None:
        if len(names) < MAX_CHAIN:
            names.append(chain[0])
        k += 1
        chain = chain[1]
    out = {"writer_chain": [var.name] + names[::-1]}
    if k > MAX_CHAIN:
        out["writer_chain_omitted"] = k - MAX_CHAIN
    out["ref_source"] = var.name
    out["ref_source_attr"] = policy.attrs.ref_var_src_var_name
    return out


def _ref_op(var: Node, name: str, policy: VarPolicy):
    """CreateVariableRef: one input and one output, both the source's output 0 descriptor; a
    source without one gives GE's default GeTensorDesc (GetOutputDesc's InvalidGeTensorDesc:
    ND, DT_FLOAT, no shape), which GE adds all the same."""
    desc = var.outs[0].desc if var.outs else None      # read only: make_op copies it
    if desc is None:
        desc = pb.TensorDescriptor(layout="ND", dtype=pb.DT_FLOAT)
    op = make_op(name, var.type, [desc], [desc], model=var.graph.model)
    set_attr(op.attr, policy.attrs.ref_var_src_var_name, var.name)
    return op


def add_variable_ref(w: Node, var: Node, o: int, policy: VarPolicy, changes: list[Change], chain=None,
                     kept: list | None = None) -> None:
    if o >= len(w.outs):
        keep(kept, w, RULE_REF, f"{w.name} has output {o} for the ref", f"no: it has {len(w.outs)} outputs")
        return                                       # warning in GE, SUCCESS
    key = policy.attrs.ref_var_src_var_name
    for peer in w.outs[o].peers:
        if peer.node.type in policy.op_types.var_like and node_typed(peer.node, key, "s") == var.name:
            keep(kept, w, RULE_REF, f"{w.name}:{o} already feeds a VariableRef of {var.name}",
                 f"yes: {peer.node.name}")
            return                                   # already has its VariableRef
    op = _ref_op(var, policy.node_names.ref.format(var=var.name, node=w.name, index=o), policy)
    ref = add_node(w.graph, _labelled(op, w, policy))      # CreateVariableRef: ComputeGraph::AddNode
    _order_before_successors(ref, w, policy, changes)
    link(w.outs[o], ref.ins[0])
    changes.append(Change("inserted", ref.name, ref.type, w.graph.name, RULE_REF,
                          {"variable": var.name, "writer": f"{w.name}:{o}", **_chain_facts(var, chain, policy)}))


def _labelled(op, w: Node, policy: VarPolicy):
    """CheckStreamLabel: the new ref takes the writer's `_stream_label`, when it has one."""
    label = node_typed(w, policy.attrs.stream_label, "s")
    if label:
        set_attr(op.attr, policy.attrs.stream_label, label)
    return op


def _order_before_successors(ref: Node, w: Node, policy: VarPolicy, changes: list[Change]) -> None:
    """GE AddControlEdge(writer, ref), for both ways a ref is made (AddVariableRef and
    InsertVariableRef): the ref is ordered before each of the writer's data consumers, through
    an Identity put before a Merge-typed one (original type read: a FrameworkOp without one
    fails), and before each of its control successors: an edge per edge of the writer's
    (GE's AddEdge asks nothing: a node the writer feeds twice, or feeds and controls, gets
    two; Note [repeated control edges] in engine/core/surgery.py)."""
    data_peers = [p for anchor in w.outs for p in anchor.peers]
    ctrl_peers = list(w.out_ctrl)
    for peer in data_peers:
        if _original_type(peer.node, policy) in policy.op_types.merge:
            ident = _identity_before(peer, w, policy, changes)
            link_ctrl(ref, ident, repeat=True)
        else:
            link_ctrl(ref, peer.node, repeat=True)
    for succ in ctrl_peers:
        # GE walks the control anchor's peers too: a Merge there gets InsertIdentityNode on a
        # control anchor, which InsertNodeBetweenDataAnchors refuses (the pass fails)
        if _original_type(succ, policy) in policy.op_types.merge:
            raise PassFailure(PASS_ID, f"cannot put an Identity between the control output of {w.name} and "
                              f"Merge {succ.name} (InsertIdentityNode on a control anchor)", succ.name)
        link_ctrl(ref, succ, repeat=True)


def _original_type(node: Node, policy: VarPolicy) -> str:
    if node.type in policy.op_types.framework_op:
        original = node_typed(node, policy.attrs.original_type, "s")
        if original is None:
            raise PassFailure(PASS_ID, f"FrameworkOp {node.name} has no attr "
                              f"'{policy.attrs.original_type}'", node.name)
        return original
    return node.type


def _identity_before(peer, w: Node, policy: VarPolicy, changes: list[Change]) -> Node:
    src = peer.peer
    name = policy.node_names.identity.format(writer=w.name, node=peer.node.name, index=peer.idx)
    td = src.node.op.output_desc[src.idx] if src.idx < len(src.node.op.output_desc) else None
    op = make_op(name, one(policy.op_types.identity), [td] if td else [], [td] if td else [], ["x"], ["y"],
                 model=w.graph.model)
    # InsertIdentityNode: graph->InsertNode(src) and InsertNodeBetweenDataAnchors, whose
    # Anchor::Insert puts the Identity in the consumer's place (no control edge moves)
    ident = new_node(src.node.graph, op, src.node)
    replace_peer(src, peer, ident.ins[0])
    link(ident.outs[0], peer)
    changes.append(Change("inserted", ident.name, ident.type, w.graph.name, RULE_IDENTITY,
                          {"before": peer.node.name, "writer": w.name}))
    return ident


def insert_variable_ref(n: Node, i: int, var: Node, policy: VarPolicy, changes: list[Change], chain=None) -> None:
    anchor = n.ins[i] if i < len(n.ins) else None
    src = anchor.peer if anchor is not None else None
    if src is None:
        raise PassFailure(PASS_ID, f"ref input {i} of {n.name} has no producer", n.name)
    td = n.op.input_desc[i]
    names = policy.node_names
    bridge = make_op(names.ref_identity.format(src=src.node.name, src_index=src.idx, node=n.name, index=i),
                     one(policy.op_types.ref_identity), [td], [td], model=n.graph.model)
    ref_op = _labelled(_ref_op(var, names.ref.format(var=var.name, node=n.name, index=i), policy), n, policy)
    # CreateRefIdentity, CreateVariableRef: ComputeGraph::AddNode, at the end of the graph
    ident = add_node(n.graph, bridge)
    ref = add_node(n.graph, ref_op)
    # Note [one ordering for both refs]: InsertVariableRef orders the ref with the same
    # AddControlEdge as AddVariableRef (an Identity before a Merge consumer, the stream label),
    # before it relinks the ref input through the RefIdentity
    _order_before_successors(ref, n, policy, changes)
    unlink(src, anchor)                 # RemoveEdge, AddEdge: the RefIdentity is src's last consumer
    link(src, ident.ins[0])
    link(ident.outs[0], anchor)
    link(ident.outs[0], ref.ins[0])
    link_ctrl(n, ref)
    changes.append(Change("inserted", ident.name, ident.type, n.graph.name, RULE_REF_IDENTITY,
                          {"variable": var.name, "input": f"{n.name}:{i}"}))
    changes.append(Change("inserted", ref.name, ref.type, n.graph.name, RULE_REF,
                          {"variable": var.name, "writer": f"{n.name}:{i}", **_chain_facts(var, chain, policy)}))
