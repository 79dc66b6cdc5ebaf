"""Pass algorithms (see engine/passes/registry.py for what an algorithm provides).

Importing this package registers every algorithm and shared pack section.
"""
from engine.passes import symbols  # noqa: E402,F401  (registers the `symbols` section)
from engine.passes import runtime_section  # noqa: E402,F401  (registers the `runtime` section)
from engine.passes.algorithms import rw  # noqa: E402,F401
from engine.passes.algorithms import layout  # noqa: E402,F401
from engine.passes.algorithms import inplace  # noqa: E402,F401
from engine.passes.algorithms import variables  # noqa: E402,F401
from engine.passes.algorithms import lint  # noqa: E402,F401
from engine.passes.algorithms import rewrite  # noqa: E402,F401  (the rule-data rewrite families)
from engine.passes.algorithms import atomic  # noqa: E402,F401
