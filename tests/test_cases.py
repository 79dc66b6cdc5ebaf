"""Every annotated fixture under tests/cases/ (GE unit-test rows and our own): its `expect:`
block holds, and its decisions match the golden file next to it (X.yaml → X.golden)."""
from __future__ import annotations

import pytest

from golden import check_golden, render_decisions
from harness import CASES, ROOT, case_files, check_expectations, run_fixture, shared_pack
from engine.passes.context import RunContext
from engine.core.dumpio import build_model, serialize_model
from engine.proto import ge_ir_pb2 as pb
from engine.passes.manager import resolve_passes, run_passes

FILES = case_files()


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(CASES)) for p in FILES])
def test_case(path, update_golden, monkeypatch):
    monkeypatch.chdir(ROOT)
    pack = shared_pack()
    r = run_fixture(path, pack)
    rel = path.relative_to(ROOT).as_posix()
    decisions = render_decisions(r.ctx, r.failure, f"{rel} (passes: {', '.join(r.expect['passes'])})")
    if update_golden:
        check_golden(path.with_suffix(".golden"), decisions, True, "tests/test_cases.py")
    check_expectations(r.ctx, r.expect, r.status, r.failure)
    if "rerun_inserted" in r.expect:
        # the output as GE dumps it, with each output's consumer order (GE's sort reads it;
        # Note [pipeline fixpoint] in tests/test_pipeline_real.py)
        r.ctx.model.emit_peer_index = True
        again = pb.ModelDef()
        again.ParseFromString(serialize_model(r.ctx.model))
        ctx2 = RunContext(pack, build_model(again), r.ctx.options)
        run_passes(ctx2, resolve_passes(pack, list(r.expect["passes"]), r.ctx.options))
        assert len(ctx2.insertions) == r.expect["rerun_inserted"], [i.name for i in ctx2.insertions]
    check_golden(path.with_suffix(".golden"), decisions, update_golden, "tests/test_cases.py")
