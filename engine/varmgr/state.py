"""A session's VarManager <-> deployer.VarManagerInfo (var_manager.proto, §10).

`to_info` follows VarManagerToSerial (what GE writes and what it leaves out),
`restore` follows VarManagerToDeserial. `save_state` / `load_state` write and
read the message as binary or text (by file suffix); a file that does not parse
or is inconsistent is unusable input naming the file.

Note [extern flag in the serial form]: var_manager.proto has no is_extern_mem,
so GE forgets that a ConstPlaceHolder's device address is external and a
restored session would add the 512-byte head guard to it. We mark such entries
with the descriptor attr `_memconflict_extern_mem` (GE reads it as an ordinary
attr); files from GE lack it and restore exactly as GE restores them.
"""
from __future__ import annotations

from pathlib import Path

from google.protobuf import text_format
from google.protobuf.message import DecodeError

from engine.core.attrs import set_attr
from engine.core.dumpio import write_atomic
from engine.core.errors import InputError, Loc, Problem, display_path
from engine.proto import var_manager_pb2 as vpb
from engine.varmgr.desc import DescCache, TensorDesc, desc_to_proto
from engine.varmgr.manager import VarManager, VarManagerPool
from engine.varmgr.records import BroadcastInfo, Status, TransNodeInfo, VarAddr, VarDevAddr, VarError
from engine.varmgr.resource import VarResource, build_mem_resource

EXTERN_ATTR = "_memconflict_extern_mem"
TEXT_SUFFIXES = {".pbtxt", ".txt", ".textproto", ".prototxt"}


def to_info(mgr: VarManager) -> vpb.VarManagerInfo:
    res = mgr.var_resource
    if res is None:
        raise VarError(Status.INTERNAL_ERROR, f"VarManager of session {mgr.session_id} has no "
                       "VarResource to serialize (Init not called)")
    info = vpb.VarManagerInfo(
        version=mgr.version, session_id=mgr.session_id, device_id=mgr.device_id, job_id=mgr.job_id,
        graph_mem_max_size=mgr.graph_mem_max_size, var_mem_max_size=mgr.var_mem_max_size,
        var_mem_logic_base=mgr.var_mem_logic_base, use_max_mem_size=mgr.use_max_mem_size)
    r = info.var_resource
    put = _DescWriter()
    for logic, typ in res.var_offset_map.items():
        r.var_offset_map[logic] = typ
    for key, e in res.var_addr_mgr_map.items():
        m = r.var_addr_mgr_map[key]
        put(e.desc, m.desc)
        m.address, m.offset, m.memory_type = e.address, e.offset, e.memory_type
    for name, desc in res.cur_var_tensor_desc_map.items():
        put(desc, r.cur_var_tensor_desc_map[name])
    for name, road in res.var_to_trans_road.items():
        multi = r.var_to_trans_road[name]
        for step in road:
            s = multi.node_info.add(node_type=step.node_type)
            put(step.input, s.input)
            put(step.output, s.output)
    r.var_names_to_changed_graph_id.update(res.var_names_to_changed_graph_id)
    r.var_names_to_allocated_graph_id.update(res.var_names_to_allocated_graph_id)
    for gid, infos in res.var_broad_cast_info.items():
        multi = r.var_broad_cast_info[gid]
        for name, b in infos.items():
            multi.broadcast_info[name].CopyFrom(vpb.BroadcastInfo(
                var_name=b.var_name, broadcast_name=b.broadcast_name, idx=b.idx,
                input_offset=b.input_offset, input_size=b.input_size,
                output_offset=b.output_offset, output_size=b.output_size))
    for logic, e in res.var_dev_addr_mgr_map.items():
        m = r.var_dev_addr_mgr_map[logic]
        put(e.desc, m.desc)
        if e.is_extern_mem:
            set_attr(m.desc.attr, EXTERN_ATTR, True)
        m.address, m.dev_addr = e.logic_addr, e.dev_addr
    for typ, mem in mgr.mem_resources.items():
        info.mem_resource_map[typ].var_mem_size = mem.var_mem_size
    return info


class _DescWriter:
    """desc_to_proto into an empty field, memoised per descriptor.

    Note [state descriptor memo]: a session's maps hold each variable's descriptor up to
    three times and a model has few distinct ones; a descriptor is written once and its
    bytes merged into every further field (the same message, so the same output bytes).
    """

    def __init__(self) -> None:
        self.memo: dict[TensorDesc, bytes] = {}

    def __call__(self, desc: TensorDesc, out) -> None:
        data = self.memo.get(desc)
        if data is None:
            data = self.memo[desc] = desc_to_proto(desc).SerializeToString()
        out.MergeFromString(data)


