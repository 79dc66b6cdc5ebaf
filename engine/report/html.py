"""HTML report: one self-contained page rendered from the report model.

`page_view` turns the model into a view (sections normalised per kind, drawings
laid out, pass times added) and reports/report.html.j2 only loops and prints it,
with autoescape on. The inserted-node cards are rendered in the browser from one
embedded JSON block (reports/report.js, DOM text only), a page at a time, so the
file grows linearly and the page stays responsive at 10^4 insertions.

Note [embedded JSON]: inside <script type="application/json"> the HTML parser
ends the element at "</script" and changes state at "<!--"; writing every "<",
">" and "&" as a JSON \\u escape makes both impossible while JSON.parse still
reads the same strings. A Content-Security-Policy admits only the page's own
script (by hash), no network and no inline handlers.
"""
from __future__ import annotations

import base64
import hashlib
import json
import re
from typing import Iterator

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from markupsafe import Markup, escape

from engine.core.gcpause import no_gc
from engine.report.explain import is_rejected_step
from engine.report.neighbourhood import NODE_H, layout, undo
from engine.core.resources import data_dir, template_cache

KINDS = ("stats", "facts", "table", "counts", "cards", "rules")
CARD_KEYS = ("name", "type", "graph", "pass", "rule", "rule_loc", "producer", "consumers", "reason", "attrs",
             "attr_values", "moved_control", "path", "explanation", "neighbourhood", "fate", "removed_by")
# what report.js prints


def _env() -> Environment:
    return Environment(loader=FileSystemLoader(str(data_dir("reports"))), autoescape=select_autoescape(["html", "j2"]),
                       undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
                       bytecode_cache=template_cache("templates"))


def _asset(name: str) -> str:
    return (data_dir("reports") / name).read_text(encoding="utf-8")


