"""The pack's `runtime:` section (rules/ge/runtime.yaml): what GE's RT2 graph builder
names and decides, loaded strictly into a frozen RuntimeSpec. engine/runtime/ holds the
mechanisms that read it (`memconflict runtime cond|events|io-reuse`, `run --runtime`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.core.errors import Cite, Collector, Loc
from engine.core.schema import Reader, str_list
from engine.core.yamlloc import item_span
from engine.dsl.ast import Expr
from engine.dsl.compiler import Compiler
from engine.pack.loader import parse_rule_expr, register_rule_id
from engine.pack.model import Pack
from engine.passes.registry import register_section

NODE_TYPES = ("data", "inner_data", "inner_netoutput", "netoutput", "switch_notify", "watcher_placeholder",
              "branch_pivot", "branch_done", "wait_anyone", "identity_addr", "point_from_inputs")
ATTRS = ("index", "guarder_outside", "release_resource_index", "guarder_node_type", "branch", "request_watcher")
NAME_FIELDS = {"identity_addr": ("cond", "branch"), "point_from_inputs": ("cond", "branch"), "case_branch": ("branch",)}
EVENT_KEYS = ("send_attr", "recv_attr", "unknown_flag_attr", "stream_num_attr", "event_num_attr")
STAGES = ("first_sync", "last_sync", "last_resource_clean")


@dataclass(frozen=True, slots=True)
class GuardRule:
    """One first-match rule of `dump.guarders`: the guarder the lowering gives the outputs
    of a dump node matching `when` (None: no guarder)."""

    id: str
    when: Expr
    guarder: str | None
    doc: str
    cite: Cite


@dataclass(frozen=True, slots=True)
class RuntimeSpec:
    node_types: dict[str, str]
    attrs: dict[str, str]
    names: dict[str, str]
    if_branches: tuple[str, ...]
    if_ops: frozenset[str]
    case_ops: frozenset[str]
    free_guarders: frozenset[str]
    placements: tuple[str, ...]
    default_placement: str
    following: str              # the placement UpdatePlacement reads as another
    following_as: str
    mixed_placement: str
    guard_rules: tuple[GuardRule, ...]
    main_stream: int
    events: dict[str, str]
    stages: tuple[str, ...]
    io_reuse_attr: str
    pair_separator: str
    index_separator: str
    cites: dict[str, Cite]      # "free_guarders", "cond_ops", "names.identity_addr", ... → where
    loc: Loc
    stage_kernels: dict[str, tuple[str, str]] = None   # stage → (send kernel type, wait kernel type)
    node_kernels: tuple[str, str] = ("", "")            # LoweringEventSync's (send, wait) kernel types


def _names(r: Reader, keys, what: str, errors: Collector) -> dict[str, str]:
    out = {}
    for key in keys:
        v = r.get(key, str, "", required=True)
        if r.ok and key in r.map and not v:
            errors.error(r.value_loc(key), f"{what}: '{key}' must not be empty", "give GE's name")
        out[key] = str(v)
    r.done()
    return out


def _cite(m: Any, key: str, fallback: Loc, rid: str = "") -> Cite:
    from engine.core.yamlloc import span_of
    return Cite(rid, *span_of(m, key, fallback))


def load(value: Any, pack: Pack, errors: Collector) -> RuntimeSpec | None:
    fallback = Loc(str(pack.path))
    r = Reader(value, "runtime", errors, fallback)
    r.get("doc", str, "")
    nt = _names(Reader(r.get("node_types", dict, {}, required=True), "runtime.node_types", errors, r.loc),
                NODE_TYPES, "runtime.node_types", errors)
    at = _names(Reader(r.get("attrs", dict, {}, required=True), "runtime.attrs", errors, r.loc),
                ATTRS, "runtime.attrs", errors)
    nm_map = r.get("names", dict, {}, required=True)
    nm = Reader(nm_map, "runtime.names", errors, r.loc)
    names = {}
    for key, fields in NAME_FIELDS.items():
        text = str(nm.get(key, str, "", required=True))
        try:
            text.format(**{f: "x" for f in fields})
        except (KeyError, IndexError, ValueError) as exc:
            errors.error(nm.value_loc(key), f"runtime.names.{key}: bad pattern ({exc})",
                         "name fields in braces: " + ", ".join("{" + f + "}" for f in fields))
        names[key] = text
    if_branches = str_list(nm.get("if_branches", list, [], required=True), "runtime.names.if_branches", errors, nm.loc)
    if nm.ok and len(if_branches) != 2:
        errors.error(nm.value_loc("if_branches"), "runtime.names.if_branches needs two names (then, else)", "")
    nm.done()
    co_map = r.get("cond_ops", dict, {}, required=True)
    co = Reader(co_map, "runtime.cond_ops", errors, r.loc)
    if_ops = str_list(co.get("if", list, [], required=True), "runtime.cond_ops.if", errors, co.loc)
    case_ops = str_list(co.get("case", list, [], required=True), "runtime.cond_ops.case", errors, co.loc)
    co.done()
    for t in set(if_ops) & set(case_ops):
        errors.error(co.loc, f"runtime.cond_ops: '{t}' is both an If and a Case type", "list it once")
    free = str_list(r.get("free_guarders", list, [], required=True), "runtime.free_guarders", errors, r.loc)
    pl = Reader(r.get("placements", dict, {}, required=True), "runtime.placements", errors, r.loc)
    order = [str(x) for x in str_list(pl.get("order", list, [], required=True), "runtime.placements.order", errors, pl.loc)]
    picks = {}
    for key in ("default", "following_as", "mixed"):
        v = str(pl.get(key, str, "", required=True))
        if pl.ok and key in pl.map and v not in order:
            errors.error(pl.value_loc(key), f"runtime.placements.{key}: '{v}' is not a placement",
                         "name one of: " + ", ".join(order))
        picks[key] = v
    pl.done()
    guard_rules = _guard_rules(r.get("dump", dict, {}, required=True), pack, errors, r.loc)
    ev = Reader(r.get("events", dict, {}, required=True), "runtime.events", errors, r.loc)
    main_stream = ev.get("main_stream", int, 0, required=True)
    events = {k: str(ev.get(k, str, "", required=True)) for k in EVENT_KEYS}
    stage_list = ev.get("stages", list, [], required=True)
    stages = []
    kernels: dict[str, tuple[str, str]] = {}
    for i, item in enumerate(stage_list):
        s = Reader(item, f"runtime.events.stages item {i + 1}", errors, stage_list.item_locs[i])
        name = str(s.get("name", str, "", required=True))
        s.get("doc", str, "")
        kernels[name] = (str(s.get("send", str, "", required=True)), str(s.get("wait", str, "", required=True)))
        s.done()
        stages.append(name)
    nk = Reader(ev.get("node_kernels", dict, {}, required=True), "runtime.events.node_kernels", errors, ev.loc)
    node_kernels = (str(nk.get("send", str, "", required=True)), str(nk.get("wait", str, "", required=True)))
    nk.done()
    if ev.ok and tuple(stages) != STAGES:
        errors.error(ev.value_loc("stages"), f"runtime.events.stages must be {', '.join(STAGES)} in this order "
                     f"(SyncEventStage), not {', '.join(stages) or 'nothing'}", "the engine computes these three stages")
    ev.done()
    io = Reader(r.get("io_reuse", dict, {}, required=True), "runtime.io_reuse", errors, r.loc)
    io_attr = str(io.get("attr", str, "", required=True))
    seps = {k: str(io.get(k, str, "", required=True)) for k in ("pair_separator", "index_separator")}
    for k, v in seps.items():
        if io.ok and k in io.map and len(v) != 1:
            errors.error(io.value_loc(k), f"runtime.io_reuse.{k} must be one character", "GE splits on '|' and ','")
    io.done()
    r.done()
    if not r.ok:
        return None
    cites = {"free_guarders": _cite(value, "free_guarders", r.loc), "placements": _cite(value, "placements", r.loc)}
    for key in ("if", "case"):
        cites[f"cond_ops.{key}"] = _cite(co_map, key, r.loc)
    for key in list(NAME_FIELDS) + ["if_branches"]:
        cites[f"names.{key}"] = _cite(nm_map, key, r.loc)
    return RuntimeSpec(nt, at, names, tuple(map(str, if_branches)), frozenset(map(str, if_ops)),
                       frozenset(map(str, case_ops)), frozenset(map(str, free)), tuple(order), picks["default"],
                       "following", picks["following_as"], picks["mixed"], guard_rules, int(main_stream), events,
                       tuple(stages), io_attr, seps["pair_separator"], seps["index_separator"], cites, r.loc,
                       kernels, node_kernels)


def _guard_rules(value: Any, pack: Pack, errors: Collector, fallback: Loc) -> tuple[GuardRule, ...]:
    d = Reader(value, "runtime.dump", errors, fallback)
    items = d.get("guarders", list, [], required=True)
    d.done()
    out = []
    comp = Compiler(pack.scope(("node",)), errors)
    for i, item in enumerate(items):
        r = Reader(item, f"runtime.dump.guarders rule {i + 1}", errors, items.item_locs[i])
        rid = str(r.get("id", str, "", required=True))
        text = r.get("when", (str, bool), None, required=True)
        guarder = r.get("guarder", (str, type(None)), None, required=True)
        doc = str(r.get("doc", str, ""))
        r.done()
        if rid:
            register_rule_id(pack, rid, r.value_loc("id"), errors)
        when = parse_rule_expr(text, r.value_loc("when"), errors) if text is not None else None
        if when is None:
            continue
        comp.check(when, (), "bool", "a runtime guarder rule's `when`")
        out.append(GuardRule(rid, when, str(guarder) if guarder else None, doc,
                             Cite(rid, *item_span(items, i, fallback))))
    return tuple(out)


register_section("runtime", load)


def load_memory(value: Any, pack: Pack, errors: Collector):
    """The `runtime_memory:` section (rules/ge/runtime-memory.yaml): the memtrace and placement
    knowledge, read by engine/pack/runtime_memory.py."""
    from engine.pack.runtime_memory import read_section
    loc = pack.section_locs.get("runtime_memory", Loc(str(pack.path)))
    return read_section(value, errors, loc, loc.file)


register_section("runtime_memory", load_memory)
