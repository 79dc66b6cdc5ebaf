"""ONNX ModelProto → GE's IR, as GE's ONNX parser builds it (OnnxModelParser::
ModelParseToGraphImpl; the knowledge in the pack's import/onnx.yaml), and GE's own
ONNX-form dumps read back (Note [ONNX-form dumps]). No dependency on the `onnx` package:
engine/proto/onnx_model.proto is written from ONNX's field table.

* graph inputs that are no initializer → Data (named as the tensor, `index` in order);
  initializers, by name → Const NAME_Initializer_K; unnamed nodes → OPTYPE_K;
* op types through `op_map` (the op plugins' mapping); an op it lacks is refused (E16002);
* If: each branch a subgraph NODE_I_BRANCH, the outer names the branches read become If
  inputs and branch Data (IfSubgraphAdapter), with the parent-index attribute;
* the graph outputs feed NetOutput; a cycle is refused (GE's TopologicalSorting fails).
"""
from __future__ import annotations

import heapq

from engine.core.errors import Collector, InputError, Loc, Problem
from engine.core.importers.build import OpBuilder, model_def, parse_proto, to_opdefs
from engine.core.importers.tables import Tables, ir_with_pack, names
from engine.core.schema import Reader
from engine.proto import ge_ir_pb2 as pb
from engine.proto import onnx_model_pb2 as ox

_ONNX_TO_GE = {"FLOAT16": "DT_FLOAT16", "BFLOAT16": "DT_BF16"}
_AT = ox.AttributeProto
_LV = pb.AttrDef.ListValue


def ge_dtype(elem: int) -> int:
    try:
        name = ox.TensorProto.DataType.Name(elem)
    except ValueError:
        return 0
    try:
        return pb.DataType.Value(_ONNX_TO_GE.get(name, "DT_" + name))
    except ValueError:
        return 0


def parse_model(data: bytes, text: bool, file: str) -> ox.ModelProto:
    return parse_proto(ox.ModelProto(), data, text, file, "ONNX model", "the file must be a text-format onnx.ModelProto",
                       "the file must be a serialized onnx.ModelProto (.onnx)")


class OnnxConfig:
    def __init__(self, tables: Tables):
        errors = Collector()
        loc0 = Loc(tables.file, 1, 1)
        r = Reader(tables.raw, tables.file, errors, loc0)
        r.get("format", str, required=True)
        d = Reader(r.get("data", dict, {}, required=True), "data", errors, loc0)
        self.data_type, self.data_index = str(d.get("type", str, "", True)), str(d.get("index_attr", str, "", True))
        d.done()
        c = Reader(r.get("constant", dict, {}, required=True), "constant", errors, loc0)
        self.const_type, self.const_value = str(c.get("type", str, "", True)), str(c.get("value_attr", str, "", True))
        self.init_suffix = str(c.get("initializer_suffix", str, "", True))
        c.done()
        self.unnamed = str(r.get("unnamed", str, "{op_type}_{index}"))
        self.op_map = {str(k): str(v) for k, v in r.get("op_map", dict, {}, required=True).items()}
        self.subgraphs = {}
        for op, spec in (r.get("subgraphs", dict, {}) or {}).items():
            s = Reader(spec, f"subgraphs.{op}", errors, loc0)
            self.subgraphs[str(op)] = (names(s.get("branches", list, [], True), "branches", errors, loc0),
                                       int(s.get("input_offset", int, 0)))
            s.done()
        self.parent_index = str(r.get("parent_index_attr", str, "", required=True))
        n = Reader(r.get("netoutput", dict, {}, required=True), "netoutput", errors, loc0)
        self.net_type, self.net_name = str(n.get("type", str, "", True)), str(n.get("name", str, "", True))
        n.done()
        g = Reader(r.get("ge_dump", dict, {}, required=True), "ge_dump", errors, loc0)
        self.ge_prefix = str(g.get("type_prefix", str, "", True))
        self.ge_subgraph_op = str(g.get("subgraph_op", str, "", True))
        self.ge_subgraph_attr = str(g.get("subgraph_attr", str, "", True))
        g.done()
        r.done()
        errors.check()


def tensor_def(t: ox.TensorProto) -> pb.TensorDef:
    td = pb.TensorDef()
    td.desc.dtype = ge_dtype(t.data_type)
    td.desc.shape.dim.extend(t.dims)
    if t.HasField("raw_data"):
        td.data = t.raw_data
    else:
        import struct
        for field, code in (("float_data", "f"), ("int32_data", "i"), ("int64_data", "q"), ("double_data", "d"),
                            ("uint64_data", "Q")):
            vals = getattr(t, field)
            if len(vals):
                td.data = struct.pack(f"<{len(vals)}{code}", *vals)
                break
    return td


