"""`memconflict diff OLD NEW`: what changed between two rule packs, and what the
change does to real graphs.

* engine/diff/source.py — OLD/NEW as folders or `REV:path` (read from git);
* engine/diff/packdiff.py, sections.py, tree.py — the semantic pack diff;
* engine/diff/impact.py — both packs run on a corpus (worker processes), the
  isolations matched by position and linked back to the rule changes;
* engine/diff/render.py, page.py — terminal summary, JSON, HTML;
* engine/diff/cli.py — the subcommand.
"""
