"""Reading a graph file: the YAML graph form by its suffix, any other model (GE dumps,
TensorFlow, ONNX) by its content (engine/core/importers)."""
from __future__ import annotations

from pathlib import Path

from engine.core.errors import InputError, Loc, Problem

YAML_SUFFIXES = {".yaml", ".yml"}
GRAPH_SUFFIXES = (".txt", ".pbtxt", ".pb", ".yaml", ".yml", ".onnx", ".prototxt", ".om", ".pt2")   # what a folder is searched for


def collect_graphs(paths: list[str], what: str = "--graphs") -> list[str]:
    """Files as given; folders searched recursively (sorted) for GE dumps and YAML graphs;
    each file once, in that order."""
    out: list[str] = []
    problems = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            out += [str(f) for f in sorted(path.rglob("*")) if f.is_file() and f.suffix.lower() in GRAPH_SUFFIXES]
        elif path.is_file():
            out.append(str(path))
        else:
            problems.append(Problem(Loc(p), f"no such graph file or folder '{p}'", f"check the {what} path"))
    if problems:
        raise InputError(problems)
    return list(dict.fromkeys(out))


def load_graph(path: str, pack=None, fmt: str | None = None, weights: str | None = None):
    """A model file or a YAML graph; returns (model, options from the file). The import
    notes (derived attributes, ...) are on `model.notes`; `weights`: a Caffe network's
    .caffemodel."""
    if fmt is None and Path(path).suffix.lower() in YAML_SUFFIXES:
        from engine.core.yamlgraph import load_yaml_graph
        return load_yaml_graph(path, pack)
    from engine.core.importers import load_model_file
    model, notes = load_model_file(path, pack, fmt, weights)
    model.notes = notes
    return model, {}
