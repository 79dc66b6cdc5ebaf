"""Explanations of inserted nodes: the decision path in plain words.

`explain(record, evidence)` turns one insertion record (Insertion.to_json()) into
steps — a sentence, the rule that decided it (id, file:line) and the facts behind
it. Known `reason` keys become sentences (SENTENCES); every key stays visible as a
raw fact in the report, so a new pass renders without changes here. `Evidence`
adds facts read from the final graph and the pack: the attributes, op classes and
options a cited rule tests. `render_card` prints a card for the terminal.
"""
from __future__ import annotations

from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any, Callable

from engine.dsl.ast import Call, Const, Field, IsClass, Var, dsl_literal, walk
from engine.pack.model import Rule
from engine.core.attrs import attr_value, node_attr
from engine.core.errors import Cite, Loc

MAX_LISTED = 8
MAX_FACT_ITEMS = 4      # items of a list-valued fact a step shows


def show(value: Any) -> str:
    """A fact value as the DSL writes it (`dsl_literal`), but strings bare, a missing
    value `absent` and long lists cut."""
    if value is None:
        return "absent"
    if isinstance(value, (list, tuple)):
        items = [show(v) for v in value[:MAX_LISTED]]
        return "[" + ", ".join(items) + (", …" if len(value) > MAX_LISTED else "") + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {show(v)}" for k, v in value.items()) + "}"
    return value if isinstance(value, str) else dsl_literal(value)


def step(text: str, rule: str = "", loc: str = "", facts: list | None = None) -> dict:
    return {"text": text, "rule": rule, "loc": loc, "facts": facts or []}


def cited(text: str, cite: Any, facts: list | None = None) -> dict:
    """A step citing a pack item (a Cite among the record's facts), or uncited."""
    if isinstance(cite, Cite):
        return step(text, cite.rule_id, str(cite.loc), facts)
    return step(text)


# ---- facts from the graph and the pack ----------------------------------------------
class Evidence:
    """What a cited rule looked at, read back from the final graph (None: no graph)."""

    def __init__(self, ctx=None):
        self.ctx = ctx
        self.rules: dict[Loc, Rule] = {}
        self.probes: dict[Loc, list] = {}       # rule loc → the sub-expressions worth reading back
        if ctx is not None:
            for rule in _pack_rules(ctx.pack):
                self.rules[rule.loc] = rule

    def facts(self, graph: str, ref: str, is_input: bool, cite: Cite) -> list[list[str]]:
        loc = cite.loc
        rule = self.rules.get(loc)
        if rule is None or self.ctx is None:
            return []
        name, _, idx = ref.rpartition(":")
        g = self.ctx.model.graphs.get(graph)
        node = g.find(name) if g is not None else None
        if node is None or not idx.isdigit():
            return []
        anchors = node.ins if is_input else node.outs
        anchor = anchors[int(idx)] if int(idx) < len(anchors) else None
        if loc not in self.probes:
            self.probes[loc] = [e for e in (*walk(rule.when), *walk(rule.value))
                                if isinstance(e, (IsClass, Field, Call))]
        out: list[list[str]] = []
        for e in self.probes[loc]:
            fact = self._fact(e, node, anchor)
            if fact is not None and fact not in out:
                out.append(fact)
        return out

    def _fact(self, e, node, anchor) -> list[str] | None:
        if isinstance(e, IsClass) and _is_var(e.subject, "node"):
            cls = self.ctx.pack.classes.get(e.cls)
            if cls is None:
                return None
            member = node.type in cls.types
            return [f"op class {e.cls}", f"{node.type} {'is' if member else 'is not'} in {e.cls} "
                                         f"({cls.loc.file}:{cls.loc.line})"]
        if isinstance(e, Field) and e.name == "type" and _is_var(e.obj, "node"):
            return ["type", node.type]
        if not isinstance(e, Call) or not e.args:
            return None
        last = e.args[-1]
        key = last.value if isinstance(last, Const) else \
            self.ctx.pack.constants().get(last.name) if isinstance(last, Var) else None   # PARENT_NODE_INDEX
        if not isinstance(key, str):
            return None
        if e.fn in ("attr", "has_attr", "attr_true") and _is_var(e.args[0], "node"):
            return [key, show(node_attr(node, key))]
        if e.fn == "desc_attr" and _is_var(e.args[0], "anchor") and anchor is not None:
            d = anchor.desc
            return [f"tensor attr {key}", show(attr_value(d.attr[key]) if d is not None and key in d.attr else None)]
        if e.fn in ("option", "option_true"):
            if key in self.ctx.options:
                return [f"option {key}", show(self.ctx.options[key])]
            value = self.ctx.pack.option({}, key)
            return [f"option {key}", "unset" if value is None else f"{show(value)} (default)"]
        return None


