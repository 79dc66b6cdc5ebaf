"""Compiling DSL expressions into Python functions over the graph model: a rule
is evaluated hundreds of thousands of times on large graphs, so it is compiled
once rather than interpreted."""
from __future__ import annotations

from ast import literal_eval as ast_literal
from dataclasses import dataclass, field
from typing import Any, Callable

from engine.core.errors import Collector, InputError, Loc, Problem, did_you_mean
from engine.core.attrs import attr_def, attr_keys, node_value
from engine.core.graph import Node
from engine.dsl.types import FIELD_TYPES, check_expr
from engine.dsl.ast import (Binary, Call, Comprehension, Cond, Const, Expr, Field, Index, IsClass, Let,
    ListLit, Paren, Quant, Unary, Var, children, walk)


# ---- compiling ----------------------------------------------------------------
FIELDS = frozenset().union(*FIELD_TYPES.values())     # every field of some receiver type
_ORDERINGS = ("<", "<=", ">", ">=")


@dataclass
class Scope:
    """What an expression may name: context variables, constants, op classes, functions."""

    variables: tuple[str, ...]
    constants: dict[str, Any]
    classes: dict[str, frozenset]
    functions: dict[str, "Primitive"]
    enums: dict[str, frozenset] = field(default_factory=dict)     # closed vocabularies: name → members
    const_types: dict[str, str] = field(default_factory=dict)     # constant → type (e.g. its vocabulary)


@dataclass(frozen=True)
class Primitive:
    name: str
    fn: Callable
    arity: tuple[int, int]          # (min, max) arguments
    doc: str = ""
    signature: Any = None           # engine/dsl/types.Sig, or None for a pack-defined function
    effects: str = ""               # "" | "fails" | "edits"
    template: tuple | None = None   # pack-defined function: (params, body), type-checked per call
    instances: dict = field(default_factory=dict, compare=False)
    memo: bool = False              # pack-defined with `memo: true` (never inlined)
    inline: str = ""                # Note [inline attribute tests]: the call in place, or ""
    total: bool = False             # never none (Note [direct comparisons])


