"""Note [mark guards]: a per-anchor mark's leading node-level conjuncts are evaluated once
per node, the rest per anchor only where they hold; the marks are those of each mark's
whole condition evaluated per anchor."""
from __future__ import annotations

from collections import Counter

import pytest

from engine.core.dumpio import load_model
from engine.core.errors import Collector, Loc
from engine.core.yamlgraph import load_yaml_graph
from engine.pack.loader import parse_rule_expr
from engine.passes.algorithms import layout
from engine.passes.algorithms.layout import MARK_VARS, LayoutPass
from engine.passes.context import RunContext
from engine.passes.manager import check_graph
from harness import CASES, ROOT, shared_pack

PACK = shared_pack()
RTS_CASE = CASES / "layout" / "own-continuous_rts-in.yaml"


def _pass(model, opts=None) -> LayoutPass:
    ctx = RunContext(PACK, model, opts or {})
    check_graph(ctx)
    spec = PACK.passes["mem_layout_conflict"]
    lp = LayoutPass(ctx, PACK.configs["layout_conflict"], spec)
    lp.graph = model.root
    lp.table = lp.sym.build(model, model.root)
    return lp


def _whole_marks(lp: LayoutPass, node, side: str) -> dict:
    """Each anchor's marks by every mark's whole condition, evaluated per anchor."""
    cfg = lp.cfg
    marks, default = (cfg.input_marks, cfg.input_default) if side == "in" else (cfg.output_marks, cfg.output_default)
    fns = [(m.attr, lp.comp.function(m.when, MARK_VARS)) for m in marks]
    out = {}
    for a in (node.ins if side == "in" else node.outs):
        out[a] = tuple(attr for attr, f in fns if f(node, a, lp.graph)) or (default,)
    return out


@pytest.mark.parametrize("path", [RTS_CASE, ROOT / "examples" / "train_step.pbtxt"], ids=["rts-case", "example"])
def test_guarded_marks_are_the_whole_conditions_marks(path):
    model = load_yaml_graph(path, PACK)[0] if path.suffix == ".yaml" else load_model(path)
    lp = _pass(model)
    nodes = model.all_nodes(model.root)
    for n in nodes:
        lp.mark_node(n, model.root)
    want = {}
    for n in nodes:
        want.update(_whole_marks(lp, n, "in"))
        want.update(_whole_marks(lp, n, "out"))
    assert {a: lp.marks[a] for a in want} == want
    if path == RTS_CASE:
        assert lp.marks[model.root.find("rts").ins[0]] == ("RTS_SPECIAL_TYPE_INPUT",)


def test_the_rest_of_a_guarded_mark_runs_only_where_its_guard_holds(monkeypatch):
    """The memory-type marks ask memory_type(anchor) only of the nodes that carry the
    list: one anchor in the RTS case, where every anchor was asked before."""
    calls: Counter = Counter()
    orig = layout._mark_fns

    def counting(m, fn):
        m_, level, rest = orig(m, fn)
        if rest is not None:
            def counted(node, anchor, graph, rest=rest, attr=m.attr):
                calls[(attr, node.name)] += 1
                return rest(node, anchor, graph)
            return m_, level, counted
        return m_, level, rest
    monkeypatch.setattr(layout, "_mark_fns", counting)
    model = load_yaml_graph(RTS_CASE, PACK)[0]
    lp = _pass(model)
    for n in model.all_nodes(model.root):
        lp.mark_node(n, model.root)
    rts_in = {name for (attr, name) in calls if attr == "RTS_SPECIAL_TYPE_INPUT"}
    assert rts_in == {"rts"}
    # the unguarded per-anchor mark is still asked of every output
    outputs = sum(len(n.outs) for n in model.all_nodes(model.root))
    assert sum(k for (attr, _), k in calls.items() if attr == "REFERENCE_OUTPUT") == outputs > 1


def _split(text: str):
    guard, rest = layout.split_guard(parse_rule_expr(text, Loc("t"), Collector()))
    return (None if guard is None else str(guard)), (None if rest is None else str(rest))


def test_a_guard_is_the_leading_conjuncts_that_do_not_name_the_anchor():
    guard, rest = _split('has_attr(node, "k") and (count(node.ins) > 1 and desc_attr(anchor, "y") != none) and count(node.outs) > 0')
    assert guard == 'has_attr(node, "k") and count(node.ins) > 1'
    assert rest == 'desc_attr(anchor, "y") != none and count(node.outs) > 0'
    # a first conjunct naming the anchor: no guard, the whole condition per anchor
    guard, rest = _split('desc_attr(anchor, "y") != none and has_attr(node, "k")')
    assert guard is None and rest == 'desc_attr(anchor, "y") != none and has_attr(node, "k")'
    # a disjunction is not split
    guard, rest = _split('has_attr(node, "k") or desc_attr(anchor, "y") != none')
    assert guard is None
    # no anchor at all: node-level, no per-anchor part
    guard, rest = _split('has_attr(node, "k") and count(node.ins) > 1')
    assert guard == 'has_attr(node, "k") and count(node.ins) > 1' and rest is None


def test_a_sides_node_level_conditions_are_one_call_a_node():
    """Note [one call a side]: a node's input side, the outputs' further conditions and a
    node without inputs each cost one call of one compiled list, whose values are those of
    the conditions one by one (test_guarded_marks_are_the_whole_conditions_marks checks the
    marks they lead to)."""
    model = load_model(ROOT / "examples" / "train_step.pbtxt")
    lp = _pass(model)
    calls: Counter = Counter()
    in_f, in_side, extra_f, out_side, out_f, alone_side = lp._plans_of_marks

    def counted(name, f):
        def run(node, anchor, graph):
            calls[name] += 1
            return f(node, anchor, graph)
        return run
    lp._plans_of_marks = (counted("in", in_f), in_side, counted("extra", extra_f), out_side, counted("alone", out_f),
                          alone_side)
    nodes = model.all_nodes(model.root)
    for n in nodes:
        lp.mark_node(n, model.root)
    with_ins = [n for n in nodes if n.ins]
    assert calls == Counter(**{"in": len(with_ins), "extra": sum(1 for n in with_ins if n.outs),
                               "alone": sum(1 for n in nodes if not n.ins and n.outs)})
    # the list's values are each condition's, in the order the plans index them
    conds = [m.guard for m in lp.cfg.input_marks if m.guard is not None]
    fns = [lp.comp.function(e, MARK_VARS) for e in dict.fromkeys(conds, None)]
    for n in with_ins[:50]:
        assert in_f(n, None, model.root) == tuple(f(n, None, model.root) for f in fns)


@pytest.mark.parametrize("path", [RTS_CASE, ROOT / "examples" / "train_step.pbtxt"], ids=["rts-case", "example"])
def test_the_walk_skips_only_symbols_that_find_nothing(path):
    """Note [candidate symbols]: every symbol left out of the walk finds no conflict, and
    those walked are the rest in name order."""
    model = load_yaml_graph(path, PACK)[0] if path.suffix == ".yaml" else load_model(path)
    lp = _pass(model)
    lp.marks = {}
    for node in model.all_nodes(model.root):
        lp.mark_node(node, model.root)
    walked = lp._candidates()
    assert walked == sorted(walked) and len(set(walked)) == len(walked)
    skipped = set(lp.table.anchors) - set(walked)
    assert skipped and walked
    for name in skipped:
        assert lp.find_conflicts(list(lp.table.anchors[name])) == {}
