"""YAML loading that keeps source positions.

`load_yaml(path)` returns plain dicts/lists/scalars where every mapping is a
`YMap` (a dict with `.loc` and per-key `.key_locs`/`.value_locs`), every list a
`YList` (with `.loc` and `.item_locs`) and every string a `YStr` (with `.loc`).
Each also records where it ends (`.end`; per key `.value_ends`, per item
`.item_ends`, since numbers and booleans cannot carry an attribute), so a
citation can quote exactly one entry (`span_of`, `item_span`). Duplicate keys are
errors (PyYAML silently keeps the last one).

Note [YAML limits]: a document may nest MAX_DEPTH collections (protobuf's parsers of GE
dumps stop at 100 too; the shipped packs and fixtures nest at most 10), and aliases may
expand it by MAX_ALIAS_NODES nodes in all (no shipped file uses one). Both are checked
while composing, before anything walks the document, so a deeply nested file is a
located error, not a RecursionError, and an alias bomb (`&a [*b, *b, ...]`, doubling at
each level) is refused at the alias that crosses the limit, in time linear in the text.
"""
from __future__ import annotations

import yaml

from engine.core.errors import Collector, InputError, Loc, Problem, display_path


MAX_DEPTH = 100
MAX_ALIAS_NODES = 100_000


class _LimitError(Exception):
    def __init__(self, mark, message: str, hint: str):
        super().__init__(message)
        self.mark, self.message, self.hint = mark, message, hint


class _Loader(yaml.SafeLoader):
    """The safe loader's composer, counting nesting and the nodes aliases add."""

    def __init__(self, text: str):
        super().__init__(text)
        self.depth = 0
        self.nodes = 0             # nodes composed, each alias counting as its anchor's size
        self.alias_nodes = 0
        self.sizes: dict[str, int] = {}

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            if event.anchor in self.anchors and event.anchor not in self.sizes:
                raise _LimitError(event.start_mark, *_recursive(event.anchor))
            size = self.sizes.get(event.anchor, 0)
            self.alias_nodes += size
            self.nodes += size
            if self.alias_nodes > MAX_ALIAS_NODES:
                raise _LimitError(event.start_mark, f"aliases expand the document by more than "
                                  f"{MAX_ALIAS_NODES:,} nodes", "write the repeated parts out, or use fewer aliases")
            return super().compose_node(parent, index)
        event = self.peek_event()
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise _LimitError(event.start_mark, f"YAML nested more than {MAX_DEPTH} levels deep",
                              "flatten the document")
        start = self.nodes
        self.nodes += 1
        node = super().compose_node(parent, index)
        self.depth -= 1
        anchor = getattr(event, "anchor", None)
        if anchor is not None:
            self.sizes[anchor] = self.nodes - start
        return node


class YStr(str):
    __slots__ = ("loc", "end")


class YMap(dict):
    loc: Loc
    end: Loc
    key_locs: dict
    value_locs: dict
    value_ends: dict


class YList(list):
    loc: Loc
    end: Loc
    item_locs: list
    item_ends: list


def _loc(file: str, mark) -> Loc:
    return Loc(file, mark.line + 1, mark.column + 1)


