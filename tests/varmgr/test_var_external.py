"""External device memory: ConstPlaceHolder (GetConstPlaceHolderAddr, const_place_holder_set_addr_success),
SetExternalVar (test_external_var), and init values in the simulated device memory
(test_init_var_if_has_init_value_match) through `vars plan` and `vars addr`."""
import json
import shutil
import struct
from pathlib import Path

import pytest

from engine.cli import main
from engine.core.dumpio import load_model, save_model
from engine.proto import ge_ir_pb2 as pb
from engine.varmgr.external import const_place_holder_addr, external_var_failure, hex_dump, parse_external_var
from engine.varmgr.policy_load import default_policy
from engine.varmgr.records import VarError

from .conftest import desc
from .graphs import GraphBuilder

CASES = Path(__file__).resolve().parents[1] / "cases" / "variables" / "fileconst"
KEYS = default_policy().external.place_holder
BASE = 137_438_953_472


def cph(drop=(), **attrs):
    values = {"size": 24, "placement": 1, "addr": 20000, **attrs}
    b = GraphBuilder()
    op = b.op("cph", "ConstPlaceHolder", outs=[desc((1, 2, 3), size=24)],
              attrs={k: v for k, v in values.items() if k not in drop})
    if "storage_shape" not in drop:
        op.attr["storage_shape"].list.i.extend([1, 2, 3])
        op.attr["storage_shape"].list.val_type = pb.AttrDef.ListValue.VT_LIST_INT
    if "dtype" not in drop:
        op.attr["dtype"].dt = pb.DT_FLOAT
    return b.build().root.find("cph")


def test_const_place_holder_address_and_size():
    assert const_place_holder_addr(cph(), KEYS) == (20000, 24)


@pytest.mark.parametrize("node, message", [
    (lambda: cph(size=23), r"check data_lengths failed, attr size is \[23\], size calculated by shape and data "
                           r"type is \[24\], shape is 1,2,3, data_type is DT_FLOAT\."),
    (lambda: cph(placement=0), r"GetConstPlaceHolderAttr placement expect 1, but got 0\."),
    (lambda: cph(addr=0), r"GetConstPlaceHolderAttr dev_address ptr is null\."),
    (lambda: cph(drop=("storage_shape",)), r"attr 'storage_shape' \(list of int\) is missing"),
    (lambda: cph(drop=("dtype",)), r"attr 'dtype' \(data type\) is missing"),
    (lambda: cph(drop=("addr",)), r"attr 'addr' \(int\) is missing"),
])
def test_const_place_holder_failures(node, message):
    with pytest.raises(VarError, match=message):
        const_place_holder_addr(node(), KEYS)


def test_parse_external_var():
    assert parse_external_var("0x1000:4096") == (4096, 4096)
    for bad in ("4096", "0:10", "x:1", "1:-1"):
        with pytest.raises(ValueError):
            parse_external_var(bad)


def test_hex_dump_lines():
    assert hex_dump(0x200, b"\x00\x00\x80?AB") == ["0x200  00 00 80 3f 41 42" + " " * 30 + "  |...?AB|"]


@pytest.fixture
def case(tmp_path):
    for f in CASES.iterdir():
        shutil.copy(f, tmp_path / f.name)
    return tmp_path


def test_plan_shows_the_place_holder_as_external(case, capsys):
    out = case / "p.json"
    assert main(["vars", "plan", str(case / "external.pbtxt"), "--json", str(out)]) == 0
    rows = {v["node"]: v for v in json.loads(out.read_text())["graphs"][0]["variables"]}
    assert rows["cph"]["external"] == {"address": 20000, "size": 24}
    assert "  graph 0: cph: external memory 0x4e20, 24 bytes" in capsys.readouterr().out


def test_plan_fails_as_get_const_place_holder_addr_fails(tmp_path, capsys):
    b = GraphBuilder()
    b.op("cph", "ConstPlaceHolder", outs=[desc((2,))], attrs={"addr": 20000})
    save_model(b.build(), tmp_path / "g.pbtxt")
    assert main(["vars", "plan", str(tmp_path / "g.pbtxt")]) == 1
    assert "ConstPlaceHolder cph: attr 'storage_shape' (list of int) is missing" in capsys.readouterr().err


def compile_external(case):
    state, compiled = case / "s.pb", case / "c.pbtxt"
    assert main(["vars", "plan", str(case / "external.pbtxt"), "--save-state", str(state), "--out", str(compiled)]) == 0
    return state, load_model(compiled), compiled


def test_addr_of_a_place_holder_is_its_given_address(case, capsys):        # const_place_holder_set_addr_success
    state, model, _ = compile_external(case)
    capsys.readouterr()
    assert main(["vars", "addr", str(state), str(model.root.find("cph").op.output_i[0]), "--dump"]) == 0
    out = capsys.readouterr().out
    assert "physical 0x4e20" in out and "external memory (ConstPlaceHolder) at 0x4e20" in out


