"""Passes: the algorithm registry, pass manager, run context, provenance-recording rewriter and the algorithms."""
