"""GraphLint (`graph_lint`, W18888): the diagnostic names what it found, the pass never
changes the graph, its GE behaviour comes from the pack, pack errors are located, and
the reachability it uses agrees with a brute-force search."""
from __future__ import annotations

import json
import random
from dataclasses import replace

import pytest

from harness import CASES, edit, errors_of, line_of, run_case, shared_pack
from engine.passes.algorithms import lint
from engine.cli import main
from engine.passes.context import RunContext
from engine.core.errors import Collector, PassFailure
from engine.passes.catalog import load_pack
from engine.passes.manager import install_policies, resolve_passes, run_passes
from engine.core.toposort import sort_model
from engine.proto import ge_ir_pb2 as pb
from engine.core.yamlgraph import load_yaml_graph

PACK = shared_pack()
LINT = CASES / "lint"


def only_diagnostic(name: str, pack=PACK):
    ctx, _, status = run_case(LINT / name, pack, passes=["graph_lint"])
    assert status == 0 and len(ctx.diagnostics) == 1, [d.message for d in ctx.diagnostics]
    return ctx, ctx.diagnostics[0]


# ---- the diagnostic -------------------------------------------------------------------
def test_message_names_both_nodes_the_anchor_and_the_rules():
    ctx, d = only_diagnostic("GL-08.yaml")
    cite = {r.id: r.cite for r in PACK.configs["graph_lint"].input_rules}
    assert (d.code, d.severity, d.pass_id) == ("W18888", "warning", "graph_lint")
    assert d.message == (
        f"write node 'assign' (input 0 'ref': {cite['lint/in/ref-port']}) and read node 'relu' "
        f"(input 0 'x': {cite['lint/in/read']}) both consume 'var:0' in graph 'root' with no control relation "
        "between them, so they may run in either order (precision problem); order them with a control edge")
    j = d.to_json()
    assert j["graph"] == "root" and j["anchor"] == "var:0"
    assert j["nodes"] == ["assign", "relu"] and j["roles"] == ["writer", "reader"]
    assert j["inputs"] == ["assign:0", "relu:0"] and j["types"] == ["Writable", "ReadOnly"]
    assert j["rules"] == ["lint/in/ref-port", "lint/in/read"]
    assert [(r.pass_id, r.status) for r in ctx.pass_runs] == [("graph_lint", "ok")]   # a finding, not a failure


def test_report_json_carries_w18888(tmp_path, capsys):
    rj = tmp_path / "r.json"
    assert main(["run", str(LINT / "GL-08.yaml"), "--passes", "graph_lint", "--report-json", str(rj)]) == 0
    capsys.readouterr()
    [d] = json.loads(rj.read_text())["diagnostics"]
    assert d["code"] == "W18888" and d["severity"] == "warning" and d["anchor"] == "var:0"


def test_a_type_from_a_subgraph_is_explained_through_it():
    _, d = only_diagnostic("own-if-write-in-subgraph-no-control.yaml")
    j = d.to_json()
    assert j["graph"] == "main" and j["anchor"] == "var:0" and j["nodes"] == ["if", "relu"]
    assert "'if' (input 1 'input': through subgraph 'then', where data feeds assign input 0 'ref': lint/in/ref-port" \
        in d.message
    assert j["rules"] == ["lint/in/ref-port", "lint/in/read"]


def test_only_the_first_conflict_is_reported():
    _, d = only_diagnostic("own-first-conflict-only.yaml")      # the branch `then` has a second one
    assert d.to_json()["graph"] == "main" and d.to_json()["anchor"] == "var:0"


def test_a_conflict_inside_a_subgraph_names_that_graph():
    _, d = only_diagnostic("own-conflict-in-subgraph.yaml")
    j = d.to_json()
    assert (j["graph"], j["anchor"], j["nodes"]) == ("then_g", "data:0", ["assign", "relu"])


# ---- what the lint changes -----------------------------------------------------------------
def _ops(model) -> dict:
    """Each graph's ops by name, ids cleared: the graph but for the order of its nodes."""
    out = {}
    for g in model.graph_order:
        ops = {}
        for n in g.nodes():
            op = pb.OpDef()
            op.CopyFrom(n.op)
            op.id = 0
            ops[n.name] = op.SerializeToString(deterministic=True)
        out[g.name] = ops
    return out


