"""The runtime-memory rules (the pack's `runtime_memory:` section, rules/ge/runtime-memory.yaml):
placements, allocator constants, GE statuses and the placement copy table with the node types
it creates, read strictly (`file:line:col` errors, exit 2). The pack loads the section like any
other (engine/passes/runtime_section.py registers it), so `rules check` checks it, `rules show`
prints it, overlays edit it and `diff` compares it; `load_rules` reads one file alone."""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from engine.core.errors import Collector, Loc
from engine.core.resources import default_pack_dir
from engine.core.schema import Reader
from engine.core.yamlloc import load_yaml

FILE_NAME = "runtime-memory.yaml"
STATUS_KEYS = ("failed", "param_invalid", "alloc_failed", "undefined")
COPY_KINDS = ("make_sure_at_device", "make_sure_at_host", "host_to_device", "device_to_host")
NODE_KEYS = ("const", "data", "init", "inner_netoutput", "free", "h2d", "d2h", "sync_stream", "at_device",
             "at_host", "at_host_without_sync", "size", "unaligned_size", "string_size", "build_tensor",
             "free_tensor", "build_ref_tensor", "l1_allocator", "l2_allocators",
             "select_l2_allocator", "host_l2_allocator", "init_l2_allocator", "streams")


@dataclass(frozen=True, slots=True)
class Placement:
    name: str
    ge: str
    value: int
    loc: Loc


@dataclass(frozen=True, slots=True)
class RuntimeRules:
    placements: dict[str, Placement]
    host_not_following: frozenset[str]
    default_max_streams: int
    pool_segment: int
    stream_bits: int
    statuses: dict[str, str]
    copy_table: dict[tuple[str, str], tuple[str, Loc]]   # (from, to) → (copy kind, where written)
    registry: dict[str, str]                              # node type → copy kind
    nodes: dict[str, str]
    string_dtype: str
    sync_stream_key: str
    usages: dict[str, str]
    file: str
    page_bits: int = 16


def load_rules(path: str | Path | None = None) -> RuntimeRules:
    """Read and check one runtime-memory file alone; InputError lists every problem."""
    path = Path(path) if path is not None else default_pack_dir() / FILE_NAME
    doc = load_yaml(path)
    errors = Collector()
    top = Reader(doc, FILE_NAME, errors, Loc(str(path), 1, 1))
    body = top.get("runtime_memory", dict, {}, required=True)
    top.done()
    rules = read_section(body, errors, top.loc, str(path))
    errors.check()
    return rules


def read_section(body, errors: Collector, fallback: Loc, file: str) -> RuntimeRules:
    """The `runtime_memory:` section's value, checked; problems go to `errors`."""
    r = Reader(body, "runtime_memory", errors, fallback)
    placements = _placements(r.get("placements", dict, {}, required=True), errors, r.loc)
    hnf = r.get("host_not_following", list, [], required=True)
    for i, name in enumerate(hnf):
        _known(name, placements, errors, getattr(hnf, "item_locs", [r.loc] * len(hnf))[i], "placement")
    alloc = Reader(r.get("allocator", dict, {}, required=True), "allocator", errors, r.loc)
    max_streams = alloc.get("default_max_streams", int, 8, required=True)
    segment = alloc.get("pool_segment", int, 1000, required=True)
    bits = alloc.get("stream_bits", int, 64, required=True)
    page_bits = alloc.get("page_bits", int, 16)
    if not 0 <= page_bits < 64:
        errors.error(alloc.value_loc("page_bits"), f"allocator: page_bits must be from 0 to 63, got {page_bits}",
                     "GE's page is 1 << page_idem_num bytes (16 by default)")
        page_bits = 16
    alloc.done()
    st = Reader(r.get("statuses", dict, {}, required=True), "statuses", errors, r.loc)
    statuses = {k: str(st.get(k, str, k, required=True)) for k in STATUS_KEYS}
    st.done()
    pl = Reader(r.get("placement", dict, {}, required=True), "placement", errors, r.loc)
    table = _copy_table(pl.get("copy_table", list, [], required=True), placements, errors, pl.loc)
    reg = pl.get("registry", dict, {}) or {}
    for typ, kind in reg.items():
        if kind not in COPY_KINDS:
            from engine.core.errors import did_you_mean
            errors.error(getattr(reg, "value_locs", {}).get(typ, pl.loc), f"registry: unknown copy '{kind}' for {typ}",
                         did_you_mean(str(kind), COPY_KINDS, "copies"))
    nr = Reader(pl.get("nodes", dict, {}, required=True), "placement.nodes", errors, pl.loc)
    nodes = {k: str(nr.get(k, str, k, required=True)) for k in NODE_KEYS}
    nr.done()
    string_dtype = str(pl.get("string_dtype", str, "string", required=True))
    sync_key = str(pl.get("sync_stream_key", str, "", required=True))
    ur = Reader(pl.get("usages", dict, {}, required=True), "placement.usages", errors, pl.loc)
    usages = {k: str(ur.get(k, str, k, required=True)) for k in ("output", "workspace")}
    ur.done()
    pl.done()
    r.done()
    return RuntimeRules(placements, frozenset(map(str, hnf)), max_streams, segment, bits, statuses, table,
                        {str(k): str(v) for k, v in reg.items()}, nodes, string_dtype, sync_key, usages, file,
                        page_bits)


@lru_cache(maxsize=4)
def default_rules() -> RuntimeRules:
    return load_rules(None)


def _known(name, placements, errors: Collector, loc: Loc, what: str) -> None:
    from engine.core.errors import did_you_mean
    if not isinstance(name, str) or name not in placements:
        errors.error(getattr(name, "loc", loc), f"unknown {what} '{name}'", did_you_mean(str(name), placements, what + "s"))


def _placements(value, errors: Collector, fallback: Loc) -> dict[str, Placement]:
    out: dict[str, Placement] = {}
    for name, entry in (value or {}).items():
        loc = getattr(value, "key_locs", {}).get(name, fallback)
        e = Reader(entry, f"placement '{name}'", errors, loc)
        ge_name = e.get("ge", str, "", required=True)
        num = e.get("value", int, -1, required=True)
        e.done()
        if any(p.value == num for p in out.values()):
            errors.error(e.value_loc("value"), f"placement '{name}': value {num} is used twice", "give each its own value")
        out[str(name)] = Placement(str(name), str(ge_name), num, loc)
    return out


def _copy_table(value, placements, errors: Collector, fallback: Loc) -> dict:
    table: dict[tuple[str, str], tuple[str, Loc]] = {}
    locs = getattr(value, "item_locs", [fallback] * len(value))
    for i, entry in enumerate(value):
        e = Reader(entry, f"copy_table item {i + 1}", errors, locs[i])
        src = e.get("from", str, "", required=True)
        dst = e.get("to", str, "", required=True)
        kind = e.get("copy", str, "", required=True)
        e.done()
        for key, name in (("from", src), ("to", dst)):
            if name:
                _known(name, placements, errors, e.value_loc(key), "placement")
        if kind and kind not in COPY_KINDS:
            from engine.core.errors import did_you_mean
            errors.error(e.value_loc("copy"), f"unknown copy '{kind}'", did_you_mean(kind, COPY_KINDS, "copies"))
        if (src, dst) in table:
            errors.error(locs[i], f"copy {src} → {dst} is given twice (first at {table[(src, dst)][1]})",
                         "keep one entry per pair")
        table[(str(src), str(dst))] = (str(kind), locs[i])
    return table
