"""Rejected alternatives: where GE chooses between isolations, the ones it did not take.

GE's passes choose at fixed places — an Identity before the writer's input or after the
producer for all its consumers, one copy per consumer or one shared, the input of the
earlier or the later node, an Identity or a MemcpyAsync, one clean node for the graph
or one per atomic node. The pack declares, per choice point, the alternatives GE had
there and why its code rejects each (`isolation_alternatives:`, rules/ge/alternatives.yaml):

    isolation_alternatives:
      hccl/protect-constant:            # a rule id, or a choice point a pass names (CHOICE_POINTS)
        - name: copy-after-producer
          does: one Identity after the constant, shared by all its consumers
          rejected: only the collective writes; the other readers keep the constant's own buffer
          ge: compiler/graph/passes/memory_conflict/hccl_memcpy_pass.cc:354
          if_isolated: input            # optional: listed only when the isolation taken is at an input (output)
          if_type: Identity             # optional: listed only when the node inserted is of this type

A pass records the choice point of every node it inserts (`Insertion.choice`, default the
rule id) and the side it isolated (`Insertion.isolated`); `RunContext.record` attaches the
declared alternatives to the insertion (engine/passes/context.py). The engine names no
alternative itself: without an entry a card lists none.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from engine.core.errors import Cite, Collector, Loc, did_you_mean
from engine.core.schema import Reader
from engine.core.yamlloc import item_span
from engine.pack.model import Pack
from engine.passes.registry import register_section

SECTION = "isolation_alternatives"
SIDES = ("input", "output")
_ID = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
# GE source: a repository path and a line (or a line range)
_GE = re.compile(r"^[A-Za-z0-9_./+-]+\.(?:cc|cpp|h|hpp|py):[1-9][0-9]*(?:-[1-9][0-9]*)?$")


@dataclass(frozen=True, slots=True)
class Alternative:
    """One isolation GE could have chosen at a choice point, and why it does not."""

    choice: str            # the choice point (rule id)
    id: str                # kebab-case, unique within the choice point
    does: str              # the isolation, in words
    rejected: str          # why GE's code does not take it
    ge: str                # GE source, path:line
    if_isolated: str       # "" | "input" | "output": listed only when the isolation taken is at that side
    if_type: str           # "": any; else listed only when the inserted node has this op type
    loc: Loc
    end: Loc

    @property
    def cite(self) -> Cite:
        return Cite(f"{self.choice}#{self.id}", self.loc, self.end)

    def to_json(self) -> dict:
        return {"id": self.id, "does": self.does, "rejected": self.rejected, "ge": self.ge,
                "rule": self.cite.rule_id, "rule_loc": str(self.loc)}


def load(value, pack: Pack, errors: Collector) -> dict[str, tuple[Alternative, ...]] | None:
    """`{choice point: [alternative, ...]}`; which choice points exist is checked once every
    section has loaded (`check_choices`, called by engine/passes/catalog.py)."""
    r = Reader(value, SECTION, errors, Loc(str(pack.path)))
    out: dict[str, tuple[Alternative, ...]] = {}
    for choice in list(r.map):
        items = r.get(choice, list, [])
        if not isinstance(items, list) or not items:
            errors.error(r.key_loc(choice), f"{SECTION}.{choice}: give a list of alternatives",
                         "each `- {name, does, rejected, ge}`")
            continue
        alts, seen = [], {}
        for i, item in enumerate(items):
            start, end = item_span(items, i, r.key_loc(choice))
            e = Reader(item, f"{SECTION}.{choice}[{i + 1}]", errors, start)
            aid = str(e.get("name", str, "", required=True))
            does = str(e.get("does", str, "", required=True))
            rejected = str(e.get("rejected", str, "", required=True))
            ge = str(e.get("ge", str, "", required=True))
            side = str(e.get("if_isolated", str, ""))
            typ = str(e.get("if_type", str, ""))
            e.done()
            if aid and not _ID.match(aid):
                errors.error(e.value_loc("name"), f"alternative name '{aid}' is not kebab-case", "e.g. copy-after-producer")
            if aid in seen:
                errors.error(e.value_loc("name"), f"alternative '{aid}' of {choice} is listed twice",
                             f"first listed at {seen[aid]}")
            seen[aid] = e.value_loc("name")
            if ge and not _GE.match(ge):
                errors.error(e.value_loc("ge"), f"ge: '{ge}' is not a GE source location",
                             "write path/to/file.cc:LINE (or :FIRST-LAST), as in GE's repository")
            if side and side not in SIDES:
                errors.error(e.value_loc("if_isolated"), f"if_isolated: unknown side '{side}'",
                             did_you_mean(side, SIDES, "sides"))
            alts.append(Alternative(str(choice), aid, does, rejected, ge, side, typ, start, end))
        out[str(choice)] = tuple(alts)
    r.done()
    return None if errors else out


def check_choices(pack: Pack, choice_points: set[str], errors: Collector) -> None:
    """Every choice point named is a rule id of the pack or a choice point a pass declares."""
    table = pack.configs.get(SECTION) or {}
    raw = pack.sections.get(SECTION)
    known = set(pack.rule_ids) | choice_points
    for choice in table:
        if choice not in known:
            loc = getattr(raw, "key_locs", {}).get(choice, Loc(str(pack.path)))
            errors.error(loc, f"{SECTION}: no choice point '{choice}'",
                         did_you_mean(choice, sorted(known), "rule ids and choice points")
                         + f" (a rule removed or renamed takes its entry along: `- remove: {SECTION}[{choice}]`)")


def rejected(pack: Pack, choice: str, isolated: str, op_type: str) -> tuple[Alternative, ...]:
    """The alternatives the pack declares at `choice` that apply to an isolation at `isolated`
    by a node of type `op_type`."""
    table = pack.configs.get(SECTION) or {}
    return tuple(a for a in table.get(choice, ()) if (not a.if_isolated or a.if_isolated == isolated)
                 and (not a.if_type or a.if_type == op_type))


register_section(SECTION, load)
