"""From an isolation's provenance back to the rule changes that caused it.

A pass records, with every node it inserts, the Cite of the item that decided
(rule id and location) and facts such as the typing rules, the matrix cell, the
layout pair and its table entry, the checker (Cites too) and the attributes of
both anchors. `raw_refs` turns those into references (`rule:`, `loc:`, `line:`,
`cell:`, `pair:`, `attr:`, `pass:`).

`PackIndex` widens them with what the deciding entries depend on: the pack
functions their DSL calls (transitively) and the op classes it tests, so a
changed function or op class is linked to the isolations whose rules use it.
A rule's DSL includes the fields around it that it runs under (a rewrite
step's `match`/`let`, a rule set's `gate`), not its peers in the same table.
"""
from __future__ import annotations

from typing import Any

from engine.core.errors import Cite, Loc
from engine.diff.model import Change
from engine.diff.packdiff import PackSide
from engine.diff.tree import is_flat, is_scalar, item_loc, key_loc, keyed_items, list_key, loc_refs, path_join

def cite_refs(cite: Cite, exact: bool) -> list[str]:
    """The rule a Cite names and where: the exact position for the deciding item and
    for a cell (Note [cell precision]), the line for an item a fact cites."""
    out = [f"rule:{cite.rule_id}"] if cite.rule_id else []
    loc = cite.loc if exact or cite.row is not None else Loc(cite.loc.file, cite.loc.line)
    return out + list(loc_refs(loc)[:1])


def _pair(text: str) -> str | None:
    parts = [p.strip() for p in text.split("×")]
    if len(parts) != 2 or not all(parts):
        return None
    a, b = sorted(parts)
    return f"pair:{a} × {b}"


def raw_refs(pass_id: str, rule: str, cite: Cite | None, reason: dict) -> list[str]:
    """References named by one provenance record (computed in the workers)."""
    out = {f"pass:{pass_id}"}
    if rule:
        out.add(f"rule:{rule}")
    if cite is not None:
        out.update(cite_refs(cite, True))
    for key, v in reason.items():
        if isinstance(v, list) and not key.endswith("_marks"):
            continue             # anchor lists (a symbol's members, ...) cite no rule
        for x in v if isinstance(v, list) else [v]:
            if isinstance(x, Cite):
                out.update(cite_refs(x, False))
            elif not isinstance(x, str):
                continue
            elif key == "cell":
                out.add(f"cell:{x}")
            elif key == "pair":
                p = _pair(x)
                if p:
                    out.add(p)
            elif key.endswith("_marks"):
                out.add(f"attr:{x}")
    return sorted(out)


