"""Semantic diff of two rule packs.

Every section is compared entry by entry on its located YAML: mappings by key,
lists of mappings by their identity key (`id`, `name`, `pass`, `attr`; order
changes are reported as moves in the list), other lists by position, and values
canonically (a DSL value by `str(expr)`). A section with a specialised differ
(engine/diff/sections.py, keyed on section or algorithm name) handles the parts
it knows — the RW matrix cells, the layout pair tables — and leaves the rest to
this generic comparison, so a section added to a pack is diffed without code.

Afterwards an entry removed in one place and added in another with the same
content becomes one `renamed` (same table) or `moved` (other table) change.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from engine.core.errors import Collector, Loc
from engine.core.yamlloc import YMap, load_yaml
from engine.diff import sections  # noqa: F401  (registers the specialised differs)
from engine.diff.differs import DIFFERS
from engine.diff.model import Change, PackDiff, PackInfo, Side
from engine.diff.source import PackSource
from engine.pack.overlay import resolve_pack
from engine.diff.tree import (REF_OF_KEY, loc_refs, Canon, dsl_lines, is_flat, item_loc, key_loc,
    keyed_items, list_key, path_join)

META_KEYS = ("name", "version", "schema_version", "description", "include")
SHORT = 70


class PackSide:
    """One pack as the differ reads it."""

    def __init__(self, src: PackSource):
        self.src = src
        self.pack = src.pack
        self.canon = Canon(self.pack)
        self.rule_at: dict[tuple[str, int], str] = {}
        for rid, loc in self.pack.rule_ids.items():
            self.rule_at.setdefault((loc.file, loc.line), rid)
        # the pack as resolved (an overlay with its base merged in), read afresh
        res = resolve_pack(Path(src.folder), Collector())
        self.manifest = res.manifest
        self.sections: dict[str, tuple[Any, Loc]] = {
            str(key): (value, res.sections.key_locs[key]) for key, value in res.sections.items()}

    def refs(self, section: str, table: str, key: str, locs, extra=()) -> frozenset:
        out = {f"section:{section}", *extra}
        for loc in locs:
            if loc is None or loc.line <= 0:
                continue
            out.update(loc_refs(loc))
            rid = self.rule_at.get((loc.file, loc.line))
            if rid:
                out.add(f"rule:{rid}")
        if key and table.rsplit(".", 1)[-1] == "functions":
            out.add(f"fn:{table}/{key}")
        top = {"op_classes": "class", "ops": "op", "passes": "pass"}.get(table)
        if top and key:
            out.add(f"{top}:{key}")
        return frozenset(out)


class Differ:
    def __init__(self, old: PackSide, new: PackSide):
        self.o, self.n = old, new
        self.out: list[Change] = []

    # ---- emitting --------------------------------------------------------------------
    def emit(self, section: str, table: str, key: str, kind: str, summary: str, *, keyed: bool = False,
             old: Side | None = None, new: Side | None = None, details=(), old_refs=(), new_refs=(),
             content: str = "", entry: bool = True, cosmetic: bool = False) -> Change:
        c = Change(path_join(table, key, keyed) if key else table, section, table, key, kind, summary, old, new,
                   tuple(details), frozenset(old_refs), frozenset(new_refs), content, entry, cosmetic)
        self.out.append(c)
        return c

    def added(self, section, table, key, keyed, value, loc, ref=(), what="entry"):
        n = self.n
        self.emit(section, table, key, "added", f"{_what(table, what)} {key} added", keyed=keyed,
                  new=Side(loc, _clip(n.canon.text(value)), key, table),
                  new_refs=n.refs(section, table, key, [loc], ref), content=self._content(n, value, keyed, table))

    def removed(self, section, table, key, keyed, value, loc, ref=(), what="entry"):
        o = self.o
        self.emit(section, table, key, "removed", f"{_what(table, what)} {key} removed", keyed=keyed,
                  old=Side(loc, _clip(o.canon.text(value)), key, table),
                  old_refs=o.refs(section, table, key, [loc], ref), content=self._content(o, value, keyed, table))

    @staticmethod
    def _content(side: PackSide, value: Any, keyed: bool, table: str) -> str:
        key = list_key([value]) if keyed and isinstance(value, dict) else None
        return side.canon.content(value, key)

    # ---- comparing -------------------------------------------------------------------
    def section(self, name: str, ov: Any, nv: Any, oloc: Loc | None, nloc: Loc | None) -> None:
        if ov is None and nv is not None:
            return self.added(name, "", name, False, nv, nloc, what="section")
        if nv is None and ov is not None:
            return self.removed(name, "", name, False, ov, oloc, what="section")
        handled: set = set()
        special = differ_for(name)
        if special is not None and isinstance(ov, dict) and isinstance(nv, dict):
            handled = special(self, name, ov, nv) or set()
        self.compare(name, "", name, False, ov, nv, oloc, nloc, skip=handled)

    def compare(self, section: str, table: str, key: str, keyed: bool, ov: Any, nv: Any,
                oloc: Loc | None, nloc: Loc | None, ref=(), skip=frozenset()) -> None:
        """An entry present on both sides."""
        path = path_join(table, key, keyed)
        o, n = self.o, self.n
        if isinstance(ov, dict) and isinstance(nv, dict):
            fields, names, olocs, nlocs = [], [], [oloc], [nloc]
            for k in _keys(ov, nv):
                if k in skip:
                    continue
                a, b = ov.get(k), nv.get(k)
                la, lb = item_loc(ov, k, oloc), item_loc(nv, k, nloc)
                if (k not in ov or is_flat(a)) and (k not in nv or is_flat(b)):
                    det = self.field(k, a, b, k in ov, k in nv)
                    if det:
                        fields += det
                        names.append(str(k))
                        olocs.append(la)
                        nlocs.append(lb)
                elif k not in ov:
                    self.added(section, path, str(k), False, b, key_loc(nv, k) or lb)
                elif k not in nv:
                    self.removed(section, path, str(k), False, a, key_loc(ov, k) or la)
                else:
                    self.compare(section, path, str(k), False, a, b, key_loc(ov, k) or la, key_loc(nv, k) or lb)
            if fields:
                summary = _summary(fields, names)
                self.emit(section, table, key, "changed", summary, keyed=keyed,
                          old=Side(oloc, o.canon.text(ov), key, table), new=Side(nloc, n.canon.text(nv), key, table),
                          details=fields, old_refs=o.refs(section, table, key, olocs, ref),
                          new_refs=n.refs(section, table, key, nlocs, ref), entry=False,
                          cosmetic=set(names) == {"doc"})
        elif isinstance(ov, list) and isinstance(nv, list) and not (is_flat(ov) and is_flat(nv)):
            self.list(section, path, ov, nv, oloc, nloc)
        else:
            det = self.field(key, ov, nv, True, True)
            if det:
                self.emit(section, table, key, "changed", _summary(det, [key]), keyed=keyed,
                          old=Side(oloc, o.canon.text(ov), key, table), new=Side(nloc, n.canon.text(nv), key, table),
                          details=det, old_refs=o.refs(section, table, key, [oloc], ref),
                          new_refs=n.refs(section, table, key, [nloc], ref), entry=False)

    def list(self, section: str, path: str, ov: list, nv: list, oloc, nloc) -> None:
        k = list_key(ov)
        if k is not None and k == list_key(nv):
            return self.keyed_list(section, path, k, ov, nv)
        ot = [self.o.canon.text(x) for x in ov]
        nt = [self.n.canon.text(x) for x in nv]
        for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, ot, nt, autojunk=False).get_opcodes():
            if op == "equal":
                continue
            if op == "replace" and i2 - i1 == j2 - j1:
                for i, j in zip(range(i1, i2), range(j1, j2)):
                    self.compare(section, path, f"#{j + 1}", True, ov[i], nv[j],
                                 item_loc(ov, i, oloc), item_loc(nv, j, nloc))
                continue
            for i in range(i1, i2):
                self.removed(section, path, f"#{i + 1}", True, ov[i], item_loc(ov, i, oloc), what="item")
            for j in range(j1, j2):
                self.added(section, path, f"#{j + 1}", True, nv[j], item_loc(nv, j, nloc), what="item")

    def keyed_list(self, section: str, path: str, k: str, ov: list, nv: list) -> None:
        ok, nk = keyed_items(ov, k), keyed_items(nv, k)
        om, nm = dict(ok), dict(nk)
        kind = REF_OF_KEY[k]
        for name, j in nk:
            ref = (f"{kind}:{name.split('#')[0]}",)
            if name not in om:
                self.added(section, path, name, True, nv[j], item_loc(nv, j, None), ref, kind)
            else:
                i = om[name]
                self.compare(section, path, name, True, ov[i], nv[j], item_loc(ov, i, None), item_loc(nv, j, None), ref)
        for name, i in ok:
            if name not in nm:
                self.removed(section, path, name, True, ov[i], item_loc(ov, i, None), (f"{kind}:{name.split('#')[0]}",), kind)
        self.order(section, path, kind, [x for x, _ in ok], [x for x, _ in nk], ov, nv, om, nm)

    def order(self, section, path, kind, old_keys, new_keys, ov, nv, om, nm) -> None:
        a = [x for x in old_keys if x in nm]
        b = [x for x in new_keys if x in om]
        if a == b:
            return
        kept = set()
        for blk in difflib.SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks():
            kept.update(a[blk.a:blk.a + blk.size])
        for name in b:
            if name in kept:
                continue
            i, j = om[name], nm[name]
            lo, ln = item_loc(ov, i, None), item_loc(nv, j, None)
            ref = (f"{kind}:{name.split('#')[0]}",)
            self.emit(section, path, name, "reordered", f"{kind} {name} moved from position {i + 1} to {j + 1}",
                      keyed=True, old=Side(lo, f"position {i + 1}: " + " → ".join(a), name, path),
                      new=Side(ln, f"position {j + 1}: " + " → ".join(b), name, path),
                      details=(("-", "order: " + ", ".join(a)), ("+", "order: " + ", ".join(b))),
                      old_refs=self.o.refs(section, path, name, [lo], ref),
                      new_refs=self.n.refs(section, path, name, [ln], ref), entry=False)

    def field(self, k: Any, a: Any, b: Any, has_a: bool, has_b: bool) -> list[tuple[str, str]]:
        """Detail lines for one flat field ([] when equal)."""
        oc, nc = self.o.canon, self.n.canon
        if not has_a:
            return [("+", f"{k}: {nc.text(b)}")]
        if not has_b:
            return [("-", f"{k}: {oc.text(a)}")]
        ta, tb = oc.text(a), nc.text(b)
        if ta == tb:
            return []
        if isinstance(a, list) and isinstance(b, list):
            return _list_detail(k, [oc.text(x) for x in a], [nc.text(x) for x in b])
        if oc.expr(a) is not None and nc.expr(b) is not None and (len(ta) > SHORT or len(tb) > SHORT):
            out = [("~", f"{k}:")]
            for line in difflib.ndiff(dsl_lines(ta), dsl_lines(tb)):
                if line[:1] in "-+ ":
                    out.append((line[0], "    " + line[2:]))
            return out
        return [("~", f"{k}: {ta} → {tb}")]


def _clip(text: str, limit: int = 2000) -> str:
    """An added/removed entry's text as shown (a whole new section can be long)."""
    return text if len(text) <= limit else text[:limit] + f" … ({len(text) - limit} more characters)"


