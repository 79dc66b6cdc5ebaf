"""Generators, mutators and the command-line contract shared by tests/test_fuzz.py (small,
derandomized budgets) and benchmarks/fuzz.py (long runs).

The contract (README "Exit status", issue 16): on any input a command exits 0, 1 or 2;
a 2 starts with a located `FILE[:LINE[:COL]]: error:` message; nothing prints a
traceback or an internal error; no output file exists unless the exit status is 0; and
every run ends within a time bound.
"""
from __future__ import annotations

import contextlib
import copy
import io
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parent.parent
CORPUS = Path(__file__).resolve().parent / "fuzz_corpus"
TIME_LIMIT = 20.0          # seconds one command may take on a fuzz input (they are tiny)
PACK_TIME_LIMIT = 60.0     # with a new pack: loading one takes 2-8 s on this shared machine
_LOCATED = re.compile(r"^[^\s:][^:\n]*?(:\d+){0,2}: error: ")

# Op types of the shipped pack a generated graph uses (tests may name GE ops; the engine may not).
PLAIN_TYPES = ["Const", "Variable", "Identity", "Assign", "HcomAllReduce", "HcomBroadcast", "Add", "Relu",
               "ApplyMomentum", "MemcpyAsync", "Cast", "RefIdentity", "L2Loss", "Constant"]


# ---- the contract ------------------------------------------------------------------------
@dataclass
class Outcome:
    status: int
    stderr: str
    seconds: float
    problems: list[str] = field(default_factory=list)     # contract violations (empty: held)


def run_cli(argv: list[str], outputs: list[Path], limit: float = TIME_LIMIT) -> Outcome:
    """Run `memconflict argv` in this process and check the contract; `outputs` are the
    output files the command was asked to write, `limit` the time bound in seconds."""
    from engine.cli import main

    err, out = io.StringIO(), io.StringIO()
    t0 = time.perf_counter()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            status = main(argv)
    except BaseException as exc:            # noqa: BLE001 - a fuzz finding, reported
        status = -1
        err.write(f"escaped: {type(exc).__name__}: {exc}")
    seconds = time.perf_counter() - t0
    text = err.getvalue()
    o = Outcome(status, text, seconds)
    if status not in (0, 1, 2):
        o.problems.append(f"exit status {status}")
    if "Traceback" in text or "internal error" in text:
        o.problems.append("traceback or internal error")
    if status == 2:
        m = _LOCATED.search(text)
        if m is None or m.start() != 0:
            o.problems.append("exit 2 without a leading `FILE[:LINE[:COL]]: error:` message")
    if status != 0:
        left = [str(p) for p in outputs if p.exists()]
        if left:
            o.problems.append(f"exit {status} but output written: {left}")
    if seconds > limit:
        o.problems.append(f"took {seconds:.1f} s (limit {limit:.0f} s)")
    return o


def check_graph_text(text: str, folder: Path, name: str = "g.yaml", passes: str | None = None,
                     extra: list[str] = (), limit: float = TIME_LIMIT) -> Outcome:
    """Write a graph file and run `memconflict run` on it with every output asked for."""
    for p in folder.iterdir():
        if p.is_file():
            p.unlink()
    src = folder / name
    if isinstance(text, bytes):
        src.write_bytes(text)
    else:
        src.write_text(text, encoding="utf-8", errors="surrogatepass")
    outs = [folder / "out.pbtxt", folder / "r.json", folder / "r.html"]
    argv = ["run", str(src), "--out", str(outs[0]), "--report-json", str(outs[1]), "--report-html", str(outs[2]),
            "--quiet", *extra]
    if passes:
        argv += ["--passes", passes]
    return run_cli(argv, outs, limit)


# ---- valid YAML graphs --------------------------------------------------------------------
def _subgraph(name: str, n_in: int, n_out: int) -> dict:
    nodes: dict = {}
    for i in range(n_in):
        nodes[f"{name}_d{i}"] = {"type": "Data", "attrs": {"_parent_node_index": i}}
    nodes[f"{name}_out"] = {"type": "NetOutput", "inputs": n_out,
                            "input_desc": {i: {"attrs": {"_parent_node_index": i}} for i in range(n_out)}}
    edges = [f"{name}_d{i % n_in}:0 -> {name}_out:{i}" for i in range(n_out)] if n_in else []
    return {"nodes": nodes, "edges": edges}


