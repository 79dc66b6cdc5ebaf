"""Pack overlays: a pack whose `pack.yaml` names a `base:` pack holds only what
it changes. `resolve_pack` reads a pack folder — following `base:` to the end of
the chain — into its located YAML: the merged manifest and every section, as if
the pack had been written out in full. The loader and the diff read that.

An overlay's included files hold new sections, and `overlay:` lists of
operations applied in order to the base's sections:

    overlay:
      - add: rw_conflict.output_rules          # a list: `items`, at `before:`/`after:` an id
        before: rw/out/var-like
        items: [{id: rw/out/one-consumer, when: ..., value: SoftRead}]
      - add: ops                               # a mapping: `value` holds the new keys
        value: {MyOp: {signature: "MyOp(x) -> (y)"}}
      - replace: pipeline[inplace_support_check].stage
        value: stage1
      - remove: pipeline[graph_lint]           # an entry, a key, a scalar field ...
      - remove: layout_conflict.registrations  # ... or list items equal to `items`
        items: [{a: X, b: Y, checker: z}]

A path is a section name followed by `.key` (a mapping key) and `[key]` (a
mapping key, or the item of a rule list, pipeline or step list with that `id`,
`pass`, `name` or `attr`; a repeated one is `key#2`) — the ids `memconflict diff`
prints. Unknown keys and ids are located errors.

Note [locations]: an entry keeps the location of the file that wrote it last.
An added or replaced entry (rule, function, table row) cites the overlay; an
inherited one, or one of which only a field was replaced or removed, cites the
base file that holds its text (a report quotes the rule from there).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.core.errors import Collector, InputError, Loc, did_you_mean, display_path
from engine.core.schema import Reader, str_list
from engine.core.yamlloc import YList, YMap, load_yaml

ID_KEYS = ("id", "name", "pass", "attr")     # what names the items of a keyed list
OPS = ("add", "replace", "remove")


def list_key(items: list) -> str | None:
    """The identity key of a list of mappings, if every item has it as a scalar."""
    if not items or not all(isinstance(x, dict) for x in items):
        return None
    for k in ID_KEYS:
        if all(k in x and not isinstance(x[k], (dict, list)) and x[k] is not None for x in items):
            return k
    return None


def keyed_items(items: list, key: str) -> list[tuple[str, int]]:
    """(entry key, index); a repeated key gets `#2`, `#3` (a pass run twice)."""
    seen: dict[str, int] = {}
    out = []
    for i, x in enumerate(items):
        k = str(x[key])
        seen[k] = seen.get(k, 0) + 1
        out.append((k if seen[k] == 1 else f"{k}#{seen[k]}", i))
    return out


@dataclass
class Resolved:
    """A pack folder read as one pack (its bases merged in)."""

    root: Path
    manifest: YMap                       # pack.yaml: this pack's keys over its base's; `include` merged
    sections: YMap                       # section name → located value (key_locs: where each is defined)
    files: list[str] = field(default_factory=list)    # every pack file read, bases first
    chain: list[Path] = field(default_factory=list)   # this pack's folder, then its bases


def resolve_pack(root: Path, errors: Collector) -> Resolved | None:
    """Read `root` (a folder with pack.yaml) and its base chain; None if unusable
    (the reason is in `errors`)."""
    return _resolve(Path(root), errors, ())


def base_of(root: Path) -> str | None:
    """The `base:` a pack folder names (None: none, or unreadable)."""
    try:
        top = load_yaml(Path(root) / "pack.yaml")
    except InputError:
        return None
    base = top.get("base") if isinstance(top, dict) else None
    return str(base) if isinstance(base, str) else None


def base_chain(root: Path) -> list[Path]:
    """The folders a pack reads: itself, its base, its base's base ... (stops at
    a missing or repeated folder; `resolve_pack` reports those)."""
    out: list[Path] = []
    root = Path(root)
    while (root / "pack.yaml").is_file() and root.resolve() not in [p.resolve() for p in out]:
        out.append(root)
        base = base_of(root)
        if base is None:
            break
        root = Path(os.path.normpath(root / base))
    return out


def _empty_map(loc: Loc) -> YMap:
    m = YMap()
    m.loc, m.key_locs, m.value_locs = loc, {}, {}
    return m


def _resolve(root: Path, errors: Collector, seen: tuple[Path, ...]) -> Resolved | None:
    manifest_file = root / "pack.yaml"
    top = load_yaml(manifest_file)
    floc = Loc(display_path(manifest_file))
    if not isinstance(top, YMap):
        errors.error(getattr(top, "loc", floc), "pack.yaml must be a mapping", "write `name:`, `version:`, ... lines")
        return None
    base_name = top.get("base")
    base: Resolved | None = None
    if base_name is not None:
        base = _resolve_base(root, top, errors, seen)
        if base is None:
            return None
    include = top.get("include")
    if not isinstance(include, list):       # the loader reports a missing or malformed one
        include = []
    res = Resolved(root, _manifest(top, base), base.sections if base else _empty_map(floc),
                   list(base.files) if base else [], [root] + (base.chain if base else []))
    inherited = set(res.sections)
    ops: list[tuple[Any, Loc]] = []
    for name in str_list(include, "include", errors, top.loc):
        f = root / name
        if not f.is_file():
            errors.error(name.loc, f"included file '{name}' does not exist", f"create {display_path(f)} or remove it from include")
            continue
        res.files.append(display_path(f))
        doc = load_yaml(f)
        if not isinstance(doc, YMap):
            errors.error(getattr(doc, "loc", Loc(display_path(f))), "a pack file must be a mapping of sections", "")
            continue
        for key, value in doc.items():
            if key == "overlay":
                if base is None:
                    errors.error(doc.key_locs[key], "`overlay:` operations need a base pack",
                                 "name the pack they change in pack.yaml: `base: ../ge`")
                elif not isinstance(value, list):
                    errors.error(doc.value_locs[key], "overlay must be a list of operations",
                                 "write `- replace: SECTION.KEY` with `value:` (or add / remove)")
                else:
                    ops += [(op, value.item_locs[i]) for i, op in enumerate(value)]
                continue
            if key in inherited:
                errors.error(doc.key_locs[key], f"section '{key}' is already defined by the base pack "
                             f"(at {res.sections.key_locs[key]})", "change it with `overlay:` operations (add, replace, remove)")
                continue
            if key in res.sections:
                errors.error(doc.key_locs[key], f"section '{key}' is given twice",
                             f"it is already defined at {res.sections.key_locs[key]}")
                continue
            _put(res.sections, key, value, doc.key_locs[key], doc.value_locs[key])
    for op, loc in ops:
        _apply(res.sections, op, loc, errors)
    return res


def _resolve_base(root: Path, top: YMap, errors: Collector, seen: tuple[Path, ...]) -> Resolved | None:
    name = top["base"]
    loc = top.value_locs["base"]
    if not isinstance(name, str) or not name:
        errors.error(loc, "base must be the path of a pack folder", "write `base: ../ge` (relative to this pack)")
        return None
    folder = Path(os.path.normpath(root / name))
    if not (folder / "pack.yaml").is_file():
        errors.error(loc, f"base pack '{name}' not found: {display_path(folder)} has no pack.yaml",
                     "give the base pack's folder relative to this pack.yaml (e.g. `base: ../ge`)")
        return None
    chain = seen + (root.resolve(),)
    if folder.resolve() in chain:
        cycle = " → ".join(display_path(p) for p in chain + (folder.resolve(),))
        errors.error(loc, f"base packs form a cycle: {cycle}", "a pack cannot be its own base; point one `base:` elsewhere")
        return None
    return _resolve(folder, errors, chain)


def _manifest(top: YMap, base: Resolved | None) -> YMap:
    """This pack's pack.yaml keys over the base's; `include` is the base's file
    names followed by those of this pack's the base lacks (ge-doc names its
    files after the base files whose sections they change: the same list)."""
    if base is None:
        return top
    out = _empty_map(top.loc)
    for k in base.manifest:
        if k != "base":
            _put(out, k, base.manifest[k], base.manifest.key_locs[k], base.manifest.value_locs[k])
    for k in top:
        if k != "include":
            _put(out, k, top[k], top.key_locs[k], top.value_locs[k])
    inc = base.manifest.get("include")
    own = top.get("include")
    if isinstance(inc, YList) and isinstance(own, list):
        merged = YList(inc)
        merged.loc, merged.item_locs = inc.loc, list(inc.item_locs)
        for i, name in enumerate(own):
            if name not in merged:
                merged.append(name)
                merged.item_locs.append(own.item_locs[i])
        _put(out, "include", merged, base.manifest.key_locs["include"], inc.loc)
    return out


def _put(m: YMap, key: Any, value: Any, key_loc: Loc, value_loc: Loc) -> None:
    m[key] = value
    m.key_locs[key] = key_loc
    m.value_locs[key] = value_loc


# ---- paths ----------------------------------------------------------------------------
_STEP = re.compile(r"\.([^.\[\]]+)|\[([^\]]+)\]")


def parse_path(text: str) -> list[str] | None:
    """`a.b[c][d#2].e` → ['a', 'b', 'c', 'd#2', 'e'] (None if malformed)."""
    steps = _parse_path(text)
    return None if steps is None else [name for name, _ in steps]


def _parse_path(text: str) -> list[tuple[str, int]] | None:
    """The path's steps with the offset of each in the text."""
    m = re.match(r"[^.\[\]]+", text)
    if not m:
        return None
    out, i = [(m.group(0).strip(), 0)], m.end()
    while i < len(text):
        s = _STEP.match(text, i)
        if not s:
            return None
        g = 1 if s.group(1) is not None else 2
        out.append((s.group(g).strip(), s.start(g)))
        i = s.end()
    return out


