"""GE's C++ type vocabulary: `ge::DataType` and `ge::Format` values.

VarKeys print the C++ enum values (not the proto numbering), descriptors on disk
use the proto enum and serial strings (ge-formats.md §1.1, §6). These tables are
GE's type system, not rules: a pack cannot change what DT_FLOAT is.
"""
from __future__ import annotations

from engine.proto import ge_ir_pb2 as pb

# (C++ value, name without "DT_", storage bits per element; 0 = no fixed size)
_DTYPES = [
    (0, "FLOAT", 32), (1, "FLOAT16", 16), (2, "INT8", 8), (3, "INT32", 32), (4, "UINT8", 8),
    (6, "INT16", 16), (7, "UINT16", 16), (8, "UINT32", 32), (9, "INT64", 64), (10, "UINT64", 64),
    (11, "DOUBLE", 64), (12, "BOOL", 8), (13, "STRING", 0), (14, "DUAL_SUB_INT8", 8),
    (15, "DUAL_SUB_UINT8", 8), (16, "COMPLEX64", 64), (17, "COMPLEX128", 128), (18, "QINT8", 8),
    (19, "QINT16", 16), (20, "QINT32", 32), (21, "QUINT8", 8), (22, "QUINT16", 16),
    (23, "RESOURCE", 0), (24, "STRING_REF", 0), (25, "DUAL", 40), (26, "VARIANT", 0),
    (27, "BF16", 16), (28, "UNDEFINED", 0), (29, "INT4", 4), (30, "UINT1", 1), (31, "INT2", 2),
    (32, "UINT2", 2), (33, "COMPLEX32", 32), (34, "HIFLOAT8", 8), (35, "FLOAT8_E5M2", 8),
    (36, "FLOAT8_E4M3FN", 8), (37, "FLOAT8_E8M0", 8), (38, "FLOAT6_E3M2", 6), (39, "FLOAT6_E2M3", 6),
    (40, "FLOAT4_E2M1", 4), (41, "FLOAT4_E1M2", 4), (42, "HIFLOAT4", 4),
]
DT_FLOAT = 0
DT_STRING = 13
DT_UNDEFINED = 28

DTYPE_NAME: dict[int, str] = {v: n for v, n, _ in _DTYPES}
DTYPE_VALUE: dict[str, int] = {n: v for v, n, _ in _DTYPES}
DTYPE_BITS: dict[int, int] = {v: b for v, _, b in _DTYPES}
# TypeUtils::DataTypeToSerialString spells BF16 differently from the enum name.
_SERIAL_SPELLING = {"BF16": "DT_BFLOAT16"}

_FORMATS = [
    "NCHW", "NHWC", "ND", "NC1HWC0", "FRACTAL_Z", "NC1C0HWPAD", "NHWC1C0", "FSR_NCHW",
    "FRACTAL_DECONV", "C1HWNC0", "FRACTAL_DECONV_TRANSPOSE", "FRACTAL_DECONV_SP_STRIDE_TRANS",
    "NC1HWC0_C04", "FRACTAL_Z_C04", "CHWN", "FRACTAL_DECONV_SP_STRIDE8_TRANS", "HWCN",
    "NC1KHKWHWC0", "BN_WEIGHT", "FILTER_HWCK", "HASHTABLE_LOOKUP_LOOKUPS",
    "HASHTABLE_LOOKUP_KEYS", "HASHTABLE_LOOKUP_VALUE", "HASHTABLE_LOOKUP_OUTPUT",
    "HASHTABLE_LOOKUP_HITS", "C1HWNCoC0", "MD", "NDHWC", "FRACTAL_ZZ", "FRACTAL_NZ", "NCDHW",
    "DHWCN", "NDC1HWC0", "FRACTAL_Z_3D", "CN", "NC", "DHWNC", "FRACTAL_Z_3D_TRANSPOSE",
    "FRACTAL_ZN_LSTM", "FRACTAL_Z_G", "RESERVED", "ALL", "NULL", "ND_RNN_BIAS", "FRACTAL_ZN_RNN",
    "NYUV", "NYUV_A", "NCL", "FRACTAL_Z_WINO", "C1HWC0", "FRACTAL_NZ_C0_16", "FRACTAL_NZ_C0_32",
]
FORMAT_ND = 2
FORMAT_NAME: dict[int, str] = dict(enumerate(_FORMATS))
FORMAT_VALUE: dict[str, int] = {n: v for v, n in FORMAT_NAME.items()}


def primary_format(fmt: int) -> int:
    return fmt & 0xFF


def sub_format(fmt: int) -> int:
    return (fmt & 0xFFFF00) >> 8


def c0_value(fmt: int) -> int:
    bits = (fmt & 0xF000000) >> 24
    return 2 ** (bits - 1) if bits else 0


