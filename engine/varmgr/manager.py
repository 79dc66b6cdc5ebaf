"""VarManager (one per session) and VarManagerPool (§1, §3, §5, §6).

Method names follow GE's (snake_case). A GE failure status raises `VarError`;
calls GE answers with false / nullptr return False / None. Without Init (no
VarResource) calls behave as GE's do (INTERNAL_ERROR, false, empty, ...).
"""
from __future__ import annotations

from engine.varmgr.desc import TensorDesc
from engine.varmgr.policy import Allocator, ReuseKind, VarPolicy
from engine.varmgr.policy_load import default_policy
from engine.varmgr.records import UINT64_MAX, Assignment, BroadcastInfo, Status, TransNodeInfo, VarError, VarOp
from engine.varmgr.physical import DeviceMemory, free_var_memory, get_var_memory_addr
from engine.varmgr.resource import MemResource, VarResource, build_mem_resource



class _ReuseRules:
    """The reuse rules AssignVarMem consults, looked up once per manager."""

    __slots__ = ("same", "size_gate")

    def __init__(self, policy: VarPolicy):
        self.same = policy.reuse_rule(ReuseKind.SAME_VARIABLE)
        self.size_gate = policy.reuse_rule(ReuseKind.SIZE_COMPATIBLE) is not None


