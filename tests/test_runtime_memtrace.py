"""memtrace: GE's allocator unit tests restated as traces (tests/runtime_mem/memtrace_*.yaml), the
command line's output contract, and the failure paths (exit 2 with a located message)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from engine.cli import main

HERE = Path(__file__).parent / "runtime_mem"


def _cases():
    for f in sorted(HERE.glob("memtrace_*.yaml")):
        doc = yaml.safe_load(f.read_text())
        for case in doc["cases"]:
            yield pytest.param(case, doc.get("prologue", []), id=f"{f.stem}/{case['name']}")


def run_trace(tmp_path, trace, capsys, *extra, name="t.json"):
    path = tmp_path / name
    path.write_text(json.dumps(trace) if name.endswith(".json") else yaml.safe_dump(trace))
    status = main(["runtime", "memtrace", str(path), *extra])
    out, err = capsys.readouterr()
    return status, out, err


def pick(steps, where: str, offset: int):
    head, _, rest = where.partition(".")
    index = offset + int(head[1:]) if head.startswith("P") else int(head)
    value = steps[index]
    for part in rest.split(".") if rest else []:
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value


@pytest.mark.parametrize("case,prologue", list(_cases()))
def test_ge_scenario(tmp_path, capsys, case, prologue):
    trace = dict(case["trace"])
    if case.get("prologue"):
        trace["ops"] = list(prologue) + list(trace["ops"])
    status, out, err = run_trace(tmp_path, trace, capsys)
    assert status == 0, err
    steps = json.loads(out)["steps"]
    assert len(steps) == len(trace["ops"])
    offset = len(prologue) if case.get("prologue") else 0
    for where, want in case["expect"]:
        assert pick(steps, str(where), offset) == want, f"{case['ge']}: {where}"


def test_step_schema_and_determinism(tmp_path, capsys):
    trace = {"streams": 2, "ops": [{"malloc": {"stream": 0, "size": 64, "as": "b"}},
                                   {"free": {"block": "b", "stream": 0}}]}
    _, first, _ = run_trace(tmp_path, trace, capsys)
    _, second, _ = run_trace(tmp_path, trace, capsys)
    assert first == second
    step = json.loads(first)["steps"][0]
    assert set(step) == {"op", "ok", "result", "events", "blocks", "tensors", "mems", "mifs", "allocators",
                         "l1", "events_space"}
    assert set(step["blocks"]["b"]) == {"object", "null", "has_mem", "addr", "size", "birth_stream", "version",
                                        "counts", "mif"}


def test_yaml_and_json_agree_and_final_state(tmp_path, capsys):
    trace = {"streams": 2, "ops": [{"malloc": {"stream": 1, "size": 64, "as": "b"}},
                                   {"new_access": {"block": "b", "src": 1, "dst": 0}},
                                   {"free": {"block": "b", "stream": 1}}]}
    _, as_json, _ = run_trace(tmp_path, trace, capsys)
    _, as_yaml, _ = run_trace(tmp_path, trace, capsys, name="t.yaml")
    assert as_json == as_yaml
    _, final, _ = run_trace(tmp_path, trace, capsys, "--state", "final")
    doc = json.loads(final)
    assert "blocks" not in doc["steps"][-1]
    assert doc["final"]["allocators"]["1"]["local_recycle"] == [{"block": "b", "version": 0, "sent": []}]


BAD = [
    ({"streams": 2, "ops": [{"malloc": {"stream": 0, "size": 8, "as": "b"}}, {"fre": {"block": "b"}}]},
     "t.yaml:6:3: error: op 2: unknown op 'fre'", "did you mean 'free'?"),
    ({"streams": 2, "ops": [{"free": {"block": "nope", "stream": 0}}]},
     "t.yaml:3:12: error: free: unknown block 'nope'", "an op's 'as:' names one"),
    ({"streams": 2, "ops": [{"malloc": {"stream": 5, "size": 8, "as": "b"}}]},
     "t.yaml:5:13: error: malloc: no allocator for stream 5 (the trace has 2 streams)", "use a stream from 0 to 1"),
    ({"streams": 65, "ops": []}, "t.yaml:2:10: error: trace: 'streams' must be a whole number from 1 to 64",
     "bits wide"),
    ({"streams": 1, "ops": [{"malloc": {"stream": 0, "size": "big", "as": "b"}}]},
     "t.yaml:4:11: error: malloc: 'size' must be a whole number, got the string 'big'", ""),
    ({"streams": 1, "ops": [{"malloc": {"stream": 0, "size": 8}}]},
     "t.yaml:3:5: error: malloc: missing field 'as'", "add as: ..."),
    ({"streams": 1, "events": [{"src": 0, "dst": 0, "return_birth": ["ghost"]}], "ops": []},
     "t.yaml:4:5: error: unknown block 'ghost'", ""),
]


@pytest.mark.parametrize("trace,message,hint", BAD, ids=[b[1].split("error: ")[1][:30] for b in BAD])
def test_bad_trace_is_located(tmp_path, capsys, monkeypatch, trace, message, hint):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.yaml").write_text(yaml.safe_dump(trace, default_flow_style=False))
    assert main(["runtime", "memtrace", "t.yaml"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(message), err
    assert hint in err


def test_bad_json_is_located_through_a_second_read(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.json").write_text('{"streams": 1,\n "ops": [\n  {"malloc": {"stream": 0, "size": -8, "as": 3}}]}\n')
    assert main(["runtime", "memtrace", "t.json"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("t.json:3:36: error: malloc: 'size' must be a byte count, got -8"), err
    assert "t.json:3:46: error: malloc: 'as' must be a name, got the number 3" in err
    (tmp_path / "u.json").write_text('{"streams": 1, "ops": [}')
    assert main(["runtime", "memtrace", "u.json"]) == 2
    assert capsys.readouterr().err.startswith("u.json:1:24: error: JSON syntax")


def test_html_output_path_checked_first(tmp_path, capsys):
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps({"streams": 1, "ops": []}))
    assert main(["runtime", "memtrace", str(trace), "--html", str(tmp_path / "no" / "x.html")]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "x.html" in err


def test_html_picture(tmp_path, capsys):
    trace = {"streams": 2, "ops": [{"malloc": {"stream": 0, "size": 64, "as": "a<b>"}},
                                   {"new_access": {"block": "a<b>", "src": 0, "dst": 1}},
                                   {"free": {"block": "a<b>", "stream": 0}},
                                   {"free": {"block": "a<b>", "stream": 1}},
                                   {"sync_local_recycle": {"block": "a<b>", "src": 0, "dst": 1}},
                                   {"malloc": {"stream": 1, "size": 64, "as": "c"}}]}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(trace))
    pages = []
    for _ in range(2):
        assert main(["runtime", "memtrace", str(path), "--html", str(tmp_path / "p.html")]) == 0
        pages.append((tmp_path / "p.html").read_text())
    capsys.readouterr()
    page = pages[0]
    assert pages[0] == pages[1]
    assert page.count("<rect") == 2                    # a<b> on stream 0 and c on stream 1, still held
    assert page.count("<circle") == 3                  # local on 0, local on 1, borrow on 1
    assert "step 4: borrow of a&lt;b&gt; on stream 1" in page and "a<b>" not in page


def test_event_space_names_a_block_made_too_late(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    trace = {"streams": 2, "events": [{"src": 0, "dst": 1, "return_birth": ["late"]}],
             "ops": [{"wait_events": {"allocator": 1, "ids": [0]}},
                     {"malloc": {"stream": 0, "size": 8, "as": "late"}}]}
    (tmp_path / "t.json").write_text(json.dumps(trace, indent=1))
    assert main(["runtime", "memtrace", "t.json"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("t.json:8:5: error: unknown block 'late' (no op before the first event kernel makes it)"), err
