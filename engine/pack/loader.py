"""Strict loading of a rule pack: `pack.yaml` and the files it includes.

A pack is data: op classes and the op registry, pass definitions and GE's
pipeline order, and one section per pass algorithm (e.g. `rw_conflict`) whose
logic parts are DSL expressions.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.dsl import library as primitives
from engine.dsl.compiler import Compiler
from engine.dsl.ast import Expr
from engine.dsl.parser import parse_expr, parse_signature
from engine.core.resources import default_pack_dir
from engine.core.errors import Collector, InputError, Loc, Problem, did_you_mean, display_path
from engine.core.schema import Reader, str_list
from engine.pack.overlay import resolve_pack
from engine.core.yamlloc import item_span
from engine.pack import cache
from engine.pack.options import load_options
from engine.pack.model import (CORE_SECTIONS, PASS_SCOPES, SCHEMA_VERSION, FuncDef, IsolateNoop, OpClass, OpSpec, Pack,
                               PassSpec, Rule, SortSpec, Step, SurgerySpec)


# ---- loading --------------------------------------------------------------------
def load_pack(path: str | Path | None, registry: Any) -> Pack:
    """Load and validate a pack directory (None: the shipped GE pack).

    `registry` names the pass algorithms and shared sections a pack may configure
    (`.algorithms`: name → Algorithm, `.sections`: name → loader); the pass layer
    passes its own (engine/passes/catalog.py), so this layer imports none of it.
    """
    SECTIONS = registry.sections
    root = Path(path) if path is not None else default_pack_dir()
    if root.is_file():
        root = root.parent
    manifest = root / "pack.yaml"
    if not manifest.is_file():
        raise InputError(Problem(Loc(display_path(root)), "not a rule pack: no pack.yaml here",
                                 "a pack is a folder with pack.yaml (name, version, schema_version, include)"))
    global _SOURCES
    errors = Collector()
    res = resolve_pack(root, errors)        # follows `base:` (engine/pack/overlay.py)
    if res is None:
        errors.check()
    r = Reader(res.manifest, "pack.yaml", errors, Loc(display_path(manifest)))
    pack = Pack(name=str(r.get("name", str, "", required=True)), version=str(r.get("version", str, "", required=True)),
                schema_version=r.get("schema_version", int, 0, required=True), path=root,
                description=str(r.get("description", str, "")))
    r.get("include", list, [], required=True)
    r.get("base", str)
    r.done()
    if r.ok and pack.schema_version != SCHEMA_VERSION:
        errors.error(r.value_loc("schema_version"), f"unsupported schema_version {pack.schema_version}",
                     f"this memconflict reads schema_version {SCHEMA_VERSION}")
    pack.files = res.files
    cache_key = cache.prime(res.files)      # parsed DSL of an unchanged pack (engine/pack/cache.py)
    raw: dict[str, Any] = {}
    for key, value in res.sections.items():
        raw[key] = value
        pack.section_locs[key] = res.sections.key_locs[key]
    pack.algorithms = _declared_algorithms(raw, registry, errors, pack)
    registry = type(registry)(pack.algorithms, SECTIONS, registry.families)
    known = set(CORE_SECTIONS) | {a.section for a in pack.algorithms.values()} | set(SECTIONS) | set(registry.families)
    for key in [k for k in raw if k not in known]:      # checked once families have declared their sections
        errors.error(pack.section_locs[key], f"unknown section '{key}'", did_you_mean(key, known, "sections"))
        del raw[key]
    _SOURCES = pack.dsl_sources
    try:
        _load_sections(pack, raw, errors, registry)
    finally:
        _SOURCES = None
    errors.check()
    cache.store(cache_key, res.files)
    return pack


def _declared_algorithms(raw: dict, registry: Any, errors: Collector, pack: Pack) -> dict:
    """The registry's algorithms plus one per entry of a family key (`rewrite_sets: {name: doc}`)."""
    algorithms = dict(registry.algorithms)
    for key, make in registry.families.items():
        r = Reader(raw.get(key), key, errors, Loc(str(pack.path)))
        if key in raw:
            pack.sections[key] = raw[key]
        for name in list(r.map):
            doc = r.get(name, str, "")
            if name in algorithms:
                errors.error(r.key_loc(name), f"{key}: '{name}' is already an algorithm", "give the family another name")
                continue
            algorithms[str(name)] = make(str(name), str(doc))
        r.done()
    return algorithms


