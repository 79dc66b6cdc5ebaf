"""A saved torch.export ExportedProgram (.pt2) → GE's IR, as torchair builds its GE graph
(the knowledge in the pack's import/torch.yaml). Read without torch: a .pt2 is a zip; the
program is JSON (torch/_export/serde/schema.py) — `NAME/models/model.json` in the archive
format of torch 2.6 on, `serialized_exported_program.json` before.

* every placeholder is a Data named as it, `index` in order;
* each ATen node through `op_map`: its tensor arguments (or those the entry names) feed the
  GE op, numbers there become Const inputs, the other arguments attributes; an op the
  table lacks is refused with the list of them;
* writes to graph inputs (Note [torch mutations]) are Assigns into the input's Data;
* the signature's user outputs feed NetOutput.

Note [torch mutations]
~~~~~~~~~~~~~~~~~~~~~~
An exported program mutates its inputs in two forms. The training IR keeps in-place ops
(`aten.add_.Tensor(b_acc, x)`); the core-ATen form is functional and lists the mutated
inputs in the signature's output specs (BUFFER_MUTATION `acc` ← `add`). torchair sees the
second (AOT autograd functionalizes, then puts `copy_(input, new)` at the end, which it
converts to Assign). Both are read to that graph: the new value computed by the functional
op, an Assign(ref = the input's Data, value = new), later readers of the input reading the
new value. A write to an intermediate tensor is just the functional op.
"""
from __future__ import annotations

import json
import struct
import zipfile
import zlib
from dataclasses import dataclass, field
from io import BytesIO

from engine.core.errors import Collector, InputError, Loc, Problem
from engine.core.importers.build import OpBuilder, model_def, to_opdefs
from engine.core.importers.tables import Tables, ir_with_pack, note_ports
from engine.core.schema import Reader
from engine.proto import ge_ir_pb2 as pb

PREFIX = "torch.ops.aten."
_LIST_SCALARS = {"as_ints": "i", "as_floats": "f", "as_bools": "b", "as_strings": "s"}
_SCALARS = {"as_int": "i", "as_float": "f", "as_bool": "b", "as_string": "s"}
_WRITE_SPECS = {"buffer_mutation": "buffer_name", "parameter_mutation": "parameter_name",
                "user_input_mutation": "user_input_name"}
_NAME_OF_INPUT = {"buffer": "buffer_name", "parameter": "parameter_name"}
_FLOAT_CODES = {"DT_FLOAT": "f", "DT_DOUBLE": "d", "DT_FLOAT16": "e"}
# what zipfile raises on a corrupt archive (bad directory, bad names, bad CRC, bad deflate stream)
_ZIP_ERRORS = (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError, RuntimeError, zlib.error,
               struct.error)


@dataclass(frozen=True, slots=True)
class OpEntry:
    type: str
    inputs: tuple | None = None
    scalar_type: str = ""
    scalar_attr: str = ""
    scalar_dtypes: frozenset = frozenset()   # GE dtypes of `self` for which scalar_type applies (all if empty)
    move: tuple = ()
    writes: tuple = ()              # ((argument, output index), ...)
    when: str = ""
    defaults: tuple = ()            # ((argument, number), ...) for an input the program leaves out
    promote: bool = False           # a number input takes the dtype of the op's first tensor


