"""`output_reuse_input_mem_indexes`: GE's lenient parser (ParseOutputReuseInputMemIndexes,
std::stoul included) and CheckIoReuseAddrs of the v1 (DavinciModel) and v2
(ModelV2Executor) runtimes, both through CheckIoReuseAddrPairs."""
from __future__ import annotations

from typing import Any

from engine.core.errors import Collector, InputError, Loc, Problem
from engine.core.schema import Reader

ULONG_MAX = 2 ** 64 - 1
_C_SPACE = " \t\n\v\f\r"


def stoul(text: str) -> int | None:
    """std::stoul(text) in base 10: leading C white space and one sign are skipped, digits
    are read up to the first other character (the rest is ignored); no digit or a value
    above ULONG_MAX throws (None here)."""
    i, n = 0, len(text)
    while i < n and text[i] in _C_SPACE:
        i += 1
    negative = False
    if i < n and text[i] in "+-":
        negative = text[i] == "-"
        i += 1
    j = i
    while j < n and "0" <= text[j] <= "9":
        j += 1
    if j == i:
        return None
    value = int(text[i:j])
    if value > ULONG_MAX:
        return None
    return (-value) % (ULONG_MAX + 1) if negative else value


def parse_pairs(text: str, rt) -> tuple[list[list[int]], list[dict]]:
    """The (input, output) pairs, and each skipped segment with GE's reason for skipping it."""
    pairs, skipped = [], []
    start, n = 0, len(text)
    while start < n:
        end = text.find(rt.pair_separator, start)
        seg = text[start:] if end < 0 else text[start:end]
        start = n if end < 0 else end + 1
        if not seg:
            continue
        comma = seg.find(rt.index_separator)
        if comma < 0:
            skipped.append({"segment": seg, "why": f"no '{rt.index_separator}'"})
            continue
        a, b = seg[:comma], seg[comma + 1:]
        if "-" in a or "-" in b:
            skipped.append({"segment": seg, "why": "a negative index"})
            continue
        ia, ib = stoul(a), stoul(b)
        if ia is None or ib is None:
            skipped.append({"segment": seg, "why": "std::stoul fails (not a number, or out of range)"})
            continue
        pairs.append([ia, ib])
    return pairs, skipped


def check_pairs(pairs: list[list[int]], inputs: list, input_num: int, outputs: list, output_num: int,
                where: Loc) -> dict:
    """CheckIoReuseAddrPairs: the first pair out of range or with different addresses fails."""
    for a, b in pairs:
        if a >= input_num:
            return {"status": "PARAM_INVALID", "reason": f"input index {a} out of range, input_num is {input_num}", "pair": [a, b]}
        if b >= output_num:
            return {"status": "PARAM_INVALID", "reason": f"output index {b} out of range, output_num is {output_num}", "pair": [a, b]}
        if a >= len(inputs) or b >= len(outputs):
            side, k, have = ("input", a, len(inputs)) if a >= len(inputs) else ("output", b, len(outputs))
            raise InputError(Problem(where, f"pair [{a}, {b}] reads {side} address {k}, but only {have} are given",
                                     f"give {side} addresses for every index below the {side} count"))
        if inputs[a] != outputs[b]:
            return {"status": "PARAM_INVALID",
                    "reason": f"output {b} address {_show(outputs[b])} must be the same as input {a} address "
                              f"{_show(inputs[a])} ('{a},{b}' in output_reuse_input_mem_indexes)", "pair": [a, b]}
    return {"status": "SUCCESS"}


def _show(addr: Any) -> str:
    return "null" if addr is None else (hex(addr) if isinstance(addr, int) else str(addr))


def _addr(v: Any, loc: Loc, errors: Collector) -> Any:
    """An address: an integer, a number string (0x1000), null, or any other symbolic string."""
    if v is None or (isinstance(v, int) and not isinstance(v, bool)):
        return v
    if isinstance(v, str):
        try:
            return int(v, 0)
        except ValueError:
            return str(v)
    errors.error(loc, f"an address is an integer, a string or null, not {v!r}", "write 0x1000 or \"0x1000\"")
    return None


def _addrs(r: Reader, key: str, errors: Collector) -> list | None:
    v = r.get(key, (list, type(None)), None)
    if v is None:
        return None
    return [_addr(x, v.item_locs[i], errors) for i, x in enumerate(v)]


def io_reuse_case(path: str, rt) -> dict:
    from engine.runtime.casefile import read_case_file
    doc = read_case_file(path)
    errors = Collector()
    r = Reader(doc, "io-reuse case", errors, doc.loc)
    if "parse" in doc:
        text = r.get("parse", str, "")
        r.done()
        errors.check()
        pairs, skipped = parse_pairs(str(text), rt)
        return {"pairs": pairs, "skipped": skipped}
    runtime = r.get("runtime", str, "v2", required=True)
    attr = r.get("attr", (str, type(None)), None)
    if runtime == "v2":
        ins, outs = _addrs(r, "inputs", errors), _addrs(r, "outputs", errors)
        in_num = r.get("input_num", int)
        out_num = r.get("output_num", int)
    elif runtime == "v1":
        ins = _addrs(r, "input_blobs", errors) or _addrs(r, "input_tensors", errors) or []
        outs = _addrs(r, "output_blobs", errors) or _addrs(r, "output_tensors", errors) or []
        in_num = out_num = None
    else:
        errors.error(r.value_loc("runtime"), f"unknown runtime '{runtime}'", "expected: v1, v2")
        ins = outs = in_num = out_num = None
    r.done()
    errors.check()
    return check(str(runtime), attr, ins, in_num, outs, out_num, rt, doc.loc)


def check(runtime: str, attr: str | None, ins: list | None, in_num: int | None, outs: list | None,
          out_num: int | None, rt, where: Loc) -> dict:
    """CheckIoReuseAddrs (v1: empty inputs or outputs on either side pass; v2: null lists or
    a count of 0 pass), then CheckIoReuseAddrPairs.

    Note [v1 status]: both runtimes return CheckIoReuseAddrPairs' status through the same
    assertion macro, and ModelV2Executor's test asserts PARAM_INVALID; DavinciModel's tests only
    assert "not SUCCESS" (a comment there says FAILED), so v1 reports PARAM_INVALID too and
    the spec's FAILED is never produced."""
    pairs, _ = parse_pairs(attr or "", rt)
    if not pairs or ins is None or outs is None:
        return {"status": "SUCCESS"}
    in_num = len(ins) if in_num is None else in_num
    out_num = len(outs) if out_num is None else out_num
    if runtime == "v1" and (not ins or not outs) or in_num == 0 or out_num == 0:
        return {"status": "SUCCESS"}
    return check_pairs(pairs, ins, in_num, outs, out_num, where)


def io_reuse_args(attr: str | None, inputs: str | None, outputs: str | None, runtime: str, rt) -> dict:
    if attr is None:
        raise InputError(Problem(Loc("--attr"), "give a CASE file or --attr", 'e.g. --attr "0,0|1,1" --inputs 0x1000 --outputs 0x1000'))
    if inputs is None and outputs is None:
        pairs, skipped = parse_pairs(attr, rt)
        return {"pairs": pairs, "skipped": skipped}
    errors = Collector()
    ins = [_addr(x.strip(), Loc("--inputs"), errors) for x in inputs.split(",")] if inputs else []
    outs = [_addr(x.strip(), Loc("--outputs"), errors) for x in outputs.split(",")] if outputs else []
    errors.check()
    return check(runtime, attr, ins, None, outs, None, rt, Loc("--inputs"))
