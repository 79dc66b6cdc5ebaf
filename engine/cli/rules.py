"""`memconflict rules check|show` and `memconflict pipeline`: commands over a pack."""
from __future__ import annotations

from engine.core.errors import display_path
from engine.cli.common import _Parser, parse_options


def add_commands(sub) -> None:
    rules = sub.add_parser("rules", help="validate or print a rule pack")
    rsub = rules.add_subparsers(dest="rules_command", required=True, parser_class=_Parser)
    rc = rsub.add_parser("check", help="load a pack strictly and report every error")
    rc.add_argument("pack", nargs="?")
    rc.set_defaults(func=cmd_rules_check)
    rs = rsub.add_parser("show", help="print a pack's tables")
    rs.add_argument("pack", nargs="?")
    rs.set_defaults(func=cmd_rules_show)

    pl = sub.add_parser("pipeline", help="print the resolved pass order with stages and gates")
    pl.add_argument("pack", nargs="?")
    pl.add_argument("--option", action="append", metavar="KEY=VALUE")
    pl.set_defaults(func=cmd_pipeline)


def cmd_rules_check(args) -> int:
    from engine.passes.catalog import load_pack
    pack = load_pack(args.pack)
    print(f"{display_path(pack.path)}: pack {pack.name} {pack.version} is valid "
          f"({len(pack.classes)} op classes, {len(pack.ops)} ops, {len(pack.passes)} passes, "
          f"{len(pack.rule_ids)} rules)")
    return 0


def cmd_rules_show(args) -> int:
    from engine.passes.catalog import load_pack
    from engine.report.show import show_pack
    print(show_pack(load_pack(args.pack)))
    return 0


def cmd_pipeline(args) -> int:
    from engine.passes.catalog import load_pack
    from engine.report.show import show_pipeline
    print(show_pipeline(load_pack(args.pack), parse_options(args.option)))
    return 0
