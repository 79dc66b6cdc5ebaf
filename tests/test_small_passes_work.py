"""The work the small passes skip (Note [steps by node type], Note [inert steps]): counted
calls, and the same graph as the full walk."""
from __future__ import annotations

from collections import Counter

from engine.core.dumpio import save_model
from engine.core.yamlgraph import load_yaml_graph
from engine.passes.algorithms import rewrite
from engine.passes.context import RunContext
from engine.passes.manager import check_graph, resolve_passes, run_passes
from harness import CASES, shared_pack

PACK = shared_pack()
SG = CASES / "subgraph" / "SG-04.yaml"


def _counting(monkeypatch, calls: Counter, full: bool = False):
    """Wrap every compiled step's match to count (step, node type); `full` turns the
    per-type step choice off (every step tried on every node, as before)."""
    orig = rewrite.compiled
    done = set()

    def compiled(ctx, family, spec):
        c = orig(ctx, family, spec)
        if id(c) not in done:
            done.add(id(c))

            def wrap(st, m):
                def match(graph, node):
                    calls[(spec.id, st.name, node.type)] += 1
                    return m(graph, node)
                return match
            c.steps = [(st, wrap(st, m), lets, rules) for st, m, lets, rules in c.steps]
            if full:
                c.needs = [None] * len(c.steps)
                c.inert = False
            c.by_type.clear()
        return c
    monkeypatch.setattr(rewrite, "compiled", compiled)


def _run(path, passes, tmp_path, name):
    model, opts = load_yaml_graph(path, PACK)
    ctx = RunContext(PACK, model, opts)
    check_graph(ctx)
    run_passes(ctx, resolve_passes(PACK, passes, opts))
    out = tmp_path / f"{name}.pb"
    save_model(model, out)
    return model, out.read_bytes()


def _counted_runs(monkeypatch, tmp_path, passes, name):
    """Run `passes` on SG twice, counting the steps' match calls: every node asked (full),
    then as the engine asks; (full counts, counts, model of the second run, bytes, bytes)."""
    full: Counter = Counter()
    with monkeypatch.context() as m:
        _counting(m, full, full=True)
        _, before = _run(SG, passes, tmp_path, "full")
    typed: Counter = Counter()
    _counting(monkeypatch, typed)
    model, after = _run(SG, passes, tmp_path, name)
    return full, typed, model, before, after


def test_steps_are_tried_only_on_nodes_of_their_class(monkeypatch, tmp_path):
    full, typed, model, before, after = _counted_runs(monkeypatch, tmp_path, ["subgraph"], "typed")
    assert after == before                  # the same graph, byte for byte
    classes = PACK.class_sets()
    needs = {"while-inputs": classes["while_like"], "subgraph-netoutput": classes["netoutput"],
             "cond-outputs": classes["cond_like"], "subgraph-data-source": classes["data"]}
    for (_, step, t), k in typed.items():
        if step in needs:
            assert t in needs[step], (step, t)
    nodes = len(model.all_nodes(model.root))
    assert sum(full.values()) > sum(typed.values())
    # a While-like step is asked once per While-like node visited, not once per node
    whiles = sum(k for (_, step, t), k in full.items() if step == "while-inputs" and t in classes["while_like"])
    assert typed[next(k for k in typed if k[1] == "while-inputs")] == whiles
    assert sum(k for (_, step, _), k in typed.items() if step == "while-inputs") == whiles < nodes


def test_node_types_needed_reads_only_safe_conjunctions():
    from engine.core.errors import Collector, Loc
    from engine.pack.loader import parse_rule_expr
    classes = PACK.class_sets()

    def need(text):
        return rewrite.node_types_needed(parse_rule_expr(text, Loc("t"), Collector()), classes)
    assert need("node is while_like") == classes["while_like"]
    assert need("in_subgraph(graph) and node is data") == classes["data"]
    assert need("(node is data and count(node.outs) > 0)") == classes["data"]
    assert need("node is data and node is netoutput") == classes["data"] & classes["netoutput"]
    # a conjunct before the test that reads the node may fail on it: no skipping
    assert need("count(node.outs) == 1 and node is data") is None
    assert need("node is not data") is None
    assert need("node is data or node is netoutput") is None
    assert need("true") is None


def test_always_matching_inert_steps_do_not_walk_the_nodes(monkeypatch, tmp_path):
    full, typed, _, before, after = _counted_runs(monkeypatch, tmp_path, ["topological_sorting"], "inert")
    assert after == before
    # the full walk asks the always-true match of every node; the inert run none
    model, _ = load_yaml_graph(SG, PACK)
    assert sum(full.values()) == len(model.root.node_list()) > 0        # run on the root graph
    assert sum(typed.values()) == 0


SILENT = """
graphs:
  root:
    nodes:
      relu: {type: Relu, inputs: 0, outputs: 1}
      allreduce: {type: HcomAllReduce, inputs: 1, outputs: 1, attrs: {_input_mutable: true}}
      netoutput: {type: NetOutput, inputs: 1, outputs: 0}
    edges: [relu -> allreduce, allreduce -> netoutput]
expect:
  passes: [hccl_memcpy]
"""


def test_a_rule_without_actions_or_reasons_is_not_fired(monkeypatch, tmp_path):
    p = tmp_path / "silent.yaml"
    p.write_text(SILENT)
    fired = []
    orig = rewrite._Compiled._fire

    def fire(self, rule, env, reason, actions, step):
        fired.append(rule.id)
        return orig(self, rule, env, reason, actions, step)
    monkeypatch.setattr(rewrite._Compiled, "_fire", fire)
    held = Counter()
    orig_step = rewrite._Compiled._step

    def step(self, graph, node, st, lets, rules):
        def when_of(rule, when):
            def w(*env):
                r = when(*env)
                if r:
                    held[rule.id] += 1
                return r
            return w
        return orig_step(self, graph, node, st, lets, [(r, when_of(r, w), rs, a) for r, w, rs, a in rules])
    monkeypatch.setattr(rewrite._Compiled, "_step", step)
    model, _ = _run(p, ["hccl_memcpy"], tmp_path, "silent")
    # relu's output feeds only the collective: hccl/single-consumer holds, has no `do`, is not fired
    assert held["hccl/single-consumer"] == 1
    assert fired == []
    assert "_skip_rw_conflict" not in model.root.find("allreduce").op.attr
    assert len(model.root.node_list()) == 3