SCRIPT_ESCAPES = (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029"))


def _script_safe(text: str) -> str:
    for ch, esc in SCRIPT_ESCAPES:
        text = text.replace(ch, esc)
    return text


def embed_json(value) -> Markup:
    """JSON safe inside a <script> element (Note [embedded JSON])."""
    return Markup(_script_safe(json.dumps(value, ensure_ascii=False, separators=(",", ":"))))


def script_hash(script: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode()


# ---- view model ---------------------------------------------------------------------
_SPECIAL = re.compile("[&<>'\"]")


def _esc(value) -> str:
    """markupsafe's escape (the template's autoescape), with no work for a string that needs none."""
    if type(value) is str:
        if _SPECIAL.search(value) is None:
            return value
        return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("'", "&#39;") \
            .replace('"', "&#34;")              # markupsafe's five, & first
    return str(escape(value))


def _part(cell) -> str:
    """One part of a table cell as markup: a filter button, a link, a badge or text."""
    if not isinstance(cell, dict):
        return "" if cell is None else _esc(cell if type(cell) is str else str(cell))
    text = _esc(str(cell.get("text", "")))
    fkey, fvalue = cell.get("filter") or ["", ""]
    href, badge = cell.get("href", ""), cell.get("badge", "")
    if fkey:
        html = f'<button type="button" class="mc-filter-link" data-key="{_esc(fkey)}" data-value="{_esc(fvalue)}">{text}</button>'
    elif href:
        anchor = cell.get("id", "")
        anchor = f' id="{_esc(anchor)}"' if anchor else ""
        html = f'<a{anchor} href="{_esc(href)}">{text}</a>'
    elif badge:
        html = f'<span class="mc-badge mc-sev-{_esc(badge)}">{text}</span>'
    else:
        html = text
    return f'<span class="mc-note">{html}</span>' if cell.get("note") else html


def _table(data: dict) -> dict:
    """Note [table rows as markup]: a table's rows are markup made here, not by the template:
    the report's tables hold 10^4 rows each at 100k nodes (diagnostics, removals, variables),
    and the template's loops over rows, cells and parts spent 4 s of render_html's 6 s
    looking up each part's fields. The markup (and its escaping, markupsafe's as the
    template's autoescape) is what the template wrote before."""
    numeric = set(data.get("numeric", ()))
    rows = []
    for row in data.get("rows", []):
        cells = []
        for i, cell in enumerate(row):
            if type(cell) is str:
                parts = _esc(cell)
            elif isinstance(cell, list):
                parts = "<br>".join(map(_part, cell))
            else:
                parts = _part(cell)
            cells.append(f'<td class="num">{parts}</td>' if i in numeric else f"<td>{parts}</td>")
        rows.append("      <tr>" + "".join(cells) + "</tr>")
    return {"columns": [{"text": c, "num": i in numeric} for i, c in enumerate(data.get("columns", []))],
            "rows": Markup("\n".join(rows))}        # the tbody's lines, the last one's newline the template's


def _counts(data: dict) -> dict:
    groups = []
    for g in data.get("groups", []):
        top = max((n for _, n in g["counts"]), default=0) or 1
        groups.append({"key": g["key"], "title": g["title"],
                       "counts": [{"value": v, "n": n, "pct": round(100 * n / top, 1)} for v, n in g["counts"]]})
    return {"groups": groups}


def _rules(report: dict, key: str) -> dict:
    cited: dict[str, int] = {}
    for rec in report["insertions"]:
        for loc in {rec["rule_loc"], *(s["loc"] for s in rec["explanation"])}:
            cited[loc] = cited.get(loc, 0) + 1
    for d in report["diagnostics"]:
        for c in d.get("cites", []):
            cited[c["loc"]] = cited.get(c["loc"], 0) + 1
    items = []
    for loc, r in report.get(key, {}).items():
        a, b = r.get("mark") or (len(r["text"]), len(r["text"]))
        items.append({"anchor": "rule-" + loc, "loc": loc, "id": r.get("id", ""), "cited": cited.get(loc, 0),
                      "before": r["text"][:a], "mark": r["text"][a:b], "after": r["text"][b:]})
    return {"entries": items}


def _with_times(section: dict, seconds: list[float]) -> dict:
    """Pass times are not in the model (it is byte-identical across runs); the page shows them."""
    data = dict(section["data"])
    data["columns"] = list(data["columns"]) + ["time"]
    data["numeric"] = list(data.get("numeric", [])) + [len(data["columns"]) - 1]
    data["rows"] = [list(r) + [f"{seconds[k]:.3f} s" if k < len(seconds) else ""] for k, r in enumerate(data["rows"])]
    return {**section, "data": data}


def _section(section: dict, report: dict) -> dict:
    kind, data = section["kind"], section.get("data") or {}
    view = {"id": "sec-" + str(section["id"]), "title": section["title"], "kind": kind if kind in KINDS else "json"}
    if kind == "table":
        view["data"] = _table(data)
    elif kind == "counts":
        view["data"] = _counts(data)
    elif kind == "cards":
        view["data"] = {"total": len(report.get(data.get("items", "insertions"), [])),
                        "filters": [{"key": f["key"], "label": f["label"], "options": f["options"]}
                                    for f in data.get("filters", [])]}
    elif kind == "rules":
        view["data"] = _rules(report, data.get("items", "rules"))
    elif kind == "stats":
        view["data"] = {"tiles": [{**t, "fkey": (t.get("filter") or ["", ""])[0], "fvalue": (t.get("filter") or ["", ""])[1]}
                                  for t in data.get("tiles", [])]}
    elif kind in KINDS:
        view["data"] = data
    else:
        view["data"] = {"text": json.dumps(data, indent=2, ensure_ascii=False)}
    return view


def card_drawings(rec: dict) -> dict:
    """Both pictures laid out: "after" from the final graph, "before" from the graph as
    the inserting pass saw it (Note [before as seen]). Compact for the page: a "before"
    node that is also drawn after is its index there; ports are [node, port, dy, out?]
    rows for the ports not at mid-height and heights {node: h} only where they differ
    from NODE_H (the defaults of reports/report.js)."""
    hood = rec["neighbourhood"]
    before = rec.get("before") or {"nodes": hood["nodes"], "edges": undo(hood, rec.get("moved_control") or [])}
    where = {tuple(n): k for k, n in enumerate(hood["nodes"])}
    nodes = [where.get(tuple(n), n) for n in before["nodes"]]
    return {"after": _compact(layout(len(hood["nodes"]), hood["edges"])),     # nodes, edges: rec["neighbourhood"]
            "before": {**_compact(layout(len(before["nodes"]), before["edges"], skip=0)), "nodes": nodes,
                       "edges": before["edges"]}}


def _compact(lay: dict) -> dict:
    ports = [[k, p, dy, side == "out"] for k, sides in enumerate(lay["ports"]) for side in ("in", "out")
             for p, dy in sides[side] if 2 * dy != lay["hs"][k]]        # mid-height is report.js's default
    out = {"w": lay["w"], "h": lay["h"], "pos": lay["pos"]}
    if ports:
        out["ports"] = ports
    hs = {str(k): h for k, h in enumerate(lay["hs"]) if h != NODE_H}
    if hs:
        out["hs"] = hs
    return out


OPTIONAL = ("attrs", "attr_values", "moved_control")     # left out of a card when empty (report.js defaults them)


def _card(rec: dict) -> dict:
    """What report.js needs of one insertion; empty optional fields and a step's empty
    rule, location and facts are left out (the page is ~2 KB a card at 10^4 cards)."""
    card = {k: rec[k] for k in CARD_KEYS if k in rec and not (k in OPTIONAL and not rec[k])}
    # a rejected alternative's reason and GE source are in its quoted entry (the rules table): not repeated
    card["explanation"] = [{k: v for k, v in s.items() if (v or k == "text") and not (k == "facts" and is_rejected_step(rec, s))}
                           for s in rec.get("explanation", [])]
    # the facts a step already shows (the rule's own step lists the recorded facts no sentence
    # told) are not repeated under "Other recorded facts"; the JSON report keeps every one
    told = {label for s in rec.get("explanation", []) for label, _ in s.get("facts", [])}
    reason = rec.get("reason") or {}
    card["reason"] = {k: v for k, v in reason.items() if k.replace("_", " ") not in told}
    card["draw"] = card_drawings(rec)
    return card


def page_view(report: dict, seconds: list[float] | None = None) -> dict:
    sections = []
    for s in report.get("sections", []):
        if s["id"] == "passes" and seconds is not None:
            s = _with_times(s, seconds)
        sections.append(_section(s, report))
    script = _asset("report.js")
    return {
        "report": report, "sections": sections, "style": Markup(_asset("report.css")), "script": Markup(script),
        "csp": f"default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src '{script_hash(script)}'; "
               "base-uri 'none'; form-action 'none'",
        "data": _page_data(report),
    }


def _page_data(report: dict) -> Markup:
    """embed_json({"insertions": cards, "rules": ..., "steps": shared steps}), made a card at a time.

    Note [cards one at a time]: each card is made, its steps shared (Note [shared steps]) and
    encoded (compact, by the json module's C encoder, as embed_json does for the whole), then
    let go, so the page's 10^4 cards are never all held as objects, nor the page's JSON
    twice over (the encoder's pieces and the escaped copy). Escaping is per character, so
    escaping each card's text is escaping the whole."""
    encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
    table: list[dict] = []
    seen: dict[str, int] = {}
    parts = []
    for rec in report["insertions"]:
        card = _card(rec)
        _share_steps(card, table, seen)
        parts.append(_script_safe(encode(card)))
    text = ('{"insertions":[' + ",".join(parts) + '],"rules":' + _script_safe(encode(report.get("rules", {})))
            + ',"steps":' + _script_safe(encode(table)) + "}")
    return Markup(text)


def _share_steps(card: dict, table: list[dict], seen: dict[str, int]) -> None:
    """The card's `explanation` as indices of each distinct step in `table`.

    Note [shared steps]: cards of one choice point repeat the same steps (a rejected
    alternative's "not chosen: ...", a rule's own words, a cell), so a page of 10^4 cards
    spent a third of its size on copies; report.js reads an index through DATA.steps. The
    order is first use, so the page stays byte-identical across runs."""
    refs = []
    for s in card.get("explanation", ()):
        key = _STEP_KEY(s)
        k = seen.get(key)
        if k is None:
            k = seen[key] = len(table)
            table.append(s)
        refs.append(k)
    card["explanation"] = refs


_STEP_KEY = json.JSONEncoder(ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode


def render_html(report: dict, ctx=None, times: bool = False) -> str:
    """The page; with `times` (run --times) each pass's time too, so the page then differs
    from run to run (without it the page is byte-identical, like the other outputs)."""
    return "".join(_page_pieces(report, ctx, times))


def render_html_pieces(report: dict, ctx=None, times: bool = False) -> Iterator[bytes]:
    """render_html's page as UTF-8 pieces in order, each encoded as an output file writes
    it: the page's text is never joined nor its bytes held whole (~40 MB each at 100k nodes)."""
    for piece in _page_pieces(report, ctx, times):
        yield piece.encode()


def _page_pieces(report: dict, ctx, times: bool) -> list[str]:
    seconds = [r.seconds for r in ctx.pass_runs] if ctx is not None and times else None
    with no_gc():        # Note [report without the collector] in engine/report/model.py
        return _render(_env().get_template("report.html.j2"), page_view(report, seconds))


def _render(template, view: dict) -> list[str]:
    """The template rendered with the view, in pieces, the large markup (the data block,
    the tables' bodies) put in as it is.

    Note [large markup spliced]: jinja's autoescape passes every printed Markup through
    markupsafe's escape, which returns a copy (Markup(value.__html__())): the data block and
    the tables' bodies, ~60 MB of text at 100k nodes, were held twice while the page was
    joined. They go to the template as markers instead — `<mc-large-N>`, which no escaped
    value can equal (its `<` would be `&lt;`) and the template does not contain — and the
    rendered pieces equal to a marker are replaced by the text itself. Should a marker not
    come back as a piece of its own, the page is rendered the ordinary way."""
    large: dict[str, str] = {}

    def mark(value: str) -> Markup:
        key = f"<mc-large-{len(large)}>"
        large[key] = value
        return Markup(key)

    marked = dict(view, data=mark(view["data"]))
    sections = []
    for sec in view["sections"]:
        if sec["kind"] == "table" and sec["data"]["rows"]:
            sec = {**sec, "data": {**sec["data"], "rows": mark(sec["data"]["rows"])}}
        sections.append(sec)
    marked["sections"] = sections
    pieces = list(template.generate(**marked))
    at = [k for k, piece in enumerate(pieces) if piece in large]
    if len(at) != len(large):
        return [template.render(**view)]
    for k in at:
        pieces[k] = large[pieces[k]]
    return pieces
