"""`memconflict vars plan|addr`: variable-memory planning from the command line.

    memconflict vars plan GRAPH... [--session ID] [--memory-size BYTES] [--option K=V]...
                          [--out OUT.pbtxt]... [--save-state STATE.pb] [--load-state STATE.pb]
                          [--var-state STATE.pb] [--plan-only] [--json PLAN.json] [--html MAP.html]
                          [--load-device N]... [--rules DIR]
    memconflict vars cache-check STATE.pb GRAPH [--session ID] [--rules DIR]
    memconflict vars addr STATE.pb LOGICAL_ADDR [--memory-type NAME] [--device N] [--rules DIR]

Exit status: 0 ok; 1 a failure GE reports (the message names the variable and
why); 2 unusable input or output paths. Outputs are checked before any work and
written together after every graph planned (engine/cli/outputs.py), so no
partial output is left behind.
"""
from __future__ import annotations

import json

from engine.cli.common import note_graph
from engine.cli.outputs import Outputs
from engine.core.errors import InputError, Loc, PassFailure, Problem, display_path
from engine.core.resources import default_pack_dir
from engine.varmgr.desc import TensorDesc
from engine.varmgr.manager import VarManager, VarManagerPool
from engine.varmgr.physical import check_init_value
from engine.varmgr.placement import GraphPlan, graph_available_memory
from engine.varmgr.policy import VarPolicy
from engine.pack.overlay import base_chain
from engine.varmgr.policy_load import default_policy, load_policy
from engine.varmgr.rebuild import GraphRebuildStateCtrl
from engine.varmgr.session import open_session
from engine.cli.varload import Loads
from engine.cli.varstate import begin_graph, end_graph, pack_policy
from engine.varmgr.state import encode, is_text_path, to_info


def add_commands(subparsers) -> None:
    """Add the `vars` command group to the `memconflict` parser."""
    v = subparsers.add_parser("vars", help="plan variable memory as GE's VarManager does")
    sub = v.add_subparsers(dest="vars_command", required=True, parser_class=type(v))
    p = sub.add_parser("plan", help="plan the variables of one or more graphs in one session")
    p.add_argument("graphs", nargs="+", metavar="GRAPH", help="GE dumps, planned in this order")
    p.add_argument("--session", type=int, default=None, help="session id (default 0, or the loaded state's)")
    p.add_argument("--memory-size", type=int, default=None, metavar="BYTES",
                   help="device memory for SetMemoryMallocSize (default: keep GE's default maxima)")
    p.add_argument("--option", action="append", metavar="KEY=VALUE", help="GE option (repeatable)")
    p.add_argument("--out", action="append", metavar="OUT.pbtxt",
                   help="write the planned graph; give one per GRAPH, in the same order")
    p.add_argument("--save-state", metavar="STATE.pb", help="write the session as deployer.VarManagerInfo")
    p.add_argument("--load-state", metavar="STATE.pb", help="start from a saved session")
    p.add_argument("--json", metavar="PLAN.json", help="write the plan as JSON")
    p.add_argument("--html", metavar="MAP.html", help="write the memory map: blocks per memory type, then their table")
    p.add_argument("--var-state", metavar="STATE.pb",
                   help="the sessions (VarManagerPool) to compile in: read if the file exists, written back")
    p.add_argument("--load-device", action="append", type=int, metavar="N",
                   help="after each graph, load it on device N as a model load does (repeatable): "
                        "physical addresses under the memory mode, ready/loaded flags")
    p.add_argument("--plan-only", action="store_true",
                   help="only place the variables (no variable passes before the placement)")
    p.add_argument("--external-var", metavar="ADDR:SIZE",
                   help="external variable memory (SetExternalVar): physical addresses are ADDR + offset")
    p.add_argument("--rules", metavar="DIR", help="rule pack folder holding variables.yaml")
    p.set_defaults(func=cmd_plan)
    c = sub.add_parser("cache-check", help="can a compiled graph be loaded from cache in this session "
                                            "(ModelCache's variable-description match)")
    c.add_argument("state", metavar="STATE.pb")
    c.add_argument("graph", metavar="GRAPH", help="the compiled graph of the cached model")
    c.add_argument("--session", type=int, default=None, help="session of STATE (default: its only one)")
    c.add_argument("--rules", metavar="DIR")
    c.set_defaults(func=cmd_cache_check)
    a = sub.add_parser("addr", help="resolve a logical address as GetVarMemoryAddr does")
    a.add_argument("state", metavar="STATE.pb")
    a.add_argument("logical", metavar="LOGICAL_ADDR", help="decimal or 0x-hex")
    a.add_argument("--memory-type", metavar="NAME", help="default: the type recorded for the address, else HBM")
    a.add_argument("--device", type=int, default=0)
    a.add_argument("--external-var", metavar="ADDR:SIZE", help="external variable memory (SetExternalVar)")
    a.add_argument("--dump", action="store_true",
                   help="show the bytes at the address: the init value, or with --graph the constant's weight")
    a.add_argument("--graph", metavar="GRAPH",
                   help="with --dump: the compiled graph (vars plan --out) whose constants are loaded (InitConstant, "
                        "InitFileConstant)")
    a.add_argument("--option", action="append", metavar="KEY=VALUE", help="GE option, e.g. ge.exec.value_bins")
    a.add_argument("--rules", metavar="DIR")
    a.set_defaults(func=cmd_addr)


