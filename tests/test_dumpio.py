"""GE dump I/O: the real dumps load and re-save byte for byte; edges follow
ModelSerializeImp; bad dumps give file:line:col errors."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from engine.core import dumpio
from engine.core.dumpio import build_model, load_model, save_model, serialize_model
from engine.core.errors import InputError
from engine.proto import ge_ir_pb2 as pb
from engine.proto import regen
from harness import ge_dumps, needs_ge_dumps

FIXTURES = ge_dumps()
DUMPS = sorted(FIXTURES.glob("*.txt"))


@needs_ge_dumps
def test_fixture_dumps_present():
    assert len(DUMPS) == 5


@pytest.mark.parametrize("path", DUMPS, ids=[p.name for p in DUMPS])
@needs_ge_dumps
def test_real_dump_round_trips_byte_identical(path, tmp_path):
    model = load_model(path)
    out = tmp_path / "out.txt"
    save_model(model, out)
    assert out.read_bytes() == path.read_bytes()


@pytest.mark.parametrize("path", DUMPS, ids=[p.name for p in DUMPS])
@needs_ge_dumps
def test_real_dump_binary_round_trip(path, tmp_path):
    model = load_model(path)
    b = tmp_path / "m.pb"
    save_model(model, b)
    again = load_model(b)
    assert serialize_model(again) == b.read_bytes()
    assert again.node_count() == model.node_count()


@pytest.mark.parametrize("path", DUMPS, ids=[p.name for p in DUMPS])
@needs_ge_dumps
def test_python_text_fallback_matches_apart_from_floats(path, monkeypatch):
    """Without protoc the pure-Python codec is used; only float rendering differs."""
    monkeypatch.setenv("MEMCONFLICT_NO_PROTOC", "1")
    model = load_model(path)
    text = dumpio.model_to_text(serialize_model(model)).decode()
    orig = path.read_text()
    diff = [(a, b) for a, b in zip(text.splitlines(), orig.splitlines()) if a != b]
    assert len(text.splitlines()) == len(orig.splitlines())
    assert all(a.strip().startswith(("f:", "list_f:")) or "f: " in a for a, _ in diff)


@needs_ge_dumps
def test_resnet_dump_structure():
    model = load_model(FIXTURES / "ge_proto_00017_OptimizeOriginalGraph_FeGraphFusionAfter.txt")
    assert model.root.name == "ResNet-50"
    assert model.node_count() == 710
    types = {}
    for n in model.root.nodes():
        types[n.type] = types.get(n.type, 0) + 1
    assert types["Const"] == 373
    # every data input with a producer has a consistent peer list
    for n in model.root.nodes():
        for a in n.ins:
            if a.peer is not None:
                assert a in a.peer.peers


@needs_ge_dumps
def test_empty_input_occupies_a_slot():
    model = load_model(FIXTURES / "ge_proto_00026_afterUBMatch.txt")
    empties = [(n, k) for n in model.root.nodes() for k, e in enumerate(n.op.input) if e == ""]
    assert len(empties) == 1
    n, k = empties[0]
    assert n.ins[k].peer is None


@needs_ge_dumps
def test_old_style_list_without_val_type_survives(tmp_path):
    path = FIXTURES / "origin_model.txt"
    model = load_model(path)
    save_model(model, tmp_path / "o.txt")
    assert (tmp_path / "o.txt").read_text() == path.read_text()


def _model(text: str) -> pb.ModelDef:
    from google.protobuf import text_format
    m = pb.ModelDef()
    text_format.Parse(text, m)
    return m


GRAPH = """
graph {
  name: "g"
  op { name: "a" type: "Data" output_desc { } }
  op { name: "b" type: "Relu" input: "a:0" input_desc { } output_desc { } }
  op { name: "c" type: "Relu" input: "a:0" input: "b:-1" input_desc { } output_desc { }
       attr { key: "_src_out_peer_index_for_ge_txt_load" value { list { i: 0 i: -1 val_type: VT_LIST_INT } } } }
  op { name: "d" type: "Add" input: "" input: "c:0" input_desc { } input_desc { } output_desc { } }
}
"""


def test_edges_control_and_peer_index_order():
    model = build_model(_model(GRAPH))
    g = model.root
    a, b, c, d = (g.find(x) for x in "abcd")
    # c's recorded peer index 0 puts it before b in a's peer list
    assert [p.node.name for p in a.outs[0].peers] == ["c", "b"]
    assert c.in_ctrl == [b] and b.out_ctrl == [c]
    assert d.ins[0].peer is None and d.ins[1].peer.node is c
    assert model.emit_peer_index
    assert "_src_out_peer_index_for_ge_txt_load" not in c.op.attr


def test_peer_index_reemitted_on_save():
    model = build_model(_model(GRAPH))
    again = pb.ModelDef()
    again.ParseFromString(serialize_model(model))
    c = [op for op in again.graph[0].op if op.name == "c"][0]
    assert list(c.attr["_src_out_peer_index_for_ge_txt_load"].list.i) == [0, 0]
    assert list(c.input) == ["a:0", "b:-1"]


def test_generated_module_is_fresh():
    assert regen.main(["--check"]) == 0


# ---- bad input -------------------------------------------------------------------------
def _err(tmp_path, text, name="bad.txt") -> str:
    p = tmp_path / name
    p.write_text(text) if isinstance(text, str) else p.write_bytes(text)
    with pytest.raises(InputError) as exc:
        load_model(p)
    return exc.value.render()


def test_malformed_text_has_line_and_column(tmp_path):
    msg = _err(tmp_path, 'graph {\n  name: "x"\n  op { name: "a" typo: 3 }\n}\n')
    assert "bad.txt:3:22: error: malformed GE dump" in msg
    assert 'no field named "typo"' in msg
    assert "hint:" in msg and "^" in msg


def test_unreadable_binary(tmp_path):
    msg = _err(tmp_path, b"\xff\xff\xff\xff\x0f", "bad.pb")
    assert "malformed binary GE dump" in msg


def test_missing_file(tmp_path):
    with pytest.raises(InputError, match="cannot read GE dump"):
        load_model(tmp_path / "nope.txt")


def test_dangling_edge(tmp_path):
    msg = _err(tmp_path, 'graph { name: "g" op { name: "b" type: "Relu" input: "zz:0" input_desc {} } }')
    assert "input 'zz:0' names no node of this graph" in msg


def test_duplicate_node_names(tmp_path):
    msg = _err(tmp_path, 'graph { name: "g" op { name: "a" type: "Data" } op { name: "a" type: "Data" } }')
    assert "graph 'g' has two nodes named 'a'" in msg


def test_missing_subgraph(tmp_path):
    msg = _err(tmp_path, 'graph { name: "g" op { name: "if" type: "If" subgraph_name: "then" } }')
    assert "names subgraph 'then', which is not in the dump" in msg


def test_output_index_out_of_range(tmp_path):
    msg = _err(tmp_path, 'graph { name: "g" op { name: "a" type: "Data" output_desc {} }'
                         ' op { name: "b" type: "Relu" input: "a:3" input_desc {} } }')
    assert "uses output 3 but 'a' has 1 output(s)" in msg


def test_no_graph(tmp_path):
    msg = _err(tmp_path, "version: 1\n")
    assert "the dump holds no graph" in msg


# ---- Note [lengths in place] -------------------------------------------------------------
def test_saving_writes_a_large_graph_in_place_and_the_same_bytes(tmp_path, monkeypatch):
    """Past HOLD_BYTES a graph goes to the file as it is made, behind its length's
    reserved bytes: serialize_model's bytes, no temporary file, no move (the width
    foretold), and never more than the limit and one batch of ops held."""
    model = load_model(Path(__file__).resolve().parents[1] / "examples" / "train_step.pbtxt")
    expected = serialize_model(model)
    monkeypatch.setattr(dumpio, "HOLD_BYTES", 2000)
    monkeypatch.setattr(dumpio.tempfile, "TemporaryFile", None)     # nothing is spilled to one
    most, direct, moves = [0], [], []
    real_add, real_move = dumpio._InPlace.add, dumpio._move

    def add(self, parts, n=None, k=0):
        real_add(self, parts, n, k)
        most[0] = max(most[0], sum(map(len, self.parts)))
        if self.start is not None and self not in direct:
            direct.append(self)
    monkeypatch.setattr(dumpio._InPlace, "add", add)
    monkeypatch.setattr(dumpio, "_move", lambda *a: moves.append(a) or real_move(*a))
    out = tmp_path / "out.pb"
    save_model(model, out)
    assert out.read_bytes() == expected
    assert direct, "the root graph is larger than HOLD_BYTES, so it was written directly"
    largest = max(len(n.op.SerializeToString()) for n in model.all_nodes())
    assert most[0] <= 2000 + dumpio._BATCH // 3 * (largest + 4)
    assert moves == []
    assert [p.name for p in tmp_path.iterdir()] == ["out.pb"]


@pytest.mark.parametrize("first,ops,rest,moved", [
    (2100, 1000, 20000, 1),     # 2,100 bytes of all 1,000 ops foretell 2 bytes; 22,100 need 3
    (3000, 1, 100, -2),         # 3,000 bytes of 1 op in 1,000 foretell 3 MB (4 bytes); 3,100 need 2
    (3000, 500, 3000, 0),       # 6,000 foretold and made: 2 bytes
], ids=["wider", "narrower", "as-foretold"])
def test_a_length_wider_or_narrower_than_reserved_moves_the_graph(tmp_path, first, ops, rest, moved):
    """_InPlace reserves the width of the length a graph's first ops foretell; a graph
    that ends larger or smaller is moved by the difference: the bytes are the graph's tag,
    its length and its pieces, whatever was foretold."""
    parts = [bytes([i % 251]) * 100 for i in range((first + rest) // 100)]
    head, tail = parts[:first // 100], parts[first // 100:]
    moves = []
    real_move = dumpio._move
    path = tmp_path / "g.bin"
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    with os.fdopen(fd, "wb") as fh:
        fh.write(b"HEAD")
        out = dumpio._InPlace(fh, 1000)
        dumpio.HOLD_BYTES, keep = 2000, dumpio.HOLD_BYTES
        try:
            dumpio._move = lambda *a: moves.append(a[3]) or real_move(*a)
            out.add(head, None, ops)
            out.add(tail, None, 1000 - ops)
            out.close()
            fh.write(b"TAIL")
        finally:
            dumpio.HOLD_BYTES, dumpio._move = keep, real_move
    body = b"".join(parts)
    assert path.read_bytes() == b"HEAD" + dumpio._GRAPH_TAG + dumpio._varint(len(body)) + body + b"TAIL"
    assert moves == ([moved] if moved else [])


# ---- Note [inputs as written] ------------------------------------------------------------
AS_WRITTEN = """
graph {
  name: "g"
  op { name: "a" type: "Data" output_desc { } output_desc { }
       attr { key: "_src_out_peer_index_for_ge_txt_load" value { list { val_type: VT_LIST_INT } } } }
  op { name: "b" type: "Relu" input: "a:0" input_desc { } output_desc { } }
  op { name: "c" type: "Relu" input: "a:0" input: "b:-1" input_desc { } output_desc { } }
  op { name: "ctrl_first" type: "Relu" input: "b:-1" input: "a:0" input_desc { } output_desc { } }
  op { name: "ctrl_twice" type: "Relu" input: "a:1" input: "c:-1" input: "c:-1" input_desc { } output_desc { } }
  op { name: "padded" type: "Relu" input: "a:00" input_desc { } output_desc { } }
  op { name: "extra_empty" type: "Relu" input: "a:0" input: "" input_desc { } output_desc { } }
  op { name: "short" type: "Add" input: "a:0" input_desc { } input_desc { } output_desc { } }
  op { name: "no_colon" type: "Add" input: "junk" input: "b:0" input_desc { } input_desc { } output_desc { } }
  op { name: "unfed" type: "Relu" input_desc { } output_desc { } }
  op { name: "gap" type: "Add" input: "" input: "c:0" input_desc { } input_desc { } output_desc { } }
  op { name: "beyond" type: "Relu" input: "" input: "b:0" input_desc { } output_desc { } }
  op { name: "d" type: "Add" input: "a:1" input: "b:0" input: "a:-1" input_desc { } input_desc { } output_desc { } }
  op { name: "e" type: "Relu" input: "a:0" input: "b:-1" input_desc { } output_desc { } }
}
"""
WRITTEN_AS_LOADED = {"a", "b", "c", "gap", "beyond", "d", "e"}


def test_loader_marks_the_nodes_whose_inputs_a_save_writes_unchanged():
    model = build_model(_model(AS_WRITTEN))
    assert model.emit_peer_index
    assert {n.name for n in model.root.nodes() if n.dirty is False} == WRITTEN_AS_LOADED
    assert all(n.dirty is None for n in model.root.nodes() if n.name not in WRITTEN_AS_LOADED)


def _edit(model):
    from engine.core import surgery
    g = model.root
    a, b, c, d = (g.find(x) for x in "abcd")
    surgery.unlink(a.outs[0], b.ins[0])             # every later peer of a:0 moves up one place
    surgery.unlink_ctrl(b, c)                       # and b's control successors too
    surgery.link_ctrl(d, g.find("unfed"))
    surgery.link(c.outs[0], b.ins[0])


@pytest.mark.parametrize("edit", [False, True])
def test_saving_nodes_as_written_gives_the_bytes_of_a_full_rewrite(edit, monkeypatch):
    """A save writes only the peer index of the nodes loaded as written (dirty False);
    the bytes are those of rewriting every node's inputs, as a save did before."""
    fast, full = build_model(_model(AS_WRITTEN)), build_model(_model(AS_WRITTEN))
    for n in full.root.nodes():
        n.dirty = None          # not known: every input list is rebuilt
    if edit:
        _edit(fast)
        _edit(full)
    rewritten = []
    real = dumpio._rewrite_inputs
    monkeypatch.setattr(dumpio, "_rewrite_inputs", lambda n, pos, op: (rewritten.append(n.name), real(n, pos, op)))
    data = serialize_model(fast)
    clean = WRITTEN_AS_LOADED - ({"b", "c"} if edit else set())     # the edit's unlinks mark b and c
    assert sorted(rewritten) == sorted({n.name for n in fast.root.nodes()} - clean)
    assert data == serialize_model(full)
    again = pb.ModelDef()
    again.ParseFromString(data)
    ops = {op.name: op for op in again.graph[0].op}
    assert list(ops["ctrl_first"].input) == ["a:0", "b:-1"]       # rewritten lists are canonical
    # e is not rewritten, but its places in a:0's peers and b's control successors are
    # written as they are now
    assert list(ops["e"].attr[dumpio.PEER_INDEX_ATTR].list.i) == ([5, 1] if edit else [6, 2])
    if edit:
        assert list(ops["c"].input) == ["a:0"]


