"""The options a pack's rules read: declared in the pack's `options:` section
(name, type, default, the GE option or context flag it mirrors, doc), checked when
given (`--option KEY=VALUE`, a YAML graph's `options:`) and typed.

    options:
      ge.featureBaseRefreshable:
        type: bool
        default: false
        mirrors: OPTION_FEATURE_BASE_REFRESHABLE (ge_common_api_types.h)
        doc: feature-map base addresses may be refreshed after load

Types: `bool` (given as 1/0/true/false/on/off/yes/no, any case), `int` (decimal,
optionally signed, within `range: [LO, HI]` when given), `str`, and `choice`
(`choices: [...]`, matched exactly). A pack without an `options:` section accepts
any option as a string, as before this section existed.

Note [canonical option values]: a value is stored in one canonical text per type —
a bool as "1" or "0" (GE's own options are "1"/"0" strings: `option(KEY) == "1"`
in a rule keeps meaning "on" whichever spelling the user typed), an int in decimal,
a string or choice as given. Rules see `option(KEY)`: the given value, else the
declared default, else none.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.core.errors import Collector, InputError, Loc, Problem, did_you_mean
from engine.core.schema import Reader

TYPES = ("bool", "int", "str", "choice")
_TRUE = frozenset({"1", "true", "on", "yes"})
_FALSE = frozenset({"0", "false", "off", "no"})


@dataclass(frozen=True, slots=True)
class OptionSpec:
    name: str
    type: str                       # one of TYPES
    default: str | None             # canonical text, or None: unset unless given
    mirrors: str
    doc: str
    loc: Loc
    choices: tuple[str, ...] = ()
    range: tuple[int, int] | None = None

    def describe_type(self) -> str:
        if self.type == "choice":
            return "one of " + ", ".join(self.choices)
        if self.type == "int" and self.range is not None:
            return f"int in [{self.range[0]}, {self.range[1]}]"
        return self.type

    def parse(self, text: str) -> str:
        """The canonical text of `text` for this option; ValueError says why not."""
        if self.type == "bool":
            low = text.strip().lower()
            if low in _TRUE:
                return "1"
            if low in _FALSE:
                return "0"
            raise ValueError("expected a bool: 1/0, true/false, on/off or yes/no")
        if self.type == "int":
            t = text.strip()
            body = t[1:] if t[:1] in "+-" else t
            if not body.isdigit() or not body.isascii() or len(body) > 20:
                raise ValueError("expected a decimal integer")
            n = int(t)
            if self.range is not None and not self.range[0] <= n <= self.range[1]:
                raise ValueError(f"{n} is out of range [{self.range[0]}, {self.range[1]}]")
            return str(n)
        if self.type == "choice":
            if text not in self.choices:
                raise ValueError(f"expected one of {', '.join(self.choices)}")
            return text
        return text


def _scalar_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def load_options(value: Any, errors: Collector, fallback: Loc) -> dict[str, OptionSpec]:
    """The `options:` section: {name: {type, default?, choices?, range?, mirrors?, doc?}}."""
    out: dict[str, OptionSpec] = {}
    if value is None:
        return out
    top = Reader(value, "options", errors, fallback)
    for name in list(top.map):
        r = Reader(top.get(name, dict), f"option '{name}'", errors, top.key_loc(name))
        typ = r.get("type", str, "str", required=True)
        if typ not in TYPES:
            errors.error(r.value_loc("type"), f"option '{name}': unknown type '{typ}'", did_you_mean(str(typ), TYPES, "types"))
            typ = "str"
        choices: tuple[str, ...] = ()
        if typ == "choice":
            raw = r.get("choices", list, [], required=True) or []
            choices = tuple(_scalar_text(c) for c in raw)
            if not choices:
                errors.error(r.key_loc("choices") if "choices" in r.map else r.loc,
                             f"option '{name}': a choice needs its `choices: [...]`", "list the accepted values")
        elif "choices" in r.map:
            r.get("choices", list)
            errors.error(r.key_loc("choices"), f"option '{name}': `choices` is for `type: choice`",
                         "write `type: choice`, or drop `choices`")
        rng = None
        if "range" in r.map:
            raw = r.get("range", list)
            if typ != "int":
                errors.error(r.key_loc("range"), f"option '{name}': `range` is for `type: int`", "drop `range`")
            elif raw is not None and (len(raw) != 2 or not all(isinstance(x, int) and not isinstance(x, bool) for x in raw)
                                      or raw[0] > raw[1]):
                errors.error(r.value_loc("range"), f"option '{name}': range must be [LO, HI] integers, LO <= HI",
                             "e.g. range: [0, 4]")
            elif raw is not None:
                rng = (int(raw[0]), int(raw[1]))
        mirrors = str(r.get("mirrors", str, "") or "")
        doc = str(r.get("doc", str, "") or "")
        spec = OptionSpec(str(name), typ, None, mirrors, doc, top.key_loc(name), choices, rng)
        if "default" in r.map:
            raw = r.get("default", (str, int, bool))
            if raw is not None:
                try:
                    spec = OptionSpec(spec.name, typ, spec.parse(_scalar_text(raw)), mirrors, doc, spec.loc, choices, rng)
                except ValueError as e:
                    errors.error(r.value_loc("default"), f"option '{name}': bad default: {e}",
                                 f"the default must be a valid {spec.describe_type()}")
        r.done()
        out[str(name)] = spec
    top.done()
    return out


def resolve_options(declared: dict[str, OptionSpec], given: dict[str, str],
                    locs: dict[str, Loc] | None = None) -> dict[str, str]:
    """Check given options against the declarations and return their canonical texts.
    Unknown keys and badly typed values are collected into one InputError (exit 2)."""
    if not declared:
        return dict(given)
    problems: list[Problem] = []
    out: dict[str, str] = {}
    for key, text in given.items():
        loc = (locs or {}).get(key) or Loc("--option")
        spec = declared.get(key)
        if spec is None:
            problems.append(Problem(loc, f"unknown option '{key}'",
                                    did_you_mean(key, declared, "options") + " (`memconflict pipeline` lists them)"))
            continue
        try:
            out[key] = spec.parse(str(text))
        except ValueError as e:
            hint = did_you_mean(str(text), spec.choices) if spec.type == "choice" else ""
            if not hint.startswith("did you mean"):
                hint = f"{key} is {spec.describe_type()}" + (f": {spec.doc}" if spec.doc else "")
            problems.append(Problem(loc, f"option '{key}': bad value '{text}': {e}", hint))
    if problems:
        raise InputError(problems)
    return out


def run_options(declared: dict[str, OptionSpec], given: dict[str, str], from_file: dict | None = None) -> dict[str, str]:
    """The options of one run: the graph file's `options:` (located at their lines), then
    `given` (`--option`, which wins), checked and canonical."""
    from_file = from_file or {}
    locs = dict(getattr(from_file, "value_locs", {}) or {})
    merged = {**from_file, **given}
    for key in given:
        locs[key] = Loc("--option")
    return resolve_options(declared, merged, locs)
