"""Impact of a pack change on a corpus of graphs.

Each graph is run twice (OLD's and NEW's pipelines, or the `--passes` given) in
one worker process; the two runs' isolation nodes are matched by position — the
graph, the producer anchor and the consumer anchors, with names the passes
generated replaced by the position of the node they name — never by name.
Unmatched nodes are added/removed; matched ones whose type, pass, rule or
decisive facts differ are changed. Diagnostics, node removals and (when a
variable session ran) the variable plan are compared too.

Graphs are independent: `run_corpus` maps them over worker processes and keeps
the input order, so the result does not depend on `--jobs`.
"""
from __future__ import annotations

import gc
from collections import Counter
from typing import Any

from engine.core.errors import Cite, InputError, PassFailure, display_path
from engine.core.parallel import map_ordered

from engine.diff.links import raw_refs

_PACKS: dict[str, Any] = {}       # per process: pack folder → loaded pack


def _pack(folder: str):
    if folder not in _PACKS:
        from engine.passes.catalog import load_pack
        _PACKS[folder] = load_pack(folder)
    return _PACKS[folder]


def preload(folder: str, pack) -> None:
    _PACKS[str(folder)] = pack


# ---- one side -----------------------------------------------------------------------------
def why_text(reason: dict) -> str:
    r = reason
    if "cell" in r:
        base = f"{r.get('output_rw')} × {r.get('input_rw')} → {r.get('decision')} ({r['cell']})"
        typed = [f"{k.split('_')[0]} by {_named(r[k])}" for k in ("output_rule", "input_rule") if r.get(k)]
        return base + ("; " + ", ".join(typed) if typed else "")
    if "pair" in r:
        return f"{r['pair']} ({r.get('pair_rule', '')}) → checker {r.get('checker', '?')}"
    if "why" in r:
        return str(r["why"])
    facts = [f"{k}={v}" for k, v in r.items() if isinstance(v, (str, int, bool, Cite)) and not k.endswith("_loc")]
    return ", ".join(facts[:4])


# Note [decisive facts]: a rewrite rule's provenance also carries its step's `let`
# values, which a pack change may alter while the same rule still makes the same
# node; only the facts that say why the node exists make an isolation "changed".
DECISIVE = ("kind", "decision", "cell", "output_rw", "input_rw", "output_rule", "input_rule",
            "checker", "pair", "pair_rule")


def _sig(reason: dict, rename) -> tuple:
    """Decisive facts, without locations (a moved line is no change) or generated names."""
    return tuple((k, _norm(reason[k], rename)) for k in DECISIVE if k in reason)


def _named(v: Any) -> str:
    """A cited rule by its id (its location is no fact: a moved line is no change)."""
    return v.rule_id if isinstance(v, Cite) else str(v)


def _norm(v: Any, rename) -> Any:
    if isinstance(v, Cite):
        return v.rule_id
    if isinstance(v, str):
        return rename(v)
    if isinstance(v, list):
        return tuple(_norm(x, rename) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _norm(x, rename)) for k, x in v.items()))
    return v


class _Positions:
    """Canonical positions of one run's inserted nodes (chains resolved)."""

    def __init__(self, insertions):
        self.by_name = {(i.graph, i.name): i for i in insertions}
        self.names = {i.name: i.graph for i in insertions}
        self.memo: dict = {}

    def ref(self, text: str, graph: str) -> str:
        node, sep, idx = text.rpartition(":")
        ins = self.by_name.get((graph, node)) if sep else None
        return f"<{ins.type} {self.pos(ins)}>:{idx}" if ins is not None else text

    def parts(self, ins) -> tuple[str, tuple[str, ...]]:
        """(producer anchors, consumer anchors), inserted nodes named by their position."""
        prod = ", ".join(self.ref(p, ins.graph) for p in ins.producer.split(", ") if p)
        return prod, tuple(sorted(self.ref(c, ins.graph) for c in ins.consumers))

    def pos(self, ins) -> str:
        key = (ins.graph, ins.name)
        if key in self.memo:
            return self.memo[key] or "…"
        self.memo[key] = None                # guards a cycle
        prod, cons = self.parts(ins)
        self.memo[key] = f"{prod} → {', '.join(cons)}"
        return self.memo[key]

    def rename(self, text: str) -> str:
        node, sep, idx = text.rpartition(":")
        if sep and node in self.names:
            return self.ref(text, self.names[node])
        if text in self.names:
            return f"<{self.pos(self.by_name[(self.names[text], text)])}>"
        return text


