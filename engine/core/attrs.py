"""GE attribute values (AttrDef) ⇄ plain Python values: the one codec.

Reading: `attr_value` (any AttrDef), `node_attr`/`desc_attr` (by key), `typed_attr`
(by key, only when the stored kind is the one asked for, as GE's AttrUtils::GetStr
and friends). Writing: `write_attr`, `set_attr`.

Value set, by kind (the AttrDef field; `list_*` are ListValue fields):

    s   str            i   int           f   float          b   bool
    dt  int (a DataType, written only when asked: kind="dt")  bt  bytes
    list_s / list_i / list_f / list_b / list_dt / list_bt     lists of those
    list_list_int  [[int]]                 list_list_float  [[float]]
    t / td / g / func / ...                the protobuf message itself (read only)

Note [list kinds]: a Python list does not say the kind of an empty list (GE dumps
carry empty string lists, e.g. `_datadump_original_op_names`); give `kind=` then.
Without it an empty list is a list of ints, GE's own default.
"""
from __future__ import annotations

import os
from typing import Any

from engine.core.lean import (_SHARED_MAX, entry_of, interned, lean_attr, lean_entry, lean_keys, set_lean_entry,
                              shared_attr)
from engine.proto import ge_ir_pb2 as pb

_LV = pb.AttrDef.ListValue
LIST_FIELDS = ("s", "i", "f", "b", "dt", "bt", "td", "t", "g", "na")
_LIST_TYPES = {"s": _LV.VT_LIST_STRING, "i": _LV.VT_LIST_INT, "f": _LV.VT_LIST_FLOAT, "b": _LV.VT_LIST_BOOL,
               "bt": _LV.VT_LIST_BYTES, "dt": _LV.VT_LIST_DATA_TYPE}
KINDS = ("s", "i", "f", "b", "dt", "bt") + tuple("list_" + k for k in _LIST_TYPES) + \
    ("list_list_int", "list_list_float")


# ---- reading --------------------------------------------------------------------
def attr_value(a: pb.AttrDef | None) -> Any:
    """An AttrDef as a plain Python value (a list by its first non-empty field)."""
    if a is None:
        return None
    which = a.WhichOneof("value")
    if which is None:
        return None
    if which in ("s", "expression"):
        return getattr(a, which).decode("utf-8", "replace")
    if which == "list":
        lv = a.list
        for f in LIST_FIELDS:
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


def attr_kind(a: pb.AttrDef | None) -> str | None:
    """Which AttrDef field holds the value ("s", "i", "list", "t", ...), or None."""
    return None if a is None else a.WhichOneof("value")


def typed_attr(attrs, key: str, *kinds: str) -> Any:
    """The value at `key` of an attribute map when it is stored as one of `kinds`, else None."""
    a = attrs.get(key) if key in attrs else None
    return attr_value(a) if attr_kind(a) in kinds else None


def node_typed(n, key: str, *kinds: str) -> Any:
    """typed_attr of a node's op attributes (a graph node's answered lean: Note [lean ops])."""
    if getattr(n, "is_node", None) is not True:
        return typed_attr(n.op.attr, key, *kinds)
    a = n.attr(key)
    return attr_value(a) if attr_kind(a) in kinds else None


def _node_of(x):
    if x is None:
        return None
    # Note [is_node]: graph nodes and anchors say which they are in a class attribute, a
    # lookup that cannot fail (hasattr on an anchor raises inside; these run millions of times)
    kind = getattr(x, "is_node", None)
    if kind is True:
        return x
    if kind is False:
        return x.node
    return x if hasattr(x, "op") else getattr(x, "node", None)


# Note [attribute key sets]: the passes ask a node for attributes millions of times and
# nearly always for one it does not carry (97 % of attr_true's calls on a training step);
# each ask is two upb reads (the map, then the key, 0.5-0.8 us at 100k nodes). A node keeps
# the set of its op's attribute keys once read (`Node.akeys`), interned, so the few dozen
# distinct sets of a graph are shared and a node pays one pointer. The set is only a
# filter: values are still read from the op. Whatever adds or deletes an attribute of a
# graph node's op calls attrs_changed(node) (set_node_attr does both); an op not yet in a
# node needs nothing. MEMCONFLICT_VERIFY_CACHES=1 checks every read against the op
# (tests/test_attr_keys.py runs the pipeline so), which catches a write that forgot to.
_KEYSETS: dict[frozenset, frozenset] = {}
_KEYSETS_MAX = 1 << 16       # interning is a saving only: a graph of unique key sets resets it
VERIFY_CACHES = os.environ.get("MEMCONFLICT_VERIFY_CACHES") == "1"
_SHADOW: dict = {}           # verify mode: node → the key set a cached read would use


def attr_keys(n) -> frozenset:
    """The attribute keys of graph node `n`'s op (Note [attribute key sets])."""
    ks = n.akeys
    if ks is None:
        op = n._op
        ks = interned(_KEYSETS, frozenset(op.attr) if op is not None else lean_keys(n), _KEYSETS_MAX)
        if VERIFY_CACHES:
            held = _SHADOW.get(n)
            if held is not None and held != ks:
                raise AssertionError(f"node {n.name}: its op's attribute keys changed without attrs_changed "
                                     f"(added {sorted(ks - held)}, removed {sorted(held - ks)})")
            _SHADOW[n] = ks          # n.akeys stays None, so every read comes here
        else:
            n.akeys = ks
    return ks


def attrs_changed(n) -> None:
    """An attribute of graph node `n`'s op was added or deleted (Note [attribute key sets])."""
    n.akeys = None
    if VERIFY_CACHES:
        _SHADOW.pop(n, None)


