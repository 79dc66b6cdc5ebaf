"""VarResource (bookkeeping, no allocation) and the per-memory-type MemResources (§1, §4, §5)."""
# `mgr` arguments are the VarManager (engine/varmgr/manager.py imports this module, not the reverse).
from __future__ import annotations

from dataclasses import replace
from typing import Callable

from engine.varmgr import getypes as t
from engine.varmgr.desc import TensorDesc
from engine.varmgr.policy import Allocator, ReuseKind, VarPolicy
from engine.varmgr.records import (UINT64_MAX, BroadcastInfo, Status, TransNodeInfo, VarAddr, VarDevAddr,
    VarError, VarOp)



# ---- MemResource -------------------------------------------------------------
class MemResource:
    """Running size of one memory type's variable space."""

    def __init__(self, policy: VarPolicy, rt: int):
        self.policy, self.rt = policy, rt
        self.var_mem_size = 0
        self.const_place_holder_mem_size = 0

    def assign(self, mgr, name: str, size: int, op: VarOp | None) -> int:
        raise NotImplementedError


class HbmMemResource(MemResource):
    def assign(self, mgr, name: str, size: int, op: VarOp | None) -> int:
        mem = self.policy.memory
        aligned = mem.aligned(size)
        guards = mem.align * mem.guard_units
        if mem.capacity_check:
            self._check_capacity(mgr, name, size, aligned + guards)
        if aligned > UINT64_MAX or self.var_mem_size + aligned + guards > UINT64_MAX:
            raise VarError(Status.FAILED, f"variable '{name}': size {size} overflows the uint64 "
                           f"variable space at offset {self.var_mem_size}", name)
        offset = self.var_mem_size
        # Note [guard units]: GE adds 512 "offset for next" and 512 "align 512", i.e.
        # kSessionMemAlignUnit (2) guards of kSessionMemAlignSize; the policy's guard_units says how many
        self.var_mem_size += aligned + guards
        if op is not None and op.type in self.policy.op_types.const_place_holder:
            self.const_place_holder_mem_size += self.var_mem_size - offset
        return offset

    def _check_capacity(self, mgr, name: str, size: int, need: int) -> None:
        # OLD GE (§4.1): the capacity test at assignment time.
        total = mgr.get_var_mem_max_size(for_check=True)
        if total < self.var_mem_size:
            raise VarError(Status.PARAM_INVALID, f"VarMemMaxSize:{total} < var_mem_size_:"
                           f"{self.var_mem_size}, var_size:{size}, var_name:{name}, check invalid", name)
        if total - self.var_mem_size < need:
            raise VarError(Status.PARAM_INVALID, f"Out of memory: current var size[{need + self.var_mem_size}]"
                           f" exceeds total var size[{total}] (var_name:{name})", name)


class PoolMemResource(MemResource):
    """RDMA_HBM / HOST: the 'offset' is a real pointer from a pool, no alignment."""

    def __init__(self, policy: VarPolicy, rt: int, allocator: Allocator):
        super().__init__(policy, rt)
        self.allocator = allocator

    def assign(self, mgr, name: str, size: int, op: VarOp | None) -> int:
        memory = mgr.mem_manager
        ptr = None
        if memory is not None:
            ptr = memory.rdma_malloc(size) if self.allocator is Allocator.RDMA_POOL else memory.host_malloc(size)
        if not ptr:
            what = "rdma" if self.allocator is Allocator.RDMA_POOL else "host"
            raise VarError(Status.MEMALLOC_FAILED, f"malloc {what} memory fail, var_size:{size}, "
                           f"var_name:{name}" + ("" if memory else " (no MemManager)"), name)
        self.var_mem_size += size
        return ptr


def build_mem_resource(policy: VarPolicy, rt: int) -> MemResource | None:
    spec = policy.mem_type_by_rt(rt)
    if spec is None or spec.allocator is Allocator.NONE:
        return None
    if spec.allocator is Allocator.OFFSET:
        return HbmMemResource(policy, rt)
    return PoolMemResource(policy, rt, spec.allocator)


