"""The `memconflict` command line.

Exit status: 0 ran (warnings included); 1 a pass failed where GE returns a
failure; 2 unusable input or arguments. Outputs are written only after every
step succeeded, each atomically, so no partial file is left behind.
"""
from __future__ import annotations

import argparse
import gc
import sys
from pathlib import Path

from .errors import InputError, Loc, PassFailure, Problem, display_path

YAML_SUFFIXES = {".yaml", ".yml"}


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


def load_graph(path: str, pack=None):
    """A GE dump (.txt/.pbtxt/.pb) or a YAML graph; returns (model, options from the file)."""
    if Path(path).suffix.lower() in YAML_SUFFIXES:
        from .yamlgraph import load_yaml_graph
        return load_yaml_graph(path, pack)
    from .dumpio import load_model
    return load_model(path), {}


def run_graph(args, progress):
    """Load the pack and the graph, run the passes; returns (ctx, graph stats before)."""
    from .context import RunContext
    from .pack import load_pack
    from .report import graph_stats
    from .runner import check_graph, resolve_passes, run_passes

    pack = load_pack(args.rules)
    options = parse_options(args.option)
    ids = None
    if args.passes is not None:
        ids = [p.strip() for p in args.passes.split(",") if p.strip()]
        if not ids:
            raise InputError(Problem(Loc("--passes"), "no pass ids given", "e.g. --passes mem_rw_conflict"))
    progress.stage(f"loading {display_path(args.graph)}")
    model, file_options = load_graph(args.graph, pack)
    # Note [gc]: the model is long-lived; freezing it keeps the cyclic GC from
    # rescanning 10^5-10^6 objects on every collection (superlinear otherwise).
    gc.freeze()
    file_options.update(options)
    passes = resolve_passes(pack, ids, file_options)
    ctx = RunContext(pack, model, file_options)
    check_graph(ctx)
    before = graph_stats(model)
    for k, spec in enumerate(passes, 1):   # one at a time, for the progress line
        progress.stage(f"pass {k}/{len(passes)} {spec.id}", lambda: len(ctx.insertions))
        run_passes(ctx, [spec])
    return ctx, before


def cmd_run(args) -> int:
    from .dumpio import model_to_text, serialize_model, write_atomic, is_binary_path
    from .report import build_report, report_json
    from .report_text import Progress, summary_text

    with Progress(sys.stderr, enabled=not args.quiet) as progress:
        try:
            ctx, before = run_graph(args, progress)
        except PassFailure as exc:
            sys.stderr.write(f"memconflict: {exc}\n")
            return 1
        progress.stage("writing outputs")
        outputs: list[tuple[str, bytes]] = []
        if args.out:
            data = serialize_model(ctx.model)
            outputs.append((args.out, data if is_binary_path(args.out) else model_to_text(data)))
        report = build_report(ctx, display_path(args.graph), before)
        if args.report_json:
            outputs.append((args.report_json, report_json(report)))
        if args.report_html:
            from .html import render_html
            outputs.append((args.report_html, render_html(report, ctx).encode()))
        for path, data in outputs:
            write_atomic(path, data)
    if not args.quiet:
        print(summary_text(ctx, display_path(args.graph)))
    return 0


def cmd_explain(args) -> int:
    from .explain import render_card
    from .report import explain_insertion, not_inserted
    from .report_text import Progress

    with Progress(sys.stderr, enabled=True) as progress:
        ctx, _ = run_graph(args, progress)
    found = [i for i in ctx.insertions if i.name == args.node]
    if not found:
        raise InputError(Problem(Loc(display_path(args.graph)), *not_inserted(ctx, args.node)))
    for k, ins in enumerate(found):
        card, rules = explain_insertion(ctx, ins)
        print(("\n" if k else "") + render_card(card, rules))
    return 0


def cmd_convert(args) -> int:
    from .dumpio import save_model
    from .dumpio import write_atomic
    from .pack import load_pack
    from .yamlgraph import model_to_yaml

    pack = load_pack(args.rules)
    model, _ = load_graph(args.input, pack)
    if Path(args.output).suffix.lower() in YAML_SUFFIXES:
        text, dropped = model_to_yaml(model)
        write_atomic(args.output, text.encode())
        for d in dropped:
            sys.stderr.write(f"memconflict: note: not expressible in YAML, dropped: {d}\n")
    else:
        save_model(model, args.output)
    return 0


