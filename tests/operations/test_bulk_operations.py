"""Bulk operations (runs/batches/): the selection frozen at confirmation, each run
changed by the engine in its own transaction, refusals recorded as refused, a preview
that writes nothing, and bad input refused before anything is written."""

from __future__ import annotations

import pytest
from django.http import QueryDict

from runs import engine
from runs.batches import selection, service
from runs.engine.tools import publish
from runs.errors import InvalidBatch
from runs.models import Batch, BatchItem, Claim, Event, Run, Step
from runs.record import events
from runs.states import BatchItemStatus, BatchStatus, RunStatus, StepStatus
from tests.support.api import written
from tests.support.batches import active_runs, failed_runs


def q(text: str = "") -> QueryDict:
    return QueryDict(text)


def items_of(batch: Batch) -> dict:
    return {
        item.run_id: (item.status, item.message) for item in BatchItem.objects.filter(batch=batch)
    }


def test_bulk_cancel_cancels_active_runs_and_refuses_finished_ones(db, monkeypatch):
    active = active_runs(3)
    finished = failed_runs(monkeypatch, 2)

    batch = service.create_batch(
        operation="cancel", params=q(), actor="ann", reason="the source table is wrong"
    )
    late = active_runs(1)[0]  # matches the filter, after the selection was frozen
    assert (batch.status, batch.total, batch.done) == (BatchStatus.PENDING, 5, 0)

    progress = service.process(batch.id)

    batch.refresh_from_db()
    assert (progress.processed, progress.more) == (5, False)
    assert (batch.status, batch.done, batch.applied, batch.refused, batch.failed) == (
        BatchStatus.SUCCEEDED,
        5,
        3,
        2,
        0,
    )
    items = items_of(batch)
    assert {items[r.id] for r in active} == {(BatchItemStatus.APPLIED, "cancelled")}
    for run in finished:
        status, message = items[run.id]
        assert status == BatchItemStatus.REFUSED
        assert message == f"run {run.id} is already failed; it cannot be cancelled"
        assert Run.objects.get(pk=run.id).status == RunStatus.FAILED
    assert late.id not in items
    assert Run.objects.get(pk=late.id).status == RunStatus.PENDING
    for run in active:
        assert Run.objects.get(pk=run.id).status == RunStatus.CANCELLED
        event = Event.objects.get(run=run, type=events.RUN_CANCELLED)
        assert event.payload["actor"] == "ann"
        assert event.payload["reason"] == f"the source table is wrong (batch {batch.id})"
    assert not Event.objects.filter(run__in=finished, type=events.RUN_CANCELLED).exists()
    # Nothing is left to do: a second message changes nothing.
    assert service.process(batch.id).processed == 0


def test_bulk_retry_retries_each_failed_run_once_with_its_key(db, monkeypatch):
    failed = failed_runs(monkeypatch, 3)
    other = active_runs(1)[0]
    keys = {c.run_id: c.key for c in Claim.objects.filter(run__in=failed)}

    batch = service.create_batch(
        operation="retry", params=q("status=failed"), actor="ann", reason="service is back"
    )
    assert (batch.filter, batch.total) == ("status=failed", 3)
    service.process(batch.id, limit=2)
    batch.refresh_from_db()
    assert (batch.status, batch.done) == (BatchStatus.RUNNING, 2)
    service.process(batch.id)

    batch.refresh_from_db()
    assert (batch.status, batch.applied, batch.refused) == (BatchStatus.SUCCEEDED, 3, 0)
    assert not BatchItem.objects.filter(batch=batch, run=other).exists()
    for run in failed:
        assert Run.objects.get(pk=run.id).status == RunStatus.RUNNING
        step = Step.objects.get(run=run)
        assert (step.status, step.attempts, step.max_attempts) == (StepStatus.QUEUED, 1, 2)
        [reopened] = Event.objects.filter(run=run, type=events.RUN_REOPENED)
        assert reopened.payload["steps"] == ["call_service"]
        assert reopened.payload["reason"] == f"service is back (batch {batch.id})"
        assert reopened.payload["batch"] == batch.id  # named by its id, not only in words
        assert reopened.payload["actor"] == "ann"
        # An abandoned idempotent claim: the retry keeps its key.
        assert list(Claim.objects.filter(run=run).values_list("key", flat=True)) == [keys[run.id]]
        assert items_of(batch)[run.id] == (
            BatchItemStatus.APPLIED,
            "retried: the run is running again",
        )


