"""`memconflict rules check|show|functions` and `memconflict pipeline`: commands over a pack."""
from __future__ import annotations

from engine.core.errors import display_path
from engine.cli.common import _Parser, pack_dir, parse_options


def add_commands(sub) -> None:
    rules = sub.add_parser("rules", help="validate or print a rule pack")
    rsub = rules.add_subparsers(dest="rules_command", required=True, parser_class=_Parser)
    rc = rsub.add_parser("check", help="load a pack strictly and report every error")
    rc.add_argument("pack", nargs="?")
    rc.set_defaults(func=cmd_rules_check)
    rs = rsub.add_parser("show", help="print a pack's tables")
    rs.add_argument("pack", nargs="?")
    rs.set_defaults(func=cmd_rules_show)
    rf = rsub.add_parser("functions", help="list the DSL functions: signature, effects, doc (and the pack's own)")
    rf.add_argument("pack", nargs="?")
    rf.set_defaults(func=cmd_rules_functions)

    pl = sub.add_parser("pipeline", help="print the resolved pass order with stages and gates")
    pl.add_argument("pack", nargs="?")
    pl.add_argument("--option", action="append", metavar="KEY=VALUE")
    pl.set_defaults(func=cmd_pipeline)


def cmd_rules_check(args) -> int:
    from engine.passes.catalog import load_pack
    pack = load_pack(pack_dir(args.pack, "PACK"))
    print(f"{display_path(pack.path)}: pack {pack.name} {pack.version} is valid "
          f"({len(pack.classes)} op classes, {len(pack.ops)} ops, {len(pack.passes)} passes, "
          f"{len(pack.rule_ids)} rules)")
    return 0


def cmd_rules_show(args) -> int:
    from engine.passes.catalog import load_pack
    from engine.report.show import show_pack
    print(show_pack(load_pack(pack_dir(args.pack, "PACK"))))
    return 0


def cmd_pipeline(args) -> int:
    from engine.passes.catalog import load_pack
    from engine.report.show import show_pipeline
    print(show_pipeline(load_pack(pack_dir(args.pack, "PACK")), parse_options(args.option)))
    return 0


def cmd_rules_functions(args) -> int:
    from engine.passes.catalog import load_pack
    print(render_functions(load_pack(pack_dir(args.pack, "PACK"))))
    return 0


def render_functions(pack) -> str:
    """Every registered DSL function by group (name, signature, effects, doc), then the
    functions the pack defines, by the section (and rule set) that defines them."""
    from engine.dsl.library import GROUPS, REGISTRY
    rows: list[tuple[str, list[tuple[str, str, str, str]]]] = []
    for group, names in GROUPS.items():
        rows.append((group, [(n, REGISTRY[n].sig, REGISTRY[n].effects or "-", REGISTRY[n].doc) for n in names]))
    for where, funcs in _pack_functions(pack):
        rows.append((f"pack {pack.name}: {where}", [
            (f.name, f"({', '.join(f.params)}) -> typed per call", _pack_effects(f, funcs), _short(f.doc or str(f.body)))
            for f in funcs.values()]))
    width_n = max(len(r[0]) for _, rs in rows for r in rs)
    width_s = max(len(r[1]) for _, rs in rows for r in rs)
    out = [f"{sum(len(rs) for _, rs in rows)} DSL functions (effects: fails = may stop the pass, "
           "edits = changes the graph, allowed only in a rewrite rule's do: list)"]
    for title, rs in rows:
        out.append(f"\n{title} ({len(rs)})")
        for name, sig, eff, doc in rs:
            out.append(f"  {name:<{width_n}}  {sig:<{width_s}}  {eff:<5}  {doc}")
    return "\n".join(out)


def _short(text: str, width: int = 110) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[:width - 3] + "..."


def _pack_functions(pack):
    """(where, {name: FuncDef}) for each pack section or rewrite rule set that defines functions."""
    for section, cfg in pack.configs.items():
        if getattr(cfg, "functions", None):
            yield section, cfg.functions
        for rs_name, rs in (getattr(cfg, "rule_sets", None) or {}).items():
            if rs.functions:
                yield f"{section}.{rs_name}", rs.functions


def _pack_effects(f, funcs, seen=frozenset()) -> str:
    from engine.dsl.ast import Call, walk
    from engine.dsl.library import REGISTRY
    found = "-"
    for sub in walk(f.body):
        if not isinstance(sub, Call):
            continue
        if sub.fn in funcs and sub.fn not in seen:
            eff = _pack_effects(funcs[sub.fn], funcs, seen | {f.name})
        else:
            eff = REGISTRY[sub.fn].effects if sub.fn in REGISTRY else ""
        if eff == "edits":
            return eff
        if eff == "fails":
            found = eff
    return found
