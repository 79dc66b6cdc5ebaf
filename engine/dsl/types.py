"""Static types of the rule DSL, and the checker every DSL value of a pack passes at load.

Types: the graph model's `Node`, `InAnchor`, `OutAnchor` (both an `Anchor`), `Graph`; `int`,
`float`, `str`, `bool`, `none`, `list[T]`; the pack's closed vocabularies as enums (declared
by the section that owns them: `Mark` by layout_conflict, `InputRW`/`OutputRW` by rw_conflict,
...); `any` for attribute values, whose type the graph decides; `never` for `fail(...)` and
the items of `[]`. Function signatures are written as text (`"(Anchor, Mark) -> bool"`) next
to the function they describe (engine/dsl/library.py, `PrimSpec.sig`).

Note [nullable everything]: every lookup of the graph can miss (`producer(a)` of an
unconnected input, `attr(n, k)` of an absent key) and the generated code is None-safe, so
`none` is a value of every type and `x == none` is always allowed.

Note [no narrowing]: a variable declared `Anchor` is either side; the DSL has no way to
narrow it (`if a.is_out then producer(a) ...`), so an `Anchor` is accepted where an
`InAnchor` or `OutAnchor` is expected. An `InAnchor` where an `OutAnchor` is expected is
an error.

Note [string literals]: a string literal (and a vocabulary constant such as `Writeable`)
has a literal type: it is a `str`, and it is a member of an enum only if the enum lists it,
so `has_mark(a, "NORMAL_INPTU")` is an unknown-name error at the literal.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from engine.core.errors import Collector, Loc, did_you_mean
from engine.dsl import ast as A


# ---- types -------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Type:
    name: str                                   # Node, int, list, enum name, "lit", "union", "var"
    arg: "Type | None" = None                   # list element
    members: frozenset = frozenset()            # enum members; union options; literal values
    locs: tuple = field(default=(), compare=False, hash=False)   # literal: (value, Loc) pairs

    def __str__(self) -> str:
        if self.name == "list":
            return f"list[{self.arg}]"
        if self.name == "lit":
            return "str"
        if self.name == "union":
            return " or ".join(sorted(map(str, self.members)))
        if self.name == "var":
            return next(iter(self.members))
        return self.name

    @property
    def is_enum(self) -> bool:
        return self.name[:1].isupper() and self.name not in GRAPH_TYPES and self.name != "Var"


def _t(name: str) -> Type:
    return Type(name)


NODE, IN, OUT, ANCHOR, GRAPH = _t("Node"), _t("InAnchor"), _t("OutAnchor"), _t("Anchor"), _t("Graph")
INT, FLOAT, STR, BOOL, NONE, ANY, NEVER = _t("int"), _t("float"), _t("str"), _t("bool"), _t("none"), _t("any"), _t("never")
GRAPH_TYPES = frozenset({"Node", "InAnchor", "OutAnchor", "Anchor", "Graph"})
SIMPLE = {t.name: t for t in (NODE, IN, OUT, ANCHOR, GRAPH, INT, FLOAT, STR, BOOL, NONE, ANY, NEVER)}
ANCHORS = frozenset({"InAnchor", "OutAnchor", "Anchor"})
NUMERIC = frozenset({"int", "float"})
INT64_MAX = 2 ** 63 - 1


def list_of(t: Type) -> Type:
    return Type("list", t)


def enum(name: str, members) -> Type:
    return Type(name, None, frozenset(map(str, members)))


def lit(value: str, loc: Loc) -> Type:
    return Type("lit", None, frozenset({value}), ((value, loc),))


def typevar(name: str) -> Type:
    return Type("var", None, frozenset({name}))


def _strlike(t: Type) -> bool:
    return t.name in ("str", "lit") or t.is_enum


# ---- fields per receiver -------------------------------------------------------------------
_ANCHOR_FIELDS = {"node": NODE, "idx": INT, "is_out": BOOL, "key": STR}
FIELD_TYPES: dict[str, dict[str, Type]] = {
    "Node": {"name": STR, "type": STR, "id": INT, "graph": GRAPH, "ins": list_of(IN), "outs": list_of(OUT),
             "in_ctrl": list_of(NODE), "out_ctrl": list_of(NODE), "subgraphs": list_of(GRAPH)},
    "InAnchor": {**_ANCHOR_FIELDS, "peer": OUT},
    "OutAnchor": {**_ANCHOR_FIELDS, "peers": list_of(IN)},
    "Anchor": {**_ANCHOR_FIELDS, "peer": OUT, "peers": list_of(IN)},       # Note [no narrowing]
    "Graph": {"name": STR, "parent_node": NODE, "is_root": BOOL},
}

ALL_FIELDS = frozenset().union(*FIELD_TYPES.values())

# the context variables' types, by their conventional names (a context may override them)
VAR_TYPES: dict[str, Type] = {"node": NODE, "anchor": ANCHOR, "graph": GRAPH, "a": ANCHOR, "b": ANCHOR,
                              "symbol": list_of(ANCHOR), "netoutput": NODE, "original": NODE}


# ---- signatures --------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Sig:
    params: tuple[Type, ...]
    optional: int              # how many trailing parameters may be left out
    result: Type
    by_key: dict | None = field(default=None, compare=False)   # literal argument 2 → result type

    def __str__(self) -> str:
        n = len(self.params)
        ps = [str(p) + ("?" if i >= n - self.optional else "") for i, p in enumerate(self.params)]
        return f"({', '.join(ps)}) -> {self.result}"


_SIG_TOKEN = re.compile(r"\s*(->|[A-Za-z_][A-Za-z0-9_]*|[\[\](),|?])")


def parse_sig(text: str) -> Sig:
    """`(Node, list[T], str?) -> T`: parameter types (`?`: may be left out; `A | B`: either) and
    the result. Upper-case names other than the graph types are enums, or a type variable `T`."""
    toks, pos = [], 0
    while pos < len(text.rstrip()):
        m = _SIG_TOKEN.match(text, pos)
        if m is None:
            raise ValueError(f"bad signature {text!r} at {pos}")
        toks.append(m.group(1))
        pos = m.end()
    i = 0

    def take(want: str | None = None) -> str:
        nonlocal i
        tok = toks[i]
        if want is not None and tok != want:
            raise ValueError(f"bad signature {text!r}: expected {want!r}, got {tok!r}")
        i += 1
        return tok

    def one() -> Type:
        name = take()
        if name == "list":
            take("[")
            inner = union()
            take("]")
            return list_of(inner)
        if name in SIMPLE:
            return SIMPLE[name]
        if name == "T" or name == "U":
            return typevar(name)
        if name[:1].isupper():
            return enum(name, ())          # resolved against the scope's vocabularies
        raise ValueError(f"bad signature {text!r}: unknown type {name!r}")

    def union() -> Type:
        opts = [one()]
        while i < len(toks) and toks[i] == "|":
            take("|")
            opts.append(one())
        return opts[0] if len(opts) == 1 else Type("union", None, frozenset(opts))

    take("(")
    params, optional = [], 0
    while toks[i] != ")":
        params.append(union())
        if toks[i] == "?":
            take("?")
            optional += 1
        elif optional:
            raise ValueError(f"bad signature {text!r}: optional parameters come last")
        if toks[i] == ",":
            take(",")
    take(")")
    take("->")
    result = union()
    if i != len(toks):
        raise ValueError(f"bad signature {text!r}: trailing {toks[i]!r}")
    return Sig(tuple(params), optional, result)


# ---- relations ---------------------------------------------------------------------------------
def is_sub(a: Type, b: Type) -> bool:
    """`a` may be used where `b` is expected (enum membership of literals aside)."""
    if a == b or a.name in ("any", "never", "none") or b.name == "any":
        return True
    if b.name == "union":
        return any(is_sub(a, o) for o in b.members)
    if a.name == "union":
        return all(is_sub(o, b) for o in a.members)
    if a.name in ANCHORS and b.name in ANCHORS:
        return not (a.name != "Anchor" and b.name != "Anchor")    # Note [no narrowing]
    if a.name == "int" and b.name == "float":
        return True
    if a.name == "lit":
        return b.name in ("str", "lit") or b.is_enum
    if a.is_enum:
        return b.name == "str" or (b.is_enum and b.name == a.name)
    if a.name == "list" and b.name == "list":
        return is_sub(a.arg, b.arg)
    return False


def join(a: Type, b: Type) -> Type | None:
    """The type of `if c then x else y` / `[x, y]`; None when there is none."""
    if a.name in ("never", "none"):
        return b
    if b.name in ("never", "none"):
        return a
    if "any" in (a.name, b.name):
        return ANY
    if a == b:
        return a
    if a.name in ANCHORS and b.name in ANCHORS:
        return ANCHOR
    if a.name in NUMERIC and b.name in NUMERIC:
        return FLOAT
    if a.name == "lit" and b.name == "lit":
        return Type("lit", None, a.members | b.members, a.locs + b.locs)
    if a.name == "lit" and b.is_enum:
        return b
    if b.name == "lit" and a.is_enum:
        return a
    if _strlike(a) and _strlike(b):
        return STR
    if a.name == "list" and b.name == "list":
        inner = join(a.arg, b.arg)
        return None if inner is None else list_of(inner)
    return None


def comparable(a: Type, b: Type) -> bool:
    if "any" in (a.name, b.name) or "none" in (a.name, b.name) or "never" in (a.name, b.name):
        return True
    return join(a, b) is not None


# ---- the checker ----------------------------------------------------------------------------------
MAX_DEPTH = 100        # nesting levels of one expression (engine/dsl/grammar.py enforces it)
EDIT_WHERE = "graph edits are allowed only in a rewrite rule's `do:` list (and a rule set's `once:`)"


class TypeChecker:
    """Infers the type of an expression; type errors go to `errors`.

    `scope` is a compiler Scope (its functions carry `sig`/`effects`, its `enums` name the
    vocabularies, its `const_types` type the constants); `edits` allows graph edits."""

    def __init__(self, scope, errors: Collector, edits: bool = False):
        self.scope = scope
        self.errors = errors
        self.edits = edits
        self.enums: dict[str, frozenset] = dict(getattr(scope, "enums", None) or {})

    # -- helpers
    def _err(self, loc: Loc, message: str, hint: str = "") -> None:
        if (loc, message) not in {(p.loc, p.message) for p in self.errors.problems}:
            self.errors.error(loc, message, hint)

    def resolve(self, t: Type) -> Type:
        """An enum named in a signature gets the scope's members (a `str` outside its section)."""
        if t.name == "list":
            return list_of(self.resolve(t.arg))
        if t.name == "union":
            return Type("union", None, frozenset(self.resolve(o) for o in t.members))
        if t.is_enum and not t.members:
            members = self.enums.get(t.name)
            return STR if members is None else enum(t.name, members)
        return t

    def members_ok(self, got: Type, want: Type, what: str = "") -> None:
        """Literal strings flowing into an enum must be members (Note [string literals])."""
        if want.name == "list" and got.name == "list":
            return self.members_ok(got.arg, want.arg, what)
        if want.name == "union":
            enums = [o for o in want.members if o.is_enum]
            if len(enums) == 1 and not any(o.name in ("str", "any") for o in want.members):
                self.members_ok(got, enums[0], what)
            return
        if got.name != "lit" or not want.is_enum:
            return
        for value, loc in got.locs:
            if value not in want.members:
                self._err(loc, f"unknown {want.name} '{value}'", did_you_mean(value, want.members, want.name))

    def expect(self, got: Type, want: Type, loc: Loc, what: str) -> None:
        want = self.resolve(want)
        if is_sub(got, want):
            self.members_ok(got, want, what)
        else:
            self._err(loc, f"{what} must return {want}, this returns {got}", "")

    def env_of(self, bound) -> dict[str, Type]:
        env = {name: VAR_TYPES.get(name, ANY) for name in getattr(self.scope, "variables", ())}
        if isinstance(bound, dict):
            env.update({k: parse_type(v) if isinstance(v, str) else v for k, v in bound.items()})
        else:
            env.update({name: VAR_TYPES.get(name, ANY) for name in bound})
        return env

    def const_type(self, name: str) -> Type:
        types = getattr(self.scope, "const_types", None) or {}
        if name in types:
            return self.resolve(types[name])
        value = self.scope.constants.get(name)
        return self.value_type(value, Loc("<constant>"))

    @staticmethod
    def value_type(value, loc: Loc) -> Type:
        if value is None:
            return NONE
        if isinstance(value, bool):
            return BOOL
        if isinstance(value, int):
            return INT
        if isinstance(value, float):
            return FLOAT
        if isinstance(value, str):
            return lit(value, loc)
        return ANY

    # -- inference
    def infer(self, e, env: dict[str, Type]) -> Type:
        if isinstance(e, A.Paren):
            return self.infer(e.inner, env)
        if isinstance(e, A.Const):
            return self.value_type(e.value, e.loc)
        if isinstance(e, A.Var):
            if e.name in env:
                return env[e.name]
            if e.name in self.scope.constants:
                t = self.const_type(e.name)
                return lit(e.name, e.loc) if t.name == "lit" else t
            return ANY                 # the compiler reports the unknown name
        if isinstance(e, A.Call):
            return self._call(e, env)
        if isinstance(e, A.Field):
            return self._field(e, env)
        if isinstance(e, A.Index):
            obj, idx = self.infer(e.obj, env), self.infer(e.index, env)
            if idx.name not in ("int", "any", "none"):
                self._err(e.index.loc, f"a list index must be int, not {idx}", "")
            if obj.name == "list":
                return obj.arg if obj.arg.name != "never" else ANY
            if obj.name not in ("any", "none"):
                self._err(e.loc, f"cannot index {obj}", "only lists (and attribute values) can be indexed")
            return ANY
        if isinstance(e, A.Unary):
            t = self.infer(e.operand, env)
            if e.op == "not":
                self._bool(t, e.operand.loc, "'not'")
                return BOOL
            if t.name not in NUMERIC and t.name not in ("none", "never"):
                self._err(e.loc, f"cannot negate {t}", "'-' applies to int and float")
                return ANY
            return t if t.name in NUMERIC else ANY
        if isinstance(e, A.Binary):
            return self._binary(e, env)
        if isinstance(e, A.IsClass):
            t = self.infer(e.subject, env)
            if not (t.name in ("Node", "any", "none") or t.name in ANCHORS):
                self._err(e.loc, f"'is' tests the op class of a Node or an anchor, not {t}", "")
            return BOOL
        if isinstance(e, A.Cond):
            self._bool(self.infer(e.test, env), e.test.loc, "'if'")
            a, b = self.infer(e.then, env), self.infer(e.other, env)
            j = join(a, b)
            if j is None:
                self._err(e.loc, f"the branches of 'if' have different types: {a} and {b}", "")
                return ANY
            return j
        if isinstance(e, A.Let):
            return self.infer(e.body, {**env, e.var: self.infer(e.value, env)})
        if isinstance(e, A.ListLit):
            # Note [lists as tuples]: packs write a record as a list (`[src, dst, node]`); items
            # without a common type make a list[any]
            t = NEVER
            for item in e.items:
                t = join(t, self.infer(item, env)) or ANY
            return list_of(t)
        if isinstance(e, A.Quant):
            inner = {**env, e.var: self._elem(e.seq, env, e.kind)}
            self._bool(self.infer(e.body, inner), e.body.loc, f"'{e.kind}(... where ...)'")
            return BOOL if e.kind in ("any", "all") else list_of(inner[e.var])
        if isinstance(e, A.Comprehension):
            inner = {**env, e.var: self._elem(e.seq, env, "for")}
            if e.cond is not None:
                self._bool(self.infer(e.cond, inner), e.cond.loc, "'if' in a list comprehension")
            return list_of(self.infer(e.item, inner))
        return ANY

    def _elem(self, seq, env, what: str) -> Type:
        t = self.infer(seq, env)
        if t.name == "list":
            return t.arg if t.arg.name != "never" else ANY
        if t.name not in ("any", "none"):
            self._err(seq.loc, f"'{what}' ranges over a list, not {t}", "")
        return ANY

    def _bool(self, t: Type, loc: Loc, what: str) -> None:
        if t.name not in ("bool", "any", "none", "never"):
            self._err(loc, f"{what} needs a bool, not {t}", "compare it, e.g. `count(x) > 0` or `x != none`")

    def _field(self, e, env) -> Type:
        t = self.infer(e.obj, env)
        if t.name in ("any", "none", "never"):
            return ANY
        fields = FIELD_TYPES.get(t.name)
        if fields is None:
            self._err(e.loc, f"{t} has no field '.{e.name}'", "fields belong to nodes, anchors and graphs")
            return ANY
        if e.name not in fields:
            if e.name in ALL_FIELDS:         # other names: the compiler reports the unknown field
                self._err(e.loc, f"{t} has no field '.{e.name}'", did_you_mean(e.name, fields, f"fields of {t}"))
            return ANY
        return fields[e.name]

    def _binary(self, e, env) -> Type:
        op = e.op
        a, b = self.infer(e.left, env), self.infer(e.right, env)
        if op in ("and", "or"):
            self._bool(a, e.left.loc, f"'{op}'")
            self._bool(b, e.right.loc, f"'{op}'")
            return BOOL
        if op in ("==", "!="):
            if not comparable(a, b):
                self._err(e.loc, f"cannot compare {a} with {b}", "")
            else:
                self._enum_compare(a, b)
            return BOOL
        if op in ("<", "<=", ">", ">="):
            ok = (a.name in NUMERIC | {"any", "none"} and b.name in NUMERIC | {"any", "none"}
                  and not (a.name == b.name == "none")) or (_strlike(a) and _strlike(b))
            if not ok:
                self._err(e.loc, f"cannot compare {a} with {b}", f"'{op}' orders two numbers or two strings")
            return BOOL
        if op in ("in", "not in"):
            if b.name == "list":
                if not comparable(a, b.arg):
                    self._err(e.loc, f"cannot look for {a} in {b}", "")
                else:
                    self._enum_compare(a, b.arg)
            elif not (b.name in ("any", "none") or (_strlike(a) and _strlike(b))):
                self._err(e.right.loc, f"'{op}' needs a list on the right, not {b}", "")
            return BOOL
        # + and -
        if a.name in NUMERIC and b.name in NUMERIC:
            return FLOAT if "float" in (a.name, b.name) else INT
        if op == "+" and _strlike(a) and _strlike(b):
            return STR
        if op == "+" and a.name == "list" and b.name == "list" and join(a, b) is not None:
            return join(a, b)
        verb = "add" if op == "+" else "subtract"
        hint = ("an attribute value has no static type: compare it (==, <) or test it instead"
                if "any" in (a.name, b.name) else "")
        self._err(e.loc, f"cannot {verb} {a} and {b}", hint)
        return ANY

    def _enum_compare(self, a: Type, b: Type) -> None:
        if a.is_enum:
            self.members_ok(b, a)
        elif b.is_enum:
            self.members_ok(a, b)

    def _call(self, e, env) -> Type:
        args = [self.infer(x, env) for x in e.args]
        prim = self.scope.functions.get(e.fn)
        if prim is None:
            return ANY                                   # the compiler reports it
        effects = self.effects_of(prim)
        if effects == "edits" and not self.edits:
            self._err(e.loc, f"'{e.fn}' edits the graph and cannot be called here", EDIT_WHERE)
        template = getattr(prim, "template", None)
        if template is not None:
            return self._instantiate(prim, template, args, e)
        sig = getattr(prim, "signature", None)
        if sig is None or len(args) > len(sig.params) or len(args) < len(sig.params) - sig.optional:
            return ANY                                   # no signature, or the compiler reports the arity
        binding: dict[str, Type] = {}
        for x, got, want in zip(e.args, args, sig.params):
            want = self.resolve(want)
            if not self._match(got, want, binding):
                self._err(x.loc, f"argument {e.args.index(x) + 1} of '{e.fn}' must be {self._show(want, binding)}, "
                                 f"not {got}", f"{e.fn}{sig}")
            else:
                self.members_ok(got, self._subst(want, binding))
        if sig.by_key and len(e.args) > 1 and args[1].name == "lit" and len(args[1].locs) == 1:
            (key, loc), = args[1].locs
            if key not in sig.by_key:
                self._err(loc, f"'{e.fn}' has no field '{key}'", did_you_mean(key, sig.by_key, "fields"))
                return ANY
            return sig.by_key[key]
        return self._subst(self.resolve(sig.result), binding)

    def _match(self, got: Type, want: Type, binding: dict) -> bool:
        if want.name == "var":
            (v,) = want.members
            if v not in binding or binding[v].name in ("never", "none"):
                binding[v] = got
                return True
            j = join(binding[v], got)
            if j is None:
                return False
            binding[v] = j
            return True
        if want.name == "list" and got.name == "list":
            return self._match(got.arg, want.arg, binding)
        if want.name == "list" and got.name in ("any", "none", "never"):
            return True
        if want.name == "union":
            return any(self._match(got, o, dict(binding)) for o in want.members)
        return is_sub(got, want)

    def _subst(self, t: Type, binding: dict) -> Type:
        if t.name == "var":
            (v,) = t.members
            return binding.get(v, ANY)
        if t.name == "list":
            return list_of(self._subst(t.arg, binding))
        return t

    def _show(self, t: Type, binding: dict) -> str:
        return str(self._subst(t, binding)).replace("list[any]", "a list")

    def effects_of(self, prim, seen: frozenset = frozenset()) -> str:
        """A primitive's declared effects; a pack function's are those of the calls in its body."""
        template = getattr(prim, "template", None)
        if template is None:
            return getattr(prim, "effects", "")
        # every pack function it reaches, each once, without recursion (Note [no recursion])
        found, todo, visited = "", [template[1]], {prim.name} | set(seen)
        while todo:
            for sub in A.walk(todo.pop()):
                if not isinstance(sub, A.Call) or sub.fn not in self.scope.functions:
                    continue
                callee = self.scope.functions[sub.fn]
                body = getattr(callee, "template", None)
                if body is None:
                    eff = getattr(callee, "effects", "")
                    if eff == "edits":
                        return eff
                    found = found or eff
                elif sub.fn not in visited:
                    visited.add(sub.fn)
                    todo.append(body[1])
        return found

    def _instantiate(self, prim, template, args: list[Type], e) -> Type:
        """A pack-defined function is checked at each distinct argument type (a template);
        its effects are checked at the call (`effects_of`), so its body may edit."""
        params, body = template
        key = tuple(args)
        cache = prim.instances
        if key in cache:
            return cache[key]
        cache[key] = ANY                   # a recursive call sees `any`
        saved, self.edits = self.edits, True
        try:
            result = self.infer(body, dict(zip(params, args)))
        finally:
            self.edits = saved
        cache[key] = result
        return result


def check_expr(scope, errors: Collector, e, bound=(), expect: Type | str | None = None,
               what: str = "this value", edits: bool = False) -> Type:
    """Type-check `e` in `scope` (plus the names in `bound`: names or name → type)."""
    tc = TypeChecker(scope, errors, edits)
    t = tc.infer(e, tc.env_of(bound))
    if expect is not None:
        want = parse_type(expect) if isinstance(expect, str) else expect
        tc.expect(t, want, e.loc, what)
    return t


def parse_type(text: str) -> Type:
    """One type written as in a signature: `list[Anchor]`, `OutputRW`, `bool`."""
    return parse_sig(f"() -> {text}").result
