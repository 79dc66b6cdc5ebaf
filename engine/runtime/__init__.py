"""GE's runtime side (seed 000 §4, ge-runtime.md): the RT2 execute-graph mechanisms that
`memconflict runtime` and `run --runtime` model. What GE names and decides is in the pack's
`runtime:` section (engine/passes/runtime_section.py, rules/ge/runtime.yaml)."""
