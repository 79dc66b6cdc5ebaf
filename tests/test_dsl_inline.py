"""Note [inline pack functions] (engine/dsl/compiler.py): a pack function called with
variables or constants compiles to its body in place; the value is the call's, and the
cases that must stay calls (memo, recursion, a binder hiding an argument, an argument
read twice) do."""
from __future__ import annotations

from engine.core.errors import Collector
from engine.dsl import library
from engine.dsl.compiler import Compiler, Scope
from engine.dsl.parser import parse_expr


def _compiler(defs: dict[str, tuple[tuple[str, ...], str, bool]], seen: list | None = None) -> Compiler:
    """A compiler whose scope has the pack functions `defs` (name → params, body, memo) and
    `tick(x)`, a primitive that records each evaluation of its argument and returns it."""
    specs = {name: library.PrimSpec(name, (len(ps), len(ps)), "", lambda ctx: None,
                                    template=(ps, parse_expr(body)), memo=memo)
             for name, (ps, body, memo) in defs.items()}
    prims = library.placeholder_functions(specs)
    prims["count"] = library.GRAPH_PRIMITIVES["count"].primitive(lambda x: 0 if x is None else len(x))
    log = seen if seen is not None else []
    prims["first"] = library.GRAPH_PRIMITIVES["first"].primitive(lambda x: (log.append(x), x[0] if x else None)[1])
    comp = Compiler(Scope(("x", "y"), {"K": 3}, {}, prims), Collector())
    for name, (ps, body, memo) in defs.items():
        comp.define(name, ps, parse_expr(body), memo)
    return comp


def test_a_call_with_variable_and_constant_arguments_is_its_body():
    comp = _compiler({"plus": (("a", "b"), "a + b", False), "big": (("a",), "plus(a, K) > 4", False)})
    src = comp.source(parse_expr("big(x) and plus(y, 1) == 3"), ("x", "y"))
    assert "f_big(" not in src and "f_plus(" not in src, src
    f = comp.function(parse_expr("big(x) and plus(y, 1) == 3"), ("x", "y"))
    assert f(2, 2) is True and f(1, 2) is False and f(2, 5) is False


def test_memo_and_recursive_functions_stay_calls():
    comp = _compiler({"once": (("a",), "a + 1", True),
                      "down": (("a",), "if a > 0 then down(a - 1) else 0", False)})
    src = comp.source(parse_expr("once(x) + down(y)"), ("x", "y"))
    assert "f_once(" in src and "f_down(" in src, src
    assert comp.function(parse_expr("once(x) + down(y)"), ("x", "y"))(4, 3) == 5


def test_a_binder_of_the_argument_name_keeps_the_call():
    # inlining `any(x in a where ...)` with a = x would make the comprehension's x hide the argument
    comp = _compiler({"has_big": (("a",), "any(x in a where x > 2)", False)})
    src = comp.source(parse_expr("has_big(x)"), ("x",))
    assert "f_has_big(" in src, src
    assert comp.function(parse_expr("has_big(x)"), ("x",))([1, 5]) is True


def test_a_parameter_shadowed_in_the_body_reads_the_binder():
    comp = _compiler({"pick": (("a",), "[a for a in [1, 2, a]]", False)})
    assert comp.function(parse_expr("pick(y)"), ("x", "y"))(None, 7) == [1, 2, 7]


def test_a_complex_argument_is_evaluated_once_when_inlined_or_called():
    seen: list = []
    comp = _compiler({"small": (("m",), "m not in [0, 2, 4]", False),      # read once: inlined
                      "twice": (("m",), "m + m", False),                   # read twice: a call
                      "maybe": (("m",), "false and m > 1", False)},        # maybe not read: a call
                     seen)
    e = parse_expr("small(first(x))")
    assert "f_small(" not in comp.source(e, ("x",))
    assert comp.function(e, ("x",))([3]) is True and seen == [[3]]
    seen.clear()
    e = parse_expr("twice(first(x))")
    assert "f_twice(" in comp.source(e, ("x",))
    assert comp.function(e, ("x",))([3]) == 6 and seen == [[3]]
    seen.clear()
    e = parse_expr("maybe(first(x))")
    assert "f_maybe(" in comp.source(e, ("x",))
    assert comp.function(e, ("x",))([3]) is False and seen == [[3]]


