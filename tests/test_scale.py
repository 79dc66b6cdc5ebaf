"""Production scale: the save and graph_lint do linear work (counted, not timed), and the
default pipeline is byte-idempotent on dumps that carry GE's peer-index attribute."""
from __future__ import annotations

import gc
from pathlib import Path

import pytest

from benchmarks.gen_graph import make_model
from engine.core import graph as graph_mod
from engine.core.dumpio import PEER_INDEX_ATTR, build_model, load_model, parse_binary, read_modeldef, serialize_model
from engine.core.graph import InAnchor, Node
from engine.passes.context import RunContext
from engine.passes.manager import check_graph, resolve_passes, run_passes
from engine.proto import ge_ir_pb2 as pb
from harness import ROOT, ge_dumps, needs_ge_dumps, repeated_ctrl, shared_pack

EXAMPLE = ROOT / "examples" / "train_step.pbtxt"
DUMPS = sorted(ge_dumps().glob("*.txt"))
ROOT = Path(__file__).resolve().parents[1]


def _with_peer_index(proto: pb.ModelDef) -> bytes:
    """The dump as GE writes it today: every op carries `_src_out_peer_index_for_ge_txt_load`."""
    model = build_model(proto)
    model.emit_peer_index = True
    return serialize_model(model)


def _pipeline(data: bytes) -> bytes:
    model = build_model(parse_binary(data, "<test>"))
    pack = shared_pack()
    ctx = RunContext(pack, model, {})
    check_graph(ctx)
    run_passes(ctx, resolve_passes(pack, None, {}))
    return serialize_model(model)


def _assert_idempotent(data: bytes) -> None:
    once = _pipeline(data)
    twice = _pipeline(once)
    if repeated_ctrl(once):
        # GE's reload drops a repeated control edge that carries the peer index (Note
        # [repeated control edges] in engine/core/surgery.py): from there on it is a fixpoint
        assert repeated_ctrl(twice) == 0 and len(twice) < len(once)
        once = twice
        twice = _pipeline(once)
    assert twice == once


# ---- idempotence ----------------------------------------------------------------------
def test_peer_index_reloads_in_the_order_it_was_written():
    """GE's loader files control edges under their source by the recorded index too: a
    source whose successors are written in another order than the file's gets them back."""
    text = """
    graph { name: "g"
      op { name: "a" type: "Data" output_desc { } }
      op { name: "b" type: "Relu" input: "a:-1" output_desc { }
           attr { key: "_src_out_peer_index_for_ge_txt_load" value { list { i: 1 val_type: VT_LIST_INT } } } }
      op { name: "c" type: "Relu" input: "a:-1" input: "b:-1" output_desc { }
           attr { key: "_src_out_peer_index_for_ge_txt_load" value { list { i: 0 i: 0 val_type: VT_LIST_INT } } } }
    }"""
    from google.protobuf import text_format
    model = build_model(text_format.Parse(text, pb.ModelDef()))
    a, b, c = (model.root.find(x) for x in "abc")
    assert a.out_ctrl == [c, b]
    assert c.in_ctrl == [a, b]                 # the destination keeps the file's order
    again = pb.ModelDef()
    again.ParseFromString(serialize_model(model))
    assert [list(op.attr[PEER_INDEX_ATTR].list.i) for op in again.graph[0].op[1:]] == [[1], [0, 0]]


def test_pipeline_is_idempotent_on_the_example():
    _assert_idempotent(_with_peer_index(read_modeldef(EXAMPLE)))


def _ops_up_to_order(data: bytes) -> dict[str, list[bytes]]:
    """Each graph's ops, ids cleared, in name order: the graph but for the order of its
    nodes and subgraphs."""
    md = parse_binary(data, "<test>")
    out = {}
    for g in md.graph:
        ops = []
        for op in g.op:
            op.id = 0
            ops.append((op.name, op.SerializeToString(deterministic=True)))
        out[g.name] = sorted(ops)
    return out


