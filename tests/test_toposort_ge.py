"""GE's ComputeGraph::TopologicalSorting unit tests (tests/graph_metadef/ut/graph/testcase/
compute_graph_unittest.cc, "cgut", and graph_utils_unittest.cc, "guut") replayed on
engine/core/toposort.py, plus the behaviours of the same code no GE test asserts.

Each graph enters the sort in the list order GE's test has at that point (its builder's
GetGraph() sorts first, and options carry over from test to test), under the options in
effect for the asserted sort. Expected orders marked "derived" are not asserted by GE; they
come from a model of compute_graph.cc (checked against every asserted GE order).

Not replayed:
* TopologicalSorting_success (cgut:1271): the comparator overload TopologicalSorting(func) is
  a std::list::sort, no topology; the engine has no counterpart.
* ReverseDfsTopologicalSortingInPriorityMode_success (cgut:1464): TopologicalSortingGraph(true),
  a DFS with reversed groups; the engine sorts forward only.
* DFSPOSTORDERTopologicalSorting_by_arg_success (cgut:1791): TopologicalSorting(mode) takes the
  mode as an argument; the engine takes it from the options only (the same sort is replayed
  through the options by test_dfspostorder_complex_graph).
* DFSTopologicalSorting_success / BFSTopologicalSorting_success (cgut:1211, 1227): the public
  DFSTopologicalSorting(vec, reverse) / BFSTopologicalSorting(vec) append to a vector and check
  only the status; no counterpart.
* CollectBreadthOutNode, SortNodes, GetInEdgeSize, ReorderEventNodes, InValid, ReorderByNodeId:
  no order of a topological sort is checked (and data-to-control edges are not modelled).
* UtestExecuteGraph.* (execute_graph_unittest.cc): ExecuteGraph's own copy of the sort.
"""
from __future__ import annotations

import itertools

import pytest
import yaml

from harness import shared_pack
from engine.core import surgery
from engine.core.toposort import sort_graph, sort_model
from engine.core.yamlgraph import load_yaml_graph
from engine.passes.context import RunContext
from engine.passes.manager import install_policies

PACK = shared_pack()
MP = {"ge.exec.memoryOptimizationPolicy": "MemoryPriority"}
_files = itertools.count()


# ---- graphs ----------------------------------------------------------------------
def node(type_, ins, outs, shape=None, layout=None, subgraphs=None):
    """A node spec: `ins`/`outs` ports of the builder default (or `shape`/`layout`) descriptor."""
    spec = {"type": type_, "inputs": ins, "outputs": outs}
    desc = {k: v for k, v in (("shape", shape), ("layout", layout)) if v is not None}
    if desc:
        spec["input_desc"] = {i: desc for i in range(ins)}
        spec["output_desc"] = {i: desc for i in range(outs)}
    if subgraphs:
        spec["subgraphs"] = subgraphs
    return spec


def load(tmp_path, graphs):
    """A model from {graph: (nodes, edges)}, the root first; nodes in list order."""
    doc = {"graphs": {g: {"nodes": nodes, "edges": edges} for g, (nodes, edges) in graphs.items()}}
    path = tmp_path / f"g{next(_files)}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    model, _ = load_yaml_graph(path, PACK)
    return model


def graph(tmp_path, nodes, edges, order):
    """A one-graph model whose list is `order` (names of `nodes`)."""
    assert sorted(order) == sorted(nodes)
    model = load(tmp_path, {"root": ({k: nodes[k] for k in order}, edges)})
    assert names(model.root) == list(order)
    return model


def normal_graph():
    """BuildNormalGraph (cgut:104)."""
    nodes = {"node1": node("node1", 0, 2), **{f"node{i}": node(f"node{i}", 1, 1) for i in range(2, 6)},
             "node6": node("node6", 0, 1), "netoutput": node("netoutput", 3, 1)}
    edges = ["node1:0 -> node2:0", "node1:1 -> node3:0", "node2:0 -> node4:0", "node3:0 -> node5:0",
             "node4:0 -> netoutput:0", "node5:0 -> netoutput:1", "node6:0 -> netoutput:2",
             "node1 ~> node2", "node1 ~> node3", "node2 ~> node4", "node3 ~> node5",
             "node4 ~> netoutput", "node5 ~> netoutput", "node6 ~> netoutput"]
    return nodes, edges


