"""`memconflict runtime cond|events|io-reuse` (and, when engine/cli/runtime_mem.py is
there, its `memtrace` and `placement`): GE's runtime-side conflict handling. Each prints
one JSON object and exits 0; a modelled GE failure is data (`ok: false`), unusable input
exit status 2 (ge-runtime.md)."""
from __future__ import annotations

import importlib
import importlib.util
import json
import sys
from pathlib import Path

from engine.cli.common import pack_dir

RULES_HELP = "rule pack folder (default: as for `run`)"
GRAPH_SUFFIXES = {".txt", ".pbtxt", ".pb"}


def add_commands(sub) -> None:
    p = sub.add_parser("runtime", help="GE's runtime side: If/Case lowering, event stages, io reuse, ...")
    rsub = p.add_subparsers(dest="runtime_command", required=True, parser_class=type(p))

    c = rsub.add_parser("cond", help="If/Case on the execute graph: PointFromInputs, guarders, IdentityAddr, placements")
    c.add_argument("input", metavar="CASE.json|GRAPH", help="a CASE file (JSON/YAML) or a GE dump")
    c.add_argument("--node", metavar="NAME", help="with a GE dump: only this If/Case node")
    c.add_argument("--rules", metavar="DIR", help=RULES_HELP)
    c.set_defaults(func=cmd_cond)

    e = rsub.add_parser("events", help="event-sync stages of a multi-stream graph (bg_event)")
    e.add_argument("input", metavar="CASE.json|GRAPH", help="a CASE file (JSON/YAML) or a GE dump")
    e.add_argument("--stream-num", type=int, metavar="N", help="with a GE dump: the model's stream count")
    e.add_argument("--event-num", type=int, metavar="N", help="with a GE dump: the model's event count")
    e.add_argument("--rules", metavar="DIR", help=RULES_HELP)
    e.set_defaults(func=cmd_events)

    io = rsub.add_parser("io-reuse", help="output_reuse_input_mem_indexes and CheckIoReuseAddrs (v1, v2)")
    io.add_argument("input", nargs="?", metavar="CASE.json", help="a CASE file (JSON/YAML)")
    io.add_argument("--attr", metavar="STR", help='the attribute, e.g. "0,0|1,1"')
    io.add_argument("--inputs", metavar="ADDR,...", help="input addresses (0x1000,0x2000)")
    io.add_argument("--outputs", metavar="ADDR,...", help="output addresses")
    io.add_argument("--runtime", choices=("v1", "v2"), default="v2", help="the runtime whose check runs (default v2)")
    io.add_argument("--rules", metavar="DIR", help=RULES_HELP)
    io.set_defaults(func=cmd_io_reuse)

    if importlib.util.find_spec("engine.cli.runtime_mem") is not None:     # memtrace, placement
        importlib.import_module("engine.cli.runtime_mem").register(rsub)


def _spec(args):
    from engine.passes.catalog import load_pack
    pack = load_pack(pack_dir(args.rules))
    return pack, pack.configs["runtime"]


def emit(obj: dict) -> int:
    """One JSON object on standard output: indented for a terminal, else compact (Note
    [compact output]: json's indenting encoder is pure Python, 10x slower on a dump's conds)."""
    indent = 2 if sys.stdout.isatty() else None
    sys.stdout.write(json.dumps(obj, indent=indent, ensure_ascii=False) + "\n")
    return 0


def _is_case(path: str, markers: tuple[str, ...]) -> bool:
    """A JSON file is a CASE; a YAML file is one when it has a marker key (else a YAML graph)."""
    suffix = Path(path).suffix.lower()
    if suffix == ".json":
        return True
    if suffix in GRAPH_SUFFIXES:
        return False
    from engine.runtime.casefile import read_case_file
    return any(k in read_case_file(path) for k in markers)


def cmd_cond(args) -> int:
    from engine.runtime.cond import run_case
    pack, rt = _spec(args)
    if _is_case(args.input, ("op",)):
        from engine.runtime.casefile import read_cond_case
        out, _ = run_case(read_cond_case(args.input, rt), rt)
        return emit(out)
    from engine.runtime.dumpcond import dump_conds
    return emit(dump_conds(args.input, pack, args.node))


def cmd_events(args) -> int:
    from engine.runtime.events import dump_events, read_events_case, run_events
    pack, rt = _spec(args)
    if _is_case(args.input, ("event_num", "stream_num", "graph_unknown")):
        return emit(run_events(read_events_case(args.input), rt))
    return emit(dump_events(args.input, pack, args.stream_num, args.event_num))


def cmd_io_reuse(args) -> int:
    from engine.runtime.ioreuse import io_reuse_args, io_reuse_case
    _, rt = _spec(args)
    if args.input is not None:
        return emit(io_reuse_case(args.input, rt))
    return emit(io_reuse_args(args.attr, args.inputs, args.outputs, args.runtime, rt))
