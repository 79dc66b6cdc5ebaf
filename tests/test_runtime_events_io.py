"""`memconflict runtime events` (GE's BgEventUT scenarios and CollectAllEventInfos' failure
paths) and `runtime io-reuse` (UtestUtilTransfer Parse_*, ModelV2ExecutorBuilderUT and
UtestDavinciModel CheckIoReuseAddrs_*), restated in tests/runtime/events and tests/runtime/io_reuse."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.cli import main
from engine.passes.catalog import load_pack
from engine.runtime.ioreuse import parse_pairs, stoul

ROOT = Path(__file__).resolve().parents[1]
RT = load_pack(None).configs["runtime"]


def cli(capsys, *argv) -> dict:
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def events(capsys, name: str) -> dict:
    return cli(capsys, "runtime", "events", str(ROOT / "tests" / "runtime" / "events" / f"{name}.yaml"))


def test_collect_model_events(capsys):
    out = events(capsys, "CollectAndCreateGertEvents_ok")
    assert out["ok"] and out["model_events"] == [[0, 1], [0, 2], [1, 0], [2, 0]]
    assert out["first_sync"] == [] and out["last_sync"] == [] and out["last_resource_clean"] == []


def test_first_sync(capsys):
    out = events(capsys, "LoweringFirstEventSync_ok")
    assert out["model_events"] == [[1, 0]] and out["first_sync"] == [[0, 1]] and out["last_sync"] == []


def test_last_sync_and_resource_clean(capsys):
    out = events(capsys, "LoweringLastEventSync_ok")
    assert out["first_sync"] == [] and out["last_sync"] == [[1, 0], [1, 0]]
    assert out["last_resource_clean"] == [[1, 0]]


def _kinds(kernels, stage):
    counts: dict[str, int] = {}
    for k in kernels:
        if k["stage"] == stage:
            counts[k["type"]] = counts.get(k["type"], 0) + 1
    return counts


def test_stage_kernels_first_sync(capsys):
    """LoweringFirstEventSync_ok: the first-sync partitioned call holds one SendEvents and one
    WaitEvents; the stage's event id follows the model's (GertEvents = model + first sync)."""
    out = events(capsys, "LoweringFirstEventSync_ok")
    assert _kinds(out["kernels"], "first_sync") == {"SendEvents": 1, "WaitEvents": 1}
    assert out["gert_events"] == [[1, 0], [0, 1]]
    send, wait = out["kernels"]
    assert (send["stream"], send["ids"], wait["stream"], wait["ids"], wait["after"]) == (0, [1], 1, [1], [0])


def test_node_kernels(capsys):
    """LoweringEventSync: D (stream 1) sends event 0 after it, E (stream 0) waits for it before
    it; CollectAndCreateGertEvents_ok's nodes each send or wait their ids on their stream."""
    out = events(capsys, "LoweringFirstEventSync_ok")
    assert out["node_kernels"] == [{"node": "D", "type": "SendEvents", "stream": 1, "ids": [0], "when": "after"},
                                   {"node": "E", "type": "WaitEvents", "stream": 0, "ids": [0], "when": "before"}]
    out = events(capsys, "CollectAndCreateGertEvents_ok")
    sent = sorted(i for k in out["node_kernels"] if k["type"] == "SendEvents" for i in k["ids"])
    waited = sorted(i for k in out["node_kernels"] if k["type"] == "WaitEvents" for i in k["ids"])
    assert sent == waited == [0, 1, 2, 3]
    assert all(k["when"] == ("after" if k["type"] == "SendEvents" else "before") for k in out["node_kernels"])


def test_stage_kernels_last_sync_and_clean(capsys):
    """LoweringLastEventSync_ok: two SendEvents and one WaitEvents in the last-sync call (one
    const of event ids each: 3); the resource-clean stage's LastWaitEvents on the main stream
    and a LastSendEvents per stream, its ids after the last sync's."""
    out = events(capsys, "LoweringLastEventSync_ok")
    k = out["kernels"]
    assert _kinds(k, "last_sync") == {"SendEvents": 2, "WaitEvents": 1}
    assert _kinds(k, "last_resource_clean") == {"LastSendEvents": 1, "LastWaitEvents": 1}
    wait = k[0]
    assert (wait["type"], wait["stream"], wait["ids"]) == ("WaitEvents", 0, [2, 3])
    assert [(x["stream"], x["ids"]) for x in k[1:3]] == [(1, [2]), (1, [3])] and wait["after"] == [1, 2]
    assert (k[3]["type"], k[3]["ids"], k[4]["ids"]) == ("LastWaitEvents", [4], [4])
    assert len(out["gert_events"]) == 5 and out["gert_events"][4] == [1, 0]


