"""A planning session: the VarManagerPool, the session's VarManager and the rebuild ctrl.

The runner keeps one `VarSession` per run and hands it to the variable passes and
the planner (see `passes.run_variable_pass`).
"""
from __future__ import annotations

from dataclasses import dataclass

from engine.core.errors import InputError, Loc, Problem, display_path
from engine.varmgr.manager import VarManager, VarManagerPool
from engine.varmgr.physical import DeviceMemory
from engine.varmgr.policy import VarPolicy
from engine.varmgr.policy_load import default_policy
from engine.varmgr.rebuild import GraphRebuildStateCtrl
from engine.varmgr.records import VarError
from engine.varmgr.state import load_state, restore_session

OTHER_VERSION = 2          # SessionVersion::OTHER_VERSION, what an online session uses


@dataclass
class VarSession:
    pool: VarManagerPool
    manager: VarManager
    ctrl: GraphRebuildStateCtrl
    graph_id: int = 0

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
        info = load_state(state, pool.policy)
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
    vm.mem_manager = DeviceMemory()          # simulated pools for RDMA / host variables
    return vm
