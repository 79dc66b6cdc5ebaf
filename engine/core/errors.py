"""Locations, diagnostics and the error type for unusable input.

Every message about bad input is rendered as ``file:line:col: error: message``,
followed by the offending source line, a caret and a hint (STYLE.md §7).
Errors are collected and raised together, sorted by location.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field, fields
from pathlib import Path


@dataclass(frozen=True, slots=True, order=True)
class Loc:
    """A 1-based position in a source file (col 0 = unknown)."""

    file: str
    line: int = 0
    col: int = 0

    def __str__(self) -> str:
        if self.line <= 0:
            return self.file
        if self.col <= 0:
            return f"{self.file}:{self.line}"
        return f"{self.file}:{self.line}:{self.col}"

    def shifted(self, dline: int, dcol: int) -> "Loc":
        """Position `dline` lines / `dcol` columns into a snippet that starts here."""
        if dline == 0:
            return Loc(self.file, self.line, self.col + dcol)
        return Loc(self.file, self.line + dline, dcol + 1)


def positional_pickle(cls):
    """Note [positional pickling]: frozen slotted dataclasses pickle through a generic
    state-setting path that looks up their fields per object; the compiled-pack cache
    (engine/pack/cache.py) unpickles ~6,000 of them per start, 2.4x faster when each is
    rebuilt from its field values by its own constructor. Apply after @dataclass."""
    names = tuple(f.name for f in fields(cls))

    def __reduce__(self):
        return (cls, tuple(getattr(self, n) for n in names))
    cls.__reduce__ = __reduce__
    return cls


positional_pickle(Loc)


@dataclass(frozen=True, slots=True, order=True)
class Cite:
    """A located reference to exactly one pack item: the rule, checker, table entry
    or policy entry that decided. `loc` is where the item starts, `span` where it
    ends (exclusive), so the quoted text is that item. A cell of a one-line table
    row also names the row (`row`: start, end) and is quoted as the row with the
    cell marked. `rule_id` is "" for an item that is not a rule with an id."""

    rule_id: str
    loc: Loc
    span: Loc
    row: tuple[Loc, Loc] | None = None

    @property
    def where(self) -> str:
        """file:line, as messages and reason facts name a rule."""
        return f"{self.loc.file}:{self.loc.line}"

    def __str__(self) -> str:
        return f"{self.rule_id} ({self.where})" if self.rule_id else self.where


@dataclass(frozen=True, slots=True)
class Problem:
    """One error about unusable input."""

    loc: Loc
    message: str
    hint: str = ""

    def render(self, source_cache: dict[str, list[str]] | None = None) -> str:
        text = f"{self.loc}: error: {self.message}"
        line = _source_line(self.loc, source_cache)
        if line is not None:
            text += "\n    " + line.rstrip("\n")
            if self.loc.col > 0:
                text += "\n    " + " " * (self.loc.col - 1) + "^"
        if self.hint:
            text += f"\n  hint: {self.hint}"
        return text


def _source_line(loc: Loc, cache: dict[str, list[str]] | None) -> str | None:
    if loc.line <= 0:
        return None
    cache = {} if cache is None else cache
    lines = cache.get(loc.file)
    if lines is None:
        try:
            with open(loc.file, encoding="utf-8", errors="replace") as fh:
                lines = []
                for i, ln in enumerate(fh, 1):
                    lines.append(ln)
                    if i >= loc.line and len(lines) > 200_000:
                        break
        except OSError:
            lines = []
        cache[loc.file] = lines
    if loc.line - 1 < len(lines):
        return lines[loc.line - 1]
    return None


class InputError(Exception):
    """Unusable input (exit status 2). Carries one or more problems."""

    def __init__(self, problems: list[Problem] | Problem):
        if isinstance(problems, Problem):
            problems = [problems]
        self.problems = sorted(problems, key=lambda p: (p.loc.file, p.loc.line, p.loc.col, p.message))
        super().__init__(self.render())

    def render(self) -> str:
        cache: dict[str, list[str]] = {}
        return "\n".join(p.render(cache) for p in self.problems)


class PassFailure(Exception):
    """A pass failed on this graph where GE returns a failure status (exit status 1)."""

    def __init__(self, pass_id: str, message: str, node: str | None = None):
        self.pass_id = pass_id
        self.node = node
        super().__init__(f"pass {pass_id} failed" + (f" at node '{node}'" if node else "") + f": {message}")


@dataclass
class Collector:
    """Accumulates problems; `check()` raises them all at once."""

    problems: list[Problem] = field(default_factory=list)

    def error(self, loc: Loc, message: str, hint: str = "") -> None:
        self.problems.append(Problem(loc, message, hint))

    def check(self) -> None:
        if self.problems:
            raise InputError(self.problems)

    def __bool__(self) -> bool:
        return bool(self.problems)


def did_you_mean(word: str, choices, what: str = "") -> str:
    """A hint naming the closest valid choice, or listing the choices."""
    choices = sorted(set(choices))
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    if close:
        return f"did you mean '{close[0]}'?"
    if len(choices) <= 12:
        return f"expected {what + ': ' if what else ''}{', '.join(choices)}"
    return f"see the {what or 'allowed values'} ({len(choices)} known)"


def display_path(path: str | Path) -> str:
    """Paths under the working directory are shown relative to it."""
    p = Path(path)
    try:
        return str(p.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(p)
