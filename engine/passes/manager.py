"""Running passes with GE's PassManager semantics.

A `graph`-scope pass runs on the root graph and then on each subgraph of
`GetAllSubgraphs()` (taken after the root run); a `root`-scope pass runs once on
the root (it walks all nodes itself). Without `--passes`, the pack's pipeline
runs in order, each step gated by its DSL `gate` over the options.
"""
from __future__ import annotations

import time
from typing import Callable

from engine.passes.context import Diagnostic, PassRun, RunContext
from engine.dsl.compiler import Compiler
from engine.core.errors import Collector, InputError, Loc, PassFailure, Problem, did_you_mean
from engine.core.graph import Model
from engine.pack.model import Pack, PassSpec
from engine.dsl.library import bound_functions
from engine.core.surgery import find_cycle
from engine.core.toposort import MODES, SortPolicy
from engine.passes.algorithms.rewrite import node_types_needed
from engine.core.gcpause import no_gc
from engine.core.lean import VERIFY_CACHES, check_shared


def resolve_passes(pack: Pack, ids: list[str] | None, options: dict[str, str]) -> list[PassSpec]:
    """The passes to run: the ids given (unknown ones are input errors) or the gated pipeline."""
    if ids is not None:
        problems = []
        for pid in ids:
            if pid not in pack.passes:
                problems.append(Problem(Loc("--passes"), f"unknown pass id '{pid}'",
                                        did_you_mean(pid, pack.passes, "pass ids of this pack")))
        if problems:
            raise InputError(problems)
        return [pack.passes[p] for p in ids]
    ctx = RunContext(pack, Model(None), options)
    comp = Compiler(pack.scope((), functions=bound_functions(ctx)), Collector())
    out = []
    for step in pack.pipeline:
        if step.gate is None or comp.function(step.gate, ())():
            out.append(pack.passes[step.pass_id])
    return out


def gate_verdicts(pack: Pack, options: dict[str, str], ids: list[str] | None):
    """The pipeline steps that do not run, as (pass id, why, Cite of the gate or None)."""
    from engine.passes.probe import expr_cite
    if ids is not None:
        return [(s.pass_id, "not in --passes", None) for s in pack.pipeline if s.pass_id not in ids]
    ctx = RunContext(pack, Model(None), options)
    comp = Compiler(pack.scope((), functions=bound_functions(ctx)), Collector())
    return [(s.pass_id, f"its gate `{s.gate}` is false with these options", expr_cite(s.gate, f"pipeline[{s.pass_id}].gate"))
            for s in pack.pipeline if s.gate is not None and not comp.function(s.gate, ())()]


def install_policies(ctx: RunContext) -> None:
    """The run's graph-wide predicates on its model, once per context: the loop back-edge
    sources (surgery.loop_back_edge_from) and the topological sort's policy (surgery.
    topological_sort, from the run's options: engine/core/toposort.py)."""
    model = ctx.model
    if model.policies_from is ctx:
        return
    pack = ctx.pack
    spec = pack.surgery
    functions = bound_functions(ctx)
    node_comp = Compiler(pack.scope(("node",), functions=functions), Collector())
    loop_edge = loop_types = None
    if spec is not None and spec.loop_back_edge_from is not None:
        loop_edge = node_comp.function(spec.loop_back_edge_from, ("node",))
        loop_types = node_types_needed(spec.loop_back_edge_from, pack.class_sets())
    model.loop_back_source = loop_edge
    model.isolate_noop = spec.isolate_noop if spec is not None else None
    model.sort_policy = _sort_policy(ctx, spec.topological_sort if spec is not None else None,
                                     node_comp, functions, loop_edge, loop_types)
    model.policies_from = ctx


def _sort_policy(ctx: RunContext, sort, node_comp, functions, loop_edge, loop_types) -> SortPolicy:
    size = _output_sizes()
    if sort is None:
        return SortPolicy(loop_back=loop_edge, loop_types=loop_types, output_size=size)
    comp = Compiler(ctx.pack.scope((), functions=functions), Collector())
    mode = comp.function(sort.mode, ())()
    if mode not in MODES:
        raise InputError(Problem(sort.loc, f"surgery.topological_sort `mode` gives {mode!r} with these options",
                                 f"it must give one of {', '.join(MODES)}"))
    memory = bool(comp.function(sort.memory_priority, ())()) if sort.memory_priority is not None else False
    tests = {}
    for key in ("inputs_first", "long_lived"):
        e = getattr(sort, key)
        if e is not None:
            f = node_comp.function(e, ("node",))
            tests[key] = lambda n, f=f: bool(f(n))
    return SortPolicy(mode, memory, loop_back=loop_edge, loop_types=loop_types, output_size=size, **tests)


