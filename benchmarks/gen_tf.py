"""TensorFlow GraphDefs written without TensorFlow (engine/proto/tf_graph.proto): a TF1
training step as tf.train.AdamOptimizer writes it (VariableV2 + initializer Assign + read
Identity per variable, two Adam slots per weight, ApplyAdam, the beta-power update and the
`init`/`Adam` NoOps), at any size.

    python benchmarks/gen_tf.py LAYERS OUT.pb|OUT.pbtxt
"""
from __future__ import annotations

from engine.proto import tf_graph_pb2 as tf

F32 = tf.DT_FLOAT
F32_REF = tf.DT_FLOAT_REF


def node(gd: tf.GraphDef, name: str, op: str, inputs=(), dtype: int | None = F32, shape=None, **attrs) -> tf.NodeDef:
    nd = gd.node.add(name=name, op=op)
    nd.input.extend(inputs)
    if dtype is not None:
        nd.attr["dtype" if op in ("Placeholder", "VariableV2", "Const") else "T"].type = dtype
    if shape is not None:
        key = "shape" if op in ("Placeholder", "VariableV2") else "_output_shapes"
        target = nd.attr[key].shape if key == "shape" else nd.attr[key].list.shape.add()
        for d in shape:
            target.dim.add(size=d)
    for k, v in attrs.items():
        if isinstance(v, bool):
            nd.attr[k].b = v
        elif isinstance(v, bytes):
            nd.attr[k].s = v
    if op == "Const":
        t = nd.attr["value"].tensor
        t.dtype = dtype
        for d in shape or ():
            t.tensor_shape.dim.add(size=d)
        t.float_val.append(0.5)
    return nd


def variable(gd, name: str, shape) -> None:
    """VariableV2 + its initializer Assign + the read Identity, as tf.Variable writes them."""
    node(gd, name, "VariableV2", dtype=F32, shape=shape, container=b"", shared_name=b"")
    node(gd, f"{name}/Initializer/zeros", "Const", dtype=F32, shape=shape)
    node(gd, f"{name}/Assign", "Assign", [name, f"{name}/Initializer/zeros"], validate_shape=True, use_locking=True)
    node(gd, f"{name}/read", "Identity", [name])


def train_step(layers: int = 2) -> tf.GraphDef:
    """x → (MatMul with w_i, Relu)* → L2Loss; Adam updates each w_i through ApplyAdam
    with its two slot variables m, v; `init` groups the initializers."""
    gd = tf.GraphDef()
    gd.versions.producer = 27
    node(gd, "x", "Placeholder", dtype=F32, shape=[8, 16])
    for name in ("beta1_power", "beta2_power"):
        variable(gd, name, [])
    for c in ("lr", "beta1", "beta2", "epsilon"):
        node(gd, f"Adam/{c}", "Const", dtype=F32, shape=[])
    prev = "x"
    for i in range(layers):
        w = f"layer_{i}/kernel"
        variable(gd, w, [16, 16])
        variable(gd, f"{w}/Adam", [16, 16])
        variable(gd, f"{w}/Adam_1", [16, 16])
        node(gd, f"layer_{i}/MatMul", "MatMul", [prev, f"{w}/read"])
        node(gd, f"layer_{i}/Relu", "Relu", [f"layer_{i}/MatMul"])
        prev = f"layer_{i}/Relu"
    node(gd, "loss", "L2Loss", [prev])
    node(gd, "grad/ones", "OnesLike", ["loss"])
    updates = []
    for i in range(layers):
        w = f"layer_{i}/kernel"
        node(gd, f"grad/layer_{i}", "MatMul", ["x" if i == 0 else f"layer_{i - 1}/Relu", "grad/ones"])
        name = f"Adam/update_{w}/ApplyAdam"
        node(gd, name, "ApplyAdam", [w, f"{w}/Adam", f"{w}/Adam_1", "beta1_power", "beta2_power", "Adam/lr",
                                     "Adam/beta1", "Adam/beta2", "Adam/epsilon", f"grad/layer_{i}"], use_locking=False)
        updates.append("^" + name)
    node(gd, "Adam/mul", "Mul", ["beta1_power/read", "Adam/beta1", *updates])
    node(gd, "Adam/Assign", "Assign", ["beta1_power", "Adam/mul"], use_locking=False)
    node(gd, "Adam", "NoOp", [*updates, "^Adam/Assign"], dtype=None)
    inits = [f"^{n.name}" for n in gd.node if n.op == "Assign" and n.name != "Adam/Assign"]
    node(gd, "init", "NoOp", inits, dtype=None)
    return gd


def main(argv=None) -> int:
    import sys
    from google.protobuf import text_format
    argv = sys.argv[1:] if argv is None else argv
    gd = train_step(int(argv[0]))
    data = text_format.MessageToString(gd).encode() if argv[1].endswith(".pbtxt") else gd.SerializeToString()
    with open(argv[1], "wb") as fh:
        fh.write(data)
    print(f"{argv[1]}: {len(gd.node)} nodes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
