"""The diff document (one JSON-able model, sorted) and its terminal rendering.

`build_document` links every impact record to the rule changes that caused it
and counts, per change, what it did across the corpus; `text_summary` and the
HTML page (engine/diff/page.py) only print that model. The JSON schema is in
README.md ("Diffing rule packs").
"""
from __future__ import annotations

import json

from engine.diff.links import Linker
from engine.diff.model import Change, PackDiff
from engine.diff.source import PackSource

SCHEMA = 1
GATES = ("any", "rules", "impact", "removed-isolation", "added-isolation")
NO_IMPACT = {"added": 0, "removed": 0, "changed": 0, "removals": 0, "diagnostics": 0, "graphs": 0}
def _side(src: PackSource, side) -> dict | None:
    if side is None:
        return None
    return {"loc": src.show_loc(side.loc), "name": side.name, "table": side.table, "text": side.text}


def _change(c: Change, o: PackSource, n: PackSource) -> dict:
    return {"id": c.id, "section": c.section, "table": c.table, "key": c.key, "kind": c.kind, "summary": c.summary,
            "old": _side(o, c.old), "new": _side(n, c.new),
            "details": [{"sign": s, "text": t} for s, t in c.details],
            "cosmetic": c.cosmetic, "impact": dict(NO_IMPACT)}


def _rec(src: PackSource, rec: dict) -> dict:
    out = {k: v for k, v in rec.items() if k != "refs"}
    out["rule_loc"] = src.show_loc(rec.get("rule_loc"))      # a Loc (None: no rule location)
    out["why"] = src.show_text(rec.get("why", ""))
    return out


def _link_graph(g: dict, linker: Linker, o: PackSource, n: PackSource, tally: dict) -> dict:
    """Link one graph's differences. Note [indirect]: a difference whose own
    provenance names no changed rule (a pass reacting to an earlier pass's new
    node) is attributed to the graph's direct causes, marked `indirect`."""
    out = {k: g[k] for k in ("graph", "status", "messages", "skipped", "inserted")}
    hit: set[str] = set()
    recs: list[tuple[dict, str]] = []

    def linked(item: dict, old: dict | None, new: dict | None, what: str) -> dict:
        rec = old or new
        res = {k: v for k, v in item.items() if k not in ("old", "new", "refs")}
        if "message" in res:
            res["message"] = (o if old is not None else n).show_text(res["message"])
        if what in ("added", "removed", "changed"):
            for key, side, src in (("old", old, o), ("new", new, n)):
                if side is not None:
                    res[key] = _rec(src, side)
        res["caused_by"], res["link"] = linker.link(rec["pass"], old and old["refs"], new and new["refs"])
        recs.append((res, what))
        return res

    out["added"] = [linked(x, None, x["new"], "added") for x in g["added"]]
    out["removed"] = [linked(x, x["old"], None, "removed") for x in g["removed"]]
    out["changed"] = [linked(x, x["old"], x["new"], "changed") for x in g["changed"]]
    out["removals"] = {"new": [linked(r, None, r, "removals") for r in g["removals"]["new"]],
                       "old": [linked(r, r, None, "removals") for r in g["removals"]["old"]]}
    out["diagnostics"] = {"gained": [linked(d, None, d, "diagnostics") for d in g["diagnostics"]["gained"]],
                          "lost": [linked(d, d, None, "diagnostics") for d in g["diagnostics"]["lost"]]}
    direct = sorted({i for res, _ in recs if res["link"] in ("direct", "pass") for i in res["caused_by"]})
    for res, what in recs:
        if res["link"] == "none" and direct:
            res["caused_by"], res["link"] = direct, "indirect"
        if res["link"] not in ("direct", "pass"):
            continue
        for i in res["caused_by"]:
            t = tally.setdefault(i, {"added": 0, "removed": 0, "changed": 0, "removals": 0, "diagnostics": 0,
                                     "graphs": set()})
            t[what] += 1
            hit.add(i)
    out["variables"] = g["variables"]
    v = g["variables"] or {}
    if any(v.get(k) for k in ("added", "removed", "changed")):
        # Note [variable plan]: a plan records no rule per variable; the changes to
        # the variable passes' sections are the candidates
        out["variables"] = dict(v, caused_by=linker.in_sections(linker.var_sections), link="candidate")
    out["counts"] = {"added": len(out["added"]), "removed": len(out["removed"]), "changed": len(out["changed"]),
                     "removals_new": len(out["removals"]["new"]), "removals_old": len(out["removals"]["old"]),
                     "diagnostics_gained": len(out["diagnostics"]["gained"]),
                     "diagnostics_lost": len(out["diagnostics"]["lost"]),
                     "variables_changed": sum(len(v.get(k, [])) for k in ("added", "removed", "changed"))}
    for i in hit:
        tally[i]["graphs"].add(g["graph"])
    return out