def _at(loc: Loc, offset: int) -> Loc:
    """The location `offset` characters into a path scalar (after its quote, if quoted)."""
    try:
        line = Path(loc.file).read_text(encoding="utf-8").splitlines()[loc.line - 1]
    except (OSError, UnicodeDecodeError, IndexError):
        return loc
    return loc.shifted(0, offset + (line[loc.col - 1:loc.col] in ("'", '"')))


def _child(container: Any, key: str) -> Any:
    """The index of `key` in a mapping or keyed list (None if absent)."""
    if isinstance(container, dict):
        return key if key in container else None
    if isinstance(container, list):
        k = list_key(container)
        if k is not None:
            return dict(keyed_items(container, k)).get(key)
    return None


def _names(container: Any) -> list[str]:
    if isinstance(container, dict):
        return [str(k) for k in container]
    k = list_key(container) if isinstance(container, list) else None
    return [n for n, _ in keyed_items(container, k)] if k else []


def _shown(tree: YMap, steps: list[str]) -> str:
    """A path as `memconflict diff` prints it: `.key` in mappings, `[id]` in lists."""
    out, cur = "", tree
    for step in steps:
        out += f"[{step}]" if isinstance(cur, list) else (f".{step}" if out else step)
        cur = cur[_child(cur, step)]
    return out