def insertion_records(insertions) -> tuple[_Positions, list[dict]]:
    """One run's isolations keyed by position, with their decisive facts and references."""
    pos = _Positions(insertions)
    out = []
    for i in insertions:
        out.append({"name": i.name, "type": i.type, "graph": i.graph, "pass": i.pass_id, "rule": i.rule,
                    "rule_loc": i.rule_loc, "producer": i.producer, "consumers": list(i.consumers),
                    "why": why_text(i.reason), "key": (i.graph, *pos.parts(i)), "sig": _sig(i.reason, pos.rename),
                    "refs": raw_refs(i.pass_id, i.rule, i.cite, i.reason)})
    return pos, out


def run_side(pack, graph_file: str, options: dict, passes: list[str] | None) -> dict:
    from engine.core.io import load_graph
    from engine.passes.context import RunContext
    from engine.passes.manager import check_graph, resolve_passes, run_passes

    from engine.pack.options import run_options

    model, file_options = load_graph(graph_file, pack)
    # each side gets the options its pack declares (cmd_diff checked them against both)
    opts = run_options(pack.options, {k: v for k, v in options.items() if not pack.options or k in pack.options},
                       file_options)
    skipped = [p for p in passes or [] if p not in pack.passes]
    specs = resolve_passes(pack, [p for p in passes if p in pack.passes] if passes is not None else None, opts)
    ctx = RunContext(pack, model, opts)
    check_graph(ctx)
    gc.collect()
    gc.freeze()          # Note [gc] in engine/cli/common.py; undone below so a worker's memory is reused
    status, message = "ok", ""
    try:
        run_passes(ctx, specs)
    except PassFailure as exc:
        status, message = "failed", str(exc)
    pos, ins = insertion_records(ctx.insertions)
    rem = [{"name": r.name, "type": r.type, "graph": r.graph, "pass": r.pass_id, "rule": r.rule,
            "key": (r.graph, pos.rename(r.name), r.type), "refs": raw_refs(r.pass_id, r.rule, None, r.reason)}
           for r in ctx.removals]
    diags = [{"code": d.code, "severity": d.severity, "message": d.message, "pass": d.pass_id,
              "key": (d.code, d.severity, d.pass_id, " ".join(pos.rename(w) for w in _uncited(d).split(" "))),
              "refs": raw_refs(d.pass_id, str(d.details.get("rule", "")), d.cites[0] if d.cites else None, {})}
             for d in ctx.diagnostics]
    plan = _var_plan(ctx)
    out = {"status": status, "message": message, "skipped": skipped, "passes": [r.pass_id for r in ctx.pass_runs],
           "insertions": ins, "removals": rem, "diagnostics": diags, "variables": plan}
    gc.unfreeze()
    return out


def _uncited(d) -> str:
    """A diagnostic's message without the locations of the rules it cites (a moved
    line is no change)."""
    text = d.message
    for c in d.cites:
        text = text.replace(f" ({c.where})", "")
    return text


def _var_plan(ctx) -> dict | None:
    session = ctx.var_session
    if session is None:
        return None
    from engine.varmgr.placement import plan_graph
    from engine.varmgr.records import VarError
    try:
        plan = plan_graph(ctx.model, session.manager, 0)
    except VarError as exc:
        return {"error": str(exc)}
    return {f"{e.graph}/{e.node}": {"key": e.key, "memory_type": e.memory_type, "size": e.size,
                                     "offset": e.offset, "decision": e.decision} for e in plan.entries}


# ---- comparing the two runs ------------------------------------------------------------------
def _public(rec: dict) -> dict:
    return {k: rec[k] for k in ("name", "type", "pass", "rule", "rule_loc", "why", "refs")}


def _position(key: tuple, rec: dict) -> dict:
    return {"graph": key[0], "producer": key[1], "consumers": list(key[2])}


