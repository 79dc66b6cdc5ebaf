"""GE's unit tests of MemLayoutConflictUtil (mem_layout_conflict_util_unittest.cc) and of the
pass frame (mem_check_pass_frame_unittest.cc) that call a helper directly, where memconflict has
the same predicate: a pack function of rules/ge/layout.yaml, the pass's `skip_insert`, the
reference-chain queries of engine/dsl/queries.py, the layout pass's `real_producers`, the in-place
pass's `ctrl_conflict` (IsCtrlNodeSubgraphExistMemConflictSymbol). The graphs are GE's: inline
below, or the fixture that already ports the same MemConflictShareGraph builder. Each test asserts
what GE's test asserts, on the same node or anchor."""
from __future__ import annotations

from pathlib import Path

import pytest

from engine.core.yamlgraph import load_yaml_graph
from engine.dsl.parser import parse_expr
from engine.dsl.queries import ref_chain_forward, ref_chain_reverse
from engine.pack.options import run_options
from engine.passes import algorithms  # noqa: F401  (registers the algorithms)
from engine.passes.algorithms.inplace import InplacePass
from engine.passes.algorithms.layout import LayoutPass
from engine.passes.context import RunContext
from engine.passes.manager import check_graph
from harness import CASES, shared_pack

PACK = shared_pack()
LAYOUT = CASES / "layout"

NOPADDING_IN = ("attrs: {_no_padding_continuous_input: true, _output_reuse_input: true, _reuse_input_on_dim_index: 0}, "
                "output_desc: {0: {reuse_input: true, reuse_input_index: 0}}")      # SetNoPaddingContinuousInput

# BuildUnknowShapeGraph: data1 → a, data2 → b → phony_concat (no-padding continuous input, output
# reusing input 0) → netoutput, whose input 0 has shape [-1, 2, 2, 2]
UNKNOWN_SHAPE = f"""
graphs:
  root:
    nodes:
      data1: Data
      a: Relu
      phony_concat: {{type: PhonyConcat, inputs: 2, outputs: 1, {NOPADDING_IN}}}
      netoutput: {{type: NetOutput, input_desc: {{0: {{shape: [-1, 2, 2, 2]}}}}}}
      data2: Data
      b: Relu
    edges: [data1 -> a, a -> phony_concat:0, phony_concat -> netoutput, data2 -> b, b -> phony_concat:1]
"""

# BuildConnectToNoPaddingContinuousInputThroughtRefNodeGraph: a → refnode (AssignAdd, reference,
# ref → ref) → pc:0 (PhonyConcat, no-padding continuous input) → netoutput; b → pc:1
THROUGH_REF_NOPADDING_IN = f"""
graphs:
  root:
    attrs: {{_no_need_dynamic_shape_partition: true}}
    nodes:
      a: Relu
      refnode: {{type: AssignAdd, inputs: [ref], outputs: [ref], attrs: {{reference: true}}}}
      pc: {{type: PhonyConcat, inputs: 2, outputs: 1, {NOPADDING_IN}}}
      netoutput: NetOutput
      b: Relu
    edges: [a -> refnode, refnode -> pc:0, pc -> netoutput, b -> pc:1]
"""

# BuildNoPaddingContinuousInCascadedGraph: a, b, c → pc1; d, pc1, f → pc2 (both no-padding
# continuous input, output reusing input 0)
CASCADED = f"""
graphs:
  root:
    attrs: {{_no_need_dynamic_shape_partition: true}}
    nodes:
      a: Relu
      pc1: {{type: PhonyConcat, inputs: 3, outputs: 1, {NOPADDING_IN}}}
      b: Relu
      c: Relu
      d: Relu
      pc2: {{type: PhonyConcat, inputs: 3, outputs: 1, {NOPADDING_IN}}}
      f: Relu
    edges: [a -> pc1:0, b -> pc1:1, c -> pc1:2, d -> pc2:0, pc1 -> pc2:1, f -> pc2:2]
"""

