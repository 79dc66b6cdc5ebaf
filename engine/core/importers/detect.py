"""Which format a model file is, from its content (Note [format detection]).

Note [format detection]
~~~~~~~~~~~~~~~~~~~~~~~
A `.pb` may be a GE ModelDef or a TF GraphDef, a `.pbtxt` GE text, a TF text GraphDef,
a GE ONNX-form dump or a Caffe prototxt: the suffix decides nothing. Binary: the
top-level protobuf fields of the first few records — ONNX's ModelProto opens with
`ir_version` (field 1, a varint) and has `opset_import` (8); GE's ModelDef has its
graphs in field 7; a GraphDef holds only nodes (1), library (2), version (3) and
versions (4). GE's offline model (.om) opens with its magic number (engine/core/
importers/om.py), a .pt2 with a zip's local-file signature. Text: the top-level keys — `ir_version`/`opset_import`/`producer_name`
(ONNX), `node` (TF), `layer`/`layers`/`input_dim` (Caffe), else GE.
"""
from __future__ import annotations

import re

from engine.core.wire import read_varint

FORMATS = ("ge", "tensorflow", "onnx", "caffe", "om", "torch")
_TOP_KEY = re.compile(rb"^([A-Za-z_][A-Za-z0-9_]*)\s*[:{]", re.M)
_ONNX_KEYS = {b"ir_version", b"opset_import", b"producer_name", b"producer_version", b"model_version"}
_TF_KEYS = {b"node", b"versions", b"library"}
_CAFFE_KEYS = {b"layer", b"layers", b"input_dim", b"input_shape", b"force_backward", b"state"}
_GE_KEYS = {b"graph", b"version", b"custom_version", b"attr", b"name", b"attr_groups"}


def is_text(data: bytes) -> bool:
    head = data[:4096]
    if b"\0" in head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        # not just a character cut at 4096: text only if no control byte says binary (a text dump
        # may carry raw non-UTF-8 bytes in a string; its reader then names the first one)
        if exc.start < len(head) - 4 and any(b < 0x20 and b not in b"\t\n\r\f\v" for b in head):
            return False
    stripped = head.lstrip()
    return not stripped or stripped[:1].isalpha() or stripped[:1] == b"#"


def top_fields(data: bytes, limit: int = 64) -> list[tuple[int, int]] | None:
    """(field number, wire type) of the first `limit` top-level records; None if the
    bytes are not a protobuf message."""
    out = []
    pos, end = 0, len(data)
    while pos < end and len(out) < limit:
        key, pos = read_varint(data, pos, end)
        if key is None:
            return None
        num, wire = key >> 3, key & 7
        if num == 0:
            return None
        if wire == 0:
            value, pos = read_varint(data, pos, end)
            if value is None:
                return None
        elif wire == 1:
            pos += 8
        elif wire == 2:
            n, pos = read_varint(data, pos, end)
            if n is None:
                return None
            pos += n
        elif wire == 5:
            pos += 4
        else:
            return None
        if pos > end:
            return None
        out.append((num, wire))
    return out


def detect(data: bytes) -> tuple[str | None, bool, str]:
    """(format or None, is text, why) for a model file's bytes."""
    from engine.core.importers.om import is_om
    if is_om(data):
        return "om", False, "GE's offline-model magic (IMOD)"
    if data[:4] == b"PK\x03\x04":
        return "torch", False, "a zip archive (a torch.export .pt2)"
    if is_text(data):
        keys = {m.group(1) for m in _TOP_KEY.finditer(data[:1 << 20])}
        if keys & _ONNX_KEYS:
            return "onnx", True, "top-level ONNX keys (" + ", ".join(sorted(k.decode() for k in keys & _ONNX_KEYS)) + ")"
        if keys & _CAFFE_KEYS:
            return "caffe", True, "top-level Caffe keys (" + ", ".join(sorted(k.decode() for k in keys & _CAFFE_KEYS)) + ")"
        if keys & _TF_KEYS:
            return "tensorflow", True, "top-level GraphDef keys (" + ", ".join(sorted(k.decode() for k in keys & _TF_KEYS)) + ")"
        if keys & _GE_KEYS or not keys:
            return "ge", True, "a text ModelDef"
        return None, True, "top-level keys " + ", ".join(sorted(k.decode() for k in keys)[:6])
    fields = top_fields(data)
    if fields is None:
        return None, False, "not a protobuf message"
    nums = {n for n, _ in fields}
    if (1, 0) in fields or 8 in nums:
        return "onnx", False, "ONNX ModelProto fields (ir_version, opset_import)"
    if 7 in nums:
        return "ge", False, "GE ModelDef fields (graph)"
    if 100 in nums:
        return "caffe", False, "Caffe NetParameter fields (layer)"
    if (1, 2) in fields and set(fields) <= {(1, 2), (2, 2), (3, 0), (4, 2)}:
        return "tensorflow", False, "GraphDef fields (node)"
    if not fields:
        return None, False, "an empty file"
    return None, False, "top-level fields " + ", ".join(str(n) for n in sorted(nums)[:8])
