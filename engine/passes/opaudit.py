"""`memconflict rules audit`: the pack's op registry against GE's op IR.

What the pack says about ops is checked against the REG_OP definitions
(engine/pack/opir.py), each finding located on the pack side:

* `unknown-op` — an op the pack names (the registry or an op class) that the IR does not define;
* `ref-not-written` — the IR has an output named like input X (GE writes X in place) but the
  pack's signature does not write it (`X!` with an output X);
* `written-not-ref` — the reverse: the signature writes X, the IR has no ref on X;
* `port-count` / `port-name` — the signature's inputs or outputs differ in number, or by name
  or kind (`?` optional, `*` dynamic) at some position;
* `collective` — an op the IR names as a collective (`collectives.ir_prefix`) that the pack
  registers with another engine than `collectives.engine`, or the reverse.

The pack's `op_ir_audit:` section declares the collective convention and the accepted
exceptions (`{check, ops, reason}`); an exception that matches nothing is itself a finding
(`unused-exception`), so the list cannot go stale.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.core.errors import Collector, Loc, did_you_mean
from engine.core.schema import Reader, str_list
from engine.pack.model import Pack
from engine.pack.opir import OpIR
from engine.passes.registry import register_section

CHECKS = ("unknown-op", "ref-not-written", "written-not-ref", "port-count", "port-name", "collective",
          "unused-exception")


@dataclass(frozen=True, slots=True)
class Exception_:
    check: str
    ops: tuple[str, ...]
    reason: str
    loc: Loc


@dataclass(frozen=True)
class AuditConfig:
    collective_engine: str
    collective_prefix: str
    exceptions: tuple[Exception_, ...]
    loc: Loc


def load(value: Any, pack: Pack, errors: Collector) -> AuditConfig | None:
    r = Reader(value, "op_ir_audit", errors, Loc(str(pack.path)))
    r.get("doc", str, "")
    c = Reader(r.get("collectives", dict, {}), "op_ir_audit.collectives", errors, r.loc)
    engine = str(c.get("engine", str, ""))
    prefix = str(c.get("ir_prefix", str, ""))
    c.done()
    out = []
    items = r.get("exceptions", list, []) or []
    for i, item in enumerate(items):
        e = Reader(item, f"op_ir_audit.exceptions item {i + 1}", errors, items.item_locs[i])
        check = e.get("check", str, "", required=True)
        ops = str_list(e.get("ops", list, [], required=True), f"op_ir_audit.exceptions item {i + 1}: ops", errors, e.loc)
        reason = e.get("reason", str, "", required=True)
        e.done()
        if check and check not in CHECKS:
            errors.error(e.value_loc("check"), f"op_ir_audit: unknown check '{check}'", did_you_mean(check, CHECKS, "checks"))
        if not str(reason).strip():
            errors.error(e.loc, "op_ir_audit: an exception needs its reason", "write `reason: why the pack differs`")
        out.append(Exception_(str(check), tuple(map(str, ops)), str(reason), e.loc))
    r.done()
    if errors:
        return None
    return AuditConfig(engine, prefix, tuple(out), r.loc)


register_section("op_ir_audit", load)


@dataclass(frozen=True, slots=True)
class Finding:
    check: str
    op: str
    loc: Loc            # on the pack side
    message: str
    ir_loc: Loc | None = None
    reason: str = ""    # set when an exception accepts it
    excepted_at: Loc | None = None

    def to_json(self) -> dict:
        out = {"check": self.check, "op": self.op, "loc": str(self.loc), "message": self.message}
        if self.ir_loc is not None:
            out["ir_loc"] = str(self.ir_loc)
        if self.excepted_at is not None:
            out["reason"] = self.reason
            out["exception_loc"] = str(self.excepted_at)
        return out


@dataclass
class Audit:
    pack: Pack
    ir: OpIR
    findings: list[Finding] = field(default_factory=list)     # not excepted
    excepted: list[Finding] = field(default_factory=list)
    named: int = 0                                             # op types the pack names

    def to_json(self) -> dict:
        ir_refs = sum(1 for o in self.ir.ops.values() if o.refs)
        return {"pack": {"name": self.pack.name, "version": self.pack.version},
                "ir": {"source": self.ir.source, "files": self.ir.files, "ops": len(self.ir.ops),
                       "ops_with_ref_outputs": ir_refs, "duplicates": self.ir.duplicates},
                "pack_ops_named": self.named, "findings": [f.to_json() for f in self.findings],
                "excepted": [f.to_json() for f in self.excepted],
                "counts": {"findings": len(self.findings), "excepted": len(self.excepted)}}


def _ports(sig_side) -> list[tuple[str, str]]:
    return [(p.name, "".join(m for m in p.marks if m in "?*")) for p in sig_side]


def _fmt(ports) -> str:
    return ", ".join(n + k for n, k in ports)


def audit(pack: Pack, ir: OpIR) -> Audit:
    cfg: AuditConfig | None = pack.configs.get("op_ir_audit")
    raw: list[Finding] = []
    names: dict[str, Loc] = {}
    for c in pack.classes.values():
        for t in sorted(c.types):
            names.setdefault(t, c.loc)
    for op in pack.ops.values():
        names[op.type] = op.loc
    for name, loc in sorted(names.items()):
        if name not in ir.ops:
            raw.append(Finding("unknown-op", name, loc, f"{name} is named by the pack but the op IR does not define it"))
    for op in pack.ops.values():
        io = ir.ops.get(op.type)
        if io is None:
            continue
        if op.signature is not None:
            raw += _signature_findings(op, io)
        if cfg is not None and cfg.collective_prefix:
            ir_coll = op.type.startswith(cfg.collective_prefix)
            pack_coll = (op.engine or pack.default_engine) == cfg.collective_engine
            if ir_coll != pack_coll:
                what = (f"the IR names it a collective ({cfg.collective_prefix}...) but the pack gives it engine "
                        f"{op.engine or pack.default_engine}") if ir_coll else \
                       f"the pack gives it the collective engine {cfg.collective_engine} but the IR does not name it a collective"
                raw.append(Finding("collective", op.type, op.loc, f"{op.type}: {what}", io.loc))
    out = Audit(pack, ir, named=len(names))
    used: set[tuple[int, str]] = set()
    excs = cfg.exceptions if cfg is not None else ()
    for f in raw:
        k = next((k for k, e in enumerate(excs) if e.check == f.check and f.op in e.ops), None)
        if k is None:
            out.findings.append(f)
        else:
            used.add((k, f.op))
            out.excepted.append(Finding(f.check, f.op, f.loc, f.message, f.ir_loc, excs[k].reason, excs[k].loc))
    for k, e in enumerate(excs):
        for name in e.ops:
            if (k, name) not in used:
                out.findings.append(Finding("unused-exception", name, e.loc,
                                            f"the exception for {e.check} on {name} matches no finding: remove it"))
    return out


def _signature_findings(op, io) -> list[Finding]:
    sig, found = op.signature, []
    loc = sig.loc if sig.loc.file != "<memory>" else op.loc
    ins, outs = _ports(sig.inputs), _ports(sig.outputs)
    out_names = {n for n, _ in outs}
    written = {p.name for p in sig.inputs if p.mutated and p.name in out_names}
    claimed = {p.name for p in sig.inputs if p.mutated or p.name in out_names}
    refs = set(io.refs)
    for x in io.refs:
        if x not in written:
            found.append(Finding("ref-not-written", op.type, loc,
                                 f"{op.type}: the IR writes input '{x}' in place (an output of the same name) but the "
                                 f"signature {sig} does not (write `{x}!` and an output `{x}`)", io.loc))
    for x in sorted(claimed - refs):
        found.append(Finding("written-not-ref", op.type, loc,
                             f"{op.type}: the signature {sig} writes input '{x}' but the IR has no output named '{x}'",
                             io.loc))
    for side, mine, theirs in (("inputs", ins, io.inputs), ("outputs", outs, io.outputs)):
        if len(mine) != len(theirs):
            found.append(Finding("port-count", op.type, loc,
                                 f"{op.type}: {len(mine)} {side} ({_fmt(mine)}) but the IR has {len(theirs)} "
                                 f"({_fmt(theirs)})", io.loc))
        elif mine != list(theirs):
            found.append(Finding("port-name", op.type, loc,
                                 f"{op.type}: {side} ({_fmt(mine)}) but the IR has ({_fmt(theirs)})", io.loc))
    return found


def render(a: Audit) -> str:
    ir = a.ir
    lines = [f"{a.pack.name} {a.pack.version} against {ir.source}: {len(ir.ops)} IR ops "
             f"({sum(1 for o in ir.ops.values() if o.refs)} with ref outputs) in {ir.files} file(s); "
             f"{a.named} op types named by the pack"]
    for f in a.findings:
        lines.append(f"{f.loc}: {f.check}: {f.message}" + (f"  [IR {f.ir_loc}]" if f.ir_loc else ""))
    for f in a.excepted:
        lines.append(f"{f.loc}: {f.check} (accepted at {f.excepted_at.file}:{f.excepted_at.line}): {f.op}: {f.reason}")
    lines.append(f"{len(a.findings)} finding(s), {len(a.excepted)} accepted exception(s)")
    return "\n".join(lines)
