"""Caffe weights (.caffemodel, `--weights`) → Const inputs, as GE's CaffeWeightsParser and
CaffeCustomParserAdapter::ParseWeights add them (the knowledge in import/caffe.yaml
`weights`): each blob of a layer becomes a Const feeding the layer's node at input
(bottoms + i), GE's type conversion and shape checks applied (CaffeOpParser::ConvertWeight),
then every required input must be linked (CheckNodes)."""
from __future__ import annotations

import math
import struct
from dataclasses import dataclass

from engine.core.errors import Collector, InputError, Loc, Problem
from engine.core.importers.build import OpBuilder
from engine.core.schema import Reader
from engine.core.wire import parse_binary
from engine.proto import caffe_net_pb2 as cf
from engine.proto import ge_ir_pb2 as pb

INT32_MAX = 2 ** 31 - 1
FLOAT_MAX = struct.unpack("<f", b"\xff\xff\x7f\x7f")[0]


def _text(value) -> str:
    """A proto2 string field as str (protobuf hands back bytes when they are not UTF-8)."""
    return value if isinstance(value, str) else value.decode("utf-8", "replace")


def _to_float(v: float) -> float:
    """static_cast<float> of a double: out of range saturates to infinity."""
    return v if -FLOAT_MAX <= v <= FLOAT_MAX or v != v else math.copysign(math.inf, v)


@dataclass(frozen=True, slots=True)
class WeightsConfig:
    skip: frozenset
    ignore: frozenset
    origin_attr: str
    bias_blob: dict
    matrix_blob: frozenset
    const_type: str
    const_value: str
    const_name: str


def read_weights_config(raw, file: str, errors: Collector, loc0: Loc) -> WeightsConfig:
    w = Reader(raw, "weights", errors, loc0)
    skip = frozenset(str(x) for x in w.get("skip_layer_types", list, [], True))
    ignore = frozenset(str(x) for x in w.get("ignore_blobs", list, [], True))
    origin = str(w.get("origin_input_attr", str, "", True))
    bias = {str(k): str(v) for k, v in (w.get("bias_blob", dict, {}) or {}).items()}
    for layer, param in bias.items():
        if cf.LayerParameter.DESCRIPTOR.fields_by_name.get(param) is None:
            errors.error(loc0, f"weights.bias_blob: {layer}: '{param}' is no LayerParameter field memconflict reads",
                         "use convolution_param or inner_product_param")
    matrix = frozenset(str(x) for x in w.get("matrix_blob", list, []))
    c = Reader(w.get("const", dict, {}, True), "weights.const", errors, loc0)
    ctype, cvalue = str(c.get("type", str, "", True)), str(c.get("value_attr", str, "", True))
    cname = str(c.get("name", str, "", True))
    c.done()
    w.done()
    return WeightsConfig(skip, ignore, origin, bias, matrix, ctype, cvalue, cname)


def parse_weights(data: bytes, file: str) -> cf.NetParameter:
    return parse_binary(cf.NetParameter(), data, file, "malformed Caffe weights",
                        "--weights names a binary Caffe NetParameter (.caffemodel)")


def _dtype(name: str) -> int:
    return pb.DataType.Value(name)


def convert_blob(blob: cf.BlobProto, layer: str, file: str) -> tuple[list[int], int, bytes]:
    """(dims, GE dtype, little-endian data) of one blob, as CaffeOpParser::ConvertWeight."""
    if blob.HasField("num") or blob.HasField("channels") or blob.HasField("height") or blob.HasField("width"):
        dims = [blob.num, blob.channels, blob.height, blob.width]
    else:
        dims = list(blob.shape.dim)
    count = 1
    for d in dims:
        if d <= 0:
            raise InputError(Problem(Loc(file), f"convert weight fail: dim {d} of layer '{layer}' <= 0",
                                     "every dimension of a blob's shape must be positive"))
        if d >= INT32_MAX // count:
            raise InputError(Problem(Loc(file), f"convert weight fail: the blob shape {dims} of layer '{layer}' overflows "
                                                "int32", "the blob is too large for GE's Caffe parser"))
        count *= d
    if len(blob.double_data):
        got, dtype, data = len(blob.double_data), "DT_FLOAT", struct.pack(f"<{len(blob.double_data)}f", *map(_to_float, blob.double_data))
    elif len(blob.int8_data):
        got, dtype, data = len(blob.int8_data), "DT_INT8", bytes(blob.int8_data)
    elif len(blob.int32_data):
        got, dtype, data = len(blob.int32_data), "DT_INT32", struct.pack(f"<{len(blob.int32_data)}i", *blob.int32_data)
    elif len(blob.uint64_data):
        got, dtype, data = len(blob.uint64_data), "DT_UINT64", struct.pack(f"<{len(blob.uint64_data)}Q", *blob.uint64_data)
    else:
        got, dtype, data = len(blob.data), "DT_FLOAT", struct.pack(f"<{len(blob.data)}f", *blob.data)
    if got != count:
        raise InputError(Problem(Loc(file), f"blob size {got} of layer '{layer}' does not match its shape size {count} "
                                            f"(shape {dims}) (E11033)", "the blob's data must fill its shape"))
    return dims, _dtype(dtype), data


