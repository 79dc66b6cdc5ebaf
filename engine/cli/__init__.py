"""The `memconflict` command line: one module per command group.

Exit status: 0 ran (warnings included); 1 a pass failed where GE returns a
failure; 2 unusable input or arguments. Outputs are written only after every
step succeeded, each atomically, so no partial file is left behind.
"""
from __future__ import annotations

import argparse
import sys

from engine.core.errors import InputError, PassFailure
from engine.cli import diff, rules, run, vars
from engine.cli.common import _Parser


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="memconflict", description="Find and fix memory conflicts in GE graphs, by rule packs.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    run.add_commands(sub)
    rules.add_commands(sub)
    vars.add_commands(sub)
    diff.add_command(sub)
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
