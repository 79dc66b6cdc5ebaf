"""The variable memory map (`vars plan --html FILE`): one picture per memory type of where
the session's variables sit, with the blocks' table under it.

`varmap_model(plan, policy)` builds the model from the plan `vars plan --json` writes; the
template (reports/varmap.html.j2) only loops and prints. HBM blocks are drawn in logical
space from the logic base: the data, the alignment padding up to `align`, then the
`guard_units` guards; a block several names share (a reused identical constant, a file
slice, a batch copy, a variable placed by an earlier graph) is marked shared. RDMA and host
blocks are real pool pointers, drawn from the lowest one, without padding or guards.
"""
from __future__ import annotations

from engine.core.resources import data_dir

WIDTH = 1000            # drawing width in px
MAX_DRAWN = 4000        # blocks drawn per memory type; the table lists them all up to MAX_ROWS
MAX_ROWS = 20000


def varmap_model(plan: dict, policy) -> dict:
    mem = policy.memory
    types: dict[str, dict] = {}
    for g in plan["graphs"]:
        for v in g["variables"]:
            t = types.setdefault(v["memory_type"], {})
            block = t.get(v["address"])
            if block is None:
                block = t[v["address"]] = {"address": v["address"], "offset": v["offset"], "size": v["size"],
                                           "names": [], "graphs": [], "footprint": v["footprint"]}
            if v["name"] not in block["names"]:
                block["names"].append(v["name"])
            if g["graph"] not in block["graphs"]:
                block["graphs"].append(g["graph"])
            block["footprint"] = block["footprint"] or v["footprint"]
    out = []
    for name in sorted(types):
        blocks = sorted(types[name].values(), key=lambda b: b["address"])
        pooled = name != policy.memory_type_selection.default
        low = blocks[0]["address"] if pooled else plan["logic_base"]
        for b in blocks:
            b["start"] = b["address"] - low
            b["data"] = b["size"]
            b["padding"] = 0 if pooled else mem.aligned(b["size"]) - b["size"]
            b["guards"] = 0 if pooled else mem.align * mem.guard_units
            b["end"] = b["start"] + b["data"] + b["padding"] + b["guards"]
            b["shared"] = len(b["names"]) > 1
        total = max(b["end"] for b in blocks) or 1
        out.append({"type": name, "pooled": pooled, "base": low, "total": total, "count": len(blocks),
                    "rects": _rects(blocks[:MAX_DRAWN], total), "undrawn": max(0, len(blocks) - MAX_DRAWN),
                    "rows": blocks[:MAX_ROWS], "unlisted": max(0, len(blocks) - MAX_ROWS)})
    return {"session": plan["session"], "logic_base": plan["logic_base"], "align": mem.align,
            "guard_units": mem.guard_units, "types": out,
            "graphs": [{"graph_id": g["graph_id"], "graph": g["graph"], "file": g["file"],
                        "variables": len(g["variables"])} for g in plan["graphs"]]}


def _rects(blocks: list[dict], total: int) -> list[dict]:
    scale = WIDTH / total
    rects = []
    for b in blocks:
        x = b["start"]
        for part, length in (("data", b["data"]), ("padding", b["padding"]), ("guard", b["guards"])):
            if length:
                cls = "shared" if part == "data" and b["shared"] else part
                rects.append({"x": round(x * scale, 2), "w": max(round(length * scale, 2), 0.5), "cls": cls,
                              "title": f"{', '.join(b['names'])}: {part} {length} bytes at +{x}"})
            x += length
    return rects


def render_varmap(plan: dict, policy) -> str:
    from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
    env = Environment(loader=FileSystemLoader(str(data_dir("reports"))), autoescape=select_autoescape(["html", "j2"]),
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    return env.get_template("varmap.html.j2").render(m=varmap_model(plan, policy), width=WIDTH)
