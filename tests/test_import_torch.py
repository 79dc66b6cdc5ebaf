"""torch.export programs (.pt2) read without torch, as torchair builds their GE graph. The
.pt2 files in tests/data/torch/ were saved by tests/data/torch/make_pt2.py with torch
2.14.1 (CPU run of the PyPI wheel): each module exported as is (training IR, in-place ops)
and after run_decompositions() (core ATen, mutations in the graph signature)."""
from __future__ import annotations

import json
import struct
import zipfile
from pathlib import Path

import pytest

from engine.cli import main
from engine.core.importers.detect import detect
from engine.core.io import load_graph
from harness import edit, shared_pack

DATA = Path(__file__).resolve().parent / "data" / "torch"


def run(args, capsys):
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def graph(name: str, pack=None):
    m, _ = load_graph(str(DATA / name), pack or shared_pack())
    return m


def edges(m) -> list[tuple]:
    return [(n.name, n.type, [f"{a.peer.node.name}:{a.peer.idx}" for a in n.ins if a.peer], [c.name for c in n.in_ctrl])
            for n in m.root.nodes()]


def nodes(m):
    return {n.name: n for n in m.root.nodes()}


def test_detected_as_torch():
    assert detect((DATA / "buffer_add.pt2").read_bytes())[0] == "torch"


@pytest.mark.parametrize("name", ["buffer_add.pt2", "buffer_add_core.pt2"])
def test_buffer_mutation_is_an_assign_into_its_data(name):
    """`self.acc.add_(x)` (training IR) and its functional form with a BUFFER_MUTATION output
    give the same graph: Add, then Assign(ref = the buffer's Data, value = the sum), and the
    later read of the buffer reads the sum."""
    m = graph(name)
    assert edges(m) == [
        ("b_acc", "Data", [], []), ("x", "Data", [], []),
        ("Add", "Add", ["b_acc:0", "x:0"], []),
        *([("Assign", "Assign", ["b_acc:0", "Add:0"], [])] if name == "buffer_add.pt2" else []),
        ("Const", "Const", [], []), ("Mul", "Mul", ["x:0", "Const:0"], []),
        ("Add_1", "Add", ["Mul:0", "Add:0"], []),
        *([("Assign", "Assign", ["b_acc:0", "Add:0"], [])] if name != "buffer_add.pt2" else []),
        ("NetOutput", "NetOutput", ["Add_1:0"], ["Assign"])]
    n = nodes(m)
    assert n["Assign"].ports() == ({"ref": 0, "value": 1}, {"ref": 0})
    # mul.Tensor by a number: a Const of self's dtype (torchair's dtype_promote), Muls only for float16/bfloat16
    assert n["Const"].op.attr["value"].t.data == struct.pack("<f", 2.0)
    assert [n["b_acc"].op.attr["index"].i, n["x"].op.attr["index"].i] == [0, 1]
    assert list(n["b_acc"].outs[0].desc.shape.dim) == [4]


def test_mul_by_a_number_in_half_is_muls(tmp_path):
    f = _rezip(tmp_path, "half.pt2", lambda root: f"{root}/models/model.json",
               lambda t: t.replace('"dtype": 7', '"dtype": 6'))
    n = nodes(load_graph(str(f), shared_pack())[0])
    assert [a.peer.node.name for a in n["Muls"].ins] == ["x"] and n["Muls"].op.attr["value"].i == 2
    assert "Const" not in n


def test_input_mutation():
    m = graph("input_add.pt2")
    assert edges(m) == [("x", "Data", [], []), ("y", "Data", [], []), ("Add", "Add", ["x:0", "y:0"], []),
                        ("Assign", "Assign", ["x:0", "Add:0"], []), ("Relu", "Relu", ["Add:0"], []),
                        ("NetOutput", "NetOutput", ["Relu:0"], ["Assign"])]
    core = graph("input_add_core.pt2")
    assert {e[0]: e[2] for e in edges(core)}["Assign"] == ["x:0", "Add:0"]        # USER_INPUT_MUTATION


def test_batch_norm_running_stats_written():
    m = graph("convnet.pt2")
    e = {x[0]: x for x in edges(m)}
    assert e["BatchNormV3"][2] == ["Conv2D:0", "p_bn_weight:0", "p_bn_bias:0", "TensorMove:0", "TensorMove_1:0"]
    assert e["TensorMove"][2] == ["b_bn_running_mean:0"]
    assert e["Assign_1"][2] == ["b_bn_running_mean:0", "BatchNormV3:1"]
    assert e["Assign_2"][2] == ["b_bn_running_var:0", "BatchNormV3:2"]
    assert e["Assign"][2] == ["b_bn_num_batches_tracked:0", "Add:0"]            # add_(1) on the counter
    assert e["NetOutput"][3] == ["Assign", "Assign_1", "Assign_2"]
    n = nodes(m)
    assert n["Const"].op.attr["value"].t.data == struct.pack("<q", 1)
    assert n["BatchNormV3"].ports()[1] == {"y": 0, "running_mean": 1, "running_var": 2, "save_mean": 3, "save_rstd": 4}
    assert n["Conv2D"].ports()[0] == {"x": 0, "filter": 1, "bias": 2}
    assert list(n["Conv2D"].op.attr["padding"].list.i) == [1, 1]