class TorchConfig:
    def __init__(self, tables: Tables):
        errors = Collector()
        loc0 = Loc(tables.file, 1, 1)
        r = Reader(tables.raw, tables.file, errors, loc0)
        r.get("format", str, required=True)
        self.data_type, self.data_index = self._pair(r, "data", ("type", "index_attr"), errors, loc0)
        self.const_type, self.const_value = self._pair(r, "constant", ("type", "value_attr"), errors, loc0)
        self.net_type, self.net_name = self._pair(r, "netoutput", ("type", "name"), errors, loc0)
        w = Reader(r.get("write", dict, {}, required=True), "write", errors, loc0)
        self.write_type, self.write_ref = str(w.get("type", str, "", True)), str(w.get("ref", str, "", True))
        self.write_value = str(w.get("value", str, "", True))
        w.done()
        self.inplace_suffix, self.inplace_arg = self._pair(r, "inplace", ("suffix", "arg"), errors, loc0)
        self.move_type, = self._pair(r, "move", ("type",), errors, loc0)
        self.op_map: dict[str, OpEntry] = {}
        for op, spec in r.get("op_map", dict, {}, required=True).items():
            self.op_map[str(op)] = self._entry(str(op), spec, errors, loc0)
        self.dtypes = {}
        for k, v in (r.get("dtypes", dict, {}, required=True) or {}).items():
            try:
                self.dtypes[int(k)] = pb.DataType.Value(str(v))
            except (ValueError, TypeError):
                errors.error(loc0, f"dtypes: {k}: '{v}' is no GE DataType", "e.g. 7: DT_FLOAT")
        r.done()
        errors.check()

    @staticmethod
    def _pair(r: Reader, key: str, names: tuple, errors: Collector, loc0: Loc) -> tuple:
        s = Reader(r.get(key, dict, {}, required=True), key, errors, loc0)
        out = tuple(str(s.get(n, str, "", True)) for n in names)
        s.done()
        return out

    @staticmethod
    def _entry(op: str, spec, errors: Collector, loc0: Loc) -> OpEntry:
        if isinstance(spec, str):
            return OpEntry(spec)
        e = Reader(spec, f"op_map.{op}", errors, loc0)
        ins = e.get("inputs", list, None)
        writes = e.get("writes", dict, {}) or {}
        defaults = e.get("defaults", dict, {}) or {}
        dtypes = []
        for d in e.get("scalar_dtypes", list, []) or ():
            try:
                dtypes.append(pb.DataType.Value(str(d)))
            except ValueError:
                errors.error(loc0, f"op_map.{op}: scalar_dtypes: '{d}' is no GE DataType", "e.g. DT_FLOAT16")
        entry = OpEntry(str(e.get("type", str, "", True)), tuple(str(x) for x in ins) if ins is not None else None,
                        str(e.get("scalar_type", str, "")), str(e.get("scalar_attr", str, "")), frozenset(dtypes),
                        tuple(str(x) for x in e.get("move", list, []) or ()),
                        tuple((str(k), int(v)) for k, v in writes.items()), str(e.get("when", str, "")),
                        tuple((str(k), v) for k, v in defaults.items()), bool(e.get("promote", bool, False)))
        e.done()
        return entry


def read_program(data: bytes, file: str) -> tuple[dict, str]:
    """(the ExportedProgram JSON, its member name) of a .pt2 archive."""
    try:
        archive = zipfile.ZipFile(BytesIO(data))
        names = archive.namelist()
    except _ZIP_ERRORS as exc:             # UnicodeDecodeError (a bad member name) is a ValueError
        raise InputError(Problem(Loc(file), f"a .pt2 is a zip archive; this one cannot be opened ({exc})",
                                 "save the program with torch.export.save")) from None
    members = [n for n in names if n.endswith("serialized_exported_program.json")]
    members += [n for n in names if n.split("/")[-2:-1] == ["models"] and n.endswith(".json")]
    if not members:
        raise InputError(Problem(Loc(file), "the archive holds no exported program (no models/*.json, no "
                                            "serialized_exported_program.json)", "save the program with torch.export.save"))
    member = sorted(members)[0]
    where = f"{file}:{member}"
    try:
        raw = archive.read(member)
    except _ZIP_ERRORS as exc:
        raise InputError(Problem(Loc(where), f"cannot read the program from the archive ({exc})", "the archive is corrupt")) from None
    try:
        prog = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise InputError(Problem(Loc(where), f"the program is not UTF-8 JSON ({exc})", "the archive is corrupt")) from None
    except json.JSONDecodeError as exc:
        raise InputError(Problem(Loc(where, exc.lineno, exc.colno), f"malformed program JSON: {exc.msg}",
                                 "the archive is corrupt")) from None
    except RecursionError:
        raise InputError(Problem(Loc(where), "the program JSON nests too deep", "the archive is corrupt")) from None
    if not isinstance(prog, dict) or not isinstance(prog.get("graph_module"), dict):
        raise InputError(Problem(Loc(where), "the JSON is no ExportedProgram (no graph_module)",
                                 "save the program with torch.export.save"))
    return prog, where


def _tensor_names(arg: dict) -> list[str | None] | None:
    """The tensor names an argument passes (None for an absent optional), or None if it is no tensor."""
    if "as_tensor" in arg:
        return [arg["as_tensor"]["name"]]
    if "as_tensors" in arg:
        return [t["name"] for t in arg["as_tensors"]]
    if "as_optional_tensor" in arg:
        t = arg["as_optional_tensor"]
        return [t["as_tensor"]["name"] if "as_tensor" in t else None]
    if "as_optional_tensors" in arg:
        return [t["as_tensor"]["name"] if "as_tensor" in t else None for t in arg["as_optional_tensors"]]
    return None


