"""A planning session: the VarManagerPool, the session's VarManager and the rebuild ctrl.

The runner keeps one `VarSession` per run and hands it to the variable passes and
the planner (see `passes.run_variable_pass`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from engine.core.errors import InputError, Loc, Problem, display_path
from engine.varmgr.manager import VarManager, VarManagerPool
from engine.varmgr.physical import DeviceMemory
from engine.varmgr.policy import VarPolicy
from engine.varmgr.policy_load import default_policy
from engine.varmgr.rebuild import GraphRebuildStateCtrl
from engine.varmgr.records import VarError
from engine.varmgr.state import load_sessions, restore_session

OTHER_VERSION = 2          # SessionVersion::OTHER_VERSION, what an online session uses


@dataclass
class VarSession:
    pool: VarManagerPool
    manager: VarManager
    ctrl: GraphRebuildStateCtrl
    graph_id: int = 0
    # VariablePrepareOpPass's ref_input_output_map_: one pass object runs on the root and then
    # each subgraph, and keeps what it learned (engine/varmgr/passes/prepare.py)
    prepare_ref_map: dict = field(default_factory=dict)

    @classmethod
    def open(cls, policy: VarPolicy | None = None, session: int | None = None,
             memory_size: int | None = None, options: dict[str, str] | None = None,
             state: str | None = None) -> "VarSession":
        pool = VarManagerPool(policy or default_policy())
        mgr = open_session(pool, session, memory_size, dict(options or {}), state)
        return cls(pool, mgr, GraphRebuildStateCtrl(pool.policy))


def open_session(pool: VarManagerPool, session: int | None, memory_size: int | None,
                 options: dict[str, str], state: str | None) -> VarManager:
    """Restored from `state`, or initialised as GE's session setup does.

    Note [session setup without --memory-size]: GE's session init calls
    SetMemoryMallocSize with the device's memory; without a size we only run
    SetAllMemoryMaxValue, which moves the logic base to 128 GiB and keeps the
    default maxima (26 GiB graph, 5 GiB variables).
    """
    if state is not None:
        infos = load_sessions(state, pool.policy)
        info = infos[0] if len(infos) == 1 else next((i for i in infos if i.session_id == session), None)
        if info is None:
            raise InputError(Problem(Loc(display_path(state)), f"the state file holds sessions "
                                     f"{', '.join(str(i.session_id) for i in infos) or '(none)'}"
                                     + (f", not {session}" if session is not None else ""),
                                     "name one of them with --session ID"))
        if session is not None:
            info.session_id = session
        try:
            vm = restore_session(pool, info)
        except VarError as exc:
            raise InputError(Problem(Loc(display_path(state)), f"cannot restore state: {exc.message}",
                                     "the file is corrupt or from an incompatible version")) from None
    else:
        sid = session or 0
        vm = pool.instance(sid)
        vm.init(OTHER_VERSION, sid, 0, 0)
        try:
            if memory_size is not None:
                vm.set_memory_malloc_size(options, memory_size)
            else:
                vm.set_all_memory_max_value(options)
        except VarError as exc:
            raise InputError(Problem(Loc("--memory-size"), exc.message, "use a smaller size")) from None
    vm.options.update(options)
    vm.mem_manager = session_memory(pool.policy, options, [vm])     # simulated device, RDMA and host memory
    return vm


def _byte_option(options: dict[str, str], key: str) -> int | None:
    text = options.get(key)
    if text is None:
        return None
    try:
        value = int(text, 0)
    except ValueError:
        value = -1
    if value < 0:
        raise InputError(Problem(Loc("--option"), f"{key}={text}: not a byte count",
                                 f"write e.g. --option {key}=1048576"))
    return value


def session_memory(policy: VarPolicy, options: dict[str, str], managers) -> DeviceMemory:
    """The simulated MemManager the sessions of one command share (GE's is process-wide).

    Pool memory that restored sessions already hold (their RDMA / host pointers) is kept
    out of the new pools, so no two variables share bytes.
    """
    from engine.varmgr.policy import Allocator
    keys = policy.options
    memory = DeviceMemory.for_session(_byte_option(options, keys.rdma_pool_size),
                                      _byte_option(options, keys.host_memory_size))
    ends = {Allocator.RDMA_POOL: 0, Allocator.HOST_POOL: 0}
    for vm in managers:
        res = vm.var_resource
        for entry in (res.var_addr_mgr_map.values() if res is not None else ()):
            spec = policy.mem_type_by_rt(entry.memory_type)
            if spec is not None and spec.allocator in ends:
                ends[spec.allocator] = max(ends[spec.allocator], entry.address + max(entry.desc.size, 1))
    memory.rdma.reserve(ends[Allocator.RDMA_POOL])
    if ends[Allocator.HOST_POOL] > memory.host.base:
        memory.host.used = max(memory.host.used, (ends[Allocator.HOST_POOL] - memory.host.base + 511) // 512 * 512)
    return memory


class VarStore:
    """The sessions of one state file (GE's VarManagerPool): read when it exists, each session
    with its GraphRebuildStateCtrl, written back with every session in it.

    Sessions are isolated as in GE: each has its own VarManager (its VarResource, memory
    resources and logic base) and its own rebuild ctrl; a graph compiled in session S reads
    and changes only S.
    """

    def __init__(self, policy: VarPolicy, path: str | None = None):
        from engine.varmgr.state import load_sessions

        self.policy = policy
        self.path = path
        self.pool = VarManagerPool(policy)
        self.sessions: dict[int, VarSession] = {}
        self.memory: DeviceMemory | None = None
        if path is not None and Path(path).exists():
            for info in load_sessions(path, policy):
                try:
                    vm = restore_session(self.pool, info)
                except VarError as exc:
                    raise InputError(Problem(Loc(display_path(path)), f"cannot restore session "
                                             f"{info.session_id}: {exc.message}",
                                             "the file is corrupt or from an incompatible version")) from None
                self.sessions[info.session_id] = VarSession(self.pool, vm, restored_ctrl(vm),
                                                            next_graph_id(vm))

    def session(self, session_id: int, options: dict[str, str] | None = None,
                memory_size: int | None = None) -> VarSession:
        """Session `session_id`: the restored one, else a new one set up as GE's session init does."""
        got = self.sessions.get(session_id)
        if got is None:
            vm = open_session(self.pool, session_id, memory_size, dict(options or {}), None)
            got = self.sessions[session_id] = VarSession(self.pool, vm, GraphRebuildStateCtrl(self.policy))
        else:
            got.manager.options.update(options or {})
        if self.memory is None:       # one simulated MemManager for the command, as GE's is per process
            self.memory = session_memory(self.policy, dict(options or {}),
                                         [s.manager for s in self.sessions.values()])
        for s in self.sessions.values():
            s.manager.mem_manager = self.memory
        return got

    def encode(self, text: bool) -> bytes:
        from engine.varmgr.state import encode_sessions, to_info
        return encode_sessions([to_info(s.manager) for s in self.sessions.values()], text)


def restored_ctrl(vm: VarManager) -> GraphRebuildStateCtrl:
    """A GraphRebuildStateCtrl for a restored session.

    Note [rebuild state across runs]: GE keeps the ctrl in memory only. The state file says
    which variables changed format (var_names_to_changed_graph_id: VariableOpPass calls
    SetChangedGraphId exactly when it calls SetStateChanged) but not how often, so a changed
    variable counts one change (what the shipped limit, max_var_change_times 1, needs), and
    each earlier graph holds the variables it allocated (var_names_to_allocated_graph_id).
    """
    ctrl = GraphRebuildStateCtrl(vm.policy)
    res = vm.var_resource
    if res is None:
        return ctrl
    for name in res.var_names_to_changed_graph_id:
        ctrl.change_times[name] = 1
    for name, gid in res.var_names_to_allocated_graph_id.items():
        ctrl.add_resource_name(gid, name)
    return ctrl


def next_graph_id(vm: VarManager) -> int:
    """The id the next graph of a restored session gets: one past every graph id the state names."""
    res = vm.var_resource
    if res is None:
        return 0
    ids = [*res.var_names_to_allocated_graph_id.values(), *res.var_names_to_changed_graph_id.values(),
           *res.var_broad_cast_info]
    return max(ids) + 1 if ids else 0
