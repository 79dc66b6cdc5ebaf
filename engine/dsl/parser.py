"""Parsing the rule DSL into the AST of engine/dsl/ast.py: memoised (below), the parsing itself
in engine/dsl/grammar.py (lark, syntax in grammars/dsl.lark), imported on the first real parse."""
from __future__ import annotations

from engine.core.errors import Loc
from engine.dsl.ast import INT64_MAX, MAX_DEPTH, Expr, Signature  # noqa: F401  (the limits: part of this API)


# Note [parse memo]: parsing is most of a pack's load time (lark builds its LALR tables,
# then ~400 expressions). `PARSED` maps (kind, text, file, line, col) to a finished parse;
# the pack loader fills it from, and saves it to, the compiled-pack cache
# (engine/pack/cache.py), so an unchanged pack is not parsed again. Only successful
# parses are kept, so errors are always reported afresh.
PARSED: dict[tuple, object] = {}


def _memo_key(kind: str, text: str, loc: Loc) -> tuple:
    return (kind, text, loc.file, loc.line, loc.col)


def parse_expr(text: str, loc: Loc = Loc("<memory>", 1, 1)) -> Expr:
    key = _memo_key("expr", text, loc)
    hit = PARSED.get(key)
    if hit is not None:
        return hit
    e = _parse_expr(text, loc)
    PARSED[key] = e
    return e


def _parse_expr(text: str, loc: Loc) -> Expr:
    from engine.dsl import grammar
    return grammar.parse_expr(text, loc)


def parse_signature(text: str, loc: Loc = Loc("<memory>", 1, 1)) -> Signature:
    key = _memo_key("sig", text, loc)
    hit = PARSED.get(key)
    if hit is not None:
        return hit
    from engine.dsl import grammar
    sig = grammar.parse_signature(text, loc)
    PARSED[key] = sig
    return sig
