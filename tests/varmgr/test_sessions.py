"""Sessions that outlive one graph (issue 13): `run --var-state`, `vars plan --var-state/--session`,
`vars cache-check`, several sessions in one state file. Restates GE's ST scenario "init graph,
then a training graph changes var1 to FRACTAL_Z, the checkpoint graph must rebuild"
(test_variable_accelerate.cc) and VarIsInitializedOp folding from a registered variable
(var_is_initialized_op_pass_unittest.cc run_success / change_to_false) across graphs."""
import json

from engine.cli import main
from engine.core.dumpio import load_model, save_model
from engine.varmgr.state import load_sessions

from .conftest import desc
from .graphs import GraphBuilder

BASE = 137_438_953_472
FRACTAL_Z, HWCN, ND, NCHW = 4, 16, 2, 0
BOOL = desc((), dtype=12)
ND_DESC = desc((2, 2, 3, 2), ND, origin_dims=(2, 2, 3, 2))
FRAC = desc((4, 1, 16, 16), FRACTAL_Z, origin_dims=(2, 2, 3, 2))


def _save(tmp_path, b: GraphBuilder) -> str:
    p = tmp_path / f"{next(iter(b.graphs))}.pbtxt"
    save_model(b.build(), p)
    return str(p)


def _check_graph(tmp_path) -> str:
    b = GraphBuilder("check")
    b.op("w", "Variable", outs=[desc((4,))])
    b.op("is_init", "VarIsInitializedOp", inputs=["w:0"], outs=[BOOL])
    b.op("out", "NetOutput", inputs=["is_init:0"], outs=[])
    return _save(tmp_path, b)


def _flag(path) -> bytes:
    node = load_model(path).root.find("is_init")
    assert node.type == "Const"
    return bytes(node.op.attr["value"].t.data)


def test_run_var_state_registers_and_folds(tmp_path, capsys):
    g, state = _check_graph(tmp_path), tmp_path / "s.pb"
    out0, out1 = tmp_path / "o0.pbtxt", tmp_path / "o1.pbtxt"
    assert main(["run", g, "--var-state", str(state), "--out", str(out0), "--quiet"]) == 0
    assert _flag(out0) == b"\x00"                   # nothing registered w yet: Const(false)
    (info,) = load_sessions(state)
    assert info.session_id == 0 and "w" in info.var_resource.cur_var_tensor_desc_map
    assert list(load_model(out0).root.find("w").op.output_i) == [BASE]     # placed by the build
    assert main(["run", g, "--var-state", str(state), "--out", str(out1), "--quiet"]) == 0
    assert _flag(out1) == b"\x01"                   # registered by the first run: Const(true)
    (info,) = load_sessions(state)
    assert dict(info.var_resource.var_names_to_allocated_graph_id) == {"w": 0}
    assert main(["run", g, "--out", str(out1), "--quiet"]) == 0           # no state: a fresh session
    assert _flag(out1) == b"\x00"


def test_sessions_in_one_file_are_isolated(tmp_path, capsys):
    g, state, out = _check_graph(tmp_path), tmp_path / "s.pbtxt", tmp_path / "o.pbtxt"
    assert main(["run", g, "--var-state", str(state), "--session", "7", "--quiet"]) == 0
    assert main(["run", g, "--var-state", str(state), "--session", "3", "--out", str(out), "--quiet"]) == 0
    assert _flag(out) == b"\x00"                    # session 7's w is not session 3's
    infos = load_sessions(state)
    assert [i.session_id for i in infos] == [3, 7]  # ordered by id
    for info in infos:
        (entry,) = info.var_resource.var_addr_mgr_map.values()
        assert entry.address == BASE                 # each session has its own variable space
    assert main(["run", g, "--var-state", str(state), "--session", "7", "--out", str(out), "--quiet"]) == 0
    assert _flag(out) == b"\x01"
    assert main(["vars", "plan", g, "--load-state", str(state)]) == 2
    assert "holds sessions 3, 7" in capsys.readouterr().err
    assert main(["vars", "plan", g, "--load-state", str(state), "--session", "3", "--plan-only"]) == 0


def test_var_state_is_written_with_the_other_outputs_or_not_at_all(tmp_path, capsys):
    g, state = _check_graph(tmp_path), tmp_path / "s.pb"
    assert main(["run", g, "--var-state", str(state), "--quiet"]) == 0
    before = state.read_bytes()
    bad = GraphBuilder("bad")
    bad.op("w", "Variable", outs=[desc((400,))])     # same VarKey as w, a larger block
    bad_path = _save(tmp_path, bad)
    out = tmp_path / "bad_out.pbtxt"
    assert main(["run", bad_path, "--var-state", str(state), "--out", str(out), "--quiet"]) == 1
    assert "variable placement failed" in capsys.readouterr().err
    assert state.read_bytes() == before and not out.exists()
    assert main(["run", g, "--var-state", str(state), "--out", str(tmp_path / "none" / "o.pbtxt")]) == 2
    assert state.read_bytes() == before
    assert main(["run", g, "--var-state", str(state), "--out", str(state)]) == 2      # same file twice
    assert "name the same file" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    assert main(["run", g, "--var-state", "-"]) == 2
    assert "the state file cannot be standard output" in capsys.readouterr().err


