"""The semantic pack diff: one test per kind of change, on edited copies of the
shipped pack. Each change cites file:line in both versions."""
from __future__ import annotations

from harness import VERSION
from test_diff_util import by_id, diff, edited_pack, shipped


def _line(path, needle: str) -> int:
    for k, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if needle in line:
            return k
    raise AssertionError(needle)


def test_identical_packs_have_no_changes():
    d = diff(shipped(), shipped())
    assert d.changes == [] and d.semantic() == []


def test_op_class_types_changed_field_by_field(tmp_path):
    new = edited_pack(tmp_path, {"ops.yaml": [("types: [Const, Constant, ConstPlaceHolder]",
                                               "types: [Const, Constant, ConstPlaceHolder, FileConstant]")]})
    c = by_id(diff(shipped(), new))["op_classes.rw_const"]
    assert c.kind == "changed" and c.details == (("+", "types: FileConstant"),)
    assert c.old.loc.line == c.new.loc.line == _line(new / "ops.yaml", "  rw_const:")
    assert "class:rw_const" in c.new_refs and c.new.loc.file.endswith("p/ops.yaml")


def test_op_registry_entries_added_removed_changed(tmp_path):
    text = (shipped() / "ops.yaml").read_text()
    assert "\nops:\n" in text
    new = edited_pack(tmp_path, {"ops.yaml": [("\nops:\n", "\nops:\n  MyNewOp:\n    signature: MyNewOp(x!) -> (x)\n"
                                              "    engine: AIcoreEngine\n")]})
    d = by_id(diff(shipped(), new))
    c = d["ops.MyNewOp"]
    assert c.kind == "added" and c.summary == "op MyNewOp added" and c.old is None
    assert "signature: MyNewOp(x!) -> (x)" in c.new.text


def test_matrix_cell_change_is_one_cell_with_its_location(tmp_path):
    old_row = "ReadOnly:      {ReadOnly: do_nothing, Writeable: do_nothing, ScopeWriteable: insert_identity}"
    new = edited_pack(tmp_path, {"rw.yaml": [(old_row, old_row.replace("Writeable: do_nothing", "Writeable: insert_identity"))]})
    d = diff(shipped(), new)
    assert [c.id for c in d.changes] == ["rw_conflict.matrix[ReadOnly][Writeable]"]
    c = d.changes[0]
    assert c.summary == "do_nothing → insert_identity"
    line = _line(new / "rw.yaml", old_row.split("{")[0].strip() + "      {")
    assert c.old.loc.line == c.new.loc.line == line
    assert "cell:matrix[ReadOnly][Writeable]" in c.new_refs


def test_combine_input_cell_change(tmp_path):
    row = "Writeable:      {ReadOnly: Writeable, Writeable: Writeable, ScopeWriteable: Invalid}"
    new = edited_pack(tmp_path, {"rw.yaml": [(row, row.replace("ScopeWriteable: Invalid", "ScopeWriteable: ScopeWriteable"))]})
    c = by_id(diff(shipped(), new))["rw_conflict.combine_input[Writeable][ScopeWriteable]"]
    assert c.summary == "Invalid → ScopeWriteable"


def test_layout_pairs_move_between_tables(tmp_path):
    new = edited_pack(tmp_path, {"layout.yaml": [
        ("    - [IMMUTABLE_ADDRESS_OUTPUT, CONTINUOUS_INPUT]\n",
         "    - [IMMUTABLE_ADDRESS_OUTPUT, CONTINUOUS_INPUT]\n    - [IMMUTABLE_ADDRESS_OUTPUT, NORMAL_INPUT]\n"
         "    - [CONTINUOUS_INPUT, NOPADDING_CONTINUOUS_INPUT]\n"),
        ("    - {a: CONTINUOUS_INPUT, b: NOPADDING_CONTINUOUS_INPUT, checker: continuous_in_in}\n", ""),
        ("    - [USER_MEMORY_INPUT, USER_MEMORY_OUTPUT]\n",
         "    - [USER_MEMORY_INPUT, USER_MEMORY_OUTPUT]\n    - [USER_MEMORY_INPUT, NORMAL_INPUT]\n"),
        ("{a: USER_MEMORY_INPUT, b: RTS_SPECIAL_TYPE_OUTPUT, checker: user_in_rts_out}",
         "{a: USER_MEMORY_INPUT, b: RTS_SPECIAL_TYPE_OUTPUT, checker: rts_out_out}")]})
    d = by_id(diff(shipped(), new))
    imm = d["layout_conflict.pairs[IMMUTABLE_ADDRESS_OUTPUT × NORMAL_INPUT]"]
    assert (imm.kind, imm.old.text, imm.new.text) == ("moved", "unregistered", "absolute conflict")
    assert imm.old.loc is None and imm.new.loc.line == _line(new / "layout.yaml", "[IMMUTABLE_ADDRESS_OUTPUT, NORMAL_INPUT]")
    ci = d["layout_conflict.pairs[CONTINUOUS_INPUT × NOPADDING_CONTINUOUS_INPUT]"]
    assert (ci.old.text, ci.new.text) == ("registered: continuous_in_in", "absolute conflict")
    assert ci.old.table == "layout_conflict.registrations" and ci.new.table == "layout_conflict.absolute_conflict"
    uin = d["layout_conflict.pairs[USER_MEMORY_INPUT × NORMAL_INPUT]"]
    assert (uin.old.text, uin.new.text) == ("unregistered", "absolute no-conflict")
    rep = d["layout_conflict.pairs[USER_MEMORY_INPUT × RTS_SPECIAL_TYPE_OUTPUT]"]
    assert rep.kind == "changed" and "re-pointed registered: user_in_rts_out → registered: rts_out_out" in rep.summary
    assert "pair:RTS_SPECIAL_TYPE_OUTPUT × USER_MEMORY_INPUT" in rep.new_refs
    assert not any(k.startswith("layout_conflict.registrations") for k in d)     # no raw list noise


