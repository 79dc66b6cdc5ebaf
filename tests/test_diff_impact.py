"""Impact of a rule change on graphs: isolations matched by position and linked
to the rule change that caused them; corpus runs independent of --jobs."""
from __future__ import annotations

import json
from pathlib import Path

from engine.passes.context import Insertion
from engine.cli.diff import compute
from engine.diff.impact import insertion_records, match_insertions
from engine.diff.render import document_json
from harness import ge_dumps, needs_ge_dumps
from test_diff_util import edited_pack, shipped, source

ROOT = Path(__file__).resolve().parent.parent
DUMPS = ge_dumps()
ROW = "ReadOnly:      {ReadOnly: do_nothing, Writeable: do_nothing, ScopeWriteable: insert_identity}"
FLIPPED = ROW.replace("Writeable: do_nothing", "Writeable: insert_identity")
CELL = "rw_conflict.matrix[ReadOnly][Writeable]"

# relu's output has two consumers (ReadOnly) and one of them writes it (Assign.ref:
# Writeable): GE's matrix says do_nothing, the flipped cell inserts one Identity.
GRAPH = """\
graphs:
  root:
    nodes:
      x: {type: Data, attrs: {index: 0}}
      relu: {type: Relu, inputs: 1, outputs: 1}
      c: {type: Const}
      assign: {type: Assign, inputs: [ref, value], outputs: [ref]}
      add: {type: Add, inputs: 2, outputs: 1}
      out: {type: NetOutput, inputs: 2, outputs: 0}
    edges:
      - x -> relu
      - relu:0 -> assign:0
      - c:0 -> assign:1
      - relu:0 -> add:0
      - x:0 -> add:1
      - assign:0 -> out:0
      - add:0 -> out:1
"""


def _graph(tmp_path):
    g = tmp_path / "flip.yaml"
    g.write_text(GRAPH, encoding="utf-8")
    return str(g)


def _run(old, new, graphs, passes=None, jobs=1):
    return compute(source(old), source(new), graphs, {}, passes, jobs)


def test_flipped_matrix_cell_adds_exactly_the_expected_identity(tmp_path):
    new = edited_pack(tmp_path, {"rw.yaml": [(ROW, FLIPPED)]})
    for passes in (["mem_rw_conflict"], None):          # the RW pass alone, and the whole pipeline
        doc = _run(shipped(), new, [_graph(tmp_path)], passes)
        g = doc["impact"]["graphs"][0]
        assert g["counts"]["added"] == 1 and g["counts"]["removed"] == g["counts"]["changed"] == 0, g["counts"]
        (add,) = g["added"]
        assert add["position"] == {"graph": "root", "producer": "relu:0", "consumers": ["assign:0"]}
        # the card's rule is the typing rule that made the difference (the write into assign),
        # the link still goes to the flipped cell, which the record cites as a fact
        assert add["new"]["type"] == "Identity" and add["new"]["rule"] == "rw/in/ref-input"
        assert add["caused_by"] == [CELL] and add["link"] == "direct"
        assert add["new"]["why"].startswith("ReadOnly × Writeable → insert_identity (matrix[ReadOnly][Writeable])")
        assert "rules/ge" not in add["new"]["rule_loc"] and add["new"]["rule_loc"].endswith(f"/p/rw.yaml:{RULE_LINE(new)}")
        item = next(i for i in doc["rules"]["items"] if i["id"] == CELL)
        assert item["impact"] == {"added": 1, "removed": 0, "changed": 0, "removals": 0, "diagnostics": 0, "graphs": 1}
        assert doc["gates"]["added-isolation"] and not doc["gates"]["removed-isolation"]


def RULE_LINE(pack) -> int:
    lines = (pack / "rw.yaml").read_text().splitlines()
    return next(k for k, line in enumerate(lines, 1) if "id: rw/in/ref-input" in line)


def test_removed_isolation_is_linked_through_the_old_side(tmp_path):
    old = edited_pack(tmp_path, {"rw.yaml": [(ROW, FLIPPED)]})
    doc = _run(old, shipped(), [_graph(tmp_path)], ["mem_rw_conflict"])
    (rem,) = doc["impact"]["graphs"][0]["removed"]
    assert rem["caused_by"] == [CELL] and rem["old"]["why"].startswith("ReadOnly × Writeable → insert_identity")
    assert doc["gates"]["removed-isolation"] and not doc["gates"]["added-isolation"]


