"""A new op behaviour is a rule-file edit: no engine change."""
from __future__ import annotations

import shutil

from engine.passes.context import RunContext
from engine.passes.catalog import load_pack
from engine.core.resources import default_pack_dir
from engine.passes.manager import resolve_passes, run_passes
from engine.core.yamlgraph import load_yaml_graph

GRAPH = """
graphs:
  root:
    nodes:
      w: Const
      a2a: {type: HcomAllToAllInplace, inputs: 1, outputs: 1}
      relu: Relu
    edges: [w -> a2a, a2a -> relu]
"""

RULE = """    - id: rw/in/alltoall-inplace
      when: node.type == "HcomAllToAllInplace"
      value: ScopeWriteable
    - id: rw/in/read
"""


def run(pack, tmp_path):
    g = tmp_path / "g.yaml"
    g.write_text(GRAPH)
    model, opts = load_yaml_graph(g, pack)
    ctx = RunContext(pack, model, opts)
    run_passes(ctx, resolve_passes(pack, ["mem_rw_conflict"], opts))
    return ctx


def test_new_writer_op_by_rule_edit(tmp_path, default_pack):
    assert run(default_pack, tmp_path).insertions == []       # unknown op: reads its input
    pack_dir = tmp_path / "pack"
    shutil.copytree(default_pack_dir(), pack_dir)
    rw = pack_dir / "rw.yaml"
    rw.write_text(rw.read_text().replace("    - id: rw/in/read\n", RULE, 1))
    ctx = run(load_pack(pack_dir), tmp_path)
    assert [i.name for i in ctx.insertions] == ["w_Identity0"]
    reason = ctx.insertions[0].reason
    assert reason["input_rw"] == "ScopeWriteable"
    assert reason["input_rule"].rule_id == "rw/in/alltoall-inplace"
    assert str(reason["input_rule"]).startswith("rw/in/alltoall-inplace (")
    assert ctx.model.root.find("a2a").ins[0].peer.node.type == "Identity"


def test_matrix_cell_flip_changes_the_decision(tmp_path, default_pack):
    pack_dir = tmp_path / "pack"
    shutil.copytree(default_pack_dir(), pack_dir)
    rw = pack_dir / "rw.yaml"
    text = rw.read_text().replace(
        "SoftRead:      {ReadOnly: do_nothing, Writeable: do_nothing, ScopeWriteable: do_nothing}",
        "SoftRead:      {ReadOnly: do_nothing, Writeable: do_nothing, ScopeWriteable: insert_identity}")
    rw.write_text(text)
    g = tmp_path / "g.yaml"
    g.write_text("graphs:\n  root:\n    nodes:\n      r: Relu\n"
                 "      ar: {type: HcomAllReduce, inputs: 1, outputs: 1, attrs: {_input_mutable: true}}\n"
                 "    edges: [r -> ar]\n")
    for pack, want in ((default_pack, 0), (load_pack(pack_dir), 1)):
        model, opts = load_yaml_graph(g, pack)
        ctx = RunContext(pack, model, opts)
        run_passes(ctx, resolve_passes(pack, ["mem_rw_conflict"], opts))
        assert len(ctx.insertions) == want


LAYOUT_ADDITION = """
    pinned_to_collective:
      doc: a host-pinned buffer must not be handed to a collective directly
      body: if a.is_out then [b] else [a]
"""
MARK = """    - attr: HOST_PINNED_OUTPUT
      when: attr_true(node, "_host_pinned")
"""
REG = """    - {a: HOST_PINNED_OUTPUT, b: UNSUPPORTED_ADDRESS_REFRESH_OPERATOR_INPUT, checker: pinned_to_collective}
"""


def test_new_anchor_attribute_checker_and_registration_by_rule_edit(tmp_path, default_pack):
    pack_dir = tmp_path / "pack"
    shutil.copytree(default_pack_dir(), pack_dir)
    f = pack_dir / "layout.yaml"
    text = f.read_text()
    text = text.replace("NORMAL_INPUT, NORMAL_OUTPUT]", "NORMAL_INPUT, NORMAL_OUTPUT, HOST_PINNED_OUTPUT]", 1)
    text = text.replace("  output_default: NORMAL_OUTPUT\n", MARK + "  output_default: NORMAL_OUTPUT\n", 1)
    text = text.replace("  checkers:\n", "  checkers:\n" + LAYOUT_ADDITION, 1)
    text = text.replace("  registrations:\n", "  registrations:\n" + REG, 1)
    f.write_text(text)
    g = tmp_path / "g.yaml"
    g.write_text("graphs:\n  root:\n    nodes:\n"
                 "      pinned: {type: Relu, attrs: {_host_pinned: true}}\n"
                 "      hcom: {type: HcomAllReduce, inputs: 1, outputs: 1}\n"
                 "      out: {type: Relu, inputs: 1, outputs: 1}\n"
                 "    edges: [pinned -> hcom, hcom -> out]\n")
    for pack, want in ((default_pack, []), (load_pack(pack_dir), ["identity_0_hcom_MemLayoutConflict_0"])):
        model, opts = load_yaml_graph(g, pack)
        ctx = RunContext(pack, model, opts)
        run_passes(ctx, resolve_passes(pack, ["mem_layout_conflict"], opts))
        assert [i.name for i in ctx.insertions] == want
    ins = ctx.insertions[0]
    assert ins.rule == "layout/pinned_to_collective"
    assert ins.reason["pair"] in ("HOST_PINNED_OUTPUT × UNSUPPORTED_ADDRESS_REFRESH_OPERATOR_INPUT",
                                  "UNSUPPORTED_ADDRESS_REFRESH_OPERATOR_INPUT × HOST_PINNED_OUTPUT")
    assert ins.consumers == ("hcom:0",)
    assert str(ins.rule_loc).startswith(str(pack_dir.name)) or "layout.yaml" in str(ins.rule_loc)
