"""FileConstant weights and external memory in `vars plan` and `vars addr --dump`.

* `entry_extras` adds to a plan's entries what GE resolves for them: a FileConstant's weight
  file (GetFilePath, `ge.exec.value_bins`), a ConstPlaceHolder's external address and size,
  and with `--external-var` the physical address SetExternalVar's memory gives (or GE's
  reason for nullptr).
* `load_graph_weights` is what loading a compiled graph copies into the simulated device
  memory: Constant weights (InitConstant) and FileConstant files (InitFileConstant) at their
  variables' physical addresses; `_init_value`s are copied by GetVarMemoryAddr itself.
"""
from __future__ import annotations

import os

from engine.core.errors import InputError, Loc, PassFailure, Problem, display_path
from engine.varmgr.records import VarError


def _ext(vm):
    return vm.policy.external


def bins_of(ext, options: dict[str, str]) -> dict[str, str]:
    from engine.varmgr.fileconst import ValueBinsError, value_bins
    key = ext.file_constant.value_bins_option
    try:
        return value_bins(options.get(key), ext.file_constant)
    except ValueBinsError as exc:
        raise InputError(Problem(Loc(f"--option {key}"), str(exc),
                                 'write e.g. {"value_bins": [{"value_bin_id": "w", "value_bin_file": "w.bin"}]}')) from None


def entry_extras(model, plan, vm, options: dict[str, str], path: str) -> dict[tuple[str, str], dict]:
    """(graph, node) -> the extra fields of its plan entry."""
    ext = _ext(vm)
    out: dict[tuple[str, str], dict] = {}
    if ext is None:
        return out
    from engine.varmgr.external import const_place_holder_addr, external_var_failure
    from engine.varmgr.fileconst import weight_file
    bins = None
    for e in plan.entries:
        g = model.graphs.get(e.graph)
        node = g.find(e.node) if g is not None else None
        if node is None:
            continue
        extra: dict = {}
        try:
            if node.type in ext.file_constant.types:
                bins = bins_of(ext, options) if bins is None else bins
                wf = weight_file(node, ext.file_constant, bins)
                extra["weight_file"] = wf.to_json()
                if not wf.path:
                    extra["weight_file"]["warning"] = f"Failed to get file path of file id:{wf.file_id}"
            if node.type in ext.place_holder.types:
                addr, size = const_place_holder_addr(node, ext.place_holder)
                extra["external"] = {"address": addr, "size": size}
        except VarError as exc:
            raise PassFailure("vars plan", f"graph {plan.graph_id} ({display_path(path)}): {exc.message}",
                              exc.var) from None
        # Note [external var before the device map]: with SetExternalVar, GetVarMemoryAddr answers
        # every HBM address from the external memory first, a ConstPlaceHolder's too
        if vm.external_var_addr and e.memory_type == _hbm_name(vm):
            why = external_var_failure(vm, e.address)
            extra["physical"] = None if why else vm.external_var_addr + (e.address - vm.var_mem_logic_base)
            if why:
                extra["physical_failure"] = why
        if extra:
            out[(e.graph, e.node)] = extra
    return out


def _hbm_name(vm) -> str:
    spec = vm.policy.mem_type_by_rt(vm.hbm_rt)
    return spec.name if spec else str(vm.hbm_rt)


def add_extras(doc: dict, vm, extras: list[dict]) -> None:
    if vm.external_var_addr:
        doc["external_var"] = {"address": vm.external_var_addr, "size": vm.external_var_size,
                               "var_mem_size": vm.get_var_mem_size(vm.hbm_rt)}
    for g, extra in zip(doc["graphs"], extras):
        for v in g["variables"]:
            v.update(extra.get((v["graph"], v["node"]), {}))


def extra_lines(doc: dict) -> list[str]:
    lines = []
    ev = doc.get("external_var")
    if ev:
        lines.append(f"external variable memory (SetExternalVar): 0x{ev['address']:x}, {ev['size']} bytes "
                     f"(HBM variables use {ev['var_mem_size']})")
    for g in doc["graphs"]:
        for v in g["variables"]:
            wf, ext = v.get("weight_file"), v.get("external")
            if wf:
                where = wf["path"] or "(none)"
                lines.append(f"  graph {g['graph_id']}: {v['node']}: weight file {where} (by {wf['source']}"
                             + (f" '{wf['file_id']}'" if wf.get("file_id") else "")
                             + f"), offset {wf['offset']}, length {wf['length']}"
                             + (f"; warning: {wf['warning']}" if wf.get("warning") else ""))
            if ext:
                lines.append(f"  graph {g['graph_id']}: {v['node']}: external memory 0x{ext['address']:x}, "
                             f"{ext['size']} bytes")
            if v.get("physical_failure"):
                lines.append(f"  graph {g['graph_id']}: {v['node']}: GetVarMemoryAddr returns nullptr: "
                             f"{v['physical_failure']}")
    return lines


