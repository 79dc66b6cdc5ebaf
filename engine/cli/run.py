"""`memconflict run`, `explain`, `convert` and `symbols`: commands over one graph."""
from __future__ import annotations

import sys
from pathlib import Path

from engine.core.errors import InputError, Loc, PassFailure, Problem, display_path
from engine.core.io import YAML_SUFFIXES, load_graph
from engine.core.importers.detect import FORMATS
from engine.cli import findings
from engine.cli.common import fail_on_gates, gated_findings, note_graph, pack_dir, run_graph, runtime_section

RULES_HELP = ("rule pack folder (default: $MEMCONFLICT_RULES, else [tool.memconflict] rules in the nearest "
              "pyproject.toml/memconflict.toml, else the installed GE pack)")


GRAPH_HELP = ("a model: GE dump (text, binary, ONNX form) or offline model (.om), TensorFlow GraphDef (.pb/.pbtxt), "
              "ONNX (.onnx), Caffe (.prototxt), torch.export program (.pt2), or YAML graph; the format is read from the content")


def add_from(p) -> None:
    p.add_argument("--from", dest="from_format", choices=FORMATS, metavar="FORMAT",
                   help="the model's format, when not the one detected: " + "|".join(FORMATS))
    p.add_argument("--weights", metavar="NET.caffemodel",
                   help="a Caffe network's weights: each blob becomes a Const input, as GE's parser adds them (ATC's --weight)")


def add_commands(sub) -> None:
    r = sub.add_parser("run", help="run passes on a graph (or many) and report every inserted node")
    r.add_argument("graphs", nargs="+", metavar="GRAPH", help=GRAPH_HELP + "; several, or folders of them, with --out-dir")
    r.add_argument("--passes", help="comma-separated pass ids, run in this order (default: the pack's pipeline)")
    r.add_argument("--option", action="append", metavar="KEY=VALUE", help="GE option (repeatable)")
    r.add_argument("--rules", metavar="DIR", help=RULES_HELP)
    r.add_argument("--out", metavar="OUT.pbtxt", help="write the graph after the passes")
    r.add_argument("--report-json", metavar="R.json")
    r.add_argument("--report-html", metavar="R.html")
    r.add_argument("--quiet", action="store_true", help="print nothing on success")
    r.add_argument("--var-state", metavar="STATE.pb",
                   help="variable sessions (VarManagerPool) to compile in: read if the file exists, "
                        "written back after the run with the graph's variables placed")
    r.add_argument("--session", type=int, default=0, metavar="ID",
                   help="the session of --var-state the graph is compiled in (default 0)")
    r.add_argument("--budget", action="append", metavar="N|PASS=N",
                   help="analysis budget in work units for every budgeted pass, or one (repeatable); when it runs "
                        "out the pass falls back to GE's conservative answer and the report says where")
    r.add_argument("--near-misses", action="store_true",
                   help="record the decisions that came closest to an isolation and add them to the JSON/HTML "
                        "report (`near_misses`)")
    r.add_argument("--fail-on", action="append", metavar="CODE|insertions|warnings",
                   help="exit 3 when the run has such findings: a diagnostic code (W18888), any inserted "
                        "node, or any warning; outputs are still written (repeatable)")
    r.add_argument("--out-dir", metavar="DIR", help="for each graph write DIR/STEM.pbtxt (.pb), DIR/STEM.report.json, "
                   "and DIR/index.json (engine/cli/batch.py)")
    r.add_argument("--html", action="store_true", help="with --out-dir: also DIR/STEM.report.html")
    r.add_argument("--jobs", type=int, metavar="N", help="graphs run in N worker processes (default 1)")
    r.add_argument("--scheduler", metavar="ADDR", help="run the graphs on a dask cluster: tcp://HOST:PORT, or 'local' "
                   "for a LocalCluster of --jobs workers (needs the dask extra)")
    add_from(r)
    r.add_argument("--times", action="store_true",
                   help="show each pass's time in the HTML report (the page then differs from run to run)")
    r.add_argument("--runtime", action="store_true",
                   help="also list, for every If/Case, the runtime nodes GE's RT2 builder would add "
                        "(PointFromInputs, IdentityAddr, parent guarders) and why")
    findings.add_arguments(r)
    r.set_defaults(func=cmd_run)

    e = sub.add_parser("explain", help="explain why one node was inserted (running the passes, or from a saved report), "
                       "or why none was", usage="memconflict explain GRAPH NODE [options] | memconflict explain --report R.json NODE | "
                       "memconflict explain GRAPH --why-not ANCHOR [ANCHOR] [--json]")
    e.add_argument("graph", nargs="?", help=GRAPH_HELP)
    e.add_argument("node", nargs="?", help="name of an inserted node")
    e.add_argument("--report", metavar="R.json",
                   help="answer from this saved `run --report-json` report instead of running the passes")
    e.add_argument("--why-not", nargs="+", metavar="ANCHOR",
                   help="explain why no node was inserted: an edge SRC:O->DST:I (or SRC:O DST:I), two anchors "
                        "of one symbol (NODE:out:I NODE:in:J, or GE keys NODE_out_I NODE_in_J), or a node")
    e.add_argument("--json", action="store_true", help="with --why-not: print the answer as JSON")
    e.add_argument("--passes", help="comma-separated pass ids, run in this order (default: the pack's pipeline)")
    e.add_argument("--option", action="append", metavar="KEY=VALUE", help="GE option (repeatable)")
    e.add_argument("--rules", metavar="DIR", help=RULES_HELP)
    add_from(e)
    e.set_defaults(func=cmd_explain)

    c = sub.add_parser("convert", help="convert a model (GE dump or .om, TensorFlow GraphDef, ONNX, Caffe, torch.export .pt2) "
                       "to a GE dump (text/binary) or the YAML graph form")
    c.add_argument("input")
    c.add_argument("output")
    c.add_argument("--rules", metavar="DIR", help=RULES_HELP)
    add_from(c)
    c.set_defaults(func=cmd_convert)

    sy = sub.add_parser("symbols", help="print the memory symbols (GE GetRefMapping) of a graph")
    sy.add_argument("graph")
    sy.add_argument("--graph", dest="graph_name", metavar="NAME", help="a subgraph to start from (default: root)")
    sy.add_argument("--json", action="store_true")
    sy.add_argument("--rules", metavar="DIR", help=RULES_HELP)
    add_from(sy)
    sy.set_defaults(func=cmd_symbols)


