"""JSON text of large report values, byte for byte as the json module writes it, faster.

`indented(value, indent)` is `json.dumps(value, indent=indent, ensure_ascii=False) + "\\n"`
as UTF-8. Note [indented JSON]: with an indent the json module uses its pure-Python
encoder, a generator per container, and joins one list of every token: a SARIF log of
100k nodes (100 MB) took 6.3 s and 650 MB above the log. This writer walks the value
once, puts strings through the json module's own (C) string encoder, and passes its text
to the output every few thousand tokens, as UTF-8: 1.8 s, and no text of the whole is
held. As in the json module: empty containers are `{}`/`[]`, items are followed by `,`,
keys by `: `, tuples are lists, non-string keys are written as their JSON text in quotes.
"""
from __future__ import annotations

import io
import json
from json.encoder import encode_basestring

_FLUSH = 4096        # tokens held before they go to the output


def indented(value, indent: int = 1) -> bytes:
    out = io.BytesIO()
    parts: list[str] = []
    enc = encode_basestring
    add = parts.append

    def emit(v, depth: int) -> None:
        if isinstance(v, dict):
            if not v:
                add("{}")
                return
            inner = "\n" + " " * (indent * (depth + 1))
            sep = "{" + inner
            for k, x in v.items():
                add(sep + (enc(k) if type(k) is str else _key(k)) + ": ")
                t = type(x)
                if t is str:
                    add(enc(x))
                elif t is int:
                    add(int.__repr__(x))
                else:
                    emit(x, depth + 1)
                sep = "," + inner
            add("\n" + " " * (indent * depth) + "}")
        elif isinstance(v, (list, tuple)):
            if not v:
                add("[]")
                return
            inner = "\n" + " " * (indent * (depth + 1))
            sep = "[" + inner
            for x in v:
                t = type(x)
                if t is str:
                    add(sep + enc(x))
                elif t is int:
                    add(sep + int.__repr__(x))
                else:
                    add(sep)
                    emit(x, depth + 1)
                sep = "," + inner
            if len(parts) > _FLUSH:
                out.write("".join(parts).encode())
                parts.clear()
            add("\n" + " " * (indent * depth) + "]")
        else:
            add(_scalar(v))

    emit(value, 0)
    add("\n")
    out.write("".join(parts).encode())
    return out.getvalue()


def _scalar(v) -> str:
    if isinstance(v, str):
        return encode_basestring(v)
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, (int, float)):
        return json.dumps(v)        # int.__repr__, or the json module's float text (NaN, Infinity)
    raise TypeError(f"Object of type {type(v).__name__} is not JSON serializable")


def _key(k) -> str:
    if isinstance(k, str):
        return encode_basestring(k)
    if k is None or isinstance(k, (bool, int, float)):
        return encode_basestring(_scalar(k))
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(k).__name__}")
