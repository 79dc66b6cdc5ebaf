"""The rule DSL's syntax tree: one frozen dataclass per construct, each printing
back to its canonical source (`str(parse_expr(t)) == t` for canonical `t`)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.core.errors import Loc, positional_pickle


# Note [size limits]: the transformer, the type checker and Python's compiler of the
# generated code all recurse, and Python's parser stops at 200 nested parentheses (the
# generated code opens at most two per level). So an expression may nest MAX_DEPTH
# levels (far above the shipped packs' deepest, 12), checked on the parse tree without
# recursion before anything else walks it (engine/dsl/grammar.py); integer literals are
# GE int64 attribute values.
MAX_DEPTH = 60
INT64_MAX = 2 ** 63 - 1


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
        return dsl_literal(self.value)


def dsl_literal(value: Any) -> str:
    """A value as the DSL writes it: `none`, `true`/`false`, a "quoted" string (`\\` and `\"`
    escaped), a number, a `[list, of, values]`."""
    if value is None:
        return "none"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(dsl_literal(v) for v in value) + "]"
    return str(value)


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


# the compiled-pack cache pickles parsed values (Note [positional pickling])
for _cls in [c for c in list(globals().values()) if isinstance(c, type) and issubclass(c, (Expr, Signature, Port))]:
    positional_pickle(_cls)
del _cls
