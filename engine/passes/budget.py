"""Analysis budgets: `run --budget N` (every budgeted pass) or `--budget PASS=N`, in work
units, for the passes whose cost grows with the graph. The pack declares which passes
have one, what their unit is and what they do when it runs out (`analysis_budgets:`,
rules/ge/budgets.yaml); the pass itself spends the units and, when they are gone,
falls back to GE's conservative answer and records where and what it did instead
(`BudgetEvent`), which the report lists. Without `--budget` nothing is counted.
"""
from __future__ import annotations

from dataclasses import dataclass

from engine.core.errors import Cite, Collector, InputError, Loc, Problem, did_you_mean
from engine.core.schema import Reader
from engine.core.yamlloc import span_of
from engine.pack.model import Pack
from engine.passes.registry import register_section


@dataclass(frozen=True, slots=True)
class BudgetDecl:
    pass_id: str
    unit: str
    fallback: str
    cite: Cite


@dataclass(frozen=True, slots=True)
class BudgetEvent:
    """A budget that ran out: where, how much, and what the pass did instead."""

    pass_id: str
    graph: str
    unit: str
    budget: int
    needed: int          # the work the full analysis would have taken (as far as known)
    where: str
    instead: str
    cite: Cite

    def to_json(self) -> dict:
        return {"pass": self.pass_id, "graph": self.graph, "unit": self.unit, "budget": self.budget,
                "needed": self.needed, "where": self.where, "instead": self.instead,
                "rule_loc": str(self.cite.loc)}


def load(value, pack: Pack, errors: Collector) -> dict[str, BudgetDecl] | None:
    r = Reader(value, "analysis_budgets", errors, Loc(str(pack.path)))
    out = {}
    for pid in list(r.map):
        e = Reader(r.get(pid, dict), f"analysis_budgets.{pid}", errors, r.key_loc(pid))
        unit = e.get("unit", str, "", required=True)
        fallback = e.get("fallback", str, "", required=True)
        e.done()
        if pid not in pack.passes:
            errors.error(r.key_loc(pid), f"analysis_budgets: unknown pass '{pid}'", did_you_mean(pid, pack.passes, "passes"))
            continue
        out[str(pid)] = BudgetDecl(str(pid), str(unit), str(fallback), Cite(f"budget/{pid}", *span_of(r.map, pid, r.loc)))
    r.done()
    return None if errors else out


register_section("analysis_budgets", load)


def parse_budgets(items: list[str] | None, pack: Pack) -> dict[str, int]:
    """`--budget N` / `--budget PASS=N` → {pass id: units}; errors are exit 2."""
    decls = pack.configs.get("analysis_budgets") or {}
    out: dict[str, int] = {}
    problems = []
    for item in items or ():
        pid, sep, n = item.rpartition("=")
        if not n.strip().isdigit() or int(n) <= 0:
            problems.append(Problem(Loc("--budget"), f"bad budget '{item}'", "write N or PASS=N, N > 0 work units"))
            continue
        targets = [pid.strip()] if sep else list(decls)
        for t in targets:
            if t not in decls:
                problems.append(Problem(Loc("--budget"), f"pass '{t}' declares no analysis budget",
                                        did_you_mean(t, decls, "passes with a budget (analysis_budgets:)")))
                continue
            out[t] = int(n)
    if problems:
        raise InputError(problems)
    return out


def budget_for(ctx, pass_id: str) -> tuple[int, BudgetDecl] | None:
    """The budget a pass runs under in this run, with its declaration (None: unbounded)."""
    n = (getattr(ctx, "budgets", None) or {}).get(pass_id)
    decl = (ctx.pack.configs.get("analysis_budgets") or {}).get(pass_id)
    return (n, decl) if n is not None and decl is not None else None