def test_a_run_that_changed_after_the_selection_is_refused_with_the_engines_reason(db, monkeypatch):
    [run] = failed_runs(monkeypatch, 1)
    batch = service.create_batch(operation="retry", params=q(), actor="ann", reason="again")
    engine.retry_steps(run_id=run.id, step_keys=["call_service"], actor="bob")

    service.process(batch.id)

    batch.refresh_from_db()
    assert (batch.applied, batch.refused) == (0, 1)
    assert items_of(batch)[run.id] == (
        BatchItemStatus.REFUSED,
        f"run {run.id} is already running; it cannot be retried (only a failed run's steps "
        "are retried)",
    )
    assert Event.objects.filter(run=run, type=events.RUN_REOPENED).count() == 1


def test_preview_counts_refusals_and_keys_and_writes_nothing(db, monkeypatch):
    failed = failed_runs(monkeypatch, 3)
    active_runs(2)
    monkeypatch.setattr(selection, "SAMPLE", 2)
    before = written()

    preview = selection.preview("retry", q())

    assert written() == before and not Batch.objects.exists()
    assert (preview.matched, preview.capped, preview.applies, preview.refused) == (5, False, 3, 2)
    assert [(r.why, r.count) for r in preview.refusals] == [
        ("still pending: only a failed run's steps are retried", 2)
    ]
    newest = sorted(failed, key=lambda r: r.created_at, reverse=True)[:2]
    assert [s.run_id for s in preview.samples] == [r.id for r in newest]
    assert preview.rest == 1
    for sample, run in zip(preview.samples, newest, strict=True):
        key = Claim.objects.get(run=run).key
        assert sample.plan is not None
        assert sample.plan.steps == (
            ("call_service", "idempotent", f"the same key {key} (the external system dedupes it)"),
        )

    cancel = selection.preview("cancel", q("workflow=pure-chain"))
    assert (cancel.matched, cancel.applies, cancel.refused, len(cancel.samples)) == (2, 2, 0, 2)
    assert written() == before


def test_preview_above_the_cap_says_more_than_and_confirming_is_refused(db, monkeypatch):
    active_runs(3)
    monkeypatch.setattr(selection, "MAX_RUNS", 2)

    preview = selection.preview("cancel", q())

    assert (preview.matched, preview.capped, preview.matched_label) == (3, True, "more than 2")
    assert not preview.confirmable
    with pytest.raises(InvalidBatch) as refused:
        service.create_batch(operation="cancel", params=q(), actor="ann", reason="too many")
    assert refused.value.field == "filter"
    assert "more than 2 runs" in str(refused.value)
    assert not Batch.objects.exists() and not BatchItem.objects.exists()


@pytest.mark.parametrize(
    ("operation", "query", "reason", "field", "message"),
    [
        ("delete", "", "why", "operation", "unknown operation 'delete': it is cancel or retry"),
        ("cancel", "", "", "reason", "a reason is required"),
        ("cancel", "", "   ", "reason", "a reason is required"),
        ("cancel", "status=bogus", "why", "status", "status: unknown status 'bogus'"),
        ("retry", "created_after=yesterday", "why", "created_after", "'yesterday' is not a date"),
        ("cancel", "workflow=no-such-workflow", "why", "filter", "no run matches this filter"),
    ],
)
def test_bad_input_is_refused_naming_its_field_and_writes_nothing(
    db, operation, query, reason, field, message
):
    active_runs(1)
    before = written()

    with pytest.raises(InvalidBatch) as refused:
        service.create_batch(operation=operation, params=q(query), actor="ann", reason=reason)

    assert refused.value.field == field
    assert message in str(refused.value)
    assert written() == before
    assert not Batch.objects.exists() and not BatchItem.objects.exists()


def test_the_normalized_filter_selects_what_the_runs_list_selects(db):
    params = q("page=3&workflow=+pure-chain+&status=pending&q=&operation=cancel")
    assert selection.normalized(params) == "status=pending&workflow=pure-chain"


def test_resume_sends_again_the_batches_that_stopped_moving(db, monkeypatch, settings):
    sent: list[tuple[str, int]] = []
    monkeypatch.setattr(publish, "send", lambda task, arg, countdown=None: sent.append((task, arg)))
    active_runs(2)
    batch = service.create_batch(operation="cancel", params=q(), actor="ann", reason="stop")
    settings.RUNS_BATCH_STALL_SECONDS = 3600

    assert service.resume() == [] and sent == []  # it moved a moment ago
    assert service.resume(stalled_only=False) == [batch.id]  # a worker's start
    assert sent == [("runs.process_batch", batch.id)]
    settings.RUNS_BATCH_STALL_SECONDS = -1
    assert service.resume() == [batch.id]
    service.process(batch.id)
    assert service.resume(stalled_only=False) == []  # finished: nothing to resume
    beat = settings.CELERY_BEAT_SCHEDULE["resume-batches"]
    assert beat["task"] == "runs.resume_batches"
