"""`memconflict explain GRAPH --why-not ...` and `run --near-misses`: for fixtures where a
pass decided "no conflict", the answer names that pass, what it evaluated and the pack
item that decided — checked against the pack's own text, not against line numbers."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from engine.cli import main
from harness import line_of

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / "tests" / "cases"
PACK = ROOT / "rules" / "ge"


def why_not(capsys, graph, *anchors, passes=None, extra=()):
    args = ["explain", str(graph), "--why-not", *anchors, "--json", *extra]
    if passes:
        args += ["--passes", passes]
    code = main(args)
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)


def looks(ans, pass_id):
    row = next(r for r in ans["passes"] if r["pass"] == pass_id)
    return row, row["looks"]


def decisive(look):
    assert look["decisive"] >= 0, look
    return look["steps"][look["decisive"]]


def at(file: str, needle: str) -> str:
    """`rules/ge/FILE:LINE` of the first line of FILE holding needle."""
    return f"rules/ge/{file}:{line_of(PACK / file, needle)}"


def test_rw_matrix_cell_do_nothing(tmp_path, capsys):
    g = tmp_path / "g.yaml"
    g.write_text("graphs:\n  root:\n    nodes: {data: Data, out: NetOutput}\n    edges: [data -> out]\n")
    ans = why_not(capsys, g, "data:0", "out:0", passes="mem_rw_conflict")
    assert ans["subject"]["kind"] == "edge" and ans["isolated_by"] == []
    row, (look,) = looks(ans, "mem_rw_conflict")
    assert row["outcome"] == "no conflict" and look["kind"] == "matrix-cell"
    step = decisive(look)
    assert step["text"] == "matrix[Writeable][ReadOnly]" and step["result"] == "do_nothing"
    assert step["loc"].startswith(at("rw.yaml", "    Writeable:     {ReadOnly: do_nothing") + ":")
    assert ans["rules"][step["loc"]]["text"].startswith("Writeable:")
    assert [s["result"] for s in look["steps"][:2]] == ["Writeable", "ReadOnly"]


def test_rw_skip_rw_conflict_and_hccl_rule(capsys):
    """HM-10: hccl_memcpy's rule hccl/skip-rw-conflict marks the collective; the RW pass then
    skips its input although its matrix cell says insert_identity (a near miss)."""
    ans = why_not(capsys, CASES / "hccl" / "HM-10.yaml", "data:0", "allreduce1:0",
                  passes="hccl_memcpy,mem_rw_conflict")
    _, hl = looks(ans, "hccl_memcpy")
    (h,) = [x for x in hl if x["outcome"] != "not looked at"]
    assert h["kind"] == "rule" and decisive(h)["rule"] == "hccl/skip-rw-conflict"
    assert decisive(h)["loc"].startswith(at("hccl.yaml", "- id: hccl/skip-rw-conflict") + ":")
    assert [s["result"] for s in h["steps"][:-1]] == ["does not hold"] * 4
    _, (r,) = looks(ans, "mem_rw_conflict")
    assert r["kind"] == "skip-consumer"
    assert decisive(r)["loc"].startswith(at("rw.yaml", "skip_consumer: attr_true(node, SKIP_RW_CONFLICT)") + ":")
    assert r["steps"][-1]["result"] == "insert_identity"      # what the skip set aside


def test_layout_checker_verdict(capsys):
    """PhonyConcat → PhonySplit: the registered checker nopadding_in_out returns no anchor."""
    ans = why_not(capsys, CASES / "layout" / "own-nopadding_in_out-phony.yaml", "pc:in:0", "ps:out:0",
                  passes="mem_layout_conflict")
    _, (look,) = looks(ans, "mem_layout_conflict")
    assert look["kind"] == "checker" and look["outcome"] == "no conflict"
    step = decisive(look)
    assert step["rule"] == "layout/nopadding_in_out" and step["result"] == "[] (no conflict)"
    assert step["loc"].startswith(at("layout.yaml", "    nopadding_in_out:") + ":")
    assert ans["rules"][step["loc"]]["text"].startswith("nopadding_in_out:")


def test_layout_checker_isolates_on_nc02(capsys):
    """NC-02 (GE NoPaddingContinuousInAndNoPaddingContinuousOut_InsertIdentity_Success): the same
    checker picks phony_concat:1, and the answer says the edge was isolated."""
    ans = why_not(capsys, CASES / "layout" / "NC-02.yaml", "phony_split:0", "phony_concat:1",
                  passes="mem_layout_conflict")
    assert [i["rule"] for i in ans["isolated_by"]] == ["layout/nopadding_in_out"]
    _, (look,) = looks(ans, "mem_layout_conflict")
    assert look["outcome"] == "isolated" and "phony_concat_in_1" in look["steps"][0]["result"]


def test_layout_absolute_no_conflict_and_different_symbols(tmp_path, capsys):
    g = tmp_path / "g.yaml"
    g.write_text("graphs:\n  root:\n    nodes: {data: Data, relu: Relu, out: NetOutput}\n"
                 "    edges: [data -> out:0, data -> relu, relu -> out:1]\n")
    ans = why_not(capsys, g, "data:0", "out:0", passes="mem_layout_conflict")
    _, (look,) = looks(ans, "mem_layout_conflict")
    assert look["kind"] == "absolute-no-conflict"
    assert decisive(look)["loc"].startswith(at("layout.yaml", "- [USER_MEMORY_INPUT, USER_MEMORY_OUTPUT]") + ":")
    ans = why_not(capsys, g, "data:out:0", "out:in:1", passes="mem_layout_conflict")
    _, (look,) = looks(ans, "mem_layout_conflict")
    assert look["kind"] == "different-symbols" and [s["result"] for s in look["steps"]] == ["data_out_0", "relu_out_0"]


def test_layout_per_symbol_checker(capsys):
    """NC-01: identical no-padding input lists; the per-symbol checker ran once and said no."""
    ans = why_not(capsys, CASES / "layout" / "NC-01.yaml", "pc1", passes="mem_layout_conflict")
    _, ls = looks(ans, "mem_layout_conflict")
    checked = [x for x in ls if x["kind"] == "checker"]
    assert checked and all(decisive(x)["rule"] == "layout/nopadding_in_in" for x in checked)
    assert all(x["outcome"] == "no conflict" for x in ls)


def test_graph_lint_ordered_by_control_edge_is_a_near_miss(tmp_path, capsys):
    case = CASES / "lint" / "own-writer-writer-ordered.yaml"
    ans = why_not(capsys, case, "assign1:in:0", "assign:in:0", passes="graph_lint")
    _, (look,) = looks(ans, "graph_lint")
    assert look["kind"] == "ordered" and decisive(look)["result"] == "yes, by a path that needs a control edge"
    assert [s["result"] for s in look["steps"][:2]] == ["Writable", "Writable"]
    rj = tmp_path / "r.json"
    assert main(["run", str(case), "--passes", "graph_lint", "--near-misses", "--report-json", str(rj), "--quiet"]) == 0
    near = json.loads(rj.read_text())["near_misses"]
    assert near["count"] == 1 and near["by_kind"] == {"graph_lint/ordered": 1}
    assert near["items"][0]["about"].startswith("assign1:0 × assign:0")
    # without the control edge there is no near miss but the W18888 itself
    g = tmp_path / "g.yaml"
    g.write_text(case.read_text().replace("      - assign1 ~> assign\n", ""))
    assert main(["run", str(g), "--passes", "graph_lint", "--near-misses", "--report-json", str(rj), "--quiet"]) == 0
    report = json.loads(rj.read_text())
    assert report["near_misses"]["count"] == 0 and report["summary"]["by_code"] == {"W18888": 1}


def test_graph_lint_not_shared(capsys):
    ans = why_not(capsys, CASES / "lint" / "GL-01.yaml", "data1:0", "add1:0", passes="graph_lint")
    _, ls = looks(ans, "graph_lint")
    assert {x["kind"] for x in ls} == {"not-shared"}


def test_subgraph_bypass_rule_with_a_later_rule_that_would_insert(capsys):
    """SG-02a: the While cond step's skip rule holds; the copy rule after it would have inserted."""
    ans = why_not(capsys, CASES / "subgraph" / "SG-02a.yaml", "While", passes="subgraph")
    _, ls = looks(ans, "subgraph")
    (cond,) = [x for x in ls if "while-cond)" in x["about"]]
    assert cond["kind"] == "bypass" and decisive(cond)["rule"] == "subgraph/while-cond-skip"
    assert cond["steps"][-1]["rule"] == "subgraph/while-cond-copy"
    assert cond["steps"][-1]["result"] == "would hold and insert"


