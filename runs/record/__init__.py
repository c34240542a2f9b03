"""The record: the append-only event log and what is read back from it.

events (the catalogue and its one writer), history (a run rebuilt from its events and
checked against its rows; what retention keeps of removed events), and the run export
(export builds the document, export_shape describes it once, export_check reads one
back). Below the engine: nothing here imports it (docs/architecture.md#history-and-restore).
"""
