"""Reading GE attributes (AttrDef) as plain Python values."""
from __future__ import annotations

from typing import Any

from engine.proto import ge_ir_pb2 as pb

ENGINE_ATTR = "_ge_attr_op_kernel_lib_name"
PARENT_INDEX_ATTR = "_parent_node_index"


def attr_value(a: pb.AttrDef | None) -> Any:
    """An AttrDef as a plain Python value (lists by their val_type field)."""
    if a is None:
        return None
    which = a.WhichOneof("value")
    if which is None:
        return None
    if which in ("s", "expression"):
        return getattr(a, which).decode("utf-8", "replace")
    if which == "bt":
        return a.bt
    if which in ("i", "f", "b", "dt"):
        return getattr(a, which)
    if which == "list":
        lv = a.list
        for f in ("s", "i", "f", "b", "dt", "bt", "td", "t", "g", "na"):
            vals = getattr(lv, f)
            if len(vals):
                if f == "s":
                    return [v.decode("utf-8", "replace") for v in vals]
                return list(vals)
        return []
    if which == "list_list_int":
        return [list(x.list_i) for x in a.list_list_int.list_list_i]
    if which == "list_list_float":
        return [list(x.list_f) for x in a.list_list_float.list_list_f]
    return getattr(a, which)


def _node_of(x):
    if x is None:
        return None
    return x if hasattr(x, "op") else getattr(x, "node", None)


def node_attr(node, key: str) -> Any:
    n = _node_of(node)
    if n is None or key not in n.op.attr:
        return None
    return attr_value(n.op.attr[key])


def desc_attr(anchor, key: str) -> Any:
    if anchor is None:
        return None
    d = anchor.desc
    if d is None or key not in d.attr:
        return None
    return attr_value(d.attr[key])
