"""GE's offline model (`.om`, written by ATC): the embedded ModelDef read as GE's
ModelHelper loads it (Note [om layout]); weights, tasks and kernels are not needed by
the memory passes and are left unread.

Note [om layout]
~~~~~~~~~~~~~~~~
From GE's framework_types_internal.h, model_parser_base.cc and om_file_helper.cc
(mirror-cann/ge f513b8f2), all little-endian:

* a 256-byte ModelFileHeader: magic 0x444F4D49 (`IMOD`) at 0, headsize 4, version 8,
  checksum[64] 12, length (u32) 76, is_encrypt 80, is_checksum 81, modeltype 82,
  genmode 83, name[32] 84, ops 116, userdefineinfo[32] 120, om_ir_version 152,
  model_num 156, platform_version[20] 160, platform_type 180, model_length (u64) 184,
  need_check_os_cpu_info 192, is_unknow_model 193, reserved to 256;
* the model data: `model_length` bytes, or `length` when model_length is 0
  (ParseModelContent: it must be the file size less the header);
* one partition table per model — `model_num` of them when the header says the model is
  dynamic (IsDynamicModel: version >= 0x20000000 and model_num > 1 or is_unknow_model),
  else one — each followed by its partitions back to back: GE's loader takes each
  partition's data at the running offset and reads only `mem_size` from the table;
* the table is ModelPartitionTable (u32 num, padding, then {u32 type, padding, u64
  mem_offset, u64 mem_size}: 8 + 24 bytes per partition) when model_length is set or the
  model is a flow model, else the older TinyModelPartitionTable (u32 num, {u32 type,
  u32 offset, u32 size}: 4 + 12 per partition);
* a table holds 1 to 8 partitions (CheckPartitionTableNum), a flow model's at most 4096:
  MODEL_DEF, FLOW_MODEL, then FLOW_SUBMODELs (FlowModelOmLoader::CheckModelPartitions);
* MODEL_DEF is a serialized ge.proto.ModelDef (Model::Load).

A bundle model (modeltype 5) GE loads only through its bundle interface; the encrypted
format has no reader in GE's open code; the OM Tiny and lite models (2, 4) are other
executors' formats. They are refused at the byte that says so.
"""
from __future__ import annotations

import struct

from google.protobuf.message import DecodeError

from engine.core.errors import InputError, Loc, Problem
from engine.core.wire import first_error
from engine.proto import ge_ir_pb2 as pb

MAGIC = 0x444F4D49                      # MODEL_FILE_MAGIC_NUM
HEADER = struct.Struct("<III64sIBBBB32sI32sII20sB3xQBB62x")
HEADER_SIZE = 256                       # MODEL_FILE_HEAD_LEN = sizeof(ModelFileHeader)
MODEL_VERSION_2 = 0x20000000            # MODEL_VERSION: from it on the header has model_num
MAX_PARTITIONS, MAX_FLOW_PARTITIONS = 8, 4096
AT_LENGTH, AT_ENCRYPT, AT_TYPE, AT_MODEL_NUM, AT_MODEL_LENGTH = 76, 80, 82, 156, 184

MODEL_TYPES = {0: "IR model", 1: "standard model", 2: "OM Tiny model", 3: "flow model", 4: "lite model",
               5: "bundle model"}
READ_TYPES = {0, 1, 3}
FLOW_MODEL_TYPE = 3
PARTITIONS = {0: "MODEL_DEF", 1: "WEIGHTS_DATA", 2: "TASK_INFO", 3: "TBE_KERNELS", 4: "CUST_AICPU_KERNELS",
              5: "SO_BINS", 6: "FLOW_MODEL", 7: "FLOW_SUBMODEL", 8: "MODEL_INOUT_INFO", 9: "STATIC_TASK_DESC",
              10: "DYNAMIC_TASK_DESC", 11: "TASK_PARAM", 12: "TILING_DATA", 20: "PRE_MODEL_DESC", 21: "PRE_MODEL_SQE",
              22: "PRE_KERNEL_ARGS", 23: "PRE_MODEL_DESC_EXTEND", 24: "BUNDLE_MODEL_INFO", 25: "BUNDLE_MODEL_VAR_INFO",
              26: "CUSTOM_OPS"}
