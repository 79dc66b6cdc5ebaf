"""Compiling first-match rule lists into one Python function each."""
from __future__ import annotations

from typing import Callable

from engine.dsl.compiler import Compiler, run_source
from engine.pack.model import Rule


def compile_rules(compiler: Compiler, rules: list[Rule], params: tuple[str, ...]) -> Callable:
    """`f(*params) -> (value, rule_index)`; (None, -1) when no rule matches."""
    args = ", ".join("v_" + p for p in params)
    lines = [f"def _rules({args}):"]
    for i, rule in enumerate(rules):
        lines.append(f"    if {compiler.source(rule.when, params)}:")
        lines.append(f"        return ({compiler.source(rule.value, params)}, {i})")
    lines.append("    return (None, -1)")
    ns = compiler.namespace()
    run_source("\n".join(lines) + "\n", ns)
    return ns.pop("_rules")


def check_rules(compiler: Compiler, rules: list[Rule], params: tuple[str, ...] | dict,
                value: str | None = None) -> None:
    """Names and types: each `when` is a bool, each `value` of type `value` (when given)."""
    for rule in rules:
        compiler.check(rule.when, params, "bool", "a rule's `when`")
        compiler.check(rule.value, params, value, "a rule's `value`")
