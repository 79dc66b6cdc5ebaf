"""Rejected alternatives: at every choice point the pack declares (`isolation_alternatives:`,
rules/ge/alternatives.yaml), the card of an insertion made there lists the isolations GE did
not take, why, and GE's source — in the JSON report, the HTML page and `explain`. The expected
alternatives are written here per choice point; their texts and lines are read from the pack."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from engine.cli import main
from engine.passes.catalog import load_pack
from engine.report.explain import is_rejected_step
from harness import line_of

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / "tests" / "cases"
PACK = ROOT / "rules" / "ge"
ALT_FILE = PACK / "alternatives.yaml"
GE_MIRROR = Path("/work/.mirror/mirror-cann+ge/repo")

# choice point → (fixture, inserted node, the alternatives its card must list, in order)
CHOICES = {
    "rw/matrix": ("rw/RW-01.yaml", "const1_Identity0", ["copy-after-producer", "skip-last-edge"]),
    "rw/split-identity": ("rw/RW-02.yaml", "var_Identity0", ["keep-shared-identity"]),
    "layout/absolute": ("layout/IM-01.yaml", "identity_0_hcomallreduce_MemLayoutConflict_0",
                        ["other-input", "identity-after-output"]),
    "layout/continuous_in_in": ("layout/CI-01.yaml", "identity_0_concat2_MemLayoutConflict_0", ["first-consumer-too"]),
    "layout/continuous_out_in": ("layout/own-continuous_out_in-middle.yaml", "identity_1_concat_MemLayoutConflict_0",
                                 ["isolate-the-other-anchor"]),
    "layout/continuous_out_out": ("layout/CO-01.yaml", "identity_0_split2_MemLayoutConflict_0",
                                  ["identity-before-consumer"]),
    "layout/continuous_rts": ("layout/own-continuous_rts-in.yaml", "identity_0_concat_MemLayoutConflict_0",
                              ["isolate-the-other-anchor"]),
    "layout/ctrl-branch": ("layout/IC-01.yaml", "identity_0_netoutput1_MemLayoutConflict_0",
                           ["identity-per-output", "first-occurrence-too"]),
    "layout/ctrl-loop-output": ("layout/WB-02.yaml", "identity_0_body_netoutput_MemLayoutConflict_0",
                                ["identity-per-output"]),
    "layout/immutable_continuous_out": ("layout/own-immutable_continuous_out-assign.yaml",
                                        "identity_0_split_MemLayoutConflict_0", ["identity-after-immutable-output"]),
    "layout/immutable_nopadding_in": ("layout/IM-05.yaml", "identity_0_phony_concat_MemLayoutConflict_0",
                                      ["identity-after-immutable-output"]),
    "layout/immutable_rts_out": ("layout/own-immutable_rts_out.yaml", "identity_0_r_MemLayoutConflict_0",
                                 ["identity-after-special-output"]),
    "layout/nopadding_in_in": ("layout/own-nopadding_in_in-overlap.yaml", "identity_0_pc2_MemLayoutConflict_0",
                               ["first-consumer-too"]),
    "layout/nopadding_in_out": ("layout/NC-02.yaml", "identity_1_phony_concat_MemLayoutConflict_0",
                                ["identity-after-output"]),
    "layout/nopadding_out_out": ("layout/own-nopadding_out_out.yaml", "identity_0_ps2_MemLayoutConflict_0",
                                 ["identity-before-consumer"]),
    "layout/rts_in_in": ("layout/RS-01.yaml", "identity_0_rtMemCpyAsync_MemLayoutConflict_0", ["other-input"]),
    "layout/rts_in_out": ("layout/own-rts_in_out.yaml", "identity_0_q_MemLayoutConflict_0", ["identity-before-input"]),
    "layout/rts_out_out": ("layout/own-rts_out_out-subgraph.yaml", "identity_0_pc_MemLayoutConflict_0",
                           ["later-output"]),
    "layout/unrefresh_in": ("layout/NR-02.yaml", "identity_0_switch_MemLayoutConflict_0", ["identity-after-output"]),
    "layout/unrefresh_out": ("layout/UI-06.yaml", "identity_0_op3_MemLayoutConflict_1", ["identity-before-consumer"]),
    "layout/user_in_continuous": ("layout/own-user_in_continuous-co.yaml", "identity_0_split_MemLayoutConflict_0",
                                  ["identity-before-continuous-input"]),
    "layout/user_in_nopadding_in": ("layout/UI-09.yaml", "identity_0_phonyconcat_MemLayoutConflict_0",
                                    ["identity-before-continuous-input"]),
    "layout/user_in_nopadding_out": ("layout/own-user_in_nopadding_out-offline.yaml", "identity_0_ps_MemLayoutConflict_0",
                                     ["identity-at-continuous-output"]),
    "layout/user_in_rts_out": ("layout/own-user_in_rts_out.yaml", "identity_0_r_MemLayoutConflict_0",
                               ["identity-after-special-output"]),
    "layout/user_in_unrefresh_out": ("layout/UI-07.yaml", "identity_0_swt_MemLayoutConflict_0", ["other-output"]),
    "layout/user_out_continuous_in": ("layout/own-user_out_continuous_in-nopadding.yaml",
                                      "identity_0_netoutput_MemLayoutConflict_0", ["identity-before-continuous-input"]),
    "layout/user_out_immutable": ("layout/UO-04.yaml", "identity_0_netoutput_MemLayoutConflict_0",
                                  ["identity-after-immutable-output"]),
    "layout/user_out_unrefresh_in": ("layout/UO-10.yaml", "identity_0_netoutput_MemLayoutConflict_0", ["other-input"]),
    "layout/user_out_unrefresh_out": ("layout/UO-09.yaml", "identity_0_netoutput_MemLayoutConflict_1",
                                      ["identity-before-netoutput"]),
    "hccl/protect-constant": ("hccl/HM-01.yaml", "allreduce_HcclMemcpyPass_Identity0",
                              ["copy-after-producer", "memcpy-async"]),
    "hccl/later-sibling": ("hccl/HM-03.yaml", "allreduce_op_HcclMemcpyPass_Identity0",
                           ["skip-rw-conflict", "copy-after-producer"]),
    "hccl-cont/data-source": ("hccl/own-continuous-broadcast-assign.yaml", "var_HcclContinuousMemcpyPass_Identity",
                              ["copy-after-producer"]),
    "hccl-cont/shared-continuous": ("hccl/own-continuous-inputs.yaml", "relu_HcclContinuousMemcpyPass_Identity",
                                    ["copy-after-producer"]),
    "hccl-cont/p2p-data-source": ("hccl/own-continuous-p2p.yaml", "d0_HcclContinuousMemcpyPass_Identity", ["copy-after-producer"]),
    "subgraph/data-continuous-consumer": ("subgraph/SG-05.yaml", "data4_output_0_Memcpy",
                                          ["copy-before-continuous-input"]),
    "subgraph/const-into-while": ("subgraph/SG-04.yaml", "While_input_1_Memcpy", ["copy-inside-body"]),
    "subgraph/out-const": ("subgraph/SG-01a.yaml", "b1_out_input_0_Memcpy", ["copy-after-producer"]),
    "subgraph/out-atomic": ("subgraph/SG-05.yaml", "out1_input_0_Memcpy", ["copy-after-producer"]),
    "subgraph/out-continuous": ("subgraph/SG-05.yaml", "out2_input_0_Memcpy", ["copy-after-producer"]),
    "subgraph/out-data": ("subgraph/SG-01a.yaml", "b2_out_input_0_Memcpy", ["copy-after-producer"]),
    "subgraph/out-while": ("subgraph/own-filecontant-and-while-output.yaml", "c_out_input_0_Memcpy",
                           ["copy-after-producer"]),
    "subgraph/while-input-shared": ("subgraph/SG-02b.yaml", "While_input_1_Memcpy", ["copy-after-producer"]),
    "subgraph/while-body-copies": ("subgraph/SG-06.yaml", "instance_body_input_Memcpy",
                                   ["copy-per-input", "copy-bypassed-too"]),
    "subgraph/cond-shared-output": ("subgraph/own-if-shared-outputs.yaml", "t_relu_output_1_Memcpy",
                                    ["one-copy-for-repeats"]),
    "atomic/shared": ("atomic/AT-03.yaml", "atomic_memset1", ["clean-per-node", "atomic-addr-clean"]),
    "atomic/dispersed": ("atomic/own-dispersed.yaml", "atomic_memset1_0", ["shared-clean"]),
    "atomic/loop": ("atomic/own-loop-graph.yaml", "atomic_memset10", ["shared-clean"]),
    "addr-async/netoutput-const": ("memcpy/own-const-output.yaml", None, ["identity-copy"]),
    "addr-async/netoutput-data": ("memcpy/own-offline-data-output.yaml", None, ["identity-copy"]),
    "addr-async/hccl-refdata": ("memcpy/own-hccl-refdata.yaml", None, ["no-copy"]),
    "var/ref-after-writer": ("variables/own-prepare-framework-assign.yaml", "var_TO_assign_REF_0",
                             ["ref-after-every-writer"]),
    "var/identity-before-merge": ("variables/own-prepare-refswitch.yaml", "Identity_assign_TO_refmerge_0",
                                  ["control-edge-into-merge"]),
}

# a While body whose two Data swap places at the output: CtrlNodeConflict's exchange copy
LOOP_EXCHANGE = """\
graphs:
  root:
    nodes:
      d0: Data
      d1: {type: Data, attrs: {index: 1}}
      while: {type: While, inputs: 2, outputs: 2, subgraphs: [cond, body]}
      out: {type: NetOutput, inputs: 2}
    edges: [d0 -> while:0, d1 -> while:1, while:0 -> out:0, while:1 -> out:1]
  cond:
    nodes:
      c0: {type: Data, attrs: {_parent_node_index: 0}}
      c1: {type: Data, attrs: {_parent_node_index: 1}}
      cnet: NetOutput
    edges: [c0 -> cnet]
  body:
    nodes:
      b0: {type: Data, attrs: {_parent_node_index: 0}}
      b1: {type: Data, attrs: {_parent_node_index: 1}}
      bnet: {type: NetOutput, inputs: 2, input_desc: {0: {attrs: {_parent_node_index: 0}}, 1: {attrs: {_parent_node_index: 1}}}}
    edges: [b0 -> bnet:1, b1 -> bnet:0]
