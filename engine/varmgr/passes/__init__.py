"""The variable passes of §9, as functions over the graph model.

Each `run_*` takes the graph it runs on, the session's VarManager (and, for
variable_op, the GraphRebuildStateCtrl) and returns the changes it made; a GE
failure status raises PassFailure naming the node. Op types and attribute keys
come from the policy (rules/ge/variables.yaml).

Pass ids (the runner's): variable_prepare, variable_op, var_is_initialized,
variable_ref_delete.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Change:
    """One edit a variable pass made, with the rule that made it."""

    kind: str             # "inserted" | "removed" | "replaced" | "updated"
    node: str
    type: str
    graph: str
    rule: str             # e.g. "var/ref-after-writer"
    detail: dict = field(default_factory=dict)


PASS_IDS = ("variable_prepare", "variable_op", "var_is_initialized", "variable_ref_delete")