def test_inplace_read_only_filter(capsys):
    ans = why_not(capsys, CASES / "inplace" / "IP-01.yaml", "foo", passes="mem_inplace")
    _, (look,) = looks(ans, "mem_inplace")
    assert look["kind"] == "filter" and decisive(look)["result"] == "no"
    assert decisive(look)["loc"].startswith(at("inplace.yaml", "read_only_source:") + ":")


def test_gate_and_passes_not_run(capsys):
    ans = why_not(capsys, CASES / "inplace" / "IP-01.yaml", "foo")
    row = next(r for r in ans["passes"] if r["pass"] == "inplace_support_check")
    assert row["outcome"] == "not run" and row["loc"].startswith(at("passes.yaml", "context.hostExecFlag") + ":")
    ans = why_not(capsys, CASES / "inplace" / "IP-01.yaml", "foo", passes="mem_inplace")
    assert {r["why"] for r in ans["passes"] if r["outcome"] == "not run"} == {"not in --passes"}


def test_rewrite_gate_keeps_a_rule_set_away(tmp_path, capsys):
    """hccl_memcpy's gate (a graph of at least 2 nodes) is false on a one-node graph."""
    g = tmp_path / "g.yaml"
    g.write_text("graphs:\n  root:\n    nodes:\n      h: {type: HcomAllReduce, inputs: 0, outputs: 1, "
                 "attrs: {_input_mutable: true}}\n")
    ans = why_not(capsys, g, "h", passes="hccl_memcpy")
    _, (look,) = looks(ans, "hccl_memcpy")
    assert look["kind"] == "gate" and decisive(look)["loc"].startswith(at("hccl.yaml", "gate: count(nodes(graph)) >= 2"))