def format_name(fmt: int) -> str:
    """Serial string of a full format word ("FRACTAL_Z", "FRACTAL_Z:3" with a sub-format)."""
    name = FORMAT_NAME.get(primary_format(fmt), "RESERVED")
    sub = sub_format(fmt)
    return f"{name}:{sub}" if sub else name


def parse_format(text: str) -> int | None:
    """Inverse of `format_name` (also accepts a "FORMAT_" prefix); None if unknown."""
    name, _, sub = text.removeprefix("FORMAT_").partition(":")
    if name not in FORMAT_VALUE:
        return None
    if sub and not sub.isdigit():
        return None
    return FORMAT_VALUE[name] | ((int(sub) if sub else 0) << 8)


def dtype_serial(dtype: int) -> str:
    name = DTYPE_NAME.get(dtype, "UNDEFINED")
    return _SERIAL_SPELLING.get(name, "DT_" + name)


def parse_dtype(text: str) -> int | None:
    """A C++ DataType from "DT_FLOAT" / "FLOAT" / "DT_BFLOAT16"; None if unknown."""
    for name, spelled in _SERIAL_SPELLING.items():
        if text == spelled:
            return DTYPE_VALUE[name]
    return DTYPE_VALUE.get(text.removeprefix("DT_"))


def dtype_to_proto(dtype: int) -> int:
    """C++ DataType → ge.proto.DataType (by name; unmapped → DT_UNDEFINED)."""
    name = DTYPE_NAME.get(dtype)
    if name is None or name == "UNDEFINED":
        return pb.DT_UNDEFINED
    try:
        return pb.DataType.Value("DT_" + name)
    except ValueError:
        return pb.DT_UNDEFINED


_FROM_PROTO = {v.number: DTYPE_VALUE.get(v.name.removeprefix("DT_"), DT_UNDEFINED)
               for v in pb.DataType.DESCRIPTOR.values}


def dtype_from_proto(value: int) -> int:
    """ge.proto.DataType → C++ DataType (by name)."""
    return _FROM_PROTO.get(value, DT_UNDEFINED)


def element_bytes(dtype: int) -> int:
    """GE's size_of(dtype) in whole bytes; <= 0 for types without a fixed element size."""
    bits = DTYPE_BITS.get(dtype, 0)
    return bits // 8 if bits >= 8 else (0 if bits == 0 else -1)


def tensor_bytes(dtype: int, count: int) -> int | None:
    """Bytes of `count` elements (sub-byte types packed, rounded up); None = no fixed size."""
    bits = DTYPE_BITS.get(dtype, 0)
    if bits == 0:
        return None
    return (count * bits + 7) // 8


# CalcTensorElementCnt's formats: the 4-d ones (a shape of another length is counted as ND)
# and the others it multiplies the dims of; any other primary format fails.
_COUNTED_FORMATS = frozenset(FORMAT_VALUE[n] for n in (
    "ND", "MD", "NCHW", "HWCN", "NHWC", "CHWN", "C1HWC0", "C1HWNCoC0", "NC1HWC0", "FRACTAL_Z",
    "FILTER_HWCK", "FRACTAL_NZ", "FRACTAL_NZ_C0_16", "FRACTAL_NZ_C0_32", "FRACTAL_NZ_C0_2",
    "FRACTAL_NZ_C0_4", "FRACTAL_NZ_C0_8", "FRACTAL_ZZ", "NDHWC", "NCDHW", "DHWCN", "DHWNC",
    "FRACTAL_Z_3D", "FRACTAL_Z_3D_TRANSPOSE", "NDC1HWC0", "FRACTAL_Z_C04", "FRACTAL_ZN_LSTM",
    "NC1HWC0_C04", "ND_RNN_BIAS", "FRACTAL_ZN_RNN", "NYUV", "NYUV_A", "NCL", "FRACTAL_Z_WINO")
    if n in FORMAT_VALUE)
_INT64_MAX = (1 << 63) - 1
_STRING_BYTES = 16          # GetDataTypeLength: DT_STRING and DT_STRING_REF, two uint64


def calc_tensor_mem_size(dims, fmt: int, dtype: int) -> int | None:
    """TensorUtils::CalcTensorMemSize: the bytes of a tensor (unaligned), -1 for an unknown
    shape or a data type without a size, None where GE's call fails (an unsupported format,
    an overflowing element count)."""
    count = 1
    for d in dims:
        if d < 0:
            return -1
        if d == 0:
            return 0
    if primary_format(fmt) not in _COUNTED_FORMATS:
        return None
    for d in dims:
        count *= d
        if count > _INT64_MAX:
            return None
    bits = DTYPE_BITS.get(dtype, 0)
    if bits == 0:
        name = DTYPE_NAME.get(dtype)
        per = _STRING_BYTES if name in ("STRING", "STRING_REF") else 0
        if per == 0:
            return -1
        return count * per if count * per <= _INT64_MAX else None
    size = (count * bits + 7) // 8
    return size if size <= _INT64_MAX else -1
