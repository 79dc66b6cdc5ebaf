"""TensorFlow GraphDef → GE's IR, as GE's TensorFlow parser builds it (the file route,
TensorFlowModelParser::ParseAllGraph; the knowledge in the pack's import/tensorflow.yaml).

* op types through `op_map` (tensorflow_op_map); any other op keeps its TF name and gets
  GE's IR port names (import/ir.yaml, else the pack's op signature): the ref mechanism
  (`Assign(ref, value) -> ref`) is those names;
* a Placeholder becomes a Data with its `index`; `not_by_ir` ops get unnamed ports;
* inputs `src`, `src:N` and `^src` (control) become GE edges; attributes are mapped by
  kind (OperatorAutoMapping), dtypes to GE's, `_output_shapes`/`shape` to the descriptors;
* RemoveIsolateNode, then NetOutputPass's default outputs (every output of a leaf).
"""
from __future__ import annotations

import struct

from engine.core.errors import Collector, Loc
from engine.core.importers.build import OpBuilder, model_def, parse_proto, to_opdefs
from engine.core.importers.tables import IrOp, Tables, ir_with_pack, names, note_ports
from engine.core.schema import Reader
from engine.proto import ge_ir_pb2 as pb
from engine.proto import tf_graph_pb2 as tf

# TF DataType name → GE DataType name (format knowledge, types.proto ⇄ ge_ir.proto)
_TF_TO_GE = {"DT_HALF": "DT_FLOAT16", "DT_BFLOAT16": "DT_BF16"}
_GE_DT = pb.DataType.Value
_TF_DT = tf.DataType.Name
# element layout of a TensorProto's typed values, by GE DataType name
_PACK = {"DT_FLOAT": "f", "DT_DOUBLE": "d", "DT_INT8": "b", "DT_UINT8": "B", "DT_INT16": "h", "DT_UINT16": "H",
         "DT_INT32": "i", "DT_UINT32": "I", "DT_INT64": "q", "DT_UINT64": "Q", "DT_BOOL": "?", "DT_FLOAT16": "e"}
_VALUES = ("float_val", "double_val", "int_val", "int64_val", "bool_val", "uint32_val", "uint64_val", "half_val")
MAX_FILL = 1 << 20      # a splat constant is expanded to at most this many elements
DTYPE_ATTRS = ("dtype", "T", "out_type", "DstT", "Tout", "output_type")


def ge_dtype(tf_type: int) -> int:
    got = _DT_CACHE.get(tf_type)
    if got is None:
        got = _DT_CACHE[tf_type] = _ge_dtype(tf_type)
    return got


_DT_CACHE: dict[int, int] = {}


def _ge_dtype(tf_type: int) -> int:
    if tf_type > 100:                        # a reference type (DT_FLOAT_REF, ...)
        tf_type -= 100
    try:
        name = _TF_DT(tf_type)
    except ValueError:
        return 0
    name = _TF_TO_GE.get(name, name)
    try:
        return _GE_DT(name)
    except ValueError:
        return 0


def parse_graphdef(data: bytes, file: str, text: bool) -> tf.GraphDef:
    return parse_proto(tf.GraphDef(), data, text, file, "TensorFlow GraphDef",
                       "the file must be a text-format tensorflow.GraphDef (tf.io.write_graph(..., as_text=True))",
                       "the file must be a serialized tensorflow.GraphDef (a frozen .pb)", unknown_fields=False,
                       not_utf8=("not a text GraphDef (not UTF-8)", "binary GraphDefs end in .pb"))


