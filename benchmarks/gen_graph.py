"""Deterministic generator of synthetic GE dump graphs shaped like one training step.

    python benchmarks/gen_graph.py N OUT [--seed S] [--dump-attrs] [--hub SHARE]
                                       # OUT: *.pb (binary) or *.txt / *.pbtxt (text)

Library use::

    from benchmarks.gen_graph import make_model, write_model
    model = make_model(10_000, seed=0)       # ge_ir_pb2.ModelDef with exactly 10_000 OpDefs
    write_model(model, "g.txt")

The graph is a ``ge.proto.ModelDef`` laid out like GE's ``ge_proto_*.txt`` dumps (see
shared/spec/ge-formats.md): forward conv/dense blocks with residual Adds, a softmax loss,
the mirrored backward pass, grouped HcomAllReduce of the gradients, ApplyMomentum / Assign
updates, HcomBroadcast of some variables and If / While ops whose branches are further
GraphDefs.  The node count is exact: every OpDef of every GraphDef counts.

Note [templates]: building a TensorDescriptor field by field costs ~µs per field, so each
distinct op signature (type, port tensors, attrs) is built once and later ops are
``CopyFrom`` that template plus name / inputs / id.  100k nodes take a few seconds.
"""
from __future__ import annotations

import argparse
import math
import os
import random
import sys
from pathlib import Path
from typing import Callable, NamedTuple

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from engine.core.attrs import set_attr  # noqa: E402
from engine.core.dumpio import model_to_text, write_atomic  # noqa: E402
from engine.proto import ge_ir_pb2 as pb  # noqa: E402

MIN_NODES = 150
BATCH = 32
NUM_CLASSES = 1000
DENSE_DIMS = (256, 512, 1024, 2048)
CONV_CHANNELS = (32, 64, 128, 256)
NODES_PER_CONTROL_FLOW = 5000   # one If and one While per this many nodes (at least one each)
UPDATES_PER_NOOP = 64
LAYER_MAX = 26                  # most nodes one conv/dense layer can add (fwd, bwd, update, NoOp)
P2P_DDR = 0x11                  # rt_mem.h RT_MEMORY_P2P_DDR, an "RTS special" memory type

F32, F16, I32, BOOL, UNDEF = "DT_FLOAT", "DT_FLOAT16", "DT_INT32", "DT_BOOL", "DT_UNDEFINED"
ELEM_BYTES = {F32: 4, F16: 2, I32: 4, BOOL: 1, UNDEF: 0}
CPP_DTYPE = {F32: 0, F16: 1}    # C++ ge::DataType values, used by Cast.dst_type

GE_LOCAL, RTS, HCCL, AICORE = ("DNN_VM_GE_LOCAL_OP_STORE", "DNN_VM_RTS_OP_STORE",
                               "ops_kernel_info_hccl", "AIcoreEngine")
KERNEL_LIB = {"Data": GE_LOCAL, "Variable": GE_LOCAL, "Const": GE_LOCAL, "NetOutput": GE_LOCAL,
              "NoOp": GE_LOCAL, "Reshape": GE_LOCAL, "Identity": RTS, "If": RTS, "While": RTS,
              "HcomAllReduce": HCCL, "HcomBroadcast": HCCL}
CONV_ATTRS = (("data_format", "NCHW"), ("dilations", (1, 1, 1, 1)), ("groups", 1),
              ("offset_x", 0), ("pads", (1, 1, 1, 1)), ("strides", (1, 1, 1, 1)))


class T(NamedTuple):
    """A tensor: storage dtype/shape/layout plus its origin shape/format (None = same)."""

    dtype: str
    shape: tuple
    layout: str
    oshape: tuple | None = None
    oformat: str | None = None


class Val(NamedTuple):
    """A produced tensor: the `OpDef.input` entry that reads it ("node:idx", "" = none)."""

    src: str
    t: T


class Strs(NamedTuple):
    """A list-of-strings attr value (plain tuples mean list of ints)."""

    v: tuple


def nd(dtype: str, *shape: int) -> T:
    return T(dtype, shape, "ND")


def nchw(dtype: str, *shape: int) -> T:
    return T(dtype, shape, "NCHW")


def fractal_z(t: T) -> T:
    c_out, c_in, kh, kw = t.shape
    storage = (math.ceil(c_in / 16) * kh * kw, math.ceil(c_out / 16), 16, 16)
    return T(t.dtype, storage, "FRACTAL_Z", t.shape, t.layout)


def fractal_nz(t: T) -> T:
    k, n = t.shape
    return T(t.dtype, (math.ceil(n / 16), math.ceil(k / 16), 16, 16), "FRACTAL_NZ", t.shape, t.layout)


NO_INPUT = Val("", T(UNDEF, (), "RESERVED"))   # an unconnected optional input slot


def _set_attr(attrs, key: str, value) -> None:
    """Template attr values are hashable: `Strs` is a list of strings, a tuple a list of ints."""
    if isinstance(value, Strs):
        set_attr(attrs, key, list(value.v), "list_s")
    elif isinstance(value, tuple):
        set_attr(attrs, key, list(value), "list_i")
    else:
        set_attr(attrs, key, value)