def _walk(tree: YMap, parsed: list[tuple[str, int]], path: str, ploc: Loc, errors: Collector):
    """(container, index) of the last step; None after reporting an unknown step."""
    cur: Any = tree
    steps = [name for name, _ in parsed]
    for n, step in enumerate(steps):
        idx = _child(cur, step)
        if idx is None:
            loc = _at(ploc, parsed[n][1])
            where = _shown(tree, steps[:n]) or "the pack"
            if isinstance(cur, list) and list_key(cur) is None:
                errors.error(loc, f"'{where}' is a list without ids: '{step}' cannot name an item",
                             "add or remove its items by value with `items:`, or replace the whole list")
            elif not isinstance(cur, (dict, list)):
                errors.error(loc, f"'{where}' is a value, it has no '{step}'", f"address '{where}' itself")
            else:
                what = "section" if n == 0 else ("id" if isinstance(cur, list) else "key")
                errors.error(loc, f"unknown {what} '{step}' in {where}",
                             did_you_mean(step, _names(cur), what + "s"))
            return None
        if n == len(steps) - 1:
            return cur, idx
        cur = cur[idx]
    return None


# ---- operations -----------------------------------------------------------------------
def _apply(tree: YMap, op: Any, loc: Loc, errors: Collector) -> None:
    r = Reader(op, "overlay operation", errors, loc)
    given = [k for k in OPS if k in r.map]
    if len(given) != 1:
        errors.error(r.loc, "an overlay operation needs exactly one of add, replace, remove"
                     + (f" (got {', '.join(given)})" if given else ""),
                     "write `- add: PATH`, `- replace: PATH` or `- remove: PATH`")
        r.allowed.update(("add", "replace", "remove", "value", "items", "before", "after"))
        return r.done()
    kind = given[0]
    path = r.get(kind, str, required=True)
    value = r.get("value", object) if kind != "remove" else None
    items = r.get("items", list) if kind != "replace" else None
    pos = (r.get("before", str), r.get("after", str)) if kind == "add" else (None, None)
    r.done()
    if path is None:
        return
    ploc = r.value_loc(kind)
    steps = _parse_path(str(path))
    if steps is None:
        return errors.error(ploc, f"malformed path '{path}'", "write SECTION.KEY[ID].KEY, e.g. rw_conflict.output_rules[rw/out/const]")
    hit = _walk(tree, steps, str(path), ploc, errors)
    if hit is None:
        return
    parent, idx = hit
    if kind == "replace":
        if "value" not in r.map:
            return errors.error(r.loc, "replace needs `value:` (the new entry)", "add `value: ...`")
        return _set(parent, idx, value, r.key_loc("value"), r.value_loc("value"))
    target = parent[idx]
    if kind == "remove":
        if items is None:
            return _delete(parent, idx)
        return _remove_items(target, items, str(path), errors)
    _add(target, r, value, items, pos, str(path), errors)


