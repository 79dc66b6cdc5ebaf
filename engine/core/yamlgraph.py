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

from engine.core.errors import Collector, Loc, did_you_mean, display_path
from engine.core.graph import Model, write_port_names
from engine.core.attrs import attr_value, set_attr, write_attr
from engine.proto import ge_ir_pb2 as pb
from engine.core.schema import Reader, describe, loc_in, str_list
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


# Note [graph limits]: everything is checked before anything is built, so a wrong type or
# range is a located error and no declared count allocates more than the file could
# hold. A node has at most MAX_PORTS inputs and as many outputs (GE's largest fan-ins,
# a fused collective or a ConcatV2 of a big net, have a few thousand; the GE dumps in
# the fixtures at most 4), a file MAX_FILE_PORTS in all (~2 s of descriptors per
# million; a 1M-node training step has about 3M). Integers are GE's int64 fields.
MAX_PORTS = 65_536
MAX_FILE_PORTS = 1 << 22
INT64 = (-(1 << 63), (1 << 63) - 1)


def _int(value: Any, what: str, loc: Loc, errors: Collector, lo: int = INT64[0], hi: int = INT64[1]) -> int | None:
    """`value` as an int in [lo, hi], else a located error and None."""
    if not isinstance(value, int) or isinstance(value, bool):
        errors.error(loc, f"{what} must be an integer", f"got {describe(value)}")
        return None
    if not lo <= value <= hi:
        errors.error(loc, f"{what} {_shown(value)} is out of range", f"use {lo:,} to {hi:,}")
        return None
    return value


def _shown(n: int | str) -> str:
    s = str(n)
    return s if len(s) <= 24 else f"{s[:10]}...{s[-4:]} ({len(s)} digits)"


def _text(value: Any, what: str, loc: Loc, errors: Collector) -> str | None:
    """`value` as a string that UTF-8 can hold (names, types, layouts), else an error."""
    if not isinstance(value, str):
        errors.error(loc, f"{what} must be a string", f"got {describe(value)}")
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        errors.error(loc, f"{what} is not valid text (a lone surrogate)", "remove the \\ud800-\\udfff escape")
        return None
    return str(value)


def _name(key: Any, what: str, loc: Loc, errors: Collector) -> str | None:
    """A graph or node name: a string, or a number written as one (`1:` names node "1")."""
    if isinstance(key, (int, float)) and not isinstance(key, bool):
        return str(key)
    return _text(key, what, loc, errors)


def _set_attr(a: pb.AttrDef, v: Any, loc: Loc, errors: Collector, key: str) -> None:
    try:
        write_attr(a, v)
    except ValueError as exc:          # UnicodeEncodeError and protobuf's range errors included
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
        key = _text(k, f"{what}: attribute name", value.key_locs.get(k, loc) if isinstance(value, YMap) else loc,
                    errors)
        if key is not None:
            _set_attr(target[key], v, loc, errors, key)


def _shape(value: Any, what: str, loc: Loc, errors: Collector) -> list[int] | None:
    if not isinstance(value, list):
        errors.error(loc, f"{what}: shape must be a list of integers", f"got {describe(value)}")
        return None
    dims = [_int(x, f"{what}: dimension {i}", loc_in(value, i, loc), errors) for i, x in enumerate(value)]
    return None if None in dims else dims


def _read_defaults(top: Reader, errors: Collector) -> dict:
    dflt = dict(DEFAULT_DESC)
    dr = Reader(top.get("defaults", dict, {}), "defaults", errors, top.loc)
    shape = _shape(dr.get("shape", list, dflt["shape"]), "defaults", dr.value_loc("shape"), errors)
    dflt["shape"] = shape if shape is not None else DEFAULT_DESC["shape"]
    for k in ("dtype", "layout"):
        v = _text(dr.get(k, str, dflt[k]), f"defaults: {k}", dr.value_loc(k), errors)
        dflt[k] = v if v is not None else DEFAULT_DESC[k]
    dr.done()
    return dflt


def _desc(d: pb.TensorDescriptor, spec: Any, defaults: dict, what: str, errors: Collector, fallback: Loc) -> None:
    r = Reader(spec if spec is not None else {}, what, errors, fallback)
    shape = _shape(r.get("shape", list, defaults["shape"]), what, r.value_loc("shape"), errors)
    dtype = r.get("dtype", str, defaults["dtype"])
    layout = _text(r.get("layout", str, defaults["layout"]), f"{what}: layout", r.value_loc("layout"), errors)
    if dtype not in pb.DataType.keys():
        errors.error(r.value_loc("dtype"), f"{what}: unknown dtype '{dtype}'", "use DT_FLOAT, DT_FLOAT16, DT_INT32, ...")
    else:
        d.dtype = pb.DataType.Value(dtype)
    if shape is not None:
        d.shape.dim.extend(shape)
    if layout is not None:
        d.layout = layout
    for key in ("size", "data_offset", "reuse_input_index"):
        v = r.get(key, int)
        if v is not None and _int(v, f"{what}: {key}", r.value_loc(key), errors) is not None:
            setattr(d, key, v)
    if r.get("reuse_input", bool, False):
        d.reuse_input = True
    _attrs(d.attr, r.get("attrs", dict), what, errors, r.loc)
    r.done()