# C++ ge::Format values of the layouts used here (format_for_int / origin_format_for_int)
FORMAT_INT = {"NCHW": 0, "ND": 2, "FRACTAL_Z": 4, "FRACTAL_NZ": 29, "RESERVED": 40}


def _build_desc(t: T, is_output: bool, extra: tuple, dump_attrs: bool = False) -> pb.TensorDescriptor:
    """A TensorDescriptor as in the real dumps (origin_format / _data_type / _shape attrs).

    Note [desc attrs]: current GE also writes format_for_int, origin_format_for_int and
    origin_shape_initialized (spec §2.6); the fixture dumps do not, and leaving them out keeps
    the text near the dumps' ~2 KB per op.
    """
    d = pb.TensorDescriptor()
    oshape = t.shape if t.oshape is None else t.oshape
    oformat = t.layout if t.oformat is None else t.oformat
    defined = t.dtype != UNDEF
    d.dtype = pb.DataType.Value(t.dtype)
    d.shape.SetInParent()
    d.shape.dim.extend(t.shape)
    d.layout = t.layout
    _set_attr(d.attr, "origin_format", oformat)
    if defined:
        _set_attr(d.attr, "origin_data_type", t.dtype)
        _set_attr(d.attr, "origin_shape", oshape)
    for key, value in extra:
        _set_attr(d.attr, key, value)
    if dump_attrs:      # what current GE's desc serializer adds (ge-formats.md §2.6)
        _set_attr(d.attr, "format_for_int", FORMAT_INT[t.layout])
        _set_attr(d.attr, "origin_format_for_int", FORMAT_INT[oformat])
        _set_attr(d.attr, "origin_shape_initialized", defined)
    d.has_out_attr = True
    d.size = math.prod(t.shape) * ELEM_BYTES[t.dtype] if defined else 0
    d.device_type = "NPU"
    if is_output:
        d.real_dim_cnt = len(oshape)
    return d


def _build_template(key: tuple, dump_attrs: bool = False) -> pb.OpDef:
    op_type, ins, outs, attrs, in_extra = key
    lib = KERNEL_LIB.get(op_type, AICORE)
    o = pb.OpDef()
    o.type = op_type
    o.has_out_attr = True
    for i, (_, t) in enumerate(ins):
        o.input_desc.add().CopyFrom(_build_desc(t, False, in_extra[i] if in_extra else (), dump_attrs))
    for _, t in outs:
        o.output_desc.add().CopyFrom(_build_desc(t, True, (), dump_attrs))
    common = [("_datadump_original_op_names", Strs(())), ("_ge_attr_op_kernel_lib_name", lib),
              ("_input_name_key", Strs(tuple(p for p, _ in ins))),
              ("_input_name_value", tuple(range(len(ins)))),
              ("_output_name_key", Strs(tuple(p for p, _ in outs))),
              ("_output_name_value", tuple(range(len(outs))))]
    if lib == AICORE:
        common.append(("_fe_imply_type", 6))   # TBE implementation
    if dump_attrs:      # what GE's own passes leave on every op of a dumped training graph
        common += [("_session_graph_id", "0_1"), ("_is_connected_to_netoutput", False),
                   ("_ir_attr_names", Strs(tuple(k for k, _ in attrs)))]
    for k, v in common + list(attrs):
        _set_attr(o.attr, k, v)
    return o


def _ports(prefix: str, vals) -> list:
    return [(f"{prefix}{i}", v) for i, v in enumerate(vals)]


