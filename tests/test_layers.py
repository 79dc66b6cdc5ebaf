"""The package tree is the architecture: each layer imports only from the layers
below it (function-level imports included), and no module imports itself back
through any chain of imports. The README's layer table is this LAYERS list."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[1]
ENGINE = ROOT / "engine"

# bottom to top; a module may import from its own layer and the layers before it
LAYERS = ["proto", "core", "dsl", "pack", "varmgr", "runtime", "passes", "report", "diff", "cli"]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def engine_modules() -> dict[str, Path]:
    return {module_name(p): p for p in ENGINE.rglob("*.py") if not p.name.endswith("_pb2.py")}


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """Every engine module `name` imports, wherever the import statement stands."""
    out = set()
    pkg = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("engine"))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            if not base.startswith("engine"):
                continue
            for a in node.names:        # `from engine.x import y` imports engine.x.y when y is a module
                sub = f"{base}.{a.name}"
                out.add(sub if sub in known else base)
    return {m for m in out if m in known and m != name}


def layer_of(module: str) -> int | None:
    parts = module.split(".")
    if len(parts) < 2:
        return None                      # the `engine` package itself (version only)
    return LAYERS.index(parts[1]) if parts[1] in LAYERS else -1


def import_graph() -> nx.DiGraph:
    mods = engine_modules()
    g = nx.DiGraph()
    for name, path in mods.items():
        g.add_node(name)
        for dep in imports_of(name, path, set(mods)):
            g.add_edge(name, dep)
    return g


def test_every_module_is_in_a_layer():
    stray = [m for m in engine_modules() if layer_of(m) == -1]
    assert not stray, f"modules outside the layered packages: {stray}"


def test_imports_only_go_down():
    bad = []
    for a, b in import_graph().edges:
        la, lb = layer_of(a), layer_of(b)
        if la is not None and lb is not None and lb > la:
            bad.append(f"{a} ({LAYERS[la]}) imports {b} ({LAYERS[lb]})")
    assert not bad, "\n".join(sorted(bad))


def test_no_import_cycle():
    cycles = [c for c in nx.simple_cycles(import_graph())]
    assert not cycles, "\n".join(" -> ".join(c + [c[0]]) for c in sorted(cycles)[:20])


def test_readme_layer_table_matches():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    table = re.findall(r"^\| `engine/(\w+)/` \|", text, re.M)
    assert table == LAYERS, f"README layer table lists {table}, the code has {LAYERS}"
