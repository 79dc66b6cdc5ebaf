"""Where a FileConstant's weight is, as FileConstantUtils finds it (base/common/file_constant_utils).

* `value_bins(text)` is GetFileIdToPathMapFromOption: the option `ge.exec.value_bins` is JSON;
  every value of its top level is a list of {value_bin_id, value_bin_file} objects; the first
  path of an id wins (std::map::insert).
* `weight_file(node, keys, bins)` is GetFilePath: attr `location` (with `offset`, `length`),
  else attr `file_path` (offset and length 0), else attr `file_id` looked up in the map.
* `read_weight(...)` is CopyOneWeightFromFile's read: `length` bytes (0: the tensor's size)
  from `offset` of the file, with GE's failures.

Attribute keys come from the policy's `external.file_constant` block.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass

from engine.core.attrs import typed_attr
from engine.core.graph import Node
from engine.varmgr.extpolicy import FileConstantKeys
from engine.varmgr.records import Status, VarError


@dataclass(frozen=True, slots=True)
class WeightFile:
    """GetFilePath's answer for one FileConstant."""

    path: str          # "" when a file id is not in ge.exec.value_bins (GE: a warning, SUCCESS)
    offset: int
    length: int        # 0: the tensor's size in bytes
    source: str        # the attribute that decided: location, file_path or file_id
    file_id: str = ""

    def to_json(self) -> dict:
        out = {"path": self.path, "offset": self.offset, "length": self.length, "source": self.source}
        if self.file_id:
            out["file_id"] = self.file_id
        return out


class ValueBinsError(ValueError):
    """ge.exec.value_bins cannot be used; the message is GE's reason."""


def value_bins(text: str | None, keys: FileConstantKeys) -> dict[str, str]:
    """GetFileIdToPathMapFromOption. An empty option is an empty map (GE warns)."""
    if not text:
        return {}
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        why = exc if isinstance(exc, ValueError) else "nested too deeply"
        raise ValueBinsError(f"E10001: value '{text}' for parameter {keys.value_bins_option} is invalid: it is "
                             f"not a valid json string, exception: {why}") from None
    # Note [value_bins top level]: GE iterates the parsed JSON (an object's values, an array's
    # items, a scalar itself) and reads each as a list; the top-level key is never checked.
    # A value that is not a list, or an id or file that is not a string, makes nlohmann::json
    # throw type_error, which GE does not catch; memconflict reports it instead of crashing.
    if doc is None:
        return {}
    # nlohmann's objects are std::maps: their values come in key order, not file order
    items = [doc[k] for k in sorted(doc)] if isinstance(doc, dict) else doc if isinstance(doc, list) else [doc]
    out: dict[str, str] = {}
    for k, item in enumerate(items):
        if not isinstance(item, list):
            raise ValueBinsError(f"{keys.value_bins_option}: entry {k} is {_kind(item)}, not a list of "
                                 f"{{{keys.bins_id}, {keys.bins_file}}} objects (nlohmann type_error)")
        for j, one in enumerate(item):
            fields = []
            for key in (keys.bins_id, keys.bins_file):
                # json::find on a non-object finds nothing: such an item maps "" to ""
                value = one.get(key, "") if isinstance(one, dict) else ""
                if not isinstance(value, str):
                    raise ValueBinsError(f"{keys.value_bins_option}: entry {k} item {j}: '{key}' is "
                                         f"{_kind(value)}, not a string (nlohmann type_error)")
                fields.append(value)
            out.setdefault(fields[0], fields[1])
    return out


def _kind(v) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
            type(None): "null"}.get(type(v), "a number")


def weight_file(node: Node, keys: FileConstantKeys, bins: dict[str, str]) -> WeightFile:
    """FileConstantUtils::GetFilePath, its failures as VarError(FAILED)."""
    attrs = node.op.attr
    location = typed_attr(attrs, keys.location, "s")
    offset = typed_attr(attrs, keys.offset, "i") or 0
    length = typed_attr(attrs, keys.length, "i") or 0
    if location:
        return WeightFile(location, offset, length, keys.location)
    path = typed_attr(attrs, keys.file_path, "s")
    if path:
        return WeightFile(path, 0, 0, keys.file_path)
    file_id = typed_attr(attrs, keys.file_id, "s")
    if file_id is None:
        raise VarError(Status.FAILED, f"FileConstant {node.name}: Failed to get filed id from attr (none of "
                       f"{keys.location}, {keys.file_path}, {keys.file_id} is set)", node.name)
    if not file_id:
        raise VarError(Status.FAILED, f"FileConstant {node.name}: The file path and file id are empty.", node.name)
    if file_id not in bins:
        return WeightFile("", 0, 0, keys.file_id, file_id)
    if not bins[file_id]:
        raise VarError(Status.FAILED, f"FileConstant {node.name}: File path is empty. (file id '{file_id}' "
                       f"in {keys.value_bins_option})", node.name)
    return WeightFile(bins[file_id], 0, 0, keys.file_id, file_id)


def resolve_path(wf: WeightFile, base: str, keys: FileConstantKeys) -> str:
    """The file a weight is read from, relative paths taken from the graph's folder `base`.

    Note [weight file folder]: GE opens relative paths from its working directory; an om's
    `location` is first re-rooted to `<om dir>/weight/<file name>` (SetExternalPath at load).
    memconflict treats the graph file as the om: a `location` whose file sits in the graph's
    `weight/` folder is read there (what `run --option ge.externalWeight=1` writes), anything
    else relative to the graph's folder, so a graph and its weights move together.
    """
    if wf.source == keys.location:
        beside = os.path.join(base, keys.weight_dir, os.path.basename(wf.path))
        if os.path.isfile(beside):
            return beside
    return wf.path if os.path.isabs(wf.path) else os.path.join(base, wf.path)


def read_weight(node: Node, wf: WeightFile, file: str, size: int, capacity: int) -> bytes:
    """CopyOneWeightFromFile: `wf.length` bytes (0: `size`) from `wf.offset`, into a block of
    `capacity` bytes; GE reads until the length or the end of the file."""
    want = wf.length or size
    if capacity < want:
        raise VarError(Status.PARAM_INVALID, f"FileConstant {node.name}: left size {capacity} < file constant "
                       f"size {want} (GE_CHECK_GE)", node.name)
    try:
        with open(file, "rb") as fh:
            fh.seek(wf.offset)
            return fh.read(want)
    except OSError as exc:
        raise VarError(Status.FAILED, f"E13001: FileConstant {node.name}: [Open][File] {wf.path} failed "
                       f"({exc.strerror})", node.name) from None