def _add(target: Any, r: Reader, value: Any, items: Any, pos: tuple, path: str, errors: Collector) -> None:
    """New keys into a mapping (`value`), or new items into a list (`items`, `before`/`after`)."""
    before, after = pos
    if isinstance(target, dict):
        if not isinstance(value, dict) or items is not None or before is not None or after is not None:
            return errors.error(r.loc, f"'{path}' is a mapping: add its new keys with `value: {{KEY: ...}}`",
                                "`items:`, `before:` and `after:` are for lists")
        for k in value:
            if k in target:
                errors.error(value.key_locs[k], f"'{path}' already has '{k}' (at {target.key_locs.get(k, target.loc)})",
                             f"change it with `replace: {path}.{k}`")
            else:
                _put(target, k, value[k], value.key_locs[k], value.value_locs[k])
        return
    if not isinstance(target, list):
        return errors.error(r.loc, f"'{path}' is a single value: nothing can be added to it", f"write `- replace: {path}`")
    if items is None or "value" in r.map:
        return errors.error(r.loc, f"'{path}' is a list: add to it with `items: [...]`",
                            "place them with `before:` or `after:` an id (default: at the end)")
    _insert(target, items, before, after, r, path, errors)


def _set(parent: Any, idx: Any, value: Any, key_loc: Loc, value_loc: Loc) -> None:
    if isinstance(parent, dict):
        _put(parent, idx, value, key_loc, value_loc)
    else:
        parent[idx] = value
        parent.item_locs[idx] = value_loc


def _delete(parent: Any, idx: Any) -> None:
    if isinstance(parent, dict):
        del parent[idx]
        parent.key_locs.pop(idx, None)
        parent.value_locs.pop(idx, None)
    else:
        del parent[idx]
        del parent.item_locs[idx]


def _remove_items(target: Any, items: list, path: str, errors: Collector) -> None:
    if not isinstance(target, list):
        return errors.error(items.loc, f"'{path}' is not a list: remove it without `items:`", f"write `- remove: {path}`")
    for i, item in enumerate(items):
        if item in target:
            _delete(target, target.index(item))
        else:
            errors.error(items.item_locs[i], f"'{path}' has no item equal to this one", "copy the item exactly as the base pack writes it")


def _insert(target: YList, items: list, before: Any, after: Any, r: Reader, path: str, errors: Collector) -> None:
    if before is not None and after is not None:
        return errors.error(r.loc, "give before or after, not both", "keep one of them")
    at = len(target)
    anchor = before if before is not None else after
    if anchor is not None:
        idx = _child(target, str(anchor))
        if idx is None:
            kw = "before" if before is not None else "after"
            return errors.error(r.value_loc(kw), f"unknown id '{anchor}' in {path}", did_you_mean(str(anchor), _names(target), "ids"))
        at = idx if before is not None else idx + 1
    key = list_key(target)
    for i, item in enumerate(items):
        if key is not None:
            name = item.get(key) if isinstance(item, dict) else None
            if name is None:
                errors.error(items.item_locs[i], f"an item of {path} needs `{key}:`", f"items of this list are named by `{key}`")
                continue
            if key == "id" and _child(target, str(name)) is not None:
                errors.error(items.item_locs[i], f"{path} already has an item '{name}'",
                             f"change it with `replace: {path}[{name}]`, or pick a new id")
                continue
        target.insert(at, item)
        target.item_locs.insert(at, items.item_locs[i])
        at += 1