def load_yaml(path, text: str | None = None):
    """Parse a YAML file into located values; raise InputError on bad YAML."""
    file = display_path(path)
    if text is None:
        try:
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
        except OSError as exc:
            raise InputError(Problem(Loc(file), f"cannot read file: {exc.strerror}", "check the path")) from None
        except UnicodeDecodeError:
            raise InputError(Problem(Loc(file), "file is not UTF-8 text", "save it as UTF-8")) from None
    if _CLoader is not None:
        try:
            return _from_events(text, file)
        except _Fallback:
            pass                       # PyYAML composes it again, and says what is wrong
    loader = None
    try:
        loader = _Loader(text)         # the reader checks the characters here
        node = loader.get_single_node()
    except _LimitError as exc:
        raise InputError(Problem(_loc(file, exc.mark), exc.message, exc.hint)) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        loc = _loc(file, mark) if mark else Loc(file)
        msg = (exc.problem or exc.context or "malformed YAML").strip()
        raise InputError(Problem(loc, f"YAML syntax: {msg}", "check indentation, quoting and ':' after keys")) from None
    except yaml.reader.ReaderError as exc:
        pos = exc.position
        loc = Loc(file, text.count("\n", 0, pos) + 1, pos - text.rfind("\n", 0, pos))
        raise InputError(Problem(loc, f"YAML syntax: character U+{exc.character if isinstance(exc.character, int) else ord(exc.character):04X} is not allowed",
                                 "remove it, or write it as an escape inside double quotes")) from None
    except yaml.YAMLError as exc:
        raise InputError(Problem(Loc(file), f"YAML syntax: {exc}", "check the file")) from None
    finally:
        if loader is not None:
            loader.dispose()
    if node is None:
        empty = YMap()
        empty.loc, empty.key_locs, empty.value_locs = Loc(file, 1, 1), {}, {}
        empty.end, empty.value_ends = empty.loc, {}
        return empty
    errors = Collector()
    value = _convert(node, file, errors)
    errors.check()
    return value


_SCALARS = yaml.SafeLoader("")      # SafeConstructor's scalar converters, made once

_bool_tag = "tag:yaml.org,2002:bool"
_int_tag = "tag:yaml.org,2002:int"
_float_tag = "tag:yaml.org,2002:float"
_null_tag = "tag:yaml.org,2002:null"


def _end(file: str, node) -> Loc:
    """Where a node's text ends. Note [block ends]: PyYAML ends a block mapping or
    list at the next token (the following key, maybe lines of comments further on),
    so a block collection ends where its last entry does."""
    while isinstance(node, yaml.CollectionNode) and not node.flow_style and node.value:
        last = node.value[-1]
        node = last[1] if isinstance(node, yaml.MappingNode) else last
    return _loc(file, node.end_mark)


def _convert(node, file: str, errors: Collector):
    loc = _loc(file, node.start_mark)
    if isinstance(node, yaml.MappingNode):
        out = YMap()
        out.loc, out.key_locs, out.value_locs = loc, {}, {}
        out.end, out.value_ends = _end(file, node), {}
        for knode, vnode in node.value:
            key = _convert(knode, file, errors)
            if isinstance(key, (YMap, YList)):
                errors.error(_loc(file, knode.start_mark), "a mapping key must be a scalar", "use a plain name as key")
                continue
            if key in out:
                errors.error(_loc(file, knode.start_mark), f"duplicate key '{key}'",
                             f"'{key}' is already given at {out.key_locs[key]}")
                continue
            out[key] = _convert(vnode, file, errors)
            out.key_locs[key] = _loc(file, knode.start_mark)
            out.value_locs[key] = _loc(file, vnode.start_mark)
            out.value_ends[key] = _end(file, vnode)
        return out
    if isinstance(node, yaml.SequenceNode):
        out = YList()
        out.loc, out.item_locs, out.end, out.item_ends = loc, [], _end(file, node), []
        for item in node.value:
            out.append(_convert(item, file, errors))
            out.item_locs.append(_loc(file, item.start_mark))
            out.item_ends.append(_end(file, item))
        return out
    # scalar
    tag = node.tag
    if node.style is None:          # plain
        if tag == _bool_tag:
            return _SCALARS.construct_yaml_bool(node)
        if tag == _int_tag:
            return _SCALARS.construct_yaml_int(node)
        if tag == _float_tag:
            return _SCALARS.construct_yaml_float(node)
        if tag == _null_tag:
            return None
    s = YStr(node.value)
    s.loc, s.end = loc, _loc(file, node.end_mark)
    return s


