"""The layout pass where it follows GE's helpers. UpdateIsInputConstForNetoutput
(`_fixup_netoutput`): an Identity the pass puts before a NetOutput input gets the data offset,
and both its is_input_const and the NetOutput's are made anew from their producers (the pack's
`input_const`, NodeUtils::UpdateIsInputConst), not moved from one to the other. IsSubVector
(`is_sub_vector`), which the no-padding input checker calls both ways. HandleMergeInput's symbol
(GraphUtils::GetRefMapping, which the layout and in-place passes read). HasSameStreamId, which
the in-place pass's candidates pass."""
from __future__ import annotations

from engine.core.yamlgraph import load_yaml_graph
from engine.passes.context import RunContext
from engine.passes.manager import check_graph, resolve_passes, run_passes
from harness import CASES, run_case, shared_pack

PACK = shared_pack()

CASE = CASES / "layout" / "own-netoutput-input-const.yaml"


def test_the_identity_and_the_netoutput_get_their_producers_flags():
    ctx, _, _ = run_case(CASE, passes=["mem_layout_conflict"])
    g = ctx.model.root
    net = g.find("netoutput")
    ident = net.ins[0].peer.node
    assert ident.type == "Identity"
    assert list(ident.op.is_input_const) == [True]
    assert list(net.op.is_input_const) == [False, False]


def test_a_stale_list_is_made_anew():
    """A NetOutput whose list said both inputs were constants (the Relu too): GE's list is made
    from the producers, so it is false at both."""
    model = load_yaml_graph(CASE, PACK)[0]
    model.root.find("netoutput").op.is_input_const.extend([True, True])
    ctx = RunContext(PACK, model, {})
    check_graph(ctx)
    run_passes(ctx, resolve_passes(PACK, ["mem_layout_conflict"], {}))
    net = model.root.find("netoutput")
    assert len(ctx.insertions) == 1
    assert list(net.op.is_input_const) == [False, False]
    assert list(net.ins[0].peer.node.op.is_input_const) == [True]


def test_is_sub_vector_is_ges():
    """GE IsSubVector(vec, sub_vec) (mem_layout_conflict_util.cc): from the first element of
    vec that sub_vec holds anywhere, vec must go on as all of sub_vec does."""
    from engine.passes.algorithms.layout import is_sub_vector
    a, b, c, x = object(), object(), object(), object()
    assert is_sub_vector([a, b, c], [b, c]) and is_sub_vector([a, b, c], [a, b]) and is_sub_vector([a, b], [a, b])
    assert not is_sub_vector([a, b], [a, b, c])             # vec ends first
    assert not is_sub_vector([b, a, b], [a, b]) and not is_sub_vector([a, b], [b, a, b])
    assert is_sub_vector([x, a, b, c], [a, b])              # the first element of vec that sub holds: a
    assert not is_sub_vector([a, b], [x]) and is_sub_vector([a, b], []) and is_sub_vector([], [])


def test_a_merges_symbol_is_ges_in_name_and_order():
    """GE HandleMergeInput: on a tie UnionSymbolMapping(max, other) keeps the other's symbol,
    with its anchors first; the Merge's inputs follow in input order, the one NextIteration
    feeds followed by that node's output (engine/passes/symbols.py)."""
    ctx, _, _ = run_case(CASES / "inplace" / "own-merge-symbol-tie-and-next-iteration.yaml", passes=["mem_inplace"])
    assert ctx.symbols.to_json()["b_out_0"] == ["b_out_0", "a_out_0", "m_in_0", "m_in_1", "m_in_2", "ni_out_0",
                                                "m_out_0", "x_in_0"]


STREAM_GRAPH = """
graphs:
  root:
    nodes:
      data0: {type: Data, inputs: 0, outputs: 1}
      data1: {type: Data, inputs: 0, outputs: 1}
      p: {type: Add, inputs: 2, outputs: 1}
      relu: {type: Relu, inputs: 1, outputs: 1}
      cc: {type: ConditionCalc, inputs: 1, outputs: 1, attrs: {_output_inplace_ability: [[0, 0]]}}
      netoutput: {type: NetOutput, inputs: 2, outputs: 0}
    edges: [data0 -> p:0, data1 -> p:1, p -> relu, p -> cc, relu -> netoutput:0, cc -> netoutput:1]
"""


def _inplace_with_streams(tmp_path, streams: dict) -> bool:
    path = tmp_path / "streams.yaml"
    path.write_text(STREAM_GRAPH)
    model = load_yaml_graph(path, PACK)[0]
    for name, sid in streams.items():
        model.root.find(name).op.stream_id = sid
    ctx = RunContext(PACK, model, {})
    check_graph(ctx)
    run_passes(ctx, resolve_passes(PACK, ["mem_inplace"], {}))
    return model.root.find("cc").op.output_desc[0].reuse_input


def test_a_producer_without_a_stream_takes_its_first_consumers(tmp_path):
    """GE HasSameStreamId: the producer on no stream (-1) takes its first consumer's stream, and
    a later consumer on another stream keeps the reader from reusing the input."""
    assert not _inplace_with_streams(tmp_path, {"p": -1, "relu": 0, "cc": 1})
    assert _inplace_with_streams(tmp_path, {"p": -1, "relu": 1, "cc": 1})
    assert _inplace_with_streams(tmp_path, {"p": -1, "relu": 0, "cc": -1})
    assert not _inplace_with_streams(tmp_path, {"p": 0, "relu": 0, "cc": 1})
