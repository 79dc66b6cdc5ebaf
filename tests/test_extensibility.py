"""A new op behaviour is a rule-file edit: no engine change."""
from __future__ import annotations

import shutil

from engine.context import RunContext
from engine.pack import load_pack
from engine.resources import default_pack_dir
from engine.runner import resolve_passes, run_passes
from engine.yamlgraph import load_yaml_graph

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


def test_new_writer_op_by_rule_edit(tmp_path):
    assert run(load_pack(), tmp_path).insertions == []       # unknown op: reads its input
    pack_dir = tmp_path / "pack"
    shutil.copytree(default_pack_dir(), pack_dir)
    rw = pack_dir / "rw.yaml"
    rw.write_text(rw.read_text().replace("    - id: rw/in/read\n", RULE, 1))
    ctx = run(load_pack(pack_dir), tmp_path)
    assert [i.name for i in ctx.insertions] == ["w_Identity0"]
    reason = ctx.insertions[0].reason
    assert reason["input_rw"] == "ScopeWriteable"
    assert reason["input_rule"].startswith("rw/in/alltoall-inplace (")
    assert ctx.model.root.find("a2a").ins[0].peer.node.type == "Identity"


def test_matrix_cell_flip_changes_the_decision(tmp_path):
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
    for pack, want in ((load_pack(), 0), (load_pack(pack_dir), 1)):
        model, opts = load_yaml_graph(g, pack)
        ctx = RunContext(pack, model, opts)
        run_passes(ctx, resolve_passes(pack, ["mem_rw_conflict"], opts))
        assert len(ctx.insertions) == want