class PackIndex:
    """Which functions and op classes each entry of a pack depends on."""

    def __init__(self, side: PackSide):
        self.side = side
        self.canon = side.canon
        self.at: dict[str, int] = {}               # loc:/line: ref → entry
        self.named: dict[str, list[int]] = {}      # rule:/attr:/pass: ref → entries
        self.entries: list[tuple[set, set, tuple]] = []   # (calls, classes, function scope)
        self.functions: dict[str, tuple[set, set, tuple]] = {}
        self._closure: dict[int, frozenset] = {}
        for name, (value, loc) in side.sections.items():
            self._walk(name, value, loc, set(), set(), ())
        for rid, loc in side.pack.rule_ids.items():
            k = self.at.get(loc_refs(loc)[0]) if loc.col > 0 else None
            k = k if k is not None else self.at.get(f"line:{loc.file}:{loc.line}")
            if k is not None:
                self.named.setdefault(f"rule:{rid}", []).append(k)

    def _walk(self, path: str, value: Any, loc: Loc | None, calls: set, classes: set, scope: tuple,
              keyed_ref: str | None = None) -> None:
        if not isinstance(value, (dict, list)):
            return
        own_c, own_k = self.canon.uses(value)
        k = len(self.entries)
        self.entries.append((own_c | calls, own_k | classes, scope))
        for at in (loc, getattr(value, "loc", None)):
            for r in loc_refs(at) if at is not None else ():
                self.at[r] = k
        if keyed_ref:
            self.named.setdefault(keyed_ref, []).append(k)
        if isinstance(value, list):
            lk = list_key(value)
            keys = keyed_items(value, lk) if lk else [(f"#{i + 1}", i) for i in range(len(value))]
            for name, i in keys:
                ref = f"{'rule' if lk == 'id' else lk}:{name.split('#')[0]}" if lk else None
                self._walk(path_join(path, name, True), value[i], item_loc(value, i, None), calls, classes, scope, ref)
            return
        if "functions" in value and isinstance(value["functions"], dict):
            scope = (f"{path}.functions",) + scope
            for fname, f in value["functions"].items():
                self.functions[f"fn:{path}.functions/{fname}"] = (*self.canon.uses(f), scope)
        table = all(isinstance(x, (dict, list)) and not is_flat(x) for x in value.values())
        for key, child in value.items():
            if is_scalar(child):
                continue
            c2, k2 = set(calls), set(classes)
            if not table:      # a record: the child runs under its sibling fields
                for sk, sv in value.items():
                    if sk != key and sk != "functions" and _context(sv):
                        sc, skl = self.canon.uses(sv)
                        c2 |= sc
                        k2 |= skl
            self._walk(path_join(path, str(key), False), child, key_loc(value, key) or item_loc(value, key, None),
                       c2, k2, scope)

    def closure(self, k: int) -> frozenset:
        hit = self._closure.get(k)
        if hit is not None:
            return hit
        calls, classes, scope = self.entries[k]
        out = {f"class:{c}" for c in classes}
        todo = [(c, scope) for c in calls]
        while todo:
            name, sc = todo.pop()
            ref = next((f"fn:{t}/{name}" for t in sc if f"fn:{t}/{name}" in self.functions), None)
            if ref is None or ref in out:
                continue
            out.add(ref)
            fc, fk, fscope = self.functions[ref]
            out.update(f"class:{c}" for c in fk)
            todo.extend((c, fscope) for c in fc)
        self._closure[k] = frozenset(out)
        return self._closure[k]

    def expand(self, refs: list[str]) -> frozenset:
        """The references plus the functions/classes of the entries they name."""
        out = set(refs)
        for r in refs:
            ks = self.named.get(r, []) if r.startswith(("rule:", "attr:")) else \
                ([self.at[r]] if r in self.at else [])
            for k in ks:
                out |= self.closure(k)
        return frozenset(out)


def _context(v: Any) -> bool:
    """Sibling fields a rule runs under: DSL scalars, flat lists, mappings of those."""
    if is_flat(v):
        return True
    return isinstance(v, dict) and all(is_flat(x) for x in v.values())


class Linker:
    """Matches provenance references against the changes' references."""

    def __init__(self, changes: list[Change], old: PackIndex, new: PackIndex, pass_sections: dict[str, str],
                 var_sections: set[str] = frozenset()):
        self.changes = changes
        self.old, self.new = old, new
        self.pass_sections = pass_sections
        self.var_sections = set(var_sections)
        self.by_old: dict[str, list[int]] = {}
        self.by_new: dict[str, list[int]] = {}
        for i, c in enumerate(changes):
            if c.cosmetic:       # doc text cannot change what a pass does
                continue
            for r in c.old_refs:
                if not r.startswith("section:"):
                    self.by_old.setdefault(r, []).append(i)
            for r in c.new_refs:
                if not r.startswith("section:"):
                    self.by_new.setdefault(r, []).append(i)

    def in_sections(self, sections: set[str]) -> list[str]:
        """Changes in these sections (or files they point to, `section:file`)."""
        return [c.id for c in self.changes if not c.cosmetic and c.section.split(":")[0] in sections]

    def link(self, pass_id: str, old_refs: list[str] | None, new_refs: list[str] | None) -> tuple[list[str], str]:
        """(change ids, how): `direct` through the deciding rule or what it uses,
        `pass` through a changed pipeline step / pass entry, `candidate` = the
        changes in the pass's section, `none`."""
        hits: set[int] = set()
        for refs, idx, table in ((old_refs, self.old, self.by_old), (new_refs, self.new, self.by_new)):
            if refs is None:
                continue
            for r in idx.expand(refs):
                if not r.startswith("pass:"):
                    hits.update(table.get(r, ()))
        if hits:
            return [self.changes[i].id for i in sorted(hits)], "direct"
        ref = f"pass:{pass_id}"
        via = sorted(set(self.by_old.get(ref, ())) | set(self.by_new.get(ref, ())))
        if via:
            return [self.changes[i].id for i in via], "pass"
        section = self.pass_sections.get(pass_id)
        cands = [c.id for c in self.changes if section and c.section == section and not c.cosmetic]
        return (cands, "candidate") if cands else ([], "none")
