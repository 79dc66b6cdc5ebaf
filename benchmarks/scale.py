"""The default pipeline at production sizes: one table of seconds per stage, peak memory and
how each stage grows with N.

    python benchmarks/scale.py [--sizes 10000,100000,1000000] [--hub SHARE] [--format pb]
                               [--cache DIR] [--option K=V]...

Each size runs in a fresh process (so its peak RSS is its own) on a generated training step
that carries what current GE dumps carry (gen_graph `--dump-attrs`: peer indices, ...),
cached under --cache; `--hub 0.4` adds a NoOp controlling 40 % of the graph. Stages: load
(read + parse + graph model), check, every pass of the pipeline in order (a pass that runs
twice is listed twice, `#2`), save (serialize + write), in CPU seconds of the process (the
machine is shared: wall time counts the neighbours' work too), their total and the wall
time of the whole run (protoc children aside: binary files need none); then the peak RSS of the
process (`ru_maxrss`) and the growth exponent k of each stage between consecutive sizes
(time ∝ N^k: 1.0 is linear), of its CPU time and of its user CPU time alone (the kernel's
part aside). A stage under 0.05 s at both sizes has no exponent (`-`). `walk floor` is the
plainest walk over the graph, no stage: what memory alone costs as N grows (Note [walk floor]).
The output is written to /dev/shm when there is one (`_out_dir`).
`of which system CPU` is the kernel's part of the stages' total and `minor page faults`
the pages the kernel handed the process for it (Note [system time]).
`bare parse` is protobuf's own `ParseFromString` of the file (upb's C parser, the floor of any
reader; timed in a child process, so its memory is not the run's), and `total / bare parse` the pipeline's multiple of it.
`memconflict run` is the command itself on the same file (`run FILE --out OUT.pb`, in a child
process, start-up included): its CPU and wall seconds and its peak RSS. The stages above
are that command's work taken apart; this row checks the command does what they measure.
"""
from __future__ import annotations

import argparse
import gc
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MIN_SECONDS = 0.05      # below this at both sizes, timer noise dominates the exponent


def measure(path: Path, options: dict[str, str]) -> dict:
    """One run of the whole default pipeline, binary in and out, as `memconflict run` does it."""
    from engine.core.dumpio import load_model, save_model
    from engine.core.gcpause import no_gc
    from engine.passes.catalog import load_pack
    from engine.passes.context import RunContext
    from engine.passes.manager import check_graph, resolve_passes, run_passes


    pack = load_pack()
    stages: list[tuple[str, float]] = []
    user: list[float] = []        # each stage's user CPU alone (Note [system time])

    def clock() -> float:
        """CPU seconds (the machine is shared, wall time is noisy); the user part is kept aside."""
        ru = resource.getrusage(resource.RUSAGE_SELF)
        clock.user = ru.ru_utime
        return ru.ru_utime + ru.ru_stime
    clock.user = 0.0

    def stage(name: str, t0: float, u0: float) -> None:
        stages.append((name, clock() - t0))
        user.append(clock.user - u0)
    # the floor: protobuf's own parse of the file's bytes (upb, C), in a child process: a
    # whole parsed ModelDef takes ~6 bytes per byte of the file, more than the lean pipeline's
    # peak, and ru_maxrss would keep it as this process's
    parse = bare_parse(path)
    wall0 = time.perf_counter()
    rss0 = _rss()
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = clock()
    u0 = clock.user
    with no_gc():           # as the CLI loads: the model frozen before the collector is back on
        model = load_model(path)
        gc.freeze()
    stage("load", t0, u0)
    load_rss = _rss() - rss0
    nodes = model.node_count()
    floor = walk_floor(model)
    ctx = RunContext(pack, model, dict(options))
    t0 = clock()
    u0 = clock.user
    check_graph(ctx)
    stage("check", t0, u0)
    seen: dict[str, int] = {}
    began = began_user = 0.0

    def before(_k, _spec) -> None:
        nonlocal began, began_user
        began = clock()
        began_user = clock.user

    def after(_k, spec) -> None:
        seen[spec.id] = seen.get(spec.id, 0) + 1
        stage(spec.id + (f"#{seen[spec.id]}" if seen[spec.id] > 1 else ""), began, began_user)

    with no_gc():           # as the CLI runs its list: in one call, the collector off over all of it
        run_passes(ctx, resolve_passes(pack, None, options), before=before, after=after)
        gc.freeze()         # as the CLI does after the passes
    out = Path(tempfile.mkdtemp(prefix="memconflict-scale-", dir=_out_dir())) / "out.pb"
    t0 = clock()
    u0 = clock.user
    save_model(model, out)
    stage("save", t0, u0)
    wall = time.perf_counter() - wall0
    ru = resource.getrusage(resource.RUSAGE_SELF)
    out.unlink()
    out.parent.rmdir()
    result = {"nodes": nodes, "after": model.node_count(), "inserted": len(ctx.insertions),
              "stages": stages, "user": user, "floor": floor, "parse": parse, "wall": wall, "load_rss": load_rss,
              "system": ru.ru_stime - ru0.ru_stime, "faults": ru.ru_minflt - ru0.ru_minflt,
              "peak_rss": ru.ru_maxrss * 1024}
    # as a batch run does after each graph: the frozen graph is let go before the next size
    # (its node-anchor cycles need the collector), so it is not part of the next one's peak
    del model, ctx
    gc.unfreeze()
    gc.collect()
    return result