def _output_sizes():
    """GetNodeOutputRealSize's sum: each output's CalcTensorMemSize, a failing one as 0 (a
    lean node's descriptors read once per distinct encoding: Note [descriptors by bytes])."""
    from engine.varmgr.getypes import calc_tensor_mem_size
    from engine.varmgr.nodes import desc_at

    def size(node) -> int:
        total = 0
        for i in range(node.desc_count(outputs=True)):
            td = desc_at(node, i, "")
            total += calc_tensor_mem_size(td.dims, td.format, td.dtype) or 0
        return total
    return size


def check_graph(ctx: RunContext) -> None:
    """Reject graphs GE could not have produced: data/control cycles outside loops."""
    install_policies(ctx)
    loop_edge = ctx.model.loop_back_source
    problems = []
    with no_gc():       # Note [gc]: the cycle search keeps a list per node; collections over them grew as N^1.4
        cycles = [(g, find_cycle(g, (lambda a, b: loop_edge(a)) if loop_edge else (lambda a, b: False)))
                  for g in ctx.model.graph_order]
    for g, cycle in cycles:
        if cycle:
            names = ", ".join(n.name for n in cycle[:6]) + (" ..." if len(cycle) > 6 else "")
            problems.append(Problem(Loc(ctx.model.source), f"graph '{g.name}' has a cycle outside loops through: {names}",
                                    "only loop back edges (see surgery.loop_back_edge_from) may close a cycle"))
    if problems:
        raise InputError(problems)


def run_passes(ctx: RunContext, passes: list[PassSpec], before: Callable[[int, PassSpec], None] | None = None,
               after: Callable[[int, PassSpec], None] | None = None) -> None:
    """Run `passes` in order on ctx's model; `before(k, spec)` / `after(k, spec)`, when
    given, are called around the k-th (from 1), e.g. for a progress line or a timing.

    Note [handed-on symbol tables]: a pass may leave the symbol table of a graph for a later
    pass of this call (RunContext.leave_symbols), which takes it instead of building the same
    table again (the in-place pass takes the layout pass's: ~5 % of a run). A table is only
    left by a pass that edited nothing after building it, and it goes after any later pass
    that does not vouch it edited nothing (a rewrite pass whose actions, if any, were sorts
    that left the order as it was: Rewriter.changed); the tables also go when this call
    returns, as code between two calls may edit the model. With MEMCONFLICT_VERIFY_CACHES=1
    a taker builds the table anew and checks the two are the same."""
    # Note [gc]: passes allocate much and free little. The collector stays off over the
    # whole list, not pass by pass: back on between passes, each first collection walked
    # what the pass before had made (10 collections, 0.33 s at 100k nodes)
    install_policies(ctx)
    try:
        with no_gc():
            _run_each(ctx, passes, before, after)
    finally:
        ctx.symbol_tables = {}


def _run_each(ctx: RunContext, passes: list[PassSpec], before, after) -> None:
    for k, spec in enumerate(passes, 1):
        if before is not None:
            before(k, spec)
        ctx.pass_serial += 1
        ctx.graph_kept = None
        algo = ctx.pack.algorithms[spec.algorithm]
        cfg = ctx.pack.configs[algo.section]
        ctx.current_pass = spec.id
        graphs = [ctx.model.root]
        done_before = len(ctx.insertions), len(ctx.removals)
        t0 = time.perf_counter()
        status, message = "ok", ""
        try:
            algo.run(ctx, ctx.model.root, cfg, spec)
            if spec.scope == "graph":
                graphs += ctx.model.all_subgraphs()
                for g in graphs[1:]:
                    algo.run(ctx, g, cfg, spec)
        except PassFailure as exc:
            if spec.on_failure == "fail":
                exc.context = ctx          # what the run had done (run --sarif records the failure)
                raise
            status, message = "warned", str(exc)
            ctx.graph_kept = False     # whatever it vouched before it failed
            ctx.diagnostics.append(Diagnostic("PASS_FAILED", "warning", str(exc), spec.id,
                                              {"node": exc.node} if exc.node else {}))
        ctx.passed()
        ctx.pass_runs.append(PassRun(spec.id, ctx.model.root.name, time.perf_counter() - t0,
                                     len(ctx.insertions) - done_before[0], len(ctx.removals) - done_before[1],
                                     status, message))
        if VERIFY_CACHES:
            # a pass that wrote into a lean node's shared decodings is named here, whether
            # or not the run saves (the save checks again)
            try:
                check_shared()
            except AssertionError as exc:
                raise AssertionError(f"after pass {spec.id}: {exc}") from None
        if after is not None:
            after(k, spec)
