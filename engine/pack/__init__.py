"""Rule packs: the frozen model of a pack (model), its strict loader (loader), overlays
resolved onto their base pack (overlay), rule lists (rulelist)."""
