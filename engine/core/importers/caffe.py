"""Caffe network definitions (.prototxt) → GE's IR, as GE's Caffe parser builds them
(CaffeModelParser; the knowledge in the pack's import/caffe.yaml).

* net-level `input`s become Input layers (ParseInput): with `input_dim` (4 per input) or
  `input_shape`, never both (E11001); without either GE needs --input_shape (E11005);
* layer types through `op_map` (caffe_op_map with the plugins' entries; E11009 otherwise);
* a bottom blob is the latest top of that name (AddBlobsToMap's in-place remapping: a layer
  writing its own bottom, ReLU in place, feeds the layers after it);
* Data `index` in order, every top of a leaf layer feeds NetOutput (GetDefaultOutInfo);
* a Reshape layer gets its shape as a Const input (`shape_const`, CaffeReshapeParser);
* with `--weights NET.caffemodel` the blobs become Const inputs (engine/core/importers/
  caffe_weights.py); without, the layers have no weight inputs (noted).
"""
from __future__ import annotations

import struct

from engine.core.errors import Collector, InputError, Loc, Problem
from engine.core.importers.build import OpBuilder, model_def, parse_proto, to_opdefs
from engine.core.importers.caffe_weights import apply_weights, make_const, parse_weights, read_weights_config
from engine.core.importers.tables import Tables, ir_with_pack
from engine.core.schema import Reader
from engine.proto import caffe_net_pb2 as cf
from engine.proto import ge_ir_pb2 as pb

DIMS_PER_INPUT = 4          # parser::DIM_DEFAULT_SIZE


def parse_net(data: bytes, text: bool, file: str) -> cf.NetParameter:
    return parse_proto(cf.NetParameter(), data, text, file, "Caffe network",
                       "the file must be a Caffe NetParameter (.prototxt)", "the file must be a Caffe NetParameter")


def read_config(tables: Tables) -> tuple:
    """import/caffe.yaml, read strictly: (op_map, data type, index attr, NetOutput type, name,
    WeightsConfig, shape_const)."""
    errors = Collector()
    loc0 = Loc(tables.file, 1, 1)
    r = Reader(tables.raw, tables.file, errors, loc0)
    r.get("format", str, required=True)
    op_map = {str(k): str(v) for k, v in r.get("op_map", dict, {}, required=True).items()}
    d = Reader(r.get("data", dict, {}, required=True), "data", errors, loc0)
    data_type, data_index = str(d.get("type", str, "", True)), str(d.get("index_attr", str, "", True))
    d.done()
    n = Reader(r.get("netoutput", dict, {}, required=True), "netoutput", errors, loc0)
    net_type, net_name = str(n.get("type", str, "", True)), str(n.get("name", str, "", True))
    n.done()
    weights = read_weights_config(r.get("weights", dict, {}, required=True), tables.file, errors, loc0)
    shape_const = {}
    for ge_type, spec in (r.get("shape_const", dict, {}) or {}).items():
        c = Reader(spec, f"shape_const.{ge_type}", errors, loc0)
        param, attr = str(c.get("param", str, "", True)), str(c.get("attr", str, "", True))
        ints = {str(k): int(v) for k, v in (c.get("int_attrs", dict, {}) or {}).items()}
        shape_const[str(ge_type)] = (param, attr, ints, int(c.get("input", int, 1, True)))
        c.done()
        if cf.LayerParameter.DESCRIPTOR.fields_by_name.get(param) is None:
            errors.error(loc0, f"shape_const.{ge_type}: '{param}' is no LayerParameter field memconflict reads",
                         "use reshape_param")
    r.done()
    errors.check()
    return op_map, data_type, data_index, net_type, net_name, weights, shape_const


