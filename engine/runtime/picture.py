"""The picture of a memtrace run (`memtrace --html FILE`): one lane per stream, a bar per block
from its pool acquisition to its birth recycle on its birth stream, and marks where a block is
recycled (birth, borrow, local), handed across streams (wander) or a pool shrinks. The layout is
computed here; reports/memtrace.html.j2 only loops over it (autoescape on)."""
from __future__ import annotations

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

from engine.core.resources import data_dir

LANE_H, BAR_H, LEFT, WIDTH, MAX_ITEMS = 48, 14, 70, 1100, 4000
MARKS = {"birth": "#2e7d32", "borrow": "#ef6c00", "local": "#1565c0", "wander": "#6a1b9a", "l2_shrink": "#757575"}


def picture(trace, result: dict, timeline: list) -> dict:
    steps = result["steps"]
    n = max(len(steps), 1)
    scale = (WIDTH - LEFT - 10) / n

    def x(step: int) -> float:
        return round(LEFT + step * scale, 2)

    open_bars: dict[str, tuple[int, int]] = {}
    bars, marks = [], []
    for step, kind, stream, oid in timeline:
        if kind == "acquire":
            open_bars[oid] = (step, stream)
        elif kind == "birth" and oid in open_bars:
            start, lane = open_bars.pop(oid)
            bars.append((start, step, lane, oid))
    bars.extend((start, n, lane, oid) for oid, (start, lane) in sorted(open_bars.items(), key=lambda kv: kv[1]))
    bars.sort()
    for i, step in enumerate(steps):
        for e in step["events"]:
            kind = e.get("mode", e["kind"])
            if kind in MARKS:
                lane = e.get("stream", e.get("dst", 0))
                block = f" of {e['block']}" if "block" in e else ""
                marks.append({"x": x(i), "y": lane * LANE_H + 8 + BAR_H + 6, "color": MARKS[kind],
                              "title": f"step {i}: {kind}{block} on stream {lane}"})
    shown_bars = [{"x": x(a), "w": max(round((b - a) * scale, 2), 1.5), "y": lane * LANE_H + 8, "h": BAR_H,
                   "title": f"{oid}: steps {a}–{b} on stream {lane}"} for a, b, lane, oid in bars[:MAX_ITEMS]]
    lanes = [{"y": s * LANE_H, "label": f"stream {s}", "mid": s * LANE_H + 8 + BAR_H // 2 + 4}
             for s in range(trace.streams)]
    return {"file": trace.file, "steps": len(steps), "failed": sum(not s["ok"] for s in steps),
            "width": WIDTH, "height": trace.streams * LANE_H + 24, "lanes": lanes, "bars": shown_bars,
            "marks": marks[:MAX_ITEMS], "omitted": max(len(bars) - MAX_ITEMS, 0) + max(len(marks) - MAX_ITEMS, 0),
            "legend": [{"kind": k, "color": c} for k, c in MARKS.items()], "axis_y": trace.streams * LANE_H + 14,
            "left": LEFT}


def render_html(trace, result: dict, timeline: list) -> str:
    env = Environment(loader=FileSystemLoader(str(data_dir("reports"))), autoescape=select_autoescape(["html", "j2"]),
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    return env.get_template("memtrace.html.j2").render(p=picture(trace, result, timeline))