class TfConfig:
    """import/tensorflow.yaml, read strictly."""

    def __init__(self, tables: Tables):
        errors = Collector()
        loc0 = Loc(tables.file, 1, 1)
        r = Reader(tables.raw, tables.file, errors, loc0)
        r.get("format", str, required=True)
        self.op_map = {str(k): str(v) for k, v in (r.get("op_map", dict, {}, required=True)).items()}
        self.not_by_ir = set(names(r.get("not_by_ir", list, []), "not_by_ir", errors, loc0))
        d = Reader(r.get("data", dict, {}, required=True), "data", errors, loc0)
        self.data_type = str(d.get("type", str, "", required=True))
        self.data_index = str(d.get("index_attr", str, "", required=True))
        d.done()
        iso = Reader(r.get("isolated", dict, {}), "isolated", errors, loc0)
        self.keep = set(names(iso.get("keep", list, []), "isolated.keep", errors, loc0))
        self.unconsumed = set(names(iso.get("unconsumed", list, []), "isolated.unconsumed", errors, loc0))
        iso.done()
        n = Reader(r.get("netoutput", dict, {}, required=True), "netoutput", errors, loc0)
        self.net_type = str(n.get("type", str, "", required=True))
        self.net_name = str(n.get("name", str, "", required=True))
        n.done()
        self.layout = str(r.get("layout", str, "ND"))
        self.unknown_ir = str(r.get("unknown_ir", str, "keep"))
        if self.unknown_ir not in ("keep", "refuse"):
            errors.error(r.value_loc("unknown_ir"), "unknown_ir must be keep or refuse", "keep: unnamed ports and a note")
        r.done()
        errors.check()


_LV = pb.AttrDef.ListValue


def _attr(a: pb.AttrDef, v: tf.AttrValue) -> None:
    """OperatorAutoMapping of one attribute, by kind, straight into GE's AttrDef."""
    which = v.WhichOneof("value")
    if which == "s":
        a.s = v.s
    elif which == "i":
        a.i = v.i
    elif which == "f":
        a.f = v.f
    elif which == "b":
        a.b = v.b
    elif which == "type":
        a.dt = ge_dtype(v.type)
    elif which == "shape":
        a.list.i.extend(_dims(v.shape) or [])
        a.list.val_type = _LV.VT_LIST_INT
    elif which == "tensor":
        a.t.CopyFrom(tensor_def(v.tensor))
    elif which == "func":
        a.s = v.func.name.encode()
    elif which == "list":
        lv, out = v.list, a.list
        if len(lv.s):
            out.s.extend(lv.s)
            out.val_type = _LV.VT_LIST_STRING
        elif len(lv.i):
            out.i.extend(lv.i)
            out.val_type = _LV.VT_LIST_INT
        elif len(lv.f):
            out.f.extend(lv.f)
            out.val_type = _LV.VT_LIST_FLOAT
        elif len(lv.b):
            out.b.extend(lv.b)
            out.val_type = _LV.VT_LIST_BOOL
        elif len(lv.type):
            out.dt.extend(ge_dtype(t) for t in lv.type)
            out.val_type = _LV.VT_LIST_DATA_TYPE
        elif len(lv.shape):
            for s in lv.shape:
                a.list_list_int.list_list_i.add().list_i.extend(_dims(s) or [])
        else:
            out.val_type = _LV.VT_LIST_NONE


def _dims(shape: tf.TensorShapeProto) -> list[int] | None:
    if shape.unknown_rank:
        return [-2]                       # GE's UNKNOWN_RANK shape
    return [d.size for d in shape.dim]


def tensor_def(t: tf.TensorProto) -> pb.TensorDef:
    """A TF TensorProto as GE's TensorDef: descriptor, then the raw bytes (typed values
    packed; a splat value filled out to the shape, as GE's constant parser does)."""
    dtype = ge_dtype(t.dtype)
    dims = _dims(t.tensor_shape) or []
    td = pb.TensorDef()
    td.desc.dtype = dtype
    td.desc.shape.dim.extend(dims)
    if t.tensor_content:
        td.data = t.tensor_content
        return td
    code = _PACK.get(pb.DataType.Name(dtype)) if dtype else None
    vals = next((list(getattr(t, f)) for f in _VALUES if len(getattr(t, f))), [])
    if code is None or not vals:
        return td
    count = 1
    for d in dims:
        count *= max(d, 0)
    if 0 < len(vals) < count <= MAX_FILL:
        vals = vals + [vals[-1]] * (count - len(vals))
    if code == "e" and t.half_val:
        td.data = struct.pack(f"<{len(vals)}H", *vals)
    else:
        td.data = struct.pack(f"<{len(vals)}{code}", *vals)
    return td


