"""FileConstant weights as GE finds them: `location`, `file_path`, `file_id` + `ge.exec.value_bins`
(FileConstantUtils::GetFileIdToPathMapFromOption / GetFilePath, file_constant_unittest.cc), the
file-slice reuse of the VarManager, and the weights loaded into the simulated device memory."""
import json
import shutil
from pathlib import Path

import pytest

from engine.cli import main
from engine.core.dumpio import load_model
from engine.varmgr.fileconst import ValueBinsError, read_weight, resolve_path, value_bins, weight_file
from engine.varmgr.policy_load import default_policy
from engine.varmgr.records import VarError

from .conftest import desc
from .graphs import GraphBuilder

CASES = Path(__file__).resolve().parents[1] / "cases" / "variables" / "fileconst"
KEYS = default_policy().external.file_constant
BINS = '{"value_bins":[{"value_bin_id":"bucket", "value_bin_file":"bucket.bin"}]}'
BASE = 137_438_953_472


def fc_node(**attrs):
    b = GraphBuilder()
    b.op("fc", "FileConstant", outs=[desc((4,), dtype=4)], attrs=attrs)
    return b.build().root.find("fc")


# ---- ge.exec.value_bins (GetFileIdToPathMapFromOption) -------------------------------
def test_value_bins_maps_ids_to_files():                                  # GetFilePathFromOptionOK
    text = '{"value_bins":[{"value_bin_id":"vector_search_buchet_value_bin", "value_bin_file":"hello.bin"}]}'
    assert value_bins(text, KEYS) == {"vector_search_buchet_value_bin": "hello.bin"}


def test_value_bins_empty_option_is_an_empty_map():
    assert value_bins("", KEYS) == {} and value_bins(None, KEYS) == {} and value_bins("null", KEYS) == {}


def test_value_bins_first_path_of_an_id_wins_and_the_top_key_is_not_checked():
    text = '{"anything": [{"value_bin_id": "a", "value_bin_file": "1.bin"}, {"value_bin_id": "a", "value_bin_file": "2.bin"}],' \
           ' "more": [{"value_bin_file": "no_id.bin"}]}'
    assert value_bins(text, KEYS) == {"a": "1.bin", "": "no_id.bin"}


def test_value_bins_object_values_come_in_key_order():
    text = '{"b": [{"value_bin_id": "x", "value_bin_file": "b.bin"}], "a": [{"value_bin_id": "x", "value_bin_file": "a.bin"}]}'
    assert value_bins(text, KEYS) == {"x": "a.bin"}


def test_value_bins_item_that_is_no_object_maps_nothing_to_nothing():
    # from_json(FileIdToFilePath) looks keys up with json::find, which finds nothing in a non-object
    assert value_bins('{"value_bins": ["a.bin", 3]}', KEYS) == {"": ""}


def test_value_bins_invalid_json_fails_with_e10001():                     # GetFilePathFromOptionFailed
    with pytest.raises(ValueBinsError, match=r"^E10001: value '\{\"value_bins\":' for parameter ge.exec.value_bins "
                                             r"is invalid: it is not a valid json string"):
        value_bins('{"value_bins":', KEYS)


def test_value_bins_nested_too_deeply_is_an_error_not_a_crash():
    with pytest.raises(ValueBinsError, match="nested too deeply"):
        value_bins("[" * 100000 + "]" * 100000, KEYS)


@pytest.mark.parametrize("text, why", [
    ('{"value_bins": {"value_bin_id": "a"}}', "entry 0 is an object, not a list"),
    ('[[{"value_bin_id": "a", "value_bin_file": 7}]]', "'value_bin_file' is a number, not a string"),
])
def test_value_bins_of_the_wrong_shape_are_nlohmann_type_errors(text, why):
    with pytest.raises(ValueBinsError, match=why):
        value_bins(text, KEYS)


# ---- GetFilePath ---------------------------------------------------------------------
def test_location_wins_with_its_offset_and_length():                      # GetFileConstantPath
    wf = weight_file(fc_node(location="w.bin", offset=64, length=1024, file_path="other.bin"), KEYS, {})
    assert (wf.path, wf.offset, wf.length, wf.source) == ("w.bin", 64, 1024, "location")


