"""The external-weight export of GraphManager::Build: `run --option ge.externalWeight=1|2 --out OUT`
(ComputeHashForConstNodes + FileConstantUtils::ConvertConstToFileConst), its files beside OUT."""
import hashlib
import json
import shutil
import struct
from pathlib import Path

import pytest

from engine.cli import main
from engine.core.attrs import attr_value
from engine.core.dumpio import load_model
from engine.proto import ge_ir_pb2 as pb
from engine.varmgr.export import ge_sha256_hex

CASES = Path(__file__).resolve().parents[1] / "cases" / "variables" / "fileconst"
W12 = struct.pack("<2i", 1, 2)
BIAS = struct.pack("<3i", 3, 4, 5)


@pytest.fixture
def case(tmp_path):
    for f in CASES.iterdir():
        shutil.copy(f, tmp_path / f.name)
    (tmp_path / "out").mkdir()
    return tmp_path


def run(case, mode, out="out/model.pbtxt", *extra):
    return main(["run", str(case / "export.pbtxt"), "--quiet", "--option", f"ge.externalWeight={mode}",
                 "--out", str(case / out), *extra])


def attrs(node):
    return {k: attr_value(node.op.attr[k]) for k in node.op.attr}


def test_ge_hash_text_drops_leading_zeros_of_each_byte():
    digest = hashlib.sha256(b"abc").digest()
    text = ge_sha256_hex(b"abc")
    assert text == "".join(format(b, "x") for b in digest)
    assert len(text) < 64 and text != digest.hex()           # the digest of "abc" has bytes below 0x10


def test_per_weight_mode_writes_one_file_per_distinct_weight(case):
    assert run(case, 1) == 0
    h12, hb = ge_sha256_hex(W12), ge_sha256_hex(BIAS)
    weight = case / "out" / "weight"
    assert sorted(p.name for p in weight.iterdir()) == sorted([f"weight_{h12}", f"weight_{hb}"])
    assert (weight / f"weight_{h12}").read_bytes() == W12 and (weight / f"weight_{hb}").read_bytes() == BIAS
    model = load_model(case / "out" / "model.pbtxt")
    w1 = model.root.find(f"w1_{h12}")
    assert w1 is not None and w1.type == "FileConstant" and model.root.find("w1") is None
    a = attrs(w1)
    assert "value" not in a
    assert (a["location"], a["offset"], a["length"], a["_value_sha256"]) == (f"weight_{h12}", 0, 8, h12)
    assert a["shape"] == [2] and a["original_shape"] == [] and a["dtype"] == pb.DT_INT32
    assert model.root.find(f"w2_{h12}").op.attr["location"].s.decode() == f"weight_{h12}"
    empty = model.root.find("empty")                          # an empty tensor stays a Const
    assert empty.type == "Const" and "_value_sha256" not in empty.op.attr
    assert list(model.root.find("add").op.input) == [f"w1_{h12}:0", f"w2_{h12}:0"]


def test_combined_mode_writes_one_padded_file_with_offsets(case):
    assert run(case, 2) == 0
    weight = case / "out" / "weight"
    # no om name (a session compile): named after the graph (..._use_graph_name_success)
    assert [p.name for p in weight.iterdir()] == ["export_weight_combined"]
    blob = (weight / "export_weight_combined").read_bytes()
    assert len(blob) == 1024
    model = load_model(case / "out" / "model.pbtxt")
    h12, hb = ge_sha256_hex(W12), ge_sha256_hex(BIAS)
    # sorted by name: bias, w1, w2 -> bias at 0, the shared w1/w2 weight at 512
    rows = {n: attrs(model.root.find(f"{n}_{h}")) for n, h in (("bias", hb), ("w1", h12), ("w2", h12))}
    assert [(r["location"], r["offset"], r["length"]) for r in rows.values()] == [
        ("export_weight_combined", 0, 12), ("export_weight_combined", 512, 8), ("export_weight_combined", 512, 8)]
    assert blob[:12] == BIAS and blob[12:512] == bytes(500) and blob[512:520] == W12


