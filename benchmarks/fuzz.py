"""Run the fuzzers of tests/fuzzing.py for longer than CI allows, reader by reader.

    python benchmarks/fuzz.py --minutes 10 [--readers yaml-doc,yaml-text,dsl,pack,binary-dump,text-dump]
                              [--out /tmp/memconflict-fuzz]

Each reader gets `--minutes` of inputs drawn by hypothesis (random, not derandomized, no
shrinking), each checked against the command-line contract (tests/fuzzing.py: exit 0/1/2,
a located message for 2, no traceback, no output unless 0, bounded time). A violating
input is saved under OUT/READER/ (add it to tests/fuzz_corpus/ with its expectation once
fixed). Prints, per reader, the inputs tried, the exit statuses and the crashes found.
"""
from __future__ import annotations

import argparse
import collections
import os
import re
import signal
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from hypothesis import HealthCheck, Phase, given, settings, strategies as st  # noqa: E402

import fuzzing as F  # noqa: E402

READERS = ["yaml-doc", "yaml-text", "dsl", "pack", "binary-dump", "text-dump"]


class _Hang(Exception):
    pass


def _alarm(signum, frame):
    raise _Hang(f"no answer within {3 * F.PACK_TIME_LIMIT:.0f} s")


class Stats:
    def __init__(self, reader: str, out: Path):
        self.reader, self.out = reader, out / reader
        self.tried = 0
        self.statuses: collections.Counter = collections.Counter()
        self.crashes: dict[str, int] = {}

    def record(self, o: F.Outcome, data: bytes | str, suffix: str) -> None:
        self.tried += 1
        self.statuses[o.status] += 1
        if not o.problems:
            return
        line = o.stderr.splitlines()[0] if o.stderr else ""
        key = o.problems[0] + " | " + re.sub(r"/\S+|\d+", "#", line)[:160]
        self.crashes[key] = self.crashes.get(key, 0) + 1
        if self.crashes[key] == 1:
            self.out.mkdir(parents=True, exist_ok=True)
            path = self.out / f"crash-{len(self.crashes):03d}{suffix}"
            path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass"))
            (path.with_name(path.name + ".txt")).write_text(f"{o.problems}\n{o.stderr}", encoding="utf-8")


def _fuzz_once(reader: str, stats: Stats, work: Path, deadline: float) -> None:
    """One hypothesis run of up to 100 inputs for `reader` (stopping at the deadline)."""
    quick = settings(max_examples=100, database=None, deadline=None, phases=[Phase.generate],
                     suppress_health_check=list(HealthCheck))

    def guard(fn):
        def body(x):
            if time.monotonic() > deadline:
                return
            signal.alarm(int(3 * F.PACK_TIME_LIMIT))
            try:
                fn(x)
            finally:
                signal.alarm(0)
        return body

    if reader == "yaml-doc":
        @quick
        @given(F.mutated_docs(F.graph_docs(8)))
        @guard
        def run(doc):
            text = F.dump(doc)
            stats.record(F.check_graph_text(text, work), text, ".yaml")
    elif reader == "yaml-text":
        @quick
        @given(st.one_of(F.mutated_texts(F.graph_docs(8).map(F.dump)), F.mutated_texts(_fixture_texts())))
        @guard
        def run(text):
            stats.record(F.check_graph_text(text, work), text, ".yaml")
    elif reader == "dsl":
        @quick
        @given(st.one_of(F.dsl_exprs(16), F.mutated_texts(F.dsl_exprs(16)), F.mutated_texts(_pack_exprs())))
        @guard
        def run(text):
            stats.record(F.check_dsl(text), text, ".txt")
    elif reader == "pack":
        @quick
        @given(st.lists(F.overlay_ops(), min_size=1, max_size=4))
        @guard
        def run(ops):
            F.write_overlay(work / "pack", ops)
            (work / "g").mkdir(exist_ok=True)
            o = F.check_graph_text(F.dump(_PACK_GRAPH), work / "g", extra=["--rules", str(work / "pack")],
                                   limit=F.PACK_TIME_LIMIT)
            stats.record(o, (work / "pack" / "changes.yaml").read_text(encoding="utf-8"), ".yaml")
    else:
        seed, suffix = (_BINARY, ".pb") if reader == "binary-dump" else (_TEXT, ".pbtxt")

        @quick
        @given(F.mutated_bytes(seed, text=reader == "text-dump"))
        @guard
        def run(data):
            for p in work.iterdir():
                if p.is_file():
                    p.unlink()
            src = work / f"g{suffix}"
            src.write_bytes(data)
            o = F.run_cli(["convert", str(src), str(work / "g.yaml")], [work / "g.yaml"])
            if o.status == 2 and suffix == ".pb" and "malformed binary" in o.stderr \
                    and not re.search(r"dump at byte \d+", o.stderr):
                o.problems.append("binary-dump error without a byte offset")
            stats.record(o, data, suffix)
    run()


