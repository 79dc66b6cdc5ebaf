"""Strict reading of variables.yaml into the dataclasses of `policy`."""
from __future__ import annotations

import re
import string
from enum import Enum

from engine.core.errors import Collector, Loc, did_you_mean
from engine.core.schema import Reader
from pathlib import Path

from engine.core.resources import default_pack_dir
from engine.core.yamlloc import load_yaml, loc_of
from engine.varmgr import getypes as t
from engine.varmgr.policy import (AttrNames, Allocator, FormatFusion, MemoryLimits, MemoryTypeSelection,
    MemoryModes, MemoryTypeSpec, FrameworkRefPorts, NODE_NAME_FIELDS, NodeNames, OptionKeys, OpTypes, ReuseKind, ReuseRule, SizeRule, TransOp, TransSupport, VarKeyForm,
    VarPolicy)

SCHEMA_VERSION = 1
_RULE_ID = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*/[a-z0-9]+(-[a-z0-9]+)*$")
_MISSING = object()


class _Map(Reader):
    """schema.Reader (so messages read as every pack error does) with the value shapes
    variables.yaml uses: a key without a default is required."""

    def __init__(self, value, what: str, errors: Collector, loc: Loc):
        super().__init__(value, what, errors, loc_of(value, loc))

    def _get(self, key: str, typ, default):
        return self.get(key, typ, None if default is _MISSING else default, required=default is _MISSING)

    def _bad(self, key: str, message: str, hint: str = "") -> None:
        self.errors.error(self.value_loc(key), f"{self.what}: '{key}' {message}", hint)

    def int(self, key: str, default=_MISSING, minimum: int = 0) -> int:
        v = self._get(key, int, default)
        if v is None:
            return 0
        if v < minimum:
            self._bad(key, f"must be >= {minimum}")
        return v

    def bool(self, key: str, default=_MISSING) -> bool:
        return bool(self._get(key, bool, default))

    def str(self, key: str, default=_MISSING) -> str:
        v = self._get(key, str, default)
        if key in self.map and isinstance(self.map[key], str) and not v:
            self._bad(key, "must be a non-empty string")
        return str(v) if v else ""

    def strs(self, key: str, default=_MISSING) -> tuple[str, ...]:
        v = self._get(key, (str, list), default)
        if v is None:
            return ()
        if isinstance(v, str):
            return (str(v),)
        if not all(isinstance(x, str) and x for x in v):
            self._bad(key, "must be a list of names", "write [A, B, C]")
            return ()
        return tuple(str(x) for x in v)

    def pair(self, key: str) -> tuple[int, int]:
        v = self._get(key, list, _MISSING)
        if v is None:
            return (0, 1)
        if len(v) != 2 or not all(isinstance(x, int) and not isinstance(x, bool) for x in v) or v[1] <= 0:
            self._bad(key, "must be [numerator, denominator]", "write e.g. [26, 32]")
            return (0, 1)
        return (v[0], v[1])

    def sub(self, key: str, default=_MISSING) -> "_Map":
        return _Map(self._get(key, dict, default), key if self.what == TOP else f"{self.what}.{key}",
                    self.errors, self.value_loc(key))

    def items(self, key: str) -> list[tuple[object, Loc]]:
        v = self._get(key, list, _MISSING)
        if v is None:
            return []
        return list(zip(v, getattr(v, "item_locs", [self.value_loc(key)] * len(v))))

    def enum(self, key: str, cls: type[Enum], default=_MISSING):
        v = self._get(key, str, default)
        choices = [m.value for m in cls]
        if v not in choices:
            if v is not None:
                self.errors.error(self.value_loc(key), f"{self.what}: unknown {key} '{v}'",
                                  did_you_mean(str(v), choices, key))
            return next(iter(cls))
        return cls(v)


TOP = "the policy"


