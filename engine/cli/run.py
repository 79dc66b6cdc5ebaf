"""`memconflict run`, `explain`, `convert` and `symbols`: commands over one graph."""
from __future__ import annotations

import sys
from pathlib import Path

from engine.core.errors import InputError, Loc, PassFailure, Problem, display_path
from engine.core.io import YAML_SUFFIXES, load_graph
from engine.cli.common import note_graph, pack_dir, run_graph

RULES_HELP = ("rule pack folder (default: $MEMCONFLICT_RULES, else [tool.memconflict] rules in the nearest "
              "pyproject.toml/memconflict.toml, else the installed GE pack)")


def add_commands(sub) -> None:
    r = sub.add_parser("run", help="run passes on a graph and report every inserted node")
    r.add_argument("graph", help="GE dump (.txt/.pbtxt text, .pb binary) or YAML graph")
    r.add_argument("--passes", help="comma-separated pass ids, run in this order (default: the pack's pipeline)")
    r.add_argument("--option", action="append", metavar="KEY=VALUE", help="GE option (repeatable)")
    r.add_argument("--rules", metavar="DIR", help=RULES_HELP)
    r.add_argument("--out", metavar="OUT.pbtxt", help="write the graph after the passes")
    r.add_argument("--report-json", metavar="R.json")
    r.add_argument("--report-html", metavar="R.html")
    r.add_argument("--quiet", action="store_true", help="print nothing on success")
    r.add_argument("--budget", action="append", metavar="N|PASS=N",
                   help="analysis budget in work units for every budgeted pass, or one (repeatable); when it runs "
                        "out the pass falls back to GE's conservative answer and the report says where")
    r.add_argument("--near-misses", action="store_true",
                   help="record the decisions that came closest to an isolation and add them to the JSON/HTML "
                        "report (`near_misses`)")
    r.add_argument("--fail-on", action="append", metavar="CODE|insertions|warnings",
                   help="exit 3 when the run has such findings: a diagnostic code (W18888), any inserted "
                        "node, or any warning; outputs are still written (repeatable)")
    r.set_defaults(func=cmd_run)

    e = sub.add_parser("explain", help="run the passes and explain why one node was inserted")
    e.add_argument("graph", help="GE dump (.txt/.pbtxt text, .pb binary) or YAML graph")
    e.add_argument("node", nargs="?", help="name of an inserted node")
    e.add_argument("--why-not", nargs="+", metavar="ANCHOR",
                   help="explain why no node was inserted: an edge SRC:O->DST:I (or SRC:O DST:I), two anchors "
                        "of one symbol (NODE:out:I NODE:in:J, or GE keys NODE_out_I NODE_in_J), or a node")
    e.add_argument("--json", action="store_true", help="with --why-not: print the answer as JSON")
    e.add_argument("--passes", help="comma-separated pass ids, run in this order (default: the pack's pipeline)")
    e.add_argument("--option", action="append", metavar="KEY=VALUE", help="GE option (repeatable)")
    e.add_argument("--rules", metavar="DIR", help=RULES_HELP)
    e.set_defaults(func=cmd_explain)

    c = sub.add_parser("convert", help="convert between GE dumps (text/binary) and the YAML graph form")
    c.add_argument("input")
    c.add_argument("output")
    c.add_argument("--rules", metavar="DIR", help=RULES_HELP)
    c.set_defaults(func=cmd_convert)

    sy = sub.add_parser("symbols", help="print the memory symbols (GE GetRefMapping) of a graph")
    sy.add_argument("graph")
    sy.add_argument("--graph", dest="graph_name", metavar="NAME", help="a subgraph to start from (default: root)")
    sy.add_argument("--json", action="store_true")
    sy.add_argument("--rules", metavar="DIR", help=RULES_HELP)
    sy.set_defaults(func=cmd_symbols)


def cmd_run(args) -> int:
    from engine.core.dumpio import model_to_text, serialize_model, is_binary_path
    from engine.cli.outputs import Outputs
    from engine.report.model import build_report, report_json
    from engine.report.text import Progress, summary_text

    gates = _fail_on(args.fail_on)
    files = Outputs()
    files.claim("--out", args.out)
    files.claim("--report-json", args.report_json)
    files.claim("--report-html", args.report_html)
    probe = None
    if args.near_misses:
        from engine.passes.probe import Probe
        probe = Probe(near=True)

    def prepare(ctx):
        from engine.passes.budget import parse_budgets
        ctx.probe = probe
        ctx.budgets = parse_budgets(args.budget, ctx.pack)

    with Progress(sys.stderr, enabled=not args.quiet) as progress:
        try:
            ctx, before = run_graph(args, progress, prepare)
        except PassFailure as exc:
            sys.stderr.write(f"memconflict: {exc}\n")
            return 1
        progress.stage("writing outputs")
        outputs: list[tuple[str, bytes]] = []
        if args.out:
            data = serialize_model(ctx.model)
            outputs.append((args.out, data if is_binary_path(args.out) else model_to_text(data)))
        report = build_report(ctx, display_path(args.graph), before)
        if ctx.budgets:
            from engine.report.whynot import budget_report, budget_section
            report["budgets"] = budget_report(ctx)
            report["sections"].append(budget_section(report["budgets"]))
        if probe is not None:
            from engine.report.whynot import near_miss_section, near_misses
            report["near_misses"] = near_misses(ctx, probe)
            report["sections"].append(near_miss_section(report["near_misses"]))
        if args.report_json:
            outputs.append((args.report_json, report_json(report)))
        if args.report_html:
            from engine.report.html import render_html
            outputs.append((args.report_html, render_html(report, ctx).encode()))
        files.write(outputs)
    if not args.quiet:
        print(summary_text(ctx, display_path(args.graph)), file=files.text_stream())
        for ev in ctx.budget_events:
            print(f"  budget: {ev.pass_id} on {ev.graph}: {ev.budget} of {ev.needed} {ev.unit.split(' (')[0]}: "
                  f"{ev.where}; {ev.instead}", file=files.text_stream())
    held = gated_findings(ctx, gates)
    if held:
        sys.stderr.write(f"memconflict: --fail-on: {'; '.join(held)}\n")
        return 3
    return 0