def _policy(rules: str | None) -> VarPolicy:
    from engine.cli.common import pack_dir
    found = pack_dir(rules)
    if found.resolve() == default_pack_dir().resolve():
        return default_policy()
    # an overlay pack (`base:`) without its own variables.yaml uses its base's
    folder = next((p for p in base_chain(found) if (p / "variables.yaml").is_file()), found)
    return load_policy(folder / "variables.yaml")


def _options(items, rules=None) -> dict[str, str]:
    """`--option` values, checked against the options the pack declares (when any are given)."""
    from engine.cli.common import pack_dir, parse_options
    given = parse_options(items)
    if not given:
        return given
    from engine.passes.catalog import load_pack
    from engine.pack.options import resolve_options
    return resolve_options(load_pack(pack_dir(rules)).options, given)


# ---- plan -------------------------------------------------------------------------
def cmd_plan(args) -> int:
    from engine.core.dumpio import model_to_text, serialize_model, is_binary_path
    options = _options(args.option, args.rules)
    outs = args.out or []
    if outs and len(outs) != len(args.graphs):
        raise InputError(Problem(Loc("--out"), f"{len(outs)} --out for {len(args.graphs)} graphs",
                                 "give one --out per GRAPH, in the same order, or none"))
    if args.memory_size is not None and args.memory_size <= 0:
        raise InputError(Problem(Loc("--memory-size"), "memory size must be positive", ""))
    if args.var_state and (args.load_state or args.save_state):
        raise InputError(Problem(Loc("--var-state"), "--var-state reads and writes the state file itself",
                                 "drop --load-state/--save-state, or use them without --var-state"))
    if args.var_state == "-":
        raise InputError(Problem(Loc("--var-state"), "the state file cannot be standard output",
                                 "give a file name, e.g. --var-state state.pb"))
    files = Outputs()
    for out in outs:
        files.claim("--out", out)
    files.claim("--save-state", args.save_state)
    files.claim("--var-state", args.var_state)
    files.claim("--json", args.json)
    files.claim("--html", args.html)
    pack = None if args.plan_only else _pack(args.rules)
    session, store = _open(args, pack, options)
    vm = session.manager
    if args.external_var:
        vm.set_external_var(*_external_var(args.external_var))
    extras: list[dict] = []
    plans: list[tuple[str, GraphPlan]] = []
    loads = Loads(vm, options, args.memory_size, args.load_device)
    available: list[int] = []
    runs: list[dict] = []
    outputs: list[tuple[str, bytes]] = []
    for k, path in enumerate(args.graphs):
        note_graph(path)
        model, file_options = _load(path, pack)
        note_graph(path, model)
        runs.append(_compile(session, pack, model, {**file_options, **options}, path))
        if args.json:
            available.append(graph_available_memory(model, vm))
        plan = end_graph(session, model, path)
        _check_init_values(model, plan, vm, path)
        from engine.cli.varext import entry_extras
        extras.append(entry_extras(model, plan, vm, {**file_options, **options}, path))
        plans.append((display_path(path), plan))
        loads.load(plan)
        if outs:
            data = serialize_model(model)
            outputs.append((outs[k], data if is_binary_path(outs[k]) else model_to_text(data)))
    if args.save_state:
        outputs.append((args.save_state, encode(to_info(vm), is_text_path(args.save_state))))
    if args.var_state:
        outputs.append((args.var_state, store.encode(is_text_path(args.var_state))))
    doc = plan_json(vm, plans)
    from engine.cli.varext import add_extras, extra_lines
    add_extras(doc, vm, extras)
    doc["rebuild"] = sorted(session.ctrl.need_rebuild)
    doc.update(loads.to_json())
    for g, run in zip(doc["graphs"], runs):
        g["passes"] = run
    for g, free in zip(doc["graphs"], available):
        g["available_memory"] = free          # GetGraphAvailableMemory before the graph's placement
    if args.json:
        outputs.append((args.json, (json.dumps(doc, indent=1) + "\n").encode()))
    if args.html:
        from engine.report.varmap import render_varmap
        outputs.append((args.html, render_varmap(doc, vm.policy).encode()))
    failed = loads.failed()
    if failed:
        raise PassFailure("vars plan --load-device", f"model load fails: GetVarMemoryAddr returns nullptr "
                          f"for {', '.join(failed)} ({loads.why()})", None)
    files.write(outputs)
    text = render_plan(vm, plans, runs, sorted(session.ctrl.need_rebuild))
    print("\n".join([text, *extra_lines(doc)]) + loads.render(), file=files.text_stream())
    return 0