def build_policy(doc, errors: Collector) -> VarPolicy:
    top = _Map(doc, TOP, errors, Loc("variables.yaml"))
    version = top.int("schema_version")
    if top.ok and version != SCHEMA_VERSION:
        errors.error(top.value_loc("schema_version"), f"unsupported schema_version {version}",
                     f"this engine reads schema_version {SCHEMA_VERSION}")
    op_types = _op_types(top.sub("op_types"))
    attrs = _attrs(top.sub("attrs"))
    var_key = _var_key(top, errors)
    memory = _memory(top.sub("memory"))
    mem_types = _memory_types(top.sub("memory_types"), errors)
    selection = _selection(top.sub("memory_type_selection"), mem_types, errors)
    size = top.sub("size_rule")
    size_rule = SizeRule(size.int("round", minimum=1), size.int("default_padding"),
                         size.str("padding_option"), size.int("zero_size"), size.loc)
    size.done()
    reuse = _reuse_rules(top, errors)
    opts = top.sub("options")
    options = OptionKeys(opts.str("evaluate_mode"), opts.str("huge_page"), opts.str("rdma_pool_size"),
                         opts.str("host_memory_size"), opts.loc)
    opts.done()
    fusion = _fusion(top.sub("format_fusion"), errors)
    names = _node_names(top.sub("node_names"), errors)
    framework = _framework_ref_ports(top.sub("framework_ref_ports"), errors)
    batch_postfix = top.str("batch_name_postfix")
    modes = _memory_modes(top.sub("memory_modes"), errors) if "memory_modes" in top.map else None
    from engine.varmgr.extpolicy import build_external        # the `external:` block (FileConstant, ...)
    external = build_external(top.sub("external"), errors) if "external" in top.map else None
    top.done()
    return VarPolicy(top.loc.file, version, op_types, attrs, var_key, memory, mem_types,
                     selection, size_rule, reuse, options, fusion, names, framework, batch_postfix, modes,
                     external)


_FINAL_KEYS = ("both", "static", "dynamic", "none")


def _memory_modes(m: _Map, errors: Collector) -> MemoryModes:
    """`memory_modes:` (the static memory policy, 1G huge pages and page sizes)."""
    final = m.sub("final")
    finals = tuple(final.str(k) for k in _FINAL_KEYS)
    final.done()
    sizes = {k: m.int(k, minimum=1) for k in ("page_size", "huge_page_size", "dynamic_page_size",
                                               "device_memory_default")}
    for k in ("page_size", "huge_page_size", "dynamic_page_size"):
        v = sizes[k]
        if v & (v - 1):
            errors.error(m.value_loc(k), f"memory_modes.{k} {v} is not a power of two",
                         "page sizes are 2^n bytes, e.g. 2097152")
    modes = MemoryModes(m.str("policy_option"), m.str("policy_env"), frozenset(m.strs("static_extend")),
                        frozenset(m.strs("dynamic_extend")), finals, frozenset(m.strs("huge_page_only")),
                        frozenset(m.strs("huge_page_first")), sizes["page_size"], sizes["huge_page_size"],
                        sizes["dynamic_page_size"], sizes["device_memory_default"],
                        m.str("huge_pages_option"), m.loc)
    m.done()
    both = modes.huge_page_only & modes.huge_page_first
    if both:
        errors.error(m.value_loc("huge_page_first"), f"memory_modes: '{sorted(both)[0]}' is both "
                     "huge_page_only and huge_page_first", "give each option value one meaning")
    return modes


def _framework_ref_ports(m: _Map, errors: Collector) -> tuple[FrameworkRefPorts, ...]:
    """`{OriginalType: {input_index: [output_index, ...]}}`."""
    out = []
    for name in list(m.map):
        entry = m.sub(str(name))
        ports = []
        for key, value in entry.map.items():
            entry.used.add(key)
            if isinstance(key, bool) or not isinstance(key, int) or key < 0:
                errors.error(entry.key_loc(key), f"framework_ref_ports.{name}: input index '{key}' must be "
                             "an integer >= 0", "write e.g. {0: [0, 1]}")
            elif (not isinstance(value, list) or not value or
                  not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in value)):
                errors.error(entry.value_loc(key), f"framework_ref_ports.{name}: the outputs of input {key} "
                             "must be a non-empty list of indexes", "write e.g. [0, 1]")
            else:
                ports.append((key, tuple(value)))
        entry.done()
        out.append(FrameworkRefPorts(str(name), tuple(ports), m.key_loc(name)))
    return tuple(out)


def _node_names(m: _Map, errors: Collector) -> NodeNames:
    values = {}
    for name, allowed in NODE_NAME_FIELDS.items():
        values[name] = m.str(name)
        _placeholders(values[name], m.value_loc(name), allowed, errors)
    m.done()
    return NodeNames(**values, loc=m.loc)


