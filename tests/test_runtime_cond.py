"""`memconflict runtime cond`: GE's bg_condition unit-test scenarios (ConditionUT, restated as
the CASE files in tests/runtime/cond/), the dump form, failure paths and a rule edit."""
from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from engine.cli import main
from engine.passes.catalog import load_pack
from engine.runtime.casefile import read_cond_case
from engine.runtime.cond import run_case

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / "tests" / "runtime" / "cond"
RT = load_pack(None).configs["runtime"]


def run(name: str) -> dict:
    out, _ = run_case(read_cond_case(str(CASES / f"{name}.yaml"), RT), RT)
    return out


def cond_node(out: dict) -> dict:
    return next(n for n in out["root"]["nodes"] if n["type"] in ("If", "Case"))


def sub(node: dict, k: int) -> list[dict]:
    return node["subgraphs"][k]["nodes"]


def types(nodes: list[dict]) -> dict:
    return dict(Counter(n["type"] for n in nodes))


def by_type(nodes: list[dict], t: str) -> dict:
    return next(n for n in nodes if n["type"] == t)


def from_types(nodes: list[dict], t: str) -> list:
    """The types (and output) feeding node `t`'s data inputs, in input order."""
    names = {n["name"]: n["type"] for n in nodes}
    out = []
    for r in by_type(nodes, t)["inputs"]:
        name, _, idx = r.partition(":")
        out.append((names.get(name, name), int(idx or 0)))
    return out


def guarded(out: dict) -> dict[int, str]:
    """Output index → guarder type, for the guarders on the cond node's outputs."""
    c = cond_node(out)["name"]
    res = {}
    for n in out["root"]["nodes"]:
        if n["attrs"].get("ReleaseResourceIndex") == 0 and n["inputs"][0].split(":")[0] == c:
            r = n["inputs"][0]
            res[int(r.split(":")[1]) if ":" in r else 0] = n["type"]
    return res


CONTROL_FRAME = {"InnerData": 1, "SwitchNotify": 1, "WatcherPlaceholder": 1, "WaitAnyone": 1}


@pytest.mark.parametrize("name,reason", [
    ("If_Failed_CondIsNullptr", "cond of If is null"),
    ("If_Failed_ThenAndElseAreNullptr", "both null"),
    ("If_Failed_BranchOutputSizeDifferent", "returns 1 output(s), branch 0 (then_graph) 2"),
    ("If_FailedForOuputsNumNotMatch_OnlyOneBranchWithDataOut", "returns 1 output(s), branch 0 (then_graph) 0"),
    ("Case_Failed_IndexIsNullptr", "index of Case is null"),
    ("Case_Failed_SubgraphBuilderIsNullptr", "the 1 th builder of Case is null"),
])
def test_early_failures_are_data(name, reason):
    out = run(name)
    assert out["ok"] is False and out["holders"] == 0
    assert reason in out["reason"]
    assert not any(n["type"] == "NetOutput" for n in out["root"]["nodes"])


def test_io_connection_and_cond_graph():
    out = run("If_IoConnectionCorrect")
    assert out["ok"] and out["holders"] == 2
    c = cond_node(out)
    assert c["inputs"] == ["data0", "data1"]
    assert by_type(out["root"]["nodes"], "NetOutput")["inputs"] == [c["name"], c["name"] + ":1"]
    frame = sub(c, 0)
    assert c["subgraphs"][0]["name"] == "cond"
    assert types(frame) == {**CONTROL_FRAME, "BranchPivot": 2, "BranchDone": 2}
    sn = by_type(frame, "SwitchNotify")
    assert from_types(frame, "SwitchNotify") == [("InnerData", 0)] and sn["attrs"]["_request_watcher"] is True
    assert by_type(frame, "InnerData")["attrs"]["index"] == 0          # If input 0: data0
    pivots = [n for n in frame if n["type"] == "BranchPivot"]
    dones = {n["name"]: n for n in frame if n["type"] == "BranchDone"}
    assert [p["attrs"]["branch"] for p in pivots] == [1, 2]
    assert [p["inputs"] for p in pivots] == [[sn["name"] + ":1"], [sn["name"] + ":2"]]
    for p in pivots:
        done = next(d for d in dones.values() if p["name"] in d["ctrl_inputs"])
        assert done["attrs"]["branch"] == p["attrs"]["branch"]
    assert sorted(by_type(frame, "WaitAnyone")["ctrl_inputs"]) == sorted(dones)


def test_case_cond_graph_three_branches():
    c = cond_node(run("Case_CondGraphCorrect_ThreeBranch"))
    assert [s["name"] for s in c["subgraphs"]] == ["cond", "branch_0", "branch_1", "branch_2"]
    assert types(sub(c, 0)) == {**CONTROL_FRAME, "BranchPivot": 3, "BranchDone": 3}


