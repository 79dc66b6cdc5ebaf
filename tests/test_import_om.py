"""GE's offline model (.om): the embedded ModelDef read as GE's ModelHelper loads it. The
om files are written by benchmarks/gen_om.py, field by field from GE's ModelFileHeader and
partition tables (engine/core/importers/om.py, Note [om layout]), around ModelDefs of the
repository's cases."""
from __future__ import annotations

import struct
import sys
from pathlib import Path

import pytest

from engine.cli import main
from engine.core.dumpio import serialize_model
from engine.core.importers.detect import detect
from engine.core.io import load_graph
from harness import shared_fixtures, shared_pack

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))            # benchmarks/ is not installed
from benchmarks.gen_om import FLOW_MODEL, FLOW_SUBMODEL, MODEL_DEF, TASK_INFO, WEIGHTS, om_file  # noqa: E402
from benchmarks.gen_om import standard_om as std_om  # noqa: E402

CASE = ROOT / "tests" / "cases" / "variables" / "own-ref-delete-partitioned-call.yaml"
OAM = shared_fixtures() / "ge-dumps-oam"


@pytest.fixture(scope="module")
def modeldef() -> bytes:
    model, _ = load_graph(str(CASE), shared_pack())
    return serialize_model(model)


def run(args, capsys):
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


# ---- reading ----------------------------------------------------------------------------
def test_detected_by_magic_whatever_the_name(modeldef, tmp_path):
    f = tmp_path / "model.pb"
    f.write_bytes(std_om(modeldef))
    assert detect(f.read_bytes())[0] == "om"
    assert detect(modeldef)[0] == "ge"


@pytest.mark.parametrize("wide", [True, False], ids=["model_length", "old-length"])
def test_convert_equals_the_embedded_dump(modeldef, tmp_path, capsys, wide):
    om, pb = tmp_path / "m.om", tmp_path / "m.pb"
    om.write_bytes(std_om(modeldef, wide=wide))
    pb.write_bytes(modeldef)
    assert run(["convert", om, tmp_path / "a.pbtxt"], capsys)[0] == 0
    assert run(["convert", pb, tmp_path / "b.pbtxt"], capsys)[0] == 0
    assert (tmp_path / "a.pbtxt").read_bytes() == (tmp_path / "b.pbtxt").read_bytes()


def test_run_reports_what_was_not_read(modeldef, tmp_path, capsys):
    om = tmp_path / "m.om"
    om.write_bytes(std_om(modeldef))
    code, out, _ = run(["run", om], capsys)
    assert code == 0
    start = 256 + 8 + 4 * 24
    assert (f"note (import): om standard model 'net' (version 0x20000000, Ascend910B): the ModelDef of {len(modeldef)} "
            f"bytes at byte {start}; not read: TASK_INFO, TBE_KERNELS, WEIGHTS_DATA") in out


def test_dynamic_om_reads_the_root_model(modeldef, tmp_path, capsys):
    sub = serialize_model(load_graph(str(ROOT / "tests" / "cases" / "variables" / "own-ref-delete-refdata.yaml"),
                                     shared_pack())[0])
    data = om_file([[(MODEL_DEF, modeldef), (TASK_INFO, b"t")], [(MODEL_DEF, sub), (TASK_INFO, b"u")]], unknown=1)
    (tmp_path / "d.om").write_bytes(data)
    (tmp_path / "d.pb").write_bytes(modeldef)
    assert run(["convert", tmp_path / "d.om", tmp_path / "a.pbtxt"], capsys)[0] == 0
    assert run(["convert", tmp_path / "d.pb", tmp_path / "b.pbtxt"], capsys)[0] == 0
    assert (tmp_path / "a.pbtxt").read_bytes() == (tmp_path / "b.pbtxt").read_bytes()
    m, _ = load_graph(str(tmp_path / "d.om"), shared_pack())
    assert ("import", f"om standard model 'net' (version 0x20000000, Ascend910B): the ModelDef of {len(modeldef)} bytes "
                      f"at byte {256 + 8 + 2 * 24}; the other 1 model(s) of this dynamic om (submodels compiled apart) "
                      "are not read; not read: TASK_INFO") in m.notes
    # model 1.0 headers have no model_num: the second table is then not read at all (one model)
    (tmp_path / "v1.om").write_bytes(om_file([[(MODEL_DEF, modeldef)], [(MODEL_DEF, sub)]], version=0x10000000, unknown=1))
    m, _ = load_graph(str(tmp_path / "v1.om"), shared_pack())
    assert not any("other" in text for _, text in m.notes)