MODEL_DEF, FLOW_MODEL, FLOW_SUBMODEL = 0, 6, 7

assert HEADER.size == HEADER_SIZE


def is_om(data: bytes) -> bool:
    return len(data) >= 4 and struct.unpack_from("<I", data)[0] == MAGIC


def _fail(file: str, at: int, message: str, hint: str):
    raise InputError(Problem(Loc(file), f"malformed om file at byte {at}: {message}", hint))


def partition_name(kind: int) -> str:
    return PARTITIONS.get(kind, f"type {kind}")


def read_header(data: bytes, file: str) -> dict:
    if len(data) < HEADER_SIZE:
        _fail(file, len(data), f"the file ends inside its {HEADER_SIZE}-byte ModelFileHeader ({len(data)} bytes)",
              "an om file starts with GE's 256-byte ModelFileHeader; the file is cut short")
    (magic, headsize, version, _checksum, length, encrypt, _check, mtype, _gen, name, _ops, _user, ir_version,
     model_num, platform, _ptype, model_length, _cpu, unknown) = HEADER.unpack_from(data)
    if magic != MAGIC:
        _fail(file, 0, f"magic 0x{magic:08X} is not GE's MODEL_FILE_MAGIC_NUM 0x{MAGIC:08X}", "the file is not a GE offline model")
    if encrypt != 0:
        raise InputError(Problem(Loc(file), f"the om file is encrypted (is_encrypt = {encrypt} at byte {AT_ENCRYPT}): "
                                            "memconflict reads only the plain format GE writes",
                                 "convert the model with ATC without encryption, or dump the graph (DUMP_GE_GRAPH)"))
    if mtype not in READ_TYPES:
        what = MODEL_TYPES.get(mtype, "model of unknown type")
        why = ("GE loads a bundle model only through its bundle interface" if mtype == 5 else
               "it is not a graph model GE's ModelHelper reads")
        raise InputError(Problem(Loc(file), f"the om file is a {what} (modeltype {mtype} at byte {AT_TYPE}): {why}",
                                 "memconflict reads IR (0), standard (1) and flow (3) om files"))
    size = model_length if model_length else length
    at = AT_MODEL_LENGTH if model_length else AT_LENGTH
    field = "model_length" if model_length else "length"
    if size != len(data) - HEADER_SIZE:
        _fail(file, at, f"the header's {field} says {size} bytes follow the header, the file has "
                        f"{len(data) - HEADER_SIZE}", "the file is cut short or padded (GE refuses it: Invalid om file)")
    dynamic = version >= MODEL_VERSION_2 and (model_num > 1 or unknown == 1)
    return {"version": version, "type": mtype, "name": name.split(b"\0", 1)[0].decode("utf-8", "replace"),
            "ir_version": ir_version, "platform": platform.split(b"\0", 1)[0].decode("utf-8", "replace"),
            "models": model_num if dynamic else 1, "wide": bool(model_length) or mtype == FLOW_MODEL_TYPE,
            "size": size}


