"""The shipped example: rules/ge-doc encodes the design summary's reading where it
differs from GE's code (ge-conflict-rules.md §11). The diff against rules/ge shows
each documented edit, and on graphs what each one does."""
from __future__ import annotations

from pathlib import Path

import pytest

from engine.cli.diff import compute
from test_diff_util import diff, source

ROOT = Path(__file__).resolve().parent.parent
GE, DOC = ROOT / "rules" / "ge", ROOT / "rules" / "ge-doc"
FN = "hccl_rewrites.hccl_memcpy.functions.later_siblings"
PAIR = "layout_conflict.pairs[IMMUTABLE_ADDRESS_OUTPUT × NORMAL_INPUT]"

# in1 feeds the collective and a reader; `order` decides whether the reader runs
# before (smaller topo id) or after (larger) the writer
SIBLING = """\
graphs:
  root:
    nodes:
      x: {{type: Data, attrs: {{index: 0}}}}
      in1: {{type: Relu, inputs: 1, outputs: 1}}
      ar: {{type: HcomAllReduce, inputs: 1, outputs: 1, attrs: {{_input_mutable: true}}}}
      reader: {{type: Cast, inputs: 1, outputs: 1}}
      out: {{type: NetOutput, inputs: 2, outputs: 0}}
    edges:
      - x -> in1
      - in1 -> ar
      - in1 -> reader
      - ar:0 -> out:0
      - reader:0 -> out:1
      - {order}
"""


def test_documented_edits_are_the_rule_changes():
    d = diff(GE, DOC)
    ids = {c.id: c for c in d.changes}
    fn = ids[FN]
    assert fn.kind == "changed" and ("-", "    and s.node.id > h.node.id)") in fn.details \
        and ("+", "    and s.node.id < h.node.id)") in fn.details
    assert (ids[PAIR].old.text, ids[PAIR].new.text) == ("unregistered", "absolute conflict")
    ci = ids["layout_conflict.pairs[CONTINUOUS_INPUT × NOPADDING_CONTINUOUS_INPUT]"]
    assert (ci.old.text, ci.new.text) == ("registered: continuous_in_in", "absolute conflict")
    uin = ids["layout_conflict.pairs[USER_MEMORY_INPUT × NORMAL_INPUT]"]
    assert (uin.old.text, uin.new.text) == ("unregistered", "absolute no-conflict")
    assert ids["rw_conflict.output_rules[rw/out/one-consumer]"].kind == "added"
    assert ids["pipeline[graph_lint]"].details == (("~", "stage: normalize → build"),)
    assert ids["pipeline[graph_lint]@reordered"].kind == "reordered"
    assert ids["pipeline[mark_same_addr]"].kind == "added"
    assert ids["pipeline[inplace_support_check]"].details == (
        ("-", 'gate: option_true("context.hostExecFlag") and option("ge.oo.level") in [none, "O3"]'),)
    assert ids["pack.name"].cosmetic and ids["hccl_rewrites.hccl_memcpy.steps[mutable-input].rules[hccl/later-sibling]"].cosmetic
    heads = [h for h, _ in d.notes]
    assert heads and heads[0].startswith("1.0.0") and "§11" in d.notes[0][1]


@pytest.mark.parametrize("order, kind", [("ar ~> reader", "removed"), ("reader ~> ar", "added")])
def test_sibling_direction_on_a_graph(tmp_path, order, kind):
    g = tmp_path / "sibling.yaml"
    g.write_text(SIBLING.format(order=order), encoding="utf-8")
    doc = compute(source(GE), source(DOC), [str(g)], {}, ["hccl_memcpy"], 1)
    gr = doc["impact"]["graphs"][0]
    assert gr["counts"][kind] == 1 and sum(gr["counts"][k] for k in ("added", "removed", "changed")) == 1
    (x,) = gr[kind]
    assert x["position"] == {"graph": "root", "producer": "in1:0", "consumers": ["ar:0"]}
    side = x["old"] if kind == "removed" else x["new"]
    assert side["rule"] == "hccl/later-sibling"
    assert x["caused_by"] == [FN] and x["link"] == "direct"


def test_findings_on_the_shipped_training_step():
    doc = compute(source(GE), source(DOC), [str(ROOT / "examples" / "train_step.pbtxt")], {}, None, 1)
    g = doc["impact"]["graphs"][0]
    assert g["counts"]["added"] > 0 and g["counts"]["removed"] == 0
    assert {x["new"]["rule"] for x in g["added"]} == {"layout/absolute"}
    assert all(x["caused_by"] == [PAIR] for x in g["added"])
    lost = g["diagnostics"]["lost"]
    assert [d["code"] for d in lost] == ["W18888"] and "pipeline[graph_lint]" in lost[0]["caused_by"]
    gained = g["diagnostics"]["gained"]
    assert gained and all(d["caused_by"] == ["pipeline[inplace_support_check]"] for d in gained)
    items = {i["id"]: i for i in doc["rules"]["items"]}
    assert items[PAIR]["impact"]["added"] == g["counts"]["added"]
