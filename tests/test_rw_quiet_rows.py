"""mem_rw_conflict's walk skips typing the consumers of an output whose matrix row inserts
for no input type (Note [quiet output rows] in engine/passes/algorithms/rw.py): only when
nothing can tell the difference."""
from __future__ import annotations

import json
from pathlib import Path

from harness import edit

from engine.cli import main
from engine.passes.algorithms import rw

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "train_step.pbtxt"
RULE = "when: attr_true(node, INPUT_MUTABLE)"
# layer_1/conv2d/Relu's only input comes from an output with one consumer (SoftRead: a quiet row)
QUIET_CONSUMER = "layer_1/conv2d/Relu"


def _run(pack, out: Path) -> tuple[int, bytes, dict]:
    code = main(["run", str(EXAMPLE), "--rules", str(pack), "--out", str(out / "o.pbtxt"),
                 "--report-json", str(out / "r.json"), "--quiet"])
    return code, (out / "o.pbtxt").read_bytes(), json.loads((out / "r.json").read_text())


def test_a_failing_input_rule_still_stops_the_pass_on_a_quiet_consumer(pack_copy, tmp_path, capsys):
    edit(pack_copy / "rw.yaml", RULE,
         f'when: (node.name == "{QUIET_CONSUMER}" and fail("typed " + node.name)) or attr_true(node, INPUT_MUTABLE)')
    main(["run", str(EXAMPLE), "--rules", str(pack_copy), "--out", str(tmp_path / "o.pbtxt")])
    out = capsys.readouterr()
    # the shipped pipeline lets mem_rw_conflict fail with a warning; the rule was evaluated
    assert f"pass mem_rw_conflict failed: typed {QUIET_CONSUMER}" in out.out + out.err


def test_the_quiet_rows_of_the_shipped_matrix(pack_copy, tmp_path, monkeypatch):
    seen = {}
    real_init = rw.RWPass.__init__

    def spy(self, *args):
        real_init(self, *args)
        seen["quiet"], seen["pure"] = self._quiet_rows, self._inputs_pure
    monkeypatch.setattr(rw.RWPass, "__init__", spy)
    assert _run(pack_copy, tmp_path)[0] == 0
    # SoftRead's row is do_nothing for every input type, an Invalid output is wrong_graph with
    # any input; every other row inserts for some input type
    assert seen["quiet"] == {"SoftRead", "Invalid"}
    assert seen["pure"] is True


def test_skipping_quiet_rows_changes_no_output(pack_copy, tmp_path, monkeypatch):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    fast = _run(pack_copy, tmp_path / "a")
    real_init = rw.RWPass.__init__

    def eager(self, *args):
        real_init(self, *args)
        self._quiet_rows = frozenset()          # type every consumer, as before the skip
    monkeypatch.setattr(rw.RWPass, "__init__", eager)
    slow = _run(pack_copy, tmp_path / "b")
    assert fast[0] == slow[0] == 0
    assert fast[1] == slow[1]
    for r in (fast[2], slow[2]):
        r.pop("timing", None)
    assert fast[2] == slow[2]