def set_node_attr(node, key: str, value: Any, kind: str | None = None) -> None:
    """set_attr on a graph node's op (a lean node's entries: Note [lean attribute writes])."""
    if node._op is None:
        a = pb.AttrDef()
        write_attr(a, value, kind)
        if set_lean_entry(node, key, a.SerializeToString(deterministic=True)):
            attrs_changed(node)
            return
    write_attr(node.op.attr[key], value, kind)
    attrs_changed(node)


def attr_def(n, key: str):
    """The AttrDef at `key` of graph node `n`, which carries it (a lean node's is shared and
    read only: Note [lean ops])."""
    op = n._op
    return op.attr[key] if op is not None else lean_attr(n, key)


# Note [attribute values]: the passes read a few attributes of every node again and again
# (the kernel library behind engine(node), once per node in several passes), and each read
# of a lean node found its shared AttrDef and decoded it afresh (~1.5 us). A scalar value
# (str, int, float, bool) is kept by the attribute entry's bytes, which a lean node's reads
# find first: the entry is what the value is made from (a write puts a new entry in
# its place, Note [lean attribute writes], or decodes the node, whose op is read from then
# on). A list is made anew for
# each read, as the caller may change it. Verify mode checks every kept value.
_VALUES: dict[bytes, Any] = {}
_SCALARS = (str, int, float, bool)
_MISS = object()


def node_value(n, key: str) -> Any:
    """attr_value(attr_def(n, key)) of graph node `n` (Note [attribute values])."""
    if n._op is None:
        raw = lean_entry(n, key)
        if raw is not None:
            v = _VALUES.get(raw, _MISS)
            if v is _MISS:
                v = attr_value(shared_attr(entry_of(raw)[1]))
                if type(v) in _SCALARS:
                    if len(_VALUES) >= _SHARED_MAX:
                        _VALUES.clear()
                    _VALUES[raw] = v
            elif VERIFY_CACHES and v != attr_value(attr_def(n, key)):
                raise AssertionError(f"node {n.name}: the kept value of {key} differs from its attribute")
            return v
    return attr_value(attr_def(n, key))


def node_attr(node, key: str) -> Any:
    kind = getattr(node, "is_node", None)       # _node_of, inline (see Note [is_node])
    n = node if kind is True else node.node if kind is False else _node_of(node)
    if n is None:
        return None
    if kind is not None:        # the key set first, a lean node read lean
        return node_value(n, key) if key in (n.akeys or attr_keys(n)) else None
    attrs = n.op.attr           # one map access (each costs as much as the lookup)
    return attr_value(attrs[key]) if key in attrs else None


def desc_attr(anchor, key: str) -> Any:
    if anchor is None:
        return None
    d = anchor.desc
    if d is None:
        return None
    attrs = d.attr
    return attr_value(attrs[key]) if key in attrs else None


# ---- writing --------------------------------------------------------------------
def set_attr(attrs, key: str, value: Any, kind: str | None = None) -> None:
    """`attrs[key] = value` in an attribute map (OpDef.attr, TensorDescriptor.attr, ...)."""
    write_attr(attrs[key], value, kind)


def write_attr(a: pb.AttrDef, value: Any, kind: str | None = None) -> None:
    """Store `value` in `a`, replacing what it held. `kind` (one of KINDS) forces the
    field; by default it follows the Python type (bool, int, float, str, bytes, a list of
    one of those, a list of lists of numbers). Raises ValueError for anything else."""
    kind = kind or value_kind(value)
    a.Clear()
    if kind in ("s", "i", "f", "b", "dt", "bt"):
        setattr(a, kind, value.encode() if kind == "s" else value)
    elif kind in ("list_list_int", "list_list_float"):
        rows, name, conv = ((a.list_list_int.list_list_i, "list_i", int) if kind == "list_list_int"
                            else (a.list_list_float.list_list_f, "list_f", float))
        getattr(a, kind).SetInParent()
        for row in value:
            getattr(rows.add(), name).extend(conv(x) for x in row)
    elif kind.startswith("list_") and kind[5:] in _LIST_TYPES:
        field = kind[5:]
        getattr(a.list, field).extend(x.encode() if field == "s" else x for x in value)
        a.list.val_type = _LIST_TYPES[field]
    else:
        raise ValueError(f"unknown attribute kind '{kind}' (expected one of: {', '.join(KINDS)})")


def value_kind(value: Any) -> str:
    """The AttrDef kind a plain Python value is written as (see the module doc)."""
    scalar = _scalar_kind(value)
    if scalar is not None:
        return scalar
    if isinstance(value, (list, tuple)):
        if value and all(isinstance(x, (list, tuple)) for x in value):
            cells = {_scalar_kind(x) for row in value for x in row}
            if cells <= {"i"}:
                return "list_list_int"
            if cells <= {"i", "f"}:
                return "list_list_float"
            raise ValueError("a list of lists must hold numbers only")
        kinds = {_scalar_kind(x) for x in value}
        if not kinds:
            return "list_i"
        if len(kinds) == 1 and None not in kinds:
            return "list_" + kinds.pop()
        if kinds == {"i", "f"}:
            return "list_f"
        raise ValueError("a list must hold one kind of value")
    raise ValueError(f"unsupported attribute value {value!r}")


def _scalar_kind(value: Any) -> str | None:
    if isinstance(value, bool):
        return "b"
    if isinstance(value, int):
        return "i"
    if isinstance(value, float):
        return "f"
    if isinstance(value, str):
        return "s"
    if isinstance(value, bytes):
        return "bt"
    return None
