"""Reading variable facts from graph nodes (the thin adapter over engine.graph).

Attribute keys and op types come from the policy; nothing here names a GE op.
"""
from __future__ import annotations

from engine.core.attrs import attr_keys, node_typed
from engine.core.graph import Node, op_list
from engine.varmgr import getypes as t
from engine.varmgr.desc import TensorDesc, desc_from_proto
from engine.varmgr.policy import VarPolicy
from engine.varmgr.records import INT64_MAX, Status, VarError, VarOp


def output_desc(node: Node, policy: VarPolicy, idx: int = 0) -> TensorDesc | None:
    return desc_at(node, idx, policy.attrs.init_value, True)


# Note [descriptors by bytes]: the variable passes read the TensorDesc of the same few
# descriptors over and over (each variable's output, each consumer's, in variable_op, the
# placement, ...: at 100k nodes variable_op reads 16.5k, 45 % of the pass, and the table
# holds 190 after it). A lean node's descriptor is bytes, and desc_from_proto is a function of
# the descriptor alone, so its value is kept by the bytes (TensorDesc is frozen); one with an
# initial value (large, rarely shared) is read each time. Bounded like the shared decodings.
_BY_BYTES: dict[tuple[str, bytes], TensorDesc] = {}
_BY_BYTES_MAX = 1 << 16


def desc_at(node: Node, idx: int, init_attr: str, outputs: bool = True) -> TensorDesc | None:
    """desc_from_proto of the node's output (or input) descriptor `idx`, or None without one
    (Note [descriptors by bytes])."""
    raw = node.desc_bytes(idx, outputs)
    if raw is None:
        descs = node.descs(outputs)
        return desc_from_proto(descs[idx], init_attr) if 0 <= idx < len(descs) else None
    key = (init_attr, raw)
    desc = _BY_BYTES.get(key)
    if desc is None:
        desc = desc_from_proto(node.descs(outputs)[idx], init_attr)
        if desc.init_value is None:
            if len(_BY_BYTES) >= _BY_BYTES_MAX:
                _BY_BYTES.clear()
            _BY_BYTES[key] = desc
    return desc


def is_ref_node(node: Node, policy: VarPolicy) -> bool:
    return node_typed(node, policy.attrs.ref_var_src_var_name, "s") is not None


def name_for_var_manager(node: Node | None, policy: VarPolicy) -> str:
    """GetNameForVarManager: `_src_const_name` when non-empty, else the op name."""
    if node is None:
        return ""
    alias = node_typed(node, policy.attrs.src_const_name, "s")
    return alias if alias else node.name


def memory_type_of(node: Node, policy: VarPolicy) -> int:
    sel = policy.memory_type_selection
    value = node_typed(node, sel.attr, "i")
    for key, name in sel.values:
        if value == key:
            return policy.rt(name)
    return policy.rt(sel.default)


def var_op(node: Node, policy: VarPolicy, desc: TensorDesc | None = None) -> VarOp:
    """What VarManager reads from the node's OpDesc (one implementation: PlacedReader.var_op)."""
    return reader_for(policy).var_op(node, desc if desc is not None else output_desc(node, policy))


def reader_for(policy: VarPolicy) -> "PlacedReader":
    """The policy's PlacedReader, made once."""
    got = policy.derived.get("placed_reader")
    if got is None:
        got = policy.derived["placed_reader"] = PlacedReader(policy)
    return got


def node_var_size(node: Node, desc: TensorDesc, policy: VarPolicy, padding: int) -> int:
    """GetSizeByNodeType (§7 step 5)."""
    types = policy.op_types
    if desc.dtype == t.DT_STRING:
        if node.type in types.string_weight:
            weight = node_typed(node, policy.attrs.weights, "t")
            if weight is None:
                raise VarError(Status.FAILED, f"node: {node.name} get size failed: DT_STRING constant "
                               f"has no '{policy.attrs.weights}' tensor", node.name)
            return len(weight.data)
        length = node_typed(node, policy.attrs.file_length, "i")
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


