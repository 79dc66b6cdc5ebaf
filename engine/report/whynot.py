"""Why not: what the passes decided about an edge, an anchor pair or a node they
left without isolation, and the near misses of a run.

`subject(model, specs)` turns `--why-not A [B]` into a Probe (engine/passes/probe.py)
before the passes run; the passes fill it; `answer(ctx, probe, ...)` lays out, per
pass of the pipeline, what it evaluated and the item that said "no conflict" — or
that the pass did not run (a gate, `--passes`) or never looked at the subject.
`near_misses(ctx)` is the JSON the report carries under `near_misses` with
`run --near-misses`, plus a table section for the HTML page.

Anchor notation: `NODE:I` (the first of two anchors, or an edge's `SRC:O->DST:I`
source, is an output; the second an input), `NODE:out:I` / `NODE:in:I`, or GE's
keys `NODE_out_I` / `NODE_in_I`; `GRAPH/NODE` names a node of a subgraph. One
argument that names no anchor is a node.
"""
from __future__ import annotations

import re

from engine.core.errors import Cite, InputError, Loc, Problem, did_you_mean
from engine.passes.probe import NOT_LOOKED, NOT_RUN, Look, Probe, ref
from engine.report.explain import RuleTexts, show

WHERE = Loc("--why-not")
_KEY = re.compile(r"^(?P<node>.+)_(?P<side>in|out)_(?P<idx>\d+)$")
_COLON = re.compile(r"^(?P<node>.+?)(?::(?P<side>in|out))?:(?P<idx>\d+)$")


# ---- the subject --------------------------------------------------------------------------
def _find_node(model, name: str):
    """The node called `name` (first graph in model order), else `GRAPH/NODE` of that graph
    (node names often hold slashes themselves, so the whole name is tried first)."""
    for g in model.graph_order:
        n = g.find(name)
        if n is not None:
            return n
    graph_name, _, node_name = name.partition("/")
    while node_name:
        g = model.graphs.get(graph_name)
        if g is not None and g.find(node_name) is not None:
            return g.find(node_name)
        head, _, node_name = node_name.partition("/")
        graph_name = f"{graph_name}/{head}"
    return None


def _all_names(model) -> list[str]:
    return [n.name for g in model.graph_order for n in g.node_list()]


def _anchor(model, text: str, default_side: str):
    """(anchor, None) or (None, node) or raises InputError."""
    text = text.strip()
    m = _COLON.match(text)
    if m is not None:
        node, side, idx = m["node"], m["side"] or default_side, int(m["idx"])
    else:
        m = _KEY.match(text)
        if m is not None and _find_node(model, m["node"]) is not None:
            node, side, idx = m["node"], m["side"], int(m["idx"])
        else:
            n = _find_node(model, text)
            if n is None:
                raise InputError(Problem(WHERE, f"no node '{text}' in the graph",
                                         did_you_mean(text, _all_names(model), "nodes")))
            return None, n
    n = _find_node(model, node)
    if n is None:
        raise InputError(Problem(WHERE, f"no node '{node}' in the graph",
                                 did_you_mean(node, _all_names(model), "nodes")))
    ports = n.outs if side == "out" else n.ins
    if not 0 <= idx < len(ports):
        raise InputError(Problem(WHERE, f"'{n.name}' has no {side}put {idx}",
                                 f"it has {len(ports)} {side}put(s)"))
    return ports[idx], None


def subject(model, specs: list[str]) -> tuple[Probe, dict]:
    """The probe for `--why-not` arguments and a description of what it asks."""
    if len(specs) == 1 and "->" in specs[0]:
        specs = [s.strip() for s in specs[0].split("->", 1)]
    if not 1 <= len(specs) <= 2 or not all(specs):
        raise InputError(Problem(WHERE, "give an edge SRC:O->DST:I, two anchors of one symbol, or a node",
                                 "e.g. --why-not a:0 b:1, --why-not 'a:0->b:1', --why-not relu1"))
    if len(specs) == 1:
        a, node = _anchor(model, specs[0], "out")
        if node is not None:
            return Probe(nodes=frozenset((node,))), {"kind": "node", "text": node.name, "graph": node.graph.name}
        return Probe(anchors=frozenset((a,))), {"kind": "anchor", "text": a.key, "graph": a.node.graph.name}
    x, nx = _anchor(model, specs[0], "out")
    y, ny = _anchor(model, specs[1], "in")
    if nx is not None or ny is not None:
        raise InputError(Problem(WHERE, "two arguments name two anchors, not nodes",
                                 "write NODE:I (or NODE_out_I / NODE_in_I) for each"))
    if x is y:
        raise InputError(Problem(WHERE, f"both arguments name {x.key}", "name two different anchors"))
    edge = x.is_out and not y.is_out and y.peer is x
    kind = "edge" if edge else "pair"
    text = f"{ref(x)} -> {ref(y)}" if edge else f"{x.key} × {y.key}"
    return (Probe(anchors=frozenset((x, y)), pairs=frozenset((frozenset((x, y)),)), pair_list=((x, y),)),
            {"kind": kind, "text": text, "graph": x.node.graph.name, "anchors": [x, y]})


