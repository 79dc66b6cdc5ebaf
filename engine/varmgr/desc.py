"""Tensor descriptors as the variable manager sees them (GE's GeTensorDesc subset).

`TensorDesc` holds the fields VarManager reads: format (full format word), data
type (C++ value), dims, the stored byte size, origin format/type/shape and an
optional `_init_value`. `desc_from_proto` / `desc_to_proto` convert to and from
`ge.proto.TensorDescriptor` as GE's serializer does (ge-formats.md §2.6), so a
descriptor written by `desc_to_proto` reads back equal.
"""
from __future__ import annotations

from dataclasses import dataclass

from engine.core.attrs import attr_kind, set_attr, typed_attr
from engine.proto import ge_ir_pb2 as pb
from engine.varmgr import getypes as t

INIT_VALUE_ATTR = "_init_value"
_DTYPE_OVERRIDE_ATTR = "__tensor_desc_data_type__"


@dataclass(frozen=True, slots=True)
class InitValue:
    """A variable's `_init_value` tensor: its descriptor fields and raw bytes."""

    dtype: int
    format: int
    dims: tuple[int, ...]
    data: bytes


@dataclass(frozen=True, slots=True)
class TensorDesc:
    """Defaults are GE's default GeTensorDesc (ND, DT_FLOAT, origin ND / UNDEFINED)."""

    format: int = t.FORMAT_ND
    dtype: int = t.DT_FLOAT
    dims: tuple[int, ...] = ()
    size: int = 0
    origin_format: int = t.FORMAT_ND
    origin_dtype: int = t.DT_UNDEFINED
    origin_dims: tuple[int, ...] | None = None
    init_value: InitValue | None = None

    def same_view(self, other: "TensorDesc") -> bool:
        """GE's "differs in format OR dtype OR dims" test, negated."""
        return self.format == other.format and self.dtype == other.dtype and self.dims == other.dims

    def with_size(self, size: int) -> "TensorDesc":
        if size == self.size:
            return self
        return TensorDesc(self.format, self.dtype, self.dims, size, self.origin_format,
                          self.origin_dtype, self.origin_dims, self.init_value)

    def shape_size(self) -> int:
        """Element count (1 for a scalar); negative if any dim is unknown."""
        n = 1
        for d in self.dims:
            if d < 0:
                return -1
            n *= d
        return n

    def describe(self) -> str:
        dims = ",".join(str(d) for d in self.dims)
        return f"{t.format_name(self.format)} {t.dtype_serial(self.dtype)} [{dims}]"


# ---- proto <-> TensorDesc ------------------------------------------------------


def _format_of(td: pb.TensorDescriptor, attrs, int_key: str, str_key: str | None) -> int:
    value = typed_attr(attrs, int_key, "i", "dt")
    if value is not None:
        return value
    text = td.layout if str_key is None else (typed_attr(attrs, str_key, "s") or "")
    parsed = t.parse_format(text) if text else None
    # Note [missing layout]: an empty or unknown layout reads as ND, the format of
    # GE's default GeTensorDesc.
    return t.FORMAT_ND if parsed is None else parsed


def desc_from_proto(td: pb.TensorDescriptor, init_attr: str = INIT_VALUE_ATTR) -> TensorDesc:
    attrs = td.attr
    get = attrs.get
    dtype = typed_attr(attrs, _DTYPE_OVERRIDE_ATTR, "i", "dt") if _DTYPE_OVERRIDE_ATTR in attrs else None
    if dtype is None:
        dtype = t.dtype_from_proto(td.dtype)
    origin_dtype = t.DT_UNDEFINED
    odt = typed_attr(attrs, "origin_data_type", "s")
    if odt:
        origin_dtype = t.parse_dtype(odt)
        origin_dtype = t.DT_UNDEFINED if origin_dtype is None else origin_dtype
    origin_dims = None
    if typed_attr(attrs, "origin_shape_initialized", "b"):
        shape = get("origin_shape")
        origin_dims = tuple(shape.list.i) if shape is not None else ()
    size = td.size
    if not size and "size" in attrs:
        size = typed_attr(attrs, "size", "i", "dt") or 0
    init = None
    iv = get(init_attr) if init_attr else None
    if attr_kind(iv) == "t":
        tensor = iv.t
        inner = desc_from_proto(tensor.desc, init_attr="")
        init = InitValue(inner.dtype, inner.format, inner.dims, bytes(tensor.data))
    return TensorDesc(_format_of(td, attrs, "format_for_int", None), dtype, tuple(td.shape.dim), size,
                      _format_of(td, attrs, "origin_format_for_int", "origin_format"), origin_dtype,
                      origin_dims, init)