def _number(arg: dict):
    for key in ("as_int", "as_float", "as_bool", "as_ints", "as_floats"):
        if key in arg:
            return key, arg[key]
    return None


@dataclass
class _Graph:
    cfg: TorchConfig
    ir: dict
    file: str
    builders: list = field(default_factory=list)
    producer: dict = field(default_factory=dict)     # tensor name → (node, output)
    data_of: dict = field(default_factory=dict)      # placeholder name → Data node
    root: dict = field(default_factory=dict)         # tensor name → placeholder it is (for writes)
    used: set = field(default_factory=set)
    counters: dict = field(default_factory=dict)
    writes: list = field(default_factory=list)
    types: dict = field(default_factory=dict)

    def unique(self, op_type: str) -> str:
        k = self.counters.get(op_type, 0)
        name = op_type if k == 0 else f"{op_type}_{k}"
        while name in self.used:
            k += 1
            name = f"{op_type}_{k}"
        self.counters[op_type] = k + 1
        self.used.add(name)
        return name

    def add(self, b: OpBuilder) -> OpBuilder:
        spec = self.ir.get(b.type)
        if spec is not None:
            b.in_names, b.out_names = spec.input_names(len(b.inputs)), spec.output_names(b.n_out)
        self.builders.append(b)
        return b

    def const(self, kind: str, value, like: int = 0) -> tuple[str, int]:
        """A Const of a number or a list of numbers: int64 or float32, or for a single number
        of an arithmetic op the float dtype of the tensor it meets (`like`), as torchair's
        dtype_promote makes it."""
        values = value if isinstance(value, list) else [value]
        code, dtype = ("q", "DT_INT64") if kind in ("as_int", "as_ints", "as_bool") else ("f", "DT_FLOAT")
        name = pb.DataType.Name(like) if like in pb.DataType.values() else ""
        if not isinstance(value, list) and name in _FLOAT_CODES:
            code, dtype = _FLOAT_CODES[name], name
        b = OpBuilder(self.unique(self.cfg.const_type), self.cfg.const_type, n_out=1)
        b.op = pb.OpDef()
        t = b.op.attr[self.cfg.const_value].t
        t.desc.dtype, t.desc.layout = pb.DataType.Value(dtype), "ND"
        if isinstance(value, list):
            t.desc.shape.dim.append(len(values))
        t.data = struct.pack(f"<{len(values)}{code}", *values)
        b.out_desc[0] = (t.desc.dtype, list(t.desc.shape.dim))
        self.add(b)
        return b.name, 0

    def write(self, target: str, value: tuple[str, int]) -> None:
        """An Assign of `value` into the graph input `target` is (if it is one)."""
        place = self.root.get(target)
        if place is None:
            return
        cfg = self.cfg
        b = OpBuilder(self.unique(cfg.write_type), cfg.write_type, inputs=[(self.data_of[place], 0), value], n_out=1)
        b.out_desc[0] = self.types.get(place, (0, None))
        self.add(b)
        self.writes.append(b.name)


def _desc(meta: dict, dtypes: dict) -> tuple[int, list[int]]:
    dims = [s.get("as_int", -1) if isinstance(s, dict) else -1 for s in meta.get("sizes", [])]
    return dtypes.get(meta.get("dtype", 0), 0), dims


def _attr(op: pb.OpDef, name: str, arg: dict) -> None:
    from engine.core.attrs import set_attr
    for key, kind in _SCALARS.items():
        if key in arg:
            set_attr(op.attr, name, arg[key], kind)
            return
    for key, kind in _LIST_SCALARS.items():
        if key in arg:
            set_attr(op.attr, name, list(arg[key]), "list_" + kind)
            return


def _first(names) -> str | None:
    return (names or [None])[0]


def _first_tensor(args: dict, wanted) -> str | None:
    return next((t[0] for n in wanted if (t := _tensor_names(args.get(n, {})))), None)