def test_combined_file_takes_the_om_name_attribute_when_the_graph_has_one(case):      # ..._use_om_name_success
    text = (case / "export.pbtxt").read_text()
    marker = 'name: "export"\n'
    assert marker in text
    attr = '  attr {\n    key: "ge.modelFileNamePrefix"\n    value {\n      s: "models/resnet.om"\n    }\n  }\n'
    # graph attributes follow the ops in GE's text form: put it before the graph's closing brace
    head, _, rest = text.partition(marker)
    body, close = rest.rsplit("}", 1)
    (case / "export.pbtxt").write_text(head + marker + body + attr + "}" + close)
    assert run(case, 2) == 0
    assert [p.name for p in (case / "out" / "weight").iterdir()] == ["resnet_weight_combined"]


def test_export_is_deterministic(case):
    assert run(case, 2) == 0
    first = {p.name: p.read_bytes() for p in (case / "out").rglob("*") if p.is_file()}
    assert run(case, 2) == 0
    assert {p.name: p.read_bytes() for p in (case / "out").rglob("*") if p.is_file()} == first


def test_modes_0_and_unset_leave_constants_alone(case):
    assert run(case, 0) == 0
    assert not (case / "out" / "weight").exists()
    assert load_model(case / "out" / "model.pbtxt").root.find("w1").type == "Const"


def test_an_invalid_mode_is_refused(case, capsys):
    assert run(case, 3) == 2
    assert "option 'ge.externalWeight': bad value '3'" in capsys.readouterr().err


def test_without_out_nothing_is_exported(case, capsys):
    assert main(["run", str(case / "export.pbtxt"), "--quiet", "--option", "ge.externalWeight=1"]) == 0
    assert "ge.externalWeight is set but there is no --out: no weights exported" in capsys.readouterr().err
    assert not (case / "weight").exists()


def test_out_on_stdout_is_refused(case, capsys):
    assert main(["run", str(case / "export.pbtxt"), "--quiet", "--option", "ge.externalWeight=1", "--out", "-"]) == 2
    assert "ge.externalWeight writes weight files beside --out" in capsys.readouterr().err


def test_a_failed_write_leaves_no_output_and_no_weight_folder(case, monkeypatch, capsys):
    import engine.cli.outputs as outputs
    calls = []

    def full_disk(fh, data):
        calls.append(fh.name)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        fh.write(data)
    monkeypatch.setattr(outputs, "_write", full_disk)
    assert run(case, 1, "out/model.pbtxt", "--report-json", str(case / "out" / "r.json")) == 2
    assert "No space left on device" in capsys.readouterr().err
    assert sorted(p.name for p in (case / "out").iterdir()) == []


def test_a_weight_folder_that_is_a_file_is_refused(case, capsys):
    (case / "out" / "weight").write_text("not a folder")
    assert run(case, 1) == 2
    assert not (case / "out" / "model.pbtxt").exists()


def test_exported_graph_plans_and_loads_its_weights_back(case, capsys):
    assert run(case, 1) == 0
    state, plan = case / "s.pb", case / "plan.json"
    compiled = case / "out" / "compiled.pbtxt"
    assert main(["vars", "plan", str(case / "out" / "model.pbtxt"), "--save-state", str(state), "--json", str(plan),
                 "--out", str(compiled)]) == 0
    h12 = ge_sha256_hex(W12)
    rows = {v["node"]: v for v in json.loads(plan.read_text())["graphs"][0]["variables"]}
    assert rows[f"w2_{h12}"]["decision"] == "var/file-constant-slice"       # same location and offset
    addr = rows[f"w1_{h12}"]["address"]
    capsys.readouterr()
    assert main(["vars", "addr", str(state), str(addr), "--dump", "--graph", str(compiled)]) == 0
    out = capsys.readouterr().out
    assert f"weight_{h12} @ 0 -> 0x" in out and "01 00 00 00 02 00 00 00" in out


