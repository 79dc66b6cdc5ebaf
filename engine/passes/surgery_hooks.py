"""The pack's `surgery:` section bound for one run: which control edges GE's
insert-before/insert-after leave in place, and which attributes a new node
inherits from its neighbour."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from engine.dsl.compiler import Compiler
from engine.core.errors import Collector
from engine.dsl.library import bound_functions


@dataclass(frozen=True)
class SurgeryHooks:
    keep_in_ctrl: Callable        # node → bool
    keep_out_ctrl: Callable       # node → bool
    inherit: tuple[str, ...]


def _never(_node) -> bool:
    return False


def surgery_hooks(ctx) -> SurgeryHooks:
    spec = ctx.pack.surgery
    if spec is None:
        return SurgeryHooks(_never, _never, ())
    comp = Compiler(ctx.pack.scope(("node",), functions=bound_functions(ctx)), Collector())
    keep_in = comp.function(spec.keep_in_ctrl_from, ("node",)) if spec.keep_in_ctrl_from else _never
    keep_out = comp.function(spec.keep_out_ctrl_of, ("node",)) if spec.keep_out_ctrl_of else _never
    return SurgeryHooks(keep_in, keep_out, spec.inherit_attrs)
