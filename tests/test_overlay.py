"""Pack overlays (engine/pack/overlay.py): a pack with `base:` holds only add /
replace / remove operations; the loader, `rules check`, `run` and `diff` read it
as the merged pack, every entry citing the file that wrote it last."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from harness import A2A, errors_of, line_of

from engine.cli import main
from engine.core.errors import Collector
from engine.core.resources import default_pack_dir
from engine.pack.overlay import parse_path, resolve_pack
from engine.passes.catalog import load_pack
from test_diff_util import diff

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = 'name: ov\nversion: "0.1.0"\nschema_version: 1\nbase: {base}\ninclude: [{files}]\n'



def overlay(root: Path, files: dict[str, str], base: str = "../pack", name: str = "ov") -> Path:
    """An overlay pack folder `root/name` with the given files (all included)."""
    d = root / name
    d.mkdir()
    (d / "pack.yaml").write_text(MANIFEST.format(base=base, files=", ".join(files)), encoding="utf-8")
    for f, text in files.items():
        (d / f).write_text(text, encoding="utf-8")
    return d


def rw(pack):
    return pack.configs["rw_conflict"]


def ids(rules) -> list[str]:
    return [r.id for r in rules]


# ---- operations ---------------------------------------------------------------------------
def test_rule_added_at_a_position_replaced_and_removed(pack_copy):
    ov = overlay(pack_copy.parent, {"rw.yaml": """\
overlay:
  - add: rw_conflict.output_rules
    before: rw/out/root-data
    items:
      - id: rw/out/early
        when: node is identity_like
        value: SoftRead
  - add: rw_conflict.input_rules
    after: rw/in/phony
    items:
      - {id: rw/in/a, value: ReadOnly, when: node is data}
      - {id: rw/in/b, value: ReadOnly, when: node is data}
  - replace: rw_conflict.output_rules[rw/out/const]
    value: {id: rw/out/const, when: node is rw_const, value: ReadOnly}
  - remove: rw_conflict.output_rules[rw/out/ref-switch]
"""})
    base, pack = rw(load_pack(pack_copy)), rw(load_pack(ov))
    out = ids(base.output_rules)
    out.insert(1, "rw/out/early")
    out.remove("rw/out/ref-switch")
    assert ids(pack.output_rules) == out
    inp = ids(base.input_rules)
    assert ids(pack.input_rules) == inp[:2] + ["rw/in/a", "rw/in/b"] + inp[2:]
    const = next(r for r in pack.output_rules if r.id == "rw/out/const")
    assert str(const.value) == "ReadOnly"
    assert "rw/out/ref-switch" not in load_pack(ov).rule_ids


def test_positioned_rule_decides_first_match(pack_copy, tmp_path):
    """The README's collective: before the catch-all rw/in/read it fires, after it never does."""
    g = tmp_path / "a2a.yaml"
    g.write_text(A2A, encoding="utf-8")
    rule = "      - {id: rw/in/alltoall-inplace, when: node.type == \"HcomAllToAllInplace\", value: ScopeWriteable}\n"
    inserted = {}
    for where in ("before", "after"):
        ov = overlay(tmp_path, {"rw.yaml": f"overlay:\n  - add: rw_conflict.input_rules\n    {where}: rw/in/read\n"
                                           f"    items:\n{rule}"}, name=f"ov-{where}")
        report = tmp_path / f"{where}.json"
        assert main(["run", str(g), "--rules", str(ov), "--passes", "mem_rw_conflict", "--quiet",
                     "--report-json", str(report)]) == 0
        inserted[where] = json.loads(report.read_text())["insertions"]
    (ins,) = inserted["before"]
    assert ins["type"] == "Identity" and ins["pass"] == "mem_rw_conflict"
    assert ins["producer"].startswith("c:") and inserted["after"] == []
    assert any(s["rule"] == "rw/in/alltoall-inplace" and s["loc"].startswith("ov-before/rw.yaml:")
               for s in ins["explanation"])


