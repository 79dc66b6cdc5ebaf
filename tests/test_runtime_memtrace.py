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


# ---- the fast path of the trace checks (Note [fast checks] in engine/runtime/tracefile.py) ----
def _variants(name, spec):
    """Well-formed bodies of op `name` and single mutations of them (a field dropped, an unknown
    key, each field given a value of every JSON kind), for a trace with 2 streams."""
    from engine.runtime.tracefile import ONE_OF
    good = {"int": 1, "stream": 1, "str": "p", "ints": [0, 1], "pairs": [[0, 1]], "count": 2,
            "block": "b", "tensor": "t", "mem": "m", "mif": "f"}
    def value(kind):
        kind = (kind[4:] if kind.startswith("opt:") else kind.rstrip("?")).removesuffix("|null")
        return "new_name" if kind.startswith("new:") else good[kind]
    full = {k: value(kind) for k, kind in spec.items()}
    bases = [full]
    if name in ONE_OF:
        a, b = ONE_OF[name]
        bases = [{k: v for k, v in full.items() if k != b}, {k: v for k, v in full.items() if k != a}, full]
    odd = [None, True, -1, 0, 2, 5, 1.5, "b", "ghost", "", [], [1, True], [[0, 1]], [{"src": 0, "dst": 1}],
           {"src": 0}, [[0]], ["x"]]
    for base in bases:
        yield base
        yield {**base, "zzz": 1}
        for key in base:
            yield {k: v for k, v in base.items() if k != key}
            for v in odd:
                yield {**base, key: v}
    yield "not a mapping"
    yield []


def test_fast_checks_accept_exactly_what_the_slow_checks_accept():
    from engine.pack.runtime_memory import default_rules
    from engine.runtime.tracefile import _FAST_FACTORY, _MISSING, OPS, _check_op, _pairs
    rules = default_rules()
    tried = 0
    for name, spec in OPS.items():
        if not isinstance(spec, dict):
            continue
        for body in _variants(name, spec):
            slow = {"block": {"b"}, "tensor": {"t"}, "mem": {"m"}, "mif": {"f"}}
            fast = {k: set(v) for k, v in slow.items()}
            problems: list = []
            _check_op({name: body}, 0, 2, slow, problems.append, [])
            check = _FAST_FACTORY(fast["block"], fast["tensor"], fast["mem"], fast["mif"], 2, _MISSING, _pairs)[name]
            accepted = check(body)
            assert accepted == (not problems), (name, body, problems)
            if accepted:
                assert fast == slow, (name, body)     # the same name defined
            tried += 1
    assert tried > 1500
    assert rules.stream_bits == 64


def test_bad_ops_in_a_large_json_trace_are_located(tmp_path, capsys, monkeypatch):
    """A 20,000-op JSON trace (the fast path) with bad ops in the middle: each error at its
    file:line:col, in the slow path's words, and no output."""
    monkeypatch.chdir(tmp_path)
    ops = []
    for r in range(5000):
        ops += [{"malloc": {"stream": r % 2, "size": 64, "as": f"b{r % 8}"}},
                {"new_access": {"block": f"b{r % 8}", "src": r % 2, "dst": (r + 1) % 2}},
                {"free": {"block": f"b{r % 8}", "stream": r % 2}},
                {"free": {"block": f"b{r % 8}", "stream": (r + 1) % 2}}]
    ops[9001] = {"new_access": {"block": "b9", "src": 0, "dst": 1}}
    ops[12345] = {"free": {"block": "b1", "stream": 0, "extra": True}}
    ops[15000] = {"malloc": {"stream": 0, "size": -1, "as": "b0"}}
    lines = ['{"streams": 2,', ' "ops": [']
    lines += ["  " + json.dumps(op) + ("," if i + 1 < len(ops) else "") for i, op in enumerate(ops)]
    lines += [" ]}"]
    (tmp_path / "big.json").write_text("\n".join(lines) + "\n")
    assert main(["runtime", "memtrace", "big.json", "--state", "final"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    located = [line for line in err.splitlines() if ": error: " in line]
    assert located == ["big.json:9004:28: error: new_access: unknown block 'b9'",
                       "big.json:12348:41: error: free: unknown field 'extra'",
                       "big.json:15003:36: error: malloc: 'size' must be a byte count, got -1"], err
