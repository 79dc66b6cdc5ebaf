"""Building small GE models for the tests (ModelDef messages -> engine.graph.Model)."""
from __future__ import annotations

from engine.core.dumpio import build_model
from engine.proto import ge_ir_pb2 as pb
from engine.varmgr import TensorDesc
from engine.varmgr.desc import desc_to_proto


def set_attr(attrs, key: str, value) -> None:
    a = attrs[key]
    if isinstance(value, bool):
        a.b = value
    elif isinstance(value, int):
        a.i = value
    elif isinstance(value, str):
        a.s = value.encode()
    elif isinstance(value, pb.TensorDef):
        a.t.CopyFrom(value)
    else:
        raise TypeError(value)


def tensor(data: bytes, desc: TensorDesc) -> pb.TensorDef:
    t = pb.TensorDef(data=data)
    desc_to_proto(desc, t.desc)
    return t


class GraphBuilder:
    def __init__(self, name: str = "g"):
        self.proto = pb.ModelDef(version=1)
        self.graphs = {name: self.proto.graph.add(name=name)}
        self.outs: dict[str, list[TensorDesc]] = {}

    def sub(self, name: str) -> "GraphBuilder":
        self.graphs[name] = self.proto.graph.add(name=name)
        return self

    def op(self, name: str, type_: str, inputs=(), outs=(TensorDesc(),), ins=None, attrs=None,
           out_attrs=None, graph: str | None = None, subgraphs=(), ports=None) -> pb.OpDef:
        g = self.graphs[graph] if graph else next(iter(self.graphs.values()))
        op = g.op.add(name=name, type=type_)
        data = [i for i in inputs if not i.endswith(":-1")]
        op.input.extend(data)
        op.input.extend(i for i in inputs if i.endswith(":-1"))
        for k, src in enumerate(data):
            if ins is not None:
                d = ins[k]
            else:
                sname, _, sidx = src.rpartition(":")
                d = self.outs[sname][int(sidx)]
            desc_to_proto(d, op.input_desc.add())
        for d in outs:
            desc_to_proto(d, op.output_desc.add())
        self.outs[name] = list(outs)
        for k, v in (attrs or {}).items():
            set_attr(op.attr, k, v)
        for idx, extra in (out_attrs or {}).items():
            for k, v in extra.items():
                set_attr(op.output_desc[idx].attr, k, v)
        op.subgraph_name.extend(subgraphs)
        if ports is not None:
            for prefix, names in zip(("_input_name", "_output_name"), ports):
                keys, vals = op.attr[prefix + "_key"].list, op.attr[prefix + "_value"].list
                keys.s.extend(n.encode() for n in names)
                keys.val_type = pb.AttrDef.ListValue.VT_LIST_STRING
                vals.i.extend(range(len(names)))
                vals.val_type = pb.AttrDef.ListValue.VT_LIST_INT
        return op

    def build(self):
        return build_model(self.proto)