FAIL_ON_KINDS = ("insertions", "warnings")


def _fail_on(items: list[str] | None) -> list[str]:
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


def cmd_explain(args) -> int:
    from engine.report.explain import render_card
    from engine.report.model import explain_insertion, not_inserted
    from engine.report.text import Progress

    if args.why_not:
        return _why_not(args)
    if args.node is None:
        raise InputError(Problem(Loc("explain"), "give the name of an inserted node, or --why-not ANCHOR [ANCHOR]",
                                 "e.g. memconflict explain g.pbtxt a_Identity0, or --why-not a:0 b:1"))
    with Progress(sys.stderr, enabled=True) as progress:
        ctx, _ = run_graph(args, progress)
    found = [i for i in ctx.insertions if i.name == args.node]
    if not found:
        raise InputError(Problem(Loc(display_path(args.graph)), *not_inserted(ctx, args.node)))
    for k, ins in enumerate(found):
        card, rules = explain_insertion(ctx, ins)
        print(("\n" if k else "") + render_card(card, rules))
    return 0


def _why_not(args) -> int:
    """`explain GRAPH --why-not ANCHOR [ANCHOR]`: what each pass decided about it."""
    import json

    from engine.report.text import Progress
    from engine.report.whynot import answer, render, subject

    if args.node is not None:
        raise InputError(Problem(Loc("explain"), "give NODE or --why-not, not both",
                                 "NODE explains an inserted node; --why-not one that was not inserted"))
    asked = {}

    def prepare(ctx):
        probe, about = subject(ctx.model, args.why_not)
        ctx.probe = probe
        asked["probe"], asked["about"] = probe, about

    with Progress(sys.stderr, enabled=not args.json) as progress:
        ctx, _ = run_graph(args, progress, prepare)
    ids = [p.strip() for p in args.passes.split(",") if p.strip()] if args.passes is not None else None
    ans = answer(ctx, asked["probe"], asked["about"], ids)
    print(json.dumps(ans, indent=1, ensure_ascii=False) if args.json else render(ans))
    return 0


def cmd_convert(args) -> int:
    from engine.core.dumpio import is_binary_path, model_to_text, serialize_model
    from engine.cli.outputs import Outputs
    from engine.passes.catalog import load_pack
    from engine.core.yamlgraph import model_to_yaml

    files = Outputs()
    files.claim("OUT", args.output)
    pack = load_pack(pack_dir(args.rules))
    note_graph(args.input)
    model, _ = load_graph(args.input, pack)
    note_graph(args.input, model)
    dropped = []
    if Path(args.output).suffix.lower() in YAML_SUFFIXES:
        text, dropped = model_to_yaml(model)
        data = text.encode()
    else:
        data = serialize_model(model)
        if not is_binary_path(args.output):
            data = model_to_text(data)
    files.write([(args.output, data)])
    for d in dropped:
        sys.stderr.write(f"memconflict: note: not expressible in YAML, dropped: {d}\n")
    return 0


def cmd_symbols(args) -> int:
    import json

    from engine.passes.context import RunContext
    from engine.passes.catalog import load_pack
    from engine.passes.symbols import symbol_builder

    pack = load_pack(pack_dir(args.rules))
    model, options = load_graph(args.graph, pack)
    ctx = RunContext(pack, model, options)
    graph = model.graphs.get(args.graph_name) if args.graph_name else model.root
    if graph is None:
        from engine.core.errors import did_you_mean
        raise InputError(Problem(Loc("--graph"), f"no graph named '{args.graph_name}'", did_you_mean(args.graph_name, model.graphs, "graphs")))
    table = symbol_builder(ctx).build(model, graph)
    data = table.to_json()
    if args.json:
        print(json.dumps({"graph": graph.name, "symbols": data}, indent=2))
    else:
        print(f"{len(data)} symbol(s) in {graph.name} (with nested subgraphs)")
        for name, anchors in data.items():
            print(f"  {name}: {', '.join(anchors)}")
    return 0