def test_dump_shows_the_init_value_at_its_device_address(case, capsys):    # test_init_var_if_has_init_value_match
    state, model, _ = compile_external(case)
    capsys.readouterr()
    assert main(["vars", "addr", str(state), str(BASE), "--dump"]) == 0
    out = capsys.readouterr().out
    assert "physical 0x100000200" in out and "40 of 96 bytes written" in out
    one = " ".join(f"{b:02x}" for b in struct.pack("<f", 1.0))
    assert f"  0x100000200  {one} {one} {one} {one}  |...?...?...?...?|" in out
    assert f"  0x100000220  {one} {one}" in out


def test_dump_of_a_constant_needs_the_compiled_graph(case, capsys):        # InitConstant
    state, model, compiled = compile_external(case)
    lr = str(model.root.find("lr").op.output_i[0])
    capsys.readouterr()
    assert main(["vars", "addr", str(state), lr, "--dump"]) == 0
    assert "nothing written (no init value; give --graph COMPILED to load its constants)" in capsys.readouterr().out
    assert main(["vars", "addr", str(state), lr, "--dump", "--graph", str(compiled)]) == 0
    out = capsys.readouterr().out
    assert "loaded: lr (lr): 4 bytes from 'value' tensor -> 0x100000200" in out
    assert "00 00 00 3f" in out


def test_dump_of_a_graph_that_cannot_be_read_prints_nothing(case, capsys):
    state, _, _ = compile_external(case)
    capsys.readouterr()
    assert main(["vars", "addr", str(state), str(BASE), "--dump", "--graph", str(case / "nothere.pbtxt")]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "nothere.pbtxt: error: cannot read GE dump" in err


def test_graph_without_dump_is_refused(case, capsys):
    state, _, compiled = compile_external(case)
    assert main(["vars", "addr", str(state), str(BASE), "--graph", str(compiled)]) == 2
    assert "--graph: error: --graph loads a compiled graph's weights for --dump" in capsys.readouterr().err


def test_external_var_memory_gives_base_plus_offset(case, capsys):         # test_external_var
    state, _, _ = compile_external(case)
    capsys.readouterr()
    assert main(["vars", "addr", str(state), str(BASE + 1536), "--external-var", "0x70000000:8192"]) == 0
    assert f"physical 0x{0x70000000 + 1536:x}" in capsys.readouterr().out


@pytest.mark.parametrize("ext, addr, why", [
    ("0x70000000:100", BASE, "external var size 100 cannot be smaller than"),
    ("0x70000000:1000000", BASE - 512, f"logic offset {BASE - 512} cannot be smaller than logic base {BASE}"),
    ("0x70000000:1000000", BASE + 1000000, "real offset 1000000 should be smaller than external var size 1000000"),
])
def test_external_var_failures(case, capsys, ext, addr, why):
    state, _, _ = compile_external(case)
    capsys.readouterr()
    assert main(["vars", "addr", str(state), str(addr), "--external-var", ext, "--memory-type", "HBM"]) == 1
    assert why in capsys.readouterr().err


def test_plan_with_external_var_shows_physical_addresses(case, capsys):
    out = case / "p.json"
    assert main(["vars", "plan", str(case / "external.pbtxt"), "--json", str(out),
                 "--external-var", "0x70000000:65536"]) == 0
    doc = json.loads(out.read_text())
    rows = {v["node"]: v for v in doc["graphs"][0]["variables"]}
    assert doc["external_var"]["address"] == 0x70000000 and doc["external_var"]["size"] == 65536
    assert rows["var"]["physical"] == 0x70000000 and rows["lr"]["physical"] == 0x70000000 + rows["lr"]["offset"]
    # GetVarMemoryAddr takes the external-variable branch before the device map, so even the
    # ConstPlaceHolder resolves into the external memory, not to its own address
    assert rows["cph"]["physical"] == 0x70000000 + rows["cph"]["offset"] and rows["cph"]["external"]["address"] == 20000
    assert main(["vars", "plan", str(case / "external.pbtxt"), "--json", str(out), "--external-var", "0x70000000:64"]) == 0
    rows = {v["node"]: v for v in json.loads(out.read_text())["graphs"][0]["variables"]}
    assert rows["var"]["physical"] is None and "cannot be smaller than" in rows["var"]["physical_failure"]


def test_external_var_argument_is_checked(case, capsys):
    assert main(["vars", "plan", str(case / "external.pbtxt"), "--external-var", "big"]) == 2
    assert "--external-var: error: 'big': expected ADDR:SIZE" in capsys.readouterr().err


def test_external_var_failure_helper_agrees_with_addr():
    class VM:
        hbm_rt, external_var_size, var_mem_logic_base = 2, 10, BASE

        def get_var_mem_size(self, rt):
            return 5
    assert external_var_failure(VM(), BASE + 3) is None
