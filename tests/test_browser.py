"""The HTML report in a real browser: headless Chromium, driven with `--dump-dom`.

A copy of the report gets two small scripts (admitted by adding their hashes to
the page's Content-Security-Policy): one at the top records errors, CSP
violations and alerts; one at the end runs the checks once the page has loaded
and writes the results into a <pre>, which the dumped DOM carries back. No Python
dependency beyond the standard library; skipped when Chromium is absent (CI
installs it, see .ci/run, and fails instead of skipping).
"""
from __future__ import annotations

import base64
import hashlib
import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from urllib.parse import quote

import pytest

from engine.cli import main

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "train_step.pbtxt"
CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)

if CHROMIUM is None:
    if os.environ.get("CI") == "true":
        pytest.fail("chromium is required in CI (.ci/run installs it)", pytrace=False)
    pytestmark = pytest.mark.skip(reason="chromium is not installed (apt-get install chromium); CI installs it")

RECORD = """window.__mc = {errors: []};
window.addEventListener("error", function (e) { __mc.errors.push("error: " + e.message); });
window.addEventListener("unhandledrejection", function (e) { __mc.errors.push("rejection: " + e.reason); });
document.addEventListener("securitypolicyviolation", function (e) {
  __mc.errors.push("csp: " + e.violatedDirective + " " + e.blockedURI); });
var __ce = console.error;
console.error = function () { __mc.errors.push("console: " + Array.prototype.join.call(arguments, " ")); };
window.alert = function (m) { __mc.errors.push("alert: " + m); };"""

CHECK = """window.addEventListener("load", function () { setTimeout(check, 0); });
function check() {
  var nav = performance.getEntriesByType("navigation")[0];
  var out = {errors: __mc.errors, ready_ms: nav ? nav.domContentLoadedEventEnd : -1};
  function names() {
    return Array.prototype.map.call(document.querySelectorAll("#mc-cards .mc-card"), function (c) { return c.id; });
  }
  var target = __TARGET__;
  var card = target === null ? null : document.getElementById(target);
  out.cards = names();
  out.svgs = document.querySelectorAll("#mc-cards .mc-card svg").length;
  out.count_text = document.getElementById("mc-count").textContent;
  out.scroll_y = window.scrollY;
  if (card) {
    var r = card.getBoundingClientRect();
    out.target = {top: r.top, height: r.height, inner: window.innerHeight, marked: card.classList.contains("mc-target")};
  }
  out.images = document.querySelectorAll("img").length;
  out.scripts = document.querySelectorAll("script").length;
  out.titles = Array.prototype.map.call(document.querySelectorAll(".mc-name"), function (h) { return h.textContent; });
  var search = document.getElementById("mc-search");
  search.value = __SEARCH__;
  var t0 = performance.now();
  search.dispatchEvent(new Event("input"));
  out.search_ms = performance.now() - t0;
  out.searched = names();
  out.searched_text = document.getElementById("mc-count").textContent;
  search.value = "";
  var select = document.querySelector('select[data-filter="' + __KEY__ + '"]');
  select.value = __VALUE__;
  t0 = performance.now();
  select.dispatchEvent(new Event("change"));
  out.filter_ms = performance.now() - t0;
  out.filtered = names();
  out.filtered_text = document.getElementById("mc-count").textContent;
  var pre = document.createElement("pre");
  pre.id = "mc-test";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
}"""


def _hash(script: str) -> str:
    return "&#39;sha256-" + base64.b64encode(hashlib.sha256(script.encode()).digest()).decode() + "&#39; "


def js(value) -> str:
    return json.dumps(value).replace("<", "\\u003c")


def instrument(page: str, target: str | None, search: str, key: str, value: str) -> str:
    check = (CHECK.replace("__TARGET__", js(target)).replace("__SEARCH__", js(search))
             .replace("__KEY__", js(key)).replace("__VALUE__", js(value)))
    assert page.count("script-src &#39;") == 1
    page = page.replace("script-src &#39;", "script-src " + _hash(RECORD) + _hash(check) + "&#39;")
    head = re.search(r'<meta http-equiv="Content-Security-Policy"[^>]*>', page).end()
    page = page[:head] + "\n<script>" + RECORD + "</script>" + page[head:]
    return page.replace("</body>", "<script>" + check + "</script>\n</body>")