def delay_graph():
    """BuildDelayTopoGraph (cgut:141); "DATA" is not an input type."""
    nodes = {"variable": node("Variable", 0, 2), **{f"node{i}": node(f"node{i}", 1, 1) for i in range(1, 5)},
             "node5": node("node5", 3, 0), "data": node("DATA", 0, 1)}
    edges = ["variable:0 -> node1:0", "variable:1 -> node2:0", "node1:0 -> node5:0", "node2:0 -> node5:1",
             "data:0 -> node3:0", "node3:0 -> node4:0", "node4:0 -> node5:2", "node2 ~> node3"]
    return nodes, edges


def skip_input_graph():
    """BuildDelayTopoGraphSkipInput (cgut:172): node3..node5 have types node2..node4."""
    nodes = {"variable": node("Variable", 0, 2), "node1": node("node1", 1, 1), "node3": node("node2", 1, 1),
             "node4": node("node3", 1, 1), "node5": node("node4", 3, 0), "data": node("DATA", 0, 1)}
    edges = ["variable:0 -> node1:0", "variable:1 -> node5:1", "node1:0 -> node5:0", "data:0 -> node3:0",
             "node3:0 -> node4:0", "node4:0 -> node5:2", "node1 ~> node3"]
    return nodes, edges


def multi_input_graph(all_is_long_life=True):
    """BuildDelayTopoGraphMultiInput (cgut:201)."""
    nodes = {"const": node("Const", 0, 1), "constant": node("Constant" if all_is_long_life else "test", 0, 1),
             "variable": node("Variable", 0, 2), "node1": node("node1", 3, 1),
             **{f"node{i}": node(f"node{i}", 1, 1) for i in range(2, 5)},
             "node5": node("node5", 3, 0), "data": node("DATA", 0, 1)}
    edges = ["const:0 -> node1:0", "constant:0 -> node1:1", "variable:0 -> node1:2", "variable:1 -> node2:0",
             "node1:0 -> node5:0", "node2:0 -> node5:1", "data:0 -> node3:0", "node3:0 -> node4:0",
             "node4:0 -> node5:2", "node2 ~> node3"]
    return nodes, edges


RELU_ORDER = ["Data1", "Data2", "Relu1", "Relu2", "Relu3", "Relu4", "Relu5", "Relu6", "Add", "Add2", "Netoutput"]
RELU_EDGES = ["Data1:0 -> Relu1:0", "Data2:0 -> Relu2:0", "Relu1:0 -> Relu3:0", "Relu1:0 -> Relu4:0",
              "Relu3:0 -> Relu5:0", "Relu4:0 -> Relu6:0", "Relu5:0 -> Add:0", "Relu6:0 -> Add:1",
              "Relu2:0 -> Add2:0", "Add:0 -> Add2:1", "Add2:0 -> Netoutput:0"]


def relu_nodes(**added):
    """The Relu graph (cgut:310), with `added` nodes of the tests' tensor_desc ({1}, CHWN)."""
    nodes = {"Data1": node("Data", 0, 1), "Data2": node("Data", 0, 1),
             **{f"Relu{i}": node("Relu", 1, 1) for i in range(1, 7)},
             "Add": node("Add", 2, 1), "Add2": node("Add", 2, 1), "Netoutput": node("NetOutput", 1, 0)}
    nodes.update({k: node(t, i, 1, [1], "CHWN") for k, (t, i) in added.items()})
    return nodes


def complex_graph():
    """BuildComplexGraph (cgut:1701): shapes {1,1} .. {4,2}, so sizes 8 .. 60 bytes."""
    shapes = {5: [1, 2], 6: [1, 3], 7: [1, 4], 8: [1, 5], 9: [2, 2], 10: [2, 3], 11: [2, 3], 12: [2, 4],
              13: [3, 2], 14: [3, 3], 15: [3, 4], 16: [3, 5]}
    nodes = {f"node{i}": node(f"node{i}", 0, 3, [1, 1]) for i in range(1, 5)}
    nodes.update({f"node{i}": node(f"node{i}", 1, 1, s) for i, s in shapes.items()})
    nodes.update({f"node{i}": node(f"node{i}", 4, 1, [4, 2]) for i in range(17, 20)})
    nodes["node20"] = node("node20", 3, 0)
    edges = [f"node{p}:{o} -> node{p + 4 + 4 * o}:0" for p in range(1, 5) for o in range(3)]
    edges += [f"node{5 + 4 * k + j}:0 -> node{17 + k}:{j}" for k in range(3) for j in range(4)]
    edges += ["node17 ~> node20", "node18 ~> node20", "node19 ~> node20"]
    return nodes, edges