def _to_modeldef(doc: Any, file: str, pack: Any, errors: Collector) -> tuple[pb.ModelDef, dict]:
    top = Reader(doc, "graph file", errors, Loc(file, 1, 1))
    dflt = _read_defaults(top, errors)
    raw_options = top.get("options", dict, {}) or {}
    options = YMap()
    options.loc = getattr(raw_options, "loc", top.loc)      # where each value is: the pack checks them
    options.value_locs, options.key_locs = {}, {}
    for k, v in raw_options.items():
        if isinstance(v, (dict, list)):
            errors.error(loc_in(raw_options, k, top.loc), f"option '{k}' must be a single value", "write `key: value`")
            continue
        options[str(k)] = str(v).lower() if isinstance(v, bool) else str(v)
        options.value_locs[str(k)] = getattr(raw_options, "value_locs", {}).get(k, options.loc)
        options.key_locs[str(k)] = getattr(raw_options, "key_locs", {}).get(k, options.loc)
    top.get("doc", str)
    top.get("expect", dict)          # expectations of test fixtures; not read by the engine
    graphs = top.get("graphs", dict, {}, required=True)
    top.done()
    model = pb.ModelDef(version=1)
    if not graphs:
        errors.error(top.loc, "no graphs given", "add `graphs:` with the root graph first")
        return model, options
    budget = [MAX_FILE_PORTS]
    owners: dict[str, tuple[str, Loc]] = {}      # subgraph → (parent node, where it is named)
    names = [str(k) for k in graphs]
    for gname, gval in graphs.items():
        name = _name(gname, "graph name", graphs.key_locs[gname], errors)
        g = model.graph.add(name=name or "")
        gr = Reader(gval, f"graph '{gname}'", errors, graphs.key_locs[gname])
        _attrs(g.attr, gr.get("attrs", dict), f"graph '{gname}'", errors, gr.loc)
        nodes = gr.get("nodes", dict, {}, required=True) or {}
        edges = gr.get("edges", list, []) or []
        gr.done()
        specs = _read_nodes(nodes, pack, errors)
        _check_subgraphs(specs, names, owners, errors)
        data_in, ctrl_in, out_count = _read_edges(edges, specs, errors, gr.loc)
        if not _size_ports(specs, data_in, out_count, budget, errors):
            continue
        _build_graph(g, specs, data_in, ctrl_in, dflt, errors)
    return model, options


def _check_subgraphs(specs: dict, graphs: list[str], owners: dict, errors: Collector) -> None:
    """Each named subgraph is a later graph of the file, owned by one node."""
    for name, s in specs.items():
        for sub, loc in zip(s["subgraphs"], s["subgraph_locs"]):
            if not sub:
                continue
            if sub not in graphs:
                errors.error(loc, f"node '{name}' names subgraph '{sub}', which is not in the file",
                             did_you_mean(sub, graphs, "graphs"))
            elif sub == graphs[0]:
                errors.error(loc, f"node '{name}' names the root graph '{sub}' as its subgraph",
                             "the first graph is the root; a subgraph is one of the others")
            elif sub in owners:
                errors.error(loc, f"subgraph '{sub}' already belongs to node '{owners[sub][0]}' ({owners[sub][1]})",
                             "each subgraph belongs to exactly one node; copy it under another name")
            else:
                owners[sub] = (name, loc)


def _port_list(value: Any, what: str, loc: Loc, errors: Collector) -> list[str] | int | None:
    """`inputs:`/`outputs:`: a list of port names or a count, checked."""
    if isinstance(value, list):
        if len(value) > MAX_PORTS:
            errors.error(loc, f"{what}: {len(value):,} ports, more than {MAX_PORTS:,}", "split the node")
            return None
        names = [_text(x, f"{what}: port {i}", loc_in(value, i, loc), errors) for i, x in enumerate(value)]
        return None if None in names else names
    return _int(value, what, loc, errors, 0, MAX_PORTS)


