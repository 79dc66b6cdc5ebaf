"""The report model of one run: built once, rendered as JSON (`report_json`), HTML
(engine/report/html.py) and text (engine/report/text.py, engine/report/explain.py).

The model is plain JSON data with a stable order and no timings, so a report is
byte-identical across runs. Every insertion record is kept as the pass wrote it
and completed with its graph path, its explanation steps and its neighbourhood;
rule texts are stored once, keyed by the location that cites them. `sections`
lays out the page: each is {id, title, kind, data}, rendered by kind, so a new
feature (variable plans, rule-set diffs) adds a section rather than a page.
"""
from __future__ import annotations

import difflib
import gc
import json
from collections import Counter
from typing import Iterator

from engine import __version__
from engine.core.errors import Cite, display_path
from engine.core.gcpause import no_gc
from engine.passes.context import RunContext, reason_cites
from engine.report.explain import Evidence, RuleTexts, explain, rejected_steps, show, step
from engine.report.neighbourhood import capture, record_only, undo

REPORT_SCHEMA = 2


def graph_stats(model) -> dict:
    nodes = model.node_count()
    data_edges = sum(len(o.peers) for g in model.graph_order for n in g.nodes() for o in n.outs)
    ctrl_edges = sum(len(n.out_ctrl) for g in model.graph_order for n in g.nodes())
    return {"graphs": len(model.graph_order), "subgraphs": len(model.graph_order) - 1, "nodes": nodes,
            "data_edges": data_edges, "control_edges": ctrl_edges}


def graph_path(model, graph_name: str) -> list[dict]:
    """Root first: [{"graph": root}, {"via": parent node, "graph": subgraph}, ...]."""
    g = model.graphs.get(graph_name)
    if g is None:
        return [{"graph": graph_name}]
    out = []
    while g is not None:
        out.append({"via": g.parent_node.name, "graph": g.name} if g.parent_node is not None else {"graph": g.name})
        g = g.parent_graph
    return out[::-1]


def _insertion(ctx: RunContext, ins, evidence: Evidence, removed: dict, seen: dict | None = None) -> dict:
    rec = ins.to_json()
    g = ctx.model.graphs.get(ins.graph)
    node = g.find(ins.name) if g is not None else None
    rec["path"] = graph_path(ctx.model, ins.graph)
    rec["attr_values"] = {k: show(_attr(node, k)) for k in ins.attrs} if node is not None else {}
    rec["explanation"] = explain(rec, evidence, ins.reason)
    gone = removed.get((ins.graph, ins.name))
    if gone is not None and node is None:
        rec["removed_by"] = {"pass": gone.pass_id, "rule": gone.rule}
        rec["explanation"].append(step(f"a later pass, {gone.pass_id}, removed it again (rule {gone.rule})",
                                       gone.rule))
    rec["explanation"] += rejected_steps(ins.alternatives)     # after the decision path
    rec["fate"] = "transient" if "removed_by" in rec else "kept"
    rec["neighbourhood"] = capture(node) if node is not None else \
        record_only(ins.producer, list(ins.consumers), ins.name, ins.type, g)
    if seen is not None:          # Note [before as seen]: the graph as the inserting pass saw it
        rec["before"] = {"nodes": seen["nodes"], "edges": undo(seen, list(ins.moved_control)),
                         "omitted": seen["omitted"]}
    return rec


def _removals(ctx: RunContext) -> dict:
    return {(r.graph, r.name): r for r in ctx.removals}


def _attr(node, key):
    from engine.core.attrs import node_attr
    return node_attr(node, key)


def explain_insertion(ctx: RunContext, ins) -> tuple[dict, dict]:
    """One insertion's card and the rule texts it cites (`memconflict explain`)."""
    evidence = Evidence(ctx)
    k = next((k for k, i in enumerate(ctx.insertions) if i is ins), -1)
    rec = _insertion(ctx, ins, evidence, _removals(ctx), ctx.seen.get(k))
    from engine.report.varlinks import link_variables
    link_variables({"insertions": [rec]}, ctx, getattr(ctx, "var_plan", None))
    return rec, _rule_table(ctx, [ins], [])


