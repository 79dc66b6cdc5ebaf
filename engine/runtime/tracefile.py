"""Reading a memtrace op trace (JSON or YAML, spec ge-runtime.md "memtrace"), checked before
anything runs: one-key ops with known fields of the right types, names used only after an op
defines them, streams inside the run. Errors are collected with their JSON path and placed at
`file:line:col` afterwards (a JSON file is re-read with positions only when it has errors, so
a 10^6-op trace loads at json.loads speed)."""
from __future__ import annotations

import json
from pathlib import Path

from engine.core.gcpause import no_gc
from engine.core.errors import InputError, Loc, Problem, did_you_mean, display_path
from engine.core.yamlloc import YList, YMap, load_yaml

# field kinds: int, stream (an allocator index), bool, str, ints, block/tensor/mem/mif (a defined
# name), new:KIND (defines a name), opt:... (optional), ...|null (a kernel input GE checks for
# null: the step fails with GRAPH_FAILED)
_S, _I = "stream", "int"
OPS: dict[str, dict[str, str]] = {
    "malloc": {"stream": _S, "size": _I, "as": "new:block"},
    "malloc_tensor_data": {"stream": _S, "size": _I, "as": "new:tensor"},
    "alloc_tensor": {"stream": _S, "size": _I, "as": "new:tensor"},
    "free": {"block": "block", "stream": _I},
    "new_access": {"block": "block", "src": _I, "dst": _I},
    "sync_local_recycle": {"block": "opt:block", "block_of": "opt:tensor", "src": _I, "dst": _I},
    "sync_all_local_recycle": {"block": "opt:block", "block_of": "opt:tensor", "dst": _I},
    "get_clear_local_recycle": {"allocator": _S, "dst": "opt:int", "take": "opt:int"},
    "get_and_clear_borrow": {"allocator": _S, "dst": _I},
    "birth_recycle": {"allocator": _S, "block": "block"},
    "plus_version": {"block": "block"},
    "move_l2_to_l1": {"block": "opt:block", "block_of": "opt:tensor"},
    "reinit": {"allocator": _S, "mem": "mem?", "as": "new:block"},
    "add_count": {"block": "block", "stream": _I},
    "sub_count": {"block": "block", "stream": _I},
    "pool_acquire": {"pool": "str", "allocator": _S, "mem": "opt:mem", "size": "opt:int", "as": "new:block"},
    "pool_release": {"pool": "str", "block": "block"},
    "l1_malloc": {"size": _I, "as": "new:mem", "l1": "opt:str"},
    "l1_free": {"mem": "mem|null"},
    "l1_fail": "bool",
    "set_l1": {"allocator": _S, "l1": "str", "capacity": "opt:int"},
    "mif_new": {"as": "new:mif", "streams": _I},
    "mif_set": {"mif": "mif", "maintained": _I, "stream": _I},
    "mif_clear": {"mif": "mif", "maintained": _I, "stream": _I},
    "mif_set_all": {"mif": "mif", "stream": _I},
    "mif_set_maintained_all": {"mif": "mif", "maintained": _I},
    "mif_merge_cleared_from": {"mif": "mif", "src": _I, "dst": _I},
    "mif_is_set": {"mif": "mif", "maintained": _I, "stream": _I},
    "mif_is_any_set": {"mif": "mif", "maintained": _I},
    "to_all_bit": {"stream_num": _I, "stream": _I},
    "create_events": {"infos": "pairs|null"},
    "define_events": "events",
    "send_events": {"allocator": "stream|null", "ids": "ints|null", "rt_events": "opt:count|null"},
    "wait_events": {"allocator": "stream|null", "ids": "ints|null", "rt_events": "opt:count|null"},
    "last_wait_events": {"ids": "ints|null", "rt_events": "opt:count|null"},
    "access_cross_stream": {"tensor": "tensor", "dst_stream": _I, "as": "new:tensor"},
    "free_tensor": {"tensor": "tensor"},
    "share_tensor_data": {"allocator": _S, "addr": "str", "size": _I, "as": "new:tensor"},
}
ONE_OF = {"sync_local_recycle": ("block", "block_of"), "sync_all_local_recycle": ("block", "block_of"),
          "move_l2_to_l1": ("block", "block_of"),
          "pool_acquire": ("mem", "size")}