# ---- Note [inline attribute tests] --------------------------------------------------------
def _attr_compiler():
    prims = library.placeholder_functions()
    for name, fn in (("attr", library.node_attr), ("has_attr", library._has_attr), ("attr_true", library._attr_true)):
        prims[name] = library.GRAPH_PRIMITIVES[name].primitive(fn)
    return Compiler(Scope(("n",), {"KEY": "_memconflict_flag"}, {}, prims), Collector())


def test_attribute_tests_of_a_variable_compile_in_place():
    comp = _attr_compiler()
    for text in ('attr_true(n, "k")', 'has_attr(n, KEY)', 'attr(n, "k")'):
        src = comp.source(parse_expr(text), ("n",))
        assert "_ak(v_n)" in src, src
    # a subject that is not a variable (read once) and a key that is not a literal stay calls
    assert "f_attr_true(" in comp.source(parse_expr('attr_true(n.node, "k")'), ("n",)) \
        and "_ak(" not in comp.source(parse_expr('attr_true(n.node, "k")'), ("n",))
    assert "_ak(" not in comp.source(parse_expr('has_attr(n, n.name)'), ("n",))


def test_inline_attribute_tests_answer_as_the_primitives():
    from engine.core.attrs import set_node_attr
    from engine.core.dumpio import load_model
    from pathlib import Path
    model = load_model(Path(__file__).resolve().parent.parent / "examples" / "train_step.pbtxt")
    node = next(iter(model.all_nodes()))
    set_node_attr(node, "_memconflict_flag", True)
    set_node_attr(node, "_memconflict_text", "v")
    set_node_attr(node, "_memconflict_false", False)
    comp = _attr_compiler()
    subjects = [node, node.outs[0] if node.outs else node.ins[0], None]
    for fn, prim in (("attr_true", library._attr_true), ("has_attr", library._has_attr),
                     ("attr", library.node_attr)):
        for key in ("_memconflict_flag", "_memconflict_text", "_memconflict_false", "_memconflict_absent"):
            f = comp.function(parse_expr(f'{fn}(n, "{key}")'), ("n",))
            for subject in subjects:
                assert f(subject) == prim(subject, key), (fn, key, subject)
                assert type(f(subject)) is type(prim(subject, key)), (fn, key, subject)


def test_an_ordering_of_values_that_are_never_none_is_pythons_own():
    """Note [direct comparisons]: `count(...) > 1` is compiled to `>` (count gives 0 for
    none); an operand that may be none keeps binop's none-safe answer (false)."""
    comp = _compiler({})
    src = comp.source(parse_expr("count(x) > 1 and 2 <= count(y)"), ("x", "y"))
    assert "binop" not in src, src
    f = comp.function(parse_expr("count(x) > 1 and 2 <= count(y)"), ("x", "y"))
    assert f([1, 2], [3, 4, 5]) is True and f(None, [1, 2]) is False and f([1, 2], None) is False
    # x itself may be none: binop, whose answer for none is false (Python's would raise)
    src = comp.source(parse_expr("x > count(y)"), ("x", "y"))
    assert "_rt.binop('>'" in src, src
    assert comp.function(parse_expr("x > count(y)"), ("x", "y"))(None, [1]) is False
    # a pass's own `count` (bound in place of the library's) is not known to be total
    prims = dict(comp.scope.functions)
    prims["count"] = library.GRAPH_PRIMITIVES["count"].primitive(len, inline=False)
    other = Compiler(Scope(("x",), {}, {}, prims), Collector())
    assert "_rt.binop('>'" in other.source(parse_expr("count(x) > 1"), ("x",))