def _is_var(e, name: str) -> bool:
    return isinstance(e, Var) and e.name == name


def _pack_rules(pack) -> list[Rule]:
    """Every first-match rule of every loaded algorithm section, wherever it is kept."""
    out = []
    for cfg in pack.configs.values():
        if not is_dataclass(cfg):
            continue
        for f in fields(cfg):
            value = getattr(cfg, f.name)
            if isinstance(value, (list, tuple)):
                out += [r for r in value if isinstance(r, Rule)]
    return out


# ---- sentences for known reason keys ------------------------------------------------
class _Reader:
    """The record being explained, and which reason keys have been told."""

    def __init__(self, record: dict, evidence: Evidence, reason: dict | None = None):
        self.r = record
        self.reason = (record.get("reason") or {}) if reason is None else reason
        self.ev = evidence
        self.used: set[str] = set()

    def get(self, key: str, default: Any = None) -> Any:
        if key in self.reason:
            self.used.add(key)
            return self.reason[key]
        return default

    def has(self, *keys: str) -> bool:
        reason = self.reason            # asked ~17 times a card: a loop, not all() over a generator
        for k in keys:
            if k not in reason:
                return False
        return True

    @property
    def producer(self) -> str:
        return self.r.get("producer") or "the producer"

    @property
    def consumers(self) -> str:
        cs = self.r.get("consumers") or []
        return ", ".join(cs) if cs else "the consumer"

    def annotate(self, value: Any) -> str:
        """A fact as text; an anchor or node of the graph gets its op type: `x:0 (Variable)`."""
        text = show(value)
        if isinstance(value, str) and self.ev.ctx is not None:
            g = self.ev.ctx.model.graphs.get(self.r.get("graph", ""))
            name = value.rpartition(":")[0] if value.rpartition(":")[2].lstrip("-").isdigit() else value
            node = g.find(name) if g is not None and name else None
            if node is not None:
                return f"{text} ({node.type})"
        return text

    def typed(self, subject: str, rw: str, why: Any, is_input: bool) -> dict:
        """"X is T", cited by the rule that typed it (or the walk's own words)."""
        if not isinstance(why, Cite):
            return step(f"{subject} is {rw}" + (f": {why}" if why else ""))
        ref = subject.split(", ")[0]
        facts = self.ev.facts(self.r.get("graph", ""), ref, is_input, why)
        return cited(f"{subject} is {rw}", why, facts)


def _why(x: _Reader) -> list[dict]:
    """The rule's own words, cited by the card's rule, with the facts it recorded that no
    other step told (a rewrite step's name, its `let` values and `reason:`), so every
    pass's card carries its decisive facts. Built last, shown first (see `explain`)."""
    facts = [["step", show(x.get("step"))]] if x.has("step") else []
    for key, value in x.reason.items():
        if key in x.used or key in ("why", "kind", "step") or isinstance(value, Cite):
            continue
        x.used.add(key)
        if isinstance(value, list) and len(value) > MAX_FACT_ITEMS:   # the record keeps them all
            value = value[:MAX_FACT_ITEMS] + [f"… {len(value) - MAX_FACT_ITEMS} more"]
        facts.append([key.replace("_", " "), x.annotate(value)])
    if not x.has("why") and not facts:
        return []
    text = str(x.get("why")) if x.has("why") else f"rule {x.r.get('rule') or '?'} applies"
    return [step(text, x.r.get("rule") or "", x.r.get("rule_loc") or "", facts)]