def test_rule_edit_changes_the_answer(tmp_path, capsys):
    """The decisive item is read from the pack: flip the cell and the edge is isolated instead."""
    pack = tmp_path / "ge"
    shutil.copytree(PACK, pack)
    text = (pack / "rw.yaml").read_text()
    old = "    Writeable:     {ReadOnly: do_nothing,"
    assert old in text
    (pack / "rw.yaml").write_text(text.replace(old, "    Writeable:     {ReadOnly: insert_identity,", 1))
    g = tmp_path / "g.yaml"
    g.write_text("graphs:\n  root:\n    nodes: {data: Data, out: NetOutput}\n    edges: [data -> out]\n")
    ans = why_not(capsys, g, "data:0", "out:0", passes="mem_rw_conflict", extra=("--rules", str(pack)))
    # the card names the typing rule that made the difference (Note [decisive typing rule]): the
    # root Data typed Writeable; the flipped matrix cell is a step of it
    assert [i["rule"] for i in ans["isolated_by"]] == ["rw/out/root-data"]


def test_text_output_and_errors(capsys):
    code = main(["explain", str(CASES / "inplace" / "IP-01.yaml"), "--why-not", "foo", "--passes", "mem_inplace"])
    out = capsys.readouterr().out
    assert code == 0 and out.startswith("why not: foo (node, graph root)")
    assert "<- decisive" in out and "| node is data_like" in out
    assert main(["explain", str(CASES / "inplace" / "IP-01.yaml"), "--why-not", "fo"]) == 2
    err = capsys.readouterr().err
    assert "--why-not: error: no node 'fo' in the graph" in err and "foo" in err
    assert main(["explain", str(CASES / "inplace" / "IP-01.yaml"), "--why-not", "foo:3", "netoutput:0"]) == 2
    assert "'foo' has no output 3" in capsys.readouterr().err
    assert main(["explain", str(CASES / "inplace" / "IP-01.yaml")]) == 2


def test_near_misses_are_opt_in_and_deterministic(tmp_path, capsys):
    case = CASES / "subgraph" / "SG-02a.yaml"
    plain, a, b = tmp_path / "p.json", tmp_path / "a.json", tmp_path / "b.json"
    assert main(["run", str(case), "--report-json", str(plain), "--quiet"]) == 0
    assert "near_misses" not in json.loads(plain.read_text())
    for f in (a, b):
        assert main(["run", str(case), "--near-misses", "--report-json", str(f), "--quiet"]) == 0
    assert a.read_bytes() == b.read_bytes()
    report = json.loads(a.read_text())
    assert report["near_misses"]["by_kind"].get("subgraph/bypass", 0) >= 1
    assert any(s["id"] == "near-misses" for s in report["sections"])
    plain_report = json.loads(plain.read_text())
    assert plain_report["insertions"] == report["insertions"]


