"""The seed scenario (docs/architecture.md#the-problem): 500 records in batches of 50, with real
workers
and real SIGKILLs. A duplicate would show as a second TargetRecord row."""

from __future__ import annotations

import signal

import pytest
from django.db.models import Count

from examples.models import TargetRecord
from runs import engine
from runs.models import Attempt, Claim, Event, Step
from runs.record import events
from runs.states import AttemptStatus, ClaimStatus, RunStatus, StepStatus

from .helpers import wait_settled

pytestmark = [pytest.mark.workers, pytest.mark.broker]

INPUT = {"count": 500, "batch_size": 50}


def assert_migrated_exactly_once(run) -> None:
    rows = TargetRecord.objects.filter(run_id=run.id)
    assert rows.count() == 500
    assert rows.values("record_id").distinct().count() == 500
    assert not rows.values("record_id").annotate(n=Count("id")).filter(n__gt=1).exists()
    assert sorted(rows.values_list("record_id", flat=True)) == list(range(1, 501))
    assert Claim.objects.filter(run=run, item_key__isnull=False).count() == 500
    assert (
        Claim.objects.filter(run=run, item_key__isnull=False, status=ClaimStatus.SUCCEEDED).count()
        == 500
    )


def test_migrate_records_succeeds_with_exactly_500_rows(cluster):
    cluster.worker()
    run = engine.submit_run(workflow="migrate-records", input=INPUT)

    run = wait_settled(run, cluster)

    assert run.status == RunStatus.SUCCEEDED, cluster.logs()
    assert_migrated_exactly_once(run)
    batches = Step.objects.filter(run=run, parent__isnull=False)
    assert batches.count() == 10
    assert set(batches.values_list("status", flat=True)) == {StepStatus.SUCCEEDED}
    assert run.plan_revision == 2
    finished = Event.objects.filter(run=run, type=events.BATCH_FINISHED)
    assert sum(e.payload["completed"] for e in finished) == 500


# Item 120 is the 20th item of the third batch when one worker takes batches in order.
@pytest.mark.parametrize("point", ["before_claim", "after_claim", "after_effect", "after_commit"])
def test_migrate_records_worker_killed_mid_batch_recovers_exactly_once(cluster, point):
    doomed = cluster.worker(faults=f"{point}:migrate:120")
    cluster.beat()
    run = engine.submit_run(workflow="migrate-records", input=INPUT)

    assert doomed.wait_exit() == -signal.SIGKILL
    # Whatever the point, the dead worker left at most 119 or 120 migrated rows.
    killed_at = TargetRecord.objects.filter(run_id=run.id).count()
    assert killed_at == (120 if point == "after_commit" else 119)
    cluster.worker()
    run = wait_settled(run, cluster)

    assert run.status == RunStatus.SUCCEEDED, cluster.logs()
    assert_migrated_exactly_once(run)
    crashed = Attempt.objects.filter(run=run, status=AttemptStatus.CRASHED)
    assert crashed.count() == 1
    retried = crashed.get().step
    assert retried.key == "migrate[2]"
    assert retried.attempts == 2
    final = Event.objects.get(run=run, type=events.BATCH_FINISHED, step=retried)
    done_before = killed_at - 100
    assert (final.payload["items"], final.payload["completed"], final.payload["skipped"]) == (
        50,
        50 - done_before,
        done_before,
    )


def test_migrate_records_killed_after_list_records_commit_republishes_lost_messages(cluster):
    """Killed between the commit of list_records and the publish of its successors:
    the ten batches are queued in the database with no message anywhere."""
    doomed = cluster.worker(faults="after_commit:list_records")
    cluster.beat()
    run = engine.submit_run(workflow="migrate-records", input=INPUT)
    assert doomed.wait_exit() == -signal.SIGKILL
    assert (
        Step.objects.filter(run=run, parent__isnull=False, status=StepStatus.QUEUED).count() == 10
    )

    cluster.worker()
    run = wait_settled(run, cluster)

    assert run.status == RunStatus.SUCCEEDED, cluster.logs()
    assert_migrated_exactly_once(run)
    assert not Attempt.objects.filter(run=run, status=AttemptStatus.CRASHED).exists()


def test_two_workers_with_every_message_published_twice_apply_each_effect_once(cluster):
    for _ in range(2):
        cluster.worker(RUNS_ALLOW_FAULTS="1", RUNS_DUPLICATE_MESSAGES="1")
    runs = [engine.submit_run(workflow="migrate-records", input=INPUT) for _ in range(2)]

    for run in runs:
        run = wait_settled(run, cluster)
        assert run.status == RunStatus.SUCCEEDED, cluster.logs()
        assert_migrated_exactly_once(run)
        # Each step started exactly once: the duplicate deliveries changed nothing.
        assert set(
            Step.objects.filter(run=run, parent__isnull=False).values_list("attempts", flat=True)
        ) == {1}
    # Both workers really took part.
    workers = set(Attempt.objects.values_list("worker", flat=True))
    assert len(workers) == 2