# ---- the answer ----------------------------------------------------------------------------
def _insertions_on(ctx, probe: Probe, about: dict) -> list:
    """Insertions that isolate the subject (on the edge, at the anchors, at the node)."""
    out = []
    if about["kind"] == "node":
        (n,) = probe.nodes
        for i in ctx.insertions:
            ends = [i.producer, *i.consumers]
            if any(e.rpartition(":")[0] == n.name for e in ends):
                out.append(i)
        return out
    anchors = about.get("anchors") or list(probe.anchors)
    outs = {ref(a) for a in anchors if a.is_out}
    ins = {ref(a) for a in anchors if not a.is_out}
    for i in ctx.insertions:
        if about["kind"] == "edge":
            if i.producer in outs and ins & set(i.consumers):
                out.append(i)
        elif i.producer in outs or ins & set(i.consumers):
            out.append(i)
    return out


def answer(ctx, probe: Probe, about: dict, ids: list[str] | None) -> dict:
    """Per pipeline pass: its looks, or why it did not run or look (JSON-able)."""
    from engine.passes.manager import gate_verdicts

    by_pass: dict[str, list[Look]] = {}
    for look in dict.fromkeys(probe.looks):         # a pass scheduled twice may look twice alike
        by_pass.setdefault(look.pass_id, []).append(look)
    ran = list(dict.fromkeys(r.pass_id for r in ctx.pass_runs))
    rows = []
    for pid in ran:
        looks = by_pass.get(pid, [])
        if any(l.outcome != NOT_LOOKED for l in looks):     # it looked: where it did not is noise
            looks = [l for l in looks if l.outcome != NOT_LOOKED]
        status = next(r.status for r in ctx.pass_runs if r.pass_id == pid)
        if not looks:
            rows.append({"pass": pid, "outcome": NOT_LOOKED, "status": status,
                         "why": "it ran and recorded no decision about the subject (nothing it checks "
                                "involves these anchors)", "looks": []})
        else:
            rows.append({"pass": pid, "outcome": _summary(looks), "status": status,
                         "looks": [l.to_json() for l in looks]})
    for pid, verdict, cite in gate_verdicts(ctx.pack, ctx.options, ids):
        if pid in ran:
            continue
        row = {"pass": pid, "outcome": NOT_RUN, "why": verdict, "looks": []}
        if cite is not None:
            row["rule"], row["loc"] = cite.rule_id, str(cite.loc)
        rows.append(row)
    isolated = [{"name": i.name, "type": i.type, "pass": i.pass_id, "rule": i.rule,
                 "producer": i.producer, "consumers": list(i.consumers)} for i in _insertions_on(ctx, probe, about)]
    cites = [s.cite for l in probe.looks for s in l.steps if s.cite is not None]
    cites += [c for _, _, c in gate_verdicts(ctx.pack, ctx.options, ids) if c is not None]
    return {"subject": {k: v for k, v in about.items() if k != "anchors"}, "isolated_by": isolated,
            "passes": rows, "rules": rule_texts(ctx, cites)}


def _summary(looks: list[Look]) -> str:
    outcomes = list(dict.fromkeys(l.outcome for l in looks))
    return outcomes[0] if len(outcomes) == 1 else ", ".join(outcomes)


def rule_texts(ctx, cites: list[Cite]) -> dict:
    texts = RuleTexts(ctx.pack.path)
    table: dict[str, dict] = {}
    for c in cites:
        key = str(c.loc)
        if key in table:
            continue
        entry = texts.get(c)
        if entry is not None:
            table[key] = entry
    return dict(sorted(table.items()))