@st.composite
def graph_docs(draw, max_nodes: int = 10) -> dict:
    """A valid YAML graph document: a DAG of plain ops (edges go from earlier to later
    nodes), control edges, attributes, and maybe If/PartitionedCall nodes with subgraphs."""
    n = draw(st.integers(2, max_nodes))
    nodes: dict = {}
    edges: list[str] = []
    graphs: dict = {}
    outs: list[tuple[str, int]] = []
    for i in range(n):
        name = f"n{i}"
        kind = draw(st.sampled_from(PLAIN_TYPES + ["If", "PartitionedCall"])) if i else "Variable"
        k_in = draw(st.integers(0, min(3, len(outs)))) if outs else 0
        srcs = draw(st.lists(st.sampled_from(outs), min_size=k_in, max_size=k_in)) if k_in else []
        k_out = draw(st.integers(1, 2))
        entry: dict = {"type": kind, "inputs": max(k_in, 1) if kind in ("If", "PartitionedCall") else k_in,
                       "outputs": k_out}
        if draw(st.booleans()):
            entry["attrs"] = draw(st.dictionaries(
                st.sampled_from(["_input_mutable", "_skip_rw_conflict", "_no_reuse_mem", "x", "_is_unknown_shape"]),
                st.one_of(st.booleans(), st.integers(-5, 5), st.text("ab", max_size=3)), max_size=2))
        if kind in ("If", "PartitionedCall"):
            subs = [f"{name}_then", f"{name}_else"] if kind == "If" else [f"{name}_body"]
            for s in subs:
                graphs[s] = _subgraph(s, entry["inputs"], k_out)
            entry["subgraphs"] = subs
        nodes[name] = entry
        for j, (src, si) in enumerate(srcs):
            edges.append(f"{src}:{si} -> {name}:{j}")
        if draw(st.booleans()) and i >= 2:
            edges.append(f"n{draw(st.integers(0, i - 1))} ~> {name}")
        outs.extend((name, o) for o in range(k_out))
    nodes["out"] = {"type": "NetOutput", "inputs": 1}
    edges.append(f"{outs[-1][0]}:{outs[-1][1]} -> out:0")
    return {"graphs": {"root": {"nodes": nodes, "edges": edges}, **graphs}}


def dump(doc) -> str:
    return yaml.safe_dump(doc, sort_keys=False, default_flow_style=None, width=100)


# ---- mutators -------------------------------------------------------------------------------
HOSTILE = [None, -1, 0, 2 ** 63, 99999999999999999999, 100_000_000, 1e308, float("nan"), True, "", "a",
           "x" * 300, [], {}, [1, "a"], [[1, "a"]], {"foo": {}}, [[[[[]]]]], "a:99999999 -> b", "n0 -> n0",
           "n0 ~> n0", "n0:-1 -> n1", "zz -> n0", {"type": "If", "subgraphs": ["root"]}, ["root"], ["nope"],
           "DT_NOPE", [-2, 0], 65_536, 65_537, {0: {"shape": ["a"]}}, {"a": 1}]
YAML_BITS = ["{", "}", "[", "]", ":", ": ", "&a ", "*a", "!!python/object ", "|", ">", "- ", "#", "'", '"', "\n",
             "\t", " ", "%", "@", "`", ",", "?", "\\", '"\\ud800"', "!!binary x", "---\n", "...\n", "<<: *a\n",
             "99999999999999999999", "-", "~", "0x", "1e9999", "\x00", "\ufeff"]


def _paths(doc, prefix=()):
    """Every (container, key) of a nested dict/list document, as paths."""
    stack = [(doc, prefix)]
    out = []
    while stack:
        value, path = stack.pop()
        items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
        for k, v in items:
            out.append(path + (k,))
            stack.append((v, path + (k,)))
    return out


def _at(doc, path):
    for k in path:
        doc = doc[k]
    return doc


@st.composite
def mutated_docs(draw, docs) -> dict:
    """A document with some values replaced by hostile ones, keys removed or added."""
    doc = draw(docs)
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(doc)
        if not paths:
            break
        path = draw(st.sampled_from(sorted(paths, key=repr)))
        parent = _at(doc, path[:-1])
        op = draw(st.sampled_from(["replace", "replace", "remove", "add"]))
        hostile = copy.deepcopy(draw(st.sampled_from(HOSTILE)))     # later edits must not change HOSTILE
        if op == "replace":
            parent[path[-1]] = hostile
        elif op == "remove":
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[draw(st.sampled_from(["bogus", "inputs", "type", 7, "attrs"]))] = hostile
        else:
            parent.append(hostile)
    return doc


