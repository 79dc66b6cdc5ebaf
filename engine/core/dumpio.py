"""Reading and writing GE dumps (`ge.proto.ModelDef`, text or binary).

Text dumps go through protoc's C++ text-format codec (shipped in grpcio-tools):
it is ~10x faster than Python's `text_format` and prints floats exactly as GE's
C++ does, so an unchanged dump re-saves byte for byte. Python's `text_format`
is the fallback when protoc cannot be started.

Loading follows ModelSerializeImp (ge-formats.md §2): data inputs fill in-anchor
slots in order (an entry without ':' occupies a slot but makes no edge), `:-1`
entries are control edges, peer lists follow `_src_out_peer_index_for_ge_txt_load`
when present, subgraphs are linked by `OpDef.subgraph_name` from the root.
"""
from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterable, Iterator

from google.protobuf import text_format
from google.protobuf.message import DecodeError

from engine.core.attrs import attrs_changed
from engine.core.lean import (LEAN_CANON, LEAN_STRIP_PEER, PEER_INDEX_ATTR, VERIFY_CACHES, LeanGraphDef, _DUPLICATE,
                              DESC_OBJS, ENTRY_KEYS, ENTRY_OBJS, CompactOp, LeanOpDef, _KEY_ORDERS, check_shared,
                              _SHARED_MAX, descs_size, encode_entry, entry_of, framed_size, interned, key_order, lean_order,
                              nested_canonical, tail_of, TAILS as _TAILS)
from engine.core.gcpause import no_gc
from engine.core.errors import InputError, Loc, Problem, display_path
from engine.core.wire import encode_varint as _varint, parse_binary as wire_parse, read_varint
from engine.core.graph import Graph, Model, Node, input_entries
from engine.proto import ge_ir_pb2 as pb

_PROTO_ROOT = Path(__file__).resolve().parent.parent.parent     # holds engine/proto/
_PROTO_FILE = "engine/proto/ge_ir.proto"
_PROTOC_ERR = re.compile(r"^input:(\d+):(\d+): (.*)$", re.M)
BINARY_SUFFIXES = {".pb", ".bin", ".om_model"}
TEXT_SUFFIXES = {".txt", ".pbtxt", ".prototxt"}


# ---- raw bytes <-> ModelDef -------------------------------------------------
def _protoc(mode: str, data: bytes) -> subprocess.CompletedProcess:
    args = ["protoc", f"-I{_PROTO_ROOT}", f"--{mode}=ge.proto.ModelDef", _PROTO_FILE]
    # Note [bare protoc]: protoc is grpc_tools' compiled extension; an interpreter that skips
    # site (-S -E) and imports just that runs it in a third of `python -m grpc_tools.protoc`'s
    # start-up (two calls a run: ~0.1 s of a small graph's second)
    code = (f"import sys; sys.path.insert(0, {_grpc_tools_parent()!r}); from grpc_tools import _protoc_compiler; "
            f"sys.exit(_protoc_compiler.run_main([a.encode() for a in {args!r}]))")
    return subprocess.run([sys.executable, "-S", "-E", "-c", code], input=data, capture_output=True, cwd=_PROTO_ROOT)


@functools.lru_cache(maxsize=1)
def _grpc_tools_parent() -> str:
    import importlib.util
    spec = importlib.util.find_spec("grpc_tools")
    return str(Path(next(iter(spec.submodule_search_locations))).parent)


def _protoc_available() -> bool:
    try:
        import grpc_tools  # noqa: F401
    except ImportError:
        return False
    return os.environ.get("MEMCONFLICT_NO_PROTOC", "") != "1"


def parse_text(text: bytes, file: str, encoded: subprocess.CompletedProcess | None = None) -> pb.ModelDef:
    """Text-format ModelDef → message; errors carry file:line:col. `encoded`: protoc's
    encoding of `text` when the caller ran it already (model_of_dump)."""
    if _protoc_available():
        res = encoded if encoded is not None else _protoc("encode", text)
        if res.returncode == 0:
            model = pb.ModelDef()
            try:
                model.ParseFromString(res.stdout)
                return model
            except DecodeError:
                pass            # protoc takes a string's \ooo bytes as given; Python's parser locates them
        err = res.stderr.decode("utf-8", "replace")
        m = _PROTOC_ERR.search(err)
        if m:
            raise InputError(Problem(Loc(file, int(m.group(1)), int(m.group(2))),
                                     f"malformed GE dump: {m.group(3).strip()}",
                                     "the file must be a text-format ge.proto.ModelDef (a DUMP_GE_GRAPH ge_proto_*.txt)"))
        if b"\0" in text[:4096]:
            raise InputError(Problem(Loc(file), "not a text-format dump (binary content)",
                                     "name binary ModelDef files *.pb"))
    model = pb.ModelDef()
    try:
        text_format.Parse(text.decode("utf-8"), model)
    except UnicodeDecodeError as exc:
        at = Loc(file, text.count(b"\n", 0, exc.start) + 1, exc.start - text.rfind(b"\n", 0, exc.start))
        raise InputError(Problem(at, "not a text-format dump (not UTF-8)", "name binary ModelDef files *.pb")) from None
    except text_format.ParseError as exc:
        line, col = exc.GetLine() or 0, exc.GetColumn() or 0
        msg = str(exc).split(" : ", 1)[-1]
        raise InputError(Problem(Loc(file, line, col), f"malformed GE dump: {msg}",
                                 "the file must be a text-format ge.proto.ModelDef")) from None
    return model


def parse_binary(data: bytes, file: str) -> pb.ModelDef:
    return wire_parse(pb.ModelDef(), data, file, "malformed binary GE dump",
                      "the file must be a serialized ge.proto.ModelDef; text dumps end in .txt/.pbtxt")


def model_to_text(data: bytes) -> bytes:
    if _protoc_available():
        res = _protoc("decode", data)
        if res.returncode == 0:
            return res.stdout
    model = pb.ModelDef()
    model.ParseFromString(data)
    return text_format.MessageToString(model).encode()


def is_binary_path(path: str | Path) -> bool:
    return Path(path).suffix.lower() in BINARY_SUFFIXES


def read_modeldef(path: str | Path) -> pb.ModelDef:
    file = display_path(path)
    data = _read_bytes(path, file)
    return parse_binary(data, file) if _is_binary(path, data) else parse_text(data, file)


