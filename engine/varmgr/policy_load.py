"""Strict reading of variables.yaml into the dataclasses of `policy`."""
from __future__ import annotations

import re
import string
from enum import Enum

from engine.core.errors import Collector, Loc, did_you_mean
from pathlib import Path

from engine.core.resources import default_pack_dir
from engine.core.yamlloc import load_yaml, loc_of
from engine.varmgr import getypes as t
from engine.varmgr.policy import (AttrNames, Allocator, FormatFusion, MemoryLimits, MemoryTypeSelection,
    MemoryTypeSpec, OptionKeys, OpTypes, ReuseKind, ReuseRule, SizeRule, TransOp, TransSupport, VarKeyForm,
    VarPolicy)

SCHEMA_VERSION = 1
_RULE_ID = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*/[a-z0-9]+(-[a-z0-9]+)*$")
_MISSING = object()


class _Map:
    """A located mapping being read; `done()` reports keys nobody asked for."""

    def __init__(self, value, what: str, errors: Collector, loc: Loc):
        self.what, self.errors = what, errors
        self.ok = isinstance(value, dict)
        self.loc = loc_of(value, loc)
        if not self.ok and value is not None:
            errors.error(self.loc, f"{what} must be a mapping", "write `key: value` lines under it")
        self.m = value if self.ok else {}
        self.used: set[str] = set()

    def vloc(self, key: str) -> Loc:
        return getattr(self.m, "value_locs", {}).get(key, self.loc)

    def raw(self, key: str, default=_MISSING):
        self.used.add(key)
        if key not in self.m:
            if default is _MISSING and self.ok:
                self.errors.error(self.loc, f"{self.what}: missing key '{key}'", f"add `{key}:`")
            return None if default is _MISSING else default
        return self.m[key]

    def int(self, key: str, default=_MISSING, minimum: int = 0) -> int:
        v = self.raw(key, default)
        if v is None:
            return 0
        if isinstance(v, bool) or not isinstance(v, int):
            self.errors.error(self.vloc(key), f"{self.what}.{key} must be an integer, not {v!r}",
                              "write a plain number, e.g. 512")
            return 0
        if v < minimum:
            self.errors.error(self.vloc(key), f"{self.what}.{key} must be >= {minimum}", "")
        return v

    def bool(self, key: str, default=_MISSING) -> bool:
        v = self.raw(key, default)
        if not isinstance(v, bool):
            self.errors.error(self.vloc(key), f"{self.what}.{key} must be true or false", "")
            return False
        return v

    def str(self, key: str, default=_MISSING) -> str:
        v = self.raw(key, default)
        if not isinstance(v, str) or not v:
            self.errors.error(self.vloc(key), f"{self.what}.{key} must be a non-empty string", "")
            return ""
        return str(v)

    def strs(self, key: str, default=_MISSING) -> tuple[str, ...]:
        v = self.raw(key, default)
        if v is None:
            return ()
        if isinstance(v, str):
            return (str(v),)
        if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
            self.errors.error(self.vloc(key), f"{self.what}.{key} must be a list of names",
                              "write [A, B, C]")
            return ()
        return tuple(str(x) for x in v)

    def pair(self, key: str) -> tuple[int, int]:
        v = self.raw(key)
        if (not isinstance(v, list) or len(v) != 2 or
                not all(isinstance(x, int) and not isinstance(x, bool) for x in v) or v[1] <= 0):
            self.errors.error(self.vloc(key), f"{self.what}.{key} must be [numerator, denominator]",
                              "write e.g. [26, 32]")
            return (0, 1)
        return (v[0], v[1])

    def sub(self, key: str, default=_MISSING) -> "_Map":
        return _Map(self.raw(key, default), f"{self.what}.{key}" if self.what else key,
                    self.errors, self.vloc(key))

    def items(self, key: str) -> list[tuple[object, Loc]]:
        v = self.raw(key)
        if v is None:
            return []
        if not isinstance(v, list):
            self.errors.error(self.vloc(key), f"{self.what}.{key} must be a list", "")
            return []
        return list(zip(v, getattr(v, "item_locs", [self.vloc(key)] * len(v))))

    def enum(self, key: str, cls: type[Enum], default=_MISSING):
        v = self.raw(key, default)
        choices = [m.value for m in cls]
        if v not in choices:
            self.errors.error(self.vloc(key), f"unknown {key} '{v}' in {self.what}",
                              did_you_mean(str(v), choices, key))
            return next(iter(cls))
        return cls(v)

    def done(self) -> None:
        for key in self.m:
            if key not in self.used:
                self.errors.error(self.m.key_locs.get(key, self.loc),
                                  f"unknown key '{key}' in {self.what or 'the policy'}",
                                  did_you_mean(str(key), self.used, "key"))


def build_policy(doc, errors: Collector) -> VarPolicy:
    top = _Map(doc, "", errors, loc_of(doc, Loc("variables.yaml")))
    version = top.int("schema_version")
    if top.ok and version != SCHEMA_VERSION:
        errors.error(top.vloc("schema_version"), f"unsupported schema_version {version}",
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
    options = OptionKeys(opts.str("evaluate_mode"), opts.str("huge_page"), opts.loc)
    opts.done()
    fusion = _fusion(top.sub("format_fusion"), errors)
    top.done()
    return VarPolicy(top.loc.file, version, op_types, attrs, var_key, memory, mem_types,
                     selection, size_rule, reuse, options, fusion)


_SINGLE_TYPES = ("init_flag", "ref_identity", "identity")


def _op_types(m: _Map) -> OpTypes:
    names = [f for f in OpTypes.__dataclass_fields__ if f != "loc"]
    values = {f: frozenset(m.strs(f)) for f in names}
    for f in _SINGLE_TYPES:
        if m.ok and f in m.m and len(values[f]) != 1:
            m.errors.error(m.vloc(f), f"op_types.{f} names the one type a pass creates",
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
    loc = top.vloc("var_key")
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
    for name in list(m.m):
        entry = m.sub(str(name))
        spec = MemoryTypeSpec(str(name), entry.int("rt"), entry.enum("allocator", Allocator),
                              m.m.key_locs[name])
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
        errors.error(m.vloc("default"), f"unknown memory type '{default}'", did_you_mean(default, names))
    vals = m.sub("values")
    pairs = []
    for key, value in vals.m.items():
        vals.used.add(key)
        loc = vals.m.value_locs[key]
        if isinstance(key, bool) or not isinstance(key, int):
            errors.error(vals.m.key_locs[key], f"attribute value '{key}' must be an integer", "")
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
        key = m.raw("key", default="")
        m.done()
        if rid and not _RULE_ID.match(rid):
            errors.error(m.vloc("id"), f"rule id '{rid}' is not namespaced kebab-case",
                         "write e.g. var/size-compatible")
        for other in rules:
            if other.id == rid:
                errors.error(m.vloc("id"), f"reuse rule '{rid}' at {m.vloc('id')} already registered "
                             f"at {other.loc}", "give each rule its own id")
            elif other.kind is kind:
                errors.error(m.vloc("kind"), f"a second '{kind.value}' rule ('{rid}')",
                             f"'{other.id}' at {other.loc} already has this kind")
        if kind is ReuseKind.FILE_SLICE:
            _placeholders(str(key), m.vloc("key"), {"path", "offset"}, errors)
            if not key:
                errors.error(m.loc, "a file_slice rule needs key", "write key: \"{path}:{offset}\"")
        rules.append(ReuseRule(rid, kind, op_types, candidates, str(key), m.vloc("id")))
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