def match_insertions(old: list[dict], new: list[dict]) -> dict:
    groups: dict[tuple, tuple[list, list]] = {}
    for r in old:
        groups.setdefault(r["key"], ([], []))[0].append(r)
    for r in new:
        groups.setdefault(r["key"], ([], []))[1].append(r)
    added, removed, changed = [], [], []
    for key in sorted(groups):
        a, b = list(groups[key][0]), list(groups[key][1])
        for x in list(a):           # identical decisions first
            same = next((y for y in b if (y["type"], y["pass"], y["rule"], y["sig"]) ==
                         (x["type"], x["pass"], x["rule"], x["sig"])), None)
            if same is not None:
                a.remove(x)
                b.remove(same)
        for x, y in zip(a, b):
            facts = dict(x["sig"]), dict(y["sig"])
            what = [f for f in ("type", "pass", "rule") if x[f] != y[f]] + \
                [k for k in DECISIVE if facts[0].get(k) != facts[1].get(k)]
            changed.append({"position": _position(key, x), "old": _public(x), "new": _public(y), "what": what})
        removed += [{"position": _position(key, x), "old": _public(x)} for x in a[len(b):]]
        added += [{"position": _position(key, y), "new": _public(y)} for y in b[len(a):]]
    return {"added": added, "removed": removed, "changed": changed}


def _multiset(old: list[dict], new: list[dict], fields: tuple[str, ...]) -> tuple[list, list]:
    ca, cb = Counter(r["key"] for r in old), Counter(r["key"] for r in new)
    gone, came = ca - cb, cb - ca
    lost, gained = [], []
    for r in old:
        if gone[r["key"]] > 0:
            gone[r["key"]] -= 1
            lost.append({k: r[k] for k in fields})
    for r in new:
        if came[r["key"]] > 0:
            came[r["key"]] -= 1
            gained.append({k: r[k] for k in fields})
    return gained, lost


def _vars(a: dict | None, b: dict | None) -> dict | None:
    if a is None and b is None:
        return None
    a, b = a or {}, b or {}
    return {"added": sorted(k for k in b if k not in a), "removed": sorted(k for k in a if k not in b),
            "changed": [{"variable": k, "old": a[k], "new": b[k]} for k in sorted(a) if k in b and a[k] != b[k]]}


def impact_of(graph_file: str, old_dir: str, new_dir: str, options: dict, passes: list[str] | None) -> dict:
    """Both runs on one graph and their differences (JSON-able, refs still raw)."""
    try:
        a = run_side(_pack(old_dir), graph_file, options, passes)
        b = run_side(_pack(new_dir), graph_file, options, passes)
    except InputError as exc:     # Problems cross the process boundary as plain tuples
        return {"graph": display_path(graph_file),
                "error": [(p.loc.file, p.loc.line, p.loc.col, p.message, p.hint) for p in exc.problems]}
    out = {"graph": display_path(graph_file),
           "status": {"old": a["status"], "new": b["status"]},
           "messages": {"old": a["message"], "new": b["message"]},
           "skipped": {"old": a["skipped"], "new": b["skipped"]},
           "inserted": {"old": len(a["insertions"]), "new": len(b["insertions"])}}
    out.update(match_insertions(a["insertions"], b["insertions"]))
    rf = ("name", "type", "graph", "pass", "rule", "refs")
    out["removals"] = dict(zip(("new", "old"), _multiset(a["removals"], b["removals"], rf)))
    df = ("code", "severity", "message", "pass", "refs")
    out["diagnostics"] = dict(zip(("gained", "lost"), _multiset(a["diagnostics"], b["diagnostics"], df)))
    out["variables"] = _vars(a["variables"], b["variables"])
    return out


def _impact_task(task: tuple) -> dict:
    return impact_of(*task)


def run_corpus(graphs: list[str], old_dir: str, new_dir: str, options: dict, passes: list[str] | None,
               jobs: int, scheduler: str | None = None) -> list[dict]:
    """Both packs on every graph, in input order: here, in `jobs` local processes (forked, so
    they share the packs loaded here), or on a dask cluster (engine/core/parallel.py), whose
    workers load the packs and graphs from their paths."""
    tasks = [(g, str(old_dir), str(new_dir), dict(options), passes) for g in graphs]
    return list(map_ordered(_impact_task, tasks, jobs, scheduler))
