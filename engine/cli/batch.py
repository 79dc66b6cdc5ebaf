"""`memconflict run G1 G2 … [--out-dir D [--html]] [--jobs N | --scheduler ADDR]`:
the run of one graph, over many (files, or folders searched for GE dumps and YAML
graphs), in worker processes or on a Dask cluster (engine/core/parallel.py).

For each graph G the folder D gets `G-STEM.pbtxt` (or `.pb` for a binary input: the
graph after the passes), `G-STEM.report.json`, and with `--html` `G-STEM.report.html`;
then `index.json` lists every graph with its status and counts, in input order. The
three files of one graph are written together when it is done (engine/cli/outputs.py);
a graph that cannot be read or whose pass fails gets none. Every output path is checked
before any work, and two graphs with the same file name are refused (exit 2).

Exit status: the most serious of the graphs' — 4 internal error, 2 unusable input,
1 a pass failed, 3 gated findings, 0 — and 2 before any work for bad arguments.
"""
from __future__ import annotations

import gc
import json
import os
import sys
import time
from pathlib import Path
from types import SimpleNamespace

from engine.core.errors import InputError, Loc, PassFailure, Problem, display_path

SEVERITY = (4, 2, 1, 3, 0)       # most serious first
_PACKS: dict[str, object] = {}   # one load per worker process


def output_names(graph: str) -> tuple[str, str, str]:
    p = Path(graph)
    suffix = ".pb" if p.suffix.lower() == ".pb" else ".pbtxt"
    return p.stem + suffix, p.stem + ".report.json", p.stem + ".report.html"


def run_one(task: dict) -> dict:
    """One graph's run: its status, counts and output bytes (runs in a worker)."""
    from engine.cli.common import gated_findings, run_graph, runtime_section
    from engine.core.dumpio import model_to_text, serialize_model
    from engine.passes.catalog import load_pack
    from engine.report.model import build_report, report_json
    from engine.report.text import Progress

    graph = task["graph"]
    shown = display_path(graph)
    out = {"graph": shown, "status": 0, "message": "", "inserted": 0, "removed": 0, "diagnostics": 0,
           "gated": [], "outputs": [], "seconds": 0.0}
    start = time.perf_counter()
    try:
        folder = task["rules"]
        if folder not in _PACKS:
            _PACKS[folder] = load_pack(folder)
        args = SimpleNamespace(graph=graph, rules=folder, option=task["option"], passes=task["passes"],
                               from_format=task["from_format"], runtime=task["runtime"])
        with Progress(sys.stderr, enabled=False) as progress:
            ctx, before = run_graph(args, progress, pack=_PACKS[folder])
        from engine.cli.weights import refuse_in_batch
        refuse_in_batch(ctx)                        # ge.externalWeight writes files beside one --out
        out.update(inserted=len(ctx.insertions), removed=len(ctx.removals), diagnostics=len(ctx.diagnostics))
        if task["out_dir"] is not None:
            names = output_names(graph)
            data = serialize_model(ctx.model)
            files = [(names[0], data if names[0].endswith(".pb") else model_to_text(data))]
            report = build_report(ctx, shown, before)
            runtime_section(args, ctx, report)      # --runtime: the If/Case section, as a single run adds it
            files.append((names[1], report_json(report)))
            if task["html"]:
                from engine.report.html import render_html
                files.append((names[2], render_html(report, ctx, task["times"]).encode()))
            out["outputs"] = files
        out["gated"] = gated_findings(ctx, task["fail_on"])
        if out["gated"]:
            out["status"] = 3
    except InputError as exc:
        out.update(status=2, message=exc.render())
    except PassFailure as exc:
        out.update(status=1, message=f"memconflict: {exc}")
    except MemoryError:
        out.update(status=4, message=f"memconflict: out of memory on graph {shown}")
    except Exception as exc:     # one broken graph does not lose the others' results
        from engine.cli import save_traceback
        out.update(status=4, message=f"memconflict: internal error on {shown}: {type(exc).__name__}: {exc} "
                                     f"(traceback saved to {save_traceback(exc)}; please report it)")
    finally:
        ctx = None
        gc.unfreeze()        # run_graph froze the model (Note [gc]); let the next graph reuse its memory
    out["seconds"] = round(time.perf_counter() - start, 3)
    return out


