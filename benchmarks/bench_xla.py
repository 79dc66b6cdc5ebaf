"""memconflict's default pipeline against XLA's copy insertion, at equal node count, in one process.

    python -m venv /tmp/xla && /tmp/xla/bin/pip install -e . jax      # jax: only for this benchmark
    /tmp/xla/bin/python benchmarks/bench_xla.py [--nodes 10000,100000] [--rounds 3]

XLA's `copy-insertion` pass is the closest thing to what memconflict does: it finds the buffers
that in-place updates, loop-carried values and aliased parameters would share wrongly and adds
the copies that keep them apart. Both sides get a graph shaped like one training step:

* memconflict: `gen_graph --dump-attrs` with N nodes (all graphs counted), binary dump, the whole
  default pipeline (`benchmarks/scale.py`'s measure: load, check, every pass, save);
* XLA: `jax.jit` of an L-layer residual MLP's SGD-with-momentum step (forward, backward, the
  parameter and momentum updates, both donated so their buffers alias the outputs), compiled
  for the CPU backend. L is chosen so that the HLO module copy insertion sees has about N
  instructions (every computation counted, fused ones included: XLA's dump of the module just
  before the pass is read and counted).

XLA times each pass itself (`hlo_pass_pipeline.cc`, wall microseconds, logged at VLOG 1 with
`TF_CPP_VMODULE=hlo_pass_pipeline=1`); this script reads the `copy-insertion` line of the step
module from its own stderr. memconflict's stages are CPU seconds. On an idle machine both are
single-threaded, so the two clocks agree; run it on an idle machine.

Rounds alternate: XLA at every size, then memconflict at every size, and again. The table gives
medians, and the ratios memconflict / XLA for the passes alone and for the whole run.
"""
from __future__ import annotations

import argparse
import glob
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

DUMP = tempfile.mkdtemp(prefix="memconflict-xla-")
# Read by XLA once, when the backend starts: set before jax is imported.
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "0"
os.environ["TF_CPP_VMODULE"] = "hlo_pass_pipeline=1"
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + f" --xla_dump_to={DUMP}"
                           " --xla_dump_hlo_pass_re=copy-insertion --xla_dump_hlo_module_re=jit_step").strip()

STEP_MODULE = "jit_step"
_RUNNING = re.compile(r"Running HLO pass pipeline on module (\S+?):")
_TIMED = re.compile(r"HLO pass: copy-insertion time: .*?\((\d+) us\)")
_INSTRUCTION = re.compile(r"^\s+(?:ROOT )?%?[\w.\-]+ = ", re.M)


def _import_jax():
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        sys.exit("bench_xla: jax is not installed in this environment; see the first lines of "
                 "benchmarks/bench_xla.py (the project itself does not depend on jax)")
    return jax, jnp


def _captured_stderr(fn):
    """Run fn() with file descriptor 2 sent to a temporary file (XLA logs from C++); its text."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            fn()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        tmp.seek(0)
        return tmp.read().decode("utf-8", "replace")


def _copy_insertion_us(log: str) -> int:
    """The copy-insertion time of the step module, in microseconds, from XLA's pass log."""
    module, total, seen = None, 0, False
    for line in log.splitlines():
        m = _RUNNING.search(line)
        if m:
            module = m.group(1)
            continue
        m = _TIMED.search(line)
        if m and module == STEP_MODULE:
            total += int(m.group(1))
            seen = True
    if not seen:
        raise RuntimeError("no copy-insertion timing for the step module in XLA's log "
                           "(was jax's XLA built without VLOG support?)")
    return total


def _instructions_before_copy_insertion() -> int:
    files = sorted(glob.glob(os.path.join(DUMP, f"*.{STEP_MODULE}.*before_copy-insertion*.txt")))
    if not files:
        raise RuntimeError(f"XLA wrote no dump of the module before copy-insertion under {DUMP}")
    count = len(_INSTRUCTION.findall(Path(files[-1]).read_text()))
    for f in glob.glob(os.path.join(DUMP, "*")):
        shutil.rmtree(f) if os.path.isdir(f) else os.unlink(f)
    return count