def test_then_else_graphs():
    c = cond_node(run("If_ThenElseGraphCorrect"))
    assert types(sub(c, 1)) == {"InnerData": 3, "Bar1": 1, "Foo1": 2, "InnerNetOutput": 1}
    assert from_types(sub(c, 1), "InnerNetOutput") == [("Foo1", 0), ("Bar1", 0)]
    assert types(sub(c, 2)) == {"InnerData": 2, "Foo2": 1, "InnerNetOutput": 1}
    assert from_types(sub(c, 2), "InnerNetOutput") == [("Foo2", 0), ("Foo2", 0)]
    # foo2b reads data0 and data2 through InnerData(index 0) and InnerData(index 2)
    else_nodes = {n["name"]: n for n in sub(c, 2)}
    assert [else_nodes[r]["attrs"]["index"] for r in else_nodes["foo2b"]["inputs"]] == [0, 2]


@pytest.mark.parametrize("name,then_n,else_n", [("If_Success_OnlyThenBranch", 5, 1), ("If_Success_OnlyElseBranch", 1, 5)])
def test_one_branch_no_outputs(name, then_n, else_n):
    out = run(name)
    assert out["ok"] and out["holders"] == 1
    assert types(out["root"]["nodes"]) == {"Data": 3, "If": 1}
    c = cond_node(out)
    assert (len(sub(c, 1)), len(sub(c, 2))) == (then_n, else_n)
    empty = sub(c, 1) if then_n == 1 else sub(c, 2)
    assert types(empty) == {"InnerNetOutput": 1}


def test_move_guarder_out_all_branches():
    out = run("If_MoveGuarderOut_AllBranchsHaveGuarders")
    assert guarded(out) == {0: "FreeMemory"}
    c = cond_node(out)
    then = sub(c, 1)
    assert types(then) == {"InnerData": 3, "Foo1": 2, "Bar1": 1, "FreeMemory": 1, "InnerNetOutput": 1}
    assert by_type(then, "FreeMemory")["inputs"] == ["foo2"]                     # foo2's guarder stays
    assert types(sub(c, 2)) == {"InnerData": 3, "Foo1": 1, "InnerNetOutput": 1}  # foo4's moved out
    assert out["all_same_indexes"] == [1] and out["conflict_indexes"] == []


def test_else_plus_then_move_out():
    out = run("If_ElsePlusAndThenMoveOut_OnlyThenHaveGuarder")
    assert guarded(out) == {1: "FreeMemory"}
    c = cond_node(out)
    assert types(sub(c, 1)) == {"InnerData": 2, "Foo1": 1, "InnerNetOutput": 1}
    els = sub(c, 2)
    assert types(els) == {"InnerData": 3, "Foo1": 1, "IdentityAddr": 1, "InnerNetOutput": 1}
    assert from_types(els, "InnerNetOutput") == [("InnerData", 0), ("IdentityAddr", 0)]
    assert by_type(els, "IdentityAddr")["name"] == f"{c['name']}_Subgraph_1_AddResRef_"
    assert from_types(els, "IdentityAddr") == [("Foo1", 0)]


def test_then_plus_else_move_out_multiple():
    out = run("If_ThenPlusAndElseMoveOut_OnlyElseHaveMultipleGuarders")
    assert guarded(out) == {0: "FreeMemory", 1: "FreeMemory", 2: "FreeMemory", 3: "FreeMemory"}
    c = cond_node(out)
    then = sub(c, 1)
    assert types(then) == {"InnerData": 3, "Foo2Out": 1, "Foo1Out": 1, "IdentityAddr": 1, "InnerNetOutput": 1}
    assert from_types(then, "InnerNetOutput") == [("IdentityAddr", k) for k in range(4)]
    assert from_types(then, "IdentityAddr") == [("Foo2Out", 0), ("Foo1Out", 0), ("Foo2Out", 0), ("Foo2Out", 1)]
    assert types(sub(c, 2)) == {"InnerData": 3, "Bar": 4, "InnerNetOutput": 1}


def test_special_guarder_type_moves_out():
    out = run("If_MoveGuarderOut_With_Special_Guarders")
    assert guarded(out) == {0: "FreeFftsMem"}
    assert "FreeMemory" not in types(out["root"]["nodes"])


@pytest.mark.parametrize("guarder", ["FreeMemory", "FreeFixedFeatureMemory"])
def test_inner_data_with_guarder_outside(guarder):
    out = run(f"If_InnerDataWithGuarderOutside_{guarder}")
    assert guarded(out) == {1: guarder}
    els = sub(cond_node(out), 2)
    assert types(els) == {"InnerData": 1, "Bar": 1, "IdentityAddr": 1, "InnerNetOutput": 1}
    assert from_types(els, "InnerNetOutput") == [("Bar", 0), ("IdentityAddr", 0)]
    assert from_types(els, "IdentityAddr") == [("InnerData", 0)]
    assert by_type(els, "InnerData")["attrs"]["NodeWithGuarderOutside"] == guarder