# ---- the fast path: libyaml's events, composed here ----------------------------------------
# Note [libyaml events]: libyaml's parser (C) makes the events ~50x faster than PyYAML's pure
# Python scanner and parser, but its composer recurses in C with no bound on nesting. So the
# events are composed here, without recursion, into the same located values as `_convert`
# (tests/test_yamlloc.py compares the two on every shipped YAML file), checking the same
# limits (Note [YAML limits]). Anything unusual — a syntax error, a second document, an
# undefined or recursive alias — falls back to PyYAML's path, which reports it as before.
try:
    _CLoader = yaml.CSafeLoader
except AttributeError:          # PyYAML built without libyaml
    _CLoader = None
_RESOLVER = yaml.resolver.Resolver()


class _Fallback(Exception):
    pass


def _recursive(anchor: str) -> tuple[str, str]:
    return (f"alias '*{anchor}' is inside the collection it names (a recursive structure)",
            "a graph or pack is a tree: write the repeated part out")


def _scalar(ev, file: str):
    loc, end = _loc(file, ev.start_mark), _loc(file, ev.end_mark)
    tag = ev.tag
    if tag is None or tag == "!":
        tag = _RESOLVER.resolve(yaml.ScalarNode, ev.value, ev.implicit)
    if not ev.style:                # plain ("" from libyaml)
        if tag in (_bool_tag, _int_tag, _float_tag, _null_tag):
            node = yaml.ScalarNode(tag, ev.value)
            if tag == _bool_tag:
                return _SCALARS.construct_yaml_bool(node), loc, end
            if tag == _int_tag:
                return _SCALARS.construct_yaml_int(node), loc, end
            if tag == _float_tag:
                return _SCALARS.construct_yaml_float(node), loc, end
            return None, loc, end
    out = YStr(ev.value)
    out.loc, out.end = loc, end
    return out, loc, end


def _copy(value):
    """A fresh copy of a composed value (an alias gets its own, as `_convert` makes)."""
    if isinstance(value, YMap):
        out = YMap((k, _copy(v)) for k, v in value.items())
        out.loc, out.end = value.loc, value.end
        out.key_locs, out.value_locs, out.value_ends = dict(value.key_locs), dict(value.value_locs), dict(value.value_ends)
        return out
    if isinstance(value, YList):
        out = YList(_copy(v) for v in value)
        out.loc, out.end, out.item_locs, out.item_ends = value.loc, value.end, list(value.item_locs), list(value.item_ends)
        return out
    return value