def _fixture_texts():
    files = sorted((ROOT / "tests" / "cases").rglob("*.yaml"))
    return st.sampled_from(files).map(lambda p: p.read_text(encoding="utf-8"))


def _pack_exprs():
    import yaml
    texts = []
    for f in sorted((ROOT / "rules" / "ge").glob("*.yaml")):
        stack = [yaml.safe_load(f.read_text(encoding="utf-8"))]
        while stack:
            v = stack.pop()
            if isinstance(v, dict):
                texts += [x for k, x in v.items() if k in ("when", "body", "value", "match", "gate")
                          and isinstance(x, str)]
                stack += list(v.values())
            elif isinstance(v, list):
                stack += v
    return st.sampled_from(sorted(set(texts)))


_PACK_GRAPH: dict = {}
_BINARY = b""
_TEXT = b""


def _seeds() -> None:
    global _PACK_GRAPH, _BINARY, _TEXT
    import random
    from hypothesis import find
    from engine.core.dumpio import model_to_text, serialize_model
    from engine.core.yamlgraph import load_yaml_graph
    from engine.passes.catalog import load_pack

    _PACK_GRAPH = find(F.graph_docs(8), lambda d: len(d["graphs"]) > 1 and len(d["graphs"]["root"]["nodes"]) >= 6,
                       settings=settings(database=None, phases=[Phase.generate], max_examples=1000))
    random.seed(0)
    with tempfile.TemporaryDirectory() as d:
        Path(d, "g.yaml").write_text(F.dump(_PACK_GRAPH), encoding="utf-8")
        model = load_yaml_graph(Path(d, "g.yaml"), load_pack(None))[0]
    _BINARY = serialize_model(model)
    _TEXT = model_to_text(_BINARY)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=1.0, help="per reader (default 1)")
    ap.add_argument("--readers", default=",".join(READERS), help=f"comma-separated, of: {', '.join(READERS)}")
    ap.add_argument("--out", default=os.path.join(tempfile.gettempdir(), "memconflict-fuzz"),
                    help="where crashing inputs are saved")
    args = ap.parse_args(argv)
    readers = [r.strip() for r in args.readers.split(",") if r.strip()]
    bad = [r for r in readers if r not in READERS]
    if bad:
        ap.error(f"unknown reader(s) {', '.join(bad)} (expected: {', '.join(READERS)})")
    import conftest
    conftest._share_pack_loads()
    os.chdir(ROOT)
    signal.signal(signal.SIGALRM, _alarm)
    _seeds()
    out = Path(args.out)
    total = 0
    for reader in readers:
        stats = Stats(reader, out)
        t0 = time.monotonic()
        deadline = t0 + 60 * args.minutes
        with tempfile.TemporaryDirectory() as work:
            while time.monotonic() < deadline:
                _fuzz_once(reader, stats, Path(work), deadline)
        secs = time.monotonic() - t0
        found = sum(stats.crashes.values())
        total += found
        codes = ", ".join(f"exit {k}: {v}" for k, v in sorted(stats.statuses.items()))
        print(f"{reader:12s} {stats.tried:7d} inputs in {secs / 60:5.1f} min ({stats.tried / secs:5.1f}/s); "
              f"{codes}; {found} crashing inputs, {len(stats.crashes)} distinct", flush=True)
        for key, n in sorted(stats.crashes.items()):
            print(f"    {n:5d}× {key}", flush=True)
    if total:
        print(f"crashing inputs saved under {out}")
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
