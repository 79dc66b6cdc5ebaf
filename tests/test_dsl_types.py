"""The typed rule language: the function registry, the static type checker every DSL value
passes at pack load (engine/dsl/types.py), and the parser's size limits."""
from __future__ import annotations

from pathlib import Path

import pytest
from harness import edit, line_of

from engine.cli import main
from engine.core.errors import Collector, InputError, Loc
from engine.dsl import library
from engine.dsl.ast import Expr
from engine.dsl.compiler import Compiler, Scope
from engine.dsl.parser import MAX_DEPTH, parse_expr
from engine.dsl.types import (ANCHOR, ANY, BOOL, IN, INT, NODE, OUT, STR, enum, is_sub, join, list_of, lit,
                              parse_sig, parse_type)
from engine.passes.catalog import load_pack

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "train_step.pbtxt"
FIRST_RULE = "      when: node is var_like\n      value: Writeable"      # rw/out/var-like


def check_cli(args, capsys) -> tuple[int, str]:
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out + out.err


def located(path, needle: str, offset: int = 0) -> tuple[int, int, str]:
    """(line, column, text) of the first line holding `needle`, the column `offset` into it."""
    line = line_of(path, needle)
    text = path.read_text().splitlines()[line - 1]
    return line, text.index(needle) + 1 + offset, text


def rw_rule(pack, when: str) -> int:
    """Replace the first output rule's `when` (rw.yaml); returns its line."""
    f = pack / "rw.yaml"
    edit(f, FIRST_RULE, f"      when: {when}\n      value: Writeable")
    return line_of(f, f"when: {when}")


# ---- rejected rules: exit 2 and the exact located message ----------------------------------
REJECTED = [
    ("node.type < 1", 13, "cannot compare str with int", "'<' orders two numbers or two strings"),
    ("node.type == 5", 13, "cannot compare str with int", ""),
    ("node.name < 3", 13, "cannot compare str with int", "'<' orders two numbers or two strings"),
    ('node.type + 1 == "x"', 13, "cannot add str and int", ""),
    ("1 in 2", 18, "'in' needs a list on the right, not int", ""),
    ('attr(node, "x") + 1', 13, "cannot add any and int",
     "an attribute value has no static type: compare it (==, <) or test it instead"),
    ("count(consumers(node)) == true", 13, "cannot compare int with bool", ""),
    ("producer(output(node, 0)) != none", 22, "argument 1 of 'producer' must be InAnchor, not OutAnchor",
     "producer(InAnchor) -> OutAnchor"),
    ("node.ins", 18, "a rule's `when` must return bool, this returns list[InAnchor]", ""),
    ("if node.id > 0 then 1 else \"x\"", 13, "the branches of 'if' have different types: int and str", ""),
]


@pytest.mark.parametrize("when,col,message,hint", REJECTED, ids=[r[0] for r in REJECTED])
def test_rejected_rw_rule(pack_copy, capsys, when, col, message, hint):
    line = rw_rule(pack_copy, when)
    for args in (["rules", "check", pack_copy], ["run", EXAMPLE, "--rules", pack_copy, "--quiet"]):
        code, text = check_cli(args, capsys)
        assert code == 2
        expected = (f"pack/rw.yaml:{line}:{col}: error: {message}\n"
                    f"          when: {when}\n"
                    f"    {' ' * (col - 1)}^")
        assert expected in text
        assert (f"  hint: {hint}" in text) == bool(hint)
        assert "Traceback" not in text


def test_misspelled_mark_in_a_string(pack_copy, capsys):
    f = pack_copy / "layout.yaml"
    edit(f, "body: if memory_type(a) == memory_type(b) then [] else if a.is_out then [a] else [b]",
         'body: if has_mark(a, "NORMAL_INPTU") then [a] else [b]')
    line, col, src = located(f, '"NORMAL_INPTU"')
    code, text = check_cli(["rules", "check", pack_copy], capsys)
    assert code == 2
    assert text == (f"pack/layout.yaml:{line}:{col}: error: unknown Mark 'NORMAL_INPTU'\n"
                    f"    {src}\n"
                    f"    {' ' * (col - 1)}^\n"
                    "  hint: did you mean 'NORMAL_INPUT'?\n")


