"""Reading a graph file by its suffix: GE dumps (text or binary) or the YAML graph form."""
from __future__ import annotations

from pathlib import Path

YAML_SUFFIXES = {".yaml", ".yml"}


def load_graph(path: str, pack=None):
    """A GE dump (.txt/.pbtxt/.pb) or a YAML graph; returns (model, options from the file)."""
    if Path(path).suffix.lower() in YAML_SUFFIXES:
        from engine.core.yamlgraph import load_yaml_graph
        return load_yaml_graph(path, pack)
    from engine.core.dumpio import load_model
    return load_model(path), {}
