"""Benchmark: `memconflict runtime memtrace` on N ops (target: 10^6 ops under 10 s).

    python benchmarks/bench_memtrace.py [N ...]        # default: 100000 1000000

The trace looks like a multi-stream execution: 4 streams; each round mallocs a tensor on a
stream, hands it to the next stream (NewAccessStream), frees it on both, sends the recycling
events of the round from every stream to the next and waits for them there (local recycles
becoming borrow / birth recycles), with the L1 capacity small enough that pools shrink and
borrowed blocks are lent out again; every 1,000 rounds the LastWaitEvents kernel runs. Timed
apart: reading the JSON trace (with its checks), simulating it, and encoding the JSON result as
the command does (engine/cli/runtime_mem.py) with the state once at the end (`--state final`;
the per-step state of 10^6 ops is gigabytes).
One size for every tensor: lending a borrowed block to a smaller request leaves an empty set in
GE's BorrowAllocator (Note [erase by request] in engine/runtime/msalloc.py), whose next use is
undefined behaviour in GE; the simulator reports that as a failed step, and the benchmark keeps
to the defined path.
"""
from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from engine.cli.runtime_mem import _dump  # noqa: E402  (the command's own writer)
from engine.runtime.memtrace import simulate  # noqa: E402
from engine.pack.runtime_memory import default_rules  # noqa: E402
from engine.core.gcpause import no_gc  # noqa: E402
from engine.runtime.tracefile import load_trace  # noqa: E402

STREAMS = 4


def make_trace(n_ops: int) -> dict:
    events = [{"src": s, "dst": (s + 1) % STREAMS} for s in range(STREAMS)]
    ops: list[dict] = []
    r = 0
    while len(ops) < n_ops:
        s, d = r % STREAMS, (r + 1) % STREAMS
        name = f"t{r % 64}"
        size = 4096
        ops.append({"malloc": {"stream": s, "size": size, "as": name}})
        ops.append({"new_access": {"block": name, "src": s, "dst": d}})
        ops.append({"free": {"block": name, "stream": s}})
        ops.append({"free": {"block": name, "stream": d}})
        ops.append({"send_events": {"allocator": s, "ids": [s]}})
        ops.append({"wait_events": {"allocator": d, "ids": [s]}})
        if r % 1000 == 999:
            ops.append({"last_wait_events": {"ids": []}})
        r += 1
    return {"streams": STREAMS, "l1": {"capacity": 64 * 1024}, "events": events, "ops": ops[:n_ops]}


def bench(n: int) -> dict:
    trace = make_trace(n)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        path.write_text(json.dumps(trace))
        rules = default_rules()
        with no_gc():          # as `runtime memtrace` runs the three (engine/cli/runtime_mem.py)
            c0, t0 = time.process_time(), time.perf_counter()
            loaded = load_trace(str(path), rules)
            t1 = time.perf_counter()
            result = simulate(loaded, rules, "final")
            t2 = time.perf_counter()
            text = _dump(result)
            t3, c3 = time.perf_counter(), time.process_time()
    kinds: dict[str, int] = {}
    for step in result["steps"]:
        for e in step["events"]:
            k = e.get("mode", e["kind"])
            kinds[k] = kinds.get(k, 0) + 1
    return {"ops": n, "read_s": t1 - t0, "simulate_s": t2 - t1, "write_s": t3 - t2, "total_s": t3 - t0, "cpu_s": c3 - c0,
            "failed_steps": sum(not s["ok"] for s in result["steps"]), "events": kinds, "json_mb": len(text) / 1e6}


def main(argv: list[str]) -> int:
    sizes = [int(a) for a in argv] or [100_000, 1_000_000]
    for n in sizes:
        r = bench(n)
        print(f"{r['ops']:>9} ops: read {r['read_s']:.2f} s, simulate {r['simulate_s']:.2f} s, "
              f"write {r['write_s']:.2f} s ({r['json_mb']:.0f} MB), total {r['total_s']:.2f} s (CPU {r['cpu_s']:.2f} s); "
              f"failed steps {r['failed_steps']}; events {r['events']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
