"""Attributes older GE did not serialize, derived as GE derives them (import/ge-dump.yaml).

Note [derived graph attributes]: GE's DynamicShapePartitioner and MarkGraphUnknownStatusPass
set a graph's `_graph_unknown_flag` together with `OwnerGraphIsUnknown` on every direct
node of that graph (same value), and mark a PartitionedCall of an unknown-shape cluster
with `_is_unknown_shape`; a root partitioned for dynamic shapes is unknown. A dump that
lacks the graph flag still carries those, so each source listed in the table is tried
in order and the first that answers gives the value; the derivation is a note.
"""
from __future__ import annotations

from pathlib import Path

from engine.core.attrs import attr_value, set_attr
from engine.core.errors import Collector, Loc
from engine.core.importers.tables import find_table
from engine.core.schema import Reader
from engine.core.yamlloc import load_yaml

SOURCES = ("nodes", "parent", "root_graph")


def _read(path: Path):
    raw = load_yaml(path)
    errors = Collector()
    file = str(path)
    r = Reader(raw, file, errors, Loc(file, 1, 1))
    entries = r.get("derive", list, [], required=True)
    r.done()
    out = []
    for item in entries:
        e = Reader(item, "derive entry", errors, Loc(file))
        attr = str(e.get("graph_attr", str, "", required=True))
        srcs = []
        for s in e.get("from", list, [], required=True):
            sr = Reader(s, f"derive {attr}: source", errors, Loc(file))
            found = [k for k in SOURCES if k in (s if isinstance(s, dict) else {})]
            if len(found) != 1:
                errors.error(getattr(s, "loc", Loc(file)), f"derive {attr}: a source names one of {', '.join(SOURCES)}",
                             "e.g. - nodes: OwnerGraphIsUnknown")
            for k in SOURCES:
                v = sr.get(k, str)
                if v is not None:
                    srcs.append((k, str(v)))
            sr.done()
        e.done()
        out.append((attr, srcs))
    errors.check()
    return out


def derive_attrs(model, pack_dir: Path, notes: list) -> None:
    path = find_table(pack_dir, "ge-dump.yaml")
    if path is None:
        return
    root = model.root
    for attr, srcs in _read(path):
        for g in model.graph_order:
            if attr in g.proto.attr:
                continue
            for kind, key in srcs:
                value, where = _source(model, g, root, kind, key)
                if value is None:
                    continue
                set_attr(g.proto.attr, attr, bool(value), "b")
                notes.append(("derived", f"graph '{g.name}': {attr} = {str(bool(value)).lower()}, not in the dump; "
                                         f"derived from {where} as GE sets them together"))
                break


def _source(model, g, root, kind: str, key: str):
    if kind == "nodes":
        # read through the node (a lean node is not decoded: Note [lean ops] in engine/core/lean.py)
        vals = [attr_value(n.attr(key)) for n in g.nodes() if n.has_attr(key)]
        if vals:
            return any(bool(v) for v in vals), f"{key} on its {len(vals)} node(s)"
    elif kind == "parent":
        p = g.parent_node
        if p is not None and p.has_attr(key):
            return bool(attr_value(p.attr(key))), f"{key} of its parent node '{p.name}'"
    elif kind == "root_graph":
        if g is root and key in g.proto.attr and attr_value(g.proto.attr[key]):
            return True, f"the root graph's {key}"
    return None, ""


def fill_port_names(model, pack_dir: Path, pack, notes: list) -> None:
    """A dump node of a ref op (an output named as an input) with no port names on a side
    gets GE's IR names for that side (import/ir.yaml, else the pack's op signature): the
    names are the ref mechanism, and older dumps and GE's ONNX form drop them. Other ops
    are left as dumped. Noted per op type and source."""
    from engine.core.importers.tables import Tables, ir_with_pack, read_ir
    ir_path = find_table(pack_dir, "ir.yaml")
    ir = ir_with_pack(Tables("ge", "", None, read_ir(ir_path) if ir_path else {}), pack)
    filled: dict[tuple[str, str], int] = {}
    refs: dict[str, object] = {}        # op type → its spec when a ref op, else None (once per type)
    for g in model.graph_order:
        for n in g.nodes():
            spec = refs.get(n.type, refs)
            if spec is refs:
                spec = ir.get(n.type)
                spec = refs[n.type] = spec if spec is not None and spec.is_ref() else None
            if spec is None:
                continue
            ins, outs = n.ports()
            k_in, k_out = n.desc_count(), n.desc_count(outputs=True)
            new_in = spec.input_names(k_in) if not ins and k_in else None
            new_out = spec.output_names(k_out) if not outs and k_out else None
            if new_in or new_out:
                n.set_ports(new_in, new_out)
                key = (n.type, "GE's IR (import/ir.yaml)" if spec.source == "ir" else "the pack's op signature")
                filled[key] = filled.get(key, 0) + 1
    for (op_type, source), count in sorted(filled.items()):
        notes.append(("ports", f"{count} {op_type} node(s) had no port names in the dump: named from {source}"))