def render(ans: dict) -> str:
    s = ans["subject"]
    lines = [f"why not: {s['text']} ({s['kind']}, graph {s['graph']})"]
    if ans["isolated_by"]:
        for i in ans["isolated_by"]:
            lines.append(f"  isolated: {i['type']} {i['name']} by {i['pass']} (rule {i['rule']}): "
                         f"{i['producer']} -> {', '.join(i['consumers'])}  (memconflict explain GRAPH {i['name']})")
    else:
        lines.append("  isolated: no — no pass inserted a node on it")
    rules = ans["rules"]
    plain: dict[tuple[str, str], list[str]] = {}      # uncited not-run / not-looked rows, one line per reason
    for row in ans["passes"]:
        if row["outcome"] in (NOT_RUN, NOT_LOOKED) and not row.get("loc") and not row["looks"]:
            plain.setdefault((row["outcome"], row["why"]), [])
            if row["pass"] not in plain[(row["outcome"], row["why"])]:
                plain[(row["outcome"], row["why"])].append(row["pass"])
            continue
        head = f"  {row['pass']}: {row['outcome']}"
        if not row["looks"]:
            cite = f"  ({row['rule'] + ', ' if row.get('rule') else ''}{row['loc']})" if row.get("loc") else ""
            lines.append(f"{head} — {row['why']}{cite}")
            if row.get("loc"):
                lines += _quote(rules.get(row["loc"]), "      ")
            continue
        if all(l["outcome"] == NOT_LOOKED for l in row["looks"]):      # one line: where it did not look, why
            parts = []
            for l in row["looks"]:
                first = l["steps"][0] if l["steps"] else {}
                parts.append(f"{l['about']}: {l['kind']}" + (f" ({first['loc']})" if first.get("loc") else ""))
            lines.append(f"{head} — " + "; ".join(dict.fromkeys(parts)))
            continue
        lines.append(head)
        for look in row["looks"]:
            lines.append(f"    {look['about']} (graph {look['graph']}): {look['outcome']} — {look['kind']}")
            for k, st in enumerate(look["steps"]):
                mark = "  <- decisive" if k == look["decisive"] else ""
                cite = ", ".join(x for x in (("rule " + st["rule"]) if st.get("rule") else "", st.get("loc", "")) if x)
                lines.append(f"      {k + 1}. {st['text']}: {st['result']}{mark}" + (f"  ({cite})" if cite else ""))
                if k == look["decisive"] and st.get("loc"):
                    lines += _quote(rules.get(st["loc"]), "           ")
                for label, value in st.get("facts", []):
                    lines.append(f"           · {label}: {show(value)}")
    for (outcome, why), pids in plain.items():
        lines.append(f"  {outcome} ({why}): {', '.join(pids)}")
    return "\n".join(lines)


def _quote(entry: dict | None, indent: str) -> list[str]:
    if not entry:
        return []
    return [indent + "| " + line for line in entry["text"].splitlines()]


# ---- near misses --------------------------------------------------------------------------------
def near_misses(ctx, probe: Probe) -> dict:
    """The `near_misses` member of the JSON report: the close looks of the run."""
    cites = [s.cite for l in probe.looks for s in l.steps if s.cite is not None]
    by_kind: dict[str, int] = {}
    for l in probe.looks:
        by_kind[f"{l.pass_id}/{l.kind}"] = by_kind.get(f"{l.pass_id}/{l.kind}", 0) + 1
    return {"count": len(probe.looks), "dropped": probe.dropped, "limit": probe.limit,
            "by_kind": dict(sorted(by_kind.items())),
            "items": [l.to_json() for l in probe.looks], "rules": rule_texts(ctx, cites)}


def near_miss_section(data: dict) -> dict:
    """A `table` section of the HTML report listing the near misses."""
    rows = []
    for item in data["items"]:
        k = item["decisive"]
        dec = item["steps"][k] if 0 <= k < len(item["steps"]) else None
        rows.append([item["pass"], item["about"], item["kind"],
                     f"{dec['text']}: {dec['result']}" if dec else "",
                     dec.get("loc", "") if dec else ""])
    title = f"Near misses ({data['count']}" + (f", {data['dropped']} more not listed" if data["dropped"] else "") + ")"
    return {"id": "near-misses", "title": title, "kind": "table",
            "data": {"columns": ["pass", "where", "kind", "decided by", "rule"], "numeric": [], "rows": rows}}



# ---- budgets ---------------------------------------------------------------------------------
def budget_report(ctx) -> dict:
    """The `budgets` member of the JSON report: the budgets given, and each that ran out."""
    decls = ctx.pack.configs.get("analysis_budgets") or {}
    return {"given": {pid: {"units": n, "unit": decls[pid].unit, "fallback": decls[pid].fallback,
                            "rule_loc": str(decls[pid].cite.loc)} for pid, n in sorted(ctx.budgets.items())},
            "exhausted": [e.to_json() for e in ctx.budget_events],
            "rules": rule_texts(ctx, [decls[pid].cite for pid in sorted(ctx.budgets)])}


def budget_section(data: dict) -> dict:
    rows = [[e["pass"], e["graph"], f"{e['budget']} of {e['needed']}", e["where"], e["instead"]]
            for e in data["exhausted"]]
    rows += [[pid, "", f"{g['units']} (not exhausted)", "", ""] for pid, g in data["given"].items()
             if not any(e["pass"] == pid for e in data["exhausted"])]
    return {"id": "budgets", "title": f"Analysis budgets ({len(data['exhausted'])} exhausted)", "kind": "table",
            "data": {"columns": ["pass", "graph", "units spent of needed", "where", "what it did instead"],
                     "numeric": [], "rows": rows}}