"""


# a ref input (ref_port_index) without an output of its own: VariablePrepareOpPass's RefIdentity
REF_IDENTITY = """\
graphs:
  root:
    nodes:
      variable: Variable
      scatter: {type: ScatterUpdate, inputs: [ref], outputs: 0, input_desc: {0: {attrs: {ref_port_index: [0]}}}}
      after: Relu
    edges: [variable -> scatter, scatter ~> after]
"""


def declared() -> dict:
    """The section as written (read apart from the loader)."""
    return yaml.safe_load(ALT_FILE.read_text())["isolation_alternatives"]


def run_report(capsys, tmp_path, graph: Path, passes: list[str], extra=()) -> dict:
    out = tmp_path / "r.json"
    args = ["run", str(graph), "--report-json", str(out), "--quiet", "--passes", ",".join(passes), *extra]
    code = main(args)
    err = capsys.readouterr().err
    assert code == 0, err
    return json.loads(out.read_text())


def fixture_passes(path: Path) -> list[str]:
    return yaml.safe_load(path.read_text())["expect"]["passes"]


def card(report: dict, name: str | None, rule: str = "") -> dict:
    """The insertion called `name` (None: the one made by rule id `rule`)."""
    if name is None:
        (c,) = [i for i in report["insertions"] if i["rule"] == rule]
        return c
    return next(i for i in report["insertions"] if i["name"] == name)


def alt_line(choice: str, name: str) -> int:
    """Line of `- name: NAME` under `CHOICE:` in alternatives.yaml."""
    lines = ALT_FILE.read_text().splitlines()
    start = lines.index(f"  {choice}:")
    for k in range(start + 1, len(lines)):
        if lines[k].startswith("  ") and not lines[k].startswith("    "):
            break
        if lines[k] == f"    - name: {name}":
            return k + 1
    raise AssertionError(f"{choice}#{name} not in {ALT_FILE}")


def test_every_choice_point_of_the_pack_has_a_fixture_here():
    assert sorted(declared()) == sorted([*CHOICES, "layout/ctrl-loop-exchange", "var/ref-identity-for-ref-input",
                                         "layout/budget-fallback"])


@pytest.mark.parametrize("choice", sorted(CHOICES))
def test_card_lists_the_alternatives_of_its_choice_point(choice, tmp_path, capsys):
    fixture, node, expected = CHOICES[choice]
    path = CASES / fixture
    report = run_report(capsys, tmp_path, path, fixture_passes(path))
    c = card(report, node, choice)
    texts = {a["name"]: a for a in declared()[choice]}
    assert [a["id"] for a in c["alternatives"]] == expected
    for a in c["alternatives"]:
        want = texts[a["id"]]
        assert (a["does"], a["rejected"], a["ge"]) == (want["does"], want["rejected"].strip(), want["ge"])
        assert a["rule"] == f"{choice}#{a['id']}"
        assert a["rule_loc"] == f"rules/ge/alternatives.yaml:{alt_line(choice, a['id'])}:7"
        assert report["rules"][a["rule_loc"]]["text"].startswith(f"- name: {a['id']}\n")
    steps = [s for s in c["explanation"] if is_rejected_step(c, s)]
    assert [s["rule"] for s in steps] == [f"{choice}#{n}" for n in expected]
    assert c["explanation"][-len(steps):] == steps          # after the decision path
    for s, a in zip(steps, c["alternatives"]):
        assert s["text"] == f"not chosen: {a['does']}" and s["loc"] == a["rule_loc"]
        assert s["facts"] == [["GE source", a["ge"]]]


def test_ctrl_loop_exchange(tmp_path, capsys):
    g = tmp_path / "g.yaml"
    g.write_text(LOOP_EXCHANGE)
    report = run_report(capsys, tmp_path, g, ["mem_layout_conflict"])
    (c,) = [i for i in report["insertions"] if i["rule"] == "layout/ctrl-loop-exchange"]
    assert [a["id"] for a in c["alternatives"]] == ["identity-per-input"]


def test_inplace_on_input_i_or_j(tmp_path, capsys):
    """ProcessInplace: output 0 may reuse input 0, 1 or 2; input 0 is fed by a Data (read-only), input 1
    is taken, input 2 would pass too but comes later in _output_inplace_ability."""
    g = tmp_path / "g.yaml"
    g.write_text("graphs:\n  root:\n    nodes:\n      data: Data\n      r1: Relu\n      r2: Relu\n"
                 "      foo: {type: Foo, inputs: 3, outputs: 1, attrs: {_output_inplace_ability: [[0, 0], [0, 1], [0, 2]]}}\n"
                 "      out: NetOutput\n"
                 "    edges: [data -> r1, data -> r2, data -> foo:0, r1 -> foo:1, r2 -> foo:2, foo -> out]\n")
    report = run_report(capsys, tmp_path, g, ["mem_inplace"])
    (d,) = [d for d in report["diagnostics"] if d["code"] == "INPLACE_REUSE"]
    read_only = f"rules/ge/inplace.yaml:{line_of(PACK / 'inplace.yaml', 'read_only_source:')}:21"
    assert d["input"] == 1 and d["rejected_inputs"] == [
        {"input": 0, "rejected": "fails: the input's symbol is not read-only (fed by a read-only source)",
         "rule_loc": read_only},
        {"input": 2, "rejected": "input 1 comes first in _output_inplace_ability and passes"}]
    assert d["cites"] == [{"rule": "inplace.read_only_source", "loc": read_only}] and read_only in report["rules"]
    g.write_text(g.read_text().replace("[[0, 0], [0, 1], [0, 2]]", "[[0, 1]]"))
    report = run_report(capsys, tmp_path, g, ["mem_inplace"])
    (d,) = [d for d in report["diagnostics"] if d["code"] == "INPLACE_REUSE"]
    assert "rejected_inputs" not in d          # one candidate: no choice


def test_ref_identity_for_a_ref_input_without_output(tmp_path, capsys):
    g = tmp_path / "g.yaml"
    g.write_text(REF_IDENTITY)
    report = run_report(capsys, tmp_path, g, ["variable_prepare"])
    c = card(report, "RefIdentity_variable_0_TO_scatter_0")
    assert c["rule"] == "var/ref-identity-for-ref-input" and [a["id"] for a in c["alternatives"]] == ["ref-after-output"]


def test_budget_fallback_is_its_own_choice_point(tmp_path, capsys):
    """An input isolated because --budget ran out lists the exact check as the alternative, not the
    absolute checker's (whose pairs were never checked)."""
    report = run_report(capsys, tmp_path, ROOT / "examples" / "train_step.pbtxt", ["mem_layout_conflict"],
                        ["--budget", "mem_layout_conflict=10"])
    fallback = [i for i in report["insertions"] if i["reason"].get("budget") == 10]
    assert fallback and all([a["rule"] for a in i["alternatives"]] == ["layout/budget-fallback#exact-check"]
                            for i in fallback)
    assert all(i["rule"] == "layout/absolute" for i in fallback)        # the rule is still the absolute checker


