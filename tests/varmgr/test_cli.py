"""`memconflict vars plan|addr`, including a multi-graph training scenario."""
import json

import pytest

from engine.cli import main
from engine.core.dumpio import load_model, save_model
from engine.varmgr.state import load_state

from .conftest import NCHW, desc
from .graphs import GraphBuilder, tensor

BASE = 137_438_953_472


@pytest.fixture
def graphs(tmp_path):
    """An init graph, a training step and an eval graph sharing variables."""
    init = GraphBuilder("init")
    init.op("w", "Variable", outs=[desc((64, 3, 3, 3), NCHW)])
    init.op("w_init", "Constant", outs=[desc((64, 3, 3, 3), NCHW)],
            attrs={"value": tensor(bytes(4 * 1728), desc((64, 3, 3, 3), NCHW))})
    init.op("assign", "Assign", inputs=["w:0", "w_init:0"], outs=[desc((64, 3, 3, 3), NCHW)])
    init.op("step", "Variable", outs=[desc((), dtype=9)])
    train = GraphBuilder("train")
    train.op("w", "Variable", outs=[desc((64, 3, 3, 3), NCHW)])
    train.op("step", "Variable", outs=[desc((), dtype=9)])
    train.op("lr", "Constant", outs=[desc((1,))], attrs={"value": tensor(b"\0\0\x80\x3f", desc((1,)))})
    train.op("momentum", "Variable", outs=[desc((64, 3, 3, 3), NCHW)])
    train.op("apply", "ApplyMomentum", inputs=["w:0", "momentum:0", "lr:0"],
             outs=[desc((64, 3, 3, 3), NCHW)])
    bc = train.op("bcast", "HcomBroadcast", inputs=["w:0"], outs=[desc((64, 3, 3, 3), NCHW, size=6944)])
    bc.input_desc[0].size = 6944
    ev = GraphBuilder("eval")
    ev.op("w", "Variable", outs=[desc((64, 3, 3, 3), NCHW)])
    ev.op("lr_copy", "Constant", outs=[desc((1,))], attrs={"value": tensor(b"\0\0\x80\x3f", desc((1,)))})
    paths = []
    for name, b in (("init", init), ("train", train), ("eval", ev)):
        p = tmp_path / f"{name}.pbtxt"
        save_model(b.build(), p)
        paths.append(str(p))
    return paths


def test_multi_graph_training_scenario(graphs, tmp_path, capsys):
    outs = [str(tmp_path / f"out{k}.pbtxt") for k in range(3)]
    state, plan_json = tmp_path / "s.pb", tmp_path / "plan.json"
    argv = ["vars", "plan", *graphs, "--memory-size", str(32 * 2 ** 30), "--save-state", str(state),
            "--json", str(plan_json)]
    for o in outs:
        argv += ["--out", o]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "session 0: logic base 137438953472, var memory max 5368709120" in text
    plan = json.loads(plan_json.read_text())
    rows = {(g["graph"], v["node"]): v for g in plan["graphs"] for v in g["variables"]}
    # init: w (6944 bytes -> footprint 7168+1024), w_init, step (int64 scalar: 64 bytes)
    assert rows[("init", "w")]["address"] == BASE and rows[("init", "w")]["size"] == 6944
    assert rows[("init", "w_init")]["address"] == BASE + 8192
    assert rows[("init", "step")]["address"] == BASE + 8192 + 8192
    # train: w and step already placed; lr new; momentum new
    assert rows[("train", "w")]["decision"] == "already placed"
    assert rows[("train", "w")]["address"] == BASE and rows[("train", "step")]["address"] == BASE + 16384
    assert rows[("train", "lr")]["decision"] == "new block"
    # eval: a byte-identical Constant under another name reuses lr's block
    assert rows[("eval", "lr_copy")]["decision"] == "var/identical-constant"
    assert rows[("eval", "lr_copy")]["address"] == rows[("train", "lr")]["address"]
    bcast = plan["graphs"][1]["broadcasts"]
    assert bcast == [{"var_name": "w", "broadcast_name": "bcast", "idx": 0, "input_offset": 0,
                      "input_size": 6944, "output_offset": 0, "output_size": 6944}]
    trained = load_model(outs[1])
    assert list(trained.root.find("momentum").op.output_i) == [rows[("train", "momentum")]["address"]]
    assert trained.root.find("w").op.output_desc[0].size == 6944
    info = load_state(state)
    assert info.var_resource.var_names_to_allocated_graph_id["w"] == 0
    assert info.var_resource.var_names_to_allocated_graph_id["momentum"] == 1
    assert info.var_resource.var_broad_cast_info[1].broadcast_info["w"].broadcast_name == "bcast"


