"""The `external:` block of variables.yaml: FileConstant weights, the external-weight export
and ConstPlaceHolder's external device memory, as frozen dataclasses.

`build_external(m, errors)` reads the block through policy_load's strict reader (passed in,
so this module imports nothing from it): unknown keys and wrong types are located errors.
"""
from __future__ import annotations

import string
from dataclasses import dataclass

from engine.core.errors import Collector, Loc

EXPORT_MODES = ("per_weight", "combined")


@dataclass(frozen=True, slots=True)
class FileConstantKeys:
    """FileConstantUtils' attribute keys and the option mapping file ids to paths."""

    types: frozenset[str]          # the FileConstant op types
    location: str                  # ATTR_NAME_LOCATION: FileConstantInfo.weight_path
    file_path: str                 # ATTR_NAME_FILE_PATH
    file_id: str                   # ATTR_NAME_FILE_CONSTANT_ID
    offset: str
    length: str
    dtype: str                     # kAttrDtype
    shape: str                     # kAttrShape
    original_shape: str
    value_bins_option: str         # FILE_CONSTANT_PATH
    bins_id: str                   # from_json(FileIdToFilePath) keys
    bins_file: str
    weight_dir: str                # <om dir>/<weight_dir>/ (GetExternalWeightDirFromOmPath)
    loc: Loc


@dataclass(frozen=True, slots=True)
class ExportPolicy:
    """GraphManager::Build's ge.externalWeight: Const -> FileConstant with weight files."""

    option: str
    modes: tuple[tuple[str, str], ...]     # (option value, per_weight | combined)
    const_types: frozenset[str]            # NodeUtils::IsConst
    file_constant_type: str                # the type a converted node gets
    weights: str                           # ATTR_NAME_WEIGHTS
    sha256: str                            # ATTR_NAME_WEIGHT_SHA256
    file_name: str                         # per-weight file, "{hash}"
    combined_name: str                     # one file, "{stem}"
    combined_default: str                  # one file when there is no stem
    node_name: str                         # the converted node, "{name}" "{hash}"
    weight_align: int                      # WriteWeightWithPadding
    om_name_attr: str                      # ATTR_MODEL_FILE_NAME_PREFIX on the root graph
    weight_dir_option: str                 # OPTION_EXTERNAL_WEIGHT_DIR: a folder that keeps the weights
    meta_file: str                         # kMetaFileName in it
    loc: Loc

    def mode(self, value: str | None) -> str | None:
        return dict(self.modes).get(value or "")


@dataclass(frozen=True, slots=True)
class PlaceHolderKeys:
    """GetConstPlaceHolderAddr's attributes and the placement it accepts."""

    types: frozenset[str]
    storage_shape: str
    dtype: str
    size: str
    placement: str
    addr: str
    device_placement: int
    loc: Loc


@dataclass(frozen=True, slots=True)
class ExternalPolicy:
    file_constant: FileConstantKeys
    export: ExportPolicy
    place_holder: PlaceHolderKeys
    loc: Loc


def build_external(m, errors: Collector) -> ExternalPolicy:
    """`m` is policy_load's reader over the `external:` mapping."""
    fc = m.sub("file_constant")
    keys = FileConstantKeys(frozenset(fc.strs("types")), fc.str("location"), fc.str("file_path"),
                            fc.str("file_id"), fc.str("offset"), fc.str("length"), fc.str("dtype"),
                            fc.str("shape"), fc.str("original_shape"), fc.str("value_bins_option"),
                            fc.str("value_bin_id"), fc.str("value_bin_file"), fc.str("weight_dir"), fc.loc)
    fc.done()
    ex = m.sub("export")
    option = ex.str("option")
    modes_map = ex.sub("modes")
    modes = []
    for value, mode in modes_map.map.items():
        modes_map.used.add(value)
        if mode not in EXPORT_MODES:
            errors.error(modes_map.value_loc(value), f"external.export.modes: unknown mode '{mode}'",
                         "expected: " + ", ".join(EXPORT_MODES))
        modes.append((str(value), str(mode)))
    export = ExportPolicy(option, tuple(modes), frozenset(ex.strs("const_types")), ex.str("file_constant_type"),
                          ex.str("weights"), ex.str("sha256"), ex.str("file_name"), ex.str("combined_name"), ex.str("combined_default"),
                          ex.str("node_name"), ex.int("weight_align", minimum=1), ex.str("om_name_attr"),
                          ex.str("weight_dir_option"), ex.str("meta_file"), ex.loc)
    for key, allowed in (("file_name", {"hash"}), ("combined_name", {"stem"}), ("node_name", {"name", "hash"})):
        _check_template(getattr(export, key), allowed, ex.value_loc(key), errors)
    ex.done()
    ph = m.sub("const_place_holder")
    holder = PlaceHolderKeys(frozenset(ph.strs("types")), ph.str("storage_shape"), ph.str("dtype"), ph.str("size"),
                             ph.str("placement"), ph.str("addr"), ph.int("device_placement"), ph.loc)
    ph.done()
    m.done()
    return ExternalPolicy(keys, export, holder, m.loc)


def _check_template(text: str, allowed: set[str], loc: Loc, errors: Collector) -> None:
    try:
        fields = {f for _, f, _, _ in string.Formatter().parse(text) if f is not None}
    except ValueError as exc:
        errors.error(loc, f"malformed template '{text}': {exc}", "balance the braces")
        return
    for f in sorted(fields - allowed):
        errors.error(loc, f"unknown placeholder '{{{f}}}' in '{text}'",
                     "expected: " + ", ".join("{" + a + "}" for a in sorted(allowed)))
