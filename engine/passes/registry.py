"""Registries of pass algorithms and shared pack sections.

Pass algorithms: generic procedures whose GE-specific decisions come from a
pack section. Each registers under a name the pack's `passes:` refer to.

An algorithm provides:
* `section`: the pack section holding its configuration;
* `load(value, pack, errors)`: strict loading of that section (DSL checked);
* `run(ctx, graph, config, spec)`: one execution on a graph (the runner applies
  GE's PassManager semantics around it).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass(frozen=True)
class Algorithm:
    name: str
    section: str
    load: Callable[..., Any]
    run: Callable[..., None]
    doc: str = ""
    # choice points the algorithm records by a name that is no rule id (engine/passes/alternatives.py)
    choice_points: tuple[str, ...] = ()


ALGORITHMS: dict[str, Algorithm] = {}
# algorithm families: a pack key (e.g. `rewrite_sets`) whose entries `{name: doc}` each become an
# algorithm of that name, configured by the section of that name: make(name, doc) → Algorithm
FAMILIES: dict[str, Callable[[str, str], Algorithm]] = {}
# pack sections shared by several algorithms (e.g. `symbols`): name → load(value, pack, errors)
SECTIONS: dict[str, Callable[..., Any]] = {}


def register_section(name: str, load: Callable[..., Any]) -> None:
    if name in SECTIONS:
        raise RuntimeError(f"section {name} registered twice")
    SECTIONS[name] = load


def register_family(key: str, make: Callable[[str, str], Algorithm]) -> None:
    if key in FAMILIES:
        raise RuntimeError(f"algorithm family {key} registered twice")
    FAMILIES[key] = make


def register(algo: Algorithm) -> None:
    if algo.name in ALGORITHMS:
        raise RuntimeError(f"algorithm {algo.name} registered twice")
    ALGORITHMS[algo.name] = algo


@dataclass(frozen=True)
class Registry:
    """What a pack may configure: algorithms by name, shared sections by name and the
    algorithm families a pack declares members of (the pack loader takes one of these;
    engine/passes/catalog.py fills the default)."""

    algorithms: dict[str, Algorithm]
    sections: dict[str, Callable[..., Any]]
    families: dict[str, Callable[[str, str], Algorithm]] = field(default_factory=dict)