def _reader() -> "callable":
    cache = DescCache()
    return lambda td: cache.read(td)[1]


def _first(item):
    return item[0]


def restore(mgr: VarManager, info: vpb.VarManagerInfo, device_id: int = 0) -> VarManager:
    """VarManagerToDeserial into a manager without VarResource."""
    if mgr.var_resource is not None:
        raise VarError(Status.INTERNAL_ERROR, f"session {mgr.session_id} already has a VarResource")
    mgr.version, mgr.session_id, mgr.job_id = info.version, info.session_id, info.job_id
    mgr.device_id = device_id
    mgr.graph_mem_max_size, mgr.var_mem_max_size = info.graph_mem_max_size, info.var_mem_max_size
    mgr.var_mem_logic_base, mgr.use_max_mem_size = info.var_mem_logic_base, info.use_max_mem_size
    mgr.init(mgr.version, info.session_id, device_id, info.job_id)
    res: VarResource = mgr.var_resource
    r = info.var_resource
    desc_from_proto = _reader()
    res.var_offset_map.update(r.var_offset_map)
    addrs = res.var_addr_mgr_map
    for key, m in r.var_addr_mgr_map.items():
        addrs[key] = VarAddr(desc_from_proto(m.desc), m.address, m.offset, m.memory_type, None)
    res.cur_var_tensor_desc_map.update((name, desc_from_proto(td))
                                       for name, td in r.cur_var_tensor_desc_map.items())
    for name, multi in r.var_to_trans_road.items():
        res.var_to_trans_road[name] = [TransNodeInfo(s.node_type, desc_from_proto(s.input),
                                                     desc_from_proto(s.output)) for s in multi.node_info]
    for name, gid in r.var_names_to_changed_graph_id.items():
        res.set_changed_graph_id(name, gid)
    res.var_names_to_allocated_graph_id.update(r.var_names_to_allocated_graph_id)
    for gid, multi in r.var_broad_cast_info.items():
        res.var_broad_cast_info[gid] = {
            name: BroadcastInfo(b.var_name, b.broadcast_name, b.idx, b.input_offset, b.input_size,
                                b.output_offset, b.output_size) for name, b in multi.broadcast_info.items()}
    for logic, m in sorted(r.var_dev_addr_mgr_map.items(), key=_first):
        flag = m.desc.attr.get(EXTERN_ATTR)
        extern = flag is not None and flag.WhichOneof("value") == "b" and flag.b
        desc = m.desc
        if extern:
            desc = type(m.desc)()
            desc.CopyFrom(m.desc)
            del desc.attr[EXTERN_ATTR]
        res.add_dev_addr(VarDevAddr(desc_from_proto(desc), m.address, m.dev_addr, extern))
    for typ, m in info.mem_resource_map.items():
        mem = build_mem_resource(mgr.policy, typ)
        if mem is not None:
            mem.var_mem_size = m.var_mem_size
            mgr.mem_resources[typ] = mem
    return mgr


def restore_session(pool: VarManagerPool, info: vpb.VarManagerInfo, device_id: int = 0) -> VarManager:
    return restore(pool.instance(info.session_id), info, device_id)


# ---- files ---------------------------------------------------------------------
def is_text_path(path) -> bool:
    return Path(path).suffix.lower() in TEXT_SUFFIXES


def encode(info: vpb.VarManagerInfo, text: bool) -> bytes:
    if text:
        return text_format.MessageToString(info).encode()
    return info.SerializeToString(deterministic=True)


def save_state(mgr: VarManager, path) -> None:
    write_atomic(path, encode(to_info(mgr), is_text_path(path)))


def load_state(path, policy=None) -> vpb.VarManagerInfo:
    """One session's state: a VarManagerInfo, or the only session of a MultiVarManagerInfo."""
    infos = load_sessions(path, policy)
    if len(infos) != 1:
        raise InputError(Problem(Loc(display_path(path)), f"the state file holds {len(infos)} sessions "
                                 f"({', '.join(str(i.session_id) for i in infos) or 'none'})",
                                 "name one with --session ID"))
    return infos[0]


def is_multi(data: bytes, text: bool) -> bool:
    """Whether serialized state bytes are a MultiVarManagerInfo.

    Note [one or many sessions]: a VarManagerInfo's field 1 is a varint (version), a
    MultiVarManagerInfo's field 1 a message, so a binary MultiVarManagerInfo starts with the
    tag byte 0x0a and a VarManagerInfo never does; in text, the first field name decides.
    """
    if not text:
        return data[:1] == b"\x0a"
    for line in data.decode("utf-8", "replace").splitlines():
        word = line.strip()
        if word and not word.startswith("#"):
            return word.startswith("var_manager_info")
    return False


