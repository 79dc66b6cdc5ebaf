"""Caffe networks with their weights (.caffemodel): the blobs become Const inputs as GE's
CaffeWeightsParser / CaffeCustomParserAdapter add them. The caffemodels are written here
with a protobuf writer of our own, from the field numbers of Caffe's caffe.proto."""
from __future__ import annotations

import struct

import pytest

from engine.cli import main
from engine.core.errors import InputError
from engine.core.io import load_graph
from engine.proto import ge_ir_pb2 as pb
from harness import shared_fixtures, shared_pack

MODELS = shared_fixtures() / "parser-models"


# ---- a protobuf writer: Caffe's NetParameter (layer = 100), LayerParameter (name 1, type 2,
# bottom 3, top 4, blobs 7, convolution_param 106, inner_product_param 117), BlobProto
# (num..width 1-4, data 5, double_data 8, int8_data 10, int32_data 11, shape 7), BlobShape (dim 1)
def varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(num: int, payload: bytes) -> bytes:
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def vfield(num: int, value: int) -> bytes:
    return varint(num << 3) + varint(value)


def blob(shape=None, data=None, *, legacy=None, doubles=None, int8=None, int32=None) -> bytes:
    out = b""
    if legacy is not None:
        out += b"".join(vfield(k, v) for k, v in zip((1, 2, 3, 4), legacy))
    if shape is not None:
        out += field(7, field(1, b"".join(varint(d) for d in shape)))
    if data is not None:
        out += field(5, struct.pack(f"<{len(data)}f", *data))
    if doubles is not None:
        out += field(8, struct.pack(f"<{len(doubles)}d", *doubles))
    if int8 is not None:
        out += field(10, bytes(int8))
    if int32 is not None:
        out += field(11, b"".join(varint(v) for v in int32))
    return out


def layer(name: str, type_: str, blobs=(), bias_term=None, param=106) -> bytes:
    out = field(1, name.encode()) + field(2, type_.encode())
    out += b"".join(field(7, b) for b in blobs)
    if bias_term is not None:
        out += field(param, vfield(2, int(bias_term)))
    return out


def caffemodel(*layers: bytes) -> bytes:
    return b"".join(field(100, lay) for lay in layers)


NET = ('name: "lenet"\ninput: "x"\ninput_dim: 1\ninput_dim: 1\ninput_dim: 4\ninput_dim: 4\n'
       'layer { name: "conv" type: "Convolution" bottom: "x" top: "c" convolution_param { num_output: 2 kernel_size: 3 } }\n'
       'layer { name: "relu" type: "ReLU" bottom: "c" top: "c" }\n'
       'layer { name: "fc" type: "InnerProduct" bottom: "c" top: "y" inner_product_param { num_output: 3 } }\n')


def weights_ok() -> bytes:
    return caffemodel(
        layer("x", "Input"),
        layer("conv", "Convolution", [blob([2, 1, 3, 3], [0.5] * 18), blob(legacy=[1, 1, 1, 2], data=[1.0, 2.0])],
              bias_term=True),
        layer("relu", "ReLU"),
        layer("fc", "InnerProduct", [blob(legacy=[1, 1, 3, 8], doubles=[0.25] * 24), blob([3], int32=[1, 2, 3])],
              bias_term=False, param=117),
        layer("loss", "SoftmaxWithLoss"),
        layer("extra", "Convolution", [blob([1], [1.0])]))


@pytest.fixture
def net(tmp_path):
    (tmp_path / "lenet.prototxt").write_text(NET)
    (tmp_path / "lenet.caffemodel").write_bytes(weights_ok())
    return tmp_path / "lenet.prototxt", tmp_path / "lenet.caffemodel"


def run(args, capsys):
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def by_name(model):
    return {n.name: n for n in model.root.nodes()}


def test_blobs_become_const_inputs(net):
    m, _ = load_graph(str(net[0]), shared_pack(), None, str(net[1]))
    # AddNodeFront: the Const made last comes first
    assert [(n.name, n.type) for n in m.root.nodes()] == [
        ("dynamic_const_3", "Const"), ("dynamic_const_2", "Const"), ("dynamic_const_1", "Const"),
        ("dynamic_const_0", "Const"), ("x", "Data"), ("conv", "Conv2D"), ("relu", "Relu"),
        ("fc", "FullyConnection"), ("Node_Output", "NetOutput")]
    n = by_name(m)
    assert [a.peer.node.name for a in n["conv"].ins] == ["x", "dynamic_const_0", "dynamic_const_1"]
    assert n["conv"].ports()[0] == {"x": 0, "filter": 1, "bias": 2}
    assert n["conv"].op.attr["tvm_origin_input_num"].i == 1
    value = n["dynamic_const_0"].op.attr["value"].t
    assert list(value.desc.shape.dim) == [2, 1, 3, 3] and value.data == struct.pack("<18f", *[0.5] * 18)
    # bias_term: the [1, 1, 1, 2] bias becomes [2]
    assert list(n["dynamic_const_1"].outs[0].desc.shape.dim) == [2]
    # InnerProduct: blob 0 [1, 1, 3, 8] → [3, 8], doubles stored as floats; no bias_term: blob 1 kept as is
    fc_w = n["dynamic_const_2"].op.attr["value"].t
    assert list(fc_w.desc.shape.dim) == [3, 8] and pb.DataType.Name(fc_w.desc.dtype) == "DT_FLOAT" and fc_w.data == struct.pack("<24f", *[0.25] * 24)
    fc_b = n["dynamic_const_3"].op.attr["value"].t
    assert pb.DataType.Name(fc_b.desc.dtype) == "DT_INT32" and fc_b.data == struct.pack("<3i", 1, 2, 3)
    assert ("import", "Caffe weights: 4 blob(s) made Const inputs; 1 layer(s) of the weights are no node of the "
                      "network, skipped: extra") in m.notes


