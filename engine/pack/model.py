"""The model of a rule pack: frozen dataclasses for op classes, the op registry,
rules, passes and the pipeline, each carrying the `Loc` of its source so that
decisions and errors can name the rule line."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.dsl import library as primitives
from engine.dsl.compiler import Scope
from engine.dsl.ast import Expr, Signature
from engine.core.errors import Cite, Loc

SCHEMA_VERSION = 1
CORE_SECTIONS = ("op_classes", "ops", "op_defaults", "stages", "passes", "pipeline", "surgery", "attr_keys", "options")
PASS_SCOPES = ("graph", "root")


@dataclass(frozen=True, slots=True)
class OpClass:
    name: str
    types: frozenset
    doc: str
    loc: Loc


@dataclass(frozen=True, slots=True)
class OpSpec:
    type: str
    signature: Signature | None
    engine: str | None
    atomic: bool
    doc: str
    loc: Loc


@dataclass(frozen=True, slots=True)
class Rule:
    """One entry of a first-match rule list: `when` holds → `value`."""

    id: str
    when: Expr
    value: Expr
    doc: str
    loc: Loc
    end: Loc | None = None     # where the list item ends (None: built in code, not read from YAML)

    @property
    def cite(self) -> Cite:
        return Cite(self.id, self.loc, self.end or self.loc)


@dataclass(frozen=True, slots=True)
class PassSpec:
    id: str
    algorithm: str
    scope: str
    config: str | None
    on_failure: str          # "fail" (exit 1) or "warn" (GE only logs)
    doc: str
    loc: Loc


@dataclass(frozen=True, slots=True)
class Step:
    pass_id: str
    stage: str
    gate: Expr | None
    loc: Loc


@dataclass(frozen=True, slots=True)
class SortSpec:
    """ComputeGraph::TopologicalSorting's choices (engine/core/toposort.py): the strategy,
    "bfs" | "dfs" | "rdfs" | "stable_rdfs", from the options; the MemoryPriority policy; the
    sources SortNodes takes first; the producers DelayTopoSort counts as long-lived."""

    mode: Expr
    memory_priority: Expr | None
    inputs_first: Expr | None
    long_lived: Expr | None
    loc: Loc


@dataclass(frozen=True, slots=True)
class SurgerySpec:
    """GE GraphUtils behaviour shared by every pass that inserts nodes."""

    inherit_attrs: tuple[str, ...]      # copied from the node an insertion sits next to
    keep_in_ctrl_from: Expr | None      # insert-before leaves in-control edges from these nodes
    keep_out_ctrl_of: Expr | None       # insert-after does not move out-control edges of these nodes
    loop_back_edge_from: Expr | None    # edges from these nodes may close a cycle (loops)
    loc: Loc
    topological_sort: SortSpec | None = None
    isolate_noop: "IsolateNoop | None" = None


@dataclass(frozen=True)
class IsolateNoop:
    """GraphUtils::IsolateNode's RelinkControlNodeWithNoOpOptimize: when the node's distinct
    predecessors × successors exceed `threshold` (and their sum), their control goes through
    one node of `type`, named the isolated node's name + `suffix`."""

    type: str
    suffix: str
    threshold: int


@dataclass
class Pack:
    name: str
    version: str
    schema_version: int
    path: Path
    description: str = ""
    classes: dict[str, OpClass] = field(default_factory=dict)
    ops: dict[str, OpSpec] = field(default_factory=dict)
    default_engine: str = ""
    stages: list[str] = field(default_factory=list)
    passes: dict[str, PassSpec] = field(default_factory=dict)
    pipeline: list[Step] = field(default_factory=list)
    sections: dict[str, Any] = field(default_factory=dict)     # raw algorithm sections
    section_locs: dict[str, Loc] = field(default_factory=dict)
    configs: dict[str, Any] = field(default_factory=dict)      # loaded algorithm configs
    rule_ids: dict[str, Loc] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    surgery: "SurgerySpec | None" = None
    dsl_sources: list = field(default_factory=list)   # (source text, parsed value): for round-trip checks
    attr_keys: dict[str, str] = field(default_factory=dict)    # name → GE attribute key (`attr_keys:`)
    algorithms: dict[str, Any] = field(default_factory=dict)   # the registry's plus the families' the pack declares
    attr_key_locs: dict[str, Loc] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)      # name → OptionSpec (`options:`, engine/pack/options.py)

    def class_sets(self) -> dict[str, frozenset]:
        return {name: c.types for name, c in self.classes.items()}

    def engine_of_type(self, op_type: str) -> str:
        spec = self.ops.get(op_type)
        return spec.engine if spec is not None and spec.engine else self.default_engine

    def attr_key(self, name: str) -> str:
        """The GE attribute key the pack declares under `attr_keys: {name: key}` ("" when
        it declares none: the loader has reported that)."""
        return self.attr_keys.get(name, "")

    def constants(self) -> dict[str, str]:
        """Named constants every DSL expression of the pack may use: its attribute keys,
        named in upper case (`attr(node, PARENT_NODE_INDEX)`)."""
        return {attr_key_constant(name): key for name, key in self.attr_keys.items()}

    def scope(self, variables: tuple[str, ...], constants: dict[str, Any] | None = None,
              extra: dict[str, primitives.PrimSpec] | None = None,
              functions: dict[str, Any] | None = None, enums: dict[str, Any] | None = None) -> Scope:
        """What a DSL expression of this pack may name: `variables`, the pack's constants
        plus `constants`, its op classes, `functions` (default: placeholders for checking)
        and `enums`, the section's vocabularies (name → members). A pack that declares
        `options:` makes `Option` an enum of their names, so `option("ge.typo")` is
        an error at load (without the section, any string)."""
        vocab = {"Option": self.options} if self.options else {}
        vocab.update(enums or {})
        return Scope(variables, {**self.constants(), **(constants or {})}, self.class_sets(),
                     primitives.placeholder_functions(extra) if functions is None else functions,
                     {k: frozenset(map(str, v)) for k, v in vocab.items()})

    def option(self, given: dict[str, str], key: str) -> str | None:
        """An option's value for a run: given, else the declared default, else none."""
        if key in given:
            return given[key]
        spec = self.options.get(key)
        return None if spec is None else spec.default


def attr_key_constant(name: str) -> str:
    """`parent_node_index` → `PARENT_NODE_INDEX`, the name DSL expressions use."""
    return name.upper()


@dataclass(frozen=True, slots=True)
class FuncDef:
    """A pack-defined DSL function: `name(params) = body`."""

    name: str
    params: tuple[str, ...]
    body: Expr
    doc: str
    loc: Loc
    memo: bool = False       # results cached per pass run (for functions of graph-level facts)
