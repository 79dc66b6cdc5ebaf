"""Rule packs: the frozen model of a pack (model), its strict loader (loader), rule lists (rulelist)."""