def test_table_keys_added_replaced_removed(pack_copy):
    ov = overlay(pack_copy.parent, {"tables.yaml": """\
overlay:
  - replace: rw_conflict.matrix[ReadOnly][Writeable]
    value: insert_identity
  - add: op_classes
    value:
      my_class: {types: [MyOp], doc: an op class of the overlay}
  - remove: op_classes.phony
  - remove: rw_conflict.input_rules[rw/in/phony]
  - add: ops.Assign
    value: {engine: AICPU}
  - remove: layout_conflict.checkers.user_out_unrefresh_out
  - remove: isolation_alternatives[layout/user_out_unrefresh_out]     # the checker's rejected alternatives
  - remove: layout_conflict.registrations
    items: [{a: CONTINUOUS_INPUT, b: NOPADDING_CONTINUOUS_INPUT, checker: continuous_in_in}]
  - add: layout_conflict.absolute_conflict
    items: [[CONTINUOUS_INPUT, NOPADDING_CONTINUOUS_INPUT]]
""", "more.yaml": "overlay:\n  - remove: layout_conflict.registrations\n    items:\n"
                  "      - {a: USER_MEMORY_OUTPUT, b: UNSUPPORTED_ADDRESS_REFRESH_OPERATOR_OUTPUT, checker: user_out_unrefresh_out}\n"})
    base, pack = load_pack(pack_copy), load_pack(ov)
    assert rw(base).matrix[("ReadOnly", "Writeable")] == "do_nothing"
    assert rw(pack).matrix[("ReadOnly", "Writeable")] == "insert_identity"
    assert rw(pack).matrix_cites[("ReadOnly", "Writeable")].loc.file == "ov/tables.yaml"
    assert pack.classes["my_class"].types == {"MyOp"} and "phony" not in pack.classes
    assert pack.ops["Assign"].engine == "AICPU" and base.ops["Assign"].engine != "AICPU"
    raw = pack.sections["layout_conflict"]
    assert "user_out_unrefresh_out" not in raw["checkers"]
    assert ["CONTINUOUS_INPUT", "NOPADDING_CONTINUOUS_INPUT"] in raw["absolute_conflict"]
    assert len(raw["registrations"]) == len(base.sections["layout_conflict"]["registrations"]) - 2


def test_pipeline_and_passes_by_pass_id(pack_copy):
    ov = overlay(pack_copy.parent, {"passes.yaml": """\
overlay:
  - replace: pipeline[graph_lint].stage
    value: prepare
  - remove: pipeline[hccl_memcpy#2]
  - remove: pipeline[inplace_support_check].gate
  - add: pipeline
    after: memcpy_addr_async
    items: [{pass: mark_same_addr, stage: stage2}]
  - replace: passes.graph_lint.on_failure
    value: fail
  - add: pipeline[mem_inplace]
    value: {gate: option_true("context.hostExecFlag")}
"""})
    base, pack = load_pack(pack_copy), load_pack(ov)
    steps = [(s.pass_id, s.stage, str(s.gate) if s.gate else None) for s in pack.pipeline]
    want = [(s.pass_id, s.stage, str(s.gate) if s.gate else None) for s in base.pipeline]
    want[0] = ("graph_lint", "prepare", None)
    want.remove(next(s for s in want if s[0] == "hccl_memcpy" and s[1] == "stage1"))
    k = next(i for i, s in enumerate(want) if s[0] == "inplace_support_check")
    want[k] = ("inplace_support_check", "stage2", None)
    want.insert(next(i for i, s in enumerate(want) if s[0] == "memcpy_addr_async") + 1, ("mark_same_addr", "stage2", None))
    want[-1] = ("mem_inplace", "build", 'option_true("context.hostExecFlag")')
    assert steps == want
    assert pack.passes["graph_lint"].on_failure == "fail"


