"""Reading a model of any format GE reads into GE's IR (a `Model`): GE dumps (text,
binary, ONNX form, the ModelDef in an offline model .om), TensorFlow GraphDefs, ONNX
models, Caffe networks, torch.export programs (.pt2); the format from the content
(engine/core/importers/detect.py) unless `--from` names it."""
from __future__ import annotations

from pathlib import Path

from engine.core.errors import InputError, Loc, Problem, display_path
from engine.core.gcpause import no_gc
from engine.core.importers.detect import FORMATS, detect


def read_bytes(path: str | Path) -> bytes:
    try:
        return Path(path).read_bytes()
    except IsADirectoryError:
        raise InputError(Problem(Loc(display_path(path)), "is a folder, not a model file", "name a model file")) from None
    except OSError as exc:
        raise InputError(Problem(Loc(display_path(path)), f"cannot read the model: {exc.strerror}", "check the path")) from None


def pack_folder(pack) -> Path:
    from engine.core.resources import default_pack_dir
    path = getattr(pack, "path", None)
    return Path(path) if path else default_pack_dir()


def load_model_file(path: str | Path, pack=None, fmt: str | None = None, weights: str | Path | None = None):
    """(Model, notes) of any supported model file; notes are (kind, text) pairs that the
    report shows (derived attributes, port names from the pack, ops without IR).
    `weights`: a Caffe network's .caffemodel."""
    with no_gc():       # Note [gc] (engine/core/gcpause.py): an import allocates a few objects per node
        return _load(path, pack, fmt, weights)


def _load(path, pack, fmt, weights=None):
    file = display_path(path)
    data = read_bytes(path)
    if fmt is not None and fmt not in FORMATS:
        raise InputError(Problem(Loc("--from"), f"unknown format '{fmt}'", "give one of: " + ", ".join(FORMATS)))
    found, text, why = detect(data)
    if fmt is None:
        if found is None:
            hint = ("memconflict reads GE dumps and offline models (.om), TensorFlow GraphDefs (.pb/.pbtxt), "
                    "ONNX models, Caffe networks and torch.export programs (.pt2); name the format with --from " + "|".join(FORMATS))
            if not text:     # read as the default binary format, where the first broken byte is known
                from engine.core.dumpio import parse_binary
                try:
                    parse_binary(data, file)
                except InputError as exc:
                    if exc.problems:
                        why = f"{why}; read as a GE dump: {exc.problems[0].message}"
            raise InputError(Problem(Loc(file), f"cannot tell the model format ({why})", hint))
        fmt = found
    if weights is not None and fmt != "caffe":
        raise InputError(Problem(Loc("--weights"), f"--weights is for Caffe networks; {file} is read as {fmt}",
                                 "drop --weights, or name the .prototxt it belongs to"))
    notes: list[tuple[str, str]] = []
    stem = Path(path).stem
    if fmt == "ge" and found == "onnx" and text:
        fmt = "onnx"        # a GE ONNX-form dump: read by the ONNX reader, which knows GE's form
    if fmt in ("ge", "om"):
        from engine.core.dumpio import build_lean_model, build_model, model_of_dump
        if fmt == "om":
            # the ModelDef partition read lean when it can be, else the full way, which says
            # where it is broken (Note [lean ops] in engine/core/lean.py)
            from engine.core.importers.om import model_def_span, read_om
            start, size = model_def_span(data, file, notes)
            model = build_lean_model(data[start:start + size], file)
            if model is None:
                model = build_model(read_om(data, file), file)
        else:
            model = model_of_dump(data, file, not text)
        from engine.core.importers.derive import derive_attrs, fill_port_names
        derive_attrs(model, pack_folder(pack), notes)
        fill_port_names(model, pack_folder(pack), pack, notes)
        return model, notes
    from engine.core.importers.tables import load_tables
    tables = load_tables(pack_folder(pack), fmt)
    ge_dump = False
    if fmt == "tensorflow":
        from engine.core.importers.tensorflow import import_graphdef, parse_graphdef
        proto = import_graphdef(parse_graphdef(data, file, text), file, stem, tables, pack, notes)
    elif fmt == "torch":
        from engine.core.importers.torch import import_torch
        proto = import_torch(data, file, stem, tables, pack, notes)
    elif fmt == "caffe":
        from engine.core.importers.caffe import import_caffe
        wdata = (read_bytes(weights), display_path(weights)) if weights is not None else None
        proto = import_caffe(data, text, file, stem, tables, pack, notes, wdata)
    else:
        from engine.core.importers.onnx import import_onnx
        proto, ge_dump = import_onnx(data, text, file, stem, tables, pack, notes)
    from engine.core.dumpio import build_model
    model = build_model(proto, file)
    if ge_dump:
        from engine.core.importers.derive import derive_attrs, fill_port_names
        derive_attrs(model, pack_folder(pack), notes)
        fill_port_names(model, pack_folder(pack), pack, notes)
    return model, notes


def check_tables(pack_dir: Path) -> list[str]:
    """Read every import table the pack (or its base) has, strictly; InputError lists all
    their problems. Returns the tables read."""
    from engine.core.errors import Collector
    from engine.core.importers.tables import find_table, load_tables
    readers = {"tensorflow": "engine.core.importers.tensorflow:TfConfig", "onnx": "engine.core.importers.onnx:OnnxConfig",
               "caffe": "engine.core.importers.caffe:read_config", "torch": "engine.core.importers.torch:TorchConfig"}
    problems = Collector()
    read = []
    import importlib
    for fmt, where in readers.items():
        if find_table(pack_dir, f"{fmt}.yaml") is None:
            continue
        module, _, name = where.partition(":")
        try:
            getattr(importlib.import_module(module), name)(load_tables(pack_dir, fmt))
            read.append(f"{fmt}.yaml")
        except InputError as exc:
            problems.problems.extend(exc.problems)
    path = find_table(pack_dir, "ge-dump.yaml")
    if path is not None:
        from engine.core.importers.derive import _read
        try:
            _read(path)
            read.append("ge-dump.yaml")
        except InputError as exc:
            problems.problems.extend(exc.problems)
    problems.check()
    return read
