"""placement: GE's PlacedLowerResultUT restated as cases (tests/runtime_mem/placement.yaml), the
flag form, the pack's copy table as data (an edit changes the copy), and bad input (exit 2)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from engine.cli import main
from engine.core.resources import default_pack_dir

HERE = Path(__file__).parent / "runtime_mem"
DOC = yaml.safe_load((HERE / "placement.yaml").read_text())


def run(tmp_path, capsys, case, *extra):
    path = tmp_path / "case.json"
    path.write_text(json.dumps(case))
    status = main(["runtime", "placement", str(path), *extra])
    out, err = capsys.readouterr()
    return status, out, err


def value(doc, where: str):
    v = doc
    for part in where.split("."):
        v = v[int(part)] if isinstance(v, list) else v[part]
    return v


def nodes(doc, graph="main"):
    return {n["name"]: n for n in doc["graphs"][graph]["nodes"]}


def node_at(doc, where: str, graph: str):
    table = nodes(doc, graph)
    if "." not in where:
        return next(n for n in doc["graphs"][graph]["nodes"] if n["type"] == where)
    ref = value(doc, where)
    name = ref.rsplit(":", 1)[0]
    return table.get(name) or nodes(doc, "init")[name]


def matches(doc, refs, wants) -> bool:
    if len(refs) != len(wants):
        return False
    every = {**nodes(doc, "main"), **nodes(doc, "init")}
    for ref, want in zip(refs, wants):
        name = ref.rsplit(":", 1)[0]
        if ":" in want:
            if ref != want:
                return False
        elif name != want and every[name]["type"] != want:
            return False
    return True


def check(doc, item) -> None:
    if isinstance(item, list):
        where, want = item
        assert value(doc, where) == want, where
    elif "type_of" in item:
        assert node_at(doc, item["type_of"], "main")["type"] == item["is"], item
    elif "inputs_of" in item:
        n = node_at(doc, item["inputs_of"], item.get("graph", "main"))
        assert matches(doc, n["inputs"], item["are"]), (item, n["inputs"])
        assert matches(doc, [c + ":0" for c in n["ctrl_inputs"]], item.get("ctrl", [])), (item, n["ctrl_inputs"])
    elif "count" in item:
        graph = item.get("graph", "main")
        assert sum(n["type"] == item["count"] for n in doc["graphs"][graph]["nodes"]) == item["is"], item
    elif "init_source_of" in item:
        k = int(value(doc, item["init_source_of"]).rsplit(":", 1)[1])
        net = next(n for n in doc["graphs"]["init"]["nodes"] if n["type"] == "InnerNetOutput")
        src = net["inputs"][k].rsplit(":", 1)[0]
        assert nodes(doc, "init")[src]["type"] == item["is"], item
    else:
        raise AssertionError(f"unknown expectation {item}")


@pytest.mark.parametrize("case", DOC["cases"], ids=[c["name"] for c in DOC["cases"]])
def test_ge_scenario(tmp_path, capsys, case):
    status, out, err = run(tmp_path, capsys, case["case"])
    assert status == 0, err
    doc = json.loads(out)
    for item in case["expect"]:
        check(doc, item)


def test_flags_form_and_determinism(capsys):
    assert main(["runtime", "placement", "--from", "hbm", "--to", "host", "--data-dependent"]) == 0
    first = capsys.readouterr().out
    assert main(["runtime", "placement", "--from", "hbm", "--to", "host", "--data-dependent"]) == 0
    assert capsys.readouterr().out == first
    doc = json.loads(first)
    check(doc, {"type_of": "results.0.shape", "is": "BuildTensor"})
    check(doc, {"inputs_of": "results.0.address", "are": ["address:0", "CalcTensorSizeFromStorage",
                                                           "CreateHostL2Allocator"], "ctrl": ["SyncStream"]})
    assert main(["runtime", "placement", "--from", "host", "--to", "hbm", "--dtype", "string"]) == 0
    doc = json.loads(capsys.readouterr().out)
    check(doc, {"inputs_of": "results.0.address", "are": ["SplitRtStreams_1:0", "SelectL2Allocator", "address:0",
                                                           "CalcStringTensorSize", "shape:0", "Const"],
                "ctrl": ["order"]})


def test_copy_table_is_pack_data(tmp_path, capsys):
    # a rule edit: hbm → host goes through MakeSureTensorAtHost instead of SyncStream + CopyD2H
    pack = tmp_path / "pack"
    shutil.copytree(default_pack_dir(), pack)
    f = pack / "runtime-memory.yaml"
    f.write_text(f.read_text().replace("{from: hbm, to: host, copy: device_to_host}",
                                       "{from: hbm, to: host, copy: make_sure_at_host}"))
    case = dict(DOC["cases"][0]["case"], global_data={"streams": 1},
                lower_result={"order_holders": ["order"], "outputs": [{"shape": "shape", "address": "address",
                                                                       "placement": "hbm"}]},
                requests=[{"call": "GetOutputResult", "index": 0, "placement": "host"}])
    status, out, _ = run(tmp_path, capsys, case, "--rules", str(pack))
    assert status == 0
    doc = json.loads(out)
    check(doc, {"type_of": "results.0.address", "is": "MakeSureTensorAtHost"})
    check(doc, {"count": "SyncStream", "is": 0})


def test_bad_rules_are_located(tmp_path, capsys, monkeypatch):
    pack = tmp_path / "pack"
    shutil.copytree(default_pack_dir(), pack)
    f = pack / "runtime-memory.yaml"
    f.write_text(f.read_text().replace("{from: host, to: hbm, copy: host_to_device}",
                                       "{from: hots, to: hbm, copy: host_to_devise}"))
    monkeypatch.chdir(tmp_path)
    assert main(["runtime", "placement", "--from", "hbm", "--to", "host", "--rules", "pack"]) == 2
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ": error: " in ln]
    assert len(lines) == 2
    assert lines[0].startswith("pack/runtime-memory.yaml:") and "unknown placement 'hots'" in lines[0]
    assert "did you mean 'host'?" in err and "unknown copy 'host_to_devise'" in lines[1]


@pytest.mark.parametrize("text,message", [
    ("node: {type: X}\nlower_result: {outputs: [{shape: s, address: a}]}\nrequests: []\n",
     "case.yaml:2:34: error: unknown holder 's'"),
    ("node: {type: X}\nholders: {s: {}}\nlower_result: {outputs: [{shape: s, address: s, placement: hmb}]}\nrequests: []\n",
     "case.yaml:3:60: error: unknown placement 'hmb'"),
    ("node: {type: X}\nlower_result: {}\nrequests: [{call: GetOutput}]\n",
     "case.yaml:3:19: error: unknown call 'GetOutput'"),
    ("node: {type: X}\nlower_result: {}\nrequests: []\nextra: 1\n", "case.yaml:4:1: error: placement case: unknown key 'extra'"),
])
def test_bad_case_is_located(tmp_path, capsys, monkeypatch, text, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "case.yaml").write_text(text)
    assert main(["runtime", "placement", "case.yaml"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith(message), err


def test_bad_flags(capsys):
    assert main(["runtime", "placement", "--from", "hbn", "--to", "host"]) == 2
    assert "--from: error: unknown placement 'hbn'" in capsys.readouterr().err
    assert main(["runtime", "placement", "--to", "host"]) == 2
    assert "--from is required" in capsys.readouterr().err


def test_registry_overrides_the_table(tmp_path, capsys):
    # PlacedLoweringRegistry as data: a node type registered to make_sure_at_device copies host → hbm
    # with MakeSureTensorAtDevice instead of CopyH2D
    pack = tmp_path / "pack"
    shutil.copytree(default_pack_dir(), pack)
    f = pack / "runtime-memory.yaml"
    f.write_text(f.read_text().replace("    registry: {}", "    registry: {MyOp: make_sure_at_device}"))
    case = {"global_data": {"root_model": True}, "node": {"type": "MyOp"},
            "holders": {"order": {"type": "Data"}, "shape": {"type": "Data"}, "address": {"type": "Data"}},
            "lower_result": {"order_holders": ["order"],
                             "outputs": [{"shape": "shape", "address": "address", "placement": "host"}]},
            "requests": [{"call": "GetOutputResult", "index": 0, "placement": "hbm"}]}
    status, out, _ = run(tmp_path, capsys, case, "--rules", str(pack))
    assert status == 0
    check(json.loads(out), {"type_of": "results.0.address", "is": "MakeSureTensorAtDevice"})
    status, out, _ = run(tmp_path, capsys, case)
    check(json.loads(out), {"type_of": "results.0.address", "is": "CopyH2D"})


def test_output_without_desc_is_null(tmp_path, capsys):
    case = {"global_data": {"streams": 1}, "node": {"type": "Op", "outputs": 1},
            "holders": {"s": {"type": "Data"}, "a": {"type": "Data"}},
            "lower_result": {"outputs": [{"shape": "s", "address": "a"}, {"shape": "s", "address": "a"}]},
            "requests": [{"call": "GetOutputTensorResult", "index": 1, "placement": "hbm"},
                         {"call": "GetOutputTensorResult", "index": 0, "placement": "hbm"}]}
    _, out, _ = run(tmp_path, capsys, case)
    doc = json.loads(out)
    assert doc["results"][0]["null"] is True and doc["results"][1]["null"] is False


def test_init_node_may_not_use_a_main_holder(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "case.yaml").write_text(
        "node: {type: X}\nholders: {h: {}}\non_init:\n  nodes: [{name: n, type: T, inputs: [h]}]\n"
        "  returns: [{as: v, from: m}]\nlower_result: {outputs: [{shape: v, address: v}]}\nrequests: []\n")
    assert main(["runtime", "placement", "case.yaml"]) == 2
    err = capsys.readouterr().err
    assert "case.yaml:4:11: error: unknown init node 'h'" in err
    assert "case.yaml:5:27: error: unknown init node 'm'" in err and "expected init nodes: n" in err