def test_new_sections_and_scalar_fields(pack_copy):
    """A section the base lacks is just written; a manifest field replaces the base's."""
    ov = overlay(pack_copy.parent, {"x.yaml": "overlay:\n  - replace: inplace.ability_attr\n    value: _my_ability\n"})
    (ov / "pack.yaml").write_text((ov / "pack.yaml").read_text() + "description: an overlay\n")
    pack = load_pack(ov)
    assert (pack.name, pack.version, pack.description) == ("ov", "0.1.0", "an overlay")
    assert pack.sections["inplace"]["ability_attr"] == "_my_ability"
    assert pack.files[-1] == "ov/x.yaml" and pack.files[0].startswith("pack/")


def test_chained_bases(pack_copy):
    mid = overlay(pack_copy.parent, {"a.yaml": "overlay:\n  - replace: inplace.ability_attr\n    value: _mid\n"
                                                 "  - replace: rw_conflict.reference_attr\n    value: _pi\n"}, name="mid")
    top = overlay(pack_copy.parent, {"b.yaml": "overlay:\n  - replace: inplace.ability_attr\n    value: _top\n"},
                  base="../mid", name="top")
    pack = load_pack(top)
    raw = pack.sections
    assert raw["inplace"]["ability_attr"] == "_top" and raw["rw_conflict"]["reference_attr"] == "_pi"
    assert pack.files[-2:] == ["mid/a.yaml", "top/b.yaml"]
    res = resolve_pack(top, Collector())
    assert [p.name for p in res.chain] == ["top", "mid", "pack"] and mid in res.chain


# ---- locations -------------------------------------------------------------------------------
def test_merged_entries_cite_the_file_that_wrote_them(pack_copy):
    ov = overlay(pack_copy.parent, {"rw.yaml": """\
overlay:
  - add: rw_conflict.output_rules
    before: rw/out/var-like
    items:
      - id: rw/out/early
        value: SoftRead
  - replace: hccl_rewrites.hccl_memcpy.functions.shape_branch
    value:
      params: [n]
      body: n is shape_rank
  - add: rw_conflict.output_rules[rw/out/const]
    value: {doc: only the doc is the overlay's}
"""})
    pack = load_pack(ov)
    f = ov / "rw.yaml"
    early = pack.rule_ids["rw/out/early"]
    assert (early.file, early.line) == ("ov/rw.yaml", line_of(f, "id: rw/out/early"))
    rules = {r.id: r for r in rw(pack).output_rules}
    assert rules["rw/out/early"].loc.file == "ov/rw.yaml"
    assert rules["rw/out/var-like"].loc == rw(load_pack(pack_copy)).output_rules[0].loc     # inherited
    assert rules["rw/out/var-like"].loc.file == "pack/rw.yaml"
    # Note [locations]: a rule of which only the doc changed keeps citing the text of its logic
    assert rules["rw/out/const"].loc.file == "pack/rw.yaml" and rules["rw/out/const"].doc == "only the doc is the overlay's"
    body = pack.sections["hccl_rewrites"]["hccl_memcpy"]["functions"]["shape_branch"]["body"]
    assert body.loc.file == "ov/rw.yaml" and body.loc.line == line_of(f, "body: n is shape_rank")


# ---- errors ----------------------------------------------------------------------------------
def test_unknown_rule_id_is_a_located_error(pack_copy):
    ov = overlay(pack_copy.parent, {"rw.yaml": "overlay:\n  - remove: rw_conflict.output_rules[rw/out/cnst]\n"})
    msg = errors_of(ov)
    assert "ov/rw.yaml:2:38: error: unknown id 'rw/out/cnst' in rw_conflict.output_rules" in msg
    assert "hint: did you mean 'rw/out/const'?" in msg


