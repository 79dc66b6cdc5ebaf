"""Where a binary protobuf message first breaks: a byte offset for the error message.

protobuf's parser says only "Error parsing message"; `first_error` walks the wire format
itself, guided by the message's descriptor (submessages are entered, proto3 strings
checked as UTF-8), with its own stack — no recursion — and returns the offset of the
first field that cannot be read and what is wrong with it.
"""
from __future__ import annotations

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError

from engine.core.errors import InputError, Loc, Problem

MAX_NESTING = 100          # protobuf's default recursion limit, which its parser enforces
MAX_FIELD_NUMBER = 2 ** 29 - 1   # protobuf's largest field number; a key above it is corrupt


def read_varint(data: bytes, pos: int, end: int) -> tuple[int | None, int]:
    """(value, position after it), or (None, position reached) for a varint cut short or too long."""
    value = shift = 0
    while pos < end and shift < 70:
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
    return None, pos


def encode_varint(n: int) -> bytes:
    """The varint encoding of `n` (an int64 below zero as its 64-bit two's complement)."""
    n &= 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


_LENGTH_TYPES = {FieldDescriptor.TYPE_STRING, FieldDescriptor.TYPE_BYTES, FieldDescriptor.TYPE_MESSAGE,
                 FieldDescriptor.TYPE_GROUP}
_FIXED = {FieldDescriptor.TYPE_FIXED32: 4, FieldDescriptor.TYPE_SFIXED32: 4, FieldDescriptor.TYPE_FLOAT: 4,
          FieldDescriptor.TYPE_FIXED64: 8, FieldDescriptor.TYPE_SFIXED64: 8, FieldDescriptor.TYPE_DOUBLE: 8}


def _packed_error(data: bytes, pos: int, end: int, ftype: int) -> int | None:
    """Where a packed run of scalars breaks (a varint or fixed value past its end), or None."""
    if ftype in _FIXED:
        size = _FIXED[ftype]
        return None if (end - pos) % size == 0 else end - (end - pos) % size
    while pos < end:
        start = pos
        value, pos = read_varint(data, pos, end)
        if value is None:
            return start
    return None


def first_error(data: bytes, desc: Descriptor) -> tuple[int, str] | None:
    """(offset, problem) of the first unreadable field of `data` as a `desc`, or None."""
    # a frame: (end offset, descriptor or None for unknown bytes, group number or 0)
    stack: list[tuple[int, Descriptor | None, int]] = [(len(data), desc, 0)]
    pos = 0
    while True:
        end, d, group = stack[-1]
        if pos >= end:
            if group:
                return pos, f"group {group} is not closed"
            if len(stack) == 1:
                return None
            stack.pop()
            continue
        start = pos
        key, pos = read_varint(data, pos, end)
        if key is None:
            return start, "truncated field key"
        num, wt = key >> 3, key & 7
        field = d.fields_by_number.get(num) if d is not None else None
        name = f"field {num}" + (f" ('{field.name}' of {d.name})" if field is not None else "")
        if num == 0:
            return start, "field number 0"
        if num > MAX_FIELD_NUMBER:
            return start, f"field number {num} is above protobuf's largest ({MAX_FIELD_NUMBER})"
        if wt == 0:
            value, pos = read_varint(data, pos, end)
            if value is None:
                return start, f"{name}: truncated varint"
        elif wt in (1, 5):
            pos += 8 if wt == 1 else 4
            if pos > end:
                return start, f"{name}: truncated {64 if wt == 1 else 32}-bit value"
        elif wt == 2:
            n, body = read_varint(data, pos, end)
            if n is None:
                return start, f"{name}: truncated length"
            if body + n > end:
                return start, f"{name}: length {n} runs past the end of its message (byte {end})"
            pos = body + n
            if field is not None and field.type == FieldDescriptor.TYPE_MESSAGE:
                if len(stack) > MAX_NESTING:
                    return start, f"messages nested more than {MAX_NESTING} levels deep"
                stack.append((pos, field.message_type, 0))
                pos = body
            elif field is not None and field.type == FieldDescriptor.TYPE_STRING:
                try:
                    data[body:pos].decode("utf-8")
                except UnicodeDecodeError as exc:
                    return body + exc.start, f"{name}: string is not valid UTF-8"
            elif field is not None and field.is_repeated and field.type not in _LENGTH_TYPES:
                bad = _packed_error(data, body, pos, field.type)
                if bad is not None:
                    return bad, f"{name}: packed values cut short"
        elif wt == 3:
            if len(stack) > MAX_NESTING:
                return start, f"groups nested more than {MAX_NESTING} levels deep"
            stack.append((end, None, num))
        elif wt == 4:
            if group != num:
                return start, f"end of group {num} without its start"
            stack.pop()
        else:
            return start, f"invalid wire type {wt}"


def parse_binary(msg, data: bytes, file: str, what: str, hint: str):
    """`msg` parsed from `data`, or an InputError `WHAT at byte N: PROBLEM (protobuf's words)`
    located at the first field that cannot be read (first_error), else `WHAT (protobuf's words;
    no field is out of place)`."""
    try:
        msg.ParseFromString(data)
    except DecodeError as exc:
        where = first_error(data, msg.DESCRIPTOR)
        at = f"at byte {where[0]}: {where[1]} ({exc})" if where else f"({exc}; no field is out of place)"
        raise InputError(Problem(Loc(file), f"{what} {at}", hint)) from None
    return msg
