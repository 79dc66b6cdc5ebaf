"""`run`'s findings outputs: `--sarif FILE`, `--format text|json|sarif` for the
terminal stream and `--min-severity`, kept apart from the run command itself."""
from __future__ import annotations

from engine.cli.outputs import STDOUT

FORMATS = ("text", "json", "sarif")
SEVERITIES = ("info", "warning", "error")


def add_arguments(parser) -> None:
    parser.add_argument("--sarif", metavar="FILE",
                        help="write every insertion and diagnostic as SARIF 2.1.0 ('-': standard output)")
    parser.add_argument("--format", choices=FORMATS, default="text",
                        help="what standard output carries: the text summary (default), the JSON report "
                             "or the SARIF log (the summary then goes to stderr)")
    parser.add_argument("--min-severity", choices=SEVERITIES, default="info",
                        help="leave out of the terminal and SARIF output the diagnostics below this "
                             "severity (inserted nodes count as info)")


def report_written(args) -> bool:
    """Whether the run writes anything made from the report (JSON, HTML, SARIF, or a
    JSON or SARIF stream): without, `run` builds none (the text summary reads the run)."""
    return bool(args.report_json or args.report_html or getattr(args, "sarif", None)
                or getattr(args, "format", "text") != "text")


def claim(files, args) -> None:
    """Claim the findings outputs beside the others (checked before any work)."""
    files.claim("--sarif", args.sarif)
    if args.format != "text":
        files.claim(f"--format {args.format}", STDOUT)


def outputs(args, ctx, report: dict, failure=None) -> list[tuple[str, bytes]]:
    """(path, bytes) of the findings outputs: the SARIF file, the stream when it is not text."""
    from engine.report.model import report_json
    from engine.report.sarif import build_sarif, sarif_json

    out = []
    log = None
    if args.sarif or args.format == "sarif":
        log = sarif_json(build_sarif(report, ctx.pack, ctx.model, min_severity=args.min_severity, failure=failure))
    if args.sarif:
        out.append((args.sarif, log))
    if args.format == "sarif":
        out.append((STDOUT, log))
    elif args.format == "json" and failure is None:
        out.append((STDOUT, report_json(report)))
    return out


def write_failure(files, args, failure) -> None:
    """A pass failed (exit 1): only the SARIF log is written — it records the failure
    and what ran before it; the graph and the reports are not (Note [sarif on failure])."""
    ctx = getattr(failure, "context", None)
    if ctx is None or not (args.sarif or args.format == "sarif"):
        return
    from engine.core.errors import display_path
    from engine.report.model import build_report, graph_stats

    report = build_report(ctx, display_path(args.graph), graph_stats(ctx.model))
    files.write(outputs(args, ctx, report, failure))
