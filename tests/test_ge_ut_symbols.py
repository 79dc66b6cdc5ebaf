"""GE's GraphUtils symbol-table unit tests (tests/graph_metadef/ut/graph/testcase/
graph_utils_unittest.cc) that call a helper on hand-built tables, replayed on
engine/passes/symbols.py's SymbolTable. The GetRefMapping* tests on whole graphs are fixtures
(tests/cases/inplace/ge-ref-*.yaml)."""
from __future__ import annotations

from engine.passes.symbols import SymbolTable


def test_union_symbol_mapping_success():
    """UnionSymbolMappingSuccess: symbols var1_out_0 and var2_out_0 each list data1_out_0 and
    data2_out_0; anchor_to_symbol maps data1_out_0 to var1_out_0, data2_out_0 to var2_out_0.
    UnionSymbolMapping(data1_out_0, data2_out_0) succeeds (GE asserts only that). Derived from
    graph_utils.cc UnionSymbolMapping: on equal sizes the second symbol (var2_out_0) is kept, the
    first's anchors are appended to it and the first is erased."""
    t = SymbolTable()
    t.anchors = {"var1_out_0": ["data1_out_0", "data2_out_0"], "var2_out_0": ["data1_out_0", "data2_out_0"]}
    t.of = {"data1_out_0": "var1_out_0", "data2_out_0": "var2_out_0"}
    symbol = t.union(t.of["data1_out_0"], t.of["data2_out_0"])
    assert symbol == "var2_out_0"
    assert list(t.anchors) == ["var2_out_0"]
    assert t.anchors["var2_out_0"] == ["data1_out_0", "data2_out_0", "data1_out_0", "data2_out_0"]
    assert t.of == {"data1_out_0": "var2_out_0", "data2_out_0": "var2_out_0"}