def build_document(diff: PackDiff, o: PackSource, n: PackSource, impact: list[dict] | None,
                   linker: Linker | None, options: dict, passes: list[str] | None) -> dict:
    items = [_change(c, o, n) for c in diff.changes]
    semantic = {c.id for c in diff.semantic()}
    by_kind: dict[str, int] = {}
    by_section: dict[str, int] = {}
    for c in diff.semantic():
        by_kind[c.kind] = by_kind.get(c.kind, 0) + 1
        by_section[c.section] = by_section.get(c.section, 0) + 1
    doc = {"memconflict_diff": SCHEMA,
           "old": _info(diff.old), "new": _info(diff.new),
           "notes": [{"heading": h, "text": t} for h, t in diff.notes],
           "rules": {"count": len(semantic), "by_kind": dict(sorted(by_kind.items())),
                     "by_section": by_section, "items": items},
           "impact": None}
    if impact is not None and linker is not None:
        tally: dict = {}
        graphs = [_link_graph(g, linker, o, n, tally) for g in impact]
        for it in items:
            t = tally.get(it["id"])
            if t:
                it["impact"] = {k: t[k] for k in NO_IMPACT if k != "graphs"}
                it["impact"]["graphs"] = len(t["graphs"])
        doc["impact"] = {"options": dict(sorted(options.items())), "passes": passes,
                         "summary": _summary(graphs), "graphs": graphs}
    doc["gates"] = gates(doc)
    return doc


def _info(p) -> dict:
    return {"spec": p.spec, "name": p.name, "version": p.version, "schema_version": p.schema_version, "path": p.path}


def _summary(graphs: list[dict]) -> dict:
    keys = ("added", "removed", "changed", "removals_new", "removals_old", "diagnostics_gained",
            "diagnostics_lost", "variables_changed")
    s = {"graphs": len(graphs), "graphs_changed": sum(1 for g in graphs if any(g["counts"].values()))}
    for k in keys:
        s[k] = sum(g["counts"][k] for g in graphs)
    recs = [x for g in graphs for part in ("added", "removed", "changed") for x in g[part]]
    s["linked"] = sum(1 for x in recs if x["link"] in ("direct", "pass", "indirect"))
    s["unlinked"] = len(recs) - s["linked"]
    s["failed"] = {side: sum(1 for g in graphs if g["status"][side] != "ok") for side in ("old", "new")}
    return s


def gates(doc: dict) -> dict:
    s = (doc["impact"] or {}).get("summary") or {}
    impact = any(s.get(k) for k in ("added", "removed", "changed", "removals_new", "removals_old",
                                    "diagnostics_gained", "diagnostics_lost", "variables_changed"))
    rules = doc["rules"]["count"] > 0
    return {"any": rules or impact, "rules": rules, "impact": bool(impact),
            "removed-isolation": bool(s.get("removed")), "added-isolation": bool(s.get("added"))}


def document_json(doc: dict) -> bytes:
    return (json.dumps(doc, indent=1, ensure_ascii=False, sort_keys=False) + "\n").encode()


# ---- terminal ----------------------------------------------------------------------------------
SIGN = {"added": "+", "removed": "-", "changed": "~", "renamed": ">", "moved": ">", "reordered": "^"}


