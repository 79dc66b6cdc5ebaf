"""The variable-memory policy (rules/ge/variables.yaml) as frozen dataclasses.

`load_policy(path)` reads the file strictly: unknown keys, wrong types and unknown
names are collected and raised together as one InputError with file:line:col and
a hint. Every entry keeps its Loc so a plan can name the rule line that decided.
"""
from __future__ import annotations

import string
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Callable

from engine.core.errors import Loc

if TYPE_CHECKING:
    from engine.varmgr.extpolicy import ExternalPolicy


class Allocator(Enum):
    """How a memory type gets storage (§4): logical offsets or a real pool pointer."""

    OFFSET = "offset"
    RDMA_POOL = "rdma_pool"
    HOST_POOL = "host_pool"
    NONE = "none"


class ReuseKind(Enum):
    SAME_VARIABLE = "same_variable"
    FILE_SLICE = "file_slice"
    IDENTICAL_WEIGHTS = "identical_weights"
    SIZE_COMPATIBLE = "size_compatible"


class TransSupport(Enum):
    ALWAYS = "always"
    FORMAT_TRANSFER = "format_transfer"
    CAST = "cast"
    NEVER = "never"


@dataclass(frozen=True, slots=True)
class VarKeyForm:
    """The VarKey template, e.g. "{name}{format}_{dtype}"; prints back to its source."""

    text: str
    loc: Loc
    render: Callable[[str, int, int], str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "render", _compile_template(self.text))

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True, slots=True)
class MemoryTypeSpec:
    name: str
    rt: int
    allocator: Allocator
    loc: Loc


@dataclass(frozen=True, slots=True)
class MemoryLimits:
    align: int
    guard_units: int
    logic_base_default: int
    logic_base_session: int
    graph_mem_max_default: int
    var_mem_max_default: int
    use_max_default: int
    max_memory_size: int
    graph_ratio: tuple[int, int]
    var_ratio: tuple[int, int]
    use_max_ratio: tuple[int, int]
    max_version: int
    capacity_check: bool
    loc: Loc

    def aligned(self, size: int) -> int:
        return (size + self.align - 1) // self.align * self.align

    def footprint(self, size: int) -> int:
        """GetVarMallocSize: aligned size plus the guards."""
        return self.aligned(size) + self.align * self.guard_units


@dataclass(frozen=True, slots=True)
class MemoryTypeSelection:
    attr: str
    values: tuple[tuple[int, str], ...]
    default: str
    loc: Loc


@dataclass(frozen=True, slots=True)
class SizeRule:
    round: int
    default_padding: int
    padding_option: str
    zero_size: int
    loc: Loc

    def size_of(self, nbytes: int, padding: int) -> int:
        size = (nbytes + self.round + padding - 1) // self.round * self.round
        return self.zero_size if size == 0 else size


@dataclass(frozen=True, slots=True)
class ReuseRule:
    id: str
    kind: ReuseKind
    op_types: tuple[str, ...]
    candidate_types: tuple[str, ...]
    key: str
    loc: Loc


@dataclass(frozen=True, slots=True)
class TransOp:
    type: str
    data_index: int
    support: TransSupport
    loc: Loc


@dataclass(frozen=True, slots=True)
class FormatFusion:
    max_var_change_times: int
    reformat_type: str
    trans_ops: tuple[TransOp, ...]
    renew_only_types: frozenset[str]
    format_transfers: frozenset[tuple[int, int]]
    cast_pairs: frozenset[tuple[int, int]]
    loc: Loc

    def trans_op(self, op_type: str) -> TransOp | None:
        for op in self.trans_ops:
            if op.type == op_type:
                return op
        return None


@dataclass(frozen=True, slots=True)
class OpTypes:
    placed: frozenset[str]
    variable: frozenset[str]
    file_constant: frozenset[str]
    const_place_holder: frozenset[str]
    string_weight: frozenset[str]
    string_length: frozenset[str]
    ref_data: frozenset[str]
    broadcast: frozenset[str]
    assign: frozenset[str]
    trans_chain: frozenset[str]
    rebuild_tracked: frozenset[str]
    var_like: frozenset[str]
    var_is_initialized: frozenset[str]
    fused_variable: frozenset[str]
    init_writer: frozenset[str]
    init_flag: frozenset[str]
    framework_op: frozenset[str]
    merge: frozenset[str]
    ref_identity: frozenset[str]
    identity: frozenset[str]
    partitioned_call: frozenset[str]
    net_output: frozenset[str]
    available_memory: frozenset[str]
    loc: Loc


def one(types: frozenset[str]) -> str:
    """The single type of a one-type entry (validated on load)."""
    return next(iter(types))


@dataclass(frozen=True, slots=True)
class AttrNames:
    src_const_name: str
    src_var_name: str
    ref_var_src_var_name: str
    weights: str
    init_value: str
    inner_offset: str
    file_path: tuple[str, ...]
    file_offset: str
    file_length: str
    external_address: str
    original_type: str
    stream_label: str
    ref_port_index: str
    parent_node_index: str
    loc: Loc