@pytest.mark.parametrize("op, message, hint", [
    ("  - replace: rw_conflict.matrx.ReadOnly\n    value: {}\n", "2:26: error: unknown key 'matrx' in rw_conflict",
     "did you mean 'matrix'?"),
    ("  - remove: rw_confict\n", "2:13: error: unknown section 'rw_confict' in the pack", "did you mean 'rw_conflict'?"),
    ("  - add: rw_conflict.output_rules\n    before: rw/out/nope\n    items: [{id: x/y, value: SoftRead}]\n",
     "3:13: error: unknown id 'rw/out/nope' in rw_conflict.output_rules", "hint: "),
    ("  - add: rw_conflict.output_rules\n    items: [{id: rw/out/const, value: SoftRead}]\n",
     "3:13: error: rw_conflict.output_rules already has an item 'rw/out/const'", "replace: rw_conflict.output_rules[rw/out/const]"),
    ("  - add: op_classes\n    value: {phony: {types: [X]}}\n", "3:13: error: 'op_classes' already has 'phony'",
     "replace: op_classes.phony"),
    ("  - remove: layout_conflict.absolute_conflict\n    items: [[A, B]]\n",
     "3:13: error: 'layout_conflict.absolute_conflict' has no item equal to this one", "copy the item exactly"),
    ("  - remove: layout_conflict.absolute_conflict[A]\n",
     "2:47: error: 'layout_conflict.absolute_conflict' is a list without ids", "items:"),
    ("  - replace: rw_conflict.reference_attr\n    valeu: x\n", "3:5: error: overlay operation: unknown key 'valeu'",
     "did you mean 'value'?"),
    ("  - add: op_classes\n    before: phony\n    value: {x: {types: [X]}}\n",
     "2:5: error: 'op_classes' is a mapping: add its new keys with `value: {KEY: ...}`", "are for lists"),
    ("  - add: pipeline\n    value: {pass: mark_same_addr, stage: stage2}\n",
     "2:5: error: 'pipeline' is a list: add to it with `items: [...]`", "before:` or `after:` an id"),
    ("  - delete: rw_conflict\n", "2:5: error: an overlay operation needs exactly one of add, replace, remove", "- remove: PATH"),
])
def test_operation_errors(pack_copy, op, message, hint):
    ov = overlay(pack_copy.parent, {"o.yaml": "overlay:\n" + op})
    msg = errors_of(ov)
    assert f"ov/o.yaml:{message}" in msg and hint in msg


def test_a_quoted_path_points_past_its_quote(pack_copy):
    ov = overlay(pack_copy.parent, {"o.yaml": "overlay:\n  - remove: 'pipeline[graph_lnt]'\n"})
    assert "ov/o.yaml:2:23: error: unknown id 'graph_lnt' in pipeline" in errors_of(ov)


def test_a_base_section_written_again_is_an_error(pack_copy):
    ov = overlay(pack_copy.parent, {"rw.yaml": "rw_conflict: {}\n"})
    msg = errors_of(ov)
    line = line_of(pack_copy / "rw.yaml", "rw_conflict:")
    assert f"ov/rw.yaml:1:1: error: section 'rw_conflict' is already defined by the base pack (at pack/rw.yaml:{line}:1)" in msg
    assert "change it with `overlay:` operations" in msg


def test_bad_base_path(pack_copy):
    ov = overlay(pack_copy.parent, {"o.yaml": "overlay: []\n"}, base="../nowhere")
    msg = errors_of(ov)
    assert "ov/pack.yaml:4:7: error: base pack '../nowhere' not found: nowhere has no pack.yaml" in msg
    assert "hint: give the base pack's folder relative to this pack.yaml" in msg


def test_base_cycle(pack_copy):
    a = overlay(pack_copy.parent, {"o.yaml": "overlay: []\n"}, base="../b", name="a")
    overlay(pack_copy.parent, {"o.yaml": "overlay: []\n"}, base="../a", name="b")
    msg = errors_of(a)
    assert "b/pack.yaml:4:7: error: base packs form a cycle: a → b → a" in msg


def test_overlay_operations_need_a_base(pack_copy):
    (pack_copy / "extra.yaml").write_text("overlay:\n  - remove: rw_conflict\n", encoding="utf-8")
    (pack_copy / "pack.yaml").write_text((pack_copy / "pack.yaml").read_text() + "  - extra.yaml\n")
    assert "pack/extra.yaml:1:1: error: `overlay:` operations need a base pack" in errors_of(pack_copy)


