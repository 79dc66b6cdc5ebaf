"""Strict reading of located YAML values: unknown keys, missing keys and wrong
types become collected `file:line:col` errors with a hint."""
from __future__ import annotations

from typing import Any

from engine.core.errors import Collector, Loc, did_you_mean
from engine.core.yamlloc import YList, YMap, YStr

_TYPE_NAMES = {str: "a string", int: "an integer", bool: "true or false", list: "a list",
               dict: "a mapping", float: "a number"}


class Reader:
    """Reads one mapping strictly; `done()` reports keys nobody asked for."""

    def __init__(self, value: Any, what: str, errors: Collector, fallback: Loc):
        self.what = what
        self.errors = errors
        self.ok = isinstance(value, dict)
        self.map: YMap | dict = value if self.ok else {}
        self.loc: Loc = getattr(value, "loc", fallback)
        self.used: set[str] = set()
        self.allowed: set[str] = set()
        if not self.ok and value is not None:
            errors.error(self.loc, f"{what} must be a mapping", "write `key: value` lines under it")

    def key_loc(self, key: str) -> Loc:
        return getattr(self.map, "key_locs", {}).get(key, self.loc)

    def value_loc(self, key: str) -> Loc:
        return getattr(self.map, "value_locs", {}).get(key, self.loc)

    def get(self, key: str, typ: type | tuple, default: Any = None, required: bool = False) -> Any:
        self.allowed.add(key)
        if key not in self.map:
            if required and self.ok:
                self.errors.error(self.loc, f"{self.what}: missing key '{key}'", f"add `{key}:`")
            return default
        self.used.add(key)
        value = self.map[key]
        if not _is(value, typ):
            want = typ if isinstance(typ, tuple) else (typ,)
            names = " or ".join(_TYPE_NAMES.get(t, t.__name__) for t in want)
            self.errors.error(self.value_loc(key), f"{self.what}: '{key}' must be {names}",
                              f"got {describe(value)}")
            return default
        return value

    def done(self) -> None:
        if not self.ok:
            return
        for key in self.map:
            if key not in self.used and key not in self.allowed:
                self.errors.error(self.key_loc(key), f"{self.what}: unknown key '{key}'",
                                  did_you_mean(str(key), self.allowed, "keys"))


def _is(value: Any, typ) -> bool:
    types = typ if isinstance(typ, tuple) else (typ,)
    for t in types:
        if t is int and isinstance(value, bool):
            continue
        if t is float and isinstance(value, (int, float)) and not isinstance(value, bool):
            return True
        if isinstance(value, t):
            return True
    return False


def describe(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"{str(value).lower()}"
    if isinstance(value, (YMap, dict)):
        return "a mapping"
    if isinstance(value, (YList, list)):
        return "a list"
    if isinstance(value, (YStr, str)):
        return f"the string '{value}'"
    return f"{type(value).__name__} {value!r}"


def str_list(value: Any, what: str, errors: Collector, fallback: Loc) -> list[YStr]:
    """A list of strings (each keeps its location)."""
    if not isinstance(value, list):
        errors.error(getattr(value, "loc", fallback), f"{what} must be a list of names", "write [A, B, C]")
        return []
    out = []
    for i, item in enumerate(value):
        if not isinstance(item, str):
            loc = value.item_locs[i] if hasattr(value, "item_locs") else fallback
            errors.error(loc, f"{what}: item {i + 1} must be a name", f"got {describe(item)}")
            continue
        out.append(item)
    return out


def loc_in(container: Any, key: Any, fallback: Loc) -> Loc:
    if isinstance(container, YMap):
        return container.value_locs.get(key, container.loc)
    if isinstance(container, YList) and isinstance(key, int) and key < len(container.item_locs):
        return container.item_locs[key]
    return fallback
