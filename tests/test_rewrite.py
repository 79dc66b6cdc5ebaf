"""The rewrite engine: rule sets load strictly with located errors, every edit
leaves provenance, GE's edit styles differ as GE's do, and a new pass is a rule
edit — the engine names no op type."""
from __future__ import annotations

from pathlib import Path


from engine.passes.context import RunContext
from engine.passes.catalog import load_pack
from engine.passes.manager import resolve_passes, run_passes
from engine.core.yamlgraph import load_yaml_graph
from harness import CASES, edit, errors_of, find, line_of, shared_pack

ROOT = Path(__file__).resolve().parent.parent
PACK = shared_pack()


def run_file(path, passes, pack=PACK, options=None):
    model, opts = load_yaml_graph(path, pack)
    opts.update(options or {})
    ctx = RunContext(pack, model, opts)
    run_passes(ctx, resolve_passes(pack, passes, opts))
    return ctx






# ---- strict loading ---------------------------------------------------------------------
def test_unknown_insert_spec_is_located(pack_copy):
    f = pack_copy / "hccl.yaml"
    edit(f, '- insert_before(anchor, "identity")', '- insert_before(anchor, "identiy")')
    line = line_of(f, '"identiy"')
    col = (f.read_text().splitlines()[line - 1].index('"identiy"')) + 1
    out = errors_of(pack_copy)
    assert f"pack/hccl.yaml:{line}:{col}: error: hccl_memcpy: no insert spec named 'identiy'" in out
    assert "hint: did you mean 'identity'?" in out


def test_unknown_rule_key_and_action(pack_copy):
    f = pack_copy / "subgraph.yaml"
    edit(f, "            when: count(continuous) > 0", "            wen: count(continuous) > 0")
    edit(f, "- insert_after(out, consumers(out), \"data_output_copy\")", "- insert_afte(out, consumers(out), \"data_output_copy\")")
    out = errors_of(pack_copy)
    assert "unknown key 'wen'" in out and "did you mean 'when'?" in out
    assert "unknown function 'insert_afte'" in out and "did you mean 'insert_after'?" in out


def test_pass_must_name_a_rule_set(pack_copy):
    edit(pack_copy / "passes.yaml", "  hccl_continuous_memcpy:\n    algorithm: hccl_rewrites\n",
         "  hccl_continuous_memcpy:\n    algorithm: hccl_rewrites\n    config: hccl_continous\n")
    out = errors_of(pack_copy)
    assert "pass 'hccl_continuous_memcpy': section 'hccl_rewrites' has no rule set 'hccl_continous'" in out
    assert "did you mean 'hccl_continuous_memcpy'?" in out


def test_rule_ids_are_registered_once(pack_copy):
    edit(pack_copy / "memcpy.yaml", "- id: inplace-check/shared", "- id: inplace-check/source")
    assert "rule id 'inplace-check/source' is already used" in errors_of(pack_copy)


# ---- provenance -------------------------------------------------------------------------
def test_insertion_names_rule_location_and_deciding_facts():
    ctx = run_file(CASES / "hccl" / "HM-03.yaml", ["hccl_memcpy"])
    (ins,) = ctx.insertions
    rec = ins.to_json()
    line = line_of(ROOT / "rules/ge/hccl.yaml", "- id: hccl/later-sibling")
    assert rec["rule"] == "hccl/later-sibling" and rec["rule_loc"].startswith(f"rules/ge/hccl.yaml:{line}:")
    assert rec["producer"] == "input:0" and rec["consumers"] == ["allreduce_op:0"]
    r = rec["reason"]
    assert r["sibling"] == "relu_op:0" and r["sibling_id"] == 2 and r["writer_id"] == 1
    assert r["why"].startswith("a sibling consumer runs after the HCCL writer")
    assert r["step"] == "mutable-input" and r["src"] == "input:0"
    assert set(rec["attrs"]) == {"no_need_constant_folding"}


def test_attribute_edits_are_info_diagnostics():
    ctx = run_file(CASES / "hccl" / "HM-10.yaml", ["hccl_memcpy"])
    (d,) = ctx.diagnostics
    assert (d.code, d.severity, d.pass_id) == ("ATTR_SET", "info", "hccl_memcpy")
    j = d.to_json()
    assert j["node"] == "allreduce1" and j["attr"] == "_skip_rw_conflict" and j["value"] is True
    assert j["rule"] == "hccl/skip-rw-conflict" and j["rule_loc"].startswith("rules/ge/hccl.yaml:")


def test_clean_node_lists_what_it_precedes():
    ctx = run_file(CASES / "atomic" / "own-hccl-shared.yaml", ["atomic_addr_clean"])
    (ins,) = ctx.insertions
    assert ins.rule == "atomic/shared" and ins.type == "MemSet"
    assert ins.consumers == ("allreduce:-1", "relu:-1", "mul:-1")
    assert ins.reason["atomic_nodes"] == ins.reason["hccl_nodes"] == ["allreduce"]
    assert ins.reason["hccl_inputs"] == ["relu"] and ins.reason["first_successors"] == ["mul"]


# ---- GE's edit styles ---------------------------------------------------------------------
GRAPH = """
graphs:
  root:
    nodes:
      data: {type: Data, inputs: 0, outputs: 1}
      gate: {type: NoOp, inputs: 0, outputs: 0}
      merge: {type: StreamMerge, inputs: 1, outputs: 1}
      c: {type: Const, inputs: 0, outputs: 1}
      ar: {type: HcomAllReduce, inputs: 1, outputs: 1, attrs: {_input_mutable: true}}
    edges:
      - data -> merge
      - gate ~> merge
      - c -> ar
      - gate ~> ar
"""


