"""`run --budget`: a budgeted pass that runs out falls back to GE's conservative answer and the
report says where and what it did instead; a budget that suffices changes nothing."""
from __future__ import annotations

import json
from pathlib import Path

from engine.cli import main
from harness import line_of

ROOT = Path(__file__).resolve().parents[1]
ORDERED = ROOT / "tests" / "cases" / "lint" / "own-writer-writer-ordered.yaml"


def run(tmp_path, *extra) -> dict:
    rj = tmp_path / "r.json"
    assert main(["run", str(ORDERED), "--passes", "graph_lint", "--report-json", str(rj), "--quiet", *extra]) == 0
    return json.loads(rj.read_text())


def test_exhausted_budget_warns_and_is_listed(tmp_path):
    assert run(tmp_path)["summary"]["by_code"] == {}           # the control edge orders the two writers
    report = run(tmp_path, "--budget", "graph_lint=1")
    (d,) = report["diagnostics"]
    assert d["code"] == "W18888" and d["budget"] == "unverified" and "analysis budget ran out" in d["message"]
    b = report["budgets"]
    (ev,) = b["exhausted"]
    assert ev["pass"] == "graph_lint" and ev["budget"] == 1 and ev["needed"] > 1
    assert ev["rule_loc"].startswith(f"rules/ge/budgets.yaml:{line_of(ROOT / 'rules/ge/budgets.yaml', '  graph_lint:')}:")
    assert b["rules"][ev["rule_loc"]]["text"].startswith("graph_lint:")
    section = next(s for s in report["sections"] if s["id"] == "budgets")
    assert section["title"] == "Analysis budgets (1 exhausted)" and section["data"]["rows"][0][0] == "graph_lint"


def test_sufficient_budget_changes_nothing(tmp_path):
    plain = run(tmp_path)
    report = run(tmp_path, "--budget", "1000")
    assert report["budgets"]["exhausted"] == [] and report["diagnostics"] == plain["diagnostics"]
    assert "budgets" not in plain


def test_bad_budgets(tmp_path, capsys):
    for bad, text in (("mem_rw_conflict=5", "pass 'mem_rw_conflict' declares no analysis budget"),
                      ("graph_lint=0", "bad budget 'graph_lint=0'"), ("many", "bad budget 'many'")):
        assert main(["run", str(ORDERED), "--passes", "graph_lint", "--budget", bad, "--quiet"]) == 2
        assert text in capsys.readouterr().err


def test_layout_budget_falls_back_to_isolation(tmp_path):
    graph = ROOT / "examples" / "train_step.pbtxt"

    def layout(*extra):
        rj = tmp_path / "l.json"
        assert main(["run", str(graph), "--passes", "mem_layout_conflict", "--report-json", str(rj), "--quiet",
                     *extra]) == 0
        return json.loads(rj.read_text())

    plain = layout()
    assert layout("--budget", "mem_layout_conflict=100000")["insertions"] == plain["insertions"]
    short = layout("--budget", "mem_layout_conflict=10")
    (ev,) = short["budgets"]["exhausted"]
    assert ev["pass"] == "mem_layout_conflict" and ev["budget"] == 10 and ev["needed"] > 10
    fallback = [i for i in short["insertions"] if i["reason"].get("budget") == 10]
    assert fallback and all(i["rule"] == "layout/absolute" and i["consumers"] for i in fallback)
    assert all(i["reason"]["budget_loc"].startswith("rules/ge/budgets.yaml:") for i in fallback)
    # every input the full analysis isolated is still isolated (conservative: more, never fewer)
    full = {c for i in plain["insertions"] for c in i["consumers"]}
    assert full <= {c for i in short["insertions"] for c in i["consumers"]}