def test_pipeline_without_peer_order_decides_the_same_again():
    """A dump without the peer-index attribute reads each output's consumers back in file
    order, which GE's sort reads: the second run may order the nodes otherwise, as GE's
    would, but it inserts and removes nothing and every op is as the first run left it
    (Note [pipeline fixpoint] in tests/test_pipeline_real.py)."""
    once = _pipeline(read_modeldef(EXAMPLE).SerializeToString())
    twice = _pipeline(once)
    assert _ops_up_to_order(twice) == _ops_up_to_order(once)


@pytest.mark.parametrize("path", DUMPS, ids=[p.name for p in DUMPS])
@needs_ge_dumps
def test_pipeline_is_idempotent_on_ge_dumps(path):
    _assert_idempotent(_with_peer_index(read_modeldef(path)))


def test_pipeline_is_idempotent_on_a_training_step():
    """AtomicAddrClean's MemSet takes control edges to its atomic nodes in its own order;
    a second run used to reload them in file order and rewrite their peer indices."""
    _assert_idempotent(_with_peer_index(make_model(2000, seed=1)))


# ---- counted work -------------------------------------------------------------------------
class _Count:
    def __init__(self):
        self.n = 0


@pytest.fixture
def eq_calls(monkeypatch):
    """Counts equality tests between distinct nodes or anchors: every step of a list scan
    (`list.index`, `in`, `remove`) over them is one; dict lookups by identity are none."""
    count = _Count()

    def eq(self, other):
        count.n += 1
        return self is other

    for cls in (Node, InAnchor, graph_mod.OutAnchor):
        monkeypatch.setattr(cls, "__eq__", eq, raising=False)
        monkeypatch.setattr(cls, "__hash__", object.__hash__, raising=False)
    return count


def _fan_graph(n: int) -> pb.ModelDef:
    """One node controlling every other one and one output read by all of them."""
    m = pb.ModelDef()
    g = m.graph.add(name="g")
    src = g.op.add(name="hub", type="Data")
    src.output_desc.add()
    for k in range(n):
        op = g.op.add(name=f"n{k}", type="Relu", input=["hub:0", "hub:-1"])
        op.input_desc.add()
        op.output_desc.add()
    return m


@pytest.mark.parametrize("size", [500, 2000])
def test_save_does_linear_work(size, eq_calls):
    model = build_model(_fan_graph(size))
    model.emit_peer_index = True
    gc.collect()
    eq_calls.n = 0
    data = serialize_model(model)
    # a list.index per edge would compare size²/2 times for each of the two lists
    assert eq_calls.n <= 16 * size
    again = pb.ModelDef()
    again.ParseFromString(data)
    assert list(again.graph[0].op[-1].attr[PEER_INDEX_ATTR].list.i) == [size - 1, size - 1]


@pytest.mark.parametrize("size", [500, 2000])
def test_moving_a_hubs_edges_in_order_does_linear_work(size, eq_calls):
    """mem_rw_conflict's pattern: an Identity goes in front of each of a hub's consumers in
    graph order, taking over the consumer's place in the hub's data peers and the hub's
    control edge to it (Note [hinted search]). `list.remove`/`index` from the front
    compared size²/2 times per list."""
    from engine.core import surgery
    model = build_model(_fan_graph(size))
    hub = model.root.find("hub")
    targets = [model.root.find(f"n{k}") for k in range(size)]
    gc.collect()
    eq_calls.n = 0
    idents = [surgery.insert_before(t.ins[0], pb.OpDef(name=f"id{t.name}", type="Identity")) for t in targets]
    assert eq_calls.n <= 16 * size, eq_calls.n
    assert hub.outs[0].peers == [i.ins[0] for i in idents]
    assert hub.out_ctrl == idents and all(list(t.in_ctrl) == [] and i.in_ctrl == [hub] for t, i in zip(targets, idents))