def test_insert_between_keeps_control_edges_insert_before_moves_them(tmp_path):
    g = tmp_path / "g.yaml"
    g.write_text(GRAPH)
    ctx = run_file(g, ["memcpy_addr_async", "hccl_memcpy"])
    m = ctx.model
    addr = find(m, "data_MemcpyAddrAsync_0")
    ident = find(m, "ar_HcclMemcpyPass_Identity0")
    assert [p.name for p in find(m, "merge").in_ctrl] == ["gate"] and list(addr.in_ctrl) == []
    assert list(find(m, "ar").in_ctrl) == [] and [p.name for p in ident.in_ctrl] == ["gate"]
    # both sit right after their producer (ComputeGraph::InsertNode); the Identity shares c's id
    order = [n.name for n in m.root.nodes()]
    assert order.index("data_MemcpyAddrAsync_0") == order.index("data") + 1
    assert ident.id == find(m, "c").id


def test_multi_io_copies_are_appended_with_the_next_id():
    ctx = run_file(CASES / "subgraph" / "own-while-body-partial-bypass.yaml", ["subgraph"])
    body = ctx.model.graphs["body_g"]
    nodes = list(body.nodes())
    assert [n.name for n in nodes[-2:]] == ["body_g_input_Memcpy", "body_g_output_Memcpy"]
    assert [n.id for n in nodes[-2:]] == [5, 6]


# ---- rules are data -------------------------------------------------------------------------
NEW_RULE_SET = """
  protect_writer_inputs:
    doc: a made-up pass — constants feeding a CustomWriter get an Identity
    steps:
      - name: writer-input
        match: node.type == "CustomWriter"
        each: inputs
        rules:
          - id: custom/protect
            doc: a constant must not be overwritten
            when: producer_node(anchor) is constant
            do:
              - insert_before(anchor, "copy")
    insert:
      copy:
        type: Identity
        name: "{dst}_custom_{idx}"
"""


def test_new_pass_by_rule_edit(pack_copy, tmp_path):
    f = pack_copy / "memcpy.yaml"
    f.write_text(f.read_text().rstrip("\n") + "\n" + NEW_RULE_SET)
    edit(pack_copy / "passes.yaml", "  mem_rw_conflict:\n",
         "  protect_writer_inputs:\n    algorithm: memory_rewrites\n  mem_rw_conflict:\n")
    pack = load_pack(pack_copy)
    g = tmp_path / "g.yaml"
    g.write_text("graphs:\n  root:\n    nodes:\n      k: Const\n      w: {type: CustomWriter, inputs: 1, outputs: 1}\n"
                 "    edges: [k -> w]\n")
    ctx = run_file(g, ["protect_writer_inputs"], pack)
    (ins,) = ctx.insertions
    assert (ins.name, ins.type, ins.rule) == ("w_custom_0", "Identity", "custom/protect")
    assert ins.rule_loc.file.endswith("memcpy.yaml")


def test_new_rewrite_family_by_rule_edit(pack_copy, tmp_path):
    """A whole new family — its own file and section, declared in `rewrite_sets:` — is a rule edit."""
    (pack_copy / "custom.yaml").write_text("custom_rewrites:" + NEW_RULE_SET)
    edit(pack_copy / "pack.yaml", "  - passes.yaml\n", "  - passes.yaml\n  - custom.yaml\n")
    edit(pack_copy / "passes.yaml", "rewrite_sets:\n", "rewrite_sets:\n  custom_rewrites: made-up passes (custom.yaml)\n")
    edit(pack_copy / "passes.yaml", "  mem_rw_conflict:\n",
         "  protect_writer_inputs:\n    algorithm: custom_rewrites\n  mem_rw_conflict:\n")
    pack = load_pack(pack_copy)
    assert pack.algorithms["custom_rewrites"].section == "custom_rewrites"
    g = tmp_path / "g.yaml"
    g.write_text("graphs:\n  root:\n    nodes:\n      k: Const\n      w: {type: CustomWriter, inputs: 1, outputs: 1}\n"
                 "    edges: [k -> w]\n")
    (ins,) = run_file(g, ["protect_writer_inputs"], pack).insertions
    assert (ins.name, ins.rule) == ("w_custom_0", "custom/protect") and ins.rule_loc.file.endswith("custom.yaml")
    # without the declaration the section is unknown and so is the algorithm
    edit(pack_copy / "passes.yaml", "  custom_rewrites: made-up passes (custom.yaml)\n", "")
    msg = errors_of(pack_copy)
    assert "error: unknown section 'custom_rewrites'" in msg and "error: unknown algorithm 'custom_rewrites'" in msg


def test_pass_failure_is_exit_1_naming_the_node(capsys):
    from engine.cli import main
    assert main(["run", str(CASES / "hccl" / "HM-07b.yaml"), "--passes", "hccl_memcpy", "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "pass hccl_memcpy failed at node 'hb': an input has no producer" in err
    assert main(["run", str(CASES / "subgraph" / "own-while-no-body.yaml"), "--passes", "subgraph", "--quiet"]) == 1
    assert "pass subgraph failed at node 'w': the While has no body subgraph" in capsys.readouterr().err