TOP_KEYS = ("streams", "l1", "events", "ops", "placement")
EVENT_OPS = ("send_events", "wait_events", "last_wait_events")


class Trace:
    __slots__ = ("streams", "l1_capacity", "placement", "events", "ops", "file")

    def __init__(self, streams, l1_capacity, placement, events, ops, file) -> None:
        self.streams, self.l1_capacity, self.placement = streams, l1_capacity, placement
        self.events, self.ops, self.file = events, ops, file


def load_trace(path: str, rules) -> Trace:
    with no_gc():
        return _load_trace(path, rules)


def _load_trace(path: str, rules) -> Trace:
    file = display_path(path)
    is_json = Path(path).suffix.lower() == ".json"
    if is_json:
        try:
            with open(path, encoding="utf-8") as fh:
                doc = json.load(fh)
        except OSError as exc:
            raise InputError(Problem(Loc(file), f"cannot read file: {exc.strerror}", "check the path")) from None
        except UnicodeDecodeError:
            raise InputError(Problem(Loc(file), "file is not UTF-8 text", "save it as UTF-8")) from None
        except json.JSONDecodeError as exc:
            raise InputError(Problem(Loc(file, exc.lineno, exc.colno), f"JSON syntax: {exc.msg}",
                                     "check commas, quotes and brackets")) from None
    else:
        doc = load_yaml(path)
    problems: list[tuple[tuple, str, str]] = []
    trace = _check(doc, rules, problems, file)
    if problems:
        located = load_yaml(path) if is_json else doc
        raise InputError([Problem(_locate(located, p, file), m, h) for p, m, h in problems])
    return trace


def _locate(doc, path: tuple, file: str) -> Loc:
    """The position of the value at `path` (the key's when the last step names a missing key)."""
    node, loc = doc, getattr(doc, "loc", Loc(file, 1, 1))
    for step in path:
        if isinstance(node, YMap) and step in node:
            loc, node = node.value_locs.get(step, node.loc), node[step]
        elif isinstance(node, YMap) and isinstance(step, tuple):      # ("key", k): the key itself
            return node.key_locs.get(step[1], node.loc)
        elif isinstance(node, YList) and isinstance(step, int) and step < len(node):
            loc, node = node.item_locs[step], node[step]
        else:
            break
    return loc


def _kind(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, int):
        return f"the number {v}"
    if isinstance(v, str):
        return f"the string '{v}'"
    return "a list" if isinstance(v, list) else "a mapping"


def _check(doc, rules, problems: list, file: str) -> Trace:
    err = problems.append
    if not isinstance(doc, dict):
        err(((), "a memtrace trace must be a mapping", "write {streams: N, ops: [...]}"))
        return Trace(1, None, "hbm", [], [], file)
    for key in doc:
        if key not in TOP_KEYS:
            err(((("key", key),), f"trace: unknown key '{key}'", did_you_mean(str(key), TOP_KEYS, "keys")))
    streams = doc.get("streams")
    if not isinstance(streams, int) or isinstance(streams, bool) or not 1 <= streams <= rules.stream_bits:
        where = ("streams",) if "streams" in doc else ()
        err((where, f"trace: 'streams' must be a whole number from 1 to {rules.stream_bits}, got {_kind(streams)}",
             f"GE's stream bit sets are {rules.stream_bits} bits wide"))
        streams = 1
    capacity = None
    l1 = doc.get("l1", {})
    if not isinstance(l1, dict) or any(k != "capacity" for k in l1):
        err((("l1",), "trace: 'l1' must be a mapping with an optional 'capacity'", "write l1: {capacity: BYTES}"))
    else:
        capacity = l1.get("capacity")
        if capacity is not None and (not isinstance(capacity, int) or isinstance(capacity, bool) or capacity < 0):
            err((("l1", "capacity"), f"l1.capacity must be a byte count, got {_kind(capacity)}", "write a whole number"))
            capacity = None
    placement = doc.get("placement", "hbm")
    if placement not in rules.placements:
        err((("placement",), f"trace: unknown placement '{placement}'", did_you_mean(str(placement), rules.placements, "placements")))
        placement = "hbm"
    names: dict[str, set] = {"block": set(), "tensor": set(), "mem": set(), "mif": set()}
    events = doc.get("events", [])
    if not isinstance(events, list):
        err((("events",), "trace: 'events' must be a list", "write events: [{src: 0, dst: 1}]"))
        events = []
    later: list = []
    _check_events(events, ("events",), streams, err, later)
    ops = doc.get("ops")
    if not isinstance(ops, list):
        err(((("ops",) if "ops" in doc else ()), "trace: 'ops' must be a list of one-key mappings",
             "write ops: [{malloc: {stream: 0, size: 1024, as: b0}}]"))
        ops = []
    fast = _FAST_FACTORY(names["block"], names["tensor"], names["mem"], names["mif"], streams, _MISSING, _pairs)
    for i, op in enumerate(ops):
        if later and isinstance(op, dict) and len(op) == 1 and next(iter(op)) in EVENT_OPS:
            _check_later(later, names, err)      # the first event kernel reads the table's spaces
        if type(op) is dict and len(op) == 1:
            (name, body), = op.items()
            check = fast.get(name)
            if check is not None and check(body):
                continue
        _check_op(op, i, streams, names, err, later)
    _check_later(later, names, err)
    return Trace(streams, capacity, placement, events, ops, file)