def cmd_run(args) -> int:
    if len(args.graphs) > 1 or args.out_dir is not None or args.jobs is not None or args.scheduler is not None \
            or Path(args.graphs[0]).is_dir():
        if args.weights is not None:
            raise InputError(Problem(Loc("--weights"), "--weights belongs to one Caffe network, not to a batch of graphs",
                                     "run the network alone: memconflict run NET.prototxt --weights NET.caffemodel"))
        from engine.cli.batch import cmd_run_many
        return cmd_run_many(args)
    if args.html:
        raise InputError(Problem(Loc("--html"), "--html writes into --out-dir", "add --out-dir DIR, or give --report-html FILE"))
    args.graph = args.graphs[0]
    from engine.core.dumpio import ModelFile, model_to_text, serialize_model, is_binary_path
    from engine.cli.outputs import Outputs
    from engine.report.model import build_report, report_json_pieces
    from engine.report.text import Progress, summary_text

    gates = fail_on_gates(args.fail_on)
    files = Outputs()
    files.claim("--out", args.out)
    files.claim("--report-json", args.report_json)
    files.claim("--report-html", args.report_html)
    if args.var_state == "-":
        raise InputError(Problem(Loc("--var-state"), "the state file cannot be standard output",
                                 "give a file name, e.g. --var-state state.pb"))
    files.claim("--var-state", args.var_state)
    var = _VarState(args) if args.var_state else None
    findings.claim(files, args)
    probe = None
    if args.near_misses:
        from engine.passes.probe import Probe
        probe = Probe(near=True)

    def prepare(ctx):
        from engine.passes.budget import parse_budgets
        # the report's variable links place the graph once more: only when a report is written
        ctx.var_links = findings.report_written(args)
        ctx.probe = probe
        ctx.budgets = parse_budgets(args.budget, ctx.pack)

    with Progress(sys.stderr, enabled=not args.quiet) as progress:
        try:
            ctx, before = run_graph(args, progress, var.setup if var else None, prepare=prepare)
            from engine.cli.weights import WeightExport
            weights = WeightExport(ctx, args.out)
            weights.apply(ctx)                  # GE's Build converts constants before placing variables
            if var:
                progress.stage("placing variables")
                var.finish(ctx)
        except PassFailure as exc:
            sys.stderr.write(f"memconflict: {exc}\n")
            findings.write_failure(files, args, exc)
            return 1
        progress.stage("writing outputs")
        try:
            outputs: list[tuple[str, bytes]] = []
            if var:
                outputs.append((args.var_state, var.encoded()))
            if args.out:
                # each output is written to its temporary as soon as it is made, not held until the
                # renames (Note [lengths in place]: a binary model is written as it is serialized)
                if is_binary_path(args.out):
                    outputs.append((args.out, files.stage(args.out, ModelFile(ctx.model))))
                else:
                    outputs.append((args.out, files.stage(args.out, model_to_text(serialize_model(ctx.model)))))
            # Note [no report unless written]: at 100k nodes the report took 0.7 s to build, and
            # the first collection after it 0.5 s more, in a run that wrote none of its forms
            report = build_report(ctx, display_path(args.graph), before) if findings.report_written(args) else None
            runtime = runtime_section(args, ctx, report)
            if report is not None:
                if ctx.budgets:
                    from engine.report.whynot import budget_report, budget_section
                    report["budgets"] = budget_report(ctx)
                    report["sections"].append(budget_section(report["budgets"]))
                if probe is not None:
                    from engine.report.whynot import near_miss_section, near_misses
                    report["near_misses"] = near_misses(ctx, probe)
                    report["sections"].append(near_miss_section(report["near_misses"]))
                if args.report_json:
                    outputs.append((args.report_json, files.stage(args.report_json, report_json_pieces(report))))
                if args.report_html:
                    from engine.report.html import render_html_pieces
                    outputs.append((args.report_html, files.stage(args.report_html,
                                                                  render_html_pieces(report, ctx, args.times))))
                outputs += findings.outputs(args, ctx, report)
            weights.write(files, outputs)
        finally:
            files.discard()         # a staged output is not left behind by a failure before the write
    if not args.quiet:
        print(summary_text(ctx, display_path(args.graph), args.min_severity), file=files.text_stream())
        if weights.summary():
            print(weights.summary(), file=files.text_stream())
        if runtime is not None:
            from engine.runtime.report import runtime_lines
            print("\n".join(runtime_lines(runtime)), file=files.text_stream())
        for ev in ctx.budget_events:
            print(f"  budget: {ev.pass_id} on {ev.graph}: {ev.budget} of {ev.needed} {ev.unit.split(' (')[0]}: "
                  f"{ev.where}; {ev.instead}", file=files.text_stream())
    held = gated_findings(ctx, gates)
    if held:
        sys.stderr.write(f"memconflict: --fail-on: {'; '.join(held)}\n")
        return 3
    return 0


