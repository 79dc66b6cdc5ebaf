"""The run report's link from each variable-pass insertion to its variable: the variable's
name, node and planned address (`insertions[].variable` in the JSON; a step of the card in
HTML and `explain`).

The plan is the run's own placement with `--var-state` (the session the graph compiled in);
otherwise the graph is placed in a fresh session and put back as it was, so the report shows
where the build would put the variable without changing the run's output.
"""
from __future__ import annotations

from engine.report.explain import is_rejected_step, step


def link_variables(report: dict, ctx, plan=None) -> None:
    """Add `variable` to the insertion records of variable passes whose facts name one."""
    var_passes = {pid for pid, spec in ctx.pack.passes.items() if spec.algorithm == "variable_pass"}
    wanted = [r for r in report["insertions"]
              if r["pass"] in var_passes and isinstance(r.get("reason"), dict) and r["reason"].get("variable")]
    if not wanted or (plan is None and not getattr(ctx, "var_links", True)):
        return                      # no report is written from this run (engine/cli/run.py)
    where = "the run's session (--var-state)"
    failure = None
    if plan is None:
        plan, failure = _fresh_plan(ctx)
        where = "a fresh session"
    rows = {}
    for e in (plan.entries if plan is not None else ()):
        rows.setdefault(e.name, e)
    for r in wanted:
        name = str(r["reason"]["variable"])
        e = rows.get(name)
        link = {"name": name, "node": e.node if e else None, "graph": e.graph if e else None,
                "address": e.address if e else None, "memory_type": e.memory_type if e else None,
                "var_key": e.key if e else None, "planned_in": where}
        if e is None:
            link["why_no_address"] = failure or "the variable is not placed (a ref, or not a placed type)"
            text = f"the variable is {name} (no planned address: {link['why_no_address']})"
        else:
            text = (f"the variable is {name}: planned at {e.address} ({e.memory_type}, VarKey {e.key}) "
                    f"in {where}")
        r["variable"] = link
        steps = r.setdefault("explanation", [])
        # a fact of the decision: before the rejected alternatives, which close the card
        at = next((i for i, s in enumerate(steps) if is_rejected_step(r, s)), len(steps))
        steps.insert(at, step(text))


def _fresh_plan(ctx):
    """Place the run's graph in a fresh session, then put back every field the placement wrote
    (output and input offsets, output sizes), so the run's output does not change.

    Note [plan in place]: copying the model (serialize, parse, build) costs 1.5x the placement
    itself; the fields AssignVarMemory writes are few, so the placement journals them and
    puts them back (Note [placement journal] in engine/varmgr/placement.py).
    """
    from engine.varmgr.manager import VarManagerPool
    from engine.varmgr.placement import plan_graph_and_undo
    from engine.varmgr.records import VarError
    from engine.varmgr.session import open_session
    cfg = ctx.pack.configs.get("var_policy")
    if cfg is None:
        return None, "the pack has no variable policy"
    try:
        vm = open_session(VarManagerPool(cfg.policy), None, None, dict(ctx.options), None)
        return plan_graph_and_undo(ctx.model, vm, 0), None
    except VarError as exc:
        return None, f"placement failed: {exc.message}"


def variable_sections(report: dict) -> list[dict]:
    """A table of the linked variables (anchors `var-NAME`) with the insertions that name them."""
    rows: dict[str, list] = {}
    for r in report["insertions"]:
        v = r.get("variable")
        if not v:
            continue
        row = rows.setdefault(v["name"], [
            {"text": v["name"], "id": f"var-{v['name']}", "href": f"#var-{v['name']}"}, v["var_key"] or "",
            v["memory_type"] or "", "" if v["address"] is None else str(v["address"]), v["planned_in"], []])
        row[5].append(r["name"])
    if not rows:
        return []
    table = [row[:5] + [", ".join(row[5])] for _, row in sorted(rows.items())]
    return [{"id": "variables", "title": "Variables of the variable passes' insertions", "kind": "table",
             "data": {"columns": ["variable", "VarKey", "memory type", "address", "planned in", "inserted nodes"],
                      "numeric": [3], "rows": table}}]
