"""External device memory: ConstPlaceHolder's given address (GetConstPlaceHolderAddr) and the
session's external variable memory (VarManager::SetExternalVar), with GE's failures; and what
the simulated device memory holds at a variable's address (`vars addr --dump`).
"""
from __future__ import annotations

from engine.core.attrs import typed_attr
from engine.core.graph import Node
from engine.varmgr import getypes as t
from engine.varmgr.extpolicy import PlaceHolderKeys
from engine.varmgr.records import INT64_MAX, Status, VarError


def const_place_holder_addr(node: Node, keys: PlaceHolderKeys) -> tuple[int, int]:
    """GetConstPlaceHolderAddr: (device address, attr size), or VarError(FAILED) as GE_ASSERT fails."""
    attrs = node.op.attr

    def need(key: str, kind: str, what: str):
        value = typed_attr(attrs, key, kind)
        if value is None:
            raise VarError(Status.FAILED, f"ConstPlaceHolder {node.name}: attr '{key}' ({what}) is missing "
                           "(GetConstPlaceHolderAddr)", node.name)
        return value

    shape = need(keys.storage_shape, "list", "list of int")
    dtype = t.dtype_from_proto(need(keys.dtype, "dt", "data type"))
    length = need(keys.size, "i", "int")
    count = 1
    for dim in shape:
        if not isinstance(dim, int) or (dim and abs(count * dim) > INT64_MAX):
            raise VarError(Status.FAILED, f"ConstPlaceHolder {node.name}: {keys.storage_shape} {shape} "
                           "overflows int64 (FMK_INT64_MULCHECK)", node.name)
        count *= dim
    size = t.tensor_bytes(dtype, count)
    size = -1 if size is None else size
    if length < size:
        raise VarError(Status.FAILED, f"ConstPlaceHolder {node.name}: GetConstPlaceHolder check data_lengths failed, "
                       f"attr size is [{length}], size calculated by shape and data type is [{size}], shape is "
                       f"{','.join(str(d) for d in shape)}, data_type is {t.dtype_serial(dtype)}.", node.name)
    placement = need(keys.placement, "i", "int")
    if placement != keys.device_placement:
        raise VarError(Status.FAILED, f"ConstPlaceHolder {node.name}: GetConstPlaceHolderAttr placement expect "
                       f"{keys.device_placement}, but got {placement}.", node.name)
    addr = need(keys.addr, "i", "int")
    if addr == 0:
        raise VarError(Status.FAILED, f"ConstPlaceHolder {node.name}: GetConstPlaceHolderAttr dev_address ptr "
                       "is null.", node.name)
    return addr, length


def parse_external_var(text: str) -> tuple[int, int]:
    """`ADDR:SIZE` (decimal or 0x-hex) for SetExternalVar; ValueError naming the problem."""
    addr_text, sep, size_text = text.partition(":")
    if not sep:
        raise ValueError("expected ADDR:SIZE")
    try:
        addr, size = int(addr_text, 0), int(size_text, 0)
    except ValueError:
        raise ValueError("ADDR and SIZE must be decimal or 0x-hex numbers") from None
    if addr <= 0 or size < 0:
        raise ValueError("ADDR must be a non-null pointer and SIZE >= 0")
    return addr, size


def external_var_failure(mgr, logic: int) -> str | None:
    """Why GetVarMemoryAddr's external-variable branch returns nullptr for `logic`, or None."""
    inner = mgr.get_var_mem_size(mgr.hbm_rt)
    size, base = mgr.external_var_size, mgr.var_mem_logic_base
    if size < inner:
        return f"external var size {size} cannot be smaller than {inner}"
    if logic < base:
        return f"logic offset {logic} cannot be smaller than logic base {base}"
    if logic - base >= size:
        return f"real offset {logic - base} should be smaller than external var size {size}"
    return None


def hex_dump(addr: int, data: bytes, width: int = 16) -> list[str]:
    """hexdump -C style lines, each starting with its device address."""
    lines = []
    for k in range(0, len(data), width):
        chunk = data[k:k + width]
        cells = " ".join(f"{b:02x}" for b in chunk).ljust(width * 3 - 1)
        text = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        lines.append(f"0x{addr + k:x}  {cells}  |{text}|")
    return lines