def test_paths():
    assert parse_path("rw_conflict.matrix[ReadOnly][Writeable]") == ["rw_conflict", "matrix", "ReadOnly", "Writeable"]
    assert parse_path("pipeline[hccl_memcpy#2].gate") == ["pipeline", "hccl_memcpy#2", "gate"]
    assert parse_path("a.steps[m].rules[hccl/x.y]") == ["a", "steps", "m", "rules", "hccl/x.y"]
    assert parse_path("a..b") is None and parse_path("[x]") is None and parse_path("a[b") is None


# ---- the shipped overlay: rules/ge-doc -------------------------------------------------------
def _plain(v):
    return json.loads(json.dumps(v))


def test_ge_doc_is_rules_ge_with_the_design_summary_edits():
    ge = resolve_pack(ROOT / "rules" / "ge", Collector())
    doc = resolve_pack(ROOT / "rules" / "ge-doc", Collector())
    want = _plain(ge.sections)
    # 1. HcclMemcpyPass sibling direction
    fn = want["hccl_rewrites"]["hccl_memcpy"]["functions"]["later_siblings"]
    fn["body"] = fn["body"].replace("s.node.id > h.node.id", "s.node.id < h.node.id")
    got_fn = doc.sections["hccl_rewrites"]["hccl_memcpy"]["functions"]["later_siblings"]
    assert "design summary" in got_fn["doc"]
    fn["doc"] = str(got_fn["doc"])
    step = want["hccl_rewrites"]["hccl_memcpy"]["steps"][0]
    rule = next(r for r in step["rules"] if r["id"] == "hccl/later-sibling")
    rule["doc"] = "a sibling consumer runs before the HCCL writer (smaller topo id) — the design summary's reading"
    # 2. the absolute layout tables
    lay = want["layout_conflict"]
    lay["absolute_no_conflict"].append(["USER_MEMORY_INPUT", "NORMAL_INPUT"])
    lay["absolute_conflict"] += [["IMMUTABLE_ADDRESS_OUTPUT", "NORMAL_INPUT"], ["CONTINUOUS_INPUT", "NOPADDING_CONTINUOUS_INPUT"]]
    lay["registrations"].remove({"a": "CONTINUOUS_INPUT", "b": "NOPADDING_CONTINUOUS_INPUT", "checker": "continuous_in_in"})
    # 3. the one-consumer gate, first of the output rules
    want["rw_conflict"]["output_rules"].insert(0, {
        "id": "rw/out/one-consumer", "doc": "an output with at most one consumer is never isolated (the summary's gate)",
        "when": "count(consumers(anchor)) <= 1", "value": "SoftRead"})
    # 4. the pipeline
    pipe = want["pipeline"]
    pipe.remove({"pass": "graph_lint", "stage": "normalize"})
    next(s for s in pipe if s["pass"] == "inplace_support_check").pop("gate")
    at = next(i for i, s in enumerate(pipe) if s["pass"] == "memcpy_addr_async")
    pipe.insert(at + 1, {"pass": "mark_same_addr", "stage": "stage2"})
    pipe.append({"pass": "graph_lint", "stage": "build"})
    assert _plain(doc.sections) == want
    manifest = _plain(doc.manifest)
    assert (manifest["name"], manifest["base"], manifest["include"]) == ("ge-doc", "../ge", _plain(ge.manifest)["include"])
    # every edit cites the overlay, everything else rules/ge
    files = {loc.file for loc in load_pack(ROOT / "rules" / "ge-doc").rule_ids.values()}
    assert {f.split("/")[-2] for f in files} == {"ge", "ge-doc"}
    total = sum(len(p.read_text(encoding="utf-8").splitlines()) for p in (ROOT / "rules" / "ge-doc").iterdir())
    assert total <= 300