_SINGLE_TYPES = ("init_flag", "ref_identity", "identity")
_OPTIONAL_TYPES = ("available_memory",)        # unset: the placed types


def _op_types(m: _Map) -> OpTypes:
    names = [f for f in OpTypes.__dataclass_fields__ if f != "loc"]
    values = {f: frozenset(m.strs(f, default=None) if f in _OPTIONAL_TYPES else m.strs(f)) for f in names}
    for f in _SINGLE_TYPES:
        if m.ok and f in m.map and len(values[f]) != 1:
            m.errors.error(m.value_loc(f), f"op_types.{f} names the one type a pass creates",
                           "give exactly one type, e.g. [Identity]")
    m.done()
    return OpTypes(**values, loc=m.loc)


def _attrs(m: _Map) -> AttrNames:
    values = {}
    for f in AttrNames.__dataclass_fields__:
        if f == "loc":
            continue
        values[f] = m.strs(f) if f == "file_path" else m.str(f)
    m.done()
    return AttrNames(**values, loc=m.loc)


def _var_key(top: _Map, errors: Collector) -> VarKeyForm:
    text = top.str("var_key")
    loc = top.value_loc("var_key")
    fields = _placeholders(text, loc, {"name", "format", "dtype"}, errors)
    if text and "name" not in fields:
        errors.error(loc, "var_key must contain {name}", "write e.g. \"{name}{format}_{dtype}\"")
    return VarKeyForm(text, loc)


def _placeholders(text: str, loc: Loc, allowed: set[str], errors: Collector) -> set[str]:
    found: set[str] = set()
    try:
        parsed = list(string.Formatter().parse(text))
    except ValueError as exc:
        errors.error(loc, f"malformed template '{text}': {exc}", "balance the braces")
        return found
    for _, field, spec, conv in parsed:
        if field is None:
            continue
        if field not in allowed or spec or conv:
            errors.error(loc, f"unknown placeholder '{{{field}}}' in '{text}'",
                         did_you_mean(field, allowed, "placeholder"))
        found.add(field)
    return found


def _memory(m: _Map) -> MemoryLimits:
    ints = ["align", "guard_units", "logic_base_default", "logic_base_session",
            "graph_mem_max_default", "var_mem_max_default", "use_max_default", "max_memory_size",
            "max_version"]
    v = {k: m.int(k, minimum=1 if k == "align" else 0) for k in ints}
    limits = MemoryLimits(**v, graph_ratio=m.pair("graph_ratio"), var_ratio=m.pair("var_ratio"),
                          use_max_ratio=m.pair("use_max_ratio"),
                          capacity_check=m.bool("capacity_check"), loc=m.loc)
    m.done()
    return limits


def _memory_types(m: _Map, errors: Collector) -> tuple[MemoryTypeSpec, ...]:
    out: list[MemoryTypeSpec] = []
    seen_rt: dict[int, MemoryTypeSpec] = {}
    for name in list(m.map):
        entry = m.sub(str(name))
        spec = MemoryTypeSpec(str(name), entry.int("rt"), entry.enum("allocator", Allocator),
                              m.key_loc(name))
        entry.done()
        if spec.rt in seen_rt:
            errors.error(spec.loc, f"memory type {name} has rt {spec.rt}, already used",
                         f"{seen_rt[spec.rt].name} at {seen_rt[spec.rt].loc} has it")
        seen_rt[spec.rt] = spec
        out.append(spec)
    for need in (Allocator.OFFSET, Allocator.NONE):
        if m.ok and not any(s.allocator is need for s in out):
            errors.error(m.loc, f"memory_types needs a type with allocator '{need.value}'",
                         "GE's HBM uses 'offset'; the unknown-address answer uses 'none'")
    return tuple(out)