def load_sessions(path, policy=None) -> list[vpb.VarManagerInfo]:
    """Every session of a state file (VarManagerInfo: one; MultiVarManagerInfo: all, VarManagerPool)."""
    file = display_path(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise InputError(Problem(Loc(file), f"cannot read state file: {exc.strerror}", "check the path")) from None
    if data and is_multi(data, is_text_path(path)):
        multi = _parse(data, path, vpb.MultiVarManagerInfo())
        infos = list(multi.var_manager_info)
        seen: dict[int, int] = {}
        for k, info in enumerate(infos):
            if info.session_id in seen:
                raise InputError(Problem(Loc(file), f"inconsistent state file: session {info.session_id} "
                                         f"appears twice (entries {seen[info.session_id]} and {k})",
                                         "the file is corrupt or was edited by hand"))
            seen[info.session_id] = k
    else:
        infos = [_parse(data, path, vpb.VarManagerInfo())]
    problems = [f"session {i.session_id}: {p}" if len(infos) > 1 else p
                for i in infos for p in check_info(i, policy)]
    if problems:
        raise InputError([Problem(Loc(file), f"inconsistent state file: {p}",
                                  "the file is corrupt or was edited by hand") for p in problems[:20]])
    return infos


def encode_sessions(infos: list[vpb.VarManagerInfo], text: bool) -> bytes:
    """A MultiVarManagerInfo of `infos`, ordered by session id."""
    ordered = sorted(infos, key=lambda i: i.session_id)
    if text:
        multi = vpb.MultiVarManagerInfo()
        for info in ordered:
            multi.var_manager_info.add().CopyFrom(info)
        return text_format.MessageToString(multi).encode()
    # Note [multi without a copy]: a repeated message field is each element's bytes behind its
    # tag (field 1, length-delimited: 0x0a) and length, so the sessions are serialised as they
    # are instead of being copied into a MultiVarManagerInfo first; the bytes are the same
    out = bytearray()
    for info in ordered:
        data = info.SerializeToString(deterministic=True)
        out += b"\x0a" + _varint(len(data)) + data
    return bytes(out)


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _parse(data: bytes, path, info):
    file = display_path(path)
    if not data:
        raise InputError(Problem(Loc(file), "state file is empty", "write it with `vars plan --save-state`"))
    what = info.DESCRIPTOR.full_name        # deployer.VarManagerInfo or deployer.MultiVarManagerInfo
    if is_text_path(path):
        try:
            text_format.Parse(data.decode("utf-8"), info)
        except UnicodeDecodeError:
            raise InputError(Problem(Loc(file), "state file is not UTF-8 text",
                                     "binary states need the .pb suffix")) from None
        except text_format.ParseError as exc:
            line, col = exc.GetLine() or 0, exc.GetColumn() or 0
            raise InputError(Problem(Loc(file, line, col), f"not a {what}: {exc}",
                                     "the file is corrupt or not a VarManager state")) from None
    else:
        try:
            info.ParseFromString(data)
        except DecodeError:
            raise InputError(Problem(Loc(file), "corrupt state file: not a binary deployer.VarManagerInfo "
                                     "or MultiVarManagerInfo "
                                     f"({len(data)} bytes)", "text states need a .pbtxt suffix")) from None
    return info


def check_info(info: vpb.VarManagerInfo, policy=None) -> list[str]:
    """Consistency a VarManager's own output always has."""
    from engine.varmgr.policy_load import default_policy
    policy = policy or default_policy()
    known = {s.rt for s in policy.memory_types}
    r = info.var_resource
    desc_from_proto = _reader()
    out: list[str] = []
    if info.version > policy.memory.max_version:
        out.append(f"session version {info.version} is invalid (at most {policy.memory.max_version})")
    addresses = set()
    keys = set()
    for key, m in r.var_addr_mgr_map.items():          # one pass: each map access makes a message
        addresses.add(m.address)
        keys.add(key)
        if m.memory_type not in known:
            out.append(f"var_addr_mgr_map['{key}'] has unknown memory type {m.memory_type}")
    for logic, typ in r.var_offset_map.items():
        if logic not in addresses:
            out.append(f"var_offset_map address {logic} belongs to no variable")
        if typ not in known:
            out.append(f"var_offset_map address {logic} has unknown memory type {typ}")
    render = policy.var_key.render
    for name, td in r.cur_var_tensor_desc_map.items():
        desc = desc_from_proto(td)
        key = render(name, desc.format, desc.dtype)
        if key not in keys:
            out.append(f"variable '{name}' has a current descriptor but no address entry '{key}'")
    for typ in info.mem_resource_map:
        if typ not in known:
            out.append(f"mem_resource_map has unknown memory type {typ}")
    return out[:20]