def _check_later(later: list, names: dict, err) -> None:
    """Event spaces name blocks: each must be made by an op before an event kernel reads it."""
    for path, name in later:
        if name not in names["block"]:
            err((path, f"unknown block '{name}' (no op before the first event kernel makes it)",
                 did_you_mean(name, names["block"], "blocks") if names["block"]
                 else "make it with an op's 'as:' before the first send/wait/last_wait"))
    later.clear()


def _int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _check_events(events, path, streams, err, later) -> None:
    for j, ev in enumerate(events):
        p = path + (j,)
        if not isinstance(ev, dict):
            err((p, "an event must be a mapping {src, dst, free_by_src?, return_birth?}", "write {src: 0, dst: 1}"))
            continue
        for key in ev:
            if key not in ("src", "dst", "free_by_src", "return_birth"):
                err((p + (("key", key),), f"event: unknown key '{key}'",
                     did_you_mean(str(key), ("src", "dst", "free_by_src", "return_birth"), "keys")))
        for key in ("src", "dst"):
            if not _int(ev.get(key)):
                err((p + (key,) if key in ev else p, f"event: '{key}' must be a stream number, got {_kind(ev.get(key))}",
                     f"write {key}: 0"))
        fbs = ev.get("free_by_src", [])
        if not isinstance(fbs, list):
            err((p + ("free_by_src",), "event: 'free_by_src' must be a list of [block, version]", "write [[b0, 0]]"))
            fbs = []
        for k, pair in enumerate(fbs):
            if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str) and _int(pair[1])):
                err((p + ("free_by_src", k), "event: each 'free_by_src' item is [block, version]", "write [b0, 0]"))
            else:
                later.append((p + ("free_by_src", k), pair[0]))
        rb = ev.get("return_birth", [])
        if not isinstance(rb, list):
            err((p + ("return_birth",), "event: 'return_birth' must be a list of blocks", "write [b0, b1]"))
            rb = []
        for k, name in enumerate(rb):
            if not isinstance(name, str):
                err((p + ("return_birth", k), "event: each 'return_birth' item is a block name", "write b0"))
            else:
                later.append((p + ("return_birth", k), name))