def test_misspelled_mark_in_skip_pair(pack_copy, capsys):
    f = pack_copy / "layout.yaml"
    edit(f, 'not has_mark(a, "CONTINUOUS_OUTPUT")', 'not has_mark(a, "CONTINUOUS_OUTPTU")')
    code, text = check_cli(["rules", "check", pack_copy], capsys)
    assert code == 2
    assert "error: unknown Mark 'CONTINUOUS_OUTPTU'" in text and "hint: did you mean 'CONTINUOUS_OUTPUT'?" in text


def test_checker_returning_a_string(pack_copy, capsys):
    f = pack_copy / "layout.yaml"
    edit(f, "body: if memory_type(a) == memory_type(b) then [] else if a.is_out then [a] else [b]",
         """body: '"isolate a"'""")
    line, col, src = located(f, '"isolate a"')
    code, text = check_cli(["rules", "check", pack_copy], capsys)
    assert code == 2
    assert text == (f"pack/layout.yaml:{line}:{col}: error: checker must return list[Anchor], this returns str\n"
                    f"    {src}\n"
                    f"    {' ' * (col - 1)}^\n")


def test_rw_value_outside_its_vocabulary(pack_copy, capsys):
    f = pack_copy / "rw.yaml"
    edit(f, FIRST_RULE, """      when: node is var_like\n      value: '"Writable"'""")
    line, col, _ = located(f, '"Writable"')
    code, text = check_cli(["rules", "check", pack_copy], capsys)
    assert code == 2
    assert f"pack/rw.yaml:{line}:{col}: error: unknown OutputRW 'Writable'" in text
    assert "hint: did you mean 'Writeable'?" in text


def test_input_type_as_output_value(pack_copy, capsys):
    f = pack_copy / "rw.yaml"
    edit(f, FIRST_RULE, "      when: node is var_like\n      value: ScopeWriteable")
    code, text = check_cli(["rules", "check", pack_copy], capsys)
    assert code == 2 and "error: unknown OutputRW 'ScopeWriteable'" in text


def test_graph_edit_outside_do(pack_copy, capsys):
    f = pack_copy / "hccl.yaml"
    edit(f, "when: count(later) > 0", 'when: count(later) > 0 and insert_before(anchor, "identity") != none')
    line, col, _ = located(f, 'insert_before(anchor, "identity") != none')
    code, text = check_cli(["rules", "check", pack_copy], capsys)
    assert code == 2
    assert (f"pack/hccl.yaml:{line}:{col}: error: 'insert_before' edits the graph and cannot be called here" in text)
    assert "hint: graph edits are allowed only in a rewrite rule's `do:` list (and a rule set's `once:`)" in text


def test_pack_function_that_edits_is_an_edit(pack_copy, capsys):
    f = pack_copy / "hccl.yaml"
    edit(f, "when: count(later) > 0", "when: count(later) > 0 and write_back(src, anchor) == none")
    code, text = check_cli(["rules", "check", pack_copy], capsys)
    assert code == 2 and "error: 'write_back' edits the graph and cannot be called here" in text


def test_pack_function_checked_at_its_argument_types(pack_copy, capsys):
    f = pack_copy / "layout.yaml"
    edit(f, "and special_memory(memory_type(anchor))", 'and special_memory("x")')
    line, col, _ = located(f, "mem not in [0, 2, 4]")
    code, text = check_cli(["rules", "check", pack_copy], capsys)
    assert code == 2
    assert f"pack/layout.yaml:{line}:{col}: error: cannot look for str in list[int]" in text


