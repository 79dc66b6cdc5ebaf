"""`memconflict run --runtime`: for every If/Case of the graph, the runtime nodes GE's RT2
builder would add (parent guarders, IdentityAddr, PointFromInputs), each with the reason in
plain words and the pack item that decided, as plain data for the JSON and HTML reports and
a few terminal lines."""
from __future__ import annotations

from engine.core.errors import Cite
from engine.runtime.dumpcond import DumpConds
from engine.runtime.cond import run_case


def _rules_of(case) -> dict[str, Cite]:
    """Case value name → the guard rule that gave it its guarder (dump form)."""
    out = {}
    for f in case.feeds:
        if f.rule is not None:
            out[f.name] = f.rule.cite
    stack = [case.cond]
    while stack:
        c = stack.pop()
        for b in c.branches:
            for n in (b.nodes if b is not None else ()):
                if n.cond is not None:
                    stack.append(n.cond)
                elif n.rule is not None:
                    out[n.name] = n.rule.cite
    return out


def _cite_json(c: Cite | None) -> dict:
    return {"rule": c.rule_id, "rule_loc": str(c.loc)} if c is not None else {"rule": "", "rule_loc": ""}


def cited(records: dict, rt_cites: list[Cite]) -> list[Cite]:
    """The pack items the records cite (for the report's `rules` table), by their locations."""
    wanted = {a["rule_loc"] for c in records["conds"] for a in c["added"] if a["rule_loc"]}
    return [c for c in rt_cites if str(c.loc) in wanted]


def all_cites(pack) -> list[Cite]:
    rt = pack.configs["runtime"]
    return [r.cite for r in rt.guard_rules] + list(rt.cites.values())


def cond_records(dc: DumpConds, node) -> dict:
    rt = dc.rt
    case = dc.case_of(node)
    out, decisions = run_case(case, rt)
    rules = _rules_of(case)
    rec = {"node": node.name, "graph": node.graph.name, "type": node.type, "ok": out["ok"],
           "holders": out["holders"], "conflict_indexes": out["conflict_indexes"],
           "output_placements": out["output_placements"], "added": []}
    if not out["ok"]:
        rec["reason"] = out["reason"]
        return rec
    top = decisions[-1]
    added = rec["added"]
    for g in top["parent_guarders"]:
        srcs = []
        cite = None
        for s in g["sources"]:
            origin = s["source"].rsplit(":", 1)[0]
            if "guarder" in s:
                srcs.append(f"branch {s['branch']} returns {origin}, freed in the branch by its {g['type']} (moved out)")
                cite = cite or rules.get(origin)
            else:
                srcs.append(f"branch {s['branch']} passes through an input guarded outside by {g['type']}")
                cite = cite or rt.cites["free_guarders"]
        added.append({"type": g["type"], "name": g["name"], "where": node.graph.name,
                      "why": f"output {g['output']} of {node.name} must be freed after the If/Case: " + "; ".join(srcs),
                      **_cite_json(cite)})
    for ia in top["identity_addrs"]:
        whys = [f"port {p['port']}: {p['source']} → output {p['output']} ({p['why']})" for p in ia["pairs"]]
        cite = next((rules[p["source"].rsplit(":", 1)[0]] for p in ia["pairs"]
                     if p["source"].rsplit(":", 1)[0] in rules), rt.cites["names.identity_addr"])
        added.append({"type": rt.node_types["identity_addr"], "name": ia["name"], "where": ia["graph"],
                      "why": f"branch {ia['branch']} adds a reference to what it returns, so the parent's guarder "
                             "frees it once: " + "; ".join(whys), **_cite_json(cite)})
    for pf in top["point_froms"]:
        srcs = "; ".join(f"output {i}: {', '.join(top['conflict_sources'][str(i)])}" for i in pf["outputs"])
        added.append({"type": rt.node_types["point_from_inputs"], "name": pf["name"], "where": pf["graph"],
                      "why": f"outputs {pf['outputs']} come from different sources in different branches ({srcs}): "
                             f"branch {pf['branch']} points them at its inputs",
                      **_cite_json(rt.cites["names.point_from_inputs"])})
    return rec


def runtime_records(model, pack, path: str) -> dict:
    dc = DumpConds(model, pack, path)
    conds = [cond_records(dc, n) for n in dc.cond_nodes()]
    counts: dict[str, int] = {}
    for c in conds:
        for a in c["added"]:
            counts[a["type"]] = counts.get(a["type"], 0) + 1
    return {"conds": conds, "summary": {"conds": len(conds), "failed": sum(1 for c in conds if not c["ok"]),
                                        "added": dict(sorted(counts.items()))}}


def runtime_section(records: dict) -> dict:
    """A `table` section of the report page (README "The JSON report": `sections`)."""
    rows = []
    for c in records["conds"]:
        if not c["ok"]:
            rows.append([c["node"], c["graph"], "—", "—", "—", "GE fails: " + c["reason"], ""])
        for a in c["added"]:
            rows.append([c["node"], c["graph"], a["name"], a["type"], a["where"], a["why"],
                         {"text": a["rule"] or a["rule_loc"], "note": a["rule_loc"]} if a["rule_loc"] else ""])
    return {"id": "runtime", "title": "Runtime nodes GE would add for If/Case", "kind": "table",
            "data": {"columns": ["If/Case", "graph", "added node", "type", "in graph", "why", "rule"],
                     "numeric": [], "rows": rows}}


def runtime_lines(records: dict, limit: int = 10) -> list[str]:
    s = records["summary"]
    added = ", ".join(f"{t} {n}" for t, n in s["added"].items()) or "nothing"
    lines = [f"  runtime: {s['conds']} If/Case node(s), adds {added}" + (f"; {s['failed']} fail in GE" if s["failed"] else "")]
    for c in records["conds"][:limit]:
        what = ", ".join(f"{a['type']} {a['name']}" for a in c["added"]) if c["ok"] else "GE fails: " + c["reason"]
        lines.append(f"    {c['node']} ({c['graph']}): {what or 'nothing'}")
    if len(records["conds"]) > limit:
        lines.append(f"    ... and {len(records['conds']) - limit} more (see the JSON report)")
    return lines