def not_inserted(ctx: RunContext, name: str) -> tuple[str, str]:
    """(message, hint) for `explain` asked about a node the passes did not insert."""
    names = sorted({i.name for i in ctx.insertions})
    passes = ", ".join(r.pass_id for r in ctx.pass_runs) or "none"
    message = f"'{name}' was not inserted by the passes run ({passes})"
    removed = [r for r in ctx.removals if r.name == name]
    if removed:
        message += f"; it was removed by {removed[0].pass_id} (rule {removed[0].rule})"
    elif any(g.find(name) is not None for g in ctx.model.graph_order):
        message += "; it is a node of the input graph"
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.5)
    close = sorted(close + [n for n in names if name.lower() in n.lower() and n not in close][:3 - len(close)])
    if close:
        return message, "did you mean " + ", ".join(f"'{n}'" for n in close) + "?"
    if names:
        listed = ", ".join(f"'{n}'" for n in names[:5])
        return message, f"inserted nodes: {listed}" + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    return message, "these passes inserted no node; try other --passes or --option values"


def _rule_table(ctx: RunContext, insertions: list, diagnostics: list) -> dict:
    """Source text of every cited pack item, keyed by where it starts: the cards'
    rules and the items their facts cite, the diagnostics' rules. Items cited at
    one place with and without a rule id (a matrix cell: by the card, by its
    `cell_loc` fact) are one entry, named by the id."""
    texts = RuleTexts(ctx.pack.path)
    cites: dict[str, Cite] = {}
    every = [c for i in insertions for c in (i.cite, *reason_cites(i.reason), *(a.cite for a in i.alternatives))
             if c is not None]
    every += [c for d in diagnostics for c in d.cites]
    for c in every:
        key = str(c.loc)
        if key not in cites or (c.rule_id and not cites[key].rule_id):
            cites[key] = c
    table = {}
    for key in sorted(cites):
        entry = texts.get(cites[key])
        if entry is not None:
            table[key] = entry
    return table


def _counts(items: list[dict], key: str) -> dict:
    return dict(sorted(Counter(i[key] for i in items).items()))


def build_report(ctx: RunContext, input_file: str, before: dict) -> dict:
    # Note [report without the collector]: a report is a tree of 10^5-10^6 fresh dicts and
    # lists with no reference cycles, built after passes that left millions of tracked
    # objects; with the collector on, its full passes took 1.1 s of build_report's 3.5 s and
    # of render_html's 5.7 s at 100k nodes (Note [gc] in engine/core/gcpause.py)
    with no_gc():
        report = _build_report(ctx, input_file, before)
        # and the report is frozen as the model is (Note [gc] in engine/cli/common.py): it is
        # kept until its forms are written, and the first collection after it walked all of
        # it (71 ms at 100k nodes) to free nothing (a batch run unfreezes it with the graph)
        gc.freeze()
    return report