# ---- sorting ---------------------------------------------------------------------
def opts(mode=None, memory=False, run_mode=None):
    """GE's graph options: ge.topoSortingMode, MemoryPriority, ge.graphRunMode."""
    out = {} if mode is None else {"ge.topoSortingMode": mode}
    if run_mode is not None:
        out["ge.graphRunMode"] = run_mode
    return {**out, **MP} if memory else out


def sort(model, options, graph=None):
    """ComputeGraph::TopologicalSorting under `options` (a new run context each time)."""
    install_policies(RunContext(PACK, model, options))
    return sort_model(model, graph)


def names(g):
    return [n.name for n in g.node_list()]


def ids(g):
    return {n.name: n.id for n in g.node_list()}


def check_sort(model, options, expected):
    """A successful sort of the root to `expected`, ids its positions."""
    assert sort(model, options) == []
    assert names(model.root) == expected
    assert [n.id for n in model.root.node_list()] == list(range(len(expected)))


# ---- InsertNode / FuseNodeKeepTopo: StableRDFS (mode 3) ---------------------------
def check_relu_first_sort(tmp_path):
    """The first asserted sort of cgut:310 and cgut:405: StableRDFS keeps a sorted list."""
    check_sort(graph(tmp_path, relu_nodes(), RELU_EDGES, RELU_ORDER), opts("3"), RELU_ORDER)


def test_insert_node_success(tmp_path):
    """UtestComputeGraph.InsertNode_success, cgut:310 (asserts 345-352, 373-381)."""
    check_relu_first_sort(tmp_path)
    order = ["Data1", "Data2", "Relu1", "Relu2", "Relu3", "Relu4", "append_1", "Relu5", "Relu6", "Add",
             "append_2", "Add2", "Netoutput"]
    edges = [e for e in RELU_EDGES if e not in ("Relu4:0 -> Relu6:0", "Add:0 -> Add2:1")]
    edges += ["Relu2:0 -> append_1:0", "Relu4:0 -> append_1:1", "append_1:0 -> Relu6:0",
              "Add:0 -> append_2:0", "append_2:0 -> Add2:1"]
    model = graph(tmp_path, relu_nodes(append_1=("Add", 2), append_2=("Rule", 1)), edges, order)
    check_sort(model, opts("3"), order)


def test_insert_node_bigtopo_to_smalltopo(tmp_path):
    """UtestComputeGraph.InsertNode_bigtopo_to_smalltopo, cgut:405 (asserts 436-443, 456-463);
    mode 3 inherited from InsertNode_success."""
    check_relu_first_sort(tmp_path)
    order = ["Data1", "Data2", "Relu1", "Relu2", "append_1", "Relu3", "Relu4", "Relu5", "Relu6", "Add", "Add2",
             "Netoutput"]
    edges = [e for e in RELU_EDGES if e != "Relu4:0 -> Relu6:0"]
    edges += ["Relu2:0 -> append_1:0", "Relu4:0 -> append_1:1", "append_1:0 -> Relu6:0"]
    model = graph(tmp_path, relu_nodes(append_1=("Add", 2)), edges, order)
    check_sort(model, opts("3"), ["Data1", "Data2", "Relu1", "Relu2", "Relu4", "append_1", "Relu3", "Relu5",
                                  "Relu6", "Add", "Add2", "Netoutput"])


def test_fuse_node_keep_topo_success(tmp_path):
    """UtestComputeGraph.FuseNodeKeepTopo_success, cgut:486 (asserts 560-567); mode 3 inherited."""
    order = ["Data1", "Data2", "Relu1", "Relu2", "fuse_node", "append_node", "fuse_node2", "Add", "Add2",
             "Netoutput"]
    nodes = relu_nodes(fuse_node=("Relu", 1), append_node=("Relu", 1), fuse_node2=("Relu", 1))
    for k in ("Relu3", "Relu4", "Relu5", "Relu6"):
        del nodes[k]
    edges = ["Data1:0 -> Relu1:0", "Data2:0 -> Relu2:0", "Relu1:0 -> fuse_node:0", "Relu1:0 -> fuse_node2:0",
             "Relu2:0 -> Add2:0", "fuse_node:0 -> append_node:0", "append_node:0 -> Add:0",
             "fuse_node2:0 -> Add:1", "Add:0 -> Add2:1", "Add2:0 -> Netoutput:0"]
    check_sort(graph(tmp_path, nodes, edges, order), opts("3"), order)


# ---- BuildNormalGraph: BFS, DFS, MemoryPriority -----------------------------------
NORMAL_DFS = ["node1", "node3", "node5", "node2", "node4", "node6", "netoutput"]
NORMAL_BFS = ["node1", "node2", "node3", "node4", "node5", "node6", "netoutput"]
NORMAL_MP_DFS = ["node6", "node1", "node2", "node3", "node4", "node5", "netoutput"]


