"""The registry of specialised section differs (engine/diff/sections.py fills it;
engine/diff/packdiff.py consults it before its generic comparison)."""
from __future__ import annotations

from typing import Callable

# section or algorithm name → differ(d, section, old, new) → top-level keys it handled
DIFFERS: dict[str, Callable[..., set]] = {}


def register_differ(name: str):
    def deco(fn):
        if name in DIFFERS:
            raise RuntimeError(f"differ {name} registered twice")
        DIFFERS[name] = fn
        return fn
    return deco