# BuildConnectToContinuousInputThroughtRefNodeGraph: as THROUGH_REF_NOPADDING_IN with hcom
# (HcomAllReduce, continuous input; GE's test leaves its kernel lib empty) for pc
THROUGH_REF_CONTINUOUS_IN = """
graphs:
  root:
    attrs: {_no_need_dynamic_shape_partition: true}
    nodes:
      a: Relu
      refnode: {type: AssignAdd, inputs: [ref], outputs: [ref], attrs: {reference: true}}
      hcom: {type: HcomAllReduce, inputs: 2, outputs: 1, engine: AIcoreEngine, attrs: {continuous_input: true}}
      netoutput: NetOutput
      b: Relu
    edges: [a -> refnode, refnode -> hcom:0, hcom -> netoutput, b -> hcom:1]
"""

# BuildContinousOutConnectRefNodeGraph: hcom (HcomAllReduce, continuous output) :0 → refnode → b
# → netoutput, :1 → a
CONTINUOUS_OUT_REF = """
graphs:
  root:
    attrs: {_no_need_dynamic_shape_partition: true}
    nodes:
      hcom: {type: HcomAllReduce, inputs: 0, outputs: 2, engine: AIcoreEngine, attrs: {continuous_output: true}}
      refnode: {type: AssignAdd, inputs: [ref], outputs: [ref], attrs: {reference: true}}
      b: Relu
      netoutput: NetOutput
      a: Relu
    edges: [hcom:0 -> refnode, refnode -> b, b -> netoutput, hcom:1 -> a]
"""

# BuildNopaddingContinousOutConnectRefNodeGraph: as CONTINUOUS_OUT_REF with split (PhonySplit,
# SetNoPaddingContinuousOutput) for hcom
NOPADDING_OUT_REF = """
graphs:
  root:
    attrs: {_no_need_dynamic_shape_partition: true}
    nodes:
      split:
        type: PhonySplit
        inputs: 0
        outputs: 2
        attrs: {_no_padding_continuous_output: true, _output_reuse_input: true, _reuse_input_on_dim_index: 0}
        output_desc: {0: {reuse_input: true, reuse_input_index: 0}}
      refnode: {type: AssignAdd, inputs: [ref], outputs: [ref], attrs: {reference: true}}
      b: Relu
      netoutput: NetOutput
      a: Relu
    edges: [split:0 -> refnode, refnode -> b, b -> netoutput, split:1 -> a]
"""

# Get_case_conflict_anchors_success's own graph: data1..3 → case (three branches, branch x passing
# its Data datax_x to its NetOutput) → op3 (Add) → netoutput0
CASE = """
graphs:
  g1:
    nodes:
      data1: Data
      case: {type: Case, inputs: 3, outputs: 1, subgraphs: [subgraph1, subgraph2, subgraph3]}
      op3: {type: Add, inputs: 1, outputs: 1}
      netoutput0: NetOutput
      data2: Data
      data3: Data
    edges: [data1 -> case:0, case -> op3, op3 -> netoutput0, data2 -> case:1, data3 -> case:2]
  subgraph1:
    nodes:
      data1_1: {type: Data, attrs: {_parent_node_index: 0}}
      netoutput1: NetOutput
      data1_2: {type: Data, attrs: {_parent_node_index: 1}}
      data1_3: {type: Data, attrs: {_parent_node_index: 2}}
    edges: [data1_1 -> netoutput1]
  subgraph2:
    nodes:
      data2_1: {type: Data, attrs: {_parent_node_index: 0}}
      data2_2: {type: Data, attrs: {_parent_node_index: 1}}
      netoutput2: NetOutput
      data2_3: {type: Data, attrs: {_parent_node_index: 2}}
    edges: [data2_2 -> netoutput2]
  subgraph3:
    nodes:
      data3_1: {type: Data, attrs: {_parent_node_index: 0}}
      data3_2: {type: Data, attrs: {_parent_node_index: 1}}
      data3_3: {type: Data, attrs: {_parent_node_index: 2}}
      netoutput3: NetOutput
    edges: [data3_3 -> netoutput3]
"""


