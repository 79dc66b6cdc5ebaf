"""Reports that say what happened (issue 11, item 6), on the shipped example and
annotated fixtures: the net change, the "before" picture as the inserting pass saw
it, ports drawn apart, the card's rule, and each pass's decisive facts."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.cli import main
from engine.report.explain import is_rejected_step
from engine.report.model import build_report, graph_stats
from engine.report.neighbourhood import NODE_H, PORT_GAP, layout
from harness import CASES, run_case

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "train_step.pbtxt"
CHAIN = """\
graphs:
  root:
    nodes:
      var: {type: Variable, inputs: 0, outputs: [y]}
      c1: {type: Constant, inputs: 0, outputs: 1}
      c2: {type: Constant, inputs: 0, outputs: 1}
      a1: {type: Assign, inputs: [ref, value], outputs: [ref]}
      a2: {type: Assign, inputs: [ref, value], outputs: [ref]}
      out: {type: NetOutput, inputs: 1, outputs: 0}
    edges:
      - var:0 -> a1:0
      - c1:0 -> a1:1
      - a1:0 -> a2:0
      - c2:0 -> a2:1
      - a2:0 -> out:0
"""


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cards")
    rj, rh = tmp / "r.json", tmp / "r.html"
    assert main(["run", str(EXAMPLE), "--report-json", str(rj), "--report-html", str(rh), "--quiet"]) == 0
    return json.loads(rj.read_text()), rh.read_text()


def report_of(case: str, passes: list[str]) -> dict:
    ctx, _, _ = run_case(CASES / case, passes=passes)
    return build_report(ctx, case, graph_stats(ctx.model))


def test_headline_is_the_net_change(example, capsys):
    report, page = example
    s = report["summary"]
    # 36 inserted, 27 of them VariableRefs that variable_ref_delete removes again: the graph gains 9
    assert s["inserted"] == 36 and s["removed"] == 27
    assert s["net"] == {"added": 9, "removed": 0, "transient": 27}
    assert s["by_fate"] == {"kept": 9, "transient": 27}
    gone = [i for i in report["insertions"] if i["fate"] == "transient"]
    assert len(gone) == 27 and all(i["removed_by"]["pass"] == "variable_ref_delete" for i in gone)
    tiles = {t["label"]: t for t in report["sections"][0]["data"]["tiles"]}
    assert tiles["added"]["value"] == 9 and tiles["removed"]["value"] == 0
    assert tiles["transient"]["value"] == 27 and tiles["transient"]["filter"] == ["fate", "transient"]
    assert "net 9 added, 0 removed" in page and 'data-key="fate" data-value="transient">27 transient' in page
    cards = next(x for x in report["sections"] if x["kind"] == "cards")
    assert {"key": "fate", "label": "fate", "options": ["kept", "transient"]} in cards["data"]["filters"]
    assert main(["run", str(EXAMPLE)]) == 0
    assert "  net change: 9 added, 0 removed (27 transient: inserted, then removed by a later pass)" \
        in capsys.readouterr().out.splitlines()


def test_before_is_the_graph_the_inserting_pass_saw(example):
    report, _ = example
    c = next(i for i in report["insertions"] if i["name"] == "layer_8/conv2d/broadcast/HcomBroadcast_HcclMemcpyPass_Identity0")
    after = [n[0] for n in c["neighbourhood"]["nodes"]]
    before = [n[0] for n in c["before"]["nodes"]]
    # the MemSet atomic_addr_clean (pass 9) puts before the collective is in the final graph,
    # not in the graph hccl_memcpy (pass 2) saw
    assert "atomic_memset1" in after and "atomic_memset1" not in before
    named = lambda e: (before[e[0]], e[1], before[e[2]], e[3])  # noqa: E731
    edges = {named(e) for e in c["before"]["edges"]}
    assert ("layer_8/conv2d/kernel", 0, "layer_8/conv2d/broadcast/HcomBroadcast", 0) in edges
    assert all(0 not in (e[0], e[2]) for e in c["before"]["edges"])        # the node itself is not there yet


def test_ports_are_drawn_apart_and_nodes_fit_them():
    edges = [[k, 0, 0, k - 1] for k in range(1, 6)] + [[0, k, 6 + k, 0] for k in range(3)]
    lay = layout(9, edges)
    ins = dict((p, dy) for p, dy in lay["ports"][0]["in"])
    outs = dict((p, dy) for p, dy in lay["ports"][0]["out"])
    assert sorted(ins) == [0, 1, 2, 3, 4] and sorted(outs) == [0, 1, 2]
    ys = sorted(ins.values())
    assert all(b - a >= PORT_GAP - 1 for a, b in zip(ys, ys[1:]))             # labels ~11 px high never touch
    assert lay["hs"][0] >= (len(ins) + 1) * PORT_GAP > NODE_H and 0 < ys[0] and ys[-1] < lay["hs"][0]
    assert [y for _, y in lay["ports"][0]["in"]] == ys                       # in index order, top down
    boxes = sorted((lay["pos"][k][1], lay["pos"][k][1] + lay["hs"][k]) for k in range(1, 6))
    assert all(b[0] >= a[1] for a, b in zip(boxes, boxes[1:]))              # grown nodes do not overlap


def test_every_drawing_of_the_example_keeps_its_port_labels_apart(example):
    from engine.report.html import card_drawings
    report, _ = example
    widest = 0
    for rec in report["insertions"]:
        pictures = [(rec["neighbourhood"], None), (rec["before"], 0)]
        for hood, skip in pictures:
            lay = layout(len(hood["nodes"]), hood["edges"], skip=skip)
            for k, ports in enumerate(lay["ports"]):
                for side in ("in", "out"):
                    ys = [y for _, y in ports[side]]
                    assert all(b - a >= PORT_GAP - 1 for a, b in zip(ys, ys[1:])), (rec["name"], k, side)
                    assert all(0 < y < lay["hs"][k] for y in ys)
                    widest = max(widest, len(ys))
        page = card_drawings(rec)                       # the page leaves out ports at mid-height only
        for which, hood, skip in (("after", rec["neighbourhood"], None), ("before", rec["before"], 0)):
            full = layout(len(hood["nodes"]), hood["edges"], skip=skip)
            kept = {(k, p, out) for k, p, _, out in page[which].get("ports", [])}
            for k, ports in enumerate(full["ports"]):
                for side in ("in", "out"):
                    for p, y in ports[side]:
                        assert ((k, p, side == "out") in kept) == (2 * y != full["hs"][k])
    assert widest >= 3          # the loop body's three-input copy


def test_rw_card_names_the_typing_rule_with_the_cell_as_a_step():
    c = report_of("rw/RW-01.yaml", ["mem_rw_conflict"])["insertions"][0]
    assert c["rule"] == "rw/in/input-mutable" and c["rule_loc"].startswith("rules/ge/rw.yaml:")
    cell = [s for s in c["explanation"] if not is_rejected_step(c, s)][-1]     # then the rejected alternatives
    assert cell["rule"] == "rw/matrix" and cell["text"].endswith("= insert_identity")
    assert cell["loc"] == c["reason"]["cell_loc"] and c["reason"]["matrix_rule"] == "rw/matrix"


def test_hccl_card_names_the_sibling_and_its_topological_id_against_the_writers():
    c = report_of("hccl/HM-03.yaml", ["hccl_memcpy"])["insertions"][0]
    assert c["rule"] == "hccl/later-sibling"
    texts = [s["text"] for s in c["explanation"]]
    assert "relu_op:0 (Relu) reads the same buffer and runs after the writer allreduce_op:0: topological id 2 > 1" in texts
    first = c["explanation"][0]
    assert first["rule"] == "hccl/later-sibling" and first["loc"] == c["rule_loc"]
    assert ["src", "input:0 (Data)"] in first["facts"] and ["step", "mutable-input"] in first["facts"]


def test_subgraph_card_names_its_case_and_why():
    c = report_of("subgraph/SG-01a.yaml", ["subgraph"])["insertions"][0]
    first = c["explanation"][0]
    assert first["rule"] == c["rule"] == "subgraph/out-const"
    assert first["text"].startswith("a constant (or a Data fed by one) is a subgraph output")
    assert ["step", "subgraph-netoutput"] in first["facts"] and ["src", "b1_const:0 (Constant)"] in first["facts"]


def test_atomic_card_names_the_atomic_nodes_and_whether_in_a_loop():
    report = report_of("atomic/AT-03.yaml", ["atomic_addr_clean"])
    c = report["insertions"][0]
    facts = dict(map(tuple, c["explanation"][0]["facts"]))
    assert c["explanation"][0]["rule"] == c["rule"] and c["rule"].startswith("atomic/")
    assert "loop graph" in facts and facts["loop graph"] in ("true", "false")
    assert any(k.startswith("atomic") for k in facts), facts


def test_variable_card_names_the_writer_chain_and_the_refs_source(tmp_path):
    g = tmp_path / "chain.yaml"
    g.write_text(CHAIN)
    rj = tmp_path / "r.json"
    assert main(["run", str(g), "--passes", "variable_prepare", "--report-json", str(rj), "--quiet"]) == 0
    (c,) = [i for i in json.loads(rj.read_text())["insertions"] if i["rule"] == "var/ref-after-writer"]
    assert c["reason"]["writer_chain"] == ["var", "a1:0", "a2:0"] and c["reason"]["ref_source"] == "var"
    texts = [s["text"] for s in c["explanation"]]
    chain = next(s for s in c["explanation"] if s["text"].startswith("variable var"))
    assert chain["text"].startswith("variable var is written in place along var → a1:0 → a2:0; the new node "
                                    "follows the last writer, a2:0, and names var as its source (")
    assert chain["rule"] == "var/ref-after-writer" and chain["loc"] == c["rule_loc"]


def test_page_card_does_not_repeat_the_facts_its_steps_show(example):
    from engine.report.html import _card
    report, _ = example
    rec = next(i for i in report["insertions"] if i["rule"] == "hccl/protect-constant")
    card = _card(rec)
    assert "src" in rec["reason"] and "src" not in card["reason"]            # told by the rule's step
    assert ["src", "layer_8/conv2d/kernel:0 (Variable)"] in card["explanation"][0]["facts"]
    assert all("rule" in s or s.get("loc") or s.get("facts") or set(s) == {"text"} for s in card["explanation"])