class _Gen:
    """Builds one ModelDef of exactly `n` nodes; see make_model."""

    def __init__(self, n: int, seed: int, dump_attrs: bool = False) -> None:
        self.n = n
        self.dump_attrs = dump_attrs
        self.rng = random.Random(seed)
        self.model = pb.ModelDef(version=1)
        self.root = self._new_graph("train_step")
        self.templates: dict[tuple, pb.OpDef] = {}
        self.count = 0          # OpDefs emitted so far, all graphs
        self.pending = 0        # OpDefs already promised to backward / update
        self.layer = 0
        self.act: Val | None = None
        self.nodiff: set[str] = set()           # tensors whose gradient is not built
        self.uses: dict[str, int] = {}          # differentiable consumers per tensor
        self.contrib: dict[str, list[Val]] = {}
        self.tape: list[tuple[str, Callable[[Val], list]]] = []
        self.params: dict[str, tuple[Val, bool]] = {}   # key -> (variable, uses momentum)
        self.weights: list[Val] = []
        self.groups: list[list[str]] = []       # allreduce groups of param keys (forward order)
        self.group_of: dict[str, int] = {}
        self.group_cap = 0
        self.ready: dict[int, dict[str, Val]] = {}
        self.updates: list[str] = []
        self.n_allreduce = self.n_broadcast = 0
        per = max(1, round(n / NODES_PER_CONTROL_FLOW))
        self.flow_plan = [("while", self.rng.random() < 0.5) if k % 2 else ("if", False)
                          for k in range(2 * per)]
        self.flow_done = 0

    # -- emission ------------------------------------------------------------------------
    def _new_graph(self, name: str) -> pb.GraphDef:
        g = self.model.graph.add()
        g.name = name
        return g

    def op(self, g, name: str, op_type: str, ins=(), outs=(), attrs=(), ctrl=(),
           subgraphs=(), in_extra=None) -> list[Val]:
        """Append one OpDef to graph `g`; return its outputs as Vals."""
        key = (op_type, tuple((p, v.t) for p, v in ins), tuple(outs), tuple(attrs), in_extra)
        tmpl = self.templates.get(key)
        if tmpl is None:
            tmpl = self.templates[key] = _build_template(key, self.dump_attrs)
        o = g.op.add()
        o.CopyFrom(tmpl)
        o.name = name
        o.input.extend([v.src for _, v in ins] + [f"{c}:-1" for c in ctrl])
        o.id = len(g.op) - 1
        if subgraphs:
            o.subgraph_name.extend(subgraphs)
        self.count += 1
        return [Val(f"{name}:{i}", t) for i, (_, t) in enumerate(outs)]

    def op1(self, *args, **kw) -> Val:
        return self.op(self.root, *args, **kw)[0]

    def const(self, name: str, t: T, g=None) -> Val:
        return self.op(g or self.root, name, "Const", outs=[("y", t)])[0]

    def variable(self, name: str, t: T) -> Val:
        return self.op1(name, "Variable", outs=[("y", t)],
                        attrs=(("container", ""), ("shared_name", "")))

    def data(self, g, name: str, t: T, attr: tuple) -> Val:
        return self.op(g, name, "Data", ins=[("x", Val("", t))], outs=[("y", t)], attrs=(attr,))[0]

    def cast(self, name: str, v: Val, dtype: str, ctrl=()) -> Val:
        return self.op1(name, "Cast", ins=[("x", v)], outs=[("y", v.t._replace(dtype=dtype))],
                        attrs=(("dst_type", CPP_DTYPE[dtype]), ("truncate", False)), ctrl=ctrl)

    def binary(self, name: str, op_type: str, x1: Val, x2: Val, t: T | None = None, g=None) -> Val:
        return self.op(g or self.root, name, op_type, ins=[("x1", x1), ("x2", x2)],
                       outs=[("y", t or x1.t)])[0]

    def unary(self, name: str, op_type: str, x: Val, g=None) -> Val:
        return self.op(g or self.root, name, op_type, ins=[("x", x)], outs=[("y", x.t)])[0]

    def net_output(self, g, name: str, vals, ctrl=(), parent_index: bool = False) -> None:
        extra = tuple(((("_parent_node_index", i),) for i in range(len(vals)))) if parent_index else None
        self.op(g, name, "NetOutput", ins=_ports("x", vals), ctrl=ctrl, in_extra=extra)
        g.output.extend(v.src for v in vals)

    # -- budget ---------------------------------------------------------------------------
    def _tail_cost(self) -> int:
        """Upper bound of the nodes still to come once the forward body stops."""
        flow = sum(self._flow_cost(p) for p in self.flow_plan[self.flow_done:])
        reshape = 4 if len(self.act.t.shape) == 4 else 0
        logits, loss, step, net_output = LAYER_MAX, 2, 2, 1
        noops = math.ceil((len(self.params) + 2) / UPDATES_PER_NOOP) + 1
        return flow + reshape + logits + loss + step + noops + net_output

    def _room(self, cost: int) -> bool:
        return self.count + self.pending + self._tail_cost() + cost <= self.n

    def _consume(self, v: Val) -> None:
        """Record a differentiable use of `v`; a second use costs a gradient AddN."""
        if v.src in self.nodiff:
            return
        self.uses[v.src] = self.uses.get(v.src, 0) + 1
        if self.uses[v.src] == 2:
            self.pending += 1

    # -- parameters, collectives, updates -------------------------------------------------
    def _param(self, key: str, t: T, momentum: bool) -> Val:
        var = self.variable(key, t)
        self.params[key] = (var, momentum)
        if momentum:
            self.weights.append(var)
        if not self.groups or len(self.groups[-1]) >= self.group_cap:
            self.groups.append([])
            self.group_cap = self.rng.choice((1, 1, 2, 3, 4, 6))
            self.pending += 1
        self.groups[-1].append(key)
        self.group_of[key] = len(self.groups) - 1
        self.pending += 2 if momentum else 3
        return var

    def _broadcast(self, scope: str, variables: list[Val]) -> list[str]:
        """HcomBroadcast the variables and Assign the result back; returns the Assign names."""
        k = self.n_broadcast
        self.n_broadcast += 1
        attrs = [("_input_mutable", True), ("fusion", 0), ("fusion_id", -1),
                 ("group", "hccl_world_group"), ("root_rank", 0)]
        if k % 4 == 0:
            attrs += [("_input_memory_type", (P2P_DDR,) * len(variables)),
                      ("_output_memory_type", (P2P_DDR,) * len(variables))]
        outs = self.op(self.root, f"{scope}/broadcast/HcomBroadcast", "HcomBroadcast",
                       ins=_ports("x", variables), outs=_ports("y", [v.t for v in variables]),
                       attrs=attrs)
        names = []
        for i, (var, y) in enumerate(zip(variables, outs)):
            names.append(f"{scope}/broadcast/Assign_{i}")
            self.op1(names[-1], "Assign", ins=[("ref", var), ("value", y)], outs=[("ref", var.t)],
                     attrs=(("use_locking", False), ("validate_shape", True)))
        return names

    def _grad_ready(self, key: str, g: Val) -> None:
        gid = self.group_of[key]
        ready = self.ready.setdefault(gid, {})
        ready[key] = g
        if len(ready) == len(self.groups[gid]):
            self._allreduce(gid, [ready[k] for k in self.groups[gid]])

    def _allreduce(self, gid: int, grads: list[Val]) -> None:
        k, n = self.n_allreduce, len(grads)
        self.n_allreduce += 1
        attrs = [("_input_mutable", True), ("fusion", 0), ("fusion_id", -1),
                 ("group", "hccl_world_group"), ("reduction", "sum")]
        if n > 1:
            attrs.append(("continuous_input", True))
        if k % 16 == 0:
            attrs += [("_input_memory_type", (P2P_DDR,) * n), ("_output_memory_type", (P2P_DDR,) * n)]
        ins = [("x", grads[0])] if n == 1 else _ports("x", grads)
        outs = [("y", g.t) for g in grads] if n == 1 else _ports("y", [g.t for g in grads])
        reduced = self.op(self.root, f"allreduce/HcomAllReduce_{gid}", "HcomAllReduce",
                          ins=ins, outs=outs, attrs=attrs)
        for key, g in zip(self.groups[gid], reduced):
            self._update(key, g)

    def _update(self, key: str, g: Val) -> None:
        var, momentum = self.params[key]
        if momentum:
            acc = self.variable(f"{key}/Momentum", var.t)
            name = f"Momentum/update_{key}/ApplyMomentum"
            self.op1(name, "ApplyMomentum",
                     ins=[("var", var), ("accum", acc), ("lr", self.lr), ("grad", g),
                          ("momentum", self.momentum)],
                     outs=[("var", var.t)], attrs=(("use_locking", False), ("use_nesterov", False)))
        else:
            step = self.binary(f"SGD/update_{key}/mul", "Mul", g, self.lr)
            new = self.binary(f"SGD/update_{key}/sub", "Sub", var, step)
            name = f"SGD/update_{key}/Assign"
            self.op1(name, "Assign", ins=[("ref", var), ("value", new)], outs=[("ref", var.t)],
                     attrs=(("use_locking", False), ("validate_shape", True)))
        self.updates.append(name)

    # -- forward layers (each records its backward on the tape) ---------------------------
    def _weights(self, scope: str, wt: T, bt: T, layout_op: Callable[[T], T]):
        """Variables, optional broadcast / read Identity, and their fp16 (fractal) forms."""
        w = self._param(f"{scope}/kernel", wt, True)
        b = self._param(f"{scope}/bias", bt, False)
        ctrl_w = ctrl_b = ()
        if self.rng.random() < 0.1:
            ctrl_w, ctrl_b = ([n] for n in self._broadcast(scope, [w, b]))
        w_in = self.unary(f"{scope}/kernel/read", "Identity", w) if self.rng.random() < 0.05 else w
        w16 = self.cast(f"{scope}/Cast", w_in, F16, ctrl_w)
        if wt.layout == "NCHW" or self.rng.random() < 0.5:
            w16 = self.op1(f"{scope}/TransData", "TransData", ins=[("src", w16)],
                           outs=[("dst", layout_op(w16.t))],
                           attrs=(("dst_format", layout_op(w16.t).layout), ("src_format", wt.layout)))
        return w16, self.cast(f"{scope}/Cast_1", b, F16, ctrl_b)

    def _next_scope(self, kind: str) -> str:
        self.layer += 1
        return f"layer_{self.layer}/{kind}"

    def _dense(self, a: Val, n_out: int, relu: bool = True, scope: str | None = None) -> Val:
        s = scope or self._next_scope("dense")
        k = a.t.shape[1]
        w16, b16 = self._weights(s, nd(F32, k, n_out), nd(F32, n_out), fractal_nz)
        y = self.op1(f"{s}/MatMul", "MatMul", ins=[("x1", a), ("x2", w16)],
                     outs=[("y", nd(F16, BATCH, n_out))],
                     attrs=(("transpose_x1", False), ("transpose_x2", False)))
        z = self.binary(f"{s}/BiasAdd", "Add", y, b16)
        out = self.unary(f"{s}/Relu", "Relu", z) if relu else z
        need_dx = a.src not in self.nodiff
        bias_slot = self.rng.random() < 0.25

        def backward(dy: Val) -> list:
            g = self.op1(f"gradients/{s}/Relu_grad/ReluGrad", "ReluGrad",
                         ins=[("gradients", dy), ("features", out)],
                         outs=[("backprops", dy.t)]) if relu else dy
            dw = self.op1(f"gradients/{s}/MatMul_grad/MatMul_1", "MatMul", ins=[("x1", a), ("x2", g)],
                          outs=[("y", nd(F16, k, n_out))],
                          attrs=(("transpose_x1", True), ("transpose_x2", False)))
            self._grad_ready(f"{s}/kernel", self.cast(f"gradients/{s}/Cast_grad", dw, F32))
            db = self.op1(f"gradients/{s}/BiasAdd_grad/BiasAddGrad", "BiasAddGrad", ins=[("x", g)],
                          outs=[("y", nd(F16, n_out))], attrs=(("data_format", "ND"),))
            self._grad_ready(f"{s}/bias", self.cast(f"gradients/{s}/Cast_1_grad", db, F32))
            if not need_dx:
                return []
            ins = [("x1", g), ("x2", w16)] + ([("bias", NO_INPUT)] if bias_slot else [])
            dx = self.op1(f"gradients/{s}/MatMul_grad/MatMul", "MatMul", ins=ins,
                          outs=[("y", a.t)], attrs=(("transpose_x1", False), ("transpose_x2", True)))
            return [(a.src, dx)]

        self._record(a, out, backward, relu + 4 + need_dx)
        return out

    def _conv(self, a: Val, c_out: int) -> Val:
        s = self._next_scope("conv2d")
        _, c_in, h, w = a.t.shape
        wt = nchw(F32, c_out, c_in, 3, 3)
        w16, b16 = self._weights(s, wt, nd(F32, c_out), fractal_z)
        out_t = nchw(F16, BATCH, c_out, h, w)
        y = self.op1(f"{s}/Conv2D", "Conv2D", ins=[("x", a), ("filter", w16), ("bias", b16)],
                     outs=[("y", out_t)], attrs=CONV_ATTRS)
        out = self.unary(f"{s}/Relu", "Relu", y)
        need_dx = a.src not in self.nodiff

        def backward(dy: Val) -> list:
            g = self.op1(f"gradients/{s}/Relu_grad/ReluGrad", "ReluGrad",
                         ins=[("gradients", dy), ("features", out)], outs=[("backprops", dy.t)])
            sizes = self.const(f"gradients/{s}/Conv2D_grad/filter_size", nd(I32, 4))
            dw = self.op1(f"gradients/{s}/Conv2D_grad/Conv2DBackpropFilter", "Conv2DBackpropFilter",
                          ins=[("x", a), ("filter_size", sizes), ("out_backprop", g)],
                          outs=[("y", wt)], attrs=CONV_ATTRS)
            self._grad_ready(f"{s}/kernel", dw)
            db = self.op1(f"gradients/{s}/BiasAdd_grad/BiasAddGrad", "BiasAddGrad", ins=[("x", g)],
                          outs=[("y", nd(F16, c_out))], attrs=(("data_format", "NCHW"),))
            self._grad_ready(f"{s}/bias", self.cast(f"gradients/{s}/Cast_1_grad", db, F32))
            if not need_dx:
                return []
            in_size = self.const(f"gradients/{s}/Conv2D_grad/input_size", nd(I32, 4))
            dx = self.op1(f"gradients/{s}/Conv2D_grad/Conv2DBackpropInput", "Conv2DBackpropInput",
                          ins=[("input_size", in_size), ("filter", w16), ("out_backprop", g)],
                          outs=[("y", a.t)], attrs=CONV_ATTRS)
            return [(a.src, dx)]

        self._record(a, out, backward, 5 + 2 * need_dx)
        return out

    def _record(self, a: Val, out: Val, backward, cost: int) -> None:
        self._consume(a)
        self.tape.append((out.src, backward))
        self.pending += cost

    def _residual(self, a2: Val, a0: Val) -> Val:
        s = f"layer_{self.layer}/residual"
        out = self.binary(f"{s}/add", "Add", a2, a0)
        self._consume(a2)
        self._consume(a0)
        self.tape.append((out.src, lambda dy: [(a2.src, dy), (a0.src, dy)]))
        return out

    def _scale(self, a: Val) -> Val:
        s = self._next_scope("scale")
        c = self.const(f"{s}/scale", nd(F16))
        out = self.binary(f"{s}/Mul", "Mul", a, c)
        self._record(a, out, lambda dy: [(a.src, self.binary(f"gradients/{s}/Mul_grad/Mul", "Mul",
                                                              dy, c))], 1)
        return out

    def _reshape(self, a: Val, t: T) -> Val:
        s = self._next_scope("reshape")
        out = self.op1(f"{s}/Reshape", "Reshape",
                       ins=[("x", a), ("shape", self.const(f"{s}/shape", nd(I32, len(t.shape))))],
                       outs=[("y", t)], attrs=(("axis", 0), ("num_axes", -1)))

        def backward(dy: Val) -> list:
            shape = self.const(f"gradients/{s}/Reshape_grad/Shape", nd(I32, len(a.t.shape)))
            return [(a.src, self.op1(f"gradients/{s}/Reshape_grad/Reshape", "Reshape",
                                     ins=[("x", dy), ("shape", shape)], outs=[("y", a.t)],
                                     attrs=(("axis", 0), ("num_axes", -1))))]

        self._record(a, out, backward, 2)
        return out

    # -- control flow (If / While with subgraphs) -----------------------------------------
    @staticmethod
    def _flow_cost(plan: tuple) -> int:
        kind, with_var = plan
        return 11 if kind == "if" else 17 + 2 * with_var

    def _pass_through(self, a: Val, out: Val) -> None:
        self._consume(a)
        self.tape.append((out.src, lambda dy: [(a.src, dy)]))

    def _if(self, k: int, a: Val) -> Val:
        s = f"cond_{k}"
        thr = self.const(f"{s}/threshold", nd(I32))
        cond = self.binary(f"{s}/Greater", "Greater", self.global_step, thr, nd(BOOL))
        then_g, else_g = self._new_graph(f"{s}_then_branch"), self._new_graph(f"{s}_else_branch")
        out = self.op1(f"{s}/If", "If", ins=[("cond", cond), ("input0", a)], outs=[("output0", a.t)],
                       subgraphs=[then_g.name, else_g.name])
        x = self.data(then_g, f"{then_g.name}/arg0", a.t, ("_parent_node_index", 1))
        y = self.binary(f"{then_g.name}/mul", "Mul", x, self.const(f"{then_g.name}/scale", nd(F16),
                                                                     then_g), g=then_g)
        self.net_output(then_g, f"{then_g.name}/NetOutput",
                        [self.unary(f"{then_g.name}/Relu", "Relu", y, then_g)], parent_index=True)
        x = self.data(else_g, f"{else_g.name}/arg0", a.t, ("_parent_node_index", 1))
        self.net_output(else_g, f"{else_g.name}/NetOutput",
                        [self.unary(f"{else_g.name}/Identity", "Identity", x, else_g)],
                        parent_index=True)
        for g in (then_g, else_g):
            g.input.append(f"{g.name}/arg0:0")
        self._pass_through(a, out)
        return out

    def _while(self, k: int, a: Val, with_var: bool) -> Val:
        s = f"while_{k}"
        loop = [self.const(f"{s}/i0", nd(I32)), a, self.const(f"{s}/scale", nd(F16))]
        if with_var:
            loop.append(self.weights[-1] if self.weights else self.global_step)
        cond_g, body_g = self._new_graph(f"{s}_cond"), self._new_graph(f"{s}_body")
        outs = self.op(self.root, f"{s}/While", "While", ins=_ports("input", loop),
                       outs=_ports("output", [v.t for v in loop]), attrs=(("parallel_iterations", 10),),
                       subgraphs=[cond_g.name, body_g.name])
        args = self._loop_args(cond_g, loop)
        limit = self.const(f"{cond_g.name}/limit", nd(I32), cond_g)
        less = self.binary(f"{cond_g.name}/Less", "Less", args[0], limit, nd(BOOL), cond_g)
        self.net_output(cond_g, f"{cond_g.name}/NetOutput", [less])
        args = self._loop_args(body_g, loop)
        one = self.const(f"{body_g.name}/one", nd(I32), body_g)
        i_next = self.binary(f"{body_g.name}/add", "Add", args[0], one, g=body_g)
        x_next = self.unary(f"{body_g.name}/Relu", "Relu",
                            self.binary(f"{body_g.name}/mul", "Mul", args[1], args[2], g=body_g),
                            body_g)
        self.net_output(body_g, f"{body_g.name}/NetOutput", [i_next, x_next] + args[2:],
                        parent_index=True)
        self._pass_through(a, outs[1])
        return outs[1]

    def _loop_args(self, g, loop: list[Val]) -> list[Val]:
        args = [self.data(g, f"{g.name}/arg{i}", v.t, ("_parent_node_index", i))
                for i, v in enumerate(loop)]
        g.input.extend(v.src for v in args)
        return args

    def _control_flow(self, force: bool = False) -> None:
        """Emit If / While blocks whose turn has come (all of them when `force`)."""
        while self.flow_done < len(self.flow_plan):
            due = (self.flow_done + 0.5) * self.n / len(self.flow_plan)
            if not force and self.count + self.pending < due:
                return
            kind, with_var = self.flow_plan[self.flow_done]
            self.flow_done += 1
            k = self.flow_done
            self.act = self._if(k, self.act) if kind == "if" else self._while(k, self.act, with_var)

    # -- whole step -----------------------------------------------------------------------
    def _prologue(self) -> None:
        self.act = self.data(self.root, "input_x", nchw(F16, BATCH, 3, 16, 16), ("index", 0))
        self.labels = self.data(self.root, "labels", nd(F16, BATCH, NUM_CLASSES), ("index", 1))
        self.root.input.extend(["input_x:0", "labels:0"])
        self.nodiff.add(self.act.src)
        self.lr = self.const("learning_rate", nd(F32))
        self.momentum = self.const("momentum", nd(F32))
        self.global_step = self.variable("global_step", nd(I32))

    def _block(self, kind: str) -> bool:
        """Two layers, with a residual Add when the second restores the block's width."""
        if not self._room(2 * LAYER_MAX + 2):
            return False
        a0 = self.act
        width = a0.t.shape[1]
        layer, choices = (self._conv, CONV_CHANNELS) if kind == "conv" else (self._dense, DENSE_DIMS)
        residual = a0.src not in self.nodiff and self.rng.random() < 0.6
        a1 = layer(a0, self.rng.choice(choices))
        a2 = layer(a1, width if residual else self.rng.choice(choices))
        self.act = self._residual(a2, a0) if residual else a2
        if self.rng.random() < 0.15 and self._room(3):
            self.act = self._scale(self.act)
        return True

    def _forward(self) -> None:
        kind = "conv"
        while True:
            for _ in range(self.rng.randint(2, 5)):
                self._control_flow()
                if not self._block(kind):
                    self._last_layers(kind)
                    return
            new = self.rng.choice(("conv", "dense"))
            if new != kind:
                if not self._room(4):
                    return
                self.act = self._to_layout(new)
            kind = new

    def _last_layers(self, kind: str) -> None:
        """Single layers while a whole block no longer fits, to keep the filler small."""
        layer, choices = (self._conv, CONV_CHANNELS) if kind == "conv" else (self._dense, DENSE_DIMS)
        while self._room(LAYER_MAX):
            self.act = layer(self.act, self.rng.choice(choices))

    def _to_layout(self, kind: str) -> Val:
        shape = self.act.t.shape
        if kind == "dense":
            return self._reshape(self.act, nd(F16, BATCH, math.prod(shape[1:])))
        return self._reshape(self.act, nchw(F16, BATCH, shape[1] // 64, 8, 8))

    def _loss(self) -> Val:
        if len(self.act.t.shape) == 4:
            self.act = self._to_layout("dense")
        logits = self._dense(self.act, NUM_CLASSES, relu=False, scope="logits")
        ce = self.op(self.root, "loss/SoftmaxCrossEntropyWithLogits", "SoftmaxCrossEntropyWithLogits",
                     ins=[("features", logits), ("labels", self.labels)],
                     outs=[("loss", nd(F16, BATCH)), ("backprop", logits.t)])
        self.contrib[logits.src] = [ce[1]]
        return self.op1("loss/Mean", "ReduceMeanD", ins=[("x", ce[0])], outs=[("y", nd(F16))],
                        attrs=(("axes", (0,)), ("keep_dims", False)))

    def _backward(self) -> None:
        for out_src, backward in reversed(self.tape):
            grads = self.contrib.pop(out_src)
            dy = grads[0]
            if len(grads) > 1:
                name = out_src.rsplit(":", 1)[0]
                dy = self.op1(f"gradients/{name}_grad/AddN", "AddN", ins=_ports("x", grads),
                              outs=[("y", dy.t)], attrs=(("N", len(grads)),))
            for src, g in backward(dy):
                self.contrib.setdefault(src, []).append(g)

    def _finish(self, loss: Val) -> None:
        groups = []
        for i in range(0, len(self.updates), UPDATES_PER_NOOP):
            groups.append(f"update_group_{i // UPDATES_PER_NOOP}")
            self.op(self.root, groups[-1], "NoOp", ctrl=self.updates[i:i + UPDATES_PER_NOOP])
        self.op(self.root, "train_op", "NoOp", ctrl=groups)
        one = self.const("global_step/add_value", nd(I32))
        step = self.op1("global_step/AssignAdd", "AssignAdd",
                        ins=[("ref", self.global_step), ("value", one)],
                        outs=[("ref", self.global_step.t)], ctrl=["train_op"])
        outputs = [loss, step]
        filler = self.n - self.count - 1
        if filler < 0:
            raise RuntimeError(f"node budget overrun by {-filler} (generator bug)")
        if filler:
            outputs.append(self._weight_decay(filler))
        self.net_output(self.root, "NetOutput", outputs, ctrl=["train_op"])

    def _weight_decay(self, n_nodes: int) -> Val:
        """Exactly `n_nodes` nodes: L2Loss of weights summed by one AddN (TF weight decay)."""
        terms = [self.op1(f"weight_decay/L2Loss_{i}", "L2Loss",
                          ins=[("x", self.weights[i % len(self.weights)])], outs=[("y", nd(F32))])
                 for i in range(max(1, n_nodes - 1))]
        if n_nodes == 1:
            return terms[0]
        return self.op1("weight_decay/AddN", "AddN", ins=_ports("x", terms), outs=[("y", nd(F32))],
                        attrs=(("N", len(terms)),))

    def build(self) -> pb.ModelDef:
        self._prologue()
        self._forward()
        self._control_flow(force=True)
        loss = self._loss()
        self._backward()
        self._finish(loss)
        assert self.count == self.n, (self.count, self.n)
        return self.model


def make_model(n_nodes: int, seed: int = 0, *, dump_attrs: bool = False, hub: float = 0.0) -> pb.ModelDef:
    """A training-step ModelDef with exactly `n_nodes` OpDefs over all its GraphDefs.

    `dump_attrs`: every op also carries what a current GE dump has (Note [dump attrs]):
    `_src_out_peer_index_for_ge_txt_load`, `_session_graph_id`, `_is_connected_to_netoutput`,
    `_ir_attr_names`, and every tensor descriptor `format_for_int`, `origin_format_for_int`,
    `origin_shape_initialized`. `hub` > 0: the root graph starts with a NoOp `init_barrier`
    with a control edge to that share of all nodes (Note [hub]).
    Deterministic: the same arguments always give the same message.
    """
    if n_nodes < MIN_NODES + (hub > 0):
        raise ValueError(f"n_nodes must be at least {MIN_NODES + (hub > 0)}, got {n_nodes}")
    if not 0 <= hub < 1:
        raise ValueError(f"hub must be a share of the nodes in [0, 1), got {hub}")
    gen = _Gen(n_nodes - (hub > 0), seed, dump_attrs)
    model = gen.build()
    if hub > 0:
        _add_hub(gen, model, hub, n_nodes)
    if dump_attrs:
        _add_peer_index(model)
    return model


def _add_hub(gen: "_Gen", model: pb.ModelDef, share: float, n_nodes: int) -> None:
    """Note [hub]: one node controlling a large share of the graph, the shape AtomicAddrClean
    leaves (one MemSet with control edges to every atomic node). The NoOp goes first in the
    root graph; its successors are root ops that have a data input, spread evenly (the k-th
    one of them when floor(k·share) grows), as many as `share` of all nodes allows."""
    root = model.graph[0]
    want = int(share * n_nodes)
    cands = [op for op in root.op if any(":" in e and not e.endswith(":-1") for e in op.input)]
    if want > len(cands):
        raise ValueError(f"hub {share}: the root graph has only {len(cands)} ops with a data input")
    noop = gen.templates.get(("NoOp", (), (), (), None))
    if noop is None:
        noop = _build_template(("NoOp", (), (), (), None), gen.dump_attrs)
    ops = list(root.op)
    del root.op[:]
    first = root.op.add()
    first.CopyFrom(noop)
    first.name = "init_barrier"
    step = want / len(cands)
    for k, op in enumerate(cands):
        if int((k + 1) * step) > int(k * step):
            op.input.append("init_barrier:-1")
    root.op.extend(ops)
    for i, op in enumerate(root.op):
        op.id = i


def _add_peer_index(model: pb.ModelDef) -> None:
    """Note [dump attrs]: GE's dump records each input's position in its source's peer list
    (data) or control-successor list; a graph built in file order has each source's
    consumers in that order, so the position is the count of earlier entries naming it."""
    for g in model.graph:
        seen: dict[str, int] = {}
        for op in g.op:
            vals = []
            for e in op.input:
                if ":" not in e:
                    vals.append(-1)
                    continue
                k = seen.get(e, 0)
                seen[e] = k + 1
                vals.append(k)
            set_attr(op.attr, "_src_out_peer_index_for_ge_txt_load", vals, "list_i")


def serialize(model: pb.ModelDef) -> bytes:
    """Binary form; deterministic (map entries sorted by key)."""
    return model.SerializeToString(deterministic=True)


def write_model(model: pb.ModelDef, out: str | os.PathLike) -> None:
    """Write `model` to `out`: binary for *.pb, GE text for *.txt / *.pbtxt.

    Text goes through engine.dumpio.model_to_text (protoc's C++ printer, byte-identical to
    GE's TextFormat::Print; google.protobuf.text_format when protoc is unavailable).
    """
    out = Path(out)
    if out.suffix not in (".pb", ".txt", ".pbtxt"):
        raise ValueError(f"{out}: output must end in .pb, .txt or .pbtxt")
    data = serialize(model)
    write_atomic(out, data if out.suffix == ".pb" else model_to_text(data))


def cached_graph(cache: Path, n: int, fmt: str, *, dump_attrs: bool = False, hub: float = 0.0) -> Path:
    """The N-node graph (seed 0) as `cache/train_N[_dump][_hubP].fmt`, generated on first use."""
    tag = ("_dump" if dump_attrs else "") + (f"_hub{round(hub * 100)}" if hub else "")
    path = cache / f"train_{n}{tag}.{fmt}"
    if not path.exists():
        write_model(make_model(n, dump_attrs=dump_attrs, hub=hub), path)
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("n_nodes", type=int, help=f"number of nodes (>= {MIN_NODES})")
    ap.add_argument("out", help="output file: *.pb binary, *.txt / *.pbtxt text")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dump-attrs", action="store_true",
                    help="add the attributes a current GE dump carries (peer indices, ...)")
    ap.add_argument("--hub", type=float, default=0.0, metavar="SHARE",
                    help="a NoOp with control edges to this share of the nodes (e.g. 0.4)")
    args = ap.parse_args(argv)
    if Path(args.out).suffix not in (".pb", ".txt", ".pbtxt"):
        ap.error("OUT must end in .pb, .txt or .pbtxt")
    if args.n_nodes < MIN_NODES + (args.hub > 0):
        ap.error(f"N must be at least {MIN_NODES + (args.hub > 0)}")
    if not 0 <= args.hub < 1:
        ap.error("--hub must be in [0, 1)")
    write_model(make_model(args.n_nodes, args.seed, dump_attrs=args.dump_attrs, hub=args.hub), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
