"""Ops held in their encoded form: the lean graph representation.

Note [lean ops]: a parsed `ge.proto.OpDef` costs upb ~6 KB at the sizes of a training
step (12 attributes and 2-3 descriptors of 6 attributes each, ~1 KB on the wire): the
attribute maps are hash tables of messages. A 1M-node dump parsed whole took 5.8 GB of
a 9.2 GB peak. So a loaded node keeps a *lean* message instead: the same OpDef with its
heavy fields left encoded — each attribute its map entry's bytes (key, encoded AttrDef)
and each tensor descriptor its bytes — which upb parses into ~2 bytes per byte of the file.
A canonical op (nearly every op of a dump) goes further and keeps no message at all:
its fields become Python objects, most of them shared (Note [compact ops]). Either kind
is the node's `lean` op; they have the same field names. The node decodes its full
OpDef the first time anything asks for `node.op` (a write, or a read the lean form
cannot answer), and from then on the full op is the node's state; until then:

- topology, names, types and ids are the node's own fields (the id lives in the lean
  message, which is what a save writes);
- the attribute key set (Note [attribute key sets]) comes from the lean keys;
- an attribute's value (`lean_attr`) and a descriptor (`lean_desc`) are decoded from
  their bytes into messages shared by every node with the same bytes (a training step
  has a few thousand distinct ones), read only: whatever changes a node's attributes or
  descriptors goes through `node.op`, which decodes the node first (a descriptor to
  write into is `writable_desc(anchor)`, engine/core/graph.py), or sets one attribute
  in the encoded form, which keeps the node lean (`set_node_attr` in engine/core/attrs.py,
  `set_desc_attr` in engine/core/graph.py: Note [lean attribute writes], Note [lean
  descriptor writes]). Verify mode (MEMCONFLICT_VERIFY_CACHES=1) checks at every save
  that no shared message changed.

Loading parses each op once, into its lean message only (Note [op runs] in
engine/core/dumpio.py); the attributes' values and the descriptors are each parsed once
per distinct bytes, so a malformed dump fails at load with the same message as before.
The loader also tells which ops are canonical (Note [canonical at load]): their bytes
are what `SerializeToString(deterministic=True)` of the decoded op writes, i.e. what a
save of it would write. A save writes an undecoded canonical op from its lean message
(its inputs, peer index and id brought up to date in place) and decodes only the others
(Note [lean save] in engine/core/dumpio.py).
"""
from __future__ import annotations

import os

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from engine.core.wire import encode_varint, read_varint
from engine.proto import ge_ir_pb2 as pb


