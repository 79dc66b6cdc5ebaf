"""GE rules the variable passes and the planner follow, checked against GE's code (issue 13 "Why"):
the pipeline's option gates and O3 level, guard units from the policy, the FrameworkOp ref table
and the var-like set as pack data. The graph-level behaviour is in tests/cases/variables/."""
import pytest

from harness import ROOT, shared_pack
from engine.passes.manager import resolve_passes
from engine.varmgr import TensorDesc, VarManagerPool, VarOp
from engine.varmgr.policy_load import default_policy_path, load_policy

from .graphs import GraphBuilder

SHIPPED = default_policy_path()
VAR_PASSES = ("variable_prepare", "variable_op", "variable_ref_useless_control_out_delete", "variable_ref_delete")


def _run_ids(options):
    return [p.id for p in resolve_passes(shared_pack(), None, options)]


@pytest.mark.parametrize("options, runs", [
    ({}, True),
    ({"ge.exec.variable_acc": "True"}, True),
    ({"ge.exec.variable_acc": "False"}, False),                 # kBoolDisableOption
    ({"ge.exec.variable_acc": "false"}, True),                  # GE compares the exact string
    ({"ge.AllowMultiGraphParallelCompile": "1"}, False),
    ({"ge.AllowMultiGraphParallelCompile": "1", "ge.exec.variable_acc": "True"}, False),
    ({"ge.AllowMultiGraphParallelCompile": "0"}, True),
])
def test_variable_op_options(options, runs, monkeypatch):            # graph_manager.cc OptimizeStage1_1
    monkeypatch.chdir(ROOT)
    ids = _run_ids(options)
    assert ("variable_op" in ids) is runs
    assert "variable_prepare" in ids and "variable_ref_delete" in ids


def test_variable_passes_are_o3(monkeypatch):
    monkeypatch.chdir(ROOT)
    o1 = _run_ids({"ge.oo.level": "O1"})
    assert [p for p in VAR_PASSES if p in o1] == []
    assert "var_is_initialized" in o1                               # VarIsInitializedOpPass is O0
    o3 = _run_ids({"ge.oo.level": "O3"})
    assert all(p in o3 for p in VAR_PASSES)


def test_pass_levels_follow_their_registration(monkeypatch):
    """REG_PASS_OPTION(...).LEVELS: AtomicAddrCleanPass O1 and above, InplaceSupportCheckPass O3
    (and a host-exec graph); MemcpyAddrAsyncPass, called directly, at any level."""
    monkeypatch.chdir(ROOT)
    host = {"context.hostExecFlag": "1"}
    o0 = _run_ids({"ge.oo.level": "O0", **host})
    assert "atomic_addr_clean" not in o0 and "inplace_support_check" not in o0 and "memcpy_addr_async" in o0
    o1 = _run_ids({"ge.oo.level": "O1", **host})
    assert "atomic_addr_clean" in o1 and "inplace_support_check" not in o1
    assert "inplace_support_check" in _run_ids(host) and "inplace_support_check" not in _run_ids({})


def test_var_is_initialized_runs_before_the_first_hccl_memcpy(monkeypatch):
    """GraphPrepare::PrepareOptimize runs its node passes, VarIsInitializedOpPass among them,
    before its PassManager's HcclMemcpyPass: the Const it makes is protected as a constant."""
    monkeypatch.chdir(ROOT)
    ids = _run_ids({})
    assert ids.index("var_is_initialized") < ids.index("hccl_memcpy")
    assert ids[:3] == ["graph_lint", "var_is_initialized", "hccl_memcpy"]


def test_useless_control_out_pass_runs_in_stage1_3(monkeypatch):
    monkeypatch.chdir(ROOT)
    ids = _run_ids({})
    i = ids.index("variable_ref_useless_control_out_delete")
    assert ids[i - 1] == "variable_op" and ids[i + 1] == "hccl_memcpy"     # before the second HcclMemcpyPass


def _edited(tmp_path, old, new):
    text = SHIPPED.read_text()
    assert old in text
    path = tmp_path / "variables.yaml"
    path.write_text(text.replace(old, new, 1))
    return path


def _offsets(policy, sizes):
    vm = VarManagerPool(policy).instance(0)
    vm.init(0, 0, 0, 0)
    out = []
    for i, size in enumerate(sizes):
        name = f"v{i}"
        vm.assign_var_mem(name, VarOp(name, "Variable", TensorDesc(size=size)), TensorDesc(size=size), 2)
        out.append(vm.get_var_addr(name, TensorDesc(size=size))[0] - vm.var_mem_logic_base)
    return out, vm.get_var_mem_size(2)


def test_guard_units_come_from_the_policy(tmp_path):
    assert _offsets(load_policy(SHIPPED), [24, 1000, 0]) == ([0, 1536, 3584], 4608)   # 512 + 2 * 512 ...
    four = load_policy(_edited(tmp_path, "  guard_units: 2 ", "  guard_units: 4 "))
    assert four.memory.footprint(24) == 512 + 4 * 512
    assert _offsets(four, [24, 1000, 0]) == ([0, 2560, 5632], 7680)
    zero = load_policy(_edited(tmp_path, "  guard_units: 2 ", "  guard_units: 0 "))
    assert _offsets(zero, [24, 1000, 0]) == ([0, 512, 1536], 1536)


def test_framework_ref_table_is_pack_data(tmp_path):
    """Adding an original type to `framework_ref_ports` makes such FrameworkOps writers: the walk
    passes through them (a FrameworkOp itself never gets a ref) to the Assign they feed."""
    from engine.varmgr.passes.prepare import run_variable_prepare
    policy = load_policy(_edited(tmp_path, "  RefSwitch: {0: [0, 1]}\n",
                                 "  RefSwitch: {0: [0, 1]}\n  Assign: {0: [0]}\n"))
    assert policy.framework_ref_outputs("Assign", 0) == (0,)
    assert load_policy(SHIPPED).framework_ref_outputs("Assign", 0) == ()

    def graph():
        b = GraphBuilder()
        b.op("var", "Variable")
        b.op("c", "Const")
        b.op("assign", "Assign", inputs=["var:0", "c:0"], ports=(["ref", "value"], ["ref"]))
        b.op("fw", "FrameworkOp", inputs=["var:0", "c:0"], attrs={"original_type": "Assign"},
             ports=(["ref", "value"], ["ref"]))
        b.op("assign2", "Assign", inputs=["fw:0", "c:0"], ports=(["ref", "value"], ["ref"]))
        return b.build()
    shipped, edited = graph(), graph()
    assert [c.node for c in run_variable_prepare(shipped.root, load_policy(SHIPPED))] == ["var_TO_assign_REF_0"]
    assert sorted(c.node for c in run_variable_prepare(edited.root, policy)) == ["var_TO_assign2_REF_0",
                                                                               "var_TO_assign_REF_0"]


def test_framework_ref_table_errors_are_located(tmp_path):
    from engine.core.errors import InputError
    path = _edited(tmp_path, "  RefSwitch: {0: [0, 1]}\n", "  RefSwitch: {zero: [0, 1], 1: []}\n")
    with pytest.raises(InputError) as err:
        load_policy(path)
    text = str(err.value)
    assert "variables.yaml:" in text and "input index 'zero' must be an integer >= 0" in text
    assert "the outputs of input 1 must be a non-empty list of indexes" in text
