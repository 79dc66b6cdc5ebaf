"""mem_inplace's early exit for a node without candidates (Note [pure predicate] in
engine/passes/algorithms/inplace.py): only a no_inplace_node that cannot stop the pass is
left unevaluated there."""
from __future__ import annotations

from pathlib import Path

from harness import edit

from engine.cli import main

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "train_step.pbtxt"
PREDICATE = 'no_inplace_node: attr_true(node, "continuous_output") or attr_true(node, NO_PADDING_CONTINUOUS_OUTPUT)'


def test_example_has_no_inplace_candidate():
    # the premise of the next test: no node of the example offers an in-place pair
    assert "_output_inplace_ability" not in EXAMPLE.read_text()


def test_a_failing_no_inplace_node_still_stops_the_pass_without_candidates(pack_copy, tmp_path, capsys):
    edit(pack_copy / "inplace.yaml", PREDICATE,
         'no_inplace_node: fail("no_inplace_node looked at " + node.name) or attr_true(node, "continuous_output")')
    code = main(["run", str(EXAMPLE), "--rules", str(pack_copy), "--out", str(tmp_path / "o.pbtxt"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 1, err
    assert "no_inplace_node looked at" in err
    assert not (tmp_path / "o.pbtxt").exists()


def test_the_shipped_no_inplace_node_runs_on_the_example(pack_copy, tmp_path):
    code = main(["run", str(EXAMPLE), "--rules", str(pack_copy), "--out", str(tmp_path / "o.pbtxt"), "--quiet"])
    assert code == 0