def chromium(tmp: Path, *args: str) -> str:
    proc = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           "--no-default-browser-check", "--disable-extensions", "--hide-scrollbars",
                           f"--user-data-dir={tmp / 'profile'}", "--window-size=1280,900", "--virtual-time-budget=10000", *args],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def open_checked(tmp: Path, page: str, fragment: str | None, **checks) -> dict:
    path = tmp / "checked.html"
    path.write_text(instrument(page, fragment, **checks))
    url = path.as_uri() + ("#" + quote(fragment, safe="/:@") if fragment else "")
    dom = chromium(tmp, "--dump-dom", url)
    found = re.search(r'<pre id="mc-test">(.*?)</pre>', dom, re.S)
    assert found, "the in-page checks did not run:\n" + dom[-2000:]
    return json.loads(html.unescape(found[1]))


def count_text(shown: int, total: int) -> str:
    """report.js's count line."""
    return f"{total} inserted node(s)" if shown == total else f"{shown} of {total} inserted node(s) match"


def expected_search(insertions: list[dict], q: str) -> list[str]:
    """report.js's search: a substring of the inserted, producer or consumer names."""
    q = q.lower()
    return [i["name"] for i in insertions if q in "\n".join([i["name"], i["producer"], *i["consumers"]]).lower()]


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("browser")
    rj, rh = tmp / "report.json", tmp / "report.html"
    assert main(["run", str(EXAMPLE), "--report-json", str(rj), "--report-html", str(rh), "--quiet"]) == 0
    return tmp, json.loads(rj.read_text()), rh.read_text()


def test_report_in_chromium(example):
    tmp, report, page = example
    ins = report["insertions"]
    assert any(i["type"] == "Identity" for i in ins) and len(ins) <= 50      # one page of cards
    target = ins[-1]["name"]
    types = sorted({i["type"] for i in ins}, key=lambda t: sum(i["type"] == t for i in ins))
    key, value = ("type", types[0]) if len(types) > 1 else ("pass", ins[0]["pass"])
    search = ins[0]["name"].rsplit("/", 1)[-1][:12]
    out = open_checked(tmp, page, target, search=search, key=key, value=value)
    assert out["errors"] == []
    assert out["cards"] == [i["name"] for i in ins]                         # one card per insertion
    assert out["svgs"] == 2 * len(ins)                                      # before and after
    assert out["target"]["marked"] and out["scroll_y"] > 0                  # the deep link...
    assert 0 <= out["target"]["top"] < out["target"]["inner"] / 2          # ...brings its card into view
    assert out["searched"] == expected_search(ins, search) and out["searched"]
    assert out["filtered"] == [i["name"] for i in ins if i[key] == value]
    assert out["filtered"] != out["cards"] or len(types) == 1
    assert out["filtered_text"] == count_text(len(out["filtered"]), len(ins))


def test_screenshot(example):
    tmp, _, _ = example
    shot = tmp / "report.png"
    chromium(tmp, "--window-size=1280,2400", f"--screenshot={shot}", (tmp / "report.html").as_uri())
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000


def test_hostile_names_render_as_text(tmp_path, capsys):
    from test_report import HOSTILE, hostile_dump, hostile_pack
    rh, rj = tmp_path / "r.html", tmp_path / "r.json"
    assert main(["run", str(hostile_dump(tmp_path)), "--passes", "mem_rw_conflict", "--rules", str(hostile_pack(tmp_path)),
                 "--report-html", str(rh), "--report-json", str(rj), "--quiet"]) == 0
    name = json.loads(rj.read_text())["insertions"][0]["name"]
    assert name == HOSTILE + "_Identity0"
    out = open_checked(tmp_path, rh.read_text(), name, search="img", key="graph", value="g</script><!--")
    assert out["errors"] == []
    assert out["images"] == 0 and out["scripts"] == 4                      # the page's two and the checks' two
    assert out["titles"] == [name] and out["cards"] == [name] and out["target"]["marked"]
    assert out["searched"] == [name] and out["filtered"] == [name]


