"""The cyclic collector paused over work that allocates much and frees little.

Note [gc]: loading a graph, running a pass, planning variables, building a report or
running a memory trace makes 10^5-10^7 objects with no reference cycles among them; each
full collection the allocations trigger rescans everything made so far and frees nothing,
so with the collector on such work grows faster than linearly. `no_gc()` turns the
collector off inside and leaves it as it was after (a caller that had it off keeps it off).
"""
from __future__ import annotations

import gc
from contextlib import contextmanager


@contextmanager
def no_gc():
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