def test_renamed_typing_rule_changes_the_same_isolation(tmp_path):
    # Const → Assign.ref: ReadOnlyConst × Writeable inserts an Identity in both packs;
    # only the rule that typed the Const output is renamed
    new = edited_pack(tmp_path, {"rw.yaml": [("    - id: rw/out/const\n", "    - id: rw/out/constant\n")]})
    g = tmp_path / "const.yaml"
    g.write_text(GRAPH.replace("relu:0 -> assign:0", "c:0 -> assign:0").replace("c:0 -> assign:1", "relu:0 -> assign:1"))
    doc = _run(shipped(), new, [str(g)], ["mem_rw_conflict"])
    gr = doc["impact"]["graphs"][0]
    assert gr["counts"]["added"] == gr["counts"]["removed"] == 0
    (ch,) = gr["changed"]
    assert ch["position"]["producer"] == "c:0" and ch["what"] == ["output_rule"]
    assert ch["caused_by"] == ["rw_conflict.output_rules[rw/out/constant]"] and ch["link"] == "direct"


def _ins(name, producer, consumers, rule="rw/matrix"):
    return Insertion(name, "Identity", "root", "mem_rw_conflict", rule, None, producer, tuple(consumers),
                     {"cell": "matrix[ReadOnly][Writeable]"}, {})


def test_positions_not_names_match_chained_isolations():
    # the second Identity hangs off the first; generated names differ between the runs
    a = [_ins("x_Identity0", "x:0", ["y:0"]), _ins("x_Identity0_Identity1", "x_Identity0:0", ["z:0"])]
    b = [_ins("x_Identity7", "x:0", ["y:0"]), _ins("x_Identity7_Identity8", "x_Identity7:0", ["z:0"])]
    (_, ra), (_, rb) = insertion_records(a), insertion_records(b)
    assert ra[1]["key"] == rb[1]["key"] == ("root", "<Identity x:0 → y:0>:0", ("z:0",))
    assert match_insertions(ra, rb) == {"added": [], "removed": [], "changed": []}
    c = [_ins("n1", "x:0", ["y:0"])]
    m = match_insertions(ra, insertion_records(c)[1])
    assert len(m["removed"]) == 1 and m["removed"][0]["position"]["consumers"] == ["z:0"]


@needs_ge_dumps
def test_shipped_dumps_and_jobs_give_byte_identical_json(tmp_path):
    new = edited_pack(tmp_path, {"layout.yaml": [("    - [IMMUTABLE_ADDRESS_OUTPUT, CONTINUOUS_INPUT]\n",
                                                  "    - [IMMUTABLE_ADDRESS_OUTPUT, CONTINUOUS_INPUT]\n"
                                                  "    - [IMMUTABLE_ADDRESS_OUTPUT, NORMAL_INPUT]\n")]})
    graphs = [str(ROOT / "examples/train_step.pbtxt"), str(DUMPS / "origin_model.txt"),
              str(DUMPS / "ge_proto_00046_afterUBMatch.txt"), _graph(tmp_path)]
    one = document_json(_run(shipped(), new, graphs, jobs=1))
    two = document_json(_run(shipped(), new, graphs, jobs=2))
    assert one == two
    doc = json.loads(one)
    train = doc["impact"]["graphs"][0]
    assert train["graph"].endswith("examples/train_step.pbtxt") and train["counts"]["added"] > 0
    pair = "layout_conflict.pairs[IMMUTABLE_ADDRESS_OUTPUT × NORMAL_INPUT]"
    for g in doc["impact"]["graphs"]:
        for x in g["added"]:
            assert x["caused_by"] == [pair] and x["new"]["rule"] == "layout/absolute", x
    assert doc["impact"]["summary"]["unlinked"] == 0


def test_variable_plan_differences_and_cited_paths(tmp_path):
    # a wider alignment moves every variable; diagnostics that only cite the other
    # pack's file names are the same diagnostics
    new = edited_pack(tmp_path, {"variables.yaml": [("  align: 512 ", "  align: 1024 ")]})
    doc = _run(shipped(), new, [str(ROOT / "examples/train_step.pbtxt")])
    g = doc["impact"]["graphs"][0]
    assert g["counts"]["added"] == g["counts"]["removed"] == 0
    assert g["diagnostics"] == {"gained": [], "lost": []}
    v = g["variables"]
    assert v["changed"] and not v["added"] and not v["removed"]
    assert all(x["old"]["offset"] != x["new"]["offset"] or x["old"]["offset"] == 0 for x in v["changed"])
    assert v["caused_by"] == ["var_policy:variables.yaml.memory"] and v["link"] == "candidate"


def test_unknown_pass_id_is_bad_input(tmp_path):
    import pytest
    from engine.core.errors import InputError
    with pytest.raises(InputError, match="unknown pass id 'mem_rw_conflcit' .in neither pack."):
        _run(shipped(), shipped(), [_graph(tmp_path)], ["mem_rw_conflcit"])