def _load_sections(pack: Pack, raw: dict, errors: Collector, registry: Any) -> None:
    ALGORITHMS, SECTIONS = registry.algorithms, registry.sections

    _load_attr_keys(pack, raw.get("attr_keys"), errors)
    pack.options = load_options(raw.get("options"), errors, pack.section_locs.get("options", Loc(str(pack.path))))
    _load_classes(pack, raw.get("op_classes"), errors)
    _load_ops(pack, raw.get("ops"), raw.get("op_defaults"), errors)
    _load_passes(pack, raw, errors, registry.algorithms)
    _load_surgery(pack, raw.get("surgery"), errors)
    for name, load in SECTIONS.items():
        if name in raw:
            pack.sections[name] = raw[name]
            pack.configs[name] = load(raw[name], pack, errors)
    for algo in ALGORITHMS.values():
        if algo.section in raw:
            pack.sections[algo.section] = raw[algo.section]
            pack.configs[algo.section] = algo.load(raw[algo.section], pack, errors)
    for spec in pack.passes.values():
        algo = ALGORITHMS.get(spec.algorithm)
        if algo is not None and algo.section not in pack.configs:
            errors.error(spec.loc, f"pass '{spec.id}' uses algorithm '{spec.algorithm}' but the pack has no '{algo.section}' section",
                         f"add a `{algo.section}:` section to one of the included files")


def _load_attr_keys(pack: Pack, value: Any, errors: Collector) -> None:
    """`attr_keys: {name: GE attribute key}`: the keys rules name as constants
    (`PARENT_NODE_INDEX`) and primitives read (e.g. `parent_input`)."""
    fallback = Loc(str(pack.path))
    r = Reader(value if value is not None else {}, "attr_keys", errors, fallback)
    for name in list(r.map):
        key = r.get(name, str, "")
        if not key:
            errors.error(r.key_loc(name), f"attr_keys: '{name}' needs a GE attribute key", f"write `{name}: _ge_key`")
            continue
        pack.attr_keys[str(name)] = str(key)
        pack.attr_key_locs[str(name)] = r.key_loc(name)
    r.done()
    for name, user in primitives.ATTR_KEY_USERS.items():
        if name not in pack.attr_keys:
            errors.error(pack.section_locs.get("attr_keys", fallback), f"attr_keys: no key '{name}' (the primitive "
                         f"'{user}' reads it)", f"add `{name}: <GE attribute key>` to the pack's `attr_keys:`")


def _load_classes(pack: Pack, value: Any, errors: Collector) -> None:
    if value is None:
        return
    r = Reader(value, "op_classes", errors, Loc(str(pack.path)))
    for name in list(r.map):
        entry = Reader(r.get(name, dict), f"op class '{name}'", errors, r.key_loc(name))
        types = str_list(entry.get("types", list, [], required=True), f"op class '{name}': types", errors, entry.loc)
        doc = entry.get("doc", str, "")
        entry.done()
        pack.classes[name] = OpClass(name, frozenset(map(str, types)), str(doc), r.key_loc(name))
    r.done()