def _ctx(source: str | Path, tmp_path: Path | None = None) -> RunContext:
    if isinstance(source, str):
        path = tmp_path / "graph.yaml"
        path.write_text(source)
        source = path
    model, file_options = load_yaml_graph(source, PACK)
    ctx = RunContext(PACK, model, run_options(PACK.options, {}, file_options))
    check_graph(ctx)
    return ctx


def _layout(ctx: RunContext) -> LayoutPass:
    """The layout pass on the root graph, its symbol table built and every node marked."""
    model = ctx.model
    lp = LayoutPass(ctx, PACK.configs["layout_conflict"], PACK.passes["mem_layout_conflict"])
    lp.graph = model.root
    lp.table = lp.sym.build(model, model.root)
    for n in model.all_nodes(model.root):
        lp.mark_node(n, model.root)
    return lp


def _fn(lp: LayoutPass, text: str, params: tuple[str, ...]):
    """A DSL expression over the layout pass's functions (rules/ge/layout.yaml)."""
    return lp.comp.function(parse_expr(text), params)


def _node(ctx: RunContext, name: str):
    for g in ctx.model.graph_order:
        n = g.find(name)
        if n is not None:
            return n
    raise AssertionError(f"no node named {name}")


# ---- mem_layout_conflict_util_unittest.cc -----------------------------------------------------

def test_unknown_shape_skip_insert(tmp_path):
    """UnknownShpae_SkipInsert: IsSkipInsert(netoutput's input 0), whose shape has -1 → true
    (the pack's `skip_insert`)."""
    ctx = _ctx(UNKNOWN_SHAPE, tmp_path)
    lp = _layout(ctx)
    assert lp.f_skip_insert(_node(ctx, "netoutput").ins[0]) is True


@pytest.mark.parametrize("fixture, want", [
    ("ge-st-while-in-node-connect-to-multi-nodes-not-insert-identity.yaml", False),  # Get_while_conflict_anchors_failed
    ("ge-st-while-body-data-mul-netoutput.yaml", True),                  # Get_while_conflict_anchors_success
    ("ge-st-while-body-data-to-netoutput-exchange.yaml", True),          # Get_while_conflict_anchors_success_02
    ("ge-ifc-if-single-out-multi-ref-to-netoutput-with-partitioned-call-check-return-success.yaml", True),
    # ^ Get_if_conflict_anchors_success
], ids=["while-in-node-to-multi-nodes", "while-data-mul-netoutput", "while-two-data-exchange", "if-with-partitioned-call"])
def test_ctrl_node_subgraph_conflict(fixture, want):
    """Get_while_conflict_anchors_failed / _success / _success_02, Get_if_conflict_anchors_success:
    IsCtrlNodeSubgraphExistMemConflictSymbol on the root graph (BuildWhileInNodeConnectToMultiNodesGraph,
    BuildWhileDataMulNetoutputGraph, BuildWhileTwoDataToNetoutputExchangeGraph,
    BuildIfSingleOutMultiRefToNetoutputSubGraphWithPartitionedCall, as those fixtures port them)."""
    ctx = _ctx(LAYOUT / fixture)
    ip = InplacePass(ctx, PACK.configs["inplace"], PACK.passes["mem_inplace"])
    assert ip.ctrl_conflict(ctx.model.root) is want


def test_case_ctrl_node_subgraph_conflict(tmp_path):
    """Get_case_conflict_anchors_success: each Case branch passes a Data to its NetOutput →
    IsCtrlNodeSubgraphExistMemConflictSymbol is true."""
    ctx = _ctx(CASE, tmp_path)
    ip = InplacePass(ctx, PACK.configs["inplace"], PACK.passes["mem_inplace"])
    assert ip.ctrl_conflict(ctx.model.root) is True