def test_peer_lists_follow_the_keys_in_any_arrival_order():
    """Note [peers in order]: edges arriving in key order are linked at once, the rest
    sorted; either way each source's list is its entries in (key, running number) order."""
    import random
    rng = random.Random(3)
    for trial in range(200):
        g = pb.ModelDef().graph.add(name="g")
        srcs = [g.op.add(name=f"s{i}", type="Data") for i in range(3)]
        for s in srcs:
            s.output_desc.add()
        expected: dict[str, list] = {f"s{i}": [] for i in range(3)}
        ctrl_expected: dict[str, list] = {f"s{i}": [] for i in range(3)}
        seq = 0
        with_index = rng.random() < 0.8
        for j in range(rng.randrange(1, 9)):
            op = g.op.add(name=f"c{j}", type="Relu")
            keys = []
            data = rng.sample(range(3), rng.randrange(1, 4))
            ctrl = rng.sample(range(3), rng.randrange(0, 3))
            for i in data:
                op.input_desc.add()
                op.input.append(f"s{i}:0")
            for i in ctrl:
                op.input.append(f"s{i}:-1")
            for i, lists in [(i, expected) for i in data] + [(i, ctrl_expected) for i in ctrl]:
                seq += 1
                # mostly the place the edge will have, sometimes another, a repeat or -1
                place = len(lists[f"s{i}"])
                k = rng.choice([place, place, place, rng.randrange(-1, 4)])
                keys.append(k)
                lists[f"s{i}"].append((k if k >= 0 else seq, seq, op.name))
            if with_index:
                lst = op.attr[dumpio.PEER_INDEX_ATTR].list
                lst.i.extend(keys)
                lst.val_type = pb.AttrDef.ListValue.VT_LIST_INT
        if not with_index:      # no index: the running number is every key
            for d in (expected, ctrl_expected):
                for name, entries in d.items():
                    d[name] = [(s, s, dst) for _, s, dst in entries]
        md = pb.ModelDef()
        md.graph.append(g)
        model = build_model(md)
        for i in range(3):
            s = model.root.find(f"s{i}")
            assert [p.node.name for p in s.outs[0].peers] == [d for _, _, d in sorted(expected[f"s{i}"])]
            assert [c.name for c in s.out_ctrl] == [d for _, _, d in sorted(ctrl_expected[f"s{i}"])]