def test_side_and_type_filters_pick_the_rejected_ones(tmp_path, capsys):
    """if_type: a MemSet clean node rejects AtomicAddrClean, an AtomicAddrClean one MemSet."""
    path = CASES / "atomic" / "own-atomic-addr-clean-type.yaml"
    report = run_report(capsys, tmp_path, path, fixture_passes(path))
    (c,) = [i for i in report["insertions"] if i["rule"] == "atomic/shared"]
    assert c["type"] == "AtomicAddrClean" and [a["id"] for a in c["alternatives"]] == ["clean-per-node", "memset"]


def test_explain_text_and_html_show_them(tmp_path, capsys):
    path = CASES / "hccl" / "HM-01.yaml"
    code = main(["explain", str(path), "allreduce_HcclMemcpyPass_Identity0", "--passes", "hccl_memcpy"])
    text = capsys.readouterr().out
    assert code == 0
    line = alt_line("hccl/protect-constant", "memcpy-async")
    assert (f"not chosen: a MemcpyAsync before the input  (rule hccl/protect-constant#memcpy-async, "
            f"rules/ge/alternatives.yaml:{line}:7)") in text
    assert "· GE source: compiler/graph/passes/memory_conflict/hccl_memcpy_pass.cc:174-188" in text
    assert "|     HcclMemcpyPass builds an Identity (CreateIdentityOpDesc); MemcpyAsync nodes are" in text   # why, quoted
    html = tmp_path / "r.html"
    assert main(["run", str(path), "--passes", "hccl_memcpy", "--report-html", str(html), "--quiet"]) == 0
    page = html.read_text()
    assert "not chosen: a MemcpyAsync before the input" in page and "hccl_memcpy_pass.cc:174-188" in page