def test_checker_body_diff_is_on_normalised_text(tmp_path):
    body = "body: if memory_type(a) == memory_type(b) then [] else if a.is_out then [a] else [b]"
    new = edited_pack(tmp_path, {"layout.yaml": [(body, "body: |-\n        if memory_type(a) == memory_type(b) then []\n"
                                                        "        else if b.is_out then [b] else [a]")]})
    c = by_id(diff(shipped(), new))["layout_conflict.checkers.rts_in_out"]
    assert c.kind == "changed" and c.summary == "body changed"
    lines = [t.strip() for s, t in c.details if s in "+-"]
    assert lines == ["else if a.is_out", "else if b.is_out", "then [a]", "then [b]", "else [b]", "else [a]"] or \
        sorted(lines) == sorted(["else if a.is_out", "else if b.is_out", "then [a]", "then [b]", "else [b]", "else [a]"])


def test_rewrapping_a_dsl_value_is_no_change(tmp_path):
    body = "body: if memory_type(a) == memory_type(b) then [] else if a.is_out then [a] else [b]"
    new = edited_pack(tmp_path, {"layout.yaml": [(body, "body: >-\n        if memory_type(a) == memory_type(b)\n"
                                                        "        then [] else if a.is_out then [a] else [b]")]})
    assert diff(shipped(), new).changes == []


def test_checker_rename_with_the_same_body(tmp_path):
    new = edited_pack(tmp_path, {"layout.yaml": [("    rts_out_out:", "    rts_special_out_and_out:"),
                                                 ("checker: rts_out_out}", "checker: rts_special_out_and_out}")],
                                 "alternatives.yaml": [("  layout/rts_out_out:", "  layout/rts_special_out_and_out:")]})
    d = diff(shipped(), new)
    # the checker's rejected alternatives follow it under its new rule id (tests/test_alternatives.py)
    assert [c.id for c in d.changes if not c.id.startswith("isolation_alternatives")] == [
        "layout_conflict.checkers.rts_special_out_and_out"]
    c = next(c for c in d.changes if c.id == "layout_conflict.checkers.rts_special_out_and_out")
    assert c.kind == "renamed" and (c.old.name, c.new.name) == ("rts_out_out", "rts_special_out_and_out")
    assert "rule:layout/rts_out_out" in c.old_refs and "rule:layout/rts_special_out_and_out" in c.new_refs


def test_marking_predicate_changed(tmp_path):
    new = edited_pack(tmp_path, {"layout.yaml": [("      when: node is netoutput and node.graph == graph",
                                                  "      when: node is netoutput")]})
    c = by_id(diff(shipped(), new))["layout_conflict.input_marks[USER_MEMORY_OUTPUT]"]
    assert c.details == (("~", "when: node is netoutput and node.graph == graph → node is netoutput"),)
    assert "attr:USER_MEMORY_OUTPUT" in c.new_refs


