"""A compact, hand-editable graph format (YAML) for fixtures, convertible to and
from GE's ModelDef.

    defaults: {shape: [1, 1, 224, 224], dtype: DT_FLOAT, layout: NCHW}
    options: {ge.featureBaseRefreshable: "1"}      # optional, used by tests
    graphs:
      root:                                        # the first graph is the root
        attrs: {_graph_unknown_flag: true}
        nodes:
          const1: Const                            # just a type
          assign: {type: Assign, inputs: [ref, value], outputs: [ref]}
          ar: {type: HcomAllReduce, attrs: {_input_mutable: true}, engine: ops_kernel_info_hccl}
          if: {type: If, inputs: 1, outputs: 0, subgraphs: [then_g, else_g]}
        edges:
          - const1 -> ar                           # out 0 → the next free input of ar
          - const1:0 -> if:0
          - ar ~> assign                           # control edge
      then_g:
        nodes:
          d: {type: Data, attrs: {_parent_node_index: 0}}
          out: {type: NetOutput, input_desc: {0: {attrs: {_parent_node_index: 0}}}}
        edges: [d -> out]

Edges are listed in peer order (the order GE's anchors hold them). Port names
come from `inputs`/`outputs` lists, else from the op registry's signature.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from engine.core.errors import Collector, Loc, display_path
from engine.core.graph import Model, write_port_names
from engine.core.attrs import attr_value, set_attr, write_attr
from engine.proto import ge_ir_pb2 as pb
from engine.core.schema import Reader
from engine.core.yamlloc import YList, YMap, load_yaml

_EDGE = re.compile(r"^\s*(?P<src>[^\s:~>-][^\s]*?)(?::(?P<si>\d+))?\s*(?P<kind>->|~>)\s*"
                   r"(?P<dst>[^\s:]+?)(?::(?P<di>\d+))?\s*$")
DEFAULT_DESC = {"shape": [1, 1, 224, 224], "dtype": "DT_FLOAT", "layout": "NCHW"}
PEER_INDEX_ATTR = "_src_out_peer_index_for_ge_txt_load"
ENGINE_ATTR = "_ge_attr_op_kernel_lib_name"      # what a node's `engine:` field writes


def load_yaml_graph(path: str | Path, pack: Any = None) -> tuple[Model, dict[str, str]]:
    """Read a YAML graph; returns the model and the file's `options`."""
    from engine.core.dumpio import build_model

    file = display_path(path)
    doc = load_yaml(path)
    errors = Collector()
    proto, options = _to_modeldef(doc, file, pack, errors)
    errors.check()
    return build_model(proto, file), options


def _set_attr(a: pb.AttrDef, v: Any, loc: Loc, errors: Collector, key: str) -> None:
    try:
        write_attr(a, v)
    except ValueError as exc:
        errors.error(loc, f"attribute '{key}': {exc}",
                     "use a bool, int, float or string, a list of one of those, or a list of lists of numbers")


def _attrs(target, value: Any, what: str, errors: Collector, fallback: Loc) -> None:
    if value is None:
        return
    if not isinstance(value, dict):
        errors.error(getattr(value, "loc", fallback), f"{what}: attrs must be a mapping", "write {key: value}")
        return
    for k, v in value.items():
        loc = value.value_locs.get(k, fallback) if isinstance(value, YMap) else fallback
        _set_attr(target[str(k)], v, loc, errors, str(k))


def _desc(d: pb.TensorDescriptor, spec: Any, defaults: dict, what: str, errors: Collector, fallback: Loc) -> None:
    r = Reader(spec if spec is not None else {}, what, errors, fallback)
    shape = r.get("shape", list, defaults["shape"])
    dtype = r.get("dtype", str, defaults["dtype"])
    layout = r.get("layout", str, defaults["layout"])
    if dtype not in pb.DataType.keys():
        errors.error(r.value_loc("dtype"), f"{what}: unknown dtype '{dtype}'", "use DT_FLOAT, DT_FLOAT16, DT_INT32, ...")
    else:
        d.dtype = pb.DataType.Value(dtype)
    d.shape.dim.extend(int(x) for x in shape)
    d.layout = layout
    size = r.get("size", int)
    if size is not None:
        d.size = size
    offset = r.get("data_offset", int)
    if offset is not None:
        d.data_offset = offset
    if r.get("reuse_input", bool, False):
        d.reuse_input = True
    idx = r.get("reuse_input_index", int)
    if idx is not None:
        d.reuse_input_index = idx
    _attrs(d.attr, r.get("attrs", dict), what, errors, r.loc)
    r.done()