def _load_ops(pack: Pack, value: Any, defaults: Any, errors: Collector) -> None:
    d = Reader(defaults, "op_defaults", errors, Loc(str(pack.path)))
    pack.default_engine = str(d.get("engine", str, ""))
    d.done()
    if value is None:
        return
    r = Reader(value, "ops", errors, Loc(str(pack.path)))
    for op_type in list(r.map):
        entry = Reader(r.get(op_type, dict), f"op '{op_type}'", errors, r.key_loc(op_type))
        sig_text = entry.get("signature", str)
        sig = None
        if sig_text is not None:
            try:
                sig = parse_signature(sig_text, entry.value_loc("signature"))
            except InputError as exc:
                errors.problems.extend(exc.problems)
            else:
                pack.dsl_sources.append((str(sig_text), sig))
                if sig.op != op_type:
                    errors.error(entry.value_loc("signature"), f"signature names '{sig.op}' under op '{op_type}'",
                                 f"write `{op_type}(...) -> (...)`")
        spec = OpSpec(str(op_type), sig, entry.get("engine", str), bool(entry.get("atomic", bool, False)),
                      str(entry.get("doc", str, "")), r.key_loc(op_type))
        entry.done()
        pack.ops[str(op_type)] = spec
    r.done()


def _load_passes(pack: Pack, raw: dict, errors: Collector, ALGORITHMS: dict) -> None:

    fallback = Loc(str(pack.path))
    pack.stages = [str(s) for s in str_list(raw.get("stages", []), "stages", errors, fallback)]
    r = Reader(raw.get("passes"), "passes", errors, fallback)
    for pid in list(r.map):
        e = Reader(r.get(pid, dict), f"pass '{pid}'", errors, r.key_loc(pid))
        algo = e.get("algorithm", str, "", required=True)
        if algo and algo not in ALGORITHMS:
            errors.error(e.value_loc("algorithm"), f"unknown algorithm '{algo}'", did_you_mean(algo, ALGORITHMS, "algorithms"))
        scope = e.get("scope", str, "graph")
        if scope not in PASS_SCOPES:
            errors.error(e.value_loc("scope"), f"unknown pass scope '{scope}'", did_you_mean(scope, PASS_SCOPES, "scopes"))
        on_failure = e.get("on_failure", str, "fail")
        if on_failure not in ("fail", "warn"):
            errors.error(e.value_loc("on_failure"), f"on_failure must be 'fail' or 'warn', not '{on_failure}'", "")
        spec = PassSpec(str(pid), str(algo), str(scope), e.get("config", str), str(on_failure),
                        str(e.get("doc", str, "")), r.key_loc(pid))
        e.done()
        pack.passes[str(pid)] = spec
    r.done()
    steps = raw.get("pipeline", [])
    if not isinstance(steps, list):
        errors.error(getattr(steps, "loc", fallback), "pipeline must be a list of steps", "write `- {pass: ID, stage: S}`")
        return
    gate_scope = pack.scope(())
    for i, item in enumerate(steps):
        loc = steps.item_locs[i]
        s = Reader(item, f"pipeline step {i + 1}", errors, loc)
        pid = s.get("pass", str, "", required=True)
        stage = s.get("stage", str, "", required=True)
        gate_text = s.get("gate", str)
        s.done()
        if pid and pid not in pack.passes:
            errors.error(s.value_loc("pass"), f"pipeline names unknown pass '{pid}'", did_you_mean(pid, pack.passes, "passes"))
        if stage and stage not in pack.stages:
            errors.error(s.value_loc("stage"), f"unknown stage '{stage}'", did_you_mean(stage, pack.stages, "stages"))
        gate = parse_rule_expr(gate_text, s.value_loc("gate"), errors) if gate_text is not None else None
        if gate is not None:
            Compiler(gate_scope, errors).check(gate, (), "bool", "a pipeline `gate`")
        pack.pipeline.append(Step(str(pid), str(stage), gate, loc))
    # stages must not go backwards
    order = {s: i for i, s in enumerate(pack.stages)}
    last = -1
    for step in pack.pipeline:
        k = order.get(step.stage, last)
        if k < last:
            errors.error(step.loc, f"pipeline step '{step.pass_id}' in stage '{step.stage}' comes after a later stage",
                         "list the steps in stage order (see `stages`)")
        last = max(last, k)


