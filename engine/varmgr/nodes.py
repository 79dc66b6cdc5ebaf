"""Reading variable facts from graph nodes (the thin adapter over engine.graph).

Attribute keys and op types come from the policy; nothing here names a GE op.
"""
from __future__ import annotations

from engine.core.attrs import typed_attr
from engine.core.graph import Node
from engine.varmgr import getypes as t
from engine.varmgr.desc import TensorDesc, desc_from_proto
from engine.varmgr.policy import VarPolicy
from engine.varmgr.records import INT64_MAX, Status, VarError, VarOp


def output_desc(node: Node, policy: VarPolicy, idx: int = 0) -> TensorDesc | None:
    descs = node.op.output_desc
    return desc_from_proto(descs[idx], policy.attrs.init_value) if idx < len(descs) else None


def is_ref_node(node: Node, policy: VarPolicy) -> bool:
    return typed_attr(node.op.attr, policy.attrs.ref_var_src_var_name, "s") is not None


def name_for_var_manager(node: Node | None, policy: VarPolicy) -> str:
    """GetNameForVarManager: `_src_const_name` when non-empty, else the op name."""
    if node is None:
        return ""
    alias = typed_attr(node.op.attr, policy.attrs.src_const_name, "s")
    return alias if alias else node.name


def memory_type_of(node: Node, policy: VarPolicy) -> int:
    sel = policy.memory_type_selection
    value = typed_attr(node.op.attr, sel.attr, "i")
    for key, name in sel.values:
        if value == key:
            return policy.rt(name)
    return policy.rt(sel.default)


def var_op(node: Node, policy: VarPolicy, desc: TensorDesc | None = None) -> VarOp:
    attrs, names = node.op.attr, policy.attrs
    weight = typed_attr(attrs, names.weights, "t")
    path = ""
    for key in names.file_path:
        path = typed_attr(attrs, key, "s") or ""
        if path:
            break
    ext = None
    if node.type in policy.op_types.const_place_holder:
        ext = typed_attr(attrs, names.external_address, "i")
        if policy.external is not None:          # GetConstPlaceHolderAddr's checks (engine/varmgr/external.py)
            from engine.varmgr.external import const_place_holder_addr
            ext, _ = const_place_holder_addr(node, policy.external.place_holder)
    inner = 0
    if node.op.output_desc:
        inner = typed_attr(node.op.output_desc[0].attr, names.inner_offset, "i") or 0
    return VarOp(node.name, node.type, desc if desc is not None else output_desc(node, policy),
                 weight=None if weight is None else bytes(weight.data), file_path=path,
                 file_offset=typed_attr(attrs, names.file_offset, "i") or 0, external_address=ext,
                 output_offsets=tuple(node.op.output_i), inner_offset=inner)


def node_var_size(node: Node, desc: TensorDesc, policy: VarPolicy, padding: int) -> int:
    """GetSizeByNodeType (§7 step 5)."""
    types = policy.op_types
    if desc.dtype == t.DT_STRING:
        if node.type in types.string_weight:
            weight = typed_attr(node.op.attr, policy.attrs.weights, "t")
            if weight is None:
                raise VarError(Status.FAILED, f"node: {node.name} get size failed: DT_STRING constant "
                               f"has no '{policy.attrs.weights}' tensor", node.name)
            return len(weight.data)
        length = typed_attr(node.op.attr, policy.attrs.file_length, "i")
        if node.type in types.string_length and length is not None:
            return length
    count = desc.shape_size()
    if count < 0:
        raise VarError(Status.FAILED, f"[Get][TensorMemorySize] In Bytes failed for op:{node.name}"
                       f"({node.type}): shape {list(desc.dims)} has an unknown dimension", node.name)
    nbytes = t.tensor_bytes(desc.dtype, count)
    if nbytes is None:
        raise VarError(Status.FAILED, f"[Get][TensorMemorySize] In Bytes failed for op:{node.name}"
                       f"({node.type}): data type {t.dtype_serial(desc.dtype)} has no fixed size", node.name)
    size = policy.size_rule.size_of(nbytes, padding)
    if size > INT64_MAX:
        raise VarError(Status.FAILED, f"variable '{node.name}': tensor size overflows int64 (shape "
                       f"{list(desc.dims)} of {t.dtype_serial(desc.dtype)} is {nbytes} bytes)", node.name)
    return size
