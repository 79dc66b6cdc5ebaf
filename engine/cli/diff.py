"""`memconflict diff OLD NEW [--graphs PATH...] [--passes IDS] [--option K=V]...
[--json F] [--html F] [--fail-on KIND]... [--jobs N] [--quiet]`.

Exit status: 0 done; 3 a `--fail-on` condition holds (for CI gates on rule
changes), the status `run --fail-on` gives too; 2 unusable input (not a pack, unknown revision, unreadable graph).
"""
from __future__ import annotations

import sys

from engine.core.errors import InputError, Loc, Problem
from engine.diff.render import GATES

VAR_ALGORITHM = "variable_pass"     # its run-wide session is what a variable plan is read from


def add_commands(sub) -> None:
    d = sub.add_parser("diff", help="semantic diff of two rule packs, and what it changes on graphs")
    d.add_argument("old", help="pack folder, or REV:path in this git repository (e.g. HEAD~1:rules/ge)")
    d.add_argument("new", help="pack folder, or REV:path")
    d.add_argument("--graphs", nargs="+", action="extend", metavar="PATH",
                   help="GE dumps (.txt/.pbtxt/.pb), YAML graphs, or folders of them: run both packs on each")
    d.add_argument("--passes", help="comma-separated pass ids to run (default: each pack's pipeline)")
    d.add_argument("--option", action="append", metavar="KEY=VALUE", help="GE option (repeatable)")
    d.add_argument("--json", metavar="F", help="write the diff as JSON (schema in README.md)")
    d.add_argument("--html", metavar="F", help="write a self-contained HTML page")
    d.add_argument("--fail-on", action="append", choices=GATES, metavar="KIND",
                   help=f"exit 1 when there are differences of this kind ({', '.join(GATES)}; repeatable)")
    d.add_argument("--jobs", type=int, metavar="N", help="worker processes for --graphs (default: CPU count)")
    d.add_argument("--scheduler", metavar="ADDR", help="run --graphs on a dask cluster: tcp://HOST:PORT, or 'local' "
                   "for a LocalCluster of --jobs workers (needs the dask extra; packs and graphs must be readable by the workers)")
    d.add_argument("--quiet", action="store_true", help="print nothing (outputs and exit status only)")
    d.set_defaults(func=cmd_diff)


def cmd_diff(args) -> int:
    from engine.cli.common import parse_options
    from engine.cli.outputs import Outputs
    from engine.diff.source import load_source, open_source

    options = parse_options(args.option)
    passes = None
    if args.passes is not None:
        passes = [p.strip() for p in args.passes.split(",") if p.strip()]
        if not passes:
            raise InputError(Problem(Loc("--passes"), "no pass ids given", "e.g. --passes mem_rw_conflict"))
    from engine.core.parallel import check_jobs
    jobs = check_jobs(args.jobs, args.scheduler)
    files = Outputs()
    files.claim("--json", args.json)
    files.claim("--html", args.html)
    sources = []
    try:
        for spec in (args.old, args.new):
            sources.append(open_source(spec))
        for src in sources:
            load_source(src)
        doc = compute(sources[0], sources[1], args.graphs, options, passes, jobs, args.quiet, args.scheduler)
        outputs = []
        if args.json:
            from engine.diff.render import document_json
            outputs.append((args.json, document_json(doc)))
        if args.html:
            from engine.diff.page import render_page
            outputs.append((args.html, render_page(doc).encode()))
        files.write(outputs)
    finally:
        for src in sources:
            src.close()
    if not args.quiet:
        from engine.diff.render import text_summary
        print(text_summary(doc), file=files.text_stream())
    return 3 if any(doc["gates"].get(k) for k in args.fail_on or ()) else 0


def compute(old, new, graph_args, options: dict, passes, jobs: int, quiet: bool = True,
            scheduler: str | None = None) -> dict:
    """The diff document for two loaded pack sources (and a corpus, if given)."""
    from engine.passes.registry import ALGORITHMS
    from engine.core.io import collect_graphs
    from engine.diff.impact import preload, run_corpus
    from engine.diff.links import Linker, PackIndex
    from engine.diff.packdiff import PackSide, diff_packs
    from engine.diff.render import build_document

    from engine.pack.options import resolve_options
    if old.pack.options and new.pack.options:      # a key either pack declares, typed as the new one says
        resolve_options({**old.pack.options, **new.pack.options}, options)
    sides = PackSide(old), PackSide(new)
    diff = diff_packs(old, new, sides)
    impact = linker = None
    unknown = [p for p in passes or () if p not in old.pack.passes and p not in new.pack.passes]
    if unknown:
        from engine.core.errors import did_you_mean
        raise InputError([Problem(Loc("--passes"), f"unknown pass id '{p}' (in neither pack)",
                                  did_you_mean(p, set(old.pack.passes) | set(new.pack.passes), "pass ids"))
                          for p in unknown])
    if graph_args:
        graphs = collect_graphs(graph_args)
        preload(str(old.folder), old.pack)
        preload(str(new.folder), new.pack)
        if not quiet:
            sys.stderr.write(f"memconflict diff: running both packs on {len(graphs)} graph(s) "
                             f"with {min(jobs, max(1, len(graphs)))} job(s)\n")
        impact = run_corpus(graphs, str(old.folder), str(new.folder), options, passes, jobs, scheduler)
        bad = [r for r in impact if "error" in r]
        if bad:
            raise InputError([Problem(Loc(f, line, col), msg, hint) for r in bad for f, line, col, msg, hint in r["error"]])
        sections = {}
        for src in (old, new):
            for pid, spec in src.pack.passes.items():
                algo = src.pack.algorithms.get(spec.algorithm)
                if algo is not None:
                    sections[pid] = algo.section
        var = {ALGORITHMS[VAR_ALGORITHM].section} if VAR_ALGORITHM in ALGORITHMS else set()
        linker = Linker(diff.changes, PackIndex(sides[0]), PackIndex(sides[1]), sections, var)
    return build_document(diff, old, new, impact, linker, options, passes)
