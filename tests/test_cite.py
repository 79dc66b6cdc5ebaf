"""Provenance is data (STYLE.md §14): every decision cites exactly one pack item as
a Cite(rule_id, loc, span), the report quotes exactly that item, and nothing reads
a rendered citation back."""
from __future__ import annotations

import re
from dataclasses import fields, is_dataclass
from functools import lru_cache
from pathlib import Path

import pytest

from engine.core.errors import Cite, Loc
from engine.core.io import load_graph
from engine.core.yamlloc import item_span, load_yaml, span_of
from engine.pack.model import Rule
from engine.passes.catalog import load_pack
from engine.passes.context import RunContext, reason_cites
from engine.passes.manager import check_graph, resolve_passes, run_passes
from engine.report.explain import RuleTexts
from engine.report.model import build_report, graph_stats
from harness import CASES, run_case

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "train_step.pbtxt"
LAYOUT_CASES = ("IM-01.yaml", "CI-01.yaml", "CO-01.yaml", "UI-06.yaml", "NR-02.yaml", "RS-01.yaml", "IM-05.yaml")


@lru_cache(maxsize=None)
def _pack():
    return load_pack()


def _layout(case: str):
    ctx, _, _ = run_case(CASES / "layout" / case, pack=_pack(), passes=["mem_layout_conflict"])
    return ctx, build_report(ctx, case, graph_stats(ctx.model))


@lru_cache(maxsize=None)
def _train_step():
    pack = _pack()
    model, opts = load_graph(str(EXAMPLE), pack)
    ctx = RunContext(pack, model, opts)
    check_graph(ctx)
    run_passes(ctx, resolve_passes(pack, None, opts))
    return ctx, build_report(ctx, str(EXAMPLE), graph_stats(ctx.model))


# ---- the quoted text is the one item that decided ----------------------------------------
@pytest.mark.parametrize("case", LAYOUT_CASES)
def test_layout_card_quotes_exactly_one_checker(case):
    ctx, report = _layout(case)
    checkers = ctx.pack.configs["layout_conflict"].checkers
    cards = [c for c in report["insertions"] if c["reason"].get("checker") in checkers]
    assert cards
    for c in cards:
        name = c["reason"]["checker"]
        text = report["rules"][c["rule_loc"]]["text"]
        assert text.startswith(f"{name}:\n  doc: ") and "\n  body: " in text
        others = [n for n in checkers if n != name and re.search(rf"^\s*{re.escape(n)}:", text, re.M)]
        assert others == [], f"{case}: the quote of {name} also holds {others}"
        assert "checkers:" not in text
        step = next(s for s in c["explanation"] if s["text"].startswith(f"checker {name} "))
        assert step["loc"] == c["rule_loc"]          # the card's rule and its checker step: one entry


@pytest.mark.parametrize("case", LAYOUT_CASES)
def test_layout_pair_step_quotes_its_table_entry(case):
    _, report = _layout(case)
    for c in report["insertions"]:
        if "pair_loc" not in c["reason"]:
            continue
        text = report["rules"][c["reason"]["pair_loc"]]["text"]
        a, b = c["reason"]["pair"].split(" × ")
        assert text.startswith("- ") and "\n" not in text and a in text and b in text


def test_matrix_cell_card_quotes_its_row_with_the_cell_marked():
    ctx, _, _ = run_case(CASES / "rw" / "RW-01.yaml", pack=_pack(), passes=["mem_rw_conflict"])
    report = build_report(ctx, "RW-01.yaml", graph_stats(ctx.model))
    ins = next(i for i in ctx.insertions if i.name == "const1_Identity0")
    c = next(x for x in report["insertions"] if x["name"] == "const1_Identity0")
    cell = ins.reason["cell_loc"]                 # the card cites the typing rule, its fact the cell
    assert ins.cite.rule_id == c["rule"] == "rw/in/input-mutable"
    entry = report["rules"][c["reason"]["cell_loc"]]
    line = Path(cell.loc.file).read_text().splitlines()[cell.loc.line - 1]
    row = line.strip()
    assert entry["text"] == row and row.startswith("ReadOnlyConst: {")
    a, b = entry["mark"]
    assert entry["text"][a:b] == c["reason"]["decision"] == "insert_identity"
    assert a == cell.loc.col - 1 - (len(line) - len(row))
    assert c["reason"]["cell_loc"] == str(cell.loc)


def test_variable_card_quotes_its_policy_entry():
    ctx, report = _train_step()
    cards = [c for c in report["insertions"] if c["pass"] == "variable_prepare"]
    assert cards
    for c in cards:
        assert c["rule_loc"].startswith("rules/ge/variables.yaml:")
        entry = report["rules"][c["rule_loc"]]
        assert entry["id"] == c["rule"]
        assert "var_policy" not in entry["text"] and "file:" not in entry["text"]
    ref = next(c for c in cards if c["rule"] == "var/ref-after-writer")
    assert report["rules"][ref["rule_loc"]]["text"] == "var_like: [Variable, VariableV2, RefData]"


