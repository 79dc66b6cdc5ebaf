"""The rule DSL's lark parser (syntax in grammars/dsl.lark) and the transformer into the AST of
engine/dsl/ast.py. engine/dsl/parser.py is the way in: it memoises parses, so this module (and
lark) is imported only when something is parsed for real (Note [parse memo])."""
from __future__ import annotations

from functools import lru_cache

from lark import Lark, Transformer, Tree, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from engine.core.errors import InputError, Loc, Problem
from engine.core.resources import grammar_path
from engine.dsl.ast import (INT64_MAX, MAX_DEPTH, Binary, Call, Comprehension, Cond, Const, Expr, Field, Index, IsClass, Let,
    ListLit, Paren, Port, Quant, Signature, Unary, Var)


# ---- parsing ----------------------------------------------------------------
@lru_cache(maxsize=1)
def _parser() -> Lark:
    text = grammar_path("dsl.lark").read_text(encoding="utf-8")
    # Note [basic lexer]: the contextual lexer would read a misplaced keyword
    # ("a and and b") as a name; the basic lexer keeps keywords reserved.
    return Lark(text, start=["start", "sig_start"], parser="lalr", lexer="basic",
                propagate_positions=True, maybe_placeholders=True)


def _too_deep(tree: Tree) -> Tree | None:
    """The first subtree nested more than MAX_DEPTH levels, or None (iteratively)."""
    stack = [(tree, 0)]
    while stack:
        t, depth = stack.pop()
        if depth > MAX_DEPTH:
            return t
        stack.extend((c, depth + 1) for c in t.children if isinstance(c, Tree))
    return None


class _Build(Transformer):
    """One method per grammar rule alias; builds the AST with source positions."""

    def __init__(self, base: Loc):
        super().__init__()
        self.base = base
        self.problems: list[Problem] = []      # raised after the transform (not as lark VisitErrors)

    def _loc(self, meta_or_tok) -> Loc:
        line = getattr(meta_or_tok, "line", 1) or 1
        col = getattr(meta_or_tok, "column", 1) or 1
        return self.base.shifted(line - 1, col - 1)

    @v_args(meta=True)
    def start(self, meta, c):
        return c[0]

    @v_args(meta=True)
    def sig_start(self, meta, c):
        return c[0]

    @v_args(meta=True)
    def cond(self, meta, c):
        return Cond(self._loc(meta), c[0], c[1], c[2])

    @v_args(meta=True)
    def let(self, meta, c):
        return Let(self._loc(meta), str(c[0]), c[1], c[2])

    @v_args(meta=True)
    def or_(self, meta, c):
        return Binary(self._loc(meta), "or", c[0], c[1])

    @v_args(meta=True)
    def and_(self, meta, c):
        return Binary(self._loc(meta), "and", c[0], c[1])

    @v_args(meta=True)
    def not_(self, meta, c):
        return Unary(self._loc(meta), "not", c[0])

    @v_args(meta=True)
    def neg(self, meta, c):
        return Unary(self._loc(meta), "-", c[1])

    @v_args(meta=True)
    def compare(self, meta, c):
        return Binary(self._loc(meta), str(c[1]), c[0], c[2])

    @v_args(meta=True)
    def in_(self, meta, c):
        return Binary(self._loc(meta), "in", c[0], c[1])

    @v_args(meta=True)
    def not_in(self, meta, c):
        return Binary(self._loc(meta), "not in", c[0], c[1])

    @v_args(meta=True)
    def is_class(self, meta, c):
        return IsClass(self._loc(meta), c[0], str(c[1]), False)

    @v_args(meta=True)
    def is_not_class(self, meta, c):
        return IsClass(self._loc(meta), c[0], str(c[1]), True)

    @v_args(meta=True)
    def arith(self, meta, c):
        return Binary(self._loc(meta), str(c[1]), c[0], c[2])

    @v_args(meta=True)
    def field(self, meta, c):
        return Field(self._loc(c[1]), c[0], str(c[1]))

    @v_args(meta=True)
    def index(self, meta, c):
        return Index(self._loc(meta), c[0], c[1])

    @v_args(meta=True)
    def call(self, meta, c):
        args = tuple(a for a in c[1:] if a is not None)
        return Call(self._loc(meta), str(c[0]), args)

    def _quant(self, kind, meta, c):
        return Quant(self._loc(meta), kind, str(c[0]), c[1], c[2])

    @v_args(meta=True)
    def any_(self, meta, c):
        return self._quant("any", meta, c)

    @v_args(meta=True)
    def all_(self, meta, c):
        return self._quant("all", meta, c)

    @v_args(meta=True)
    def select(self, meta, c):
        return self._quant("select", meta, c)

    @v_args(meta=True)
    def var(self, meta, c):
        return Var(self._loc(meta), str(c[0]))

    @v_args(meta=True)
    def int(self, meta, c):
        digits = str(c[0])
        if len(digits) > 19 or int(digits) > INT64_MAX:
            shown = digits if len(digits) <= 24 else f"{digits[:10]}...{digits[-4:]} ({len(digits)} digits)"
            self.problems.append(Problem(self._loc(meta), f"integer {shown} is out of range",
                                         f"integers are GE int64 values (at most {INT64_MAX})"))
            return Const(self._loc(meta), 0)
        return Const(self._loc(meta), int(digits))

    @v_args(meta=True)
    def string(self, meta, c):
        raw = str(c[0])[1:-1]
        out, i = [], 0
        while i < len(raw):
            if raw[i] == "\\" and i + 1 < len(raw):
                out.append(raw[i + 1])
                i += 2
            else:
                out.append(raw[i])
                i += 1
        return Const(self._loc(meta), "".join(out))

    @v_args(meta=True)
    def true(self, meta, c):
        return Const(self._loc(meta), True)

    @v_args(meta=True)
    def false(self, meta, c):
        return Const(self._loc(meta), False)

    @v_args(meta=True)
    def none(self, meta, c):
        return Const(self._loc(meta), None)

    @v_args(meta=True)
    def list(self, meta, c):
        return ListLit(self._loc(meta), tuple(x for x in c if x is not None))

    @v_args(meta=True)
    def comprehension(self, meta, c):
        return Comprehension(self._loc(meta), c[0], str(c[1]), c[2], c[3])

    @v_args(meta=True)
    def paren(self, meta, c):
        return Paren(self._loc(meta), c[0])

    @v_args(meta=True)
    def signature(self, meta, c):
        return Signature(str(c[0]), c[1], c[2], self._loc(meta))

    def ports(self, c):
        return tuple(p for p in c if p is not None)

    def port(self, c):
        return Port(str(c[0]), "".join(str(m) for m in c[1:]))