def test_ten_thousand_cards_stay_responsive(example, tmp_path):
    """A page of 10^4 cards (the example's cards, repeated) loads, filters and deep-links quickly."""
    from engine.report.html import render_html
    _, report, _ = example
    base = report["insertions"]
    many = [dict(base[k % len(base)], name=f"n{k:05d}/{base[k % len(base)]['name']}") for k in range(10_000)]
    page = render_html({**report, "insertions": many})
    assert len(page.encode()) < 20_000_000
    target = many[-1]["name"]
    value = base[0]["type"]
    out = open_checked(tmp_path, page, target, search="n0999", key="type", value=value)
    assert out["errors"] == []
    assert out["target"]["marked"] and 0 <= out["target"]["top"] < out["target"]["inner"] / 2
    assert len(out["cards"]) == 50 and out["cards"][-1] == target                # the last page, drawn alone
    assert out["ready_ms"] < 5000 and out["search_ms"] < 500 and out["filter_ms"] < 500
    assert out["searched_text"] == f"10 of {len(many)} inserted node(s) match"
    assert out["filtered_text"] == count_text(sum(1 for i in many if i["type"] == value), len(many))


# ---- issue 11: reports that say what happened ---------------------------------------------------
STORY = """window.addEventListener("load", function () { setTimeout(check, 0); });
function check() {
  var out = {errors: __mc.errors};
  function overlaps(a, b) { return a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height; }
  out.port_overlaps = 0;
  out.ports = 0;
  out.max_ports = 0;
  document.querySelectorAll("#mc-cards svg").forEach(function (s) {
    var boxes = Array.prototype.map.call(s.querySelectorAll("text.mc-port"), function (t) { return t.getBBox(); });
    out.ports += boxes.length;
    out.max_ports = Math.max(out.max_ports, boxes.length);
    for (var i = 0; i < boxes.length; i++) for (var j = i + 1; j < boxes.length; j++) if (overlaps(boxes[i], boxes[j])) out.port_overlaps++;
  });
  var cards = Array.prototype.slice.call(document.querySelectorAll("#mc-cards .mc-card"));
  var folded = cards.filter(function (c) { return c.classList.contains("mc-card-transient"); });
  out.folded = folded.length;
  out.folded_closed = folded.filter(function (c) { var d = c.querySelector("details.mc-fold"); return d && !d.open; }).length;
  out.folded_hidden = folded.filter(function (c) { return !c.querySelector(".mc-card-body").checkVisibility(); }).length;
  out.fold_line = folded.length ? folded[0].querySelector("summary").textContent : "";
  out.kept_open = cards.filter(function (c) { return !c.classList.contains("mc-card-transient") && c.querySelector(".mc-card-body").checkVisibility(); }).length;
  var memset_card = document.getElementById(__HCCL__);
  out.before_names = memset_card ? Array.prototype.map.call(memset_card.querySelectorAll(".mc-fig-before .mc-node title"), function (t) { return t.textContent; }) : [];
  out.after_names = memset_card ? Array.prototype.map.call(memset_card.querySelectorAll(".mc-fig-after .mc-node title"), function (t) { return t.textContent; }) : [];
  out.header = document.querySelector(".mc-subject").textContent.replace(/\\s+/g, " ");
  var link = document.querySelector('.mc-subject .mc-filter-link[data-value="transient"]');
  link.click();
  out.after_click = document.getElementById("mc-count").textContent;
  out.fate_select = document.querySelector('select[data-filter="fate"]').value;
  var pre = document.createElement("pre");
  pre.id = "mc-test";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
}"""

