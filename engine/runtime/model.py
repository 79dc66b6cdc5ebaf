"""The input model of `runtime cond`: a case (feeds, one If/Case, its branches), whether it
was read from the CASE form (engine/runtime/casefile.py) or from a GE dump
(engine/runtime/dumpcond.py). Frozen, located, and free of GE names."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.core.errors import Loc


@dataclass(frozen=True, slots=True)
class Ref:
    """`name:out` (a bare name is output 0)."""

    name: str
    idx: int
    loc: Loc

    def __str__(self) -> str:
        return self.name if self.idx == 0 else f"{self.name}:{self.idx}"


@dataclass(frozen=True, slots=True)
class Feed:
    name: str
    guarder: str | None
    placement: str
    loc: Loc
    rule: Any = None            # the pack rule that gave `guarder` (dump form), else None


@dataclass(frozen=True, slots=True)
class NodeSpec:
    name: str
    type: str
    inputs: tuple[Ref, ...]
    outputs: int
    guarders: tuple[tuple[int, str], ...]       # (output, guarder type), created in this order
    placement: str
    attrs: dict
    ctrl_inputs: tuple[Ref, ...]
    loc: Loc
    cond: "CondSpec | None" = None              # a nested If/Case
    rule: Any = None                            # the pack rule that gave `guarders` (dump form)


@dataclass(frozen=True, slots=True)
class BranchSpec:
    name: str | None
    nodes: tuple[NodeSpec, ...]
    outputs: tuple[Ref, ...]
    loc: Loc


@dataclass(frozen=True, slots=True)
class CondSpec:
    name: str | None
    op: str
    kind: str                                   # "if" | "case"
    cond: Ref | None
    branches: tuple[BranchSpec | None, ...]
    loc: Loc
    extra_inputs: tuple[Ref, ...] = ()          # dump form: the node's other inputs, in order
    placement: str = ""


@dataclass(frozen=True, slots=True)
class CaseSpec:
    feeds: tuple[Feed, ...]
    cond: CondSpec
    root_netoutput: bool
    loc: Loc
    source: dict = field(default_factory=dict)  # dump form: {"node", "graph"}
