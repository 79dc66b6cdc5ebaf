"""The report model (no browser): explanations, neighbourhoods, rule texts, sections,
JSON stability, HTML escaping and size, `memconflict explain`, the terminal output."""
from __future__ import annotations

import html as html_lib
import io
import json
import re
import shutil
from pathlib import Path

import pytest

from engine.cli import main
from engine.core.errors import Cite, Loc
from engine.core.yamlloc import item_span, load_yaml, span_of
from engine.passes.context import RunContext
from engine.report.explain import RuleTexts, explain, is_rejected_step
from engine.report.html import embed_json, render_html
from engine.report.model import build_report, graph_stats, report_json
from engine.report.neighbourhood import layout, undo
from engine.report.text import Progress
from engine.passes.manager import check_graph, resolve_passes, run_passes
from harness import CASES, run_case

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "train_step.pbtxt"
HOSTILE = "<img src=x onerror=alert(1)>"


def report_for(case: str, passes=("mem_rw_conflict",)) -> dict:
    ctx, _, _ = run_case(CASES / "rw" / case, passes=list(passes))
    return build_report(ctx, case, graph_stats(ctx.model))


def card(report: dict, name: str) -> dict:
    return next(i for i in report["insertions"] if i["name"] == name)


def cli(args, capsys):
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


# ---- explanations -------------------------------------------------------------------
def test_rw_card_explains_the_decision_path_with_rules_and_facts():
    c = card(report_for("RW-01.yaml"), "const1_Identity0")
    # the decision path, then the alternatives GE rejected there (tests/test_alternatives.py)
    steps = [s for s in c["explanation"] if not is_rejected_step(c, s)]
    assert [s["rule"] for s in c["explanation"][len(steps):]] == ["rw/matrix#copy-after-producer",
                                                                 "rw/matrix#skip-last-edge"]
    assert [s["text"] for s in steps] == [
        "const1:0 is ReadOnlyConst",
        "allreduce:0 is ScopeWriteable",
        "matrix[ReadOnlyConst][ScopeWriteable] = insert_identity"]
    # the card's rule is the typing rule that made the difference; the matrix cell is a step
    assert [s["rule"] for s in steps] == ["rw/out/const", "rw/in/input-mutable", "rw/matrix"]
    assert c["rule"] == "rw/in/input-mutable" and c["rule_loc"] == steps[1]["loc"]
    assert steps[0]["loc"].startswith("rules/ge/rw.yaml:") and steps[2]["loc"] == c["reason"]["cell_loc"]
    assert ["_input_mutable", "true"] in steps[1]["facts"]
    assert any(f[0] == "op class rw_const" and f[1].startswith("Const is in rw_const (rules/ge/ops.yaml:")
               for f in steps[0]["facts"])


def test_rule_texts_are_the_rules_own_source():
    report = report_for("RW-01.yaml")
    c = card(report, "const1_Identity0")
    rule = report["rules"][c["explanation"][1]["loc"]]
    assert rule["id"] == "rw/in/input-mutable"
    assert rule["text"].startswith("- id: rw/in/input-mutable\n")
    assert 'when: attr_true(node, INPUT_MUTABLE)' in rule["text"]
    cell = report["rules"][c["reason"]["cell_loc"]]      # a matrix cell: its row, the cell marked
    a, b = cell["mark"]
    assert cell["text"].startswith("ReadOnlyConst:") and cell["text"][a:b] == "insert_identity"


def test_rule_texts_quote_exactly_the_cited_item(tmp_path):
    f = tmp_path / "r.yaml"
    f.write_text("top:\n  insert:\n    type: Identity\n    name: x\n  other: 1\nrules:\n  - id: a/b\n"
                 "    when: true\n    value: 1\n  - id: a/c\nm: {k: v, w: insert_identity}\n")
    doc = load_yaml(f)
    t = RuleTexts()
    rules = doc["rules"]
    assert t.get(Cite("a/b", *item_span(rules, 0, doc.loc))) == {"id": "a/b", "text": "- id: a/b\n  when: true\n  value: 1"}
    assert t.get(Cite("a/c", *item_span(rules, 1, doc.loc)))["text"] == "- id: a/c"
    assert t.get(Cite("", *span_of(doc["top"], "insert", doc.loc)))["text"] == "insert:\n  type: Identity\n  name: x"
    m = doc["m"]
    cell = t.get(Cite("", m.value_locs["w"], m["w"].end, span_of(doc, "m", doc.loc)))
    assert cell["text"] == "m: {k: v, w: insert_identity}" and cell["text"][slice(*cell["mark"])] == "insert_identity"
    assert t.get(Cite("", Loc(str(f), 99, 1), Loc(str(f), 99, 9))) is None
    assert t.get(Cite("", Loc("no/such.yaml", 1, 1), Loc("no/such.yaml", 1, 2))) is None


