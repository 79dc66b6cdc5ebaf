"""Building GE's IR (ge.proto OpDefs) from a frontend model: one `OpBuilder` per node,
edges by producer name, then one ModelDef. Shared by the importers."""
from __future__ import annotations

from dataclasses import dataclass, field

from engine.core.attrs import set_attr
from engine.core.graph import write_port_names
from engine.proto import ge_ir_pb2 as pb


@dataclass(slots=True)
class OpBuilder:
    """A node being built: data inputs as (producer, output index), control inputs by name."""
    name: str
    type: str
    inputs: list = field(default_factory=list)        # [(src name, idx)]; None = an unconnected slot
    ctrl: list = field(default_factory=list)          # [src name]
    n_out: int = 0
    attrs: dict = field(default_factory=dict)         # key → (value, kind)
    tensors: dict = field(default_factory=dict)       # key → pb.TensorDef
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
    for b in builders:
        if not b.alive:
            continue
        out_descs[b.name] = [make_desc(*b.out_desc.get(i, (0, None)), layout) for i in range(b.n_out)]
    ops = []
    for b in builders:
        if not b.alive:
            continue
        op = pb.OpDef(name=b.name, type=b.type, id=len(ops))
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
        for key, tensor in b.tensors.items():
            op.attr[key].t.CopyFrom(tensor)
        write_port_names(op, b.in_names, b.out_names)
        op.subgraph_name.extend(b.subgraphs)
        ops.append(op)
    return ops


def model_def(name: str, graphs: list[tuple[str, list[pb.OpDef]]]) -> pb.ModelDef:
    m = pb.ModelDef(name=name)
    for gname, ops in graphs:
        g = m.graph.add(name=gname)
        g.op.extend(ops)
    return m