def test_flow_model(modeldef, tmp_path, capsys):
    sub = std_om(modeldef)
    (tmp_path / "f.om").write_bytes(om_file([[(MODEL_DEF, modeldef), (FLOW_MODEL, b"\x0a\x01f"), (FLOW_SUBMODEL, sub)]],
                                            mtype=3))
    m, _ = load_graph(str(tmp_path / "f.om"), shared_pack())
    assert [x.name for x in m.root.nodes()] == [x.name for x in load_graph(str(CASE), shared_pack())[0].root.nodes()]
    assert "not read: FLOW_MODEL, FLOW_SUBMODEL" in m.notes[0][1]
    (tmp_path / "g.om").write_bytes(om_file([[(MODEL_DEF, modeldef), (TASK_INFO, b"x")]], mtype=3))
    code, _, err = run(["convert", tmp_path / "g.om", tmp_path / "o.pbtxt"], capsys)
    at = 256 + 8 + 2 * 24 + len(modeldef)
    assert code == 2 and (f"g.om: error: malformed om file at byte {at}: flow model partition 1 is TASK_INFO, "
                          "GE expects FLOW_MODEL") in err


@pytest.mark.skipif(not OAM.is_dir(), reason="no ../shared/fixtures/ge-dumps-oam")
def test_om_of_a_real_dump_runs_like_the_dump(tmp_path, capsys):
    dump = OAM / "oam_ge_proto_00000001_Build.txt"
    assert run(["convert", dump, tmp_path / "d.pb"], capsys)[0] == 0
    (tmp_path / "d.om").write_bytes(std_om((tmp_path / "d.pb").read_bytes()))
    code, out, _ = run(["run", tmp_path / "d.om"], capsys)
    assert code == 0 and "0 node(s) inserted" in out       # as GE: the flag convert derived is in the ModelDef


# ---- refused, at the byte ---------------------------------------------------------------
def _err(data: bytes, tmp_path, capsys, *extra) -> str:
    f = tmp_path / "bad.om"
    f.write_bytes(data)
    out = tmp_path / "o.pbtxt"
    code, _, err = run(["convert", *extra, f, out], capsys)
    assert code == 2 and not out.exists()
    return err


def test_truncated_header(modeldef, tmp_path, capsys):
    err = _err(std_om(modeldef)[:100], tmp_path, capsys)
    assert "bad.om: error: malformed om file at byte 100: the file ends inside its 256-byte ModelFileHeader (100 bytes)" in err


def test_truncated_body_and_wrong_length(modeldef, tmp_path, capsys):
    data = std_om(modeldef)
    err = _err(data[:-5], tmp_path, capsys)
    assert (f"malformed om file at byte 184: the header's model_length says {len(data) - 256} bytes follow the header, "
            f"the file has {len(data) - 261}") in err
    err = _err(std_om(modeldef, wide=False, length_delta=3), tmp_path, capsys)
    assert "malformed om file at byte 76: the header's length says" in err


def test_partition_past_the_end(modeldef, tmp_path, capsys):
    data = bytearray(std_om(modeldef))
    size_at = 256 + 8 + 24 * 3 + 16                 # mem_size of partition 3 (TBE_KERNELS)
    struct.pack_into("<Q", data, size_at, 10 ** 6)
    err = _err(bytes(data), tmp_path, capsys)
    at = 256 + 8 + 4 * 24 + len(modeldef) + 64 + 2
    assert (f"malformed om file at byte {size_at}: model 0: partition 3 (TBE_KERNELS) of 1000000 bytes at byte {at} "
            f"runs past the end of the file ({len(data)} bytes)") in err