class Compiler:
    """Compiles expressions into Python functions; problems are collected."""

    def __init__(self, scope: Scope, errors: Collector):
        self.scope = scope
        self.errors = errors
        self._ns: dict[str, Any] | None = None
        self._inlining: list[str] = []      # pack functions being inlined (Note [inline pack functions])
        self._facts: dict[str, tuple] = {}  # pack function → (recursive, names its body binds, calls anything)

    def check(self, e: Expr, bound: tuple[str, ...] | dict = (), expect: str | None = None,
              what: str = "this value", edits: bool = False, define_as: str | None = None,
              params: tuple[str, ...] | None = None):
        """Names, arities and types (engine/dsl/types.py); returns the value's type. `bound`
        names extra variables (or maps them to their types); `expect` is the result type the
        context needs; `edits` allows graph edits (a rewrite rule's `do:` list); `define_as`
        names a pack-defined function whose body this is (its definition is compiled too);
        `params` are the run-time parameters in order, when they are not the scope's variables
        followed by `bound` (Note [compile at load])."""
        src = self._py(e, set(self.scope.variables) | set(bound))
        typ = check_expr(self.scope, self.errors, e, bound, expect, what, edits)
        if not self.errors.problems:      # Note [compile at load]
            if define_as is not None:
                precompile(def_source("f_" + define_as, tuple(bound), src))
            else:
                if params is None:
                    params = tuple(self.scope.variables) + tuple(b for b in bound if b not in self.scope.variables)
                precompile(def_source("_f", params, src))
        return typ

    def source(self, e: Expr, bound: tuple[str, ...] = ()) -> str:
        return self._py(e, set(self.scope.variables) | set(bound))

    def namespace(self) -> dict[str, Any]:
        """The globals generated code runs in (shared by everything this compiler builds)."""
        if self._ns is None:
            ns: dict[str, Any] = {"_rt": _runtime, "_Node": Node, "_ak": attr_keys, "_nv": node_value,
                                  "_abt": bool_attr_true}
            for name, prim in self.scope.functions.items():
                ns["f_" + name] = prim.fn
            for name, members in self.scope.classes.items():
                ns["C_" + name] = members
            self._ns = ns
        return self._ns

    def define(self, name: str, params: tuple[str, ...], body: Expr, memo: bool = False) -> None:
        """Compile a pack-defined function; it is callable as `name(...)` from later code.
        With `memo`, results are cached by argument identity for this compiler's life."""
        ns = self.namespace()
        run_source(def_source("f_" + name, params, self.source(body, params)), ns)
        if memo:
            ns["f_" + name] = _memoised(ns["f_" + name])
        if self._recursive(name, body):
            ns["f_" + name] = depth_guarded(ns["f_" + name], f"pack function '{name}'", body.loc)

    def _recursive(self, name: str, body: Expr) -> bool:
        """Whether `body` calls the pack function `name` again (through any pack functions)."""
        seen: set[str] = set()
        todo = [body]
        while todo:
            for e in walk(todo.pop()):
                if isinstance(e, Call):
                    if e.fn == name:
                        return True
                    prim = self.scope.functions.get(e.fn)
                    if prim is not None and prim.template is not None and e.fn not in seen:
                        seen.add(e.fn)
                        todo.append(prim.template[1])
        return False

    def _py(self, e: Expr, names: set[str]) -> str:
        py = self._py
        if isinstance(e, Paren):
            return "(" + py(e.inner, names) + ")"
        if isinstance(e, Const):
            return repr(e.value)
        if isinstance(e, Var):
            if e.name in names:     # a set of names (read as v_<name>), or name → Python expression
                return names[e.name] if isinstance(names, dict) else "v_" + e.name
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
            elif prim.template is not None:
                inline = self._inline(e, prim, names, args)
                if inline is not None:
                    return inline
            elif prim.inline and len(args) == 2 and args[0].isidentifier() and _str_literal(args[1]):
                # Note [inline attribute tests]: a graph node's attribute test in place, reading
                # its key set (Note [attribute key sets]); anything else calls the primitive.
                # The subject is a variable, so reading it three times costs nothing
                return prim.inline.format(n=args[0], k=args[1], f="f_" + e.fn)
            return f"f_{e.fn}({', '.join(args)})"
        if isinstance(e, Field):
            if e.name not in FIELDS:
                self.errors.error(e.loc, f"unknown field '.{e.name}'", did_you_mean(e.name, FIELDS, "fields"))
            # Note [field access]: getattr with a default is `_rt.field` without its Python
            # frame: None carries none of the DSL's fields (tests/test_dsl.py asserts it), so
            # a none receiver reads as none either way
            return f"getattr({py(e.obj, names)}, {e.name!r}, None)"
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
            if e.op in _ORDERINGS and self._never_none(e.left) and self._never_none(e.right):
                return f"({left} {e.op} {right})"       # Note [direct comparisons]
            return f"_rt.binop({e.op!r}, {left}, {right})"
        if isinstance(e, IsClass):
            if e.cls not in self.scope.classes:
                self.errors.error(e.loc, f"unknown op class '{e.cls}'",
                                  did_you_mean(e.cls, self.scope.classes, "op classes"))
                return "False"
            subject = py(e.subject, names)
            if isinstance(e.subject, Var) and e.subject.name in names:
                # Note [inline type test]: a variable is read twice at no cost, so a graph
                # node's type is read in place; anything else still goes through type_of
                test = f"(({subject}.type if {subject}.__class__ is _Node else _rt.type_of({subject})) in C_{e.cls})"
            else:
                test = f"(_rt.type_of({subject}) in C_{e.cls})"
            return f"(not {test})" if e.negated else test
        if isinstance(e, Cond):
            return f"({py(e.then, names)} if {py(e.test, names)} else {py(e.other, names)})"
        if isinstance(e, ListLit):
            return "(" + "".join(py(i, names) + ", " for i in e.items) + ")"
        if isinstance(e, Comprehension):
            seq = py(e.seq, names)
            inner = _bind(names, e.var)
            cond = f" if {py(e.cond, inner)}" if e.cond is not None else ""
            return f"[{py(e.item, inner)} for v_{e.var} in ({seq} or ()){cond}]"
        if isinstance(e, Let):
            value = py(e.value, names)
            body = py(e.body, _bind(names, e.var))
            return f"(lambda v_{e.var}: {body})({value})"
        if isinstance(e, Quant):
            seq = py(e.seq, names)
            body = py(e.body, _bind(names, e.var))
            v = "v_" + e.var
            if e.kind == "any":
                return f"any({body} for {v} in ({seq} or ()))"
            if e.kind == "all":
                return f"all({body} for {v} in ({seq} or ()))"
            return f"[{v} for {v} in ({seq} or ()) if {body}]"
        raise AssertionError(f"unhandled expression {type(e).__name__}")

    def _never_none(self, e: Expr) -> bool:
        """Note [direct comparisons]: an ordering compiles to Python's own operator when
        neither side can be none (binop's none-safe answer is then the operator's): a number
        literal, or a call of a primitive that always gives a value (`count`: 0 for none).
        `count(node.ins) > 1` ran 400k binop calls a 100k-node run."""
        while isinstance(e, Paren):
            e = e.inner
        if isinstance(e, Const):
            return type(e.value) in (int, float)
        if isinstance(e, Call):
            prim = self.scope.functions.get(e.fn)
            return prim is not None and prim.total and prim.template is None
        return False

    def _inline(self, e: Call, prim: Primitive, names, args: list[str]) -> str | None:
        """The body of the pack function `e` calls, in place of the call, or None when it
        must stay a call (Note [inline pack functions])."""
        params, body = prim.template
        if prim.memo or e.fn in self._inlining or len(params) != len(e.args):
            return None
        facts = self._facts.get(e.fn)
        if facts is None:
            binders = frozenset("v_" + x.var for x in walk(body) if isinstance(x, (Let, Comprehension, Quant)))
            facts = self._facts[e.fn] = (self._recursive(e.fn, body), binders,
                                         any(isinstance(x, Call) for x in walk(body)))
        recursive, binders, calls = facts
        if recursive:
            return None
        subst, read = {}, set()
        for p, a, a_src in zip(params, e.args, args):
            while isinstance(a, Paren):
                a = a.inner
            if isinstance(a, Var):
                src = self._py(a, names)
                if src.isidentifier():
                    read.add(src)
                else:
                    src = f"({src})"
            elif isinstance(a, Const):
                src = f"({a.value!r})"
            elif len(params) == 1 and not calls and _read_once(body, p):
                src = f"({a_src})"      # evaluated once, as the call's argument was (compiled already)
            else:
                return None
            subst[p] = src
        if binders & read:
            return None         # a name the body binds would hide an argument
        errors, self.errors = self.errors, Collector()
        self._inlining.append(e.fn)
        try:
            src = self._py(body, subst)
            failed = bool(self.errors.problems)
        finally:
            self._inlining.pop()
            self.errors = errors
        return None if failed else f"({src})"

    def function(self, e: Expr, params: tuple[str, ...]) -> Callable:
        """Compile `e` into a function of `params` (which must include the scope's variables)."""
        ns = self.namespace()
        run_source(def_source("_f", params, self.source(e, params)), ns)
        return ns.pop("_f")