def _check_op(op, i, streams, names, err, later) -> None:
    p = ("ops", i)
    if type(op) is not dict and not isinstance(op, dict) or len(op) != 1:
        err((p, f"op {i + 1}: an op is a mapping with exactly one key (the op name)", "write {free: {block: b0, stream: 0}}"))
        return
    (name, body), = op.items()
    spec = OPS.get(name)
    if spec is None:
        err((p + (("key", name),), f"op {i + 1}: unknown op '{name}'", did_you_mean(str(name), OPS, "ops")))
        return
    p = p + (name,)
    if spec == "bool":
        if not isinstance(body, bool):
            err((p, f"{name}: must be true or false, got {_kind(body)}", f"write {{{name}: true}}"))
        return
    if spec == "events":
        if not isinstance(body, list):
            err((p, f"{name}: must be a list of events", "write [{src: 0, dst: 1}]"))
        else:
            mine: list = []
            _check_events(body, p, streams, err, mine)
            _check_later(mine, names, err)
        return
    if not isinstance(body, dict):
        err((p, f"{name}: its fields must be a mapping, got {_kind(body)}", f"fields: {', '.join(spec)}"))
        return
    keyset, fields, pair = _COMPILED[name]
    if not keyset.issuperset(body):
        for key in body:
            if key not in keyset:
                err((p + (("key", key),), f"{name}: unknown field '{key}'", did_you_mean(str(key), spec, "fields")))
    if pair and sum(k in body for k in pair) != 1:
        err((p, f"{name}: give exactly one of '{pair[0]}' and '{pair[1]}'", f"write {pair[0]}: ..."))
    new = None
    for key, code, what, optional, nullable in fields:
        v = body.get(key, _MISSING)
        if v is _MISSING:
            if not optional:
                err((p, f"{name}: missing field '{key}'", f"add {key}: ..."))
            continue
        if v is None and nullable:
            continue
        if code == _REF:
            if isinstance(v, str) and v in names[what]:
                continue
            if v is None and what == "mem" and key == "mem" and name == "reinit":
                continue
            if not isinstance(v, str):
                err((p + (key,), f"{name}: '{key}' must be a {what} name, got {_kind(v)}", f"write {key}: NAME"))
            else:
                err((p + (key,), f"{name}: unknown {what} '{v}'", _name_hint(v, names[what], what)))
        elif code <= _STREAM:
            if type(v) is not int:
                err((p + (key,), f"{name}: '{key}' must be a whole number, got {_kind(v)}", f"write {key}: 0"))
            elif v < 0 and key in ("size", "capacity"):
                err((p + (key,), f"{name}: '{key}' must be a byte count, got {v}", "sizes are size_t in GE: 0 or more"))
            elif code == _STREAM and not 0 <= v < streams:
                err((p + (key,), f"{name}: no allocator for stream {v} (the trace has {streams} streams)",
                     f"use a stream from 0 to {streams - 1}"))
        elif code == _NEW:
            if not isinstance(v, str):
                err((p + (key,), f"{name}: '{key}' must be a name, got {_kind(v)}", "write as: b0"))
            else:
                new = (what, v)
        elif code == _STR:
            if not isinstance(v, str):
                err((p + (key,), f"{name}: '{key}' must be a name, got {_kind(v)}", f"write {key}: NAME"))
        elif code == _INTS:
            if not isinstance(v, list) or not all(type(x) is int for x in v):
                err((p + (key,), f"{name}: '{key}' must be a list of whole numbers", f"write {key}: [0, 1]"))
        elif code == _COUNT:
            if not (type(v) is int and v >= 0) and not isinstance(v, list):
                err((p + (key,), f"{name}: '{key}' must be a count or a list of rt event handles, got {_kind(v)}",
                     f"write {key}: 3"))
        elif not _pairs(v):
            err((p + (key,), f"{name}: '{key}' must be a list of [src, dst] pairs", "write infos: [[0, 1], [1, 0]]"))
    if new is not None:
        names[new[0]].add(new[1])


def _pairs(v) -> bool:
    return isinstance(v, list) and all(
        (isinstance(x, list) and len(x) == 2 and all(_int(y) for y in x))
        or (isinstance(x, dict) and set(x) == {"src", "dst"} and all(_int(y) for y in x.values())) for x in v)


_MISSING = object()
_INT, _STREAM, _STR, _INTS, _PAIRS, _NEW, _REF = range(7)
_COUNT = 7
_CODES = {"int": _INT, "stream": _STREAM, "str": _STR, "ints": _INTS, "pairs": _PAIRS, "count": _COUNT}