def test_unknown_reason_keys_stay_facts_and_known_ones_read_as_sentences():
    rec = {"name": "n", "producer": "p:0", "consumers": ["c:1"], "graph": "g", "reason": {
        "why": "the loop body's outputs would overwrite its inputs", "symbol": "s7",
        "symbol_anchors": ["a_out_0", {"anchor": "b_in_1", "attrs": {"continuous": True}}],
        "a": "a_out_0", "a_marks": ["continuous_output"], "b": "b_in_1", "b_marks": ["normal"],
        "pair": "continuous_output × normal", "pair_rule": "registered", "pair_loc": _cite("", 9),
        "checker": "continuous-out", "checker_loc": _cite("layout/continuous-out", 40), "verdict": "conflict",
        "side": "input", "custom": {"deep": [1, 2]}, "new_rule": _cite("x/y", 3),
        "old_rule": "x/z (rules/x.yaml:4)"}}          # a string that looks like a citation is only a fact
    steps = explain(rec, None, rec["reason"])
    texts = [s["text"] for s in steps]
    assert texts == [
        "the loop body's outputs would overwrite its inputs",
        "2 anchor(s) share memory symbol s7: a_out_0, b_in_1 (attrs: {continuous: true})",
        "a_out_0 is marked continuous_output",
        "b_in_1 is marked normal",
        "the marks continuous_output × normal conflict (registered)",
        "checker continuous-out picked this anchor to isolate; verdict: conflict; isolated side: input",
        "new rule: x/y"]
    assert [(s["rule"], s["loc"]) for s in steps[4:]] == [
        ("", "rules/x.yaml:9:3"), ("continuous-out", "rules/x.yaml:40:3"), ("x/y", "rules/x.yaml:3:3")]
    assert explain({"name": "n", "reason": {}}) == []


def _cite(rule_id: str, line: int) -> Cite:
    return Cite(rule_id, Loc("rules/x.yaml", line, 3), Loc("rules/x.yaml", line + 1, 1))


# ---- neighbourhoods and drawings ----------------------------------------------------------
def test_before_undoes_the_insertion_and_its_moved_control_edges():
    c = card(report_for("RW-01.yaml"), "const1_Identity0")
    hood = c["neighbourhood"]
    names = [n[0] for n in hood["nodes"]]
    assert names[0] == "const1_Identity0" and hood["nodes"][0][1] == "Identity"
    edge = lambda e: (names[e[0]], e[1], names[e[2]], e[3])  # noqa: E731
    after = {edge(e) for e in hood["edges"]}
    assert ("const1", 0, "const1_Identity0", 0) in after and ("const1_Identity0", 0, "allreduce", 0) in after
    assert ("ctrl_const", -1, "const1_Identity0", -1) in after and c["moved_control"] == ["ctrl_const"]
    before = {edge(e) for e in undo(hood, c["moved_control"])}
    assert before == {("const1", 0, "allreduce", 0), ("const1", 0, "if", 0), ("ctrl_const", -1, "allreduce", -1)}


def test_subgraph_insertions_carry_their_graph_path():
    c = card(report_for("RW-08.yaml"), "assign_Identity0")
    assert c["graph"] == "else_branch"
    assert c["path"][0] == {"graph": "root"} and c["path"][-1]["graph"] == "else_branch" and c["path"][-1]["via"]


def test_layout_runs_left_to_right_without_overlap():
    edges = [[1, 0, 0, 0], [0, 0, 2, 0], [0, 0, 3, 1], [1, 0, 4, 0], [5, -1, 0, -1]]
    lay = layout(6, edges)
    pos = lay["pos"]
    for s, _, d, _ in edges:
        assert pos[s][0] < pos[d][0]
    assert len({tuple(p) for p in pos}) == 6
    assert all(0 <= p[0] < lay["w"] and 0 <= p[1] < lay["h"] for p in pos)
    assert layout(6, edges, skip=0)["pos"][0] is None


