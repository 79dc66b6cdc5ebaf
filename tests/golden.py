"""Golden decision files: a run's decisions rendered as text, one line per decision,
compared with a file checked in next to the graph (STYLE §8).

    # decisions: tests/cases/rw/RW-01.yaml (passes: mem_rw_conflict)
    insert Identity <name> graph=<g> pass=<p> rule=<id> loc=rules/ge/rw.yaml:42 edge=<src>->[<dst>, ...] reason={k=v, ...}
    remove <type> <name> graph=<g> pass=<p> rule=<id> reason={...}
    diag <code> <severity> pass=<p>: <message>
    pass <id> <status> +<inserted> -<removed>[: <message>]
    status 0 | status 1: <failure message>

Lines are grouped by kind, each group in the order the run recorded it. `reason` is
rendered with sorted keys; strings are bare unless they hold spaces or punctuation
(then JSON-quoted). Locations are repository-relative and cut to file:line.
Refresh after an intended change with `pytest --update-golden`, then review `git diff`.
"""
from __future__ import annotations

import difflib
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
REFRESH = "python -m pytest {test} --update-golden"
_BARE = re.compile(r"[A-Za-z0-9_./:@+\-<>]+")


def repo_path(file: str) -> str:
    """A path as seen from the repository root (left as given when outside it)."""
    p = Path(file)
    if not p.is_absolute():
        p = Path.cwd() / p
    try:
        return p.resolve().relative_to(ROOT).as_posix()
    except (ValueError, OSError):
        return file


def _text(s: str) -> str:
    return s.replace(f"{ROOT}/", "")


def render_value(v) -> str:
    """One fact, compactly and deterministically (dicts by sorted key)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}={render_value(v[k])}" for k in sorted(v, key=str)) + "}"
    if isinstance(v, (list, tuple, set, frozenset)):
        items = sorted(v, key=str) if isinstance(v, (set, frozenset)) else v
        return "[" + ", ".join(render_value(x) for x in items) + "]"
    s = _text(str(v))
    return s if _BARE.fullmatch(s) else json.dumps(s, ensure_ascii=False)


def render_loc(loc) -> str:
    if loc is None:
        return "-"
    return f"{repo_path(loc.file)}:{loc.line}" if loc.line > 0 else repo_path(loc.file)


def render_decisions(ctx, failure: BaseException | None = None, title: str = "") -> str:
    """Every insertion, removal, diagnostic and pass run of `ctx`, and the final status."""
    lines = [f"# decisions: {title}"] if title else []
    for i in ctx.insertions:
        edge = f"{i.producer or '-'}->{render_value(list(i.consumers))}"
        lines.append(f"insert {i.type} {i.name} graph={i.graph} pass={i.pass_id} rule={i.rule} "
                     f"loc={render_loc(i.rule_loc)} edge={edge} reason={render_value(i.reason)}"
                     + (f" rejected={render_value([a.id for a in i.alternatives])}" if i.alternatives else ""))
    for r in ctx.removals:
        lines.append(f"remove {r.type} {r.name} graph={r.graph} pass={r.pass_id} rule={r.rule} "
                     f"reason={render_value(r.reason)}")
    for d in ctx.diagnostics:
        lines.append(f"diag {d.code} {d.severity} pass={d.pass_id}: {_text(d.message)}")
    for run in ctx.pass_runs:
        msg = f": {_text(run.message)}" if run.message else ""
        lines.append(f"pass {run.pass_id} {run.status} +{run.inserted} -{run.removed}{msg}")
    lines.append(f"status 1: {_text(str(failure))}" if failure is not None else "status 0")
    return "\n".join(lines) + "\n"


def check_golden(golden: Path, text: str, update: bool, test: str) -> None:
    """Compare `text` with the golden file (or rewrite it with --update-golden)."""
    shown = repo_path(str(golden))
    refresh = REFRESH.format(test=test)
    if update:
        if not golden.is_file() or golden.read_text(encoding="utf-8") != text:
            golden.write_text(text, encoding="utf-8")
        return
    if not golden.is_file():
        pytest.fail(f"{shown}: no golden file; write it with `{refresh}` and review it", pytrace=False)
    want = golden.read_text(encoding="utf-8")
    if want != text:
        diff = "".join(difflib.unified_diff(want.splitlines(True), text.splitlines(True),
                                            fromfile=f"{shown} (golden)", tofile=f"{shown} (this run)"))
        pytest.fail(f"{shown}: decisions differ from the golden file\n{diff}\n"
                    f"if the change is intended, refresh with `{refresh}` and review `git diff`", pytrace=False)
