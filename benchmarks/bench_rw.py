"""Time load → mem_rw_conflict → save on synthetic training-step graphs.

    python benchmarks/bench_rw.py [--sizes 10000,100000] [--formats pb,txt] [--cache DIR]

Graphs come from benchmarks/gen_graph.py (cached by size). Prints one line per
(size, format) with the seconds of each step and the 100k/10k ratio.
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
from engine.passes.context import RunContext  # noqa: E402
from engine.core.dumpio import load_model, save_model  # noqa: E402
from engine.passes.catalog import load_pack  # noqa: E402
from engine.passes.manager import resolve_passes, run_passes  # noqa: E402



def bench(path: Path, passes: list[str], pack) -> dict:
    t = {}
    t0 = time.perf_counter()
    model = load_model(path)
    t["load"] = time.perf_counter() - t0
    gc.freeze()        # as the CLI does after loading
    ctx = RunContext(pack, model, {})
    t0 = time.perf_counter()
    run_passes(ctx, resolve_passes(pack, passes, {}))
    t["passes"] = time.perf_counter() - t0
    out = path.with_name("out_" + path.name)
    t0 = time.perf_counter()
    save_model(model, out)
    t["save"] = time.perf_counter() - t0
    out.unlink()
    t["total"] = t["load"] + t["passes"] + t["save"]
    t["inserted"] = len(ctx.insertions)
    t["nodes"] = model.node_count()
    return t


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--formats", default="pb,txt")
    ap.add_argument("--passes", default="mem_rw_conflict")
    ap.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "memconflict-bench"))
    args = ap.parse_args(argv)
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    pack = load_pack()
    passes = args.passes.split(",")
    sizes = [int(s) for s in args.sizes.split(",")]
    for fmt in args.formats.split(","):
        totals = {}
        for n in sizes:
            r = bench(graph_file(cache, n, fmt), passes, pack)
            totals[n] = r["total"]
            print(f"{fmt:>3} N={n:>7}: load {r['load']:6.2f}s  passes {r['passes']:6.2f}s  save {r['save']:6.2f}s  "
                  f"total {r['total']:6.2f}s  ({r['inserted']} inserted, {r['nodes']} nodes)", flush=True)
        if len(sizes) >= 2:
            a, b = sizes[0], sizes[-1]
            print(f"{fmt:>3} ratio N={b}/N={a}: {totals[b] / totals[a]:.1f}x (size ratio {b / a:.0f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