class PlacedReader:
    """The per-node reads of the placement (is_ref_node, name_for_var_manager, memory_type_of,
    var_op) with the policy's keys looked up once per plan instead of once per node.

    Note [one attribute read]: each read goes to the attribute map once (`get`, then the
    stored kind), where `typed_attr` asks twice; a node without attributes (most variables)
    is answered without any map access. Results equal the functions above. A lean node is
    read lean (Note [lean ops]): the placement decodes none of the ops it reads or writes
    (Note [lean offset writes] in engine/core/graph.py).
    """

    def __init__(self, policy: VarPolicy):
        names, sel = policy.attrs, policy.memory_type_selection
        self.policy = policy
        self.ref_key, self.alias_key = names.ref_var_src_var_name, names.src_const_name
        self.mem_key = sel.attr
        self.mem_values = {key: policy.rt(name) for key, name in reversed(sel.values)}
        self.mem_default = policy.rt(sel.default)
        self.weights, self.file_path, self.file_offset = names.weights, names.file_path, names.file_offset
        self.ext_key, self.inner_key = names.external_address, names.inner_offset
        self.const_place_holder = policy.op_types.const_place_holder
        # GetConstPlaceHolderAddr's checks (engine/varmgr/external.py), when the pack has `external:`
        self.place_holder = policy.external.place_holder if policy.external is not None else None

    def head(self, node: Node) -> tuple[bool, str, int]:
        """(is a ref node, its VarManager name, its memory type)."""
        get = attr_getter(node)
        if get is None:
            return False, node.name, self.mem_default
        if _attr(get, self.ref_key, "s") is not None:
            return True, node.name, self.mem_default
        alias = _attr(get, self.alias_key, "s")
        name = alias.s.decode("utf-8", "replace") if alias is not None else ""
        mem = _attr(get, self.mem_key, "i")
        rt = self.mem_values.get(mem.i, self.mem_default) if mem is not None else self.mem_default
        return False, name or node.name, rt

    def inner_offset(self, td) -> int:
        """`_inner_offset` of an output descriptor (0 without one)."""
        attrs = td.attr
        a = attrs.get(self.inner_key) if attrs else None
        return a.i if a is not None and a.WhichOneof("value") == "i" else 0

    def var_op(self, node: Node, desc: TensorDesc, offsets: tuple[int, ...] | None = None,
               inner: int | None = None) -> VarOp:
        """var_op(node, policy, desc); `offsets` (the node's output offsets) and `inner` (output 0's
        inner offset) when the caller knows them."""
        if offsets is None:
            offsets = tuple(op_list(node, "output_i"))
        if inner is None:
            outs = node.descs(True)
            inner = self.inner_offset(outs[0]) if outs else 0
        get = attr_getter(node)
        if get is None:
            return VarOp(node.name, node.type, desc, output_offsets=offsets, inner_offset=inner)
        weight = _attr(get, self.weights, "t")
        path = ""
        for key in self.file_path:
            a = _attr(get, key, "s")
            path = a.s.decode("utf-8", "replace") if a is not None else ""
            if path:
                break
        ext = None
        if node.type in self.const_place_holder:
            a = _attr(get, self.ext_key, "i")
            ext = a.i if a is not None else None
            if self.place_holder is not None:
                from engine.varmgr.external import const_place_holder_addr
                ext, _ = const_place_holder_addr(node, self.place_holder)
        off = _attr(get, self.file_offset, "i")
        return VarOp(node.name, node.type, desc, weight=None if weight is None else bytes(weight.t.data),
                     file_path=path, file_offset=off.i if off is not None else 0, external_address=ext,
                     output_offsets=offsets, inner_offset=inner)


def attr_getter(node: Node):
    """`key → AttrDef or None` of the node's attributes, or None when it has none: a
    decoded op's map `get`, a lean node's `Node.attr` (read only: shared, Note [lean ops])."""
    op = node._op
    if op is not None:
        attrs = op.attr
        return attrs.get if attrs else None
    return node.attr if node.akeys or attr_keys(node) else None


def _attr(get, key: str, kind: str):
    """The AttrDef `get(key)` when it holds `kind`, else None (one map access)."""
    a = get(key)
    return a if a is not None and a.WhichOneof("value") == kind else None
