"""The default pipeline on real and synthetic graphs: the dedicated passes insert
the counts observed there, and the pipeline is a fixed point of itself.

Note [pipeline fixpoint]: a second run over the pipeline's own output inserts
nothing and writes the bytes it read — on the shipped example, the GE dumps,
synthetic training steps and the fixtures in FIXPOINT — when the output is read
back as GE dumps it, with each output's consumers in their order (the attribute
_src_out_peer_index_for_ge_txt_load). GE's sort reads that order: read without it,
the consumers come back in file order and the second sort may order the graph
otherwise, as GE's would (tests/test_scale.py). Read back, the output is the bytes it
was, but for a repeated control edge, which GE's reload drops (AtomicAddrClean makes
them: Note [repeated control edges] in engine/core/surgery.py). It is not a fixed point
wherever a later pass changes what an earlier one tests, as in GE: a collective
fed by a RefData is no HCCL atomic node when AtomicAddrClean runs, but after
MemcpyAddrAsync has put a copy in front of it, it is one
(test_later_pass_changes_what_an_earlier_one_sees).
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from benchmarks.gen_graph import make_model
from engine.passes.context import RunContext
from engine.core.dumpio import build_model, load_model, serialize_model
from engine.proto import ge_ir_pb2 as pb
from engine.passes.manager import check_graph, resolve_passes, run_passes
from engine.core.yamlgraph import load_yaml_graph
from harness import CASES, ge_dumps, needs_ge_dumps, repeated_ctrl, shared_pack

ROOT = Path(__file__).resolve().parent.parent
DUMPS = ge_dumps()
EXAMPLE = ROOT / "examples" / "train_step.pbtxt"
PACK = shared_pack()
MINE = ("hccl_memcpy", "hccl_continuous_memcpy", "inplace_support_check", "atomic_addr_clean", "subgraph",
        "memcpy_addr_async", "topological_sorting")


def run(model, options=None):
    options = dict(options or {})
    ctx = RunContext(PACK, model, options)
    check_graph(ctx)
    run_passes(ctx, resolve_passes(PACK, None, options))
    return ctx


def again(model):
    model.emit_peer_index = True        # Note [pipeline fixpoint]
    md = pb.ModelDef()
    md.ParseFromString(serialize_model(model))
    return build_model(md)


def mine(ctx) -> list[tuple[str, int, int]]:
    """(pass, inserted, removed) of the dedicated passes, in pipeline order."""
    return [(r.pass_id, r.inserted, r.removed) for r in ctx.pass_runs if r.pass_id in MINE]


def assert_fixpoint(model, options=None):
    model.emit_peer_index = True        # Note [pipeline fixpoint]
    first = serialize_model(model)
    model2 = again(model)
    reread = serialize_model(model2)
    ctx2 = run(model2, options)
    assert [i.name for i in ctx2.insertions if i.pass_id in MINE] == []
    assert serialize_model(model2) == reread
    if not repeated_ctrl(first):
        assert reread == first
    else:
        # GE's reload drops a repeated control edge (Note [repeated control edges] in
        # engine/core/surgery.py): the output read back is the output without them
        assert repeated_ctrl(reread) == 0 and len(reread) < len(first)


NOTHING = [("hccl_memcpy", 0, 0), ("hccl_memcpy", 0, 0), ("hccl_continuous_memcpy", 0, 0),
           ("atomic_addr_clean", 0, 0), ("subgraph", 0, 0), ("memcpy_addr_async", 0, 0),
           ("topological_sorting", 0, 0)]


@pytest.mark.parametrize("name", sorted(p.name for p in DUMPS.glob("*.txt")))
@needs_ge_dumps
def test_ge_dumps(name):
    # The five dumps are inference or pre-fusion graphs: no collectives, no control flow, no
    # atomic attributes, no constant or user input returned by the root — nothing to isolate.
    model = load_model(DUMPS / name)
    ctx = run(model)
    assert all(r.status == "ok" for r in ctx.pass_runs), [(r.pass_id, r.message) for r in ctx.pass_runs]
    assert mine(ctx) == NOTHING
    assert [d.code for d in ctx.diagnostics if d.pass_id in MINE] == []
    assert_fixpoint(model)


@needs_ge_dumps
def test_dumps_are_all_here():
    assert len(list(DUMPS.glob("*.txt"))) == 5


def test_shipped_example():
    model = load_model(EXAMPLE)
    ctx = run(model)
    assert mine(ctx) == [("hccl_memcpy", 4, 0), ("hccl_memcpy", 0, 0), ("hccl_continuous_memcpy", 0, 0),
                         ("atomic_addr_clean", 1, 0), ("subgraph", 4, 0), ("memcpy_addr_async", 0, 0),
                         ("topological_sorting", 0, 0)]
    rules = Counter(i.rule for i in ctx.insertions if i.pass_id in MINE)
    assert rules == {"hccl/protect-constant": 4, "atomic/shared": 1, "subgraph/const-into-while": 2,
                     "subgraph/while-body-copies": 2}
    assert_fixpoint(model)


@pytest.mark.parametrize("n,counts", [
    (3000, [("hccl_memcpy", 42, 0), ("hccl_memcpy", 0, 0), ("hccl_continuous_memcpy", 0, 0),
            ("atomic_addr_clean", 1, 0), ("subgraph", 4, 0), ("memcpy_addr_async", 0, 0),
            ("topological_sorting", 0, 0)]),
    (1000, [("hccl_memcpy", 14, 0), ("hccl_memcpy", 0, 0), ("hccl_continuous_memcpy", 0, 0),
            ("atomic_addr_clean", 1, 0), ("subgraph", 4, 0), ("memcpy_addr_async", 0, 0),
            ("topological_sorting", 0, 0)]),
])
def test_synthetic_training_step(n, counts):
    # Broadcast kernels and biases are Variables (an Identity each, their Assign exists already);
    # every collective is an HCCL atomic node (one shared MemSet); each While gets its constant
    # input copied and its body copies. (10k and 100k: benchmarks/bench_pipeline.py — 98 and 1000
    # Identities from hccl_memcpy, 9 and 85 subgraph copies, one MemSet.)
    model = build_model(make_model(n))
    ctx = run(model)
    assert mine(ctx) == counts
    assert_fixpoint(model)


FIXPOINT = ["hccl/HM-01.yaml", "hccl/HM-03.yaml", "hccl/HM-04.yaml", "hccl/HM-08.yaml", "hccl/HM-09.yaml",
            "hccl/own-broadcast-assign-ctrl.yaml", "hccl/own-continuous-inputs.yaml",
            "subgraph/SG-01a.yaml", "subgraph/SG-02b.yaml", "subgraph/SG-04.yaml", "subgraph/SG-05.yaml",
            "subgraph/SG-06.yaml", "subgraph/own-while-body-partial-bypass.yaml",
            "subgraph/own-if-shared-outputs.yaml", "subgraph/own-while-dynamic-cond.yaml",
            "atomic/AT-04.yaml", "atomic/AT-05.yaml", "atomic/own-dispersed.yaml", "atomic/own-loop-graph.yaml",
            "memcpy/MA-01.yaml", "memcpy/own-const-output.yaml", "memcpy/own-stream-merge-through-if.yaml",
            "inplace_check/IS-01a.yaml"]


@pytest.mark.parametrize("case", FIXPOINT)
def test_pipeline_is_a_fixpoint_on_fixtures(case):
    model, options = load_yaml_graph(CASES / case, PACK)
    run(model, options)
    assert_fixpoint(model, options)


def test_later_pass_changes_what_an_earlier_one_sees():
    model, options = load_yaml_graph(CASES / "memcpy" / "own-hccl-refdata.yaml", PACK)
    ctx = run(model, options)
    assert Counter(i.type for i in ctx.insertions if i.pass_id in MINE) == {"MemcpyAddrAsync": 1}
    ctx2 = run(again(model), options)
    assert [(i.type, i.rule) for i in ctx2.insertions if i.pass_id in MINE] == [("MemSet", "atomic/shared")]


def test_host_exec_flag_gates_inplace_support_check():
    g = CASES / "inplace_check" / "IS-01a.yaml"
    for options, marked in (({}, False), ({"context.hostExecFlag": "1"}, True)):
        model, _ = load_yaml_graph(g, PACK)
        ctx = run(model, options)
        assert ("inplace_support_check" in [r.pass_id for r in ctx.pass_runs]) == marked
        d = model.root.find("cast1").op.output_desc[0]
        assert ("_inplace_support_input_index" in d.attr) == marked
