"""Terminal output of `memconflict run`: the summary table and a progress line.

The progress line goes to stderr, only when it is a terminal and the run is long
enough to need it (it appears after `delay` seconds); `--quiet` turns it off.
"""
from __future__ import annotations

import threading
import time
from collections import Counter

from engine.core.errors import display_path
from engine.passes.context import RunContext


SEVERITIES = ("info", "warning", "error")


def summary_text(ctx: RunContext, input_file: str, min_severity: str = "info") -> str:
    """The pass table, the counts, and one line per diagnostic at `min_severity` or above
    (the ones left out are counted)."""
    rows = [("#", "pass", "status", "inserted", "removed", "time")]
    for k, r in enumerate(ctx.pass_runs, 1):
        rows.append((str(k), r.pass_id, r.status, str(r.inserted), str(r.removed), f"{r.seconds:.3f}s"))
    if len(ctx.pass_runs) > 1:
        rows.append(("", "total", "", str(sum(r.inserted for r in ctx.pass_runs)),
                     str(sum(r.removed for r in ctx.pass_runs)), f"{sum(r.seconds for r in ctx.pass_runs):.3f}s"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    left = (1, 2)
    lines = [f"memconflict: {input_file} with pack {ctx.pack.name} {ctx.pack.version} ({display_path(ctx.pack.path)})"]
    for k, r in enumerate(rows):
        if k == len(rows) - 1 and len(ctx.pass_runs) > 1 or k == 1:
            lines.append("  " + "  ".join("-" * w for w in widths))
        lines.append("  " + "  ".join(c.ljust(w) if i in left else c.rjust(w)
                                      for i, (c, w) in enumerate(zip(r, widths))).rstrip())
    by_type = Counter(i.type for i in ctx.insertions)
    lines.append(f"  {len(ctx.insertions)} node(s) inserted"
                 + (" (" + ", ".join(f"{t} {c}" for t, c in sorted(by_type.items())) + ")" if by_type else "")
                 + f", {len(ctx.removals)} removed, {len(ctx.diagnostics)} diagnostic(s)")
    removed = {(r.graph, r.name) for r in ctx.removals}
    transient = {(i.graph, i.name) for i in ctx.insertions if (i.graph, i.name) in removed
                 and (ctx.model.graphs.get(i.graph) is None or ctx.model.graphs[i.graph].find(i.name) is None)}
    inserted = {(i.graph, i.name) for i in ctx.insertions}
    lines.append(f"  net change: {len(ctx.insertions) - len(transient)} added, {len(removed - inserted)} removed"
                 + (f" ({len(transient)} transient: inserted, then removed by a later pass)" if transient else ""))
    by_rule = Counter(i.rule for i in ctx.insertions)
    if by_rule:
        lines.append("  by rule: " + ", ".join(f"{r} {c}" for r, c in sorted(by_rule.items())))
    floor = SEVERITIES.index(min_severity)
    shown = [d for d in ctx.diagnostics if SEVERITIES.index(d.severity) >= floor]
    for d in shown:
        lines.append(f"  {d.severity} {d.code}: {d.message}")
    lines += [f"  note ({kind}): {text}" for kind, text in getattr(ctx.model, "notes", ())]
    if len(shown) < len(ctx.diagnostics):
        lines.append(f"  ({len(ctx.diagnostics) - len(shown)} diagnostic(s) below {min_severity} not shown)")
    return "\n".join(lines)


class Progress:
    """`with Progress(stream, enabled) as p: p.stage("pass 1/3 mem_rw_conflict", counter)`.

    A daemon thread redraws one status line (stage, live count, elapsed time) every
    `interval` seconds once `delay` has passed, and clears it on exit.
    """

    def __init__(self, stream, enabled: bool, delay: float = 0.5, interval: float = 0.2):
        self.stream = stream
        self.enabled = enabled and _is_tty(stream)
        self.delay, self.interval = delay, interval
        self.label = ""
        self.count = None          # callable → int, shown as "N inserted"
        self.t0 = time.monotonic()
        self.shown = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "Progress":
        if self.enabled:
            self._thread = threading.Thread(target=self._run, name="memconflict-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()

    def stage(self, label: str, count=None) -> None:
        self.label, self.count = label, count

    def line(self) -> str:
        text = f"memconflict: {self.label}"
        if self.count is not None:
            text += f"  {self.count()} inserted"
        return text + f"  {time.monotonic() - self.t0:.1f}s"

    def _run(self) -> None:
        if self._stop.wait(self.delay):
            return
        while True:
            self.stream.write("\r\x1b[K" + self.line())
            self.stream.flush()
            self.shown = True
            if self._stop.wait(self.interval):
                return


def _is_tty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
