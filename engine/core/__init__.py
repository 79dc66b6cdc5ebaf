"""The graph core: errors and locations, strict YAML, the graph model and its edits, attributes, dump and YAML-graph I/O."""