def test_neighbourhoods_are_capped(tmp_path):
    from engine.core.dumpio import load_model
    from engine.report.neighbourhood import MAX_PEERS, MAX_SIBLINGS, capture
    ops = ['  op { name: "src" type: "Const" output_desc { dtype: DT_FLOAT } }\n',
           '  op { name: "x" type: "Identity" input: "src:0" input_desc { dtype: DT_FLOAT } '
           'output_desc { dtype: DT_FLOAT } }\n']
    for k in range(3 * MAX_PEERS):
        ops.append(f'  op {{ name: "c{k}" type: "Relu" input: "x:0" input: "x:-1" input_desc {{ dtype: DT_FLOAT }} }}\n')
        ops.append(f'  op {{ name: "s{k}" type: "Relu" input: "src:0" input_desc {{ dtype: DT_FLOAT }} }}\n')
    path = tmp_path / "fan.pbtxt"
    path.write_text('graph {\n  name: "g"\n' + "".join(ops) + "}\n")
    hood = capture(load_model(path).root.find("x"))
    assert len(hood["nodes"]) == 2 + MAX_PEERS + MAX_SIBLINGS       # x, src, consumers (data and ctrl), siblings
    assert hood["omitted"] == 3 * (3 * MAX_PEERS) - 2 * MAX_PEERS - MAX_SIBLINGS


# ---- the whole report ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def example(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("example")
    outs = []
    for k in range(2):
        rj, rh = tmp / f"r{k}.json", tmp / f"r{k}.html"
        assert main(["run", str(EXAMPLE), "--report-json", str(rj), "--report-html", str(rh), "--quiet"]) == 0
        outs.append((rj.read_bytes(), rh.read_text()))
    return outs


def test_json_is_stable_and_carries_the_page_model(example):
    (a, html), (b, _) = example
    assert a == b
    report = json.loads(a)
    assert report["report_schema"] == 2 and "seconds" not in a.decode() and '"time"' not in a.decode()
    ids = [s["id"] for s in report["sections"]]
    assert ids[:4] == ["summary", "run", "passes", "counts"] and "insertions" in ids
    assert all(set(s) == {"id", "title", "kind", "data"} for s in report["sections"])
    ins = report["insertions"]
    assert len(ins) == report["summary"]["inserted"] > 0
    assert any(i["type"] == "Identity" for i in ins)
    for i in ins:
        assert {"explanation", "neighbourhood", "path", "attr_values"} <= set(i)
        assert i["neighbourhood"]["nodes"][0][0] == i["name"]
        for s in i["explanation"]:
            assert set(s) == {"text", "rule", "loc", "facts"}
    assert report["summary"]["by_type"]["Identity"] == sum(1 for i in ins if i["type"] == "Identity")


def test_html_is_byte_identical_and_shows_pass_times_only_on_request(example, tmp_path):
    (_, html0), (_, html1) = example
    assert html0 == html1 and not re.search(r"<td class=\"num\">\d+\.\d{3} s</td>", html0)
    rh = tmp_path / "t.html"
    assert main(["run", str(EXAMPLE), "--report-html", str(rh), "--times", "--quiet"]) == 0
    assert re.search(r"<td class=\"num\">\d+\.\d{3} s</td>", rh.read_text())