def test_convert_with_weights_is_deterministic(net, tmp_path, capsys):
    outs = []
    for k in range(2):
        out = tmp_path / f"o{k}.pbtxt"
        code, _, err = run(["convert", net[0], out, "--weights", net[1]], capsys)
        assert code == 0 and "note (import): Caffe weights: 4 blob(s) made Const inputs" in err
        outs.append(out.read_bytes())
    assert outs[0] == outs[1] and b'name: "dynamic_const_0"' in outs[0]
    rj = tmp_path / "r.json"
    code, out, _ = run(["run", net[0], "--weights", net[1], "--report-json", rj], capsys)
    assert code == 0 and "0 node(s) inserted" in out
    import json
    assert json.loads(rj.read_text())["summary"]["by_code"] == {"ATTR_SET": 1}     # NetOutput's is_input_const


def test_without_weights_noted(net):
    m, _ = load_graph(str(net[0]), shared_pack())
    assert ("import", "no Caffe weights given (--weights NET.caffemodel): layers get no weight Const inputs") in m.notes
    assert [a.peer.node.name for a in by_name(m)["conv"].ins] == ["x"]


def test_layer_missing_from_weights_refused(net, capsys, tmp_path):
    net[1].write_bytes(caffemodel(layer("fc", "InnerProduct", [blob([3, 16], [0.0] * 48)])))
    code, _, err = run(["convert", net[0], tmp_path / "o.pbtxt", "--weights", net[1]], capsys)
    assert code == 2 and "lenet.caffemodel: error: Op[conv] in model file does not exist in weight file (E11029)" in err
    assert not (tmp_path / "o.pbtxt").exists()


@pytest.mark.parametrize("blobs, message", [
    ([blob([2, 1, 3, 3], [0.5] * 17)], "blob size 17 of layer 'conv' does not match its shape size 18 (shape [2, 1, 3, 3]) (E11033)"),
    ([blob([2, 0, 3], [])], "convert weight fail: dim 0 of layer 'conv' <= 0"),
])
def test_bad_blobs_refused(net, capsys, tmp_path, blobs, message):
    net[1].write_bytes(caffemodel(layer("conv", "Convolution", blobs)))
    code, _, err = run(["convert", net[0], tmp_path / "o.pbtxt", "--weights", net[1]], capsys)
    assert code == 2 and f"lenet.caffemodel: error: {message}" in err


def test_malformed_and_empty_weights_located(net, capsys, tmp_path):
    good = weights_ok()
    net[1].write_bytes(good[:-7])
    code, _, err = run(["convert", net[0], tmp_path / "o.pbtxt", "--weights", net[1]], capsys)
    assert code == 2 and "lenet.caffemodel: error: malformed Caffe weights at byte " in err
    net[1].write_bytes(b"")
    code, _, err = run(["convert", net[0], tmp_path / "o.pbtxt", "--weights", net[1]], capsys)
    assert code == 2 and "weight layer num is zero, weight file may be invalid (E11024)" in err
    net[1].write_bytes(field(2, field(4, b"old")))          # V1 `layers` only
    code, _, err = run(["convert", net[0], tmp_path / "o.pbtxt", "--weights", net[1]], capsys)
    assert code == 2 and "(E11023)" in err


def test_repeated_layer_names_are_same_k(tmp_path):
    net = ('input: "x"\ninput_dim: 1\ninput_dim: 1\ninput_dim: 2\ninput_dim: 2\n'
           'layer { name: "s" type: "Scale" bottom: "x" top: "a" }\n'
           'layer { name: "s_same_1" type: "Scale" bottom: "a" top: "b" }\n')
    (tmp_path / "n.prototxt").write_text(net)
    (tmp_path / "n.caffemodel").write_bytes(caffemodel(layer("s", "Scale", [blob([1], [2.0])]),
                                                       layer("s", "Scale", [blob([1], [3.0])])))
    m, _ = load_graph(str(tmp_path / "n.prototxt"), shared_pack(), None, str(tmp_path / "n.caffemodel"))
    n = by_name(m)
    assert [a.peer.node.name for a in n["s"].ins] == ["x", "dynamic_const_0"]
    assert [a.peer.node.name for a in n["s_same_1"].ins] == ["s", "dynamic_const_1"]