class DescCache:
    """desc_from_proto memoised on the descriptor's wire bytes (one planning pass).

    Note [descriptor cache]: a graph's placed nodes share a handful of descriptors, and
    serialising one costs a tenth of reading it field by field. The bytes are the whole
    message, so equal bytes read back to equal descriptors; a different map order only
    misses. Descriptors with an `_init_value` (large, rarely shared) are read directly.
    """

    __slots__ = ("init_attr", "memo", "sized", "limit")

    def __init__(self, init_attr: str = INIT_VALUE_ATTR, limit: int = 1 << 16):
        self.init_attr, self.memo, self.sized, self.limit = init_attr, {}, {}, limit

    def read(self, td: pb.TensorDescriptor) -> tuple[bytes | None, TensorDesc]:
        """(the memo key, or None when not memoised; the descriptor)."""
        if self.init_attr and self.init_attr in td.attr:
            return None, desc_from_proto(td, self.init_attr)
        key = td.SerializeToString()
        desc = self.memo.get(key)
        if desc is None:
            desc = desc_from_proto(td, self.init_attr)
            if len(self.memo) >= self.limit:
                return None, desc
            self.memo[key] = desc
        return key, desc

    def with_size(self, key: bytes | None, desc: TensorDesc, size: int) -> TensorDesc:
        """desc.with_size(size), one object per distinct (descriptor, size)."""
        if size == desc.size:
            return desc
        if key is None:
            return desc.with_size(size)
        out = self.sized.get((key, size))
        if out is None:
            out = self.sized[(key, size)] = desc.with_size(size)
        return out


def desc_to_proto(desc: TensorDesc, out: pb.TensorDescriptor | None = None,
                  init_attr: str = INIT_VALUE_ATTR) -> pb.TensorDescriptor:
    """Write `desc` the way GE serializes a GeTensorDesc; fills `out` if given."""
    td = pb.TensorDescriptor() if out is None else out
    proto_dtype = t.dtype_to_proto(desc.dtype)
    td.dtype = proto_dtype
    if proto_dtype == pb.DT_UNDEFINED and desc.dtype != t.DT_UNDEFINED:
        set_attr(td.attr, _DTYPE_OVERRIDE_ATTR, desc.dtype, "dt")
    del td.shape.dim[:]
    td.shape.dim.extend(desc.dims)
    td.layout = t.format_name(desc.format)
    td.size = desc.size
    set_attr(td.attr, "format_for_int", desc.format)
    set_attr(td.attr, "origin_format", t.format_name(desc.origin_format))
    set_attr(td.attr, "origin_format_for_int", desc.origin_format)
    if desc.origin_dtype != t.DT_UNDEFINED:
        set_attr(td.attr, "origin_data_type", t.dtype_serial(desc.origin_dtype))
    set_attr(td.attr, "origin_shape_initialized", desc.origin_dims is not None)
    if desc.origin_dims is not None:
        set_attr(td.attr, "origin_shape", list(desc.origin_dims), "list_i")
    if desc.init_value is not None and init_attr:
        iv = desc.init_value
        tensor = td.attr[init_attr].t
        desc_to_proto(TensorDesc(format=iv.format, dtype=iv.dtype, dims=iv.dims,
                                 origin_format=iv.format), tensor.desc, init_attr="")
        tensor.data = iv.data
    return td