@pytest.mark.parametrize("guarder", ["FreeMemory", "FreeBatchFftsMems"])
def test_guarder_outside_carries_through_nesting(guarder):
    out = run(f"If_InnerDataWithGuarderOutside_Nesting_{guarder}")
    root_types = types(out["root"]["nodes"])
    assert root_types[guarder] == 2 and (guarder == "FreeMemory" or "FreeMemory" not in root_types)
    then = sub(cond_node(out), 1)
    sub_if = by_type(then, "If")
    assert types(then)[guarder] == 1 and (guarder == "FreeMemory" or "FreeMemory" not in types(then))
    sub_then = sub(sub_if, 1)
    assert types(sub_then) == {"InnerData": 1, "SubSubFoo": 1, "IdentityAddr": 1, "InnerNetOutput": 1}
    assert from_types(sub_then, "InnerNetOutput") == [("SubSubFoo", 0), ("IdentityAddr", 0)]
    assert by_type(sub_then, "InnerData")["attrs"]["NodeWithGuarderOutside"] == guarder


def test_one_guarded_value_returned_twice():
    out = run("If_FreeTwoOutPlusOneInside_OneGuarderConnectToOut")
    assert guarded(out) == {0: "FreeMemory", 1: "FreeMemory"}
    c = cond_node(out)
    els = sub(c, 2)
    assert types(els) == {"InnerData": 2, "Bar": 1, "IdentityAddr": 1, "InnerNetOutput": 1}
    assert from_types(els, "InnerNetOutput") == [("Bar", 0), ("IdentityAddr", 0)]
    assert from_types(sub(c, 1), "IdentityAddr") == [("Foo2Out", 0), ("Foo1Out", 0)]


def test_point_from_different_inputs():
    out = run("If_AddPointFrom_DiffDataOut")
    assert out["conflict_indexes"] == [0]
    c = cond_node(out)
    for k in (1, 2):
        g = sub(c, k)
        assert types(g) == {"InnerData": 2, "Foo1": 1, "PointFromInputs": 1, "InnerNetOutput": 1}
        assert from_types(g, "InnerNetOutput") == [("PointFromInputs", 0), ("Foo1", 0)]
        assert from_types(g, "PointFromInputs") == [("InnerData", 0)]
        assert by_type(g, "PointFromInputs")["name"] == f"{c['name']}_PointFrom_{k - 1}"


def test_same_input_does_nothing():
    out = run("If_DoNothing_SameDataOut")
    assert out["conflict_indexes"] == [] and out["all_same_indexes"] == [0]
    c = cond_node(out)
    for k in (1, 2):
        assert types(sub(c, k)) == {"InnerData": 2, "Foo1": 1, "InnerNetOutput": 1}


def test_case_point_from_one_data_out():
    out = run("Case_AddPointFrom_OneDataOut")
    assert out["conflict_indexes"] == [0]
    c = cond_node(out)
    for k, src in ((1, "Foo1"), (2, "InnerData"), (3, "Bar1")):
        g = sub(c, k)
        assert types(g)["PointFromInputs"] == 1
        assert from_types(g, "PointFromInputs") == [(src, 0)]
        assert from_types(g, "InnerNetOutput")[0] == ("PointFromInputs", 0)


def test_one_point_from_for_many_conflicts():
    out = run("If_CreateOnePointFrom_MultipleConflicts")
    assert out["conflict_indexes"] == [1, 3]
    c = cond_node(out)
    then, els = sub(c, 1), sub(c, 2)
    assert from_types(then, "InnerNetOutput") == [("InnerData", 0), ("PointFromInputs", 0), ("Foo2", 0), ("PointFromInputs", 1)]
    assert from_types(then, "PointFromInputs") == [("Foo1", 0), ("Foo2", 1)]
    assert types(els)["InnerData"] == 3
    assert from_types(els, "InnerNetOutput") == [("InnerData", 0), ("PointFromInputs", 0), ("Foo1", 0), ("PointFromInputs", 1)]
    assert from_types(els, "PointFromInputs") == [("InnerData", 0), ("InnerData", 0)]


def test_output_placements():
    assert run("Case_OutputPlacementsSameWithSubgraphs")["output_placements"] == ["host", "hbm"]
    assert run("Case_OutputPlacementsUnknown_SubgraphsDiff")["output_placements"] == ["end", "end", "host"]