# ---- VarResource ----------------------------------------------------------------
class VarResource:
    """The maps of §1. `logic_base` is read through the session id given to Init (§1, §11 #6)."""

    def __init__(self, policy: VarPolicy, session_id: int, logic_base: Callable[[], int]):
        self.policy = policy
        self.session_id = session_id
        self.logic_base = logic_base
        self.hbm_rt = policy.rt(policy.memory_type_selection.default)
        self.var_addr_mgr_map: dict[str, VarAddr] = {}
        self.var_offset_map: dict[int, int] = {}
        self.var_dev_addr_mgr_map: dict[int, VarDevAddr] = {}
        self.device_dev_maps: dict[int, dict[int, VarDevAddr]] = {}
        self.device_synced: dict[int, int] = {}
        self.dev_addr_order: list[int] = []
        self.cur_var_tensor_desc_map: dict[str, TensorDesc] = {}
        self.file_constant_var_map: dict[str, str] = {}
        self.var_to_trans_road: dict[str, list[TransNodeInfo]] = {}
        self.var_names_to_changed_graph_id: dict[str, int] = {}
        self.graph_id_to_changed_var_names: dict[int, set[str]] = {}
        self.var_names_to_allocated_graph_id: dict[str, int] = {}
        self.graph_id_to_staged_var_desc: dict[int, dict[str, TensorDesc]] = {}
        self.var_broad_cast_info: dict[int, dict[str, BroadcastInfo]] = {}
        self.var_is_instance: dict[int, set[str]] = {}
        self.dev_loaded_var_offset: dict[int, set[tuple[str, int]]] = {}
        self.dev_loaded_offsets: dict[int, set[int]] = {}
        self.batch_var_name_map: dict[str, str] = {}
        # Note [constant reuse index]: GE scans every entry and memcmps the weights; the
        # index (element size, weight bytes) -> VarKeys keeps that linear in the graph.
        # Among several equal entries the earliest registered one wins (GE's map is
        # unordered, so its choice is unspecified; equal weights share one block anyway).
        self.weight_index: dict[tuple[int, bytes], list[str]] = {}
        # the policy's lookups on the per-variable path, made once
        self._file_slice_rules = [r for r in policy.reuse_rules if r.kind is ReuseKind.FILE_SLICE]
        self._weights_rule = policy.reuse_rule(ReuseKind.IDENTICAL_WEIGHTS)
        self._file_slice_rule = policy.reuse_rule(ReuseKind.FILE_SLICE)
        self._file_constant = policy.op_types.file_constant
        self._const_place_holder = policy.op_types.const_place_holder
        self._render = policy.var_key.render

    # ---- keys ------------------------------------------------------------------
    def batch_key(self, name: str) -> str:
        return self.batch_var_name_map.get(name, name)

    def var_key(self, name: str, desc: TensorDesc) -> str:
        batch = self.batch_var_name_map
        return self._render(batch.get(name, name) if batch else name, desc.format, desc.dtype)

    # ---- addresses (§5) --------------------------------------------------------
    def get_var_addr(self, name: str, desc: TensorDesc) -> tuple[int, int]:
        key = self.var_key(name, desc)
        entry = self.var_addr_mgr_map.get(key)
        if entry is None:
            raise VarError(Status.FAILED, f"var_key:{key} can't find in var_addr_mgr_map_, "
                           f"var_name:{name}, session_id:{self.session_id}", name)
        return entry.address, entry.memory_type

    def save_var_addr(self, name: str, desc: TensorDesc, address: int, mem_type: int,
                      op: VarOp | None, key: str | None = None) -> None:
        key = key or self.var_key(name, desc)
        if key in self.var_addr_mgr_map:
            raise VarError(Status.FAILED, f"var_key:{key} conflict in var_addr_mgr_map_, "
                           f"var_name:{name}, session_id:{self.session_id}", name)
        logic = address + (self.logic_base() if mem_type == self.hbm_rt else 0)
        self._store(key, VarAddr(desc, logic, address, mem_type, op))
        self.var_offset_map[logic] = mem_type
        ext = None
        if op is not None and op.type in self._const_place_holder:
            ext = op.external_address
        dev = self.var_dev_addr_mgr_map
        if logic not in dev:
            self.dev_addr_order.append(logic)
        dev[logic] = VarDevAddr(desc, logic, ext or 0, ext is not None)

    def set_var_addr(self, name: str, desc: TensorDesc, ptr: int, mem_type: int,
                     op: VarOp | None, key: str | None = None) -> None:
        key = key or self.var_key(name, desc)
        if key not in self.var_addr_mgr_map:
            offset = ptr - self.logic_base() if mem_type == self.hbm_rt else 0
            self._store(key, VarAddr(desc, ptr, offset, mem_type, op))
        batch = self.batch_var_name_map
        self.cur_var_tensor_desc_map[batch.get(name, name) if batch else name] = desc

    def add_dev_addr(self, entry: VarDevAddr) -> None:
        if entry.logic_addr not in self.var_dev_addr_mgr_map:
            self.dev_addr_order.append(entry.logic_addr)
        self.var_dev_addr_mgr_map[entry.logic_addr] = entry

    def _store(self, key: str, entry: VarAddr) -> None:
        self.var_addr_mgr_map[key] = entry
        op = entry.op
        if op is None:
            return
        if op.file_path and op.type in self._file_constant:
            self.file_constant_var_map.setdefault(self._file_key(op), key)   # first writer wins
        rule = self._weights_rule
        if rule is not None and op.weight and op.type in rule.candidate_types and op.output:
            self.weight_index.setdefault((t.element_bytes(op.output.dtype), op.weight), []).append(key)

    def _file_key(self, op: VarOp) -> str:
        rule = self._file_slice_rule
        form = rule.key if rule is not None else "{path}:{offset}"
        return form.format(path=op.file_path, offset=op.file_offset)

    def is_var_exist(self, name: str, desc: TensorDesc | None = None) -> bool:
        if desc is None:
            return self.batch_key(name) in self.cur_var_tensor_desc_map
        return self.var_key(name, desc) in self.var_addr_mgr_map

    def get_cur_var_desc(self, name: str) -> TensorDesc:
        desc = self.cur_var_tensor_desc_map.get(self.batch_key(name))
        if desc is None:
            raise VarError(Status.FAILED, f"variable '{name}' has no current descriptor", name)
        return desc

    def renew_cur_var_desc(self, name: str, desc: TensorDesc) -> None:
        """Copy format and origin format from `desc`; re-key the address entry."""
        bkey = self.batch_key(name)
        cur = self.cur_var_tensor_desc_map.get(bkey)
        if cur is None:
            return
        old_key = self.var_key(name, cur)
        new = replace(cur, format=desc.format, origin_format=desc.origin_format)
        self.cur_var_tensor_desc_map[bkey] = new
        entry = self.var_addr_mgr_map.pop(old_key, None)
        if entry is None:
            raise VarError(Status.FAILED, f"var_key:{old_key} can't find in var_addr_mgr_map_, "
                           f"var_name:{name} (RenewCurVarDesc)", name)
        moved = entry._replace(desc=replace(entry.desc, format=desc.format,
                                            origin_format=desc.origin_format))
        self._store(self.var_key(name, new), moved)

    # ---- reuse lookups (§6) ----------------------------------------------------
    def get_reuse_addr(self, op: VarOp | None) -> tuple[int, int, str] | None:
        """(address, memory type, rule id) of a reusable block for a new name, or None."""
        if op is None:
            return None
        for rule in self._file_slice_rules:
            if op.type in rule.op_types:
                return self._file_slice(op, rule.id)
        rule = self._weights_rule
        if rule is None or op.output is None or not op.weight:
            return None
        elem = t.element_bytes(op.output.dtype)
        if elem <= 0:
            return None
        for key in self.weight_index.get((elem, op.weight), ()):
            entry = self.var_addr_mgr_map.get(key)
            if (entry is not None and entry.op is not None and entry.op.type in rule.candidate_types
                    and entry.op.weight == op.weight):
                return entry.address, entry.memory_type, rule.id
        return None

    def _file_slice(self, op: VarOp, rule_id: str) -> tuple[int, int, str] | None:
        if not op.file_path:
            return None
        key = self.file_constant_var_map.get(self._file_key(op))
        entry = self.var_addr_mgr_map.get(key) if key is not None else None
        if entry is None:
            return None
        return entry.address, entry.memory_type, rule_id

    # ---- misc bookkeeping ------------------------------------------------------
    def set_changed_graph_id(self, name: str, graph_id: int) -> None:
        bkey = self.batch_key(name)
        old = self.var_names_to_changed_graph_id.get(bkey)
        if old is not None:
            self.graph_id_to_changed_var_names.get(old, set()).discard(bkey)
        self.var_names_to_changed_graph_id[bkey] = graph_id
        self.graph_id_to_changed_var_names.setdefault(graph_id, set()).add(bkey)

    def remove_changed_graph_id(self, name: str) -> None:
        bkey = self.batch_key(name)
        gid = self.var_names_to_changed_graph_id.pop(bkey, None)
        if gid is not None:
            names = self.graph_id_to_changed_var_names.get(gid, set())
            names.discard(bkey)
            if not names:
                self.graph_id_to_changed_var_names.pop(gid, None)

    def check_and_set_var_loaded(self, op: VarOp, device: int) -> bool:
        offset = (op.output_offsets[0] if op.output_offsets else 0) - op.inner_offset
        offsets = self.dev_loaded_offsets.setdefault(device, set())
        if offset in self.var_offset_map and offset in offsets:
            return True
        self.dev_loaded_var_offset.setdefault(device, set()).add((op.name, offset))
        offsets.add(offset)
        return False

    def device_map(self, device: int) -> dict[int, VarDevAddr]:
        """The device copy of the dev-address map, topped up with new session entries."""
        dmap = self.device_dev_maps.setdefault(device, {})
        done = self.device_synced.get(device, 0)
        for logic in self.dev_addr_order[done:]:
            dmap.setdefault(logic, self.var_dev_addr_mgr_map[logic])
        self.device_synced[device] = len(self.dev_addr_order)
        return dmap