def _node(g: _Graph, node: dict, target: str, entry: OpEntry, inplace: bool) -> None:
    cfg = g.cfg
    args = {i.get("name", f"arg{k}"): i.get("arg", {}) for k, i in enumerate(node.get("inputs", []))}
    wanted = entry.inputs if entry.inputs is not None else [n for n, a in args.items() if _tensor_names(a) is not None]
    ge_type = entry.type
    scalar = [n for n in wanted if n in args and _tensor_names(args[n]) is None and _number(args[n]) is not None]
    if scalar and entry.scalar_type:
        if not entry.scalar_dtypes or g.types.get(_first_tensor(args, wanted), (0, None))[0] in entry.scalar_dtypes:
            ge_type = entry.scalar_type
    b = OpBuilder(g.unique(ge_type), ge_type)
    b.op = pb.OpDef()
    _inputs(g, b, node, target, entry, args, wanted)
    for name, arg in args.items():
        if name not in wanted:
            _attr(b.op, name, arg)
    outs: list[str | None] = []
    for o in node.get("outputs", []):
        outs += (_tensor_names(o) or [None]) if "as_none" not in o else [None]
    spec = g.ir.get(ge_type)
    b.n_out = max(len(outs), spec.fixed_outputs if spec is not None else 0)   # BatchNormV3 has 5, batch_norm 1
    for k, t in enumerate(outs):
        if t is not None:
            g.producer[t] = (b.name, k)
            b.out_desc[k] = g.types.get(t, (0, None))
    g.add(b)
    _writes(g, b, entry, args, wanted, outs, inplace)


def _inputs(g: _Graph, b: OpBuilder, node: dict, target: str, entry: OpEntry, args: dict, wanted) -> None:
    """The GE op's inputs from the ATen arguments `wanted`: tensors by producer (through a
    TensorMove for `move`), numbers as Consts or the scalar attribute, absent ones unconnected."""
    cfg, defaults = g.cfg, dict(entry.defaults)
    for name in wanted:
        arg = args.get(name)
        if arg is None and name in defaults:
            value = defaults[name]
            arg = {"as_float": value} if isinstance(value, float) else {"as_int": value}
        if arg is None or "as_none" in arg:
            b.inputs.append(None)
            continue
        tensors = _tensor_names(arg)
        if tensors is None:
            number = _number(arg)
            if number is not None and b.type == entry.scalar_type and entry.scalar_attr:
                _attr(b.op, entry.scalar_attr, arg)
            elif number is not None:
                like = g.types.get(_first_tensor(args, wanted), (0, None))[0] if entry.promote else 0
                b.inputs.append(g.const(*number, like=like))
            continue
        for t in tensors:
            if t is None:
                b.inputs.append(None)
                continue
            if t not in g.producer:
                raise InputError(Problem(Loc(g.file), f"node '{node.get('name')}' ({target}): input '{t}' is produced by "
                                                      "no node or placeholder", "the program is inconsistent"))
            src = g.producer[t]
            if b.type == cfg.write_type and not b.inputs and t in g.root:
                src = (g.data_of[g.root[t]], 0)          # copy_ into a graph input: the Assign itself
            if name in entry.move:
                mv = g.add(OpBuilder(g.unique(cfg.move_type), cfg.move_type, inputs=[src], n_out=1,
                                     out_desc={0: g.types.get(t, (0, None))}))
                src = (mv.name, 0)
            b.inputs.append(src)
    while b.inputs and b.inputs[-1] is None:
        b.inputs.pop()


def _writes(g: _Graph, b: OpBuilder, entry: OpEntry, args: dict, wanted, outs: list, inplace: bool) -> None:
    """What the op writes back (Note [torch mutations]): the Assign it is, its in-place
    `self`, the entry's `writes`."""
    cfg = g.cfg
    if b.type == cfg.write_type:
        first = _first(_tensor_names(args.get(wanted[0], {}))) if wanted else None
        if first is not None and first in g.root and len(b.inputs) > 1:
            g.writes.append(b.name)
            _rebind(g, first, b.inputs[1], assign=False)
        return
    if inplace:
        self_t = _first(_tensor_names(args.get(cfg.inplace_arg, {})))
        if self_t is not None and outs and outs[0] is not None:
            if self_t in g.root:
                g.root[outs[0]] = g.root[self_t]          # the op's result is the input itself
            _rebind(g, self_t, (b.name, 0))
    if not entry.when or args.get(entry.when, {}).get("as_bool", False):
        for name, idx in entry.writes:
            t = _first(_tensor_names(args.get(name, {})))
            if t is not None and idx < b.n_out:
                _rebind(g, t, (b.name, idx))


def _rebind(g: _Graph, tensor: str, value: tuple[str, int], assign: bool = True) -> None:
    """`tensor` now holds `value`: later readers read it; a graph input gets the Assign
    (unless the op was that Assign)."""
    if assign:
        g.write(tensor, value)
    g.producer[tensor] = value
    place = g.root.get(tensor)
    if place is not None:
        for t, p in g.root.items():
            if p == place:
                g.producer[t] = value


def import_torch(data: bytes, file: str, name: str, tables: Tables, pack=None, notes=None):
    cfg = TorchConfig(tables)
    prog, where = read_program(data, file)
    try:
        return _import(prog, cfg, ir_with_pack(tables, pack), pack, where, name, notes)
    except _SCHEMA_ERRORS as exc:
        raise _schema_error(where, "", exc) from None