def test_hinted_search_finds_what_list_index_finds():
    import random
    from engine.core import surgery
    rng = random.Random(7)
    for _ in range(200):
        items = [object() for _ in range(rng.randint(0, 200))]
        ref = list(items)
        for _ in range(rng.randint(0, len(items))):
            near = surgery._hints.get(id(items), 0) + rng.randint(-3, 40)
            x = rng.choice(items) if rng.random() < 0.5 else items[max(0, min(len(items) - 1, near))]
            assert surgery.position(items, x) == ref.index(x)
            surgery._remove(items, x)
            ref.remove(x)
            assert items == ref
        with pytest.raises(ValueError):
            surgery.position(items, object())


def _nested_model():
    """root: a, if1 (then t1, else e1), b; t1: x, if2 (then t2, no else), y; t2: w."""
    m = pb.ModelDef()
    graphs = {"root": [("a", []), ("if1", ["t1", "e1"]), ("b", [])], "t1": [("x", []), ("if2", ["t2", ""]), ("y", [])],
              "e1": [("z", [])], "t2": [("w", [])]}
    for name, ops in graphs.items():
        g = m.graph.add(name=name)
        for op, subs in ops:
            g.op.add(name=op, type="If" if subs else "Relu", subgraph_name=subs)
    return build_model(m)


def test_snapshots_list_what_the_walk_visits():
    """all_nodes/all_subgraphs/node_list (stack loops) against graph.walk, nested
    subgraphs included, also after a node owning subgraphs leaves its graph."""
    from engine.core.graph import Graph, walk
    from engine.core import surgery
    model = _nested_model()

    def check():
        for g in model.graph_order:
            seen = list(walk(g))
            assert model.all_nodes(g) == [x for x in seen if isinstance(x, Node)]
            under = [x for x in seen if isinstance(x, Graph)]
            if g is model.root:     # GetAllSubgraphs: the model's list of them, those still owned
                assert model.all_subgraphs(g) == [x for x in model.graph_order if x in under]
            else:
                assert model.all_subgraphs(g) == under
            assert g.node_list() == list(g.nodes())
    check()
    assert [n.name for n in model.all_nodes()] == ["a", "if1", "x", "if2", "w", "y", "z", "b"]
    assert [g.name for g in model.all_subgraphs()] == ["t1", "e1", "t2"]     # the model's order
    surgery.remove_node(model.graphs["t1"].find("if2"))
    check()
    assert [n.name for n in model.all_nodes()] == ["a", "if1", "x", "y", "z", "b"]


# ---- graph_lint's reachability --------------------------------------------------------------
from engine.passes.algorithms import lint  # noqa: E402


def _lint(model, budget=None):
    """Every conflict of the full scan, and the connected pairs the reachability kept."""
    pack = shared_pack()
    ctx = RunContext(pack, model, {})
    gl = lint.GraphLint(ctx, pack.configs["graph_lint"], pack.passes["graph_lint"])
    gl.eager = True         # the reachability built up front, whose pairs these tests read
    init = lint._Reach.__init__

    def with_budget(self, *args):
        init(self, *args, search=budget)

    lint._Reach.__init__ = with_budget
    try:
        found = [(g.name, o.key, w.key, x.key, k) for g, o, w, x, k in gl.conflicts(model.root)]
    finally:
        lint._Reach.__init__ = init
    linked = {(a.name, b.name) for r in gl.reach.values() for a, b in r.linked}
    return found, linked, gl


@pytest.mark.parametrize("seed", range(6))
def test_lint_searches_decide_as_the_sweep(seed, monkeypatch):
    """Bounded searches, the sweep alone (budget 0) and a mix (tiny budget, many sweeps)
    find the same connected pairs and the same conflicts."""
    import random
    from test_lint import random_graph
    from engine.core.yamlgraph import load_yaml_graph
    import tempfile
    monkeypatch.setattr(lint, "CHUNK", 5)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "g.yaml"
        path.write_text(random_graph(random.Random(seed), 150))
        model, _ = load_yaml_graph(path, shared_pack())
    results = [_lint(model, b)[:2] for b in (None, 0, 3)]
    assert results[0][1], "the random graph should have ordered pairs"
    assert results[0] == results[1] == results[2]