def test_sarif_keeps_them_out_of_the_decision_path(capsys):
    path = CASES / "hccl" / "HM-01.yaml"
    assert main(["run", str(path), "--passes", "hccl_memcpy", "--format", "sarif", "--quiet"]) == 0
    (result,) = [r for r in json.loads(capsys.readouterr().out)["runs"][0]["results"]
                 if r["properties"].get("node") == "allreduce_HcclMemcpyPass_Identity0"]
    flow = result["codeFlows"][0]["threadFlows"][0]["locations"]
    assert not any(x["location"]["message"]["text"].startswith("not chosen: ") for x in flow)
    assert [a["id"] for a in result["properties"]["alternatives"]] == ["copy-after-producer", "memcpy-async"]


def test_saved_report_explains_the_same(tmp_path, capsys):
    path = CASES / "layout" / "NC-02.yaml"
    run_report(capsys, tmp_path, path, fixture_passes(path))
    assert main(["explain", "--report", str(tmp_path / "r.json"), "identity_1_phony_concat_MemLayoutConflict_0"]) == 0
    assert "not chosen: an Identity after the no-padding continuous output" in capsys.readouterr().out


def test_no_entry_no_alternatives(tmp_path, capsys):
    """A choice point the pack says nothing about lists none (the engine invents none): the Assign
    HcclMemcpyPass writes back after a broadcast (the rule's alternatives are for its Identity), the
    MemcpyAddrAsync before a StreamMerge."""
    path = CASES / "memcpy" / "MA-01.yaml"
    report = run_report(capsys, tmp_path, path, fixture_passes(path))
    assert report["insertions"] and all("alternatives" not in i for i in report["insertions"])
    path = CASES / "hccl" / "HM-08.yaml"
    report = run_report(capsys, tmp_path, path, fixture_passes(path))
    assigns = [i for i in report["insertions"] if i["type"] == "Assign"]
    assert assigns and all("alternatives" not in i for i in assigns)
    assert all("alternatives" in i for i in report["insertions"] if i["type"] == "Identity")


