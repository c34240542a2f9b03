"""A run as one versioned JSON document, for a ticket or a post-mortem (docs/api.md,
"Run export"): the run, its steps, attempts, claims with their resolutions, signals,
compacted map registries, and its history (the events, or what retention kept of those
it removed: runs/record/history.py's summary), with counts that runs/record/export_check.py checks.

Read side, below the engine: it reads rows and writes nothing. Everything is read in
one snapshot (runs/record/history.py `snapshot()`), so a run that moves on meanwhile is
exported whole, as of one instant. Rows are read as plain values with `.iterator()`:
a map of 5,000 items has 5,000 item claims (the completed-item registry,
docs/architecture.md#the-completed-item-registry), and none of them is held as a model
instance. Who may export which run is the caller's: it passes the runs it may read.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

from django.db import connection
from django.db.models import QuerySet

from runs.errors import RunNotFound
from runs.models import Attempt, Claim, Event, MapRegistry, Run, RunHistorySummary, Signal, Step
from runs.record import export_shape as shape

# Re-exported: readers (export_check, the schema's enum names in settings) name them here.
from runs.record.export_shape import FORMAT as FORMAT
from runs.record.export_shape import FORMATS as FORMATS
from runs.record.export_shape import VERSION as VERSION
from runs.record.export_shape import VERSIONS as VERSIONS
from runs.record.history import snapshot

# The document's shape is runs/record/export_shape.py's; the columns read are its fields.
RUN_FIELDS = shape.fields_of(shape.ExportRun)
STEP_FIELDS = shape.fields_of(shape.ExportStep, but=("parent", "item_count"))
ATTEMPT_FIELDS = shape.fields_of(shape.ExportAttempt, but=("step",))
CLAIM_FIELDS = shape.fields_of(shape.ExportClaim, but=("step", "attempt", "resolution"))
SIGNAL_FIELDS = shape.fields_of(shape.ExportSignal, but=("consumed_by",))
EVENT_FIELDS = shape.fields_of(shape.ExportEvent, but=("step",))


def filename(run_id: uuid.UUID | str) -> str:
    """The name a download of the document takes."""
    return f"run-{run_id}.json"


def build(
    run_id: uuid.UUID, *, exported_by: str, runs: QuerySet[Run] | None = None
) -> dict[str, Any]:
    """The export document of the run, read in one snapshot. `runs` are the runs the
    caller may read (a submitter: its own); a run outside them is RunNotFound, as an
    unknown one is. `exported_by` is the principal (`user:<name>`, `cli`)."""
    with snapshot():
        doc = _build(run_id, exported_by, Run.objects.all() if runs is None else runs)
    # Written through the document's one description: a field it lacks, or one of the
    # wrong type, fails here rather than in a reader's hands.
    return shape.RunExport.model_validate(doc).model_dump(mode="json")


def _build(run_id: uuid.UUID, exported_by: str, runs: QuerySet[Run]) -> dict[str, Any]:
    run = runs.filter(pk=run_id).values(*RUN_FIELDS).first()
    if run is None:
        raise RunNotFound(run_id)
    with connection.cursor() as cursor:
        # The snapshot's own instant (a transaction's now() is its start).
        cursor.execute("SELECT now()")
        (exported_at,) = cursor.fetchone()
    steps = list(_steps(run_id))
    attempts = list(_attempts(run_id))
    claims = list(_claims(run_id))
    registries = list(_registries(run_id))
    signals = list(_signals(run_id))
    summary = _summary(run_id)
    events = list(_events(run_id))
    return {
        "format": FORMAT,
        "version": VERSION,
        "exported_at": exported_at,
        "exported_by": exported_by,
        "run": run,
        "steps": steps,
        "attempts": attempts,
        "claims": claims,
        "registries": registries,
        "signals": signals,
        "history": {"summary": summary, "events": events},
        "counts": counts_of(steps, attempts, claims, signals, summary, events),
    }


def counts_of(
    steps: list[Any],
    attempts: list[Any],
    claims: list[Any],
    signals: list[Any],
    summary: dict[str, Any] | None,
    events: list[Any],
) -> dict[str, int]:
    """The document's counts, as export_check recomputes them from its sections."""
    return {
        "steps": len(steps),
        "attempts": len(attempts),
        "claims": len(claims),
        "item_claims": sum(1 for c in claims if c.get("item_key") is not None),
        "signals": len(signals),
        "events": len(events),
        "events_removed": 0 if summary is None else int(summary["events_removed"]),
    }