def cmd_rules_check(args) -> int:
    from .pack import load_pack
    pack = load_pack(args.pack)
    print(f"{display_path(pack.path)}: pack {pack.name} {pack.version} is valid "
          f"({len(pack.classes)} op classes, {len(pack.ops)} ops, {len(pack.passes)} passes, "
          f"{len(pack.rule_ids)} rules)")
    return 0


def cmd_rules_show(args) -> int:
    from .pack import load_pack
    from .show import show_pack
    print(show_pack(load_pack(args.pack)))
    return 0


def cmd_pipeline(args) -> int:
    from .pack import load_pack
    from .show import show_pipeline
    print(show_pipeline(load_pack(args.pack), parse_options(args.option)))
    return 0


def cmd_symbols(args) -> int:
    import json

    from .context import RunContext
    from .pack import load_pack
    from .symbols import symbol_builder

    pack = load_pack(args.rules)
    model, options = load_graph(args.graph, pack)
    ctx = RunContext(pack, model, options)
    graph = model.graphs.get(args.graph_name) if args.graph_name else model.root
    if graph is None:
        from .errors import did_you_mean
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


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="memconflict", description="Find and fix memory conflicts in GE graphs, by rule packs.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    r = sub.add_parser("run", help="run passes on a graph and report every inserted node")
    r.add_argument("graph", help="GE dump (.txt/.pbtxt text, .pb binary) or YAML graph")
    r.add_argument("--passes", help="comma-separated pass ids, run in this order (default: the pack's pipeline)")
    r.add_argument("--option", action="append", metavar="KEY=VALUE", help="GE option (repeatable)")
    r.add_argument("--rules", metavar="DIR", help="rule pack folder (default: the shipped GE pack)")
    r.add_argument("--out", metavar="OUT.pbtxt", help="write the graph after the passes")
    r.add_argument("--report-json", metavar="R.json")
    r.add_argument("--report-html", metavar="R.html")
    r.add_argument("--quiet", action="store_true", help="print nothing on success")
    r.set_defaults(func=cmd_run)

    e = sub.add_parser("explain", help="run the passes and explain why one node was inserted")
    e.add_argument("graph", help="GE dump (.txt/.pbtxt text, .pb binary) or YAML graph")
    e.add_argument("node", help="name of an inserted node")
    e.add_argument("--passes", help="comma-separated pass ids, run in this order (default: the pack's pipeline)")
    e.add_argument("--option", action="append", metavar="KEY=VALUE", help="GE option (repeatable)")
    e.add_argument("--rules", metavar="DIR", help="rule pack folder (default: the shipped GE pack)")
    e.set_defaults(func=cmd_explain)

    c = sub.add_parser("convert", help="convert between GE dumps (text/binary) and the YAML graph form")
    c.add_argument("input")
    c.add_argument("output")
    c.add_argument("--rules", metavar="DIR")
    c.set_defaults(func=cmd_convert)

    rules = sub.add_parser("rules", help="validate or print a rule pack")
    rsub = rules.add_subparsers(dest="rules_command", required=True, parser_class=_Parser)
    rc = rsub.add_parser("check", help="load a pack strictly and report every error")
    rc.add_argument("pack", nargs="?")
    rc.set_defaults(func=cmd_rules_check)
    rs = rsub.add_parser("show", help="print a pack's tables")
    rs.add_argument("pack", nargs="?")
    rs.set_defaults(func=cmd_rules_show)

    sy = sub.add_parser("symbols", help="print the memory symbols (GE GetRefMapping) of a graph")
    sy.add_argument("graph")
    sy.add_argument("--graph", dest="graph_name", metavar="NAME", help="a subgraph to start from (default: root)")
    sy.add_argument("--json", action="store_true")
    sy.add_argument("--rules", metavar="DIR")
    sy.set_defaults(func=cmd_symbols)

    pl = sub.add_parser("pipeline", help="print the resolved pass order with stages and gates")
    pl.add_argument("pack", nargs="?")
    pl.add_argument("--option", action="append", metavar="KEY=VALUE")
    pl.set_defaults(func=cmd_pipeline)

    try:
        from .varmgr.cli import add_commands
    except ImportError:
        pass
    else:
        add_commands(sub)

    from .diff.cli import add_command as add_diff_command
    add_diff_command(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except InputError as exc:
        sys.stderr.write(exc.render() + "\n")
        return 2
    except PassFailure as exc:
        sys.stderr.write(f"memconflict: {exc}\n")
        return 1
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