def _selection(m: _Map, types: tuple[MemoryTypeSpec, ...], errors: Collector) -> MemoryTypeSelection:
    names = [s.name for s in types]
    attr = m.str("attr")
    default = m.str("default")
    if default and default not in names:
        errors.error(m.value_loc("default"), f"unknown memory type '{default}'", did_you_mean(default, names))
    vals = m.sub("values")
    pairs = []
    for key, value in vals.map.items():
        vals.used.add(key)
        loc = vals.value_loc(key)
        if isinstance(key, bool) or not isinstance(key, int):
            errors.error(vals.key_loc(key), f"attribute value '{key}' must be an integer", "")
        elif value not in names:
            errors.error(loc, f"unknown memory type '{value}'", did_you_mean(str(value), names))
        else:
            pairs.append((key, str(value)))
    m.done()
    return MemoryTypeSelection(attr, tuple(pairs), default, m.loc)


def _reuse_rules(top: _Map, errors: Collector) -> tuple[ReuseRule, ...]:
    rules: list[ReuseRule] = []
    for item, loc in top.items("reuse_rules"):
        m = _Map(item, "reuse rule", errors, loc)
        rid = m.str("id")
        kind = m.enum("kind", ReuseKind)
        op_types = m.strs("op_types", default=None)
        candidates = m.strs("candidate_types", default=None)
        key = m.get("key", str, "")
        m.done()
        if rid and not _RULE_ID.match(rid):
            errors.error(m.value_loc("id"), f"rule id '{rid}' is not namespaced kebab-case",
                         "write e.g. var/size-compatible")
        for other in rules:
            if other.id == rid:
                errors.error(m.value_loc("id"), f"reuse rule '{rid}' at {m.value_loc('id')} already registered "
                             f"at {other.loc}", "give each rule its own id")
            elif other.kind is kind:
                errors.error(m.value_loc("kind"), f"a second '{kind.value}' rule ('{rid}')",
                             f"'{other.id}' at {other.loc} already has this kind")
        if kind is ReuseKind.FILE_SLICE:
            _placeholders(str(key), m.value_loc("key"), {"path", "offset"}, errors)
            if not key:
                errors.error(m.loc, "a file_slice rule needs key", "write key: \"{path}:{offset}\"")
        rules.append(ReuseRule(rid, kind, op_types, candidates, str(key), m.value_loc("id")))
    return tuple(rules)


def _fusion(m: _Map, errors: Collector) -> FormatFusion:
    ops: list[TransOp] = []
    for item, loc in m.items("trans_ops"):
        e = _Map(item, "trans op", errors, loc)
        op = TransOp(e.str("type"), e.int("data_index"), e.enum("support", TransSupport), loc)
        e.done()
        if any(o.type == op.type for o in ops):
            errors.error(loc, f"trans op '{op.type}' listed twice", "keep one entry per type")
        ops.append(op)
    transfers = _pairs(m, "format_transfers", t.parse_format, t.FORMAT_VALUE, errors)
    casts = _pairs(m, "cast_pairs", t.parse_dtype, ["DT_" + n for n in t.DTYPE_VALUE], errors)
    fusion = FormatFusion(m.int("max_var_change_times"), m.str("reformat_type"), tuple(ops),
                          frozenset(m.strs("renew_only_types")), frozenset(transfers),
                          frozenset(casts), m.loc)
    m.done()
    return fusion


def _pairs(m: _Map, key: str, parse, choices, errors: Collector) -> set[tuple[int, int]]:
    out: set[tuple[int, int]] = set()
    for item, loc in m.items(key):
        if not isinstance(item, list) or len(item) != 2:
            errors.error(loc, f"{key} entries are [from, to] pairs", "write e.g. [NCHW, FRACTAL_Z]")
            continue
        vals = []
        for word, wloc in zip(item, getattr(item, "item_locs", [loc, loc])):
            v = parse(str(word))
            if v is None:
                errors.error(wloc, f"unknown name '{word}' in {key}", did_you_mean(str(word), choices))
            vals.append(v)
        if None not in vals:
            out.add((vals[0], vals[1]))
    return out


def default_policy_path() -> Path:
    return default_pack_dir() / "variables.yaml"


_CACHE: dict[str, VarPolicy] = {}


def default_policy() -> VarPolicy:
    path = str(default_policy_path())
    if path not in _CACHE:
        _CACHE[path] = load_policy(path)
    return _CACHE[path]


def load_policy(path) -> VarPolicy:
    doc = load_yaml(path)
    errors = Collector()
    policy = build_policy(doc, errors)
    errors.check()
    return policy
