"""The synthetic benchmark graphs are well-formed GE dumps and deterministic."""
from __future__ import annotations

import collections
import sys
from pathlib import Path

import pytest
from google.protobuf import text_format

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # benchmarks/ is not installed
from benchmarks.gen_graph import make_model, serialize, write_model  # noqa: E402
from engine.core.dumpio import model_to_text, parse_text  # noqa: E402
from engine.proto import ge_ir_pb2 as pb  # noqa: E402

N = 2000


@pytest.fixture(scope="module")
def model() -> pb.ModelDef:
    return make_model(N, seed=0)


def _flag(op, key: str) -> bool:
    """A bool attr, read without inserting the key (indexing a proto map adds it)."""
    return key in op.attr and op.attr[key].b


def test_node_count_within_one_percent(model):
    total = sum(len(g.op) for g in model.graph)
    assert abs(total - N) <= N // 100


def test_data_inputs_name_earlier_nodes_and_valid_ports(model):
    for g in model.graph:
        outputs = {}
        for i, op in enumerate(g.op):
            assert op.id == i, (g.name, op.name)
            data = [s for s in op.input if not s.endswith(":-1")]
            ctrl = [s for s in op.input if s.endswith(":-1")]
            assert op.input[:len(data)] == data, f"{op.name}: control edges must follow data inputs"
            assert len(data) == len(op.input_desc), op.name
            for src in data:
                if src == "":
                    continue
                name, idx = src.rsplit(":", 1)
                assert name in outputs, f"{g.name}/{op.name}: input {src!r} names no earlier node"
                assert 0 <= int(idx) < outputs[name], f"{op.name}: {src!r} out of range"
            for src in ctrl:
                assert src.rsplit(":", 1)[0] in outputs, f"{op.name}: control {src!r}"
            outputs[op.name] = len(op.output_desc)


def test_subgraphs_exist_and_carry_parent_indices(model):
    names = [g.name for g in model.graph]
    assert len(set(names)) == len(names)
    linked = [s for g in model.graph for op in g.op for s in op.subgraph_name]
    assert sorted(linked) == sorted(names[1:])
    for g in model.graph[1:]:
        for op in g.op:
            if op.type == "Data":
                assert "_parent_node_index" in op.attr, op.name
    types = collections.Counter(op.type for op in model.graph[0].op)
    assert types["If"] >= 1 and types["While"] >= 1
    assert model.graph[0].op[-1].type == "NetOutput"


def test_training_step_features(model):
    ops = [op for g in model.graph for op in g.op]
    allreduce = [op for op in ops if op.type == "HcomAllReduce"]
    assert allreduce and all(_flag(op, "_input_mutable") for op in allreduce)
    assert any(_flag(op, "continuous_input") and len(op.input) > 1 for op in allreduce)
    assert any("_output_memory_type" in op.attr for op in allreduce)
    assign = next(op for op in ops if op.type == "Assign")
    assert list(assign.attr["_input_name_key"].list.s) == [b"ref", b"value"]
    assert list(assign.attr["_output_name_key"].list.s) == [b"ref"]
    assert any(s.endswith(":-1") for op in ops for s in op.input)
    for t in ("HcomBroadcast", "ApplyMomentum", "Const", "Identity", "Variable"):
        assert any(op.type == t for op in ops), t


def test_deterministic(model):
    assert serialize(make_model(N, seed=0)) == serialize(model)
    assert serialize(make_model(N, seed=1)) != serialize(model)


def test_text_round_trip(model, tmp_path):
    out = tmp_path / "g.txt"
    write_model(model, out)
    text = out.read_bytes()
    assert text.startswith(b"version: 1\ngraph {\n")
    back = parse_text(text, str(out))
    assert serialize(back) == serialize(model)


def test_text_round_trip_python():
    """Python's text_format (the fallback) parses and prints the same text as protoc."""
    small = make_model(300, seed=3)
    text = model_to_text(serialize(small)).decode()
    assert serialize(text_format.Parse(text, pb.ModelDef())) == serialize(small)
    assert text == text_format.MessageToString(small)   # no float attrs, so renderings agree


def test_binary_output(model, tmp_path):
    out = tmp_path / "g.pb"
    write_model(model, out)
    assert pb.ModelDef.FromString(out.read_bytes()) == model