def _keys(a: dict, b: dict) -> list:
    return list(b) + [k for k in a if k not in b]


def _list_detail(k, a: list[str], b: list[str]) -> list[tuple[str, str]]:
    out = [("-", f"{k}: {x}") for x in a if x not in b] + [("+", f"{k}: {x}") for x in b if x not in a]
    if not out:
        out = [("~", f"{k}: order [{', '.join(a)}] → [{', '.join(b)}]")]
    return out


def _summary(fields: list[tuple[str, str]], names: list[str]) -> str:
    if len(fields) == 1 and len(fields[0][1]) <= 100:
        sign, text = fields[0]
        return {"+": "added ", "-": "removed "}.get(sign, "") + text
    uniq = list(dict.fromkeys(n for n in names if n))
    if len(uniq) == 1 and all(s in "+-" for s, _ in fields):
        text = f"{uniq[0]}: " + " ".join(s + t.split(": ", 1)[-1] for s, t in fields)
        return text if len(text) <= 100 else text[:99] + "…"
    return ", ".join(uniq) + " changed" if uniq else "changed"


WHAT = {"op_classes": "op class", "ops": "op", "passes": "pass", "checkers": "checker", "functions": "function"}


def _what(table: str, default: str) -> str:
    return WHAT.get(table.rsplit(".", 1)[-1], default)


