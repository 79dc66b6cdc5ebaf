"""GE's op IR, read as text: the `REG_OP(Name) .INPUT(x, ...) .OUTPUT(y, ...) ...`
definitions of GE's op proto headers, or the same lines in the docstrings of
torch-npu's `auto_generated_ge_raw_ops.py` (never imported: read line by line).

`read_op_ir(path)` takes a file or a folder (every `*.h`, `*.hpp`, `*.py` under it,
in path order) and returns the ops by name with their ports in order. A port is
(name, kind): kind "" for INPUT/OUTPUT, "?" for OPTIONAL_INPUT, "*" for
DYNAMIC_INPUT/DYNAMIC_OUTPUT — the marks the pack's signatures use. An output
named like an input is a ref: GE writes that input in place.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from engine.core.errors import InputError, Loc, Problem

_REG = re.compile(r"\bREG_OP\(\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)")
_PORT = re.compile(r"^\s*\.(INPUT|OPTIONAL_INPUT|DYNAMIC_INPUT|OUTPUT|DYNAMIC_OUTPUT)\(\s*([A-Za-z_][A-Za-z0-9_]*)\s*[,)]")
_END = re.compile(r"\bOP_END_FACTORY_REG\(|^\s*(\"\"\"|''')")
KIND = {"INPUT": "", "OPTIONAL_INPUT": "?", "DYNAMIC_INPUT": "*", "OUTPUT": "", "DYNAMIC_OUTPUT": "*"}
SUFFIXES = (".h", ".hpp", ".py")


@dataclass
class IrOp:
    name: str
    loc: Loc
    inputs: list[tuple[str, str]] = field(default_factory=list)
    outputs: list[tuple[str, str]] = field(default_factory=list)

    @property
    def refs(self) -> list[str]:
        """Inputs that have an output of the same name (written in place)."""
        outs = {n for n, _ in self.outputs}
        return [n for n, _ in self.inputs if n in outs]

    def signature(self) -> str:
        ins = ", ".join(n + ("!" if n in self.refs else "") + k for n, k in self.inputs)
        return f"{self.name}({ins}) -> ({', '.join(n + k for n, k in self.outputs)})"


@dataclass
class OpIR:
    source: str
    ops: dict[str, IrOp]
    files: int
    duplicates: int = 0       # names defined again (the first definition is kept)


def read_op_ir(path: str | Path) -> OpIR:
    """The REG_OP definitions under path (a file or a folder); exit 2 when there are none."""
    p = Path(path)
    if p.is_dir():
        files = sorted(f for f in p.rglob("*") if f.is_file() and f.suffix in SUFFIXES)
    elif p.is_file():
        files = [p]
    else:
        raise InputError(Problem(Loc(str(path)), "no such file or folder",
                                 "give torch-npu's auto_generated_ge_raw_ops.py or a folder of REG_OP headers"))
    ops: dict[str, IrOp] = {}
    dup = 0
    for f in files:
        try:
            text = f.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise InputError(Problem(Loc(str(f)), f"cannot read: {exc.strerror}", "")) from None
        for op in _parse(text, str(f)):
            if op.name in ops:
                dup += 1
                continue
            ops[op.name] = op
    if not ops:
        raise InputError(Problem(Loc(str(path)), "no REG_OP(...) definition found",
                                 "give torch-npu's auto_generated_ge_raw_ops.py (pip download --no-deps torch-npu) "
                                 "or a folder of GE op proto headers"))
    return OpIR(str(path), dict(sorted(ops.items())), len(files), dup)


def _parse(text: str, file: str):
    cur: IrOp | None = None
    for k, line in enumerate(text.splitlines(), 1):
        m = _REG.search(line)
        if m is not None and not line.lstrip().startswith(("//", "#")):
            if cur is not None:
                yield cur
            cur = IrOp(m.group(1), Loc(file, k, m.start() + 1))
            rest = line[m.end():]
            if not rest.strip(" \\n"):
                continue
            line = rest
        if cur is None:
            continue
        pm = _PORT.match(line)
        if pm is not None:
            side = cur.inputs if pm.group(1).endswith("INPUT") else cur.outputs
            side.append((pm.group(2), KIND[pm.group(1)]))
        elif _END.search(line):
            yield cur
            cur = None
    if cur is not None:
        yield cur
