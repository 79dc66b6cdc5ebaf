"""The diff as one self-contained HTML page (no script, no external asset).

`page_view` shapes the document for the template (anchors, row limits, tiles);
engine/diff/diff.html.j2 only loops and prints, with autoescape on.

Note [own page]: the run report's HTML (engine/report/html.py, reports/) was being
rebuilt while this was written; the diff page keeps its own small template and
stylesheet in the same palette and `mc-` class names instead of depending on
that work in progress.
"""
from __future__ import annotations

from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from engine.core.resources import template_cache

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
    rows = []
    for x in items[:ROWS]:
        p = x["position"]
        rows.append({"graph": p["graph"], "producer": p["producer"], "consumers": ", ".join(p["consumers"]),
                     "old": x.get("old"), "new": x.get("new"), "what": ", ".join(x.get("what", [])),
                     "link": x["link"], "causes": _causes(x["caused_by"], anchors)})
    return {"rows": rows, "more": max(0, len(items) - ROWS)}


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
    view = {"doc": doc, "sections": sections, "graphs": [], "tiles": [("rule changes", doc["rules"]["count"], "")]}
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
