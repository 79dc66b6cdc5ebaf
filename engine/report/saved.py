"""Answering from a saved JSON report (`memconflict explain --report R.json NODE`):
the cards were written with everything `explain` prints, so nothing is re-run."""
from __future__ import annotations

import difflib
import json
from pathlib import Path

from engine.core.errors import InputError, Loc, Problem, display_path
from engine.report.explain import render_card

REPORT_SCHEMAS = (2,)        # engine/report/model.py's report_schema values this reader knows


def read_report(path: str) -> dict:
    """A memconflict JSON report, checked to be one; errors are located (exit 2)."""
    shown = display_path(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(Problem(Loc(shown), f"cannot read report: {exc.strerror}", "give a --report-json file of `memconflict run`")) from None
    except UnicodeDecodeError:
        raise InputError(Problem(Loc(shown), "report is not UTF-8 text", "give a --report-json file of `memconflict run`")) from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(Problem(Loc(shown, exc.lineno, exc.colno), f"not JSON: {exc.msg}",
                                 "give a --report-json file of `memconflict run`")) from None
    if not isinstance(doc, dict) or "memconflict" not in doc or not isinstance(doc.get("insertions"), list):
        raise InputError(Problem(Loc(shown, 1, 1), "not a memconflict run report (no `memconflict` and `insertions` keys)",
                                 "write one with `memconflict run GRAPH --report-json R.json`"))
    if doc.get("report_schema") not in REPORT_SCHEMAS:
        raise InputError(Problem(Loc(shown, 1, 1), f"report schema {doc.get('report_schema')!r} is not one this memconflict reads",
                                 f"it reads schema {', '.join(map(str, REPORT_SCHEMAS))}; re-run `memconflict run` to write it afresh"))
    return doc


def explain_saved(doc: dict, node: str, path: str) -> str:
    """The cards of the insertions named `node`, as `explain` prints them."""
    cards = [c for c in doc["insertions"] if isinstance(c, dict) and c.get("name") == node]
    if not cards:
        raise InputError(Problem(Loc(display_path(path)), *_not_found(doc, node)))
    rules = doc.get("rules") if isinstance(doc.get("rules"), dict) else {}
    try:
        return "\n\n".join(render_card(c, rules) for c in cards)
    except (KeyError, TypeError, AttributeError) as exc:
        raise InputError(Problem(Loc(display_path(path)), f"the report's card for '{node}' is incomplete ({exc})",
                                 "re-run `memconflict run` to write the report afresh")) from None


def _not_found(doc: dict, node: str) -> tuple[str, str]:
    names = sorted({c.get("name") for c in doc["insertions"] if isinstance(c, dict) and c.get("name")})
    graph = doc.get("input", "the graph")
    message = f"'{node}' is not among the {len(names)} node(s) the report says were inserted into {graph}"
    removed = [r for r in doc.get("removals") or [] if isinstance(r, dict) and r.get("name") == node]
    if removed:
        message += f"; it was removed by {removed[0].get('pass')} (rule {removed[0].get('rule')})"
    close = difflib.get_close_matches(node, names, n=3, cutoff=0.5)
    if close:
        return message, "did you mean " + ", ".join(f"'{n}'" for n in close) + "?"
    if names:
        return message, "inserted nodes: " + ", ".join(f"'{n}'" for n in names[:5]) + (
            f" and {len(names) - 5} more" if len(names) > 5 else "")
    return message, "the run this report records inserted no node"
