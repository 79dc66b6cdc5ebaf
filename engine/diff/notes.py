"""CHANGES.md entries as text for the diff page: the few Markdown forms change notes
use — paragraphs, numbered and bulleted items (nested by indentation, continued by
indented lines), indented code blocks, `code` and **bold** — turned into plain
blocks the template prints escaped. Anything else stays as it was written.
"""
from __future__ import annotations

import re

_ITEM = re.compile(r"( *)(\d+\.|[-*+]) +(.*)")
_INLINE = re.compile(r"`([^`]+)`|\*\*(.+?)\*\*")


def inline(text: str) -> list[dict]:
    """[{"text", "kind": "" | "code" | "b"}]: `code` and **bold** spans apart from plain text."""
    parts, at = [], 0
    for m in _INLINE.finditer(text):
        if m.start() > at:
            parts.append({"text": text[at:m.start()], "kind": ""})
        parts.append({"text": m[1], "kind": "code"} if m[1] is not None else {"text": m[2], "kind": "b"})
        at = m.end()
    if at < len(text):
        parts.append({"text": text[at:], "kind": ""})
    return parts


def note_blocks(text: str) -> list[dict]:
    """Blocks: {"kind": "p" | "h", "parts"}, {"kind": "item", "marker", "level", "parts"},
    {"kind": "code", "text"}."""
    blocks: list[dict] = []
    item_indent: list[int] = []          # content indents of the open items, outermost first
    cur: dict | None = None

    def flush() -> None:
        nonlocal cur
        if cur is not None:
            cur["parts"] = inline(" ".join(cur.pop("lines")))
            blocks.append(cur)
            cur = None

    for line in text.splitlines():
        if not line.strip():
            flush()
            continue
        indent = len(line) - len(line.lstrip(" "))
        m = _ITEM.fullmatch(line)
        if m:
            flush()
            while item_indent and indent < item_indent[-1]:
                item_indent.pop()
            level = len(item_indent)
            item_indent.append(len(m[1]) + len(m[2]) + 1)
            cur = {"kind": "item", "marker": m[2], "level": level, "lines": [m[3].strip()]}
            continue
        continues = cur is not None and (cur["kind"] == "p" or (item_indent and indent >= item_indent[-1]))
        if continues and not line.lstrip().startswith("#"):
            cur["lines"].append(line.strip())
            continue
        if line.startswith("#"):
            flush()
            item_indent.clear()
            blocks.append({"kind": "h", "parts": inline(line.lstrip("#").strip())})
            continue
        if indent >= 4 and not item_indent:
            flush()
            if blocks and blocks[-1]["kind"] == "code":
                blocks[-1]["text"] += "\n" + line[4:]
            else:
                blocks.append({"kind": "code", "text": line[4:]})
            continue
        flush()
        item_indent.clear()
        cur = {"kind": "p", "level": 0, "lines": [line.strip()]}
    flush()
    return blocks