# ---- GetAllConstNodesAndWeightHash and the policy block --------------------------------
def _model_with_subgraph():
    from .conftest import desc
    from .graphs import GraphBuilder, tensor
    b = GraphBuilder("root")
    b.sub("a_sub")
    b.op("k", "Const", outs=[desc((1,), dtype=3)], attrs={"value": tensor(struct.pack("<i", 9), desc((1,), dtype=3))})
    b.op("b", "Const", outs=[desc((1,), dtype=3)], attrs={"value": tensor(struct.pack("<i", 8), desc((1,), dtype=3))})
    b.op("k", "Const", outs=[desc((1,), dtype=3)], attrs={"value": tensor(struct.pack("<i", 7), desc((1,), dtype=3))},
         graph="a_sub")
    b.op("call", "PartitionedCall", outs=[desc((1,), dtype=3)], subgraphs=["a_sub"])
    return b.build()


def test_constants_are_ordered_by_name_then_owner_graph():       # GetAllConstNodesAndWeightHash_Orders...
    from engine.varmgr.export import compute_hashes, const_nodes
    from engine.varmgr.policy_load import default_policy
    ext = default_policy().external
    model = _model_with_subgraph()
    compute_hashes(model, ext)
    assert [(n.name, n.graph.name) for n, _, _ in const_nodes(model, ext)] == [("b", "root"), ("k", "a_sub"), ("k", "root")]


def test_combined_offsets_follow_that_order():
    from engine.varmgr.export import export_weights
    from engine.varmgr.policy_load import default_policy
    model = _model_with_subgraph()
    files, done = export_weights(model, default_policy().external, "combined", "/o/g.pbtxt")
    assert [(c.old_name, c.graph, c.offset) for c in done] == [("b", "root", 0), ("k", "a_sub", 512), ("k", "root", 1024)]
    assert files == [("/o/weight/root_weight_combined", struct.pack("<i", 8) + bytes(508) + struct.pack("<i", 7)
                      + bytes(508) + struct.pack("<i", 9) + bytes(508))]


def test_a_hash_without_a_weight_fails(case, capsys):
    from engine.varmgr.export import export_weights
    from engine.varmgr.policy_load import default_policy
    from engine.varmgr.records import VarError
    from .conftest import desc
    from .graphs import GraphBuilder
    b = GraphBuilder()
    b.op("c", "Const", outs=[desc((1,))], attrs={"_value_sha256": "abc"})
    with pytest.raises(VarError, match="Failed to get weight of const node:c"):
        export_weights(b.build(), default_policy().external, "per_weight", "/o/g.pbtxt")


def test_export_happens_before_the_variables_are_placed(case):
    state = case / "s.pb"
    assert run(case, 1, "out/model.pbtxt", "--var-state", str(state)) == 0
    from engine.varmgr.state import load_sessions
    from engine.varmgr.policy_load import default_policy
    info = load_sessions(str(state), default_policy())[0]
    keys = sorted(info.var_resource.var_addr_mgr_map)
    h12 = ge_sha256_hex(W12)
    assert any(k.startswith(f"w1_{h12}") for k in keys) and not any(k.startswith("w1") and h12 not in k for k in keys)


@pytest.mark.parametrize("edit, message", [
    (('modes: {"1": per_weight, "2": combined}', 'modes: {"1": per_weight, "2": joined}'),
     "external.export.modes: unknown mode 'joined'"),
    (('file_name: "weight_{hash}"', 'file_name: "weight_{digest}"'), "unknown placeholder '{digest}' in 'weight_{digest}'"),
    (("    addr: addr\n", "    addr: addr\n    extra: 1\n"), "unknown key 'extra'"),
])
def test_the_external_block_is_checked_strictly(tmp_path, edit, message):
    from engine.core.errors import InputError
    from engine.core.resources import default_pack_dir
    from engine.varmgr.policy_load import load_policy
    text = (default_pack_dir() / "variables.yaml").read_text()
    assert edit[0] in text
    f = tmp_path / "variables.yaml"
    f.write_text(text.replace(edit[0], edit[1]))
    with pytest.raises(InputError) as info:
        load_policy(f)
    assert message in str(info.value) and "variables.yaml:" in str(info.value)