def _decisions(path: Path, probe):
    """A fixture's passes run with `probe` (or none): what they decided, and the probe."""
    from engine.core.errors import PassFailure
    from engine.core.yamlgraph import load_yaml_graph
    from engine.core.yamlloc import load_yaml
    from engine.passes.context import RunContext
    from engine.passes.manager import check_graph, resolve_passes, run_passes
    from harness import shared_pack

    pack = shared_pack()
    model, options = load_yaml_graph(path, pack)
    expect = load_yaml(path).get("expect") or {}
    if expect.get("given_desc") or expect.get("offsets"):
        return None
    ctx = RunContext(pack, model, options)
    check_graph(ctx)
    if probe == "all":
        from engine.passes.probe import Probe
        probe = Probe(nodes=frozenset(model.all_nodes()))
    ctx.probe = probe
    try:
        run_passes(ctx, resolve_passes(pack, list(expect.get("passes") or []), options))
        failed = None
    except PassFailure as exc:
        failed = str(exc)
    return ([i.to_json() for i in ctx.insertions], [r.to_json() for r in ctx.removals],
            [d.to_json() for d in ctx.diagnostics], failed), probe


def test_recording_changes_no_decision_on_any_fixture():
    """Every fixture, with a probe asking about every node (and every other one in near-miss mode): the same
    insertions, removals, diagnostics and failures as without one; every look cites real text."""
    from engine.passes.probe import Probe
    from engine.report.explain import RuleTexts

    texts = RuleTexts(PACK)
    looked = set()
    for k, path in enumerate(sorted(CASES.rglob("*.yaml"))):
        base = _decisions(path, None)
        if base is None:
            continue
        for probe in ("all",) if k % 2 else ("all", Probe(near=True)):      # near misses on every other one
            got, p = _decisions(path, probe)
            assert got == base[0], f"{path}: the probe changed a decision"
            for look in p.looks:
                looked.add(look.pass_id)
                assert -1 <= look.decisive < len(look.steps), (path, look)
                for s in look.steps:
                    if s.cite is not None:
                        assert texts.get(s.cite) is not None, (path, s)
    assert {"mem_rw_conflict", "mem_layout_conflict", "graph_lint", "hccl_memcpy", "subgraph",
            "mem_inplace", "memcpy_addr_async", "atomic_addr_clean", "variable_prepare",
            "variable_ref_delete", "variable_ref_useless_control_out_delete"} <= looked


def test_memcpy_addr_async_no_rule_held(tmp_path, capsys):
    """A Relu feeding the root NetOutput: none of MemcpyAddrAsyncPass's root-output rules holds."""
    g = tmp_path / "g.yaml"
    g.write_text("graphs:\n  root:\n    nodes: {data: Data, relu: Relu, out: NetOutput}\n"
                 "    edges: [data -> relu, relu -> out]\n")
    ans = why_not(capsys, g, "relu:0", "out:0", passes="memcpy_addr_async")
    _, ls = looks(ans, "memcpy_addr_async")
    (edge,) = [x for x in ls if x["about"].startswith("out:0 (input")]
    assert edge["kind"] == "no-rule" and edge["decisive"] == -1 and edge["steps"]
    assert {s["result"] for s in edge["steps"]} == {"does not hold"}
    assert all(s["loc"].startswith("rules/ge/memcpy.yaml:") for s in edge["steps"])


def test_node_names_with_slashes_and_subgraph_prefix(tmp_path, capsys):
    g = tmp_path / "g.yaml"
    g.write_text("graphs:\n  root:\n    nodes:\n      layer_1/w: Const\n      layer_1/relu: Relu\n"
                 "      if: {type: If, inputs: 1, outputs: 0, subgraphs: [then_b]}\n"
                 "    edges: [layer_1/w -> layer_1/relu, layer_1/w -> if]\n"
                 "  then_b:\n    nodes:\n      d: {type: Data, attrs: {_parent_node_index: 0}}\n"
                 "      r: Relu\n    edges: [d -> r]\n")
    ans = why_not(capsys, g, "layer_1/w:0", "layer_1/relu:0", passes="mem_rw_conflict")
    assert ans["subject"]["text"] == "layer_1/w:0 -> layer_1/relu:0"
    _, (look,) = looks(ans, "mem_rw_conflict")
    assert decisive(look)["result"] == "do_nothing"
    ans = why_not(capsys, g, "then_b/r", passes="mem_rw_conflict")
    assert ans["subject"] == {"kind": "node", "text": "r", "graph": "then_b"}


