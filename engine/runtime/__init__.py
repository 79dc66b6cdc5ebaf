"""GE's runtime side (seed 000 §4, ge-runtime.md): the RT2 execute-graph mechanisms that
`memconflict runtime` and `run --runtime` model — If/Case lowering, event stages, io-reuse
checks, the multi-stream allocator simulator and placement copies. What GE names and decides
is in the pack: its `runtime:` section (engine/passes/runtime_section.py, rules/ge/runtime.yaml)
and rules/ge/runtime-memory.yaml (engine/pack/runtime_memory.py)."""