def _read_bytes(path: str | Path, file: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise InputError(Problem(Loc(file), f"cannot read GE dump: {exc.strerror}", "check the path")) from None


# ---- ModelDef -> Model --------------------------------------------------------
def load_model(path: str | Path) -> Model:
    """Read a GE dump into a Model (raises InputError on unusable input): a binary dump,
    or a text one protoc encodes, into lean nodes (Note [lean ops]); anything the lean
    reader does not take (a malformed dump, a text dump without protoc) the full way,
    which reports what is wrong where it is."""
    file = display_path(path)
    data = _read_bytes(path, file)
    return model_of_dump(data, file, _is_binary(path, data))


def model_of_dump(data: bytes, file: str, binary: bool) -> Model:
    """The Model of a GE dump's bytes (binary, or text when not `binary`): lean nodes when
    the lean reader takes it, else the full way, which reports what is wrong where it is
    (the one reader of dumps: load_model, and the CLI's through engine/core/importers)."""
    encoded, res = (data, None) if binary else _encode_text(data)
    if encoded is not None:
        model = build_lean_model(encoded, file)
        if model is not None:
            return model
    # the full way says what is wrong, from protoc's answer when it was asked (one run a file)
    return build_model(parse_binary(data, file) if binary else parse_text(data, file, res), file)


def _is_binary(path: str | Path, data: bytes) -> bool:
    """read_modeldef's choice of reader: by suffix, else by the first bytes."""
    suffix = Path(path).suffix.lower()
    if suffix in BINARY_SUFFIXES:
        return True
    if suffix in TEXT_SUFFIXES:
        return False
    return not data[:512].lstrip()[:1].isalpha()


def _encode_text(text: bytes) -> tuple[bytes | None, subprocess.CompletedProcess | None]:
    """(a text dump as protoc encodes it, or None when protoc refused it or is not there;
    protoc's run, or None without protoc)."""
    if not _protoc_available():
        return None, None
    res = _protoc("encode", text)
    return (res.stdout if res.returncode == 0 else None), res


def build_model(proto: pb.ModelDef, file: str = "<memory>") -> Model:
    with no_gc():       # Note [gc]: building allocates ~5 objects per node and frees none
        return _build_model(proto, file)


def _build_model(proto: pb.ModelDef, file: str) -> Model:
    problems: list[Problem] = []
    model = Model(proto, file)
    if len(proto.graph) == 0:
        raise InputError(Problem(Loc(file), "the dump holds no graph", "graph[0] must be the root graph"))
    read: list[tuple[list, list, bool]] = []    # per graph in graph_order: what _read_nodes returns
    for gdef in proto.graph:
        name = gdef.name
        if name in model.graphs:
            problems.append(Problem(Loc(file), f"two graphs are named '{name}'",
                                    "graph names must be unique (subgraphs are linked by name)"))
            continue
        g = Graph(gdef, model)
        read.append(_read_nodes(g, gdef.op, model, problems))
        model.add_graph(g)
    if problems:
        raise InputError(problems)
    return _link_model(model, read, problems)


def build_lean_model(data: bytes, file: str) -> Model | None:
    """The Model of a binary ModelDef with lean nodes (Note [lean ops]), or None when the
    bytes are not a well-formed dump the lean reader takes (the caller then reads them the
    full way, which says what is wrong)."""
    with no_gc():       # Note [gc]
        try:
            return _build_lean(data, file)
        except _NotLean:
            return None


class _NotLean(Exception):
    """The lean reader leaves this dump to the full one."""


def _build_lean(data: bytes, file: str) -> Model:
    top = _fields(data, 0, len(data))
    head = [data[s:e] for num, _, s, _, e in top if num != _MODEL_GRAPH]
    spans = [(b, e) for num, wt, _, b, e in top if num == _MODEL_GRAPH]
    if not spans or any(wt != 2 for num, wt, _, _, _ in top if num == _MODEL_GRAPH):
        raise _NotLean
    model = Model(_parse_part(pb.ModelDef, head), file)
    problems: list[Problem] = []
    read: list[tuple[list, list, bool]] = []
    for b, e in spans:
        fields = _fields(data, b, e)
        ops = [(s, body, end) for num, wt, s, body, end in fields if num == _GRAPH_OP]
        if any(wt != 2 for num, wt, _, _, _ in fields if num == _GRAPH_OP):
            raise _NotLean
        gdef = _parse_part(pb.GraphDef, [data[s:end] for num, _, s, _, end in fields if num != _GRAPH_OP])
        if gdef.name in model.graphs:
            raise _NotLean          # two graphs of one name: the full reader says so
        g = Graph(gdef, model)
        read.append(_read_lean_nodes(g, _op_runs(data, ops), model, problems, data))
        model.add_graph(g)
    if problems:
        raise InputError(problems)
    return _link_model(model, read, problems)


_ENTRY_KEY = ENTRY_KEYS.get
_ENTRY_OBJ = ENTRY_OBJS.get
_DESC_OBJ = DESC_OBJS.get
_DESC_TUPLES: dict[tuple, tuple] = {}      # interned descriptor tuples of compact ops
_KEY_ORDER = _KEY_ORDERS.get
# Note [attribute runs]: a graph's ops have a few distinct attribute lists (9,584 over the 100k
# step's 100k ops: ops of one kind differ in their name, inputs and id, which are not
# attributes). An op's verdicts on its attribute entries (their key order, that each is
# canonical, the peer index's values, the shared bytes objects and their framed length) are
# the same for every op with the same entries' bytes, so they are kept by the tuple of those
# bytes, which an op makes from its own entries and looks up once (the per-entry lookups it
# replaces made ~30 an op). Only canonical lists in key order are kept; the key is made of the
# shared objects, so a kept list costs a tuple, not a copy of its bytes. An op's input and
# output descriptor lists are kept alike (_DESC_RUNS: the shared tuple a compact op holds and
# its framed length), a list of canonical descriptors only. Bounded as the tables they read
# are; verify mode checks every hit against the lookups it saved.
_ATTR_RUNS: dict[tuple, tuple] = {}
_ATTR_RUN = _ATTR_RUNS.get


def _keep_run(raws: list, korder: tuple, vals: tuple | None) -> None:
    """Keep the verdicts on a canonical attribute list in key order (Note [attribute runs])."""
    shared = tuple(map(_ENTRY_OBJ, raws))
    if None in shared:
        return
    if len(_ATTR_RUNS) >= _SHARED_MAX:
        _ATTR_RUNS.clear()
    _ATTR_RUNS[shared] = (korder, vals, shared, framed_size(shared))


_DESC_RUNS: dict[tuple, tuple] = {}     # shared descriptor tuple → (it, its framed length)
_DESC_RUN = _DESC_RUNS.get
_NO_DESCS = ((), 0)


def _keep_descs(raws: list) -> tuple | None:
    """(the shared tuple, its framed length) of a canonical descriptor list, kept by its
    bytes (Note [attribute runs]); None when a descriptor's shared object is gone (a table
    reset)."""
    shared = tuple(map(_DESC_OBJ, raws))
    if None in shared:
        return None
    shared = interned(_DESC_TUPLES, shared)
    run = _DESC_RUN(shared)
    if run is None:
        if len(_DESC_RUNS) >= _SHARED_MAX:
            _DESC_RUNS.clear()
        run = _DESC_RUNS[shared] = (shared, descs_size(shared))
    return run


def _check_descs(raws: list, run: tuple) -> None:
    """Verify mode: a kept descriptor list is the op's, each canonical, its length right."""
    if not (list(run[0]) == raws and nested_canonical(raws, False) and run[1] == descs_size(raws)):
        raise AssertionError("a descriptor list kept at load differs from the op's descriptors read one by one")


def _check_run(raws: list, run: tuple) -> None:
    """Verify mode: a kept attribute run is what the entries give when read one by one."""
    ents = [entry_of(raw) for raw in raws]
    ko = tuple(e[0] for e in ents)
    korder, in_order = key_order(ko)
    vals = _peer_values(_peer_entry(raws, ko)) if PEER_INDEX_ATTR in ko else None
    if not (all(e[2] for e in ents) and in_order and korder == run[0] and vals == run[1]
            and list(run[2]) == raws and run[3] == framed_size(raws)):
        raise AssertionError("an attribute run kept at load differs from its entries read one by one")


_MODEL_GRAPH = 7    # ModelDef.graph
_GRAPH_OP = 6       # GraphDef.op
_OP_RUN = 4096      # Note [op runs]: ops parsed at a time


def _parse_part(cls, parts: list[bytes]):
    try:
        return cls.FromString(b"".join(parts))
    except DecodeError:
        raise _NotLean from None


def _fields(data: bytes, pos: int, end: int) -> list[tuple[int, int, int, int, int]]:
    """(field number, wire type, field start, payload start, field end) of each field of
    the message in data[pos:end] (a varint's or fixed value's payload is its field; a
    group ends the walk: the full reader takes those); _NotLean where a field breaks."""
    out = []
    put = out.append
    # the key's and the length's varints are nearly always one byte: read in place, and
    # through read_varint otherwise (the two look alike on purpose)
    while pos < end:
        start = pos
        key = data[pos]
        if key < 0x80:
            pos += 1
        else:
            key, pos = read_varint(data, pos, end)
            if key is None:
                raise _NotLean
        wt = key & 7
        if wt == 2:
            n = data[pos] if pos < end else 0x80
            if n < 0x80:
                pos += 1
            else:
                n, pos = read_varint(data, pos, end)
                if n is None:
                    raise _NotLean
            body = pos
            pos += n
        elif wt == 0:
            _, pos = read_varint(data, pos, end)
            if _ is None:
                raise _NotLean
            body = start
        elif wt == 1 or wt == 5:
            pos += 8 if wt == 1 else 4
            body = start
        else:
            raise _NotLean
        if pos > end or key >> 3 == 0:
            raise _NotLean
        put((key >> 3, wt, start, body, pos))
    return out


def _op_runs(data: bytes, ops: list[tuple[int, int, int]]) -> Iterator[tuple]:
    """(lean OpDef, (payload start, end)) of each op of a graph, in order.

    Note [op runs]: the ops are parsed _OP_RUN at a time, as lean GraphDefs of their run
    of bytes (consecutive op fields): one call into upb instead of one an op. The ops
    are read from the run's message and then let go (a node keeps a compact op, Note
    [compact ops] in engine/core/lean.py, or a lean op of its own), so the run's memory
    is freed once it has been read."""
    mv = memoryview(data)
    i, count = 0, len(ops)
    while i < count:
        j = i + 1
        while j < count and j - i < _OP_RUN and ops[j][0] == ops[j - 1][2]:
            j += 1
        try:
            lo = LeanGraphDef.FromString(mv[ops[i][0]:ops[j - 1][2]]).op
        except DecodeError:
            raise _NotLean from None
        if len(lo) != j - i:
            raise _NotLean
        for k in range(j - i):
            yield lo[k], ops[i + k][1:]
        i = j


def _link_model(model: Model, read: list, problems: list[Problem]) -> Model:
    for g, (inputs, _, peer_attr) in zip(model.graph_order, read):
        _build_edges(g, inputs, not peer_attr, model, problems)
    model.root = model.graph_order[0]
    _link_subgraphs(model, {g: subs for g, (_, subs, _) in zip(model.graph_order, read)}, problems)
    if problems:
        raise InputError(problems)
    return model


def _read_nodes(g: Graph, ops: Iterable[pb.OpDef], model: Model, problems: list[Problem]) -> tuple[list, list, bool]:
    """Make the graph's nodes and read, in the same visit of each op, what the edges and the
    subgraph links need: ([(node, input entries, peer-index values or None)] of the nodes
    with inputs, [(node, subgraph names)] of those with subgraph names), in node order, and
    whether an op of the graph has the peer-index attribute.

    Note [one visit per op]: each read of an op's field through upb costs 0.3-1 us (a
    wrapper or a new str, and often a cache miss in the arena), about what the Python
    work on it costs. Each field is read once, here (the name too: Node takes it), and
    the later steps walk these lists instead of every node and its op again (the edges,
    the subgraph links; and no walk to reset `dirty`).
    The lists (~25 MB at 100k nodes) are gone when the model is built, well before the
    run's peak. The peer-index attribute is removed here (the passes never see it; a
    save writes it anew), as `_build_edges` did before."""
    by_name = g.by_name
    nodes: list[Node] = []
    inputs: list[tuple[Node, list, list | None]] = []
    subs: list[tuple[Node, list]] = []
    peer_attr = False
    for op in ops:
        name = op.name
        if name in by_name:
            problems.append(_two_nodes_named(g, name, model))
            continue
        n = by_name[name] = Node(op, g, name)
        nodes.append(n)
        attrs = op.attr
        if PEER_INDEX_ATTR in attrs:
            vals = attrs[PEER_INDEX_ATTR].list.i[:]
            del attrs[PEER_INDEX_ATTR]
            attrs_changed(n)
            peer_attr = True
        else:
            vals = None
        entries = op.input[:]
        if entries:
            inputs.append((n, entries, vals))
        elif not n.ins:
            n.dirty = False             # Note [inputs as written]: none, and none written
        names = op.subgraph_name
        if names:
            subs.append((n, names[:]))
    g.link_loaded(nodes)
    if peer_attr:
        model.emit_peer_index = True
    return inputs, subs, peer_attr


def _two_nodes_named(g: Graph, name: str, model: Model) -> Problem:
    return Problem(Loc(model.source), f"graph '{g.name}' has two nodes named '{name}'",
                   "node names must be unique within a graph")


def _read_lean_nodes(g: Graph, ops: Iterable[tuple], model: Model, problems: list[Problem],
                     data: bytes) -> tuple[list, list, bool]:
    """`_read_nodes` of lean ops (Note [lean ops]): (lean OpDef, its payload's span in
    `data`) each, from `_op_runs`. A node also gets its key order, its canonical flag
    (Note [canonical at load]), a compact op where it can (Note [compact ops]) and its
    peer index, which stays in the op (LEAN_STRIP_PEER) and out of the node's view."""
    by_name = g.by_name
    nodes: list[Node] = []
    inputs: list[tuple[Node, list, list | None]] = []
    subs: list[tuple[Node, list]] = []
    peer_attr = False
    mv = memoryview(data)
    # the loop's head is _read_nodes' on purpose: a shared helper would be one more call an
    # op on the load's hottest loop
    for lean, span in ops:              # (lean OpDef, where its bytes are)
        name = lean.name
        if name in by_name:
            problems.append(_two_nodes_named(g, name, model))
            continue
        # Note [lean ops]: the node keeps its op encoded (`_op` stays None until decoded)
        n = by_name[name] = Node(lean, g, name)
        nodes.append(n)
        n._op = None
        vals = None
        canon = True
        raws = lean.attr[:]             # the attribute entries' bytes
        ind, outd = lean.input_desc[:], lean.output_desc[:]     # ... and the descriptors', read once
        run = None
        try:
            if raws:
                # Note [attribute runs]: an op whose entries are another's, bytes for bytes, has
                # its verdicts (kept only for canonical entries in key order)
                run = _ATTR_RUN(tuple(raws))
            if run is not None:
                n.korder, vals, shared, asize = run
                if vals is not None:
                    peer_attr = True
                if VERIFY_CACHES:
                    _check_run(raws, run)
            elif raws:
                # Note [canonical at load]: every entry is checked (and so validated) once
                # per distinct bytes; most are known canonical ones, read in one C loop
                ko = tuple(map(_ENTRY_KEY, raws))
                if None in ko:
                    ents = [entry_of(raw) for raw in raws]
                    ko = tuple([e[0] for e in ents])
                    if not all([e[2] for e in ents]):
                        canon = False
                # korder is _DUPLICATE when a key repeats: a map keeps the last, the node is
                # decoded for its reads
                n.korder, in_order = _KEY_ORDER(ko) or key_order(ko)
                if not in_order:
                    canon = False
                if PEER_INDEX_ATTR in ko:
                    # the passes never see the peer index (a save writes it anew)
                    vals = _peer_values(_peer_entry(raws, ko))
                    peer_attr = True
                if canon:
                    _keep_run(raws, n.korder, vals)
            # Note [attribute runs]: descriptor lists alike
            run_in = _DESC_RUN(tuple(ind)) if ind else _NO_DESCS
            if run_in is None and not nested_canonical(ind, False):
                canon = False
            run_out = _DESC_RUN(tuple(outd)) if outd else _NO_DESCS
            if run_out is None and not nested_canonical(outd, False):
                canon = False
        except DecodeError:
            raise _NotLean from None
        entries = lean.input[:]
        names = lean.subgraph_name[:]
        size = span[1] - span[0]
        if canon:
            # Note [compact ops]: the shared bytes objects (those tables hold every entry and
            # descriptor of a canonical op, unless one was reset meanwhile)
            if run is not None:
                attr = list(shared)
            else:
                attr = list(map(_ENTRY_OBJ, raws))
                asize = None
            if run_in is None:
                run_in = _keep_descs(ind)
            if run_out is None:
                run_out = _keep_descs(outd)
            if None in attr or run_in is None or run_out is None:
                attr, ins, outs = raws, tuple(ind), tuple(outd)
                dsize = None
            else:
                (ins, din), (outs, dout) = run_in, run_out
                dsize = din + dout
                if VERIFY_CACHES:
                    _check_descs(ind, run_in)
                    _check_descs(outd, run_out)
            c = CompactOp(name, n.type, entries, attr, lean.has_out_attr, lean.id, b"", ins, outs,
                          tuple(names) if names else ())
            if c.encoded_size(asize, dsize) == size:      # Note [compact size]
                n.lean = c
            elif not lean.HasField("attr_groups"):
                c.tail = interned(_TAILS, tail_of(lean))     # GE's built models: fields 22-32
                if c.tail and c.encoded_size() == size:
                    n.lean = c
        if n.lean is None:
            # a lean op of its own (the run's message is let go), canonical when its parts
            # are and its fields re-encode to its bytes (a rarer field is there)
            own = mv[span[0]:span[1]]
            n.lean = lean = LeanOpDef.FromString(own)
            canon = canon and lean.SerializeToString() == own
        n.lflags = (LEAN_CANON if canon else 0) | (LEAN_STRIP_PEER if vals is not None else 0)
        n.lpeer = vals
        if VERIFY_CACHES and canon:
            own = mv[span[0]:span[1]]
            raw = n.lean.SerializeToString()
            if raw != own and n.lean is not c:
                raise AssertionError(f"node {name}: a lean op called canonical whose encoding is not its bytes")
            if pb.OpDef.FromString(bytes(own)).SerializeToString(deterministic=True) != raw:
                raise AssertionError(f"node {name}: the canonical test at load passed an op whose full "
                                     "re-encoding differs from its lean encoding")
        if entries:
            inputs.append((n, entries, vals))
        elif not n.ins:
            n.dirty = False             # Note [inputs as written]: none, and none written
        if names:
            subs.append((n, names))
    g.link_loaded(nodes)
    if peer_attr:
        model.emit_peer_index = True
    return inputs, subs, peer_attr


# an entry's index text → index, for the indices nearly every entry has (others are parsed)
_INDEX_TEXT = {str(i): i for i in range(256)}
_INDEX_TEXT["-1"] = -1


def _parse_index(text: str) -> int:
    """strtol semantics: leading optional sign and digits; garbage → 0."""
    m = re.match(r"\s*([+-]?\d+)", text)
    return int(m.group(1)) if m else 0


def _build_edges(g: Graph, inputs: list, in_order: bool, model: Model, problems: list[Problem]) -> None:
    """Note [peer order]: ModelSerializeImp::HandleNodeNameRef gives every parsed input
    entry ("src:idx", data or control) of a graph a running number from 1 and files the
    edge under its source anchor with the key `_src_out_peer_index_for_ge_txt_load[k]`
    when that is >= 0, else that running number; each source's peer list (data and
    control alike) is then linked in key order. The destination's own lists keep the
    file's order: its data slots are fixed, and its control predecessors are written as
    its `:-1` entries (GE links the sources in unordered_map order, so its in-control
    order after a load is not defined; the file's order is what GE wrote). Two entries
    with one key are kept, in file order (GE's std::set would drop the second edge).

    Note [inputs as written]: a node whose input list is the one a save would write
    for it (data entries "src:idx" with the index as str() prints it, or "", one per
    in-anchor, then its control entries, none repeated) gets `dirty = False`: as long
    as nothing edits its inputs, a save that re-emits the peer index (which rewrites
    every node's list) can leave its list alone and write just the index. Other loaded
    nodes, like the nodes the passes make, keep `None` (not known to match)."""
    file = model.source
    pending: dict = {}          # src out-anchor → [(key, seq, dst in-anchor)] (Note [peers in order])
    pending_ctrl: dict = {}     # src node → [(key, seq, dst node)]
    seq = 0                     # GE's cur_index
    by_name = g.by_name
    index_of = _INDEX_TEXT.get
    for n, entries, vals in inputs:        # _read_nodes read the op's inputs and peer index
        peer_idx = vals if vals is not None and len(vals) == len(entries) else None
        slot = 0
        ins = n.ins
        as_written = True               # Note [inputs as written]
        ctrl = False                    # a control entry came
        for k, entry in enumerate(entries):
            src_name, colon, idx_text = entry.rpartition(":")
            if not colon:
                slot += 1               # unconnected slot ("" in dumps)
                if idx_text or ctrl:
                    as_written = False
                continue
            seq += 1
            if peer_idx is None:
                key = seq
            else:
                key = peer_idx[k]
                if key < 0:
                    key = seq
            idx = index_of(idx_text)    # the common case, without _parse_index's regex
            if idx is None:
                as_written = False
                if idx_text.isdigit() and idx_text.isascii():
                    idx = int(idx_text)
                else:
                    idx = _parse_index(idx_text)
                if idx < -1:
                    problems.append(Problem(Loc(file), f"node '{n.name}' in graph '{g.name}': bad input '{entry}'",
                                            "inputs are 'src:out_index' or 'src:-1' for control edges"))
                    continue
            src = by_name.get(src_name)
            if src is None:
                problems.append(Problem(Loc(file), f"node '{n.name}' in graph '{g.name}': input '{entry}' names no node of this graph",
                                        "edges connect nodes of one GraphDef; check the producer's name"))
                if idx >= 0:
                    slot += 1
                continue
            if idx == -1:
                ctrl = True
                # Note [repeated control edges] (engine/core/surgery.py): GE files a source's
                # edges in a set by key (HandleNodeNameRef), so a repeated `src:-1` that
                # carries the peer index (GE writes the first edge's index for both) is
                # dropped, and one without it (keyed by its running number) is an edge again
                count = src.out_ctrl_count
                k = count.get(n, 0) if count else 0
                if not k or peer_idx is None:
                    if not count:
                        count = src.out_ctrl_count = {}     # Note [shared empties] in engine/core/graph.py
                        src.out_ctrl = []
                    count[n] = k + 1
                    if k:
                        as_written = False
                    if n.in_ctrl:
                        n.in_ctrl.append(src)
                    else:
                        n.in_ctrl = [src]
                    dsts = pending_ctrl.get(src)
                    if dsts is not None:
                        dsts.append((key, seq, n))
                    else:
                        succ = src.out_ctrl
                        if in_order or key == len(succ):    # Note [peers in order]
                            succ.append(n)
                        else:
                            pending_ctrl[src] = [(i, 0, d) for i, d in enumerate(succ)] + [(key, seq, n)]
                            succ.clear()
                else:
                    as_written = False
                continue
            if ctrl:
                as_written = False
            outs = src.outs
            if idx >= len(outs):
                problems.append(Problem(Loc(file), f"node '{n.name}' in graph '{g.name}': input '{entry}' uses output {idx} "
                                                   f"but '{src_name}' has {len(outs)} output(s)",
                                        "an output index must be below the producer's output_desc count"))
                slot += 1
                continue
            if slot >= len(ins):
                n.ensure_inputs(slot + 1)
            o = outs[idx]
            dst = ins[slot]
            dsts = pending.get(o)
            if dsts is not None:
                dsts.append((key, seq, dst))
            else:
                peers = o.peers
                if in_order or key == len(peers):      # Note [peers in order]
                    peers.append(dst)
                    dst.peer = o
                else:
                    pending[o] = [(i, 0, d) for i, d in enumerate(peers)] + [(key, seq, dst)]
                    peers.clear()
            slot += 1
        if as_written and slot == len(ins):
            n.dirty = False
            if type(n.lean) is CompactOp:
                n.lean.input = None     # Note [compact inputs]
    # Note [edge sort]: `seq` is unique within a graph, so sorting the (key, seq, dst)
    # tuples themselves orders by (key, seq) and never compares two destinations; each
    # destination slot is filed once, so it has no peer yet (surgery.link's unlink and
    # dirty mark are moot: `dirty` is the loader's, see Note [inputs as written]).
    #
    # Note [peers in order]: a source's entries nearly always come in key order (GE
    # writes each edge's place in its source's list, and the consumers in that order), so
    # each edge is linked at once while its key is the list's length (or always, in a
    # graph without peer indices, where the key is `seq`); only a source whose order
    # breaks gets a (key, seq, dst) list to sort, which starts with the edges linked so
    # far as (place, 0, dst): their keys were their places, and seq 0 keeps them before
    # any later entry of the same key, as their smaller seq did.
    for src, dsts in pending.items():
        if len(dsts) > 1:
            dsts.sort()
        peers = src.peers
        for _, _, dst in dsts:
            peers.append(dst)
            dst.peer = src
    for src, dsts in pending_ctrl.items():
        if len(dsts) > 1:
            dsts.sort()
        src.out_ctrl.extend(d for _, _, d in dsts)


# Note [nesting limit]: GE refuses subgraphs nested more than 32 levels (GraphUnfolder's
# kHybridSubgraphRecursion; its stream allocator stops at 10). The engine walks nesting
# without recursion, but GE's per-branch analyses (CtrlNodeConflict's symbol table of each
# branch and what it nests) cost depth² nodes, so a dump may nest MAX_SUBGRAPH_DEPTH levels.
MAX_SUBGRAPH_DEPTH = 128


def _link_subgraphs(model: Model, subs: dict[Graph, list], problems: list[Problem]) -> None:
    """`subs`: each graph's [(node, subgraph names)] in node order, as _read_nodes read them."""
    queue = [model.root]
    seen = {model.root.name}
    depth = {model.root.name: 0}
    while queue:
        g = queue.pop(0)
        for n, names in subs[g]:
            n.subgraphs = []                # Note [shared empties] in engine/core/graph.py
            for name in names:
                if not name:
                    n.subgraphs.append(None)
                    continue
                sg = model.graphs.get(name)
                if sg is None:
                    problems.append(Problem(Loc(model.source), f"node '{n.name}' ({n.type}) names subgraph '{name}', which is not in the dump",
                                            f"add a graph {{ name: \"{name}\" ... }} or fix subgraph_name"))
                    n.subgraphs.append(None)
                    continue
                if name in seen or sg is model.root:
                    problems.append(Problem(Loc(model.source), f"subgraph '{name}' is used by more than one node (again by '{n.name}')",
                                            "each subgraph instance belongs to exactly one parent node"))
                    n.subgraphs.append(None)
                    continue
                seen.add(name)
                depth[name] = depth[g.name] + 1
                if depth[name] > MAX_SUBGRAPH_DEPTH:
                    problems.append(Problem(Loc(model.source), f"subgraph '{name}' of node '{n.name}' is nested more "
                                            f"than {MAX_SUBGRAPH_DEPTH} levels deep",
                                            "GE itself refuses more than 32 levels; flatten the graph"))
                    return
                sg.parent_node = n
                n.subgraphs.append(sg)
                queue.append(sg)


# ---- Model -> bytes -------------------------------------------------------------
_OP_TAG = _varint((6 << 3) | 2)     # GraphDef.op


class _Positions:
    """Each edge's position in its source's peer list (data) or control-successor list,
    for the peer-index attribute. Note [position maps]: a list's map is built the first
    time one of its entries is asked about and serves every later entry, so a save does
    O(edges) work; a `list.index` per edge was quadratic when one node has control edges
    to a large share of the graph."""

    __slots__ = ("maps",)

    def __init__(self):
        self.maps: dict = {}        # the list's owner (OutAnchor or Node) → {entry: position}

    def of(self, owner, entries: list, entry) -> int:
        m = self.maps.get(owner)
        if m is None:
            # the first place of each entry (GenCtrlInputInfo finds a repeated control
            # edge's first: Note [repeated control edges] in engine/core/surgery.py)
            m = self.maps[owner] = dict(zip(reversed(entries), range(len(entries) - 1, -1, -1)))
        return m[entry]


def _rewrite_inputs(n: Node, positions: _Positions | None, op) -> None:
    """Write the node's input entries (and peer index) into `op`: its OpDef, or its lean
    op (Note [lean save]); a compact op whose entries were let go (Note [compact inputs])
    gets them back here."""
    entries = input_entries(n)
    inputs = op.input
    if inputs is None:
        op.input = entries
    elif inputs[:] != entries:      # an unchanged list is not rewritten (the arena keeps old strings)
        del inputs[:]
        inputs.extend(entries)
    if positions is not None:
        _put_peer_index(n, op, _peer_positions(n, positions, len(entries) - len(n.in_ctrl)))


def _put_peer_index(n: Node, op, peer_pos: list[int]) -> None:
    """The peer-index attribute of `n` (the key is back: Note [attribute key sets]).

    Note [lean save]: a save writes an undecoded node (Note [lean ops]) from its lean op.
    Its inputs and peer index are written into the lean op as they would be into the
    decoded one (the entry list is the same field; the peer index's AttrDef is encoded as
    a deterministic save encodes it, in the entry the attribute had), and its id is kept
    there already. When the op's bytes were canonical at load (LEAN_CANON), the lean
    encoding is byte for byte what the decoded op's deterministic encoding would be: the
    fields outside the attributes and descriptors are encoded by upb in both, the
    attributes' entries are in key order with canonical values, and the new value is
    canonical. Any other lean op is decoded for its save alone (and not kept), so a save
    never leaves decoded ops behind. After a save the node shows the peer index, as a
    decoded node does (LEAN_STRIP_PEER is cleared)."""
    if op is n._op:
        lst = op.attr[PEER_INDEX_ATTR].list
        lst.Clear()
        lst.i.extend(peer_pos)
        lst.val_type = _VT_LIST_INT
    else:
        # Note [lean save]: the value a decoded op would hold, encoded as its save would
        # (left alone when the lean op holds it already: most places do not change)
        key = tuple(peer_pos)
        if key == n.lpeer:
            n.lflags &= ~LEAN_STRIP_PEER
            attrs_changed(n)
            return
        raw = _PEER_BYTES.get(key)
        if raw is None:
            raw = pb.AttrDef(list=pb.AttrDef.ListValue(i=peer_pos, val_type=_VT_LIST_INT)).SerializeToString(
                deterministic=True)
            if len(_PEER_BYTES) < 1 << 16:
                _PEER_BYTES[key] = raw
        ko = n.korder or lean_order(n)
        if PEER_INDEX_ATTR in ko:
            op.attr[ko.index(PEER_INDEX_ATTR)] = encode_entry(PEER_INDEX_ATTR, raw)
        else:       # appended out of key order: no longer canonical, the save decodes it
            op.attr.append(encode_entry(PEER_INDEX_ATTR, raw))
            n.korder = None
            n.lflags &= ~LEAN_CANON
        n.lpeer = key
        n.lflags &= ~LEAN_STRIP_PEER
    attrs_changed(n)


_PEER_BYTES: dict[tuple, bytes] = {}
_PEER_VALUES: dict[bytes, tuple] = {}      # a peer index's entry → its values (a graph has a few hundred)


def _peer_entry(raws: list, ko: tuple) -> bytes:
    """The peer index's entry among an op's attribute entries (the last with its key, as a
    map keeps it)."""
    return raws[len(ko) - 1 - ko[::-1].index(PEER_INDEX_ATTR)]


def _peer_values(raw: bytes) -> tuple:
    """The values of the peer index in an encoded attribute entry (interned: they are the
    node's `lpeer`)."""
    vals = _PEER_VALUES.get(raw)
    if vals is None:
        vals = tuple(pb.AttrDef.FromString(entry_of(raw)[1]).list.i)
        if len(_PEER_VALUES) >= 1 << 16:
            _PEER_VALUES.clear()
        _PEER_VALUES[raw] = vals
    return vals


_VT_LIST_INT = pb.AttrDef.ListValue.VT_LIST_INT


def _peer_positions(n: Node, positions: _Positions, slots: int) -> list[int]:
    """The peer index: the first `slots` in-anchors' places in their sources' peer lists
    (-1 when unconnected), then the control predecessors' in their successor lists."""
    peer_pos: list[int] = []
    put = peer_pos.append
    ins = n.ins
    for a in (ins if slots == len(ins) else ins[:slots]):
        src = a.peer
        if src is None:
            put(-1)
        else:
            peers = src.peers       # short lists: a scan beats a map (see _Positions)
            put(peers.index(a) if len(peers) <= 8 else positions.of(src, peers, a))
    for p in n.in_ctrl:
        succ = p.out_ctrl
        put(succ.index(n) if len(succ) <= 8 else positions.of(p, succ, n))
    return peer_pos


def serialize_model(model: Model) -> bytes:
    """Canonical binary ModelDef of the current graph state."""
    with no_gc():           # Note [gc] in save_model
        return b"".join(model_chunks(model))


def model_chunks(model: Model) -> Iterator[bytes]:
    """serialize_model's bytes in order, in pieces, made as they are asked for.

    Note [one copy]: every op's bytes are kept as they are serialized and joined once (or
    written one by one); framing each graph by joining its ops first held the whole
    output three times at the peak. A graph's length comes before its ops, so here a
    graph's pieces are held until its last op: a file is written by ModelFile instead,
    which holds none of a large graph (Note [lengths in place])."""
    head, tail = _model_ends(model)
    yield head
    for g in model.graph_order:
        held = _Held()
        _serialize_graph(g, model.emit_peer_index, held)
        yield _GRAPH_TAG
        yield _varint(held.size)
        yield from held.parts
    yield tail


def _model_ends(model: Model) -> tuple[bytes, bytes]:
    """The ModelDef's encoding before its graphs (name, versions) and after them (attributes)."""
    proto = model.proto
    head = pb.ModelDef(name=proto.name, version=proto.version, custom_version=proto.custom_version)
    tail = pb.ModelDef()
    for k in proto.attr:
        tail.attr[k].CopyFrom(proto.attr[k])
    if proto.HasField("attr_groups"):
        tail.attr_groups.CopyFrom(proto.attr_groups)
    return head.SerializeToString(deterministic=True), tail.SerializeToString(deterministic=True)


HOLD_BYTES = 16 << 20       # Note [lengths in place]: what a graph holds in memory before writing directly


class ModelFile:
    """A model to be written as a binary dump: into a seekable file by `write_to`, where
    each graph's length is written in place (Note [lengths in place]); as model_chunks'
    pieces, held in memory, anywhere else (iterating it: standard output)."""

    __slots__ = ("model",)

    def __init__(self, model: Model):
        self.model = model

    def __iter__(self) -> Iterator[bytes]:
        return model_chunks(self.model)

    def write_to(self, fh) -> None:
        """Write the dump into `fh` (a binary file opened for writing on a file descriptor
        that can also be read, as mkstemp's is) from its current position to its end.

        Note [lengths in place]: a graph's length comes before its ops. A graph of up to
        HOLD_BYTES is held until its last op, as model_chunks does; a larger one reserves
        its length's bytes (the width of the length the graph is heading for, from the
        share of its ops written so far) and goes on to the file directly. Its length is
        written into the reserved bytes at the end; were its width other than reserved
        (a graph whose ops end much larger or smaller than the first ones foretold), its
        bytes are moved by the difference first. Spilling to a temporary file and copying
        it back wrote every byte of a 1 GB dump twice and read it once more: a save of the
        1M-node step (no passes) took 5.0 s of system time, 14.1 s wall; in place 1.8 s, 11.1 s."""
        model = self.model
        head, tail = _model_ends(model)
        # Note [gc] in save_model: off here too, where `run` stages its output (at 1M nodes
        # nine full collections walked what the save had made so far: 1.1 s, 0.03 s at 100k)
        with no_gc():
            fh.write(head)
            for g in model.graph_order:
                out = _InPlace(fh, g.count)
                _serialize_graph(g, model.emit_peer_index, out)
                out.close()
            fh.write(tail)


class _InPlace:
    """A graph's pieces written into a seekable file (Note [lengths in place]): held up
    to HOLD_BYTES, then written as they come behind a reserved length."""

    __slots__ = ("fh", "ops", "done", "parts", "size", "start", "width")

    def __init__(self, fh, ops: int):
        self.fh = fh
        self.ops = ops              # the graph's ops, for the length's width
        self.done = 0               # ... of them added so far
        self.parts: list[bytes] = []
        self.size = 0
        self.start: int | None = None   # where the reserved length is, once writing directly
        self.width = 0

    def add(self, parts: tuple | list, n: int | None = None, ops: int = 0) -> None:
        if n is None:
            n = sum(map(len, parts))
        self.size += n
        self.done += ops
        if self.start is not None:
            self.fh.writelines(parts)
            return
        self.parts += parts
        if self.size > HOLD_BYTES:
            fh = self.fh
            heading = self.size * max(self.ops, 1) // max(self.done, 1)
            self.width = len(_varint(max(heading, self.size)))
            fh.write(_GRAPH_TAG)
            self.start = fh.tell()
            fh.write(bytes(self.width))
            fh.writelines(self.parts)
            self.parts = []

    def close(self) -> None:
        fh = self.fh
        length = _varint(self.size)
        if self.start is None:
            fh.write(_GRAPH_TAG)
            fh.write(length)
            fh.writelines(self.parts)
            return
        body = self.start + self.width
        if len(length) != self.width:
            fh.flush()
            _move(fh.fileno(), body, body + self.size, len(length) - self.width)
            if len(length) < self.width:
                fh.truncate(body + self.size + len(length) - self.width)
        fh.seek(self.start)
        fh.write(length)
        fh.seek(0, os.SEEK_END)


_MOVE_CHUNK = 1 << 20      # what _move reads and writes at a time


def _move(fd: int, lo: int, hi: int, by: int) -> None:
    """Move the bytes [lo, hi) of file `fd` by `by` bytes (chunks from the far end first,
    so none is overwritten before it is read)."""
    step = _MOVE_CHUNK
    starts = range(lo, hi, step)
    for at in (reversed(starts) if by > 0 else starts):
        chunk = os.pread(fd, min(step, hi - at), at)
        os.pwrite(fd, chunk, at + by)


class _Held:
    """A graph's pieces, held in memory until its length is known (model_chunks)."""

    __slots__ = ("parts", "size")

    def __init__(self):
        self.parts: list[bytes] = []
        self.size = 0

    def add(self, parts: tuple | list, n: int | None = None, ops: int = 0) -> None:
        """Hold `parts` (`n`: their length in bytes, when the caller counted it; `ops`: the
        ops among them, which _InPlace counts)."""
        self.parts += parts
        self.size += sum(map(len, parts)) if n is None else n


_GRAPH_TAG = _varint((7 << 3) | 2)  # ModelDef.graph


def _serialize_graph(g: Graph, emit_peer_index: bool, out: "_Held | _InPlace") -> None:
    """The GraphDef's encoding, in pieces added to `out` in order."""
    gd = g.proto
    head = pb.GraphDef(name=gd.name)
    head.input.extend(gd.input)
    head.output.extend(gd.output)
    tail = pb.GraphDef()
    for k in gd.attr:
        tail.attr[k].CopyFrom(gd.attr[k])
    if gd.HasField("attr_groups"):
        tail.attr_groups.CopyFrom(gd.attr_groups)
    add = out.add
    add((head.SerializeToString(deterministic=True),))
    positions = _Positions() if emit_peer_index else None
    # Note [op batches]: the ops' pieces (tag, length as a varint, bytes) go to `out` a
    # few hundred ops at a time, joined: one write of ~200 KB to the output file instead
    # of ~800 small ones, and one object held instead of ~800 until the graph is written
    batch: list[bytes] = []
    put = batch.append
    for n in g.node_list():
        op = n._op
        if op is None and (n.korder or lean_order(n)) is _DUPLICATE:
            op = n.op           # a key repeated in its lean attributes: decoded (lean_order)
        target = op if op is not None else n.lean
        dirty = n.dirty
        if dirty or target.input is None:       # Note [compact inputs]: entries made anew
            _rewrite_inputs(n, positions, target)
        elif emit_peer_index:
            if dirty is None:
                _rewrite_inputs(n, positions, target)
            else:
                # Note [inputs as written]: the entries are what a rewrite writes: only the peer index
                _put_peer_index(n, target, _peer_positions(n, positions, len(n.ins)))
        if op is not None:
            payload = op.SerializeToString(deterministic=True)
        else:
            # Note [lean save]: a canonical lean op's encoding is what its decoded op would
            # write; any other is decoded for the save alone
            payload = target.SerializeToString()
            if not n.lflags & LEAN_CANON:
                payload = pb.OpDef.FromString(payload).SerializeToString(deterministic=True)
        k = len(payload)
        put(_OP_TAG)
        put(bytes((k,)) if k < 0x80 else bytes((k & 0x7F | 0x80, k >> 7)) if k < 0x4000 else _varint(k))
        put(payload)
        if len(batch) >= _BATCH:
            chunk = b"".join(batch)
            add((chunk,), len(chunk), _BATCH // 3)
            batch.clear()
    if batch:
        chunk = b"".join(batch)
        add((chunk,), len(chunk), len(batch) // 3)
    add((tail.SerializeToString(deterministic=True),))
    if VERIFY_CACHES:
        check_shared()


_BATCH = 3 * 256    # Note [op batches]: pieces (three an op)


def save_model(model: Model, path: str | Path) -> None:
    """Write the model as binary (.pb) or GE text; atomically (no partial file)."""
    # Note [gc]: a save makes a few objects per node and frees them, no cycles among them;
    # with the collector on, the first collection also walks everything the passes made
    # (with the collector off) and a few more walk it again: 0.8-1.3 s of a 2.2 s save at 100k
    with no_gc():
        if is_binary_path(path):
            write_atomic(path, ModelFile(model))
        else:
            write_atomic(path, model_to_text(serialize_model(model)))


def write_data(fh, data) -> None:
    """Write an output's data into the binary file `fh`: bytes, a ModelFile (written in
    place), or pieces written in order (a list, or made as they are written)."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        fh.write(data)
    elif isinstance(data, ModelFile):
        data.write_to(fh)
    else:
        fh.writelines(data)


def write_atomic(path: str | Path, data: bytes | Iterable[bytes]) -> None:
    """Write `data` (bytes, a ModelFile, or pieces written in order: a list, or made as
    they are written) to `path` through a temporary file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            write_data(fh, data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