def test_bad_partition_count_and_missing_modeldef(modeldef, tmp_path, capsys):
    data = bytearray(std_om(modeldef))
    struct.pack_into("<I", data, 256, 9)
    assert "malformed om file at byte 256: model 0: the partition table has 9 partitions (GE reads 1 to 8)" in \
        _err(bytes(data), tmp_path, capsys)
    err = _err(om_file([[(WEIGHTS, b"w"), (TASK_INFO, b"t")]]), tmp_path, capsys)
    assert "malformed om file at byte 256: the model has no MODEL_DEF partition (partitions: WEIGHTS_DATA, TASK_INFO)" in err


def test_broken_modeldef_located_in_the_file(modeldef, tmp_path, capsys):
    broken = modeldef[:40] + b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff" + modeldef[40:]
    err = _err(om_file([[(MODEL_DEF, broken)]]), tmp_path, capsys)
    start = 256 + 8 + 24
    assert f"malformed om file at byte " in err and f"the MODEL_DEF partition (bytes {start}-{start + len(broken)}) is no ModelDef" in err
    at = int(err.split("at byte ", 1)[1].split(":", 1)[0])
    assert start <= at <= start + 40 + 11


def test_encrypted_bundle_and_foreign(modeldef, tmp_path, capsys):
    assert "the om file is encrypted (is_encrypt = 1 at byte 80): memconflict reads only the plain format GE writes" in \
        _err(std_om(modeldef, encrypt=1), tmp_path, capsys)
    assert ("the om file is a bundle model (modeltype 5 at byte 82): GE loads a bundle model only through its bundle "
            "interface") in _err(std_om(modeldef, mtype=5), tmp_path, capsys)
    assert ("the om file is a model of unknown type (modeltype 9 at byte 82): it is not a graph model GE's ModelHelper "
            "reads") in _err(std_om(modeldef, mtype=9), tmp_path, capsys)
    err = _err(std_om(modeldef, magic=0x12345678), tmp_path, capsys, "--from", "om")
    assert "malformed om file at byte 0: magic 0x12345678 is not GE's MODEL_FILE_MAGIC_NUM 0x444F4D49" in err


def test_every_truncation_refused_at_a_byte(modeldef, tmp_path):
    from engine.core.errors import InputError
    from engine.core.importers import load_model_file
    data = std_om(modeldef)
    f = tmp_path / "cut.om"
    for cut in list(range(0, 400, 7)) + [len(data) - 1]:
        f.write_bytes(data[:cut])
        with pytest.raises(InputError) as exc:
            load_model_file(f, shared_pack(), "om")
        assert "malformed om file at byte " in exc.value.render(), cut


GE_OM = shared_fixtures() / "ge-om"


@pytest.mark.skipif(not GE_OM.is_dir(), reason="no ../shared/fixtures/ge-om (GE's own test om files: mirror-cann/ge "
                                               "tests/ge/st/st_run_data/origin_model/*.om)")
def test_ge_test_om_files():
    """GE's st om files: a static IR model with MODEL_INOUT_INFO, a flow model, a dynamic om of 3 models."""
    m, _ = load_graph(str(GE_OM / "root_model.om"), shared_pack())
    assert [(n.name, n.type) for n in m.root.nodes()] == [("Node_Output", "NetOutput"), ("_arg_0", "Data"),
                                                         ("fused_op1", "FakeOpNpu")]
    assert m.notes[0] == ("import", "om IR model 'test_graph_cache' (version 0x20000000): the ModelDef of 1798 bytes at "
                                    "byte 476; not read: MODEL_INOUT_INFO, TASK_INFO")
    m, _ = load_graph(str(GE_OM / "flow_model.om"), shared_pack())
    assert "om flow model '' (version 0x20000000): the ModelDef of 1656 bytes at byte 360; not read: FLOW_MODEL, " \
           "FLOW_SUBMODEL" == m.notes[0][1]
    m, _ = load_graph(str(GE_OM / "dynamic_and_static_graph_without_unfold.om"), shared_pack())
    assert [n.name for n in m.root.nodes()] == ["data_1", "rank", "known_op", "data_2", "unknown_op", "root_netoutput"]
    assert "the other 2 model(s) of this dynamic om" in m.notes[0][1]