class VarManager:
    def __init__(self, session_id: int, policy: VarPolicy | None = None,
                 pool: "VarManagerPool | None" = None):
        self.policy = policy or default_policy()
        self.pool = pool
        mem = self.policy.memory
        self.version = mem.max_version
        self.session_id = session_id
        self.device_id = 0
        self.job_id = 0
        self.graph_mem_max_size = mem.graph_mem_max_default
        self.var_mem_max_size = mem.var_mem_max_default
        self.var_mem_logic_base = mem.logic_base_default
        self.use_max_mem_size = mem.use_max_default
        self.var_resource: VarResource | None = None
        self.mem_resources: dict[int, MemResource] = {}
        self.options: dict[str, str] = {}
        self.mem_manager: DeviceMemory | None = None
        self.expandable_allocator = None
        self.external_var_addr = 0
        self.external_var_size = 0
        self.var_malloc_mem_size = 0
        self.graph_var_mem_statistic: dict[str, dict] = {}
        self._hbm_rt = self.policy.rt(self.policy.memory_type_selection.default)
        self._rules = _ReuseRules(self.policy)

    # ---- lifecycle (§1, §3) ----------------------------------------------------
    def init(self, version: int, session_id: int, device_id: int, job_id: int) -> None:
        if self.var_resource is not None:
            return                                   # GE: warning, SUCCESS
        if version > self.policy.memory.max_version:
            raise VarError(Status.PARAM_INVALID, f"session version {version} is invalid "
                           f"(at most {self.policy.memory.max_version})")
        self.version, self.session_id, self.device_id, self.job_id = version, session_id, device_id, job_id
        base_session = session_id

        def logic_base() -> int:
            owner = self.pool.instance(base_session) if self.pool is not None else self
            return owner.var_mem_logic_base
        self.var_resource = VarResource(self.policy, session_id, logic_base)

    def destroy(self) -> None:
        if self.mem_manager is not None and self.var_resource is not None:
            free_var_memory(self)
        self.version = self.policy.memory.max_version
        self.device_id = self.session_id = 0
        self.mem_resources.clear()
        self.expandable_allocator = None
        self.var_resource = None

    def set_memory_malloc_size(self, options: dict[str, str], total: int) -> None:
        mem = self.policy.memory
        self.use_max_mem_size = total * mem.use_max_ratio[0] // mem.use_max_ratio[1]
        self.graph_mem_max_size = total * mem.graph_ratio[0] // mem.graph_ratio[1]
        self.var_mem_max_size = total * mem.var_ratio[0] // mem.var_ratio[1]
        self.set_all_memory_max_value(options)

    def set_all_memory_max_value(self, options: dict[str, str]) -> None:
        # Current GE ignores the options (ge.graphMemoryMaxSize / ge.variableMemoryMaxSize).
        mem = self.policy.memory
        self.var_mem_logic_base = mem.logic_base_session
        self.use_max_mem_size = self.graph_mem_max_size + self.var_mem_max_size
        if self.use_max_mem_size > mem.max_memory_size:
            raise VarError(Status.GE_GRAPH_OPTIONS_INVALID, f"all mem_use size:{self.use_max_mem_size} "
                           f"can not exceed limit:{mem.max_memory_size}, session_id:{self.session_id}, "
                           "check invalid")

    def _evaluate_mode(self) -> bool:
        return self.options.get(self.policy.options.evaluate_mode) == "1"

    def get_var_mem_max_size(self, for_check: bool = False) -> int:
        return UINT64_MAX if for_check and self._evaluate_mode() else self.var_mem_max_size

    def get_graph_memory_max_size(self, for_check: bool = False) -> int:
        return UINT64_MAX if for_check and self._evaluate_mode() else self.graph_mem_max_size

    def get_use_max_memory_size(self) -> int:
        return UINT64_MAX if self._evaluate_mode() else self.use_max_mem_size

    # ---- helpers ---------------------------------------------------------------
    def res(self, what: str = "") -> VarResource:
        if self.var_resource is None:
            raise VarError(Status.INTERNAL_ERROR, f"VarManager of session {self.session_id} has no "
                           f"VarResource (Init not called){' in ' + what if what else ''}")
        return self.var_resource

    def mem_resource(self, mem_type: int) -> MemResource:
        res = self.mem_resources.get(mem_type)
        if res is None:
            res = build_mem_resource(self.policy, mem_type)
            if res is None:
                raise VarError(Status.INTERNAL_ERROR, f"memory type {mem_type} has no MemResource")
            self.mem_resources[mem_type] = res
        return res

    @property
    def hbm_rt(self) -> int:
        return self._hbm_rt

    # ---- AssignVarMem / RestoreVarMem (§6) ----------------------------------------
    def assign_var_mem(self, name: str, op: VarOp | None, desc: TensorDesc, mem_type: int,
                       key: str | None = None) -> Assignment:
        """AssignVarMem; `key` is the VarKey of (name, desc) when the caller has it already."""
        res = self.res("AssignVarMem")
        size = desc.size
        if size < 0:
            raise VarError(Status.FAILED, f"variable '{name}': tensor size {size} is negative", name)
        mem = self.mem_resources.get(mem_type) or self.mem_resource(mem_type)
        rules = self._rules
        if key is None:
            key = res.var_key(name, desc)
        batch = res.batch_var_name_map
        cur = res.cur_var_tensor_desc_map.get(batch.get(name, name) if batch else name)
        found = None
        if cur is not None:
            rule = rules.same
            entry = res.var_addr_mgr_map.get(res.var_key(name, cur)) if rule is not None else None
            if entry is not None:
                found, cur_size = (entry.address, entry.memory_type, rule.id), cur.size
        else:
            found, cur_size = res.get_reuse_addr(op), size
        footprint = 0
        if found is None or (rules.size_gate and size > cur_size):
            before = mem.var_mem_size
            try:
                offset = mem.assign(self, name, size, op)
                res.save_var_addr(name, desc, offset, mem_type, op, key)
            except VarError as exc:
                raise VarError(Status.INTERNAL_ERROR, f"[Assign][VarMem] by offset failed, session_id:"
                               f"{self.session_id}: {exc.message}", name) from None
            footprint = mem.var_mem_size - before if mem.rt == self._hbm_rt else size
            address, typ, rule_id = res.var_addr_mgr_map[key].address, mem_type, None
            if cur is None or not cur.same_view(desc):   # SetVarAddr of a stored key: the current desc
                res.cur_var_tensor_desc_map[batch.get(name, name) if batch else name] = desc
        else:
            address, typ, rule_id = found
            if cur is None or not cur.same_view(desc):
                res.set_var_addr(name, desc, address, typ, op, key)
        return Assignment(name, key, address, typ, size, footprint, rule_id)

    def restore_var_mem(self, name: str, op: VarOp, desc: TensorDesc, mem_type: int) -> None:
        res = self.res("RestoreVarMem")
        size = desc.size
        if size < 0:
            raise VarError(Status.FAILED, f"variable '{name}': tensor size {size} is negative", name)
        cur = res.cur_var_tensor_desc_map.get(res.batch_key(name))
        entry = res.var_addr_mgr_map.get(res.var_key(name, cur)) if cur is not None else None
        if entry is not None:
            if not cur.same_view(desc):
                if size > cur.size:
                    raise VarError(Status.FAILED, f"The format of [{name}] is changed, and the new tensor "
                                   f"size [{size}] exceeds the size [{cur.size}] of the tensor in original "
                                   "format, the compute graph needs to be recompiled.", name)
                res.set_var_addr(name, desc, entry.address, entry.memory_type, op)
            return
        logic_offset = (op.output_offsets[0] if op.output_offsets else 0) - self.var_mem_logic_base
        if logic_offset < 0:
            raise VarError(Status.FAILED, f"variable '{name}': output offset is below the logic base "
                           f"{self.var_mem_logic_base}", name)
        if logic_offset + size > self.var_mem_max_size:
            raise VarError(Status.FAILED, f"Variable offset overflow max_size:[{self.var_mem_max_size}], "
                           f"offset:[{logic_offset}], tensor_size:[{size}] (variable '{name}').", name)
        res.save_var_addr(name, desc, logic_offset, mem_type, op)
        res.set_var_addr(name, desc, logic_offset, mem_type, op)

    # ---- addresses (§5) ----------------------------------------------------------
    def save_var_addr(self, name: str, desc: TensorDesc, address: int, mem_type: int,
                      op: VarOp | None = None) -> None:
        self.res("SaveVarAddr").save_var_addr(name, desc, address, mem_type, op)

    def set_var_addr(self, name: str, desc: TensorDesc, ptr: int, mem_type: int,
                     op: VarOp | None = None) -> None:
        self.res("SetVarAddr").set_var_addr(name, desc, ptr, mem_type, op)

    def get_var_addr(self, name: str, desc: TensorDesc) -> tuple[int, int]:
        try:
            return self.res("GetVarAddr").get_var_addr(name, desc)
        except VarError as exc:
            raise VarError(Status.INTERNAL_ERROR, exc.message, name) from None

    def is_var_exist(self, name: str, desc: TensorDesc | None = None) -> bool:
        return self.var_resource is not None and self.var_resource.is_var_exist(name, desc)

    def is_var_addr(self, offset: int) -> bool:
        return self.var_resource is not None and offset in self.var_resource.var_offset_map

    def get_var_mem_type(self, offset: int) -> int:
        reserved = next(s.rt for s in self.policy.memory_types if s.allocator is Allocator.NONE)
        if self.var_resource is None:
            return reserved
        return self.var_resource.var_offset_map.get(offset, reserved)

    def get_cur_var_desc(self, name: str) -> TensorDesc:
        return self.res("GetCurVarDesc").get_cur_var_desc(name)

    def renew_cur_var_desc(self, name: str, desc_or_op: TensorDesc | VarOp | None) -> None:
        res = self.res("RenewCurVarDesc")
        if isinstance(desc_or_op, VarOp) or desc_or_op is None:
            if not res.is_var_exist(name):
                return
            if desc_or_op is None or desc_or_op.output is None:
                raise VarError(Status.FAILED, f"renew var desc of '{name}' failed: op has no output", name)
            desc_or_op = desc_or_op.output
        res.renew_cur_var_desc(name, desc_or_op)

    def get_var_mem_size(self, mem_type: int) -> int:
        mem = self.mem_resources.get(mem_type)
        if mem is None:
            return 0
        return mem.var_mem_size - mem.const_place_holder_mem_size

    def get_var_malloc_size(self, desc: TensorDesc) -> int:
        return self.policy.memory.footprint(desc.size)

    # ---- roads, graph ids, broadcast, readiness (§6) -----------------------------
    def set_trans_road(self, name: str, road: list[TransNodeInfo]) -> None:
        res = self.res("SetTransRoad")
        res.var_to_trans_road.setdefault(res.batch_key(name), list(road))   # first writer wins

    def get_trans_road(self, name: str) -> list[TransNodeInfo] | None:
        if self.var_resource is None:
            return None
        return self.var_resource.var_to_trans_road.get(self.var_resource.batch_key(name))

    def set_changed_graph_id(self, name: str, graph_id: int) -> None:
        self.res("SetChangedGraphId").set_changed_graph_id(name, graph_id)

    def get_changed_graph_id(self, name: str) -> int | None:
        res = self.res("GetChangedGraphId")
        return res.var_names_to_changed_graph_id.get(res.batch_key(name))

    def remove_changed_graph_id(self, name: str) -> None:
        if self.var_resource is not None:
            self.var_resource.remove_changed_graph_id(name)

    def get_changed_var_names(self, graph_id: int) -> set[str]:
        if self.var_resource is None:
            return set()
        return set(self.var_resource.graph_id_to_changed_var_names.get(graph_id, ()))

    def set_allocated_graph_id(self, name: str, graph_id: int) -> None:
        res = self.res("SetAllocatedGraphId")
        batch = res.batch_var_name_map
        res.var_names_to_allocated_graph_id.setdefault(batch.get(name, name) if batch else name, graph_id)

    def get_allocated_graph_id(self, name: str) -> int | None:
        res = self.res("GetAllocatedGraphId")
        return res.var_names_to_allocated_graph_id.get(res.batch_key(name))

    def record_staged_var_desc(self, graph_id: int, name: str, desc: TensorDesc) -> None:
        self.res("RecordStagedVarDesc").graph_id_to_staged_var_desc.setdefault(graph_id, {})[name] = desc

    def get_staged_var_descs(self, graph_id: int) -> dict[str, TensorDesc]:
        if self.var_resource is None:
            return {}
        return dict(self.var_resource.graph_id_to_staged_var_desc.get(graph_id, {}))

    def get_all_variables(self) -> dict[str, TensorDesc]:
        res = self.res("GetAllVariables")
        out = {}
        for name, desc in res.cur_var_tensor_desc_map.items():
            road = res.var_to_trans_road.get(name)
            out[name] = road[0].input if road else desc
        if not out:
            raise VarError(Status.INTERNAL_ERROR, f"session {self.session_id} has no variables")
        return out

    def save_broadcast_info(self, graph_id: int, info: BroadcastInfo) -> None:
        self.res("SaveBroadCastInfo").var_broad_cast_info.setdefault(graph_id, {})[info.var_name] = info

    def get_broadcast_info(self, graph_id: int, name: str) -> BroadcastInfo | None:
        res = self.res("GetBroadCastInfo")
        return res.var_broad_cast_info.get(graph_id, {}).get(name)

    def set_var_is_ready(self, name: str, desc: TensorDesc, device: int = 0) -> None:
        res = self.res("SetVarIsReady")
        res.var_is_instance.setdefault(device, set()).add(res.var_key(name, desc))

    def is_var_ready(self, name: str, desc: TensorDesc, device: int = 0) -> bool:
        res = self.var_resource
        return res is not None and res.var_key(name, desc) in res.var_is_instance.get(device, ())

    def check_and_set_var_loaded(self, op: VarOp, device: int = 0) -> bool:
        return self.var_resource is not None and self.var_resource.check_and_set_var_loaded(op, device)

    def set_batch_variables_key_name(self, batch_name: str, key_name: str) -> None:
        self.res("SetBatchVariablesKeyName").batch_var_name_map[batch_name] = key_name

    def has_shared_var_mem_between_batch(self) -> bool:
        return self.var_resource is not None and bool(self.var_resource.batch_var_name_map)

    # ---- physical memory (§8), see physical.py ------------------------------------
    def get_var_memory_addr(self, logic: int, mem_type: int, device: int = 0,
                            graph_name: str = "") -> int | None:
        return get_var_memory_addr(self, logic, mem_type, device, graph_name)

    def free_var_memory(self) -> None:
        free_var_memory(self)

    def set_external_var(self, addr: int, size: int) -> None:
        self.external_var_addr, self.external_var_size = addr, size

    def update_dev_var_mgr_info(self, device: int) -> None:
        self.res("UpdateDevVarMgrInfo").device_map(device)

    def get_var_mgr_info(self, device: int, logic: int):
        res = self.var_resource
        if res is None or device not in res.device_dev_maps:
            return None
        return res.device_dev_maps[device].get(logic)

    def set_var_mgr_dev_addr(self, device: int, logic: int, dev_addr: int) -> None:
        res = self.res("SetVarMgrDevAddr")
        entry = res.device_dev_maps.get(device, {}).get(logic)
        if entry is None:
            raise VarError(Status.INTERNAL_ERROR, f"logic address {logic} is not assigned on device {device}")
        res.device_dev_maps[device][logic] = entry._replace(dev_addr=dev_addr or 0)


class VarManagerPool:
    """session id -> VarManager, created lazily by `instance` (GE's process singleton)."""

    def __init__(self, policy: VarPolicy | None = None):
        self.policy = policy or default_policy()
        self.managers: dict[int, VarManager] = {}

    def instance(self, session_id: int) -> VarManager:
        mgr = self.managers.get(session_id)
        if mgr is None:
            mgr = self.managers[session_id] = VarManager(session_id, self.policy, self)
        return mgr

    def destroy(self) -> None:
        for mgr in self.managers.values():
            mgr.destroy()
        self.managers.clear()
