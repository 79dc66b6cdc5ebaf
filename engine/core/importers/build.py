"""Building GE's IR (ge.proto OpDefs) from a frontend model: one `OpBuilder` per node,
edges by producer name, then one ModelDef. Shared by the importers."""
from __future__ import annotations

from dataclasses import dataclass, field

from google.protobuf import text_format
from google.protobuf.message import DecodeError

from engine.core.attrs import set_attr
from engine.core.errors import InputError, Loc, Problem
from engine.proto import ge_ir_pb2 as pb


@dataclass(slots=True)
class OpBuilder:
    """A node being built: data inputs as (producer, output index), control inputs by name."""
    name: str
    type: str
    inputs: list = field(default_factory=list)        # [(src name, idx)]; None = an unconnected slot
    ctrl: list = field(default_factory=list)          # [src name]
    n_out: int = 0
    attrs: dict = field(default_factory=dict)         # key → (value, kind), written by set_attr
    op: pb.OpDef | None = None                        # attributes already written, when given
    out_desc: dict = field(default_factory=dict)      # idx → (dtype, dims | None)
    in_names: list | None = None
    out_names: list | None = None
    subgraphs: list = field(default_factory=list)
    alive: bool = True


def make_desc(dtype: int, dims, layout: str) -> pb.TensorDescriptor:
    d = pb.TensorDescriptor(dtype=dtype, layout=layout)
    if dims is not None:
        d.shape.dim.extend(dims)
    return d


def to_opdefs(builders: list[OpBuilder], layout: str) -> list[pb.OpDef]:
    """OpDefs in builder order; input descriptors copy their producer's output one."""
    by_name = {b.name: b for b in builders if b.alive}
    out_descs: dict[str, list[pb.TensorDescriptor]] = {}
    protos: dict = {}             # (dtype, dims) → one descriptor, copied into every op that has it
    for b in builders:
        if not b.alive:
            continue
        descs = []
        for i in range(b.n_out):
            dtype, dims = b.out_desc.get(i, (0, None))
            key = (dtype, None if dims is None else tuple(dims))
            d = protos.get(key)
            if d is None:
                d = protos[key] = make_desc(dtype, dims, layout)
            descs.append(d)
        out_descs[b.name] = descs
    ops = []
    port_attrs: dict = {}
    for b in builders:
        if not b.alive:
            continue
        op = b.op if b.op is not None else pb.OpDef()
        op.name, op.type, op.id = b.name, b.type, len(ops)
        entries = []
        for item in b.inputs:
            if item is None:
                op.input_desc.add(layout=layout)
                entries.append("")
                continue
            src, idx = item
            op.input_desc.append(out_descs[src][idx])
            entries.append(f"{src}:{idx}")
        entries.extend(f"{c}:-1" for c in b.ctrl if c in by_name)
        op.input.extend(entries)
        op.output_desc.extend(out_descs[b.name])
        for key, (value, kind) in b.attrs.items():
            set_attr(op.attr, key, value, kind)
        _port_names(op, b.in_names, b.out_names, port_attrs)
        op.subgraph_name.extend(b.subgraphs)
        ops.append(op)
    return ops


_LIST_S, _LIST_I = pb.AttrDef.ListValue.VT_LIST_STRING, pb.AttrDef.ListValue.VT_LIST_INT


def _port_names(op: pb.OpDef, inputs, outputs, cache: dict) -> None:
    """What graph.write_port_names writes, one prebuilt AttrDef pair per name list (hot path)."""
    for side, names in ((0, inputs), (1, outputs)):
        if names:
            key = (side, tuple(names))
            pair = cache.get(key)
            if pair is None:
                k, v = pb.AttrDef(), pb.AttrDef()
                k.list.s.extend(n.encode() for n in names)
                k.list.val_type = _LIST_S
                v.list.i.extend(range(len(names)))
                v.list.val_type = _LIST_I
                pair = cache[key] = (k, v)
            keys = _PORT_KEYS[side]
            op.attr[keys[0]].CopyFrom(pair[0])
            op.attr[keys[1]].CopyFrom(pair[1])


_PORT_KEYS = (("_input_name_key", "_input_name_value"), ("_output_name_key", "_output_name_value"))


def model_def(name: str, graphs: list[tuple[str, list[pb.OpDef]]]) -> pb.ModelDef:
    m = pb.ModelDef(name=name)
    for gname, ops in graphs:
        g = m.graph.add(name=gname)
        g.op.extend(ops)
    return m


def parse_proto(msg, data: bytes, text: bool, file: str, what: str, text_hint: str, binary_hint: str,
                unknown_fields: bool = True, not_utf8: tuple[str, str] | None = None):
    """`msg` read from a model file's bytes, text format or binary, every error located:
    `malformed WHAT: ...` at the text's line and column, or at the file. `not_utf8` is the
    (message, hint) for a text file that is not UTF-8 (default: a malformed-WHAT error)."""
    try:
        if text:
            text_format.Parse(data.decode("utf-8"), msg, allow_unknown_field=unknown_fields)
        else:
            msg.ParseFromString(data)
    except text_format.ParseError as exc:
        raise InputError(Problem(Loc(file, exc.GetLine() or 0, exc.GetColumn() or 0),
                                 f"malformed {what}: {str(exc).split(' : ', 1)[-1]}", text_hint)) from None
    except UnicodeDecodeError as exc:
        if not_utf8 is not None:
            raise InputError(Problem(Loc(file), *not_utf8)) from None
        raise InputError(Problem(Loc(file), f"malformed {what}: {exc}", binary_hint)) from None
    except DecodeError as exc:
        raise InputError(Problem(Loc(file), f"malformed {what}: {exc}", binary_hint)) from None
    return msg