def cmd_run_many(args) -> int:
    from engine.cli.common import pack_dir, parse_options
    from engine.cli.outputs import Outputs, OutputError
    from engine.cli.common import fail_on_gates
    from engine.core.io import collect_graphs
    from engine.core.parallel import check_jobs, map_ordered

    if getattr(args, "format", "text") != "text":
        raise InputError(Problem(Loc("--format"), f"--format {args.format} prints one graph's findings, and this run has several",
                                 "give --out-dir DIR: each graph's JSON report is written there"))
    for flag, value in (("--out", args.out), ("--report-json", args.report_json), ("--report-html", args.report_html),
                        ("--sarif", getattr(args, "sarif", None))):
        if value is not None:
            raise InputError(Problem(Loc(flag), f"{flag} names one file, and this run has several graphs",
                                     "give --out-dir DIR: each graph's outputs are written there"))
    if args.html and args.out_dir is None:
        raise InputError(Problem(Loc("--html"), "--html writes into --out-dir", "add --out-dir DIR"))
    graphs = collect_graphs(args.graphs, "GRAPH")
    if not graphs:
        raise InputError(Problem(Loc("GRAPH"), "no graph files found", "give GE dumps or YAML graphs, or folders of them"))
    jobs = check_jobs(args.jobs if args.jobs is not None else 1, args.scheduler)
    gates = fail_on_gates(args.fail_on)
    parse_options(args.option)                      # malformed KEY=VALUE: exit 2 now, not per graph
    folder = str(pack_dir(args.rules))
    files = Outputs()
    if args.out_dir is not None:
        _make_out_dir(args.out_dir)
        seen: dict[str, str] = {}
        for g in graphs:
            for name in output_names(g)[:3 if args.html else 2]:
                if name in seen:
                    raise InputError(Problem(Loc(display_path(g)), f"'{name}' would be written for both {seen[name]} "
                                             f"and {display_path(g)}", "run the graphs with the same file name separately"))
                seen[name] = display_path(g)
                files.claim("--out-dir", os.path.join(args.out_dir, name))
        files.claim("--out-dir", os.path.join(args.out_dir, "index.json"))
    tasks = [{"graph": g, "rules": folder, "option": args.option, "passes": args.passes, "fail_on": gates,
              "from_format": getattr(args, "from_format", None), "runtime": bool(getattr(args, "runtime", False)),
              "times": bool(getattr(args, "times", False)),
              "out_dir": args.out_dir, "html": bool(args.html)} for g in graphs]
    results = []
    worst = 0
    for k, res in enumerate(map_ordered(run_one, tasks, jobs, args.scheduler), 1):
        if res["outputs"]:
            try:
                files.write([(os.path.join(args.out_dir, n), data) for n, data in res["outputs"]])
            except OutputError as exc:
                res.update(status=2, message=exc.render())
        res["outputs"] = [n for n, _ in res.pop("outputs")] if res["status"] in (0, 3) else []
        results.append(res)
        worst = min((worst, res["status"]), key=SEVERITY.index)
        if res["message"]:
            sys.stderr.write(res["message"].rstrip("\n") + "\n")
        if not args.quiet:
            sys.stderr.write(f"memconflict: [{k}/{len(tasks)}] {res['graph']}: {_status_word(res)}, "
                             f"{res['inserted']} inserted, {res['removed']} removed, "
                             f"{res['diagnostics']} diagnostic(s) ({res['seconds']:.2f} s)\n")
    if args.out_dir is not None:
        doc = {"memconflict": _version(), "pack": display_path(folder),
               "graphs": [{k: v for k, v in r.items() if k != "seconds"} for r in results]}
        files.write([(os.path.join(args.out_dir, "index.json"),
                      (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode())])
    if not args.quiet:
        counts = {s: sum(1 for r in results if r["status"] == s) for s in SEVERITY}
        print(f"memconflict: {len(results)} graph(s): " + ", ".join(
            f"{n} {_STATUS[s]}" for s, n in counts.items() if n), file=files.text_stream())
    return worst


_STATUS = {0: "ok", 1: "pass failed", 2: "unusable", 3: "gated", 4: "internal error"}


def _status_word(res: dict) -> str:
    word = _STATUS[res["status"]]
    return f"{word} ({'; '.join(res['gated'])})" if res["gated"] else word


def _version() -> str:
    from engine import __version__
    return __version__


def _make_out_dir(path: str) -> None:
    from engine.cli.outputs import OutputError
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise OutputError(f"--out-dir '{path}' is not a folder", "name a folder (it is created if missing)")
    if not p.exists():
        if not p.parent.is_dir():
            raise OutputError(f"--out-dir '{path}': folder '{p.parent}' does not exist",
                              f"create it first (mkdir -p {p.parent})")
        try:
            p.mkdir()
        except OSError as exc:
            raise OutputError(f"--out-dir '{path}' cannot be made: {exc.strerror}", "choose a folder you can write to") from None
