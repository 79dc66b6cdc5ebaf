"""The pack's `runtime:` section (rules/ge/runtime.yaml): checked by `rules check` with located
errors, shown by `rules show`, diffed by `diff`, and a behaviour added by a rule edit."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from engine.cli import main

ROOT = Path(__file__).resolve().parents[1]
DUMP = ROOT / "tests" / "runtime" / "dumps" / "If_AddPointFrom_DiffDataOut.yaml"


def edited(tmp_path: Path, old: str, new: str) -> Path:
    pack = tmp_path / "ge"
    shutil.copytree(ROOT / "rules" / "ge", pack)
    f = pack / "runtime.yaml"
    text = f.read_text()
    assert old in text
    f.write_text(text.replace(old, new, 1))
    return pack


@pytest.mark.parametrize("old,new,message", [
    ("    default: hbm", "    default: hmb", "runtime.yaml:47:14: error: runtime.placements.default: 'hmb' is not a placement"),
    ("when: node is data_like", "when: node is data_likee", "runtime.yaml:57:15: error: unknown op class 'data_likee'"),
    ("      - {name: last_sync,", "      - {name: last_synk,", "runtime.events.stages must be first_sync, last_sync, last_resource_clean"),
    ('identity_addr: "{cond}_Subgraph_{branch}_AddResRef_"', 'identity_addr: "{cond}_Subgraph_{k}"',
     "runtime.names.identity_addr: bad pattern"),
    ("    inner_data: InnerData ", "    inner_dta: InnerData ", "runtime.node_types: unknown key 'inner_dta'"),
])
def test_rules_check_locates_errors(tmp_path, capsys, old, new, message):
    pack = edited(tmp_path, old, new)
    assert main(["rules", "check", str(pack)]) == 2
    assert message in capsys.readouterr().err


def test_rules_show_and_diff(tmp_path, capsys):
    assert main(["rules", "show"]) == 0
    out = capsys.readouterr().out
    assert "runtime (RT2 graph builder):" in out and "runtime/guard/alloc" in out and "FreeFixedFeatureMemory" in out
    pack = edited(tmp_path, 'point_from_inputs: "{cond}_PointFrom_{branch}"', 'point_from_inputs: "{cond}_PF_{branch}"')
    assert main(["diff", str(ROOT / "rules" / "ge"), str(pack), "--fail-on", "rules"]) == 3
    assert "runtime.names: point_from_inputs: {cond}_PointFrom_{branch} → {cond}_PF_{branch}" in capsys.readouterr().out


def test_a_guard_rule_added_by_a_rule_edit(tmp_path, capsys):
    """Teach the pack that Foo1 writes into memory its caller owns (no guarder): the dump's
    If then gets no parent guarder; the PointFromInputs stay, now named by the edited pattern."""
    pack = edited(tmp_path, "      - id: runtime/guard/alloc\n",
                  "      - id: runtime/guard/foo1\n        when: node.type == \"Foo1\"\n        guarder: null\n"
                  "      - id: runtime/guard/alloc\n")
    assert main(["rules", "check", str(pack)]) == 0
    capsys.readouterr()
    assert main(["runtime", "cond", str(DUMP), "--node", "if", "--rules", str(pack)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["conflict_indexes"] == [0]
    assert not [n for n in out["root"]["nodes"] if n["attrs"].get("ReleaseResourceIndex") == 0]
    assert main(["runtime", "cond", str(DUMP), "--node", "if"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [n["type"] for n in out["root"]["nodes"] if n["attrs"].get("ReleaseResourceIndex") == 0] == ["FreeMemory"]


def test_page_bits_is_pack_data(tmp_path, capsys):
    """runtime_memory.allocator.page_bits decides what MoveL2ToL1 calls split: with 1 KiB pages
    a 1 KiB lease from a cached 4 KiB chunk is split, with GE's 64 KiB pages it is not."""
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps({"streams": 1, "ops": [
        {"malloc": {"stream": 0, "size": 4096, "as": "a"}}, {"free": {"block": "a", "stream": 0}},
        {"malloc": {"stream": 0, "size": 1024, "as": "b"}}, {"move_l2_to_l1": {"block": "b"}}]}))
    pack = tmp_path / "ge"
    shutil.copytree(ROOT / "rules" / "ge", pack)
    f = pack / "runtime-memory.yaml"
    splits = []
    for bits in ("16", "10", "64"):
        f.write_text(f.read_text().replace("    page_bits: ", f"    page_bits: {bits} #", 1))
        status = main(["runtime", "memtrace", str(trace), "--rules", str(pack), "--state", "final"])
        out, err = capsys.readouterr()
        if status == 0:
            splits.append(json.loads(out)["steps"][3]["events"][0]["split"])
        else:
            assert status == 2 and "allocator: page_bits must be from 0 to 63, got 64" in err, err
    assert splits == [False, True]
