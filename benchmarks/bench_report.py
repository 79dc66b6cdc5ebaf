"""Time the report for a run with ~N insertions: model, JSON and HTML.

    python benchmarks/bench_report.py [--insertions 1000,10000] [--passes mem_rw_conflict] [--out DIR]
    python benchmarks/bench_report.py --graph DUMP [--passes ...]    # a real dump (default: the pipeline)

The graph is synthetic and shaped for the RW pass: N blocks of a constant or a
variable feeding a collective that writes its input (`_input_mutable`), each
followed by a consumer, so every block gets one Identity (a tenth of them in If
branches, to exercise subgraph paths). Prints seconds and bytes of each step.
"""
from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.core.attrs import set_attr  # noqa: E402
from engine.passes.context import RunContext  # noqa: E402
from engine.core.dumpio import build_model, load_model  # noqa: E402
from engine.report.html import render_html  # noqa: E402
from engine.passes.catalog import load_pack  # noqa: E402
from engine.proto import ge_ir_pb2 as pb  # noqa: E402
from engine.report.model import build_report, graph_stats, report_json  # noqa: E402
from engine.passes.manager import resolve_passes, run_passes  # noqa: E402


def _op(g: pb.GraphDef, name: str, typ: str, inputs: list[str], outputs: int, **attrs) -> pb.OpDef:
    op = g.op.add(name=name, type=typ)
    op.input.extend(inputs)
    for _ in inputs:
        op.input_desc.add(dtype=pb.DT_FLOAT, shape=pb.ShapeDef(dim=[32, 64]), layout="ND")
    for _ in range(outputs):
        op.output_desc.add(dtype=pb.DT_FLOAT, shape=pb.ShapeDef(dim=[32, 64]), layout="ND")
    for key, value in attrs.items():
        set_attr(op.attr, key, value)
    return op


def make_model(insertions: int) -> pb.ModelDef:
    """A ModelDef whose RW pass inserts about `insertions` Identity nodes."""
    m = pb.ModelDef(name="bench", version=1)
    root = m.graph.add(name="train_step")
    for k in range(insertions):
        if k % 10 == 9:          # a branch: Data (parent index 0) feeding the collective
            sub = m.graph.add(name=f"block_{k}/then")
            _op(sub, f"block_{k}/then/arg", "Data", [], 1, _parent_node_index=0)
            _op(sub, f"block_{k}/then/allreduce", "HcomAllReduce", [f"block_{k}/then/arg:0"], 1, _input_mutable=True)
            out = _op(sub, f"block_{k}/then/NetOutput", "NetOutput", [f"block_{k}/then/allreduce:0"], 0)
            set_attr(out.input_desc[0].attr, "_parent_node_index", 0)
            _op(root, f"block_{k}/weights", "Const", [], 1)
            parent = _op(root, f"block_{k}/If", "If", [f"block_{k}/weights:0"], 1)
            parent.subgraph_name.append(sub.name)
            continue
        src = f"block_{k}/kernel" if k % 2 else f"block_{k}/weights"
        _op(root, src, "Variable" if k % 2 else "Const", [], 1)
        _op(root, f"block_{k}/broadcast/allreduce", "HcomAllReduce", [f"{src}:0"], 1, _input_mutable=True)
        _op(root, f"block_{k}/relu", "Relu", [f"block_{k}/broadcast/allreduce:0"], 1)
        if k % 2:                # a second reader, so the variable's last writer is not skipped
            _op(root, f"block_{k}/cast", "Cast", [f"{src}:0"], 1)
    return m


def bench(n: int | str, passes: list[str] | None, out_dir: Path) -> dict:
    pack = load_pack()
    t: dict = {}
    t0 = time.perf_counter()
    model = load_model(n) if isinstance(n, str) else build_model(make_model(n), "bench")
    gc.freeze()          # as the CLI does after loading
    t["build graph"] = time.perf_counter() - t0
    ctx = RunContext(pack, model, {})
    before = graph_stats(model)
    t0 = time.perf_counter()
    run_passes(ctx, resolve_passes(pack, passes, {}))
    t["passes"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    report = build_report(ctx, "bench", before)
    t["report model"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    js = report_json(report)
    t["json"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    html = render_html(report, ctx, times=True).encode()
    t["html"] = time.perf_counter() - t0
    stem = Path(n).stem if isinstance(n, str) else str(n)
    (out_dir / f"bench_{stem}.json").write_bytes(js)
    (out_dir / f"bench_{stem}.html").write_bytes(html)
    t["report total"] = t["report model"] + t["json"] + t["html"]
    t["inserted"] = len(ctx.insertions)
    t["nodes"] = model.node_count()
    t["json MB"] = len(js) / 1e6
    t["html MB"] = len(html) / 1e6
    return t


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--insertions", default="1000,10000", help="comma-separated sizes")
    ap.add_argument("--graph", help="benchmark this GE dump instead of the synthetic graphs")
    ap.add_argument("--passes", help="default: mem_rw_conflict (synthetic), the pack's pipeline (--graph)")
    ap.add_argument("--out", default=str(Path(tempfile.gettempdir()) / "memconflict-bench"))
    args = ap.parse_args(argv)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    passes = args.passes.split(",") if args.passes else None
    sizes = [args.graph] if args.graph else [int(n) for n in args.insertions.split(",")]
    for n in sizes:
        t = bench(n, passes or (None if args.graph else ["mem_rw_conflict"]), out_dir)
        print(f"{t['inserted']:>6} insertions, {t['nodes']} nodes: passes {t['passes']:.2f}s | "
              f"report model {t['report model']:.2f}s, json {t['json']:.2f}s, html {t['html']:.2f}s "
              f"(report total {t['report total']:.2f}s) | json {t['json MB']:.1f} MB, html {t['html MB']:.1f} MB")
    print(f"files in {out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