def _split_input(entry: str) -> tuple[str, int]:
    """`src`, `src:N`, `^src` (-1: control)."""
    if entry.startswith("^"):
        return entry[1:], -1
    name, sep, idx = entry.rpartition(":")
    if sep and idx.isdigit():
        return name, int(idx)
    return entry, 0


def import_graphdef(gd: tf.GraphDef, file: str, name: str, tables: Tables, pack=None, notes=None) -> pb.ModelDef:
    cfg = TfConfig(tables)
    ir = ir_with_pack(tables, pack)
    errors = Collector()
    loc = Loc(file)
    builders: list[OpBuilder] = []
    by_name: dict[str, OpBuilder] = {}
    defs = {}
    for nd in gd.node:
        if not nd.name or not nd.op:
            errors.error(loc, f"a NodeDef has no {'name' if not nd.name else 'op'} (node '{nd.name}')",
                         "every NodeDef needs a name and an op")
            continue
        if nd.name in by_name:
            errors.error(loc, f"two nodes are named '{nd.name}'",
                         "GE's PreChecker refuses repeated names (\"name repeat in tensorflow pb file\")")
            continue
        b = OpBuilder(nd.name, cfg.op_map.get(nd.op, nd.op))
        by_name[nd.name] = b
        builders.append(b)
        defs[nd.name] = nd
    errors.check()
    uses: dict[str, int] = {}                 # highest output index consumed + 1
    for b in builders:
        seen_ctrl: set[str] = set()
        for entry in defs[b.name].input:
            src, idx = _split_input(entry)
            if src not in by_name:
                errors.error(loc, f"node '{b.name}' ({defs[b.name].op}): input '{entry}' names no node of the graph",
                             "GE's parser links inputs by node name; the producer is missing (a trimmed graph?)")
                continue
            if idx < 0:
                if src not in seen_ctrl:
                    seen_ctrl.add(src)
                    b.ctrl.append(src)
            else:
                b.inputs.append((src, idx))
                uses[src] = max(uses.get(src, 0), idx + 1)
    errors.check()
    unknown: dict[str, int] = {}
    port_cache: dict[tuple, tuple] = {}      # (type, inputs, outputs) → GE's port names
    data_index = 0
    for b in builders:
        nd = defs[b.name]
        b.op = op = pb.OpDef()
        attrs = nd.attr
        for key in sorted(attrs):
            if key != "_output_shapes":
                _attr(op.attr[key], attrs[key])
        shapes = [_dims(s) for s in attrs["_output_shapes"].list.shape] if "_output_shapes" in attrs else []
        spec: IrOp | None = None if b.type in cfg.not_by_ir else ir.get(b.type)
        fixed = spec.fixed_outputs if spec is not None else 0
        # an op of unknown IR, or one GE makes without it, has at least one output
        b.n_out = max(uses.get(b.name, 0), len(shapes), fixed, 1 if spec is None else 0)
        if b.type == cfg.data_type:
            b.attrs[cfg.data_index] = (data_index, "i")
            data_index += 1
            b.inputs.insert(0, None)         # GE's Data: one unconnected input descriptor
        dtype, shape0 = 0, None
        for a in DTYPE_ATTRS:
            if a in attrs and attrs[a].WhichOneof("value") == "type":
                dtype = ge_dtype(attrs[a].type)
                break
        if "shape" in attrs and attrs["shape"].WhichOneof("value") == "shape":
            shape0 = _dims(attrs["shape"].shape)
        if "value" in attrs and attrs["value"].WhichOneof("value") == "tensor":
            dtype = ge_dtype(attrs["value"].tensor.dtype)
            shape0 = _dims(attrs["value"].tensor.tensor_shape)
        for i in range(b.n_out):
            dims = shapes[i] if i < len(shapes) else (shape0 if i == 0 else None)
            b.out_desc[i] = (dtype, dims)
        if spec is not None:
            key = (b.type, len(b.inputs), b.n_out)
            got = port_cache.get(key)
            if got is None:
                got = port_cache[key] = (spec.input_names(key[1]), spec.output_names(key[2]))
            b.in_names, b.out_names = got
        elif b.type not in cfg.not_by_ir:
            unknown[b.type] = unknown.get(b.type, 0) + 1
    if unknown and cfg.unknown_ir == "refuse":
        for t in sorted(unknown):
            first = next(b.name for b in builders if b.type == t)
            errors.error(loc, f"IR for op[{first}] optype[{t}] is not registered (E10501)",
                         f"GE builds {t} from its op IR; add it to {tables.file.rsplit('/', 1)[0]}/ir.yaml or the pack's ops:")
        errors.check()
    note_ports(unknown, {b.type for b in builders}, ir, pack, notes)
    _remove_isolated(builders, by_name, cfg)
    _add_netoutput(builders, by_name, cfg)
    return model_def(name, [(name, to_opdefs(builders, cfg.layout))])