def _load_surgery(pack: Pack, value: Any, errors: Collector) -> None:
    fallback = Loc(str(pack.path))
    r = Reader(value, "surgery", errors, fallback)
    inherit = str_list(r.get("inherit_attrs", list, []), "surgery: inherit_attrs", errors, r.loc)
    exprs = {}
    for key in ("keep_in_ctrl_from", "keep_out_ctrl_of", "loop_back_edge_from"):
        text = r.get(key, str)
        e = parse_rule_expr(text, r.value_loc(key), errors) if text is not None else None
        if e is not None:
            Compiler(pack.scope(("node",)), errors).check(e, (), "bool", f"surgery `{key}`")
        exprs[key] = e
    sort = _load_sort(pack, r.get("topological_sort", dict), r.value_loc("topological_sort"), errors)
    noop = _load_isolate_noop(r.get("isolate_noop", dict), r.value_loc("isolate_noop"), errors)
    r.done()
    pack.surgery = SurgerySpec(tuple(map(str, inherit)), exprs["keep_in_ctrl_from"], exprs["keep_out_ctrl_of"],
                               exprs["loop_back_edge_from"], r.loc, sort, noop)


def _load_isolate_noop(value: Any, loc: Loc, errors: Collector) -> IsolateNoop | None:
    """surgery.isolate_noop: {type, suffix, threshold} (all required)."""
    if value is None:
        return None
    r = Reader(value, "surgery: isolate_noop", errors, loc)
    typ = r.get("type", str, required=True)
    suffix = r.get("suffix", str, required=True)
    threshold = r.get("threshold", int, required=True)
    if isinstance(threshold, int) and threshold < 0:
        errors.error(r.value_loc("threshold"), "surgery: isolate_noop: threshold must be 0 or more", "GE's is 1000")
    r.done()
    if typ is None or suffix is None or not isinstance(threshold, int):
        return None
    return IsolateNoop(str(typ), str(suffix), threshold)


def _load_sort(pack: Pack, value: Any, loc: Loc, errors: Collector) -> SortSpec | None:
    """surgery.topological_sort: `mode` (a str from the options), `memory_priority` (a bool
    from the options), `inputs_first` and `long_lived` (node predicates)."""
    if value is None:
        return None
    r = Reader(value, "surgery: topological_sort", errors, loc)
    exprs = {}
    for key, vars_, typ, required in (("mode", (), "str", True), ("memory_priority", (), "bool", False),
                                      ("inputs_first", ("node",), "bool", False),
                                      ("long_lived", ("node",), "bool", False)):
        text = r.get(key, (str, bool), required=required)
        e = parse_rule_expr(text, r.value_loc(key), errors) if text is not None else None
        if e is not None:
            Compiler(pack.scope(vars_), errors).check(e, (), typ, f"surgery.topological_sort `{key}`")
        exprs[key] = e
    r.done()
    if exprs["mode"] is None:
        return None
    return SortSpec(exprs["mode"], exprs["memory_priority"], exprs["inputs_first"], exprs["long_lived"], r.loc)


_SOURCES: list | None = None   # set while a pack loads: every DSL value parsed, with its text


def parse_rule_expr(text: Any, loc: Loc, errors: Collector) -> Expr | None:
    """Parse a DSL expression from YAML (`loc` is where the value starts)."""
    if isinstance(text, bool):
        text = "true" if text else "false"
    elif isinstance(text, int):
        text = str(text)
    if not isinstance(text, str):
        errors.error(loc, "expected a DSL expression", "write it as a string, e.g. `node is var_like`")
        return None
    start = loc
    raw = getattr(text, "loc", None)
    if raw is not None:
        start = _content_start(raw)
    try:
        e = parse_expr(str(text), start)
    except InputError as exc:
        errors.problems.extend(exc.problems)
        return None
    if _SOURCES is not None:
        _SOURCES.append((str(text), e))
    return e


