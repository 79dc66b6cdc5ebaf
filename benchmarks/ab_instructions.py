"""Two checkouts of memconflict against each other by the instructions they execute.

    python benchmarks/ab_instructions.py OLD_TREE NEW_TREE [--size 10000] [--graph FILE]

On this VM the clock drifts by a quarter within the hour, so a 5 % change needs many
alternating timed rounds (ab_scale.py) and can still come out reversed. The number of
instructions a run executes does not drift: the same tree on the same graph gives the same
count to the instruction. Each tree runs the default pipeline in one process, the steps
scale.py's measure times (load, check, the pass list in one run_passes call, save), under
valgrind's cachegrind with only instructions counted (`--cache-sim=no`), in three runs:
start-up alone (imports and the pack), then with the load, then the whole pipeline; the
differences are the load and the rest. PYTHONHASHSEED=0 fixes the dict layouts, so the counts
repeat exactly, and both trees' modules are compiled first (a run that compiles its imports
counts the compiler; PYTHONDONTWRITEBYTECODE would make every run do so).

Instructions miss what memory costs (cache misses, page faults, the system's share): they rank
changes to Python-level work, which is most of memconflict's; the clock (scale.py) is still
the measure of a run. A 10k graph takes ~25 s a run under cachegrind (~30x the run itself).
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

STEPS = ("start", "load", "all")
# the child: every module imported and the pack loaded whatever the step, so the steps'
# start-ups are the same and the differences are the work alone
CHILD = """
import gc, sys
from pathlib import Path
from engine.core.dumpio import load_model, save_model
from engine.core.gcpause import no_gc
from engine.passes.catalog import load_pack
from engine.passes.context import RunContext
from engine.passes.manager import check_graph, resolve_passes, run_passes
step, graph, out = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
pack = load_pack()
if step != "start":
    with no_gc():
        model = load_model(graph)
        gc.freeze()
    if step == "all":
        ctx = RunContext(pack, model, {})
        check_graph(ctx)
        with no_gc():
            run_passes(ctx, resolve_passes(pack, None, {}))
            gc.freeze()
        save_model(model, out)
"""
_REFS = re.compile(r"I\s+refs:\s+([\d,]+)")


def parse_refs(stderr: str) -> int:
    """The instruction count in cachegrind's summary ("==PID== I   refs:   7,720,019,607")."""
    m = _REFS.search(stderr)
    if m is None:
        raise RuntimeError(f"no instruction count in valgrind's output:\n{stderr[-2000:]}")
    return int(m.group(1).replace(",", ""))


def count(tree: str, step: str, graph: Path, out: Path) -> int:
    """Instructions of one child run of `step` in `tree`."""
    env = dict(os.environ, PYTHONPATH=str(Path(tree).resolve()), PYTHONHASHSEED="0")
    res = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
                          sys.executable, "-c", CHILD, step, str(graph), str(out)],
                         cwd=tree, env=env, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"the {step} run in {tree} failed:\n{res.stderr[-2000:]}")
    return parse_refs(res.stderr)


def compile_tree(tree: str) -> None:
    """Byte-compile the tree's engine, so no counted run compiles it."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(Path(tree) / "engine")],
                   check=True, stdout=subprocess.DEVNULL)


def table(counts: dict[str, dict[str, int]], old: str, new: str) -> list[str]:
    """The parts of each tree's count in G instructions, with the change new against old."""
    def parts(c: dict[str, int]) -> dict[str, int]:
        return {"start-up": c["start"], "load": c["load"] - c["start"], "passes + save": c["all"] - c["load"],
                "total after start-up": c["all"] - c["start"]}
    a, b = parts(counts[old]), parts(counts[new])
    lines = [f"{'part':22s} {'old':>9s} {'new':>9s}  (G instructions)"]
    for key in a:
        change = f"{(b[key] - a[key]) / a[key] * 100:+.1f}%" if a[key] else ""
        lines.append(f"{key:22s} {a[key] / 1e9:9.3f} {b[key] / 1e9:9.3f}  {change}")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--size", type=int, default=10000, help="gen_graph's training step of this many nodes")
    ap.add_argument("--graph", help="this graph instead of a generated one")
    ap.add_argument("--cache", default="/tmp/memconflict-bench")
    args = ap.parse_args(argv)
    if shutil.which("valgrind") is None:
        sys.stderr.write("ab_instructions: error: valgrind is not installed\n"
                         "  hint: apt-get install valgrind (its cachegrind counts the instructions)\n")
        return 2
    if args.graph:
        graph = Path(args.graph)
    else:
        from benchmarks.scale import _graph
        cache = Path(args.cache)
        cache.mkdir(parents=True, exist_ok=True)
        graph = _graph(cache, args.size, "pb", 0.0)
    out = Path(args.cache) / "ab_instructions_out.pb"
    counts: dict[str, dict[str, int]] = {args.old: {}, args.new: {}}
    for tree in (args.old, args.new):
        compile_tree(tree)
    for step in STEPS:
        for tree in (args.old, args.new):
            counts[tree][step] = count(tree, step, graph, out)
    out.unlink(missing_ok=True)
    print(f"cachegrind instructions, PYTHONHASHSEED=0, {graph.name}")
    print("\n".join(table(counts, args.old, args.new)))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
