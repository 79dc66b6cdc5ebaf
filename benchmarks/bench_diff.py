"""Benchmark `memconflict diff` over a corpus: both packs' pipelines on every graph.

    python benchmarks/bench_diff.py [--graphs 100] [--nodes 10000] [--jobs 1,2]
                                    [--old rules/ge] [--new rules/ge-doc] [--cache DIR]

Graphs come from `gen_graph.make_model(nodes, seed)` with seeds 0..graphs-1, written once as
binary dumps under the cache folder (default /tmp/memconflict-bench-diff) and reused. For each
--jobs value the whole diff (pack diff, impact runs, linking, document) is timed; the JSON
documents must be byte-identical across job counts. Prints seconds per job count and the speed-up.
"""
from __future__ import annotations

import argparse
import hashlib
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.gen_graph import make_model, write_model  # noqa: E402
from engine.cli.diff import compute  # noqa: E402
from engine.diff.render import document_json  # noqa: E402
from engine.diff.source import load_source, open_source  # noqa: E402


def corpus(n_graphs: int, nodes: int, cache: Path) -> tuple[list[str], float]:
    cache.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    paths = []
    for seed in range(n_graphs):
        p = cache / f"train_step_{nodes}_s{seed}.pb"
        if not p.is_file():
            write_model(make_model(nodes, seed), p)
        paths.append(str(p))
    return paths, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--graphs", type=int, default=100)
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--jobs", default="1,2", help="comma-separated job counts to time")
    ap.add_argument("--old", default=str(ROOT / "rules" / "ge"))
    ap.add_argument("--new", default=str(ROOT / "rules" / "ge-doc"))
    ap.add_argument("--cache", default="/tmp/memconflict-bench-diff")
    args = ap.parse_args(argv)
    graphs, gen = corpus(args.graphs, args.nodes, Path(args.cache))
    print(f"corpus: {len(graphs)} graphs of {args.nodes} nodes in {args.cache} (generated/checked in {gen:.1f} s)")
    old, new = open_source(args.old), open_source(args.new)
    try:
        load_source(old)
        load_source(new)
        return _time(args, graphs, old, new)
    finally:
        old.close()
        new.close()


def _time(args, graphs: list[str], old, new) -> int:
    times: dict[int, float] = {}
    first = None          # the JSON's digest (a corpus document can be hundreds of MB)
    for jobs in [int(j) for j in args.jobs.split(",")]:
        t0 = time.perf_counter()
        doc = compute(old, new, graphs, {}, None, jobs)
        data = document_json(doc)
        times[jobs] = time.perf_counter() - t0
        s = doc["impact"]["summary"]
        print(f"--jobs {jobs}: {times[jobs]:.1f} s ({times[jobs] / len(graphs):.2f} s per graph); "
              f"isolation +{s['added']} −{s['removed']} ~{s['changed']}, diagnostics +{s['diagnostics_gained']}"
              f"/−{s['diagnostics_lost']}, JSON {len(data) / 1e6:.1f} MB", flush=True)
        digest = hashlib.sha256(data).hexdigest()
        del doc, data
        if first is None:
            first = digest
        elif digest != first:
            print("ERROR: the JSON differs between job counts")
            return 1
    if len(times) > 1:
        base = min(times)
        for jobs, t in sorted(times.items()):
            if jobs != base:
                print(f"speed-up --jobs {jobs} vs --jobs {base}: {times[base] / t:.2f}x")
    print("JSON byte-identical across job counts" if len(times) > 1 else "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
