"""The command-line contract (shared/spec/README.md): exit statuses, outputs,
no partial files, deterministic reports."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


from engine.cli import main
from harness import VERSION, ge_dumps, needs_ge_dumps

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ge_dumps()
RW01 = ROOT / "tests" / "cases" / "rw" / "RW-01.yaml"
# a graph the whole default pipeline runs through (RW-01's If has no input 1 for its branch Data,
# which GE's GetRefMapping, and so the layout pass, fails on)
RW03 = ROOT / "tests" / "cases" / "rw" / "RW-03.yaml"
RESNET = FIXTURES / "ge_proto_00015_OptimizeQuantGraph_FeGraphFusionAfter.txt"


def run(args, capsys):
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_run_writes_outputs_and_report(tmp_path, capsys):
    out, rj = tmp_path / "o.pbtxt", tmp_path / "r.json"
    code, stdout, _ = run(["run", RW01, "--passes", "mem_rw_conflict", "--out", out, "--report-json", rj], capsys)
    assert code == 0
    assert "1 node(s) inserted (Identity 1)" in stdout
    report = json.loads(rj.read_text())
    ins = report["insertions"]
    assert [i["name"] for i in ins] == ["const1_Identity0"]
    assert ins[0]["type"] == "Identity" and ins[0]["graph"] == "root" and ins[0]["pass"] == "mem_rw_conflict"
    assert ins[0]["reason"]["output_rw"] == "ReadOnlyConst" and ins[0]["reason"]["input_rw"] == "ScopeWriteable"
    assert ins[0]["reason"]["output_rule"].startswith("rw/out/const (rules/ge/rw.yaml:")
    assert ins[0]["rule_loc"].startswith("rules/ge/rw.yaml:")
    assert 'name: "const1_Identity0"' in out.read_text()


def test_report_is_byte_identical_across_runs(tmp_path, capsys):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    oa, ob = tmp_path / "a.txt", tmp_path / "b.txt"
    for r, o in ((a, oa), (b, ob)):
        assert run(["run", RW03, "--report-json", r, "--out", o, "--quiet"], capsys)[0] == 0
    assert a.read_bytes() == b.read_bytes()
    assert oa.read_bytes() == ob.read_bytes()


@needs_ge_dumps
def test_real_dump_rw_pass_round_trips(tmp_path, capsys):
    out = tmp_path / "o.txt"
    code, stdout, _ = run(["run", RESNET, "--passes", "mem_rw_conflict", "--out", out, "--quiet"], capsys)
    assert code == 0 and stdout == ""
    assert out.read_bytes() == RESNET.read_bytes()   # nothing to isolate in an inference graph


def test_unknown_pass_id_exit_2_no_output(tmp_path, capsys):
    out = tmp_path / "o.txt"
    code, _, err = run(["run", RW01, "--passes", "mem_rw_conflit", "--out", out], capsys)
    assert code == 2
    assert "--passes: error: unknown pass id 'mem_rw_conflit'" in err
    assert "did you mean 'mem_rw_conflict'?" in err
    assert not out.exists()


def test_malformed_option_exit_2(capsys):
    code, _, err = run(["run", RW01, "--option", "ge.featureBaseRefreshable"], capsys)
    assert code == 2 and "malformed option 'ge.featureBaseRefreshable'" in err


def test_malformed_dump_exit_2_no_partial_output(tmp_path, capsys):
    bad = tmp_path / "bad.txt"
    bad.write_text('graph {\n  name: "g"\n  op {\n    name: "a"\n    input: "a:0\n')
    out, rj = tmp_path / "o.txt", tmp_path / "r.json"
    code, _, err = run(["run", bad, "--out", out, "--report-json", rj], capsys)
    assert code == 2
    assert "bad.txt:5:" in err and "error: malformed GE dump" in err and "Traceback" not in err
    assert not out.exists() and not rj.exists()
    assert list(tmp_path.iterdir()) == [bad]


def test_data_cycle_rejected(tmp_path, capsys):
    g = tmp_path / "cyc.yaml"
    g.write_text("graphs:\n  root:\n    nodes: {a: Relu, b: Relu}\n    edges: [a -> b, b -> a]\n")
    code, _, err = run(["run", g], capsys)
    assert code == 2 and "graph 'root' has a cycle outside loops through: a, b" in err


def test_loop_back_edge_allowed(tmp_path, capsys):
    g = tmp_path / "loop.yaml"
    g.write_text("graphs:\n  root:\n    nodes: {m: Merge, r: Relu, n: NextIteration}\n"
                 "    edges: [m -> r, r -> n, n -> m]\n")
    assert run(["run", g, "--quiet"], capsys)[0] == 0


def test_pass_failure_exit_1(tmp_path, capsys):
    # a subgraph Data without _parent_node_index: GE's RW pass fails; it only warns (on_failure: warn)
    g = tmp_path / "sub.yaml"
    g.write_text("graphs:\n  root:\n    nodes: {d: Data, pc: {type: PartitionedCall, inputs: 1, outputs: 0, subgraphs: [s]}}\n"
                 "    edges: [d -> pc]\n  s:\n    nodes: {x: Data}\n")
    rj = tmp_path / "r.json"
    code, stdout, _ = run(["run", g, "--passes", "mem_rw_conflict", "--report-json", rj], capsys)
    assert code == 0
    diag = json.loads(rj.read_text())["diagnostics"]
    assert diag[0]["code"] == "PASS_FAILED" and diag[0]["node"] == "x"


def test_rules_check_and_show(capsys):
    code, out, _ = run(["rules", "check"], capsys)
    assert code == 0 and f"pack ge {VERSION} is valid" in out
    code, out, _ = run(["rules", "show"], capsys)
    assert code == 0 and "ReadOnlyConst  do_nothing  insert_identity  insert_identity" in out


def test_rules_check_bad_pack_exit_2(tmp_path, capsys):
    (tmp_path / "pack.yaml").write_text("name: x\nversion: '1'\nschema_version: 1\ninclude: [nope.yaml]\n")
    code, _, err = run(["rules", "check", tmp_path], capsys)
    assert code == 2 and "included file 'nope.yaml' does not exist" in err


def test_convert_round_trip(tmp_path, capsys):
    y, t = tmp_path / "g.yaml", tmp_path / "g.txt"
    assert run(["convert", RW01, t], capsys)[0] == 0
    assert run(["convert", t, y], capsys)[0] == 0
    t2 = tmp_path / "g2.txt"
    assert run(["convert", y, t2], capsys)[0] == 0
    assert t2.read_text() == t.read_text()


def test_console_script_entry_point():
    res = subprocess.run([sys.executable, "-m", "engine.cli", "rules", "check"], capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 0, res.stderr