@pytest.mark.parametrize("name", ["own-unsorted-order.yaml", "own-first-conflict-only.yaml", "GL-06.yaml",
                                  "own-loop-back-edge-orders-nothing.yaml"])
def test_the_lint_changes_nothing_but_the_order(name):
    """GraphLint::Initialize sorts the root (and the subgraphs) in place, as
    TopologicalSorting does anywhere, and changes nothing else."""
    model, options = load_yaml_graph(LINT / name, PACK)
    before = _ops(model)
    ctx = RunContext(PACK, model, options)
    run_passes(ctx, resolve_passes(PACK, ["graph_lint"], options))
    assert _ops(model) == before
    assert not ctx.insertions and not ctx.removals
    fresh, _ = load_yaml_graph(LINT / name, PACK)
    install_policies(RunContext(PACK, fresh, options))
    assert sort_model(fresh) == []
    assert [(g.name, [(n.name, n.id) for n in g.nodes()]) for g in model.graph_order] == \
        [(g.name, [(n.name, n.id) for n in g.nodes()]) for g in fresh.graph_order]


def test_root_graph_only():
    model, options = load_yaml_graph(LINT / "GL-06.yaml", PACK)
    ctx = RunContext(PACK, model, options)
    spec = PACK.passes["graph_lint"]
    with pytest.raises(PassFailure, match="GraphLint verifies a root graph only; 'then' is a subgraph of 'if'"):
        lint.run(ctx, model.graphs["then"], PACK.configs["graph_lint"], spec)
    # declared as a graph pass, it warns on every subgraph (GE ignores the status)
    run_passes(ctx, [replace(spec, scope="graph")])
    assert [d.code for d in ctx.diagnostics] == ["PASS_FAILED"]
    assert ctx.pass_runs[-1].status == "warned"


def test_graph_lint_opens_the_default_pipeline():
    assert resolve_passes(PACK, None, {})[0].id == "graph_lint"


# ---- behaviour lives in the pack ----------------------------------------------------------


def codes(name: str, pack) -> list[str]:
    ctx, _, _ = run_case(LINT / name, pack, passes=["graph_lint"])
    return [d.code for d in ctx.diagnostics]


def test_writable_stickiness_is_a_pack_setting(pack_copy):
    assert codes("own-sticky-writable.yaml", PACK) == ["W18888"]
    edit(pack_copy / "lint.yaml", "sticky: [Writable]", "sticky: []")
    assert codes("own-sticky-writable.yaml", load_pack(pack_copy)) == []


def test_control_edges_are_a_pack_setting(pack_copy):
    assert codes("GL-04.yaml", PACK) == []
    edit(pack_copy / "lint.yaml", "control_edges: true", "control_edges: false")
    assert codes("GL-04.yaml", load_pack(pack_copy)) == ["W18888"]


def test_a_new_ignored_op_and_the_code_are_rule_edits(pack_copy):
    edit(pack_copy / "lint.yaml", "when: original is cmo", 'when: original is cmo or original.type == "Relu"')
    edit(pack_copy / "lint.yaml", "code: W18888", "code: W99999")
    pack = load_pack(pack_copy)
    assert codes("GL-08.yaml", pack) == []                         # relu's read is ignored now
    assert codes("own-writer-writer-unordered.yaml", pack) == ["W99999"]


# ---- located pack errors ----------------------------------------------------------------


def test_unknown_key_and_bad_severity(pack_copy):
    f = pack_copy / "lint.yaml"
    edit(f, "    control_edges: true", "    contol_edges: true")
    edit(f, "severity: warning}", "severity: warn}")
    msg = errors_of(pack_copy)
    line = line_of(f, "contol_edges")
    assert f"pack/lint.yaml:{line}:5: error: graph_lint.reachability: unknown key 'contol_edges'" in msg
    assert "hint: did you mean 'control_edges'?" in msg
    line = line_of(f, "severity: warn}")
    assert f"pack/lint.yaml:{line}:40: error: graph_lint.diagnostic: unknown severity 'warn'" in msg
    assert "hint: did you mean 'warning'?" in msg


