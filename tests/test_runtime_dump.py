"""`runtime cond` and `runtime events` on GE dumps, and `run --runtime`: GE's
If_AddPointFrom_DiffDataOut as a compiled graph (tests/runtime/dumps), the multi-stream graph
of BgEventUT written as a binary dump, and the report section."""
from __future__ import annotations

import json
from pathlib import Path

from engine.cli import main
from engine.core.attrs import set_attr
from engine.proto import ge_ir_pb2 as pb

ROOT = Path(__file__).resolve().parents[1]
DUMP = ROOT / "tests" / "runtime" / "dumps" / "If_AddPointFrom_DiffDataOut.yaml"


def cli(capsys, *argv) -> dict:
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def test_cond_on_a_dump(capsys):
    out = cli(capsys, "runtime", "cond", str(DUMP))
    assert [c["node"] for c in out["conds"]] == ["if"]
    c = out["conds"][0]
    assert c["ok"] and c["conflict_indexes"] == [0]
    node = next(n for n in c["root"]["nodes"] if n["name"] == "if")
    for k, (name, src_index) in enumerate([("then_g", 1), ("else_g", 0)]):
        g = node["subgraphs"][k + 1]
        assert g["name"] == name
        nodes = {n["name"]: n for n in g["nodes"]}
        pf = nodes[f"if_PointFrom_{k}"]
        assert pf["type"] == "PointFromInputs"
        # the branch Data's _parent_node_index is InnerData's index
        assert nodes[pf["inputs"][0]]["attrs"]["index"] == src_index
    # the lowering allocates Foo1's output (runtime/guard/alloc): its guarder moves to the If
    guards = [n for n in c["root"]["nodes"] if n["attrs"].get("ReleaseResourceIndex") == 0]
    assert [(n["type"], n["inputs"]) for n in guards] == [("FreeMemory", ["if:1"])]
    assert cli(capsys, "runtime", "cond", str(DUMP), "--node", "if")["conflict_indexes"] == [0]


def test_unknown_node_is_exit_2(capsys):
    assert main(["runtime", "cond", str(DUMP), "--node", "iff"]) == 2
    assert "no If/Case node named 'iff'" in capsys.readouterr().err


def test_run_runtime_report(tmp_path, capsys):
    rj = tmp_path / "r.json"
    assert main(["run", str(DUMP), "--passes", "graph_lint", "--runtime", "--report-json", str(rj)]) == 0
    text = capsys.readouterr().out
    assert "runtime: 1 If/Case node(s), adds FreeMemory 1, PointFromInputs 2" in text
    report = json.loads(rj.read_text())
    added = report["runtime"]["conds"][0]["added"]
    assert [(a["type"], a["name"], a["where"]) for a in added] == [
        ("FreeMemory", added[0]["name"], "root"), ("PointFromInputs", "if_PointFrom_0", "then_g"),
        ("PointFromInputs", "if_PointFrom_1", "else_g")]
    assert added[0]["rule"] == "runtime/guard/alloc" and added[0]["rule_loc"].startswith("rules/ge/runtime.yaml:")
    assert report["rules"][added[0]["rule_loc"]]["id"] == "runtime/guard/alloc"     # its text is in the report
    assert "guarder: FreeMemory" in report["rules"][added[0]["rule_loc"]]["text"]
    assert "different sources" in added[1]["why"] and "input 1" in added[1]["why"] and "input 0" in added[1]["why"]
    section = report["sections"][-1]
    assert section["id"] == "runtime" and len(section["data"]["rows"]) == 3
    # without --runtime the report has no runtime section
    assert main(["run", str(DUMP), "--passes", "graph_lint", "--quiet", "--report-json", str(rj)]) == 0
    assert "runtime" not in json.loads(rj.read_text())


def _op(g, name, type_, stream, inputs=(), send=(), recv=()):
    op = g.op.add(name=name, type=type_, stream_id=stream)
    op.input.extend(inputs)
    op.output_desc.add()
    for _ in inputs:
        op.input_desc.add()
    if send:
        set_attr(op.attr, "_send_event_ids", list(send))
    if recv:
        set_attr(op.attr, "_recv_event_ids", list(recv))


def test_events_on_a_dump(tmp_path, capsys):
    """BgEventUT's CreateMultiStreamComputeGraph as a binary dump (unknown-shape root graph)."""
    m = pb.ModelDef(name="m")
    g = m.graph.add(name="root")
    set_attr(g.attr, "_graph_unknown_flag", True)
    _op(g, "A", "Data", 0, send=[0, 1])
    _op(g, "B", "testa", 1, ["A:0"], recv=[0])
    _op(g, "C", "testa", 2, ["A:0"], recv=[1])
    _op(g, "D", "testa", 1, ["B:0"], send=[2])
    _op(g, "E", "testa", 2, ["C:0"], send=[3])
    _op(g, "F", "testa", 0, ["D:0", "E:0"], recv=[2, 3])
    set_attr(m.attr, "event_num", 4)
    f = tmp_path / "ms.pb"
    f.write_bytes(m.SerializeToString())
    out = cli(capsys, "runtime", "events", str(f))
    assert out["ok"] and out["event_num"] == 4 and out["model_events"] == [[0, 1], [0, 2], [1, 0], [2, 0]]
    assert out["stream_num"] == 3 and out["last_resource_clean"] == [[1, 0], [2, 0]]
    # LoweringEventSync per node, then the resource-clean stage's kernels on ids 4 and 5
    assert [(k["node"], k["type"], k["stream"], k["ids"]) for k in out["node_kernels"]] == [
        ("A", "SendEvents", 0, [0, 1]), ("B", "WaitEvents", 1, [0]), ("C", "WaitEvents", 2, [1]),
        ("D", "SendEvents", 1, [2]), ("E", "SendEvents", 2, [3]), ("F", "WaitEvents", 0, [2, 3])]
    assert [(k["type"], k["stream"], k["ids"]) for k in out["kernels"]] == [
        ("LastWaitEvents", 0, [4, 5]), ("LastSendEvents", 1, [4]), ("LastSendEvents", 2, [5])]
    assert out["gert_events"] == [[0, 1], [0, 2], [1, 0], [2, 0], [1, 0], [2, 0]]
    out = cli(capsys, "runtime", "events", str(f), "--stream-num", "1", "--event-num", "5")
    assert out["ok"] is False and out["last_resource_clean"] == [] and "event_num 5" in out["reason"]


def test_cond_work_grows_linearly(tmp_path):
    """Guard against a quadratic relapse by counting work, not time: the execute-graph nodes
    built for a chain of 2N conds are twice those for N (benchmarks/bench_runtime_cond.py)."""
    import sys
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_runtime_cond import make_model
    from engine.core.dumpio import load_model
    from engine.passes.catalog import load_pack
    from engine.runtime import cond as cond_mod
    from engine.runtime.dumpcond import DumpConds

    pack = load_pack(None)
    built = []
    for n in (20, 40):
        f = tmp_path / f"c{n}.pb"
        f.write_bytes(make_model(n).SerializeToString())
        dc = DumpConds(load_model(f), pack, str(f))
        total = 0
        for node in dc.cond_nodes():
            b = cond_mod.Builder(dc.rt)
            case = dc.case_of(node)
            for i, feed in enumerate(case.feeds):
                b.define(feed.name, [cond_mod.Holder(b.root.add_node(feed.name, "D", 0, 1), 0, "hbm")], feed.loc)
            assert b.build_cond(case.cond)
            total += b.root.counter[0]
        built.append(total)
    assert built[1] <= 2.05 * built[0]