def _sibling(x: _Reader) -> list[dict]:
    """A reader ordered against the writer by topological id (HcclMemcpyPass's sibling test)."""
    if not x.has("sibling_id", "writer_id"):
        return []
    sid, wid = x.get("sibling_id"), x.get("writer_id")
    sib = x.get("sibling") if x.has("sibling") else "a sibling consumer"
    order = "after" if isinstance(sid, int) and isinstance(wid, int) and sid > wid else "before"
    rel = ">" if order == "after" else "<="
    return [step(f"{x.annotate(sib)} reads the same buffer and runs {order} the writer {x.consumers}: "
                 f"topological id {sid} {rel} {wid}")]


def _writer_chain(x: _Reader) -> list[dict]:
    """The chain of in-place writers from a variable to the one a ref follows."""
    if not x.has("writer_chain"):
        return []
    chain = x.get("writer_chain") or []
    cut = x.get("writer_chain_omitted", 0) if x.has("writer_chain_omitted") else 0
    text = (f"variable {x.get('variable', '?')} is written in place along " + " → ".join(map(str, chain))
            + (f" (+{cut} earlier)" if cut else "") + f"; the new node follows the last writer, "
            f"{x.get('writer', chain[-1] if chain else '?')}")
    if x.has("ref_source"):
        attr = x.get("ref_source_attr") if x.has("ref_source_attr") else ""
        text += f", and names {x.get('ref_source')} as its source" + (f" ({attr})" if attr else "")
    return [step(text, x.r.get("rule") or "", x.r.get("rule_loc") or "")]


def _output(x: _Reader) -> list[dict]:
    if not x.has("output_rw"):
        return []
    return [x.typed(x.producer, x.get("output_rw"), x.get("output_rule", ""), False)]


def _identity(x: _Reader) -> list[dict]:
    if not x.has("identity"):
        return []
    return [step(f"the identity {x.get('identity')} was shared; {x.consumers} reads through it")]


def _input(x: _Reader) -> list[dict]:
    if not x.has("input_rw"):
        return []
    return [x.typed(x.consumers, x.get("input_rw"), x.get("input_rule", ""), True)]


def _cell(x: _Reader) -> list[dict]:
    if not x.has("decision"):
        return []
    cell = x.get("cell", "the decision")
    s = cited(f"{cell} = {x.get('decision')}", x.get("cell_loc"))
    if x.has("matrix_rule"):      # the card names the typing rule; the cell is a step of its own
        s["rule"] = str(x.get("matrix_rule"))
        return [s]
    return [_uncited_id(s)]


def _parent(x: _Reader) -> list[dict]:
    if not x.has("parent"):
        return []
    out = x.get("parent_output")
    return [step(f"the subgraph output feeds {'output ' + str(out) + ' of ' if out is not None else ''}"
                 f"the parent node {x.get('parent')}")]


def _symbol(x: _Reader) -> list[dict]:
    if not x.has("symbol"):
        return []
    anchors = x.get("symbol_anchors") or x.get("anchors") or []
    listed = ", ".join(_anchor_text(a) for a in anchors[:MAX_LISTED]) + (", …" if len(anchors) > MAX_LISTED else "")
    return [step(f"{len(anchors)} anchor(s) share memory symbol {x.get('symbol')}" + (f": {listed}" if listed else ""))]


def _anchor_text(a: Any) -> str:
    if isinstance(a, dict):
        name = a.get("anchor") or a.get("name") or "?"
        rest = {k: v for k, v in a.items() if k not in ("anchor", "name")}
        return f"{name} ({show(rest)[1:-1]})" if rest else str(name)
    return str(a)


def _marked(x: _Reader) -> list[dict]:
    out = []
    for side in ("a", "b"):
        if x.has(side):
            marks = x.get(f"{side}_marks")
            out.append(step(f"{x.get(side)} is marked {show(marks)[1:-1] if isinstance(marks, list) else show(marks)}"
                            if marks is not None else f"{x.get(side)} is one side of the conflicting pair"))
    return out


def _pair(x: _Reader) -> list[dict]:
    if not x.has("pair"):
        return []
    kind = x.get("pair_rule")
    return [_uncited_id(cited(f"the marks {show(x.get('pair'))} conflict" + (f" ({kind})" if kind else ""),
                              x.get("pair_loc")))]


