"""`memconflict rules audit [PACK] --op-ir SOURCE`: the pack's op registry against GE's op IR,
on small IR files written here (torch-npu's docstring form and REG_OP headers)."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from engine.cli import main
from engine.pack.opir import read_op_ir
from harness import VERSION, line_of

ROOT = Path(__file__).resolve().parents[1]
PACK = ROOT / "rules" / "ge"

# torch-npu's auto_generated_ge_raw_ops.py form: a function per op, the REG_OP text in its docstring
RAW_OPS = '''\
def Assign(ref: Tensor, value: Tensor, *, dependencies=[], node_name=None):
    """REG_OP(Assign)\\n
    .INPUT(ref, TensorType({BasicType(), DT_BOOL}))\\n
    .INPUT(value, TensorType({BasicType(), DT_BOOL}))\\n
    .OUTPUT(ref, TensorType({BasicType(), DT_BOOL}))\\n
    .ATTR(validate_shape, Bool, true)\\n
    """
    op = get_default_ge_graph().op.add()
    op.type = "Assign"


def HcomAllReduce(x: Tensor, *, reduction: str, group: str, dependencies=[], node_name=None):
    """REG_OP(HcomAllReduce)\\n
    .INPUT(x, TensorType({DT_FLOAT}))\\n
    .OUTPUT(y, TensorType({DT_FLOAT}))\\n
    .REQUIRED_ATTR(reduction, String)\\n
    """


def ScatterAdd(var: Tensor, indices: Tensor, updates: Tensor, *, dependencies=[], node_name=None):
    """REG_OP(ScatterAdd)\\n
    .INPUT(var, TensorType({DT_FLOAT}))\\n
    .INPUT(indices, TensorType::IndexNumberType())\\n
    .INPUT(updates, TensorType({DT_FLOAT}))\\n
    .OUTPUT(var, TensorType({DT_FLOAT}))\\n
    """


def Concat(x: List[Tensor], concat_dim: Tensor, *, dependencies=[], node_name=None):
    """REG_OP(Concat)\\n
    .DYNAMIC_INPUT(x, TensorType::BasicType())\\n
    .INPUT(concat_dim, TensorType::IndexNumberType())\\n
    .OPTIONAL_INPUT(hint, TensorType::IndexNumberType())\\n
    .OUTPUT(y, TensorType::BasicType())\\n
    """
'''

HEADER = """\
// a GE op proto header
REG_OP(Assign)
    .INPUT(ref, TensorType::ALL())
    .INPUT(value, TensorType::ALL())
    .OUTPUT(ref, TensorType::ALL())
    .OP_END_FACTORY_REG(Assign)

REG_OP(HcomAllReduce)
    .INPUT(x, TensorType::ALL())
    .OUTPUT(y, TensorType::ALL())
    .OP_END_FACTORY_REG(HcomAllReduce)
"""


def small_pack(tmp_path: Path, ops: str, audit: str) -> Path:
    """The GE pack with its op registry and audit section replaced."""
    pack = tmp_path / "pack"
    shutil.copytree(PACK, pack)
    text = (pack / "ops.yaml").read_text()
    start = text.index("\nops:\n")
    (pack / "ops.yaml").write_text(text[:start] + "\nops:\n" + ops)
    (pack / "audit.yaml").write_text(audit)
    return pack


OPS = """\
  Assign:
    signature: Assign(ref!, value) -> (ref)
  HcomAllReduce:
    signature: HcomAllReduce(x) -> (y)
    engine: ops_kernel_info_hccl
  ScatterAdd:
    signature: ScatterAdd(var, indices, updates) -> (var2)
  Concat:
    signature: Concat(x*, concat_dim) -> (y)
"""
AUDIT = """\
op_ir_audit:
  collectives: {engine: ops_kernel_info_hccl, ir_prefix: Hcom}
  exceptions: []