def walk_floor(model) -> float:
    """Note [walk floor]: the CPU seconds of the plainest walk a pass can make, every node and
    each input's producer (no work per node), the best of three. Python reaches each object
    through a pointer, and once the graph outgrows the processor's caches each step waits for
    memory: this walk's own growth exponent is the floor under every stage's (on this machine
    it costs ~7 % more per node at 1M than at 100k: k 1.03, where a walk over the node list
    alone has 1.2)."""
    nodes = model.all_nodes()
    best = math.inf
    for _ in range(3):
        t0 = time.process_time()
        k = 0
        for n in nodes:
            for a in n.ins:
                p = a.peer
                if p is not None and p.node is not n:
                    k += 1
        best = min(best, time.process_time() - t0)
    return best


def _out_dir() -> str | None:
    """Where the save writes: a memory file system when there is one (/dev/shm), so the save is
    the serialization, not the disk (a 1 GB write to a VM's disk cost 1.5 s of system time at
    1M nodes, where user time grew exactly as N); else the default temporary folder."""
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None


def _rss() -> int:
    """This process's resident set now, in bytes (Linux)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def bare_parse(path: Path) -> float:
    """CPU seconds of protobuf's ParseFromString of the file, in a child process."""
    code = ("import sys, time; from engine.proto import ge_ir_pb2 as pb; data = open(sys.argv[1], 'rb').read(); "
            "t = time.process_time(); pb.ModelDef().ParseFromString(data); print(time.process_time() - t)")
    res = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, cwd=ROOT, check=True)
    return float(res.stdout)


def cli_run(path: Path, options: list[str]) -> dict:
    """`memconflict run FILE --out OUT.pb` in a child process: its CPU seconds (start-up
    included), wall seconds and peak RSS, as the child itself reads them."""
    code = ("import resource, sys; from engine.cli import main; rc = main(sys.argv[1:]); "
            "u = resource.getrusage(resource.RUSAGE_SELF); "
            "print(rc, u.ru_utime + u.ru_stime, u.ru_maxrss * 1024, file=sys.stderr)")
    folder = Path(tempfile.mkdtemp(prefix="memconflict-scale-"))
    out = folder / "out.pb"
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-c", code, "run", str(path), "--out", str(out), "--quiet"]
                         + [f"--option={o}" for o in options], capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - t0
    out.unlink(missing_ok=True)
    folder.rmdir()
    rc, cpu, peak = res.stderr.strip().splitlines()[-1].split() if res.stderr.strip() else ("?", 0, 0)
    if rc not in ("0", "3"):        # 3: a --fail-on gate held (not given here); anything else failed
        raise RuntimeError(f"memconflict run {path} failed:\n{res.stderr}")
    return {"cpu": float(cpu), "wall": wall, "peak_rss": int(peak)}


