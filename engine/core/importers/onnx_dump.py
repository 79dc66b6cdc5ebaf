"""GE's ONNX-form dumps read back into a ModelDef.

Note [ONNX-form dumps]
~~~~~~~~~~~~~~~~~~~~~~
GE's OnnxUtils writes a ComputeGraph as an ONNX ModelProto (ge_onnx_*.pbtxt): op types
"ge:TYPE", inputs already in GE's `src:idx` / `src:-1` form, attributes with their ONNX kind
(GE's bools as INT), tensor descriptors flattened into attributes `input_desc_FIELD:I` /
`output_desc_FIELD:I` (`..._attr_KEY:I` for descriptor attributes), and each subgraph as a
node of type `subgraph` with the graph in an attribute. The form keeps no subgraph_name:
a subgraph is linked to the node of the enclosing graph whose name starts with the
subgraph's name and "_" (GE names a partition's call NAME_PartitionedCall_K), noted.
"""
from __future__ import annotations

import re

from engine.core.errors import Loc, Problem, InputError
from engine.proto import ge_ir_pb2 as pb
from engine.proto import onnx_model_pb2 as ox

_AT = ox.AttributeProto
_LV = pb.AttrDef.ListValue
_DESC = re.compile(r"^(input|output)_desc_(attr_)?(.+):(\d+)$")
_INT_FIELDS = {"size", "weight_size", "real_dim_cnt", "reuse_input_index", "data_offset", "cmps_size", "cmps_tab_offset"}
_BOOL_FIELDS = {"reuse_input", "output_tensor", "input_tensor", "has_out_attr"}
_STR_FIELDS = {"layout", "device_type", "cmps_tab", "name"}


def _ge_attr(a: pb.AttrDef, x: ox.AttributeProto) -> None:
    if x.type == _AT.FLOAT:
        a.f = x.f
    elif x.type == _AT.INT:
        a.i = x.i
    elif x.type == _AT.STRING:
        a.s = x.s
    elif x.type == _AT.FLOATS:
        a.list.f.extend(x.floats)
        a.list.val_type = _LV.VT_LIST_FLOAT
    elif x.type == _AT.INTS:
        a.list.i.extend(x.ints)
        a.list.val_type = _LV.VT_LIST_INT
    elif x.type == _AT.STRINGS:
        a.list.s.extend(x.strings)
        a.list.val_type = _LV.VT_LIST_STRING


def _desc_field(d: pb.TensorDescriptor, field: str, x: ox.AttributeProto, is_attr: bool) -> None:
    if is_attr:
        _ge_attr(d.attr[field], x)
    elif field == "dtype":
        try:
            d.dtype = pb.DataType.Value(x.s.decode())
        except ValueError:
            d.dtype = 0
    elif field == "shape":
        d.shape.dim.extend(x.ints)
    elif field in _INT_FIELDS:
        setattr(d, field, x.i)
    elif field in _BOOL_FIELDS:
        setattr(d, field, bool(x.i))
    elif field in _STR_FIELDS:
        setattr(d, field, x.s.decode("utf-8", "replace"))
    else:                   # origin_dtype, origin_layout, origin_shape, ...: kept as descriptor attributes
        _ge_attr(d.attr[field], x)


def _graph(g: ox.GraphProto, cfg, out: list, notes) -> None:
    gd = pb.GraphDef(name=g.name)
    out.append(gd)
    subs = []
    for nd in g.node:
        if nd.op_type == cfg.ge_subgraph_op:
            sub = next((x.g for x in nd.attribute if x.name == cfg.ge_subgraph_attr), None)
            if sub is not None:
                subs.append(sub)
            continue
        op = gd.op.add(name=nd.name, type=nd.op_type[len(cfg.ge_prefix):] if nd.op_type.startswith(cfg.ge_prefix) else nd.op_type)
        op.input.extend(nd.input)
        descs: dict[str, dict[int, pb.TensorDescriptor]] = {"input": {}, "output": {}}
        n_out = sum(1 for o in nd.output if not o.endswith(":-1"))
        for x in nd.attribute:
            m = _DESC.match(x.name)
            if m:
                side, is_attr, field, idx = m.group(1), bool(m.group(2)), m.group(3), int(m.group(4))
                _desc_field(descs[side].setdefault(idx, pb.TensorDescriptor()), field, x, is_attr)
            elif x.name not in ("input_desc_nums", "output_desc_nums"):
                _ge_attr(op.attr[x.name], x)
        n_in = sum(1 for i in nd.input if not i.endswith(":-1"))
        for side, count, target in (("input", n_in, op.input_desc), ("output", n_out, op.output_desc)):
            have = descs[side]
            for i in range(max(count, max(have, default=-1) + 1)):
                target.append(have.get(i, pb.TensorDescriptor()))
    for sub in subs:
        parent = next((op for op in gd.op if op.name.startswith(sub.name + "_")), None)
        if parent is None:
            raise InputError(Problem(Loc(g.name), f"subgraph '{sub.name}' of the ONNX-form dump has no parent node",
                                     f"a node named {sub.name}_... must call it"))
        parent.subgraph_name.append(sub.name)
        if notes is not None:
            notes.append(("derived", f"subgraph '{sub.name}' linked to '{parent.name}' by name (the ONNX form keeps no subgraph_name)"))
        _graph(sub, cfg, out, notes)


def read_ge_onnx_dump(m: ox.ModelProto, cfg, file: str, notes) -> pb.ModelDef:
    graphs: list[pb.GraphDef] = []
    _graph(m.graph, cfg, graphs, notes)
    model = pb.ModelDef(name=m.graph.name)
    model.graph.extend(graphs)
    if notes is not None:
        notes.append(("import", "a GE ONNX-form dump: attribute kinds as that form stores them (GE's bools as INT)"))
    return model
