"""GE's runtime side: the multi-stream allocator simulator, placement copies and their loaders."""