# ---- vars addr --dump -----------------------------------------------------------------
def load_graph_weights(vm, graph_path: str, options: dict[str, str], device: int) -> list[str]:
    """Copy the compiled graph's constant weights into the simulated device memory, as the
    model load does; returns one line per weight copied."""
    from engine.core.dumpio import load_model
    from engine.core.attrs import node_typed
    from engine.varmgr.fileconst import read_weight, resolve_path, weight_file
    from engine.varmgr.nodes import name_for_var_manager
    ext = _ext(vm)
    model = load_model(graph_path)
    base = os.path.dirname(os.path.abspath(graph_path))
    policy = vm.policy
    lines = []
    bins = None
    loaded: set[str] = set()             # ExternalWeightManager::CheckAndSetWeightLoaded, "path:offset"
    for node in model.all_nodes():
        if node.type not in policy.op_types.placed or not node.op.output_i:
            continue
        weight = node_typed(node, policy.attrs.weights, "t")
        is_file = ext is not None and node.type in ext.file_constant.types
        if weight is None and not is_file:
            continue
        logic = node.op.output_i[0]
        if not vm.is_var_addr(logic):
            continue
        mem_type = vm.get_var_mem_type(logic)
        ptr = vm.get_var_memory_addr(logic, mem_type, device)
        if ptr is None:
            continue
        size = node.op.output_desc[0].size if node.op.output_desc else 0
        try:
            if is_file:
                bins = bins_of(ext, options) if bins is None else bins
                wf = weight_file(node, ext.file_constant, bins)
                if not wf.path:
                    lines.append(f"{node.name}: no weight file (file id '{wf.file_id}' not in "
                                 f"{ext.file_constant.value_bins_option})")
                    continue
                key = f"{wf.path}:{wf.offset}"
                if key in loaded:
                    lines.append(f"{node.name}: {key} already loaded on device {device}, not copied again")
                    continue
                loaded.add(key)
                file = resolve_path(wf, base, ext.file_constant)
                data = read_weight(node, wf, file, size, size)
                what = f"{display_path(file)} @ {wf.offset}"
            else:
                data, what = bytes(weight.data), f"'{policy.attrs.weights}' tensor"
        except VarError as exc:
            raise PassFailure("vars addr", f"loading {display_path(graph_path)}: {exc.message}", exc.var) from None
        vm.mem_manager.write(ptr, data)
        lines.append(f"{name_for_var_manager(node, policy)} ({node.name}): {len(data)} bytes from {what} "
                     f"-> 0x{ptr:x}")
    return lines


def dump_lines(vm, logic: int, ptr: int, args, options: dict[str, str]) -> list[str]:
    """`vars addr --dump`: what the block at `logic` holds at `ptr` on the simulated device."""
    from engine.varmgr.external import hex_dump
    lines = []
    if args.graph:
        lines += ["loaded: " + line for line in
                  load_graph_weights(vm, args.graph, options, args.device)]
    owner = next((e for e in vm.var_resource.var_addr_mgr_map.values()
                  if e.address <= logic < e.address + max(e.desc.size, 1)), None)
    size = owner.desc.size - (logic - owner.address) if owner is not None else 0
    dev = vm.var_resource.device_map(args.device).get(owner.address) if owner is not None else None
    if dev is not None and dev.is_extern_mem:
        lines.append(f"external memory (ConstPlaceHolder) at 0x{ptr:x}: its bytes are the user's, not in the model")
        return lines
    data = _read(vm.mem_manager, ptr, size)
    if not data:
        lines.append(f"0x{ptr:x}: {size} bytes, nothing written (no init value"
                     + ("" if args.graph else "; give --graph COMPILED to load its constants") + ")")
        return lines
    lines.append(f"0x{ptr:x}: {len(data)} of {size} bytes written")
    return lines + ["  " + line for line in hex_dump(ptr, data)]


def _read(memory, ptr: int, size: int) -> bytes:
    """The bytes written at `ptr` or inside a write that starts before it."""
    data = memory.read(ptr, size)
    if data:
        return data
    for start, blob in memory.contents.items():
        if start < ptr < start + len(blob):
            return blob[ptr - start:ptr - start + size]
    return b""