def _to_modeldef(doc: Any, file: str, pack: Any, errors: Collector) -> tuple[pb.ModelDef, dict]:
    top = Reader(doc, "graph file", errors, Loc(file, 1, 1))
    dflt = dict(DEFAULT_DESC)
    dr = Reader(top.get("defaults", dict, {}), "defaults", errors, top.loc)
    for k in DEFAULT_DESC:
        dflt[k] = dr.get(k, (list, str), dflt[k])
    dr.done()
    raw_options = top.get("options", dict, {}) or {}
    options = YMap({str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in raw_options.items()})
    options.loc = getattr(raw_options, "loc", top.loc)      # where each value is: the pack checks them
    options.value_locs = {str(k): loc for k, loc in getattr(raw_options, "value_locs", {}).items()}
    options.key_locs = {str(k): loc for k, loc in getattr(raw_options, "key_locs", {}).items()}
    top.get("doc", str)
    top.get("expect", dict)          # expectations of test fixtures; not read by the engine
    graphs = top.get("graphs", dict, {}, required=True)
    top.done()
    model = pb.ModelDef(version=1)
    if not graphs:
        errors.error(top.loc, "no graphs given", "add `graphs:` with the root graph first")
        return model, options
    for gname, gval in graphs.items():
        g = model.graph.add(name=str(gname))
        gr = Reader(gval, f"graph '{gname}'", errors, graphs.key_locs[gname])
        _attrs(g.attr, gr.get("attrs", dict), f"graph '{gname}'", errors, gr.loc)
        nodes = gr.get("nodes", dict, {}, required=True) or {}
        edges = gr.get("edges", list, []) or []
        gr.done()
        _build_graph(g, nodes, edges, dflt, pack, errors, gr.loc)
    return model, options


def _build_graph(g: pb.GraphDef, nodes: Any, edges: Any, dflt: dict, pack: Any,
                 errors: Collector, gloc: Loc) -> bool:
    ops: dict[str, pb.OpDef] = {}
    specs: dict[str, dict] = {}
    for i, (name, val) in enumerate(nodes.items()):
        loc = nodes.key_locs[name]
        if isinstance(val, str):
            val = {"type": val}
        r = Reader(val, f"node '{name}'", errors, loc)
        typ = r.get("type", str, "", required=True)
        sig = pack.ops[typ].signature if pack is not None and typ in pack.ops else None
        ins = r.get("inputs", (list, int))
        outs = r.get("outputs", (list, int))
        if ins is None and sig is not None and not any("*" in p.marks for p in sig.inputs):
            ins = [p.name for p in sig.inputs]
        if outs is None and sig is not None and not any("*" in p.marks for p in sig.outputs):
            outs = [p.name for p in sig.outputs]
        op = g.op.add(name=str(name), type=str(typ))
        op.id = r.get("id", int, i)
        _attrs(op.attr, r.get("attrs", dict), f"node '{name}'", errors, r.loc)
        engine = r.get("engine", str)
        if engine:
            set_attr(op.attr, ENGINE_ATTR, str(engine))
        specs[str(name)] = {"ins": ins, "outs": outs, "in_desc": r.get("input_desc", dict, {}) or {},
                            "out_desc": r.get("output_desc", dict, {}) or {}, "loc": loc,
                            "subgraphs": r.get("subgraphs", list, []) or []}
        r.done()
        ops[str(name)] = op
    data_in: dict[str, dict[int, tuple[str, int, int]]] = {n: {} for n in ops}   # slot → (src, out, order)
    ctrl_in: dict[str, list[str]] = {n: [] for n in ops}
    out_count: dict[str, int] = {n: 0 for n in ops}
    order = 0
    for k, e in enumerate(edges):
        loc = edges.item_locs[k] if isinstance(edges, YList) else gloc
        m = _EDGE.match(str(e)) if isinstance(e, str) else None
        if m is None:
            errors.error(loc, f"bad edge '{e}'", "write `src -> dst`, `src:0 -> dst:1` or `src ~> dst` (control)")
            continue
        src, dst = m["src"], m["dst"]
        for n in (src, dst):
            if n not in ops:
                errors.error(loc, f"edge '{e}' names unknown node '{n}'", "declare it under nodes:")
        if src not in ops or dst not in ops:
            continue
        if m["kind"] == "~>":
            ctrl_in[dst].append(src)
            continue
        si = int(m["si"]) if m["si"] is not None else 0
        if m["di"] is not None:
            di = int(m["di"])
        else:
            di = 0
            while di in data_in[dst]:
                di += 1
        if di in data_in[dst]:
            errors.error(loc, f"input {di} of '{dst}' is connected twice", "each input takes one edge")
            continue
        data_in[dst][di] = (src, si, order)
        order += 1
        out_count[src] = max(out_count[src], si + 1)
    # descriptors and ports
    for name, op in ops.items():
        s = specs[name]
        n_in = max([len(s["ins"]) if isinstance(s["ins"], list) else (s["ins"] or 0)] +
                   [i + 1 for i in data_in[name]] + [int(k) + 1 for k in s["in_desc"]])
        n_out = max([len(s["outs"]) if isinstance(s["outs"], list) else (s["outs"] or 0),
                     out_count[name]] + [int(k) + 1 for k in s["out_desc"]])
        for i in range(n_in):
            _desc(op.input_desc.add(), s["in_desc"].get(i), dflt, f"node '{name}' input {i}", errors, s["loc"])
        for i in range(n_out):
            _desc(op.output_desc.add(), s["out_desc"].get(i), dflt, f"node '{name}' output {i}", errors, s["loc"])
        write_port_names(op, *(list(v) if isinstance(v, list) else None for v in (s["ins"], s["outs"])))
        for i in range(n_in):
            if i in data_in[name]:
                src, si, _ = data_in[name][i]
                op.input.append(f"{src}:{si}")
            else:
                op.input.append("")
        for src in ctrl_in[name]:
            op.input.append(f"{src}:-1")
        op.subgraph_name.extend(str(x) for x in s["subgraphs"])
    # peer order: GE loads peers in file order; if the edge list says otherwise, record it
    by_src: dict[tuple[str, int], list[tuple[int, int, str, int]]] = {}
    file_pos = {n: i for i, n in enumerate(ops)}
    for dst, slots in data_in.items():
        for di, (src, si, order) in slots.items():
            by_src.setdefault((src, si), []).append((order, file_pos[dst] * 10_000 + di, dst, di))
    need = False
    peer_pos: dict[tuple[str, int], int] = {}
    for key, lst in by_src.items():
        by_order = sorted(lst)
        if [x[1] for x in by_order] != sorted(x[1] for x in lst):
            need = True
        for pos, (_, _, dst, di) in enumerate(by_order):
            peer_pos[(dst, di)] = pos
    if need:
        for name, op in ops.items():
            vals = [peer_pos.get((name, i), -1) for i in range(len(op.input_desc))]
            vals += [-1] * (len(op.input) - len(vals))
            set_attr(op.attr, PEER_INDEX_ATTR, vals[:len(op.input)], "list_i")
    return need