def _checker(x: _Reader) -> list[dict]:
    if not x.has("checker"):
        return []
    text = f"checker {x.get('checker')} picked this anchor to isolate"
    if x.has("verdict"):
        text += f"; verdict: {show(x.get('verdict'))}"
    if x.has("side"):
        text += f"; isolated side: {show(x.get('side'))}"
    c = x.get("checker_loc")
    return [step(text, str(x.reason["checker"]), str(c.loc) if isinstance(c, Cite) else "")]


def _uncited_id(s: dict) -> dict:
    """A table entry's step names its location only (the rule is the card's)."""
    s["rule"] = ""
    return s


def _cited(x: _Reader) -> list[dict]:
    """Any other fact that cites a pack item."""
    out = []
    for key, value in x.reason.items():
        if key not in x.used and isinstance(value, Cite):
            x.used.add(key)
            out.append(cited(f"{key.replace('_', ' ')}: {value.rule_id or value.where}", value))
    return out


# Order matters: the steps read as the decision path, producer before consumer.
SENTENCES: tuple[Callable[[_Reader], list[dict]], ...] = (
    _symbol, _marked, _pair, _checker, _output, _identity, _input, _parent, _sibling, _writer_chain, _cell, _cited)


def explain(record: dict, evidence: Evidence | None = None, reason: dict | None = None) -> list[dict]:
    """Steps for one insertion record; `reason` is the pass's own facts (with their
    Cites), else the record's JSON facts (which cite nothing). The rule's own words
    come first, with the facts no other step told (`_why`)."""
    x = _Reader(record, evidence or Evidence(), reason)
    steps: list[dict] = []
    for sentence in SENTENCES:
        steps += sentence(x)
    return _why(x) + steps


def rejected_steps(alternatives) -> list[dict]:
    """One step per alternative GE had at the insertion's choice point and rejected
    (engine/passes/alternatives.py), cited by its pack entry (whose quoted text says why; the
    record's `alternatives` carry the same as fields), GE's source as a fact."""
    return [step(f"not chosen: {a.does}", a.cite.rule_id, str(a.loc), [["GE source", a.ge]]) for a in alternatives]


def is_rejected_step(record: dict, s: dict) -> bool:
    """Is step `s` of an insertion record one of its rejected alternatives (not its decision path)?"""
    return any(s["rule"] == a["rule"] and s["loc"] == a["rule_loc"] for a in record.get("alternatives", ()))


# ---- rule text ------------------------------------------------------------------------
class RuleTexts:
    """The source text of a cited pack item: exactly the item (a list item with its
    body, a `name: {...}` entry), or for a cell its row with the cell marked."""

    def __init__(self, pack_dir: Path | None = None):
        self.pack_dir = pack_dir
        self.files: dict[str, list[str] | None] = {}

    def get(self, cite: Cite) -> dict | None:
        lines = self._lines(cite.loc.file)
        if lines is None or not 0 < cite.loc.line <= len(lines):
            return None
        start, end = cite.row or (cite.loc, cite.span)
        text, col = _quote(lines, start, end)
        out = {"id": cite.rule_id, "text": text}
        if cite.row is not None:
            out["mark"] = [_offset(text, start, col, cite.loc), _offset(text, start, col, cite.span)]
        return out

    def _lines(self, file: str) -> list[str] | None:
        if file not in self.files:
            path = Path(file)
            if not path.is_file() and self.pack_dir is not None:
                path = self.pack_dir / Path(file).name
            try:
                self.files[file] = path.read_text(encoding="utf-8").splitlines()
            except (OSError, UnicodeDecodeError):
                self.files[file] = None
        return self.files[file]


