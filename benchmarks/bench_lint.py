"""Time the graph_lint pass (GE GraphLint::Verify) on synthetic training-step graphs.

    python benchmarks/bench_lint.py [--sizes 10000,100000] [--seed S]

Graphs come from benchmarks/gen_graph.make_model, built in memory (no dump file). Per
size it prints the seconds of the pass as the pipeline runs it (it stops at the first
conflict; this first run also parses every node's port names) and of a full scan that
checks every shared output (the worst case, a graph with no conflict), with the number
of conflicting outputs the scan finds.
"""
from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.gen_graph import make_model  # noqa: E402
from engine.passes.algorithms.lint import GraphLint  # noqa: E402
from engine.passes.context import RunContext  # noqa: E402
from engine.core.dumpio import build_model  # noqa: E402
from engine.passes.catalog import load_pack  # noqa: E402
from engine.passes.manager import resolve_passes, run_passes  # noqa: E402


def bench(n: int, seed: int, pack) -> dict:
    t = {}
    t0 = time.perf_counter()
    model = build_model(make_model(n, seed=seed))
    t["build"] = time.perf_counter() - t0
    gc.freeze()          # as the CLI does after loading
    ctx = RunContext(pack, model, {})
    t0 = time.perf_counter()
    run_passes(ctx, resolve_passes(pack, ["graph_lint"], {}))
    t["pass"] = time.perf_counter() - t0
    t["diagnostics"] = [d.code for d in ctx.diagnostics]
    lint = GraphLint(ctx, pack.configs["graph_lint"], pack.passes["graph_lint"])
    t0 = time.perf_counter()
    t["conflicts"] = sum(1 for _ in lint.conflicts(model.root))
    t["scan"] = time.perf_counter() - t0
    t["nodes"] = model.node_count()
    t["pairs"] = sum(len(r.linked) for r in lint.reach.values())
    return t


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    pack = load_pack()
    for n in (int(s) for s in args.sizes.split(",")):
        r = bench(n, args.seed, pack)
        print(f"N={n:>7}: graph_lint {r['pass']:5.2f}s (diagnostics {r['diagnostics']})  "
              f"full scan {r['scan']:5.2f}s ({r['conflicts']} conflicting outputs, {r['pairs']} ordered pairs)  "
              f"[build {r['build']:.2f}s, {r['nodes']} nodes]", flush=True)
        gc.unfreeze()
    return 0


if __name__ == "__main__":
    sys.exit(main())