def _external_var(text: str) -> tuple[int, int]:
    from engine.varmgr.external import parse_external_var
    try:
        return parse_external_var(text)
    except ValueError as exc:
        raise InputError(Problem(Loc("--external-var"), f"'{text}': {exc}",
                                 "write ADDR:SIZE, e.g. --external-var 0x7f0000000000:1048576")) from None


def _pack(rules):
    from engine.cli.common import pack_dir
    from engine.passes.catalog import load_pack
    return load_pack(pack_dir(rules))


def _load(path: str, pack):
    if pack is None:
        from engine.core.dumpio import load_model
        return load_model(path), {}
    from engine.core.io import load_graph
    return load_graph(path, pack)


def _open(args, pack, options: dict[str, str]):
    """(the session the graphs are compiled in, the state-file store or None)."""
    from engine.varmgr.session import VarSession, VarStore, next_graph_id, restored_ctrl
    policy = _policy(args.rules) if pack is None else pack_policy(pack, "vars plan")
    if args.var_state:
        store = VarStore(policy, args.var_state)
        sid = args.session if args.session is not None else 0
        return store.session(sid, options, args.memory_size), store
    pool = VarManagerPool(policy)
    vm = open_session(pool, args.session, args.memory_size, options, args.load_state)
    if args.load_state:
        return VarSession(pool, vm, restored_ctrl(vm), next_graph_id(vm)), None
    return VarSession(pool, vm, GraphRebuildStateCtrl(policy)), None


def _compile(session, pack, model, options: dict[str, str], path: str) -> dict:
    """The pack's variable passes (pipeline order, gates applied) on one graph of the session:
    {pass id: {"inserted", "removed", "changed"}}."""
    begin_graph(session, model)
    if pack is None:
        return {}
    from engine.passes.context import RunContext
    from engine.passes.manager import resolve_passes, run_passes
    specs = [p for p in resolve_passes(pack, None, options) if p.algorithm == "variable_pass"]
    ctx = RunContext(pack, model, options)
    ctx.var_session = session
    run_passes(ctx, specs)
    out = {}
    for spec in specs:
        out[spec.id] = {"inserted": sum(1 for i in ctx.insertions if i.pass_id == spec.id),
                        "removed": sum(1 for r in ctx.removals if r.pass_id == spec.id),
                        "changed": sum(1 for d in ctx.diagnostics if d.pass_id == spec.id)}
    return out


def _check_init_values(model, plan: GraphPlan, vm: VarManager, path: str) -> None:
    from engine.varmgr.nodes import output_desc
    for e in plan.entries:
        for g in (model.graphs.get(e.graph),):
            node = g.find(e.node) if g is not None else None
            desc = output_desc(node, vm.policy) if node is not None else None
            why = check_init_value(desc) if desc is not None else None
            if why:
                raise PassFailure("vars plan", f"graph {plan.graph_id} ({display_path(path)}): variable "
                                  f"'{e.name}': {why}; GetVarMemoryAddr would return nullptr", e.name)


def plan_json(vm: VarManager, plans: list[tuple[str, GraphPlan]]) -> dict:
    return {
        "session": vm.session_id,
        "logic_base": vm.var_mem_logic_base,
        "var_mem_max_size": vm.var_mem_max_size,
        "memory": {_type_name(vm, rt): {"var_mem_size": mem.var_mem_size,
                                        "session_size": vm.get_var_mem_size(rt)}
                   for rt, mem in sorted(vm.mem_resources.items())},
        "pools": vm.mem_manager.pools() if vm.mem_manager is not None else {},
        "graphs": [{
            "graph_id": plan.graph_id, "graph": plan.graph, "file": file,
            "variables": [{
                "node": e.node, "graph": e.graph, "name": e.name, "var_key": e.key,
                "memory_type": e.memory_type, "size": e.size, "offset": e.offset,
                "address": e.address, "footprint": e.footprint, "decision": e.decision,
            } for e in plan.entries],
            "batch_variables": dict(plan.batch_names),
            "broadcasts": [{
                "var_name": b.var_name, "broadcast_name": b.broadcast_name, "idx": b.idx,
                "input_offset": b.input_offset, "input_size": b.input_size,
                "output_offset": b.output_offset, "output_size": b.output_size,
            } for b in plan.broadcasts],
        } for file, plan in plans],
    }