def _content_start(loc: Loc) -> Loc:
    """Where a YAML scalar's text starts: after a quote, or on the line after a
    literal block indicator (`|`), at that line's indentation."""
    try:
        with open(loc.file, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return loc
    if not 0 < loc.line <= len(lines):
        return loc
    ch = lines[loc.line - 1][loc.col - 1:loc.col]
    if ch in ("'", '"'):
        return loc.shifted(0, 1)
    if ch == "|" and loc.line < len(lines):
        nxt = lines[loc.line]
        return Loc(loc.file, loc.line + 1, len(nxt) - len(nxt.lstrip()) + 1)
    return loc


def load_rules(value: Any, what: str, pack: Pack, errors: Collector, fallback: Loc) -> list[Rule]:
    """A first-match rule list: `- {id, when, value, doc}`; ids are unique in the pack."""
    if not isinstance(value, list):
        errors.error(getattr(value, "loc", fallback), f"{what} must be a list of rules",
                     "write `- {id: ..., when: ..., value: ...}`")
        return []
    rules = []
    for i, item in enumerate(value):
        r = Reader(item, f"{what} rule {i + 1}", errors, value.item_locs[i])
        rid = r.get("id", str, "", required=True)
        when_text = r.get("when", (str, bool), None)
        when = parse_rule_expr(when_text, r.value_loc("when"), errors) if when_text is not None \
            else parse_expr("true", r.loc)
        val = r.get("value", (str, bool, int), None, required=True)
        value_expr = parse_rule_expr(val, r.value_loc("value"), errors) if val is not None else None
        doc = r.get("doc", str, "")
        r.done()
        if rid:
            register_rule_id(pack, str(rid), r.value_loc("id"), errors)
        if when is not None and value_expr is not None:
            rules.append(Rule(str(rid), when, value_expr, str(doc), *item_span(value, i, fallback)))
    return rules


def load_functions(value: Any, what: str, pack: Pack, errors: Collector, fallback: Loc) -> dict[str, FuncDef]:
    """`{name: {params: [..], body: EXPR, doc: ..}}`; bodies are checked by the caller's scope."""
    out: dict[str, FuncDef] = {}
    if value is None:
        return out
    r = Reader(value, what, errors, fallback)
    for name in list(r.map):
        f = Reader(r.get(name, dict), f"{what} '{name}'", errors, r.key_loc(name))
        params = tuple(map(str, str_list(f.get("params", list, [], required=True), f"{what} '{name}': params", errors, f.loc)))
        text = f.get("body", (str, bool), None, required=True)
        doc = f.get("doc", str, "")
        memo = f.get("memo", bool, False)
        f.done()
        body = parse_rule_expr(text, f.value_loc("body"), errors) if text is not None else None
        if body is not None:
            out[str(name)] = FuncDef(str(name), params, body, str(doc), r.key_loc(name), bool(memo))
    r.done()
    return out


def function_specs(funcs: dict[str, FuncDef]) -> dict[str, primitives.PrimSpec]:
    """Specs so rules calling pack functions can be checked: the arity, and the body, which the
    type checker checks at each call's argument types (engine/dsl/types.py)."""
    return {n: primitives.PrimSpec(n, (len(f.params), len(f.params)), f.doc, lambda ctx: None,
                                   template=(f.params, f.body), memo=f.memo) for n, f in funcs.items()}


def register_rule_id(pack: Pack, rid: str, loc: Loc, errors: Collector) -> None:
    if rid in pack.rule_ids:
        errors.error(loc, f"rule id '{rid}' is already used", f"first used at {pack.rule_ids[rid]}")
    else:
        pack.rule_ids[rid] = loc
