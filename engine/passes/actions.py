"""Rewrite actions a rule's `do:` list calls: GE's graph edits, each leaving a
provenance record (ge-conflict-rules.md §2 for the surgery conventions).

The actions know anchors, nodes and the pack's `insert:` specs by name; what
to insert where is decided by the rules that call them. Every inserted node is
recorded as an `Insertion` naming the rule (id and file:line) and the facts
that decided it; attribute edits on existing nodes become `ATTR_SET` info
diagnostics, so a report shows what a pass changed without inserting.

Edit styles (GE has several, and they differ in observable ways):

* `insert_before` / `insert_after`: GraphUtils::InsertNodeBefore/After — the new
  node sits right after its producer with the producer's topo id; control edges
  move to it (§2); whitelisted attributes are inherited.
* `insert_between`: RemoveEdge + AddEdge + AddEdge (MemcpyAddrAsyncPass): the new
  node sits after its producer, no control edge moves, its input is appended to
  the producer's peer list.
* `insert_multi_after` / `insert_multi_before`: one multi-IO node added with
  ComputeGraph::AddNode (appended, id = node count) and wired with AddEdge /
  RemoveEdge (SubgraphPass's While-body copies).
* `add_node` + `link` / `link_ctrl`: a node built from scratch (the Assign after a
  broadcast), appended like AddNode.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.core import surgery, toposort
from engine.passes.context import Diagnostic, Insertion, anchor_ref
from engine.core.errors import Cite, PassFailure
from engine.core.graph import Graph, InAnchor, Node, OutAnchor, set_desc_attr, writable_desc
from engine.passes.insertion import InsertSpec, apply_neighbour_attrs, build_op
from engine.dsl.ast import dsl_literal
from engine.dsl.library import PrimSpec, register
from engine.core.attrs import attr_value, attrs_changed, write_attr
from engine.proto import ge_ir_pb2 as pb
from engine.passes.surgery_hooks import SurgeryHooks



@dataclass(frozen=True, slots=True)
class Why:
    """The rule firing while actions run: its id, the pack item and the decisive facts."""

    rule: str
    cite: Cite | None
    reason: dict


def _spec(name, arity, doc, sig):
    return name, PrimSpec(name, arity, doc, lambda ctx: None, sig, "edits")


# names, signatures and arities the pack loader checks `do:` lists against (bound per run)
ACTION_PRIMS: dict[str, PrimSpec] = register("actions", dict([
    _spec("insert_before", (2, 2), 'insert_before(in_anchor, "spec"): GE InsertNodeBefore; the new node',
          "(InAnchor, str) -> Node"),
    _spec("insert_after", (3, 3), 'insert_after(out_anchor, [in_anchors], "spec"): GE InsertNodeAfter; the new node',
          "(OutAnchor, list[InAnchor], str) -> Node"),
    _spec("insert_between", (3, 4),
          'insert_between(out_anchor, in_anchor, "spec"[, label_node]): RemoveEdge/AddEdge isolation; '
          "the spec's copy_from_dst/move_flag_from_dst read label_node (default the consumer)",
          "(OutAnchor, InAnchor, str, Node?) -> Node"),
    _spec("insert_multi_after", (2, 2),
          'insert_multi_after([out_anchors], "spec"): one node, x<i> fed by out_anchors[i], y<i> feeding all its consumers',
          "(list[OutAnchor], str) -> Node"),
    _spec("insert_multi_before", (2, 2),
          'insert_multi_before([in_anchors], "spec"): one node between each in_anchor and its producer, '
          "ports named after the input index", "(list[InAnchor], str) -> Node"),
    _spec("add_node", (3, 3), 'add_node("spec", desc_out_anchor, at_in_anchor): a new node (every port described '
          "like desc_out_anchor), named from both anchors, appended to at_in_anchor's graph",
          "(str, OutAnchor, InAnchor) -> Node"),
    _spec("link", (2, 2), "link(out_anchor, in_anchor): add a data edge (appended to the peer list)",
          "(OutAnchor, InAnchor) -> InAnchor"),
    _spec("link_ctrl", (2, 2), "link_ctrl(node, node or [nodes]): add control edges (existing ones are kept)",
          "(Node, Node | list[Node]) -> list[Node]"),
    _spec("add_ctrl", (2, 2), "add_ctrl(node, node or [nodes]): a control edge per listed node, where there is one "
          "already too (GE's LinkTo / AddEdge, which ask nothing: Note [repeated control edges])",
          "(Node, Node | list[Node]) -> list[Node]"),
    _spec("set_attr", (3, 3), "set_attr(node, key, value): set an op attribute (reported as ATTR_SET)",
          "(Node, str, any) -> Node"),
    _spec("append_attr", (3, 3), "append_attr(node, key, [values]): extend a list attribute (created if absent)",
          "(Node, str, list[any]) -> Node"),
    _spec("set_desc_attr", (3, 3), "set_desc_attr(anchor, key, value): set a tensor descriptor attribute",
          "(Anchor, str, any) -> Anchor"),
    _spec("set_desc_field", (3, 3), "set_desc_field(anchor, field, value): set a TensorDescriptor field (data_offset, ...)",
          "(Anchor, str, any) -> Anchor"),
    _spec("set_op_field", (3, 3), "set_op_field(node, field, [values]): replace a repeated OpDef field (is_input_const, ...)",
          "(Node, str, list[any]) -> Node"),
    _spec("topo_sort", (1, 1), "topo_sort(graph): GE TopologicalSorting (ids become positions)", "(Graph) -> Graph"),
]))

DESC_FIELDS = frozenset({"data_offset", "reuse_input", "reuse_input_index", "size", "real_dim_cnt"})
OP_FIELDS = frozenset({"is_input_const", "input_i", "output_i"})


class Rewriter:
    """The actions of one pass on one run, bound to the pass's insert specs."""

    def __init__(self, ctx, pass_id: str, inserts: dict[str, InsertSpec], hooks: SurgeryHooks):
        self.ctx = ctx
        self.pass_id = pass_id
        self.inserts = inserts
        self.hooks = hooks
        self.why = Why("", None, {})
        # whether an action may have edited the graph: any action but a sort that kept the
        # order (Note [handed-on symbol tables] in engine/passes/manager.py)
        self.changed = False

    def bound(self) -> dict[str, Any]:
        return {name: self._editing(getattr(self, name)) if name != "topo_sort" else self.topo_sort
                for name in ACTION_PRIMS}

    def _editing(self, action):
        def run(*args):
            self.changed = True
            return action(*args)
        return run

    # ---- helpers ------------------------------------------------------------------------
    def _spec_of(self, name: str) -> InsertSpec:
        spec = self.inserts.get(name)
        if spec is None:        # the loader checks literal names; this is a computed one
            raise PassFailure(self.pass_id, f"no insert spec named '{name}'")
        return spec

    def _fail(self, message: str, node: Node | None) -> None:
        raise PassFailure(self.pass_id, message, node.name if node is not None else None)

    def _op(self, spec: InsertSpec, graph: Graph, in_descs: list, out_descs: list, src: Node | None,
            fields: dict, in_names: list[str], out_names: list[str]) -> pb.OpDef:
        return build_op(self.ctx, spec, graph, in_descs, src, fields, out_descs=out_descs,
                        in_names=in_names, out_names=out_names)

    def _append(self, graph: Graph, op: pb.OpDef) -> Node:
        """ComputeGraph::AddNode: at the end, id = the node count before."""
        return surgery.add_node(graph, op)

    def _record(self, node: Node, spec: InsertSpec, producers: list, consumers: list, moved: list,
                extra: dict | None = None, isolated: str = "") -> None:
        attrs = spec.attr_reasons()
        for key in spec.copy_from_dst + spec.move_flag_from_dst + spec.move_flag_from_src:
            if key in node.op.attr:
                attrs[key] = "taken from the neighbouring node by the insert rule"
        reason = dict(self.why.reason)
        if extra:
            reason.update(extra)
        self.ctx.record(Insertion(
            name=node.name, type=node.type, graph=node.graph.name, pass_id=self.pass_id, rule=self.why.rule,
            cite=self.why.cite, producer=", ".join(anchor_ref(p) for p in producers if p is not None),
            consumers=tuple(anchor_ref(c) for c in consumers), reason=reason, attrs=attrs,
            moved_control=tuple(moved), isolated=isolated))

    def _diag(self, node: Node, message: str, details: dict) -> None:
        cite = self.why.cite
        d = {"node": node.name, "graph": node.graph.name, "rule": self.why.rule,
             "rule_loc": str(cite.loc) if cite is not None else None, "reason": dict(self.why.reason)}
        d.update(details)
        self.ctx.diagnostics.append(Diagnostic("ATTR_SET", "info", message, self.pass_id, d,
                                               (cite,) if cite is not None else ()))

    @staticmethod
    def _fields(src: OutAnchor | None, dst: InAnchor | None) -> dict:
        return {"src": src.node.name if src is not None else "", "out": src.idx if src is not None else "",
                "dst": dst.node.name if dst is not None else "", "idx": dst.idx if dst is not None else ""}

    # ---- actions ------------------------------------------------------------------------
    def insert_before(self, dst: InAnchor, spec_name: str) -> Node:
        spec = self._spec_of(spec_name)
        src = dst.peer
        op = self._op(spec, dst.node.graph, [src.desc if src else None], [src.desc if src else None],
                      src.node if src else None, self._fields(src, dst), *_ports(spec, 1, 1))
        apply_neighbour_attrs(op, spec, src.node if src else None, dst.node)
        keep = self.hooks.keep_in_ctrl
        moved = [p.name for p in dst.node.in_ctrl if not keep(p)]
        node = surgery.insert_before(dst, op, keep_ctrl=keep, inherit=self.hooks.inherit)
        self._record(node, spec, [src], [dst], moved, isolated="input")
        return node

    def insert_after(self, src: OutAnchor, dsts, spec_name: str) -> Node:
        spec = self._spec_of(spec_name)
        dsts = list(dsts or [])
        op = self._op(spec, src.node.graph, [src.desc], [src.desc], src.node,
                      self._fields(src, dsts[0] if dsts else None), *_ports(spec, 1, 1))
        apply_neighbour_attrs(op, spec, src.node, dsts[0].node if dsts else None)
        move = not self.hooks.keep_out_ctrl(src.node)
        moved = [s.name for s in src.node.out_ctrl] if move else []
        node = surgery.insert_after(src, dsts, op, move_ctrl=move, inherit=self.hooks.inherit)
        self._record(node, spec, [src], dsts, moved, isolated="output")
        return node

    def insert_between(self, src: OutAnchor, dst: InAnchor, spec_name: str, label: Node | None = None) -> Node:
        spec = self._spec_of(spec_name)
        if src is None or dst is None or dst.peer is not src:
            self._fail(f"cannot isolate {anchor_ref(dst)}: it is not fed by {anchor_ref(src)}",
                       dst.node if dst is not None else None)
        op = self._op(spec, src.node.graph, [src.desc], [src.desc], src.node, self._fields(src, dst),
                      *_ports(spec, 1, 1))
        apply_neighbour_attrs(op, spec, None, label if label is not None else dst.node)
        node = surgery.new_node(src.node.graph, op, src.node)
        node.ensure_inputs(1)
        node.ensure_outputs(1)
        surgery.unlink(src, dst)
        surgery.link(src, node.ins[0])
        surgery.link(node.outs[0], dst)
        self._record(node, spec, [src], [dst], [])
        return node

    def insert_multi_after(self, srcs, spec_name: str) -> Node | None:
        spec = self._spec_of(spec_name)
        srcs = [s for s in (srcs or []) if s is not None]
        if not srcs:
            return None
        graph = srcs[0].node.graph
        descs = [s.desc for s in srcs]
        labels = list(range(len(srcs)))
        op = self._op(spec, graph, descs, descs, srcs[0].node, self._fields(srcs[0], None),
                      *_ports(spec, len(srcs), len(srcs), labels))
        node = self._append(graph, op)
        node.ensure_inputs(len(srcs))
        node.ensure_outputs(len(srcs))
        consumers = []
        for i, s in enumerate(srcs):
            dsts = list(s.peers)
            surgery.link(s, node.ins[i])
            for d in dsts:
                surgery.unlink(s, d)
                surgery.link(node.outs[i], d)
            consumers.extend(dsts)
        self._record(node, spec, srcs, consumers, [])
        return node

    def insert_multi_before(self, dsts, spec_name: str) -> Node | None:
        spec = self._spec_of(spec_name)
        dsts = [d for d in (dsts or []) if d is not None]
        if not dsts:
            return None
        for d in dsts:
            if d.peer is None:
                self._fail(f"input {d.idx} has no producer to isolate", d.node)
        graph = dsts[0].node.graph
        descs = [d.desc for d in dsts]
        labels = [d.idx for d in dsts]
        srcs = [d.peer for d in dsts]
        op = self._op(spec, graph, descs, descs, dsts[0].node, self._fields(srcs[0], dsts[0]),
                      *_ports(spec, len(dsts), len(dsts), labels))
        node = self._append(graph, op)
        node.ensure_inputs(len(dsts))
        node.ensure_outputs(len(dsts))
        for i, (s, d) in enumerate(zip(srcs, dsts)):
            surgery.link(s, node.ins[i])
            surgery.unlink(s, d)
            surgery.link(node.outs[i], d)
        self._record(node, spec, srcs, dsts, [])
        return node

    def add_node(self, spec_name: str, desc_src: OutAnchor, at: InAnchor) -> Node:
        spec = self._spec_of(spec_name)
        d = desc_src.desc if desc_src is not None else None
        n_in, n_out = len(spec.inputs), len(spec.outputs)
        op = self._op(spec, at.node.graph, [d] * n_in, [d] * n_out, desc_src.node if desc_src else None,
                      self._fields(desc_src, at), list(spec.inputs), list(spec.outputs))
        node = self._append(at.node.graph, op)
        node.ensure_inputs(n_in)
        node.ensure_outputs(n_out)
        self._record(node, spec, [desc_src], [at], [])
        return node

    def link(self, src: OutAnchor, dst: InAnchor) -> InAnchor:
        if src is None or dst is None:
            self._fail("cannot link a missing anchor", dst.node if dst is not None else None)
        surgery.link(src, dst)
        return dst

    def link_ctrl(self, a: Node, bs, repeat: bool = False) -> list:
        targets = bs if isinstance(bs, (list, tuple)) else [bs]
        for b in targets:
            if a is not None and b is not None and a is not b:
                surgery.link_ctrl(a, b, repeat)
        return list(targets)

    def add_ctrl(self, a: Node, bs) -> list:
        return self.link_ctrl(a, bs, repeat=True)

    def set_attr(self, node: Node, key: str, value) -> Node:
        write_attr(node.op.attr[key], value)
        attrs_changed(node)
        self._diag(node, f"{node.name}: attribute {key} = {dsl_literal(value)}", {"attr": key, "value": value})
        return node

    def append_attr(self, node: Node, key: str, values) -> Node:
        old = attr_value(node.attr(key))
        new = (list(old) if isinstance(old, list) else []) + list(values or [])
        write_attr(node.op.attr[key], new)
        attrs_changed(node)
        self._diag(node, f"{node.name}: attribute {key} = {dsl_literal(new)}", {"attr": key, "value": new})
        return node

    def set_desc_attr(self, anchor, key: str, value):
        if anchor is None or not set_desc_attr(anchor, key, value):
            self._fail(f"no tensor descriptor for {anchor_ref(anchor)}", anchor.node if anchor is not None else None)
        side = "output" if anchor.is_out else "input"
        self._diag(anchor.node, f"{anchor.node.name}: {side} {anchor.idx} tensor attribute {key} = {dsl_literal(value)}",
                   {"anchor": f"{side}:{anchor.idx}", "attr": key, "value": value})
        return anchor

    def set_desc_field(self, anchor, field: str, value):
        d = writable_desc(anchor) if anchor is not None else None
        if d is None or field not in DESC_FIELDS:
            self._fail(f"cannot set field {field} of {anchor_ref(anchor)}", anchor.node if anchor is not None else None)
        setattr(d, field, value)
        side = "output" if anchor.is_out else "input"
        self._diag(anchor.node, f"{anchor.node.name}: {side} {anchor.idx} tensor {field} = {dsl_literal(value)}",
                   {"anchor": f"{side}:{anchor.idx}", "field": field, "value": value})
        return anchor

    def set_op_field(self, node: Node, field: str, values) -> Node:
        if field not in OP_FIELDS:
            self._fail(f"cannot set op field {field}", node)
        rep = getattr(node.op, field)
        del rep[:]
        rep.extend(values or [])
        self._diag(node, f"{node.name}: {field} = {dsl_literal(list(values or []))}", {"field": field, "value": list(values or [])})
        return node

    def topo_sort(self, graph: Graph) -> Graph:
        """ComputeGraph::TopologicalSorting (engine/core/toposort.py); a cycle fails the pass."""
        model = graph.model
        reorders = model.reorders
        cyclic = toposort.sort_model(model, graph)
        if model.reorders != reorders:
            self.changed = True
        if cyclic:
            raise PassFailure(self.pass_id, f"graph '{cyclic[0].name}' has a cycle; it cannot be sorted topologically")
        return graph


def _ports(spec: InsertSpec, n_in: int, n_out: int, labels: list | None = None) -> tuple[list, list]:
    """Port names: the spec's names as given for single-IO nodes; `<base><label>` per port otherwise."""
    def names(base: tuple[str, ...], n: int) -> list[str]:
        if labels is None:
            if len(base) == n:
                return list(base)
            labels_ = list(range(n))
        else:
            labels_ = labels
        stem = base[0] if base else "p"
        return [f"{stem}{k}" for k in labels_]
    return names(spec.inputs, n_in), names(spec.outputs, n_out)
