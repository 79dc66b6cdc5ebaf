"""Writes GE offline-model (.om) files around ModelDefs, field by field from GE's
ModelFileHeader and partition tables (engine/core/importers/om.py, Note [om layout]).
Used by tests/test_import_om.py and benchmarks/bench_import.py; memconflict itself only reads .om."""
from __future__ import annotations

import struct

MODEL_DEF, WEIGHTS, TASK_INFO, TBE, FLOW_MODEL, FLOW_SUBMODEL = 0, 1, 2, 3, 6, 7
HEADER = "<III64sIBBBB32sI32sII20sB3xQBB62x"


def om_table(parts: list[tuple[int, bytes]], wide: bool = True) -> bytes:
    """A partition table and its partitions, as OmFileSaveHelper lays them out: the 64-bit
    ModelPartitionTable (`wide`) or the older TinyModelPartitionTable."""
    out = bytearray(struct.pack("<I4x", len(parts)) if wide else struct.pack("<I", len(parts)))
    offset = 0
    for kind, blob in parts:
        out += struct.pack("<I4xQQ", kind, offset, len(blob)) if wide else struct.pack("<III", kind, offset, len(blob))
        offset += len(blob)
    for _, blob in parts:
        out += blob
    return bytes(out)


def om_file(models: list[list[tuple[int, bytes]]], *, name: str = "net", version: int = 0x20000000, mtype: int = 1,
            wide: bool = True, unknown: int = 0, encrypt: int = 0, magic: int = 0x444F4D49, length_delta: int = 0) -> bytes:
    """An om file: GE's 256-byte ModelFileHeader, then one table per model. `wide` files
    carry model_length (u64), the others the older u32 length; `length_delta` falsifies it."""
    body = b"".join(om_table(m, wide) for m in models)
    size = len(body) + length_delta
    header = struct.pack(HEADER, magic, 256, version, b"", 0 if wide else size, encrypt, 1, mtype, 0, name.encode(),
                         0, b"", 3, len(models), b"Ascend910B", 0, size if wide else 0, 0, unknown)
    assert len(header) == 256
    return header + body


def standard_om(modeldef: bytes, **kw) -> bytes:
    """What ATC writes for a static model: MODEL_DEF, WEIGHTS_DATA, TASK_INFO, TBE_KERNELS."""
    return om_file([[(MODEL_DEF, modeldef), (WEIGHTS, b"\0" * 64), (TASK_INFO, b"\x0a\x00"), (TBE, b"kernels")]], **kw)
