"""Benchmark: planning N variables in one session (target: 10^6 under 30 s CPU, linear growth).

    python benchmarks/bench_varplan.py [N ...]        # default: 10000 100000
    python benchmarks/bench_varplan.py --session [GRAPHS [VARS [SHARED]]]   # default: 20 2000 1500
    python benchmarks/bench_varplan.py --session-run [...]    # the same with `memconflict run`

Two measurements per N:
* core:  VarManager.assign_var_mem on plain inputs (names, descriptors, weights);
* graph: plan_graph on a model of N placed nodes (70% Variable, 20% Constant with a
  quarter of the weights repeated, 10% FileConstant over 100 file slices), each
  variable feeding an Assign; the Model is built from the ModelDef first (reported
  apart: "build s"), then plan_graph is timed (wall and process CPU time).
"""
from __future__ import annotations

import gc
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from engine.core.attrs import set_attr  # noqa: E402
from engine.core.dumpio import build_model  # noqa: E402
from engine.proto import ge_ir_pb2 as pb  # noqa: E402
from engine.varmgr import TensorDesc, VarManagerPool, VarOp  # noqa: E402
from engine.varmgr.desc import desc_to_proto  # noqa: E402
from engine.varmgr.placement import plan_graph  # noqa: E402

GiB = 2 ** 30
HBM = 2


def _session(sid: int = 1):
    vm = VarManagerPool().instance(sid)
    vm.init(0, sid, 0, 0)
    vm.set_memory_malloc_size({}, 32 * GiB)
    return vm


def bench_core(n: int) -> float:
    vm = _session()
    descs = [TensorDesc(dims=(k % 64 + 1, 16), size=(k % 64 + 1) * 64) for k in range(64)]
    start = time.perf_counter()
    for k in range(n):
        d = descs[k % 64]
        if k % 5 == 0:
            op = VarOp(f"c{k}", "Constant", TensorDesc(dtype=4), weight=(k % 4000).to_bytes(4, "little"))
        else:
            op = VarOp(f"v{k}", "Variable", d)
        vm.assign_var_mem(op.name, op, d, HBM)
    return time.perf_counter() - start


def make_model(n: int) -> pb.ModelDef:
    model = pb.ModelDef(version=1)
    g = model.graph.add(name="vars")
    templates = {}
    for kind in ("Variable", "Constant", "FileConstant"):
        op = pb.OpDef(type=kind)
        desc_to_proto(TensorDesc(dims=(16, 16)), op.output_desc.add())
        templates[kind] = op
    assign = pb.OpDef(type="Assign")
    desc_to_proto(TensorDesc(dims=(16, 16)), assign.input_desc.add())
    desc_to_proto(TensorDesc(dims=(16, 16)), assign.input_desc.add())
    desc_to_proto(TensorDesc(dims=(16, 16)), assign.output_desc.add())
    for k in range(n):
        r = k % 10
        kind = "Variable" if r < 7 else ("Constant" if r < 9 else "FileConstant")
        op = g.op.add()
        op.CopyFrom(templates[kind])
        op.name = f"n{k}"
        if kind == "Constant":
            op.attr["value"].t.data = (k % (n // 40 + 1)).to_bytes(8, "little") * 128
        elif kind == "FileConstant":
            set_attr(op.attr, "file_path", f"weights/part{k % 100}.bin")
        else:
            a = g.op.add()
            a.CopyFrom(assign)
            a.name = f"assign{k}"
            a.input.extend([f"n{k}:0", f"n{k}:0"])
    return model


def bench_graph(n: int) -> tuple[float, float, float]:
    """(build wall s, plan wall s, plan CPU s); CPU time is steadier on a shared machine."""
    proto = make_model(n)
    start = time.perf_counter()
    model = build_model(proto)
    built = time.perf_counter()
    cpu = time.process_time()
    plan = plan_graph(model, _session(), 1)
    done = time.perf_counter()
    cpu = time.process_time() - cpu
    assert len(plan.entries) == n
    return built - start, done - built, cpu


def session_graph(k: int, n: int, shared: int) -> pb.ModelDef:
    model = pb.ModelDef(version=1)
    g = model.graph.add(name=f"g{k}")
    for j in range(n):
        op = g.op.add(name=f"w{j}" if j < shared else f"g{k}_v{j}", type="Variable")
        desc_to_proto(TensorDesc(dims=(j % 32 + 1, 16)), op.output_desc.add())
    return model


def bench_session(graphs: int, n: int, shared: int, command: str = "vars plan") -> tuple[float, float]:
    """(CPU s of the runs over one state file, CPU s of the same runs from fresh state files)."""
    cmd = command.split()
    import tempfile
    from engine.cli import main as cli
    from engine.core.dumpio import save_model
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for k in range(graphs):
            paths.append(f"{tmp}/g{k}.pb")
            save_model(build_model(session_graph(k, n, shared)), paths[-1])
        cli([*cmd, paths[0], "--var-state", f"{tmp}/warm.pb"])   # imports and pack cache
        start = time.process_time()
        for path in paths:
            cli([*cmd, path, "--var-state", f"{tmp}/session.pb"])
        session = time.process_time() - start
        single = 0.0
        for k, path in enumerate(paths):
            start = time.process_time()
            cli([*cmd, path, "--var-state", f"{tmp}/single{k}.pb"])
            single += time.process_time() - start
    return session, single


def main(argv: list[str]) -> int:
    if argv[:1] in (["--session"], ["--session-run"]):
        import contextlib
        import io
        args = [int(a) for a in argv[1:]] + [20, 2000, 1500][len(argv) - 1:]
        command = "vars plan" if argv[0] == "--session" else "run"
        with contextlib.redirect_stdout(io.StringIO()):
            session, single = bench_session(*args[:3], command)
        print(f"{command}: {args[0]} graphs x {args[1]} variables ({args[2]} shared): session {session:.2f} s "
              f"CPU, single runs {single:.2f} s CPU, ratio {session / single:.2f}")
        return 0
    sizes = [int(a) for a in argv] or [10_000, 100_000]
    print(f"{'N':>8} {'core s':>8} {'us/var':>7} {'build s':>8} {'plan s':>8} {'cpu s':>8} {'us/var':>7}")
    for n in sizes:
        gc.collect()
        core = bench_core(n)
        build, plan, cpu = bench_graph(n)
        print(f"{n:>8} {core:8.2f} {core / n * 1e6:7.1f} {build:8.2f} {plan:8.2f} {cpu:8.2f} "
              f"{cpu / n * 1e6:7.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