def _reshape(dims: list[int], layer: cf.LayerParameter, i: int, cfg: WeightsConfig) -> list[int]:
    ltype = _text(layer.type)
    param = cfg.bias_blob.get(ltype)
    if i == 1 and param is not None and getattr(layer, param).bias_term and len(dims) == 4 and dims[:3] == [1, 1, 1]:
        return [dims[3]]
    if i == 0 and ltype in cfg.matrix_blob and len(dims) == 4 and dims[:2] == [1, 1]:
        return dims[2:]
    return dims


def make_const(cfg: WeightsConfig, index: int, dtype: int, dims: list[int], data: bytes, ir: dict) -> OpBuilder:
    """OpDescUtils::CreateConstOp: a Const holding the tensor, named by GE's running count."""
    c = OpBuilder(cfg.const_name.format(index=index), cfg.const_type, n_out=1)
    c.op = pb.OpDef()
    t = c.op.attr[cfg.const_value].t
    t.desc.dtype, t.desc.layout = dtype, "NCHW"
    t.desc.shape.dim.extend(dims)
    t.data = data
    c.out_desc[0] = (dtype, dims)
    spec = ir.get(cfg.const_type)
    if spec is not None:
        c.in_names, c.out_names = [], spec.output_names(1)
    return c


def apply_weights(net: cf.NetParameter, builders: list[OpBuilder], op_map: dict, cfg: WeightsConfig, ir: dict,
                  keep: set[str], file: str, notes: list | None, first_index: int = 0) -> list[OpBuilder]:
    """The builders with the weights' Const nodes in front; `keep` are the GE types whose
    inputs CheckNodes does not check (Data, Const); `first_index`: Consts made before."""
    if not len(net.layer):
        if len(net.layers):
            raise InputError(Problem(Loc(file), "the weight file is consisted of layers-structure which is deprecated in "
                                                "Caffe and unsupported in ATC (E11023)", 'change "layers" to "layer"'))
        raise InputError(Problem(Loc(file), "weight layer num is zero, weight file may be invalid (E11024)",
                                 "--weights names the network's .caffemodel"))
    by_name = {b.name: b for b in builders}
    seen: dict[str, int] = {}
    consts: list[OpBuilder] = []
    not_in_net, unknown = [], []
    in_weights = set()
    for layer in net.layer:
        ltype = _text(layer.type)
        if ltype in cfg.skip:
            continue
        name = _text(layer.name)
        if name in seen:
            base, name = name, f"{name}_same_{seen[name]}"
            seen[base] += 1
        seen.setdefault(name, 1)
        b = by_name.get(name)
        if b is None:
            not_in_net.append(name)
            continue
        in_weights.add(name)
        ge_type = op_map.get(ltype)
        if ge_type is None:
            unknown.append(f"{name} ({ltype})")
            continue
        if ge_type in cfg.ignore or not len(layer.blobs):
            continue
        bottoms = len(b.inputs)
        for i, blob in enumerate(layer.blobs):
            dims, dtype, data = convert_blob(blob, name, file)
            dims = _reshape(dims, layer, i, cfg)
            c = make_const(cfg, first_index + len(consts), dtype, dims, data, ir)
            consts.append(c)
            b.inputs.append((c.name, 0))
        b.attrs[cfg.origin_attr] = (bottoms, "i")
        spec = ir.get(b.type)
        if spec is not None:
            b.in_names = spec.input_names(len(b.inputs))
    _check_nodes(builders, ir, keep, in_weights, file)
    if notes is not None:
        text = f"Caffe weights: {len(consts)} blob(s) made Const inputs"
        if not_in_net:
            text += f"; {len(not_in_net)} layer(s) of the weights are no node of the network, skipped: " + ", ".join(not_in_net[:5])
        if unknown:
            text += "; layer type(s) not mapped, blobs ignored: " + ", ".join(unknown[:5])
        notes.append(("import", text))
    return consts[::-1] + builders          # AddNodeFront: the last Const made comes first


def _check_nodes(builders, ir, keep, in_weights, file) -> None:
    errors = Collector()
    for b in builders:
        spec = ir.get(b.type)
        if b.type in keep or spec is None:
            continue
        required = sum(1 for p in spec.inputs if p.kind == "")
        linked = len([i for i in b.inputs if i is not None])
        if linked >= required:
            continue
        if b.name not in in_weights:
            errors.error(Loc(file), f"Op[{b.name}] in model file does not exist in weight file (E11029)",
                         f"its {spec.type} needs {required} inputs; the weights give the missing ones")
        else:
            errors.error(Loc(file), f"Op[{b.name}]'s input {linked} is not linked: the weight file gives it no blob",
                         f"its {spec.type} needs {required} inputs")
    errors.check()
