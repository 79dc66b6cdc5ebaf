"""Pass algorithms (see engine/registry.py for what an algorithm provides).

Importing this package registers every algorithm and shared pack section.
"""
from ..registry import ALGORITHMS, SECTIONS, Algorithm, register, register_section  # noqa: F401
from .. import symbols  # noqa: E402,F401  (registers the `symbols` section)
from . import rw  # noqa: E402,F401
from . import layout  # noqa: E402,F401
from . import inplace  # noqa: E402,F401
from . import variables  # noqa: E402,F401
from . import lint  # noqa: E402,F401
from . import rewrite  # noqa: E402,F401  (the rule-data rewrite families)
from . import atomic  # noqa: E402,F401