def test_cli_prints_one_json_object(capsys):
    assert main(["runtime", "cond", str(CASES / "If_AddPointFrom_DiffDataOut.yaml")]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["conflict_indexes"] == [0]
    assert main(["runtime", "cond", str(CASES / "If_Failed_CondIsNullptr.yaml")]) == 0   # a GE failure is data
    assert json.loads(capsys.readouterr().out)["ok"] is False


@pytest.mark.parametrize("text,message", [
    ("op: If\nfeeds: {d: {}}\ncond: d\nbranches: [{nodes: {a: {type: A, inputs: [zz]}}, outputs: [a]}, null]\n",
     "case.yaml:4:43: error: 'zz' is not defined before this use"),
    ("op: Iff\nfeeds: {d: {}}\ncond: d\nbranches: []\n", "case.yaml:1:5: error: 'Iff' is not an If or Case type"),
    ("op: If\nfeeds: {d: {placement: hmb}}\ncond: d\nbranches: [null, null]\n", "unknown placement 'hmb'"),
    ("op: If\nfeeds: {d: {}}\ncond: d\nbranches: [null]\n", "an If has two branches"),
    ("op: If\nfeeds: {d: {}}\ncond: d\nbranches: [{nodes: {a: {type: A, inputs: [d]}}, outputs: [\"a:3\"]}, null]\n",
     "'a' has 1 output(s); there is no output 3"),
    ("op: Case\nfeeds: {d: {}}\ncond: d\nbranches: [{nodes: {a: {type: A}}, outputs: [a]}, {nodes: {b: {type: B, inputs: [a]}}, outputs: [b]}]\n",
     "'a' is not on the graph of 'b'"),
])
def test_unusable_case_is_exit_2(tmp_path, capsys, text, message):
    f = tmp_path / "case.yaml"
    f.write_text(text)
    assert main(["runtime", "cond", str(f)]) == 2
    cap = capsys.readouterr()
    assert cap.out == "" and message in cap.err


def test_free_guarder_list_is_pack_data(tmp_path):
    """An outside guarder that is not in runtime.free_guarders is no guarder (FindGuarder):
    dropping FreeMemory from the list by a rule edit leaves data1 unguarded."""
    pack = tmp_path / "ge"
    shutil.copytree(ROOT / "rules" / "ge", pack)
    text = (pack / "runtime.yaml").read_text()
    (pack / "runtime.yaml").write_text(text.replace("free_guarders: [FreeMemory, ", "free_guarders: ["))
    rt = load_pack(pack).configs["runtime"]
    out, _ = run_case(read_cond_case(str(CASES / "If_InnerDataWithGuarderOutside_FreeMemory.yaml"), rt), rt)
    assert guarded(out) == {} and "IdentityAddr" not in types(sub(cond_node(out), 2))
    assert guarded(run("If_InnerDataWithGuarderOutside_FreeMemory")) == {1: "FreeMemory"}


def test_insert_after_moves_control_edges_like_ge():
    """ExecuteGraphUtils::InsertNodeAfter moves every out-control edge of the source to
    inserted → destination; InsertNodeBefore moves the destination's in-control edges."""
    from engine.runtime.exegraph import XGraph, add_ctrl, add_edge, insert_after, insert_before
    g = XGraph("g", None, [0])
    src, other, dst = g.add_node("src", "A", 0, 1), g.add_node("other", "B", 0, 0), g.add_node("dst", "C", 1, 0)
    add_edge(src, 0, dst, 0)
    add_ctrl(src, other)
    ia = g.add_node("ia", "IdentityAddr", 1, 1)
    insert_after(src, 0, [(dst, 0)], ia, 0, 0)
    assert dst.ins[0] == (ia, 0) and ia.ins[0] == (src, 0)
    assert list(src.out_ctrl) == [] and list(ia.out_ctrl) == [dst] and list(other.in_ctrl) == []
    pf = g.add_node("pf", "PointFromInputs", 1, 1)
    insert_before(dst, 0, pf, 0, 0)
    assert dst.ins[0] == (pf, 0) and pf.ins[0] == (ia, 0)
    assert list(dst.in_ctrl) == [] and list(pf.in_ctrl) == [ia]


def test_cond_graph_reads_the_cond_input():
    """If_CondGraphCorrect: the control frame's InnerData is If input 0, the cond (data0)."""
    out = run("If_CondGraphCorrect")
    c = cond_node(out)
    assert c["inputs"][0] == "data0" and c["inputs"] == ["data0", "data1", "data2"]
    frame = sub(c, 0)
    assert types(frame) == {**CONTROL_FRAME, "BranchPivot": 2, "BranchDone": 2}
    assert by_type(frame, "InnerData")["attrs"]["index"] == 0
    assert [n["inputs"] for n in frame if n["type"] == "WatcherPlaceholder"] == [[by_type(frame, "SwitchNotify")["name"]]]
