"""Plain records the variable manager stores and returns, and its error type."""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple

from engine.varmgr.desc import TensorDesc

UINT64_MAX = 2 ** 64 - 1
INT64_MAX = 2 ** 63 - 1


class Status(Enum):
    """GE status codes a variable-manager call can fail with."""

    FAILED = "FAILED"
    INTERNAL_ERROR = "INTERNAL_ERROR"
    PARAM_INVALID = "PARAM_INVALID"
    MEMALLOC_FAILED = "MEMALLOC_FAILED"
    GE_GRAPH_OPTIONS_INVALID = "GE_GRAPH_OPTIONS_INVALID"
    GE_GRAPH_VARIABLE_OP_PASS_FAILED = "GE_GRAPH_VARIABLE_OP_PASS_FAILED"


class VarError(Exception):
    """A failure status from the variable manager; names the variable when there is one."""

    def __init__(self, status: Status, message: str, var: str | None = None):
        self.status = status
        self.var = var
        self.message = message
        super().__init__(f"{status.value}: {message}")


# Note [compact records]: the records made once per variable (VarOp, VarAddr, VarDevAddr,
# Assignment) are NamedTuples: as immutable as a frozen dataclass, with the same field names
# and repr, but built by tuple.__new__ in a tenth of the time, which matters at 10^6
# variables. Change one with `_replace`.
class VarOp(NamedTuple):
    """What VarManager reads from a variable's OpDesc (None op = GE's nullptr)."""

    name: str
    type: str
    output: TensorDesc | None = None          # output desc 0; None = no outputs
    weight: bytes | None = None               # `value` tensor data; None = no weight attr
    file_path: str = ""                       # FileConstantInfo.weight_path
    file_offset: int = 0
    external_address: int | None = None       # ConstPlaceHolder device address
    output_offsets: tuple[int, ...] = ()
    inner_offset: int = 0


class VarAddr(NamedTuple):
    """VarAddrMgr: one VarKey's logical address."""

    desc: TensorDesc
    address: int          # logical address
    offset: int           # offset inside the memory type's space (0 for aliases)
    memory_type: int      # rtMemType_t
    op: VarOp | None


class VarDevAddr(NamedTuple):
    """VarDevAddrMgr: a logical block and its device address (0 = not yet allocated)."""

    desc: TensorDesc
    logic_addr: int
    dev_addr: int = 0
    is_extern_mem: bool = False


@dataclass(frozen=True, slots=True)
class TransNodeInfo:
    node_type: str
    input: TensorDesc
    output: TensorDesc


@dataclass(frozen=True, slots=True)
class BroadcastInfo:
    var_name: str
    broadcast_name: str
    idx: int
    input_offset: int
    input_size: int
    output_offset: int
    output_size: int


class Assignment(NamedTuple):
    """What AssignVarMem did for one variable (for plans and reports)."""

    name: str
    key: str
    address: int
    memory_type: int
    size: int
    footprint: int        # logical bytes consumed by a new block, 0 when reused
    rule: str | None      # id of the reuse rule that supplied the address; None = new block