def test_plan_continues_from_saved_state(graphs, tmp_path, capsys):
    state = tmp_path / "s.pbtxt"
    assert main(["vars", "plan", graphs[0], "--save-state", str(state)]) == 0
    assert main(["vars", "plan", graphs[1], "--load-state", str(state), "--json", str(tmp_path / "p.json")]) == 0
    plan = json.loads((tmp_path / "p.json").read_text())
    rows = {v["node"]: v for v in plan["graphs"][0]["variables"]}
    assert rows["w"]["decision"] == "already placed" and rows["w"]["address"] == BASE
    assert rows["lr"]["address"] == BASE + 8192 + 8192 + 1536      # after w, w_init and step


def test_addr_resolves_like_get_var_memory_addr(graphs, tmp_path, capsys):
    state = tmp_path / "s.pb"
    assert main(["vars", "plan", graphs[0], "--save-state", str(state)]) == 0
    capsys.readouterr()
    assert main(["vars", "addr", str(state), str(BASE + 100)]) == 0
    out = capsys.readouterr().out
    assert "w0_0: NCHW DT_FLOAT [64,3,3,3], 6944 bytes, block at 137438953472 (+100)" in out
    assert "physical 0x100000264" in out            # first simulated block + 512 head guard + 100
    assert main(["vars", "addr", str(state), "0x10"]) == 1
    assert "returns nullptr: Logic addr info is not assign" in capsys.readouterr().err


def test_corrupt_state_names_the_file(tmp_path, capsys):
    bad = tmp_path / "broken.pb"
    bad.write_bytes(b"\x12\x05abc")
    assert main(["vars", "addr", str(bad), "1"]) == 2
    assert "broken.pb: error: corrupt state file" in capsys.readouterr().err


def test_bad_arguments_exit_2_and_write_nothing(graphs, tmp_path, capsys):
    out = tmp_path / "o.pbtxt"
    assert main(["vars", "plan", graphs[0], graphs[1], "--out", str(out)]) == 2
    assert "1 --out for 2 graphs" in capsys.readouterr().err
    assert main(["vars", "plan", graphs[0], "--option", "novalue"]) == 2
    assert main(["vars", "addr", str(tmp_path / "none.pb"), "zz"]) == 2
    assert not out.exists()


def _write(tmp_path, name, builder):
    p = tmp_path / name
    save_model(builder.build(), p)
    return str(p)


def test_failure_leaves_no_partial_output(graphs, tmp_path, capsys):
    bad = GraphBuilder("bad")
    bad.op("w", "Variable", outs=[desc((64, 3, 3, 4), NCHW)])       # same VarKey, larger
    bad_path = _write(tmp_path, "bad.pbtxt", bad)
    out1, out2, state = tmp_path / "a.pbtxt", tmp_path / "b.pbtxt", tmp_path / "s.pb"
    code = main(["vars", "plan", graphs[0], bad_path, "--out", str(out1), "--out", str(out2),
                 "--save-state", str(state)])
    assert code == 1
    err = capsys.readouterr().err
    assert "variable 'w' (node 'w'): NCHW DT_FLOAT [64,3,3,4] needs 9248 bytes, but VarKey w0_0 " \
           "already holds a block of 6944 bytes (placed by graph 0)" in err
    assert not out1.exists() and not out2.exists() and not state.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_init_value_mismatch_is_reported(tmp_path, capsys):
    b = GraphBuilder()
    b.op("v", "Variable", outs=[desc((2, 2), NCHW)],
         out_attrs={0: {"_init_value": tensor(bytes(16), desc((4,), NCHW))}})
    path = _write(tmp_path, "g.pbtxt", b)
    assert main(["vars", "plan", path]) == 1
    assert ("variable 'v': _init_value shape (4,) differs from the variable's (2, 2); "
            "GetVarMemoryAddr would return nullptr") in capsys.readouterr().err


def test_size_overflow_is_reported(tmp_path, capsys):
    b = GraphBuilder()
    b.op("huge", "Variable", outs=[desc((2 ** 31, 2 ** 31, 4))])
    assert main(["vars", "plan", _write(tmp_path, "g.pbtxt", b)]) == 1
    assert "at node 'huge'" in capsys.readouterr().err
