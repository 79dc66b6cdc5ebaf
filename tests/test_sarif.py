"""`run --sarif FILE`, `--format sarif|json` and `--min-severity`: the SARIF 2.1.0 log of
a run, validated against the official OASIS schema (tests/data/sarif-schema-2.1.0.json,
vendored from github.com/oasis-tcs/sarif-spec, sarif-2.1/schema/)."""
from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from engine.cli import main

ROOT = Path(__file__).resolve().parents[1]
TRAIN = ROOT / "examples" / "train_step.pbtxt"
RW01 = ROOT / "tests" / "cases" / "rw" / "RW-01.yaml"
FAILING = ROOT / "tests" / "cases" / "subgraph" / "own-data-no-parent-index.yaml"
SCHEMA = json.loads((ROOT / "tests" / "data" / "sarif-schema-2.1.0.json").read_text())


def run(args, capsys):
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def valid(log: dict) -> dict:
    errors = sorted(jsonschema.Draft4Validator(SCHEMA).iter_errors(log), key=lambda e: list(e.absolute_path))
    assert not errors, [f"{list(e.absolute_path)}: {e.message}" for e in errors[:5]]
    return log["runs"][0]


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    """The first-hour case: `memconflict run examples/train_step.pbtxt --sarif F` in the checkout."""
    out = tmp_path_factory.mktemp("sarif")
    sarif, rj = out / "run.sarif", out / "r.json"
    assert main(["run", str(TRAIN), "--sarif", str(sarif), "--report-json", str(rj), "--quiet"]) == 0
    return json.loads(sarif.read_text()), json.loads(rj.read_text()), sarif.read_bytes()


def test_sarif_on_the_example_is_valid_sarif_2_1_0(example):
    log, report, _ = example
    run_ = valid(log)
    assert log["version"] == "2.1.0" and run_["tool"]["driver"]["name"] == "memconflict"
    assert run_["invocations"] == [{"executionSuccessful": True}]


def test_every_insertion_and_diagnostic_is_a_result(example):
    log, report, _ = example
    results = log["runs"][0]["results"]
    notes = [r for r in results if r["properties"].get("node") in {i["name"] for i in report["insertions"]}
             and "codeFlows" in r]
    assert len(notes) == len(report["insertions"]) == 36
    assert {r["ruleId"] for r in notes} == set(report["summary"]["by_rule"])
    diags = [r for r in results if "codeFlows" not in r]
    assert len(diags) == len(report["diagnostics"])
    lint = next(r for r in diags if r["ruleId"] == "W18888")
    assert lint["level"] == "warning" and "no control relation" in lint["message"]["text"]
    attr = next(r for r in diags if r["properties"]["code"] == "ATTR_SET")
    assert attr["ruleId"] == "addr-async/netoutput-is-input-const" and attr["level"] == "note"


def test_rules_carry_doc_help_and_source_location(example):
    log, report, _ = example
    run_ = log["runs"][0]
    rules = {r["id"]: r for r in run_["tool"]["driver"]["rules"]}
    hccl = rules["hccl/protect-constant"]
    assert hccl["shortDescription"]["text"] == "a constant or variable feeding a writing collective is always isolated"
    loc = report["rules"][hccl["properties"]["loc"]]
    assert hccl["properties"]["loc"].startswith("rules/ge/hccl.yaml:") and loc["text"] in hccl["help"]["text"]
    assert "```yaml\n- id: hccl/protect-constant" in hccl["help"]["markdown"]
    assert "GraphLint" in rules["W18888"]["shortDescription"]["text"]       # the pass's doc
    for r in run_["results"]:
        assert run_["tool"]["driver"]["rules"][r["ruleIndex"]]["id"] == r["ruleId"]


def test_physical_locations_point_into_the_pack_folder_that_ran(example):
    log, report, _ = example
    run_ = log["runs"][0]
    assert run_["originalUriBaseIds"]["PACKROOT"]["uri"] == "rules/ge/"
    assert run_["originalUriBaseIds"]["PACKROOT"]["uriBaseId"] == "%SRCROOT%"
    assert run_["properties"]["pack"] == report["pack"] and run_["properties"]["pack"]["path"] == "rules/ge"
    res = next(r for r in run_["results"] if r["ruleId"] == "hccl/protect-constant")
    phys = res["locations"][0]["physicalLocation"]
    assert phys["artifactLocation"]["uri"] == "hccl.yaml" and phys["artifactLocation"]["uriBaseId"] == "PACKROOT"
    line = phys["region"]["startLine"]
    assert f"rules/ge/hccl.yaml:{line}:" in next(i["rule_loc"] for i in report["insertions"]
                                                 if i["rule"] == "hccl/protect-constant")
    text = (ROOT / "rules" / "ge" / "hccl.yaml").read_text().splitlines()[line - 1]
    assert "hccl/protect-constant" in text
    art = run_["artifacts"][phys["artifactLocation"]["index"]]["location"]
    assert art == {"uri": "hccl.yaml", "uriBaseId": "PACKROOT"}
    assert {"location": {"uri": "examples/train_step.pbtxt", "uriBaseId": "%SRCROOT%"},
            "roles": ["analysisTarget"]} in run_["artifacts"]


