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
    ri = rsub.add_parser("init", help="write a new overlay pack on the pack discovery picks, ready to edit")
    ri.add_argument("dir", metavar="DIR", help="new pack folder (must not exist, or be empty)")
    ri.add_argument("--rules", metavar="DIR", help="the base pack (default: the one discovery picks)")
    ri.set_defaults(func=cmd_rules_init)
    rf = rsub.add_parser("functions", help="list the DSL functions: signature, effects, doc (and the pack's own)")
    rf.add_argument("pack", nargs="?")
    rf.set_defaults(func=cmd_rules_functions)

    ra = rsub.add_parser("audit", help="check the pack's op registry against GE's op IR (REG_OP definitions)")
    ra.add_argument("pack", nargs="?")
    ra.add_argument("--op-ir", required=True, metavar="SOURCE",
                    help="torch-npu's auto_generated_ge_raw_ops.py (read as text) or a folder of REG_OP headers")
    ra.add_argument("--json", metavar="F", help="write the findings as JSON ('-': standard output)")
    ra.add_argument("--sarif", metavar="F", help="write the findings as SARIF 2.1.0, accepted exceptions as suppressions "
                    "('-': standard output)")
    ra.add_argument("--fail-on", choices=["findings"], help="exit 3 when a finding is not an accepted exception")
    ra.set_defaults(func=cmd_rules_audit)

    pl = sub.add_parser("pipeline", help="print the resolved pass order with stages and gates")
    pl.add_argument("pack", nargs="?")
    pl.add_argument("--option", action="append", metavar="KEY=VALUE")
    pl.set_defaults(func=cmd_pipeline)


def cmd_rules_check(args) -> int:
    from engine.passes.catalog import load_pack
    from engine.core.importers import check_tables
    pack = load_pack(pack_dir(args.pack, "PACK"))
    tables = check_tables(pack.path)
    print(f"{display_path(pack.path)}: pack {pack.name} {pack.version} is valid "
          f"({len(pack.classes)} op classes, {len(pack.ops)} ops, {len(pack.passes)} passes, "
          f"{len(pack.rule_ids)} rules)" + (f"; import tables {', '.join(tables)}" if tables else ""))
    return 0


def cmd_rules_audit(args) -> int:
    import json
    import sys

    from engine.cli.outputs import Outputs
    from engine.pack.opir import read_op_ir
    from engine.passes.catalog import load_pack
    from engine.passes.opaudit import audit, render

    files = Outputs()
    files.claim("--json", args.json)
    files.claim("--sarif", args.sarif)
    pack = load_pack(pack_dir(args.pack, "PACK"))
    result = audit(pack, read_op_ir(args.op_ir))
    outputs = []
    if args.json:
        outputs.append((args.json, (json.dumps(result.to_json(), indent=1, ensure_ascii=False) + "\n").encode()))
    if args.sarif:
        from engine.report.sarif import build_audit_sarif, sarif_json
        outputs.append((args.sarif, sarif_json(build_audit_sarif(result))))
    files.write(outputs)
    if "-" not in (args.json, args.sarif):
        print(render(result))
    else:
        sys.stderr.write(render(result).splitlines()[-1] + "\n")
    return 3 if args.fail_on and result.findings else 0


INIT_OVERLAY = """\
# Changes to the base pack, applied in order (README "Pack overlays"). Uncomment and edit:
# each operation names a path in the base (`memconflict rules show` prints them).
overlay: []
#  - add: rw_conflict.input_rules              # a new rule, placed before an existing one
#    before: rw/in/read
#    items:
#      - id: rw/in/my-inplace-op
#        when: node.type == "MyInplaceOp"
#        value: ScopeWriteable
#  - replace: rw_conflict.matrix[ReadOnly][Writeable]    # an entry, a cell, a field
#    value: insert_identity
#  - remove: pipeline[inplace_support_check].gate        # a key, a rule, a step, a table entry
"""


def cmd_rules_init(args) -> int:
    """Write DIR/pack.yaml (base: the discovered pack, relative when possible) and DIR/changes.yaml."""
    import os
    from pathlib import Path

    from engine.core.dumpio import write_atomic
    from engine.core.errors import InputError, Loc, Problem
    from engine.passes.catalog import load_pack
    target = Path(args.dir)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise InputError(Problem(Loc(display_path(target)), "already exists and is not an empty folder",
                                 "name a new folder; `rules init` never overwrites a pack"))
    base = load_pack(pack_dir(args.rules))          # the base must itself load
    base_abs = Path(base.path).resolve()
    target.mkdir(parents=True, exist_ok=True)
    try:
        base_ref = Path(os.path.relpath(base_abs, target.resolve())).as_posix()
    except ValueError:                               # another drive: no relative path
        base_ref = base_abs.as_posix()
    name = target.resolve().name
    manifest = (f"# An overlay on {base.name} {base.version}: only the changes live here (README \"Pack overlays\").\n"
                f"# Run it with `memconflict run GRAPH --rules {display_path(target)}`, check it with\n"
                f"# `memconflict rules check {display_path(target)}`.\n"
                f"name: {name}\n"
                f'version: "0.1.0"\n'
                f"schema_version: {base.schema_version}\n"
                f"description: changes to {base.name} {base.version}\n"
                f"base: {base_ref}\n"
                f"include: [changes.yaml]\n")
    write_atomic(target / "pack.yaml", manifest.encode())
    write_atomic(target / "changes.yaml", INIT_OVERLAY.encode())
    print(f"{display_path(target)}: new pack {name} on {base.name} {base.version} ({base_ref}); "
          f"edit {display_path(target / 'changes.yaml')}")
    return 0


def cmd_rules_show(args) -> int:
    from engine.passes.catalog import load_pack
    from engine.report.show import show_pack
    print(show_pack(load_pack(pack_dir(args.pack, "PACK"))))
    return 0


def cmd_pipeline(args) -> int:
    from engine.passes.catalog import load_pack
    from engine.report.show import show_pipeline
    from engine.pack.options import resolve_options
    pack = load_pack(pack_dir(args.pack, "PACK"))
    print(show_pipeline(pack, resolve_options(pack.options, parse_options(args.option))))
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
    found, todo, visited = "-", [f.body], {f.name} | set(seen)     # each reachable function once
    while todo:
        for sub in walk(todo.pop()):
            if not isinstance(sub, Call):
                continue
            if sub.fn in funcs:
                if sub.fn not in visited:
                    visited.add(sub.fn)
                    todo.append(funcs[sub.fn].body)
                continue
            eff = REGISTRY[sub.fn].effects if sub.fn in REGISTRY else ""
            if eff == "edits":
                return eff
            if eff == "fails":
                found = eff
    return found
