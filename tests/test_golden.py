"""Golden decision files of the default pipeline on the shipped example and on the real GE
dumps (tests/golden/), and rules about the golden files themselves. The fixtures' own golden
files are checked by test_cases.py. Refresh with `--update-golden` (see tests/golden.py)."""
from __future__ import annotations

import pytest

from golden import check_golden, render_decisions
from harness import CASES, HERE, ROOT, case_files, ge_dumps, needs_ge_dumps, shared_pack
from engine.core.dumpio import load_model
from engine.core.errors import PassFailure
from engine.passes.context import RunContext
from engine.passes.manager import check_graph, resolve_passes, run_passes

GOLDEN = HERE / "golden"
DUMPS = ge_dumps()
DUMP_NAMES = ["ge_proto_00015_OptimizeQuantGraph_FeGraphFusionAfter.txt",
              "ge_proto_00017_OptimizeOriginalGraph_FeGraphFusionAfter.txt",
              "ge_proto_00026_afterUBMatch.txt", "ge_proto_00046_afterUBMatch.txt", "origin_model.txt"]


def pipeline_decisions(graph, title: str) -> str:
    pack = shared_pack()
    ctx = RunContext(pack, load_model(graph), {})
    check_graph(ctx)
    failure = None
    try:
        run_passes(ctx, resolve_passes(pack, None, {}))
    except PassFailure as exc:
        failure = exc
    return render_decisions(ctx, failure, f"{title} (default pipeline)")


def test_shipped_example(update_golden, monkeypatch):
    monkeypatch.chdir(ROOT)
    text = pipeline_decisions(ROOT / "examples" / "train_step.pbtxt", "examples/train_step.pbtxt")
    check_golden(GOLDEN / "examples" / "train_step.golden", text, update_golden, "tests/test_golden.py")


@pytest.mark.parametrize("name", DUMP_NAMES)
@needs_ge_dumps
def test_ge_dump(name, update_golden, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert (DUMPS / name).is_file(), f"{DUMPS / name}: the shared GE dump is missing"
    text = pipeline_decisions(DUMPS / name, f"../shared/fixtures/ge-dumps/{name}")
    check_golden(GOLDEN / "ge-dumps" / (name.rsplit(".", 1)[0] + ".golden"), text, update_golden,
                 "tests/test_golden.py")


@needs_ge_dumps
def test_every_dump_has_a_golden_file():
    assert sorted(p.name for p in DUMPS.glob("*.txt")) == DUMP_NAMES


def test_every_golden_file_has_its_graph():
    """A renamed or deleted fixture leaves no stale golden file behind, and every fixture has one."""
    stale = [str(g.relative_to(ROOT)) for g in sorted(CASES.rglob("*.golden")) if not g.with_suffix(".yaml").is_file()]
    stale += [str(g.relative_to(ROOT)) for g in sorted((GOLDEN / "ge-dumps").glob("*.golden"))
              if g.stem + ".txt" not in DUMP_NAMES]
    assert stale == [], "golden files without a graph (delete them)"
    missing = [str(p.relative_to(ROOT)) for p in case_files() if not p.with_suffix(".golden").is_file()]
    assert missing == [], "fixtures without a golden file (run pytest tests/test_cases.py --update-golden)"
