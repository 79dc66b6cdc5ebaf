"""`memconflict run G1 G2 … --out-dir D [--html] [--jobs N | --scheduler local]`
(engine/cli/batch.py): each graph's outputs are the ones a single run writes, byte for
byte, whatever the number of workers or the backend; bad graphs, collisions and bad
arguments are handled as documented."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.cli import main

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / "tests" / "cases"
GRAPHS = [CASES / "rw" / "RW-03.yaml", CASES / "atomic" / "own-clean-separately.yaml",
          CASES / "hccl" / next(p.name for p in sorted((CASES / "hccl").glob("*.yaml")))]


def run(args, capsys):
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def tree(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def test_each_graphs_outputs_are_what_a_single_run_writes(tmp_path, capsys):
    d = tmp_path / "out"
    code, out, err = run(["run", *GRAPHS, "--out-dir", d], capsys)
    assert code == 0, err
    for g in GRAPHS:
        single = tmp_path / g.stem
        single.mkdir()
        assert run(["run", g, "--out", single / "g.pbtxt", "--report-json", single / "r.json", "--quiet"], capsys)[0] == 0
        assert (d / f"{g.stem}.pbtxt").read_bytes() == (single / "g.pbtxt").read_bytes()
        assert (d / f"{g.stem}.report.json").read_bytes() == (single / "r.json").read_bytes()
    index = json.loads((d / "index.json").read_text())
    assert [e["graph"].rsplit("/", 1)[-1] for e in index["graphs"]] == [g.name for g in GRAPHS]
    assert all(e["status"] == 0 and len(e["outputs"]) == 2 for e in index["graphs"])
    assert "[3/3]" in err and "3 graph(s): 3 ok" in out


def test_jobs_and_dask_give_byte_identical_folders(tmp_path, capsys):
    one, two = tmp_path / "one", tmp_path / "two"
    assert run(["run", *GRAPHS, "--out-dir", one, "--quiet"], capsys)[0] == 0
    assert run(["run", *GRAPHS, "--out-dir", two, "--jobs", "2", "--quiet"], capsys)[0] == 0
    assert tree(one) == tree(two)
    pytest.importorskip("distributed")
    dask = tmp_path / "dask"
    code, _, err = run(["run", *GRAPHS, "--out-dir", dask, "--scheduler", "local", "--jobs", "2", "--quiet"], capsys)
    assert code == 0, err
    assert tree(one) == tree(dask)


def test_a_folder_is_searched_and_html_is_written_on_request(tmp_path, capsys):
    src = tmp_path / "src"
    src.mkdir()
    for g in GRAPHS[:2]:
        (src / g.name).write_bytes(g.read_bytes())
    d = tmp_path / "out"
    assert run(["run", src, "--out-dir", d, "--html", "--quiet"], capsys)[0] == 0
    assert sorted(p.name for p in d.iterdir()) == sorted(
        ["index.json"] + [f"{g.stem}{s}" for g in GRAPHS[:2] for s in (".pbtxt", ".report.json", ".report.html")])


def test_a_bad_graph_costs_only_its_own_outputs(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("graphs: [1\n")
    d = tmp_path / "out"
    code, _, err = run(["run", GRAPHS[0], bad, "--out-dir", d], capsys)
    assert code == 2
    assert "bad.yaml:2:1: error: YAML syntax" in err
    assert sorted(p.name for p in d.iterdir()) == ["RW-03.pbtxt", "RW-03.report.json", "index.json"]
    statuses = [e["status"] for e in json.loads((d / "index.json").read_text())["graphs"]]
    assert statuses == [0, 2]


def test_gates_and_argument_errors(tmp_path, capsys):
    assert run(["run", *GRAPHS[:2], "--fail-on", "insertions", "--quiet"], capsys)[0] == 3
    code, _, err = run(["run", *GRAPHS[:2], "--report-json", tmp_path / "r.json"], capsys)
    assert code == 2 and "give --out-dir DIR" in err
    twin = tmp_path / "twin"
    twin.mkdir()
    (twin / GRAPHS[0].name).write_bytes(GRAPHS[0].read_bytes())
    d = tmp_path / "out"
    code, _, err = run(["run", GRAPHS[0], twin / GRAPHS[0].name, "--out-dir", d], capsys)
    assert code == 2 and "would be written for both" in err
    assert not any(d.iterdir())
    f = tmp_path / "file"
    f.write_text("x")
    code, _, err = run(["run", *GRAPHS[:2], "--out-dir", f], capsys)
    assert code == 2 and "is not a folder" in err
    code, _, err = run(["run", *GRAPHS[:2], "--scheduler", "nowhere"], capsys)
    assert code == 2 and "not a scheduler address" in err
    code, _, err = run(["run", GRAPHS[0], "--html"], capsys)
    assert code == 2 and "--html writes into --out-dir" in err