@pytest.mark.parametrize("hub", [0.0, 0.4])
def test_lint_searches_decide_as_the_sweep_on_a_training_step(hub, monkeypatch):
    monkeypatch.setattr(lint, "CHUNK", 64)
    model = build_model(make_model(3000, seed=2, hub=hub))
    fast, slow = _lint(model)[:2], _lint(model, 0)[:2]
    assert fast == slow and fast[0], "the training step has conflicts to find"


def _count_edge_reads(mp: pytest.MonkeyPatch, count: _Count) -> None:
    """Count every read of a node's edge lists (ins, outs, in_ctrl, out_ctrl) in `count`."""
    for slot in ("ins", "outs", "in_ctrl", "out_ctrl"):
        member = Node.__dict__[slot]

        def get(self, member=member):
            count.n += 1
            return member.__get__(self, Node)
        mp.setattr(Node, slot, property(get, member.__set__))


def _counted_reach_work(model, budget=None) -> int:
    """Reads of a node's edge lists while graph_lint builds its reachability."""
    _, _, gl = _lint(model, budget)
    root = model.root
    count = _Count()
    init = lint._Reach.__init__
    with pytest.MonkeyPatch.context() as mp:
        _count_edge_reads(mp, count)
        mp.setattr(lint._Reach, "__init__", lambda self, *args: init(self, *args, search=budget))
        gl.reach.pop(root, None)
        gl.build_reach(root)
    return count.n


@pytest.mark.parametrize("hub", [0.0, 0.4])
def test_lint_reachability_does_linear_work(hub, monkeypatch):
    """4× the nodes, at most ~4× the edge-list reads. (With sweeps of 64 sources, the
    sweep alone — the reachability before the bounded searches — reads 9× as many.)"""
    monkeypatch.setattr(lint, "CHUNK", 64)
    models = [build_model(make_model(n, seed=0, hub=hub)) for n in (1500, 6000)]
    small, large = (_counted_reach_work(m) for m in models)
    assert large <= 5 * small, (small, large)
    if hub == 0.0:      # the same bound fails for the sweep alone (9×)
        sweep_small, sweep_large = (_counted_reach_work(m, budget=0) for m in models)
        assert sweep_large > 5 * sweep_small, (sweep_small, sweep_large)


def _counted_asked_work(model) -> int:
    """Edge-list reads of graph_lint deciding, as they are asked (Note [pairs as asked]),
    every writer/reader pair the up-front reachability would decide: a graph whose every
    shared output is asked about, as one without a conflict is."""
    _, _, gl = _lint(model)
    root = model.root
    gl.build_reach(root)
    pairs = [(a, b) for a, bs in gl.partners[root].items() for b in bs if a is not b]
    count = _Count()
    with pytest.MonkeyPatch.context() as mp:
        _count_edge_reads(mp, count)
        asked = lint._AskedReach(gl, root)
        answers = [asked.connected(a, b) for a, b in pairs]
    assert answers == [gl.reach[root].connected(a, b) for a, b in pairs]
    return count.n


@pytest.mark.parametrize("hub", [0.0, 0.4])
def test_lint_pairs_decided_as_asked_do_linear_work(hub):
    """4× the nodes, at most ~4× the edge-list reads when every pair is asked about, with the
    answers of the reachability built up front."""
    models = [build_model(make_model(n, seed=0, hub=hub)) for n in (1500, 6000)]
    small, large = (_counted_asked_work(m) for m in models)
    assert 0 < small and large <= 5 * small, (small, large)


