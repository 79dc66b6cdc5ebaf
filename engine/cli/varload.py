"""`vars plan --load-device N`: each planned graph loaded on each device (engine/varmgr/loading.py),
for the plan's text, its JSON (`memory_mode`, `loads`, `devices`, `var_memory_allocator`) and the
failure a load that GE's GetVarMemoryAddr cannot serve makes."""
from __future__ import annotations

from engine.core.errors import InputError, Loc, Problem
from engine.varmgr.manager import VarManager
from engine.varmgr.placement import GraphPlan


class Loads:
    """`--load-device`: each planned graph loaded on each device (engine/varmgr/loading.py)."""

    def __init__(self, vm: VarManager, options: dict[str, str], memory_size: int | None, devices):
        from engine.varmgr.loading import SessionAllocators, memory_mode
        self.vm, self.devices = vm, sorted(set(devices or ()))
        self.mode = memory_mode(vm.policy, {**vm.options, **options}, memory_size)
        if self.devices and self.mode is None:
            raise InputError(Problem(Loc(vm.policy.file), "--load-device needs the variable policy's "
                                     "memory_modes", "add a `memory_modes:` block (see rules/ge/variables.yaml)"))
        if any(d < 0 for d in self.devices):
            raise InputError(Problem(Loc("--load-device"), "a device id is a number >= 0", "write e.g. --load-device 0"))
        self.allocators = SessionAllocators()
        self.runs: list[tuple[int, int, list]] = []

    def load(self, plan: GraphPlan) -> None:
        from engine.varmgr.loading import load_graph
        if self.mode is None:
            return
        for device in self.devices:
            self.runs.append((plan.graph_id, device, load_graph(self.vm, plan, device, self.allocators,
                                                                self.mode)))

    def failed(self) -> list[str]:
        return [f"graph {g} on device {d}: '{v.name}'" for g, d, vs in self.runs for v in vs if v.dev_addr is None]

    def why(self) -> str:
        fails = [f for (_, _, _), a in sorted(self.allocators.allocators.items()) for f in a.failures]
        mode = "ge.variableUse1gHugePage 1G-only, no fallback to device malloc" if self.mode.huge_page == "only" \
            else "device malloc failed"
        return mode + (f"; variable allocator: {fails[-1]}" if fails else "")

    def to_json(self) -> dict:
        from engine.varmgr.loading import device_flags
        if self.mode is None:
            return {}
        out = {"memory_mode": self.mode.to_json()}
        if not self.devices:
            return out
        out["loads"] = [{"graph_id": g, "device": d, "variables": [{
            "node": v.node, "name": v.name, "var_key": v.var_key, "memory_type": v.memory_type,
            "logic": v.logic, "dev_addr": v.dev_addr, "action": v.action} for v in vs]} for g, d, vs in self.runs]
        out["devices"] = {str(d): {**device_flags(self.vm, d), "allocators": [
            a.to_json() for (s, dev, _), a in sorted(self.allocators.allocators.items()) if dev == d]}
            for d in self.devices}
        alloc = self.vm.expandable_allocator
        out["var_memory_allocator"] = alloc.base if alloc is not None and hasattr(alloc, "base") else None
        return out

    def render(self) -> str:
        if self.mode is None or not self.devices:
            return ""
        m = self.mode
        lines = [f"memory mode: static memory policy {m.policy}, huge pages {m.huge_page}, "
                 f"page size {m.page_size}"]
        for g, d, vs in self.runs:
            bad = [v for v in vs if v.dev_addr is None]
            lines.append(f"graph {g} loaded on device {d}: {len(vs) - len(bad)} of {len(vs)} variables "
                         "have device memory" + (": " + ", ".join(f"'{v.name}' failed" for v in bad) if bad else ""))
        for (s, d, _), a in sorted(self.allocators.allocators.items()):
            lines.append(f"device {d} session {s} variable allocator: {a.used} bytes used, {a.mapped_pages} "
                         f"pages of {a.page_size} mapped" + (f", {a.fallback_pages} as 2M pages" if a.fallback_pages
                                                             else "") + ("" if a.supported else ", unsupported"))
        return "\n" + "\n".join(lines)
