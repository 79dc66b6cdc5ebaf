"""The compiled-pack cache: a pack's parsed DSL, kept in the user's cache folder and
keyed by the content of the pack's files, so an unchanged pack loads without parsing.

What is cached: the parser's output (engine/dsl/parser.py `PARSED`, Note [parse
memo]), each entry keyed by the expression's text and where it stands, and the code
objects of the generated Python (engine/dsl/compiler.py `_CODE`, Note [code cache]),
keyed by their source. So a stale entry can never be used for different text, and
everything else a load does (schema checks, type checks) runs as always: a cached load
reports the same errors as a fresh one. Code objects are stored with `marshal`, whose
format belongs to one Python version, so the interpreter's magic number is in the key.

Where: `$MEMCONFLICT_CACHE_DIR`, else `$XDG_CACHE_HOME/memconflict`, else
`~/.cache/memconflict`; `MEMCONFLICT_CACHE=off` turns it off. A folder that cannot be
written is passed over silently (the load is just not faster). At most `KEEP` files
are kept, the least recently written removed first.
"""
from __future__ import annotations

import hashlib
import importlib.util
import marshal
import os
import pickle
import tempfile
from pathlib import Path

from engine.core.resources import grammar_path, user_cache_dir
from engine.dsl import compiler, parser

FORMAT = 2
KEEP = 32
_HERE = Path(__file__).resolve().parent.parent


def cache_dir() -> Path | None:
    return user_cache_dir()


def _parser_fingerprint() -> bytes:
    """What a parse depends on besides its text: the grammar and the code that builds the tree."""
    h = hashlib.sha256()
    for path in (grammar_path("dsl.lark"), _HERE / "dsl" / "parser.py", _HERE / "dsl" / "ast.py"):
        try:
            h.update(path.read_bytes())
        except OSError:
            h.update(b"?")
    return h.digest()


def pack_key(files: list[str]) -> str:
    """The content hash of a pack: its files' names (as shown in locations) and bytes."""
    h = hashlib.sha256(f"memconflict-pack-cache {FORMAT}\n".encode())
    h.update(importlib.util.MAGIC_NUMBER)
    h.update(_parser_fingerprint())
    for name in files:
        h.update(name.encode("utf-8", "surrogateescape") + b"\0")
        try:
            h.update(Path(name).read_bytes())
        except OSError:
            h.update(b"?")
        h.update(b"\0")
    return h.hexdigest()[:40]


def prime(files: list[str]) -> str | None:
    """Load the cached parses of this pack into the parser's memo; the cache key (or None)."""
    folder = cache_dir()
    if folder is None:
        return None
    key = pack_key(files)
    try:
        with open(folder / f"pack-{key}.cache", "rb") as fh:
            parsed_bytes, code = marshal.load(fh)
        entries = pickle.loads(parsed_bytes)
    except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError, TypeError, ValueError):
        return key
    if isinstance(entries, dict) and isinstance(code, dict):
        for k, v in entries.items():
            parser.PARSED.setdefault(k, v)
        for src, obj in code.items():
            compiler._CODE.setdefault(src, obj)
    return key


def store(key: str | None, files: list[str]) -> None:
    """Save the parses of this pack's files (after a load without errors)."""
    folder = cache_dir()
    if key is None or folder is None:
        return
    target = folder / f"pack-{key}.cache"
    if target.exists():
        return
    names = set(files)
    entries = {k: v for k, v in parser.PARSED.items() if k[2] in names}
    blob = marshal.dumps((pickle.dumps(entries, protocol=pickle.HIGHEST_PROTOCOL), dict(compiler._CODE)))
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".pack-", dir=folder)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(blob)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        _trim(folder)
    except OSError:
        return


def _trim(folder: Path) -> None:
    files = sorted(folder.glob("pack-*.cache"), key=lambda p: p.stat().st_mtime)
    for old in files[:-KEEP]:
        old.unlink(missing_ok=True)