def test_unknown_desc_field(pack_copy, capsys):
    f = pack_copy / "symbols.yaml"
    edit(f, 'desc_field(anchor, "reuse_input")', 'desc_field(anchor, "reuse_inptu")')
    code, text = check_cli(["rules", "check", pack_copy], capsys)
    assert code == 2
    assert "error: 'desc_field' has no field 'reuse_inptu'" in text and "did you mean 'reuse_input'?" in text


# ---- size limits --------------------------------------------------------------------------------
SIZES = [
    ("node.id == " + "7" * 5000, 24, "integer 7777777777...7777 (5000 digits) is out of range"),
    ("node.id == 9223372036854775808", 24, "integer 9223372036854775808 is out of range"),
    ("(" * 400 + "true" + ")" * 400, 13 + MAX_DEPTH, f"expression nested more than {MAX_DEPTH} levels deep"),
    ("not " * 2000 + "true", 13 + 4 * MAX_DEPTH, f"expression nested more than {MAX_DEPTH} levels deep"),
]


@pytest.mark.parametrize("when,col,message", SIZES, ids=["5000-digits", "int64+1", "400-parens", "2000-nots"])
def test_size_limits_are_located_errors(pack_copy, capsys, when, col, message):
    line = rw_rule(pack_copy, when)
    for args in (["rules", "check", pack_copy], ["run", EXAMPLE, "--rules", pack_copy, "--quiet"]):
        code, text = check_cli(args, capsys)
        assert code == 2
        assert text.startswith(f"pack/rw.yaml:{line}:{col}: error: {message}\n")
        assert "Traceback" not in text and "RecursionError" not in text


def test_int64_bounds_parse():
    assert parse_expr("9223372036854775807").value == 2 ** 63 - 1
    assert str(parse_expr("-9223372036854775807")) == "-9223372036854775807"


def test_deepest_allowed_nesting_compiles_and_runs():
    """MAX_DEPTH levels of the construct that nests most in generated code still compile."""
    text = "[1]"
    for _ in range(MAX_DEPTH - 2):
        text = f"[x for x in {text}]"
    e = parse_expr(text)
    comp = Compiler(Scope((), {}, {}, library.placeholder_functions()), Collector())
    assert comp.function(e, ())() == [1]
    with pytest.raises(InputError, match="nested more than"):
        parse_expr("(" * (MAX_DEPTH + 1) + "1" + ")" * (MAX_DEPTH + 1))


# ---- the shipped packs ---------------------------------------------------------------------------
@pytest.mark.parametrize("pack", ["rules/ge", "rules/ge-doc"])
def test_every_shipped_value_is_type_checked(pack, monkeypatch):
    import engine.dsl.compiler as compiler
    from engine.core.resources import default_pack_dir

    checked = {}
    real = compiler.check_expr

    def spy(scope, errors, e, *args, **kw):
        t = real(scope, errors, e, *args, **kw)
        checked[id(e)] = t
        return t
    monkeypatch.setattr(compiler, "check_expr", spy)
    from engine.pack.loader import load_pack as load_with
    from engine.passes.catalog import REGISTRY
    # a fresh load (not the test session's shared one, Note [shared pack loads]), so the spy sees it
    p = load_with(default_pack_dir().parent / pack.split("/")[1], REGISTRY)
    values = [e for _, e in p.dsl_sources if isinstance(e, Expr)]
    assert len(values) > 300
    assert [str(e) for e in values if id(e) not in checked] == []


# ---- the registry and `rules functions` ---------------------------------------------------------
def test_rules_functions_lists_every_registered_function(capsys):
    code, text = check_cli(["rules", "functions"], capsys)
    assert code == 0
    lines = text.splitlines()
    for name, spec in library.REGISTRY.items():
        row = [ln for ln in lines if ln.split()[:1] == [name] and spec.sig in ln]
        assert row, name
        assert spec.doc in row[0]
    assert any(ln.split()[:1] == ["insert_before"] and "edits" in ln for ln in lines)
    assert any(ln.split()[:1] == ["fail"] and "fails" in ln for ln in lines)
    for group in ("graph", "query", "actions", "layout", "rw_conflict", "graph_lint", "rewrite"):
        assert any(ln.startswith(group + " (") for ln in lines), group
    # the pack's own functions, with their effects
    assert "pack ge: layout_conflict (" in text
    assert any(ln.split()[:1] == ["write_back"] and "edits" in ln for ln in lines)