def _steps(run_id: uuid.UUID) -> Iterator[dict[str, Any]]:
    """Plan order (id). A batch names its map step by key; its items are counted, not
    copied (they are the mapped step's result, and the item claims carry their keys)."""
    keys = dict(Step.objects.filter(run_id=run_id).values_list("id", "key"))
    rows = (
        Step.objects.filter(run_id=run_id)
        .order_by("id")
        .values(*STEP_FIELDS, "parent_id", "items")
        .iterator()
    )
    for values in rows:
        parent_id = values.pop("parent_id")
        items = values.pop("items")
        step = dict(values)
        step["parent"] = None if parent_id is None else keys[parent_id]
        step["item_count"] = len(items) if isinstance(items, list) else None
        yield step


def _attempts(run_id: uuid.UUID) -> Iterator[dict[str, Any]]:
    rows = (
        Attempt.objects.filter(run_id=run_id)
        .order_by("step_id", "number")
        .values(*ATTEMPT_FIELDS, "step__key")
        .iterator()
    )
    for values in rows:
        step = values.pop("step__key")
        yield {"step": step, **values}


def _claims(run_id: uuid.UUID) -> Iterator[dict[str, Any]]:
    """Step claims and item claims alike, by id. A resolved claim says who decided,
    when, why and on what evidence; `null` for one nobody resolved."""
    rows = (
        Claim.objects.filter(run_id=run_id)
        .order_by("id")
        .values(
            *CLAIM_FIELDS,
            "step__key",
            "attempt__number",
            "resolved_by",
            "resolved_at",
            "resolution_note",
        )
        .iterator()
    )
    for values in rows:
        step = values.pop("step__key")
        attempt = values.pop("attempt__number")
        by, at, note = (values.pop(k) for k in ("resolved_by", "resolved_at", "resolution_note"))
        claim = {"step": step, "attempt": attempt, **values}
        evidence = values["evidence"]
        claim["resolution"] = (
            None
            if at is None
            else {
                "outcome": values["status"],
                "by": by,
                "at": at,
                "note": note,
                "evidence": evidence.get("resolution") if isinstance(evidence, dict) else None,
            }
        )
        yield claim


def _registries(run_id: uuid.UUID) -> Iterator[dict[str, Any]]:
    """A map step's compacted registry: the item claims retention folded into a
    watermark and its exceptions (those claims are no longer in `claims`)."""
    rows = (
        MapRegistry.objects.filter(run_id=run_id)
        .order_by("step_id")
        .values("step__key", "items", "batch_size", "watermark", "exceptions", "updated_at")
        .iterator()
    )
    for row in rows:
        values: dict[str, Any] = dict(row)
        step = values.pop("step__key")
        yield {"step": step, **values}


def _signals(run_id: uuid.UUID) -> Iterator[dict[str, Any]]:
    rows = (
        Signal.objects.filter(run_id=run_id)
        .order_by("id")
        .values(*SIGNAL_FIELDS, "consumed_by_step__key")
        .iterator()
    )
    for values in rows:
        consumed_by = values.pop("consumed_by_step__key")
        yield {**values, "consumed_by": consumed_by}


def _summary(run_id: uuid.UUID) -> dict[str, Any] | None:
    """What retention kept of the events it removed (seq first_seq..last_seq): their
    counts by type and their projection (runs/record/history.py Projection)."""
    values = (
        RunHistorySummary.objects.filter(run_id=run_id)
        .values("events_removed", "first_seq", "last_seq", "counts", "projection", "removed_at")
        .first()
    )
    return None if values is None else dict(values)


def _events(run_id: uuid.UUID) -> Iterator[dict[str, Any]]:
    rows = (
        Event.objects.filter(run_id=run_id)
        .order_by("seq")
        .values(*EVENT_FIELDS, "step__key")
        .iterator()
    )
    for values in rows:
        step = values.pop("step__key")
        event = dict(values)
        yield {
            "seq": event.pop("seq"),
            "type": event.pop("type"),
            "step": step,
            **event,
        }