def _from_events(text: str, file: str):
    E = yaml.events
    errors = Collector()
    anchors: dict[str, tuple] = {}          # anchor → (value, start, end, node count), once composed
    seen: set[str] = set()                  # anchors met so far (composed or still open)
    stack: list[list] = []                  # [container, start, flow, anchor, count at start, pending key, key loc, last end]
    nodes = alias_nodes = 0
    root = None
    documents = 0
    try:
        events = yaml.parse(text, Loader=_CLoader)
        for ev in events:
            cls = type(ev)
            if cls is E.DocumentStartEvent:
                documents += 1
                if documents > 1:
                    raise _Fallback()
                continue
            if cls in (E.StreamStartEvent, E.StreamEndEvent, E.DocumentEndEvent):
                continue
            anchor = getattr(ev, "anchor", None)
            if anchor is not None and cls is not E.AliasEvent:
                if anchor in seen:
                    raise _Fallback()              # a duplicate anchor: PyYAML's error
                seen.add(anchor)
            if cls is E.MappingStartEvent or cls is E.SequenceStartEvent or cls is E.ScalarEvent:
                if len(stack) + 1 > MAX_DEPTH:     # every node counts, as in _Loader
                    raise InputError(Problem(_loc(file, ev.start_mark), f"YAML nested more than {MAX_DEPTH} levels deep",
                                             "flatten the document"))
            if cls is E.MappingStartEvent or cls is E.SequenceStartEvent:
                box = YMap() if cls is E.MappingStartEvent else YList()
                start = _loc(file, ev.start_mark)
                box.loc = start
                if cls is E.MappingStartEvent:
                    box.key_locs, box.value_locs, box.value_ends = {}, {}, {}
                else:
                    box.item_locs, box.item_ends = [], []
                stack.append([box, start, bool(ev.flow_style), ev.anchor, nodes, _NO_KEY, None, None])
                nodes += 1
                continue
            if cls is E.MappingEndEvent or cls is E.SequenceEndEvent:
                box, start, flow, anchor, first, _, _, last_end = stack.pop()
                end = last_end if (not flow and last_end is not None) else _loc(file, ev.end_mark)
                box.end = end
                if anchor is not None:
                    anchors[anchor] = (box, start, end, nodes - first)
                value, vstart, vend = box, start, end
            elif cls is E.ScalarEvent:
                value, vstart, vend = _scalar(ev, file)
                if ev.anchor is not None:
                    anchors[ev.anchor] = (value, vstart, vend, 1)
                nodes += 1
            elif cls is E.AliasEvent:
                found = anchors.get(ev.anchor)
                if found is None:
                    if ev.anchor in seen:          # its own collection is still open
                        raise InputError(Problem(_loc(file, ev.start_mark), *_recursive(ev.anchor)))
                    raise _Fallback()              # undefined: PyYAML's error
                value, vstart, vend, size = found
                alias_nodes += size
                nodes += size
                if alias_nodes > MAX_ALIAS_NODES:
                    raise InputError(Problem(_loc(file, ev.start_mark), f"aliases expand the document by more than "
                                             f"{MAX_ALIAS_NODES:,} nodes", "write the repeated parts out, or use fewer aliases"))
                value = _copy(value)
            else:
                raise _Fallback()
            # hand the finished value to the open collection
            if not stack:
                root = value
                continue
            top = stack[-1]
            box = top[0]
            if isinstance(box, YList):
                box.append(value)
                box.item_locs.append(vstart)
                box.item_ends.append(vend)
                top[7] = vend
            elif top[5] is _NO_KEY:
                top[5], top[6] = value, vstart
            else:
                key, kloc = top[5], top[6]
                top[5] = _NO_KEY
                top[7] = vend
                if isinstance(key, (YMap, YList)):
                    errors.error(kloc, "a mapping key must be a scalar", "use a plain name as key")
                elif key in box:
                    errors.error(kloc, f"duplicate key '{key}'", f"'{key}' is already given at {box.key_locs[key]}")
                else:
                    box[key] = value
                    box.key_locs[key] = kloc
                    box.value_locs[key] = vstart
                    box.value_ends[key] = vend
    except yaml.YAMLError:
        raise _Fallback() from None
    if root is None:
        empty = YMap()
        empty.loc, empty.key_locs, empty.value_locs = Loc(file, 1, 1), {}, {}
        empty.end, empty.value_ends = empty.loc, {}
        return empty
    errors.check()
    return root


_NO_KEY = object()


def loc_of(value, default: Loc) -> Loc:
    """The source position of a located value (or `default`)."""
    return getattr(value, "loc", default)



def span_of(mapping, key, default: Loc) -> tuple[Loc, Loc]:
    """(start, end) of one `key: value` entry of a located mapping (`default` when unknown)."""
    start = getattr(mapping, "key_locs", {}).get(key, default)
    return start, getattr(mapping, "value_ends", {}).get(key, start)


def item_span(items, i: int, default: Loc) -> tuple[Loc, Loc]:
    """(start, end) of item `i` of a located list (`default` when unknown)."""
    locs, ends = getattr(items, "item_locs", []), getattr(items, "item_ends", [])
    start = locs[i] if 0 <= i < len(locs) else default
    return start, ends[i] if 0 <= i < len(ends) else start
