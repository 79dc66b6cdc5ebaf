"""Planning work grows linearly with the variables (counts work, not time; STYLE §15).

Guards the speed-ups of issue 13 part A: descriptors are read once per distinct descriptor,
a VarKey is rendered a fixed number of times per variable, planning calls grow linearly, and
a state file writes each distinct descriptor once.
"""
import sys

import pytest

from engine.core.dumpio import build_model
from engine.proto import ge_ir_pb2 as pb
from engine.varmgr import TensorDesc, VarManagerPool
from engine.varmgr import desc as desc_mod
from engine.varmgr import placement
from engine.varmgr.desc import desc_to_proto
from engine.varmgr.state import encode, to_info


def _model(n: int):
    model = pb.ModelDef(version=1)
    g = model.graph.add(name="g")
    for k in range(n):
        op = g.op.add(name=f"v{k}", type="Variable" if k % 3 else "Constant")
        desc_to_proto(TensorDesc(dims=(k % 4 + 1, 8)), op.output_desc.add())
        if k % 3 == 0:
            op.attr["value"].t.data = (k % 7).to_bytes(4, "little") * 8
    return build_model(model)


def _session():
    vm = VarManagerPool().instance(1)
    vm.init(2, 1, 0, 0)
    vm.set_all_memory_max_value({})
    return vm


def _calls(fn) -> int:
    """Python function calls made by fn() (a work count independent of the machine's load)."""
    count = 0

    def prof(frame, event, arg):
        nonlocal count
        if event == "call":
            count += 1
    sys.setprofile(prof)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return count


def test_descriptors_read_once_per_distinct_descriptor(monkeypatch):
    reads = []
    real = desc_mod.desc_from_proto
    monkeypatch.setattr(desc_mod, "desc_from_proto", lambda td, *a: reads.append(1) or real(td, *a))
    plan = placement.plan_graph(_model(600), _session(), 0)
    assert len(plan.entries) == 600
    assert len(reads) == 4                 # four shapes in the graph


def test_var_key_renders_per_variable_are_bounded(monkeypatch):
    vm = _session()
    res = vm.var_resource
    renders = []
    real = res._render
    res._render = lambda *a: renders.append(1) or real(*a)
    placement.plan_graph(_model(300), vm, 0)
    assert len(renders) <= 3 * 300


@pytest.mark.parametrize("n", [400])
def test_planning_calls_grow_linearly(n):
    small = _model(n)
    large = _model(4 * n)
    a = _calls(lambda: placement.plan_graph(small, _session(), 0))
    b = _calls(lambda: placement.plan_graph(large, _session(), 0))
    assert b <= 4.4 * a, (a, b)            # linear, with a little slack for the dictionaries
    assert a <= 40 * n                     # and a bounded number of calls per variable


def test_state_writes_each_distinct_descriptor_once(monkeypatch):
    vm = _session()
    placement.plan_graph(_model(300), vm, 0)
    from engine.varmgr import state
    writes = []
    real = state.desc_to_proto
    monkeypatch.setattr(state, "desc_to_proto", lambda d, *a, **k: writes.append(1) or real(d, *a, **k))
    data = encode(to_info(vm), False)
    assert len(writes) == 4
    monkeypatch.undo()
    # the memoised write is byte-identical to writing every field afresh
    info = to_info(vm)
    for key, e in vm.var_resource.var_addr_mgr_map.items():
        fresh = pb.TensorDescriptor()
        desc_to_proto(e.desc, fresh)
        assert info.var_resource.var_addr_mgr_map[key].desc == fresh
    assert encode(info, False) == data
