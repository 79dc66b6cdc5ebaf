"""Where the shipped rule packs, grammars and report templates live.

In a source checkout (or an editable install) they are the top-level folders
`rules/`, `grammars/`, `reports/`; a wheel carries them as `engine/_data/<name>`.
"""
from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).resolve().parent.parent      # the engine package


def data_dir(name: str) -> Path:
    installed = _HERE / "_data" / name
    if installed.is_dir():
        return installed
    return _HERE.parent / name


def default_pack_dir() -> Path:
    return data_dir("rules") / "ge"


def grammar_path(name: str) -> Path:
    return data_dir("grammars") / name