def test_an_overlay_edits_them(tmp_path, capsys):
    """The alternatives are pack data: an overlay drops one and rewords another."""
    pack = tmp_path / "mine"
    pack.mkdir()
    (pack / "pack.yaml").write_text(f'name: mine\nversion: "1.0.0"\nschema_version: 1\nbase: {PACK}\n'
                                    "include: [changes.yaml]\n")
    (pack / "changes.yaml").write_text(
        "overlay:\n"
        "  - remove: isolation_alternatives[hccl/protect-constant][memcpy-async]\n"
        "  - replace: isolation_alternatives[hccl/protect-constant][copy-after-producer].rejected\n"
        "    value: our own reason\n")
    path = CASES / "hccl" / "HM-01.yaml"
    report = run_report(capsys, tmp_path, path, ["hccl_memcpy"], ["--rules", str(pack)])
    (a,) = card(report, "allreduce_HcclMemcpyPass_Identity0")["alternatives"]
    assert a["id"] == "copy-after-producer" and a["rejected"] == "our own reason"


def test_golden_lines_name_them():
    text = (CASES / "hccl" / "HM-01.golden").read_text()
    assert re.search(r"^insert Identity allreduce_HcclMemcpyPass_Identity0 .* rejected=\[copy-after-producer, "
                     r"memcpy-async\]$", text, re.M)