def test_layout_target_graph_gate(tmp_path, capsys):
    """An unknown-shape root graph is not a layout target: the pass never looks (target_graph)."""
    g = tmp_path / "g.yaml"
    g.write_text("graphs:\n  root:\n    attrs: {_graph_unknown_flag: true}\n"
                 "    nodes: {data: Data, out: NetOutput}\n    edges: [data -> out]\n")
    ans = why_not(capsys, g, "data", passes="mem_layout_conflict")
    row, (look,) = looks(ans, "mem_layout_conflict")
    assert row["outcome"] == "not looked at" and look["kind"] == "gate"
    assert decisive(look)["loc"].startswith(at("layout.yaml", "target_graph: static_graph(graph)") + ":")


def test_graph_lint_edge_asks_only_its_consumer(tmp_path, capsys):
    """var:0 -> assign:0 of three consumers: only the pairs with assign:0 are answered."""
    case = CASES / "lint" / "own-writer-writer-ordered.yaml"
    g = tmp_path / "g.yaml"
    g.write_text(case.read_text().replace("      NetOutput: {type: NetOutput, inputs: 2, outputs: 0}\n",
                                          "      NetOutput: {type: NetOutput, inputs: 2, outputs: 0}\n"
                                          "      relu: {type: Relu, inputs: 1, outputs: 1}\n")
                 .replace("      - assign1 ~> assign\n", "      - assign1 ~> assign\n      - var:0 -> relu:0\n"
                          "      - assign1 ~> relu\n"))
    ans = why_not(capsys, g, "var:0", "relu:0", passes="graph_lint")
    _, ls = looks(ans, "graph_lint")
    assert ls and all("relu:0" in x["about"] for x in ls)


# ---- CtrlNodeConflict, AtomicAddrClean and the variable passes ------------------------------
def test_ctrl_branch_output_no_conflict_and_repeat(capsys):
    """own-ctrl_if_repeat: the else branch's outputs come from three Relus (branch_output_conflict
    false, no repeat); the then branch's second output repeats the first one's buffer."""
    case = CASES / "layout" / "own-ctrl_if_repeat.yaml"
    ans = why_not(capsys, case, "else_g/enet:in:0", passes="mem_layout_conflict")
    row, ls = looks(ans, "mem_layout_conflict")
    (look,) = [x for x in ls if x["kind"] == "ctrl-branch"]
    assert look["outcome"] == "no conflict" and look["about"] == "enet:0 (branch output of if)"
    step = decisive(look)
    assert step["result"] == "false for every one"
    # a block scalar is cited where its text starts, the line after its key
    assert step["loc"] == f"rules/ge/layout.yaml:{line_of(PACK / 'layout.yaml', '    branch_output_conflict: |-') + 1}:7"
    assert look["steps"][1]["result"] == "no"
    ans = why_not(capsys, case, "then_g/tnet:in:1", passes="mem_layout_conflict")
    _, ls = looks(ans, "mem_layout_conflict")
    (look,) = [x for x in ls if x["kind"] == "ctrl-branch"]
    assert look["outcome"] == "isolated" and decisive(look)["result"] == "yes: tnet:0"
    assert ans["isolated_by"] and ans["isolated_by"][0]["rule"] == "layout/ctrl-branch"


def test_ctrl_loop_body_needs_no_output_identity(capsys):
    """WB-01: one body output, one Data with one output, no continuous reader: IsWhileNeedInsertIdentityAtOutput says no."""
    ans = why_not(capsys, CASES / "layout" / "WB-01.yaml", "while1", passes="mem_layout_conflict")
    _, ls = looks(ans, "mem_layout_conflict")
    (look,) = [x for x in ls if x["kind"] == "ctrl-loop"]
    assert look["outcome"] == "no conflict" and look["decisive"] == 0
    assert decisive(look)["result"].startswith("no: one output, one Data with one output")
    assert [s["result"] for s in look["steps"][1:]] == ["0", "none"]