def _bind(names, var: str):
    """`names` with `var` bound by a comprehension, quantifier or let (read as v_<var>)."""
    if isinstance(names, dict):
        return {**names, var: "v_" + var}
    return names | {var}


def _read_once(body: Expr, name: str) -> bool:
    """`body` reads the variable `name` exactly once, on every evaluation (not in a branch,
    the right of and/or, a comprehension's item or a quantifier's body), and never binds it."""
    uses = 0

    def visit(e, always: bool) -> None:
        nonlocal uses
        if isinstance(e, Var) and e.name == name:
            uses += 1 if always else 2
        elif isinstance(e, (Let, Comprehension, Quant)) and e.var == name:
            uses += 2
        elif isinstance(e, Binary) and e.op in ("and", "or"):
            visit(e.left, always)
            visit(e.right, False)
        elif isinstance(e, Cond):
            visit(e.test, always)
            visit(e.then, False)
            visit(e.other, False)
        elif isinstance(e, Comprehension):
            visit(e.seq, always)
            for x in (e.item, e.cond):
                if x is not None:
                    visit(x, False)
        elif isinstance(e, Quant):
            visit(e.seq, always)
            visit(e.body, False)
        else:
            for c in children(e):
                visit(c, always)
    visit(body, True)
    return uses == 1