def test_has_not_support_physical_memory_refresh_node_is_false():
    """HasNotSupportPhysicalMemoryRefreshNode_return_false (BuildUserOutAndNotSupportRefreshInByRefGraph,
    physical memory refreshable): neither a:0 nor hcombroadcast's input is a StreamSwitch or
    LabelSwitchByIndex → false. The fixture's static memory policy 4 stands for GE's
    `is_physical_memory_refreshable = true`."""
    ctx = _ctx(LAYOUT / "ge-uo-out-and-hcom-broadcast-static-memory-policy4-success.yaml")
    lp = _layout(ctx)
    assert _fn(lp, "physical_refresh_mode()", ())() is True       # the test's set-up
    a, hcom = _node(ctx, "a"), _node(ctx, "hcombroadcast")
    assert _fn(lp, "no_physical_refresh(a, b)", ("a", "b"))(a.outs[0], hcom.ins[0]) is False


def test_traverse_ref_chain_reverse(tmp_path):
    """TraverseRefChainReverse_Success: from refnode:0 and from pc:0 the reverse reference chain
    reaches a; from b:0 it does not."""
    ctx = _ctx(THROUGH_REF_NOPADDING_IN, tmp_path)
    sym = ctx.symbol_builder()

    def reaches_a(name):
        return any(o.node.name == "a" for o in ref_chain_reverse(sym, _node(ctx, name).outs[0]))
    assert reaches_a("refnode")
    assert reaches_a("pc")
    assert not reaches_a("b")


def test_traverse_ref_chain(tmp_path):
    """TraverseRefChain_Success: from refnode's input 0 the reference chain reaches pc; from pc's
    input 0, pc itself; nothing named B."""
    ctx = _ctx(THROUGH_REF_NOPADDING_IN, tmp_path)
    sym = ctx.symbol_builder()

    def reaches(name, target):
        return any(i.node.name == target for i in ref_chain_forward(sym, _node(ctx, name).ins[0]))
    assert reaches("refnode", "pc")
    assert reaches("pc", "pc")
    assert not reaches("pc", "B")


def _continuous_input_through_ref(ctx, lp, producer: str, no_padding: bool):
    """IsContinuousInputThroughRefNode(producer:0's first consumer, no_padding): the reference chain
    from that input (ref_chain_forward, TraverseRefChain's order), and the last anchor on it whose
    node needs (no-padding) continuous input (the pack's nopadding_in / continuous_in), or none."""
    pred = _fn(lp, "nopadding_in(node)" if no_padding else "continuous_in(node)", ("node",))
    start = _node(ctx, producer).outs[0].peers[0]
    found = [i for i in ref_chain_forward(ctx.symbol_builder(), start) if pred(i.node)]
    return found[-1] if found else None


def test_connect_to_no_padding_continuous_input_through_ref(tmp_path):
    """IsConnectToNoPaddingContinuousInputNode_Success: a (through refnode) and b reach pc, a
    no-padding continuous-input node."""
    ctx = _ctx(THROUGH_REF_NOPADDING_IN, tmp_path)
    lp = _layout(ctx)
    assert _continuous_input_through_ref(ctx, lp, "a", True) is not None
    assert _continuous_input_through_ref(ctx, lp, "b", True) is not None


def test_connect_to_no_padding_continuous_input_cascaded(tmp_path):
    """IsConnectToNoPaddingContinuousInputNode_Cascaded_Success: a's consumer pc1:0 is the input
    pc1's output references, so the chain goes on to pc2 (the last found); b, c stop at pc1; d is
    pc2's."""
    ctx = _ctx(CASCADED, tmp_path)
    lp = _layout(ctx)
    got = {p: _continuous_input_through_ref(ctx, lp, p, True) for p in ("a", "b", "c", "d")}
    assert {p: i.node.name for p, i in got.items()} == {"a": "pc2", "b": "pc1", "c": "pc1", "d": "pc2"}


