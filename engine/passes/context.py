"""Run state shared by the passes of one `memconflict run`, and the provenance
records every rewrite leaves behind (the report model is built from these)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.core.errors import Loc
from engine.core.graph import Model, Node
from engine.pack.model import Pack


@dataclass(frozen=True, slots=True)
class Insertion:
    """One node a pass inserted, with why."""

    name: str
    type: str
    graph: str
    pass_id: str
    rule: str                 # rule id that decided
    rule_loc: Loc | None
    producer: str             # "node:out" feeding the new node ("" if none)
    consumers: tuple[str, ...]  # "node:in" fed by the new node
    reason: dict              # facts behind the decision (JSON-able)
    attrs: dict               # attributes set on the new node → why
    moved_control: tuple[str, ...] = ()

    def to_json(self) -> dict:
        return {
            "name": self.name, "type": self.type, "graph": self.graph, "pass": self.pass_id,
            "rule": self.rule, "rule_loc": str(self.rule_loc) if self.rule_loc else None,
            "producer": self.producer, "consumers": list(self.consumers),
            "reason": self.reason, "attrs": self.attrs, "moved_control": list(self.moved_control),
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
                "rule": self.rule, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class Diagnostic:
    code: str
    severity: str             # "warning" | "error" | "info"
    message: str
    pass_id: str
    details: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        out = {"code": self.code, "severity": self.severity, "message": self.message, "pass": self.pass_id}
        out.update(self.details)
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
    _symbol_builder: Any = None

    def symbol_builder(self):
        """GetRefMapping for this run's pack (built once, on first use)."""
        if self._symbol_builder is None:
            from engine.passes.symbols import symbol_builder
            self._symbol_builder = symbol_builder(self)
        return self._symbol_builder

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
