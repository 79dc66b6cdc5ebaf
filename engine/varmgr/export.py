"""The external-weight export of GraphManager::Build (`ge.externalWeight` 1 or 2).

ComputeHashForConstNodes gives every constant with a non-empty weight `_value_sha256`;
ConvertConstToFileConst then turns them, sorted by (name, graph name, id), into FileConstants:
mode 1 (per_weight) writes one file `weight_<hash>` per distinct weight, mode 2 (combined)
one file `<om name>_weight_combined` holding each distinct weight once, padded to 512 bytes.
Each converted node is renamed `<name>_<hash>`, loses its weight and gets `location`,
`offset`, `length`, `dtype`, `shape` and `original_shape`.

Note [export beside the graph]: GE writes the files to a temporary folder and, when it saves
the om, moves them to `<om dir>/weight/` and sets `location` to the bare file name
(ChangeFilePathAttr); memconflict writes the end state directly: `--out`'s folder is the om
dir. `export_weights` returns the files to write and changes the model; the command writes
them with its other outputs, all or none.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass

from engine.core.attrs import attrs_changed, node_typed, set_attr, set_node_attr
from engine.core.graph import Model, Node
from engine.varmgr.desc import desc_from_proto
from engine.varmgr.extpolicy import ExternalPolicy
from engine.varmgr.records import Status, VarError


@dataclass(frozen=True, slots=True)
class Converted:
    """One constant turned into a FileConstant (for the command's summary and tests)."""

    old_name: str
    new_name: str
    graph: str
    file: str          # the file name written in `location`
    offset: int
    length: int


def ge_sha256_hex(data: bytes) -> str:
    """GE's hash text: each digest byte in hex *without* zero padding.

    Note [unpadded sha256]: ComputeHashForConstNodes streams `std::hex << int(byte)`, so a
    byte 0x0a prints as "a"; the text (and the file names made from it) is shorter than 64
    characters whenever a digest byte is below 0x10. memconflict keeps GE's names.
    """
    return "".join(f"{b:x}" for b in hashlib.sha256(data).digest())


def _is_empty_tensor(weight) -> bool:
    return any(d == 0 for d in weight.desc.shape.dim)          # GeShape::IsEmptyTensor


def compute_hashes(model: Model, ext: ExternalPolicy) -> None:
    ex = ext.export
    for node in model.all_nodes():
        if node.type not in ex.const_types:
            continue
        weight = node_typed(node, ex.weights, "t")
        if weight is None or _is_empty_tensor(weight):
            continue                                           # "weight is null or empty tensor"
        set_node_attr(node, ex.sha256, ge_sha256_hex(bytes(weight.data)), "s")


def const_nodes(model: Model, ext: ExternalPolicy) -> list[tuple[Node, bytes, str]]:
    """GetAllConstNodesAndWeightHash, sorted as SortConstNodeWeightHashList sorts."""
    ex = ext.export
    out = []
    for node in model.all_nodes():
        if node.type not in ex.const_types:
            continue
        digest = node_typed(node, ex.sha256, "s")
        if not digest:
            continue
        weight = node_typed(node, ex.weights, "t")
        if weight is None:
            raise VarError(Status.FAILED, f"Failed to get weight of const node:{node.name} (it has "
                           f"{ex.sha256} but no '{ex.weights}' tensor)", node.name)
        out.append((node, bytes(weight.data), digest))
    out.sort(key=lambda e: (e[0].name, e[0].graph.name, e[0].id))
    return out


@dataclass
class WeightMeta:
    """FileConstantMeta (meta.json of a weight folder): where each weight hash already is."""

    files: dict[str, str]          # hash_to_weight_file
    offsets: dict[str, int]        # hash_to_weight_offset (combined files)

    def to_json(self) -> bytes:
        # nlohmann's std::map keys come out sorted; setw(4) indents by four
        doc = {"hash_to_weight_file": dict(sorted(self.files.items())),
               "hash_to_weight_offset": dict(sorted(self.offsets.items()))}
        return json.dumps(doc, indent=4).encode()


def read_meta(path: str) -> WeightMeta:
    """ReadJsonFile + from_json(FileConstantMeta); a missing file is an empty meta."""
    if not os.path.exists(path):
        return WeightMeta({}, {})
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
        files = doc.get("hash_to_weight_file", {})
        offsets = doc.get("hash_to_weight_offset", {})
        if not (isinstance(files, dict) and all(isinstance(v, str) for v in files.values())
                and isinstance(offsets, dict) and all(isinstance(v, int) and v >= 0 for v in offsets.values())):
            raise ValueError("hash_to_weight_file must map to strings, hash_to_weight_offset to offsets")
        return WeightMeta(dict(files), dict(offsets))
    except (OSError, ValueError, AttributeError, RecursionError) as exc:
        raise VarError(Status.FAILED, f"read meta json failed: Failed to read json file[{path}], err msg: "
                       f"{exc}") from None


def full_path(folder: str, name: str) -> str:
    """GetValidFullPath: the folder, a '/' unless it ends with one, the name."""
    return folder + ("/" if folder and not folder.endswith("/") else "") + name


def export_weights(model: Model, ext: ExternalPolicy, mode: str, out_path: str,
                   weight_dir: str | None = None) -> tuple[list[tuple[str, bytes]], list[Converted]]:
    """Convert the model's constants; returns (files to write, what was converted).

    Without `weight_dir` the files go to `weight/` beside `out_path` and `location` is the bare
    file name (Note [export beside the graph]). With `weight_dir` (ge.externalWeightDir) GE keeps
    them there: its `meta.json` is read, a weight it lists (and whose file exists, in mode 1) is
    not written again, a combined file is appended to, `location` is the full path, and the
    meta is written back.
    """
    compute_hashes(model, ext)
    found = const_nodes(model, ext)
    if not found:
        return [], []
    ex = ext.export
    folder = weight_dir if weight_dir else os.path.join(os.path.dirname(out_path), ext.file_constant.weight_dir)
    meta_path = os.path.join(folder, ex.meta_file)
    meta = read_meta(meta_path) if weight_dir else WeightMeta({}, {})
    files: dict[str, bytearray] = {}
    if mode == "combined":
        _save_combined(model, ext, found, folder, meta, files, append=bool(weight_dir))
    else:
        for _, data, digest in found:
            path = full_path(folder, ex.file_name.format(hash=digest))
            if digest in meta.files and (path in files or os.path.exists(path)):
                continue                                # "Reuse existing weight file"
            meta.files[digest] = path
            files[path] = bytearray(data)
    done = []
    for node, data, digest in found:
        where = meta.files[digest]
        if mode == "combined" and digest not in meta.offsets:
            raise VarError(Status.FAILED, f"{meta_path}: weight {digest} of const node:{node.name} has a file but no "
                           "hash_to_weight_offset (GE's map::at throws)", node.name)
        offset = meta.offsets[digest] if mode == "combined" else 0
        done.append(_convert(node, data, digest, (where if weight_dir else os.path.basename(where), offset), ext))
    out = [(p, bytes(b)) for p, b in sorted(files.items())]
    if weight_dir:
        out.append((meta_path, meta.to_json()))
    return out, done


def _save_combined(model: Model, ext: ExternalPolicy, found, folder: str, meta: WeightMeta,
                   files: dict[str, bytearray], append: bool) -> None:
    """SaveWeightToOneFileWithReuse: the weights not in the meta, appended to one file (to what
    the file holds only in a kept folder: GE's temporary folder starts empty)."""
    ex = ext.export
    if all(digest in meta.files for _, _, digest in found):
        return                                          # "All weights already exist in meta"
    stem = _om_name(model, ext)
    path = full_path(folder, ex.combined_name.format(stem=stem) if stem else ex.combined_default)
    blob = bytearray()
    if append and os.path.isfile(path):                  # std::ios::app: after what the file holds
        with open(path, "rb") as fh:
            blob += fh.read()
    files[path] = blob
    for _, data, digest in found:
        if digest in meta.files:
            continue
        meta.files[digest], meta.offsets[digest] = path, len(blob)
        blob += data + bytes(-len(data) % ex.weight_align)


def _om_name(model: Model, ext: ExternalPolicy) -> str:
    """SaveWeightToOneFileWithReuse's stem: the om name from the root graph's model-file-name
    prefix without its extension, else the root graph's name ("" when it has none).

    Note [combined file name]: atc sets the prefix from --output; a session compile (what
    `memconflict run` mirrors) has none, so the file is named after the graph, as in GE's
    test_reuse_external_weight_combined_use_graph_name_success.
    """
    attr = model.root.attr(ext.export.om_name_attr)
    prefix = attr.s.decode("utf-8", "replace") if attr is not None and attr.s else ""
    name = os.path.basename(prefix)
    name = name.rsplit(".", 1)[0] if "." in name else name
    return name or model.root.name


def _convert(node: Node, data: bytes, digest: str, where: tuple[str, int], ext: ExternalPolicy) -> Converted:
    keys, ex = ext.file_constant, ext.export
    op = node.op
    old = node.name
    rename(node, ex.node_name.format(name=old, hash=digest))
    op.type = node.type = ex.file_constant_type
    del op.attr[ex.weights]
    file, offset = where
    set_attr(op.attr, keys.offset, offset, "i")
    set_attr(op.attr, keys.length, len(data), "i")
    set_attr(op.attr, keys.location, file, "s")
    if op.output_desc:
        td = op.output_desc[0]
        set_attr(op.attr, keys.dtype, td.dtype, "dt")
        set_attr(op.attr, keys.shape, list(td.shape.dim), "list_i")
        origin = desc_from_proto(td, "").origin_dims
        set_attr(op.attr, keys.original_shape, list(origin or ()), "list_i")
    attrs_changed(node)
    return Converted(old, node.name, node.graph.name, file, offset, len(data))


def rename(node: Node, new: str) -> None:
    """Give a node a new name; its consumers' inputs are rewritten when the graph is saved."""
    g = node.graph
    if g.by_name.get(node.name) is node:
        del g.by_name[node.name]
    node.name = node.op.name = new
    g.by_name[new] = node
    for anchor in node.outs:
        for peer in anchor.peers:
            peer.node.dirty = True
    for other in node.out_ctrl:
        other.dirty = True
