"""The pack's located YAML, read for diffing.

`Canon` prints any pack value canonically: a DSL scalar prints as its parsed
value (`str(expr)`, so re-wrapping or re-quoting a rule is no change), other
scalars as YAML would. It also finds what a DSL value depends on: the pack
functions it calls and the op classes it tests.

Note [DSL by text]: the loader records every DSL value it parsed with its source
text (`Pack.dsl_sources`); a scalar is DSL when its text is among them. Equal
texts parse to equal values, so where a text was met does not matter.
"""
from __future__ import annotations

from typing import Any, Iterator

from engine.dsl.ast import Call, IsClass, walk
from engine.core.errors import Loc
from engine.core.yamlloc import YList, YMap
from engine.pack.overlay import ID_KEYS, keyed_items, list_key  # noqa: F401  (one definition: overlay paths name items alike)

REF_OF_KEY = {"id": "rule", "name": "name", "pass": "pass", "attr": "attr"}


def is_scalar(v: Any) -> bool:
    return not isinstance(v, (dict, list))


def is_flat(v: Any) -> bool:
    """A scalar, or a list of scalars / lists of scalars (compared as one field)."""
    if is_scalar(v):
        return True
    if isinstance(v, list) and not isinstance(v, dict):
        return all(is_scalar(x) or (isinstance(x, list) and all(is_scalar(y) for y in x)) for x in v)
    return False


def item_loc(container: Any, index: Any, fallback: Loc | None) -> Loc | None:
    """Where a mapping value / list item starts."""
    if isinstance(container, YMap):
        return container.value_locs.get(index, fallback)
    if isinstance(container, YList):
        return container.item_locs[index] if index < len(container.item_locs) else fallback
    return fallback


def key_loc(container: Any, key: Any) -> Loc | None:
    return container.key_locs.get(key) if isinstance(container, YMap) else None


class Canon:
    def __init__(self, pack):
        self.dsl = {}
        for text, value in getattr(pack, "dsl_sources", ()):
            self.dsl.setdefault(str(text), value)

    def expr(self, v: Any):
        return self.dsl.get(v) if isinstance(v, str) else None

    def scalar(self, v: Any) -> str:
        e = self.expr(v)
        if e is not None:
            return str(e)
        if v is None:
            return "null"
        if v is True:
            return "true"
        if v is False:
            return "false"
        return str(v)

    def text(self, v: Any, drop: tuple[str, ...] = ()) -> str:
        """One-line canonical rendering (mappings keep their key order)."""
        if isinstance(v, dict):
            return "{" + ", ".join(f"{k}: {self.text(x)}" for k, x in v.items() if k not in drop) + "}"
        if isinstance(v, list):
            return "[" + ", ".join(self.text(x) for x in v) + "]"
        return self.scalar(v)

    def content(self, v: Any, key: str | None = None) -> str:
        """What an entry says, apart from its name and doc (rename/move detection)."""
        return self.text(v, drop=tuple(k for k in (key, "doc") if k))

    def uses(self, v: Any) -> tuple[set[str], set[str]]:
        """(functions called, op classes tested) anywhere in a value."""
        calls: set[str] = set()
        classes: set[str] = set()
        for s in scalars(v):
            e = self.expr(s)
            if e is None or not hasattr(e, "loc") or hasattr(e, "inputs"):
                continue
            for x in walk(e):
                if isinstance(x, Call):
                    calls.add(x.fn)
                elif isinstance(x, IsClass):
                    classes.add(x.cls)
        return calls, classes


def scalars(v: Any) -> Iterator[Any]:
    if isinstance(v, dict):
        for x in v.values():
            yield from scalars(x)
    elif isinstance(v, list):
        for x in v:
            yield from scalars(x)
    else:
        yield v


def path_join(table: str, key: str, keyed: bool) -> str:
    if not table:
        return key
    return f"{table}[{key}]" if keyed else f"{table}.{key}"


def dsl_lines(text: str) -> list[str]:
    """A canonical DSL text broken before `then`/`else`/`and`/`or` and after `;`
    (outside string literals), so a changed rule diffs line by line."""
    out, cur, quote, i = [], "", False, 0
    breaks = (" then ", " else ", " and ", " or ")
    while i < len(text):
        ch = text[i]
        if ch == '"' and (i == 0 or text[i - 1] != "\\"):
            quote = not quote
        if not quote:
            if text.startswith("; ", i):
                out.append(cur + ";")
                cur, i = "", i + 2
                continue
            hit = next((b for b in breaks if text.startswith(b, i)), None)
            if hit and cur.strip():
                out.append(cur)
                cur, i = hit.strip() + " ", i + len(hit)
                continue
        cur += ch
        i += 1
    if cur:
        out.append(cur)
    return out


def loc_refs(loc: Loc) -> tuple[str, ...]:
    """`loc:FILE:LINE:COL` (exact) and `line:FILE:LINE` for a location.

    Note [cell precision]: a matrix row holds several cells on one line, so a
    provenance location with a column matches only the exact position."""
    if loc.col > 0:
        return (f"loc:{loc.file}:{loc.line}:{loc.col}", f"line:{loc.file}:{loc.line}")
    return (f"line:{loc.file}:{loc.line}",)