# ---- the section itself ------------------------------------------------------------------
def _pack_with(tmp_path: Path, body: str) -> Path:
    dst = tmp_path / "ge"
    shutil.copytree(PACK, dst)
    (dst / "alternatives.yaml").write_text(body)
    return dst


@pytest.mark.parametrize("body, message, hint", [
    ("isolation_alternatives:\n  hccl/protect-constnt:\n    - {name: a, does: x, rejected: y, ge: a/b.cc:1}\n",
     "isolation_alternatives: no choice point 'hccl/protect-constnt'", "did you mean 'hccl/protect-constant'?"),
    ("isolation_alternatives:\n  rw/matrix:\n    - {name: a, does: x, rejected: y, ge: somewhere}\n",
     "ge: 'somewhere' is not a GE source location", "path/to/file.cc:LINE"),
    ("isolation_alternatives:\n  rw/matrix:\n    - {name: a, does: x, rejected: y, ge: a/b.cc:1, if_isolated: inptu}\n",
     "if_isolated: unknown side 'inptu'", "did you mean 'input'?"),
    ("isolation_alternatives:\n  rw/matrix:\n    - {name: a, does: x, rejected: y, ge: a/b.cc:1}\n"
     "    - {name: a, does: x, rejected: y, ge: a/b.cc:2}\n",
     "alternative 'a' of rw/matrix is listed twice", "first listed at"),
    ("isolation_alternatives:\n  rw/matrix:\n    - {name: Not_Kebab, does: x, rejected: y, ge: a/b.cc:1}\n",
     "alternative name 'Not_Kebab' is not kebab-case", "copy-after-producer"),
    ("isolation_alternatives:\n  rw/matrix:\n    - {name: a, does: x, ge: a/b.cc:1}\n",
     "rejected", ""),
])
def test_bad_sections_are_located_errors(tmp_path, capsys, body, message, hint):
    pack = _pack_with(tmp_path, body)
    assert main(["rules", "check", str(pack)]) == 2
    err = capsys.readouterr().err
    assert "alternatives.yaml:" in err and message in err and hint in err


def test_loaded_entries_carry_their_lines():
    pack = load_pack(PACK)
    (a, _) = pack.configs["isolation_alternatives"]["hccl/protect-constant"]
    assert (a.id, a.loc.line) == ("copy-after-producer", alt_line("hccl/protect-constant", "copy-after-producer"))
    assert a.end.line > a.loc.line


@pytest.mark.skipif(not GE_MIRROR.is_dir(), reason="GE's source mirror is not on this machine")
def test_every_ge_citation_names_lines_of_ge_source():
    """Each `ge:` is a file of GE's repository and its lines exist there."""
    for choice, alts in declared().items():
        for a in alts:
            path, _, lines = a["ge"].rpartition(":")
            first, _, last = lines.partition("-")
            text = subprocess.run(["git", f"--git-dir={GE_MIRROR}", "show", f"HEAD:{path}"], capture_output=True,
                                  text=True)
            assert text.returncode == 0, f"{choice}#{a['name']}: no {path} in GE"
            n = len(text.stdout.splitlines())
            assert 1 <= int(first) <= int(last or first) <= n, f"{choice}#{a['name']}: {a['ge']} beyond {n} lines"
