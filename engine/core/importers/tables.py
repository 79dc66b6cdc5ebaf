"""The importers' GE knowledge, read from the pack folder: `import/ir.yaml` (GE's op IR:
port names per op type) and `import/FORMAT.yaml` (how GE's parser of that format maps
ops and builds Data/Const/NetOutput). An overlay pack without them uses its base's.

Note [import tables]: they sit beside the pack, not in it: the pack loader (a layer
above) validates rules, these are read by the I/O layer before any pack code runs,
each strictly, with `file:line:col` errors.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.core.errors import Collector, InputError, Loc, Problem, display_path
from engine.core.schema import Reader, str_list
from engine.core.yamlloc import load_yaml, loc_of

FOLDER = "import"


@dataclass(frozen=True, slots=True)
class IrPort:
    name: str
    kind: str           # "" required, "?" optional, "*" dynamic


@dataclass(frozen=True, slots=True)
class IrOp:
    type: str
    inputs: tuple[IrPort, ...]
    outputs: tuple[IrPort, ...]
    loc: Loc
    source: str = "ir"      # "ir" (GE's op IR) or "pack" (the pack's op signature)

    def input_names(self, count: int) -> list[str]:
        return expand(self.inputs, count)

    def output_names(self, count: int) -> list[str]:
        return expand(self.outputs, count)

    @property
    def fixed_outputs(self) -> int:
        return sum(1 for p in self.outputs if p.kind == "")

    def is_ref(self) -> bool:
        names = {p.name for p in self.inputs}
        return any(p.name in names for p in self.outputs)


def expand(ports: tuple[IrPort, ...], count: int) -> list[str]:
    """GE's names for `count` ports of an IR: required ones first claimed, optional ones
    while inputs remain, the rest to the dynamic port (named x0, x1, ...)."""
    required = sum(1 for p in ports if p.kind == "")
    optional = sum(1 for p in ports if p.kind == "?")
    spare_opt = max(0, min(optional, count - required))
    dynamic = max(0, count - required - optional)
    out: list[str] = []
    for p in ports:
        if p.kind == "":
            out.append(p.name)
        elif p.kind == "?":
            if spare_opt:
                out.append(p.name)
                spare_opt -= 1
        else:
            out.extend(f"{p.name}{i}" for i in range(dynamic))
            dynamic = 0
    return out[:count]


@dataclass
class Tables:
    """One format's table plus the IR, as read."""
    fmt: str
    file: str
    raw: Any
    ir: dict[str, IrOp] = field(default_factory=dict)


def _parse_ports(text: str, loc: Loc, what: str, errors: Collector) -> tuple[IrPort, ...]:
    out = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        kind = item[-1] if item[-1] in "?*" else ""
        name = item[:-1] if kind else item
        if not name.isidentifier():
            errors.error(loc, f"{what}: bad port name '{item}'", "ports are names, optional ones end in ?, dynamic ones in *")
            continue
        out.append(IrPort(name, kind))
    return tuple(out)


def read_ir(path: Path) -> dict[str, IrOp]:
    data = load_yaml(path)
    errors = Collector()
    file = display_path(path)
    r = Reader(data, file, errors, Loc(file, 1, 1))
    entries = r.get("ir", dict, {}, required=True)
    r.done()
    ops: dict[str, IrOp] = {}
    for op, text in entries.items():
        loc = entries.value_locs.get(op, Loc(file)) if hasattr(entries, "value_locs") else Loc(file)
        if not isinstance(text, str) or "->" not in text:
            errors.error(loc, f"ir: {op} must be \"INPUTS -> OUTPUTS\"", 'e.g. Assign: "ref, value -> ref"')
            continue
        ins, _, outs = text.partition("->")
        ops[str(op)] = IrOp(str(op), _parse_ports(ins, loc, op, errors), _parse_ports(outs, loc, op, errors), loc)
    errors.check()
    return ops


def pack_chain(pack_dir: Path) -> list[Path]:
    """The pack folder and its bases (`base:` in pack.yaml), nearest first."""
    out: list[Path] = []
    root = Path(pack_dir)
    while (root / "pack.yaml").is_file() and root.resolve() not in [p.resolve() for p in out]:
        out.append(root)
        try:
            top = load_yaml(root / "pack.yaml")
        except InputError:
            break
        base = top.get("base") if isinstance(top, dict) else None
        if not isinstance(base, str):
            break
        root = (root / base) if not Path(base).is_absolute() else Path(base)
    return out


def find_table(pack_dir: Path, name: str) -> Path | None:
    for folder in pack_chain(pack_dir):
        p = folder / FOLDER / name
        if p.is_file():
            return p
    return None


def load_tables(pack_dir: Path, fmt: str) -> Tables:
    path = find_table(pack_dir, f"{fmt}.yaml")
    if path is None:
        raise InputError(Problem(Loc(display_path(pack_dir)), f"the pack has no {FOLDER}/{fmt}.yaml (how GE's parser reads {fmt} models)",
                                 f"add {FOLDER}/{fmt}.yaml to the pack, or use a pack that has one (rules/ge)"))
    raw = load_yaml(path)
    ir_path = find_table(pack_dir, "ir.yaml")
    ir = read_ir(ir_path) if ir_path is not None else {}
    return Tables(fmt, display_path(path), raw, ir)


def ir_with_pack(tables: Tables, pack) -> dict[str, IrOp]:
    """GE's IR, and for op types it lacks, the pack's op signatures (source "pack")."""
    ops = dict(tables.ir)
    for op_type, spec in (getattr(pack, "ops", None) or {}).items():
        sig = getattr(spec, "signature", None)
        if op_type in ops or sig is None:
            continue
        conv = lambda ports: tuple(IrPort(p.name, "*" if "*" in p.marks else "?" if "?" in p.marks else "") for p in ports)
        ops[op_type] = IrOp(op_type, conv(sig.inputs), conv(sig.outputs), spec.loc, "pack")
    return ops


def note_ports(unknown: dict[str, int], types: set[str], ir: dict[str, IrOp], pack, notes: list | None) -> None:
    """The import notes on port names: op types without any IR (`unknown`: type → count)
    and the `types` whose ports came from the pack's op signatures."""
    if notes is None:
        return
    if unknown:
        listed = ", ".join(f"{t} ({n})" for t, n in sorted(unknown.items()))
        notes.append(("import", f"no GE IR known for {len(unknown)} op type(s), ports left unnamed "
                                f"(no reference semantics): {listed}"))
    if pack is not None:
        from_pack = sorted(t for t in types if t in ir and ir[t].source == "pack")
        if from_pack:
            notes.append(("import", "port names from the pack's op signatures (not in import/ir.yaml): " + ", ".join(from_pack)))


def names(value, what: str, errors: Collector, fallback: Loc) -> list[str]:
    return [str(x) for x in str_list(value, what, errors, fallback)] if value is not None else []


def loc(value, fallback: Loc) -> Loc:
    return loc_of(value, fallback)
