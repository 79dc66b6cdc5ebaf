"""Rules are data: no module of the engine writes a GE op type or a GE attribute key
the pack knows as a string literal (STYLE §1) — it reads them from the pack.

The names come from the shipped pack: the op registry and op class members, the
attribute keys it declares (`attr_keys:`), every `_...` key among its YAML values,
and every string its DSL hands to an attribute primitive (`attr(node, "reference")`).
Format code is exempt: it reads and writes GE's files, whose layout is not pack data.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from engine.core.resources import default_pack_dir
from engine.core.yamlloc import load_yaml
from engine.dsl.ast import Call, Const, Expr, walk
from engine.passes.catalog import load_pack

ROOT = Path(__file__).resolve().parents[1]
# Note [format code]: GE's dump text/binary codec and the YAML graph form (engine/core), the
# generated protos, and GeTensorDesc's serializer (`_init_value`, `format_for_int`, ...).
FORMAT_CODE = {"engine/core/dumpio.py", "engine/core/yamlgraph.py", "engine/varmgr/desc.py"}
ATTR_PRIMITIVES = {"attr", "has_attr", "attr_true", "list_of", "desc_attr", "set_attr", "append_attr",
                   "set_desc_attr", "graph_attr_true"}
KEY_LIKE = re.compile(r"_[A-Za-z][A-Za-z0-9_]*")


def _yaml_walk(v, keys: set, values: set) -> None:
    if isinstance(v, dict):
        keys.update(str(k) for k in v)
        for x in v.values():
            _yaml_walk(x, keys, values)
    elif isinstance(v, list):
        for x in v:
            _yaml_walk(x, keys, values)
    elif isinstance(v, str):
        values.add(str(v))


def ge_names() -> set[str]:
    pack = load_pack(None)
    op_types = set(pack.ops) | {t for c in pack.classes.values() for t in c.types}
    attr_keys = set(pack.attr_keys.values())
    schema_words: set[str] = set()       # the pack's own mapping keys (sections, predicates, ...)
    values: set[str] = set()
    for f in sorted(default_pack_dir().glob("*.yaml")):
        _yaml_walk(load_yaml(f), schema_words, values)
    attr_keys |= {v for v in values if KEY_LIKE.fullmatch(v)}
    for _, value in pack.dsl_sources:
        if not isinstance(value, Expr):
            continue
        for e in walk(value):
            if isinstance(e, Call) and e.fn in ATTR_PRIMITIVES:
                strings = {a.value for a in e.args if isinstance(a, Const) and isinstance(a.value, str)}
                attr_keys |= {s for s in strings if KEY_LIKE.fullmatch(s) or s not in schema_words}
            elif isinstance(e, Const) and isinstance(e.value, str) and e.value in op_types | attr_keys:
                attr_keys.add(e.value)
    return op_types | attr_keys


def engine_modules() -> list[Path]:
    out = []
    for f in sorted((ROOT / "engine").rglob("*.py")):
        rel = f.relative_to(ROOT).as_posix()
        if rel not in FORMAT_CODE and not rel.startswith("engine/proto/"):
            out.append(f)
    return out


def string_literals(path: Path) -> list[tuple[int, str]]:
    """Every string constant of a module but its docstrings."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.body:
            first = n.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docs.add(id(first.value))
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]


NAMES = ge_names()


def test_the_names_are_collected():
    # op types, declared keys, YAML-config keys and DSL attribute strings all take part
    assert {"HcomAllReduce", "Identity", "_parent_node_index", "_ge_attr_op_kernel_lib_name",
            "_next_iteration", "_input_mutable", "reference"} <= NAMES
    assert "original_type" not in NAMES          # a pack key (graph_lint.original_type), not only GE's


@pytest.mark.parametrize("path", engine_modules(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_ge_name_in_engine(path):
    found = [(line, s) for line, s in string_literals(path) if s in NAMES]
    assert not found, f"{path.relative_to(ROOT)}: GE names written in the engine (read them from the pack): {found}"


def test_the_scan_sees_a_planted_name(tmp_path):
    f = tmp_path / "m.py"
    f.write_text('"""doc mentions HcomAllReduce"""\nKEY = "_parent_node_index"\n')
    assert [s for _, s in string_literals(f) if s in NAMES] == ["_parent_node_index"]
