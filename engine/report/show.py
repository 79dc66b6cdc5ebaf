"""Readable renderings of a pack (`memconflict rules show`, `memconflict pipeline`)."""
from __future__ import annotations

from engine.dsl.compiler import Compiler
from engine.core.errors import Collector
from engine.pack.model import Pack


def _table(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for k, r in enumerate(rows):
        out.append("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
        if k == 0:
            out.append("  " + "  ".join("-" * w for w in widths))
    return out


def show_pack(pack: Pack) -> str:
    lines = [f"pack {pack.name} {pack.version} (schema {pack.schema_version}) — {pack.path}"]
    if pack.description:
        lines.append(f"  {pack.description}")
    lines.append("")
    lines.append("op classes:")
    for c in pack.classes.values():
        lines.append(f"  {c.name:<18} {', '.join(sorted(c.types))}")
    lines.append("")
    lines.append(f"ops (default engine {pack.default_engine or '-'}):")
    rows = [("type", "signature", "engine", "atomic")]
    for o in pack.ops.values():
        rows.append((o.type, str(o.signature) if o.signature else "-", o.engine or "-", "yes" if o.atomic else ""))
    lines += _table(rows)
    for section, cfg in pack.configs.items():
        render = getattr(ALGORITHMS_SHOW, section, None)
        if cfg is not None and render is not None:
            lines.append("")
            lines += render(cfg)
    lines.append("")
    lines.append("rules by file:")
    by_file: dict[str, list[str]] = {}
    for rid, loc in sorted(pack.rule_ids.items(), key=lambda t: (t[1].file, t[1].line)):
        by_file.setdefault(loc.file, []).append(f"{rid} (line {loc.line})")
    for file, ids in by_file.items():
        lines.append(f"  {file}: {len(ids)} rule(s)")
        lines += [f"    {i}" for i in ids]
    lines.append("")
    lines.append(show_pipeline(pack, {}))
    return "\n".join(lines)


def _rules(title: str, rules) -> list[str]:
    out = [f"{title}:"]
    for r in rules:
        out.append(f"  {r.id:<26} when {r.when}  =>  {r.value}")
    return out


class ALGORITHMS_SHOW:
    @staticmethod
    def rw_conflict(cfg) -> list[str]:
        lines = ["rw_conflict decision matrix (output type \\ input type):"]
        cols = [t for t in cfg.input_types if t != cfg.in_role["invalid"]]
        rows = [("",) + tuple(cols)]
        for o in cfg.output_types:
            if o == cfg.out_role["invalid"]:
                continue
            rows.append((o,) + tuple(cfg.matrix[(o, c)] for c in cols))
        lines += _table(rows)
        lines.append("")
        lines.append("CombineInputRW (new \\ accumulated):")
        rows = [("",) + tuple(cols)] + [(n,) + tuple(cfg.combine[(n, a)] for a in cols) for n in cols]
        lines += _table(rows)
        lines.append("")
        lines += _rules("output rules", cfg.output_overrides + cfg.output_rules)
        lines += _rules("input rules", cfg.input_overrides + cfg.input_rules)
        lines.append("predicates:")
        for k, e in cfg.predicates.items():
            lines.append(f"  {k:<26} {e}")
        return lines

    @staticmethod
    def runtime(cfg) -> list[str]:
        lines = ["runtime (RT2 graph builder):",
                 f"  If types {', '.join(sorted(cfg.if_ops))}; Case types {', '.join(sorted(cfg.case_ops))}",
                 f"  Free* guarders: {', '.join(sorted(cfg.free_guarders))}",
                 f"  placements: {', '.join(cfg.placements)} (default {cfg.default_placement}, "
                 f"{cfg.following} counts as {cfg.following_as}, mixed → {cfg.mixed_placement})",
                 f"  names: {'; '.join(f'{k} {v}' for k, v in cfg.names.items())}; If branches "
                 f"{', '.join(cfg.if_branches)}",
                 "  node types: " + ", ".join(f"{k} {v}" for k, v in cfg.node_types.items()),
                 "  attrs: " + ", ".join(f"{k} {v}" for k, v in cfg.attrs.items()),
                 f"  events: main stream {cfg.main_stream}, stages {', '.join(cfg.stages)}, "
                 + ", ".join(f"{k} {v}" for k, v in cfg.events.items()),
                 f"  io reuse: {cfg.io_reuse_attr} ('{cfg.pair_separator}' between pairs, "
                 f"'{cfg.index_separator}' inside)",
                 "  dump guarders (first match):"]
        for r in cfg.guard_rules:
            lines.append(f"    {r.id:<24} when {r.when}  =>  {r.guarder or 'no guarder'}")
        return lines

    @staticmethod
    def runtime_memory(cfg) -> list[str]:
        lines = ["runtime memory (memtrace, placement):",
                 "  placements: " + ", ".join(f"{p.name} {p.ge}={p.value}" for p in cfg.placements.values()),
                 f"  shared, not wandered, on: {', '.join(sorted(cfg.host_not_following))}",
                 f"  allocator: {cfg.default_max_streams} streams before ReInit, pool segment {cfg.pool_segment}, "
                 f"{cfg.stream_bits}-bit stream sets",
                 "  statuses: " + ", ".join(f"{k} {v}" for k, v in cfg.statuses.items()),
                 "  copy table (from → to: copy):"]
        for (src, dst), (kind, _) in cfg.copy_table.items():
            lines.append(f"    {src:<10} → {dst:<10} {kind}")
        if cfg.registry:
            lines.append("  registry: " + ", ".join(f"{t} {k}" for t, k in cfg.registry.items()))
        lines.append("  node types: " + ", ".join(f"{k} {v}" for k, v in cfg.nodes.items()))
        return lines


def show_pipeline(pack: Pack, options: dict[str, str]) -> str:
    from engine.passes.context import RunContext
    from engine.core.graph import Model
    from engine.dsl.library import bound_functions

    ctx = RunContext(pack, Model(None), options)
    comp = Compiler(pack.scope((), functions=bound_functions(ctx)), Collector())
    rows = [("#", "stage", "pass", "algorithm", "scope", "gate", "runs")]
    for i, step in enumerate(pack.pipeline, 1):
        spec = pack.passes[step.pass_id]
        on = step.gate is None or bool(comp.function(step.gate, ())())
        rows.append((str(i), step.stage, spec.id, spec.algorithm, spec.scope,
                     str(step.gate) if step.gate else "always", "yes" if on else "no"))
    return "\n".join(["pipeline:"] + _table(rows) + show_options(pack, options))


def show_options(pack: Pack, options: dict[str, str]) -> list[str]:
    """The options the pack declares: type, default, this run's value, what each mirrors."""
    if not pack.options:
        return ["", "options: none declared (any --option KEY=VALUE is passed on as a string)"]
    rows = [("option", "type", "default", "value")]
    for spec in pack.options.values():
        rows.append((spec.name, spec.describe_type(), "none" if spec.default is None else spec.default,
                     options.get(spec.name, "-")))
    out = ["", "options (--option KEY=VALUE; bools as 1/0, true/false, on/off, yes/no):"] + _table(rows)
    for spec in pack.options.values():
        out.append(f"  {spec.name}: {spec.doc or '(no doc)'}")
        if spec.mirrors:
            out.append(f"      mirrors {spec.mirrors}")
    return out
