"""How a pass builds the node it inserts: type, name template, ports, tensor
descriptors and attributes, all declared in the pack (`insert:` blocks)."""
from __future__ import annotations

import string
from dataclasses import dataclass
from typing import Any

from engine.core.errors import Cite, Collector, Loc, did_you_mean
from engine.core.attrs import attr_kind, attr_value, node_typed, set_attr, set_node_attr
from engine.core.graph import Graph, Node
from engine.core.surgery import make_op
from engine.proto import ge_ir_pb2 as pb
from engine.core.schema import Reader, str_list

NAME_FIELDS = ("src", "dst", "n", "idx", "out", "graph")


@dataclass(frozen=True, slots=True)
class InsertSpec:
    type: str
    name: str                       # template, fields: {src} {dst} {n} {idx} {out} {graph}
    counter: str                    # which run-wide counter {n} draws from
    inputs: tuple[str, ...]         # port names (a single name gets an index suffix when multi-IO)
    outputs: tuple[str, ...]
    keep_desc_attrs: tuple[str, ...] | None   # None = keep all descriptor attributes (minus drop)
    set_attrs: tuple[tuple[str, Any], ...]    # (key, bool/int/str value)
    copy_nonempty_from_src: tuple[str, ...]
    loc: Loc
    copy_from_dst: tuple[str, ...] = ()            # copied from the consumer side when present
    move_flag_from_dst: tuple[str, ...] = ()       # bool true on the consumer → false there, true here
    move_flag_from_src: tuple[str, ...] = ()       # bool true on the producer → false there, true here
    drop_desc_attrs: tuple[str, ...] = ()
    end: Loc | None = None                         # where the `insert:` mapping ends
    # the descriptor fields the copy clears (TensorUtils::SetReuseInput, SetReuseInputIndex):
    # GE's insertion sites differ (desc.reset)
    reset_desc_fields: tuple[str, ...] = ("reuse_input", "reuse_input_index")

    def cite(self, rule_id: str) -> Cite:
        """The insert block, cited for the node it builds."""
        return Cite(rule_id, self.loc, self.end or self.loc)

    def attr_reasons(self) -> dict:
        return {k: f"set by the insert rule ({self.loc.file}:{self.loc.line})" for k, _ in self.set_attrs}


def load_insert_spec(value: Any, what: str, errors: Collector, fallback: Loc) -> InsertSpec | None:
    r = Reader(value, what, errors, fallback)
    typ = r.get("type", str, "", required=True)
    name = r.get("name", str, "", required=True)
    counter = r.get("counter", str, "")
    inputs = str_list(r.get("inputs", list, ["x"]), f"{what}: inputs", errors, r.loc)
    outputs = str_list(r.get("outputs", list, ["y"]), f"{what}: outputs", errors, r.loc)
    desc = Reader(r.get("desc", dict, {}), f"{what}: desc", errors, r.loc)
    keep = desc.get("keep_attrs", (list, str), "all")
    extra_drop = tuple(map(str, str_list(desc.get("drop_attrs", list, []), f"{what}: desc.drop_attrs", errors, r.loc)))
    reset = desc.get("reset", list, list(RESETTABLE))
    reset = tuple(map(str, str_list(reset, f"{what}: desc.reset", errors, r.loc)))
    for k in reset:
        if k not in RESETTABLE:
            errors.error(desc.value_loc("reset"), f"{what}: desc.reset: unknown field '{k}'",
                         did_you_mean(k, RESETTABLE, "fields"))
    desc.done()
    keep_attrs = None if keep == "all" else tuple(map(str, str_list(keep, f"{what}: desc.keep_attrs", errors, r.loc)))
    sets = r.get("set_attrs", dict, {})
    set_attrs = []
    for k, v in (sets or {}).items():
        if not isinstance(v, (bool, int, str)):
            errors.error(sets.value_locs[k], f"{what}: set_attrs value for '{k}' must be a bool, int or string", "")
            continue
        set_attrs.append((str(k), v))
    copy = str_list(r.get("copy_nonempty_from_src", list, []), f"{what}: copy_nonempty_from_src", errors, r.loc)
    extra = {k: tuple(map(str, str_list(r.get(k, list, []), f"{what}: {k}", errors, r.loc)))
             for k in ("copy_from_dst", "move_flag_from_dst", "move_flag_from_src")}
    extra["drop_desc_attrs"] = extra_drop
    extra["reset_desc_fields"] = reset
    r.done()
    if name:
        try:
            fields = [f for _, f, _, _ in string.Formatter().parse(name) if f is not None]
        except ValueError as exc:
            errors.error(r.value_loc("name"), f"{what}: bad name template: {exc}", "use {src}, {n}, {idx}, ...")
            fields = []
        for f in fields:
            if f not in NAME_FIELDS:
                errors.error(r.value_loc("name"), f"{what}: unknown name field '{{{f}}}'",
                             did_you_mean(f, NAME_FIELDS, "name fields"))
        if "n" in fields and not counter:
            errors.error(r.value_loc("name"), f"{what}: the name uses {{n}} but no `counter:` is given",
                         "add `counter: <name>` (the run-wide counter {n} draws from)")
    if not typ or not name:
        return None
    return InsertSpec(str(typ), str(name), str(counter), tuple(map(str, inputs)), tuple(map(str, outputs)),
                      keep_attrs, tuple(set_attrs), tuple(map(str, copy)), r.loc, **extra,
                      end=getattr(value, "end", None))