# ---- benchmark graphs ---------------------------------------------------------------------
def test_generated_dump_attrs_are_what_a_save_writes():
    """--dump-attrs graphs carry the peer index on every op, as GE's dump writes it: loading
    and saving one changes no byte."""
    proto = make_model(2000, seed=3, dump_attrs=True)
    data = proto.SerializeToString(deterministic=True)
    assert all(PEER_INDEX_ATTR in op.attr and len(op.attr[PEER_INDEX_ATTR].list.i) == len(op.input)
               for g in proto.graph for op in g.op)
    assert all("format_for_int" in d.attr for op in proto.graph[0].op for d in op.output_desc)
    model = build_model(parse_binary(data, "<gen>"))
    assert model.emit_peer_index
    assert serialize_model(model) == data


def test_generated_hub_controls_the_share_asked_for():
    proto = make_model(2000, seed=0, hub=0.4)
    assert sum(len(g.op) for g in proto.graph) == 2000
    model = build_model(proto)
    hub = model.root.find("init_barrier")
    assert model.root.head is hub and len(hub.out_ctrl) == 800
    assert [n.id for n in model.root.nodes()] == list(range(model.root.count))


def test_ops_the_passes_add_live_in_the_models_op_memory():
    """Note [op memory]: the nodes the pipeline inserts on the example have their ops made
    inside the model's holder message, not each in memory of its own."""
    model = load_model(ROOT / "examples" / "train_step.pbtxt")
    loaded = {n for n in model.all_nodes()}
    pack = shared_pack()
    ctx = RunContext(pack, model, {})
    check_graph(ctx)
    run_passes(ctx, resolve_passes(pack, None, {}))
    added = [n for n in model.all_nodes() if n not in loaded]
    assert len(added) >= 5
    held = list(model._ops.op)
    inside = [n for n in added if any(n.op is op for op in held)]
    assert inside == added


def test_no_collection_runs_during_the_passes_or_the_save(tmp_path):
    """Note [gc]: the collector stays off over the whole pass list and the save. Back on
    between passes (or during a save), each first collection walked everything the passes
    had made; the count of collections, not a timing, catches a relapse."""
    from engine.core.dumpio import save_model
    from engine.core.gcpause import no_gc
    src = tmp_path / "step.pb"
    src.write_bytes(make_model(2000, dump_attrs=True).SerializeToString(deterministic=True))
    with no_gc():
        model = load_model(src)
    pack = shared_pack()
    ctx = RunContext(pack, model, {})
    check_graph(ctx)
    passes, out = resolve_passes(pack, None, {}), tmp_path / "out.pb"
    # at most the one collection the first allocation after the collector is back on makes
    # (the counts kept growing while it was off); pass by pass it was one per pass
    assert len(_collections(lambda: run_passes(ctx, passes))) <= 1
    assert len(_collections(lambda: save_model(model, out))) <= 1
    assert gc.isenabled()
    assert len(ctx.insertions) > 0 and out.stat().st_size > 0


def _collections(work) -> list[int]:
    """The generations collected while `work` runs, from zeroed counts (a collection then
    takes ~700 allocations made with the collector on)."""
    runs: list[int] = []
    count = lambda phase, info: runs.append(info["generation"]) if phase == "start" else None
    gc.collect()
    gc.callbacks.append(count)
    try:
        work()
    finally:
        gc.callbacks.remove(count)
    return runs