def test_logical_locations_graph_node_anchor(example):
    log, report, _ = example
    run_ = log["runs"][0]
    logical = run_["logicalLocations"]
    ins = next(i for i in report["insertions"] if i["graph"] == "while_2_body")
    res = next(r for r in run_["results"] if r["properties"].get("node") == ins["name"])
    node = logical[res["locations"][0]["logicalLocations"][0]["index"]]
    assert node["kind"] == "node" and node["name"] == ins["name"]
    graph = logical[node["parentIndex"]]
    assert graph["kind"] == "graph" and graph["fullyQualifiedName"] == "train_step/while_2_body"
    assert logical[graph["parentIndex"]] == {"name": "train_step", "fullyQualifiedName": "train_step", "kind": "graph"}
    lint = next(r for r in run_["results"] if r["ruleId"] == "W18888")
    anchor = logical[lint["locations"][0]["logicalLocations"][0]["index"]]
    assert anchor["kind"] == "anchor" and anchor["name"] == "layer_1/conv2d/kernel:0"
    assert logical[anchor["parentIndex"]]["kind"] == "node"


def test_decision_path_is_a_code_flow(capsys):
    code, out, _ = run(["run", RW01, "--passes", "mem_rw_conflict", "--format", "sarif", "--quiet"], capsys)
    assert code == 0
    run_ = valid(json.loads(out))
    res = run_["results"][0]
    steps = res["codeFlows"][0]["threadFlows"][0]["locations"]
    assert [s["executionOrder"] for s in steps] == list(range(1, len(steps) + 1))
    texts = [s["location"]["message"]["text"] for s in steps]
    assert any("ReadOnly" in t for t in texts) and any("insert_identity" in t for t in texts)
    located = [s for s in steps if "physicalLocation" in s["location"]]
    assert located and all(s["location"]["physicalLocation"]["artifactLocation"]["uri"] == "rw.yaml" for s in located)
    assert any("state" in s for s in steps)          # the facts the rule tested


def test_min_severity_filters_sarif_and_text(tmp_path, capsys):
    sarif = tmp_path / "w.sarif"
    rj = tmp_path / "r.json"
    code, out, _ = run(["run", TRAIN, "--sarif", sarif, "--min-severity", "warning", "--report-json", rj], capsys)
    assert code == 0
    levels = {r["level"] for r in valid(json.loads(sarif.read_text()))["results"]}
    assert levels == {"warning"}
    assert "warning W18888" in out and "info ATTR_SET" not in out
    infos = sum(1 for d in json.loads(rj.read_text())["diagnostics"] if d["severity"] == "info")
    assert infos >= 1 and f"({infos} diagnostic(s) below warning not shown)" in out
    code, out, _ = run(["run", TRAIN, "--min-severity", "info"], capsys)
    assert "info ATTR_SET" in out


def test_format_json_is_the_report_and_text_goes_to_stderr(tmp_path, capsys):
    rj = tmp_path / "r.json"
    code, out, err = run(["run", RW01, "--passes", "mem_rw_conflict", "--format", "json", "--report-json", rj], capsys)
    assert code == 0 and out.encode() == rj.read_bytes()
    assert "memconflict: " in err and "node(s) inserted" in err


def test_sarif_and_format_sarif_cannot_both_be_stdout(capsys):
    code, out, err = run(["run", RW01, "--sarif", "-", "--format", "sarif"], capsys)
    assert code == 2 and out == "" and "standard output is already taken" in err


def test_sarif_path_checked_before_any_work(tmp_path, capsys):
    code, _, err = run(["run", TRAIN, "--sarif", tmp_path, "--out", tmp_path / "g.pbtxt"], capsys)
    assert code == 2 and "--sarif" in err and "is a folder" in err
    assert not (tmp_path / "g.pbtxt").exists()


def test_sarif_is_byte_identical_across_runs(example, tmp_path):
    again = tmp_path / "again.sarif"
    assert main(["run", str(TRAIN), "--sarif", str(again), "--quiet"]) == 0
    assert again.read_bytes() == example[2]


def test_pass_failure_is_an_error_result_and_only_sarif_is_written(tmp_path, capsys):
    sarif, rj = tmp_path / "f.sarif", tmp_path / "r.json"
    code, _, err = run(["run", FAILING, "--sarif", sarif, "--report-json", rj], capsys)
    assert code == 1 and "failed" in err
    assert not rj.exists()
    run_ = valid(json.loads(sarif.read_text()))
    assert run_["invocations"] == [{"executionSuccessful": False}]
    fail = [r for r in run_["results"] if r["level"] == "error"]
    assert len(fail) == 1 and fail[0]["ruleId"] == "PASS_FAILED" and "failed" in fail[0]["message"]["text"]


def test_each_cited_file_is_resolved_once_a_log(example, monkeypatch):
    """Note [artifacts resolved once]: the results cite a few files many times; each file name
    is resolved once however many results cite it, and the log is the same."""
    from engine.passes.catalog import load_pack
    from engine.report.sarif import build_sarif
    _, report, _ = example
    pack = load_pack(ROOT / "rules" / "ge")
    calls = []
    resolve = Path.resolve
    monkeypatch.setattr(Path, "resolve", lambda self, *a, **k: calls.append(str(self)) or resolve(self, *a, **k))
    once = build_sarif(report, pack)
    files = {str(c) for c in calls}
    many = dict(report, insertions=report["insertions"] * 20, diagnostics=report["diagnostics"] * 20)
    calls.clear()
    build_sarif(many, pack)
    assert len(calls) == len(set(calls)) == len(files)     # the pack folder, the working directory, each file
    assert len(files) < len(report["insertions"]) + len(report["diagnostics"])
    assert len(once["runs"][0]["results"]) == len(report["insertions"]) + len(report["diagnostics"])
    assert build_sarif(report, pack) == once
