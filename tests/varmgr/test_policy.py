"""rules/ge/variables.yaml: loads strictly; errors name file:line:col with a hint."""
import pytest

from engine.core.errors import InputError
from engine.varmgr.policy import Allocator, ReuseKind, TransSupport
from engine.varmgr.policy_load import default_policy_path, load_policy

SHIPPED = default_policy_path()


def test_shipped_policy_loads_with_ge_constants():
    p = load_policy(SHIPPED)
    assert (p.memory.align, p.memory.guard_units) == (512, 2)
    assert p.memory.logic_base_default == 32 * 2 ** 30 and p.memory.logic_base_session == 128 * 2 ** 30
    assert [r.id for r in p.reuse_rules] == ["var/same-variable", "var/file-constant-slice",
                                            "var/identical-constant", "var/size-compatible"]
    assert len({r.id for r in p.reuse_rules}) == len(p.reuse_rules)
    assert {s.name: (s.rt, s.allocator) for s in p.memory_types} == {
        "HBM": (2, Allocator.OFFSET), "RDMA_HBM": (3, Allocator.RDMA_POOL),
        "HOST": (129, Allocator.HOST_POOL), "RESERVED": (256, Allocator.NONE)}
    assert p.format_fusion.max_var_change_times == 1
    assert p.format_fusion.trans_op("Cast").support is TransSupport.CAST
    assert len(p.format_fusion.format_transfers) == 42 and len(p.format_fusion.cast_pairs) == 20
    assert [p.memory.footprint(s) for s in (24, 0, 1000, 1536)] == [1536, 1024, 2048, 2560]


def test_var_key_prints_back_and_renders_ge_keys():
    p = load_policy(SHIPPED)
    assert str(p.var_key) == '{name}{format}_{dtype}'
    assert p.var_key.render("var1", 2, 0) == "var12_0"
    assert p.var_key.render("global_step", 2, 0) == "global_step2_0"


def _load(tmp_path, text):
    path = tmp_path / "variables.yaml"
    path.write_text(text)
    return path


def _edited(tmp_path, old, new):
    text = SHIPPED.read_text()
    assert old in text
    return _load(tmp_path, text.replace(old, new, 1))


def test_changing_alignment_is_a_pack_edit(tmp_path):
    p = load_policy(_edited(tmp_path, "  align: 512 ", "  align: 1024 "))
    assert p.memory.footprint(24) == 1024 + 2048


def test_removing_a_reuse_rule_is_a_pack_edit(tmp_path):
    from engine.varmgr import TensorDesc, VarManagerPool, VarOp
    text = SHIPPED.read_text()
    start = text.index("  - id: var/identical-constant")
    end = text.index("  - id: var/size-compatible")
    policy = load_policy(_load(tmp_path, text[:start] + text[end:]))
    assert policy.reuse_rule(ReuseKind.IDENTICAL_WEIGHTS) is None
    vm = VarManagerPool(policy).instance(0)
    vm.init(0, 0, 0, 0)
    c = lambda n: VarOp(n, "Constant", TensorDesc(dtype=4), weight=b"\1\2\3")   # noqa: E731
    a1 = vm.assign_var_mem("c1", c("c1"), TensorDesc(dtype=4), 2)
    a2 = vm.assign_var_mem("c2", c("c2"), TensorDesc(dtype=4), 2)
    assert a1.address != a2.address and a2.rule is None


def test_unknown_key_with_hint(tmp_path):
    path = _edited(tmp_path, "  guard_units: 2", "  gaurd_units: 2")
    line = path.read_text().splitlines().index(next(ln for ln in path.read_text().splitlines()
                                                    if "gaurd_units" in ln)) + 1
    with pytest.raises(InputError) as err:
        load_policy(path)
    text = str(err.value)
    assert f"variables.yaml:{line}:3: error: memory: unknown key 'gaurd_units'" in text
    assert "error: memory: missing key 'guard_units'" in text
    assert "hint: did you mean 'guard_units'?" in text


def test_wrong_type_and_unknown_names_collected(tmp_path):
    path = _edited(tmp_path, "  align: 512 ", "  align: five ")
    text = path.read_text().replace("allocator: rdma_pool", "allocator: rdma_pol")
    text = text.replace("- [NCHW, FRACTAL_Z]", "- [NCHW, FRACTAL_ZZZ]")
    text = text.replace("default: HBM", "default: HMB")
    path.write_text(text)
    with pytest.raises(InputError) as err:
        load_policy(path)
    msgs = [p.message for p in err.value.problems]
    assert "memory: 'align' must be an integer" in msgs
    assert "memory_types.RDMA_HBM: unknown allocator 'rdma_pol'" in msgs
    assert "unknown name 'FRACTAL_ZZZ' in format_transfers" in msgs
    assert "unknown memory type 'HMB'" in msgs
    hints = {p.message: p.hint for p in err.value.problems}
    assert hints["memory: 'align' must be an integer"] == "got the string 'five'"
    assert hints["memory_types.RDMA_HBM: unknown allocator 'rdma_pol'"] == "did you mean 'rdma_pool'?"
    assert hints["unknown memory type 'HMB'"] == "did you mean 'HBM'?"
    locs = [p.loc for p in err.value.problems]
    assert locs == sorted(locs)


def test_bad_var_key_placeholder(tmp_path):
    with pytest.raises(InputError, match=r"unknown placeholder '\{fmt\}'"):
        load_policy(_edited(tmp_path, 'var_key: "{name}{format}_{dtype}"', 'var_key: "{name}{fmt}_{dtype}"'))


def test_duplicate_rule_ids_name_both_places(tmp_path):
    with pytest.raises(InputError) as err:
        load_policy(_edited(tmp_path, "id: var/size-compatible", "id: var/same-variable"))
    assert "reuse rule 'var/same-variable' at" in str(err.value)
    assert "already registered at" in str(err.value)


def test_node_name_templates_are_policy(tmp_path):
    p = load_policy(_edited(tmp_path, 'ref: "{var}_TO_{node}_REF_{index}"', 'ref: "{var}-ref-{node}-{index}"'))
    assert p.node_names.ref.format(var="v", node="w", index=0) == "v-ref-w-0"
    with pytest.raises(InputError, match=r"unknown placeholder '\{writer\}'"):
        load_policy(_edited(tmp_path, 'ref: "{var}_TO_{node}_REF_{index}"', 'ref: "{writer}_REF"'))
