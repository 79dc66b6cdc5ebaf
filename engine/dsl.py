"""The rule DSL: parse (lark grammar in grammars/dsl.lark), print back, compile.

`parse_expr(text, loc)` returns an `Expr` whose `str()` is its canonical source
(the shipped pack is written canonically, and a test checks `str(parse(t)) == t`).
`Compiler` turns expressions into Python functions over the graph model: a rule
is evaluated hundreds of thousands of times on large graphs, so it is compiled
once rather than interpreted.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable

from lark import Lark, Transformer, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from .errors import Collector, InputError, Loc, Problem, did_you_mean
from .resources import grammar_path


# ---- AST ------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Expr:
    loc: Loc = field(compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Var(Expr):
    name: str = ""

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class Const(Expr):
    value: Any = None

    def __str__(self) -> str:
        v = self.value
        if v is None:
            return "none"
        if v is True:
            return "true"
        if v is False:
            return "false"
        if isinstance(v, str):
            return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
        return str(v)


@dataclass(frozen=True, slots=True)
class Call(Expr):
    fn: str = ""
    args: tuple = ()

    def __str__(self) -> str:
        return f"{self.fn}({', '.join(map(str, self.args))})"


@dataclass(frozen=True, slots=True)
class Field(Expr):
    obj: Expr = None
    name: str = ""

    def __str__(self) -> str:
        return f"{self.obj}.{self.name}"


@dataclass(frozen=True, slots=True)
class Index(Expr):
    obj: Expr = None
    index: Expr = None

    def __str__(self) -> str:
        return f"{self.obj}[{self.index}]"


@dataclass(frozen=True, slots=True)
class Unary(Expr):
    op: str = ""          # "not" | "-"
    operand: Expr = None

    def __str__(self) -> str:
        return f"not {self.operand}" if self.op == "not" else f"-{self.operand}"


@dataclass(frozen=True, slots=True)
class Binary(Expr):
    op: str = ""          # and or == != < <= > >= + - in "not in"
    left: Expr = None
    right: Expr = None

    def __str__(self) -> str:
        return f"{self.left} {self.op} {self.right}"


@dataclass(frozen=True, slots=True)
class IsClass(Expr):
    subject: Expr = None
    cls: str = ""
    negated: bool = False

    def __str__(self) -> str:
        return f"{self.subject} is {'not ' if self.negated else ''}{self.cls}"


@dataclass(frozen=True, slots=True)
class Cond(Expr):
    test: Expr = None
    then: Expr = None
    other: Expr = None

    def __str__(self) -> str:
        return f"if {self.test} then {self.then} else {self.other}"


@dataclass(frozen=True, slots=True)
class Let(Expr):
    var: str = ""
    value: Expr = None
    body: Expr = None

    def __str__(self) -> str:
        return f"let {self.var} = {self.value}; {self.body}"


@dataclass(frozen=True, slots=True)
class ListLit(Expr):
    items: tuple = ()

    def __str__(self) -> str:
        return "[" + ", ".join(map(str, self.items)) + "]"


@dataclass(frozen=True, slots=True)
class Quant(Expr):
    kind: str = ""        # any | all | select
    var: str = ""
    seq: Expr = None
    body: Expr = None

    def __str__(self) -> str:
        return f"{self.kind}({self.var} in {self.seq} where {self.body})"


@dataclass(frozen=True, slots=True)
class Comprehension(Expr):
    item: Expr = None
    var: str = ""
    seq: Expr = None
    cond: Expr | None = None

    def __str__(self) -> str:
        tail = f" if {self.cond}" if self.cond is not None else ""
        return f"[{self.item} for {self.var} in {self.seq}{tail}]"


@dataclass(frozen=True, slots=True)
class Paren(Expr):
    inner: Expr = None

    def __str__(self) -> str:
        return f"({self.inner})"


@dataclass(frozen=True, slots=True)
class Port:
    name: str
    marks: str = ""       # "!" written in place, "?" optional, "*" dynamic

    def __str__(self) -> str:
        return self.name + self.marks

    @property
    def mutated(self) -> bool:
        return "!" in self.marks


@dataclass(frozen=True, slots=True)
class Signature:
    op: str
    inputs: tuple[Port, ...]
    outputs: tuple[Port, ...]
    loc: Loc = field(compare=False, repr=False, default=Loc("<memory>"))

    def __str__(self) -> str:
        return f"{self.op}({', '.join(map(str, self.inputs))}) -> ({', '.join(map(str, self.outputs))})"

    def children(self):
        return ()


# ---- parsing ----------------------------------------------------------------
@lru_cache(maxsize=1)
def _parser() -> Lark:
    text = grammar_path("dsl.lark").read_text(encoding="utf-8")
    # Note [basic lexer]: the contextual lexer would read a misplaced keyword
    # ("a and and b") as a name; the basic lexer keeps keywords reserved.
    return Lark(text, start=["start", "sig_start"], parser="lalr", lexer="basic",
                propagate_positions=True, maybe_placeholders=True)


class _Build(Transformer):
    """One method per grammar rule alias; builds the AST with source positions."""

    def __init__(self, base: Loc):
        super().__init__()
        self.base = base

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
        return Const(self._loc(meta), int(c[0]))

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


def parse_expr(text: str, loc: Loc = Loc("<memory>", 1, 1)) -> Expr:
    try:
        tree = _parser().parse(text, start="start")
    except UnexpectedInput as exc:
        raise _syntax_error(exc, text, loc, "expression") from None
    return _Build(loc).transform(tree)


def parse_signature(text: str, loc: Loc = Loc("<memory>", 1, 1)) -> Signature:
    try:
        tree = _parser().parse(text, start="sig_start")
    except UnexpectedInput as exc:
        raise _syntax_error(exc, text, loc, "signature") from None
    return _Build(loc).transform(tree)


# ---- walking ------------------------------------------------------------------
def children(e: Expr) -> tuple:
    if isinstance(e, Call):
        return e.args
    if isinstance(e, Field):
        return (e.obj,)
    if isinstance(e, Index):
        return (e.obj, e.index)
    if isinstance(e, Unary):
        return (e.operand,)
    if isinstance(e, Binary):
        return (e.left, e.right)
    if isinstance(e, IsClass):
        return (e.subject,)
    if isinstance(e, Cond):
        return (e.test, e.then, e.other)
    if isinstance(e, ListLit):
        return e.items
    if isinstance(e, Let):
        return (e.value, e.body)
    if isinstance(e, Comprehension):
        return tuple(x for x in (e.item, e.seq, e.cond) if x is not None)
    if isinstance(e, Quant):
        return (e.seq, e.body)
    if isinstance(e, Paren):
        return (e.inner,)
    return ()


def walk(e: Expr):
    yield e
    for c in children(e):
        yield from walk(c)


# ---- compiling ----------------------------------------------------------------
FIELDS = frozenset({"name", "type", "id", "graph", "node", "idx", "peer", "peers", "parent_node",
                    "ins", "outs", "in_ctrl", "out_ctrl", "subgraphs", "is_out", "is_root", "key"})


@dataclass
class Scope:
    """What an expression may name: context variables, constants, op classes, functions."""

    variables: tuple[str, ...]
    constants: dict[str, Any]
    classes: dict[str, frozenset]
    functions: dict[str, "Primitive"]


@dataclass(frozen=True)
class Primitive:
    name: str
    fn: Callable
    arity: tuple[int, int]          # (min, max) arguments
    doc: str = ""


class Compiler:
    """Compiles expressions into Python functions; problems are collected."""

    def __init__(self, scope: Scope, errors: Collector):
        self.scope = scope
        self.errors = errors
        self._ns: dict[str, Any] | None = None

    def check(self, e: Expr, bound: tuple[str, ...] = ()) -> None:
        self._py(e, set(self.scope.variables) | set(bound))

    def source(self, e: Expr, bound: tuple[str, ...] = ()) -> str:
        return self._py(e, set(self.scope.variables) | set(bound))

    def namespace(self) -> dict[str, Any]:
        """The globals generated code runs in (shared by everything this compiler builds)."""
        if self._ns is None:
            ns: dict[str, Any] = {"_rt": _runtime}
            for name, prim in self.scope.functions.items():
                ns["f_" + name] = prim.fn
            for name, members in self.scope.classes.items():
                ns["C_" + name] = members
            self._ns = ns
        return self._ns

    def define(self, name: str, params: tuple[str, ...], body: Expr, memo: bool = False) -> None:
        """Compile a pack-defined function; it is callable as `name(...)` from later code.
        With `memo`, results are cached by argument identity for this compiler's life."""
        src = self.source(body, params)
        args = ", ".join("v_" + p for p in params)
        ns = self.namespace()
        exec(f"def f_{name}({args}):\n    return {src}\n", ns)  # noqa: S102
        if memo:
            ns["f_" + name] = _memoised(ns["f_" + name])

    def _py(self, e: Expr, names: set[str]) -> str:
        py = self._py
        if isinstance(e, Paren):
            return "(" + py(e.inner, names) + ")"
        if isinstance(e, Const):
            return repr(e.value)
        if isinstance(e, Var):
            if e.name in names:
                return "v_" + e.name
            if e.name in self.scope.constants:
                return repr(self.scope.constants[e.name])
            self.errors.error(e.loc, f"unknown name '{e.name}'",
                              did_you_mean(e.name, list(names) + list(self.scope.constants), "names here"))
            return "None"
        if isinstance(e, Call):
            prim = self.scope.functions.get(e.fn)
            args = [py(a, names) for a in e.args]
            if prim is None:
                self.errors.error(e.loc, f"unknown function '{e.fn}'",
                                  did_you_mean(e.fn, self.scope.functions, "functions"))
                return "None"
            lo, hi = prim.arity
            if not lo <= len(args) <= hi:
                want = str(lo) if lo == hi else f"{lo} to {hi}"
                self.errors.error(e.loc, f"'{e.fn}' takes {want} argument(s), got {len(args)}",
                                  prim.doc or f"see the primitive '{e.fn}'")
            return f"f_{e.fn}({', '.join(args)})"
        if isinstance(e, Field):
            if e.name not in FIELDS:
                self.errors.error(e.loc, f"unknown field '.{e.name}'", did_you_mean(e.name, FIELDS, "fields"))
            return f"_rt.field({py(e.obj, names)}, {e.name!r})"
        if isinstance(e, Index):
            return f"_rt.index({py(e.obj, names)}, {py(e.index, names)})"
        if isinstance(e, Unary):
            if e.op == "not":
                return f"(not {py(e.operand, names)})"
            return f"(-{py(e.operand, names)})"
        if isinstance(e, Binary):
            left, right = py(e.left, names), py(e.right, names)
            if e.op in ("and", "or", "==", "!="):
                return f"({left} {e.op} {right})"
            if e.op == "in":
                return f"_rt.contains({right}, {left})"
            if e.op == "not in":
                return f"(not _rt.contains({right}, {left}))"
            return f"_rt.binop({e.op!r}, {left}, {right})"
        if isinstance(e, IsClass):
            if e.cls not in self.scope.classes:
                self.errors.error(e.loc, f"unknown op class '{e.cls}'",
                                  did_you_mean(e.cls, self.scope.classes, "op classes"))
                return "False"
            test = f"(_rt.type_of({py(e.subject, names)}) in C_{e.cls})"
            return f"(not {test})" if e.negated else test
        if isinstance(e, Cond):
            return f"({py(e.then, names)} if {py(e.test, names)} else {py(e.other, names)})"
        if isinstance(e, ListLit):
            return "(" + "".join(py(i, names) + ", " for i in e.items) + ")"
        if isinstance(e, Comprehension):
            seq = py(e.seq, names)
            inner = names | {e.var}
            cond = f" if {py(e.cond, inner)}" if e.cond is not None else ""
            return f"[{py(e.item, inner)} for v_{e.var} in ({seq} or ()){cond}]"
        if isinstance(e, Let):
            value = py(e.value, names)
            body = py(e.body, names | {e.var})
            return f"(lambda v_{e.var}: {body})({value})"
        if isinstance(e, Quant):
            seq = py(e.seq, names)
            body = py(e.body, names | {e.var})
            v = "v_" + e.var
            if e.kind == "any":
                return f"any({body} for {v} in ({seq} or ()))"
            if e.kind == "all":
                return f"all({body} for {v} in ({seq} or ()))"
            return f"[{v} for {v} in ({seq} or ()) if {body}]"
        raise AssertionError(f"unhandled expression {type(e).__name__}")

    def function(self, e: Expr, params: tuple[str, ...]) -> Callable:
        """Compile `e` into a function of `params` (which must include the scope's variables)."""
        body = self.source(e, params)
        args = ", ".join("v_" + p for p in params)
        ns = self.namespace()
        exec(f"def _f({args}):\n    return {body}\n", ns)  # noqa: S102 - generated from parsed rules only
        return ns.pop("_f")


