"""The YAML reader's two paths (engine/core/yamlloc.py): libyaml's events composed
without recursion (Note [libyaml events]) and PyYAML's limit-counting composer give the
same located values, ends and errors."""
from __future__ import annotations

import glob
from pathlib import Path

import pytest
import yaml

from engine.core import yamlloc
from engine.core.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(yamlloc._CLoader is None, reason="PyYAML built without libyaml")


def tree(v):
    if isinstance(v, yamlloc.YMap):
        return ("M", v.loc, v.end, tuple((k, v.key_locs[k], v.value_locs[k], v.value_ends[k], tree(x)) for k, x in v.items()))
    if isinstance(v, yamlloc.YList):
        return ("L", v.loc, v.end, tuple(v.item_locs), tuple(v.item_ends), tuple(tree(x) for x in v))
    return (type(v).__name__, v, getattr(v, "loc", None), getattr(v, "end", None))


def both(monkeypatch, path=None, text=None):
    out = []
    for fast in (True, False):
        monkeypatch.setattr(yamlloc, "_CLoader", yaml.CSafeLoader if fast else None)
        try:
            out.append(tree(yamlloc.load_yaml(path or "x.yaml", text)))
        except InputError as exc:
            out.append(("error", exc.render()))
    return out


def test_every_shipped_yaml_file_reads_the_same(monkeypatch):
    files = sorted(glob.glob(str(ROOT / "rules" / "**" / "*.yaml"), recursive=True))
    files += sorted(glob.glob(str(ROOT / "tests" / "cases" / "**" / "*.yaml"), recursive=True))
    assert len(files) > 200
    for f in files:
        fast, slow = both(monkeypatch, f)
        assert fast == slow, f


@pytest.mark.parametrize("text", [
    "a: 1\nb: [1, 2.5, true, ~, '3', 0x1f, 1_000]\nc: {d: e}\n",
    "a: &x {b: [1, 2]}\nc: *x\nd: *x\n",
    "- &s text\n- *s\n- - - deep\n    - more\n",
    "a:\nb: |\n  block\n  text\n\nc: >\n  folded\n",
    "a: !!str 12\nb: !!int '7'\nc: !custom x\n",
    "? [complex]\n: v\n",
    "a: 1\na: 2\n",
    "a: [1, 2\n",
    "a: *nope\n",
    "a: &x [*x]\n",
    "a: &x 1\nb: &x 2\n",
    "--- 1\n--- 2\n",
    "",
    "# only a comment\n",
    "a: \x07\n",
    "[" * 120 + "]" * 120,
])
def test_edge_cases_read_the_same(monkeypatch, text):
    fast, slow = both(monkeypatch, text=text)
    assert fast == slow


def test_limits_hold_on_the_fast_path(monkeypatch):
    bomb = "a: &a [x, x]\n" + "".join(f"{c}: &{c} [*{p}, *{p}]\n" for p, c in zip("abcdefghijklmnopqr", "bcdefghijklmnopqrs"))
    fast, slow = both(monkeypatch, text=bomb)
    assert fast == slow and fast[0] == "error" and "aliases expand the document by more than 100,000 nodes" in fast[1]
    deep = "a: " + "[" * 150 + "]" * 150
    fast, slow = both(monkeypatch, text=deep)
    assert fast == slow and "nested more than 100 levels" in fast[1]