def test_a_registered_function_is_listed_and_typed(pack_copy, capsys):
    spec = library.PrimSpec("shape_rank", (1, 1), "shape_rank(anchor): how many dims", lambda ctx: None,
                            "(Anchor) -> int")
    try:
        library.register("test-only", {"shape_rank": spec})
        code, text = check_cli(["rules", "functions"], capsys)
        assert code == 0
        assert "test-only (1)" in text
        assert any(ln.split()[:2] == ["shape_rank", "(Anchor)"] for ln in text.splitlines())
        with pytest.raises(ValueError, match="already registered by test-only"):
            library.register("other", {"shape_rank": library.PrimSpec("shape_rank", (0, 0), "", None, "() -> int")})
    finally:
        del library.REGISTRY["shape_rank"]
        del library.GROUPS["test-only"]


def test_signature_must_match_arity():
    with pytest.raises(ValueError, match="does not match arity"):
        library.PrimSpec("f", (1, 2), "", None, "(Node) -> bool")
    with pytest.raises(ValueError, match="has no signature"):
        library.PrimSpec("f", (1, 1), "", None)


# ---- types ----------------------------------------------------------------------------------------
def test_signature_text_round_trips():
    for text in ("(Node | Anchor, str) -> any", "(list[list[T]]) -> list[T]", "(str, Node | Anchor?) -> never",
                 "() -> Graph", "(Anchor, Mark) -> bool"):
        sig = parse_sig(text)
        assert str(sig).replace(" or ", " | ") in (text, text.replace("Node | Anchor", "Anchor | Node"))


def test_subtyping_and_join():
    marks = enum("Mark", ["A", "B"])
    assert is_sub(IN, ANCHOR) and is_sub(OUT, ANCHOR) and is_sub(ANCHOR, IN)     # Note [no narrowing]
    assert not is_sub(IN, OUT) and not is_sub(STR, INT) and not is_sub(BOOL, INT)
    assert is_sub(list_of(IN), list_of(ANCHOR)) and not is_sub(list_of(NODE), list_of(ANCHOR))
    assert is_sub(lit("A", Loc("f")), marks) and is_sub(marks, STR) and not is_sub(STR, marks)
    assert join(IN, OUT) == ANCHOR and join(INT, STR) is None and join(ANY, NODE) == ANY
    assert parse_type("list[Anchor]") == list_of(ANCHOR)


def _check(text: str, expect: str | None = None, edits: bool = False) -> list[str]:
    errors = Collector()
    scope = Scope(("node", "anchor"), {}, {"var_like": frozenset({"Variable"})},
                  library.placeholder_functions(), {})
    Compiler(scope, errors).check(parse_expr(text), (), expect, "this value", edits)
    return [p.message for p in errors.problems]


def test_checker_messages():
    assert _check("node is var_like and count(node.outs) > 0", "bool") == []
    assert _check("[c.node for c in consumers(node)]", "list[Node]") == []
    assert _check("node.peers") == ["Node has no field '.peers'"]
    assert _check("anchor.node.ins[0].peer.node.type == \"Const\"") == []
    assert _check("first(node.ins).peers") == ["InAnchor has no field '.peers'"]
    assert _check("node.id[0]") == ["cannot index int"]
    assert _check("any(x in node.id where x)") == ["'any' ranges over a list, not int"]
    assert _check("node.type is var_like") == ["'is' tests the op class of a Node or an anchor, not str"]
    assert _check("not node.id") == ["'not' needs a bool, not int"]
    assert _check('fail("no", node)', "list[Anchor]") == []
    assert _check("node.graph == node") == ["cannot compare Graph with Node"]
    assert _check("attr(node, \"k\") == 3 and attr(node, \"k\") > 2") == []