def _memoised(fn: Callable) -> Callable:
    cache: dict = {}

    def call(*args):
        key = tuple(id(a) for a in args)
        if key not in cache:
            cache[key] = (fn(*args), args)       # keep args alive so ids stay unique
        return cache[key][0]
    return call


class _runtime:
    """Helpers the generated code calls (None-safe field access, comparisons)."""

    @staticmethod
    def field(obj, name):
        if obj is None:
            return None
        return getattr(obj, name, None)

    @staticmethod
    def index(obj, i):
        if obj is None or i is None:
            return None
        try:
            return obj[i]
        except (IndexError, KeyError, TypeError):
            return None

    @staticmethod
    def contains(seq, item):
        if seq is None:
            return False
        return item in seq

    @staticmethod
    def binop(op, a, b):
        if a is None or b is None:
            return False if op in ("<", "<=", ">", ">=") else None
        if op == "<":
            return a < b
        if op == "<=":
            return a <= b
        if op == ">":
            return a > b
        if op == ">=":
            return a >= b
        if op == "+":
            return a + b
        if op == "-":
            return a - b
        raise ValueError(op)

    @staticmethod
    def type_of(obj):
        if obj is None:
            return None
        t = getattr(obj, "type", None)
        if t is None and hasattr(obj, "node"):
            return obj.node.type
        return t