"""


def audit(capsys, pack, ir, *extra):
    code = main(["rules", "audit", str(pack), "--op-ir", str(ir), "--json", "-", *extra])
    out = capsys.readouterr()
    return code, (json.loads(out.out) if out.out.startswith("{") else None), out.err


def test_reads_both_forms(tmp_path):
    (tmp_path / "raw.py").write_text(RAW_OPS)
    ir = read_op_ir(tmp_path / "raw.py")
    assert list(ir.ops) == ["Assign", "Concat", "HcomAllReduce", "ScatterAdd"]
    assert ir.ops["Assign"].refs == ["ref"] and ir.ops["ScatterAdd"].refs == ["var"]
    assert ir.ops["Concat"].signature() == "Concat(x*, concat_dim, hint?) -> (y)"
    assert ir.ops["ScatterAdd"].loc.line == line_of(tmp_path / "raw.py", "REG_OP(ScatterAdd)")
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "ops.h").write_text(HEADER)
    ir = read_op_ir(tmp_path / "inc")
    assert ir.files == 1 and ir.ops["Assign"].signature() == "Assign(ref!, value) -> (ref)"
    assert ir.ops["HcomAllReduce"].outputs == [("y", "")]


def test_each_check_located_on_the_pack_side(tmp_path, capsys):
    (tmp_path / "raw.py").write_text(RAW_OPS)
    pack = small_pack(tmp_path, OPS, AUDIT)
    code, data, _ = audit(capsys, pack, tmp_path / "raw.py")
    assert code == 0
    by = {}
    for f in data["findings"]:
        by.setdefault((f["check"], f["op"]), f)
    sig_line = line_of(pack / "ops.yaml", "signature: ScatterAdd(")
    f = by[("ref-not-written", "ScatterAdd")]
    assert f["loc"].startswith(f"{pack / 'ops.yaml'}:{sig_line}:") and "'var'" in f["message"]
    assert f["ir_loc"].endswith(f"raw.py:{line_of(tmp_path / 'raw.py', 'REG_OP(ScatterAdd)')}:8")
    assert ("port-name", "ScatterAdd") in by            # outputs (var2) against (var)
    assert "(var2)" in by[("port-name", "ScatterAdd")]["message"]
    assert ("port-count", "Concat") in by                # the optional input `hint` is missing
    assert ("collective", "HcomAllReduce") not in by and ("ref-not-written", "Assign") not in by
    unknown = {op for c, op in by if c == "unknown-op"}
    assert {"Data", "NetOutput", "Const"} <= unknown and "Assign" not in unknown
    assert data["ir"]["ops"] == 4 and data["ir"]["ops_with_ref_outputs"] == 2


def test_written_not_ref_and_collective(tmp_path, capsys):
    (tmp_path / "raw.py").write_text(RAW_OPS)
    ops = OPS.replace("HcomAllReduce(x) -> (y)\n    engine: ops_kernel_info_hccl",
                      "HcomAllReduce(x!) -> (y)").replace("Concat(x*, concat_dim) -> (y)",
                                                          "Concat(x*, concat_dim, hint?) -> (y)")
    ops += "  Foo:\n    signature: Foo(x) -> (y)\n    engine: ops_kernel_info_hccl\n"
    code, data, _ = audit(capsys, small_pack(tmp_path, ops, AUDIT), tmp_path / "raw.py")
    checks = {(f["check"], f["op"]) for f in data["findings"]}
    assert ("written-not-ref", "HcomAllReduce") in checks and ("collective", "HcomAllReduce") in checks
    assert ("unknown-op", "Foo") in checks and not any(op == "Concat" for _, op in checks)


def test_exceptions_accept_with_reason_and_go_stale(tmp_path, capsys):
    (tmp_path / "raw.py").write_text(RAW_OPS)
    ops = OPS.replace("ScatterAdd(var, indices, updates) -> (var2)", "ScatterAdd(var!, indices, updates) -> (var)")
    ops = ops.replace("Concat(x*, concat_dim) -> (y)", "Concat(x*, concat_dim, hint?) -> (y)")
    pack = small_pack(tmp_path, ops, AUDIT)
    _, data, _ = audit(capsys, pack, tmp_path / "raw.py")
    unknown = sorted(f["op"] for f in data["findings"])
    assert all(f["check"] == "unknown-op" for f in data["findings"])
    (pack / "audit.yaml").write_text(AUDIT.replace("exceptions: []", "exceptions:\n"
                                     f"    - {{check: unknown-op, ops: {json.dumps(unknown + ['Gone'])}, "
                                     "reason: GE-internal types}\n"))
    code, data, _ = audit(capsys, pack, tmp_path / "raw.py", "--fail-on", "findings")
    assert [(f["check"], f["op"]) for f in data["findings"]] == [("unused-exception", "Gone")]
    assert code == 3
    assert {f["op"] for f in data["excepted"]} == set(unknown)
    assert all(f["reason"] == "GE-internal types" and f["exception_loc"].endswith("audit.yaml:4:7")
               for f in data["excepted"])


def test_text_output_and_bad_input(tmp_path, capsys):
    (tmp_path / "raw.py").write_text(RAW_OPS)
    pack = small_pack(tmp_path, OPS, AUDIT)
    assert main(["rules", "audit", str(pack), "--op-ir", str(tmp_path / "raw.py")]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith(f"ge {VERSION} against ") and "4 IR ops (2 with ref outputs)" in out
    assert f"{pack / 'ops.yaml'}:{line_of(pack / 'ops.yaml', 'signature: ScatterAdd(')}:" in out
    (tmp_path / "empty.py").write_text("print('no ops here')\n")
    assert main(["rules", "audit", str(pack), "--op-ir", str(tmp_path / "empty.py")]) == 2
    assert "no REG_OP(...) definition found" in capsys.readouterr().err
    assert main(["rules", "audit", str(pack), "--op-ir", str(tmp_path / "missing")]) == 2
    (pack / "audit.yaml").write_text(AUDIT.replace("exceptions: []", "exceptions:\n"
                                                   "    - {check: unknown-opp, ops: [X], reason: r}\n"))
    assert main(["rules", "audit", str(pack), "--op-ir", str(tmp_path / "raw.py")]) == 2
    err = capsys.readouterr().err
    assert "audit.yaml:4:" in err and "unknown check 'unknown-opp'" in err and "unknown-op" in err


REAL_IR = os.environ.get("MEMCONFLICT_OP_IR", "")


@pytest.mark.skipif(not REAL_IR or not Path(REAL_IR).exists(),
                    reason="set MEMCONFLICT_OP_IR to torch-npu's auto_generated_ge_raw_ops.py "
                           "(pip download --no-deps torch-npu; unzip the wheel)")
def test_default_pack_is_clean_against_torch_npu(capsys):
    code, data, _ = audit(capsys, PACK, REAL_IR, "--fail-on", "findings")
    assert code == 0 and data["findings"] == [] and data["counts"]["excepted"] > 0


def test_sarif_has_a_result_per_finding_and_exceptions_as_suppressions(tmp_path, capsys):
    """`rules audit --sarif F`: valid SARIF 2.1.0; findings located in the pack with the IR
    definition beside them; accepted exceptions suppressed with their reason."""
    import jsonschema
    schema = json.loads((ROOT / "tests" / "data" / "sarif-schema-2.1.0.json").read_text())
    (tmp_path / "raw.py").write_text(RAW_OPS)
    pack = small_pack(tmp_path, OPS, AUDIT)
    _, data, _ = audit(capsys, pack, tmp_path / "raw.py")
    unknown = sorted(f["op"] for f in data["findings"] if f["check"] == "unknown-op")
    assert unknown
    (pack / "audit.yaml").write_text(AUDIT.replace("exceptions: []", "exceptions:\n"
                                     f"    - {{check: unknown-op, ops: {json.dumps(unknown)}, reason: GE-internal types}}\n"))
    sarif = tmp_path / "a.sarif"
    assert main(["rules", "audit", str(pack), "--op-ir", str(tmp_path / "raw.py"), "--sarif", str(sarif),
                 "--json", str(tmp_path / "a.json")]) == 0
    log = json.loads(sarif.read_text())
    assert not list(jsonschema.Draft4Validator(schema).iter_errors(log))
    run = log["runs"][0]
    data = json.loads((tmp_path / "a.json").read_text())
    open_ = [r for r in run["results"] if "suppressions" not in r]
    suppressed = [r for r in run["results"] if "suppressions" in r]
    assert len(open_) == len(data["findings"]) and len(suppressed) == len(data["excepted"]) == len(unknown)
    assert all(s["suppressions"][0]["justification"] == "GE-internal types" for s in suppressed)
    for r, f in zip(open_, data["findings"]):
        phys = r["locations"][0]["physicalLocation"]
        assert r["ruleId"] == f["check"] and f["loc"].split(":")[1] == str(phys["region"]["startLine"])
        assert phys["artifactLocation"]["uriBaseId"] == "PACKROOT"
    assert {r["id"] for r in run["tool"]["driver"]["rules"]} >= {r["ruleId"] for r in run["results"]}