# ---- Model → YAML -------------------------------------------------------------------
def model_to_yaml(model: Model) -> tuple[str, list[str]]:
    """The compact form of a model, and a list of what it could not express."""
    dropped: list[str] = []
    graphs = {}
    for g in model.graph_order:
        nodes = {}
        for n in g.nodes():
            entry: dict[str, Any] = {"type": n.type}
            ins, outs = n.ports()
            if ins:
                entry["inputs"] = [k for k, _ in sorted(ins.items(), key=lambda t: t[1])]
            else:
                entry["inputs"] = len(n.ins)
            if outs:
                entry["outputs"] = [k for k, _ in sorted(outs.items(), key=lambda t: t[1])]
            else:
                entry["outputs"] = len(n.outs)
            entry["id"] = n.id
            attrs = {}
            for k in sorted(n.op.attr):
                if k.startswith(("_input_name_", "_output_name_")):
                    continue
                v = _plain(attr_value(n.op.attr[k]))
                if v is None:
                    dropped.append(f"{g.name}/{n.name}: attr {k}")
                    continue
                attrs[k] = v
            if attrs:
                entry["attrs"] = attrs
            for key, descs in (("input_desc", n.op.input_desc), ("output_desc", n.op.output_desc)):
                out = {}
                for i, d in enumerate(descs):
                    dd: dict[str, Any] = {"shape": list(d.shape.dim), "dtype": pb.DataType.Name(d.dtype),
                                          "layout": d.layout}
                    if d.size:
                        dd["size"] = d.size
                    if d.reuse_input:
                        dd["reuse_input"] = True
                        dd["reuse_input_index"] = d.reuse_input_index
                    da = {k: _plain(attr_value(d.attr[k])) for k in sorted(d.attr)}
                    da = {k: v for k, v in da.items() if v is not None}
                    if da:
                        dd["attrs"] = da
                    out[i] = dd
                if out:
                    entry[key] = out
            if any(n.subgraphs):
                entry["subgraphs"] = list(n.op.subgraph_name)
            nodes[n.name] = entry
        edges = []
        for n in g.nodes():
            for o in n.outs:
                for p in o.peers:
                    edges.append(f"{n.name}:{o.idx} -> {p.node.name}:{p.idx}")
            for s in n.out_ctrl:
                edges.append(f"{n.name} ~> {s.name}")
        gd: dict[str, Any] = {}
        gattrs = {k: _plain(attr_value(g.proto.attr[k])) for k in sorted(g.proto.attr)}
        gattrs = {k: v for k, v in gattrs.items() if v is not None}
        if gattrs:
            gd["attrs"] = gattrs
        gd["nodes"] = nodes
        gd["edges"] = edges
        graphs[g.name] = gd
    text = yaml.safe_dump({"graphs": graphs}, sort_keys=False, default_flow_style=None, width=120, allow_unicode=True)
    return text, dropped


def _plain(v: Any) -> Any:
    if isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, list) and all(isinstance(x, (bool, int, float, str)) for x in v):
        return v
    if isinstance(v, list) and all(isinstance(x, list) for x in v):
        return v
    return None
