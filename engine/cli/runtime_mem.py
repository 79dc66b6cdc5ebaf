"""`memconflict runtime memtrace|placement`: GE's multi-stream allocator and placement copies.

    memconflict runtime memtrace TRACE.json|yaml [--state all|final] [--html FILE] [--rules DIR]
    memconflict runtime placement CASE.json | --from P --to P [--data-dependent] [--dtype string]

One JSON object on standard output, exit 0; a GE failure is data (`ok: false`, `status`);
exit 2 for unusable input or output paths (checked before any work, written together at the
end, engine/cli/outputs.py)."""
from __future__ import annotations

import gc
import json

from engine.cli.outputs import STDOUT, Outputs
from engine.core.errors import InputError, Loc, Problem


def register(subparsers) -> None:
    """Add `memtrace` and `placement` to a `runtime` command group's subparsers."""
    m = subparsers.add_parser("memtrace", help="run an op trace through GE's multi-stream allocator")
    m.add_argument("trace", metavar="TRACE.json|yaml")
    m.add_argument("--state", choices=("all", "final"), default="all",
                   help="the state after every step (all, the default) or once at the end (final)")
    m.add_argument("--html", metavar="FILE", help="draw the run: blocks over time per stream, recycles marked")
    m.add_argument("--rules", metavar="DIR", help="pack folder holding runtime-memory.yaml")
    m.set_defaults(func=cmd_memtrace)
    p = subparsers.add_parser("placement", help="the copies GE's lowering inserts between placements")
    p.add_argument("case", nargs="?", metavar="CASE.json")
    p.add_argument("--from", dest="src", metavar="PLACEMENT")
    p.add_argument("--to", dest="dst", metavar="PLACEMENT")
    p.add_argument("--data-dependent", action="store_true")
    p.add_argument("--dtype", default=None, help="the output's dtype (float by default; string)")
    p.add_argument("--rules", metavar="DIR", help="pack folder holding runtime-memory.yaml")
    p.set_defaults(func=cmd_placement)


def _rules(folder: str | None):
    """The runtime-memory rules of the pack the command uses (pack discovery as every command
    does); an overlay without its own file reads its base's."""
    from engine.cli.common import pack_dir
    from engine.passes.catalog import load_pack
    found = pack_dir(folder)
    rules = load_pack(found).configs.get("runtime_memory")
    if rules is None:
        raise InputError(Problem(Loc(str(found)), "the pack has no runtime_memory section",
                                 "include rules/ge/runtime-memory.yaml's section in it, or give it base: ../ge"))
    return rules


def _dump(obj) -> bytes:
    return (json.dumps(obj, separators=(",", ":"), ensure_ascii=False, check_circular=False) + "\n").encode()


def cmd_memtrace(args) -> int:
    from engine.runtime.memtrace import simulate
    from engine.core.gcpause import no_gc
    from engine.runtime.tracefile import load_trace
    files = Outputs()
    files.claim("--html", args.html)
    files.claim("-", STDOUT)
    rules = _rules(args.rules)
    # Note [gc] (engine/core/gcpause.py): off for the whole command, not per phase — each
    # time it came back on, its next pass walked every object the phase before had made; and
    # what the run made is frozen at the end, as `run` freezes its model, so the collection at
    # interpreter exit does not walk it either.
    with no_gc():
        trace = load_trace(args.trace, rules)
        timeline: list | None = [] if args.html else None
        result = simulate(trace, rules, args.state, timeline)
        outputs = [(STDOUT, _dump(result))]
        if args.html:
            from engine.runtime.picture import render_html
            outputs.append((args.html, render_html(trace, result, timeline).encode()))
        files.write(outputs)
        gc.freeze()
    return 0


def cmd_placement(args) -> int:
    from engine.runtime.placement import case_from_flags, load_case, run_case
    rules = _rules(args.rules)
    if args.case is not None:
        if args.src or args.dst or args.data_dependent or args.dtype:
            raise InputError(Problem(Loc("--from"), "give CASE.json or --from/--to, not both",
                                     "drop the flags or the case file"))
        case = load_case(args.case, rules)
    else:
        case = case_from_flags(args.src, args.dst, args.data_dependent, args.dtype, rules)
    files = Outputs()
    files.claim("-", STDOUT)
    files.write([(STDOUT, _dump(run_case(case, rules)))])
    return 0

