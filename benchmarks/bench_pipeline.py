"""Time the whole default pipeline — load, every pass, save — on synthetic graphs.

    python benchmarks/bench_pipeline.py [--sizes 10000,100000] [--format pb] [--option K=V]...
                                        [--passes ID,...] [--cache DIR]

Graphs come from benchmarks/gen_graph.py (cached by size). Prints, per size, the
seconds of loading, of each pass run (a pass that runs twice is listed twice) and
of saving, the nodes each pass inserted and removed, and the ratio of the largest
to the smallest size's end-to-end time.
"""
from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.gen_graph import cached_graph as graph_file  # noqa: E402
from engine.cli.common import parse_options  # noqa: E402
from engine.passes.context import RunContext  # noqa: E402
from engine.core.dumpio import load_model, save_model  # noqa: E402
from engine.passes.catalog import load_pack  # noqa: E402
from engine.passes.manager import check_graph, resolve_passes, run_passes  # noqa: E402



def bench(path: Path, pack, passes: list[str] | None, options: dict[str, str]) -> dict:
    t: dict = {}
    t0 = time.perf_counter()
    model = load_model(path)
    t["load"] = time.perf_counter() - t0
    gc.freeze()        # as the CLI does after loading
    ctx = RunContext(pack, model, dict(options))
    t0 = time.perf_counter()
    check_graph(ctx)
    t["check"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    run_passes(ctx, resolve_passes(pack, passes, options))
    t["passes"] = time.perf_counter() - t0
    out = path.with_name("out_" + path.name)
    t0 = time.perf_counter()
    save_model(model, out)
    t["save"] = time.perf_counter() - t0
    out.unlink()
    gc.unfreeze()
    t["total"] = t["load"] + t["check"] + t["passes"] + t["save"]
    t["runs"] = [(r.pass_id, r.seconds, r.inserted, r.removed) for r in ctx.pass_runs]
    t["nodes"] = model.node_count()
    return t


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--format", default="pb")
    ap.add_argument("--passes", default=None, help="comma-separated pass ids (default: the pack's pipeline)")
    ap.add_argument("--option", action="append", metavar="KEY=VALUE")
    ap.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "memconflict-bench"))
    args = ap.parse_args(argv)
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    pack = load_pack()
    options = parse_options(args.option)
    passes = args.passes.split(",") if args.passes else None
    sizes = [int(s) for s in args.sizes.split(",")]
    totals = {}
    for n in sizes:
        r = bench(graph_file(cache, n, args.format), pack, passes, options)
        totals[n] = r["total"]
        print(f"N={n:>7} ({r['nodes']} nodes after): load {r['load']:6.2f}s  check {r['check']:5.2f}s  "
              f"passes {r['passes']:6.2f}s  save {r['save']:6.2f}s  total {r['total']:6.2f}s", flush=True)
        for pid, sec, ins, rem in r["runs"]:
            print(f"    {pid:<24} {sec:7.3f}s  +{ins:<6} -{rem}")
    if len(sizes) >= 2:
        a, b = sizes[0], sizes[-1]
        print(f"ratio N={b}/N={a}: {totals[b] / totals[a]:.1f}x (size ratio {b / a:.0f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
