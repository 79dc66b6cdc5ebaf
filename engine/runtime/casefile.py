"""Reading the CASE form of `runtime cond|events|io-reuse` (JSON or YAML, ge-runtime.md):
strict, located (`file:line:col`), all problems reported together."""
from __future__ import annotations

import re
from typing import Any

from engine.core.errors import Collector, InputError, Loc, Problem, did_you_mean
from engine.core.schema import Reader
from engine.core.yamlloc import load_yaml
from engine.runtime.model import BranchSpec, CaseSpec, CondSpec, Feed, NodeSpec, Ref

_REF = re.compile(r"^(?P<name>.+?)(?::(?P<idx>-?[0-9]+))?$")


def read_case_file(path: str):
    """The located top-level mapping of a CASE file. Note [JSON as YAML]: a JSON file is read
    by the YAML reader (for locations); JSON allows tabs between tokens, YAML does not, and a
    tab can stand only there (one in a string is escaped), so each becomes a space."""
    text = None
    if str(path).lower().endswith(".json"):
        try:
            with open(path, encoding="utf-8") as fh:
                text = fh.read().replace("\t", " ")
        except (OSError, UnicodeDecodeError):
            text = None                      # load_yaml reports it, located
    doc = load_yaml(path, text)
    if not isinstance(doc, dict):
        raise InputError(Problem(getattr(doc, "loc", Loc(str(path))), "a case must be a mapping",
                                 "write `key: value` lines (or a JSON object)"))
    return doc


def parse_ref(text: Any, loc: Loc, errors: Collector) -> Ref | None:
    if not isinstance(text, str) or not text:
        errors.error(loc, f"expected a node reference 'name' or 'name:out', got {text!r}", "write e.g. foo or \"bar:1\"")
        return None
    m = _REF.match(text)
    idx = int(m.group("idx")) if m.group("idx") is not None else 0
    if idx < 0:
        errors.error(loc, f"'{text}': a data output index is not negative", "outputs are numbered from 0")
        return None
    return Ref(m.group("name"), idx, getattr(text, "loc", loc))