def _desc_specs(value: Any, what: str, errors: Collector, fallback: Loc) -> dict[int, Any]:
    """`input_desc:`/`output_desc:`: a mapping from port index to a descriptor mapping."""
    out = {}
    for k, v in value.items():
        idx = _int(k, f"{what}: port", getattr(value, "key_locs", {}).get(k, fallback), errors, 0, MAX_PORTS - 1)
        if idx is not None:
            out[idx] = v
    return out


def _read_nodes(nodes: Any, pack: Any, errors: Collector) -> dict[str, dict]:
    """Each node's fields, checked; nothing is built yet."""
    specs: dict[str, dict] = {}
    for i, (key, val) in enumerate(nodes.items()):
        loc = nodes.key_locs[key]
        name = _name(key, "node name", loc, errors)
        if name is None:
            continue
        if name in specs:
            errors.error(loc, f"two nodes are named '{name}'", f"the first is at {specs[name]['loc']}")
            continue
        if isinstance(val, str):
            val = {"type": val}
        what = f"node '{name}'"
        r = Reader(val, what, errors, loc)
        typ = _text(r.get("type", str, "", required=True), f"{what}: type", r.value_loc("type"), errors) or ""
        sig = pack.ops[typ].signature if pack is not None and typ in pack.ops else None
        ins = r.get("inputs", (list, int))
        outs = r.get("outputs", (list, int))
        ins = None if ins is None else _port_list(ins, f"{what}: inputs", r.value_loc("inputs"), errors)
        outs = None if outs is None else _port_list(outs, f"{what}: outputs", r.value_loc("outputs"), errors)
        if ins is None and sig is not None and not any("*" in p.marks for p in sig.inputs):
            ins = [p.name for p in sig.inputs]
        if outs is None and sig is not None and not any("*" in p.marks for p in sig.outputs):
            outs = [p.name for p in sig.outputs]
        node_id = r.get("id", int, i)
        subs = str_list(r.get("subgraphs", list, []) or [], f"{what}: subgraphs", errors, loc)
        engine = r.get("engine", str)
        specs[name] = {"type": typ, "ins": ins, "outs": outs, "loc": loc, "r": r,
                       "id": _int(node_id, f"{what}: id", r.value_loc("id"), errors),
                       "engine": _text(engine, f"{what}: engine", r.value_loc("engine"), errors) if engine else None,
                       "attrs": r.get("attrs", dict),
                       "in_desc": _desc_specs(r.get("input_desc", dict, {}) or {}, f"{what}: input_desc", errors, loc),
                       "out_desc": _desc_specs(r.get("output_desc", dict, {}) or {}, f"{what}: output_desc", errors, loc),
                       "subgraphs": [_text(x, f"{what}: subgraph name", getattr(x, "loc", loc), errors) or ""
                                     for x in subs], "subgraph_locs": [getattr(x, "loc", loc) for x in subs]}
        r.done()
    return specs


def _read_edges(edges: Any, specs: dict, errors: Collector, gloc: Loc):
    data_in: dict[str, dict[int, tuple[str, int, int]]] = {n: {} for n in specs}   # slot → (src, out, order)
    ctrl_in: dict[str, list[tuple[str, int]]] = {n: [] for n in specs}      # [(src, order)]
    out_count: dict[str, int] = {n: 0 for n in specs}
    order = 0
    for k, e in enumerate(edges):
        loc = edges.item_locs[k] if isinstance(edges, YList) else gloc
        m = _EDGE.match(str(e)) if isinstance(e, str) else None
        if m is None:
            errors.error(loc, f"bad edge '{e}'", "write `src -> dst`, `src:0 -> dst:1` or `src ~> dst` (control)")
            continue
        src, dst = m["src"], m["dst"]
        for n in (src, dst):
            if n not in specs:
                errors.error(loc, f"edge '{e}' names unknown node '{n}'", "declare it under nodes:")
        if src not in specs or dst not in specs:
            continue
        if m["kind"] == "~>":
            ctrl_in[dst].append((src, order))
            order += 1
            continue
        shown = e if len(e) <= 60 else f"{e[:28]}...{e[-28:]}"
        si = _edge_port(m["si"] or "0", f"edge '{shown}': output", loc, errors)
        di = 0
        if m["di"] is not None:
            di = _edge_port(m["di"], f"edge '{shown}': input", loc, errors)
        else:
            while di in data_in[dst]:
                di += 1
        if si is None or di is None:
            continue
        if di in data_in[dst]:
            errors.error(loc, f"input {di} of '{dst}' is connected twice", "each input takes one edge")
            continue
        data_in[dst][di] = (src, si, order)
        order += 1
        out_count[src] = max(out_count[src], si + 1)
    return data_in, ctrl_in, out_count