@dataclass(frozen=True, slots=True)
class OptionKeys:
    evaluate_mode: str
    huge_page: str
    rdma_pool_size: str
    host_memory_size: str
    loc: Loc


@dataclass(frozen=True, slots=True)
class MemoryModes:
    """How a session's variables get device memory at model load (`memory_modes:`).

    GE: VarManager::IsGeUseExtendSizeMemory (the static memory policy, from an option or the
    GE_USE_STATIC_MEMORY environment variable), IsVariableUse1gHugePageOnly / ...First, and the
    page size DavinciModel::InitVariableMem gives the session's ExpandableActiveMemoryAllocator.
    """

    policy_option: str
    policy_env: str
    static_extend: frozenset[str]
    dynamic_extend: frozenset[str]
    final: tuple[str, str, str, str]        # the final policy: both, static only, dynamic only, neither
    huge_page_only: frozenset[str]
    huge_page_first: frozenset[str]
    page_size: int
    huge_page_size: int
    dynamic_page_size: int
    device_memory_default: int
    huge_pages_option: str
    loc: Loc


@dataclass(frozen=True, slots=True)
class NodeNames:
    """Name templates of the nodes the variable passes insert (`node_names:`)."""

    ref: str             # {var} {node} {index}: a variable ref after a writer's output or a ref input
    identity: str        # {writer} {node} {index}: an Identity before a Merge input
    ref_identity: str    # {src} {src_index} {node} {index}: a RefIdentity before a ref input
    loc: Loc


NODE_NAME_FIELDS = {"ref": {"var", "node", "index"}, "identity": {"writer", "node", "index"},
                    "ref_identity": {"src", "src_index", "node", "index"}}


@dataclass(frozen=True, slots=True)
class FrameworkRefPorts:
    """The ref ports of one framework op by its original type: input index -> output indexes."""

    original_type: str
    ports: tuple[tuple[int, tuple[int, ...]], ...]
    loc: Loc

    def outputs_of(self, input_index: int) -> tuple[int, ...]:
        for i, outs in self.ports:
            if i == input_index:
                return outs
        return ()


@dataclass(frozen=True, slots=True)
class VarPolicy:
    file: str
    schema_version: int
    op_types: OpTypes
    attrs: AttrNames
    var_key: VarKeyForm
    memory: MemoryLimits
    memory_types: tuple[MemoryTypeSpec, ...]
    memory_type_selection: MemoryTypeSelection
    size_rule: SizeRule
    reuse_rules: tuple[ReuseRule, ...]
    options: OptionKeys
    format_fusion: FormatFusion
    node_names: NodeNames
    framework_ref_ports: tuple[FrameworkRefPorts, ...]
    batch_name_postfix: str
    memory_modes: MemoryModes | None = None
    external: ExternalPolicy | None = None    # the `external:` block: FileConstant, export, ConstPlaceHolder
    _rules_by_kind: dict = field(init=False, repr=False, compare=False)
    _types_by_rt: dict = field(init=False, repr=False, compare=False)
    derived: dict = field(init=False, repr=False, compare=False)   # lookups built from the policy, once

    def __post_init__(self) -> None:
        object.__setattr__(self, "derived", {})
        # lookups on the planning hot path, computed once
        object.__setattr__(self, "_rules_by_kind", {r.kind: r for r in reversed(self.reuse_rules)})
        object.__setattr__(self, "_types_by_rt", {s.rt: s for s in reversed(self.memory_types)})

    def mem_type(self, name: str) -> MemoryTypeSpec:
        for spec in self.memory_types:
            if spec.name == name:
                return spec
        raise KeyError(name)

    def mem_type_by_rt(self, rt: int) -> MemoryTypeSpec | None:
        return self._types_by_rt.get(rt)

    def rt(self, name: str) -> int:
        return self.mem_type(name).rt

    def reuse_rule(self, kind: ReuseKind) -> ReuseRule | None:
        return self._rules_by_kind.get(kind)

    def framework_ref_outputs(self, original_type: str, input_index: int) -> tuple[int, ...]:
        """VariablePrepareOpPass's fixed table for framework ops (FindRefOutIndex on it)."""
        for entry in self.framework_ref_ports:
            if entry.original_type == original_type:
                return entry.outputs_of(input_index)
        return ()


def _compile_template(text: str) -> Callable[[str, int, int], str]:
    """render(name, format, dtype) for a validated template, as one f-string.

    Note [compiled VarKey]: keys are built several times per variable; a compiled
    f-string is about three times faster than str.format with keywords.
    """
    try:
        parts = list(string.Formatter().parse(text))
    except ValueError:
        return lambda name, fmt, dtype: text
    params = {"name": "name", "format": "fmt", "dtype": "dtype"}
    body = ""
    for literal, fld, _, _ in parts:
        body += literal.replace("{", "{{").replace("}", "}}")
        if fld is not None:
            body += "{" + params.get(fld, "name") + "}"
    return eval("lambda name, fmt, dtype: f" + repr(body))   # noqa: S307 (template is validated)
