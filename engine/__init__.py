"""memconflict: a declarative rule engine for GE memory conflicts."""

__version__ = "0.1.0"
