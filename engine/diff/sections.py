"""Specialised differs: the parts of a section whose meaning is not its YAML shape.

* `rw_conflict`: the decision matrix and CombineInputRW are tables; a change is a
  cell (`matrix[ReadOnlyConst][Writeable]: do_nothing → insert_identity`), cited
  as the RW pass cites it in an isolation's provenance (`cell`, `cell_loc`).
* `layout_conflict`: every unordered attribute pair is in exactly one class —
  wildcard no-conflict, absolute no-conflict, absolute conflict, registered to a
  checker, or unregistered (never a conflict). A change is a pair moving between
  classes or re-pointed to another checker; a re-pointing that only follows a
  checker rename is not reported again.

Everything else in these sections is left to the generic comparison.
"""
from __future__ import annotations

from typing import Any

from engine.core.errors import Loc
from engine.diff.model import Side
from engine.diff.differs import register_differ
from engine.diff.tree import item_loc

CELL_TABLES = ("matrix", "combine_input")
PAIR_KEYS = ("wildcard_no_conflict", "absolute_no_conflict", "absolute_conflict", "registrations")


@register_differ("rw_conflict")
def diff_rw(d, section: str, ov: dict, nv: dict) -> set:
    handled = set()
    for table in CELL_TABLES:
        if isinstance(ov.get(table), dict) and isinstance(nv.get(table), dict):
            handled.add(table)
            _cells(d, section, table, ov[table], nv[table])
    return handled


def _cells(d, section: str, table: str, a: dict, b: dict) -> None:
    ca, cb = _grid(a), _grid(b)
    path = f"{section}.{table}"
    for key in list(cb) + [k for k in ca if k not in cb]:
        (va, la), (vb, lb) = ca.get(key, (None, None)), cb.get(key, (None, None))
        if va == vb:
            continue
        cell = f"{table}[{key[0]}][{key[1]}]"
        refs = (f"cell:{cell}",)
        kind = "changed" if va is not None and vb is not None else ("added" if va is None else "removed")
        d.emit(section, path, f"{key[0]}][{key[1]}", kind, f"{va or '—'} → {vb or '—'}", keyed=True,
               old=Side(la, va or "", cell, path) if va is not None else None,
               new=Side(lb, vb or "", cell, path) if vb is not None else None,
               old_refs=d.o.refs(section, path, "", [la], refs) if va is not None else (),
               new_refs=d.n.refs(section, path, "", [lb], refs) if vb is not None else (), entry=False)


def _grid(t: dict) -> dict[tuple[str, str], tuple[str, Loc | None]]:
    out = {}
    for row, cols in t.items():
        if not isinstance(cols, dict):
            continue
        for col, v in cols.items():
            out[(str(row), str(col))] = (str(v), item_loc(cols, col, None))
    return out


# ---- layout pair classes ---------------------------------------------------------------------
@register_differ("layout_conflict")
def diff_layout(d, section: str, ov: dict, nv: dict) -> set:
    oc, nc = d.o.pack.configs.get(section), d.n.pack.configs.get(section)
    if oc is None or nc is None:
        return set()
    renamed = _checker_renames(oc, nc)
    a, b = _classes(oc), _classes(nc)
    order = {x: i for i, x in enumerate(list(nc.attributes) + [x for x in oc.attributes if x not in nc.attributes])}
    path = f"{section}.pairs"
    for pair in sorted(set(a) | set(b), key=lambda p: sorted(order.get(x, 99) for x in p)):
        (ka, la), (kb, lb) = a.get(pair, ("unregistered", None)), b.get(pair, ("unregistered", None))
        if _follow(ka, renamed) == kb:
            continue
        name = " × ".join(sorted(pair, key=lambda x: order.get(x, 99))) if len(pair) == 2 else f"{next(iter(pair))} × {next(iter(pair))}"
        refs = (f"pair:{_pair_key(pair)}",)
        kind = "changed" if ka.startswith("registered") and kb.startswith("registered") else "moved"
        verb = "re-pointed" if kind == "changed" else "moved"
        d.emit(section, path, name, kind, f"{verb} {ka} → {kb}", keyed=True,
               old=Side(la, ka, name, _table_of(section, ka)), new=Side(lb, kb, name, _table_of(section, kb)),
               details=(("-", f"{name}: {ka}" + (f" ({d.o.src.show_loc(la)})" if la else "")),
                        ("+", f"{name}: {kb}" + (f" ({d.n.src.show_loc(lb)})" if lb else ""))),
               old_refs=d.o.refs(section, path, "", [la], refs), new_refs=d.n.refs(section, path, "", [lb], refs),
               entry=False)
    return set(PAIR_KEYS)


def _pair_key(pair) -> str:
    xs = sorted(pair)
    return f"{xs[0]} × {xs[-1]}"


def _table_of(section: str, cls: str) -> str:
    if cls.startswith("registered"):
        return f"{section}.registrations"
    return {"absolute conflict": f"{section}.absolute_conflict",
            "absolute no-conflict": f"{section}.absolute_no_conflict",
            "wildcard no-conflict": f"{section}.wildcard_no_conflict"}.get(cls, "")


def _classes(cfg: Any) -> dict[frozenset, tuple[str, Loc | None]]:
    out: dict[frozenset, tuple[str, Loc | None]] = {}
    for x in cfg.attributes:
        for y in cfg.attributes:
            if x in cfg.wildcard or y in cfg.wildcard:
                out[frozenset((x, y))] = ("wildcard no-conflict", None)
    for p, cite in cfg.abs_no_conflict.items():
        out[p] = ("absolute no-conflict", cite.loc)
    for p, cite in cfg.abs_conflict.items():
        out[p] = ("absolute conflict", cite.loc)
    for p, reg in cfg.registrations.items():
        out[p] = (f"registered: {reg.checker}", reg.loc)
    return out


def _checker_renames(oc: Any, nc: Any) -> dict[str, str]:
    gone = [n for n in oc.checkers if n not in nc.checkers]
    new = [n for n in nc.checkers if n not in oc.checkers]
    out = {}
    for g in gone:
        body = (str(oc.checkers[g].body), oc.checkers[g].per_symbol)
        for n in new:
            if (str(nc.checkers[n].body), nc.checkers[n].per_symbol) == body and n not in out.values():
                out[g] = n
                break
    return out


def _follow(cls: str, renamed: dict[str, str]) -> str:
    if cls.startswith("registered: "):
        name = cls[len("registered: "):]
        return f"registered: {renamed.get(name, name)}"
    return cls
