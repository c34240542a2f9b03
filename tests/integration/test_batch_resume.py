"""The bulk operations' promise with real workers (docs/operating.md#bulk-operations):
a bulk retry of 600 failed runs (six of the service's chunks) whose worker is SIGKILLed
partway, then resumed by a new worker, retries each run exactly once: one run_reopened
event per run, one more attempt per failed step, every item applied, the counts exact."""

from __future__ import annotations

import signal
import sys
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.db.models import Count
from django.http import QueryDict

from runs.batches import service
from runs.models import Attempt, Batch, BatchItem, Event, Run, Step
from runs.record import events
from runs.states import BatchItemStatus, BatchStatus, RunStatus, StepStatus
from tests.support.batches import failed_runs
from tests.support.places import ROOT
from tests.support.waiting import wait_for

# 600 runs are six chunks of service.CHUNK: the kill lands after two and a half, so the
# resumed worker finishes a chunk another began and starts fresh ones. About 1 minute.
pytestmark = [pytest.mark.workers, pytest.mark.soak, pytest.mark.timeout(900)]

RUNS = 600
FILTER = "status=failed&workflow=fails-while-flagged"
# The retried steps are queued by hundreds faster than one worker runs them: with the
# harness's 3 s republish bound the sweeper (every 0.5 s) would send each waiting one
# again and again, and the batch's next message would wait behind thousands of
# duplicates. A bound longer than the backlog lasts (about 15 s here) keeps the queue to
# what is real; it is also how long the messages the killed worker had prefetched wait
# to be sent again, so no longer than it needs (120 s made this test take two minutes).
ENV = {"RUNS_TEST_FAIL_STEP": "1", "RUNS_REPUBLISH_AFTER_SECONDS": "30"}


def clone_failed_runs(template: Run, copies: int) -> None:
    """`copies` more runs exactly like `template` (a failed run the engine made), by the
    UI benchmark's bulk INSERT … SELECT (bench/seed_ui.py: ids mapped, the run id
    replaced in claim keys and payloads, every constraint and the event log's trigger
    satisfied), each created a microsecond after the one before."""
    sys.path.insert(0, str(ROOT / "bench"))
    import seed_ui

    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            # seed_ui.clone's table: no merge among these runs, so no change id to
            # replace ('' replaces nothing) and no search key to give a new value.
            "CREATE TEMP TABLE clone (n int PRIMARY KEY, template uuid NOT NULL, "
            "run_id uuid NOT NULL DEFAULT gen_random_uuid(), shift interval NOT NULL, "
            "change_id text, change_from text NOT NULL DEFAULT '', "
            "change_to text NOT NULL DEFAULT '') ON COMMIT DROP"
        )
        cursor.execute(
            "INSERT INTO clone (n, template, shift) "
            "SELECT n, %s, n * interval '1 microsecond' FROM generate_series(1, %s) AS n",
            [template.id, copies],
        )
        seed_ui.clone(cursor, lambda _: None)


def test_a_bulk_retry_killed_halfway_and_resumed_retries_each_run_exactly_once(
    cluster, monkeypatch
):
    [template] = failed_runs(monkeypatch, 1)
    clone_failed_runs(template, RUNS - 1)
    runs = Run.objects.filter(workflow="fails-while-flagged")
    assert runs.filter(status=RunStatus.FAILED).count() == RUNS
    assert set(Step.objects.filter(run__in=runs).values_list("status", "attempts")) == {
        (StepStatus.FAILED, 1)
    }

    batch = service.create_batch(
        operation="retry", params=QueryDict(FILTER), actor="ann", reason="the service is back"
    )
    assert batch.total == RUNS
    # The retried step fails again on these workers: a run retried twice would show it.
    doomed = cluster.worker(**ENV)
    cluster.beat(**ENV)

    def done() -> int:
        return Batch.objects.get(pk=batch.id).done

    # Not a multiple of service.CHUNK: the kill lands inside a chunk, between items or
    # inside one (its transaction rolls back).
    wait_for(lambda: done() >= 250, timeout=600, what="250 items done", on_timeout=cluster.logs)
    doomed.signal(signal.SIGKILL)
    assert doomed.wait_exit() == -signal.SIGKILL
    at_kill = done()
    assert 250 <= at_kill < RUNS, at_kill

    cluster.worker(**ENV)  # its start resumes the batch
    wait_for(
        lambda: Batch.objects.get(pk=batch.id).status not in (BatchStatus.RUNNING,),
        timeout=900,
        what="the batch to finish",
        on_timeout=cluster.logs,
    )
    # Every retried step ran again (and failed again, as the workers are told to).
    wait_for(
        lambda: runs.filter(status=RunStatus.FAILED).count() == RUNS,
        timeout=900,
        what="every retried run to fail again",
        on_timeout=cluster.logs,
    )

    batch.refresh_from_db()
    assert batch.status == BatchStatus.SUCCEEDED
    assert (batch.total, batch.done, batch.applied, batch.refused, batch.failed) == (
        RUNS,
        RUNS,
        RUNS,
        0,
        0,
    )
    assert batch.finished_at is not None and batch.finished_at - batch.created_at < timedelta(
        minutes=20
    )
    items = BatchItem.objects.filter(batch=batch)
    assert items.count() == RUNS
    assert items.values("run").distinct().count() == RUNS
    assert set(items.values_list("status", flat=True)) == {BatchItemStatus.APPLIED}
    assert set(items.values_list("run_id", flat=True)) == set(runs.values_list("id", flat=True))

    # Exactly one retry per run, from this batch.
    reopened = Event.objects.filter(run__in=runs, type=events.RUN_REOPENED)
    per_run = reopened.values("run").annotate(n=Count("id")).values_list("n", flat=True)
    assert len(per_run) == RUNS and set(per_run) == {1}
    assert set(reopened.values_list("payload__reason", flat=True)) == {
        f"the service is back (batch {batch.id})"
    }
    # Each failed step got exactly one more attempt: 1 before, 2 now.
    assert set(
        Step.objects.filter(run__in=runs).values_list("status", "attempts", "max_attempts")
    ) == {(StepStatus.FAILED, 2, 2)}
    per_step = Attempt.objects.filter(run__in=runs).values("step").annotate(n=Count("id"))
    assert {row["n"] for row in per_step} == {2} and len(per_step) == RUNS
