"""Start-up: wall and CPU time of `memconflict run` on the shipped example, as a user
calls it (a new process each time), with the compiled-pack cache warm and cold.

    python benchmarks/bench_start.py [--repeat 7] [--root CHECKOUT] [--graph G]

`--root` times another checkout (e.g. an older commit in a git worktree) with this
interpreter, for a before/after comparison; its own `engine` is imported (PYTHONPATH).
Prints min and median wall time and CPU time (user + sys, children included) for:
`cold` (MEMCONFLICT_CACHE=off) and `warm` (a cache folder filled by one run first).
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def one(root: Path, graph: Path, out: Path, env: dict) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "engine.cli", "run", str(graph), "--out", str(out / "g.pbtxt"),
                          "--report-json", str(out / "r.json"), "--report-html", str(out / "r.html"), "--quiet"],
                         cwd=root, env=env, capture_output=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if res.returncode != 0:
        raise SystemExit(f"run failed ({res.returncode}): {res.stderr.decode()[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--root", type=Path, default=ROOT, help="the checkout to time (default: this one)")
    ap.add_argument("--graph", type=Path, default=None, help="default: ROOT/examples/train_step.pbtxt")
    a = ap.parse_args()
    root = a.root.resolve()
    graph = (a.graph or root / "examples" / "train_step.pbtxt").resolve()
    # as a user's shell has it: bytecode is cached (this sandbox sets PYTHONDONTWRITEBYTECODE,
    # which would recompile every module on every start)
    base = {k: v for k, v in os.environ.items() if not k.startswith("MEMCONFLICT_") and k != "PYTHONDONTWRITEBYTECODE"}
    base["PYTHONPATH"] = str(root)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        envs = {"cold": {**base, "MEMCONFLICT_CACHE": "off"},
                "warm": {**base, "MEMCONFLICT_CACHE_DIR": str(out / "cache")}}
        one(root, graph, out, envs["warm"])           # fills the cache (and the OS file cache)
        print(f"memconflict run {graph.name} (--out, --report-json, --report-html) from {root}, {a.repeat} runs each")
        print(f"{'':6} {'wall min':>9} {'wall med':>9} {'cpu min':>9} {'cpu med':>9}")
        for name, env in envs.items():
            walls, cpus = zip(*(one(root, graph, out, env) for _ in range(a.repeat)))
            print(f"{name:6} {min(walls):8.2f}s {statistics.median(walls):8.2f}s "
                  f"{min(cpus):8.2f}s {statistics.median(cpus):8.2f}s")


if __name__ == "__main__":
    main()
