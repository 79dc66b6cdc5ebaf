"""Benchmark importing a TensorFlow GraphDef (issue 15: 100k nodes in under 10 s).

    python benchmarks/bench_import.py [--nodes 10000,100000] [--cache DIR]

Each graph is a TF1 training step (`gen_tf.train_step`, 16 nodes per layer), written once as
a binary .pb under the cache folder (default /tmp/memconflict-bench-import). Timed: detection,
parsing, the import to GE's IR and building the graph model (`engine.core.io.load_graph`),
best of 3, wall clock and CPU time (the machine is shared: CPU time is the one
that does not depend on the load). Prints seconds per size and the growth exponent between sizes.
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.gen_tf import train_step  # noqa: E402
from engine.core.io import load_graph  # noqa: E402

NODES_PER_LAYER = 16         # gen_tf.train_step: 16 nodes per layer, 35 in all besides


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", default="10000,100000")
    ap.add_argument("--cache", default="/tmp/memconflict-bench-import")
    args = ap.parse_args(argv)
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    rows = []
    for n in (int(x) for x in args.nodes.split(",")):
        f = cache / f"train_{n}.pb"
        if not f.exists():
            f.write_bytes(train_step(max(1, n // NODES_PER_LAYER)).SerializeToString())
        best, cpu = math.inf, math.inf
        for _ in range(3):
            t, c = time.perf_counter(), time.process_time()
            model, _ = load_graph(str(f))
            best, cpu = min(best, time.perf_counter() - t), min(cpu, time.process_time() - c)
        count = sum(1 for _ in model.root.nodes())
        rows.append((count, cpu))
        print(f"{f.name}: {count} nodes imported in {best:.2f} s wall, {cpu:.2f} s CPU ({f.stat().st_size / 1e6:.1f} MB)")
    for (n1, t1), (n2, t2) in zip(rows, rows[1:]):
        print(f"growth exponent (CPU) {n1} → {n2}: {math.log(t2 / t1) / math.log(n2 / n1):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
