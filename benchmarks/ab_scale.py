"""Two checkouts of memconflict against each other: `scale.py` runs alternating, best per stage.

    python benchmarks/ab_scale.py OLD_TREE NEW_TREE [--rounds 3] [--size 100000]

On a VM whose speed drifts within minutes, one run of each side says little; alternating
rounds (old, new, then new, old, ...) and the best of each side per stage do. Each run is
`benchmarks/scale.py --sizes SIZE` in that tree (the generated graph is cached under --cache,
shared by both sides), with this interpreter. After the table, each round's two totals (run
back to back, so the drift between them is small) and their ratio new/old, with the median
ratio: when the best-of figures disagree with it, the machine's phase changed under the runs.
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections import defaultdict

_ROW = re.compile(r"^(\S+(?: \S+)*?)\s{2,}([\d.]+)x?$")


def run(tree: str, size: str, cache: str) -> dict[str, float]:
    out = subprocess.run([sys.executable, "benchmarks/scale.py", "--sizes", size, "--cache", cache],
                         cwd=tree, capture_output=True, text=True, check=True).stdout
    rows = {}
    for line in out.splitlines():
        m = _ROW.match(line)
        if m:
            rows[m.group(1)] = float(m.group(2))
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--size", default="100000")
    ap.add_argument("--cache", default="/tmp/memconflict-bench")
    args = ap.parse_args(argv)
    best: dict[str, dict[str, list[float]]] = {args.old: defaultdict(list), args.new: defaultdict(list)}
    order: list[str] = []
    totals: list[tuple[float | None, float | None]] = []     # each round's (old, new) total
    for r in range(args.rounds):
        got = {}
        for tree in (args.old, args.new) if r % 2 == 0 else (args.new, args.old):
            rows = got[tree] = run(tree, args.size, args.cache)
            for stage, value in rows.items():
                if stage not in order:
                    order.append(stage)
                best[tree][stage].append(value)
        totals.append((got[args.old].get("total"), got[args.new].get("total")))
    print(f"{'stage':42s} {'old':>9s} {'new':>9s}  (best of {args.rounds}, alternating)")
    for stage in order:
        a, b = min(best[args.old][stage], default=0.0), min(best[args.new][stage], default=0.0)
        change = f"{(b - a) / a * 100:+.0f}%" if a else ""
        print(f"{stage:42s} {a:9.2f} {b:9.2f} {change}")
    print("\n".join(paired_lines(totals)))
    return 0


def paired_lines(totals: list[tuple[float | None, float | None]]) -> list[str]:
    """Each round's totals, old then new, their ratio, and the median ratio of the rounds."""
    lines, ratios = [], []
    for k, (a, b) in enumerate(totals, 1):
        if a and b is not None:
            ratios.append(b / a)
            lines.append(f"round {k}: total {a:.2f} -> {b:.2f} s, new/old {b / a:.3f}")
    if ratios:
        ratios.sort()
        mid = len(ratios) // 2
        median = ratios[mid] if len(ratios) % 2 else (ratios[mid - 1] + ratios[mid]) / 2
        faster = sum(r < 1 for r in ratios)
        lines.append(f"median new/old {median:.3f} over {len(ratios)} round(s); new faster in {faster}")
    return lines


if __name__ == "__main__":
    sys.exit(main())