def test_rule_list_added_removed_changed_reordered_renamed(tmp_path):
    new = edited_pack(tmp_path, {"rw.yaml": [
        ("    - id: rw/in/phony\n      when: node is phony\n      value: ReadOnly\n", ""),
        ("    - id: rw/in/read\n", "    - id: rw/in/phony\n      when: node is phony\n      value: ReadOnly\n"
                                   "    - id: rw/in/read\n"),
        ("    - id: rw/out/const\n", "    - id: rw/out/constant\n"),
        ("    - id: rw/out/single\n", "    - id: rw/out/extra\n      when: node is netoutput\n      value: SoftRead\n"
                                     "    - id: rw/out/single\n"),
        ("      when: count(consumers(anchor)) > 1", "      when: count(consumers(anchor)) >= 2")]})
    d = by_id(diff(shipped(), new))
    assert d["rw_conflict.output_rules[rw/out/extra]"].kind == "added"
    assert d["rw_conflict.output_rules[rw/out/shared]"].details == \
        (("~", "when: count(consumers(anchor)) > 1 → count(consumers(anchor)) >= 2"),)
    ren = d["rw_conflict.output_rules[rw/out/constant]"]
    assert ren.kind == "renamed" and "rule:rw/out/const" in ren.old_refs
    moved = d["rw_conflict.input_rules[rw/in/phony]"]
    assert moved.kind == "reordered" and "position 2 to" in moved.summary


def test_rule_moved_to_another_table(tmp_path):
    rule = "    - id: rw/out/ref-switch\n      when: node is framework_op and attr(node, \"original_type\") == \"RefSwitch\"\n" \
           "      value: Writeable\n"
    new = edited_pack(tmp_path, {"rw.yaml": [(rule, ""), ("  output_overrides:\n", "  output_overrides:\n" + rule)]})
    c = by_id(diff(shipped(), new))["rw_conflict.output_overrides[rw/out/ref-switch]"]
    assert c.kind == "moved" and c.old.table == "rw_conflict.output_rules"


def test_pipeline_order_stage_and_gate(tmp_path):
    new = edited_pack(tmp_path, {"passes.yaml": [
        ("  - pass: graph_lint\n    stage: normalize\n", ""),
        ("  - pass: mem_inplace\n    stage: build\n", "  - pass: mem_inplace\n    stage: build\n"
                                                    "  - pass: graph_lint\n    stage: build\n"),
        ('gate: option("ge.oo.level") in [none, "O3"]\n  - pass: variable_op',
         "gate: 'option(\"ge.oo.level\")  in [none,  \"O3\"]'\n  - pass: variable_op")]})
    d = by_id(diff(shipped(), new))
    assert d["pipeline[graph_lint]"].details == (("~", "stage: normalize → build"),)
    assert d["pipeline[graph_lint]@reordered"].kind == "reordered"
    assert "pass:graph_lint" in d["pipeline[graph_lint]"].new_refs
    assert not any("variable_prepare" in k for k in d)       # a re-spaced gate is the same gate


def test_stages_and_pass_entries(tmp_path):
    new = edited_pack(tmp_path, {"passes.yaml": [("  - build              # memory assignment and ModelBuilder\n",
                                                  "  - build\n  - after_build\n"),
                                                 ("    doc: ProcessInplace in HybridMemAssigner — in-place output reuse",
                                                  "    doc: ProcessInplace\n    on_failure: warn")]})
    d = by_id(diff(shipped(), new))
    assert d["stages"].details == (("+", "stages: after_build"),)
    assert d["passes.mem_inplace"].kind == "changed"
    assert ("+", "on_failure: warn") in d["passes.mem_inplace"].details


def test_generic_sections_are_diffed_without_a_specialised_differ(tmp_path):
    new = edited_pack(tmp_path, {"symbols.yaml": [("      when: (node is merge or node is reshape) and anchor.idx == 0",
                                                   "      when: node is merge and anchor.idx == 0")],
                                 "variables.yaml": [("  align: 512 ", "  align: 1024 ")]})
    d = by_id(diff(shipped(), new))
    assert d["symbols.ref_from_input[sym/merge-reshape]"].kind == "changed"
    var = d["var_policy:variables.yaml.memory"]
    assert var.details == (("~", "align: 512 → 1024"),) and var.new.loc.file.endswith("variables.yaml")


def test_pack_meta_and_change_notes(tmp_path):
    new = edited_pack(tmp_path, {"pack.yaml": [(f'version: "{VERSION}"', 'version: "99.0.0"')]})
    (new / "CHANGES.md").write_text("# Changes\n\n## 99.0.0\n- flipped a cell\n\n## 1.2.0\n- first\n", encoding="utf-8")
    d = diff(shipped(), new)
    assert [c.id for c in d.changes] == ["pack.version"] and d.semantic() == []
    if (shipped() / "CHANGES.md").is_file():
        assert ("99.0.0", "- flipped a cell") in d.notes
