"""Production scale: the save and graph_lint do linear work (counted, not timed), and the
default pipeline is byte-idempotent on dumps that carry GE's peer-index attribute."""
from __future__ import annotations

import gc
from pathlib import Path

import pytest

from benchmarks.gen_graph import make_model
from engine.core import graph as graph_mod
from engine.core.dumpio import PEER_INDEX_ATTR, build_model, parse_binary, read_modeldef, serialize_model
from engine.core.graph import InAnchor, Node
from engine.passes.context import RunContext
from engine.passes.manager import check_graph, resolve_passes, run_passes
from engine.proto import ge_ir_pb2 as pb
from harness import ROOT, ge_dumps, needs_ge_dumps, shared_pack

EXAMPLE = ROOT / "examples" / "train_step.pbtxt"
DUMPS = sorted(ge_dumps().glob("*.txt"))


def _with_peer_index(proto: pb.ModelDef) -> bytes:
    """The dump as GE writes it today: every op carries `_src_out_peer_index_for_ge_txt_load`."""
    model = build_model(proto)
    model.emit_peer_index = True
    return serialize_model(model)


def _pipeline(data: bytes) -> bytes:
    model = build_model(parse_binary(data, "<test>"))
    pack = shared_pack()
    ctx = RunContext(pack, model, {})
    check_graph(ctx)
    run_passes(ctx, resolve_passes(pack, None, {}))
    return serialize_model(model)


def _assert_idempotent(data: bytes) -> None:
    once = _pipeline(data)
    assert _pipeline(once) == once


# ---- idempotence ----------------------------------------------------------------------
def test_peer_index_reloads_in_the_order_it_was_written():
    """GE's loader files control edges under their source by the recorded index too: a
    source whose successors are written in another order than the file's gets them back."""
    text = """
    graph { name: "g"
      op { name: "a" type: "Data" output_desc { } }
      op { name: "b" type: "Relu" input: "a:-1" output_desc { }
           attr { key: "_src_out_peer_index_for_ge_txt_load" value { list { i: 1 val_type: VT_LIST_INT } } } }
      op { name: "c" type: "Relu" input: "a:-1" input: "b:-1" output_desc { }
           attr { key: "_src_out_peer_index_for_ge_txt_load" value { list { i: 0 i: 0 val_type: VT_LIST_INT } } } }
    }"""
    from google.protobuf import text_format
    model = build_model(text_format.Parse(text, pb.ModelDef()))
    a, b, c = (model.root.find(x) for x in "abc")
    assert a.out_ctrl == [c, b]
    assert c.in_ctrl == [a, b]                 # the destination keeps the file's order
    again = pb.ModelDef()
    again.ParseFromString(serialize_model(model))
    assert [list(op.attr[PEER_INDEX_ATTR].list.i) for op in again.graph[0].op[1:]] == [[1], [0, 0]]


@pytest.mark.parametrize("peer_index", [False, True], ids=["as-is", "peer-index"])
def test_pipeline_is_idempotent_on_the_example(peer_index):
    proto = read_modeldef(EXAMPLE)
    _assert_idempotent(_with_peer_index(proto) if peer_index else proto.SerializeToString())


@pytest.mark.parametrize("path", DUMPS, ids=[p.name for p in DUMPS])
@needs_ge_dumps
def test_pipeline_is_idempotent_on_ge_dumps(path):
    _assert_idempotent(_with_peer_index(read_modeldef(path)))


def test_pipeline_is_idempotent_on_a_training_step():
    """AtomicAddrClean's MemSet takes control edges to its atomic nodes in its own order;
    a second run used to reload them in file order and rewrite their peer indices."""
    _assert_idempotent(_with_peer_index(make_model(2000, seed=1)))


# ---- counted work -------------------------------------------------------------------------
class _Count:
    def __init__(self):
        self.n = 0


@pytest.fixture
def eq_calls(monkeypatch):
    """Counts equality tests between distinct nodes or anchors: every step of a list scan
    (`list.index`, `in`, `remove`) over them is one; dict lookups by identity are none."""
    count = _Count()

    def eq(self, other):
        count.n += 1
        return self is other

    for cls in (Node, InAnchor, graph_mod.OutAnchor):
        monkeypatch.setattr(cls, "__eq__", eq, raising=False)
        monkeypatch.setattr(cls, "__hash__", object.__hash__, raising=False)
    return count


def _fan_graph(n: int) -> pb.ModelDef:
    """One node controlling every other one and one output read by all of them."""
    m = pb.ModelDef()
    g = m.graph.add(name="g")
    src = g.op.add(name="hub", type="Data")
    src.output_desc.add()
    for k in range(n):
        op = g.op.add(name=f"n{k}", type="Relu", input=["hub:0", "hub:-1"])
        op.input_desc.add()
        op.output_desc.add()
    return m


@pytest.mark.parametrize("size", [500, 2000])
def test_save_does_linear_work(size, eq_calls):
    model = build_model(_fan_graph(size))
    model.emit_peer_index = True
    gc.collect()
    eq_calls.n = 0
    data = serialize_model(model)
    # a list.index per edge would compare size²/2 times for each of the two lists
    assert eq_calls.n <= 16 * size
    again = pb.ModelDef()
    again.ParseFromString(data)
    assert list(again.graph[0].op[-1].attr[PEER_INDEX_ATTR].list.i) == [size - 1, size - 1]