def normal(tmp_path, order):
    return graph(tmp_path, *normal_graph(), order)


def test_topological_sorting_mode_success(tmp_path):
    """UtestComputeGraph.TopologicalSortingMode_success, cgut:1291 (asserts 1296-1297, 1329-1332):
    BFS (batches in name order), then DFS, then RDFS (derived) on the same graph."""
    model = normal(tmp_path, NORMAL_DFS)
    check_sort(model, opts("0"), NORMAL_BFS)
    check_sort(model, opts("1"), NORMAL_DFS)
    check_sort(model, opts("2"), ["node1", "node2", "node4", "node3", "node5", "node6", "netoutput"])


def test_bfs_in_priority_mode(tmp_path):
    """UtestComputeGraph.BFSTopologicalSortingInPriorityMode_success, cgut:1336 (assert 1357)."""
    model = normal(tmp_path, ["node1", "node2", "node4", "node3", "node5", "node6", "netoutput"])
    check_sort(model, opts("0", memory=True), NORMAL_BFS)


def test_train_bfs_in_priority_mode(tmp_path):
    """UtestComputeGraph.TrainTopologicalSortingInPriorityMode_BFS_success, cgut:1361: an empty
    mode and ge.graphRunMode=1 give BFS."""
    check_sort(normal(tmp_path, NORMAL_BFS), opts("", True, "1"), NORMAL_BFS)


def test_train_and_invalid_bfs_in_priority_mode(tmp_path):
    """UtestComputeGraph.TrainAndInvalidTopologicalSortingInPriorityMode_BFS_success, cgut:1387:
    mode "10" is no mode, so the training flag gives BFS."""
    check_sort(normal(tmp_path, NORMAL_BFS), opts("10", True, "1"), NORMAL_BFS)


def test_dfs_in_priority_mode(tmp_path):
    """UtestComputeGraph.DFSTopologicalSortingInPriorityMode_success, cgut:1413: every source in
    the priority set; node6 (1 consumer) before node1 (2)."""
    check_sort(normal(tmp_path, NORMAL_BFS), opts("1", memory=True), NORMAL_MP_DFS)


def test_not_train_dfs_in_priority_mode(tmp_path):
    """UtestComputeGraph.NotTrainTopologicalSortingInPriorityMode_DFS_success, cgut:1438."""
    check_sort(normal(tmp_path, NORMAL_MP_DFS), opts("", True, "0"), NORMAL_MP_DFS)


# ---- RDFS (DFS post-order) --------------------------------------------------------
COMPLEX_IDS = {"node1": 0, "node5": 1, "node2": 2, "node6": 3, "node3": 4, "node7": 5, "node4": 6, "node8": 7,
               "node17": 8, "node9": 9, "node10": 10, "node11": 11, "node12": 12, "node18": 13, "node13": 14,
               "node14": 15, "node15": 16, "node16": 17, "node19": 18, "node20": 19}


def test_dfspostorder_complex_graph(tmp_path):
    """UtestComputeGraph.DFSPOSTORDERTopologicalSorting_success, cgut:1787 (ids, cgut:1752):
    inputs by output size, then name."""
    model = graph(tmp_path, *complex_graph(), sorted(COMPLEX_IDS, key=COMPLEX_IDS.get))
    assert sort(model, opts("2")) == []
    assert ids(model.root) == COMPLEX_IDS


def test_dfspostorder_complex_graph_creation_order(tmp_path):
    """cgut:1787's GetGraph: RDFS from the creation order (node1..node20) gives the same ids."""
    model = graph(tmp_path, *complex_graph(), [f"node{i}" for i in range(1, 21)])
    assert sort(model, opts("2")) == []
    assert ids(model.root) == COMPLEX_IDS


def test_dynamic_shape_dfspostorder(tmp_path):
    """UtestComputeGraph.DynamicShapeGraph_DFSPOSTORDERTopologicalSorting_success, cgut:1795:
    shapes {-1,1}."""
    nodes = {f"node{i}": node(f"node{i}", 1, 1, [-1, 1]) for i in (1, 2, 3)}
    model = graph(tmp_path, nodes, ["node1:0 -> node2:0", "node2:0 -> node3:0"], ["node1", "node2", "node3"])
    assert sort(model, opts("2")) == []
    assert ids(model.root) == {"node1": 0, "node2": 1, "node3": 2}


