"""GE's Mif (memory-in-flight bitmaps, runtime/v2/kernel/memory/mif.h) and the version-block
walks of version_blocks.h, over Python ints as the uint64 bit sets."""
from __future__ import annotations


def to_bit(stream: int) -> int:
    return 1 << stream


def to_all_bit(stream_num: int, stream: int) -> int:
    """BaseVersionBlocks::ToAllBit: every stream below `stream_num` but `stream`."""
    return (to_bit(stream_num) - 1) & ~to_bit(stream)


def bits_of(value: int) -> list[int]:
    """The set bit positions of a bit set, ascending."""
    out, i = [], 0
    while value:
        if value & 1:
            out.append(i)
        value >>= 1
        i += 1
    return out


class Mif:
    """Row `m` (the maintained stream) holds the streams that, as `m` sees it, still occupy the
    resource."""

    __slots__ = ("rows",)

    def __init__(self) -> None:
        self.rows: list[int] = []

    def reinit(self, stream_num: int) -> None:
        self.rows = [0] * stream_num

    def set(self, maintained: int, stream: int) -> None:
        self.rows[maintained] |= 1 << stream

    def set_all(self, stream: int) -> None:
        bit = 1 << stream
        rows = self.rows
        for i in range(len(rows)):
            rows[i] |= bit

    def set_maintained_all(self, maintained: int) -> None:
        self.rows[maintained] = (1 << len(self.rows)) - 1

    def clear(self, maintained: int, stream: int) -> None:
        self.rows[maintained] &= ~(1 << stream)

    def merge_cleared_from(self, src: int, dst: int) -> None:
        self.rows[dst] &= self.rows[src]

    def is_set(self, maintained: int, stream: int) -> bool:
        return bool(self.rows[maintained] & (1 << stream))

    def is_any_set(self, maintained: int) -> bool:
        return self.rows[maintained] != 0

    def render(self) -> list[list[int]]:
        return [bits_of(r) for r in self.rows]


class VersionEntry:
    """StreamedVersionBlock: a local-recycled block at the version it had, and the streams it
    was already sent to."""

    __slots__ = ("version", "block", "sent")

    def __init__(self, version: int, block, sent: int = 0) -> None:
        self.version = version
        self.block = block
        self.sent = sent


class LocalRecycleList:
    """An allocator's local_recycle_blocks_ (a std::list): insertion order, O(1) erase.

    Note [walks]: GetClearLocalRecycleBlocks(dst) walks with FindNext and
    GetClearLocalRecycleBlocks() with FindNextForAll; both drop an entry whose block has a newer
    version and one already sent to every other stream, and mark what they hand out as sent.
    FindNext skips (keeps) an entry already sent to dst; FindNextForAll hands it out again."""

    __slots__ = ("entries", "seq")

    def __init__(self) -> None:
        self.entries: dict[int, VersionEntry] = {}
        self.seq = 0

    def push(self, block) -> None:
        self.entries[self.seq] = VersionEntry(block.version, block)
        self.seq += 1

    def walk(self, own_stream: int, stream_num: int, dst: int | None, take: int | None) -> list:
        """Begin() + Next() `take` times (all when None); the blocks handed out, in order."""
        all_sent = ((1 << stream_num) - 1) & ~(1 << own_stream)         # ToAllBit
        dst_bit = all_sent if dst is None else 1 << dst
        out: list = []
        if take == 0:
            return out
        entries = self.entries
        dead = None
        for key, e in entries.items():
            block = e.block
            if e.version != block.version or e.sent == all_sent:
                if dead is None:
                    dead = [key]
                else:
                    dead.append(key)
                continue
            if dst is not None and e.sent & dst_bit:
                continue
            e.sent |= dst_bit
            out.append(block)
            if take is not None and len(out) >= take:
                break
        if dead is not None:
            for key in dead:
                del entries[key]
        return out
