"""The diff model: frozen records that the text, JSON and HTML renderings print.

A `Change` is one semantic difference between two packs: an entry of a table
added, removed, changed field by field, renamed, moved to another table or
reordered. Each side keeps the engine's location (so run provenance, which cites
the same locations, can be matched against it) and the references an
isolation's provenance may carry (`rule:ID`, `loc:FILE:LINE`, `cell:...`,
`pair:A × B`, `attr:A`, `fn:TABLE/NAME`, `class:NAME`, `pass:ID`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from engine.core.errors import Loc

KINDS = ("added", "removed", "changed", "renamed", "moved", "reordered")


@dataclass(frozen=True, slots=True)
class Side:
    loc: Loc | None
    text: str = ""
    name: str = ""            # the entry's key on this side (differs when renamed)
    table: str = ""           # the entry's table on this side (differs when moved)


@dataclass(frozen=True, slots=True)
class Change:
    id: str                   # the entry's path, e.g. "rw_conflict.output_rules[rw/out/const]"
    section: str
    table: str                # container path, e.g. "rw_conflict.output_rules"
    key: str                  # entry key in the table ("" = the table itself)
    kind: str
    summary: str
    old: Side | None = None
    new: Side | None = None
    details: tuple[tuple[str, str], ...] = ()     # (sign, text); sign in " -+~"
    old_refs: frozenset = frozenset()
    new_refs: frozenset = frozenset()
    content: str = ""         # canonical content, for rename/move detection only
    entry: bool = True        # a whole entry (rename/move candidates), not a field set
    cosmetic: bool = False    # only `doc` text or the pack's name/version/description changed


@dataclass
class PackInfo:
    spec: str
    name: str
    version: str
    schema_version: int
    path: str
    changes_md: str | None    # CHANGES.md text, if the pack has one


@dataclass
class PackDiff:
    old: PackInfo
    new: PackInfo
    changes: list[Change] = field(default_factory=list)
    notes: list[tuple[str, str]] = field(default_factory=list)   # CHANGES.md entries new in NEW

    def semantic(self) -> list[Change]:
        """Rule changes proper: not doc text, not the pack's name/version/description."""
        return [c for c in self.changes if not c.cosmetic]