@pytest.mark.parametrize("options", [opts("2", memory=True), opts("1"), opts("0")], ids=["rdfs_mp", "dfs", "bfs"])
def test_dfspostorder_ringing_fail(tmp_path, options):
    """UtestComputeGraph.DFSPOSTORDERTopologicalSorting_ringing_fail, cgut:1817 ({mode 2, MP});
    DFS and BFS (derived) fail alike. The list is left as it was."""
    nodes = {f"node{i}": node(f"node{i}", 1, 1) for i in (1, 2, 3)}
    model = graph(tmp_path, nodes, ["node1:0 -> node2:0", "node2:0 -> node3:0", "node3:0 -> node1:0"],
                  ["node1", "node2", "node3"])
    assert sort(model, options) == [model.root]
    assert names(model.root) == ["node1", "node2", "node3"]


# ---- DelayTopoSort ----------------------------------------------------------------
DELAY_DFS = ["variable", "node2", "node1", "data", "node3", "node4", "node5"]
DELAY_RDFS_MP = ["variable", "data", "node2", "node3", "node4", "node1", "node5"]
MULTI_DFS = ["const", "constant", "variable", "node2", "node1", "data", "node3", "node4", "node5"]
MULTI_NO_DELAY = ["const", "constant", "variable", "node1", "data", "node2", "node3", "node4", "node5"]


def test_delay_topological_sorting(tmp_path):
    """UtestComputeGraph.DelayTopologicalSorting, cgut:1835 (assert 1842): node1 moves before
    node5, node2 before node3."""
    check_sort(graph(tmp_path, *delay_graph(), DELAY_RDFS_MP), opts("2", memory=True), DELAY_RDFS_MP)


def test_delay_topological_sorting_from_dfs_list(tmp_path):
    """cgut:1835 with the list a DFS GetGraph leaves (derived): RDFS reads no list order here."""
    check_sort(graph(tmp_path, *delay_graph(), DELAY_DFS), opts("2", memory=True), DELAY_RDFS_MP)


def test_no_delay_topological_sorting(tmp_path):
    """UtestComputeGraph.NoDelayTopologicalSorting, cgut:2221 (assert 2227): DFS, no MP, no delay."""
    check_sort(graph(tmp_path, *delay_graph(), DELAY_DFS), opts("1"), DELAY_DFS)


def test_delay_topological_sorting_multi_input(tmp_path):
    """UtestComputeGraph.DelayTopologicalSortingMultiInput, cgut:2243 (assert 2250)."""
    check_sort(graph(tmp_path, *multi_input_graph(), MULTI_DFS), opts("2", memory=True),
               ["const", "constant", "variable", "data", "node2", "node3", "node4", "node1", "node5"])


def test_no_delay_topological_sorting_multi_input(tmp_path):
    """UtestComputeGraph.NoDelayTopologicalSortingMultiInput, cgut:2267 (assert 2274): `constant`
    of type "test" is not long-lived, so node1 stays; node2 still moves."""
    check_sort(graph(tmp_path, *multi_input_graph(False), MULTI_NO_DELAY), opts("2", memory=True), MULTI_NO_DELAY)


# ---- StableRDFS (mode 3) ----------------------------------------------------------
def test_stable_rdfs_1(tmp_path):
    """UtestComputeGraph.StableRDFSTopologicalSorting1, cgut:1859 (asserts 1871-1880)."""
    check_sort(graph(tmp_path, *delay_graph(), DELAY_DFS), opts("3"), DELAY_DFS)


def test_stable_rdfs_2(tmp_path):
    """UtestComputeGraph.StableRDFSTopologicalSorting2, cgut:1887 (assert 1902): a BFS list."""
    order = ["variable", "node1", "node2", "data", "node3", "node4", "node5"]
    check_sort(graph(tmp_path, *delay_graph(), order), opts("3"), order)


def test_stable_rdfs_3(tmp_path):
    """UtestComputeGraph.StableRDFSTopologicalSorting3, cgut:1918 (assert 1933)."""
    order = ["variable", "node1", "data", "node3", "node4", "node5"]
    check_sort(graph(tmp_path, *skip_input_graph(), order), opts("3"), order)


def noop_graph(tmp_path):
    """cgut:1949/1991: BuildDelayTopoGraph (DFS) with noop1, noop2 (no ports) appended and
    control edges data->noop1->node4, data->noop2->node4."""
    nodes, edges = delay_graph()
    nodes.update(noop1=node("noop", 0, 0), noop2=node("noop", 0, 0))
    edges += ["data ~> noop1", "noop1 ~> node4", "data ~> noop2", "noop2 ~> node4"]
    return graph(tmp_path, nodes, edges, DELAY_DFS + ["noop1", "noop2"])