def _edge_port(digits: str, what: str, loc: Loc, errors: Collector) -> int | None:
    """The port number of an edge end, in range (digits past any port's are not converted)."""
    if len(digits) > 6:
        errors.error(loc, f"{what} {_shown(digits)} is out of range", f"use 0 to {MAX_PORTS - 1:,}")
        return None
    return _int(int(digits), what, loc, errors, 0, MAX_PORTS - 1)


def _size_ports(specs: dict, data_in: dict, out_count: dict, budget: list[int], errors: Collector) -> bool:
    """Each node's port counts (`n_in`, `n_out`), within MAX_PORTS and the file's budget."""
    ok = True
    for name, s in specs.items():
        s["n_in"] = max([len(s["ins"]) if isinstance(s["ins"], list) else (s["ins"] or 0)] +
                        [i + 1 for i in data_in[name]] + [k + 1 for k in s["in_desc"]])
        s["n_out"] = max([len(s["outs"]) if isinstance(s["outs"], list) else (s["outs"] or 0),
                          out_count[name]] + [k + 1 for k in s["out_desc"]])
        if max(s["n_in"], s["n_out"]) > MAX_PORTS:
            errors.error(s["loc"], f"node '{name}' has more than {MAX_PORTS:,} inputs or outputs", "split the node")
            ok = False
        budget[0] -= s["n_in"] + s["n_out"]
        if budget[0] < 0 and ok:
            errors.error(s["loc"], f"the file declares more than {MAX_FILE_PORTS:,} ports in all",
                         "split the graph into several files")
            return False
    return ok and not errors


def _build_graph(g: pb.GraphDef, specs: dict, data_in: dict, ctrl_in: dict, dflt: dict, errors: Collector) -> None:
    ops: dict[str, pb.OpDef] = {}
    for name, s in specs.items():
        op = g.op.add(name=name, type=s["type"])
        op.id = s["id"]
        _attrs(op.attr, s["attrs"], f"node '{name}'", errors, s["r"].loc)
        if s["engine"]:
            set_attr(op.attr, ENGINE_ATTR, s["engine"])
        ops[name] = op
    blank = pb.TensorDescriptor()               # a port the file says nothing about: the defaults
    _desc(blank, None, dflt, "defaults", errors, Loc(""))
    for name, op in ops.items():
        s = specs[name]
        for descs, n, given, side in ((op.input_desc, s["n_in"], s["in_desc"], "input"),
                                      (op.output_desc, s["n_out"], s["out_desc"], "output")):
            for i in range(n):
                if i in given:
                    _desc(descs.add(), given[i], dflt, f"node '{name}' {side} {i}", errors, s["loc"])
                else:
                    descs.add().CopyFrom(blank)
        write_port_names(op, *(list(v) if isinstance(v, list) else None for v in (s["ins"], s["outs"])))
        for i in range(s["n_in"]):
            if i in data_in[name]:
                src, si, _ = data_in[name][i]
                op.input.append(f"{src}:{si}")
            else:
                op.input.append("")
        for src, _ in ctrl_in[name]:
            op.input.append(f"{src}:-1")
        op.subgraph_name.extend(str(x) for x in s["subgraphs"])
    _peer_order(ops, data_in, ctrl_in)


def _peer_order(ops: dict[str, pb.OpDef], data_in: dict, ctrl_in: dict) -> bool:
    """GE loads peers in file order; if the edge list says otherwise, record it: each
    source's data peers per output, and its control successors (GE files control entries
    under the source alike: Note [peer order] in engine/core/dumpio.py), in edge-list order."""
    by_src: dict[tuple[str, int], list[tuple[int, tuple[int, int], str, int]]] = {}
    file_pos = {n: i for i, n in enumerate(ops)}
    for dst, slots in data_in.items():
        for di, (src, si, order) in slots.items():
            by_src.setdefault((src, si), []).append((order, (file_pos[dst], di), dst, di))
    for dst, srcs in ctrl_in.items():
        for k, (src, order) in enumerate(srcs):      # the k-th control entry of dst: its slot -1 - k
            by_src.setdefault((src, -1), []).append((order, (file_pos[dst], k), dst, -1 - k))
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
            vals += [-1] * (len(op.input) - len(vals) - len(ctrl_in[name]))
            vals += [peer_pos[(name, -1 - k)] for k in range(len(ctrl_in[name]))]
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
                    if d.dtype in pb.DataType.values():
                        dtype = pb.DataType.Name(d.dtype)
                    else:                   # a dump may hold a number the proto does not name
                        dtype = "DT_UNDEFINED"
                        dropped.append(f"{g.name}/{n.name}: {key} {i} dtype {d.dtype}")
                    dd: dict[str, Any] = {"shape": list(d.shape.dim), "dtype": dtype, "layout": d.layout}
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
