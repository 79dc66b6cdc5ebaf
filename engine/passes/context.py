"""Run state shared by the passes of one `memconflict run`, and the provenance
records every rewrite leaves behind (the report model is built from these)."""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from engine.core.errors import Cite, Loc
from engine.core.graph import Model, Node
from engine.core.neighbourhood import capture
from engine.pack.model import Pack
from engine.passes.alternatives import rejected


@dataclass(frozen=True, slots=True)
class Insertion:
    """One node a pass inserted, with why."""

    name: str
    type: str
    graph: str
    pass_id: str
    rule: str                 # rule id that decided
    cite: Cite | None         # the pack item that decided
    producer: str             # "node:out" feeding the new node ("" if none)
    consumers: tuple[str, ...]  # "node:in" fed by the new node
    reason: dict              # facts behind the decision (JSON-able, or Cite: the item a fact comes from)
    attrs: dict               # attributes set on the new node → why
    moved_control: tuple[str, ...] = ()
    choice: str = ""            # the choice point the pass decided at ("" = the rule id)
    isolated: str = ""          # "input" | "output": the side the isolation took ("" = neither or both)
    alternatives: tuple = ()    # what GE could have done there instead, and why not (Alternative)

    @property
    def rule_loc(self) -> Loc | None:
        return self.cite.loc if self.cite is not None else None

    def to_json(self) -> dict:
        return {
            "name": self.name, "type": self.type, "graph": self.graph, "pass": self.pass_id,
            "rule": self.rule, "rule_loc": str(self.rule_loc) if self.rule_loc else None,
            "producer": self.producer, "consumers": list(self.consumers),
            "reason": reason_json(self.reason), "attrs": self.attrs, "moved_control": list(self.moved_control),
            **({"alternatives": [a.to_json() for a in self.alternatives]} if self.alternatives else {}),
        }


@dataclass(frozen=True, slots=True)
class Removal:
    name: str
    type: str
    graph: str
    pass_id: str
    rule: str
    reason: dict

    def to_json(self) -> dict:
        return {"name": self.name, "type": self.type, "graph": self.graph, "pass": self.pass_id,
                "rule": self.rule, "reason": reason_json(self.reason)}


@dataclass(frozen=True, slots=True)
class Diagnostic:
    code: str
    severity: str             # "warning" | "error" | "info"
    message: str
    pass_id: str
    details: dict = field(default_factory=dict)
    cites: tuple[Cite, ...] = ()     # the pack items it names (the report links them to their text)

    def to_json(self) -> dict:
        out = {"code": self.code, "severity": self.severity, "message": self.message, "pass": self.pass_id}
        out.update(reason_json(self.details))
        return out


@dataclass
class PassRun:
    pass_id: str
    graph: str
    seconds: float
    inserted: int
    removed: int
    status: str               # "ok" | "failed" | "warned" | "skipped"
    message: str = ""


@dataclass
class RunContext:
    pack: Pack
    model: Model
    options: dict[str, str]
    insertions: list[Insertion] = field(default_factory=list)
    removals: list[Removal] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    counters: dict[str, int] = field(default_factory=dict)
    pass_runs: list[PassRun] = field(default_factory=list)
    current_pass: str = ""
    # what passes hand on to later passes, the report and the tests
    symbols: Any = None                 # the symbol table the last symbol-building pass left (SymbolTable)
    var_session: Any = None             # the run's variable session (VarSession): one VarManager a run
    atomic_state: dict = field(default_factory=dict)    # AtomicAddrClean: per-graph clean state
    rewrite_cache: dict = field(default_factory=dict)   # rewrite rule sets compiled for this run
    seen: dict = field(default_factory=dict)            # insertion index → its neighbourhood as the pass left it
    probe: Any = None                   # the why-not probe (engine/passes/probe.py), None: record nothing
    budgets: dict = field(default_factory=dict)         # `--budget`: pass id → work units (engine/passes/budget.py)
    budget_events: list = field(default_factory=list)   # budgets that ran out (BudgetEvent)
    # Note [handed-on symbol tables]: graph → (the pass serial it was left in, its SymbolTable)
    symbol_tables: dict = field(default_factory=dict)
    pass_serial: int = 0                # passes begun in this run (run_passes counts them)
    graph_kept: bool | None = None      # True: the current pass vouches it edited nothing
    _symbol_builder: Any = None

    def symbol_builder(self):
        """GetRefMapping for this run's pack (built once, on first use)."""
        if self._symbol_builder is None:
            from engine.passes.symbols import symbol_builder
            self._symbol_builder = symbol_builder(self)
        return self._symbol_builder

    def leave_symbols(self, graph, table) -> None:
        """Hand `table`, the symbol table of `graph` as the graph is now, on to a later pass
        of this run_passes call (Note [handed-on symbol tables])."""
        self.symbol_tables[graph] = (self.pass_serial, table)

    def take_symbols(self, graph):
        """The table a pass before this one left for `graph` with nothing edited since, or
        None; a table is taken once (its taker may change it)."""
        left = self.symbol_tables.pop(graph, None)
        return left[1] if left is not None and left[0] != self.pass_serial else None

    def passed(self) -> None:
        """After each pass: tables left before it go unless it vouched it edited nothing
        (run_passes clears `graph_kept` as each pass begins)."""
        if self.graph_kept is not True and self.symbol_tables:
            serial = self.pass_serial
            self.symbol_tables = {g: left for g, left in self.symbol_tables.items() if left[0] == serial}

    def record(self, ins: Insertion) -> None:
        """Keep an insertion, and its neighbourhood the moment the pass records it (the
        report's "before" picture, Note [before as seen] in engine/report/neighbourhood.py).
        O(1) per insertion: the capture is bounded. The alternatives the pack declares at
        the insertion's choice point are attached here (engine/passes/alternatives.py)."""
        if not ins.alternatives:
            alts = rejected(self.pack, ins.choice or ins.rule, ins.isolated, ins.type)
            if alts:
                ins = replace(ins, alternatives=alts)
        g = self.model.graphs.get(ins.graph)
        node = g.find(ins.name) if g is not None else None
        if node is not None:
            self.seen[len(self.insertions)] = capture(node)
        self.insertions.append(ins)

    def next_count(self, counter: str) -> int:
        n = self.counters.get(counter, 0)
        self.counters[counter] = n + 1
        return n

    def option_true(self, key: str, value: str = "1") -> bool:
        return self.options.get(key) == value


def anchor_ref(a) -> str:
    return f"{a.node.name}:{a.idx}" if a is not None else ""


def node_path(node: Node) -> str:
    """graph path through subgraphs: root/parent/subgraph."""
    parts = []
    g = node.graph
    while g is not None:
        parts.append(g.name)
        g = g.parent_graph
    return "/".join(reversed(parts))


def json_value(v: Any) -> Any:
    if isinstance(v, Loc):
        return str(v)
    return v


def reason_json(reason: dict) -> dict:
    """Facts as JSON. Note [cited facts]: a fact may be a Cite (the pack item it
    comes from); under a `*_loc` key it is written as the item's location (the key
    of its text in the report's `rules`), under any other key as "rule-id (file:line)"."""
    if not any(isinstance(v, Cite) for v in reason.values()):
        return reason
    return {k: (str(v.loc) if k.endswith("_loc") else str(v)) if isinstance(v, Cite) else v
            for k, v in reason.items()}


def reason_cites(reason: dict) -> list[Cite]:
    """The Cites among a record's facts, in fact order."""
    return [v for v in reason.values() if isinstance(v, Cite)]