# what reading a program that breaks torch.export's schema raises (a key missing, a value of
# another type, a number out of range)
_SCHEMA_ERRORS = (KeyError, TypeError, AttributeError, IndexError, ValueError, struct.error)


def _schema_error(where: str, what: str, exc: Exception) -> InputError:
    return InputError(Problem(Loc(where), f"{what}the program does not follow torch.export's schema "
                                          f"({type(exc).__name__}: {exc})", "save the program with torch.export.save"))


def _import(prog: dict, cfg: TorchConfig, ir: dict, pack, file: str, name: str, notes):
    gm = prog["graph_module"]
    graph, sig = gm["graph"], gm.get("signature", {})
    g = _Graph(cfg, ir, file)
    g.types = {t: _desc(m, cfg.dtypes) for t, m in graph.get("tensor_values", {}).items()}
    by_input_name = {}
    for spec in sig.get("input_specs", []):
        (kind, body), = spec.items()
        arg = body.get("arg", {})
        pname = arg.get("name") or (arg.get("as_tensor") or {}).get("name")
        if kind in _NAME_OF_INPUT and pname:
            by_input_name[body[_NAME_OF_INPUT[kind]]] = pname
    for k, inp in enumerate(graph.get("inputs", [])):
        t = (_tensor_names(inp) or [None])[0]
        if t is None:
            continue
        b = OpBuilder(t, cfg.data_type, inputs=[None], n_out=1, out_desc={0: g.types.get(t, (0, None))})
        b.attrs[cfg.data_index] = (k, "i")
        g.used.add(t)
        g.add(b)
        g.producer[t], g.data_of[t], g.root[t] = (t, 0), t, t
    missing: dict[str, int] = {}
    resolved = []
    for node in graph.get("nodes", []):
        target = node.get("target", "")
        op = target[len(PREFIX):] if target.startswith(PREFIX) else target
        entry, inplace = cfg.op_map.get(op), False
        base, _, overload = op.partition(".")
        if entry is None and base.endswith(cfg.inplace_suffix) and not base.endswith("__"):
            entry = cfg.op_map.get(f"{base[:-len(cfg.inplace_suffix)]}.{overload}")
            inplace = entry is not None
        if entry is None:
            missing[target] = missing.get(target, 0) + 1
        resolved.append((node, target, entry, inplace))
    if missing:
        listed = ", ".join(f"{t} ({n})" for t, n in sorted(missing.items()))
        raise InputError(Problem(Loc(file), f"{len(missing)} ATen op(s) have no GE mapping: {listed}",
                                 "map them in the pack's import/torch.yaml op_map (as torchair's converters do)"))
    for k, (node, target, entry, inplace) in enumerate(resolved):
        try:
            _node(g, node, target, entry, inplace)
        except _SCHEMA_ERRORS as exc:
            raise _schema_error(file, f"node {k} ('{node.get('name')}', {target}): ", exc) from None
    net = OpBuilder(cfg.net_name if cfg.net_name not in g.used else g.unique(cfg.net_name), cfg.net_type)
    for spec in sig.get("output_specs", []):
        (kind, body), = spec.items()
        arg = body.get("arg", {})
        t = arg.get("name") or (arg.get("as_tensor") or {}).get("name")
        if kind in _WRITE_SPECS:
            target = by_input_name.get(body[_WRITE_SPECS[kind]], body[_WRITE_SPECS[kind]])
            if t in g.producer and target in g.data_of:
                g.write(target, g.producer[t])
            continue
        if kind == "token" or t is None:
            continue
        if t not in g.producer:
            raise InputError(Problem(Loc(file), f"output '{t}' is produced by no node", "the program is inconsistent"))
        net.inputs.append(g.producer[t])
    net.ctrl.extend(g.writes)
    g.builders.append(net)
    unknown: dict[str, int] = {}
    for b in g.builders:
        if b.type not in ir:
            unknown[b.type] = unknown.get(b.type, 0) + 1
    note_ports(unknown, {b.type for b in g.builders}, ir, pack, notes)
    if notes is not None:
        text = f"torch.export program ({prog.get('torch_version', 'torch ?')}, {', '.join(prog.get('verifiers', [])) or 'ATEN'})"
        if g.writes:
            text += f": {len(g.writes)} write(s) to graph inputs as Assign"
        notes.append(("import", text))
    return model_def(name, [(name, to_opdefs(g.builders, "ND"))])