def test_expect_any_result():
    assert _check("node.name", "str") == []
    assert _check("node.name", "int") == ["this value must return int, this returns str"]


# ---- Note [code cache] --------------------------------------------------------------------------
def test_a_value_is_compiled_once_and_bound_per_run():
    e = parse_expr("count(node.ins) > n")
    fns = []
    for _run in range(2):
        prims = library.placeholder_functions()
        prims["count"] = library.GRAPH_PRIMITIVES["count"].primitive(len)
        comp = Compiler(Scope(("node",), {"n": 1}, {}, prims), Collector())
        fns.append(comp.function(e, ("node",)))
    a, b = fns
    assert a.__code__ is b.__code__                 # one code object ...
    assert a.__globals__ is not b.__globals__       # ... run against each compiler's namespace
    node = type("N", (), {"ins": [1, 2]})()
    assert a(node) is True and b(node) is True


def test_values_are_compiled_when_the_pack_loads_not_when_it_runs(tmp_path):
    """Note [compile at load]: after load_pack, running the whole pipeline (and single passes,
    whose functions are built from other entry points) compiles no generated code."""
    from engine.core.io import load_graph
    from engine.dsl import compiler
    from engine.pack.loader import load_pack as load_with
    from engine.passes.catalog import REGISTRY
    from engine.passes.context import RunContext
    from engine.passes.manager import check_graph, resolve_passes, run_passes

    root = Path(__file__).resolve().parents[1]
    compiler._CODE.clear()
    before = compiler.COMPILES[0]
    pack = load_with(None, REGISTRY)
    at_load = compiler.COMPILES[0] - before
    assert at_load > 200                       # every DSL value of the pack, compiled once
    graphs = [root / "examples/train_step.pbtxt"] + sorted((root / "tests/cases").glob("*/*.yaml"))[::7]
    for g in graphs:
        model, options = load_graph(str(g), pack)
        ctx = RunContext(pack, model, options)
        check_graph(ctx)
        try:
            run_passes(ctx, resolve_passes(pack, None, options))
        except Exception as exc:                # noqa: BLE001 - a GE failure is fine here
            assert type(exc).__name__ == "PassFailure", exc
    assert compiler.COMPILES[0] - before == at_load, "a run compiled generated code"


def test_a_field_of_none_is_none_and_none_carries_no_dsl_field():
    """Note [field access]: field reads compile to getattr(x, name, None), which is the
    None-safe read only while None itself has no attribute of that name."""
    from engine.dsl.compiler import FIELDS, _runtime
    assert FIELDS and not [f for f in FIELDS if hasattr(None, f)]
    scope = Scope(("node",), {}, {}, {})
    fn = Compiler(scope, Collector()).function(parse_expr("node.graph.parent_node", Loc("t", 1, 1)), ("node",))
    assert fn(None) is None and _runtime.type_of(None) is None


def test_a_type_test_on_a_variable_reads_nodes_anchors_and_none_alike():
    """Note [inline type test]: `x is cls` on a variable reads a node's type in place and
    leaves anchors, none and other values to type_of."""
    from engine.core.graph import Node
    from engine.proto import ge_ir_pb2 as pb
    op = pb.OpDef(name="a", type="Add")
    op.input_desc.add()
    node = Node(op, None)
    scope = Scope(("x",), {}, {"adds": frozenset({"Add"})}, {})
    comp = Compiler(scope, Collector())
    fn = comp.function(parse_expr("x is adds", Loc("t", 1, 1)), ("x",))
    neg = comp.function(parse_expr("x is not adds", Loc("t", 1, 1)), ("x",))
    assert fn(node) and fn(node.ins[0]) and not fn(None) and not fn(3)
    assert not neg(node) and neg(None)
    node.type = "Sub"
    assert not fn(node) and not fn(node.ins[0])