def _exponent(n1: int, t1: float, n2: int, t2: float) -> str:
    if max(t1, t2) < MIN_SECONDS or min(t1, t2) <= 0:
        return "-"
    return f"{math.log(t2 / t1) / math.log(n2 / n1):.2f}"


def table(results: list[dict]) -> str:
    sizes = [r["n"] for r in results]
    names = [name for name, _ in results[0]["stages"]]
    pairs = list(zip(sizes, sizes[1:]))
    head = (["stage"] + [f"N={_short(n)}" for n in sizes] + [f"k {_short(a)}→{_short(b)}" for a, b in pairs]
            + [f"k user {_short(a)}→{_short(b)}" for a, b in pairs])
    blank = [""] * len(pairs)

    def ks(ts: list[float]) -> list[str]:
        return [_exponent(a, ta, b, tb) for a, b, ta, tb in zip(sizes, sizes[1:], ts, ts[1:])]
    rows = []
    for i, name in enumerate(names):
        ts = [r["stages"][i][1] for r in results]
        rows.append([name] + [f"{t:.2f}" for t in ts] + ks(ts) + ks([r["user"][i] for r in results]))
    totals = [sum(t for _, t in r["stages"]) for r in results]
    rows.append(["total"] + [f"{t:.2f}" for t in totals] + ks(totals) + ks([sum(r["user"]) for r in results]))
    walls = [r["wall"] for r in results]
    rows.append(["total (wall)"] + [f"{t:.2f}" for t in walls] + ks(walls) + blank)
    # Note [walk floor]: not a stage (not in the total); its exponent is what memory alone costs
    floors = [r["floor"] for r in results]
    rows.append(["walk floor (not a stage)"] + [f"{t:.2f}" for t in floors] + ks(floors) + ks(floors))
    # Note [system time]: the stages' CPU seconds are user plus system time; the system part
    # is mostly the kernel handing the process fresh pages (and writing the output), which
    # on a VM costs more the first time the guest touches memory the host has not backed
    # yet: a 1M run's load took 6.5 s of system time in a fresh VM, 1.6 s after another
    # process had touched 12 GB; these rows tell that apart from the stages' own work
    system = [r["system"] for r in results]
    rows.append(["of which system CPU"] + [f"{t:.2f}" for t in system] +
                [_exponent(a, ta, b, tb) for a, b, ta, tb in zip(sizes, sizes[1:], system, system[1:])])
    rows.append(["minor page faults"] + [str(r["faults"]) for r in results] + [""] * (len(sizes) - 1))
    parses = [r["parse"] for r in results]
    rows.append(["bare parse"] + [f"{t:.2f}" for t in parses] +
                [_exponent(a, ta, b, tb) for a, b, ta, tb in zip(sizes, sizes[1:], parses, parses[1:])])
    rows.append(["total / bare parse"] + [f"{t / p:.1f}x" if p > 0 else "-" for t, p in zip(totals, parses)]
                + [""] * (len(sizes) - 1))
    rss = [r["peak_rss"] for r in results]
    rows.append(["peak RSS (MiB)"] + [f"{m / 2**20:.0f}" for m in rss] +
                [_exponent(a, ma, b, mb) for a, b, ma, mb in zip(sizes, sizes[1:], rss, rss[1:])])
    rows.append(["file (MiB)"] + [f"{r['file_size'] / 2**20:.0f}" for r in results] + [""] * (len(sizes) - 1))
    # deliverable 2's measure: what loading adds to the resident set beyond the file's size, a node
    rows.append(["RSS added by the load (MiB)"] + [f"{r['load_rss'] / 2**20:.0f}" for r in results]
                + [""] * (len(sizes) - 1))
    rows.append(["load RSS beyond the file (B/node)"] + [f"{(r['load_rss'] - r['file_size']) / r['nodes']:.0f}"
                                                      for r in results] + [""] * (len(sizes) - 1))
    rows.append(["nodes after"] + [str(r["after"]) for r in results] + [""] * (len(sizes) - 1))
    for label, key, fmt in (("memconflict run (CPU)", "cpu", "{:.2f}"), ("memconflict run (wall)", "wall", "{:.2f}")):
        ts = [r["cli"][key] for r in results]
        rows.append([label] + [fmt.format(t) for t in ts] +
                    [_exponent(a, ta, b, tb) for a, b, ta, tb in zip(sizes, sizes[1:], ts, ts[1:])])
    peaks = [r["cli"]["peak_rss"] for r in results]
    rows.append(["memconflict run peak RSS (MiB)"] + [f"{m / 2**20:.0f}" for m in peaks] +
                [_exponent(a, ma, b, mb) for a, b, ma, mb in zip(sizes, sizes[1:], peaks, peaks[1:])])
    rows = [row + [""] * (len(head) - len(row)) for row in rows]
    widths = [max(len(str(row[c])) for row in [head] + rows) for c in range(len(head))]
    lines = ["  ".join(str(x).ljust(w) if c == 0 else str(x).rjust(w) for c, (x, w) in enumerate(zip(row, widths)))
             for row in [head] + rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _short(n: int) -> str:
    return f"{n // 1_000_000}M" if n % 1_000_000 == 0 else f"{n // 1000}k" if n % 1000 == 0 else str(n)


def _graph(cache: Path, n: int, fmt: str, hub: float) -> Path:
    """gen_graph's cached file, generated in a child process: a 1M-node ModelDef takes
    gigabytes, which this process would keep while the measured child runs."""
    code = ("import sys; from pathlib import Path; from benchmarks.gen_graph import cached_graph; "
            "print(cached_graph(Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3], dump_attrs=True, "
            "hub=float(sys.argv[4])))")
    res = subprocess.run([sys.executable, "-c", code, str(cache), str(n), fmt, str(hub)],
                         capture_output=True, text=True, cwd=ROOT, check=True)
    return Path(res.stdout.strip())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--hub", type=float, default=0.0, metavar="SHARE")
    ap.add_argument("--format", default="pb", choices=("pb", "txt"))
    ap.add_argument("--option", action="append", metavar="KEY=VALUE")
    ap.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "memconflict-bench"))
    ap.add_argument("--one", metavar="FILE", help=argparse.SUPPRESS)     # the child: measure one file
    args = ap.parse_args(argv)
    from engine.cli.common import parse_options
    options = parse_options(args.option)
    if args.one:
        print(json.dumps(measure(Path(args.one), options)))
        return 0
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    results = []
    for n in (int(s) for s in args.sizes.split(",")):
        path = _graph(cache, n, args.format, args.hub)
        cmd = [sys.executable, __file__, "--one", str(path)] + [f"--option={o}" for o in args.option or ()]
        res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
        if res.returncode != 0:
            sys.stderr.write(res.stderr)
            return 1
        r = json.loads(res.stdout.strip().splitlines()[-1])
        r["n"], r["file_size"] = n, os.path.getsize(path)
        r["cli"] = cli_run(path, args.option or [])
        results.append(r)
        print(f"N={n}: {sum(t for _, t in r['stages']):.2f} s CPU, {r['wall']:.2f} s wall, "
              f"{r['peak_rss'] / 2**20:.0f} MiB; memconflict run {r['cli']['wall']:.2f} s wall, "
              f"{r['cli']['peak_rss'] / 2**20:.0f} MiB", file=sys.stderr, flush=True)
    print(f"default pipeline, {args.format} in and out, gen_graph --dump-attrs"
          + (f" --hub {args.hub}" if args.hub else "") + "; CPU seconds per stage")
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