def differ_for(section: str):
    from engine.passes.registry import ALGORITHMS

    if section in DIFFERS:
        return DIFFERS[section]
    for algo in ALGORITHMS.values():
        if algo.section == section and algo.name in DIFFERS:
            return DIFFERS[algo.name]
    return None


# ---- renames and moves ---------------------------------------------------------------------
def pair_moves(changes: list[Change]) -> list[Change]:
    """A removed entry and an added one with the same (non-trivial) content are one
    rename (same table) or move (another table)."""
    added: dict[str, list[int]] = {}
    for i, c in enumerate(changes):
        if c.kind == "added" and c.entry and len(c.content) > 2:
            added.setdefault(c.content, []).append(i)
    merged: dict[int, Change] = {}
    dropped: set[int] = set()
    for i, r in enumerate(changes):
        if r.kind != "removed" or not r.entry or r.content not in added:
            continue
        cands = [j for j in added[r.content] if j not in dropped]
        if not cands:
            continue
        cands.sort(key=lambda j: (changes[j].table != r.table, changes[j].key != r.key))
        j = cands[0]
        a = changes[j]
        kind = "renamed" if a.table == r.table else "moved"
        what = f"{r.key} → {a.key}" if a.key != r.key else a.key
        where = f" (from {r.table} to {a.table})" if kind == "moved" else ""
        merged[j] = Change(a.id, a.section, a.table, a.key, kind, f"{kind} {what}{where}, content unchanged",
                           r.old, a.new, (("-", f"{r.table}: {r.key}"), ("+", f"{a.table}: {a.key}")),
                           r.old_refs, a.new_refs, a.content, True)
        dropped.update((i, j))
    return [merged.get(i, c) for i, c in enumerate(changes) if i not in dropped or i in merged]