def test_several_graphs_with_the_export_are_refused_graph_by_graph(case, capsys):
    assert main(["run", str(case / "export.pbtxt"), str(case / "external.pbtxt"), "--out-dir", str(case / "many"),
                 "--option", "ge.externalWeight=1"]) == 2
    err = capsys.readouterr().err
    assert "ge.externalWeight is not supported when running several graphs" in err
    assert not (case / "many" / "weight").exists()


# ---- ge.externalWeightDir: the weights stay in a folder, reused through its meta.json ------
def run_kept(case, mode, kept, out="out/model.pbtxt"):
    return run(case, mode, out, "--option", f"ge.externalWeightDir={kept}")


def test_weight_dir_keeps_files_with_full_paths_and_a_meta(case):
    kept = case / "kept" / "weights"                 # made with its parents (CreateDirectory)
    assert run_kept(case, 1, kept) == 0
    h12, hb = ge_sha256_hex(W12), ge_sha256_hex(BIAS)
    assert sorted(p.name for p in kept.iterdir()) == sorted(["meta.json", f"weight_{h12}", f"weight_{hb}"])
    assert not (case / "out" / "weight").exists()
    meta = json.loads((kept / "meta.json").read_text())
    assert meta == {"hash_to_weight_file": {h12: f"{kept}/weight_{h12}", hb: f"{kept}/weight_{hb}"},
                    "hash_to_weight_offset": {}}
    model = load_model(case / "out" / "model.pbtxt")
    assert model.root.find(f"w1_{h12}").op.attr["location"].s.decode() == f"{kept}/weight_{h12}"


def test_a_second_graph_reuses_the_kept_weights(case):       # ..._specify_file_path_reuse_external_weight_dir
    kept = case / "kept"
    assert run_kept(case, 1, kept) == 0
    h12 = ge_sha256_hex(W12)
    stamp = (kept / f"weight_{h12}").stat().st_mtime_ns
    assert run_kept(case, 1, kept, "out/second.pbtxt") == 0
    assert (kept / f"weight_{h12}").stat().st_mtime_ns == stamp       # not written again
    (kept / f"weight_{h12}").unlink()                                # MultipleModelSameConst: meta lists it,
    assert run_kept(case, 1, kept, "out/third.pbtxt") == 0           # the file is gone: written again
    assert (kept / f"weight_{h12}").read_bytes() == W12


def test_combined_weights_are_appended_to_the_kept_file(case):
    kept = case / "kept"
    assert run_kept(case, 2, kept) == 0
    blob = (kept / "export_weight_combined").read_bytes()
    assert len(blob) == 1024
    # a second graph: the same weights plus a new one -> only the new one is appended
    from engine.core.dumpio import save_model
    from .conftest import desc
    from .graphs import GraphBuilder, tensor
    b = GraphBuilder("export")
    b.op("w1", "Const", outs=[desc((2,), dtype=3)], attrs={"value": tensor(W12, desc((2,), dtype=3))})
    b.op("new", "Const", outs=[desc((1,), dtype=3)], attrs={"value": tensor(struct.pack("<i", 6), desc((1,), dtype=3))})
    save_model(b.build(), case / "export.pbtxt")
    assert run_kept(case, 2, kept, "out/second.pbtxt") == 0
    blob2 = (kept / "export_weight_combined").read_bytes()
    assert blob2[:1024] == blob and blob2[1024:1028] == struct.pack("<i", 6) and len(blob2) == 1536
    model = load_model(case / "out" / "second.pbtxt")
    rows = {n.name.split("_")[0]: n for n in model.root.nodes()}
    assert rows["w1"].op.attr["offset"].i == 512 and rows["new"].op.attr["offset"].i == 1024
    meta = json.loads((kept / "meta.json").read_text())
    assert sorted(meta["hash_to_weight_offset"].values()) == [0, 512, 1024]


def test_a_meta_that_cannot_be_read_fails(case, capsys):
    kept = case / "kept"
    kept.mkdir()
    (kept / "meta.json").write_text("{not json")
    assert run_kept(case, 1, kept) == 1
    assert "read meta json failed: Failed to read json file[" in capsys.readouterr().err
    assert not (case / "out" / "model.pbtxt").exists()
