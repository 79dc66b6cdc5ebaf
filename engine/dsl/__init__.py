"""The rule DSL: syntax tree (ast), parser, compiler, the function library (library, queries)."""
