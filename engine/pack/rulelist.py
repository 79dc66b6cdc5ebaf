"""Compiling first-match rule lists into one Python function each."""
from __future__ import annotations

from typing import Callable

from engine.dsl.compiler import Compiler, precompile, run_source
from engine.pack.model import Rule


def compile_rules(compiler: Compiler, rules: list[Rule], params: tuple[str, ...]) -> Callable:
    """`f(*params) -> (value, rule_index)`; (None, -1) when no rule matches."""
    ns = compiler.namespace()
    run_source(rules_source(compiler, rules, params), ns)
    return ns.pop("_rules")


def rules_source(compiler: Compiler, rules: list[Rule], params) -> str:
    """One function testing the rules in order (first match wins)."""
    lines = [f"def _rules({', '.join('v_' + p for p in params)}):"]
    for i, rule in enumerate(rules):
        lines.append(f"    if {compiler.source(rule.when, params)}:")
        lines.append(f"        return ({compiler.source(rule.value, params)}, {i})")
    lines.append("    return (None, -1)")
    return "\n".join(lines) + "\n"


def check_rules(compiler: Compiler, rules: list[Rule], params: tuple[str, ...] | dict,
                value: str | None = None) -> None:
    """Names and types: each `when` is a bool, each `value` of type `value` (when given)."""
    for rule in rules:
        compiler.check(rule.when, params, "bool", "a rule's `when`")
        compiler.check(rule.value, params, value, "a rule's `value`")
    if not compiler.errors.problems:      # Note [compile at load] in engine/dsl/compiler.py
        names = tuple(compiler.scope.variables) + tuple(p for p in params if p not in compiler.scope.variables)
        precompile(rules_source(compiler, rules, names))
