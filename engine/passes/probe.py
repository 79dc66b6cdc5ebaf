"""The why-not probe: the decisions a pass took *not* to isolate something.

A run records what it inserted (engine/passes/context.py Insertion); with a probe
in `RunContext.probe` the passes also record, for the anchors, edges or nodes the
probe asks about, what they evaluated there and which item said "no conflict":
a matrix cell, an absolute table entry, a checker's verdict, a skipped consumer,
a bypass rule, a gate. Without a probe (every normal run) a pass tests
`ctx.probe is None` once per decision point and records nothing.

Two modes: a *subject* (`memconflict explain GRAPH --why-not A [B]`): every look
at it is kept; *near misses* (`run --near-misses`): every decision point is
asked, and only the looks a pass marks `close` (a conflict found and then set
aside, a checker saying no to a pair it was registered for, an order that only
a control edge gives) are kept, at most `limit` of them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.core.errors import Cite, Loc

NO_CONFLICT = "no conflict"
ISOLATED = "isolated"
NOT_RUN = "not run"
NOT_LOOKED = "not looked at"


@dataclass(frozen=True, slots=True)
class Step:
    """One thing a pass evaluated: what, its value, the pack item it comes from."""

    text: str
    result: str
    cite: Cite | None = None
    facts: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class Look:
    """One pass looking at the subject (or part of it): the steps in the order the
    pass evaluated them and which of them decided (`decisive`, -1: none did —
    e.g. no rule of a first-match list held)."""

    pass_id: str
    graph: str
    about: str
    outcome: str               # NO_CONFLICT | ISOLATED | NOT_RUN | NOT_LOOKED
    kind: str                  # what decided, in a word: matrix-cell, absolute-no-conflict, checker, gate, ...
    steps: tuple[Step, ...]
    decisive: int = -1
    close: bool = False        # a near miss

    def to_json(self) -> dict:
        return {"pass": self.pass_id, "graph": self.graph, "about": self.about, "outcome": self.outcome,
                "kind": self.kind, "decisive": self.decisive,
                "steps": [step_json(s) for s in self.steps]}


def step_json(s: Step) -> dict:
    out: dict = {"text": s.text, "result": s.result}
    if s.cite is not None:
        out["rule"] = s.cite.rule_id
        out["loc"] = str(s.cite.loc)
    if s.facts:
        out["facts"] = [[k, _json(v)] for k, v in s.facts]
    return out


def _json(v: Any) -> Any:
    if isinstance(v, Cite):
        return str(v)
    if isinstance(v, (list, tuple)):
        return [_json(x) for x in v]
    return v


def expr_cite(expr: Any, rule_id: str = "") -> Cite | None:
    """A DSL value cited where it is written (quoted to the end of its line)."""
    loc = getattr(expr, "loc", None)
    if not isinstance(loc, Loc):
        return None
    return Cite(rule_id, loc, loc)


def ref(a: Any) -> str:
    """`node:idx` of an anchor (the edge notation), `node` of a node."""
    if a is None:
        return "(none)"
    if hasattr(a, "idx"):
        return f"{a.node.name}:{a.idx}"
    return a.name


@dataclass
class Probe:
    """What the passes are asked about. `anchors`: anchor objects named; `pairs`:
    anchor pairs named (an edge is the pair of its two ends); `nodes`: nodes named
    as a whole. `near`: near-miss mode (everything is asked, close looks kept)."""

    anchors: frozenset = frozenset()
    pairs: frozenset = frozenset()          # frozensets of two anchors
    pair_list: tuple = ()                   # the same pairs as (x, y), in the order given (for output order)
    nodes: frozenset = frozenset()
    near: bool = False
    limit: int = 1000
    looks: list[Look] = field(default_factory=list)
    dropped: int = 0                         # near misses beyond `limit`

    # ---- what is asked ---------------------------------------------------------------
    def wants_pair(self, x: Any, y: Any) -> bool:
        """Is the (unordered) anchor pair x, y part of the subject?"""
        if self.near:
            return True
        if x is None or y is None:
            return False
        if self.pairs and frozenset((x, y)) in self.pairs:
            return True
        if self.nodes and (x.node in self.nodes or y.node in self.nodes):
            return True
        return bool(self.anchors) and not self.pairs and (x in self.anchors or y in self.anchors)

    def wants(self, a: Any) -> bool:
        """Is anchor a (one end of the subject) asked about?"""
        if self.near:
            return True
        return a is not None and (a in self.anchors or a.node in self.nodes)

    def wants_node(self, n: Any) -> bool:
        """Does node n own an anchor of the subject (or is it the subject)?"""
        if self.near:
            return True
        return n in self.nodes or any(a.node is n for a in self.anchors)

    # ---- recording ---------------------------------------------------------------------
    def record(self, look: Look) -> None:
        if self.near and not look.close:
            return
        if self.near and len(self.looks) >= self.limit:
            self.dropped += 1
            return
        self.looks.append(look)

    def look(self, pass_id: str, graph: Any, about: str, outcome: str, kind: str, steps: list[Step],
             decisive: int | None = None, close: bool = False) -> None:
        """Record a look; `decisive` indexes `steps` (negative: from the end; None: no step decided)."""
        k = -1 if decisive is None else decisive if decisive >= 0 else len(steps) + decisive
        self.record(Look(pass_id, getattr(graph, "name", str(graph)), about, outcome, kind, tuple(steps), k, close))