def test_undeclared_types(pack_copy):
    f = pack_copy / "lint.yaml"
    edit(f, "writable: Writable,", "writable: Writeable,")
    edit(f, "sticky: [Writable]", "sticky: [Writabel]")
    msg = errors_of(pack_copy)
    line = line_of(f, "writable: Writeable")
    assert f"pack/lint.yaml:{line}:42: error: graph_lint.roles: 'Writeable' is not a declared type" in msg
    line = line_of(f, "sticky: [Writabel]")
    assert f"pack/lint.yaml:{line}:14: error: graph_lint.subgraph_inputs.sticky: 'Writabel' is not a declared type" \
        in msg
    assert msg.count("hint: did you mean 'Writable'?") == 2


def test_dsl_errors_in_rules_and_expressions(pack_copy):
    f = pack_copy / "lint.yaml"
    edit(f, "when: original is cmo", "when: original is cmoo")
    edit(f, "output_index(node, input_name(anchor))", "output_index(input_name(anchor))")
    edit(f, "source: node is data", "source: nod is data")
    msg = errors_of(pack_copy)
    line = line_of(f, "original is cmoo")
    assert f"pack/lint.yaml:{line}:13: error: unknown op class 'cmoo'" in msg and "did you mean 'cmo'?" in msg
    assert "error: 'output_index' takes 2 argument(s), got 1" in msg
    line = line_of(f, "source: nod is data")
    assert f"pack/lint.yaml:{line}:13: error: unknown name 'nod'" in msg


# ---- reachability against brute force -----------------------------------------------------
def random_graph(rng: random.Random, n: int) -> str:
    """A random DAG listed in shuffled order: writers (`ref` in and out) and readers."""
    names = [f"n{i}" for i in range(n)]
    nodes, edges = [], []
    for i, name in enumerate(names):
        k = rng.randint(0, 3) if i else 0
        writer = k > 0 and rng.random() < 0.3
        ins = (["ref"] if writer else []) + [f"a{j}" for j in range(k - writer)]
        nodes.append(f"      {name}: {{type: Op, inputs: {ins or 0}, outputs: {['ref', 'z'] if writer else ['y', 'z']}}}")
        for j in range(k):
            src = rng.randrange(max(0, i - 12), i)
            edges.append(f"{names[src]}:{rng.randint(0, 1)} -> {name}:{j}")
        if i and rng.random() < 0.2:
            edges.append(f"{names[rng.randrange(max(0, i - 12), i)]} ~> {name}")
    rng.shuffle(nodes)
    body = "\n".join(nodes)
    return "graphs:\n  root:\n    nodes:\n" + body + "\n    edges:\n" + "".join(f"      - {e}\n" for e in edges)


def brute_force(model) -> dict:
    def reaches(a, b):
        stack, seen = [a], {a}
        while stack:
            x = stack.pop()
            if x is b:
                return True
            for s in [p.node for o in x.outs for p in o.peers] + list(x.out_ctrl):
                if s not in seen:
                    seen.add(s)
                    stack.append(s)
        return False

    found = {}
    for node in model.root.nodes():
        for o in node.outs:
            w = list(dict.fromkeys(p.node for p in o.peers if p.node.input_name(p.idx) == "ref"))
            r = list(dict.fromkeys(p.node for p in o.peers if p.node.input_name(p.idx) != "ref"))
            if len(o.peers) < 2 or not w:
                continue
            pairs = [(a, b, "write") for a in w for b in w if a is not b] + [(a, b, "read") for a in w for b in r]
            pairs.sort(key=lambda t: (w.index(t[0]), t[2] == "read"))
            for a, b, kind in pairs:
                if a is not b and not reaches(a, b) and not reaches(b, a):
                    found[o.key] = (a.name, b.name, kind)
                    break
    return found