def test_file_path_has_offset_and_length_zero():                          # GetRealFilePathOK
    wf = weight_file(fc_node(file_path="hello.bin", offset=64, length=8), KEYS, {})
    assert (wf.path, wf.offset, wf.length, wf.source) == ("hello.bin", 0, 0, "file_path")


def test_file_id_is_looked_up_in_value_bins():                            # GetFilePathOK
    bins = value_bins('{"value_bins":[{"value_bin_id":"vector_search_buchet_value_bin", "value_bin_file":"hello.bin"}]}', KEYS)
    wf = weight_file(fc_node(file_id="vector_search_buchet_value_bin"), KEYS, bins)
    assert (wf.path, wf.source, wf.file_id) == ("hello.bin", "file_id", "vector_search_buchet_value_bin")


def test_unknown_file_id_is_only_a_warning():
    wf = weight_file(fc_node(file_id="nowhere"), KEYS, {"a": "a.bin"})
    assert (wf.path, wf.file_id) == ("", "nowhere")


@pytest.mark.parametrize("attrs, bins, message", [
    ({}, {}, "Failed to get filed id from attr"),
    ({"file_id": ""}, {}, "The file path and file id are empty."),
    ({"file_id": "a"}, {"a": ""}, "File path is empty."),
])
def test_get_file_path_failures(attrs, bins, message):
    with pytest.raises(VarError, match=message):
        weight_file(fc_node(**attrs), KEYS, bins)


def test_read_weight_takes_length_else_the_tensor_size(tmp_path):
    f = tmp_path / "w.bin"
    f.write_bytes(b"ABCDEFGHIJKL")
    node = fc_node()
    assert read_weight(node, weight_file(fc_node(location=str(f), offset=4, length=3), KEYS, {}), str(f), 8, 8) == b"EFG"
    assert read_weight(node, weight_file(fc_node(file_path=str(f)), KEYS, {}), str(f), 5, 5) == b"ABCDE"
    with pytest.raises(VarError, match="left size 2 < file constant size 3"):
        read_weight(node, weight_file(fc_node(location=str(f), length=3), KEYS, {}), str(f), 2, 2)
    with pytest.raises(VarError, match=r"E13001: FileConstant fc: \[Open\]\[File\] gone.bin failed"):
        read_weight(node, weight_file(fc_node(location="gone.bin"), KEYS, {}), str(tmp_path / "gone.bin"), 4, 4)


def test_location_is_read_from_the_graphs_weight_folder_first(tmp_path):
    (tmp_path / "weight").mkdir()
    (tmp_path / "weight" / "w.bin").write_bytes(b"x")
    wf = weight_file(fc_node(location="/elsewhere/w.bin"), KEYS, {})
    assert resolve_path(wf, str(tmp_path), KEYS) == str(tmp_path / "weight" / "w.bin")
    wf = weight_file(fc_node(file_path="w.bin"), KEYS, {})
    assert resolve_path(wf, str(tmp_path), KEYS) == str(tmp_path / "w.bin")


# ---- through the command line ------------------------------------------------------------
@pytest.fixture
def case(tmp_path):
    for f in CASES.iterdir():
        shutil.copy(f, tmp_path / f.name)
    return tmp_path


def plan(case, *extra) -> dict:
    out = case / "plan.json"
    argv = ["vars", "plan", str(case / "fileconst.pbtxt"), "--json", str(out), *extra]
    assert main(argv) == 0
    return {v["node"]: v for v in json.loads(out.read_text())["graphs"][0]["variables"]}