def test_ge_doc_loads_like_rules_ge_apart_from_the_edits():
    ge, doc = load_pack(ROOT / "rules" / "ge"), load_pack(ROOT / "rules" / "ge-doc")
    assert doc.classes == ge.classes and doc.ops == ge.ops and doc.passes == ge.passes and doc.surgery == ge.surgery
    assert set(doc.rule_ids) == set(ge.rule_ids) | {"rw/out/one-consumer"}
    assert doc.configs["var_policy"].policy == ge.configs["var_policy"].policy
    assert doc.rule_ids["rw/out/one-consumer"].file.endswith("rules/ge-doc/rw.yaml")
    assert doc.rule_ids["rw/out/var-like"] == ge.rule_ids["rw/out/var-like"]


# ---- the diff reads the resolved pack ---------------------------------------------------------
def test_diff_of_an_overlay_against_its_base(pack_copy):
    ov = overlay(pack_copy.parent, {"rw.yaml": "overlay:\n  - replace: rw_conflict.matrix[ReadOnly][Writeable]\n"
                                               "    value: insert_identity\n"})
    d = diff(pack_copy, ov)
    rule = [c for c in d.changes if not c.cosmetic]
    (c,) = rule
    # the snapshot copies the base next to the overlay (Note [snapshot])
    assert c.id == "rw_conflict.matrix[ReadOnly][Writeable]" and c.new.loc.file.endswith("/ov/rw.yaml")
    assert c.old.loc.file.endswith("/pack/rw.yaml")


def test_rev_path_overlay_reads_its_base_at_that_revision(tmp_path, monkeypatch, capsys):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    r = tmp_path / "repo"
    (r / "rules").mkdir(parents=True)
    shutil.copytree(default_pack_dir(), r / "rules" / "base")
    overlay(r / "rules", {"rw.yaml": "overlay:\n  - replace: rw_conflict.matrix[ReadOnly][Writeable]\n"
                                     "    value: insert_identity\n"}, base="../base")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    for args in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "packs"]):
        subprocess.run(git + args, cwd=r, check=True, capture_output=True)
    shutil.rmtree(r / "rules" / "base")          # the working tree is not read for REV:path
    monkeypatch.chdir(r)
    assert main(["diff", "HEAD:rules/ov", "HEAD:rules/ov", "--quiet"]) == 0
    code = main(["diff", "HEAD:rules/ov", "rules/ov", "--quiet"])
    assert code == 2 and "rules/ov/pack.yaml:4:7: error: base pack '../base' not found" in capsys.readouterr().err
    subprocess.run(["git", "checkout", "-q", "--", "rules/base"], cwd=r, check=True)
    assert main(["diff", "HEAD:rules/base", "HEAD:rules/ov", "--json", "d.json", "--quiet"]) == 0
    doc = json.loads((r / "d.json").read_text())
    (item,) = [i for i in doc["rules"]["items"] if not i["cosmetic"]]
    line = line_of(default_pack_dir() / "rw.yaml", "ReadOnly:      {")
    assert (item["old"]["loc"], item["new"]["loc"]) == (f"HEAD:rules/base/rw.yaml:{line}", "HEAD:rules/ov/rw.yaml:3")
    assert not list(r.glob("**/memconflict-diff-*"))


def test_commands_read_an_overlay(capsys):
    doc, ge = ROOT / "rules" / "ge-doc", ROOT / "rules" / "ge"
    assert main(["rules", "check", str(doc)]) == 0
    assert "pack ge-doc 1.0.0 is valid" in capsys.readouterr().out
    assert main(["pipeline", str(doc)]) == 0
    steps = [line.split()[2] for line in capsys.readouterr().out.splitlines() if line[:1].isspace() and line.split()[0].isdigit()]
    assert steps[-1] == "graph_lint" and "mark_same_addr" in steps
    assert main(["rules", "show", str(doc)]) == 0
    shown = capsys.readouterr().out
    assert "rw/out/one-consumer" in shown and "rules/ge/layout.yaml" in shown
    train = str(ROOT / "examples" / "train_step.pbtxt")
    plans = []
    for pack in (doc, ge):                      # variables.yaml comes from the base
        assert main(["vars", "plan", train, "--rules", str(pack)]) == 0
        plans.append(capsys.readouterr().out)
    assert plans[0] == plans[1] and plans[0]