def _build_report(ctx: RunContext, input_file: str, before: dict) -> dict:
    evidence = Evidence(ctx)
    removed = _removals(ctx)
    ins = [_insertion(ctx, i, evidence, removed, ctx.seen.get(k)) for k, i in enumerate(ctx.insertions)]
    diagnostics = [d.to_json() for d in ctx.diagnostics]
    inserted = {(i["graph"], i["name"]) for i in ins}
    transient = sum(1 for i in ins if i["fate"] == "transient")
    for d, diag in zip(diagnostics, ctx.diagnostics):
        d["cites"] = [{"rule": c.rule_id, "loc": str(c.loc)} for c in diag.cites]
    report = {
        "memconflict": __version__,
        "report_schema": REPORT_SCHEMA,
        "input": input_file,
        "pack": {"name": ctx.pack.name, "version": ctx.pack.version, "schema_version": ctx.pack.schema_version,
                 "path": display_path(ctx.pack.path)},
        "options": dict(sorted(ctx.options.items())),
        "passes": [{"id": r.pass_id, "status": r.status, "inserted": r.inserted, "removed": r.removed,
                    **({"message": r.message} if r.message else {})} for r in ctx.pass_runs],
        "graph_before": before,
        "graph_after": graph_stats(ctx.model),
        "summary": {
            "inserted": len(ins),
            "removed": len(ctx.removals),
            "by_pass": _counts(ins, "pass"),
            "by_rule": _counts(ins, "rule"),
            "by_type": _counts(ins, "type"),
            "by_graph": _counts(ins, "graph"),
            "by_fate": _counts(ins, "fate"),
            # Note [net change]: what the graph gained and lost; a node inserted and removed
            # again by a later pass (a transient) is neither, and is counted apart
            "net": {"added": len(ins) - transient,
                    "removed": sum(1 for r in ctx.removals if (r.graph, r.name) not in inserted),
                    "transient": transient},
            "diagnostics": len(diagnostics),
            "by_code": _counts(diagnostics, "code"),
        },
        "insertions": ins,
        "removals": [r.to_json() for r in ctx.removals],
        "diagnostics": diagnostics,
        "rules": _rule_table(ctx, ctx.insertions, ctx.diagnostics),
    }
    from engine.report.varlinks import link_variables
    link_variables(report, ctx, getattr(ctx, "var_plan", None))     # variable-pass insertions -> their variable
    notes = getattr(ctx.model, "notes", None)
    if notes:       # how the input was read: derived attributes, port names from the pack, ...
        report["input_notes"] = [{"kind": k, "text": t} for k, t in notes]
    report["sections"] = default_sections(report)
    from engine.report.varlinks import variable_sections
    report["sections"] += variable_sections(report)
    return report


# ---- sections ---------------------------------------------------------------------------
FILTERS = (("pass", "by_pass", "Insertions by pass"), ("rule", "by_rule", "Insertions by rule"),
           ("type", "by_type", "Insertions by inserted type"), ("graph", "by_graph", "Insertions by graph"),
           ("fate", "by_fate", "Kept, or removed again by a later pass (transient)"))


def default_sections(report: dict) -> list[dict]:
    """The page, top to bottom. Kinds: stats, facts, table, counts, cards (see engine/report/html.py)."""
    b, a, s = report["graph_before"], report["graph_after"], report["summary"]
    sections = [
        {"id": "summary", "title": "Summary", "kind": "stats", "data": {"tiles": [
            {"label": "nodes", "value": a["nodes"], "note": f"{b['nodes']} before"},
            {"label": "data edges", "value": a["data_edges"], "note": f"{b['data_edges']} before"},
            {"label": "control edges", "value": a["control_edges"], "note": f"{b['control_edges']} before"},
            {"label": "subgraphs", "value": a["subgraphs"], "note": f"{a['graphs']} graphs in all"},
            {"label": "added", "value": s["net"]["added"], "note": f"net: kept in the graph, of {s['inserted']} inserted"},
            {"label": "removed", "value": s["net"]["removed"], "note": "nodes of the input graph"},
            {"label": "transient", "value": s["net"]["transient"],
             "note": "inserted, then removed by a later pass", "filter": ["fate", "transient"]},
            {"label": "diagnostics", "value": s["diagnostics"], "note": ", ".join(s["by_code"]) or "none"},
        ]}},
        {"id": "run", "title": "Run", "kind": "facts", "data": {"rows": [
            ["input", report["input"]],
            ["rule pack", f"{report['pack']['name']} {report['pack']['version']} "
                          f"(schema {report['pack']['schema_version']}) in {report['pack']['path']}"],
            ["options", ", ".join(f"{k}={v}" for k, v in report["options"].items()) or "none"],
            ["passes", " → ".join(p["id"] for p in report["passes"]) or "none"],
            ["memconflict", report["memconflict"]],
            *([f"read ({n['kind']})", n["text"]] for n in report.get("input_notes", ())),
        ]}},
        {"id": "passes", "title": "Passes in order", "kind": "table", "data": {
            "columns": ["#", "pass", "status", "inserted", "removed", "message"],
            "numeric": [0, 3, 4],
            "rows": [[str(k), {"text": p["id"], "filter": ["pass", p["id"]]}, p["status"], str(p["inserted"]),
                      str(p["removed"]), p.get("message", "")] for k, p in enumerate(report["passes"], 1)]}},
        {"id": "counts", "title": "Insertions", "kind": "counts", "data": {"groups": [
            {"key": key, "title": title, "counts": [[v, n] for v, n in s[field].items()]}
            for key, field, title in FILTERS]}},
    ]
    if report["diagnostics"]:
        sections.append({"id": "diagnostics", "title": "Diagnostics", "kind": "table",
                         "data": _diagnostics_table(report)})
    sections.append({"id": "insertions", "title": "Inserted nodes", "kind": "cards", "data": {
        "items": "insertions", "filters": [{"key": key, "label": key, "options": list(s[field])}
                                           for key, field, _ in FILTERS]}})
    if report["rules"]:
        sections.append({"id": "rules", "title": "Rules cited", "kind": "rules", "data": {"items": "rules"}})
    if report["removals"]:
        sections.append({"id": "removals", "title": "Removed nodes", "kind": "table", "data": {
            "columns": ["node", "type", "graph", "pass", "rule", "why"], "numeric": [],
            "rows": [[r["name"], r["type"], r["graph"], r["pass"], r["rule"],
                      "; ".join(f"{k}: {show(v)}" for k, v in r["reason"].items())] for r in report["removals"]]}})
    return sections