def test_plan_shows_each_weight_file_and_the_file_slice_reuse(case, capsys):    # fileconstant_mem_reuse_succ
    rows = plan(case, "--option", f"ge.exec.value_bins={BINS}")
    assert rows["by_location"]["weight_file"] == {"path": "weights.bin", "offset": 4, "length": 4, "source": "location"}
    assert rows["same_slice"]["decision"] == "var/file-constant-slice"
    assert rows["same_slice"]["address"] == rows["by_location"]["address"]
    assert rows["other_slice"]["decision"] == "new block"
    assert rows["by_file_path"]["weight_file"]["source"] == "file_path"
    assert rows["by_file_id"]["weight_file"] == {"path": "bucket.bin", "offset": 0, "length": 0,
                                                 "source": "file_id", "file_id": "bucket"}
    assert rows["unknown_id"]["weight_file"]["warning"] == "Failed to get file path of file id:nowhere"
    assert rows["strings"]["size"] == 100                     # AssignVarMemory_ForFileConstant_DT_STRING_SUCCESS
    text = capsys.readouterr().out
    assert "  graph 0: by_file_id: weight file bucket.bin (by file_id 'bucket'), offset 0, length 0" in text


def test_a_file_constant_known_by_file_path_only_is_never_reused(case):
    # Note [weight path of the reuse key]: the VarManager's key is `location` only
    b = GraphBuilder("g")
    for name in ("a", "b"):
        b.op(name, "FileConstant", outs=[desc((4,), dtype=4)], attrs={"file_path": "weights.bin"})
    from engine.core.dumpio import save_model
    save_model(b.build(), case / "fp.pbtxt")
    out = case / "p.json"
    assert main(["vars", "plan", str(case / "fp.pbtxt"), "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["graphs"][0]["variables"]
    assert [r["decision"] for r in rows] == ["new block", "new block"]


def test_plan_fails_as_get_file_path_fails(case, capsys):
    assert main(["vars", "plan", str(case / "fileconst.pbtxt"), "--option",
                 'ge.exec.value_bins={"value_bins":[{"value_bin_id":"bucket","value_bin_file":""}]}']) == 1
    assert ("pass vars plan failed at node 'by_file_id': graph 0 (" in capsys.readouterr().err)


def test_plan_refuses_invalid_value_bins_with_a_located_error(case, capsys):
    assert main(["vars", "plan", str(case / "fileconst.pbtxt"), "--option", 'ge.exec.value_bins={"value_bins":']) == 2
    err = capsys.readouterr().err
    assert "--option ge.exec.value_bins: error: E10001: value '{\"value_bins\":' for parameter" in err
    assert "hint: write e.g." in err


def test_dump_shows_the_weight_loaded_from_the_file(case, capsys):        # InitFileConstant
    state, compiled = case / "s.pb", case / "compiled.pbtxt"
    opt = ["--option", f"ge.exec.value_bins={BINS}"]
    assert main(["vars", "plan", str(case / "fileconst.pbtxt"), "--save-state", str(state),
                 "--out", str(compiled), *opt]) == 0
    model = load_model(compiled)
    by_id = model.root.find("by_file_id").op.output_i[0]
    capsys.readouterr()
    assert main(["vars", "addr", str(state), str(by_id), "--dump", "--graph", str(compiled), *opt]) == 0
    out = capsys.readouterr().out
    assert "loaded: by_file_id (by_file_id): 10 bytes from " in out
    assert "bucket.bin @ 0 -> 0x" in out
    assert "  0x100000200  30 31 32 33 34 35 36 37 38 39" in out and "|0123456789|" in out
    slice_addr = model.root.find("same_slice").op.output_i[0]
    assert main(["vars", "addr", str(state), str(slice_addr), "--dump", "--graph", str(compiled), *opt]) == 0
    out = capsys.readouterr().out
    assert "4 of 64 bytes written" in out and "45 46 47 48" in out and "|EFGH|" in out
    assert "same_slice: weights.bin:4 already loaded on device 0, not copied again" in out


def test_dump_of_a_missing_weight_file_fails_with_e13001(case, capsys):
    state, compiled = case / "s.pb", case / "compiled.pbtxt"
    assert main(["vars", "plan", str(case / "fileconst.pbtxt"), "--save-state", str(state), "--out", str(compiled)]) == 0
    (case / "weights.bin").unlink()
    capsys.readouterr()
    assert main(["vars", "addr", str(state), str(BASE), "--dump", "--graph", str(compiled)]) == 1
    assert "E13001: FileConstant by_location: [Open][File] weights.bin failed" in capsys.readouterr().err
