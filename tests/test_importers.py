"""Models from anywhere (issue 15): the format read from the content, TensorFlow GraphDefs
imported as GE's parser builds them (GE's parser test models and a TF1 training step
written without TensorFlow), GE dumps of older GE with the attributes GE derives."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from engine.cli import main
from engine.core.errors import InputError
from engine.core.importers.detect import detect
from engine.core.io import load_graph
from harness import edit, shared_fixtures, shared_pack

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # benchmarks/ is not installed
from benchmarks import gen_tf as tfgraphs  # noqa: E402

MODELS = shared_fixtures() / "parser-models"
OAM = shared_fixtures() / "ge-dumps-oam"
needs_models = pytest.mark.skipif(not MODELS.is_dir(), reason="no ../shared/fixtures/parser-models (GE's parser test models)")
needs_oam = pytest.mark.skipif(not OAM.is_dir(), reason="no ../shared/fixtures/ge-dumps-oam (older GE dumps)")


def run(args, capsys):
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def nodes(model):
    return {n.name: n for n in model.root.nodes()}


# ---- format detection ------------------------------------------------------------------
@needs_models
@pytest.mark.parametrize("name, fmt", [
    ("test_VariableV2.pb", "tensorflow"), ("tf_add.pb", "tensorflow"), ("test_getnext_dynamic_fusion.pbtxt", "tensorflow"),
    ("onnx_conv2d.onnx", "onnx"), ("onnx_if.onnx", "onnx"), ("caffe_add.pbtxt", "caffe"), ("caffe_add.caffemodel", "caffe"),
])
def test_detect_parser_models(name, fmt):
    assert detect((MODELS / name).read_bytes())[0] == fmt


@needs_oam
def test_detect_ge_dumps(tmp_path):
    assert detect((OAM / "oam_ge_proto_00056_Build.txt").read_bytes())[0] == "ge"
    assert detect((OAM / "oam_ge_onnx_00000000_graph_1_Build.pbtxt").read_bytes())[0] == "onnx"
    binary = tmp_path / "m.pb"
    assert main(["convert", str(OAM / "oam_ge_proto_00056_Build.txt"), str(binary)]) == 0
    assert detect(binary.read_bytes())[0] == "ge"          # a .pb that is a GE ModelDef


def test_unknown_format_is_refused(tmp_path, capsys):
    f = tmp_path / "notes.pb"
    f.write_bytes(b"\xff\xff\xff\xff garbage")
    code, _, err = run(["convert", f, tmp_path / "o.pbtxt"], capsys)
    assert code == 2 and "notes.pb: error: cannot tell the model format (not a protobuf message; read as a GE dump: " \
        "malformed binary GE dump at byte 0" in err
    assert "--from ge|tensorflow|onnx|caffe" in err and not (tmp_path / "o.pbtxt").exists()


@needs_models
def test_from_overrides_detection(tmp_path, capsys):
    code, _, err = run(["convert", "--from", "tensorflow", MODELS / "onnx_conv2d.onnx", tmp_path / "o.pbtxt"], capsys)
    assert code == 2 and "error: malformed TensorFlow GraphDef" in err
    code, _, err = run(["convert", "--from", "ge", MODELS / "tf_add.pb", tmp_path / "o.pbtxt"], capsys)
    assert code == 2 and "error: the dump holds no graph" in err      # read as asked: a GE ModelDef


# ---- TensorFlow: GE's parser test models ------------------------------------------------
@needs_models
def test_tf_parser_models_import_as_ge_does():
    m, _ = load_graph(str(MODELS / "test_VariableV2.pb"), shared_pack())
    n = nodes(m)
    # Placeholder → Data with its index; the isolated NoOp `init` removed (RemoveIsolateNode)
    assert [(x.name, x.type) for x in m.root.nodes()] == [
        ("Placeholder", "Data"), ("VariableV2", "VariableV2"), ("Add", "Add"), ("Node_Output", "NetOutput")]
    assert n["Placeholder"].op.attr["index"].i == 0 and len(n["Placeholder"].ins) == 1
    assert n["Add"].ports() == ({"x1": 0, "x2": 1}, {"y": 0})
    assert [a.peer.node.name for a in n["Add"].ins] == ["Placeholder", "VariableV2"]
    assert [a.peer.node.name for a in n["Node_Output"].ins] == ["Add"]
    assert list(n["VariableV2"].outs[0].desc.shape.dim) == [2, 3]


@needs_models
def test_tf_all_parser_models_read():
    for f in sorted(MODELS.glob("*.pb")):
        m, _ = load_graph(str(f), shared_pack())
        types = [x.type for x in m.root.nodes()]
        assert types[-1] == "NetOutput", f.name
        assert "Placeholder" not in types, f.name


# ---- TensorFlow: a TF1 training step ---------------------------------------------------
@pytest.fixture(scope="module")
def train_pb(tmp_path_factory):
    f = tmp_path_factory.mktemp("tf") / "train.pb"
    f.write_bytes(tfgraphs.train_step(2).SerializeToString())
    return f


def test_tf_training_step_ports_and_refs(train_pb):
    m, _ = load_graph(str(train_pb), shared_pack())
    n = nodes(m)
    assert n["layer_0/kernel/Assign"].ports() == ({"ref": 0, "value": 1}, {"ref": 0})
    adam = n["Adam/update_layer_0/kernel/ApplyAdam"]
    ins, outs = adam.ports()
    assert list(ins) == ["var", "m", "v", "beta1_power", "beta2_power", "lr", "beta1", "beta2", "epsilon", "grad"]
    assert outs == {"var": 0}          # GE's ApplyAdam writes only `var` as a ref output
    assert [c.name for c in n["Adam"].in_ctrl] == ["Adam/update_layer_0/kernel/ApplyAdam",
                                                  "Adam/update_layer_1/kernel/ApplyAdam", "Adam/Assign"]
    assert n["layer_0/kernel"].outs[0].desc.dtype == 1        # DT_FLOAT_REF → GE's DT_FLOAT


def test_tf_training_step_default_pipeline(train_pb, tmp_path, capsys):
    rj = tmp_path / "r.json"
    code, out, _ = run(["run", train_pb, "--report-json", rj], capsys)
    assert code == 0
    report = json.loads(rj.read_text())
    by_rule = report["summary"]["by_rule"]
    # 8 initializer Assigns + 2 ApplyAdam + Adam/Assign write a variable: one ref node each
    assert by_rule == {"var/ref-after-writer": 11}
    removed = sorted(r["name"] for r in report["removals"])
    reads = [r for r in removed if r.endswith("/read")]
    assert len(reads) == 8                                                  # RemoveNoUseIdentity
    # VariableRefDeleteOpPass takes the refs of every var-like type (VariableV2 included) away again
    assert sorted(set(removed) - set(reads)) == sorted(i["name"] for i in report["insertions"]
                                                       if i["rule"] == "var/ref-after-writer")
    # VariableRefUselessControlOutDeletePass unlinks each ref's control edges to nodes already after its writer
    assert report["summary"]["by_code"] == {"W18888": 1, "ATTR_SET": 1, "VAR_UNLINKED": 11}
    assert "beta1_power/Assign" in next(d["message"] for d in report["diagnostics"] if d["code"] == "W18888")


def test_tf_missing_producer_is_located(tmp_path, capsys):
    gd = tfgraphs.train_step(1)
    gd.node[-1].input.append("^no_such_node")
    f = tmp_path / "bad.pb"
    f.write_bytes(gd.SerializeToString())
    code, _, err = run(["run", f, "--quiet"], capsys)
    assert code == 2
    assert "bad.pb: error: node 'init' (NoOp): input '^no_such_node' names no node of the graph" in err


def test_tf_duplicate_names_refused(tmp_path, capsys):
    gd = tfgraphs.train_step(1)
    gd.node.add(name="x", op="Relu", input=["x"])
    f = tmp_path / "dup.pbtxt"
    from google.protobuf import text_format
    f.write_text(text_format.MessageToString(gd))
    code, _, err = run(["convert", f, tmp_path / "o.pbtxt"], capsys)
    assert code == 2 and "two nodes are named 'x'" in err


# ---- rule edits change what the importer does ---------------------------------------------
def test_rule_edit_maps_an_op_and_refuses_unknown_ir(pack_copy, train_pb, capsys, tmp_path):
    table = pack_copy / "import" / "tensorflow.yaml"
    edit(table, "  Snapshot: Snapshot\n", "  Snapshot: Snapshot\n  L2Loss: LossOfL2\n")
    m, _ = load_graph(str(train_pb), _pack(pack_copy))
    assert nodes(m)["loss"].type == "LossOfL2"
    edit(table, "unknown_ir: keep", "unknown_ir: refuse")
    code, _, err = run(["convert", "--rules", pack_copy, train_pb, tmp_path / "o.pbtxt"], capsys)
    assert code == 2
    assert "error: IR for op[loss] optype[LossOfL2] is not registered (E10501)" in err
    # the IR table gives the op its ports; ref semantics follow the names
    edit(pack_copy / "import" / "ir.yaml", "ir:\n", 'ir:\n  LossOfL2: "x -> y"\n')
    m, _ = load_graph(str(train_pb), _pack(pack_copy))
    assert nodes(m)["loss"].ports() == ({"x": 0}, {"y": 0})


def test_pack_signature_names_ports(pack_copy, tmp_path):
    """An op the IR table lacks takes its ports from the pack's op signature, with a note;
    without one its ports stay unnamed (no ref semantics), also noted."""
    gd = tfgraphs.train_step(1)
    tfgraphs.node(gd, "scale", "ScaleInPlace", ["loss"])
    f = tmp_path / "custom.pb"
    f.write_bytes(gd.SerializeToString())
    m, _ = load_graph(str(f), _pack(pack_copy))
    assert nodes(m)["scale"].ports() == ({}, {})
    assert m.notes == [("import", "no GE IR known for 1 op type(s), ports left unnamed (no reference semantics): "
                                  "ScaleInPlace (1)")]
    edit(pack_copy / "ops.yaml", "ops:\n", "ops:\n  ScaleInPlace:\n    signature: ScaleInPlace(x!) -> (x)\n")
    m, _ = load_graph(str(f), _pack(pack_copy))
    assert nodes(m)["scale"].ports() == ({"x": 0}, {"x": 0})
    assert m.notes == [("import", "port names from the pack's op signatures (not in import/ir.yaml): ScaleInPlace")]


def _pack(folder):
    from engine.passes.catalog import load_pack
    return load_pack(folder)


def test_bad_import_table_is_located(pack_copy, train_pb):
    edit(pack_copy / "import" / "tensorflow.yaml", "unknown_ir: keep", "unknown_ir: sometimes")
    with pytest.raises(InputError) as exc:
        load_graph(str(train_pb), _pack(pack_copy))
    text = exc.value.render()
    assert "import/tensorflow.yaml:" in text and "unknown_ir must be keep or refuse" in text


# ---- older GE dumps ---------------------------------------------------------------------
@needs_oam
def test_old_dump_unknown_flag_derived(tmp_path, capsys):
    dump = OAM / "oam_ge_proto_00000001_Build.txt"
    rj = tmp_path / "r.json"
    code, out, _ = run(["run", dump, "--report-json", rj], capsys)
    assert code == 0 and "0 node(s) inserted" in out          # as in GE's own dump of it
    notes = json.loads(rj.read_text())["input_notes"]
    assert {"kind": "derived", "text": "graph 'ge_default_20230713074125_sub_2_unknow': _graph_unknown_flag = true, "
            "not in the dump; derived from OwnerGraphIsUnknown on its 6 node(s) as GE sets them together"} in notes
    assert "note (derived): graph 'ge_default_20230713074125_11': _graph_unknown_flag = true" in out


@needs_oam
def test_old_dump_without_derivation_gets_the_copies(pack_copy, capsys):
    (pack_copy / "import" / "ge-dump.yaml").unlink()
    code, out, _ = run(["run", "--rules", pack_copy, OAM / "oam_ge_proto_00000001_Build.txt"], capsys)
    assert code == 0 and "2 node(s) inserted (Identity 2)" in out and "subgraph/out-const 2" in out


# ---- Caffe ---------------------------------------------------------------------------------
@needs_models
def test_caffe_abs_as_ge_parses_it():
    # GE's test (test_caffe_parser.cc): one output node, abs:0
    m, _ = load_graph(str(MODELS / "caffe_abs.pbtxt"), shared_pack())
    assert [(n.name, n.type) for n in m.root.nodes()] == [("data", "Data"), ("abs", "Abs"), ("Node_Output", "NetOutput")]
    assert [(a.peer.node.name, a.peer.idx) for a in nodes(m)["Node_Output"].ins] == [("abs", 0)]
    assert list(nodes(m)["data"].outs[0].desc.shape.dim) == [64, 1, 28, 28]
    assert ("import", "no Caffe weights given (--weights NET.caffemodel): layers get no weight Const inputs") in m.notes


@needs_models
def test_caffe_input_without_shape_refused(tmp_path, capsys):
    # GE's aclgrphParseCaffe fails on caffe_add.pbtxt: its net input has no shape (E11005)
    code, _, err = run(["convert", MODELS / "caffe_add.pbtxt", tmp_path / "o.pbtxt"], capsys)
    assert code == 2 and "input [data] of the model has no shape: GE takes it from --input_shape (E11005)" in err


def test_caffe_in_place_and_unsupported(tmp_path, capsys):
    net = ('name: "n"\ninput: "x"\ninput_dim: 1\ninput_dim: 3\ninput_dim: 8\ninput_dim: 8\n'
           'layer { name: "conv" type: "Convolution" bottom: "x" top: "c" convolution_param { num_output: 4 } }\n'
           'layer { name: "relu" type: "ReLU" bottom: "c" top: "c" }\n'
           'layer { name: "abs" type: "AbsVal" bottom: "c" top: "y" }\n')
    f = tmp_path / "n.prototxt"
    f.write_text(net)
    m, _ = load_graph(str(f), shared_pack())
    n = nodes(m)
    assert [a.peer.node.name for a in n["relu"].ins] == ["conv"]
    assert [a.peer.node.name for a in n["abs"].ins] == ["relu"]     # the in-place ReLU's top
    assert n["x"].type == "Data" and list(n["x"].outs[0].desc.shape.dim) == [1, 3, 8, 8]
    f.write_text(net.replace('type: "AbsVal"', 'type: "Mystery"'))
    code, _, err = run(["convert", f, tmp_path / "o.pbtxt"], capsys)
    assert code == 2 and "unsupport op[abs] optype[Mystery], you should customize the op at first (E11009)" in err


def test_rules_check_reads_the_import_tables(pack_copy, capsys):
    code, out, _ = run(["rules", "check", pack_copy], capsys)
    assert code == 0 and "import tables tensorflow.yaml, onnx.yaml, caffe.yaml, torch.yaml, ge-dump.yaml" in out
    edit(pack_copy / "import" / "onnx.yaml", "parent_index_attr:", "parent_index_atr:")
    edit(pack_copy / "import" / "ge-dump.yaml", "- nodes: OwnerGraphIsUnknown", "- node: OwnerGraphIsUnknown")
    code, _, err = run(["rules", "check", pack_copy], capsys)
    assert code == 2
    assert "onnx.yaml:" in err and "unknown key 'parent_index_atr'" in err
    assert "ge-dump.yaml:" in err and "a source names one of nodes, parent, root_graph" in err


def test_import_readme_lists_every_mapped_op():
    """rules/ge/import/README.md lists each table's op_map, in the table's order."""
    import re
    import yaml
    folder = Path(__file__).resolve().parent.parent / "rules" / "ge" / "import"
    text = (folder / "README.md").read_text()
    for fmt, title in (("tensorflow", "TensorFlow"), ("onnx", "ONNX"), ("caffe", "Caffe"), ("torch", "torch.export")):
        table = yaml.safe_load((folder / f"{fmt}.yaml").read_text())["op_map"]
        section = text.split(f"### {title} (", 1)[1].split("\n### ", 1)[0]
        assert section.startswith(f"{len(table)} "), fmt
        listed = re.findall(r"`([^`]+)`(?:\s+→\s+(\w+))?", section.split("\n", 1)[1])
        want = [(k, "" if (v if isinstance(v, str) else v["type"]) == k else (v if isinstance(v, str) else v["type"]))
                for k, v in table.items()]
        assert [(k, t) for k, t in listed] == want, fmt