class _VarState:
    """run --var-state: the run compiles its graph in session --session of the state file."""

    def __init__(self, args):
        self.args = args
        self.store = self.session = None

    def setup(self, ctx) -> None:
        from engine.cli.varstate import begin_graph, open_store
        self.store = open_store(self.args.var_state, ctx.pack)
        self.session = self.store.session(self.args.session, dict(ctx.options))
        ctx.var_session = self.session
        begin_graph(self.session, ctx.model)

    def finish(self, ctx) -> None:
        from engine.cli.varstate import end_graph
        ctx.var_plan = end_graph(self.session, ctx.model, self.args.graph)    # the report links to it

    def encoded(self) -> bytes:
        from engine.cli.varstate import encoded
        return encoded(self.store, self.args.var_state)


def cmd_explain(args) -> int:
    from engine.report.explain import render_card
    from engine.report.model import explain_insertion, not_inserted
    from engine.report.text import Progress

    if args.why_not:
        if args.report is not None:
            raise InputError(Problem(Loc("--why-not"), "--why-not runs the passes; it cannot answer from --report",
                                     "memconflict explain GRAPH --why-not ANCHOR [ANCHOR]"))
        if args.graph is None:
            raise InputError(Problem(Loc("explain"), "give the GRAPH before --why-not", "memconflict explain GRAPH --why-not a:0 b:1"))
        return _why_not(args)
    given = [a for a in (args.graph, args.node) if a is not None]
    if args.report is not None:
        if len(given) != 1 or args.passes is not None or args.option:
            raise InputError(Problem(Loc("--report"), "with --report give only the NODE (the report records the run)",
                                     "memconflict explain --report R.json NODE"))
        from engine.report.saved import explain_saved, read_report
        print(explain_saved(read_report(args.report), given[0], args.report))
        return 0
    if len(given) != 2:
        raise InputError(Problem(Loc("explain"), "give the GRAPH and the NODE (or --report R.json NODE, or --why-not ANCHOR)",
                                 "memconflict explain GRAPH NODE"))
    with Progress(sys.stderr, enabled=True) as progress:
        ctx, _ = run_graph(args, progress)
    for kind, text in getattr(ctx.model, "notes", ()):
        print(f"note ({kind}): {text}")
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
    from engine.core.dumpio import ModelFile, is_binary_path, model_to_text, serialize_model
    from engine.cli.outputs import Outputs
    from engine.passes.catalog import load_pack
    from engine.core.yamlgraph import model_to_yaml

    files = Outputs()
    files.claim("OUT", args.output)
    pack = load_pack(pack_dir(args.rules))
    note_graph(args.input)
    model, _ = load_graph(args.input, pack, args.from_format, args.weights)
    note_graph(args.input, model)
    dropped = []
    if Path(args.output).suffix.lower() in YAML_SUFFIXES:
        text, dropped = model_to_yaml(model)
        data = text.encode()
    elif is_binary_path(args.output):
        data = ModelFile(model)         # written as it is made (Note [lengths in place])
    else:
        data = model_to_text(serialize_model(model))
    files.write([(args.output, data)])
    for d in dropped:
        sys.stderr.write(f"memconflict: note: not expressible in YAML, dropped: {d}\n")
    for kind, text in getattr(model, "notes", ()):
        sys.stderr.write(f"memconflict: note ({kind}): {text}\n")
    return 0


def cmd_symbols(args) -> int:
    import json

    from engine.passes.context import RunContext
    from engine.passes.catalog import load_pack
    from engine.passes.symbols import symbol_builder

    pack = load_pack(pack_dir(args.rules))
    from engine.pack.options import run_options
    model, file_options = load_graph(args.graph, pack, args.from_format, args.weights)
    ctx = RunContext(pack, model, run_options(pack.options, {}, file_options))
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