@st.composite
def mutated_texts(draw, texts) -> str:
    """Text with YAML-significant pieces inserted, spans deleted, lines repeated, or cut short."""
    text = draw(texts)
    for _ in range(draw(st.integers(1, 4))):
        if not text:
            break
        i = draw(st.integers(0, len(text)))
        op = draw(st.sampled_from(["insert", "insert", "delete", "dup", "cut"]))
        if op == "insert":
            text = text[:i] + draw(st.sampled_from(YAML_BITS)) + text[i:]
        elif op == "delete":
            text = text[:i] + text[i + draw(st.integers(1, 8)):]
        elif op == "dup":
            lines = text.splitlines(keepends=True)
            j = draw(st.integers(0, len(lines) - 1))
            text = "".join(lines[:j + 1] + lines[j:])
        else:
            text = text[:i]
    return text


def shuffled_doc(doc: dict, rnd) -> dict:
    """The same graphs with each graph's nodes in another file order (edges, and so the
    peer order of every output, unchanged)."""
    out = {"graphs": {}}
    for gname, g in doc["graphs"].items():
        names = list(g["nodes"])
        rnd.shuffle(names)
        out["graphs"][gname] = {"nodes": {k: g["nodes"][k] for k in names}, "edges": list(g["edges"])}
    return out


# ---- DSL expressions ------------------------------------------------------------------------
NAMES = ["node", "anchor", "x", "o"]
FUNCS = ["producer", "count", "first", "desc_attr", "node_attr", "parent_input", "output", "subgraphs",
         "real_source", "computable", "len", "nope"]
CLASSES = ["data", "netoutput", "constant", "variable", "nope"]


def dsl_exprs(max_leaves: int = 12):
    """Expression text from the DSL grammar (grammars/dsl.lark): names, fields, calls,
    operators, quantifiers, comprehensions, let and if — well- and ill-typed alike."""
    leaf = st.one_of(st.sampled_from(NAMES + ["true", "false", "none", '"s"', "PARENT_NODE_INDEX", "Writeable"]),
                     st.integers(0, 2 ** 64).map(str))

    def extend(inner):
        return st.one_of(
            st.tuples(inner, st.sampled_from(["and", "or", "==", "!=", "<", "+", "-", "in", "not in"]), inner)
              .map(lambda t: f"{t[0]} {t[1]} {t[2]}"),
            inner.map(lambda e: f"not {e}"), inner.map(lambda e: f"({e})"), inner.map(lambda e: f"-{e}"),
            st.tuples(inner, st.sampled_from(["type", "name", "idx", "node", "ins", "outs", "graph", "peers"]))
              .map(lambda t: f"{t[0]}.{t[1]}"),
            st.tuples(inner, inner).map(lambda t: f"{t[0]}[{t[1]}]"),
            st.tuples(st.sampled_from(FUNCS), st.lists(inner, max_size=2)).map(lambda t: f"{t[0]}({', '.join(t[1])})"),
            st.tuples(inner, st.sampled_from(CLASSES)).map(lambda t: f"{t[0]} is {t[1]}"),
            st.tuples(st.sampled_from(["any", "all", "select"]), inner, inner)
              .map(lambda t: f"{t[0]}(x in {t[1]} where {t[2]})"),
            st.tuples(inner, inner).map(lambda t: f"[{t[0]} for x in {t[1]}]"),
            st.lists(inner, max_size=3).map(lambda xs: f"[{', '.join(xs)}]"),
            st.tuples(inner, inner).map(lambda t: f"let x = {t[0]}; {t[1]}"),
            st.tuples(inner, inner, inner).map(lambda t: f"if {t[0]} then {t[1]} else {t[2]}"),
        )
    return st.recursive(leaf, extend, max_leaves=max_leaves)


def deep_expr(depth: int, kind: str) -> str:
    """Well-typed conditions nested `depth` levels: parentheses, `not`, `let`, lists or a long chain."""
    if kind == "paren":
        return "(" * depth + "true" + ")" * depth
    if kind == "not":
        return "not " * depth + "true"
    if kind == "let":
        return "let x = " * depth + "true" + "; x" * depth
    if kind == "list":
        return "count(" + "[" * depth + "1" + "]" * depth + ") == 1"
    return " and ".join(["true"] * depth)