def test_html_embeds_every_insertion(example):
    (raw, html), _ = example
    report = json.loads(raw)
    data = json.loads(re.search(r'<script type="application/json" id="mc-data">(.*?)</script>', html, re.S)[1])
    assert [c["name"] for c in data["insertions"]] == [i["name"] for i in report["insertions"]]
    assert all({"after", "before"} == set(c["draw"]) for c in data["insertions"])
    assert "http://" not in html.replace("http://www.w3.org/2000/svg", "") and "https://" not in html
    assert "<link" not in html and "src=" not in html.split('id="mc-data"')[0]
    csp = html_lib.unescape(re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', html)[1])
    assert "default-src 'none'" in csp and "script-src 'sha256-" in csp and "unsafe-inline" not in csp.split("script-src")[1]


def test_sections_render_by_kind_and_unknown_kinds_as_data(example):
    (raw, _), _ = example
    report = json.loads(raw)
    report["sections"].append({"id": "plan", "title": "Variable plan", "kind": "table", "data": {
        "columns": ["variable", "offset"], "numeric": [1], "rows": [["v1", "0"], [{"text": "v2", "href": "#v2"}, "512"]]}})
    report["sections"].append({"id": "diff", "title": "Rule-set diff", "kind": "future-kind", "data": {"added": ["r/x"]}})
    html = render_html(report)
    assert 'id="sec-plan"' in html and "<th>variable</th>" in html and '<a href="#v2">v2</a>' in html
    assert 'id="sec-diff"' in html and "&#34;added&#34;" in html and 'href="#sec-diff"' in html


def test_table_cells_render_every_part_kind_escaped(example):
    """Note [table rows as markup]: the rows are markup made in engine/report/html.py; each part
    kind keeps its element, several parts are split by <br>, and every value is escaped."""
    (raw, _), _ = example
    report = json.loads(raw)
    report["sections"].append({"id": "t", "title": "T", "kind": "table", "data": {
        "columns": ["a", "b"], "numeric": [1], "rows": [
            [[{"text": "f<1>", "filter": ["pass", 'x"y']}, {"text": "a&b", "href": "#h'1", "id": "i<d"},
              {"text": "bad", "badge": "warning", "note": True}, None], 7],
            [{"text": "no id", "href": "#z"}, "<script>"]]}})
    html = render_html(report)
    assert ('<tr><td><button type="button" class="mc-filter-link" data-key="pass" data-value="x&#34;y">f&lt;1&gt;'
            '</button><br><a id="i&lt;d" href="#h&#39;1">a&amp;b</a><br><span class="mc-note"><span class="mc-badge '
            'mc-sev-warning">bad</span></span><br></td><td class="num">7</td></tr>') in html
    assert '<tr><td><a href="#z">no id</a></td><td class="num">&lt;script&gt;</td></tr>' in html
    empty = json.loads(raw)
    empty["sections"].append({"id": "e", "title": "E", "kind": "table", "data": {"columns": ["a", "b"], "rows": []}})
    assert '<tr><td colspan="2" class="mc-muted">nothing</td></tr>' in render_html(empty)


def hostile_dump(tmp_path: Path) -> Path:
    """A GE dump whose names and attributes try to break out of the page."""
    def op(name, typ, inputs=(), attrs=""):
        ins = "".join(f'    input: "{i}"\n    input_desc {{ dtype: DT_FLOAT }}\n' for i in inputs)
        return f'  op {{\n    name: "{name}"\n    type: "{typ}"\n{ins}    output_desc {{ dtype: DT_FLOAT }}\n{attrs}  }}\n'
    mutable = '    attr { key: "_input_mutable" value { b: true } }\n'
    text = ('graph {\n  name: "g</script><!--"\n' + op(HOSTILE, "Const") + op("</script><script>alert(2)</script>",
            "HcomAllReduce", [HOSTILE + ":0"], mutable + '    attr { key: "note" value { s: "<!-- -->" } }\n') + "}\n")
    path = tmp_path / "hostile.pbtxt"
    path.write_text(text)
    return path


def hostile_pack(tmp_path: Path) -> Path:
    pack = tmp_path / "pack"
    shutil.copytree(ROOT / "rules" / "ge", pack)
    rw = pack / "rw.yaml"
    text = rw.read_text()
    assert "doc: collectives that write their input" in text
    rw.write_text(text.replace("doc: collectives that write their input",
                               "doc: </script><script>alert(3)</script><!-- collectives that write their input"))
    return pack


def test_untrusted_text_is_escaped_everywhere(tmp_path, capsys):
    rj, rh = tmp_path / "r.json", tmp_path / "r.html"
    code, _, err = cli(["run", hostile_dump(tmp_path), "--passes", "mem_rw_conflict", "--rules", hostile_pack(tmp_path),
                        "--report-json", rj, "--report-html", rh, "--quiet"], capsys)
    assert code == 0, err
    report = json.loads(rj.read_text())
    assert report["insertions"][0]["name"] == HOSTILE + "_Identity0"
    assert any("alert(3)" in r["text"] for r in report["rules"].values())
    html = rh.read_text()
    assert "<img" not in html and "alert(2)</script>" not in html and "<script>alert" not in html
    assert html.count("</script>") == 2 and html.count("<script") == 2      # the data block and the page script
    assert "<!--" not in html
    assert re.search(r"\son\w+=", html.split('id="mc-data"')[0]) is None   # no inline handlers
    data = re.search(r'<script type="application/json" id="mc-data">(.*?)</script>', html, re.S)[1]
    assert json.loads(data)["insertions"][0]["name"] == HOSTILE + "_Identity0"
    assert "&lt;/script&gt;&lt;!--" in html                                # the graph name, as text


def test_embed_json_round_trips_hostile_strings():
    value = {"a": "</script><!--<script>", "b": "\u2028&amp;>", "c": [HOSTILE]}
    text = str(embed_json(value))
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == value


def test_page_data_made_a_card_at_a_time_is_the_whole_embedded(tmp_path, capsys):
    """Note [cards one at a time]: the data block is embed_json of every card, the rules and
    the shared steps, though each card is encoded (and escaped) alone."""
    from engine.report.html import _card, _page_data, _share_steps
    rj = tmp_path / "r.json"
    code, _, err = cli(["run", hostile_dump(tmp_path), "--passes", "mem_rw_conflict", "--rules", hostile_pack(tmp_path),
                        "--report-json", rj, "--quiet"], capsys)
    assert code == 0, err
    report = json.loads(rj.read_text())
    report["insertions"] += [dict(report["insertions"][0], name="b\u2028>&"), report["insertions"][0]]
    table, seen, cards = [], {}, []
    for rec in report["insertions"]:
        cards.append(_card(rec))
        _share_steps(cards[-1], table, seen)
    assert cards[1]["explanation"] == cards[0]["explanation"] and len(table) == len(report["insertions"][0]["explanation"])
    assert str(_page_data(report)) == str(embed_json({"insertions": cards, "rules": report["rules"], "steps": table}))
    assert json.loads(str(_page_data(report)))["insertions"][1]["name"] == "b\u2028>&"
    assert str(_page_data({"insertions": []})) == '{"insertions":[],"rules":{},"steps":[]}'


def test_large_markup_spliced_is_the_page_rendered_plainly(tmp_path, capsys):
    """Note [large markup spliced]: the page with the data block and the tables' bodies put in
    after rendering is the page jinja renders with them; a template that does not print a
    marker as a piece of its own falls back to the plain render."""
    from engine.report.html import _env, _render, page_view
    rj = tmp_path / "r.json"
    code, _, err = cli(["run", hostile_dump(tmp_path), "--passes", "mem_rw_conflict", "--rules", hostile_pack(tmp_path),
                        "--report-json", rj, "--quiet"], capsys)
    assert code == 0, err
    report = json.loads(rj.read_text())
    report["sections"].append({"id": "t", "title": "<mc-large-0>", "kind": "table", "data": {
        "columns": ["<mc-large-1>"], "rows": [["<mc-large-0>"], [{"text": "x", "href": "#<mc-large-2>"}]]}})
    template = _env().get_template("report.html.j2")
    view = page_view(report)
    page = "".join(_render(template, view))
    assert page == template.render(**view) and "&lt;mc-large-0&gt;" in page and "<mc-large-" not in page
    other = _env().from_string('{{ "[" ~ data ~ "]" }}|{% for s in sections %}{{ s.data.rows if s.kind == "table" }}{% endfor %}')
    assert "".join(_render(other, view)) == other.render(**view) and "<mc-large-" not in "".join(_render(other, view))


def test_html_grows_linearly():
    base = report_for("RW-04.yaml")
    one = base["insertions"][0]

    def size(n):
        r = dict(base)
        r["insertions"] = [dict(one, name=f"{one['name']}_{k}") for k in range(n)]
        return len(render_html(r))

    s1, s2, s4 = size(200), size(400), size(800)
    assert 1.8 < (s4 - s2) / (s2 - s1) < 2.2


# ---- terminal -----------------------------------------------------------------------------
def test_explain_prints_the_card(capsys):
    code, out, _ = cli(["explain", CASES / "rw" / "RW-01.yaml", "const1_Identity0", "--passes", "mem_rw_conflict"], capsys)
    assert code == 0
    assert out.startswith("const1_Identity0: Identity inserted by mem_rw_conflict\n")
    assert "  where  const1:0 -> [Identity const1_Identity0] -> allreduce:0\n" in out
    assert re.search(r"    1\. const1:0 is ReadOnlyConst  \(rule rw/out/const, rules/ge/rw\.yaml:\d+:\d+\)\n", out)
    assert "         | - id: rw/in/input-mutable\n" in out and "         · _input_mutable: true\n" in out
    assert "  control edges moved onto it: ctrl_const\n" in out
    assert "  before  const1:0 -> if:0; const1:0 -> allreduce:0; ctrl_const ..> allreduce\n" in out


def test_explain_unknown_node_exit_2_with_close_matches(capsys):
    code, out, err = cli(["explain", CASES / "rw" / "RW-04.yaml", "const1_Identity", "--passes", "mem_rw_conflict"],
                         capsys)
    assert code == 2 and out == ""
    assert "RW-04.yaml: error: 'const1_Identity' was not inserted by the passes run (mem_rw_conflict)" in err
    assert "hint: did you mean 'const1_Identity0', 'const1_Identity1'?" in err
    code, _, err = cli(["explain", CASES / "rw" / "RW-04.yaml", "const1", "--passes", "mem_rw_conflict"], capsys)
    assert code == 2 and "'const1' was not inserted by the passes run (mem_rw_conflict); it is a node of the input graph" in err


def test_explain_names_a_removed_node(capsys):
    code, _, err = cli(["explain", CASES / "rw" / "RW-02.yaml", "identity", "--passes", "mem_rw_conflict"], capsys)
    assert code == 2
    assert re.search(r"; it was removed by mem_rw_conflict \(rule rw/[a-z-]+\)\n", err), err


def test_run_summary_table(capsys, default_pack):
    pack = default_pack
    ctx, _, _ = run_case(CASES / "rw" / "RW-04.yaml", pack=pack, passes=["mem_rw_conflict"])
    from engine.report.text import summary_text
    text = summary_text(ctx, "RW-04.yaml")
    lines = text.splitlines()
    assert lines[0] == "memconflict: RW-04.yaml with pack ge " + pack.version + " (rules/ge)"
    assert lines[1].split() == ["#", "pass", "status", "inserted", "removed", "time"]
    assert lines[3].split()[:5] == ["1", "mem_rw_conflict", "ok", "2", "0"]
    assert "  2 node(s) inserted (Identity 2), 0 removed, 0 diagnostic(s)" in lines
    assert "  by rule: rw/in/fifo 2" in lines        # the typing rule that made the difference


class FakeTTY(io.StringIO):
    def isatty(self):
        return True


def test_progress_only_on_a_terminal_and_not_when_quiet():
    import time
    tty = FakeTTY()
    with Progress(tty, enabled=True, delay=0.0, interval=0.01) as p:
        p.stage("pass 1/2 mem_rw_conflict", lambda: 7)
        time.sleep(0.1)
    text = tty.getvalue()
    assert "memconflict: pass 1/2 mem_rw_conflict  7 inserted" in text and text.endswith("\r\x1b[K")
    for stream, enabled in ((io.StringIO(), True), (FakeTTY(), False)):
        with Progress(stream, enabled=enabled, delay=0.0, interval=0.01) as p:
            p.stage("x")
            time.sleep(0.05)
        assert stream.getvalue() == ""


def test_run_is_quiet_when_stderr_is_not_a_terminal(tmp_path, capsys):
    code, out, err = cli(["run", CASES / "rw" / "RW-01.yaml", "--passes", "mem_rw_conflict",
                          "--report-html", tmp_path / "r.html"], capsys)
    assert code == 0 and err == "" and "1 node(s) inserted" in out


def test_report_without_insertions(default_pack):
    pack = default_pack
    from engine.core.yamlgraph import load_yaml_graph
    model, options = load_yaml_graph(CASES / "rw" / "RW-01.yaml", pack)
    ctx = RunContext(pack, model, options)
    check_graph(ctx)
    run_passes(ctx, resolve_passes(pack, [], options))
    report = build_report(ctx, "x", graph_stats(model))
    assert report["insertions"] == [] and json.loads(report_json(report)) == report
    assert 'id="sec-insertions"' in render_html(report)


def test_the_report_is_frozen_as_it_is_built():
    """A report is kept until its forms are written: it is frozen with the model, so the
    first collection after it does not walk its objects (Note [gc], engine/report/model.py)."""
    import gc

    def containers(x) -> int:
        if isinstance(x, dict):
            return 1 + sum(containers(v) for v in x.values())
        if isinstance(x, list):
            return 1 + sum(containers(v) for v in x)
        return 0
    ctx, _, _ = run_case(CASES / "rw" / "RW-01.yaml", passes=["mem_rw_conflict"])
    before = gc.get_freeze_count()
    report = build_report(ctx, "x", graph_stats(ctx.model))
    assert gc.get_freeze_count() - before >= containers(report) > 10