def test_core_aten_form():
    m = graph("convnet_core.pt2")
    e = {x[0]: x for x in edges(m)}
    assert e["Reshape"][2] == ["AdaptiveAvgPool2d:0", "Const_1:0"]
    assert nodes(m)["Const_1"].op.attr["value"].t.data == struct.pack("<2q", 2, 16)
    # the signature's mutations, positionally from the functional batch norm's outputs (as torchair)
    assert [e[k][2] for k in ("Assign", "Assign_1", "Assign_2")] == [
        ["b_bn_running_mean:0", "BatchNormV3:3"], ["b_bn_running_var:0", "BatchNormV3:4"],
        ["b_bn_num_batches_tracked:0", "Add:0"]]
    assert m.notes == [("import", "torch.export program (2.14.1+cu130, ATEN): 3 write(s) to graph inputs as Assign")]


def test_run_and_convert(tmp_path, capsys):
    rj = tmp_path / "r.json"
    code, out, _ = run(["run", DATA / "convnet.pt2", "--report-json", rj], capsys)
    assert code == 0 and "note (import): torch.export program (2.14.1+cu130, TRAINING)" in out
    assert json.loads(rj.read_text())["summary"]["by_rule"] == {}
    for k in range(2):
        assert run(["convert", DATA / "convnet.pt2", tmp_path / f"o{k}.pbtxt"], capsys)[0] == 0
    assert (tmp_path / "o0.pbtxt").read_bytes() == (tmp_path / "o1.pbtxt").read_bytes()


def _rezip(tmp_path, name: str, member_of, text_of=lambda t: t) -> Path:
    src = zipfile.ZipFile(DATA / "buffer_add.pt2")
    prog = src.read("buffer_add/models/model.json").decode()
    out = tmp_path / name
    with zipfile.ZipFile(out, "w") as z:
        z.writestr(member_of("buffer_add"), text_of(prog))
    return out


def test_older_archive_layout(tmp_path):
    """torch 2.1-2.5 archives hold the program as serialized_exported_program.json."""
    f = _rezip(tmp_path, "old.pt2", lambda root: "serialized_exported_program.json")
    assert edges(load_graph(str(f), shared_pack())[0]) == edges(graph("buffer_add.pt2"))


def test_unmapped_ops_refused_then_mapped_by_a_rule_edit(tmp_path, capsys, pack_copy):
    f = _rezip(tmp_path, "odd.pt2", lambda root: f"{root}/models/model.json",
               lambda t: t.replace("torch.ops.aten.mul.Tensor", "torch.ops.aten.hypot.default"))
    code, _, err = run(["convert", f, tmp_path / "o.pbtxt"], capsys)
    assert code == 2 and "odd.pt2:buffer_add/models/model.json: error: 1 ATen op(s) have no GE mapping: " \
                         "torch.ops.aten.hypot.default (1)" in err
    assert "map them in the pack's import/torch.yaml op_map" in err and not (tmp_path / "o.pbtxt").exists()
    edit(pack_copy / "import" / "torch.yaml", "  relu.default: Relu\n", "  relu.default: Relu\n  hypot.default: Hypot\n")
    from engine.passes.catalog import load_pack
    m, _ = load_graph(str(f), load_pack(pack_copy))
    assert nodes(m)["Hypot"].type == "Hypot"


def test_broken_archives_located(tmp_path, capsys):
    f = _rezip(tmp_path, "bad.pt2", lambda root: f"{root}/models/model.json", lambda t: t[:200])
    code, _, err = run(["convert", f, tmp_path / "o.pbtxt"], capsys)
    assert code == 2 and "bad.pt2:buffer_add/models/model.json:" in err and "error: malformed program JSON" in err
    f.write_bytes(b"PK\x03\x04 not really a zip")
    code, _, err = run(["convert", f, tmp_path / "o.pbtxt"], capsys)
    assert code == 2 and "bad.pt2: error: a .pt2 is a zip archive; this one cannot be opened" in err
    g = _rezip(tmp_path, "empty.pt2", lambda root: f"{root}/data/other.json")
    code, _, err = run(["convert", g, tmp_path / "o.pbtxt"], capsys)
    assert code == 2 and "the archive holds no exported program" in err
    h = _rezip(tmp_path, "schema.pt2", lambda root: f"{root}/models/model.json",
               lambda t: json.dumps({"graph_module": {"graph": {"inputs": [], "nodes": [{"target": "torch.ops.aten.relu.default",
                                                                                         "inputs": [{"name": "self", "arg": {"as_tensor": {"name": "q"}}}],
                                                                                         "outputs": []}]}}}))
    code, _, err = run(["convert", h, tmp_path / "o.pbtxt"], capsys)
    assert code == 2 and "node 'None' (torch.ops.aten.relu.default): input 'q' is produced by no node or placeholder" in err


def test_pt2_files_are_small():
    for f in DATA.glob("*.pt2"):
        assert f.stat().st_size < 200_000, f.name