# ---- whole packs ---------------------------------------------------------------------------
def pack_info(src: PackSource) -> PackInfo:
    p = src.pack
    md = Path(src.folder) / "CHANGES.md"
    return PackInfo(src.spec, p.name, p.version, p.schema_version, src.label,
                    md.read_text(encoding="utf-8") if md.is_file() else None)


def change_notes(old_md: str | None, new_md: str | None, same_pack: bool = True) -> list[tuple[str, str]]:
    """CHANGES.md entries (`## VERSION ...` blocks) of NEW whose version OLD does not list
    (all of them when the packs are different packs: their version logs are unrelated)."""
    def blocks(text):
        out, head, body = [], None, []
        for line in (text or "").splitlines():
            if line.startswith("## "):
                if head is not None:
                    out.append((head, "\n".join(body).strip()))
                head, body = line[3:].strip(), []
            elif head is not None:
                body.append(line)
        if head is not None:
            out.append((head, "\n".join(body).strip()))
        return out
    def version(head: str) -> str:
        return head.split()[0] if head.split() else head
    have = {version(h) for h, _ in blocks(old_md)} if same_pack else set()
    return [(h, b) for h, b in blocks(new_md) if version(h) not in have]


def diff_packs(old_src: PackSource, new_src: PackSource, sides: tuple | None = None) -> PackDiff:
    o, n = sides or (PackSide(old_src), PackSide(new_src))
    d = Differ(o, n)
    for key in META_KEYS:
        a, b = o.manifest.get(key), n.manifest.get(key)
        det = d.field(key, a, b, key in o.manifest, key in n.manifest)
        if det:
            d.emit("pack.yaml", "pack", key, "changed", _summary(det, [key]), details=det, entry=False,
                   cosmetic=key in ("name", "version", "description"),
                   old=Side(item_loc(o.manifest, key, None), o.canon.text(a)),
                   new=Side(item_loc(n.manifest, key, None), n.canon.text(b)))
    names = list(n.sections) + [s for s in o.sections if s not in n.sections]
    for name in names:
        ov, oloc = o.sections.get(name, (None, None))
        nv, nloc = n.sections.get(name, (None, None))
        d.section(name, ov, nv, oloc, nloc)
    for name in names:
        for file in sorted(set(_files(o, name)) | set(_files(n, name))):
            a, b = _load_side(o, name, file), _load_side(n, name, file)
            d.section(f"{name}:{file}", a, b, getattr(a, "loc", None), getattr(b, "loc", None))
    oi, ni = pack_info(old_src), pack_info(new_src)
    notes = change_notes(oi.changes_md, ni.changes_md, oi.name == ni.name)
    return PackDiff(oi, ni, _unique_ids(pair_moves(d.out)), notes)


def _unique_ids(changes: list[Change]) -> list[Change]:
    """An entry both changed and reordered keeps its id; the second record gets `@kind`."""
    seen: set[str] = set()
    out = []
    for c in changes:
        if c.id in seen:
            c = replace(c, id=f"{c.id}@{c.kind}")
        seen.add(c.id)
        out.append(c)
    return out


_FILE_RE = re.compile(r"^[\w./-]+\.ya?ml$")


def _files(side: PackSide, section: str) -> list[str]:
    """Pack files a section points to with `file:` (e.g. var_policy → variables.yaml)."""
    value = side.sections.get(section, (None, None))[0]
    f = value.get("file") if isinstance(value, YMap) else None
    return [str(f)] if isinstance(f, str) and _FILE_RE.match(f) and _file_path(side, section, f).is_file() else []


def _file_path(side: PackSide, section: str, file: str) -> Path:
    """A `file:` is relative to the pack file that names it (an overlay's may be its base's)."""
    value = side.sections.get(section, (None, None))[0]
    f = value.get("file") if isinstance(value, YMap) else None
    return Path(f.loc.file).parent / file if hasattr(f, "loc") and f == file else Path(side.src.folder) / file


def _load_side(side: PackSide, section: str, file: str):
    path = _file_path(side, section, file)
    return load_yaml(path) if path.is_file() else None