def _type_name(vm: VarManager, rt: int) -> str:
    spec = vm.policy.mem_type_by_rt(rt)
    return spec.name if spec else str(rt)


def render_plan(vm: VarManager, plans: list[tuple[str, GraphPlan]], runs: list[dict] | None = None,
                rebuild: list[int] | None = None) -> str:
    lines = [f"session {vm.session_id}: logic base {vm.var_mem_logic_base}, "
             f"var memory max {vm.var_mem_max_size}"]
    head = ("variable", "VarKey", "type", "size", "offset", "address", "footprint", "decision")
    for k, (file, plan) in enumerate(plans):
        lines.append(f"graph {plan.graph_id} '{plan.graph}' ({file}): {len(plan.entries)} variables")
        run = (runs or [])[k] if k < len(runs or []) else {}
        done = [f"{pid} +{r['inserted']} -{r['removed']}" + (f" ~{r['changed']}" if r["changed"] else "")
                for pid, r in run.items() if any(r.values())]
        if done:
            lines.append("  passes: " + ", ".join(done))
        rows = [head] + [(e.name if e.name == e.node else f"{e.name} (node {e.node})", e.key,
                          e.memory_type, str(e.size), str(e.offset), str(e.address), str(e.footprint),
                          e.decision) for e in plan.entries]
        widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
        numeric = {3, 4, 5, 6}
        for r in rows:
            cells = [c.rjust(w) if i in numeric else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))]
            lines.append("  " + "  ".join(cells).rstrip())
        for b in plan.broadcasts:
            lines.append(f"  broadcast {b.broadcast_name} input {b.idx} of '{b.var_name}': offset "
                         f"{b.input_offset}, size {b.input_size}")
    for rt, mem in sorted(vm.mem_resources.items()):
        lines.append(f"{_type_name(vm, rt)}: {mem.var_mem_size} bytes of variable space in use "
                     f"({vm.get_var_mem_size(rt)} session-owned)")
    for name, pool in (vm.mem_manager.pools() if vm.mem_manager is not None else {}).items():
        if pool["used"]:
            lines.append(f"{name} pool: {pool['used']} of {pool['size'] if pool['size'] is not None else 'unbounded'}"
                         " bytes taken")
    if rebuild:
        lines.append("graphs to rebuild (a variable they hold changed format): "
                     + ", ".join(str(g) for g in rebuild))
    return "\n".join(lines)


# ---- addr -------------------------------------------------------------------------
def cmd_addr(args) -> int:
    policy = _policy(args.rules)
    try:
        logic = int(args.logical, 0)
    except ValueError:
        raise InputError(Problem(Loc("LOGICAL_ADDR"), f"'{args.logical}' is not an address",
                                 "write a decimal number or 0x-hex, e.g. 137438953472")) from None
    names = [s.name for s in policy.memory_types]
    if args.memory_type is not None and args.memory_type not in names:
        from engine.core.errors import did_you_mean
        raise InputError(Problem(Loc("--memory-type"), f"unknown memory type '{args.memory_type}'",
                                 did_you_mean(args.memory_type, names, "memory type")))
    pool = VarManagerPool(policy)
    vm = open_session(pool, None, None, {}, args.state)
    if args.external_var:
        vm.set_external_var(*_external_var(args.external_var))
    if args.graph and not args.dump:
        raise InputError(Problem(Loc("--graph"), "--graph loads a compiled graph's weights for --dump",
                                 "add --dump"))
    if args.memory_type is not None:
        mem_type = policy.rt(args.memory_type)
    elif vm.is_var_addr(logic):
        mem_type = vm.get_var_mem_type(logic)
    else:
        mem_type = vm.hbm_rt
    owners = describe_owners(vm, logic)
    ptr = vm.get_var_memory_addr(logic, mem_type, args.device)
    dump = []
    if args.dump and ptr is not None:       # loads --graph first: a bad graph prints nothing
        from engine.cli.varext import dump_lines
        dump = dump_lines(vm, logic, ptr, args, _options(args.option, args.rules))
    print(f"logical {logic} ({_type_name(vm, mem_type)}) in {display_path(args.state)}, session {vm.session_id}")
    for line in owners:
        print("  " + line)
    if ptr is None:
        raise PassFailure("vars addr", f"GetVarMemoryAddr({logic}, {_type_name(vm, mem_type)}) returns "
                          f"nullptr: {_why_null(vm, logic, mem_type)}")
    print(f"physical 0x{ptr:x} (simulated device memory)")
    if dump:
        print("\n".join(dump))
    return 0