# Note [inline pack functions]: a call of a pack-defined function whose arguments are
# all variables or constants compiles to the function's body with each parameter read
# as its argument, so the call costs no Python frame (the layout pass's marks call
# `special_memory(memory_type(anchor))` on every anchor). Reading a variable or a
# constant twice is reading it once, so the value is the same; a memo function stays a
# call (its cache is the point), and so does a recursive one, one whose body binds a name
# an argument reads, and any other argument (it would be evaluated once per use) — except
# the one argument of a function whose body calls nothing and reads its parameter once on
# every evaluation (`mem not in [0, 2, 4]`): the argument is still evaluated exactly once.

# Note [code cache]: the generated source of a DSL value depends only on the value and its
# scope's names, never on the run, so its code object is compiled once per process — when
# the pack loads (Note [compile at load]) — and executed against each run's namespace, where
# the primitives are bound to that run.
_CODE: dict[str, Any] = {}
_CODE_LIMIT = 50_000


# Note [compile at load]: the pack loader's checks compile each value's definition as the
# run will build it (`def_source` with the context's variables in order, and the rule lists'
# functions in `check_rules`), so a run only executes code objects against its namespace.
# `COMPILES` counts compilations; tests/test_dsl_types.py asserts a run adds none.
COMPILES = [0]


def _str_literal(src: str) -> bool:
    """Whether generated source is one string literal (a constant key)."""
    if src[:1] not in ("'", '"'):
        return False
    try:
        return isinstance(ast_literal(src), str)
    except (ValueError, SyntaxError):
        return False


def bool_attr_true(n, key: str) -> bool:
    """attr_true's answer for a key the node carries: only a `b` field holds True."""
    a = attr_def(n, key) if n.__class__ is Node else n.op.attr[key]     # a graph node's read lean (Note [lean ops])
    return a.WhichOneof("value") == "b" and a.b is True


def def_source(name: str, params, body: str) -> str:
    """The generated definition of one DSL value: `def name(v_p, ...): return body`."""
    return f"def {name}({', '.join('v_' + p for p in params)}):\n    return {body}\n"


def precompile(src: str):
    """The code object of generated source, compiled once per process."""
    code = _CODE.get(src)
    if code is None:
        if len(_CODE) >= _CODE_LIMIT:
            _CODE.clear()
        code = _CODE[src] = compile(src, "<dsl>", "exec")
        COMPILES[0] += 1
    return code


def run_source(src: str, ns: dict) -> None:
    """Execute generated definitions in `ns` (compiled at pack load, or now if not)."""
    exec(precompile(src), ns)  # noqa: S102 - generated from parsed rules only


# Note [call depth]: a recursive pack function follows a chain in the graph (real_source
# leaves subgraph Data for the parent's input, one call per level), so its depth is the
# input's to choose. Each level costs two or three Python frames, so MAX_CALL_DEPTH
# levels stay well inside Python's stack; deeper is a located error naming the function.
# GE itself refuses subgraphs nested more than 32 levels (GraphUnfolder,
# kHybridSubgraphRecursion) and its stream allocator 10 (kMaxSubgraphDepth).
MAX_CALL_DEPTH = 200


def depth_guarded(fn: Callable, what: str, loc: Loc) -> Callable:
    """`fn`, refusing to nest more than MAX_CALL_DEPTH calls of itself (Note [call depth]):
    for recursive pack functions and primitives that apply rules again."""
    depth = [0]

    def call(*args):
        if depth[0] >= MAX_CALL_DEPTH:
            raise InputError(Problem(loc, f"{what} called itself more than {MAX_CALL_DEPTH} "
                                          f"levels deep on this graph (a subgraph nesting or reference chain "
                                          f"that long)", "GE nests subgraphs at most 32 levels; flatten the graph"))
        depth[0] += 1
        try:
            return fn(*args)
        finally:
            depth[0] -= 1
    return call


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
        kind = getattr(obj, "is_node", None)     # Note [is_node] in engine/core/attrs.py
        if kind is True:
            return obj.type
        if kind is False:
            return obj.node.type
        if obj is None:
            return None
        t = getattr(obj, "type", None)
        if t is None and hasattr(obj, "node"):
            return obj.node.type
        return t
