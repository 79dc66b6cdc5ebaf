"""Every annotated fixture under tests/cases/ (GE unit-test rows and our own)."""
from __future__ import annotations

import pytest

from harness import CASES, case_files, check_expectations, run_case
from engine.passes.context import RunContext
from engine.core.dumpio import build_model, serialize_model
from engine.passes.catalog import load_pack
from engine.proto import ge_ir_pb2 as pb
from engine.passes.manager import resolve_passes, run_passes

PACK = load_pack()
FILES = case_files()


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(CASES)) for p in FILES])
def test_case(path):
    ctx, expect, status = run_case(path, PACK)
    check_expectations(ctx, expect, status)
    if "rerun_inserted" in expect:
        again = pb.ModelDef()
        again.ParseFromString(serialize_model(ctx.model))
        ctx2 = RunContext(PACK, build_model(again), ctx.options)
        run_passes(ctx2, resolve_passes(PACK, list(expect["passes"]), ctx.options))
        assert len(ctx2.insertions) == expect["rerun_inserted"], [i.name for i in ctx2.insertions]
