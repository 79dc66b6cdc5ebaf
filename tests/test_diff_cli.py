"""`memconflict diff`: REV:path packs from a git repository, outputs, --fail-on
gates and exit statuses (2 for unusable input, with a clear message)."""
from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from engine.cli import main
from engine.core.resources import default_pack_dir
from test_diff_impact import FLIPPED, GRAPH, ROW
from test_diff_util import edited_pack


def run(args, capsys):
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def _git(repo, *args):
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args], cwd=repo, check=True,
                   capture_output=True)


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A repository with two commits of one pack: the second flips a matrix cell."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    r = tmp_path / "repo"
    r.mkdir()
    _git(r, "init", "-q")
    shutil.copytree(default_pack_dir(), r / "rules" / "p")
    (r / "g.yaml").write_text(GRAPH, encoding="utf-8")
    _git(r, "add", ".")
    _git(r, "commit", "-q", "-m", "pack")
    rw = r / "rules" / "p" / "rw.yaml"
    rw.write_text(rw.read_text().replace(ROW, FLIPPED))
    _git(r, "commit", "-q", "-am", "flip a cell")
    rw.write_text("not: [a pack")          # the working tree is not read for REV:path
    monkeypatch.chdir(r)
    return r


def test_rev_path_end_to_end(repo, capsys):
    code, out, err = run(["diff", "HEAD~1:rules/p", "HEAD:rules/p", "--graphs", "g.yaml", "--passes", "mem_rw_conflict",
                          "--json", "d.json", "--html", "d.html", "--jobs", "1"], capsys)
    assert code == 0, err
    doc = json.loads((repo / "d.json").read_text())
    (item,) = doc["rules"]["items"]
    line = next(k for k, s in enumerate(FLIPPED_LINES(repo), 1) if s.strip().startswith("ReadOnly:      {"))
    assert item["old"]["loc"] == f"HEAD~1:rules/p/rw.yaml:{line}"
    assert item["new"]["loc"] == f"HEAD:rules/p/rw.yaml:{line}"
    (add,) = doc["impact"]["graphs"][0]["added"]
    # the card names the typing rule that made the difference, cited at the revision; the cause is the cell
    rule_line = next(k for k, s in enumerate(FLIPPED_LINES(repo), 1) if "id: rw/in/ref-input" in s)
    assert add["caused_by"] == [item["id"]] and add["new"]["rule_loc"] == f"HEAD:rules/p/rw.yaml:{rule_line}"
    assert "rw_conflict.matrix[ReadOnly][Writeable]: do_nothing → insert_identity" in out
    assert "Impact on 1 graph(s), 1 changed" in out
    html = (repo / "d.html").read_text()
    assert 'id="c1"' in html and 'href="#c1"' in html and "<script" not in html
    assert not list(repo.glob("**/memconflict-diff-*"))


def FLIPPED_LINES(repo):
    out = subprocess.run(["git", "show", "HEAD:rules/p/rw.yaml"], cwd=repo, capture_output=True, check=True)
    return out.stdout.decode().splitlines()


def test_fail_on_gates(repo, capsys):
    base = ["diff", "HEAD~1:rules/p", "HEAD:rules/p", "--quiet"]
    assert run(base + ["--fail-on", "impact", "--fail-on", "added-isolation"], capsys)[0] == 0   # no graphs
    assert run(base + ["--fail-on", "rules"], capsys)[0] == 3
    g = base + ["--graphs", "g.yaml", "--passes", "mem_rw_conflict", "--jobs", "1"]
    assert run(g + ["--fail-on", "removed-isolation"], capsys)[0] == 0
    assert run(g + ["--fail-on", "removed-isolation", "--fail-on", "added-isolation"], capsys)[0] == 3
    assert run(["diff", "HEAD:rules/p", "HEAD:rules/p", "--fail-on", "any", "--quiet"], capsys)[0] == 0


@pytest.mark.parametrize("old, message", [
    ("nosuchrev:rules/p", "error: unknown git revision 'nosuchrev'"),
    ("HEAD:rules/q", "error: revision 'HEAD' has no folder 'rules/q'"),
    ("rules", "error: 'rules' is not a rule pack: it has no pack.yaml"),
    ("nowhere", "error: 'nowhere' is neither a pack folder nor REV:path"),
    ("rules/p", "rules/p/rw.yaml:1:"),                 # the broken working-tree copy: located error
])
def test_bad_input_exits_2_with_a_message(repo, capsys, old, message):
    code, out, err = run(["diff", old, "HEAD:rules/p"], capsys)
    assert code == 2 and message in err and out == ""


def test_bad_graph_and_arguments_exit_2(repo, capsys, tmp_path):
    code, _, err = run(["diff", "HEAD:rules/p", "HEAD:rules/p", "--graphs", "missing.pbtxt"], capsys)
    assert code == 2 and "no such graph file or folder 'missing.pbtxt'" in err
    bad = repo / "bad.yaml"
    bad.write_text("graphs: [oops")
    code, _, err = run(["diff", "HEAD:rules/p", "HEAD:rules/p", "--graphs", str(bad), "--jobs", "2"], capsys)
    assert code == 2 and "bad.yaml" in err and "error: YAML syntax" in err
    code, _, err = run(["diff", "HEAD:rules/p", "HEAD:rules/p", "--jobs", "0"], capsys)
    assert code == 2 and "--jobs must be at least 1" in err
    with pytest.raises(SystemExit) as exc:
        run(["diff", "HEAD:rules/p", "HEAD:rules/p", "--fail-on", "everything"], capsys)
    assert exc.value.code == 2 and "invalid choice: 'everything'" in capsys.readouterr().err


def test_html_escapes_pack_text(tmp_path, capsys):
    new = edited_pack(tmp_path, {"rw.yaml": [("doc: torchair feeds writable Data", "doc: <script>alert(1)</script>")]})
    page = tmp_path / "d.html"
    code, _, err = run(["diff", default_pack_dir(), new, "--html", page, "--quiet"], capsys)
    assert code == 0, err
    html = page.read_text()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>alert" not in html
