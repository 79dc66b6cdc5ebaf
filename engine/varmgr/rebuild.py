"""GraphRebuildStateCtrl (§9.1): which graphs must rebuild after a variable changed format."""
from __future__ import annotations

from engine.varmgr.policy import VarPolicy


class GraphRebuildStateCtrl:
    def __init__(self, policy: VarPolicy):
        self.tracked = policy.op_types.rebuild_tracked
        self.max_change_times = policy.format_fusion.max_var_change_times
        self.graph_resources: dict[int, set[str]] = {}
        self.need_rebuild: set[int] = set()
        self.change_times: dict[str, int] = {}

    def add_graph(self, graph_id: int, model) -> None:
        """Resource set := names of tracked variable nodes (a None model is ignored)."""
        if model is None:
            return
        self.graph_resources[graph_id] = {n.name for n in model.all_nodes() if n.type in self.tracked}

    def add_resource_name(self, graph_id: int, name: str) -> None:
        self.graph_resources.setdefault(graph_id, set()).add(name)

    def remove_graph(self, graph_id: int) -> None:
        """Drops the resources and the rebuild flag; change counters stay."""
        self.graph_resources.pop(graph_id, None)
        self.need_rebuild.discard(graph_id)

    def set_state_changed(self, name: str) -> None:
        self.change_times[name] = self.change_times.get(name, 0) + 1
        for gid, names in self.graph_resources.items():
            if name in names:
                self.need_rebuild.add(gid)

    def is_var_permit_to_change_formats(self, name: str) -> bool:
        times = self.change_times.get(name)
        return times is None or times < self.max_change_times

    def is_graph_need_rebuild(self, graph_id: int) -> bool:
        return graph_id in self.need_rebuild

    def set_graph_build_end(self, graph_id: int) -> None:
        self.need_rebuild.discard(graph_id)
