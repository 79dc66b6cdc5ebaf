"""§11.6 graph_rebuild_state_ctrl_unittest.cc (cases 74-86)."""
import pytest

from engine.varmgr.rebuild import GraphRebuildStateCtrl

from .graphs import GraphBuilder


def graph2():
    b = GraphBuilder("graph2")
    b.op("var1", "Variable")
    b.op("var2", "VariableV2")
    b.op("var3", "VarHandleOp")
    b.op("add", "Add", inputs=["var1:0", "var2:0"])
    return b.build()


def no_vars():
    b = GraphBuilder("plain")
    b.op("data", "Data")
    return b.build()


@pytest.fixture
def ctrl(pool):
    return GraphRebuildStateCtrl(pool.policy)


def test_add_graph_null(ctrl):                                          # 74
    ctrl.add_graph(1, None)
    assert ctrl.graph_resources == {}


def test_add_graph_without_vars(ctrl):                                  # 75
    ctrl.add_graph(1, no_vars())
    assert ctrl.graph_resources == {1: set()}


def test_add_graph_with_vars_and_remove(ctrl):                          # 76, 77
    ctrl.add_graph(1, graph2())
    assert ctrl.graph_resources[1] == {"var1", "var2", "var3"}
    ctrl.remove_graph(1)
    assert ctrl.graph_resources == {}


@pytest.mark.parametrize("names", [["var1"], ["var2", "var3"]])       # 78, 79
def test_state_changed_needs_rebuild(ctrl, names):
    ctrl.add_graph(1, graph2())
    for n in names:
        ctrl.set_state_changed(n)
    assert ctrl.is_graph_need_rebuild(1)


def test_two_graphs_share_var(ctrl):                                    # 80-82
    ctrl.add_graph(1, graph2())
    ctrl.add_graph(2, graph2())
    ctrl.set_state_changed("var1")
    assert ctrl.is_graph_need_rebuild(1) and ctrl.is_graph_need_rebuild(2)
    ctrl.remove_graph(2)
    assert ctrl.is_graph_need_rebuild(1) and not ctrl.is_graph_need_rebuild(2)
    ctrl.add_graph(2, graph2())
    ctrl.set_state_changed("var2")
    ctrl.set_graph_build_end(2)
    assert ctrl.is_graph_need_rebuild(1) and not ctrl.is_graph_need_rebuild(2)


def test_permit_to_change_formats(ctrl):                                # 83, 84
    ctrl.add_graph(1, graph2())
    assert all(ctrl.is_var_permit_to_change_formats(n) for n in ("var1", "var2", "var3"))
    ctrl.set_state_changed("var1")
    assert not ctrl.is_var_permit_to_change_formats("var1")
    assert ctrl.is_var_permit_to_change_formats("var2") and ctrl.is_var_permit_to_change_formats("var3")
    ctrl.remove_graph(1)
    assert not ctrl.is_var_permit_to_change_formats("var1")


def test_many_changes(ctrl):                                            # 85
    ctrl.add_graph(1, graph2())
    for _ in range(6):
        ctrl.set_state_changed("var1")
    assert not ctrl.is_var_permit_to_change_formats("var1")
    assert ctrl.is_var_permit_to_change_formats("var2")


def test_change_before_add_graph(ctrl):                                 # 86
    ctrl.set_state_changed("var1")
    assert not ctrl.is_var_permit_to_change_formats("var1")
    ctrl.add_graph(1, graph2())
    assert not ctrl.is_graph_need_rebuild(1)
