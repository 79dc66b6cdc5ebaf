"""Reading a graph file: the YAML graph form by its suffix, any other model (GE dumps,
TensorFlow, ONNX) by its content (engine/core/importers)."""
from __future__ import annotations

from pathlib import Path

YAML_SUFFIXES = {".yaml", ".yml"}


def load_graph(path: str, pack=None, fmt: str | None = None):
    """A model file or a YAML graph; returns (model, options from the file). The import
    notes (derived attributes, ...) are on `model.notes`."""
    if fmt is None and Path(path).suffix.lower() in YAML_SUFFIXES:
        from engine.core.yamlgraph import load_yaml_graph
        return load_yaml_graph(path, pack)
    from engine.core.importers import load_model_file
    model, notes = load_model_file(path, pack, fmt)
    model.notes = notes
    return model, {}