@pytest.mark.parametrize("seed", range(8))
def test_conflicts_match_brute_force(seed, tmp_path, monkeypatch):
    monkeypatch.setattr(lint, "CHUNK", 5)          # many sweeps on a small graph
    path = tmp_path / "g.yaml"
    path.write_text(random_graph(random.Random(seed), 120))
    model, options = load_yaml_graph(path, PACK)
    ctx = RunContext(PACK, model, options)
    gl = lint.GraphLint(ctx, PACK.configs["graph_lint"], PACK.passes["graph_lint"])
    got = {o.key: (w.node.name, other.node.name, kind) for _, o, w, other, kind in gl.conflicts(model.root)}
    want = brute_force(model)
    assert want, "the random graph should have conflicts"
    assert got == want


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("search", ["bounded", "tiny"])
def test_pairs_decided_as_asked_give_the_conflicts_of_the_full_reachability(seed, search, tmp_path, monkeypatch):
    """Note [pairs as asked]: each pair's search when check_output asks, the full reachability
    once a search cannot decide (a tiny search budget: most cannot); every conflict as the
    brute force finds it, and as the reachability built up front does."""
    if search == "tiny":
        monkeypatch.setattr(lint, "BUDGET", 1)
    monkeypatch.setattr(lint, "CHUNK", 5)
    path = tmp_path / "g.yaml"
    path.write_text(random_graph(random.Random(100 + seed), 150))
    model, options = load_yaml_graph(path, PACK)

    def lint_of(eager: bool):
        gl = lint.GraphLint(RunContext(PACK, model, options), PACK.configs["graph_lint"], PACK.passes["graph_lint"])
        gl.eager = eager
        return gl, {o.key: (w.node.name, x.node.name, kind) for _, o, w, x, kind in gl.conflicts(model.root)}
    (asked, got), (_, want) = lint_of(False), lint_of(True)
    assert got == want == brute_force(model) and got, "the random graph should have conflicts"
    (reach,) = asked.asked.values()
    assert (reach.full is not None) == (search == "tiny")


def test_the_lint_searches_and_types_only_what_comes_before_the_first_conflict(monkeypatch):
    """GE stops at the first conflict: on a training step whose first conflict comes early, a
    handful of pairs are searched and of nodes typed (Note [pairs as asked], Note [inputs typed
    as asked]), where the lint built up front searched every pair and typed every node; the
    diagnostic is the same, and every node's original type was still read."""
    from benchmarks.gen_graph import make_model
    from engine.core.dumpio import build_model
    searched, typed, originals = [], [], []
    search, single, original = lint._search, lint.GraphLint.mark_single, lint.GraphLint.original_of
    monkeypatch.setattr(lint, "_search", lambda *a: searched.append(1) or search(*a))
    monkeypatch.setattr(lint.GraphLint, "mark_single", lambda self, n: typed.append(n) or single(self, n))
    monkeypatch.setattr(lint.GraphLint, "original_of", lambda self, n: originals.append(n) or original(self, n))
    runs = []
    for eager in (False, True):
        model = build_model(make_model(3000, seed=1))
        ctx = RunContext(PACK, model, {})
        gl = lint.GraphLint(ctx, PACK.configs["graph_lint"], PACK.passes["graph_lint"])
        gl.eager = eager
        counts = len(searched), len(typed)
        del originals[:]
        gl.verify(model.root)
        assert set(originals) >= {n for n in model.all_nodes() if not n.subgraphs}
        runs.append((len(searched) - counts[0], len(typed) - counts[1], [(d.code, d.message) for d in ctx.diagnostics]))
    (searches, types, found), (all_searches, all_types, found_upfront) = runs
    assert found == found_upfront and found, "the training step has a W18888"
    assert searches * 20 <= all_searches, (searches, all_searches)
    assert types * 5 <= all_types, (types, all_types)


def test_input_rules_that_may_leave_an_input_untyped_type_every_node_first(tmp_path):
    """Note [inputs typed as asked]: a pack whose last input rule has a condition may leave an
    input without a type, which fails the pass before any conflict is looked at, as GE's does:
    its inputs are all typed up front."""
    rules = [replace(r, when=lint.parse_rule_expr("node.type != \"NeverSeen\"", r.loc, Collector())) if k == 2 else r
             for k, r in enumerate(PACK.configs["graph_lint"].input_rules)]
    cfg = replace(PACK.configs["graph_lint"], input_rules=rules)
    path = tmp_path / "g.yaml"
    path.write_text(random_graph(random.Random(7), 60))
    model, options = load_yaml_graph(path, PACK)
    default = lint.GraphLint(RunContext(PACK, model, options), PACK.configs["graph_lint"], PACK.passes["graph_lint"])
    partial = lint.GraphLint(RunContext(PACK, model, options), cfg, PACK.passes["graph_lint"])
    assert default.total and not partial.total
    list(partial.conflicts(model.root))
    assert not partial.lazy and len(partial.rw) == sum(1 for n in model.all_nodes() if not n.subgraphs)