def import_caffe(data: bytes, text: bool, file: str, name: str, tables: Tables, pack=None, notes=None,
                 weights: tuple[bytes, str] | None = None) -> object:
    """`weights`: the .caffemodel's bytes and its display name."""
    op_map, data_type, data_index, net_type, net_name, wcfg, shape_const = read_config(tables)
    errors = Collector()
    loc = Loc(file)
    net = parse_net(data, text, file)
    if len(net.layers) and not len(net.layer):
        raise InputError(Problem(loc, "the network uses V1 `layers`, which memconflict does not read",
                                 "upgrade it to `layer` (Caffe's upgrade_net_proto_text)"))
    if not len(net.layer) and not len(net.input):
        raise InputError(Problem(loc, "the network has no layer", "a Caffe NetParameter lists its layers under `layer`"))
    layers = [(l.name, l.type, list(l.bottom), list(l.top), [list(s.dim) for s in l.input_param.shape]) for l in net.layer]
    protos = {l.name: l for l in net.layer}
    if len(net.input):
        if len(net.input_dim) and len(net.input_shape):
            raise InputError(Problem(loc, "input_dim and input_shape cannot both exist (E11001)", "keep one of them"))
        if len(net.input_dim):
            if len(net.input_dim) != DIMS_PER_INPUT * len(net.input):
                raise InputError(Problem(loc, f"model input_dim size [{len(net.input_dim)}] is not 4 times of input size "
                                              f"[{len(net.input)}] (E11003)", "give four input_dim values per input"))
            shapes = [list(net.input_dim[DIMS_PER_INPUT * i:DIMS_PER_INPUT * (i + 1)]) for i in range(len(net.input))]
        elif len(net.input_shape):
            if len(net.input_shape) != len(net.input):
                raise InputError(Problem(loc, f"model input_shape size [{len(net.input_shape)}] is not equal to input size "
                                              f"[{len(net.input)}] (E11004)", "give one input_shape per input"))
            shapes = [list(s.dim) for s in net.input_shape]
        else:
            raise InputError(Problem(loc, f"input [{net.input[0]}] of the model has no shape: GE takes it from --input_shape "
                                          "(E11005)", "give the net input_shape or input_dim"))
        # ParseInput appends Input layers; blobs are linked by name afterwards and the graph sorted,
        # so they come first here, where bottoms are resolved in layer order
        layers = [(i, next(k for k, v in op_map.items() if v == data_type), [], [i], [s])
                  for i, s in zip(net.input, shapes)] + layers
    ir = ir_with_pack(tables, pack)
    builders, by_name, top_of, made = [], {}, {}, []
    unsupported = []
    for lname, ltype, bottoms, tops, shapes in layers:
        ge_type = op_map.get(ltype)
        if ge_type is None:
            unsupported.append((lname, ltype))
            continue
        if lname in by_name:
            errors.error(loc, f"two layers are named '{lname}'", "layer names must be unique")
            continue
        if not tops:
            errors.error(loc, f"the output size of layer {lname} needs to be greater than zero (E11037)", "give it a top")
            continue
        b = OpBuilder(lname, ge_type, n_out=len(tops))
        for blob in bottoms:
            if blob not in top_of:
                errors.error(loc, f"layer '{lname}' ({ltype}): bottom '{blob}' is the top of no layer before it",
                             "a bottom names the top blob of an earlier layer")
                continue
            b.inputs.append(top_of[blob])
        for j, blob in enumerate(tops):
            top_of[blob] = (lname, j)          # in place: later bottoms of this name read this layer
        if ge_type in shape_const:
            _shape_input(b, protos.get(lname), shape_const[ge_type], wcfg, made, ir, errors, loc)
        if ge_type == data_type:
            b.attrs[data_index] = (sum(1 for x in builders if x.type == data_type), "i")
            b.inputs.insert(0, None)
            b.out_desc[0] = (0, shapes[0] if shapes else None)
        spec = ir.get(ge_type)
        if spec is not None and ge_type != data_type:
            b.in_names, b.out_names = spec.input_names(len(b.inputs)), spec.output_names(b.n_out)
        builders.append(b)
        by_name[lname] = b
    for lname, ltype in unsupported:
        errors.error(loc, f"unsupport op[{lname}] optype[{ltype}], you should customize the op at first (E11009)",
                     f"map {ltype} in the pack's import/caffe.yaml op_map")
    errors.check()
    builders = made[::-1] + builders           # AddNodeFront
    if weights is not None:
        wnet = parse_weights(weights[0], weights[1])
        builders = apply_weights(wnet, builders, op_map, wcfg, ir, {data_type, wcfg.const_type}, weights[1], notes,
                                 len(made))
    consumed = {src for b in builders for src, _ in (i for i in b.inputs if i is not None)}
    net_op = OpBuilder(net_name, net_type)
    for b in builders:
        if b.name not in consumed and any(i is not None for i in b.inputs):
            net_op.inputs.extend((b.name, j) for j in range(b.n_out))
    if net_op.inputs:
        builders.append(net_op)
    if notes is not None and weights is None:
        notes.append(("import", "no Caffe weights given (--weights NET.caffemodel): layers get no weight Const inputs"))
    gname = net.name or name
    return model_def(gname, [(gname, to_opdefs(builders, "NCHW"))])


def _shape_input(b: OpBuilder, layer, spec: tuple, wcfg, made: list, ir: dict, errors: Collector, loc: Loc) -> None:
    """CaffeReshapeParser: ParseParams (the shape and axis attributes), then AddConstInput (the
    shape as a Const into `input`, before AddEdges links the bottoms)."""
    param_name, attr, ints, index = spec
    param = getattr(layer, param_name) if layer is not None else None
    if param is None or not param.HasField("shape"):
        errors.error(loc, f"{b.type} has no shape info, layer name = {b.name}, layer type = {b.type}",
                     f"give the layer {param_name} {{ shape {{ dim: ... }} }}")
        return
    dims = list(param.shape.dim)
    b.attrs[attr] = (dims, "list_i")
    for key, default in ints.items():
        b.attrs[key] = (getattr(param, key) if param.HasField(key) else default, "i")
    if len(b.inputs) > index:
        src = b.inputs[index][0]
        errors.error(loc, f"Add link failed from op[{src}] to op[{b.name}]: its input {index} holds the {attr} Const "
                          f"(AddConstInput)", f"a {b.type} layer takes one bottom; its {attr} comes from {param_name}")
        return
    c = make_const(wcfg, len(made), pb.DataType.Value("DT_INT64"), [len(dims)], struct.pack(f"<{len(dims)}q", *dims), ir)
    made.append(c)
    while len(b.inputs) < index:
        b.inputs.append(None)
    b.inputs.append((c.name, 0))