def read_tables(data: bytes, file: str, head: dict) -> list[list[tuple[int, int, int]]]:
    """Per model its partitions as (type, absolute start, size), read as GE's
    OmFileLoadHelper::LoadModelPartitionTable does."""
    end = len(data)
    pos = HEADER_SIZE
    table_head, entry = (8, 24) if head["wide"] else (4, 12)
    limit = MAX_FLOW_PARTITIONS if head["type"] == FLOW_MODEL_TYPE else MAX_PARTITIONS
    models = []
    for k in range(head["models"]):
        if end - pos <= 8:                  # GE checks sizeof(ModelPartitionTable) for both tables
            _fail(file, pos, f"model {k}: the file ends where its partition table starts",
                  f"the header announces {head['models']} model(s), each with a partition table")
        num = struct.unpack_from("<I", data, pos)[0]
        if not 1 <= num <= limit:
            _fail(file, pos, f"model {k}: the partition table has {num} partitions (GE reads 1 to {limit})",
                  "the partition table is corrupt")
        table_end = pos + table_head + entry * num
        if table_end >= end:
            _fail(file, pos, f"model {k}: the partition table of {num} partitions ({table_end - pos} bytes) runs past "
                             f"the end of the file", "the file is cut short")
        parts = []
        at = table_end
        for i in range(num):
            e = pos + table_head + entry * i
            if head["wide"]:
                kind, _off, size = struct.unpack_from("<I4xQQ", data, e)
                size_at = e + 16
            else:
                kind, _off, size = struct.unpack_from("<III", data, e)
                size_at = e + 8
            if size > end - at:
                _fail(file, size_at, f"model {k}: partition {i} ({partition_name(kind)}) of {size} bytes at byte {at} "
                                     f"runs past the end of the file ({end} bytes)", "the partition table is corrupt or the file cut short")
            parts.append((kind, at, size))
            at += size
        models.append(parts)
        pos = at
    if head["models"] > 1 and pos != end:
        _fail(file, pos, f"the {head['models']} models end at byte {pos}, the file at {end}",
              "GE refuses a dynamic om whose models do not fill the file (do not get the complete model)")
    return models


def _check_flow(parts, file: str) -> None:
    want = [(0, MODEL_DEF), (1, FLOW_MODEL)]
    if len(parts) < 2:
        _fail(file, HEADER_SIZE, f"a flow model has partitions MODEL_DEF and FLOW_MODEL first, this one {len(parts)}",
              "the flow model is corrupt")
    for i, kind in want + [(j, FLOW_SUBMODEL) for j in range(2, len(parts))]:
        if parts[i][0] != kind:
            _fail(file, parts[i][1], f"flow model partition {i} is {partition_name(parts[i][0])}, GE expects "
                                     f"{partition_name(kind)}", "the flow model is corrupt")


def read_om(data: bytes, file: str, notes: list | None = None) -> pb.ModelDef:
    """The ModelDef of an om file's (root) model; what was left unread is noted."""
    start, size = model_def_span(data, file, notes)
    model = pb.ModelDef()
    try:
        model.ParseFromString(data[start:start + size])
    except DecodeError as exc:
        where = first_error(data[start:start + size], pb.ModelDef.DESCRIPTOR)
        at, what = (start + where[0], where[1]) if where else (start, str(exc))
        _fail(file, at, f"the MODEL_DEF partition (bytes {start}-{start + size}) is no ModelDef: {what}",
              "the partition is corrupt")
    return model


def model_def_span(data: bytes, file: str, notes: list | None = None) -> tuple[int, int]:
    """(start, size) of the MODEL_DEF partition of an om file's (root) model, its header and
    tables checked; what was left unread is noted. The bytes are read_om's to parse, or the
    lean reader's (engine/core/importers/__init__.py)."""
    head = read_header(data, file)
    models = read_tables(data, file, head)
    parts = models[0]
    if head["type"] == FLOW_MODEL_TYPE:
        _check_flow(parts, file)
    found = [p for p in parts if p[0] == MODEL_DEF]
    if not found:
        _fail(file, HEADER_SIZE, "the model has no MODEL_DEF partition (partitions: "
                                 + ", ".join(partition_name(p[0]) for p in parts) + ")",
              "GE reads the graph from the MODEL_DEF partition")
    _kind, start, size = found[0]
    if notes is not None:
        label = MODEL_TYPES[head["type"]]
        unread = sorted({partition_name(p[0]) for m in models for p in m} - {"MODEL_DEF"})
        text = (f"om {label} '{head['name']}' (version 0x{head['version']:08X}"
                + (f", {head['platform']}" if head["platform"] else "") + f"): the ModelDef of {size} bytes at byte {start}")
        if len(models) > 1:
            text += f"; the other {len(models) - 1} model(s) of this dynamic om (submodels compiled apart) are not read"
        if unread:
            text += "; not read: " + ", ".join(unread)
        notes.append(("import", text))
    return start, size