def _refs(value: Any, what: str, errors: Collector, loc: Loc) -> tuple[Ref, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        errors.error(getattr(value, "loc", loc), f"{what} must be a list of node references", "write [a, \"b:1\"]")
        return ()
    out = []
    for i, item in enumerate(value):
        r = parse_ref(item, value.item_locs[i], errors)
        if r is not None:
            out.append(r)
    return tuple(out)


class CondReader:
    def __init__(self, rt, errors: Collector):
        self.rt = rt
        self.errors = errors
        self.names: dict[str, Loc] = {}

    def placement(self, r: Reader, key: str) -> str:
        p = r.get(key, str, self.rt.default_placement)
        if p not in self.rt.placements:
            self.errors.error(r.value_loc(key), f"unknown placement '{p}'", did_you_mean(str(p), self.rt.placements, "placements"))
        return str(p)

    def name(self, name: str, loc: Loc) -> None:
        if name in self.names:
            self.errors.error(loc, f"'{name}' is defined twice", f"first defined at {self.names[name]}; names are unique in a case")
        self.names[name] = loc

    def case(self, doc) -> CaseSpec:
        r = Reader(doc, "case", self.errors, doc.loc)
        op = r.get("op", str, "", required=True)
        feeds_map = r.get("feeds", dict, {})
        root_net = r.get("root_netoutput", bool, True)
        fr = Reader(feeds_map, "feeds", self.errors, r.loc)
        feeds = []
        for name in list(fr.map):
            v = fr.get(name, (dict, type(None)), None)
            fe = Reader(v if v is not None else {}, f"feed '{name}'", self.errors, fr.key_loc(name))
            guarder = fe.get("guarder", str)
            placement = self.placement(fe, "placement")
            fe.done()
            self.name(str(name), fr.key_loc(name))
            feeds.append(Feed(str(name), str(guarder) if guarder else None, placement, fr.key_loc(name)))
        fr.done()
        cond = self.cond(r, str(op), r.value_loc("op"), r.get("name", str))
        r.done()
        return CaseSpec(tuple(feeds), cond, bool(root_net), doc.loc)

    def kind(self, op: str, loc: Loc) -> str:
        if op in self.rt.if_ops:
            return "if"
        if op in self.rt.case_ops:
            return "case"
        self.errors.error(loc, f"'{op}' is not an If or Case type", did_you_mean(op, self.rt.if_ops | self.rt.case_ops, "types"))
        return "if"

    def cond(self, r: Reader, op: str, op_loc: Loc, name: str | None) -> CondSpec:
        kind = self.kind(op, op_loc)
        cond_text = r.get("cond", (str, type(None)), None, required=True)
        cond = parse_ref(cond_text, r.value_loc("cond"), self.errors) if cond_text is not None else None
        blist = r.get("branches", list, [], required=True)
        placement = self.placement(r, "placement") if "placement" in r.map else ""
        if r.ok and kind == "if" and isinstance(blist, list) and len(blist) != 2:
            self.errors.error(r.value_loc("branches"), f"an If has two branches (then, else), not {len(blist)}",
                              "write null for a missing builder")
        branches = []
        seen: dict[str, Loc] = {}
        for i, item in enumerate(blist if isinstance(blist, list) else []):
            if item is None:
                branches.append(None)
                continue
            b = self.branch(item, blist.item_locs[i])
            if b.name is not None:
                if b.name in seen:
                    self.errors.error(b.loc, f"branch name '{b.name}' is used twice", f"first at {seen[b.name]}")
                seen[b.name] = b.loc
            branches.append(b)
        return CondSpec(str(name) if name else None, op, kind, cond, tuple(branches), op_loc, placement=placement)

    def branch(self, value: Any, loc: Loc) -> BranchSpec:
        r = Reader(value, "branch", self.errors, loc)
        name = r.get("name", str)
        nodes_map = r.get("nodes", dict, {})
        outputs = _refs(r.get("outputs", list, []), "branch outputs", self.errors, r.loc)
        r.done()
        nr = Reader(nodes_map, "nodes", self.errors, r.loc)
        nodes = []
        for nname in list(nr.map):
            v = nr.get(nname, dict, {})
            nodes.append(self.node(str(nname), v, nr.key_loc(nname)))
        nr.done()
        return BranchSpec(str(name) if name else None, tuple(nodes), outputs, getattr(value, "loc", loc))

    def node(self, name: str, value: Any, loc: Loc) -> NodeSpec:
        self.name(name, loc)
        r = Reader(value, f"node '{name}'", self.errors, loc)
        type_ = str(r.get("type", str, "", required=True))
        if type_ in self.rt.if_ops | self.rt.case_ops and "branches" in r.map:
            c = self.cond(r, type_, r.value_loc("type"), name)
            r.done()
            return NodeSpec(name, type_, (), 0, (), c.placement, {}, (), loc, cond=c)
        inputs = _refs(r.get("inputs", list, []), f"node '{name}': inputs", self.errors, r.loc)
        n_out = r.get("outputs", int, 1)
        if n_out < 0:
            self.errors.error(r.value_loc("outputs"), f"node '{name}': outputs must be 0 or more", "")
        guarder = r.get("guarder", str)
        if guarder and n_out < 1:
            self.errors.error(r.value_loc("guarder"), f"node '{name}' has no output to guard", "give it `outputs: 1`")
        placement = self.placement(r, "placement")
        attrs = r.get("attrs", dict, {})
        ctrl = _refs(r.get("ctrl_inputs", list, []), f"node '{name}': ctrl_inputs", self.errors, r.loc)
        r.done()
        return NodeSpec(name, type_, inputs, max(int(n_out), 0), ((0, str(guarder)),) if guarder else (), placement,
                        {str(k): _plain(v) for k, v in attrs.items()}, ctrl, loc)


def _plain(v: Any) -> Any:
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if isinstance(v, str):
        return str(v)
    return v


def read_cond_case(path: str, rt) -> CaseSpec:
    doc = read_case_file(path)
    errors = Collector()
    case = CondReader(rt, errors).case(doc)
    errors.check()
    return case
