"""`memconflict explain --report R.json NODE` answers from a saved report, word for word
what `explain GRAPH NODE` prints after re-running the passes."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.cli import main

ROOT = Path(__file__).resolve().parents[1]
TRAIN = ROOT / "examples" / "train_step.pbtxt"


def run(args, capsys):
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    rj = tmp_path_factory.mktemp("saved") / "r.json"
    assert main(["run", str(TRAIN), "--report-json", str(rj), "--quiet"]) == 0
    return rj


def test_saved_answer_is_the_live_one_for_each_pass(saved, capsys):
    capsys.readouterr()
    doc = json.loads(saved.read_text())
    by_pass = {}
    for card in doc["insertions"]:
        by_pass.setdefault(card["pass"], card["name"])
    assert {"hccl_memcpy", "atomic_addr_clean", "subgraph", "variable_prepare"} <= set(by_pass)
    for name in sorted(by_pass.values()):
        code, live, _ = run(["explain", TRAIN, name], capsys)
        assert code == 0
        code, kept, _ = run(["explain", "--report", saved, name], capsys)
        assert code == 0 and kept == live and name in kept


def test_unknown_node_and_bad_reports_are_exit_2(saved, tmp_path, capsys):
    code, _, err = run(["explain", "--report", saved, "atomic_memset"], capsys)
    assert code == 2 and "did you mean 'atomic_memset1'?" in err
    bad = tmp_path / "bad.json"
    bad.write_text('{"memconflict": "0.1.0",\n "insertions": [}\n')
    code, _, err = run(["explain", "--report", bad, "x"], capsys)
    assert code == 2 and f"{bad.name}:2:" in err and "not JSON" in err
    other = tmp_path / "other.json"
    other.write_text('{"a": 1}')
    code, _, err = run(["explain", "--report", other, "x"], capsys)
    assert code == 2 and "not a memconflict run report" in err
    code, _, err = run(["explain", "--report", saved, TRAIN, "x"], capsys)
    assert code == 2 and "with --report give only the NODE" in err
    code, _, err = run(["explain", TRAIN], capsys)
    assert code == 2 and "give the GRAPH and the NODE" in err