def test_stable_rdfs_1_1(tmp_path):
    """UtestComputeGraph.StableRDFSTopologicalSorting1_1, cgut:1949 (asserts 1965-1983)."""
    check_sort(noop_graph(tmp_path), opts("3"),
               ["variable", "node2", "node1", "data", "node3", "noop1", "noop2", "node4", "node5"])


def test_stable_rdfs_1_2(tmp_path):
    """UtestComputeGraph.StableRDFSTopologicalSorting1_2, cgut:1991 (asserts 2007-2025): DFS."""
    check_sort(noop_graph(tmp_path), opts("1"),
               ["variable", "node2", "node1", "data", "noop2", "noop1", "node3", "node4", "node5"])


def fusion_graph(tmp_path):
    """cgut:2033/2078: BuildDelayTopoGraphMultiInput after node2 and node3 are fused into
    fusion_2_3 (2 scalar outputs, 8 bytes) and removed."""
    nodes, _ = multi_input_graph()
    del nodes["node2"], nodes["node3"]
    nodes["fusion_2_3"] = node("fusion", 2, 2, [], "ND")
    edges = ["const:0 -> node1:0", "constant:0 -> node1:1", "variable:0 -> node1:2", "variable:1 -> fusion_2_3:0",
             "data:0 -> fusion_2_3:1", "node1:0 -> node5:0", "fusion_2_3:0 -> node5:1", "fusion_2_3:1 -> node4:0",
             "node4:0 -> node5:2"]
    order = ["const", "constant", "variable", "node1", "data", "node4", "node5", "fusion_2_3"]
    return graph(tmp_path, nodes, edges, order)


def rewired_graph(tmp_path):
    """cgut:2147/2184: BuildDelayTopoGraphMultiInput with node4 feeding node1:1 instead of
    node5:2, and `constant` removed."""
    nodes, edges = multi_input_graph()
    del nodes["constant"]
    edges = [e for e in edges if e not in ("node4:0 -> node5:2", "constant:0 -> node1:1")]
    edges.insert(1, "node4:0 -> node1:1")
    return graph(tmp_path, nodes, edges, ["const", "variable", "node2", "node1", "data", "node3", "node4", "node5"])


@pytest.mark.parametrize("build, mode, expected", [
    pytest.param(fusion_graph, "3", ["const", "constant", "variable", "node1", "data", "fusion_2_3", "node4", "node5"],
                 id="StableRDFSTopologicalSorting2_1-cgut2033"),
    pytest.param(fusion_graph, "2", ["data", "variable", "fusion_2_3", "const", "constant", "node4", "node1", "node5"],
                 id="StableRDFSTopologicalSorting2_2-cgut2078-RDFS"),
    pytest.param(rewired_graph, "3", ["const", "variable", "node2", "data", "node3", "node4", "node1", "node5"],
                 id="StableRDFSTopologicalSorting2_3-cgut2147"),
    pytest.param(rewired_graph, "2", ["const", "data", "variable", "node2", "node3", "node4", "node1", "node5"],
                 id="StableRDFSTopologicalSorting2_4-cgut2184-RDFS"),
])
def test_stable_rdfs_2_x(tmp_path, build, mode, expected):
    """UtestComputeGraph.StableRDFSTopologicalSorting2_1 .. 2_4 (asserts cgut:2040-2070, 2109,
    2171, 2208): the fused and the rewired graphs under stable RDFS and RDFS."""
    check_sort(build(tmp_path), opts(mode), expected)


# ---- graph_utils_unittest.cc ------------------------------------------------------
def test_single_output_2_multi_inputs(tmp_path):
    """UtestGraphUtils.Single_output_2_multi_inputs, guut:3695 (asserts 3723-3730): DFS from the
    creation order (GetGraph), then again. Relu2/Relu3 -> Netoutput:0 failed in GE: left out."""
    nodes = {"Data1": node("Data", 0, 1), "Data2": node("Data", 0, 1), "Add": node("Add", 2, 1),
             **{f"Relu{i}": node("Relu", 1, 1) for i in range(1, 7)}, "Netoutput": node("NetOutput", 3, 0)}
    edges = ["Data1:0 -> Add:0", "Data2:0 -> Add:1", "Add:0 -> Relu1:0", "Add:0 -> Relu2:0", "Add:0 -> Relu3:0",
             "Relu1:0 -> Netoutput:0", "Add ~> Relu4", "Add ~> Relu5", "Add ~> Relu6", "Relu4 ~> Netoutput",
             "Relu5 ~> Netoutput", "Relu6 ~> Netoutput"]
    model = graph(tmp_path, nodes, edges, list(nodes))
    expected = ["Data1", "Data2", "Add", "Relu6", "Relu5", "Relu4", "Relu3", "Relu2", "Relu1", "Netoutput"]
    check_sort(model, opts(), expected)
    check_sort(model, opts(), expected)