_TOKEN_NAMES = {"NAME": "a name", "INT": "a number", "STRING": "a string", "CMP": "a comparison",
                "LPAR": "'('", "RPAR": "')'", "COMMA": "','", "COLON": "':'", "DOT": "'.'",
                "LSQB": "'['", "RSQB": "']'", "PLUS": "'+'", "MINUS": "'-'", "MARK": "'!', '?' or '*'",
                "__ANON_0": "'->'", "$END": "end of text", "RARROW": "'->'"}


def _syntax_error(exc: UnexpectedInput, text: str, loc: Loc, what: str) -> InputError:
    line = getattr(exc, "line", 1) or 1
    col = getattr(exc, "column", 1) or 1
    if isinstance(exc, UnexpectedEOF) or (isinstance(exc, UnexpectedToken) and exc.token.type == "$END"):
        line = text.count("\n") + 1
        col = len(text.rsplit("\n", 1)[-1]) + 1
        got = "end of text"
    elif isinstance(exc, UnexpectedToken):
        got = f"'{exc.token}'"
    elif isinstance(exc, UnexpectedCharacters):
        got = f"character '{text[exc.pos_in_stream]}'" if exc.pos_in_stream < len(text) else "end of text"
    else:
        got = "input"
    expected = sorted({_TOKEN_NAMES.get(t, f"'{t.lower()}'" if t.isalpha() else t)
                       for t in getattr(exc, "expected", None) or getattr(exc, "allowed", None) or ()})
    hint = f"expected {', '.join(expected[:8])}" if expected else f"check the {what} syntax"
    return InputError(Problem(loc.shifted(line - 1, col - 1), f"{what} syntax: unexpected {got}", hint))


def parse_expr(text: str, loc: Loc) -> Expr:
    try:
        tree = _parser().parse(text, start="start")
    except UnexpectedInput as exc:
        raise _syntax_error(exc, text, loc, "expression") from None
    build = _Build(loc)
    deep = _too_deep(tree)
    if deep is not None:
        raise InputError(Problem(build._loc(deep.meta), f"expression nested more than {MAX_DEPTH} levels deep",
                                 "split it: name parts with `let x = ...;` or a pack function"))
    e = build.transform(tree)
    if build.problems:
        raise InputError(build.problems)
    return e


def parse_signature(text: str, loc: Loc) -> Signature:
    try:
        tree = _parser().parse(text, start="sig_start")
    except UnexpectedInput as exc:
        raise _syntax_error(exc, text, loc, "signature") from None
    return _Build(loc).transform(tree)
