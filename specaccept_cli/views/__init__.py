"""Views of a summary: Rich renderables (`terminal`), markdown, per-run records, progress.

Nothing here is imported at package import: `records` and `markdown` work without rich.
"""