def test_atomic_card_quotes_its_predicate_entry_with_the_expression_marked():
    ctx, report = _train_step()
    c = next(c for c in report["insertions"] if c["pass"] == "atomic_addr_clean")
    entry = report["rules"][c["rule_loc"]]
    a, b = entry["mark"]
    assert re.match(r"\w+: ", entry["text"]) and entry["text"][a:b].startswith(">-\n")
    assert entry["text"][b:] == ""


# ---- provenance is data -------------------------------------------------------------------
def _all_runs():
    yield _train_step()[0]
    for sub in sorted(d for d in CASES.iterdir() if d.is_dir()):
        for f in sorted(sub.glob("*.yaml")):
            yield run_case(f, pack=_pack())[0]


def _rendered_rule_cites(pack) -> set[str]:
    out = set()
    for cfg in pack.configs.values():
        if is_dataclass(cfg):
            for f in fields(cfg):
                v = getattr(cfg, f.name)
                if isinstance(v, (list, tuple)):
                    out |= {str(r.cite) for r in v if isinstance(r, Rule)}
    return out


def _check_span(c: Cite, lines: dict) -> None:
    assert isinstance(c, Cite) and isinstance(c.loc, Loc) and isinstance(c.span, Loc)
    path = Path(c.loc.file)
    assert path.is_file(), c
    text = lines.setdefault(c.loc.file, path.read_text().splitlines())
    assert c.span.file == c.loc.file
    assert 1 <= c.loc.line <= len(text) and c.loc.col >= 1
    assert (c.loc.line, c.loc.col) <= (c.span.line, c.span.col) and c.span.line <= len(text) + 1
    if c.row is not None:
        start, end = c.row
        assert (start.line, start.col) <= (c.loc.line, c.loc.col) and (c.span.line, c.span.col) <= (end.line, end.col)


def test_every_decision_cites_one_item_inside_its_file():
    """Every insertion, every cited fact and every ATTR_SET diagnostic carries a Cite
    whose span lies in the cited file; no fact is a rendered citation string."""
    rendered = _rendered_rule_cites(_pack())
    lines: dict = {}
    seen = attr_sets = 0
    for ctx in _all_runs():
        for ins in ctx.insertions:
            _check_span(ins.cite, lines)
            assert ins.cite.rule_id == ins.rule
            for c in reason_cites(ins.reason):
                _check_span(c, lines)
            assert not [v for v in ins.reason.values() if isinstance(v, str) and v in rendered]
            seen += 1
        for d in ctx.diagnostics:
            if d.code == "ATTR_SET" and d.details.get("rule"):         # set by a rewrite rule
                assert len(d.cites) == 1 and d.cites[0].rule_id == d.details["rule"]
                attr_sets += 1
            for c in d.cites:
                _check_span(c, lines)
    assert seen > 200 and attr_sets > 0


def test_report_rules_are_keyed_by_the_cites_and_hold_their_ids():
    ctx, report = _train_step()
    want = {str(i.cite.loc) for i in ctx.insertions} | {str(c.loc) for i in ctx.insertions for c in reason_cites(i.reason)}
    want |= {str(c.loc) for d in ctx.diagnostics for c in d.cites}
    want |= {str(a.loc) for i in ctx.insertions for a in i.alternatives}     # the rejected alternatives
    assert set(report["rules"]) == want
    for c in report["insertions"]:
        assert report["rules"][c["rule_loc"]]["id"] == c["rule"]
    for d in report["diagnostics"]:
        assert all(x["loc"] in report["rules"] for x in d["cites"])


# ---- located YAML knows where values end --------------------------------------------------
def test_located_yaml_records_where_each_entry_ends(tmp_path):
    f = tmp_path / "t.yaml"
    f.write_text("a:\n  x:\n    doc: hi\n    body: |-\n      foo\n      bar\n\n  # note\n  y: [1, 2]  # c\n"
                 "  z:\n    - id: q\n      when: w\n    - {a: 1, b: 2}\nn: 3\n")
    doc = load_yaml(f)
    a = doc["a"]
    assert span_of(a, "x", doc.loc) == (Loc(str(f), 2, 3), Loc(str(f), 8, 1))     # the block scalar's last line
    assert RuleTexts().get(Cite("", *span_of(a, "x", doc.loc)))["text"] == "x:\n  doc: hi\n  body: |-\n    foo\n    bar"
    assert span_of(a, "y", doc.loc)[1] == Loc(str(f), 9, 12)                     # the flow list, not its comment
    z = a["z"]
    assert item_span(z, 0, doc.loc) == (Loc(str(f), 11, 7), Loc(str(f), 12, 14))  # not the next item
    assert item_span(z, 1, doc.loc) == (Loc(str(f), 13, 7), Loc(str(f), 13, 19))
    assert a.end == Loc(str(f), 13, 19) and doc.value_ends["n"] == Loc(str(f), 14, 5)
    assert span_of(a, "missing", doc.loc) == (doc.loc, doc.loc)