def test_gert_events_of_model_events_only_and_of_none(tmp_path, capsys):
    """CollectAndCreateGertEvents: the model's events alone make the table and no stage kernel;
    with no event anywhere (one stream) it returns null."""
    out = events(capsys, "CollectAndCreateGertEvents_ok")
    assert out["kernels"] == [] and out["gert_events"] == [[0, 1], [0, 2], [1, 0], [2, 0]]
    f = tmp_path / "ev.yaml"
    f.write_text("graph_unknown: true\nstream_num: 1\nevent_num: 0\nnodes:\n  A: {stream: 0}\nedges: []\n")
    out = cli(capsys, "runtime", "events", str(f))
    assert out["ok"] is True and out["gert_events"] is None and out["kernels"] == []


def test_stage_kernel_types_are_pack_data(tmp_path, capsys):
    import shutil
    pack = tmp_path / "ge"
    shutil.copytree(ROOT / "rules" / "ge", pack)
    f = pack / "runtime.yaml"
    f.write_text(f.read_text().replace("send: LastSendEvents", "send: MyLastSend", 1))
    assert main(["runtime", "events", str(ROOT / "tests" / "runtime" / "events" / "LoweringLastEventSync_ok.yaml"),
                 "--rules", str(pack)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert _kinds(out["kernels"], "last_resource_clean") == {"MyLastSend": 1, "LastWaitEvents": 1}
    f.write_text(f.read_text().replace("send: MyLastSend, ", "", 1))
    assert main(["rules", "check", str(pack)]) == 2
    assert "missing" in capsys.readouterr().err


@pytest.mark.parametrize("nodes,event_num,reason", [
    ("A: {stream: 0, send: [0, 0]}\n  B: {stream: 1, recv: [0]}", 1, "duplicated send event id 0 on node A"),
    ("A: {stream: 0, send: [0]}\n  B: {stream: 1, recv: [0]}\n  C: {stream: 1, recv: [0]}", 1,
     "duplicated receive event id 0 on node C"),
    ("A: {stream: 0, send: [2]}\n  B: {stream: 1, recv: [2]}", 2, "send event id 2 on node A out of range 2"),
    ("A: {stream: 0, send: [0]}\n  B: {stream: 1, recv: [0]}", 2, "1 event id(s) on the nodes, but the model has event_num 2"),
    ("A: {stream: 0, send: [0, 1]}\n  B: {stream: 1, recv: [0]}", 2, "event 1 is not in a pair (no receiver)"),
])
def test_event_validation_failures(tmp_path, capsys, nodes, event_num, reason):
    f = tmp_path / "ev.yaml"
    f.write_text(f"graph_unknown: true\nstream_num: 2\nevent_num: {event_num}\nnodes:\n  {nodes}\nedges: []\n")
    out = cli(capsys, "runtime", "events", str(f))
    assert out["ok"] is False and out["reason"] == reason and out["model_events"] == []
    assert out["gert_events"] is None and out["kernels"] == [] and out["node_kernels"] == []


def test_known_shape_graph_has_no_model_events(tmp_path, capsys):
    """CollectAllEventInfos skips nodes of a graph that is not unknown-shape."""
    f = tmp_path / "ev.yaml"
    f.write_text("graph_unknown: false\nstream_num: 2\nevent_num: 1\nnodes:\n  A: {stream: 0, send: [0]}\n"
                 "  B: {stream: 1, recv: [0]}\nedges: [\"A -> B\"]\n")
    out = cli(capsys, "runtime", "events", str(f))
    assert out["ok"] is False and "0 event id(s)" in out["reason"]


def test_events_bad_edge_is_exit_2(tmp_path, capsys):
    f = tmp_path / "ev.yaml"
    f.write_text("stream_num: 1\nevent_num: 0\nnodes:\n  A: {stream: 0}\nedges: [\"A -> Z\"]\n")
    assert main(["runtime", "events", str(f)]) == 2
    assert "ev.yaml:5:9: error: edge names unknown node 'Z'" in capsys.readouterr().err


# ---- io-reuse ------------------------------------------------------------------------------
@pytest.mark.parametrize("text,pairs", [
    ("0,0", [[0, 0]]),                                           # Parse_Success_SinglePair
    ("0,1|2,3|10,20", [[0, 1], [2, 3], [10, 20]]),               # Parse_Success_MultiPairs
    ("", []),                                                    # Parse_EmptyString_NoOutput
    ("1,1||2,2|", [[1, 1], [2, 2]]),                             # Parse_SkipEmptySegments
    ("1,1|-1,0|2,2|0,-5", [[1, 1], [2, 2]]),                     # Parse_InvalidNegative_Skip
    ("1,1|invalid|3,3", [[1, 1], [3, 3]]),                       # Parse_InvalidFormatNoComma_Skip
    ("a,b|1,1", [[1, 1]]),                                       # Parse_InvalidChars_Skip
    ("99999999999999999999999999,1", []),                        # Parse_InvalidRange_Skip
    ("1a,2", [[1, 2]]),                                          # stoul: a trailing suffix is ignored
    (" +3,\t4|5,6,7", [[3, 4], [5, 6]]),                         # leading space and sign; "6,7" reads 6
    ("18446744073709551615,0|18446744073709551616,0", [[2 ** 64 - 1, 0]]),   # ULONG_MAX and one more
])
def test_parse_like_ge(text, pairs):
    assert parse_pairs(text, RT)[0] == pairs


def test_stoul():
    assert (stoul("12x"), stoul("  7"), stoul("x1"), stoul(""), stoul("+"), stoul("0x10")) == (12, 7, None, None, None, 0)


@pytest.mark.parametrize("path", sorted((ROOT / "tests" / "runtime" / "io_reuse").glob("*.yaml")), ids=lambda p: p.stem)
def test_check_io_reuse(capsys, path):
    out = cli(capsys, "runtime", "io-reuse", str(path))
    assert out["status"] == ("SUCCESS" if path.stem.endswith("_Success") else "PARAM_INVALID")
    if path.stem.endswith("_Fail"):
        assert out["pair"] and out["reason"]


def test_io_reuse_arguments(capsys):
    out = cli(capsys, "runtime", "io-reuse", "--attr", "0,0|1,1", "--inputs", "0x1000,0x2000", "--outputs", "0x1000,0x3000")
    assert out["status"] == "PARAM_INVALID" and out["pair"] == [1, 1]
    assert cli(capsys, "runtime", "io-reuse", "--attr", "x|2,3")["pairs"] == [[2, 3]]
    out = cli(capsys, "runtime", "io-reuse", "--attr", "0,0", "--inputs", "", "--outputs", "0x1", "--runtime", "v1")
    assert out["status"] == "SUCCESS"


def test_io_reuse_unusable_is_exit_2(tmp_path, capsys):
    f = tmp_path / "io.yaml"
    f.write_text("{runtime: v3, attr: \"0,0\"}\n")
    assert main(["runtime", "io-reuse", str(f)]) == 2
    assert "io.yaml:1:11: error: unknown runtime 'v3'" in capsys.readouterr().err
    f.write_text("{runtime: v2, attr: \"1,0\", inputs: [1], input_num: 2, outputs: [1]}\n")
    assert main(["runtime", "io-reuse", str(f)]) == 2
    assert "reads input address 1, but only 1 are given" in capsys.readouterr().err


def test_json_case_with_tabs(tmp_path, capsys):
    f = tmp_path / "io.json"
    f.write_text('{\n\t"runtime": "v2",\t"attr": "0,0",\n\t"inputs": ["0x10"], "outputs": [16]\n}\n')
    assert cli(capsys, "runtime", "io-reuse", str(f)) == {"status": "SUCCESS"}
