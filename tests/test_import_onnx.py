"""ONNX models imported as GE's ONNX parser builds them (issue 15): GE's parser test models,
models built with onnx.helper (skipped without the `onnx` extra), the models the onnx
wheel ships, and GE's own ONNX-form dumps."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.cli import main
from engine.core.errors import InputError
from engine.core.io import load_graph
from harness import edit, shared_fixtures, shared_pack

MODELS = shared_fixtures() / "parser-models"
OAM = shared_fixtures() / "ge-dumps-oam"
needs_models = pytest.mark.skipif(not MODELS.is_dir(), reason="no ../shared/fixtures/parser-models")
needs_oam = pytest.mark.skipif(not OAM.is_dir(), reason="no ../shared/fixtures/ge-dumps-oam")


def run(args, capsys):
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def graph_nodes(model, name=None):
    g = model.graphs[name] if name else model.root
    return {n.name: n for n in g.nodes()}


@needs_models
def test_conv2d_model_as_ge_builds_it():
    m, _ = load_graph(str(MODELS / "onnx_conv2d.onnx"), shared_pack())
    assert [(n.name, n.type) for n in m.root.nodes()] == [
        ("x", "Data"), ("B_Initializer_0", "Const"), ("W_Initializer_1", "Const"), ("Conv_0", "Conv2D"),
        ("Node_Output", "NetOutput")]
    conv = graph_nodes(m)["Conv_0"]
    assert conv.ports() == ({"x": 0, "filter": 1, "bias": 2}, {"y": 0})
    assert [a.peer.node.name for a in conv.ins] == ["x", "W_Initializer_1", "B_Initializer_0"]
    assert list(graph_nodes(m)["W_Initializer_1"].op.attr["value"].t.desc.shape.dim) == [1, 1, 3, 3]


@needs_models
def test_cyclic_if_model_refused_as_ge_does(capsys, tmp_path):
    # GE's own test (tests/parser/st/testcase/test_onnx_parser.cc onnx_parser_if_node) expects
    # FAILED: "has circle struct, topo sort failed"
    code, _, err = run(["convert", MODELS / "onnx_if.onnx", tmp_path / "o.pbtxt"], capsys)
    assert code == 2 and "error: graph 'test_if' has a cycle through Add_2, Node_Output" in err


@needs_models
def test_if_branches_become_subgraphs(tmp_path, capsys):
    m, _ = load_graph(str(MODELS / "onnx_if_const_intput.onnx"), shared_pack())
    if_node = graph_nodes(m)["If_0"]
    assert [g.name for g in if_node.subgraphs] == ["If_0_0_then_branch", "If_0_1_else_branch"]
    assert if_node.ports()[0] == {"cond": 0}
    rj = tmp_path / "r.json"
    code, _, _ = run(["run", MODELS / "onnx_if_const_intput.onnx", "--report-json", rj, "--passes",
                      "subgraph,memcpy_addr_async"], capsys)
    report = json.loads(rj.read_text())
    assert code == 0
    # a branch's constant output is copied (subgraph pass), the If's constant input made addressable
    assert report["summary"]["by_type"] == {"Identity": 2, "MemcpyAddrAsync": 1}
    # the model's If has no outputs while its branches' outputs name parent output 0: GE's
    # GetRefMapping (HandleSubgraphOutput) fails, and the layout pass with it
    code, _, err = run(["run", MODELS / "onnx_if_const_intput.onnx", "--out", tmp_path / "o.pbtxt"], capsys)
    assert code == 1 and "pass mem_layout_conflict failed at node 'Node_Output': input 0 names output 0 of If_0" in err
    assert not (tmp_path / "o.pbtxt").exists()


@needs_models
def test_pack_without_onnx_table(pack_copy, capsys, tmp_path):
    (pack_copy / "import" / "onnx.yaml").unlink()
    code, _, err = run(["convert", "--rules", pack_copy, MODELS / "onnx_conv2d.onnx", tmp_path / "o.pbtxt"], capsys)
    assert code == 2 and "error: the pack has no import/onnx.yaml" in err


# ---- models built with onnx.helper -------------------------------------------------------
def _helper():
    return pytest.importorskip("onnx", reason="the onnx extra is not installed (pip install '.[onnx]')")


def _save(model, tmp_path, name="m.onnx") -> Path:
    f = tmp_path / name
    f.write_bytes(model.SerializeToString())
    return f


def test_helper_model_naming_and_if(tmp_path):
    ox = _helper()
    h, T = ox.helper, ox.TensorProto
    then_g = h.make_graph([h.make_node("Relu", ["outer"], ["t"])], "then", [], [h.make_tensor_value_info("t", T.FLOAT, [4])])
    else_g = h.make_graph([h.make_node("Identity", ["outer"], ["e"])], "else", [], [h.make_tensor_value_info("e", T.FLOAT, [4])])
    nodes = [h.make_node("Relu", ["x"], ["r"]), h.make_node("Add", ["r", "w"], ["outer"], name="add"),
             h.make_node("Relu", ["outer"], ["r2"]),
             h.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [4]), h.make_tensor_value_info("c", T.BOOL, [])],
                     [h.make_tensor_value_info("y", T.FLOAT, [4]), h.make_tensor_value_info("r2", T.FLOAT, [4])],
                     [h.make_tensor("w", T.FLOAT, [4], [1.0] * 4)])
    m, _ = load_graph(str(_save(h.make_model(g), tmp_path)), shared_pack())
    n = graph_nodes(m)
    # unnamed nodes: OPTYPE_K, K counting the graph's unnamed nodes in order
    assert {"Relu_0", "add", "Relu_1", "If_2"} <= set(n)
    assert [(x.name, x.type) for x in m.root.nodes()][:2] == [("x", "Data"), ("c", "Data")]
    assert [a.peer.node.name for a in n["If_2"].ins] == ["c", "add"]          # the outer name after cond
    assert [a.peer.node.name for a in n["Node_Output"].ins] == ["If_2", "Relu_1"]
    sub = graph_nodes(m, "If_2_0_then_branch")
    assert sub["outer"].type == "Data" and sub["outer"].op.attr["_parent_node_index"].i == 1
    assert graph_nodes(m, "If_2_0_then_branch")["Node_Output"].op.input_desc[0].attr["_parent_node_index"].i == 0


def test_helper_model_unsupported_op_refused(tmp_path, capsys):
    ox = _helper()
    h, T = ox.helper, ox.TensorProto
    g = h.make_graph([h.make_node("Hardmax", ["x"], ["y"]), h.make_node("Hardmax", ["y"], ["z"])], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, [4])], [h.make_tensor_value_info("z", T.FLOAT, [4])])
    f = _save(h.make_model(g, opset_imports=[h.make_opsetid("", 13)]), tmp_path)
    code, _, err = run(["run", f, "--quiet"], capsys)
    assert code == 2
    assert "error: graph 'g': op type [ai.onnx::13::Hardmax] is not supported (E16002): 2 node(s), first 'Hardmax_0'" in err


def test_helper_model_cycle_refused(tmp_path):
    ox = _helper()
    h, T = ox.helper, ox.TensorProto
    g = h.make_graph([h.make_node("Add", ["x", "b"], ["a"], name="n1"), h.make_node("Relu", ["a"], ["b"], name="n2")], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, [4])], [h.make_tensor_value_info("a", T.FLOAT, [4])])
    with pytest.raises(InputError) as exc:
        load_graph(str(_save(h.make_model(g), tmp_path)), shared_pack())
    assert "graph 'g' has a cycle through n1, n2" in exc.value.render()


def test_rule_edit_maps_an_onnx_op(pack_copy, tmp_path):
    ox = _helper()
    h, T = ox.helper, ox.TensorProto
    g = h.make_graph([h.make_node("Hardmax", ["x"], ["y"])], "g", [h.make_tensor_value_info("x", T.FLOAT, [4])],
                     [h.make_tensor_value_info("y", T.FLOAT, [4])])
    f = _save(h.make_model(g), tmp_path)
    edit(pack_copy / "import" / "onnx.yaml", "  If: If\n", "  If: If\n  Hardmax: HardmaxV2\n")
    from engine.passes.catalog import load_pack
    m, _ = load_graph(str(f), load_pack(pack_copy))
    assert graph_nodes(m)["Hardmax_0"].type == "HardmaxV2"


def test_onnx_wheel_models_import():
    ox = _helper()
    light = Path(ox.__file__).parent / "backend" / "test" / "data" / "light"
    files = sorted(light.glob("*.onnx"))
    if not files:
        pytest.skip("this onnx wheel ships no models")
    for f in files:
        m, _ = load_graph(str(f), shared_pack())
        assert m.root.by_name.get("Node_Output") is not None, f.name
    dense = light / "light_densenet121.onnx"
    if dense.exists():
        m, _ = load_graph(str(dense), shared_pack())
        types = {n.type for n in m.root.nodes()}
        assert {"Conv2D", "BatchNorm", "ConcatD", "Relu", "Data", "Const", "NetOutput"} <= types


# ---- GE's ONNX-form dumps ----------------------------------------------------------------
@needs_oam
def test_ge_onnx_dump_reads_like_its_proto_form(capsys, tmp_path):
    onnx_form, proto_form = OAM / "oam_ge_onnx_00000000_graph_1_Build.pbtxt", OAM / "oam_ge_proto_00000000_Build.txt"
    r1, r2 = tmp_path / "a.json", tmp_path / "b.json"
    assert run(["run", onnx_form, "--report-json", r1], capsys)[0] == 0
    assert run(["run", proto_form, "--report-json", r2], capsys)[0] == 0
    a, b = json.loads(r1.read_text()), json.loads(r2.read_text())
    assert a["summary"]["by_rule"] == b["summary"]["by_rule"] == {"var/ref-after-writer": 1}
    assert {"kind": "ports", "text": "1 Assign node(s) had no port names in the dump: named from GE's IR (import/ir.yaml)"} \
        in a["input_notes"]


@needs_oam
def test_ge_onnx_dump_subgraphs_linked():
    m, _ = load_graph(str(OAM / "oam_ge_onnx_00000001_graph_11_Build.pbtxt"), shared_pack())
    call = m.root.by_name["ge_default_20230713074125_sub_2_unknow_PartitionedCall_2"]
    assert [g.name for g in call.subgraphs] == ["ge_default_20230713074125_sub_2_unknow"]
    assert len(m.graph_order) == 5
    assert ("derived", "subgraph 'ge_default_20230713074125_sub_2_unknow' linked to "
            "'ge_default_20230713074125_sub_2_unknow_PartitionedCall_2' by name (the ONNX form keeps no subgraph_name)") in m.notes
