"""Time `memconflict runtime cond` on a generated dump with N If/Case nodes (target: 1,000 in < 5 s).

    python benchmarks/bench_runtime_cond.py [--conds 1000,2000] [--out DIR]

The graph is shaped like real control flow: a chain of N conds (every fifth a three-branch
Case, every tenth with a nested If in its first branch), each reading the previous cond's
outputs and two shared inputs; its branches compute, pass inputs through (chain conflicts)
and return one value twice (plus-refs), with `_parent_node_index` on the branch Data nodes
and NetOutput inputs as GE dumps carry them. Prints seconds for the load + analysis of
every cond in-process and for the whole command (a subprocess), and the growth exponent.
"""
from __future__ import annotations

import argparse
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.core.attrs import set_attr  # noqa: E402
from engine.proto import ge_ir_pb2 as pb  # noqa: E402


def _op(g, name: str, type_: str, inputs=(), n_out: int = 1, subgraphs=(), parent_index: int | None = None):
    op = g.op.add(name=name, type=type_)
    op.input.extend(inputs)
    for _ in inputs:
        op.input_desc.add()
    for _ in range(n_out):
        op.output_desc.add()
    op.subgraph_name.extend(subgraphs)
    if parent_index is not None:
        set_attr(op.attr, "_parent_node_index", parent_index)
    return op


def _netoutput(g, name: str, inputs: list[str]):
    op = _op(g, name, "NetOutput", inputs, 0)
    for k, d in enumerate(op.input_desc):
        set_attr(d.attr, "_parent_node_index", k)


def _branch(m, name: str, k: int, nested: bool):
    """A branch of a cond with inputs (prev0, prev1, shared): returns [x, input k%2, x]."""
    g = m.graph.add(name=name)
    for i in range(3):
        _op(g, f"{name}_d{i}", "Data", ["" ], parent_index=i)
    _op(g, f"{name}_mul", "Mul", [f"{name}_d0:0", f"{name}_d2:0"])
    last = f"{name}_mul:0"
    if nested:
        inner = [f"{name}_in_then", f"{name}_in_else"]
        _op(g, f"{name}_if", "If", [f"{name}_d1:0", last, f"{name}_d2:0"], 2, inner)
        for s in inner:
            sg = m.graph.add(name=s)
            for i in range(3):
                _op(sg, f"{s}_d{i}", "Data", [""], parent_index=i)
            _op(sg, f"{s}_relu", "Relu", [f"{s}_d1:0"])
            _netoutput(sg, f"{s}_out", [f"{s}_relu:0", f"{s}_d2:0"])
        last = f"{name}_if:0"
    _netoutput(g, f"{name}_out", [last, f"{name}_d{k % 2}:0", last])


def make_model(n: int) -> pb.ModelDef:
    m = pb.ModelDef(name=f"conds{n}")
    root = m.graph.add(name="root")
    _op(root, "x", "Data")
    _op(root, "y", "Data")
    _op(root, "shared", "Const")
    prev = ["x:0", "y:0"]
    for i in range(n):
        case = i % 5 == 4
        names = [f"c{i}_b{k}" for k in range(3 if case else 2)]
        _op(root, f"cond{i}", "Case" if case else "If", prev + ["shared:0"], 3, names)
        for k, b in enumerate(names):
            _branch(m, b, k, nested=(i % 10 == 0 and k == 0))
        prev = [f"cond{i}:0", f"cond{i}:1"]
    _netoutput(root, "out", prev)
    return m


def bench(n: int, folder: Path) -> tuple[float, float, int]:
    path = folder / f"conds{n}.pb"
    if not path.exists():
        path.write_bytes(make_model(n).SerializeToString())
    from engine.passes.catalog import load_pack
    from engine.runtime.dumpcond import dump_conds
    pack = load_pack(None)
    t, c = time.perf_counter(), time.process_time()
    out = dump_conds(str(path), pack)
    inproc, cpu = time.perf_counter() - t, time.process_time() - c
    t = time.perf_counter()
    r = subprocess.run(["/usr/bin/time", "-f", "%U %S", sys.executable, "-m", "engine.cli", "runtime", "cond",
                        str(path)], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT, text=True)
    whole = time.perf_counter() - t
    whole_cpu = sum(map(float, r.stderr.split()[-2:]))
    return inproc, cpu, whole, whole_cpu, len(out["conds"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--conds", default="1000,2000")
    ap.add_argument("--out", default=str(Path(tempfile.gettempdir()) / "memconflict-bench-cond"))
    args = ap.parse_args()
    folder = Path(args.out)
    folder.mkdir(parents=True, exist_ok=True)
    prev = None
    for n in map(int, args.conds.split(",")):
        inproc, cpu, whole, whole_cpu, conds = bench(n, folder)
        growth = f", growth exponent {math.log(cpu / prev[1]) / math.log(n / prev[0]):.2f}" if prev else ""
        print(f"{n} top-level conds ({conds} If/Case in all): load + analysis {inproc:.2f} s ({cpu:.2f} s CPU), "
              f"whole command {whole:.2f} s ({whole_cpu:.2f} s CPU){growth}")
        prev = (n, cpu)


if __name__ == "__main__":
    main()
