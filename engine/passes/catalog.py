"""The algorithm catalog: every pass algorithm and shared section this engine
has, registered, and the pack loader bound to them.

`load_pack(path)` is what commands and tests call; the pack layer's own
`engine.pack.loader.load_pack(path, registry)` takes the registry explicitly.
"""
from __future__ import annotations

from pathlib import Path

from engine.pack import loader
from engine.pack.model import Pack
from engine.passes import algorithms  # noqa: F401  (importing it registers every algorithm)
from engine.passes import alternatives, budget, opaudit  # noqa: F401  (register their sections)
from engine.core.errors import Collector
from engine.passes.registry import ALGORITHMS, FAMILIES, SECTIONS, Registry

REGISTRY = Registry(ALGORITHMS, SECTIONS, FAMILIES)


def load_pack(path: str | Path | None = None) -> Pack:
    """Load and validate a pack folder (default: the shipped GE pack) with every algorithm of this engine."""
    pack = loader.load_pack(path, REGISTRY)
    errors = Collector()
    alternatives.check_choices(pack, {c for a in pack.algorithms.values() for c in a.choice_points}, errors)
    errors.check()
    return pack