def test_copy_into_a_buffer_is_the_assign():
    """copy_ is torchair's Assign itself: no second Assign, the buffer's later readers read
    the Assign's ref output (training IR) or the copied value (core ATen)."""
    m = graph("buffer_copy.pt2")
    assert edges(m) == [("b_state", "Data", [], []), ("x", "Data", [], []), ("Const", "Const", [], []),
                        ("Mul", "Mul", ["x:0", "Const:0"], []), ("Assign", "Assign", ["b_state:0", "Mul:0"], []),
                        ("Const_1", "Const", [], []), ("Add", "Add", ["Assign:0", "Const_1:0"], []),
                        ("NetOutput", "NetOutput", ["Add:0"], ["Assign"])]
    core = {e[0]: e for e in edges(graph("buffer_copy_core.pt2"))}
    assert core["Assign"][2] == ["b_state:0", "Mul:0"] and core["Add"][2] == ["Mul:0", "Const_1:0"]


def test_ops_without_ir_noted(tmp_path, pack_copy):
    f = _rezip(tmp_path, "odd.pt2", lambda root: f"{root}/models/model.json",
               lambda t: t.replace("torch.ops.aten.mul.Tensor", "torch.ops.aten.hypot.default"))
    edit(pack_copy / "import" / "torch.yaml", "  relu.default: Relu\n", "  relu.default: Relu\n  hypot.default: Hypot\n")
    from engine.passes.catalog import load_pack
    m, _ = load_graph(str(f), load_pack(pack_copy))
    assert ("import", "no GE IR known for 1 op type(s), ports left unnamed (no reference semantics): Hypot (1)") in m.notes
    assert nodes(m)["Hypot"].ports() == ({}, {})


def test_mutated_programs_never_crash(tmp_path):
    """Programs damaged at random (keys dropped, values of other types) import or are refused
    with an InputError, never a traceback."""
    import random

    from engine.core.errors import InputError
    rnd = random.Random(7)
    base = json.loads(zipfile.ZipFile(DATA / "convnet_core.pt2").read("convnet_core/models/model.json"))
    f = tmp_path / "m.pt2"
    refused = 0
    for _ in range(80):
        prog = json.loads(json.dumps(base))
        node = prog
        for _ in range(rnd.randint(1, 7)):
            kids = [v for v in (node.values() if isinstance(node, dict) else node) if isinstance(v, (dict, list))]
            if not kids:
                break
            node = rnd.choice(kids)
        if isinstance(node, dict) and node:
            node[rnd.choice(sorted(node))] = rnd.choice([None, 1, "x", [], {}])
        elif isinstance(node, list) and node:
            node.append(rnd.choice([None, 2, {"as_tensor": {"name": "nope"}}]))
        with zipfile.ZipFile(f, "w") as z:
            z.writestr("m/models/model.json", json.dumps(prog))
        try:
            load_graph(str(f), shared_pack())
        except InputError as exc:
            assert "m.pt2" in exc.render()
            refused += 1
    assert 0 < refused < 80


@pytest.mark.parametrize("name", ["misc.pt2", "misc_core.pt2"])
def test_list_and_default_arguments(name):
    """Numbers and lists where GE takes a tensor are Const inputs (int64 for indices, shapes and
    dims), arguments the program leaves out take the table's defaults, multi-output ops feed by index."""
    m = graph(name)
    e = {x[0]: x for x in edges(m)}
    n = nodes(m)
    assert e["ConcatV2"][2] == ["x:0", "x:0", "Const:0"]
    assert n["Const"].op.attr["value"].t.data == struct.pack("<q", 0)                  # cat's dim, left out: 0
    assert n["ConcatV2"].ports()[0] == {"x0": 0, "x1": 1, "concat_dim": 2}
    begin, end, axes, strides = (n[c.split(":")[0]].op.attr["value"].t.data for c in e["StridedSliceV2"][2][1:])
    assert (begin, axes, strides) == (struct.pack("<q", 1), struct.pack("<q", 0), struct.pack("<q", 1))
    assert e["SplitV"][2][0] == "StridedSliceV2:0"
    assert n[e["SplitV"][2][1].split(":")[0]].op.attr["value"].t.data == struct.pack("<2q", 2, 1)
    assert e["GatherV2"][2][:2] == ["p_emb_weight:0", "idx:0"]
    assert e["NetOutput"][2] == ["LayerNormV4:0", "SplitV:1"]
    assert n["LayerNormV4"].ports()[0] == {"x": 0, "normalized_shape": 1, "gamma": 2, "beta": 3}


def test_schema_breach_names_the_node(tmp_path, capsys):
    def broken(text):
        prog = json.loads(text)
        prog["graph_module"]["graph"]["nodes"][1]["inputs"] = 5
        return json.dumps(prog)
    f = _rezip(tmp_path, "s.pt2", lambda root: f"{root}/models/model.json", broken)
    code, _, err = run(["convert", f, tmp_path / "o.pbtxt"], capsys)
    assert code == 2 and ("s.pt2:buffer_add/models/model.json: error: node 1 ('mul', torch.ops.aten.mul.Tensor): the "
                          "program does not follow torch.export's schema (TypeError: ") in err
