"""Benchmark importing models (issue 15: a 100k-node GraphDef in under 10 s, the ONNX
densenet121 in under 1 s).

    python benchmarks/bench_import.py [--nodes 10000,100000] [--cache DIR] [--onnx FILE]

Each graph is a TF1 training step (`gen_tf.train_step`, 16 nodes per layer), written once as
a binary .pb under the cache folder (default /tmp/memconflict-bench-import); the largest is
also imported once, converted to a ModelDef and wrapped in an offline model (.om,
`gen_om.standard_om`), which is timed too. Then the ONNX model (default: the onnx wheel's
light_densenet121.onnx, when the onnx package is installed) and the .pt2 fixtures. Timed:
detection, parsing, the import to GE's IR and building the graph model
(`engine.core.io.load_graph`), best of 3, wall clock and CPU time (the machine is shared: CPU
time is the one that does not depend on the load). Prints seconds per size and the growth
exponent between the TF sizes.
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

from benchmarks.gen_om import standard_om  # noqa: E402
from benchmarks.gen_tf import train_step  # noqa: E402
from engine.core.io import load_graph  # noqa: E402

NODES_PER_LAYER = 16         # gen_tf.train_step: 16 nodes per layer, 35 in all besides


def timed(path: Path) -> tuple[int, float, float]:
    """(nodes, best wall seconds, best CPU seconds) of load_graph over 3 runs."""
    best, cpu = math.inf, math.inf
    for _ in range(3):
        t, c = time.perf_counter(), time.process_time()
        model, _ = load_graph(str(path))
        best, cpu = min(best, time.perf_counter() - t), min(cpu, time.process_time() - c)
    return sum(1 for _ in model.root.nodes()), best, cpu


def default_onnx() -> str:
    try:
        import onnx
    except ImportError:
        return ""
    f = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / "light_densenet121.onnx"
    return str(f) if f.exists() else ""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", default="10000,100000")
    ap.add_argument("--cache", default="/tmp/memconflict-bench-import")
    ap.add_argument("--onnx", default=None, help="an ONNX model to time (default: the onnx wheel's densenet121)")
    args = ap.parse_args(argv)
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    rows = []
    for n in (int(x) for x in args.nodes.split(",")):
        f = cache / f"train_{n}.pb"
        if not f.exists():
            f.write_bytes(train_step(max(1, n // NODES_PER_LAYER)).SerializeToString())
        count, best, cpu = timed(f)
        rows.append((count, cpu))
        print(f"{f.name}: {count} nodes imported in {best:.2f} s wall, {cpu:.2f} s CPU ({f.stat().st_size / 1e6:.1f} MB)")
    for (n1, t1), (n2, t2) in zip(rows, rows[1:]):
        print(f"growth exponent (CPU) {n1} → {n2}: {math.log(t2 / t1) / math.log(n2 / n1):.2f}")
    om = cache / f"{f.stem}.om"
    if not om.exists():
        from engine.core.dumpio import serialize_model
        om.write_bytes(standard_om(serialize_model(load_graph(str(f))[0])))
    print_row(om, *timed(om))
    onnx = args.onnx if args.onnx is not None else default_onnx()
    if onnx:
        print_row(Path(onnx), *timed(Path(onnx)))
    for pt2 in sorted((ROOT / "tests" / "data" / "torch").glob("*.pt2")):
        print_row(pt2, *timed(pt2))
    return 0


def print_row(path: Path, count: int, best: float, cpu: float) -> None:
    print(f"{path.name}: {count} nodes imported in {best:.3f} s wall, {cpu:.3f} s CPU ({path.stat().st_size / 1e6:.2f} MB)")


if __name__ == "__main__":
    raise SystemExit(main())
