"""Bulk operations on runs (docs/operating.md#bulk-operations): cancel every active run
a runs-list filter matches, or retry the failed steps of every failed one.

- selection.py: the filter (the runs list's own parser, runs/web/queries.py), its
  normalized query string, and the preview (what a batch would do), which writes
  nothing;
- service.py: creating a batch (its selection frozen in one INSERT … SELECT) and
  processing it, one run per transaction, resumable after any crash.

The engine decides each run (engine.cancel_run, engine.retry_run); nothing here
repeats its rules."""
