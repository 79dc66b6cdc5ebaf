"""Note [handed-on symbol tables] (engine/passes/manager.py): the in-place pass takes the
symbol table the layout pass built when nothing was edited since, decides exactly as with
a table of its own, and builds anew after any pass that edited the graph."""
from __future__ import annotations

from pathlib import Path

import pytest

from engine.core.dumpio import save_model
from engine.core.yamlgraph import load_yaml_graph
from engine.passes import symbols
from engine.passes.actions import Rewriter
from engine.passes.catalog import load_pack
from engine.passes.context import RunContext
from engine.passes.manager import resolve_passes, run_passes
from engine.passes.surgery_hooks import surgery_hooks
from harness import edit, shared_pack

ROOT = Path(__file__).resolve().parent.parent
PACK = shared_pack()
TAIL = ["mem_layout_conflict", "topological_sorting", "mem_inplace"]

# ProcessInplace chooses: foo's output 0 reuses input 1 (input 0 is fed by a Data)
GRAPH = ("graphs:\n  root:\n    nodes:\n      data: Data\n      r1: Relu\n      r2: Relu\n"
         "      foo: {type: Foo, inputs: 3, outputs: 1, attrs: {_output_inplace_ability: [[0, 0], [0, 1], [0, 2]]}}\n"
         "      out: NetOutput\n"
         "    edges: [data -> r1, data -> r2, data -> foo:0, r1 -> foo:1, r2 -> foo:2, foo -> out]\n")


@pytest.fixture
def builds(monkeypatch):
    """The pass each SymbolBuilder.build ran in, in order (verify mode's checking builds
    left out: they are counted by nothing here)."""
    from engine.passes.algorithms import inplace
    monkeypatch.setattr(inplace, "VERIFY_CACHES", False)
    seen: list[str] = []
    real = symbols.SymbolBuilder.build

    def counted(self, model, graph):
        seen.append(self_ctx[0].current_pass)
        return real(self, model, graph)

    self_ctx: list = [None]
    monkeypatch.setattr(symbols.SymbolBuilder, "build", counted)
    return seen, self_ctx


def _run(path: Path, passes: list[str], pack=PACK, one_call: bool = True, ctx_box=None) -> RunContext:
    model, opts = load_yaml_graph(path, pack)
    ctx = RunContext(pack, model, opts)
    if ctx_box is not None:
        ctx_box[0] = ctx
    specs = resolve_passes(pack, passes, opts)
    if one_call:
        run_passes(ctx, specs)
    else:
        for spec in specs:
            run_passes(ctx, [spec])
    assert ctx.symbol_tables == {}      # the tables go when run_passes returns
    return ctx


def _outcome(ctx: RunContext, tmp_path: Path, name: str) -> tuple:
    out = tmp_path / f"{name}.pbtxt"
    save_model(ctx.model, out)
    return (out.read_bytes(), ctx.symbols.to_json(),
            [(d.code, d.message, d.details) for d in ctx.diagnostics])


def test_in_place_takes_the_layout_tables_and_decides_the_same(tmp_path, builds):
    seen, box = builds
    g = tmp_path / "g.yaml"
    g.write_text(GRAPH)
    handed = _run(g, TAIL, ctx_box=box)
    assert seen == ["mem_layout_conflict"]          # the in-place pass built none
    seen.clear()
    own = _run(g, TAIL, one_call=False, ctx_box=box)
    assert seen == ["mem_layout_conflict", "mem_inplace"]
    # the same choice (foo:out:0 reuses input 1, so the taken table was changed by its union)
    # and the same bytes, symbols and diagnostics as with a table of its own
    (d,) = [d.details for d in handed.diagnostics if d.code == "INPLACE_REUSE"]
    assert (d["node"], d["output"], d["input"], [r["input"] for r in d["rejected_inputs"]]) == ("foo", 0, 1, [0, 2])
    assert _outcome(handed, tmp_path, "handed") == _outcome(own, tmp_path, "own")