def _remove_isolated(builders: list[OpBuilder], by_name: dict[str, OpBuilder], cfg: TfConfig) -> None:
    """RemoveIsolateNode: one pass in node order over the live graph."""
    in_nodes: dict[str, set] = {b.name: set() for b in builders}
    out_data: dict[str, int] = {b.name: 0 for b in builders}
    out_ctrl: dict[str, list] = {b.name: [] for b in builders}
    for b in builders:
        for item in b.inputs:
            if item is not None:
                in_nodes[b.name].add(item[0])
                out_data[item[0]] += 1
        for c in b.ctrl:
            in_nodes[b.name].add(c)
            out_ctrl[c].append(b.name)
    for b in builders:
        if b.type in cfg.keep:
            continue
        alone = not in_nodes[b.name] and out_data[b.name] == 0
        if alone or (b.type in cfg.unconsumed and out_data[b.name] == 0):
            b.alive = False
            for item in b.inputs:
                if item is not None:
                    out_data[item[0]] -= 1
            for c in out_ctrl[b.name]:
                in_nodes[c].discard(b.name)
                by_name[c].ctrl = [x for x in by_name[c].ctrl if x != b.name]
            for src in in_nodes[b.name]:
                if b.name in out_ctrl[src]:
                    out_ctrl[src].remove(b.name)


def _add_netoutput(builders: list[OpBuilder], by_name: dict[str, OpBuilder], cfg: TfConfig) -> None:
    """GetDefaultOutInfo + NetOutputPass: leaves' outputs as data inputs, leaves with no
    output by control edges."""
    live = [b for b in builders if b.alive]
    has_in = {b.name for b in live if any(i is not None for i in b.inputs) or b.ctrl}
    has_out = set()
    for b in live:
        for item in b.inputs:
            if item is not None:
                has_out.add(item[0])
        has_out.update(b.ctrl)
    net = OpBuilder(cfg.net_name, cfg.net_type)
    for b in live:
        if b.name in has_in and b.name not in has_out:
            if b.n_out:
                net.inputs.extend((b.name, i) for i in range(b.n_out))
            else:
                net.ctrl.append(b.name)
    if net.inputs or net.ctrl:
        k = 1
        while net.name in by_name:
            net.name = f"{cfg.net_name}_{k}"
            k += 1
        builders.append(net)
        by_name[net.name] = net
