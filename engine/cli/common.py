"""What every command shares: the argument parser class, `--option` parsing, and
loading a pack and a graph and running the passes on it."""
from __future__ import annotations

import argparse
import gc
import sys

from engine.core.errors import InputError, Loc, Problem, display_path
from engine.core.io import load_graph
from engine.core.gcpause import no_gc


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse's own errors: exit status 2 with usage
        self.print_usage(sys.stderr)
        sys.stderr.write(f"memconflict: error: {message}\n")
        raise SystemExit(2)


def parse_options(items: list[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    problems = []
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            problems.append(Problem(Loc("--option"), f"malformed option '{item}'",
                                    "write KEY=VALUE, e.g. --option ge.featureBaseRefreshable=1"))
            continue
        out[key.strip()] = value
    if problems:
        raise InputError(problems)
    return out


# The graph a command is working on, for the out-of-memory message (engine/cli/__init__.py).
CURRENT_GRAPH: dict = {}


def note_graph(path, model=None) -> None:
    """Record the graph being worked on (and, once loaded, its node count)."""
    CURRENT_GRAPH.clear()
    CURRENT_GRAPH["path"] = display_path(path)
    if model is not None:
        CURRENT_GRAPH["nodes"] = model.node_count()


def pack_dir(value, option: str = "--rules"):
    """The pack folder a command uses: `value` (its --rules or PACK argument), else
    $MEMCONFLICT_RULES, else the nearest pyproject.toml/memconflict.toml's
    [tool.memconflict] rules, else the installed pack (engine/core/resources.py)."""
    from engine.core.resources import find_pack
    return find_pack(value, option)[0]


def run_graph(args, progress, setup=None, pack=None, prepare=None):
    """Load the pack (unless given) and the graph, run the passes; returns (ctx, graph stats before).
    `setup(ctx)`, when given, runs before the passes (run --var-state opens its session there);
    `prepare(ctx)` runs after it, just before the first pass (e.g. to set a why-not probe)."""
    from engine.passes.context import RunContext
    from engine.passes.catalog import load_pack
    from engine.report.model import graph_stats
    from engine.passes.manager import check_graph, resolve_passes, run_passes
    from engine.pack.options import run_options

    if pack is None:
        pack = load_pack(pack_dir(args.rules))
    options = parse_options(args.option)
    ids = None
    if args.passes is not None:
        ids = [p.strip() for p in args.passes.split(",") if p.strip()]
        if not ids:
            raise InputError(Problem(Loc("--passes"), "no pass ids given", "e.g. --passes mem_rw_conflict"))
    progress.stage(f"loading {display_path(args.graph)}")
    note_graph(args.graph)
    # Note [gc]: the model is long-lived; freezing it keeps the cyclic GC from
    # rescanning 10^5-10^6 objects on every collection (superlinear otherwise). It is
    # frozen before the collector comes back on: the first collection after the load
    # would walk every object the load made (0.2 s at 100k nodes, 2 s at 1M) to free none
    with no_gc():
        model, file_options = load_graph(args.graph, pack, getattr(args, "from_format", None),
                                         getattr(args, "weights", None))
        gc.freeze()
    note_graph(args.graph, model)
    options = run_options(pack.options, options, file_options)
    passes = resolve_passes(pack, ids, options)
    ctx = RunContext(pack, model, options)
    check_graph(ctx)
    if setup is not None:
        setup(ctx)
    before = graph_stats(model)
    if prepare is not None:
        prepare(ctx)
    with no_gc():       # Note [gc] in engine/passes/manager.py: off over the whole list
        # one call for the whole list (Note [handed-on symbol tables]), a progress line a pass
        run_passes(ctx, passes, before=lambda k, spec: progress.stage(f"pass {k}/{len(passes)} {spec.id}",
                                                                       lambda: len(ctx.insertions)))
        # Note [gc]: and what they made is frozen with the model (a batch run unfreezes it):
        # the first collection after them would walk all of it, 0.7 s at 100k nodes, to free
        # ~20 MiB (the nodes the passes removed; their cycles now wait for the exit)
        gc.freeze()
    return ctx, before


# ---- what `run` adds to a report and how it gates (single and batch runs) ------------
def runtime_section(args, ctx, report: dict | None) -> dict | None:
    """`--runtime`: the If/Case records of the graph after the passes, added to the report
    (when one is made)."""
    if not getattr(args, "runtime", False):
        return None
    from engine.report.explain import RuleTexts
    from engine.runtime.report import all_cites, cited, runtime_records, runtime_section as section
    records = runtime_records(ctx.model, ctx.pack, args.graph)
    if report is None:
        return records
    report["runtime"] = records
    report["sections"].append(section(records))
    texts = RuleTexts(ctx.pack.path)
    for c in cited(records, all_cites(ctx.pack)):          # the cited runtime items' source text
        entry = texts.get(c)
        if entry is not None:
            report["rules"].setdefault(str(c.loc), entry)
    report["rules"] = dict(sorted(report["rules"].items()))
    return records


FAIL_ON_KINDS = ("insertions", "warnings")


def fail_on_gates(items: list[str] | None) -> list[str]:
    """The `--fail-on` gates: `insertions`, `warnings`, or diagnostic codes (W18888)."""
    import re
    gates = []
    for item in items or ():
        item = item.strip()
        if item not in FAIL_ON_KINDS and not re.fullmatch(r"[A-Z]+[0-9]+", item):
            raise InputError(Problem(Loc("--fail-on"), f"unknown --fail-on '{item}'",
                                     "give a diagnostic code (e.g. W18888), 'insertions' or 'warnings'"))
        gates.append(item)
    return gates


def gated_findings(ctx, gates: list[str]) -> list[str]:
    """One line per gate the run's findings trip (empty: none)."""
    held = []
    for gate in dict.fromkeys(gates):
        if gate == "insertions":
            n = len(ctx.insertions)
        elif gate == "warnings":
            n = sum(1 for d in ctx.diagnostics if d.severity == "warning")
        else:
            n = sum(1 for d in ctx.diagnostics if d.code == gate)
        if n:
            held.append(f"{n} {gate if gate in FAIL_ON_KINDS else gate + ' diagnostic(s)'}")
    return held