def _quote(lines: list[str], start: Loc, end: Loc) -> tuple[str, int]:
    """The text from `start` to `end` (exclusive), dedented to where it begins, and
    that column (0-based). A list item keeps its `- `; an item without an end is
    quoted to the end of its line."""
    first = lines[start.line - 1]
    indent = len(first) - len(first.lstrip())
    col = max(start.col - 1, 0)
    if first[indent:col].replace("-", " ").strip() == "":
        col = min(col, indent)
    if (end.line, end.col) <= (start.line, start.col):
        return first[col:].rstrip(), col
    last, cut = (end.line - 1, None) if end.col <= 1 else (end.line, end.col - 1)
    block = lines[start.line - 1:last]
    out = []
    for k, line in enumerate(block):
        if k == len(block) - 1 and cut is not None:
            line = line[:cut]
        if k == 0:
            line = line[col:]
        else:
            line = line[col:] if not line[:col].strip() else line.lstrip()
        out.append(line.rstrip())
    while out and not out[-1]:
        out.pop()
    return "\n".join(out), col


def _offset(text: str, start: Loc, col: int, at: Loc) -> int:
    """Where `at` falls in a quote that begins at `start`, column `col`."""
    rows = text.split("\n")
    k = at.line - start.line
    if k >= len(rows) or (k > 0 and at.col <= 1):       # at the start of a line after it: its end
        k = min(k, len(rows)) - 1
        return sum(len(r) + 1 for r in rows[:k]) + len(rows[k])
    return sum(len(r) + 1 for r in rows[:k]) + min(max(at.col - 1 - col, 0), len(rows[k]))


# ---- terminal ---------------------------------------------------------------------------
def render_card(card: dict, rules: dict) -> str:
    """One insertion as text: what, where, which rule, why (with facts), edges before/after."""
    lines = [f"{card['name']}: {card['type']} inserted by {card['pass']}"]
    path = " > ".join(p.get("via", "") + (" / " if p.get("via") else "") + p["graph"] for p in card.get("path", []))
    lines.append(f"  where  {_chain(card)}")
    lines.append(f"  graph  {path or card['graph']}")
    lines.append(f"  rule   {card['rule']}" + (f"  ({card['rule_loc']})" if card.get("rule_loc") else ""))
    lines += _rule_text(rules.get(card.get("rule_loc") or ""), "           ")
    lines.append("  why")
    for k, s in enumerate(card.get("explanation", []), 1):
        cite = ", ".join(x for x in (("rule " + s["rule"]) if s["rule"] else "", s["loc"]) if x)
        lines.append(f"    {k}. {s['text']}" + (f"  ({cite})" if cite else ""))
        if s["loc"] != card.get("rule_loc"):
            lines += _rule_text(rules.get(s["loc"]), "         ")
        for label, value in s["facts"]:
            lines.append(f"         · {label}: {value}")
    attrs = card.get("attrs") or {}
    values = card.get("attr_values") or {}
    lines.append("  attributes set" + ("" if attrs else ": none"))
    for key, why in attrs.items():
        lines.append(f"    {key} = {show(values.get(key))}  ({why})")
    moved = card.get("moved_control") or []
    lines.append("  control edges moved onto it: " + (", ".join(moved) if moved else "none"))
    hood = card.get("neighbourhood")
    if hood:
        from engine.report.neighbourhood import undo
        before = card.get("before") or {"nodes": hood["nodes"], "edges": undo(hood, moved)}
        lines.append("  before  " + _edges_text(before, before["edges"]))
        lines.append("  after   " + _edges_text(hood, hood["edges"]))
    lines.append("  reason  " + "; ".join(f"{k}={show(v)}" for k, v in (card.get("reason") or {}).items()))
    return "\n".join(lines)


def _chain(card: dict) -> str:
    ins = card.get("producer") or "(no producer)"
    outs = ", ".join(card.get("consumers") or []) or "(no consumer)"
    return f"{ins} -> [{card['type']} {card['name']}] -> {outs}"


def _rule_text(entry: dict | None, indent: str) -> list[str]:
    if not entry:
        return []
    return [indent + "| " + line for line in entry["text"].splitlines()]


def _edges_text(hood: dict, edges: list) -> str:
    names = [n[0] for n in hood["nodes"]]
    parts = []
    for s, o, d, i in edges:
        if o < 0:
            parts.append(f"{names[s]} ..> {names[d]}")
        else:
            parts.append(f"{names[s]}:{o} -> {names[d]}:{i}")
    return "; ".join(parts) if parts else "(no edges)"