def _training_graphs(tmp_path):
    init = GraphBuilder("init")
    for name, d in (("var1", ND_DESC), ("var2", desc((2, 2, 3, 2), HWCN, origin_dims=(2, 2, 3, 2)))):
        init.op(name, "Variable", outs=[d])
        init.op(f"{name}_c", "Const", outs=[d])
        init.op(f"{name}_assign", "Assign", inputs=[f"{name}:0", f"{name}_c:0"], outs=[d])
    ckpt = GraphBuilder("ckpt")
    ckpt.op("var1", "Variable", outs=[ND_DESC])
    ckpt.op("save", "Save", inputs=["var1:0"], outs=[])
    train = GraphBuilder("train")
    train.op("var1", "Variable", outs=[ND_DESC])
    train.op("trans", "TransData", inputs=["var1:0"], outs=[FRAC])
    train.op("x", "Data", outs=[desc((1, 2, 8, 8))])
    train.op("conv", "Conv2D", inputs=["x:0", "trans:0"], outs=[desc((1, 2, 8, 8))])
    # var1 as later graphs see it (FRACTAL_Z), with a TransData back to NCHW: a second format change
    again = GraphBuilder("again")
    again.op("var1", "Variable", outs=[FRAC])
    again.op("back", "TransData", inputs=["var1:0"], outs=[desc((2, 2, 3, 2), NCHW, origin_dims=(2, 2, 3, 2))])
    again.op("relu", "Relu", inputs=["back:0"], outs=[desc((2, 2, 3, 2), NCHW)])
    return [_save(tmp_path, b) for b in (init, ckpt, train, again)]


def test_training_session_rebuild_limit_and_cache_check(tmp_path, capsys):
    init, ckpt, train, again = _training_graphs(tmp_path)
    state, plan = tmp_path / "s.pb", tmp_path / "plan.json"
    outs = [str(tmp_path / f"out_{k}.pbtxt") for k in range(3)]
    argv = ["vars", "plan", init, ckpt, train, "--var-state", str(state), "--json", str(plan)]
    for o in outs:
        argv += ["--out", o]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "graph 2 'train'" in text and "variable_op +0 -1 ~1" in text
    assert "graphs to rebuild (a variable they hold changed format): 0, 1" in text
    doc = json.loads(plan.read_text())
    assert doc["rebuild"] == [0, 1]                  # the init and checkpoint graphs hold var1
    assert doc["graphs"][2]["passes"]["variable_op"] == {"inserted": 0, "removed": 1, "changed": 1}
    (info,) = load_sessions(state)
    res = info.var_resource
    assert res.cur_var_tensor_desc_map["var1"].layout == "FRACTAL_Z"
    assert [s.node_type for s in res.var_to_trans_road["var1"].node_info] == ["TransData"]
    assert dict(res.var_names_to_changed_graph_id) == {"var1": 2}

    # the cached init graph was compiled with var1 in ND: it cannot be loaded any more
    assert main(["vars", "cache-check", str(state), outs[0]]) == 1
    err = capsys.readouterr().err
    assert "variable 'var1': the session holds FRACTAL_Z DT_FLOAT [4,1,16,16] (format changed by graph 2, " \
           "road TransData), the cached graph has ND DT_FLOAT [2,2,3,2]" in err
    assert "its format changed 1 time(s), the limit (max_var_change_times 1), so it cannot change back" in err
    assert main(["vars", "cache-check", str(state), outs[2]]) == 0
    assert "valid in session 0" in capsys.readouterr().out

    # a later invocation on the same state: var1 may not change format again
    out = tmp_path / "again_out.pbtxt"
    assert main(["vars", "plan", again, "--var-state", str(state), "--out", str(out)]) == 0
    assert "graph 3 'again'" in capsys.readouterr().out
    assert load_model(out).root.find("back") is not None
    fresh = tmp_path / "fresh_out.pbtxt"
    assert main(["vars", "plan", again, "--out", str(fresh)]) == 0          # a new session: it may
    assert load_model(fresh).root.find("back") is None


def test_cache_check_unknown_variable(tmp_path, capsys):
    g, state = _check_graph(tmp_path), tmp_path / "s.pb"
    assert main(["run", g, "--var-state", str(state), "--session", "1", "--quiet"]) == 0
    other = GraphBuilder("other")
    other.op("v9", "Variable", outs=[desc((4,))])
    assert main(["vars", "cache-check", str(state), _save(tmp_path, other)]) == 1
    assert "variable 'v9' does not exist in the VarManager of session 1" in capsys.readouterr().err