def text_summary(doc: dict, limit: int = 8) -> str:
    o, n = doc["old"], doc["new"]
    lines = [f"memconflict diff: {o['spec']} ({o['name']} {o['version']}) → {n['spec']} ({n['name']} {n['version']})"]
    if doc["notes"]:
        lines.append("")
        lines.append(f"Change notes ({n['spec']}/CHANGES.md):")
        for note in doc["notes"]:
            lines.append(f"  ## {note['heading']}")
            lines += ["    " + t for t in note["text"].splitlines() if t.strip()][:12]
    r = doc["rules"]
    lines.append("")
    kinds = ", ".join(f"{k} {v}" for k, v in r["by_kind"].items())
    lines.append(f"Rule changes: {r['count']}" + (f" ({kinds})" if kinds else ""))
    section = None
    for it in r["items"]:
        if it["section"] != section:
            section = it["section"]
            lines.append(f"  {section}")
        where = " ↔ ".join(x for x in ((it["old"] or {}).get("loc", "—") or "—", (it["new"] or {}).get("loc", "—") or "—"))
        imp = it["impact"]
        tail = (f"  [isolation +{imp['added']} −{imp['removed']} ~{imp['changed']}, diagnostics {imp['diagnostics']}, "
                f"removals {imp['removals']} in {imp['graphs']} graph(s)]") if imp["graphs"] else ""
        mark = " (doc only)" if it["cosmetic"] else ""
        lines.append(f"    {SIGN.get(it['kind'], '?')} {it['id']}: {it['summary']}{mark}{tail}")
        lines.append(f"        {where}")
        for d in it["details"][:limit]:
            lines.append(f"        {d['sign']} {d['text']}")
        if len(it["details"]) > limit:
            lines.append(f"        … {len(it['details']) - limit} more line(s)")
    imp = doc["impact"]
    if imp is not None:
        s = imp["summary"]
        lines.append("")
        lines.append(f"Impact on {s['graphs']} graph(s), {s['graphs_changed']} changed: isolation +{s['added']} "
                     f"−{s['removed']} ~{s['changed']}; removals +{s['removals_new']}/−{s['removals_old']}; "
                     f"diagnostics +{s['diagnostics_gained']}/−{s['diagnostics_lost']}; "
                     f"variables ~{s['variables_changed']}; {s['linked']} linked to a rule change, {s['unlinked']} not")
        for g in imp["graphs"]:
            lines += _graph_text(g, limit)
    gated = [k for k, v in doc["gates"].items() if v]
    lines.append("")
    lines.append("Differences: " + (", ".join(gated) if gated else "none"))
    return "\n".join(lines)


def _graph_text(g: dict, limit: int) -> list[str]:
    c = g["counts"]
    st = "" if g["status"] == {"old": "ok", "new": "ok"} else f" [old {g['status']['old']}, new {g['status']['new']}]"
    out = [f"  {g['graph']}: +{c['added']} −{c['removed']} ~{c['changed']} "
           f"(inserted {g['inserted']['old']} → {g['inserted']['new']}){st}"]
    shown = 0
    for part, sign in (("added", "+"), ("removed", "-"), ("changed", "~")):
        for x in g[part]:
            if shown >= limit:
                break
            rec = x.get("new") or x.get("old")
            p = x["position"]
            cause = ", ".join(x["caused_by"][:3]) + (" …" if len(x["caused_by"]) > 3 else "")
            out.append(f"    {sign} {rec['type']} {p['producer']} → {', '.join(p['consumers'])} "
                       f"({rec['pass']}: {rec['rule']}) ← {cause or 'no rule change found'} [{x['link']}]")
            shown += 1
    total = c["added"] + c["removed"] + c["changed"]
    if total > shown:
        out.append(f"    … {total - shown} more (see --json / --html)")
    for sign, part in (("+", "gained"), ("-", "lost")):
        ds = g["diagnostics"][part]
        for d in ds[:3]:
            out.append(f"    {sign} diagnostic {d['code']}: {d['message']} ← {', '.join(d['caused_by'][:3]) or '?'} [{d['link']}]")
        if len(ds) > 3:
            out.append(f"    … {len(ds) - 3} more diagnostic(s) {part}")
    return out