def subgraph(*chain, owner=None):
    """A subgraph spec: a Data-fed chain `chain` (names), its first an input; optionally the
    middle node owning subgraphs `owner` (a While)."""
    nodes = {chain[0]: node("Data", 0, 1)}
    for name in chain[1:-1]:
        nodes[name] = node("While", 1, 1, subgraphs=owner)
    nodes[chain[-1]] = node("NetOutput", 1, 0)
    return nodes, [f"{a}:0 -> {b}:0" for a, b in zip(chain, chain[1:])]


def test_graph_with_subgraph(tmp_path):
    """guut:250 BuildGraphWithSubGraph (derived): global ids in GetAllNodes order; the
    subgraphs listed in reverse instance order, [sub2, sub1]."""
    root = {"data0": node("Data", 1, 1), "case0": node("Case", 1, 1, subgraphs=["sub1", "sub2"]),
            "relu0": node("Relu", 1, 1), "relu1": node("Relu", 1, 1), "netoutput": node("NetOutput", 1, 1)}
    model = load(tmp_path, {
        "root": (root, ["data0:0 -> case0:0", "case0:0 -> relu0:0", "relu0:0 -> relu1:0", "relu1:0 -> netoutput:0"]),
        "sub1": ({"data1": node("Data", 0, 1), "sub1_netoutput": node("NetOutput", 1, 1)},
                 ["data1:0 -> sub1_netoutput:0"]),
        "sub2": ({"data2": node("Data", 0, 1), "sub2_netoutput": node("NetOutput", 1, 1)},
                 ["data2:0 -> sub2_netoutput:0"])})
    assert sort(model, opts()) == []
    assert {n.name: n.id for n in model.all_nodes()} == {
        "data0": 0, "case0": 1, "data1": 2, "sub1_netoutput": 3, "data2": 4, "sub2_netoutput": 5, "relu0": 6,
        "relu1": 7, "netoutput": 8}
    assert [g.name for g in model.graph_order] == ["root", "sub2", "sub1"]


NESTED_IDS = {"x": 0, "if1": 1, "t_data": 2, "t_while": 3, "c_data": 4, "c_out": 5, "y_data": 6, "y_out": 7,
              "t_out": 8, "e_data": 9, "e_out": 10, "case1": 11, "b_data": 12, "b_out": 13, "out": 14}


def nested_model(tmp_path, **extra):
    """root: x -> if1{then1, else1} -> case1{b0} -> out; then1 holds a While{cond, body} and
    lists its nodes unsorted; `extra` graphs are appended (no node owns them)."""
    then_nodes, then_edges = subgraph("t_data", "t_while", "t_out", owner=["cond", "body"])
    then_nodes = {k: then_nodes[k] for k in ("t_out", "t_while", "t_data")}
    root = {"x": node("Data", 0, 1), "if1": node("If", 1, 1, subgraphs=["then1", "else1"]),
            "case1": node("Case", 1, 1, subgraphs=["b0"]), "out": node("NetOutput", 1, 0)}
    return load(tmp_path, {"root": (root, ["x:0 -> if1:0", "if1:0 -> case1:0", "case1:0 -> out:0"]),
                           "then1": (then_nodes, then_edges), "else1": subgraph("e_data", "e_out"),
                           "cond": subgraph("c_data", "c_out"), "body": subgraph("y_data", "y_out"),
                           "b0": subgraph("b_data", "b_out"), **extra})


def test_nested_subgraphs_renumbered_and_reordered(tmp_path):
    """TopologicalSorting on a root (derived from cg.cc:2269): each subgraph sorted alone, global
    ids in GetAllNodes order, sub_graph_ swapped for the order AllGraphNodes finds them."""
    model = nested_model(tmp_path)
    assert sort(model, opts()) == []
    assert names(model.graphs["then1"]) == ["t_data", "t_while", "t_out"]
    assert [n.name for n in model.all_nodes()] == list(NESTED_IDS)
    assert {n.name: n.id for n in model.all_nodes()} == NESTED_IDS
    assert [g.name for g in model.graph_order] == ["root", "else1", "then1", "body", "cond", "b0"]