# ---- pack overlays ----------------------------------------------------------------------------
def overlay_ops():
    """Overlay operations on the default pack: rules with generated DSL, matrix cells and
    op entries replaced with good or hostile values, items removed, paths that name nothing."""
    value = st.one_of(st.sampled_from(HOSTILE + ["insert_identity", "do_nothing", "ScopeWriteable", "Writeable"]),
                      dsl_exprs(6))
    rule = st.fixed_dictionaries({"id": st.sampled_from(["fz/a", "fz/b", "rw/in/read"]),
                                  "when": dsl_exprs(6), "value": st.sampled_from(["ScopeWriteable", "Writeable",
                                                                                  "Bogus", "node"])})
    return st.one_of(
        st.fixed_dictionaries({"add": st.just("rw_conflict.input_rules"), "items": st.lists(rule, min_size=1,
                                                                                            max_size=2)}),
        st.fixed_dictionaries({"add": st.just("rw_conflict.output_rules"),
                               "before": st.sampled_from(["rw/out/ref-output", "nope"]),
                               "items": st.lists(rule, min_size=1, max_size=1)}),
        st.fixed_dictionaries({"replace": st.sampled_from(["rw_conflict.matrix[ReadOnly][Writeable]",
                                                           "rw_conflict.matrix[Nope][Writeable]",
                                                           "ops[Assign].signature", "ops[Assign]",
                                                           "op_classes.constant.types", "pipeline[graph_lint].gate",
                                                           "rw_conflict.input_rules[rw/in/read].when"]),
                               "value": value}),
        st.fixed_dictionaries({"remove": st.sampled_from(["pipeline[inplace_support_check].gate", "ops[Assign]",
                                                          "op_classes.constant", "rw_conflict.input_rules[nope]",
                                                          "rw_conflict.matrix", "pipeline[graph_lint]"])}),
        st.fixed_dictionaries({"add": st.just("ops"), "value": st.dictionaries(
            st.sampled_from(["FzOp", "Assign"]), st.one_of(st.sampled_from(HOSTILE), st.fixed_dictionaries(
                {"signature": st.sampled_from(["FzOp(x!) -> (y)", "FzOp(", "FzOp(x) -> (x, x)", "Q(a) -> (b)"])})),
            min_size=1, max_size=1)}),
    )


def write_overlay(folder: Path, ops: list, base: Path = ROOT / "rules" / "ge") -> None:
    import os
    folder.mkdir(parents=True, exist_ok=True)
    rel = os.path.relpath(base, folder)
    (folder / "pack.yaml").write_text(f'name: fz\nversion: "0.1.0"\nschema_version: 1\nbase: {rel}\n'
                                      f'include: [changes.yaml]\n', encoding="utf-8")
    (folder / "changes.yaml").write_text(dump({"overlay": ops}), encoding="utf-8")


def check_dsl(text: str) -> Outcome:
    """Parse, print back, type-check and compile `text` as a rule condition of the default
    pack; the contract: that, or a located InputError (status 2)."""
    from engine.core.errors import Collector, InputError, Loc
    from engine.dsl.compiler import Compiler
    from engine.dsl.parser import parse_expr
    from engine.passes.catalog import load_pack

    t0 = time.perf_counter()
    problems, status, message = [], 0, ""
    try:
        e = parse_expr(text, Loc("rules/x.yaml", 3, 13))
        if str(parse_expr(str(e))) != str(e):
            problems.append(f"prints as {str(e)!r}, which parses to something else")
        errors = Collector()
        comp = Compiler(load_pack(None).scope(("node", "anchor")), errors)
        comp.check(e, expect="bool", what="this condition")
        errors.check()
        comp.function(e, ("node", "anchor"))
    except InputError as exc:
        status, message = 2, exc.render()
        if not re.match(r"rules/x\.yaml:\d+:\d+: error: ", message):
            problems.append("error not located in the rule")
    except BaseException as exc:            # noqa: BLE001 - a fuzz finding, reported
        status, message = -1, f"{type(exc).__name__}: {exc}"
        problems.append(f"raised {type(exc).__name__}")
    seconds = time.perf_counter() - t0
    if seconds > TIME_LIMIT:
        problems.append(f"took {seconds:.1f} s")
    return Outcome(status, message, seconds, problems)


@st.composite
def mutated_bytes(draw, seed: bytes, text: bool = False) -> bytes:
    """`seed` with bytes flipped, cut, inserted or spans repeated (text: printable pieces)."""
    b = bytearray(seed)
    pieces = [x.encode() for x in ["{", "}", ":", '"', "\\", "\n", " ", "graph", "op", "attr", "-1", "99999999999999999999",
                                   "nan", "\\377", "#"]]
    for _ in range(draw(st.integers(1, 6))):
        if not b:
            break
        i = draw(st.integers(0, len(b) - 1))
        op = draw(st.sampled_from(["flip", "insert", "cut", "repeat", "delete"]))
        if op == "flip":
            b[i] = draw(st.integers(0, 255))
        elif op == "insert":
            b[i:i] = draw(st.sampled_from(pieces)) if text else bytes(draw(st.lists(st.integers(0, 255), min_size=1,
                                                                                  max_size=8)))
        elif op == "cut":
            del b[i:]
        elif op == "repeat":
            n = draw(st.integers(1, 64))
            b[i:i] = b[i:i + n] * draw(st.integers(1, 20))
        else:
            del b[i:i + draw(st.integers(1, 16))]
    return bytes(b)