def _compile(spec: dict) -> tuple:
    fields = []
    for key, kind in spec.items():
        optional = kind.startswith("opt:") or kind == "mem?"
        nullable = kind.endswith("|null")
        kind = kind[4:] if kind.startswith("opt:") else kind.rstrip("?")
        kind = kind.removesuffix("|null")
        if kind.startswith("new:"):
            fields.append((key, _NEW, kind[4:], optional, nullable))
        elif kind in _CODES:
            fields.append((key, _CODES[kind], "", optional, nullable))
        else:
            fields.append((key, _REF, kind, optional, nullable))
    return frozenset(spec), tuple(fields), None


_COMPILED = {name: _compile(spec) for name, spec in OPS.items() if isinstance(spec, dict)}
for _name, _pair in ONE_OF.items():
    _COMPILED[_name] = _COMPILED[_name][:2] + (_pair,)

def _name_hint(name: str, known: set, what: str) -> str:
    if not known:
        return f"no {what} is defined before this op; an op's 'as:' names one"
    return did_you_mean(name, known, what + "s")


# ---- the fast path -----------------------------------------------------------------------
# Note [fast checks]: `_check_op` walks an op's field table and says what is wrong; for a 10^6-op
# trace that walk costs more than the JSON parse. So each op kind's table is also compiled once
# into a straight-line predicate: true when the op is well-formed (and then it records the name
# the op defines, as `_check_op` would), false otherwise. It only accepts what `_check_op`
# accepts (exact `dict`/`str`/`int` types; a YAML trace's located subclasses take the slow path),
# and every op it refuses goes through `_check_op`, which finds and words the problem — so the
# messages and their order are those of the slow path alone.
_NAME_SETS = ("block", "tensor", "mem", "mif")


def _fast_source() -> str:
    lines = ["def factory(N_block, N_tensor, N_mem, N_mif, streams, MISSING, pairs):"]
    table = []
    for name, spec in OPS.items():
        if not isinstance(spec, dict):
            continue                              # bool and events ops: always the slow path
        keyset, fields, pair = _COMPILED[name]
        lines += [f"    def {name}(b):", "        if type(b) is not dict: return False"]
        required = sum(not f[3] for f in fields)
        count = [str(required)]
        define = None
        for k, (key, code, what, optional, nullable) in enumerate(fields):
            v = f"v{k}"
            if code == _REF:
                test = f"type({v}) is str and {v} in N_{what}"
                if what == "mem" and key == "mem" and name == "reinit":
                    test = f"{v} is None or {test}"
            elif code == _INT:
                test = f"type({v}) is int" + (f" and {v} >= 0" if key in ("size", "capacity") else "")
            elif code == _STREAM:
                test = f"type({v}) is int and 0 <= {v} < streams"
            elif code in (_NEW, _STR):
                test = f"type({v}) is str"
                if code == _NEW:
                    define = (what, v, optional)
            elif code == _INTS:
                test = f"type({v}) is list and all(type(x) is int for x in {v})"
            elif code == _COUNT:
                test = f"(type({v}) is int and {v} >= 0) or type({v}) is list"
            else:
                test = f"pairs({v})"
            if nullable:
                test = f"{v} is None or {test}"
            # a missing required field is MISSING, which no test accepts
            lines.append(f"        {v} = b.get({key!r}, MISSING)")
            if optional:
                lines.append(f"        if {v} is not MISSING and not ({test}): return False")
                count.append(f"({v} is not MISSING)")
            else:
                lines.append(f"        if not ({test}): return False")
        lines.append(f"        if len(b) != {' + '.join(count)}: return False")   # no unknown key
        if pair:
            lines.append(f"        if ({pair[0]!r} in b) + ({pair[1]!r} in b) != 1: return False")
        if define is not None:
            what, v, optional = define
            lines.append(f"        {f'if {v} is not MISSING: ' if optional else ''}N_{what}.add({v})")
        lines.append("        return True")
        table.append(f"{name!r}: {name}")
    lines.append("    return {" + ", ".join(table) + "}")
    return "\n".join(lines) + "\n"


def _compile_fast():
    space: dict = {}
    exec(compile(_fast_source(), "<memtrace fast checks>", "exec"), space)   # noqa: S102 - our own source
    return space["factory"]


_FAST_FACTORY = _compile_fast()