def test_subgraph_count_differs_keeps_order(tmp_path):
    """A subgraph no node owns (GE's "Graph Partition" case): the count differs, so the list
    of subgraphs is kept; the ids are still global, the orphan's its own."""
    model = nested_model(tmp_path, spare=({"s_out": node("NetOutput", 1, 0), "s_data": node("Data", 0, 1)},
                                          ["s_data:0 -> s_out:0"]))
    assert sort(model, opts()) == []
    assert {n.name: n.id for n in model.all_nodes()} == NESTED_IDS
    assert [g.name for g in model.graph_order] == ["root", "then1", "else1", "cond", "body", "b0", "spare"]
    assert ids(model.graphs["spare"]) == {"s_data": 0, "s_out": 1}


def test_subgraph_sorted_alone(tmp_path):
    """TopologicalSorting on a subgraph (its sub_graph_ is empty): its direct nodes only, ids
    0..n-1; the other graphs' ids and the subgraph list stay."""
    model = nested_model(tmp_path)
    assert sort(model, opts()) == []
    order = list(model.graph_order)
    then1 = model.graphs["then1"]
    assert sort(model, opts(), then1) == []
    assert ids(then1) == {"t_data": 0, "t_while": 1, "t_out": 2}
    assert {n.name: n.id for n in model.all_nodes()} == {**NESTED_IDS, **ids(then1)}
    assert model.graph_order == order


# ---- behaviours no GE test asserts (derived from compute_graph.cc) ------------------
@pytest.mark.parametrize("mode", ["1", "0"])
def test_input_sources_first(tmp_path, mode):
    """SortNodes (cg.cc:2374): the input sources (Data, Recv, ...) first, in list order, then
    the others; "DATA" is not an input."""
    nodes = {"const": node("Const", 0, 1), "dd": node("DATA", 0, 1), "recv": node("Recv", 0, 1),
             "d": node("Data", 0, 1), "add": node("Add", 4, 1)}
    edges = [f"{k}:0 -> add:{i}" for i, k in enumerate(["const", "dd", "recv", "d"])]
    check_sort(graph(tmp_path, nodes, edges, list(nodes)), opts(mode), ["recv", "d", "const", "dd", "add"])


LOOP_NODES = {"out": node("NetOutput", 1, 0), "next": node("NextIteration", 1, 1), "body": node("Relu", 1, 1),
              "exit": node("Exit", 1, 1), "switch": node("Switch", 1, 2), "merge": node("Merge", 2, 2),
              "enter": node("Enter", 1, 1), "data": node("Data", 0, 1)}
LOOP_EDGES = ["data:0 -> enter:0", "enter:0 -> merge:0", "merge:0 -> switch:0", "switch:0 -> exit:0",
              "switch:1 -> body:0", "body:0 -> next:0", "next:0 -> merge:1", "exit:0 -> out:0"]


@pytest.mark.parametrize("mode,expected", [
    ("1", ["data", "enter", "merge", "switch", "body", "next", "exit", "out"]),
    ("0", ["data", "enter", "merge", "switch", "body", "exit", "next", "out"])])
def test_next_iteration_edge_not_counted(tmp_path, mode, expected):
    """GetInEdgeSize (cg.cc:2417) leaves out a data edge from NextIteration, so the loop's Merge
    starts after Enter; NextIteration's edge later does not push it again."""
    check_sort(graph(tmp_path, LOOP_NODES, LOOP_EDGES, list(LOOP_NODES)), opts(mode), expected)


@pytest.mark.parametrize("edit,expected", [
    (lambda g: surgery.link_ctrl(g.find("node4"), g.find("node3")),
     ["node1", "node2", "node4", "node3", "node5", "node6", "netoutput"]),
    (lambda g: surgery.link(g.find("node4").outs[0], g.find("node5").ins[0]),
     ["node1", "node3", "node2", "node4", "node5", "node6", "netoutput"])], ids=["link_ctrl", "link"])
def test_edit_forgets_sorted_order(tmp_path, edit, expected):
    """Note [sorted stays sorted]: after a DFS sort, an edit makes the next sort under the same
    policy sort again, to GE's order (derived), not keep the stale one."""
    model = normal(tmp_path, NORMAL_BFS)
    install_policies(RunContext(PACK, model, opts("1")))
    assert sort_graph(model.root)
    assert names(model.root) == NORMAL_DFS
    edit(model.root)
    assert sort_graph(model.root)
    assert names(model.root) == expected
    assert [n.id for n in model.root.node_list()] == list(range(len(expected)))