def test_scale_table_measures_the_command_too(tmp_path, capsys):
    """benchmarks/scale.py at two small sizes prints its one table, which ends with the
    command itself (`memconflict run FILE --out`, run in a child) beside the stages."""
    from benchmarks import scale
    assert scale.main(["--sizes", "400,800", "--cache", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    rows = {line.split("  ")[0].strip(): line.split() for line in out.splitlines()}
    for name in ("load", "mem_layout_conflict", "save", "total", "of which system CPU", "minor page faults",
                 "bare parse", "memconflict run (CPU)",
                 "memconflict run (wall)", "memconflict run peak RSS (MiB)"):
        assert name in rows, f"no row {name!r} in:\n{out}"
    cpu = rows["memconflict run (CPU)"]
    assert float(cpu[-3]) > 0 and float(cpu[-2]) > 0     # the command ran at both sizes
    # the system part of the stages' CPU time, and the page faults behind it, at each size
    total, system = rows["total"], rows["of which system CPU"]
    assert all(0 <= float(system[-3 + i]) <= float(total[-3 + i]) for i in range(2))
    assert all(int(f) > 0 for f in rows["minor page faults"][-2:])


def test_ab_scale_pairs_each_rounds_totals(monkeypatch, capsys):
    """benchmarks/ab_scale.py alternates the two trees (old first, then new first, ...),
    prints the best of each side per stage, and then each round's two totals with their
    ratio and the median ratio, which a drifting machine cannot bias the way it can bias
    two best-of figures taken at different times."""
    from benchmarks import ab_scale
    totals = {"OLD": iter([10.0, 12.0, 11.0]), "NEW": iter([9.0, 13.0, 10.0])}
    calls = []

    def fake_run(tree, size, cache):
        calls.append(tree)
        return {"load": 1.0 if tree == "OLD" else 0.5, "total": next(totals[tree])}

    monkeypatch.setattr(ab_scale, "run", fake_run)
    assert ab_scale.main(["OLD", "NEW", "--rounds", "3"]) == 0
    assert calls == ["OLD", "NEW", "NEW", "OLD", "OLD", "NEW"]
    out = capsys.readouterr().out.splitlines()
    rows = {line.split()[0]: line.split()[1:] for line in out if line and not line.startswith(("round", "median", "stage"))}
    assert rows["load"] == ["1.00", "0.50", "-50%"] and rows["total"] == ["10.00", "9.00", "-10%"]
    assert "round 2: total 12.00 -> 13.00 s, new/old 1.083" in out
    assert out[-1] == "median new/old 0.909 over 3 round(s); new faster in 2"


def test_ab_instructions_counts_three_steps_a_tree_and_takes_differences(monkeypatch, capsys, tmp_path):
    """benchmarks/ab_instructions.py: cachegrind's count read from its summary, three runs a
    tree (start-up, + load, + the rest), the parts as differences, and a clear exit without
    valgrind."""
    from benchmarks import ab_instructions as ab
    assert ab.parse_refs("==23886== \n==23886== I   refs:      7,720,019,607\n") == 7_720_019_607
    with pytest.raises(RuntimeError, match="no instruction count"):
        ab.parse_refs("==1== ERROR SUMMARY: 0 errors\n")
    fake = {("OLD", "start"): 2_000_000_000, ("OLD", "load"): 3_000_000_000, ("OLD", "all"): 8_000_000_000,
            ("NEW", "start"): 2_000_000_000, ("NEW", "load"): 2_900_000_000, ("NEW", "all"): 7_400_000_000}
    runs, compiled = [], []
    monkeypatch.setattr(ab, "count", lambda tree, step, graph, out: runs.append((tree, step)) or fake[(tree, step)])
    monkeypatch.setattr(ab, "compile_tree", compiled.append)
    monkeypatch.setattr(ab.shutil, "which", lambda name: "/usr/bin/valgrind")
    g = tmp_path / "g.pb"
    assert ab.main(["OLD", "NEW", "--graph", str(g), "--cache", str(tmp_path)]) == 0
    assert compiled == ["OLD", "NEW"]
    assert runs == [("OLD", "start"), ("NEW", "start"), ("OLD", "load"), ("NEW", "load"), ("OLD", "all"), ("NEW", "all")]
    out = capsys.readouterr().out.splitlines()
    rows = {line[:22].strip(): line[22:].split() for line in out[2:]}
    assert rows["start-up"] == ["2.000", "2.000", "+0.0%"]
    assert rows["load"] == ["1.000", "0.900", "-10.0%"]
    assert rows["passes + save"] == ["5.000", "4.500", "-10.0%"]
    assert rows["total after start-up"] == ["6.000", "5.400", "-10.0%"]
    monkeypatch.setattr(ab.shutil, "which", lambda name: None)
    assert ab.main(["OLD", "NEW", "--graph", str(g)]) == 2
    assert "valgrind is not installed" in capsys.readouterr().err