FIT = """window.addEventListener("load", function () { setTimeout(check, 0); });
function check() {
  var out = {errors: __mc.errors, clipped: [], cells: 0, causes: []};
  document.querySelectorAll("table.mc-fit td").forEach(function (td) {
    out.cells++;
    if (td.scrollWidth > td.clientWidth + 1) out.clipped.push(td.textContent.slice(0, 60));
  });
  document.querySelectorAll("tr.mc-cause").forEach(function (tr) { out.causes.push(tr.textContent.replace(/\\s+/g, " ").trim()); });
  out.note_items = document.querySelectorAll(".mc-note .mc-md-item").length;
  out.note_code = document.querySelectorAll(".mc-note code").length;
  out.note_text = document.querySelector(".mc-note") ? document.querySelector(".mc-note").textContent : "";
  var pre = document.createElement("pre");
  pre.id = "mc-test";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
}"""


def open_with(tmp: Path, page: str, script: str, csp_marker: str = "script-src &#39;") -> dict:
    """The page with RECORD and `script` admitted by hash (the report's CSP, or the diff page's)."""
    if csp_marker in page:
        page = page.replace(csp_marker, "script-src " + _hash(RECORD) + _hash(script) + "&#39;", 1)
    else:                                                     # the diff page allows no script: admit ours
        assert page.count("style-src 'unsafe-inline'") == 1
        page = page.replace("style-src 'unsafe-inline'", "style-src 'unsafe-inline'; script-src "
                            + (_hash(RECORD) + _hash(script)).replace("&#39;", "'").rstrip(), 1)
    head = re.search(r'<meta http-equiv="Content-Security-Policy"[^>]*>', page).end()
    page = page[:head] + "\n<script>" + RECORD + "</script>" + page[head:]
    page = page.replace("</body>", "<script>" + script + "</script>\n</body>")
    path = tmp / "story.html"
    path.write_text(page)
    dom = chromium(tmp, "--dump-dom", path.as_uri())
    found = re.search(r'<pre id="mc-test">(.*?)</pre>', dom, re.S)
    assert found, "the in-page checks did not run:\n" + dom[-2000:]
    return json.loads(html.unescape(found[1]))


def test_report_tells_the_net_change_and_folds_transients(example):
    tmp, report, page = example
    hccl = "layer_8/conv2d/broadcast/HcomBroadcast_HcclMemcpyPass_Identity0"
    out = open_with(tmp, page, STORY.replace("__HCCL__", js(hccl)))
    assert out["errors"] == []
    transient = [i for i in report["insertions"] if i["fate"] == "transient"]
    assert out["folded"] == out["folded_closed"] == out["folded_hidden"] == len(transient) == 27
    assert out["kept_open"] == len(report["insertions"]) - 27
    assert out["fold_line"].startswith("came and went: removed again by variable_ref_delete (rule ")
    assert "net 9 added, 0 removed, 27 transient (inserted, then removed again)" in out["header"]
    assert out["fate_select"] == "transient" and out["after_click"] == "27 of 36 inserted node(s) match"
    # the before picture is the graph hccl_memcpy saw: no MemSet yet, which the after picture has
    assert any(n.startswith("atomic_memset1") for n in out["after_names"])
    assert out["before_names"] and not any(n.startswith("atomic_memset1") for n in out["before_names"])
    # every port label in every drawing has its own place, also on the loop body's
    # three-input copy (while_2_body_input_Memcpy: 3 ports in, 3 out, 3 at its producers/consumers)
    assert out["ports"] > 0 and out["max_ports"] >= 9 and out["port_overlaps"] == 0


def test_diff_page_renders_notes_as_text_groups_causes_and_fits_columns(tmp_path):
    page = tmp_path / "d.html"
    assert main(["diff", str(ROOT / "rules" / "ge"), str(ROOT / "rules" / "ge-doc"), "--graphs", str(EXAMPLE),
                 "--html", str(page), "--jobs", "1", "--quiet"]) in (0, 1)
    out = open_with(tmp_path, page.read_text(), FIT)
    assert out["errors"] == []
    assert out["cells"] > 0 and out["clipped"] == []
    assert out["note_items"] >= 7 and out["note_code"] >= 10
    assert "**" not in out["note_text"] and "`" not in out["note_text"]
    assert len(out["causes"]) == len(set(out["causes"])) >= 1                 # one header per cause
    assert any("layout_conflict.pairs[IMMUTABLE_ADDRESS_OUTPUT × NORMAL_INPUT]" in c and "169 node(s)" in c
               for c in out["causes"])