def _attr(a: pb.AttrDef, x: ox.AttributeProto) -> None:
    kind = x.type
    if kind == _AT.FLOAT:
        a.f = x.f
    elif kind == _AT.INT:
        a.i = x.i
    elif kind == _AT.STRING:
        a.s = x.s
    elif kind == _AT.TENSOR:
        a.t.CopyFrom(tensor_def(x.t))
    elif kind == _AT.FLOATS:
        a.list.f.extend(x.floats)
        a.list.val_type = _LV.VT_LIST_FLOAT
    elif kind == _AT.INTS:
        a.list.i.extend(x.ints)
        a.list.val_type = _LV.VT_LIST_INT
    elif kind == _AT.STRINGS:
        a.list.s.extend(x.strings)
        a.list.val_type = _LV.VT_LIST_STRING


def _value_types(g: ox.GraphProto) -> dict:
    out = {}
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        if vi.type.HasField("tensor_type"):
            tt = vi.type.tensor_type
            dims = [d.dim_value if d.WhichOneof("value") == "dim_value" else -1 for d in tt.shape.dim] \
                if tt.HasField("shape") else None
            out[vi.name] = (ge_dtype(tt.elem_type), dims)
    return out


class _Importer:
    def __init__(self, cfg: OnnxConfig, ir: dict, file: str, opset: int):
        self.cfg, self.ir, self.file, self.opset = cfg, ir, file, opset
        self.errors = Collector()
        self.graphs: list[tuple[str, list]] = []

    def graph(self, g: ox.GraphProto, gname: str, outer: list[str] | None = None, offset: int = 0) -> None:
        """One graph; `outer` are the names read from the enclosing graph (a branch)."""
        cfg, loc = self.cfg, Loc(self.file)
        slot = len(self.graphs)
        self.graphs.append((gname, []))
        inits = {t.name: t for t in g.initializer if t.name}
        types = _value_types(g)
        builders: list[OpBuilder] = []
        producer: dict[str, tuple[str, int]] = {}
        inputs = [vi.name for vi in g.input if vi.name not in inits] + list(outer or ())
        for k, name in enumerate(inputs):
            b = OpBuilder(name, cfg.data_type, inputs=[None], n_out=1)
            b.attrs[cfg.data_index] = (k, "i")
            if outer is not None:
                b.attrs[cfg.parent_index] = (k + offset, "i")
            b.out_desc[0] = types.get(name, (0, None))
            producer[name] = (name, 0)
            builders.append(b)
        for k, (name, t) in enumerate(sorted(inits.items())):
            b = OpBuilder(f"{name}{cfg.init_suffix}{k}", cfg.const_type, n_out=1)
            b.op = pb.OpDef()
            b.op.attr[cfg.const_value].t.CopyFrom(tensor_def(t))
            b.out_desc[0] = (ge_dtype(t.data_type), list(t.dims))
            producer[name] = (b.name, 0)
            builders.append(b)
        unnamed = 0
        nodes = []
        unsupported: dict[str, list[str]] = {}
        for nd in g.node:
            name = nd.name
            if not name:
                name = cfg.unnamed.format(op_type=nd.op_type, index=unnamed)
                unnamed += 1
            ge_type = cfg.op_map.get(nd.op_type)
            if ge_type is None:
                unsupported.setdefault(f"{nd.domain or 'ai.onnx'}::{self.opset}::{nd.op_type}", []).append(name)
                continue
            b = OpBuilder(name, ge_type)
            b.op = pb.OpDef()
            for x in nd.attribute:
                if x.type not in (_AT.GRAPH, _AT.GRAPHS):
                    _attr(b.op.attr[x.name], x)
            for i, out in enumerate(nd.output):
                if out:
                    producer[out] = (name, i)
                    b.out_desc[i] = types.get(out, (0, None))
            b.n_out = len(nd.output)
            nodes.append((b, nd))
            builders.append(b)
        for ori, where in sorted(unsupported.items()):
            op = ori.rsplit("::", 1)[1]
            self.errors.error(loc, f"graph '{gname}': op type [{ori}] is not supported (E16002): {len(where)} node(s), "
                                   f"first '{where[0]}'", f"GE reads ONNX ops through its op plugins; map {op} in the "
                                   f"pack's import/onnx.yaml op_map")
        self.errors.check()
        for b, nd in nodes:
            ins = list(nd.input)
            branches = cfg.subgraphs.get(nd.op_type)
            if branches is not None:
                ins += self._branches(b, nd, branches, gname)
            for name in ins:
                if not name:
                    b.inputs.append(None)
                elif name in producer:
                    b.inputs.append(producer[name])
                else:
                    self.errors.error(loc, f"node '{b.name}' ({nd.op_type}) in graph '{gname}': input '{name}' is produced by "
                                           f"no node, graph input or initializer", "check the tensor name")
            spec = self.ir.get(b.type)
            if spec is not None:
                b.in_names, b.out_names = spec.input_names(len(b.inputs)), spec.output_names(b.n_out)
        self.errors.check()
        net = OpBuilder(cfg.net_name, cfg.net_type)
        for k, out in enumerate(g.output):
            if out.name not in producer:
                self.errors.error(loc, f"graph '{gname}': output '{out.name}' is produced by no node", "check the graph outputs")
                continue
            net.inputs.append(producer[out.name])
        self.errors.check()
        builders.append(net)
        builders = self._topo(builders, gname)
        ops = to_opdefs(builders, "ND")
        if outer is not None:
            for k, d in enumerate(ops[-1].input_desc):
                d.attr[cfg.parent_index].i = k
        self.graphs[slot] = (gname, ops)

    def _branches(self, b: OpBuilder, nd: ox.NodeProto, spec, gname: str) -> list[str]:
        branches, offset = spec
        found = {x.name: x.g for x in nd.attribute if x.type == _AT.GRAPH}
        outer: set[str] = set()
        for attr in branches:
            g = found.get(attr)
            if g is None:
                self.errors.error(Loc(self.file), f"node '{b.name}' ({nd.op_type}) has no {attr}", f"an {nd.op_type} needs {', '.join(branches)}")
                continue
            made = {o for n in g.node for o in n.output} | {t.name for t in g.initializer}
            outer |= {i for n in g.node for i in n.input if i and i not in made}
        names_ = sorted(outer)
        for k, attr in enumerate(branches):
            if attr in found:
                sub = f"{b.name}_{k}_{attr}"
                b.subgraphs.append(sub)
                self.graph(found[attr], sub, names_, offset)
        return names_

    def _topo(self, builders: list[OpBuilder], gname: str) -> list[OpBuilder]:
        """Kahn's order, ties by position; a node left over sits on a cycle."""
        pos = {b.name: k for k, b in enumerate(builders)}
        indeg = {b.name: 0 for b in builders}
        succ: dict[str, list[str]] = {b.name: [] for b in builders}
        for b in builders:
            for item in b.inputs:
                if item is not None:
                    succ[item[0]].append(b.name)
                    indeg[b.name] += 1
        heap = [pos[n] for n, d in indeg.items() if d == 0]
        heapq.heapify(heap)
        out = []
        while heap:
            b = builders[heapq.heappop(heap)]
            out.append(b)
            for s in succ[b.name]:
                indeg[s] -= 1
                if indeg[s] == 0:
                    heapq.heappush(heap, pos[s])
        if len(out) < len(builders):
            stuck = sorted((b.name for b in builders if indeg[b.name] > 0), key=pos.get)
            raise InputError(Problem(Loc(self.file), f"graph '{gname}' has a cycle through {', '.join(stuck[:6])}"
                                                     + (f" and {len(stuck) - 6} more" if len(stuck) > 6 else ""),
                                     "GE's TopologicalSorting refuses a graph with a cycle; ONNX graphs must be acyclic"))
        return out


def import_onnx(data: bytes, text: bool, file: str, name: str, tables: Tables, pack=None, notes=None):
    cfg = OnnxConfig(tables)
    m = parse_model(data, text, file)
    if not m.HasField("graph"):
        raise InputError(Problem(Loc(file), "the ONNX model has no graph", "ModelProto.graph holds the model"))
    if any(n.op_type.startswith(cfg.ge_prefix) or n.op_type == cfg.ge_subgraph_op for n in m.graph.node):
        from engine.core.importers.onnx_dump import read_ge_onnx_dump
        return read_ge_onnx_dump(m, cfg, file, notes), True
    opset = next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), 0)
    imp = _Importer(cfg, ir_with_pack(tables, pack), file, opset)
    imp.graph(m.graph, m.graph.name or name)
    return model_def(m.graph.name or name, imp.graphs), False
