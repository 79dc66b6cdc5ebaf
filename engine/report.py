"""The report model of one run, as JSON (stable ordering, byte-identical across
runs: no timings) and as a short terminal summary."""
from __future__ import annotations

import json
from collections import Counter

from . import __version__
from .context import RunContext


def graph_stats(model) -> dict:
    nodes = model.node_count()
    data_edges = sum(len(o.peers) for g in model.graph_order for n in g.nodes() for o in n.outs)
    ctrl_edges = sum(len(n.out_ctrl) for g in model.graph_order for n in g.nodes())
    return {"graphs": len(model.graph_order), "subgraphs": len(model.graph_order) - 1, "nodes": nodes,
            "data_edges": data_edges, "control_edges": ctrl_edges}


def build_report(ctx: RunContext, input_file: str, before: dict) -> dict:
    ins = [i.to_json() for i in ctx.insertions]
    return {
        "memconflict": __version__,
        "input": input_file,
        "pack": {"name": ctx.pack.name, "version": ctx.pack.version, "schema_version": ctx.pack.schema_version},
        "options": dict(sorted(ctx.options.items())),
        "passes": [{"id": r.pass_id, "status": r.status, "inserted": r.inserted, "removed": r.removed,
                    **({"message": r.message} if r.message else {})} for r in ctx.pass_runs],
        "graph_before": before,
        "graph_after": graph_stats(ctx.model),
        "summary": {
            "inserted": len(ins),
            "removed": len(ctx.removals),
            "by_pass": dict(sorted(Counter(i["pass"] for i in ins).items())),
            "by_rule": dict(sorted(Counter(i["rule"] for i in ins).items())),
            "by_type": dict(sorted(Counter(i["type"] for i in ins).items())),
            "diagnostics": len(ctx.diagnostics),
        },
        "insertions": ins,
        "removals": [r.to_json() for r in ctx.removals],
        "diagnostics": [d.to_json() for d in ctx.diagnostics],
    }


def report_json(report: dict) -> bytes:
    return (json.dumps(report, indent=2, sort_keys=False, ensure_ascii=False) + "\n").encode()


def summary_text(ctx: RunContext, input_file: str) -> str:
    rows = [("pass", "status", "inserted", "removed", "time")]
    for r in ctx.pass_runs:
        rows.append((r.pass_id, r.status, str(r.inserted), str(r.removed), f"{r.seconds:.3f}s"))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = [f"memconflict: {input_file} with pack {ctx.pack.name} {ctx.pack.version}"]
    for k, r in enumerate(rows):
        lines.append("  " + "  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
        if k == 0:
            lines.append("  " + "  ".join("-" * w for w in widths))
    by_type = Counter(i.type for i in ctx.insertions)
    lines.append(f"  {len(ctx.insertions)} node(s) inserted"
                 + (" (" + ", ".join(f"{t} {c}" for t, c in sorted(by_type.items())) + ")" if by_type else "")
                 + f", {len(ctx.removals)} removed, {len(ctx.diagnostics)} diagnostic(s)")
    for d in ctx.diagnostics:
        lines.append(f"  {d.severity} {d.code}: {d.message}")
    return "\n".join(lines)