_NOT_DETAILS = frozenset(("code", "severity", "message", "pass", "cites"))


def _diagnostics_table(report: dict) -> dict:
    """One row per diagnostic: its details under the message (inserted nodes link to
    their cards), and the rules it names, linked to their text."""
    inserted = {i["name"] for i in report["insertions"]}
    rows = []
    for k, d in enumerate(report["diagnostics"], 1):
        message: list = [d["message"]]
        for key, v in d.items():
            if key in _NOT_DETAILS:
                continue
            if isinstance(v, list):
                message.append({"text": f"{key}: {show(v)[1:-1]}", "note": True})
                message += [{"text": f"card {x}", "href": "#" + x, "note": True}
                            for x in v if isinstance(x, str) and x in inserted]
            else:
                message.append({"text": f"{key}: {show(v)}", "note": True})
                if isinstance(v, str) and v in inserted:
                    message.append({"text": f"card {v}", "href": "#" + v, "note": True})
        rules = [{"text": c["rule"], "href": "#rule-" + c["loc"]} for c in d["cites"] if c["loc"] in report["rules"]]
        rows.append([{"text": d["code"], "id": f"diag-{k}", "href": f"#diag-{k}"},
                     {"text": d["severity"], "badge": d["severity"]}, d["pass"], message, rules])
    return {"columns": ["code", "severity", "pass", "message and details", "rules"], "numeric": [], "rows": rows}


def report_json(report: dict) -> bytes:
    """The JSON report's bytes (report_json_pieces, joined)."""
    return b"".join(report_json_pieces(report))


def report_json_pieces(report: dict) -> Iterator[bytes]:
    """The JSON report as pieces of UTF-8, in order. Indented at the top; the long lists
    (insertions, removals, diagnostics, sections) hold one compact record per line, so the
    file stays small and diffs line by line.

    Note [streamed JSON]: each record is encoded by the json module's C encoder (no indent)
    and goes to the output as UTF-8 at once, so no text of the whole file is held: at 100k
    nodes the text was built four times over (records, each list, the file, its bytes; two
    bytes a character once a record holds a non-Latin-1 character), 450 MB above the report.
    A command writes the pieces into its output file as they are made (engine/cli/outputs.py):
    collected in one buffer and copied out of it, the file's bytes were held twice (the
    buffer and its copy, 130 MB at 100k nodes) at the run's peak."""
    record = json.JSONEncoder(ensure_ascii=False).encode        # as json.dumps(v, ensure_ascii=False)
    yield b"{\n"
    for n, (key, value) in enumerate(report.items()):
        yield ((",\n" if n else "") + f"  {json.dumps(key)}: ").encode()
        if isinstance(value, list) and value:
            yield b"[\n"
            last = len(value) - 1
            for k, v in enumerate(value):
                yield ("    " + record(v) + (",\n" if k < last else "\n  ]")).encode()
        else:
            yield json.dumps(value, indent=2, ensure_ascii=False).replace("\n", "\n  ").encode()
    yield b"\n}\n"