def _lean_classes():
    """LeanGraphDef, LeanOpDef, LeanAttrEntry: ge.proto's messages with OpDef.attr as
    repeated bytes (each a map entry's encoding, which LeanAttrEntry reads as key and
    encoded AttrDef) and OpDef.input_desc/output_desc as repeated bytes. The field
    numbers are GE's, so the wire format is the same."""
    fdp = descriptor_pb2.FileDescriptorProto()
    pb.DESCRIPTOR.CopyToProto(fdp)
    old, new = "." + pb.DESCRIPTOR.package + ".", ".ge.lean."
    fdp.name, fdp.package = "engine/core/lean_ge_ir.proto", "ge.lean"
    fdp.ClearField("dependency")

    def rename(msgs):
        for m in msgs:
            for f in m.field:
                if f.type_name.startswith(old):
                    f.type_name = new + f.type_name[len(old):]
            rename(m.nested_type)
    rename(fdp.message_type)
    entry = fdp.message_type.add(name="LeanAttrEntry")
    entry.field.add(name="key", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
                    label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=descriptor_pb2.FieldDescriptorProto.TYPE_BYTES,
                    label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    for m in fdp.message_type:
        if m.name != "OpDef":
            continue
        for f in m.field:
            if f.name in ("attr", "input_desc", "output_desc"):
                f.type = descriptor_pb2.FieldDescriptorProto.TYPE_BYTES
                f.ClearField("type_name")
        # the map's entry type stays declared (unused): nothing refers to it now
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    get = lambda name: message_factory.GetMessageClass(pool.FindMessageTypeByName("ge.lean." + name))
    return get("GraphDef"), get("OpDef"), get("LeanAttrEntry")


LeanGraphDef, LeanOpDef, LeanAttrEntry = _lean_classes()

VERIFY_CACHES = os.environ.get("MEMCONFLICT_VERIFY_CACHES") == "1"

# Note [shared decodings]: encoded bytes → the message they decode to, shared read-only by
# every lean node with those bytes. Bounded: past the limit a table starts afresh (a
# graph of unique descriptors then decodes each one per reader, which is correct, only slower).
_ATTRS: dict[bytes, pb.AttrDef] = {}
_DESCS: dict[bytes, pb.TensorDescriptor] = {}
_SHARED_MAX = 1 << 17


def interned(table: dict, value, limit: int = _SHARED_MAX):
    """The one object of `table` equal to `value` (added when new); a table that reaches
    `limit` starts afresh: interning only saves memory, it is never needed for an answer."""
    hit = table.get(value)
    if hit is None:
        if len(table) >= limit:
            table.clear()
        hit = table[value] = value
    return hit


def _shared(table: dict, cls, raw: bytes):
    msg = table.get(raw)
    if msg is None:
        if len(table) >= _SHARED_MAX:
            table.clear()
        msg = table[raw] = cls.FromString(raw)
    return msg


def shared_attr(raw: bytes) -> pb.AttrDef:
    return _shared(_ATTRS, pb.AttrDef, raw)


def shared_desc(raw: bytes) -> pb.TensorDescriptor:
    return _shared(_DESCS, pb.TensorDescriptor, raw)


def check_shared() -> None:
    """Verify mode: every shared message still equals what its bytes decode to (a change
    in place would have reached every node sharing it, and no save)."""
    for table, cls, what in ((_ATTRS, pb.AttrDef, "attribute"), (_DESCS, pb.TensorDescriptor, "descriptor")):
        for raw, msg in table.items():
            if msg != cls.FromString(raw):
                raise AssertionError(f"a shared {what} of lean nodes was changed in place (write through "
                                     f"node.op or writable_desc instead): {msg}")


PEER_INDEX_ATTR = "_src_out_peer_index_for_ge_txt_load"

LEAN_CANON = 1          # the op's bytes were canonical at load: its lean encoding is what a save writes
LEAN_STRIP_PEER = 2     # the lean attributes hold the peer index the loader took out of the node's view

_ORDERS: dict[tuple, tuple] = {}        # interned key orders (a graph has a few dozen)


class _Repeated(tuple):
    """The type of `_DUPLICATE`: an empty tuple that is not `()`.

    Note [no attributes is a key order]: `()` is the key order of an op without attributes
    (7 % of the ops of a real dump, ge_proto_00017). While `_DUPLICATE` was `()` itself (one
    object in CPython), such an op read as one whose keys repeat: its reads, its port names
    and its save decoded it, for nothing."""
    __slots__ = ()


_DUPLICATE = _Repeated()                # korder of a node whose lean attributes repeat a key


def lean_order(n) -> tuple:
    """The keys of lean node `n`'s attributes in their encoded order (cached, interned);
    `_DUPLICATE` when a key repeats (a map keeps the last: the node is decoded instead)."""
    ko = tuple([entry_of(raw)[0] for raw in n.lean.attr])
    ko = _DUPLICATE if len(set(ko)) != len(ko) else interned(_ORDERS, ko)
    n.korder = ko
    return ko


# Note [canonical at load]: a save writes a canonical undecoded op from its lean message
# (Note [lean save] in engine/core/dumpio.py), so the loader must know which ops are
# canonical: those whose lean form encodes to what SerializeToString(deterministic=True)
# of the decoded op would write. Parsing every op fully to re-encode it was most of the
# load's time and a second copy of each run of ops in memory. The test is made of parts
# instead, each cheap: an op is canonical when
#   - its fields are encoded as upb writes them: its compact op's encoding (Note [compact
#     ops]) is as long as its own bytes (Note [compact size]: then it is those fields in
#     number order), or else (a rarer field is there) its lean message's re-encoding is
#     its bytes (the fields outside the attributes and descriptors are upb's in both
#     forms, and each attribute entry is key then value);
#   - its keys are in the order a deterministic encoding writes a map with them, none
#     twice (`key_order`, once per key order);
#   - each attribute value and each descriptor is the canonical encoding of its message,
#     and no value is empty: a map entry's value is always written, even empty, but the
#     lean entry drops an empty one (`nested_canonical`, once per distinct bytes).
# The same checks parse every nested message once per distinct bytes, so a malformed
# attribute or descriptor fails the load as the full parse did (DecodeError).
# MEMCONFLICT_VERIFY_CACHES=1 checks every op called canonical against the full
# re-encoding (the test may call a canonical op not canonical: it is then decoded to be
# saved, which writes the same bytes).
_KEY_ORDERS: dict[tuple, tuple] = {}    # encoded key order → (korder, canonical order)
_VALUE_OK: dict[bytes, bool] = {}
DESC_OBJS: dict[bytes, bytes | bool] = {}  # a canonical descriptor → its one bytes object (Note [compact ops]), else False


def key_order(ko: tuple) -> tuple[tuple, bool]:
    """(the node's `korder`: `ko` interned, or _DUPLICATE when a key repeats; whether `ko`
    is the order a deterministic encoding writes these keys in, upb's and not Python's
    sorted(): a key comes before its own prefixes), once per distinct order."""
    hit = _KEY_ORDERS.get(ko)
    if hit is None:
        order = written_order(ko)
        hit = (_DUPLICATE, False) if len(order) != len(ko) else (interned(_ORDERS, ko), ko == order)
        if len(_KEY_ORDERS) >= _SHARED_MAX:
            _KEY_ORDERS.clear()
        _KEY_ORDERS[ko] = hit
    return hit


def written_order(keys) -> tuple:
    """The distinct `keys` in the order a deterministic encoding writes a map with them."""
    op = pb.OpDef()
    for key in keys:
        op.attr[key]
    det = LeanOpDef.FromString(op.SerializeToString(deterministic=True)).attr
    return tuple([LeanAttrEntry.FromString(raw).key for raw in det])


def nested_canonical(raws, values: bool) -> bool:
    """Whether every encoded AttrDef (`values`) or TensorDescriptor in `raws` is its
    message's canonical encoding (an empty one is not taken as such: an empty AttrDef as
    Note [canonical at load] says, an empty descriptor because the table below holds a
    canonical descriptor's bytes, and those would read as false); DecodeError when one is
    malformed. Every item is checked: the call validates them."""
    table = _VALUE_OK if values else DESC_OBJS
    if all(map(table.get, raws)):
        return True
    cls = pb.AttrDef if values else pb.TensorDescriptor
    ok = True
    for raw in raws:
        hit = table.get(raw)
        if hit is None:
            hit = bool(raw) and cls.FromString(raw).SerializeToString(deterministic=True) == raw
            if len(table) >= _SHARED_MAX:
                table.clear()
            table[raw] = hit if values or not hit else raw
        ok = ok and bool(hit)
    return ok


_ENTRIES: dict[bytes, tuple] = {}   # an attribute entry's bytes → (key, encoded value, canonical)
ENTRY_KEYS: dict[bytes, str] = {}   # the entries known to be canonical → their key (the load's fast path)
ENTRY_OBJS: dict[bytes, bytes] = {}     # ... → their one bytes object (Note [compact ops])


def entry_of(raw: bytes) -> tuple[str, bytes, bool]:
    """(key, encoded AttrDef, whether canonical) of an encoded attribute entry, cached;
    DecodeError when the entry or its value is malformed (the value is parsed here,
    once per distinct entry). Canonical: the entry is key then value, both written (as
    a map's entries always are), and the value is canonical (Note [canonical at load])."""
    hit = _ENTRIES.get(raw)
    if hit is None:
        e = LeanAttrEntry.FromString(raw)
        key, value = e.key, e.value
        canon = nested_canonical((value,), True) and e.SerializeToString() == raw and key != ""
        if len(_ENTRIES) >= _SHARED_MAX:
            _ENTRIES.clear()
            ENTRY_KEYS.clear()
            ENTRY_OBJS.clear()
        hit = _ENTRIES[raw] = (key, value, canon)
        if canon:
            ENTRY_KEYS[raw] = key
            ENTRY_OBJS[raw] = raw
    return hit


def encode_entry(key: str, value: bytes) -> bytes:
    """An attribute entry's encoding as a deterministic save writes it (`value` not empty)."""
    return LeanAttrEntry(key=key, value=value).SerializeToString()


# Note [lean attribute writes]: set_node_attr on a lean node puts the attribute's entry
# into the lean op's entries instead of decoding the op: the value encoded as a
# deterministic save encodes it, the entries in the order such a save writes their keys
# (found once per key order and new key), so a canonical op stays canonical and any
# other is decoded by its save as before. The entry replaces the one of its key, if any.
# The mem_rw_conflict pass marks every op with a reference port so (a tenth of a training
# step's ops); decoding them cost ~8 KB each. Not for a node whose entries repeat a key
# (its op answers: `_DUPLICATE`), nor for the peer index (the save's), nor for a value
# that encodes empty (a lean entry never holds one: Note [canonical at load]).
_INSERTS: dict[tuple, tuple] = {}       # (key order, key) → (new key order, each key's old place or -1)
_NEW_ENTRIES: dict[bytes, bytes] = {}   # entries written so, interned (most writes repeat a value)


def set_lean_entry(n, key: str, value: bytes) -> bool:
    """Put attribute `key`, `value` its encoded AttrDef, into lean node `n`'s entries (Note
    [lean attribute writes]); False when the node is to be decoded for the write instead.
    The caller tells the node's key set (attrs_changed)."""
    ko = n.korder or lean_order(n)
    if ko is _DUPLICATE or not value or key == PEER_INDEX_ATTR:
        return False
    entry = interned(_NEW_ENTRIES, encode_entry(key, value))
    lean = n.lean
    raws = lean.attr
    if key in ko:
        raws[ko.index(key)] = entry
        return True
    plan = _INSERTS.get((ko, key))
    if plan is None:
        order = written_order(ko + (key,))
        plan = (interned(_ORDERS, order), tuple([ko.index(k) if k != key else -1 for k in order]))
        if len(_INSERTS) >= _SHARED_MAX:
            _INSERTS.clear()
        _INSERTS[(ko, key)] = plan
    order, places = plan
    new = [raws[i] if i >= 0 else entry for i in places]
    if type(lean) is CompactOp:
        lean.attr = new
    else:
        del raws[:]
        raws.extend(new)
    n.korder = order
    if VERIFY_CACHES:
        check_canonical(n, key)
    return True


def check_canonical(n, key: str) -> None:
    """Verify mode: after a lean write of `key` (Note [lean attribute writes], Note [lean
    descriptor writes]), a lean op called canonical still encodes as its decoded op would
    (a compact op whose input entries were let go is checked without them)."""
    lean = n.lean
    if n.lflags & LEAN_CANON:
        if lean.input is None:
            lean = CompactOp(lean.name, lean.type, [], lean.attr, lean.has_out_attr, lean.id, lean.tail,
                             lean.input_desc, lean.output_desc, lean.subgraph_name)
        raw = lean.SerializeToString()
        if pb.OpDef.FromString(raw).SerializeToString(deterministic=True) != raw:
            raise AssertionError(f"node {n.name}: the lean write of {key} left a canonical op whose encoding "
                                 "is not its decoded op's")


# Note [compact ops]: a canonical op with none of OpDef's rarer fields (nearly every op of
# a dump) keeps no protobuf message at all: its fields are Python objects, most of them
# shared — each attribute entry and descriptor is one bytes object for every op that has
# the same bytes, the name and type are the node's own strings. A parsed lean message
# cost upb ~2.1 KB per op of a training step (it copies every entry and descriptor into
# the op's arena, and a run's arena lives as long as any of its ops); a compact op is
# ~0.4 KB. `CompactOp` has the lean message's field names, so whatever reads a lean op
# reads it alike, and `SerializeToString` writes the canonical encoding, field by field
# as upb does. The loader makes an op compact only when that encoding is as long as the
# op's own bytes, which proves the op has no other field (Note [compact size]).
_NO_FIELDS = LeanOpDef()
_OP_FIELDS = frozenset(f.name for f in LeanOpDef.DESCRIPTOR.fields)
_LEN = [encode_varint(k) for k in range(1 << 14)]   # the length prefixes of nearly all pieces
# OpDef's fields 22-32 (stream_id ... is_input_const), which GE's built models carry and
# dumps mostly do not: a compact op keeps their encoding as one bytes object
TAIL_FIELDS = ("stream_id", "input_name", "src_name", "src_index", "dst_name", "dst_index", "input_i",
               "output_i", "workspace", "workspace_bytes", "is_input_const")


class CompactOp:
    """A canonical op as Python objects (Note [compact ops]): name, type, inputs, the
    attribute entries' bytes, has_out_attr, id, the descriptors' bytes and subgraph names
    as fields, and fields 22-32 as their encoding (`tail`, usually empty)."""
    __slots__ = ("name", "type", "input", "attr", "has_out_attr", "id", "tail", "input_desc", "output_desc",
                 "subgraph_name")

    def __init__(self, name: str, type: str, input: list, attr: list, has_out_attr: bool, id: int, tail: bytes,
                 input_desc: tuple, output_desc: tuple, subgraph_name: tuple):
        self.name, self.type, self.input, self.attr = name, type, input, attr
        self.has_out_attr, self.id, self.tail = has_out_attr, id, tail
        self.input_desc, self.output_desc, self.subgraph_name = input_desc, output_desc, subgraph_name

    def __getattr__(self, field: str):
        """An OpDef field a compact op holds no object for: from `tail`, or the default
        (any other name is missing, as on any object: copy and pickle ask for some)."""
        if field not in _OP_FIELDS:
            raise AttributeError(field)
        if field in TAIL_FIELDS and self.tail:
            return getattr(LeanOpDef.FromString(self.tail), field)
        return getattr(_NO_FIELDS, field)

    def SerializeToString(self) -> bytes:
        """The canonical encoding: fields in number order, as upb writes a LeanOpDef."""
        lens = _LEN
        parts: list[bytes] = []
        put = parts.append
        text = self.name
        if text:
            raw = text.encode()
            k = len(raw)
            put(b"\x0a" + (lens[k] if k < 1 << 14 else encode_varint(k)) + raw)
        text = self.type
        if text:
            # Note [framed runs]: a graph has a few dozen types, each framed once
            field = _FRAMED_TYPE.get(text)
            if field is None:
                field = _framed_run(_FRAMED_TYPE, text, _framed(b"\x12", text.encode()))
            put(field)
        for text in self.input:
            raw = text.encode()
            k = len(raw)
            put(b"\x2a" + (lens[k] if k < 1 << 14 else encode_varint(k)) + raw)
        if self.attr:
            put(_framed_all(_FRAMED_ATTR, b"\x52", self.attr))
        if self.has_out_attr:
            put(b"\xa0\x01\x01")
        i = self.id
        if i:
            put(b"\xa8\x01" + (lens[i] if 0 < i < 1 << 14 else bytes((i & 0x7F | 0x80, i >> 7 & 0x7F | 0x80, i >> 14))
                                 if 0 < i < 1 << 21 else encode_varint(i)))
        put(self.tail)
        descs = self.input_desc         # Note [framed runs]: framed bytes are never empty
        if descs:
            put(_FRAMED_INS.get(descs) or _framed_run(_FRAMED_INS, descs, _framed_all(_FRAMED_IN, b"\x8a\x02", descs))
                if descs.__class__ is not OwnDescs else b"".join([_framed(b"\x8a\x02", raw) for raw in descs]))
        descs = self.output_desc
        if descs:
            put(_FRAMED_OUTS.get(descs) or _framed_run(_FRAMED_OUTS, descs, _framed_all(_FRAMED_OUT, b"\x92\x02", descs))
                if descs.__class__ is not OwnDescs else b"".join([_framed(b"\x92\x02", raw) for raw in descs]))
        for text in self.subgraph_name:
            put(_framed(b"\x9a\x02", text.encode()))
        return b"".join(parts)

    def encoded_size(self, attr_size: int | None = None, desc_size: int | None = None) -> int:
        """The length of `SerializeToString()`, without making it (Note [compact size]);
        `attr_size` / `desc_size`: the attribute entries' / both descriptor lists' framed
        length, when known (Note [attribute runs] in engine/core/dumpio.py)."""
        # name and type: tag, length, text; a name or type under 128 bytes of ASCII is the
        # common case, without a call
        text = self.name
        if text:
            k = len(text) if text.isascii() else len(text.encode())
            size = 2 + k if k < 0x80 else 1 + _varint_size(k) + k
        else:
            size = 0
        text = self.type
        if text:
            k = len(text) if text.isascii() else len(text.encode())
            size += 2 + k if k < 0x80 else 1 + _varint_size(k) + k
        entries = self.input
        if entries:
            if max(map(len, entries)) < 0x80 and "".join(entries).isascii():  # one byte of length each
                size += 2 * len(entries) + sum(map(len, entries))
            else:
                size += sum(1 + _text_size(text) for text in entries)
        if attr_size is not None:
            size += attr_size
        elif self.attr:
            size += _framed_size(_FRAMED_ATTR, b"\x52", self.attr)
        if self.has_out_attr:
            size += 3
        i = self.id
        if i:
            size += (3 if i < 0x80 else 4 if i < 0x4000 else 5) if 0 < i < 0x200000 else \
                2 + (_varint_size(i) if i > 0 else len(encode_varint(i)))
        size += len(self.tail)
        if desc_size is not None:
            size += desc_size
        else:
            if self.input_desc:
                size += _framed_size(_FRAMED_IN, b"\x8a\x02", self.input_desc)
            if self.output_desc:
                size += _framed_size(_FRAMED_OUT, b"\x92\x02", self.output_desc)
        for text in self.subgraph_name:
            size += 2 + _text_size(text)
        return size


# Note [compact size]: the loader makes a canonical op compact when its compact encoding
# is as long as its own bytes, which it tells without making that encoding (it was a
# quarter of the load). The compact fields are the values the op's bytes parse to (fields
# 22-32 as `tail`, which tail_of encodes as upb does, alike); each
# such field in the bytes is at least as long as its shortest encoding, which is what
# `SerializeToString` writes, and whatever else the bytes hold (another field, a field
# given twice, an explicit default, an unknown field, a longer varint) adds bytes. So the
# lengths are equal only when the bytes are the compact fields, each encoded as upb
# writes it: the compact encoding is then the bytes' fields in number order, what a
# deterministic save of the decoded op writes (given the other parts of Note [canonical
# at load]), even if the bytes had them in another order.
def _varint_size(k: int) -> int:
    """The length of a non-negative varint."""
    return 1 if k < 0x80 else 2 if k < 0x4000 else 3 if k < 0x200000 else len(encode_varint(k))


def _text_size(text: str) -> int:
    """The length of a string field's value with its length prefix (the tag not counted)."""
    k = len(text.encode())
    return _varint_size(k) + k


def _framed_size(table: dict, tag: bytes, items) -> int:
    """The length of `_framed_all(table, tag, items)` (which fills the table alike)."""
    try:
        return sum(map(len, map(table.__getitem__, items)))
    except KeyError:
        return len(_framed_all(table, tag, items))


def framed_size(attr) -> int:
    """The framed length of an op's attribute entries (field 10 each)."""
    return _framed_size(_FRAMED_ATTR, b"\x52", attr)


def descs_size(raws) -> int:
    """The framed length of a descriptor list, input_desc (33) or output_desc (34): both
    tags take two bytes (made without filling the save's tables of either)."""
    return sum(2 + _varint_size(len(r)) + len(r) for r in raws)


def _framed(tag: bytes, raw: bytes) -> bytes:
    """A length-delimited field: tag, length, bytes."""
    k = len(raw)
    return tag + (_LEN[k] if k < 1 << 14 else encode_varint(k)) + raw


class OwnDescs(tuple):
    """A compact op's descriptor list that holds a descriptor written in place (Note [lean
    descriptor writes] in engine/core/graph.py): its own, so a save frames it without
    keeping it in the tables of shared ones (Note [framed runs])."""
    __slots__ = ()


# the framed fields of the shared entries and descriptors, made once each (one join an op)
_FRAMED_ATTR: dict[bytes, bytes] = {}
_FRAMED_IN: dict[bytes, bytes] = {}
_FRAMED_OUT: dict[bytes, bytes] = {}


# Note [framed runs]: a compact op's type and descriptor tuples repeat over the graph (32
# types and ~3.5k distinct descriptor tuples over the 100k step's ops, the tuples shared
# objects: Note [attribute runs] in engine/core/dumpio.py), so a save frames each once and
# keeps the framed bytes by the type and by the tuple (2.4 MiB at 100k). A hit is the bytes
# the framing would make; each table is bounded like the others (a full one starts afresh).
# Attribute lists are not kept so: after the passes rewrite the peer index, 37k of the 100k
# ops' lists are distinct, and their framed bytes took 16 MiB for a hit rate of ~60 %.
_FRAMED_TYPE: dict[str, bytes] = {}
_FRAMED_INS: dict[tuple, bytes] = {}
_FRAMED_OUTS: dict[tuple, bytes] = {}


def _framed_run(table: dict, key, field: bytes) -> bytes:
    """Keep `field`, the framed bytes of `key`, in `table` (Note [framed runs])."""
    if len(table) >= _SHARED_MAX:
        table.clear()
    table[key] = field
    return field


def _framed_all(table: dict, tag: bytes, items) -> bytes:
    try:
        return b"".join(map(table.__getitem__, items))
    except KeyError:
        if len(table) >= _SHARED_MAX:
            table.clear()
        for raw in items:
            if raw not in table:
                table[raw] = _framed(tag, raw)
        return b"".join(map(table.__getitem__, items))


def tail_of(lean) -> bytes:
    """The encoding of a lean op's fields 22-32 (see CompactOp)."""
    t = LeanOpDef()
    for field in TAIL_FIELDS:
        value = getattr(lean, field)
        if field == "stream_id":
            t.stream_id = value
        elif value:
            getattr(t, field).extend(value)
    return t.SerializeToString()


TAILS: dict[bytes, bytes] = {}      # compact ops' tails, interned (most ops share one)


# the packed int64 fields the placement writes (`repeated int64` is packed in proto3): their tags
_PACKED = {f.name: encode_varint(f.number << 3 | 2) for f in LeanOpDef.DESCRIPTOR.fields if f.name in ("input_i", "output_i")}


def tail_with(tail: bytes, field: str, values) -> bytes:
    """A compact op's tail with its repeated field `field` (one of TAIL_FIELDS) set to
    `values` (Note [lean offset writes] in engine/core/graph.py), interned. A tail that
    holds nothing but that field (nearly every one: a dump has no tails) is encoded here,
    as upb encodes the packed field; any other is parsed, set and encoded again."""
    tag = _PACKED.get(field)
    if tag is not None and (not tail or _only_field(tail, tag)):
        if values:
            lens = _LEN
            payload = b"".join([lens[v] if 0 <= v < 1 << 14 else encode_varint(v) for v in values])
            k = len(payload)
            new = tag + (lens[k] if k < 1 << 14 else encode_varint(k)) + payload
        else:
            new = b""
        if VERIFY_CACHES and new != _tail_parsed(tail, field, values):
            raise AssertionError(f"tail_with: the packed encoding of {field} differs from upb's")
        return interned(TAILS, new)
    return interned(TAILS, _tail_parsed(tail, field, values))


def _tail_parsed(tail: bytes, field: str, values) -> bytes:
    t = LeanOpDef.FromString(tail) if tail else LeanOpDef()
    f = getattr(t, field)
    del f[:]
    f.extend(values)
    return t.SerializeToString()


def _only_field(tail: bytes, tag: bytes) -> bool:
    """Whether `tail` is one length-delimited field with key `tag`, and nothing else."""
    if not tail.startswith(tag):
        return False
    n, pos = read_varint(tail, len(tag), len(tail))
    return n is not None and pos + n == len(tail)


def lean_keys(n) -> frozenset:
    """The attribute keys of lean node `n` as the node shows them.

    Note [key sets by key order]: a graph's nodes share a few hundred key orders (each one
    tuple object, interned), so the two key sets of an order, with and without the peer
    index, are made once per order and kept by the tuple's identity (the entry holds the
    tuple, so the identity is not reused while the entry lasts). The first scan of every
    node's attribute keys (hccl_memcpy's) took 70 ms at 100k nodes, now 24 ms."""
    ko = n.korder or lean_order(n)
    if ko is _DUPLICATE:
        return frozenset(n.op.attr)
    hit = _KEY_SETS.get(id(ko))
    if hit is None or hit[0] is not ko:
        ks = frozenset(ko)
        if len(_KEY_SETS) >= _SHARED_MAX:
            _KEY_SETS.clear()
        hit = _KEY_SETS[id(ko)] = (ko, ks, ks - {PEER_INDEX_ATTR})
    return hit[2] if n.lflags & LEAN_STRIP_PEER else hit[1]


_KEY_SETS: dict[int, tuple] = {}        # id(key order) → (the order, its keys, its keys but the peer index)


def lean_entry(n, key: str) -> bytes | None:
    """Lean node `n`'s encoded attribute entry at `key`, or None (none there, or a key
    repeated in its entries: its decoded op answers)."""
    ko = n.korder or lean_order(n)
    if ko is _DUPLICATE or key not in ko or (key == PEER_INDEX_ATTR and n.lflags & LEAN_STRIP_PEER):
        return None
    return n.lean.attr[ko.index(key)]


def lean_attr(n, key: str) -> pb.AttrDef | None:
    """Lean node `n`'s AttrDef at `key` (shared, read only), or None."""
    raw = lean_entry(n, key)
    if raw is not None:
        return shared_attr(entry_of(raw)[1])
    if n.korder is _DUPLICATE:      # lean_entry read the key order
        attrs = n.op.attr
        return attrs[key] if key in attrs else None
    return None


def decode_lean(lean, model, strip_peer: int) -> pb.OpDef:
    """The full OpDef of a lean op, made inside the model's holder (Note [op memory])."""
    op = model.new_op("", "")
    op.MergeFromString(lean.SerializeToString())
    if strip_peer:
        attrs = op.attr
        if PEER_INDEX_ATTR in attrs:
            del attrs[PEER_INDEX_ATTR]
    return op