def xla_step(layers: int) -> tuple[int, float, float]:
    """Compile one training step of `layers` layers: (HLO instructions, copy-insertion s, compile s)."""
    jax, jnp = _import_jax()
    width = 16

    def loss(params, x, y):
        h = x
        for w, b in params:
            h = jax.nn.relu(h @ w + b) + h
        return jnp.mean((h - y) ** 2)

    def step(params, mom, x, y):
        g = jax.grad(loss)(params, x, y)
        mom = jax.tree.map(lambda m, gg: 0.9 * m + gg, mom, g)
        return jax.tree.map(lambda p, m: p - 0.01 * m, params, mom), mom

    step.__name__ = "step"          # the module name XLA logs and dumps: jit_step
    compile_s = 0.0

    def build_and_compile():        # the arrays' own small compiles log too: all of it captured
        nonlocal compile_s
        params = [(jnp.ones((width, width)), jnp.zeros((width,))) for _ in range(layers)]
        mom = jax.tree.map(jnp.zeros_like, params)
        x = y = jnp.ones((4, width))
        lowered = jax.jit(step, donate_argnums=(0, 1)).lower(params, mom, x, y)
        t0 = time.perf_counter()
        lowered.compile()
        compile_s = time.perf_counter() - t0

    log = _captured_stderr(build_and_compile)
    return _instructions_before_copy_insertion(), _copy_insertion_us(log) / 1e6, compile_s


def layers_for(nodes: int) -> int:
    """L with about `nodes` instructions: the count is affine in L, measured at two small L."""
    (n1, _, _), (n2, _, _) = xla_step(4), xla_step(8)
    per_layer = (n2 - n1) / 4
    return max(1, round((nodes - (n1 - 4 * per_layer)) / per_layer))


def memconflict_run(nodes: int, cache: Path) -> tuple[float, float]:
    """(passes s, whole run s) of the default pipeline on gen_graph's N-node training step."""
    from benchmarks.scale import _graph, measure

    r = measure(_graph(cache, nodes, "pb", 0.0), {})
    stages = dict(r["stages"])
    total = sum(stages.values())
    return total - stages.get("load", 0.0) - stages.get("save", 0.0) - stages.get("check", 0.0), total


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", default="10000,100000", help="comma-separated node counts")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "memconflict-bench"))
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.nodes.split(",")]
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    _import_jax()
    layers = {n: layers_for(n) for n in sizes}
    xla: dict[int, list[tuple[int, float, float]]] = {n: [] for n in sizes}
    mc: dict[int, list[tuple[float, float]]] = {n: [] for n in sizes}
    for r in range(args.rounds):
        for n in sizes:
            xla[n].append(xla_step(layers[n]))
            print(f"round {r + 1}: XLA L={layers[n]}: {xla[n][-1][0]} instructions, copy-insertion "
                  f"{xla[n][-1][1]:.3f} s (compile {xla[n][-1][2]:.1f} s)", file=sys.stderr, flush=True)
        for n in sizes:
            mc[n].append(memconflict_run(n, cache))
            print(f"round {r + 1}: memconflict N={n}: passes {mc[n][-1][0]:.3f} s, run {mc[n][-1][1]:.3f} s",
                  file=sys.stderr, flush=True)
    head = ["N", "HLO instr", "XLA copy-ins s", "mc passes s", "mc run s", "passes/XLA", "run/XLA"]
    rows = []
    for n in sizes:
        ci = statistics.median(t for _, t, _ in xla[n])
        passes = statistics.median(p for p, _ in mc[n])
        run = statistics.median(t for _, t in mc[n])
        rows.append([str(n), str(xla[n][0][0]), f"{ci:.3f}", f"{passes:.3f}", f"{run:.3f}",
                     f"{passes / ci:.2f}", f"{run / ci:.2f}"])
    widths = [max(len(row[c]) for row in [head] + rows) for c in range(len(head))]
    print(f"medians of {args.rounds} alternating rounds; XLA {_import_jax()[0].__version__} CPU backend")
    for row in [head, ["-" * w for w in widths]] + rows:
        print("  ".join(x.rjust(w) for x, w in zip(row, widths)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