def test_the_default_pipeline_builds_one_table_less_on_a_real_graph(tmp_path, builds):
    """The example training step through the whole default list: same bytes either way."""
    from engine.core.dumpio import load_model
    seen, box = builds
    outs, counts = [], []
    for one_call in (True, False):
        seen.clear()
        model = load_model(ROOT / "examples" / "train_step.pbtxt")
        ctx = box[0] = RunContext(PACK, model, {})
        specs = resolve_passes(PACK, None, {})
        if one_call:
            run_passes(ctx, specs)
        else:
            for spec in specs:
                run_passes(ctx, [spec])
        outs.append(_outcome(ctx, tmp_path, str(one_call)))
        counts.append((seen.count("mem_layout_conflict"), seen.count("mem_inplace")))
    # the layout pass builds its tables (its root's and the If branches' for the control-node
    # checks) either way; the in-place pass builds the root's only when run on its own
    assert counts[0][0] == counts[1][0] > 0 and (counts[0][1], counts[1][1]) == (0, 1)
    assert outs[0] == outs[1]


MARKER_SET = """
  mark_writers:
    doc: a made-up pass between layout and in-place — an Identity before each CustomWriter input
    steps:
      - name: writer-input
        match: node.type == "CustomWriter"
        each: inputs
        rules:
          - id: custom/mark
            when: true
            do:
              - insert_before(anchor, "copy")
    insert:
      copy:
        type: Identity
        name: "{dst}_mark_{idx}"
"""


def _pack_with_marker(pack_copy: Path):
    f = pack_copy / "memcpy.yaml"
    f.write_text(f.read_text().rstrip("\n") + "\n" + MARKER_SET)
    edit(pack_copy / "passes.yaml", "  mem_rw_conflict:\n", "  mark_writers:\n    algorithm: memory_rewrites\n  mem_rw_conflict:\n")
    return load_pack(pack_copy)


def test_a_pass_that_edits_in_between_makes_in_place_build_anew(pack_copy, tmp_path, builds):
    seen, box = builds
    pack = _pack_with_marker(pack_copy)
    passes = ["mem_layout_conflict", "mark_writers", "topological_sorting", "mem_inplace"]
    g = tmp_path / "g.yaml"
    # no CustomWriter: the made-up pass edits nothing, vouches for the graph, the table goes on
    g.write_text(GRAPH)
    ctx = _run(g, passes, pack, ctx_box=box)
    assert seen == ["mem_layout_conflict"] and not ctx.insertions
    # a CustomWriter: the pass inserts; the in-place pass builds its own table, which has the new node
    seen.clear()
    g.write_text(GRAPH.replace("      out: NetOutput\n", "      w: {type: CustomWriter, inputs: 1, outputs: 1}\n      out: NetOutput\n")
                 .replace("foo -> out]", "foo -> out, r1 -> w]"))
    ctx = _run(g, passes, pack, ctx_box=box)
    assert [i.name for i in ctx.insertions] == ["w_mark_0"]
    assert seen == ["mem_layout_conflict", "mem_inplace"]
    assert "w_mark_0_in_0" in {a for anchors in ctx.symbols.to_json().values() for a in anchors}


def test_a_sort_vouches_only_when_it_kept_the_order(tmp_path):
    g = tmp_path / "g.yaml"
    g.write_text("graphs:\n  root:\n    nodes:\n      a: Data\n      b: Relu\n      c: NetOutput\n    edges: [a -> b, b -> c]\n")
    model, opts = load_yaml_graph(g, PACK)
    ctx = RunContext(PACK, model, opts)
    rw = Rewriter(ctx, "t", {}, surgery_hooks(ctx))
    sort = rw.bound()["topo_sort"]
    sort(model.root)
    assert rw.changed is False          # already in order: nothing moved
    root = model.root
    a, b, c = root.node_list()
    root.reorder([c, b, a])
    sort(root)
    assert rw.changed is True and [n.name for n in root.node_list()] == ["a", "b", "c"]
    rw.changed = False
    rw.bound()["link_ctrl"](a, [c])     # any other action is an edit
    assert rw.changed is True


def test_verify_mode_names_a_table_that_went_stale(tmp_path):
    g = tmp_path / "g.yaml"
    g.write_text(GRAPH)
    model, opts = load_yaml_graph(g, PACK)
    ctx = RunContext(PACK, model, opts)
    builder = symbols.symbol_builder(ctx)
    kept = builder.build(model, model.root)
    symbols.check_same_table(kept, builder.build(model, model.root), model.root)
    kept.union(*kept.names()[:2])
    with pytest.raises(AssertionError, match="handed on from an earlier pass differs"):
        symbols.check_same_table(kept, builder.build(model, model.root), model.root)