def test_weights_only_for_caffe(net, tmp_path):
    (tmp_path / "g.pbtxt").write_text('graph { name: "g" }\n')
    with pytest.raises(InputError) as exc:
        load_graph(str(tmp_path / "g.pbtxt"), shared_pack(), None, str(net[1]))
    assert "--weights: error: --weights is for Caffe networks" in exc.value.render()


@pytest.mark.skipif(not MODELS.is_dir(), reason="no ../shared/fixtures/parser-models")
def test_ge_parser_test_caffemodel(tmp_path, capsys):
    """GE's caffe_add.caffemodel (its parser test's weights) reads: the only blob is on an Input
    layer, whose parser (CaffeDataParser) takes none. Its network, less the shapeless net input,
    is still refused as GE refuses it: the Reshape's second bottom meets the shape Const."""
    from engine.core.importers.caffe_weights import parse_weights
    w = parse_weights((MODELS / "caffe_add.caffemodel").read_bytes(), "caffe_add.caffemodel")
    assert [(x.name, x.type, len(x.blobs)) for x in w.layer] == [("data", "Input", 0), ("const", "Input", 1),
                                                                   ("reshape", "Reshape", 0)]
    text = (MODELS / "caffe_add.pbtxt").read_text().replace('input: "data"\n', "", 1)
    (tmp_path / "add.prototxt").write_text(text)
    code, _, err = run(["convert", tmp_path / "add.prototxt", tmp_path / "o.pbtxt", "--weights",
                        MODELS / "caffe_add.caffemodel"], capsys)
    assert code == 2 and "error: Add link failed from op[const] to op[reshape]: its input 1 holds the shape Const" in err


def test_reshape_gets_its_shape_const(tmp_path, capsys):
    net = ('input: "x"\ninput_dim: 1\ninput_dim: 2\ninput_dim: 2\ninput_dim: 2\n'
           'layer { name: "r" type: "Reshape" bottom: "x" top: "y" reshape_param { shape { dim: 0 dim: -1 } axis: 1 } }\n'
           'layer { name: "s" type: "Scale" bottom: "y" top: "z" }\n')
    (tmp_path / "r.prototxt").write_text(net)
    (tmp_path / "r.caffemodel").write_bytes(caffemodel(layer("s", "Scale", [blob([1], [2.0])])))
    m, _ = load_graph(str(tmp_path / "r.prototxt"), shared_pack(), None, str(tmp_path / "r.caffemodel"))
    assert [n.name for n in m.root.nodes()][:2] == ["dynamic_const_1", "dynamic_const_0"]    # weights' Const after
    n = by_name(m)
    assert [a.peer.node.name for a in n["r"].ins] == ["x", "dynamic_const_0"]
    assert n["r"].ports()[0] == {"x": 0, "shape": 1}
    assert n["dynamic_const_0"].op.attr["value"].t.data == struct.pack("<2q", 0, -1)
    assert list(n["r"].op.attr["shape"].list.i) == [0, -1]
    assert (n["r"].op.attr["axis"].i, n["r"].op.attr["num_axes"].i) == (1, -1)
    assert [a.peer.node.name for a in n["s"].ins] == ["r", "dynamic_const_1"]
    (tmp_path / "r.prototxt").write_text(net.replace(" reshape_param { shape { dim: 0 dim: -1 } axis: 1 }", ""))
    code, _, err = run(["convert", tmp_path / "r.prototxt", tmp_path / "o.pbtxt"], capsys)
    assert code == 2 and "error: Reshape has no shape info, layer name = r, layer type = Reshape" in err


def test_damaged_weights_never_crash(net):
    import random
    rnd = random.Random(3)
    good = weights_ok()
    refused = 0
    for _ in range(120):
        d = bytearray(good)
        for _ in range(rnd.randint(1, 6)):
            d[rnd.randrange(len(d))] = rnd.randrange(256)
        net[1].write_bytes(bytes(d))
        try:
            load_graph(str(net[0]), shared_pack(), None, str(net[1]))
        except InputError as exc:
            assert "lenet.caffemodel" in exc.render() or "lenet.prototxt" in exc.render()
            refused += 1
    assert 0 < refused < 120


def test_weights_with_a_batch_refused(net, tmp_path, capsys):
    code, _, err = run(["run", net[0], net[0], "--out-dir", tmp_path / "out", "--weights", net[1]], capsys)
    assert code == 2 and "--weights: error: --weights belongs to one Caffe network, not to a batch of graphs" in err
    assert not (tmp_path / "out").exists()
