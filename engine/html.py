"""HTML report: a frozen view model rendered by reports/report.html.j2.

The template only loops and prints; everything is escaped (autoescape on), and
the page is self-contained (inline CSS, no network).
"""
from __future__ import annotations

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

from .resources import data_dir


def _env() -> Environment:
    return Environment(loader=FileSystemLoader(str(data_dir("reports"))), autoescape=select_autoescape(["html", "j2"]),
                       undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)


def _facts(reason: dict) -> list[tuple[str, str]]:
    return [(str(k), str(v)) for k, v in reason.items()]


def render_html(report: dict, ctx=None) -> str:
    cards = []
    for ins in report["insertions"]:
        cards.append({
            "name": ins["name"], "type": ins["type"], "graph": ins["graph"], "pass": ins["pass"],
            "rule": ins["rule"], "rule_loc": ins["rule_loc"] or "", "producer": ins["producer"],
            "consumers": ", ".join(ins["consumers"]), "facts": _facts(ins["reason"]),
            "attrs": sorted(ins["attrs"].items()), "moved": ", ".join(ins["moved_control"]),
        })
    return _env().get_template("report.html.j2").render(report=report, cards=cards)