def port_names(base: tuple[str, ...], count: int) -> list[str]:
    """`(x,)` with 1 port → [x]; with n ports → [x0..x(n-1)]; explicit lists are used as given."""
    if len(base) == count:
        return list(base)
    if len(base) == 1:
        return [f"{base[0]}{i}" for i in range(count)] if count > 1 else [base[0]]
    return [f"{base[0] if base else 'p'}{i}" for i in range(count)]


RESETTABLE = ("reuse_input", "reuse_input_index")


def clean_desc(src: pb.TensorDescriptor | None, keep: tuple[str, ...] | None,
               drop: tuple[str, ...] = (), reset: tuple[str, ...] = RESETTABLE) -> pb.TensorDescriptor:
    d = pb.TensorDescriptor()
    if src is not None:
        d.CopyFrom(src)
    for k in drop:
        if k in d.attr:
            del d.attr[k]
    if keep is not None:
        for k in [k for k in d.attr if k not in keep]:
            del d.attr[k]
        d.ClearField("attr_groups")
    if "reuse_input" in reset:
        d.reuse_input = False
    if "reuse_input_index" in reset:
        d.reuse_input_index = 0
    return d


def build_op(ctx, spec: InsertSpec, graph: Graph, descs: list[pb.TensorDescriptor | None],
             src: Node | None, fields: dict[str, Any], *, out_descs: list | None = None,
             in_names: list[str] | None = None, out_names: list[str] | None = None) -> pb.OpDef:
    """A new OpDef per `spec`: inputs described by `descs`, outputs by `out_descs`
    (default: the same), ports named from the spec unless names are given."""
    out_descs = descs if out_descs is None else out_descs
    in_names = port_names(spec.inputs, len(descs)) if in_names is None else in_names
    out_names = port_names(spec.outputs, len(out_descs)) if out_names is None else out_names
    fields = dict(fields)
    fields.setdefault("graph", graph.name)
    fields.setdefault("src", src.name if src is not None else "")
    keep, drop, reset = spec.keep_desc_attrs, spec.drop_desc_attrs, spec.reset_desc_fields
    op = make_op(_unique_name(ctx, spec, graph, fields), spec.type, [clean_desc(d, keep, drop, reset) for d in descs],
                 [clean_desc(d, keep, drop, reset) for d in out_descs], in_names, out_names, model=graph.model)
    for key, value in spec.set_attrs:
        set_attr(op.attr, key, value)
    copy_from_src(op, spec, src)
    return op


def copy_from_src(op: pb.OpDef, spec: InsertSpec, src: Node | None) -> None:
    """GE CopyAttr's attributes taken from the producer when they are set and not empty."""
    if src is None:
        return
    for key in spec.copy_nonempty_from_src:
        if key in src.op.attr:
            a = src.op.attr[key]
            if attr_kind(a) == "s" and not attr_value(a):
                continue
            op.attr[key].CopyFrom(a)


def apply_neighbour_attrs(op: pb.OpDef, spec: InsertSpec, src: Node | None, dst: Node | None) -> None:
    """GE CopyAttr: attributes taken from the consumer, flags moved from either side."""
    if dst is not None:
        for key in spec.copy_from_dst:
            if key in dst.op.attr:
                op.attr[key].CopyFrom(dst.op.attr[key])
    for side, keys in ((dst, spec.move_flag_from_dst), (src, spec.move_flag_from_src)):
        if side is None:
            continue
        for key in keys:
            if node_typed(side, key, "b"):
                set_node_attr(side, key, False)
                set_attr(op.attr, key, True)


def _unique_name(ctx, spec: InsertSpec, graph: Graph, fields: dict[str, Any]) -> str:
    """Note [unique names]: GE's counters are process-wide, so its names never
    collide; a run on an already processed graph restarts them, so a name that is
    taken draws the next counter value (or gets a `_<k>` suffix without counter)."""
    while True:
        if spec.counter:
            fields["n"] = ctx.next_count(spec.counter)
        name = spec.name.format(**{k: fields.get(k, "") for k in NAME_FIELDS})
        if name not in graph.by_name:
            return name
        if not spec.counter:
            return ctx.model.unique_name(graph, name)