def test_atomic_clean_separately_is_decisive(capsys):
    """own-clean-separately: `op` carries atomic attributes, but the policy cleans every atomic node separately."""
    case = CASES / "atomic" / "own-clean-separately.yaml"
    ans = why_not(capsys, case, "op", passes="atomic_addr_clean")
    row, (look,) = looks(ans, "atomic_addr_clean")
    assert row["outcome"] == "no conflict" and look["kind"] == "not-atomic"
    assert [s["text"].split(":")[0] for s in look["steps"]] == ["already_cleaned", "atomic_attrs", "clean_separately"]
    step = decisive(look)
    assert step["text"].startswith("clean_separately") and step["result"] == "holds"
    assert step["loc"].startswith(at("atomic.yaml", "    clean_separately:") + ":")
    ans = why_not(capsys, case, "relu", passes="atomic_addr_clean")
    _, (look,) = looks(ans, "atomic_addr_clean")
    assert decisive(look)["text"].startswith("atomic_attrs") and decisive(look)["result"] == "does not hold"


def test_atomic_unknown_graph_gate(capsys):
    ans = why_not(capsys, CASES / "atomic" / "own-unknown-graph.yaml", "op", passes="atomic_addr_clean")
    _, (look,) = looks(ans, "atomic_addr_clean")
    assert look["outcome"] == "no conflict" and look["kind"] == "gate"
    step = decisive(look)
    assert step["text"].startswith("unknown_graph") and step["loc"].startswith(at("atomic.yaml", "    unknown_graph:") + ":")


def test_atomic_node_feeding_hccl_only(tmp_path, capsys):
    """An atomic node whose one output feeds an HCCL atomic node needs no clean node of its own."""
    g = tmp_path / "g.yaml"
    g.write_text("graphs:\n  root:\n    nodes:\n      data: Data\n      relu: Relu\n"
                 "      op: {type: Relu, attrs: {atomic_output_index: [0]}}\n"
                 "      allreduce: HcomAllReduce\n      out: NetOutput\n"
                 "    edges: [data -> relu, relu -> op, op -> allreduce, allreduce -> out]\n")
    ans = why_not(capsys, g, "op", passes="atomic_addr_clean")
    _, ls = looks(ans, "atomic_addr_clean")
    (look,) = [x for x in ls if x["about"] == "op"]
    assert look["outcome"] == "no conflict" and look["kind"] == "hccl-consumers"
    assert decisive(look)["text"].startswith("every output feeds an HCCL atomic node")


def _var_look(ans, pass_id):
    row, (look,) = looks(ans, pass_id)
    assert row["outcome"] == "no conflict" and look["kind"] == "unchanged"
    return decisive(look)


def test_variable_prepare_framework_op_is_no_writer(capsys):
    ans = why_not(capsys, CASES / "variables" / "own-prepare-framework-assign.yaml", "var", passes="variable_prepare")
    step = _var_look(ans, "variable_prepare")
    assert step["text"] == "consumer fw:0 writes var" and "framework_ref_ports" in step["result"]
    assert step["rule"] == "var/ref-after-writer" and step["loc"].startswith(at("variables.yaml", "  var_like:") + ":")


def test_variable_passes_that_left_a_plain_graph_alone(tmp_path, capsys):
    """A Variable read by a Relu: no VarIsInitializedOp to replace, no trans op to fuse, not a
    VariableRef to fold, no control edge to drop."""
    g = tmp_path / "g.yaml"
    g.write_text("graphs:\n  root:\n    nodes:\n      var: Variable\n      relu: Relu\n      other: Relu\n"
                 "      out: NetOutput\n    edges: [var -> relu, relu -> out, var ~> other]\n")
    want = {"var_is_initialized": "none: nothing to replace",
            "variable_op": "no: consumer relu (Relu) is not a supported trans op fed at its data input",
            "variable_ref_delete": "no: a variable, kept",
            "variable_ref_useless_control_out_delete": "no: not a VariableRef",
            "variable_prepare": "none: no writer, so no VariableRef"}
    for pass_id, result in want.items():
        ans = why_not(capsys, g, "var", passes=pass_id)
        assert _var_look(ans, pass_id)["result"] == result, pass_id


def test_variable_ref_keeps_a_control_edge_that_orders_something_new(capsys):
    ans = why_not(capsys, CASES / "variables" / "own-useless-ctrl-keep.yaml", "var1",
                  passes="variable_ref_useless_control_out_delete")
    step = _var_look(ans, "variable_ref_useless_control_out_delete")
    assert step["result"] == "none: every control edge orders something new"
    assert step["facts"] == [["control successors", ["addn2"]]]