def test_connect_to_continuous_input_through_ref(tmp_path):
    """IsConnectToContinuousInputNode_Success: a (through refnode) and b reach hcom, a
    continuous-input node."""
    ctx = _ctx(THROUGH_REF_CONTINUOUS_IN, tmp_path)
    lp = _layout(ctx)
    assert _continuous_input_through_ref(ctx, lp, "a", False) is not None
    assert _continuous_input_through_ref(ctx, lp, "b", False) is not None


def _continuous_output_through_ref(ctx, lp, consumer: str, no_padding: bool):
    """IsContinuousOutputThroughRefNode(consumer's input 0's producer, no_padding): the last
    out-anchor on the reverse reference chain whose node makes (no-padding) continuous output."""
    pred = _fn(lp, "nopadding_out(node)" if no_padding else "continuous_out(node)", ("node",))
    start = _node(ctx, consumer).ins[0].peer
    found = [o for o in ref_chain_reverse(ctx.symbol_builder(), start) if pred(o.node)]
    return found[-1] if found else None


def test_connect_to_continuous_output_through_ref(tmp_path):
    """IsConnectToContinuousOutputNode_Success: b's producer refnode references hcom:0, a
    continuous-output node."""
    ctx = _ctx(CONTINUOUS_OUT_REF, tmp_path)
    found = _continuous_output_through_ref(ctx, _layout(ctx), "b", False)
    assert found is not None and found.node.name.lower() == "hcom"


def test_connect_to_no_padding_continuous_output_through_ref(tmp_path):
    """IsConnectToContinuousOutputNode_Success_NopaddingOut: b's producer refnode references
    split:0, a no-padding continuous-output node."""
    ctx = _ctx(NOPADDING_OUT_REF, tmp_path)
    found = _continuous_output_through_ref(ctx, _layout(ctx), "b", True)
    assert found is not None and found.node.name.lower() == "split"


def test_get_real_inputs():
    """GetRealInputs_Success (BuildImmutableOutAndRtsSpecailInByAssignGraph): GetAllRealInPeer of
    hcombroadcast (the pass's real_producers) has one anchor."""
    ctx = _ctx(LAYOUT / "ge-st-immutable-out-and-rts-specail-in-by-assign-insert-success.yaml")
    lp = _layout(ctx)
    assert len(lp.real_producers(_node(ctx, "hcombroadcast"))) == 1


# ---- mem_check_pass_frame_unittest.cc ---------------------------------------------------------

def test_pass_on_a_subgraph_succeeds():
    """SubGraph_SkipPass (BuildIfGraph): the pass run on the `then` subgraph returns success.
    Derived from GE's code (MemLayoutConflictOptimizer::Run): the subgraph is static, so it is
    processed; its one symbol is data1:0 (USER_MEMORY_INPUT) and netOutput1:0 (USER_MEMORY_OUTPUT),
    an absolute no-conflict: nothing is inserted."""
    ctx = _ctx(LAYOUT / "ge-st-user-input-and-user-input.yaml")
    then = _node(ctx, "data1").graph
    before = len(list(then.nodes()))
    lp = LayoutPass(ctx, PACK.configs["layout_conflict"], PACK.passes["mem_layout_conflict"])
    lp.run(then)
    assert lp.graph is then                 # processed (a static graph), not skipped
    assert not ctx.insertions
    assert len(list(then.nodes())) == before


def test_user_input_and_user_input_is_no_conflict():
    """ShouldReturnSuccess_ControlSolveSuccess (BuildUserInAndUserInGraph): data1:0 and data2:0,
    both USER_MEMORY_INPUT — CheckConditionConflict succeeds. No checker is registered for the pair
    (checker.cc), so nothing is selected."""
    ctx = _ctx(LAYOUT / "UI-01.yaml")
    lp = _layout(ctx)
    pair = [_node(ctx, "data1").outs[0], _node(ctx, "data2").outs[0]]
    assert [lp.marks[x] for x in pair] == [("USER_MEMORY_INPUT",), ("USER_MEMORY_INPUT",)]
    assert lp.find_conflicts(pair) == {}
