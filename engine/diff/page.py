"""The diff as one self-contained HTML page (no script, no external asset).

`page_view` shapes the document for the template (anchors, row limits, tiles,
CHANGES.md entries as text blocks: engine/diff/notes.py); engine/diff/diff.html.j2
only loops and prints, with autoescape on.

Note [grouped causes]: one rule change usually moves many isolation nodes (a layout
pair adds an Identity before every constant reader), so the impact tables group the
rows that share their causes and link kind under one header naming them, largest
group first, instead of repeating the same causes on every row. Tables size their
columns to their content (`table-layout: auto`, no forced width); only the free-text
column wraps.

Note [own page]: the run report's HTML (engine/report/html.py, reports/) was being
rebuilt while this was written; the diff page keeps its own small template and
stylesheet in the same palette and `mc-` class names instead of depending on
that work in progress.
"""
from __future__ import annotations

from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from engine.core.resources import template_cache

from engine.diff.notes import note_blocks

ROWS = 300          # impact rows per table and graph; the JSON has them all
SIGN_CLASS = {"+": "add", "-": "del", "~": "chg", " ": "ctx"}


def _env() -> Environment:
    return Environment(loader=FileSystemLoader(str(Path(__file__).parent)), autoescape=select_autoescape(["html", "j2"]),
                       undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
                       bytecode_cache=template_cache("templates"))


def _anchors(doc: dict) -> dict[str, str]:
    return {it["id"]: f"c{k + 1}" for k, it in enumerate(doc["rules"]["items"])}


def _causes(ids: list[str], anchors: dict[str, str]) -> list[dict]:
    return [{"text": i, "href": "#" + anchors[i] if i in anchors else ""} for i in ids]


def _rows(items: list[dict], anchors: dict[str, str]) -> dict:
    """The rows grouped by cause (the rule changes and the link kind), largest group first:
    one header per cause, then its rows (Note [grouped causes])."""
    groups: dict[tuple, list[dict]] = {}
    for x in items:
        groups.setdefault((tuple(x["caused_by"]), x["link"]), []).append(x)
    out, shown = [], 0
    for (causes, link), xs in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        rows = []
        for x in xs[:max(0, ROWS - shown)]:
            p = x["position"]
            rows.append({"graph": p["graph"], "producer": p["producer"], "consumers": ", ".join(p["consumers"]),
                         "old": x.get("old"), "new": x.get("new"), "what": ", ".join(x.get("what", []))})
        shown += len(rows)
        if rows:
            out.append({"causes": _causes(list(causes), anchors), "link": link, "count": len(xs), "rows": rows})
    return {"groups": out, "rows": shown, "more": max(0, len(items) - shown)}


def _cap(items: list[dict]) -> dict:
    return {"rows": items[:ROWS], "more": max(0, len(items) - ROWS)}


def page_view(doc: dict) -> dict:
    anchors = _anchors(doc)
    sections: list[dict] = []
    for it in doc["rules"]["items"]:
        if not sections or sections[-1]["name"] != it["section"]:
            sections.append({"name": it["section"], "entries": []})
        sections[-1]["entries"].append({**it, "anchor": anchors[it["id"]],
                                      "lines": [{"cls": SIGN_CLASS.get(d["sign"], "ctx"), "sign": d["sign"],
                                                 "text": d["text"]} for d in it["details"]]})
    view = {"doc": doc, "sections": sections, "graphs": [], "tiles": [("rule changes", doc["rules"]["count"], "")],
            "notes": [{"heading": n["heading"], "blocks": note_blocks(n["text"])} for n in doc["notes"]]}
    imp = doc["impact"]
    if imp is not None:
        s = imp["summary"]
        view["tiles"] += [("graphs", s["graphs"], f"{s['graphs_changed']} changed"),
                          ("isolation added", s["added"], ""), ("isolation removed", s["removed"], ""),
                          ("isolation changed", s["changed"], ""),
                          ("diagnostics", f"+{s['diagnostics_gained']} / −{s['diagnostics_lost']}", ""),
                          ("linked to a rule", s["linked"], f"{s['unlinked']} not")]
        for g in imp["graphs"]:
            view["graphs"].append({**g, "added_t": _rows(g["added"], anchors), "removed_t": _rows(g["removed"], anchors),
                                   "changed_t": _rows(g["changed"], anchors),
                                   "gained_t": _cap(g["diagnostics"]["gained"]), "lost_t": _cap(g["diagnostics"]["lost"]),
                                   "open": any(g["counts"].values()) and len(imp["graphs"]) <= 12})
    view["gates"] = [k for k, v in doc["gates"].items() if v]
    return view


def render_page(doc: dict) -> str:
    return _env().get_template("diff.html.j2").render(**page_view(doc))