def describe_owners(vm: VarManager, logic: int) -> list[str]:
    """The VarKeys whose block holds `logic` (exact start or strictly inside)."""
    res = vm.var_resource
    out = []
    for key, e in sorted(res.var_addr_mgr_map.items(), key=lambda kv: kv[0]):
        inside = e.address <= logic < e.address + max(e.desc.size, 1)
        if inside:
            where = "start" if logic == e.address else f"+{logic - e.address}"
            out.append(f"{key}: {_desc_text(e.desc)}, block at {e.address} ({where})")
    return out or ["no variable holds this address"]


def _desc_text(desc: TensorDesc) -> str:
    return f"{desc.describe()}, {desc.size} bytes"


def _why_null(vm: VarManager, logic: int, mem_type: int) -> str:
    if vm.external_var_addr and mem_type == vm.hbm_rt:
        from engine.varmgr.external import external_var_failure
        return external_var_failure(vm, logic) or "outside the external variable memory"
    res = vm.var_resource
    dmap = res.device_map(0)
    entry = dmap.get(logic) or next((e for e in dmap.values()
                                     if e.logic_addr < logic < e.logic_addr + e.desc.size), None)
    if entry is None:
        return "Logic addr info is not assign (no variable block holds this address)"
    why = check_init_value(entry.desc)
    return why or "device memory allocation failed"


# ---- cache-check --------------------------------------------------------------------
def cmd_cache_check(args) -> int:
    """ModelCache::MatchVariableDesc against a session: every variable of the cached GRAPH
    must have the description the session's VarManager holds now (GetCurVarDesc).

    Note [cache check]: GE compares the descriptors saved beside the cached model with the
    session's current ones; here the cached model is the compiled GRAPH, whose variable
    nodes carry the descriptors it was compiled with. A variable the session does not know,
    or whose description differs (a later graph changed its format, and after one change
    GraphRebuildStateCtrl forbids another, so the cache can never match again), makes the
    cache unusable: exit 1 naming it.
    """
    from engine.core.dumpio import load_model
    from engine.varmgr.nodes import is_ref_node, name_for_var_manager, output_desc
    from engine.varmgr.session import restored_ctrl
    policy = _policy(args.rules)
    pool = VarManagerPool(policy)
    vm = open_session(pool, args.session, None, {}, args.state)
    note_graph(args.graph)
    model = load_model(args.graph)
    note_graph(args.graph, model)
    ctrl = restored_ctrl(vm)
    tracked = policy.op_types.rebuild_tracked
    checked, problems = 0, []
    for node in model.all_nodes():
        if node.type not in tracked or is_ref_node(node, policy):
            continue
        name = name_for_var_manager(node, policy)
        desc = output_desc(node, policy)
        checked += 1
        if not vm.is_var_exist(name):
            problems.append(f"variable '{name}' does not exist in the VarManager of session {vm.session_id}")
            continue
        cur = vm.get_cur_var_desc(name)
        if desc is not None and _same_desc(cur, desc):
            continue
        road = vm.get_trans_road(name) or []
        changed = vm.get_changed_graph_id(name)
        why = f"variable '{name}': the session holds {cur.describe()}"
        if changed is not None:
            why += f" (format changed by graph {changed}" + (
                f", road {' -> '.join(s.node_type for s in road)}" if road else "") + ")"
        why += f", the cached graph has {desc.describe() if desc else 'no output descriptor'}"
        if not ctrl.is_var_permit_to_change_formats(name):
            why += (f"; its format changed {ctrl.change_times[name]} time(s), the limit "
                    f"(max_var_change_times {ctrl.max_change_times}), so it cannot change back")
        problems.append(why)
    file = display_path(args.graph)
    if problems:
        raise PassFailure("vars cache-check", f"{file} cannot be loaded from cache in session "
                          f"{vm.session_id}: " + "; ".join(problems), None)
    print(f"{file}: valid in session {vm.session_id} of {display_path(args.state)} "
          f"({checked} variables, descriptions equal)")
    return 0


def _same_desc(a: TensorDesc, b: TensorDesc) -> bool:
    """GeTensorDesc equality as far as the state keeps it: layout, type, shape and their origins."""
    return (a.same_view(b) and a.origin_format == b.origin_format and a.origin_dims == b.origin_dims)
