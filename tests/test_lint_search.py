"""graph_lint's bounded pair searches (Note [pair search], Note [adjacency cache]): the searches
over cached neighbour lists decide every pair as the plain per-visit search does and spend the
same work units (what `--budget` counts), and each node's edges are listed once per graph."""
from __future__ import annotations

import random
import tempfile
from pathlib import Path

import pytest

from benchmarks.gen_graph import make_model
from engine.core.dumpio import build_model, parse_binary
from engine.core.surgery import unlink
from engine.core.yamlgraph import load_yaml_graph
from engine.passes.algorithms import lint
from engine.passes.context import RunContext
from harness import shared_pack
from test_lint import random_graph


def plain_search(a, b, pos, control, budget):
    """The search as Note [pair search] states it, listing a node's edges at every visit:
    (answer, work units spent)."""
    lo, hi = pos[a], pos[b]
    spent = 0
    for forward in (True, False):
        start, goal = (a, b) if forward else (b, a)
        seen, stack, left = {start}, [start], budget
        stopped = False
        while stack:
            x = stack.pop()
            if forward:
                left -= sum(len(o.peers) for o in x.outs) + (len(x.out_ctrl) if control else 0)
                nbrs = [p.node for o in x.outs for p in o.peers] + (list(x.out_ctrl) if control else [])
            else:
                left -= len(x.ins) + (len(x.in_ctrl) if control else 0)
                nbrs = [i.peer.node for i in x.ins if i.peer is not None] + (list(x.in_ctrl) if control else [])
            if left < 0:
                stopped = True
                break
            if any(y is goal for y in nbrs):
                return True, spent + budget - left
            inside = []
            for y in nbrs:
                py = pos.get(y)
                if py is not None and y not in seen and (pos[x] < py < hi if forward else lo < py < pos[x]):
                    seen.add(y)
                    inside.append((py if forward else -py, id(y), y))
            stack.extend(y for _, _, y in sorted(inside))
        if not stopped:
            return False, spent + budget - left
        spent += budget
    return None, spent


def _models():
    out = []
    for seed in range(3):
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "g.yaml"
            path.write_text(random_graph(random.Random(seed), 120))
            model = load_yaml_graph(path, shared_pack())[0]
        # some inputs left unconnected: going back they cost their count but lead nowhere
        rng = random.Random(seed)
        for node in model.root.nodes():
            for a in node.ins:
                if a.peer is not None and rng.random() < 0.15:
                    unlink(a.peer, a)
        out.append(model)
    out.append(build_model(make_model(800, seed=1, hub=0.4)))      # a NoOp controlling 40 %
    return out


def _order(model):
    pack = shared_pack()
    gl = lint.GraphLint(RunContext(pack, model, {}), pack.configs["graph_lint"], pack.passes["graph_lint"])
    graphs = []
    gl.sort(model.root, graphs)
    return gl.orders[model.root], gl.pos


@pytest.mark.parametrize("k", range(4))
@pytest.mark.parametrize("control", [True, False])
def test_cached_searches_answer_and_spend_as_the_plain_search(k, control):
    model = _models()[k]
    order, pos = _order(model)
    rng = random.Random(k)
    pairs = [tuple(sorted(rng.sample(order, 2), key=pos.__getitem__)) for _ in range(300)]
    answers = set()
    for budget in (1, 3, 8, lint.BUDGET):
        reach = lint._Reach(order, pos, {}, control)       # one adjacency cache for all its searches
        for a, b in pairs:
            before = reach.work
            got = lint._search(a, b, pos, control, budget, reach)
            want, work = plain_search(a, b, pos, control, budget)
            assert (got, reach.work - before) == (want, work), (a, b, budget)
            answers.add(got)
    assert answers == {True, False, None}, "the pairs should exercise every outcome"


class _CountedGets(dict):
    def __init__(self):
        super().__init__()
        self.gets = 0

    def get(self, key, default=None):
        self.gets += 1
        return super().get(key, default)


def test_each_node_is_listed_once_per_graph(monkeypatch):
    """The searches visit many nodes more than once (the pairs of one writer start alike);
    a node's edges are read once, and a hub's (more edges than one search may spend) never
    cost a search more than its count."""
    model = build_model(make_model(1500, seed=2, hub=0.4))
    order, pos = _order(model)
    built: list[tuple] = []
    adjacency = lint._Reach.adjacency

    def counted(self, x, forward):
        built.append((x, forward))
        return adjacency(self, x, forward)
    monkeypatch.setattr(lint._Reach, "adjacency", counted)
    rng = random.Random(0)
    pairs = [tuple(sorted(rng.sample(order, 2), key=pos.__getitem__)) for _ in range(400)]
    reach = lint._Reach(order, pos, {}, True)
    reach.forward, reach.backward = _CountedGets(), _CountedGets()
    for a, b in pairs:
        lint._search(a, b, pos, True, lint.BUDGET, reach)
    visits = reach.forward.gets + reach.backward.gets
    assert len(built) == len(set(built)) == len(reach.forward) + len(reach.backward)
    assert visits > 2 * len(built), (visits, len(built))
    hub = max(order, key=lambda n: len(n.out_ctrl))
    cost, keys, nodes = reach.forward.get(hub) or reach.adjacency(hub, True)
    assert cost > lint.BUDGET and keys == nodes == []


def _budgeted(model, budget):
    """(nodes in search order, unverified pairs, budget events) of one budgeted lint, by name;
    and the lint."""
    pack = shared_pack()
    ctx = RunContext(pack, model, {})
    ctx.budgets = {"graph_lint": budget}
    gl = lint.GraphLint(ctx, pack.configs["graph_lint"], pack.passes["graph_lint"])
    list(gl.conflicts(model.root))
    reach = gl.reach[model.root]
    return ([n.name for n in gl.partners[model.root]], sorted((a.name, b.name) for a, b in reach.unverified),
            [(e.needed, e.where) for e in ctx.budget_events]), gl


def test_searches_follow_the_graph_not_addresses():
    """Note [search order]: writers and readers are met in graph, output and peer order, so a
    budget buys the same pairs however the nodes lie in memory (sets of nodes iterate by address)."""
    data = make_model(1500, seed=4, hub=0.4).SerializeToString()
    first = build_model(parse_binary(data, "<a>"))
    ballast = [[object() for _ in range(k % 7)] for k in range(20000)]     # the next load lies elsewhere
    second = build_model(parse_binary(data, "<b>"))
    for budget in (40, 400, 4000):
        got, _ = _budgeted(first, budget)
        assert got == _budgeted(second, budget)[0] and got[1], budget
    del ballast
    (names, _, _), gl = _budgeted(first, 40)
    met = []
    for n in gl.orders[first.root]:
        for o in n.outs:
            types = [gl.known_type(p) for p in o.peers]
            if len(o.peers) >= 2 and gl.W in types:
                met += [p.node.name for p, t in zip(o.peers, types) if t == gl.W]
                met += [p.node.name for p, t in zip(o.peers, types) if t == gl.RO]
    assert names == list(dict.fromkeys(met))
