"""Helpers for the diff tests (no tests here): edited copies of the shipped pack, and diffs of them."""
from __future__ import annotations

import atexit
import shutil
from pathlib import Path

from engine.diff.packdiff import diff_packs
from engine.diff.source import PackSource, load_source, open_source
from engine.core.resources import default_pack_dir

_LOADED: dict[str, PackSource] = {}
_OPENED: list[PackSource] = []


@atexit.register
def _close_all() -> None:
    """Sources are copied to temporary folders (Note [snapshot]); remove them."""
    for src in _OPENED:
        src.close()


def edited_pack(root: Path, edits: dict[str, list[tuple[str, str]]], name: str = "p") -> Path:
    """A copy of rules/ge with text replacements per file (each must match once or more)."""
    dst = root / name
    shutil.copytree(default_pack_dir(), dst)
    for file, pairs in edits.items():
        path = dst / file
        text = path.read_text(encoding="utf-8")
        for old, new in pairs:
            assert old in text, f"{file}: the edit's text is not in the shipped pack: {old!r}"
            text = text.replace(old, new)
        path.write_text(text, encoding="utf-8")
    return dst


def source(path) -> PackSource:
    """A loaded pack source (the shipped pack is loaded once per test session)."""
    key = str(path)
    if key == str(default_pack_dir()) and key in _LOADED:
        return _LOADED[key]
    src = open_source(key)
    _OPENED.append(src)
    load_source(src)
    if key == str(default_pack_dir()):
        _LOADED[key] = src
    return src


def diff(old, new):
    return diff_packs(source(old), source(new))


def by_id(d) -> dict:
    return {c.id: c for c in d.changes}


def shipped() -> Path:
    return default_pack_dir()
